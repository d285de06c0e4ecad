#!/usr/bin/env bash
# Sets up the Python side of the torch_npu worker on an Atlas runner: a virtual environment
# with torch and torch_npu pinned to the CANN release installed on the machine, checked by
# importing torch_npu and asking for a device. Writes CONFORM_PYTHON (the interpreter that
# `targets/*/target.toml` start as `${CONFORM_PYTHON}`) to an env file the CI sources.
#
# Usage: ci/atlas/setup-torch-npu.sh [--dry-run] [--venv DIR] [--env-file FILE]
#   --dry-run   print every step instead of running it; still checks the arguments, the pins,
#               the Python interpreter and the repository layout (the parts that need no NPU)
#   --venv      virtual environment directory (default: $CONFORM_NPU_VENV or .venv-npu)
#   --env-file  file to append KEY=VALUE lines to (GitHub: "$GITHUB_ENV"; GitLab: a dotenv
#               file that the job sources); default: print them only
# Pins (override through the environment): TORCH_VERSION, TORCH_NPU_VERSION, CANN_SET_ENV.
set -euo pipefail

DRY_RUN=0
VENV="${CONFORM_NPU_VENV:-.venv-npu}"
ENV_FILE=""
TORCH_VERSION="${TORCH_VERSION:-2.5.1}"
TORCH_NPU_VERSION="${TORCH_NPU_VERSION:-2.5.1}"
CANN_SET_ENV="${CANN_SET_ENV:-/usr/local/Ascend/ascend-toolkit/set_env.sh}"
PYTHON="${PYTHON:-python3}"

die() { echo "setup-torch-npu: $*" >&2; exit 2; }
say() { echo "setup-torch-npu: $*"; }
# Prints a command as a shell would read it (single quotes where needed).
show() {
    local out="+" a
    for a in "$@"; do
        if [[ "$a" =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
    done
    echo "$out"
}
# Runs a command, or prints it under --dry-run.
step() {
    if [ "$DRY_RUN" = 1 ]; then
        show "$@"
    else
        "$@"
    fi
}

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --venv) [ $# -ge 2 ] || die "--venv needs a directory"; VENV="$2"; shift ;;
        --env-file) [ $# -ge 2 ] || die "--env-file needs a path"; ENV_FILE="$2"; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done

case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac

# Pins must be plain versions: they end up on a pip command line.
for pin in TORCH_VERSION TORCH_NPU_VERSION; do
    [[ "${!pin}" =~ ^[0-9]+(\.[0-9]+){1,3}([.a-z0-9]*)?$ ]] || die "$pin='${!pin}' is not a version"
done

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ -f "$REPO/Cargo.toml" ] || die "cannot find the repository root from $0"
[ -d "$REPO/targets" ] || die "$REPO/targets is missing"

command -v "$PYTHON" >/dev/null || die "$PYTHON not found on PATH"
PY_VERSION="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' \
    || die "Python >= 3.9 needed for torch_npu, found $PY_VERSION"
say "python $PY_VERSION, torch $TORCH_VERSION, torch_npu $TORCH_NPU_VERSION, venv $VENV"

if [ -f "$CANN_SET_ENV" ]; then
    say "CANN environment: $CANN_SET_ENV"
    if [ "$DRY_RUN" = 0 ]; then
        # set_env.sh references unset variables; relax -u while sourcing it.
        set +u
        # shellcheck disable=SC1090
        source "$CANN_SET_ENV"
        set -u
    fi
elif [ "$DRY_RUN" = 1 ]; then
    say "CANN environment: $CANN_SET_ENV not found (a real run would stop here)"
else
    die "CANN is not installed: $CANN_SET_ENV not found (set CANN_SET_ENV)"
fi

step "$PYTHON" -m venv "$VENV"
VPY="$VENV/bin/python"
step "$VPY" -m pip install --upgrade pip
# torch_npu's own runtime dependencies, then the pinned pair, then the workers' requirements.
step "$VPY" -m pip install numpy pyyaml decorator attrs psutil scipy
step "$VPY" -m pip install "torch==$TORCH_VERSION" "torch_npu==$TORCH_NPU_VERSION"
if [ -f "$REPO/targets/python/requirements-cpu.txt" ]; then
    step "$VPY" -m pip install -r "$REPO/targets/python/requirements-cpu.txt"
fi
step "$VPY" -c 'import torch, torch_npu; assert torch.npu.is_available(), "no NPU visible"; print("torch_npu", torch_npu.__version__, "devices:", torch.npu.device_count())'

LINES="CONFORM_PYTHON=$VPY"
if [ -n "$ENV_FILE" ] && [ "$DRY_RUN" = 0 ]; then
    echo "$LINES" >> "$ENV_FILE"
    say "wrote CONFORM_PYTHON to $ENV_FILE"
else
    say "environment for the worker:"
    echo "$LINES"
fi
