//! The run-wide stop flag of a long measurement. The command line's SIGINT/SIGTERM
//! handler sets a flag and hands it over with [`stop_on`]; loops that wait on instances,
//! agents or ramps ask [`interrupted`] (or [`check`]) between steps and return an error,
//! so that every guard set up on the way (instances, cgroups, KSM, `favordynmods`,
//! namespaces, brokers) is dropped and restored instead of being left behind by a process
//! killed mid-run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The flag a signal sets, once given.
static STOP: OnceLock<&'static AtomicBool> = OnceLock::new();

/// From now on, `flag` set means "stop at the next step". The first flag given stays.
pub fn stop_on(flag: &'static AtomicBool) {
    let _ = STOP.set(flag);
}

/// Whether a flag was given to [`stop_on`] (else nothing will ever stop the run).
pub fn armed() -> bool {
    STOP.get().is_some()
}

/// Whether the flag given to [`stop_on`] is set.
pub fn interrupted() -> bool {
    STOP.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// `Err("interrupted")` once the flag is set: `vtnt_measure::stop::check()?` between
/// steps.
pub fn check() -> crate::Result<()> {
    if interrupted() {
        return Err(crate::Error::Interrupted { killed: None });
    }
    Ok(())
}
