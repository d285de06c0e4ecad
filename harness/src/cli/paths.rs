//! Where the project's suites, golden data and target declarations live.

use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Paths {
    pub root: PathBuf,
    pub suites: PathBuf,
    pub golden: PathBuf,
    pub targets: PathBuf,
}

impl Paths {
    /// `root` if given, else the nearest ancestor of the current directory holding `suites/`
    /// and `golden/`, else the workspace this binary was built from.
    pub fn discover(root: Option<&Path>) -> anyhow::Result<Paths> {
        let root = match root {
            Some(r) => r.to_path_buf(),
            None => {
                let cwd = std::env::current_dir()?;
                cwd.ancestors()
                    .find(|d| d.join("suites").is_dir() && d.join("golden").is_dir())
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
            }
        };
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
