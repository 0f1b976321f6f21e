//! virtio-net as a [`Link`]: the device's receive and transmit virtqueues with
//! [`QUEUE_SIZE`] buffers each, polled (no interrupts). The device cannot refuse a frame;
//! when every transmit buffer is in flight, [`Link::tx_take`] says `Busy`.

use super::discover::Location;
use super::hal::KernelHal;
use crate::platform::{Link, LinkError, Received};
use alloc::boxed::Box;
use alloc::vec::Vec;
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::SomeTransport;

/// Descriptors per virtqueue (receive and transmit).
pub const QUEUE_SIZE: usize = 16;
/// Bytes per DMA buffer: virtio-net header (<= 12) + Ethernet (14) + 1500 of IP, rounded.
const BUF_LEN: usize = 1536;

type Device = VirtIONetRaw<KernelHal, SomeTransport<'static>, QUEUE_SIZE>;

/// The virtio-net device and its buffers.
pub struct VirtioLink {
    dev: Device,
    location: Location,
    /// Receive buffers, indexed by the token (descriptor) they were posted under.
    rx: [Option<Box<[u8]>>; QUEUE_SIZE],
    /// Transmit buffers in flight, by token, with the length handed to the device.
    tx_busy: [Option<(Box<[u8]>, usize)>; QUEUE_SIZE],
    tx_free: Vec<Box<[u8]>>,
    tx_count: usize,
}

fn new_buf() -> Box<[u8]> {
    alloc::vec![0u8; BUF_LEN].into_boxed_slice()
}

impl VirtioLink {
    /// Initialises the device found at `location` and posts all receive buffers.
    pub fn new(
        transport: SomeTransport<'static>,
        location: Location,
    ) -> Result<VirtioLink, virtio_drivers::Error> {
        let mut v = VirtioLink {
            dev: Device::new(transport)?,
            location,
            rx: [const { None }; QUEUE_SIZE],
            tx_busy: [const { None }; QUEUE_SIZE],
            tx_free: Vec::new(),
            tx_count: 0,
        };
        for _ in 0..QUEUE_SIZE {
            v.post_rx(new_buf())?;
        }
        crate::platform::steps::mark(crate::platform::steps::Step::LinkUp);
        Ok(v)
    }

    fn post_rx(&mut self, mut buf: Box<[u8]>) -> Result<(), virtio_drivers::Error> {
        // SAFETY: the buffer is owned by `self.rx[token]` from now until the device hands
        // it back through `poll_receive`; nothing reads or writes it meanwhile.
        let token = unsafe { self.dev.receive_begin(&mut buf)? };
        self.rx[token as usize] = Some(buf);
        Ok(())
    }

    /// Returns finished transmit buffers to the free list.
    fn reap_tx(&mut self) {
        while let Some(token) = self.dev.poll_transmit() {
            let Some((buf, len)) = self.tx_busy.get_mut(token as usize).and_then(Option::take)
            else {
                break;
            };
            // SAFETY: `buf[..len]` is exactly the slice passed to `transmit_begin` for
            // this token.
            let _ = unsafe { self.dev.transmit_complete(token, &buf[..len]) };
            self.tx_free.push(buf);
        }
    }
}

impl Link for VirtioLink {
    fn mac(&self) -> [u8; 6] {
        self.dev.mac_address()
    }

    fn location(&self) -> &dyn core::fmt::Display {
        &self.location
    }

    fn next_frame(&mut self) -> Option<Received> {
        self.reap_tx();
        loop {
            let token = self.dev.poll_receive()?;
            let t = crate::platform::now();
            let mut buf = self.rx.get_mut(token as usize).and_then(Option::take)?;
            // SAFETY: `buf` is the buffer posted under `token` (see `post_rx`).
            match unsafe { self.dev.receive_complete(token, &mut buf) } {
                Ok(at) => return Some(Received { at, t, buf }),
                Err(_) => {
                    let _ = self.post_rx(buf);
                }
            }
        }
    }

    fn frame_done(&mut self, buf: Box<[u8]>) -> bool {
        self.post_rx(buf).is_ok()
    }

    /// A free transmit buffer with the virtio header filled in, and the header's length.
    fn tx_take(&mut self) -> Result<(Box<[u8]>, usize), LinkError> {
        self.reap_tx();
        if !self.dev.can_send() {
            return Err(LinkError::Busy);
        }
        let mut buf = match self.tx_free.pop() {
            Some(b) => b,
            None if self.tx_count < QUEUE_SIZE => {
                self.tx_count += 1;
                new_buf()
            }
            None => return Err(LinkError::Busy),
        };
        match self.dev.fill_buffer_header(&mut buf) {
            Ok(hdr) => Ok((buf, hdr)),
            Err(_) => {
                self.tx_free.push(buf);
                Err(LinkError::Invalid)
            }
        }
    }

    /// Hands the first `len` bytes of `buf` (from [`Link::tx_take`]) to the device.
    fn tx_give(&mut self, buf: Box<[u8]>, len: usize) -> Result<(), LinkError> {
        // SAFETY: the buffer moves into `tx_busy[token]` and is not touched until the
        // device returns the token (see `reap_tx`).
        match unsafe { self.dev.transmit_begin(&buf[..len]) } {
            Ok(token) => {
                self.tx_busy[token as usize] = Some((buf, len));
                Ok(())
            }
            Err(_) => {
                self.tx_free.push(buf);
                Err(LinkError::Busy)
            }
        }
    }
}
