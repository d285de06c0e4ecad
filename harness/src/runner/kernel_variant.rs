//! The CANN kernel variant a case lands on (`conform_reference::variant`), as the results
//! record it, and when a target that declares the case's recipe is nevertheless not judged
//! against the variant's bits.
//!
//! A variant states the SoCs and CANN releases its recipe was read for. A target that reports
//! a device or a release outside them, or a device target where the variant's bits rest on a
//! convention of conform's own that no device is known to share, is judged by the case's
//! checks for a target with its own arithmetic (`checks_without_recipe`), and the result says
//! why. A target that reports neither (a CPU worker emulating the recipe) is judged against the
//! recipe as it declares.

use crate::results::KernelVariantRecord;
use crate::suite::Case;
use conform_reference::fidelity;
use conform_reference::variant::{Dispatch, Platform, Release, Soc};
use conform_targets::target::{Availability, Target, CPU_DEVICE_GROUP};

/// The variant of `case` (at the platform its recipe describes), as the results name it.
pub(super) fn record(case: &Case) -> Option<KernelVariantRecord> {
    fidelity::dispatch(&case.op, &case.recipe, &case.params, None).map(|d| to_record(&d))
}

fn to_record(d: &Dispatch) -> KernelVariantRecord {
    let v = d.variant;
    KernelVariantRecord {
        preset: v.preset.to_string(),
        kernel: v.kernel.to_string(),
        tiling: v.tiling.to_string(),
        key: v.key.to_string(),
        socs: v.socs.iter().map(Soc::to_string).collect(),
        releases: v.releases.to_string(),
        detail: d.detail.clone(),
    }
}

/// The device and release a target reports in its handshake: the SoC family of its device
/// name and its `CANN` library version (the release, without the build a worker may add),
/// each when it names one conform knows.
fn reported(target: &mut dyn Target) -> (Option<Soc>, Option<Release>, String) {
    match target.availability() {
        Availability::Available {
            description,
            versions,
        } => (
            Soc::from_device(&description),
            // The worker may add its build: "8.5.0 (build 8.5.0.1)".
            versions
                .get("CANN")
                .and_then(|s| Release::parse(s.split(" (").next().unwrap_or(s))),
            description,
        ),
        Availability::Unavailable { .. } => (None, None, String::new()),
    }
}

/// Why `target`, which declares `case`'s recipe, is not judged against the variant's bits;
/// `None` when it is.
pub(super) fn set_aside(case: &Case, target: &mut dyn Target) -> Option<String> {
    let d = fidelity::dispatch(&case.op, &case.recipe, &case.params, None)?;
    let v = d.variant;
    let (soc, release, device) = reported(target);
    let mut why = Vec::new();
    if let Some(s) = soc
        && !v.socs.contains(&s)
    {
        why.push(format!(
            "the target's device ({device}) is {s}, not a SoC the variant describes"
        ));
    }
    if let Some(r) = release
        && !v.releases.contains(r)
    {
        let there = soc
            .or_else(|| v.socs.first().copied())
            .map(|soc| Platform { soc, release: r })
            .and_then(|p| fidelity::dispatch(&case.op, &case.recipe, &case.params, Some(&p)))
            .filter(|t| t.variant != v)
            .map(|t| format!(" (on that release the dispatch picks {})", t.variant.kernel))
            .unwrap_or_default();
        why.push(format!(
            "the target reports CANN {r}, outside the releases the variant describes ({}){there}",
            v.releases
        ));
    }
    if target.device_group() != CPU_DEVICE_GROUP && !v.conventions.is_empty() {
        why.push(format!(
            "its bits rest on conventions of conform's that no device is known to share ({})",
            v.conventions.join(", ")
        ));
    }
    (!why.is_empty()).then(|| {
        format!(
            "the case's bits model {} (tiling key {}); {}",
            v.kernel,
            v.key,
            why.join("; ")
        )
    })
}
