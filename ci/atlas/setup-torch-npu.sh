#!/usr/bin/env bash
# Sets up the Python side of the torch_npu worker on an Atlas runner: a virtual environment
# with torch and torch_npu pinned to the CANN release installed on the machine, checked by
# importing torch_npu and asking for a device. Writes CONFORM_PYTHON (the interpreter that
# `targets/*/target.toml` start as `${CONFORM_PYTHON}`) to an env file the CI sources.
#
# Before anything is installed, the CANN release (detected from the toolkit's version files,
# step 1 below, or $CANN_VERSION) and the torch / torch_npu pins are checked against ci/atlas/torch-npu-compat.tsv,
# and the Python version against the range that torch release supports: a combination outside
# the table stops here with exit 2, printing the rows that would fit.
#
# Usage: ci/atlas/setup-torch-npu.sh [--dry-run] [--venv DIR] [--env-file FILE]
#        ci/atlas/setup-torch-npu.sh --detect-cann [--cann-root DIR]...
#   --dry-run   print every step instead of running it; still checks the arguments, the pins,
#               the Python interpreter and the repository layout (the parts that need no NPU)
#   --detect-cann  only detect the CANN release (under the --cann-root directories, default
#               the usual install roots) and print "<release> <file it came from>"; exit 2
#               when none is found
#   --venv      virtual environment directory (default: $CONFORM_NPU_VENV or .venv-npu)
#   --env-file  file to append KEY=VALUE lines to (GitHub: "$GITHUB_ENV"; GitLab: a dotenv
#               file that the job sources); default: print them only
# Pins (override through the environment): TORCH_NPU_VERSION (default: the newest pair the
# table lists for the installed CANN; TORCH_VERSION follows the table), CANN_SET_ENV,
# CANN_VERSION (skips detection: what a runner reports, or a simulated version in tests).
set -euo pipefail

DRY_RUN=0
DETECT_ONLY=0
DETECT_ROOTS=()
VENV="${CONFORM_NPU_VENV:-.venv-npu}"
ENV_FILE=""
TORCH_NPU_VERSION="${TORCH_NPU_VERSION:-}"
CANN_SET_ENV="${CANN_SET_ENV:-/usr/local/Ascend/ascend-toolkit/set_env.sh}"
CANN_VERSION="${CANN_VERSION:-}"
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
        --detect-cann) DETECT_ONLY=1 ;;
        --cann-root) [ $# -ge 2 ] || die "--cann-root needs a directory"; DETECT_ROOTS+=("$2"); shift ;;
        --venv) [ $# -ge 2 ] || die "--venv needs a directory"; VENV="$2"; shift ;;
        --env-file) [ $# -ge 2 ] || die "--env-file needs a path"; ENV_FILE="$2"; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done

case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ -f "$REPO/Cargo.toml" ] || die "cannot find the repository root from $0"
[ -d "$REPO/targets" ] || die "$REPO/targets is missing"
COMPAT="$REPO/ci/atlas/torch-npu-compat.tsv"
REQUIREMENTS="$REPO/targets/torch_npu/requirements-npu.txt"
[ -f "$COMPAT" ] || die "$COMPAT is missing"
[ -f "$REQUIREMENTS" ] || die "$REQUIREMENTS is missing"

# 1. The CANN version: $CANN_VERSION, else detected from the installed toolkit's files.
#
# The release is read from, in order (the first file giving one wins):
#   <arch>-linux/ascend_toolkit_install.info   version=8.0.0 (also 8.3.RC2, 9.2.0-beta.2)
#   version.cfg                                runtime_running_version=[7.6.0.1.220:8.0.0]:
#                                              the part AFTER the colon is the CANN release;
#                                              before it is a component version
#   <component>/version.info                   version_dir=8.0.0 is the release; Version= is
#                                              a component version on CANN 8.x (7.6.0.1.220
#                                              on 8.0.0, 8.2.0.0.201 on 8.2.RC1), used only
#                                              when version_dir is not a release (CANN 9:
#                                              Version=9.2.0-beta.2, version_dir=cann)
# under each candidate root: $ASCEND_HOME_PATH, $ASCEND_TOOLKIT_HOME, <set_env.sh dir>/latest,
# <set_env.sh dir> (CANN 8.5 and later install to /usr/local/Ascend/cann[-<release>]).

# A CANN release as the compatibility table writes them: 8.0.0, 8.1.RC1, 8.5.0.alpha002,
# 9.2.0-beta.2 — never a component version (four or more numeric parts) or an internal build
# (8.0.T63).
is_release() {
    [[ "$1" =~ ^[0-9]+\.[0-9]+\.(RC[0-9]+|[0-9]+)([.-][A-Za-z][0-9A-Za-z.]*)?$ ]]
}
# The first `key=value` value in a file (whitespace around both trimmed, quotes dropped).
kv() {
    sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\"\{0,1\}\([^\"[:space:]]*\)\"\{0,1\}[[:space:]]*\$/\1/p" "$1" | head -n 1
}
# Prints "<release> <file>" for the first file under the roots that names a release.
detect_cann_release() {
    local root f v arch
    arch="$(uname -m)"
    for root in "$@"; do
        [ -n "$root" ] && [ -d "$root" ] || continue
        for f in "$root/$arch-linux/ascend_toolkit_install.info" \
                 "$root"/*-linux/ascend_toolkit_install.info \
                 "$root/share/info/ascend_toolkit_install.info"; do
            [ -f "$f" ] || continue
            v="$(kv "$f" version)"
            if is_release "$v"; then echo "$v $f"; return 0; fi
        done
        f="$root/version.cfg"
        if [ -f "$f" ]; then
            v="$(sed -n 's/^[[:space:]]*runtime_running_version=\[[^]:]*:\([^]]*\)\].*/\1/p' "$f" | head -n 1)"
            v="${v#CANN-}"
            if is_release "$v"; then echo "$v $f"; return 0; fi
        fi
        for f in "$root/version.info" "$root/runtime/version.info" "$root/compiler/version.info" \
                 "$root/toolkit/version.info" "$root/opp/version.info"; do
            [ -f "$f" ] || continue
            v="$(kv "$f" version_dir)"
            if is_release "$v"; then echo "$v $f"; return 0; fi
            v="$(kv "$f" Version)"
            if is_release "$v"; then echo "$v $f"; return 0; fi
        done
    done
    return 1
}
cann_roots() {
    local d
    d="$(dirname "$CANN_SET_ENV")"
    echo "${ASCEND_HOME_PATH:-}"
    echo "${ASCEND_TOOLKIT_HOME:-}"
    echo "$d/latest"
    echo "$d"
}

if [ "$DETECT_ONLY" = 1 ]; then
    # Only the detection: the roots given (default: the usual ones), one line "<release> <file>".
    if [ ${#DETECT_ROOTS[@]} -eq 0 ]; then
        mapfile -t DETECT_ROOTS < <(cann_roots)
    fi
    detect_cann_release "${DETECT_ROOTS[@]}" || die "no CANN release found under: ${DETECT_ROOTS[*]}"
    exit 0
fi

if [ -z "$CANN_VERSION" ]; then
    mapfile -t ROOTS < <(cann_roots)
    if FOUND="$(detect_cann_release "${ROOTS[@]}")"; then
        CANN_VERSION="${FOUND%% *}"
        say "CANN release $CANN_VERSION read from ${FOUND#* }"
    fi
fi
table_rows() { grep -v '^#' "$COMPAT" | awk -F'\t' -v c="$1" 'c == "" || $1 == c'; }
print_rows() {
    echo "cann	torch	torch_npu	python_min	python_max" >&2
    table_rows "$1" >&2
}
if [ -z "$CANN_VERSION" ]; then
    if [ "$DRY_RUN" = 1 ]; then
        say "CANN version: not detected (no toolkit here; a real run would stop here)"
    else
        die "cannot tell the CANN release (no ascend_toolkit_install.info, version.cfg or version.info naming one under: $(cann_roots | tr '\n' ' ')); set CANN_VERSION"
    fi
else
    [[ "$CANN_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9A-Za-z.]+$ ]] || die "CANN_VERSION='$CANN_VERSION' is not a version"
    say "CANN $CANN_VERSION"
    if [ -z "$(table_rows "$CANN_VERSION")" ]; then
        echo "setup-torch-npu: CANN $CANN_VERSION is not in $COMPAT; torch_npu is built for:" >&2
        print_rows ""
        exit 2
    fi
fi

# 2. The torch / torch_npu pair for it, from the table (a pin must be one of its rows).
if [ -n "$CANN_VERSION" ]; then
    if [ -z "$TORCH_NPU_VERSION" ]; then
        ROW="$(table_rows "$CANN_VERSION" | head -n 1)"
    else
        ROW="$(table_rows "$CANN_VERSION" | awk -F'\t' -v n="$TORCH_NPU_VERSION" '$3 == n' | head -n 1)"
        if [ -z "$ROW" ]; then
            echo "setup-torch-npu: torch_npu $TORCH_NPU_VERSION is not built for CANN $CANN_VERSION; the pairs for it are:" >&2
            print_rows "$CANN_VERSION"
            exit 2
        fi
    fi
    IFS=$'\t' read -r _ TORCH_VERSION TORCH_NPU_VERSION PY_MIN PY_MAX <<< "$ROW"
else
    # Dry run without a toolkit: the newest CANN release's default pair, so every step can
    # still be shown.
    NEWEST_CANN="$(table_rows "" | tail -n 1 | cut -f1)"
    IFS=$'\t' read -r _ TORCH_VERSION TORCH_NPU_VERSION PY_MIN PY_MAX <<< "$(table_rows "$NEWEST_CANN" | head -n 1)"
fi
for pin in TORCH_VERSION TORCH_NPU_VERSION; do
    [[ "${!pin}" =~ ^[0-9]+(\.[0-9]+){1,3}([.a-z0-9]*)?$ ]] || die "$pin='${!pin}' is not a version"
done

# 3. The Python version that torch release supports, checked before anything is installed.
command -v "$PYTHON" >/dev/null || die "$PYTHON not found on PATH"
PY_VERSION="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
ver() { echo "$1" | awk -F. '{ printf "%d%03d", $1, $2 }'; }
if [ "$(ver "$PY_VERSION")" -lt "$(ver "$PY_MIN")" ] || [ "$(ver "$PY_VERSION")" -gt "$(ver "$PY_MAX")" ]; then
    if [ "$DRY_RUN" = 1 ]; then
        say "python $PY_VERSION is outside $PY_MIN..$PY_MAX for torch $TORCH_VERSION (a real run would stop here; set PYTHON)"
    else
        die "torch $TORCH_VERSION supports Python $PY_MIN..$PY_MAX, $PYTHON is $PY_VERSION (set PYTHON)"
    fi
fi
say "python $PY_VERSION, torch $TORCH_VERSION, torch_npu $TORCH_NPU_VERSION (compatible: $COMPAT), venv $VENV"

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
# The worker's own pinned requirements (torch_npu's runtime dependencies among them), then the
# pair the table gives for this CANN.
step "$VPY" -m pip install -r "$REQUIREMENTS"
# torch first: on x86_64 the default index serves the CUDA build, so the CPU wheel comes from
# PyTorch's CPU index, as the torch_npu installation guide (Ascend/pytorch README, "Install
# PyTorch": torch==<v>+cpu --index-url https://download.pytorch.org/whl/cpu) says; on aarch64
# the default index's wheel is the CPU build. Then torch_npu (its torch requirement is met).
case "$(uname -m)" in
    x86_64) step "$VPY" -m pip install "torch==$TORCH_VERSION+cpu" --index-url https://download.pytorch.org/whl/cpu ;;
    *) step "$VPY" -m pip install "torch==$TORCH_VERSION" ;;
esac
step "$VPY" -m pip install "torch_npu==$TORCH_NPU_VERSION"
step "$VPY" -c 'import torch, torch_npu; assert torch.npu.is_available(), "no NPU visible"; print("torch_npu", torch_npu.__version__, "devices:", torch.npu.device_count())'

LINES="CONFORM_PYTHON=$VPY"
if [ -n "$ENV_FILE" ] && [ "$DRY_RUN" = 0 ]; then
    echo "$LINES" >> "$ENV_FILE"
    say "wrote CONFORM_PYTHON to $ENV_FILE"
else
    say "environment for the worker:"
    echo "$LINES"
fi
