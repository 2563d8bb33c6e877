//! Hand-built attribution objects for the tests.
#![allow(dead_code)]

use ioblame_attrib::{Act, ActId, Dir, FileKey, Intent, IntentId, Io, Role, RoleId, Via, WbReason};

/// Kernel encoding of MAJ:MIN.
pub fn kdev(major: u32, minor: u32) -> u32 {
    (major << 20) | minor
}

/// A plain IO: 4096-byte read on 8:16, act 0, everything else zero.
pub fn io() -> Io {
    Io::new(kdev(8, 16), Dir::R, 4096, ActId(0))
}

/// An IO of direction `dir` with `size` bytes at scaled `offset`, charged to `act` (on 8:16,
/// its via `read` whatever its direction).
pub fn io_at(act: u32, dir: Dir, size: u64, offset: u32) -> Io {
    Io {
        offset,
        via: Via::Read,
        ..Io::new(kdev(8, 16), dir, size, ActId(act))
    }
}

/// A role.
pub fn role(pid: u32, comm: &str) -> Role {
    Role {
        pid,
        tid: pid,
        comm: comm.to_string(),
        generation: 0,
        cgroup: 0,
        lineage: false,
    }
}

/// An act.
pub fn act(role: u32, intent: u32, dev: u32, ino: u64, via: Via) -> Act {
    Act {
        role: RoleId(role),
        intent: IntentId(intent),
        file: FileKey { dev, ino },
        via,
        reason: None,
        issuer: None,
        recorder: false,
    }
}

/// An intent with a fake stack.
pub fn intent(modifier: u32) -> Intent {
    Intent {
        modifier,
        stack: vec![0xffff_ffff_8100_0000],
        user: Vec::new(),
    }
}

/// A writeback reason.
pub fn reason(r: u32) -> Option<WbReason> {
    Some(WbReason(r))
}
