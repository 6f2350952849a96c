//! Which thread is running: a progress thread, or a consumer's.
//!
//! Kept in a pthread key, not a `thread_local!`: in a library loaded with
//! dlopen, a thread's first touch of a Rust thread-local makes the loader
//! allocate the library's thread-local block for it (`__tls_get_addr`), so
//! a consumer thread that reached one of these tests for the first time in
//! the middle of its traffic made a heap allocation on the data path
//! (conformance `fastpath_allocates_nothing`). Reading a key nobody set on
//! a thread allocates nothing.

use std::sync::OnceLock;

const PROGRESS: usize = 1;
const EVENTS: usize = 2;

/// The key, made when the first thread takes a role; None if the process
/// has no key left (then no thread has a role: a progress thread behaves
/// as a consumer's, which only costs it a wait for CQ room).
static KEY: OnceLock<Option<libc::pthread_key_t>> = OnceLock::new();

fn role() -> usize {
    match KEY.get() {
        // SAFETY: a key we made; unset on this thread, it reads as NULL.
        Some(Some(k)) => unsafe { libc::pthread_getspecific(*k) as usize },
        _ => 0,
    }
}

fn take(role: usize) {
    let key = KEY.get_or_init(|| {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: our out-variable; no destructor (the value is a plain number).
        if unsafe { libc::pthread_key_create(&mut k, None) } == 0 {
            Some(k)
        } else {
            log::error!("sock: no pthread key left: progress and event threads are not told apart");
            None
        }
    });
    if let Some(k) = key {
        // SAFETY: our key, holding a number, not a pointer anyone reads through.
        unsafe { libc::pthread_setspecific(*k, role as *const libc::c_void) };
    }
}

/// Whether the caller is a progress thread (which may wait for CQ room;
/// a consumer's thread never does).
pub fn on_progress_thread() -> bool {
    role() == PROGRESS
}

/// Marks the calling thread as a progress thread, for its life.
pub fn become_progress_thread() {
    take(PROGRESS);
}

/// Whether the caller is an IA's event thread (`cm::Events`).
pub fn on_event_thread() -> bool {
    role() == EVENTS
}

/// Marks the calling thread as an event thread, for its life.
pub fn become_event_thread() {
    take(EVENTS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_has_its_own_role_and_none_until_it_takes_one() {
        let progress = std::thread::spawn(|| {
            let before = on_progress_thread();
            become_progress_thread();
            (before, on_progress_thread(), on_event_thread())
        });
        let events = std::thread::spawn(|| {
            become_event_thread();
            (on_progress_thread(), on_event_thread())
        });
        assert_eq!(progress.join().unwrap(), (false, true, false));
        assert_eq!(events.join().unwrap(), (false, true));
        assert!(!on_progress_thread() && !on_event_thread(), "a consumer's thread");
    }
}
