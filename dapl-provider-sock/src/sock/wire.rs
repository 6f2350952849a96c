//! The byte format on a connection's TCP stream and in a UD datagram.
//!
//! A stream carries frames: a fixed 40-byte header, little-endian, then
//! `len` payload bytes. The same framing serves the connection handshake
//! (REQ, REP, REJ, RTU, DISC, whose payload is the consumer's private
//! data) and the data path (requests from the initiator, responses from
//! the target). Requests are answered strictly in order, one response per
//! request (a cumulative ACK counts several), so the initiator matches
//! responses to its outstanding requests without sequence numbers. (On
//! the on-node path, ends that agreed on `F_ACKS` count ACKs in the
//! mapping instead of sending ACK frames: `shm::Ring::publish_acks`.)
//!
//! ```text
//!  0  op      u8     what the frame is (Op)
//!  1  flags   u8     SOLICITED, IMM, DATAGRAM, CONSUMER (per op)
//!  2  status  u8     a NAK's reason (Nak)
//!  3  -       u8     zero
//!  4  len     u32    payload bytes that follow
//!  8  imm     u32    immediate data; the QP number in REQ/REP
//! 12  rkey    u32    remote key of an RDMA or atomic request
//! 16  addr    u64    remote address of an RDMA or atomic request
//! 24  a       u64    compare/add operand; ACK count; atomic result; REQ magic; REP UDP port
//! 32  b       u64    swap operand; REQ read depths
//! ```
//!
//! A UD datagram is a 16-byte header (src QP, dst QP, imm, flags) then the
//! payload, one datagram per message.

pub const HDR: usize = 40;
pub const UD_HDR: usize = 16;

/// Marks the first frame of a connection as ours, and its version.
pub const MAGIC: u64 = 0x3154_4b43_4f53_5444; // "DTSOCKT1"

/// Private data larger than this in a handshake frame is a broken peer.
pub const MAX_CM_PDATA: u32 = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    Req = 1,
    Rep = 2,
    Rej = 3,
    Rtu = 4,
    Disc = 5,
    Send = 16,
    Write = 17,
    WriteImm = 18,
    ReadReq = 19,
    FetchAdd = 20,
    CmpSwap = 21,
    Ack = 32,
    ReadResp = 33,
    AtomicResp = 34,
    Nak = 35,
}

impl Op {
    pub fn from_u8(v: u8) -> Option<Op> {
        Some(match v {
            1 => Op::Req,
            2 => Op::Rep,
            3 => Op::Rej,
            4 => Op::Rtu,
            5 => Op::Disc,
            16 => Op::Send,
            17 => Op::Write,
            18 => Op::WriteImm,
            19 => Op::ReadReq,
            20 => Op::FetchAdd,
            21 => Op::CmpSwap,
            32 => Op::Ack,
            33 => Op::ReadResp,
            34 => Op::AtomicResp,
            35 => Op::Nak,
            _ => return None,
        })
    }
}

pub const F_SOLICITED: u8 = 1;
pub const F_IMM: u8 = 2;
/// REQ: a datagram (UD) address resolution, not a connection.
pub const F_DATAGRAM: u8 = 4;
/// REJ: the peer's consumer refused (its private data follows).
pub const F_CONSUMER: u8 = 8;
/// REP, RTU, beside F_CMA (the bit is F_CONSUMER's, which only a REJ
/// carries): the peer's sends may go by reference too, pulled by the
/// sender of this frame straight into the receive they take.
pub const F_CMA_SENDS: u8 = 8;
/// REQ: the last `shm::TRAILER` payload bytes are the requester's host
/// identity and the name of its shared mapping (not private data). REP:
/// the passive end took the mapping; both ends switch to it.
pub const F_SHM: u8 = 16;
/// REP, RTU: the sender can reach its peer's memory (cross-memory
/// attach), so the peer's RDMA requests may go by reference. A request:
/// its payload is the initiator's (address, length) list, `a` the length.
/// A READ response: the data was placed already, `a` bytes.
pub const F_CMA: u8 = 32;

/// REQ (with F_SHM), REP: the sender takes its peer's ACKs from a counter
/// in the mapping (`shm::Ring::publish_acks`) and counts its own there;
/// both ends do once the REP says so. A peer without it sends ACK frames.
pub const F_ACKS: u8 = 64;

/// REQ (with F_SHM), REP: the sender's reader follows an early wrap of the
/// ring it reads (`shm::Ring::wrap_early`); each end wraps the ring it
/// writes early only once its peer said so.
pub const F_PAD: u8 = 128;

/// Why a target refused a request; the initiator's completion status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Nak {
    /// Bad rkey, range or rights.
    RemoteAccess = 1,
    /// The message does not fit the receive, or the request is malformed.
    InvalidRequest = 2,
    /// The target could not complete it (its own memory is bad).
    RemoteOp = 3,
    /// The target could not reach the initiator's own segments (a
    /// by-reference request): the initiator's protection error.
    LocalProt = 4,
}

impl Nak {
    pub fn status(v: u8) -> dat_abi::DAT_DTO_COMPLETION_STATUS {
        match v {
            1 => dat_abi::DAT_DTO_ERR_REMOTE_ACCESS,
            2 | 3 => dat_abi::DAT_DTO_ERR_REMOTE_RESPONDER,
            4 => dat_abi::DAT_DTO_ERR_LOCAL_PROTECTION,
            _ => dat_abi::DAT_DTO_ERR_BAD_RESPONSE,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hdr {
    pub op: u8,
    pub flags: u8,
    pub status: u8,
    pub len: u32,
    pub imm: u32,
    pub rkey: u32,
    pub addr: u64,
    pub a: u64,
    pub b: u64,
}

impl Hdr {
    pub fn new(op: Op) -> Hdr {
        Hdr { op: op as u8, ..Default::default() }
    }

    /// A cumulative ACK of `n` messages.
    pub fn ack(n: u64) -> Hdr {
        Hdr { op: Op::Ack as u8, a: n, ..Default::default() }
    }

    pub fn encode(&self, out: &mut [u8; HDR]) {
        out[0] = self.op;
        out[1] = self.flags;
        out[2] = self.status;
        out[3] = 0;
        out[4..8].copy_from_slice(&self.len.to_le_bytes());
        out[8..12].copy_from_slice(&self.imm.to_le_bytes());
        out[12..16].copy_from_slice(&self.rkey.to_le_bytes());
        out[16..24].copy_from_slice(&self.addr.to_le_bytes());
        out[24..32].copy_from_slice(&self.a.to_le_bytes());
        out[32..40].copy_from_slice(&self.b.to_le_bytes());
    }

    /// The header in the first HDR bytes of `b` (fewer: an all-zero one,
    /// op 0, which no peer sends). One length check, then fixed offsets:
    /// a check per field cost every frame about 15 instructions.
    pub fn decode(b: &[u8]) -> Hdr {
        let Some(b) = b.first_chunk::<HDR>() else { return Hdr::default() };
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]]);
        Hdr {
            op: b[0],
            flags: b[1],
            status: b[2],
            len: u32_at(4),
            imm: u32_at(8),
            rkey: u32_at(12),
            addr: u64_at(16),
            a: u64_at(24),
            b: u64_at(32),
        }
    }

    /// A handshake frame with its private data, as one buffer.
    pub fn frame(&self, pdata: &[u8]) -> Vec<u8> {
        let mut h = *self;
        h.len = pdata.len() as u32;
        let mut out = vec![0u8; HDR + pdata.len()];
        let mut head = [0u8; HDR];
        h.encode(&mut head);
        out[..HDR].copy_from_slice(&head);
        out[HDR..].copy_from_slice(pdata);
        out
    }
}

/// The header of one UD datagram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdHdr {
    pub src_qp: u32,
    pub dst_qp: u32,
    pub imm: u32,
    pub flags: u32,
}

impl UdHdr {
    pub fn encode(&self) -> [u8; UD_HDR] {
        let mut o = [0u8; UD_HDR];
        o[0..4].copy_from_slice(&self.src_qp.to_le_bytes());
        o[4..8].copy_from_slice(&self.dst_qp.to_le_bytes());
        o[8..12].copy_from_slice(&self.imm.to_le_bytes());
        o[12..16].copy_from_slice(&self.flags.to_le_bytes());
        o
    }

    pub fn decode(b: &[u8; UD_HDR]) -> UdHdr {
        let at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        UdHdr { src_qp: at(0), dst_qp: at(4), imm: at(8), flags: at(12) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Hdr { op: Op::CmpSwap as u8, flags: F_IMM, status: 2, len: 7, imm: 9, rkey: 0xdead_beef, addr: 1 << 40, a: 3, b: u64::MAX };
        let mut b = [0u8; HDR];
        h.encode(&mut b);
        assert_eq!(Hdr::decode(&b), h);
        assert_eq!(Hdr::decode(&b[..HDR - 1]), Hdr::default(), "a short header read past its end");
        let u = UdHdr { src_qp: 1, dst_qp: 2, imm: 3, flags: 4 };
        assert_eq!(UdHdr::decode(&u.encode()), u);
        assert_eq!(Op::from_u8(Op::Nak as u8), Some(Op::Nak));
        assert_eq!(Op::from_u8(99), None);
    }
}
