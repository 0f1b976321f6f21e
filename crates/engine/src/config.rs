//! Engine-wide settings: the source address, the global probe budget, the seed and the
//! probing policy every measurement must pass.

use core::fmt;
use core::net::Ipv4Addr;

use vtnt_policy::Policy;

use crate::flow::POOL_SIZE;

/// Settings of one [`crate::Engine`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Source address written into every probe, unless the driver looks one up per
    /// destination ([`crate::Engine::set_source_lookup`]).
    pub src: Ipv4Addr,
    /// Probes per second for all measurements together (scamper's `-p`;
    /// 1..=[`vtnt_policy::MAX_PPS_LAB`]; runs that probe public addresses are held lower by the policy).
    pub pps: u32,
    /// Probes that may leave back to back (token bucket depth; 1..=100,000). 1 spaces
    /// every probe by `1/pps`; larger values let a driver that wakes up late catch up.
    pub burst: u32,
    /// Seeds the choice of ICMP idents, source ports and Paris checksums.
    pub seed: u64,
    /// Measurements probing at once (1..=32,768); the rest wait in FIFO order.
    pub max_active: usize,
    /// What may be probed: [`crate::Engine::start`] refuses a measurement whose destination the
    /// policy refuses at this config's rate. Lab and loopback only by default.
    pub policy: Policy,
}

impl Config {
    /// scamper-like defaults: 20 pps, burst 1, seed 0, up to 1,000 measurements at once.
    pub fn new(src: Ipv4Addr) -> Config {
        Config {
            src,
            pps: 20,
            burst: 1,
            seed: 0,
            max_active: 1000,
            policy: Policy::lab_only(),
        }
    }

    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = |option, range, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::OutOfRange { option, range })
            }
        };
        check(
            "pps",
            "1..=500000",
            vtnt_policy::check_rate(self.pps).is_ok(),
        )?;
        check("burst", "1..=100000", (1..=100_000).contains(&self.burst))?;
        check(
            "max_active",
            "1..=32768",
            (1..=POOL_SIZE).contains(&self.max_active),
        )
    }
}

/// Why [`crate::Engine::new`] refused a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A field is out of its range; names the field and the range.
    OutOfRange {
        option: &'static str,
        range: &'static str,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::OutOfRange { option, range } => {
                write!(f, "config `{option}` out of range (allowed: {range})")
            }
        }
    }
}

impl core::error::Error for ConfigError {}
