#!/bin/bash
# ustack-lab.sh [SERIES...]: runs scenarios/ustack.sh (user stacks, live) in a kernel-lab
# guest of each kernel series (default: 5.10 6.1 6.12), with the project's ioblame and
# ioblame-capture and the workloads (analyze/tests/data/ustack: C and Rust programs, a JIT's
# code; gcc and rustc here, with frame pointers; cfi.c without, for --user-stacks dwarf) in a
# staging directory. Prints each guest's
# PASS/FAIL lines; exits non-zero if any kernel failed. Env: IOBLAME_BIN (default
# target/debug), USTACK_OUT (keep traces there), USTACK_PERF (non-empty: a stock perf
# recording too, minutes more under TCG; TIMEOUT then 900 s), MEM (2G), CPUS (2).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
. "$ROOT/scripts/kernel-lab/lib.sh"
SRC=$ROOT/analyze/tests/data/ustack
lab_stage ustack
mkdir "$STAGE/progs"
gcc -O1 -g -fno-omit-frame-pointer -o "$STAGE/progs/iowork" "$SRC/iowork.c"
gcc -O1 -fno-omit-frame-pointer -o "$STAGE/progs/jit" "$SRC/jit.c"
rustc -C force-frame-pointers=yes -C opt-level=1 -g --edition 2021 -o "$STAGE/progs/iowork-rs" "$SRC/iowork.rs"
# Without frame pointers, for the stacks unwound by call frame information (--user-stacks dwarf).
gcc -O2 -fomit-frame-pointer -o "$STAGE/progs/cfi" "$SRC/cfi.c"
[ $# -gt 0 ] || set -- 5.10 6.1 6.12
[ -z "${USTACK_PERF:-}" ] || export TIMEOUT=${TIMEOUT:-900}
lab_each "${MEM:-2G}" \
  "IOBLAME_BIN='$STAGE' USTACK_PROGS='$STAGE/progs' USTACK_OUT='${USTACK_OUT:-}' USTACK_PERF='${USTACK_PERF:-}' bash scripts/kernel-lab/scenarios/ustack.sh" \
  "$@"
