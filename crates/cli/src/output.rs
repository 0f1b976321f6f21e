//! Where results go: stdout or a file that appears only when the run succeeded (written
//! to a temporary name beside it and renamed at the end, removed on failure), in scamper
//! JSON, warts or text.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use vtnt_formats::{Annotate, Cycle, JsonWriter, NoAnnotations, Record, WartsWriter};

use crate::text;

/// Output format (`-O`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// scamper JSON, one object per line (what sc_warts2json prints).
    Json,
    /// scamper's binary warts.
    Warts,
    /// Human-readable, like scamper's text output.
    Text,
}

/// A file being written under a temporary name.
pub struct AtomicFile {
    tmp: PathBuf,
    dst: PathBuf,
    done: bool,
}

impl AtomicFile {
    pub fn create(dst: &Path) -> io::Result<(AtomicFile, File)> {
        let name = dst.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "output path has no file name")
        })?;
        let tmp = dst.with_file_name(format!(
            ".{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let f = File::create(&tmp)?;
        Ok((
            AtomicFile {
                tmp,
                dst: dst.to_path_buf(),
                done: false,
            },
            f,
        ))
    }
    pub fn commit(mut self) -> io::Result<()> {
        std::fs::rename(&self.tmp, &self.dst)?;
        self.done = true;
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

enum Writer {
    Json(JsonWriter<Box<dyn Write>>),
    Warts(WartsWriter<Box<dyn Write>>),
    Text(Box<dyn Write>),
}

/// Writes a cycle of records in the chosen format.
pub struct Output {
    writer: Writer,
    file: Option<AtomicFile>,
    cycle: Cycle,
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn unix_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

impl Output {
    /// Opens `path` (stdout when `None`) and writes the cycle start.
    pub fn open(path: Option<&Path>, format: Format) -> anyhow::Result<Output> {
        if format == Format::Warts && path.is_none() && io::IsTerminal::is_terminal(&io::stdout()) {
            anyhow::bail!("-O warts writes binary data: give an output file with -o");
        }
        let (file, sink): (Option<AtomicFile>, Box<dyn Write>) = match path {
            Some(p) => {
                let (a, f) = AtomicFile::create(p)
                    .map_err(|e| anyhow::anyhow!("creating output file {}: {e}", p.display()))?;
                (Some(a), Box::new(BufWriter::new(f)))
            }
            None => (None, Box::new(BufWriter::new(io::stdout()))),
        };
        let writer = match format {
            Format::Json => Writer::Json(JsonWriter::new(sink)),
            Format::Warts => Writer::Warts(WartsWriter::new(sink)),
            Format::Text => Writer::Text(sink),
        };
        let cycle = Cycle {
            list_name: "default".into(),
            hostname: hostname(),
            start_time: unix_now(),
            ..Cycle::default()
        };
        let mut out = Output {
            writer,
            file,
            cycle,
        };
        match &mut out.writer {
            Writer::Json(w) => w.cycle_start(&out.cycle).map_err(io_err)?,
            Writer::Warts(w) => w.cycle_start(&out.cycle).map_err(io_err)?,
            Writer::Text(_) => {}
        }
        Ok(out)
    }

    /// Writes one record.
    pub fn record(&mut self, r: &Record) -> io::Result<()> {
        self.annotated(r, &NoAnnotations, None)
    }

    /// Writes one record with extra JSON fields, or the given text in text mode.
    pub fn annotated(
        &mut self,
        r: &Record,
        ann: &dyn Annotate,
        text: Option<&str>,
    ) -> io::Result<()> {
        match &mut self.writer {
            Writer::Json(w) => {
                w.write_annotated(r, ann).map_err(io_err)?;
                w.flush().map_err(io_err)
            }
            Writer::Warts(w) => w.write(r).map_err(io_err),
            Writer::Text(w) => {
                match text {
                    Some(t) => w.write_all(t.as_bytes())?,
                    None => w.write_all(text::render(r).as_bytes())?,
                }
                w.flush()
            }
        }
    }

    /// Writes the cycle stop, flushes, and moves the file into place.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.cycle.stop_time = unix_now();
        match &mut self.writer {
            Writer::Json(w) => {
                w.cycle_stop(&self.cycle).map_err(io_err)?;
                w.flush().map_err(io_err)?;
            }
            Writer::Warts(w) => {
                w.cycle_stop(&self.cycle).map_err(io_err)?;
                w.flush().map_err(io_err)?;
            }
            Writer::Text(w) => w.flush()?,
        }
        drop(self.writer);
        if let Some(f) = self.file.take() {
            f.commit()?;
        }
        Ok(())
    }
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}
