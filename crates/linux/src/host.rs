//! Facts about the host that commands, the lab's fronts, the store and the tests ask
//! alike (the source address a route picks is in `route`), and how the driver opens a
//! raw socket.

use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockProtocol, SockType};

use crate::Error;

/// Whether this process runs as root (its effective uid is 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Opens a raw socket of `family` for `proto`.
pub(crate) fn open(
    family: AddressFamily,
    proto: SockProtocol,
    what: &'static str,
) -> Result<OwnedFd, Error> {
    socket(
        family,
        SockType::Raw,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        proto,
    )
    .map_err(|source| match source {
        Errno::EPERM | Errno::EACCES => Error::Privilege { what, source },
        _ => Error::Socket { what, source },
    })
}
