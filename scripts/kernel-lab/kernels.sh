#!/bin/bash
# kernels.sh [--ci] [--no-host] [--out FILE] [--only FILTER] [--skip FILTER] [SERIES...]
#
# The kernel lab (docs/kernel-lab.md): the live ground-truth suite (analyze/tests/ground_truth_live.rs,
# every scenario recorded by ioblame-capture and by stock perf) inside Debian's own kernels,
# booted under QEMU, and on this host's kernel; the results, one per expectation, become the
# kernel-by-scenario table of docs/kernels.md.
#
#   SERIES     5.10, 6.1, 6.12, ..., newest, or an exact release (fetch-kernel.sh resolves
#              them against Debian's suites); default: 5.10 6.1 6.12 newest
#   --ci       CI: the table goes to a temporary file and is printed (docs/kernels.md is
#              never rewritten), and the host's own run is left out (`cargo test` ran it)
#   --no-host  leave out the run on this host's kernel
#   --out FILE write the table to FILE (default docs/kernels.md; with --ci or --only a
#              temporary file)
#   --only F   run only the tests whose name contains F (a partial table: not written to
#              docs/kernels.md unless --out names it)
#   --skip F   leave out the tests whose name contains F (CI: `--skip _perf`, the stock perf
#              recordings, which `just kernels` runs)
#
# Builds the binaries once (ioblame and ioblame-capture in the cargo profile $LAB_PROFILE,
# default `lab`: docs/kernel-lab.md; the test binary as `cargo test` builds it), and
# copies the three into a staging directory (others may rebuild target/
# while a guest runs, and the guest sees the host's files live), boots each kernel with
# run-in-kernel.sh and runs the suite there as root, then on the host. Prints each kernel's
# wall time. Exits 1 when an expectation failed that is not a declared gap
# (analyze/tests/support/checks.rs, known_gap) or a kernel did not finish its run.
# Env: KERNEL_LAB (default /tmp/kernel-lab), MEM (3G), CPUS (2), TIMEOUT (per kernel, 3600 s).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CI_MODE=0 HOST=1 OUT= ONLY= SKIP=
SERIES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) CI_MODE=1 HOST=0 ;;
    --no-host) HOST=0 ;;
    --out) OUT=${2:?--out FILE}; shift ;;
    --only) ONLY=${2:?--only FILTER}; shift ;;
    --skip) SKIP=${2:?--skip FILTER}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "kernels.sh: unknown option $1" >&2; exit 2 ;;
    *) SERIES+=("$1") ;;
  esac
  shift
done
[ ${#SERIES[@]} -gt 0 ] || SERIES=(5.10 6.1 6.12 newest)
export KERNEL_LAB=${KERNEL_LAB:-${TMPDIR:-/tmp}/kernel-lab}
PROFILE=${LAB_PROFILE:-lab}
if [ -z "$OUT" ]; then
  if [ "$CI_MODE" = 1 ] || [ -n "$ONLY" ]; then OUT=$(mktemp "${TMPDIR:-/tmp}/kernels.XXXXXX.md")
  else OUT=$ROOT/docs/kernels.md; fi
fi
[ "$(id -u)" = 0 ] || { echo "kernels.sh: needs root (the suite records kernel events on loop devices)" >&2; exit 2; }
mkdir -p "$KERNEL_LAB"

# --- one run directory: staged binaries, per-kernel results and logs. The guests write into
# it through run-in-kernel.sh's $SCRATCH (shared read-write; the rest of / is read-only).
RUN=$(mktemp -d "$KERNEL_LAB/run.XXXXXX")
echo "kernel lab: run directory $RUN" >&2
t0=$(date +%s)
# When and from which tree (for the table's header).
commit=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] ||
  commit="$commit (with uncommitted changes)"
printf '%s\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$commit" > "$RUN/started"

# --- build once, then stage copies
cd "$ROOT"
# The analyzer and the recorder do the suite's work: they are built with $PROFILE. The test
# binary only runs them and reads their JSON: it is `cargo test`'s own (a test build in
# another profile would build polars, a dev-dependency, once more).
echo "kernel lab: building (cargo --profile $PROFILE; the test binary as cargo test does)" >&2
cargo build -q --profile "$PROFILE" -p ioblame -p ioblame-capture
test_exe=$(cargo test -q -p ioblame --test ground_truth_live --no-run --message-format=json |
  python3 -c 'import json, sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "ground_truth_live" \
            and "test" in m["target"]["kind"] and m.get("executable"):
        print(m["executable"])')
[ -x "$test_exe" ] || { echo "kernels.sh: no ground_truth test binary built" >&2; exit 1; }
target=$(cargo metadata -q --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
mkdir -p "$RUN/bin"
cp "$test_exe" "$RUN/bin/ground_truth"
pdir=$PROFILE; [ "$PROFILE" = dev ] && pdir=debug
cp "$target/$pdir/ioblame" "$target/$pdir/ioblame-capture" "$RUN/bin/"
build_s=$(( $(date +%s) - t0 ))
echo "kernel lab: built and staged in ${build_s}s" >&2

# The suite's command line (run as root, in the analyzer's package directory as cargo would),
# with the binaries in $BIN.
suite() { # RESULTS LOG
  local args=(--test-threads=1)
  [ -n "$ONLY" ] && args+=("$ONLY")
  [ -n "$SKIP" ] && args+=(--skip "$SKIP")
  printf 'cd %q && CI=1 IOBLAME_BIN=%q IOBLAME_CAPTURE_BIN=%q IOBLAME_LAB_RESULTS=%q %q %s >%q 2>&1' \
    "$ROOT/analyze" "$BIN/ioblame" "$BIN/ioblame-capture" "$1" "$BIN/ground_truth" \
    "${args[*]}" "$2"
}

# One line per kernel in $RUN/kernels.tsv: release, where, status, seconds, results file (read
# by table.py).
: > "$RUN/kernels.tsv"
status=0
note() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$RUN/kernels.tsv"; }

summary() { # LOG
  grep -E '^test result:' "$1" | tail -n1 || echo "(no test result: see $1)"
}

# --- the guests
declare -A seen=()
for s in "${SERIES[@]}"; do
  tf=$(date +%s)
  if ! img=$("$HERE/fetch-kernel.sh" "$s"); then
    echo "kernel lab: $s: no kernel fetched" >&2
    note "$s" "Debian $s" "not fetched" 0 -; status=1; continue
  fi
  rel=${img#"$KERNEL_LAB/k/"}; kver=${rel%%/*}
  [ -z "${seen[$kver]:-}" ] || continue
  seen[$kver]=1
  fetch_s=$(( $(date +%s) - tf ))
  echo "kernel lab: $kver: fetched in ${fetch_s}s, booting" >&2
  log=$RUN/$kver.log
  # The binaries are copied into the guest's memory first: run from the 9p share, every
  # start of a debug analyzer (300 MB) costs seconds under TCG.
  cmds="set -e
modprobe loop; modprobe ext4; modprobe xfs; modprobe btrfs
mount -t tmpfs -o size=2G tmpfs /var/tmp
mkdir -p /run/lab && cp $RUN/bin/* /run/lab/
set +e
$(BIN=/run/lab suite "$RUN/$kver.jsonl" "$log")"
  tb=$(date +%s)
  set +e
  SCRATCH=$RUN MEM=${MEM:-3G} CPUS=${CPUS:-2} TIMEOUT=${TIMEOUT:-3600} \
    "$HERE/run-in-kernel.sh" "$img" "$cmds" > "$RUN/$kver.vm.log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - tb ))
  case $rc in
    0) st=passed ;;
    125) st="VM died"; status=1 ;;
    *) st="failed (exit $rc)"; status=1 ;;
  esac
  note "$kver" "Debian $s (QEMU TCG)" "$st" "$secs" "$kver.jsonl"
  echo "kernel lab: $kver: $st in ${secs}s wall: $(summary "$log")" >&2
  [ $rc = 125 ] && tail -n 20 "$RUN/$kver.vm.log" >&2
done

# --- this host's kernel
if [ "$HOST" = 1 ]; then
  kver=$(uname -r)
  log=$RUN/host-$kver.log
  tb=$(date +%s)
  set +e
  sh -c "$(BIN=$RUN/bin suite "$RUN/host-$kver.jsonl" "$log")"
  rc=$?
  set -e
  secs=$(( $(date +%s) - tb ))
  if [ $rc = 0 ]; then st=passed; else st="failed (exit $rc)"; status=1; fi
  note "$kver" "this host" "$st" "$secs" "host-$kver.jsonl"
  echo "kernel lab: $kver (host): $st in ${secs}s wall: $(summary "$log")" >&2
fi

# --- the table
LAB_ONLY=$ONLY LAB_SKIP=$SKIP python3 "$HERE/table.py" "$RUN" "$build_s" "$PROFILE" > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
if [ "$CI_MODE" = 1 ]; then cat "$OUT"; fi
# An expectation failed that is not a declared gap: the tests fail then too, but the results
# are the authority (a test binary that died early wrote fewer).
if ! python3 "$HERE/table.py" --check "$RUN"; then status=1; fi
rm -rf "$RUN/bin"   # the staged binaries (hundreds of MB in a debug build); logs stay
echo "kernel lab: table in $OUT; logs in $RUN; total $(( $(date +%s) - t0 ))s" >&2
exit $status
