//! `conform run` against a worker that never answers a request: every case ends as `timeout`
//! (the worker is killed and restarted per request), the run finishes, and nothing is lost.

use std::path::Path;
use std::process::Command;

const SLEEPY: &str = r#"
import json, sys, time
print(json.dumps({"type": "hello", "protocol": 1, "worker": {"name": "sleepy", "version": "1"},
                  "libraries": {}, "device": "CPU (test)",
                  "capabilities": {"ops": {"paged_kv": {"recipes": ["reference"]}}}}), flush=True)
for line in sys.stdin:
    if json.loads(line)["type"] == "shutdown":
        break
    time.sleep(3600)
"#;

#[test]
fn a_worker_that_sleeps_forever_ends_every_case_as_timeout() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("suites")).unwrap();
    std::fs::create_dir_all(root.join("golden")).unwrap();
    std::fs::copy(
        repo.join("suites/paged_kv.toml"),
        root.join("suites/paged_kv.toml"),
    )
    .unwrap();
    let t = root.join("targets/sleepy");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(t.join("worker.py"), SLEEPY).unwrap();
    std::fs::write(
        t.join("target.toml"),
        "description = \"sleeps on every request\"\ncommand = \"python3\"\nargs = [\"${TARGET_DIR}/worker.py\"]\n\n[timeouts]\nhandshake_s = 20\nrequest_s = 2\n",
    )
    .unwrap();
    let json = root.join("r.json");
    let start = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .arg("--root")
        .arg(root)
        .args([
            "run",
            "--target",
            "sleepy",
            "--suite",
            "paged_kv",
            "--filter",
            "single-token|all-padding",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(start.elapsed().as_secs() < 60, "took {:?}", start.elapsed());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2, "{out}");
    for c in cases {
        assert_eq!(c["status"], "timeout", "{c}");
        assert!(
            c["message"]
                .as_str()
                .unwrap()
                .contains("no answer within 2"),
            "{c}"
        );
    }
}
