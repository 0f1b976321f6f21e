#!/usr/bin/env bash
# The test command of README.md: installs what the tests need, then runs every test of the
# workspace (unit, engine simulations, fuzz corpora, real namespaces with scamper as a
# peer, QEMU boots of the unikernel). Needs root for namespaces and raw sockets.
set -euo pipefail
cd "$(dirname "$0")/.."
# each step says when it starts, so a slow CI run shows where its minutes went
step() { echo "vtnt test: [$((SECONDS / 60))m$((SECONDS % 60))s] $*" >&2; }
step setup
export VTNT_SETUP_CHECKS=1
source scripts/setup.sh
export CARGO_TERM_COLOR=never
# setup.sh installed every tool the tests need: a test that still skips fails, unless its
# reason is on vtnt-testkit's allow-list (ARCHITECTURE.md, "Tests and fuzzing")
export VTNT_REQUIRE_ALL=1
# the VM image build needs about 2 GB of scratch space next to target/: say what there is
df -h . /var/lib 2>/dev/null | sed 's/^/vtnt test: /' || true
# formatting and lints are part of the house style: fail early on drift
step lints
cargo fmt --all -- --check
cargo clippy --workspace --exclude vtnt-kernel --all-targets -q -- -D warnings
cargo clippy -p vtnt-kernel --target x86_64-unknown-none -q -- -D warnings
# the process platform (spt), and its test build that makes a forbidden call
cargo clippy -p vtnt-kernel --target x86_64-unknown-none --features spt-forbidden-call -q -- -D warnings
# the stream endpoint's image (`vtnt bench net`) and the firewall network function's
cargo clippy -p vtnt-kernel --target x86_64-unknown-none --features stream -q -- -D warnings
cargo clippy -p vtnt-kernel --target x86_64-unknown-none --features spt,fw -q -- -D warnings
cargo clippy -p vtnt-kernel --target x86_64-unknown-none --features fw -q -- -D warnings
# the engine without IPv6 probing, as the unikernel builds it (the workspace turns
# ipv6-probe on through vtnt-linux)
cargo clippy -p vtnt-engine --all-targets -q -- -D warnings
# licences and advisories of the dependency tree (deny.toml; docs/release.md): a licence
# deny.toml does not allow, or an advisory against a crate in the tree, fails here
step deny
cargo xtask deny
# what an installed vtnt carries, built once (docs/install.md): the static vtnt,
# vtnt-monitor and the unikernel's images in target/dist/lib/vtnt, which the tests' vtnt
# and the runtimes find through target/lib; the package's test reuses these builds
step dist
cargo xtask dist >/dev/null
# Tests that start namespaces or VMs use unique names; two threads keep the 2-core machine
# responsive under TCG emulation.
step tests
cargo test --workspace --exclude vtnt-kernel -- --test-threads=2
cargo test -p vtnt-engine -- --test-threads=2
# the kernel's host-testable parts (command line, kvmclock arithmetic)
step kernel tests
cargo test -p vtnt-kernel
step done
