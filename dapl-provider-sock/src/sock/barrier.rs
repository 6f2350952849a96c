//! Asymmetric fences for the on-node rings' two flag handshakes (`shm`):
//! a consumer about to sleep flags `sleeping` and looks at `head` again,
//! a producer publishes `head` and looks at `sleeping` (and the same
//! with `waiting` and `tail` the other way). Each side needs a full
//! fence between its store and its load, and the producer's after every
//! push, the consumer's after every take, were about a tenth of a
//! streaming process's time (waiting for its stores to reach the other
//! CPU). The flags are set rarely (a sleep, the thread's tick, a full
//! ring): the side that sets one pays for both with `membarrier(2)`
//! (`MEMBARRIER_CMD_GLOBAL_EXPEDITED`: a full fence on every CPU running a
//! thread of a process that registered for it), and the side on the data
//! path needs only to stop the compiler reordering, once this process is
//! registered and the peer said in the ring's control block that it sets
//! its flag that way. Otherwise, both fence, as before.

use std::sync::OnceLock;
use std::sync::atomic::{Ordering, compiler_fence, fence};

/// `membarrier(2)` commands (linux/membarrier.h).
const CMD_QUERY: libc::c_long = 0;
const CMD_GLOBAL_EXPEDITED: libc::c_long = 1 << 1;
const CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_long = 1 << 2;

fn membarrier(cmd: libc::c_long) -> libc::c_long {
    // SAFETY: membarrier takes two integer arguments and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long, 0 as libc::c_long) }
}

/// Whether this process takes part: the kernel has the global expedited
/// commands and registered us for them (`DAPL_SOCK_MEMBARRIER=0`: never).
pub fn registered() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        if std::env::var("DAPL_SOCK_MEMBARRIER").is_ok_and(|v| matches!(v.trim(), "0" | "no" | "off" | "false")) {
            return false;
        }
        let want = CMD_GLOBAL_EXPEDITED | CMD_REGISTER_GLOBAL_EXPEDITED;
        let have = membarrier(CMD_QUERY);
        let on = have >= 0 && have & want == want && membarrier(CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
        log::debug!("sock: asymmetric ring fences (membarrier): {}", if on { "on" } else { "off" });
        on
    })
}

/// The flag setter's fence, between its flag and its look: a full fence
/// here and on every CPU running a registered process's thread.
pub fn heavy() {
    if registered() && membarrier(CMD_GLOBAL_EXPEDITED) == 0 {
        return;
    }
    // Not registered: the peer fences too (`light` with `peer_heavy` unset
    // from us). A failure after the kernel said it has the command is not
    // expected; the plain fence is what is left.
    fence(Ordering::SeqCst);
}

/// The data path's fence, between publishing a counter and looking at the
/// peer's flag: `peer_heavy` says the peer sets that flag with `heavy`.
#[inline]
pub fn light(peer_heavy: bool) {
    if peer_heavy && registered() {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}
