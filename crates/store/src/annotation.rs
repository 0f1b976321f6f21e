//! The `"tnt"` fields of a record read back for the store: the layout docs/tnt.md gives
//! (an initial trace's `TraceAnnotation`, a ping's or revelation trace's role), as far
//! as the store keeps it. Fields the store does not keep are ignored; a field it keeps
//! with the wrong type or an unknown value is an error naming the field.

use std::net::IpAddr;

use serde::Deserialize;
use vtnt_record::TunnelClass;

/// An initial trace's `"tnt"` (layout versions 1 and 2).
#[derive(Debug, Deserialize)]
pub struct TraceAnnotation {
    #[serde(default)]
    pub tunnels: Vec<Tunnel>,
    #[serde(default)]
    pub path: Vec<PathEntry>,
    pub probes: Option<u32>,
}

/// One tunnel of `tunnels`.
#[derive(Debug, Deserialize)]
pub struct Tunnel {
    pub class: String,
    pub evidence: Option<String>,
    pub trigger: Option<String>,
    pub ingress: Option<IpAddr>,
    pub egress: Option<IpAddr>,
    #[serde(default)]
    pub lsrs: Vec<Option<IpAddr>>,
    pub hidden_estimate: Option<u8>,
    pub revelation: Option<Revelation>,
    pub note: Option<String>,
}

/// How a tunnel's revelation went.
#[derive(Debug, Deserialize)]
pub struct Revelation {
    /// `"running"`, `"complete"`, `{"incomplete": reason}` or `{"failed": reason}`.
    pub status: serde_json::Value,
    pub method: Option<String>,
    pub steps: u8,
    pub traces: u16,
    pub probes: u32,
    pub cached: bool,
}

impl Revelation {
    /// The status's word and, for `incomplete` and `failed`, its reason.
    pub fn status(&self) -> Result<(String, Option<String>), String> {
        match &self.status {
            serde_json::Value::String(s) => Ok((s.clone(), None)),
            serde_json::Value::Object(o) if o.len() == 1 => {
                let (k, v) = o.iter().next().expect("one entry");
                let why = v
                    .as_str()
                    .ok_or("revelation.status: a reason is a string")?;
                Ok((k.clone(), Some(why.to_string())))
            }
            v => Err(format!("revelation.status: unexpected {v}")),
        }
    }
}

/// One entry of `path`: a measured hop or a revealed one.
#[derive(Debug, Deserialize)]
pub struct PathEntry {
    pub addr: Option<IpAddr>,
    /// The reply's index in the trace's `hops` (measured hops only).
    pub hop: Option<usize>,
    pub revealed: Option<Revealed>,
    pub annotation: HopAnnotation,
}

/// Where a revealed hop comes from.
#[derive(Debug, Deserialize)]
pub struct Revealed {
    pub tunnel: usize,
    pub method: String,
    pub step: u8,
}

/// A hop's TNT numbers and signature.
#[derive(Debug, Deserialize)]
pub struct HopAnnotation {
    pub signature: Signature,
    pub vendor: Option<String>,
    #[serde(default)]
    pub uturn: i16,
    #[serde(default)]
    pub frpla: i16,
    #[serde(default)]
    pub rtla: i16,
}

/// `<iTTL te, iTTL er>`.
#[derive(Debug, Deserialize)]
pub struct Signature {
    pub te: Option<u8>,
    pub er: Option<u8>,
}

impl TraceAnnotation {
    /// Parses an initial trace's `"tnt"` text and checks what the store relies on: known
    /// classes, revealed hops and hop indexes that point inside the record.
    pub fn parse(text: &str, hops: usize) -> Result<TraceAnnotation, String> {
        let a: TraceAnnotation = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for (i, t) in a.tunnels.iter().enumerate() {
            if !classes().any(|c| c == t.class) {
                return Err(format!("tunnels[{i}].class: unknown class `{}`", t.class));
            }
            if let Some(r) = &t.revelation {
                r.status().map_err(|e| format!("tunnels[{i}].{e}"))?;
            }
        }
        for (i, p) in a.path.iter().enumerate() {
            if p.hop.is_some_and(|h| h >= hops) {
                return Err(format!("path[{i}].hop: past the trace's {hops} hops"));
            }
            if p.revealed
                .as_ref()
                .is_some_and(|r| r.tunnel >= a.tunnels.len())
            {
                return Err(format!("path[{i}].revealed.tunnel: no such tunnel"));
            }
        }
        Ok(a)
    }
}

/// The tunnel classes, in TNT's table order.
pub fn classes() -> impl Iterator<Item = &'static str> {
    TunnelClass::ALL.iter().map(|c| c.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_annotations_name_their_field() {
        for (text, why) in [
            (
                r#"{"tunnels":[{"class":"weird"}]}"#,
                "tunnels[0].class: unknown class",
            ),
            (
                r#"{"path":[{"hop":3,"annotation":{"signature":{}}}]}"#,
                "path[0].hop",
            ),
            (
                r#"{"path":[{"revealed":{"tunnel":0,"method":"dpr","step":1},"annotation":{"signature":{}}}]}"#,
                "no such tunnel",
            ),
            (r#"{"tunnels":3}"#, "invalid type"),
            (
                r#"{"tunnels":[{"class":"opaque","revelation":{"status":7,"steps":0,"traces":0,"probes":0,"cached":false}}]}"#,
                "tunnels[0].revelation.status",
            ),
        ] {
            let e = TraceAnnotation::parse(text, 2).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        let ok = TraceAnnotation::parse(
            r#"{"role":"initial","version":2,"tunnels":[{"class":"opaque","revelation":{"status":{"failed":"loop"},"method":null,"steps":1,"traces":1,"probes":5,"cached":false}}],"path":[],"probes":9}"#,
            0,
        )
        .unwrap();
        let status = ok.tunnels[0].revelation.as_ref().unwrap().status().unwrap();
        assert_eq!(status, ("failed".into(), Some("loop".into())));
        assert_eq!(ok.probes, Some(9));
    }
}
