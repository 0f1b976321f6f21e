//! uuencode as scamper's control socket sends a warts object: lines of at most 45 bytes,
//! each a length character and 4 characters per 3 bytes (a short last group padded with
//! zero bytes), zero written as a backquote, and a closing line holding only a backquote.
//! sc_attach decodes each line and counts the characters (newlines included) against the
//! `DATA` header's length, which is [`encode`]'s `len()`.

/// Bytes per line (scamper's and uuencode(1)'s).
const LINE: usize = 45;

fn char_of(v: u8) -> char {
    match v & 0x3f {
        0 => '`',
        v => char::from(v + b' '),
    }
}

/// `data` uuencoded, every line ending in `\n`, the closing "`" line included.
pub fn encode(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len() / 3 * 4 + data.len() / LINE * 2 + 4);
    for line in data.chunks(LINE) {
        s.push(char_of(line.len() as u8));
        for g in line.chunks(3) {
            let b = [g[0], *g.get(1).unwrap_or(&0), *g.get(2).unwrap_or(&0)];
            s.push(char_of(b[0] >> 2));
            s.push(char_of((b[0] << 4) | (b[1] >> 4)));
            s.push(char_of((b[1] << 2) | (b[2] >> 6)));
            s.push(char_of(b[2]));
        }
        s.push('\n');
    }
    s.push_str("`\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inverse, for the tests: one uuencoded line's bytes.
    fn decode_line(l: &str) -> Vec<u8> {
        let v: Vec<u8> = l.bytes().map(|c| (c - b' ') & 0x3f).collect();
        let n = usize::from(v[0]);
        let mut out = Vec::new();
        for g in v[1..].chunks(4) {
            out.push((g[0] << 2) | (g[1] >> 4));
            out.push((g[1] << 4) | (g[2] >> 2));
            out.push((g[2] << 6) | g[3]);
        }
        out.truncate(n);
        out
    }

    #[test]
    fn a_cycle_stop_is_encoded_as_scamper_sends_it() {
        // scamper 20211212's control socket, `done` after `attach`: the cycle stop object
        let scamper = "1$@4`!`````D````!:P?<(0``\n`\n";
        let object = [
            0x12, 0x05, 0x00, 0x04, 0, 0, 0, 9, 0, 0, 0, 1, 0x6b, 0x07, 0xdc, 0x21, 0,
        ];
        assert_eq!(encode(&object), scamper);
        assert_eq!(decode_line(scamper.lines().next().unwrap()), object);
    }

    #[test]
    fn long_objects_split_at_45_bytes_and_round_trip() {
        for n in [0usize, 1, 2, 3, 44, 45, 46, 90, 1000] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let text = encode(&data);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(*lines.last().unwrap(), "`", "{n}");
            assert_eq!(lines.len(), n.div_ceil(LINE) + 1, "{n}");
            let back: Vec<u8> = lines[..lines.len() - 1]
                .iter()
                .flat_map(|l| decode_line(l))
                .collect();
            assert_eq!(back, data, "{n}");
            assert!(lines.iter().all(|l| l.len() <= 61), "{n}");
        }
    }
}
