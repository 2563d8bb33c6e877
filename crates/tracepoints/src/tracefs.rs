//! tracefs: where it is mounted (from the text of `/proc/self/mountinfo`) and which
//! tracepoints a kernel has (its `events/<sys>/<name>/{id,format}` files).
//!
//! [`tracefs_mounts`] and [`resolve_with`] are pure; [`find_tracefs`], [`lookup`] and
//! [`resolve`] only read the directories they are given or find. Mounting tracefs where none
//! is mounted is left to the recorder.

use std::path::{Path, PathBuf};

use crate::{Error, Result, Tracepoint, CALLCHAIN_EVENTS, PRIVILEGE_HINT, RENAMES};

/// Where tracefs is usually mounted; the first is where the recorder mounts it.
pub const TRACEFS_PATHS: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Mount points of tracefs in `/proc/self/mountinfo` text.
pub fn tracefs_mounts(mountinfo: &str) -> Vec<PathBuf> {
    crate::mountinfo::parse(mountinfo)
        .filter(|m| m.fs_type == "tracefs")
        .map(|m| PathBuf::from(m.mount_point))
        .collect()
}

/// Finds a tracefs this process can use: the first of the tracefs mounts listed in
/// `mountinfo` (the text of `/proc/self/mountinfo`), then of [`TRACEFS_PATHS`], whose
/// `events` directory can be read. `Ok(None)`: tracefs is not mounted.
///
/// A tracefs this process may not read (it is mounted mode 0700 for root, the default) is a
/// permission error, not a missing mount.
pub fn find_tracefs(mountinfo: &str) -> Result<Option<PathBuf>> {
    let mut candidates = tracefs_mounts(mountinfo);
    let mounted = !candidates.is_empty();
    candidates.extend(TRACEFS_PATHS.iter().map(PathBuf::from));
    first_readable(&candidates, mounted)
}

/// The first of `candidates` whose `events` directory can be read. `mounted`: tracefs is
/// known to be mounted, so a candidate that cannot be searched for lack of permission means
/// this process may not use it.
fn first_readable(candidates: &[PathBuf], mounted: bool) -> Result<Option<PathBuf>> {
    let mut denied: Option<&Path> = None;
    for p in candidates {
        match std::fs::metadata(p.join("events")) {
            Ok(m) if m.is_dir() => return Ok(Some(p.clone())),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                denied.get_or_insert(p);
            }
            _ => {}
        }
    }
    match denied {
        Some(p) if mounted => Err(Error::System(format!(
            "permission denied: cannot read tracefs at {}; {PRIVILEGE_HINT}",
            p.display()
        ))),
        _ => Ok(None),
    }
}

/// Looks one event up in the tracefs at `tfs`; `Ok(None)` when this kernel lacks it.
pub fn lookup(tfs: &Path, name: &str) -> Result<Option<Tracepoint>> {
    let Some((sys, ev)) = name.split_once(':') else {
        bail!("event '{name}' is not sys:name");
    };
    let dir = tfs.join("events").join(sys).join(ev);
    let idp = dir.join("id");
    let id = match std::fs::read_to_string(&idp) {
        Ok(s) => s
            .trim()
            .parse::<u64>()
            .map_err(|_| Error::System(format!("{}: not a number", idp.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!(
                "permission denied: cannot read {}; {PRIVILEGE_HINT}",
                idp.display()
            )
        }
        Err(e) => return Err(Error::System(format!("reading {}: {e}", idp.display()))),
    };
    let format = std::fs::read_to_string(dir.join("format"))
        .map_err(|e| Error::System(format!("reading {}/format: {e}", dir.display())))?;
    Ok(Some(Tracepoint {
        name: name.to_string(),
        id,
        format,
        callchain: CALLCHAIN_EVENTS.contains(&name),
    }))
}

/// Resolves event names against the tracefs at `tfs`: [`resolve_with`] and [`lookup`].
pub fn resolve(
    tfs: &Path,
    names: &[String],
    strict: bool,
) -> Result<(Vec<Tracepoint>, Vec<String>)> {
    resolve_with(names, strict, |n| lookup(tfs, n))
}

/// Resolves event names against a kernel whose events `find` looks up by name (`Ok(None)`
/// for one it lacks): old names stand in for renamed events ([`RENAMES`]); missing events
/// are skipped with a note (returned). With `strict`, a missing event is an error.
pub fn resolve_with(
    names: &[String],
    strict: bool,
    mut find: impl FnMut(&str) -> Result<Option<Tracepoint>>,
) -> Result<(Vec<Tracepoint>, Vec<String>)> {
    let mut found: Vec<Tracepoint> = Vec::new();
    let mut notes = Vec::new();
    let mut missing = Vec::new();
    for n in names {
        let mut tp = find(n)?;
        if tp.is_none() {
            if let Some((_, old)) = RENAMES.iter().find(|(new, _)| new == n) {
                tp = find(old)?;
                if tp.is_some() {
                    notes.push(format!("{n} is absent on this kernel; using {old}"));
                }
            }
        }
        match tp {
            Some(t) => {
                if !found.iter().any(|f| f.name == t.name) {
                    found.push(t);
                }
            }
            None if strict => {
                bail!("tracepoint {n} does not exist on this kernel (see `ioblame-capture events`)")
            }
            None => missing.push(n),
        }
    }
    for n in missing {
        // An older kernel's form of an event found here: nothing is missing.
        let newer_found = ioblame_events::OLDER_FORMS
            .iter()
            .any(|(old, new)| old == n && found.iter().any(|f| f.name == *new));
        if !newer_found {
            notes.push(format!("{n} does not exist on this kernel; skipped"));
        }
    }
    if found.is_empty() {
        bail!("none of the requested tracepoints exists on this kernel");
    }
    Ok((found, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary directory, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(what: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!(
                "iob-{what}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn tracefs_mount_points() {
        let mi = "22 1 0:20 / /sys rw - sysfs sysfs rw\n\
                  35 22 0:12 / /sys/kernel/tracing rw,nosuid - tracefs tracefs rw,mode=700\n\
                  36 22 0:7 / /sys/kernel/debug rw - debugfs debugfs rw\n\
                  37 36 0:12 / /sys/kernel/debug/tracing rw shared:9 - tracefs tracefs rw\n";
        assert_eq!(
            tracefs_mounts(mi),
            vec![
                PathBuf::from("/sys/kernel/tracing"),
                PathBuf::from("/sys/kernel/debug/tracing")
            ]
        );
        // Optional fields before the separator do not shift the mount point.
        assert_eq!(
            tracefs_mounts("40 22 0:30 / /t rw master:1 shared:2 - tracefs nodev rw\n"),
            vec![PathBuf::from("/t")]
        );
        // A "tracefs" before the separator is no filesystem type.
        assert!(tracefs_mounts("41 22 0:31 / /tracefs rw - ext4 /dev/sda1 rw\n").is_empty());
        assert!(tracefs_mounts("bad line\n").is_empty());
        // The mount point unescaped.
        assert_eq!(
            tracefs_mounts("42 22 0:12 / /t\\040x rw - tracefs tracefs rw\n"),
            vec![PathBuf::from("/t x")]
        );
        assert!(tracefs_mounts("").is_empty());
    }

    #[test]
    fn finds_a_readable_tracefs() {
        let dir = TempDir::new("tfs");
        let tfs = dir.0.join("tracing");
        std::fs::create_dir_all(tfs.join("events")).unwrap();
        let none = dir.0.join("nonexistent");
        // Found, or absent: no error.
        assert_eq!(
            first_readable(&[none.clone(), tfs.clone()], true).unwrap(),
            Some(tfs.clone())
        );
        assert_eq!(first_readable(&[none], true).unwrap(), None);
        // The mount listed in mountinfo comes first.
        let mi = format!("35 22 0:12 / {} rw - tracefs tracefs rw\n", tfs.display());
        assert_eq!(find_tracefs(&mi).unwrap(), Some(tfs));
    }

    /// A fake tracefs holding `events`: (name, id file text).
    fn fake_tracefs(dir: &TempDir, events: &[(&str, &str)]) -> PathBuf {
        let tfs = dir.0.join("tracing");
        for (name, id) in events {
            let (sys, ev) = name.split_once(':').unwrap();
            let d = tfs.join("events").join(sys).join(ev);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("id"), id).unwrap();
            std::fs::write(d.join("format"), format!("name: {ev}\nID: {id}")).unwrap();
        }
        tfs
    }

    #[test]
    fn looks_events_up() {
        let dir = TempDir::new("tfs-lookup");
        let tfs = fake_tracefs(
            &dir,
            &[
                ("block:block_bio_queue", "1234\n"),
                ("sched:sched_process_exec", "99\n"),
                ("block:broken", "12a\n"),
            ],
        );
        let t = lookup(&tfs, "block:block_bio_queue").unwrap().unwrap();
        assert_eq!((t.name.as_str(), t.id), ("block:block_bio_queue", 1234));
        assert_eq!(t.format, "name: block_bio_queue\nID: 1234\n");
        assert!(t.callchain, "a stack event");
        assert!(
            !lookup(&tfs, "sched:sched_process_exec")
                .unwrap()
                .unwrap()
                .callchain
        );
        assert!(lookup(&tfs, "block:nosuch").unwrap().is_none());
        assert!(matches!(
            lookup(&tfs, "block:broken"),
            Err(Error::System(_))
        ));
        assert!(matches!(lookup(&tfs, "nocolon"), Err(Error::Usage(_))));

        let names = [
            "sched:sched_process_exec".to_string(),
            "block:nosuch".into(),
        ];
        let (found, notes) = resolve(&tfs, &names, false).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            notes,
            ["block:nosuch does not exist on this kernel; skipped"]
        );
    }

    /// A kernel with the tracepoints `have`.
    fn kernel<'a>(have: &'a [&'a str]) -> impl FnMut(&str) -> Result<Option<Tracepoint>> + 'a {
        move |n| {
            Ok(have.contains(&n).then(|| Tracepoint {
                name: n.to_string(),
                id: 1,
                format: String::new(),
                callchain: false,
            }))
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn found(r: &(Vec<Tracepoint>, Vec<String>)) -> Vec<&str> {
        r.0.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn resolves_renames_and_missing_events() {
        let (new, old) = RENAMES[0];
        let old_kernel = ["block:block_rq_issue", old];
        // An older kernel: the old name stands in, once, whichever name asked for it.
        let r = resolve_with(
            &names(&[new, "block:block_rq_issue", old, "block:nosuch"]),
            false,
            kernel(&old_kernel),
        )
        .unwrap();
        assert_eq!(found(&r), [old, "block:block_rq_issue"]);
        assert_eq!(
            r.1,
            [
                format!("{new} is absent on this kernel; using {old}"),
                "block:nosuch does not exist on this kernel; skipped".to_string(),
            ]
        );
        // A newer kernel: the new name, no note.
        let r = resolve_with(&names(&[new]), false, kernel(&[new, old])).unwrap();
        assert_eq!((found(&r), r.1.len()), (vec![new], 0));
        // Strict: a missing event is an error; a renamed one is not.
        let e = resolve_with(&names(&["block:nosuch"]), true, kernel(&old_kernel)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tracepoint block:nosuch does not exist on this kernel (see `ioblame-capture events`)"
        );
        assert!(resolve_with(&names(&[new]), true, kernel(&old_kernel)).is_ok());
        // Nothing found at all.
        let e = resolve_with(&names(&["a:b"]), false, kernel(&[])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "none of the requested tracepoints exists on this kernel"
        );
        // A lookup error stops the resolution.
        let e = resolve_with(&names(&["a:b"]), false, |_| {
            Err(Error::System("unreadable".into()))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "unreadable");
    }
}
