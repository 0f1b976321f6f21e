//! The results store's acceptance against the lab's ground truth, in process: a TNT
//! campaign over a topology (virtual clock) is written as scamper JSON, imported with a
//! prefix-to-AS file for the topology, and every question's answer must be the truth's
//! (`vtnt_bench::store_truth`). The same through the real lab and `vtnt tnt`:
//! `crates/cli/tests/store_lab.rs`.

use vtnt_bench::store::{campaign, write_json};
use vtnt_lab::{generate, GenOptions, Lab, Topology};
use vtnt_store::import::{import_file, ImportOptions};
use vtnt_store::{Store, Tenant};

#[path = "../../store/tests/common/mod.rs"]
mod store_common;

use store_common::Scratch;

/// The differences between the store's answers and the truth's for a campaign on `topo`.
fn differences(tag: &str, topo: Topology) -> Vec<String> {
    let dir = Scratch::new(&format!("truth-{tag}"));
    let mut lab = Lab::new(topo);
    let truth = lab.truth();
    let records = campaign(&mut lab, &truth, 1).expect("the campaign");
    let json = dir.path("campaign.json");
    write_json(&json, [records]).unwrap();
    let truth = serde_json::to_value(&truth).unwrap();
    let pfx2as = dir.path("pfx2as");
    std::fs::write(&pfx2as, vtnt_bench::store_truth::pfx2as_for(&truth)).unwrap();
    let mut store = Store::open(&dir.path("results.sqlite")).unwrap();
    store.load_pfx2as(&pfx2as).unwrap();
    let tenant = Tenant::new("lab").unwrap();
    let o = ImportOptions {
        tenant: tenant.clone(),
        node: None,
        run: None,
    };
    import_file(&mut store, &json, &o).unwrap();
    vtnt_bench::store_truth::compare(&store, &tenant, &truth).unwrap()
}

#[test]
fn the_reference_topologys_answers_are_the_truths() {
    let d = differences("reference", Topology::reference());
    assert!(d.is_empty(), "{d:#?}");
}

#[test]
fn a_generated_topologys_answers_are_the_truths() {
    // without equal-cost paths: where the truth lists every variant of a path, which
    // one TNT's flow crossed decides which tunnel it saw (the accuracy benchmark scores
    // those)
    let o = GenOptions {
        destinations: 24,
        ecmp: 0.0,
        lsp_ecmp: 0.0,
        ..GenOptions::default()
    };
    // (seeds whose campaigns TNT reads right, router for router and address for address:
    // at others its misses, docs/benchmarks.md's accuracy, are the differences)
    for seed in [3, 6, 8] {
        let d = differences(&format!("generated{seed}"), generate(seed, &o));
        assert!(d.is_empty(), "seed {seed}: {d:#?}");
    }
}
