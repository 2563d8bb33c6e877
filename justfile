# Everyday recipes. `just --list` shows them. (Install just with `cargo install just`.)

# Build everything in release mode.
build:
    cargo build --workspace --release

# Install the test dependencies (root) and run the whole test suite, as CI does.
test:
    scripts/install-test-deps.sh && cargo test --workspace

# The tests without the live ones (no root, no recording: `IOBLAME_SKIP_LIVE=1`), for a quick
# check while editing; `just test` runs them all.
test-quick:
    IOBLAME_SKIP_LIVE=1 cargo test --workspace

# Formatting and lints.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Format the code.
fmt:
    cargo fmt --all

# The analyzer benchmark: a 5M-event generated trace, every stage at 1 and 2 threads with peak
# memory, then perf script vs ioblame on a real workload (root), then btt vs ioblame latency.
# See docs/benchmarks.md.
bench EVENTS="5000000":
    cargo build --release -p ioblame-bench -p ioblame-capture
    rm -rf /var/tmp/ioblame-bench-trace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench gen -o /var/tmp/ioblame-bench-trace --events {{EVENTS}}
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench stats /var/tmp/ioblame-bench-trace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench run /var/tmp/ioblame-bench-trace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench blame-vs /var/tmp/ioblame-bench-trace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench timeline-vs /var/tmp/ioblame-bench-trace
    rm -rf /var/tmp/ioblame-bench-trace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench vs-perf
    {{just_executable()}} bench-blktrace

# blkparse vs `ioblame acts` and btt vs `ioblame latency` on a generated blktrace recording of
# RECORDS records (docs/benchmarks.md).
bench-blktrace RECORDS="10000000":
    cargo build --release -p ioblame-bench
    rm -rf /var/tmp/ioblame-bench-blktrace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench blktrace-gen -o /var/tmp/ioblame-bench-blktrace --records {{RECORDS}}
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench blktrace-vs /var/tmp/ioblame-bench-blktrace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench latency-vs /var/tmp/ioblame-bench-blktrace
    rm -rf /var/tmp/ioblame-bench-blktrace

# btt against ioblame latency alone on a generated blktrace recording (docs/benchmarks.md).
bench-latency RECORDS="10000000":
    cargo build --release -p ioblame-bench
    rm -rf /var/tmp/ioblame-bench-blktrace
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench blktrace-gen -o /var/tmp/ioblame-bench-blktrace --records {{RECORDS}}
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench latency-vs /var/tmp/ioblame-bench-blktrace
    rm -rf /var/tmp/ioblame-bench-blktrace

# ioblame export (1 and 2 jobs) and ioblame fleet over a dataset of TRACES traces made from
# the fixtures' exports (docs/benchmarks.md, "Fleet").
bench-fleet TRACES="1000":
    cargo build --release -p ioblame -p ioblame-bench
    rm -rf /var/tmp/ioblame-bench-fleet
    ${CARGO_TARGET_DIR:-target}/release/ioblame-bench fleet-vs /var/tmp/ioblame-bench-fleet --traces {{TRACES}}
    rm -rf /var/tmp/ioblame-bench-fleet

# The recorder overhead benchmark (fio untraced / ioblame-capture / perf record; needs root).
bench-capture:
    cargo build --release -p ioblame-capture
    capture/bench/bench-capture.sh

# File names at scale: the recorder's start and stop on a filesystem of FILES files, and the
# analysis of a recording of this host with and without its path table (needs root;
# docs/benchmarks.md). CAPTURE_BEFORE and ANALYZER_BEFORE in the environment: older binaries
# to compare with.
bench-paths REPS="5" FILES="2000000":
    cargo build --release -p ioblame -p ioblame-capture
    capture/bench/bench-paths.py {{REPS}} {{FILES}}

# Fuzz the trace reader for SECS seconds (installs cargo-fuzz if needed; stable toolchain).
fuzz SECS="60":
    fuzz/run.sh {{SECS}} reader

# Fuzz every target of fuzz/Cargo.toml in turn, SECS seconds each (docs/reliability.md).
fuzz-all SECS="60":
    fuzz/run.sh {{SECS}}

# The recorder for production hosts: a fully static, stripped x86_64 ioblame-capture
# (scripts/dist.sh), checked: no dynamic dependencies, and it records a real write exactly
# (root; a loop device).
dist:
    scripts/check-dist.sh

# Fuzz the blktrace binary reader and the blkparse text parser for SECS seconds each, from
# their committed seeds (fuzz/seeds/, cut from the blktrace fixtures by fuzz/make-seeds.py).
fuzz-blktrace SECS="60":
    fuzz/run.sh {{SECS}} blktrace_reader blkparse_text

# The live ground-truth suite in Debian's kernels under QEMU and on this host, the table into
# docs/kernels.md (root; default 5.10 6.1 6.12 newest; docs/kernel-lab.md).
kernels *VERSIONS:
    scripts/kernel-lab/kernels.sh {{VERSIONS}}
    cargo build -p ioblame -p ioblame-capture
    scripts/kernel-lab/scenarios/blame-lab.sh {{VERSIONS}}

# The lab's stacked-device and user-stack scenarios (root; each script's kernels by default; the user
# stacks with stock perf too; docs/kernel-lab.md).
lab-scenarios *VERSIONS:
    cargo build -p ioblame -p ioblame-capture
    scripts/kernel-lab/scenarios/layers-lab.sh {{VERSIONS}}
    USTACK_PERF=1 scripts/kernel-lab/scenarios/ustack-lab.sh {{VERSIONS}}

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

# Man pages of both binaries and each subcommand into target/man (debug build).
man:
    cargo build -p ioblame -p ioblame-capture
    rm -rf ${CARGO_TARGET_DIR:-target}/man
    ${CARGO_TARGET_DIR:-target}/debug/ioblame man --out ${CARGO_TARGET_DIR:-target}/man
    ${CARGO_TARGET_DIR:-target}/debug/ioblame-capture man --out ${CARGO_TARGET_DIR:-target}/man

# Screenshots of the bundled fixture's report at 1280 and 390 px into docs/images (chromium).
screenshots:
    cargo build -p ioblame
    scripts/report-screenshots.sh ${CARGO_TARGET_DIR:-target}/debug/ioblame docs/images

# Install the binaries, man pages and completions under DESTDIR/PREFIX (scripts/install.sh).
install PREFIX="/usr/local" DESTDIR="":
    cargo build --release -p ioblame -p ioblame-capture
    scripts/install.sh "${CARGO_TARGET_DIR:-target}/release" "{{PREFIX}}" "{{DESTDIR}}"

# Remove what `just install` installed under DESTDIR/PREFIX.
uninstall PREFIX="/usr/local" DESTDIR="":
    scripts/install.sh --uninstall "{{PREFIX}}" "{{DESTDIR}}"
