//! `vtnt bench store` at a small size (CI): every record written is stored, the second
//! campaign is compared with the first, and every question answers.

use vtnt_bench::store::{store_bench, StoreBenchOptions};

#[test]
fn a_small_campaign_goes_through_the_store() {
    let dir = std::env::temp_dir().join(format!("vtnt-store-bench-{}", std::process::id()));
    let o = StoreBenchOptions {
        targets: 300,
        destinations: 16,
        seed: 7,
        dir: dir.clone(),
    };
    let r = store_bench(&o).expect("the benchmark runs");
    println!("{}", r.to_markdown());
    assert_eq!(r.imports.len(), 2);
    assert!(r.imports.iter().all(|i| i.records > 300), "{:?}", r.imports);
    let diff = r.queries.iter().find(|q| q.question == "diff a b").unwrap();
    assert_eq!(diff.rows, 300, "every target compared");
    let one = r
        .queries
        .iter()
        .find(|q| q.question.starts_with("traces --target"))
        .unwrap();
    assert_eq!(one.rows, 2, "the target's trace in each campaign");
    std::fs::remove_dir_all(&dir).unwrap();
}
