#!/bin/bash
# Overhead benchmark of ioblame-capture (not a test). Root, Linux, fio, perf, mkfs.ext4.
# For four fio jobs on a loop-device ext4 it runs, interleaved, REPS rounds of:
#   untraced
#   | under `ioblame-capture record` (release, default set, --devices loopN) once per mode of
#     MODES (default "exact sampled:64 none all": --stacks exact (the default), sampled:64,
#     none (no callchain at all: the floor), all (a callchain on every stack event),
#     `user`: --stacks exact with --user-stacks (user frames by frame pointers, mappings,
#     symbol tables), and `dwarf` or `dwarf:SIZE`: --stacks exact with --user-stacks
#     dwarf[:SIZE] (a SIZE-byte stack copy and the user registers on each stack event, the
#     unwind tables))
#   | under stock `perf record` with the line `ioblame perf-command --devices loopN` prints
#     (the default --stacks exact)
#   | with mode `top` in MODES: under `ioblame top --batch` (release analyzer), which starts
#     the same recorder (--stacks exact, --flush-interval 250ms) and follows it: the recorder's
#     CPU is counted as for the other modes, the view's own (the `ioblame` process) apart
# and prints per job: throughput change vs untraced, recorder CPU per event (utime+stime of the
# recorder process from /proc/PID/stat: from its start, and during the fio run only), bytes
# per event on disk, lost records, and the workload's own CPU (fio's usr+sys, % of one CPU)
# and p99 completion latency. The fourth job writes at a fixed rate well below the device's
# limit: there the cost is the workload's extra CPU and its latency, not its throughput.
# Usage: capture/bench/bench-capture.sh [SECONDS_PER_RUN=10] [REPS=2]
# Environment: MODES, IOBLAME_CAPTURE (default: the release build), IOBLAME (the analyzer
# that prints the perf line; default: the debug build), IOBLAME_TOP (the analyzer of mode
# `top`; default: the release build), RATE (the fourth job's rate, 20m).
set -euo pipefail
SECS=${1:-10}; REPS=${2:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TD=${CARGO_TARGET_DIR:-$ROOT/target}
CAP=${IOBLAME_CAPTURE:-$TD/release/ioblame-capture}
[ -x "$CAP" ] || (cd "$ROOT" && cargo build -q --release -p ioblame-capture)
IOB=${IOBLAME:-$TD/debug/ioblame}
[ -x "$IOB" ] || (cd "$ROOT" && cargo build -q -p ioblame)
MODES=${MODES:-exact sampled:64 none all}; RATE=${RATE:-20m}
case " $MODES " in *" top "*)
  TOPBIN=${IOBLAME_TOP:-$TD/release/ioblame}
  [ -x "$TOPBIN" ] || (cd "$ROOT" && cargo build -q --release -p ioblame) ;;
esac
W=$(mktemp -d /var/tmp/iob-bench.XXXXXX); LOOP=""
cleanup() { umount "$W/mnt" 2>/dev/null || true; [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
truncate -s 2G "$W/ext4.img"; LOOP=$(losetup -f --show "$W/ext4.img"); LN=${LOOP#/dev/}
mkfs.ext4 -q -F "$LOOP"; mkdir "$W/mnt"; mount "$LOOP" "$W/mnt"
MM=$(cat /sys/class/block/$LN/dev); KDEV=$(( ${MM%:*} << 20 | ${MM#*:} ))
CLK=$(getconf CLK_TCK)

# perf arguments: the line `ioblame perf-command` prints for the loop device, without its
# `perf record` head and `-o perf.data -- COMMAND` tail (its words are shell-quoted).
LINE=$("$IOB" perf-command --devices "$LN" 2>/dev/null)
eval "PERFARGS=(${LINE#perf record })"
PERFARGS=("${PERFARGS[@]:0:${#PERFARGS[@]}-4}")

ENGINE=libaio; fio --enghelp 2>/dev/null | grep -q io_uring && ENGINE=io_uring
job() { # name -> fio args
  case $1 in
    randwrite4k) echo "--name=rw4k --rw=randwrite --bs=4k --size=512M --ioengine=psync" ;;
    dio4k-qd16) echo "--name=dio --rw=randrw --bs=4k --size=512M --direct=1 --ioengine=$ENGINE --iodepth=16" ;;
    seq1m-fsync) echo "--name=seq --rw=write --bs=1M --size=1G --ioengine=psync --fsync=32 --end_fsync=1" ;;
    rate4k) echo "--name=rate --rw=randwrite --bs=4k --size=512M --ioengine=psync --rate=$RATE" ;;
  esac
}
JOBS="randwrite4k dio4k-qd16 seq1m-fsync rate4k"
runfio() { # job -> "bytes/s cpu% p99_us" (read+write; fio's usr+sys; write p99, else read)
  rm -f "$W/mnt/fio"*; sync; echo 3 > /proc/sys/vm/drop_caches
  fio $(job "$1") --filename="$W/mnt/fio.dat" --time_based --runtime="$SECS" --output-format=json > "$W/fio.json"
  python3 -c "
import json
j=json.load(open('$W/fio.json'))['jobs'][0]
d=j['write'] if j['write']['io_bytes'] else j['read']
p=d['clat_ns'].get('percentile',{}).get('99.000000',0)
print(j['read']['bw_bytes']+j['write']['bw_bytes'], int((j['usr_cpu']+j['sys_cpu'])*100), int(p/1000))"
}
# Adds one fio result (from runfio) to the sums of tracer $2 on job $1.
addfio() { local r=($3); BW[$1,$2]=$(( ${BW[$1,$2]:-0} + r[0] )); FCPU[$1,$2]=$(( ${FCPU[$1,$2]:-0} + r[1] )); P99[$1,$2]=$(( ${P99[$1,$2]:-0} + r[2] )); }
cpu_ticks() { awk '{print $14+$15}' /proc/$1/stat; }

declare -A BW CPU RUN EV BYTES LOST FCPU P99 TOP VIEW
for r in $(seq "$REPS"); do
  for j in $JOBS; do
    # untraced
    addfio $j none "$(runfio $j)"
    # ioblame-capture, once per mode
    for m in $MODES; do
      t=cap-$m
      rm -rf "$W/trace"
      if [ "$m" = top ]; then
        # The view starts the recorder (its stderr: capture.log in the kept trace).
        "$TOPBIN" top --batch --keep "$W/trace" --capture "$CAP" -- --devices "$LN" \
          > /dev/null 2> "$W/top.log" & VP=$!
        CP=""
        while [ -z "$CP" ]; do sleep 0.1; CP=$(pgrep -P $VP -x ioblame-capture || true); done
        sleep 1
        V0=$(cpu_ticks $VP)
      else
        case $m in
          user) set -- --stacks exact --user-stacks ;;
          dwarf*) set -- --stacks exact --user-stacks "$m" ;;
          *) set -- --stacks "$m" ;;
        esac
        "$CAP" record -o "$W/trace" --devices "$LN" "$@" 2> "$W/cap.log" & CP=$!
        sleep 1
      fi
      T0=$(cpu_ticks $CP)
      addfio $j $t "$(runfio $j)"
      T=$(cpu_ticks $CP)
      if [ "$m" = top ]; then
        V=$(cpu_ticks $VP)
        VIEW[$j]=$(( ${VIEW[$j]:-0} + V - V0 ))
        kill -INT $VP; wait $VP || true
        cp "$W/trace/capture.log" "$W/cap.log"
      else
        kill -INT $CP; wait $CP || true
      fi
      CPU[$j,$t]=$(( ${CPU[$j,$t]:-0} + T ))
      RUN[$j,$t]=$(( ${RUN[$j,$t]:-0} + T - T0 ))
      EV[$j,$t]=$(( ${EV[$j,$t]:-0} + $(sed -n 's/.* \([0-9]*\) records (.*/\1/p' "$W/cap.log" | tail -1) ))
      LOST[$j,$t]=$(( ${LOST[$j,$t]:-0} + $(sed -n 's/.*, \([0-9]*\) lost.*/\1/p' "$W/cap.log" | tail -1) ))
      BYTES[$j,$t]=$(( ${BYTES[$j,$t]:-0} + $(du -sb "$W/trace" | cut -f1) ))
      TOP[$j,$t]=$(sed -n 's/.*top events: //p' "$W/cap.log" | tail -1)
    done
    # perf record, with the perf-command line
    rm -f "$W/perf.data"
    perf record -q "${PERFARGS[@]}" -o "$W/perf.data" 2> "$W/perf.log" & PP=$!
    sleep 1
    T0=$(cpu_ticks $PP)
    addfio $j perf "$(runfio $j)"
    T=$(cpu_ticks $PP); kill -INT $PP; wait $PP || true
    CPU[$j,perf]=$(( ${CPU[$j,perf]:-0} + T ))
    RUN[$j,perf]=$(( ${RUN[$j,perf]:-0} + T - T0 ))
    perf report -i "$W/perf.data" --stats 2>/dev/null > "$W/stats.txt" || true
    EV[$j,perf]=$(( ${EV[$j,perf]:-0} + $(awk '/SAMPLE events:/{s+=$3} /COMM events:|FORK events:|EXIT events:/{s+=$3} END{print s+0}' "$W/stats.txt") ))
    LOST[$j,perf]=$(( ${LOST[$j,perf]:-0} + $(awk '/LOST_SAMPLES events:|LOST events:/{s+=$3} END{print s+0}' "$W/stats.txt") ))
    BYTES[$j,perf]=$(( ${BYTES[$j,perf]:-0} + $(stat -c %s "$W/perf.data") ))
  done
done

printf '%-12s %-11s %10s %9s %10s %10s %10s %9s %6s %8s %8s\n' job tracer MB/s change events cpu_us/ev run_us/ev bytes/ev lost fio_cpu% p99_us
for j in $JOBS; do
  base=${BW[$j,none]}
  printf '%-12s %-11s %10.1f %9s %10s %10s %10s %9s %6s %8.1f %8d\n' "$j" none \
    "$(echo "$base/$REPS/1048576" | bc -l)" - - - - - - \
    "$(echo "${FCPU[$j,none]}/$REPS/100" | bc -l)" "$((P99[$j,none] / REPS))"
  for t in $(printf 'cap-%s ' $MODES) perf; do
    ev=${EV[$j,$t]}; [ "$ev" -gt 0 ] || ev=1
    printf '%-12s %-11s %10.1f %8.1f%% %10d %10.2f %10.2f %9.1f %6d %8.1f %8d\n' "$j" "$t" \
      "$(echo "${BW[$j,$t]}/$REPS/1048576" | bc -l)" \
      "$(echo "(${BW[$j,$t]}-$base)*100/$base" | bc -l)" \
      "$((ev / REPS))" "$(echo "${CPU[$j,$t]}*1000000/$CLK/$ev" | bc -l)" \
      "$(echo "${RUN[$j,$t]}*1000000/$CLK/$ev" | bc -l)" \
      "$(echo "${BYTES[$j,$t]}/$ev" | bc -l)" "$((LOST[$j,$t] / REPS))" \
      "$(echo "${FCPU[$j,$t]}/$REPS/100" | bc -l)" "$((P99[$j,$t] / REPS))"
  done
done
case " $MODES " in *" top "*)
  echo "ioblame top's own CPU (the view, its recorder apart), during the fio runs:"
  for j in $JOBS; do
    ev=${EV[$j,cap-top]}; [ "$ev" -gt 0 ] || ev=1
    printf '  %-12s view %8.2f us/event, %6.1f%% of one CPU; its recorder %8.2f us/event\n' "$j" \
      "$(echo "${VIEW[$j]}*1000000/$CLK/$ev" | bc -l)" \
      "$(echo "${VIEW[$j]}*100/$CLK/($SECS*$REPS)" | bc -l)" \
      "$(echo "${RUN[$j,cap-top]}*1000000/$CLK/$ev" | bc -l)"
  done ;;
esac
echo "events of the last round, default mode (--stacks exact):"
for j in $JOBS; do echo "  $j: ${TOP[$j,cap-exact]:-}"; done
echo "(events: records written by the recorder incl. COMM/FORK/EXIT; cpu: recorder utime+stime from"
echo " its start, run: the same during the fio run only (start-up excluded), both per event;"
echo " fio_cpu: the workload's usr+sys in % of one CPU; p99: write completion latency (reads"
echo " for a read-only job); $SECS s per run, $REPS rounds, ext4 on $LOOP, rate4k at $RATE/s)"
