//! One connected endpoint and everything under it: IA, PZ, EVDs, buffers,
//! and the primitives the tests are built from (post, reap, control).
//!
//! Both directions of data and control share one EP and one DTO EVD, so the
//! receive queue is a FIFO of data and control receives. The rule that keeps
//! them apart: a side posts exactly as many data receives as the test will
//! deliver to it, and posts the control receive for the next control message
//! only after the last of them (see `RxPlan`). Control messages are sent only
//! at points where the peer's matching control receive is already posted.

use crate::args::Mode;
use crate::dat::{self, Dat};
use crate::mem::{Buffer, Lmr};
use crate::proto::{CTRL_LEN, Ctrl};
use dat_abi::*;
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// What a completion was for, carried in the DTO cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    SendData = 1,
    RecvData = 2,
    Write = 3,
    Read = 4,
    CtrlSend = 5,
    CtrlRecv = 6,
}

impl Kind {
    fn from_cookie(c: u64) -> Option<(Kind, usize)> {
        let slot = (c & 0xFFFF_FFFF) as usize;
        let k = match c >> 56 {
            1 => Kind::SendData,
            2 => Kind::RecvData,
            3 => Kind::Write,
            4 => Kind::Read,
            5 => Kind::CtrlSend,
            6 => Kind::CtrlRecv,
            _ => return None,
        };
        Some((k, slot))
    }

    fn cookie(self, slot: usize) -> DAT_DTO_COOKIE {
        DAT_DTO_COOKIE { as_64: ((self as u64) << 56) | slot as u64 }
    }
}

/// How a data operation is posted: `seq` goes in the cookie's slot bits, so
/// a signaled completion tells which post of a stream it closes; an
/// unsignaled post is reported only if it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Post {
    pub seq: u32,
    pub signaled: bool,
}

impl Post {
    /// For tests that reap every operation and ignore which one it was.
    pub const EACH: Post = Post { seq: 0, signaled: true };

    fn flags(self) -> DAT_COMPLETION_FLAGS {
        if self.signaled { DAT_COMPLETION_DEFAULT_FLAG } else { DAT_COMPLETION_SUPPRESS_FLAG }
    }
}

/// Control slots: receives in 0..RECV_SLOTS, sends after them. At most three
/// control receives and two control sends are ever outstanding.
const RECV_SLOTS: usize = 8;
const SEND_SLOTS: usize = 8;

/// Where the peer's target area is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Peer {
    pub addr: u64,
    pub rkey: u32,
    pub len: u64,
    pub depth: u32,
}

/// Data receives for the current test: how many in all, how many posted,
/// how many arrived. The control receive after them goes in when the last
/// data receive does.
#[derive(Debug, Default)]
struct RxPlan {
    size: u64,
    total: u64,
    posted: u64,
    done: u64,
    tail_posted: bool,
    /// Reposted by `refill` after the next send rather than on arrival: a
    /// ping-pong's repost then overlaps the message's flight instead of
    /// delaying it (about 250 instructions a side on the on-node path).
    lazy: bool,
}

pub struct Session<'a> {
    pub dat: &'a Dat,
    pub mode: Mode,
    pub timeout: Duration,
    /// Queue depth of our EP (send and receive).
    pub depth: u32,
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    dto_evd: DAT_EVD_HANDLE,
    conn_evd: DAT_EVD_HANDLE,
    cr_evd: DAT_EVD_HANDLE,
    psp: DAT_PSP_HANDLE,
    ep: DAT_EP_HANDLE,
    connected: bool,
    ctrl: Buffer,
    ctrl_lmr: Lmr,
    next_recv_slot: usize,
    next_send_slot: usize,
    /// Target area [0, area) the peer writes into and reads from; our
    /// source area [area, 2*area) we send and write from.
    data: Option<(Buffer, Lmr)>,
    pub area: u64,
    pub peer: Peer,
    pub attr: DAT_IA_ATTR,
    stash: VecDeque<Ctrl>,
    rx: RxPlan,
    /// Data completions that arrived while only a control message was expected.
    pub strays: u64,
    ctrl_sent: u64,
    ctrl_send_done: u64,
    /// The event last taken, in one buffer for the whole run: a fresh,
    /// zeroed one returned by value cost each message more instructions
    /// than the provider's own dequeue (the message-rate loop is ours to
    /// keep lean, as ucx_perftest keeps its own).
    ev: DAT_EVENT,
}

impl<'a> Session<'a> {
    /// Opens the IA and makes the PZ, the EVDs and the control buffer.
    pub fn open(dat: &'a Dat, ia_name: &str, depth: u32, mode: Mode, timeout: Duration) -> Result<Session<'a>, String> {
        let ia = dat.ia_open(ia_name)?;
        let mut s = Session {
            dat,
            mode,
            timeout,
            depth,
            ia,
            pz: std::ptr::null_mut(),
            dto_evd: std::ptr::null_mut(),
            conn_evd: std::ptr::null_mut(),
            cr_evd: std::ptr::null_mut(),
            psp: std::ptr::null_mut(),
            ep: std::ptr::null_mut(),
            connected: false,
            ctrl: Buffer::new((RECV_SLOTS + SEND_SLOTS) * CTRL_LEN)?,
            ctrl_lmr: Lmr { handle: std::ptr::null_mut(), lmr_context: 0, rmr_context: 0 },
            next_recv_slot: 0,
            next_send_slot: 0,
            data: None,
            area: 0,
            peer: Peer::default(),
            attr: DAT_IA_ATTR::default(),
            stash: VecDeque::new(),
            rx: RxPlan::default(),
            strays: 0,
            ctrl_sent: 0,
            ctrl_send_done: 0,
            ev: DAT_EVENT::default(),
        };
        s.attr = dat.ia_attr(ia)?;
        s.pz = dat.pz(ia)?;
        let qlen = (2 * depth as i32 + 32).min(if s.attr.max_evd_qlen > 0 { s.attr.max_evd_qlen } else { i32::MAX });
        s.dto_evd = dat.evd(ia, qlen, DAT_EVD_DTO_FLAG)?;
        s.conn_evd = dat.evd(ia, 16, DAT_EVD_CONNECTION_FLAG)?;
        s.ctrl_lmr = Lmr::create(dat, ia, s.pz, s.ctrl.ptr(), s.ctrl.len())?;
        Ok(s)
    }

    /// Largest message and RDMA size the IA takes (0 when it does not say).
    pub fn max_message(&self) -> u64 {
        self.attr.max_message_size as u64
    }

    pub fn max_rdma(&self) -> u64 {
        self.attr.max_rdma_size as u64
    }

    fn timeout_us(&self) -> DAT_TIMEOUT {
        self.timeout.as_micros().min(u32::MAX as u128 - 1) as DAT_TIMEOUT
    }

    fn ep_attr(&self) -> DAT_EP_ATTR {
        let rd = |a: i32| if a > 0 { a.min(128) } else { 4 };
        let rd = rd(self.attr.max_rdma_read_per_ep_in).min(rd(self.attr.max_rdma_read_per_ep_out));
        let cap = |v: u32| if self.attr.max_dto_per_ep > 0 { (v as i32).min(self.attr.max_dto_per_ep) } else { v as i32 };
        DAT_EP_ATTR {
            service_type: DAT_SERVICE_TYPE_RC,
            max_message_size: self.attr.max_message_size,
            max_rdma_size: self.attr.max_rdma_size,
            qos: DAT_QOS_BEST_EFFORT,
            recv_completion_flags: DAT_COMPLETION_DEFAULT_FLAG,
            request_completion_flags: DAT_COMPLETION_DEFAULT_FLAG,
            max_recv_dtos: cap(self.depth),
            max_request_dtos: cap(self.depth),
            max_recv_iov: 1,
            max_request_iov: 1,
            max_rdma_read_in: rd,
            max_rdma_read_out: rd,
            srq_soft_hw: DAT_HW_DEFAULT,
            max_rdma_read_iov: 1,
            max_rdma_write_iov: 1,
            ep_transport_specific_count: 0,
            ep_transport_specific: std::ptr::null_mut(),
            ep_provider_specific_count: 0,
            ep_provider_specific: std::ptr::null_mut(),
        }
    }

    fn create_ep(&mut self) -> Result<(), String> {
        let attr = self.ep_attr();
        // SAFETY: handles we made; attr lives across the call.
        let r = unsafe { (self.dat.ep_create)(self.ia, self.pz, self.dto_evd, self.dto_evd, self.conn_evd, &attr, &mut self.ep) };
        self.dat.check(r, &format!("dat_ep_create (queue depth {})", self.depth))
    }

    /// Waits for one event on a connection or CR EVD.
    fn wait_cm(&self, evd: DAT_EVD_HANDLE, timeout: DAT_TIMEOUT, what: &str) -> Result<DAT_EVENT, String> {
        let mut ev = DAT_EVENT::default();
        let mut nmore: DAT_COUNT = 0;
        // SAFETY: an EVD we made; event and count are ours.
        let r = unsafe { (self.dat.evd_wait)(evd, timeout, 1, &mut ev, &mut nmore) };
        if dat::major(r) == DAT_TIMEOUT_EXPIRED {
            return Err(format!("timed out after {} s waiting for {what}", self.timeout.as_secs()));
        }
        self.dat.check(r, &format!("dat_evd_wait ({what})"))?;
        Ok(ev)
    }

    /// Server: listens on `port` and accepts one connection.
    pub fn accept(&mut self, port: u64) -> Result<(), String> {
        self.cr_evd = self.dat.evd(self.ia, 16, DAT_EVD_CR_FLAG)?;
        // SAFETY: handles we made, an out pointer.
        let r = unsafe { (self.dat.psp_create)(self.ia, port, self.cr_evd, DAT_PSP_CONSUMER_FLAG, &mut self.psp) };
        self.dat.check(r, &format!("dat_psp_create(conn_qual {port})"))?;
        // A server waits for its client however long it takes.
        let ev = self.wait_cm(self.cr_evd, DAT_TIMEOUT_INFINITE, "a connection request")?;
        if ev.event_number != DAT_CONNECTION_REQUEST_EVENT {
            return Err(format!("expected a connection request, got event {:#x}", ev.event_number));
        }
        // SAFETY: a CR event carries cr_arrival_event_data.
        let cr = unsafe { ev.event_data.cr_arrival_event_data.cr_handle };
        self.create_ep()?;
        // One for the peer's hello, one for its first test request.
        self.post_ctrl_recv()?;
        self.post_ctrl_recv()?;
        // SAFETY: the CR from the event and our unconnected EP; no private data.
        let r = unsafe { (self.dat.cr_accept)(cr, self.ep, 0, std::ptr::null_mut()) };
        self.dat.check(r, "dat_cr_accept")?;
        self.await_established("the accepted connection")
    }

    /// Client: connects to `server` (IPv4 address or host name) on `port`.
    pub fn connect(&mut self, server: &str, port: u64) -> Result<(), String> {
        let ip = resolve(server)?;
        self.create_ep()?;
        self.post_ctrl_recv()?;
        self.post_ctrl_recv()?;
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
            sin_zero: [0; 8],
        };
        // SAFETY: sin outlives the call (providers copy the address); no private data.
        let r = unsafe {
            (self.dat.ep_connect)(
                self.ep,
                &sin as *const libc::sockaddr_in as DAT_IA_ADDRESS_PTR,
                port,
                self.timeout_us(),
                0,
                std::ptr::null_mut(),
                DAT_QOS_BEST_EFFORT,
                DAT_CONNECT_DEFAULT_FLAG,
            )
        };
        self.dat.check(r, &format!("dat_ep_connect({ip}, conn_qual {port})"))?;
        self.await_established(&format!("the connection to {ip} conn_qual {port}")).map_err(|e| {
            format!("{e} (is a dat-perf server listening there, on the same --port?)")
        })
    }

    fn await_established(&mut self, what: &str) -> Result<(), String> {
        let ev = self.wait_cm(self.conn_evd, self.timeout_us(), what)?;
        let name = match ev.event_number {
            DAT_CONNECTION_EVENT_ESTABLISHED => {
                self.connected = true;
                return Ok(());
            }
            DAT_CONNECTION_EVENT_PEER_REJECTED => "rejected by the peer",
            DAT_CONNECTION_EVENT_NON_PEER_REJECTED => "rejected (no listener, or by the network)",
            DAT_CONNECTION_EVENT_UNREACHABLE => "peer unreachable",
            DAT_CONNECTION_EVENT_TIMED_OUT => "timed out",
            DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR => "accept failed",
            DAT_CONNECTION_EVENT_DISCONNECTED | DAT_CONNECTION_EVENT_BROKEN => "broken",
            _ => "unexpected event",
        };
        Err(format!("{what}: {name} (event {:#x})", ev.event_number))
    }

    /// Registers the data buffer: target area, then source area, `area` bytes each.
    pub fn register_data(&mut self, area: u64) -> Result<(), String> {
        let len = usize::try_from(area * 2).map_err(|_| "buffer too large".to_owned())?;
        let buf = Buffer::new(len)?;
        let lmr = Lmr::create(self.dat, self.ia, self.pz, buf.ptr(), len)?;
        self.data = Some((buf, lmr));
        self.area = area;
        Ok(())
    }

    pub fn hello(&self) -> Ctrl {
        let (buf, lmr) = self.data.as_ref().expect("data registered before hello");
        Ctrl::Hello { addr: buf.addr(), rkey: lmr.rmr_context, len: self.area, depth: self.depth }
    }

    pub fn set_peer(&mut self, c: Ctrl) -> Result<(), String> {
        match c {
            Ctrl::Hello { addr, rkey, len, depth } => {
                self.peer = Peer { addr, rkey, len, depth };
                Ok(())
            }
            other => Err(format!("expected the peer's hello, got {other:?}")),
        }
    }

    pub fn buf(&self) -> &Buffer {
        &self.data.as_ref().expect("data registered").0
    }

    fn data_triplet(&self, off: u64, size: u64) -> DAT_LMR_TRIPLET {
        let (buf, lmr) = self.data.as_ref().expect("data registered");
        DAT_LMR_TRIPLET { virtual_address: buf.addr() + off, segment_length: size as DAT_SEG_LENGTH, lmr_context: lmr.lmr_context }
    }

    fn ctrl_triplet(&self, slot: usize) -> DAT_LMR_TRIPLET {
        DAT_LMR_TRIPLET {
            virtual_address: self.ctrl.addr() + (slot * CTRL_LEN) as u64,
            segment_length: CTRL_LEN as DAT_SEG_LENGTH,
            lmr_context: self.ctrl_lmr.lmr_context,
        }
    }

    pub fn post_ctrl_recv(&mut self) -> Result<(), String> {
        let slot = self.next_recv_slot % RECV_SLOTS;
        self.next_recv_slot += 1;
        let mut iov = self.ctrl_triplet(slot);
        // SAFETY: the slot lies in our registered control buffer.
        let r = unsafe { (self.dat.ep_post_recv)(self.ep, 1, &mut iov, Kind::CtrlRecv.cookie(slot), DAT_COMPLETION_DEFAULT_FLAG) };
        self.dat.check(r, "dat_ep_post_recv (control)")
    }

    pub fn send_ctrl(&mut self, c: Ctrl) -> Result<(), String> {
        let slot = RECV_SLOTS + self.next_send_slot % SEND_SLOTS;
        self.next_send_slot += 1;
        self.ctrl.write(slot * CTRL_LEN, &c.encode());
        let mut iov = self.ctrl_triplet(slot);
        // SAFETY: the slot lies in our registered control buffer.
        let r = unsafe { (self.dat.ep_post_send)(self.ep, 1, &mut iov, Kind::CtrlSend.cookie(slot), DAT_COMPLETION_DEFAULT_FLAG) };
        self.dat.check(r, "dat_ep_post_send (control)")?;
        self.ctrl_sent += 1;
        Ok(())
    }

    /// Waits until every control send has completed, so a disconnect right
    /// after cannot flush the last one.
    pub fn flush_ctrl_sends(&mut self) -> Result<(), String> {
        while self.ctrl_send_done < self.ctrl_sent {
            self.event(true, true)?;
            if let (Kind::RecvData | Kind::SendData | Kind::Write | Kind::Read, _) = self.classify()? {
                self.strays += 1;
            }
        }
        Ok(())
    }

    /// Data receives land in the target area.
    fn post_recv_data(&mut self, size: u64) -> Result<(), String> {
        let mut iov = self.data_triplet(0, size);
        // SAFETY: within our registered data buffer.
        let r = unsafe { (self.dat.ep_post_recv)(self.ep, 1, &mut iov, Kind::RecvData.cookie(0), DAT_COMPLETION_DEFAULT_FLAG) };
        self.dat.check(r, "dat_ep_post_recv")
    }

    pub fn post_send(&mut self, size: u64, p: Post) -> Result<(), String> {
        let mut iov = self.data_triplet(self.area, size);
        // SAFETY: within our registered data buffer.
        let r = unsafe { (self.dat.ep_post_send)(self.ep, 1, &mut iov, Kind::SendData.cookie(p.seq as usize), p.flags()) };
        self.dat.check(r, "dat_ep_post_send")
    }

    /// Our source area to the peer's target area.
    pub fn post_write(&mut self, size: u64, p: Post) -> Result<(), String> {
        let mut iov = self.data_triplet(self.area, size);
        let remote = DAT_RMR_TRIPLET { virtual_address: self.peer.addr, segment_length: size as DAT_SEG_LENGTH, rmr_context: self.peer.rkey };
        // SAFETY: local range registered; the remote range is the peer's advertised target area.
        let r = unsafe { (self.dat.ep_post_rdma_write)(self.ep, 1, &mut iov, Kind::Write.cookie(p.seq as usize), &remote, p.flags()) };
        self.dat.check(r, "dat_ep_post_rdma_write")
    }

    /// The peer's target area into ours.
    pub fn post_read(&mut self, size: u64, p: Post) -> Result<(), String> {
        let mut iov = self.data_triplet(0, size);
        let remote = DAT_RMR_TRIPLET { virtual_address: self.peer.addr, segment_length: size as DAT_SEG_LENGTH, rmr_context: self.peer.rkey };
        // SAFETY: local range registered; the remote range is the peer's advertised target area.
        let r = unsafe { (self.dat.ep_post_rdma_read)(self.ep, 1, &mut iov, Kind::Read.cookie(p.seq as usize), &remote, p.flags()) };
        self.dat.check(r, "dat_ep_post_rdma_read")
    }

    /// Starts a test's receive plan: `total` data receives of `size` bytes.
    pub fn begin_rx(&mut self, size: u64, total: u64) -> Result<(), String> {
        self.rx = RxPlan { size, total, ..RxPlan::default() };
        self.refill()
    }

    /// From now on receives are reposted by `refill`, not as they complete.
    pub fn lazy_refill(&mut self) {
        self.rx.lazy = true;
    }

    pub fn rx_done(&self) -> u64 {
        self.rx.done
    }

    pub fn rx_expected(&self) -> u64 {
        self.rx.total
    }

    /// Reposts the receives that completed since the last look.
    pub fn refill(&mut self) -> Result<(), String> {
        // Room for the control receives that may sit beside the data ones.
        let cap = self.depth.saturating_sub(4) as u64;
        while self.rx.posted < self.rx.total && self.rx.posted - self.rx.done < cap {
            self.post_recv_data(self.rx.size)?;
            self.rx.posted += 1;
        }
        if self.rx.posted == self.rx.total && !self.rx.tail_posted {
            self.post_ctrl_recv()?;
            self.rx.tail_posted = true;
        }
        Ok(())
    }

    /// One completion from the DTO EVD: None when `block` is false and none is
    /// queued. Polling mode spins on dat_evd_dequeue, wait mode sleeps in
    /// dat_evd_wait; `force_wait` sleeps regardless (for control waits, which
    /// are not measured and should leave the CPU to the other side).
    /// The next event into `self.ev`; false: none (`block` false only).
    fn event(&mut self, block: bool, force_wait: bool) -> Result<bool, String> {
        let tmo = self.timeout_us();
        let ev = &mut self.ev;
        if block && (self.mode == Mode::Wait || force_wait) {
            let mut nmore: DAT_COUNT = 0;
            // SAFETY: our DTO EVD; event and count are ours.
            let r = unsafe { (self.dat.evd_wait)(self.dto_evd, tmo, 1, ev, &mut nmore) };
            if dat::major(r) == DAT_TIMEOUT_EXPIRED {
                return Err(format!("no completion within {} s (dat_evd_wait timed out)", self.timeout.as_secs()));
            }
            self.dat.check(r, "dat_evd_wait")?;
            return Ok(true);
        }
        let mut deadline: Option<Instant> = None;
        let mut spins = 0u32;
        loop {
            // SAFETY: our DTO EVD; the event is ours.
            let r = unsafe { (self.dat.evd_dequeue)(self.dto_evd, &mut *ev) };
            if r == DAT_SUCCESS {
                return Ok(true);
            }
            if dat::major(r) != DAT_QUEUE_EMPTY {
                return Err(format!("dat_evd_dequeue failed: {}", self.dat.strerror(r)));
            }
            if !block {
                return Ok(false);
            }
            // The clock is read rarely: it costs more than a dequeue under emulation.
            spins += 1;
            if spins & 4095 == 0 {
                let now = Instant::now();
                match deadline {
                    None => deadline = Some(now + self.timeout),
                    Some(d) if now > d => return Err(format!("no completion within {} s", self.timeout.as_secs())),
                    _ => {}
                }
            }
        }
    }

    /// Classifies a completion, checks its status, files control messages
    /// and keeps the receive plan topped up. The event: `self.ev`.
    fn classify(&mut self) -> Result<(Kind, usize), String> {
        if self.ev.event_number != DAT_DTO_COMPLETION_EVENT {
            return Err(format!("unexpected event {:#x} on the DTO EVD", self.ev.event_number));
        }
        // SAFETY: a DTO completion event carries dto_completion_event_data.
        let d = unsafe { self.ev.event_data.dto_completion_event_data };
        // SAFETY: every cookie we post is written as_64.
        let cookie = unsafe { d.user_cookie.as_64 };
        let (kind, slot) = Kind::from_cookie(cookie).ok_or_else(|| format!("completion with a foreign cookie {cookie:#x}"))?;
        if d.status != DAT_DTO_SUCCESS {
            return Err(format!("{kind:?} completed with DTO status {} (connection broken or remote access error)", d.status));
        }
        match kind {
            Kind::CtrlRecv => {
                let mut b = [0u8; CTRL_LEN];
                self.ctrl.read(slot * CTRL_LEN, &mut b);
                self.stash.push_back(Ctrl::decode(&b)?);
            }
            Kind::RecvData => {
                self.rx.done += 1;
                // Lazy or not, never down to the last posted receive.
                if !self.rx.lazy || self.rx.posted - self.rx.done < 2 {
                    self.refill()?;
                }
            }
            Kind::CtrlSend => self.ctrl_send_done += 1,
            _ => {}
        }
        Ok((kind, slot))
    }

    /// The next data completion (control ones are filed on the way).
    pub fn next_data(&mut self) -> Result<Kind, String> {
        self.next_data_seq().map(|(k, _)| k)
    }

    /// The next data completion and the `seq` of the post it completes.
    pub fn next_data_seq(&mut self) -> Result<(Kind, u32), String> {
        loop {
            self.event(true, false)?;
            match self.classify()? {
                (Kind::CtrlRecv | Kind::CtrlSend, _) => continue,
                (k, seq) => return Ok((k, seq as u32)),
            }
        }
    }

    /// A data completion if one is queued.
    pub fn poll_data(&mut self) -> Result<Option<Kind>, String> {
        while self.event(false, false)? {
            match self.classify()?.0 {
                Kind::CtrlRecv | Kind::CtrlSend => continue,
                k => return Ok(Some(k)),
            }
        }
        Ok(None)
    }

    /// The next control message; sleeps in dat_evd_wait.
    pub fn wait_ctrl(&mut self) -> Result<Ctrl, String> {
        loop {
            if let Some(c) = self.stash.pop_front() {
                return Ok(c);
            }
            self.event(true, true)?;
            match self.classify()?.0 {
                Kind::CtrlRecv | Kind::CtrlSend => {}
                _ => self.strays += 1,
            }
        }
    }

    /// Client: tells the server we are done, so it can close too.
    pub fn disconnect(&mut self) {
        if !self.connected {
            return;
        }
        self.connected = false;
        // SAFETY: our EP.
        let r = unsafe { (self.dat.ep_disconnect)(self.ep, DAT_CLOSE_GRACEFUL_FLAG) };
        if r == DAT_SUCCESS {
            // Either side may see the other's disconnect first; a short wait is enough.
            let mut ev = DAT_EVENT::default();
            let mut n: DAT_COUNT = 0;
            // SAFETY: our connection EVD.
            unsafe { (self.dat.evd_wait)(self.conn_evd, 3_000_000, 1, &mut ev, &mut n) };
        }
    }
}

impl Drop for Session<'_> {
    /// Frees in reverse order of creation; errors here cannot change a
    /// result already printed, so they are ignored.
    fn drop(&mut self) {
        self.disconnect();
        let d = self.dat;
        // SAFETY: each handle is ours, freed once, children before parents.
        unsafe {
            if !self.ep.is_null() {
                // Flushed receives: drain so the EVD can be freed.
                let mut ev = DAT_EVENT::default();
                (d.ep_free)(self.ep);
                while (d.evd_dequeue)(self.dto_evd, &mut ev) == DAT_SUCCESS {}
            }
            if let Some((_, mut lmr)) = self.data.take() {
                let _ = lmr.free(d);
            }
            let _ = self.ctrl_lmr.free(d);
            if !self.psp.is_null() {
                (d.psp_free)(self.psp);
            }
            for evd in [self.dto_evd, self.conn_evd, self.cr_evd] {
                if !evd.is_null() {
                    (d.evd_free)(evd);
                }
            }
            if !self.pz.is_null() {
                (d.pz_free)(self.pz);
            }
            if (d.ia_close)(self.ia, DAT_CLOSE_GRACEFUL_FLAG) != DAT_SUCCESS {
                (d.ia_close)(self.ia, DAT_CLOSE_ABRUPT_FLAG);
            }
        }
    }
}

/// An IPv4 address, or a name resolved to one (rdma_cm providers take IPv4 here).
pub fn resolve(server: &str) -> Result<Ipv4Addr, String> {
    if let Ok(ip) = server.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    use std::net::ToSocketAddrs;
    let addrs = (server, 0).to_socket_addrs().map_err(|e| format!("cannot resolve '{server}': {e}"))?;
    addrs
        .filter_map(|a| match a.ip() {
            std::net::IpAddr::V4(v4) => Some(v4),
            _ => None,
        })
        .next()
        .ok_or_else(|| format!("'{server}' has no IPv4 address"))
}
