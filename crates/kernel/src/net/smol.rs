//! The [`Nic`] as a smoltcp device, for the parts of the kernel that run a smoltcp
//! `Interface` over its raw Ethernet frames ([`super::dhcp`] before a job, the stream
//! endpoint's TCP and UDP sockets): received frames are queued by [`Frames::pull`], each
//! transmitted frame goes out through [`Nic::send_raw`].

use super::{Nic, ETH_HDR, MTU};
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use vtnt_record::Instant;

/// Most frames queued per [`Frames::pull`].
pub const PULL: usize = 64;

/// The NIC as a smoltcp device.
pub struct Frames<'a> {
    pub nic: &'a mut Nic,
    rx: VecDeque<Vec<u8>>,
}

impl<'a> Frames<'a> {
    pub fn new(nic: &'a mut Nic) -> Frames<'a> {
        Frames {
            nic,
            rx: VecDeque::new(),
        }
    }

    /// Queues the frames the NIC has received, at most [`PULL`] (a link that always has
    /// more, a UDP flood, must not grow the queue without bound); returns how many.
    pub fn pull(&mut self) -> usize {
        self.pull_with(Some)
    }

    /// [`Frames::pull`], each frame through `keep`, which may hold it back (`None`) or
    /// hand smoltcp another (an IPv4 fragment: its whole datagram, once complete).
    pub fn pull_with(&mut self, mut keep: impl FnMut(Vec<u8>) -> Option<Vec<u8>>) -> usize {
        let rx = &mut self.rx;
        let mut n = 0;
        let mut take = |_: &mut Nic, _, f: &[u8]| {
            if let Some(f) = keep(f.to_vec()) {
                rx.push_back(f);
            }
        };
        while n < PULL && self.nic.next_frame(&mut take) {
            n += 1;
        }
        n
    }
}

pub struct Rx(Vec<u8>);
pub struct Tx<'a>(&'a mut Nic);

impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = alloc::vec![0u8; len];
        let r = f(&mut frame);
        // Best effort: TCP retransmits and DHCP retries what is lost; a UDP datagram is lost.
        let _ = self.0.send_raw(&frame);
        r
    }
}

impl phy::Device for Frames<'_> {
    type RxToken<'b>
        = Rx
    where
        Self: 'b;
    type TxToken<'b>
        = Tx<'b>
    where
        Self: 'b;

    fn receive(&mut self, _: smoltcp::time::Instant) -> Option<(Rx, Tx<'_>)> {
        let frame = self.rx.pop_front()?;
        Some((Rx(frame), Tx(self.nic)))
    }

    fn transmit(&mut self, _: smoltcp::time::Instant) -> Option<Tx<'_>> {
        Some(Tx(self.nic))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ethernet;
        c.max_transmission_unit = ETH_HDR + MTU;
        c
    }
}

/// Guest time as smoltcp's.
pub fn smol(t: Instant) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(t.as_micros() as i64)
}
