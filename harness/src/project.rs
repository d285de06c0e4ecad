//! A conform project: where its suites, golden data and target declarations live, and which of
//! its cases a request selects.

use crate::suite::select::{load_all, Selection};
use crate::suite::{Case, SuiteError, Tier, TierChoice};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Paths {
    pub root: PathBuf,
    pub suites: PathBuf,
    pub golden: PathBuf,
    pub targets: PathBuf,
    /// Whether the root was given (`--root`, `CONFORM_ROOT`) rather than found from the
    /// working directory.
    pub given: bool,
}

/// Why no project was found.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The working directory cannot be read.
    #[error("{0}")]
    CurrentDir(std::io::Error),
    /// No ancestor of the working directory holds `suites/` and `golden/`.
    #[error("{}", crate::messages::no_project_root(.cwd))]
    NoRoot { cwd: PathBuf },
    /// The root given holds no `suites/` and `golden/`.
    #[error("{}", crate::messages::not_a_project_root(.root))]
    NotARoot { root: PathBuf },
}

impl Paths {
    /// `root` if given (`--root` or `CONFORM_ROOT`), else the nearest ancestor of the current
    /// directory holding `suites/` and `golden/`. Outside any checkout this is an error naming
    /// both ways out: silently using the checkout the binary was built from would test other
    /// suites than the user thinks.
    pub fn discover(root: Option<&Path>) -> Result<Paths, ProjectError> {
        let root_given = root;
        let root = match root {
            Some(r) => r.to_path_buf(),
            None => {
                let cwd = std::env::current_dir().map_err(ProjectError::CurrentDir)?;
                cwd.ancestors()
                    .find(|d| is_root(d))
                    .map(Path::to_path_buf)
                    .ok_or(ProjectError::NoRoot { cwd })?
            }
        };
        if !is_root(&root) {
            return Err(ProjectError::NotARoot { root });
        }
        let given = root_given.is_some();
        Ok(Paths {
            given,
            ..Paths::at(&root)
        })
    }

    /// The root as replay lines name it: its absolute path when it was given (a line printed
    /// under `--root X` must run when pasted elsewhere), None when it was found from the
    /// working directory (the line then runs in the checkout, as typed).
    pub fn given_root(&self) -> Option<String> {
        self.given.then(|| {
            std::path::absolute(&self.root)
                .unwrap_or_else(|_| self.root.clone())
                .display()
                .to_string()
        })
    }

    /// The layout under `root`.
    pub fn at(root: &Path) -> Paths {
        Paths {
            root: root.to_path_buf(),
            suites: root.join("suites"),
            golden: root.join("golden"),
            targets: root.join("targets"),
            given: false,
        }
    }
}

/// Whether `dir` is a conform project root (it holds `suites/` and `golden/`).
fn is_root(dir: &Path) -> bool {
    dir.join("suites").is_dir() && dir.join("golden").is_dir()
}

/// Which cases a request acts on: suites by name, ids by regular expression, a tier.
#[derive(Clone, Debug, Default)]
pub struct CaseQuery {
    /// Only these suites (empty: every suite).
    pub suites: Vec<String>,
    /// Only cases whose id matches this regular expression.
    pub filter: Option<String>,
    /// The tier (default: quick).
    pub tier: Option<TierChoice>,
}

/// Why a query selects nothing it can run.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// A suite file that does not load.
    #[error(transparent)]
    Suite(#[from] SuiteError),
    /// A filter that is no regular expression.
    #[error("--filter: {0}")]
    Filter(regex::Error),
    /// Suites named that do not exist.
    #[error("{}", crate::messages::unknown_suites(.0))]
    UnknownSuites(Vec<String>),
}

impl CaseQuery {
    /// The cases this query selects: every suite loaded (and so validated), then those it
    /// matches; or why not: a suite that does not load, a filter that is no regex, a suite
    /// name that names no suite.
    pub fn load_selected(&self, paths: &Paths) -> Result<Vec<Case>, SelectError> {
        let cases = load_all(&paths.suites)?;
        let sel = self.selection()?;
        let unknown = sel.unknown_suites(&cases);
        if !unknown.is_empty() {
            return Err(SelectError::UnknownSuites(unknown));
        }
        Ok(cases.into_iter().filter(|c| sel.matches(c)).collect())
    }

    /// The selection this query makes; an error for a filter that is no regex.
    pub fn selection(&self) -> Result<Selection, SelectError> {
        let filter = match &self.filter {
            Some(f) => Some(regex::Regex::new(f).map_err(SelectError::Filter)?),
            None => None,
        };
        let (tier, all_tiers) = match self.tier.unwrap_or(TierChoice::Quick) {
            TierChoice::Full => (Some(Tier::Full), false),
            TierChoice::All => (None, true),
            TierChoice::Quick => (Some(Tier::Quick), false),
        };
        Ok(Selection {
            suites: self.suites.clone(),
            filter,
            tier,
            all_tiers,
        })
    }
}
