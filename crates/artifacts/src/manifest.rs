//! The manifest, `artifacts.toml`: the vtnt version and commit that built a `lib/vtnt`,
//! and each file's SHA-256 and size ([`Pin`]). `cargo xtask dist` writes it; every use
//! of a file checks it first ([`Pin::verify`]), and so does a deploy of an image fetched
//! from elsewhere (an image server, the fleet's object store).
//!
//! ```toml
//! version = "0.1.0"
//! commit = "48faf41"
//!
//! [files."vtnt-unikernel.elf"]
//! sha256 = "9f2c..."
//! size = 271360
//! ```

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{elf, Error};

/// What `artifacts.toml` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The vtnt version that built the files (the running vtnt must be the same).
    pub version: String,
    /// `git describe --always --dirty` of the checkout that built them.
    pub commit: String,
    /// By file name.
    pub files: BTreeMap<String, Pin>,
}

/// A file's SHA-256 (lower-case hex) and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    pub sha256: String,
    pub size: u64,
}

impl Manifest {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<Manifest, Error> {
        let bad = |why: String| Error::Manifest {
            path: path.to_path_buf(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        toml::from_str(&text).map_err(|e| bad(format!("not a vtnt manifest: {}", e.message())))
    }

    /// The manifest as the TOML text [`Manifest::read`] reads, with a comment on top.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).unwrap_or_default();
        format!(
            "# vtnt's run-time files (docs/install.md), written by `cargo xtask dist`: each\n\
             # file's SHA-256 and size, checked before it is executed, booted or shipped.\n{body}"
        )
    }
}

impl Pin {
    /// The pin of the file at `path` as it is.
    pub fn of(path: &Path) -> std::io::Result<Pin> {
        let mut f = std::fs::File::open(path)?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut size = 0u64;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            size += n as u64;
        }
        Ok(Pin {
            sha256: hex(&h.finalize()),
            size,
        })
    }

    /// Checks that `path` is a static x86_64 ELF executable ([`elf::check`]) with this
    /// size and SHA-256: the most telling reason first (wrong architecture, truncated,
    /// then altered).
    pub fn verify(&self, path: &Path) -> Result<(), Error> {
        let corrupt = |why: String| Error::Corrupt {
            path: path.to_path_buf(),
            why,
        };
        let bytes = std::fs::read(path).map_err(|e| corrupt(format!("cannot read it ({e})")))?;
        elf::check(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if bytes.len() as u64 != self.size {
            let how = if (bytes.len() as u64) < self.size {
                "truncated: "
            } else {
                ""
            };
            return Err(corrupt(format!(
                "{how}{} bytes where the manifest pins {}",
                bytes.len(),
                self.size
            )));
        }
        let sha256 = hex(&Sha256::digest(&bytes));
        if sha256 != self.sha256 {
            return Err(corrupt(format!(
                "sha256 {sha256} where the manifest pins {}",
                self.sha256
            )));
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_what_was_written() {
        let mut files = BTreeMap::new();
        files.insert(
            "vtnt-spt.elf".to_string(),
            Pin {
                sha256: "ab".repeat(32),
                size: 12,
            },
        );
        let m = Manifest {
            version: "0.1.0".into(),
            commit: "48faf41-dirty".into(),
            files,
        };
        let dir = std::env::temp_dir().join(format!("vtnt-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("artifacts.toml");
        std::fs::write(&p, m.to_toml()).unwrap();
        assert_eq!(Manifest::read(&p).unwrap(), m);
        std::fs::write(
            &p,
            "version = \"0.1.0\"\ncommit = \"x\"\nextra = 1\n[files]\n",
        )
        .unwrap();
        let e = Manifest::read(&p).unwrap_err().to_string();
        assert!(e.contains("unknown field `extra`"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sha256_of_a_known_text() {
        let dir = std::env::temp_dir().join(format!("vtnt-pin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("abc");
        std::fs::write(&p, "abc").unwrap();
        let pin = Pin::of(&p).unwrap();
        assert_eq!(
            pin.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(pin.size, 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
