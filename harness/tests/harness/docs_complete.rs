//! The documentation a third-party author works from is complete, checked against the code
//! rather than a list kept by hand: every op family of the reference has its parameters and
//! tensors section in docs/suites.md naming every parameter its type accepts and every tensor
//! its cases exchange; every `target.toml` key the worker declaration accepts has its row in
//! docs/workers.md; targets/PROTOCOL.md lists every dtype the protocol carries;
//! ci/contribution.md names every op and the example to copy; the documented shape needs of
//! a regime are the loader's.

use conform_reference::ops::{self, ElemType, Regime};
use conform_targets::worker::config::WorkerConfig;
use std::collections::BTreeSet;
use std::path::Path;

fn doc(path: &str) -> String {
    std::fs::read_to_string(crate::repo::repo().join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The field names a serde error lists after "expected" (`expected one of `a`, `b``, or
/// `expected `a``): what the type accepts, as the code declares it.
fn expected_fields(message: &str) -> Vec<String> {
    let Some((_, tail)) = message.split_once("expected") else {
        panic!("not an unknown-field error: {message}");
    };
    tail.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The part of `text` from the heading `start` to the next heading of the same level.
fn section<'a>(text: &'a str, start: &str) -> Option<&'a str> {
    let level = start.split(' ').next().unwrap_or("#");
    let at = text.find(&format!("\n{start}\n"))? + 1;
    let body = &text[at + start.len()..];
    let end = body
        .match_indices(&format!("\n{level} "))
        .map(|(i, _)| i)
        .next()
        .unwrap_or(body.len());
    Some(&body[..end])
}

/// Every parameter of every op family (from the op's own refusal of an unknown one) and
/// every tensor its suite cases exchange (from the op's description of each) are named in the
/// family's section of docs/suites.md.
#[test]
fn docs_complete_every_op_family_has_its_parameters_and_tensors_section() {
    let suites = doc("docs/suites.md");
    let part = section(&suites, "## Op families: parameters and tensors")
        .expect("docs/suites.md has the section `## Op families: parameters and tensors`");
    let cases = conform_harness::suite::select::load_all(&crate::repo::repo().join("suites"))
        .expect("the suites load");
    let mut problems = Vec::new();
    for family in ops::registry() {
        let op = family.name();
        let Some(text) = section(part, &format!("### `{op}`")) else {
            problems.push(format!("no section \"### `{op}`\""));
            continue;
        };
        let probe = family
            .describe(&serde_json::json!({ "zz_probe": 1 }))
            .expect_err("an unknown parameter is refused");
        let params = expected_fields(&probe.to_string());
        assert!(!params.is_empty(), "{op}: {probe}");
        let mut tensors = BTreeSet::new();
        for c in cases.iter().filter(|c| c.op == op) {
            let d = family.describe(&c.params).unwrap();
            tensors.extend(d.inputs.iter().chain(&d.outputs).map(|s| s.name.clone()));
        }
        assert!(!tensors.is_empty(), "no suite case of {op}");
        for name in params.iter().chain(&tensors) {
            if !text.contains(&format!("`{name}`")) {
                problems.push(format!("`{op}`: `{name}` is not named in its section"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/suites.md:\n{}",
        problems.join("\n")
    );
}

/// Every key `target.toml` accepts (its top level, `[timeouts]` and `[limits]`, from the
/// declaration's own refusal of an unknown key) has a row in docs/workers.md's table, with a
/// default.
#[test]
fn docs_complete_every_target_toml_key_has_its_row() {
    let workers = doc("docs/workers.md");
    let table = section(&workers, "## `target.toml`: every key")
        .expect("docs/workers.md has the section `## `target.toml`: every key`");
    let p = Path::new("target.toml");
    let mut keys = Vec::new();
    for (prefix, text) in [
        ("", "command = \"x\"\nzz_probe = 1\n"),
        ("timeouts.", "command = \"x\"\n[timeouts]\nzz_probe = 1\n"),
        ("limits.", "command = \"x\"\n[limits]\nzz_probe = 1\n"),
    ] {
        let e = WorkerConfig::parse(p, text).expect_err("an unknown key is refused");
        for f in expected_fields(&e.to_string()) {
            // The tables are documented by their keys.
            if prefix.is_empty() && (f == "timeouts" || f == "limits") {
                continue;
            }
            keys.push(format!("{prefix}{f}"));
        }
    }
    assert!(keys.len() >= 10, "{keys:?}");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| `")).collect();
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| {
            !rows.iter().any(|r| {
                r.split('|').nth(1).is_some_and(|first| {
                    first
                        .split('`')
                        .skip(1)
                        .step_by(2)
                        .any(|name| name == k.as_str())
                })
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "target.toml keys without a row in docs/workers.md: {missing:?}"
    );
    // Every row says its default (the second column is never empty).
    for r in rows {
        let default = r.split('|').nth(2).unwrap_or("").trim();
        assert!(!default.is_empty(), "a row without its default: {r}");
    }
}

/// targets/PROTOCOL.md's list of the dtypes on the wire is every dtype the protocol carries.
#[test]
fn docs_complete_the_protocol_lists_every_dtype() {
    let protocol = doc("targets/PROTOCOL.md");
    let line = protocol
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("Dtypes:"))
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(!line.is_empty(), "no `Dtypes:` list in targets/PROTOCOL.md");
    let listed: BTreeSet<String> = line
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_string)
        .collect();
    for t in ElemType::ALL {
        let name = t.name();
        assert!(
            listed.contains(name),
            "targets/PROTOCOL.md's dtype list lacks {name}: {line}"
        );
    }
}

/// ci/contribution.md names every op a contribution may implement and the example worker
/// docs/workers.md says to copy.
#[test]
fn docs_complete_the_contribution_guide_lists_every_op() {
    let guide = doc("ci/contribution.md");
    let missing: Vec<&str> = ops::registry()
        .iter()
        .map(|f| f.name())
        .filter(|op| !guide.contains(&format!("`{op}`")))
        .collect();
    assert!(missing.is_empty(), "ci/contribution.md lacks {missing:?}");
    assert!(guide.contains("targets/example/"));
    assert!(doc("docs/workers.md").contains("Copy `targets/example/`"));
}

/// The column count docs/suites.md gives for `int_matmul_edges` is the loader's: a case with
/// that many columns loads, one with one column fewer is refused.
#[test]
fn docs_complete_the_int_matmul_edges_shape_is_the_loaders() {
    let suites = doc("docs/suites.md");
    let row = suites
        .lines()
        .find(|l| l.starts_with("| `int_matmul_edges` |"))
        .expect("the regime's row");
    let need = row.rsplit('|').nth(1).unwrap();
    let cols: usize = need
        .split(" columns")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no column count in `{need}`"));
    let qmm = ops::find("quant_matmul").unwrap();
    let params = |n: usize| serde_json::json!({"m": 2, "k": 4096, "n": n, "out": "bf16"});
    let edges = [Regime::parse("int_matmul_edges").unwrap()];
    qmm.check_regimes(&params(cols), &edges)
        .unwrap_or_else(|e| panic!("docs say {cols} columns, the loader: {e}"));
    assert!(
        qmm.check_regimes(&params(cols - 1), &edges).is_err(),
        "docs say {cols} columns, the loader takes fewer"
    );
}
