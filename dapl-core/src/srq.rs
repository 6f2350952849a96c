//! Shared receive queues: one pool of receive buffers for many EPs.
//!
//! A receive completed from an SRQ does not say which EP it arrived on until
//! the completion is read, so those completions find their EP by QP number.

use crate::state::Provider;
use crate::dto::Ring;
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::pz::Pz;
use crate::backend::{DeviceOps, PdOps, SrqOps};
use dat_abi::status::{guard, invalid_arg, invalid_handle, invalid_state, no_resources};
use dat_abi::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Srq<T: Provider> {
    pub ia: &'static Ia<T>,
    ia_handle: usize,
    pz: &'static Pz<T>,
    pz_handle: usize,
    pub srq: T::Srq,
    ring: Ring,
    attr: Mutex<DAT_SRQ_ATTR>,
    /// EPs using this SRQ; it cannot be freed while any do.
    pub users: AtomicUsize,
}

pub const RANK: u8 = 4;


impl<T: Provider> Object for Srq<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_SRQ;
    const INVALID: u32 = DAT_INVALID_HANDLE_SRQ;
}

pub fn get<T: Provider>(h: DAT_SRQ_HANDLE) -> Result<&'static Srq<T>, DAT_RETURN> {
    handle::get::<Srq<T>>(h)
}

pub unsafe extern "C" fn create<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    pz_h: DAT_PZ_HANDLE,
    attr: *mut DAT_SRQ_ATTR,
    out: *mut DAT_SRQ_HANDLE,
) -> DAT_RETURN {
    guard("dat_srq_create", || {
        let ia = match handle::get::<Ia<T>>(ia_h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        let pz = match handle::get::<Pz<T>>(pz_h) {
            Ok(p) if std::ptr::eq(p.ia, ia) => p,
            _ => return invalid_handle(DAT_INVALID_HANDLE_PZ),
        };
        // SAFETY: null-checked consumer attributes, copied.
        let Some(a) = (unsafe { attr.as_ref() }).copied() else { return invalid_arg(DAT_INVALID_ARG3) };
        let d = ia.device.limits();
        if a.max_recv_dtos <= 0 || a.max_recv_dtos > d.max_srq_wr || a.max_recv_iov <= 0
            || a.max_recv_iov > d.max_srq_sge.min(crate::sge::MAX_IOV as i32) || a.low_watermark < 0
            || a.low_watermark > a.max_recv_dtos
        {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG4);
        }
        let srq = match pz.pd.create_srq(a.max_recv_dtos as u32, a.max_recv_iov as u32, a.low_watermark as u32) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("creating an SRQ: {e}");
                return no_resources(DAT_RESOURCE_SRQ);
            }
        };
        pz.users.fetch_add(1, Ordering::AcqRel);
        let h = handle::insert(Srq {
            ia,
            ia_handle: ia_h as usize,
            pz,
            pz_handle: pz_h as usize,
            srq,
            ring: Ring::new(a.max_recv_dtos as u32),
            attr: Mutex::new(a),
            users: AtomicUsize::new(0),
        }, ia.table());
        if let Ok(s) = handle::get::<Srq<T>>(h) {
            s.srq.set_context(h);
        }
        ia.adopt::<Srq<T>>(h, RANK, destroy::<T>);
        // SAFETY: checked non-null.
        unsafe { *out = h };
        DAT_SUCCESS
    })
}

fn destroy<T: Provider>(h: DAT_HANDLE) {
    let Ok(s) = get::<T>(h) else { return };
    s.ia.disown::<Srq<T>>(h);
    let pz = s.pz;
    if handle::remove::<Srq<T>>(h) {
        pz.users.fetch_sub(1, Ordering::AcqRel);
    }
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_SRQ_HANDLE) -> DAT_RETURN {
    guard("dat_srq_free", || {
        let s = match get::<T>(h) {
            Ok(s) => s,
            Err(e) => return e,
        };
        if s.users.load(Ordering::Acquire) != 0 {
            return invalid_state(DAT_INVALID_STATE_SRQ_IN_USE);
        }
        destroy::<T>(h);
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn post_recv<T: Provider>(
    h: DAT_SRQ_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
) -> DAT_RETURN {
    guard("dat_srq_post_recv", || {
        let s = match get::<T>(h) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let mut list = crate::sge::SgeList::<T>::new();
        let Some((count, len)) = list.fill(n, iov) else { return invalid_arg(DAT_INVALID_ARG2) };
        // SAFETY: plain 8-byte union.
        let Some(wr_id) = s.ring.claim(h as usize, unsafe { cookie.as_64 }, len, crate::dto::OP_SRQ_RECV, 0, true) else {
            return no_resources(DAT_RESOURCE_SRQ);
        };
        if let Err(rc) = s.srq.post_recv(wr_id, list.as_slice(count)) {
            s.ring.unclaim(wr_id);
            return if rc == libc::ENOMEM { no_resources(DAT_RESOURCE_SRQ) } else { invalid_arg(DAT_INVALID_ARG2) };
        }
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_SRQ_HANDLE, _mask: DAT_SRQ_PARAM_MASK, out: *mut DAT_SRQ_PARAM) -> DAT_RETURN {
    guard("dat_srq_query", || {
        let s = match get::<T>(h) {
            Ok(s) => s,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        let a = *s.attr.lock().unwrap_or_else(|e| e.into_inner());
        let outstanding = s.ring.outstanding() as DAT_COUNT;
        p.ia_handle = s.ia_handle as DAT_IA_HANDLE;
        p.srq_state = DAT_SRQ_STATE_OPERATIONAL;
        p.pz_handle = s.pz_handle as DAT_PZ_HANDLE;
        p.max_recv_dtos = a.max_recv_dtos;
        p.max_recv_iov = a.max_recv_iov;
        p.low_watermark = a.low_watermark;
        p.available_dto_count = outstanding;
        p.outstanding_dto_count = outstanding;
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn resize<T: Provider>(h: DAT_SRQ_HANDLE, qlen: DAT_COUNT) -> DAT_RETURN {
    guard("dat_srq_resize", || {
        let s = match get::<T>(h) {
            Ok(s) => s,
            Err(e) => return e,
        };
        if qlen <= 0 || qlen > s.ia.device.limits().max_srq_wr {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        // The slot ring is sized at creation; growing past it would let a
        // post overwrite a slot still in flight.
        if qlen as usize * 2 > s.ring.capacity() {
            return no_resources(DAT_RESOURCE_SRQ);
        }
        match s.srq.resize(qlen as u32) {
            Ok(()) => {
                s.attr.lock().unwrap_or_else(|e| e.into_inner()).max_recv_dtos = qlen;
                DAT_SUCCESS
            }
            Err(e) => {
                log::warn!("resizing SRQ to {qlen}: {e}");
                invalid_state(DAT_INVALID_STATE_SRQ_IN_USE)
            }
        }
    })
}

pub unsafe extern "C" fn set_lw<T: Provider>(h: DAT_SRQ_HANDLE, lw: DAT_COUNT) -> DAT_RETURN {
    guard("dat_srq_set_lw", || {
        let s = match get::<T>(h) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let max = s.attr.lock().unwrap_or_else(|e| e.into_inner()).max_recv_dtos;
        if lw < 0 || lw > max {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        match s.srq.set_limit(lw as u32) {
            Ok(()) => {
                s.attr.lock().unwrap_or_else(|e| e.into_inner()).low_watermark = lw;
                DAT_SUCCESS
            }
            Err(e) => {
                log::warn!("setting SRQ limit {lw}: {e}");
                invalid_arg(DAT_INVALID_ARG2)
            }
        }
    })
}
