//! `vtnt query QUESTION [filters]`: the results store's documented questions
//! (docs/store.md), as a table or, with `--json`, as the JSON a web page would get.

use std::net::IpAddr;
use std::process::ExitCode;

use vtnt_store::query::Filter;
use vtnt_store::questions::TunnelCount;

use crate::store::StoreArgs;

/// What to ask.
#[derive(clap::Subcommand, Debug)]
pub enum Question {
    /// The runs (campaigns): key, name, source, records.
    Runs(Common),
    /// The vantage points and their provenance.
    Nodes(Common),
    /// Traces with their paths (reply address per TTL, `*` for none).
    Traces(Filtered),
    /// Tunnels, one line per trace that crossed one.
    Tunnels(Filtered),
    /// Distinct tunnels per AS of their ingress, by class.
    TunnelsPerAs(Filtered),
    /// Distinct tunnels per vendor of their ingress (its TTL signature), by class.
    TunnelsPerVendor(Filtered),
    /// Distinct tunnels per vantage point, by class.
    ClassesPerVp(Filtered),
    /// LSRs revealed by DPR, BRPR or buddy traces, per AS of their address.
    RevealedLsrsPerAs(Filtered),
    /// What changed between two runs: paths (per vantage point and target) whose hops
    /// changed, with the changed segment, and tunnels that appeared or disappeared.
    Diff {
        #[command(flatten)]
        common: Common,
        /// The earlier run's key.
        a: String,
        /// The later run's key.
        b: String,
    },
}

/// The store, the tenant and the output's form.
#[derive(clap::Args, Debug)]
pub struct Common {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A question's filters.
#[derive(clap::Args, Debug)]
pub struct Filtered {
    #[command(flatten)]
    pub common: Common,
    /// Traces towards this address.
    #[arg(long)]
    pub target: Option<IpAddr>,
    /// Traces towards an address of this IPv4 prefix.
    #[arg(long)]
    pub prefix: Option<vtnt_store::query::Prefix>,
    /// Tunnels of this class (explicit, implicit, opaque, invisible-php, invisible-uhp).
    #[arg(long)]
    pub class: Option<String>,
    /// Tunnels whose ingress has this vendor (cisco, juniper, linux, junos-e, unknown,
    /// unresponsive).
    #[arg(long)]
    pub vendor: Option<String>,
    /// Records of this vantage point.
    #[arg(long)]
    pub node: Option<String>,
    /// Records of this run (its key).
    #[arg(long)]
    pub run: Option<String>,
    /// Records from this time on: seconds since the Unix epoch, or a UTC date
    /// (`2026-11-28`, `2026-11-28T14:00:00`).
    #[arg(long, value_parser = time_us)]
    pub since: Option<i64>,
    /// Records before this time.
    #[arg(long, value_parser = time_us)]
    pub until: Option<i64>,
}

impl Filtered {
    fn filter(&self) -> Filter {
        Filter {
            target: self.target,
            prefix: self.prefix,
            class: self.class.clone(),
            vendor: self.vendor.clone(),
            node: self.node.clone(),
            run: self.run.clone(),
            since_us: self.since,
            until_us: self.until,
        }
    }
}

/// Seconds since the epoch, or a UTC date and time, as microseconds since the epoch.
fn time_us(s: &str) -> Result<i64, String> {
    if let Ok(secs) = s.parse::<i64>() {
        return secs
            .checked_mul(1_000_000)
            .ok_or_else(|| format!("`{s}`: out of range"));
    }
    let bad = || format!("`{s}`: want seconds since the epoch or YYYY-MM-DD[THH:MM[:SS]]");
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = s.split_once(['T', ' ']).unwrap_or((s, "00:00:00"));
    let num = |t: &str| t.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let t: Vec<&str> = time.split(':').collect();
    let ([y, m, day], 2..=3) = (&d[..], t.len()) else {
        return Err(bad());
    };
    let (y, m, day) = (num(y)?, num(m)?, num(day)?);
    let (hh, mm, ss) = (num(t[0])?, num(t[1])?, t.get(2).map_or(Ok(0), |x| num(x))?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return Err(bad());
    }
    // days from the civil calendar (Howard Hinnant's algorithm)
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok(((days * 24 + hh) * 60 + mm) * 60 * 1_000_000 + ss * 1_000_000)
}

/// Prints `v` as JSON, or `table` (already rendered).
fn emit(
    json: bool,
    v: &impl serde::Serialize,
    table: impl FnOnce() -> String,
) -> anyhow::Result<ExitCode> {
    if json {
        out!("{}", serde_json::to_string_pretty(v)?);
    } else {
        put!("{}", table());
    }
    Ok(ExitCode::SUCCESS)
}

/// Rows under a header, columns aligned.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        let s: Vec<String> = cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", s.join("  ").trim_end())
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn opt(v: &Option<impl ToString>) -> String {
    v.as_ref().map_or("-".into(), |v| v.to_string())
}

/// The per-class counts as table rows.
fn counts(first: &str, rows: &[TunnelCount]) -> String {
    let classes: Vec<&str> = vtnt_store::query::classes().collect();
    let mut header = vec![first, "tunnels", "observations"];
    header.extend(&classes);
    let body = rows
        .iter()
        .map(|r| {
            let mut row = vec![
                r.group.clone().unwrap_or_else(|| "(none)".into()),
                r.tunnels.to_string(),
                r.observations.to_string(),
            ];
            row.extend(
                classes
                    .iter()
                    .map(|c| r.classes.get(*c).copied().unwrap_or(0).to_string()),
            );
            row
        })
        .collect();
    table(&header, body)
}

pub fn run(q: Question) -> anyhow::Result<ExitCode> {
    match q {
        Question::Runs(c) => {
            let (s, t) = c.store.read()?;
            let runs = s.runs(&t)?;
            emit(c.json, &runs, || {
                table(
                    &["run", "name", "source", "jobs", "nodes", "traces", "pings"],
                    runs.iter()
                        .map(|r| {
                            vec![
                                r.key.clone(),
                                r.name.clone(),
                                r.source.clone(),
                                r.jobs.to_string(),
                                r.nodes.to_string(),
                                r.traces.to_string(),
                                r.pings.to_string(),
                            ]
                        })
                        .collect(),
                )
            })
        }
        Question::Nodes(c) => {
            let (s, t) = c.store.read()?;
            let nodes = s.nodes(&t)?;
            emit(c.json, &nodes, || {
                table(
                    &[
                        "node",
                        "location",
                        "public address",
                        "image sha256",
                        "clock offset ms",
                        "clock sync",
                        "jobs",
                    ],
                    nodes
                        .iter()
                        .map(|row| {
                            let n = &row.node;
                            vec![
                                n.name.clone(),
                                opt(&n.location),
                                opt(&n.public_addr),
                                opt(&n.image_sha256),
                                opt(&n.clock_offset_ms),
                                opt(&n.clock_sync),
                                row.jobs.to_string(),
                            ]
                        })
                        .collect(),
                )
            })
        }
        Question::Traces(f) => {
            let (s, t) = f.common.store.read()?;
            let rows = s.traces(&t, &f.filter())?;
            emit(f.common.json, &rows, || {
                table(
                    &["node", "run", "dst", "role", "stop", "path"],
                    rows.iter()
                        .map(|r| {
                            vec![
                                r.node.clone(),
                                r.run.clone(),
                                r.dst.clone(),
                                opt(&r.role),
                                r.stop_reason.clone(),
                                r.path.join(" "),
                            ]
                        })
                        .collect(),
                )
            })
        }
        Question::Tunnels(f) => {
            let (s, t) = f.common.store.read()?;
            let rows = s.tunnels(&t, &f.filter())?;
            emit(f.common.json, &rows, || {
                table(
                    &[
                        "node", "dst", "class", "ingress", "egress", "lsrs", "revealed", "vendor",
                        "AS",
                    ],
                    rows.iter()
                        .map(|r| {
                            vec![
                                r.node.clone(),
                                r.dst.clone(),
                                r.class.clone(),
                                opt(&r.ingress),
                                opt(&r.egress),
                                r.lsrs
                                    .iter()
                                    .map(|l| l.addr.as_deref().unwrap_or("*"))
                                    .collect::<Vec<_>>()
                                    .join(","),
                                r.lsrs.iter().filter(|l| l.revealed).count().to_string(),
                                r.ingress_vendor.clone(),
                                opt(&r.ingress_as),
                            ]
                        })
                        .collect(),
                )
            })
        }
        Question::TunnelsPerAs(f) => {
            let (s, t) = f.common.store.read()?;
            let rows = s.tunnels_per_as(&t, &f.filter())?;
            emit(f.common.json, &rows, || counts("AS", &rows))
        }
        Question::TunnelsPerVendor(f) => {
            let (s, t) = f.common.store.read()?;
            let rows = s.tunnels_per_vendor(&t, &f.filter())?;
            emit(f.common.json, &rows, || counts("vendor", &rows))
        }
        Question::ClassesPerVp(f) => {
            let (s, t) = f.common.store.read()?;
            let rows = s.classes_per_vantage_point(&t, &f.filter())?;
            emit(f.common.json, &rows, || counts("vantage point", &rows))
        }
        Question::RevealedLsrsPerAs(f) => {
            let (s, t) = f.common.store.read()?;
            let rows = s.revealed_lsrs_per_as(&t, &f.filter())?;
            emit(f.common.json, &rows, || {
                table(
                    &["AS", "revealed LSRs", "tunnels"],
                    rows.iter()
                        .map(|r| vec![opt(&r.asn), r.lsrs.to_string(), r.tunnels.to_string()])
                        .collect(),
                )
            })
        }
        Question::Diff { common, a, b } => {
            let (s, t) = common.store.read()?;
            let d = s.diff(&t, &a, &b)?;
            emit(common.json, &d, || {
                let mut out = format!(
                    "{} pairs compared: {} unchanged, {} changed; {} only in {a}, {} only in {b}\n",
                    d.compared,
                    d.unchanged,
                    d.changed.len(),
                    d.only_in_a.len(),
                    d.only_in_b.len()
                );
                for c in &d.changed {
                    out.push_str(&format!("{} -> {}\n", c.key.node, c.key.target));
                    if let Some(seg) = &c.segment {
                        out.push_str(&format!(
                            "  from hop {}: {} => {}\n",
                            seg.ttl,
                            seg.a.join(" "),
                            seg.b.join(" ")
                        ));
                    }
                    for (sign, ts) in [("-", &c.tunnels_gone), ("+", &c.tunnels_new)] {
                        for t in ts {
                            out.push_str(&format!(
                                "  {sign} {} {} -> {} [{}]\n",
                                t.class,
                                opt(&t.ingress),
                                opt(&t.egress),
                                t.lsrs.join(",")
                            ));
                        }
                    }
                }
                out
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_seconds_or_utc_dates() {
        assert_eq!(time_us("0"), Ok(0));
        assert_eq!(time_us("1700000000"), Ok(1_700_000_000_000_000));
        assert_eq!(time_us("1970-01-02"), Ok(86_400_000_000));
        assert_eq!(time_us("2023-11-14T22:13:20Z"), Ok(1_700_000_000_000_000));
        assert_eq!(time_us("2000-03-01 00:00"), Ok(951_868_800_000_000));
        for bad in ["yesterday", "2023-13-01", "2023-11-14T25:00", "2023-11"] {
            assert!(time_us(bad).is_err(), "{bad}");
        }
    }
}
