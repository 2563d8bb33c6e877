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

/// A section of the program's own man page that clap does not know: its title
/// (`ENVIRONMENT`, `EXAMPLES`) and its entries, each a term (a variable, a command line) and
/// what it does.
#[derive(Debug, Clone, Copy)]
pub struct ManSection {
    /// The section's title, upper case.
    pub title: &'static str,
    /// (term, text) pairs.
    pub entries: &'static [(&'static str, &'static str)],
}

impl DocCommand {
    /// Runs the subcommand for the program `cmd` (its `CommandFactory::command()`), writing a
    /// completion script to `out`; `sections` go into the program's own man page.
    pub fn run(
        self,
        cmd: &mut clap::Command,
        out: &mut dyn Write,
        sections: &[ManSection],
    ) -> io::Result<()> {
        match self {
            DocCommand::Completions { shell } => {
                completions(shell, cmd, out);
                Ok(())
            }
            DocCommand::Man { out: dir } => {
                man_pages(cmd, &dir, sections).map(|_| ()).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("writing man pages into {}: {e}", dir.display()),
                    )
                })
            }
        }
    }
}

/// Writes the completion script of `cmd` for `shell` (bash, zsh, fish, elvish, powershell).
/// Hidden subcommands (such as `man`) are not offered: clap_complete's scripts would list
/// them.
pub fn completions(shell: Shell, cmd: &mut clap::Command, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut without_hidden_subcommands(cmd), name, out);
}

/// A copy of `cmd` for completion: its name, text, version, aliases and every argument, and
/// its visible subcommands, each copied the same way (clap cannot remove a subcommand).
fn without_hidden_subcommands(cmd: &clap::Command) -> clap::Command {
    let mut c = clap::Command::new(cmd.get_name().to_string())
        .args(cmd.get_arguments().cloned())
        .groups(cmd.get_groups().cloned())
        .visible_aliases(cmd.get_visible_aliases().map(str::to_string));
    if let Some(about) = cmd.get_about() {
        c = c.about(about.clone());
    }
    if let Some(v) = cmd.get_version() {
        c = c.version(v.to_string());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        c = c.subcommand(without_hidden_subcommands(sub));
    }
    c
}

/// Writes a man page (section 1) for `cmd` and one for each of its visible subcommands,
/// named as git names them (`ioblame.1`, `ioblame-report.1`), into `dir` (created); the
/// program's own page also has `sections`, after its subcommands. Returns the files written.
pub fn man_pages(
    cmd: &clap::Command,
    dir: &Path,
    sections: &[ManSection],
) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    // No `help` subcommand: it would be listed in the pages, and has none of its own.
    let mut cmd = cmd.clone().disable_help_subcommand(true);
    cmd.build();
    let version = cmd.get_version().map(str::to_string);
    let mut written = Vec::new();
    let name = cmd.get_name().to_string();
    page(
        &cmd,
        &name,
        &name,
        version.as_deref(),
        sections,
        dir,
        &mut written,
    )?;
    Ok(written)
}

/// Writes the page of `cmd`, named `name` (`ioblame-perf-command`, as the parent's
/// SUBCOMMANDS section names it) and invoked as `bin` (`ioblame perf-command`), then those
/// of its visible subcommands. Each page carries the program's `version`.
fn page(
    cmd: &clap::Command,
    name: &str,
    bin: &str,
    version: Option<&str>,
    sections: &[ManSection],
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> io::Result<()> {
    let mut named = cmd.clone().name(name.to_string()).bin_name(bin.to_string());
    if let Some(v) = version {
        named = named.version(v.to_string());
    }
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    render(&named, sections, &mut buf)?;
    std::fs::write(&path, buf)?;
    written.push(path);
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let s = sub.get_name();
        page(
            sub,
            &format!("{name}-{s}"),
            &format!("{bin} {s}"),
            version,
            &[],
            dir,
            written,
        )?;
    }
    Ok(())
}

/// clap_mangen's page of `cmd`, with `sections` before its VERSION section (at the end when
/// it has none).
fn render(cmd: &clap::Command, sections: &[ManSection], out: &mut Vec<u8>) -> io::Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    let page = String::from_utf8_lossy(&page);
    let mut extra = String::new();
    for s in sections {
        extra.push_str(&format!(".SH {}\n", roff_text(s.title)));
        for (term, text) in s.entries {
            extra.push_str(&format!(
                ".TP\n\\fB{}\\fR\n{}\n",
                roff_text(term),
                roff_text(text)
            ));
        }
    }
    let at = page.find("\n.SH VERSION\n").map_or(page.len(), |i| i + 1);
    out.extend_from_slice(page[..at].as_bytes());
    out.extend_from_slice(extra.as_bytes());
    out.extend_from_slice(page[at..].as_bytes());
    Ok(())
}

/// `s` as roff text: backslashes and hyphens escaped, no line starting with a control
/// character.
fn roff_text(s: &str) -> String {
    let t = s.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        clap::Command::new("my-tool")
            .version("1.2.3")
            .about("A tool")
            .subcommand(
                clap::Command::new("run-it").about("Runs").arg(
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
        let env = [ManSection {
            title: "ENVIRONMENT",
            entries: &[("NO_COLOR", "no colour, with any value -- even .5")],
        }];
        let files = man_pages(&cli(), dir.path(), &env).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["my-tool.1", "my-tool-run-it.1"]);
        let top = std::fs::read_to_string(&files[0]).unwrap();
        assert!(top.contains("my\\-tool\\-run\\-it(1)"), "{top}");
        assert!(!top.contains("help(1)"), "no page of help is listed: {top}");
        assert!(
            top.contains(".SH ENVIRONMENT\n.TP\n\\fBNO_COLOR\\fR\nno colour, with any value \\-\\- even .5\n.SH VERSION"),
            "{top}"
        );
        let run = std::fs::read_to_string(&files[1]).unwrap();
        assert!(run.contains(".TH my-tool-run-it 1"), "{run}");
        assert!(run.contains("\"my-tool-run-it 1.2.3\""), "{run}");
        // Invoked as the program and its subcommand; hyphens in either name stay.
        assert!(run.contains("\\fBmy\\-tool run\\-it\\fR"), "{run}");
        assert!(run.contains("fast"), "{run}");
    }

    #[test]
    fn bash_completion_names_the_subcommands() {
        let mut out = Vec::new();
        completions(Shell::Bash, &mut cli(), &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("complete -F _my__tool"), "{s}");
        assert!(s.contains("run-it"), "{s}");
        assert!(!s.contains("secret"), "a hidden subcommand is offered: {s}");
    }
}

/// Parses a size argument like `16M`, `1G`, `4096`, `64k` (the recorder's `--max-size`, and
/// what `ioblame top` passes to it).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => {
            let m: u64 = match t[i..]
                .to_ascii_lowercase()
                .trim_end_matches("ib")
                .trim_end_matches('b')
            {
                "" => 1,
                "k" => 1 << 10,
                "m" => 1 << 20,
                "g" => 1 << 30,
                "t" => 1 << 40,
                u => return Err(format!("unknown size unit '{u}' (use K, M, G)")),
            };
            (&t[..i], m)
        }
        None => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size such as 64M"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// Parses a duration argument like `30s`, `500ms`, `2m`, `1h`, `10` (seconds).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let i = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let n: f64 = t[..i]
        .parse()
        .map_err(|_| format!("'{s}' is not a duration such as 30s"))?;
    let secs = match &t[i..] {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("unknown duration unit '{u}' (use ms, s, m, h)")),
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 1e9 {
        return Err(format!("duration '{s}' is out of range"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod arg_tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16M"), Ok(16 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("30s"),
            Ok(std::time::Duration::from_secs(30))
        );
        assert_eq!(
            parse_duration("500ms"),
            Ok(std::time::Duration::from_millis(500))
        );
        assert_eq!(
            parse_duration("2m"),
            Ok(std::time::Duration::from_secs(120))
        );
        assert_eq!(
            parse_duration("1.5"),
            Ok(std::time::Duration::from_millis(1500))
        );
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3d").is_err());
    }
}
