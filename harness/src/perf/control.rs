//! The kept build of the nightly gate's same-night control (`conform perf keep-control`): a
//! copy of tonight's build that a later night can still start, whatever changed in the
//! checkout since, or a refusal that says why it cannot be kept.
//!
//! - The reference target: a copy of the conform binary that runs this, and a `target.toml`
//!   that serves its reference as a worker on one thread (`conform perf serve-reference
//!   --threads 1`, as the nightly script serves tonight's: a kernel split over threads on a
//!   loaded machine waits for each thread's preempted time slice, a noise the control does
//!   without), with `CONFORM_REFERENCE_SLOWDOWN` cleared (it stands for the build kept, not for
//!   tonight's).
//! - A worker target `targets/<name>/`: a copy of its directory, and of every file or folder
//!   of the repository its `target.toml` names through `${REPO}` (the shipped workers'
//!   `PYTHONPATH = { prepend = "${REPO}/targets/python" }`), put under the copy's `_repo/` with `${REPO}`
//!   rewritten to `${TARGET_DIR}/_repo`: the kept worker runs the helper modules it was kept
//!   with, not tonight's. A declaration that names anything outside its own directory some
//!   other way (`${TARGET_DIR}/..`, an absolute path into the checkout) is refused by name,
//!   as is a copy that does not start (its handshake is tried before it is kept).

use std::path::{Component, Path, PathBuf};

use conform_targets::worker::config::WorkerConfig;
use conform_targets::{Target, WorkerTarget};

/// Where the repository files a kept worker names through `${REPO}` go, inside its copy.
pub const KEPT_REPO_DIR: &str = "_repo";

/// The `target.toml` of a kept reference build (its binary beside it, named `conform`).
pub const KEPT_REFERENCE_TOML: &str = r#"description = "the last good build's reference, served by its own conform binary (conform perf serve-reference)"
command = "${TARGET_DIR}/conform"
args = ["perf", "serve-reference", "--threads", "1"]
device_group = "cpu"

[env]
# It stands for the build kept, not for tonight's: the knob that slows tonight's reference
# for a trial of the gate does not reach it.
CONFORM_REFERENCE_SLOWDOWN = ""

[timeouts]
handshake_s = 30
request_s = 300
timed_request_s = 900
"#;

/// Why a build cannot be kept as the control.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error("cannot keep the control: {0} is not a worker directory (no target.toml)")]
    NotAWorker(PathBuf),
    #[error("cannot keep the control: {0}")]
    Declaration(String),
    #[error(
        "cannot keep the control: {toml} names `{named}`, outside the worker's own directory \
         ({how}); the kept copy would not carry it. Name it through ${{TARGET_DIR}} (a file \
         of the worker) or ${{REPO}} (a file of the repository, copied with the worker), or \
         run the night with --no-control"
    )]
    Outside {
        toml: PathBuf,
        named: String,
        how: &'static str,
    },
    #[error("cannot keep the control: {path}: {source}")]
    Copy {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot keep the control: the kept copy in {dir} does not start: {reason}; nothing \
         was kept"
    )]
    DoesNotStart { dir: PathBuf, reason: String },
}

/// What was kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// The kept worker's directory.
    pub dir: PathBuf,
    /// Files and folders of the repository copied with it (relative to the repository).
    pub repo_paths: Vec<PathBuf>,
}

/// Keeps tonight's build of `target` (of the project at `root`) in `into` (created; must not
/// exist or be empty): the reference as a copy of `conform` (this binary), a worker as a copy
/// of its directory and of what it names in the repository. The copy's handshake is tried.
pub fn keep(root: &Path, target: &str, into: &Path, conform: &Path) -> Result<Kept, KeepError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KeepError::Copy { path, source }
    };
    std::fs::create_dir_all(into).map_err(io(into))?;
    let mut repo_paths = Vec::new();
    if target == conform_targets::REFERENCE_TARGET {
        let bin = into.join("conform");
        std::fs::copy(conform, &bin).map_err(io(&bin))?;
        let toml = into.join("target.toml");
        std::fs::write(&toml, KEPT_REFERENCE_TOML).map_err(io(&toml))?;
    } else {
        let dir = root.join("targets").join(target);
        let toml_path = dir.join("target.toml");
        if !toml_path.is_file() {
            return Err(KeepError::NotAWorker(dir));
        }
        let cfg =
            WorkerConfig::load(&toml_path).map_err(|e| KeepError::Declaration(e.to_string()))?;
        repo_paths = named_repo_paths(&cfg, root, &toml_path)?;
        copy_tree(&dir, into)?;
        for rel in &repo_paths {
            let from = root.join(rel);
            if from.exists() {
                copy_tree(&from, &into.join(KEPT_REPO_DIR).join(rel))?;
            }
        }
        let text = std::fs::read_to_string(&toml_path).map_err(io(&toml_path))?;
        let kept_toml = into.join("target.toml");
        let rewritten = text.replace("${REPO}", &format!("${{TARGET_DIR}}/{KEPT_REPO_DIR}"));
        std::fs::write(&kept_toml, rewritten).map_err(io(&kept_toml))?;
    }
    let dir = std::fs::canonicalize(into).map_err(io(into))?;
    let mut worker =
        WorkerTarget::from_dir(root, &dir).map_err(|e| KeepError::Declaration(e.to_string()))?;
    if let conform_targets::Availability::Unavailable { reason } = worker.availability() {
        return Err(KeepError::DoesNotStart { dir, reason });
    }
    Ok(Kept { dir, repo_paths })
}

/// Every value of a declaration that is started with: command, arguments, environment values
/// and working directory.
fn started_values(cfg: &WorkerConfig) -> Vec<&str> {
    std::iter::once(cfg.command.as_str())
        .chain(cfg.args.iter().map(String::as_str))
        .chain(cfg.env.values().flat_map(|v| v.declared_parts()))
        .chain(cfg.working_dir.as_deref())
        .collect()
}

/// The paths of the repository a declaration names through `${REPO}/...` (relative, each
/// ending at a `:` list separator, whitespace or a quote); a refusal for anything it names
/// outside the worker's directory in another way.
fn named_repo_paths(
    cfg: &WorkerConfig,
    root: &Path,
    toml: &Path,
) -> Result<Vec<PathBuf>, KeepError> {
    let outside = |named: &str, how| KeepError::Outside {
        toml: toml.to_path_buf(),
        named: named.to_string(),
        how,
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for value in started_values(cfg) {
        for part in value.split([':', ' ', '=', ',']) {
            let part = part.trim_matches(|c| c == '"' || c == '\'');
            if let Some(rest) = part.strip_prefix("${REPO}") {
                let rel = rest.trim_start_matches('/');
                let rel = normal_relative(rel)
                    .filter(|r| !r.as_os_str().is_empty())
                    .ok_or_else(|| outside(part, "the repository itself, or a path out of it"))?;
                if !out.contains(&rel) {
                    out.push(rel);
                }
            } else if let Some(rest) = part.strip_prefix("${TARGET_DIR}") {
                if normal_relative(rest.trim_start_matches('/')).is_none() {
                    return Err(outside(part, "`..` out of the worker's directory"));
                }
            } else if Path::new(part).is_absolute() && Path::new(part).starts_with(root) {
                return Err(outside(
                    part,
                    "an absolute path into tonight's checkout, which changes with it",
                ));
            }
        }
    }
    Ok(out)
}

/// `rel` with `.` dropped, or None when a `..` would leave its base (or it is absolute).
fn normal_relative(rel: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(x) => out.push(x),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Copies a file, or a directory recursively (symbolic links as the files they point to).
fn copy_tree(from: &Path, to: &Path) -> Result<(), KeepError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KeepError::Copy { path, source }
    };
    if from.is_dir() {
        std::fs::create_dir_all(to).map_err(err(to))?;
        for entry in std::fs::read_dir(from).map_err(err(from))? {
            let entry = entry.map_err(err(from))?;
            let name = entry.file_name();
            // Python's caches are rebuilt where the copy runs.
            if name == "__pycache__" {
                continue;
            }
            copy_tree(&entry.path(), &to.join(name))?;
        }
        Ok(())
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(err(parent))?;
        }
        std::fs::copy(from, to).map(|_| ()).map_err(err(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> WorkerConfig {
        WorkerConfig::parse(Path::new("t/target.toml"), text).unwrap()
    }

    #[test]
    fn repo_paths_are_collected_and_paths_outside_refused() {
        let c = cfg(r#"command = "${CONFORM_PYTHON}"
args = ["${TARGET_DIR}/worker.py", "--helpers=${REPO}/targets/common/x.py"]
[env]
PYTHONPATH = "${REPO}/targets/python:${REPO}/./targets/python"
LD_LIBRARY_PATH = { prepend = "${REPO}/targets/lib", append = "${REPO}/targets/lib2" }
"#);
        let paths = named_repo_paths(&c, Path::new("/repo"), Path::new("t/target.toml")).unwrap();
        assert_eq!(
            paths,
            vec![
                PathBuf::from("targets/common/x.py"),
                PathBuf::from("targets/lib"),
                PathBuf::from("targets/lib2"),
                PathBuf::from("targets/python")
            ]
        );
        // An edit's parts are read like a set value: the shipped workers prepend PYTHONPATH.
        let c = cfg(r#"command = "python3"
[env]
PYTHONPATH = { prepend = "${REPO}/../outside" }
"#);
        let e = named_repo_paths(&c, Path::new("/repo"), Path::new("t/target.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of it"), "{e}");
        for (bad, what) in [
            (
                r#"args = ["${TARGET_DIR}/../common/helper.py"]"#,
                "out of the worker",
            ),
            (
                r#"args = ["/repo/targets/common/helper.py"]"#,
                "absolute path",
            ),
            (r#"args = ["${REPO}/../elsewhere.py"]"#, "out of it"),
            (r#"args = ["${REPO}"]"#, "repository itself"),
        ] {
            let c = cfg(&format!("command = \"python3\"\n{bad}\n"));
            let e = named_repo_paths(&c, Path::new("/repo"), Path::new("t/target.toml"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(what) && e.contains("t/target.toml"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn relative_paths_never_climb_out() {
        assert_eq!(normal_relative("a/./b/../c"), Some(PathBuf::from("a/c")));
        assert_eq!(normal_relative("../a"), None);
        assert_eq!(normal_relative("a/../../b"), None);
        assert_eq!(normal_relative("/etc"), None);
    }
}
