//! `"tnt"` fields through both formats: JSON -> warts -> JSON gives the same bytes, the
//! warts file (annotations in lists of their own) reads in Debian's `sc_wartsdump`,
//! `sc_warts2json` and `sc_wartscat` like any other, and `sc_wartscat`'s copy keeps the
//! annotations. A malformed annotation list fails its record only, at its offset.

mod common;

use std::process::Command;

use vtnt_formats::*;

/// Sample records, every other one annotated (traces on the record and on some hops).
fn items() -> Vec<Item> {
    let mut out = vec![Item::CycleStart(common::cycle(1_700_000_000, 0))];
    let records = common::sample_records()
        .into_iter()
        .chain(common::sample_pings());
    for (i, r) in records.enumerate() {
        if i % 2 == 1 {
            out.push(Item::Record(r));
            continue;
        }
        let hops = match &r {
            Record::Trace(t) => (0..t.hops.len())
                .map(|k| (k % 2 == 0).then(|| format!("{{\"te\":{k},\"vendor\":\"cisco\"}}")))
                .collect(),
            Record::Ping(_) => Vec::new(),
        };
        let f = TntFields {
            record: Some(format!(
                "{{\"role\":\"reveal\",\"step\":{i},\"note\":\"a \\\"quoted\\\" word\"}}"
            )),
            hops,
        };
        out.push(Item::Annotated(r, f));
    }
    out.push(Item::CycleStop(common::cycle(1_700_000_000, 1_700_000_100)));
    out
}

fn json_of(items: &[Item]) -> Vec<u8> {
    let mut w = JsonWriter::new(Vec::new());
    for i in items {
        w.write_item(i).unwrap();
    }
    w.into_inner()
}

#[test]
fn json_to_warts_to_json_keeps_every_annotation_byte_for_byte() {
    let items = items();
    let json = json_of(&items);
    let text = String::from_utf8(json.clone()).unwrap();
    assert!(text.contains(", \"tnt\":{\"role\":\"reveal\""));
    let read: Vec<Item> = JsonReader::new(&json[..]).map(Result::unwrap).collect();
    // what JSON cannot show (hops outside firsthop..=hop_count) aside, the items come back
    assert_eq!(json_of(&read), json);
    let mut warts = Vec::new();
    let r = json_to_warts(&json[..], &mut warts).unwrap();
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    let mut back = Vec::new();
    warts_to_json(&warts[..], &mut back).unwrap();
    assert_eq!(
        String::from_utf8(back).unwrap(),
        text,
        "json -> warts -> json"
    );
    let again: Vec<Item> = read_warts(&warts).into_iter().map(Result::unwrap).collect();
    assert_eq!(
        again
            .iter()
            .filter(|i| matches!(i, Item::Annotated(..)))
            .count(),
        items
            .iter()
            .filter(|i| matches!(i, Item::Annotated(..)))
            .count()
    );
}

#[test]
fn scamper_tools_read_and_copy_annotated_warts() {
    vtnt_testkit::require_tools!("sc_wartsdump", "sc_warts2json", "sc_wartscat");
    let dir = common::scratch("annotations");
    let items = items();
    let mut w = WartsWriter::new(Vec::new());
    for i in &items {
        w.write_item(i).unwrap();
    }
    let file = dir.join("tnt.warts");
    std::fs::write(&file, w.into_inner()).unwrap();
    let records = items.iter().filter(|i| i.record().is_some()).count();

    let json = common::sc_tool("sc_warts2json", &file);
    let objects = json
        .lines()
        .filter(|l| l.starts_with("{\"type\":\"trace\"") || l.starts_with("{\"type\":\"ping\""))
        .count();
    assert_eq!(objects, records, "sc_warts2json: every record");
    let dump = common::sc_tool("sc_wartsdump", &file);
    assert_eq!(
        dump.matches("traceroute from").count() + dump.matches("ping from").count(),
        records,
        "sc_wartsdump: every record:\n{dump}"
    );

    // sc_wartscat copies the lists with the records: our reader finds the annotations
    let copy = dir.join("copy.warts");
    let o = Command::new("sc_wartscat")
        .arg("-o")
        .arg(&copy)
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |p: &std::path::Path| -> Vec<Item> {
        read_warts(&std::fs::read(p).unwrap())
            .into_iter()
            .map(Result::unwrap)
            .filter(|i| i.record().is_some())
            .collect()
    };
    let want: Vec<Item> = read(&file);
    assert_eq!(want.len(), records);
    assert_eq!(read(&copy), want, "sc_wartscat's copy");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_malformed_annotation_list_fails_its_record_at_its_offset() {
    let items = items();
    let mut w = WartsWriter::new(Vec::new());
    for i in &items {
        w.write_item(i).unwrap();
    }
    let mut bytes = w.into_inner();
    // Break the first annotation list's description: `{"tnt"` -> `{"tnx"`.
    let at = bytes
        .windows(6)
        .position(|b| b == b"{\"tnt\"")
        .expect("an annotation list");
    bytes[at + 4] = b'x';
    let read = read_warts(&bytes);
    let errors: Vec<&WartsError> = read.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0].to_string();
    assert!(
        e.contains("tnt annotations") && e.contains("unknown key \"tnx\""),
        "{e}"
    );
    assert!(
        errors[0].offset > at as u64,
        "names the record after the list"
    );
    assert_eq!(
        read.iter().filter(|r| r.is_ok()).count(),
        items.len() - 1,
        "the other records read"
    );
}
