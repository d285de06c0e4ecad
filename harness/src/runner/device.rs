//! Device groups where trials run concurrently: trials of targets that share a device (a
//! [`Target::device_group`](conform_targets::target::Target::device_group) other than
//! [`CPU_DEVICE_GROUP`]) must not overlap, or their timings and device memory interfere.
//!
//! - In one process (`cargo test`: the conformance test target runs its trials on several
//!   threads) each such trial holds its group's lock from [`DeviceLocks`] while it runs.
//! - Across processes (`cargo nextest run`: one process per trial) the trial carries the kind
//!   [`trial_kind`] (`device:<group>`), which libtest prints before the name
//!   (`[device:npu] torch_npu::<case>`); `.config/nextest.toml` puts every trial whose name
//!   starts with `[device:` into its `device` test group (one at a time). A new device worker
//!   needs nothing there: its `target.toml`'s `device_group` is enough.
//!
//! `conform run` runs one trial at a time, so it needs neither.

use conform_targets::target::CPU_DEVICE_GROUP;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The prefix of the trial kind of a device group (the nextest filter matches `[` + this).
pub const TRIAL_KIND_PREFIX: &str = "device:";

/// Whether trials of targets in `group` must not overlap one another.
pub fn is_exclusive(group: &str) -> bool {
    group != CPU_DEVICE_GROUP
}

/// The libtest kind of a trial of a target in `group`: `device:<group>`, or `None` for the
/// CPU group (whose trial names stay `<target>::<case>`).
pub fn trial_kind(group: &str) -> Option<String> {
    is_exclusive(group).then(|| format!("{TRIAL_KIND_PREFIX}{group}"))
}

/// A trial name as given to `--exact`, without the `[kind] ` libtest prints before it.
pub fn without_kind(name: &str) -> &str {
    name.strip_prefix('[')
        .and_then(|rest| rest.split_once("] "))
        .map_or(name, |(_, bare)| bare)
}

/// One lock per exclusive device group, shared by every trial of that group.
#[derive(Debug, Default)]
pub struct DeviceLocks {
    groups: Mutex<BTreeMap<String, Arc<Mutex<()>>>>,
}

impl DeviceLocks {
    /// The lock trials of `group` hold while they run; `None` for the CPU group.
    pub fn for_group(&self, group: &str) -> Option<Arc<Mutex<()>>> {
        if !is_exclusive(group) {
            return None;
        }
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        Some(groups.entry(group.to_string()).or_default().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn cpu_trials_take_no_lock_and_keep_their_names() {
        let locks = DeviceLocks::default();
        assert!(locks.for_group(CPU_DEVICE_GROUP).is_none());
        assert_eq!(trial_kind(CPU_DEVICE_GROUP), None);
        assert_eq!(trial_kind("npu").as_deref(), Some("device:npu"));
    }

    #[test]
    fn one_group_shares_one_lock_and_groups_do_not() {
        let locks = DeviceLocks::default();
        let a = locks.for_group("npu").unwrap();
        let b = locks.for_group("npu").unwrap();
        let c = locks.for_group("cuda").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        // Holding one group's lock does not block another group.
        let _npu = a.lock().unwrap();
        assert!(c.try_lock().is_ok());
        assert!(b.try_lock().is_err());
    }

    #[test]
    fn trials_of_one_group_never_overlap() {
        let locks = Arc::new(DeviceLocks::default());
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (locks, running, most) = (locks.clone(), running.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..5 {
                        let lock = locks.for_group("npu").unwrap();
                        let _held = lock.lock().unwrap();
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        running.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn exact_names_are_matched_without_their_kind() {
        assert_eq!(
            without_kind("[device:npu] torch_npu::fa.x"),
            "torch_npu::fa.x"
        );
        assert_eq!(without_kind("numpy::fa.x"), "numpy::fa.x");
        assert_eq!(without_kind("[unclosed numpy::x"), "[unclosed numpy::x");
    }
}
