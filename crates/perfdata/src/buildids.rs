//! perf's build-id table (`HEADER_BUILD_ID`) and the user mappings of a recording with user
//! stacks.
//!
//! At the end of `perf record` (without `--buildid-mmap`, which implies `--no-buildid`), perf
//! writes the build ids of the files samples hit (of every file mapped with
//! `--buildid-all`) into the `HEADER_BUILD_ID` feature section: one `build_id_event` per file,
//! `{ perf_event_header; i32 pid; u8 build_id[24]; char filename[]; }`, the pid being the
//! machine's (-1 for the host), `misc` the file's CPU mode and, with
//! `PERF_RECORD_MISC_BUILD_ID_SIZE`, the id's length in `build_id[20]`. The converter gives
//! the MMAP2 records that carry a device and inode instead of a build id the build id this
//! table lists for their path, so that the attribution sees the mapping as if the kernel
//! had read the build id itself (`perf record --buildid-mmap`).

use std::collections::HashMap;

use ioblame_format::ByteOrder;
use ioblame_perfrec::{MISC_BUILD_ID_SIZE, MISC_CPUMODE_MASK, MISC_USER};

/// The bytes of a `build_id_event` before its file name.
const BEFORE_NAME: usize = 8 + 4 + 24;
/// The build ids of the host's user-space files, by path, from a `HEADER_BUILD_ID` section
/// in byte order `order`. Entries of the kernel, its modules and guests are left out; the
/// walk stops at the first entry that does not fit (a damaged section gives what precedes).
pub(crate) fn user_build_ids(order: ByteOrder, s: &[u8]) -> HashMap<Vec<u8>, Vec<u8>> {
    let mut out = HashMap::new();
    let mut at = 0usize;
    while let Some(h) = s.get(at..at + 8) {
        let misc = order.u16([h[4], h[5]]);
        let size = usize::from(order.u16([h[6], h[7]]));
        let Some(e) = s.get(at..at + size).filter(|_| size >= BEFORE_NAME) else {
            break;
        };
        at += size;
        let pid = order.u32_at(e, 8).unwrap_or(0);
        if misc & MISC_CPUMODE_MASK != MISC_USER || pid != u32::MAX {
            continue;
        }
        let id = &e[12..32];
        let len = if misc & MISC_BUILD_ID_SIZE != 0 {
            usize::from(e[32]).min(20)
        } else {
            // Older perf wrote no length: trailing groups of four zero bytes are padding.
            let mut n = 20;
            while n > 0 && id[n - 4..n].iter().all(|&b| b == 0) {
                n -= 4;
            }
            n
        };
        let name = &e[BEFORE_NAME..];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if len > 0 && !name.is_empty() {
            out.insert(name.to_vec(), id[..len].to_vec());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(order: ByteOrder, misc: u16, pid: i32, id: &[u8], name: &str, sized: bool) -> Vec<u8> {
        let mut name = name.as_bytes().to_vec();
        name.push(0);
        name.resize(name.len().next_multiple_of(8), 0);
        let mut b = order.put32(67).to_vec();
        let misc = misc | if sized { MISC_BUILD_ID_SIZE } else { 0 };
        b.extend(order.put16(misc));
        b.extend(order.put16((BEFORE_NAME + name.len()) as u16));
        b.extend(order.put32(pid as u32));
        let mut bid = [0u8; 24];
        bid[..id.len()].copy_from_slice(id);
        if sized {
            bid[20] = id.len() as u8;
        }
        b.extend(bid);
        b.extend(name);
        b
    }

    #[test]
    fn the_hosts_user_files_by_path() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut s = entry(order, 1, -1, &[9; 20], "[kernel.kallsyms]", true);
            s.extend(entry(order, 2, -1, &[1; 20], "/usr/bin/app", true));
            // An id of 16 bytes, sized or not (its last four bytes then zero padding).
            s.extend(entry(order, 2, -1, &[2; 16], "/lib/a.so", true));
            s.extend(entry(order, 2, -1, &[3; 16], "/lib/b.so", false));
            // A guest's file.
            s.extend(entry(order, 2, 1234, &[4; 20], "/usr/bin/guest", true));
            s.extend(entry(order, 2, -1, &[5; 20], "[vdso]", true));
            // A damaged last entry: the walk stops there.
            let mut bad = entry(order, 2, -1, &[6; 20], "/bin/x", true);
            bad[6..8].copy_from_slice(&order.put16(4000));
            s.extend(bad);
            let t = user_build_ids(order, &s);
            let get = |p: &str| t.get(p.as_bytes()).cloned();
            assert_eq!(t.len(), 4);
            assert_eq!(get("/usr/bin/app"), Some(vec![1; 20]));
            assert_eq!(get("/lib/a.so"), Some(vec![2; 16]));
            assert_eq!(get("/lib/b.so"), Some(vec![3; 16]));
            assert_eq!(get("[vdso]"), Some(vec![5; 20]));
            assert_eq!(get("[kernel.kallsyms]"), None);
        }
        assert!(user_build_ids(ByteOrder::Little, &[1, 2, 3]).is_empty());
    }
}
