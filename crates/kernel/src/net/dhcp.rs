//! `ip=dhcp`: the interface's address, prefix and gateway from a DHCPv4 server, leased
//! before the job starts by smoltcp's DHCPv4 client socket. A smoltcp `Interface` runs
//! over the [`Nic`]'s raw Ethernet frames for this exchange only; afterwards the NIC
//! frames the prober's packets itself, as with a static address. The lease is not
//! renewed: jobs are far shorter than any lease.

use super::{Ipv4Config, Nic, ETH_HDR, MTU};
use crate::platform;
use alloc::vec::Vec;
use core::net::Ipv4Addr;
use smoltcp::iface::{Config, Interface, SocketSet, SocketStorage};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::socket::dhcpv4::{self, RetryConfig};
use smoltcp::wire::HardwareAddress;
use vtnt_record::{Duration, Instant};

/// How long a lease may take before we give up.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Gap between DISCOVERs (smoltcp's default of 10 s would send only one within
/// [`TIMEOUT`]).
const DISCOVER_RETRY: smoltcp::time::Duration = smoltcp::time::Duration::from_secs(1);
/// The longest halt between two looks at the NIC (it raises no interrupt).
const POLL: Duration = Duration::from_millis(1);

/// What the server leased.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    pub config: Ipv4Config,
    /// The server that answered.
    pub server: Ipv4Addr,
}

/// The NIC as a smoltcp device: received frames are queued by [`acquire`]'s loop.
struct Frames<'a> {
    nic: &'a mut Nic,
    rx: Vec<Vec<u8>>,
}

struct Rx(Vec<u8>);
struct Tx<'a>(&'a mut Nic);

impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = alloc::vec![0u8; len];
        let r = f(&mut frame);
        // Best effort: the client retransmits what is lost.
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
        if self.rx.is_empty() {
            return None;
        }
        let frame = self.rx.remove(0);
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

fn smol(t: Instant) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(t.as_micros() as i64)
}

/// Asks for a lease until `give_up` (guest time); `None` if none was granted by then.
pub fn acquire(nic: &mut Nic, give_up: Instant) -> Option<Lease> {
    let mut config = Config::new(HardwareAddress::Ethernet(nic.mac()));
    // The transaction ID comes from this: differ from boot to boot.
    config.random_seed = platform::random_seed();
    let mut dev = Frames {
        nic,
        rx: Vec::new(),
    };
    let mut iface = Interface::new(config, &mut dev, smol(platform::now()));
    let mut socket = dhcpv4::Socket::new();
    let mut retry = RetryConfig::default();
    retry.discover_timeout = DISCOVER_RETRY;
    socket.set_retry_config(retry);
    let mut storage = [SocketStorage::EMPTY];
    let mut sockets = SocketSet::new(&mut storage[..]);
    let handle = sockets.add(socket);
    loop {
        let now = platform::now();
        let rx = &mut dev.rx;
        dev.nic.poll_frames(|_, _, f| rx.push(f.to_vec()));
        iface.poll(smol(now), &mut dev, &mut sockets);
        if let Some(dhcpv4::Event::Configured(c)) = sockets.get_mut::<dhcpv4::Socket>(handle).poll()
        {
            return Some(Lease {
                config: Ipv4Config {
                    addr: c.address.address(),
                    prefix: c.address.prefix_len(),
                    gateway: c.router,
                },
                server: c.server.identifier,
            });
        }
        if now >= give_up {
            return None;
        }
        let wait = iface
            .poll_delay(smol(now), &sockets)
            .map_or(POLL, |d| Duration::from_micros(d.total_micros()).min(POLL));
        platform::wait_until((now + wait).min(give_up));
    }
}
