//! A queue pair: its send queue (a preallocated ring of work requests the
//! progress thread transmits and completes in order), its receive queue
//! (or the SRQ it takes receives from), and the state machine the core
//! drives (INIT on prepare, RTS once bound to a connection, ERROR).
//!
//! Posting takes the queue's own lock (shared only with the engine, for
//! the instant it copies a request out or completes one), writes into a
//! slot that already exists, and sends it on the connection if the engine
//! is free (on the on-node path: no syscall), else rings the progress
//! thread's doorbell. No allocation.

use super::Sock;
use super::cm::Id;
use super::cq::{Cq, CqInner};
use super::device::{MAX_SGE, Shared, lock};
use super::keys::{self, Mw, Pd, Region};
use super::progress::Cmd;
use super::spin::SpinLock;
use super::srq::{RecvRing, RecvWqe, Srq, SrqInner};
use dapl_core::backend::{Completion, CompletionKind, MwOps, QpCaps, QpOps, SendOp, SendRequest, WindowTarget};
use dat_abi::*;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// One scatter/gather entry, as the core hands it over.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Sge {
    pub addr: u64,
    pub len: u32,
    pub key: u32,
}

/// A post whose payload is this long or shorter may wait on a stream for
/// the burst it starts (`Progress::drive`): many in one TCP segment is
/// what the batching buys; a longer one fills segments of its own.
pub const SHORT_POST: u64 = 2048;

pub const RESET: u8 = 0;
pub const INIT: u8 = 1;
pub const RTS: u8 = 2;
pub const ERROR: u8 = 3;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WOp {
    #[default]
    Send,
    Write,
    WriteImm,
    Read,
    CmpSwap,
    FetchAdd,
    /// A window bind or invalidate: runs locally, in queue order.
    Window,
}

impl WOp {
    pub fn kind(self, invalidate: bool) -> CompletionKind {
        match self {
            WOp::Send => CompletionKind::Send,
            WOp::Write | WOp::WriteImm => CompletionKind::RdmaWrite,
            WOp::Read => CompletionKind::RdmaRead,
            WOp::CmpSwap => CompletionKind::CompareSwap,
            WOp::FetchAdd => CompletionKind::FetchAdd,
            WOp::Window if invalidate => CompletionKind::LocalInvalidate,
            WOp::Window => CompletionKind::WindowBind,
        }
    }
}

// A request not yet started is in state 0.
/// Transmitted; the target's response completes it.
pub const AWAIT: u8 = 1;
/// Ran locally (a window operation); completes when it reaches the front.
pub const RAN: u8 = 2;
/// Refused locally (bad lkey): completes in error at the front, and the QP fails.
pub const FAILED: u8 = 3;

#[derive(Clone, Copy, Debug, Default)]
pub struct Wqe {
    pub wr_id: u64,
    pub op: WOp,
    pub state: u8,
    pub signaled: bool,
    pub solicited: bool,
    pub nsge: u32,
    pub len: u64,
    pub raddr: u64,
    pub rkey: u32,
    pub imm: u32,
    pub cmp: u64,
    pub swap: u64,
    pub status: DAT_DTO_COMPLETION_STATUS,
    /// Windows: the key to take out of use first (0: none), the key to
    /// give and what it reaches (win_key 0: an invalidate or unbind).
    pub win_old: u32,
    pub win_key: u32,
    pub win: Option<Region>,
}

/// The send queue: slots [done, head) are live; [done, sent) have been
/// started (transmitted or run), [sent, head) wait for the progress thread.
pub struct SendQueue {
    cap: usize,
    /// Slots are a power of two (at least `cap`): a slot is an AND, not a
    /// division, several times per message.
    mask: u64,
    nsge: usize,
    pub head: u64,
    pub sent: u64,
    pub done: u64,
    wqes: Vec<Wqe>,
    sges: Vec<Sge>,
    /// A request failed locally: nothing after it is transmitted.
    halted: bool,
    keys: keys::KeyCache,
}

impl SendQueue {
    fn new(cap: usize, nsge: usize) -> SendQueue {
        let slots = cap.max(1).next_power_of_two();
        SendQueue { cap, mask: slots as u64 - 1, nsge, head: 0, sent: 0, done: 0, wqes: vec![Wqe::default(); slots], sges: vec![Sge::default(); slots * nsge], halted: false, keys: keys::KeyCache::default() }
    }

    #[inline]
    fn slot(&self, i: u64) -> usize {
        (i & self.mask) as usize
    }

    pub fn wqe(&self, i: u64) -> &Wqe {
        &self.wqes[self.slot(i)]
    }

    pub fn sges(&self, i: u64) -> &[Sge] {
        let s = self.slot(i);
        &self.sges[s * self.nsge..s * self.nsge + self.wqes[s].nsge as usize]
    }

    #[inline]
    fn push(&mut self, w: Wqe, sges: &[Sge]) -> Result<(), i32> {
        if self.head - self.done >= self.cap as u64 {
            return Err(libc::ENOMEM);
        }
        if sges.len() > self.nsge {
            return Err(libc::EINVAL);
        }
        let s = self.slot(self.head);
        self.wqes[s] = Wqe { nsge: sges.len() as u32, ..w };
        self.sges[s * self.nsge..s * self.nsge + sges.len()].copy_from_slice(sges);
        self.head += 1;
        Ok(())
    }
}

/// A registry of live QPs by number: a UD answer names its QP's port by it.
static QPS: Mutex<Option<HashMap<u32, Weak<QpInner>>>> = Mutex::new(None);

pub fn find(num: u32) -> Option<Arc<QpInner>> {
    lock(&QPS).as_ref().and_then(|m| m.get(&num)).and_then(|w| w.upgrade())
}

pub struct QpInner {
    pub num: u32,
    pub pd: u32,
    pub shared: Arc<Shared>,
    pub send_cq: Arc<CqInner>,
    pub recv_cq: Arc<CqInner>,
    pub srq: Option<Arc<SrqInner>>,
    pub context: usize,
    /// The DAT EP went (`Shared::forget_async`): no more async events.
    pub gone: AtomicBool,
    pub ud: bool,
    pub state: AtomicU8,
    pub sq: SpinLock<SendQueue>,
    pub rq: SpinLock<RecvRing>,
    pub send_sge: usize,
    /// Bumped by reset: a connection bound before no longer feeds this QP.
    pub epoch: AtomicU32,
    /// The progress thread found no receive for an arriving message and
    /// waits for one: a post must ring the doorbell.
    pub starved: AtomicBool,
    /// The progress engine's token of the connection this QP is bound to
    /// (0: none yet), so a post can send on it from the consumer's thread.
    pub conn: AtomicU64,
    /// Requests posted and not yet taken to transmit (head - sent, kept
    /// under the send queue's lock): the engine reads it without the lock
    /// to see that there is nothing to take, which it asks after every frame.
    pub unsent: AtomicU32,
    /// UD: the datagram socket and its port.
    pub udp: i32,
    pub udp_port: u16,
}

impl Drop for QpInner {
    fn drop(&mut self) {
        if self.udp >= 0 {
            // SAFETY: our socket, closed once (the progress thread dropped it from epoll).
            unsafe { libc::close(self.udp) };
        }
    }
}

impl QpInner {
    #[inline]
    pub fn is(&self, state: u8) -> bool {
        self.state.load(Ordering::Acquire) == state
    }

    pub fn complete_send(&self, w: &Wqe, status: DAT_DTO_COMPLETION_STATUS, byte_len: u32) {
        if w.signaled || status != DAT_DTO_SUCCESS {
            let kind = w.op.kind(w.win_key == 0);
            self.send_cq.push(Completion { wr_id: w.wr_id, status, kind, byte_len, qp_num: self.num, ..Default::default() }, false);
        }
    }

    // The completion's fields one by one, as its fifteen callers have them
    // (a flush passes the zeros): a struct literal at each would be longer.
    #[allow(clippy::too_many_arguments)]
    pub fn complete_recv(&self, wr_id: u64, status: DAT_DTO_COMPLETION_STATUS, kind: CompletionKind, byte_len: u32, imm: Option<u32>, src_qp: u32, solicited: bool) {
        self.recv_cq.push(Completion { wr_id, status, kind, byte_len, imm, qp_num: self.num, src_qp }, solicited);
    }

    /// Into the error state: every request not yet completed completes as
    /// flushed, in order (the receive queue too; an SRQ keeps its own).
    pub fn fail(&self) {
        self.state.store(ERROR, Ordering::Release);
        {
            let mut sq = self.sq.lock();
            self.flush_sq(&mut sq);
        }
        let mut rq = self.rq.lock();
        let mut w = RecvWqe::default();
        while rq.pop(&mut w) {
            self.complete_recv(w.wr_id, DAT_DTO_ERR_FLUSHED, CompletionKind::Recv, 0, None, 0, false);
        }
        drop(rq);
        self.shared.kick();
    }

    fn flush_sq(&self, sq: &mut SendQueue) {
        while sq.done < sq.head {
            let w = *sq.wqe(sq.done);
            sq.done += 1;
            self.complete_send(&w, DAT_DTO_ERR_FLUSHED, 0);
        }
        sq.sent = sq.head;
        sq.halted = false;
        self.unsent.store(0, Ordering::Release);
    }

    /// Completes what ran or failed locally at the front of the send queue.
    /// A local failure fails the QP.
    fn retire(&self, sq: &mut SendQueue) {
        while sq.done < sq.sent {
            let w = *sq.wqe(sq.done);
            match w.state {
                RAN => {
                    sq.done += 1;
                    self.complete_send(&w, DAT_DTO_SUCCESS, 0);
                }
                FAILED => {
                    sq.done += 1;
                    self.state.store(ERROR, Ordering::Release);
                    self.complete_send(&w, w.status, 0);
                    self.flush_sq(sq);
                    return;
                }
                _ => return,
            }
        }
    }

    /// The target's response to the oldest transmitted request. Returns
    /// false when nothing awaits one (a broken peer).
    pub fn on_response(&self, status: DAT_DTO_COMPLETION_STATUS, byte_len: u32) -> bool {
        let failed = {
            let mut sq = self.sq.lock();
            if self.is(ERROR) {
                return true;
            }
            self.retire(&mut sq);
            if sq.done >= sq.sent || sq.wqe(sq.done).state != AWAIT {
                return false;
            }
            let w = *sq.wqe(sq.done);
            sq.done += 1;
            if status == DAT_DTO_SUCCESS {
                self.complete_send(&w, status, byte_len);
                self.retire(&mut sq);
                false
            } else {
                self.state.store(ERROR, Ordering::Release);
                self.complete_send(&w, status, 0);
                self.flush_sq(&mut sq);
                true
            }
        };
        if failed || self.is(ERROR) {
            self.fail();
        }
        true
    }

    /// A cumulative ACK frame for the `n` oldest transmitted requests, under
    /// one taking of the queue's lock (msg_rate's ACKs count dozens). false:
    /// it acknowledges more than awaits one, or a READ or atomic (a broken
    /// peer).
    pub fn on_acks(&self, n: u64) -> bool {
        let mut n = n;
        self.ack_oldest(&mut n, false)
    }

    /// ACKs from the mapping's counter (`shm::Ring::take_acks`): they go to
    /// the oldest transmitted requests while those are ones the target
    /// ACKs. A READ or atomic at the front stops them: its response is a
    /// frame, written before any ACK of a later request was counted, and
    /// what is left waits in `credits` for it. false: ACKs with nothing
    /// transmitted to take them (a broken peer).
    pub fn take_credits(&self, credits: &mut u64) -> bool {
        self.ack_oldest(credits, true)
    }

    /// `n` ACKs to the oldest transmitted requests; `counted`: from the
    /// counter, whose ACKs may wait behind a response frame (else that is
    /// a broken peer).
    fn ack_oldest(&self, n: &mut u64, counted: bool) -> bool {
        let mut sq = self.sq.lock();
        if self.is(ERROR) {
            *n = 0;
            return true;
        }
        while *n > 0 {
            if sq.done >= sq.sent {
                return false;
            }
            let w = sq.wqe(sq.done);
            if w.state != AWAIT {
                // Ran or failed locally: `retire` takes it (called only
                // then, not once a request: 40 instructions a message).
                let before = sq.done;
                self.retire(&mut sq);
                if self.is(ERROR) {
                    break;
                }
                if sq.done == before {
                    return counted;
                }
                continue;
            }
            if matches!(w.op, WOp::Read | WOp::CmpSwap | WOp::FetchAdd) {
                return counted;
            }
            self.complete_send(w, DAT_DTO_SUCCESS, 0);
            sq.done += 1;
            *n -= 1;
        }
        // What ran locally behind the last one ACKed completes now too.
        if !self.is(ERROR) && sq.done < sq.sent && sq.wqe(sq.done).state != AWAIT {
            self.retire(&mut sq);
        }
        let failed = self.is(ERROR);
        drop(sq);
        if failed {
            self.fail();
        }
        true
    }

    /// The oldest request awaiting a response, if it is of `op`: its SGEs.
    pub fn awaiting(&self, out: &mut Vec<Sge>) -> Option<Wqe> {
        let mut sq = self.sq.lock();
        self.retire(&mut sq);
        if sq.done >= sq.sent {
            return None;
        }
        let w = *sq.wqe(sq.done);
        if w.state != AWAIT {
            return None;
        }
        out.clear();
        out.extend_from_slice(sq.sges(sq.done));
        Some(w)
    }

    /// Takes the next request to transmit, running window operations in
    /// queue order as it meets them. Its validated local segments go to `segs`.
    pub fn next_request(&self, segs: &mut Vec<(u64, u64)>) -> Option<Wqe> {
        if self.unsent.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut sq = self.sq.lock();
        let w = loop {
            if !self.is(RTS) || sq.halted || sq.sent >= sq.head {
                return None;
            }
            let i = sq.sent;
            let s = sq.slot(i);
            sq.sent += 1;
            self.unsent.store((sq.head - sq.sent) as u32, Ordering::Release);
            if sq.wqes[s].op == WOp::Window {
                let w = sq.wqes[s];
                if w.win_old != 0 && !keys::clear_window(w.win_old) && w.win_key == 0 {
                    sq.wqes[s].state = FAILED;
                    sq.wqes[s].status = DAT_DTO_ERR_LOCAL_PROTECTION;
                    sq.halted = true;
                } else {
                    if let Some(r) = w.win {
                        keys::set_window(w.win_key, r);
                    }
                    sq.wqes[s].state = RAN;
                }
                self.retire(&mut sq);
                continue;
            }
            // Sources need only the key; destinations (read, atomic result) local write.
            let need = match sq.wqes[s].op {
                WOp::Read | WOp::CmpSwap | WOp::FetchAdd => keys::LOCAL_WRITE,
                _ => 0,
            };
            segs.clear();
            let mut ok = true;
            // The fields apart: the key cache is used in place, not copied
            // out and back (its 48 bytes each way, every request).
            let q = &mut *sq;
            let base = s * q.nsge;
            for g in &q.sges[base..base + q.wqes[s].nsge as usize] {
                if g.len == 0 {
                    continue;
                }
                if q.keys.allows(g.key, g.addr, g.len as u64, need, self.pd) {
                    segs.push((g.addr, g.len as u64));
                } else {
                    ok = false;
                }
            }
            let atomic = matches!(sq.wqes[s].op, WOp::CmpSwap | WOp::FetchAdd);
            if atomic && segs.iter().map(|s| s.1).sum::<u64>() < 8 {
                ok = false;
            }
            if !ok {
                sq.wqes[s].state = FAILED;
                sq.wqes[s].status = if atomic { DAT_DTO_ERR_LOCAL_LENGTH } else { DAT_DTO_ERR_LOCAL_PROTECTION };
                sq.halted = true;
                self.retire(&mut sq);
                return None;
            }
            sq.wqes[s].state = AWAIT;
            break sq.wqes[s];
        };
        drop(sq);
        if self.is(ERROR) {
            self.fail();
        }
        Some(w)
    }

    /// A post's way out on the on-node path, under the send queue's lock:
    /// with nothing waiting ahead of it, checks its segments against their
    /// keys and records it as transmitted, for the caller to write into the
    /// peer's ring at once. false: it takes the queue (a failed key check
    /// then completes in order there).
    pub fn start_direct(&self, w: &Wqe, sges: &[Sge]) -> bool {
        let mut sq = self.sq.lock();
        if !self.is(RTS) || sq.halted || sq.sent != sq.head || sq.head - sq.done >= sq.cap as u64 {
            return false;
        }
        if !sges.iter().all(|g| g.len == 0 || sq.keys.allows(g.key, g.addr, g.len as u64, 0, self.pd)) {
            return false;
        }
        let s = sq.slot(sq.head);
        // Transmitted: its segments are not needed again.
        sq.wqes[s] = Wqe { nsge: 0, state: AWAIT, ..*w };
        sq.head += 1;
        sq.sent = sq.head;
        true
    }

    /// The next receive for an arriving message, from the RQ or the SRQ.
    pub fn take_recv(&self, out: &mut RecvWqe) -> bool {
        let pop = |out: &mut RecvWqe| match &self.srq {
            Some(s) => s.take(out),
            None => self.rq.lock().pop(out),
        };
        if pop(out) {
            return true;
        }
        // Ask for a doorbell, then look again: a post that slipped in
        // between either shows up now or sees the flag and rings.
        let flag = self.srq.as_ref().map_or(&self.starved, |s| &s.starved);
        flag.store(true, Ordering::SeqCst);
        if pop(out) {
            flag.store(false, Ordering::SeqCst);
            return true;
        }
        false
    }
}

pub struct Qp(pub Arc<QpInner>);

impl Drop for Qp {
    fn drop(&mut self) {
        if let Some(m) = lock(&QPS).as_mut() {
            m.remove(&self.0.num);
        }
        self.0.state.store(ERROR, Ordering::Release);
        // The engine may hold the QP's connection, and fail it, a while yet.
        self.0.shared.forget_async(&self.0.gone, self.0.context);
        if self.0.ud {
            self.0.shared.command(Cmd::UdRemove(self.0.num));
        }
    }
}

fn udp_socket(shared: &Shared) -> io::Result<(i32, u16)> {
    // SAFETY: a new datagram socket, closed by its QP.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let sa = shared.addr;
    let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
    // SAFETY: binding our socket to the IA address, port 0.
    if unsafe { libc::bind(fd, &sa as *const _ as *const libc::sockaddr, len) } != 0 {
        let e = io::Error::last_os_error();
        // SAFETY: ours.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let mut got = sa;
    let mut l = len;
    // SAFETY: reading back the bound address into a sockaddr_in.
    unsafe { libc::getsockname(fd, &mut got as *mut _ as *mut libc::sockaddr, &mut l) };
    let bufsz: i32 = 4 << 20;
    // SAFETY: plain socket options on our socket.
    unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &bufsz as *const i32 as *const libc::c_void, 4);
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &bufsz as *const i32 as *const libc::c_void, 4);
    }
    Ok((fd, u16::from_be(got.sin_port)))
}

impl Qp {
    pub fn create(shared: &Arc<Shared>, pd: &Pd, send_cq: &Cq, recv_cq: &Cq, srq: Option<&Srq>, caps: &QpCaps, context: DAT_HANDLE) -> io::Result<Qp> {
        static NEXT: AtomicU32 = AtomicU32::new(0x100);
        if caps.send_sge as usize > MAX_SGE || caps.recv_sge as usize > MAX_SGE {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // Queues hold exactly what was asked: the core sizes its cookie
        // rings (twice the depth) and consumers their EVDs on that.
        let depth = |n: u32| n.max(1) as usize;
        let (udp, udp_port) = if caps.datagram { udp_socket(shared)? } else { (-1, 0) };
        let num = NEXT.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
        let inner = Arc::new(QpInner {
            num,
            pd: pd.id,
            shared: shared.clone(),
            send_cq: send_cq.0.clone(),
            recv_cq: recv_cq.0.clone(),
            srq: srq.map(|s| s.0.clone()),
            context: context as usize,
            gone: AtomicBool::new(false),
            ud: caps.datagram,
            state: AtomicU8::new(RESET),
            sq: SpinLock::new(SendQueue::new(depth(caps.send_wr), caps.send_sge.max(1) as usize)),
            rq: SpinLock::new(RecvRing::new(if srq.is_some() { 1 } else { depth(caps.recv_wr) }, caps.recv_sge.max(1) as usize)),
            send_sge: caps.send_sge.max(1) as usize,
            epoch: AtomicU32::new(0),
            starved: AtomicBool::new(false),
            conn: AtomicU64::new(0),
            unsent: AtomicU32::new(0),
            udp,
            udp_port,
        });
        lock(&QPS).get_or_insert_with(HashMap::new).insert(num, Arc::downgrade(&inner));
        if caps.datagram {
            shared.command(Cmd::UdAdd(inner.clone()));
        }
        Ok(Qp(inner))
    }
}

/// The remote privileges a window grants, in our terms.
fn window_access(privs: DAT_MEM_PRIV_FLAGS) -> u32 {
    let mut a = 0;
    if privs & DAT_MEM_PRIV_REMOTE_READ_FLAG != 0 {
        a |= keys::REMOTE_READ;
    }
    if privs & DAT_MEM_PRIV_REMOTE_WRITE_FLAG != 0 {
        a |= keys::REMOTE_WRITE;
    }
    if privs & DAT_IB_MEM_PRIV_REMOTE_ATOMIC != 0 {
        a |= keys::REMOTE_ATOMIC;
    }
    a
}

impl Qp {
    fn window_op(&self, wr_id: u64, signaled: bool, old: u32, key: u32, win: Option<Region>) -> Result<(), i32> {
        let w = Wqe { wr_id, op: WOp::Window, signaled, win_old: old, win_key: key, win, ..Default::default() };
        self.enqueue(w, &[])
    }

    #[inline]
    fn enqueue(&self, w: Wqe, sges: &[Sge]) -> Result<(), i32> {
        let q = &*self.0;
        match q.state.load(Ordering::Acquire) {
            RTS => {
                let mut sq = q.sq.lock();
                // fail() marks the QP before it flushes under this lock: a
                // post that got here after that flush must not be left in a
                // queue nobody will send or flush again.
                if q.state.load(Ordering::Acquire) == ERROR {
                    drop(sq);
                    q.complete_send(&w, DAT_DTO_ERR_FLUSHED, 0);
                    return Ok(());
                }
                sq.push(w, sges)?;
                q.unsent.store((sq.head - sq.sent) as u32, Ordering::Release);
                drop(sq);
                let small = !matches!(w.op, WOp::Send | WOp::Write | WOp::WriteImm) || w.len <= SHORT_POST;
                q.shared.drive(q.conn.load(Ordering::Acquire), false, small);
                Ok(())
            }
            // Verbs completes what is posted to a failed QP as flushed.
            ERROR => {
                q.complete_send(&w, DAT_DTO_ERR_FLUSHED, 0);
                Ok(())
            }
            _ => Err(libc::EINVAL),
        }
    }

    fn region_of(&self, t: &WindowTarget<Sock>, type2: bool) -> Region {
        let mr = t.mr.region;
        Region { addr: t.addr, len: t.len, access: window_access(t.privs), pd: mr.pd, qp: if type2 { self.0.num } else { 0 }, window: true }
    }
}

impl QpOps<Sock> for Qp {
    #[inline]
    fn num(&self) -> u32 {
        self.0.num
    }

    fn prepare(&self) -> io::Result<()> {
        self.0.state.store(if self.0.ud { RTS } else { INIT }, Ordering::Release);
        Ok(())
    }

    fn to_error(&self) {
        self.0.fail();
    }

    fn reset(&self) -> io::Result<()> {
        let q = &*self.0;
        q.state.store(RESET, Ordering::Release);
        q.epoch.fetch_add(1, Ordering::AcqRel);
        {
            let mut sq = q.sq.lock();
            sq.done = sq.head;
            sq.sent = sq.head;
            sq.halted = false;
            q.unsent.store(0, Ordering::Release);
        }
        q.rq.lock().clear();
        q.starved.store(false, Ordering::Release);
        q.conn.store(0, Ordering::Release);
        self.prepare()
    }

    #[inline]
    fn post_send(&self, wr_id: u64, sges: &[Sge], req: &SendRequest, flags: DAT_COMPLETION_FLAGS) -> Result<(), i32> {
        let signaled = flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG) == 0;
        let solicited = flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG != 0;
        if let Some(dest) = req.ud {
            return super::ud::post_send(&self.0, wr_id, sges, dest, req.imm, signaled, solicited);
        }
        if self.0.ud {
            return Err(libc::EINVAL);
        }
        let len: u64 = sges.iter().map(|s| s.len as u64).sum();
        if len > super::device::MAX_MSG as u64 {
            return Err(libc::EINVAL);
        }
        let op = match req.op {
            SendOp::Send => WOp::Send,
            SendOp::RdmaWrite => WOp::Write,
            SendOp::RdmaRead => WOp::Read,
            SendOp::RdmaWriteImm => WOp::WriteImm,
            SendOp::CompareSwap => WOp::CmpSwap,
            SendOp::FetchAdd => WOp::FetchAdd,
        };
        let (raddr, rkey) = req.remote.map_or((0, 0), |r| (r.virtual_address, r.rmr_context));
        let w = Wqe {
            wr_id,
            op,
            signaled,
            solicited,
            len,
            raddr,
            rkey,
            imm: req.imm,
            cmp: req.atomic.0,
            swap: req.atomic.1,
            ..Default::default()
        };
        // On the on-node path, with nothing queued ahead: straight into
        // the peer's ring, if the engine is free (`Engine::post_direct`).
        let q = &*self.0;
        if matches!(op, WOp::Send | WOp::Write | WOp::WriteImm) && q.unsent.load(Ordering::Acquire) == 0 {
            let token = q.conn.load(Ordering::Acquire);
            let mut sent = false;
            if token != 0 && q.is(RTS) && q.shared.try_engine(|e| sent = e.post_direct(token, q, &w, sges)) && sent {
                return Ok(());
            }
        }
        self.enqueue(w, sges)
    }

    #[inline]
    fn post_recv(&self, wr_id: u64, sges: &[Sge]) -> Result<(), i32> {
        let q = &*self.0;
        if q.srq.is_some() {
            return Err(libc::EINVAL);
        }
        match q.state.load(Ordering::Acquire) {
            RESET => return Err(libc::EINVAL),
            ERROR => {
                q.complete_recv(wr_id, DAT_DTO_ERR_FLUSHED, CompletionKind::Recv, 0, None, 0, false);
                return Ok(());
            }
            _ => {}
        }
        let mut rq = q.rq.lock();
        // As for sends: a flush that ran before we took the lock will not run again.
        if q.state.load(Ordering::Acquire) == ERROR {
            drop(rq);
            q.complete_recv(wr_id, DAT_DTO_ERR_FLUSHED, CompletionKind::Recv, 0, None, 0, false);
            return Ok(());
        }
        rq.push(wr_id, sges)?;
        drop(rq);
        // A plain load first (the swap is a locked instruction): a taker
        // that flagged it did so before its last look under this queue's
        // lock, so our push either was in that look or sees the flag.
        if q.starved.load(Ordering::Acquire) && q.starved.swap(false, Ordering::SeqCst) {
            q.shared.drive(q.conn.load(Ordering::Acquire), true, false);
        }
        Ok(())
    }

    fn post_invalidate(&self, wr_id: u64, signaled: bool, rkey: u32) -> Result<(), i32> {
        self.window_op(wr_id, signaled, rkey, 0, None)
    }

    fn post_bind(&self, wr_id: u64, signaled: bool, mw: &Mw, rkey: u32, target: &WindowTarget<Sock>) -> Result<(), i32> {
        if mw.pd != self.0.pd {
            return Err(libc::EINVAL);
        }
        let r = self.region_of(target, true);
        self.window_op(wr_id, signaled, 0, rkey, Some(r))
    }

    fn bind_type1(&self, wr_id: u64, signaled: bool, mw: &Mw, target: Option<&WindowTarget<Sock>>) -> Result<(), i32> {
        if mw.pd != self.0.pd {
            return Err(libc::EINVAL);
        }
        let old = mw.rkey();
        match target {
            Some(t) => {
                let r = self.region_of(t, false);
                let key = mw.rekey();
                // The old key may not be bound: that is no failure for a rebind.
                self.window_op(wr_id, signaled, old, key, Some(r))
            }
            None => {
                let w = Wqe { wr_id, op: WOp::Window, signaled, ..Default::default() };
                keys::clear_window(old);
                mw.rekey();
                self.enqueue(w, &[])
            }
        }
    }

    fn connect_via(&self, id: &Id, _responder: u8, _initiator: u8) -> io::Result<()> {
        let q = &self.0;
        if q.ud {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        q.state.store(RTS, Ordering::Release);
        q.shared.command(Cmd::Bind { id: id.key(), qp: q.clone(), epoch: q.epoch.load(Ordering::Acquire) });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_queue_of_five_takes_five_and_keeps_each_slot_across_its_wrap() {
        // 5 asked for, 8 slots allocated: the 6th post must still be refused.
        let mut q = SendQueue::new(5, 2);
        for round in 0..40u64 {
            while q.push(Wqe { wr_id: q.head, ..Default::default() }, &[Sge { addr: q.head, len: 1, key: 3 }]).is_ok() {}
            assert_eq!(q.head - q.done, 5, "round {round}");
            for i in q.done..q.head {
                assert_eq!((q.wqe(i).wr_id, q.sges(i).len(), q.sges(i)[0].addr), (i, 1, i));
            }
            q.done += 1 + round % 4;
        }
        assert_eq!(q.push(Wqe::default(), &[Sge::default(); 3]), Err(libc::EINVAL));
    }
}
