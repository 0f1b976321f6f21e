//! The kernel's cgroup `favordynmods`, switched on for a measurement and restored after.
//!
//! A process that joins a cgroup (a write to `cgroup.procs`) takes the kernel's global
//! threadgroup lock for writing; in its default mode that write waits for an RCU grace
//! period, 10-20 ms on a quiet 2-core host, so that fork and exit stay cheap. With
//! `favordynmods` on any mounted cgroup hierarchy the lock stays in its slow mode: the
//! join takes tens of microseconds and fork and exit pay a little more. Hosts that start
//! many short-lived instances set it (a mount option, or `cgroup_favordynmods=` at boot).
//! [`FavorDynmods::enable`] sets it on the cgroup2 mount (v2 and hybrid layouts have one)
//! with a remount that keeps every other option, and the drop remounts with the options
//! found before.

use std::path::PathBuf;

use crate::error::{Error, IoContext, Result};

const OPTION: &str = "favordynmods";

/// One cgroup mount of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    point: PathBuf,
    /// Per-mount options (`rw,nosuid,relatime`).
    mount_opts: String,
    /// `cgroup` or `cgroup2`.
    fstype: String,
    /// Superblock options (`rw,nsdelegate`; v1: `rw,memory`).
    super_opts: String,
}

/// The cgroup mounts in `mountinfo` text. A line's fields: id, parent, dev, root, mount
/// point, mount options, optional fields ended by `-`, type, source, super options.
fn cgroup_mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let head: Vec<&str> = head.split(' ').collect();
            let tail: Vec<&str> = tail.split(' ').collect();
            let fstype = *tail.first()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(Mount {
                point: PathBuf::from(unescape(head.get(4)?)),
                mount_opts: head.get(5)?.to_string(),
                fstype: fstype.into(),
                super_opts: tail.get(2)?.to_string(),
            })
        })
        .collect()
}

/// `mountinfo` writes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (b[i], oct) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn has(opts: &str, o: &str) -> bool {
    opts.split(',').any(|x| x == o)
}

fn mounts() -> Vec<Mount> {
    cgroup_mounts(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// Whether some mounted cgroup hierarchy has `favordynmods` (the lock is global, so one
/// is enough).
pub fn enabled() -> bool {
    mounts().iter().any(|m| has(&m.super_opts, OPTION))
}

/// `favordynmods` on while this lives; the cgroup2 mount's options restored on drop.
#[derive(Debug)]
pub struct FavorDynmods {
    /// The mount we changed and its superblock options before (None: it was on already).
    restore: Option<Mount>,
}

impl FavorDynmods {
    /// Turns `favordynmods` on (a no-op when some hierarchy has it already).
    pub fn enable() -> Result<FavorDynmods> {
        let all = mounts();
        if all.iter().any(|m| has(&m.super_opts, OPTION)) {
            return Ok(FavorDynmods { restore: None });
        }
        let Some(m) = all.into_iter().find(|m| m.fstype == "cgroup2") else {
            return Err(Error::Unavailable(format!(
                "no cgroup2 mount to set `{OPTION}` on (a cgroup v1 hierarchy takes it only \
                 when mounted; or boot with cgroup_favordynmods=true)"
            )));
        };
        remount(&m, &with_option(&m.super_opts))?;
        Ok(FavorDynmods { restore: Some(m) })
    }
}

impl Drop for FavorDynmods {
    fn drop(&mut self) {
        if let Some(m) = &self.restore {
            if let Err(e) = remount(m, &data(&m.super_opts)) {
                // a report, never a panic in a drop (stderr closed or full)
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "warning: restoring the options of {}: {e:#}",
                    m.point.display()
                );
            }
        }
    }
}

/// The data string of a remount: the superblock options without `rw`/`ro`, which the
/// flags carry.
fn data(super_opts: &str) -> String {
    super_opts
        .split(',')
        .filter(|o| !o.is_empty() && *o != "rw" && *o != "ro")
        .collect::<Vec<_>>()
        .join(",")
}

fn with_option(super_opts: &str) -> String {
    let d = data(super_opts);
    if d.is_empty() {
        OPTION.into()
    } else {
        format!("{d},{OPTION}")
    }
}

/// The `MS_*` flags of per-mount options: a remount sets them all, so they are given
/// back as they were.
fn flags(mount_opts: &str) -> libc::c_ulong {
    mount_opts
        .split(',')
        .map(|o| match o {
            "ro" => libc::MS_RDONLY,
            "nosuid" => libc::MS_NOSUID,
            "nodev" => libc::MS_NODEV,
            "noexec" => libc::MS_NOEXEC,
            "noatime" => libc::MS_NOATIME,
            "nodiratime" => libc::MS_NODIRATIME,
            "relatime" => libc::MS_RELATIME,
            "strictatime" => libc::MS_STRICTATIME,
            _ => 0,
        })
        .fold(0, |a, f| a | f)
}

fn remount(m: &Mount, data: &str) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let point =
        std::ffi::CString::new(m.point.as_os_str().as_bytes()).doing(|| "mount point".into())?;
    let fstype = std::ffi::CString::new(m.fstype.as_str()).doing(|| "type".into())?;
    let cdata = std::ffi::CString::new(data).doing(|| "options".into())?;
    // SAFETY: mount(2) reads three NUL-terminated strings that live across the call.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            point.as_ptr(),
            fstype.as_ptr(),
            libc::MS_REMOUNT | flags(&m.mount_opts),
            cdata.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(Error::Io {
            what: format!("remounting {} with `{data}`", m.point.display()),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:28 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 31 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
36 31 0:32 / /sys/fs/my\\040groups rw,relatime - cgroup cgroup rw,cpu,favordynmods
";

    #[test]
    fn reads_cgroup_mounts_and_their_options() {
        let m = cgroup_mounts(HYBRID);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(m[0].fstype, "cgroup2");
        assert_eq!(m[0].super_opts, "rw,nsdelegate");
        assert_eq!(m[2].point, PathBuf::from("/sys/fs/my groups"));
        assert!(has(&m[2].super_opts, OPTION));
        assert!(!has(&m[0].super_opts, OPTION));
        assert!(cgroup_mounts("garbage\n\n1 2 3 - cgroup2").is_empty());
    }

    #[test]
    fn a_remount_keeps_every_other_option() {
        assert_eq!(with_option("rw,nsdelegate"), "nsdelegate,favordynmods");
        assert_eq!(with_option("rw"), "favordynmods");
        assert_eq!(
            data("rw,nsdelegate,memory_recursiveprot"),
            "nsdelegate,memory_recursiveprot"
        );
        assert_eq!(
            flags("rw,nosuid,nodev,noexec,relatime"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RELATIME
        );
        assert_eq!(flags("ro"), libc::MS_RDONLY);
    }

    /// On the real host (root, a cgroup2 mount, our v1 controllers): on while the guard
    /// lives, a process still joins a fresh group, and every option is back after it.
    #[test]
    fn enable_then_drop_restores_the_mount() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let before = mounts();
        if !root || !before.iter().any(|m| m.fstype == "cgroup2") || !crate::cgroup::available() {
            eprintln!("skipped: needs root, a cgroup2 mount and the v1 controllers");
            return;
        }
        let was = enabled();
        {
            let _on = FavorDynmods::enable().unwrap();
            assert!(enabled());
            let g =
                crate::cgroup::Cgroup::create(&format!("vtnt-test/dynmods-{}", std::process::id()))
                    .unwrap();
            let mut child = g.wrap("true").spawn().unwrap();
            assert!(child.wait().unwrap().success());
        }
        assert_eq!(enabled(), was);
        assert_eq!(mounts(), before);
    }
}
