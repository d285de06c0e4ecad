//! Nights of `ci/nightly-perf.sh` are told apart by their UTC stamp (one second resolution,
//! taken as the script starts, `perf-<stamp>.json` in the history directory).

use std::path::Path;
use std::process::Command;

/// Before the next night: waits until the clock has left the second of the newest night kept
/// in `history`, which a night of a few seconds has long done. Without a kept night it waits a
/// whole second.
pub fn wait_past_newest_stamp(history: &Path) {
    let newest = std::fs::read_dir(history)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| Some(n.strip_prefix("perf-")?.strip_suffix(".json")?.to_string()))
        .max();
    let Some(newest) = newest else {
        std::thread::sleep(std::time::Duration::from_millis(1100));
        return;
    };
    // `date`'s stamp has the script's format, so later stamps sort later.
    while utc_stamp() <= newest {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Now, as the nightly script stamps a night (`date -u +%Y%m%dT%H%M%SZ`).
fn utc_stamp() -> String {
    let o = Command::new("date")
        .args(["-u", "+%Y%m%dT%H%M%SZ"])
        .output()
        .unwrap();
    assert!(o.status.success(), "date: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}
