#!/bin/bash
# layers.sh: partitions and device-mapper, live (issue 27, item 4). Run as root inside a
# kernel-lab guest (or any root machine with loop devices, partitions, device-mapper, ext4,
# xfs and tracefs), from the project's root; the host side is layers-lab.sh.
#
# Real writers on three layouts, each recorded by ioblame-capture, then `ioblame acts --json
# --devs LEVEL` must charge exactly each writer's bytes to it, on its file, on each level:
#   part: ext4 on loop-P p1 (a `losetup -P` partition at sector 2048), recorded with
#         --devices <p1> (the partition alone: the block layer's events carry the disk);
#         level: the disk.
#   dm:   xfs on dm-linear over a whole loop device (at 8192 sectors into it), recorded
#         with nothing filtered; levels: the dm volume and the loop device, each once.
#   dmp:  ext4 on dm-linear over p2 of the same partitioned loop device (LVM-like); levels:
#         the dm volume and the disk.
#   dmf:  the dm layout again, recorded with --devices <dm> (the upper level alone).
#   crypt: ext4 on dm-crypt (LUKS2) over a whole loop device: the crypt worker resubmits the
#         writes with no remap event, linked by the DM_TARGETS table; levels: the dm volume
#         and the loop device, each once.
#   loop, loopd: ext4 (4 KiB blocks) on a loop device over a file of p1's ext4, buffered and
#         --direct-io=on: the loop device's IO is the writers', and p1's disk's writes of the
#         file are the writers' too, as lower copies (docs/attribution.md, "Loop devices").
# Writers (renamed dd): two buffered writers and sync, an O_DIRECT writer and an O_DIRECT
# reader per filesystem. Every check prints `PASS name` or `FAIL name: got/want`; the exit
# status is the number of failures (0: all passed).
# Env: IOBLAME_BIN (dir with ioblame and ioblame-capture; default target/debug),
#      LAYERS_OUT (dir to keep the traces and the results in, optional),
#      LAYERS_ONLY (space-separated subset of: part dm dmp dmf crypt loop loopd).
set -u
BIN=${IOBLAME_BIN:-$PWD/target/debug}
ONLY=${LAYERS_ONLY:-part dm dmp dmf crypt loop loopd}
# dm-crypt and the ciphers of LUKS2's default (aes-xts-plain64, sha256): the guests load no
# module on demand.
for m in loop ext4 xfs dm-mod dm-linear dm-crypt xts aes aesni_intel aes_generic \
  sha256_generic algif_skcipher; do modprobe "$m" 2>/dev/null; done
W=$(mktemp -d /var/tmp/iob-layers.XXXXXX)
MNTS=(); DMS=(); LOOPS=()
# Loop images on a tmpfs (an overlay or 9p root cannot back them in a guest).
if ! mountpoint -q /var/tmp; then mount -t tmpfs -o size=2g tmpfs "$W"; TMPMNT=$W; fi
cleanup() {
  # Newest first: a loop device's file lives on a filesystem mounted before it.
  local i
  for ((i = ${#MNTS[@]} - 1; i >= 0; i--)); do umount "${MNTS[i]}" 2>/dev/null; done
  for ((i = ${#DMS[@]} - 1; i >= 0; i--)); do DM_DISABLE_UDEV=1 dmsetup remove "${DMS[i]}" 2>/dev/null; done
  for ((i = ${#LOOPS[@]} - 1; i >= 0; i--)); do losetup -d "${LOOPS[i]}" 2>/dev/null; done
  # The filesystems holding loop devices' files unmount once those are detached.
  for ((i = ${#MNTS[@]} - 1; i >= 0; i--)); do umount "${MNTS[i]}" 2>/dev/null; done
  for ((i = ${#LOOPS[@]} - 1; i >= 0; i--)); do losetup -d "${LOOPS[i]}" 2>/dev/null; done
  [ -n "${TMPMNT:-}" ] && umount "$TMPMNT"
  rm -rf "$W"
}
trap cleanup EXIT
export DM_DISABLE_UDEV=1
for n in pwA pwB pwD prD xwA xwB xwD xrD cwA cwB kwA kwB lwA lwB; do cp /bin/dd "$W/$n"; done
for n in psync xsync csync ksync lsync; do cp /bin/sync "$W/$n"; done
KVER=$(uname -r)
echo "layers: kernel $KVER"

# Partitioned image: p1 at 2048 (96 MiB), p2 after it (64 MiB).
truncate -s 168M "$W/disk.img"
python3 - "$W/disk.img" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(446)
    f.write(bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + struct.pack("<II", 2048, 196608))
    f.write(bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + struct.pack("<II", 198656, 131072))
    f.seek(510); f.write(b"\x55\xaa")
PY
LP=$(losetup -f --show -P "$W/disk.img"); LOOPS+=("$LP")
P=$(basename "$LP")
for _ in 1 2 3 4 5; do [ -b "${LP}p2" ] && break; sleep 1; done
P1=$(basename "$(ls -d /sys/block/$P/${P}p1)"); P2=${P}p2
truncate -s 340M "$W/lower.img"
LL=$(losetup -f --show "$W/lower.img"); LOOPS+=("$LL"); L=$(basename "$LL")
dmsetup create iobx --table "0 655360 linear $LL 8192"; DMS+=(iobx)
dmsetup create iobp --table "0 129024 linear ${LP}p2 2048"; DMS+=(iobp)
dmname() { for d in /sys/block/dm-*; do [ "$(cat "$d/dm/name")" = "$1" ] && basename "$d"; done; }
DX=$(dmname iobx); DP=$(dmname iobp)
echo "layers: partitioned $P ($P1 at $(cat /sys/block/$P/$P1/start), $P2), $L, $DX (iobx over $L at 8192), $DP (iobp over $P2 at 2048)"

mkfs.ext4 -q -F "${LP}p1"; mkdir -p "$W/p1"; mount "${LP}p1" "$W/p1"; MNTS+=("$W/p1")
mkfs.xfs -q -f /dev/mapper/iobx; mkdir -p "$W/x"; mount /dev/mapper/iobx "$W/x"; MNTS+=("$W/x")
mkfs.ext4 -q -F /dev/mapper/iobp; mkdir -p "$W/c"; mount /dev/mapper/iobp "$W/c"; MNTS+=("$W/c")
# The files the readers read, on disk before the recordings.
dd if=/dev/urandom of="$W/p1/r.dat" bs=1M count=1 2>/dev/null
dd if=/dev/urandom of="$W/x/r.dat" bs=1M count=1 2>/dev/null
sync

. "$(dirname "$0")/checks.sh"
# bytes TRACE DEVS COMM FILE KIND VIAS: bytes of KIND (write|read) charged to COMM on FILE's
# inode, over VIAS (comma-separated), with --devs DEVS.
bytes() {
  "$BIN/ioblame" acts --json --devs "$2" "$1" 2>/dev/null | python3 -c '
import json, sys
comm, ino, kind, vias = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
print(sum(a.get(kind + "_bytes", 0) for a in map(json.loads, sys.stdin)
          if a["comm"] == comm and a["ino"] == ino and a["via"] in vias))' "$3" "$(stat -c %i "$4")" "$5" "$6"
}
# total TRACE DEVS KIND: all bytes of KIND on DEVS (write|read).
total() {
  "$BIN/ioblame" acts --json --devs "$2" "$1" 2>/dev/null | python3 -c '
import json, sys
print(sum(a[sys.argv[1] + "_bytes"] for a in map(json.loads, sys.stdin)))' "$3"
}
record() { # NAME [CAPTURE OPTIONS...] -- WORKLOAD
  local name=$1; shift
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  "$BIN/ioblame-capture" record -o "$W/$name.trace" "${opts[@]}" -- sh -c "$*" >"$W/$name.log" 2>&1 \
    || { echo "FAIL $name: ioblame-capture record: $(tail -3 "$W/$name.log")"; FAILS=$((FAILS + 1)); }
}
MIB=1048576

# part: ext4 on the partition, recorded with --devices <partition>.
if [[ " $ONLY " == *" part "* ]]; then
  F=$W/p1
  record part --devices "$P1" -- "$W/pwA if=/dev/zero of=$F/a.dat bs=64k count=64 2>/dev/null; \
    $W/pwB if=/dev/zero of=$F/b.dat bs=64k count=32 2>/dev/null; $W/psync; \
    $W/pwD if=/dev/zero of=$F/d.dat bs=64k count=16 oflag=direct 2>/dev/null; \
    $W/prD if=$F/r.dat of=/dev/null bs=64k iflag=direct 2>/dev/null"
  T=$W/part.trace
  for lvl in "$P"; do
    check "part[$lvl] pwA page" "$(bytes "$T" "$lvl" pwA "$F/a.dat" write page,buffer)" $((4 * MIB))
    check "part[$lvl] pwB page" "$(bytes "$T" "$lvl" pwB "$F/b.dat" write page,buffer)" $((2 * MIB))
    check "part[$lvl] pwD direct" "$(bytes "$T" "$lvl" pwD "$F/d.dat" write direct)" $((1 * MIB))
    check "part[$lvl] prD direct read" "$(bytes "$T" "$lvl" prD "$F/r.dat" read direct)" $((1 * MIB))
  done
fi

# dm: xfs on dm-linear over a whole loop device; both levels recorded.
dm_checks() { # NAME LEVELS...
  local name=$1; shift
  local T=$W/$name.trace F=$W/x
  for lvl in "$@"; do
    check "$name[$lvl] xwA page" "$(bytes "$T" "$lvl" xwA "$F/a.dat" write page,buffer)" $((4 * MIB))
    check "$name[$lvl] xwB page" "$(bytes "$T" "$lvl" xwB "$F/b.dat" write page,buffer)" $((2 * MIB))
    check "$name[$lvl] xwD direct" "$(bytes "$T" "$lvl" xwD "$F/d.dat" write direct)" $((1 * MIB))
    check "$name[$lvl] xrD direct read" "$(bytes "$T" "$lvl" xrD "$F/r.dat" read direct)" $((1 * MIB))
  done
}
XW="$W/xwA if=/dev/zero of=$W/x/a.dat bs=64k count=64 2>/dev/null; \
    $W/xwB if=/dev/zero of=$W/x/b.dat bs=64k count=32 2>/dev/null; $W/xsync; \
    $W/xwD if=/dev/zero of=$W/x/d.dat bs=64k count=16 oflag=direct 2>/dev/null; \
    $W/xrD if=$W/x/r.dat of=/dev/null bs=64k iflag=direct 2>/dev/null"
if [[ " $ONLY " == *" dm "* ]]; then
  record dm -- "$XW"
  dm_checks dm "$DX" "$L"
  # Each level alone holds each IO once: the two levels' totals are equal.
  check "dm written on $DX = on $L" "$(total "$W/dm.trace" "$DX" write)" "$(total "$W/dm.trace" "$L" write)"
fi
if [[ " $ONLY " == *" dmf "* ]]; then
  rm -f "$W"/x/[abd].dat; sync
  record dmf --devices "$DX" -- "$XW"
  dm_checks dmf "$DX"
fi

# dmp: ext4 on dm-linear over the partition p2.
if [[ " $ONLY " == *" dmp "* ]]; then
  F=$W/c
  record dmp -- "$W/cwA if=/dev/zero of=$F/a.dat bs=64k count=48 2>/dev/null; \
    $W/cwB if=/dev/zero of=$F/b.dat bs=64k count=16 2>/dev/null; $W/csync"
  T=$W/dmp.trace
  for lvl in "$DP" "$P"; do
    check "dmp[$lvl] cwA page" "$(bytes "$T" "$lvl" cwA "$F/a.dat" write page,buffer)" $((3 * MIB))
    check "dmp[$lvl] cwB page" "$(bytes "$T" "$lvl" cwB "$F/b.dat" write page,buffer)" $((1 * MIB))
  done
fi

# crypt: ext4 on LUKS2 (dm-crypt) over a whole loop device.
if [[ " $ONLY " == *" crypt "* ]]; then
  truncate -s 200M "$W/crypt.img"
  LC=$(losetup -f --show "$W/crypt.img"); LOOPS+=("$LC"); KL=$(basename "$LC")
  head -c 64 /dev/urandom > "$W/crypt.key"
  # A fast key derivation: the guests run under TCG.
  if cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
      --key-file "$W/crypt.key" "$LC" >"$W/crypt-setup.log" 2>&1 &&
    cryptsetup open --key-file "$W/crypt.key" "$LC" iobc >>"$W/crypt-setup.log" 2>&1; then
    DMS+=(iobc)
    DC=$(dmname iobc)
    echo "layers: $DC (iobc: $(dmsetup table iobc | awk '{print $1, $2, $3, $(NF-1), $NF}' | sed 's/ [0-9a-f]\{32,\}/ KEY/'))"
    F=$W/k; mkfs.ext4 -q -F /dev/mapper/iobc; mkdir -p "$F"; mount /dev/mapper/iobc "$F"; MNTS+=("$F")
    sync
    record crypt -- "$W/kwA if=/dev/zero of=$F/a.dat bs=64k count=64 2>/dev/null; \
      $W/kwB if=/dev/zero of=$F/b.dat bs=64k count=32 2>/dev/null; $W/ksync"
    T=$W/crypt.trace
    for lvl in "$DC" "$KL"; do
      check "crypt[$lvl] kwA page" "$(bytes "$T" "$lvl" kwA "$F/a.dat" write page,buffer)" $((4 * MIB))
      check "crypt[$lvl] kwB page" "$(bytes "$T" "$lvl" kwB "$F/b.dat" write page,buffer)" $((2 * MIB))
    done
  else
    echo "FAIL crypt: cryptsetup: $(tail -3 "$W/crypt-setup.log")"; FAILS=$((FAILS + 1))
  fi
fi

# loop, loopd: ext4 on a loop device over a file of p1's ext4.
loop_layout() { # NAME DIO(on|off)
  local name=$1 dio=$2 F=$W/$1 img=$W/p1/$1.img
  truncate -s 48M "$img"
  local LI; LI=$(losetup -f --show --direct-io="$dio" "$img"); LOOPS+=("$LI")
  local IL; IL=$(basename "$LI")
  # No lazy initialisation: its background writes would dirty the file before the recording.
  mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$LI"; mkdir -p "$F"; mount "$LI" "$F"; MNTS+=("$F")
  echo "layers: $IL over $img, dio $(cat /sys/block/$IL/loop/dio)"
  sync
  # Two syncs: the loop device's, then p1's (where a buffered loop device's writes landed).
  record "$name" -- "$W/lwA if=/dev/zero of=$F/a.dat bs=64k count=64 2>/dev/null; \
    $W/lwB if=/dev/zero of=$F/b.dat bs=64k count=32 2>/dev/null; $W/lsync; $W/lsync"
  local T=$W/$name.trace
  check "$name[$IL] lwA page" "$(bytes "$T" "$IL" lwA "$F/a.dat" write page,buffer)" $((4 * MIB))
  check "$name[$IL] lwB page" "$(bytes "$T" "$IL" lwB "$F/b.dat" write page,buffer)" $((2 * MIB))
  check "$name[$P] lwA lower" "$(bytes "$T" "$P" lwA "$F/a.dat" lower_write page,buffer)" $((4 * MIB))
  check "$name[$P] lwB lower" "$(bytes "$T" "$P" lwB "$F/b.dat" lower_write page,buffer)" $((2 * MIB))
  # The backing file's own charges on p1's disk (the loop worker's, a flusher's): none.
  check "$name[$P] $1.img own" "$("$BIN/ioblame" acts --json --devs "$P" "$T" 2>/dev/null | python3 -c '
import json, sys
print(sum(a["write_bytes"] for a in map(json.loads, sys.stdin) if a["ino"] == int(sys.argv[1])))' "$(stat -c %i "$img")")" 0
}
[[ " $ONLY " == *" loop "* ]] && loop_layout loop off
[[ " $ONLY " == *" loopd "* ]] && loop_layout loopd on

if [ -n "${LAYERS_OUT:-}" ]; then
  mkdir -p "$LAYERS_OUT/$KVER"
  for t in "$W"/*.trace; do [ -e "$t" ] && cp -r "$t" "$LAYERS_OUT/$KVER/"; done
  cp "$W"/*.log "$LAYERS_OUT/$KVER/" 2>/dev/null
fi
echo "layers: $KVER: $FAILS failed"
exit "$FAILS"
