//! Network namespaces through iproute2: create, delete, test, list links, and run
//! commands inside (`ip netns exec`).

use crate::Error;

/// Runs `ip ARGS...`; an error carries ip's own message.
pub fn ip(args: &[&str]) -> Result<(), Error> {
    vtnt_netns::ip(args)
        .map(drop)
        .map_err(|e| Error::msg(e.to_string()))
}

/// Whether namespace `name` exists (`/run/netns/<name>`).
pub fn exists(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}

pub fn add(name: &str) -> Result<(), Error> {
    ip(&["netns", "add", name])
}

pub fn delete(name: &str) -> Result<(), Error> {
    if exists(name) {
        ip(&["netns", "del", name])?;
    }
    Ok(())
}

/// Names of the links inside namespace `name`.
pub fn links(name: &str) -> Result<Vec<String>, Error> {
    let out = vtnt_netns::ip(&["-n", name, "-o", "link", "show"])
        .map_err(|e| Error::msg(e.to_string()))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split(':')
                .nth(1)
                .map(|s| s.trim().split('@').next().unwrap_or("").to_string())
        })
        .collect())
}
