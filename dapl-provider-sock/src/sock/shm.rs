//! The on-node path: a connection whose two ends run on the same host (same
//! boot, same network namespace, same uid) moves its frames through two
//! byte rings in a shared mapping instead of the TCP stream. The stream
//! stays: it carried the handshake, its end (EOF, RST) still tells that
//! the peer died, and it is the doorbell (one byte, sent only to a reader
//! that said it is going to sleep) unless the two ends agreed on FIFOs for
//! that (`Bells`).
//!
//! The mapping is a file in /dev/shm that the active end creates (O_EXCL,
//! mode 0600, a random name) and names in its REQ; the passive end opens
//! it and unlinks it at once, and says in its REP whether it did. The
//! active end unlinks it too when the REP or REJ arrives or the attempt
//! fails, so no file outlives a handshake.
//!
//! Layout: one control page (a `Ctl` per ring, each field on its own cache
//! line), then ring 0 (active to passive) and ring 1 (passive to active),
//! `RING` bytes each. Each ring has one producer and one consumer (the two
//! progress threads): `head` counts bytes ever written, `tail` bytes ever
//! read; the producer publishes data with a Release store of `head`, the
//! consumer frees room with a Release store of `tail`. Beside `head`, on
//! its line, the producer counts the ACKs of the consumer's requests
//! (`acked`, when both ends agreed on `wire::F_ACKS`): no ACK frames.
//!
//! Doorbell, the lost-wakeup race: a consumer about to sleep stores
//! `sleeping = 1`, fences (SeqCst) and looks at `head` once more; a
//! producer stores `head`, fences (SeqCst) and looks at `sleeping`. One of
//! the two sees the other's store, so either the consumer does not sleep
//! or the producer rings (and clears the flag, so one byte per sleep). A
//! producer that finds the ring full does the same with `waiting`, and the
//! consumer rings it after it frees room.
//!
//! While the consumer's process polls (its engine run by the consumer's
//! own calls, `progress`), its thread flags `sleeping = 2` instead: ring
//! only if the consumer has not looked at the ring (`polled`, a
//! stamp of the host-wide `clock::ticks` it stores as it passes) for `POLLED_NS`. A busy
//! ping-pong then costs no doorbell, and a consumer that stopped polling to
//! spin on its memory (MPI's eager RDMA) is still rung. A doorbell skipped
//! just as the consumer stopped costs at most the thread's tick: that
//! thread is awake on a timer in this mode. A producer that skipped also
//! looks again on its own passes and rings once the bytes have waited
//! `OVERDUE_NS` unread and the stamp is `POLLED_NS` old, so a consumer that
//! stopped polling to spin on its memory waits about `POLLED_NS`, not the
//! tick.

use super::clock;
use super::tail;
use super::tune;
use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// Bytes per ring (one per direction).
pub const RING: usize = 1 << 20;
const CTL_PAGE: usize = 4096;
const MAP_LEN: usize = CTL_PAGE + 2 * RING;
/// Length of the host identity a handshake frame carries.
pub const TRAILER: usize = 96;
const PREFIX: &str = "dapl-sock-";
/// Where the two ends' CMA slots sit in the control page.
const SLOTS: usize = 2048;

/// A random value at a fixed address of this process, for the peer's probe.
static COOKIE: AtomicU64 = AtomicU64::new(0);

fn cookie() -> u64 {
    let v = COOKIE.load(Ordering::Relaxed);
    if v != 0 {
        return v;
    }
    let mut r = 0u64;
    // SAFETY: getrandom writes at most 8 bytes into r.
    unsafe { libc::getrandom(&mut r as *mut u64 as *mut libc::c_void, 8, 0) };
    let r = r | 1;
    match COOKIE.compare_exchange(0, r, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => r,
        Err(v) => v,
    }
}

/// Whether one-sided RDMA may use cross-memory attach (`DAPL_SOCK_CMA=0`:
/// never; payloads then go through the ring).
pub fn cma_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| !env_off("DAPL_SOCK_CMA"))
}

/// Decodes a by-reference list (address, length pairs, little-endian)
/// into `out`; false if malformed.
fn iovs_of(list: &[u8], out: &mut [libc::iovec; 64]) -> Option<usize> {
    if list.len() % 16 != 0 || list.len() / 16 > out.len() {
        return None;
    }
    for (i, ch) in list.chunks_exact(16).enumerate() {
        let a = u64::from_le_bytes(ch[..8].try_into().ok()?);
        let l = u64::from_le_bytes(ch[8..].try_into().ok()?);
        out[i] = libc::iovec { iov_base: a as *mut libc::c_void, iov_len: l as usize };
    }
    Some(list.len() / 16)
}

const NO_IOV: libc::iovec = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };

/// The initiator's list of a by-reference request (`what`) into `out`,
/// checked to name `len` bytes in all; how many segments.
fn remote_list(list: &[u8], len: u64, out: &mut [libc::iovec; 64], what: &str) -> Option<usize> {
    let k = iovs_of(list, out)?;
    let sum = out[..k].iter().map(|v| v.iov_len as u64).sum::<u64>();
    if sum != len {
        log::debug!("sock: by-reference {what} of {len} bytes names {sum} bytes in {k} segments");
        return None;
    }
    Some(k)
}

/// The target of a by-reference send: pulls `len` bytes from the
/// initiator's segments (`list`) into `segs`, the receive's (checked by
/// the caller against their keys, at least `len` bytes in all), in order.
/// true: all of them arrived.
pub fn pull_into(pid: i32, segs: &[(u64, u64)], len: u64, list: &[u8]) -> bool {
    let mut remote = [NO_IOV; 64];
    let Some(k) = remote_list(list, len, &mut remote, "send") else { return false };
    let mut local = [NO_IOV; 64];
    let (mut n, mut left) = (0, len);
    for &(a, l) in segs {
        if left == 0 {
            break;
        }
        let Some(v) = local.get_mut(n) else { return false };
        *v = libc::iovec { iov_base: a as *mut libc::c_void, iov_len: l.min(left) as usize };
        left -= l.min(left);
        n += 1;
    }
    if left != 0 {
        return false;
    }
    if len == 0 {
        return true;
    }
    // SAFETY: writes only the receive's segments (checked by the caller),
    // `len` bytes of them, and reads the peer.
    let got = unsafe { libc::process_vm_readv(pid, local.as_ptr(), n as libc::c_ulong, remote.as_ptr(), k as libc::c_ulong, 0) };
    if got < 0 || got as u64 != len {
        log::debug!("sock: process_vm_readv from pid {pid}, {k} segments into {n}, {len} bytes: {got} ({})", io::Error::last_os_error());
        return false;
    }
    true
}

/// The target of a by-reference RDMA write: pulls `len` bytes from the
/// initiator's segments (`list`) into our range at `addr`, which the
/// caller checked against the rkey. true: all of them arrived.
pub fn pull(pid: i32, addr: u64, len: u64, list: &[u8]) -> bool {
    let mut remote = [NO_IOV; 64];
    let Some(k) = remote_list(list, len, &mut remote, "write") else { return false };
    if len == 0 {
        return true;
    }
    // The last bytes go to a side buffer and are stored last and whole
    // (see `tail`): a target may be polling its memory for them.
    let mut held = [0u8; tail::HELD];
    let t = tail::held(len);
    let body = len as usize - t;
    let local = [
        libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: body },
        libc::iovec { iov_base: held.as_mut_ptr() as *mut libc::c_void, iov_len: t },
    ];
    // SAFETY: writes only our local range (checked by the caller) and our
    // side buffer, and reads the peer.
    let n = unsafe { libc::process_vm_readv(pid, local.as_ptr(), 2, remote.as_ptr(), k as libc::c_ulong, 0) };
    if n < 0 || n as u64 != len {
        log::debug!("sock: process_vm_readv from pid {pid}, {k} segments, {len} bytes: {n} ({})", io::Error::last_os_error());
        return false;
    }
    tail::publish(addr + body as u64, &held[..t]);
    true
}

/// The target of a by-reference RDMA read: pushes our range at `addr`
/// (checked against the rkey) into the initiator's segments (`list`).
pub fn push_to(pid: i32, addr: u64, len: u64, list: &[u8]) -> bool {
    let mut remote = [NO_IOV; 64];
    let Some(k) = remote_list(list, len, &mut remote, "read") else { return false };
    if len == 0 {
        return true;
    }
    let local = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len as usize };
    // SAFETY: reads only our local range (checked by the caller) and writes the peer.
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, remote.as_ptr(), k as libc::c_ulong, 0) };
    if n < 0 || n as u64 != len {
        log::debug!("sock: process_vm_writev to pid {pid}, {k} segments, {len} bytes: {n} ({})", io::Error::last_os_error());
        return false;
    }
    true
}

/// Asks for the line at `p` ahead of its use. The next frame's line is
/// asked for as `head` is read: when both have just been written, the two
/// fetches from the writer's core overlap instead of the frame's waiting
/// for `head`'s.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it neither faults nor changes memory.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[repr(C, align(64))]
struct Line<T>(T);

/// What a ring's producer writes: its bytes and, beside them on the same
/// line (which the polling reader reads for `head` anyway), the ACKs of
/// the reader's requests (`publish_acks`) and where its last early wrap
/// began (`wrap_early`; 0: none yet, as a peer that never wraps early
/// leaves it).
#[repr(C)]
struct Produced {
    head: AtomicU64,
    acked: AtomicU64,
    pad: AtomicU64,
}

/// A ring's shared control words.
#[repr(C)]
pub struct Ctl {
    head: Line<Produced>,
    tail: Line<AtomicU64>,
    sleeping: Line<AtomicU32>,
    waiting: Line<AtomicU32>,
    polled: Line<AtomicU64>,
}

/// How recent a consumer's look at its ring must be for a producer to skip
/// the doorbell of a reader flagged `sleeping = 2`. Longer than most pauses
/// of a vCPU or of a rank that gave its CPU away for a moment (on the Xeon
/// host of stop 48, a spinning clock reader on each vCPU saw 340 to 410
/// gaps of 20 µs or more a second, 9 to 19 of them over 100 µs): a reader
/// paused so is not gone, and rung, its thread took the CPU from it as it
/// came back. At 20 µs, an on-node ping-pong of 200,000 iterations rang
/// 210 to 620 doorbells between its ends for such pauses, 20 to 30 at 100.
pub(super) const POLLED_NS: u64 = 100_000;
/// How stale a consumer's stamp may get before it stamps again.
const STAMP_NS: u64 = 1_000;
/// How recent our own last look must be for a peer's stamp to be judged
/// against it rather than against now (`Shm::judged_at`): longer than
/// `POLLED_NS`, so that a pause of both ends longer than that is judged
/// from our look.
pub(super) const PAUSE_NS: u64 = 2 * POLLED_NS;

/// What a producer does about the doorbell after a push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bell {
    No,
    Ring,
    Skipped,
    /// Not rung on a look without the fence (`bell_unfenced`): checked
    /// later as `Skipped` is.
    Unsure,
}

/// How long a skipped doorbell may go unanswered (the consumer did not
/// take the bytes) before the producer rings after all.
pub const OVERDUE_NS: u64 = 10_000;
/// Posts this close after a fenced doorbell look share it
/// (`bell_in_burst`).
const BURST_NS: u64 = 2_000;
/// The most a producer writes into the ring before it publishes: a large
/// frame goes in pieces, so its reader copies one piece out while the next
/// is copied in. Published whole, a frame that fits the ring was two copies
/// one after the other: on-node ping-pongs (poll, 300 iterations, typical
/// µs) on an Intel Xeon at 2.5 GHz went from 22.9 to 18.7 at 128 KiB, 108
/// to 55.8 at 512 KiB; one larger than the ring's free room, published as
/// room came, from 222 to 128 at 1 MiB and 1,511 to 542 at 4 MiB (UCX's
/// shared memory, `ucx_perftest tag_lat`, 148 and 1,025 there). Pieces of
/// 32 KiB did no better. Frames under two pieces still go with one store of
/// `head`: a reader that finds a frame whole takes it in place, one that
/// finds part of it takes the slower partial path (64 KiB sent as one
/// piece and a 32-byte rest: 12.2 µs against 8.6).
pub const PIECE: usize = 64 * 1024;

/// The piece of a frame of 32 KiB to 128 KiB (`piece_for`). Published
/// whole, such a frame was two copies one after the other too (an on-node
/// 64 KiB ping-pong: the writer's copy, then the reader's, 7.9 µs typical
/// where UCX's one copy took 3.8 on a Xeon with AVX-512), and pieces of
/// `PIECE` would leave one.
const MID_PIECE: usize = 16 * 1024;

/// The most of a frame with `len` payload bytes written before a publish
/// (`usize::MAX`: the whole frame at once, for one under two pieces).
pub fn piece_for(len: u64) -> usize {
    if len >= 2 * PIECE as u64 {
        PIECE
    } else if len >= 2 * MID_PIECE as u64 {
        MID_PIECE
    } else {
        usize::MAX
    }
}

/// A producer this far into a lap, with its consumer close behind, skips
/// the rest of the lap (`wrap_early`) before a frame of at most
/// `WRAP_FRAME`: the ring's head, faulted in at setup (`HEAD_IN`).
const WRAP_AT: usize = HEAD_IN;
/// The same for a frame of at most `WRAP_MID_FRAME`, this far in.
const WRAP_MID_AT: usize = 4 * HEAD_IN;
/// The largest frame that goes after an early wrap at `WRAP_AT`: a 2 KiB
/// message and its headers.
const WRAP_FRAME: usize = 2048 + 64;
/// The largest after one at `WRAP_MID_AT`: a 16 KiB message and its
/// headers (larger sends go by reference where they can). Wrapping them at
/// `WRAP_AT` made the writer copy into lines its reader still held (a
/// ping-pong's typical time up by 0.1 to 0.5 µs at 4 to 12 KiB, stop 42);
/// going round the whole ring, a fresh connection's first lap cost a page
/// fault per 4 KiB on each end (4 KiB, 1,000 iterations: mean 2.2-2.5 µs,
/// typical 1.1).
const WRAP_MID_FRAME: usize = 16 * 1024 + 64;
/// After a look that found the consumer too far behind, the bytes to
/// write before the next look (each look reads the consumer's line).
const WRAP_RELOOK: u64 = 8 * 1024;

/// One direction of a mapping, as one end sees it.
pub struct Ring {
    ctl: *const Ctl,
    data: *mut u8,
    cap: usize,
    /// The producer's last reading of `tail`: room it knows of without
    /// touching the consumer's line (which the consumer's fence after each
    /// take then finds still its own, not pulled away by every push).
    seen_tail: AtomicU64,
    /// The consumer's last stamp in `polled`: restamped only once it is
    /// `stamp_step` old, so a spinning reader does not pull that line
    /// from the producer at every pass.
    stamped: AtomicU64,
    stamp_step: u64,
    /// `POLLED_NS` and `PAUSE_NS` in ticks.
    polled_window: u64,
    pause_window: u64,
    /// The consumer's count of the producer's `acked` it has taken.
    acks_seen: AtomicU64,
    /// The producer's last fenced doorbell look (`bell_in_burst`), and
    /// `BURST_NS` in ticks.
    fenced_at: AtomicU64,
    burst_window: u64,
    /// The producer's `head` before which `wrap_early` does not look again.
    wrap_relook: AtomicU64,
    /// The producer's own copies of `head` and `acked`, which only it
    /// writes: it reads these, never the shared line. On the benchmark
    /// host a line the reader has read since our last store is gone from
    /// our cache (the reader's read took it whole), so each read of it
    /// there waited for the line to come back: the first look at `head` in
    /// an on-node post took 8% of the sender's time in `msg_rate`.
    head_mine: AtomicU64,
    acked_mine: AtomicU64,
    /// The consumer's side of the same: its own copy of `tail`, and the
    /// end of the readable bytes as its last look at `head` found it
    /// (`available`). Bytes once readable stay readable until the consumer
    /// takes them, so a frame is parsed and taken against that end
    /// (`known`), and `head`, which the producer rewrites at every message,
    /// is read once for a run of frames instead of three or four times a
    /// frame.
    tail_mine: AtomicU64,
    seen_end: AtomicU64,
}

// SAFETY: the pointers are into a mapping owned by the `Shm` that owns the
// ring (or a test's buffer); the ring is used by one thread at a time.
unsafe impl Send for Ring {}
// SAFETY: the producer's and the consumer's calls touch disjoint bytes,
// ordered by the Acquire/Release counters; each side is one thread.
unsafe impl Sync for Ring {}

impl Ring {
    /// # Safety
    /// `ctl` and `data` (of `cap` bytes, a power of two) stay valid for the
    /// life of the ring.
    unsafe fn new(ctl: *const Ctl, data: *mut u8, cap: usize) -> Ring {
        debug_assert!(cap.is_power_of_two());
        Ring {
            ctl,
            data,
            cap,
            seen_tail: AtomicU64::new(0),
            stamped: AtomicU64::new(0),
            stamp_step: clock::ticks_of_ns(STAMP_NS),
            polled_window: clock::ticks_of_ns(POLLED_NS),
            pause_window: clock::ticks_of_ns(PAUSE_NS),
            acks_seen: AtomicU64::new(0),
            fenced_at: AtomicU64::new(0),
            burst_window: clock::ticks_of_ns(BURST_NS),
            wrap_relook: AtomicU64::new(0),
            head_mine: AtomicU64::new(0),
            acked_mine: AtomicU64::new(0),
            tail_mine: AtomicU64::new(0),
            seen_end: AtomicU64::new(0),
        }
    }

    fn ctl(&self) -> &Ctl {
        // SAFETY: valid for our life (see new).
        unsafe { &*self.ctl }
    }

    /// Bytes the consumer may read now: up to the producer's early wrap,
    /// if one lies ahead; at it, `tail` moves past it first.
    #[inline]
    pub fn available(&self) -> usize {
        let c = self.ctl();
        let mut tail = self.tail_mine.load(Ordering::Relaxed);
        prefetch(self.data.wrapping_add(tail as usize & (self.cap - 1)));
        let head = c.head.0.head.load(Ordering::Acquire);
        // Read after `head`: a wrap that head has passed is seen. A wrap
        // never begins at 0, which is "none".
        let pad = c.head.0.pad.load(Ordering::Relaxed);
        let mut end = head;
        if pad != 0 && pad == tail && head != tail {
            tail = self.lap_end(pad);
            self.tail_mine.store(tail, Ordering::Relaxed);
            c.tail.0.store(tail, Ordering::Release);
        } else if pad != 0 && pad.wrapping_sub(tail) < head.wrapping_sub(tail) {
            end = pad;
        }
        self.seen_end.store(end, Ordering::Relaxed);
        (end.wrapping_sub(tail) as usize).min(self.cap)
    }

    /// Consumer: bytes readable as of its last `available`, without
    /// looking at `head` again (0 when that look is out of date).
    #[inline]
    pub fn known(&self) -> usize {
        let n = self.seen_end.load(Ordering::Relaxed).wrapping_sub(self.tail_mine.load(Ordering::Relaxed));
        if n > self.cap as u64 { 0 } else { n as usize }
    }

    /// Consumer: at least `want` readable bytes if there are (then how
    /// many are known), looking at `head` only when `known` has fewer.
    #[inline]
    pub fn readable(&self, want: usize) -> usize {
        let k = self.known();
        if k >= want { k } else { self.available() }
    }

    /// The start of the lap after the one position `at` lies in.
    fn lap_end(&self, at: u64) -> u64 {
        (at | (self.cap as u64 - 1)).wrapping_add(1)
    }

    /// Producer, between frames, before one of `need` bytes: if this lap
    /// has `WRAP_AT` bytes written and the consumer has read all but half
    /// of them, the rest of the lap is skipped and the next frame starts
    /// the ring again, in pages that are there already. A connection of
    /// short messages then keeps to the ring's head, faulted in at setup,
    /// where it went once through every page of the ring (a page fault
    /// each, 2.2 to 2.8 µs on the benchmark host), and touches 64 KiB of
    /// memory a direction instead of 1 MiB. Before a frame of more than
    /// `WRAP_FRAME` bytes only from `WRAP_MID_AT` (up to `WRAP_MID_FRAME`):
    /// going round a few pages, the writer copies into lines the reader
    /// still holds and must take them from it first; on-node ping-pongs
    /// wrapping for every size at `WRAP_AT` took, per message, 6.6 µs at 32
    /// KiB against 3.1 going round the whole ring (median), at 8 KiB 1.8 to
    /// 6.6 against 1.0 to 1.4, at 2 KiB 0.45 to 0.85 against 0.74 to 0.76
    /// (mean 0.49 to 0.96 against 2.2 to 2.3: the whole ring's first lap).
    /// Only for a consumer that knows of it (`wire::F_PAD`).
    pub fn wrap_early(&self, need: usize) {
        let head = self.head();
        let at = head as usize & (self.cap - 1);
        let from = if need <= WRAP_FRAME { WRAP_AT } else { WRAP_MID_AT };
        if at < from || need > WRAP_MID_FRAME || head < self.wrap_relook.load(Ordering::Relaxed) {
            return;
        }
        let unread = head.wrapping_sub(self.tail()) as usize;
        // The room after the wrap: the lap's bytes the consumer has read;
        // "close behind": at most half the way in unread.
        if unread > from / 2 || at - unread < need {
            self.wrap_relook.store(head.wrapping_add(WRAP_RELOOK), Ordering::Relaxed);
            return;
        }
        let p = &self.ctl().head.0;
        p.pad.store(head, Ordering::Relaxed);
        let next = self.lap_end(head);
        self.head_mine.store(next, Ordering::Relaxed);
        p.head.store(next, Ordering::Release);
    }

    /// Bytes the producer may write now.
    pub fn space(&self) -> usize {
        let c = self.ctl();
        let tail = c.tail.0.load(Ordering::Acquire);
        self.seen_tail.store(tail, Ordering::Relaxed);
        let used = self.head().wrapping_sub(tail);
        self.cap - (used as usize).min(self.cap)
    }

    /// Producer: room for at least `want` bytes (or all there is, if less),
    /// reading the consumer's `tail` only when the last reading shows less.
    #[inline]
    pub fn room(&self, want: usize) -> usize {
        let used = self.head().wrapping_sub(self.seen_tail.load(Ordering::Relaxed));
        let known = self.cap - (used as usize).min(self.cap);
        if known >= want { known } else { self.space() }
    }

    /// Producer: copies up to `len` bytes from `src`; returns how many.
    ///
    /// # Safety
    /// `src` is readable for `len` bytes.
    pub unsafe fn push(&self, src: *const u8, len: usize) -> usize {
        let n = len.min(self.room(len));
        if n == 0 {
            return 0;
        }
        // SAFETY: the free part of the ring (within `room`), which the
        // consumer does not read until head moves; src is readable (caller).
        unsafe { self.stage(0, src, n) };
        self.publish(n);
        n
    }

    /// Producer: copies `len` bytes from `src` to `off` bytes past `head`,
    /// not yet published (`publish`): a frame of several parts goes in
    /// with one store of `head`.
    ///
    /// # Safety
    /// `src` is readable for `len` bytes; `off + len` is within the room
    /// `room` reported.
    #[inline]
    pub unsafe fn stage(&self, off: usize, src: *const u8, len: usize) {
        let at = (self.head() as usize).wrapping_add(off) & (self.cap - 1);
        // SAFETY: free room (caller), src readable (caller).
        unsafe { self.copy_in(at, src, len) };
    }

    /// Producer: the `n` bytes staged are readable now.
    #[inline]
    pub fn publish(&self, n: usize) {
        let h = self.head().wrapping_add(n as u64);
        self.head_mine.store(h, Ordering::Relaxed);
        self.ctl().head.0.head.store(h, Ordering::Release);
    }

    /// Copies `n` bytes from `src` into the ring at `at`, wrapping; the
    /// second copy only when it wraps (a call to memcpy of nothing cost
    /// every push about 15 instructions).
    ///
    /// # Safety
    /// `src` readable for `n` bytes; `n` no more than the ring's free room
    /// from `at`.
    #[inline]
    unsafe fn copy_in(&self, at: usize, src: *const u8, n: usize) {
        let first = n.min(self.cap - at);
        // SAFETY: within the ring's buffer (caller's room), src readable.
        unsafe {
            std::ptr::copy_nonoverlapping(src, self.data.add(at), first);
            if first < n {
                std::ptr::copy_nonoverlapping(src.add(first), self.data, n - first);
            }
        }
    }

    /// Consumer: copies up to `len` bytes into `dst`; returns how many.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes.
    pub unsafe fn pop(&self, dst: *mut u8, len: usize) -> usize {
        let n = len.min(self.available());
        if n == 0 {
            return 0;
        }
        let (a, b) = self.parts(0, n);
        // SAFETY: dst is writable for len >= n bytes (caller); the parts
        // are n bytes of the ring, which dst does not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(a.as_ptr(), dst, a.len());
            if !b.is_empty() {
                std::ptr::copy_nonoverlapping(b.as_ptr(), dst.add(a.len()), b.len());
            }
        }
        self.skip(n);
        n
    }

    /// Consumer: copies the next `out.len()` readable bytes into `out`
    /// without taking them. false: fewer are readable.
    pub fn peek(&self, out: &mut [u8]) -> bool {
        if self.readable(out.len()) < out.len() {
            return false;
        }
        let (a, b) = self.parts(0, out.len());
        out[..a.len()].copy_from_slice(a);
        out[a.len()..].copy_from_slice(b);
        true
    }

    /// Consumer: the `n` readable bytes `off` bytes past `tail`, as the
    /// part up to the ring's end and the part from its start (empty unless
    /// they wrap). Valid until the consumer's next `skip` or `pop`: the
    /// producer writes only past `head`, and reuses them only once `tail`
    /// has passed them.
    ///
    /// Panics if `off + n` is more than `available`.
    #[inline]
    pub fn parts(&self, off: usize, n: usize) -> (&[u8], &[u8]) {
        assert!(off + n <= self.readable(off + n), "ring: read past head");
        let at = (self.tail_mine.load(Ordering::Relaxed) as usize).wrapping_add(off) & (self.cap - 1);
        let first = n.min(self.cap - at);
        // SAFETY: published bytes of our buffer (head's Release, checked
        // above), which nobody writes until tail passes them.
        unsafe { (std::slice::from_raw_parts(self.data.add(at), first), std::slice::from_raw_parts(self.data, n - first)) }
    }

    /// Consumer: the `n` bytes at `tail` are taken (no more than
    /// `available`); their room goes back to the producer.
    #[inline]
    pub fn skip(&self, n: usize) {
        let t = self.tail_mine.load(Ordering::Relaxed).wrapping_add(n as u64);
        self.tail_mine.store(t, Ordering::Relaxed);
        self.ctl().tail.0.store(t, Ordering::Release);
    }

    /// Producer: `n` more of the consumer's requests are acknowledged.
    /// Stored after the bytes pushed before it, so a consumer that sees the
    /// count sees every response frame written ahead of it too; the
    /// producer then calls `bell` as after a push.
    pub fn publish_acks(&self, n: u64) {
        let a = self.acked_mine.load(Ordering::Relaxed).wrapping_add(n);
        self.acked_mine.store(a, Ordering::Relaxed);
        self.ctl().head.0.acked.store(a, Ordering::Release);
    }

    /// Consumer: the ACKs published since it last took them.
    #[inline]
    pub fn take_acks(&self) -> u64 {
        let a = self.ctl().head.0.acked.load(Ordering::Acquire);
        let seen = self.acks_seen.load(Ordering::Relaxed);
        if a != seen {
            self.acks_seen.store(a, Ordering::Relaxed);
        }
        a.wrapping_sub(seen)
    }

    /// Consumer: bytes to read or ACKs to take.
    #[inline]
    pub fn has_input(&self) -> bool {
        self.available() > 0 || self.ctl().head.0.acked.load(Ordering::Acquire) != self.acks_seen.load(Ordering::Relaxed)
    }

    /// Consumer, before it sleeps: flags it, then true if data came
    /// meanwhile (do not sleep then).
    pub fn prepare_sleep(&self) -> bool {
        self.ctl().sleeping.0.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.has_input()
    }

    /// Consumer's thread, going to sleep on a tick while its consumer
    /// polls: producers ring only if the consumer stops looking. true: data
    /// came meanwhile.
    pub fn prepare_doze(&self) -> bool {
        self.ctl().sleeping.0.store(2, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.has_input()
    }

    /// Consumer's pass: it looked at the ring at `now` (`clock::ticks`).
    #[inline]
    pub fn polled(&self, now: u64) {
        if now.wrapping_sub(self.stamped.load(Ordering::Relaxed)) >= self.stamp_step {
            self.stamped.store(now, Ordering::Relaxed);
            self.ctl().polled.0.store(now, Ordering::Relaxed);
        }
    }

    /// The consumer's thread, woken: it looks at the ring before it sleeps
    /// again, so producers may skip the doorbell as for a consumer's look.
    /// Not the consumer's own stamp (`stamped`), which `consumer_looked_within`
    /// reads.
    pub fn thread_looks(&self, now: u64) {
        self.ctl().polled.0.store(now, Ordering::Relaxed);
    }

    /// Whether the ring was stamped looked at within `POLLED_NS` before `now`
    /// (`clock::ticks`), or after it.
    pub fn looked_within(&self, now: u64) -> bool {
        now.saturating_sub(self.ctl().polled.0.load(Ordering::Relaxed)) < self.polled_window
    }

    /// Consumer side: whether its consumer itself (not its thread) looked
    /// within `POLLED_NS` before `now`.
    pub fn consumer_looked_within(&self, now: u64) -> bool {
        now.saturating_sub(self.stamped.load(Ordering::Relaxed)) < self.polled_window
    }

    /// Producer: whether the consumer stamped a look at or after `t`
    /// (`clock::ticks`): a pass that began after `t`, which takes the ACKs
    /// published before it.
    pub fn looked_since(&self, t: u64) -> bool {
        self.ctl().polled.0.load(Ordering::Relaxed) >= t
    }

    /// Consumer, awake again.
    pub fn awake(&self) {
        self.ctl().sleeping.0.store(0, Ordering::Relaxed);
    }

    /// Producer, after a push: ring, or not, or skipped because the
    /// consumer polled lately (within `POLLED_NS` of `at`, `Shm::
    /// judged_at`; `Skipped`: the producer checks later that it took the
    /// bytes, `overdue`).
    pub fn bell(&self, at: impl FnOnce() -> u64) -> Bell {
        fence(Ordering::SeqCst);
        let c = self.ctl();
        match c.sleeping.0.load(Ordering::Relaxed) {
            0 => Bell::No,
            2 if self.looked_within(at()) => Bell::Skipped,
            _ if c.sleeping.0.swap(0, Ordering::AcqRel) != 0 => Bell::Ring,
            _ => Bell::No,
        }
    }

    /// A consumer's post at `now` (`clock::ticks`): `bell` for the first
    /// of a burst, `bell_unfenced` for the posts within `BURST_NS` of the
    /// last fenced look. The fence waits for the stores before it to reach
    /// the reader's cache: a sender with 64 messages in flight spent a sixth
    /// of its time there (on-node msg_rate 2.35 M/s with a fence at every
    /// post, 3.2 with none, in one of the host's slow minutes). Not at every
    /// post: without it even for a lone message, a wait-mode ping-pong's
    /// mean grew by about a microsecond (5 alternating pairs), as a reader
    /// that spins a while in its wait and then sleeps would if it went to
    /// sleep just as the message landed, now and then.
    pub fn bell_in_burst(&self, now: u64, at: impl FnOnce() -> u64) -> Bell {
        if now.wrapping_sub(self.fenced_at.load(Ordering::Relaxed)) >= self.burst_window {
            self.fenced_at.store(now, Ordering::Relaxed);
            return self.bell(at);
        }
        self.bell_unfenced(at)
    }

    /// `bell` without its fence: the reader's flag as last seen here,
    /// which may be older than the bytes just published. A reader seen
    /// awake, or dozing and looking within `POLLED_NS`: `Unsure`, which the
    /// producer checks later as it does `Skipped` (`overdue`), so a reader
    /// that went to sleep just as the bytes landed is rung late, not never.
    /// A reader seen asleep: `bell`.
    fn bell_unfenced(&self, at: impl FnOnce() -> u64) -> Bell {
        match self.ctl().sleeping.0.load(Ordering::Relaxed) {
            0 => Bell::Unsure,
            2 => {
                let t = at();
                if self.looked_within(t) { Bell::Unsure } else { self.bell(|| t) }
            }
            _ => self.bell(at),
        }
    }

    /// Producer: whether bytes it wrote up to `head` are still unread.
    #[cfg(test)]
    pub fn unread(&self, head: u64) -> bool {
        self.seen_tail() < head && self.tail() < head
    }

    /// Producer: bytes the consumer ever took.
    pub fn tail(&self) -> u64 {
        let t = self.ctl().tail.0.load(Ordering::Acquire);
        self.seen_tail.store(t, Ordering::Relaxed);
        t
    }

    /// Producer: `tail` as last read, without reading it again.
    pub fn seen_tail(&self) -> u64 {
        self.seen_tail.load(Ordering::Relaxed)
    }

    /// Producer: bytes ever written.
    pub fn head(&self) -> u64 {
        self.head_mine.load(Ordering::Relaxed)
    }

    /// Producer, the ring full: flags it, then true if room came meanwhile.
    pub fn prepare_wait(&self) -> bool {
        self.ctl().waiting.0.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.space() > 0
    }

    /// Consumer, after a pop: whether the producer waits for room.
    pub fn must_ring_producer(&self) -> bool {
        fence(Ordering::SeqCst);
        let w = &self.ctl().waiting.0;
        w.load(Ordering::Relaxed) != 0 && w.swap(0, Ordering::AcqRel) != 0
    }
}

/// A connection's shared mapping: the ring it writes and the one it reads.
pub struct Shm {
    base: *mut u8,
    creator: bool,
    bells: Bells,
    /// The peer's pid, once `probe_peer` read it.
    pub peer_pid: i32,
    pub tx: Ring,
    pub rx: Ring,
    /// The file's name while it may still exist (the creator's copy).
    name: Option<std::ffi::CString>,
}

// SAFETY: the mapping is ours until drop; one thread uses it at a time.
unsafe impl Send for Shm {}

fn path_of(name: &str) -> Option<std::ffi::CString> {
    let ok = name.len() <= 40 && name.starts_with(PREFIX) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !ok {
        return None;
    }
    std::ffi::CString::new(format!("/dev/shm/{name}")).ok()
}

fn map(fd: i32) -> io::Result<*mut u8> {
    // SAFETY: a new shared mapping of our file; checked.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), MAP_LEN, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let p = p as *mut u8;
    if tune::prefault() {
        fault_in(p, 0, MAP_LEN);
    } else {
        // The control page and the heads of the rings (`HEAD_IN`).
        fault_in(p, 0, CTL_PAGE + HEAD_IN);
        fault_in(p, CTL_PAGE + RING, HEAD_IN);
    }
    Ok(p)
}

/// How much of each ring is faulted in at setup when the rest is left
/// to first use (`tune::prefault`): a short message's frames for the
/// first thousand or so round trips.
const HEAD_IN: usize = 64 * 1024;

/// Faults `len` bytes at `off` of a mapping at `base` in, leaving them
/// alone; a kernel before 5.14 (false, EINVAL) faults them as first used.
fn fault_in(base: *mut u8, off: usize, len: usize) -> bool {
    debug_assert!(off + len <= MAP_LEN);
    // SAFETY: advice on a part of a whole mapping of ours.
    unsafe { libc::madvise(base.add(off) as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) == 0 }
}

/// The doorbells' own channel: two FIFOs beside the mapping, `.c` read by
/// the active end (its creator) and `.p` by the passive end. A doorbell
/// through the TCP stream cost both ends the loopback's whole stack: a
/// blocking one-byte ping-pong between two pinned processes took 19 to 49
/// µs one way through a loopback TCP connection and 13 to 21 through a
/// pipe, on a host whose system calls cost 0.3 µs (`getppid`). Both ends
/// open both FIFOs O_RDWR: a FIFO with a reader and a writer of one's own
/// never reports a hang-up (which, level-triggered, would spin the
/// thread) nor fails a write with EPIPE (SIGPIPE) when the peer goes; the
/// stream still tells that.
struct Bells {
    rx: i32,
    tx: i32,
    /// Doorbells go through them: the passive end's as soon as it opened
    /// them, the active end's once the peer said it did (`settle_bells`).
    on: bool,
}

impl Bells {
    const NONE: Bells = Bells { rx: -1, tx: -1, on: false };

    fn path(of: &std::ffi::CStr, end: u8) -> Option<std::ffi::CString> {
        let mut p = of.to_bytes().to_vec();
        p.extend_from_slice(&[b'.', end]);
        std::ffi::CString::new(p).ok()
    }

    fn open_fifo(path: &std::ffi::CStr) -> Option<i32> {
        // SAFETY: opening a path we built; checked.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
        if fd < 0 {
            return None;
        }
        // SAFETY: all-zero stat, filled by fstat of our fd.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let ok = unsafe { libc::fstat(fd, &mut st) } == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFIFO
            && st.st_uid == uid()
            && st.st_mode & 0o077 == 0;
        if !ok {
            // SAFETY: ours, closed once.
            unsafe { libc::close(fd) };
            return None;
        }
        Some(fd)
    }

    /// The active end: makes and opens both (none if either fails).
    fn make(name: &str) -> Bells {
        let Some(base) = path_of(name) else { return Bells::NONE };
        let (Some(c), Some(p)) = (Bells::path(&base, b'c'), Bells::path(&base, b'p')) else { return Bells::NONE };
        // SAFETY: new FIFOs of ours, by paths we built.
        let made = unsafe { libc::mkfifo(c.as_ptr(), 0o600) == 0 && libc::mkfifo(p.as_ptr(), 0o600) == 0 };
        let b = if made { Bells::pair(&c, &p) } else { Bells::NONE };
        if b.rx < 0 {
            Bells::unlink(&base);
        }
        b
    }

    /// The passive end: opens both and unlinks them (none if either fails),
    /// and rings through them at once: its peer made them, so it can.
    fn open(name: &str) -> Bells {
        let Some(base) = path_of(name) else { return Bells::NONE };
        let (Some(c), Some(p)) = (Bells::path(&base, b'c'), Bells::path(&base, b'p')) else { return Bells::NONE };
        let b = Bells::pair(&p, &c);
        Bells::unlink(&base);
        Bells { on: b.rx >= 0, ..b }
    }

    fn pair(rx: &std::ffi::CStr, tx: &std::ffi::CStr) -> Bells {
        match (Bells::open_fifo(rx), Bells::open_fifo(tx)) {
            (Some(rx), Some(tx)) => Bells { rx, tx, on: false },
            (a, b) => {
                for fd in [a, b].into_iter().flatten() {
                    // SAFETY: ours, closed once.
                    unsafe { libc::close(fd) };
                }
                Bells::NONE
            }
        }
    }

    fn unlink(base: &std::ffi::CStr) {
        for end in [b'c', b'p'] {
            if let Some(p) = Bells::path(base, end) {
                // SAFETY: a path we built; ENOENT is fine.
                unsafe { libc::unlink(p.as_ptr()) };
            }
        }
    }

    fn ring(&self) {
        let b = 1u8;
        // SAFETY: one byte from our stack into our FIFO; a full one already
        // holds bytes that will wake the peer.
        unsafe { libc::write(self.tx, &b as *const u8 as *const libc::c_void, 1) };
    }

    fn drain(&self) {
        let mut b = [0u8; 64];
        // A pipe's read returns what it holds, up to the buffer: a short
        // read emptied it.
        // SAFETY: reading into our stack buffer.
        while unsafe { libc::read(self.rx, b.as_mut_ptr() as *mut libc::c_void, b.len()) } == b.len() as isize {}
    }

    fn close(&mut self) {
        for fd in [self.rx, self.tx] {
            if fd >= 0 {
                // SAFETY: ours, closed once (reset below).
                unsafe { libc::close(fd) };
            }
        }
        *self = Bells::NONE;
    }
}

impl Shm {
    /// When (`clock::ticks`) the peer's looks at the ring we write are to
    /// be judged from: our own last look at the ring we read, if that was
    /// within `PAUSE_NS`, else now. This machine's vCPUs stop together
    /// (20 to 80 µs, every 4 ms and more: a spinning clock reader on
    /// each sees the same gaps), and both ends' stamps come out of such a
    /// pause equally old; judged against now, the peer looked like one
    /// that had stopped, was rung, and its thread took its CPU from it as
    /// it came back (an on-node ping-pong: doorbells back and forth, both
    /// threads' turns, 20 to 100 µs lost per pause). A peer that really
    /// stopped is found by our next pass (`overdue`) against that pass's
    /// look.
    #[inline]
    pub fn judged_at(&self) -> u64 {
        self.judged_at_from(clock::ticks())
    }

    /// `judged_at` with `now` read already (a post's): a clock read is
    /// about 10 ns on the benchmark host, a fifteenth of an on-node post.
    #[inline]
    pub fn judged_at_from(&self, now: u64) -> u64 {
        let mine = self.rx.stamped.load(Ordering::Relaxed);
        if now.wrapping_sub(mine) < self.rx.pause_window { mine } else { now }
    }

    fn from_base(base: *mut u8, creator: bool, name: Option<std::ffi::CString>) -> Shm {
        // SAFETY: both Ctl blocks and rings lie inside the MAP_LEN mapping at base.
        let (c0, c1, d0, d1) = unsafe {
            (base as *const Ctl, base.add(1024) as *const Ctl, base.add(CTL_PAGE), base.add(CTL_PAGE + RING))
        };
        // SAFETY: the mapping lives as long as the Shm that owns these rings.
        let (r0, r1) = unsafe { (Ring::new(c0, d0, RING), Ring::new(c1, d1, RING)) };
        let (tx, rx) = if creator { (r0, r1) } else { (r1, r0) };
        Shm { base, creator, bells: Bells::NONE, peer_pid: 0, tx, rx, name }
    }

    /// The active end: a new mapping and the name to send.
    pub fn create() -> io::Result<(Shm, String)> {
        let mut r = [0u8; 8];
        // SAFETY: getrandom writes at most 8 bytes into r.
        if unsafe { libc::getrandom(r.as_mut_ptr() as *mut libc::c_void, 8, 0) } != 8 {
            return Err(io::Error::last_os_error());
        }
        let name = format!("{PREFIX}{:016x}", u64::from_ne_bytes(r));
        let path = path_of(&name).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: creating a new file of our own; checked.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0o600) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: sizing our new file; the mapping then holds it, the fd goes.
        let r = if unsafe { libc::ftruncate(fd, MAP_LEN as libc::off_t) } == 0 { map(fd) } else { Err(io::Error::last_os_error()) };
        // SAFETY: our fd, closed once.
        unsafe { libc::close(fd) };
        match r {
            Ok(base) => {
                let mut m = Shm::from_base(base, true, Some(path));
                m.bells = Bells::make(&name);
                m.publish_self();
                Ok((m, name))
            }
            Err(e) => {
                // SAFETY: removing the file we just made.
                unsafe { libc::unlink(path.as_ptr()) };
                Err(e)
            }
        }
    }

    /// The passive end: maps the peer's file and unlinks it.
    pub fn open(name: &str) -> io::Result<Shm> {
        let path = path_of(name).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: opening an existing file by a name we checked; checked.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: all-zero stat, filled by fstat of our fd.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let r = if unsafe { libc::fstat(fd, &mut st) } != 0 {
            Err(io::Error::last_os_error())
        } else if st.st_size as usize != MAP_LEN || st.st_uid != uid() || st.st_mode & 0o077 != 0 {
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        } else {
            map(fd)
        };
        // SAFETY: our fd, closed once; the file goes now that we hold it (or failed).
        unsafe {
            libc::close(fd);
            libc::unlink(path.as_ptr());
        }
        r.map(|base| {
            let mut m = Shm::from_base(base, false, None);
            m.bells = Bells::open(name);
            m.publish_self();
            m
        })
    }

    /// The slot (pid, cookie address, cookie value, FIFO doorbells open)
    /// of one end in the control page, for the cross-memory-attach probe
    /// and the doorbells' channel.
    fn slot(&self, creator: bool) -> &[AtomicU64; 4] {
        let off = SLOTS + if creator { 0 } else { 64 };
        // SAFETY: 32 aligned bytes inside the control page of our mapping.
        unsafe { &*(self.base.add(off) as *const [AtomicU64; 4]) }
    }

    fn publish_self(&self) {
        let s = self.slot(self.creator);
        // SAFETY: plain syscall.
        s[0].store(unsafe { libc::getpid() } as u64, Ordering::Relaxed);
        s[1].store(&COOKIE as *const AtomicU64 as u64, Ordering::Relaxed);
        s[3].store(u64::from(self.bells.rx >= 0), Ordering::Relaxed);
        s[2].store(cookie(), Ordering::Release);
    }

    /// The active end, once the REP says the peer took the mapping: rings
    /// through the FIFOs if the peer opened them too (its slot says so; it
    /// wrote that before it sent the REP), else closes them and stays with
    /// the stream. Returns the FIFO to watch for our own doorbells.
    pub fn settle_bells(&mut self) -> Option<i32> {
        let peer = self.slot(!self.creator)[3].load(Ordering::Acquire) == 1;
        if self.bells.rx >= 0 && peer {
            self.bells.on = true;
        } else {
            self.bells.close();
        }
        self.bell_fd()
    }

    /// The FIFO our doorbells come through (the passive end: as soon as it
    /// opened the mapping; the active end: after `settle_bells`).
    pub fn bell_fd(&self) -> Option<i32> {
        self.bells.on.then_some(self.bells.rx)
    }

    /// Rings the peer: through its FIFO, or a byte on the stream `fd`.
    pub fn ring(&self, fd: i32) {
        if self.bell_fd().is_some() {
            self.bells.ring();
        } else {
            ring_bell(fd);
        }
    }

    /// Takes the doorbells that came, from the FIFO and from the stream
    /// `fd` (whose end still tells that the peer went).
    pub fn drain(&self, fd: i32) -> Result<(), i32> {
        if self.bell_fd().is_some() {
            self.bells.drain();
        }
        drain_bells(fd)
    }

    /// Whether this process can reach the peer's memory with
    /// process_vm_readv/writev: reads the cookie the peer published and
    /// compares it (a pid from another pid namespace, ptrace_scope, seccomp
    /// or a kernel without CMA all give no).
    pub fn probe_peer(&mut self) -> bool {
        let s = self.slot(!self.creator);
        let want = s[2].load(Ordering::Acquire);
        let (pid, addr) = (s[0].load(Ordering::Relaxed) as i32, s[1].load(Ordering::Relaxed));
        if want == 0 || pid <= 0 {
            return false;
        }
        let mut got = 0u64;
        let local = libc::iovec { iov_base: &mut got as *mut u64 as *mut libc::c_void, iov_len: 8 };
        let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: 8 };
        // SAFETY: reads 8 bytes of the peer into our local u64.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n == 8 && got == want {
            self.peer_pid = pid;
            return true;
        }
        log::debug!("sock: cross-memory attach to pid {pid}: {}", if n < 0 { io::Error::last_os_error().to_string() } else { "cookie mismatch".into() });
        false
    }

    /// Removes the file (the creator, once the handshake is over), and
    /// the FIFOs beside it.
    pub fn unlink(&mut self) {
        if let Some(p) = self.name.take() {
            // SAFETY: our own file's path; ENOENT (the peer took it) is fine.
            unsafe { libc::unlink(p.as_ptr()) };
            Bells::unlink(&p);
        }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        self.unlink();
        self.bells.close();
        // SAFETY: our mapping; the rings that point into it go with us.
        unsafe { libc::munmap(self.base as *mut libc::c_void, MAP_LEN) };
    }
}

fn uid() -> u32 {
    // SAFETY: plain syscall.
    unsafe { libc::getuid() }
}

fn env_off(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| matches!(v.trim(), "0" | "no" | "off" | "false"))
}

/// Whether this process offers and accepts the on-node path
/// (`DAPL_SOCK_SHM=0` turns it off).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| !env_off("DAPL_SOCK_SHM") && host().is_some())
}

/// This host as the handshake names it: boot id, network namespace
/// (device and inode of /proc/self/ns/net), uid.
fn host() -> Option<&'static [u8; 64]> {
    static H: OnceLock<Option<[u8; 64]>> = OnceLock::new();
    H.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let boot = boot.trim().as_bytes();
        if boot.len() < 16 || boot.len() > 40 {
            return None;
        }
        let ns = std::fs::metadata("/proc/self/ns/net").ok()?;
        use std::os::unix::fs::MetadataExt;
        let mut h = [0u8; 64];
        h[..boot.len()].copy_from_slice(boot);
        h[40..48].copy_from_slice(&ns.dev().to_le_bytes());
        h[48..56].copy_from_slice(&ns.ino().to_le_bytes());
        h[56..60].copy_from_slice(&uid().to_le_bytes());
        Some(h)
    })
    .as_ref()
}

/// The REQ's trailer: our host and the mapping's name.
pub fn trailer(name: &str) -> Option<[u8; TRAILER]> {
    let h = host()?;
    let mut t = [0u8; TRAILER];
    t[..64].copy_from_slice(h);
    let n = name.as_bytes();
    if n.len() > TRAILER - 64 {
        return None;
    }
    t[64..64 + n.len()].copy_from_slice(n);
    Some(t)
}

/// The passive end's reading of a REQ's trailer: the mapping, if the
/// requester is on this host and the mapping opens.
pub fn accept_trailer(t: &[u8]) -> Option<Shm> {
    if !enabled() || t.len() != TRAILER || t[..64] != host()?[..] {
        return None;
    }
    let name = &t[64..];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let name = std::str::from_utf8(&name[..end]).ok()?;
    match Shm::open(name) {
        Ok(s) => Some(s),
        Err(e) => {
            log::info!("sock: on-node peer, but its mapping {name} does not open ({e}); staying on tcp");
            None
        }
    }
}

/// Sends a doorbell byte on a connection's stream. A full socket buffer
/// already holds bytes that will wake the peer; a dead peer shows as EOF.
pub fn ring_bell(fd: i32) {
    let b = 1u8;
    // SAFETY: one byte from our stack onto our socket.
    unsafe { libc::send(fd, &b as *const u8 as *const libc::c_void, 1, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
}

/// Reads and drops doorbell bytes. false: the stream ended or failed.
pub fn drain_bells(fd: i32) -> Result<(), i32> {
    let mut b = [0u8; 64];
    loop {
        // SAFETY: reading into our stack buffer.
        let n = unsafe { libc::recv(fd, b.as_mut_ptr() as *mut libc::c_void, b.len(), libc::MSG_DONTWAIT) };
        if n > 0 {
            continue;
        }
        if n == 0 {
            return Err(0);
        }
        let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return match e {
            libc::EAGAIN | libc::EINTR => Ok(()),
            e => Err(e),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // A hang-up counts as readable there too: level-triggered, it would wake a thread.
    use super::super::eventfd::{readable, socketpair};

    struct TestRing {
        _ctl: Box<Ctl>,
        _data: Vec<u8>,
        ring: Ring,
    }

    fn ring(cap: usize) -> TestRing {
        let ctl = Box::new(Ctl {
            head: Line(Produced { head: AtomicU64::new(0), acked: AtomicU64::new(0), pad: AtomicU64::new(0) }),
            tail: Line(AtomicU64::new(0)),
            sleeping: Line(AtomicU32::new(0)),
            waiting: Line(AtomicU32::new(0)),
            polled: Line(AtomicU64::new(0)),
        });
        let mut data = vec![0u8; cap];
        // SAFETY: both live in the TestRing beside the ring.
        let ring = unsafe { Ring::new(&*ctl, data.as_mut_ptr(), cap) };
        TestRing { _ctl: ctl, _data: data, ring }
    }

    fn push(r: &Ring, b: &[u8]) -> usize {
        // SAFETY: a slice.
        unsafe { r.push(b.as_ptr(), b.len()) }
    }

    fn pop(r: &Ring, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        // SAFETY: a buffer of n bytes.
        let k = unsafe { r.pop(v.as_mut_ptr(), n) };
        v.truncate(k);
        v
    }

    #[test]
    fn empty_and_full() {
        let t = ring(16);
        let r = &t.ring;
        assert_eq!(r.available(), 0);
        assert_eq!(pop(r, 4), Vec::<u8>::new());
        assert_eq!(r.space(), 16);
        assert_eq!(push(r, &[7u8; 20]), 16);
        assert_eq!(r.space(), 0);
        assert_eq!(push(r, &[1]), 0);
        assert_eq!(pop(r, 20), vec![7u8; 16]);
        assert_eq!(r.available(), 0);
        assert_eq!(r.space(), 16);
    }

    /// A header read ahead of its frame, also across the ring's end,
    /// leaves the bytes for the reader's take.
    #[test]
    fn peek_leaves_the_bytes() {
        let t = ring(16);
        let r = &t.ring;
        let mut h = [0u8; 6];
        assert!(!r.peek(&mut h), "nothing readable");
        assert_eq!(push(r, &[9u8; 12]), 12);
        assert_eq!(pop(r, 12), vec![9u8; 12]);
        assert_eq!(push(r, &[1, 2, 3, 4, 5]), 5);
        assert!(!r.peek(&mut h), "5 of 6 readable");
        assert_eq!(push(r, &[6, 7]), 2);
        assert!(r.peek(&mut h));
        assert_eq!(h, [1, 2, 3, 4, 5, 6], "the four bytes to the ring's end and two from its start");
        assert_eq!(pop(r, 16), vec![1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn wraps_around() {
        let t = ring(16);
        let r = &t.ring;
        let mut next = 0u8;
        let mut expect = 0u8;
        // Odd sizes so every offset of the wrap gets crossed.
        for round in 0..200 {
            let n = 1 + round % 13;
            let b: Vec<u8> = (0..n).map(|_| { next = next.wrapping_add(1); next }).collect();
            let k = push(r, &b);
            assert_eq!(k, n.min(16 - r.available() + k));
            next = next.wrapping_sub((n - k) as u8);
            for x in pop(r, 1 + round % 7) {
                expect = expect.wrapping_add(1);
                assert_eq!(x, expect);
            }
        }
        for x in pop(r, 16) {
            expect = expect.wrapping_add(1);
            assert_eq!(x, expect);
        }
        assert_eq!(expect, next);
    }

    #[test]
    fn doorbell_flags() {
        let t = ring(16);
        let r = &t.ring;
        // A consumer that sleeps on an empty ring is rung once, by the next push.
        assert!(!r.prepare_sleep());
        assert_eq!(push(r, b"ab"), 2);
        assert_eq!(r.bell(clock::ticks), Bell::Ring);
        assert_ne!(r.bell(clock::ticks), Bell::Ring);
        // Data already there: the consumer does not sleep.
        assert!(r.prepare_sleep());
        r.awake();
        assert_ne!(r.bell(clock::ticks), Bell::Ring);
        // A producer facing a full ring is rung once room is made.
        assert_eq!(push(r, &[0u8; 14]), 14);
        assert!(!r.prepare_wait());
        assert_eq!(pop(r, 3).len(), 3);
        assert!(r.must_ring_producer());
        assert!(!r.must_ring_producer());
        // Room already there: the producer does not wait.
        assert!(r.prepare_wait());
    }

    #[test]
    fn staged_parts_are_read_only_once_published_and_wrap() {
        let t = ring(16);
        let r = &t.ring;
        assert_eq!(push(r, &[9u8; 10]), 10);
        assert_eq!(pop(r, 10), vec![9u8; 10]);
        // Two parts from offset 10: the second crosses the ring's end.
        // SAFETY: slices, within the room.
        unsafe {
            r.stage(0, b"abcd".as_ptr(), 4);
            r.stage(4, b"efghij".as_ptr(), 6);
        }
        assert_eq!(r.available(), 0, "staged bytes are not the reader's yet");
        r.publish(10);
        assert_eq!(r.available(), 10);
        assert_eq!(pop(r, 10), b"abcdefghij".to_vec());
    }

    #[test]
    fn a_mapping_is_faulted_in_whole_when_asked_and_else_its_heads_only() {
        let (mut a, _) = Shm::create().unwrap();
        a.unlink();
        // SAFETY: plain sysconf.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let missing = |m: &Shm| {
            let mut v = vec![0u8; MAP_LEN.div_ceil(page)];
            // SAFETY: our mapping of MAP_LEN bytes, one byte out per page.
            assert_eq!(unsafe { libc::mincore(m.base as *mut libc::c_void, MAP_LEN, v.as_mut_ptr()) }, 0);
            v.iter().filter(|&&r| r & 1 == 0).count()
        };
        if tune::prefault() {
            assert_eq!(missing(&a), 0, "DAPL_SOCK_PREFAULT=1, and a new mapping is not all in");
            return;
        }
        // The heads of the rings only, unless the kernel is older than 5.14.
        let rest = (2 * RING - 2 * HEAD_IN) / page;
        let lazy = missing(&a);
        assert!(lazy == rest || lazy == rest + (CTL_PAGE + 2 * HEAD_IN) / page, "{lazy} pages missing from a new mapping, not {rest}");
        if !fault_in(a.base, 0, MAP_LEN) {
            return;
        }
        assert_eq!(missing(&a), 0, "pages of a mapping faulted in are missing");
    }

    #[test]
    fn a_mapping_that_carries_short_messages_stays_in_the_rings_heads() {
        if tune::prefault() {
            return;
        }
        let (mut a, name) = Shm::create().unwrap();
        let b = Shm::open(&name).unwrap();
        a.unlink();
        // SAFETY: plain sysconf.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // Resident pages of ring 0 (the creator's writes) past its head.
        let beyond = |m: &Shm| {
            let from = CTL_PAGE + HEAD_IN + page;
            let mut v = vec![0u8; (CTL_PAGE + RING - from) / page];
            // SAFETY: a page-aligned part of our mapping, one byte out per page.
            assert_eq!(unsafe { libc::mincore(m.base.add(from) as *mut libc::c_void, CTL_PAGE + RING - from, v.as_mut_ptr()) }, 0);
            v.iter().filter(|&&r| r & 1 != 0).count()
        };
        // Twice the ring's length in 200-byte frames, each taken at once.
        let (mut sent, mut got) = (0usize, 0usize);
        while sent < 2 * RING {
            let f = frame(sent, 200);
            a.tx.wrap_early(f.len());
            assert_eq!(push(&a.tx, &f), f.len());
            sent += f.len();
            for x in pop(&b.rx, 4096) {
                assert_eq!(x, got as u8, "byte {got}");
                got += 1;
            }
        }
        assert_eq!(got, sent);
        assert_eq!(beyond(&a), 0, "short messages went past the ring's head");
        assert_eq!(beyond(&b), 0);
    }

    #[test]
    fn parts_are_read_in_place_across_the_end_and_taken_by_skip() {
        let t = ring(16);
        let r = &t.ring;
        assert_eq!(push(r, &[1u8; 12]), 12);
        assert_eq!(pop(r, 12), vec![1u8; 12]);
        assert_eq!(push(r, b"headpayload"), 11);
        // A header of 4 up to the ring's end, its payload of 7 from the start.
        assert_eq!(r.parts(0, 4), (&b"head"[..], &b""[..]));
        assert_eq!(r.parts(4, 7), (&b"payload"[..], &b""[..]));
        assert_eq!(r.parts(2, 4), (&b"ad"[..], &b"pa"[..]), "a range across the end comes in two");
        r.skip(4);
        assert_eq!(r.available(), 7);
        assert_eq!(r.parts(0, 7), (&b"payload"[..], &b""[..]));
        r.skip(7);
        assert_eq!(r.available(), 0);
        assert_eq!(r.space(), 16, "skipped bytes go back to the producer");
        let past = std::panic::catch_unwind(|| {
            let t = ring(16);
            let _ = t.ring.parts(0, 1);
        });
        assert!(past.is_err(), "parts past head were handed out");
    }

    #[test]
    fn acks_are_input_and_counted_once() {
        let t = ring(16);
        let r = &t.ring;
        assert!(!r.has_input());
        assert_eq!(r.take_acks(), 0);
        // A sleeper is rung for ACKs as for bytes, and does not sleep on them.
        assert!(!r.prepare_sleep());
        r.publish_acks(3);
        assert_eq!(r.bell(clock::ticks), Bell::Ring);
        assert!(r.has_input());
        assert!(r.prepare_sleep());
        r.awake();
        r.publish_acks(2);
        assert_eq!(r.take_acks(), 5, "ACKs published since the last take, all of them");
        assert_eq!(r.take_acks(), 0, "an ACK is taken once");
        assert!(!r.has_input());
        assert_eq!(r.available(), 0, "ACKs are not bytes");
        // The producer learns that the reader looked after a moment.
        r.polled(1_000_000);
        assert!(r.looked_since(1_000_000));
        assert!(!r.looked_since(1_000_001));
    }

    /// The lost-wakeup race, run for real: a consumer flags its sleep and
    /// looks at the ring while a producer pushes and looks at the flag,
    /// from two threads started together, many times. Either the consumer
    /// sees the byte or the producer rings. With the consumer's fence only
    /// the compiler's, x86's store-load reordering lost a wakeup here in
    /// each of four runs, first at rounds 160 to 121,869.
    /// Spins until `v` reaches `n`, giving the CPU away now and then (the
    /// other tests run beside this one on few CPUs).
    fn wait_for(v: &AtomicU64, n: u64) {
        let mut spins = 0u32;
        while v.load(Ordering::Acquire) < n {
            spins += 1;
            if spins % (1 << 14) == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    #[test]
    fn no_wakeup_is_lost_between_two_threads() {
        use std::sync::atomic::AtomicBool;
        let t = ring(1 << 12);
        let r = &t.ring;
        const ROUNDS: u64 = 200_000;
        let go = AtomicU64::new(0);
        let done = AtomicU64::new(0);
        let saw = AtomicBool::new(false);
        let mut lost = None;
        std::thread::scope(|s| {
            s.spawn(|| {
                for round in 1..=ROUNDS {
                    wait_for(&go, round);
                    saw.store(r.prepare_sleep(), Ordering::Relaxed);
                    done.store(round, Ordering::Release);
                }
            });
            for round in 1..=ROUNDS {
                go.store(round, Ordering::Release);
                assert_eq!(push(r, b"x"), 1);
                let rang = r.bell(clock::ticks) == Bell::Ring;
                wait_for(&done, round);
                if !rang && !saw.load(Ordering::Relaxed) {
                    lost.get_or_insert(round);
                }
                assert_eq!(pop(r, 1), b"x");
                r.awake();
            }
        });
        assert_eq!(lost, None, "a round where the consumer saw no byte and the producer did not ring");
    }

    #[test]
    fn dozing_reader_is_rung_only_when_it_stopped_polling() {
        let t = ring(64);
        let r = &t.ring;
        // Its consumer polled just now: the push skips the doorbell, and
        // the producer can tell later whether the bytes were taken.
        assert!(!r.prepare_doze());
        // Judged at the look's own time: a test preempted for POLLED_NS
        // between the two (ThreadSanitizer, a loaded host) is not a failure.
        let now = clock::ticks();
        r.polled(now);
        assert_eq!(push(r, b"abc"), 3);
        assert_eq!(r.bell(|| now), Bell::Skipped);
        let head = r.head();
        assert!(r.unread(head));
        assert_eq!(pop(r, 3), b"abc");
        assert!(!r.unread(head));
        // Its consumer last looked long ago: rung, once.
        r.polled(clock::ticks().saturating_sub(clock::ticks_of_ns(10 * POLLED_NS)));
        assert_eq!(push(r, b"d"), 1);
        assert_eq!(r.bell(clock::ticks), Bell::Ring);
        assert_eq!(r.bell(clock::ticks), Bell::No);
        // Data already there when the thread dozes: it does not sleep.
        assert!(r.prepare_doze());
    }

    #[test]
    fn a_burst_shares_its_first_posts_fenced_look() {
        let t = ring(64);
        let r = &t.ring;
        let t0 = clock::ticks();
        let w = clock::ticks_of_ns(BURST_NS);
        // The first post of a burst looks with the fence: an awake reader needs nothing.
        assert_eq!(push(r, b"a"), 1);
        assert_eq!(r.bell_in_burst(t0, clock::ticks), Bell::No);
        // The next, within the window: no fence, unsure.
        assert_eq!(r.bell_in_burst(t0 + w - 1, clock::ticks), Bell::Unsure);
        // A reader flagged asleep is rung at once all the same.
        assert_eq!(pop(r, 1), b"a");
        assert!(!r.prepare_sleep());
        assert_eq!(push(r, b"b"), 1);
        assert_eq!(r.bell_in_burst(t0 + w - 1, clock::ticks), Bell::Ring);
        // Past the window the fence again.
        assert_eq!(r.bell_in_burst(t0 + w, clock::ticks), Bell::No);
    }

    #[test]
    fn a_look_without_the_fence_rings_only_a_reader_seen_asleep() {
        let t = ring(64);
        let r = &t.ring;
        // Awake: left unsure, to be checked later (`overdue`).
        assert_eq!(push(r, b"a"), 1);
        assert_eq!(r.bell_unfenced(clock::ticks), Bell::Unsure);
        // Dozing, its consumer looking: unsure too; not looking: rung.
        assert!(r.prepare_doze());
        let now = clock::ticks();
        r.polled(now);
        assert_eq!(r.bell_unfenced(|| now), Bell::Unsure);
        r.polled(clock::ticks().saturating_sub(clock::ticks_of_ns(10 * POLLED_NS)));
        assert_eq!(r.bell_unfenced(clock::ticks), Bell::Ring);
        // Asleep: rung, once, as `bell` does.
        assert_eq!(pop(r, 1), b"a");
        assert!(!r.prepare_sleep());
        assert_eq!(push(r, b"b"), 1);
        assert_eq!(r.bell_unfenced(clock::ticks), Bell::Ring);
        assert_eq!(r.bell_unfenced(clock::ticks), Bell::Unsure);
    }

    #[test]
    fn threads_move_a_stream() {
        let t = ring(64);
        let r: &'static Ring = Box::leak(Box::new(t)).ring_ref();
        const N: usize = 200_000;
        let prod = std::thread::spawn(move || {
            let mut i = 0usize;
            while i < N {
                let b: Vec<u8> = (i..(i + 37).min(N)).map(|x| x as u8).collect();
                // SAFETY: a slice.
                i += unsafe { r.push(b.as_ptr(), b.len()) };
            }
        });
        let mut got = 0usize;
        while got < N {
            for x in pop(r, 50) {
                assert_eq!(x, got as u8);
                got += 1;
            }
        }
        prod.join().unwrap();
    }

    /// A frame of `n` bytes, each its stream position's low byte.
    fn frame(at: usize, n: usize) -> Vec<u8> {
        (at..at + n).map(|x| x as u8).collect()
    }

    #[test]
    fn small_frames_wrap_early_and_keep_to_the_rings_head() {
        let t = ring(4 * WRAP_AT);
        let r = &t.ring;
        let (laps, furthest, sent) = frames_kept_up(r, 20_000, WRAP_AT, |k| 40 + k % 200);
        assert!(laps > 40, "{laps} early wraps for {sent} bytes");
        assert!(furthest <= WRAP_AT + 240, "wrote {furthest} bytes into a lap");
        assert_eq!(r.available(), 0);
        assert_eq!(r.tail(), r.head(), "the reader passed the last wrap");
    }

    /// `count` frames of `size(k)` bytes, each taken whole and in order by
    /// a reader that keeps up, every early wrap checked to begin `from` or
    /// more bytes into a lap and to go to the next lap's start; the wraps,
    /// the furthest byte written into a lap, and the bytes sent.
    fn frames_kept_up(r: &Ring, count: usize, from: usize, size: impl Fn(usize) -> usize) -> (usize, usize, usize) {
        let (mut sent, mut got, mut furthest, mut laps) = (0usize, 0usize, 0usize, 0);
        for k in 0..count {
            let n = size(k);
            let before = r.head();
            r.wrap_early(n);
            if r.head() != before {
                laps += 1;
                assert!(before as usize % r.cap >= from, "a frame of {n} bytes wrapped {} bytes in", before as usize % r.cap);
                assert_eq!(r.head() as usize % r.cap, 0, "a wrap goes to the start of a lap");
            }
            furthest = furthest.max((r.head() as usize % r.cap) + n);
            assert_eq!(push(r, &frame(sent, n)), n);
            sent += n;
            assert_eq!(pop(r, n), frame(got, n), "frame {k}");
            got += n;
        }
        (laps, furthest, sent)
    }

    #[test]
    fn no_early_wrap_before_a_large_frame_or_with_the_reader_behind() {
        let t = ring(4 * WRAP_MID_AT);
        let r = &t.ring;
        let big = vec![1u8; WRAP_AT];
        assert_eq!(push(r, &big), WRAP_AT);
        assert_eq!(pop(r, WRAP_AT).len(), WRAP_AT);
        let head = r.head();
        r.wrap_early(WRAP_FRAME + 1);
        assert_eq!(r.head(), head, "wrapped before a mid-size frame short of WRAP_MID_AT");
        r.wrap_early(WRAP_MID_FRAME + 1);
        assert_eq!(r.head(), head, "wrapped before a large frame");
        // Unread bytes past half of WRAP_AT: no wrap either, nor a second
        // look until WRAP_RELOOK more are written.
        let behind = WRAP_AT / 2 + 1;
        assert_eq!(push(r, &vec![2u8; behind]), behind);
        let head = r.head();
        r.wrap_early(64);
        assert_eq!(r.head(), head, "wrapped with the reader behind");
        assert_eq!(pop(r, behind).len(), behind);
        r.wrap_early(64);
        assert_eq!(r.head(), head, "looked again before WRAP_RELOOK bytes");
        assert_eq!(push(r, &vec![3u8; WRAP_RELOOK as usize]), WRAP_RELOOK as usize);
        assert_eq!(pop(r, WRAP_RELOOK as usize).len(), WRAP_RELOOK as usize);
        let head = r.head();
        r.wrap_early(64);
        assert_eq!(r.head(), r.lap_end(head), "the reader caught up: wrapped");
        assert_eq!(r.available(), 0, "the skipped bytes are not data");
        assert_eq!(push(r, &frame(0, 64)), 64);
        assert_eq!(pop(r, 1000), frame(0, 64));
    }

    #[test]
    fn mid_size_frames_wrap_further_in() {
        let t = ring(4 * WRAP_MID_AT);
        let r = &t.ring;
        let (laps, furthest, sent) = frames_kept_up(r, 2_000, WRAP_MID_AT, |k| WRAP_FRAME + 1 + k * 4099 % (WRAP_MID_FRAME - WRAP_FRAME));
        assert!(laps > 40, "{laps} early wraps for {sent} bytes");
        assert!(furthest <= WRAP_MID_AT + WRAP_MID_FRAME, "wrote {furthest} bytes into a lap");
    }

    #[test]
    fn a_reader_behind_an_early_wrap_reads_up_to_it_then_past_it() {
        let t = ring(4 * WRAP_AT);
        let r = &t.ring;
        let first = frame(0, WRAP_AT + 10);
        assert_eq!(push(r, &first), first.len());
        assert_eq!(pop(r, first.len() - 100), first[..first.len() - 100]);
        let head = r.head();
        r.wrap_early(64);
        assert_eq!(r.head(), r.lap_end(head), "100 bytes unread: wrapped");
        let second = frame(7, 64);
        assert_eq!(push(r, &second), 64);
        assert_eq!(pop(r, 1000), first[first.len() - 100..], "read past the wrap's start");
        assert_eq!(pop(r, 1000), second);
        assert_eq!(r.available(), 0);
    }

    #[test]
    fn frames_are_taken_against_the_end_last_seen_until_more_is_wanted() {
        let t = ring(4 * WRAP_AT);
        let r = &t.ring;
        let first = frame(0, 100);
        assert_eq!(push(r, &first), 100);
        assert_eq!(r.known(), 0, "nothing seen before a look");
        assert_eq!(r.available(), 100);
        assert_eq!(push(r, &frame(1, 50)), 50);
        // Known without a look at head: the 50 bytes since stay unseen.
        assert_eq!(r.known(), 100);
        assert_eq!(r.readable(80), 100);
        let (a, b) = r.parts(0, 100);
        assert_eq!((a, b), (&first[..], &[][..]));
        r.skip(60);
        assert_eq!(r.known(), 40);
        // Wanting more than is known looks again.
        assert_eq!(r.readable(41), 90);
        assert_eq!(r.known(), 90);
        assert_eq!(pop(r, 90).len(), 90);
        assert_eq!(r.known(), 0);
        // An early wrap: the end seen stops at it, and a look moves past it.
        let big = frame(2, WRAP_AT + 10);
        assert_eq!(push(r, &big), big.len());
        assert_eq!(pop(r, big.len() - 100).len(), big.len() - 100);
        r.wrap_early(64);
        assert_eq!(push(r, &frame(3, 64)), 64);
        assert_eq!(r.readable(1), 100, "read past the wrap's start");
        r.skip(100);
        assert_eq!(r.known(), 0);
        assert_eq!(r.readable(64), 64);
        assert_eq!(pop(r, 64), frame(3, 64));
    }

    #[test]
    fn threads_move_a_stream_across_early_wraps() {
        threads_move_frames_across_early_wraps(2 * WRAP_AT, 3_000_000, |i| 40 + i % 173);
    }

    #[test]
    fn threads_move_mid_size_frames_across_early_wraps() {
        threads_move_frames_across_early_wraps(2 * WRAP_MID_AT, 8_000_000, |i| WRAP_FRAME - 100 + i * 7 % (WRAP_MID_FRAME - WRAP_FRAME + 200));
    }

    /// A producer thread writes `total` bytes in frames of `size(i)` bytes
    /// (i: bytes written so far), wrapping early where it may, into a ring
    /// of `cap`; the reader takes arbitrary amounts and checks every byte.
    fn threads_move_frames_across_early_wraps(cap: usize, total: usize, size: fn(usize) -> usize) {
        let t = ring(cap);
        let r: &'static Ring = Box::leak(Box::new(t)).ring_ref();
        let prod = std::thread::spawn(move || {
            let (mut i, mut laps, mut f) = (0usize, 0usize, 0usize);
            while i < total {
                let n = size(i).min(total - i);
                let b = frame(i, n);
                // Now and then the reader catches up, as a ping-pong's does:
                // early wraps need it close behind.
                f += 1;
                while f % 4 == 0 && r.head().wrapping_sub(r.tail()) > 512 {
                    std::thread::yield_now();
                }
                let before = r.head();
                r.wrap_early(n);
                laps += usize::from(r.head() != before);
                // A frame goes in whole, as the engine's writes do.
                if r.room(n) < n {
                    std::hint::spin_loop();
                    continue;
                }
                // SAFETY: a slice.
                assert_eq!(unsafe { r.push(b.as_ptr(), n) }, n);
                i += n;
            }
            laps
        });
        let (mut got, mut k) = (0usize, 0usize);
        while got < total {
            k += 1;
            for x in pop(r, 1 + k % 300 + (k % 7) * 3000) {
                assert_eq!(x, got as u8, "byte {got}");
                got += 1;
            }
        }
        let laps = prod.join().unwrap();
        assert!(laps > 0, "no early wrap in {total} bytes");
    }

    impl TestRing {
        fn ring_ref(&self) -> &Ring {
            &self.ring
        }
    }

    #[test]
    fn mapping_round_trip_and_no_leftover() {
        let (mut a, name) = Shm::create().unwrap();
        let b = Shm::open(&name).unwrap();
        assert!(std::fs::metadata(format!("/dev/shm/{name}")).is_err());
        a.unlink();
        assert_eq!(push(&a.tx, b"hello"), 5);
        assert_eq!(pop(&b.rx, 10), b"hello");
        assert_eq!(push(&b.tx, b"back"), 4);
        assert_eq!(pop(&a.rx, 10), b"back");
        assert!(Shm::open("../etc/passwd").is_err());
        // Both ends in one process: each reaches the other's cookie.
        let (mut a, mut b) = (a, b);
        if cma_enabled() {
            assert!(a.probe_peer() && b.probe_peer());
            let src = [5u8; 100];
            let mut dst = [0u8; 100];
            let mut list = Vec::new();
            list.extend_from_slice(&(src.as_ptr() as u64).to_le_bytes());
            list.extend_from_slice(&60u64.to_le_bytes());
            list.extend_from_slice(&(src[60..].as_ptr() as u64).to_le_bytes());
            list.extend_from_slice(&40u64.to_le_bytes());
            assert!(pull(a.peer_pid, dst.as_mut_ptr() as u64, 100, &list));
            assert_eq!(dst, src);
            assert!(!pull(a.peer_pid, dst.as_mut_ptr() as u64, 99, &list));
            assert!(!pull(a.peer_pid, dst.as_mut_ptr() as u64, 5, &list[..15]));
            // The initiator's segment is not mapped: a failure, not a fault here.
            let mut bad = Vec::new();
            bad.extend_from_slice(&8u64.to_le_bytes());
            bad.extend_from_slice(&100u64.to_le_bytes());
            assert!(!pull(a.peer_pid, dst.as_mut_ptr() as u64, 100, &bad));
            assert!(!push_to(a.peer_pid, src.as_ptr() as u64, 100, &bad));
            assert!(!push_to(b.peer_pid, src.as_ptr() as u64, 100, &list[..16]));
        }
        let t = trailer(&name).unwrap();
        let c = accept_trailer(&t);
        // The file is gone: nothing to open.
        assert!(c.is_none());
    }

    /// Doorbells go through the FIFOs once both ends opened them, and
    /// through the stream when the passive end did not: the active end
    /// must not ring a FIFO nobody reads.
    #[test]
    fn doorbells_take_the_fifos_both_ends_opened_else_the_stream() {
        let [sa, sb] = socketpair();
        let (mut a, name) = Shm::create().unwrap();
        let b = Shm::open(&name).unwrap();
        for end in ["c", "p"] {
            assert!(std::fs::metadata(format!("/dev/shm/{name}.{end}")).is_err(), "the passive end left FIFO .{end}");
        }
        let fb = b.bell_fd().expect("the passive end rings and listens through its FIFO");
        assert_eq!(a.bell_fd(), None, "the active end used its FIFOs before the REP");
        let fa = a.settle_bells().expect("both ends opened the FIFOs");
        a.unlink();
        a.ring(sa);
        assert!(readable(fb) && !readable(sb), "a ring went by the stream, not the FIFO");
        for _ in 0..100 {
            b.ring(sb);
        }
        assert!(readable(fa) && !readable(sa));
        assert_eq!(a.drain(sa), Ok(()));
        assert_eq!(b.drain(sb), Ok(()));
        assert!(!readable(fa) && !readable(fb), "a drain left doorbells");
        // The stream still tells that the peer went.
        drop(b);
        // SAFETY: ours, closed once.
        unsafe { libc::close(sb) };
        assert!(!readable(fa), "the peer's end made its FIFO readable (a hang-up would spin the thread)");
        assert_eq!(a.drain(sa), Err(0));
        a.ring(sa);
        drop(a);
        // SAFETY: ours, closed once.
        unsafe { libc::close(sa) };

        // A passive end without the FIFOs (removed here, as one that does
        // not know them leaves them): both ring on the stream.
        let [sa, sb] = socketpair();
        let (mut a, name) = Shm::create().unwrap();
        Bells::unlink(&path_of(&name).unwrap());
        let b = Shm::open(&name).unwrap();
        assert_eq!(b.bell_fd(), None);
        assert_eq!(a.settle_bells(), None, "the active end kept FIFOs its peer did not open");
        a.ring(sa);
        assert!(readable(sb));
        b.ring(sb);
        assert!(readable(sa));
        assert_eq!(a.drain(sa), Ok(()));
        assert!(!readable(sa));
        drop((a, b));
        for fd in [sa, sb] {
            // SAFETY: ours, closed once.
            unsafe { libc::close(fd) };
        }
    }
}
