//! Rust source as tokens, enough for the architecture checks: identifiers, `::`, string
//! literals and single punctuation, with their line; comments, characters, lifetimes and
//! numbers dropped. No `syn`: the checks need paths and item names, not a syntax tree.

/// One token of a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    Str(String),
    PathSep,
    Punct(char),
}

/// The tokens of `src`, each with its 1-based line.
pub fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    break;
                } else if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' {
            let (s, next, lines) = string(&c, i + 1, 0);
            out.push((Tok::Str(s), line));
            line += lines;
            i = next;
        } else if ch == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw_prefix = matches!(word.as_str(), "r" | "br" | "cr");
            if raw_prefix && (at(i) == '"' || (at(i) == '#' && matches!(at(i + 1), '#' | '"'))) {
                let mut hashes = 0;
                while at(i) == '#' {
                    hashes += 1;
                    i += 1;
                }
                let (s, next, lines) = string(&c, i + 1, hashes);
                out.push((Tok::Str(s), line));
                line += lines;
                i = next;
            } else if word == "r" && at(i) == '#' {
                // A raw identifier: r#type.
                let start = i + 1;
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                out.push((Tok::Ident(c[start..i].iter().collect()), line));
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                let (s, next, lines) = string(&c, i + 1, 0);
                out.push((Tok::Str(s), line));
                line += lines;
                i = next;
            } else if word == "b" && at(i) == '\'' {
                i += if at(i + 1) == '\\' { 3 } else { 2 };
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else {
                out.push((Tok::Ident(word), line));
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((Tok::PathSep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// A string literal's text from `i` (after its quote) to its end: `(text, next index,
/// newlines in it)`. `hashes` > 0 or a raw prefix: no escapes, ends at `"` and the hashes.
fn string(c: &[char], mut i: usize, hashes: usize) -> (String, usize, usize) {
    let (start, mut lines) = (i, 0);
    let raw = hashes > 0;
    while i < c.len() {
        match c[i] {
            '\\' if !raw => i += 2,
            '"' if (0..hashes).all(|h| c.get(i + 1 + h) == Some(&'#')) => {
                return (c[start..i].iter().collect(), i + 1 + hashes, lines);
            }
            ch => {
                lines += usize::from(ch == '\n');
                i += 1;
            }
        }
    }
    (c[start..].iter().collect(), i, lines)
}

#[test]
fn tokens_skip_comments_strings_and_lifetimes() {
    let src = "// crate::a\nuse crate::b; /* crate::c\n */ let s = \"crate::d\"; fn f<'a>(x: &'a u8) -> char { '\"' }\nr#\"crate::e\"#";
    let idents: Vec<String> = tokens(src)
        .into_iter()
        .filter_map(|(t, l)| match t {
            Tok::Ident(s) => Some(format!("{s}@{l}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        idents,
        ["use@2", "crate@2", "b@2", "let@3", "s@3", "fn@3", "f@3", "x@3", "u8@3", "char@3"]
    );
}
