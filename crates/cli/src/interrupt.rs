//! SIGINT and SIGTERM during a probing run. The first one sets a flag: probing stops, the
//! run writes the records it finished, closes and commits its output, and exits 128 +
//! the signal (130 for SIGINT, 143 for SIGTERM). A second one while that happens exits at
//! once with the same code.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use vtnt_job::say;

use anyhow::Context;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;

/// Set by the first SIGINT or SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);
/// The last signal that arrived (0: none).
static SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// Catches SIGINT and SIGTERM from now on; returns the flag they set.
pub fn catch() -> anyhow::Result<&'static AtomicBool> {
    for sig in [SIGINT, SIGTERM] {
        // Registration order is the order the actions run: the exit comes first, so it
        // fires only when an earlier signal already set the flag.
        flag::register_conditional_shutdown(sig, 128 + sig, &STOP)
            .and_then(|_| flag::register_usize(sig, &SIGNAL, sig as usize))
            .and_then(|_| flag::register(sig, &STOP))
            .with_context(|| format!("catching signal {sig}"))?;
    }
    Ok(&STOP)
}

/// The signal that stopped the run, as a name and the exit code it calls for.
fn caught() -> Option<(&'static str, ExitCode)> {
    let sig = SIGNAL.load(Ordering::SeqCst);
    let name = match i32::try_from(sig).ok()? {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => return None,
    };
    Some((name, ExitCode::from(128 + sig as u8)))
}

/// Whether a SIGINT or SIGTERM has arrived since [`catch`].
pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// After a run that stopped on a signal: says so on stderr, with the records written and
/// where, and returns the exit code the signal calls for.
pub fn report(records: u64, path: Option<&Path>) -> ExitCode {
    let to = path.map_or_else(|| "stdout".to_string(), |p| p.display().to_string());
    let Some((name, code)) = caught() else {
        say!("vtnt: interrupted: {records} records written to {to}");
        return ExitCode::FAILURE;
    };
    say!("vtnt: interrupted by {name}: {records} records written to {to}");
    code
}
