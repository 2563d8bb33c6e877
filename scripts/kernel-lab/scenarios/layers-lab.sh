#!/bin/bash
# layers-lab.sh [SERIES...]: runs scenarios/layers.sh (partitions and device-mapper, live)
# in a kernel-lab guest of each kernel series (default: 5.10 6.1), with the project's
# ioblame and ioblame-capture copied to a staging directory first (others may rebuild
# target/ meanwhile). Prints each guest's PASS/FAIL lines; exits non-zero if any kernel
# failed. Env: IOBLAME_BIN (default target/debug), LAYERS_OUT (keep traces there),
# LAYERS_ONLY (subset of scenarios), MEM (3G), CPUS (2).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
LAB=$ROOT/scripts/kernel-lab
BIN=${IOBLAME_BIN:-$ROOT/target/debug}
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/iob-layers-bin.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
cp "$BIN/ioblame" "$BIN/ioblame-capture" "$STAGE/"
status=0
[ $# -gt 0 ] || set -- 5.10 6.1
for series in "$@"; do
  img=$("$LAB/fetch-kernel.sh" "$series" | tail -n1)
  echo "== $series: $img"
  if ! MEM=${MEM:-3G} CPUS=${CPUS:-2} "$LAB/run-in-kernel.sh" "$img" \
    "cd '$ROOT' && IOBLAME_BIN='$STAGE' LAYERS_OUT='${LAYERS_OUT:-}' LAYERS_ONLY='${LAYERS_ONLY:-}' bash scripts/kernel-lab/scenarios/layers.sh"; then
    status=1
  fi
done
exit $status
