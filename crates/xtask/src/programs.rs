//! The programs the install tree ships and how cargo builds them: one description that
//! [`crate::dist`] builds from and [`crate::notices`] asks `cargo tree` about with the same
//! packages, target and features, so that the notices list the crates of the very
//! binaries in the tree (packages built in one `cargo build` share their dependencies'
//! features, and the notices see that too).

use vtnt_artifacts::Artifact;

use crate::kernel;

/// The static binaries' target.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// A program of the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `bin/vtnt`, the command (host target, default features).
    Command,
    /// `bin/vtnt-agent`, the command the agent's unit runs: `vtnt` without `vtnt bench`
    /// (the cli's default features but `bench`), so without the plotting library.
    Agent,
    /// A file of `lib/vtnt`.
    Lib(Artifact),
}

impl Program {
    /// Its file name in the tree (what the notices label it by).
    pub fn file_name(self) -> &'static str {
        match self {
            Program::Command => "vtnt",
            Program::Agent => "vtnt-agent",
            Program::Lib(a) => a.file_name(),
        }
    }

    /// Its path in the tree.
    pub fn path(self) -> String {
        match self {
            Program::Command => "bin/vtnt".into(),
            Program::Agent => "bin/vtnt-agent".into(),
            Program::Lib(a) => format!("lib/vtnt/{}", a.file_name()),
        }
    }

    /// What it is, in a few words.
    pub fn what(self) -> &'static str {
        match self {
            Program::Command => "the vtnt command (default features)",
            Program::Agent => "the vtnt command without `vtnt bench` (the agent's unit runs it)",
            Program::Lib(a) => a.what(),
        }
    }
}

/// One `cargo build`: the packages built together and the programs each makes.
#[derive(Debug, Clone)]
pub struct Build {
    /// Each package with the program it makes (its binary, named as the package).
    pub programs: Vec<(&'static str, Program)>,
    /// `None`: the host's.
    pub target: Option<&'static str>,
    pub default_features: bool,
    pub features: &'static [&'static str],
}

impl Build {
    /// Whether this is the unikernel ([`kernel::build`], its own profile and target
    /// directory).
    pub fn is_kernel(&self) -> bool {
        self.target == Some(kernel::TARGET)
    }

    /// cargo's package, target and feature options, as `build` and `tree` take them.
    pub fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        for (package, _) in &self.programs {
            a.extend(["-p".to_string(), package.to_string()]);
        }
        if let Some(t) = self.target {
            a.extend(["--target".to_string(), t.to_string()]);
        }
        if !self.default_features {
            a.push("--no-default-features".into());
        }
        if !self.features.is_empty() {
            a.extend(["--features".to_string(), self.features.join(",")]);
        }
        a
    }
}

/// The kernel features each image is built with.
pub fn kernel_features(a: Artifact) -> Option<&'static [&'static str]> {
    match a {
        Artifact::JobVm => Some(&[]),
        Artifact::JobSpt => Some(&["spt"]),
        Artifact::StreamVm => Some(&["stream"]),
        Artifact::StreamSpt => Some(&["spt", "stream"]),
        Artifact::NfSpt => Some(&["spt", "fw"]),
        Artifact::NfVm => Some(&["fw"]),
        Artifact::StaticVtnt | Artifact::Monitor => None,
    }
}

/// The cli's features in the agent's binary: its default features but `bench`.
pub const AGENT_FEATURES: &[&str] = &["fleet", "store"];

/// Every build of the tree: the agent's binary, then the command (both are package
/// `vtnt`: [`crate::dist`] keeps the agent's before the command's build replaces it,
/// and the checkout's `target/<profile>/vtnt` stays the whole command); the static `vtnt` and `vtnt-monitor` in one
/// build for musl (one job per image: no fleet, so no tokio, NATS or TLS); each image of
/// the unikernel.
pub fn builds() -> Vec<Build> {
    let mut all = vec![
        Build {
            programs: vec![("vtnt", Program::Agent)],
            target: None,
            default_features: false,
            features: AGENT_FEATURES,
        },
        Build {
            programs: vec![("vtnt", Program::Command)],
            target: None,
            default_features: true,
            features: &[],
        },
        Build {
            programs: vec![
                ("vtnt", Program::Lib(Artifact::StaticVtnt)),
                ("vtnt-monitor", Program::Lib(Artifact::Monitor)),
            ],
            target: Some(MUSL_TARGET),
            default_features: false,
            features: &[],
        },
    ];
    for a in Artifact::ALL {
        if let Some(features) = kernel_features(a) {
            all.push(Build {
                programs: vec![(kernel::PACKAGE, Program::Lib(a))],
                target: Some(kernel::TARGET),
                default_features: true,
                features,
            });
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_tree_is_built_once() {
        let mut files: Vec<String> = builds()
            .iter()
            .flat_map(|b| b.programs.iter().map(|(_, p)| p.path()))
            .collect();
        files.sort();
        let mut want: Vec<String> = Artifact::ALL
            .iter()
            .map(|a| Program::Lib(*a).path())
            .chain(["bin/vtnt".to_string(), "bin/vtnt-agent".to_string()])
            .collect();
        want.sort();
        assert_eq!(files, want);
        let musl = &builds()[2];
        assert_eq!(
            musl.args().join(" "),
            "-p vtnt -p vtnt-monitor --target x86_64-unknown-linux-musl --no-default-features"
        );
        assert!(builds().iter().any(|b| b
            .args()
            .ends_with(&["--features".into(), "spt,stream".into()])));
    }
}
