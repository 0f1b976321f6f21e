//! `vtnt import FILE...`: scamper files into the store, warts or JSON (told apart by
//! their first bytes), either gzip-compressed. Each file is one transaction: a corrupt
//! file stores nothing, and the error names the file and the byte offset (warts; of the
//! decompressed stream for `.gz`) or line (JSON) of the damage. Records that are sound
//! but that vTNT's records cannot represent (scamper's classic UDP traces, say) are
//! skipped and listed with their position, as `vtnt convert` skips them.
//!
//! A file's run is `--run` when given (so several files make one campaign), else one run
//! per file content (its SHA-256): importing a file again stores nothing new and adds no
//! run. Its job is the file's content under that run; its node is `--node`, else the
//! hostname of the file's first cycle, else `unknown`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use sha2::{Digest, Sha256};
use vtnt_formats::{Item, JsonErrorKind, JsonReader, WartsErrorKind, WartsReader};

use crate::error::{Position, Result, StoreError};
use crate::{IngestReport, JobInfo, NodeInfo, Provenance, RunInfo, Source, Store, Tenant};

/// How files are filed.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub tenant: Tenant,
    /// The vantage point that measured (`None`: the file's first cycle's hostname).
    pub node: Option<NodeInfo>,
    /// The run (campaign) every file joins (`None`: one run per file).
    pub run: Option<String>,
}

/// What importing one file did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileReport {
    pub file: String,
    /// `warts` or `json`, with `.gz` when compressed.
    pub format: String,
    /// The run's key.
    pub run: String,
    pub stored: IngestReport,
    /// Records skipped as vTNT cannot represent them, each with its position and why.
    pub unsupported: Vec<String>,
}

/// The SHA-256 of a file, in hex.
pub fn file_sha256(path: &Path) -> Result<String> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(io)?;
    Ok(hex(&h.finalize()))
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One object read, or the damage that makes the file corrupt, or a record to skip.
enum Read1 {
    Item(Box<Item>, Position),
    Unsupported(String),
    Corrupt(Position, String),
}

/// Imports one file (see the module's text); the whole file or nothing.
pub fn import_file(store: &mut Store, path: &Path, o: &ImportOptions) -> Result<FileReport> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let sha = file_sha256(path)?;
    let mut raw = BufReader::new(File::open(path).map_err(io)?);
    let gz = raw.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
    let mut input: Box<dyn BufRead> = if gz {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(raw)))
    } else {
        Box::new(raw)
    };
    let head = match input.fill_buf() {
        Ok(h) => h,
        Err(e) => {
            return Err(corrupt(path, Position::Byte(0), format!("gzip: {e}")));
        }
    };
    let warts = head.starts_with(&[0x12, 0x05]);
    if !warts
        && head
            .first()
            .is_some_and(|&b| b != b'{' && !b.is_ascii_whitespace())
    {
        return Err(corrupt(
            path,
            Position::Byte(0),
            "neither warts (magic 0x1205) nor scamper JSON (`{`)".into(),
        ));
    }
    let mut items: Box<dyn Iterator<Item = Read1>> = if warts {
        Box::new(warts_items(input))
    } else {
        Box::new(json_items(input))
    };
    let file = path.display().to_string();
    let name = path
        .file_name()
        .map_or(file.clone(), |n| n.to_string_lossy().into_owned());
    let format = format!(
        "{}{}",
        if warts { "warts" } else { "json" },
        if gz { ".gz" } else { "" }
    );
    // The first object, to name the node after its cycle when no node is given.
    let mut first = items.next();
    let hostname = match &first {
        Some(Read1::Item(item, _)) => match &**item {
            Item::CycleStart(c) => c.hostname.clone(),
            _ => None,
        },
        _ => None,
    };
    let node = o.node.clone().unwrap_or_else(|| NodeInfo {
        name: hostname.unwrap_or_else(|| "unknown".into()),
        ..NodeInfo::default()
    });
    let run_key = o
        .run
        .clone()
        .unwrap_or_else(|| format!("file-{}", &sha[..16]));
    let p = Provenance {
        tenant: o.tenant.clone(),
        run: RunInfo {
            key: run_key.clone(),
            name: o.run.clone().unwrap_or(name),
            source: Source::Import,
            command: Some(format!("vtnt import {file}")),
        },
        node,
        job: JobInfo {
            key: format!("{run_key}/{}", &sha[..16]),
            file: Some(file.clone()),
            ..JobInfo::default()
        },
    };
    let mut ingest = store.ingest(&p)?;
    let mut unsupported = Vec::new();
    while let Some(r) = first.take().or_else(|| items.next()) {
        match r {
            Read1::Item(item, at) => {
                if let Err(why) = ingest.item(None, &item)? {
                    return Err(corrupt(path, at, why));
                }
            }
            Read1::Unsupported(why) => unsupported.push(why),
            Read1::Corrupt(at, why) => return Err(corrupt(path, at, why)),
        }
    }
    let stored = ingest.commit()?;
    Ok(FileReport {
        file,
        format,
        run: run_key,
        stored,
        unsupported,
    })
}

fn corrupt(path: &Path, at: Position, why: String) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        at,
        why: format!("{why}; nothing of the file was stored"),
    }
}

fn warts_items(input: impl Read) -> impl Iterator<Item = Read1> {
    let mut rd = WartsReader::new(input);
    std::iter::from_fn(move || {
        let at = Position::Byte(rd.offset());
        Some(match rd.next()? {
            Ok(item) => Read1::Item(Box::new(item), at),
            Err(e) if matches!(e.kind, WartsErrorKind::Unsupported { .. }) && !rd.ended() => {
                Read1::Unsupported(e.to_string())
            }
            Err(e) => Read1::Corrupt(Position::Byte(e.offset), e.kind.to_string()),
        })
    })
}

fn json_items(input: impl BufRead) -> impl Iterator<Item = Read1> {
    let mut rd = JsonReader::new(input);
    std::iter::from_fn(move || {
        Some(match rd.next()? {
            Ok(item) => Read1::Item(Box::new(item), Position::Line(rd.line())),
            Err(e) if matches!(e.kind, JsonErrorKind::Unsupported { .. }) => {
                Read1::Unsupported(e.to_string())
            }
            Err(e) => Read1::Corrupt(Position::Line(e.line), e.kind.to_string()),
        })
    })
}
