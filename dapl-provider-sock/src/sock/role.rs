//! Which thread is running: a progress thread, or a consumer's.

thread_local! {
    static PROGRESS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static EVENTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the caller is a progress thread (which may wait for CQ room;
/// a consumer's thread never does).
pub fn on_progress_thread() -> bool {
    PROGRESS.with(|p| p.get())
}

/// Marks the calling thread as a progress thread, for its life.
pub fn become_progress_thread() {
    PROGRESS.with(|p| p.set(true));
}

/// Whether the caller is an IA's event thread (`cm::Events`).
pub fn on_event_thread() -> bool {
    EVENTS.with(|p| p.get())
}

/// Marks the calling thread as an event thread, for its life.
pub fn become_event_thread() {
    EVENTS.with(|p| p.set(true));
}
