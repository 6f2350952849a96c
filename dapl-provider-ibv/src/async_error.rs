//! Verbs async events become DAT async events on the owning IA's async EVD:
//! a CQ overrun is an EVD overflow, a QP error breaks its EP, an SRQ below
//! its limit is the low-watermark event. Each verbs object carries its DAT
//! handle as its context, and handles are type-stable, so a late event for
//! a freed object is recognised and dropped.

use crate::ep::Ep;
use crate::evd::{self, Evd};
use crate::handle;
use crate::srq::Srq;
use dat_abi::*;
use rdma_core_sys as ibv;

pub fn handle_event(ev: &ibv::ibv_async_event) {
    // SAFETY: the union member is the one event_type names; the object it
    // points at stays alive until the event is acked (verbs destroy waits).
    unsafe {
        match ev.event_type {
            ibv::IBV_EVENT_CQ_ERR => {
                let h = (*ev.element.cq).cq_context as DAT_HANDLE;
                if let Ok(e) = handle::get::<Evd>(h) {
                    log::warn!("EVD {h:p}: completion queue overrun");
                    e.overflows.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    post(e.ia.async_evd(), DAT_ASYNC_ERROR_EVD_OVERFLOW, h, DAT_EVD_OVERFLOW_ERROR as DAT_COUNT);
                }
            }
            ibv::IBV_EVENT_QP_FATAL | ibv::IBV_EVENT_QP_REQ_ERR | ibv::IBV_EVENT_QP_ACCESS_ERR | ibv::IBV_EVENT_PATH_MIG_ERR => {
                let h = (*ev.element.qp).qp_context as DAT_HANDLE;
                if let Ok(ep) = handle::get::<Ep>(h) {
                    log::warn!("EP {h:p}: QP error (verbs async event {})", ev.event_type);
                    post(ep.ia.async_evd(), DAT_ASYNC_ERROR_EP_BROKEN, h, DAT_EP_OTHER_ERROR as DAT_COUNT);
                }
            }
            ibv::IBV_EVENT_SRQ_LIMIT_REACHED | ibv::IBV_EVENT_SRQ_ERR => {
                let h = (*ev.element.srq).srq_context as DAT_HANDLE;
                if let Ok(s) = handle::get::<Srq>(h) {
                    // DAT names the reason, not an event number, for the low
                    // watermark; it comes as an async error about the SRQ.
                    let reason = if ev.event_type == ibv::IBV_EVENT_SRQ_ERR {
                        DAT_SRQ_OTHER_ERROR
                    } else {
                        DAT_SRQ_LOW_WATERMARK_EVENT
                    };
                    post(s.ia.async_evd(), DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, h, reason as DAT_COUNT);
                }
            }
            other => log::debug!("verbs async event {other} (not reported to DAT consumers)"),
        }
    }
}

fn post(evd_h: DAT_EVD_HANDLE, number: DAT_EVENT_NUMBER, about: DAT_HANDLE, reason: DAT_COUNT) {
    match handle::get::<Evd>(evd_h) {
        Ok(evd) => {
            let mut e = evd::new_event(number);
            e.event_data.asynch_error_event_data = DAT_ASYNCH_ERROR_EVENT_DATA { dat_handle: about, reason };
            evd.post(evd_h, e);
        }
        Err(_) => log::warn!("async event {number:#x} for {about:p}, but the IA has no async EVD"),
    }
}
