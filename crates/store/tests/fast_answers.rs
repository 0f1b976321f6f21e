//! The whole-store questions, answered from the summary rows kept at ingest (one
//! grouping of distinct tunnels), equal the from-scratch query (every join, a distinct
//! set per class, the SQL before issue 41's 200 ms work), written out here as the
//! reference, after imports of two campaigns into two tenants, a fleet's job filed in
//! batches, a prefix-to-AS table and a refused corrupt import, for every group and the
//! filters that change the joins (and one the summaries cannot answer: a prefix); the
//! summary rows themselves equal their from-scratch SQL there and in a store of schema
//! version 1 that opening migrated. The diff of two runs (a merge of digests kept at
//! ingest) equals the one computed from scratch from the traces, their hops and their
//! tunnels, written out here too, for imports, a fleet feed, a tenant's runs alone, and
//! stores of schema versions 1 and 3 that opening migrated.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufReader;
use std::path::Path;

use rusqlite::Connection;
use vtnt_formats::JsonReader;
use vtnt_store::diff::{Diff, TunnelKey};
use vtnt_store::import::{import_file, ImportOptions};
use vtnt_store::query::Filter;
use vtnt_store::questions::TunnelCount;
use vtnt_store::{JobInfo, NodeInfo, Provenance, RunInfo, Source, Store, Tenant};

mod common;

use common::{Scratch, FIXTURE};

const CLASSES: [&str; 5] = [
    "explicit",
    "implicit",
    "opaque",
    "invisible-php",
    "invisible-uhp",
];

const KEY: &str = "(t.class || '|' || coalesce(t.ingress, '*') || '|' || \
                   coalesce(t.egress, '*') || '|' || t.lsrs)";

const FROM: &str = "FROM traces r JOIN jobs j ON j.id = r.job_id \
     JOIN nodes n ON n.id = j.node_id JOIN runs u ON u.id = j.run_id \
     JOIN tunnels t ON t.trace_id = r.id \
     LEFT JOIN signatures s ON s.job_id = j.id AND s.addr = t.ingress \
     WHERE r.tenant = ?1 AND (?2 IS NULL OR n.name = ?2) AND (?3 IS NULL OR u.key = ?3) \
     AND (?4 IS NULL OR t.class = ?4)";

/// The from-scratch answer: tunnels grouped by `group`, as the store answered before.
fn reference(c: &Connection, tenant: &str, f: &Filter, group: &str) -> Vec<TunnelCount> {
    let per_class: Vec<String> = CLASSES
        .iter()
        .map(|c| format!("count(DISTINCT CASE WHEN t.class = '{c}' THEN {KEY} END)"))
        .collect();
    let sql = format!(
        "SELECT {group} AS g, count(DISTINCT {KEY}), count(*), {} {FROM} \
         GROUP BY g ORDER BY 2 DESC, g",
        per_class.join(", ")
    );
    let mut st = c.prepare(&sql).unwrap();
    let rows = st
        .query_map((tenant, &f.node, &f.run, &f.class), |r| {
            let mut classes = BTreeMap::new();
            for (i, c) in CLASSES.iter().enumerate() {
                classes.insert(c.to_string(), r.get(3 + i)?);
            }
            Ok(TunnelCount {
                group: r.get(0)?,
                tunnels: r.get(1)?,
                observations: r.get(2)?,
                classes,
            })
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// The from-scratch revealed LSRs per AS: (AS, LSRs, tunnels).
fn reference_lsrs(c: &Connection, tenant: &str, f: &Filter) -> Vec<(Option<String>, u64, u64)> {
    let from = FROM.replace(
        " WHERE",
        " JOIN lsrs l ON l.tunnel_id = t.id AND l.revealed AND l.addr IS NOT NULL \
         LEFT JOIN addresses a ON a.addr = l.addr WHERE",
    );
    let sql = format!(
        "SELECT a.asn AS g, count(DISTINCT l.addr), count(DISTINCT {KEY}) {from} \
         GROUP BY g ORDER BY 2 DESC, g"
    );
    let mut st = c.prepare(&sql).unwrap();
    let rows = st
        .query_map((tenant, &f.node, &f.run, &f.class), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// A summary table's rows, and the same rows computed from scratch, each sorted.
type Rows = Vec<Vec<rusqlite::types::Value>>;

fn sorted(c: &Connection, sql: &str) -> Rows {
    let mut st = c.prepare(sql).unwrap();
    let n = st.column_count();
    let mut rows: Rows = st
        .query_map([], |r| (0..n).map(|i| r.get(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    rows
}

/// A pair's path (the first reply per TTL from the first hop, `*` for none) and tunnels.
type Pair = (Vec<String>, BTreeSet<TunnelKey>);

/// Run `run` of `tenant` from scratch: per (vantage point, target), its last initial (or
/// plain) trace by start time then id, read from `traces`, `hops` and `tunnels`.
fn pairs(c: &Connection, tenant: &str, run: &str) -> BTreeMap<(String, String), Pair> {
    let mut last: BTreeMap<(String, String), (i64, i64, i64)> = BTreeMap::new();
    let mut st = c
        .prepare(
            "SELECT n.name, r.dst, r.start_us, r.id, r.firsthop FROM traces r \
             JOIN jobs j ON j.id = r.job_id JOIN nodes n ON n.id = j.node_id \
             JOIN runs u ON u.id = j.run_id WHERE u.tenant = ?1 AND u.key = ?2 \
             AND coalesce(r.role, 'initial') = 'initial'",
        )
        .unwrap();
    let rows = st
        .query_map([tenant, run], |r| {
            Ok(((r.get(0)?, r.get(1)?), (r.get(2)?, r.get(3)?, r.get(4)?)))
        })
        .unwrap();
    for row in rows {
        let (k, v) = row.unwrap();
        let e = last.entry(k).or_insert(v);
        *e = (*e).max(v);
    }
    let pair = |&(_, id, firsthop): &(i64, i64, i64)| -> Pair {
        let mut path: Vec<String> = Vec::new();
        let mut st = c
            .prepare("SELECT probe_ttl, addr FROM hops WHERE trace_id = ?1 ORDER BY probe_ttl, i")
            .unwrap();
        for h in st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap() {
            let (ttl, addr): (i64, String) = h.unwrap();
            let slot = ttl - firsthop;
            if slot >= 0 && slot as usize >= path.len() {
                path.resize(slot as usize, "*".into());
                path.push(addr);
            }
        }
        let mut st = c
            .prepare("SELECT class, ingress, egress, lsrs FROM tunnels WHERE trace_id = ?1")
            .unwrap();
        let tunnels = st
            .query_map([id], |r| {
                let lsrs: String = r.get(3)?;
                Ok(TunnelKey::new(r.get(0)?, r.get(1)?, r.get(2)?, &lsrs))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        (path, tunnels)
    };
    last.iter().map(|(k, v)| (k.clone(), pair(v))).collect()
}

/// Asserts `store`'s diff of runs `a` and `b` of `tenant` equals the one from scratch;
/// returns it.
fn diff_is_exact(store: &Store, c: &Connection, tenant: &str, a: &str, b: &str) -> Diff {
    let d = store.diff(&Tenant::new(tenant).unwrap(), a, b).unwrap();
    let (pa, pb) = (pairs(c, tenant, a), pairs(c, tenant, b));
    let only = |x: &BTreeMap<_, Pair>, y: &BTreeMap<_, _>| -> Vec<(String, String)> {
        x.keys().filter(|k| !y.contains_key(*k)).cloned().collect()
    };
    let keys = |v: &[vtnt_store::diff::PathKey]| -> Vec<(String, String)> {
        v.iter()
            .map(|k| (k.node.clone(), k.target.clone()))
            .collect()
    };
    let what = format!("diff {tenant} {a} {b}");
    assert_eq!(keys(&d.only_in_a), only(&pa, &pb), "{what}");
    assert_eq!(keys(&d.only_in_b), only(&pb, &pa), "{what}");
    let both: Vec<_> = pa
        .iter()
        .filter_map(|(k, x)| Some((k, x, pb.get(k)?)))
        .collect();
    assert_eq!(d.compared, both.len() as u64, "{what}");
    let changed: Vec<_> = both.into_iter().filter(|(_, x, y)| x != y).collect();
    assert_eq!(d.unchanged, d.compared - changed.len() as u64, "{what}");
    assert_eq!(d.changed.len(), changed.len(), "{what}");
    for (got, (k, x, y)) in d.changed.iter().zip(changed) {
        assert_eq!((&got.key.node, &got.key.target), (&k.0, &k.1), "{what}");
        assert_eq!((&got.a, &got.b), (&x.0, &y.0), "{what} {k:?}");
        let gone: Vec<_> = x.1.difference(&y.1).cloned().collect();
        let new: Vec<_> = y.1.difference(&x.1).cloned().collect();
        assert_eq!(
            (&got.tunnels_gone, &got.tunnels_new),
            (&gone, &new),
            "{what} {k:?}"
        );
        assert_eq!(got.segment.is_none(), x.0 == y.0, "{what} {k:?}");
    }
    d
}

/// Asserts both summary tables hold what their from-scratch SQL gives, and something.
fn summaries_are_exact(c: &Connection, when: &str) {
    let raw = "FROM traces r JOIN tunnels t ON t.trace_id = r.id \
               LEFT JOIN signatures s ON s.job_id = r.job_id AND s.addr = t.ingress";
    let groups = sorted(
        c,
        "SELECT job_id, tenant, class, ingress, egress, lsrs, vendor, observations \
         FROM tunnel_groups",
    );
    let want = sorted(
        c,
        &format!(
            "SELECT r.job_id, r.tenant, t.class, t.ingress, t.egress, t.lsrs, s.vendor, \
             count(*) {raw} GROUP BY 1, 2, 3, 4, 5, 6, 7"
        ),
    );
    assert_eq!(groups, want, "tunnel_groups {when}");
    assert!(!groups.is_empty(), "{when}");
    let lsrs = sorted(
        c,
        "SELECT job_id, tenant, class, ingress, egress, lsrs, vendor, addr FROM lsr_groups",
    );
    let want = sorted(
        c,
        &format!(
            "SELECT DISTINCT r.job_id, r.tenant, t.class, t.ingress, t.egress, t.lsrs, \
             s.vendor, l.addr {raw} JOIN lsrs l ON l.tunnel_id = t.id AND l.revealed \
             AND l.addr IS NOT NULL"
        ),
    );
    assert_eq!(lsrs, want, "lsr_groups {when}");
    assert!(!lsrs.is_empty(), "{when}");
}

/// Files `path`'s records as one fleet job of `tenant`, `batch` records per
/// transaction, as the fleet feed files a job's messages.
fn feed_in_batches(store: &mut Store, path: &Path, tenant: &str, batch: usize) {
    let mut rd = JsonReader::new(BufReader::new(std::fs::File::open(path).unwrap()));
    let items: Vec<_> = std::iter::from_fn(|| rd.next())
        .map(Result::unwrap)
        .collect();
    let p = Provenance {
        tenant: Tenant::new(tenant).unwrap(),
        run: RunInfo {
            key: "fleet-run".into(),
            name: "fleet-run".into(),
            source: Source::Fleet,
            command: None,
        },
        node: NodeInfo {
            name: "fleet-node".into(),
            ..NodeInfo::default()
        },
        job: JobInfo {
            key: "fleet-job".into(),
            ..JobInfo::default()
        },
    };
    for (k, chunk) in items.chunks(batch).enumerate() {
        let mut ingest = store.ingest(&p).unwrap();
        for (i, item) in chunk.iter().enumerate() {
            let idx = (k * batch + i) as i64;
            ingest.item(Some(idx), item).unwrap().unwrap();
        }
        ingest.commit().unwrap();
    }
}

fn import(store: &mut Store, path: &Path, tenant: &str, run: &str) -> vtnt_store::Result<()> {
    import_file(
        store,
        path,
        &ImportOptions {
            tenant: Tenant::new(tenant).unwrap(),
            node: None,
            run: Some(run.into()),
        },
    )
    .map(drop)
}

#[test]
fn fast_answers_equal_the_from_scratch_query() {
    let s = Scratch::new("fast-answers");
    let path = s.path("r.sqlite");
    let mut store = Store::open(&path).unwrap();
    // two campaigns in one tenant (the second a copy with every fourth line gone, so
    // observations and groups differ, measured later, so its records are its own, and
    // an address renamed in every third line, so paths and tunnels change), the first
    // again in a second tenant
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let thinned: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(i, _)| i % 4 != 3)
        .map(|(i, l)| {
            let l = l.replace("\"start\":{\"sec\":", "\"start\":{\"sec\":9");
            match i % 3 {
                0 => l
                    .replace("\"100.64.3.14\"", "\"100.64.3.99\"")
                    .replace("\"100.64.5.14\"", "\"100.64.5.99\""),
                _ => l,
            }
        })
        .collect();
    let b = s.path("b.json");
    std::fs::write(&b, thinned.join("\n")).unwrap();
    import(&mut store, Path::new(FIXTURE), "lab", "a").unwrap();
    import(&mut store, &b, "lab", "b").unwrap();
    import(&mut store, Path::new(FIXTURE), "other", "a").unwrap();
    let pfx = s.path("pfx2as");
    std::fs::write(
        &pfx,
        "100.64.0.0\t16\t64500\n100.64.5.0\t24\t64505\n100.64.6.0\t24\t64506_64507\n",
    )
    .unwrap();
    store.load_pfx2as(&pfx).unwrap();
    // a fleet job, its records in batches of 20 (its signatures come over several)
    feed_in_batches(&mut store, Path::new(FIXTURE), "fleet", 20);
    // a corrupt import, refused: stores nothing
    let mut lines: Vec<&str> = text.lines().collect();
    lines[30] = &lines[30][..lines[30].len() / 2];
    let bad = s.path("bad.json");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    assert!(import(&mut store, &bad, "lab", "c").is_err());

    let c = Connection::open(&path).unwrap();
    summaries_are_exact(&c, "after imports, a fleet job and a refused import");
    let node = store.nodes(&Tenant::new("lab").unwrap()).unwrap()[0]
        .node
        .name
        .clone();
    let filters = [
        Filter::default(),
        Filter {
            node: Some(node),
            ..Filter::default()
        },
        Filter {
            run: Some("b".into()),
            ..Filter::default()
        },
        // a run key both tenants have: each sees its own
        Filter {
            run: Some("a".into()),
            ..Filter::default()
        },
        Filter {
            class: Some("invisible-php".into()),
            ..Filter::default()
        },
        Filter {
            run: Some("fleet-run".into()),
            ..Filter::default()
        },
    ];
    let mut seen = 0;
    for tenant in ["lab", "other", "fleet"] {
        let t = Tenant::new(tenant).unwrap();
        for f in &filters {
            let asn = "(SELECT a.asn FROM addresses a WHERE a.addr = t.ingress)";
            let per_as = store.tunnels_per_as(&t, f).unwrap();
            assert_eq!(per_as, reference(&c, tenant, f, asn), "{tenant} {f:?}");
            let vendor = "coalesce(s.vendor, 'unknown')";
            let per_vendor = store.tunnels_per_vendor(&t, f).unwrap();
            assert_eq!(
                per_vendor,
                reference(&c, tenant, f, vendor),
                "{tenant} {f:?}"
            );
            let per_vp = store.classes_per_vantage_point(&t, f).unwrap();
            assert_eq!(per_vp, reference(&c, tenant, f, "n.name"), "{tenant} {f:?}");
            let lsrs: Vec<_> = store
                .revealed_lsrs_per_as(&t, f)
                .unwrap()
                .into_iter()
                .map(|l| (l.asn, l.lsrs, l.tunnels))
                .collect();
            assert_eq!(lsrs, reference_lsrs(&c, tenant, f), "{tenant} {f:?}");
            seen += per_as.len() + per_vendor.len() + per_vp.len() + lsrs.len();
        }
    }
    // the answers are not all empty: the comparison compared something
    assert!(seen > 20, "{seen} groups");

    // a filter the summaries do not keep (a prefix) reads the tunnels: the same answer
    // as the summaries' for a prefix of every target
    let lab = Tenant::new("lab").unwrap();
    let all = Filter {
        prefix: Some("0.0.0.0/0".parse().unwrap()),
        ..Filter::default()
    };
    let fast = Filter::default();
    assert_eq!(
        store.tunnels_per_vendor(&lab, &all).unwrap(),
        store.tunnels_per_vendor(&lab, &fast).unwrap()
    );
    assert_eq!(
        store.revealed_lsrs_per_as(&lab, &all).unwrap(),
        store.revealed_lsrs_per_as(&lab, &fast).unwrap()
    );

    // the diff equals the from-scratch one: two imports both ways and with itself, a
    // fleet feed against an import of the same records (stored once: the import's run
    // is empty), and a tenant cannot name another's run
    drop(c);
    let fleet = Tenant::new("fleet").unwrap();
    import(&mut store, Path::new(FIXTURE), "fleet", "again").unwrap();
    let c = Connection::open(&path).unwrap();
    let ab = diff_is_exact(&store, &c, "lab", "a", "b");
    assert!(ab.unchanged > 0 && !ab.changed.is_empty(), "{ab:?}");
    assert!(!ab.only_in_a.is_empty(), "{ab:?}");
    diff_is_exact(&store, &c, "lab", "b", "a");
    let aa = diff_is_exact(&store, &c, "lab", "a", "a");
    assert_eq!((aa.unchanged, aa.changed.len()), (aa.compared, 0));
    let fa = diff_is_exact(&store, &c, "fleet", "fleet-run", "again");
    assert!(fa.compared == 0 && !fa.only_in_a.is_empty(), "{fa:?}");
    assert!(store
        .diff(&Tenant::new("other").unwrap(), "a", "b")
        .is_err());
    assert!(store.diff(&fleet, "a", "fleet-run").is_err());

    // a store of schema version 1 (no summaries) is filled when opened
    let before = store.tunnels_per_as(&lab, &fast).unwrap();
    drop(store);
    c.execute_batch(
        "DROP TABLE tunnel_groups; DROP TABLE lsr_groups; DROP TABLE run_paths; \
         DELETE FROM schema_version WHERE version > 1",
    )
    .unwrap();
    let store = Store::open(&path).unwrap();
    summaries_are_exact(&c, "after the migration");
    assert_eq!(store.tunnels_per_as(&lab, &fast).unwrap(), before);
    assert_eq!(diff_is_exact(&store, &c, "lab", "a", "b"), ab);

    // a store of schema version 3 (paths without digests) gets them when opened
    drop(store);
    c.execute_batch(
        "DROP TABLE run_paths; CREATE TABLE run_paths (run_id INTEGER NOT NULL, \
         node_id INTEGER NOT NULL, dst TEXT NOT NULL, start_us INTEGER NOT NULL, \
         trace_id INTEGER NOT NULL, path TEXT NOT NULL, tunnels TEXT NOT NULL, \
         PRIMARY KEY (run_id, node_id, dst)) WITHOUT ROWID; \
         DELETE FROM schema_version WHERE version > 3",
    )
    .unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(diff_is_exact(&store, &c, "lab", "a", "b"), ab);
    assert_eq!(diff_is_exact(&store, &c, "fleet", "fleet-run", "again"), fa);
}
