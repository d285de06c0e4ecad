#!/usr/bin/env bash
# Nightly performance gate: time every case of the selected suites on this runner, record the
# raw samples, compare them with the stored baseline and fail on a regression. Always leaves
# the HTML report (with the trend over the kept history) behind for the CI to upload.
#
# Usage: ci/nightly-perf.sh [--dry-run] [--target NAME] [--hardware PROFILE] [--baseline FILE]
#                           [--history DIR] [--out DIR] [--threshold X] [--suite NAME]...
#   --dry-run    print every command instead of running it (checks arguments and paths)
#   --target     target to time (default: $CONFORM_TARGET or torch_npu)
#   --hardware   hardware profile for budgets/roofline (default: $CONFORM_HARDWARE or atlas-800i-a2)
#   --baseline   stored baseline perf record (default: ci/baselines/<hardware>.json)
#   --history    directory of earlier nights' perf-*.json, for the trend (default: perf-history)
#   --out        output directory (default: nightly-out)
#   --threshold  relative slowdown that counts as a regression (default: 0.03)
#   --suite      restrict to a suite (repeatable; default: all)
# Exit status: 0 no regression and no failing case; 1 a regression or a failing case;
# 2 usage or setup error (for example no baseline: see ci/contribution.md to create one).
set -euo pipefail

DRY_RUN=0
TARGET="${CONFORM_TARGET:-torch_npu}"
HARDWARE="${CONFORM_HARDWARE:-atlas-800i-a2}"
BASELINE=""
HISTORY="perf-history"
OUT="nightly-out"
THRESHOLD="0.03"
SUITES=()
CONFORM="${CONFORM:-conform}"
KEEP_HISTORY=30

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
        --target|--hardware|--baseline|--history|--out|--threshold|--suite)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --target) TARGET="$2" ;;
                --hardware) HARDWARE="$2" ;;
                --baseline) BASELINE="$2" ;;
                --history) HISTORY="$2" ;;
                --out) OUT="$2" ;;
                --threshold) THRESHOLD="$2" ;;
                --suite) SUITES+=("$2") ;;
            esac
            shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done

[[ "$THRESHOLD" =~ ^0?\.[0-9]+$|^[0-9]+(\.[0-9]+)?$ ]] || die "--threshold '$THRESHOLD' is not a number"
[[ "$TARGET" =~ ^[A-Za-z0-9_.-]+$ ]] || die "--target '$TARGET' is not a target name"
[[ "$HARDWARE" =~ ^[A-Za-z0-9_.-]+$ ]] || die "--hardware '$HARDWARE' is not a profile name"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASELINE="${BASELINE:-$REPO/ci/baselines/$HARDWARE.json}"
if [ ! -f "$BASELINE" ]; then
    if [ "$DRY_RUN" = 1 ]; then
        say "baseline $BASELINE not found (a real run would stop here)"
    else
        die "no baseline at $BASELINE: record one on this runner with \`conform run --perf\` and \`conform perf record\`, review it, and commit it there"
    fi
fi

SUITE_ARGS=()
for s in "${SUITES[@]+"${SUITES[@]}"}"; do SUITE_ARGS+=(--suite "$s"); done
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
step mkdir -p "$OUT" "$HISTORY"

# 1. Time every case (correctness is checked too: a wrong kernel is never "fast").
run_rc=0
step "$CONFORM" run --perf --tier full --target "$TARGET" --hardware "$HARDWARE" \
    "${SUITE_ARGS[@]+"${SUITE_ARGS[@]}"}" \
    --json "$OUT/results.json" --junit "$OUT/results.xml" || run_rc=$?
# 2. Raw samples plus the environment, kept for the trend.
record_rc=0
step "$CONFORM" perf record --input "$OUT/results.json" --out "$OUT/perf.json" || record_rc=$?
[ "$record_rc" = 0 ] || die "conform perf record failed ($record_rc)"
step cp "$OUT/perf.json" "$HISTORY/perf-$STAMP.json"
# 3. The gate: ratio of medians with a bootstrap interval and a rank test; exit 1 on regression.
compare_rc=0
step "$CONFORM" perf compare --baseline "$BASELINE" --candidate "$OUT/perf.json" \
    --threshold "$THRESHOLD" --json "$OUT/compare.json" || compare_rc=$?
[ "$compare_rc" -le 1 ] || die "conform perf compare failed ($compare_rc)"

# 4. The report, with the trend over the kept history (oldest first).
HISTORY_FILES=()
if [ -d "$HISTORY" ]; then
    while IFS= read -r f; do HISTORY_FILES+=(--perf "$f"); done \
        < <(find "$HISTORY" -maxdepth 1 -name 'perf-*.json' | sort | tail -n "$KEEP_HISTORY")
fi
if [ "${#HISTORY_FILES[@]}" = 0 ]; then HISTORY_FILES=(--perf "$OUT/perf.json"); fi
step "$CONFORM" report --input "$OUT/results.json" "${HISTORY_FILES[@]}" \
    --baseline "$OUT/compare.json" --out "$OUT/report" \
    || say "warning: the report could not be written"

# Older history beyond what the trend shows is dropped.
if [ "$DRY_RUN" = 0 ] && [ -d "$HISTORY" ]; then
    find "$HISTORY" -maxdepth 1 -name 'perf-*.json' | sort | head -n "-$KEEP_HISTORY" | xargs -r rm -f
fi

say "run exit $run_rc, compare exit $compare_rc; report in $OUT/report/index.html"
if [ "$compare_rc" = 1 ]; then
    say "REGRESSION against $BASELINE (see $OUT/compare.json)"
    exit 1
fi
if [ "$run_rc" != 0 ]; then
    say "failing cases (exit $run_rc): see $OUT/report/index.html"
    exit 1
fi
exit 0
