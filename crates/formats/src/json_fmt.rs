//! scamper's rules that both formats share: how hops and replies are classified (ICMP,
//! TCP, quoting ICMP errors), which hops and replies `sc_warts2json` shows and in what
//! order, the ping statistics it computes, and its number and time formatting.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use vtnt_record::{Duration, Hop, IpAddr, Ping, PingReply, ProbeData, Quoted, Trace};

/// The correctly rounded square root: `f64::sqrt` with std, `libm::sqrt` (also correctly
/// rounded, IEEE 754) without, so both builds print the same `stddev`.
fn sqrt(x: f64) -> f64 {
    #[cfg(feature = "std")]
    {
        x.sqrt()
    }
    #[cfg(not(feature = "std"))]
    {
        libm::sqrt(x)
    }
}

/// Ping flags (`SCAMPER_PING_FLAG_*`) vTNT sets: record route (`-R`), the data is a
/// payload (`-B`) rather than a pattern, a pinned ICMP checksum (`-C`).
pub(crate) const PING_FLAG_V4RR: u8 = 0x01;
pub(crate) const PING_FLAG_PAYLOAD: u8 = 0x04;
pub(crate) const PING_FLAG_ICMPSUM: u8 = 0x20;
/// The names scamper's JSON gives ping flag bits 0, 1, 2 ... (`flags`).
pub(crate) const PING_FLAG_NAMES: [&str; 9] = [
    "v4rr",
    "spoof",
    "payload",
    "tsonly",
    "tsandaddr",
    "icmpsum",
    "dl",
    "tbt",
    "nosrc",
];

/// scamper's ping flags for what `pg` did (`SCAMPER_PING_FLAG_*`).
pub(crate) fn ping_flags(pg: &Ping) -> u8 {
    let mut f = 0;
    if pg.record_route {
        f |= PING_FLAG_V4RR;
    }
    if matches!(pg.data, Some(ProbeData::Payload(_))) {
        f |= PING_FLAG_PAYLOAD;
    }
    if pg.icmp_sum.is_some() {
        f |= PING_FLAG_ICMPSUM;
    }
    f
}

/// Microseconds of a duration as scamper keeps RTTs (a 32-bit count).
pub(crate) fn micros_u32(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// scamper's `timeval_tostr_us`: milliseconds with three decimals.
pub(crate) fn rtt_ms(d: Duration) -> String {
    let us = micros_u32(d);
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// Is this hop an ICMP reply (scamper: neither the TCP nor the UDP hop flag)?
pub(crate) fn hop_is_tcp(h: &Hop) -> bool {
    h.tcp_flags.is_some()
}

/// ICMP type and code of a hop that scamper considers ICMP.
pub(crate) fn hop_icmp(h: &Hop) -> Option<(u8, u8)> {
    if hop_is_tcp(h) {
        None
    } else {
        h.icmp
    }
}

/// scamper's `SCAMPER_TRACE_HOP_IS_ICMP_Q`: an ICMP error that quotes the probe.
pub(crate) fn icmp_quotes(addr: &IpAddr, icmp: Option<(u8, u8)>) -> bool {
    match (addr, icmp) {
        (IpAddr::V4(_), Some((t, _))) => t == 3 || t == 11,
        (IpAddr::V6(_), Some((t, _))) => (1..=3).contains(&t),
        _ => false,
    }
}

/// scamper's `SCAMPER_TRACE_HOP_IS_ICMP_PTB`.
pub(crate) fn icmp_ptb(addr: &IpAddr, icmp: Option<(u8, u8)>) -> bool {
    matches!(
        (addr, icmp),
        (IpAddr::V4(_), Some((3, 4))) | (IpAddr::V6(_), Some((2, _)))
    )
}

/// The quotation scamper's readers reconstruct for a quoting hop: what we have, or the
/// defaults warts implies when the fields are absent (TTL 1, the probe's size, ToS 0).
pub(crate) fn quoted_or_default(h: &Hop) -> Quoted {
    h.quoted.unwrap_or(Quoted {
        ttl: 1,
        ip_len: h.probe_size,
        tos: 0,
    })
}

/// The hops `sc_warts2json` prints, in its order: probe TTL in `firsthop..=hop_count`,
/// sorted by TTL, keeping the record's order within a TTL. Yields (index in
/// `trace.hops`, hop).
pub(crate) fn visible_hops(t: &Trace) -> Vec<(usize, &Hop)> {
    let first = t.firsthop.max(1);
    let v: Vec<(usize, &Hop)> = t
        .hops
        .iter()
        .enumerate()
        .filter(|(_, h)| h.probe_ttl >= first && h.probe_ttl <= t.hop_count)
        .collect();
    stable_sort_by_u16(v, |(_, h)| h.probe_ttl.into())
}

/// The replies scamper keeps, in its order: `seq < ping_sent`, sorted by seq, arrival
/// order within a seq.
pub(crate) fn ordered_replies(p: &Ping) -> Vec<&PingReply> {
    let v: Vec<&PingReply> = p.responses.iter().filter(|r| r.seq < p.ping_sent).collect();
    stable_sort_by_u16(v, |r| r.seq)
}

/// `v` stably sorted by `key`: what `sort_by_key` gives, but through one heap sort of
/// `u64`s (key above, index below: all distinct) shared by every caller, instead of a
/// stable-sort instantiation per element type (several KiB each in the unikernel); a
/// heap sort, not `sort_unstable` (3.4 KiB of pattern-defeating quicksort there).
fn stable_sort_by_u16<T: Copy>(v: Vec<T>, key: impl Fn(&T) -> u16) -> Vec<T> {
    let order: alloc::collections::BinaryHeap<u64> = v
        .iter()
        .enumerate()
        .map(|(i, x)| u64::from(key(x)) << 32 | i as u64)
        .collect();
    let order = order.into_sorted_vec();
    order.into_iter().map(|k| v[k as u32 as usize]).collect()
}

/// scamper's `scamper_ping_stats` as the JSON shows it.
pub(crate) struct PingStats {
    /// Distinct sequence numbers answered.
    pub replies: u32,
    pub min: u32,
    pub max: u32,
    pub avg: u32,
    pub stddev: u32,
}

pub(crate) fn ping_stats(p: &Ping) -> PingStats {
    let replies = ordered_replies(p);
    let mut seqs: Vec<u16> = replies.iter().map(|r| r.seq).collect();
    seqs.dedup();
    let rtts: Vec<u32> = replies.iter().map(|r| micros_u32(r.rtt)).collect();
    let n = rtts.len();
    let mut s = PingStats {
        replies: seqs.len() as u32,
        min: 0,
        max: 0,
        avg: 0,
        stddev: 0,
    };
    if n > 0 {
        s.min = *rtts.iter().min().unwrap_or(&0);
        s.max = *rtts.iter().max().unwrap_or(&0);
        let sum: f64 = rtts.iter().map(|&r| r as f64).sum();
        let mean = sum / n as f64;
        s.avg = mean as u32;
        let var: f64 = rtts
            .iter()
            .map(|&r| (r as f64 - mean) * (r as f64 - mean))
            .sum();
        s.stddev = sqrt(var / n as f64) as u32;
    }
    s
}

/// The `loss` value: `1`, `0`, or the lost fraction with two decimals (computed in single
/// precision, as scamper does, and printed like `printf("%.2f")`).
pub(crate) fn loss_str(sent: u16, replies: u32) -> String {
    if replies == 0 {
        "1".into()
    } else if replies == u32::from(sent) {
        "0".into()
    } else {
        let f = (f32::from(sent) - replies as f32) / f32::from(sent);
        let hundredths = round_hundredths(f);
        format!("{}.{:02}", hundredths / 100, hundredths % 100)
    }
}

/// `x * 100` rounded to an integer the way `printf("%.2f")` rounds: on the exact binary
/// value, ties to even. Integer arithmetic only, so no float formatting machinery is
/// linked (it is a large part of a no_std image). `x` must be finite and non-negative.
fn round_hundredths(x: f32) -> u64 {
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32;
    let frac = u128::from(bits & 0x7f_ffff);
    // x = mant * 2^shift exactly.
    let (mant, shift) = if exp == 0 {
        (frac, -149)
    } else {
        (frac | 0x80_0000, exp - 150)
    };
    let n = mant * 100;
    if shift >= 0 {
        return (n << shift.min(40)) as u64;
    }
    let s = (-shift) as u32;
    if s >= 120 {
        return 0;
    }
    let q = n >> s;
    let r = n & ((1u128 << s) - 1);
    let half = 1u128 << (s - 1);
    let up = r > half || (r == half && q & 1 == 1);
    (q + u128::from(up)) as u64
}

/// `%Y-%m-%d %H:%M:%S` of a UNIX time shifted by `offset` seconds (scamper uses the local
/// time zone; pass its offset from UTC).
pub(crate) fn ftime(secs: u64, offset: i64) -> String {
    let t = secs as i64 + offset;
    let days = t.div_euclid(86_400);
    let sod = t.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        y,
        m,
        d,
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_formatting() {
        assert_eq!(rtt_ms(Duration::from_micros(233)), "0.233");
        assert_eq!(rtt_ms(Duration::from_micros(5721)), "5.721");
        assert_eq!(rtt_ms(Duration::from_micros(1_000_047)), "1000.047");
    }

    #[test]
    fn ftime_matches_date() {
        // date -u -d @1795312150 -> 2026-11-22 01:49:10
        assert_eq!(ftime(1_795_312_150, 0), "2026-11-22 01:49:10");
        assert_eq!(ftime(0, 0), "1970-01-01 00:00:00");
        assert_eq!(ftime(951_782_400, 0), "2000-02-29 00:00:00");
        assert_eq!(ftime(3600, -7200), "1969-12-31 23:00:00");
    }

    #[test]
    fn loss_like_printf() {
        assert_eq!(loss_str(3, 0), "1");
        assert_eq!(loss_str(3, 3), "0");
        assert_eq!(loss_str(3, 2), "0.33");
        assert_eq!(loss_str(3, 1), "0.67");
        // 1/8 is exact in binary: glibc rounds half to even -> 0.12
        assert_eq!(loss_str(8, 7), "0.12");
    }

    #[test]
    fn loss_rounds_exactly_like_float_formatting() {
        for sent in 1..=1200u16 {
            for replies in 1..u32::from(sent) {
                let f = (f32::from(sent) - replies as f32) / f32::from(sent);
                assert_eq!(
                    loss_str(sent, replies),
                    format!("{:.2}", f64::from(f)),
                    "{replies}/{sent}"
                );
            }
        }
        for x in [0.125f32, 0.375, 0.005, 0.015, 0.995, 1e-30, 0.0] {
            let h = round_hundredths(x);
            assert_eq!(
                format!("{}.{:02}", h / 100, h % 100),
                format!("{:.2}", f64::from(x)),
                "{x}"
            );
        }
    }
}
