//! `cargo test` / `cargo nextest run` integration: one trial per (target, quick-tier case),
//! named `<target>::<case id>`; a trial of a target on a device (a `device_group` other than
//! `cpu`) has the kind `device:<group>`, which libtest prints first:
//! `[device:npu] torch_npu::<case id>`.
//!
//! - The reference target runs every quick case and is verified bitwise against the golden
//!   store; worker targets run every case their capabilities cover.
//! - A trial that its target would skip (the target is not available here, or does not cover
//!   the case) is marked ignored when the trials are listed, and its reason is printed once
//!   per target and reason — unless `CONFORM_REQUIRE_TARGETS` names the target (CI does), in
//!   which case an unavailable target's trials fail. Marking them at list time matters under
//!   nextest, which counts a trial that ignores itself at run time as a pass;
//!   `--include-ignored` still runs them (each then reports itself ignored, with the reason).
//! - Under nextest every trial runs in its own process with `--exact NAME`: then only that one
//!   trial is built (no worker is started for the others).
//! - Trials of one device group never overlap: here each holds its group's lock while it runs;
//!   under nextest `.config/nextest.toml` runs every `[device:` trial in a one-at-a-time test
//!   group (`conform_harness::runner::device`).
//! - `CONFORM_TIER=full` (or `all`) selects the full tier instead.

use conform_harness::project::Paths;
use conform_harness::results::Status;
use conform_harness::runner::device::{self, DeviceLocks};
use conform_harness::runner::skip_reason;
use conform_harness::runner::{run_trial, RunOptions};
use conform_harness::session::{known_targets, open_targets};
use conform_harness::suite::select::load_all;
use conform_harness::suite::{Case, Tier};
use conform_reference::parallel::Threads;
use conform_targets::target::Target;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let paths = Paths::at(&root);
    let cases = match load_all(&paths.suites) {
        Ok(c) => c,
        Err(e) => {
            let msg = e.to_string();
            let trial = Trial::test("suites::load", move || Err(Failed::from(msg)));
            return libtest_mimic::run(&args, vec![trial]).exit_code();
        }
    };
    let golden = match conform_harness::golden::GoldenStore::open(&paths.golden) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            let msg = e.to_string();
            let trial = Trial::test("golden::open", move || Err(Failed::from(msg)));
            return libtest_mimic::run(&args, vec![trial]).exit_code();
        }
    };
    let tier = std::env::var("CONFORM_TIER").unwrap_or_default();
    let selected: Vec<Case> = cases
        .into_iter()
        .filter(|c| match tier.as_str() {
            "full" => c.tier == Tier::Full,
            "all" => true,
            _ => c.tier == Tier::Quick,
        })
        .collect();
    let target_names = known_targets(&paths);
    // The --exact fast path: only the trial nextest asked for (named with its kind, if any).
    let wanted = |name: &str| {
        !args.exact
            || args
                .filter
                .as_deref()
                .is_none_or(|f| device::without_kind(f) == name)
    };
    let device_locks = DeviceLocks::default();
    let mut opened: BTreeMap<String, Arc<Mutex<Box<dyn Target>>>> = BTreeMap::new();
    let opts = Arc::new(RunOptions {
        golden: Some(golden),
        required_targets: RunOptions::required_from_env(),
        threads: Threads::available(),
        ..RunOptions::default()
    });
    let mut trials = Vec::new();
    // (target, reason) -> how many trials it ignores.
    let mut ignored: BTreeMap<(String, String), usize> = BTreeMap::new();
    for target in &target_names {
        for case in &selected {
            let name = format!("{target}::{}", case.id);
            if !wanted(&name) {
                continue;
            }
            let handle = match opened.get(target) {
                Some(h) => h.clone(),
                None => match open_targets(&paths, std::slice::from_ref(target), opts.threads) {
                    Ok(mut v) => {
                        let h = Arc::new(Mutex::new(v.remove(0)));
                        opened.insert(target.clone(), h.clone());
                        h
                    }
                    Err(e) => {
                        trials.push(Trial::test(name, move || Err(Failed::from(e))));
                        continue;
                    }
                },
            };
            let (skip, group) = {
                let mut t = handle.lock().unwrap_or_else(|e| e.into_inner());
                let group = t.device_group().to_string();
                (skip_reason(case, t.as_mut(), &opts), group)
            };
            let device_lock = device_locks.for_group(&group);
            if let Some(reason) = &skip {
                *ignored.entry((target.clone(), reason.clone())).or_default() += 1;
            }
            let case = case.clone();
            let opts = opts.clone();
            let trial = Trial::ignorable_test(name, move || {
                // The device first, then the target: every trial takes them in this order.
                let _device = device_lock
                    .as_ref()
                    .map(|l| l.lock().unwrap_or_else(|e| e.into_inner()));
                let mut t = handle.lock().unwrap_or_else(|e| e.into_inner());
                let r = run_trial(&case, t.as_mut(), case.seed, &opts);
                match r.status {
                    Status::Passed => Ok(Completion::Completed),
                    Status::Skipped => Ok(Completion::ignored_with(r.message)),
                    _ => Err(Failed::from(format!(
                        "{}: {}\nreplay: {}",
                        r.status.name(),
                        r.message,
                        conform_harness::messages::replay_command(
                            &r.id, r.seed, &r.target, None, None
                        )
                    ))),
                }
            });
            let trial = match device::trial_kind(&group) {
                Some(kind) => trial.with_kind(kind),
                None => trial,
            };
            trials.push(trial.with_ignored_flag(skip.is_some()));
        }
    }
    if !args.list {
        for ((target, reason), n) in &ignored {
            eprintln!("conformance: {n} trial(s) of `{target}` ignored: {reason}");
        }
    }
    libtest_mimic::run(&args, trials).exit_code()
}
