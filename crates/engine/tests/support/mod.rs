//! Test support: the simulated network and its virtual-clock driver.
pub mod sim;
