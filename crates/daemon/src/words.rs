//! A command line's words as scamper's control socket splits them: on spaces, a word in
//! double quotes kept whole (spaces included, quotes dropped).

/// The words of `line`; `Err` for a quote left open.
pub fn split_words(line: &str) -> Result<Vec<String>, &'static str> {
    let mut words = Vec::new();
    let mut rest = line.trim_start_matches([' ', '\t']);
    while !rest.is_empty() {
        let (word, after) = match rest.strip_prefix('"') {
            Some(q) => {
                let end = q.find('"').ok_or("a double quote is not closed")?;
                (&q[..end], &q[end + 1..])
            }
            None => {
                let end = rest.find([' ', '\t']).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        words.push(word.to_string());
        rest = after.trim_start_matches([' ', '\t']);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_on_spaces_and_keep_quoted_ones_whole() {
        assert_eq!(
            split_words("  trace  -q 1\t192.0.2.1 ").unwrap(),
            ["trace", "-q", "1", "192.0.2.1"]
        );
        assert_eq!(
            split_words(r#"attach "a b" c"#).unwrap(),
            ["attach", "a b", "c"]
        );
        assert!(split_words("").unwrap().is_empty());
        assert!(split_words(r#"ping "192.0.2.1"#).is_err());
    }
}
