//! Posts (sends, receives, RDMA, the extension's atomics and write with
//! immediate data, SRQ receives, RMR binds) and their completions.
//!
//! Every completion must name a cookie that was posted and not completed
//! yet, the EP it was posted on, the EVD it had to come to and the
//! operation posted. A request known to be unusable (a local segment
//! outside its LMR, of a freed LMR, of another PZ, without the right to
//! write; a remote key that names nothing live, a range outside its LMR, a
//! right its LMR lacks) must not complete successfully. When one
//! succeeds, the bytes are compared: a receive holds what some send of the
//! same length carried (the bytes read when that send was posted), an RDMA
//! write's target holds its source, an RDMA read's destination holds the
//! remote bytes, an atomic returns the old word and leaves the new one. A
//! write the target refused (`DAT_DTO_ERR_REMOTE_ACCESS`, or a key known
//! bad) leaves its target as it was. Memory another request may have
//! written meanwhile is not compared (counted as unverifiable): the
//! fuzzer keeps, for every request, which of its memory it may write and
//! from when to when.

use crate::calls::WRITE_PRIVS;
use crate::exec::{Finding, Kind, Obj, Post, STATS, Seq, St};
use crate::mem;
use crate::ops::{Key, Op, PostKind, Remote, Seg};
use dat_abi::*;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

fn overlaps(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    a.iter().any(|&(x, xl)| b.iter().any(|&(y, yl)| xl > 0 && yl > 0 && x < y.saturating_add(yl) && y < x.saturating_add(xl)))
}

/// Triplets for a post, (address, length, key) of each, and whether each is known unusable.
pub type Triplets = (Vec<DAT_LMR_TRIPLET>, Vec<(u64, u64, u32)>, Vec<bool>);

/// Pieces of one scatter list that overlap each other: what lands in the
/// first is overwritten by the second, so the list cannot be read back.
fn self_overlapping(r: &[(u64, u64)]) -> bool {
    (0..r.len()).any(|i| overlaps(&r[i..=i], &r[i + 1..]))
}

/// The first `n` bytes of a scatter list, as (address, length) pieces.
fn landing(local: &[(u64, u64, u32)], mut n: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(a, l, _) in local {
        if n == 0 {
            break;
        }
        if l == 0 {
            continue;
        }
        let take = l.min(n);
        out.push((a, take));
        n -= take;
    }
    out
}

fn word(b: &[u8]) -> u64 {
    u64::from_ne_bytes(b[..8].try_into().unwrap())
}

impl Seq<'_> {
    /// The live LMR registered under local key `key`.
    fn lmr_by_lkey(&self, key: u32) -> Option<&Obj> {
        self.objs.iter().find(|o| o.kind == Kind::Lmr && o.alive && o.lkey == key)
    }

    /// Triplets for `segs`, with (address, length, key) of each and whether
    /// each is known to be unusable for an EP on PZ `pz` (0: unknown) that
    /// needs to write through it (`write`).
    pub fn triplets(&self, segs: &[Seg], pz: usize, write: bool) -> Triplets {
        let mut t = Vec::new();
        let mut local = Vec::new();
        let mut bad = Vec::new();
        for s in segs {
            let p = self.pick_fit(s.lmr, Kind::Lmr, |o| (pz == 0 || o.pz == pz) && (!write || o.privs & WRITE_PRIVS != 0));
            let (key, addr, len) = p.obj.map_or((0, 0, 0), |i| (self.objs[i].lkey, self.objs[i].addr, self.objs[i].len));
            let off = if len == 0 { s.offset as u64 } else { s.offset as u64 % (len + 8) };
            let key = s.bad_key.unwrap_or(key);
            let (a, l) = (addr.wrapping_add(off), s.len as u64);
            t.push(DAT_LMR_TRIPLET { lmr_context: key, virtual_address: a, segment_length: s.len as _ });
            local.push((a, l, key));
            bad.push(l > 0 && self.local_bad(a, l, key, pz, write));
        }
        (t, local, bad)
    }

    fn local_bad(&self, a: u64, l: u64, key: u32, pz: usize, write: bool) -> bool {
        self.why_bad(a, l, key, pz, write).is_some()
    }

    /// Why a local segment is unusable, if it is.
    fn why_bad(&self, a: u64, l: u64, key: u32, pz: usize, write: bool) -> Option<String> {
        match self.lmr_by_lkey(key) {
            None => Some("no live LMR has that key".into()),
            Some(o) if a < o.addr || a - o.addr > o.len || l > o.len - (a - o.addr) => Some(format!("outside its LMR [{:#x}, +{})", o.addr, o.len)),
            Some(o) if pz != 0 && o.pz != pz => Some(format!("its LMR is on PZ {:#x}, the EP on {pz:#x}", o.pz)),
            Some(o) if write && o.privs & WRITE_PRIVS == 0 => Some(format!("its LMR's rights {:#x} do not let anything write", o.privs)),
            _ => None,
        }
    }

    /// Keys a remote access may legitimately use now: live LMRs' rkeys and live RMRs' contexts.
    fn live_rkey(&self, k: u32) -> bool {
        k == self.canary_rkey
            || self.objs.iter().any(|o| o.alive && ((o.kind == Kind::Lmr && o.rkey == k) || (o.kind == Kind::Rmr && o.keys.contains(&k))))
    }

    /// A key no live object answers to.
    fn dead_key(&self, mut k: u32) -> u32 {
        while self.live_rkey(k) {
            k = k.wrapping_mul(0x9e37_79b9) ^ 0x8000_0001;
        }
        k
    }

    /// The EP at the other end of EP `h`'s connection, if both ends reported their ports.
    fn peer_of(&self, h: usize) -> Option<&Obj> {
        let me = self.objs.iter().rev().find(|o| o.kind == Kind::Ep && o.h == h)?;
        if me.ports == (0, 0) {
            return None;
        }
        self.objs.iter().rev().find(|o| o.kind == Kind::Ep && o.h != h && o.ports == (me.ports.1, me.ports.0))
    }

    /// The remote triplet, its key and address, and whether the access is known to be refused.
    fn remote(&self, r: &Remote, kind: PostKind, ep: usize, size: u64) -> (DAT_RMR_TRIPLET, u64, u32, bool) {
        let need = match kind {
            PostKind::Read => DAT_MEM_PRIV_REMOTE_READ_FLAG,
            PostKind::FetchAdd | PostKind::CmpSwap => DAT_IB_MEM_PRIV_REMOTE_ATOMIC,
            _ => DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
        };
        let atomic = matches!(kind, PostKind::FetchAdd | PostKind::CmpSwap);
        let at = |base: u64, off: i64| {
            let a = base.wrapping_add(off as u64);
            if atomic && r.offset >= 0 { a & !7 } else { a }
        };
        let garbage_rw = || (self.dead_key(r.offset as u32 ^ 0x5bd1_e995), at(self.mem.base() + mem::RO as u64, (r.offset as i64).rem_euclid(mem::RW as i64)));
        let (key, va) = match r.key {
            Key::Fit(n) => {
                let peer_pz = self.peer_of(ep).map(|o| o.pz);
                let fits: Vec<&Obj> = self.objs.iter()
                    .filter(|o| o.kind == Kind::Lmr && o.alive && o.privs & need != 0 && peer_pz.is_none_or(|z| z == o.pz)).collect();
                let fits = if fits.is_empty() {
                    self.objs.iter().filter(|o| o.kind == Kind::Lmr && o.alive).collect()
                } else {
                    fits
                };
                match fits.get(n as usize % fits.len().max(1)) {
                    // Mostly inside the region: the offset wraps within it.
                    Some(o) => (o.rkey, at(o.addr, if o.len > size { (r.offset as i64).rem_euclid((o.len - size + 1) as i64) } else { r.offset as i64 })),
                    None => garbage_rw(),
                }
            }
            Key::Lmr(s) => match self.pick(s, Kind::Lmr).obj {
                Some(i) => (self.objs[i].rkey, at(self.objs[i].addr, r.offset as i64)),
                None => garbage_rw(),
            },
            Key::Rmr(n) => {
                let keys: Vec<(u32, u64)> = self.objs.iter().filter(|o| o.kind == Kind::Rmr).flat_map(|o| o.keys.iter().map(move |&k| (k, o.addr))).collect();
                match keys.get(n as usize % keys.len().max(1)) {
                    Some(&(k, a)) => (k, at(a, r.offset as i64)),
                    None => garbage_rw(),
                }
            }
            Key::GarbageRo(k) => (self.dead_key(k), at(self.mem.ro().0, (r.offset as i64).rem_euclid(mem::RO as i64))),
            Key::GarbageCanary(k) => (self.dead_key(k), at(self.mem.canary().0, (r.offset as i64).rem_euclid(mem::CANARY as i64))),
        };
        let bad = if !self.live_rkey(key) || key == self.canary_rkey {
            true
        } else if let Some(o) = self.objs.iter().find(|o| o.kind == Kind::Lmr && o.alive && o.rkey == key) {
            va < o.addr || va - o.addr > o.len || size > o.len - (va - o.addr) || o.privs & need == 0
        } else {
            false
        };
        (DAT_RMR_TRIPLET { rmr_context: key, virtual_address: va, segment_length: r.len }, va, key, bad)
    }

    fn unique_cookie(&self, mut c: u64) -> u64 {
        while self.cookies.contains_key(&c) || self.binds.contains_key(&c) {
            c = c.wrapping_add(0x9e37_79b9_7f4a_7c15);
        }
        c
    }

    /// Parts of ranges that lie in our memory (what a request may write there).
    fn ours(&self, ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let (lo, hi) = (self.mem.base(), self.mem.base() + mem::TOTAL as u64);
        ranges.iter().filter_map(|&(a, l)| {
            let s = a.max(lo);
            let e = a.saturating_add(l).min(hi);
            (s < e).then_some((s, e - s))
        }).collect()
    }

    fn gather(&self, ranges: &[(u64, u64)]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for &(a, l) in ranges {
            if l > 1 << 20 {
                return None;
            }
            out.extend(self.mem.read(a, l)?);
        }
        Some(out)
    }

    /// No request other than `me` could have written `ranges` between step `from` and now.
    fn clean(&self, ranges: &[(u64, u64)], from: u64, me: usize) -> bool {
        let now = self.step;
        self.posts.iter().enumerate().all(|(j, w)| j == me || w.posted > now || w.done.is_some_and(|d| d < from) || !overlaps(&w.writes, ranges))
    }

    /// Marks an EVD whose queue the requests routed to it could fill: what it drops then is no loss.
    fn may_fill(&mut self, evd: usize) {
        let pending = self.posts.iter().filter(|p| p.evd == evd && p.done.is_none()).count() as i32;
        if let Some(i) = self.find_live(evd, Kind::Evd) && pending + 4 > self.objs[i].qlen {
            self.objs[i].overflow = true;
        }
    }

    pub fn step_dto(&mut self, op: &Op) -> Result<(), Finding> {
        match *op {
            Op::Post { kind, ep, ref segs, count, cookie, flags, ref remote, a, b } => self.post(kind, ep, segs, count, cookie, flags, remote, a, b),
            Op::SrqPostRecv { srq, ref segs, cookie } => {
                let p = self.pick(srq, Kind::Srq);
                let pz = p.obj.map_or(0, |i| self.objs[i].pz);
                let (mut t, local, bad) = self.triplets(segs, pz, true);
                let cookie = self.unique_cookie(cookie);
                let tp = if t.is_empty() { null_mut() } else { t.as_mut_ptr() };
                // SAFETY: any handle; our triplets.
                let r = unsafe { (self.api.dat_srq_post_recv)(p.h, t.len() as i32, tp, DAT_DTO_COOKIE { as_64: cookie }) };
                self.check("dat_srq_post_recv", p, r)?;
                if r == DAT_SUCCESS {
                    let ranges: Vec<(u64, u64)> = local.iter().map(|&(a, l, _)| (a, l)).collect();
                    let writes = self.ours(&ranges);
                    self.record(Post {
                        kind: PostKind::Recv, ep: 0, ep_obj: None, srq: p.h as usize, rmr: 0, evd: 0, must: false, forgiven: false,
                        total: local.iter().map(|s| s.1).sum(), local, local_bad: bad, remote: None, remote_bad: false, writes,
                        snapshot: None, target_before: None, before: None, a: 0, b: 0, posted: self.step, done: None, status: 0, matched: false,
                    }, cookie);
                }
                Ok(())
            }
            Op::RmrBind { rmr, lmr, ep, ref seg, privs, flags, cookie } => {
                let p = self.pick(rmr, Kind::Rmr);
                let l = self.pick(lmr, Kind::Lmr);
                let e = self.pick_fit(ep, Kind::Ep, |o| o.st == St::Up);
                let (t, local, _) = self.triplets(std::slice::from_ref(seg), 0, false);
                let cookie = self.unique_cookie(cookie);
                let mut ctx = 0;
                // SAFETY: any handles; our triplet and out-parameter.
                let r = unsafe {
                    (self.api.dat_rmr_bind)(p.h, l.h, t.as_ptr(), privs as _, DAT_VA_TYPE_VA, e.h, DAT_RMR_COOKIE { as_64: cookie }, flags as _, &mut ctx)
                };
                self.check("dat_rmr_bind", p, r)?;
                if let (DAT_SUCCESS, Some(i)) = (r, p.obj) {
                    let o = &mut self.objs[i];
                    o.keys.push(ctx);
                    (o.addr, o.len) = (local[0].0, local[0].1);
                    self.binds.insert(cookie, (p.h as usize, false));
                }
                Ok(())
            }
            _ => unreachable!("{op:?} is not a post"),
        }
    }

    fn record(&mut self, p: Post, cookie: u64) {
        let evd = p.evd;
        self.cookies.insert(cookie, self.posts.len());
        self.posts.push(p);
        if evd != 0 {
            self.may_fill(evd);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn post(&mut self, kind: PostKind, ep: crate::ops::Sel, segs: &[Seg], count: Option<i32>, cookie: u64, flags: u32, remote: &Remote, a: u64, b: u64) -> Result<(), Finding> {
        let api = self.api;
        let p = self.pick_fit(ep, Kind::Ep, |o| if kind == PostKind::Recv { o.pz != 0 && o.srq == 0 } else { o.st == St::Up });
        let (pz, recv_evd, req_evd) = p.obj.filter(|_| !p.bad).map_or((0, 0, 0), |i| (self.objs[i].pz, self.objs[i].recv, self.objs[i].req));
        let atomic = matches!(kind, PostKind::FetchAdd | PostKind::CmpSwap);
        let write = matches!(kind, PostKind::Recv | PostKind::Read) || atomic;
        let mut segs = segs.to_vec();
        if atomic && let Some(s) = segs.first_mut() && s.len < 4096 {
            // An atomic's result is one aligned word.
            s.len = 8;
            s.offset &= !7;
        }
        let (mut t, mut local, mut bad) = self.triplets(&segs, pz, write);
        if atomic && let (Some(t0), Some(l0)) = (t.first_mut(), local.first_mut()) && t0.segment_length == 8 {
            t0.virtual_address = (t0.virtual_address + 7) & !7;
            l0.0 = t0.virtual_address;
            bad[0] = self.local_bad(l0.0, 8, l0.2, pz, true);
        }
        // A longer atomic segment: verbs writes, and so checks, only its
        // first word (Soft-RoCE as a device); sock checks all of it.
        if atomic && self.target == crate::target::Target::Ibv && let (Some(l0), Some(b0)) = (local.first(), bad.first_mut()) && l0.1 > 8 {
            *b0 = self.local_bad(l0.0, 8, l0.2, pz, true);
        }
        // Never claim more segments than the array holds: that would be our overread, not the provider's.
        let n = count.map_or(t.len() as i32, |c| if c < 0 { c } else { c.min(t.len() as i32) });
        let used = if atomic { 1.min(t.len()) } else { n.max(0) as usize };
        local.truncate(used);
        bad.truncate(used);
        let total: u64 = local.iter().map(|s| s.1).sum();
        let size = if atomic { 8 } else { total };
        let (rt, va, _key, remote_bad) = self.remote(remote, kind, p.h as usize, size);
        let cookie = self.unique_cookie(cookie);
        let ranges: Vec<(u64, u64)> = local.iter().map(|&(a, l, _)| (a, l)).collect();
        let target = [(va, size)];
        let snapshot = matches!(kind, PostKind::Send | PostKind::Write | PostKind::WriteImm).then(|| self.gather(&ranges)).flatten();
        let before = if atomic { self.mem.read(va, 8).map(|b| word(&b)) } else { None };
        let target_before = if matches!(kind, PostKind::Write | PostKind::WriteImm) && size <= 65536 { self.mem.read(va, size) } else { None };
        let writes = match kind {
            PostKind::Recv | PostKind::Read => self.ours(&ranges),
            PostKind::Write | PostKind::WriteImm => self.ours(&target),
            PostKind::FetchAdd | PostKind::CmpSwap => self.ours(&[ranges.first().map_or((0, 0), |&(a, _)| (a, 8)), (va, 8)]),
            PostKind::Send => Vec::new(),
        };
        let c = DAT_DTO_COOKIE { as_64: cookie };
        let tp = if t.is_empty() { null_mut() } else { t.as_mut_ptr() };
        let ext = api.dat_extension_op;
        // SAFETY: any EP handle; our triplets, remote triplet and cookie, sized as declared.
        let (call, r) = unsafe {
            match kind {
                PostKind::Send => ("dat_ep_post_send", (api.dat_ep_post_send)(p.h, n, tp, c, flags as _)),
                PostKind::Recv => ("dat_ep_post_recv", (api.dat_ep_post_recv)(p.h, n, tp, c, flags as _)),
                PostKind::Read => ("dat_ep_post_rdma_read", (api.dat_ep_post_rdma_read)(p.h, n, tp, c, &rt, flags as _)),
                PostKind::Write => ("dat_ep_post_rdma_write", (api.dat_ep_post_rdma_write)(p.h, n, tp, c, &rt, flags as _)),
                PostKind::FetchAdd => ("dat_extension_op", ext(p.h, DAT_IB_FETCH_AND_ADD_OP as i32, a, tp, cookie, &rt as *const DAT_RMR_TRIPLET, flags)),
                PostKind::CmpSwap => ("dat_extension_op", ext(p.h, DAT_IB_CMP_AND_SWAP_OP as i32, a, b, tp, cookie, &rt as *const DAT_RMR_TRIPLET, flags)),
                PostKind::WriteImm => ("dat_extension_op", ext(p.h, DAT_IB_RDMA_WRITE_IMMED_OP as i32, n, tp, cookie, &rt as *const DAT_RMR_TRIPLET, a as u32, flags)),
            }
        };
        self.check(call, p, r)?;
        if r != DAT_SUCCESS {
            return Ok(());
        }
        let evd = if kind == PostKind::Recv { if recv_evd != 0 { recv_evd } else { req_evd } } else if req_evd != 0 { req_evd } else { recv_evd };
        let must = flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG) == 0;
        let remote = (kind != PostKind::Send && kind != PostKind::Recv).then_some((va, rt.rmr_context));
        self.record(Post {
            kind, ep: p.h as usize, ep_obj: p.obj.filter(|_| !p.bad), srq: 0, rmr: 0, evd, must, forgiven: false, local, local_bad: bad, total,
            remote, remote_bad: remote.is_some() && remote_bad, writes, snapshot, target_before, before, a, b,
            posted: self.step, done: None, status: 0, matched: false,
        }, cookie);
        Ok(())
    }

    /// A DTO completion (plain or IB extended).
    pub fn dto_event(&mut self, evd: usize, ev: &DAT_EVENT) -> Result<(), Finding> {
        STATS.completions.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a DTO event's member.
        let d = unsafe { ev.event_data.dto_completion_event_data };
        // SAFETY: a plain 8-byte union.
        let cookie = unsafe { d.user_cookie.as_64 };
        let ep = d.ep_handle as usize;
        let Some(&i) = self.cookies.get(&cookie) else {
            return Err(format!("completion on EVD {evd:#x} for EP {ep:#x} with cookie {cookie:#x}, which was never posted (status {}, op {})", d.status, d.operation));
        };
        let p = &self.posts[i];
        let what = format!("{:?} posted on {:#x} at call {} (cookie {cookie:#x})", p.kind, p.ep.max(p.srq), p.posted);
        if p.done.is_some() {
            return Err(format!("a second completion for {what} (status {}, first status {})", d.status, p.status));
        }
        if p.srq != 0 {
            if !self.objs.iter().any(|o| o.kind == Kind::Ep && o.h == ep && o.srq == p.srq) {
                return Err(format!("completion of {what} names EP {ep:#x}, which does not take receives from that SRQ"));
            }
        } else if ep != p.ep {
            return Err(format!("completion of {what} names EP {ep:#x}"));
        }
        if p.evd != 0 && p.evd != evd {
            return Err(format!("completion of {what} came to EVD {evd:#x}, not {:#x}", p.evd));
        }
        if d.status > DAT_DTO_ERR_LOCAL_MM_ERROR {
            return Err(format!("completion of {what} has status {}, no DAT_DTO_COMPLETION_STATUS", d.status));
        }
        let ud = self.objs.iter().rev().find(|o| o.kind == Kind::Ep && o.h == ep).is_some_and(|o| o.ud);
        let ok_ops: &[u32] = match p.kind {
            PostKind::Send => if ud { &[DAT_DTO_SEND, DAT_IB_DTO_SEND_UD] } else { &[DAT_DTO_SEND] },
            PostKind::Recv => &[DAT_DTO_RECEIVE, DAT_IB_DTO_RECV_IMMED, DAT_IB_DTO_RECV_MSG_IMMED, DAT_IB_DTO_RECV_UD, DAT_IB_DTO_RECV_UD_IMMED],
            PostKind::Read => &[DAT_DTO_RDMA_READ],
            PostKind::Write => &[DAT_DTO_RDMA_WRITE],
            PostKind::FetchAdd => &[DAT_IB_DTO_FETCH_ADD],
            PostKind::CmpSwap => &[DAT_IB_DTO_CMP_SWAP],
            PostKind::WriteImm => &[DAT_IB_DTO_RDMA_WRITE_IMMED],
        };
        // A failed plain receive reports no extension type: it is known only once something arrived.
        if !ok_ops.contains(&d.operation) {
            return Err(format!("completion of {what} reports operation {}", d.operation));
        }
        if (d.operation >= DAT_DTO_EXTENSION_BASE) != (ev.event_number == DAT_IB_DTO_EVENT) {
            return Err(format!("completion of {what}: operation {} in a {:#x} event", d.operation, ev.event_number));
        }
        let now = self.step;
        let p = &mut self.posts[i];
        (p.done, p.status) = (Some(now), d.status);
        self.guarded("after a completion")?;
        let p = &self.posts[i];
        if p.kind == PostKind::Write || p.kind == PostKind::WriteImm {
            // A refused write leaves its target alone.
            if (d.status == DAT_DTO_ERR_REMOTE_ACCESS || (p.remote_bad && d.status != DAT_DTO_SUCCESS)) && let Some(was) = &p.target_before {
                let (va, _) = p.remote.unwrap();
                let target = [(va, was.len() as u64)];
                if self.clean(&target, p.posted, i) && self.mem.read(va, was.len() as u64).as_ref() != Some(was) {
                    return Err(format!("{what} was refused (status {}) but its target [{va:#x}, +{}) changed", d.status, was.len()));
                }
            }
        }
        if d.status != DAT_DTO_SUCCESS {
            return Ok(());
        }
        self.succeeded(i, d.transfered_length as u64, d.operation, ep, &what)
    }

    /// The checks of a successful completion.
    fn succeeded(&mut self, i: usize, len: u64, op: u32, ep: usize, what: &str) -> Result<(), Finding> {
        let p = &self.posts[i];
        // A write with immediate data takes a receive but puts nothing in it: its
        // length is the write's, and the receive's segments are not touched.
        let received = p.kind == PostKind::Recv && op != DAT_IB_DTO_RECV_IMMED;
        if p.kind == PostKind::Recv && !received {
            return Ok(());
        }
        if received {
            if len > p.total {
                return Err(format!("{what} received {len} bytes into {} bytes of buffers", p.total));
            }
            let mut left = len;
            for (s, &bad) in p.local.iter().zip(&p.local_bad) {
                if left == 0 {
                    break;
                }
                if bad && s.1 > 0 {
                    let pz = self.objs.iter().rev().find(|o| o.kind == Kind::Ep && o.h == ep).map_or(0, |o| o.pz);
                    return Err(format!("{what} placed bytes through a segment it may not use ({:#x} +{} key {:#x}: {:?})", s.0, s.1, s.2,
                        self.why_bad(s.0, s.1, s.2, pz, true)));
                }
                left -= s.1.min(left);
            }
        } else {
            if let Some(j) = p.local_bad.iter().position(|&b| b) {
                let s = p.local[j];
                let pz = self.objs.iter().rev().find(|o| o.kind == Kind::Ep && o.h == ep).map_or(0, |o| o.pz);
                let write = matches!(p.kind, PostKind::Read | PostKind::FetchAdd | PostKind::CmpSwap);
                return Err(format!("{what} succeeded with an unusable local segment ({:#x} +{} key {:#x}: {:?})", s.0, s.1, s.2,
                    self.why_bad(s.0, s.1, s.2, pz, write)));
            }
            // InfiniBand does not check the R_Key of a zero-length RDMA read
            // or write (IBTA C9-88), and neither does Soft-RoCE.
            let unchecked = p.total == 0 && self.target == crate::target::Target::Ibv
                && matches!(p.kind, PostKind::Read | PostKind::Write | PostKind::WriteImm);
            if p.remote_bad && !unchecked {
                return Err(format!("{what} succeeded although its remote access {:?} (+{}) is known to be refused", p.remote, p.total));
            }
            if matches!(p.kind, PostKind::Send | PostKind::Read | PostKind::Write | PostKind::WriteImm) && len != p.total {
                return Err(format!("{what} of {} bytes completed with length {len}", p.total));
            }
        }
        match p.kind {
            PostKind::Recv if op == DAT_DTO_RECEIVE => self.check_receive(i, len, ep, what),
            // A zero-length write moves nothing (and over verbs may name any
            // address, C9-88 above): nothing to compare.
            PostKind::Write | PostKind::WriteImm if p.total == 0 => Ok(()),
            PostKind::Write | PostKind::WriteImm => {
                let (va, _) = p.remote.unwrap();
                let src: Vec<(u64, u64)> = p.local.iter().map(|&(a, l, _)| (a, l)).collect();
                let dst = [(va, p.total)];
                match &p.snapshot {
                    Some(s) if !overlaps(&src, &dst) && self.clean(&dst, p.posted, i) && self.clean(&src, p.posted, i) => {
                        if self.mem.read(va, p.total).as_ref() != Some(s) {
                            return Err(format!("{what} succeeded but its target [{va:#x}, +{}) does not hold the source's bytes", p.total));
                        }
                        STATS.bytes_verified.fetch_add(p.total, Ordering::Relaxed);
                    }
                    _ => {
                        STATS.unverifiable.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(())
            }
            PostKind::Read => {
                let (va, _) = p.remote.unwrap();
                let dst = landing(&p.local, p.total);
                let src = [(va, p.total)];
                if !overlaps(&src, &dst) && !self_overlapping(&dst) && self.clean(&dst, p.posted, i) && self.clean(&src, p.posted, i)
                    && let (Some(got), Some(want)) = (self.gather(&dst), self.mem.read(va, p.total))
                {
                    if got != want {
                        let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                        return Err(format!("{what} succeeded but its destination {:?} does not hold the bytes at [{va:#x}, +{}) (rkey {:#x}): first difference at byte {at}: {:#04x} != {:#04x}; memory base {:#x}",
                            p.local, p.total, p.remote.map_or(0, |r| r.1), got[at], want[at], self.mem.base()));
                    }
                    STATS.bytes_verified.fetch_add(p.total, Ordering::Relaxed);
                } else {
                    STATS.unverifiable.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
            PostKind::FetchAdd | PostKind::CmpSwap => {
                let (va, _) = p.remote.unwrap();
                let (la, ra) = ([(p.local[0].0, 8)], [(va, 8)]);
                if let Some(before) = p.before
                    && !overlaps(&la, &ra) && self.clean(&la, p.posted, i) && self.clean(&ra, p.posted, i)
                    && let (Some(l), Some(r)) = (self.mem.read(p.local[0].0, 8), self.mem.read(va, 8))
                {
                    let want = if p.kind == PostKind::FetchAdd { before.wrapping_add(p.a) } else if before == p.a { p.b } else { before };
                    if word(&l) != before || word(&r) != want {
                        return Err(format!("{what}: old word {before:#x}, operands {:#x}/{:#x}: returned {:#x}, left {:#x}", p.a, p.b, word(&l), word(&r)));
                    }
                    STATS.bytes_verified.fetch_add(16, Ordering::Relaxed);
                } else {
                    STATS.unverifiable.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A receive of `len` bytes holds what some send of that length, posted by the peer, carried.
    fn check_receive(&mut self, i: usize, len: u64, ep: usize, what: &str) -> Result<(), Finding> {
        let p = &self.posts[i];
        let land = landing(&p.local, len);
        let peer = self.peer_of(ep).map(|o| o.h);
        let candidates: Vec<usize> = self.posts.iter().enumerate()
            .filter(|(_, s)| s.kind == PostKind::Send && s.total == len && !s.matched && s.ep != ep && peer.is_none_or(|h| s.ep == h))
            .map(|(j, _)| j).collect();
        if candidates.is_empty() {
            return Err(format!("{what} received {len} bytes, but no send of {len} bytes that no other receive took was posted{}",
                peer.map_or(String::new(), |h| format!(" by its peer {h:#x}"))));
        }
        let got = if self.clean(&land, p.posted, i) && !self_overlapping(&land) { self.gather(&land) } else { None };
        let Some(got) = got else {
            STATS.unverifiable.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        if let Some(&j) = candidates.iter().find(|&&j| self.posts[j].snapshot.as_ref() == Some(&got)) {
            self.posts[j].matched = true;
            STATS.bytes_verified.fetch_add(len, Ordering::Relaxed);
            return Ok(());
        }
        let all_sure = candidates.iter().all(|&j| {
            let s = &self.posts[j];
            let src: Vec<(u64, u64)> = s.local.iter().map(|&(a, l, _)| (a, l)).collect();
            s.snapshot.is_some() && self.clean(&src, s.posted, j)
        });
        if all_sure {
            return Err(format!("{what} received {len} bytes that match none of the {} sends of that length", candidates.len()));
        }
        STATS.unverifiable.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
