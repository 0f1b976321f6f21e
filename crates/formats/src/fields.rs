//! [`TntFields`]: the `"tnt"` fields of one trace or ping object as JSON text, kept byte
//! for byte, so a record read from one format is written to the other with its
//! annotations unchanged (`vtnt convert` JSON -> warts -> JSON gives the same bytes).
//!
//! In JSON they are the `"tnt"` field of the object and of each hop object. In warts they
//! ride in the record's list: a list object named [`TNT_LIST`] whose description is
//! [`TntFields::descr`], `{"tnt":..,"hops":[..|null,..]}` (`hops` only when a hop has
//! one), one list per annotated record. scamper's tools read and copy such lists like any
//! other (a list's description is free text, and records that name different lists keep
//! them apart); a description holds at most 65,534 bytes, warts' limit on a list's
//! parameters.

use alloc::string::String;
use alloc::vec::Vec;

use vtnt_record::{Hop, Record, Trace};

use crate::json_line::Extra;
use crate::Annotate;

/// The name of the warts lists that carry annotations.
pub const TNT_LIST: &str = "vtnt-tnt";

/// The `"tnt"` values of a record and of its hops, as compact JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TntFields {
    /// The record object's `"tnt"`.
    pub record: Option<String>,
    /// Each hop's `"tnt"`, parallel to the trace's `hops` (empty for pings).
    pub hops: Vec<Option<String>>,
}

fn tnt(v: &Option<String>) -> Option<Extra> {
    v.as_ref().map(|s| alloc::vec![("tnt", s.clone())])
}

impl Annotate for TntFields {
    fn record_extra(&self, _record: &Record) -> Option<Extra> {
        tnt(&self.record)
    }
    fn hop_extra(&self, _trace: &Trace, index: usize, _hop: &Hop) -> Option<Extra> {
        tnt(self.hops.get(index)?)
    }
}

impl TntFields {
    /// The `"tnt"` fields `ann` gives `r` and its hops; `None` when it gives none.
    pub fn from_annotate(r: &Record, ann: &dyn Annotate) -> Option<TntFields> {
        let pick = |e: Option<Extra>| {
            e.into_iter()
                .flatten()
                .find_map(|(k, v)| (k == "tnt").then_some(v))
        };
        let hops = match r {
            Record::Trace(t) => t
                .hops
                .iter()
                .enumerate()
                .map(|(i, h)| pick(ann.hop_extra(t, i, h)))
                .collect(),
            Record::Ping(_) => Vec::new(),
        };
        let f = TntFields {
            record: pick(ann.record_extra(r)),
            hops,
        };
        (f.record.is_some() || f.hops.iter().any(Option::is_some)).then_some(f)
    }

    /// The description of the warts list that carries these fields.
    pub fn descr(&self) -> String {
        let mut s = String::from("{");
        if let Some(r) = &self.record {
            s.push_str("\"tnt\":");
            s.push_str(r);
        }
        if self.hops.iter().any(Option::is_some) {
            if self.record.is_some() {
                s.push(',');
            }
            s.push_str("\"hops\":[");
            for (i, h) in self.hops.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(h.as_deref().unwrap_or("null"));
            }
            s.push(']');
        }
        s.push('}');
        s
    }

    /// Parses a list description written by [`TntFields::descr`]; `hops`: the record's
    /// hop count, which the description's `hops` must not exceed.
    #[cfg(feature = "std")]
    pub fn from_descr(descr: &str, hops: usize) -> Result<TntFields, String> {
        use serde_json::value::RawValue;
        use std::collections::BTreeMap;
        let top: BTreeMap<String, &RawValue> =
            serde_json::from_str(descr).map_err(|e| format!("not a JSON object: {e}"))?;
        if let Some(k) = top.keys().find(|k| *k != "tnt" && *k != "hops") {
            return Err(format!("unknown key {k:?}"));
        }
        let mut f = TntFields {
            record: top.get("tnt").map(|r| r.get().to_string()),
            hops: alloc::vec![None; hops],
        };
        if let Some(list) = top.get("hops") {
            let list: Vec<&RawValue> =
                serde_json::from_str(list.get()).map_err(|e| format!("hops: not an array: {e}"))?;
            if list.len() > hops {
                return Err(format!("{} hop annotations for {hops} hops", list.len()));
            }
            for (slot, h) in f.hops.iter_mut().zip(list) {
                *slot = (h.get() != "null").then(|| h.get().to_string());
            }
        }
        Ok(f)
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn descriptions_read_back_byte_for_byte() {
        let f = TntFields {
            record: Some(r#"{"role":"initial","version":2}"#.into()),
            hops: alloc::vec![None, Some(r#"{"te":254,"er":null}"#.into()), None],
        };
        let d = f.descr();
        assert_eq!(
            d,
            r#"{"tnt":{"role":"initial","version":2},"hops":[null,{"te":254,"er":null},null]}"#
        );
        assert_eq!(TntFields::from_descr(&d, 3).unwrap(), f);
        let ping = TntFields {
            record: Some(r#"{"role":"ping","purpose":"hop"}"#.into()),
            hops: Vec::new(),
        };
        assert_eq!(TntFields::from_descr(&ping.descr(), 0).unwrap(), ping);
        for (bad, why) in [
            ("tnt", "not a JSON object"),
            (r#"{"tnt":1,"x":2}"#, "unknown key"),
            (r#"{"hops":3}"#, "not an array"),
            (r#"{"hops":[1,2,3,4]}"#, "4 hop annotations for 3 hops"),
        ] {
            let e = TntFields::from_descr(bad, 3).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
