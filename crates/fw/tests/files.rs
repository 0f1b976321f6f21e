//! Rule files: iptables-save and nft samples read as iptables reads them, written back
//! as iptables-save prints them, the two syntaxes of one rule set classifying alike,
//! round trips, and bad input refused with its file, line, column and construct.

mod common;

use vtnt_fw::gen::{self, Family, RuleSpec};
use vtnt_fw::parse::{self, Format, ParseError, What};
use vtnt_fw::rule::{Match, PortRange};
use vtnt_fw::{print, Action, Hook, Packet, RejectWith, Ruleset, Target};
use vtnt_testkit::Rng;

/// What `iptables-save` (1.8.9, nf_tables) printed after `iptables-restore` of a file
/// with these rules (the header comments left out).
const SAVED: &str = "\
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:mychain - [0:0]
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -s 10.0.0.0/8 -d 192.168.1.0/24 -p tcp -m tcp --sport 1024:65535 --dport 80 -j ACCEPT
-A FORWARD -s 10.1.2.3/32 ! -d 10.0.0.0/8 -p udp -m udp ! --dport 53 -j DROP
-A FORWARD -p icmp -m icmp --icmp-type 8 -j ACCEPT
-A FORWARD -p icmp -m icmp --icmp-type 3/3 -j REJECT --reject-with icmp-host-prohibited
-A FORWARD -p tcp -m multiport --dports 22,80,1000:2000 -j ACCEPT
-A FORWARD -i eth+ -o veth0 -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j mychain
-A FORWARD -p tcp -m tcp --tcp-flags SYN,ACK SYN -j REJECT --reject-with tcp-reset
-A FORWARD -p gre -j ACCEPT
-A FORWARD -p tcp -j REJECT --reject-with icmp-port-unreachable
-A mychain -s 1.2.3.4/32 -j DROP
-A mychain -j RETURN
COMMIT
";

/// The same rules as `nft list ruleset` shows them after `iptables-nft-restore` (the
/// form `iptables-translate` gives), plus a named set.
const NFT: &str = r#"# Warning: table ip filter is managed by iptables-nft, do not touch!
table ip filter {
	set web {
		type inet_service
		flags interval
		elements = { 22, 80, 1000-2000 }
	}

	chain INPUT {
		type filter hook input priority filter; policy accept;
	}

	chain FORWARD {
		type filter hook forward priority filter; policy drop;
		ct state related,established counter packets 0 bytes 0 accept
		ip saddr 10.0.0.0/8 ip daddr 192.168.1.0/24 tcp sport 1024-65535 tcp dport 80 counter packets 0 bytes 0 accept
		ip saddr 10.1.2.3 ip daddr != 10.0.0.0/8 udp dport != 53 counter packets 0 bytes 0 drop
		icmp type echo-request counter packets 0 bytes 0 accept
		icmp type destination-unreachable icmp code 3 counter packets 0 bytes 0 reject with icmp host-prohibited
		tcp dport @web counter packets 0 bytes 0 accept
		iifname "eth*" oifname "veth0" tcp flags & (fin|syn|rst|ack) == syn counter packets 0 bytes 0 jump mychain
		tcp flags syn / syn,ack counter packets 0 bytes 0 reject with tcp reset
		meta l4proto gre counter packets 0 bytes 0 accept
		meta l4proto tcp counter packets 0 bytes 0 reject
	}

	chain OUTPUT {
		type filter hook output priority filter; policy accept;
	}

	chain mychain {
		ip saddr 1.2.3.4 counter packets 0 bytes 0 drop
		counter packets 0 bytes 0 return
	}
}
"#;

#[test]
fn an_iptables_save_file_reads_and_prints_back_as_iptables_saves_it() {
    let rs = parse::iptables_save("rules.v4", SAVED).unwrap();
    assert_eq!(rs.rule_count(), 12);
    let fwd = rs.chain(rs.hook_chain(Hook::Forward).unwrap());
    assert_eq!(fwd.policy, Action::Drop);
    assert_eq!(fwd.rules[1].dport, Match::Is(PortRange::one(80)));
    assert_eq!(
        fwd.rules[1].sport,
        Match::Is(PortRange {
            lo: 1024,
            hi: 65535
        })
    );
    assert_eq!(
        fwd.rules[4].target,
        Target::Verdict(Action::Reject(RejectWith::HostProhibited))
    );
    assert_eq!(fwd.rules[2].line, 8);
    assert_eq!(print::iptables_save(&rs).unwrap(), SAVED);
}

#[test]
fn iptables_restore_forms_beyond_what_save_prints() {
    let text = "# a comment\n*filter\n:FORWARD ACCEPT [12:34]\n:u - [0:0]\n\
        [3:120] -A FORWARD -s 10.0.0.0/255.255.0.0,192.0.2.1 --protocol TCP --dport 1024: -m comment --comment \"two words\" -g u\n\
        -A FORWARD -p icmp --icmp-type port-unreachable -m state ! --state NEW,INVALID -j DROP\n\
        -A FORWARD -p tcp ! --syn -j DROP\n-A FORWARD -p udp\nCOMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n";
    let rs = parse::iptables_save("r", text).unwrap();
    let fwd = rs.chain(rs.hook_chain(Hook::Forward).unwrap());
    let Match::In(set) = fwd.rules[0].src else {
        panic!("{:?}", fwd.rules[0].src)
    };
    assert_eq!(rs.set::<vtnt_fw::rule::Prefix>(set).len(), 2);
    assert_eq!(
        fwd.rules[0].dport,
        Match::Is(PortRange {
            lo: 1024,
            hi: 65535
        })
    );
    assert!(matches!(fwd.rules[0].target, Target::Goto(_)));
    let states = fwd.rules[1].state.unwrap();
    assert!(
        states.contains(vtnt_fw::CtState::Established) && !states.contains(vtnt_fw::CtState::New)
    );
    assert!(fwd.rules[2].tcp_flags.unwrap().invert);
    assert_eq!(fwd.rules[3].target, Target::Continue);
}

#[test]
fn the_nft_form_classifies_as_the_iptables_form() {
    let ipt = parse::iptables_save("rules.v4", SAVED).unwrap();
    let nft = parse::nft("rules.nft", NFT).unwrap();
    assert_eq!(nft.rule_count(), ipt.rule_count());
    assert_eq!(Format::detect(NFT), Format::Nft);
    assert_eq!(Format::detect(SAVED), Format::IptablesSave);
    same_verdicts(&ipt, &nft, 200_000, "iptables-save vs nft");
}

/// Both rulesets give every packet the same verdict by the same rule.
fn same_verdicts(a: &Ruleset, b: &Ruleset, n: usize, what: &str) {
    let (la, lb) = (common::linear(a), common::linear(b));
    let mut rng = Rng::new(11);
    let mut decided = std::collections::BTreeSet::new();
    for i in 0..n {
        let mut p: Packet = common::random_packet(&mut rng);
        if i % 3 == 0 {
            // aim at the samples' addresses
            p.src = ["10.1.2.3", "1.2.3.4", "10.9.9.9"][i % 9 / 3]
                .parse()
                .unwrap();
            p.dst = "192.168.1.7".parse().unwrap();
        }
        let (va, vb) = (
            la.classify(Hook::Forward, &p),
            lb.classify(Hook::Forward, &p),
        );
        assert_eq!(va.action, vb.action, "{what}: {p:?}: {va:?} vs {vb:?}");
        assert_eq!(
            va.rule.map(|r| r.index),
            vb.rule.map(|r| r.index),
            "{what}: {p:?}"
        );
        decided.insert(va.rule.map(|r| (r.chain, r.index)));
    }
    assert!(decided.len() > 6, "{what}: only {decided:?} decided");
}

fn zero_lines(mut rs: Ruleset) -> Ruleset {
    for c in &mut rs.chains {
        c.line = 0;
        for r in &mut c.rules {
            r.line = 0;
        }
    }
    rs
}

#[test]
fn generated_sets_round_trip_through_both_syntaxes() {
    for family in [Family::Acl, Family::Fw, Family::Ipc] {
        let rs = gen::rules(&RuleSpec {
            family,
            stateful: true,
            ..RuleSpec::new(2000, 5)
        });
        let text = print::iptables_save(&rs).unwrap();
        assert_eq!(zero_lines(parse::iptables_save("g", &text).unwrap()), rs);
        let text = print::nft(&rs).unwrap();
        assert_eq!(zero_lines(parse::nft("g", &text).unwrap()), rs, "{text}");
    }
}

#[test]
fn random_rulesets_round_trip_through_nft() {
    let mut rng = Rng::new(vtnt_testkit::seed("VTNT_FW_FILES_SEED", || 17));
    for round in 0..20 {
        let rs = common::random_ruleset(&mut rng, 60, round % 2 == 0);
        let packets: Vec<Packet> = (0..5000).map(|_| common::random_packet(&mut rng)).collect();
        let a = common::linear(&rs);
        // nft cannot hold every construct (a set of ICMP types with codes): what it can
        // print must come back the same
        let text = match print::nft(&rs) {
            Ok(t) => t,
            Err(e) => {
                assert!(e.to_string().contains("ICMP"), "{e}");
                continue;
            }
        };
        let back = parse::nft("r.nft", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let b = common::linear(&back);
        for p in &packets {
            assert_eq!(
                a.classify(Hook::Forward, p),
                b.classify(Hook::Forward, p),
                "round {round}: {p:?}\n{text}\n{rs:?}"
            );
        }
        // nor can iptables-save (negated sets, interface sets)
        if let Ok(text) = print::iptables_save(&rs) {
            let back =
                parse::iptables_save("r.v4", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let b = common::linear(&back);
            for p in &packets {
                assert_eq!(
                    a.classify(Hook::Forward, p).action,
                    b.classify(Hook::Forward, p).action,
                    "{text}"
                );
            }
        }
    }
}

fn error(format: Format, text: &str) -> ParseError {
    parse::parse("bad.rules", text, format, usize::MAX).expect_err("an error")
}

fn ipt(rule: &str) -> String {
    error(
        Format::IptablesSave,
        &format!("*filter\n:FORWARD DROP [0:0]\n:u - [0:0]\n{rule}\nCOMMIT\n"),
    )
    .to_string()
}

#[test]
fn iptables_errors_name_file_line_column_and_construct() {
    let cases = [
        (
            "-A FORWARD -p tcp -m recent --set -j DROP",
            "bad.rules:4:22: match `-m recent` is not supported",
        ),
        (
            "-A FORWARD -j LOG --log-prefix x",
            "bad.rules:4:15: target `LOG` is not supported",
        ),
        (
            "-A FORWARD -s 10.0.0.300 -j DROP",
            "bad.rules:4:15: bad address `10.0.0.300`",
        ),
        (
            "-A FORWARD --dport 22 -j DROP",
            "bad.rules:4:12: `--dport` needs `-p tcp` or `-p udp`",
        ),
        (
            "-A FORWARD -p tcp --dport 99999 -j DROP",
            "bad.rules:4:27: bad port `99999`",
        ),
        (
            "-A FORWARD -p tcp --dport 22:21 -j DROP",
            "bad.rules:4:27: bad port range (first above last) `22:21`",
        ),
        (
            "-A FORWARD -j nowhere",
            "bad.rules:4:15: chain `nowhere` is not declared",
        ),
        (
            "-A FORWARD -f -j DROP",
            "bad.rules:4:12: option `-f` is not supported",
        ),
        (
            "-A FORWARD -s 1.2.3.4 -s 1.2.3.5 -j DROP",
            "bad.rules:4:23: `-s` is given twice",
        ),
        (
            "-A FORWARD -p udp -j REJECT --reject-with tcp-reset",
            "bad.rules:4:43: `--reject-with tcp-reset` needs `-p tcp`",
        ),
        (
            "-A nope -j DROP",
            "bad.rules:4:4: chain `nope` is not declared",
        ),
        (
            "-A FORWARD -m conntrack --ctstate NEW,BOGUS -j DROP",
            "bad.rules:4:35: bad connection state `NEW,BOGUS`",
        ),
        (
            "-A FORWARD -m comment --comment \"open -j DROP",
            "bad.rules:4:33: a quote is not closed",
        ),
        (
            "-I FORWARD -j DROP",
            "bad.rules:4:1: expected `-A CHAIN` (iptables-save's rule form), found `-I`",
        ),
        (
            "-A FORWARD ! -j DROP",
            "bad.rules:4:14: `!` before `-j` is not supported",
        ),
        (
            "-A u -j u",
            "bad.rules:4:1: chain `u` is reached again from itself (a jump loop)",
        ),
    ];
    for (rule, want) in cases {
        assert_eq!(ipt(rule), want, "{rule}");
    }
    let nat = "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n";
    assert_eq!(
        error(Format::IptablesSave, nat).to_string(),
        "bad.rules:3:1: table `nat` has rules, and only the filter table is supported"
    );
    let open = "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -j DROP\n";
    assert_eq!(
        error(Format::IptablesSave, open).to_string(),
        "bad.rules:1:1: the table is not committed (no `COMMIT` after `*filter`)"
    );
}

fn nft(body: &str) -> String {
    let text = format!("table inet f {{\n\tchain fwd {{\n\t\ttype filter hook forward priority 0; policy drop;\n{body}\n\t}}\n}}\n");
    error(Format::Nft, &text).to_string()
}

#[test]
fn nft_errors_name_file_line_column_and_construct() {
    let cases = [
        (
            "\t\ttcp dport 22 log prefix \"x\" accept",
            "bad.rules:4:16: statement `log` is not supported",
        ),
        (
            "\t\tip6 saddr ::1 drop",
            "bad.rules:4:3: IPv6 expression `ip6` is not supported",
        ),
        (
            "\t\tip saddr @nope drop",
            "bad.rules:4:13: set `@nope` is not defined above",
        ),
        (
            "\t\ttcp dport 70000 drop",
            "bad.rules:4:13: bad port `70000`",
        ),
        (
            "\t\tudp dport 53 jump gone",
            "bad.rules:4:21: chain `gone` is not declared",
        ),
        (
            "\t\tth dport 53 accept",
            "bad.rules:4:3: expression `th` is not supported",
        ),
        (
            "\t\tip saddr 10.0.0.0/8 accept drop",
            "bad.rules:4:30: nothing may follow `accept` but a comment",
        ),
        (
            "\t\tudp dport 53 tcp dport 80 accept",
            "bad.rules:4:16: `tcp` conflicts with the protocol matched before",
        ),
        (
            "\t\tct mark 0x1 accept",
            "bad.rules:4:6: expression `ct` `mark` is not supported",
        ),
        (
            "\t\tip saddr 10.0.0.0/8 accept\n\t}\n\tchain fwd {\n\t}",
            "bad.rules:6:8: chain `fwd` is declared twice",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(nft(body), want, "{body}");
    }
    let six = "table ip6 f {\n\tchain c {\n\t\ttype filter hook forward priority 0;\n\t\tip6 saddr ::1 drop\n\t}\n}\n";
    assert_eq!(
        error(Format::Nft, six).to_string(),
        "bad.rules:3:8: family `ip6` (IPv4 `ip` and `inet` only) is not supported"
    );
    let two = "table ip a {\n\tchain x {\n\t\ttype filter hook forward priority 0;\n\t}\n}\ntable ip b {\n\tchain y {\n\t\ttype filter hook forward priority 10;\n\t}\n}\n";
    assert_eq!(
        error(Format::Nft, two).to_string(),
        "bad.rules:7:1: chains `x` and `y` are both entered by the FORWARD hook"
    );
    assert_eq!(
        error(Format::Nft, "table ip a {\n").to_string(),
        "bad.rules:1:13: expected `}` closing the table, found the end of the file"
    );
}

#[test]
fn bytes_that_are_not_text_and_files_past_the_memory_limit() {
    let e = parse::text("bin.rules", b"*filter\n-A FORWARD \xff\n").unwrap_err();
    assert_eq!(e.to_string(), "bin.rules:2:12: the file is not UTF-8");
    let rs = gen::rules(&RuleSpec::new(10_000, 1));
    let text = print::iptables_save(&rs).unwrap();
    let e = parse::parse("big.rules", &text, Format::IptablesSave, 100_000).unwrap_err();
    assert!(matches!(e.what, What::TooLarge { limit: 100_000 }), "{e}");
    assert!(e.line > 500 && e.line < 2000, "stopped at line {}", e.line);
}
