//! Readers against hostile input: every file of the fuzz corpus
//! (`fuzz/corpus/{warts_read,json_read}`) goes through the readers and back out through
//! the writers; every prefix of a valid warts file either reads cleanly (it ends on a
//! record boundary) or gives an error that carries an offset inside the prefix; single
//! byte corruptions never panic.

#[path = "../fuzz/body.rs"]
mod body;
mod common;

use std::path::PathBuf;

use common::*;
use vtnt_formats::*;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "empty corpus {}", dir.display());
    v
}

#[test]
fn warts_corpus_reads_without_errors() {
    for (p, b) in corpus("warts_read") {
        let errs: Vec<_> = read_warts(&b).into_iter().filter_map(Result::err).collect();
        assert!(errs.is_empty(), "{}: {errs:?}", p.display());
        assert!(body::warts_read(&b) >= 3, "{}", p.display());
    }
}

#[test]
fn json_corpus_reads_without_errors() {
    for (p, b) in corpus("json_read") {
        assert!(body::json_read(&b) > 0, "{}", p.display());
        let items: Vec<_> = JsonReader::new(&b[..]).collect();
        assert!(
            items.iter().all(Result::is_ok),
            "{}: {items:?}",
            p.display()
        );
        let mut out = JsonWriter::new(Vec::new());
        for i in items.into_iter().flatten() {
            out.write_item(&i).unwrap();
        }
        assert_eq!(
            String::from_utf8(out.into_inner()).unwrap(),
            String::from_utf8(b).unwrap(),
            "{}",
            p.display()
        );
    }
}

/// Record boundaries of a valid warts file.
fn boundaries(b: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    let mut at = 0;
    while at + 8 <= b.len() {
        let len = u32::from_be_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]) as usize;
        at += 8 + len;
        v.push(at);
    }
    assert_eq!(at, b.len());
    v
}

fn truncation_sweep(b: &[u8], what: &str) {
    let bounds = boundaries(b);
    for n in 0..b.len() {
        let results = read_warts(&b[..n]);
        let errs: Vec<&WartsError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        if bounds.contains(&n) {
            assert!(
                errs.is_empty(),
                "{what}: prefix {n} ends on a record boundary: {errs:?}"
            );
        } else {
            assert_eq!(
                errs.len(),
                1,
                "{what}: prefix {n} gives one error: {errs:?}"
            );
            let e = errs[0];
            assert!(
                e.offset <= n as u64,
                "{what}: prefix {n}: offset {} past the end",
                e.offset
            );
            assert!(
                matches!(e.kind, WartsErrorKind::Truncated(_)),
                "{what}: prefix {n}: {e}"
            );
            assert!(e.to_string().contains(&format!("byte {}", e.offset)));
        }
    }
}

/// Every sample record, those only warts can carry too.
fn all_samples() -> Vec<Record> {
    let mut v = sample_records();
    v.extend(warts_only_samples());
    v
}

fn our_samples() -> Vec<u8> {
    let mut w = WartsWriter::new(Vec::new());
    w.cycle_start(&cycle(1_795_312_150, 0)).unwrap();
    for r in all_samples() {
        w.write(&r).unwrap();
    }
    w.cycle_stop(&cycle(1_795_312_150, 1_795_312_160)).unwrap();
    w.into_inner()
}

#[test]
fn every_prefix_errors_with_an_offset() {
    truncation_sweep(&our_samples(), "our samples");
    for (p, b) in corpus("warts_read") {
        truncation_sweep(&b, &p.display().to_string());
    }
}

#[test]
fn corrupted_bytes_never_panic() {
    let b = our_samples();
    for i in 0..b.len() {
        for x in [0x00u8, 0xff, 0x80, 0x7f] {
            let mut c = b.clone();
            c[i] ^= x.max(1);
            body::warts_read(&c);
            c[i] = x;
            body::warts_read(&c);
        }
    }
}

#[test]
fn unknown_record_types_are_skipped() {
    let mut b = vec![0x12, 0x05, 0x00, 0x0d, 0, 0, 0, 3, 1, 2, 3]; // a "sniff" record
    b.extend(our_samples());
    let items = read_warts(&b);
    assert!(items.iter().all(Result::is_ok));
    assert_eq!(items.len(), all_samples().len() + 2);
}

#[test]
fn bad_magic_stops_with_its_offset() {
    let mut b = our_samples();
    let second = boundaries(&b)[1];
    b[second] = 0x13;
    let items = read_warts(&b);
    let e = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(e.offset, second as u64);
    assert!(matches!(e.kind, WartsErrorKind::BadMagic(0x1305)));
}

/// Regenerates the corpus files made by our writers:
/// `cargo test -p vtnt-formats --test robustness -- --ignored`.
#[test]
#[ignore]
fn regenerate_our_corpus_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    std::fs::write(dir.join("warts_read/ours-samples.warts"), our_samples()).unwrap();
    let mut j = JsonWriter::new(Vec::new());
    j.cycle_start(&cycle(1_795_312_150, 0)).unwrap();
    for r in sample_records() {
        j.write(&r).unwrap();
    }
    j.cycle_stop(&cycle(1_795_312_150, 1_795_312_160)).unwrap();
    std::fs::write(dir.join("json_read/ours-samples.json"), j.into_inner()).unwrap();
}

#[test]
fn hostile_json_values_give_errors_not_panics() {
    let good = sample_records();
    let mut j = JsonWriter::new(Vec::new());
    j.write(&good[0]).unwrap();
    let line = String::from_utf8(j.into_inner()).unwrap();
    let hostile = [
        ("\"sec\":1795312150", "\"sec\":18446744073709551615"),
        ("\"sec\":1795312150", "\"sec\":-1"),
        ("\"usec\":299134", "\"usec\":1000000"),
        ("\"rtt\":1.213", "\"rtt\":1e300"),
        ("\"rtt\":1.213", "\"rtt\":-1"),
        ("\"probe_ttl\":1", "\"probe_ttl\":256"),
        ("\"mpls_label\":25316", "\"mpls_label\":1048576"),
        ("\"hops\":[", "\"hops\":[1,"),
        ("\"stop_reason\":\"COMPLETED\"", "\"stop_reason\":\"DONE\""),
        ("\"src\":\"192.0.2.1\"", "\"src\":\"192.0.2.300\""),
        // hops scamper would not list (the JSON writer would drop them)
        ("\"hop_count\":5", "\"hop_count\":4"),
        ("\"firsthop\":1", "\"firsthop\":2"),
    ];
    for (from, to) in hostile {
        assert!(line.contains(from), "{from}");
        let bad = line.replacen(from, to, 1);
        let e = parse_json_line(&bad, 9).unwrap_err();
        assert_eq!(e.line, 9);
    }
    for junk in [
        "",
        "[]",
        "{}",
        "{\"type\":1}",
        "{\"type\":\"tracelb\"}",
        "\u{0}",
    ] {
        assert!(parse_json_line(junk, 1).is_err(), "{junk:?}");
    }
}

#[test]
fn a_truncated_stream_converts_what_precedes_the_damage() {
    let b = our_samples();
    let bounds = boundaries(&b);
    let last_whole = bounds[bounds.len() - 3];
    let cut = last_whole + 11;
    let mut whole = Vec::new();
    let rep = warts_to_json(&b[..last_whole], &mut whole).unwrap();
    assert!(rep.stopped.is_none() && rep.skipped.is_empty());
    let mut out = Vec::new();
    let rep = warts_to_json(&b[..cut], &mut out).unwrap();
    assert_eq!(out, whole);
    assert_eq!(rep.written, whole.iter().filter(|&&c| c == b'\n').count());
    match rep.stopped {
        Some(ConvertError::Warts(e)) => {
            assert_eq!(e.offset, cut as u64);
            assert!(matches!(e.kind, WartsErrorKind::Truncated(_)), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_field_cut_short_inside_a_sound_record_skips_only_that_record() {
    let b = our_samples();
    let bounds = boundaries(&b);
    let (start, end) = bounds
        .windows(2)
        .map(|w| (w[0], w[1]))
        .find(|&(s, _)| b[s + 3] == 0x06)
        .expect("a trace record");
    // Drop the trace's closing optional-data header (2 bytes) and shorten its length.
    let mut c = b[..end - 2].to_vec();
    let len = (end - start - 8 - 2) as u32;
    c[start + 4..start + 8].copy_from_slice(&len.to_be_bytes());
    c.extend_from_slice(&b[end..]);
    let mut out = Vec::new();
    let rep = warts_to_json(&c[..], &mut out).unwrap();
    assert!(rep.stopped.is_none(), "{:?}", rep.stopped);
    assert_eq!(rep.skipped.len(), 1, "{:?}", rep.skipped);
    assert!(rep.skipped[0].contains("truncated"), "{:?}", rep.skipped);
    let total = read_warts(&b).len();
    assert_eq!(rep.written, total - 1);
}

#[test]
fn json_ping_replies_past_ping_sent_are_errors() {
    // scamper lists none; warts refuses them and the JSON writer would drop them.
    let mut j = JsonWriter::new(Vec::new());
    for r in sample_records() {
        j.write(&r).unwrap();
    }
    let text = String::from_utf8(j.into_inner()).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("{\"type\":\"ping\"") && l.contains("\"seq\":0"))
        .expect("a ping with replies");
    let at = line.find("\"ping_sent\":").unwrap();
    let end = at + line[at..].find(',').unwrap();
    let bad = format!("{}\"ping_sent\":0{}", &line[..at], &line[end..]);
    let e = parse_json_line(&bad, 4).unwrap_err();
    assert!(
        e.to_string()
            .contains("responses[0].seq\": 0 is not below ping_sent 0"),
        "{e}"
    );
}
