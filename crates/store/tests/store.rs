//! The store against a real campaign's records (`tests/data/reference.json`: TNT over the
//! reference topology, in process): imports are idempotent across formats, corrupt files
//! store nothing and name the position, tenants see only their own rows, the questions
//! agree with the file itself, the diff finds a changed path.

use std::path::Path;

use serde_json::Value;
use vtnt_store::import::{import_file, ImportOptions};
use vtnt_store::query::Filter;
use vtnt_store::{Store, StoreError, Tenant};

mod common;

use common::{Scratch, FIXTURE};

fn tenant(t: &str) -> Tenant {
    Tenant::new(t).unwrap()
}

fn import(
    store: &mut Store,
    path: &Path,
    t: &str,
    run: Option<&str>,
) -> vtnt_store::Result<vtnt_store::import::FileReport> {
    import_file(
        store,
        path,
        &ImportOptions {
            tenant: tenant(t),
            node: None,
            run: run.map(String::from),
        },
    )
}

/// The fixture's objects.
fn fixture() -> Vec<Value> {
    std::fs::read_to_string(FIXTURE)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn counts(store: &Store, t: &str) -> Vec<u64> {
    store.counts(&tenant(t)).unwrap().into_values().collect()
}

#[test]
fn a_record_is_stored_once_whatever_its_format() {
    let s = Scratch::new("once");
    let mut store = Store::open(&s.path("r.sqlite")).unwrap();
    let objs = fixture();
    let traces = objs.iter().filter(|o| o["type"] == "trace").count() as u64;
    let pings = objs.iter().filter(|o| o["type"] == "ping").count() as u64;
    let r = import(&mut store, Path::new(FIXTURE), "lab", None).unwrap();
    assert_eq!(
        (r.stored.traces, r.stored.pings, r.stored.known),
        (traces, pings, 0)
    );
    assert_eq!(r.format, "json");
    let again = import(&mut store, Path::new(FIXTURE), "lab", None).unwrap();
    assert_eq!((again.stored.traces, again.stored.pings), (0, 0));
    assert_eq!(again.stored.known, traces + pings);

    // the same records as warts, and gzip-compressed, under another run's name
    let warts = s.path("ref.warts");
    let input = std::io::BufReader::new(std::fs::File::open(FIXTURE).unwrap());
    let out = std::fs::File::create(&warts).unwrap();
    let c = vtnt_formats::json_to_warts(input, out).unwrap();
    assert!(c.skipped.is_empty() && c.stopped.is_none());
    let w = import(&mut store, &warts, "lab", Some("again")).unwrap();
    assert_eq!(w.format, "warts");
    assert_eq!(
        (w.stored.traces, w.stored.pings, w.stored.known),
        (0, 0, traces + pings)
    );
    let gz = s.path("ref.json.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    std::io::copy(&mut std::fs::File::open(FIXTURE).unwrap(), &mut enc).unwrap();
    enc.finish().unwrap();
    let g = import(&mut store, &gz, "lab", None).unwrap();
    assert_eq!(
        (g.format.as_str(), g.stored.known),
        ("json.gz", traces + pings)
    );

    let runs = store.runs(&tenant("lab")).unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    let first = runs
        .iter()
        .find(|r| r.key == r.key.clone() && r.traces > 0)
        .unwrap();
    assert_eq!((first.traces, first.pings), (traces, pings));
    let nodes = store.nodes(&tenant("lab")).unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(
        nodes[0].node.name, "lab-vp",
        "the cycle's hostname names the node"
    );
}

#[test]
fn a_corrupt_file_stores_nothing_and_says_where() {
    let s = Scratch::new("corrupt");
    let mut store = Store::open(&s.path("r.sqlite")).unwrap();
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let cut = &lines[30][..lines[30].len() / 2];
    lines[30] = cut;
    let bad = s.path("bad.json");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let e = import(&mut store, &bad, "lab", None).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, StoreError::Corrupt { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!("{}, line 31: ", bad.display())) && msg.contains("nothing"),
        "{msg}"
    );
    assert_eq!(
        counts(&store, "lab"),
        [0, 0, 0, 0, 0],
        "nothing half-imported"
    );

    // a bad annotation is corrupt too: its line is named
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[40] = lines[40].replacen("\"role\":\"", "\"role\":\"x", 1);
    let bad_role = s.path("bad-role.json");
    std::fs::write(&bad_role, lines.join("\n")).unwrap();
    let msg = import(&mut store, &bad_role, "lab", None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("line 41: tnt role"), "{msg}");
    assert_eq!(counts(&store, "lab"), [0, 0, 0, 0, 0]);

    // warts cut short inside a record, and with a byte flipped in a record header
    let warts = s.path("ref.warts");
    vtnt_formats::json_to_warts(
        std::io::BufReader::new(std::fs::File::open(FIXTURE).unwrap()),
        std::fs::File::create(&warts).unwrap(),
    )
    .unwrap();
    let bytes = std::fs::read(&warts).unwrap();
    let short = s.path("short.warts");
    std::fs::write(&short, &bytes[..bytes.len() - 100]).unwrap();
    let msg = import(&mut store, &short, "lab", None)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("short.warts, byte ") && msg.contains("truncated"),
        "{msg}"
    );
    let mut flipped = bytes.clone();
    let hdr = find_record(&flipped, 20);
    flipped[hdr] ^= 0xff;
    let bad_magic = s.path("magic.warts");
    std::fs::write(&bad_magic, &flipped).unwrap();
    let msg = import(&mut store, &bad_magic, "lab", None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains(&format!("byte {hdr}: bad magic")), "{msg}");
    // not a scamper file at all, and a gzip stream cut short
    let junk = s.path("junk.bin");
    std::fs::write(&junk, b"\x00\x01garbage").unwrap();
    let msg = import(&mut store, &junk, "lab", None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("byte 0: neither warts"), "{msg}");
    let gz = s.path("cut.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
    let z = enc.finish().unwrap();
    std::fs::write(&gz, &z[..z.len() / 2]).unwrap();
    let msg = import(&mut store, &gz, "lab", None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("cut.json.gz, line "), "{msg}");
    assert_eq!(counts(&store, "lab"), [0, 0, 0, 0, 0]);
    // the good file still goes in afterwards
    assert!(
        import(&mut store, Path::new(FIXTURE), "lab", None)
            .unwrap()
            .stored
            .traces
            > 0
    );
}

/// The offset of the `n`th warts record header.
fn find_record(bytes: &[u8], n: usize) -> usize {
    let mut at = 0;
    for _ in 0..n {
        let len = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 8 + len;
    }
    at
}

#[test]
fn a_tenant_sees_only_its_own_rows() {
    let s = Scratch::new("tenants");
    let mut store = Store::open(&s.path("r.sqlite")).unwrap();
    import(&mut store, Path::new(FIXTURE), "alice", Some("a1")).unwrap();
    let (a, b) = (tenant("alice"), tenant("bob"));
    let all = Filter::default();
    assert!(!store.tunnels(&a, &all).unwrap().is_empty());
    assert!(store.runs(&b).unwrap().is_empty());
    assert!(store.nodes(&b).unwrap().is_empty());
    assert!(store.traces(&b, &all).unwrap().is_empty());
    assert!(store.tunnels(&b, &all).unwrap().is_empty());
    assert!(store.tunnels_per_as(&b, &all).unwrap().is_empty());
    assert!(store.tunnels_per_vendor(&b, &all).unwrap().is_empty());
    assert!(store
        .classes_per_vantage_point(&b, &all)
        .unwrap()
        .is_empty());
    assert!(store.revealed_lsrs_per_as(&b, &all).unwrap().is_empty());
    assert_eq!(counts(&store, "bob"), [0, 0, 0, 0, 0]);
    // naming alice's run does not reach it
    let by_run = Filter {
        run: Some("a1".into()),
        ..Filter::default()
    };
    assert!(store.traces(&b, &by_run).unwrap().is_empty());
    let e = store.diff(&b, "a1", "a1").unwrap_err().to_string();
    assert!(e.contains("no run `a1`"), "{e}");
    for table in vtnt_store::export::tables() {
        let mut out = Vec::new();
        let n = store
            .export(&b, table, vtnt_store::export::ExportFormat::Csv, &mut out)
            .unwrap();
        assert_eq!(n, 0, "bob's {table}");
        let mut out = Vec::new();
        let n = store
            .export(&a, table, vtnt_store::export::ExportFormat::Csv, &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap().lines().count() as u64,
            n + 1,
            "alice's {table}: a header and a line per row"
        );
    }
    // the same file under bob is bob's own copy
    let r = import(&mut store, Path::new(FIXTURE), "bob", Some("a1")).unwrap();
    assert_eq!(r.stored.known, 0);
    assert_eq!(counts(&store, "bob"), counts(&store, "alice"));
    assert!(Tenant::new("a.b").is_err() && Tenant::new("").is_err());
}

#[test]
fn answers_agree_with_the_file_itself() {
    let s = Scratch::new("answers");
    let mut store = Store::open(&s.path("r.sqlite")).unwrap();
    import(&mut store, Path::new(FIXTURE), "lab", None).unwrap();
    let t = tenant("lab");
    // the file's tunnels, counted here from its JSON
    let mut want: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for o in fixture().iter().filter(|o| o["tnt"]["role"] == "initial") {
        for tun in o["tnt"]["tunnels"].as_array().unwrap() {
            want.entry(tun["class"].as_str().unwrap().into())
                .or_default()
                .insert(format!(
                    "{}{}{}",
                    tun["ingress"], tun["egress"], tun["lsrs"]
                ));
        }
    }
    let per_vp = store
        .classes_per_vantage_point(&t, &Filter::default())
        .unwrap();
    assert_eq!(per_vp.len(), 1);
    for (class, n) in &per_vp[0].classes {
        assert_eq!(*n, want.get(class).map_or(0, |s| s.len()) as u64, "{class}");
    }
    let php = Filter {
        class: Some("invisible-php".into()),
        ..Filter::default()
    };
    let rows = store.tunnels(&t, &php).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter().all(|r| r.class == "invisible-php"
            && r.lsrs.len() == 3
            && r.lsrs.iter().all(|l| l.revealed)),
        "{rows:?}"
    );
    // by target and prefix
    let one = Filter {
        target: Some("203.0.113.10".parse().unwrap()),
        ..Filter::default()
    };
    let traces = store.traces(&t, &one).unwrap();
    assert_eq!(traces.len(), 1);
    assert_eq!(
        traces[0].path.last().map(String::as_str),
        Some("203.0.113.10")
    );
    let lab = Filter {
        prefix: Some("203.0.113.0/24".parse().unwrap()),
        ..Filter::default()
    };
    assert_eq!(store.traces(&t, &lab).unwrap().len(), 7);
    let none = Filter {
        since_us: Some(i64::MAX),
        ..Filter::default()
    };
    assert!(store.traces(&t, &none).unwrap().is_empty());

    // ASes: the revealed LSRs' /24s each an AS of their own, the rest one
    let pfx = s.path("pfx2as");
    std::fs::write(
        &pfx,
        "100.64.0.0\t16\t64500\n100.64.5.0\t24\t64505\n100.64.6.0\t24\t64506_64507\n",
    )
    .unwrap();
    let loaded = store.load_pfx2as(&pfx).unwrap();
    assert_eq!(loaded.prefixes, 3);
    let mut addrs = std::collections::BTreeSet::new();
    for o in fixture().iter().filter(|o| o["type"] == "trace") {
        for h in o["hops"].as_array().unwrap() {
            addrs.insert(h["addr"].as_str().unwrap().to_string());
        }
        for e in o["tnt"]["path"].as_array().into_iter().flatten() {
            addrs.extend(e["addr"].as_str().map(String::from));
        }
    }
    let lab = addrs.iter().filter(|a| a.starts_with("100.64.")).count() as u64;
    assert_eq!(
        (loaded.addresses, loaded.annotated),
        (addrs.len() as u64, lab)
    );
    let lsrs = store.revealed_lsrs_per_as(&t, &Filter::default()).unwrap();
    let of = |asn: &str| {
        lsrs.iter()
            .find(|l| l.asn.as_deref() == Some(asn))
            .map(|l| (l.lsrs, l.tunnels))
    };
    assert_eq!(of("64505"), Some((3, 1)));
    assert_eq!(of("64506_64507"), Some((3, 1)));
    let per_as = store.tunnels_per_as(&t, &Filter::default()).unwrap();
    assert_eq!(
        per_as.len(),
        1,
        "every ingress is in 100.64.0.0/24: {per_as:?}"
    );
    assert_eq!(per_as[0].group.as_deref(), Some("64500"));
    assert_eq!(per_as[0].tunnels, 6);
    let vendors = store.tunnels_per_vendor(&t, &Filter::default()).unwrap();
    assert_eq!(vendors.iter().map(|v| v.tunnels).sum::<u64>(), 6);
}

#[test]
fn a_changed_path_shows_its_segment_and_tunnels() {
    let s = Scratch::new("diff");
    let mut store = Store::open(&s.path("r.sqlite")).unwrap();
    import(&mut store, Path::new(FIXTURE), "lab", Some("monday")).unwrap();
    // Tuesday: the trace to .10 now crosses another router at TTL 3, and TNT saw no
    // tunnel there
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let tuesday: Vec<String> = text
        .lines()
        .map(|l| {
            let mut o: Value = serde_json::from_str(l).unwrap();
            if o["dst"] == "203.0.113.10" && o["tnt"]["role"] == "initial" {
                o["hops"][2]["addr"] = "100.64.9.9".into();
                o["tnt"]["tunnels"] = Value::Array(Vec::new());
                o["start"]["usec"] = 1.into();
            }
            o.to_string()
        })
        .collect();
    let file = s.path("tuesday.json");
    std::fs::write(&file, tuesday.join("\n")).unwrap();
    import(&mut store, &file, "lab", Some("tuesday")).unwrap();
    let d = store.diff(&tenant("lab"), "monday", "tuesday").unwrap();
    assert_eq!((d.compared, d.unchanged), (7, 6));
    assert!(d.only_in_a.is_empty() && d.only_in_b.is_empty());
    let c = &d.changed[0];
    assert_eq!(c.key.target, "203.0.113.10");
    let seg = c.segment.as_ref().unwrap();
    assert_eq!(
        (seg.ttl, seg.a.len(), seg.b.as_slice()),
        (3, 1, &["100.64.9.9".to_string()][..])
    );
    assert_eq!(c.tunnels_gone.len(), 1);
    assert_eq!(c.tunnels_gone[0].class, "explicit");
    assert!(c.tunnels_new.is_empty());
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["changed"][0]["target"], "203.0.113.10");
}

#[test]
fn a_newer_schema_is_refused_and_migrations_are_recorded() {
    let s = Scratch::new("schema");
    let db = s.path("r.sqlite");
    drop(Store::open(&db).unwrap());
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("INSERT INTO schema_version VALUES (99, 0, 'future')", [])
        .unwrap();
    let e = Store::open(&db).err().expect("refused").to_string();
    assert!(
        e.contains("schema version 99, newer than this vtnt's 4"),
        "{e}"
    );
    let e = Store::open_existing(&s.path("none.sqlite"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no store there"), "{e}");
}

#[cfg(feature = "parquet")]
#[test]
fn a_table_as_parquet_reads_back() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let s = Scratch::new("parquet");
    let mut store = Store::open(&s.path("r.sqlite")).unwrap();
    import(&mut store, Path::new(FIXTURE), "lab", None).unwrap();
    for table in ["hops", "tunnels", "traces"] {
        let out = s.path(&format!("{table}.parquet"));
        let n = store
            .export(
                &tenant("lab"),
                table,
                vtnt_store::export::ExportFormat::Parquet,
                std::fs::File::create(&out).unwrap(),
            )
            .unwrap();
        let r = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
        let meta = r.metadata().file_metadata();
        assert_eq!(meta.num_rows() as u64, n, "{table}");
        assert!(n > 0);
        let cols: Vec<String> = meta
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        assert!(
            cols.contains(&"id".to_string()) || table == "hops",
            "{cols:?}"
        );
    }
}

#[test]
fn a_recorder_files_what_it_is_given_off_the_callers_thread() {
    let s = Scratch::new("recorder");
    let db = s.path("r.sqlite");
    let p = vtnt_store::Provenance {
        tenant: tenant("local"),
        run: vtnt_store::RunInfo {
            key: "cli-test".into(),
            name: "tnt on test".into(),
            source: vtnt_store::Source::Cli,
            command: Some("vtnt tnt".into()),
        },
        node: vtnt_store::NodeInfo {
            name: "host".into(),
            ..Default::default()
        },
        job: vtnt_store::JobInfo {
            key: "cli-test".into(),
            kind: Some("tnt".into()),
            ..Default::default()
        },
    };
    let rec = vtnt_store::Recorder::start(Store::open(&db).unwrap(), p).unwrap();
    let items: Vec<vtnt_formats::Item> = vtnt_formats::JsonReader::new(std::io::BufReader::new(
        std::fs::File::open(FIXTURE).unwrap(),
    ))
    .map(Result::unwrap)
    .collect();
    let mut n = 0;
    for item in &items {
        match item {
            vtnt_formats::Item::Annotated(r, f) => rec.record(r, Some(f.clone())),
            vtnt_formats::Item::Record(r) => rec.record(r, None),
            _ => continue,
        };
        n += 1;
    }
    let report = rec.finish().unwrap();
    assert_eq!(report.traces + report.pings, n);
    let store = Store::open_existing(&db).unwrap();
    let runs = store.runs(&tenant("local")).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].traces + runs[0].pings, n);
    // the records, in order: the job's indexes follow the calls
    let traces = store.traces(&tenant("local"), &Filter::default()).unwrap();
    assert_eq!(traces.first().map(|t| t.dst.as_str()), Some("203.0.113.2"));
}
