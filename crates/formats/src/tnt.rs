//! [`TntAnnotations`]: a `vtnt-tnt` result as scamper-JSON extra fields, the layout of
//! docs/tnt.md: `"tnt"` on the trace object ([`vtnt_tnt::TraceAnnotation`]) and on each
//! hop object ([`vtnt_tnt::HopAnnotation`], parallel to the trace's `hops`); and
//! [`tnt_records`], every record of a result with its `"tnt"` field, the initial trace
//! first. The CLI and the unikernel print TNT results through these.

use alloc::string::String;
use alloc::vec;

use vtnt_record::{Hop, Record, Trace};
use vtnt_tnt::{RecordRole, TntResult};

use crate::json_line::Extra;
use crate::Annotate;

/// The annotations of one TNT result; write `result.trace` with it.
#[derive(Debug, Clone, Copy)]
pub struct TntAnnotations<'a>(pub &'a TntResult);

/// `"tnt"`: a value serialized as compact JSON (fields in their declaration order).
fn tnt_field(json: Result<String, serde_json::Error>) -> Option<Extra> {
    Some(vec![("tnt", json.ok()?)])
}

impl Annotate for TntAnnotations<'_> {
    fn record_extra(&self, _record: &Record) -> Option<Extra> {
        tnt_field(serde_json::to_string(&self.0.trace_annotation()))
    }

    fn hop_extra(&self, _trace: &Trace, index: usize, _hop: &Hop) -> Option<Extra> {
        tnt_field(serde_json::to_string(self.0.hops.get(index)?))
    }
}

/// A ping's or revelation trace's `"tnt"`: its role.
#[derive(Debug, Clone, Copy)]
pub struct RoleAnnotation<'a>(pub &'a RecordRole);

impl Annotate for RoleAnnotation<'_> {
    fn record_extra(&self, _record: &Record) -> Option<Extra> {
        tnt_field(serde_json::to_string(self.0))
    }
}

/// Calls `f` with every record of `r` and its annotations, in the order they are
/// written: the initial trace (none when it failed), then the pings and revelation
/// traces the target started ([`TntResult::measurements`]).
pub fn tnt_records(r: &TntResult, mut f: impl FnMut(&Record, &dyn Annotate)) {
    if let Some(t) = &r.trace {
        f(&Record::Trace(t.clone()), &TntAnnotations(r));
    }
    for m in &r.measurements {
        f(&m.record, &RoleAnnotation(&m.role));
    }
}

/// The role a record's `"tnt"` field gives it; the error says what is wrong. An
/// annotation of layout version 1 (vTNT wrote initial traces only) is an initial trace's.
#[cfg(feature = "std")]
pub fn record_role(tnt: &str) -> Result<RecordRole, String> {
    serde_json::from_str(tnt).or_else(|e| {
        let v: serde_json::Value = serde_json::from_str(tnt).map_err(|_| e.to_string())?;
        match (v.get("role"), v.get("version")) {
            (None, Some(version)) if version == 1 => Ok(RecordRole::Initial),
            _ => Err(e.to_string()),
        }
    })
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn roles_read_back_from_their_annotations() {
        let reveal = RecordRole::Reveal {
            anchor: "10.0.0.2".parse().unwrap(),
            egress: "10.0.0.5".parse().unwrap(),
            trigger: vtnt_tnt::Trigger::DupIp,
            method: vtnt_tnt::RevealMethod::Buddy,
            step: 1,
        };
        let json = serde_json::to_string(&reveal).unwrap();
        assert_eq!(
            json,
            r#"{"role":"reveal","anchor":"10.0.0.2","egress":"10.0.0.5","trigger":"dup-ip","method":"buddy","step":1}"#
        );
        assert_eq!(record_role(&json), Ok(reveal));
        let initial = r#"{"role":"initial","version":2,"tunnels":[],"probes":9}"#;
        assert_eq!(record_role(initial), Ok(RecordRole::Initial));
        let r = TntResult::failed("192.0.2.9".parse().unwrap(), vtnt_tnt::TntError::NotATrace);
        let written = serde_json::to_string(&r.trace_annotation()).unwrap();
        assert!(written.starts_with(r#"{"role":"initial","version":2,"#));
        assert_eq!(record_role(&written), Ok(RecordRole::Initial));
        assert_eq!(
            record_role(r#"{"version":1,"tunnels":[]}"#),
            Ok(RecordRole::Initial)
        );
        for bad in [
            r#"{"role":"pong"}"#,
            r#"{"role":"ping"}"#,
            r#"{"role":"reveal","anchor":"x","egress":"10.0.0.5"}"#,
            r#"{"version":2}"#,
            "[1]",
        ] {
            assert!(record_role(bad).is_err(), "{bad}");
        }
        assert!(record_role(r#"{"role":"pong"}"#)
            .unwrap_err()
            .contains("unknown variant `pong`"));
    }
}
