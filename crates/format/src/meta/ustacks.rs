//! The user-stack tables (format 1.8, `record --user-stacks`): the executable mappings the
//! recorder read (USER_MAPS), the symbol tables of the ELF files the stacks went through
//! (USER_SYMBOLS) and the JIT symbol maps (PERF_MAPS).

use crate::codec::{zstd_frame, Dec, Enc, INITIAL_CAPACITY, MAX_METADATA_RATIO};
use crate::error::DecodeError;

/// An executable mapping of a process the recorder read from `/proc/PID/maps` (USER_MAPS
/// block, format 1.8), for a process that mapped it before the recording's own MMAP2
/// records could tell: `[start, end)` of process `pid` maps the file from byte `pgoff` on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserMap {
    /// The process (thread group) id.
    pub pid: u32,
    /// First address of the mapping.
    pub start: u64,
    /// First address after it.
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// The file's device (`st_dev`): major.
    pub dev_major: u32,
    /// Its minor.
    pub dev_minor: u32,
    /// The file's inode number.
    pub ino: u64,
    /// The ELF build id of the file (its `NT_GNU_BUILD_ID` note), empty when unknown.
    pub build_id: Vec<u8>,
    /// When the recorder read it (trace clock, ns): the mapping held then, and from before.
    pub seen_ns: u64,
    /// The file's path as the process saw it (`[vdso]` and the like for special mappings).
    pub path: String,
}

/// Most entries a USER_MAPS block may hold.
pub const MAX_USER_MAPS: usize = 1 << 20;

/// A USER_MAPS payload (format 1.8): a count, then each mapping as a length-prefixed entry.
pub(crate) fn encode_user_maps(v: &[UserMap]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for m in v {
        let mut x = Enc::default();
        x.u32(m.pid)
            .u64(m.start)
            .u64(m.end)
            .u64(m.pgoff)
            .u32(m.dev_major)
            .u32(m.dev_minor)
            .u64(m.ino)
            .u64(m.seen_ns)
            .u32(m.build_id.len() as u32)
            .bytes(&m.build_id)
            .str(&m.path);
        e.u32(x.buf.len() as u32).bytes(&x.buf);
    }
    e.buf
}

/// Decodes a USER_MAPS payload; bytes after the known fields of an entry are skipped.
pub(crate) fn decode_user_maps(b: &[u8]) -> Result<Vec<UserMap>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(4 + 56, "user map count")?;
    if n > MAX_USER_MAPS {
        return Err(DecodeError::new(
            0,
            format!("{n} user mappings: more than {MAX_USER_MAPS}"),
        ));
    }
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let len = d.u32("user map entry length")? as usize;
        let at = d.pos();
        let entry = d.take(len, "user map entry")?;
        let mut x = Dec::new(entry);
        let rel = |e: DecodeError| DecodeError::new(at + e.at, e.what);
        let mut one = || -> Result<UserMap, DecodeError> {
            let pid = x.u32("map pid")?;
            let start = x.u64("map start")?;
            let end = x.u64("map end")?;
            let pgoff = x.u64("map offset")?;
            let dev_major = x.u32("map device major")?;
            let dev_minor = x.u32("map device minor")?;
            let ino = x.u64("map inode")?;
            let seen_ns = x.u64("map time")?;
            let n = x.u32("build id length")? as usize;
            if n > MAX_BUILD_ID {
                return Err(DecodeError::new(x.pos(), format!("build id of {n} bytes")));
            }
            let build_id = x.take(n, "build id")?.to_vec();
            Ok(UserMap {
                pid,
                start,
                end,
                pgoff,
                dev_major,
                dev_minor,
                ino,
                build_id,
                seen_ns,
                path: x.str("map path")?,
            })
        };
        v.push(one().map_err(rel)?);
    }
    Ok(v)
}

/// Longest build id accepted (GNU ld writes 20 bytes, some linkers 16 or 8; 64 is a bound).
pub const MAX_BUILD_ID: usize = 64;

/// A loadable segment of an ELF file (`PT_LOAD`): how file offsets become the addresses its
/// symbols are given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ElfLoad {
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_flags` (`PF_X` = 1).
    pub flags: u32,
}

/// The unwind tables a USER_SYMBOLS block holds with `record --user-stacks dwarf` (format
/// 1.10), when the file has them: call frame information, its index, and the debug kind.
pub const UNWIND_SECTIONS: [&str; 3] = [".eh_frame", ".eh_frame_hdr", ".debug_frame"];

/// One section copied from an ELF file, as its bytes are on disk.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct ElfSection {
    /// Its name: `.symtab`, `.strtab`, `.dynsym`, `.dynstr` or `.gnu_debugdata`; with
    /// `record --user-stacks dwarf` (format 1.10) also the unwind tables `.eh_frame`,
    /// `.eh_frame_hdr` and `.debug_frame`.
    pub name: String,
    /// Its address (`sh_addr`: the unwind tables' pointers are relative to it; format 1.10,
    /// 0 before).
    pub addr: u64,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// The symbol tables of one ELF file a recorded user stack went through (USER_SYMBOLS block,
/// format 1.8, one per file, written when the recording stops): what a symbolizer on
/// another machine needs of the file, named by build id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserSymbols {
    /// The file's build id.
    pub build_id: Vec<u8>,
    /// Its path on the recording host.
    pub path: String,
    /// ELFCLASS64 (otherwise 32-bit).
    pub class64: bool,
    /// Big-endian (ELFDATA2MSB).
    pub big_endian: bool,
    /// `e_machine`.
    pub machine: u16,
    /// The file's `PT_LOAD` segments.
    pub loads: Vec<ElfLoad>,
    /// The sections copied: the symbol tables with their string tables, and
    /// `.gnu_debugdata` (an xz-compressed ELF file with more symbols) when the file has one.
    pub sections: Vec<ElfSection>,
}

/// Most uncompressed bytes the USER_SYMBOLS blocks of a trace may hold together (the
/// reader skips the blocks beyond, as damage): what an untrusted trace can make an analysis
/// hold. The recorder writes 256 MiB by default (`--user-symbols-max`).
pub const MAX_USER_SYMBOLS_TOTAL: u64 = 2 << 30;

/// Most uncompressed bytes the PERF_MAPS blocks of a trace may hold together.
pub const MAX_PERF_MAPS_TOTAL: u64 = 512 << 20;

/// Most uncompressed bytes one USER_SYMBOLS block may hold.
pub const MAX_USER_SYMBOLS: usize = 1 << 30;

/// Most sections and segments a USER_SYMBOLS block may list.
const MAX_ELF_PARTS: usize = 256;

/// A USER_SYMBOLS payload (format 1.8): flags, the uncompressed length, then one zstd frame
/// of the build id, path, machine, segments and sections.
pub(crate) fn encode_user_symbols(s: &UserSymbols) -> Vec<u8> {
    let mut raw = Enc::default();
    raw.u32(s.build_id.len() as u32)
        .bytes(&s.build_id)
        .str(&s.path)
        .u16(s.machine)
        .u32(s.loads.len() as u32);
    for l in &s.loads {
        raw.u64(l.offset).u64(l.vaddr).u64(l.filesz).u32(l.flags);
    }
    raw.u32(s.sections.len() as u32);
    for x in &s.sections {
        raw.str(&x.name).u32(x.data.len() as u32).bytes(&x.data);
    }
    // Format 1.10: the sections' addresses, after them.
    for x in &s.sections {
        raw.u64(x.addr);
    }
    let z = zstd::bulk::compress(&raw.buf, 3).unwrap_or_default();
    let mut e = Enc::default();
    e.u32(u32::from(s.class64) | u32::from(s.big_endian) << 1)
        .u32(raw.buf.len() as u32)
        .bytes(&z);
    e.buf
}

/// Decodes a USER_SYMBOLS payload.
pub(crate) fn decode_user_symbols(b: &[u8]) -> Result<UserSymbols, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("symbols flags")?;
    let len = d.u32("symbols length")? as usize;
    let z = d.take(d.remaining(), "symbols")?;
    let raw = zstd_frame(z, len, MAX_USER_SYMBOLS, Some(MAX_METADATA_RATIO))
        .map_err(|e| DecodeError::new(8, format!("symbols: {e}")))?;
    let rel = |e: DecodeError| DecodeError::new(8, format!("symbols at {}: {}", e.at, e.what));
    let mut x = Dec::new(&raw);
    let mut one = || -> Result<UserSymbols, DecodeError> {
        let n = x.u32("build id length")? as usize;
        if n > MAX_BUILD_ID {
            return Err(DecodeError::new(x.pos(), format!("build id of {n} bytes")));
        }
        let build_id = x.take(n, "build id")?.to_vec();
        let path = x.str("module path")?;
        let machine = x.u16("machine")?;
        let nl = x.count(28, "segment count")?;
        if nl > MAX_ELF_PARTS {
            return Err(DecodeError::new(x.pos(), format!("{nl} segments")));
        }
        let mut loads = Vec::with_capacity(nl);
        for _ in 0..nl {
            loads.push(ElfLoad {
                offset: x.u64("segment offset")?,
                vaddr: x.u64("segment address")?,
                filesz: x.u64("segment size")?,
                flags: x.u32("segment flags")?,
            });
        }
        let ns = x.count(8, "section count")?;
        if ns > MAX_ELF_PARTS {
            return Err(DecodeError::new(x.pos(), format!("{ns} sections")));
        }
        let mut sections = Vec::with_capacity(ns);
        for _ in 0..ns {
            let name = x.str("section name")?;
            let n = x.u32("section length")? as usize;
            let data = x.take(n, "section")?.to_vec();
            sections.push(ElfSection {
                name,
                addr: 0,
                data,
            });
        }
        // Before 1.10 the entry ends here.
        if x.remaining() >= sections.len() * 8 {
            for s in &mut sections {
                s.addr = x.u64("section address")?;
            }
        }
        Ok(UserSymbols {
            build_id,
            path,
            class64: flags & 1 != 0,
            big_endian: flags & 2 != 0,
            machine,
            loads,
            sections,
        })
    };
    one().map_err(rel)
}

/// A build id as lowercase hex.
pub fn build_id_hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// A JIT's symbol map of one process (`/tmp/perf-PID.map`, the perf convention: one
/// `START SIZE NAME` line per function, addresses in hex), copied by the recorder for a
/// process whose user frames fell in anonymous executable memory (PERF_MAPS block, format
/// 1.8).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct PerfMap {
    /// The process (its pid as the recording host's root namespace sees it).
    pub pid: u32,
    /// The map's text.
    pub text: String,
}

/// Longest perf map text a PERF_MAPS block may hold.
pub const MAX_PERF_MAP: usize = 256 << 20;

/// A PERF_MAPS payload (format 1.8): the pid, the text's length, then the text as one zstd
/// frame.
pub(crate) fn encode_perf_map(m: &PerfMap) -> Vec<u8> {
    let z = zstd::bulk::compress(m.text.as_bytes(), 3).unwrap_or_default();
    let mut e = Enc::default();
    e.u32(m.pid).u32(m.text.len() as u32).bytes(&z);
    e.buf
}

/// Decodes a PERF_MAPS payload.
pub(crate) fn decode_perf_map(b: &[u8]) -> Result<PerfMap, DecodeError> {
    let mut d = Dec::new(b);
    let pid = d.u32("perf map pid")?;
    let len = d.u32("perf map length")? as usize;
    let z = d.take(d.remaining(), "perf map")?;
    let raw = zstd_frame(z, len, MAX_PERF_MAP, Some(MAX_METADATA_RATIO))
        .map_err(|e| DecodeError::new(8, format!("perf map: {e}")))?;
    let text = String::from_utf8(raw).map_err(|_| DecodeError::new(8, "perf map: not UTF-8"))?;
    Ok(PerfMap { pid, text })
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    fn a_map() -> UserMap {
        UserMap {
            pid: 42,
            start: 0x5555_0000,
            end: 0x5556_0000,
            pgoff: 0x1000,
            dev_major: 259,
            dev_minor: 2,
            ino: 77,
            build_id: vec![0xab; 20],
            seen_ns: 1000,
            path: "/usr/bin/postgres".into(),
        }
    }

    fn symbols() -> UserSymbols {
        UserSymbols {
            build_id: vec![0xab; 20],
            path: "/usr/bin/postgres".into(),
            class64: true,
            big_endian: false,
            machine: 62,
            loads: vec![ElfLoad {
                offset: 0x1000,
                vaddr: 0x401000,
                filesz: 0x2000,
                flags: 5,
            }],
            sections: vec![ElfSection {
                name: ".symtab".into(),
                addr: 0x2000,
                data: vec![1, 2, 3],
            }],
        }
    }

    #[test]
    fn user_stack_tables_round_trip() {
        let maps = vec![a_map(), UserMap::default()];
        assert_eq!(decode_user_maps(&encode_user_maps(&maps)).unwrap(), maps);
        let s = symbols();
        assert_eq!(decode_user_symbols(&encode_user_symbols(&s)).unwrap(), s);
        let m = PerfMap {
            pid: 9,
            text: "7f00 10 jitted_fn\n".into(),
        };
        assert_eq!(decode_perf_map(&encode_perf_map(&m)).unwrap(), m);
        assert_eq!(build_id_hex(&[0x01, 0xab]), "01ab");
    }

    #[test]
    fn overlong_build_ids_are_errors() {
        let long = vec![1; MAX_BUILD_ID + 1];
        let maps = [UserMap {
            build_id: long.clone(),
            ..a_map()
        }];
        let e = decode_user_maps(&encode_user_maps(&maps)).unwrap_err();
        assert!(e.what.contains("build id of 65 bytes"), "{}", e.what);
        let s = UserSymbols {
            build_id: long,
            ..symbols()
        };
        let e = decode_user_symbols(&encode_user_symbols(&s)).unwrap_err();
        assert!(e.what.contains("build id of 65 bytes"), "{}", e.what);
    }

    #[test]
    fn a_declared_length_its_frame_does_not_hold_is_an_error() {
        let mut b = encode_perf_map(&PerfMap {
            pid: 1,
            text: "x".repeat(100),
        });
        b[4..8].copy_from_slice(&101u32.to_le_bytes());
        assert!(decode_perf_map(&b).is_err());
        let mut b = encode_user_symbols(&symbols());
        b[4..8].copy_from_slice(&(MAX_USER_SYMBOLS as u32 + 1).to_le_bytes());
        assert!(decode_user_symbols(&b).is_err());
    }
}
