#!/usr/bin/env bash
# Nightly performance gate: time every case of the selected suites on this runner (correctness
# is judged too), record the raw samples, compare them with the baseline and fail on a
# regression. Every night's samples are kept in the history directory; the HTML report (with
# the trend over the last nights) is always left behind for the CI to upload.
#
# The baseline is, in this order: --baseline FILE; a hand-kept ci/baselines/<hardware>.json; the
# newest earlier night in the history. On the first night of a new runner there is none: the
# night is recorded (it becomes the next night's baseline) and the script exits 0.
#
# Usage: ci/nightly-perf.sh [--dry-run] [--target NAME] [--hardware PROFILE] [--baseline FILE]
#                           [--history DIR] [--out DIR] [--threshold X] [--suite NAME]...
#                           [--tier quick|full|all] [--filter REGEX]
#   --dry-run    print every command instead of running it (checks arguments and paths)
#   --target     target to time (default: $CONFORM_TARGET or torch_npu)
#   --hardware   hardware profile for budgets/roofline (default: $CONFORM_HARDWARE or atlas-800i-a2)
#   --baseline   baseline perf file (default: ci/baselines/<hardware>.json, else the newest night)
#   --history    directory of every night's perf-<UTC stamp>.json (default: perf-history)
#   --out        output directory (default: nightly-out)
#   --threshold  relative slowdown that counts as a regression (default: 0.03)
#   --suite      restrict to a suite (repeatable; default: all)
#   --tier       tier of cases to time (default: full)
#   --filter     only cases whose id matches this regular expression
# Exit status: 0 no regression and no failing case (also the first night); 1 a regression or a
# failing case; 2 usage or setup error; 4 nothing judged (no case was timed, or no case is in
# both the baseline and tonight's record).
set -euo pipefail

DRY_RUN=0
TARGET="${CONFORM_TARGET:-torch_npu}"
HARDWARE="${CONFORM_HARDWARE:-atlas-800i-a2}"
BASELINE=""
HISTORY="perf-history"
OUT="nightly-out"
THRESHOLD="0.03"
SUITES=()
TIER="full"
FILTER=""
CONFORM="${CONFORM:-conform}"
# Nights shown in the report's trend (every night stays in the history directory).
TREND_NIGHTS=30

die() { echo "nightly-perf: $*" >&2; exit 2; }
say() { echo "nightly-perf: $*"; }
# Prints a command as a shell would read it (single quotes where needed).
show() {
    local out="+" a
    for a in "$@"; do
        if [[ "$a" =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
    done
    echo "$out"
}
# Runs a command (its exit status is returned, never fatal), or prints it under --dry-run.
step() {
    if [ "$DRY_RUN" = 1 ]; then
        show "$@"
        return 0
    fi
    local rc=0
    "$@" || rc=$?
    return "$rc"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --target|--hardware|--baseline|--history|--out|--threshold|--suite|--tier|--filter)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --target) TARGET="$2" ;;
                --hardware) HARDWARE="$2" ;;
                --baseline) BASELINE="$2" ;;
                --history) HISTORY="$2" ;;
                --out) OUT="$2" ;;
                --threshold) THRESHOLD="$2" ;;
                --suite) SUITES+=("$2") ;;
                --tier) TIER="$2" ;;
                --filter) FILTER="$2" ;;
            esac
            shift ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done

[[ "$THRESHOLD" =~ ^0?\.[0-9]+$|^[0-9]+(\.[0-9]+)?$ ]] || die "--threshold '$THRESHOLD' is not a number"
[[ "$TARGET" =~ ^[A-Za-z0-9_.-]+$ ]] || die "--target '$TARGET' is not a target name"
[[ "$HARDWARE" =~ ^[A-Za-z0-9_.-]+$ ]] || die "--hardware '$HARDWARE' is not a profile name"
[[ "$TIER" =~ ^(quick|full|all)$ ]] || die "--tier '$TIER' is not quick, full or all"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "$BASELINE" ] && [ ! -f "$BASELINE" ] && [ "$DRY_RUN" = 0 ]; then
    die "--baseline $BASELINE: no such file"
fi

SELECT_ARGS=(--tier "$TIER")
for s in "${SUITES[@]+"${SUITES[@]}"}"; do SELECT_ARGS+=(--suite "$s"); done
[ -z "$FILTER" ] || SELECT_ARGS+=(--filter "$FILTER")
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
step mkdir -p "$OUT" "$HISTORY"

# The newest earlier night, before tonight's is added.
newest_night() {
    [ -d "$HISTORY" ] || return 0
    find "$HISTORY" -maxdepth 1 -name 'perf-*.json' | sort | tail -n 1
}
if [ -z "$BASELINE" ]; then
    if [ -f "$REPO/ci/baselines/$HARDWARE.json" ]; then
        BASELINE="$REPO/ci/baselines/$HARDWARE.json"
    else
        BASELINE="$(newest_night)"
    fi
fi

# 1. Time every case and judge its numbers (a wrong kernel is never "fast"): the results
#    (JSON, JUnit) and the raw samples with the environment, in one run.
record_rc=0
step "$CONFORM" perf record --out "$OUT/perf.json" --target "$TARGET" --hardware "$HARDWARE" \
    "${SELECT_ARGS[@]}" --json "$OUT/results.json" --junit "$OUT/results.xml" || record_rc=$?
case "$record_rc" in
    0|1) ;;
    4) say "nothing judged: no case was timed (see the skip reasons above)"; exit 4 ;;
    *) die "conform perf record failed ($record_rc)" ;;
esac
step cp "$OUT/perf.json" "$HISTORY/perf-$STAMP.json"

# 2. The gate: ratio of locations with its interval and a rank test; exit 1 on regression.
compare_rc=0
COMPARE_ARGS=()
if [ -n "$BASELINE" ]; then
    step "$CONFORM" perf compare --baseline "$BASELINE" --candidate "$OUT/perf.json" \
        --threshold "$THRESHOLD" --json "$OUT/compare.json" || compare_rc=$?
    case "$compare_rc" in
        0|1) COMPARE_ARGS=(--baseline "$OUT/compare.json") ;;
        4) say "nothing judged: no case is in both $BASELINE and tonight's record"; exit 4 ;;
        *) die "conform perf compare failed ($compare_rc)" ;;
    esac
else
    say "first night: no baseline (no --baseline, no ci/baselines/$HARDWARE.json, no earlier night in $HISTORY); tonight's samples are recorded as tomorrow's baseline"
fi

# 3. The report, with the trend over the last nights (oldest first).
HISTORY_FILES=()
if [ -d "$HISTORY" ]; then
    while IFS= read -r f; do HISTORY_FILES+=(--perf "$f"); done \
        < <(find "$HISTORY" -maxdepth 1 -name 'perf-*.json' | sort | tail -n "$TREND_NIGHTS")
fi
if [ "${#HISTORY_FILES[@]}" = 0 ]; then HISTORY_FILES=(--perf "$OUT/perf.json"); fi
step "$CONFORM" report --input "$OUT/results.json" "${HISTORY_FILES[@]}" \
    "${COMPARE_ARGS[@]+"${COMPARE_ARGS[@]}"}" --out "$OUT/report" \
    || say "warning: the report could not be written"

say "record exit $record_rc, compare exit $compare_rc; report in $OUT/report/index.html"
if [ "$compare_rc" = 1 ]; then
    say "REGRESSION against $BASELINE (see $OUT/compare.json)"
    exit 1
fi
if [ "$record_rc" = 1 ]; then
    say "failing cases: see $OUT/report/index.html"
    exit 1
fi
exit 0
