//! `vtnt run`'s RTT correction (on by default but for native; `--correct-rtt` forces it,
//! `--no-correct-rtt` turns it off): the runtime's RTTs without the virtualisation's share
//! (vtnt-mace, docs/rtt-correction.md). Where the runtime's packets cross a device we
//! reach (runc and Docker containers share the lab's namespace and send through its TUN),
//! a capture there ([`vtnt_linux::host_stamps`]) stamps every probe and reply, and each
//! ICMP echo ping reply and each trace hop of the job's JSON gets its corrected RTT beside
//! scamper's `rtt` (which stays the runtime's own): one member `rtt_correction` appended
//! to the record.
//! VMs, microVMs and spt guests on a lab (or behind `vtnt lab front`) send their frames
//! to its VM front as UDP datagrams on the host's loopback: the capture is there, on the
//! front's port; a VM or microVM on a TAP is captured on the TAP.
//! Where no correction is made (native: nothing to remove; other networks, other probe
//! kinds) that member says why instead.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::{json, Map, Value};
use vtnt_linux::host_stamps::{Background, Side};
use vtnt_mace::{correct, Correction, Ident, Key, Pairing, ToolProbe};
use vtnt_runtimes::net::Network;
use vtnt_runtimes::Runtime;

/// How one run is corrected.
pub enum Plan {
    /// Capture on `ifname` in the namespace at `netns`, on `side` of the runtime;
    /// `at` says where, in the output.
    Capture {
        netns: PathBuf,
        ifname: String,
        side: Side,
        at: String,
    },
    /// No correction, for this reason.
    Not(String),
}

/// `vtnt run`'s choice: `--correct-rtt`, `--no-correct-rtt`, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The default: every runtime but native is corrected where its host side is
    /// captured, or its records say why not; native's JSON stays scamper's own, and so
    /// does a held job's (its capture would grow for as long as it holds).
    Auto,
    /// Every runtime, native and held jobs included; a capture that cannot start is an
    /// error.
    On,
    Off,
}

/// What `vtnt run` does about correction in `mode`: the plan its records are annotated
/// by (`None`: left as they are) and the capture running for it, started here.
pub fn prepare(
    mode: Mode,
    runtime: Runtime,
    net: &Network,
    held: bool,
) -> anyhow::Result<(Option<Plan>, Option<Capture>)> {
    let auto = match mode {
        Mode::Off => return Ok((None, None)),
        Mode::Auto if runtime == Runtime::Native || held => return Ok((None, None)),
        Mode::Auto => true,
        Mode::On => false,
    };
    let plan = plan(runtime, net);
    match Capture::start(&plan) {
        Ok(capture) => Ok((Some(plan), capture)),
        Err(e) if auto => {
            let why = format!("{e:#}");
            vtnt_job::say!("vtnt run: RTTs not corrected: {why}");
            Ok((Some(Plan::Not(why)), None))
        }
        Err(e) => Err(e),
    }
}

/// This process's own network namespace (a VM front listens there).
const OWN_NETNS: &str = "/proc/self/ns/net";

/// Where `runtime` on `net` can be corrected.
pub fn plan(runtime: Runtime, net: &Network) -> Plan {
    match (runtime, net) {
        (Runtime::Native, _) => Plan::Not(
            "native: no virtual device between the tool and the network, rtt is the network's"
                .into(),
        ),
        (Runtime::Runc | Runtime::Docker | Runtime::DockerScratch, Network::Lab(lab)) => {
            let netns = PathBuf::from("/run/netns").join(lab);
            let ifname = vtnt_lab_linux::state::TUN_NAME;
            Plan::Capture {
                at: format!("{ifname} in {}", netns.display()),
                netns,
                ifname: ifname.into(),
                side: Side::SharedNamespace,
            }
        }
        (Runtime::Runc | Runtime::Docker | Runtime::DockerScratch, _) => Plan::Not(format!(
            "{}: on this network the container shares the host's stack: no device of its own to capture",
            runtime.name()
        )),
        (Runtime::Vm | Runtime::Microvm | Runtime::Spt, Network::Lab(lab)) => {
            match vtnt_lab_linux::lab_state(lab) {
                Ok(state) => Plan::Capture {
                    netns: OWN_NETNS.into(),
                    ifname: "lo".into(),
                    side: Side::Front {
                        port: state.vm_port,
                    },
                    at: format!("the VM front of `{lab}` (UDP port {} on lo)", state.vm_port),
                },
                Err(e) => Plan::Not(format!("{}: {e}", runtime.name())),
            }
        }
        (Runtime::Vm | Runtime::Microvm, Network::Tap(t)) => {
            let netns = t
                .netns
                .as_ref()
                .map_or_else(|| PathBuf::from(OWN_NETNS), |n| PathBuf::from("/run/netns").join(n));
            Plan::Capture {
                at: format!("TAP {}", t.ifname),
                netns,
                ifname: t.ifname.clone(),
                side: Side::HostEnd,
            }
        }
        (Runtime::Vm | Runtime::Microvm | Runtime::Spt, _) => Plan::Not(format!(
            "{}: on this network its host side is not captured",
            runtime.name()
        )),
    }
}

/// A capture running for one job.
pub struct Capture {
    stamps: Background,
    at: String,
}

impl Capture {
    /// Starts capturing as `plan` says (`None`: nothing to capture).
    pub fn start(plan: &Plan) -> anyhow::Result<Option<Capture>> {
        let Plan::Capture {
            netns,
            ifname,
            side,
            at,
        } = plan
        else {
            return Ok(None);
        };
        let stamps = Background::start(netns, ifname, *side)
            .with_context(|| format!("--correct-rtt: capturing on {at}"))?;
        Ok(Some(Capture {
            stamps,
            at: at.clone(),
        }))
    }

    /// Takes in the capture and annotates the job's JSON `stdout`.
    pub fn finish(self, stdout: &str) -> anyhow::Result<String> {
        let taken = self
            .stamps
            .finish()
            .context("--correct-rtt: reading the capture")?;
        let drops = taken.drops;
        if drops > 0 {
            vtnt_job::say!("vtnt run: --correct-rtt: the capture lost {drops} packets: their probes are not corrected");
        }
        Ok(annotate(stdout, &Ok((&taken.pair(), &self.at))))
    }
}

/// `stdout` with an `rtt_correction` member appended to every ping and trace record:
/// corrections from `host` (the pairing and where it was captured), or the reason none
/// was made. Lines that are no such JSON record stay as they are.
pub fn annotate(stdout: &str, host: &Result<(&Pairing, &str), &str>) -> String {
    let mut out = String::with_capacity(stdout.len() * 2);
    // each line and its record, if it is a JSON object (parsed once)
    let lines: Vec<(&str, Option<Map<String, Value>>)> = stdout
        .split_inclusive('\n')
        .map(|l| (l, serde_json::from_str(l.trim_end_matches('\n')).ok()))
        .collect();
    // a trace hop is found by its destination, TTL and attempt: two traces to one
    // destination would be told apart by nothing the JSON says
    let mut traces_to = std::collections::HashMap::<&str, usize>::new();
    for r in lines.iter().filter_map(|(_, r)| r.as_ref()) {
        if let (Some("trace"), Some(d)) = (
            r.get("type").and_then(Value::as_str),
            r.get("dst").and_then(Value::as_str),
        ) {
            *traces_to.entry(d).or_default() += 1;
        }
    }
    for (line, record) in &lines {
        let (line, body) = (*line, line.trim_end_matches('\n'));
        let kind = record.as_ref().and_then(|r| r.get("type")?.as_str());
        let empty = Map::new();
        let r = record.as_ref().unwrap_or(&empty);
        let member = match (kind, host) {
            (Some("ping" | "trace"), Err(why)) => json!({ "not_corrected": why }),
            (Some("ping"), Ok((pairing, at))) => ping(r, pairing, at),
            (Some("trace"), Ok((pairing, at))) => {
                let dst = r.get("dst").and_then(Value::as_str).unwrap_or_default();
                if traces_to.get(dst).copied().unwrap_or(0) > 1 {
                    json!({ "not_corrected": "ambiguous: two traces to this destination" })
                } else {
                    trace(r, pairing, at)
                }
            }
            _ => {
                out.push_str(line);
                continue;
            }
        };
        let Some(open) = body.strip_suffix('}') else {
            out.push_str(line);
            continue;
        };
        out.push_str(open);
        out.push_str(&format!(", \"rtt_correction\":{member}}}"));
        out.push_str(&line[body.len()..]);
    }
    out
}

/// The correction of one ping record's replies.
fn ping(record: &Map<String, Value>, pairing: &Pairing, at: &str) -> Value {
    if record.get("method").and_then(Value::as_str) != Some("icmp-echo") {
        return json!({ "not_corrected": "only ICMP echo pings are corrected yet" });
    }
    let Some(dst) = record
        .get("dst")
        .and_then(|d| d.as_str()?.parse::<IpAddr>().ok())
    else {
        return json!({ "not_corrected": "the record names no destination" });
    };
    // Probe n carries echo sequence number n - 1 + first (`-d`, JSON `dport`; 1 unless set).
    let first = match record.get("dport").and_then(Value::as_u64) {
        None | Some(0) => 1,
        Some(d) => d,
    };
    let replies = record.get("responses").and_then(Value::as_array);
    let responses: Vec<Value> = replies
        .into_iter()
        .flatten()
        .map(|r| {
            let seq = r.get("seq").and_then(Value::as_u64);
            let rtt_ms = r.get("rtt").and_then(Value::as_f64);
            let (Some(seq), Some(rtt_ms)) = (seq, rtt_ms) else {
                return json!({ "not_corrected": "a reply without seq or rtt" });
            };
            let wire_seq = seq.wrapping_add(first) as u16;
            let key = echo_key(pairing, dst, wire_seq);
            with_verdict(json!({ "seq": seq }), pairing, key, rtt_ms)
        })
        .collect();
    json!({ "at": at, "responses": responses })
}

/// The correction of one trace record's hops: hop `(probe_ttl, probe_id)` is the
/// `probe_id`-th probe to the destination that left with TTL `probe_ttl`.
fn trace(record: &Map<String, Value>, pairing: &Pairing, at: &str) -> Value {
    let Some(dst) = record
        .get("dst")
        .and_then(|d| d.as_str()?.parse::<IpAddr>().ok())
    else {
        return json!({ "not_corrected": "the record names no destination" });
    };
    // A UDP or TCP trace keeps its source port on every probe (scamper's `sport`): the
    // host's probes of another trace to the same destination (another container in the
    // namespace, another guest behind the front) are no hop of this one. An ICMP trace's
    // identifier is not in the JSON: its hops are told apart by TTL and attempt only.
    let sport = record
        .get("sport")
        .and_then(Value::as_u64)
        .filter(|&p| p > 0);
    let of_flow = |k: Key| match (k.ident, sport) {
        (Ident::Udp { sport: s, .. } | Ident::Tcp { sport: s, .. }, Some(want)) => {
            u64::from(s) == want
        }
        (Ident::Icmp { .. }, Some(_)) => false,
        _ => true,
    };
    let hops = record.get("hops").and_then(Value::as_array);
    let hops: Vec<Value> = hops
        .into_iter()
        .flatten()
        .map(|h| {
            let num = |k| h.get(k).and_then(Value::as_u64);
            let rtt_ms = h.get("rtt").and_then(Value::as_f64);
            let (Some(ttl), Some(id), Some(rtt_ms)) = (num("probe_ttl"), num("probe_id"), rtt_ms)
            else {
                return json!({ "not_corrected": "a hop without probe_ttl, probe_id or rtt" });
            };
            let key = pairing
                .probes
                .iter()
                .map(|p| p.probe)
                .filter(|p| p.key.target == dst && u64::from(p.ttl) == ttl && of_flow(p.key))
                .nth(id.saturating_sub(1) as usize)
                .map(|p| p.key)
                .ok_or("not seen on the host side");
            let hop = json!({ "probe_ttl": ttl, "probe_id": id });
            with_verdict(hop, pairing, key, rtt_ms)
        })
        .collect();
    json!({ "at": at, "hops": hops })
}

/// The key of the one ICMP echo probe to `dst` with sequence number `seq` the host saw
/// (its identifier is not in the JSON: exactly one such probe, or no correction).
fn echo_key(pairing: &Pairing, dst: IpAddr, seq: u16) -> Result<Key, &'static str> {
    let mut found =
        pairing.probes.iter().map(|p| p.probe.key).filter(|k| {
            k.target == dst && matches!(k.ident, Ident::Icmp { seq: s, .. } if s == seq)
        });
    match (found.next(), found.next()) {
        (Some(k), None) => Ok(k),
        (None, _) => Err("not seen on the host side"),
        (Some(_), Some(_)) => {
            Err("ambiguous: two probes to this destination with this sequence number")
        }
    }
}

/// `entry` with the correction of the probe `key` whose runtime RTT is `rtt_ms` added, or
/// the reason there is none.
fn with_verdict(mut entry: Value, pairing: &Pairing, key: Result<Key, &str>, rtt_ms: f64) -> Value {
    let verdict = match key {
        Ok(key) => {
            let raw = ToolProbe {
                key,
                rtt_ns: Some((rtt_ms * 1e6).round() as u64),
            };
            corrected(correct(pairing, &[raw])[0])
        }
        Err(why) => json!({ "not_corrected": why }),
    };
    if let (Some(m), Value::Object(add)) = (entry.as_object_mut(), verdict) {
        m.extend(add);
    }
    entry
}

/// One correction as JSON members (milliseconds, like scamper's `rtt`).
fn corrected(c: Correction) -> Value {
    let ms = |ns: i64| (ns as f64 / 1e6 * 1e3).round() / 1e3;
    match c {
        Correction::Corrected {
            wire_ns,
            overhead_ns,
            ..
        } => json!({ "rtt_corrected": ms(wire_ns as i64), "rtt_overhead": ms(overhead_ns) }),
        Correction::NoReply => json!({ "not_corrected": "no reply" }),
        Correction::NotSeenOnHost => json!({ "not_corrected": "not seen on the host side" }),
        Correction::NoHostReply => json!({ "not_corrected": "the host side saw no reply" }),
        Correction::Ambiguous => json!({ "not_corrected": "ambiguous reply on the host side" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use vtnt_mace::{pair, Dir, Event};
    use vtnt_wire::build::{self, Echo, Ip};
    use vtnt_wire::icmp_type;

    #[test]
    fn by_default_every_runtime_but_native_and_held_jobs_is_corrected_or_says_why() {
        let lab = Network::Lab("vtnt-nosuch-lab".into());
        let none =
            |r: anyhow::Result<(Option<Plan>, Option<Capture>)>| matches!(r, Ok((None, None)));
        // nothing to remove natively; a held job's capture would grow without end
        assert!(none(prepare(Mode::Auto, Runtime::Native, &lab, false)));
        assert!(none(prepare(Mode::Auto, Runtime::Runc, &lab, true)));
        assert!(none(prepare(Mode::Off, Runtime::Runc, &lab, false)));
        // a runtime on a network whose host side is not captured: the reason, no capture
        let r = prepare(Mode::Auto, Runtime::Spt, &Network::Host, false).unwrap();
        assert!(
            matches!(&r, (Some(Plan::Not(why)), None) if why.starts_with("spt: ")),
            "{:?}",
            r.0.map(|p| matches!(p, Plan::Not(_)))
        );
        // asked for, native says why
        let r = prepare(Mode::On, Runtime::Native, &lab, false).unwrap();
        assert!(matches!(&r, (Some(Plan::Not(why)), None) if why.starts_with("native: ")));
        // a lab that is not up: by default the records say so; asked for, the run fails
        match prepare(Mode::Auto, Runtime::Microvm, &lab, false) {
            Ok((Some(Plan::Not(why)), None)) => assert!(why.contains("nosuch"), "{why}"),
            _ => panic!("a lab that is not up"),
        }
    }

    #[test]
    fn vms_are_captured_on_their_tap_and_not_on_the_host_network() {
        let tap: Network = "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,netns=edge"
            .parse()
            .unwrap();
        for rt in [Runtime::Vm, Runtime::Microvm] {
            let Plan::Capture {
                netns,
                ifname,
                side,
                at,
            } = plan(rt, &tap)
            else {
                panic!("{rt:?} on a TAP is captured")
            };
            assert_eq!(netns, PathBuf::from("/run/netns/edge"));
            assert_eq!(
                (ifname.as_str(), side, at.as_str()),
                ("vtap0", Side::HostEnd, "TAP vtap0")
            );
        }
        let Plan::Not(why) = plan(Runtime::Spt, &Network::Host) else {
            panic!("spt on the host network is not captured")
        };
        assert_eq!(why, "spt: on this network its host side is not captured");
        // a lab that is not running: the reason, not a capture
        let Plan::Not(why) = plan(Runtime::Spt, &Network::Lab("vtnt-no-such-lab".into())) else {
            panic!("no capture without a lab")
        };
        assert!(
            why.starts_with("spt: ") && why.contains("vtnt-no-such-lab"),
            "{why}"
        );
    }

    const VP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const TARGET: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 9);

    fn echo(request: bool, ident: u16, seq: u16) -> Vec<u8> {
        echo_ttl(request, ident, seq, 5)
    }

    fn echo_ttl(request: bool, ident: u16, seq: u16, ttl: u8) -> Vec<u8> {
        let (src, dst, t) = match request {
            true => (VP, TARGET, icmp_type::ECHO_REQUEST),
            false => (TARGET, VP, icmp_type::ECHO_REPLY),
        };
        let ip = Ip {
            src,
            dst,
            ttl,
            tos: 0,
            ipid: 7,
        };
        let e = Echo {
            icmp_type: t,
            ident,
            seq,
            payload: &[0; 8],
            checksum: None,
        };
        let mut b = vec![0; 128];
        let n = build::icmp_echo(&mut b, &ip, &e).unwrap();
        b.truncate(n);
        b
    }

    const PING: &str = r#"{"type":"ping", "method":"icmp-echo", "dst":"192.0.2.9", "responses":[{"from":"192.0.2.9", "seq":0, "rtt":0.050},{"from":"192.0.2.9", "seq":1, "rtt":0.060},{"from":"192.0.2.9", "seq":2, "rtt":0.070}]}"#;

    #[test]
    fn a_runtime_not_corrected_says_why_on_every_record_and_keeps_the_rest() {
        let udp = r#"{"type":"trace", "dst":"192.0.2.9"}"#;
        let input = format!("{PING}\n{udp}\nnot json\n");
        let out = annotate(&input, &Err("vm: not captured"));
        let lines: Vec<&str> = out.lines().collect();
        let tail = r#", "rtt_correction":{"not_corrected":"vm: not captured"}}"#;
        assert_eq!(lines[0], format!("{}{tail}", &PING[..PING.len() - 1]));
        assert_eq!(lines[1], format!("{}{tail}", &udp[..udp.len() - 1]));
        assert_eq!(lines[2], "not json");
        assert!(out.ends_with('\n'));
    }

    /// The pairing of `packets` seen on the host side: direction, stamp (ns), bytes.
    fn pairing_of(packets: &[(Dir, u64, Vec<u8>)]) -> Pairing {
        let events: Vec<Event> = packets
            .iter()
            .map(|(dir, stamp_ns, p)| Event {
                dir: *dir,
                stamp_ns: *stamp_ns,
                packet: p,
            })
            .collect();
        pair(&events)
    }

    #[test]
    fn each_echo_reply_gets_the_host_round_trip_or_the_reason_not() {
        // seq 0 (wire seq 1): out at 1 us, back at 41 us; seq 1: no reply on the host
        // side; seq 2 (wire seq 3): two probes with that sequence number (two pings).
        let packets = [
            (Dir::Out, 1_000, echo(true, 0x1234, 1)),
            (Dir::In, 41_000, echo(false, 0x1234, 1)),
            (Dir::Out, 2_000_000, echo(true, 0x1234, 2)),
            (Dir::Out, 3_000_000, echo(true, 0x1234, 3)),
            (Dir::Out, 3_000_100, echo(true, 0x4321, 3)),
        ];
        let pairing = pairing_of(&packets);
        let out = annotate(PING, &Ok((&pairing, "vtnt0 in /run/netns/x")));
        assert!(out.starts_with(&PING[..PING.len() - 1]), "{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["responses"][0]["rtt"], 0.050, "the runtime's rtt stays");
        let c = &v["rtt_correction"];
        assert_eq!(c["at"], "vtnt0 in /run/netns/x");
        assert_eq!(
            c["responses"],
            json!([
                {"seq": 0, "rtt_corrected": 0.040, "rtt_overhead": 0.010},
                {"seq": 1, "not_corrected": "the host side saw no reply"},
                {"seq": 2, "not_corrected": "ambiguous: two probes to this destination with this sequence number"},
            ])
        );
        let udp = PING.replace("icmp-echo", "udp");
        let out: Value = serde_json::from_str(&annotate(&udp, &Ok((&pairing, "x")))).unwrap();
        assert_eq!(
            out["rtt_correction"],
            json!({"not_corrected": "only ICMP echo pings are corrected yet"})
        );
    }

    /// Hop `(probe_ttl, probe_id)` of a trace is the `probe_id`-th probe with that TTL
    /// the host saw leave for its destination; its time exceeded is paired by the quote.
    #[test]
    fn each_trace_hop_gets_the_host_round_trip_or_the_reason_not() {
        let hop = Ipv4Addr::new(198, 51, 100, 1);
        let exceeded = |probe: &[u8]| {
            let ip = Ip {
                src: hop,
                dst: VP,
                ttl: 250,
                tos: 0,
                ipid: 9,
            };
            let e = build::IcmpError {
                icmp_type: icmp_type::TIME_EXCEEDED,
                code: 0,
                original: probe,
                quote_len: 28,
                mpls: &[],
            };
            let mut b = vec![0; 128];
            let n = build::icmp_error(&mut b, &ip, &e).unwrap();
            b.truncate(n);
            b
        };
        // TTL 1: two attempts, the second answered (out at 2 us, back at 32 us); TTL 2:
        // the target's echo reply (out at 3 us, back at 63 us)
        let (a, b, c) = (
            echo_ttl(true, 0x1234, 1, 1),
            echo_ttl(true, 0x1234, 2, 1),
            echo_ttl(true, 0x1234, 3, 2),
        );
        let packets = [
            (Dir::Out, 1_000, a.clone()),
            (Dir::Out, 2_000, b.clone()),
            (Dir::In, 32_000, exceeded(&b)),
            (Dir::Out, 3_000, c),
            (Dir::In, 63_000, echo_ttl(false, 0x1234, 3, 60)),
        ];
        let pairing = pairing_of(&packets);
        let trace = r#"{"type":"trace", "dst":"192.0.2.9", "hops":[{"addr":"198.51.100.1", "probe_ttl":1, "probe_id":2, "rtt":0.050},{"addr":"192.0.2.9", "probe_ttl":2, "probe_id":1, "rtt":0.070},{"addr":"192.0.2.9", "probe_ttl":3, "probe_id":1, "rtt":0.070}]}"#;
        let out: Value = serde_json::from_str(&annotate(trace, &Ok((&pairing, "x")))).unwrap();
        assert_eq!(
            out["rtt_correction"]["hops"],
            json!([
                {"probe_ttl": 1, "probe_id": 2, "rtt_corrected": 0.030, "rtt_overhead": 0.020},
                {"probe_ttl": 2, "probe_id": 1, "rtt_corrected": 0.060, "rtt_overhead": 0.010},
                {"probe_ttl": 3, "probe_id": 1, "not_corrected": "not seen on the host side"},
            ])
        );
        // a UDP trace (its source port in the record) to the same destination: the
        // host's ICMP probes are another trace's, none of its hops
        let udp = trace.replace(
            r#""dst":"192.0.2.9","#,
            r#""dst":"192.0.2.9", "sport":33000, "dport":33435,"#,
        );
        let out: Value = serde_json::from_str(&annotate(&udp, &Ok((&pairing, "x")))).unwrap();
        for h in out["rtt_correction"]["hops"].as_array().unwrap() {
            assert_eq!(h["not_corrected"], "not seen on the host side", "{h}");
        }
        // two traces to one destination: told apart by nothing in the JSON
        let two = format!("{trace}\n{trace}\n");
        let out = annotate(&two, &Ok((&pairing, "x")));
        for line in out.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let why = &v["rtt_correction"]["not_corrected"];
            assert_eq!(why, "ambiguous: two traces to this destination", "{line}");
        }
    }
}
