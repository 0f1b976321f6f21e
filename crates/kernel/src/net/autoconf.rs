//! `ip6=auto`: the interface's IPv6 address and router from the link before the job
//! starts. A link-local address (`fe80::` + the MAC's modified EUI-64, RFC 4291 2.5.1;
//! no duplicate address detection: the MAC is the host's to make unique), router
//! solicitations (RFC 4861 6.3.7: to ff02::2, at most three, four seconds apart), and
//! from the first router advertisement (hop limit 255, a link-local source, a right
//! checksum): the default router (its source when the router lifetime is not zero; its
//! MAC from the source link-layer option or later by a solicitation), the on-link prefix
//! (a prefix option with L=1) and an address by SLAAC (RFC 4862: a prefix option with
//! A=1 and length 64, plus the same interface ID; no DAD). With M=1 the address comes
//! from DHCPv6 instead (RFC 8415: Solicit, Advertise, Request, Reply for one IA_NA, the
//! client's DUID-LL from the MAC, from the link-local address to ff02::1:2; the first
//! Advertise with an address is taken, retransmission starts at one second and doubles
//! up to four, without the random factor; no Renew: jobs are far shorter than leases).
//! The frames are [`ndp`]'s and [`dhcp6`]'s.

use super::dhcp6::{self, Client};
use super::ndp::{self, link_local, with_iid, Advert};
use super::{Ipv6Config, Nic};
use crate::platform;
use core::net::Ipv6Addr;
use vtnt_record::{Duration, Instant};

/// How long the configuration may take before we give up (three solicitations and the
/// DHCPv6 exchange after the advertisement).
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// RTR_SOLICITATION_INTERVAL (RFC 4861 10).
const RS_INTERVAL: Duration = Duration::from_secs(4);
/// MAX_RTR_SOLICITATIONS.
const RS_MAX: u32 = 3;
/// The first DHCPv6 retransmission timeout in seconds (SOL_TIMEOUT, REQ_TIMEOUT) and
/// our cap.
const DHCP_RT: u64 = 1;
const DHCP_RT_MAX: u64 = 4;
/// The longest halt between two looks at the NIC (it raises no interrupt).
const POLL: Duration = Duration::from_millis(1);

/// How the address was configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Slaac,
    Dhcpv6,
}

impl How {
    /// Its name on the console.
    pub fn name(self) -> &'static str {
        match self {
            How::Slaac => "slaac",
            How::Dhcpv6 => "dhcpv6",
        }
    }
}

/// What is missing when no address resulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// No router advertisement answered our solicitations.
    Advert,
    /// The advertisement offered no address (no prefix with A=1 and length 64, M=0).
    Prefix,
    /// M=1, and no DHCPv6 server gave an address.
    Dhcpv6,
}

impl Missing {
    /// What is missing, for the console.
    pub fn name(self) -> &'static str {
        match self {
            Missing::Advert => "no router advertisement (solicited at ff02::2)",
            Missing::Prefix => {
                "no address in the router advertisement (no prefix with A=1 and length 64, M=0)"
            }
            Missing::Dhcpv6 => "no address from DHCPv6 (the router advertisement says M=1)",
        }
    }
}

/// The configuration learnt and how.
#[derive(Debug, Clone, Copy)]
pub struct Configured {
    pub config: Ipv6Config,
    pub how: How,
}

/// Configures IPv6 on `nic` from the link until `give_up` (guest time). Meanwhile our
/// link-local address answers neighbour solicitations (the DHCPv6 server's for its
/// unicast answer). On success the NIC has the configuration (and the router's MAC if
/// the advertisement named it).
pub fn acquire(nic: &mut Nic, give_up: Instant) -> Result<Configured, Missing> {
    let mac = nic.mac().0;
    let ll = link_local(mac);
    nic.set_config6(Ipv6Config {
        addr: ll,
        prefix: 64,
        gateway: None,
        link_local: None,
    });
    let mut xid = platform::random_seed() as u32;
    let mut ra: Option<Advert> = None;
    let mut client = Client::new(mac);
    // the Reply's address
    let mut leased = None;
    let mut sent = 0;
    let mut started = platform::now();
    let (mut next, mut rt) = (started, DHCP_RT);
    loop {
        let now = platform::now();
        nic.poll_frames(|nic, _, frame| {
            let Some(ip) = nic.ipv6_in(frame) else {
                return;
            };
            if let Some(a) = ndp::parse_ra(ip) {
                if ra.is_none() {
                    (ra, next) = (Some(a), now);
                }
            } else if let Some(d) = dhcp6::parse(ip, mac, xid) {
                if d.addr.is_some() && d.kind == dhcp6::REPLY {
                    leased = d.addr;
                } else if d.addr.is_some() && !client.requesting() {
                    // the Advertise: now the Request, a new transaction
                    client.request(d.server);
                    xid = xid.wrapping_add(1);
                    (started, next, rt) = (now, now, DHCP_RT);
                }
            }
        });
        if let Some(a) = ra {
            // M=0, or no DHCPv6 server answered in time: SLAAC if a prefix allows it
            let slaac = a.slaac.filter(|_| !a.managed || now >= give_up);
            let got = match (leased, slaac) {
                (Some(addr), _) => Some((addr, How::Dhcpv6)),
                (None, Some(p)) => Some((with_iid(p, mac), How::Slaac)),
                _ => None,
            };
            if let Some((addr, how)) = got {
                return Ok(configure(nic, &a, addr, how, ll));
            }
        }
        if now >= give_up {
            return Err(match ra {
                None => Missing::Advert,
                Some(a) if a.managed => Missing::Dhcpv6,
                Some(_) => Missing::Prefix,
            });
        }
        if now >= next {
            match ra {
                None if sent < RS_MAX => {
                    let _ = nic.send_frame(|f| ndp::emit_rs(f, mac));
                    (sent, next) = (sent + 1, now + RS_INTERVAL);
                }
                Some(a) if a.managed => {
                    let cs = now.as_micros().saturating_sub(started.as_micros()) / 10_000;
                    let elapsed = cs.min(0xffff) as u16;
                    let _ = nic.send_frame(|f| client.emit(f, xid, elapsed));
                    next = now + Duration::from_secs(rt);
                    rt = (rt * 2).min(DHCP_RT_MAX);
                }
                _ => {}
            }
        }
        platform::wait_until((now + POLL).min(give_up));
    }
}

/// Gives `nic` address `addr` under advertisement `a`: on-link, the advertised prefix
/// when it holds the address, else the address only; the router when its lifetime is
/// not zero, with its MAC when it named it.
fn configure(nic: &mut Nic, a: &Advert, addr: Ipv6Addr, how: How, ll: Ipv6Addr) -> Configured {
    let mut config = Ipv6Config {
        addr,
        prefix: 128,
        gateway: a.router,
        link_local: Some(ll),
    };
    if let Some((p, len)) = a.on_link {
        let on = Ipv6Config {
            addr: p,
            prefix: len,
            ..config
        };
        if on.next_hop(addr) == Some(addr) {
            config.prefix = len;
        }
    }
    nic.set_config6(config);
    if let (Some(m), Some(gw)) = (a.mac, config.gateway) {
        nic.add_neighbour(gw.into(), m);
    }
    Configured { config, how }
}
