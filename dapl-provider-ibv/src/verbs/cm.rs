//! The rdma_cm side: one event channel per IA and the thread that reads it.

use crate::wake::{self, Wake};
use rdma_core_sys as ibv;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// Handles one event; the event is acknowledged after it returns, so the
/// handler copies anything (private data) it needs to keep. An id it returns
/// is destroyed after the ack: destroying an id blocks until its events are
/// acked, so it cannot happen inside the handler.
pub type Handler = fn(&ibv::rdma_cm_event) -> Option<*mut ibv::rdma_cm_id>;

pub struct CmThread {
    stop: Arc<(AtomicBool, Wake)>,
    thread: Option<JoinHandle<()>>,
}

struct Channel(*mut ibv::rdma_event_channel);

// The channel is only read by the CM thread; it outlives the thread (joined in drop).
unsafe impl Send for Channel {}

/// Handles one verbs async event (QP, CQ, SRQ or device); acked after it returns.
pub type AsyncHandler = fn(&ibv::ibv_async_event);

/// Runs between waits; returns how long (µs) until it wants to run again.
pub type Tick = Box<dyn Fn() -> Option<u64> + Send>;

struct Ctx(*mut ibv::ibv_context);

// The verbs context outlives the thread (the IA joins it before closing the device).
unsafe impl Send for Ctx {}

fn set_nonblocking(fd: i32) {
    // SAFETY: plain fcntl on a descriptor we were given.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
}

impl CmThread {
    /// One thread per IA: it reads the IA's rdma_cm events, the device's
    /// verbs async events, and runs `tick` (connect timeouts) on time.
    pub fn start(
        channel: *mut ibv::rdma_event_channel,
        handler: Handler,
        ctx: *mut ibv::ibv_context,
        on_async: AsyncHandler,
        tick: Tick,
    ) -> std::io::Result<CmThread> {
        let wake = Wake::new().ok_or_else(std::io::Error::last_os_error)?;
        let stop = Arc::new((AtomicBool::new(false), wake));
        // SAFETY: channel fd owned by the IA's device; made non-blocking so the
        // thread can also watch its stop signal.
        let fd = unsafe { (*channel).fd };
        set_nonblocking(fd);
        // SAFETY: the context's async fd; other IAs on the device may read it
        // too, and every event names its object, so any reader can route it.
        let async_fd = unsafe { (*ctx).async_fd };
        set_nonblocking(async_fd);
        let ch = Channel(channel);
        let vctx = Ctx(ctx);
        let s = stop.clone();
        let thread = std::thread::Builder::new().name("daplibv-cm".into()).spawn(move || {
            let (ch, vctx) = (ch, vctx);
            while !s.0.load(Ordering::Acquire) {
                let next = tick();
                wake::sleep_on(&[fd, async_fd, s.1.fd()], next);
                loop {
                    let mut ev: *mut ibv::rdma_cm_event = std::ptr::null_mut();
                    // SAFETY: non-blocking read of the next event on our channel.
                    if unsafe { ibv::rdma_get_cm_event(ch.0, &mut ev) } != 0 {
                        break;
                    }
                    // SAFETY: a valid event until acked below.
                    let r = std::panic::catch_unwind(|| handler(unsafe { &*ev }));
                    // SAFETY: acking the event we got.
                    unsafe { ibv::rdma_ack_cm_event(ev) };
                    match r {
                        Ok(Some(id)) => destroy_id(id),
                        Ok(None) => {}
                        Err(_) => log::error!("connection event handler panicked; event dropped"),
                    }
                }
                loop {
                    // SAFETY: all-zero is a valid event for the library to fill.
                    let mut ev: ibv::ibv_async_event = unsafe { std::mem::zeroed() };
                    // SAFETY: non-blocking read on the live context.
                    if unsafe { ibv::ibv_get_async_event(vctx.0, &mut ev) } != 0 {
                        break;
                    }
                    if std::panic::catch_unwind(|| on_async(&ev)).is_err() {
                        log::error!("async event handler panicked; event dropped");
                    }
                    // SAFETY: acking the event we got (destroying its object waits for this).
                    unsafe { ibv::ibv_ack_async_event(&mut ev) };
                }
            }
        })?;
        Ok(CmThread { stop, thread: Some(thread) })
    }
}

impl Drop for CmThread {
    fn drop(&mut self) {
        self.stop.0.store(true, Ordering::Release);
        self.stop.1.signal();
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

/// Creates a cm id on `channel` whose context is `context` (a DAT handle),
/// in the port space for connected (RC) endpoints.
pub fn create_id(channel: *mut ibv::rdma_event_channel, context: usize) -> std::io::Result<*mut ibv::rdma_cm_id> {
    create_id_in(channel, context, ibv::RDMA_PS_TCP)
}

/// As `create_id`, in port space `ps` (RDMA_PS_UDP for UD address resolution).
pub fn create_id_in(channel: *mut ibv::rdma_event_channel, context: usize, ps: u32) -> std::io::Result<*mut ibv::rdma_cm_id> {
    let mut id: *mut ibv::rdma_cm_id = std::ptr::null_mut();
    // SAFETY: live channel; id receives the new id.
    if unsafe { ibv::rdma_create_id(channel, &mut id, context as *mut libc::c_void, ps) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(id)
}

pub fn destroy_id(id: *mut ibv::rdma_cm_id) {
    if !id.is_null() {
        // SAFETY: an id we created; rdma_destroy_id waits for its events' acks,
        // which the CM thread gives without taking any of our locks.
        unsafe { ibv::rdma_destroy_id(id) };
    }
}

/// True if `id` lives in the UDP port space: a UD address resolution, not a connection.
pub fn is_ud(id: *mut ibv::rdma_cm_id) -> bool {
    // SAFETY: a live id handed to us by rdma_cm.
    !id.is_null() && unsafe { (*id).ps } == ibv::RDMA_PS_UDP
}
