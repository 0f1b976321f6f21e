//! The text view of a trace or ping, in the spirit of scamper's text output: one line per
//! hop with every reply's RTT and, inside MPLS tunnels, the quoted label stack.

use std::collections::BTreeMap;
use std::fmt::Write;

use vtnt_formats::{Ping, Record, Trace};

/// Renders one record as text.
pub fn render(r: &Record) -> String {
    match r {
        Record::Trace(t) => trace(t),
        Record::Ping(p) => ping(p),
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Renders a trace: `traceroute from SRC to DST`, then ` N  ADDR  RTT ms ...` per TTL.
pub fn trace(t: &Trace) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "traceroute from {} to {}", t.src, t.dst);
    let mut by_ttl: BTreeMap<u8, Vec<&vtnt_formats::Hop>> = BTreeMap::new();
    for h in &t.hops {
        by_ttl.entry(h.probe_ttl).or_default().push(h);
    }
    let last = t.hop_count.max(t.firsthop);
    for ttl in t.firsthop..=last {
        let _ = write!(s, "{ttl:2}  ");
        match by_ttl.get(&ttl) {
            None => s.push('*'),
            Some(hops) => {
                let mut prev = None;
                for h in hops {
                    if prev != Some(h.addr) {
                        let _ = write!(s, " {}", h.addr);
                        prev = Some(h.addr);
                    }
                    let _ = write!(s, "  {:.3} ms", ms(h.rtt));
                }
                if let Some(h) = hops.first() {
                    for l in &h.mpls {
                        let _ = write!(
                            s,
                            " [MPLS: Label {} TTL={}{}]",
                            l.label,
                            l.ttl,
                            if l.bottom { " S" } else { "" }
                        );
                    }
                    if let Some(q) = h.quoted.filter(|q| q.ttl > 1) {
                        let _ = write!(s, " q{}", q.ttl);
                    }
                }
            }
        }
        s.push('\n');
    }
    let _ = writeln!(s, "stop: {}", t.stop_reason.name());
    s
}

/// Renders a ping like ping(8) does.
pub fn ping(p: &Ping) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ping {} to {}: {} byte packets",
        p.src, p.dst, p.probe_size
    );
    for r in &p.responses {
        let _ = writeln!(
            s,
            "{} bytes from {}, seq={} ttl={} time={:.3} ms",
            r.reply_size,
            r.from,
            r.seq,
            r.reply_ttl,
            ms(r.rtt)
        );
    }
    let rtts: Vec<f64> = p.responses.iter().map(|r| ms(r.rtt)).collect();
    let mut seqs: Vec<u16> = p.responses.iter().map(|r| r.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    let received = seqs.len();
    let loss = if p.ping_sent == 0 {
        0.0
    } else {
        100.0 * (p.ping_sent as f64 - received as f64) / p.ping_sent as f64
    };
    let _ = writeln!(s, "--- {} ping statistics ---", p.dst);
    let _ = writeln!(
        s,
        "{} packets transmitted, {} packets received, {:.0}% packet loss",
        p.ping_sent, received, loss
    );
    if !rtts.is_empty() {
        let n = rtts.len() as f64;
        let avg = rtts.iter().sum::<f64>() / n;
        let min = rtts.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = rtts.iter().cloned().fold(0.0, f64::max);
        let sd = (rtts.iter().map(|r| (r - avg).powi(2)).sum::<f64>() / n).sqrt();
        let _ = writeln!(
            s,
            "round-trip min/avg/max/stddev = {min:.3}/{avg:.3}/{max:.3}/{sd:.3} ms"
        );
    }
    s
}
