//! Kernel variants (docs/ascend.md, "Kernel variants"): the suites' shapes reach every variant
//! the dispatch picks for them in a quick case judged bit for bit, and a device reporting a
//! CANN release outside the variant's is judged by the checks for a target with its own
//! arithmetic, with the reason in its result.

use conform_harness::results::Status;
use conform_harness::runner::{run_trial, RunOptions};
use conform_harness::suite::select::load_all;
use conform_harness::suite::{Case, Tier};
use conform_reference::fidelity;
use conform_reference::parallel::Threads;
use conform_targets::reference_target::ReferenceTarget;
use conform_targets::target::{
    Availability, Capabilities, ExecRequest, Execution, Target, TargetError,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    load_all(&root.join("suites")).unwrap()
}

/// Every kernel variant the dispatch picks for some case of a suite (any tier) is the variant
/// of a quick case of that suite whose outputs are all judged bit for bit against it.
#[test]
fn the_suites_judge_every_variant_their_shapes_reach_in_a_quick_bitwise_case() {
    let mut reached: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    let mut judged: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    for c in cases() {
        let Some(d) = fidelity::dispatch(&c.op, &c.recipe, &c.params, None) else {
            continue;
        };
        let v = d.variant.preset;
        reached.entry(c.suite.clone()).or_default().insert(v);
        let bitwise = !c.policies.is_empty() && c.policies.values().all(|p| p.is_exact());
        if c.tier == Tier::Quick && bitwise && d.variant.modelled() {
            judged.entry(c.suite.clone()).or_default().insert(v);
        }
    }
    assert!(
        reached.contains_key("dynamic_quant"),
        "the dynamic_quant suite dispatches"
    );
    for (suite, variants) in &reached {
        let quick = judged.get(suite).cloned().unwrap_or_default();
        let missing: Vec<&&str> = variants.difference(&quick).collect();
        assert!(
            missing.is_empty(),
            "suite {suite}: variants its shapes reach but no quick case judges bit for bit: {missing:?}"
        );
    }
}

/// A device that runs CANN 8.5's dynamic_quant kernels (the reciprocal scale on every shape)
/// and says so in its handshake.
struct Cann85Device {
    inner: ReferenceTarget,
    release: &'static str,
}

impl Target for Cann85Device {
    fn name(&self) -> &str {
        "cann85_device"
    }
    fn device_group(&self) -> &str {
        "npu"
    }
    fn availability(&mut self) -> Availability {
        Availability::Available {
            description: "Ascend910B3".into(),
            versions: [("CANN".to_string(), self.release.to_string())].into(),
        }
    }
    fn capabilities(&mut self) -> Capabilities {
        self.inner.capabilities()
    }
    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError> {
        // Whatever it is asked for, it computes what the 8.5 tiling runs for these shapes:
        // the double-buffered kernel of that release.
        let mut r = request.clone();
        r.recipe = Some("a2_db_old".into());
        self.inner.execute(&r)
    }
}

fn multi_row_case() -> Case {
    cases()
        .into_iter()
        .find(|c| c.id == "dynamic_quant/a2/bf16/t24-h7168/deepseek-r1/edges-ties")
        .expect("the 7168-wide case")
}

#[test]
fn a_device_on_a_release_outside_the_variant_is_judged_without_its_bits_and_says_why() {
    let case = multi_row_case();
    let mut dev = Cann85Device {
        inner: ReferenceTarget::new(Threads(1)),
        release: "8.5.0",
    };
    let r = run_trial(&case, &mut dev, case.seed, &RunOptions::default());
    assert_eq!(r.status, Status::Passed, "{}", r.message);
    let why = r
        .recipe_set_aside
        .as_deref()
        .expect("the reason is recorded");
    assert!(why.contains("CANN 8.5.0"), "{why}");
    assert!(why.contains("dynamic_quant_multi_row.h"), "{why}");
    assert!(why.contains("dynamic_quant_db.h"), "{why}");
    assert_eq!(r.variant.as_ref().unwrap().preset, "a2_multi_row");
    assert_eq!(r.metrics["y"].policy.split('(').next(), Some("allclose"));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["recipe_set_aside"], why);
    assert_eq!(json["variant"]["key"], "10");
}

#[test]
fn a_device_inside_the_variants_releases_is_judged_bit_for_bit() {
    let case = multi_row_case();
    // The same arithmetic reported as 9.2.0: the case's bits are the multi-row kernel's, and
    // the 8.5 scale form fails them.
    let mut dev = Cann85Device {
        inner: ReferenceTarget::new(Threads(1)),
        release: "9.2.0",
    };
    let r = run_trial(&case, &mut dev, case.seed, &RunOptions::default());
    assert_eq!(r.status, Status::Failed, "{}", r.message);
    assert!(r.recipe_set_aside.is_none());
    assert!(!r.metrics["scale"].passed);
    assert_eq!(r.metrics["scale"].policy, "bitwise");
}
