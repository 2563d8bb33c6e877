#!/usr/bin/env python3
"""Turns the kernel blk tracer's binary ftrace output into blktrace's per-CPU files.

With `options/bin`, /sys/kernel/tracing/trace holds the text lines `# tracer: blk` and `#`,
then per entry a 16-byte ftrace prefix (pid u32, cpu u32, timestamp u64) and a real
`struct blk_io_trace` record with its payload (sequence 0, no notify records). This writes
what `blktrace -d DEV` would have: one file `NAME.blktrace.CPU` per device and CPU (empty
for a CPU without records), with per-CPU sequence numbers from 1, a process notify before
the first record of each named task, and a timestamp notify (the wall clock) first.

usage: ftrace-blk-to-blktrace.py TRACE_BIN SAVED_CMDLINES OUTDIR MAJ:MIN=NAME... [--cpus N]
       [--wall-ns NS --mono-ns NS]   (a wall clock and the trace clock read at one instant)
"""
import struct
import sys
import os

MAGIC = 0x65617400
NOTIFY = 1 << 10


def main():
    args = sys.argv[1:]
    cpus = os.cpu_count()
    wall = mono = None
    if "--cpus" in args:
        i = args.index("--cpus"); cpus = int(args[i + 1]); del args[i:i + 2]
    if "--wall-ns" in args:
        i = args.index("--wall-ns"); wall = int(args[i + 1]); del args[i:i + 2]
    if "--mono-ns" in args:
        i = args.index("--mono-ns"); mono = int(args[i + 1]); del args[i:i + 2]
    src, cmdlines, out = args[:3]
    names = {}
    for spec in args[3:]:
        mm, name = spec.split("=")
        ma, mi = mm.split(":")
        names[(int(ma) << 20) | int(mi)] = name
    comm = {}
    for line in open(cmdlines, errors="replace"):
        p = line.split(maxsplit=1)
        if len(p) == 2 and p[0].isdigit():
            comm[int(p[0])] = p[1].strip()
    d = open(src, "rb").read()
    i = 0
    for _ in range(2):  # the two text lines
        i = d.index(b"\n", i) + 1
    recs = []  # (time, cpu, dev, pid, bytes of the record)
    while i + 16 + 48 <= len(d):
        _pid, _cpu, _ts = struct.unpack_from("<IIQ", d, i)
        i += 16
        magic = struct.unpack_from("<I", d, i)[0]
        if magic & 0xFFFFFF00 != MAGIC:
            sys.exit(f"bad magic at {i}")
        hlen = 64 if magic & 0xFF == 8 else 48
        if hlen == 48:
            time, = struct.unpack_from("<Q", d, i + 8)
            pid, dev, cpu = struct.unpack_from("<III", d, i + 32)
            pdu, = struct.unpack_from("<H", d, i + 46)
        else:
            time, = struct.unpack_from("<Q", d, i + 8)
            pid, = struct.unpack_from("<I", d, i + 28)
            dev, cpu = struct.unpack_from("<II", d, i + 40)
            pdu, = struct.unpack_from("<H", d, i + 50)
        recs.append((time, cpu, dev, pid, bytearray(d[i:i + hlen + pdu]), hlen))
        i += hlen + pdu
    if i != len(d):
        sys.exit(f"trailing {len(d) - i} bytes")
    os.makedirs(out, exist_ok=True)
    files = {}
    seq = {}
    named = set()

    def note(dev, cpu, time, pid, action, payload):
        # struct blk_io_trace, version 7, category notify.
        h = struct.pack("<IIQQIIIIIHH", MAGIC | 7, 0, time, 0, 0,
                        action | (NOTIFY << 16), pid, dev, cpu, 0, len(payload))
        files.setdefault((dev, cpu), bytearray()).extend(h + payload)

    first = True
    for time, cpu, dev, pid, rec, hlen in recs:
        if dev not in names:
            continue
        if first and wall is not None and mono is not None:
            w = wall - (mono - time)
            note(dev, cpu, time, 0, 1, struct.pack("<II", w // 10**9, w % 10**9))
        first = False
        if pid not in named and pid in comm and pid != 0:
            named.add(pid)
            for dv in names:  # the kernel notes a task on every running trace
                note(dv, cpu, time, pid, 0, comm[pid].encode()[:15].ljust(16, b"\0"))
        k = (dev, cpu)
        seq[k] = seq.get(k, 0) + 1
        struct.pack_into("<I", rec, 4, seq[k])
        files.setdefault(k, bytearray()).extend(rec)
    for dev, name in names.items():
        for c in range(cpus):
            with open(os.path.join(out, f"{name}.blktrace.{c}"), "wb") as f:
                f.write(files.get((dev, c), b""))


main()
