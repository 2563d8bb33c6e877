#!/bin/bash
# ustack.sh: user stacks on the running kernel (docs/attribution.md, "User frames"), meant
# for a kernel-lab guest (ustack-lab.sh). A C program, a Rust program and a JIT's code (all
# built with frame pointers, in $USTACK_PROGS) write, fsync and read files of an ext4 on a
# loop device under `ioblame-capture record --user-stacks`; the programs are then removed
# from where they ran, and `ioblame --no-local-symbols acts --json` (the trace alone) must
# charge each phase's bytes to intents named after its function. With USTACK_PERF set, the C
# program is recorded again by stock perf with the line `ioblame perf-command --user-stacks`
# prints for this kernel (`--buildid-all` before 5.12, whose MMAP2 records carry no build
# ids), and analysed with `--symbols` holding a copy of it (perf.data carries no symbol
# tables); perf under TCG takes minutes more. Then `cfi` (built without frame pointers; its
# functions call write, pwrite and fsync directly) is recorded with `--user-stacks dwarf`:
# each function must be named next to its C library call, from the stack copies unwound by
# the trace's unwind tables.
# Prints `PASS name` or `FAIL name: got/want` per check and exits with the number of
# failures.
# Env: IOBLAME_BIN (the binaries), USTACK_PROGS (iowork, iowork-rs, jit), USTACK_OUT (keep
# the trace there), USTACK_PERF (non-empty: the perf recording too).
set -uo pipefail
BIN=${IOBLAME_BIN:?}; PROGS=${USTACK_PROGS:?}
KVER=$(uname -r)
modprobe loop 2>/dev/null; modprobe ext4 2>/dev/null
W=$(mktemp -d /tmp/ustack.XXXXXX)
. "$(dirname "$0")/checks.sh"
truncate -s 256M "$W/img"; mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$W/img"
L=$(losetup -f --show "$W/img"); mkdir "$W/m"; mount "$L" "$W/m"
# The programs run from a copy that is gone when the trace is analysed.
mkdir "$W/bin" "$W/store"; cp "$PROGS"/iowork "$PROGS"/iowork-rs "$PROGS"/jit "$PROGS"/cfi "$W/bin/"
cp "$PROGS"/iowork "$W/store/"
M=$W/m; B=$W/bin
"$BIN/ioblame-capture" record -o "$W/trace" --devices "${L#/dev/}" --user-stacks -- sh -c "
  $B/iowork wal $M/wal.dat 4096; $B/iowork ckpt $M/ckpt.dat 2048; sync -f $M
  $B/iowork scan $M/ckpt.dat
  $B/iowork-rs wal $M/rwal.dat 2048; sync -f $M
  $B/jit $M/jit.dat 1024; sync -f $M" > "$W/capture.log" 2>&1 \
  || { echo "FAIL record: $(tail -3 "$W/capture.log")"; FAILS=$((FAILS + 1)); }
# Stack copies unwound by CFI: 2 KiB hold cfi's stacks; under TCG the recorder drains slowly,
# and 8 KiB copies of every dirtied page overflowed 5.10's default rings (4,927 records lost).
mkdir "$M/d"
"$BIN/ioblame-capture" record -o "$W/dwarf" --devices "${L#/dev/}" --user-stacks dwarf:2048 \
  --buffer-size 64M -- sh -c "
  $B/cfi wal $M/d && $B/cfi ckpt $M/d && $B/cfi page $M/d && sync -f $M" > "$W/dwarf.log" 2>&1 \
  || { echo "FAIL record dwarf: $(tail -3 "$W/dwarf.log")"; FAILS=$((FAILS + 1)); }
# Stock perf, with the printed line.
PERF=${USTACK_PERF:-}
[ -n "$PERF" ] && {
LINE=$("$BIN/ioblame" perf-command --devices "${L#/dev/}" --user-stacks 2>"$W/pc.err")
echo "perf's build ids: $(grep -o -- '--buildid-[a-z]*' <<<"$LINE")"
mkdir "$M/p"
sh -c "${LINE% -o perf.data -- COMMAND} -o $W/perf.data -- sh -c '
  $B/iowork wal $M/p/wal.dat 4096; $B/iowork ckpt $M/p/ckpt.dat 2048; sync -f $M
  $B/iowork scan $M/p/ckpt.dat'" > "$W/perf.log" 2>&1 \
  || { echo "FAIL perf record: $(tail -3 "$W/perf.log")"; FAILS=$((FAILS + 1)); }
PWAL=$(stat -c %i "$M/p/wal.dat"); PCKPT=$(stat -c %i "$M/p/ckpt.dat")
}
rm -rf "$B" /tmp/perf-*.map
echo "mmap build ids from the kernel: $("$BIN/ioblame" info "$W/trace" | awk '$1 == "mmap_build_id" {print $2}')"
# The bytes of the file's data acts whose intent name starts with the function.
bytes() { # file kind(write|read) function [trace]
  "$BIN/ioblame" --no-local-symbols acts --json "${4:-$W/trace}" 2>/dev/null | python3 -c '
import json, sys
f, kind, fn = sys.argv[1:]
n = 0
for a in map(json.loads, sys.stdin):
    if (a["path"] or "").endswith("/" + f) and a["via"] in ("page", "buffer", "read", "readahead"):
        if (a["intent_name"] or "").startswith(fn + " › "):
            n += a["read_bytes"] if kind == "read" else a["write_bytes"]
print(n)' "$1" "$2" "$3"
}
# The same from perf.data, by inode (perf.data names no paths).
pbytes() { # ino kind(write|read) function
  "$BIN/ioblame" --no-local-symbols --symbols "$W/store" acts --json "$W/perf.data" 2>/dev/null | python3 -c '
import json, sys
ino, kind, fn = sys.argv[1:]
n = 0
for a in map(json.loads, sys.stdin):
    if a["ino"] == int(ino) and a["via"] in ("page", "buffer", "read", "readahead"):
        if (a["intent_name"] or "").startswith(fn + " › "):
            n += a["read_bytes"] if kind == "read" else a["write_bytes"]
print(n)' "$1" "$2" "$3"
}
check "wal.dat written by wal_append" "$(bytes wal.dat write wal_append)" $((4 << 20))
check "ckpt.dat written by checkpoint" "$(bytes ckpt.dat write checkpoint)" $((2 << 20))
check "ckpt.dat read by scan_table" "$(bytes ckpt.dat read scan_table)" $((2 << 20))
check "rwal.dat written by iowork::wal_append" "$(bytes rwal.dat write iowork::wal_append)" $((2 << 20))
check "jit.dat written by the JIT's jit_wal_append" "$(bytes jit.dat write 'jit_wal_append [jit]')" $((1 << 20))
# The C library's wrapper and its caller, both named: the wrapper's frame first, then the
# function (the intent name leads with the application's frame).
check "dwarf: wal.dat written by append_wal" "$(bytes wal.dat write append_wal "$W/dwarf")" $((4 << 20))
check "dwarf: ckpt.dat written by write_checkpoint" "$(bytes ckpt.dat write write_checkpoint "$W/dwarf")" $((2 << 20))
check "dwarf: page.dat written by flush_page" "$(bytes page.dat write flush_page "$W/dwarf")" $((1 << 20))
check "dwarf: store_page calls flush_page" "$("$BIN/ioblame" --no-local-symbols acts --json "$W/dwarf" 2>/dev/null | python3 -c '
import json, sys
ok = any(
    [f["function"] for f in a.get("user_frames", [])][1:3] == ["flush_page", "store_page"]
    for a in map(json.loads, sys.stdin) if (a["path"] or "").endswith("/page.dat"))
print("yes" if ok else "no")')" yes
if [ -n "$PERF" ]; then
  check "perf.data: wal.dat written by wal_append" "$(pbytes "$PWAL" write wal_append)" $((4 << 20))
  check "perf.data: ckpt.dat written by checkpoint" "$(pbytes "$PCKPT" write checkpoint)" $((2 << 20))
  check "perf.data: ckpt.dat read by scan_table" "$(pbytes "$PCKPT" read scan_table)" $((2 << 20))
fi
[ -n "${USTACK_OUT:-}" ] && cp -r "$W/dwarf" "$USTACK_OUT/ustack-$KVER.dwarf" \
  && cp "$W/dwarf.log" "$USTACK_OUT/ustack-$KVER.dwarf.log" \
  && cp -r "$W/trace" "$USTACK_OUT/ustack-$KVER" \
  && { [ -z "$PERF" ] || cp "$W/perf.data" "$USTACK_OUT/ustack-$KVER.perf.data"; }
umount "$W/m"; losetup -d "$L"; rm -rf "$W"
echo "ustack: $KVER: $FAILS failed"
exit "$FAILS"
