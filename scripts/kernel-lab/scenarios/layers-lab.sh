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
. "$ROOT/scripts/kernel-lab/lib.sh"
lab_stage layers
[ $# -gt 0 ] || set -- 5.10 6.1
lab_each "${MEM:-3G}" \
  "IOBLAME_BIN='$STAGE' LAYERS_OUT='${LAYERS_OUT:-}' LAYERS_ONLY='${LAYERS_ONLY:-}' bash scripts/kernel-lab/scenarios/layers.sh" \
  "$@"
