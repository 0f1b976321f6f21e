//! `attach [cycle_id N] [descr S] [format warts|json] [list_id N] [monitor S] [name S]
//! [priority N]`: the parameters scamper's control socket takes (scamper_control.c's
//! `command_attach`), checked as it checks them, with its `ERR` texts.

use crate::encode::Format;

/// What a client asked for when it attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    pub format: Format,
    /// Its share of the probe rate and of the window, against other clients' (1 to
    /// 100,000; scamper's mixing priority).
    pub priority: u32,
    pub list_id: u32,
    pub cycle_id: u32,
    /// The list's name, in place of the one the daemon makes from the socket.
    pub name: Option<String>,
}

impl Attach {
    /// Parses the words after `attach`; `Err` is the line to answer.
    pub fn parse(args: &[String]) -> Result<Attach, String> {
        const KEYS: [&str; 7] = [
            "cycle_id", "descr", "format", "list_id", "monitor", "name", "priority",
        ];
        let mut values: [Option<&str>; 7] = [None; 7];
        let mut it = args.iter();
        while let Some(p) = it.next() {
            let slot = KEYS.iter().position(|k| p.eq_ignore_ascii_case(k));
            match (slot, it.next()) {
                (Some(i), Some(v)) if values[i].is_none() => values[i] = Some(v),
                _ => return Err(format!("ERR command attach param '{p}' failed")),
            }
        }
        let [cycle_id, _descr, format, list_id, _monitor, name, priority] = values;
        let number = |v: Option<&str>, lo: u64, hi: u64, default: u32, err: &str| match v {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .map(|n| n as u32)
                .ok_or_else(|| err.to_string()),
        };
        let cycle_id = number(cycle_id, 0, u32::MAX.into(), 1, "ERR invalid cycle_id")?;
        let format = match format.map(str::to_ascii_lowercase).as_deref() {
            None | Some("warts") => Format::Warts,
            Some("json") => Format::Json,
            Some(_) => return Err("ERR format must be warts or json".into()),
        };
        let list_id = number(list_id, 0, u32::MAX.into(), 0, "ERR invalid list_id")?;
        let priority = number(priority, 1, 100_000, 1, "ERR invalid priority")?;
        Ok(Attach {
            format,
            priority,
            list_id,
            cycle_id,
            name: name.map(String::from),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Attach, String> {
        let words = crate::split_words(line).unwrap();
        Attach::parse(&words)
    }

    #[test]
    fn every_parameter_scamper_takes_is_taken() {
        let a = parse(
            r#"cycle_id 7 descr "a list" FORMAT json list_id 3 monitor "m 1" name "x y" priority 5"#,
        )
        .unwrap();
        assert_eq!(
            a,
            Attach {
                format: Format::Json,
                priority: 5,
                list_id: 3,
                cycle_id: 7,
                name: Some("x y".into()),
            }
        );
        let d = parse("").unwrap();
        assert_eq!(
            (d.format, d.priority, d.list_id, d.cycle_id),
            (Format::Warts, 1, 0, 1)
        );
    }

    #[test]
    fn bad_parameters_get_scamper_s_words() {
        for (line, err) in [
            ("bogus 1", "ERR command attach param 'bogus' failed"),
            ("format", "ERR command attach param 'format' failed"),
            (
                "format json format warts",
                "ERR command attach param 'format' failed",
            ),
            ("format text", "ERR format must be warts or json"),
            ("priority 0", "ERR invalid priority"),
            ("priority 100001", "ERR invalid priority"),
            ("priority x", "ERR invalid priority"),
            ("cycle_id -1", "ERR invalid cycle_id"),
            ("list_id 4294967296", "ERR invalid list_id"),
        ] {
            assert_eq!(parse(line), Err(err.to_string()), "{line}");
        }
    }
}
