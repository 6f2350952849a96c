//! The socket engine of an IA (`Progress`) and the thread that runs it
//! when no consumer does. The engine owns the listening sockets, every
//! connection's stream and rings, every UD QP's datagram socket, and an
//! eventfd doorbell that connection-manager calls (and posts that find it
//! busy) ring. It transmits what the send queues hold, places what arrives
//! straight into registered memory (receives, RDMA writes, atomics) and
//! answers reads, so RDMA-written data lands while the target's consumer
//! is busy elsewhere or spinning on its own memory without calling DAT.
//!
//! It sits in `Shared::engine` behind one lock. The thread holds it except
//! while it sleeps; a consumer's post (`Engine::drive`) or empty poll
//! (`Engine::consumer_pass`) only tries for it and runs it on its own
//! thread, which saves the two wakeups a hop costs otherwise. While
//! consumers poll, the thread sleeps on the quiet set (the doorbell alone)
//! with a short tick instead of on every socket (`sleep_plan`).
//!
//! Per connection it keeps one frame in flight in each direction. Output
//! is handshake frames first, then responses to the peer's requests (in
//! the order the requests came), then our QP's requests. Input is read in
//! 64 KiB gulps; large payloads go straight from the socket into their
//! destination with readv. A message that finds no posted receive stops
//! input on that stream until one is posted, as an RC QP with unlimited
//! RNR retries waits; responses queued meanwhile still go out.
//!
//! Each connection's state is a `conn::Conn`; `inbound` takes its input
//! and `outbound` writes its frames, both without the engine's tables.
//!
//! On the on-node path (`shm`) the same frames go through the
//! connection's rings: `fill` and `send_frame` pop and push there, and the
//! stream only brings doorbell bytes (drained) and the peer's end. Before
//! each `epoll_wait` the thread flags itself asleep on every ring it reads
//! (and on every full ring it waits to write), looks once more, and does
//! not sleep if a ring has work. Large RDMA requests may go by reference:
//! the target checks the rkey, then `shm::pull`/`shm::push_to` move the
//! bytes between the two processes.

use super::clock;
use super::cm::{self, Ev, IdInfo, IdState};
use super::conn::{Conn, Dest, End, InState, Phase, Resp, Then, errno};
use super::device::{Engine, Shared, lock};
use super::inbound::{self, by_reference, fill, recv_segs, refuse, remote_ok, scatter, take_payload, write_segs};
use super::keys;
use super::outbound::{add_trailer, direct_send, next_frame, publish_acks, send_frame};
use super::qp::{QpInner, RTS, Sge, WOp, Wqe};
use super::role;
use super::shm::{self, Shm};
use super::slab::Slab;
use super::srq::RecvWqe;
use super::tail;
use super::tune;
use super::ud::{self, Path};
use super::wire::{F_ACKS, F_CONSUMER, F_DATAGRAM, F_CMA, F_CMA_SENDS, F_IMM, F_PAD, F_SHM, F_SOLICITED, HDR, Hdr, MAGIC, MAX_CM_PDATA, Nak, Op};
use dapl_core::backend::{CmEventKind, CompletionKind};
use dat_abi::*;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What the rest of the transport asks the progress thread to do.
pub enum Cmd {
    Listen { id: u64, fd: i32 },
    Connect { id: u64, fd: i32, frame: Vec<u8> },
    Accept { id: u64, frame: Vec<u8> },
    Reject { id: u64, frame: Vec<u8> },
    Establish { id: u64 },
    Disconnect { id: u64 },
    Destroy { id: u64 },
    Bind { id: u64, qp: Arc<QpInner>, epoch: u32 },
    UdAdd(Arc<QpInner>),
    UdRemove(u32),
}

/// How long a DISC waits for the peer's before the connection is dropped.
const DISC_WAIT: Duration = Duration::from_secs(3);
/// How long an active end keeps dialing a port nobody listens on before
/// it reports the reject, and its first and longest pause between dials.
const DIAL_WINDOW: Duration = Duration::from_secs(2);
const DIAL_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// How long a connection request waits for a listener of its kind while
/// the other kind listens on its port (`on_req`), and how often it looks.
const REQ_GRACE: Duration = Duration::from_secs(1);
const REQ_RETRY: Duration = Duration::from_millis(2);
/// Responses a peer may have us owe before it is cut off (a well-behaved
/// peer is bounded by its send queue).
const MAX_RESP: usize = 1 << 16;

const BELL: u64 = 0;
/// The ticker's token (`ticker`): above the counted tokens, without the
/// connections' bit 63.
const TICK: u64 = (1 << 63) - 1;
/// How often the thread looks at the rings while a consumer polls them.
const TICK_MS: i32 = 1;
const TICK_NS: u64 = TICK_MS as u64 * 1_000_000;
/// `shm::OVERDUE_NS` for a doorbell skipped over ACKs alone: a tick of the
/// reader's dozing thread, which takes them itself once its consumer
/// stops. No data waits on them, only the completion
/// of a send whose sender is not polling for it (a polling one takes them,
/// one going to sleep sees them first). Rung at 10 µs, they woke the
/// thread of a reader that was only off its CPU for a moment, which then
/// took the CPU from its consumer as it came back: of the doorbells an
/// on-node ping-pong rang, a third were these (200,000 iterations: 183 of
/// 535, with the futex wakes that followed them).
const ACK_OVERDUE_NS: u64 = TICK_NS;
/// How long a consumer polls unseen before the thread plans for it
/// (`polling_unplanned`).
const REPLAN_NS: u64 = 100_000;
/// How long the thread leaves output a polling consumer kept back
/// (`flush_stale`), in nanoseconds.
const HOLD_NS: u64 = 100_000;
/// A frame this long or shorter (a payload of 256 bytes, an ACK in front)
/// shares a segment with the next (`write_some`, MSG_MORE): a longer one
/// goes in a system call of its own. Corked, a stream of 2 KiB sends over
/// a veth ran at 85 MB/s (0.04 M messages/s), 1 KiB at 77, 512 B at 68;
/// sent each at once, 330, 195 and 100 MB/s, as UCX's tcp; corking gains
/// from about 256 B down (8 B: 0.62 against 0.21 M/s).
const SHORT_FRAME: u64 = 256 + 2 * HDR as u64;
/// Open TCP streams a consumer's pass reads directly; past that, it asks
/// epoll which have data.
const DIRECT_READS: usize = 4;

pub fn start(shared: Arc<Shared>) -> io::Result<std::thread::JoinHandle<()>> {
    // SAFETY: plain syscall; checked.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let epq = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epq < 0 {
        let e = io::Error::last_os_error();
        // SAFETY: ours, unused.
        unsafe { libc::close(epfd) };
        return Err(e);
    }
    let mut p = Progress::new(shared.clone(), epfd);
    p.epq = epq;
    p.watch(p.shared.bell.fd(), BELL, libc::EPOLLIN as u32);
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: BELL };
    // SAFETY: the doorbell in the quiet set too.
    unsafe { libc::epoll_ctl(epq, libc::EPOLL_CTL_ADD, p.shared.bell.fd(), &mut ev) };
    watch_in(epq, p.shared.ticker.fd(), TICK);
    *shared.engine.lock() = Some(Box::new(p));
    let r = std::thread::Builder::new().name("daplsock-progress".into()).spawn({
        let shared = shared.clone();
        move || {
            role::become_progress_thread();
            run(&shared);
        }
    });
    if r.is_err() {
        // Nobody will run it: drop it (and its hold on `shared`) now.
        if let Some(mut p) = shared.engine.lock().take() {
            p.shutdown();
        }
    }
    r
}

/// The progress thread: holds the engine except while it sleeps in epoll.
fn run(shared: &Shared) {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    // A bare tick's plan, kept while consumers keep polling: (set, timeout,
    // their pass count when last seen).
    let mut ticking: Option<(i32, i32, u64)> = None;
    while !shared.stop.load(Ordering::Acquire) {
        let (on, timeout) = match ticking {
            Some((on, timeout, _)) => (on, timeout),
            None => match shared.engine.lock().as_mut() {
                Some(e) => {
                    let (on, timeout, tick) = e.before_sleep();
                    if tick {
                        ticking = Some((on, timeout, shared.passes.load(Ordering::Relaxed)));
                    }
                    (on, timeout)
                }
                None => return,
            },
        };
        // SAFETY: waiting on our epoll into our array.
        let n = unsafe { libc::epoll_wait(on, events.as_mut_ptr(), events.len() as i32, timeout) };
        if n < 0 && errno() != libc::EINTR {
            log::error!("sock progress: epoll_wait: {}", io::Error::last_os_error());
            std::thread::sleep(Duration::from_millis(10));
        }
        let got = &events[..n.max(0) as usize];
        if got.iter().any(|e| e.u64 == TICK) {
            shared.ticker.take();
        }
        // A tick that brought nothing while consumers kept polling (posts
        // count; empty polls push the ticker back themselves): their passes
        // do what its turn would (listeners wake the quiet set themselves),
        // and taking the engine from a polling consumer cost it a futex
        // wake at every tick (the tail of TCP latency).
        if let Some((_, _, seen)) = &mut ticking {
            let passes = shared.passes.load(Ordering::Relaxed);
            if got.iter().all(|e| e.u64 == TICK) && passes != *seen {
                *seen = passes;
                shared.ticker.arm_in(TICK_NS);
                continue;
            }
        }
        ticking = None;
        if let Some(e) = shared.engine.lock().as_mut() {
            e.turn(on, &events[..n.max(0) as usize]);
        }
    }
    let engine = shared.engine.lock().take();
    if let Some(mut e) = engine {
        e.shutdown();
    }
}

type HashMap<K, V> = super::hash::Map<K, V>;

struct Progress {
    shared: Arc<Shared>,
    epfd: i32,
    /// The quiet set: the doorbell alone, for sleeping while consumers poll.
    epq: i32,
    /// The thread sleeps on the quiet set now.
    on_quiet_set: bool,
    next: u64,
    listeners: HashMap<u64, (i32, u64)>,
    /// Tokens of connections carry bit 63 (`slab`); listeners' and UD
    /// sockets' count up from 1 (`token`), the doorbell's is 0.
    conns: Slab<Conn>,
    by_id: HashMap<u64, u64>,
    uds: HashMap<u64, Arc<QpInner>>,
    ud_by_num: HashMap<u32, u64>,
    ud_stalled: Vec<u64>,
    ud_wqe: RecvWqe,
    /// Connections on the on-node path, and those of them with work found
    /// before sleeping.
    shm_conns: Vec<u64>,
    ready: Vec<u64>,
    /// Connections whose input stopped on its budget with frames still
    /// buffered: no event will come for those bytes, so they go again.
    again: Vec<u64>,
    /// Consumer passes and posts run, and how many the thread had seen
    /// when it last decided how to sleep (`sleep_plan`).
    passes: u64,
    seen_passes: u64,
    /// When the thread last saw a consumer's pass or post (CLOCK_MONOTONIC ns).
    active_at: u64,
    /// A consumer polled since one last went to sleep (`quiet`): its posts
    /// count as passes. A consumer that waits does not poll, and its posts
    /// must not put the thread on the quiet set, which its next sleep
    /// would have to wake it from.
    poller: bool,
    /// A consumer pass's list of connections to serve, and a doorbell's
    /// (kept, not reallocated).
    pass_list: Vec<u64>,
    bell_list: Vec<u64>,
    pass_events: Vec<libc::epoll_event>,
    /// A consumer's pass is running (`hold_ack`), and the streams whose
    /// output is kept back: an ACK that pass kept, or posts (`drive`).
    in_pass: bool,
    held: Vec<(u64, u64)>,
    /// When the running pass began (CLOCK_MONOTONIC ns): what it holds back
    /// is held from then.
    pass_ns: u64,
    /// The thread serves what epoll and its look found: an ACK a consumer
    /// kept back stays kept (`hold_ack`).
    keep_held: bool,
    /// Consumer passes that polled (`Conn::post_gen`).
    pass_gen: u64,
    /// Frames taken in or sent out (a pass that moved none is idle), and
    /// when a polling consumer idle for a while gives its CPU away: with
    /// more spinning ranks than cores (MPI on a laptop or a CI machine) the
    /// peer it waits for may be waiting for that very CPU, and would get it
    /// only when the scheduler's time slice runs out.
    frames: u64,
    idle: tune::YieldClock,
    /// A deadline was set since the thread last planned its sleep.
    timers_changed: bool,
    /// Connections with a message waiting out its `rnr_due`.
    rnr: Vec<u64>,
    /// A consumer's call made a ring live that the thread's sleep did not
    /// cover: `hand_back` wakes it to plan again.
    replan: bool,
    /// When a consumer's passes began polling while the thread slept on a
    /// plan made for consumers that sleep, or last yielded for it (ns; 0:
    /// not since that plan).
    polled_since: u64,
    /// The thread was asked to plan again since its last plan.
    replan_asked: bool,
    /// When the thread planned its tick, or a consumer's pass last pushed
    /// it back (ns).
    tick_pushed: u64,
}

impl Progress {
    fn new(shared: Arc<Shared>, epfd: i32) -> Progress {
        Progress {
            shared,
            epfd,
            epq: -1,
            on_quiet_set: false,
            next: 1,
            listeners: HashMap::default(),
            conns: Slab::default(),
            by_id: HashMap::default(),
            uds: HashMap::default(),
            ud_by_num: HashMap::default(),
            ud_stalled: Vec::new(),
            ud_wqe: RecvWqe { wr_id: 0, sges: Vec::with_capacity(super::device::MAX_SGE) },
            shm_conns: Vec::new(),
            ready: Vec::new(),
            again: Vec::new(),
            passes: 0,
            seen_passes: 0,
            active_at: 0,
            poller: false,
            pass_list: Vec::new(),
            bell_list: Vec::new(),
            pass_events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
            in_pass: false,
            held: Vec::new(),
            pass_ns: 0,
            keep_held: false,
            pass_gen: 1,
            frames: 0,
            idle: tune::YieldClock::default(),
            timers_changed: false,
            rnr: Vec::new(),
            replan: false,
            polled_since: 0,
            replan_asked: false,
            tick_pushed: 0,
        }
    }

    /// A listener's or UD socket's token; connections take theirs from
    /// the slab, whose tokens this counter never reaches.
    fn token(&mut self) -> u64 {
        self.next += 1;
        debug_assert!(!Slab::<Conn>::is_slab_token(self.next));
        self.next
    }

    fn watch(&self, fd: i32, token: u64, events: u32) {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: registering our fd with our epoll instance.
        if unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            log::error!("sock: epoll_ctl add: {}", io::Error::last_os_error());
        }
    }

    fn rewatch(&self, fd: i32, token: u64, events: u32) {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: changing our fd's registration.
        unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_MOD, fd, &mut ev) };
    }

    fn post(&self, kind: CmEventKind, id: u64, pdata: Vec<u8>, ud: Option<(Path, u32)>) {
        if id != 0 {
            self.shared.post_event(Ev::Cm { kind, id, listen: 0, pdata, ud });
        }
    }

    fn set_connected(id: u64, v: bool) {
        if let Some(st) = cm::state_of(id) {
            lock(&st.info).connected = v;
        }
    }

    /// After a wakeup: the events epoll reported, commands, connections
    /// with work found before sleeping, timeouts.
    fn serve(&mut self, events: &[libc::epoll_event]) {
        self.awake();
        self.flush_stale();
        self.keep_held = true;
        self.dispatch(events);
        self.pump_ready();
        self.keep_held = false;
        self.expire();
        if !self.rnr.is_empty() {
            self.expire_rnr(clock::now_ns());
        }
    }

    /// Serves the connections `prepare_sleep` or `look` found with work.
    fn pump_ready(&mut self) {
        let ready = std::mem::take(&mut self.ready);
        for &t in &ready {
            self.guarded(t, |p| p.pump(t, false, true));
        }
        self.ready = ready;
        self.ready.clear();
    }

    /// Serves what epoll reported.
    fn dispatch(&mut self, events: &[libc::epoll_event]) {
        let mut bell = false;
        for ev in events {
            let (token, what) = (ev.u64, ev.events);
            if token == TICK {
                // Taken as the thread woke (`run`).
                continue;
            }
            if token == BELL {
                // The thread's own wakeup: a consumer's look that answered it
                // would leave the thread asleep on a plan the commands may
                // have changed (epoll, level-triggered, finds the fd no
                // longer readable and keeps sleeping).
                if !role::on_progress_thread() {
                    continue;
                }
                self.shared.bell.answer();
                bell = true;
                continue;
            }
            self.guarded(token, |p| p.on_event(token, what));
        }
        if bell {
            self.on_bell();
        }
    }

    /// Decides how the thread sleeps. While a consumer polls (it ran a
    /// pass since the last look, and none went to sleep since), the peers
    /// are not asked for doorbells and the thread does not wake for the
    /// sockets: the consumer's passes take the rings and the streams, and
    /// the thread sleeps on the quiet set (the doorbell alone) and looks at
    /// everything every `TICK_MS`, in case it stopped. Otherwise every ring
    /// is flagged (`prepare_sleep`) and the thread sleeps on every socket
    /// until a doorbell, data or a deadline. Returns the set, the timeout
    /// (ms) and whether that is a bare tick (polling, no deadline).
    fn sleep_plan(&mut self) -> (i32, i32, bool) {
        // The plan below sees every deadline.
        self.timers_changed = false;
        let quiet = self.shared.quiet.swap(false, Ordering::SeqCst);
        if quiet {
            // A consumer went to sleep while the engine was busy (its
            // `quiet` did not run).
            self.poller = false;
            self.active_at = 0;
        }
        // Active: a pass or post since the last plan. Back-to-back plans
        // (the thread found work and served it without sleeping) give a
        // consumer pinned beside the thread no chance to be active in
        // between, so a consumer seen active within the last tick still
        // counts as polling; one that went quiet never does. (Taking a
        // completion does not count: a consumer that waits takes them too,
        // and the thread, taken off the TCP sockets, halved its streams'
        // bandwidth.)
        let now = clock::now_ns();
        if self.passes != self.seen_passes {
            self.active_at = now;
        }
        let polling = !quiet && now.saturating_sub(self.active_at) < TICK_NS;
        self.seen_passes = self.passes;
        self.polled_since = 0;
        self.replan_asked = false;
        if !polling {
            // No tick will come: nothing may stay held, and no pass will
            // look again at a doorbell left unrung (a consumer that posted
            // and went on computing: `Bell::Unsure`).
            self.flush_held();
            self.ring_overdue();
        }
        let work = if polling { self.look() } else { self.prepare_sleep() };
        if work {
            self.on_quiet_set = false;
            return (self.epfd, 0, false);
        }
        let deadline = self.next_deadline();
        self.on_quiet_set = polling;
        if polling {
            // The tick comes from the ticker, which a polling consumer's
            // passes push back (`push_tick`).
            self.tick_pushed = now;
            self.shared.ticker.arm_in(TICK_NS);
            (self.epq, deadline, deadline < 0)
        } else {
            (self.epfd, deadline, false)
        }
    }

    /// Before a tick's sleep while consumers poll: flags every ring it
    /// reads `sleeping = 2` (`shm`: rung only if the consumer stops
    /// looking), then lists the connections with work now.
    ///
    /// Work on a ring its consumer looked at within `shm::POLLED_NS` is left
    /// to that consumer's next pass or post. Were the thread to take it, it
    /// would hold the engine (and, pinned beside the consumer, its CPU) and
    /// plan its next sleep before the consumer made a pass, take the
    /// consumer for gone, and have every peer ring at every write: in
    /// msg_rate the receiving side's thread planned that way at about
    /// three wakeups in four. A consumer that stopped looking without
    /// saying so (it spins on its memory) leaves a stale stamp and is
    /// served here, or rung by the peer (`overdue`).
    fn look(&mut self) -> bool {
        self.ready.clear();
        self.ready.append(&mut self.again);
        let now = clock::ticks();
        for &t in &self.shm_conns {
            let Some(c) = self.conns.get(&t) else { continue };
            let Some(m) = &c.shm else { continue };
            let doze = c.shm_in && c.reading() && m.rx.prepare_doze();
            if (doze || has_work(c)) && !m.rx.consumer_looked_within(now) {
                self.ready.push(t);
            }
        }
        !self.ready.is_empty()
    }

    fn shutdown_all(&mut self) {
        // Commands queued since the last wakeup (a dat_psp_create right before
        // the IA closed) carry sockets: take them over, so the loops below close
        // them. Left in the queue they leaked, and a listener kept its port for
        // the life of the process (dat-fuzz, conformance close_frees_qualifier).
        loop {
            let cmd = lock(&self.shared.cmds).pop_front();
            let Some(cmd) = cmd else { break };
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.command(cmd)));
        }
        for (_, c) in self.conns.drain() {
            // SAFETY: our sockets, closed once at shutdown.
            unsafe { libc::close(c.fd) };
        }
        for (_, (fd, _)) in self.listeners.drain() {
            cm::close_listener(fd);
        }
        // SAFETY: our epoll instances.
        unsafe {
            libc::close(self.epfd);
            if self.epq >= 0 {
                libc::close(self.epq);
            }
        }
        self.epfd = -1;
        self.epq = -1;
    }

    /// Kicks the thread if a consumer's call left work only it will see:
    /// input left over, a deadline (an RNR retry, a refused dial's next
    /// try) the thread, asleep on a plan made before it, would not wake
    /// for (only the thread expires deadlines), or a ring made live that
    /// plan did not flag (`replan`).
    fn hand_back(&mut self) {
        let replan = std::mem::take(&mut self.replan);
        if !self.again.is_empty() || std::mem::take(&mut self.timers_changed) || replan {
            self.shared.kick();
        }
    }

    /// Before sleeping: flags every on-node connection's reader (and a
    /// writer facing a full ring) as asleep, then looks at the rings once
    /// more (see `shm`). true: some connection has work; do not sleep.
    fn prepare_sleep(&mut self) -> bool {
        self.ready.clear();
        self.ready.append(&mut self.again);
        for &t in &self.shm_conns {
            let Some(c) = self.conns.get(&t) else { continue };
            let Some(m) = &c.shm else { continue };
            let mut work = false;
            if c.shm_in && c.reading() && m.rx.prepare_sleep() {
                work = true;
            }
            if c.shm_out && c.wants_out() && m.tx.prepare_wait() {
                work = true;
            }
            if work {
                self.ready.push(t);
            }
        }
        !self.ready.is_empty()
    }

    /// The thread woke to serve: its rings are stamped looked at, for it
    /// looks at each before it sleeps again. Unstamped, they aged while it
    /// held the engine and its consumer could not stamp them, and the
    /// writers rang again: each ring woke the thread onto its consumer's
    /// CPU, whose stamps then aged in turn (an on-node ping-pong, 200,000
    /// iterations: 540 to 2,540 doorbells between the two ends, and a
    /// turn of the thread for most, each costing its consumer 20-60 µs).
    fn awake(&self) {
        let now = clock::ticks();
        for t in &self.shm_conns {
            if let Some(m) = self.conns.get(t).and_then(|c| c.shm.as_ref()) {
                m.rx.awake();
                m.rx.thread_looks(now);
            }
        }
    }

    /// Runs `f` for one connection so a panic costs that connection only.
    fn guarded(&mut self, token: u64, f: impl FnOnce(&mut Progress)) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self)));
        if r.is_err() {
            log::error!("sock progress: panic while serving connection {token}; it is dropped");
            if self.conns.contains_key(&token) {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.end(token, End::Protocol)));
            }
        }
    }

    fn next_deadline(&self) -> i32 {
        let now = Instant::now();
        let timer = self.conns.values().filter_map(|c| c.deadline).map(|d| d.saturating_duration_since(now).as_millis() as i32 + 1).min();
        let rnr = self.rnr.iter().filter_map(|t| self.conns.get(t)).map(|c| c.rnr_due).filter(|&d| d != 0).min();
        let rnr = rnr.map(|d| (d.saturating_sub(clock::now_ns()).div_ceil(1_000_000)).min(i32::MAX as u64) as i32);
        match (timer, rnr) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(-1),
        }
    }

    /// Takes the messages whose `rnr_due` came (`now`, ns).
    fn expire_rnr(&mut self, now: u64) {
        let mut i = 0;
        while i < self.rnr.len() {
            let t = self.rnr[i];
            let due = self.conns.get(&t).map_or(0, |c| c.rnr_due);
            if due > now {
                i += 1;
                continue;
            }
            self.rnr.swap_remove(i);
            if due != 0 {
                self.guarded(t, |p| p.release_stalled(t));
            }
        }
    }

    fn release_stalled(&mut self, token: u64) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        c.rnr_due = 0;
        if self.take_stalled(token) {
            self.pump(token, false, true);
        }
    }

    /// Takes the message that waited for a receive, if one did. false:
    /// the connection ended over it.
    fn take_stalled(&mut self, token: u64) -> bool {
        let Some(c) = self.conns.get_mut(&token) else { return false };
        let InState::Stalled(h) = c.inp else { return true };
        c.inp = InState::Hdr;
        if let Err(e) = self.on_header(token, h) {
            self.end(token, e);
            return false;
        }
        // Reading again: the thread's plan left this ring unflagged (it was
        // not reading), so its writer would not ring. If that plan is the
        // long sleep, the thread plans anew; a tick's plan (a consumer
        // polls) is made again within the tick anyway, and a kick per
        // released message cost msg_rate a wakeup and a doorbell storm.
        if !self.on_quiet_set && self.conns.get(&token).is_some_and(|c| c.shm_in) && !role::on_progress_thread() {
            self.replan = true;
        }
        true
    }

    /// A polling consumer's pass, the thread asleep on its tick: the tick
    /// moves a whole tick away again, so the thread sleeps on while passes
    /// come and wakes within a tick of the last one. Pushed once 0.9 of it
    /// went by: each push is a `timerfd_settime` (1.5 µs here, the timer
    /// reprogrammed), and a consumer that polls comes back well within the
    /// tenth left (pushed every half tick, the pushes cost a TCP ping-pong
    /// nearly what the wakeups had).
    fn push_tick(&mut self, now: u64) {
        if now.saturating_sub(self.tick_pushed) >= TICK_NS / 10 * 9 {
            self.tick_pushed = now;
            self.shared.ticker.arm_in(TICK_NS);
        }
    }

    /// A consumer polls while the thread sleeps on a plan made for one that
    /// sleeps (it went quiet in a wait): on every socket, and with every
    /// ring asking its writer to ring. That plan lasts until the thread's
    /// epoll returns, which may be never: each message that arrives wakes
    /// the thread on the consumer's CPU, the consumer reads it first, and
    /// the kernel puts the thread back to sleep without returning; or, woken,
    /// the thread waits for a CPU the consumer never gives up (the
    /// scheduler let a consumer that keeps polling run on for 2 ms). A TCP
    /// ping-pong (dat-perf over a veth) ran at 10 to 14 µs a message instead
    /// of 4.2 for up to 3 ms after each of its waits. Once the consumer has
    /// polled for `REPLAN_NS` (longer than a wait's spin, `tune::spin_us`),
    /// the thread is asked to plan again, and the consumer yields its CPU
    /// (true) every `REPLAN_NS` until it has.
    fn polling_unplanned(&mut self, now: u64) -> bool {
        if self.polled_since == 0 {
            self.polled_since = now.max(1);
            return false;
        }
        if now.saturating_sub(self.polled_since) < REPLAN_NS {
            return false;
        }
        self.polled_since = now.max(1);
        if !self.replan_asked {
            self.replan_asked = true;
            self.replan = true;
        }
        true
    }

    fn expire(&mut self) {
        let now = Instant::now();
        let due: Vec<u64> = self.conns.iter().filter(|(_, c)| c.deadline.is_some_and(|d| d <= now)).map(|(t, _)| t).collect();
        for t in due {
            if self.conns.get(&t).is_some_and(|c| c.fd < 0 && c.phase == Phase::Connecting) {
                self.redial(t);
                continue;
            }
            let waiting = self.conns.get_mut(&t).and_then(|c| c.req_wait.take().inspect(|_| c.deadline = None));
            if let Some((h, pdata)) = waiting {
                // A request waiting for its kind's listener: look again.
                self.guarded(t, |p| {
                    if let Err(e) = p.on_req(t, h, pdata) {
                        p.end(t, e);
                    } else {
                        p.pump(t, false, false);
                    }
                });
                continue;
            }
            log::debug!("sock: peer did not answer DISC; dropping the connection");
            self.end(t, End::Lost(libc::ETIMEDOUT));
        }
    }

    fn on_bell(&mut self) {
        loop {
            let cmd = lock(&self.shared.cmds).pop_front();
            let Some(cmd) = cmd else { break };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.command(cmd)));
            if r.is_err() {
                log::error!("sock progress: panic in a connection command");
            }
        }
        // Kept, not collected anew: a doorbell rings for every post that
        // found the engine busy, and each made a list.
        let mut tokens = std::mem::take(&mut self.bell_list);
        tokens.clear();
        tokens.extend(self.conns.keys());
        for &t in &tokens {
            self.guarded(t, |p| p.pump(t, true, true));
        }
        self.bell_list = tokens;
        let stalled = std::mem::take(&mut self.ud_stalled);
        for t in stalled {
            if let Some(q) = self.uds.get(&t).cloned() {
                if !ud::receive(&q, &mut self.ud_wqe) {
                    self.ud_stalled.push(t);
                } else {
                    self.rewatch(q.udp, t, libc::EPOLLIN as u32);
                }
            }
        }
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Listen { id, fd } => {
                let t = self.token();
                self.listeners.insert(t, (fd, id));
                self.by_id.insert(id, t);
                self.watch(fd, t, libc::EPOLLIN as u32);
                // A consumer's passes do not look at listeners: the quiet
                // set wakes the thread for a new connection while it polls.
                watch_in(self.epq, fd, t);
            }
            Cmd::Connect { id, fd, frame } => {
                let peer = cm::state_of(id).and_then(|s| lock(&s.info).dst).unwrap_or_else(|| self.shared.addr);
                let mut c = Conn::new(fd, id, Phase::Connecting, true, peer);
                c.datagram = cm::state_of(id).is_some_and(|s| s.datagram);
                let mut frame = frame;
                if !c.datagram && shm::enabled() {
                    match Shm::create() {
                        Ok((m, name)) => {
                            if let Some(tr) = shm::trailer(&name) {
                                add_trailer(&mut frame, &tr);
                                c.shm = Some(m);
                            }
                        }
                        Err(e) => log::info!("sock: no shared mapping to offer ({e}); this connection stays on tcp"),
                    }
                }
                c.ctl.push_back(frame);
                c.interest = (libc::EPOLLOUT | libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
                c.dial_until = Some(Instant::now() + DIAL_WINDOW);
                if fd < 0 {
                    c.deadline = Some(Instant::now() + c.backoff);
                    self.timers_changed = true;
                }
                let interest = c.interest;
                let t = self.conns.insert(c);
                self.room_for_conns();
                if fd >= 0 {
                    self.watch(fd, t, interest);
                }
                self.by_id.insert(id, t);
                if cm::state_of(id).is_none() {
                    self.end(t, End::Done);
                }
            }
            Cmd::Accept { id, frame } => {
                let Some(&t) = self.by_id.get(&id) else { return };
                let Some(c) = self.conns.get_mut(&t) else { return };
                if c.phase == Phase::Held {
                    let mut frame = frame;
                    if c.shm.is_some() && !c.datagram {
                        // From the REP on, the peer writes into the mapping;
                        // ours goes there once the REP is out.
                        c.cma_in = shm::cma_enabled() && c.shm.as_mut().is_some_and(|m| m.probe_peer());
                        if let Some(b) = frame.get_mut(1) {
                            *b |= F_SHM | if c.cma_in { F_CMA | F_CMA_SENDS } else { 0 } | if c.ring_acks { F_ACKS } else { 0 } | if c.ring_pad { F_PAD } else { 0 };
                        }
                        c.shm_in = true;
                        c.shm_out_next = true;
                        c.start = 0;
                        c.end = 0;
                        c.cma_list = Vec::with_capacity(super::device::MAX_SGE * 16);
                        self.shm_conns.push(t);
                        watch_in(self.epq, c.fd, t);
                        if let Some(fd) = c.shm.as_ref().and_then(|m| m.bell_fd()) {
                            watch_bells(self.epfd, self.epq, fd, t);
                        }
                        log::info!("sock: connection {t} (id {id}, passive): on-node shared memory, cma {}, early wraps {}", yes(c.cma_in), yes(c.ring_pad));
                    } else if !c.datagram {
                        c.shm = None;
                        c.ring_acks = false;
                        c.ring_pad = false;
                        log::info!("sock: connection {t} (id {id}, passive): tcp");
                    }
                    c.ctl.push_back(frame);
                    c.phase = if c.datagram { Phase::Closing } else { Phase::Open };
                }
                self.pump(t, false, true);
            }
            Cmd::Reject { id, frame } => {
                let Some(&t) = self.by_id.get(&id) else { return };
                let Some(c) = self.conns.get_mut(&t) else { return };
                if matches!(c.phase, Phase::Held | Phase::AwaitReq | Phase::AwaitRep) {
                    c.ctl.push_back(frame);
                    c.phase = Phase::Closing;
                    if !c.shm_in {
                        c.shm = None;
                    }
                }
                self.pump(t, false, true);
            }
            Cmd::Establish { id } => {
                let Some(&t) = self.by_id.get(&id) else { return };
                let Some(c) = self.conns.get_mut(&t) else { return };
                if c.phase == Phase::Held && c.active {
                    let mut rtu = Hdr::new(Op::Rtu);
                    if c.cma_in {
                        rtu.flags |= F_CMA | F_CMA_SENDS;
                    }
                    c.ctl.push_back(rtu.frame(&[]));
                    c.phase = Phase::Open;
                    c.established = true;
                }
                self.pump(t, true, true);
            }
            Cmd::Disconnect { id } => {
                // What was kept back goes first: a DISC ends the output.
                self.flush_held();
                let Some(&t) = self.by_id.get(&id) else { return };
                let Some(c) = self.conns.get_mut(&t) else { return };
                if c.fd < 0 {
                    // Between dials: there is no peer to tell.
                    self.end(t, End::Done);
                    return;
                }
                if !c.disc_sent {
                    c.disc_sent = true;
                    c.ctl.push_back(Hdr::new(Op::Disc).frame(&[]));
                    c.deadline = Some(Instant::now() + DISC_WAIT);
                    self.timers_changed = true;
                    if !matches!(c.phase, Phase::Open) {
                        // Never got going: nobody on the other side to wait for.
                        c.phase = Phase::Closing;
                    }
                }
                self.pump(t, false, true);
            }
            Cmd::Destroy { id } => {
                let Some(t) = self.by_id.remove(&id) else { return };
                if let Some((fd, _)) = self.listeners.remove(&t) {
                    cm::close_listener(fd);
                    return;
                }
                let Some(c) = self.conns.get_mut(&t) else { return };
                c.id = 0;
                if c.phase == Phase::Closing && (c.out.active || !c.ctl.is_empty()) {
                    // Let the last handshake frame (a REP, a REJ) reach the peer.
                    c.qp = None;
                    self.pump(t, false, true);
                } else {
                    self.end(t, End::Done);
                }
            }
            Cmd::Bind { id, qp, epoch } => {
                let Some(&t) = self.by_id.get(&id) else { return };
                if let Some(c) = self.conns.get_mut(&t) {
                    qp.conn.store(t, Ordering::Release);
                    c.qp = Some(qp);
                    c.epoch = epoch;
                }
            }
            Cmd::UdAdd(q) => {
                let t = self.token();
                self.watch(q.udp, t, libc::EPOLLIN as u32);
                self.ud_by_num.insert(q.num, t);
                self.uds.insert(t, q);
            }
            Cmd::UdRemove(num) => {
                if let Some(t) = self.ud_by_num.remove(&num) {
                    if let Some(q) = self.uds.remove(&t) {
                        let mut ev = libc::epoll_event { events: 0, u64: 0 };
                        // SAFETY: unregistering the QP's socket before its QP closes it.
                        unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_DEL, q.udp, &mut ev) };
                    }
                    self.ud_stalled.retain(|&s| s != t);
                }
            }
        }
    }

    fn on_event(&mut self, token: u64, what: u32) {
        if let Some(&(fd, id)) = self.listeners.get(&token) {
            self.accept_all(fd, id);
            return;
        }
        if let Some(q) = self.uds.get(&token).cloned() {
            if !ud::receive(&q, &mut self.ud_wqe) {
                // No receive posted: stop watching until one is.
                self.rewatch(q.udp, token, 0);
                if !self.ud_stalled.contains(&token) {
                    self.ud_stalled.push(token);
                }
            }
            return;
        }
        let Some(c) = self.conns.get_mut(&token) else { return };
        if what & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
            c.bells = true;
        }
        if c.phase == Phase::Connecting {
            if what & (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
                return;
            }
            let mut err: i32 = 0;
            let mut len = 4u32;
            // SAFETY: reading our socket's pending error into an int.
            unsafe { libc::getsockopt(c.fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut i32 as *mut libc::c_void, &mut len) };
            if err == libc::ECONNREFUSED && c.dial_until.is_some_and(|u| Instant::now() < u) {
                self.back_off(token);
                return;
            }
            if err != 0 {
                self.end(token, End::Lost(err));
                return;
            }
            c.phase = Phase::AwaitRep;
        }
        if c.phase == Phase::Held && what & (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
            self.end(token, End::Lost(0));
            return;
        }
        self.pump(token, false, true);
    }

    fn accept_all(&mut self, lfd: i32, listen: u64) {
        loop {
            // SAFETY: all-zero sockaddr_in for accept to fill.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as u32;
            // SAFETY: accepting on our listening socket.
            let fd = unsafe { libc::accept4(lfd, &mut sa as *mut _ as *mut libc::sockaddr, &mut len, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) };
            if fd < 0 {
                return;
            }
            cm::tune(fd);
            let mut c = Conn::new(fd, 0, Phase::AwaitReq, false, sa);
            c.listen = listen;
            c.interest = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
            let interest = c.interest;
            let t = self.conns.insert(c);
            self.room_for_conns();
            self.watch(fd, t, interest);
        }
    }

    /// Room in every list that names connections for as many as there are
    /// (and one more): sized when a connection comes, they never grow on
    /// the data path (a pass or plan that found work on a ring for the
    /// first time grew one: a heap allocation in the middle of traffic).
    fn room_for_conns(&mut self) {
        let n = self.conns.len() + 1;
        for l in [&mut self.ready, &mut self.again, &mut self.rnr, &mut self.pass_list, &mut self.bell_list] {
            l.reserve(n.saturating_sub(l.len()));
        }
        self.held.reserve(n.saturating_sub(self.held.len()));
    }

    /// Moves a connection along: input, then output, then what epoll watches.
    /// A refused dial: the socket goes, and `expire` dials again after the
    /// backoff. TCP cannot tell "not listening yet" from "not listening";
    /// programs such as dtest connect as soon as their peer says it is
    /// ready, which can be before its PSP listens.
    fn back_off(&mut self, token: u64) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        if c.fd >= 0 {
            // SAFETY: the connection's socket, closed once (epoll forgets it).
            unsafe { libc::close(c.fd) };
            c.fd = -1;
        }
        c.deadline = Some(Instant::now() + c.backoff);
        c.backoff = (c.backoff * 2).min(DIAL_BACKOFF_MAX);
        self.timers_changed = true;
    }

    fn redial(&mut self, token: u64) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        c.deadline = None;
        let id = c.id;
        if cm::state_of(id).is_none() {
            return self.end(token, End::Done);
        }
        let in_window = c.dial_until.is_some_and(|u| Instant::now() < u);
        match cm::dial(&self.shared.addr, &c.peer) {
            Ok(fd) => {
                c.fd = fd;
                let interest = c.interest;
                if let Some(st) = cm::state_of(id) {
                    lock(&st.info).local_port = cm::local_port_of(fd);
                }
                self.watch(fd, token, interest);
            }
            Err(cm::Dial::Failed(libc::ECONNREFUSED)) if in_window => self.back_off(token),
            Err(cm::Dial::Failed(e)) => self.end(token, End::Lost(e)),
            Err(cm::Dial::Setup(e)) => self.end(token, End::Lost(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }

    /// `read`: take input too (a consumer's post on a TCP stream leaves
    /// reading to the thread's epoll, which costs no syscall when idle).
    fn pump(&mut self, token: u64, retry_stall: bool, read: bool) {
        let Some(c) = self.conns.get_mut(&token) else { return };
        if c.fd < 0 {
            // Between dials: nothing to read or write yet.
            return;
        }
        if retry_stall && matches!(c.inp, InState::Stalled(_)) {
            let rnr = tune::rnr_ns();
            if rnr == 0 {
                if !self.take_stalled(token) {
                    return;
                }
            } else if c.rnr_due == 0 {
                // As a device's receiver-not-ready retry: the sender comes
                // back a timer later, not the instant a receive is posted.
                // A program that posts its receives in a batch (MVAPICH2
                // fills a new connection's queue from one thread while
                // another polls) has them all posted and its state set
                // before the message is taken.
                c.rnr_due = clock::now_ns() + rnr;
                self.rnr.push(token);
                self.timers_changed = true;
            }
        }
        // On the on-node path the stream carries only doorbells; its end is
        // the peer's, once what the peer put in the ring is taken.
        // Only the thread drains a doorbell. A consumer that drained one
        // took the thread's wakeup, and the ring's "ring me" flag with it
        // (the writer clears it when it rings): the thread, asleep on a plan
        // that counts on that flag, then slept through every later write
        // once the consumer stopped polling (MVAPICH2: its main thread
        // blocked on a mutex, the accept thread polling only the connection
        // EVD; a hang in about 1 run in 250).
        let lost = match self.conns.get_mut(&token) {
            Some(c) if c.shm_in && c.bells && role::on_progress_thread() => {
                c.bells = false;
                match &c.shm {
                    Some(m) => m.drain(c.fd).err(),
                    None => shm::drain_bells(c.fd).err(),
                }
            }
            _ => None,
        };
        if read {
            if let Err(e) = self.read_some(token) {
                self.end(token, e);
                return;
            }
        }
        if !self.hold_ack(token) {
            if let Some(c) = self.conns.get_mut(&token) {
                c.ack_held = false;
            }
            if let Err(e) = self.write_some(token) {
                self.end(token, e);
                return;
            }
        }
        if let Some(e) = lost {
            self.end(token, End::Lost(e));
            return;
        }
        let Some(c) = self.conns.get_mut(&token) else { return };
        // Closing once the last frame is out.
        let flushed = !c.out.active && c.ctl.is_empty();
        if flushed && (c.phase == Phase::Closing || (c.disc_sent && c.disc_rcvd)) {
            self.end(token, End::Done);
            return;
        }
        let mut want = 0u32;
        if c.reading() {
            want |= (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        }
        if c.phase == Phase::Held {
            want |= libc::EPOLLRDHUP as u32;
        }
        // (A held ACK needs no EPOLLOUT: it goes with the next pass or
        // post, and switching the interest both ways cost two epoll_ctl.)
        if c.phase == Phase::Connecting || (c.wants_out() && !c.shm_out && !c.ack_held) {
            want |= libc::EPOLLOUT as u32;
        }
        if c.shm_in {
            // Doorbells and the peer's end, whatever the state.
            want |= (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        }
        if want != c.interest {
            c.interest = want;
            let fd = c.fd;
            self.rewatch(fd, token, want);
        }
    }

    /// Whether a consumer's pass keeps the connection's output, a lone
    /// ACK, for a moment: the consumer is likely to answer what it just
    /// received, and the ACK then rides with the answer (`next_frame`,
    /// `direct_send`): one `sendmsg` where there were two on a stream, and
    /// on the on-node path the answer's direct way instead of a frame of
    /// its own through the general one. Held once: the
    /// next pass, post or thread turn sends it, and the thread ticks
    /// (`on_quiet_set`) or a consumer about to sleep flushes it (`quiet`).
    fn hold_ack(&mut self, token: u64) -> bool {
        let holding = self.holding();
        let Some(c) = self.conns.get_mut(&token) else { return false };
        holding.ack(c, token, &mut self.held)
    }

    /// What a hold is decided on now, read before a connection is borrowed
    /// from the map (`Holding`).
    fn holding(&self) -> Holding {
        Holding { keep_held: self.keep_held, in_pass: self.in_pass, on_quiet_set: self.on_quiet_set, pass_ns: self.pass_ns }
    }

    /// Keeps `token`'s output back from `at` (ns), if it is not already.
    fn hold(&mut self, token: u64, at: u64) {
        hold_in(&mut self.held, token, at);
    }

    /// Rings every doorbell skipped whose bytes or ACKs are still unread.
    fn ring_overdue(&mut self) {
        for &t in &self.shm_conns {
            if let Some(c) = self.conns.get_mut(&t) {
                overdue(c, u64::MAX);
            }
        }
    }

    /// Sends what `hold_ack` and `drive` kept back. (Checked here, inline:
    /// a call into `send_held` with nothing held cost every empty poll 18
    /// instructions.)
    #[inline]
    fn flush_held(&mut self) {
        if !self.held.is_empty() {
            self.send_held(false);
        }
    }

    /// The thread's turn: sends what was kept back longer than `HOLD_NS`.
    /// A consumer that keeps polling takes what it held with its next post
    /// or pass; the thread writing it instead (and, on the on-node path,
    /// ringing the peer's doorbell, as the thread must) cost a ping-pong
    /// its 99th percentile: 23 µs against 0.45, in about 1 iteration in
    /// 150 where the thread's turn fell between a pass and its answer.
    fn flush_stale(&mut self) {
        self.send_held(true);
    }

    fn send_held(&mut self, stale_only: bool) {
        // Usually the answer took the held ACK with it (`direct_send`,
        // `next_frame`) and nothing is left to send: a pump to find that
        // out cost a ping-pong 390 instructions a pass.
        let conns = &self.conns;
        self.held.retain(|&(t, _)| {
            conns.get(&t).is_some_and(|c| {
                c.ack_held || c.wants_out() || c.phase != Phase::Open || c.unsent() > 0
            })
        });
        if self.held.is_empty() {
            return;
        }
        let now = if stale_only { clock::now_ns() } else { 0 };
        let mut held = std::mem::take(&mut self.held);
        let was = std::mem::replace(&mut self.in_pass, false);
        let keep = std::mem::replace(&mut self.keep_held, false);
        held.retain(|&(t, at)| {
            if stale_only && now.saturating_sub(at) < HOLD_NS {
                return true;
            }
            self.guarded(t, |p| p.pump(t, false, false));
            false
        });
        self.in_pass = was;
        self.keep_held = keep;
        // The list goes back with its allocation (a pass runs this first).
        held.append(&mut self.held);
        self.held = held;
    }

    /// Closes a connection and tells its id why.
    fn end(&mut self, token: u64, why: End) {
        let Some(mut c) = self.conns.remove(&token) else { return };
        // Requests the peer ACKed in the mapping completed before it went.
        c.absorb();
        if c.shm_in {
            self.shm_conns.retain(|&t| t != token);
        }
        if c.id != 0 {
            self.by_id.remove(&c.id);
            Self::set_connected(c.id, false);
        }
        // Whatever it had outstanding can no longer complete.
        if let Some(q) = c.qp.as_ref().filter(|q| q.epoch.load(Ordering::Acquire) == c.epoch) {
            if q.is(RTS) {
                q.fail();
            }
            // A receive taken for a message that never finished arriving.
            if let InState::Payload { then: Then::Recv { wr_id, kind, .. }, .. } = c.inp {
                q.complete_recv(wr_id, DAT_DTO_ERR_FLUSHED, kind, 0, None, 0, false);
            }
            if let InState::Payload { then: Then::Pull { recv: Some((wr_id, ..)), .. }, .. } = c.inp {
                q.complete_recv(wr_id, DAT_DTO_ERR_FLUSHED, CompletionKind::RecvRdmaWithImm, 0, None, 0, false);
            }
            if let InState::Payload { then: Then::PullSend { wr_id, .. }, .. } = c.inp {
                q.complete_recv(wr_id, DAT_DTO_ERR_FLUSHED, CompletionKind::Recv, 0, None, 0, false);
            }
        }
        if c.fd >= 0 {
            // SAFETY: the connection's socket, closed once (epoll forgets it).
            unsafe { libc::close(c.fd) };
        }
        if c.id == 0 {
            return;
        }
        if let (End::Protocol, Some(q)) = (why, c.qp.as_ref()) {
            // A QP whose peer broke the protocol failed on its own: say so.
            self.shared.post_async(&q.gone, dapl_core::backend::AsyncEvent::QpError { context: q.context, code: libc::EPROTO as u32 });
        }
        let errno = match why {
            End::Lost(e) => e,
            End::Protocol => libc::EPROTO,
            End::Done => return self.finish_quietly(&c),
        };
        log::debug!("sock: connection of id {} ends in {:?} (phase {:?}, errno {errno})", c.id, why, c.phase);
        let kind = if c.up || c.established {
            if c.disc_reported { None } else { Some(CmEventKind::Disconnected) }
        } else if c.active {
            Some(cm::connect_failure(errno))
        } else if c.phase == Phase::Held {
            // A request the consumer has not answered: the CR learns the requester left.
            Some(CmEventKind::Disconnected)
        } else if c.phase == Phase::Open {
            Some(CmEventKind::ConnectError)
        } else {
            None
        };
        if let Some(k) = kind {
            self.post(k, c.id, Vec::new(), None);
        }
    }

    /// An orderly close: a DISC exchange not yet reported still is.
    fn finish_quietly(&self, c: &Conn) {
        if (c.up || c.established) && !c.disc_reported && (c.disc_sent || c.disc_rcvd) {
            self.post(CmEventKind::Disconnected, c.id, Vec::new(), None);
        }
    }

    // ---- input ----

    fn read_some(&mut self, token: u64) -> Result<(), End> {
        // ACKs counted in the mapping, before the frames and again after
        // them: those counted behind a READ go once its response is in.
        if let Some(c) = self.conns.get_mut(&token) {
            // (A read of this turn's, `take_input`'s, said it already.)
            if !std::mem::take(&mut c.dry_now) {
                c.dry = false;
            }
            if !c.absorb() {
                return Err(End::Protocol);
            }
        }
        self.read_frames(token)?;
        let absorbed = self.conns.get_mut(&token).is_none_or(|c| c.absorb());
        if absorbed { Ok(()) } else { Err(End::Protocol) }
    }

    fn read_frames(&mut self, token: u64) -> Result<(), End> {
        let mut budget = 256;
        loop {
            let Some(c) = self.conns.get_mut(&token) else { return Ok(()) };
            if !c.reading() {
                return Ok(());
            }
            budget -= 1;
            if budget == 0 {
                // More may be buffered (or in the ring): come back before sleeping.
                if !self.again.contains(&token) {
                    self.again.push(token);
                }
                return Ok(());
            }
            match c.inp {
                InState::Stalled(_) => return Ok(()),
                InState::Hdr => {
                    if c.end - c.start >= HDR {
                        let h = Hdr::decode(&c.buf[c.start..c.start + HDR]);
                        c.start += HDR;
                        self.on_header(token, h)?;
                        continue;
                    }
                    if !fill(c)? {
                        return Ok(());
                    }
                }
                InState::Payload { left, .. } => {
                    if left == 0 {
                        self.finish_payload(token)?;
                        continue;
                    }
                    if !take_payload(c)? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// The on-node way in for sends, ahead of a pump: frames that are
    /// sends, lying whole in the ring, go from there to their receives
    /// (`on_data`), without `fill` copying them into the connection's
    /// buffer first, and their ACK is kept back or counted as a pump's
    /// would be. Anything else (another frame, a part of one, no
    /// receive, output waiting) is left to `pump`. true: nothing is.
    /// (A short ping-pong's receiver spent about 600 instructions a
    /// message in the pump's general way.)
    fn ring_sends(&mut self, token: u64) -> Result<bool, End> {
        let holding = self.holding();
        let Some(c) = self.conns.get_mut(&token) else { return Ok(true) };
        // As `read_some`: the ACKs counted so far first (a peer that
        // counted more than we sent is broken).
        if !c.absorb() {
            return Err(End::Protocol);
        }
        let simple = c.shm_in
            && c.ring_acks
            && c.phase == Phase::Open
            && matches!(c.inp, InState::Hdr)
            && c.start == c.end
            // Doorbells to drain are the thread's (`pump`).
            && !(c.bells && role::on_progress_thread())
            && !c.refused
            && !c.disc_rcvd
            && !c.out.active
            && c.ctl.is_empty()
            && c.live_qp().is_some_and(|q| q.unsent.load(Ordering::Acquire) == 0);
        if !simple {
            return Ok(false);
        }
        let Some(qp) = c.qp.take() else { return Ok(false) };
        let mut taken = 0u32;
        let mut r = Ok(());
        // The ring held no more frames when the loop ended.
        let mut drained = false;
        while taken < 256 && matches!(c.inp, InState::Hdr) {
            let Some(m) = &c.shm else { break };
            let mut avail = m.rx.readable(HDR);
            if avail < HDR {
                drained = avail == 0;
                break;
            }
            let h = match m.rx.parts(0, HDR) {
                (a, []) => Hdr::decode(a),
                (a, b) => {
                    let mut x = [0u8; HDR];
                    x[..a.len()].copy_from_slice(a);
                    x[a.len()..].copy_from_slice(b);
                    Hdr::decode(&x)
                }
            };
            if avail - HDR < h.len as usize {
                avail = m.rx.available();
            }
            if h.op != Op::Send as u8 || h.flags & F_CMA != 0 || avail - HDR < h.len as usize {
                break;
            }
            m.rx.skip(HDR);
            taken += 1;
            // As `on_header`: the QP lent, put back even on a panic.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_data(c, &qp, Op::Send, h, h.len as u64))) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    r = Err(e);
                    break;
                }
                Err(p) => {
                    c.qp = Some(qp);
                    std::panic::resume_unwind(p);
                }
            }
        }
        c.qp = Some(qp);
        r?;
        if taken == 0 {
            return Ok(false);
        }
        self.frames = self.frames.wrapping_add(taken as u64);
        // `c` is still in hand: the hold and the look that follows need no
        // lookup of it (two, about 40 instructions a received message).
        if !holding.ack(c, token, &mut self.held) {
            c.ack_held = false;
            publish_acks(c);
        }
        // Drained, only output can be left (ACKs the peer counted since
        // wait for the next pass or post, which absorbs them first).
        let Some(m) = &c.shm else { return Ok(true) };
        Ok(if drained { !has_output(c, m) } else { !has_work(c) })
    }

    /// A pass's or post's look at a connection's input: sends from the
    /// ring in place (`ring_sends`), the rest through `pump`.
    fn take_input(&mut self, token: u64) {
        if let Some(c) = self.conns.get_mut(&token) {
            if !c.shm_in && c.fd >= 0 && c.phase == Phase::Open && matches!(c.inp, InState::Hdr) && c.start == c.end && !c.wants_out() && c.unsent() == 0 {
                // A TCP stream with nothing buffered and nothing to send:
                // its read says whether a pump has anything to do. An empty
                // poll went through the whole pump, about 650 instructions
                // around the `read`, which a polling consumer's every look
                // at its stream paid, and the message it waits for with it.
                c.dry = false;
                match fill(c) {
                    Ok(false) => return,
                    Ok(true) => c.dry_now = true,
                    Err(e) => return self.end(token, e),
                }
            }
        }
        match self.ring_sends(token) {
            Ok(true) => {}
            Ok(false) => self.pump(token, false, true),
            Err(e) => self.end(token, e),
        }
    }

    fn on_header(&mut self, token: u64, h: Hdr) -> Result<(), End> {
        self.frames = self.frames.wrapping_add(1);
        let Some(c) = self.conns.get_mut(&token) else { return Ok(()) };
        let Some(op) = Op::from_u8(h.op) else {
            log::warn!("sock: unknown frame {:#x} from the peer", h.op);
            return Err(End::Protocol);
        };
        let len = h.len as u64;
        if len > 0 && !c.shm_in {
            c.big_in = len >= tune::ready_min();
            c.large_in = len >= inbound::LARGE_IN;
            // Frames without a payload (the ACK that rides in front of
            // an answer) leave these as they are.
            c.awaited = c.answered;
            c.answered = false;
        }
        // A response or handshake frame follows the ACKs counted before it.
        if !matches!(op, Op::Send | Op::Write | Op::WriteImm | Op::ReadReq | Op::FetchAdd | Op::CmpSwap) && !c.absorb() {
            return Err(End::Protocol);
        }
        match op {
            Op::Req | Op::Rep | Op::Rej | Op::Rtu | Op::Disc => {
                if h.len > MAX_CM_PDATA {
                    return Err(End::Protocol);
                }
                c.pdata.clear();
                c.set_payload(len, Dest::Pdata, Then::Ctl(h));
                return Ok(());
            }
            _ => {}
        }
        if c.phase != Phase::Open {
            return Err(End::Protocol);
        }
        // The QP is lent to `on_data`, not cloned: a clone and its drop are
        // two locked instructions on every frame.
        let qp = match c.live_qp() {
            Some(_) if !c.refused && !c.disc_rcvd => c.qp.take(),
            _ => None,
        };
        let Some(qp) = qp else {
            // Nobody to deliver to: the bytes are dropped, nothing answered.
            c.set_payload(len, Dest::Discard, Then::Nothing);
            return Ok(());
        };
        // Put back even if on_data panics: the guard around this turn then
        // ends the connection, and `end` must find the QP to fail it (else its
        // posted requests never complete).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_data(c, &qp, op, h, len)));
        c.qp = Some(qp);
        r.unwrap_or_else(|p| std::panic::resume_unwind(p))
    }

    fn finish_payload(&mut self, token: u64) -> Result<(), End> {
        let Some(c) = self.conns.get_mut(&token) else { return Ok(()) };
        let InState::Payload { then, .. } = std::mem::replace(&mut c.inp, InState::Hdr) else { return Ok(()) };
        if c.tail_to != 0 {
            tail::publish(c.tail_to, &c.held[..c.held_len]);
            c.tail_to = 0;
        }
        match then {
            Then::Nothing => {}
            Then::Ack => c.ack(),
            Then::Recv { wr_id, len, imm, kind, solicited } => {
                if let Some(q) = c.live_qp() {
                    q.complete_recv(wr_id, DAT_DTO_SUCCESS, kind, len, imm, 0, solicited);
                } else if let Some(q) = c.qp.as_ref().filter(|q| q.epoch.load(Ordering::Acquire) == c.epoch) {
                    // The QP failed while the message was arriving: the
                    // receive it had taken still completes, as flushed.
                    q.complete_recv(wr_id, DAT_DTO_ERR_FLUSHED, kind, 0, None, 0, false);
                }
                c.ack();
            }
            Then::ReadDone(len) => {
                if let Some(q) = c.live_qp().cloned() {
                    q.on_response(DAT_DTO_SUCCESS, len);
                }
            }
            Then::Ctl(h) => return self.on_ctl(token, h),
            Then::Pull { addr, len, recv } => {
                let pid = c.shm.as_ref().map_or(0, |m| m.peer_pid);
                let ok = shm::pull(pid, addr, len, &c.pdata);
                pulled(c, ok, len, recv.map(|(wr_id, imm, solicited)| (wr_id, imm, solicited, CompletionKind::RecvRdmaWithImm)));
            }
            Then::PullSend { wr_id, len, solicited } => {
                let pid = c.shm.as_ref().map_or(0, |m| m.peer_pid);
                let ok = shm::pull_into(pid, &c.segs, len, &c.pdata);
                pulled(c, ok, len, Some((wr_id, None, solicited, CompletionKind::Recv)));
            }
            Then::Push { addr, len } => {
                let pid = c.shm.as_ref().map_or(0, |m| m.peer_pid);
                let ok = shm::push_to(pid, addr, len, &c.pdata);
                c.pdata.clear();
                moved(c);
                if ok {
                    c.resp.push_back(Resp::ReadPlaced(len));
                } else {
                    c.resp.push_back(Resp::Nak(Nak::LocalProt as u8));
                    c.refused = true;
                    if let Some(q) = c.live_qp().cloned() {
                        q.fail();
                    }
                }
                if c.resp.len() > MAX_RESP {
                    return Err(End::Protocol);
                }
            }
        }
        Ok(())
    }

    /// A connection request, for whichever id listens on its port for its
    /// kind (RC or UD). A PSP listens for the two kinds one after the other
    /// on one socket, so a request that finds only the other kind's
    /// listener waits for its own a while (`REQ_GRACE`), looked at again
    /// every `REQ_RETRY`, before it is refused: a `dtestx -u -m` client,
    /// dialling its server's PSP while it was being made, was refused in
    /// that moment and hung (1 to 2 runs in 100 under load).
    fn on_req(&mut self, token: u64, h: Hdr, pdata: Vec<u8>) -> Result<(), End> {
        let Some(c) = self.conns.get_mut(&token) else { return Ok(()) };
        let datagram = h.flags & F_DATAGRAM != 0;
        let port = cm::local_port_of(c.fd);
        let kinds = lock(&self.shared.ports).get(&port).copied().unwrap_or([0, 0]);
        let listen = kinds[datagram as usize];
        c.listen = listen;
        if listen == 0 || cm::state_of(listen).is_none() {
            let now = Instant::now();
            let until = *c.req_until.get_or_insert(now + REQ_GRACE);
            if kinds[!datagram as usize] != 0 && now < until {
                c.req_wait = Some((h, pdata));
                c.deadline = Some(now + REQ_RETRY);
                self.timers_changed = true;
                return Ok(());
            }
            c.ctl.push_back(Hdr::new(Op::Rej).frame(&[]));
            c.phase = Phase::Closing;
            return Ok(());
        }
        let id = super::cm::Id::insert(IdState {
            shared: self.shared.clone(),
            context: Default::default(),
            datagram,
            info: std::sync::Mutex::new(IdInfo {
                local_port: port,
                peer: Some(c.peer),
                dst: None,
                connected: true,
                listener: false,
            }),
        });
        c.id = id.key();
        c.datagram = datagram;
        c.phase = Phase::Held;
        self.by_id.insert(id.key(), token);
        self.shared.post_event(Ev::Cm { kind: CmEventKind::ConnectRequest, id: id.key(), listen, pdata, ud: None });
        Ok(())
    }

    fn on_ctl(&mut self, token: u64, h: Hdr) -> Result<(), End> {
        let Some(c) = self.conns.get_mut(&token) else { return Ok(()) };
        let mut pdata = std::mem::take(&mut c.pdata);
        let op = Op::from_u8(h.op);
        if op == Some(Op::Req) && h.flags & F_SHM != 0 {
            // The requester's host and mapping, after its private data.
            let Some(at) = pdata.len().checked_sub(shm::TRAILER) else { return Err(End::Protocol) };
            if h.flags & F_DATAGRAM == 0 && c.phase == Phase::AwaitReq {
                c.shm = shm::accept_trailer(&pdata[at..]);
                c.ring_acks = h.flags & F_ACKS != 0;
                c.ring_pad = h.flags & F_PAD != 0;
            }
            pdata.truncate(at);
        }
        match (op, c.phase, c.active) {
            (Some(Op::Req), Phase::AwaitReq, false) => {
                if h.a != MAGIC {
                    return Err(End::Protocol);
                }
                return self.on_req(token, h, pdata);
            }
            (Some(Op::Rep), Phase::AwaitRep, true) => {
                if c.datagram {
                    let mut p = c.peer;
                    p.sin_port = (h.a as u16).to_be();
                    let id = c.id;
                    c.phase = Phase::Closing;
                    self.post(CmEventKind::Established, id, pdata, Some((Path(p), h.imm)));
                } else {
                    c.phase = Phase::Held;
                    c.up = true;
                    let id = c.id;
                    if h.flags & F_SHM != 0 && c.shm.is_some() {
                        // The peer took the mapping: both directions move there now.
                        if let Some(m) = c.shm.as_mut() {
                            m.unlink();
                        }
                        c.shm_in = true;
                        c.shm_out = true;
                        c.ring_acks = h.flags & F_ACKS != 0;
                        c.ring_pad = h.flags & F_PAD != 0;
                        c.start = 0;
                        c.end = 0;
                        c.cma_in = shm::cma_enabled() && c.shm.as_mut().is_some_and(|m| m.probe_peer());
                        c.cma_out = shm::cma_enabled() && c.cma_in && h.flags & F_CMA != 0;
                        c.send_ref_min = send_ref_min(c.cma_out, h.flags);
                        c.cma_list = Vec::with_capacity(super::device::MAX_SGE * 16);
                        self.shm_conns.push(token);
                        watch_in(self.epq, c.fd, token);
                        if let Some(fd) = c.shm.as_mut().and_then(|m| m.settle_bells()) {
                            watch_bells(self.epfd, self.epq, fd, token);
                        }
                        log::info!("sock: connection {token} (id {id}, active): on-node shared memory, cma {}, early wraps {}", yes(c.cma_in && c.cma_out), yes(c.ring_pad));
                    } else {
                        if h.flags & F_SHM != 0 {
                            return Err(End::Protocol);
                        }
                        c.shm = None;
                        log::info!("sock: connection {token} (id {id}, active): tcp");
                    }
                    self.post(CmEventKind::ConnectResponse, id, pdata, None);
                }
            }
            (Some(Op::Rej), Phase::AwaitRep, true) => {
                c.shm = None;
                let id = c.id;
                c.id = 0;
                self.by_id.remove(&id);
                Self::set_connected(id, false);
                self.post(CmEventKind::Rejected { by_consumer: h.flags & F_CONSUMER != 0 }, id, pdata, None);
                return Err(End::Done);
            }
            (Some(Op::Rej), Phase::Open | Phase::Held, false) => {
                // The requester gave up on our accept (its QP failed).
                return Err(End::Lost(libc::ECONNABORTED));
            }
            (Some(Op::Rtu), Phase::Open, false) => {
                c.established = true;
                // Our requests go by reference from now on if the peer reaches us.
                c.cma_out = c.cma_in && h.flags & F_CMA != 0;
                c.send_ref_min = send_ref_min(c.cma_out, h.flags);
                let id = c.id;
                self.post(CmEventKind::Established, id, Vec::new(), None);
            }
            (Some(Op::Disc), _, _) => {
                c.disc_rcvd = true;
                if !c.disc_reported && (c.up || c.established) {
                    c.disc_reported = true;
                    let id = c.id;
                    self.post(CmEventKind::Disconnected, id, Vec::new(), None);
                }
            }
            _ => {
                log::warn!("sock: handshake frame {:?} out of place (phase {:?})", op, c.phase);
                return Err(End::Protocol);
            }
        }
        Ok(())
    }

    // ---- output ----

    fn write_some(&mut self, token: u64) -> Result<(), End> {
        let mut budget = 256;
        let mut corked = false;
        loop {
            budget -= 1;
            if budget == 0 {
                // More requests may wait in the send queue, and a ring (or a
                // socket with room) gives no event for them: come back.
                if !self.again.contains(&token) {
                    self.again.push(token);
                }
                return Ok(());
            }
            let Some(c) = self.conns.get_mut(&token) else { return Ok(()) };
            if c.phase == Phase::Connecting {
                return Ok(());
            }
            if !c.out.active && !next_frame(c) {
                if corked {
                    // The frame said to follow did not (a request failed
                    // locally and halted the queue): its bytes go now.
                    cm::uncork(c.fd);
                }
                return Ok(());
            }
            // Short frames that follow at once share segments (MSG_MORE);
            // never the budget's last, which nothing may follow for a while.
            let more = budget > 1 && !c.shm_out && c.out.total <= SHORT_FRAME && (!c.ctl.is_empty() || !c.resp.is_empty() || c.unsent() > 0);
            if !send_frame(c, more)? {
                return Ok(());
            }
            corked = more;
            self.frames = self.frames.wrapping_add(1);
            if c.shm_out_next {
                // The REP is out: the rest goes through the mapping.
                c.shm_out_next = false;
                c.shm_out = true;
            }
        }
    }
}

/// The end of a by-reference WRITE or send: `ok` if its `len` bytes were
/// pulled; `recv`, the receive it completes (wr_id, immediate data,
/// solicited, kind).
fn pulled(c: &mut Conn, ok: bool, len: u64, recv: Option<(u64, Option<u32>, bool, CompletionKind)>) {
    c.pdata.clear();
    moved(c);
    let q = c.live_qp().cloned();
    if ok {
        if let (Some((wr_id, imm, solicited, kind)), Some(q)) = (recv, &q) {
            q.complete_recv(wr_id, DAT_DTO_SUCCESS, kind, len as u32, imm, 0, solicited);
        }
        c.ack();
        return;
    }
    // The initiator's own segments failed it: its protection error; both
    // QPs fail, as when a message does not fit.
    if let (Some((wr_id, _, _, kind)), Some(q)) = (recv, &q) {
        q.complete_recv(wr_id, DAT_DTO_ERR_FLUSHED, kind, 0, None, 0, false);
    }
    c.resp.push_back(Resp::Nak(Nak::LocalProt as u8));
    c.refused = true;
    if let Some(q) = q {
        q.fail();
    }
}

/// After a transfer by reference (microseconds each): our look at the
/// ring is stamped again. A pass that pulled a window of 64 KiB sends one
/// after the other went 170 µs on its first stamp; the peer took us for a
/// reader that had stopped, rang our thread, which took the CPU from our
/// consumer and the engine with it (a stream of 64 KiB sends, pinned: the
/// receiver's thread busy 0.44 s of each second, its consumer yielding
/// 9,700 times).
fn moved(c: &Conn) {
    if let Some(m) = &c.shm {
        m.rx.polled(clock::ticks());
    }
}

/// A data frame's header, for the live QP `qp` of its connection.
fn on_data(c: &mut Conn, qp: &Arc<QpInner>, op: Op, h: Hdr, len: u64) -> Result<(), End> {
    if h.flags & F_CMA != 0 && matches!(op, Op::Send | Op::Write | Op::WriteImm | Op::ReadReq) {
        return by_reference(c, qp, op, h);
    }
    match op {
        Op::Send | Op::WriteImm => {
            if op == Op::WriteImm && !remote_ok(qp, h.rkey, h.addr, len, keys::REMOTE_WRITE) {
                return refuse(c, len, Nak::RemoteAccess);
            }
            let imm = (h.flags & F_IMM != 0).then_some(h.imm);
            let solicited = h.flags & F_SOLICITED != 0;
            if op == Op::WriteImm {
                if !qp.take_recv(&mut c.wqe) {
                    c.inp = InState::Stalled(h);
                    return Ok(());
                }
                write_segs(c, h.addr, len);
                let then = Then::Recv { wr_id: c.wqe.wr_id, len: h.len, imm, kind: CompletionKind::RecvRdmaWithImm, solicited };
                c.set_payload(len, Dest::Segs, then);
                return Ok(());
            }
            if !recv_segs(c, qp, h, len, len)? {
                return Ok(());
            }
            // Read whole already (a short message is), or whole in the
            // ring behind its header: placed and completed now. Through the
            // payload state, its copy and its finish, a short on-node send
            // cost its receiver about 100 instructions more.
            let whole = if (c.end - c.start) as u64 >= len {
                let from = c.start;
                scatter(&c.segs, 0, &c.buf[from..from + len as usize]);
                c.start += len as usize;
                true
            } else if let (true, true, Some(m)) = (c.start == c.end, c.shm_in, &c.shm) {
                let ringed = m.rx.readable(len as usize) as u64 >= len;
                if ringed {
                    let (a, b) = m.rx.parts(0, len as usize);
                    scatter(&c.segs, 0, a);
                    if !b.is_empty() {
                        scatter(&c.segs, a.len(), b);
                    }
                    m.rx.skip(len as usize);
                    if m.rx.must_ring_producer() {
                        m.ring(c.fd);
                    }
                }
                ringed
            } else {
                false
            };
            if whole {
                qp.complete_recv(c.wqe.wr_id, DAT_DTO_SUCCESS, CompletionKind::Recv, h.len, imm, 0, solicited);
                c.ack();
                return Ok(());
            }
            let then = Then::Recv { wr_id: c.wqe.wr_id, len: h.len, imm, kind: CompletionKind::Recv, solicited };
            c.set_payload(len, Dest::Segs, then);
        }
        Op::Write => {
            if !remote_ok(qp, h.rkey, h.addr, len, keys::REMOTE_WRITE) {
                return refuse(c, len, Nak::RemoteAccess);
            }
            write_segs(c, h.addr, len);
            c.set_payload(len, Dest::Segs, Then::Ack);
        }
        Op::ReadReq => {
            let want = h.a;
            if len != 0 || want > super::device::MAX_MSG as u64 || !remote_ok(qp, h.rkey, h.addr, want, keys::REMOTE_READ) {
                return refuse(c, len, Nak::RemoteAccess);
            }
            c.resp.push_back(Resp::Read { addr: h.addr, len: want });
            if c.resp.len() > MAX_RESP {
                return Err(End::Protocol);
            }
        }
        Op::FetchAdd | Op::CmpSwap => {
            if len != 0 {
                return Err(End::Protocol);
            }
            if !remote_ok(qp, h.rkey, h.addr, 8, keys::REMOTE_ATOMIC) {
                return refuse(c, len, Nak::RemoteAccess);
            }
            if h.addr % 8 != 0 {
                return refuse(c, len, Nak::InvalidRequest);
            }
            // SAFETY: 8 aligned bytes inside a region the consumer registered
            // for remote atomics (checked above); other atomics on it are ours too.
            let cell = unsafe { &*(h.addr as *const AtomicU64) };
            let old = if op == Op::FetchAdd {
                cell.fetch_add(h.a, Ordering::SeqCst)
            } else {
                match cell.compare_exchange(h.a, h.b, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(v) | Err(v) => v,
                }
            };
            c.resp.push_back(Resp::Atomic(old));
        }
        Op::Ack => {
            if !qp.on_acks(h.a) {
                return Err(End::Protocol);
            }
        }
        Op::Nak => {
            qp.on_response(Nak::status(h.status), 0);
            c.set_payload(len, Dest::Discard, Then::Nothing);
        }
        Op::ReadResp | Op::AtomicResp => {
            let Some(w) = qp.awaiting(&mut c.scratch) else { return Err(End::Protocol) };
            let expect = if op == Op::ReadResp { WOp::Read } else { w.op };
            if w.op != expect || (op == Op::AtomicResp && !matches!(w.op, WOp::CmpSwap | WOp::FetchAdd)) {
                return Err(End::Protocol);
            }
            c.segs.clear();
            for g in &c.scratch {
                if g.len > 0 {
                    c.segs.push((g.addr, g.len as u64));
                }
            }
            if op == Op::ReadResp && h.flags & F_CMA != 0 {
                // Placed by the target already.
                if len != 0 || h.a > w.len {
                    return Err(End::Protocol);
                }
                qp.on_response(DAT_DTO_SUCCESS, h.a as u32);
            } else if op == Op::AtomicResp {
                let bytes = h.a.to_ne_bytes();
                scatter(&c.segs, 0, &bytes);
                qp.on_response(DAT_DTO_SUCCESS, 8);
                c.set_payload(len, Dest::Discard, Then::Nothing);
            } else if len > w.len {
                c.set_payload(len, Dest::Discard, Then::Nothing);
                qp.on_response(DAT_DTO_ERR_LOCAL_LENGTH, 0);
            } else {
                c.set_payload(len, Dest::Segs, Then::ReadDone(h.len));
            }
        }
        _ => return Err(End::Protocol),
    }
    Ok(())
}

/// `Conn::send_ref_min` for a connection whose requests go by reference
/// (`cma_out`) or not, after a handshake frame with `flags`.
fn send_ref_min(cma_out: bool, flags: u8) -> u64 {
    if cma_out && flags & F_CMA_SENDS != 0 { tune::cma_send_min() } else { u64::MAX }
}

/// A doorbell we skipped whose bytes the peer has still not taken after
/// `OVERDUE_NS` (at `now`; u64::MAX: at once), and whose reader has not
/// looked at its ring within `shm::POLLED_NS` of our last look either
/// (`Shm::judged_at`), is rung after all. The time
/// runs from the skip or from the reader's last progress, whichever is
/// later: a reader that keeps taking a stream we keep writing is never
/// all caught up, and counting from the first skip rang it every 10 µs
/// (msg_rate: about half of the doorbells the receiving side rang).
/// Inline, the check that nothing was skipped: a call per connection cost
/// every empty poll 15 instructions.
#[inline]
fn overdue(c: &mut Conn, now: u64) {
    if c.acks_skipped != 0 || c.skipped_at != 0 {
        overdue_skipped(c, now);
    }
}

#[inline(never)]
fn overdue_skipped(c: &mut Conn, now: u64) {
    if now == u64::MAX && std::mem::take(&mut c.unsure) && settle_unsure(c) {
        return;
    }
    if c.acks_skipped != 0 {
        overdue_acks(c, now);
    }
    if c.skipped_at == 0 {
        return;
    }
    let Some(m) = &c.shm else { return };
    // The peer's `tail` is read only once the time is up: each read pulls
    // its line away from the reader, whose next take then waits for it.
    if m.tx.seen_tail() >= c.skipped_head {
        c.skipped_at = 0;
        return;
    }
    if now != u64::MAX && now.saturating_sub(c.skipped_at) < shm::OVERDUE_NS {
        return;
    }
    let tail = m.tx.tail();
    if tail >= c.skipped_head {
        c.skipped_at = 0;
        return;
    }
    if now != u64::MAX && (tail != c.skipped_tail || m.tx.looked_within(m.judged_at())) {
        // Taking, or still looking: a reader in a system call or off its
        // CPU for a moment is not gone. Rung, its thread would take that
        // CPU from it (pinned beside it) just as it comes back.
        c.skipped_tail = tail;
        c.skipped_at = now.max(1);
    } else {
        c.skipped_at = 0;
        m.ring(c.fd);
    }
}

/// Going quiet with doorbells left `shm::Bell::Unsure`: the fenced look
/// decides them now. A reader still awake will see bytes and ACKs before
/// it sleeps (rung for bytes it had simply not taken yet, a reader
/// spinning in its wait would have its thread woken for nothing); one
/// asleep is rung. true: settled; false: it dozes and looks, as `Skipped`.
fn settle_unsure(c: &mut Conn) -> bool {
    let Some(m) = &c.shm else { return false };
    match m.tx.bell(|| m.judged_at()) {
        shm::Bell::No => {}
        shm::Bell::Ring => m.ring(c.fd),
        _ => return false,
    }
    c.skipped_at = 0;
    c.acks_skipped = 0;
    true
}

/// `overdue` for ACKs published to the counter: they are taken once the
/// reader looked since (its passes take them), else rung for after
/// `ACK_OVERDUE_NS` (at once when we go quiet).
fn overdue_acks(c: &mut Conn, now: u64) {
    let Some(m) = &c.shm else { return };
    if m.tx.looked_since(c.acks_skipped) {
        c.acks_skipped = 0;
    } else if now == u64::MAX || (now.saturating_sub(clock::ns_of(c.acks_skipped)) >= ACK_OVERDUE_NS && !m.tx.looked_within(m.judged_at())) {
        c.acks_skipped = 0;
        m.ring(c.fd);
    }
}

/// Puts an on-node connection's stream into the quiet set too: there it
/// carries only doorbells and the peer's end, which the thread must hear
/// while it dozes (`shm`, `sleeping = 2`).
fn watch_in(epq: i32, fd: i32, token: u64) {
    let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, u64: token };
    // SAFETY: registering our socket with our quiet epoll set; closing it
    // takes it out of both sets.
    unsafe { libc::epoll_ctl(epq, libc::EPOLL_CTL_ADD, fd, &mut ev) };
}

/// A connection's doorbell FIFO (`shm::Shm::bell_fd`), in both sets under
/// its token: it wakes the thread as the stream's doorbell byte did.
fn watch_bells(epfd: i32, epq: i32, fd: i32, token: u64) {
    for set in [epfd, epq] {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: registering our FIFO with our epoll sets; closing it
        // takes it out of both.
        if unsafe { libc::epoll_ctl(set, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            log::error!("sock: epoll_ctl add (doorbell FIFO): {}", io::Error::last_os_error());
        }
    }
}

/// What `hold_ack` decides on: the engine's turn (the thread's, or a
/// consumer's pass) and when the pass began. Apart from the engine, so a
/// caller that holds a connection of its map decides without looking the
/// connection up again (`ring_sends`: two lookups a received message).
#[derive(Clone, Copy)]
struct Holding {
    keep_held: bool,
    in_pass: bool,
    on_quiet_set: bool,
    pass_ns: u64,
}

impl Holding {
    /// `Progress::hold_ack` for connection `c` (`token`), whose kept-back
    /// output `held` lists.
    fn ack(self, c: &mut Conn, token: u64, held: &mut Vec<(u64, u64)>) -> bool {
        if self.keep_held && c.only_held_ack() && c.unsent() == 0 {
            // The thread's turn, serving this connection's input: the ACK
            // stays with the consumer a while yet (`flush_stale`).
            let now = clock::now_ns();
            return held.iter().any(|h| h.0 == token && now.saturating_sub(h.1) < HOLD_NS);
        }
        if !self.in_pass || !self.on_quiet_set {
            return false;
        }
        let lone = !c.ack_held
            && c.phase == Phase::Open
            && !c.out.active
            && c.ctl.is_empty()
            && c.resp.len() == 1
            && matches!(c.resp.front(), Some(Resp::Ack(_)))
            && c.unsent() == 0;
        if lone {
            c.ack_held = true;
            hold_in(held, token, self.pass_ns);
        }
        lone
    }
}

/// Lists `token`'s output as kept back from `at` (ns), if it is not already.
fn hold_in(held: &mut Vec<(u64, u64)>, token: u64, at: u64) {
    if !held.iter().any(|h| h.0 == token) {
        held.push((token, at));
    }
}

/// Output waits that a pump would write now (not a held ACK alone).
#[inline]
fn has_output(c: &Conn, m: &shm::Shm) -> bool {
    c.shm_out && c.wants_out() && !c.only_held_ack() && m.tx.space() > 0
}

/// Whether an on-node connection can move bytes now: input in its ring, or
/// output waiting with room in the peer's.
fn has_work(c: &Conn) -> bool {
    let Some(m) = &c.shm else { return false };
    (c.shm_in && c.reading() && m.rx.has_input()) || has_output(c, m)
}

impl Engine for Progress {
    fn consumer_pass(&mut self, polling: bool) -> bool {
        if polling {
            self.passes = self.passes.wrapping_add(1);
            self.shared.passes.store(self.passes, Ordering::Relaxed);
            self.poller = true;
            self.pass_gen += 1;
        }
        let frames = self.frames;
        self.flush_held();
        self.in_pass = polling;
        let mut list = std::mem::take(&mut self.pass_list);
        list.clear();
        list.append(&mut self.again);
        let ticks = if self.shm_conns.is_empty() && !polling && self.rnr.is_empty() { 0 } else { clock::ticks() };
        let now = clock::ns_of(ticks);
        self.pass_ns = now;
        let mut give_way = false;
        if polling {
            if self.on_quiet_set {
                self.push_tick(now);
            } else {
                give_way = self.polling_unplanned(now);
            }
        }
        if !self.rnr.is_empty() {
            self.expire_rnr(now);
        }
        for &t in &self.shm_conns {
            let Some(c) = self.conns.get_mut(&t) else { continue };
            // Overdue first: judged against our look before this one
            // (`Shm::judged_at`).
            overdue(c, now);
            if let Some(m) = &c.shm {
                m.rx.polled(ticks);
            }
            // A pump for ACKs alone would cost ten times this.
            let broken = !c.absorb();
            if (broken || has_work(c)) && !list.contains(&t) {
                list.push(t);
            }
        }
        // TCP streams: a polling consumer reads them itself, so it does not
        // wait for the thread's wakeup (nor compete with it for a CPU) to
        // see its data. A few open streams are read directly (one read
        // each, the one system call a message then costs); more, or any
        // still in their handshake, take one look at epoll, and so do
        // streams whose messages are large (`tune::ready_min`). On-node
        // connections alone cost no system call.
        // UD sockets have no ring to look at: epoll says which have data.
        let mut look = !self.uds.is_empty();
        if self.conns.len() > self.shm_conns.len() {
            let mut direct = 0;
            for (t, c) in self.conns.iter() {
                if c.shm_in || c.fd < 0 || c.datagram {
                    continue;
                }
                if c.phase == Phase::Open && c.reading() && direct < DIRECT_READS && !c.big_in {
                    direct += 1;
                    if !list.contains(&t) {
                        list.push(t);
                    }
                } else {
                    look = true;
                }
            }
        }
        for &t in &list {
            self.guarded(t, |p| p.take_input(t));
        }
        self.pass_list = list;
        let mut events = false;
        if look {
            let mut evs = std::mem::take(&mut self.pass_events);
            // SAFETY: a non-blocking look at our epoll into our array.
            let n = unsafe { libc::epoll_wait(self.epfd, evs.as_mut_ptr(), evs.len() as i32, 0) };
            if n > 0 {
                events = true;
                self.dispatch(&evs[..n as usize]);
            }
            self.pass_events = evs;
        }
        self.in_pass = false;
        self.hand_back();
        give_way || (polling && self.idle.due(events || self.frames != frames, now, tune::yield_ns()))
    }

    fn drive(&mut self, token: u64, retry_stall: bool, small: bool) {
        // A TCP stream's input waits for epoll, unless bytes already read
        // (a message held for a receive) are what the post lets go on.
        // A polling consumer's post reads its ring as a pass does. One
        // that posts and reaps without ever finding its queue empty makes
        // no pass; unless its posts count too, its thread takes it for gone
        // and asks the peer to ring at every write, and the peer's thread
        // the same of it: a doorbell, a wakeup and a contended engine lock
        // per few messages each way (msg_rate: about one system call per
        // ten messages).
        let poller = self.poller;
        // A stream's second short post since the consumer's last empty
        // poll waits (up to `tune::batch`) for its next one, the thread's
        // tick or the consumer's sleep: the consumer is posting a burst,
        // which then goes out in one segment (msg_rate over TCP: 0.20 to
        // 0.6 M/s).
        // The first goes at once: a ping-pong's answer never waits.
        let hold = small && poller && self.on_quiet_set;
        if poller {
            self.passes = self.passes.wrapping_add(1);
            self.shared.passes.store(self.passes, Ordering::Relaxed);
        }
        self.guarded(token, |p| {
            let Some(c) = p.conns.get_mut(&token) else { return };
            if let (true, true, Some(m)) = (poller, c.shm_in, &c.shm) {
                m.rx.polled(clock::ticks());
            }
            let read = c.shm_in || retry_stall || c.end > c.start;
            if !retry_stall && !c.shm_out && c.phase == Phase::Open {
                if hold && c.post_gen == p.pass_gen && !c.disc_sent && c.live_qp().is_some_and(|q| q.unsent.load(Ordering::Acquire) as u64 <= tune::batch()) {
                    p.hold(token, clock::now_ns());
                    return;
                }
                c.post_gen = p.pass_gen;
            }
            p.pump(token, retry_stall, read);
        });
        self.hand_back();
    }

    fn post_direct(&mut self, token: u64, q: &QpInner, w: &Wqe, sges: &[Sge]) -> bool {
        let poller = self.poller;
        let mut sent = false;
        let now = clock::ticks();
        self.guarded(token, |p| {
            let Some(c) = p.conns.get_mut(&token) else { return };
            if !direct_send(c, q, w, sges, now) {
                return;
            }
            sent = true;
            // As `drive`: a polling consumer's post counts as its pass, and
            // takes what waits in its ring (the post stamped the ring as
            // looked at, so the peer skips its doorbell: a consumer that
            // posts and spins on its memory, as MPI's eager RDMA does, must
            // still take what arrived).
            if poller {
                p.passes = p.passes.wrapping_add(1);
                p.shared.passes.store(p.passes, Ordering::Relaxed);
            }
            p.frames = p.frames.wrapping_add(1);
            let Some(m) = &c.shm else { return };
            if poller {
                m.rx.polled(now);
            }
            // ACKs alone need no pump (a third of a post's cost when
            // each post found one: msg_rate).
            if c.shm_in && (m.rx.available() > 0 || !c.absorb()) {
                // What a polling consumer takes here it answers with a later
                // post, as after a pass: the ACK waits for it (`hold_ack`).
                p.in_pass = poller;
                p.pass_ns = clock::ns_of(now);
                p.take_input(token);
                p.in_pass = false;
            }
        });
        if sent {
            self.hand_back();
        }
        sent
    }

    fn quiet(&mut self) {
        self.seen_passes = self.passes;
        self.active_at = 0;
        self.poller = false;
        // A wait's spin is not polling: the clock starts again after it.
        self.polled_since = 0;
        self.flush_held();
        // This consumer stops looking for answers: doorbells it skipped
        // and that are still unread go now.
        self.ring_overdue();
        if self.on_quiet_set {
            // The thread sleeps deaf to the sockets: it must hear the
            // doorbells this consumer will now sleep on.
            self.shared.kick();
        }
        if self.prepare_sleep() {
            self.pump_ready();
        }
        self.hand_back();
    }

    fn before_sleep(&mut self) -> (i32, i32, bool) {
        self.sleep_plan()
    }

    fn turn(&mut self, epfd: i32, events: &[libc::epoll_event]) {
        if epfd == self.epq {
            // Woken on the quiet set (the doorbell, or the tick): look at
            // every socket once, without waiting.
            let mut all = std::mem::take(&mut self.pass_events);
            // SAFETY: a non-blocking look at our epoll into our array.
            let n = unsafe { libc::epoll_wait(self.epfd, all.as_mut_ptr(), all.len() as i32, 0) };
            let n = n.max(0) as usize;
            let bell = events.iter().any(|e| e.u64 == BELL) && !all[..n].iter().any(|e| e.u64 == BELL);
            if bell && n < all.len() {
                all[n] = libc::epoll_event { events: libc::EPOLLIN as u32, u64: BELL };
                self.serve(&all[..n + 1]);
            } else {
                self.serve(&all[..n]);
            }
            self.pass_events = all;
        } else {
            self.serve(events);
        }
    }

    fn shutdown(&mut self) {
        self.shutdown_all();
    }
}

fn yes(v: bool) -> &'static str {
    if v { "yes" } else { "no" }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes waiting on the reading end of a socketpair (taken): the
    /// doorbells rung, or the frames written.
    fn waiting(fd: i32) -> usize {
        let mut b = [0u8; 4096];
        // SAFETY: a non-blocking read into our stack buffer.
        let n = unsafe { libc::recv(fd, b.as_mut_ptr() as *mut libc::c_void, b.len(), libc::MSG_DONTWAIT) };
        n.max(0) as usize
    }

    /// An on-node connection that wrote 64 bytes to its peer: the
    /// connection, the peer's end of the mapping, and the socketpair whose
    /// second end shows what was rung.
    fn written_conn() -> (Conn, Shm, [i32; 2]) {
        let mut sv = [0i32; 2];
        // SAFETY: a socketpair into our array.
        assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) }, 0);
        let (mut a, name) = Shm::create().unwrap();
        let b = Shm::open(&name).unwrap();
        a.unlink();
        // SAFETY: all-zero sockaddr_in is a valid (unused) peer address.
        let mut c = Conn::new(sv[0], 0, Phase::Open, true, unsafe { std::mem::zeroed() });
        c.shm = Some(a);
        // SAFETY: 64 readable bytes.
        assert_eq!(unsafe { c.shm.as_ref().unwrap().tx.push([7u8; 64].as_ptr(), 64) }, 64);
        (c, b, sv)
    }

    #[test]
    fn a_reader_whose_look_is_as_old_as_ours_is_not_rung_and_one_that_stopped_is() {
        let (mut c, b, sv) = written_conn();
        let m = c.shm.as_ref().unwrap();
        let skipped = |c: &mut Conn| {
            let m = c.shm.as_ref().unwrap();
            (c.skipped_head, c.skipped_tail) = (m.tx.head(), m.tx.tail());
            c.skipped_at = clock::now_ns() - 2 * shm::OVERDUE_NS;
        };
        // Both ends looked last longer ago than a reader's look may be,
        // but within a pause (the machine paused): not rung.
        let then = clock::ticks() - clock::ticks_of_ns((shm::POLLED_NS + shm::PAUSE_NS) / 2);
        b.rx.polled(then);
        m.rx.polled(then);
        skipped(&mut c);
        overdue(&mut c, clock::now_ns());
        assert_eq!(waiting(sv[1]), 0, "a reader that looked as lately as we did was rung");
        assert_ne!(c.skipped_at, 0, "the skipped doorbell was forgotten");
        // We looked since and it did not: rung.
        c.shm.as_ref().unwrap().rx.polled(clock::ticks());
        skipped(&mut c);
        overdue(&mut c, clock::now_ns());
        assert_eq!((waiting(sv[1]), c.skipped_at), (1, 0), "a reader that stopped looking was not rung");
        // SAFETY: closing our socketpair.
        unsafe {
            libc::close(sv[0]);
            libc::close(sv[1]);
        }
    }

    #[test]
    fn a_reader_that_keeps_taking_is_not_rung_and_one_that_stopped_is() {
        let (mut c, b, sv) = written_conn();
        let tx = &c.shm.as_ref().unwrap().tx;
        let t0 = 1_000_000;
        c.skipped_at = t0;
        c.skipped_head = tx.head();
        c.skipped_tail = tx.tail();
        let mut sink = [0u8; 64];
        // The reader takes some: the 10 µs start again from this look.
        // SAFETY: 16 writable bytes.
        assert_eq!(unsafe { b.rx.pop(sink.as_mut_ptr(), 16) }, 16);
        overdue(&mut c, t0 + shm::OVERDUE_NS);
        assert_eq!((waiting(sv[1]), c.skipped_at), (0, t0 + shm::OVERDUE_NS), "a reader taking bytes was rung");
        overdue(&mut c, t0 + 2 * shm::OVERDUE_NS - 1);
        assert_eq!(waiting(sv[1]), 0);
        // It stopped: rung once, 10 µs after its last progress.
        overdue(&mut c, t0 + 2 * shm::OVERDUE_NS);
        assert_eq!((waiting(sv[1]), c.skipped_at), (1, 0));
        // A consumer going to sleep rings at once for bytes still unread.
        c.skipped_at = t0;
        overdue(&mut c, u64::MAX);
        assert_eq!(waiting(sv[1]), 1);
        // All taken: nothing to ring for.
        c.skipped_at = t0;
        // SAFETY: 64 writable bytes.
        assert_eq!(unsafe { b.rx.pop(sink.as_mut_ptr(), 64) }, 48);
        overdue(&mut c, u64::MAX);
        assert_eq!((waiting(sv[1]), c.skipped_at), (0, 0));
        drop(c);
        // SAFETY: closing our socketpair (a Conn leaves its fd to `end`).
        unsafe {
            libc::close(sv[0]);
            libc::close(sv[1]);
        }
    }

    #[test]
    fn acks_alone_are_rung_for_only_a_tick_late_unless_we_go_quiet() {
        let (mut c, b, sv) = written_conn();
        let t = clock::ticks();
        let at = clock::ns_of(t);
        c.acks_skipped = t;
        overdue(&mut c, at + shm::OVERDUE_NS);
        assert_eq!((waiting(sv[1]), c.acks_skipped), (0, t), "ACKs alone were rung for as soon as bytes would be");
        overdue(&mut c, at + ACK_OVERDUE_NS);
        assert_eq!((waiting(sv[1]), c.acks_skipped), (1, 0), "ACKs alone were not rung for a tick late");
        // Going quiet: at once.
        c.acks_skipped = t;
        overdue(&mut c, u64::MAX);
        assert_eq!((waiting(sv[1]), c.acks_skipped), (1, 0), "ACKs alone were not rung for as we went quiet");
        // The reader looked since: it took them, nothing is rung.
        c.acks_skipped = t;
        b.rx.polled(t + 1);
        overdue(&mut c, at + ACK_OVERDUE_NS);
        assert_eq!((waiting(sv[1]), c.acks_skipped), (0, 0), "ACKs a reader took were rung for");
        drop(c);
        // SAFETY: closing our socketpair (a Conn leaves its fd to `end`).
        unsafe {
            libc::close(sv[0]);
            libc::close(sv[1]);
        }
    }

    #[test]
    fn the_thread_rings_a_dozing_reader_for_acks_alone_only_once_they_wait() {
        std::thread::spawn(|| {
            role::become_progress_thread();
            let (mut c, b, sv) = written_conn();
            (c.ring_acks, c.shm_out) = (true, true);
            // The reader's thread dozes and its consumer looked just now.
            b.rx.prepare_doze();
            b.rx.polled(clock::ticks());
            c.resp.push_back(Resp::Ack(1));
            publish_acks(&mut c);
            assert_eq!(waiting(sv[1]), 0, "the thread rang a looking reader for ACKs alone");
            assert_ne!(c.acks_skipped, 0, "ACKs left unrung were not left to `overdue`");
            // Going quiet (or its next plan, with no consumer polling): rung.
            overdue(&mut c, u64::MAX);
            assert_ne!(waiting(sv[1]), 0, "skipped ACKs were never rung for");
            // A reader asleep is rung at once.
            b.rx.prepare_sleep();
            c.resp.push_back(Resp::Ack(1));
            publish_acks(&mut c);
            assert_eq!(waiting(sv[1]), 1, "a sleeping reader was not rung for its ACKs");
            drop(c);
            // SAFETY: closing our socketpair (a Conn leaves its fd to `end`).
            unsafe {
                libc::close(sv[0]);
                libc::close(sv[1]);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_woken_thread_counts_as_a_look_for_writers_but_not_for_its_own_plan() {
        let (_shared, _epfd, mut p) = engine();
        let (mut c, b, sv) = written_conn();
        c.shm_in = true;
        let t = p.conns.insert(c);
        p.shm_conns.push(t);
        let now = clock::ticks();
        assert!(!b.tx.looked_within(now), "a reader nobody looked at counted as looking");
        p.awake();
        assert!(b.tx.looked_within(clock::ticks()), "the woken thread's look did not count for the writer");
        // Bytes come; the consumer itself has not looked: the plan takes them.
        // SAFETY: 8 readable bytes.
        assert_eq!(unsafe { b.tx.push([1u8; 8].as_ptr(), 8) }, 8);
        p.passes += 1;
        assert!(p.look(), "the thread's own stamp kept it off bytes its consumer never looked at");
        assert_eq!(p.ready, vec![t]);
        // SAFETY: closing our socketpair.
        unsafe {
            libc::close(sv[0]);
            libc::close(sv[1]);
        }
    }

    #[test]
    fn a_doorbell_left_unsure_is_decided_by_the_plan_once_the_consumer_stops() {
        let (shared, epfd, mut p) = engine();
        let (mut c, b, sv) = written_conn();
        // The reader went to sleep as the bytes landed; our look, without
        // the fence, took it for awake.
        b.rx.prepare_sleep();
        let unsure = |c: &mut Conn| {
            let m = c.shm.as_ref().unwrap();
            (c.skipped_head, c.skipped_tail, c.skipped_at, c.unsure) = (m.tx.head(), m.tx.seen_tail(), clock::now_ns(), true);
        };
        unsure(&mut c);
        let t = p.conns.insert(c);
        p.shm_conns.push(t);
        // Our consumer still polls: its passes will look; the plan leaves it.
        p.passes += 1;
        p.sleep_plan();
        assert_eq!(waiting(sv[1]), 0, "rung while our consumer still polled");
        // It stopped (a tick went by without a pass or post): rung.
        p.active_at = clock::now_ns() - 2 * TICK_NS;
        p.sleep_plan();
        assert_eq!(waiting(sv[1]), 1, "an unsure doorbell to a sleeping reader was left unrung");
        assert_eq!(p.conns.get(&t).unwrap().skipped_at, 0);
        // A reader awake will see the bytes itself: not rung, settled.
        b.rx.awake();
        unsure(p.conns.get_mut(&t).unwrap());
        p.sleep_plan();
        let c = p.conns.get(&t).unwrap();
        assert_eq!((waiting(sv[1]), c.skipped_at, c.unsure), (0, 0, false), "a reader awake was rung");
        drop(p);
        drop(shared);
        // SAFETY: closing our socketpair and epoll set.
        unsafe {
            for fd in [sv[0], sv[1], epfd] {
                libc::close(fd);
            }
        }
    }

    use super::super::eventfd::{readable, socketpair};

    /// An engine, its IA's shared state and its epoll set, with no thread.
    fn engine() -> (Arc<Shared>, i32, Progress) {
        // SAFETY: all-zero sockaddr_in is a valid (unused) address.
        let shared = Arc::new(Shared::new(unsafe { std::mem::zeroed() }).unwrap());
        // SAFETY: plain syscall.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(epfd >= 0);
        let p = Progress::new(shared.clone(), epfd);
        (shared, epfd, p)
    }

    /// A TCP connection accepted on a listener of ours: (listener's port,
    /// the accepted end, the dialling end, the listener).
    fn accepted() -> (u16, i32, i32, i32) {
        // SAFETY: a listening socket on loopback, a socket dialling it and
        // the accepted end, all ours; the addresses are full sockaddr_ins.
        unsafe {
            let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            let mut sa: libc::sockaddr_in = std::mem::zeroed();
            sa.sin_family = libc::AF_INET as u16;
            sa.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
            assert_eq!(libc::bind(l, &sa as *const _ as *const libc::sockaddr, len), 0);
            assert_eq!(libc::listen(l, 4), 0);
            let port = cm::local_port_of(l);
            sa.sin_port = port.to_be();
            let d = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert_eq!(libc::connect(d, &sa as *const _ as *const libc::sockaddr, len), 0);
            let a = libc::accept(l, std::ptr::null_mut(), std::ptr::null_mut());
            assert!(a >= 0);
            (port, a, d, l)
        }
    }

    fn requests_posted(shared: &Shared) -> usize {
        lock(&shared.events).iter().filter(|e| matches!(e, Ev::Cm { kind: CmEventKind::ConnectRequest, .. })).count()
    }

    /// A PSP listens for RC, then for UD, on one port: a UD request that
    /// comes in between waits for the UD listener instead of being refused
    /// (a `dtestx -u -m` client hung on that refusal); one that waits in
    /// vain is refused once its grace is over.
    #[test]
    fn a_request_waits_for_its_kinds_listener_while_the_other_kind_listens() {
        let (shared, epfd, mut p) = engine();
        let (port, a, d, l) = accepted();
        let rc = cm::Id::create(&shared, 0, false);
        lock(&shared.ports).insert(port, [rc.key(), 0]);
        // SAFETY: all-zero sockaddr_in, as above.
        let t = p.conns.insert(Conn::new(a, 0, Phase::AwaitReq, false, unsafe { std::mem::zeroed() }));
        let mut ud_req = Hdr::new(Op::Req);
        ud_req.flags = F_DATAGRAM;
        ud_req.a = MAGIC;
        p.on_req(t, ud_req, vec![7]).unwrap();
        let c = p.conns.get(&t).unwrap();
        assert!(c.ctl.is_empty() && c.phase == Phase::AwaitReq, "refused while the PSP was still being made");
        assert!(c.req_wait.is_some() && c.deadline.is_some());
        // The UD listener comes; the next look finds it.
        let ud = cm::Id::create(&shared, 0, true);
        lock(&shared.ports).get_mut(&port).unwrap()[1] = ud.key();
        p.conns.get_mut(&t).unwrap().deadline = Some(Instant::now());
        p.expire();
        let c = p.conns.get(&t).unwrap();
        assert_eq!(c.phase, Phase::Held);
        assert_eq!(c.listen, ud.key());
        assert_eq!(requests_posted(&shared), 1);
        // An RC request where only UD listens, its grace over: refused.
        lock(&shared.ports).get_mut(&port).unwrap()[0] = 0;
        let (port2, a2, d2, l2) = accepted();
        lock(&shared.ports).insert(port2, [0, ud.key()]);
        // SAFETY: as above.
        let t2 = p.conns.insert(Conn::new(a2, 0, Phase::AwaitReq, false, unsafe { std::mem::zeroed() }));
        p.conns.get_mut(&t2).unwrap().req_until = Some(Instant::now());
        let mut rc_req = Hdr::new(Op::Req);
        rc_req.a = MAGIC;
        p.on_req(t2, rc_req, Vec::new()).unwrap();
        let c = p.conns.get(&t2).unwrap();
        assert_eq!(c.phase, Phase::Closing);
        assert_eq!(c.ctl.len(), 1, "no REJ queued");
        assert_eq!(requests_posted(&shared), 1);
        drop(p);
        // SAFETY: our fds (a Conn leaves its fd to `end`).
        unsafe {
            for fd in [a, d, l, a2, d2, l2, epfd] {
                libc::close(fd);
            }
        }
    }

    #[test]
    fn a_consumer_pass_leaves_the_threads_wakeups_to_the_thread() {
        let (shared, epfd, mut p) = engine();
        p.watch(shared.bell.fd(), BELL, libc::EPOLLIN as u32);
        // An on-node connection, and one still in its handshake on TCP (so
        // a consumer's pass looks at epoll, as during MPI's connection setup).
        let (on_node, tcp) = (socketpair(), socketpair());
        let (mut m, name) = Shm::create().unwrap();
        let writer = Shm::open(&name).unwrap();
        m.unlink();
        // SAFETY: all-zero sockaddr_in, as above.
        let mut c = Conn::new(on_node[0], 0, Phase::Open, true, unsafe { std::mem::zeroed() });
        c.shm = Some(m);
        c.shm_in = true;
        let t = p.conns.insert(c);
        p.shm_conns.push(t);
        p.watch(on_node[0], t, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32);
        // SAFETY: as above.
        let h = p.conns.insert(Conn::new(tcp[0], 0, Phase::Held, false, unsafe { std::mem::zeroed() }));
        p.watch(tcp[0], h, libc::EPOLLRDHUP as u32);
        // The thread sleeps; a command is queued, and a writer rings this ring.
        shared.kick();
        // SAFETY: 8 readable bytes.
        assert_eq!(unsafe { writer.tx.push([5u8; 8].as_ptr(), 8) }, 8);
        shm::ring_bell(on_node[1]);
        // A consumer's pass takes the bytes but neither wakeup.
        p.consumer_pass(true);
        assert_eq!(writer.tx.tail(), 8, "the pass did not take what was in the ring");
        assert!(readable(shared.bell.fd()), "a consumer answered the thread's doorbell");
        assert!(readable(on_node[0]), "a consumer drained the ring's doorbell");
        // The thread answers both.
        let p = std::thread::spawn(move || {
            role::become_progress_thread();
            let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
            // SAFETY: a non-blocking look at our epoll into our array.
            let n = unsafe { libc::epoll_wait(epfd, evs.as_mut_ptr(), 8, 0) };
            assert_eq!(n, 2);
            p.turn(epfd, &evs[..2]);
            p
        })
        .join()
        .unwrap();
        assert!(!readable(shared.bell.fd()));
        assert!(!readable(on_node[0]));
        drop(p);
        // SAFETY: our fds (a Conn leaves its fd to `end`; the engine's epoll is ours here).
        unsafe {
            for fd in [on_node[0], on_node[1], tcp[0], tcp[1], epfd] {
                libc::close(fd);
            }
        }
    }

    #[test]
    fn a_burst_on_a_stream_waits_for_the_next_pass_or_tick_and_its_first_post_does_not() {
        use dapl_core::backend::{QpCaps, QpOps, SendOp, SendRequest};
        let (shared, epfd, mut p) = engine();
        let cq = super::super::cq::Cq::create(&shared, 64).unwrap();
        let pd = super::super::keys::Pd::new(shared.clone());
        let caps = QpCaps { send_wr: 64, recv_wr: 4, send_sge: 1, recv_sge: 1, datagram: false };
        let qp = super::super::qp::Qp::create(&shared, &pd, &cq, &cq, None, &caps, std::ptr::null_mut()).unwrap();
        qp.0.state.store(RTS, Ordering::Release);
        let sv = socketpair();
        // SAFETY: as above.
        let mut c = Conn::new(sv[0], 0, Phase::Open, true, unsafe { std::mem::zeroed() });
        c.qp = Some(qp.0.clone());
        let t = p.conns.insert(c);
        // A short send from the consumer's thread, as `Qp::enqueue` drives it.
        let post = |p: &mut Progress, small: bool| {
            qp.post_send(1, &[], &SendRequest::plain(SendOp::Send), 0).unwrap();
            p.drive(t, false, small);
        };
        // A consumer polls and the thread ticks: a burst's first post goes
        // at once, the rest wait.
        p.poller = true;
        p.on_quiet_set = true;
        post(&mut p, true);
        assert_eq!(waiting(sv[1]), HDR, "the burst's first post waited");
        let held = std::time::Instant::now();
        post(&mut p, true);
        post(&mut p, true);
        assert_eq!(waiting(sv[1]), 0, "a burst's later post went at once");
        // The thread's turn leaves them to the consumer a while, then
        // sends both. (Judged only if the turn came within the while: under
        // ThreadSanitizer the posts alone once took longer.)
        p.serve(&[]);
        if held.elapsed() < Duration::from_nanos(HOLD_NS) {
            assert_eq!(waiting(sv[1]), 0, "the thread took posts the consumer had just held");
        }
        std::thread::sleep(Duration::from_nanos(2 * HOLD_NS));
        p.serve(&[]);
        assert_eq!(waiting(sv[1]), 2 * HDR, "the tick left posts held");
        // Still no empty poll since: the next post waits too; the consumer's
        // empty poll sends it, and the post after that goes at once.
        post(&mut p, true);
        assert_eq!(waiting(sv[1]), 0);
        p.consumer_pass(true);
        assert_eq!(waiting(sv[1]), HDR, "an empty poll left a post held");
        post(&mut p, true);
        assert_eq!(waiting(sv[1]), HDR, "the first post after an empty poll waited");
        // A long post is never held, nor any post while the thread does not tick.
        post(&mut p, false);
        assert_eq!(waiting(sv[1]), HDR);
        p.on_quiet_set = false;
        post(&mut p, true);
        assert_eq!(waiting(sv[1]), HDR, "a post waited for a tick that will not come");
        // Held posts are written as the thread plans a sleep with no tick.
        p.on_quiet_set = true;
        post(&mut p, true);
        assert_eq!(waiting(sv[1]), 0);
        p.shared.quiet.store(true, Ordering::SeqCst);
        let _ = p.sleep_plan();
        assert_eq!(waiting(sv[1]), HDR, "a post stayed held through a sleep with no tick");
        drop(p);
        // SAFETY: our fds (a Conn leaves its fd to `end`; the epoll is ours here).
        unsafe {
            for fd in [sv[0], sv[1], epfd] {
                libc::close(fd);
            }
        }
    }

    #[test]
    fn a_consumer_that_polls_after_a_wait_gets_the_thread_to_plan_for_it() {
        let (shared, epfd, mut p) = engine();
        let sv = socketpair();
        // SAFETY: as above.
        let t = p.conns.insert(Conn::new(sv[0], 0, Phase::Open, true, unsafe { std::mem::zeroed() }));
        p.watch(sv[0], t, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32);
        // The consumer went quiet in a wait: the thread plans a sleep on
        // every socket, with no tick.
        p.shared.quiet.store(true, Ordering::SeqCst);
        let _ = p.sleep_plan();
        assert!(!p.on_quiet_set);
        // Its wait's last looks (an armed queue's) leave the thread alone
        // (when polling starts to count is `polling_unplanned`'s, below).
        p.consumer_pass(false);
        std::thread::sleep(Duration::from_nanos(2 * REPLAN_NS));
        p.consumer_pass(false);
        assert!(!readable(shared.bell.fd()), "the thread was woken for a consumer about to sleep");
        // Polling on: the thread is woken, once, to plan for it.
        p.consumer_pass(true);
        std::thread::sleep(Duration::from_nanos(2 * REPLAN_NS));
        p.consumer_pass(true);
        assert!(readable(shared.bell.fd()), "a consumer polling for longer than a wait's spin was left to a plan made for sleepers");
        shared.bell.answer();
        std::thread::sleep(Duration::from_nanos(2 * REPLAN_NS));
        p.consumer_pass(true);
        assert!(!readable(shared.bell.fd()), "the thread was woken again before it planned");
        let _ = p.sleep_plan();
        assert!(p.on_quiet_set, "the thread's new plan did not see the consumer poll");
        drop(p);
        // SAFETY: our fds (a Conn leaves its fd to `end`; the epoll is ours here).
        unsafe {
            for fd in [sv[0], sv[1], epfd] {
                libc::close(fd);
            }
        }
    }

    #[test]
    fn a_consumer_unseen_gives_the_thread_its_cpu_until_the_thread_planned() {
        let (_, epfd, mut p) = engine();
        let t0 = 1_000_000_000;
        assert!(!p.polling_unplanned(t0));
        assert!(!p.polling_unplanned(t0 + REPLAN_NS - 1));
        // Unseen for REPLAN_NS: the thread is asked to plan, and the
        // consumer gives way (a woken thread waited 2 ms for the CPU).
        assert!(p.polling_unplanned(t0 + REPLAN_NS));
        assert!(std::mem::take(&mut p.replan), "the thread was not asked to plan again");
        // Still no plan: it gives way again each REPLAN_NS, asking once.
        assert!(!p.polling_unplanned(t0 + REPLAN_NS + 1));
        assert!(p.polling_unplanned(t0 + 2 * REPLAN_NS));
        assert!(!p.replan, "the thread was asked twice before it planned");
        // Planned: the clock starts again.
        let _ = p.sleep_plan();
        assert!(!p.polling_unplanned(t0 + 3 * REPLAN_NS));
        assert!(p.polling_unplanned(t0 + 4 * REPLAN_NS));
        assert!(std::mem::take(&mut p.replan));
        // A wait's spins, one after another, are not polling: each wait
        // (`quiet`) starts the clock again.
        let _ = p.sleep_plan();
        assert!(!p.polling_unplanned(t0 + 5 * REPLAN_NS));
        p.quiet();
        assert!(!p.polling_unplanned(t0 + 6 * REPLAN_NS));
        p.quiet();
        assert!(!p.polling_unplanned(t0 + 7 * REPLAN_NS), "a consumer spinning in its waits made the thread plan for polling");
        assert!(!p.replan);
        drop(p);
        // SAFETY: the engine's epoll is ours here.
        unsafe { libc::close(epfd) };
    }
}
