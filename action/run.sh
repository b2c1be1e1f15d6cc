#!/usr/bin/env bash
# The GitHub action's run step (action.yml): runs the plan with the action's inputs, writes the
# JUnit file into the results directory, compares with a baseline run when given, appends
# `stampede summary`'s Markdown to $GITHUB_STEP_SUMMARY, sets the step's outputs, and exits with
# stampede's code (3: a --fail-on condition or a regression breached), after every file is written
# so the upload steps that follow (`if: always()`) still have them. A script, not inline YAML, so
# tests/tests/action.rs runs it as the runner would.
#
# Inputs, as the environment (action.yml maps them): STAMPEDE_COMMAND (run | find-max),
# STAMPEDE_PLAN (a plan file), STAMPEDE_TARGETS, STAMPEDE_ARGS (words, split on whitespace),
# STAMPEDE_FAIL_ON and STAMPEDE_REGRESSION (one expression a line), STAMPEDE_BASELINE (a results
# directory), STAMPEDE_RESULTS_DIR; STAMPEDE_BIN, the binary (default: stampede on PATH).
set -euo pipefail

stampede="${STAMPEDE_BIN:-stampede}"
command="${STAMPEDE_COMMAND:-run}"
results="${STAMPEDE_RESULTS_DIR:-stampede-results}"
summary="${GITHUB_STEP_SUMMARY:-/dev/stdout}"
case "$command" in
run | find-max) ;;
*)
    echo "stampede action: command '$command': use run or find-max" >&2
    exit 2
    ;;
esac

args=("$command")
[ -z "${STAMPEDE_PLAN:-}" ] || args+=("$STAMPEDE_PLAN")
read -r -a words <<<"${STAMPEDE_TARGETS:-}"
args+=("${words[@]}")
while IFS= read -r line; do
    [ -z "${line// /}" ] || args+=(--fail-on "$line")
done <<<"${STAMPEDE_FAIL_ON:-}"
read -r -a words <<<"${STAMPEDE_ARGS:-}"
args+=("${words[@]}")
args+=(--out "$results" --junit "$results/junit.xml")

code=0
"$stampede" "${args[@]}" || code=$?

compared=()
if [ -n "${STAMPEDE_BASELINE:-}" ] && [ -f "$results/run.json" ]; then
    gates=()
    while IFS= read -r line; do
        [ -z "${line// /}" ] || gates+=(--regression "$line")
    done <<<"${STAMPEDE_REGRESSION:-}"
    ccode=0
    "$stampede" compare "$STAMPEDE_BASELINE" "$results" --fail-on-regression "${gates[@]}" \
        -o "$results/baseline-compare.html" --json "$results/baseline-compare.json" \
        --junit "$results/junit-compare.xml" || ccode=$?
    [ "$code" -ne 0 ] || code=$ccode
    compared=("$STAMPEDE_BASELINE")
fi

{
    case "$code" in
    0) echo "## stampede $command: passed" ;;
    3) echo "## stampede $command: failed (exit 3: a --fail-on condition or a regression breached)" ;;
    *) echo "## stampede $command: exit $code (see docs/reference/exit-codes.md)" ;;
    esac
    echo
    "$stampede" summary "${compared[@]}" "$results" ||
        echo "(no results to summarize in $results)"
} >>"$summary"

if [ -n "${GITHUB_OUTPUT:-}" ]; then
    {
        echo "exit-code=$code"
        echo "results-dir=$results"
        echo "junit=$results/junit.xml"
    } >>"$GITHUB_OUTPUT"
fi
exit "$code"
