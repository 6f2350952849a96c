//! A completion queue with its own completion channel, so one EVD can sleep
//! on exactly its CQ.

use rdma_core_sys as ibv;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct Cq {
    pub cq: *mut ibv::ibv_cq,
    channel: *mut ibv::ibv_comp_channel,
    /// Events taken off the channel but not yet acknowledged; destroy_cq
    /// blocks until all are acked, so they are acked in batches and at drop.
    unacked: AtomicU32,
}

// ibv_cq and its channel are usable from any thread (the library locks).
unsafe impl Send for Cq {}
unsafe impl Sync for Cq {}

impl Cq {
    pub fn create(ctx: *mut ibv::ibv_context, depth: i32) -> Result<Cq, std::io::Error> {
        // SAFETY: ctx is the IA's live context.
        let channel = unsafe { ibv::ibv_create_comp_channel(ctx) };
        if channel.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // Non-blocking, so a wait can poll() the fd with a timeout.
        // SAFETY: fd owned by the channel.
        unsafe {
            let fd = (*channel).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        // SAFETY: ctx and channel live; no cq_context needed.
        let cq = unsafe { ibv::ibv_create_cq(ctx, depth.max(1), std::ptr::null_mut(), channel, 0) };
        if cq.is_null() {
            let e = std::io::Error::last_os_error();
            // SAFETY: created above, unused.
            unsafe { ibv::ibv_destroy_comp_channel(channel) };
            return Err(e);
        }
        Ok(Cq { cq, channel, unacked: AtomicU32::new(0) })
    }

    #[inline]
    pub fn poll(&self, wc: &mut ibv::ibv_wc) -> bool {
        // SAFETY: live CQ; one entry into the caller's wc.
        unsafe { ibv::ibv_poll_cq(self.cq, 1, wc) > 0 }
    }

    /// Asks for an event on the next completion (any, or solicited only).
    pub fn arm(&self, solicited_only: bool) -> bool {
        // SAFETY: live CQ.
        unsafe { ibv::ibv_req_notify_cq(self.cq, solicited_only as i32) == 0 }
    }

    pub fn fd(&self) -> i32 {
        // SAFETY: live channel.
        unsafe { (*self.channel).fd }
    }

    /// Consumes pending channel events (non-blocking).
    pub fn drain_events(&self) {
        loop {
            let mut cq: *mut ibv::ibv_cq = std::ptr::null_mut();
            let mut ctx: *mut libc::c_void = std::ptr::null_mut();
            // SAFETY: live channel; the fd is non-blocking, so this returns at once.
            if unsafe { ibv::ibv_get_cq_event(self.channel, &mut cq, &mut ctx) } != 0 {
                break;
            }
            if self.unacked.fetch_add(1, Ordering::AcqRel) + 1 >= 64 {
                let n = self.unacked.swap(0, Ordering::AcqRel);
                // SAFETY: acknowledging events we took from this CQ.
                unsafe { ibv::ibv_ack_cq_events(self.cq, n) };
            }
        }
    }

    pub fn resize(&self, depth: i32) -> bool {
        // SAFETY: live CQ.
        unsafe { ibv::ibv_resize_cq(self.cq, depth) == 0 }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: all events are acked first, as destroy_cq requires; both objects are ours.
        unsafe {
            ibv::ibv_ack_cq_events(self.cq, self.unacked.swap(0, Ordering::AcqRel));
            let rc = ibv::ibv_destroy_cq(self.cq);
            if rc != 0 {
                log::warn!("ibv_destroy_cq: {}", std::io::Error::from_raw_os_error(rc));
            }
            ibv::ibv_destroy_comp_channel(self.channel);
        }
    }
}
