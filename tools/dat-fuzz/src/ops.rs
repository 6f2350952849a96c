//! The calls a sequence is made of, and how they are generated.
//!
//! Handles are not values but selectors (`Sel`) resolved against the
//! sequence's own record of what it has created and freed, so a shrunk
//! sequence still names real objects and every kind of bad handle stays
//! reachable: NULL, freed, of the wrong type, of the other IA, garbage.
//! `Sel::Fit` asks for a live object that also suits the call (an EVD with
//! the stream flag the argument needs, an EP in a state the call accepts,
//! objects of the same IA): without it, calls that need several right
//! arguments at once (a connect, then an accept, then a post that reaches
//! the other side) would almost never line up.

use proptest::collection::vec;
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
pub enum Sel {
    /// The i-th live object of the wanted kind that suits the call.
    Fit(u8),
    /// The live object of the kind made last: what a consumer passes on most.
    Newest,
    /// The i-th live object of the kind the call wants (of any IA).
    Live(u8),
    /// The i-th freed object of that kind (a live one if none is freed).
    Freed(u8),
    /// The i-th object of any kind, live or freed: often the wrong type.
    Any(u8),
    Null,
    /// A pointer to readable random bytes.
    Garbage,
    /// This handle (made by a compound op from what it just created; never drawn).
    Exact(usize),
}

#[derive(Clone, Debug)]
pub struct Seg {
    pub lmr: Sel,
    pub offset: u32,
    pub len: u32,
    /// Use a random key instead of the LMR's.
    pub bad_key: Option<u32>,
}

/// Where an RDMA request points on the remote side.
#[derive(Clone, Copy, Debug)]
pub enum Key {
    /// An rkey of a live LMR that suits the request (its rights, the peer's PZ).
    Fit(u8),
    /// The rkey of the i-th LMR, live or freed (stale).
    Lmr(Sel),
    /// A context an RMR bind returned.
    Rmr(u8),
    /// A random key aimed at the read-only block.
    GarbageRo(u32),
    /// A random key aimed at the canary: registered, remote-writable memory whose key the sequence never uses.
    GarbageCanary(u32),
}

#[derive(Clone, Copy, Debug)]
pub struct Remote {
    pub key: Key,
    /// From the start of the key's region; may run outside it.
    pub offset: i32,
    pub len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostKind {
    Send,
    Recv,
    Read,
    Write,
    /// The IB extension's ops, through dat_extension_op.
    FetchAdd,
    CmpSwap,
    WriteImm,
}

/// A connection qualifier.
#[derive(Clone, Copy, Debug)]
pub enum Qual {
    /// One of the run's window of qualifiers (nothing else of this machine listens there).
    Window(u8),
    /// The qualifier of a PSP or RSP of the sequence (live or freed).
    Listening(u8),
    /// Any value: only on a target with no wire (the mock).
    Raw(u64),
}

#[derive(Clone, Copy, Debug)]
pub enum Addr {
    Loopback,
    Null,
    /// A sockaddr whose family is not IPv4/IPv6.
    BadFamily(u16),
}

/// Non-default EP attributes: each field default or drawn.
#[derive(Clone, Debug)]
pub struct EpAttr {
    pub service_ud: bool,
    pub max_message_size: Option<u32>,
    pub max_rdma_size: Option<u32>,
    pub recv_dtos: Option<i32>,
    pub request_dtos: Option<i32>,
    pub recv_iov: Option<i32>,
    pub request_iov: Option<i32>,
    pub rdma_in: Option<i32>,
    pub rdma_out: Option<i32>,
    pub request_flags: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
pub enum Counters {
    Query,
    Start,
    Stop,
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
    CnoQuery(Sel),
    CnoWait { cno: Sel, timeout_us: u32 },
    EvdCreate { ia: Sel, qlen: i32, flags: u32, cno: Option<Sel> },
    EvdFree(Sel),
    EvdQuery(Sel),
    EvdDequeue(Sel),
    EvdWait { evd: Sel, timeout_us: u32, threshold: i32 },
    EvdResize(Sel, i32),
    EvdPostSe(Sel, u64),
    EvdEnable(Sel, bool),
    EvdUnwaitable(Sel, bool),
    EvdModifyCno(Sel, Option<Sel>),
    /// Waits on one EVD, then dequeues every live EVD of the sequence until empty.
    Drain { evd: Sel, timeout_us: u32 },
    /// What a consumer sets up before it connects, as one step of ordinary
    /// calls on IA `ia` (0 or 1): a PZ, a DTO EVD, a connection+CR EVD, an
    /// LMR over each memory block, an EP on them, and maybe a PSP.
    Scaffold { ia: u8, qlen: i32, offset: u32, psp: Option<u8> },
    /// A connected pair the way a consumer makes one, in ordinary calls: a
    /// scaffold on IA `a` with a PSP, one on IA `b`, `b`'s EP connects,
    /// the CR is waited for and accepted with `a`'s EP, and ESTABLISHED is
    /// waited for on both (each wait bounded). Random calls around it then
    /// meet connected EPs.
    Pair { a: u8, b: u8, qual: u8, qlen: i32, offset: u32, pdata: i32, apdata: i32 },
    LmrCreate { ia: Sel, pz: Sel, ro: bool, offset: u32, len: u32, privs: u32 },
    LmrFree(Sel),
    LmrQuery(Sel),
    LmrSync { ia: Sel, write: bool, segs: Vec<Seg> },
    RmrCreate(Sel),
    RmrFree(Sel),
    RmrQuery(Sel),
    RmrBind { rmr: Sel, lmr: Sel, ep: Sel, seg: Seg, privs: u32, flags: u32, cookie: u64 },
    EpCreate { ia: Sel, pz: Sel, recv: Sel, req: Sel, conn: Sel, srq: Option<Sel>, attr: Option<EpAttr> },
    EpModify { ep: Sel, mask: u32, pz: Sel, recv: Sel, req: Sel, conn: Sel, attr: EpAttr },
    EpFree(Sel),
    EpQuery(Sel),
    EpReset(Sel),
    EpStatus(Sel),
    EpRecvQuery(Sel),
    EpSetWatermark(Sel, i32, i32),
    EpConnect { ep: Sel, addr: Addr, qual: Qual, timeout: u32, pdata: i32 },
    EpDupConnect { ep: Sel, dup: Sel, timeout: u32, pdata: i32 },
    EpDisconnect(Sel, bool),
    Post { kind: PostKind, ep: Sel, segs: Vec<Seg>, count: Option<i32>, cookie: u64, flags: u32, remote: Remote, a: u64, b: u64 },
    SrqCreate { ia: Sel, pz: Sel, max_wr: i32, max_iov: i32, lw: i32 },
    SrqFree(Sel),
    SrqQuery(Sel),
    SrqResize(Sel, i32),
    SrqSetLw(Sel, i32),
    SrqPostRecv { srq: Sel, segs: Vec<Seg>, cookie: u64 },
    PspCreate { ia: Sel, qual: Qual, evd: Sel, provider_flag: bool },
    PspCreateAny { ia: Sel, evd: Sel, provider_flag: bool },
    PspFree(Sel),
    PspQuery(Sel),
    RspCreate { ia: Sel, qual: Qual, ep: Sel, evd: Sel },
    RspFree(Sel),
    RspQuery(Sel),
    CrAccept(Sel, Sel, i32),
    CrReject(Sel, i32),
    CrQuery(Sel),
    CrHandoff(Sel, Qual),
    SetContext(Sel, u64),
    GetContext(Sel),
    HandleType(Sel),
    /// dat_ib_query_counters / start / stop on any handle.
    ExtCounters { h: Sel, which: Counters, counter: i32, reset: bool },
    /// An IB extension op the providers do not implement (collectives), or no op at all.
    ExtUnsupported { h: Sel, op: i32 },
    /// dat_ib_open_query of the sequence's provider, then dat_ib_close_query or dat_ia_close.
    ExtOpenQuery { close_with_ia_close: bool },
    /// dat_ib_ud_cm_free / dat_ib_ud_ah_free with handles that are not UD resolutions.
    ExtUdFree { ep: Sel, cm: Sel, ah: bool },
}

/// What the target can do, which shifts the mix of calls.
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    /// Connections really form (the sock provider): qualifiers stay in the run's window.
    pub wire: bool,
}

fn sel(p: Profile) -> BoxedStrategy<Sel> {
    let fit = if p.wire { 12 } else { 4 };
    prop_oneof![
        fit => any::<u8>().prop_map(Sel::Fit),
        2 => Just(Sel::Newest),
        8 => any::<u8>().prop_map(Sel::Live),
        2 => any::<u8>().prop_map(Sel::Freed),
        2 => any::<u8>().prop_map(Sel::Any),
        1 => Just(Sel::Null),
        1 => Just(Sel::Garbage),
    ]
    .boxed()
}

fn seg(p: Profile) -> impl Strategy<Value = Seg> {
    (sel(p), prop_oneof![3 => 0..64u32, 1 => any::<u32>()], prop_oneof![6 => 0..2048u32, 1 => 2048..4096u32, 1 => Just(0), 1 => any::<u32>()],
        prop::option::weighted(0.05, any::<u32>()))
        .prop_map(|(lmr, offset, len, bad_key)| Seg { lmr, offset, len, bad_key })
}

fn segs(p: Profile) -> impl Strategy<Value = Vec<Seg>> {
    prop_oneof![6 => vec(seg(p), 1..4), 1 => vec(seg(p), 0..10)]
}

fn remote(p: Profile) -> impl Strategy<Value = Remote> {
    let key = prop_oneof![
        8 => any::<u8>().prop_map(Key::Fit),
        2 => sel(p).prop_map(Key::Lmr),
        1 => any::<u8>().prop_map(Key::Rmr),
        1 => any::<u32>().prop_map(Key::GarbageRo),
        1 => any::<u32>().prop_map(Key::GarbageCanary),
    ];
    (key, prop_oneof![6 => 0..256i32, 1 => -64..0i32, 1 => any::<i32>()], prop_oneof![6 => 0..4096u32, 1 => any::<u32>()])
        .prop_map(|(key, offset, len)| Remote { key, offset, len })
}

/// Small timeouts: a wait nobody will satisfy must end on its own.
fn timeout_us() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), 1..2000u32]
}

/// Connect timeouts: short, so a connect nobody answers ends inside the sequence; now and then none.
fn connect_timeout() -> impl Strategy<Value = u32> {
    prop_oneof![6 => 1000..300_000u32, 1 => Just(u32::MAX), 1 => any::<u32>()]
}

fn evd_flags() -> impl Strategy<Value = u32> {
    // DAT_EVD_{SOFTWARE,CR,DTO,CONNECTION,RMR_BIND,ASYNC}_FLAG: the mixes consumers use, any mix, junk bits now and then.
    prop_oneof![
        4 => prop::sample::select(vec![0x20u32, 0x40, 0x10, 0x20 | 0x80, 0x60, 0x70, 0x01]),
        4 => prop::sample::subsequence(vec![0x01u32, 0x10, 0x20, 0x40, 0x80, 0x100], 0..=6).prop_map(|v| v.into_iter().fold(0, |a, b| a | b)),
        1 => any::<u32>(),
    ]
}

fn flags() -> impl Strategy<Value = u32> {
    prop_oneof![4 => Just(0u32), 4 => 0u32..0x40, 1 => any::<u32>()]
}

fn qlen() -> impl Strategy<Value = i32> {
    prop_oneof![4 => 1..64i32, 1 => Just(0), 1 => any::<i32>()]
}

fn pdata() -> impl Strategy<Value = i32> {
    // Around the transports' limits (56 connect, 196 accept, 144 reject), and wild.
    prop_oneof![4 => 0..64i32, 2 => 130..200i32, 1 => any::<i32>()]
}

fn qual(p: Profile) -> BoxedStrategy<Qual> {
    if p.wire {
        prop_oneof![3 => any::<u8>().prop_map(Qual::Window), 4 => any::<u8>().prop_map(Qual::Listening)].boxed()
    } else {
        prop_oneof![2 => (0..8u8).prop_map(Qual::Window), 2 => any::<u8>().prop_map(Qual::Listening), 1 => any::<u64>().prop_map(Qual::Raw)].boxed()
    }
}

fn ep_attr() -> impl Strategy<Value = EpAttr> {
    let o = |s: BoxedStrategy<i32>| prop::option::weighted(0.3, s);
    (
        prop::bool::weighted(0.05),
        prop::option::weighted(0.2, prop_oneof![1..8192u32, any::<u32>()]),
        prop::option::weighted(0.2, prop_oneof![1..8192u32, any::<u32>()]),
        o(prop_oneof![0..8i32, 1..300i32, any::<i32>()].boxed()),
        o(prop_oneof![0..8i32, 1..300i32, any::<i32>()].boxed()),
        o(prop_oneof![0..6i32, any::<i32>()].boxed()),
        o(prop_oneof![0..6i32, any::<i32>()].boxed()),
        o(prop_oneof![0..8i32, any::<i32>()].boxed()),
        o(prop_oneof![0..8i32, any::<i32>()].boxed()),
        prop::option::weighted(0.2, prop_oneof![Just(0x04u32), 0..0x40u32]),
    )
        .prop_map(|(service_ud, max_message_size, max_rdma_size, recv_dtos, request_dtos, recv_iov, request_iov, rdma_in, rdma_out, request_flags)| EpAttr {
            service_ud,
            max_message_size,
            max_rdma_size,
            recv_dtos,
            request_dtos,
            recv_iov,
            request_iov,
            rdma_in,
            rdma_out,
            request_flags,
        })
}

fn addr() -> impl Strategy<Value = Addr> {
    prop_oneof![20 => Just(Addr::Loopback), 1 => Just(Addr::Null), 1 => any::<u16>().prop_map(Addr::BadFamily)]
}

pub fn op(p: Profile) -> BoxedStrategy<Op> {
    let s = || sel(p);
    let w = |mock: u32, wire: u32| if p.wire { wire } else { mock };
    let objects = prop_oneof![
        1 => s().prop_map(Op::IaQuery),
        1 => (s(), prop::bool::weighted(0.7)).prop_map(|(s, a)| Op::IaClose(s, a)),
        4 => s().prop_map(Op::PzCreate),
        1 => s().prop_map(Op::PzFree),
        1 => s().prop_map(Op::PzQuery),
        1 => s().prop_map(Op::CnoCreate),
        1 => s().prop_map(Op::CnoFree),
        1 => s().prop_map(Op::CnoQuery),
        1 => (s(), timeout_us()).prop_map(|(cno, timeout_us)| Op::CnoWait { cno, timeout_us }),
        7 => (s(), qlen(), evd_flags(), prop::option::weighted(0.1, s()))
            .prop_map(|(ia, qlen, flags, cno)| Op::EvdCreate { ia, qlen, flags, cno }),
        1 => s().prop_map(Op::EvdFree),
        1 => s().prop_map(Op::EvdQuery),
        3 => s().prop_map(Op::EvdDequeue),
        2 => (s(), timeout_us(), prop_oneof![1..4i32, any::<i32>()])
            .prop_map(|(evd, timeout_us, threshold)| Op::EvdWait { evd, timeout_us, threshold }),
        w(1, 12) => (s(), timeout_us()).prop_map(|(evd, timeout_us)| Op::Drain { evd, timeout_us }),
        w(1, 6) => (0..2u8, prop_oneof![4..64i32, 1..4i32], 0..60000u32, prop::option::weighted(0.5, any::<u8>()))
            .prop_map(|(ia, qlen, offset, psp)| Op::Scaffold { ia, qlen, offset, psp }),
        1 => (s(), qlen()).prop_map(|(s, q)| Op::EvdResize(s, q)),
        1 => (s(), any::<u64>()).prop_map(|(s, c)| Op::EvdPostSe(s, c)),
        1 => (s(), any::<bool>()).prop_map(|(s, b)| Op::EvdEnable(s, b)),
        1 => (s(), any::<bool>()).prop_map(|(s, b)| Op::EvdUnwaitable(s, b)),
        1 => (s(), prop::option::weighted(0.7, s())).prop_map(|(e, c)| Op::EvdModifyCno(e, c)),
        6 => (s(), s(), prop::bool::weighted(0.3), 0..65536u32, prop_oneof![1..8192u32, Just(0), any::<u32>()],
            prop_oneof![3 => Just(0x33u32), 1 => Just(0x33 | 0x40), 2 => flags()])
            .prop_map(|(ia, pz, ro, offset, len, privs)| Op::LmrCreate { ia, pz, ro, offset, len, privs }),
        1 => s().prop_map(Op::LmrFree),
        1 => s().prop_map(Op::LmrQuery),
        1 => (s(), any::<bool>(), vec(seg(p), 0..3)).prop_map(|(ia, write, segs)| Op::LmrSync { ia, write, segs }),
    ];
    let endpoints = prop_oneof![
        2 => s().prop_map(Op::RmrCreate),
        1 => s().prop_map(Op::RmrFree),
        1 => s().prop_map(Op::RmrQuery),
        2 => (s(), s(), s(), seg(p), prop_oneof![Just(0x22u32), Just(0x02), flags()], flags(), any::<u64>())
            .prop_map(|(rmr, lmr, ep, seg, privs, flags, cookie)| Op::RmrBind { rmr, lmr, ep, seg, privs, flags, cookie }),
        8 => (s(), s(), s(), s(), s(), prop::option::weighted(0.15, s()), prop::option::weighted(0.2, ep_attr()))
            .prop_map(|(ia, pz, recv, req, conn, srq, attr)| Op::EpCreate { ia, pz, recv, req, conn, srq, attr }),
        1 => (s(), prop_oneof![Just(0x780u32), Just(0x7fff_f000), any::<u32>()], s(), s(), s(), s(), ep_attr())
            .prop_map(|(ep, mask, pz, recv, req, conn, attr)| Op::EpModify { ep, mask, pz, recv, req, conn, attr }),
        1 => s().prop_map(Op::EpFree),
        1 => s().prop_map(Op::EpQuery),
        1 => s().prop_map(Op::EpReset),
        1 => s().prop_map(Op::EpStatus),
        1 => s().prop_map(Op::EpRecvQuery),
        1 => (s(), any::<i32>(), any::<i32>()).prop_map(|(e, a, b)| Op::EpSetWatermark(e, a, b)),
        5 => (s(), addr(), qual(p), connect_timeout(), pdata())
            .prop_map(|(ep, addr, qual, timeout, pdata)| Op::EpConnect { ep, addr, qual, timeout, pdata }),
        1 => (s(), s(), connect_timeout(), pdata()).prop_map(|(ep, dup, timeout, pdata)| Op::EpDupConnect { ep, dup, timeout, pdata }),
        2 => (s(), any::<bool>()).prop_map(|(s, a)| Op::EpDisconnect(s, a)),
        12 => (prop_oneof![6 => Just(PostKind::Send), 6 => Just(PostKind::Recv), 3 => Just(PostKind::Read), 4 => Just(PostKind::Write),
                1 => Just(PostKind::FetchAdd), 1 => Just(PostKind::CmpSwap), 1 => Just(PostKind::WriteImm)],
            s(), segs(p), prop::option::weighted(0.05, any::<i32>()), any::<u64>(), flags(), remote(p), any::<u64>(), any::<u64>())
            .prop_map(|(kind, ep, segs, count, cookie, flags, remote, a, b)| Op::Post { kind, ep, segs, count, cookie, flags, remote, a, b }),
    ];
    let others = prop_oneof![
        2 => (s(), s(), qlen(), prop_oneof![1..8i32, any::<i32>()], prop_oneof![0..8i32, any::<i32>()])
            .prop_map(|(ia, pz, max_wr, max_iov, lw)| Op::SrqCreate { ia, pz, max_wr, max_iov, lw }),
        1 => s().prop_map(Op::SrqFree),
        1 => s().prop_map(Op::SrqQuery),
        1 => (s(), qlen()).prop_map(|(s, n)| Op::SrqResize(s, n)),
        1 => (s(), prop_oneof![0..8i32, any::<i32>()]).prop_map(|(s, n)| Op::SrqSetLw(s, n)),
        2 => (s(), segs(p), any::<u64>()).prop_map(|(srq, segs, cookie)| Op::SrqPostRecv { srq, segs, cookie }),
        w(2, 4) => (s(), qual(p), s(), prop::bool::weighted(0.2))
            .prop_map(|(ia, qual, evd, provider_flag)| Op::PspCreate { ia, qual, evd, provider_flag }),
        w(1, 2) => (s(), s(), prop::bool::weighted(0.2)).prop_map(|(ia, evd, provider_flag)| Op::PspCreateAny { ia, evd, provider_flag }),
        1 => s().prop_map(Op::PspFree),
        1 => s().prop_map(Op::PspQuery),
        w(1, 2) => (s(), qual(p), s(), s()).prop_map(|(ia, qual, ep, evd)| Op::RspCreate { ia, qual, ep, evd }),
        1 => s().prop_map(Op::RspFree),
        1 => s().prop_map(Op::RspQuery),
        w(1, 6) => (s(), s(), pdata()).prop_map(|(c, e, n)| Op::CrAccept(c, e, n)),
        w(1, 2) => (s(), pdata()).prop_map(|(c, n)| Op::CrReject(c, n)),
        1 => s().prop_map(Op::CrQuery),
        1 => (s(), qual(p)).prop_map(|(c, q)| Op::CrHandoff(c, q)),
        1 => (s(), any::<u64>()).prop_map(|(s, c)| Op::SetContext(s, c)),
        1 => s().prop_map(Op::GetContext),
        1 => s().prop_map(Op::HandleType),
        1 => (s(), prop_oneof![Just(Counters::Query), Just(Counters::Start), Just(Counters::Stop)], prop_oneof![0..90i32, any::<i32>()], any::<bool>())
            .prop_map(|(h, which, counter, reset)| Op::ExtCounters { h, which, counter, reset }),
        1 => (s(), prop_oneof![6..=25i32, Just(1000), any::<i32>()]).prop_map(|(h, op)| Op::ExtUnsupported { h, op }),
        1 => any::<bool>().prop_map(|close_with_ia_close| Op::ExtOpenQuery { close_with_ia_close }),
        1 => (s(), s(), any::<bool>()).prop_map(|(ep, cm, ah)| Op::ExtUdFree { ep, cm, ah }),
    ];
    if p.wire {
        let pair = (0..2u8, 0..2u8, any::<u8>(), prop_oneof![8..64i32, 1..8i32], 0..60000u32, prop_oneof![8 => 0..57i32, 1 => any::<i32>()], prop_oneof![8 => 0..197i32, 1 => any::<i32>()])
            .prop_map(|(a, b, qual, qlen, offset, pdata, apdata)| Op::Pair { a, b, qual, qlen, offset, pdata, apdata });
        prop_oneof![3 => objects, 4 => endpoints, 2 => others, 1 => pair].boxed()
    } else {
        prop_oneof![3 => objects, 4 => endpoints, 2 => others].boxed()
    }
}

pub fn sequence(max: usize, p: Profile) -> impl Strategy<Value = Vec<Op>> {
    vec(op(p), 1..max)
}
