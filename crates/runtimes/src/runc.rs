//! The `runc` runtime: an OCI bundle around the static binary. The image is a tarball of
//! a minimal rootfs (`/vtnt` and the empty directories the runtime mounts on); each
//! instance gets its own `config.json` (generated here, OCI 1.0) that points at the
//! shared read-only rootfs, keeps only `CAP_NET_RAW`, joins the lab's network namespace
//! by path (`/run/netns/<lab>`) and puts the container in the instance's cgroup
//! (`cgroupsPath`). `runc run` stays in the foreground, so its stdout is the job's.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, IoContext, Result};
use serde_json::json;

use crate::cgroup::Cgroup;
use crate::net::Attached;
use crate::paths;
use crate::proc::Supervised;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;

/// File name of the bundle tarball.
pub const IMAGE_NAME: &str = "vtnt-oci-bundle.tar";

/// Builds the bundle tarball (`rootfs/vtnt` + directories) in the image cache.
pub fn build_image(opts: &BuildOptions) -> Result<ImageInfo> {
    let bin = paths::static_vtnt()?;
    let image = paths::CachedImage::new(paths::images_dir()?.join(IMAGE_NAME));
    let dst = image.path.clone();
    if image.stale(opts.rebuild, &bin)? {
        let tmp = paths::TempDir::new("runc-build")?;
        let rootfs = tmp.path().join("rootfs");
        for d in ["proc", "dev", "sys", "tmp", "etc"] {
            std::fs::create_dir_all(rootfs.join(d))
                .doing(|| format!("creating {}", rootfs.join(d).display()))?;
        }
        std::fs::copy(&bin, rootfs.join("vtnt")).doing(|| format!("copying {}", bin.display()))?;
        std::fs::write(rootfs.join("etc/hostname"), "vtnt\n")
            .doing(|| format!("writing {}/etc/hostname", rootfs.display()))?;
        let tarball = dst.with_extension("tmp");
        paths::run_cmd(
            Command::new("tar")
                .arg("-C")
                .arg(tmp.path())
                .arg("--numeric-owner")
                .arg("-cf")
                .arg(&tarball)
                .arg("rootfs"),
        )?;
        std::fs::rename(&tarball, &dst)
            .doing(|| format!("moving {} to {}", tarball.display(), dst.display()))?;
        image.record(paths::file_size(&dst)?, &bin)?;
    }
    let size = paths::file_size(&dst)?;
    Ok(ImageInfo {
        runtime: Runtime::Runc,
        path: dst,
        download_bytes: size,
        size_bytes: size,
        size_note: "OCI bundle tarball (rootfs + static binary)".into(),
        pin: None,
    })
}

/// Unpacks the bundle into `dir`; returns the rootfs.
pub fn install(tarball: &Path, dir: &Path) -> Result<PathBuf> {
    paths::run_cmd(
        Command::new("tar")
            .arg("-C")
            .arg(dir)
            .arg("-xf")
            .arg(tarball),
    )?;
    let rootfs = dir.join("rootfs");
    if !rootfs.join("vtnt").is_file() {
        return Err(Error::Image(format!(
            "{} holds no rootfs/vtnt",
            tarball.display()
        )));
    }
    Ok(rootfs)
}

/// The OCI runtime configuration of one instance.
pub fn config(
    rootfs: &Path,
    args: &[String],
    netns: Option<&Path>,
    cgroups_path: &str,
) -> serde_json::Value {
    let caps = ["CAP_NET_RAW"];
    // No network namespace entry: the container shares this host's (`--net host`).
    let mut namespaces = vec![json!({ "type": "pid" })];
    if let Some(ns) = netns {
        namespaces.push(json!({ "type": "network", "path": ns }));
    }
    namespaces.extend(["ipc", "uts", "mount"].map(|t| json!({ "type": t })));
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": { "uid": 0, "gid": 0 },
            "args": args,
            "env": ["PATH=/", "VTNT_RUNTIME=runc"],
            "cwd": "/",
            "capabilities": { "bounding": caps, "effective": caps, "permitted": caps },
            "rlimits": [{ "type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024 }],
            "noNewPrivileges": true
        },
        "root": { "path": rootfs, "readonly": true },
        "hostname": "vtnt",
        "mounts": [
            { "destination": "/proc", "type": "proc", "source": "proc" },
            { "destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"] },
            { "destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"] },
            { "destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=16m"] }
        ],
        "linux": {
            "cgroupsPath": cgroups_path,
            "resources": { "devices": [{ "allow": false, "access": "rwm" }] },
            "namespaces": namespaces,
            "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
        }
    })
}

/// Starts one container; returns the `runc run` process, the container id and runc's
/// state root (for [`destroy`]).
pub fn start(
    rootfs: &Path,
    dir: &Path,
    net: &Attached,
    spec: &InstanceSpec,
    cgroup: &Cgroup,
) -> Result<(Supervised, String, PathBuf)> {
    let job = crate::guest::guest_job(&spec.job, "-");
    let input = job.input()?;
    let mut args = vec!["/vtnt".to_string()];
    args.extend(job.args);
    run(rootfs, dir, &args, net.netns_path(), cgroup, input)
}

/// Starts a container running `args` in `rootfs`, in network namespace `netns` (`None`:
/// this one) and under `cgroup`, with `input` as its standard input (runc passes its own
/// through); what [`start`] returns.
pub fn run(
    rootfs: &Path,
    dir: &Path,
    args: &[String],
    netns: Option<&Path>,
    cgroup: &Cgroup,
    input: Option<std::fs::File>,
) -> Result<(Supervised, String, PathBuf)> {
    let runc = paths::need("runc", "runc")?;
    let id = paths::unique("vtnt");
    let bundle = dir.join(format!("bundle-{id}"));
    std::fs::create_dir_all(&bundle).doing(|| format!("creating {}", bundle.display()))?;
    let cfg = config(rootfs, args, netns, &format!("/{}/c", cgroup.rel()));
    let config_json = bundle.join("config.json");
    let bytes =
        serde_json::to_vec_pretty(&cfg).doing(|| format!("writing {}", config_json.display()))?;
    std::fs::write(&config_json, bytes).doing(|| format!("writing {}", config_json.display()))?;
    let root = paths::run_dir()?.join("runc");
    let mut cmd = cgroup.wrap(&runc.display().to_string());
    cmd.arg("--root")
        .arg(&root)
        .arg("run")
        .arg("--bundle")
        .arg(&bundle)
        .arg(&id);
    let child = Supervised::spawn_with_input(cmd, &format!("runc container {id}"), input)?;
    Ok((child, id, root))
}

/// Removes the container (killing it if it still runs).
pub fn destroy(id: &str, root: &Path) {
    let _ = Command::new("runc")
        .arg("--root")
        .arg(root)
        .args(["delete", "--force", id])
        .output();
}
