//! How an integration test skips when this host cannot run it, the same way in every crate.
//!
//! A test that needs root or a tool asks [`missing_root_or`] or [`missing_tools`] why it
//! cannot run, and hands any reason to [`skip_or_fail`] (or to the [`skip_if!`],
//! [`require_root!`] and [`require_tools!`] macros, which return from the test). By
//! default a skip prints `SKIPPED <test>: <reason>` and the test passes. With
//! `VTNT_REQUIRE_ALL=1` (scripts/test.sh, hence CI) a skip fails the test, unless its
//! reason is on the allow-list [`Allowed`]: what no package can install on a host. Those
//! print `SKIPPED (allowed: ...)` and pass. Seeded tests take their seed from [`seed`]
//! and their randomness from [`Rng`]. Another crate's tests that run the `vtnt` command
//! find it with [`vtnt_binary`].
//!
//! Skip lines are written to the process's stderr directly, not through `eprintln!`,
//! so the test harness does not capture them: a skip shows in the log of a passing run.

mod binary;

pub use binary::vtnt_binary;

use std::io::Write;

/// The environment variable that turns skips not on the allow-list into failures.
pub const REQUIRE_ALL: &str = "VTNT_REQUIRE_ALL";

/// What may legitimately be missing on a host: a test skipped for one of these passes
/// even under `VTNT_REQUIRE_ALL=1`, with a loud `SKIPPED (allowed: ...)` line. Everything
/// else a test needs (root, every tool) scripts/setup.sh provides, so its absence fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    /// The cgroup v1 controllers `vtnt bench deploy` measures with (memory, cpu, cpuacct,
    /// cpuset) are not mounted under /sys/fs/cgroup: the host booted with cgroup v2 only,
    /// which a kernel parameter and a reboot change, not a package.
    CgroupV1,
    /// No usable `/dev/kvm` (neither hardware KVM nor PVM): a VM host without nested
    /// virtualisation, which no package installs.
    NoKvm,
    /// No `firecracker` binary: Debian does not package it, and its releases need a host
    /// it supports.
    NoFirecracker,
}

impl Allowed {
    /// A short name for the skip line.
    fn name(self) -> &'static str {
        match self {
            Allowed::CgroupV1 => "no cgroup v1 controllers",
            Allowed::NoKvm => "no /dev/kvm",
            Allowed::NoFirecracker => "no firecracker",
        }
    }
}

/// Whether `VTNT_REQUIRE_ALL=1` is set.
pub fn require_all() -> bool {
    std::env::var_os(REQUIRE_ALL).is_some_and(|v| v == "1")
}

/// Skips `test` for `reason`: prints `SKIPPED <test>: <reason>` and returns, so the caller
/// can return. With `VTNT_REQUIRE_ALL=1` it panics with the reason instead, unless
/// `allowed` puts the reason on the allow-list (then the line reads `SKIPPED (allowed:
/// ...)`).
#[track_caller]
pub fn skip_or_fail(test: &str, reason: &str, allowed: Option<Allowed>) {
    match allowed {
        Some(a) => say(&format!("SKIPPED (allowed: {}) {test}: {reason}", a.name())),
        None if require_all() => {
            panic!("{test} cannot run here and {REQUIRE_ALL}=1 forbids skipping it: {reason}")
        }
        None => say(&format!(
            "SKIPPED {test}: {reason} ({REQUIRE_ALL}=1 would fail this)"
        )),
    }
}

/// Writes one line to stderr past the harness's output capture.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The first of `tools` that is not an executable on `PATH`, as a reason.
pub fn missing_tools(tools: &[&str]) -> Option<String> {
    tools
        .iter()
        .find(|t| vtnt_netns::which(t).is_none())
        .map(|t| format!("`{t}` is not installed (scripts/setup.sh installs it)"))
}

/// Why a test needing root and `tools` cannot run here: not root, or a tool missing.
pub fn missing_root_or(tools: &[&str]) -> Option<String> {
    if vtnt_netns::is_root() {
        missing_tools(tools)
    } else {
        Some("needs root (network namespaces, raw sockets)".into())
    }
}

/// The name of the function this expands in (the test's), with its module path.
#[macro_export]
macro_rules! test_name {
    () => {{
        fn here() {}
        let name = ::std::any::type_name_of_val(&here);
        name.strip_suffix("::here").unwrap_or(name)
    }};
}

/// Returns from the enclosing test when `$reason` (an `Option<String>`) is `Some`, through
/// [`skip_or_fail`] under the test's name; a second argument puts the reason on the
/// allow-list ([`Allowed`]).
#[macro_export]
macro_rules! skip_if {
    ($reason:expr) => {
        $crate::skip_if!($reason, None)
    };
    ($reason:expr, $allowed:expr) => {
        if let Some(why) = $reason {
            $crate::skip_or_fail($crate::test_name!(), &why, $allowed);
            return;
        }
    };
}

/// Why VMs cannot run under KVM here (`/dev/kvm` missing or refused), if they cannot.
pub fn missing_kvm() -> Option<String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .err()
        .map(|e| format!("cannot open /dev/kvm: {e}"))
}

/// Returns from the enclosing test (see [`skip_if!`]) unless `/dev/kvm` works; a host
/// without it is on the allow-list ([`Allowed::NoKvm`]).
#[macro_export]
macro_rules! require_kvm {
    () => {
        $crate::skip_if!($crate::missing_kvm(), Some($crate::Allowed::NoKvm))
    };
}

/// Returns from the enclosing test (see [`skip_if!`]) unless it runs as root with every
/// one of the given tools on `PATH`.
#[macro_export]
macro_rules! require_root {
    ($($tool:expr),* $(,)?) => {
        $crate::skip_if!($crate::missing_root_or(&[$($tool),*]))
    };
}

/// Returns from the enclosing test (see [`skip_if!`]) unless `$available`, whether the
/// cgroup v1 controllers `vtnt bench` measures with are mounted (the caller's
/// `vtnt_measure::cgroup::available()`, a crate this one does not depend on); their
/// absence is on the allow-list ([`Allowed::CgroupV1`]).
#[macro_export]
macro_rules! require_cgroup_v1 {
    ($available:expr) => {
        $crate::skip_if!(
            (!$available).then(|| "cgroup v1 controllers are not mounted".to_string()),
            Some($crate::Allowed::CgroupV1)
        )
    };
}

/// Returns from the enclosing test (see [`skip_if!`]) unless every one of the given tools
/// is on `PATH`.
#[macro_export]
macro_rules! require_tools {
    ($($tool:expr),+ $(,)?) => {
        $crate::skip_if!($crate::missing_tools(&[$($tool),+]))
    };
}

/// A test's seed: `$var` when set (it must be a number), else `default()`; printed on
/// stdout and stderr so a failing run can be replayed.
pub fn seed(var: &str, default: impl FnOnce() -> u64) -> u64 {
    let seed = match std::env::var(var) {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("{var}={s:?} is not a u64")),
        Err(_) => default(),
    };
    println!("{var}={seed}");
    eprintln!("{var}={seed}");
    seed
}

/// A test's only randomness, from one printed [`seed`]: the workspace's generator
/// ([`vtnt_rng::Rng`]) with draws sized for test code (indexes, byte vectors).
pub struct Rng(vtnt_rng::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(vtnt_rng::Rng::new(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.0.fill(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_name_is_the_enclosing_function() {
        assert_eq!(
            test_name!(),
            "vtnt_testkit::tests::the_test_name_is_the_enclosing_function"
        );
    }

    #[test]
    fn a_missing_tool_is_named() {
        let why = missing_tools(&["sh", "vtnt-no-such-tool"]).expect("a reason");
        assert!(why.contains("`vtnt-no-such-tool`"), "{why}");
        assert_eq!(missing_tools(&["sh"]), None);
    }

    #[test]
    #[should_panic(expected = "forbids skipping it: no widget")]
    fn under_require_all_a_skip_fails() {
        std::env::set_var(REQUIRE_ALL, "1");
        skip_or_fail("t", "no widget", None);
    }

    #[test]
    fn under_require_all_an_allowed_skip_passes() {
        std::env::set_var(REQUIRE_ALL, "1");
        skip_or_fail("t", "cgroup v2 only", Some(Allowed::CgroupV1));
    }
}
