//! `vtnt convert`: warts to scamper JSON and back. The input's format comes from its first
//! bytes, the output's from `-O` or its extension. Bad records are reported with their
//! byte offset or line and skipped, the rest converted; damage that ends the input early
//! (a truncated warts file) is reported with its offset after every complete object
//! before it has been written. Either way the exit code is 2. The output file appears
//! only when something was converted and all of it was written (temporary name, renamed
//! at the end); an input with nothing in it is an error (exit 1, no output). A signal
//! (SIGINT, SIGTERM, SIGHUP, SIGPIPE) ends a conversion at once, its temporary file
//! removed (exit 128 + the signal).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use vtnt_formats::Format;
use vtnt_job::say;

use crate::interrupt;
use crate::output::AtomicFile;

/// `vtnt convert`.
#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// Input file (warts or scamper JSON; `-` for stdin).
    pub input: PathBuf,
    /// Output file (`-` for stdout).
    pub output: PathBuf,
    /// Output format (default: from the output's extension, .warts or .json).
    #[arg(short = 'O', long = "format", value_parser = ["json", "warts"])]
    pub format: Option<String>,
}

pub fn run(a: ConvertArgs) -> anyhow::Result<ExitCode> {
    let to = match a.format.as_deref() {
        Some("warts") => Format::Warts,
        Some(_) => Format::Json,
        None if a.output.as_os_str() == "-" => Format::Json,
        None => Format::from_path(&a.output).with_context(|| {
            format!(
                "cannot tell the output format of {} (use -O json|warts)",
                a.output.display()
            )
        })?,
    };
    interrupt::exit_on_signal()?;
    let mut input: Box<dyn BufRead> = if a.input.as_os_str() == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(&a.input)
            .with_context(|| format!("opening {}", a.input.display()))?;
        Box::new(BufReader::new(f))
    };
    let head = input
        .fill_buf()
        .with_context(|| format!("reading {}", a.input.display()))?;
    if head.is_empty() {
        anyhow::bail!("{}: empty: nothing to convert", a.input.display());
    }
    let from = if head.starts_with(&[0x12, 0x05]) {
        Format::Warts
    } else {
        Format::Json
    };
    let (file, out): (Option<AtomicFile>, Box<dyn Write>) = if a.output.as_os_str() == "-" {
        (None, Box::new(BufWriter::new(std::io::stdout())))
    } else {
        let (f, w) = AtomicFile::create(&a.output)
            .with_context(|| format!("creating {}", a.output.display()))?;
        (Some(f), Box::new(BufWriter::new(w)))
    };
    let report = vtnt_formats::convert(input, from, out, to)
        .with_context(|| format!("converting {}", a.input.display()))?;
    for s in &report.skipped {
        say!("vtnt: skipped {s}");
    }
    if let Some(e) = &report.stopped {
        say!(
            "vtnt: {} is damaged, reading stopped after {} objects: {e}",
            a.input.display(),
            report.written
        );
    }
    let partial = !report.skipped.is_empty() || report.stopped.is_some();
    if report.written == 0 && partial {
        anyhow::bail!("{}: nothing could be converted", a.input.display());
    }
    if report.written == 0 {
        anyhow::bail!("{}: holds no object: nothing to convert", a.input.display());
    }
    if let Some(f) = file {
        f.commit()
            .with_context(|| format!("moving the output into {}", a.output.display()))?;
    }
    say!("vtnt: wrote {} objects", report.written);
    Ok(if partial {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
