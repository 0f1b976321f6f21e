//! `ip=dhcp`: the interface's address, prefix and gateway from a DHCPv4 server, leased
//! before the job starts by smoltcp's DHCPv4 client socket. A smoltcp `Interface` runs
//! over the [`Nic`]'s raw Ethernet frames for this exchange only; afterwards the NIC
//! frames the prober's packets itself, as with a static address. The lease is not
//! renewed: jobs are far shorter than any lease.

use super::smol::{smol, Frames};
use super::{Ipv4Config, Nic};
use crate::platform;
use core::net::Ipv4Addr;
use smoltcp::iface::{Config, Interface, SocketSet, SocketStorage};
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

/// Asks for a lease until `give_up` (guest time); `None` if none was granted by then.
pub fn acquire(nic: &mut Nic, give_up: Instant) -> Option<Lease> {
    let mut config = Config::new(HardwareAddress::Ethernet(nic.mac()));
    // The transaction ID comes from this: differ from boot to boot.
    config.random_seed = platform::random_seed();
    let mut dev = Frames::new(nic);
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
        dev.pull();
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
