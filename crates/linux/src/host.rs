//! Facts about the host that commands, the lab's fronts, the store and the tests ask
//! alike (the source address a route picks is in `route`).

/// Whether this process runs as root (its effective uid is 0).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
