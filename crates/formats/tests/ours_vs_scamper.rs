//! Our writers against Debian's scamper 20211212 tools: our warts, printed by
//! `sc_warts2json`, must equal our JSON writer's output line for line (string equality;
//! a mismatch is reported field by field), and `sc_wartsdump` / `sc_analysis_dump` must
//! read every record without complaint. Also: both of our readers give back exactly the
//! records written (the samples use only values both formats can carry).

mod common;

use common::*;
use vtnt_formats::*;

fn write_both(records: &[Record]) -> (Vec<u8>, String) {
    let start = cycle(1_795_312_150, 0);
    let stop = cycle(1_795_312_150, 1_795_312_160);
    let mut w = WartsWriter::new(Vec::new());
    let mut j = JsonWriter::new(Vec::new());
    w.cycle_start(&start).unwrap();
    j.cycle_start(&start).unwrap();
    for r in records {
        w.write(r).unwrap();
        j.write(r).unwrap();
    }
    w.cycle_stop(&stop).unwrap();
    j.cycle_stop(&stop).unwrap();
    (w.into_inner(), String::from_utf8(j.into_inner()).unwrap())
}

#[test]
fn our_warts_through_sc_warts2json_equals_our_json() {
    vtnt_testkit::require_tools!("sc_warts2json", "sc_wartsdump", "sc_analysis_dump");
    let dir = scratch("ours");
    let (warts, json) = write_both(&sample_records());
    let path = dir.join("samples.warts");
    std::fs::write(&path, &warts).unwrap();
    let theirs = sc_tool("sc_warts2json", &path);
    assert_same_lines(&json, &theirs, "sc_warts2json of our warts vs our JSON");
    let dump = sc_tool("sc_wartsdump", &path);
    assert_eq!(
        dump.matches("traceroute from").count(),
        13,
        "sc_wartsdump saw every trace:\n{dump}"
    );
    assert_eq!(
        dump.matches("ping from").count(),
        9,
        "sc_wartsdump saw every ping"
    );
    assert!(
        dump.contains("mpls ext"),
        "sc_wartsdump shows the MPLS extension:\n{dump}"
    );
    let analysis = sc_tool("sc_analysis_dump", &path);
    assert_eq!(
        analysis.lines().filter(|l| l.starts_with("T\t")).count(),
        13,
        "{analysis}"
    );
}

#[test]
fn every_record_alone_is_accepted_by_scamper() {
    // One file per record: a record scamper rejects cannot hide behind another.
    vtnt_testkit::require_tools!("sc_warts2json");
    let dir = scratch("alone");
    for (i, r) in sample_records().iter().enumerate() {
        let (warts, json) = write_both(std::slice::from_ref(r));
        let path = dir.join(format!("r{i}.warts"));
        std::fs::write(&path, &warts).unwrap();
        assert_same_lines(
            &json,
            &sc_tool("sc_warts2json", &path),
            &format!("record {i}"),
        );
    }
}

#[test]
fn records_without_a_cycle_are_readable() {
    vtnt_testkit::require_tools!("sc_warts2json", "sc_analysis_dump");
    let dir = scratch("nocycle");
    let mut w = WartsWriter::new(Vec::new());
    let mut j = JsonWriter::new(Vec::new());
    for r in sample_records().iter().take(3) {
        w.write(r).unwrap();
        j.write(r).unwrap();
    }
    let path = dir.join("nocycle.warts");
    std::fs::write(&path, w.into_inner()).unwrap();
    let ours = String::from_utf8(j.into_inner()).unwrap();
    assert_same_lines(&ours, &sc_tool("sc_warts2json", &path), "no cycle");
    sc_tool("sc_analysis_dump", &path);
}

#[test]
fn warts_round_trip_is_exact() {
    let records = sample_records();
    let (warts, _) = write_both(&records);
    let items: Vec<Item> = read_warts(&warts).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(items.len(), records.len() + 2);
    assert_eq!(items[0], Item::CycleStart(cycle(1_795_312_150, 0)));
    for (got, want) in items[1..].iter().zip(&records) {
        assert_eq!(got, &Item::Record(want.clone()));
    }
    assert_eq!(
        items.last(),
        Some(&Item::CycleStop(cycle(1_795_312_150, 1_795_312_160)))
    );
}

/// What scamper keeps in warts only (trace `-Q` and `-T`, ping `-z`, `-o` and an ICMP
/// ping's `-d`) goes
/// through our warts and back, scamper reads it, and its JSON is ours.
#[test]
fn warts_only_fields_round_trip() {
    let records = warts_only_samples();
    let (warts, json) = write_both(&records);
    let items: Vec<Item> = read_warts(&warts).into_iter().map(|r| r.unwrap()).collect();
    for (got, want) in items[1..].iter().zip(&records) {
        assert_eq!(got, &Item::Record(want.clone()));
    }
    assert_eq!(items.len(), records.len() + 2);
    vtnt_testkit::require_tools!("sc_warts2json", "sc_wartsdump");
    let path = scratch("wartsonly").join("w.warts");
    std::fs::write(&path, &warts).unwrap();
    assert_same_lines(&json, &sc_tool("sc_warts2json", &path), "warts-only fields");
    sc_tool("sc_wartsdump", &path);
}

#[test]
fn json_round_trip_is_exact() {
    let records = sample_records();
    let (_, json) = write_both(&records);
    let items: Vec<Item> = JsonReader::new(json.as_bytes())
        .map(|r| r.unwrap())
        .collect();
    for (got, want) in items[1..].iter().zip(&records) {
        assert_eq!(got, &Item::Record(want.clone()));
    }
    assert_eq!(items.len(), records.len() + 2);
}

#[test]
fn conversions_agree() {
    let records = sample_records();
    let (warts, json) = write_both(&records);
    let mut out = Vec::new();
    let rep = warts_to_json(&warts[..], &mut out).unwrap();
    assert!(rep.skipped.is_empty());
    assert_eq!(String::from_utf8(out).unwrap(), json);
    let mut back = Vec::new();
    json_to_warts(json.as_bytes(), &mut back).unwrap();
    assert_eq!(
        back, warts,
        "JSON -> warts reproduces our warts byte for byte"
    );

    let dir = scratch("convert");
    let (wp, jp) = (dir.join("a.warts"), dir.join("b.json"));
    std::fs::write(&wp, &warts).unwrap();
    convert_paths(&wp, &jp).unwrap();
    assert_eq!(std::fs::read_to_string(&jp).unwrap(), json);
    let wp2 = dir.join("c.warts");
    convert_paths(&jp, &wp2).unwrap();
    assert_eq!(std::fs::read(&wp2).unwrap(), warts);
}

struct Tnt;
impl Annotate for Tnt {
    fn record_extra(&self, r: &Record) -> Option<Extra> {
        matches!(r, Record::Trace(_)).then(|| vec![("tnt", r#"{"tunnels":1}"#.to_string())])
    }
    fn hop_extra(&self, _t: &Trace, i: usize, h: &Hop) -> Option<Extra> {
        (!h.mpls.is_empty()).then(|| vec![("tnt_class", format!("\"explicit-{i}\""))])
    }
}

/// Extra fields follow scamper's; readers keep `"tnt"` fields and ignore the others.
#[test]
fn annotations_are_appended_and_readers_keep_only_tnt() {
    let records = sample_records();
    let mut j = JsonWriter::new(Vec::new());
    j.write_annotated(&records[0], &Tnt).unwrap();
    let line = String::from_utf8(j.into_inner()).unwrap();
    assert!(line.contains(", \"tnt_class\":\"explicit-1\"}"), "{line}");
    assert!(
        line.trim_end().ends_with("], \"tnt\":{\"tunnels\":1}}"),
        "{line}"
    );
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["hops"][1]["tnt_class"], "explicit-1");
    let back = parse_json_line(&line, 1).unwrap();
    let Record::Trace(t) = &records[0] else {
        unreachable!()
    };
    let tnt = TntFields {
        record: Some(r#"{"tunnels":1}"#.into()),
        hops: vec![None; t.hops.len()],
    };
    assert_eq!(back, Item::Annotated(records[0].clone(), tnt));
}

#[test]
fn json_errors_name_line_and_field_and_do_not_stop_the_rest() {
    let records = sample_records();
    let (_, json) = write_both(&records[..2]);
    let mut lines: Vec<String> = json.lines().map(str::to_string).collect();
    lines.insert(1, "{\"type\":\"trace\", \"method\":\"udp\"}".into());
    lines.insert(2, "not json".into());
    lines[3] = lines[3].replace("\"rtt\":1.213", "\"rtt\":\"x\"");
    let text = lines.join("\n");
    let results: Vec<_> = JsonReader::new(text.as_bytes()).collect();
    assert_eq!(results.len(), 6);
    let e = results[1].as_ref().unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.to_string().contains("unsupported trace method"), "{e}");
    let e = results[2].as_ref().unwrap_err();
    assert_eq!(e.line, 3);
    let e = results[3].as_ref().unwrap_err();
    assert!(
        e.to_string().contains("line 4") && e.to_string().contains("hops[0].rtt"),
        "{e}"
    );
    assert!(results[4].is_ok() && results[5].is_ok());
}

#[test]
fn icmp_paris_echo_id_is_kept_in_warts_as_scamper_keeps_it() {
    // scamper keeps the echo ident of ICMP traces in the trace's sport; sc_wartsdump
    // prints it as "echo id", sc_warts2json does not print it at all.
    vtnt_testkit::require_tools!("sc_wartsdump", "sc_warts2json");
    let Record::Trace(mut t) = sample_records()[0].clone() else {
        panic!("the first sample is a trace")
    };
    assert_eq!(t.method, vtnt_record::Method::IcmpParis);
    t.sport = 43_908;
    let r = Record::Trace(t);
    let (warts, json) = write_both(std::slice::from_ref(&r));
    let path = scratch("echo-id").join("icmp.warts");
    std::fs::write(&path, &warts).unwrap();
    let dump = sc_tool("sc_wartsdump", &path);
    assert!(dump.contains("echo id: 43908,"), "{dump}");
    assert_eq!(
        read_warts(&warts)[1].as_ref().unwrap(),
        &Item::Record(r.clone())
    );
    assert_same_lines(&json, &sc_tool("sc_warts2json", &path), "echo id trace");
    assert!(!json.contains("\"sport\""), "{json}");
    // JSON cannot carry it: reading the JSON gives the trace without it.
    let Item::Record(Record::Trace(back)) =
        parse_json_line(json.lines().nth(1).unwrap(), 2).unwrap()
    else {
        panic!("a trace")
    };
    assert_eq!(back.sport, 0);
}

/// The vTNT build a cycle names (`Cycle::vtnt`) rides in the description of the cycle's
/// list: scamper's tools read the file as before (`sc_warts2json` prints our JSON line
/// for line, but for the cycle start's `"vtnt"` key, which only our JSON has), and both
/// of our readers give the build back.
#[test]
fn the_writing_build_rides_in_the_cycle_list() {
    let build = "0.1.0 (commit 1a2b3c4d-dirty)";
    let start = Cycle {
        vtnt: Some(build.into()),
        ..cycle(1_795_312_150, 0)
    };
    let stop = Cycle {
        stop_time: 1_795_312_160,
        ..start.clone()
    };
    let records = sample_records();
    let mut w = WartsWriter::new(Vec::new());
    let mut j = JsonWriter::new(Vec::new());
    w.cycle_start(&start).unwrap();
    j.cycle_start(&start).unwrap();
    for r in &records {
        w.write(r).unwrap();
        j.write(r).unwrap();
    }
    w.cycle_stop(&stop).unwrap();
    j.cycle_stop(&stop).unwrap();
    let (warts, json) = (w.into_inner(), String::from_utf8(j.into_inner()).unwrap());
    let first = json.lines().next().unwrap();
    let key = format!(", \"vtnt\":\"{build}\"");
    assert!(
        first.ends_with(&format!("\"start_time\":1795312150{key}}}")),
        "{first}"
    );
    let from_warts: Vec<Item> = read_warts(&warts).into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(from_warts[0], Item::CycleStart(start.clone()));
    assert_eq!(from_warts.last(), Some(&Item::CycleStop(stop)));
    let from_json = JsonReader::new(json.as_bytes()).next().unwrap().unwrap();
    assert_eq!(from_json, Item::CycleStart(start));

    vtnt_testkit::require_tools!("sc_warts2json", "sc_wartsdump");
    let path = scratch("build").join("build.warts");
    std::fs::write(&path, &warts).unwrap();
    let theirs = sc_tool("sc_warts2json", &path);
    assert_same_lines(
        &json.replacen(&key, "", 1),
        &theirs,
        "a cycle naming its build",
    );
    let dump = sc_tool("sc_wartsdump", &path);
    assert!(
        dump.contains(build),
        "sc_wartsdump shows the list's description:\n{dump}"
    );
}
