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

/// A device of SoC `device` on CANN `release` that computes the recipe it is asked for, and
/// `own` (its own arithmetic) when asked for none, or always when `always`.
struct ReportingDevice {
    inner: ReferenceTarget,
    device: &'static str,
    release: &'static str,
    own: &'static str,
    always: bool,
}

/// A device that runs CANN 8.5's dynamic_quant kernels (the reciprocal scale on every shape:
/// the double-buffered kernel of that release, whatever it is asked for) and reports `release`.
fn cann85_device(release: &'static str) -> ReportingDevice {
    ReportingDevice {
        inner: ReferenceTarget::new(Threads(1)),
        device: "Ascend910B3",
        release,
        own: "a2_db_old",
        always: true,
    }
}

impl Target for ReportingDevice {
    fn name(&self) -> &str {
        "reporting_device"
    }
    fn device_group(&self) -> &str {
        "npu"
    }
    fn availability(&mut self) -> Availability {
        Availability::Available {
            description: self.device.into(),
            versions: [("CANN".to_string(), self.release.to_string())].into(),
        }
    }
    fn capabilities(&mut self) -> Capabilities {
        self.inner.capabilities()
    }
    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError> {
        let mut r = request.clone();
        if self.always || r.recipe.is_none() {
            r.recipe = Some(self.own.to_string());
        }
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
    let mut dev = cann85_device("8.5.0");
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
    let mut dev = cann85_device("9.2.0");
    let r = run_trial(&case, &mut dev, case.seed, &RunOptions::default());
    assert_eq!(r.status, Status::Failed, "{}", r.message);
    assert!(r.recipe_set_aside.is_none());
    assert!(!r.metrics["scale"].passed);
    assert_eq!(r.metrics["scale"].policy, "bitwise");
}

/// The single-kernel presets state their platform too: MC2's MatmulAllReduce was read for the
/// Ascend910B up to the 8.5.0 alpha builds, so a device reporting a later release (with the
/// build a worker may add) or an A3 is judged by the case's error-ratio check, and says why;
/// inside them the case stays bitwise.
#[test]
fn a_single_kernel_preset_sets_aside_devices_outside_its_platform() {
    let case = cases()
        .into_iter()
        .find(|c| c.id == "mc2_matmul_allreduce/f16/r8-m20-k64-n32/rank-order-bits")
        .expect("the bitwise rank-order case");
    let run = |device: &'static str, release: &'static str| {
        let mut dev = ReportingDevice {
            inner: ReferenceTarget::new(Threads(1)),
            device,
            release,
            own: "kernel_ring",
            always: false,
        };
        run_trial(&case, &mut dev, case.seed, &RunOptions::default())
    };
    for (device, release, why) in [
        ("Ascend910B3", "9.0.0 (build 9.0.0.20)", "CANN 9.0.0"),
        ("Ascend910_9392", "8.3.RC1", "Ascend910_93"),
    ] {
        let r = run(device, release);
        assert_eq!(
            r.status,
            Status::Passed,
            "{device} {release}: {}",
            r.message
        );
        let reason = r
            .recipe_set_aside
            .as_deref()
            .expect("the reason is recorded");
        assert!(reason.contains(why), "{reason}");
        assert!(
            reason.contains("matmul_all_reduce_910_general.h"),
            "{reason}"
        );
        assert!(
            r.metrics["out"].policy.starts_with("error_ratio"),
            "{}",
            r.metrics["out"].policy
        );
        assert_eq!(r.variant.as_ref().unwrap().preset, "kernel_rank_order");
    }
    let r = run("Ascend910B3", "8.3.RC1");
    assert!(r.recipe_set_aside.is_none(), "{:?}", r.recipe_set_aside);
    assert_eq!(r.metrics["out"].policy, "bitwise");
    assert_eq!(r.status, Status::Passed, "{}", r.message);
}
