#!/usr/bin/env bash
# Checks every fixture trace against its committed baseline (fixtures/NAME/baseline.toml) with
# `ioblame check --strict`, so an analyzer change that shifts attribution fails CI like an
# application regression would. The fixture traces are fixed inputs: their baselines are
# written with `ioblame baseline --exact` (no significance floor, zero tolerances, unattributed
# IO strict), so any change of the analyzer's answer on them fails, down to one IO or one
# byte moving between acts, or a writer's bytes going to UNKNOWN. User frames are named from
# the traces alone (`--no-local-symbols`), so the intents' names do not depend on this
# machine's files.
# `--bless` rewrites the baselines (review the diff before committing).
#
# Exit status: 0 all fixtures pass, 1 a regression, 2 a usage or input error (a missing
# baseline, an unreadable trace); the highest status of all fixtures wins.
# Environment: IOBLAME (the analyzer binary; default: built here with cargo), FIXTURES (the
# directory of fixtures; default: fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${IOBLAME:-}" ]; then
    bin=$IOBLAME
else
    cargo build -q -p ioblame
    bin=target/debug/ioblame
    [ -n "${CARGO_TARGET_DIR:-}" ] && bin="$CARGO_TARGET_DIR/debug/ioblame"
fi
fixtures=${FIXTURES:-fixtures}
status=0
# Keeps the highest exit status seen (2, an input error, outranks 1, a regression).
keep() {
    if [ "$1" -gt "$status" ]; then
        status=$1
    fi
}
for dir in "$fixtures"/*/; do
    dir=${dir%/}
    name=$(basename "$dir")
    [ -d "$dir/trace" ] || continue
    if [ "${1:-}" = "--bless" ]; then
        rc=0
        "$bin" --no-local-symbols baseline --exact "$dir/trace" -o "$dir/baseline.toml" || rc=$?
        keep "$rc"
        continue
    fi
    if [ ! -f "$dir/baseline.toml" ]; then
        echo "fixture $name: no baseline.toml (run scripts/check-fixtures.sh --bless)" >&2
        keep 2
        continue
    fi
    echo "== fixture $name"
    rc=0
    "$bin" --no-local-symbols check --strict "$dir/trace" --baseline "$dir/baseline.toml" || rc=$?
    keep "$rc"
done
exit $status
