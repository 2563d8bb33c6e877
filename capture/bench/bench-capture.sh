#!/bin/bash
# Overhead benchmark of ioblame-capture (not a test). Root, Linux, fio, perf, mkfs.ext4.
# For three fio jobs on a loop-device ext4 it runs, interleaved, REPS rounds of:
#   untraced | under `ioblame-capture record` (release, default set, --devices loopN)
#            | the same with --no-cgroups (no PERF_SAMPLE_CGROUP: 8 bytes less per stack event)
#            | under `perf record -a -g --kernel-callchains` with the same tracepoints and filters
# and prints per job: throughput change vs untraced, recorder CPU per event (utime+stime of the
# recorder process from /proc/PID/stat: from its start, and during the fio run only), bytes
# per event on disk, and lost records.
# Usage: capture/bench/bench-capture.sh [SECONDS_PER_RUN=10] [REPS=2]
set -euo pipefail
SECS=${1:-10}; REPS=${2:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TD=${CARGO_TARGET_DIR:-$ROOT/target}
CAP=${IOBLAME_CAPTURE:-$TD/release/ioblame-capture}
[ -x "$CAP" ] || (cd "$ROOT" && cargo build -q --release -p ioblame-capture)
W=$(mktemp -d /var/tmp/iob-bench.XXXXXX); LOOP=""
cleanup() { umount "$W/mnt" 2>/dev/null || true; [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
truncate -s 2G "$W/ext4.img"; LOOP=$(losetup -f --show "$W/ext4.img"); LN=${LOOP#/dev/}
mkfs.ext4 -q -F "$LOOP"; mkdir "$W/mnt"; mount "$LOOP" "$W/mnt"
MM=$(cat /sys/class/block/$LN/dev); KDEV=$(( ${MM%:*} << 20 | ${MM#*:} ))
CLK=$(getconf CLK_TCK)

# perf arguments: the same tracepoints and filters as the capture's default set.
PERFARGS=()
TFS=/sys/kernel/tracing; [ -d $TFS/events ] || TFS=/sys/kernel/debug/tracing
EVS=$("$CAP" events | awk '/^default:/{f=1;next} /^[a-z]+:/{f=0} f && $2=="present" || f && $2=="present,"{print $1}')
for e in $EVS; do
  f=$TFS/events/${e%%:*}/${e#*:}/format; flt=""
  if grep -q 'field:dev_t dev;' $f; then flt="dev == $KDEV"
  elif grep -q 'field:dev_t s_dev;' $f; then flt="s_dev == $KDEV"
  elif grep -q 'field:char name\[32\]' $f; then flt="name == \"$MM\""; fi
  [ "$e" = block:block_dirty_buffer ] && flt="${flt:+($flt) && }sector < 4611686018427387904"
  [ "$e" = writeback:writeback_mark_inode_dirty ] && flt="${flt:+($flt) && }flags & 59"
  PERFARGS+=(-e "$e"); [ -n "$flt" ] && PERFARGS+=(--filter "$flt")
done

ENGINE=libaio; fio --enghelp 2>/dev/null | grep -q io_uring && ENGINE=io_uring
job() { # name -> fio args
  case $1 in
    randwrite4k) echo "--name=rw4k --rw=randwrite --bs=4k --size=512M --ioengine=psync" ;;
    dio4k-qd16) echo "--name=dio --rw=randrw --bs=4k --size=512M --direct=1 --ioengine=$ENGINE --iodepth=16" ;;
    seq1m-fsync) echo "--name=seq --rw=write --bs=1M --size=1G --ioengine=psync --fsync=32 --end_fsync=1" ;;
  esac
}
runfio() { # job -> bytes/s (read+write)
  rm -f "$W/mnt/fio"*; sync; echo 3 > /proc/sys/vm/drop_caches
  fio $(job "$1") --filename="$W/mnt/fio.dat" --time_based --runtime="$SECS" --output-format=json > "$W/fio.json"
  python3 -c "import json;j=json.load(open('$W/fio.json'))['jobs'][0];print(j['read']['bw_bytes']+j['write']['bw_bytes'])"
}
cpu_ticks() { awk '{print $14+$15}' /proc/$1/stat; }

declare -A BW CPU RUN EV BYTES LOST
for r in $(seq "$REPS"); do
  for j in randwrite4k dio4k-qd16 seq1m-fsync; do
    # untraced
    BW[$j,none]=$(( ${BW[$j,none]:-0} + $(runfio $j) ))
    # ioblame-capture, and without the cgroup id on the stack events (--no-cgroups)
    for t in cap cap-nocg; do
      X=(); [ "$t" = cap-nocg ] && X=(--no-cgroups)
      rm -rf "$W/trace"
      "$CAP" record -o "$W/trace" --devices "$LN" "${X[@]}" 2> "$W/cap.log" & CP=$!
      sleep 1
      T0=$(cpu_ticks $CP)
      BW[$j,$t]=$(( ${BW[$j,$t]:-0} + $(runfio $j) ))
      T=$(cpu_ticks $CP); kill -INT $CP; wait $CP || true
      CPU[$j,$t]=$(( ${CPU[$j,$t]:-0} + T ))
      RUN[$j,$t]=$(( ${RUN[$j,$t]:-0} + T - T0 ))
      EV[$j,$t]=$(( ${EV[$j,$t]:-0} + $(sed -n 's/.* \([0-9]*\) records (.*/\1/p' "$W/cap.log" | tail -1) ))
      LOST[$j,$t]=$(( ${LOST[$j,$t]:-0} + $(sed -n 's/.*, \([0-9]*\) lost.*/\1/p' "$W/cap.log" | tail -1) ))
      BYTES[$j,$t]=$(( ${BYTES[$j,$t]:-0} + $(du -sb "$W/trace" | cut -f1) ))
    done
    # perf record
    rm -f "$W/perf.data"
    perf record -q -m 16M -a -g --kernel-callchains "${PERFARGS[@]}" -o "$W/perf.data" 2> "$W/perf.log" & PP=$!
    sleep 1
    T0=$(cpu_ticks $PP)
    BW[$j,perf]=$(( ${BW[$j,perf]:-0} + $(runfio $j) ))
    T=$(cpu_ticks $PP); kill -INT $PP; wait $PP || true
    CPU[$j,perf]=$(( ${CPU[$j,perf]:-0} + T ))
    RUN[$j,perf]=$(( ${RUN[$j,perf]:-0} + T - T0 ))
    perf report -i "$W/perf.data" --stats 2>/dev/null > "$W/stats.txt" || true
    EV[$j,perf]=$(( ${EV[$j,perf]:-0} + $(awk '/SAMPLE events:/{s+=$3} /COMM events:|FORK events:|EXIT events:/{s+=$3} END{print s+0}' "$W/stats.txt") ))
    LOST[$j,perf]=$(( ${LOST[$j,perf]:-0} + $(awk '/LOST_SAMPLES events:|LOST events:/{s+=$3} END{print s+0}' "$W/stats.txt") ))
    BYTES[$j,perf]=$(( ${BYTES[$j,perf]:-0} + $(stat -c %s "$W/perf.data") ))
  done
done

printf '%-12s %-8s %12s %9s %12s %10s %10s %10s %8s\n' job tracer MB/s change events cpu_us/ev run_us/ev bytes/ev lost
for j in randwrite4k dio4k-qd16 seq1m-fsync; do
  base=${BW[$j,none]}
  printf '%-12s %-8s %12.1f %9s %12s %10s %10s %10s %8s\n' "$j" none "$(echo "$base/$REPS/1048576" | bc -l)" - - - - - -
  for t in cap cap-nocg perf; do
    ev=${EV[$j,$t]}; [ "$ev" -gt 0 ] || ev=1
    printf '%-12s %-8s %12.1f %8.1f%% %12d %10.2f %10.2f %10.1f %8d\n' "$j" "$t" \
      "$(echo "${BW[$j,$t]}/$REPS/1048576" | bc -l)" \
      "$(echo "(${BW[$j,$t]}-$base)*100/$base" | bc -l)" \
      "$((ev / REPS))" "$(echo "${CPU[$j,$t]}*1000000/$CLK/$ev" | bc -l)" \
      "$(echo "${RUN[$j,$t]}*1000000/$CLK/$ev" | bc -l)" \
      "$(echo "${BYTES[$j,$t]}/$ev" | bc -l)" "$((LOST[$j,$t] / REPS))"
  done
done
echo "(events: records written by the recorder incl. COMM/FORK/EXIT; cpu: recorder utime+stime from"
echo " its start, run: the same during the fio run only (start-up excluded), both per event;"
echo " $SECS s per run, $REPS rounds, ext4 on $LOOP)"
