//! The `microvm` runtime: the vTNT unikernel under `vtnt-monitor` where `/dev/kvm` works,
//! else under QEMU's microvm machine (`vtnt_vmm::job::default_vmm`).
//!
//! Building and booting the unikernel belong to the `vtnt` command (its `unikernel`
//! module: `build_image()` and `run_microvm(vmm, job_words, lab)`), which this library
//! cannot call. So it drives them through the static `vtnt` binary: the image comes from
//! `vtnt image build unikernel` (whose last stdout line is the image path), and an
//! instance is `vtnt run --runtime microvm --local --image FILE --lab LAB -- WORDS` in the
//! instance's cgroup, i.e. the launcher plus its QEMU child, both measured.
//!
//! The unikernel runs the job's words as they are (no `run --hold` wrapper: it has no
//! shell); a hold is passed as `--hold` to the launcher, which puts it in the job spec
//! (`hold=`): the guest sits halted that long after its results, then powers off.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use vtnt_vmm::accel::Accelerator;

use crate::cgroup::Cgroup;
use crate::job::Lab;
use crate::paths;
use crate::proc::Supervised;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;

/// File name of the unikernel in the image cache.
pub const IMAGE_NAME: &str = "vtnt-unikernel.elf";

/// The static `vtnt` binary that launches the unikernel.
pub fn launcher() -> anyhow::Result<PathBuf> {
    paths::static_vtnt()
}

/// Builds the unikernel through `vtnt image build unikernel` and copies it to the cache.
pub fn build_image(_opts: &BuildOptions) -> anyhow::Result<ImageInfo> {
    let vtnt = launcher()?;
    let out =
        paths::run_cmd(Command::new(&vtnt).args(["image", "build", "unikernel", "--print-path"]))
            .context("`vtnt image build unikernel` (the unikernel module of the vtnt command)")?;
    let built = PathBuf::from(
        out.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .context("`vtnt image build unikernel` printed no path")?
            .trim(),
    );
    from_built(&built)
}

/// Registers an already built unikernel `built` as the microvm image.
pub fn from_built(built: &Path) -> anyhow::Result<ImageInfo> {
    let dst = paths::images_dir()?.join(IMAGE_NAME);
    paths::copy_if_newer(built, &dst)?;
    let size = paths::file_size(&dst)?;
    Ok(ImageInfo {
        runtime: Runtime::Microvm,
        path: dst,
        download_bytes: size,
        size_bytes: size,
        size_note: "unikernel ELF (PVH)".into(),
    })
}

/// The accelerator the launcher boots `image` under: KVM (of this host's kind) under
/// `vtnt-monitor` where it is usable, else QEMU's choice (`VTNT_ACCEL`, else KVM when
/// the image boots under it, else TCG; `vtnt_vmm::accel::resolve`, whose probe result
/// the launcher shares through its cache).
pub fn accel(image: &Path) -> Accelerator {
    vtnt_vmm::job::default_vmm().accelerator(image, vtnt_vmm::qemu::Accel::Auto)
}

/// Boots one unikernel instance through the launcher.
pub fn start(
    image: &Path,
    lab: &Lab,
    spec: &InstanceSpec,
    cgroup: &Cgroup,
) -> anyhow::Result<Supervised> {
    let vtnt = launcher()?;
    let mut cmd = cgroup.wrap(&vtnt.display().to_string());
    cmd.args(["run", "--runtime", "microvm", "--local", "--image"])
        .arg(image)
        .arg("--lab")
        .arg(&lab.name);
    if spec.dhcp {
        cmd.arg("--dhcp");
    }
    if spec.job.hold_secs > 0 {
        cmd.arg("--hold").arg(spec.job.hold_secs.to_string());
    }
    cmd.arg("--").args(&spec.job.words);
    Supervised::spawn(cmd, "the vTNT microVM")
}
