//! The calls on objects: create, query, modify, free, and the extension's
//! calls that need no connection.

use crate::exec::{Finding, Kind, Obj, Pick, Seq, St, hp};
use crate::mem;
use crate::ops::{Counters, EpAttr, Op};
use dat_abi::*;
use std::ffi::CString;
use std::mem::zeroed;
use std::ptr::{null, null_mut};

/// Memory rights that let anything write.
pub const WRITE_PRIVS: u32 = DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC;

/// EP attributes: a modest base every provider accepts, then what the op drew.
pub fn ep_attr(a: &EpAttr) -> DAT_EP_ATTR {
    DAT_EP_ATTR {
        service_type: if a.service_ud { DAT_IB_SERVICE_TYPE_UD } else { DAT_SERVICE_TYPE_RC },
        max_message_size: a.max_message_size.map_or(if a.service_ud { 2048 } else { 1 << 20 }, |v| v as _),
        max_rdma_size: a.max_rdma_size.map_or(1 << 20, |v| v as _),
        qos: DAT_QOS_BEST_EFFORT,
        recv_completion_flags: DAT_COMPLETION_DEFAULT_FLAG,
        request_completion_flags: a.request_flags.unwrap_or(DAT_COMPLETION_DEFAULT_FLAG),
        max_recv_dtos: a.recv_dtos.unwrap_or(16),
        max_request_dtos: a.request_dtos.unwrap_or(16),
        max_recv_iov: a.recv_iov.unwrap_or(4),
        max_request_iov: a.request_iov.unwrap_or(4),
        max_rdma_read_in: a.rdma_in.unwrap_or(4),
        max_rdma_read_out: a.rdma_out.unwrap_or(4),
        srq_soft_hw: 0,
        max_rdma_read_iov: 4,
        max_rdma_write_iov: 4,
        ep_transport_specific_count: 0,
        ep_transport_specific: null_mut(),
        ep_provider_specific_count: 0,
        ep_provider_specific: null_mut(),
    }
}

impl Seq<'_> {
    /// Reads an EP's EVDs, PZ and SRQ back from the provider: the record
    /// follows what the provider says, so a modify that half-applied still
    /// routes completions where they will really go.
    pub fn refresh_ep(&mut self, i: usize) -> Result<Option<DAT_EP_PARAM>, Finding> {
        let h = self.objs[i].h;
        // SAFETY: DAT_EP_PARAM is plain C data.
        let mut param: DAT_EP_PARAM = unsafe { zeroed() };
        // SAFETY: a live EP and our out-parameter.
        let r = unsafe { (self.api.dat_ep_query)(hp(h), DAT_EP_FIELD_ALL as _, &mut param) };
        self.check("dat_ep_query", Pick { h: hp(h), bad: false, ia: None, obj: Some(i) }, r)?;
        if r != DAT_SUCCESS {
            return Ok(None);
        }
        let o = &mut self.objs[i];
        o.pz = param.pz_handle as usize;
        o.recv = param.recv_evd_handle as usize;
        o.req = param.request_evd_handle as usize;
        o.conn = param.connect_evd_handle as usize;
        o.srq = param.srq_handle as usize;
        o.ud = param.ep_attr.service_type == DAT_IB_SERVICE_TYPE_UD;
        Ok(Some(param))
    }

    pub fn step_objects(&mut self, op: &Op) -> Result<(), Finding> {
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
                    self.created("dat_pz_create", p, r, Kind::Pz, h).map(|_| ())
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
                    self.created("dat_cno_create", p, r, Kind::Cno, h).map(|_| ())
                }
                Op::CnoFree(s) => self.free("dat_cno_free", s, Kind::Cno, api.dat_cno_free),
                Op::CnoQuery(s) => {
                    let p = self.pick(s, Kind::Cno);
                    let mut param: DAT_CNO_PARAM = zeroed();
                    let r = (api.dat_cno_query)(p.h, DAT_CNO_FIELD_ALL as _, &mut param);
                    self.check("dat_cno_query", p, r)
                }
                Op::EvdCreate { ia, qlen, flags, cno } => {
                    let p = self.pick(ia, Kind::Ia);
                    let c = cno.map(|c| self.pick_fit(c, Kind::Cno, |o| Some(o.ia) == p.ia));
                    let mut h = null_mut();
                    let r = (api.dat_evd_create)(p.h, qlen, c.map_or(null_mut(), |c| c.h), flags as _, &mut h);
                    self.same_ia("dat_evd_create", &[p].into_iter().chain(c).collect::<Vec<_>>(), r)?;
                    if let Some(i) = self.created("dat_evd_create", p, r, Kind::Evd, h)? {
                        self.objs[i].flags = flags;
                        self.objs[i].cno = c.map_or(0, |c| c.h as usize);
                        self.refresh_evd(i)?;
                    }
                    Ok(())
                }
                Op::EvdFree(s) => self.free("dat_evd_free", s, Kind::Evd, api.dat_evd_free),
                Op::EvdQuery(s) => {
                    let p = self.pick(s, Kind::Evd);
                    let mut param: DAT_EVD_PARAM = zeroed();
                    let r = (api.dat_evd_query)(p.h, DAT_EVD_FIELD_ALL as _, &mut param);
                    self.check("dat_evd_query", p, r)
                }
                Op::EvdResize(s, q) => {
                    let p = self.pick(s, Kind::Evd);
                    let r = (api.dat_evd_resize)(p.h, q);
                    self.check("dat_evd_resize", p, r)?;
                    if let Some(i) = p.obj.filter(|_| r == DAT_SUCCESS) {
                        self.refresh_evd(i)?;
                    }
                    Ok(())
                }
                Op::EvdPostSe(s, cookie) => {
                    let p = self.pick(s, Kind::Evd);
                    // Each pointer value once, so its event can be told apart.
                    let mut v = cookie;
                    while self.software.contains_key(&v) {
                        v = v.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    }
                    let mut e: DAT_EVENT = zeroed();
                    e.event_number = DAT_SOFTWARE_EVENT;
                    e.evd_handle = p.h;
                    e.event_data.software_event_data.pointer = v as DAT_PVOID;
                    let r = (api.dat_evd_post_se)(p.h, &e);
                    self.check("dat_evd_post_se", p, r)?;
                    if r == DAT_SUCCESS {
                        self.software.insert(v, (p.h as usize, false));
                    }
                    Ok(())
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
                Op::EvdModifyCno(s, cno) => {
                    let p = self.pick(s, Kind::Evd);
                    let c = cno.map(|c| self.pick_fit(c, Kind::Cno, |o| Some(o.ia) == p.ia));
                    let r = (api.dat_evd_modify_cno)(p.h, c.map_or(null_mut(), |c| c.h));
                    self.check("dat_evd_modify_cno", p, r)?;
                    self.same_ia("dat_evd_modify_cno", &[p].into_iter().chain(c).collect::<Vec<_>>(), r)?;
                    if let Some(i) = p.obj.filter(|_| r == DAT_SUCCESS) {
                        self.objs[i].cno = c.map_or(0, |c| c.h as usize);
                    }
                    Ok(())
                }
                Op::LmrCreate { ia, pz, ro, offset, len, privs } => {
                    let p = self.pick(ia, Kind::Ia);
                    let z = self.pick_fit(pz, Kind::Pz, |o| Some(o.ia) == p.ia);
                    // Regions stay inside our buffer, never over the canary; over the
                    // read-only block they carry no right to write.
                    let (start, end, privs) = if ro { (0, mem::RO + mem::RW, privs & !WRITE_PRIVS) } else { (mem::RO, mem::RO + mem::RW, privs) };
                    let offset = start + offset as usize % (end - start);
                    let len = (len as usize).min(end - offset);
                    let region = DAT_REGION_DESCRIPTION { for_va: self.mem.ptr(offset) as DAT_PVOID };
                    let (mut h, mut lkey, mut rkey, mut rlen, mut raddr) = (null_mut(), 0, 0, 0, 0);
                    let r = (api.dat_lmr_create)(p.h, DAT_MEM_TYPE_VIRTUAL, region, len as _, z.h, privs as _, DAT_VA_TYPE_VA,
                        &mut h, &mut lkey, &mut rkey, &mut rlen, &mut raddr);
                    self.same_ia("dat_lmr_create", &[p, z], r)?;
                    if let Some(i) = self.created("dat_lmr_create", p, r, Kind::Lmr, h)? {
                        let o = &mut self.objs[i];
                        (o.lkey, o.rkey, o.addr, o.len, o.privs, o.pz) = (lkey, rkey, raddr, rlen, privs, z.h as usize);
                        // What a consumer may rely on: the registration covers what it asked for.
                        let want = self.mem.ptr(offset) as u64;
                        if len > 0 && (raddr > want || raddr + rlen < want + len as u64) {
                            return Err(format!("dat_lmr_create registered [{raddr:#x}, +{rlen}) for [{want:#x}, +{len})"));
                        }
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
                Op::LmrSync { ia, write, ref segs } => {
                    let p = self.pick(ia, Kind::Ia);
                    let t = self.triplets(segs, 0, false).0;
                    let f = if write { api.dat_lmr_sync_rdma_write } else { api.dat_lmr_sync_rdma_read };
                    let r = f(p.h, if t.is_empty() { null() } else { t.as_ptr() }, t.len() as _);
                    self.check(if write { "dat_lmr_sync_rdma_write" } else { "dat_lmr_sync_rdma_read" }, p, r)
                }
                Op::RmrCreate(s) => {
                    let p = self.pick(s, Kind::Pz);
                    let mut h = null_mut();
                    let r = (api.dat_rmr_create)(p.h, &mut h);
                    self.created("dat_rmr_create", p, r, Kind::Rmr, h).map(|_| ())
                }
                Op::RmrFree(s) => self.free("dat_rmr_free", s, Kind::Rmr, api.dat_rmr_free),
                Op::RmrQuery(s) => {
                    let p = self.pick(s, Kind::Rmr);
                    let mut param: DAT_RMR_PARAM = zeroed();
                    let r = (api.dat_rmr_query)(p.h, DAT_RMR_FIELD_ALL as _, &mut param);
                    self.check("dat_rmr_query", p, r)
                }
                Op::EpCreate { ia, pz, recv, req, conn, srq, ref attr } => {
                    let p = self.pick(ia, Kind::Ia);
                    let same = |o: &Obj| Some(o.ia) == p.ia;
                    let evd = |flag: u32| move |o: &Obj| Some(o.ia) == p.ia && o.flags & flag != 0;
                    let picks = [
                        self.pick_fit(pz, Kind::Pz, same),
                        self.pick_fit(recv, Kind::Evd, evd(DAT_EVD_DTO_FLAG)),
                        self.pick_fit(req, Kind::Evd, evd(DAT_EVD_DTO_FLAG)),
                        self.pick_fit(conn, Kind::Evd, evd(DAT_EVD_CONNECTION_FLAG)),
                    ];
                    let a = attr.as_ref().map(ep_attr);
                    let ap = a.as_ref().map_or(null(), |a| a as *const _);
                    let mut h = null_mut();
                    let (call, r, s) = match srq {
                        None => ("dat_ep_create", (api.dat_ep_create)(p.h, picks[0].h, picks[1].h, picks[2].h, picks[3].h, ap, &mut h), None),
                        Some(s) => {
                            let s = self.pick_fit(s, Kind::Srq, same);
                            ("dat_ep_create_with_srq", (api.dat_ep_create_with_srq)(p.h, picks[0].h, picks[1].h, picks[2].h, picks[3].h, s.h, ap, &mut h), Some(s))
                        }
                    };
                    // Not the connection EVD: a software queue, which the core lets IAs share (see dapl-core ep.rs).
                    let all: Vec<Pick> = [p].into_iter().chain(picks[..3].iter().copied()).chain(s).collect();
                    self.same_ia(call, &[picks[3]], r)?;
                    self.same_ia(call, &all, r)?;
                    if let Some(i) = self.created(call, p, r, Kind::Ep, h)? {
                        self.refresh_ep(i)?;
                    }
                    Ok(())
                }
                Op::EpModify { ep, mask, pz, recv, req, conn, ref attr } => {
                    let p = self.pick(ep, Kind::Ep);
                    let same = |o: &Obj| Some(o.ia) == p.ia;
                    let evd = |flag: u32| move |o: &Obj| Some(o.ia) == p.ia && o.flags & flag != 0;
                    let mut param: DAT_EP_PARAM = zeroed();
                    let picks = [
                        self.pick_fit(pz, Kind::Pz, same),
                        self.pick_fit(recv, Kind::Evd, evd(DAT_EVD_DTO_FLAG)),
                        self.pick_fit(req, Kind::Evd, evd(DAT_EVD_DTO_FLAG)),
                    ];
                    param.pz_handle = picks[0].h;
                    param.recv_evd_handle = picks[1].h;
                    param.request_evd_handle = picks[2].h;
                    param.connect_evd_handle = self.pick_fit(conn, Kind::Evd, evd(DAT_EVD_CONNECTION_FLAG)).h;
                    // The PZ and DTO EVDs the mask names must be of the EP's IA.
                    let bits = [DAT_EP_FIELD_PZ_HANDLE, DAT_EP_FIELD_RECV_EVD_HANDLE, DAT_EP_FIELD_REQUEST_EVD_HANDLE];
                    let named: Vec<Pick> = [p].into_iter().chain(picks.iter().zip(bits).filter(|(_, b)| mask & b != 0).map(|(q, _)| *q)).collect();
                    param.ep_attr = ep_attr(attr);
                    let before = match p.obj.filter(|_| !p.bad) {
                        Some(i) => self.refresh_ep(i)?,
                        None => None,
                    };
                    let r = (api.dat_ep_modify)(p.h, mask as _, &param);
                    self.check("dat_ep_modify", p, r)?;
                    self.same_ia("dat_ep_modify", &named, r)?;
                    if let (Some(i), Some(before)) = (p.obj.filter(|_| !p.bad), before) {
                        let after = self.refresh_ep(i)?;
                        if r != DAT_SUCCESS && let Some(after) = after {
                            // A refused modify leaves the EP as it was (its state is not compared: the
                            // peer and the provider's threads move it meanwhile).
                            let fields = |q: &DAT_EP_PARAM| (q.pz_handle, q.recv_evd_handle, q.request_evd_handle, q.connect_evd_handle,
                                q.ep_attr.max_recv_dtos, q.ep_attr.max_request_dtos, q.ep_attr.service_type);
                            if fields(&before) != fields(&after) {
                                return Err(format!("dat_ep_modify returned {} but changed the EP: {:?} -> {:?}",
                                    crate::exec::name_of(r), fields(&before), fields(&after)));
                            }
                        }
                        if r == DAT_SUCCESS {
                            // The QP was rebuilt: completions it still owed may go with it (README, "what it does not check").
                            let h = self.objs[i].h;
                            for post in self.posts.iter_mut().filter(|q| q.ep == h && q.done.is_none()) {
                                post.forgiven = true;
                            }
                        }
                    }
                    Ok(())
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
                    self.check("dat_ep_reset", p, r)?;
                    if let Some(i) = p.obj.filter(|_| r == DAT_SUCCESS) {
                        self.objs[i].st = St::Idle;
                        self.objs[i].stale = true;
                    }
                    Ok(())
                }
                Op::EpStatus(s) => {
                    let p = self.pick(s, Kind::Ep);
                    let (mut st, mut a, mut b) = (0, 0, 0);
                    let r = (api.dat_ep_get_status)(p.h, &mut st, &mut a, &mut b);
                    self.check("dat_ep_get_status", p, r)
                }
                Op::EpRecvQuery(s) => {
                    let p = self.pick(s, Kind::Ep);
                    let (mut n, mut size) = (0, 0);
                    let r = (api.dat_ep_recv_query)(p.h, &mut n, &mut size);
                    self.check("dat_ep_recv_query", p, r)
                }
                Op::EpSetWatermark(s, soft, hard) => {
                    let p = self.pick(s, Kind::Ep);
                    let r = (api.dat_ep_set_watermark)(p.h, soft, hard);
                    self.check("dat_ep_set_watermark", p, r)
                }
                Op::SrqCreate { ia, pz, max_wr, max_iov, lw } => {
                    let p = self.pick(ia, Kind::Ia);
                    let z = self.pick_fit(pz, Kind::Pz, |o| Some(o.ia) == p.ia);
                    let mut attr = DAT_SRQ_ATTR { max_recv_dtos: max_wr, max_recv_iov: max_iov, low_watermark: lw };
                    let mut h = null_mut();
                    let r = (api.dat_srq_create)(p.h, z.h, &mut attr, &mut h);
                    self.same_ia("dat_srq_create", &[p, z], r)?;
                    if let Some(i) = self.created("dat_srq_create", p, r, Kind::Srq, h)? {
                        self.objs[i].pz = z.h as usize;
                    }
                    Ok(())
                }
                Op::SrqFree(s) => self.free("dat_srq_free", s, Kind::Srq, api.dat_srq_free),
                Op::SrqQuery(s) => {
                    let p = self.pick(s, Kind::Srq);
                    let mut param: DAT_SRQ_PARAM = zeroed();
                    let r = (api.dat_srq_query)(p.h, DAT_SRQ_FIELD_ALL as _, &mut param);
                    self.check("dat_srq_query", p, r)
                }
                Op::SrqResize(s, n) => {
                    let p = self.pick(s, Kind::Srq);
                    let r = (api.dat_srq_resize)(p.h, n);
                    self.check("dat_srq_resize", p, r)
                }
                Op::SrqSetLw(s, n) => {
                    let p = self.pick(s, Kind::Srq);
                    let r = (api.dat_srq_set_lw)(p.h, n);
                    self.check("dat_srq_set_lw", p, r)
                }
                Op::PspFree(s) => self.free("dat_psp_free", s, Kind::Psp, api.dat_psp_free),
                Op::PspQuery(s) => {
                    let p = self.pick(s, Kind::Psp);
                    let mut param: DAT_PSP_PARAM = zeroed();
                    let r = (api.dat_psp_query)(p.h, DAT_PSP_FIELD_ALL as _, &mut param);
                    self.check("dat_psp_query", p, r)?;
                    if let (DAT_SUCCESS, Some(i)) = (r, p.obj) && param.conn_qual != self.objs[i].qual {
                        return Err(format!("dat_psp_query says qualifier {} for a PSP made on {}", param.conn_qual, self.objs[i].qual));
                    }
                    Ok(())
                }
                Op::RspFree(s) => self.free("dat_rsp_free", s, Kind::Rsp, api.dat_rsp_free),
                Op::RspQuery(s) => {
                    let p = self.pick(s, Kind::Rsp);
                    let mut param: DAT_RSP_PARAM = zeroed();
                    let r = (api.dat_rsp_query)(p.h, DAT_RSP_FIELD_ALL as _, &mut param);
                    self.check("dat_rsp_query", p, r)
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
                Op::ExtCounters { h, which, counter, reset } => {
                    let p = self.any(h);
                    let ext = api.dat_extension_op;
                    // Room for any counter set (the IA's is the largest).
                    let mut out = [0u64; 128];
                    let r = match which {
                        Counters::Query => ext(p.h, DAT_IB_QUERY_COUNTERS_OP as i32, counter, out.as_mut_ptr(), reset as i32),
                        Counters::Start => ext(p.h, DAT_IB_START_COUNTERS_OP as i32, counter),
                        Counters::Stop => ext(p.h, DAT_IB_STOP_COUNTERS_OP as i32, counter),
                    };
                    self.check("dat_extension_op", p, r)
                }
                Op::ExtUnsupported { h, op } => {
                    let p = self.any(h);
                    // Only ops that take no further arguments: the rest would read what we did not pass.
                    let reads_args = (0..=5).contains(&op) || (26..=29).contains(&op)
                        || op == DAT_OPEN_EXTENSION_BASE as i32 || op == DAT_CLOSE_EXTENSION_BASE as i32;
                    let op = if reads_args { 1000 } else { op };
                    let r = (api.dat_extension_op)(p.h, op);
                    self.check("dat_extension_op", p, r)?;
                    if r == DAT_SUCCESS {
                        return Err(format!("dat_extension_op {op}, which no provider implements, succeeded"));
                    }
                    Ok(())
                }
                Op::ExtOpenQuery { close_with_ia_close } => {
                    let name = CString::new(self.target.name()).unwrap();
                    let mut ia = null_mut();
                    let (mut ia_attr, mut pr_attr): (DAT_IA_ATTR, DAT_PROVIDER_ATTR) = (zeroed(), zeroed());
                    let r = (api.dat_extension_op)(null_mut(), DAT_IB_OPEN_QUERY_OP as i32, name.as_ptr(), &mut ia as *mut DAT_IA_HANDLE,
                        DAT_IA_ALL, &mut ia_attr as *mut DAT_IA_ATTR, DAT_PROVIDER_FIELD_ALL as u64, &mut pr_attr as *mut DAT_PROVIDER_ATTR);
                    let none = Pick { h: null_mut(), bad: false, ia: None, obj: None };
                    self.check("dat_extension_op", none, r)?;
                    if r == DAT_SUCCESS {
                        let p = Pick { h: ia, bad: false, ia: None, obj: None };
                        let (call, r) = if close_with_ia_close {
                            ("dat_ia_close", (api.dat_ia_close)(ia, DAT_CLOSE_ABRUPT_FLAG))
                        } else {
                            ("dat_extension_op", (api.dat_extension_op)(ia, DAT_IB_CLOSE_QUERY_OP as i32))
                        };
                        self.check(call, p, r)?;
                        if r != DAT_SUCCESS {
                            return Err(format!("closing the IA dat_ib_open_query opened returned {}", crate::exec::name_of(r)));
                        }
                    }
                    Ok(())
                }
                Op::ExtUdFree { ep, cm, ah } => {
                    let p = self.pick(ep, Kind::Ep);
                    let r = if ah {
                        let a: DAT_IB_ADDR_HANDLE = zeroed();
                        (api.dat_extension_op)(p.h, DAT_IB_UD_AH_FREE_OP as i32, &a as *const DAT_IB_ADDR_HANDLE)
                    } else {
                        let c = self.any(cm);
                        (api.dat_extension_op)(p.h, DAT_IB_UD_CM_FREE_OP as i32, c.h)
                    };
                    self.check("dat_extension_op", p, r)
                }
                _ => unreachable!("{op:?} is not an object call"),
            }
        }
    }

    /// An EVD's real queue length, for telling when completions may overflow it.
    pub fn refresh_evd(&mut self, i: usize) -> Result<(), Finding> {
        let h = self.objs[i].h;
        // SAFETY: DAT_EVD_PARAM/DAT_EVENT are plain C data.
        let mut param: DAT_EVD_PARAM = unsafe { zeroed() };
        // SAFETY: a live EVD and our out-parameter.
        let r = unsafe { (self.api.dat_evd_query)(hp(h), DAT_EVD_FIELD_ALL as _, &mut param) };
        self.check("dat_evd_query", Pick { h: hp(h), bad: false, ia: None, obj: Some(i) }, r)?;
        if r == DAT_SUCCESS {
            // What the provider made: the real queue length and flags.
            (self.objs[i].qlen, self.objs[i].flags) = (param.evd_qlen, param.evd_flags);
        }
        Ok(())
    }
}
