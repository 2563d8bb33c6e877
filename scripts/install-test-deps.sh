#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine and prepares the kernel
# interfaces the capture tests use. Idempotent; needs root (the capture tests need it anyway).
set -euo pipefail

need=()
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v losetup >/dev/null || need+=(util-linux)
# The btrfs tests make filesystems on loop devices (analyze/tests/btrfs_live.rs).
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
command -v python3 >/dev/null || need+=(python3)
# The user-stack tests build C programs with and without frame pointers, and strip one
# (binutils: strip, readelf), as capture/tests/user_stacks_live.rs and analyze/tests/ustack_live.rs
# do; the latter also builds a Rust program with the rustc cargo brings.
command -v gcc >/dev/null || need+=(gcc)
# A Debian-packaged program without frame pointers whose stacks are unwound by CFI
# (analyze/tests/ustack_cfi_live.rs).
command -v sqlite3 >/dev/null || need+=(sqlite3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
command -v fio >/dev/null || need+=(fio)
command -v perf >/dev/null || need+=(linux-perf)
command -v chromium >/dev/null || need+=(chromium)
# blkparse and btt: the reference readers of blktrace files (analyze/tests/blktrace.rs)
# and the oracle of `ioblame latency` (analyze/tests/latency.rs).
command -v blkparse >/dev/null && command -v btt >/dev/null || need+=(blktrace)
# The completion and man page tests: the shells load each script, man renders each page,
# and `script` gives the colour test a terminal.
command -v zsh >/dev/null || need+=(zsh)
command -v fish >/dev/null || need+=(fish)
command -v man >/dev/null || need+=(man-db)
command -v groff >/dev/null || need+=(groff-base)
command -v script >/dev/null || need+=(bsdutils)
# `ioblame top`'s view is driven through a real terminal in tmux (analyze/tests/top_live.rs).
command -v tmux >/dev/null || need+=(tmux)
# The fleet dataset's tests run its PySpark example on a local Spark, which needs Java 17.
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
# The kernel lab (scripts/kernel-lab, docs/kernel-lab.md): Debian's kernels unpacked with
# apt-get download and dpkg-deb (modules indexed by depmod, decompressed by xz or zstd) and
# booted by QEMU with a static busybox initramfs (cpio); dmsetup and fdisk for device-mapper
# and partitioned loop devices in the guests. Without recommends: QEMU's pull in a GUI.
lab=()
command -v qemu-system-x86_64 >/dev/null || lab+=(qemu-system-x86)
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || lab+=(busybox-static)
command -v cpio >/dev/null || lab+=(cpio)
command -v depmod >/dev/null && command -v modprobe >/dev/null || lab+=(kmod)
command -v xz >/dev/null || lab+=(xz-utils)
command -v zstd >/dev/null || lab+=(zstd)
command -v dmsetup >/dev/null || lab+=(dmsetup)
command -v fdisk >/dev/null || lab+=(fdisk)
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || lab+=(debian-archive-keyring)
if [ "${#need[@]}" -gt 0 ] || [ "${#lab[@]}" -gt 0 ]; then
    echo "installing: ${need[*]} ${lab[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    if [ "${#need[@]}" -gt 0 ]; then
        apt-get install -y -qq "${need[@]}" >/dev/null
    fi
    if [ "${#lab[@]}" -gt 0 ]; then
        apt-get install -y -qq --no-install-recommends "${lab[@]}" >/dev/null
    fi
fi

# The report tests read the Parquet tables with DuckDB, as users do.
# Debian's own python3 refuses pip installs into the system (PEP 668) unless told to.
if ! python3 -c 'import duckdb' 2>/dev/null; then
    python3 -m pip install --quiet duckdb 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages duckdb
fi

# The fleet dataset's tests run examples/spark/ (PySpark, master local[2]) on the dataset.
if ! python3 -c 'import pyspark' 2>/dev/null; then
    python3 -m pip install --quiet pyspark 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages pyspark
fi

# The timeline's tests decode its output with Perfetto's own schema (perfetto_trace_pb2).
if ! python3 -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null; then
    python3 -m pip install --quiet perfetto 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages perfetto
fi

# The capture reads tracepoint ids and formats from tracefs.
if [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
# Loop devices for the capture tests.
modprobe loop 2>/dev/null || true
exit 0
