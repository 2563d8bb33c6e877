#!/usr/bin/env python3
"""File names at scale (issue 28): a benchmark, not a test. Root, Linux, fio, mkfs.ext4.

Part 1, this host as it is: a 4 s fio job (4 KiB random writes) on a loop-device ext4,
recorded without --devices (every block-device filesystem is recorded, the root one
included), by the recorder BEFORE (the walk of every file: a given older binary, or this
recorder with --paths walk) and by this one (--paths touched, the default), and with
--no-paths. Then, interleaved, REPS rounds of `ioblame acts --json` and `ioblame counters`
on each trace (the analyzer ANALYZER_BEFORE on the walked trace, this one on the others):
median wall time, and each against --no-paths.

Part 2, a filesystem of FILES files (default 2,000,000, on a loop-device ext4): recorder
start (spawn to its "recording" line) and stop (the command's end to the recorder's exit) on
it and on an empty filesystem, --paths touched against --paths walk, interleaved; the files
the workload wrote must all be named; the FILES table's size on disk against the files it
names.

Usage: capture/bench/bench-paths.py [REPS=5] [FILES=2000000]
Environment: IOBLAME, IOBLAME_CAPTURE (default: the release builds), CAPTURE_BEFORE and
ANALYZER_BEFORE (the binaries to compare with; default: these with --paths walk), PART=2
(part 2 only).
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TD = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
IOB = os.environ.get("IOBLAME", os.path.join(TD, "release", "ioblame"))
CAP = os.environ.get("IOBLAME_CAPTURE", os.path.join(TD, "release", "ioblame-capture"))
CAP_BEFORE = os.environ.get("CAPTURE_BEFORE")
IOB_BEFORE = os.environ.get("ANALYZER_BEFORE", IOB)
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
NFILES = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000


def sh(*a, **kw):
    return subprocess.run(a, check=True, **kw)


class LoopFs:
    def __init__(self, work, name, size, fs="ext4", mkfs_args=()):
        self.img = os.path.join(work, name + ".img")
        self.mnt = os.path.join(work, name)
        os.makedirs(self.mnt)
        sh("truncate", "-s", size, self.img)
        self.dev = subprocess.run(["losetup", "-f", "--show", self.img], check=True,
                                  capture_output=True, text=True).stdout.strip()
        sh("mkfs." + fs, "-q", *mkfs_args, self.dev)
        sh("mount", self.dev, self.mnt)

    def close(self):
        subprocess.run(["umount", self.mnt])
        subprocess.run(["losetup", "-d", self.dev])


def record(cap, out, args, command):
    """Runs the recorder; returns (start s, stop s, stderr). Start: spawn to its `recording`
    line; stop: the command's end (it prints a marker) to the recorder's exit."""
    marker = os.path.join(os.path.dirname(out), "cmd-ended")
    if os.path.exists(marker):
        os.remove(marker)
    cmd = [cap, "record", "-o", out, *args, "--", "sh", "-c",
           command + f"; date +%s.%N > {marker}"]
    t0 = time.time()
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    started = None
    err = []
    for line in p.stderr:
        err.append(line)
        if started is None and line.startswith("ioblame-capture: recording "):
            started = time.time()
    p.wait()
    t_end = time.time()
    if p.returncode != 0:
        sys.exit("recorder failed: " + "".join(err))
    ended = float(open(marker).read())
    return started - t0, t_end - ended, "".join(err)


def timed(args):
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def trace_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def files_bytes(d):
    """Bytes of the FILES and FILE_INDEX blocks (headers included) of a trace's files."""
    total = 0
    for f in os.listdir(d):
        b = open(os.path.join(d, f), "rb").read()
        at = 16
        while at + 24 <= len(b) and b[at:at + 4] == b"IOBk":
            kind = int.from_bytes(b[at + 4:at + 6], "little")
            n = int.from_bytes(b[at + 8:at + 12], "little")
            if kind in (0x16, 0x19):
                total += 24 + n
            at += 24 + n
    return total


def records(trace):
    out = subprocess.run([IOB, "info", trace], capture_output=True, text=True).stdout
    m = re.search(r"chunks\s+\d+ \((\d+) records", out)
    return int(m.group(1)) if m else 0


def info_names(trace):
    out = subprocess.run([IOB, "info", trace], capture_output=True, text=True).stdout
    m = re.search(r"file names\s+(.*)", out)
    c = re.search(r"charged files\s+(.*)", out)
    return (m.group(1) if m else "?"), (c.group(1) if c else "?")


def part1(work):
    print("== part 1: a 4 s fio job recorded on this host as it is")
    n = subprocess.run(["df", "--output=iused", "/"], capture_output=True, text=True).stdout.split()[-1]
    print(f"root filesystem inodes in use: {n}")
    lfs = LoopFs(work, "fio", "1G")
    fio = (f"fio --name=r --directory={lfs.mnt} --rw=randwrite --bs=4k --size=256m "
           "--time_based --runtime=4 --ioengine=psync --end_fsync=1 >/dev/null")
    traces = {}
    before_cap = CAP_BEFORE or CAP
    before_args = [] if CAP_BEFORE else ["--paths", "walk"]
    for name, cap, args in [("walk (before)", before_cap, before_args),
                            ("touched", CAP, []),
                            ("no-paths", CAP, ["--no-paths"])]:
        out = os.path.join(work, "t-" + name.split()[0])
        start, stop, err = record(cap, out, args, fio)
        traces[name] = out
        print(f"  {name:14} recorder start {start:.2f} s, stop {stop:.2f} s, "
              f"trace {trace_bytes(out) / 1e6:.1f} MB ({files_bytes(out)} bytes of "
              f"file tables), {records(out)} records")
        for l in err.splitlines():
            if "walk for file paths" in l or "named " in l:
                print("    " + l)
    for name, t in traces.items():
        names, charged = info_names(t)
        print(f"  {name:14} file names: {names}; charged files {charged}")
    times = {(n, c): [] for n in traces for c in ("acts --json", "counters")}
    for _ in range(REPS):
        for n, t in traces.items():
            iob = IOB_BEFORE if n.startswith("walk") else IOB
            times[(n, "acts --json")].append(timed([iob, "acts", "--json", t]))
            times[(n, "counters")].append(timed([iob, "counters", t]))
    print(f"  median of {REPS} interleaved runs (analyzer before on the walked trace); the "
          "recordings differ in records, so the ratio is of time per record:")
    recs = {n: max(1, records(t)) for n, t in traces.items()}
    for c in ("acts --json", "counters"):
        base = statistics.median(times[("no-paths", c)]) / recs["no-paths"]
        for n in traces:
            m = statistics.median(times[(n, c)])
            lo, hi = min(times[(n, c)]), max(times[(n, c)])
            print(f"    {c:12} {n:14} {m:.3f} s ({lo:.3f}-{hi:.3f}), "
                  f"{m / recs[n] * 1e9:.0f} ns/record = {m / recs[n] / base:.2f}x no-paths")
    lfs.close()


def make_files(root, n):
    """n empty files in directories of 1000."""
    t0 = time.time()
    per = 1000
    for d in range((n + per - 1) // per):
        dp = os.path.join(root, f"d{d:05}")
        os.mkdir(dp)
        for i in range(min(per, n - d * per)):
            os.close(os.open(os.path.join(dp, f"f{i}"), os.O_CREAT | os.O_WRONLY, 0o644))
    return time.time() - t0


def part2(work):
    print(f"== part 2: recorder start and stop on a filesystem of {NFILES} files")
    big = LoopFs(work, "big", "12G", mkfs_args=("-N", str(NFILES + 100_000)))
    took = make_files(big.mnt, NFILES)
    sh("sync")
    print(f"  made {NFILES} files in {took:.0f} s")
    empty = LoopFs(work, "empty", "1G")
    wl = "for i in $(seq 1 50); do dd if=/dev/zero of={m}/w$i.dat bs=64k count=4 conv=fsync 2>/dev/null; done"
    res = {}
    for _ in range(max(1, REPS // 2 + 1)):
        for fsname, lfs in [("2M files", big), ("empty", empty)]:
            for mode in ("touched", "walk"):
                out = os.path.join(work, f"r-{fsname[0]}-{mode}")
                subprocess.run(["rm", "-rf", out])
                start, stop, err = record(CAP, out, ["--devices", os.path.basename(lfs.dev),
                                                     "--paths", mode],
                                          wl.format(m=lfs.mnt))
                res.setdefault((fsname, mode), []).append((start, stop))
                if mode == "touched":
                    # Every charged file named (the analyzer says which are not), and the
                    # table names each of the 50 (`info` counts them).
                    acts = subprocess.run(
                        [IOB, "acts", "--json", out], capture_output=True, text=True)
                    named = int(info_names(out)[0].split()[0])
                    if "have no path" in acts.stderr or named < 50:
                        print(f"  {fsname}: files unnamed ({named} named):\n{err}{acts.stderr}")
                        sys.exit(1)
                    paths = set(re.findall(r'"path":"([^"]*w\d+\.dat)"', acts.stdout))
                    res.setdefault((fsname, "charged"), []).append(len(paths))
                    res.setdefault((fsname, "size"), []).append(
                        (files_bytes(out), info_names(out)[0]))
    for fsname in ("2M files", "empty"):
        for mode in ("touched", "walk"):
            v = res[(fsname, mode)]
            print(f"  {fsname:9} --paths {mode:8} start {statistics.median(s for s, _ in v):.2f} s,"
                  f" stop {statistics.median(t for _, t in v):.2f} s  ({len(v)} runs)")
    for fsname in ("2M files", "empty"):
        size, names = res[(fsname, "size")][-1]
        print(f"  {fsname:9} touched: {size} bytes of file tables, file names: {names}")
    print("  every charged file was named in every touched run; the written files charged "
          f"(of 50): {res[('2M files', 'charged')]} on 2M files, {res[('empty', 'charged')]} "
          "on the empty one")
    empty.close()
    big.close()


def main():
    if os.geteuid() != 0:
        sys.exit("bench-paths: run as root")
    for b in (IOB, CAP):
        if not os.access(b, os.X_OK):
            sys.exit(f"bench-paths: {b} missing (cargo build --release -p ioblame -p ioblame-capture)")
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="iob-paths.") as work:
        try:
            if os.environ.get("PART", "1") == "1":
                part1(work)
            if NFILES > 0:
                part2(work)
        finally:
            subprocess.run(f"grep {work} /proc/mounts | cut -d' ' -f2 | xargs -r -n1 umount",
                           shell=True)


if __name__ == "__main__":
    main()
