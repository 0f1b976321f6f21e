//! [`Recorder`]: a measurement's records into the store while it runs. Records wait in
//! memory and are filed a batch at a time (every [`Recorder::BATCH`] records or
//! [`Recorder::EVERY`]), each batch one short write transaction, so concurrent runs on
//! one store take turns at the write lock for milliseconds, not for a whole run.

use std::time::{Duration, Instant};

use vtnt_formats::{Record, TntFields};

use crate::error::{Result, StoreError};
use crate::{IngestReport, Provenance, Store};

/// Files the records of one job as they come.
pub struct Recorder {
    store: Store,
    provenance: Provenance,
    waiting: Vec<(Record, Option<TntFields>)>,
    last: Instant,
    report: IngestReport,
}

impl Recorder {
    /// Records a batch holds at most.
    pub const BATCH: usize = 2000;
    /// How long a record waits at most (while records keep coming).
    pub const EVERY: Duration = Duration::from_secs(1);

    /// Files the records it is given under `provenance`'s run, node and job.
    pub fn new(store: Store, provenance: Provenance) -> Recorder {
        Recorder {
            store,
            provenance,
            waiting: Vec::new(),
            last: Instant::now(),
            report: IngestReport::default(),
        }
    }

    /// Takes one record (with its `"tnt"` fields); files the batch when it is due.
    pub fn record(&mut self, r: &Record, tnt: Option<TntFields>) -> Result<()> {
        self.waiting.push((r.clone(), tnt));
        if self.waiting.len() >= Recorder::BATCH || self.last.elapsed() >= Recorder::EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Files every waiting record now.
    pub fn flush(&mut self) -> Result<()> {
        self.last = Instant::now();
        if self.waiting.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.waiting);
        let mut ingest = self.store.ingest(&self.provenance)?;
        for (r, tnt) in &batch {
            ingest
                .record(None, r, tnt.as_ref())?
                .map_err(|why| StoreError::Invalid(format!("a record of this run: {why}")))?;
        }
        let r = ingest.commit()?;
        self.report.traces += r.traces;
        self.report.pings += r.pings;
        self.report.known += r.known;
        Ok(())
    }

    /// Files what is left; returns what the whole run stored. A run that made no record
    /// still gets its run and job rows.
    pub fn finish(mut self) -> Result<IngestReport> {
        self.flush()?;
        if self.report == IngestReport::default() {
            self.store.ingest(&self.provenance)?.commit()?;
        }
        Ok(self.report)
    }

    /// The store it writes to.
    pub fn path(&self) -> &str {
        self.store.path()
    }
}
