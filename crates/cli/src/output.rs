//! Where results go: stdout or a file, in scamper JSON, warts or text; and, as each record
//! is written, a [`Sink`] (the results store, [`crate::store`]).
//!
//! A file is only ever a regular file: `-o` refuses a path holding anything else (a
//! symbolic link, directory, FIFO, device or socket) before the run probes, and never
//! replaces it. Results are written to a new hidden file beside the path (created with
//! `O_EXCL`, so it cannot be, or follow, a link someone planted) and renamed over the path
//! when the output is finished; a run that fails, or is killed by a signal
//! ([`crate::interrupt`]), removes it and leaves the old file alone.
//!
//! A file replaced keeps what protected it: the new file gets the old one's owner, group
//! and permission bits (not set-user-ID, set-group-ID or sticky) before a byte of results
//! is in it, and a path vtnt cannot give them is refused before the run probes. A file
//! with several hard links is refused too: renaming a new file over one name would leave
//! the others holding the old results.

use std::fs::{File, FileType, OpenOptions, Permissions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use vtnt_formats::{Annotate, Cycle, JsonWriter, NoAnnotations, Record, TntFields, WartsWriter};

use vtnt_job::Format;

use crate::{interrupt, text};

/// Fails unless results can go to `path` (stdout when `None`) in `format`: see
/// [`check_destination`]; binary warts never goes to a terminal.
pub fn check(path: Option<&Path>, format: Format) -> anyhow::Result<()> {
    match path {
        Some(p) => check_destination(p),
        None if format == Format::Warts && io::IsTerminal::is_terminal(&io::stdout()) => {
            bail!("-O warts writes binary data: give an output file with -o")
        }
        None => Ok(()),
    }
}

/// Fails unless `path` names a regular file with one link or nothing in an existing
/// directory: the error names the path and what is there.
pub fn check_destination(path: &Path) -> anyhow::Result<()> {
    if path.file_name().is_none() {
        bail!("output path {}: names no file", path.display());
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() && m.nlink() > 1 => bail!(
            "output path {} has {} hard links: vtnt writes a new file and renames it over the \
             path, which would leave the other names with the old contents (remove the other \
             links or choose another path)",
            path.display(),
            m.nlink()
        ),
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => bail!(
            "output path {} is {}: vtnt writes only regular files and replaces nothing else \
             (remove it or choose another path)",
            path.display(),
            kind(m.file_type())
        ),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            let dir = directory_of(path);
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => Ok(()),
                Ok(_) => bail!(
                    "output path {}: {} is not a directory",
                    path.display(),
                    dir.display()
                ),
                Err(e) if e.kind() == io::ErrorKind::NotFound => bail!(
                    "output path {}: directory {} does not exist",
                    path.display(),
                    dir.display()
                ),
                Err(e) => bail!(
                    "output path {}: directory {}: {e}",
                    path.display(),
                    dir.display()
                ),
            }
        }
        Err(e) => bail!("output path {}: {e}", path.display()),
    }
}

/// What a file type is, in words, for an error message.
fn kind(t: FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The directory a path's file is in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A file being written under a temporary name.
pub struct AtomicFile {
    tmp: PathBuf,
    dst: PathBuf,
    /// The temporary file (for its owner and mode).
    file: File,
    done: bool,
}

impl AtomicFile {
    /// Checks `dst` ([`check_destination`]) and creates a new, empty temporary file
    /// beside it, with the owner and mode of the file at `dst` if there is one (fails if
    /// it cannot have them).
    pub fn create(dst: &Path) -> anyhow::Result<(AtomicFile, File)> {
        check_destination(dst)?;
        let name = dst.file_name().unwrap_or_default().to_string_lossy();
        let pid = std::process::id();
        // A name left over from an earlier process with our pid is skipped, not reused.
        for n in 0..100 {
            let tmp = dst.with_file_name(format!(".{name}.tmp-{pid}-{n}"));
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(f) => {
                    interrupt::temporary(&tmp);
                    let a = AtomicFile {
                        tmp,
                        dst: dst.to_path_buf(),
                        file: f.try_clone().context("duplicating a file descriptor")?,
                        done: false,
                    };
                    a.keep_owner_and_mode()?;
                    return Ok((a, f));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!(
                            "output path {}: creating a file in {}",
                            dst.display(),
                            directory_of(dst).display()
                        )
                    })
                }
            }
        }
        bail!(
            "output path {}: 100 temporary names beside it are taken (.{name}.tmp-{pid}-*)",
            dst.display()
        )
    }

    /// Gives the temporary file the owner, group and permission bits of the regular file
    /// at the destination, if there is one.
    fn keep_owner_and_mode(&self) -> anyhow::Result<()> {
        let old = match std::fs::symlink_metadata(&self.dst) {
            Ok(m) if m.is_file() => m,
            _ => return Ok(()),
        };
        let new = self.file.metadata().context("reading a new file's owner")?;
        if (new.uid(), new.gid()) != (old.uid(), old.gid()) {
            std::os::unix::fs::fchown(&self.file, Some(old.uid()), Some(old.gid())).map_err(
                |e| {
                    anyhow::anyhow!(
                        "output path {} belongs to user {} and group {}, which vtnt cannot \
                         give the file that replaces it ({e}); it replaces a file only with \
                         its owner kept (remove it or choose another path)",
                        self.dst.display(),
                        old.uid(),
                        old.gid()
                    )
                },
            )?;
        }
        self.file
            .set_permissions(Permissions::from_mode(old.mode() & 0o777))
            .with_context(|| {
                format!(
                    "output path {}: giving the new file the mode {:o} of the old one",
                    self.dst.display(),
                    old.mode() & 0o777
                )
            })
    }

    /// Renames the written file over the destination, with the destination's owner and
    /// mode as they are now, unless the destination turned into something that is not a
    /// regular file with one link meanwhile, or its owner cannot be kept (the results
    /// then stay where they were written, and the error says where).
    pub fn commit(mut self) -> anyhow::Result<()> {
        let moved = check_destination(&self.dst)
            .and_then(|()| self.keep_owner_and_mode())
            .and_then(|()| {
                interrupt::settle(&self.tmp, || std::fs::rename(&self.tmp, &self.dst)).with_context(
                    || format!("renaming {} to {}", self.tmp.display(), self.dst.display()),
                )
            });
        self.done = true;
        if let Err(e) = moved {
            // measured results are never removed: they stay where they are
            interrupt::settle(&self.tmp, || ());
            return Err(e.context(format!("results left in {}", self.tmp.display())));
        }
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.done {
            interrupt::settle(&self.tmp, || std::fs::remove_file(&self.tmp)).ok();
        }
    }
}

enum Writer {
    Json(JsonWriter<Box<dyn Write>>),
    Warts(WartsWriter<Box<dyn Write>>),
    Text(Box<dyn Write>),
}

/// Where else each record goes as it is written.
pub trait Sink {
    /// Takes one record with its annotations.
    fn record(&mut self, r: &Record, ann: &dyn Annotate);
    /// Files what is left and says on stderr what could not be stored; true when
    /// everything asked for was stored.
    fn finish(self: Box<Self>) -> bool;
}

/// Writes a cycle of records in the chosen format.
pub struct Output {
    writer: Writer,
    file: Option<AtomicFile>,
    cycle: Cycle,
    records: u64,
    sink: Option<Box<dyn Sink>>,
}

/// What an output wrote.
pub struct Written {
    pub records: u64,
    /// The sink failed to store what it was asked to.
    pub unstored: bool,
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// Seconds since the UNIX epoch.
pub fn unix_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

impl Output {
    /// Opens `path` (stdout when `None`; checked as [`check`] does) and writes the cycle
    /// start.
    pub fn open(path: Option<&Path>, format: Format) -> anyhow::Result<Output> {
        check(path, format)?;
        let (file, sink): (Option<AtomicFile>, Box<dyn Write>) = match path {
            Some(p) => {
                let (a, f) = AtomicFile::create(p)?;
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
            vtnt: Some(crate::VERSION.into()),
            ..Cycle::default()
        };
        let mut out = Output {
            writer,
            file,
            cycle,
            records: 0,
            sink: None,
        };
        match &mut out.writer {
            Writer::Json(w) => w.cycle_start(&out.cycle).map_err(io_err)?,
            Writer::Warts(w) => w.cycle_start(&out.cycle).map_err(io_err)?,
            Writer::Text(_) => {}
        }
        Ok(out)
    }

    /// Also hands every record to `sink` as it is written.
    pub fn with_sink(mut self, sink: Option<Box<dyn Sink>>) -> Output {
        self.sink = sink;
        self
    }

    /// Writes one record.
    pub fn record(&mut self, r: &Record) -> io::Result<()> {
        self.annotated(r, &NoAnnotations, None)
    }

    /// Writes one record with extra JSON fields (in warts its `"tnt"` fields, in a list of
    /// its own: [`TntFields`]), or the given text in text mode.
    pub fn annotated(
        &mut self,
        r: &Record,
        ann: &dyn Annotate,
        text: Option<&str>,
    ) -> io::Result<()> {
        match &mut self.writer {
            Writer::Json(w) => {
                w.write_annotated(r, ann).map_err(io_err)?;
                w.flush().map_err(io_err)?;
            }
            Writer::Warts(w) => match TntFields::from_annotate(r, ann) {
                Some(f) => w.write_annotated(r, &f).map_err(io_err)?,
                None => w.write(r).map_err(io_err)?,
            },
            Writer::Text(w) => {
                match text {
                    Some(t) => w.write_all(t.as_bytes())?,
                    None => w.write_all(text::render(r).as_bytes())?,
                }
                w.flush()?;
            }
        }
        self.records += 1;
        if let Some(s) = &mut self.sink {
            s.record(r, ann);
        }
        Ok(())
    }

    /// Writes the cycle stop, flushes, and moves the file into place (then finishes the
    /// sink); returns the number of records written.
    pub fn finish(mut self) -> anyhow::Result<Written> {
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
        let unstored = self.sink.take().is_some_and(|s| !s.finish());
        Ok(Written {
            records: self.records,
            unstored,
        })
    }
}

/// This host's name, for a cycle's `hostname`.
pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vtnt-output-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_link_planted_at_the_temporary_name_is_neither_followed_nor_replaced() {
        let dir = scratch("planted");
        let dst = dir.join("out.json");
        let victim = dir.join("victim");
        let planted = dir.join(format!(".out.json.tmp-{}-0", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let (file, mut f) = AtomicFile::create(&dst).unwrap();
        f.write_all(b"results\n").unwrap();
        drop(f);
        file.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&dst).unwrap(), "results\n");
        assert!(!victim.exists());
        assert!(std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_by_name() {
        let dir = scratch("kinds");
        std::os::unix::fs::symlink(dir.join("nothing"), dir.join("link")).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
        std::fs::write(dir.join("file"), "old").unwrap();
        for (name, kind) in [
            ("link", "a symbolic link"),
            ("sock", "a socket"),
            (".", "a directory"),
            ("file/x", "is not a directory"),
            ("none/x", "does not exist"),
        ] {
            let p = dir.join(name);
            let e = check_destination(&p).unwrap_err().to_string();
            assert!(
                e.contains(kind) && e.contains(&*p.to_string_lossy()),
                "{name}: {e}"
            );
            assert!(AtomicFile::create(&p).is_err());
        }
        check_destination(&dir.join("file")).unwrap();
        check_destination(&dir.join("new")).unwrap();
        let (a, _) = AtomicFile::create(&dir.join("file")).unwrap();
        drop(a);
        assert_eq!(std::fs::read_to_string(dir.join("file")).unwrap(), "old");
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["file", "link", "sock"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
