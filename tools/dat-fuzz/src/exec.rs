//! Runs one sequence against the registry and checks every call.

use crate::allowed::{is_allowed, name};
use crate::api::{Api, LIVE_KINDS, Live};
use crate::ops::{Op, PostKind, Sel, Seg};
use dat_abi::*;
use std::collections::BTreeSet;
use std::ffi::CString;
use std::mem::zeroed;
use std::ptr::{null, null_mut};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

pub static CALLS: AtomicU64 = AtomicU64::new(0);
/// Distinct (call, return type) pairs seen: the fuzzer's coverage measure of the API's outcomes.
pub static OUTCOMES: Mutex<BTreeSet<(&'static str, u32)>> = Mutex::new(BTreeSet::new());
/// What the sequence is doing now, for the watchdog's report.
pub static CURRENT: Mutex<String> = Mutex::new(String::new());
/// When the current call started (ms since the epoch), 0 between sequences.
pub static CALL_STARTED: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Ia,
    Pz,
    Cno,
    Evd,
    Lmr,
    Rmr,
    Ep,
    Srq,
    Psp,
    Rsp,
    Cr,
}

impl Kind {
    fn dat_type(self) -> DAT_HANDLE_TYPE {
        match self {
            Kind::Ia => DAT_HANDLE_TYPE_IA,
            Kind::Pz => DAT_HANDLE_TYPE_PZ,
            Kind::Cno => DAT_HANDLE_TYPE_CNO,
            Kind::Evd => DAT_HANDLE_TYPE_EVD,
            Kind::Lmr => DAT_HANDLE_TYPE_LMR,
            Kind::Rmr => DAT_HANDLE_TYPE_RMR,
            Kind::Ep => DAT_HANDLE_TYPE_EP,
            Kind::Srq => DAT_HANDLE_TYPE_SRQ,
            Kind::Psp => DAT_HANDLE_TYPE_PSP,
            Kind::Rsp => DAT_HANDLE_TYPE_RSP,
            Kind::Cr => DAT_HANDLE_TYPE_CR,
        }
    }
}

struct Obj {
    kind: Kind,
    h: DAT_HANDLE,
    ia: usize,
    alive: bool,
    /// For an LMR: its key and registered range.
    lkey: u32,
    addr: u64,
    len: u64,
}

/// What a selector resolved to, and whether the call must refuse it.
#[derive(Clone, Copy)]
struct Pick {
    h: DAT_HANDLE,
    /// Known not to be a live handle of the wanted kind.
    bad: bool,
    ia: Option<usize>,
    obj: Option<usize>,
}

const MEM: usize = 1 << 16;

pub struct Seq<'a> {
    api: &'a Api,
    objs: Vec<Obj>,
    garbage: Box<[u64; 16]>,
    mem: Vec<u8>,
    log: Vec<String>,
}

pub type Finding = String;

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl<'a> Seq<'a> {
    fn pick(&self, s: Sel, kind: Kind) -> Pick {
        let of_kind = |alive: bool| self.objs.iter().enumerate().filter(move |(_, o)| o.kind == kind && o.alive == alive).map(|(i, _)| i);
        let from = |i: usize| {
            let o = &self.objs[i];
            Pick { h: o.h, bad: !(o.alive && o.kind == kind), ia: Some(o.ia), obj: Some(i) }
        };
        let nth = |v: Vec<usize>, n: u8| (!v.is_empty()).then(|| from(v[n as usize % v.len()]));
        let null = Pick { h: null_mut(), bad: true, ia: None, obj: None };
        match s {
            Sel::Live(n) => nth(of_kind(true).collect(), n).unwrap_or(null),
            Sel::Freed(n) => nth(of_kind(false).collect(), n).or_else(|| nth(of_kind(true).collect(), n)).unwrap_or(null),
            Sel::Any(n) => nth((0..self.objs.len()).collect(), n).unwrap_or(null),
            Sel::Null => null,
            Sel::Garbage => Pick { h: self.garbage.as_ptr() as DAT_HANDLE, bad: true, ia: None, obj: None },
        }
    }

    fn add(&mut self, kind: Kind, h: DAT_HANDLE, ia: usize) -> usize {
        // A slot can be reused for a new object of its type: the old record no longer names a dead handle.
        self.objs.retain(|o| !(o.h == h && !o.alive));
        self.objs.push(Obj { kind, h, ia, alive: true, lkey: 0, addr: 0, len: 0 });
        self.objs.len() - 1
    }

    fn kill(&mut self, p: Pick) {
        if let Some(i) = p.obj {
            self.objs[i].alive = false;
        }
    }

    fn kill_ia(&mut self, ia: usize) {
        for o in self.objs.iter_mut().filter(|o| o.ia == ia) {
            o.alive = false;
        }
    }

    fn triplets(&self, segs: &[Seg]) -> Vec<DAT_LMR_TRIPLET> {
        segs.iter()
            .map(|s| {
                let p = self.pick(s.lmr, Kind::Lmr);
                let (key, addr, len) = p.obj.map_or((0, 0, 0), |i| (self.objs[i].lkey, self.objs[i].addr, self.objs[i].len));
                let off = if len == 0 { s.offset as u64 } else { s.offset as u64 % (len + 8) };
                DAT_LMR_TRIPLET { lmr_context: s.bad_key.unwrap_or(key), virtual_address: addr.wrapping_add(off), segment_length: s.len as _ }
            })
            .collect()
    }

    /// Checks one call's return: allowed for the call, and DAT_INVALID_HANDLE
    /// when its first handle is known bad.
    fn check(&mut self, call: &'static str, primary: Pick, r: DAT_RETURN) -> Result<(), Finding> {
        CALLS.fetch_add(1, Ordering::Relaxed);
        OUTCOMES.lock().unwrap().insert((call, r & DAT_TYPE_MASK));
        self.log.push(format!("{call} -> {}", name(r)));
        if !is_allowed(call, r) {
            return Err(format!("{call} returned {}, which the spec does not allow", name(r)));
        }
        if primary.bad && r & DAT_TYPE_MASK != DAT_INVALID_HANDLE {
            return Err(format!("{call} on a bad handle {:p} returned {}, not DAT_INVALID_HANDLE", primary.h, name(r)));
        }
        Ok(())
    }

    /// A call that takes two objects of different IAs must not succeed.
    fn same_ia(&self, call: &str, picks: &[Pick], r: DAT_RETURN) -> Result<(), Finding> {
        let ias: Vec<usize> = picks.iter().filter(|p| !p.h.is_null()).filter_map(|p| p.ia).collect();
        if r == DAT_SUCCESS && ias.windows(2).any(|w| w[0] != w[1]) {
            return Err(format!("{call} succeeded with handles of two IAs"));
        }
        if r == DAT_SUCCESS && picks.iter().any(|p| p.bad && !p.h.is_null()) {
            return Err(format!("{call} succeeded with a bad handle among its arguments"));
        }
        Ok(())
    }

    pub fn run(api: &'a Api, live: &Live, provider: &str, ops: &[Op]) -> Result<(), Finding> {
        let baseline = live.read();
        let mut seq = Seq { api, objs: Vec::new(), garbage: Box::new([0x5a5a_5a5a_5a5a_5a5a; 16]), mem: vec![0; MEM], log: Vec::new() };
        for (i, w) in seq.garbage.iter_mut().enumerate() {
            *w = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ops.len() as u64;
        }
        let name = CString::new(provider).unwrap();
        for ia in 0..2 {
            let (mut h, mut evd) = (null_mut(), null_mut());
            // SAFETY: a valid name and out-pointers.
            let r = unsafe { (api.dat_ia_openv)(name.as_ptr(), 8, &mut evd, &mut h, 2, 0, 0) };
            if r != DAT_SUCCESS {
                return Err(format!("dat_ia_open #{ia} returned {}", crate::allowed::name(r)));
            }
            seq.add(Kind::Ia, h, ia);
            seq.add(Kind::Evd, evd, ia);
        }
        let mut result = Ok(());
        for (i, op) in ops.iter().enumerate() {
            *CURRENT.lock().unwrap() = format!("call {i}: {op:?}");
            CALL_STARTED.store(now_ms(), Ordering::Release);
            if let Err(e) = seq.step(op) {
                result = Err(format!("call {i}: {op:?}\n  {e}"));
                break;
            }
        }
        // Closing each IA gives everything back, whatever state the sequence left.
        for ia in 0..2 {
            let p = seq.objs.iter().find(|o| o.kind == Kind::Ia && o.ia == ia && o.alive).map(|o| o.h);
            if let Some(h) = p {
                // SAFETY: a live IA handle.
                let r = unsafe { (api.dat_ia_close)(h, DAT_CLOSE_ABRUPT_FLAG) };
                CALLS.fetch_add(1, Ordering::Relaxed);
                if r != DAT_SUCCESS && result.is_ok() {
                    result = Err(format!("final abrupt dat_ia_close #{ia} returned {}", crate::allowed::name(r)));
                }
                seq.kill_ia(ia);
            }
        }
        CALL_STARTED.store(0, Ordering::Release);
        if result.is_ok() {
            // Every handle the sequence made is dead now; none may still answer to its type.
            for o in &seq.objs {
                let mut t: DAT_HANDLE_TYPE = 0;
                // SAFETY: handles are type-stable slots (or consumer IA numbers); the out-pointer is ours.
                let r = unsafe { (api.dat_get_handle_type)(o.h, &mut t) };
                CALLS.fetch_add(1, Ordering::Relaxed);
                if r & DAT_TYPE_MASK != DAT_INVALID_HANDLE {
                    result = Err(format!("after IA close, dat_get_handle_type on a {:?} handle returned {}", o.kind, crate::allowed::name(r)));
                    break;
                }
            }
        }
        let after = live.read();
        if result.is_ok() && after != baseline {
            let diff: Vec<String> = LIVE_KINDS.iter().zip(baseline.iter().zip(after.iter()))
                .filter(|(_, (b, a))| b != a).map(|(k, (b, a))| format!("{k} {b}->{a}")).collect();
            result = Err(format!("IA close left backend objects alive: {}", diff.join(", ")));
        }
        result.map_err(|e| format!("{e}\n  calls made: {}", seq.log.join("; ")))
    }

    fn step(&mut self, op: &Op) -> Result<(), Finding> {
        let api = self.api;
        // SAFETY (every call below): handles are whatever the selector chose, which is what the
        // fuzzer exists to pass; every pointer argument points to memory this sequence owns and
        // that outlives the call, with the size the prototype says.
        unsafe {
            match *op {
                Op::IaQuery(s) => {
                    let p = self.pick(s, Kind::Ia);
                    let (mut evd, mut ia_attr, mut pr_attr): (DAT_EVD_HANDLE, DAT_IA_ATTR, DAT_PROVIDER_ATTR) = (null_mut(), zeroed(), zeroed());
                    let r = (api.dat_ia_query)(p.h, &mut evd, DAT_IA_ALL as _, &mut ia_attr, DAT_PROVIDER_FIELD_ALL as _, &mut pr_attr);
                    self.check("dat_ia_query", p, r)
                }
                Op::IaClose(s, abrupt) => {
                    let p = self.pick(s, Kind::Ia);
                    let r = (api.dat_ia_close)(p.h, if abrupt { DAT_CLOSE_ABRUPT_FLAG } else { DAT_CLOSE_GRACEFUL_FLAG });
                    self.check("dat_ia_close", p, r)?;
                    if r == DAT_SUCCESS {
                        self.kill_ia(p.ia.unwrap());
                    }
                    Ok(())
                }
                Op::PzCreate(s) => {
                    let p = self.pick(s, Kind::Ia);
                    let mut h = null_mut();
                    let r = (api.dat_pz_create)(p.h, &mut h);
                    self.created("dat_pz_create", p, r, Kind::Pz, h)
                }
                Op::PzFree(s) => self.free("dat_pz_free", s, Kind::Pz, api.dat_pz_free),
                Op::PzQuery(s) => {
                    let p = self.pick(s, Kind::Pz);
                    let mut param: DAT_PZ_PARAM = zeroed();
                    let r = (api.dat_pz_query)(p.h, DAT_PZ_FIELD_ALL as _, &mut param);
                    self.check("dat_pz_query", p, r)
                }
                Op::CnoCreate(s) => {
                    let p = self.pick(s, Kind::Ia);
                    let mut h = null_mut();
                    let agent = DAT_OS_WAIT_PROXY_AGENT { instance_data: null_mut(), proxy_agent_func: None };
                    let r = (api.dat_cno_create)(p.h, agent, &mut h);
                    self.created("dat_cno_create", p, r, Kind::Cno, h)
                }
                Op::CnoFree(s) => self.free("dat_cno_free", s, Kind::Cno, api.dat_cno_free),
                Op::EvdCreate { ia, qlen, flags, cno } => {
                    let p = self.pick(ia, Kind::Ia);
                    let c = cno.map(|c| self.pick(c, Kind::Cno));
                    let mut h = null_mut();
                    let r = (api.dat_evd_create)(p.h, qlen, c.map_or(null_mut(), |c| c.h), flags as _, &mut h);
                    self.same_ia("dat_evd_create", &[p].into_iter().chain(c).collect::<Vec<_>>(), r)?;
                    self.created("dat_evd_create", p, r, Kind::Evd, h)
                }
                Op::EvdFree(s) => self.free("dat_evd_free", s, Kind::Evd, api.dat_evd_free),
                Op::EvdQuery(s) => {
                    let p = self.pick(s, Kind::Evd);
                    let mut param: DAT_EVD_PARAM = zeroed();
                    let r = (api.dat_evd_query)(p.h, DAT_EVD_FIELD_ALL as _, &mut param);
                    self.check("dat_evd_query", p, r)
                }
                Op::EvdDequeue(s) => {
                    let p = self.pick(s, Kind::Evd);
                    let mut e: DAT_EVENT = zeroed();
                    let r = (api.dat_evd_dequeue)(p.h, &mut e);
                    self.check("dat_evd_dequeue", p, r)
                }
                Op::EvdWait { evd, timeout_us, threshold } => {
                    let p = self.pick(evd, Kind::Evd);
                    let (mut e, mut n): (DAT_EVENT, DAT_COUNT) = (zeroed(), 0);
                    let r = (api.dat_evd_wait)(p.h, timeout_us, threshold, &mut e, &mut n);
                    self.check("dat_evd_wait", p, r)
                }
                Op::EvdResize(s, q) => {
                    let p = self.pick(s, Kind::Evd);
                    let r = (api.dat_evd_resize)(p.h, q);
                    self.check("dat_evd_resize", p, r)
                }
                Op::EvdPostSe(s, cookie) => {
                    let p = self.pick(s, Kind::Evd);
                    let mut e: DAT_EVENT = zeroed();
                    e.event_number = DAT_SOFTWARE_EVENT;
                    e.evd_handle = p.h;
                    e.event_data.software_event_data.pointer = cookie as DAT_PVOID;
                    let r = (api.dat_evd_post_se)(p.h, &e);
                    self.check("dat_evd_post_se", p, r)
                }
                Op::EvdEnable(s, on) => {
                    let p = self.pick(s, Kind::Evd);
                    let (call, f) = if on { ("dat_evd_enable", api.dat_evd_enable) } else { ("dat_evd_disable", api.dat_evd_disable) };
                    let r = f(p.h);
                    self.check(call, p, r)
                }
                Op::EvdUnwaitable(s, set) => {
                    let p = self.pick(s, Kind::Evd);
                    let (call, f) = if set { ("dat_evd_set_unwaitable", api.dat_evd_set_unwaitable) } else { ("dat_evd_clear_unwaitable", api.dat_evd_clear_unwaitable) };
                    let r = f(p.h);
                    self.check(call, p, r)
                }
                Op::LmrCreate { ia, pz, offset, len, privs } => {
                    let p = self.pick(ia, Kind::Ia);
                    let z = self.pick(pz, Kind::Pz);
                    // Regions stay inside our buffer: the provider may not be asked to register memory we don't own.
                    let offset = offset as usize % (MEM / 2);
                    let len = (len as usize).min(MEM - offset);
                    let region = DAT_REGION_DESCRIPTION { for_va: self.mem.as_mut_ptr().add(offset) as DAT_PVOID };
                    let (mut h, mut lkey, mut rkey, mut rlen, mut raddr) = (null_mut(), 0, 0, 0, 0);
                    let r = (api.dat_lmr_create)(p.h, DAT_MEM_TYPE_VIRTUAL, region, len as _, z.h, privs as _, DAT_VA_TYPE_VA,
                        &mut h, &mut lkey, &mut rkey, &mut rlen, &mut raddr);
                    self.same_ia("dat_lmr_create", &[p, z], r)?;
                    self.created("dat_lmr_create", p, r, Kind::Lmr, h)?;
                    if r == DAT_SUCCESS {
                        let o = self.objs.last_mut().unwrap();
                        (o.lkey, o.addr, o.len) = (lkey, raddr, rlen);
                    }
                    Ok(())
                }
                Op::LmrFree(s) => self.free("dat_lmr_free", s, Kind::Lmr, api.dat_lmr_free),
                Op::LmrQuery(s) => {
                    let p = self.pick(s, Kind::Lmr);
                    let mut param: DAT_LMR_PARAM = zeroed();
                    let r = (api.dat_lmr_query)(p.h, DAT_LMR_FIELD_ALL as _, &mut param);
                    self.check("dat_lmr_query", p, r)
                }
                Op::RmrCreate(s) => {
                    let p = self.pick(s, Kind::Pz);
                    let mut h = null_mut();
                    let r = (api.dat_rmr_create)(p.h, &mut h);
                    self.created("dat_rmr_create", p, r, Kind::Rmr, h)
                }
                Op::RmrFree(s) => self.free("dat_rmr_free", s, Kind::Rmr, api.dat_rmr_free),
                Op::RmrQuery(s) => {
                    let p = self.pick(s, Kind::Rmr);
                    let mut param: DAT_RMR_PARAM = zeroed();
                    let r = (api.dat_rmr_query)(p.h, DAT_RMR_FIELD_ALL as _, &mut param);
                    self.check("dat_rmr_query", p, r)
                }
                Op::RmrBind { rmr, lmr, ep, ref seg, privs, flags, cookie } => {
                    let p = self.pick(rmr, Kind::Rmr);
                    let l = self.pick(lmr, Kind::Lmr);
                    let e = self.pick(ep, Kind::Ep);
                    let t = self.triplets(std::slice::from_ref(seg));
                    let mut ctx = 0;
                    let r = (api.dat_rmr_bind)(p.h, l.h, t.as_ptr(), privs as _, DAT_VA_TYPE_VA, e.h, DAT_RMR_COOKIE { as_64: cookie },
                        flags as _, &mut ctx);
                    self.check("dat_rmr_bind", p, r)
                }
                Op::EpCreate { ia, pz, recv, req, conn, srq } => {
                    let p = self.pick(ia, Kind::Ia);
                    let picks = [self.pick(pz, Kind::Pz), self.pick(recv, Kind::Evd), self.pick(req, Kind::Evd), self.pick(conn, Kind::Evd)];
                    let mut h = null_mut();
                    let (call, r, s) = match srq {
                        None => ("dat_ep_create", (api.dat_ep_create)(p.h, picks[0].h, picks[1].h, picks[2].h, picks[3].h, null(), &mut h), None),
                        Some(s) => {
                            let s = self.pick(s, Kind::Srq);
                            ("dat_ep_create_with_srq", (api.dat_ep_create_with_srq)(p.h, picks[0].h, picks[1].h, picks[2].h, picks[3].h, s.h, null(), &mut h), Some(s))
                        }
                    };
                    // Not the connection EVD: a software queue, which the core lets IAs share (see dapl-core ep.rs).
                    let all: Vec<Pick> = [p].into_iter().chain(picks[..3].iter().copied()).chain(s).collect();
                    self.same_ia(call, &[picks[3]], r)?;
                    self.same_ia(call, &all, r)?;
                    self.created(call, p, r, Kind::Ep, h)
                }
                Op::EpFree(s) => self.free("dat_ep_free", s, Kind::Ep, api.dat_ep_free),
                Op::EpQuery(s) => {
                    let p = self.pick(s, Kind::Ep);
                    let mut param: DAT_EP_PARAM = zeroed();
                    let r = (api.dat_ep_query)(p.h, DAT_EP_FIELD_ALL as _, &mut param);
                    self.check("dat_ep_query", p, r)
                }
                Op::EpReset(s) => {
                    let p = self.pick(s, Kind::Ep);
                    let r = (api.dat_ep_reset)(p.h);
                    self.check("dat_ep_reset", p, r)
                }
                Op::EpStatus(s) => {
                    let p = self.pick(s, Kind::Ep);
                    let (mut st, mut a, mut b) = (0, 0, 0);
                    let r = (api.dat_ep_get_status)(p.h, &mut st, &mut a, &mut b);
                    self.check("dat_ep_get_status", p, r)
                }
                Op::EpConnect { ep, qual, timeout, pdata } => {
                    let p = self.pick(ep, Kind::Ep);
                    let mut addr: libc::sockaddr_in = zeroed();
                    addr.sin_family = libc::AF_INET as _;
                    addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
                    let mut buf = [0u8; 256];
                    // Sizes past our buffer go with a NULL pointer: the provider must refuse, not read.
                    let size = pdata;
                    let ptr = if (0..=256).contains(&pdata) { buf.as_mut_ptr() as DAT_PVOID } else { null_mut() };
                    let r = (api.dat_ep_connect)(p.h, &mut addr as *mut _ as DAT_IA_ADDRESS_PTR, qual, timeout, size, ptr,
                        DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
                    self.check("dat_ep_connect", p, r)
                }
                Op::EpDisconnect(s, abrupt) => {
                    let p = self.pick(s, Kind::Ep);
                    let r = (api.dat_ep_disconnect)(p.h, if abrupt { DAT_CLOSE_ABRUPT_FLAG } else { DAT_CLOSE_GRACEFUL_FLAG });
                    self.check("dat_ep_disconnect", p, r)
                }
                Op::Post { kind, ep, ref segs, count, cookie, flags, rkey, rlen } => {
                    let p = self.pick(ep, Kind::Ep);
                    let mut t = self.triplets(segs);
                    // Never claim more segments than the array holds: that would be our overread, not the provider's.
                    let n = count.map_or(t.len() as i32, |c| if c < 0 { c } else { c.min(t.len() as i32) });
                    let remote = DAT_RMR_TRIPLET { virtual_address: 0x1000, segment_length: rlen as _, rmr_context: rkey };
                    let c = DAT_DTO_COOKIE { as_64: cookie };
                    let tp = if t.is_empty() { null_mut() } else { t.as_mut_ptr() };
                    let (call, r) = match kind {
                        PostKind::Send => ("dat_ep_post_send", (api.dat_ep_post_send)(p.h, n, tp, c, flags as _)),
                        PostKind::Recv => ("dat_ep_post_recv", (api.dat_ep_post_recv)(p.h, n, tp, c, flags as _)),
                        PostKind::Read => ("dat_ep_post_rdma_read", (api.dat_ep_post_rdma_read)(p.h, n, tp, c, &remote, flags as _)),
                        PostKind::Write => ("dat_ep_post_rdma_write", (api.dat_ep_post_rdma_write)(p.h, n, tp, c, &remote, flags as _)),
                    };
                    self.check(call, p, r)
                }
                Op::SrqCreate { ia, pz, max_wr, max_iov, lw } => {
                    let p = self.pick(ia, Kind::Ia);
                    let z = self.pick(pz, Kind::Pz);
                    let mut attr = DAT_SRQ_ATTR { max_recv_dtos: max_wr, max_recv_iov: max_iov, low_watermark: lw };
                    let mut h = null_mut();
                    let r = (api.dat_srq_create)(p.h, z.h, &mut attr, &mut h);
                    self.same_ia("dat_srq_create", &[p, z], r)?;
                    self.created("dat_srq_create", p, r, Kind::Srq, h)
                }
                Op::SrqFree(s) => self.free("dat_srq_free", s, Kind::Srq, api.dat_srq_free),
                Op::SrqQuery(s) => {
                    let p = self.pick(s, Kind::Srq);
                    let mut param: DAT_SRQ_PARAM = zeroed();
                    let r = (api.dat_srq_query)(p.h, DAT_SRQ_FIELD_ALL as _, &mut param);
                    self.check("dat_srq_query", p, r)
                }
                Op::SrqPostRecv { srq, ref segs, cookie } => {
                    let p = self.pick(srq, Kind::Srq);
                    let mut t = self.triplets(segs);
                    let tp = if t.is_empty() { null_mut() } else { t.as_mut_ptr() };
                    let r = (api.dat_srq_post_recv)(p.h, t.len() as i32, tp, DAT_DTO_COOKIE { as_64: cookie });
                    self.check("dat_srq_post_recv", p, r)
                }
                Op::PspCreate { ia, qual, evd, provider_flag } => {
                    let p = self.pick(ia, Kind::Ia);
                    let e = self.pick(evd, Kind::Evd);
                    let mut h = null_mut();
                    let r = (api.dat_psp_create)(p.h, qual, e.h, if provider_flag { DAT_PSP_PROVIDER_FLAG } else { DAT_PSP_CONSUMER_FLAG }, &mut h);
                    self.same_ia("dat_psp_create", &[p, e], r)?;
                    self.created("dat_psp_create", p, r, Kind::Psp, h)
                }
                Op::PspFree(s) => self.free("dat_psp_free", s, Kind::Psp, api.dat_psp_free),
                Op::PspQuery(s) => {
                    let p = self.pick(s, Kind::Psp);
                    let mut param: DAT_PSP_PARAM = zeroed();
                    let r = (api.dat_psp_query)(p.h, DAT_PSP_FIELD_ALL as _, &mut param);
                    self.check("dat_psp_query", p, r)
                }
                Op::RspCreate { ia, qual, ep, evd } => {
                    let p = self.pick(ia, Kind::Ia);
                    let (x, e) = (self.pick(ep, Kind::Ep), self.pick(evd, Kind::Evd));
                    let mut h = null_mut();
                    let r = (api.dat_rsp_create)(p.h, qual, x.h, e.h, &mut h);
                    self.same_ia("dat_rsp_create", &[p, x, e], r)?;
                    self.created("dat_rsp_create", p, r, Kind::Rsp, h)
                }
                Op::RspFree(s) => self.free("dat_rsp_free", s, Kind::Rsp, api.dat_rsp_free),
                Op::CrAccept(c, e, n) => {
                    let p = self.pick(c, Kind::Cr);
                    let x = self.pick(e, Kind::Ep);
                    let mut buf = [0u8; 256];
                    let ptr = if (0..=256).contains(&n) { buf.as_mut_ptr() as DAT_PVOID } else { null_mut() };
                    let r = (api.dat_cr_accept)(p.h, x.h, n, ptr);
                    self.check("dat_cr_accept", p, r)
                }
                Op::CrReject(c, n) => {
                    let p = self.pick(c, Kind::Cr);
                    let mut buf = [0u8; 256];
                    let ptr = if (0..=256).contains(&n) { buf.as_mut_ptr() as DAT_PVOID } else { null_mut() };
                    let r = (api.dat_cr_reject)(p.h, n, ptr);
                    self.check("dat_cr_reject", p, r)
                }
                Op::CrQuery(s) => {
                    let p = self.pick(s, Kind::Cr);
                    let mut param: DAT_CR_PARAM = zeroed();
                    let r = (api.dat_cr_query)(p.h, DAT_CR_FIELD_ALL as _, &mut param);
                    self.check("dat_cr_query", p, r)
                }
                Op::SetContext(s, v) => {
                    let p = self.any(s);
                    let r = (api.dat_set_consumer_context)(p.h, DAT_CONTEXT { as_64: v });
                    self.check("dat_set_consumer_context", p, r)
                }
                Op::GetContext(s) => {
                    let p = self.any(s);
                    let mut c: DAT_CONTEXT = zeroed();
                    let r = (api.dat_get_consumer_context)(p.h, &mut c);
                    self.check("dat_get_consumer_context", p, r)
                }
                Op::HandleType(s) => {
                    let p = self.any(s);
                    let mut t: DAT_HANDLE_TYPE = 0;
                    let r = (api.dat_get_handle_type)(p.h, &mut t);
                    self.check("dat_get_handle_type", p, r)?;
                    if let (DAT_SUCCESS, Some(i)) = (r, p.obj) {
                        let want = self.objs[i].kind.dat_type();
                        if t != want {
                            return Err(format!("dat_get_handle_type said {t} for a {:?} (type {want})", self.objs[i].kind));
                        }
                    }
                    Ok(())
                }
            }
        }
    }

    /// For the calls on any handle: bad only when not a live object of some kind.
    fn any(&self, s: Sel) -> Pick {
        let choose = |alive: Option<bool>, n: u8| {
            let v: Vec<usize> = (0..self.objs.len()).filter(|&i| alive.is_none_or(|a| self.objs[i].alive == a)).collect();
            (!v.is_empty()).then(|| {
                let i = v[n as usize % v.len()];
                let o = &self.objs[i];
                Pick { h: o.h, bad: !o.alive, ia: Some(o.ia), obj: Some(i) }
            })
        };
        match s {
            Sel::Live(n) => choose(Some(true), n),
            Sel::Freed(n) => choose(Some(false), n),
            Sel::Any(n) => choose(None, n),
            Sel::Null | Sel::Garbage => None,
        }
        .unwrap_or_else(|| self.pick(s, Kind::Ia))
    }

    fn created(&mut self, call: &'static str, ia: Pick, r: DAT_RETURN, kind: Kind, h: DAT_HANDLE) -> Result<(), Finding> {
        self.check(call, ia, r)?;
        if r == DAT_SUCCESS {
            if h.is_null() {
                return Err(format!("{call} succeeded and returned a NULL handle"));
            }
            if self.objs.iter().any(|o| o.alive && o.h == h) {
                return Err(format!("{call} returned {h:p}, a handle that is still live"));
            }
            self.add(kind, h, ia.ia.unwrap_or(0));
        }
        Ok(())
    }

    fn free(&mut self, call: &'static str, s: Sel, kind: Kind, f: unsafe extern "C" fn(DAT_HANDLE) -> DAT_RETURN) -> Result<(), Finding> {
        let p = self.pick(s, kind);
        // SAFETY: see step: any handle is fair game for the provider to refuse.
        let r = unsafe { f(p.h) };
        self.check(call, p, r)?;
        if r == DAT_SUCCESS {
            self.kill(p);
        }
        Ok(())
    }
}
