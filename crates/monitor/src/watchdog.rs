//! The watchdog: stops a guest that runs past its time even if it never exits to the
//! monitor (a guest spinning natively in ring 3 never does).
//!
//! A timer thread waits for the deadline; then it sets the `expired` flag and sends
//! [`SIGNAL`] to the vCPU thread, whose no-op handler is installed without `SA_RESTART`,
//! so a `KVM_RUN` (or `ppoll`, or a console write) in progress returns `EINTR` and the run
//! loop sees the flag. A signal that lands just before the thread enters `KVM_RUN` would
//! be lost, so the timer repeats it every [`RESEND`] until the run loop is done: the
//! guest stops at most that much late, and no other thread ever touches the vCPU's
//! `kvm_run` page.
//!
//! And [`die_with_parent`]: the VM does not outlive the process that started it either.
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::thread::JoinHandle;
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

/// A running watchdog for the calling thread (the vCPU thread). Dropping it stops the
/// timer (and waits for it), after which no signal is sent.
pub(crate) struct Watchdog {
    deadline: Instant,
    expired: Arc<AtomicBool>,
    done: Arc<(Mutex<bool>, Condvar)>,
    timer: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts the timer: `timeout` from now, the calling thread is interrupted.
    pub fn start(timeout: Duration) -> io::Result<Watchdog> {
        install_handler()?;
        // Beyond a year is forever (and Instant + a huge Duration would overflow).
        let deadline = Instant::now() + timeout.min(Duration::from_secs(365 * 86400));
        let expired = Arc::new(AtomicBool::new(false));
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        // SAFETY: pthread_self has no preconditions. Carried as an integer: `pthread_t`
        // is a pointer (not `Send`) on musl, an integer on glibc.
        let target = unsafe { libc::pthread_self() } as usize;
        let timer = std::thread::Builder::new()
            .name("vtnt-watchdog".into())
            .stack_size(64 << 10)
            .spawn({
                let expired = expired.clone();
                let done = done.clone();
                move || watch(deadline, target, &expired, &done)
            })?;
        Ok(Watchdog {
            deadline,
            expired,
            done,
            timer: Some(timer),
        })
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        self.expired.load(Ordering::Acquire) || Instant::now() >= self.deadline
    }

    /// The time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// The timer thread's body.
fn watch(deadline: Instant, target: usize, expired: &AtomicBool, done: &(Mutex<bool>, Condvar)) {
    let (lock, cv) = done;
    let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if *stopped {
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        stopped = cv
            .wait_timeout(stopped, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    expired.store(true, Ordering::Release);
    while !*stopped {
        // SAFETY: the target thread is alive: it sets `stopped` (under this lock, which
        // we hold) before it can leave the run loop, and it has not done so yet.
        unsafe { libc::pthread_kill(target as libc::pthread_t, SIGNAL) };
        stopped = cv
            .wait_timeout(stopped, RESEND)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, cv) = &*self.done;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
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
