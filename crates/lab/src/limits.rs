//! The largest topology the lab takes, checked before any work starts: the file's size
//! before it is read, the counts of its objects once it is parsed (before anything is
//! resolved or routed), the cost of its meshes once its biconnected parts are known
//! (before their distance tables are built), and a generator request's largest possible
//! topology before anything is generated. Each error names the limit and the value.
//!
//! The figures come from measurements (docs/lab.md, "Limits"): a topology of 300,000
//! routers (the most) loads in about 3 s and 1.5 GB on a 2-core machine; routing is
//! linear in routers and links for topologies whose meshes are small, and the sum of
//! squares below bounds the rest.

/// Bytes of topology file text. The TOML parser holds the whole document while it reads
/// it, some 36 bytes per byte of text (a 41 MB file of 300,000 routers peaks at 1.5 GB),
/// so this bounds the memory a file costs before its objects can be counted.
pub const MAX_TOPOLOGY_BYTES: usize = 128 << 20;
/// Routers.
pub const MAX_ROUTERS: usize = 300_000;
/// Links.
pub const MAX_LINKS: usize = 600_000;
/// Destination hosts.
pub const MAX_HOSTS: usize = 300_000;
/// Vantage points (ports are 16 bits).
pub const MAX_VANTAGE_POINTS: usize = 65_535;
/// LSPs, each equal-cost path of an `ecmp` one counted (they are numbered in 16 bits).
pub const MAX_LSPS: usize = 60_000;
/// Static routes.
pub const MAX_ROUTES: usize = 300_000;
/// Distance-table entries of the topology's meshes: the sum over its biconnected parts
/// (a lone link, a diamond, a ring, a mesh) of their routers squared. One mesh of 4,096
/// routers, or 64 of 512; a link alone costs 4. 4,096 routers at the largest link cost
/// (1,000,000) keep every distance inside one part within 32 bits.
pub const MAX_MESH_WORK: u64 = 4096 * 4096;

/// A topology (or generator request) past one of the limits: what, how many, the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    pub what: String,
    pub value: u64,
    pub limit: u64,
}

impl core::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} {} is more than the lab takes ({} at most; docs/lab.md, \"Limits\")",
            self.value, self.what, self.limit
        )
    }
}

/// `value` of `what` against `limit`.
pub(crate) fn check(what: &str, value: usize, limit: usize) -> Result<(), TooLarge> {
    if value > limit {
        return Err(TooLarge {
            what: what.to_string(),
            value: value as u64,
            limit: limit as u64,
        });
    }
    Ok(())
}
