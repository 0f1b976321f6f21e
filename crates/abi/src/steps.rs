//! The guest's boot steps. The guest records the end of each (its platform's timestamp)
//! and reports them in the exit record as `steps_us` (guest microseconds since the first
//! instruction, 0 for a step not reached), so a run tells where its boot time went. With
//! the `marks` option a VM also writes each step's number to [`MARK_PORT`] as it ends: a
//! host tracing the VM's port I/O (Linux's `kvm:kvm_pio`) sees where each step ends.

/// The port a VM's `marks` option writes step numbers to (the POST-code port).
pub const MARK_PORT: u16 = 0x80;

/// How many steps there are (the length of the exit record's `steps_us`).
pub const COUNT: usize = 9;

/// The steps, in boot order; the number is the index in `steps_us` plus one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    /// The first Rust instruction: in a VM, the 32-bit PVH entry (page tables, long mode)
    /// is done; as a process, the guest's own seccomp filter is in.
    LongMode = 1,
    /// The console is set up and the banner printed.
    Console = 2,
    /// The clock is known (a VM's TSC frequency; a process's clock needs nothing).
    Clock = 3,
    /// A VM's IDT and local APIC timer set up (a process waits in `ppoll`).
    Idle = 4,
    /// Heap set up, boot line printed.
    Heap = 5,
    /// The network found (a VM's PCI scan or virtio-mmio probing; a process's fd 3).
    NicFound = 6,
    /// The link ready: virtio's queues set up and receive buffers posted, the monitor's
    /// or the socket's buffers allocated.
    LinkUp = 7,
    /// The first hop's MAC address known (ARP).
    Arp = 8,
    /// The first probe sent.
    FirstProbe = 9,
}

impl Step {
    /// Every step, in boot order.
    pub const ALL: [Step; COUNT] = [
        Step::LongMode,
        Step::Console,
        Step::Clock,
        Step::Idle,
        Step::Heap,
        Step::NicFound,
        Step::LinkUp,
        Step::Arp,
        Step::FirstProbe,
    ];

    /// What the step does in a VM booted by QEMU or Firecracker (the breakdown's rows).
    pub const fn describe(self) -> &'static str {
        match self {
            Step::LongMode => "first instruction -> 64-bit mode (PVH entry, page tables)",
            Step::Console => "console set-up and banner",
            Step::Clock => "clock (TSC frequency)",
            Step::Idle => "IDT and local APIC timer",
            Step::Heap => "command line, heap, boot line",
            Step::NicFound => "NIC found (PCI scan, virtio-mmio probing)",
            Step::LinkUp => "virtio set-up (queues, receive buffers)",
            Step::Arp => "ARP for the first hop",
            Step::FirstProbe => "first probe sent",
        }
    }

    /// Its index in `steps_us`.
    pub const fn index(self) -> usize {
        self as usize - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_number_order() {
        for (i, s) in Step::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
        }
    }
}
