#!/bin/bash
# blktrace-layers.sh OUTDIR: records the blktrace fixtures of partitions and device-mapper
# with the real `blktrace` (issue 27, item 5). Run as root inside a kernel-lab guest (debugfs
# open: no lockdown), from the project's root; each recording goes to
# OUTDIR/blktrace-<series>-<name>/ as fixtures/blktrace-* are laid out: trace/ (the per-CPU
# files blktrace wrote), DEV.blkparse.txt (`blkparse -i DEV` of them) and kernel.txt
# (`uname -r`). Host side: `run-in-kernel.sh IMAGE 'cd ROOT && bash
# scripts/kernel-lab/scenarios/blktrace-layers.sh OUT'`.
#   part: a `losetup -P` loop device with p1 at sector 2048; blktrace of the whole disk
#   dm:   dm-linear over a whole loop device at 8192 sectors into it; blktrace of both
# Workload on each (the block device itself, so every byte is known; renamed dd and sync):
#   bwA 1 MiB buffered at 0, bwB 512 KiB buffered at 4 MiB, then bsync;
#   dwriter 256 KiB O_DIRECT at 8 MiB, dreader 256 KiB O_DIRECT from 8 MiB.
set -euo pipefail
OUT=$(readlink -f "${1:?usage: blktrace-layers.sh OUTDIR}")
for m in loop dm-mod dm-linear; do modprobe "$m" 2>/dev/null || true; done
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
W=$(mktemp -d /var/tmp/iob-btl.XXXXXX)
mount -t tmpfs -o size=512m tmpfs "$W"
export DM_DISABLE_UDEV=1
LOOPS=(); DM=""
cleanup() {
  [ -n "$DM" ] && dmsetup remove "$DM" 2>/dev/null
  for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null; done
  umount "$W"; rm -rf "$W"
}
trap cleanup EXIT
for n in bwA bwB dwriter dreader; do cp /bin/dd "$W/$n"; done
cp /bin/sync "$W/bsync"
KVER=$(uname -r)
SERIES=$(echo "$KVER" | cut -d. -f1-2)

# workload DEV: the writes and reads on block device DEV.
workload() {
  "$W/bwA" if=/dev/zero of="$1" bs=64k count=16 conv=notrunc 2>/dev/null
  "$W/bwB" if=/dev/zero of="$1" bs=64k seek=64 count=8 conv=notrunc 2>/dev/null
  "$W/bsync"
  "$W/dwriter" if=/dev/zero of="$1" bs=64k seek=128 count=4 oflag=direct conv=notrunc 2>/dev/null
  "$W/dreader" if="$1" of=/dev/null bs=64k skip=128 count=4 iflag=direct 2>/dev/null
}
# traced NAME TARGET DEVS...: the workload on TARGET under `blktrace -d` of each of DEVS.
traced() {
  local name=$1 target=$2; shift 2
  local dir=$OUT/blktrace-$SERIES-$name
  rm -rf "$dir"; mkdir -p "$dir/trace"
  local args=()
  for d in "$@"; do args+=(-d "/dev/$d"); done
  # blktrace mmaps its output files: onto the tmpfs (not a 9p share), copied after.
  mkdir -p "$W/bt-$name"
  blktrace "${args[@]}" -D "$W/bt-$name" >"$W/bt.log" 2>&1 &
  local bt=$!
  sleep 2
  workload "$target"
  sleep 1
  kill -INT $bt; wait $bt || true
  cp "$W/bt-$name"/* "$dir/trace/"
  for d in "$@"; do
    (cd "$dir/trace" && blkparse -i "$d" -o "../$d.blkparse.txt" >/dev/null)
  done
  echo "$KVER" > "$dir/kernel.txt"
  echo "blktrace-layers: $name on $KVER: $(du -sh "$dir" | cut -f1), $(cat "$W/bt.log" | tr '\n' ' ')"
}

truncate -s 64M "$W/disk.img"
python3 - "$W/disk.img" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(446)
    f.write(bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + struct.pack("<II", 2048, 61440))
    f.seek(510); f.write(b"\x55\xaa")
PY
LP=$(losetup -f --show -P "$W/disk.img"); LOOPS+=("$LP")
for _ in 1 2 3 4 5; do [ -b "${LP}p1" ] && break; sleep 1; done
traced part "${LP}p1" "$(basename "$LP")"

truncate -s 64M "$W/lower.img"
LL=$(losetup -f --show "$W/lower.img"); LOOPS+=("$LL")
DM=iob-btl; dmsetup create $DM --table "0 122880 linear $LL 8192"
DMD=$(basename "$(ls -d /sys/block/dm-*/dm | while read -r d; do [ "$(cat "$d/name")" = $DM ] && dirname "$d"; done)")
traced dm /dev/mapper/$DM "$DMD" "$(basename "$LL")"
