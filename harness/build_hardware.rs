//! Builds the hardware profiles (`ci/hardware/*.toml`) into the library as text:
//! `$OUT_DIR/hardware_profiles.rs` holds `PROFILES`, one `(id, include_str!(file))` per file,
//! sorted by id (`src/perf/soc.rs` reads it). A profile edited or added rebuilds the library.

use std::fmt::Write as _;
use std::path::Path;

pub fn embed_profiles() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/hardware");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry of ci/hardware").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from("pub(super) const PROFILES: &[(&str, &str)] = &[\n");
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let id = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 file name");
        let path = path.to_str().expect("a UTF-8 path");
        writeln!(out, "    ({id:?}, include_str!({path:?})),").expect("writing to a String");
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo"))
        .join("hardware_profiles.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}
