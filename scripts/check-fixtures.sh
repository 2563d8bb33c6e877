#!/usr/bin/env bash
# Checks every fixture trace against its committed baseline (fixtures/NAME/baseline.toml) with
# `ioblame check`, so an analyzer change that shifts attribution fails CI like an application
# regression would. `--bless` rewrites the baselines (review the diff before committing).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p ioblame
bin=target/debug/ioblame
[ -n "${CARGO_TARGET_DIR:-}" ] && bin="$CARGO_TARGET_DIR/debug/ioblame"
status=0
for dir in fixtures/*/; do
    dir=${dir%/}
    name=$(basename "$dir")
    [ -d "$dir/trace" ] || continue
    if [ "${1:-}" = "--bless" ]; then
        "$bin" baseline "$dir/trace" -o "$dir/baseline.toml"
        continue
    fi
    if [ ! -f "$dir/baseline.toml" ]; then
        echo "fixture $name: no baseline.toml (run scripts/check-fixtures.sh --bless)" >&2
        status=2
        continue
    fi
    echo "== fixture $name"
    if ! "$bin" check "$dir/trace" --baseline "$dir/baseline.toml"; then
        status=1
    fi
done
exit $status
