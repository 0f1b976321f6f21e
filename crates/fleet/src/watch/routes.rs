//! Routing events as events (`vtnt fleet measurement watch-routes`): the routes a BGP
//! speaker learned ([`crate::bgp::RouteWatch`], its table when the watch starts is the
//! baseline); a change of a prefix holding targets of interest is a one-off measurement
//! of the job the watch was given toward them (at most
//! [`INLINE_TARGETS`](crate::INLINE_TARGETS)), in the watch's location; its id is
//! `rt<ms seen>-<n>`. A prefix holding no target of interest is no event.

use std::net::IpAddr;
use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;
use vtnt_runtimes::Runtime;

use super::{Event, EventSource};
use crate::bgp::{RouteChange, RoutePrefix, RouteWatch};
use crate::error::bail;

/// A routing change that touched targets of interest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoutingChange {
    pub source: &'static str,
    /// `announced`, `withdrawn` or `changed`.
    pub kind: &'static str,
    pub prefix: String,
    /// The AS paths before and after (none: no route).
    pub as_path_before: Option<Vec<u32>>,
    pub as_path_after: Option<Vec<u32>>,
    /// When the speaker's table showed it, µs since the epoch.
    pub seen_us: u64,
    /// The targets in the prefix, which the triggered measurement probes.
    pub targets: Vec<String>,
}

/// How often the speaker's table is read.
pub const ROUTES_POLL: Duration = Duration::from_millis(100);

/// The changes of the routes a BIRD learned that touch targets of interest.
pub struct RoutingChanges {
    routes: RouteWatch,
    targets: Vec<IpAddr>,
    location: String,
    runtime: Runtime,
    /// Events made so far (each id's last part).
    made: u64,
}

impl RoutingChanges {
    /// Reads the table of the BIRD at `bird` now (the baseline); its later changes of
    /// prefixes holding some of `targets` trigger measurements in `location` on `runtime`.
    pub fn follow(
        bird: &std::path::Path,
        targets: Vec<IpAddr>,
        location: &str,
        runtime: Runtime,
    ) -> crate::Result<RoutingChanges> {
        if targets.is_empty() {
            bail!(
                Invalid,
                "watch-routes: no target of interest (--targets FILE)"
            );
        }
        crate::check_token("--location", location)?;
        let mut routes = RouteWatch::new(bird, ROUTES_POLL)?;
        routes.poll()?;
        Ok(RoutingChanges {
            routes,
            targets,
            location: location.to_string(),
            runtime,
            made: 0,
        })
    }
}

impl EventSource for RoutingChanges {
    type Detail = RoutingChange;

    fn next(&mut self) -> crate::Result<Vec<Event<RoutingChange>>> {
        loop {
            let mut events = Vec::new();
            for e in self.routes.next_events(Duration::from_secs(3600))? {
                let prefix = e.change.prefix();
                let targets: Vec<String> = self
                    .targets
                    .iter()
                    .filter(|a| holds(&prefix, **a))
                    .take(crate::INLINE_TARGETS)
                    .map(|a| a.to_string())
                    .collect();
                if targets.is_empty() {
                    continue;
                }
                let seen_us = e
                    .seen
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_micros() as u64);
                let (kind, before, after) = match &e.change {
                    RouteChange::Announced { route } => ("announced", None, Some(route)),
                    RouteChange::Withdrawn { last } => ("withdrawn", Some(last), None),
                    RouteChange::Changed { before, after } => {
                        ("changed", Some(before), Some(after))
                    }
                };
                events.push(Event {
                    id: format!("rt{}-{}", seen_us / 1000, self.made),
                    location: self.location.clone(),
                    runtime: self.runtime,
                    targets: targets.clone(),
                    detail: RoutingChange {
                        source: "bgp",
                        kind,
                        prefix: prefix.to_string(),
                        as_path_before: before.map(|r| r.as_path.clone()),
                        as_path_after: after.map(|r| r.as_path.clone()),
                        seen_us,
                        targets,
                    },
                });
                self.made += 1;
            }
            if !events.is_empty() {
                return Ok(events);
            }
        }
    }
}

/// Whether `p` holds `a` (same family, the first `len` bits equal).
fn holds(p: &RoutePrefix, a: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match (p.addr, a) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(p.len)).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(p.len)).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_holds_the_addresses_under_its_length_only() {
        let p: RoutePrefix = "203.0.113.0/29".parse().unwrap();
        assert!(holds(&p, "203.0.113.2".parse().unwrap()));
        assert!(holds(&p, "203.0.113.7".parse().unwrap()));
        assert!(!holds(&p, "203.0.113.8".parse().unwrap()));
        assert!(!holds(&p, "2001:db8::1".parse().unwrap()));
        let all: RoutePrefix = "0.0.0.0/0".parse().unwrap();
        assert!(holds(&all, "198.51.100.1".parse().unwrap()));
        let p6: RoutePrefix = "2001:db8:64::/48".parse().unwrap();
        assert!(holds(&p6, "2001:db8:64::cb00:710a".parse().unwrap()));
        assert!(!holds(&p6, "2001:db8:65::1".parse().unwrap()));
    }
}
