//! Connections (service points, connect, CRs, disconnect) and the events
//! that come back: every event dequeued or waited for is checked here
//! (right EVD, a stream the EVD carries, handles the sequence knows, fields
//! in range) before the model moves on.

use crate::exec::{EVENTS, Finding, Kind, Obj, Pick, STATS, Seq, St, hp};
use crate::ops::{Addr, Op};
use dat_abi::*;
use std::mem::zeroed;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

/// The stream flag an EVD needs to carry an event, None for an unknown event number.
fn stream(number: u32) -> Option<u32> {
    Some(match number {
        DAT_DTO_COMPLETION_EVENT | DAT_IB_DTO_EVENT => DAT_EVD_DTO_FLAG,
        DAT_RMR_BIND_COMPLETION_EVENT => DAT_EVD_RMR_BIND_FLAG,
        DAT_CONNECTION_REQUEST_EVENT | DAT_IB_UD_CONNECTION_REQUEST_EVENT => DAT_EVD_CR_FLAG,
        DAT_CONNECTION_EVENT_ESTABLISHED..=DAT_CONNECTION_EVENT_UNREACHABLE => DAT_EVD_CONNECTION_FLAG,
        DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED..=DAT_IB_UD_CONNECTION_ERROR_EVENT => DAT_EVD_CONNECTION_FLAG,
        DAT_ASYNC_ERROR_EVD_OVERFLOW..=DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR => DAT_EVD_ASYNC_FLAG,
        DAT_SOFTWARE_EVENT => DAT_EVD_SOFTWARE_FLAG,
        _ => return None,
    })
}

/// Bytes of private data, recognisable: which EP sent them, and where in them.
fn pdata_bytes(ep: usize, n: usize) -> Vec<u8> {
    (0..n).map(|i| (ep as u8).wrapping_mul(31).wrapping_add(i as u8)).collect()
}

/// Private data beyond every provider's limit is never read: the pointer is NULL.
const PDATA_BUF: usize = 256;

impl Seq<'_> {
    fn configured(o: &Obj) -> bool {
        o.pz != 0 && (o.recv != 0 || o.req != 0)
    }

    pub fn step_conn(&mut self, op: &Op) -> Result<(), Finding> {
        let api = self.api;
        // SAFETY (every call below): as in `step_objects`: any handle, and pointers to memory
        // this sequence owns, sized as the prototype says.
        unsafe {
            match *op {
                Op::EpConnect { ep, addr, qual, timeout, pdata } => {
                    let p = self.pick_fit(ep, Kind::Ep, |o| o.st == St::Idle && Self::configured(o) && !o.ud);
                    let qual = self.qual(qual);
                    // A sockaddr_storage: whatever the family says, the provider reads inside it.
                    let mut sa: libc::sockaddr_storage = zeroed();
                    let sin = &mut sa as *mut _ as *mut libc::sockaddr_in;
                    (*sin).sin_family = libc::AF_INET as _;
                    (*sin).sin_addr.s_addr = u32::from(crate::target::addr()).to_be();
                    let ap = match addr {
                        Addr::Loopback => &mut sa as *mut _ as DAT_IA_ADDRESS_PTR,
                        Addr::Null => null_mut(),
                        Addr::BadFamily(f) => {
                            // Never a real family: an IPv6 "any" would be dialled too.
                            let f = if f == libc::AF_INET as u16 || f == libc::AF_INET6 as u16 { 0xaaaa } else { f };
                            (*sin).sin_family = f as _;
                            &mut sa as *mut _ as DAT_IA_ADDRESS_PTR
                        }
                    };
                    let sent = pdata_bytes(p.h as usize, (pdata.max(0) as usize).min(PDATA_BUF));
                    let ptr = if (0..=PDATA_BUF as i32).contains(&pdata) { sent.as_ptr() as DAT_PVOID } else { null_mut() };
                    let r = (api.dat_ep_connect)(p.h, ap, qual, timeout, pdata, ptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
                    self.check("dat_ep_connect", p, r)?;
                    if let (DAT_SUCCESS, Some(i)) = (r, p.obj) {
                        self.objs[i].st = St::Pending;
                        self.objs[i].tries += 1;
                        self.connects.push((qual, sent));
                    }
                    Ok(())
                }
                Op::EpDupConnect { ep, dup, timeout, pdata } => {
                    let p = self.pick_fit(ep, Kind::Ep, |o| o.st == St::Idle && Self::configured(o) && !o.ud);
                    let d = self.pick_fit(dup, Kind::Ep, |o| o.st == St::Up);
                    let sent = pdata_bytes(p.h as usize, (pdata.max(0) as usize).min(PDATA_BUF));
                    let ptr = if (0..=PDATA_BUF as i32).contains(&pdata) { sent.as_ptr() as DAT_PVOID } else { null_mut() };
                    // Where the model EP is connected now, as the provider says (its ESTABLISHED may not be seen yet).
                    let qual = match d.obj.filter(|_| !d.bad) {
                        Some(j) => self.refresh_ep(j)?.map_or(0, |q| q.remote_port_qual),
                        None => 0,
                    };
                    let r = (api.dat_ep_dup_connect)(p.h, d.h, timeout, pdata, ptr, DAT_QOS_BEST_EFFORT);
                    self.check("dat_ep_dup_connect", p, r)?;
                    if let (DAT_SUCCESS, Some(i)) = (r, p.obj) {
                        self.objs[i].st = St::Pending;
                        self.objs[i].tries += 1;
                        self.connects.push((qual, sent));
                    }
                    Ok(())
                }
                Op::EpDisconnect(s, abrupt) => {
                    let p = self.pick_fit(s, Kind::Ep, |o| matches!(o.st, St::Up | St::Pending));
                    let r = (api.dat_ep_disconnect)(p.h, if abrupt { DAT_CLOSE_ABRUPT_FLAG } else { DAT_CLOSE_GRACEFUL_FLAG });
                    self.check("dat_ep_disconnect", p, r)
                }
                Op::PspCreate { ia, qual, evd, provider_flag } => {
                    let p = self.pick(ia, Kind::Ia);
                    let e = self.pick_fit(evd, Kind::Evd, |o| Some(o.ia) == p.ia && o.flags & DAT_EVD_CR_FLAG != 0);
                    let qual = self.qual(qual);
                    let mut h = null_mut();
                    let r = (api.dat_psp_create)(p.h, qual, e.h, if provider_flag { DAT_PSP_PROVIDER_FLAG } else { DAT_PSP_CONSUMER_FLAG }, &mut h);
                    self.same_ia("dat_psp_create", &[p, e], r)?;
                    if let Some(i) = self.created("dat_psp_create", p, r, Kind::Psp, h)? {
                        (self.objs[i].qual, self.objs[i].evd) = (qual, e.h as usize);
                    }
                    Ok(())
                }
                Op::PspCreateAny { ia, evd, provider_flag } => {
                    let p = self.pick(ia, Kind::Ia);
                    let e = self.pick_fit(evd, Kind::Evd, |o| Some(o.ia) == p.ia && o.flags & DAT_EVD_CR_FLAG != 0);
                    let (mut h, mut qual) = (null_mut(), 0);
                    let r = (api.dat_psp_create_any)(p.h, &mut qual, e.h, if provider_flag { DAT_PSP_PROVIDER_FLAG } else { DAT_PSP_CONSUMER_FLAG }, &mut h);
                    self.same_ia("dat_psp_create_any", &[p, e], r)?;
                    if let Some(i) = self.created("dat_psp_create_any", p, r, Kind::Psp, h)? {
                        (self.objs[i].qual, self.objs[i].evd) = (qual, e.h as usize);
                    }
                    Ok(())
                }
                Op::RspCreate { ia, qual, ep, evd } => {
                    let p = self.pick(ia, Kind::Ia);
                    let x = self.pick_fit(ep, Kind::Ep, |o| Some(o.ia) == p.ia && o.st == St::Idle && Self::configured(o));
                    let e = self.pick_fit(evd, Kind::Evd, |o| Some(o.ia) == p.ia && o.flags & DAT_EVD_CR_FLAG != 0);
                    let qual = self.qual(qual);
                    let mut h = null_mut();
                    let r = (api.dat_rsp_create)(p.h, qual, x.h, e.h, &mut h);
                    self.same_ia("dat_rsp_create", &[p, x, e], r)?;
                    if let Some(i) = self.created("dat_rsp_create", p, r, Kind::Rsp, h)? {
                        (self.objs[i].qual, self.objs[i].evd) = (qual, e.h as usize);
                    }
                    Ok(())
                }
                Op::CrAccept(c, e, n) => {
                    let p = self.pick(c, Kind::Cr);
                    let cr_ia = p.obj.map(|i| self.objs[i].ia);
                    let x = self.pick_fit(e, Kind::Ep, |o| Some(o.ia) == cr_ia && o.st == St::Idle && Self::configured(o) && !o.ud);
                    let buf = pdata_bytes(x.h as usize, PDATA_BUF);
                    let ptr = if (0..=PDATA_BUF as i32).contains(&n) { buf.as_ptr() as DAT_PVOID } else { null_mut() };
                    let r = (api.dat_cr_accept)(p.h, x.h, n, ptr);
                    self.check("dat_cr_accept", p, r)?;
                    if let (DAT_SUCCESS, Some(ci)) = (r, p.obj) {
                        self.objs[ci].alive = false;
                        // NULL takes the CR's own EP (an RSP's, or the one a PSP_PROVIDER_FLAG PSP made).
                        let used = if x.h.is_null() { self.objs[ci].conn } else { x.h as usize };
                        if let Some(i) = self.find_live(used, Kind::Ep) {
                            self.objs[i].st = St::Pending;
                            self.objs[i].tries += 1;
                        }
                    }
                    Ok(())
                }
                Op::CrReject(c, n) => {
                    let p = self.pick(c, Kind::Cr);
                    let buf = [0x5au8; PDATA_BUF];
                    let ptr = if (0..=PDATA_BUF as i32).contains(&n) { buf.as_ptr() as DAT_PVOID } else { null_mut() };
                    let r = (api.dat_cr_reject)(p.h, n, ptr);
                    self.check("dat_cr_reject", p, r)?;
                    if r == DAT_SUCCESS {
                        self.kill(p);
                    }
                    Ok(())
                }
                Op::CrHandoff(c, q) => {
                    let p = self.pick(c, Kind::Cr);
                    let qual = self.qual(q);
                    let r = (api.dat_cr_handoff)(p.h, qual);
                    self.check("dat_cr_handoff", p, r)?;
                    if let (DAT_SUCCESS, Some(i)) = (r, p.obj) {
                        // DAT: the handoff ends the consumer's CR; a new arrival event names the
                        // request on the other PSP (the core reuses the handle). Until it comes, the
                        // old handle is neither live nor freed for the model: never chosen.
                        (self.objs[i].alive, self.objs[i].reused) = (false, true);
                        *self.handed_off.entry(p.h as usize).or_default() += 1;
                    }
                    Ok(())
                }
                Op::CrQuery(s) => {
                    let p = self.pick(s, Kind::Cr);
                    let mut param: DAT_CR_PARAM = zeroed();
                    let r = (api.dat_cr_query)(p.h, DAT_CR_FIELD_ALL as _, &mut param);
                    self.check("dat_cr_query", p, r)?;
                    if r == DAT_SUCCESS {
                        pdata_ok("dat_cr_query", param.private_data_size, param.private_data)?;
                    }
                    Ok(())
                }
                Op::EvdDequeue(s) => {
                    let p = self.pick(s, Kind::Evd);
                    let mut e: DAT_EVENT = zeroed();
                    let r = (api.dat_evd_dequeue)(p.h, &mut e);
                    self.check("dat_evd_dequeue", p, r)?;
                    if r == DAT_SUCCESS { self.observe(p, &e) } else { Ok(()) }
                }
                Op::EvdWait { evd, timeout_us, threshold } => {
                    let p = self.pick(evd, Kind::Evd);
                    let (mut e, mut n): (DAT_EVENT, DAT_COUNT) = (zeroed(), 0);
                    let r = (api.dat_evd_wait)(p.h, timeout_us, threshold, &mut e, &mut n);
                    self.check("dat_evd_wait", p, r)?;
                    if r == DAT_SUCCESS { self.observe(p, &e) } else { Ok(()) }
                }
                Op::Drain { evd, timeout_us } => {
                    // What is there already; then, if the sequence waits for something (a connection
                    // on its way, a request not completed), a wait on an EVD it will come to.
                    let before = self.seen;
                    self.drain_all()?;
                    let waiting = self.awaited();
                    if self.seen != before || waiting.is_empty() {
                        return Ok(());
                    }
                    let p = self.pick_fit(evd, Kind::Evd, |o| waiting.contains(&o.h));
                    let timeout = if self.target.wire() { timeout_us * 10 } else { timeout_us };
                    let (mut e, mut n): (DAT_EVENT, DAT_COUNT) = (zeroed(), 0);
                    let r = (api.dat_evd_wait)(p.h, timeout, 1, &mut e, &mut n);
                    self.check("dat_evd_wait", p, r)?;
                    if r == DAT_SUCCESS {
                        self.observe(p, &e)?;
                    }
                    self.drain_all()
                }
                Op::CnoWait { cno, timeout_us } => {
                    let p = self.pick(cno, Kind::Cno);
                    let mut evd = null_mut();
                    let r = (api.dat_cno_wait)(p.h, timeout_us, &mut evd);
                    self.check("dat_cno_wait", p, r)?;
                    if r == DAT_SUCCESS && !self.objs.iter().any(|o| o.kind == Kind::Evd && o.h == evd as usize && o.cno == p.h as usize) {
                        return Err(format!("dat_cno_wait returned EVD {evd:p}, which is not attached to CNO {:p}", p.h));
                    }
                    Ok(())
                }
                _ => unreachable!("{op:?} is not a connection call"),
            }
        }
    }

    /// Dequeues every live EVD of the sequence until it is empty, checking each event.
    pub fn drain_all(&mut self) -> Result<(), Finding> {
        let evds: Vec<usize> = self.objs.iter().filter(|o| o.kind == Kind::Evd && o.alive).map(|o| o.h).collect();
        for h in evds {
            let Some(i) = self.find_live(h, Kind::Evd) else { continue };
            let p = Pick { h: hp(h), bad: false, ia: Some(self.objs[i].ia), obj: Some(i) };
            for _ in 0..1024 {
                // SAFETY: DAT_EVD_PARAM/DAT_EVENT are plain C data.
                let mut e: DAT_EVENT = unsafe { zeroed() };
                // SAFETY: a live EVD and our event.
                let r = unsafe { (self.api.dat_evd_dequeue)(p.h, &mut e) };
                self.check("dat_evd_dequeue", p, r)?;
                if r != DAT_SUCCESS {
                    break;
                }
                self.observe(p, &e)?;
            }
        }
        Ok(())
    }

    /// EVDs something is on its way to: connection EVDs of EPs whose
    /// connection is pending, EVDs of service points when a connect is
    /// pending, EVDs of requests not completed.
    fn awaited(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.objs.iter().filter(|o| o.kind == Kind::Ep && o.alive && o.st == St::Pending).map(|o| o.conn).collect();
        if !v.is_empty() {
            v.extend(self.objs.iter().filter(|o| matches!(o.kind, Kind::Psp | Kind::Rsp) && o.alive).map(|o| o.evd));
        }
        v.extend(self.posts.iter().filter(|p| p.done.is_none() && p.must && p.ep_obj.is_some_and(|i| self.objs[i].alive)).map(|p| p.evd));
        v.retain(|&h| h != 0);
        v
    }

    /// Checks one event from EVD `p` and moves the model on.
    pub fn observe(&mut self, p: Pick, ev: &DAT_EVENT) -> Result<(), Finding> {
        self.seen += 1;
        let evd = p.h as usize;
        let n = ev.event_number;
        // SAFETY (union reads below): the event number says which member the provider filled.
        let status = if matches!(n, DAT_DTO_COMPLETION_EVENT | DAT_IB_DTO_EVENT) { unsafe { ev.event_data.dto_completion_event_data.status } } else { 0 };
        EVENTS.lock().unwrap().insert((n, status));
        self.log.push(format!("  event {n:#x}"));
        if ev.evd_handle as usize != evd {
            return Err(format!("event {n:#x} dequeued from EVD {evd:#x} names EVD {:p}", ev.evd_handle));
        }
        let Some(flag) = stream(n) else { return Err(format!("EVD {evd:#x} gave an event with unknown number {n:#x}")) };
        if let Some(i) = p.obj && self.objs[i].flags & flag == 0 {
            return Err(format!("event {n:#x} on EVD {evd:#x}, created with flags {:#x} (no {flag:#x})", self.objs[i].flags));
        }
        match flag {
            DAT_EVD_DTO_FLAG => self.dto_event(evd, ev),
            DAT_EVD_RMR_BIND_FLAG => {
                // SAFETY: the event number names this member; the cookie is a plain 8-byte union.
                let d = unsafe { ev.event_data.rmr_completion_event_data };
                // SAFETY: as above.
                let cookie = unsafe { d.user_cookie.as_64 };
                match self.binds.get_mut(&cookie) {
                    Some((rmr, seen)) if *rmr == d.rmr_handle as usize && !*seen && d.status <= DAT_DTO_ERR_LOCAL_MM_ERROR => {
                        *seen = true;
                        Ok(())
                    }
                    other => Err(format!("RMR bind event (RMR {:p}, cookie {cookie:#x}, status {}) matches no bind pending: {other:?}", d.rmr_handle, d.status)),
                }
            }
            DAT_EVD_CR_FLAG => self.cr_event(evd, ev),
            DAT_EVD_CONNECTION_FLAG => self.conn_event(evd, ev),
            DAT_EVD_ASYNC_FLAG => {
                // SAFETY: the event number names this member.
                let d = unsafe { ev.event_data.asynch_error_event_data };
                if n == DAT_ASYNC_ERROR_EVD_OVERFLOW {
                    // Completions were dropped for lack of room: none of that EVD's can be counted as lost.
                    for o in self.objs.iter_mut().filter(|o| o.kind == Kind::Evd && o.h == d.dat_handle as usize) {
                        o.overflow = true;
                    }
                }
                Ok(())
            }
            _ => {
                // SAFETY: the event number names this member.
                let v = unsafe { ev.event_data.software_event_data.pointer } as u64;
                match self.software.get_mut(&v) {
                    Some((e, seen)) if *e == evd && !*seen => {
                        *seen = true;
                        Ok(())
                    }
                    other => Err(format!("software event {v:#x} on EVD {evd:#x} matches no dat_evd_post_se pending: {other:?}")),
                }
            }
        }
    }

    fn conn_event(&mut self, evd: usize, ev: &DAT_EVENT) -> Result<(), Finding> {
        let n = ev.event_number;
        // SAFETY: a connection event's member.
        let d = unsafe { ev.event_data.connect_event_data };
        let h = d.ep_handle as usize;
        // As for CRs: an event queued before the EP was freed may name a handle a newer EP has now.
        let records: Vec<usize> = (0..self.objs.len()).rev().filter(|&i| self.objs[i].h == h && self.objs[i].kind == Kind::Ep).collect();
        let Some(&newest) = records.first() else {
            return Err(format!("connection event {n:#x} for EP {h:#x}, which this sequence never had"));
        };
        let i = records.iter().copied().find(|&i| self.objs[i].conn == evd || self.objs[i].conn == 0).unwrap_or(newest);
        // DAT keeps the private data valid until the EP is reset or freed: read it only
        // while that cannot have happened since the event was made.
        let readable = self.objs[i].alive && !self.objs[i].stale;
        pdata_check("a connection event", d.private_data_size, d.private_data, readable)?;
        let o = &self.objs[i];
        if o.alive && o.conn != 0 && o.conn != evd {
            return Err(format!("connection event {n:#x} for EP {h:#x} came to EVD {evd:#x}, not its connection EVD {:#x}", o.conn));
        }
        let ud = n >= DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED;
        if ud {
            return Ok(());
        }
        if n == DAT_CONNECTION_EVENT_ESTABLISHED {
            STATS.established.fetch_add(1, Ordering::Relaxed);
            let o = &mut self.objs[i];
            o.est += 1;
            if o.est > o.tries {
                return Err(format!("EP {h:#x}: ESTABLISHED #{} after only {} connects/accepts", o.est, o.tries));
            }
            o.st = St::Up;
            if o.alive && let Some(param) = self.refresh_ep(i)? {
                self.objs[i].ports = (param.local_port_qual, param.remote_port_qual);
            }
        } else {
            self.objs[i].st = St::Down;
        }
        Ok(())
    }

    fn cr_event(&mut self, evd: usize, ev: &DAT_EVENT) -> Result<(), Finding> {
        // SAFETY: a CR arrival's member.
        let d = unsafe { ev.event_data.cr_arrival_event_data };
        // SAFETY: PSP and RSP handles share the union.
        let sp = unsafe { d.sp_handle.psp_handle } as usize;
        // The service point may be freed by now, its handle even taken by a newer one (an
        // event queued before the free): any record of that handle may be the one meant.
        let records: Vec<usize> = (0..self.objs.len()).rev()
            .filter(|&i| self.objs[i].h == sp && matches!(self.objs[i].kind, Kind::Psp | Kind::Rsp)).collect();
        let Some(&newest) = records.first() else {
            return Err(format!("CR arrival names service point {sp:#x}, which this sequence never had"));
        };
        let Some(si) = records.iter().copied().find(|&i| self.objs[i].evd == evd && self.objs[i].qual == d.conn_qual) else {
            let o = &self.objs[newest];
            return Err(format!("CR for service point {sp:#x} (qualifier {}) came to EVD {evd:#x}; the service point listens on {} with EVD {:#x}",
                d.conn_qual, o.qual, o.evd));
        };
        let (sp_qual, sp_ia) = (self.objs[si].qual, self.objs[si].ia);
        let cr = d.cr_handle as usize;
        if cr == 0 {
            return Err("CR arrival with a NULL cr_handle".into());
        }
        let handed = match self.handed_off.get_mut(&cr) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        };
        if !handed && self.find_live(cr, Kind::Cr).is_some() {
            return Err(format!("CR {cr:#x} announced twice without a handoff"));
        }
        let ci = self.add(Kind::Cr, hp(cr), sp_ia);
        self.objs[ci].pz = sp;
        // SAFETY: DAT_CR_PARAM is plain C data.
        let mut param: DAT_CR_PARAM = unsafe { zeroed() };
        // SAFETY: the CR just announced and our out-parameter.
        let r = unsafe { (self.api.dat_cr_query)(hp(cr), DAT_CR_FIELD_ALL as _, &mut param) };
        self.check("dat_cr_query", Pick { h: hp(cr), bad: false, ia: Some(sp_ia), obj: Some(ci) }, r)?;
        if r != DAT_SUCCESS {
            return Ok(());
        }
        let got = pdata_ok("dat_cr_query", param.private_data_size, param.private_data)?;
        // What the requester sent arrives (a transport may pad it).
        if self.target.wire() && ev.event_number == DAT_CONNECTION_REQUEST_EVENT && !handed
            && !self.connects.iter().any(|(q, sent)| crate::target::port_of(*q) == crate::target::port_of(sp_qual) && got.starts_with(sent))
        {
            return Err(format!("CR on qualifier {sp_qual} carries {} bytes of private data that no connect to it sent", got.len()));
        }
        let ep = param.local_ep_handle as usize;
        self.objs[ci].conn = ep;
        if ep != 0 && self.find_live(ep, Kind::Ep).is_none() {
            // The EP a PSP_PROVIDER_FLAG service point made for this request.
            let i = self.add(Kind::Ep, hp(ep), sp_ia);
            self.objs[i].provider_made = true;
            self.refresh_ep(i)?;
        }
        Ok(())
    }
}

/// Private data in an event or a query: a sane size, readable.
fn pdata_ok(what: &str, size: DAT_COUNT, ptr: DAT_PVOID) -> Result<Vec<u8>, Finding> {
    pdata_check(what, size, ptr, true)
}

/// As `pdata_ok`; the bytes are read (memcheck sees whether they are still allocated) if `read`.
fn pdata_check(what: &str, size: DAT_COUNT, ptr: DAT_PVOID, read: bool) -> Result<Vec<u8>, Finding> {
    if !(0..=PDATA_BUF as i32).contains(&size) || (size > 0 && ptr.is_null()) {
        return Err(format!("{what}: private data of {size} bytes at {ptr:p}"));
    }
    if size == 0 || !read {
        return Ok(Vec::new());
    }
    // SAFETY: the provider says `size` bytes live at `ptr` (memcheck sees if they do not).
    Ok(unsafe { std::slice::from_raw_parts(ptr as *const u8, size as usize) }.to_vec())
}
