#!/usr/bin/env bash
# Installs what vTNT needs on a Debian machine, idempotently: Debian packages (the peers we
# compare against and the parts we drive: scamper, QEMU, iproute2, traceroute) and the
# rustup targets the unikernel and static builds use. Sourced by demo.sh and test.sh.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "vtnt setup: run as root (network namespaces, raw sockets and apt need it)" >&2
    exit 1
  fi
else
  SUDO=
fi

# scamper: the peer; qemu: VMs and the unikernel; docker.io/containerd/runc: container
# runtimes; debootstrap/qemu-utils/e2fsprogs: the full-VM image; fonts: text in plots;
# strace: the policy tests count the probes a refused run sends (none); util-linux
# (nsenter, setpriv) and coreutils (mkfifo, mknod): the runtime and output-safety tests;
# iptables: the transmit-stamp test refuses a probe with netfilter; nats-server: the
# fleet's broker (`vtnt fleet up`) and its tests; openssl: the fleet's TLS test makes its
# own CA; musl-tools: musl-gcc for the C parts of the static vtnt's TLS (ring;
# .cargo/config.toml); iperf3: `vtnt bench net`'s driver and Linux endpoints;
# dnsmasq-base: PTR records for `trace -O ptr`'s test; man-db: the test that renders
# every man page (`man -l`); libcap2-bin: setcap, which the package's postinst runs and
# its test repeats, and systemd: systemd-analyze, which checks the package's units
# (docs/install.md); busybox-static: the shell, cpio and insmod of the Linux guest in
# which the package's test runs vtnt-monitor on nested (hardware-style) KVM; chromium: the
# headless browser `vtnt serve`'s page tests drive over its DevTools protocol; ethtool:
# the firewall NF's tests and bench turn the veths' checksum and segmentation offloads
# off (an AF_PACKET bridge forwards frames as the kernel hands them over); nftables: the
# firewall bench's nft-with-sets baseline and its verdict test; sockperf, hping3 and
# iputils-ping: the firewall bench's request/response, TCP SYN and ICMP latency drivers;
# lxd (and its client, lxd-client): the firewall bench's LXD row (`--runtimes lxd`, a
# daemon of its own per run, in the NF namespace with its own state directory: the
# package's daemon, socket-activated under systemd, is never initialised, so it adds no
# bridge and no iptables rule that Docker's engine or the other tests would meet); bird2:
# the lab's BGP speaker and the vantage point's border router (`vtnt lab up --bgp`).
# Every tool a test needs is here: scripts/test.sh fails a test that skips for want of one.
packages=(scamper qemu-system-x86 qemu-utils iproute2 traceroute procps binutils
  ca-certificates docker.io containerd runc debootstrap e2fsprogs fonts-dejavu-core
  util-linux coreutils gzip tar strace iptables nftables nats-server openssl musl-tools iperf3
  sockperf hping3 iputils-ping lxd lxd-client bird2
  dnsmasq-base man-db libcap2-bin systemd busybox-static chromium ethtool)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "vtnt setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "vtnt setup: Rust is needed (https://rustup.rs); rustup was not found" >&2
  exit 1
fi
installed_targets=$(rustup target list --installed 2>/dev/null || true)
for t in x86_64-unknown-none x86_64-unknown-linux-musl; do
  grep -qx "$t" <<<"$installed_targets" || rustup target add "$t" >/dev/null
done

# cargo-deny, for the licence and advisory checks of scripts/test.sh (`cargo xtask
# deny`), which sets VTNT_SETUP_CHECKS: it is built from crates.io (about 4.5 minutes of
# CPU, once per machine), which the demo need not wait for
if [ -n "${VTNT_SETUP_CHECKS:-}" ]; then
  deny_version=0.20.2
  if [ "$(cargo deny --version 2>/dev/null)" != "cargo-deny $deny_version" ]; then
    echo "vtnt setup: building cargo-deny $deny_version (a few minutes, once)" >&2
    cargo install --quiet --locked cargo-deny --version "$deny_version" >&2
  fi
fi
