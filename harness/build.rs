//! Generates the check-policy registry from the files in `src/verdict/policies/`: every file
//! there except `mod.rs` is one policy, whose judge is the type named by its
//! `impl Policy for <Type>` line. So adding a policy is adding its file (docs/verdicts.md,
//! "Adding a check policy"); nothing else lists it. And builds the hardware profiles in
//! (`build_hardware.rs`).

use std::fmt::Write as _;
use std::path::Path;

#[path = "build_hardware.rs"]
mod build_hardware;

fn main() {
    build_hardware::embed_profiles();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/verdict/policies");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry of the policies folder").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter(|p| p.file_name().is_some_and(|n| n != "mod.rs"))
        .collect();
    files.sort();
    let mut out = String::from("registry! {\n");
    for path in &files {
        let module = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 file name");
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let judges: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("impl Policy for "))
            .map(|rest| rest.split([' ', '{']).next().unwrap_or_default())
            .collect();
        let [judge] = judges[..] else {
            panic!(
                "{}: a policy file needs exactly one `impl Policy for <Type>` line at the start \
                 of a line (found {})",
                path.display(),
                judges.len()
            );
        };
        let path = path.to_str().expect("a UTF-8 path");
        writeln!(out, "    #[path = {path:?}] {module}::{judge},").expect("writing to a String");
    }
    out.push_str("}\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo"))
        .join("policy_registry.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}
