//! UD endpoints over UDP: every UD QP has its own datagram socket on the
//! IA address; an address handle is the peer QP's socket address, learnt
//! through the connection manager's datagram resolution. A message is one
//! datagram (our 16-byte header, then the payload), so it is delivered
//! whole or not at all, as on InfiniBand. Receives get the 40 bytes a GRH
//! takes on a verbs UD QP first (zeroed), so buffers sized for verbs fit.

use super::device::UD_MTU;
use super::keys;
use super::qp::{QpInner, RTS, Sge};
use super::srq::RecvWqe;
use super::wire::{F_IMM, F_SOLICITED, UD_HDR, UdHdr};
use dapl_core::backend::{AhOps, CompletionKind};
use dat_abi::*;

/// Bytes a verbs UD receive reserves for the global route header.
pub const GRH: usize = 40;

/// Where a UD peer's QP takes datagrams.
#[derive(Clone, Copy)]
pub struct Path(pub libc::sockaddr_in);

pub struct Ah(Box<Path>);

impl Ah {
    pub fn new(p: Path) -> Ah {
        Ah(Box::new(p))
    }
}

impl AhOps for Ah {
    fn raw(&self) -> *mut libc::c_void {
        &*self.0 as *const Path as *mut libc::c_void
    }
}

/// Sends one datagram straight from the consumer's thread: one sendmsg,
/// and its completion at once (UD has no acknowledgement).
pub fn post_send(q: &QpInner, wr_id: u64, sges: &[Sge], dest: &DAT_IB_ADDR_HANDLE, imm: u32, signaled: bool, solicited: bool) -> Result<(), i32> {
    if !q.ud || dest.ah.is_null() {
        return Err(libc::EINVAL);
    }
    if sges.len() > q.send_sge {
        return Err(libc::EINVAL);
    }
    let done = |status| {
        if signaled || status != DAT_DTO_SUCCESS {
            q.send_cq.push(dapl_core::backend::Completion { wr_id, status, kind: CompletionKind::Send, qp_num: q.num, ..Default::default() }, false);
        }
        Ok(())
    };
    match q.state.load(std::sync::atomic::Ordering::Acquire) {
        RTS => {}
        super::qp::ERROR => return done(DAT_DTO_ERR_FLUSHED),
        _ => return Err(libc::EINVAL),
    }
    // SAFETY: a UD handle's ah is the address of one of our Paths (AhOps::raw).
    let path = unsafe { *(dest.ah as *const Path) };
    let hdr = UdHdr { src_qp: q.num, dst_qp: dest.qpn, imm, flags: (if solicited { F_SOLICITED } else { 0 }) as u32 }.encode();
    let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; super::device::MAX_SGE + 1];
    iov[0] = libc::iovec { iov_base: hdr.as_ptr() as *mut libc::c_void, iov_len: UD_HDR };
    let mut n = 1;
    let mut total = 0u64;
    for g in sges {
        if g.len == 0 {
            continue;
        }
        if !keys::lookup_local(g.key).is_some_and(|r| r.allows(g.addr, g.len as u64, 0, q.pd)) {
            return done(DAT_DTO_ERR_LOCAL_PROTECTION);
        }
        iov[n] = libc::iovec { iov_base: g.addr as *mut libc::c_void, iov_len: g.len as usize };
        n += 1;
        total += g.len as u64;
    }
    if total > UD_MTU as u64 {
        return done(DAT_DTO_ERR_LOCAL_LENGTH);
    }
    // SAFETY: all-zero msghdr, then our address and iovecs, which outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = &path.0 as *const _ as *mut libc::c_void;
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = n;
    // SAFETY: sendmsg on our socket with the message built above.
    let rc = unsafe { libc::sendmsg(q.udp, &msg, libc::MSG_DONTWAIT) };
    if rc < 0 {
        // A full socket buffer drops the datagram, as a congested fabric would.
        log::debug!("UD send from QP {}: {}", q.num, std::io::Error::last_os_error());
    }
    done(DAT_DTO_SUCCESS)
}

/// Takes datagrams waiting on a UD QP's socket into its posted receives.
/// Returns false when a datagram waits but no receive is posted (the
/// caller stops watching the socket until one is).
pub fn receive(q: &QpInner, wqe: &mut RecvWqe) -> bool {
    loop {
        let mut peek = [0u8; UD_HDR];
        // SAFETY: peeking into our buffer on our socket.
        let n = unsafe { libc::recv(q.udp, peek.as_mut_ptr() as *mut libc::c_void, UD_HDR, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        if n < 0 {
            return true;
        }
        if !q.is(RTS) {
            // A QP not running drops what arrives.
            // SAFETY: discarding one datagram into our buffer.
            unsafe { libc::recv(q.udp, peek.as_mut_ptr() as *mut libc::c_void, UD_HDR, libc::MSG_DONTWAIT) };
            continue;
        }
        if !q.take_recv(wqe) {
            return false;
        }
        // Scatter after the GRH room; check every buffer is ours to write.
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; super::device::MAX_SGE + 1];
        let mut hdr = [0u8; UD_HDR];
        iov[0] = libc::iovec { iov_base: hdr.as_mut_ptr() as *mut libc::c_void, iov_len: UD_HDR };
        let mut n_iov = 1;
        let mut skip = GRH as u64;
        let mut ok = true;
        let mut room = 0u64;
        for g in &wqe.sges {
            if g.len == 0 {
                continue;
            }
            if !keys::lookup_local(g.key).is_some_and(|r| r.allows(g.addr, g.len as u64, keys::LOCAL_WRITE, q.pd)) {
                ok = false;
                break;
            }
            room += g.len as u64;
            // SAFETY: zeroing the GRH room in a receive buffer the consumer registered for local write.
            let z = skip.min(g.len as u64);
            unsafe { std::ptr::write_bytes(g.addr as *mut u8, 0, z as usize) };
            skip -= z;
            if (g.len as u64) > z {
                iov[n_iov] = libc::iovec { iov_base: (g.addr + z) as *mut libc::c_void, iov_len: (g.len as u64 - z) as usize };
                n_iov += 1;
            }
        }
        // SAFETY: all-zero msghdr, then iovecs that outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = if ok && room >= GRH as u64 { n_iov } else { 1 };
        // SAFETY: receiving one datagram on our socket into the buffers above.
        let got = unsafe { libc::recvmsg(q.udp, &mut msg, libc::MSG_DONTWAIT) };
        if got < UD_HDR as isize {
            q.complete_recv(wqe.wr_id, DAT_DTO_ERR_LOCAL_LENGTH, CompletionKind::Recv, 0, None, 0, false);
            continue;
        }
        let h = UdHdr::decode(&hdr);
        let status = if !ok {
            DAT_DTO_ERR_LOCAL_PROTECTION
        } else if room < GRH as u64 || msg.msg_flags & libc::MSG_TRUNC != 0 {
            DAT_DTO_ERR_LOCAL_LENGTH
        } else {
            DAT_DTO_SUCCESS
        };
        let len = (got as usize - UD_HDR + GRH) as u32;
        let imm = (h.flags & F_IMM as u32 != 0).then_some(h.imm);
        q.complete_recv(wqe.wr_id, status, CompletionKind::Recv, len, imm, h.src_qp, h.flags & F_SOLICITED as u32 != 0);
    }
}
