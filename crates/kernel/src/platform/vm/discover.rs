//! Finding the virtio-net device: virtio-mmio slots named on the command line
//! (Firecracker, QEMU microvm with ACPI off), a PCI scan of bus 0 through the legacy
//! configuration ports 0xCF8/0xCFC (QEMU q35/pc), and, when PCI has no virtio-net
//! device, QEMU microvm's fixed virtio-mmio slots at 0xFEB0_0000 (24 in QEMU 7.2, stride 0x200,
//! devices plugged from the top slot down;
//! a read of an empty or unassigned slot returns no virtio magic).

use super::arch::x86_64::io::{inl, outl};
use super::hal::KernelHal;
use crate::platform::steps::Step;
use core::fmt;
use core::ptr::NonNull;
use virtio_drivers::transport::mmio::{MmioTransport, VirtIOHeader};
use virtio_drivers::transport::pci::bus::{
    BarInfo, Command, ConfigurationAccess, DeviceFunction, PciRoot,
};
use virtio_drivers::transport::pci::{virtio_device_type, PciTransport};
use virtio_drivers::transport::{DeviceType, SomeTransport, Transport};

/// QEMU microvm's virtio-mmio window.
const MICROVM_MMIO_BASE: u64 = 0xfeb0_0000;
const MICROVM_MMIO_STRIDE: u64 = 0x200;
const MICROVM_MMIO_SLOTS: u64 = 24;

/// Where the device was found, for the console.
#[derive(Debug, Clone, Copy)]
pub enum Location {
    Mmio { base: u64, version: u32 },
    Pci { bus: u8, device: u8, function: u8 },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Location::Mmio { base, version } => write!(f, "virtio-mmio@{base:#x} v{version}"),
            Location::Pci {
                bus,
                device,
                function,
            } => {
                write!(f, "virtio-pci {bus:02x}:{device:02x}.{function}")
            }
        }
    }
}

/// Why no device could be used.
#[derive(Debug)]
pub enum FindError {
    NotFound,
    /// A network function's second device is not there (the first is).
    #[cfg(feature = "fw")]
    NoSecond,
    BarUnusable(Location),
    Pci(Location, virtio_drivers::transport::pci::VirtioPciError),
}

impl fmt::Display for FindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FindError::NotFound => f.write_str("no virtio-net device found"),
            #[cfg(feature = "fw")]
            FindError::NoSecond => f.write_str("no second virtio-net device: an NF bridges two"),
            FindError::BarUnusable(l) => {
                write!(f, "{l}: a memory BAR is unassigned or above 4 GiB")
            }
            FindError::Pci(l, e) => write!(f, "{l}: {e}"),
        }
    }
}

/// A virtio-net device found: its transport and where it is.
pub type Found = (SomeTransport<'static>, Location);

/// Finds the first virtio-net device (and marks [`Step::NicFound`] when it does).
pub fn find_net(mmio: &[(u64, u64)]) -> Result<Found, FindError> {
    let found = search(mmio, 0);
    if found.is_ok() {
        crate::platform::steps::mark(Step::NicFound);
    }
    found
}

/// Finds the second virtio-net device, in the same order as [`find_net`] (a network
/// function's second network).
#[cfg(feature = "fw")]
pub fn find_second_net(mmio: &[(u64, u64)]) -> Result<Found, FindError> {
    search(mmio, 1).map_err(|e| match e {
        FindError::NotFound => FindError::NoSecond,
        e => e,
    })
}

/// The virtio-net device after the first `skip` ones: the command line's mmio windows,
/// then PCI's bus 0, then microvm's fixed slots. Skipped mmio devices are only read
/// (magic, version, device id), their transports forgotten; skipped PCI ones are not
/// touched.
fn search(mmio: &[(u64, u64)], mut skip: usize) -> Result<Found, FindError> {
    for &(base, size) in mmio {
        if let Some(found) = past(&mut skip, probe_mmio(base, size)) {
            return Ok(found);
        }
    }
    let mut pci_error = None;
    if root_present() {
        match find_pci(PciRoot::new(PortCam), &mut skip) {
            Err(FindError::NotFound) => {}
            Err(e) => pci_error = Some(e),
            Ok(found) => return Ok(found),
        }
    }
    // from the top slot down, as QEMU plugs them: the devices in command-line order
    for slot in (0..MICROVM_MMIO_SLOTS).rev() {
        let base = MICROVM_MMIO_BASE + slot * MICROVM_MMIO_STRIDE;
        if let Some(found) = past(&mut skip, probe_mmio(base, MICROVM_MMIO_STRIDE)) {
            return Ok(found);
        }
    }
    Err(pci_error.unwrap_or(FindError::NotFound))
}

fn probe_mmio(base: u64, size: u64) -> Option<(SomeTransport<'static>, Location)> {
    if base == 0 || base.checked_add(size)? > 1 << 32 || !base.is_multiple_of(4) {
        return None;
    }
    let header = NonNull::new(base as *mut VirtIOHeader)?;
    // SAFETY: `base` lies in the identity-mapped first 4 GiB and was named as a
    // virtio-mmio region (command line or microvm's fixed layout); `new` only reads the
    // magic, version and device id before we commit to it, and we use a region at most once.
    let transport = unsafe { MmioTransport::new(header, size as usize) }.ok()?;
    if transport.device_type() != DeviceType::Network {
        return None;
    }
    let version = transport.version() as u32;
    Some((transport.into(), Location::Mmio { base, version }))
}

/// Whether a PCI host bridge answers at 00:00.0.
fn root_present() -> bool {
    let df = DeviceFunction {
        bus: 0,
        device: 0,
        function: 0,
    };
    PortCam.read_word(df, 0) & 0xffff != 0xffff
}

/// `found` unless devices are still to be skipped (then one fewer is). A skipped
/// transport is forgotten, not dropped: dropping one resets its device, which another
/// link drives.
fn past<T>(skip: &mut usize, found: Option<T>) -> Option<T> {
    match found {
        Some(f) if *skip == 0 => Some(f),
        Some(f) => {
            core::mem::forget(f);
            *skip -= 1;
            None
        }
        None => None,
    }
}

/// The virtio-net device on bus 0 after the first `*skip` ones (`*skip` less the ones
/// there are when none is left).
fn find_pci(mut root: PciRoot<PortCam>, skip: &mut usize) -> Result<Found, FindError> {
    let mut found = None;
    for (df, info) in root.enumerate_bus(0) {
        if virtio_device_type(&info) == Some(DeviceType::Network) {
            if *skip == 0 {
                found = Some(df);
                break;
            }
            *skip -= 1;
        }
    }
    let df = found.ok_or(FindError::NotFound)?;
    let loc = Location::Pci {
        bus: df.bus,
        device: df.device,
        function: df.function,
    };
    // Every memory BAR must be assigned and inside our identity map.
    let mut bar = 0u8;
    while bar < 6 {
        match root.bar_info(df, bar) {
            Ok(Some(info)) => {
                if let Some((addr, size)) = info.memory_address_size() {
                    if size != 0 && (addr == 0 || addr.saturating_add(size) > 1 << 32) {
                        return Err(FindError::BarUnusable(loc));
                    }
                }
                bar += if matches!(info, BarInfo::Memory { .. }) && info.takes_two_entries() {
                    2
                } else {
                    1
                };
            }
            _ => bar += 1,
        }
    }
    root.set_command(
        df,
        Command::IO_SPACE | Command::MEMORY_SPACE | Command::BUS_MASTER,
    );
    let t = PciTransport::new::<KernelHal, _>(&mut root, df).map_err(|e| FindError::Pci(loc, e))?;
    Ok((t.into(), loc))
}

/// PCI configuration mechanism #1 (ports 0xCF8/0xCFC).
pub struct PortCam;

impl PortCam {
    fn address(df: DeviceFunction, offset: u8) -> u32 {
        0x8000_0000
            | (df.bus as u32) << 16
            | (df.device as u32 & 0x1f) << 11
            | (df.function as u32 & 0x7) << 8
            | (offset as u32 & 0xfc)
    }
}

impl ConfigurationAccess for PortCam {
    fn read_word(&self, df: DeviceFunction, offset: u8) -> u32 {
        // SAFETY: 0xCF8/0xCFC are the PCI configuration ports on PC-compatible machines;
        // a read of configuration space has no side effects. Without PCI, reads are ~0.
        unsafe {
            outl(0xcf8, Self::address(df, offset));
            inl(0xcfc)
        }
    }

    fn write_word(&mut self, df: DeviceFunction, offset: u8, data: u32) {
        // SAFETY: as above; the callers (virtio-drivers' PciRoot and our command-register
        // update) write only registers of the device they drive.
        unsafe {
            outl(0xcf8, Self::address(df, offset));
            outl(0xcfc, data);
        }
    }

    unsafe fn unsafe_clone(&self) -> Self {
        PortCam
    }
}
