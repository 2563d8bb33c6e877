# Sourced by the scenario drivers (scenarios/*-lab.sh): what they share. Expects ROOT (the
# project's root) set.
LAB=$ROOT/scripts/kernel-lab

# lab_stage NAME: copies the project's ioblame and ioblame-capture (IOBLAME_BIN, default
# target/debug) to a new staging directory, STAGE, removed at exit (others may rebuild
# target/ while the guests run).
lab_stage() {
  local bin=${IOBLAME_BIN:-$ROOT/target/debug}
  STAGE=$(mktemp -d "${TMPDIR:-/tmp}/iob-$1-bin.XXXXXX")
  trap 'rm -rf "$STAGE"' EXIT
  cp "$bin/ioblame" "$bin/ioblame-capture" "$STAGE/"
}

# lab_each MEM CMD SERIES...: runs CMD (from the project's root) as root in a kernel-lab guest
# of each kernel series with MEM of memory (CPUS, default 2, processors), printing a header
# per kernel; returns 1 if any guest's CMD failed.
lab_each() {
  local mem=$1 cmd=$2 status=0 series img
  shift 2
  for series in "$@"; do
    img=$("$LAB/fetch-kernel.sh" "$series" | tail -n1)
    echo "== $series: $img"
    if ! MEM=$mem CPUS=${CPUS:-2} "$LAB/run-in-kernel.sh" "$img" "cd '$ROOT' && $cmd"; then
      status=1
    fi
  done
  return $status
}
