//! The example MXFP4 worker slowed by a sleep per call whose factor a test writes to the file
//! named by `SPEED_FILE`: the timing tests' kernel with a speed they control.

use std::path::Path;

/// Writes the worker and its `target.toml` into `dir` (the target is named by the directory;
/// its handshake says `name`), reading its sleep factor from `speed`, run by the repository's
/// venv.
pub fn write_worker(repo: &Path, dir: &Path, name: &str, speed: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("worker.py"), SLOWABLE).unwrap();
    std::fs::write(
        dir.join("target.toml"),
        format!(
            "description = \"the example worker with a controllable sleep\"\n\
             command = \"{}\"\nargs = [\"${{TARGET_DIR}}/worker.py\"]\n\n[env]\n\
             PYTHONPATH = \"{}\"\nSPEED_FILE = \"{}\"\nWORKER_NAME = \"{name}\"\n",
            repo.join(".venv/bin/python").display(),
            repo.join("targets/python").display(),
            speed.display()
        ),
    )
    .unwrap();
}

/// The example worker, slowed by a sleep per call whose factor the test writes to a file.
pub const SLOWABLE: &str = r#"
import os, time
import numpy as np
import conform_worker as cw

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
# 20 ms: long enough that the sleep's overshoot on a loaded machine (a few hundred
# microseconds, varying from night to night) stays well below the gate's 3% threshold.
BASE_S = 0.020

def dequant(case):
    with open(os.environ["SPEED_FILE"]) as f:
        factor = float(f.read())
    time.sleep(BASE_S * factor)
    packed = case.inputs["weight"]
    codes = np.stack([packed & 15, packed >> 4], -1).reshape(packed.shape[0], -1)
    e = case.inputs["scale"].astype(np.int32)
    with np.errstate(over="ignore"):
        scale = np.where(e == 255, np.nan, np.ldexp(np.float32(1), e - 127)).astype(np.float32)
    y = E2M1[codes] * np.repeat(scale, 32, axis=1)
    return {"out": cw.from_f32(y, case.output_dtypes["out"])}

CAPABILITIES = {"ops": {"mxfp4_dequant": {
    "dtypes": ["bf16", "f16", "f32"],
    "limits": {"packing": {"one_of": ["low_first"]}, "element": {"one_of": ["e2m1"]}},
    "recipes": ["mx_ocp"],
}}}

if __name__ == "__main__":
    cw.serve(name=os.environ.get("WORKER_NAME", "slowable"), version="0.1", ops={"mxfp4_dequant": dequant},
             capabilities=CAPABILITIES, libraries={"numpy": np.__version__}, device="CPU")
"#;
