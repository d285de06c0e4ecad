#!/usr/bin/env bash
# Sets up the Python side of the torch_npu worker on an Atlas runner: a virtual environment
# with torch and torch_npu pinned to the CANN release installed on the machine, checked by
# importing torch_npu and asking for a device. Writes CONFORM_PYTHON (the interpreter that
# `targets/*/target.toml` start as `${CONFORM_PYTHON}`) and what it found of CANN and NNAL's
# ATB (CONFORM_CANN_RELEASE, CONFORM_ATB_VERSION, CONFORM_ATB_CXX_ABI, ...) to an env file the
# CI sources.
#
# CANN is found under every layout CANN documents (ci/atlas/ascend-env.sh: <base>/cann on 8.5
# and later, <base>/ascend-toolkit/latest before, $ASCEND_HOME_PATH, $ASCEND_TOOLKIT_HOME,
# $CANN_SET_ENV) and its set_env.sh sourced. Before anything is installed, the CANN release
# (read from the toolkit's version files, an alpha / beta build counting as the release it
# belongs to, or $CANN_VERSION) and the torch / torch_npu pins are checked against
# ci/atlas/torch-npu-compat.tsv, and the Python version against the range that torch release
# supports: a combination outside the table stops here with exit 2, printing the rows that
# would fit. NNAL's ATB (nnal/atb/set_env.sh), which torch_npu's _npu_reshape_and_cache needs,
# is sourced with the worker's torch ABI and checked by loading libatb.so; without it the
# ATB-based cases are skipped, and where CONFORM_REQUIRE_TARGETS names torch_npu the setup stops
# (exit 2) saying what to install.
#
# Usage: ci/atlas/setup-torch-npu.sh [--dry-run] [--venv DIR] [--env-file FILE]
#        ci/atlas/setup-torch-npu.sh --detect-cann [--cann-root DIR]...
#        ci/atlas/setup-torch-npu.sh --detect [--ascend-base DIR]...
#   --dry-run   print every step instead of running it; still checks the arguments, the pins,
#               the Python interpreter and the repository layout (the parts that need no NPU)
#   --detect-cann  only read the CANN release from the version files under the --cann-root
#               directories (default: the toolkit found as above) and print "<release> <file>",
#               then "build <build>" when the toolkit names a pre-release build; exit 2 when
#               none is found
#   --detect    only find CANN and ATB under the --ascend-base directories (default:
#               $ASCEND_BASES, else /usr/local/Ascend and $HOME/Ascend) and print KEY=VALUE
#               lines (cann_root, cann_set_env, cann_release, cann_build, cann_version_file,
#               atb_set_env, atb_version; `none` where nothing was found); exit 2 without CANN
#   --venv      virtual environment directory (default: $CONFORM_NPU_VENV or .venv-npu)
#   --env-file  file to append KEY=VALUE lines to (GitHub: "$GITHUB_ENV"; GitLab: a dotenv
#               file that the job sources); default: print them only
# Pins (override through the environment): TORCH_NPU_VERSION (default: the newest pair the
# table lists for the installed CANN; TORCH_VERSION follows the table), CANN_SET_ENV (the
# toolkit's set_env.sh, found by itself otherwise), CANN_VERSION (skips detection: what a
# runner reports, or a simulated version in tests).
set -euo pipefail

DRY_RUN=0
DETECT_ONLY=""
DETECT_ROOTS=()
DETECT_BASES=()
VENV="${CONFORM_NPU_VENV:-.venv-npu}"
ENV_FILE=""
TORCH_NPU_VERSION="${TORCH_NPU_VERSION:-}"
CANN_SET_ENV="${CANN_SET_ENV:-}"
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
        --detect-cann) DETECT_ONLY=cann ;;
        --detect) DETECT_ONLY=all ;;
        --cann-root) [ $# -ge 2 ] || die "--cann-root needs a directory"; DETECT_ROOTS+=("$2"); shift ;;
        --ascend-base) [ $# -ge 2 ] || die "--ascend-base needs a directory"; DETECT_BASES+=("$2"); shift ;;
        --venv) [ $# -ge 2 ] || die "--venv needs a directory"; VENV="$2"; shift ;;
        --env-file) [ $# -ge 2 ] || die "--env-file needs a path"; ENV_FILE="$2"; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
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

# 1. CANN and ATB, found under the documented layouts (ci/atlas/ascend-env.sh), and the CANN
# release: $CANN_VERSION, else read from the toolkit's version files (an alpha or beta build
# counts as the release it belongs to: 8.0.RC2.alpha001 is 8.0.RC2, 8.5.0.alpha001 is 8.5.0).
ASCEND_ENV_FUNCTIONS_ONLY=1
# shellcheck source=ci/atlas/ascend-env.sh
source "$REPO/ci/atlas/ascend-env.sh"
unset ASCEND_ENV_FUNCTIONS_ONLY

# Prints "<release> <file>", and "build <build>" when they differ, for the first version file
# under the given roots.
print_release() {
    local found build
    found="$(ascend_detect_cann_build "$@")" || return 1
    build="${found%% *}"
    echo "$(ascend_release_of "$build") ${found#* }"
    [ "$build" = "$(ascend_release_of "$build")" ] || echo "build $build"
}

if [ "$DETECT_ONLY" = cann ]; then
    if [ ${#DETECT_ROOTS[@]} -eq 0 ]; then
        ascend_find_cann || die "no CANN toolkit (set_env.sh) under: $(ascend_cann_roots | tr '\n' ' ')"
        DETECT_ROOTS=("$ASCEND_CANN_ROOT")
    fi
    print_release "${DETECT_ROOTS[@]}" || die "no CANN release found under: ${DETECT_ROOTS[*]}"
    exit 0
fi
if [ "$DETECT_ONLY" = all ]; then
    if [ ${#DETECT_BASES[@]} -gt 0 ]; then
        ASCEND_BASES="$(IFS=:; echo "${DETECT_BASES[*]}")"
    fi
    if ascend_find_atb; then :; fi
    if ! ascend_find_cann; then
        echo "cann_root=none"
        echo "atb_set_env=${ASCEND_ATB_SET_ENV:-none}"
        echo "atb_version=${ASCEND_ATB_VERSION:-none}"
        die "no CANN toolkit (set_env.sh) under: $(ascend_cann_roots | tr '\n' ' ')"
    fi
    echo "cann_root=$ASCEND_CANN_ROOT"
    echo "cann_set_env=$ASCEND_CANN_SET_ENV"
    echo "cann_release=${ASCEND_CANN_RELEASE:-none}"
    echo "cann_build=${ASCEND_CANN_BUILD:-none}"
    echo "cann_version_file=${ASCEND_CANN_VERSION_FILE:-none}"
    echo "atb_set_env=${ASCEND_ATB_SET_ENV:-none}"
    echo "atb_version=${ASCEND_ATB_VERSION:-none}"
    exit 0
fi

CANN_FOUND=0
if ascend_find_cann; then
    CANN_FOUND=1
    CANN_SET_ENV="$ASCEND_CANN_SET_ENV"
    say "CANN toolkit: $ASCEND_CANN_ROOT (environment: $CANN_SET_ENV)"
fi
CANN_BUILD=""
if [ -z "$CANN_VERSION" ] && [ -n "${ASCEND_CANN_BUILD:-}" ]; then
    CANN_BUILD="$ASCEND_CANN_BUILD"
    CANN_VERSION="$ASCEND_CANN_RELEASE"
    if [ "$CANN_BUILD" = "$CANN_VERSION" ]; then
        say "CANN release $CANN_VERSION read from $ASCEND_CANN_VERSION_FILE"
    else
        say "CANN build $CANN_BUILD (release $CANN_VERSION) read from $ASCEND_CANN_VERSION_FILE"
    fi
elif [ -n "$CANN_VERSION" ]; then
    CANN_BUILD="$CANN_VERSION"
    ascend_is_release "$CANN_VERSION" && CANN_VERSION="$(ascend_release_of "$CANN_VERSION")"
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
        die "cannot tell the CANN release (no toolkit with ascend_toolkit_install.info, version.cfg or version.info naming one under: $(ascend_cann_roots | tr '\n' ' ')); set CANN_VERSION"
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

# NNAL's ATB: torch_npu's ATB operators (_npu_reshape_and_cache, which every mla_decode case
# and the BnBsH cache writes use) load libatb.so, which only nnal/atb/set_env.sh puts on the
# library path.
ATB_FOUND=0
if ascend_find_atb; then
    ATB_FOUND=1
    say "NNAL ATB $ASCEND_ATB_VERSION: $ASCEND_ATB_SET_ENV"
else
    ATB_INSTALL="install NNAL (Ascend-cann-nnal_${CANN_VERSION:-<CANN release>}_linux-$(uname -m).run --install, the package of the same CANN release) so that nnal/atb/set_env.sh exists under one of: $(ascend_atb_roots | tr '\n' ' ')"
    if [[ ",${CONFORM_REQUIRE_TARGETS:-}," =~ [,[:space:]]torch_npu[,[:space:]] ]]; then
        if [ "$DRY_RUN" = 1 ]; then
            say "NNAL ATB: not found; torch_npu is required (CONFORM_REQUIRE_TARGETS), so a real run would stop here: $ATB_INSTALL"
        else
            die "NNAL ATB is not installed and torch_npu is required (CONFORM_REQUIRE_TARGETS): its ATB-based cases (every mla_decode case, the BnBsH cache writes of paged_kv and pa_decode_int8) cannot run; $ATB_INSTALL"
        fi
    else
        say "NNAL ATB: not found; the ATB-based cases will be skipped with the reason ($ATB_INSTALL)"
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

if [ "$CANN_FOUND" = 1 ]; then
    if [ "$DRY_RUN" = 0 ]; then
        ascend_source "$CANN_SET_ENV"
    fi
elif [ "$DRY_RUN" = 1 ]; then
    say "CANN environment: no set_env.sh found (a real run would stop here)"
else
    die "CANN is not installed: no set_env.sh under: $(ascend_cann_roots | tr '\n' ' ') (set CANN_SET_ENV)"
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

LINES=("CONFORM_PYTHON=$VPY" "CONFORM_CANN_RELEASE=${CANN_VERSION:-}" "CONFORM_CANN_BUILD=${CANN_BUILD:-}"
       "CONFORM_CANN_SET_ENV=${CANN_SET_ENV:-}")
if [ "$ATB_FOUND" = 1 ]; then
    # ATB ships one build per C++ ABI; the worker's torch says which one it links against.
    if [ "$DRY_RUN" = 1 ]; then
        ATB_ABI="<0 or 1: torch.compiled_with_cxx11_abi() of $VPY>"
        show "$VPY" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))'
    else
        ATB_ABI="$("$VPY" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))')"
        ascend_source "$ASCEND_ATB_SET_ENV" "--cxx_abi=$ATB_ABI"
    fi
    say "NNAL ATB environment: $ASCEND_ATB_SET_ENV --cxx_abi=$ATB_ABI"
    # What torch_npu does on the first ATB operator: load libatb.so through the library path.
    step "$VPY" -c 'import ctypes; ctypes.CDLL("libatb.so"); print("libatb.so loads")'
    LINES+=("CONFORM_ATB_VERSION=$ASCEND_ATB_VERSION" "CONFORM_ATB_SET_ENV=$ASCEND_ATB_SET_ENV"
            "CONFORM_ATB_CXX_ABI=$ATB_ABI")
fi
if [ -n "$ENV_FILE" ] && [ "$DRY_RUN" = 0 ]; then
    printf '%s\n' "${LINES[@]}" >> "$ENV_FILE"
    say "wrote ${LINES[*]%%=*} to $ENV_FILE"
else
    say "environment for the worker:"
    printf '%s\n' "${LINES[@]}"
fi
