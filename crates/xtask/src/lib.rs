//! `cargo xtask`'s tasks as a library: the checkout's cargo ([`cargo`]), what the install
//! tree ships and how each program is built ([`programs`]), the unikernel's builds
//! ([`kernel`]), the install tree ([`dist`]) with its licence, notices, man pages and
//! completions ([`share`], [`notices`], [`man`]), the Debian package ([`deb`]) and the
//! dependency tree's checks ([`deny`]). The binary (`main.rs`) is their command line;
//! tests that need a kernel variant the tree does not ship build it through
//! [`kernel::build`] too. Nothing here is linked into `vtnt`: it never builds anything
//! at run time.

pub mod cargo;
pub mod deb;
pub mod deny;
pub mod dist;
mod files;
pub mod kernel;
pub mod man;
pub mod notices;
pub mod programs;
pub mod share;
