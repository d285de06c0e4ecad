//! Where the project's suites, golden data and target declarations live.

use super::error::CliError;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Paths {
    pub root: PathBuf,
    pub suites: PathBuf,
    pub golden: PathBuf,
    pub targets: PathBuf,
}

impl Paths {
    /// `root` if given (`--root` or `CONFORM_ROOT`), else the nearest ancestor of the current
    /// directory holding `suites/` and `golden/`. Outside any checkout this is an error naming
    /// both ways out: silently using the checkout the binary was built from would test other
    /// suites than the user thinks.
    pub fn discover(root: Option<&Path>) -> Result<Paths, CliError> {
        let root = match root {
            Some(r) => r.to_path_buf(),
            None => {
                let cwd = std::env::current_dir().map_err(|e| CliError::Project(e.to_string()))?;
                cwd.ancestors()
                    .find(|d| is_root(d))
                    .map(Path::to_path_buf)
                    .ok_or_else(|| CliError::Project(crate::messages::no_project_root(&cwd)))?
            }
        };
        if !is_root(&root) {
            return Err(CliError::Project(crate::messages::not_a_project_root(
                &root,
            )));
        }
        Ok(Paths::at(&root))
    }

    /// The layout under `root`.
    pub fn at(root: &Path) -> Paths {
        Paths {
            root: root.to_path_buf(),
            suites: root.join("suites"),
            golden: root.join("golden"),
            targets: root.join("targets"),
        }
    }
}

/// Whether `dir` is a conform project root (it holds `suites/` and `golden/`).
fn is_root(dir: &Path) -> bool {
    dir.join("suites").is_dir() && dir.join("golden").is_dir()
}
