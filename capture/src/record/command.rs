//! The command run while recording: started, waited for once recording has stopped (sent
//! the signal that stopped the capture), and its exit status as the capture's exit code.

use std::process::{Child, ExitStatus};
use std::time::Duration;

use super::signals;

/// Starts the command to run while recording, if any; the error says why it could not
/// start.
pub(super) fn start_command(command: &[String]) -> Result<Option<Child>, String> {
    if command.is_empty() {
        return Ok(None);
    }
    std::process::Command::new(&command[0])
        .args(&command[1..])
        .spawn()
        .map(Some)
        .map_err(|e| format!("cannot run {}: {e}", command[0]))
}

/// Waits for the command once recording has stopped. One that has not exited (`status`
/// none) first gets the signal that stopped the capture, or SIGTERM when `--duration` did.
/// When writing the trace failed (`write_failed`: the output filesystem is full, say), the
/// workload is not the trace's to stop: it runs to its end, and a signal the recorder gets
/// meanwhile is passed on to it. Returns its exit status.
pub(super) fn wait_command(
    child: Option<Child>,
    status: Option<ExitStatus>,
    write_failed: bool,
) -> Option<ExitStatus> {
    let Some(mut ch) = child else {
        return status;
    };
    if status.is_some() {
        return status;
    }
    let mut sig = signals::received();
    if write_failed && sig == 0 {
        eprintln!(
            "ioblame-capture: recording stopped; the command runs on to its end (pid {})",
            ch.id()
        );
        loop {
            if let Ok(Some(st)) = ch.try_wait() {
                return Some(st);
            }
            sig = signals::received();
            if sig != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // SAFETY: sending a signal to our own child; without one, --duration ended the capture.
    unsafe { libc::kill(ch.id() as i32, if sig != 0 { sig } else { libc::SIGTERM }) };
    ch.wait().ok()
}

pub(super) fn exit_code(st: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => 128u8.wrapping_add(s as u8),
        _ => 1,
    }
}
