//! `targets/<name>/target.toml`: how to start a worker.
//!
//! ```toml
//! description = "FP4 decode and MXFP4/NVFP4 dequant through ml_dtypes"
//! command = "${CONFORM_PYTHON}"          # placeholders: see below
//! args = ["${TARGET_DIR}/worker.py"]
//! working_dir = "."                      # relative to the target's directory
//! device_group = "cpu"                   # trials of one non-cpu group never overlap
//! [env]                                  # set outright, or edit the inherited value
//! PYTHONPATH = { prepend = "${REPO}/targets/python" }
//! [timeouts]
//! handshake_s = 30
//! request_s = 120
//! timed_request_s = 600
//! [limits]
//! address_space_mb = 32768
//! cpu_s = 3600
//! ```
//!
//! Placeholders in `command`, `args`, `env` values and `working_dir`: `${REPO}` (the
//! repository root), `${TARGET_DIR}` (this target's directory), `${CONFORM_PYTHON}` (the
//! interpreter: `$CONFORM_PYTHON` if set, else `<repo>/.venv/bin/python` if it exists, else
//! `python3`). An `[env]` entry is a string (the variable is set to it, replacing what the
//! worker would inherit) or `{ prepend = "...", append = "...", separator = ":" }`, which keeps
//! the inherited value between its parts ([`super::env`]).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::env::{resolve_env, EnvValue};
use thiserror::Error;

/// Timeouts, in seconds.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// Start-up to the handshake line.
    #[serde(default = "default_handshake")]
    pub handshake_s: f64,
    /// One untimed request.
    #[serde(default = "default_request")]
    pub request_s: f64,
    /// One request with a timing request (warm-up plus iterations).
    #[serde(default = "default_timed_request")]
    pub timed_request_s: f64,
}

fn default_handshake() -> f64 {
    30.0
}
fn default_request() -> f64 {
    120.0
}
fn default_timed_request() -> f64 {
    600.0
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            handshake_s: default_handshake(),
            request_s: default_request(),
            timed_request_s: default_timed_request(),
        }
    }
}

/// Resource limits applied to the worker process where the OS allows (setrlimit).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// RLIMIT_AS in MiB (address space; device runtimes reserve a lot of it: leave unset for
    /// GPU/NPU workers).
    #[serde(default)]
    pub address_space_mb: Option<u64>,
    /// RLIMIT_CPU in seconds of CPU time for the whole worker lifetime.
    #[serde(default)]
    pub cpu_s: Option<u64>,
}

/// A parsed `target.toml`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    #[serde(default)]
    pub description: String,
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for the worker, or edits of the ones it inherits ([`super::env`]).
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    #[serde(default)]
    pub working_dir: Option<String>,
    /// Which device the worker uses (`cpu`, `cuda:0`, `npu`); see
    /// [`crate::target::Target::device_group`] for what the harness does with it.
    #[serde(default = "default_group")]
    pub device_group: String,
    #[serde(default)]
    pub timeouts: Timeouts,
    #[serde(default)]
    pub limits: Limits,
    /// Why the implementation may give different bits for the same inputs (atomics, a
    /// reduction order that depends on scheduling), when it does. A worker that declares it is
    /// not held to bit-identical repeats; the results and the report say so with this reason.
    #[serde(default)]
    pub nondeterministic: Option<String>,
}

fn default_group() -> String {
    crate::target::CPU_DEVICE_GROUP.to_string()
}

/// A `target.toml` that cannot be used; names the file and, where known, the field.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: field `{field}`: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
}

/// A configuration with placeholders expanded: ready to spawn.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedConfig {
    pub description: String,
    pub command: String,
    pub args: Vec<String>,
    /// The variables set for the worker, edits applied to conform's own environment.
    pub env: BTreeMap<String, OsString>,
    pub working_dir: PathBuf,
    pub device_group: String,
    pub timeouts: Timeouts,
    pub limits: Limits,
    pub nondeterministic: Option<String>,
}

/// The Python interpreter workers use (see the module docs).
pub fn python_interpreter(repo: &Path) -> String {
    if let Ok(p) = std::env::var("CONFORM_PYTHON")
        && !p.is_empty()
    {
        return p;
    }
    let venv = repo.join(".venv").join("bin").join("python");
    if venv.exists() {
        venv.to_string_lossy().into_owned()
    } else {
        "python3".to_string()
    }
}

fn positive(path: &Path, field: &str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            field: field.to_string(),
            message: format!("must be a positive number of seconds, got {v}"),
        })
    }
}

impl WorkerConfig {
    /// Parses `text` (the contents of `path`).
    pub fn parse(path: &Path, text: &str) -> Result<WorkerConfig, ConfigError> {
        let cfg: WorkerConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        if cfg.command.trim().is_empty() {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                field: "command".into(),
                message: "must not be empty".into(),
            });
        }
        positive(path, "timeouts.handshake_s", cfg.timeouts.handshake_s)?;
        positive(path, "timeouts.request_s", cfg.timeouts.request_s)?;
        positive(
            path,
            "timeouts.timed_request_s",
            cfg.timeouts.timed_request_s,
        )?;
        for (field, v) in [
            ("limits.address_space_mb", cfg.limits.address_space_mb),
            ("limits.cpu_s", cfg.limits.cpu_s),
        ] {
            if v == Some(0) {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    field: field.into(),
                    message: "must be positive (leave it out for no limit)".into(),
                });
            }
        }
        if let Some(why) = &cfg.nondeterministic
            && why.trim().is_empty()
        {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                field: "nondeterministic".into(),
                message: "say why the outputs may differ between identical calls (an empty \
                          reason is not one)"
                    .into(),
            });
        }
        Ok(cfg)
    }

    /// Reads and parses a `target.toml`.
    pub fn load(path: &Path) -> Result<WorkerConfig, ConfigError> {
        let text = crate::input_file::read_text(path, crate::input_file::Limit::WORKER_DECLARATION)
            .map_err(|source| ConfigError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        WorkerConfig::parse(path, &text)
    }

    /// Expands the placeholders for a target in `target_dir` of the repository at `repo`, and
    /// applies the `[env]` edits to this process's environment (what the worker inherits).
    pub fn resolve(&self, repo: &Path, target_dir: &Path) -> ResolvedConfig {
        let python = python_interpreter(repo);
        let expand = |s: &str| {
            s.replace("${REPO}", &repo.to_string_lossy())
                .replace("${TARGET_DIR}", &target_dir.to_string_lossy())
                .replace("${CONFORM_PYTHON}", &python)
        };
        let working_dir = match &self.working_dir {
            Some(w) => {
                let w = PathBuf::from(expand(w));
                if w.is_absolute() {
                    w
                } else {
                    target_dir.join(w)
                }
            }
            None => target_dir.to_path_buf(),
        };
        ResolvedConfig {
            description: self.description.clone(),
            command: expand(&self.command),
            args: self.args.iter().map(|a| expand(a)).collect(),
            env: resolve_env(&self.env, expand, |name| std::env::var_os(name)),
            working_dir,
            device_group: self.device_group.clone(),
            timeouts: self.timeouts.clone(),
            limits: self.limits.clone(),
            nondeterministic: self.nondeterministic.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nondeterministic_declaration_needs_a_reason() {
        let p = Path::new("targets/x/target.toml");
        let cfg = WorkerConfig::parse(
            p,
            "command = \"x\"\nnondeterministic = \"atomics in the split-K reduction\"\n",
        )
        .unwrap();
        assert_eq!(
            cfg.nondeterministic.as_deref(),
            Some("atomics in the split-K reduction")
        );
        assert_eq!(
            WorkerConfig::parse(p, "command = \"x\"\n")
                .unwrap()
                .nondeterministic,
            None
        );
        let e = WorkerConfig::parse(p, "command = \"x\"\nnondeterministic = \" \"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("targets/x/target.toml: field `nondeterministic`: say why"),
            "{e}"
        );
    }

    #[test]
    fn parses_defaults_and_expands_placeholders() {
        let p = Path::new("targets/x/target.toml");
        let cfg = WorkerConfig::parse(
            p,
            r#"
command = "${CONFORM_PYTHON}"
args = ["${TARGET_DIR}/worker.py", "--flag"]
[env]
PYTHONPATH = "${REPO}/targets/python"
CONFORM_TEST_NEVER_SET = { prepend = "${TARGET_DIR}/lib" }
[timeouts]
request_s = 5
"#,
        )
        .unwrap();
        assert_eq!(cfg.timeouts.request_s, 5.0);
        assert_eq!(cfg.timeouts.handshake_s, 30.0);
        assert_eq!(cfg.device_group, "cpu");
        let r = cfg.resolve(Path::new("/repo"), Path::new("/repo/targets/x"));
        assert_eq!(r.args, vec!["/repo/targets/x/worker.py", "--flag"]);
        assert_eq!(r.env["PYTHONPATH"], "/repo/targets/python");
        // An edit of a variable conform does not have is its own part alone.
        assert!(std::env::var_os("CONFORM_TEST_NEVER_SET").is_none());
        assert_eq!(r.env["CONFORM_TEST_NEVER_SET"], "/repo/targets/x/lib");
        assert_eq!(r.working_dir, PathBuf::from("/repo/targets/x"));
        assert!(!r.command.contains("${"));
    }

    #[test]
    fn errors_name_file_and_field() {
        let p = Path::new("targets/bad/target.toml");
        let e = WorkerConfig::parse(p, "command = \"x\"\ncomand = 1\n").unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("targets/bad/target.toml") && s.contains("comand"),
            "{s}"
        );
        let e =
            WorkerConfig::parse(p, "command = \"x\"\n[timeouts]\nrequest_s = -1\n").unwrap_err();
        assert!(e.to_string().contains("timeouts.request_s"), "{e}");
        let e = WorkerConfig::parse(p, "command = \"\"\n").unwrap_err();
        assert!(e.to_string().contains("`command`"), "{e}");
        let e = WorkerConfig::parse(p, "command = \"x\"\n[limits]\ncpu_s = 0\n").unwrap_err();
        assert!(e.to_string().contains("limits.cpu_s"), "{e}");
        let e = WorkerConfig::load(Path::new("/nonexistent/target.toml")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/target.toml"));
    }
}
