#!/bin/bash
# blame-lab.sh [SERIES...]: runs scenarios/blame.sh (who made the IO slow, on null_blk devices
# of known timing, live) in a kernel-lab guest of each kernel series (default: 6.1 6.12
# newest), with the project's ioblame and ioblame-capture and the victim program
# (analyze/tests/data/blame/victim.c, built here) in a staging directory. Prints each guest's
# PASS/FAIL lines; exits non-zero if any kernel failed. This machine's kernel has no
# null_blk: `cargo test --test blame_live` covers it on loop devices. Env: IOBLAME_BIN
# (default target/debug), BLAME_OUT (keep traces there), BLAME_NSEC (1000000), BLAME_ONLY
# (scenarios), MEM (2G), CPUS (2).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
. "$ROOT/scripts/kernel-lab/lib.sh"
lab_stage blame
mkdir "$STAGE/progs"
gcc -O2 -o "$STAGE/progs/victimR" "$ROOT/analyze/tests/data/blame/victim.c"
[ $# -gt 0 ] || set -- 6.1 6.12 newest
lab_each "${MEM:-2G}" \
  "IOBLAME_BIN='$STAGE' BLAME_PROGS='$STAGE/progs' BLAME_OUT='${BLAME_OUT:-}' BLAME_NSEC='${BLAME_NSEC:-}' BLAME_ONLY='${BLAME_ONLY:-}' bash scripts/kernel-lab/scenarios/blame.sh" \
  "$@"
