//! Test helpers shared by the workspace's tests (a dev-dependency only, never published).
//!
//! Golden files: a test renders some output and compares it with a file committed under its
//! crate; when the two differ the test fails with a line diff (text) or the first differing
//! byte (binary). After an intended change, running the tests with `BLESS=1` rewrites every
//! golden file they reach with the current output; review the diff before committing.
//!
//! ```no_run
//! // tests/golden/hello.txt of the calling crate:
//! ioblame_testkit::assert_golden!("hello.txt", "hello\n");
//! // any other committed file:
//! ioblame_testkit::assert_file("tests/data/sample.bin", [1u8, 2, 3]);
//! ```

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

pub mod alloc;
pub mod cgroups;
pub mod cli;
mod diff;
pub mod need;

/// The environment variable that rewrites golden files: set it to `1`.
pub const BLESS_VAR: &str = "BLESS";

/// Whether this test run rewrites golden files (`BLESS=1`).
pub fn blessing() -> bool {
    is_bless(std::env::var_os(BLESS_VAR).as_deref())
}

/// Whether a value of [`BLESS_VAR`] asks for golden files to be rewritten: only `1` does.
fn is_bless(value: Option<&OsStr>) -> bool {
    value == Some(OsStr::new("1"))
}

/// What [`check`] did with a golden file that is now right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// The file already held the output.
    Matched,
    /// Blessing: the file was created or rewritten with the output.
    Written,
}

/// Why a golden file does not hold the output.
#[derive(Debug)]
pub enum GoldenError {
    /// The file does not exist (and the run is not blessing).
    Missing {
        /// The golden file.
        path: PathBuf,
    },
    /// The file holds something else.
    Differs {
        /// The golden file.
        path: PathBuf,
        /// What differs: a line diff of text, or the first differing byte.
        diff: String,
    },
    /// Reading or writing the file failed.
    Io {
        /// The golden file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl fmt::Display for GoldenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GoldenError::Missing { path } => write!(
                f,
                "golden file {} is missing ({BLESS_VAR}=1 writes it from the output)",
                path.display()
            ),
            GoldenError::Differs { path, diff } => write!(
                f,
                "golden file {} does not match the output ({BLESS_VAR}=1 rewrites it; \
                 review the diff before committing)\n{diff}",
                path.display()
            ),
            GoldenError::Io { path, source } => {
                write!(f, "golden file {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for GoldenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GoldenError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Compares `actual` with the golden file at `path`; with `bless`, writes `actual` there
/// instead (creating its directory) unless the file already holds it.
pub fn check(path: &Path, actual: &[u8], bless: bool) -> Result<Checked, GoldenError> {
    let io = |source| GoldenError::Io {
        path: path.to_path_buf(),
        source,
    };
    let expected = match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    match expected {
        Some(expected) if expected == actual => Ok(Checked::Matched),
        _ if bless => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            std::fs::write(path, actual).map_err(io)?;
            Ok(Checked::Written)
        }
        None => Err(GoldenError::Missing {
            path: path.to_path_buf(),
        }),
        Some(expected) => Err(GoldenError::Differs {
            path: path.to_path_buf(),
            diff: diff::describe(&expected, actual),
        }),
    }
}

/// Asserts that the file at `path` holds `actual` (text or bytes); under `BLESS=1` writes
/// `actual` there instead. Panics with a diff when they differ.
#[track_caller]
pub fn assert_file(path: impl AsRef<Path>, actual: impl AsRef<[u8]>) {
    assert_with(path.as_ref(), actual.as_ref(), blessing());
}

/// [`assert_file`] with the choice to bless given.
#[track_caller]
fn assert_with(path: &Path, actual: &[u8], bless: bool) {
    if let Err(e) = check(path, actual, bless) {
        panic!("{e}");
    }
}

/// Asserts that `tests/golden/<name>` of the calling crate holds `actual` (text or bytes);
/// under `BLESS=1` writes it instead. See [`assert_file`].
#[macro_export]
macro_rules! assert_golden {
    ($name:expr, $actual:expr $(,)?) => {
        $crate::assert_file(
            ::std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/golden")
                .join($name),
            $actual,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_blesses() {
        assert!(is_bless(Some(OsStr::new("1"))));
        for v in ["", "0", "true", "yes", "2"] {
            assert!(!is_bless(Some(OsStr::new(v))), "{v:?}");
        }
        assert!(!is_bless(None));
    }

    #[test]
    fn a_matching_file_passes_and_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "one\ntwo\n").unwrap();
        assert_eq!(
            check(&path, b"one\ntwo\n", false).unwrap(),
            Checked::Matched
        );
        assert_eq!(check(&path, b"one\ntwo\n", true).unwrap(), Checked::Matched);
    }

    #[test]
    fn a_mismatch_fails_with_a_diff_and_leaves_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
        let e = check(&path, b"one\nTWO\nthree\n", false).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, GoldenError::Differs { .. }), "{msg}");
        assert!(
            msg.starts_with(&format!("golden file {}", path.display())),
            "{msg}"
        );
        assert!(msg.contains("BLESS=1 rewrites it"), "{msg}");
        assert!(msg.contains("\n-two\n+TWO\n"), "{msg}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\nthree\n");
    }

    #[test]
    fn bless_rewrites_a_mismatch_and_creates_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "old\n").unwrap();
        assert_eq!(check(&path, b"new\n", true).unwrap(), Checked::Written);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(check(&path, b"new\n", false).unwrap(), Checked::Matched);

        let fresh = dir.path().join("sub/dir/b.bin");
        assert_eq!(check(&fresh, &[0, 1, 2], true).unwrap(), Checked::Written);
        assert_eq!(std::fs::read(&fresh).unwrap(), [0, 1, 2]);
    }

    #[test]
    fn a_missing_file_fails_and_says_how_to_make_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.txt");
        let e = check(&path, b"x", false).unwrap_err();
        assert!(matches!(e, GoldenError::Missing { .. }));
        assert_eq!(
            e.to_string(),
            format!(
                "golden file {} is missing (BLESS=1 writes it from the output)",
                path.display()
            )
        );
        assert!(!path.exists());
    }

    #[test]
    fn an_unreadable_file_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: reading it fails, and not as "not found".
        let e = check(dir.path(), b"x", false).unwrap_err();
        assert!(matches!(e, GoldenError::Io { .. }), "{e}");
    }

    #[test]
    fn assert_file_panics_with_the_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "same\nold\n").unwrap();
        let err = std::panic::catch_unwind(|| assert_with(&path, b"same\nnew\n", false));
        let err = err.unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(msg.contains("does not match the output"), "{msg}");
        assert!(msg.contains("\n-old\n+new\n"), "{msg}");
        assert_with(&path, b"same\nold\n", false);
        assert_with(&path, b"blessed\n", true);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "blessed\n");
    }

    #[test]
    fn assert_golden_reads_the_callers_golden_directory() {
        // This crate's own tests/golden/example.txt (the same text under BLESS=1: the
        // file is left as it is).
        assert_golden!(
            "example.txt",
            "a golden file of the test helper's own tests\n"
        );
    }
}
