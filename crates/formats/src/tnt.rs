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

/// The role a record's `"tnt"` field gives it; the error says what is wrong.
#[cfg(feature = "std")]
pub fn record_role(tnt: &str) -> Result<RecordRole, String> {
    serde_json::from_str(tnt).map_err(|e| e.to_string())
}
