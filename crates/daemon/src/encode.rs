//! A session's results as the objects of its format: each record (and each cycle
//! object) encoded by `vtnt-formats`' warts or JSON writer, split into its objects, each
//! object's body ready for a `DATA` block (warts uuencoded, JSON one line).

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;

use vtnt_formats::{Annotate, Cycle, JsonWriter, Record, WartsWriter};

use crate::uuencode;

/// How results are sent (`attach format ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Each object uuencoded warts (scamper's default).
    Warts,
    /// Each object one scamper-JSON line.
    Json,
}

/// A `Write` whose bytes the encoder takes out after each object.
#[derive(Clone, Default)]
struct Sink(Rc<RefCell<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

enum Writer {
    Warts(WartsWriter<Sink>),
    Json(JsonWriter<Sink>),
}

/// One attached session's writer.
pub struct Encoder {
    format: Format,
    sink: Sink,
    writer: Writer,
}

impl Encoder {
    pub fn new(format: Format) -> Encoder {
        let sink = Sink::default();
        let writer = match format {
            Format::Warts => Writer::Warts(WartsWriter::new(sink.clone())),
            Format::Json => Writer::Json(JsonWriter::new(sink.clone())),
        };
        Encoder {
            format,
            sink,
            writer,
        }
    }

    /// The cycle's header objects (warts: its list and the cycle start).
    pub fn cycle_start(&mut self, c: &Cycle) -> Result<Vec<Vec<u8>>, String> {
        let r = match &mut self.writer {
            Writer::Warts(w) => w.cycle_start(c).map_err(|e| e.to_string()),
            Writer::Json(w) => w.cycle_start(c).map_err(|e| e.to_string()),
        };
        self.objects(r)
    }

    /// The cycle stop.
    pub fn cycle_stop(&mut self, c: &Cycle) -> Result<Vec<Vec<u8>>, String> {
        let r = match &mut self.writer {
            Writer::Warts(w) => w.cycle_stop(c).map_err(|e| e.to_string()),
            Writer::Json(w) => w.cycle_stop(c).map_err(|e| e.to_string()),
        };
        self.objects(r)
    }

    /// A record's objects (the record last). With JSON, `ann` adds its fields (TNT's
    /// annotations); with warts they travel in a list object before the record.
    pub fn record(&mut self, record: &Record, ann: &dyn Annotate) -> Result<Vec<Vec<u8>>, String> {
        let r = match &mut self.writer {
            Writer::Warts(w) => match vtnt_formats::TntFields::from_annotate(record, ann) {
                Some(f) => w.write_annotated(record, &f),
                None => w.write(record),
            }
            .map_err(|e| e.to_string()),
            Writer::Json(w) => w.write_annotated(record, ann).map_err(|e| e.to_string()),
        };
        self.objects(r)
    }

    /// The bodies of the objects the writer just wrote (nothing half-written comes out
    /// of an error).
    fn objects(&mut self, written: Result<(), String>) -> Result<Vec<Vec<u8>>, String> {
        let bytes = std::mem::take(&mut *self.sink.0.borrow_mut());
        written?;
        Ok(split(self.format, &bytes)
            .into_iter()
            .map(|o| match self.format {
                Format::Warts => uuencode::encode(o).into_bytes(),
                Format::Json => o.to_vec(),
            })
            .collect())
    }
}

/// Splits what a writer wrote into its objects: warts objects by their headers' length
/// (8 bytes: magic, type, body length), JSON by lines (each with its newline).
fn split(format: Format, bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = match format {
            Format::Warts if rest.len() >= 8 => {
                let body = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
                (8 + body).min(rest.len())
            }
            Format::Warts => rest.len(),
            Format::Json => rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |i| i + 1),
        };
        let (object, after) = rest.split_at(len);
        out.push(object);
        rest = after;
    }
    out
}
