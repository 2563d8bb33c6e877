//! Hand-built attribution objects for the tests.
#![allow(dead_code)]

use ioblame_attrib::{Act, ActId, Dir, FileKey, Intent, IntentId, Io, Role, RoleId, Via, WbReason};
use ioblame_decode::Rwbs;

/// Kernel encoding of MAJ:MIN.
pub fn kdev(major: u32, minor: u32) -> u32 {
    (major << 20) | minor
}

/// A plain IO: 4096-byte read on 8:16, act 0, everything else zero.
pub fn io() -> Io {
    Io {
        dev: kdev(8, 16),
        sector: 0,
        size: 4096,
        dir: Dir::R,
        rwbs: Rwbs::parse("R"),
        queue_time: 0,
        issue_time: 0,
        complete_time: 0,
        wait_time: 0,
        io_time: 0,
        offset: 0,
        seek_dist: 0,
        issuer: RoleId(0),
        act: ActId(0),
        via: Via::Read,
        reason: None,
        ino: None,
        file_offset: None,
        split: false,
        journal_txn: None,
        journal_share: None,
        in_lost_window: false,
        lower: false,
    }
}

/// An IO of direction `dir` with `size` bytes at scaled `offset`, charged to `act`.
pub fn io_at(act: u32, dir: Dir, size: u64, offset: u32) -> Io {
    Io {
        act: ActId(act),
        dir,
        size,
        offset,
        rwbs: Rwbs::parse(match dir {
            Dir::R => "R",
            Dir::A => "RA",
            Dir::W => "W",
        }),
        ..io()
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
