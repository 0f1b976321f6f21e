//! The exit record: the guest's last console line on every platform,
//!
//! ```text
//! {"type":"exit","status":N,"reason":"R","guest_us":T,"steps_us":[S1,...,S9]}
//! ```
//!
//! `N` an [`exit::Status`](crate::exit::Status), `R` its reason, `T` guest microseconds
//! at the exit, `S` the [`steps`](crate::steps) (0: not reached). The kernel writes it
//! with [`ExitRecord::write`]; the host reads it back with [`ExitRecord::parse`], which
//! takes exactly what `write` writes and refuses anything else with an error naming the
//! field (never a panic: a console is the guest's to write, garbage included).

use crate::exit::Status;
use crate::steps::COUNT;
use core::fmt;

/// How every exit record begins (and how a host tells one from the other lines).
pub const PREFIX: &str = "{\"type\":\"exit\",";

/// The exit record, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitRecord {
    pub status: Status,
    /// Guest microseconds since the first instruction, at the exit.
    pub guest_us: u64,
    /// Guest microseconds at the end of each boot step (0: not reached).
    pub steps_us: [u64; COUNT],
}

/// Why a line is not an exit record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// It does not start with [`PREFIX`].
    NotExit,
    /// The field named is missing, misplaced or malformed.
    Field(&'static str),
    /// The status is not one of [`Status`]'s.
    UnknownStatus(u64),
    /// The reason is not the status's own.
    Reason,
    /// Something follows the record's closing brace.
    Trailing,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::NotExit => write!(f, "not an exit record (no `{PREFIX}`)"),
            RecordError::Field(name) => write!(f, "exit record: `{name}` missing or malformed"),
            RecordError::UnknownStatus(n) => write!(f, "exit record: unknown status {n}"),
            RecordError::Reason => write!(f, "exit record: the reason is not the status's"),
            RecordError::Trailing => write!(f, "exit record: text after its closing brace"),
        }
    }
}

impl ExitRecord {
    /// Writes the record (without a line end).
    pub fn write<W: fmt::Write>(&self, f: &mut W) -> fmt::Result {
        write(f, self.status, self.guest_us, self.steps_us.iter().copied())
    }

    /// Reads a record [`ExitRecord::write`] wrote (a trailing `\r` or `\n` is allowed).
    pub fn parse(line: &str) -> Result<ExitRecord, RecordError> {
        let rest = line.trim_end_matches(['\r', '\n']);
        let mut c = Cursor(rest.strip_prefix(PREFIX).ok_or(RecordError::NotExit)?);
        c.tag("\"status\":", "status")?;
        let code = c.number("status")?;
        let status = u8::try_from(code)
            .ok()
            .and_then(Status::from_code)
            .ok_or(RecordError::UnknownStatus(code))?;
        c.tag(",\"reason\":\"", "reason")?;
        let reason = c.until('"', "reason")?;
        if reason != status.reason() {
            return Err(RecordError::Reason);
        }
        c.tag(",\"guest_us\":", "guest_us")?;
        let guest_us = c.number("guest_us")?;
        c.tag(",\"steps_us\":[", "steps_us")?;
        let mut steps_us = [0u64; COUNT];
        for (i, s) in steps_us.iter_mut().enumerate() {
            if i > 0 {
                c.tag(",", "steps_us")?;
            }
            *s = c.number("steps_us")?;
        }
        c.tag("]}", "steps_us")?;
        if !c.0.is_empty() {
            return Err(RecordError::Trailing);
        }
        Ok(ExitRecord {
            status,
            guest_us,
            steps_us,
        })
    }

    /// The last exit record among console `lines` (earlier ones, if any, were not the
    /// end); `NotExit` when there is none.
    pub fn last<'a>(
        lines: impl DoubleEndedIterator<Item = &'a str>,
    ) -> Result<ExitRecord, RecordError> {
        let mut lines = lines.rev();
        match lines.find(|l| l.starts_with(PREFIX)) {
            Some(l) => ExitRecord::parse(l),
            None => Err(RecordError::NotExit),
        }
    }
}

/// Writes an [`ExitRecord`] from its parts (without a line end; `steps_us` yields
/// [`COUNT`] values): the guest's way, which
/// reads the steps as it writes them instead of gathering them first (the job image has
/// bytes to spare, not tens of them).
pub fn write<W: fmt::Write>(
    f: &mut W,
    status: Status,
    guest_us: u64,
    steps_us: impl Iterator<Item = u64>,
) -> fmt::Result {
    // PREFIX spelled out: one formatting argument fewer in the guest's image
    write!(
        f,
        "{{\"type\":\"exit\",\"status\":{},\"reason\":\"{}\",\"guest_us\":{guest_us},\"steps_us\":[",
        status as u8,
        status.reason(),
    )?;
    for (i, us) in steps_us.enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{us}")?;
    }
    f.write_str("]}")
}

/// What is left of the line being parsed.
struct Cursor<'a>(&'a str);

impl<'a> Cursor<'a> {
    fn tag(&mut self, tag: &str, field: &'static str) -> Result<(), RecordError> {
        self.0 = self.0.strip_prefix(tag).ok_or(RecordError::Field(field))?;
        Ok(())
    }

    /// A decimal number (1 to 20 digits, no sign, within `u64`).
    fn number(&mut self, field: &'static str) -> Result<u64, RecordError> {
        let end = self
            .0
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(self.0.len());
        let (digits, rest) = self.0.split_at(end);
        let n = digits.parse().map_err(|_| RecordError::Field(field))?;
        self.0 = rest;
        Ok(n)
    }

    fn until(&mut self, end: char, field: &'static str) -> Result<&'a str, RecordError> {
        let at = self.0.find(end).ok_or(RecordError::Field(field))?;
        let (word, rest) = self.0.split_at(at);
        self.0 = &rest[end.len_utf8()..];
        Ok(word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;

    fn sample() -> ExitRecord {
        ExitRecord {
            status: Status::NoArp,
            guest_us: 12_345,
            steps_us: [10, 20, 30, 40, 50, 60, 0, 0, u64::MAX],
        }
    }

    fn text(r: &ExitRecord) -> String {
        let mut s = String::new();
        r.write(&mut s).unwrap();
        s
    }

    #[test]
    fn what_the_guest_writes_the_host_reads() {
        let s = text(&sample());
        assert_eq!(
            s,
            "{\"type\":\"exit\",\"status\":4,\"reason\":\"no-arp\",\"guest_us\":12345,\
             \"steps_us\":[10,20,30,40,50,60,0,0,18446744073709551615]}"
        );
        assert_eq!(ExitRecord::parse(&s), Ok(sample()));
        assert_eq!(ExitRecord::parse(&(s.clone() + "\r\n")), Ok(sample()));
        for status in Status::ALL {
            let r = ExitRecord { status, ..sample() };
            assert_eq!(ExitRecord::parse(&text(&r)), Ok(r));
        }
    }

    #[test]
    fn bad_records_are_errors_naming_the_field() {
        let ok = text(&sample());
        let cases = [
            ("vtnt-kernel 0.1.0 booting", RecordError::NotExit),
            ("{\"type\":\"exit\"}", RecordError::NotExit),
            ("{\"type\":\"exit\",}", RecordError::Field("status")),
            (
                "{\"type\":\"exit\",\"status\":9,\"reason\":\"x\"",
                RecordError::UnknownStatus(9),
            ),
            (
                "{\"type\":\"exit\",\"status\":99999999999999999999999",
                RecordError::Field("status"),
            ),
            (
                "{\"type\":\"exit\",\"status\":4,\"reason\":\"ok\",\"guest_us\":1",
                RecordError::Reason,
            ),
            (
                "{\"type\":\"exit\",\"status\":0,\"reason\":\"ok\",\"guest_us\":-1",
                RecordError::Field("guest_us"),
            ),
            (
                "{\"type\":\"exit\",\"status\":0,\"reason\":\"ok\",\"guest_us\":1,\"steps_us\":[1,2]}",
                RecordError::Field("steps_us"),
            ),
        ];
        for (line, want) in cases {
            assert_eq!(ExitRecord::parse(line), Err(want), "{line}");
        }
        assert_eq!(
            ExitRecord::parse(&(ok.clone() + " ")),
            Err(RecordError::Trailing)
        );
    }

    /// Every prefix, every single-byte change and a stream of pseudo-random lines parse to
    /// a value or an error, never a panic; only the whole record parses.
    #[test]
    fn mangled_records_never_panic() {
        let ok = text(&sample());
        for cut in 0..ok.len() {
            assert!(ExitRecord::parse(&ok[..cut]).is_err(), "{}", &ok[..cut]);
        }
        let alphabet = b"{}[]\":,0123456789abexitsu\xc3\xa9 ";
        let mut bytes = ok.clone().into_bytes();
        for at in 0..bytes.len() {
            let orig = bytes[at];
            for &b in alphabet {
                bytes[at] = b;
                if let Ok(s) = core::str::from_utf8(&bytes) {
                    let _ = ExitRecord::parse(s);
                }
            }
            bytes[at] = orig;
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            let mut line = String::from(PREFIX);
            for _ in 0..(x % 60) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                line.push(alphabet[(x % 24) as usize] as char);
            }
            let _ = ExitRecord::parse(&line);
        }
    }

    #[test]
    fn the_last_record_counts() {
        let first = text(&ExitRecord {
            status: Status::Ok,
            ..sample()
        });
        let last = text(&sample());
        let lines = ["boot", first.as_str(), "x", last.as_str(), "after"];
        assert_eq!(ExitRecord::last(lines.into_iter()), Ok(sample()));
        assert_eq!(
            ExitRecord::last(["boot", "x"].into_iter()),
            Err(RecordError::NotExit)
        );
    }
}
