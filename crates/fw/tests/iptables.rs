//! Our verdicts against iptables' own: a generated rule set loaded with
//! `iptables-restore` into the FORWARD chain of a router namespace between a sender and
//! a receiver namespace, a trace of packets drawn from the set sent through it from the
//! sender (raw IPv4, our own headers), and iptables' per-rule packet counters
//! (`iptables-save -c`) compared with how many of the same packets our classifier says
//! each rule decided. Then the same with nftables: the set form a user would write
//! ([`print::nft_sets`]) loaded with `nft -f`, a counter on every printed rule, each
//! compared with the sum over the rules it stands for. Every packet stays in the three namespaces: the router's only
//! route leads to the receiver, which forwards nothing.

use std::net::Ipv4Addr;

use vtnt_fw::gen::{self, Family, Header, RuleSpec, TraceSpec};
use vtnt_fw::{print, Classifier, CtState, Hook, IfId, Options, Packet};
use vtnt_netns::NetNs;

mod wire;
use wire::{datagram, path, restore, send_from};

/// `iptables-save -c`'s FORWARD counters: per rule, and the policy's.
fn counters(router: &NetNs) -> (Vec<u64>, u64) {
    let out = router
        .exec("iptables-save", &["-c", "-t", "filter"])
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let packets = |s: &str| {
        s.trim_start_matches('[')
            .split(':')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let mut rules = Vec::new();
    let mut policy = 0;
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix(":FORWARD ") {
            policy = packets(rest.split_whitespace().nth(1).unwrap());
        } else if l.starts_with('[') && l.contains(" -A FORWARD ") {
            rules.push(packets(l.split_whitespace().next().unwrap()));
        }
    }
    (rules, policy)
}

#[test]
fn iptables_counts_what_our_classifier_decides() {
    vtnt_testkit::require_root!("ip", "iptables-restore", "iptables-save", "nft");
    let p = path();
    for (family, seed) in [(Family::Fw, 1), (Family::Acl, 2), (Family::Ipc, 3)] {
        let spec = RuleSpec {
            family,
            ..RuleSpec::new(800, seed)
        };
        let rules = gen::rules(&spec);
        let text = print::iptables_save(&rules).unwrap();
        restore(&p.router, &text);
        // iptables prints our rules exactly as we wrote them
        let saved = String::from_utf8(
            p.router
                .exec("iptables-save", &["-t", "filter"])
                .unwrap()
                .stdout,
        )
        .unwrap();
        let ours: Vec<&str> = text.lines().filter(|l| l.starts_with("-A ")).collect();
        let theirs: Vec<&str> = saved.lines().filter(|l| l.starts_with("-A ")).collect();
        assert_eq!(
            theirs, ours,
            "{family:?}: iptables-save differs from what we wrote"
        );

        let mut trace = gen::trace(
            &rules,
            &TraceSpec {
                packets: 3000,
                seed,
                locality: 0.05,
            },
        );
        // and packets drawn from nothing, most of them for the policy
        let mut rng = vtnt_testkit::Rng::new(seed);
        let routable = |rng: &mut vtnt_testkit::Rng| loop {
            let a = Ipv4Addr::from(rng.next_u64() as u32);
            if !matches!(a.octets()[0], 0 | 100 | 127 | 169 | 224..=255) {
                return a;
            }
        };
        for _ in 0..500 {
            let proto = [6, 17, 1, 47][rng.below(4)];
            let (sport, dport) = match proto {
                1 => ([0, 3, 8, 11][rng.below(4)], rng.below(4) as u16),
                6 | 17 => (rng.next_u64() as u16, rng.next_u64() as u16),
                _ => (0, 0),
            };
            let (src, dst) = (routable(&mut rng), routable(&mut rng));
            trace.push(Header {
                src,
                dst,
                proto,
                sport,
                dport,
                rule: 0,
            });
        }
        let classifier = Classifier::compile(&rules, &Options::default()).unwrap();
        let fwd = rules.hook_chain(Hook::Forward).unwrap();
        let mut want = vec![0u64; rules.chain(fwd).rules.len()];
        let mut want_policy = 0;
        for h in &trace {
            let pk = Packet {
                src: h.src,
                dst: h.dst,
                proto: h.proto,
                sport: h.sport,
                dport: h.dport,
                tcp_flags: 0x10,
                fragment: false,
                in_if: IfId::NONE,
                out_if: IfId::NONE,
                state: CtState::New,
            };
            match classifier.classify(Hook::Forward, &pk).rule {
                Some(r) => want[r.index as usize] += 1,
                None => want_policy += 1,
            }
        }
        send_from(&p.sender, trace.iter().map(|h| datagram(h, 1)).collect());
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (got, got_policy) = counters(&p.router);
        let sent = trace.len() as u64;
        assert_eq!(
            got.iter().sum::<u64>() + got_policy,
            sent,
            "{family:?}: iptables saw another number of packets"
        );
        let decided = want.iter().filter(|&&n| n > 0).count();
        eprintln!("{family:?}: {sent} packets, {decided} rules decided, policy {got_policy}");
        assert!(
            decided > 300 && got_policy > 100,
            "{family:?}: only {decided} rules and {got_policy} policy decisions"
        );
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g, w,
                "{family:?}: rule {i} `{}`: iptables {g}, ours {w}",
                ours[i]
            );
        }
        assert_eq!(got_policy, want_policy, "{family:?}: policy");

        must(&p.router, "nft", &["flush", "ruleset"]);
        let (text, groups) = print::nft_sets(&rules).unwrap();
        let groups = &groups[fwd.0 as usize];
        nft_load(&p.router, &with_counters(&text));
        send_from(&p.sender, trace.iter().map(|h| datagram(h, 1)).collect());
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut got = nft_counters(&p.router);
        let policy = got.pop().unwrap();
        eprintln!(
            "{family:?}: nft with sets: {} rules print as {}",
            want.len(),
            groups.len()
        );
        assert!(groups.len() < want.len(), "{family:?}: no rule merged");
        assert_eq!(got.len(), groups.len(), "{family:?}: nft rules");
        for (g, (n, rules)) in got.iter().zip(groups).enumerate() {
            let w: u64 = rules.iter().map(|&r| want[r]).sum();
            assert_eq!(*n, w, "{family:?}: nft rule {g} (our rules {rules:?})");
        }
        assert_eq!(policy, want_policy, "{family:?}: nft policy");
        must(&p.router, "nft", &["flush", "ruleset"]);
    }
}

fn must(ns: &NetNs, program: &str, args: &[&str]) {
    let out = ns.exec(program, args).unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The FORWARD chain of `text` with a counter before every rule's verdict and a last
/// rule counting what reaches the policy.
fn with_counters(text: &str) -> String {
    let mut out = String::new();
    let mut forward = false;
    for l in text.lines() {
        if l.starts_with("\tchain ") {
            forward = l.contains("FORWARD");
        } else if forward && l == "\t}" {
            out.push_str("\t\tcounter\n");
        } else if forward && l.starts_with("\t\t") && !l.starts_with("\t\ttype ") {
            let at = [" accept", " drop", " reject"]
                .iter()
                .filter_map(|v| l.rfind(v))
                .max()
                .unwrap();
            out.push_str(&format!("{} counter{}\n", &l[..at], &l[at..]));
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

fn nft_load(router: &NetNs, text: &str) {
    let mut child = router
        .command("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "nft -f: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The packet counters of the FORWARD chain's rules, in order.
fn nft_counters(router: &NetNs) -> Vec<u64> {
    let out = router
        .exec("nft", &["list", "chain", "ip", "filter", "FORWARD"])
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split("counter packets ").nth(1))
        .map(|r| r.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}
