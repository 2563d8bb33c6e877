#!/usr/bin/env bash
# The screenshots of docs/top.md: `ioblame top` in tmux at 80x24 and at 200x30, over a
# workload on a fresh ext4 loop device (a database appending to its WAL, a dump, a reader,
# periodic syncs). Root. Prints the two screens.
#   scripts/top-screenshots.sh [BINDIR]   (default target/release)
set -euo pipefail
bindir=${1:-target/release}
ioblame=$(realpath "$bindir/ioblame")
capture=$(realpath "$bindir/ioblame-capture")
work=$(mktemp -d /var/tmp/ioblame-top-shots.XXXXXX)
cleanup() {
    tmux kill-session -t iobshot80 2>/dev/null || true
    tmux kill-session -t iobshot200 2>/dev/null || true
    kill $(jobs -p) 2>/dev/null || true
    wait 2>/dev/null || true
    umount "$work/mnt" 2>/dev/null || true
    [ -n "${dev:-}" ] && losetup -d "$dev" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
truncate -s 1G "$work/img"
dev=$(losetup -f --show "$work/img")
mkfs.ext4 -q "$dev"
mkdir "$work/mnt" "$work/bin"
mount "$dev" "$work/mnt"
for t in postgres:dd pg_dump:dd rsync:cat; do
    cp "/bin/${t#*:}" "$work/bin/${t%%:*}"
done
mkdir -p "$work/mnt/db/wal" "$work/mnt/backup" "$work/mnt/www"
dd if=/dev/urandom of="$work/mnt/www/bundle.js" bs=1M count=64 status=none
sync
# The workload: a database appending to its WAL, a dump, a reader; syncs now and then.
(
    i=0
    while :; do
        "$work/bin/postgres" if=/dev/zero of="$work/mnt/db/wal/000000010000000A" bs=256k count=8 \
            oflag=append conv=notrunc status=none
        "$work/bin/pg_dump" if=/dev/zero of="$work/mnt/backup/dump.sql" bs=1M count=3 \
            oflag=append conv=notrunc status=none
        i=$((i + 1))
        if [ $((i % 3)) = 0 ]; then
            echo 1 > /proc/sys/vm/drop_caches
            "$work/bin/rsync" "$work/mnt/www/bundle.js" > /dev/null
            sync
        fi
        sleep 0.3
    done
) &
name=$(basename "$dev")
# The narrow view starts the recorder; the wide one follows the same recording.
tmux new-session -d -s iobshot80 -x 80 -y 24 \
    "$ioblame top --keep $work/trace --capture $capture -- --devices $name; sleep 30"
sleep 3
tmux new-session -d -s iobshot200 -x 200 -y 30 "$ioblame top --follow $work/trace; sleep 30"
sleep 12
for geom in 80x24 200x30; do
    w=${geom%x*}
    echo "== $geom"
    tmux capture-pane -p -t "iobshot$w"
    tmux send-keys -t "iobshot$w" q
done
sleep 3
