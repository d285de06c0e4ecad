//! Parsing and validating MC2 cost files: the shipped seed file and each kind of bad field.

use std::path::Path;

use conform_harness::mc2_costs::{load_costs, parse_costs, Mc2CostsError};
use conform_reference::mc2::{CostAxis, ShortTileRule};

const SEED_COSTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../suites/mc2/costs-seed-example.toml"
);

const MINIMAL: &str = r#"
[matmul]
axis = "gflop"
segments = [{ kind = "linear", slope = 3.2, intercept = 5.0 }]

[communication]
axis = "mib"
segments = [{ kind = "linear", slope = 13.5, intercept = 61.5 }]
"#;

fn err(text: &str) -> String {
    parse_costs(text, Path::new("t.toml"))
        .unwrap_err()
        .to_string()
}

#[test]
fn seed_file_loads_with_the_seed_figures() {
    let c = load_costs(Path::new(SEED_COSTS)).unwrap();
    assert_eq!(c.matmul.axis, CostAxis::Rows);
    assert_eq!(c.matmul.time_us(4096.0, 3072, 8192, 2), 803.0);
    assert_eq!(c.comm.axis, CostAxis::Mebibytes);
    assert_eq!(c.comm.model.breakpoints(), &[8.0]);
    assert_eq!(
        c.comm.time_us(4096.0, 3072, 8192, 2),
        13.58491263 * 64.0 + 61.508333
    );
    let u = c.unsplit.unwrap();
    assert_eq!((u.matmul_us, u.comm_us), (803.0, 1071.0));
    assert_eq!(c.measured_fused_us, Some(1262.0));
    assert_eq!(c.planner.contention, 1.15);
    assert_eq!(c.planner.short_tile_rule, ShortTileRule::SmallestMeetingAll);
    let s = c.shape.unwrap();
    assert_eq!((s.m, s.k, s.n), (4096, 3072, 8192));
}

#[test]
fn minimal_file_uses_the_seed_defaults() {
    let c = parse_costs(MINIMAL, Path::new("t.toml")).unwrap();
    assert_eq!(c.planner.alignment, 128);
    assert_eq!(c.planner.max_tiles, 16);
    assert_eq!(c.inflation.matmul, 1.0);
    assert!(c.unsplit.is_none() && c.shape.is_none());
}

#[test]
fn bad_fields_are_named() {
    let e = err(&MINIMAL.replace("slope = 3.2", "slope = -3.2"));
    assert!(
        e.contains("t.toml") && e.contains("`matmul`") && e.contains("not monotone"),
        "{e}"
    );
    let e = err(&MINIMAL.replace(
        "kind = \"linear\", slope = 3.2",
        "kind = \"cubic\", slope = 3.2",
    ));
    assert!(e.contains("cubic"), "{e}");
    let e = err(&MINIMAL.replace("intercept = 5.0", "intercept = 5.0, d = 1.0"));
    assert!(e.contains("unknown field") && e.contains('d'), "{e}");
    let e = err(&format!("{MINIMAL}\n[planner]\ncontention = 0.0\n"));
    assert!(e.contains("planner.contention"), "{e}");
    let e = err(&format!("{MINIMAL}\n[planner]\nalignment = 0\n"));
    assert!(e.contains("planner.alignment"), "{e}");
    let e = err(&format!("{MINIMAL}\n[timeline]\ncomm_inflation = -1.0\n"));
    assert!(e.contains("timeline.comm_inflation"), "{e}");
    let e = err(&format!(
        "{MINIMAL}\n[measured]\nmatmul_us = 1.0\ncomm_us = 2.0\n"
    ));
    assert!(e.contains("`measured`") && e.contains("[shape]"), "{e}");
    let e = err(&format!(
        "{MINIMAL}\n[shape]\nm = 1\nk = 1\nn = 1\ndtype = \"f8\"\n"
    ));
    assert!(e.contains("shape.dtype") && e.contains("f8"), "{e}");
    let e = err(&MINIMAL.replace("axis = \"gflop\"", "axis = \"rows\""));
    assert!(e.contains("`shape`"), "{e}");
    let e = err(&MINIMAL.replace("axis = \"mib\"", "axis = \"mib\"\nbreakpoints = [8.0]"));
    assert!(
        e.contains("`communication`") && e.contains("breakpoint"),
        "{e}"
    );
    let e = err("[matmul\n");
    assert!(e.contains("is not valid"), "{e}");
    assert!(matches!(
        parse_costs("", Path::new("t.toml")),
        Err(Mc2CostsError::Parse { .. })
    ));
}
