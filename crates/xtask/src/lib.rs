//! `cargo xtask`'s tasks as a library: the checkout's cargo ([`cargo`]), the unikernel's
//! builds ([`kernel`]), the install tree ([`dist`]) and the Debian package ([`deb`]).
//! The binary (`main.rs`) is their command line; tests that need a kernel variant the
//! tree does not ship build it through [`kernel::build`] too. Nothing here is linked
//! into `vtnt`: it never builds anything at run time.

pub mod cargo;
pub mod deb;
pub mod dist;
pub mod kernel;
