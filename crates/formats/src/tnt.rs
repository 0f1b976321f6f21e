//! [`TntAnnotations`]: a `vtnt-tnt` result as scamper-JSON extra fields, the layout of
//! docs/tnt.md: `"tnt"` on the trace object ([`vtnt_tnt::TraceAnnotation`]) and on each
//! hop object ([`vtnt_tnt::HopAnnotation`], parallel to the trace's `hops`). The CLI and
//! the unikernel print TNT results through this one type.

use alloc::string::String;

use serde_json::{Map, Value};
use vtnt_record::{Hop, Record, Trace};
use vtnt_tnt::TntResult;

use crate::Annotate;

/// The annotations of one TNT result; write `result.trace` with it.
#[derive(Debug, Clone, Copy)]
pub struct TntAnnotations<'a>(pub &'a TntResult);

fn tnt_field(v: Result<Value, serde_json::Error>) -> Option<Map<String, Value>> {
    let mut m = Map::new();
    m.insert("tnt".into(), v.ok()?);
    Some(m)
}

impl Annotate for TntAnnotations<'_> {
    fn record_extra(&self, _record: &Record) -> Option<Map<String, Value>> {
        tnt_field(serde_json::to_value(self.0.trace_annotation()))
    }

    fn hop_extra(&self, _trace: &Trace, index: usize, _hop: &Hop) -> Option<Map<String, Value>> {
        tnt_field(serde_json::to_value(self.0.hops.get(index)?))
    }
}
