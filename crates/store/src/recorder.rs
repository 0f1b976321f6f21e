//! [`Recorder`]: a measurement's records into the store while it runs, off the probing
//! thread. Records go over a channel to a thread of the recorder's own, which files them
//! a batch at a time (every [`Recorder::BATCH`] records or [`Recorder::EVERY`]), each batch
//! one short write transaction: the probing loop never waits for the disk, and concurrent
//! runs on one store take turns at its write lock for milliseconds, not for a whole run.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vtnt_formats::{Record, TntFields};

use crate::error::{Result, StoreError};
use crate::{IngestReport, Provenance, Store};

/// Files the records of one job as they come.
pub struct Recorder {
    tx: Sender<(Record, Option<TntFields>)>,
    thread: JoinHandle<Result<IngestReport>>,
    path: String,
}

impl Recorder {
    /// Records a batch holds at most.
    pub const BATCH: usize = 2000;
    /// How long a record waits at most.
    pub const EVERY: Duration = Duration::from_secs(1);

    /// Files the records it is given into `store` under `provenance`'s run, node and job,
    /// whose rows it makes at once (a run that makes no record still has them).
    pub fn start(mut store: Store, provenance: Provenance) -> Result<Recorder> {
        store.ingest(&provenance)?.commit()?;
        let path = store.path().to_string();
        let (tx, rx) = channel::<(Record, Option<TntFields>)>();
        let thread = std::thread::Builder::new()
            .name("vtnt-store".into())
            .spawn(move || {
                let mut report = IngestReport::default();
                let mut open = true;
                while open {
                    let mut batch = Vec::new();
                    let due = Instant::now() + Recorder::EVERY;
                    while batch.len() < Recorder::BATCH {
                        match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                            Ok(r) => batch.push(r),
                            Err(RecvTimeoutError::Timeout) => break,
                            Err(RecvTimeoutError::Disconnected) => {
                                open = false;
                                break;
                            }
                        }
                    }
                    if batch.is_empty() {
                        continue;
                    }
                    let mut ingest = store.ingest(&provenance)?;
                    for (r, tnt) in &batch {
                        ingest.record(None, r, tnt.as_ref())?.map_err(|why| {
                            StoreError::Invalid(format!("a record of this run: {why}"))
                        })?;
                    }
                    let r = ingest.commit()?;
                    report.traces += r.traces;
                    report.pings += r.pings;
                    report.known += r.known;
                }
                Ok(report)
            })
            .map_err(|e| StoreError::Invalid(format!("starting the store's thread: {e}")))?;
        Ok(Recorder { tx, thread, path })
    }

    /// Takes one record (with its `"tnt"` fields). Returns false once the recorder has
    /// failed ([`Recorder::finish`] says why): later records are not stored.
    pub fn record(&self, r: &Record, tnt: Option<TntFields>) -> bool {
        self.tx.send((r.clone(), tnt)).is_ok()
    }

    /// Files what is left; returns what the whole run stored, or why storing failed.
    pub fn finish(self) -> Result<IngestReport> {
        drop(self.tx);
        self.thread
            .join()
            .unwrap_or_else(|_| Err(StoreError::Invalid("the store's thread panicked".into())))
    }

    /// The store it writes to.
    pub fn path(&self) -> &str {
        &self.path
    }
}
