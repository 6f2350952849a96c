//! Runs one sequence against the registry: the sequence's record of what it
//! made, how selectors resolve against it, the checks every call goes
//! through, and the end of a sequence (flush, lost completions, close,
//! leaks). The calls themselves are in `calls` (objects), `conn`
//! (connections and events) and `dto` (posts and their completions).

use crate::allowed::{is_allowed, name};
use crate::api::Api;
use crate::mem::Mem;
use crate::ops::{Op, PostKind, Qual, Sel};
use crate::target::{Leak, Target};
use dat_abi::*;
use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::ptr::null_mut;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub static CALLS: AtomicU64 = AtomicU64::new(0);
/// Distinct (call, return type) pairs seen: the fuzzer's coverage measure of the API's outcomes.
pub static OUTCOMES: Mutex<BTreeSet<(&'static str, u32)>> = Mutex::new(BTreeSet::new());
/// Distinct (event number, DTO status) pairs seen, the same measure for what comes back asynchronously.
pub static EVENTS: Mutex<BTreeSet<(u32, u32)>> = Mutex::new(BTreeSet::new());
/// What the sequence is doing now, for the watchdog's report.
pub static CURRENT: Mutex<String> = Mutex::new(String::new());
/// When the current call started (ms since the epoch), 0 between sequences.
pub static CALL_STARTED: AtomicU64 = AtomicU64::new(0);

/// Figures of what the connected layer reached.
pub struct Stats {
    pub established: AtomicU64,
    pub completions: AtomicU64,
    pub bytes_verified: AtomicU64,
    pub unverifiable: AtomicU64,
}

pub static STATS: Stats = Stats {
    established: AtomicU64::new(0),
    completions: AtomicU64::new(0),
    bytes_verified: AtomicU64::new(0),
    unverifiable: AtomicU64::new(0),
};

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Kind {
    #[default]
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
    pub fn dat_type(self) -> DAT_HANDLE_TYPE {
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

/// What the fuzzer believes of an EP's connection, from the calls it made
/// and the events it saw. Only used to choose arguments, never to judge.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum St {
    #[default]
    Idle,
    Pending,
    Up,
    Down,
}

/// One object the sequence made (or the provider made for it). Handles
/// are kept as addresses; which fields mean something depends on `kind`.
#[derive(Default, Debug)]
pub struct Obj {
    pub kind: Kind,
    pub h: usize,
    pub ia: usize,
    pub alive: bool,
    /// Dead, and its handle now names a newer object: no longer a "freed handle".
    pub reused: bool,
    // LMR: keys, registered range, rights, PZ.
    pub lkey: u32,
    pub rkey: u32,
    pub addr: u64,
    pub len: u64,
    pub privs: u32,
    pub pz: usize,
    // EVD: stream flags, queue length, whether completions may have been dropped for lack of room, its CNO.
    pub flags: u32,
    pub qlen: i32,
    pub overflow: bool,
    pub cno: usize,
    // EP: its EVDs and SRQ as the provider reports them, connection model, ports once connected.
    pub recv: usize,
    pub req: usize,
    pub conn: usize,
    pub srq: usize,
    pub st: St,
    pub tries: u32,
    pub est: u32,
    pub ud: bool,
    pub ports: (u64, u64),
    /// EP made by the provider for a PSP_PROVIDER_FLAG request.
    pub provider_made: bool,
    /// Reset after a connection attempt: private data of its queued events may be gone (DAT allows it).
    pub stale: bool,
    // PSP/RSP: qualifier and EVD (`flags` unused). CR: the service point in `pz`, its EP in `conn`.
    pub qual: u64,
    pub evd: usize,
    // RMR: the contexts its binds returned, and the last bound range.
    pub keys: Vec<u32>,
}

/// What a selector resolved to, and whether the call must refuse it.
#[derive(Clone, Copy, Debug)]
pub struct Pick {
    pub h: DAT_HANDLE,
    /// Known not to be a live handle of the wanted kind.
    pub bad: bool,
    pub ia: Option<usize>,
    pub obj: Option<usize>,
}

/// A request the provider accepted, until (and after) its completion.
#[derive(Debug)]
pub struct Post {
    pub kind: PostKind,
    pub ep: usize,
    /// The EP's record (a handle can name a newer EP once this one is gone).
    pub ep_obj: Option<usize>,
    /// For a receive posted to an SRQ: the SRQ (and `ep` 0).
    pub srq: usize,
    pub rmr: usize,
    /// The EVD its completion must come to (0: unknown).
    pub evd: usize,
    /// It must complete: signalled, and still owned when the sequence flushes.
    pub must: bool,
    /// Its EP was modified afterwards (the QP rebuilt): a pending completion may be dropped.
    pub forgiven: bool,
    /// Local segments: address, length, key; and whether each is known to be unusable.
    pub local: Vec<(u64, u64, u32)>,
    pub local_bad: Vec<bool>,
    pub total: u64,
    /// Remote address and key, and whether the access is known to be refused.
    pub remote: Option<(u64, u32)>,
    pub remote_bad: bool,
    /// Ranges of our memory this request may write.
    pub writes: Vec<(u64, u64)>,
    /// The bytes a send or RDMA write carries, read when it was posted.
    pub snapshot: Option<Vec<u8>>,
    /// An RDMA write's target when posted, to show a refused write left it alone.
    pub target_before: Option<Vec<u8>>,
    /// An atomic's target word when posted, and its operands.
    pub before: Option<u64>,
    pub a: u64,
    pub b: u64,
    pub posted: u64,
    pub done: Option<u64>,
    pub status: u32,
    /// A send whose bytes a receive was matched with.
    pub matched: bool,
}

pub type Finding = String;

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub fn hp(h: usize) -> DAT_HANDLE {
    h as DAT_HANDLE
}

pub struct Seq<'a> {
    pub api: &'a Api,
    pub target: Target,
    /// The run's qualifier window: base and count.
    pub quals: (u64, u64),
    pub objs: Vec<Obj>,
    pub garbage: Box<[u64; 16]>,
    pub mem: Mem,
    pub log: Vec<String>,
    /// Calls made so far in this sequence: the clock of `Post::posted`/`done`.
    pub step: u64,
    pub posts: Vec<Post>,
    pub cookies: HashMap<u64, usize>,
    /// RMR bind cookies: the RMR, and whether its completion came.
    pub binds: HashMap<u64, (usize, bool)>,
    /// Software events posted: pointer value -> (EVD, seen).
    pub software: HashMap<u64, (usize, bool)>,
    pub canary_rkey: u32,
    /// Connects that went out: qualifier and private data, to recognise their CRs.
    pub connects: Vec<(u64, Vec<u8>)>,
    /// Events observed so far in this sequence.
    pub seen: u64,
    /// CR handles handed off whose new arrival event has not come yet.
    pub handed_off: HashMap<usize, u32>,
}

impl<'a> Seq<'a> {
    pub fn pick(&self, s: Sel, kind: Kind) -> Pick {
        self.pick_fit(s, kind, |_| true)
    }

    /// Resolves a selector; `Fit` takes the live objects of `kind` that `fits`
    /// (falling back to any live one).
    pub fn pick_fit(&self, s: Sel, kind: Kind, fits: impl Fn(&Obj) -> bool) -> Pick {
        let of_kind = |alive: bool| self.objs.iter().enumerate().filter(move |(_, o)| o.kind == kind && o.alive == alive && !o.reused).map(|(i, _)| i);
        let from = |i: usize| {
            let o = &self.objs[i];
            Pick { h: hp(o.h), bad: (!o.alive || o.kind != kind) && !may_be_reused(o), ia: Some(o.ia), obj: Some(i) }
        };
        let nth = |v: Vec<usize>, n: u8| (!v.is_empty()).then(|| from(v[n as usize % v.len()]));
        let null = Pick { h: null_mut(), bad: true, ia: None, obj: None };
        match s {
            Sel::Fit(n) => nth(of_kind(true).filter(|&i| fits(&self.objs[i])).collect(), n)
                .or_else(|| nth(of_kind(true).collect(), n))
                .unwrap_or(null),
            Sel::Live(n) => nth(of_kind(true).collect(), n).unwrap_or(null),
            Sel::Newest => of_kind(true).next_back().map(from).unwrap_or(null),
            Sel::Freed(n) => nth(of_kind(false).collect(), n).or_else(|| nth(of_kind(true).collect(), n)).unwrap_or(null),
            Sel::Any(n) => nth((0..self.objs.len()).filter(|&i| !self.objs[i].reused).collect(), n).unwrap_or(null),
            Sel::Null => null,
            Sel::Garbage => Pick { h: self.garbage.as_ptr() as DAT_HANDLE, bad: true, ia: None, obj: None },
            Sel::Exact(h) => self.objs.iter().rposition(|o| o.h == h && o.kind == kind).map(from).unwrap_or(null),
        }
    }

    /// For the calls on any handle: bad only when not a live object of some kind.
    pub fn any(&self, s: Sel) -> Pick {
        let choose = |alive: Option<bool>, n: u8| {
            let v: Vec<usize> = (0..self.objs.len()).filter(|&i| !self.objs[i].reused && alive.is_none_or(|a| self.objs[i].alive == a)).collect();
            (!v.is_empty()).then(|| {
                let i = v[n as usize % v.len()];
                let o = &self.objs[i];
                Pick { h: hp(o.h), bad: !o.alive && !may_be_reused(o), ia: Some(o.ia), obj: Some(i) }
            })
        };
        match s {
            Sel::Live(n) | Sel::Fit(n) => choose(Some(true), n),
            Sel::Newest => choose(Some(true), u8::MAX),
            Sel::Freed(n) => choose(Some(false), n),
            Sel::Any(n) => choose(None, n),
            Sel::Null | Sel::Garbage | Sel::Exact(_) => None,
        }
        .unwrap_or_else(|| self.pick(s, Kind::Ia))
    }

    pub fn qual(&self, q: Qual) -> u64 {
        let (base, n) = self.quals;
        match q {
            Qual::Window(i) => base + i as u64 % n,
            Qual::Listening(i) => {
                let v: Vec<u64> = self.objs.iter().filter(|o| matches!(o.kind, Kind::Psp | Kind::Rsp)).map(|o| o.qual).collect();
                if v.is_empty() { base + i as u64 % n } else { v[i as usize % v.len()] }
            }
            Qual::Raw(v) => v,
        }
    }

    pub fn find(&self, h: usize, kind: Kind) -> Option<usize> {
        // The newest record first: a reused slot's old record may still be there, dead.
        self.objs.iter().rposition(|o| o.h == h && o.kind == kind)
    }

    pub fn find_live(&self, h: usize, kind: Kind) -> Option<usize> {
        self.objs.iter().position(|o| o.h == h && o.kind == kind && o.alive)
    }

    pub fn add(&mut self, kind: Kind, h: DAT_HANDLE, ia: usize) -> usize {
        let h = h as usize;
        // A slot can be reused for a new object of its type: the old record no longer names a dead
        // handle. It stays in place (picks hold indices into this list) but is never chosen again.
        for o in self.objs.iter_mut().filter(|o| o.h == h && !o.alive) {
            o.reused = true;
        }
        self.objs.push(Obj { kind, h, ia, alive: true, ..Default::default() });
        self.objs.len() - 1
    }

    pub fn kill(&mut self, p: Pick) {
        if let Some(i) = p.obj {
            self.objs[i].alive = false;
            if self.objs[i].kind == Kind::Evd {
                self.forget_software(self.objs[i].h);
            }
        }
    }

    pub fn kill_ia(&mut self, ia: usize) {
        let evds: Vec<usize> = self.objs.iter().filter(|o| o.ia == ia && o.alive && o.kind == Kind::Evd).map(|o| o.h).collect();
        for o in self.objs.iter_mut().filter(|o| o.ia == ia) {
            o.alive = false;
        }
        for h in evds {
            self.forget_software(h);
        }
    }

    /// A freed EVD's software events went with it; its handle can come back
    /// as a new EVD's (slots are reused), which must not be held to them.
    fn forget_software(&mut self, evd: usize) {
        self.software.retain(|_, (e, _)| *e != evd);
    }

    /// Checks one call's return: allowed for the call, and DAT_INVALID_HANDLE
    /// when its first handle is known bad.
    pub fn check(&mut self, call: &'static str, primary: Pick, r: DAT_RETURN) -> Result<(), Finding> {
        CALLS.fetch_add(1, Ordering::Relaxed);
        self.step += 1;
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
    pub fn same_ia(&self, call: &str, picks: &[Pick], r: DAT_RETURN) -> Result<(), Finding> {
        let ias: Vec<usize> = picks.iter().filter(|p| !p.h.is_null()).filter_map(|p| p.ia).collect();
        if r == DAT_SUCCESS && ias.windows(2).any(|w| w[0] != w[1]) {
            return Err(format!("{call} succeeded with handles of two IAs"));
        }
        if r == DAT_SUCCESS && picks.iter().any(|p| p.bad && !p.h.is_null()) {
            return Err(format!("{call} succeeded with a bad handle among its arguments"));
        }
        Ok(())
    }

    pub fn created(&mut self, call: &'static str, ia: Pick, r: DAT_RETURN, kind: Kind, h: DAT_HANDLE) -> Result<Option<usize>, Finding> {
        self.check(call, ia, r)?;
        if r != DAT_SUCCESS {
            return Ok(None);
        }
        if h.is_null() {
            return Err(format!("{call} succeeded and returned a NULL handle"));
        }
        if self.objs.iter().any(|o| o.alive && o.h == h as usize) {
            return Err(format!("{call} returned {h:p}, a handle that is still live"));
        }
        Ok(Some(self.add(kind, h, ia.ia.unwrap_or(0))))
    }

    pub fn free(&mut self, call: &'static str, s: Sel, kind: Kind, f: unsafe extern "C" fn(DAT_HANDLE) -> DAT_RETURN) -> Result<(), Finding> {
        let p = self.pick(s, kind);
        // SAFETY: any handle is fair game for the provider to refuse.
        let r = unsafe { f(p.h) };
        self.check(call, p, r)?;
        if r == DAT_SUCCESS {
            self.kill(p);
        }
        Ok(())
    }

    /// The read-only block and the canary are as they were.
    pub fn guarded(&self, when: &str) -> Result<(), Finding> {
        match self.mem.guarded_change() {
            None => Ok(()),
            Some((what, off, was, now)) => {
                let addr = match what {
                    "canary" => self.mem.canary().0 + off as u64,
                    _ => self.mem.ro().0 + off as u64,
                };
                let who: Vec<String> = self.posts.iter().filter(|p| p.writes.iter().any(|&(a, l)| addr >= a && addr - a < l))
                    .map(|p| format!("{:?} on {:#x} (remote {:?}, status {})", p.kind, p.ep, p.remote, p.status)).collect();
                Err(format!("{when}: byte {off} of the {what} changed ({was:#04x} -> {now:#04x}), which no registration lets anyone write; requests aimed there: {who:?}"))
            }
        }
    }

    pub fn run(api: &'a Api, leak: &Leak, target: Target, quals: (u64, u64), seed: u64, ops: &[Op]) -> Result<(), Finding> {
        let baseline = leak.read();
        let mut seq = Seq {
            api,
            target,
            quals,
            objs: Vec::new(),
            garbage: Box::new([0x5a5a_5a5a_5a5a_5a5a; 16]),
            mem: Mem::new(seed ^ ops.len() as u64),
            log: Vec::new(),
            step: 0,
            posts: Vec::new(),
            cookies: HashMap::new(),
            binds: HashMap::new(),
            software: HashMap::new(),
            canary_rkey: 0,
            connects: Vec::new(),
            seen: 0,
            handed_off: HashMap::new(),
        };
        for (i, w) in seq.garbage.iter_mut().enumerate() {
            *w = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ops.len() as u64;
        }
        let name = CString::new(target.name()).unwrap();
        for ia in 0..2 {
            let (mut h, mut evd) = (null_mut(), null_mut());
            // SAFETY: a valid name and out-pointers.
            let r = unsafe { (api.dat_ia_openv)(name.as_ptr(), 8, &mut evd, &mut h, 2, 0, 0) };
            if r != DAT_SUCCESS {
                return Err(format!("dat_ia_open #{ia} returned {}", name_of(r)));
            }
            seq.add(Kind::Ia, h, ia);
            let e = seq.add(Kind::Evd, evd, ia);
            (seq.objs[e].flags, seq.objs[e].qlen) = (DAT_EVD_ASYNC_FLAG, 8);
        }
        let mut result = seq.canary();
        for (i, op) in ops.iter().enumerate() {
            if result.is_err() {
                break;
            }
            *CURRENT.lock().unwrap() = format!("call {i}: {op:?}");
            CALL_STARTED.store(now_ms(), Ordering::Release);
            if let Err(e) = seq.step(op) {
                result = Err(format!("call {i}: {op:?}\n  {e}"));
            }
        }
        if result.is_ok() {
            *CURRENT.lock().unwrap() = "end of sequence: flush".into();
            CALL_STARTED.store(now_ms(), Ordering::Release);
            result = seq.flush().and_then(|()| seq.guarded("before the IAs closed"));
        }
        // Closing each IA gives everything back, whatever state the sequence left.
        *CURRENT.lock().unwrap() = "end of sequence: dat_ia_close".into();
        CALL_STARTED.store(now_ms(), Ordering::Release);
        for ia in 0..2 {
            let p = seq.objs.iter().find(|o| o.kind == Kind::Ia && o.ia == ia && o.alive).map(|o| o.h);
            if let Some(h) = p {
                // SAFETY: a live IA handle.
                let r = unsafe { (api.dat_ia_close)(hp(h), DAT_CLOSE_ABRUPT_FLAG) };
                CALLS.fetch_add(1, Ordering::Relaxed);
                if r != DAT_SUCCESS && result.is_ok() {
                    result = Err(format!("final abrupt dat_ia_close #{ia} returned {}", name_of(r)));
                }
                seq.kill_ia(ia);
            }
        }
        CALL_STARTED.store(0, Ordering::Release);
        if result.is_ok() {
            result = seq.guarded("after the IAs closed");
        }
        if result.is_ok() {
            // Every handle the sequence made is dead now; none may still answer to its type.
            for o in &seq.objs {
                let mut t: DAT_HANDLE_TYPE = 0;
                // SAFETY: handles are type-stable slots (or consumer IA numbers); the out-pointer is ours.
                let r = unsafe { (api.dat_get_handle_type)(hp(o.h), &mut t) };
                CALLS.fetch_add(1, Ordering::Relaxed);
                if r & DAT_TYPE_MASK != DAT_INVALID_HANDLE {
                    result = Err(format!("after IA close, dat_get_handle_type on a {:?} handle returned {}", o.kind, name_of(r)));
                    break;
                }
            }
        }
        if result.is_ok() && let Some(diff) = leak.compare(&baseline, target.settle()) {
            result = Err(format!("IA close left resources behind: {diff}"));
        }
        if std::env::var_os("DAT_FUZZ_TRACE").is_some() {
            println!("sequence: {}", seq.log.join("; "));
        }
        result.map_err(|e| format!("{e}\n  calls made: {}", seq.log.join("; ")))
    }

    /// The canary: remote-writable memory on a PZ of its own, whose rkey no request is given.
    fn canary(&mut self) -> Result<(), Finding> {
        let ia = self.objs[0].h;
        let (mut pz, mut lmr) = (null_mut(), null_mut());
        let (mut lkey, mut rkey, mut len, mut addr) = (0, 0, 0, 0);
        let (base, size) = self.mem.canary();
        // SAFETY: the IA just opened; the region is ours and outlives the IA.
        unsafe {
            let r = (self.api.dat_pz_create)(hp(ia), &mut pz);
            self.check("dat_pz_create", Pick { h: hp(ia), bad: false, ia: Some(0), obj: Some(0) }, r)?;
            let region = DAT_REGION_DESCRIPTION { for_va: base as DAT_PVOID };
            let r = (self.api.dat_lmr_create)(hp(ia), DAT_MEM_TYPE_VIRTUAL, region, size, pz, DAT_MEM_PRIV_ALL_FLAG as _,
                DAT_VA_TYPE_VA, &mut lmr, &mut lkey, &mut rkey, &mut len, &mut addr);
            self.check("dat_lmr_create", Pick { h: hp(ia), bad: false, ia: Some(0), obj: Some(0) }, r)?;
            if r != DAT_SUCCESS {
                return Err(format!("registering the canary failed: {}", name_of(r)));
            }
        }
        self.canary_rkey = rkey;
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), Finding> {
        match op {
            &Op::Scaffold { ia, qlen, offset, psp } => {
                let ia = Sel::Live(ia);
                // One of eight 8 KiB slots of each block: scaffolds share memory whole or not at all,
                // and the receives `pair` posts (the upper half) stay apart from what random
                // segments (mostly the lower half) touch, so their bytes can be compared.
                let offset = (offset % 8) * 8192;
                let mut ops = vec![
                    Op::PzCreate(ia),
                    Op::EvdCreate { ia, qlen, flags: DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, cno: None },
                    Op::EvdCreate { ia, qlen: 8, flags: DAT_EVD_CONNECTION_FLAG | DAT_EVD_CR_FLAG, cno: None },
                    Op::LmrCreate { ia, pz: Sel::Newest, ro: false, offset, len: 8192, privs: DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC },
                    Op::LmrCreate { ia, pz: Sel::Newest, ro: true, offset, len: 8192, privs: DAT_MEM_PRIV_ALL_FLAG },
                    Op::EpCreate { ia, pz: Sel::Newest, recv: Sel::Fit(0), req: Sel::Fit(0), conn: Sel::Fit(0), srq: None, attr: None },
                ];
                if let Some(q) = psp {
                    ops.push(Op::PspCreate { ia, qual: Qual::Window(q), evd: Sel::Newest, provider_flag: false });
                }
                ops.iter().try_for_each(|o| self.step(o))
            }
            &Op::Pair { a, b, qual, qlen, offset, pdata, apdata } => self.pair(a, b, qual, qlen, offset, pdata, apdata),
            Op::Post { .. } | Op::SrqPostRecv { .. } | Op::RmrBind { .. } => self.step_dto(op),
            Op::EpConnect { .. } | Op::EpDupConnect { .. } | Op::EpDisconnect(..) | Op::PspCreate { .. } | Op::PspCreateAny { .. }
            | Op::RspCreate { .. } | Op::CrAccept(..) | Op::CrReject(..) | Op::CrHandoff(..) | Op::CrQuery(..) | Op::EvdDequeue(_)
            | Op::EvdWait { .. } | Op::Drain { .. } | Op::CnoWait { .. } => self.step_conn(op),
            _ => self.step_objects(op),
        }
    }

    /// Drains every EVD until `done` holds or `limit` passes, sleeping in
    /// dat_evd_wait on the EVDs `on` (in turn) in between.
    fn drain_until(&mut self, limit: Duration, on: &[usize], done: impl Fn(&Self) -> bool) -> Result<bool, Finding> {
        let until = Instant::now() + limit;
        for round in 0.. {
            self.drain_all()?;
            if done(self) {
                return Ok(true);
            }
            let left = until.saturating_duration_since(Instant::now());
            let live: Vec<usize> = on.iter().copied().filter(|&h| self.find_live(h, Kind::Evd).is_some()).collect();
            if left.is_zero() || live.is_empty() {
                return Ok(false);
            }
            let h = live[round % live.len()];
            let p = self.pick(Sel::Exact(h), Kind::Evd);
            // SAFETY: DAT_EVENT is plain C data.
            let (mut e, mut n): (DAT_EVENT, DAT_COUNT) = (unsafe { std::mem::zeroed() }, 0);
            let us = left.min(Duration::from_millis(20)).as_micros() as u32;
            // SAFETY: a live EVD of this sequence and our event.
            let r = unsafe { (self.api.dat_evd_wait)(p.h, us, 1, &mut e, &mut n) };
            self.check("dat_evd_wait", p, r)?;
            if r == DAT_SUCCESS {
                self.observe(p, &e)?;
            }
        }
        unreachable!()
    }

    #[allow(clippy::too_many_arguments)]
    fn pair(&mut self, a: u8, b: u8, qual: u8, qlen: i32, offset: u32, pdata: i32, apdata: i32) -> Result<(), Finding> {
        let newest_ep = |s: &Self| s.objs.iter().rev().find(|o| o.kind == Kind::Ep && o.alive).map(|o| o.h);
        let before = newest_ep(self);
        self.step(&Op::Scaffold { ia: a, qlen, offset, psp: Some(qual) })?;
        let Some(passive) = newest_ep(self).filter(|&h| Some(h) != before) else { return Ok(()) };
        let Some(psp) = self.objs.iter().rev().find(|o| o.kind == Kind::Psp && o.alive).map(|o| o.h) else { return Ok(()) };
        self.step(&Op::Scaffold { ia: b, qlen, offset: offset.wrapping_add(1), psp: None })?;
        let Some(active) = newest_ep(self).filter(|&h| h != passive) else { return Ok(()) };
        // The PSP's own qualifier (Raw: it is one of ours, whatever the target).
        let q = self.objs[self.find(psp, Kind::Psp).unwrap()].qual;
        self.step(&Op::EpConnect { ep: Sel::Exact(active), addr: crate::ops::Addr::Loopback, qual: Qual::Raw(q), timeout: 2_000_000, pdata })?;
        let pending = |s: &Self, h: usize| s.find_live(h, Kind::Ep).is_some_and(|i| s.objs[i].st == St::Pending);
        if !pending(self, active) {
            return Ok(());
        }
        let cr_for = |s: &Self| s.objs.iter().rev().find(|o| o.kind == Kind::Cr && o.alive && o.pz == psp).map(|o| o.h);
        let psp_evd = self.objs[self.find(psp, Kind::Psp).unwrap()].evd;
        if !self.drain_until(Duration::from_millis(500), &[psp_evd], |s| cr_for(s).is_some())? {
            return Ok(());
        }
        let cr = cr_for(self).unwrap();
        self.step(&Op::CrAccept(Sel::Exact(cr), Sel::Exact(passive), apdata))?;
        if !pending(self, passive) {
            return Ok(());
        }
        let up = |s: &Self, h: usize| s.find_live(h, Kind::Ep).is_some_and(|i| s.objs[i].st != St::Pending);
        let conns: Vec<usize> = [active, passive].iter().filter_map(|&h| self.find_live(h, Kind::Ep)).map(|i| self.objs[i].conn).collect();
        self.drain_until(Duration::from_millis(500), &conns, |s| up(s, active) && up(s, passive))?;
        // Receives waiting on both sides, as a consumer posts them, so sends that follow can land.
        for (k, ep) in [active, passive, active, passive].into_iter().enumerate() {
            let seg = crate::ops::Seg { lmr: Sel::Fit(0), offset: 4096 + (k as u32 / 2) * 2048, len: 2048, bad_key: None };
            let remote = crate::ops::Remote { key: crate::ops::Key::Fit(0), offset: 0, len: 0 };
            self.step(&Op::Post { kind: crate::ops::PostKind::Recv, ep: Sel::Exact(ep), segs: vec![seg], count: None,
                cookie: 0x7ec0_0000 + k as u64, flags: 0, remote, a: 0, b: 0 })?;
        }
        Ok(())
    }

    /// The end of a sequence: every EP is disconnected (abruptly) and reset,
    /// which must flush everything still posted; then the EVDs are drained
    /// until every request that had to complete did, or the settle time ran
    /// out. What is still missing then was lost.
    fn flush(&mut self) -> Result<(), Finding> {
        let api = self.api;
        // Service points first: an RSP holds its EP reserved (no disconnect, no reset), and a
        // PSP would keep making CRs.
        let sps: Vec<(usize, Kind)> = self.objs.iter().filter(|o| matches!(o.kind, Kind::Psp | Kind::Rsp) && o.alive).map(|o| (o.h, o.kind)).collect();
        for (h, kind) in sps {
            let (call, f) = if kind == Kind::Psp { ("dat_psp_free", api.dat_psp_free) } else { ("dat_rsp_free", api.dat_rsp_free) };
            // SAFETY: a live service point of this sequence.
            let r = unsafe { f(hp(h)) };
            self.check(call, Pick { h: hp(h), bad: false, ia: None, obj: None }, r)?;
        }
        let eps: Vec<usize> = self.objs.iter().filter(|o| o.kind == Kind::Ep && o.alive).map(|o| o.h).collect();
        for &h in &eps {
            // SAFETY: a live EP of this sequence.
            let r = unsafe { (api.dat_ep_disconnect)(hp(h), DAT_CLOSE_ABRUPT_FLAG) };
            self.check("dat_ep_disconnect", Pick { h: hp(h), bad: false, ia: None, obj: None }, r)?;
        }
        let deadline = Instant::now() + self.target.settle();
        // A disconnect in progress ends on the provider's event thread.
        let mut pending = eps.clone();
        while !pending.is_empty() && Instant::now() < deadline {
            let mut still = Vec::new();
            for &h in &pending {
                let mut st = 0;
                // SAFETY: a live EP; NULL for the optional outputs.
                let r = unsafe { (api.dat_ep_get_status)(hp(h), &mut st, null_mut(), null_mut()) };
                self.check("dat_ep_get_status", Pick { h: hp(h), bad: false, ia: None, obj: None }, r)?;
                if st == DAT_EP_STATE_DISCONNECT_PENDING || st == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING || st == DAT_EP_STATE_COMPLETION_PENDING {
                    still.push(h);
                }
            }
            pending = still;
            if !pending.is_empty() {
                self.drain_all()?;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for &h in &eps {
            // SAFETY: a live EP of this sequence.
            let r = unsafe { (api.dat_ep_reset)(hp(h)) };
            self.check("dat_ep_reset", Pick { h: hp(h), bad: false, ia: None, obj: None }, r)?;
            if let Some(i) = self.find_live(h, Kind::Ep) {
                self.objs[i].stale = true;
            }
        }
        loop {
            self.drain_all()?;
            let lost = self.lost();
            if lost.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let shown: Vec<String> = lost.iter().take(8).map(|s| s.to_string()).collect();
                return Err(format!("{} completions never came after the EPs were flushed: {}", lost.len(), shown.join("; ")));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Requests that had to complete by now and did not.
    fn lost(&self) -> Vec<String> {
        let evd_ok = |h: usize| self.find_live(h, Kind::Evd).is_some_and(|i| !self.objs[i].overflow);
        let mut out: Vec<String> = self.posts.iter()
            .filter(|p| p.must && !p.forgiven && p.done.is_none() && p.srq == 0 && p.rmr == 0 && p.ep_obj.is_some_and(|i| self.objs[i].alive) && evd_ok(p.evd))
            .map(|p| {
                let ep = self.find_live(p.ep, Kind::Ep).map(|i| &self.objs[i]);
                let mut st = 0;
                // SAFETY: a live EP of this sequence; NULL for the optional outputs.
                unsafe { (self.api.dat_ep_get_status)(hp(p.ep), &mut st, null_mut(), null_mut()) };
                format!("{:?} on EP {:#x} (state {st}, model {:?}, {} connects) posted at call {} to EVD {:#x}, {} segments",
                    p.kind, p.ep, ep.map(|o| o.st), ep.map_or(0, |o| o.tries), p.posted, p.evd, p.local.len())
            })
            .collect();
        out.extend(self.software.iter().filter(|(_, (e, seen))| !seen && evd_ok(*e)).map(|(v, (e, _))| format!("software event {v:#x} on EVD {e:#x}")));
        out
    }
}

pub fn name_of(r: DAT_RETURN) -> String {
    name(r)
}

/// A freed CR's slot can already hold a CR the CM thread made from a
/// connection request whose arrival event the model has not taken yet
/// (slots are reused for their type): its handle is not known to be bad.
fn may_be_reused(o: &Obj) -> bool {
    o.kind == Kind::Cr && !o.alive
}
