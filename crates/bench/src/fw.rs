//! The firewall's classifier, measured (`vtnt bench fw-classify`): for rule sets of each
//! size drawn by `vtnt_fw::gen` (or a user's file, `vtnt fw classify`), how long the
//! rules take to load (read from their iptables-save text, compiled), how much memory
//! they take, and how many nanoseconds a classification costs, for:
//!
//! - `trace`: headers drawn from the set's own rules, no locality (ClassBench's
//!   trace_generator with b = 0): new connections, every lookup cold;
//! - `local`: the same with high locality (b = 1: bursts of one header);
//! - `random`: uniformly random headers, most of which no rule matches (the policy);
//! - `est`: packets of established connections through the whole network function
//!   ([`Firewall::handle_packet`]: header parsing, connection lookup, the state shortcut)
//!   on 10,000 connections or more;
//!
//! beside the same trace through one table per tuple (classic tuple space search,
//! `exact`) and rule by rule (`linear`, as iptables evaluates a chain; up to 10,000
//! rules). With `verify`, the compiled classifier's verdicts are compared with the rule
//! by rule reference's on that many packets per set (sets of up to 100,000 rules).
//! Times are the best of three passes over all packets, after a warm-up pass.

use std::hint::black_box;
use std::time::Instant;

use vtnt_fw::gen::{self, Family, Header, RuleSpec, TraceSpec};
use vtnt_fw::parse::{self, Format};
use vtnt_fw::{
    print, Classifier, Config, CtState, Firewall, Hook, IfId, Linear, Options, Outcome, Packet,
    Ruleset, Strategy,
};
use vtnt_record::Instant as FwInstant;

/// What to measure.
#[derive(Debug, Clone)]
pub struct ClassifyOptions {
    /// Rule counts (0 allowed).
    pub sizes: Vec<usize>,
    pub family: Family,
    pub seed: u64,
    /// Packets per pass.
    pub packets: usize,
    /// Packets per set whose verdicts are compared with the reference (0: none).
    pub verify: usize,
}

/// One rule set's figures.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ClassifyRow {
    pub rules: usize,
    pub entries: usize,
    pub tables: usize,
    pub largest_bucket: u32,
    /// The classifier's heap bytes.
    pub bytes: usize,
    /// Reading the rule file, compiling it (milliseconds).
    pub parse_ms: f64,
    pub compile_ms: f64,
    /// Nanoseconds per classification.
    pub trace_ns: f64,
    pub local_ns: f64,
    pub random_ns: f64,
    pub est_ns: f64,
    pub exact_ns: f64,
    pub exact_tables: usize,
    /// Rule by rule (`None` past 10,000 rules).
    pub linear_ns: Option<f64>,
    /// Established connections `est_ns` ran over.
    pub connections: usize,
    /// Packets whose verdicts matched the reference's.
    pub verified: usize,
}

fn packet(h: &Header, state: CtState) -> Packet {
    Packet {
        src: h.src,
        dst: h.dst,
        proto: h.proto,
        sport: h.sport,
        dport: h.dport,
        tcp_flags: 0x10,
        fragment: false,
        in_if: IfId::NONE,
        out_if: IfId::NONE,
        state,
    }
}

fn random_headers(seed: u64, n: usize) -> Vec<Header> {
    let mut rng = vtnt_rng::Rng::new(seed);
    (0..n)
        .map(|_| {
            let a = rng.next_u64();
            let proto = [6, 17, 1][rng.below(3) as usize];
            Header {
                src: (a as u32).into(),
                dst: ((a >> 32) as u32).into(),
                proto,
                sport: rng.below(65536) as u16,
                dport: rng.below(65536) as u16,
                rule: 0,
            }
        })
        .collect()
}

/// Nanoseconds per call of `f` over `items`: best of three passes after a warm-up.
fn time_per<T>(items: &[T], mut f: impl FnMut(&T) -> u64) -> f64 {
    if items.is_empty() {
        return 0.0;
    }
    let mut pass = || {
        let t = Instant::now();
        let mut acc = 0u64;
        for x in items {
            acc = acc.wrapping_add(f(x));
        }
        black_box(acc);
        t.elapsed()
    };
    pass();
    let best = (0..3).map(|_| pass()).min().unwrap_or_default();
    best.as_nanos() as f64 / items.len() as f64
}

fn verdict_code(c: &Classifier, p: &Packet) -> u64 {
    let v = c.classify(Hook::Forward, p);
    v.rule.map_or(u64::MAX, |r| u64::from(r.index))
}

/// The network function over established connections: the trace's headers the rules
/// accept as new, each opened (its first packet, then a reply), then timed both ways.
fn established(rs: &Ruleset, headers: &[Header], want: usize) -> anyhow::Result<(f64, usize)> {
    let mut fw = Firewall::new(rs, Config::default())?;
    let datagram = |src, dst, proto: u8, sport: u16, dport: u16| -> Vec<u8> {
        let ip = vtnt_wire::build::Ip {
            src,
            dst,
            ttl: 64,
            tos: 0,
            ipid: 1,
        };
        let mut b = vec![0u8; 64];
        let n = match proto {
            6 => {
                let t = vtnt_wire::build::Tcp {
                    sport,
                    dport,
                    seq: 1,
                    ack: 1,
                    flags: 0x10,
                    window: 64,
                };
                vtnt_wire::build::tcp(&mut b, &ip, &t)
            }
            _ => {
                let u = vtnt_wire::build::Udp {
                    sport,
                    dport,
                    payload: &[0; 8],
                    checksum: None,
                };
                vtnt_wire::build::udp(&mut b, &ip, &u)
            }
        };
        b.truncate(n.unwrap_or(0));
        b
    };
    let mut flows = Vec::new();
    let mut reply = [0u8; 600];
    let now = FwInstant::from_millis(1);
    for h in headers.iter().filter(|h| matches!(h.proto, 6 | 17)) {
        let out = datagram(h.src, h.dst, h.proto, h.sport, h.dport);
        let back = datagram(h.dst, h.src, h.proto, h.dport, h.sport);
        let first = fw.handle_packet(now, Hook::Forward, IfId::NONE, IfId::NONE, &out, &mut reply);
        if first == Outcome::Accept
            && fw.handle_packet(
                now,
                Hook::Forward,
                IfId::NONE,
                IfId::NONE,
                &back,
                &mut reply,
            ) == Outcome::Accept
        {
            flows.push(out);
            flows.push(back);
        }
        if flows.len() >= 2 * want {
            break;
        }
    }
    let ns = time_per(&flows, |d| {
        let o = fw.handle_packet(now, Hook::Forward, IfId::NONE, IfId::NONE, d, &mut reply);
        u64::from(o == Outcome::Accept)
    });
    Ok((ns, flows.len() / 2))
}

/// Measures one rule set given as `text` (its syntax detected).
pub fn measure_text(text: &str, opts: &ClassifyOptions) -> anyhow::Result<ClassifyRow> {
    let t = Instant::now();
    let rs = parse::parse("rules", text, Format::detect(text), usize::MAX)?;
    let parse = t.elapsed();
    let mut row = measure(&rs, opts)?;
    row.parse_ms = parse.as_secs_f64() * 1e3;
    Ok(row)
}

/// Measures one rule set (see the module documentation).
pub fn measure(rs: &Ruleset, opts: &ClassifyOptions) -> anyhow::Result<ClassifyRow> {
    let t = Instant::now();
    let c = Classifier::compile(rs, &Options::default())?;
    let compile = t.elapsed();
    let stats = c.stats();
    let trace = gen::trace(
        rs,
        &TraceSpec {
            packets: opts.packets,
            seed: opts.seed,
            locality: 0.0,
        },
    );
    let local = gen::trace(
        rs,
        &TraceSpec {
            packets: opts.packets,
            seed: opts.seed,
            locality: 1.0,
        },
    );
    let random: Vec<Packet> = random_headers(opts.seed, opts.packets)
        .iter()
        .map(|h| packet(h, CtState::New))
        .collect();
    let trace_p: Vec<Packet> = trace.iter().map(|h| packet(h, CtState::New)).collect();
    let local_p: Vec<Packet> = local.iter().map(|h| packet(h, CtState::New)).collect();
    let exact = Classifier::compile(
        rs,
        &Options {
            strategy: Strategy::Exact,
            ..Options::default()
        },
    )?;
    let linear = Linear::new(rs);
    let linear_ns = (stats.rules <= 10_000).then(|| {
        let some = &trace_p[..trace_p.len().min(20_000)];
        time_per(some, |p| {
            linear
                .classify(Hook::Forward, p)
                .rule
                .map_or(0, |r| u64::from(r.index))
        })
    });
    let mut verified = 0;
    if opts.verify > 0 && stats.rules <= 100_000 {
        let n = opts.verify;
        let mut extra = gen::trace(
            rs,
            &TraceSpec {
                packets: n / 2,
                seed: opts.seed ^ 1,
                locality: 0.0,
            },
        );
        extra.extend(random_headers(opts.seed ^ 2, n - extra.len()));
        for (i, h) in extra.iter().enumerate() {
            let p = packet(h, CtState::ALL[i % 5]);
            let (got, want) = (
                c.classify(Hook::Forward, &p),
                linear.classify(Hook::Forward, &p),
            );
            anyhow::ensure!(
                got == want,
                "{} rules: {p:?}: compiled {got:?}, rules {want:?}",
                stats.rules
            );
            verified += 1;
        }
    }
    let (est_ns, connections) = established(rs, &trace, 10_000.max(opts.packets / 20))?;
    Ok(ClassifyRow {
        rules: stats.rules,
        entries: stats.entries,
        tables: stats.tables,
        largest_bucket: stats.largest_bucket,
        bytes: stats.bytes,
        parse_ms: 0.0,
        compile_ms: compile.as_secs_f64() * 1e3,
        trace_ns: time_per(&trace_p, |p| verdict_code(&c, p)),
        local_ns: time_per(&local_p, |p| verdict_code(&c, p)),
        random_ns: time_per(&random, |p| verdict_code(&c, p)),
        est_ns,
        exact_ns: time_per(&trace_p, |p| verdict_code(&exact, p)),
        exact_tables: exact.stats().tables,
        linear_ns,
        connections,
        verified,
    })
}

/// Draws and measures a set of each size (see the module documentation).
pub fn sweep(
    opts: &ClassifyOptions,
    mut progress: impl FnMut(&ClassifyRow),
) -> anyhow::Result<Vec<ClassifyRow>> {
    let mut rows = Vec::new();
    for &n in &opts.sizes {
        let spec = RuleSpec {
            family: opts.family,
            stateful: true,
            ..RuleSpec::new(n, opts.seed)
        };
        let text = print::iptables_save(&gen::rules(&spec))?;
        let row = measure_text(&text, opts)?;
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// The rows as the markdown table docs/benchmarks.md quotes.
pub fn table(rows: &[ClassifyRow]) -> String {
    let mut s = String::from(
        "| rules | entries | tables (exact) | largest bucket | bytes/rule | parse ms | compile ms | trace ns | local ns | random ns | est. ns (conns) | exact ns | linear ns | verified |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let per_rule = r
            .bytes
            .checked_div(r.rules)
            .map_or("-".into(), |b| b.to_string());
        let linear = r.linear_ns.map_or("-".into(), |n| format!("{n:.0}"));
        s.push_str(&format!(
            "| {} | {} | {} ({}) | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} ({}) | {:.0} | {} | {} |\n",
            r.rules,
            r.entries,
            r.tables,
            r.exact_tables,
            r.largest_bucket,
            per_rule,
            r.parse_ms,
            r.compile_ms,
            r.trace_ns,
            r.local_ns,
            r.random_ns,
            r.est_ns,
            r.connections,
            r.exact_ns,
            linear,
            r.verified,
        ));
    }
    s
}
