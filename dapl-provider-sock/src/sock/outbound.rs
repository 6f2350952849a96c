//! A connection's output: which frame goes next (handshake frames, then
//! responses in the order of the requests, then our QP's requests), its
//! header, and writing it to the stream or the peer's ring.

use super::clock;
use super::conn::{Conn, End, Phase, Resp, errno};
use super::role::on_progress_thread;
use super::shm;
use super::tune;
use super::qp::{QpInner, Sge, WOp, Wqe};
use super::wire::{F_ACKS, F_CMA, F_IMM, F_PAD, F_SHM, F_SOLICITED, HDR, Hdr, Op};

/// Picks the next frame to send. false: nothing to send.
pub(super) fn next_frame(c: &mut Conn) -> bool {
    publish_acks(c);
    if let Some(f) = c.ctl.pop_front() {
        c.out.total = f.len() as u64;
        c.out.ctl = Some(f);
        c.out.pos = 0;
        c.out.active = true;
        return true;
    }
    if c.phase != Phase::Open || c.disc_sent {
        return false;
    }
    c.out.ctl = None;
    c.out.segs.clear();
    c.out.pre_len = 0;
    let mut h = Hdr::default();
    if let (Some(&Resp::Ack(n)), 1) = (c.resp.front(), c.resp.len()) {
        // A lone ACK on a stream: it rides in front of our next request,
        // one system call for both (a ping-pong's answer carries the ACK
        // of what it answers).
        if let Some(w) = c.take_request() {
            c.resp.clear();
            Hdr::ack(n).encode(&mut c.out.pre);
            c.out.pre_len = HDR;
            return request_frame(c, &w);
        }
    }
    if let Some(r) = c.resp.pop_front() {
        match r {
            Resp::Ack(n) => {
                h.op = Op::Ack as u8;
                h.a = n;
            }
            Resp::Read { addr, len } => {
                h.op = Op::ReadResp as u8;
                h.len = len as u32;
                if len > 0 {
                    c.out.segs.push((addr, len));
                }
            }
            Resp::Atomic(v) => {
                h.op = Op::AtomicResp as u8;
                h.a = v;
            }
            Resp::ReadPlaced(n) => {
                h.op = Op::ReadResp as u8;
                h.flags = F_CMA;
                h.a = n;
            }
            Resp::Nak(s) => {
                h.op = Op::Nak as u8;
                h.status = s;
            }
        }
    } else {
        let Some(w) = c.take_request() else { return false };
        return request_frame(c, &w);
    }
    h.encode(&mut c.out.hdr);
    c.out.total = HDR as u64 + h.len as u64;
    c.out.pos = 0;
    c.out.active = true;
    true
}

/// On-node with `ring_acks`: an ACK at the front of the responses goes to
/// the mapping's counter instead of a frame of its own (which cost its
/// reader, a sender with many messages in flight, nearly a third of its
/// instructions a message: the frame's read, parse and dispatch).
/// Ahead of a DISC too: the requests it ACKs were served, and complete so
/// at the peer, not flushed.
pub(super) fn publish_acks(c: &mut Conn) {
    if !c.ring_acks || !c.shm_out || c.phase != Phase::Open {
        return;
    }
    let (Some(&Resp::Ack(n)), Some(m)) = (c.resp.front(), &c.shm) else { return };
    m.tx.publish_acks(n);
    c.resp.pop_front();
    c.ack_held = false;
    bell(c, true, None);
}

/// Whether a request goes by reference: the target pulls (or pushes) the
/// bytes itself with cross-memory attach. A send from `send_ref_min` when
/// it is part of a stream (others wait behind it, or the reader has not
/// yet taken all that went before it): the target's one copy, page by page
/// from the initiator, is half the work of two copies through the ring; a
/// lone send from `tune::cma_lone_min` as well (whether the ring, read
/// while it is written, or one pull is faster for it depends on the host:
/// see there).
fn by_reference(c: &Conn, w: &Wqe) -> bool {
    match w.op {
        WOp::Write | WOp::WriteImm | WOp::Read => c.cma_out && w.len >= tune::cma_min(),
        WOp::Send if w.len >= c.send_ref_min => {
            if w.len >= tune::cma_lone_min() {
                return true;
            }
            let queued = c.qp.as_ref().is_some_and(|q| q.unsent.load(std::sync::atomic::Ordering::Acquire) > 0);
            // The reader's `tail` is read only for a large send.
            queued || c.shm.as_ref().is_some_and(|m| m.tx.tail() != m.tx.head())
        }
        _ => false,
    }
}

/// Sets up the frame of a request taken from the send queue (its local
/// segments in `c.out.segs`), after an ACK in `c.out.pre` if there is one.
pub(super) fn request_frame(c: &mut Conn, w: &Wqe) -> bool {
    c.answered = true;
    let mut h = request_header(w);
    {
        if by_reference(c, w) {
            // By reference: the target pulls (or pushes) the bytes itself.
            c.cma_list.clear();
            for &(a, l) in &c.out.segs {
                c.cma_list.extend_from_slice(&a.to_le_bytes());
                c.cma_list.extend_from_slice(&l.to_le_bytes());
            }
            c.out.segs.clear();
            c.out.segs.push((c.cma_list.as_ptr() as u64, c.cma_list.len() as u64));
            h.flags |= F_CMA;
            h.a = w.len;
            h.len = c.cma_list.len() as u32;
        } else if !matches!(w.op, WOp::Send | WOp::Write | WOp::WriteImm) {
            c.out.segs.clear();
        }
    }
    h.encode(&mut c.out.hdr);
    c.out.total = (c.out.pre_len + HDR) as u64 + h.len as u64;
    c.out.pos = 0;
    c.out.active = true;
    true
}

/// Appends the on-node offer to a handshake frame (F_SHM, longer payload).
pub(super) fn add_trailer(frame: &mut Vec<u8>, tr: &[u8]) {
    if frame.len() < HDR {
        return;
    }
    let mut h = Hdr::decode(&frame[..HDR]);
    h.flags |= F_SHM | F_ACKS | F_PAD;
    h.len += tr.len() as u32;
    let mut head = [0u8; HDR];
    h.encode(&mut head);
    frame[..HDR].copy_from_slice(&head);
    frame.extend_from_slice(tr);
}

pub(super) fn request_header(w: &Wqe) -> Hdr {
    let mut h = Hdr::default();
    let sol = if w.solicited { F_SOLICITED } else { 0 };
    match w.op {
        WOp::Send => {
            h.op = Op::Send as u8;
            h.flags = sol;
            h.len = w.len as u32;
        }
        WOp::Write => {
            h.op = Op::Write as u8;
            h.len = w.len as u32;
        }
        WOp::WriteImm => {
            h.op = Op::WriteImm as u8;
            h.flags = F_IMM | sol;
            h.imm = w.imm;
            h.len = w.len as u32;
        }
        WOp::Read => {
            h.op = Op::ReadReq as u8;
            h.a = w.len;
        }
        WOp::CmpSwap => {
            h.op = Op::CmpSwap as u8;
            h.a = w.cmp;
            h.b = w.swap;
        }
        WOp::FetchAdd => {
            h.op = Op::FetchAdd as u8;
            h.a = w.cmp;
        }
        WOp::Window => {}
    }
    if w.op != WOp::Send {
        h.rkey = w.rkey;
        h.addr = w.raddr;
    }
    h
}

/// After bytes (and, `acks`, ACKs) went into the peer's ring: its
/// doorbell, if it needs one.
/// `posted`: a consumer's post, and when (`shm::Ring::bell_in_burst`).
fn bell(c: &mut Conn, acks: bool, posted: Option<u64>) {
    let Some(m) = &c.shm else { return };
    let b = match posted {
        Some(now) => m.tx.bell_in_burst(now, || m.judged_at_from(now)),
        None => m.tx.bell(|| m.judged_at()),
    };
    let unsure = match b {
        shm::Bell::No => return,
        shm::Bell::Ring => return m.ring(c.fd),
        // Bytes the thread wrote: it has no later pass to look again
        // from, so it rings. ACKs alone are left to its consumer's passes
        // or its own next plan (`overdue_acks`), for the reader takes them
        // at its next look or before it sleeps. Rung for at once, they woke
        // the reader's thread onto its consumer's CPU, that consumer's
        // stamp aged, and our next post rang again: doorbells both ways
        // (an on-node ping-pong whose ends paused now and then: 90 to 500
        // a side of 200,000 iterations came from here).
        // (A post is never the thread's: no thread-local lookup, a call
        // into the dynamic loader's TLS code, 31 instructions, for it.)
        shm::Bell::Skipped if posted.is_none() && !acks && on_progress_thread() => return m.ring(c.fd),
        shm::Bell::Skipped => false,
        shm::Bell::Unsure => true,
    };
    // Left for a later look (`overdue`).
    if acks && c.acks_skipped == 0 {
        // ACKs leave no bytes to see taken: a look of the reader's since
        // says it took them.
        c.acks_skipped = clock::ticks().max(1);
    }
    c.unsure |= unsure;
    c.skipped_head = m.tx.head();
    if c.skipped_at == 0 {
        // Unsure, no read of the reader's `tail` (a line it writes): the
        // last one seen serves as the mark it must pass.
        c.skipped_tail = if unsure { m.tx.seen_tail() } else { m.tx.tail() };
        c.skipped_at = clock::now_ns();
    }
}

/// A post that skipped the send queue (`Engine::post_direct`): with nothing else
/// going out on an on-node connection and room in the peer's ring, its
/// frame (after a lone ACK a pass kept back) goes into the ring now, once
/// its QP has recorded it as transmitted (`QpInner::start_direct`).
/// false: nothing done.
/// `now`: `clock::ticks` at the post.
pub(super) fn direct_send(c: &mut Conn, q: &QpInner, w: &Wqe, sges: &[Sge], now: u64) -> bool {
    let ack = match (c.resp.front(), c.resp.len()) {
        (None, _) => None,
        (Some(&Resp::Ack(n)), 1) => Some(n),
        _ => return false,
    };
    if !c.shm_out || c.phase != Phase::Open || c.disc_sent || c.out.active || !c.ctl.is_empty() || by_reference(c, w) {
        return false;
    }
    if !c.live_qp().is_some_and(|x| std::ptr::eq(&**x, q)) {
        return false;
    }
    let Some(m) = &c.shm else { return false };
    let pre = if ack.is_some() && !c.ring_acks { HDR } else { 0 };
    let need = pre + HDR + w.len as usize;
    if c.ring_pad {
        m.tx.wrap_early(need);
    }
    // Checked before the QP records it: only this engine writes the ring,
    // so the room cannot shrink in between.
    if m.tx.room(need) < need || !q.start_direct(w, sges) {
        return false;
    }
    let mut hdr = [0u8; HDR];
    let mut off = 0;
    // SAFETY: our headers, then segments the QP checked against their keys;
    // the room for all is there (checked above).
    unsafe {
        match ack {
            Some(n) if c.ring_acks => m.tx.publish_acks(n),
            Some(n) => {
                Hdr::ack(n).encode(&mut hdr);
                m.tx.stage(0, hdr.as_ptr(), HDR);
                off = HDR;
            }
            None => {}
        }
        request_header(w).encode(&mut hdr);
        m.tx.stage(off, hdr.as_ptr(), HDR);
        off += HDR;
        // A frame of two pieces or more is published piece by piece
        // (`shm::piece_for`); the room for all of it is there already.
        let piece = shm::piece_for(w.len);
        for g in sges {
            let (mut from, mut left) = (g.addr as *const u8, g.len as usize);
            while left > 0 {
                if off >= piece {
                    m.tx.publish(off);
                    off = 0;
                }
                let n = left.min(piece - off);
                m.tx.stage(off, from, n);
                from = from.add(n);
                left -= n;
                off += n;
            }
        }
    }
    m.tx.publish(off);
    if ack.is_some() {
        c.resp.clear();
        c.ack_held = false;
    }
    bell(c, ack.is_some() && c.ring_acks, Some(now));
    true
}

/// Writes what it can of the current frame. true: the frame is out.
/// `more`: another frame follows at once (a stream then holds this one's
/// bytes for it: one segment for both).
pub(super) fn send_frame(c: &mut Conn, more: bool) -> Result<bool, End> {
    // Not zeroed: only the first `k` are set and read (a zeroed array of
    // 35 cost every frame a 560-byte memset).
    let mut iov = [const { std::mem::MaybeUninit::<libc::iovec>::uninit() }; super::device::MAX_SGE + 3];
    let mut k = 0;
    let pos = c.out.pos;
    if let Some(f) = &c.out.ctl {
        iov[0].write(libc::iovec { iov_base: f[pos as usize..].as_ptr() as *mut libc::c_void, iov_len: f.len() - pos as usize });
        k = 1;
    } else {
        let mut skip = pos;
        let pre = c.out.pre_len as u64;
        if skip < pre {
            iov[0].write(libc::iovec { iov_base: c.out.pre[skip as usize..].as_ptr() as *mut libc::c_void, iov_len: (pre - skip) as usize });
            k = 1;
            skip = 0;
        } else {
            skip -= pre;
        }
        if skip < HDR as u64 {
            iov[k].write(libc::iovec { iov_base: c.out.hdr[skip as usize..].as_ptr() as *mut libc::c_void, iov_len: HDR - skip as usize });
            k += 1;
            skip = 0;
        } else {
            skip -= HDR as u64;
        }
        for &(a, l) in &c.out.segs {
            if skip >= l {
                skip -= l;
                continue;
            }
            iov[k].write(libc::iovec { iov_base: (a + skip) as *mut libc::c_void, iov_len: (l - skip) as usize });
            skip = 0;
            k += 1;
        }
    }
    // SAFETY: iov[..k] were written above.
    let iov = unsafe { std::slice::from_raw_parts(iov.as_ptr() as *const libc::iovec, k) };
    if k == 0 {
        c.out.active = false;
        return Ok(true);
    }
    if c.shm_out {
        let Some(m) = &c.shm else { return Err(End::Protocol) };
        if pos == 0 && c.ring_pad {
            // Between frames: the only place a wrap may go.
            m.tx.wrap_early(c.out.total as usize);
        }
        let mut n = 0u64;
        // Piece by piece, each published as it goes in (`shm::PIECE`).
        'iovs: for v in iov {
            let mut done = 0;
            while done < v.iov_len {
                let want = (v.iov_len - done).min(shm::PIECE);
                // SAFETY: as for sendmsg below: our header, or local segments
                // checked against their keys; `done` is within the iovec.
                let put = unsafe { m.tx.push((v.iov_base as *const u8).add(done), want) };
                n += put as u64;
                done += put;
                if put < want {
                    break 'iovs;
                }
            }
        }
        if n > 0 {
            bell(c, false, None);
        }
        c.out.pos += n;
        if c.out.pos >= c.out.total {
            c.out.active = false;
            c.out.ctl = None;
            return Ok(true);
        }
        return Ok(false);
    }
    // SAFETY: all-zero msghdr, then iovecs over our header and local
    // segments checked against their keys; they outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = k;
    let flags = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT | if more { libc::MSG_MORE } else { 0 };
    // SAFETY: sending on our socket; MSG_NOSIGNAL so a dead peer is an error, not SIGPIPE.
    let n = unsafe { libc::sendmsg(c.fd, &msg, flags) };
    if n < 0 {
        return match errno() {
            libc::EAGAIN | libc::EINTR => Ok(false),
            e => Err(End::Lost(e)),
        };
    }
    c.out.pos += n as u64;
    if c.out.pos >= c.out.total {
        c.out.active = false;
        c.out.ctl = None;
        return Ok(true);
    }
    Ok(false)
}
