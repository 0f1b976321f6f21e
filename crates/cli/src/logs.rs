//! Log events (`tracing`) on stderr: the one subscriber every command installs, filtered
//! by `--log-level` and written as text or JSON lines (`--log-format`).
//!
//! The long-running commands (the agent, the daemon, `fleet up --foreground`, the lab's
//! daemons: [`Style::Service`]) log what they do, each event with its fields (node, job,
//! client, ...); a text line carries the time and the level, or under systemd (stderr is
//! the journal's stream, `JOURNAL_STREAM`) the level as the journal's `<N>` prefix and
//! no time, which the journal keeps itself. The other commands ([`Style::Cli`]) stay
//! quiet: they log nothing of their own (their progress is their status line), and what
//! the libraries they call say comes out as `vtnt: ...` lines, as before.
//!
//! Writing never panics nor changes how a command ends: an event that stderr cannot take
//! (a closed pipe, a full disk) is dropped, as [`vtnt_job::say!`] drops a line.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// `--log-level` and `--log-format`, global options.
#[derive(clap::Args, Debug, Clone)]
pub struct LogArgs {
    /// What is logged: a level (error, warn, info, debug, trace) or filter directives as
    /// in RUST_LOG (`info,vtnt_fleet=debug`). The long-running commands log at info;
    /// the others log nothing of their own at any level.
    #[arg(
        long,
        global = true,
        value_name = "LEVEL",
        default_value = "info",
        value_parser = filter
    )]
    pub log_level: String,
    /// Log lines as text or as JSON objects (timestamp, level, message, fields, target),
    /// one per line.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

impl LogArgs {
    /// These options as words, for a daemon this command starts (`vtnt lab up`'s).
    pub fn args(&self) -> Vec<String> {
        let format = match self.log_format {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        };
        [
            "--log-level",
            self.log_level.as_str(),
            "--log-format",
            format,
        ]
        .map(String::from)
        .to_vec()
    }
}

/// `--log-format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// How a text line looks: for a service's log, or as a command's word on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A long-running command: time (or the journal's priority), level, message, fields.
    Service,
    /// Any other: `vtnt: [level: ]message fields`, as the command's own lines.
    Cli,
}

/// `--log-level`: a level or directives `EnvFilter` takes, where a directive without `=`
/// must be a level (EnvFilter would take `warning` as the name of a target, so that a
/// typo of a level would log nothing).
fn filter(s: &str) -> Result<String, String> {
    let levels = "off, error, warn, info, debug, trace";
    for d in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if !d.contains('=') && !d.contains('[') && d.parse::<LevelFilter>().is_err() {
            return Err(format!(
                "`{d}` is not a level ({levels}); a target's level is TARGET=LEVEL"
            ));
        }
    }
    EnvFilter::builder()
        .parse(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("not a level or a filter: {e}"))
}

/// Installs the subscriber for this process (once; a second call changes nothing).
pub fn init(a: &LogArgs, style: Style) {
    let filter = EnvFilter::builder().parse_lossy(&a.log_level);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .log_internal_errors(false);
    let _ = match a.log_format {
        LogFormat::Json => tracing::subscriber::set_global_default(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .finish(),
        ),
        LogFormat::Text => {
            let text = Text {
                style,
                journal: style == Style::Service && on_journal(),
            };
            tracing::subscriber::set_global_default(builder.event_format(text).finish())
        }
    };
}

/// Whether stderr is the journal's stream (systemd sets `JOURNAL_STREAM` to its
/// `device:inode`).
fn on_journal() -> bool {
    let Some(want) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    match nix::sys::stat::fstat(std::io::stderr()) {
        Ok(st) => want.to_str() == Some(&format!("{}:{}", st.st_dev, st.st_ino)),
        Err(_) => false,
    }
}

/// The text line of [`Style`].
struct Text {
    style: Style,
    journal: bool,
}

impl<S, N> FormatEvent<S, N> for Text
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = *event.metadata().level();
        match (self.style, self.journal) {
            (Style::Cli, _) => {
                w.write_str("vtnt: ")?;
                match level {
                    Level::ERROR => w.write_str("error: ")?,
                    Level::WARN => w.write_str("warning: ")?,
                    Level::INFO => {}
                    Level::DEBUG => w.write_str("debug: ")?,
                    Level::TRACE => w.write_str("trace: ")?,
                }
            }
            (Style::Service, true) => write!(w, "<{}>{level} ", journal_priority(level))?,
            (Style::Service, false) => {
                SystemTime.format_time(&mut w)?;
                write!(w, " {level:>5} ")?;
            }
        }
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// syslog's priority of `level` (sd-daemon(3)'s prefixes).
fn journal_priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_directives_are_filters_and_nonsense_is_not() {
        for ok in ["info", "warn", "debug,vtnt_fleet=trace", "off"] {
            assert_eq!(filter(ok).as_deref(), Ok(ok));
        }
        let e = filter("info,x=loud").unwrap_err();
        assert!(e.starts_with("not a level or a filter"), "{e}");
        assert_eq!(
            filter("warning").unwrap_err(),
            "`warning` is not a level (off, error, warn, info, debug, trace); a target's level \
             is TARGET=LEVEL"
        );
    }
}
