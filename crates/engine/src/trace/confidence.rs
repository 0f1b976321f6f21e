//! scamper's `-c confidence` table (`k()` in `scamper_trace_do.c`): how many probes a hop
//! takes before a load balancer with one more interface than those seen is ruled out at
//! 95 or 99 % confidence. The 95 % column is the MDA stopping rule's published numbers
//! (Augustin et al.), the 99 % one scamper's own; both as scamper 20211212 has them.

/// Probes needed at `n` = interfaces seen + 1 (at least 2), for 95 and 99 %; from n = 2.
const K: [[u8; 2]; 24] = [
    [6, 8],
    [11, 15],
    [16, 21],
    [21, 28],
    [27, 36],
    [33, 43],
    [38, 51],
    [44, 58],
    [51, 66],
    [57, 74],
    [63, 82],
    [70, 90],
    [76, 98],
    [83, 106],
    [90, 115],
    [96, 123],
    [103, 132],
    [110, 140],
    [117, 149],
    [124, 157],
    [131, 166],
    [138, 175],
    [145, 183],
    [152, 192],
];

/// Probes a hop takes at `level` (95 or 99) with `seen` interfaces answering so far;
/// `None` beyond the table (more than 24 interfaces), where scamper ends the hop with its
/// next reply.
pub(super) fn probes(level: u8, seen: usize) -> Option<u8> {
    let n = 1 + seen.max(1);
    let row = K.get(n - 2)?;
    Some(row[usize::from(level == 99)])
}

#[cfg(test)]
mod tests {
    use super::probes;

    #[test]
    fn counts_follow_the_interfaces_seen() {
        // none or one interface: n = 2; each new one steps n
        assert_eq!(
            (probes(95, 0), probes(95, 1), probes(99, 1)),
            (Some(6), Some(6), Some(8))
        );
        assert_eq!((probes(95, 2), probes(99, 3)), (Some(11), Some(21)));
        assert_eq!((probes(95, 24), probes(99, 24)), (Some(152), Some(192)));
        assert_eq!(probes(95, 25), None);
    }
}
