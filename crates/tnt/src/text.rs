//! A text view of a [`TntResult`] in the spirit of `sc_tnt`'s dump: one line per hop
//! (revealed hops as `H1`, `H2`, ...) with address, RTT, reply TTLs `<te,er>`, qttl,
//! uturn, frpla, rtla, `[MPLS,class,role,trigger,method,step=n]` and labels, then one
//! line per tunnel and per unrevealed trigger.

use alloc::string::String;
use core::fmt::Write;

use crate::classify::TunnelClass;
use crate::output::{PathEntry, TntResult};
use crate::reveal::RevealStatus;

fn opt(v: Option<u8>) -> impl core::fmt::Display {
    struct O(Option<u8>);
    impl core::fmt::Display for O {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            match self.0 {
                Some(v) => write!(f, "{v}"),
                None => f.write_str("*"),
            }
        }
    }
    O(v)
}

fn hop_line(out: &mut String, label: &str, e: &PathEntry) {
    let _ = write!(out, "{label:>3} ");
    let Some(addr) = e.addr else {
        out.push_str("*\n");
        return;
    };
    let a = &e.annotation;
    let _ = write!(out, "{addr:<15}");
    if let Some(us) = e.rtt_us {
        let _ = write!(out, " {}.{:03} ms", us / 1000, us % 1000);
    }
    let _ = write!(out, " rTTLs=<{},{}>", opt(a.te), opt(a.er));
    if let Some(q) = a.qttl {
        let _ = write!(out, " qttl={q}");
    }
    if a.uturn != 0 {
        let _ = write!(out, " uturn={}", a.uturn);
    }
    if a.frpla > 0 {
        let _ = write!(out, " frpla={}", a.frpla);
    }
    if a.rtla > 0 {
        let _ = write!(out, " rtla={}", a.rtla);
    }
    for m in &a.mpls {
        let _ = write!(out, " [MPLS,{},{}", m.class.tag(), m.role.tag());
        if let Some(t) = m.trigger {
            let _ = write!(out, ",{}", t.tag());
        }
        if let Some(ev) = m.evidence {
            let _ = write!(out, ",{}", ev.tag());
        }
        if let Some(meth) = m.method {
            let _ = write!(out, ",{}", meth.tag());
        }
        if let Some(s) = m.step {
            let _ = write!(out, ",step={s}");
        }
        out.push(']');
    }
    if let Some(v) = a.vendor {
        let _ = write!(out, " {} {}", a.signature, v.name());
    }
    for (i, (label, ttl)) in e.labels.iter().enumerate() {
        let sep = if i == 0 { " Labels " } else { " | " };
        let _ = write!(out, "{sep}{label} mTTL={ttl}");
    }
    out.push('\n');
}

/// The text dump of one result.
pub fn dump(r: &TntResult) -> String {
    let mut out = String::new();
    let Some(trace) = &r.trace else {
        let _ = writeln!(out, "trace to {}: not run ({:?})", r.target, r.error);
        return out;
    };
    let _ = writeln!(
        out,
        "trace [{}] from {} to {}",
        trace.method.option_name(),
        trace.src,
        trace.dst
    );
    let mut h = 0;
    for e in &r.path {
        if e.revealed.is_some() {
            h += 1;
            let mut label = String::new();
            let _ = write!(label, "H{h}");
            hop_line(&mut out, &label, e);
        } else {
            h = 0;
            let mut label = String::new();
            let _ = write!(label, "{}", opt(e.probe_ttl));
            hop_line(&mut out, &label, e);
        }
    }
    for (i, t) in r.tunnels.iter().enumerate() {
        let _ = write!(
            out,
            "tunnel {i}: {} {} -> {} lsrs={}",
            t.class.name(),
            t.ingress
                .map_or(String::from("?"), |a| alloc::format!("{a}")),
            t.egress
                .map_or(String::from("?"), |a| alloc::format!("{a}")),
            t.lsrs.len()
        );
        if let Some(n) = t.hidden_estimate.filter(|_| t.class == TunnelClass::Opaque) {
            let _ = write!(out, " hidden~{n}");
        }
        if let Some(rev) = t.revelation {
            let _ = write!(out, " revelation={}", status_name(rev.status));
            if rev.cached {
                out.push_str(" (cached)");
            }
        }
        if let Some(n) = t.note {
            let _ = write!(out, " ({n})");
        }
        out.push('\n');
    }
    for u in &r.unrevealed {
        let _ = writeln!(
            out,
            "candidate {} {} -> {}: {}",
            u.trigger.tag(),
            u.ingress,
            u.egress,
            u.status.map_or("not tested", status_name)
        );
    }
    let _ = writeln!(out, "probes {}", r.probes);
    if r.incomplete {
        out.push_str(
            "incomplete: the run stopped before this target's pings and revelations were over\n",
        );
    }
    if r.target.is_ipv6() {
        out.push_str(
            "validated on the lab only: TNT over IPv6 and its vendor readings (docs/tnt.md)\n",
        );
    }
    out
}

/// Short name of a revelation status.
pub fn status_name(s: RevealStatus) -> &'static str {
    match s {
        RevealStatus::Running => "running",
        RevealStatus::Complete => "complete",
        RevealStatus::Incomplete(f) => match f {
            crate::reveal::RevealFailure::TargetNotReached => "incomplete:target-not-reached",
            crate::reveal::RevealFailure::IngressNotFound => "incomplete:ingress-not-found",
            crate::reveal::RevealFailure::NothingRevealed => "incomplete:nothing-revealed",
            crate::reveal::RevealFailure::StepLimit => "incomplete:step-limit",
            crate::reveal::RevealFailure::Loop => "incomplete:loop",
            crate::reveal::RevealFailure::SendError => "incomplete:send-error",
        },
        RevealStatus::Failed(f) => f.name(),
    }
}
