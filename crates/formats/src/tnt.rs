//! [`TntAnnotations`]: a `vtnt-tnt` result as scamper-JSON extra fields, the layout of
//! docs/tnt.md: `"tnt"` on the trace object ([`vtnt_tnt::TraceAnnotation`]) and on each
//! hop object ([`vtnt_tnt::HopAnnotation`], parallel to the trace's `hops`). The CLI and
//! the unikernel print TNT results through this one type.

use alloc::string::String;
use alloc::vec;

use vtnt_record::{Hop, Record, Trace};
use vtnt_tnt::TntResult;

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
