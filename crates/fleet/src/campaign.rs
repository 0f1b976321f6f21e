//! Ark-style campaigns (issue 42): a measurement whose target list is split across its
//! vantage points (each cycle's archive: [`crate::archive`]).
//!
//! - **Split**: `vtnt fleet measurement create --split FILE` stores FILE's targets in the
//!   tenant's stream of campaign lists ([`stream_name`], in the tenant's own account, made
//!   by `vtnt fleet up`), not in the definition; each cycle k deals every /24 (IPv4) or
//!   /48 (IPv6) of the list to exactly one of the cycle's vantage points ([`deal`]): the
//!   prefixes shuffled from the cycle's seed (the measurement's `Definition::seed`) and
//!   dealt in turn, so the same (id, k) deals the same (a cycle placed again after a
//!   crash makes the same jobs, which the work queue drops) and another cycle deals anew.
//! - **Kept** as long as the campaign runs, however long (the stream has no age limit; it
//!   counts against the tenant account's storage, with its results); removed once the
//!   campaign's last cycle is placed or it is cancelled ([`remove`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use async_nats::jetstream;

use crate::error::ResultExt;
use crate::proto::TargetList;
use crate::{Error, Fleet};

/// The stream of a tenant's campaign lists.
pub fn stream_name(tenant: &str) -> String {
    format!("VTNT_LISTS_{tenant}")
}

/// The subject of chunk `chunk` of measurement `id`'s list (`None`: all of its chunks).
pub fn subject(tenant: &str, id: &str, chunk: Option<u32>) -> String {
    match chunk {
        Some(c) => format!("vtnt.lists.{tenant}.{id}.{c}"),
        None => format!("vtnt.lists.{tenant}.{id}.>"),
    }
}

/// The tenant's stream of campaign lists, in its own account, created unless it exists
/// (`vtnt fleet up`).
pub async fn stream(fleet: &Fleet, tenant: &str) -> crate::Result<jetstream::stream::Stream> {
    crate::ensure_stream(
        &fleet.js,
        jetstream::stream::Config {
            name: stream_name(tenant),
            num_replicas: fleet.num_replicas,
            subjects: vec![format!("vtnt.lists.{tenant}.>")],
            max_messages_per_subject: 1,
            max_message_size: crate::DATA_CHUNK_BYTES as i32 + 1024,
            ..Default::default()
        },
    )
    .await
    .nats(|| format!("tenant {tenant}'s campaign lists stream"))
}

/// The prefix a target is dealt with: its /24 (IPv4) or /48 (IPv6).
pub fn prefix_of(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V4(v) => IpAddr::V4((u32::from(v) & 0xffff_ff00).into()),
        IpAddr::V6(v) => IpAddr::V6((u128::from(v) & !((1u128 << 80) - 1)).into()),
    }
}

/// Deals `targets` (each once, duplicates dropped) to `points` vantage points: every /24
/// (/48) to exactly one, the prefixes in a shuffle seeded by `seed` and dealt in turn, so
/// each point gets as many prefixes as another, give or take one. A point's targets are
/// in address order; a point may get none when there are fewer prefixes than points.
pub fn deal(targets: &[IpAddr], points: usize, seed: u64) -> Vec<Vec<IpAddr>> {
    let mut by_prefix: BTreeMap<IpAddr, Vec<IpAddr>> = BTreeMap::new();
    for &t in targets {
        by_prefix.entry(prefix_of(t)).or_default().push(t);
    }
    let mut prefixes: Vec<Vec<IpAddr>> = by_prefix.into_values().collect();
    // its own stream: not the draw of the vantage points, which uses `seed` as it is
    vtnt_rng::Rng::new(vtnt_rng::stafford13(seed ^ 0x005e_ed0f_dea1)).shuffle(&mut prefixes);
    let mut out = vec![Vec::new(); points];
    if points == 0 {
        return out;
    }
    for (i, mut p) in prefixes.into_iter().enumerate() {
        out[i % points].append(&mut p);
    }
    for o in &mut out {
        o.sort();
        o.dedup();
    }
    out
}

/// The targets of split measurement `id`, whose list `t` says where they are ([`store`]).
pub async fn targets(
    fleet: &Fleet,
    tenant: &str,
    id: &str,
    t: TargetList,
) -> crate::Result<Vec<IpAddr>> {
    let st = stream(fleet, tenant).await?;
    let text = crate::targets::fetch_chunks(&st, |i| subject(tenant, id, Some(i)), t)
        .await
        .map_err(|e| Error::Invalid(format!("measurement {id}: {}", crate::error::chain(&e))))?;
    vtnt_jobspec::parse_target_list(&text)
        .map_err(|e| Error::Invalid(format!("measurement {id}'s target list: {e}")))
}

/// Stores a split measurement's targets (checked) in the tenant's campaign lists.
pub async fn store(
    fleet: &Fleet,
    tenant: &str,
    id: &str,
    targets: &[IpAddr],
) -> crate::Result<TargetList> {
    let mut list = String::new();
    for t in targets {
        list.push_str(&t.to_string());
        list.push('\n');
    }
    stream(fleet, tenant).await?;
    let room = format!("tenant {tenant}'s account stores its results and lists");
    let subject = |i| subject(tenant, id, Some(i));
    crate::targets::store_chunks(&fleet.js, subject, id, &list, &room).await
}

/// Removes split measurement `id`'s list: its last cycle is placed, or it is cancelled.
pub async fn remove(fleet: &Fleet, tenant: &str, id: &str) -> crate::Result<()> {
    stream(fleet, tenant)
        .await?
        .purge()
        .filter(subject(tenant, id, None))
        .await
        .nats(|| format!("removing measurement {id}'s target list"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> Vec<IpAddr> {
        let mut v: Vec<IpAddr> = (0..40u32)
            .flat_map(|p| (1..=5u32).map(move |h| IpAddr::V4((0x6440_0000 + (p << 8) + h).into())))
            .collect();
        v.push("2001:db8:1::1".parse().unwrap());
        v.push("2001:db8:1:2::1".parse().unwrap());
        v.push("2001:db8:2::1".parse().unwrap());
        v
    }

    #[test]
    fn every_target_goes_to_one_point_and_prefixes_are_never_split() {
        let targets = list();
        for points in [1, 2, 3, 7] {
            for k in 0..10 {
                let d = deal(&targets, points, k);
                assert_eq!(d.len(), points);
                let mut all: Vec<IpAddr> = d.iter().flatten().copied().collect();
                all.sort();
                let mut want = targets.clone();
                want.sort();
                assert_eq!(all, want, "every target exactly once");
                let mut owner: BTreeMap<IpAddr, usize> = BTreeMap::new();
                for (i, share) in d.iter().enumerate() {
                    for t in share {
                        assert_eq!(*owner.entry(prefix_of(*t)).or_insert(i), i, "{t}");
                    }
                }
                // 41 v4 /24s and /48s... balanced within one prefix
                let counts: Vec<usize> = d
                    .iter()
                    .map(|s| {
                        let mut p: Vec<IpAddr> = s.iter().map(|t| prefix_of(*t)).collect();
                        p.dedup();
                        p.len()
                    })
                    .collect();
                let (lo, hi) = (counts.iter().min(), counts.iter().max());
                assert!(hi.unwrap() - lo.unwrap() <= 1, "{counts:?}");
            }
        }
        // the two addresses of 2001:db8:1::/48 stay together
        assert_eq!(
            prefix_of("2001:db8:1:2::1".parse().unwrap()),
            prefix_of("2001:db8:1::1".parse().unwrap())
        );
        // duplicates are dealt once
        let twice: Vec<IpAddr> = targets.iter().chain(&targets).copied().collect();
        assert_eq!(deal(&twice, 3, 1), deal(&targets, 3, 1));
    }

    #[test]
    fn the_same_seed_deals_the_same_and_other_seeds_deal_anew() {
        let targets = list();
        // cycle k's seed, as the measurement's `Definition::seed` mixes it
        let seed = |k: u64| vtnt_rng::stafford13(0x1234 ^ vtnt_rng::stafford13(k));
        let dealt: Vec<_> = (0..10).map(|k| deal(&targets, 3, seed(k))).collect();
        for (k, d) in dealt.iter().enumerate() {
            assert_eq!(*d, deal(&targets, 3, seed(k as u64)), "cycle {k} again");
        }
        for w in dealt.windows(2) {
            assert_ne!(w[0], w[1]);
        }
        // a given prefix is not always on the same point
        let owner = |d: &Vec<Vec<IpAddr>>| d.iter().position(|s| s.contains(&targets[0]));
        let owners: std::collections::BTreeSet<_> = dealt.iter().map(owner).collect();
        assert!(owners.len() > 1, "{owners:?}");
    }
}
