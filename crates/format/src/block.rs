//! Blocks: the framing unit of a trace file.
//!
//! After the 16-byte file preamble a trace file is a sequence of blocks, each a 24-byte
//! header followed by its payload. A reader skips kinds it does not know.
// The decoding half serves the reader (feature `reader`); the recorder builds the format
// without it and only encodes.
#![cfg_attr(not(feature = "reader"), allow(dead_code))]

use crate::codec::Enc;

/// File magic: the first 8 bytes of every trace file.
pub const FILE_MAGIC: [u8; 8] = *b"\x89IOBLAM\n";
/// Current major format version. A reader rejects files of a higher major version.
pub const FORMAT_MAJOR: u16 = 1;
/// Current minor format version. Minor versions only add block kinds or trailing fields.
pub const FORMAT_MINOR: u16 = 10;
/// Size of the file preamble: magic, major, minor, reserved.
pub const PREAMBLE_LEN: usize = 16;

/// Magic opening every block header (`"IOBk"`).
pub const BLOCK_MAGIC: [u8; 4] = *b"IOBk";
/// Size of a block header.
pub const BLOCK_HEADER_LEN: usize = 24;
/// Hard cap on a block payload. A header declaring more is corrupt.
pub const MAX_BLOCK_LEN: u32 = 256 << 20;

/// Magic of the footer that closes a cleanly finished file.
pub const FOOTER_MAGIC: [u8; 8] = *b"IOBINDX\n";
/// Size of the footer: magic then the u64 offset of the index block.
pub const FOOTER_LEN: usize = 16;

/// Block kinds. Values below 0x100 are metadata sections.
pub mod kind {
    /// The trace header; the first block of every file.
    pub const HEADER: u16 = 0x01;
    /// Event descriptors.
    pub const EVENTS: u16 = 0x10;
    /// Kernel symbols (compressed kallsyms text).
    pub const KALLSYMS: u16 = 0x11;
    /// Block devices.
    pub const BLOCK_DEVICES: u16 = 0x12;
    /// Mounts.
    pub const MOUNTS: u16 = 0x13;
    /// Tasks alive at start.
    pub const TASKS: u16 = 0x14;
    /// Capture facts (key/value strings).
    pub const CAPTURE_INFO: u16 = 0x15;
    /// Paths of inodes of the recorded filesystems (format 1.1).
    pub const FILES: u16 = 0x16;
    /// Kernel symbols, the text in parts compressed apart (format 1.2; recorders of 1.2
    /// write it instead of [`KALLSYMS`]).
    pub const KALLSYMS_PARTS: u16 = 0x17;
    /// Cgroup id -> path table of the cgroup2 hierarchy (format 1.3).
    pub const CGROUPS: u16 = 0x18;
    /// Paths of inodes, sorted by (dev, inode) in groups compressed apart behind an index, with
    /// the files the trace refers to that have no path (format 1.5; recorders of 1.5 write it
    /// instead of [`FILES`]).
    pub const FILE_INDEX: u16 = 0x19;
    /// How far the records are written (format 1.6): a `u64` time of the trace's clock; every
    /// record of every recorded CPU with an earlier timestamp is in a chunk written before
    /// the block, in its file or an earlier file of the ring. Written again and again while
    /// recording; the last valid one of a file wins.
    pub const FLUSHED: u16 = 0x1A;
    /// The loop devices over files, each with its backing file and offset (format 1.7).
    /// In every file's metadata when there is one, and appended again when the recorder
    /// finds one set up while recording: each list holds every mapping seen so far, and the
    /// last valid one of a file wins.
    pub const LOOPS: u16 = 0x1B;
    /// The device-mapper targets that map sectors one to one onto a lower device (`linear`,
    /// `crypt`), format 1.7: like [`LOOPS`], in every file's metadata when there is one and
    /// appended again when the recorder finds one set up while recording.
    pub const DM_TARGETS: u16 = 0x1C;
    /// The executable mappings of processes whose user stacks were recorded (format 1.8):
    /// like [`LOOPS`], in every file's metadata when there are some and appended again when
    /// the recorder reads more; the last valid one of a file wins.
    pub const USER_MAPS: u16 = 0x1D;
    /// The symbol tables of one ELF file a user stack went through (format 1.8), one block
    /// per file, appended when the recording stops. Read on demand
    /// ([`crate::Trace::user_symbols`]), not with the metadata.
    pub const USER_SYMBOLS: u16 = 0x1E;
    /// A JIT's symbol map of one process, `/tmp/perf-PID.map` (format 1.8), one block per
    /// process, appended when the recording stops. Read on demand
    /// ([`crate::Trace::perf_maps`]).
    pub const PERF_MAPS: u16 = 0x1F;
    /// The btrfs filesystems, each with its devices and chunk map (format 1.9): like
    /// [`LOOPS`], in every file's metadata when there is one and appended again when the
    /// recorder finds a chunk allocated while recording; the last valid one of a file wins.
    pub const BTRFS: u16 = 0x20;
    /// A chunk of perf records of one CPU.
    pub const CHUNK: u16 = 0x100;
    /// The chunk index written when a file is closed.
    pub const INDEX: u16 = 0x200;
}

/// A parsed block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Block kind (see [`kind`]).
    pub kind: u16,
    /// Kind-specific flags.
    pub flags: u16,
    /// Payload length in bytes.
    pub len: u32,
    /// CRC-32 (IEEE) of the payload.
    pub payload_crc: u32,
}

/// Why a block header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderFault {
    Short,
    Magic,
    Crc,
    TooLong(u32),
}

impl BlockHeader {
    pub(crate) fn parse(b: &[u8]) -> Result<BlockHeader, HeaderFault> {
        let Some(h) = b.get(..BLOCK_HEADER_LEN) else {
            return Err(HeaderFault::Short);
        };
        if h[..4] != BLOCK_MAGIC {
            return Err(HeaderFault::Magic);
        }
        let crc = u32::from_le_bytes(h[20..24].try_into().unwrap_or_default());
        if crc32fast::hash(&h[..20]) != crc {
            return Err(HeaderFault::Crc);
        }
        let len = u32::from_le_bytes(h[8..12].try_into().unwrap_or_default());
        if len > MAX_BLOCK_LEN {
            return Err(HeaderFault::TooLong(len));
        }
        Ok(BlockHeader {
            kind: u16::from_le_bytes([h[4], h[5]]),
            flags: u16::from_le_bytes([h[6], h[7]]),
            len,
            payload_crc: u32::from_le_bytes(h[12..16].try_into().unwrap_or_default()),
        })
    }
}

/// Encodes a whole block (header and payload). Exposed for tools and tests that build files
/// by hand, e.g. with block kinds of a newer format version.
pub fn encode_block(kind: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
    let mut e = Enc::default();
    e.buf.reserve(BLOCK_HEADER_LEN + payload.len());
    e.bytes(&BLOCK_MAGIC)
        .u16(kind)
        .u16(flags)
        .u32(payload.len() as u32)
        .u32(crc32fast::hash(payload))
        .u32(0);
    let crc = crc32fast::hash(&e.buf[..20]);
    e.u32(crc);
    e.bytes(payload);
    e.buf
}

/// Encodes the file preamble.
pub fn preamble() -> [u8; PREAMBLE_LEN] {
    let mut p = [0u8; PREAMBLE_LEN];
    p[..8].copy_from_slice(&FILE_MAGIC);
    p[8..10].copy_from_slice(&FORMAT_MAJOR.to_le_bytes());
    p[10..12].copy_from_slice(&FORMAT_MINOR.to_le_bytes());
    p
}
