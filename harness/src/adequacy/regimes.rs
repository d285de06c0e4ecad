//! The regime map of `conform adequacy`: per suite, which numeric regimes of its op family
//! (`conform_reference::ops::regime`) the quick tier covers, by a case that declares the
//! regime (and so holds it on every seed), and which it does not.

use super::AdequacyReport;
use crate::html::{badge, escape};
use crate::suite::{Case, Tier};
use conform_metadata::adequacy::{RegimeCoverage, SuiteRegimes};
use conform_reference::ops::regime;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The map of the selected `cases`' suites (suites whose ops have no regimes are left out);
/// `gated`: whether a missing regime fails the run (the quick tier is selected).
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
        let applicable: Vec<regime::Regime> = regime::Regime::ALL
            .into_iter()
            .filter(|r| ops.iter().any(|op| r.applies_to(op)))
            .collect();
        if applicable.is_empty() {
            continue;
        }
        let mut covered = Vec::new();
        let mut missing = Vec::new();
        for r in applicable {
            // A regime the runner holds (the repeated call) is covered by every quick case.
            let by: Vec<String> = cases
                .iter()
                .filter(|c| c.tier == Tier::Quick && (r.by_runner() || c.regimes.contains(&r)))
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
        out.push(SuiteRegimes {
            suite: suite.to_string(),
            op: ops.join(", "),
            covered,
            missing,
            gated,
        });
    }
    out
}

/// The map as text lines for the terminal (empty when no selected suite has regimes).
pub fn text(r: &AdequacyReport) -> String {
    let mut s = String::new();
    if r.regimes.is_empty() {
        return s;
    }
    s.push_str("regime map (quick-tier cases that declare each regime of the op family):\n");
    for m in &r.regimes {
        let covered: Vec<String> = m
            .covered
            .iter()
            .map(|c| format!("{} ({} case(s))", c.regime, c.cases.len()))
            .collect();
        let _ = write!(
            s,
            "  {:<24} covered: {}",
            m.suite,
            if covered.is_empty() {
                "none".to_string()
            } else {
                covered.join(", ")
            }
        );
        if !m.missing.is_empty() {
            let _ = write!(s, "; NOT covered: {}", m.missing.join(", "));
            if m.gated {
                s.push_str("  <- HOLE");
            }
        }
        s.push('\n');
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
            assert_eq!(s.covered.len(), regime::for_op(&s.suite).len());
        }
        // Without the cases that declare regimes, every regime is missing and gated.
        let without: Vec<&Case> = attention
            .iter()
            .copied()
            .filter(|c| c.regimes.is_empty())
            .collect();
        let m = map(&without, true);
        assert!(m.iter().all(|s| s.covered.len() == 1
            && s.missing.len() == regime::for_op(&s.suite).len() - 1
            && s.gated));
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
    fn the_other_families_cover_every_range_regime_that_applies_to_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
        let cases = load_all(&root).expect("the suites load");
        // Each with the runner's repeated call beside its range regimes.
        for (suite, regimes) in [
            ("fp4_dequant", 4),
            ("w4a16_matmul", 3),
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
}
