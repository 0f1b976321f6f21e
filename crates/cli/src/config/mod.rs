//! The configuration: one file (`/etc/vtnt/config.toml`, or the one `--config FILE` or
//! `VTNT_CONFIG` names) and environment variables that give the defaults of the
//! command's options, and `vtnt config show|sample` (docs/config.md).
//!
//! Precedence, once for every key: a flag on the command line, then the key's
//! environment variable, then the file, then the built-in default. It is clap's own: the
//! variable's or the file's value becomes the option's default before the command line is
//! parsed ([`Settings::command`]), checked first by the option's own parser so that a bad
//! value names its key and where it was set. The keys that are no option's (exclusion
//! lists, where installed files and images are) are handed to the libraries that use
//! them ([`Settings::apply`]). Exclusion lists add up rather than override: a flag never
//! drops a list an operator configured.

mod file;
mod keys;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Arg, Command};

use file::Value;
use keys::{Key, Sets};

use file::DEFAULT_PATH;

/// The environment variable that names the file (as `--config` does).
pub const CONFIG_ENV: &str = "VTNT_CONFIG";

/// `vtnt config`.
#[derive(clap::Subcommand)]
pub enum ConfigCommand {
    /// Every key as the commands would take it now: its value and where it comes from
    /// (an environment variable, the file and line, or the built-in default), as a file
    /// vtnt would read.
    Show,
    /// A configuration file with every key at its default, commented out, with what it
    /// means (the package's /etc/vtnt/config.toml).
    Sample,
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// An environment variable.
    Env(String),
    /// The file, `PATH:LINE:COLUMN`.
    File(String),
    /// Both (exclusion lists add up): the variable's lists, then the file's.
    Both(String, String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Env(v) => write!(f, "{v}"),
            Origin::File(at) => write!(f, "{at}"),
            Origin::Both(v, at) => write!(f, "{v} and {at}"),
        }
    }
}

/// One key that the environment or the file sets.
#[derive(Debug, Clone)]
struct Setting {
    key: Key,
    value: Value,
    origin: Origin,
    /// Where in the file (variables first: (0, 0)), the order values are checked in.
    at: (usize, usize),
}

/// The configuration of this run: the file, and every key it or the environment sets.
#[derive(Debug)]
pub struct Settings {
    path: PathBuf,
    /// Whether the file was there (the default file may be missing).
    read: bool,
    settings: Vec<Setting>,
}

impl Settings {
    /// Reads the file `argv`'s `--config`, else `VTNT_CONFIG`, else [`DEFAULT_PATH`]
    /// names (only the last may be missing), and the keys' environment variables.
    pub fn load(argv: &[OsString]) -> anyhow::Result<Settings> {
        let env = std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty());
        let (path, given) = match (config_flag(argv), env) {
            (Some(p), _) => (p, Some("--config")),
            (None, Some(p)) => (PathBuf::from(p), Some(CONFIG_ENV)),
            (None, None) => (PathBuf::from(DEFAULT_PATH), None),
        };
        let euid = nix::unistd::geteuid().as_raw();
        let file = file::read(&path, given, euid)?;
        let mut settings = Vec::new();
        for key in keys::all() {
            let in_file = file.as_ref().and_then(|f| {
                let e = f.entries.iter().find(|e| e.key == key)?;
                Some(Setting {
                    key,
                    value: e.value.clone(),
                    origin: Origin::File(f.at(e.at)),
                    at: (e.at.line, e.at.column),
                })
            });
            let set = match (from_env(&key)?, in_file) {
                // a variable never drops an exclusion list the file names
                (Some(env), Some(f)) if key.sets == Sets::Exclude => Some(Setting {
                    value: Value::List([env.value.items(), f.value.items()].concat()),
                    origin: Origin::Both(env.origin.to_string(), f.origin.to_string()),
                    ..f
                }),
                (Some(env), _) => Some(env),
                (None, f) => f,
            };
            settings.extend(set);
        }
        Ok(Settings {
            path,
            read: file.is_some(),
            settings,
        })
    }

    /// `cmd` with the defaults this configuration gives, each checked by its option's
    /// parser first.
    pub fn command(&self, mut cmd: Command) -> anyhow::Result<Command> {
        let mut settings: Vec<&Setting> = self.settings.iter().collect();
        settings.sort_by_key(|s| s.at);
        for s in settings {
            let Sets::Options { commands, arg } = s.key.sets else {
                continue;
            };
            for path in commands {
                let Some(c) = find_command(&mut cmd, path) else {
                    anyhow::bail!("{}: no command `vtnt {path}`", s.key.path());
                };
                check(c, arg, s)?;
                let values: Vec<_> = s.value.items().iter().map(|v| v.clone().into()).collect();
                set_default(c, arg, &values);
            }
        }
        Ok(cmd)
    }

    /// Hands the keys that set no option to the libraries that use them.
    pub fn apply(&self) {
        for s in &self.settings {
            let from_file = matches!(s.origin, Origin::File(_));
            let path = || PathBuf::from(&s.value.items()[0]);
            match s.key.sets {
                Sets::Exclude => {
                    vtnt_job::configure_exclusions(s.value.items().iter().map(PathBuf::from))
                }
                // their variables are read where they are used
                Sets::LibDir if from_file => vtnt_artifacts::configure_lib_dir(path()),
                Sets::CacheDir if from_file => vtnt_runtimes::paths::configure_cache_dir(path()),
                _ => {}
            }
        }
    }
}

/// The value of `--config` in `argv`, before any `--` (clap parses it too, as a global
/// option, but the file must be read before clap parses: it changes the defaults).
fn config_flag(argv: &[OsString]) -> Option<PathBuf> {
    let mut words = argv.iter().skip(1).map(|w| w.as_os_str());
    let mut found = None;
    while let Some(w) = words.next() {
        let Some(s) = w.to_str() else { continue };
        if s == "--" {
            break;
        }
        if s == "--config" {
            found = words.next().map(PathBuf::from);
        } else if let Some(v) = s.strip_prefix("--config=") {
            found = Some(PathBuf::from(v));
        }
    }
    found
}

/// The key's value from its environment variable, when it is set and not empty (a list
/// is comma-separated).
fn from_env(key: &Key) -> anyhow::Result<Option<Setting>> {
    let Some(name) = key.env() else {
        return Ok(None);
    };
    let v = match std::env::var(&name) {
        Ok(v) if !v.is_empty() => v,
        Ok(_) | Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => anyhow::bail!("{name}: not UTF-8"),
    };
    let value = if key.list {
        Value::List(
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        )
    } else {
        Value::One(v)
    };
    Ok(Some(Setting {
        key: *key,
        value,
        origin: Origin::Env(name),
        at: (0, 0),
    }))
}

/// The command `path` names (`"fleet up"`; `""`: `cmd` itself).
fn find_command<'a>(cmd: &'a mut Command, path: &str) -> Option<&'a mut Command> {
    path.split_whitespace()
        .try_fold(cmd, |c, name| c.find_subcommand_mut(name))
}

/// The option `arg` of `cmd`, or of its first subcommand (at any depth) that has it.
fn find_arg<'a>(cmd: &'a Command, arg: &str) -> Option<(&'a Command, &'a Arg)> {
    if let Some(a) = cmd.get_arguments().find(|a| a.get_id() == arg) {
        return Some((cmd, a));
    }
    cmd.get_subcommands().find_map(|c| find_arg(c, arg))
}

/// Runs each value of `s` through the parser of option `arg` of `cmd` (or of a
/// subcommand's), alone in a command of its own: an error names the key, the value and
/// where it was set.
fn check(cmd: &Command, arg: &str, s: &Setting) -> anyhow::Result<()> {
    let Some((_, a)) = find_arg(cmd, arg) else {
        anyhow::bail!(
            "{}: `vtnt {}` has no option `{arg}`",
            s.key.path(),
            cmd.get_name()
        );
    };
    let alone = Command::new("vtnt").arg(
        Arg::new("value")
            .long("value")
            .action(clap::ArgAction::Set)
            .value_parser(a.get_value_parser().clone()),
    );
    for v in s.value.items() {
        alone
            .clone()
            .try_get_matches_from([OsString::from("vtnt"), format!("--value={v}").into()])
            .map_err(|e| anyhow::anyhow!("{}: {} = {v:?}: {}", s.origin, s.key.path(), why(&e)))?;
    }
    Ok(())
}

/// What a value parser's error says about the value alone.
fn why(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    if let Some(source) = std::error::Error::source(e) {
        return source.to_string();
    }
    if let Some(ContextValue::Strings(v)) = e.get(ContextKind::ValidValue) {
        return format!("not one of {}", v.join(", "));
    }
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    first.trim_start_matches("error: ").to_string()
}

/// Makes `values` the default of option `arg` of `cmd` and of every subcommand's (an
/// option given a default is no longer required).
fn set_default(cmd: &mut Command, arg: &str, values: &[clap::builder::OsStr]) {
    *cmd = std::mem::take(cmd).mut_args(|a| {
        if a.get_id() == arg {
            a.default_values(values.to_vec()).required(false)
        } else {
            a
        }
    });
    for sub in cmd.get_subcommands_mut() {
        set_default(sub, arg, values);
    }
}

/// `vtnt config show|sample`; `cmd`: the command line without configuration, for the
/// built-in defaults and the options' help.
pub fn run(what: ConfigCommand, settings: &Settings, mut cmd: Command) -> anyhow::Result<ExitCode> {
    cmd.build();
    let text = match what {
        ConfigCommand::Show => show(settings, &cmd),
        ConfigCommand::Sample => sample(&cmd),
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// The built-in default of `key` as TOML, if it has one.
fn default_of(cmd: &Command, key: &Key) -> Option<String> {
    match key.sets {
        Sets::Options { commands, arg } => {
            let mut c = cmd.clone();
            let c = find_command(&mut c, commands[0])?;
            let (_, a) = find_arg(c, arg)?;
            let d: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            match (key.list, d.as_slice()) {
                (true, _) => Some(render(&Value::List(d))),
                (false, [one]) => Some(render(&Value::One(one.clone()))),
                _ => None,
            }
        }
        Sets::Exclude => Some("[]".into()),
        Sets::LibDir => None,
        Sets::CacheDir => Some(render(&Value::One(
            vtnt_runtimes::paths::DEFAULT_CACHE_DIR.into(),
        ))),
    }
}

/// The help of `key`: its own, or its option's.
fn help_of(cmd: &Command, key: &Key) -> String {
    let Sets::Options { commands, arg } = key.sets else {
        return key.doc.to_string();
    };
    if !key.doc.is_empty() {
        return key.doc.to_string();
    }
    let mut c = cmd.clone();
    find_command(&mut c, commands[0])
        .and_then(|c| find_arg(c, arg))
        .and_then(|(_, a)| a.get_long_help().or(a.get_help()).map(|h| h.to_string()))
        .unwrap_or_default()
}

/// A value as TOML: numbers and booleans bare, everything else a string.
fn render(v: &Value) -> String {
    let one = |s: &String| {
        let bare = s.parse::<i64>().is_ok()
            || s.parse::<f64>()
                .is_ok_and(|f| f.is_finite() && s.contains('.'))
            || s == "true"
            || s == "false";
        if bare {
            s.clone()
        } else {
            toml::Value::String(s.clone()).to_string()
        }
    };
    match v {
        Value::One(s) => one(s),
        Value::List(l) => format!("[{}]", l.iter().map(one).collect::<Vec<_>>().join(", ")),
    }
}

/// `vtnt config show`.
fn show(settings: &Settings, cmd: &Command) -> String {
    let mut out = String::new();
    let state = if settings.read { "read" } else { "not present" };
    let _ = writeln!(
        out,
        "# configuration file: {} ({state}); precedence: flag, environment, file, default",
        settings.path.display()
    );
    for (section, _) in keys::SECTIONS {
        let _ = writeln!(out, "\n[{section}]");
        for key in keys::all().iter().filter(|k| k.section == section) {
            let set = settings.settings.iter().find(|s| s.key == *key);
            match (set, default_of(cmd, key)) {
                (Some(s), _) => {
                    let _ = writeln!(out, "{} = {}  # {}", key.name, render(&s.value), s.origin);
                }
                (None, Some(d)) => {
                    let _ = writeln!(out, "{} = {d}  # default", key.name);
                }
                (None, None) => {
                    let _ = writeln!(out, "# {} is not set", key.name);
                }
            }
        }
    }
    out
}

/// The longest line of the sample's comments.
const WIDTH: usize = 88;

/// `vtnt config sample`.
fn sample(cmd: &Command) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        comment(&format!(
            "vTNT's configuration file: {DEFAULT_PATH}, or the file `--config FILE` or \
             {CONFIG_ENV} names (docs/config.md). Each key gives the default of a command's \
             option; a flag on the command line comes first, then the key's environment \
             variable, then this file, then the built-in default. Every key is shown here \
             commented out at its built-in default (or with an example). vtnt reads this \
             file only when root or the user running vtnt owns it and nobody else may write \
             it, and takes allow-public only from a file of root's. Unknown keys are \
             errors. `vtnt config show` prints what every command would take now."
        ))
    );
    for (section, what) in keys::SECTIONS {
        let _ = writeln!(out, "\n[{section}]\n{}", comment(&format!("{what}.")));
        for key in keys::all().iter().filter(|k| k.section == section) {
            let mut help = help_of(cmd, key);
            if !help.ends_with('.') {
                help.push('.');
            }
            match key.env() {
                Some(env) => help.push_str(&format!(" Environment: {env}.")),
                None => {
                    help.push_str(" Taken only from a file owned by root; no environment variable.")
                }
            }
            let value = default_of(cmd, key).unwrap_or_else(|| key.example.to_string());
            let _ = writeln!(out, "\n{}\n#{} = {value}", comment(&help), key.name);
        }
    }
    out
}

/// `text` as `# ` lines of at most [`WIDTH`] characters (paragraphs kept).
fn comment(text: &str) -> String {
    let mut lines = Vec::new();
    for para in text.split("\n\n") {
        if !lines.is_empty() {
            lines.push("#".to_string());
        }
        let mut line = String::from("#");
        for word in para.split_whitespace() {
            if line.len() + 1 + word.len() > WIDTH && line != "#" {
                lines.push(std::mem::replace(&mut line, String::from("#")));
            }
            line.push(' ');
            line.push_str(word);
        }
        lines.push(line);
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn words(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn every_key_sets_options_that_exist_and_shows_a_value() {
        let mut cmd = crate::Cli::command();
        cmd.build();
        for key in keys::all() {
            if let Sets::Options { commands, arg } = key.sets {
                for path in commands {
                    let mut c = cmd.clone();
                    let found =
                        find_command(&mut c, path).and_then(|c| find_arg(c, arg).map(|_| ()));
                    assert!(found.is_some(), "{}: vtnt {path} has no {arg}", key.path());
                }
            }
            let shown = default_of(&cmd, &key).unwrap_or_else(|| key.example.to_string());
            assert!(
                !shown.is_empty(),
                "{}: neither a default nor an example",
                key.path()
            );
            assert!(!help_of(&cmd, &key).is_empty(), "{}: no help", key.path());
        }
    }

    #[test]
    fn the_file_flag_is_found_before_clap_parses() {
        assert_eq!(config_flag(&words("vtnt trace 127.0.0.1")), None);
        assert_eq!(
            config_flag(&words("vtnt trace --config /a 127.0.0.1")),
            Some(PathBuf::from("/a"))
        );
        assert_eq!(
            config_flag(&words("vtnt --config=/b daemon")),
            Some(PathBuf::from("/b"))
        );
        assert_eq!(
            config_flag(&words("vtnt run -- trace --config /c 192.0.2.1")),
            None
        );
    }

    #[test]
    fn values_are_toml_again() {
        assert_eq!(render(&Value::One("20".into())), "20");
        assert_eq!(render(&Value::One("30.5".into())), "30.5");
        assert_eq!(render(&Value::One("true".into())), "true");
        assert_eq!(render(&Value::One("inf".into())), "\"inf\"");
        assert_eq!(
            render(&Value::List(vec!["native".into(), "a\"b".into()])),
            "[\"native\", 'a\"b']"
        );
    }
}
