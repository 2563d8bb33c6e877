#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/seeds/<target>/), small inputs of a few KiB cut
from the fixtures and the repository's own files, and from perf recordings made here.

Usage: fuzz/make-seeds.py [PERF_DIR]. PERF_DIR holds perf.data recordings (file and pipe mode)
to shrink into perfdata seeds; without it the perfdata seeds are left as they are. The seeds
are committed: run this again only to change them. Needs the `zstd` command, and gcc, binutils
(strip, objcopy) and `xz` for the user_symbols seeds.
"""
import glob
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(ROOT, "fuzz", "seeds")
FIXTURE = os.path.join(ROOT, "fixtures", "ext4-two-writers", "trace", "ioblame-000000.iob")
MAX_SEED = 4096


def out(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def blocks(b):
    """(kind, whole block bytes, payload) of an ioblame trace file, after its preamble."""
    o = 16
    while o + 24 <= len(b) and b[o:o + 4] == b"IOBk":
        kind, _flags, ln = struct.unpack_from("<HHI", b, o + 4)
        yield kind, b[o:o + 24 + ln], b[o + 24:o + 24 + ln]
        o += 24 + ln


def chunk_records(payload):
    """The decompressed perf records of a CHUNK payload (64-byte chunk header, zstd frame)."""
    cpu = struct.unpack_from("<I", payload, 0)[0]
    z = payload[64:]
    raw = subprocess.run(["zstd", "-d", "-c"], input=z, capture_output=True, check=True).stdout
    recs = []
    o = 0
    while o + 8 <= len(raw):
        size = struct.unpack_from("<H", raw, o + 6)[0]
        if size < 8:
            break
        recs.append(raw[o:o + size])
        o += size
    return cpu, recs


def events_and_reader():
    b = open(FIXTURE, "rb").read()
    meta = []
    chunks = []
    for kind, block, payload in blocks(b):
        if kind == 0x100:
            chunks.append((block, payload))
        elif kind not in (0x10, 0x11, 0x17, 0x200):  # events and kallsyms are large
            meta.append(block)
    n = 0
    for _block, payload in chunks:
        cpu, recs = chunk_records(payload)
        run = b""
        for r in recs:
            if len(run) + len(r) > MAX_SEED - 1:
                out("events", "two-writers-%03d" % n, bytes([cpu]) + run)
                n += 1
                run = b""
            run += r
        if run:
            out("events", "two-writers-%03d" % n, bytes([cpu]) + run)
            n += 1
    # The reader: the preamble and the small metadata blocks, then each small chunk.
    head = b[:16] + b"".join(meta)
    for i, (block, _) in enumerate(chunks):
        if len(block) <= 4096:
            out("reader", "two-writers-chunk-%d.iob" % i, head + block)
    out("reader", "two-writers-meta.iob", head)
    # The current format's sample (1.5: a FILE_INDEX table with an unnamed file; 1.6: FLUSHED
    # marks between the chunks; 1.7: LOOPS lists, one after the chunks; 1.8: USER_MAPS lists and a
    # USER_SYMBOLS block). Samples of earlier
    # versions written here before stay.
    latest = sorted(glob.glob(os.path.join(ROOT, "crates/format/tests/data/format-1.*.iob")),
                    key=lambda p: int(p.rsplit(".", 2)[-2]))[-1]
    with open(latest, "rb") as f:
        out("reader", os.path.basename(latest), f.read())


def kallsyms():
    text = open("/proc/kallsyms", "rb").read()
    lines = text.splitlines(keepends=True)
    picks = {"start": 0, "middle": len(lines) // 2, "modules": max(len(lines) - 60, 0)}
    for name, at in picks.items():
        s = b""
        for line in lines[at:]:
            if len(s) + len(line) > MAX_SEED:
                break
            s += line
        out("kallsyms", name, s)


def formats():
    for d in ("crates/events/formats", "crates/decode/tests/formats"):
        for p in sorted(glob.glob(os.path.join(ROOT, d, "*.format"))):
            data = open(p, "rb").read()
            if len(data) <= 2 * MAX_SEED:
                out("tracefs_format", os.path.basename(p), data)


def counters():
    specs = {
        "default": b"size r 4k 8k 16k 32k 64k 128k 256k\nwait_time rw 100us 1ms 10ms 100ms 1s 10s 100s\n",
        "filtered": b"size w 4k 8k 16k 32k 64k 128k 256k if comm ~ \"kworker*\" && (via == buffer || !(dev == 8:0))\n",
        "filter": b"(pid == 7 || tgid >= 0x10) && !(reason == vmscan) && comm != 'a b' && seek_dist < 4096",
        "comments": b"# a comment\nio_time r 1ms 2ms 4ms 8ms 16ms 32ms 64ms # trailing\n\n",
    }
    for name, s in specs.items():
        out("counters", name, s)


def baselines():
    for p in sorted(glob.glob(os.path.join(ROOT, "fixtures", "*", "baseline.toml"))):
        out("baseline", os.path.basename(os.path.dirname(p)) + ".toml", open(p, "rb").read())


def shrink_tracing(t, be):
    """Tracing data with the ftrace formats, kallsyms, printk formats and saved cmdlines
    emptied: the event formats are what ioblame reads."""
    e = ">" if be else "<"
    o = 10
    o = t.index(b"\0", o) + 1  # version
    o += 1 + 1 + 4  # endian, long size, page size
    for name in (b"header_page\0", b"header_event\0"):
        assert t[o:o + len(name)] == name
        o += len(name)
        size = struct.unpack_from(e + "Q", t, o)[0]
        o += 8 + size
    keep = t[:o] + struct.pack(e + "I", 0)  # no ftrace formats
    n = struct.unpack_from(e + "I", t, o)[0]
    o += 4
    for _ in range(n):
        size = struct.unpack_from(e + "Q", t, o)[0]
        o += 8 + size
    start = o
    systems = struct.unpack_from(e + "I", t, o)[0]
    o += 4
    for _ in range(systems):
        o = t.index(b"\0", o) + 1
        count = struct.unpack_from(e + "I", t, o)[0]
        o += 4
        for _ in range(count):
            size = struct.unpack_from(e + "Q", t, o)[0]
            o += 8 + size
    keep += t[start:o]
    keep += struct.pack(e + "I", 0) + struct.pack(e + "I", 0)  # kallsyms, printk
    if t[10:14] == b"0.6\0":
        keep += struct.pack(e + "Q", 0)  # saved cmdlines
    return keep


def shrink_file(b):
    """A perf.data file with its tracing data shrunk (the feature table fixed up)."""
    be = b[:8] == b"2ELIFREP"
    e = ">" if be else "<"
    data_off, data_size = struct.unpack_from(e + "QQ", b, 40)
    features = struct.unpack_from(e + "4Q", b, 72)
    if not features[0] & 2:
        return b
    table = data_off + data_size
    nfeat = sum(bin(w).count("1") for w in features)
    entries = [list(struct.unpack_from(e + "QQ", b, table + 16 * i)) for i in range(nfeat)]
    # Bit 1 (tracing data) comes first unless bit 0 is set.
    ti = 1 if features[0] & 1 else 0
    off, size = entries[ti]
    new = shrink_tracing(b[off:off + size], be)
    delta = size - len(new)
    entries[ti][1] = len(new)
    for ent in entries:
        if ent[0] > off:
            ent[0] -= delta
    b = b[:off] + new + b[off + size:]
    for i, (o2, s2) in enumerate(entries):
        b = b[:table + 16 * i] + struct.pack(e + "QQ", o2, s2) + b[table + 16 * i + 16:]
    return b


def shrink_pipe(b):
    """A pipe-mode stream with its tracing data shrunk."""
    be = b[:8] == b"2ELIFREP"
    e = ">" if be else "<"
    o = 16
    while o + 8 <= len(b):
        kind, _misc, size = struct.unpack_from(e + "IHH", b, o)
        if kind == 66:
            ln = struct.unpack_from(e + "I", b, o + 8)[0]
            new = shrink_tracing(b[o + size:o + size + ln], be)
            new += b"\0" * (-len(new) % 8)
            b = b[:o + 8] + struct.pack(e + "I", len(new)) + b[o + 12:o + size] + new + b[o + size + ln:]
            return b
        o += size
    return b


def perfdata(d):
    for p in sorted(glob.glob(os.path.join(d, "*.data"))):
        b = open(p, "rb").read()
        pipe = struct.unpack_from("<Q", b, 8)[0] == 16 or struct.unpack_from(">Q", b, 8)[0] == 16
        b = shrink_pipe(b) if pipe else shrink_file(b)
        out("perfdata", os.path.basename(p), b)


def blktrace():
    """The blktrace fixtures: per-CPU files (cut at MAX_SEED) and blkparse text (whole lines)."""
    for f in sorted(glob.glob(os.path.join(ROOT, "fixtures", "blktrace-*", "trace", "*"))):
        data = open(f, "rb").read()[:MAX_SEED]
        if data:
            fixture = f.split(os.sep)[-3]
            out("blktrace_reader", f"{fixture}-{os.path.basename(f)}", data)
    for f in sorted(glob.glob(os.path.join(ROOT, "fixtures", "blktrace-*", "*.blkparse.txt"))):
        text = open(f, "rb").read()
        cut = text[:MAX_SEED]
        cut = cut[: cut.rfind(b"\n") + 1]
        fixture = f.split(os.sep)[-2]
        out("blkparse_text", f"{fixture}-{os.path.basename(f)}", cut)
        # The end of the file: the per-CPU and summary sections blkparse prints last.
        tail = text[-MAX_SEED:]
        tail = tail[tail.find(b"\n") + 1 :]
        out("blkparse_text", f"{fixture}-{os.path.basename(f)}.end", tail)


USER_PROGRAM = b"""
static int n;
__attribute__((noinline)) void wal_flush(void) { n += 1; }
__attribute__((noinline)) static void checkpoint(void) { n += 2; }
__attribute__((noinline)) int commit_txn(int x) { return x + n; }
void _start(void) { wal_flush(); checkpoint(); for (;;) commit_txn(n); }
"""


def elf_parts(b):
    """(flags byte, PT_LOADs, {section name: bytes}) of an ELF file, either class and order."""
    flags, loads, sections, _addrs = elf_parts_at(b)
    return flags, loads, sections


def elf_parts_at(b):
    """elf_parts, and {section name: address}."""
    c64 = b[4] == 2
    e = ">" if b[5] == 2 else "<"
    if c64:
        phoff, shoff = struct.unpack_from(e + "QQ", b, 32)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(e + "HHHHH", b, 54)
    else:
        phoff, shoff = struct.unpack_from(e + "II", b, 28)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(e + "HHHHH", b, 42)
    machine = struct.unpack_from(e + "H", b, 18)[0]
    loads = []
    for i in range(phnum):
        o = phoff + i * phentsize
        if c64:
            typ, flags, off, vaddr, _paddr, filesz = struct.unpack_from(e + "IIQQQQ", b, o)
        else:
            typ, off, vaddr, _paddr, filesz, _memsz, flags = struct.unpack_from(e + "IIIIIII", b, o)
        if typ == 1:
            loads.append((off, vaddr, filesz, flags))
    shdrs = []
    for i in range(shnum):
        o = shoff + i * shentsize
        if c64:
            name, typ, _f, addr, off, size = struct.unpack_from(e + "IIQQQQ", b, o)
        else:
            name, typ, _f, addr, off, size = struct.unpack_from(e + "IIIIII", b, o)
        shdrs.append((name, typ, addr, off, size))
    stroff = shdrs[shstrndx][3]
    sections = {}
    addrs = {}
    for name, typ, addr, off, size in shdrs:
        n = b[stroff + name:b.index(b"\0", stroff + name)].decode()
        sections[n] = b"" if typ == 8 else b[off:off + size]  # SHT_NOBITS
        addrs[n] = addr
    flags = int(c64) | (2 if e == ">" else 0) | (4 if machine == 40 else 0)
    return flags, loads, sections, addrs


def user_symbols_input(b, offsets):
    """A user_symbols fuzz input (see fuzz_targets/user_symbols.rs) of an ELF file."""
    flags, loads, sections = elf_parts(b)
    loads = loads[:4]
    x = bytes([flags, len(loads)])
    for off, vaddr, filesz, f in loads:
        x += struct.pack("<QQQI", off, vaddr, filesz, f)
    names = [".symtab", ".strtab", ".dynsym", ".dynstr", ".gnu_debugdata"]
    data = [sections.get(n, b"")[:0xffff] for n in names]
    x += b"".join(struct.pack("<H", len(d)) for d in data) + b"".join(data)
    return x + b"".join(struct.pack("<Q", o) for o in offsets)


def user_symbols():
    """Seeds of the user_symbols target: a small program built here with gcc (no C library,
    so its tables are small), whole, stripped to .dynsym, and with a .gnu_debugdata."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "p.c")
        open(src, "wb").write(USER_PROGRAM)
        binp = os.path.join(d, "p")
        subprocess.run(["gcc", "-O1", "-nostdlib", "-static-pie", "-rdynamic", "-Wl,--build-id",
                        "-o", binp, src], check=True)
        b = open(binp, "rb").read()
        _flags, loads, sections = elf_parts(b)
        text = [l for l in loads if l[3] & 1][0]
        offsets = [text[0] + i for i in range(0, min(text[2], 64), 8)]
        out("user_symbols", "gcc-symtab", user_symbols_input(b, offsets))
        stripped = os.path.join(d, "p.stripped")
        subprocess.run(["strip", "-o", stripped, binp], check=True)
        out("user_symbols", "gcc-stripped", user_symbols_input(open(stripped, "rb").read(), offsets))
        mini = os.path.join(d, "mini")
        subprocess.run(["objcopy", "--only-keep-debug", binp, mini], check=True)
        subprocess.run(["objcopy", "--strip-debug", "--remove-section=.comment", mini], check=True)
        subprocess.run(["xz", "-k", mini], check=True)
        subprocess.run(["objcopy", "--add-section", ".gnu_debugdata=" + mini + ".xz", stripped],
                       check=True)
        out("user_symbols", "gcc-debugdata",
            user_symbols_input(open(stripped, "rb").read(), offsets))


def unwind():
    """A seed of the unwind target: the small program's unwind tables (gcc -O2, no frame
    pointers), mapped where a PIE is, a pc in its code and a stack holding return addresses
    into it."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "p.c")
        open(src, "wb").write(USER_PROGRAM)
        binp = os.path.join(d, "p")
        subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-nostdlib", "-static-pie",
                        "-Wl,--build-id", "-o", binp, src], check=True)
        b = open(binp, "rb").read()
    _flags, loads, sections, addrs = elf_parts_at(b)
    text = [l for l in loads if l[3] & 1][0]
    x = struct.pack("<QQQI", *text)
    base = 0x555555554000
    start = base + (text[1] & ~0xfff)
    x += struct.pack("<QQQ", start, start + text[2] + 0x1000, text[0] & ~0xfff)
    for n in [".eh_frame", ".eh_frame_hdr", ".debug_frame"]:
        data = sections.get(n, b"")[:0xffff]
        x += struct.pack("<QH", addrs.get(n, 0), len(data)) + data
    pc = base + text[1] + 0x10
    sp = 0x7ffd00000000
    x += struct.pack("<QQQQ", pc, sp, sp + 0x40, 0)
    stack = [base + text[1] + 0x20 + 8 * i for i in range(8)] + [sp + 0x80, 0]
    out("unwind", "gcc-o2", x + b"".join(struct.pack("<Q", w) for w in stack))


def sample_regs():
    """A seed of the sample_regs target: a stack event's sample as `--user-stacks dwarf`
    records it (x86's BP, SP, IP; 64 bytes of stack, 48 copied), with perf's DATA_SRC."""
    st = (1 << 16) | 2 | 4 | 0x80 | 0x20 | 0x400 | 0x1000 | 0x2000 | 0x8000 | (1 << 21)
    body = struct.pack("<QIIQII", 11, 100, 101, 123456789, 3, 0)
    body += struct.pack("<QQQ", 2, 0xffffffffffffff80, 0xffffffff81000010)
    body += struct.pack("<I", 4) + bytes([1, 2, 3, 4])
    body += struct.pack("<QQQQ", 2, 0x7ffd00000040, 0x7ffd00000000, 0x555555555123)
    body += struct.pack("<Q", 64) + bytes(range(64)) + struct.pack("<Q", 48)
    body += struct.pack("<QQ", 0x1234, 4242)
    out("sample_regs", "dwarf-sample", struct.pack("<IQ", st, 0x1c0) + body)


def perf_map():
    # A JIT's map as V8 and CPython (3.12, -X perf) write them, a line recompiled in place,
    # then addresses to look up after a NUL.
    text = (b"7f0000001000 40 jit_wal_append\n"
            b"0x7f0000001040 0x20 LazyCompile:*checkpoint /app/db.js:12\n"
            b"py::scan_table:/app/x.py 10\n"
            b"7f0000001000 10 recompiled\n")
    out("perf_map", "v8-and-python", text + b"\0" + struct.pack("<Q", 0x7f0000001004))

def mmap2_events():
    """MMAP2 records in the events target's chunk (the fixture records none: it has no user
    stacks): a program's executable mapping with the kernel's build id
    (PERF_RECORD_MISC_MMAP_BUILD_ID), a library's with device and inode, an anonymous JIT
    mapping, and a data mapping (skipped), each with the sample_id_all trailer of a COMM
    record of the fixture, then the fixture's own records of the same CPU."""
    b = open(FIXTURE, "rb").read()
    for kind, _block, payload in blocks(b):
        if kind != 0x100:
            continue
        cpu, recs = chunk_records(payload)
        comms = [r for r in recs if struct.unpack_from("<I", r, 0)[0] == 3]
        if not comms:
            continue
        c = comms[0]
        pid, tid = struct.unpack_from("<II", c, 8)
        name_end = c.index(b"\0", 16)
        trailer = c[16 + ((name_end - 16) // 8 + 1) * 8:]

        def mmap2(misc, addr, ln, pgoff, ident, prot, flags, name):
            fname = name + b"\0" * (8 - len(name) % 8)
            body = struct.pack("<IIQQQ", pid, tid, addr, ln, pgoff) + ident
            body += struct.pack("<II", prot, flags) + fname + trailer
            return struct.pack("<IHH", 10, misc, 8 + len(body)) + body

        build_id = bytes(range(1, 21))
        recs2 = [
            mmap2(2 | 1 << 14, 0x555555554000, 0x2000, 0x1000,
                  bytes([20, 0, 0, 0]) + build_id, 5, 2, b"/usr/bin/iowork"),
            mmap2(2, 0x7ffff7dd0000, 0x150000, 0x28000,
                  struct.pack("<IIQQ", 254, 1, 1234567, 0), 5, 2,
                  b"/usr/lib/x86_64-linux-gnu/libc.so.6"),
            mmap2(2, 0x7ffff7f00000, 0x10000, 0, bytes(24), 7, 0x22, b"//anon"),
            mmap2(2 | 1 << 13, 0x7ffff7e00000, 0x1000, 0, bytes(24), 3, 2, b"/tmp/data"),
        ]
        run = b"".join(recs2)
        for r in recs:
            if len(run) + len(r) > MAX_SEED - 1:
                break
            run += r
        out("events", "mmap2-then-two-writers", bytes([cpu]) + run)
        return


if __name__ == "__main__":
    blktrace()
    events_and_reader()
    mmap2_events()
    kallsyms()
    formats()
    counters()
    baselines()
    user_symbols()
    unwind()
    sample_regs()
    perf_map()
    if len(sys.argv) > 1:
        perfdata(sys.argv[1])
