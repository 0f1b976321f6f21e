//! Network namespaces through iproute2: create, delete, test, list links, and run
//! commands inside (`ip netns exec`).

use std::process::{Command, Stdio};

use crate::Error;

/// Runs `ip ARGS...`; an error carries ip's own message.
pub fn ip(args: &[&str]) -> Result<(), Error> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::msg(format!("running ip: {e} (is iproute2 installed?)")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::msg(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
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
    let out = Command::new("ip")
        .args(["-n", name, "-o", "link", "show"])
        .output()
        .map_err(|e| Error::msg(format!("running ip: {e}")))?;
    if !out.status.success() {
        return Err(Error::msg(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split(':')
                .nth(1)
                .map(|s| s.trim().split('@').next().unwrap_or("").to_string())
        })
        .collect())
}
