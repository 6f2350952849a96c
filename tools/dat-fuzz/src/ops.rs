//! The calls a sequence is made of, and how they are generated.
//!
//! Handles are not values but selectors (`Sel`) resolved against the
//! sequence's own record of what it has created and freed, so a shrunk
//! sequence still names real objects and every kind of bad handle stays
//! reachable: NULL, freed, of the wrong type, of the other IA, garbage.

use proptest::collection::vec;
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
pub enum Sel {
    /// The i-th live object of the kind the call wants (of any IA).
    Live(u8),
    /// The i-th freed object of that kind (a live one if none is freed).
    Freed(u8),
    /// The i-th object of any kind, live or freed: often the wrong type.
    Any(u8),
    Null,
    /// A pointer to readable random bytes.
    Garbage,
}

#[derive(Clone, Debug)]
pub struct Seg {
    pub lmr: Sel,
    pub offset: u32,
    pub len: u32,
    /// Use a random key instead of the LMR's.
    pub bad_key: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
pub enum PostKind {
    Send,
    Recv,
    Read,
    Write,
}

#[derive(Clone, Debug)]
pub enum Op {
    IaQuery(Sel),
    IaClose(Sel, bool),
    PzCreate(Sel),
    PzFree(Sel),
    PzQuery(Sel),
    CnoCreate(Sel),
    CnoFree(Sel),
    EvdCreate { ia: Sel, qlen: i32, flags: u32, cno: Option<Sel> },
    EvdFree(Sel),
    EvdQuery(Sel),
    EvdDequeue(Sel),
    EvdWait { evd: Sel, timeout_us: u32, threshold: i32 },
    EvdResize(Sel, i32),
    EvdPostSe(Sel, u64),
    EvdEnable(Sel, bool),
    EvdUnwaitable(Sel, bool),
    LmrCreate { ia: Sel, pz: Sel, offset: u32, len: u32, privs: u32 },
    LmrFree(Sel),
    LmrQuery(Sel),
    RmrCreate(Sel),
    RmrFree(Sel),
    RmrQuery(Sel),
    RmrBind { rmr: Sel, lmr: Sel, ep: Sel, seg: Seg, privs: u32, flags: u32, cookie: u64 },
    EpCreate { ia: Sel, pz: Sel, recv: Sel, req: Sel, conn: Sel, srq: Option<Sel> },
    EpFree(Sel),
    EpQuery(Sel),
    EpReset(Sel),
    EpStatus(Sel),
    EpConnect { ep: Sel, qual: u64, timeout: u32, pdata: i32 },
    EpDisconnect(Sel, bool),
    Post { kind: PostKind, ep: Sel, segs: Vec<Seg>, count: Option<i32>, cookie: u64, flags: u32, rkey: u32, rlen: u32 },
    SrqCreate { ia: Sel, pz: Sel, max_wr: i32, max_iov: i32, lw: i32 },
    SrqFree(Sel),
    SrqQuery(Sel),
    SrqPostRecv { srq: Sel, segs: Vec<Seg>, cookie: u64 },
    PspCreate { ia: Sel, qual: u64, evd: Sel, provider_flag: bool },
    PspFree(Sel),
    PspQuery(Sel),
    RspCreate { ia: Sel, qual: u64, ep: Sel, evd: Sel },
    RspFree(Sel),
    CrAccept(Sel, Sel, i32),
    CrReject(Sel, i32),
    CrQuery(Sel),
    SetContext(Sel, u64),
    GetContext(Sel),
    HandleType(Sel),
}

fn sel() -> impl Strategy<Value = Sel> {
    prop_oneof![
        12 => any::<u8>().prop_map(Sel::Live),
        2 => any::<u8>().prop_map(Sel::Freed),
        2 => any::<u8>().prop_map(Sel::Any),
        1 => Just(Sel::Null),
        1 => Just(Sel::Garbage),
    ]
}

fn seg() -> impl Strategy<Value = Seg> {
    (sel(), prop_oneof![0..64u32, any::<u32>()], prop_oneof![0..4096u32, Just(0), any::<u32>()], prop::option::weighted(0.1, any::<u32>()))
        .prop_map(|(lmr, offset, len, bad_key)| Seg { lmr, offset, len, bad_key })
}

fn segs() -> impl Strategy<Value = Vec<Seg>> {
    vec(seg(), 0..10)
}

/// Small timeouts: a wait nobody will satisfy must end on its own.
fn timeout_us() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), 1..2000u32]
}

fn evd_flags() -> impl Strategy<Value = u32> {
    // DAT_EVD_{SOFTWARE,CR,DTO,CONNECTION,RMR_BIND,ASYNC}_FLAG, in any mix, and junk bits now and then.
    prop_oneof![
        8 => prop::sample::subsequence(vec![0x01u32, 0x10, 0x20, 0x40, 0x80, 0x100], 0..=6).prop_map(|v| v.into_iter().fold(0, |a, b| a | b)),
        1 => any::<u32>(),
    ]
}

fn flags() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..0x20, 1 => any::<u32>()]
}

fn qlen() -> impl Strategy<Value = i32> {
    prop_oneof![4 => 1..64i32, 1 => Just(0), 1 => any::<i32>()]
}

pub fn op() -> impl Strategy<Value = Op> {
    let objects = prop_oneof![
        1 => sel().prop_map(Op::IaQuery),
        1 => (sel(), any::<bool>()).prop_map(|(s, a)| Op::IaClose(s, a)),
        4 => sel().prop_map(Op::PzCreate),
        1 => sel().prop_map(Op::PzFree),
        1 => sel().prop_map(Op::PzQuery),
        1 => sel().prop_map(Op::CnoCreate),
        1 => sel().prop_map(Op::CnoFree),
        5 => (sel(), qlen(), evd_flags(), prop::option::weighted(0.1, sel()))
            .prop_map(|(ia, qlen, flags, cno)| Op::EvdCreate { ia, qlen, flags, cno }),
        1 => sel().prop_map(Op::EvdFree),
        1 => sel().prop_map(Op::EvdQuery),
        3 => sel().prop_map(Op::EvdDequeue),
        2 => (sel(), timeout_us(), prop_oneof![1..4i32, any::<i32>()])
            .prop_map(|(evd, timeout_us, threshold)| Op::EvdWait { evd, timeout_us, threshold }),
        1 => (sel(), qlen()).prop_map(|(s, q)| Op::EvdResize(s, q)),
        1 => (sel(), any::<u64>()).prop_map(|(s, c)| Op::EvdPostSe(s, c)),
        1 => (sel(), any::<bool>()).prop_map(|(s, b)| Op::EvdEnable(s, b)),
        1 => (sel(), any::<bool>()).prop_map(|(s, b)| Op::EvdUnwaitable(s, b)),
        4 => (sel(), sel(), 0..8192u32, prop_oneof![1..8192u32, Just(0), any::<u32>()], prop_oneof![Just(0x33u32), flags()])
            .prop_map(|(ia, pz, offset, len, privs)| Op::LmrCreate { ia, pz, offset, len, privs }),
        1 => sel().prop_map(Op::LmrFree),
        1 => sel().prop_map(Op::LmrQuery),
    ];
    let endpoints = prop_oneof![
        2 => sel().prop_map(Op::RmrCreate),
        1 => sel().prop_map(Op::RmrFree),
        1 => sel().prop_map(Op::RmrQuery),
        1 => (sel(), sel(), sel(), seg(), flags(), flags(), any::<u64>())
            .prop_map(|(rmr, lmr, ep, seg, privs, flags, cookie)| Op::RmrBind { rmr, lmr, ep, seg, privs, flags, cookie }),
        6 => (sel(), sel(), sel(), sel(), sel(), prop::option::weighted(0.2, sel()))
            .prop_map(|(ia, pz, recv, req, conn, srq)| Op::EpCreate { ia, pz, recv, req, conn, srq }),
        1 => sel().prop_map(Op::EpFree),
        1 => sel().prop_map(Op::EpQuery),
        1 => sel().prop_map(Op::EpReset),
        1 => sel().prop_map(Op::EpStatus),
        3 => (sel(), any::<u64>(), prop_oneof![Just(u32::MAX), any::<u32>()], prop_oneof![0..64i32, any::<i32>()])
            .prop_map(|(ep, qual, timeout, pdata)| Op::EpConnect { ep, qual, timeout, pdata }),
        2 => (sel(), any::<bool>()).prop_map(|(s, a)| Op::EpDisconnect(s, a)),
        8 => (prop_oneof![Just(PostKind::Send), Just(PostKind::Recv), Just(PostKind::Read), Just(PostKind::Write)],
            sel(), segs(), prop::option::weighted(0.1, any::<i32>()), any::<u64>(), flags(), any::<u32>(), 0..8192u32)
            .prop_map(|(kind, ep, segs, count, cookie, flags, rkey, rlen)| Op::Post { kind, ep, segs, count, cookie, flags, rkey, rlen }),
    ];
    let others = prop_oneof![
        2 => (sel(), sel(), qlen(), prop_oneof![1..8i32, any::<i32>()], prop_oneof![0..8i32, any::<i32>()])
            .prop_map(|(ia, pz, max_wr, max_iov, lw)| Op::SrqCreate { ia, pz, max_wr, max_iov, lw }),
        1 => sel().prop_map(Op::SrqFree),
        1 => sel().prop_map(Op::SrqQuery),
        2 => (sel(), segs(), any::<u64>()).prop_map(|(srq, segs, cookie)| Op::SrqPostRecv { srq, segs, cookie }),
        2 => (sel(), 0..8u64, sel(), any::<bool>())
            .prop_map(|(ia, qual, evd, provider_flag)| Op::PspCreate { ia, qual, evd, provider_flag }),
        1 => sel().prop_map(Op::PspFree),
        1 => sel().prop_map(Op::PspQuery),
        1 => (sel(), 0..8u64, sel(), sel()).prop_map(|(ia, qual, ep, evd)| Op::RspCreate { ia, qual, ep, evd }),
        1 => sel().prop_map(Op::RspFree),
        1 => (sel(), sel(), prop_oneof![0..64i32, any::<i32>()]).prop_map(|(c, e, n)| Op::CrAccept(c, e, n)),
        1 => (sel(), prop_oneof![0..64i32, any::<i32>()]).prop_map(|(c, n)| Op::CrReject(c, n)),
        1 => sel().prop_map(Op::CrQuery),
        1 => (sel(), any::<u64>()).prop_map(|(s, c)| Op::SetContext(s, c)),
        1 => sel().prop_map(Op::GetContext),
        1 => sel().prop_map(Op::HandleType),
    ];
    prop_oneof![3 => objects, 4 => endpoints, 2 => others]
}

pub fn sequence(max: usize) -> impl Strategy<Value = Vec<Op>> {
    vec(op(), 1..max)
}
