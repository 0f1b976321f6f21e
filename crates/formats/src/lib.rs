//! scamper's formats for vTNT's measurement records: the JSON that `sc_warts2json`
//! (scamper 20211212) prints, and warts, scamper's binary format (warts(5)).
//!
//! - [`JsonWriter`] prints `cycle-start`, `trace`, `ping` and `cycle-stop` objects one per
//!   line, byte for byte as `sc_warts2json` does, with a hook ([`Annotate`]) to append extra
//!   fields to trace, ping and hop objects (TNT annotations go there).
//! - [`JsonReader`] / [`parse_json_line`] parse such lines (ours or scamper's) back into
//!   records; every line gives its own `Result`, errors carry the line number.
//! - [`WartsWriter`] writes list, cycle start/stop, trace (0x0006) and ping (0x0007)
//!   records that Debian's `sc_wartsdump`, `sc_warts2json` and `sc_analysis_dump` read.
//! - [`WartsReader`] reads ours and scamper's files, skips record types it does not know,
//!   and reports errors with the byte offset; it never panics on corrupt input.
//! - [`convert`] and friends turn one format into the other, annotations included: a
//!   record's `"tnt"` fields ([`TntFields`]) become a warts list of its own and back.
//!
//! ```
//! use vtnt_formats::{Cycle, JsonWriter, WartsReader, WartsWriter, Item};
//! let cycle = Cycle { list_name: "default".into(), hostname: Some("vm".into()),
//!                     start_time: 1_700_000_000, ..Cycle::default() };
//! let mut w = WartsWriter::new(Vec::new());
//! w.cycle_start(&cycle).unwrap();
//! w.cycle_stop(&Cycle { stop_time: 1_700_000_001, ..cycle.clone() }).unwrap();
//! let bytes = w.into_inner();
//! let mut json = JsonWriter::new(Vec::new());
//! for item in WartsReader::new(&bytes[..]) {
//!     json.write_item(&item.unwrap()).unwrap();
//! }
//! let text = String::from_utf8(json.into_inner()).unwrap();
//! assert!(text.starts_with("{\"type\":\"cycle-start\", \"list_name\":\"default\""));
//! ```
//!
//! Features: `std` (default) adds everything that does I/O (writers over `io::Write`,
//! readers, warts, converters). Without it the crate is `no_std + alloc` and offers the
//! JSON lines themselves ([`record_line`], [`cycle_start_line`], [`cycle_stop_line`],
//! [`Annotate`]): the unikernel prints its results with this very code. `tnt` adds
//! [`TntAnnotations`], the `"tnt"` fields of `vtnt-tnt` results (docs/tnt.md).
//!
//! What scamper 20211212 cannot represent is lost the same way here: scamper's JSON lists
//! only hops whose probe TTL lies in `firsthop..=hop_count` and only ping replies whose
//! `seq < ping_sent`; ping reply ToS is in neither format; warts keeps wait times in whole
//! seconds (pings add microseconds) and the gap between probes in centiseconds; the
//! echo ident of an ICMP Paris trace (its `sport`) is in warts only, JSON shows just the
//! checksum (`icmp_sum`), so a trace read from JSON has `sport` 0.

#![cfg_attr(not(feature = "std"), no_std)]
extern crate alloc;

#[cfg(feature = "std")]
mod convert;
#[cfg(feature = "std")]
mod error;
mod fields;
mod json_fmt;
mod json_line;
#[cfg(feature = "std")]
mod json_read;
#[cfg(feature = "std")]
mod json_write;
#[cfg(feature = "tnt")]
mod tnt;
#[cfg(feature = "std")]
mod warts;
#[cfg(feature = "std")]
mod warts_read;
#[cfg(feature = "std")]
mod warts_write;

use alloc::string::String;

#[cfg(feature = "std")]
pub use convert::{convert, convert_paths, json_to_warts, warts_to_json, ConvertReport, Format};
#[cfg(feature = "std")]
pub use error::{ConvertError, JsonError, JsonErrorKind, WartsError, WartsErrorKind};
pub use fields::{TntFields, TNT_LIST};
pub use json_line::{
    cycle_start_line, cycle_stop_line, record_line, Annotate, Extra, NoAnnotations,
};
#[cfg(feature = "std")]
pub use json_read::{parse_json_line, JsonReader};
#[cfg(feature = "std")]
pub use json_write::JsonWriter;
#[cfg(all(feature = "tnt", feature = "std"))]
pub use tnt::record_role;
#[cfg(feature = "tnt")]
pub use tnt::{tnt_records, RoleAnnotation, TntAnnotations};
#[cfg(feature = "std")]
pub use warts_read::{read_warts, WartsReader};
#[cfg(feature = "std")]
pub use warts_write::WartsWriter;

pub use vtnt_record::{Hop, Ping, PingReply, Pmtud, PmtudNote, PmtudNoteKind, Record, Trace};

/// A measurement cycle as scamper's `cycle-start` / `cycle-stop` objects show it.
///
/// warts additionally stores the list the cycle belongs to (`list_id`, and the list's
/// name); JSON has only the name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cycle {
    /// Name of the list the cycle runs over (scamper's default: `default`).
    pub list_name: String,
    /// The list's id as a person assigned it (warts only).
    pub list_id: u32,
    /// The cycle's id as a person assigned it (JSON `id`).
    pub id: u32,
    /// Host that ran the cycle.
    pub hostname: Option<String>,
    /// Seconds since the UNIX epoch when the cycle started.
    pub start_time: u32,
    /// Seconds since the UNIX epoch when the cycle stopped (0 while running).
    pub stop_time: u32,
    /// The vTNT build that wrote the cycle (`0.1.0 (commit 1a2b3c4d)`), vTNT's own field:
    /// the `"vtnt"` key of a JSON `cycle-start`, and in warts the description of the
    /// cycle's list, `vtnt <build>` (scamper's is the list's name). docs/scamper.md.
    pub vtnt: Option<String>,
}

/// One object of a scamper file, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A cycle began (`cycle-start`).
    CycleStart(Cycle),
    /// A cycle ended (`cycle-stop`); warts readers fill in the start's fields.
    CycleStop(Cycle),
    /// A trace or ping.
    Record(Record),
    /// A trace or ping with `"tnt"` fields (JSON) or in a [`TNT_LIST`] list (warts).
    Annotated(Record, TntFields),
}

impl Item {
    /// The trace or ping, annotated or not.
    pub fn record(&self) -> Option<&Record> {
        match self {
            Item::Record(r) | Item::Annotated(r, _) => Some(r),
            Item::CycleStart(_) | Item::CycleStop(_) => None,
        }
    }
}
