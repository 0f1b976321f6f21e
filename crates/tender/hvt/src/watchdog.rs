//! The watchdog: stops a guest that runs past its time even if it never exits to the
//! monitor (a guest spinning natively in ring 3 never does).
//!
//! A POSIX timer (the kernel's: no thread of ours) sends [`SIGNAL`] to the vCPU thread at
//! the deadline. Its no-op handler is installed without `SA_RESTART`, so a `KVM_RUN` (or
//! `ppoll`, or a console write) in progress returns `EINTR` and the run loop sees that
//! the deadline has passed. A signal that lands just before the thread enters `KVM_RUN`
//! would be lost, so the timer repeats it every [`RESEND`] until the run loop is done
//! and deletes it: the guest stops at most that much late, and nothing else ever touches
//! the vCPU's `kvm_run` page.
//!
//! And [`die_with_parent`]: the VM does not outlive the process that started it either.
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

/// The signal that interrupts the vCPU thread. The monitor installs a no-op handler for
/// it process-wide (a host program embedding the library should leave it alone).
pub(crate) const SIGNAL: libc::c_int = libc::SIGUSR2;
/// How often the timer repeats the signal until the run loop has stopped.
const RESEND: Duration = Duration::from_millis(5);

extern "C" fn interrupt(_: libc::c_int) {}

/// Installs the no-op handler for [`SIGNAL`] once (the first outcome is kept).
fn install_handler() -> io::Result<()> {
    static ONCE: Once = Once::new();
    static ERRNO: AtomicI32 = AtomicI32::new(0);
    ONCE.call_once(|| {
        // SAFETY: an all-zero sigaction is a valid value (empty mask, no flags).
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // No SA_RESTART: the point of the signal is that blocking calls return EINTR.
        sa.sa_flags = 0;
        // SAFETY: `sa` is a live, initialised sigaction whose handler is async-signal-safe
        // (it does nothing); the old action is not wanted.
        if unsafe { libc::sigaction(SIGNAL, &sa, std::ptr::null_mut()) } != 0 {
            let e = io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL);
            ERRNO.store(e, Ordering::Release);
        }
    });
    match ERRNO.load(Ordering::Acquire) {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// A running watchdog for the calling thread (the vCPU thread). Dropping it deletes the
/// timer, after which no signal is sent.
pub(crate) struct Watchdog {
    deadline: Instant,
    timer: libc::timer_t,
}

impl Watchdog {
    /// Starts the timer: `timeout` from now, the calling thread is interrupted.
    pub fn start(timeout: Duration) -> io::Result<Watchdog> {
        install_handler()?;
        // Beyond a year is forever (and Instant + a huge Duration would overflow); a zero
        // first expiry would disarm the timer.
        let timeout = timeout.clamp(Duration::from_nanos(1), Duration::from_secs(365 * 86400));
        let deadline = Instant::now() + timeout;
        // SAFETY: an all-zero sigevent is a valid value; the fields used are set below.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = SIGNAL;
        // SAFETY: gettid takes no argument and cannot fail.
        event.sigev_notify_thread_id = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: `event` and `timer` are live and initialised; the kernel reads the first
        // and writes the new timer's id to the second. CLOCK_MONOTONIC is Instant's clock.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // From here on, dropping `dog` deletes the timer.
        let dog = Watchdog { deadline, timer };
        let spec = libc::itimerspec {
            it_value: timespec(timeout),
            it_interval: timespec(RESEND),
        };
        // SAFETY: `dog.timer` is the timer just created, `spec` is live and initialised,
        // and the old setting is not wanted.
        if unsafe { libc::timer_settime(dog.timer, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(dog)
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// The time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// `d` (at most a year) as a timespec.
fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: libc::c_long::from(d.subsec_nanos()),
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // SAFETY: the timer was created by `start` and is deleted once, here. A signal it
        // sent that is still pending runs the no-op handler later, harmlessly.
        unsafe { libc::timer_delete(self.timer) };
    }
}

/// Ties the monitor's life to the process that started it: when that dies (a benchmark
/// stopped by a signal), the kernel kills the monitor and its VM, instead of leaving the
/// VM to run out its watchdog. A parent that died before the request counts too.
pub fn die_with_parent() -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) and getppid take and return plain integers.
    let (r, ppid) = unsafe {
        (
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ),
            libc::getppid(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if ppid == 1 {
        return Err(std::io::Error::other(
            "the process that started the monitor is gone",
        ));
    }
    Ok(())
}
