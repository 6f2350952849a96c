//! A connection's input: bytes from its stream or ring into its buffer
//! (`fill`), payloads from there to where they go (`take_payload`), and
//! the checks and refusals of the peer's requests that need no engine.

use super::conn::{Conn, Dest, End, INBUF, InState, Resp, Then, errno};
use super::keys;
use super::qp::QpInner;
use super::tail;
use super::wire::{F_IMM, F_SOLICITED, HDR, Hdr, Nak, Op};
use dapl_core::backend::CompletionKind;
use dat_abi::{DAT_DTO_ERR_LOCAL_LENGTH, DAT_DTO_ERR_LOCAL_PROTECTION};
use std::sync::Arc;

pub(super) fn remote_ok(qp: &QpInner, rkey: u32, addr: u64, len: u64, need: u32) -> bool {
    keys::lookup_remote(rkey).is_some_and(|r| (r.qp == 0 || r.qp == qp.num) && r.allows(addr, len, need, qp.pd))
}

/// A by-reference RDMA request or send (on-node, cross-memory attach): the
/// rkey, or the receive, is checked for the data's length (`a`) here; the
/// payload is the initiator's segment list, and the bytes move once it has
/// arrived.
pub(super) fn by_reference(c: &mut Conn, qp: &Arc<QpInner>, op: Op, h: Hdr) -> Result<(), End> {
    let len = h.len as u64;
    if !c.cma_in || len % 16 != 0 || len > 16 * super::device::MAX_SGE as u64 || h.a > super::device::MAX_MSG as u64 {
        return Err(End::Protocol);
    }
    if op == Op::Send {
        // Into the receive it takes, as an inline send's payload would go.
        if !recv_segs(c, qp, h, h.a, len)? {
            return Ok(());
        }
        let then = Then::PullSend { wr_id: c.wqe.wr_id, len: h.a, solicited: h.flags & F_SOLICITED != 0 };
        c.pdata.clear();
        c.set_payload(len, Dest::Pdata, then);
        return Ok(());
    }
    let need = if op == Op::ReadReq { keys::REMOTE_READ } else { keys::REMOTE_WRITE };
    if !remote_ok(qp, h.rkey, h.addr, h.a, need) {
        return refuse(c, len, Nak::RemoteAccess);
    }
    let then = match op {
        Op::ReadReq => Then::Push { addr: h.addr, len: h.a },
        Op::WriteImm => {
            if !qp.take_recv(&mut c.wqe) {
                c.inp = InState::Stalled(h);
                return Ok(());
            }
            let imm = (h.flags & F_IMM != 0).then_some(h.imm);
            Then::Pull { addr: h.addr, len: h.a, recv: Some((c.wqe.wr_id, imm, h.flags & F_SOLICITED != 0)) }
        }
        _ => Then::Pull { addr: h.addr, len: h.a, recv: None },
    };
    c.pdata.clear();
    c.set_payload(len, Dest::Pdata, then);
    Ok(())
}

/// Takes the receive for a message of `len` bytes into `c.wqe` and its
/// segments, checked against their keys, into `c.segs`; true: placed.
/// false: none is posted (the frame, `h`, waits for one), or the message
/// is refused (a segment the receiver may not write, or too little room:
/// the receiver's error and the sender's, both QPs fail, and the frame's
/// `frame_len` payload bytes are dropped).
pub(super) fn recv_segs(c: &mut Conn, qp: &QpInner, h: Hdr, len: u64, frame_len: u64) -> Result<bool, End> {
    if !qp.take_recv(&mut c.wqe) {
        c.inp = InState::Stalled(h);
        return Ok(false);
    }
    c.segs.clear();
    let mut room = 0u64;
    let mut prot = false;
    for g in &c.wqe.sges {
        if g.len == 0 {
            continue;
        }
        if c.keys.allows(g.key, g.addr, g.len as u64, keys::LOCAL_WRITE, qp.pd) {
            c.segs.push((g.addr, g.len as u64));
        } else {
            prot = true;
        }
        room += g.len as u64;
    }
    if prot || len > room {
        let (mine, theirs) = if prot { (DAT_DTO_ERR_LOCAL_PROTECTION, Nak::RemoteOp) } else { (DAT_DTO_ERR_LOCAL_LENGTH, Nak::InvalidRequest) };
        qp.complete_recv(c.wqe.wr_id, mine, CompletionKind::Recv, 0, None, 0, false);
        refuse(c, frame_len, theirs)?;
        qp.fail();
        return Ok(false);
    }
    Ok(true)
}

/// The destination of an inline RDMA write of `len` bytes at `addr`
/// (checked): all but its last bytes in place, those into the side buffer,
/// stored by `finish_payload` once the rest is in (see `tail`).
pub(super) fn write_segs(c: &mut Conn, addr: u64, len: u64) {
    c.segs.clear();
    let k = tail::held(len);
    if len > k as u64 {
        c.segs.push((addr, len - k as u64));
    }
    if k > 0 {
        c.segs.push((c.held.as_mut_ptr() as u64, k as u64));
        c.tail_to = addr + len - k as u64;
        c.held_len = k;
    }
}

/// Refuses the peer's request: a NAK, its payload dropped, and every later
/// request of the peer dropped too (its QP fails on the NAK).
pub(super) fn refuse(c: &mut Conn, len: u64, why: Nak) -> Result<(), End> {
    c.resp.push_back(Resp::Nak(why as u8));
    c.refused = true;
    c.set_payload(len, Dest::Discard, Then::Nothing);
    Ok(())
}

/// Copies `bytes` over the segments, in order, starting `skip` bytes into
/// them (a payload that comes in two parts: the ring's wrap).
pub(super) fn scatter(segs: &[(u64, u64)], mut skip: usize, bytes: &[u8]) {
    let mut off = 0usize;
    for &(a, l) in segs {
        if off >= bytes.len() {
            break;
        }
        let l = l as usize;
        if skip >= l {
            skip -= l;
            continue;
        }
        let n = (l - skip).min(bytes.len() - off);
        // SAFETY: a local segment whose lkey was checked for local write at
        // post, `skip + n` within it.
        unsafe { std::ptr::copy_nonoverlapping(bytes[off..].as_ptr(), (a as *mut u8).add(skip), n) };
        off += n;
        skip = 0;
    }
}

/// The smallest payload `fill` leaves in the ring for `take_payload`.
const DIRECT_PAYLOAD: usize = 1024;

/// On a TCP stream, the size of a payload after which the stream counts as
/// one of large messages (`Conn::large_in`). When its reader waits for an
/// answer (it sent a request since the last frame came in, as a ping-pong
/// does: `Conn::answered`), its reads into the buffer take at most
/// `HEAD_READ` bytes, a header and the start of a payload, and the rest of
/// that payload, if `DIRECT_MIN_LARGE` or more, is read straight into its
/// destination. Reading the buffer's 64 KiB, a 64 KiB ping-pong over a veth
/// read each message into the buffer whole, in two reads, and copied it all
/// out again (`strace`: 2.0 reads and no `readv` a message; now a `read` of
/// 8 KiB and a `readv`, and one `read` that finds the stream empty, as
/// before); libfabric's tcp provider reads 9,000 bytes, then the rest into
/// place. Half round trip, mean µs, median of 8 alternating runs of 2,000
/// (cubic, pinned): 64 KiB 20.8 against 24.0 (libfabric 20.9), 256 KiB 49.9
/// against 50.8; 32 KiB, where the second system call costs what the copy
/// saves, stays as it was. A reader of a stream that only comes in keeps the
/// large reads, which take several frames a system call: short reads there
/// cost a 64 KiB stream (window 64) 17% of its bandwidth.
pub(super) const LARGE_IN: u64 = 48 * 1024;
const HEAD_READ: usize = 8 * 1024;
const DIRECT_MIN_LARGE: u64 = 2 * 1024;

/// Reads more of the stream into the connection's buffer. false: nothing now.
pub(super) fn fill(c: &mut Conn) -> Result<bool, End> {
    if c.start == c.end {
        c.start = 0;
        c.end = 0;
    } else if c.start > 0 && c.buf.len() - c.end < HDR {
        c.buf.copy_within(c.start..c.end, 0);
        c.end -= c.start;
        c.start = 0;
    }
    let mut room = c.buf.len() - c.end;
    if c.shm_in {
        let Some(m) = &c.shm else { return Ok(false) };
        // Before a frame with a payload of some size, its header alone: the
        // payload then goes from the ring to its destination as it comes
        // (`take_payload`), not through this buffer, which made a frame the
        // reader found in part two copies on this side (a 64 KiB ping-pong
        // published in pieces: 12.2 µs against 8.6 published whole).
        if c.end == 0 && matches!(c.inp, InState::Hdr) {
            let mut h = [0u8; HDR];
            if m.rx.peek(&mut h) && Hdr::decode(&h).len as usize >= DIRECT_PAYLOAD {
                room = HDR;
            }
        }
        // SAFETY: the free tail of our own buffer, `room` bytes.
        let n = unsafe { m.rx.pop(c.buf[c.end..].as_mut_ptr(), room) };
        if n > 0 && m.rx.must_ring_producer() {
            m.ring(c.fd);
        }
        c.end += n;
        return Ok(n > 0);
    }
    if c.large_in && c.answered {
        room = room.min(HEAD_READ);
    }
    if c.dry {
        // The last read came short: the socket is empty, and epoll says
        // when it is not (one system call saved per message).
        return Ok(false);
    }
    // SAFETY: reading into the free tail of our own buffer.
    let n = unsafe { libc::read(c.fd, c.buf[c.end..].as_mut_ptr() as *mut libc::c_void, room) };
    if n > 0 {
        c.end += n as usize;
        c.dry = (n as usize) < room;
        return Ok(true);
    }
    if n == 0 {
        return Err(End::Lost(0));
    }
    match errno() {
        libc::EAGAIN | libc::EINTR => Ok(false),
        e => Err(End::Lost(e)),
    }
}

/// Moves payload bytes to where they go: from the buffer, or for a large
/// remainder straight from the socket. false: nothing available now.
pub(super) fn take_payload(c: &mut Conn) -> Result<bool, End> {
    let InState::Payload { left, ref dest, .. } = c.inp else { return Ok(false) };
    let buffered = (c.end - c.start) as u64;
    if buffered > 0 {
        let n = buffered.min(left);
        let from = c.start;
        match dest {
            Dest::Discard => {}
            Dest::Pdata => c.pdata.extend_from_slice(&c.buf[from..from + n as usize]),
            Dest::Segs => {
                let mut done = 0u64;
                while done < n && c.seg < c.segs.len() {
                    let (a, l) = c.segs[c.seg];
                    let k = (l - c.seg_off).min(n - done);
                    // SAFETY: a destination checked against its key (local or
                    // remote write rights, and range) when the frame arrived.
                    unsafe { std::ptr::copy_nonoverlapping(c.buf[from + done as usize..].as_ptr(), (a + c.seg_off) as *mut u8, k as usize) };
                    done += k;
                    c.seg_off += k;
                    if c.seg_off == l {
                        c.seg += 1;
                        c.seg_off = 0;
                    }
                }
            }
        }
        c.start += n as usize;
        if let InState::Payload { left, .. } = &mut c.inp {
            *left -= n;
        }
        return Ok(true);
    }
    if c.shm_in && matches!(dest, Dest::Segs) && c.seg < c.segs.len() {
        // Straight from the ring into the destination (checked as below).
        let Some(m) = &c.shm else { return Ok(false) };
        let (a, l) = c.segs[c.seg];
        let want = (l - c.seg_off).min(left) as usize;
        // SAFETY: a destination checked against its key when the frame arrived.
        let n = unsafe { m.rx.pop((a + c.seg_off) as *mut u8, want) } as u64;
        if n == 0 {
            return Ok(false);
        }
        if m.rx.must_ring_producer() {
            m.ring(c.fd);
        }
        if let InState::Payload { left, .. } = &mut c.inp {
            *left -= n;
        }
        c.seg_off += n;
        if c.seg_off == l {
            c.seg += 1;
            c.seg_off = 0;
        }
        return Ok(true);
    }
    let direct_min = if c.large_in && c.awaited { DIRECT_MIN_LARGE } else { (INBUF / 4) as u64 };
    if left >= direct_min && matches!(dest, Dest::Segs) && !c.shm_in {
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 8];
        let mut k = 0;
        let mut want = left;
        let (mut s, mut off) = (c.seg, c.seg_off);
        while k < iov.len() && want > 0 && s < c.segs.len() {
            let (a, l) = c.segs[s];
            let n = (l - off).min(want);
            iov[k] = libc::iovec { iov_base: (a + off) as *mut libc::c_void, iov_len: n as usize };
            k += 1;
            want -= n;
            s += 1;
            off = 0;
        }
        // SAFETY: readv into destinations checked as above.
        let n = unsafe { libc::readv(c.fd, iov.as_ptr(), k as i32) };
        if n > 0 {
            let mut n = n as u64;
            if let InState::Payload { left, .. } = &mut c.inp {
                *left -= n;
            }
            while n > 0 {
                let (_, l) = c.segs[c.seg];
                let k = (l - c.seg_off).min(n);
                c.seg_off += k;
                n -= k;
                if c.seg_off == l {
                    c.seg += 1;
                    c.seg_off = 0;
                }
            }
            return Ok(true);
        }
        if n == 0 {
            return Err(End::Lost(0));
        }
        return match errno() {
            libc::EAGAIN | libc::EINTR => Ok(false),
            e => Err(End::Lost(e)),
        };
    }
    fill(c)
}

#[cfg(test)]
mod tests {
    use super::super::conn::Phase;
    use super::*;

    /// A connection on one end of a stream socketpair, and the other end.
    fn stream_conn() -> (Conn, i32) {
        let mut sv = [0i32; 2];
        // SAFETY: a socketpair into our array.
        assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0, sv.as_mut_ptr()) }, 0);
        // SAFETY: all-zero sockaddr_in is a valid (unused) peer address.
        (Conn::new(sv[0], 0, Phase::Open, true, unsafe { std::mem::zeroed() }), sv[1])
    }

    fn send_all(fd: i32, bytes: &[u8]) {
        // SAFETY: writing our own bytes.
        let n = unsafe { libc::write(fd, bytes.as_ptr() as *const libc::c_void, bytes.len()) };
        assert_eq!(n, bytes.len() as isize);
    }

    fn close(c: Conn, peer: i32) {
        // SAFETY: closing our socketpair (a Conn leaves its fd to `end`).
        unsafe {
            libc::close(c.fd);
            libc::close(peer);
        }
    }

    #[test]
    fn a_stream_of_large_messages_reads_a_little_then_straight_into_place() {
        let bytes: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        // Small messages so far: one read takes all that waits.
        let (mut c, peer) = stream_conn();
        send_all(peer, &bytes);
        assert!(fill(&mut c).unwrap());
        assert_eq!(c.end, bytes.len());
        close(c, peer);

        // Large ones: a header's worth and a little, then the remainder of
        // the payload goes straight to where it belongs.
        let (mut c, peer) = stream_conn();
        c.large_in = true;
        // A reader of a stream that only comes in: large reads.
        send_all(peer, &bytes);
        assert!(fill(&mut c).unwrap());
        assert_eq!(c.end, bytes.len());
        // One that sent a request since: a header's worth and a little.
        (c.start, c.end, c.dry, c.answered, c.awaited) = (0, 0, false, true, true);
        send_all(peer, &bytes);
        assert!(fill(&mut c).unwrap());
        assert_eq!(c.end, HEAD_READ);
        c.start = c.end;
        let mut dst = vec![0u8; bytes.len() - HEAD_READ];
        c.segs = vec![(dst.as_mut_ptr() as u64, dst.len() as u64)];
        c.set_payload(dst.len() as u64, Dest::Segs, Then::Nothing);
        while matches!(c.inp, InState::Payload { left, .. } if left > 0) {
            assert!(take_payload(&mut c).unwrap());
        }
        assert_eq!(c.end - c.start, 0, "the payload went through the buffer");
        assert!(dst == bytes[HEAD_READ..], "the payload's bytes differ");
        close(c, peer);
    }

    #[test]
    fn a_short_remainder_goes_straight_into_place_only_on_a_stream_of_large_messages() {
        for large in [false, true] {
            let (mut c, peer) = stream_conn();
            (c.large_in, c.awaited) = (large, true);
            let mut dst = vec![0u8; 4096];
            c.segs = vec![(dst.as_mut_ptr() as u64, dst.len() as u64)];
            c.set_payload(dst.len() as u64, Dest::Segs, Then::Nothing);
            send_all(peer, &[9u8; 4096]);
            assert!(take_payload(&mut c).unwrap());
            if large {
                assert_eq!((c.end, dst[4095]), (0, 9), "not read into place");
            } else {
                // Into the buffer, with whatever frames follow it.
                assert_eq!((c.end, dst[0]), (4096, 0), "not read into the buffer");
            }
            close(c, peer);
        }
    }
}
