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
    if let Ok(h) = vtnt_wire::ipv6::header(data) {
        assert!(h.flow_label <= vtnt_wire::ipv6::FLOW_LABEL_MAX);
        assert!(h.header_len <= data.len());
    }
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

/// `icmpext_find`: find and walk the extension structure of any ICMP message, read as
/// ICMPv4 and as ICMPv6.
pub fn icmpext_find(data: &[u8]) {
    for ext in [icmpext::find(data), icmpext::find_v6(data)]
        .into_iter()
        .flatten()
    {
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

/// `reassembly_push`: any bytes as a run of packets (each: two bytes of length, big
/// endian, one of time step in milliseconds, then the packet) into a reassembler of four
/// datagrams; what comes out whole is one valid, unfragmented IPv4 packet.
pub fn reassembly_push(mut data: &[u8]) {
    use vtnt_wire::reassembly::{Push, Reassembly};
    let mut r = Reassembly::new(4, 100_000);
    let mut now = 0u64;
    while let [a, b, step, rest @ ..] = data {
        let n = usize::from(u16::from_be_bytes([*a, *b])).min(rest.len());
        let (packet, next) = rest.split_at(n);
        data = next;
        now += u64::from(*step) * 1_000;
        if let Push::Done(p) = r.push(packet, now) {
            let hlen = usize::from(p[0] & 0x0f) * 4;
            assert!(p.len() <= 65_535 && hlen >= 20 && p.len() >= hlen);
            assert_eq!(usize::from(u16::from_be_bytes([p[2], p[3]])), p.len());
            assert_eq!(p[6] & 0x3f, 0, "more-fragments or offset left");
            assert_eq!(p[7], 0, "offset left");
            assert_eq!(
                vtnt_wire::checksum::sum(&p[..hlen]),
                0xffff,
                "header checksum"
            );
        }
        assert!(r.pending() <= 4);
    }
}
