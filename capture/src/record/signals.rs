//! The signals that stop a recording (SIGINT, SIGTERM): caught, and remembered for the
//! drain loop and for the command run while recording.

use std::sync::atomic::{AtomicI32, Ordering};

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

pub(super) fn install_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a plain handler that only stores an atomic is
        // async-signal-safe; no SA_RESTART so poll() returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal that stopped the recording, 0 while none came.
pub(super) fn received() -> i32 {
    SIGNAL.load(Ordering::SeqCst)
}
