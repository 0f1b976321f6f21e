//! Topology files that must not start a lab: every error names the file, the line of the
//! object's `[[...]]` header and the object.

use vtnt_lab::{Topology, TopologyError};

const BASE: &str = r#"
name = "t"

[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "r1"

[[router]]
name = "r1"
vendor = "cisco"

[[router]]
name = "r2"
vendor = "juniper"

[[router]]
name = "r3"
vendor = "linux"

[[link]]
a = "r1"
b = "r2"
prefix = "100.64.0.0/30"

[[link]]
a = "r2"
b = "r3"
prefix = "100.64.0.4/31"
"#;

fn err(extra: &str) -> TopologyError {
    let text = format!("{BASE}{extra}");
    match Topology::parse(&text, "t.toml") {
        Ok(_) => panic!("accepted:\n{extra}"),
        Err(e) => e,
    }
}

/// Line (1-based) of the last occurrence of `needle` in BASE + extra.
fn line_of(extra: &str, needle: &str) -> usize {
    let text = format!("{BASE}{extra}");
    let at = text.rfind(needle).unwrap();
    text[..at].matches('\n').count() + 1
}

#[test]
fn a_signature_ttl_of_zero_is_refused() {
    let extra = "\n[[router]]\nname = \"r4\"\nvendor = \"cisco\"\nsignature = [0, 64]\n";
    let s = err(extra).to_string();
    assert!(
        s.contains("[[router]] \"r4\": a signature's initial TTLs are 1..=255"),
        "{s}"
    );
}

#[test]
fn base_is_valid() {
    let t = Topology::parse(BASE, "t.toml").unwrap();
    assert_eq!(t.name(), "t");
}

#[test]
fn unknown_router_names_file_line_and_object() {
    let extra = "\n[[link]]\na = \"r3\"\nb = \"r9\"\nprefix = \"100.64.0.8/30\"\n";
    let e = err(extra);
    let s = e.to_string();
    assert_eq!(e.line(), line_of(extra, "[[link]]"), "{s}");
    assert!(
        s.starts_with(&format!("t.toml:{}: [[link]] r3-r9: ", e.line())),
        "{s}"
    );
    assert!(s.contains("router \"r9\" is not defined"), "{s}");
}

#[test]
fn duplicate_address_and_overlap() {
    let extra = "\n[[link]]\na = \"r1\"\nb = \"r3\"\nprefix = \"100.64.0.0/30\"\n";
    let s = err(extra).to_string();
    assert!(s.contains("overlaps 100.64.0.0/30"), "{s}");
    let extra = "\n[[link]]\na = \"r1\"\nb = \"r3\"\nprefix = \"100.64.0.8/30\"\na-address = \"100.64.0.9\"\nb-address = \"100.64.0.9\"\n";
    let s = err(extra).to_string();
    assert!(s.contains("both ends have address 100.64.0.9"), "{s}");
    let extra = "\n[[router]]\nname = \"r1\"\nvendor = \"cisco\"\n";
    let e = err(extra);
    assert!(
        e.to_string()
            .contains("[[router]] \"r1\": name already used"),
        "{e}"
    );
    assert_eq!(e.line(), line_of(extra, "[[router]]"));
}

#[test]
fn bad_prefixes() {
    for (prefix, what) in [
        ("100.64.0.9/30", "host bits set"),
        ("100.64.0.8/29", "/30 or /31"),
        ("10.0.0.0/30", "outside the lab ranges"),
        ("100.64.0.8", "not an IPv4 prefix"),
    ] {
        let extra = format!("\n[[link]]\na = \"r1\"\nb = \"r3\"\nprefix = \"{prefix}\"\n");
        let s = err(&extra).to_string();
        assert!(s.contains(what), "{prefix}: {s}");
        assert!(s.contains("[[link]] r1-r3"), "{s}");
    }
    let extra = "\n[[host]]\nname = \"h\"\naddress = \"203.0.113.3/30\"\ngateway = \"203.0.113.1\"\nrouter = \"r3\"\n";
    assert!(err(extra)
        .to_string()
        .contains("address 203.0.113.3 is not a usable address"));
}

#[test]
fn lsp_over_a_missing_link_or_to_an_unreachable_egress() {
    let extra =
        "\n[[lsp]]\nname = \"x\"\ningress = \"r1\"\negress = \"r3\"\npath = [\"r1\", \"r3\"]\n";
    let e = err(extra);
    assert!(
        e.to_string()
            .contains("[[lsp]] \"x\": no link from \"r1\" to \"r3\""),
        "{e}"
    );
    assert_eq!(e.line(), line_of(extra, "[[lsp]]"));
    let extra = "\n[[router]]\nname = \"r4\"\nvendor = \"nokia\"\n\n[[lsp]]\nname = \"y\"\ningress = \"r1\"\negress = \"r4\"\n";
    assert!(
        err(extra).to_string().contains("unreachable from ingress"),
        "{}",
        err(extra)
    );
    let extra = "\n[[lsp]]\nname = \"z\"\ningress = \"r1\"\negress = \"r2\"\n";
    assert!(err(extra).to_string().contains("at least one LSR"));
    let extra = "\n[[lsp]]\nname = \"w\"\ningress = \"r1\"\negress = \"r3\"\nttl-propagate = false\npop = \"uhp\"\nrfc4950 = false\n";
    assert!(err(extra).to_string().contains("not a TNT class"));
}

/// Five routers in a row, an LSP `te` (`te` is the rest of its fields) and an LDP LSP
/// r1 -> r5 (`ldp` adds fields) that rides it: the file's text.
fn stacked(te: &str, ldp: &str) -> String {
    let router = |n: &str| format!("\n[[router]]\nname = \"{n}\"\nvendor = \"cisco\"\n");
    let link = |a: &str, b: &str, p: &str| {
        format!("\n[[link]]\na = \"{a}\"\nb = \"{b}\"\nprefix = \"{p}\"\n")
    };
    format!(
        "{}{}{}{}\n[[lsp]]\nname = \"te\"\n{te}\n\n[[lsp]]\nname = \"ldp\"\ningress = \"r1\"\negress = \"r5\"\n{ldp}\n",
        router("r4"),
        router("r5"),
        link("r3", "r4", "100.64.0.8/30"),
        link("r4", "r5", "100.64.0.12/30"),
    )
}

#[test]
fn an_lsp_rides_only_an_lsp_strictly_inside_it_that_shows_ttls_alike() {
    let inside = "ingress = \"r2\"\negress = \"r4\"";
    let ok = format!("{BASE}{}", stacked(inside, "over = \"te\""));
    Topology::parse(&ok, "t.toml").expect("a TE LSP strictly inside");
    for (te, ldp, want) in [
        (inside, "over = \"nope\"", "over: no LSP is named \"nope\""),
        (inside, "over = \"ldp\"", "over: an LSP cannot ride itself"),
        (
            "ingress = \"r1\"\negress = \"r3\"",
            "over = \"te\"",
            "must start and end at LSRs of this LSP",
        ),
        (
            "ingress = \"r2\"\negress = \"r5\"",
            "over = \"te\"",
            "must start and end at LSRs of this LSP",
        ),
        (
            inside,
            "over = \"te\"\nttl-propagate = false",
            "must have this LSP's ttl-propagate and rfc4950",
        ),
        (
            inside,
            "over = \"te\"\nrfc4950 = false",
            "must have this LSP's ttl-propagate and rfc4950",
        ),
    ] {
        let extra = stacked(te, ldp);
        let e = err(&extra);
        let s = e.to_string();
        assert!(
            s.contains("[[lsp]] \"ldp\": over") && s.contains(want),
            "{te} / {ldp}: {s}"
        );
        assert_eq!(e.line(), line_of(&extra, "[[lsp]]"), "{e}");
    }
}

#[test]
fn an_ecmp_lsp_with_a_path_is_refused() {
    let extra = "\n[[lsp]]\nname = \"e\"\ningress = \"r1\"\negress = \"r3\"\necmp = true\npath = [\"r1\", \"r2\", \"r3\"]\n";
    let e = err(extra);
    assert!(
        e.to_string()
            .contains("[[lsp]] \"e\": ecmp follows the IGP's equal-cost paths"),
        "{e}"
    );
    assert_eq!(e.line(), line_of(extra, "[[lsp]]"));
    // without a path it is fine, one path or several
    let extra = "\n[[lsp]]\nname = \"e\"\ningress = \"r1\"\negress = \"r3\"\necmp = true\n";
    Topology::parse(&format!("{BASE}{extra}"), "t.toml").unwrap();
    // nor does it ride another LSP (riding is modelled along one path)
    let over = format!(
        "{extra}\n[[lsp]]\nname = \"ldp\"\ningress = \"r1\"\negress = \"r3\"\nover = \"e\"\n"
    );
    let e = err(&over);
    assert!(
        e.to_string()
            .contains("[[lsp]] \"ldp\": over: \"e\" or this LSP is ecmp"),
        "{e}"
    );
}

#[test]
fn syntax_unknown_field_and_unknown_vendor_have_lines() {
    let extra = "\n[[router]]\nname = \"r4\"\nvendor = \"cisco\"\ncolour = \"red\"\n";
    let e = err(extra);
    assert!(matches!(e, TopologyError::Syntax { .. }), "{e}");
    assert!(e.to_string().contains("colour"), "{e}");
    assert_eq!(e.line(), line_of(extra, "colour"), "{e}");
    let extra = "\n[[router]]\nname = \"r4\"\nvendor = \"ciscoo\"\n";
    let e = err(extra);
    assert!(e.to_string().starts_with("t.toml:"), "{e}");
    assert_eq!(e.line(), line_of(extra, "ciscoo"), "{e}");
    let e = Topology::parse("name = [", "broken.toml").unwrap_err();
    assert!(e.to_string().starts_with("broken.toml:1:"), "{e}");
}

#[test]
fn no_vantage_point() {
    let e = Topology::parse("name = \"x\"\n", "t.toml").unwrap_err();
    assert!(e.to_string().contains("no [[vantage-point]]"), "{e}");
}

#[test]
fn missing_file() {
    let e = Topology::load("/nonexistent/lab.toml".as_ref()).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/lab.toml: "), "{e}");
}

#[test]
fn static_routes_to_unknown_or_connected_prefixes_over_missing_links_or_twice() {
    let route = |router: &str, prefix: &str, via: &str| {
        format!("\n[[route]]\nrouter = \"{router}\"\nprefix = \"{prefix}\"\nvia = \"{via}\"\n")
    };
    for (extra, what) in [
        (
            route("r1", "100.64.0.8/30", "r2"),
            "100.64.0.8/30 is not a prefix of the topology",
        ),
        (
            route("r2", "100.64.0.4/31", "r1"),
            "100.64.0.4/31 is connected to \"r2\"",
        ),
        (
            route("r1", "100.64.0.4/31", "r3"),
            "no link from \"r1\" to \"r3\"",
        ),
        (
            route("r1", "100.64.0.4/31", "r9"),
            "router \"r9\" is not defined",
        ),
        (
            format!(
                "{}{}",
                route("r1", "100.64.0.4/31", "r2"),
                route("r1", "100.64.0.4/31", "r2")
            ),
            "a second route for 100.64.0.4/31 on \"r1\"",
        ),
    ] {
        let e = err(&extra);
        let s = e.to_string();
        assert!(
            s.contains("[[route]] r1 ") || s.contains("[[route]] r2 "),
            "{s}"
        );
        assert!(s.contains(what), "{s}");
        assert_eq!(e.line(), line_of(&extra, "[[route]]"), "{s}");
    }
    let ok = format!("{BASE}{}", route("r1", "100.64.0.4/31", "r2"));
    assert!(Topology::parse(&ok, "t.toml").is_ok());
}

#[test]
fn names_that_do_not_print_as_themselves_are_refused_with_their_line() {
    for (what, header, name) in [
        ("a newline", "[[router]]", "r4\\nfake line"),
        ("a terminal escape", "[[router]]", "r4\\u001b[31m"),
        ("a bidirectional control", "[[host]]", "h\\u202Egnp.exe"),
    ] {
        let extra = if header == "[[router]]" {
            format!("\n{header}\nname = \"{name}\"\nvendor = \"cisco\"\n")
        } else {
            format!(
                "\n{header}\nname = \"{name}\"\naddress = \"203.0.113.10/24\"\n\
                 gateway = \"203.0.113.1\"\nrouter = \"r3\"\n"
            )
        };
        let e = err(&extra);
        let s = e.to_string();
        assert_eq!(e.line(), line_of(&extra, header), "{what}: {s}");
        assert!(s.contains("a control character"), "{what}: {s}");
        assert!(
            !s.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{what}: the error itself prints the name escaped: {s:?}"
        );
    }
    let e = Topology::parse(&BASE.replace("name = \"t\"", "name = \"t\\r\""), "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("a control character"), "{e}");
}
