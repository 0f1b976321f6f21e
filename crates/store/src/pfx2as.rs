//! Prefix-to-AS files in CAIDA's format (`routeviews-rv2-*.pfx2as`): one prefix per line,
//! `address<TAB>length<TAB>origin`, where the origin is an AS number, several joined by
//! `_` (the prefix is announced by each: multi-origin) or by `,` (an AS set). Blank lines
//! and `#` comments are skipped; IPv4 only.
//!
//! [`Pfx2As`] answers a longest-prefix match in one binary search: nested prefixes are
//! flattened into disjoint segments, each with the origin of the most specific prefix
//! that covers it. The store keeps those segments (`as_segments`) and gives every address
//! it holds the origin they say (`addresses.asn`, the origin's text as the file writes
//! it); [`Store::load_pfx2as`] replaces them and annotates every address again.

use std::io::{BufRead, BufReader, Read};
use std::net::Ipv4Addr;
use std::path::Path;

use rusqlite::params;
use vtnt_policy::Prefix;

use crate::error::{Position, Result, StoreError};
use crate::Store;

/// One line of a prefix-to-AS file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub prefix: Prefix,
    /// The origin as written (`64500`, `64500_64501`, `64500,64501`).
    pub origin: String,
}

/// A line that is not a prefix-to-AS entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub why: String,
}

/// Reads every entry of a prefix-to-AS text; the first bad line is the error.
pub fn parse(input: impl BufRead) -> std::result::Result<Vec<Entry>, ParseError> {
    let mut entries = Vec::new();
    let mut lines_of = std::collections::HashMap::new();
    for (i, line) in input.split(b'\n').enumerate() {
        let n = i + 1;
        let bad = |why: String| ParseError { line: n, why };
        let line = line.map_err(|e| bad(format!("reading: {e}")))?;
        let text = std::str::from_utf8(&line).map_err(|_| bad("not UTF-8".into()))?;
        let text = text.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let entry = parse_line(text).map_err(bad)?;
        if let Some(first) = lines_of.insert(entry.prefix, n) {
            return Err(bad(format!(
                "{} is listed on line {first} already",
                entry.prefix
            )));
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn parse_line(text: &str) -> std::result::Result<Entry, String> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [addr, len, origin] = fields[..] else {
        return Err(format!(
            "`{text}`: want three fields, address, length and origin AS"
        ));
    };
    let a: Ipv4Addr = addr.parse().map_err(|_| {
        if addr.contains(':') {
            format!("`{addr}`: IPv6 prefixes are not supported (the store annotates IPv4)")
        } else {
            format!("`{addr}` is not an IPv4 address")
        }
    })?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("`{len}` is not a prefix length (0..=32)"))?;
    let prefix = Prefix::new(a, len).expect("length checked");
    if prefix.addr() != a {
        return Err(format!(
            "{a}/{len} has host bits set (the prefix is {prefix})"
        ));
    }
    let asn_ok = |s: &str| !s.is_empty() && s.len() <= 10 && s.parse::<u32>().is_ok();
    if !origin.split(['_', ',']).all(asn_ok) {
        return Err(format!(
            "`{origin}` is not an origin (AS numbers, joined by `_` or `,`)"
        ));
    }
    Ok(Entry {
        prefix,
        origin: origin.to_string(),
    })
}

/// First and last address of a prefix, as numbers.
fn bounds(p: &Prefix) -> (u32, u32) {
    let first = u32::from(p.addr());
    let host = u32::MAX.checked_shr(u32::from(p.bits())).unwrap_or(0);
    (first, first | host)
}

/// Disjoint address ranges, each with the origin of its most specific prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pfx2As {
    /// `(first, last, origin)`, sorted, disjoint.
    segments: Vec<(u32, u32, String)>,
}

impl Pfx2As {
    /// Flattens `entries` (CIDR prefixes nest or are disjoint).
    pub fn new(entries: &[Entry]) -> Pfx2As {
        let mut spans: Vec<(u32, u32, &str)> = entries
            .iter()
            .map(|e| {
                let (f, l) = bounds(&e.prefix);
                (f, l, e.origin.as_str())
            })
            .collect();
        // outer prefixes before the ones they hold
        spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut segments: Vec<(u32, u32, String)> = Vec::new();
        let mut emit = |first: u64, last: u32, origin: &str| {
            if first <= u64::from(last) {
                segments.push((first as u32, last, origin.to_string()));
            }
        };
        // the prefixes holding the next address to cover, innermost last
        let mut open: Vec<(u32, &str)> = Vec::new();
        let mut next: u64 = 0;
        for (first, last, origin) in spans {
            while let Some(&(end, o)) = open.last() {
                if end >= first {
                    break;
                }
                emit(next, end, o);
                next = u64::from(end) + 1;
                open.pop();
            }
            if let Some(&(_, o)) = open.last() {
                if u64::from(first) > next {
                    emit(next, first - 1, o);
                }
            }
            next = u64::from(first);
            open.push((last, origin));
        }
        while let Some((end, o)) = open.pop() {
            emit(next, end, o);
            next = u64::from(end) + 1;
        }
        Pfx2As { segments }
    }

    /// The origin of the most specific prefix holding `a`.
    pub fn lookup(&self, a: Ipv4Addr) -> Option<&str> {
        let a = u32::from(a);
        let i = self.segments.partition_point(|s| s.0 <= a).checked_sub(1)?;
        let (_, last, origin) = &self.segments[i];
        (a <= *last).then_some(origin.as_str())
    }

    /// The disjoint segments, `(first, last, origin)`.
    pub fn segments(&self) -> &[(u32, u32, String)] {
        &self.segments
    }
}

/// What loading a prefix-to-AS file did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    pub file: String,
    pub prefixes: usize,
    pub segments: usize,
    /// Addresses in the store, and those with an AS now.
    pub addresses: u64,
    pub annotated: u64,
}

impl Store {
    /// Replaces the store's prefix-to-AS table with the file at `path` (gzip allowed) and
    /// annotates every address again, in one transaction. The table is the store's, not a
    /// tenant's: public routing data every tenant's answers use.
    pub fn load_pfx2as(&mut self, path: &Path) -> Result<LoadReport> {
        let io = |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        let sha = crate::import::file_sha256(path)?;
        let mut raw = BufReader::new(std::fs::File::open(path).map_err(io)?);
        let gz = raw.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        let input: Box<dyn Read> = if gz {
            Box::new(flate2::read::MultiGzDecoder::new(raw))
        } else {
            Box::new(raw)
        };
        let entries = parse(BufReader::new(input)).map_err(|e| StoreError::Corrupt {
            path: path.to_path_buf(),
            at: Position::Line(e.line),
            why: format!("{}; nothing was loaded", e.why),
        })?;
        let table = Pfx2As::new(&entries);
        let what = format!("{}: loading {}", self.path, path.display());
        let tx = self.conn.transaction().map_err(StoreError::sql(&what))?;
        (|| {
            tx.execute("DELETE FROM as_segments", [])?;
            let mut ins = tx
                .prepare("INSERT INTO as_segments (first_n, last_n, origin) VALUES (?1, ?2, ?3)")?;
            for (f, l, o) in table.segments() {
                ins.execute(params![f, l, o])?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO as_source (id, file, sha256, prefixes, loaded_us)
                 VALUES (1, ?1, ?2, ?3, ?4)",
                params![
                    path.display().to_string(),
                    sha,
                    entries.len(),
                    crate::now_us()
                ],
            )?;
            tx.execute(
                "UPDATE addresses SET asn = (SELECT CASE WHEN s.last_n >= addresses.addr_n
                     THEN s.origin END FROM as_segments s WHERE s.first_n <= addresses.addr_n
                     ORDER BY s.first_n DESC LIMIT 1)",
                [],
            )?;
            Ok::<_, rusqlite::Error>(())
        })()
        .map_err(StoreError::sql(&what))?;
        let (addresses, annotated): (u64, u64) = tx
            .query_row("SELECT count(*), count(asn) FROM addresses", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(StoreError::sql(&what))?;
        tx.commit().map_err(StoreError::sql(&what))?;
        Ok(LoadReport {
            file: path.display().to_string(),
            prefixes: entries.len(),
            segments: table.segments().len(),
            addresses,
            annotated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Pfx2As {
        Pfx2As::new(&parse(text.as_bytes()).unwrap())
    }

    #[test]
    fn the_most_specific_prefix_wins() {
        let t = table(
            "# CAIDA routeviews\n10.0.0.0\t8\t100\n10.1.0.0\t16\t200_201\n10.1.2.0\t24\t300,301\n\
             10.255.255.255\t32\t400\n192.0.2.0 24 64500\n",
        );
        for (a, want) in [
            ("9.255.255.255", None),
            ("10.0.0.0", Some("100")),
            ("10.1.0.0", Some("200_201")),
            ("10.1.1.255", Some("200_201")),
            ("10.1.2.7", Some("300,301")),
            ("10.1.3.0", Some("200_201")),
            ("10.2.0.0", Some("100")),
            ("10.255.255.254", Some("100")),
            ("10.255.255.255", Some("400")),
            ("11.0.0.0", None),
            ("192.0.2.200", Some("64500")),
        ] {
            assert_eq!(t.lookup(a.parse().unwrap()), want, "{a}");
        }
        let everything = table("0.0.0.0 0 1\n255.255.255.255 32 2\n0.0.0.0 32 3\n");
        assert_eq!(everything.lookup("0.0.0.0".parse().unwrap()), Some("3"));
        assert_eq!(everything.lookup("0.0.0.1".parse().unwrap()), Some("1"));
        assert_eq!(
            everything.lookup("255.255.255.255".parse().unwrap()),
            Some("2")
        );
        assert_eq!(everything.segments().len(), 3);
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, line, why) in [
            ("10.0.0.0\t8\n", 1, "three fields"),
            ("\n10.0.0.0\t33\t1\n", 2, "prefix length"),
            ("10.0.0.1\t8\t1\n", 1, "host bits"),
            ("2001:db8::\t32\t1\n", 1, "IPv6"),
            ("10.0.0.0\t8\tAS1\n", 1, "not an origin"),
            ("10.0.0.0\t8\t1__2\n", 1, "not an origin"),
            ("10.0.0.0\t8\t99999999999\n", 1, "not an origin"),
            ("10.0.0.0\t8\t1\n#\n10.0.0.0\t8\t2\n", 3, "line 1 already"),
        ] {
            let e = parse(text.as_bytes()).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e:?}");
            assert!(e.why.contains(why), "{text:?}: {e:?}");
        }
        let e = parse(&b"10.0.0.0\t8\t\xff\n"[..]).unwrap_err();
        assert_eq!((e.line, e.why.as_str()), (1, "not UTF-8"));
    }
}
