//! The results store on the command line (`vtnt-store`, docs/store.md): `vtnt import` and
//! `vtnt export`, and the sink that files `vtnt trace|ping|tnt`'s records as they are
//! written ([`sink`]). `vtnt query` is [`crate::query`].
//!
//! Storing by default, carefully: a run files its records in the default store unless
//! told `--no-store` (or `VTNT_STORE=off`), but the store never costs the measurement.
//! The default store that cannot be opened is a warning before the run, and the run
//! goes on unstored; one that fails during the run is a warning at its end. Only a
//! store named with `--store` must work: it is opened before any probe (an error stops
//! the run there), and a failure to file into it makes the run exit 2 after its output
//! was written in full.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use vtnt_formats::{Annotate, Record, TntFields};
use vtnt_job::Common;
use vtnt_store::import::{import_file, ImportOptions};
use vtnt_store::{
    export::ExportFormat, JobInfo, NodeInfo, Provenance, Recorder, RunInfo, Source, Store, Tenant,
};

use crate::output::{AtomicFile, Sink};

/// Which store, and whose rows: what every store command takes.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// The store (default: $VTNT_STORE, else /var/lib/vtnt/results.sqlite as root and
    /// $XDG_DATA_HOME/vtnt/results.sqlite otherwise).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Whose rows: the command line's own are `local`'s; a fleet's are its tenants'.
    #[arg(long, default_value = Tenant::LOCAL)]
    pub tenant: String,
}

impl StoreArgs {
    /// The store's path (the default one when not given).
    pub fn path(&self) -> anyhow::Result<PathBuf> {
        match &self.store {
            Some(p) => Ok(p.clone()),
            None => vtnt_store::default_path().context(
                "no default store: VTNT_STORE is off, or no home directory is known (give --store PATH)",
            ),
        }
    }

    /// Opens the store to write, making its directory when it is the default one.
    pub fn open(&self) -> anyhow::Result<(Store, Tenant)> {
        let path = self.path()?;
        if self.store.is_none() {
            make_dir(&path)?;
        }
        Ok((Store::open(&path)?, Tenant::new(&self.tenant)?))
    }

    /// Opens an existing store to read.
    pub fn read(&self) -> anyhow::Result<(Store, Tenant)> {
        Ok((
            Store::open_existing(&self.path()?)?,
            Tenant::new(&self.tenant)?,
        ))
    }
}

/// Makes the directory of the default store.
fn make_dir(path: &Path) -> anyhow::Result<()> {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => std::fs::create_dir_all(d)
            .with_context(|| format!("making the store's directory {}", d.display())),
        _ => Ok(()),
    }
}

/// A run's records into the store, off the probing thread.
struct StoreSink {
    recorder: Recorder,
    /// Named with `--store`: a failure makes the run exit 2.
    named: bool,
}

impl Sink for StoreSink {
    fn record(&mut self, r: &Record, ann: &dyn Annotate) {
        // a failed recorder says why at the end
        self.recorder.record(r, TntFields::from_annotate(r, ann));
    }

    fn finish(self: Box<Self>) -> bool {
        let path = self.recorder.path().to_string();
        match self.recorder.finish() {
            Ok(_) => true,
            Err(e) => {
                eprintln!(
                    "vtnt: warning: results store {path}: {e}; the results written above are \
                     not all stored (`vtnt import` files them later)"
                );
                !self.named
            }
        }
    }
}

/// The store a `vtnt trace|ping|tnt` run (`kind`) files its records in, per its
/// `--store` and `--no-store` (see the module's text).
pub fn sink(c: &Common, kind: &str) -> anyhow::Result<Option<Box<dyn Sink>>> {
    if c.no_store {
        return Ok(None);
    }
    let named = c.store.is_some();
    let Some(path) = c.store.clone().or_else(vtnt_store::default_path) else {
        return Ok(None);
    };
    let opened = (|| {
        if !named {
            make_dir(&path)?;
        }
        let store = Store::open(&path)?;
        Ok::<_, anyhow::Error>(Recorder::start(store, provenance(kind))?)
    })();
    match opened {
        Ok(recorder) => Ok(Some(Box::new(StoreSink { recorder, named }))),
        Err(e) if named => Err(e.context(format!("--store {}", path.display()))),
        Err(e) => {
            eprintln!(
                "vtnt: warning: results store {}: {e:#}; this run's results are not stored \
                 (its output is written as usual; --no-store or VTNT_STORE=off says nothing)",
                path.display()
            );
            Ok(None)
        }
    }
}

/// The run, node and job of this command: one run per invocation, this host's name as
/// the node, the build that measured.
fn provenance(kind: &str) -> Provenance {
    let host = crate::output::hostname().unwrap_or_else(|| "localhost".into());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let key = format!("cli-{host}-{}-{now}", std::process::id());
    let command: Vec<String> = std::env::args().collect();
    Provenance {
        tenant: Tenant::local(),
        run: RunInfo {
            key: key.clone(),
            name: format!("{kind} on {host}"),
            source: Source::Cli,
            command: Some(command.join(" ")),
        },
        node: NodeInfo {
            name: host,
            ..NodeInfo::default()
        },
        job: JobInfo {
            key,
            kind: Some(kind.into()),
            vtnt: Some(crate::VERSION.into()),
            ..JobInfo::default()
        },
    }
}

/// `vtnt import`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The vantage point that measured (default: the hostname of the file's first
    /// cycle, else `unknown`).
    #[arg(long)]
    pub node: Option<String>,
    /// Its location, kept with the node.
    #[arg(long, requires = "node")]
    pub location: Option<String>,
    /// The address its probes left its network with, kept with the node.
    #[arg(long, requires = "node")]
    pub public_addr: Option<std::net::IpAddr>,
    /// The run (campaign) every file joins, by key (default: a run per file content, so
    /// importing a file twice adds nothing).
    #[arg(long)]
    pub run: Option<String>,
    /// A prefix-to-AS file (CAIDA's pfx2as, gzip allowed) to load first: it replaces
    /// the store's, and every address is annotated with its AS again.
    #[arg(long, value_name = "FILE")]
    pub pfx2as: Option<PathBuf>,
    /// Print what each file did as a JSON line.
    #[arg(long)]
    pub json: bool,
    /// scamper files: warts or JSON (told by their first bytes), gzip allowed.
    #[arg(value_name = "FILE", required_unless_present = "pfx2as")]
    pub files: Vec<PathBuf>,
}

/// Imports every file, each in its own transaction; a corrupt one stores nothing and is
/// reported by position, the others go in, and the command exits 1.
pub fn import(a: ImportArgs) -> anyhow::Result<ExitCode> {
    let (mut store, tenant) = a.store.open()?;
    if let Some(p) = &a.pfx2as {
        let r = store.load_pfx2as(p)?;
        eprintln!(
            "vtnt: {}: {} prefixes; {} of {} addresses have an AS",
            r.file, r.prefixes, r.annotated, r.addresses
        );
    }
    let o = ImportOptions {
        tenant,
        node: a.node.clone().map(|name| NodeInfo {
            name,
            location: a.location.clone(),
            public_addr: a.public_addr.map(|p| p.to_string()),
            ..NodeInfo::default()
        }),
        run: a.run.clone(),
    };
    let mut failed = 0;
    for f in &a.files {
        match import_file(&mut store, f, &o) {
            Ok(r) => {
                for u in &r.unsupported {
                    eprintln!("vtnt: {}: skipped {u}", r.file);
                }
                if a.json {
                    out!("{}", serde_json::to_string(&r)?);
                } else {
                    eprintln!(
                        "vtnt: {} ({}): {} traces, {} pings stored, {} stored already; run {}",
                        r.file, r.format, r.stored.traces, r.stored.pings, r.stored.known, r.run
                    );
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("vtnt: error: {e}");
            }
        }
    }
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `vtnt export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// csv, or parquet (a build with the cargo feature `parquet`).
    #[arg(long, default_value = "csv")]
    pub format: ExportFormat,
    /// The table (docs/store.md): runs, nodes, jobs, traces, hops, pings, ping_replies,
    /// tunnels, lsrs, signatures, addresses.
    #[arg(long)]
    pub table: String,
    /// Write to FILE (a regular file, replaced when the export is complete) instead of
    /// stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Writes one table of one tenant.
pub fn export(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let (store, tenant) = a.store.read()?;
    let rows = match &a.output {
        Some(p) => {
            let (file, f) = AtomicFile::create(p)?;
            let rows = store.export(&tenant, &a.table, a.format, f)?;
            file.commit()?;
            rows
        }
        None => {
            anyhow::ensure!(
                a.format == ExportFormat::Csv
                    || !std::io::IsTerminal::is_terminal(&std::io::stdout()),
                "--format parquet writes binary data: give an output file with -o"
            );
            store.export(&tenant, &a.table, a.format, std::io::stdout())?
        }
    };
    eprintln!("vtnt: {rows} rows of {}", a.table);
    Ok(ExitCode::SUCCESS)
}
