//! What the wire fuzz targets do with one input, shared with the corpus test
//! (`crates/wire/tests/fuzz_corpus.rs`) so every corpus file also runs under `cargo test`.

#![allow(dead_code)]

use vtnt_wire::icmpext;
use vtnt_wire::reply::{self, Body};

/// `reply_parse`: summarise any bytes; walk everything the summary exposes.
pub fn reply_parse(data: &[u8]) {
    let Ok(r) = reply::parse(data) else { return };
    assert!(
        r.len as usize <= data.len(),
        "total length beyond the buffer"
    );
    for rr in r.rr.into_iter().chain(quoted_rr(&r.body)) {
        assert!((1..=vtnt_wire::ipopt::RECORD_ROUTE_MAX).contains(&rr.addrs().len()));
    }
    match r.body {
        Body::IcmpError { ext: Some(ext), .. } => walk(ext),
        Body::Echo { payload, .. } | Body::Udp { payload, .. } => {
            assert!(payload.len() <= data.len());
        }
        _ => {}
    }
}

fn quoted_rr(b: &Body<'_>) -> Option<vtnt_wire::ipopt::RecordRoute> {
    match b {
        Body::IcmpError { quote, .. } => quote.rr,
        _ => None,
    }
}

/// `icmpext_find`: find and walk the extension structure of any ICMP message.
pub fn icmpext_find(data: &[u8]) {
    if let Some(ext) = icmpext::find(data) {
        assert!(ext.as_bytes().len() <= data.len());
        walk(ext);
    }
}

fn walk(ext: icmpext::Extensions<'_>) {
    let mut total = 0;
    for o in ext.objects() {
        total += o.payload.len() + 4;
    }
    assert!(total <= ext.as_bytes().len());
    for lse in ext.mpls_stack() {
        let _ = (lse.label(), lse.tc(), lse.bottom(), lse.ttl());
    }
}
