//! The `native` runtime: the static (musl) `vtnt` binary as the image; deployed by
//! downloading it; run as a process that joins the lab's network namespace
//! (`nsenter --net=/run/netns/<lab>`), inside its own cgroup.

use crate::error::Result;
use std::path::{Path, PathBuf};

use crate::cgroup::Cgroup;
use crate::net::Attached;
use crate::paths;
use crate::proc::Supervised;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;

/// File name of the native image.
pub const IMAGE_NAME: &str = "vtnt-static";

/// Copies the installed static binary into the image cache.
pub fn build_image(_opts: &BuildOptions) -> Result<ImageInfo> {
    let (path, pin) = paths::stage(vtnt_artifacts::Artifact::StaticVtnt, IMAGE_NAME)?;
    Ok(ImageInfo {
        runtime: Runtime::Native,
        path,
        download_bytes: pin.size,
        size_bytes: pin.size,
        size_note: "static musl binary".into(),
        pin: Some(pin),
    })
}

/// Makes the downloaded binary executable.
pub fn install(file: &Path) -> Result<PathBuf> {
    paths::make_executable(file)
}

/// Starts `bin` with the job in the network's namespace (the lab's; this host's with
/// `--net host`), in `cgroup`.
pub fn start(
    bin: &Path,
    net: &Attached,
    spec: &InstanceSpec,
    cgroup: &Cgroup,
) -> Result<Supervised> {
    let mut cmd = match net.netns_path() {
        Some(ns) => {
            let nsenter = paths::need("nsenter", "util-linux")?;
            let mut cmd = cgroup.wrap(&nsenter.display().to_string());
            cmd.arg(format!("--net={}", ns.display())).arg(bin);
            cmd
        }
        None => cgroup.wrap(&bin.display().to_string()),
    };
    let job = crate::guest::guest_job(&spec.job, "-");
    cmd.args(&job.args);
    let input = job.input()?;
    Ok(Supervised::spawn_with_input(
        cmd,
        "the native vtnt process",
        input,
    )?)
}
