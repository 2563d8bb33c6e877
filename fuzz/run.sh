#!/usr/bin/env bash
# Runs fuzz targets in turn, each for SECS seconds: fuzz/run.sh SECS [TARGET...]. Without
# targets, every [[bin]] of fuzz/Cargo.toml (`cargo fuzz list`). Each target's corpus is
# fuzz/corpus/TARGET (not committed), started from the committed seeds fuzz/seeds/TARGET.
# Installs cargo-fuzz if missing; fuzzes on the stable toolchain (RUSTC_BOOTSTRAP=1), without
# a sanitizer (the code is safe Rust but for a few audited blocks) and with debug assertions
# (overflow checks). Exits non-zero if any target crashed; its input is in fuzz/artifacts/.
# Statistics of each run: fuzz/logs/TARGET.log (the last lines: executions, exec/s, coverage).
# FUZZ_SEED=N fixes libFuzzer's random seed (default 0: a new one each run): CI's smoke run
# sets it, so from the same seeds it replays the same mutations and a failure is
# reproducible; the long runs that look for new crashes leave it unset. FUZZ_RUNS=N stops
# each target after N executions (or SECS, whichever comes first): the 10 M-execution runs
# of docs/reliability.md.
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:?usage: fuzz/run.sh SECS [TARGET...]}
shift
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked || exit 1
export RUSTC_BOOTSTRAP=1
dir_args=()
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    dir_args=(--target-dir "$CARGO_TARGET_DIR/fuzz")
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build -s none -a "${dir_args[@]}" || exit 1
mkdir -p logs
failed=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    seeds=()
    [ -d "seeds/$t" ] && seeds=("seeds/$t")
    echo "fuzz: $t for ${secs}s" >&2
    if ! cargo fuzz run -s none -a "${dir_args[@]}" "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -max_len=16384 -rss_limit_mb=2048 -timeout=20 \
        -seed="${FUZZ_SEED:-0}" -runs="${FUZZ_RUNS:--1}" \
        -print_final_stats=1 >"logs/$t.log" 2>&1; then
        failed+=("$t")
        # The panic (message and place) and the input that caused it.
        grep -E -B2 -A6 "panicked at|ERROR: libFuzzer" "logs/$t.log" | cut -c1-400 >&2
        grep -E "Test unit written to" "logs/$t.log" >&2
    fi
    grep -E "^stat::number_of_executed_units|^stat::average_exec_per_sec|^stat::new_units_added|cov: " \
        "logs/$t.log" | tail -n 4 >&2
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
