//! Keeping the connection-manager thread and object teardown apart, and
//! CNO agent calls out of both.
//!
//! The CM lock is held by the CM thread while it works on objects, and by
//! consumer threads while they end one (the object's body is dropped in its
//! slot): a handler never sees an EP, CR, PSP, RSP or UD resolution half
//! torn down. It is never held across destroying a connection id, which
//! waits on the CM thread.

use crate::state::Provider;
use dat_abi::*;
use std::cell::RefCell;

/// Runs `f` holding the CM lock. CNO agents that `f` triggers run after the
/// lock is released: an agent may call back into DAT, which can take it.
pub fn cm_busy<T: Provider, R>(f: impl FnOnce() -> R) -> R {
    with_agents_held(|| {
        let _g = T::state().cm.lock().unwrap_or_else(|e| e.into_inner());
        f()
    })
}

/// Runs `f` (which ends an object the CM thread may be looking at) while
/// no connection event is being handled.
pub fn quiesced<T: Provider, R>(f: impl FnOnce() -> R) -> R {
    cm_busy::<T, R>(f)
}

type AgentFn = unsafe extern "C" fn(DAT_PVOID, DAT_EVD_HANDLE);

thread_local! {
    /// Agent calls held back while this thread handles connection events
    /// under the CM lock: an agent may call back into DAT (free an EP, say),
    /// which takes that lock.
    static HELD: RefCell<Option<Vec<(AgentFn, usize, usize)>>> = const { RefCell::new(None) };
}

pub fn call_agent(func: AgentFn, data: usize, evd: DAT_EVD_HANDLE) {
    let held = HELD.with(|h| h.borrow_mut().as_mut().map(|calls| calls.push((func, data, evd as usize))).is_some());
    if !held {
        invoke(func, data, evd as usize);
    }
}

fn invoke(func: AgentFn, data: usize, evd: usize) {
    // SAFETY: the consumer's agent, called as DAT defines it with its own
    // instance data and the EVD that triggered the CNO.
    unsafe { func(data as DAT_PVOID, evd as DAT_EVD_HANDLE) };
}

/// Ends the outermost held section: makes the held calls, or on a panic in
/// the section drops them, so the thread never stays in holding mode.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let calls = HELD.with(|h| h.borrow_mut().take()).unwrap_or_default();
        if !std::thread::panicking() {
            for (func, data, evd) in calls {
                invoke(func, data, evd);
            }
        }
    }
}

/// Runs `f` with agent calls held until it returns (outside any lock `f`
/// takes), then makes them.
pub fn with_agents_held<R>(f: impl FnOnce() -> R) -> R {
    let outer = HELD.with(|h| {
        let mut h = h.borrow_mut();
        h.is_none().then(|| *h = Some(Vec::new())).is_some()
    });
    // Lazily: a Release made and dropped for an inner section would end the outer one.
    let _release = outer.then(|| Release);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
    static SEEN_WHILE_HELD: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn record(data: DAT_PVOID, evd: DAT_EVD_HANDLE) {
        CALLS.lock().unwrap().push((data as usize, evd as usize));
    }

    #[test]
    fn agents_called_at_once_or_after_the_held_section() {
        CALLS.lock().unwrap().clear();
        call_agent(record, 1, 0x10 as DAT_EVD_HANDLE);
        assert_eq!(*CALLS.lock().unwrap(), vec![(1, 0x10)]);
        with_agents_held(|| {
            call_agent(record, 2, 0x20 as DAT_EVD_HANDLE);
            // Nested sections hand their calls to the outermost one.
            with_agents_held(|| call_agent(record, 3, 0x30 as DAT_EVD_HANDLE));
            SEEN_WHILE_HELD.store(CALLS.lock().unwrap().len(), Ordering::SeqCst);
        });
        assert_eq!(SEEN_WHILE_HELD.load(Ordering::SeqCst), 1, "no agent may run inside the held section");
        assert_eq!(*CALLS.lock().unwrap(), vec![(1, 0x10), (2, 0x20), (3, 0x30)]);
        call_agent(record, 4, 0x40 as DAT_EVD_HANDLE);
        assert_eq!(CALLS.lock().unwrap().len(), 4, "holding ends with the outermost section");

        // A section that panics drops what it held and leaves the thread
        // calling agents at once again.
        let r = std::panic::catch_unwind(|| {
            with_agents_held(|| {
                call_agent(record, 5, 0x50 as DAT_EVD_HANDLE);
                panic!("handler failed");
            })
        });
        assert!(r.is_err());
        call_agent(record, 6, 0x60 as DAT_EVD_HANDLE);
        assert_eq!(CALLS.lock().unwrap().last(), Some(&(6, 0x60)));
        assert_eq!(CALLS.lock().unwrap().len(), 5);
    }
}
