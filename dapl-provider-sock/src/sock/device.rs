//! Opening an IA: which local IPv4 address it speaks from (from dat.conf's
//! ia_params, "<netdev> <n>" or "<IPv4 address> <n>"; the number is
//! accepted for symmetry with verbs entries and ignored), the honest limits
//! of a software transport, and the per-IA shared state the progress
//! thread, the event thread and every object of the IA reach.

use super::Sock;
use super::clock;
use super::cm::{self, Events, Id};
use super::eventfd::{Doorbell, eventfd, signal};
use super::progress::{self, Cmd};
use super::qp::{QpInner, Sge, Wqe};
use super::spin::SpinLock;
use super::ticker::Ticker;
use dapl_core::backend::{AsyncEvent, AsyncHandler, CmHandler, DeviceOps, Limits, QpCaps, Tick};
use dat_abi::status::error;
use dat_abi::*;
use std::collections::VecDeque;
use std::ffi::CStr;
use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How long consumers' empty polls find the engine taken before each
/// gives up its CPU (`Shared::consumer_pass`).
const BUSY_YIELD_NS: u64 = 20_000;

/// SGEs per request: the core's own ceiling.
pub const MAX_SGE: usize = 32;
/// Largest message: lengths travel as 32 bits; 1 GiB keeps sums of SGEs clear of overflow.
pub const MAX_MSG: u32 = 1 << 30;
/// Largest UD message: one datagram, as an InfiniBand 4K path MTU.
pub const UD_MTU: u32 = 4096;

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The IA's socket engine as a consumer's thread reaches it: a post or an
/// empty poll moves the connection's bytes itself when the engine is free,
/// instead of waking the progress thread (two context switches a hop). The
/// progress thread runs it the rest of the time (`progress`).
pub trait Engine: Send {
    /// A consumer found its queue empty: take what the on-node rings hold
    /// and send what waits. `polling`: count it as a consumer that polls
    /// (one about to sleep does not).
    /// Returns true when the consumer should give up its CPU for a moment
    /// (`sched_yield`): it has polled in vain long enough, or the thread
    /// must run to plan for it.
    fn consumer_pass(&mut self, polling: bool) -> bool;
    /// A request was posted for the connection `token`: send it now;
    /// `retry_stall`: a receive was posted for a message that waited;
    /// `small`: the request's frame is short (a stream may hold it back
    /// for the burst it starts).
    fn drive(&mut self, token: u64, retry_stall: bool, small: bool);
    /// A post on the on-node path with nothing queued ahead of it: write
    /// it into the peer's ring now. false: nothing done, it takes the queue.
    fn post_direct(&mut self, token: u64, qp: &QpInner, w: &Wqe, sges: &[Sge]) -> bool;
    /// A consumer is about to sleep: peers must ring the doorbell again.
    fn quiet(&mut self);
    /// The progress thread, before `epoll_wait`: on which epoll instance
    /// and for how long (ms) it may sleep, and whether that is a bare tick
    /// (consumers poll, no deadline is set).
    fn before_sleep(&mut self) -> (i32, i32, bool);
    /// The progress thread, after `epoll_wait` on `epfd`: serve what it
    /// reported.
    fn turn(&mut self, epfd: i32, events: &[libc::epoll_event]);
    /// The progress thread, stopping: close everything.
    fn shutdown(&mut self);
}

/// What an IA's threads and objects share.
pub struct Shared {
    /// The IA address, port 0.
    pub addr: libc::sockaddr_in,
    /// The progress thread's doorbell.
    pub bell: Doorbell,
    pub cmds: Mutex<VecDeque<Cmd>>,
    /// Connection and async events for the event thread, and its doorbell.
    pub events: Mutex<VecDeque<cm::Ev>>,
    pub ev_fd: i32,
    /// The context of the async event the event thread took from `events`
    /// and is handling now (0: none); set under `events`' lock.
    pub dispatching: AtomicUsize,
    pub stop: AtomicBool,
    /// Listening ports: the ids listening for connections and for UD
    /// resolutions on each (0: none). rdma_cm keeps these in separate port
    /// spaces; here one TCP listener serves both, the REQ says which.
    pub ports: Mutex<std::collections::HashMap<u16, [u64; 2]>>,
    /// The socket engine: the progress thread holds it except while it
    /// sleeps; a consumer only ever tries for it, so neither waits on the
    /// other. None before the thread starts and once it stopped.
    pub engine: SpinLock<Option<Box<dyn Engine>>>,
    /// A consumer went to sleep while the engine was busy: the thread
    /// turns doorbells on before it sleeps.
    pub quiet: AtomicBool,
    /// Passes consumers made on the engine (its own count, copied here at
    /// each): the progress thread reads it without taking the engine.
    pub passes: AtomicU64,
    /// The thread's tick while consumers poll (`ticker`).
    pub ticker: Ticker,
    /// Since when consumers' empty polls have found the engine taken (ns;
    /// 0: they got it last time).
    pub engine_busy_since: AtomicU64,
}

impl Shared {
    /// An IA's shared state at `addr`, before its threads start.
    pub fn new(addr: libc::sockaddr_in) -> io::Result<Shared> {
        Ok(Shared {
            addr,
            bell: Doorbell::new()?,
            cmds: Mutex::new(VecDeque::new()),
            events: Mutex::new(VecDeque::new()),
            ev_fd: eventfd()?,
            dispatching: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            ports: Mutex::new(std::collections::HashMap::new()),
            engine: SpinLock::new(None),
            quiet: AtomicBool::new(false),
            passes: AtomicU64::new(0),
            ticker: Ticker::new()?,
            engine_busy_since: AtomicU64::new(0),
        })
    }

    /// Wakes the progress thread: new work on some queue.
    #[inline]
    pub fn kick(&self) {
        self.bell.ring();
    }

    pub fn command(&self, c: Cmd) {
        lock(&self.cmds).push_back(c);
        self.kick();
    }

    /// Runs `f` on the engine if nobody holds it. false: busy or gone.
    #[inline]
    pub fn try_engine(&self, f: impl FnOnce(&mut dyn Engine)) -> bool {
        let Some(mut g) = self.engine.try_lock_polite() else { return false };
        match g.as_mut() {
            Some(e) => {
                f(&mut **e);
                true
            }
            None => false,
        }
    }

    /// A request waits on the connection `token` (0: none known yet): send
    /// it from this thread, or wake the progress thread if it is busy.
    #[inline]
    pub fn drive(&self, token: u64, retry_stall: bool, small: bool) {
        if token == 0 || !self.try_engine(|e| e.drive(token, retry_stall, small)) {
            self.kick();
        }
    }

    /// An empty poll: move what is there, if the engine is free.
    #[inline]
    pub fn consumer_pass(&self, polling: bool) {
        let mut idle = false;
        if self.try_engine(|e| idle = e.consumer_pass(polling)) {
            if self.engine_busy_since.load(Ordering::Relaxed) != 0 {
                self.engine_busy_since.store(0, Ordering::Relaxed);
            }
        } else {
            idle = self.engine_busy_long();
        }
        if idle {
            // SAFETY: no arguments; lets another runnable thread have this CPU.
            unsafe { libc::sched_yield() };
        }
    }

    /// The engine was held (or waited for) at every empty poll for
    /// `BUSY_YIELD_NS`: its holder is likely the progress thread, preempted
    /// on this consumer's CPU, or woken and waiting for that CPU. A consumer
    /// polling on regardless kept it off the CPU for the scheduler's whole
    /// slice: 64-byte streams of 1,000 messages stalled for milliseconds
    /// (perf: the consumer's samples in its empty dequeues, the pass itself
    /// 1%).
    #[cold]
    fn engine_busy_long(&self) -> bool {
        let now = clock::now_ns();
        let since = self.engine_busy_since.load(Ordering::Relaxed);
        if since == 0 {
            self.engine_busy_since.store(now.max(1), Ordering::Relaxed);
            return false;
        }
        now.saturating_sub(since) >= BUSY_YIELD_NS
    }

    /// A consumer is about to sleep on a completion channel.
    pub fn quiet(&self) {
        self.quiet.store(true, Ordering::SeqCst);
        self.try_engine(|e| e.quiet());
    }

    pub fn post_event(&self, e: cm::Ev) {
        lock(&self.events).push_back(e);
        signal(self.ev_fd);
    }

    /// Queues an async event about an object unless the object is `gone`
    /// (see `forget_async`): read under the queue's lock, so an event is
    /// either queued before the owner's purge or not at all.
    pub fn post_async(&self, gone: &AtomicBool, a: AsyncEvent) {
        let mut q = lock(&self.events);
        if gone.load(Ordering::Acquire) {
            return;
        }
        q.push_back(cm::Ev::Async(a));
        drop(q);
        signal(self.ev_fd);
    }

    /// The object whose async events name `context` is going: no event
    /// about it is queued after this, the queued ones are dropped, and one
    /// the event thread is handling is finished first. Its handle's slot
    /// may be reused at once, and a late event would name the new object
    /// (verbs gets the same from the kernel: a destroy waits for its
    /// object's events to be acknowledged).
    pub fn forget_async(&self, gone: &AtomicBool, context: usize) {
        gone.store(true, Ordering::Release);
        if context == 0 {
            return;
        }
        lock(&self.events).retain(|e| !matches!(e, cm::Ev::Async(a) if a.context() == context));
        // The event thread itself (a CNO agent it runs frees the object)
        // is past its use of the object. Agents run after the handler has
        // cleared `dispatching`, so one may also wait for another thread
        // freeing the object its event named.
        if !super::role::on_event_thread() {
            while self.dispatching.load(Ordering::Acquire) == context {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: our eventfd, closed once (the doorbell closes its own).
        unsafe { libc::close(self.ev_fd) };
    }
}

pub struct Device {
    name: String,
    netdev: Option<String>,
    addr: Box<libc::sockaddr_storage>,
    limits: Limits,
    pub shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// The IPv4 address of a netdev.
fn netdev_address(name: &str) -> Option<Ipv4Addr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: walking the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        // SAFETY: ifa_name is a C string for every entry.
        if ifa.ifa_addr.is_null() || unsafe { CStr::from_ptr(ifa.ifa_name) }.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: sa_family says this is a sockaddr_in.
        if unsafe { (*ifa.ifa_addr).sa_family } as i32 == libc::AF_INET {
            // SAFETY: as above.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            found = Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            break;
        }
    }
    // SAFETY: the list from getifaddrs above.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// The netdev that carries `ip`, if any.
fn netdev_of(ip: Ipv4Addr) -> Option<String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: walking the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        // SAFETY: sa_family says which sockaddr this is.
        if !ifa.ifa_addr.is_null() && unsafe { (*ifa.ifa_addr).sa_family } as i32 == libc::AF_INET {
            // SAFETY: as above; ifa_name is a C string.
            let (sin, name) = unsafe { (&*(ifa.ifa_addr as *const libc::sockaddr_in), CStr::from_ptr(ifa.ifa_name)) };
            if u32::from_be(sin.sin_addr.s_addr) == u32::from(ip) {
                found = Some(name.to_string_lossy().into_owned());
                break;
            }
        }
    }
    // SAFETY: the list from getifaddrs above.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// Whether some local interface has `ip` (binding to it would work).
fn is_local(ip: Ipv4Addr) -> bool {
    // SAFETY: a throwaway datagram socket, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return false;
    }
    let sa = sockaddr_in(ip, 0);
    // SAFETY: binding our socket to a full sockaddr_in.
    let rc = unsafe { libc::bind(fd, &sa as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_in>() as u32) };
    // SAFETY: ours.
    unsafe { libc::close(fd) };
    rc == 0
}

pub fn sockaddr_in(ip: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = port.to_be();
    sa.sin_addr.s_addr = u32::from(ip).to_be();
    sa
}

/// Parses ia_params into the address and the netdev it came from.
fn parse(params: &str) -> Result<(Ipv4Addr, Option<String>), String> {
    let mut words = params.split_whitespace();
    let first = words.next().ok_or("ia_params is empty; expected \"<netdev> 0\" or \"<IPv4 address> 0\"")?;
    if let Some(p) = words.next() {
        p.parse::<u32>().map_err(|_| format!("'{p}' in ia_params is not a number"))?;
    }
    if let Ok(ip) = first.parse::<Ipv4Addr>() {
        if !is_local(ip) {
            return Err(format!("{ip} is not an address of this host"));
        }
        return Ok((ip, None));
    }
    if first.parse::<std::net::Ipv6Addr>().is_ok() {
        return Err(format!("{first}: the sock transport speaks IPv4 only"));
    }
    if std::path::Path::new("/sys/class/net").join(first).exists() || netdev_address(first).is_some() {
        let ip = netdev_address(first).ok_or(format!("netdev {first} has no IPv4 address"))?;
        return Ok((ip, Some(first.to_owned())));
    }
    let present = std::fs::read_dir("/sys/class/net")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect::<Vec<_>>().join(", "))
        .unwrap_or_default();
    Err(format!("'{first}' is neither an IPv4 address nor a netdev ({present})"))
}

impl Device {
    fn open_addr(params: &str) -> Result<Device, DAT_RETURN> {
        let (ip, netdev) = parse(params).map_err(|m| {
            log::error!("ia_params \"{params}\": {m}");
            error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE)
        })?;
        let sin = sockaddr_in(ip, 0);
        // SAFETY: all-zero sockaddr_storage, then the sockaddr_in copied in.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: sockaddr_storage is larger and as aligned as sockaddr_in.
        unsafe { *(&mut ss as *mut _ as *mut libc::sockaddr_in) = sin };
        let fail = |e: io::Error| {
            log::error!("sock transport: starting the progress thread: {e}");
            dat_abi::status::no_resources(DAT_RESOURCE_MEMORY)
        };
        let shared = Arc::new(Shared::new(sin).map_err(fail)?);
        let thread = progress::start(shared.clone()).map_err(fail)?;
        // The adapter is the netdev the address lives on, however it was named.
        let netdev = netdev.or_else(|| netdev_of(ip));
        let name = netdev.clone().unwrap_or_else(|| ip.to_string());
        log::debug!("ia_params \"{params}\": sock transport at {ip}");
        Ok(Device { name, netdev, addr: Box::new(ss), limits: limits(), shared, thread: Some(thread) })
    }
}

/// What the transport offers. Queue depths are what rings of that size in
/// memory cost, not a hardware count; RDMA reads in flight are not bounded
/// by the transport, 16 is reported so peers size their queues alike.
fn limits() -> Limits {
    Limits {
        vendor_id: 0,
        vendor_part_id: 0,
        hw_ver: 1,
        fw_ver: env!("CARGO_PKG_VERSION").into(),
        max_qp: 65536,
        max_qp_wr: 16384,
        max_sge: MAX_SGE as i32,
        max_sge_rd: MAX_SGE as i32,
        max_cq: 65536,
        max_cqe: 1 << 20,
        max_mr: 1 << 24,
        max_mr_size: 1 << 46,
        max_pd: 65536,
        max_qp_rd_atom: 16,
        max_res_rd_atom: 1 << 20,
        max_qp_init_rd_atom: 16,
        max_mw: 1 << 20,
        max_srq: 65536,
        max_srq_wr: 16384,
        max_srq_sge: MAX_SGE as i32,
        max_msg_size: MAX_MSG,
        mtu: UD_MTU,
        atomics: true,
        windows: true,
        windows_type2: true,
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.kick();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The core's event thread stopped before this (Ia drops it first).
        super::cm::forget_ids_of(&self.shared);
    }
}

impl DeviceOps<Sock> for Device {
    fn open(params: &str) -> Result<Device, DAT_RETURN> {
        super::clock::init();
        Device::open_addr(params)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn ia_address(&self) -> DAT_IA_ADDRESS_PTR {
        &*self.addr as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            ("DAT_IB_DEVICE_NAME", self.name.clone()),
            ("DAT_IB_PORT_NUMBER", "1".into()),
            ("DAT_IB_PORT_STATUS", "ACTIVE".into()),
            ("DAT_IB_TRANSPORT_MTU", UD_MTU.to_string()),
            ("DAT_IB_NETDEV", self.netdev.clone().unwrap_or_default()),
        ]
    }

    fn address(&self) -> &libc::sockaddr_storage {
        &self.addr
    }

    fn alloc_pd(&self) -> io::Result<super::keys::Pd> {
        Ok(super::keys::Pd::new(self.shared.clone()))
    }

    fn create_conn_id(&self, context: usize, datagram: bool) -> io::Result<Id> {
        Ok(Id::create(&self.shared, context, datagram))
    }

    fn listen(&self, port: u16, context: usize, datagram: bool) -> io::Result<(Id, u16)> {
        cm::listen(&self.shared, port, context, datagram)
    }

    fn start_events(&self, on_cm: CmHandler<Sock>, on_async: AsyncHandler, tick: Tick) -> io::Result<Events> {
        Events::start(self.shared.clone(), on_cm, on_async, tick)
    }

    fn create_cq(&self, depth: i32) -> io::Result<super::cq::Cq> {
        super::cq::Cq::create(&self.shared, depth)
    }

    fn create_qp(
        &self,
        pd: &super::keys::Pd,
        send_cq: &super::cq::Cq,
        recv_cq: &super::cq::Cq,
        srq: Option<&super::srq::Srq>,
        caps: &QpCaps,
        context: DAT_HANDLE,
    ) -> io::Result<super::qp::Qp> {
        super::qp::Qp::create(&self.shared, pd, send_cq, recv_cq, srq, caps, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses_and_netdevs() {
        assert_eq!(parse("127.0.0.1 0").unwrap().0, Ipv4Addr::LOCALHOST);
        assert_eq!(parse("lo 0").unwrap(), (Ipv4Addr::LOCALHOST, Some("lo".into())));
        assert!(parse("").is_err());
        assert!(parse("lo x").is_err());
        assert!(parse("nosuchnetdev0 0").unwrap_err().contains("lo"));
        assert!(parse("192.0.2.77 0").is_err());
        assert!(parse("::1 0").is_err());
    }

    /// An engine with nothing to do.
    struct Idle;

    impl Engine for Idle {
        fn consumer_pass(&mut self, _: bool) -> bool {
            false
        }
        fn drive(&mut self, _: u64, _: bool, _: bool) {}
        fn post_direct(&mut self, _: u64, _: &QpInner, _: &Wqe, _: &[Sge]) -> bool {
            false
        }
        fn quiet(&mut self) {}
        fn before_sleep(&mut self) -> (i32, i32, bool) {
            (-1, 0, false)
        }
        fn turn(&mut self, _: i32, _: &[libc::epoll_event]) {}
        fn shutdown(&mut self) {}
    }

    #[test]
    fn a_consumer_gives_way_once_the_engine_stayed_taken() {
        // SAFETY: all-zero sockaddr_in is a valid (unused) address.
        let shared = Shared::new(unsafe { std::mem::zeroed() }).unwrap();
        let held = shared.engine.lock();
        // Taken at the first empty poll: the clock starts, no yield.
        assert!(!shared.engine_busy_long());
        std::thread::sleep(std::time::Duration::from_nanos(2 * BUSY_YIELD_NS));
        assert!(shared.engine_busy_long(), "a consumer kept polling an engine taken for longer than BUSY_YIELD_NS");
        assert!(shared.engine_busy_long());
        // A pass that gets the engine starts the clock again.
        drop(held);
        *shared.engine.lock() = Some(Box::new(Idle));
        shared.consumer_pass(true);
        assert_eq!(shared.engine_busy_since.load(Ordering::Relaxed), 0, "a pass that ran left the clock going");
        assert!(!shared.engine_busy_long());
    }
}
