//! Booting the unikernel under Firecracker, when a `firecracker` binary is on `PATH`
//! (and KVM works): a JSON config file and `firecracker --no-api --config-file`.
//!
//! Firecracker has no `isa-debug-exit`: the guest resets through the i8042 (Firecracker
//! then exits) and the status comes from the console's exit line. Firecracker appends
//! `virtio_mmio.device=...` for its devices to the command line itself; the kernel picks
//! those out even after `--`.

use crate::outcome::{ConsoleTap, Outcome};
use crate::{qemu, which, Error};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The Firecracker binary, if installed.
pub fn binary() -> Option<PathBuf> {
    which("firecracker")
}

/// One Firecracker microVM.
#[derive(Debug, Clone)]
pub struct FcConfig {
    pub image: PathBuf,
    pub memory_mib: u32,
    pub cmdline: String,
    /// A TAP device (in the namespace Firecracker runs in) for the guest's NIC.
    pub tap: Option<String>,
    pub mac: String,
    pub timeout: Duration,
    pub netns: Option<String>,
    /// Where console lines also go as they arrive.
    pub console: Option<ConsoleTap>,
}

impl FcConfig {
    pub fn new(image: PathBuf, cmdline: &str) -> FcConfig {
        FcConfig {
            image,
            memory_mib: 16,
            cmdline: cmdline.to_string(),
            tap: None,
            mac: "06:00:c0:00:02:0a".into(),
            timeout: Duration::from_secs(60),
            netns: None,
            console: None,
        }
    }

    /// The `--config-file` JSON.
    pub fn config_json(&self) -> String {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let net = match &self.tap {
            Some(tap) => format!(
                "[{{\"iface_id\":\"net0\",\"guest_mac\":\"{}\",\"host_dev_name\":\"{}\"}}]",
                esc(&self.mac),
                esc(tap)
            ),
            None => "[]".into(),
        };
        format!(
            "{{\"boot-source\":{{\"kernel_image_path\":\"{}\",\"boot_args\":\"{}\"}},\
             \"drives\":[],\
             \"machine-config\":{{\"vcpu_count\":1,\"mem_size_mib\":{}}},\
             \"network-interfaces\":{}}}",
            esc(&self.image.display().to_string()),
            esc(&self.cmdline),
            self.memory_mib,
            net
        )
    }
}

/// Boots `cfg` under Firecracker.
pub fn run(cfg: &FcConfig) -> Result<Outcome, Error> {
    let fc = binary().ok_or_else(|| Error::Spawn {
        program: "firecracker".into(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "not on PATH"),
    })?;
    let dir = std::env::temp_dir().join(format!(
        "vtnt-fc-{}-{}",
        std::process::id(),
        crate::netns::unique_name("c")
    ));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("config.json");
    std::fs::write(&config, cfg.config_json())?;
    let mut cmd = match &cfg.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&fc);
            c
        }
        None => Command::new(&fc),
    };
    cmd.arg("--no-api").arg("--config-file").arg(&config);
    // Firecracker always runs on KVM, of whichever kind this host has.
    let accel = crate::accel::kvm_kind().unwrap_or(crate::accel::Accelerator::Kvm);
    let out = qemu::supervise(cmd, cfg.timeout, false, accel, cfg.console.as_ref());
    let _ = std::fs::remove_dir_all(&dir);
    out
}
