//! Files written whole or not at all: each under a temporary name in its final directory,
//! then renamed over the final name. Temporary names start with `.` and end in `.tmp`, so
//! no reader of the dataset (Hive-aware engines skip hidden files; the fleet query reads
//! `*.parquet`) ever sees one.

use std::path::{Path, PathBuf};

use crate::error::DatasetError;

/// The temporary name of `path` for this process: `.NAME.PID.tmp` beside it.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Renames the temporary file of `path` over it.
pub fn commit(path: &Path) -> Result<(), DatasetError> {
    std::fs::rename(temp_path(path), path).map_err(|e| DatasetError::io(path, e))
}

/// Writes `data` to `path` through a temporary file.
pub fn write_file(path: &Path, data: &[u8]) -> Result<(), DatasetError> {
    let tmp = temp_path(path);
    std::fs::write(&tmp, data).map_err(|e| DatasetError::io(&tmp, e))?;
    commit(path)
}

/// The process id in a temporary name `.NAME.PID.tmp`.
fn temp_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    rest.rsplit_once('.')?.1.parse().ok()
}

/// Removes the temporary files in `dir` left by processes that are gone (a killed export);
/// returns how many. Those of running processes (another export at work) are kept.
pub fn clean_stale(dir: &Path) -> Result<usize, DatasetError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(DatasetError::io(dir, e)),
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = temp_owner(&name.to_string_lossy()) else {
            continue;
        };
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !alive && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names() {
        let t = temp_path(Path::new("/d/abc.parquet"));
        let name = t.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(name, format!(".abc.parquet.{}.tmp", std::process::id()));
        assert_eq!(temp_owner(&name), Some(std::process::id()));
        assert_eq!(temp_owner("abc.parquet"), None);
        assert_eq!(temp_owner(".x.tmp"), None);
    }

    #[test]
    fn stale_temp_files_are_removed_live_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        // A pid above the kernel's maximum (4194304) is never alive.
        let stale = d.path().join(".a.parquet.4999999.tmp");
        let live = temp_path(&d.path().join("b.parquet"));
        let other = d.path().join("c.parquet");
        for p in [&stale, &live, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        assert_eq!(clean_stale(d.path()).unwrap(), 1);
        assert!(!stale.exists() && live.exists() && other.exists());
        write_file(&d.path().join("b.parquet"), b"y").unwrap();
        assert!(!live.exists());
        assert_eq!(std::fs::read(d.path().join("b.parquet")).unwrap(), b"y");
    }
}
