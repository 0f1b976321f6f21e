//! Conversions between warts and scamper JSON (what `vtnt convert` calls). Bad records
//! are skipped and listed in the [`ConvertReport`]. Damage that ends the input early (a
//! truncated or broken warts stream, a read error) stops reading but not the conversion:
//! every complete object before it is written and the damage is reported in
//! [`ConvertReport::stopped`]. Only a failure to write the output is an error.
//!
//! Where reading goes on: JSON lines are independent, so a bad line is skipped and the
//! next one read. A warts record whose header is sound but whose body is bad is skipped
//! by its length; a bad header, an absurd length or a truncated record leaves no record
//! boundary to resume from, so reading stops there.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use crate::error::{ConvertError, JsonError, JsonErrorKind, WartsErrorKind};
use crate::{Item, JsonReader, JsonWriter, WartsReader, WartsWriter};

/// A file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// scamper JSON, one object per line.
    Json,
    /// warts, scamper's binary format.
    Warts,
}

impl Format {
    /// The format a file name suggests (`.warts`, `.json`, `.jsonl`).
    pub fn from_path(p: &Path) -> Option<Format> {
        match p.extension()?.to_str()? {
            "warts" => Some(Format::Warts),
            "json" | "jsonl" => Some(Format::Json),
            _ => None,
        }
    }
}

/// What a conversion did.
#[derive(Debug, Default)]
pub struct ConvertReport {
    /// Objects written (cycle starts and stops, traces, pings), as a reader of the
    /// output counts them.
    pub written: usize,
    /// Records skipped, each with the reason and where (offset or line).
    pub skipped: Vec<String>,
    /// The damage that ended reading before the end of the input, with its byte offset
    /// (warts) or line (JSON); every complete object before it was written.
    pub stopped: Option<ConvertError>,
}

/// warts from `input` to scamper JSON on `output`.
pub fn warts_to_json<R: Read, W: Write>(
    input: R,
    output: W,
) -> Result<ConvertReport, ConvertError> {
    copy(warts_items(input), Sink::Json(JsonWriter::new(output)))
}

/// scamper JSON from `input` to warts on `output`.
pub fn json_to_warts<R: BufRead, W: Write>(
    input: R,
    output: W,
) -> Result<ConvertReport, ConvertError> {
    copy(json_items(input), Sink::Warts(WartsWriter::new(output)))
}

/// Converts `input` (format `from`) to `output` (format `to`); the same format copies
/// through the reader and writer, normalising the file.
pub fn convert<R: BufRead, W: Write>(
    input: R,
    from: Format,
    output: W,
    to: Format,
) -> Result<ConvertReport, ConvertError> {
    let sink = match to {
        Format::Json => Sink::Json(JsonWriter::new(output)),
        Format::Warts => Sink::Warts(WartsWriter::new(output)),
    };
    match from {
        Format::Warts => copy(warts_items(input), sink),
        Format::Json => copy(json_items(input), sink),
    }
}

/// One item read, or a record-level error to skip (`Err(Ok(reason))`), or damage that
/// ends the input (`Err(Err(e))`).
type Read1 = Result<Item, Result<String, ConvertError>>;

/// The items of a warts stream: bad records are skipped, a broken stream ends it.
fn warts_items<R: Read>(input: R) -> impl Iterator<Item = Read1> {
    let mut reader = WartsReader::new(input);
    std::iter::from_fn(move || {
        let item = reader.next()?;
        Some(item.map_err(|e| {
            if reader.ended() {
                Err(e.into())
            } else {
                Ok(e.to_string())
            }
        }))
    })
}

/// The items of a JSON stream: bad lines are skipped, an I/O error ends it.
fn json_items<R: BufRead>(input: R) -> impl Iterator<Item = Read1> {
    JsonReader::new(input).map(|item| {
        item.map_err(|e| match e {
            JsonError {
                kind: JsonErrorKind::Io(io),
                line,
            } => Err(JsonError::new(line, JsonErrorKind::Io(io)).into()),
            e => Ok(e.to_string()),
        })
    })
}

/// Where converted items go.
enum Sink<W: Write> {
    Json(JsonWriter<W>),
    Warts(WartsWriter<W>),
}

/// Writes every item of `items` to `sink`, skipping (and reporting) bad records and the
/// items warts cannot encode, until the items end or the input is damaged.
fn copy<W: Write>(
    items: impl Iterator<Item = Read1>,
    mut sink: Sink<W>,
) -> Result<ConvertReport, ConvertError> {
    let mut report = ConvertReport::default();
    for item in items {
        let item = match item {
            Ok(item) => item,
            Err(Ok(reason)) => {
                report.skipped.push(reason);
                continue;
            }
            Err(Err(e)) => {
                report.stopped = Some(e);
                break;
            }
        };
        match &mut sink {
            Sink::Json(out) => {
                out.write_item(&item)?;
                report.written += 1;
            }
            Sink::Warts(out) => {
                let before = out.objects();
                match out.write_item(&item) {
                    Ok(()) => {}
                    Err(e) if matches!(e.kind, WartsErrorKind::Encode { .. }) => {
                        report.skipped.push(e.to_string());
                    }
                    Err(e) => return Err(e.into()),
                }
                // A cycle stop with no cycle open brings the start warts needs.
                report.written += (out.objects() - before) as usize;
            }
        }
    }
    match &mut sink {
        Sink::Json(out) => out.flush()?,
        Sink::Warts(out) => out.flush()?,
    }
    Ok(report)
}

/// Converts the file `input` to the file `output`. The input's format comes from its
/// first bytes (warts magic 0x1205, else JSON), the output's from its extension
/// (`.warts`, `.json`/`.jsonl`).
pub fn convert_paths(input: &Path, output: &Path) -> Result<ConvertReport, ConvertError> {
    let to = Format::from_path(output)
        .ok_or_else(|| ConvertError::UnknownFormat(output.display().to_string()))?;
    let file = |p: &Path, e| ConvertError::File {
        path: p.display().to_string(),
        source: e,
    };
    let mut r = BufReader::new(File::open(input).map_err(|e| file(input, e))?);
    let head = r.fill_buf().map_err(|e| file(input, e))?;
    let from = if head.starts_with(&[0x12, 0x05]) {
        Format::Warts
    } else if head
        .first()
        .is_none_or(|&b| b == b'{' || b.is_ascii_whitespace())
    {
        Format::Json
    } else {
        return Err(ConvertError::UnknownFormat(input.display().to_string()));
    };
    let w = BufWriter::new(File::create(output).map_err(|e| file(output, e))?);
    convert(r, from, w, to)
}
