//! The regime map of `conform adequacy`: per suite, which numeric regimes of its op family
//! (`conform_reference::ops::regime`) the quick tier covers, by a case that declares the
//! regime (and so holds it on every seed), and which it does not.

use super::AdequacyReport;
use crate::html::{badge, escape};
use crate::ledger;
use crate::suite::{Case, Tier};
use conform_metadata::adequacy::{PathCoverage, RegimeCoverage, SuiteRegimes, MIN_CASES_PER_PATH};
use conform_reference::ops::{self, regime};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The map of the selected `cases`' suites (suites whose ops have no regimes, paths or
/// modelled knobs are left out); `gated`: whether a hole fails the run (the quick tier is
/// selected).
pub fn map(cases: &[&Case], gated: bool) -> Vec<SuiteRegimes> {
    let mut suites: BTreeMap<&str, Vec<&Case>> = BTreeMap::new();
    for c in cases {
        suites.entry(c.suite.as_str()).or_default().push(c);
    }
    let mut out = Vec::new();
    for (suite, cases) in suites {
        let mut ops: Vec<&str> = cases.iter().map(|c| c.op.as_str()).collect();
        // A suite may mix ops (fp4_dequant: MXFP4 and NVFP4 cases interleaved): each once.
        ops.sort_unstable();
        ops.dedup();
        let quick: Vec<&Case> = cases
            .iter()
            .copied()
            .filter(|c| c.tier == Tier::Quick)
            .collect();
        let applicable: Vec<regime::Regime> = regime::Regime::ALL
            .into_iter()
            .filter(|r| ops.iter().any(|op| r.applies_to(op)))
            .collect();
        let mut covered = Vec::new();
        let mut missing = Vec::new();
        for r in applicable {
            let by: Vec<String> = quick
                .iter()
                .filter(|c| reaches_regime(c, r))
                .map(|c| c.id.clone())
                .collect();
            if by.is_empty() {
                missing.push(r.name().to_string());
            } else {
                covered.push(RegimeCoverage {
                    regime: r.name().to_string(),
                    cases: by,
                });
            }
        }
        let paths = paths_of(&ops, &quick);
        let knobs = knobs_of(&quick);
        if covered.is_empty() && missing.is_empty() && paths.is_empty() && knobs.is_empty() {
            continue;
        }
        out.push(SuiteRegimes {
            suite: suite.to_string(),
            op: ops.join(", "),
            covered,
            missing,
            paths,
            knobs,
            gated,
        });
    }
    out
}

/// Whether quick case `c` reaches regime `r`: the runner holds the repeated call for every
/// case; a structural regime (a property of the shape, checked, never constructed) is reached
/// by every case whose shape holds it, declared or not; any other by the cases that declare it.
fn reaches_regime(c: &Case, r: regime::Regime) -> bool {
    if r.by_runner() || c.regimes.contains(&r) {
        return true;
    }
    r.is_structural()
        && r.applies_to(&c.op)
        && ops::find(&c.op).is_ok_and(|f| f.check_regimes(&c.params, &[r]).is_ok())
}

/// The parameter paths of the suite's ops, each with the quick cases that reach it (a case
/// whose parameters its family cannot read reaches none; the suite load has refused such a
/// case already).
fn paths_of(ops_of_suite: &[&str], quick: &[&Case]) -> Vec<PathCoverage> {
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for op in ops_of_suite {
        let Ok(family) = ops::find(op) else { continue };
        let prefix = if ops_of_suite.len() > 1 {
            format!("{op}.")
        } else {
            String::new()
        };
        for c in quick.iter().filter(|c| c.op == *op) {
            let Ok(paths) = family.paths(&c.params) else {
                continue;
            };
            for p in paths {
                let name = format!("{prefix}{}", p.name);
                if !by.contains_key(&name) {
                    order.push(name.clone());
                }
                let cases = by.entry(name).or_default();
                if p.reached {
                    cases.push(c.id.clone());
                }
            }
        }
    }
    order
        .into_iter()
        .map(|name| PathCoverage {
            cases: by.remove(&name).unwrap_or_default(),
            name,
        })
        .collect()
}

/// Every `knob = value` of the kernel model (the variant among them; claims, which have no
/// value, left out) that some quick case's recipe and shape give, with those cases.
fn knobs_of(quick: &[&Case]) -> Vec<PathCoverage> {
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in quick {
        let Some(model) = ledger::case_model(&c.op, &c.recipe, &c.params) else {
            continue;
        };
        for k in model.knobs.iter().filter(|k| !k.knob.is_claim()) {
            by.entry(format!("{} = {}", k.knob.id, k.knob.value))
                .or_default()
                .push(c.id.clone());
        }
    }
    by.into_iter()
        .map(|(name, cases)| PathCoverage { name, cases })
        .collect()
}

/// The map as text lines for the terminal (empty when no selected suite has regimes): per
/// suite, each regime and parameter path with its quick-case count, the knob values' smallest
/// count, and every hole (fewer than two cases) by name.
pub fn text(r: &AdequacyReport) -> String {
    let mut s = String::new();
    if r.regimes.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "regime map (quick-tier cases reaching each regime, parameter path and knob value; {MIN_CASES_PER_PATH} required):"
    );
    for m in &r.regimes {
        let counted = |name: &str, n: usize| format!("{name} ({n})");
        let regimes: Vec<String> = m
            .covered
            .iter()
            .map(|c| counted(&c.regime, c.cases.len()))
            .chain(m.missing.iter().map(|name| counted(name, 0)))
            .collect();
        let _ = writeln!(
            s,
            "  {:<24} regimes: {}",
            m.suite,
            if regimes.is_empty() {
                "none".to_string()
            } else {
                regimes.join(", ")
            }
        );
        if !m.paths.is_empty() {
            let paths: Vec<String> = m
                .paths
                .iter()
                .map(|p| counted(&p.name, p.cases.len()))
                .collect();
            let _ = writeln!(s, "  {:<24} paths: {}", "", paths.join(", "));
        }
        if let Some(least) = m.knobs.iter().map(|k| k.cases.len()).min() {
            let _ = writeln!(
                s,
                "  {:<24} knob values: {} of the kernel model, each in {least} or more case(s)",
                "",
                m.knobs.len()
            );
        }
        for hole in m.holes() {
            let _ = writeln!(
                s,
                "  {:<24} {hole}{}",
                "",
                if m.gated { "  <- HOLE" } else { "" }
            );
        }
    }
    s
}

/// The map as an HTML table (empty when no selected suite has regimes).
pub fn html(r: &AdequacyReport) -> String {
    if r.regimes.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<h3>Regime map</h3>\n<p>Numeric regimes of each suite's op family, and the quick-tier cases that declare (and so guarantee on every seed) each one.</p>\n<table class=\"regimes\"><thead><tr><th>suite</th><th>regime</th><th>quick tier</th><th>cases</th></tr></thead><tbody>\n",
    );
    for m in &r.regimes {
        for c in &m.covered {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&m.suite),
                escape(&c.regime),
                badge("covered", "passed"),
                escape(&c.cases.join(", "))
            );
        }
        for name in &m.missing {
            let class = if m.gated { "failed" } else { "skipped" };
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td></td></tr>",
                escape(&m.suite),
                escape(name),
                badge("not covered", class)
            );
        }
        for p in &m.paths {
            let badge = if p.cases.len() >= MIN_CASES_PER_PATH {
                badge("covered", "passed")
            } else if m.gated {
                badge("fewer than 2 cases", "failed")
            } else {
                badge("fewer than 2 cases", "skipped")
            };
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>path {}</td><td>{}</td><td>{}</td></tr>",
                escape(&m.suite),
                escape(&p.name),
                badge,
                escape(&p.cases.join(", "))
            );
        }
        for hole in m.holes().iter().filter(|h| {
            h.starts_with("knob ") || h.starts_with("regime ") && !h.ends_with("no case")
        }) {
            let class = if m.gated { "failed" } else { "skipped" };
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td></td></tr>",
                escape(&m.suite),
                escape(hole),
                badge("fewer than 2 cases", class)
            );
        }
    }
    s.push_str("</tbody></table>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::select::load_all;

    #[test]
    fn the_attention_suites_cover_every_regime_and_a_gap_is_a_hole() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
        let cases = load_all(&root).expect("the suites load");
        let attention: Vec<&Case> = cases
            .iter()
            .filter(|c| c.suite == "fa_prefill" || c.suite == "pa_decode")
            .collect();
        let m = map(&attention, true);
        assert_eq!(m.len(), 2);
        for s in &m {
            assert!(s.missing.is_empty(), "{}: {:?}", s.suite, s.missing);
            assert_eq!(s.covered.len(), ops::regimes_for(&s.suite).len());
        }
        // Without the cases that declare regimes, every regime is missing and gated.
        let without: Vec<&Case> = attention
            .iter()
            .copied()
            .filter(|c| c.regimes.is_empty())
            .collect();
        // Structural regimes stay reached by the shapes that hold them, declared or not.
        let m = map(&without, true);
        for s in &m {
            let constructed: Vec<String> = ops::regimes_for(&s.suite)
                .into_iter()
                .filter(|r| !r.by_runner() && !r.is_structural())
                .map(|r| r.name().to_string())
                .collect();
            assert_eq!(s.missing, constructed, "{}", s.suite);
            assert!(s.covered.iter().all(|c| c.regime == "repeated_call"
                || regime::Regime::parse(&c.regime).is_some_and(|r| r.is_structural())));
            assert!(s.gated && s.holes().len() >= constructed.len());
        }
        // The repeated call is the runner's, so it is covered by every quick case, and it is
        // the only regime of an op without data regimes.
        let kv: Vec<&Case> = cases.iter().filter(|c| c.suite == "paged_kv").collect();
        let m = map(&kv, true);
        assert_eq!(m.len(), 1);
        assert!(m[0].missing.is_empty());
        assert_eq!(m[0].covered.len(), 1);
        assert_eq!(m[0].covered[0].regime, "repeated_call");
        let quick = kv.iter().filter(|c| c.tier == Tier::Quick).count();
        assert!(quick > 0 && m[0].covered[0].cases.len() == quick);
    }

    #[test]
    fn the_other_families_cover_every_range_and_tie_regime_that_applies_to_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
        let cases = load_all(&root).expect("the suites load");
        // Each with the runner's repeated call beside its range regimes.
        for (suite, regimes) in [
            ("fp4_dequant", 5),
            ("w4a16_matmul", 5),
            ("mc2_matmul_allreduce", 6),
        ] {
            let of: Vec<&Case> = cases.iter().filter(|c| c.suite == suite).collect();
            let m = map(&of, true);
            assert_eq!(m.len(), 1, "{suite}");
            assert!(m[0].missing.is_empty(), "{suite}: {:?}", m[0].missing);
            assert_eq!(m[0].covered.len(), regimes, "{suite}");
            assert!(!m[0].op.contains(", ") || m[0].op == "mxfp4_dequant, nvfp4_dequant");
            // Without its range cases, the suite has holes.
            let without: Vec<&Case> = of
                .iter()
                .copied()
                .filter(|c| c.regimes.is_empty())
                .collect();
            let m = map(&without, true);
            assert_eq!(m[0].missing.len(), regimes - 1, "{suite}");
        }
    }

    /// Every family answers the same path names in the same order for every case of the
    /// suites, and the committed quick tier reaches every regime, path and knob value with two
    /// cases or more.
    #[test]
    fn paths_are_named_alike_and_the_quick_tier_has_no_thin_path() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
        let cases = load_all(&root).expect("the suites load");
        let mut names: BTreeMap<&str, Vec<&'static str>> = BTreeMap::new();
        for c in &cases {
            let family = ops::find(&c.op).expect("a known op");
            let paths = family.paths(&c.params).expect("the params parse");
            let these: Vec<&'static str> = paths.iter().map(|p| p.name).collect();
            let first = names.entry(c.op.as_str()).or_insert_with(|| these.clone());
            assert_eq!(*first, these, "{}", c.id);
            assert!(paths.iter().all(|p| !p.description.is_empty()));
        }
        let all: Vec<&Case> = cases.iter().collect();
        let m = map(&all, true);
        let holes: Vec<String> = m
            .iter()
            .flat_map(|s| {
                s.holes()
                    .into_iter()
                    .map(move |h| format!("{}: {h}", s.suite))
            })
            .collect();
        assert!(holes.is_empty(), "{holes:#?}");
    }
}
