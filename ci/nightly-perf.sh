#!/usr/bin/env bash
# Nightly performance gate: time every case of the selected suites on this runner (correctness
# is judged too), record the raw samples, judge them against the perf history and fail on a
# regression. Every night goes into the history store (SQLite, every raw sample with commit,
# date, versions, tier and seed) and is also kept as JSON in the history directory; the HTML
# report (the trend over the last nights drawn from the store, with its change points) is
# always left behind for the CI to upload.
#
# The reference, in this order: --baseline FILE; a hand-kept ci/baselines/<hardware>.json; else
# the history: for each case, the newest segment of its series (E-divisive change points), so
# no baseline file needs re-recording after an intended change. On the first night of a new
# runner the history has nothing: the night is recorded and the script exits 0.
#
# Usage: ci/nightly-perf.sh [--dry-run] [--target NAME] [--hardware PROFILE] [--baseline FILE]
#                           [--history DIR] [--db FILE] [--out DIR] [--threshold X]
#                           [--suite NAME]... [--tier quick|full|all] [--filter REGEX]
#   --dry-run    print every command instead of running it (checks arguments and paths)
#   --target     target to time (default: $CONFORM_TARGET or torch_npu)
#   --hardware   hardware profile for budgets/roofline (default: $CONFORM_HARDWARE or atlas-800i-a2)
#   --baseline   a hand-kept baseline perf file (default: ci/baselines/<hardware>.json if present)
#   --history    directory of every night's perf-<UTC stamp>.json (default: perf-history)
#   --db         the history store: a SQLite file or a postgres:// URL shared by many runners
#                (default: <history>/perf-history.sqlite)
#   --out        output directory (default: nightly-out)
#   --threshold  relative slowdown that counts as a regression (default: 0.03)
#   --suite      restrict to a suite (repeatable; default: all)
#   --tier       tier of cases to time (default: full)
#   --filter     only cases whose id matches this regular expression
# Exit status: 0 no regression and no failing case (also the first night); 1 a regression or a
# failing case; 2 usage or setup error; 4 nothing judged (no case was timed, or no case is in
# both a hand-kept baseline and tonight's record).
set -euo pipefail

DRY_RUN=0
TARGET="${CONFORM_TARGET:-torch_npu}"
HARDWARE="${CONFORM_HARDWARE:-atlas-800i-a2}"
BASELINE=""
HISTORY="perf-history"
DB=""
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
        --target|--hardware|--baseline|--history|--db|--out|--threshold|--suite|--tier|--filter)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --target) TARGET="$2" ;;
                --hardware) HARDWARE="$2" ;;
                --baseline) BASELINE="$2" ;;
                --history) HISTORY="$2" ;;
                --db) DB="$2" ;;
                --out) OUT="$2" ;;
                --threshold) THRESHOLD="$2" ;;
                --suite) SUITES+=("$2") ;;
                --tier) TIER="$2" ;;
                --filter) FILTER="$2" ;;
            esac
            shift ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
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

[ -n "$DB" ] || DB="$HISTORY/perf-history.sqlite"
if [ -z "$BASELINE" ] && [ -f "$REPO/ci/baselines/$HARDWARE.json" ]; then
    BASELINE="$REPO/ci/baselines/$HARDWARE.json"
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
#    Against the hand-kept baseline when there is one, else against the history (before
#    tonight is added to it).
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
    REFERENCE="$BASELINE"
elif [ "$DRY_RUN" = 0 ] && [[ "$DB" != postgres://* && "$DB" != postgresql://* ]] && [ ! -f "$DB" ]; then
    say "first night: the history $DB does not exist yet; tonight's samples start it"
    REFERENCE="(none)"
else
    step "$CONFORM" perf history gate --db "$DB" --candidate "$OUT/perf.json" \
        --threshold "$THRESHOLD" --json "$OUT/compare.json" || compare_rc=$?
    case "$compare_rc" in
        0|1) COMPARE_ARGS=(--baseline "$OUT/compare.json") ;;
        4) say "first night for every case: no earlier run in $DB; tonight's samples are recorded"
           compare_rc=0 ;;
        *) die "conform perf history gate failed ($compare_rc)" ;;
    esac
    REFERENCE="the history $DB"
fi

# Tonight joins the history (a regression too: it is a real measurement, and a lasting one
# becomes the new segment once the change point is established).
step "$CONFORM" perf history ingest --db "$DB" "$OUT/perf.json" \
    || die "conform perf history ingest failed into $DB"

# 3. The report, with the trend over the last nights drawn from the history store.
step "$CONFORM" report --input "$OUT/results.json" --history "$DB" --history-runs "$TREND_NIGHTS" \
    "${COMPARE_ARGS[@]+"${COMPARE_ARGS[@]}"}" --out "$OUT/report" \
    || say "warning: the report could not be written"

say "record exit $record_rc, compare exit $compare_rc; report in $OUT/report/index.html"
if [ "$compare_rc" = 1 ]; then
    say "REGRESSION against $REFERENCE (see $OUT/compare.json)"
    exit 1
fi
if [ "$record_rc" = 1 ]; then
    say "failing cases: see $OUT/report/index.html"
    exit 1
fi
exit 0
