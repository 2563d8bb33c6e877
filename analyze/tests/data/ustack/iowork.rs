//! The Rust workload of the user-stack tests (analyze/tests/ustack_live.rs): each phase is a
//! function of its own name, so the act it causes must be named after it. Built with
//! `rustc -C force-frame-pointers=yes`.
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;

extern "C" {
    fn posix_fadvise(fd: i32, offset: i64, len: i64, advice: i32) -> i32;
}

const CHUNK: usize = 65536;

#[inline(never)]
fn wal_append(path: &str, kib: usize) {
    let mut f = File::create(path).unwrap();
    let buf = vec![b'x'; CHUNK];
    for _ in 0..kib * 1024 / CHUNK {
        f.write_all(&buf).unwrap();
    }
}

#[inline(never)]
fn checkpoint(path: &str, kib: usize) {
    let mut f = File::create(path).unwrap();
    let buf = vec![b'y'; CHUNK];
    for _ in 0..kib * 1024 / CHUNK {
        f.write_all(&buf).unwrap();
    }
    f.sync_all().unwrap();
}

#[inline(never)]
fn scan_table(path: &str) {
    let mut f = File::open(path).unwrap();
    // SAFETY: a plain call on an open descriptor; POSIX_FADV_DONTNEED is 4.
    unsafe { posix_fadvise(f.as_raw_fd(), 0, 0, 4) };
    let mut buf = vec![0u8; CHUNK];
    while f.read(&mut buf).unwrap() > 0 {}
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let kib = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(0);
    match a.get(1).map(String::as_str) {
        Some("wal") => wal_append(&a[2], kib),
        Some("ckpt") => checkpoint(&a[2], kib),
        Some("scan") => scan_table(&a[2]),
        _ => std::process::exit(1),
    }
}
