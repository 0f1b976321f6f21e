//! The `vm` runtime: a full Debian VM booting systemd, the paper's Vagrant box.
//!
//! **Image (a "box").** The cached debootstrap rootfs with `systemd-sysv` and Debian's
//! `linux-image-amd64` (installed *in the rootfs*, whose initramfs-tools made the initrd
//! there), plus `/usr/local/bin/vtnt`, a job script and a systemd unit (and this host's
//! Debian `iperf3` with the libraries the rootfs lacks, for `vtnt bench net`), written into an
//! ext4 file system with `mkfs.ext4 -d` (no loop mount) and converted to a compressed
//! qcow2. The box is a tarball of `disk.qcow2`, `vmlinuz` and `initrd.img` (QEMU boots
//! the kernel directly; Vagrant's box would boot through GRUB). Built once, cached.
//!
//! **Run.** `qemu-system-x86_64 -machine q35 -m 256` under [`accel`]: KVM (`-cpu host`)
//! on hardware virtualisation, TCG without KVM and under PVM, whose KVM cannot boot a
//! stock Linux kernel (see `vtnt_unikernel::accel`; `VTNT_ACCEL` overrides), the disk in
//! `snapshot=on` mode, the NIC
//! on the lab's VM front (`-netdev dgram` to the lab's UDP port). The kernel command line
//! carries the guest address (`vtnt.ip=`, `vtnt.gw=`, the lab ranges routed to the gateway
//! instead of a default route: `vtnt.nets=`; on a lab their IPv6 twins too, `vtnt.ip6=`,
//! `vtnt.gw6=`, `vtnt.nets6=`, set statically as the lab's VM front expects, docs/lab.md)
//! and the job (`vtnt.job=`, base64 of
//! one word per line; a long target list as a second disk, [`TARGETS_DISK`]); `vtnt-job.service` configures `eth0`, runs the job, prints its
//! output on the serial console as `VTNT|` lines as it comes, between `VTNT-BEGIN` and
//! `VTNT-END rc=N`, and powers the VM off (`-no-reboot` makes QEMU exit). With
//! `vtnt.iperf3=PORT` instead of a job ([`start_iperf3`]) it configures `eth0` the same
//! way and runs `iperf3 -s -p PORT` until the VM is killed; with `vtnt.fw=` ([`start_nf`])
//! it runs the firewall NF (`vtnt fw run`) between two NICs on TAP devices, the rule file
//! its second disk, until the VM is killed, the script itself the kernel's `init`; with
//! `vtnt.router=` ([`start_router`]) likewise, but the guest's own kernel forwards between
//! the NICs through iptables or nftables (Debian's, in the box) loaded with that file.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, IoContext, Result};
use vtnt_unikernel::accel::Accelerator;

use crate::cgroup::Cgroup;
use crate::net::{Attached, Tap};
use crate::proc::Supervised;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;
use crate::{debian, paths};

/// File name of the VM box.
pub const IMAGE_NAME: &str = "vtnt-vm-box.tar";
/// Where the guest sees a job's long target list or the NF's rule file: its second virtio
/// disk, whose sectors hold the text (padded with blank lines).
pub const TARGETS_DISK: &str = "/dev/vdb";
/// Guest memory, as the paper's Vagrant box.
pub const MEMORY_MIB: u32 = 256;

const JOB_SCRIPT: &str = r#"#!/bin/sh
# vtnt-job: run the job from the kernel command line, report it on the serial console,
# power off. Installed by vtnt-runtimes.
IP= GW= NETS= IP6= GW6= NETS6= JOB= IPERF3= FW= ROUTER=
for w in $(cat /proc/cmdline); do
  case "$w" in
    vtnt.ip=*) IP=${w#vtnt.ip=} ;;
    vtnt.gw=*) GW=${w#vtnt.gw=} ;;
    vtnt.nets=*) NETS=${w#vtnt.nets=} ;;
    vtnt.ip6=*) IP6=${w#vtnt.ip6=} ;;
    vtnt.gw6=*) GW6=${w#vtnt.gw6=} ;;
    vtnt.nets6=*) NETS6=${w#vtnt.nets6=} ;;
    vtnt.job=*) JOB=${w#vtnt.job=} ;;
    vtnt.iperf3=*) IPERF3=${w#vtnt.iperf3=} ;;
    vtnt.fw=*) FW=${w#vtnt.fw=} ;;
    vtnt.router=*) ROUTER=${w#vtnt.router=} ;;
  esac
done
ip link set lo up
if [ -n "$IP" ]; then
  i=0
  while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
  # IPv6 is static too: no router advertisement may bring a default route
  [ -n "$IP6" ] && echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_ra
  ip link set eth0 up
  ip addr add "$IP" dev eth0
  # only the lab's ranges lead to the gateway: no default route, so vtnt's route check
  # knows this is the lab (an on-link range may already be there)
  for n in $(echo "$NETS" | tr , ' '); do
    [ -n "$GW" ] && { ip route add "$n" via "$GW" 2>/dev/null || true; }
  done
  if [ -n "$IP6" ]; then
    # the address is the lab's to give (its twin of the IPv4 one): no duplicate check
    ip -6 addr add "$IP6" dev eth0 nodad
    for n in $(echo "$NETS6" | tr , ' '); do
      ip -6 route add "$n" via "$GW6" 2>/dev/null || true
    done
  fi
fi
# `vtnt.iperf3=PORT`: the stream endpoint of `vtnt bench net` instead of a job
if [ -n "$IPERF3" ]; then
  echo "VTNT-IPERF3 port=$IPERF3" >/dev/ttyS0
  exec iperf3 -s -p "$IPERF3" >/dev/null 2>&1
fi
# `vtnt.fw=ARGS` or `vtnt.router=ARGS` instead of a job, with this script as the
# kernel's init (`init=`: no systemd, half the boot under TCG), between two NICs renamed
# A and B (the host's TAPs, as the rules' -i/-o name them), up without addresses, offloads
# off as on the bench's veths; their lines on the console until the VM is killed.
# fw: the firewall NF (`vtnt fw run ARGS`, A and B its last two words). router: A, B, each
# end's address and MAC, the rule file, then a loader (`iptables-restore`, `nft -f -`)
# that reads the file on its stdin: this kernel then forwards between the ends through
# netfilter, as the bench's NF namespace does for its kernel baselines
[ -n "$FW" ] && JOB=$FW
[ -n "$ROUTER" ] && JOB=$ROUTER
set --
while IFS= read -r w; do set -- "$@" "$w"; done <<EOF
$(echo "$JOB" | base64 -d)
EOF
if [ -n "$FW$ROUTER" ]; then
  # the kernel gives init no PATH
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  if [ -n "$FW" ]; then
    eval "A=\${$(($# - 1))} B=\${$#}"
  else
    A=$1 B=$2 AA=$3 MA=$4 AB=$5 MB=$6 RULES=$7
    shift 7
  fi
  # an end: its host route, its MAC a permanent neighbour (no ARP of our own)
  end() { ip route add "$2/32" dev "$1" && ip neigh replace "$2" lladdr "$3" dev "$1" nud permanent; }
  i=0
  while [ ! -e /sys/class/net/eth1 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
  echo "VTNT-BEGIN" >/dev/ttyS0
  # its stderr streams too: the first line says when the rules hold
  {
    ip link set eth0 name "$A" && ip link set eth1 name "$B" &&
      ethtool -K "$A" tx off tso off gso off gro off &&
      ethtool -K "$B" tx off tso off gso off gro off &&
      ip link set "$A" up && ip link set "$B" up &&
      if [ -n "$FW" ]; then
        /usr/local/bin/vtnt "$@"
      else
        end "$A" "$AA" "$MA" && end "$B" "$AB" "$MB" &&
          ip route add default via "$AB" dev "$B" &&
          echo 1 >/proc/sys/net/ipv4/ip_forward &&
          echo 0 >/proc/sys/net/ipv4/conf/all/rp_filter &&
          t0=$(date +%s%N) && "$@" <"$RULES" && t1=$(date +%s%N) &&
          us=$(((t1 - t0) / 1000)) &&
          printf 'vtnt router: %s loaded in %d.%03d ms\n' "$1" $((us / 1000)) $((us % 1000)) &&
          exec sleep infinity
      fi
    echo $? >/run/vtnt.rc
  } 2>&1 | sed -u 's/^/VTNT|/' >/dev/ttyS0
  # it ended: the kernel's last words say why when it was killed (the console shows
  # only its gravest)
  dmesg | tail -n 12 | sed 's/^/VTNT|kernel: /' >/dev/ttyS0
  echo "VTNT-END rc=$(cat /run/vtnt.rc)" >/dev/ttyS0
  # the kernel's init (no systemd to power off with): off at once
  echo o >/proc/sysrq-trigger
  exit 0
fi
# results stream out as they are printed (a density ramp watches for them while the
# job holds); diagnostics and the status follow at the end
echo "VTNT-BEGIN" >/dev/ttyS0
{ /usr/local/bin/vtnt "$@" 2>/run/vtnt.err; echo $? >/run/vtnt.rc; } | sed -u 's/^/VTNT|/' >/dev/ttyS0
{ sed 's/^/VTNT-ERR|/' /run/vtnt.err; echo "VTNT-END rc=$(cat /run/vtnt.rc)"; } >/dev/ttyS0
systemctl poweroff --no-block
"#;

const UNIT: &str = "[Unit]
Description=vTNT job from the kernel command line
ConditionKernelCommandLine=|vtnt.job
ConditionKernelCommandLine=|vtnt.iperf3
ConditionKernelCommandLine=|vtnt.fw

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/vtnt-job
StandardOutput=journal
StandardError=journal

[Install]
WantedBy=multi-user.target
";

/// Builds the VM box in the image cache (debootstrap once, then the disk).
pub fn build_image(opts: &BuildOptions) -> Result<ImageInfo> {
    let bin = paths::static_vtnt()?;
    // the box is its vtnt, its Debian packages and what this module puts beside them
    let image = paths::CachedImage::new(paths::images_dir()?.join(IMAGE_NAME)).with_recipe(&[
        JOB_SCRIPT.as_bytes(),
        UNIT.as_bytes(),
        debian::VM_PACKAGES.as_bytes(),
    ]);
    let dst = &image.path;
    if image.stale(opts.rebuild, &bin)? {
        let qemu_img = paths::need("qemu-img", "qemu-utils")?;
        let mkfs = paths::need("mkfs.ext4", "e2fsprogs")?;
        let base = debian::vm_rootfs(opts.rebuild)?;
        let tmp = paths::TempDir::new("vm-build")?;
        let root = tmp.path().join("root");
        debian::link_tree(&base, &root)?;
        // Debian's iperf3 for `vtnt bench net`'s endpoint in the VM, copied from this
        // host (the same suite) with the libraries the rootfs lacks
        // and its ethtool, with which the NF (`vtnt.fw=`) turns offloads off
        for program in ["iperf3", "ethtool"] {
            if let Some(p) = paths::which(program) {
                debian::add_program(&p, &root)?;
            }
        }
        let vtnt = std::fs::read(&bin).doing(|| "reading the static vtnt".into())?;
        debian::put_file(&root.join("usr/local/bin/vtnt"), &vtnt, 0o755)?;
        debian::put_file(
            &root.join("usr/local/sbin/vtnt-job"),
            JOB_SCRIPT.as_bytes(),
            0o755,
        )?;
        debian::put_file(
            &root.join("etc/systemd/system/vtnt-job.service"),
            UNIT.as_bytes(),
            0o644,
        )?;
        let wants = root.join("etc/systemd/system/multi-user.target.wants");
        std::fs::create_dir_all(&wants).doing(|| format!("creating {}", wants.display()))?;
        let link = wants.join("vtnt-job.service");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/etc/systemd/system/vtnt-job.service", &link)
            .doing(|| format!("linking {}", link.display()))?;
        debian::put_file(
            &root.join("etc/fstab"),
            b"/dev/vda / ext4 defaults,errors=remount-ro 0 1\n",
            0o644,
        )?;
        debian::put_file(&root.join("etc/hostname"), b"vtnt-vm\n", 0o644)?;
        let boot = tmp.path().join("box");
        std::fs::create_dir_all(&boot).doing(|| format!("creating {}", boot.display()))?;
        for (prefix, name) in [("vmlinuz-", "vmlinuz"), ("initrd.img-", "initrd.img")] {
            let f = newest(&root.join("boot"), prefix)?;
            std::fs::copy(&f, boot.join(name)).doing(|| format!("copying {}", f.display()))?;
        }
        let bytes = debian::tree_bytes(&root)?;
        let fs_mib = bytes / (1 << 20) * 13 / 10 + 256;
        let raw = tmp.path().join("disk.raw");
        paths::run_cmd(
            Command::new(mkfs)
                .args(["-q", "-F", "-L", "vtntroot", "-d"])
                .arg(&root)
                .arg(&raw)
                .arg(format!("{fs_mib}M")),
        )?;
        let installed = paths::allocated(&raw)?
            + paths::file_size(&boot.join("vmlinuz"))?
            + paths::file_size(&boot.join("initrd.img"))?;
        paths::run_cmd(
            Command::new(qemu_img)
                .args(["convert", "-c", "-O", "qcow2"])
                .arg(&raw)
                .arg(boot.join("disk.qcow2")),
        )?;
        let part = dst.with_extension("part");
        paths::run_cmd(
            Command::new("tar")
                .arg("-C")
                .arg(&boot)
                .arg("-cf")
                .arg(&part)
                .args(["disk.qcow2", "vmlinuz", "initrd.img"]),
        )?;
        std::fs::rename(&part, dst)
            .doing(|| format!("moving {} to {}", part.display(), dst.display()))?;
        image.record(installed, &bin)?;
    }
    Ok(ImageInfo {
        runtime: Runtime::Vm,
        download_bytes: paths::file_size(dst)?,
        size_bytes: image.size()?,
        path: image.path,
        size_note: "ext4 disk blocks in use + kernel + initrd; download is a compressed qcow2 box"
            .into(),
        pin: None,
    })
}

fn newest(dir: &Path, prefix: &str) -> Result<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .doing(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    v.sort();
    v.pop().ok_or_else(|| {
        Error::Image(format!(
            "no {prefix}* in {} (is linux-image-amd64 in the rootfs?)",
            dir.display()
        ))
    })
}

/// Unpacks a fetched box into `dir`; returns the directory holding its files.
pub fn install(tarball: &Path, dir: &Path) -> Result<PathBuf> {
    let d = dir.join("box");
    std::fs::create_dir_all(&d).doing(|| format!("creating {}", d.display()))?;
    paths::run_cmd(
        Command::new("tar")
            .arg("-C")
            .arg(&d)
            .arg("-xf")
            .arg(tarball),
    )?;
    for f in ["disk.qcow2", "vmlinuz", "initrd.img"] {
        if !d.join(f).is_file() {
            return Err(Error::Image(format!(
                "the VM box {} has no {f}",
                tarball.display()
            )));
        }
    }
    Ok(d)
}

/// The accelerator of the Debian VM: `vtnt_unikernel::accel::for_linux` (KVM on hardware
/// virtualisation; TCG without KVM and under PVM, which cannot boot a stock Linux
/// kernel; `VTNT_ACCEL` overrides).
pub fn accel() -> Accelerator {
    vtnt_unikernel::accel::for_linux()
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Boots one VM of the box in `box_dir` on the lab's VM front (or a TAP device), in
/// `cgroup`, to run `spec`'s job.
pub fn start(
    box_dir: &Path,
    net: &Attached,
    spec: &InstanceSpec,
    cgroup: &Cgroup,
) -> Result<Supervised> {
    let job = crate::guest::guest_job(&spec.job, TARGETS_DISK);
    if job.args.iter().any(|w| w.contains('\n')) {
        return Err(Error::Runtime("job words may not contain newlines".into()));
    }
    let disk = match &job.targets {
        Some(list) => {
            // a raw disk of whole sectors: the list, then newlines (blank lines it skips)
            let mut bytes = list.clone().into_bytes();
            bytes.resize(bytes.len().div_ceil(512) * 512, b'\n');
            let f = box_dir.join(format!("targets-{}", spec.index));
            std::fs::write(&f, bytes).doing(|| format!("writing {}", f.display()))?;
            Some(f)
        }
        None => None,
    };
    let what = format!("vtnt.job={}", base64(job.args.join("\n").as_bytes()));
    boot(
        box_dir,
        net,
        spec.index,
        spec.job.engine.allow_public,
        &what,
        disk.as_deref(),
        cgroup,
    )
}

/// Boots one VM of the box in `box_dir` on `net`, in `cgroup`, to serve iperf3 on `port`
/// instead of a job (`vtnt bench net`'s endpoint in the full VM) until it is killed.
pub fn start_iperf3(
    box_dir: &Path,
    net: &Attached,
    index: u32,
    port: u16,
    cgroup: &Cgroup,
) -> Result<Supervised> {
    boot(
        box_dir,
        net,
        index,
        false,
        &format!("vtnt.iperf3={port}"),
        None,
        cgroup,
    )
}

/// The box's kernel command line before the `vtnt.` words. No login prompt on the
/// console: a getty starting on ttyS0 hangs it up, and the job's writers there lose their
/// output (its last lines, or the whole job with a broken pipe) when several guests boot
/// slowly under TCG. `no_timer_check`: a guest starved of CPU while booting under TCG
/// otherwise may panic on "IO-APIC + timer doesn't work" (both seen in `vtnt bench
/// fleet`, four VMs on two cores).
const KERNEL_ARGS: &str = "root=/dev/vda rw console=ttyS0 quiet loglevel=3 systemd.show_status=0 systemd.mask=serial-getty@ttyS0.service no_timer_check net.ifnames=0";

/// Boots the box: guest number `index` on `net` (a default route too when
/// `allow_public`), with `what` (`vtnt.job=` or `vtnt.iperf3=`) on its command line and
/// `targets` (a job's long target list) as its second disk, [`TARGETS_DISK`].
fn boot(
    box_dir: &Path,
    net: &Attached,
    index: u32,
    allow_public: bool,
    what: &str,
    targets: Option<&Path>,
    cgroup: &Cgroup,
) -> Result<Supervised> {
    let qemu = paths::need("qemu-system-x86_64", "qemu-system-x86")?;
    // The lab's ranges via the gateway (so the guest's route check knows the lab); on a
    // TAP, a default route too when the job may probe public targets (the guest's policy
    // then treats lab ranges behind that uplink as the Internet's, as it should).
    let lab_nets = vtnt_policy::LAB_NETS.map(|n| n.to_string()).join(",");
    let (addr, len, gateway, nets, netdev, ipv6) = match net {
        Attached::Lab(lab) => {
            let (addr, len) = lab.vm.guest(index)?;
            let local_port = free_udp_port()?;
            let netdev = format!(
                "dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port={local_port},remote.type=inet,remote.host=127.0.0.1,remote.port={}",
                lab.vm.port
            );
            let ipv6 = lab_twins(&addr, len, &lab.vm.gateway)?;
            (addr, len, lab.vm.gateway.clone(), lab_nets, netdev, ipv6)
        }
        Attached::Tap(t) => (
            t.addr.to_string(),
            t.len,
            t.gateway.to_string(),
            if allow_public {
                format!("{lab_nets},default")
            } else {
                lab_nets
            },
            tap_netdev(&t.ifname, "n0"),
            t.ipv6.map_or_else(String::new, |v6| {
                let nets = vtnt_policy::v6::LAB_NETS6.map(|n| n.to_string()).join(",");
                let nets = if allow_public {
                    format!("{nets},default")
                } else {
                    nets
                };
                ipv6_words(v6.addr, v6.len, v6.gateway, &nets)
            }),
        ),
        Attached::Host => {
            return Err(Error::Network(
                "the VM reaches a network through a lab or a TAP device".into(),
            ))
        }
    };
    let mac = guest_mac(index);
    let append = format!(
        "{KERNEL_ARGS} vtnt.ip={addr}/{len} vtnt.gw={gateway} vtnt.nets={nets}{ipv6} {what}"
    );
    // joins the cgroup first, then (a TAP in another namespace) that namespace
    let cmd = match net {
        Attached::Tap(Tap {
            netns: Some(ns), ..
        }) => {
            let mut c = cgroup.wrap("ip");
            c.args(["netns", "exec", ns]).arg(&qemu);
            c
        }
        _ => cgroup.wrap(&qemu.display().to_string()),
    };
    let cmd = qemu_args(
        cmd,
        box_dir,
        MEMORY_MIB,
        &append,
        targets,
        &[(netdev, "n0".into(), mac)],
    );
    Ok(Supervised::spawn(
        cmd,
        &format!("the Debian VM (guest {addr})"),
    )?)
}

/// The `-netdev` value of QEMU's TAP backend on the existing device `ifname`, as the
/// unikernel's VMs plug theirs (`vtnt_unikernel::qemu::NetBackend`).
fn tap_netdev(ifname: &str, id: &str) -> String {
    vtnt_unikernel::qemu::NetBackend::Tap {
        ifname: ifname.into(),
    }
    .netdev(id)
    .0
}

/// Guest `index`'s MAC address; a filter's ([`start_nf`], [`start_router`]) NIC `index`'s
/// (A is 0, B is 1), to which the ends address their frames when the guest routes.
pub fn guest_mac(index: u32) -> String {
    format!("52:54:00:76:75:{:02x}", index % 256)
}

/// `cmd` (QEMU, maybe behind wrappers) given the box's arguments: `memory_mib`, the
/// kernel command line `append`, the root disk (a snapshot), `second` as the read-only
/// second disk, and one virtio NIC for each `(netdev, id, mac)` of `nics`.
fn qemu_args(
    mut cmd: Command,
    box_dir: &Path,
    memory_mib: u32,
    append: &str,
    second: Option<&Path>,
    nics: &[(String, String, String)],
) -> Command {
    cmd.args([
        "-machine",
        "q35",
        "-m",
        &memory_mib.to_string(),
        "-smp",
        "1",
    ])
    .args(accel().qemu_args())
    .args([
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
    ])
    .arg("-kernel")
    .arg(box_dir.join("vmlinuz"))
    .arg("-initrd")
    .arg(box_dir.join("initrd.img"))
    .arg("-append")
    .arg(append)
    .arg("-drive")
    .arg(format!(
        "file={},if=virtio,format=qcow2,snapshot=on",
        box_dir.join("disk.qcow2").display()
    ))
    .args(second.iter().flat_map(|f| {
        [
            "-drive".to_string(),
            format!("file={},if=virtio,format=raw,readonly=on", f.display()),
        ]
    }))
    .args(nics.iter().flat_map(|(netdev, id, mac)| {
        [
            "-netdev".to_string(),
            netdev.clone(),
            "-device".to_string(),
            format!("virtio-net-pci,netdev={id},mac={mac},romfile="),
        ]
    }))
    // entropy for the guest's CRNG: TCG's CPU model has no RDRAND and the disk is a
    // snapshot, so no random seed survives from one boot to the next
    .args([
        "-object",
        "rng-random,id=rng0,filename=/dev/urandom",
        "-device",
        "virtio-rng-pci,rng=rng0",
    ]);
    cmd
}

/// Guest memory of the NF for a rule file of `rule_bytes`: [`MEMORY_MIB`] plus three
/// bytes per byte of the file (`vtnt fw check`'s peak RSS is about 2.5 per byte: 176 MB
/// for the 70 MB of a million `vtnt fw gen` rules, read and compiled, 175 bytes a rule).
pub fn nf_memory_mib(rule_bytes: u64) -> u32 {
    let extra = (rule_bytes * 3).div_ceil(1 << 20);
    (u64::from(MEMORY_MIB) + extra).min(u64::from(u32::MAX)) as u32
}

/// Boots the box in `box_dir` as the firewall network function: `vtnt fw run --rules
/// RULES [--max-conns N] A B` in the guest (`vtnt.fw=`; `max_conns` None: the NF's
/// default table), its first NIC on the existing TAP device `taps[0]` (A) and its second
/// on `taps[1]` (B: named so in the guest, as the rules' `-i`/`-o` name them), QEMU in
/// network namespace `netns` (None: this one). The rule file is the
/// guest's second disk ([`TARGETS_DISK`]), padded with newlines to whole sectors (blank
/// lines, which both syntaxes skip: the NF reads the device to its end); guest memory
/// [`nf_memory_mib`]; the accelerator [`accel`]. It runs until it is killed; its console
/// (the process's stdout) carries the NF's lines as `VTNT|` lines, the first of them
/// saying when the rules hold (`... loaded in X ms ...`); should the NF end (a rule file
/// it refuses), `VTNT-END rc=N` follows and the VM powers off. The job script is the
/// guest's init (no systemd: a boot to the NF under TCG takes ~22 s instead of ~50).
pub fn start_nf(
    box_dir: &Path,
    taps: [&str; 2],
    netns: Option<&str>,
    rules: &Path,
    max_conns: Option<u32>,
) -> Result<Supervised> {
    let mut args = vec![
        "fw".to_string(),
        "run".into(),
        "--rules".into(),
        TARGETS_DISK.into(),
    ];
    if let Some(n) = max_conns {
        args.extend(["--max-conns".into(), n.to_string()]);
    }
    args.extend(taps.map(String::from));
    boot_filter(box_dir, taps, netns, rules, nf_memory_mib, "fw", &args)
}

/// A kernel filter the Debian VM forwards through ([`start_router`]): how its rule file is
/// loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFilter {
    /// `iptables-restore` of an iptables-save file.
    Iptables,
    /// `nft -f -` of an nft ruleset.
    Nftables,
}

impl KernelFilter {
    /// The loader and its arguments; it reads the rule file on its stdin.
    pub fn loader(self) -> &'static [&'static str] {
        match self {
            KernelFilter::Iptables => &["iptables-restore"],
            KernelFilter::Nftables => &["nft", "-f", "-"],
        }
    }
}

/// Guest memory of the kernel baseline for a rule file of `rule_bytes`: 2 GiB (eight
/// times [`MEMORY_MIB`]) plus sixteen bytes per byte of the file, room for the loader's
/// parse of it and the kernel's rules and sets at once: Debian's kernel took ~0.9 GB
/// (QEMU's RSS) for nft's sets of 10,000 generated rules, and in 256 or 512 MiB its OOM
/// killer took `nft -f`. QEMU touches only what the guest uses.
pub fn router_memory_mib(rule_bytes: u64) -> u32 {
    let extra = (rule_bytes * 16).div_ceil(1 << 20);
    (8 * u64::from(MEMORY_MIB) + extra).min(u64::from(u32::MAX)) as u32
}

/// Boots the box in `box_dir` as a Linux router that filters with `filter` (the kernel
/// baselines of `vtnt bench fw` in the full VM): its NICs A and B on `taps` as
/// [`start_nf`]'s, `ends` the (address, MAC) of the host at the end of A and of B (host
/// routes, permanent neighbours, the default route towards B's), forwarding on, the rule
/// file (the second disk, as [`start_nf`]'s) loaded once by `filter`'s loader. The first
/// `VTNT|` line says `... loaded in X ms` when the rules hold (the loader's time, measured
/// in the guest); a file the loader refuses ends the VM with `VTNT-END rc=N`. Guest
/// memory [`router_memory_mib`].
pub fn start_router(
    box_dir: &Path,
    taps: [&str; 2],
    netns: Option<&str>,
    rules: &Path,
    filter: KernelFilter,
    ends: [(Ipv4Addr, &str); 2],
) -> Result<Supervised> {
    let mut args: Vec<String> = taps.map(String::from).into();
    for (addr, mac) in ends {
        args.extend([addr.to_string(), mac.to_string()]);
    }
    args.push(TARGETS_DISK.into());
    args.extend(filter.loader().iter().map(|w| w.to_string()));
    boot_filter(
        box_dir,
        taps,
        netns,
        rules,
        router_memory_mib,
        "router",
        &args,
    )
}

/// Boots the box as a filter between `taps` (the job script's `vtnt.MODE=` with `args`,
/// one word a line), `rules` its second disk, `memory` the guest's MiB for the file's
/// size in bytes, QEMU in `netns`.
fn boot_filter(
    box_dir: &Path,
    taps: [&str; 2],
    netns: Option<&str>,
    rules: &Path,
    memory: fn(u64) -> u32,
    mode: &str,
    args: &[String],
) -> Result<Supervised> {
    let qemu = paths::need("qemu-system-x86_64", "qemu-system-x86")?;
    if taps[0] == taps[1] || taps.iter().any(|t| t.is_empty() || t.contains(['\n', ' '])) {
        return Err(Error::Network(format!(
            "the filter needs two different interface names, got {taps:?}"
        )));
    }
    if args.iter().any(|w| w.contains('\n')) {
        return Err(Error::Runtime(
            "filter words may not contain newlines".into(),
        ));
    }
    let mut bytes = std::fs::read(rules).doing(|| format!("reading {}", rules.display()))?;
    let memory = memory(bytes.len() as u64);
    bytes.resize(bytes.len().div_ceil(512).max(1) * 512, b'\n');
    // a new file: a VM before this one keeps what it has open
    let disk = box_dir.join("nf-rules");
    let _ = std::fs::remove_file(&disk);
    std::fs::write(&disk, bytes).doing(|| format!("writing {}", disk.display()))?;
    // the job script is init: systemd's boot to its unit is half of a boot under TCG
    // (~25 of ~50 s here), and the filter needs nothing it starts (the initramfs has
    // mounted /proc, /sys, /dev and /run, its udev has loaded the NICs' driver)
    let append = format!(
        "{KERNEL_ARGS} init=/usr/local/sbin/vtnt-job panic=-1 vtnt.{mode}={}",
        base64(args.join("\n").as_bytes())
    );
    let cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&qemu);
            c
        }
        None => Command::new(&qemu),
    };
    let nics = [0, 1].map(|i| {
        let id = format!("n{i}");
        (tap_netdev(taps[i], &id), id, guest_mac(i as u32))
    });
    let cmd = qemu_args(cmd, box_dir, memory, &append, Some(&disk), &nics);
    Ok(Supervised::spawn(cmd, &format!("the {mode}'s Debian VM"))?)
}

/// The kernel command line's IPv6 words: the guest's address `addr`/`len`, its router
/// `gateway` and the `nets` routed to it (`default` among them for a default route).
fn ipv6_words(addr: Ipv6Addr, len: u8, gateway: Ipv6Addr, nets: &str) -> String {
    format!(" vtnt.ip6={addr}/{len} vtnt.gw6={gateway} vtnt.nets6={nets}")
}

/// [`ipv6_words`] for a guest at `addr`/`len` behind `gateway` on a lab's VM front: their
/// twins and the lab's IPv6 range (docs/lab.md, "Attaching VMs").
fn lab_twins(addr: &str, len: u8, gateway: &str) -> Result<String> {
    use vtnt_lab_linux::state::{to_v6, LAB6_PREFIX};
    let twin = |a: &str| {
        a.parse::<std::net::Ipv4Addr>()
            .map(to_v6)
            .map_err(|e| Error::Lab(format!("guest address {a}: {e}")))
    };
    let (net, net_len) = LAB6_PREFIX;
    Ok(ipv6_words(
        twin(addr)?,
        96 + len,
        twin(gateway)?,
        &format!("{net}/{net_len}"),
    ))
}

/// A UDP port on 127.0.0.1 free right now (QEMU binds it a moment later).
fn free_udp_port() -> Result<u16> {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").doing(|| "finding a free UDP port".into())?;
    Ok(s.local_addr()
        .doing(|| "finding a free UDP port".into())?
        .port())
}

/// The job's run read from the VM's serial console: its `VTNT|` lines are the job's
/// stdout, `VTNT-ERR|` its stderr, `VTNT-END rc=N` its exit status.
pub fn ran(fin: crate::proc::Finished) -> crate::ran::Ran {
    let console = &fin.stdout;
    crate::ran::Ran {
        stdout: guest_stdout(console),
        stderr: guest_stderr(console) + &fin.stderr + &missing_end(console),
        code: guest_code(console),
        elapsed: fin.elapsed,
        accelerator: Some(accel().to_string()),
        spawn_to_first_probe: None,
    }
}

/// The job's output in one console line (a `VTNT|` line), None for the console's own.
pub fn job_line(line: &str) -> Option<&str> {
    after(line, "VTNT|")
}

/// The job's stdout from the serial console (the `VTNT|` lines).
fn guest_stdout(console: &str) -> String {
    guest_stream(console, "VTNT|")
}

/// The job's stderr from the serial console (the `VTNT-ERR|` lines).
fn guest_stderr(console: &str) -> String {
    guest_stream(console, "VTNT-ERR|")
}

fn guest_stream(console: &str, prefix: &str) -> String {
    console
        .lines()
        .filter_map(|l| after(l, prefix))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// What follows `marker` in a console line. A marker need not start its line: a getty's
/// `login:` prompt, printed while a job holds, can precede it.
fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let line = line.trim_end_matches('\r');
    line.find(marker).map(|i| &line[i + marker.len()..])
}

/// When the console lacks the job's `VTNT-END` line, a note with the console's last lines
/// (what the guest did instead); empty otherwise.
fn missing_end(console: &str) -> String {
    if guest_code(console).is_some() {
        return String::new();
    }
    let tail: Vec<&str> = console.lines().rev().take(15).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!(
        "the VM's console has no VTNT-END line; its last lines:\n{}\n",
        tail.join("\n")
    )
}

/// The job's exit code from the console's `VTNT-END rc=N` line.
fn guest_code(console: &str) -> Option<i32> {
    console
        .lines()
        .find_map(|l| after(l, "VTNT-END rc=").and_then(|v| v.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_coreutils() {
        assert_eq!(base64(b"trace\n-P"), "dHJhY2UKLVA=");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
    }

    #[test]
    fn the_nfs_memory_grows_with_its_rules() {
        assert_eq!(nf_memory_mib(0), MEMORY_MIB);
        // a million `vtnt fw gen` rules: 70 MB of text, ~200 MiB more
        assert_eq!(nf_memory_mib(70_201_496), MEMORY_MIB + 201);
        // the kernel baselines' loaders take more: ~1.1 GiB more for those rules
        assert_eq!(router_memory_mib(0), 8 * MEMORY_MIB);
        assert_eq!(router_memory_mib(70_201_496), 8 * MEMORY_MIB + 1072);
    }

    #[test]
    fn console_parsing() {
        let c =
            "[  OK  ] noise\r\nVTNT-BEGIN\r\nVTNT|{\"a\":1}\r\nVTNT-ERR|warn\r\nVTNT-END rc=0\r\n";
        assert_eq!(guest_stdout(c), "{\"a\":1}\n");
        assert_eq!(guest_code(c), Some(0));
        assert_eq!(guest_stderr(c), "warn\n");
        assert_eq!(guest_code("nothing"), None);
        assert!(missing_end("nothing").contains("no VTNT-END"));
        assert_eq!(missing_end(c), "");
    }

    #[test]
    fn markers_after_a_login_prompt_count() {
        // a getty prints its prompt on the console while a job holds
        let c = "VTNT|{\"a\":1}\r\n\r\nvtnt-vm login: VTNT-END rc=3\r\n";
        assert_eq!(guest_code(c), Some(3));
        assert_eq!(guest_stdout("vtnt-vm login: VTNT|{}\r\n"), "{}\n");
    }
}
