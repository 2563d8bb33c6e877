//! `ioblame-capture record --user-stacks` on a real filesystem (needs root, gcc): a C program
//! built with frame pointers writes, dirties and fsyncs a file, once started before the
//! recording (its mappings read from /proc) and once as the recorded command (its mappings
//! from MMAP2 records); the trace holds their mappings with the right build ids, user frames
//! after PERF_CONTEXT_USER, and the symbol tables of the program and of libc.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use ioblame_perfrec::CONTEXT_USER;

const PROGRAM: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((noinline)) void write_chunk(int fd, const char *b, size_t n) {
    if (write(fd, b, n) != (ssize_t)n) exit(2);
}
__attribute__((noinline)) void dirty_pages(int fd) {
    static char buf[65536];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 32; i++) write_chunk(fd, buf, sizeof buf);
}
__attribute__((noinline)) void sync_file(int fd) { if (fsync(fd)) exit(3); }
/* argv[1]: the file to write; argv[2], if given: wait for this file to exist first,
   argv[3]: then create this one, and live on a while (to be read from /proc). */
int main(int argc, char **argv) {
    if (argc > 2) while (access(argv[2], F_OK)) usleep(10000);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    dirty_pages(fd);
    sync_file(fd);
    close(fd);
    if (argc > 3) { close(open(argv[3], O_WRONLY | O_CREAT, 0644)); usleep(500000); }
    return 0;
}
"#;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
}

/// An MMAP2 record: pid, address, length, build id (when the record has one), file name.
struct Mmap2 {
    pid: u32,
    addr: u64,
    len: u64,
    build_id: Option<Vec<u8>>,
    name: String,
}

fn mmap2(b: &[u8], misc: u16) -> Mmap2 {
    let name = &b[72..];
    let end = name.iter().position(|&c| c == 0).unwrap();
    Mmap2 {
        pid: u32_at(b, 8),
        addr: u64_at(b, 16),
        len: u64_at(b, 24),
        build_id: (misc & (1 << 14) != 0).then(|| b[44..44 + b[40] as usize].to_vec()),
        name: String::from_utf8_lossy(&name[..end]).into_owned(),
    }
}

#[test]
fn user_stacks_of_a_c_program() {
    if !ready(&["mkfs.ext4", "gcc", "readelf"]) {
        return;
    }
    let _g = lock();
    let lfs = LoopFs::new("ext4", 64);
    let bin_dir = tempfile::Builder::new()
        .prefix("iobcap-us-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let src = bin_dir.path().join("writer.c");
    let prog = bin_dir.path().join("writer");
    std::fs::write(&src, PROGRAM).unwrap();
    let st = Command::new("gcc")
        .args(["-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed");
    let want = readelf_build_id(&prog);

    // One writer started before the recording: it waits for `go`.
    let go = lfs.mnt.join("go");
    let done = lfs.mnt.join("done");
    let mut early = Command::new(&prog)
        .arg(lfs.mnt.join("early.dat"))
        .arg(&go)
        .arg(&done)
        .spawn()
        .unwrap();
    let out = lfs.dir.path().join("trace");
    let script = format!(
        "touch {go}; {prog} {late}; while [ ! -e {done} ]; do sleep 0.05; done; sleep 0.3",
        go = go.display(),
        prog = prog.display(),
        late = lfs.mnt.join("late.dat").display(),
        done = done.display(),
    );
    let t0 = Instant::now();
    let o = record_sh(
        &out,
        &lfs.name,
        &["--user-stacks", "--flush-interval", "100ms"],
        &script,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "record failed: {stderr}");
    assert!(early.wait().unwrap().success());
    eprintln!("recorded in {:?}: {stderr}", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(20));

    let p = parse(&out);
    assert!(p.trace.problems().is_empty(), "{:?}", p.trace.problems());
    let info = &p.trace.metadata().capture_info;
    let key = |k: &str| info.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
    assert_eq!(key("user_stacks"), Some("fp"));
    assert_eq!(
        key("mmap_build_id"),
        Some("yes"),
        "Linux 5.12+ puts build ids in MMAP2"
    );
    assert!(key("user_symbols").is_some_and(|n| n != "0"), "{info:?}");

    // The chunks: MMAP2 records, the program's with its build id.
    let order = p.trace.header().byte_order;
    let mut maps = Vec::new();
    for c in p.trace.chunks() {
        let chunk = p.trace.decompress(c).unwrap();
        for r in chunk.records(order) {
            let r = r.unwrap();
            if r.kind == 10 {
                let misc = u16::from_ne_bytes([r.bytes[4], r.bytes[5]]);
                maps.push(mmap2(r.bytes, misc));
            }
        }
    }
    let prog_s = prog.to_str().unwrap();
    let late: Vec<&Mmap2> = maps.iter().filter(|m| m.name == prog_s).collect();
    assert!(!late.is_empty(), "no MMAP2 record of the program");
    let late_pid = late[0].pid;
    for m in &late {
        // The kernel gives the build id unless it could not read it (then device and inode).
        if let Some(b) = &m.build_id {
            assert_eq!(hex(b), want);
        }
    }
    assert!(late.iter().any(|m| m.build_id.is_some()));

    // Samples with user frames after PERF_CONTEXT_USER, of both writers, in the program.
    let early_pid = early.id();
    let mut user_stacks = 0;
    let mut in_prog = [0usize; 2];
    let early_maps: Vec<_> = p
        .trace
        .user_maps()
        .into_iter()
        .filter(|m| m.pid == early_pid)
        .collect();
    for s in &p.samples {
        let Some(c) = &s.callchain else { continue };
        let Some(at) = c.iter().position(|&ip| ip == CONTEXT_USER) else {
            continue;
        };
        assert_eq!(c[0], (-128i64) as u64, "kernel frames first");
        user_stacks += 1;
        let user = &c[at + 1..];
        assert!(
            user.iter().all(|&ip| ip < 0x8000_0000_0000_0000),
            "{user:x?}"
        );
        let hits = |ranges: &[(u64, u64)]| {
            user.iter()
                .any(|ip| ranges.iter().any(|(a, b)| a <= ip && ip < b))
        };
        if s.pid == late_pid {
            let r: Vec<_> = late.iter().map(|m| (m.addr, m.addr + m.len)).collect();
            in_prog[1] += hits(&r) as usize;
        }
        if s.pid == early_pid {
            let r: Vec<_> = early_maps
                .iter()
                .filter(|m| m.path == prog_s)
                .map(|m| (m.start, m.end))
                .collect();
            in_prog[0] += hits(&r) as usize;
        }
    }
    assert!(user_stacks > 0, "no sample with user frames");
    assert!(
        in_prog[0] > 0 && in_prog[1] > 0,
        "stacks in the program: {in_prog:?}"
    );

    // USER_MAPS: the early writer's mappings, read from /proc, with the program's build id.
    let prog_maps: Vec<_> = early_maps.iter().filter(|m| m.path == prog_s).collect();
    assert!(!prog_maps.is_empty(), "{early_maps:?}");
    let meta = std::fs::metadata(&prog).unwrap();
    for m in &prog_maps {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(hex(&m.build_id), want);
        assert_eq!(m.ino, meta.ino());
        assert!(m.seen_ns >= p.trace.header().start_clock_ns);
    }

    // USER_SYMBOLS: the program's .symtab (its functions' names in .strtab), libc's .dynsym.
    let (syms, problems) = p.trace.user_symbols();
    assert!(problems.is_empty(), "{problems:?}");
    let mine = syms
        .iter()
        .find(|s| hex(&s.build_id) == want)
        .expect("the program's symbols");
    let section = |s: &ioblame_format::UserSymbols, n: &str| {
        s.sections
            .iter()
            .find(|x| x.name == n)
            .map(|x| x.data.clone())
    };
    assert!(section(mine, ".symtab").is_some());
    let strtab = section(mine, ".strtab").expect(".strtab");
    for f in ["dirty_pages", "write_chunk", "sync_file"] {
        assert!(strtab.windows(f.len()).any(|w| w == f.as_bytes()), "{f}");
    }
    assert!(
        mine.loads.iter().any(|l| l.flags & 1 != 0),
        "{:?}",
        mine.loads
    );
    assert!(mine.class64 == cfg!(target_pointer_width = "64"));
    let libc = syms.iter().find(|s| s.path.contains("libc.so"));
    if let Some(l) = libc {
        assert!(section(l, ".dynsym").is_some(), "libc's .dynsym");
    } else {
        eprintln!(
            "note: no libc frame was recorded: {:?}",
            syms.iter().map(|s| &s.path).collect::<Vec<_>>()
        );
    }
}
