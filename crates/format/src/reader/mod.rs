//! The reader: memory-maps trace files, finds their chunks (through the index or by scanning),
//! reports damage, and hands out decompressed chunks. `file`: one ring file, its blocks and
//! their damage, its metadata decoded on demand, its chunks decompressed; `trace`: the files
//! of a ring together (the gaps between them, the tables merged across them); `paths`: the
//! lookups of inodes' paths in the FILES and FILE_INDEX tables of a trace.

mod file;
mod paths;
mod trace;

pub use file::{Chunk, Problem, TraceFile};
pub use paths::{FileName, PathTable, PathsSummary};
pub use trace::{ChunkRef, Trace};
