//! Test support: the network is the lab's (`vtnt-lab`); [`topo`] builds the small
//! topologies the tests draw, [`wire`] puts the lab behind the vantage point's access
//! link (where the tests drop, delay and duplicate packets) and [`drive`] runs engines
//! against it under a virtual clock.
//!
//! Every test crate compiles this module and uses part of it.
#![allow(dead_code)]

pub mod drive;
pub mod topo;
pub mod wire;
