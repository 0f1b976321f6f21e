//! Conversions between warts and scamper JSON (what `vtnt convert` calls). Bad records
//! are skipped and listed in the [`ConvertReport`]; only a failure of the input or
//! output as a whole (I/O, a broken warts stream) stops a conversion.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use crate::error::{ConvertError, JsonError, JsonErrorKind, WartsErrorKind};
use crate::{JsonReader, JsonWriter, WartsReader, WartsWriter};

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
    /// Objects written (cycle starts and stops, traces, pings).
    pub written: usize,
    /// Records skipped, each with the reason and where (offset or line).
    pub skipped: Vec<String>,
}

/// warts from `input` to scamper JSON on `output`.
pub fn warts_to_json<R: Read, W: Write>(
    input: R,
    output: W,
) -> Result<ConvertReport, ConvertError> {
    let mut report = ConvertReport::default();
    let mut out = JsonWriter::new(output);
    for item in WartsReader::new(input) {
        match item {
            Ok(item) => {
                out.write_item(&item)?;
                report.written += 1;
            }
            Err(e) => match e.kind {
                WartsErrorKind::Invalid { .. } | WartsErrorKind::Unsupported { .. }
                    if !is_stream_error(&e) =>
                {
                    report.skipped.push(e.to_string())
                }
                _ => return Err(e.into()),
            },
        }
    }
    out.flush()?;
    Ok(report)
}

/// Stream-level warts errors end a conversion; record-level ones are skipped.
fn is_stream_error(e: &crate::WartsError) -> bool {
    matches!(
        &e.kind,
        WartsErrorKind::Invalid {
            what: "record length",
            ..
        }
    )
}

/// scamper JSON from `input` to warts on `output`.
pub fn json_to_warts<R: BufRead, W: Write>(
    input: R,
    output: W,
) -> Result<ConvertReport, ConvertError> {
    let mut report = ConvertReport::default();
    let mut out = WartsWriter::new(output);
    for item in JsonReader::new(input) {
        match item {
            Ok(item) => match out.write_item(&item) {
                Ok(()) => report.written += 1,
                Err(e) if matches!(e.kind, WartsErrorKind::Encode { .. }) => {
                    report.skipped.push(e.to_string())
                }
                Err(e) => return Err(e.into()),
            },
            Err(JsonError {
                kind: JsonErrorKind::Io(e),
                line,
            }) => return Err(JsonError::new(line, JsonErrorKind::Io(e)).into()),
            Err(e) => report.skipped.push(e.to_string()),
        }
    }
    out.flush()?;
    Ok(report)
}

/// Converts `input` (format `from`) to `output` (format `to`); the same format copies
/// through the reader and writer, normalising the file.
pub fn convert<R: BufRead, W: Write>(
    input: R,
    from: Format,
    output: W,
    to: Format,
) -> Result<ConvertReport, ConvertError> {
    match (from, to) {
        (Format::Warts, Format::Json) => warts_to_json(input, output),
        (Format::Json, Format::Warts) => json_to_warts(input, output),
        (Format::Json, Format::Json) => {
            let mut report = ConvertReport::default();
            let mut out = JsonWriter::new(output);
            for item in JsonReader::new(input) {
                match item {
                    Ok(i) => {
                        out.write_item(&i)?;
                        report.written += 1
                    }
                    Err(JsonError {
                        kind: JsonErrorKind::Io(e),
                        line,
                    }) => return Err(JsonError::new(line, JsonErrorKind::Io(e)).into()),
                    Err(e) => report.skipped.push(e.to_string()),
                }
            }
            out.flush()?;
            Ok(report)
        }
        (Format::Warts, Format::Warts) => {
            let mut report = ConvertReport::default();
            let mut out = WartsWriter::new(output);
            for item in WartsReader::new(input) {
                match item {
                    Ok(i) => {
                        out.write_item(&i)?;
                        report.written += 1
                    }
                    Err(e)
                        if matches!(
                            e.kind,
                            WartsErrorKind::Invalid { .. } | WartsErrorKind::Unsupported { .. }
                        ) && !is_stream_error(&e) =>
                    {
                        report.skipped.push(e.to_string())
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            out.flush()?;
            Ok(report)
        }
    }
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
