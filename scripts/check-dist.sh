#!/usr/bin/env bash
# Checks the static recorder `scripts/dist.sh` builds: no dynamic dependencies at all (no
# interpreter, no NEEDED entry), and it records a real workload correctly: a writer on a
# fresh ext4 loop device is charged exactly the bytes it wrote. Needs root; run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/dist.sh)
fail() { echo "check-dist: $*" >&2; exit 1; }
if readelf -lW "$bin" | grep -q 'INTERP'; then fail "$bin asks for a dynamic loader"; fi
if readelf -dW "$bin" | grep -q '(NEEDED)'; then
    fail "$bin needs shared libraries: $(readelf -dW "$bin" | grep NEEDED)"
fi
echo "check-dist: $bin is static, $(stat -c %s "$bin") bytes"

work=$(mktemp -d /var/tmp/ioblame-dist.XXXXXX)
dev=""
cleanup() {
    umount "$work/mnt" 2>/dev/null || true
    [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
truncate -s 128M "$work/fs.img"
mkfs.ext4 -qF "$work/fs.img"
dev=$(losetup --find --show "$work/fs.img")
mkdir "$work/mnt"
mount "$dev" "$work/mnt"
"$bin" record -o "$work/trace" --devices "$(basename "$dev")" -- \
    dd if=/dev/zero of="$work/mnt/f" bs=1M count=6 conv=fsync status=none
cargo build --quiet -p ioblame
analyzer="${CARGO_TARGET_DIR:-target}/debug/ioblame"
# Its data (via page or buffer): dd is also charged its share of the journal commits its
# fsync caused (docs/attribution.md, "Journal IO").
written=$("$analyzer" acts "$work/trace" --json 2>/dev/null |
    python3 -c 'import json,sys; print(sum(a["write_bytes"] for a in map(json.loads, sys.stdin) if a["comm"] == "dd" and a["via"] in ("page", "buffer")))')
[ "$written" = $((6 << 20)) ] || fail "dd was charged $written bytes, not $((6 << 20))"
echo "check-dist: the static recorder charged dd its 6 MiB"
