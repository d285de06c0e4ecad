#!/usr/bin/env bash
# Nightly performance gate: time every case of the selected suites on this runner (correctness
# is judged too), record the raw samples, judge them and fail on a regression. Two judges,
# because a shared runner moves as a whole from night to night (other jobs, clocks):
#
# 1. The same-night control. The last good build is kept in the state directory (a copy of the
#    conform binary, served as a worker by `conform perf serve-reference`, for the reference
#    target; a copy of the worker's directory and of the repository files it names for a
#    worker target: `conform perf keep-control`, which refuses a worker whose copy could not
#    start on a later night) with what it timed. Tonight the selected cases are timed on
#    tonight's build and on that build in rounds (`conform run --against`): each round starts
#    fresh worker processes of both, times every case in an A B B A block and gives one paired
#    ratio per case, and the verdict is judged on the rounds' ratios, so neither even load nor
#    where one process happened to be placed passes for a regression. The first night (no
#    earlier build kept) records and says so. A night that passes keeps its build as the next
#    control.
#
# Every night goes into the history store (SQLite, every raw sample with commit, date,
# versions, tier and seed) and is also kept as JSON in the history directory; the HTML report
# (the trend over the last nights drawn from the store, with its change points) is always left
# behind for the CI to upload.
#
# Usage: ci/nightly-perf.sh [--dry-run] [--target NAME] [--hardware PROFILE] [--baseline FILE]
#                           [--history DIR] [--db FILE] [--state DIR] [--no-control]
#                           [--no-fingerprint]
#                           [--out DIR] [--threshold X] [--suite NAME]... [--tier quick|full|all]
#                           [--filter REGEX]
#   --dry-run    print every command instead of running it (checks arguments and paths)
#   --target     target to time (default: $CONFORM_TARGET or torch_npu)
#   --hardware   hardware profile for budgets/roofline (default: $CONFORM_HARDWARE or atlas-800i-a2)
#   --baseline   a hand-kept baseline perf file (default: ci/baselines/<hardware>.json if present)
#   --history    directory of every night's perf-<UTC stamp>.json (default: perf-history)
#   --db         the history store: a SQLite file or a postgres:// URL shared by many runners
#                (default: <history>/perf-history.sqlite, also `conform perf history`'s default)
#   --state      where the last good build is kept for the same-night control
#                (default: <history>/control)
#   --no-control judge against the history only (no same-night control)
#   --no-fingerprint  skip the fingerprint step (which value of each knob of conform's model the
#                target's bits match, kept in the history as fingerprint-<UTC stamp>.json and
#                compared with the last night's: a change is reported, never a failure)
#   --out        output directory (default: nightly-out)
#   --threshold  relative slowdown that counts as a regression (default: 0.03)
#   --suite      restrict to a suite (repeatable; default: all)
#   --tier       tier of cases to time (default: full)
#   --filter     only cases whose id matches this regular expression
# conform: $CONFORM if set, else tonight's code built with `cargo build --release` (the binary
# cargo names, so CARGO_TARGET_DIR and cargo's configuration are honoured); without cargo and
# without $CONFORM the night refuses to start: a binary left in a target directory may be
# stale and is never timed silently.
# Exit status: 0 no regression and no failing case (also the first night); 1 a regression or a
# failing case; 2 usage or setup error (also a target whose build cannot be kept as the
# control); 3 INCONCLUSIVE: nothing was found slower, but a check could not run (the control
# could not time a case, or timed too few rounds; the control run or the history gate could
# not judge) and the night is not a pass; 4 nothing judged (no case was timed, or no case is in
# both a hand-kept baseline and tonight's record); 130 / 143 stopped by SIGINT / SIGTERM.
# Faults (docs/perf.md, "The nightly script under faults"): a closed, broken or full stdout or
# stderr never stops the night. SIGINT / SIGTERM are passed on to the conform running, which
# writes what it finished (results, perf record: partial, marked interrupted); the script then
# stops with 130 / 143, keeping everything written so far, and an interrupted night never joins
# the history. SIGKILL cannot be trapped: conform is told the script's pid (CONFORM_PARENT_PID)
# and ends with it as on SIGTERM, its workers with it.
set -euo pipefail
# A reader that went away (`| head`) must not kill the night: writes to it fail instead.
trap '' PIPE

DRY_RUN=0
TARGET="${CONFORM_TARGET:-torch_npu}"
HARDWARE="${CONFORM_HARDWARE:-atlas-800i-a2}"
BASELINE=""
HISTORY="perf-history"
DB=""
STATE=""
CONTROL=1
FINGERPRINT=1
OUT="nightly-out"
THRESHOLD="0.03"
SUITES=()
TIER="full"
FILTER=""
CONFORM="${CONFORM:-}"
# One-sided level of the control's ratio bound over its rounds (docs/perf.md, "Calibration of the
# nightly gate": the calibration that chose it and the rounds' default, 16; at 0.025 an unchanged
# build was flagged in 1.8% of simulated 20-night histories under uneven load, at 0.01 in 0.4%,
# before the verdicts were held to the night's cases and confirmed: none since).
CONTROL_ALPHA=0.01
# Nights shown in the report's trend (every night stays in the history directory).
TREND_NIGHTS=30

# Messages never fail the night (a closed or full stdout/stderr loses them, nothing else).
die() { echo "nightly-perf: $*" >&2 || true; exit 2; }
say() { echo "nightly-perf: $*" || true; }
# Prints a command as a shell would read it (single quotes where needed).
show() {
    local out="+" a
    for a in "$@"; do
        if [[ "$a" =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
    done
    echo "$out" || true
}

# Signals. Each command runs in the background (in its own process group: `set -m`, so a
# terminal's ^C reaches the script alone, and the script passes it on once) while the script
# waits for it, so a trapped SIGINT / SIGTERM is handled at once: passed on to the command's
# group, whose conform writes what it finished and exits; then the script stops with 130 / 143.
# conform ends with the script even on SIGKILL (CONFORM_PARENT_PID: PR_SET_PDEATHSIG).
set -m
export CONFORM_PARENT_PID=$$
CHILD=""
CHILD_STDOUT=""
SIGNALLED=""
PASSED_ON=""
on_signal() {
    SIGNALLED="$1"
    if [ -n "$CHILD" ] && [ -z "$PASSED_ON" ]; then
        PASSED_ON=1
        kill -s "$1" -- "-$CHILD" 2>/dev/null || true
    fi
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
# Stops the night if a signal came: what was written stays (an interrupted night is not added
# to the history, and its build never becomes the control).
stop_if_signalled() {
    [ -n "$SIGNALLED" ] || return 0
    say "${1:-stopped by SIG$SIGNALLED: what was written so far is kept in ${OUT:-nightly-out} (an interrupted night joins neither the history nor the control)}"
    if [ "$SIGNALLED" = INT ]; then exit 130; else exit 143; fi
}
# Runs a command in the background and waits for it (its stdout into $CHILD_STDOUT when set);
# returns its exit status. A signal passed on to it stops the script once it has ended.
run_child() {
    stop_if_signalled
    local rc=0
    PASSED_ON=""
    if [ -n "$CHILD_STDOUT" ]; then "$@" >"$CHILD_STDOUT" & else "$@" & fi
    CHILD=$!
    # A signal that came before $CHILD was known is passed on now.
    if [ -n "$SIGNALLED" ] && [ -z "$PASSED_ON" ]; then
        PASSED_ON=1
        kill -s "$SIGNALLED" -- "-$CHILD" 2>/dev/null || true
    fi
    while :; do
        rc=0
        wait "$CHILD" || rc=$?
        # A trapped signal ends `wait` early (status > 128) while the command still runs.
        if [ "$rc" -gt 128 ] && kill -0 "$CHILD" 2>/dev/null; then continue; fi
        break
    done
    CHILD=""
    stop_if_signalled
    return "$rc"
}
# Runs a command (its exit status is returned, never fatal), or prints it under --dry-run.
step() {
    if [ "$DRY_RUN" = 1 ]; then
        show "$@"
        return 0
    fi
    local rc=0
    run_child "$@" || rc=$?
    return "$rc"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --no-control) CONTROL=0 ;;
        --no-fingerprint) FINGERPRINT=0 ;;
        --target|--hardware|--baseline|--history|--db|--state|--out|--threshold|--suite|--tier|--filter)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --target) TARGET="$2" ;;
                --hardware) HARDWARE="$2" ;;
                --baseline) BASELINE="$2" ;;
                --history) HISTORY="$2" ;;
                --db) DB="$2" ;;
                --state) STATE="$2" ;;
                --out) OUT="$2" ;;
                --threshold) THRESHOLD="$2" ;;
                --suite) SUITES+=("$2") ;;
                --tier) TIER="$2" ;;
                --filter) FILTER="$2" ;;
            esac
            shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0" || true; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done

[[ "$THRESHOLD" =~ ^0?\.[0-9]+$|^[0-9]+(\.[0-9]+)?$ ]] || die "--threshold '$THRESHOLD' is not a number"
[[ "$TARGET" =~ ^[A-Za-z0-9_.-]+$ ]] || die "--target '$TARGET' is not a target name"
[[ "$HARDWARE" =~ ^[A-Za-z0-9_.-]+$ ]] || die "--hardware '$HARDWARE' is not a profile name"
[[ "$TIER" =~ ^(quick|full|all)$ ]] || die "--tier '$TIER' is not quick, full or all"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The project whose targets are timed (as conform finds it).
ROOT="${CONFORM_ROOT:-$REPO}"
if [ -z "$CONFORM" ]; then
    command -v cargo >/dev/null 2>&1 || die "no conform to time: CONFORM is not set and cargo is not there to build tonight's code (set CONFORM to the conform binary; one left in a target directory may be stale and is never timed silently)"
    say "building conform (cargo build --release), so tonight's code is what is timed"
    BUILD=(cargo build --release --quiet --manifest-path "$REPO/Cargo.toml" -p conform-cli
        --features postgres --bin conform --message-format=json-render-diagnostics)
    if [ "$DRY_RUN" = 1 ]; then
        show "${BUILD[@]}"
        CONFORM="<the conform binary cargo builds>"
    else
        BUILD_LOG="$(mktemp)"
        CHILD_STDOUT="$BUILD_LOG"
        build_rc=0
        run_child "${BUILD[@]}" || build_rc=$?
        CHILD_STDOUT=""
        # The binary cargo says it built: under CARGO_TARGET_DIR, a configured target
        # directory or the repository's target/, whichever cargo used.
        CONFORM="$(sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' "$BUILD_LOG" | tail -n 1)"
        rm -f "$BUILD_LOG"
        [ "$build_rc" = 0 ] || die "cargo build --release failed ($build_rc); set CONFORM to a conform binary"
        [ -n "$CONFORM" ] && [ -x "$CONFORM" ] \
            || die "cargo build --release named no conform binary it built; set CONFORM to a conform binary"
    fi
fi
say "timing with $CONFORM"
if [ -n "$BASELINE" ] && [ ! -f "$BASELINE" ] && [ "$DRY_RUN" = 0 ]; then
    die "--baseline $BASELINE: no such file"
fi

SELECT_ARGS=(--tier "$TIER")
for s in "${SUITES[@]+"${SUITES[@]}"}"; do SELECT_ARGS+=(--suite "$s"); done
[ -z "$FILTER" ] || SELECT_ARGS+=(--filter "$FILTER")
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
step mkdir -p "$OUT" "$HISTORY"

[ -n "$DB" ] || DB="$HISTORY/perf-history.sqlite"
[ -n "$STATE" ] || STATE="$HISTORY/control"
# Absolute: the kept build's target.toml names its binary by its own directory.
if [ "$DRY_RUN" = 0 ]; then
    mkdir -p "$STATE"
    STATE="$(cd "$STATE" && pwd)"
fi
# The kept build of the same-night control: a worker directory named after what it stands for.
CONTROL_NAME="$TARGET-last-good"
KEPT="$STATE/last-good/$CONTROL_NAME"
AGAINST_ARGS=()
if [ "$CONTROL" = 1 ]; then
    if [ -f "$KEPT/target.toml" ]; then
        AGAINST_ARGS=(--against "$KEPT" --ab-threshold "$THRESHOLD" --ab-alpha "$CONTROL_ALPHA")
        say "same-night control: tonight's build against the last good build in $KEPT ($(cat "$STATE/last-good/commit" 2>/dev/null || echo 'commit unknown')), in rounds of fresh processes"
    else
        say "first night for the same-night control: no earlier build kept in $STATE; tonight records, and a passing night's build becomes the control"
    fi
fi
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

# 1b. Tonight's build, staged as the next control (kept only if the night passes): refused here,
#     before the long control, when the target's copy could not run on a later night.
STAGED="$STATE/last-good.new"
if [ "$CONTROL" = 1 ]; then
    step rm -rf "$STAGED"
    keep_rc=0
    step "$CONFORM" perf keep-control --target "$TARGET" --into "$STAGED/$CONTROL_NAME" || keep_rc=$?
    [ "$keep_rc" = 0 ] || die "tonight's build of $TARGET cannot be kept as the same-night control (above): fix its target.toml, or run the night with --no-control"
    step cp "$OUT/perf.json" "$STAGED/timed.json"
    if [ "$DRY_RUN" = 0 ]; then
        (git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown) >"$STAGED/commit"
    fi
fi

# 1c. The same-night control: tonight's build and the kept one, both as workers (for the
#     reference: each conform binary serving its own reference on one thread, so both sides
#     run alike and neither waits on a second thread's preempted time slice),
#     timed in rounds of fresh processes; a REGRESSION of the rounds (held to the night's cases,
#     and repeated in fresh rounds of its own) fails the night, and a case the control could not
#     time (or timed in too few rounds) leaves the night INCONCLUSIVE.
control_rc=0
CONTROL_EXIT="none"
CONTROL_UNDECIDED=""
CONTROL_JUDGED_NOTHING=0
if [ "${#AGAINST_ARGS[@]}" -gt 0 ]; then
    CANDIDATE="$TARGET"
    if [ "$TARGET" = reference ]; then
        CANDIDATE="$OUT/control/reference-tonight"
        step mkdir -p "$CANDIDATE"
        if [ "$DRY_RUN" = 0 ]; then
            CANDIDATE="$(cd "$CANDIDATE" && pwd)"
            CONFORM_ABS="$(command -v "$CONFORM" || echo "$CONFORM")"
            CONFORM_ABS="$(cd "$(dirname "$CONFORM_ABS")" && pwd)/$(basename "$CONFORM_ABS")"
            printf '%s\n' \
                'description = "tonight'"'"'s build'"'"'s reference, served by its conform binary (conform perf serve-reference)"' \
                "command = \"$CONFORM_ABS\"" 'args = ["perf", "serve-reference", "--threads", "1"]' 'device_group = "cpu"' \
                '' '[timeouts]' 'handshake_s = 30' 'request_s = 300' 'timed_request_s = 900' \
                >"$CANDIDATE/target.toml"
        fi
    fi
    # The record above timed tonight's build in full; the control run's own pass only checks
    # that it passes before the rounds (one warm-up and four samples, which are also what each
    # request of a round takes).
    CONTROL_RUN=("$CONFORM" run --perf --no-golden --target "$CANDIDATE" --hardware "$HARDWARE"
        "${SELECT_ARGS[@]}" "${AGAINST_ARGS[@]}" --warmup 1 --iterations 4 --json "$OUT/control.json")
    if [ "$DRY_RUN" = 1 ]; then
        show "${CONTROL_RUN[@]}"
    else
        run_rc=0
        CHILD_STDOUT="$OUT/control.log"
        run_child "${CONTROL_RUN[@]}" || run_rc=$?
        CHILD_STDOUT=""
        CONTROL_EXIT="$run_rc"
        cat "$OUT/control.log" 2>/dev/null || true
        LOG="$OUT/control.log"
        case "$run_rc" in
            0|3) ;;
            1) if grep -q "^A/B: at least one case is slower" "$LOG"; then
                   control_rc=1
               else
                   CONTROL_UNDECIDED="the same-night control run failed a case (above), so it did not time it"
               fi ;;
            *) CONTROL_UNDECIDED="the same-night control run exited $run_rc (above)" ;;
        esac
        not_timed="$(grep -c "^not timed A/B:" "$LOG" || true)"
        too_few="$(grep -c "INCONCLUSIVE: too few rounds" "$LOG" || true)"
        disagree="$(grep -c "INCONCLUSIVE: the rounds disagree" "$LOG" || true)"
        unconfirmed="$(grep -c "INCONCLUSIVE: not significant over the\|INCONCLUSIVE: not confirmed" "$LOG" || true)"
        if [ "$not_timed" -gt 0 ]; then
            CONTROL_UNDECIDED="the same-night control could not time $not_timed case(s) against $KEPT (the 'not timed A/B' lines above)"
        fi
        if [ "$too_few" -gt 0 ]; then
            CONTROL_UNDECIDED="${CONTROL_UNDECIDED:+$CONTROL_UNDECIDED; }the same-night control timed $too_few case(s) in too few rounds (INCONCLUSIVE above)"
        fi
        if grep -q "^A/B against .* (0 case(s);" "$LOG" || [ ! -s "$OUT/control.json" ]; then
            CONTROL_JUDGED_NOTHING=1
        fi
        if [ "$disagree" -gt 0 ]; then
            say "note: $disagree case(s) INCONCLUSIVE in the same-night control: their rounds disagree (above), so the control says neither slower nor unchanged; the history judges them"
        fi
        if [ "$unconfirmed" -gt 0 ]; then
            say "note: $unconfirmed case(s) INCONCLUSIVE in the same-night control: their rounds moved, but not significantly once the night's cases are counted, or fresh rounds did not repeat it (above); the history judges them"
        fi
    fi
fi

# 2. The gate: ratio of locations with its interval and a rank test; exit 1 on regression.
#    Against the hand-kept baseline when there is one, else against the history (before
#    tonight is added to it).
compare_rc=0
COMPARE_ARGS=()
HISTORY_UNDECIDED=""
if [ -n "$BASELINE" ]; then
    step "$CONFORM" perf compare --baseline "$BASELINE" --candidate "$OUT/perf.json" \
        --threshold "$THRESHOLD" --json "$OUT/compare.json" || compare_rc=$?
    case "$compare_rc" in
        0|1) COMPARE_ARGS=(--baseline "$OUT/compare.json") ;;
        3) COMPARE_ARGS=(--baseline "$OUT/compare.json")
           HISTORY_UNDECIDED="the comparison with $BASELINE could not judge a case (INCONCLUSIVE above)" ;;
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
        3) COMPARE_ARGS=(--baseline "$OUT/compare.json")
           HISTORY_UNDECIDED="the history gate could not judge a case (INCONCLUSIVE above)" ;;
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

if [ "${#AGAINST_ARGS[@]}" -gt 0 ] && { [ -f "$OUT/control.json" ] || [ "$DRY_RUN" = 1 ]; }; then
    step "$CONFORM" report --input "$OUT/control.json" --out "$OUT/control-report" \
        || say "warning: the control's report could not be written"
fi
# 4. The fingerprint (docs/fingerprint.md): which value of each knob of conform's model the
#    target's bits match tonight, on the quick cases of the selected suites, kept beside the
#    perf history and compared with the last night's. A change is the kernel's arithmetic
#    changing (a new CANN release rounding another way): it is reported as such, never as a
#    failure of the night; the cases' verdicts above judge the kernel.
FP_SUMMARY="skipped (--no-fingerprint)"
if [ "$FINGERPRINT" = 1 ]; then
    FP_ARGS=()
    for s in "${SUITES[@]+"${SUITES[@]}"}"; do FP_ARGS+=(--suite "$s"); done
    [ -z "$FILTER" ] || FP_ARGS+=(--filter "$FILTER")
    LAST_FP=""
    if [ "$DRY_RUN" = 0 ]; then
        LAST_FP="$(find "$HISTORY" -maxdepth 1 -name 'fingerprint-*.json' 2>/dev/null | LC_ALL=C sort | tail -n 1 || true)"
    fi
    [ -z "$LAST_FP" ] || FP_ARGS+=(--since "$LAST_FP")
    FP_RUN=("$CONFORM" fingerprint --target "$TARGET" "${FP_ARGS[@]+"${FP_ARGS[@]}"}"
        --json "$OUT/fingerprint.json" --ledger-diff "$OUT/fingerprint-ledger.md")
    if [ "$DRY_RUN" = 1 ]; then
        show "${FP_RUN[@]}"
        show cp "$OUT/fingerprint.json" "$HISTORY/fingerprint-$STAMP.json"
        FP_SUMMARY="not run (--dry-run)"
    else
        fp_rc=0
        CHILD_STDOUT="$OUT/fingerprint.log"
        run_child "${FP_RUN[@]}" || fp_rc=$?
        CHILD_STDOUT=""
        cat "$OUT/fingerprint.log" 2>/dev/null || true
        case "$fp_rc" in
            0|1) cp "$OUT/fingerprint.json" "$HISTORY/fingerprint-$STAMP.json" \
                     || say "warning: the fingerprint could not be kept in $HISTORY"
                 if grep -q "^fingerprint changed since" "$OUT/fingerprint.log"; then
                     FP_SUMMARY="CHANGED since $LAST_FP: the target's arithmetic moved on the knobs above (a new CANN release?); not a failure, but the model's rows for those knobs need a look"
                 elif [ -n "$LAST_FP" ]; then
                     FP_SUMMARY="unchanged since $LAST_FP"
                 else
                     FP_SUMMARY="first fingerprint kept ($HISTORY/fingerprint-$STAMP.json)"
                 fi
                 [ "$fp_rc" = 0 ] || FP_SUMMARY="$FP_SUMMARY; some knob differs from the recipe the cases claim (the table above; proposed ledger rows in $OUT/fingerprint-ledger.md)" ;;
            4) FP_SUMMARY="nothing fingerprinted (no selected case models a kernel with knobs, or the target supports none: reasons above)" ;;
            *) FP_SUMMARY="could not run (exit $fp_rc, above)" ;;
        esac
    fi
    say "fingerprint: $FP_SUMMARY"
fi

stop_if_signalled
say "record exit $record_rc, control exit $CONTROL_EXIT, compare exit $compare_rc; report in $OUT/report/index.html"
failed=0
if [ "$control_rc" = 1 ]; then
    KEPT_COMMIT="$(cat "$STATE/last-good/commit" 2>/dev/null || echo unknown)"
    TONIGHT_COMMIT="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
    say "REGRESSION against the last good build in $KEPT, timed in the same window: the change is between commit $KEPT_COMMIT and commit $TONIGHT_COMMIT (the A/B table above; $OUT/control.json, section ab; report $OUT/control-report/index.html)"
    failed=1
fi
if [ "$compare_rc" = 1 ]; then
    say "REGRESSION against $REFERENCE (see $OUT/compare.json)"
    failed=1
fi
if [ "$record_rc" = 1 ]; then
    say "failing cases: see $OUT/report/index.html"
    failed=1
fi
if [ "$failed" = 1 ]; then
    step rm -rf "$STAGED"
    exit 1
fi

# Tonight's staged build becomes the control of the next night: replaced whole, never half.
# The swap runs in the foreground: a signal is only noted during it (the trap runs between the
# two commands and passes nothing on), so it never leaves no control at all.
keep_staged() {
    if [ "$DRY_RUN" = 1 ]; then
        show rm -rf "$STATE/last-good"
        show mv "$STAGED" "$STATE/last-good"
    else
        rm -rf "$STATE/last-good"
        mv "$STAGED" "$STATE/last-good"
    fi
    say "tonight's build is kept as the next night's control ($STATE/last-good)"
}

if [ -n "$CONTROL_UNDECIDED" ] || [ -n "$HISTORY_UNDECIDED" ]; then
    for why in "$CONTROL_UNDECIDED" "$HISTORY_UNDECIDED"; do
        [ -z "$why" ] || say "INCONCLUSIVE: $why"
    done
    if [ "$CONTROL" = 1 ] && [ "$CONTROL_JUDGED_NOTHING" = 1 ] && [ -z "$HISTORY_UNDECIDED" ]; then
        # The kept build timed nothing at all (it no longer starts): tonight's, checked to
        # start when it was staged, replaces it, or no later night would have a control.
        say "the kept build judged no case; tonight's replaces it so that the next night has a control"
        keep_staged
    else
        step rm -rf "$STAGED"
    fi
    say "INCONCLUSIVE night (exit 3): nothing was found slower, but a check above could not run; this is not a pass"
    exit 3
fi

if [ "$CONTROL" = 1 ]; then
    keep_staged
fi
stop_if_signalled "SIG$SIGNALLED came once the night was complete (recorded, judged, kept): nothing was cut short"
exit 0
