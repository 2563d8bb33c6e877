#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine and prepares the kernel
# interfaces the capture tests use. Idempotent; needs root (the capture tests need it anyway).
set -euo pipefail

need=()
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v losetup >/dev/null || need+=(util-linux)
command -v python3 >/dev/null || need+=(python3)
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
# The fleet dataset's tests run its PySpark example on a local Spark, which needs Java 17.
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
if [ "${#need[@]}" -gt 0 ]; then
    echo "installing: ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
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

# The capture reads tracepoint ids and formats from tracefs.
if [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
# Loop devices for the capture tests.
modprobe loop 2>/dev/null || true
exit 0
