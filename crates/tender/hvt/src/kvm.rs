//! The KVM side of the monitor: opening `/dev/kvm` with an error that says what is
//! wrong, one VM with one memory slot, and one vCPU that starts directly in 64-bit long
//! mode at privilege level 3 on the entry point.
//!
//! Why ring 3 (see `vtnt_abi::hvt`'s docs): under PVM (KVM without VMX/SVM, on a host that is
//! itself a VM) ring-0 guest code is emulated at about 1 us per instruction while ring-3
//! code runs natively; under hardware KVM ring 3 costs nothing. The segment selectors are
//! the Linux user ones ([`vtnt_abi::hvt::USER_CS`], [`vtnt_abi::hvt::USER_DS`]), which PVM requires.
#![allow(unsafe_code)]

use kvm_bindings::{kvm_regs, kvm_segment, kvm_userspace_memory_region, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::{Kvm, VcpuFd, VmFd};

use crate::memory::GuestMemory;
use crate::Error;

/// The KVM API version every kernel since 2.6.22 reports.
const KVM_API_VERSION: i32 = 12;

/// Control-register and EFER bits of the initial long-mode state.
const CR0_PE: u64 = 1;
const CR0_MP: u64 = 1 << 1;
const CR0_ET: u64 = 1 << 4;
const CR0_NE: u64 = 1 << 5;
const CR0_WP: u64 = 1 << 16;
const CR0_AM: u64 = 1 << 18;
const CR0_PG: u64 = 1 << 31;
const CR4_PAE: u64 = 1 << 5;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;
/// RFLAGS: bit 1 is always set; IOPL = 3 lets ring 3 execute `out` (under hardware KVM an
/// `out` with a lower IOPL and no TSS I/O bitmap raises #GP instead of exiting). PVM
/// accepts IOPL = 3 in KVM_SET_REGS but runs ring 3 with the host's user flags (the guest's
/// `pushfq` shows IF = 1, IOPL = 0, and KVM_GET_REGS reads IOPL = 0 back); its `out`
/// exits to the monitor all the same (tested), so no PVM-specific fallback is needed.
const RFLAGS_FIXED: u64 = 1 << 1;
const RFLAGS_IOPL3: u64 = 3 << 12;

/// Where the guest's stack pointer starts: below the image, above the page tables (the
/// guest switches to its own stack at once).
pub(crate) const BOOT_STACK: u64 = 0x8_0000;

/// Opens `/dev/kvm` and checks its API version.
pub(crate) fn open() -> Result<Kvm, Error> {
    let kvm = Kvm::new().map_err(|e| {
        Error::Kvm(match e.errno() {
            libc::ENOENT => {
                "/dev/kvm does not exist: this host has no KVM (load kvm_intel, kvm_amd or kvm_pvm)"
                    .into()
            }
            libc::EACCES | libc::EPERM => {
                "permission denied opening /dev/kvm (run as root or join the group that owns it)"
                    .into()
            }
            _ => format!("cannot open /dev/kvm: {e}"),
        })
    })?;
    match kvm.get_api_version() {
        KVM_API_VERSION => Ok(kvm),
        v => Err(Error::Kvm(format!(
            "/dev/kvm speaks KVM API version {v}, not {KVM_API_VERSION}"
        ))),
    }
}

/// Creates the VM.
pub(crate) fn create_vm(kvm: &Kvm) -> Result<VmFd, Error> {
    let vm = kvm
        .create_vm()
        .map_err(|e| Error::Kvm(format!("cannot create a VM (KVM_CREATE_VM): {e}")))?;
    // Some Intel hosts need a TSS area for real-mode emulation; ours never enters real
    // mode, and elsewhere (AMD, PVM) the call fails harmlessly.
    let _ = vm.set_tss_address(0xfffb_d000);
    Ok(vm)
}

/// Registers `mem` as slot 0 at guest-physical address 0.
pub(crate) fn register_memory(vm: &VmFd, mem: &GuestMemory) -> Result<(), Error> {
    let region = kvm_userspace_memory_region {
        slot: 0,
        flags: 0,
        guest_phys_addr: 0,
        memory_size: mem.size(),
        userspace_addr: mem.host_addr(),
    };
    // SAFETY: the region is a live mapping of exactly `memory_size` bytes owned by `mem`,
    // which outlives the VM's use of it (the run ends, and the VM's fds close, before
    // `mem` is unmapped), and it overlaps no other slot (there is none).
    unsafe { vm.set_user_memory_region(region) }
        .map_err(|e| Error::Kvm(format!("cannot register guest memory with KVM: {e}")))
}

/// Creates vCPU 0 with the host's supported CPUID; returns it and its TSC frequency in Hz.
pub(crate) fn create_vcpu(kvm: &Kvm, vm: &VmFd) -> Result<(VcpuFd, u64), Error> {
    let vcpu = vm
        .create_vcpu(0)
        .map_err(|e| Error::Kvm(format!("cannot create a vCPU: {e}")))?;
    let cpuid = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .map_err(|e| Error::Kvm(format!("KVM_GET_SUPPORTED_CPUID failed: {e}")))?;
    vcpu.set_cpuid2(&cpuid)
        .map_err(|e| Error::Kvm(format!("KVM_SET_CPUID2 failed: {e}")))?;
    let khz = vcpu.get_tsc_khz().unwrap_or(0);
    if khz == 0 {
        return Err(Error::Kvm(
            "KVM cannot tell the guest's TSC frequency (KVM_GET_TSC_KHZ), which the guest's clock needs".into(),
        ));
    }
    Ok((vcpu, u64::from(khz) * 1000))
}

/// Puts the vCPU in 64-bit mode at ring 3 with paging on (`cr3`), about to run `entry`
/// with `rdi` = `arg`.
pub(crate) fn enter(vcpu: &VcpuFd, cr3: u64, entry: u64, arg: u64) -> Result<(), Error> {
    let fail = |what: &str, e: kvm_ioctls::Error| Error::Kvm(format!("{what} failed: {e}"));
    let mut sregs = vcpu.get_sregs().map_err(|e| fail("KVM_GET_SREGS", e))?;
    let code = kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector: vtnt_abi::hvt::USER_CS,
        type_: 11, // execute/read, accessed
        present: 1,
        dpl: 3,
        db: 0,
        s: 1,
        l: 1,
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    };
    let data = kvm_segment {
        selector: vtnt_abi::hvt::USER_DS,
        type_: 3, // read/write, accessed
        db: 1,
        l: 0,
        ..code
    };
    sregs.cs = code;
    sregs.ds = data;
    sregs.es = data;
    sregs.fs = data;
    sregs.gs = data;
    sregs.ss = data;
    sregs.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_AM | CR0_PG;
    // PAE only: adding FSGSBASE or PCID makes KVM_SET_SREGS fail under PVM.
    sregs.cr4 = CR4_PAE;
    sregs.cr3 = cr3;
    sregs.efer = EFER_LME | EFER_LMA;
    vcpu.set_sregs(&sregs)
        .map_err(|e| fail("KVM_SET_SREGS", e))?;
    let regs = kvm_regs {
        rip: entry,
        rdi: arg,
        rsp: BOOT_STACK,
        rflags: RFLAGS_FIXED | RFLAGS_IOPL3,
        ..Default::default()
    };
    vcpu.set_regs(&regs).map_err(|e| fail("KVM_SET_REGS", e))
}
