//! Shell completions and man pages of ioblame's binaries, generated from their clap
//! definitions (`clap_complete`, `clap_mangen`), so that they never disagree with `--help`.
//!
//! Each binary flattens [`DocCommand`] into its subcommands: `completions SHELL`
//! ([`completions`]) and a hidden `man --out DIR` ([`man_pages`]) that `just man` runs.
#![deny(missing_docs)]

use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use clap_complete::Shell;

/// The subcommands a binary gets from this crate (`#[command(flatten)]` in its own
/// subcommand enum).
#[derive(clap::Subcommand, Debug, Clone)]
pub enum DocCommand {
    /// Print the shell completion script (bash: `source <(PROGRAM completions bash)`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Write the man pages (this program and each subcommand) into a directory.
    #[command(hide = true)]
    Man {
        /// Directory to write the pages into (created).
        #[arg(long = "out", value_name = "DIR")]
        out: PathBuf,
    },
}

impl DocCommand {
    /// Runs the subcommand for the program `cmd` (its `CommandFactory::command()`), writing a
    /// completion script to `out`.
    pub fn run(self, cmd: &mut clap::Command, out: &mut dyn Write) -> io::Result<()> {
        match self {
            DocCommand::Completions { shell } => {
                completions(shell, cmd, out);
                Ok(())
            }
            DocCommand::Man { out: dir } => man_pages(cmd, &dir).map(|_| ()).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("writing man pages into {}: {e}", dir.display()),
                )
            }),
        }
    }
}

/// Writes the completion script of `cmd` for `shell` (bash, zsh, fish, elvish, powershell).
pub fn completions(shell: Shell, cmd: &mut clap::Command, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, cmd, name, out);
}

/// Writes a man page (section 1) for `cmd` and one for each of its visible subcommands,
/// named as git names them (`ioblame.1`, `ioblame-report.1`), into `dir` (created). Returns
/// the files written.
pub fn man_pages(cmd: &clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.clone();
    // Subcommands are named `ioblame-report` in their pages and in the parent's SEE ALSO.
    cmd.build();
    let mut written = Vec::new();
    page(&cmd, cmd.get_name(), dir, &mut written)?;
    Ok(written)
}

fn page(cmd: &clap::Command, name: &str, dir: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    let named = cmd
        .clone()
        .name(name.to_string())
        .bin_name(name.replace('-', " "));
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(named).render(&mut buf)?;
    std::fs::write(&path, buf)?;
    written.push(path);
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        page(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        clap::Command::new("tool")
            .about("A tool")
            .subcommand(
                clap::Command::new("run").about("Runs").arg(
                    clap::Arg::new("fast")
                        .long("fast")
                        .action(clap::ArgAction::SetTrue),
                ),
            )
            .subcommand(clap::Command::new("secret").hide(true))
    }

    #[test]
    fn a_page_per_visible_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let files = man_pages(&cli(), dir.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["tool.1", "tool-run.1"]);
        let run = std::fs::read_to_string(&files[1]).unwrap();
        assert!(run.contains(".TH tool-run 1"), "{run}");
        assert!(run.contains("fast"), "{run}");
    }

    #[test]
    fn bash_completion_names_the_subcommands() {
        let mut out = Vec::new();
        completions(Shell::Bash, &mut cli(), &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("complete -F _tool"), "{s}");
        assert!(s.contains("run"), "{s}");
    }
}
