//! Copies a directory tree (a scratch project made of the repository's suites, golden store
//! and hardware profiles), shared by the CLI test binaries.

use std::path::Path;

/// Copies `from` into `to` recursively, creating `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (p, dest) = (e.path(), to.join(e.file_name()));
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}
