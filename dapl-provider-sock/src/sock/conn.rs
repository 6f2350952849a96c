//! One connection's state in the socket engine: its handshake phase, the
//! frame going out, where the arriving payload goes, and its on-node path.
//! The engine (`progress`) owns every `Conn`; `inbound` and `outbound` move
//! its bytes.

use super::qp::{QpInner, RTS, Sge, Wqe};
use super::shm::Shm;
use super::srq::RecvWqe;
use super::tail;
use super::wire::{HDR, Hdr};
use dapl_core::backend::CompletionKind;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Input is read in gulps of this size.
pub(super) const INBUF: usize = 64 * 1024;
/// An active end's first pause between dials of a port nobody listens on.
pub(super) const DIAL_BACKOFF: Duration = Duration::from_millis(10);

/// Whether the QP a stream was bound to at `epoch` still takes its
/// traffic: not rebound since, and running.
fn feeds(q: &QpInner, epoch: u32) -> bool {
    q.epoch.load(Ordering::Acquire) == epoch && q.is(RTS)
}

pub(super) fn errno() -> i32 {
    // SAFETY: the calling thread's errno, which libc keeps for it.
    // (`io::Error::last_os_error` made an error and dropped it, 20
    // instructions at every empty read of a polled stream.)
    unsafe { *libc::__errno_location() }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// connect() in flight.
    Connecting,
    /// REQ sent; waiting for REP or REJ.
    AwaitRep,
    /// Accepted by the kernel; waiting for REQ.
    AwaitReq,
    /// Waiting for our consumer (accept/reject, or establish): no reading.
    Held,
    /// Data flows.
    Open,
    /// Only our last handshake frame to flush, then close.
    Closing,
}

pub(super) enum Resp {
    Ack(u64),
    Read { addr: u64, len: u64 },
    Atomic(u64),
    /// A by-reference READ whose data the target placed already.
    ReadPlaced(u64),
    Nak(u8),
}

/// One frame going out: a header, then payload segments.
pub(super) struct Out {
    /// An ACK going out in front of the frame, in the same system call
    /// (`pre_len` 0 or HDR).
    pub(super) pre: [u8; HDR],
    pub(super) pre_len: usize,
    pub(super) hdr: [u8; HDR],
    /// A handshake frame (its bytes in `ctl`) rather than `hdr` + `segs`.
    pub(super) ctl: Option<Vec<u8>>,
    pub(super) segs: Vec<(u64, u64)>,
    pub(super) total: u64,
    pub(super) pos: u64,
    pub(super) active: bool,
}

/// What becomes of a payload once it has all arrived.
#[derive(Clone, Copy)]
pub(super) enum Then {
    Nothing,
    Ack,
    Recv { wr_id: u64, len: u32, imm: Option<u32>, kind: CompletionKind, solicited: bool },
    ReadDone(u32),
    /// A handshake frame: its private data is in `pdata`.
    Ctl(Hdr),
    /// A by-reference WRITE (with immediate data: the receive it takes);
    /// the initiator's list is in `pdata`.
    Pull { addr: u64, len: u64, recv: Option<(u64, Option<u32>, bool)> },
    /// A by-reference READ; the initiator's list is in `pdata`.
    Push { addr: u64, len: u64 },
    /// A by-reference send of `len` bytes into the receive it took (its
    /// checked segments in `segs`); the initiator's list is in `pdata`.
    PullSend { wr_id: u64, len: u64, solicited: bool },
}

pub(super) enum Dest {
    Discard,
    Segs,
    Pdata,
}

pub(super) enum InState {
    Hdr,
    Payload { left: u64, dest: Dest, then: Then },
    /// A message waits for a receive to be posted.
    Stalled(Hdr),
}

pub(super) struct Conn {
    pub(super) fd: i32,
    /// The id it belongs to (0 once destroyed) and, passive, the listener's.
    pub(super) id: u64,
    pub(super) listen: u64,
    pub(super) datagram: bool,
    pub(super) active: bool,
    pub(super) phase: Phase,
    pub(super) qp: Option<Arc<QpInner>>,
    pub(super) epoch: u32,
    pub(super) ctl: VecDeque<Vec<u8>>,
    pub(super) resp: VecDeque<Resp>,
    pub(super) out: Out,
    pub(super) buf: Box<[u8]>,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) inp: InState,
    /// Where an arriving payload goes, and how far it has got.
    pub(super) segs: Vec<(u64, u64)>,
    pub(super) seg: usize,
    pub(super) seg_off: u64,
    /// The last bytes of an arriving RDMA write, stored at `tail_to` once
    /// the rest is in place (`tail`); `tail_to` 0: none held.
    pub(super) held: Box<[u8; tail::HELD]>,
    pub(super) tail_to: u64,
    pub(super) held_len: usize,
    pub(super) pdata: Vec<u8>,
    pub(super) wqe: RecvWqe,
    /// The last receive key checked (`keys::KeyCache`).
    pub(super) keys: super::keys::KeyCache,
    pub(super) scratch: Vec<Sge>,
    /// We refused one of the peer's requests: later ones are dropped.
    pub(super) refused: bool,
    /// ConnectResponse or Established was reported: a loss is a Disconnected.
    pub(super) up: bool,
    pub(super) established: bool,
    pub(super) disc_sent: bool,
    pub(super) disc_rcvd: bool,
    pub(super) disc_reported: bool,
    pub(super) deadline: Option<Instant>,
    /// An active end refused (nobody listening yet) dials again until then.
    pub(super) dial_until: Option<Instant>,
    /// The wait before the next dial; grows with each refusal.
    pub(super) backoff: Duration,
    pub(super) interest: u32,
    pub(super) peer: libc::sockaddr_in,
    /// The on-node mapping (offered, taken, or in use).
    pub(super) shm: Option<Shm>,
    /// Input comes from the mapping; the stream carries only doorbells.
    pub(super) shm_in: bool,
    /// Output goes to the mapping.
    pub(super) shm_out: bool,
    /// Output goes to the mapping once the frame being sent (the REP) is out.
    pub(super) shm_out_next: bool,
    /// epoll saw the stream readable: doorbell bytes (or its end) to take.
    pub(super) bells: bool,
    /// We can reach the peer's memory: its by-reference requests are served.
    pub(super) cma_in: bool,
    /// The peer can reach ours: our large RDMA requests go by reference.
    pub(super) cma_out: bool,
    /// Both ends take ACKs through the mapping's counter (`shm::Ring::
    /// publish_acks`), not as frames: agreed in the handshake (`F_ACKS`).
    pub(super) ring_acks: bool,
    /// The peer follows early wraps of the ring we write (`wire::F_PAD`).
    pub(super) ring_pad: bool,
    /// The smallest of our sends that may go by reference
    /// (`tune::cma_send_min`, once both ends agreed on `wire::F_CMA_SENDS`;
    /// u64::MAX until then): read once here, not at every post.
    pub(super) send_ref_min: u64,
    /// ACKs taken from the counter that no request could use yet: they
    /// belong behind a READ or atomic still awaiting its response frame.
    pub(super) credits: u64,
    /// ACKs we published whose doorbell we skipped: when (`clock::ticks`,
    /// 0: none); `overdue` rings unless the reader looked since.
    pub(super) acks_skipped: u64,
    /// The (address, length) list of the by-reference request going out.
    pub(super) cma_list: Vec<u8>,
    /// A consumer's pass kept back this stream's lone ACK (`hold_ack`).
    pub(super) ack_held: bool,
    /// The consumer pass after which this stream last sent a post at once
    /// (`Progress::drive`): a later post before the next pass is held.
    pub(super) post_gen: u64,
    /// A connection request waiting for a listener of its kind
    /// (`Progress::on_req`): its header and private data, and until when
    /// it may wait.
    pub(super) req_wait: Option<(Hdr, Vec<u8>)>,
    pub(super) req_until: Option<Instant>,
    /// This turn's last read of the stream came short (`fill`).
    pub(super) dry: bool,
    /// `dry` was just set by a read of this turn's (`take_input`).
    pub(super) dry_now: bool,
    /// The last frame with a payload that came in on this stream carried
    /// `tune::ready_min` bytes or more: a polling consumer asks epoll
    /// whether more came instead of reading the stream (`consumer_pass`).
    pub(super) big_in: bool,
    /// The last frame with a payload that came in on this stream carried
    /// `inbound::LARGE_IN` bytes or more (`inbound::fill`).
    pub(super) large_in: bool,
    /// A request went out on this stream since the last frame with a
    /// payload came in:
    /// the peer's next frame likely answers it, and the reader waits for it
    /// rather than falls behind a stream (`inbound::fill`).
    pub(super) answered: bool,
    /// `answered` as the frame now coming in began.
    pub(super) awaited: bool,
    /// A doorbell we skipped (`shm::Bell::Skipped`): when (0: none), and
    /// the ring's head then; `overdue` rings if the peer left them unread.
    pub(super) skipped_at: u64,
    pub(super) skipped_head: u64,
    /// The reader's `tail` when last seen (`overdue`).
    pub(super) skipped_tail: u64,
    /// Some skip since the last fenced look was `shm::Bell::Unsure`: a
    /// consumer going quiet decides it with one (`overdue`).
    pub(super) unsure: bool,
    /// A message that found no receive, once a receive was posted for it:
    /// when it is taken (CLOCK_MONOTONIC ns; 0: no such wait).
    pub(super) rnr_due: u64,
}

impl Conn {
    pub(super) fn new(fd: i32, id: u64, phase: Phase, active: bool, peer: libc::sockaddr_in) -> Conn {
        Conn {
            fd,
            id,
            listen: 0,
            datagram: false,
            active,
            phase,
            qp: None,
            epoch: 0,
            ctl: VecDeque::new(),
            resp: VecDeque::new(),
            out: Out { pre: [0; HDR], pre_len: 0, hdr: [0; HDR], ctl: None, segs: Vec::with_capacity(super::device::MAX_SGE + 1), total: 0, pos: 0, active: false },
            buf: vec![0u8; INBUF].into_boxed_slice(),
            start: 0,
            end: 0,
            inp: InState::Hdr,
            segs: Vec::with_capacity(super::device::MAX_SGE + 1),
            seg: 0,
            seg_off: 0,
            held: Box::new([0; tail::HELD]),
            tail_to: 0,
            held_len: 0,
            pdata: Vec::new(),
            wqe: RecvWqe { wr_id: 0, sges: Vec::with_capacity(super::device::MAX_SGE) },
            keys: super::keys::KeyCache::default(),
            scratch: Vec::with_capacity(super::device::MAX_SGE),
            refused: false,
            up: false,
            established: false,
            disc_sent: false,
            disc_rcvd: false,
            disc_reported: false,
            deadline: None,
            dial_until: None,
            backoff: DIAL_BACKOFF,
            interest: 0,
            peer,
            shm: None,
            shm_in: false,
            shm_out: false,
            shm_out_next: false,
            bells: false,
            cma_in: false,
            cma_out: false,
            ring_acks: false,
            ring_pad: false,
            send_ref_min: u64::MAX,
            credits: 0,
            acks_skipped: 0,
            cma_list: Vec::new(),
            ack_held: false,
            post_gen: 0,
            req_wait: None,
            req_until: None,
            dry: false,
            dry_now: false,
            big_in: false,
            large_in: false,
            answered: false,
            awaited: false,
            skipped_at: 0,
            unsure: false,
            skipped_head: 0,
            skipped_tail: 0,
            rnr_due: 0,
        }
    }

    /// The QP this stream feeds, if it is still bound to it and running.
    pub(super) fn live_qp(&self) -> Option<&Arc<QpInner>> {
        self.qp.as_ref().filter(|q| feeds(q, self.epoch))
    }

    /// Requests its live QP has queued and not yet sent (0 without one).
    pub(super) fn unsent(&self) -> u32 {
        self.live_qp().map_or(0, |q| q.unsent.load(Ordering::Acquire))
    }

    /// The next request of the stream's QP, if it is live, its local
    /// segments in `out.segs`.
    pub(super) fn take_request(&mut self) -> Option<Wqe> {
        let Conn { qp, epoch, out, .. } = self;
        // Borrowed, not cloned: no reference count taken per frame.
        qp.as_ref().filter(|q| feeds(q, *epoch))?.next_request(&mut out.segs)
    }

    /// Takes the ACKs the peer counted in the mapping to our QP's oldest
    /// requests (`ring_acks`). false: more than were transmitted.
    #[inline]
    pub(super) fn absorb(&mut self) -> bool {
        let Conn { ring_acks, shm, credits, qp, epoch, .. } = self;
        let Some(m) = shm.as_ref().filter(|_| *ring_acks) else { return true };
        *credits += m.rx.take_acks();
        if *credits == 0 {
            return true;
        }
        match qp.as_ref().filter(|q| feeds(q, *epoch)) {
            Some(q) => q.take_credits(credits),
            None => {
                // Nobody awaits them: the QP's requests were flushed.
                *credits = 0;
                true
            }
        }
    }

    pub(super) fn reading(&self) -> bool {
        matches!(self.phase, Phase::AwaitRep | Phase::AwaitReq | Phase::Open) && !matches!(self.inp, InState::Stalled(_))
    }

    /// All that waits to go out is the ACK a pass kept back (`hold_ack`).
    pub(super) fn only_held_ack(&self) -> bool {
        self.ack_held && !self.out.active && self.ctl.is_empty() && self.resp.len() == 1
    }

    pub(super) fn wants_out(&self) -> bool {
        self.out.active || !self.ctl.is_empty() || (self.phase == Phase::Open && !self.disc_sent && !self.resp.is_empty())
    }

    pub(super) fn ack(&mut self) {
        if let Some(Resp::Ack(n)) = self.resp.back_mut() {
            *n += 1;
        } else {
            self.resp.push_back(Resp::Ack(1));
        }
    }

    /// The next `len` bytes of input are a payload: to `dest`, then `then`.
    pub(super) fn set_payload(&mut self, len: u64, dest: Dest, then: Then) {
        self.seg = 0;
        self.seg_off = 0;
        self.inp = InState::Payload { left: len, dest, then };
    }
}

/// Why a connection ends, for the event its id gets.
#[derive(Clone, Copy, Debug)]
pub(super) enum End {
    /// The stream failed or ended (errno, 0 for an orderly end).
    Lost(i32),
    /// Both DISCs done, or a handshake frame flushed before closing.
    Done,
    /// The peer broke the protocol.
    Protocol,
}
