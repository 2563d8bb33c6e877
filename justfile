# Everyday recipes. `just --list` shows them. (Install just with `cargo install just`.)

# Build everything in release mode.
build:
    cargo build --workspace --release

# Install the test dependencies (root) and run the whole test suite, as CI does.
test:
    scripts/install-test-deps.sh && cargo test --workspace

# Formatting and lints.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Format the code.
fmt:
    cargo fmt --all

# The analyzer benchmark: a 5M-event generated trace, every stage at 1 and 2 threads with peak
# memory, then perf script vs ioblame on a real workload (root). See docs/benchmarks.md.
bench EVENTS="5000000":
    cargo build --release -p ioblame-bench -p ioblame-capture
    rm -rf /var/tmp/ioblame-bench-trace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench gen -o /var/tmp/ioblame-bench-trace --events {{EVENTS}}
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench stats /var/tmp/ioblame-bench-trace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench run /var/tmp/ioblame-bench-trace
    rm -rf /var/tmp/ioblame-bench-trace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench vs-perf
    just bench-blktrace

# blkparse vs ioblame on a generated blktrace recording of RECORDS records (docs/benchmarks.md).
bench-blktrace RECORDS="10000000":
    cargo build --release -p ioblame-bench
    rm -rf /var/tmp/ioblame-bench-blktrace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench blktrace-gen -o /var/tmp/ioblame-bench-blktrace --records {{RECORDS}}
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench blktrace-vs /var/tmp/ioblame-bench-blktrace
    rm -rf /var/tmp/ioblame-bench-blktrace

# The recorder overhead benchmark (fio untraced / ioblame-capture / perf record; needs root).
bench-capture:
    cargo build --release -p ioblame-capture
    capture/bench/bench-capture.sh

# Fuzz the trace reader for SECS seconds (installs cargo-fuzz if needed; stable toolchain).
fuzz SECS="60":
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
    mkdir -p fuzz/corpus/reader
    for f in fixtures/*/trace/*.iob; do d=${f#fixtures/}; cp -n "$f" "fuzz/corpus/reader/${d%%/*}-$(basename "$f")"; done
    cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run reader corpus/reader -- -max_total_time={{SECS}} -rss_limit_mb=2048

# Fuzz the blktrace binary reader and the blkparse text parser for SECS seconds each, seeded
# with the blktrace fixtures.
fuzz-blktrace SECS="60":
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
    mkdir -p fuzz/corpus/blktrace_reader fuzz/corpus/blkparse_text
    for f in fixtures/blktrace-*/trace/*.blktrace.*; do d=${f#fixtures/}; [ -s "$f" ] && cp -n "$f" "fuzz/corpus/blktrace_reader/${d%%/*}-$(basename "$f")"; done
    for f in fixtures/blktrace-*/*.blkparse.txt; do d=${f#fixtures/}; cp -n "$f" "fuzz/corpus/blkparse_text/${d%%/*}.txt"; done
    cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run blktrace_reader corpus/blktrace_reader -- -max_total_time={{SECS}} -rss_limit_mb=2048
    cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run blkparse_text corpus/blkparse_text -- -max_total_time={{SECS}} -rss_limit_mb=2048

# Regenerate the fixture traces (root; real loop devices).
fixtures:
    cargo build --release -p ioblame-capture
    fixtures/make.sh

# Check the fixture traces against their committed baselines, as CI does.
check-fixtures:
    scripts/check-fixtures.sh

# Rewrite the fixtures' baselines after an intended attribution change (review the diff).
bless-fixtures:
    scripts/check-fixtures.sh --bless

# Rewrite the tests' golden files (tests/golden/, the current format sample) after an intended
# output change (review the diff).
bless-golden:
    BLESS=1 cargo test --workspace
