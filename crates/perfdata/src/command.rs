//! The `perf record` command line that records what the attribution needs: the recorder's
//! default event set and filters (`ioblame-tracepoints`), spelled for stock perf.

use std::path::{Path, PathBuf};

use ioblame_tracepoints::{self as tp, FilterDev, Stacks, Tracepoint, UserStacks};

use crate::PerfDataError;

/// Quotes `s` for a POSIX shell when needed.
pub(crate) fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"_-.,:/=@%+".contains(&c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The per-event term that gives an event a callchain without `-g` (which would give every
/// event one). perf 6.1 accepts it on tracepoints: `-e 'block:block_bio_queue/call-graph=fp/'`
/// records `PERF_SAMPLE_CALLCHAIN` for that event only, and `--kernel-callchains` then sets
/// `exclude_callchain_user` on it; without that option (`--user-stacks`) the kernel walks on
/// into user space by frame pointers, after `PERF_CONTEXT_USER`.
pub(crate) const CALLCHAIN_TERM: &str = "/call-graph=fp/";

/// What the `perf record` line records besides the default events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandOptions {
    /// Which stack events get a callchain, as the recorder's `--stacks`.
    pub stacks: Stacks,
    /// User-space stacks too, as `ioblame-capture record --user-stacks`: the stack events'
    /// callchains go on into user space (no `--kernel-callchains`), and the MMAP2 records
    /// perf makes of every executable mapping (those of the processes alive at start
    /// synthesized from `/proc`) carry the files' build ids (`--buildid-mmap`, Linux and
    /// perf 5.12 or later; perf then writes no build-id table at the end). With
    /// [`UserStacks::Dwarf`], a copy of the user stack with each stack event, unwound offline
    /// (`--call-graph dwarf`) instead of the kernel's walk.
    pub user_stacks: Option<UserStacks>,
}

/// Builds the command line from the events that exist here and the devices to filter on.
/// Only the events whose stack is an intent ([`Tracepoint::callchain`]) get a kernel-only
/// callchain, and of those only the ones `stacks` records with one (with
/// [`Stacks::Exact`], not `block_dirty_buffer`). `--all-cgroups` records each sample's cgroup2 id (`PERF_SAMPLE_CGROUP`) and a
/// CGROUP record (id and path) per cgroup, alive at start or created while recording
/// (Linux and perf 5.7 or later; older ones refuse the option). With `opts.user_stacks`
/// the callchains are kernel and user (no `--kernel-callchains`) and `--buildid-mmap` puts
/// build ids in the MMAP2 records (perf records MMAP2 records of executable mappings on
/// its tracking event by default). On a kernel whose MMAP2 records carry no build ids
/// (`mmap_build_id` false: before Linux 5.12) perf refuses `--buildid-mmap`; the line has
/// `--buildid-all` instead, which lists every mapped file's build id in perf's table at the
/// end of the recording (the reader takes them from there).
pub(crate) fn build_command(
    events: &[Tracepoint],
    devs: &[FilterDev],
    opts: CommandOptions,
    mmap_build_id: bool,
) -> String {
    let mut args: Vec<String> = ["perf", "record", "-a", "--all-cgroups"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if opts.user_stacks.is_some() && mmap_build_id {
        args.push("--buildid-mmap".into());
    } else if opts.user_stacks.is_some() {
        args.push("--buildid-all".into());
    } else {
        args.push("--kernel-callchains".into());
    }
    args.extend(["-m".into(), "16M".into()]);
    for t in events {
        args.push("-e".into());
        let term = if !(t.callchain && opts.stacks.callchain(&t.name)) {
            String::new()
        } else if let Some(UserStacks::Dwarf(size)) = opts.user_stacks {
            // perf's DWARF mode: a copy of the stack and the user registers, and
            // `exclude_callchain_user` (the kernel walks no user frame).
            format!("/call-graph=dwarf,stack-size={size}/")
        } else {
            CALLCHAIN_TERM.to_string()
        };
        args.push(format!("{}{term}", t.name));
        let f = tp::plan_filter(t, devs, events);
        if !f.is_empty() {
            args.push("--filter".into());
            args.push(f);
        }
    }
    for a in ["-o", "perf.data", "--"] {
        args.push(a.into());
    }
    let mut line: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
    line.push("COMMAND".into());
    line.join(" ")
}

/// The exact `perf record` command line recording what the attribution needs on the running
/// kernel, with notes on events this kernel lacks or has under an older name. The events are
/// `ioblame-capture`'s default set as found in tracefs, which must be mounted (this only
/// reads: `ioblame-capture` mounts it when needed); `devices` (`sda`, `loop0`, `/dev/loop0`,
/// `MAJ:MIN`, resolved against `/sys/class/block`) restrict every event that has a `dev`,
/// `s_dev` or bdi `name` field with the same in-kernel filters the recorder sets. The line
/// ends with `-o perf.data -- COMMAND`, `COMMAND` being a placeholder for the workload.
/// `stacks` chooses the events with a callchain, as the recorder's `--stacks` does.
///
/// `--stacks sampled:N` has no stock perf line: perf takes no per-event sample period on a
/// tracepoint (perf 6.1's tracepoint terms are `call-graph` and `stack-size` only), and a
/// global `-c N` would drop events, not only stacks. It is an error that says so.
pub fn perf_command_with_notes(
    devices: &[String],
    stacks: Stacks,
) -> Result<(String, Vec<String>), PerfDataError> {
    let opts = CommandOptions {
        stacks,
        user_stacks: None,
    };
    perf_command_for(devices, opts)
}

/// [`perf_command_with_notes`] with `opts`: `--user-stacks` as well. User stacks with
/// `--stacks none` (no event with a callchain) are an error: nothing would record them.
pub fn perf_command_for(
    devices: &[String],
    opts: CommandOptions,
) -> Result<(String, Vec<String>), PerfDataError> {
    let stacks = opts.stacks;
    if opts.user_stacks.is_some() && stacks == Stacks::None {
        return Err(tp::Error::System(
            "--user-stacks with --stacks none: no event would carry a stack; use --stacks \
             exact (the default) or all"
                .into(),
        )
        .into());
    }
    if let Stacks::Sampled(_) = stacks {
        return Err(tp::Error::System(
            "--stacks sampled:N has no perf line: perf takes no per-event sample period on \
             tracepoints (only call-graph and stack-size terms), and a global -c would drop \
             events, not only stacks; record with `ioblame-capture record --stacks sampled:N`, \
             or print the line for --stacks exact (the default), all or none"
                .into(),
        )
        .into());
    }
    let mut devs = if devices.is_empty() {
        Vec::new()
    } else {
        tp::resolve_devices(&devices.join(","), &tp::block_devices_at(Path::new("/sys")))?
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let tfs = tp::find_tracefs(&mountinfo)?.ok_or_else(|| {
        tp::Error::System(format!(
            "tracefs is not mounted; `mount -t tracefs nodev {}`",
            tp::TRACEFS_PATHS[0]
        ))
    })?;
    let names = tp::set_names("default")?;
    let (events, mut notes) = tp::resolve(&tfs, &names, false)?;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mmap_build_id = mmap_build_ids(release.trim());
    if opts.user_stacks.is_some() && !mmap_build_id {
        notes.push(format!(
            "this kernel ({}) puts no build ids in MMAP2 records (Linux 5.12 and later do): \
             the line has --buildid-all, so perf lists every mapped file's build id in its \
             table at the end of the recording; record into a file, not a pipe (-o -), which \
             gets no table",
            release.trim()
        ));
    }
    let btrfs = btrfs_on(host_btrfs(&mountinfo, Path::new("/sys")), &devs);
    notes.extend(btrfs_note(&btrfs));
    // Their writeback events name their bdi `btrfs-N`, their page-cache events their
    // superblock's device, neither a device of the list (as the recorder's
    // `FilterDev::btrfs`).
    if !devs.is_empty() {
        devs.extend(
            btrfs
                .iter()
                .map(|b| FilterDev::btrfs(b.sb.0, b.sb.1, b.bdi_seq)),
        );
    }
    Ok((build_command(&events, &devs, opts, mmap_build_id), notes))
}

/// A btrfs filesystem mounted on the host, as `perf-command` sees it (sysfs and mountinfo
/// only: no ioctl, so no chunk map).
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostBtrfs {
    /// Its superblock's anonymous device (`/proc/self/mountinfo`'s, the inode events').
    sb: (u32, u32),
    /// Its first mount point.
    mount_point: String,
    /// N of its bdi `btrfs-N` (`/sys/fs/btrfs/FSID/bdi`, Linux 5.9 and later).
    bdi_seq: Option<u32>,
    /// Its block devices and their disks (`/sys/fs/btrfs/FSID/devices`).
    devices: Vec<[(u32, u32); 2]>,
}

/// The btrfs filesystems mounted here: each of `sys`'s `fs/btrfs/FSID` with a device that a
/// btrfs mount of `mountinfo` names as its source (devices by their `class/block` names,
/// [`tp::block_devices_at`]).
fn host_btrfs(mountinfo: &str, sys: &Path) -> Vec<HostBtrfs> {
    let block = tp::block_devices_at(sys);
    // A device by name, with its disk's number (its own for a whole disk).
    let by_name = |name: &std::ffi::OsStr| -> Option<[(u32, u32); 2]> {
        let b = block
            .iter()
            .find(|b| std::ffi::OsStr::new(&b.name) == name)?;
        let disk = block
            .iter()
            .find(|d| !b.parent.is_empty() && d.name == b.parent)
            .unwrap_or(b);
        Some([(b.major, b.minor), (disk.major, disk.minor)])
    };
    // A mount's source (`/dev/sdb1`, `/dev/mapper/x` for dm-0) by its device's name.
    let source = |s: &str| {
        let p = std::fs::canonicalize(s).unwrap_or_else(|_| PathBuf::from(s));
        p.file_name().and_then(by_name)
    };
    let mounts: Vec<_> = tp::mountinfo::parse(mountinfo)
        .filter(|m| m.fs_type == "btrfs")
        .collect();
    let mut out: Vec<HostBtrfs> = Vec::new();
    let Ok(dirs) = std::fs::read_dir(sys.join("fs/btrfs")) else {
        return out;
    };
    let mut dirs: Vec<_> = dirs.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let Ok(names) = std::fs::read_dir(dir.join("devices")) else {
            continue;
        };
        let devices: Vec<_> = names
            .flatten()
            .filter_map(|e| by_name(&e.file_name()))
            .collect();
        let Some(m) = mounts
            .iter()
            .find(|m| source(&m.source).is_some_and(|[d, _]| devices.iter().any(|[x, _]| *x == d)))
        else {
            continue;
        };
        let bdi_seq = std::fs::read_link(dir.join("bdi")).ok().and_then(|l| {
            l.file_name()?
                .to_str()?
                .strip_prefix("btrfs-")?
                .parse()
                .ok()
        });
        out.push(HostBtrfs {
            sb: (m.major, m.minor),
            mount_point: m.mount_point.clone(),
            bdi_seq,
            devices,
        });
    }
    out
}

/// The btrfs filesystems of `host` on `devs` (every one when `devs` is empty).
fn btrfs_on(host: Vec<HostBtrfs>, devs: &[FilterDev]) -> Vec<HostBtrfs> {
    host.into_iter()
        .filter(|b| {
            devs.is_empty()
                || b.devices.iter().any(|[d, disk]| {
                    devs.iter()
                        .any(|f| (f.major, f.minor) == *d || (f.major, f.minor) == *disk)
                })
        })
        .collect()
}

/// The note for a host with btrfs mounted: perf.data cannot hold btrfs's chunk maps, which
/// `ioblame-capture btrfs-map` saves.
fn btrfs_note(fs: &[HostBtrfs]) -> Option<String> {
    let at: Vec<&str> = fs.iter().map(|b| b.mount_point.as_str()).collect();
    (!at.is_empty()).then(|| {
        format!(
            "btrfs is mounted at {}: btrfs writes at logical addresses, which only its chunk \
             map places on the disk, and perf.data cannot hold the map; after perf record, \
             run `ioblame-capture btrfs-map -o perf.data.btrfs` on this host (the analysis \
             reads PERF.DATA.btrfs beside the recording, or --btrfs-map FILE); without it, \
             btrfs's writeback is not linked to its dirtiers",
            at.join(", ")
        )
    })
}

/// Whether a kernel of this release (`uname -r`) puts build ids in MMAP2 records (Linux
/// 5.12, `PERF_RECORD_MISC_MMAP_BUILD_ID`). A release that does not parse is taken as a
/// recent one.
pub(crate) fn mmap_build_ids(release: &str) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (5, 12),
        _ => true,
    }
}

/// [`perf_command_with_notes`] without the notes.
pub fn perf_command(devices: &[String], stacks: Stacks) -> Result<String, PerfDataError> {
    Ok(perf_command_with_notes(devices, stacks)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn btrfs_of_the_host_on_the_devices() {
        // A sysfs tree: two filesystems, one on loop1, one on sdb1 (a partition of sdb).
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        let devices = s.join("devices");
        for (path, dev) in [("loop1", "7:1"), ("sdb", "8:16"), ("sdb/sdb1", "8:17")] {
            std::fs::create_dir_all(devices.join(path)).unwrap();
            std::fs::write(devices.join(path).join("dev"), dev).unwrap();
        }
        std::fs::write(devices.join("sdb/sdb1/partition"), "1").unwrap();
        std::fs::create_dir_all(s.join("class/block")).unwrap();
        for (name, path) in [("loop1", "loop1"), ("sdb", "sdb"), ("sdb1", "sdb/sdb1")] {
            std::os::unix::fs::symlink(devices.join(path), s.join("class/block").join(name))
                .unwrap();
        }
        for (fsid, dev, bdi) in [("aa", "loop1", Some("btrfs-3")), ("bb", "sdb1", None)] {
            let d = s.join("fs/btrfs").join(fsid).join("devices");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(dev), "").unwrap();
            if let Some(b) = bdi {
                std::os::unix::fs::symlink(
                    format!("../../../devices/virtual/bdi/{b}"),
                    s.join("fs/btrfs").join(fsid).join("bdi"),
                )
                .unwrap();
            }
        }
        std::fs::create_dir_all(s.join("fs/btrfs/features")).unwrap();
        let info = "\
36 1 0:40 / /srv rw - btrfs /nonexistent/loop1 rw
37 1 0:40 /sub /srv2 rw - btrfs /nonexistent/loop1 rw
38 1 0:41 / /data rw - btrfs /nonexistent/sdb1 rw
39 1 7:2 / /x rw - ext4 /nonexistent/loop2 rw
";
        let host = host_btrfs(info, s);
        assert_eq!(
            host,
            [
                HostBtrfs {
                    sb: (0, 40),
                    mount_point: "/srv".into(),
                    bdi_seq: Some(3),
                    devices: vec![[(7, 1), (7, 1)]],
                },
                HostBtrfs {
                    sb: (0, 41),
                    mount_point: "/data".into(),
                    bdi_seq: None,
                    devices: vec![[(8, 17), (8, 16)]],
                },
            ]
        );
        let all = btrfs_note(&btrfs_on(host.clone(), &[])).unwrap();
        assert!(all.contains("mounted at /srv, /data:"), "{all}");
        assert!(all.contains("ioblame-capture btrfs-map -o perf.data.btrfs"));
        let f = |major, minor, disk_major, disk_minor| FilterDev {
            major,
            minor,
            disk_major,
            disk_minor,
        };
        // A partition's disk given: its btrfs too; or the partition itself.
        for d in [f(8, 16, 8, 16), f(8, 17, 8, 16)] {
            let on = btrfs_on(host.clone(), &[d]);
            assert_eq!(on.len(), 1);
            assert_eq!(on[0].sb, (0, 41));
        }
        assert_eq!(btrfs_on(host, &[f(7, 2, 7, 2)]), []);
    }

    #[test]
    fn quoting() {
        assert_eq!(
            shell_quote("block:block_bio_queue"),
            "block:block_bio_queue"
        );
        assert_eq!(shell_quote("dev == 1"), "'dev == 1'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    fn tracepoint(name: &str, fields: &str) -> Tracepoint {
        Tracepoint {
            name: name.into(),
            id: 1,
            format: format!("name: x\nID: 1\nformat:\n{fields}"),
            callchain: ioblame_tracepoints::CALLCHAIN_EVENTS.contains(&name),
        }
    }

    fn opts(stacks: Stacks, user_stacks: bool) -> CommandOptions {
        CommandOptions {
            stacks,
            user_stacks: user_stacks.then_some(UserStacks::Fp),
        }
    }

    #[test]
    fn command_line() {
        let evs = [
            tracepoint(
                "block:block_dirty_buffer",
                "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n",
            ),
            tracepoint("sched:sched_process_exec", ""),
        ];
        let loop0 = FilterDev {
            major: 7,
            minor: 0,
            disk_major: 7,
            disk_minor: 0,
        };
        // Callchains on the stack events only, kernel-only.
        assert_eq!(
            build_command(&evs, &[loop0], opts(Stacks::All, false), true),
            "perf record -a --all-cgroups --kernel-callchains -m 16M \
             -e block:block_dirty_buffer/call-graph=fp/ --filter '(dev == 7340032) && (sector < 4611686018427387904)' \
             -e sched:sched_process_exec -o perf.data -- COMMAND"
        );
        assert_eq!(
            build_command(&evs[..1], &[], opts(Stacks::All, false), true),
            "perf record -a --all-cgroups --kernel-callchains -m 16M \
             -e block:block_dirty_buffer/call-graph=fp/ --filter 'sector < 4611686018427387904' -o perf.data -- COMMAND"
        );
        // The default: the dirty buffers take their thread's dirtying stack in the analyzer.
        assert_eq!(
            build_command(&evs[..1], &[], opts(Stacks::Exact, false), true),
            "perf record -a --all-cgroups --kernel-callchains -m 16M \
             -e block:block_dirty_buffer --filter 'sector < 4611686018427387904' -o perf.data -- COMMAND"
        );
    }

    #[test]
    fn command_line_with_user_stacks() {
        let evs = [
            tracepoint(
                "writeback:writeback_dirty_folio",
                "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n",
            ),
            tracepoint(
                "block:block_dirty_buffer",
                "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n",
            ),
            tracepoint("sched:sched_process_exec", ""),
        ];
        // Kernel and user callchains on the stack events only (no `--kernel-callchains`,
        // no global `--call-graph`), and build ids in the MMAP2 records.
        assert_eq!(
            build_command(&evs, &[], opts(Stacks::Exact, true), true),
            "perf record -a --all-cgroups --buildid-mmap -m 16M \
             -e writeback:writeback_dirty_folio/call-graph=fp/ \
             -e block:block_dirty_buffer --filter 'sector < 4611686018427387904' \
             -e sched:sched_process_exec -o perf.data -- COMMAND"
        );
        assert_eq!(
            build_command(&evs[1..2], &[], opts(Stacks::All, true), true),
            "perf record -a --all-cgroups --buildid-mmap -m 16M \
             -e block:block_dirty_buffer/call-graph=fp/ --filter 'sector < 4611686018427387904' \
             -o perf.data -- COMMAND"
        );
        // Stack copies unwound offline: perf's DWARF mode on the stack events.
        let dwarf = CommandOptions {
            stacks: Stacks::Exact,
            user_stacks: Some(UserStacks::Dwarf(4096)),
        };
        assert_eq!(
            build_command(&evs, &[], dwarf, true),
            "perf record -a --all-cgroups --buildid-mmap -m 16M \
             -e writeback:writeback_dirty_folio/call-graph=dwarf,stack-size=4096/ \
             -e block:block_dirty_buffer --filter 'sector < 4611686018427387904' \
             -e sched:sched_process_exec -o perf.data -- COMMAND"
        );
        // Before Linux 5.12 (no build ids in MMAP2 records): the build-id table instead.
        assert_eq!(
            build_command(&evs[1..2], &[], opts(Stacks::All, true), false),
            "perf record -a --all-cgroups --buildid-all -m 16M \
             -e block:block_dirty_buffer/call-graph=fp/ --filter 'sector < 4611686018427387904' \
             -o perf.data -- COMMAND"
        );
        for (release, yes) in [
            ("5.10.0-46-amd64", false),
            ("5.11.22", false),
            ("5.12.0", true),
            ("6.1.0-40-amd64", true),
            ("6.18.44-fc-v657", true),
            ("4.18.0-553.el8_10.x86_64", false),
            ("", true),
        ] {
            assert_eq!(mmap_build_ids(release), yes, "{release}");
        }
        // Without --user-stacks, the line is as before.
        assert_eq!(CommandOptions::default(), opts(Stacks::Exact, false));
    }

    #[test]
    fn user_stacks_need_a_stack_event() {
        let e = perf_command_for(&[], opts(Stacks::None, true)).unwrap_err();
        assert!(
            e.to_string().contains("--user-stacks with --stacks none"),
            "{e}"
        );
    }
}
