//! An in-memory backend for the core's unit tests: there is no RDMA on the
//! build host. Sends complete at once, successfully; receives wait until
//! the QP goes to error, when they flush, as on a real device; connection
//! ids only remember their context, and tests feed the core connection
//! events by hand. Every object counts itself, so tests can check that the
//! core gives back what it takes.

use crate::backend::*;
use dat_abi::*;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub struct Mock;

/// Live backend objects of each kind, for leak checks.
pub static LIVE_PDS: AtomicUsize = AtomicUsize::new(0);
pub static LIVE_QPS: AtomicUsize = AtomicUsize::new(0);
pub static LIVE_IDS: AtomicUsize = AtomicUsize::new(0);
pub static LIVE_CQS: AtomicUsize = AtomicUsize::new(0);
pub static LIVE_MRS: AtomicUsize = AtomicUsize::new(0);
pub static LIVE_MWS: AtomicUsize = AtomicUsize::new(0);
pub static LIVE_SRQS: AtomicUsize = AtomicUsize::new(0);

/// Every live-object counter, named, in one order (the mock provider exports these).
pub fn live_objects() -> [(&'static str, usize); 7] {
    let l = |c: &AtomicUsize| c.load(Ordering::Acquire);
    [
        ("pd", l(&LIVE_PDS)),
        ("qp", l(&LIVE_QPS)),
        ("id", l(&LIVE_IDS)),
        ("cq", l(&LIVE_CQS)),
        ("mr", l(&LIVE_MRS)),
        ("mw", l(&LIVE_MWS)),
        ("srq", l(&LIVE_SRQS)),
    ]
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Transport for Mock {
    type Device = Device;
    type Pd = Pd;
    type Mr = Mr;
    type Mw = Mw;
    type Srq = Srq;
    type Ah = Ah;
    type Path = ();
    type Cq = Cq;
    type Qp = Qp;
    type Sge = (u64, u32, u32);
    type ConnId = Id;
    type Events = Events;

    const MAX_CONNECT_PDATA: usize = 56;
    const MAX_ACCEPT_PDATA: usize = 196;
    const MAX_REJECT_PDATA: usize = 144;
    const MAX_UD_CONNECT_PDATA: usize = 180;
    const MAX_UD_ACCEPT_PDATA: usize = 136;

    fn sge(addr: u64, len: u32, key: u32) -> Self::Sge {
        (addr, len, key)
    }

    fn port_of(qual: DAT_CONN_QUAL) -> u16 {
        qual as u16
    }
}

/// No thread: tests hand the core its connection events themselves.
/// Counted, so a test can tell what an IA tears down while its (here
/// imaginary) CM thread still runs.
pub struct Events;

pub static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);
/// How many IAs' events were live when the last CQ was destroyed.
pub static EVENTS_AT_LAST_CQ_FREE: AtomicUsize = AtomicUsize::new(0);

impl Drop for Events {
    fn drop(&mut self) {
        LIVE_EVENTS.fetch_sub(1, Ordering::AcqRel);
    }
}

pub struct Device {
    limits: Limits,
    addr: libc::sockaddr_storage,
}

impl DeviceOps<Mock> for Device {
    fn open(params: &str) -> Result<Device, DAT_RETURN> {
        if params != "mock0 1" {
            return Err(dat_abi::status::error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE));
        }
        let limits = Limits {
            max_qp: 64,
            max_qp_wr: 256,
            max_sge: 8,
            max_sge_rd: 8,
            max_cq: 64,
            max_cqe: 1024,
            max_mr: 64,
            max_mr_size: 1 << 30,
            max_pd: 16,
            max_qp_rd_atom: 16,
            max_res_rd_atom: 256,
            max_qp_init_rd_atom: 16,
            max_mw: 16,
            max_srq: 16,
            max_srq_wr: 256,
            max_srq_sge: 8,
            max_msg_size: 1 << 20,
            mtu: 1024,
            atomics: true,
            windows: true,
            windows_type2: true,
            fw_ver: "1.2.3".into(),
            ..Default::default()
        };
        // SAFETY: all-zero is a valid sockaddr_storage; only the family is set.
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        addr.ss_family = libc::AF_INET as libc::sa_family_t;
        Ok(Device { limits, addr })
    }

    fn name(&self) -> &str {
        "mock0"
    }

    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn ia_address(&self) -> DAT_IA_ADDRESS_PTR {
        &self.addr as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![("DAT_IB_DEVICE_NAME", "mock0".into())]
    }

    fn address(&self) -> &libc::sockaddr_storage {
        &self.addr
    }

    fn alloc_pd(&self) -> io::Result<Pd> {
        LIVE_PDS.fetch_add(1, Ordering::AcqRel);
        Ok(Pd)
    }

    fn create_cq(&self, _depth: i32) -> io::Result<Cq> {
        LIVE_CQS.fetch_add(1, Ordering::AcqRel);
        Ok(Cq(Arc::new(Mutex::new(VecDeque::new()))))
    }

    fn create_qp(&self, _pd: &Pd, send_cq: &Cq, recv_cq: &Cq, _srq: Option<&Srq>, _caps: &QpCaps, _context: DAT_HANDLE) -> io::Result<Qp> {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        LIVE_QPS.fetch_add(1, Ordering::AcqRel);
        Ok(Qp {
            num: NEXT.fetch_add(1, Ordering::Relaxed),
            send: send_cq.0.clone(),
            recv: recv_cq.0.clone(),
            posted: Arc::new(Mutex::new(Vec::new())),
        })
    }

    fn create_conn_id(&self, context: usize, datagram: bool) -> io::Result<Id> {
        Ok(Id::new(context, datagram))
    }

    fn listen(&self, port: u16, context: usize, datagram: bool) -> io::Result<(Id, u16)> {
        Ok((Id::new(context, datagram), if port == 0 { 40000 } else { port }))
    }

    fn start_events(&self, _on_cm: CmHandler<Mock>, _on_async: AsyncHandler, _tick: Tick) -> io::Result<Events> {
        LIVE_EVENTS.fetch_add(1, Ordering::AcqRel);
        Ok(Events)
    }
}

pub struct Pd;

impl Drop for Pd {
    fn drop(&mut self) {
        LIVE_PDS.fetch_sub(1, Ordering::AcqRel);
    }
}

impl PdOps<Mock> for Pd {
    fn register(&self, _addr: *mut libc::c_void, len: usize, _privs: DAT_MEM_PRIV_FLAGS) -> io::Result<Mr> {
        LIVE_MRS.fetch_add(1, Ordering::AcqRel);
        Ok(Mr(len as u32))
    }

    fn alloc_mw(&self, _type2: bool) -> io::Result<Mw> {
        LIVE_MWS.fetch_add(1, Ordering::AcqRel);
        Ok(Mw(AtomicU32::new(0x100)))
    }

    fn create_srq(&self, _max_wr: u32, _max_sge: u32, _limit: u32) -> io::Result<Srq> {
        LIVE_SRQS.fetch_add(1, Ordering::AcqRel);
        Ok(Srq)
    }

    fn create_ah(&self, _path: &()) -> io::Result<Ah> {
        Ok(Ah(Box::new(0)))
    }
}

pub struct Mr(u32);

impl Drop for Mr {
    fn drop(&mut self) {
        LIVE_MRS.fetch_sub(1, Ordering::AcqRel);
    }
}

impl MrOps for Mr {
    fn lkey(&self) -> u32 {
        self.0 | 0x1000_0000
    }

    fn rkey(&self) -> u32 {
        self.0 | 0x2000_0000
    }
}

pub struct Mw(AtomicU32);

impl Drop for Mw {
    fn drop(&mut self) {
        LIVE_MWS.fetch_sub(1, Ordering::AcqRel);
    }
}

impl MwOps for Mw {
    fn is_type2(&self) -> bool {
        true
    }

    fn rkey(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }

    fn next_rkey(&self) -> u32 {
        self.rkey() + 1
    }

    fn set_rkey(&self, rkey: u32) {
        self.0.store(rkey, Ordering::Release)
    }
}

pub struct Srq;

impl Drop for Srq {
    fn drop(&mut self) {
        LIVE_SRQS.fetch_sub(1, Ordering::AcqRel);
    }
}

impl SrqOps<Mock> for Srq {
    fn post_recv(&self, _wr_id: u64, _sges: &[(u64, u32, u32)]) -> Result<(), i32> {
        Ok(())
    }

    fn set_context(&self, _h: DAT_HANDLE) {}

    fn resize(&self, _max_wr: u32) -> io::Result<()> {
        Ok(())
    }

    fn set_limit(&self, _limit: u32) -> io::Result<()> {
        Ok(())
    }
}

pub struct Ah(Box<u8>);

impl AhOps for Ah {
    fn raw(&self) -> *mut libc::c_void {
        &*self.0 as *const u8 as *mut libc::c_void
    }
}

type Queue = Arc<Mutex<VecDeque<Completion>>>;

pub struct Cq(Queue);

impl Drop for Cq {
    fn drop(&mut self) {
        LIVE_CQS.fetch_sub(1, Ordering::AcqRel);
        EVENTS_AT_LAST_CQ_FREE.store(LIVE_EVENTS.load(Ordering::Acquire), Ordering::Release);
    }
}

impl CqOps for Cq {
    fn poll(&self, out: &mut Completion) -> bool {
        match lock(&self.0).pop_front() {
            Some(c) => {
                *out = c;
                true
            }
            None => false,
        }
    }

    fn arm(&self, _solicited_only: bool) -> bool {
        true
    }

    fn fd(&self) -> i32 {
        -1
    }

    fn drain_events(&self) {}

    fn resize(&self, _depth: i32) -> bool {
        true
    }

    fn set_context(&self, _h: DAT_HANDLE) {}
}

pub struct Qp {
    num: u32,
    send: Queue,
    recv: Queue,
    /// Receives waiting for data: (wr_id, bytes they can take).
    posted: Arc<Mutex<Vec<(u64, u32)>>>,
}

impl Drop for Qp {
    fn drop(&mut self) {
        LIVE_QPS.fetch_sub(1, Ordering::AcqRel);
    }
}

impl QpOps<Mock> for Qp {
    fn num(&self) -> u32 {
        self.num
    }

    fn prepare(&self) -> io::Result<()> {
        Ok(())
    }

    fn to_error(&self) {
        let (posted, recv, num) = (self.posted.clone(), self.recv.clone(), self.num);
        let flush = move || {
            let flushed = std::mem::take(&mut *lock(&posted));
            let mut q = lock(&recv);
            for (wr_id, _) in flushed {
                q.push_back(Completion { wr_id, status: DAT_DTO_ERR_FLUSHED, kind: CompletionKind::Recv, qp_num: num, ..Default::default() });
            }
        };
        match FLUSH_LATE_MS.load(Ordering::Relaxed) {
            0 => flush(),
            ms => {
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                    flush();
                });
            }
        }
    }

    fn reset(&self) -> io::Result<()> {
        // As mlx5's (and mlx4's, hns's) library does: the QP's completions
        // still on its CQs go, and so does whatever it has not flushed.
        lock(&self.posted).clear();
        lock(&self.recv).retain(|c| c.qp_num != self.num);
        lock(&self.send).retain(|c| c.qp_num != self.num);
        Ok(())
    }

    fn post_send(&self, wr_id: u64, sges: &[(u64, u32, u32)], req: &SendRequest, flags: DAT_COMPLETION_FLAGS) -> Result<(), i32> {
        if sges.iter().any(|s| s.2 == 0) {
            // A zero key stands for a bad one: the request completes in error.
            lock(&self.send).push_back(Completion { wr_id, status: DAT_DTO_ERR_LOCAL_PROTECTION, qp_num: self.num, ..Default::default() });
            return Ok(());
        }
        if flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG) == 0 {
            let kind = if req.op == SendOp::Send { CompletionKind::Send } else { CompletionKind::Other };
            lock(&self.send).push_back(Completion { wr_id, status: DAT_DTO_SUCCESS, kind, qp_num: self.num, ..Default::default() });
        }
        Ok(())
    }

    fn post_recv(&self, wr_id: u64, sges: &[(u64, u32, u32)]) -> Result<(), i32> {
        lock(&self.posted).push((wr_id, sges.iter().map(|s| s.1).sum()));
        Ok(())
    }

    fn post_invalidate(&self, wr_id: u64, signaled: bool, _rkey: u32) -> Result<(), i32> {
        if INVALIDATE_FAILS.load(Ordering::Relaxed) {
            // As a device's: the failure completes even unsignaled, and
            // leaves the QP in error, so what follows is flushed.
            lock(&self.send).push_back(Completion { wr_id, status: DAT_DTO_ERR_LOCAL_PROTECTION, kind: CompletionKind::LocalInvalidate, ..Default::default() });
            return Ok(());
        }
        if signaled {
            lock(&self.send).push_back(Completion { wr_id, status: DAT_DTO_SUCCESS, kind: CompletionKind::LocalInvalidate, ..Default::default() });
        }
        Ok(())
    }

    fn post_bind(&self, wr_id: u64, signaled: bool, _mw: &Mw, _rkey: u32, _target: &WindowTarget<Mock>) -> Result<(), i32> {
        if INVALIDATE_FAILS.load(Ordering::Relaxed) {
            lock(&self.send).push_back(Completion { wr_id, status: DAT_DTO_ERR_FLUSHED, kind: CompletionKind::WindowBind, ..Default::default() });
            return Ok(());
        }
        if signaled {
            lock(&self.send).push_back(Completion { wr_id, status: DAT_DTO_SUCCESS, kind: CompletionKind::WindowBind, ..Default::default() });
        }
        Ok(())
    }

    fn bind_type1(&self, wr_id: u64, signaled: bool, mw: &Mw, target: Option<&WindowTarget<Mock>>) -> Result<(), i32> {
        match target {
            Some(t) => self.post_bind(wr_id, signaled, mw, 0, t),
            None => self.post_invalidate(wr_id, signaled, 0),
        }
    }

    fn connect_via(&self, _id: &Id, _responder: u8, _initiator: u8) -> io::Result<()> {
        // A device takes a while here; a test widens the window it leaves.
        let us = QP_MOVE_US.load(std::sync::atomic::Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
        match QP_MOVE_FAILS.load(std::sync::atomic::Ordering::Relaxed) {
            0 => Ok(()),
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// How long moving a QP to RTS takes, in µs (0 by default).
pub static QP_MOVE_US: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Invalidating a window fails (and flushes the binds behind it).
pub static INVALIDATE_FAILS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A QP moved to ERROR flushes its receives this many ms later, on a
/// thread of its own, as a device does (0: at once).
pub static FLUSH_LATE_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The errno moving a QP to RTS fails with (0: it does not).
pub static QP_MOVE_FAILS: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

impl Qp {
    /// Delivers a message of `len` bytes into the oldest posted receive.
    pub fn deliver(&self, len: u32) -> bool {
        let mut posted = lock(&self.posted);
        if posted.is_empty() {
            return false;
        }
        let (wr_id, room) = posted.remove(0);
        let status = if len <= room { DAT_DTO_SUCCESS } else { DAT_DTO_ERR_LOCAL_LENGTH };
        lock(&self.recv).push_back(Completion { wr_id, status, kind: CompletionKind::Recv, byte_len: len, qp_num: self.num, ..Default::default() });
        true
    }
}

/// What the mock connection manager remembers about an id.
#[derive(Default)]
pub struct IdState {
    pub context: usize,
    pub datagram: bool,
    /// The calls made on it, in order, for tests to check.
    pub calls: Vec<&'static str>,
    pub destroyed: bool,
}

static IDS: Mutex<Vec<IdState>> = Mutex::new(Vec::new());

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Id(usize);

impl Id {
    fn new(context: usize, datagram: bool) -> Id {
        let mut ids = lock(&IDS);
        ids.push(IdState { context, datagram, ..Default::default() });
        LIVE_IDS.fetch_add(1, Ordering::AcqRel);
        Id(ids.len() - 1)
    }

    /// A connection request's id, as the connection manager makes one.
    pub fn request() -> Id {
        Id::new(0, false)
    }

    fn note(&self, call: &'static str) {
        lock(&IDS)[self.0].calls.push(call);
    }

    /// Runs `f` on what the mock knows about this id.
    pub fn with<R>(&self, f: impl FnOnce(&IdState) -> R) -> R {
        f(&lock(&IDS)[self.0])
    }
}

impl ConnIdOps<Mock> for Id {
    fn set_context(&self, context: usize) {
        lock(&IDS)[self.0].context = context;
    }

    fn is_datagram(&self) -> bool {
        self.with(|s| s.datagram)
    }

    fn resolve_addr(&self, _src: &libc::sockaddr_storage, _dst: &libc::sockaddr_storage, _timeout_ms: i32) -> io::Result<()> {
        self.note("resolve_addr");
        Ok(())
    }

    fn resolve_route(&self, _timeout_ms: i32) -> io::Result<()> {
        self.note("resolve_route");
        Ok(())
    }

    fn connect(&self, _p: &ConnParams) -> io::Result<()> {
        self.note("connect");
        Ok(())
    }

    fn accept(&self, _p: &ConnParams) -> io::Result<()> {
        self.note("accept");
        Ok(())
    }

    fn reject(&self, consumer_pdata: Option<&[u8]>) {
        self.note(if consumer_pdata.is_some() { "reject(consumer)" } else { "reject" });
    }

    fn establish(&self) {
        self.note("establish");
    }

    fn disconnect(&self) -> io::Result<()> {
        self.note("disconnect");
        Ok(())
    }

    fn local_port(&self) -> u16 {
        4791
    }

    fn peer_address(&self) -> libc::sockaddr_storage {
        // SAFETY: all-zero is a valid (AF_UNSPEC) sockaddr_storage.
        unsafe { std::mem::zeroed() }
    }

    fn destroy(self) {
        let mut ids = lock(&IDS);
        assert!(!ids[self.0].destroyed, "connection id {} destroyed twice", self.0);
        ids[self.0].destroyed = true;
        LIVE_IDS.fetch_sub(1, Ordering::AcqRel);
    }
}
