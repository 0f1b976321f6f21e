//! The scamper JSON writer: [`JsonWriter`] prints the lines of [`crate::json_line`] one
//! per line to an `io::Write` (std only).

use std::io::Write;

use vtnt_record::Record;

use crate::error::{JsonError, JsonErrorKind};
use crate::json_line::{cycle_start_line, cycle_stop_line, record_line, Annotate, NoAnnotations};
use crate::{Cycle, Item};

/// Writes scamper JSON lines to `W`.
#[derive(Debug)]
pub struct JsonWriter<W: Write> {
    out: W,
    utc_offset: i64,
}

impl<W: Write> JsonWriter<W> {
    /// A writer that prints `ftime` in UTC.
    pub fn new(out: W) -> JsonWriter<W> {
        JsonWriter { out, utc_offset: 0 }
    }

    /// scamper prints a trace's `start.ftime` in its local time zone; give that zone's
    /// offset from UTC in seconds to match a scamper run outside UTC.
    pub fn with_utc_offset(mut self, seconds: i64) -> JsonWriter<W> {
        self.utc_offset = seconds;
        self
    }

    /// Prints a `cycle-start` object.
    pub fn cycle_start(&mut self, c: &Cycle) -> Result<(), JsonError> {
        self.emit(&cycle_start_line(c))
    }

    /// Prints a `cycle-stop` object.
    pub fn cycle_stop(&mut self, c: &Cycle) -> Result<(), JsonError> {
        self.emit(&cycle_stop_line(c))
    }

    /// Prints a trace or ping object.
    pub fn write(&mut self, r: &Record) -> Result<(), JsonError> {
        self.write_annotated(r, &NoAnnotations)
    }

    /// Prints a trace or ping object with extra fields from `ann`.
    pub fn write_annotated(&mut self, r: &Record, ann: &dyn Annotate) -> Result<(), JsonError> {
        self.emit(&record_line(r, ann, self.utc_offset))
    }

    /// Prints any [`Item`].
    pub fn write_item(&mut self, item: &Item) -> Result<(), JsonError> {
        match item {
            Item::CycleStart(c) => self.cycle_start(c),
            Item::CycleStop(c) => self.cycle_stop(c),
            Item::Record(r) => self.write(r),
            Item::Annotated(r, f) => self.write_annotated(r, f),
        }
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> Result<(), JsonError> {
        self.out
            .flush()
            .map_err(|e| JsonError::new(0, JsonErrorKind::Io(e)))
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn emit(&mut self, line: &str) -> Result<(), JsonError> {
        self.out
            .write_all(line.as_bytes())
            .and_then(|()| self.out.write_all(b"\n"))
            .map_err(|e| JsonError::new(0, JsonErrorKind::Io(e)))
    }
}
