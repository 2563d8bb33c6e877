#!/bin/bash
# Memory of `ioblame top` over a long steady write (not a test). Root, Linux, fio, mkfs.ext4.
# A fio job writes 4 KiB blocks at random into a 512 MiB file at a fixed rate (RATE, 20m/s)
# on a loop-device ext4 for SECONDS (600), with a sync every 10 s from another task, while
# `ioblame top --batch` (release) records and follows it; every 10 s the view's resident
# memory (VmRSS) is sampled. Prints the samples, then the first and last minute's means and
# the maximum: flat when the view keeps no state that grows with time.
# Usage: capture/bench/top-memory.sh [SECONDS=600]
# Environment: IOBLAME_TOP (default: the release analyzer), IOBLAME_CAPTURE (default: the
# release recorder), RATE.
set -euo pipefail
SECS=${1:-600}; RATE=${RATE:-20m}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TD=${CARGO_TARGET_DIR:-$ROOT/target}
CAP=${IOBLAME_CAPTURE:-$TD/release/ioblame-capture}
TOPBIN=${IOBLAME_TOP:-$TD/release/ioblame}
[ -x "$CAP" ] && [ -x "$TOPBIN" ] || (cd "$ROOT" && cargo build -q --release -p ioblame -p ioblame-capture)
W=$(mktemp -d /var/tmp/iob-topmem.XXXXXX); LOOP=""
cleanup() {
  kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
  umount "$W/mnt" 2>/dev/null || true; [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null; rm -rf "$W"
}
trap cleanup EXIT
truncate -s 2G "$W/ext4.img"; LOOP=$(losetup -f --show "$W/ext4.img"); LN=${LOOP#/dev/}
mkfs.ext4 -q -F "$LOOP"; mkdir "$W/mnt"; mount "$LOOP" "$W/mnt"
"$TOPBIN" top --batch --rows 3 --capture "$CAP" -- --devices "$LN" > "$W/top.out" 2> "$W/top.err" & VP=$!
sleep 3
fio --name=steady --rw=randwrite --bs=4k --size=512M --ioengine=psync --rate="$RATE" \
  --filename="$W/mnt/fio.dat" --time_based --runtime="$SECS" --output-format=terse > /dev/null & FP=$!
( while sleep 10; do sync; done ) & SP=$!
echo "seconds rss_kib"
samples=()
for i in $(seq 10 10 "$SECS"); do
  sleep 10
  rss=$(awk '/VmRSS/{print $2}' /proc/$VP/status)
  samples+=("$rss"); echo "$i $rss"
done
kill $SP; wait $FP || true
kill -INT $VP; wait $VP || true
n=${#samples[@]}
python3 - "${samples[@]}" <<'PY'
import sys
s = [int(x) for x in sys.argv[1:]]
k = min(6, len(s))
first, last = sum(s[:k]) / k, sum(s[-k:]) / k
print(f"first minute {first:.0f} KiB, last minute {last:.0f} KiB ({(last / first - 1) * 100:+.1f}%), max {max(s)} KiB, {len(s)} samples")
PY
tail -3 "$W/top.err"
