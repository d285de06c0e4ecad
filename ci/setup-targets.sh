#!/usr/bin/env bash
# Creates .venv (ignored by git) with the pinned CPU worker dependencies
# (targets/python/requirements-cpu.txt). Idempotent: re-running only installs what changed.
# Fails loudly: CI requires the CPU workers (CONFORM_REQUIRE_TARGETS), so a broken install
# must stop the run rather than turn into skips.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
REQ=targets/python/requirements-cpu.txt
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements-cpu.sha
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    .venv/bin/python -m pip install --disable-pip-version-check -q -r "$REQ"
    echo "$want" > "$stamp"
fi
# Each CPU worker must import its libraries.
.venv/bin/python - <<'PY'
import ml_dtypes, numpy, onnx, onnxruntime, safetensors
print("targets venv: numpy %s, ml_dtypes %s, onnxruntime %s, onnx %s, safetensors %s" % (
    numpy.__version__, ml_dtypes.__version__, onnxruntime.__version__, onnx.__version__,
    safetensors.__version__))
PY
# The workers' Python tests (argument building, attention against a naive loop, FP4).
.venv/bin/python -m unittest discover -s targets/python/tests -q
