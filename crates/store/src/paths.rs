//! A trace's path as the listings and the diff read it: the first reply address per TTL
//! from its first hop, `*` where none came, from its hops aggregated in SQL.

/// The hop addresses of `group_concat(probe_ttl || ' ' || addr)`, one per TTL from
/// `firsthop` (the first reply at a TTL; `*` where none came).
pub(crate) fn path_of(firsthop: u8, hops: Option<String>) -> Vec<String> {
    let mut path: Vec<String> = Vec::new();
    for h in hops.iter().flat_map(|h| h.split(',')) {
        let Some((ttl, addr)) = h.split_once(' ') else {
            continue;
        };
        let Some(slot) = ttl
            .parse::<usize>()
            .ok()
            .and_then(|t| t.checked_sub(usize::from(firsthop)))
        else {
            continue;
        };
        if slot >= path.len() {
            path.resize(slot + 1, "*".into());
            path[slot] = addr.to_string();
        }
    }
    path
}

/// The SQL of a trace's hops as [`path_of`] reads them.
pub(crate) const HOPS_TEXT: &str = "(SELECT group_concat(h.probe_ttl || ' ' || h.addr, ',' \
     ORDER BY h.probe_ttl, h.i) FROM hops h WHERE h.trace_id = r.id)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fill_silent_ttls_and_keep_the_first_reply() {
        let p = path_of(
            1,
            Some("1 10.0.0.1,3 10.0.0.3,3 10.0.0.9,4 10.0.0.4".into()),
        );
        assert_eq!(p, ["10.0.0.1", "*", "10.0.0.3", "10.0.0.4"]);
        assert!(path_of(2, None).is_empty());
        assert_eq!(path_of(2, Some("1 x,2 y".into())), ["y"]);
    }
}
