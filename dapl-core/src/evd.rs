//! Event dispatchers.
//!
//! DTO and RMR-bind streams are a backend CQ that dequeue reads directly.
//! Connection, CR, async and software events are a bounded software queue
//! filled by the connection manager thread or dat_evd_post_se. A waiter
//! sleeps on the CQ's completion channel and the queue's eventfd together.

use crate::state::Provider;
use crate::cno::{self, Cno};
use crate::dto;
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::backend::{Completion, CqOps, DeviceOps};
use crate::wake::{self, Wake};
use dat_abi::status::{INTERNAL, error, guard, guard_or, invalid_arg, invalid_handle, invalid_state, no_resources};
use dat_abi::*;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

pub struct Evd<T: Provider> {
    pub ia: &'static Ia<T>,
    ia_handle: usize,
    pub flags: DAT_EVD_FLAGS,
    qlen: AtomicI32,
    pub cq: Option<T::Cq>,
    sw: Mutex<VecDeque<DAT_EVENT>>,
    /// Completions already taken off the CQ (by threshold waits and CNO
    /// checks) but not yet dequeued; read before the CQ to keep order.
    pending: Mutex<VecDeque<Completion>>,
    /// sw + pending length, read without locking on the fast path.
    queued: AtomicUsize,
    wake: Wake,
    cno: AtomicUsize,
    enabled: AtomicBool,
    waitable: AtomicBool,
    waiting: AtomicBool,
    /// EPs, PSPs and RSPs pointing at this EVD; it cannot be freed while any do.
    pub users: AtomicUsize,
    /// Software events dropped because the queue was full, and CQ overruns.
    pub overflows: AtomicUsize,
    /// The CQ overran: completions were lost, and may be still.
    pub overran: AtomicBool,
    pub counters: crate::counters::Counters<{ crate::counters::EVD_COUNT }>,
}

// Queued events carry consumer and provider pointers as plain data, only
// handed back to the consumer; everything shared is behind atomics or locks.
unsafe impl<T: Provider> Send for Evd<T> {}
unsafe impl<T: Provider> Sync for Evd<T> {}

pub const RANK: u8 = 1;


impl<T: Provider> Object for Evd<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_EVD;
    const INVALID: u32 = DAT_INVALID_HANDLE_EVD_REQUEST;
}

const KNOWN_FLAGS: DAT_EVD_FLAGS = DAT_EVD_SOFTWARE_FLAG
    | DAT_EVD_CR_FLAG
    | DAT_EVD_DTO_FLAG
    | DAT_EVD_CONNECTION_FLAG
    | DAT_EVD_RMR_BIND_FLAG
    | DAT_EVD_ASYNC_FLAG;

fn empty_event() -> DAT_EVENT {
    // SAFETY: DAT_EVENT is plain C data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

impl<T: Provider> Evd<T> {
    /// Queues a software-stream event (connection, CR, async, software) and
    /// wakes a waiter and the CNO. Returns false if the queue was full.
    pub fn post(&self, self_handle: DAT_EVD_HANDLE, mut ev: DAT_EVENT) -> bool {
        ev.evd_handle = self_handle;
        {
            let mut q = self.sw.lock().unwrap_or_else(|e| e.into_inner());
            if q.len() >= self.qlen.load(Ordering::Acquire).max(1) as usize {
                self.overflows.fetch_add(1, Ordering::Relaxed);
                log::warn!("EVD {self_handle:p} full: event {:#x} dropped", ev.event_number);
                return false;
            }
            q.push_back(ev);
            self.queued.fetch_add(1, Ordering::AcqRel);
        }
        self.wake.signal();
        self.notify_cno(self_handle);
        true
    }

    fn notify_cno(&self, me: DAT_EVD_HANDLE) {
        let cno = self.cno.load(Ordering::Acquire);
        if cno != 0 && self.enabled.load(Ordering::Acquire) {
            if let Ok(c) = handle::get::<Cno<T>>(cno as DAT_HANDLE) {
                c.trigger(me);
            }
        }
    }

    /// Takes the next event without blocking: queued software events and
    /// already-drained completions first, then the CQ itself.
    #[inline(always)]
    fn take(&self, me: DAT_EVD_HANDLE, out: &mut DAT_EVENT) -> bool {
        if self.queued.load(Ordering::Acquire) != 0 && self.take_queued(me, out) {
            return true;
        }
        if let Some(cq) = &self.cq {
            let mut wc = Completion::default();
            // Completions of freed EPs are skipped, not reported.
            loop {
                self.counters.bump(DCNT_EVD_DEQUEUE_POLL, 1);
                if !cq.poll(&mut wc) {
                    break;
                }
                self.counters.bump(DCNT_EVD_DEQUEUE_POLL_FOUND, 1);
                if dto::event_from_completion::<T>(&wc, me, out) {
                    return true;
                }
            }
        }
        false
    }

    fn take_queued(&self, me: DAT_EVD_HANDLE, out: &mut DAT_EVENT) -> bool {
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(wc) = pending.pop_front() {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                if dto::event_from_completion::<T>(&wc, me, out) {
                    return true;
                }
            }
        }
        if let Some(ev) = self.sw.lock().unwrap_or_else(|e| e.into_inner()).pop_front() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            // SAFETY: gettid has no preconditions; the kernel's id is what gdb shows.
            log::debug!("EVD {me:p}: event {:#x} taken by thread {}", ev.event_number, unsafe { libc::gettid() });
            *out = ev;
            return true;
        }
        false
    }

    /// Moves completions from the CQ into `pending` until `want` events are
    /// queued or the CQ is empty; returns how many are queued.
    fn fill(&self, want: usize) -> usize {
        let Some(cq) = &self.cq else { return self.queued.load(Ordering::Acquire) };
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        self.move_polled(cq, &mut pending, want);
        self.queued.load(Ordering::Acquire)
    }

    /// Polls the CQ into `pending` (its lock held) until `want` events are
    /// queued or the CQ is empty; true if any moved. Each is counted as it
    /// is queued, so a dequeue on another thread reads `pending` (waiting
    /// for its lock) before the CQ.
    fn move_polled(&self, cq: &T::Cq, pending: &mut VecDeque<Completion>, want: usize) -> bool {
        let mut moved = false;
        let mut wc = Completion::default();
        while self.queued.load(Ordering::Acquire) < want && cq.poll(&mut wc) {
            pending.push_back(wc);
            self.queued.fetch_add(1, Ordering::AcqRel);
            moved = true;
        }
        moved
    }

    /// Moves every completion now on the CQ into `pending` and counts the
    /// queued completions whose wr_id `mine` picks: how an EP about to reset
    /// its QP sees what the device has flushed without taking it from the
    /// consumer.
    pub fn collect(&self, mine: impl Fn(u64) -> bool) -> usize {
        let Some(cq) = &self.cq else { return 0 };
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let moved = self.move_polled(cq, &mut pending, usize::MAX);
        let n = pending.iter().filter(|wc| mine(wc.wr_id)).count();
        drop(pending);
        if moved {
            // A waiter that polled the CQ just before these left it sleeps on
            // a channel that will not fire for them.
            self.wake.signal();
        }
        n
    }

    /// True when an event is ready (draining one completion if needed), for
    /// the CNO's scan.
    pub fn has_event(&self) -> bool {
        self.fill(1) > 0
    }

    /// The backend's look for a completion before a sleep is prepared
    /// (`CqOps::linger`); true when one is there.
    pub fn linger(&self) -> bool {
        self.cq.as_ref().is_some_and(|cq| cq.linger())
    }

    /// Arms the CQ so the next completion signals the channel.
    pub fn arm(&self) {
        if let Some(cq) = &self.cq {
            cq.arm(false);
        }
    }

    /// The fds a sleeper watches for this EVD, with stale wakeups cleared.
    pub fn fds(&self) -> [i32; 2] {
        self.wake.clear();
        match &self.cq {
            Some(cq) => {
                cq.drain_events();
                [self.wake.fd(), cq.fd()]
            }
            None => [self.wake.fd(), -1],
        }
    }

    pub fn attach_cno(&self, cno: usize) {
        self.cno.store(cno, Ordering::Release);
    }
}

pub unsafe extern "C" fn create<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    qlen: DAT_COUNT,
    cno_h: DAT_CNO_HANDLE,
    flags: DAT_EVD_FLAGS,
    out: *mut DAT_EVD_HANDLE,
) -> DAT_RETURN {
    guard("dat_evd_create", || {
        let ia = match handle::get::<Ia<T>>(ia_h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        if qlen <= 0 || qlen > ia.device.limits().max_cqe {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        if flags == 0 || flags & !KNOWN_FLAGS != 0 {
            return invalid_arg(DAT_INVALID_ARG4);
        }
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG5);
        }
        match create_evd::<T>(ia, ia_h, qlen, cno_h, flags) {
            Ok(h) => {
                // SAFETY: checked non-null.
                unsafe { *out = h };
                DAT_SUCCESS
            }
            Err(e) => e,
        }
    })
}

/// Creates an EVD; also used by ia_open for the async EVD it must provide.
pub fn create_evd<T: Provider>(
    ia: &'static Ia<T>,
    ia_h: DAT_IA_HANDLE,
    qlen: DAT_COUNT,
    cno_h: DAT_CNO_HANDLE,
    flags: DAT_EVD_FLAGS,
) -> Result<DAT_EVD_HANDLE, DAT_RETURN> {
    let cno = if cno_h.is_null() {
        None
    } else {
        match handle::get::<Cno<T>>(cno_h) {
            Ok(c) if std::ptr::eq(c.ia, ia) => Some(c),
            _ => return Err(invalid_handle(DAT_INVALID_HANDLE_CNO)),
        }
    };
    let cq = if flags & (DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG) != 0 {
        match ia.device.create_cq(qlen) {
            Ok(cq) => Some(cq),
            Err(e) => {
                log::warn!("creating a CQ of {qlen}: {e}");
                return Err(no_resources(DAT_RESOURCE_TEVD));
            }
        }
    } else {
        None
    };
    let wake = Wake::new().ok_or(no_resources(DAT_RESOURCE_MEMORY))?;
    let h = handle::insert(Evd {
        ia,
        ia_handle: ia_h as usize,
        flags,
        qlen: AtomicI32::new(qlen),
        cq,
        sw: Mutex::new(VecDeque::new()),
        pending: Mutex::new(VecDeque::new()),
        queued: AtomicUsize::new(0),
        wake,
        cno: AtomicUsize::new(0),
        enabled: AtomicBool::new(true),
        waitable: AtomicBool::new(true),
        waiting: AtomicBool::new(false),
        users: AtomicUsize::new(0),
        overflows: AtomicUsize::new(0),
        overran: AtomicBool::new(false),
        counters: crate::counters::Counters::new(),
    }, ia.table());
    if let Some(cq) = &handle::get::<Evd<T>>(h).expect("just created").cq {
        cq.set_context(h);
    }
    if let Some(c) = cno {
        c.attach(h);
        handle::get::<Evd<T>>(h).expect("just created").attach_cno(cno_h as usize);
    }
    ia.adopt::<Evd<T>>(h, RANK, destroy::<T>);
    Ok(h)
}

pub fn destroy<T: Provider>(h: DAT_HANDLE) {
    if let Ok(evd) = handle::get::<Evd<T>>(h) {
        evd.ia.disown::<Evd<T>>(h);
        cno::detach_from::<T>(evd.cno.swap(0, Ordering::AcqRel), h);
        handle::remove::<Evd<T>>(h);
    }
}

fn get<T: Provider>(h: DAT_EVD_HANDLE) -> Result<&'static Evd<T>, DAT_RETURN> {
    handle::get::<Evd<T>>(h)
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("dat_evd_free", || {
        let evd = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        if evd.users.load(Ordering::Acquire) != 0 {
            return invalid_state(DAT_INVALID_STATE_EVD_IN_USE);
        }
        if evd.ia.is_async_evd(h) {
            // The IA's async EVD goes with the IA.
            return invalid_state(DAT_INVALID_STATE_EVD_ASYNC);
        }
        destroy::<T>(h);
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_EVD_HANDLE, _mask: DAT_EVD_PARAM_MASK, out: *mut DAT_EVD_PARAM) -> DAT_RETURN {
    guard("dat_evd_query", || {
        let evd = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        p.ia_handle = evd.ia_handle as DAT_IA_HANDLE;
        p.evd_qlen = evd.qlen.load(Ordering::Acquire);
        p.evd_state = (if evd.enabled.load(Ordering::Acquire) { DAT_EVD_STATE_ENABLED } else { DAT_EVD_STATE_DISABLED })
            | (if evd.waitable.load(Ordering::Acquire) { DAT_EVD_STATE_WAITABLE } else { DAT_EVD_STATE_UNWAITABLE });
        p.cno_handle = evd.cno.load(Ordering::Acquire) as DAT_CNO_HANDLE;
        p.evd_flags = evd.flags;
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn resize<T: Provider>(h: DAT_EVD_HANDLE, qlen: DAT_COUNT) -> DAT_RETURN {
    guard("dat_evd_resize", || {
        let evd = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        if qlen <= 0 || qlen > evd.ia.device.limits().max_cqe {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        if (qlen as usize) < evd.queued.load(Ordering::Acquire) {
            return invalid_state(0);
        }
        if let Some(cq) = &evd.cq {
            if !cq.resize(qlen) {
                return no_resources(DAT_RESOURCE_TEVD);
            }
        }
        evd.qlen.store(qlen, Ordering::Release);
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn post_se<T: Provider>(h: DAT_EVD_HANDLE, event: *const DAT_EVENT) -> DAT_RETURN {
    guard("dat_evd_post_se", || {
        let evd = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        if evd.flags & DAT_EVD_SOFTWARE_FLAG == 0 {
            return invalid_arg(DAT_INVALID_ARG1);
        }
        // SAFETY: null-checked consumer event.
        let Some(ev) = (unsafe { event.as_ref() }) else { return invalid_arg(DAT_INVALID_ARG2) };
        if ev.event_number != DAT_SOFTWARE_EVENT {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        let mut copy = empty_event();
        copy.event_number = DAT_SOFTWARE_EVENT;
        // SAFETY: reading the member the event number names.
        copy.event_data.software_event_data = unsafe { ev.event_data.software_event_data };
        if evd.post(h, copy) { DAT_SUCCESS } else { error(DAT_QUEUE_FULL, 0) }
    })
}

#[inline]
pub unsafe extern "C" fn dequeue<T: Provider>(h: DAT_EVD_HANDLE, event: *mut DAT_EVENT) -> DAT_RETURN {
    guard("dat_evd_dequeue", || {
        let evd = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(out) = (unsafe { event.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG2) };
        // Plain DAT_QUEUE_EMPTY, without the error class bit: the reference
        // returns it so, and programs (dtest -p) compare for it exactly.
        evd.counters.bump(DCNT_EVD_DEQUEUE, 1);
        if evd.take(h, out) {
            evd.counters.bump(DCNT_EVD_DEQUEUE_FOUND, 1);
            DAT_SUCCESS
        } else {
            evd.counters.bump(DCNT_EVD_DEQUEUE_NOT_FOUND, 1);
            DAT_QUEUE_EMPTY
        }
    })
}

/// C-unwind: the consumer may cancel a thread sleeping here (`wake::cancellable`).
pub unsafe extern "C-unwind" fn wait<T: Provider>(
    h: DAT_EVD_HANDLE,
    timeout: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
) -> DAT_RETURN {
    let deadline = wake::Deadline::new(timeout);
    // The checks, the claim and the first round under one deferral and one
    // guard: a wait whose event is already there costs no more than that.
    let begun = dat_abi::cancel::deferred(|| guard_or("dat_evd_wait", Err(INTERNAL), || {
        let (evd, claim) = begin_wait::<T>(h, threshold, event)?;
        // SAFETY: begin_wait refused a null event pointer.
        let out = unsafe { &mut *event };
        // An event already there for a wait on one: taken as a dequeue
        // takes it, without a round's set-up (a third of such a wait's cost).
        if threshold == 1 && evd.take(h, out) {
            return Ok((evd, claim, wake::Step::Done(DAT_SUCCESS)));
        }
        Ok((evd, claim, wait_round::<T>(evd, h, &deadline, threshold as usize, out, 0)))
    }));
    let (evd, _claim, first) = match begun {
        Ok(b) => b,
        Err(e) => return e,
    };
    let r = match first {
        wake::Step::Done(r) => r,
        first => {
            // SAFETY: as above.
            let out = unsafe { &mut *event };
            wake::go_on("dat_evd_wait", first, |woke| wait_round::<T>(evd, h, &deadline, threshold as usize, out, woke))
        }
    };
    // SAFETY: null-checked consumer out-parameter.
    if let Some(n) = unsafe { nmore.as_mut() } {
        *n = evd.queued.load(Ordering::Acquire) as DAT_COUNT;
    }
    r
}

/// The checks before a wait, and the waiter's claim on the EVD.
fn begin_wait<T: Provider>(h: DAT_EVD_HANDLE, threshold: DAT_COUNT, event: *mut DAT_EVENT) -> Result<(&'static Evd<T>, wake::Claim<'static>), DAT_RETURN> {
    let evd = get::<T>(h)?;
    if threshold <= 0 || threshold > evd.qlen.load(Ordering::Acquire) {
        return Err(invalid_arg(DAT_INVALID_ARG3));
    }
    if event.is_null() {
        return Err(invalid_arg(DAT_INVALID_ARG4));
    }
    if !evd.waitable.load(Ordering::Acquire) {
        return Err(invalid_state(DAT_INVALID_STATE_EVD_UNWAITABLE));
    }
    if evd.cno.load(Ordering::Acquire) != 0 && evd.enabled.load(Ordering::Acquire) {
        // DAT: an EVD feeding an enabled CNO is waited on through the CNO.
        return Err(invalid_state(DAT_INVALID_STATE_EVD_CONFIG_NOTIFY));
    }
    let claim = wake::Claim::take(&evd.waiting).ok_or(invalid_state(DAT_INVALID_STATE_EVD_WAITER))?;
    evd.counters.bump(DCNT_EVD_WAIT, 1);
    Ok((evd, claim))
}

/// `woke`: which of the EVD's fds ended the last sleep (bit 0 the software
/// queue's, bit 1 the CQ channel's).
fn wait_round<T: Provider>(evd: &Evd<T>, h: DAT_EVD_HANDLE, deadline: &wake::Deadline, threshold: usize, out: &mut DAT_EVENT, woke: u64) -> wake::Step<[i32; 2]> {
    use wake::Step::{Done, Sleep};
    if woke & 1 != 0 {
        evd.counters.bump(DCNT_EVD_WAIT_NOTIFY, 1);
    }
    if woke & 2 != 0 {
        evd.counters.bump(DCNT_EVD_DTO_CALLBACK, 1);
    }
    let mut ready = || if threshold <= 1 { evd.take(h, out) } else { evd.fill(threshold) >= threshold && evd.take(h, out) };
    if ready() {
        return Done(DAT_SUCCESS);
    }
    if !evd.waitable.load(Ordering::Acquire) {
        return Done(invalid_state(DAT_INVALID_STATE_EVD_UNWAITABLE));
    }
    // The backend's look first, before the wakeups are cleared and the CQ
    // armed: a completion it finds costs none of their system calls, nor
    // the arming's word to the peer that we sleep (the sock provider's
    // on-node waits: four system calls and a wakeup of its thread a wait).
    if evd.linger() && ready() {
        return Done(DAT_SUCCESS);
    }
    let fds = evd.fds();
    evd.arm();
    // A completion may have landed between the check and the arm.
    if ready() {
        return Done(DAT_SUCCESS);
    }
    match deadline.remaining() {
        Ok(left) => {
            evd.counters.bump(DCNT_EVD_WAIT_BLOCKED, 1);
            Sleep(fds, left)
        }
        Err(()) => Done(error(DAT_TIMEOUT_EXPIRED, 0)),
    }
}

pub unsafe extern "C" fn modify_cno<T: Provider>(h: DAT_EVD_HANDLE, cno_h: DAT_CNO_HANDLE) -> DAT_RETURN {
    guard("dat_evd_modify_cno", || {
        let evd = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        let new = if cno_h.is_null() {
            None
        } else {
            match handle::get::<Cno<T>>(cno_h) {
                Ok(c) if std::ptr::eq(c.ia, evd.ia) => Some(c),
                _ => return invalid_handle(DAT_INVALID_HANDLE_CNO),
            }
        };
        cno::detach_from::<T>(evd.cno.swap(0, Ordering::AcqRel), h);
        if let Some(c) = new {
            c.attach(h);
            evd.attach_cno(cno_h as usize);
        }
        DAT_SUCCESS
    })
}

fn set_flag<T: Provider>(h: DAT_EVD_HANDLE, which: fn(&Evd<T>) -> &AtomicBool, value: bool) -> DAT_RETURN {
    match get::<T>(h) {
        Ok(evd) => {
            which(evd).store(value, Ordering::Release);
            // Waiters re-check their state when woken.
            evd.wake.signal();
            DAT_SUCCESS
        }
        Err(e) => e,
    }
}

pub unsafe extern "C" fn enable<T: Provider>(h: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("dat_evd_enable", || set_flag::<T>(h, |e| &e.enabled, true))
}

pub unsafe extern "C" fn disable<T: Provider>(h: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("dat_evd_disable", || set_flag::<T>(h, |e| &e.enabled, false))
}

pub unsafe extern "C" fn set_unwaitable<T: Provider>(h: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("dat_evd_set_unwaitable", || set_flag::<T>(h, |e| &e.waitable, false))
}

pub unsafe extern "C" fn clear_unwaitable<T: Provider>(h: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("dat_evd_clear_unwaitable", || set_flag::<T>(h, |e| &e.waitable, true))
}

/// Builds a software-stream event for the connection manager and async paths.
pub fn new_event(number: DAT_EVENT_NUMBER) -> DAT_EVENT {
    let mut ev = empty_event();
    ev.event_number = number;
    ev
}

/// Validates an EVD handle given to another object's create call and checks
/// it carries the stream that object needs (minor: which argument).
pub fn require<T: Provider>(h: DAT_EVD_HANDLE, flag: DAT_EVD_FLAGS, minor: u32) -> Result<&'static Evd<T>, DAT_RETURN> {
    let evd = get::<T>(h).map_err(|_| invalid_handle(minor))?;
    if evd.flags & flag == 0 {
        return Err(invalid_handle(minor));
    }
    Ok(evd)
}
