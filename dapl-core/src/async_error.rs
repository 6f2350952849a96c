//! Device async events become DAT async events on the owning IA's async
//! EVD: a CQ overrun is an EVD overflow, a QP error breaks its EP, an SRQ
//! below its limit is the low-watermark event. Each backend object carries
//! its DAT handle as its context, and handles are type-stable, so a late
//! event for a freed object is recognised and dropped.
//!
//! The CM thread handles these without the CM lock (verbs destroys a QP
//! under that lock, and the destroy waits for this thread to acknowledge
//! the QP's events), so a consumer may be freeing the very object an event
//! names: the objects are pinned while they are read, and `remove` waits
//! for the pin before it drops one. CNO agents the event triggers run
//! after the pins go and after the backend's acknowledgement, since an
//! agent may free what was pinned, or wait for a thread freeing it.

use crate::state::Provider;
use crate::backend::AsyncEvent;
use crate::ep::Ep;
use crate::evd::{self, Evd};
use crate::handle::{self, Pinned};
use crate::quiesce;
use crate::srq::Srq;
use dat_abi::*;

/// `done` goes before the CNO agents: the backend acknowledges the event
/// there, and an agent may wait for a thread freeing the object it names.
pub fn handle_event<T: Provider>(ev: &AsyncEvent, done: &mut dyn FnMut()) {
    quiesce::with_agents_held(|| {
        report::<T>(ev);
        done();
    })
}

fn report<T: Provider>(ev: &AsyncEvent) {
    match *ev {
        AsyncEvent::CqError { context } => {
            let h = context as DAT_HANDLE;
            if let Some(e) = handle::pin::<Evd<T>>(h) {
                log::warn!("EVD {h:p}: completion queue overrun");
                e.overflows.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                e.overran.store(true, std::sync::atomic::Ordering::Release);
                e.ia.counters.add(DCNT_IA_ASYNC_ERROR, 1);
                e.ia.counters.add(DCNT_IA_ASYNC_CQ_ERROR, 1);
                post::<T>(e.ia.async_evd(), DAT_ASYNC_ERROR_EVD_OVERFLOW, h, DAT_EVD_OVERFLOW_ERROR as DAT_COUNT);
            }
        }
        AsyncEvent::QpError { context, code } => {
            let h = context as DAT_HANDLE;
            if let Some(ep) = handle::pin::<Ep<T>>(h) {
                log::warn!("EP {h:p}: QP error (async event {code})");
                ep.ia.counters.add(DCNT_IA_ASYNC_ERROR, 1);
                ep.ia.counters.add(DCNT_IA_ASYNC_QP_ERROR, 1);
                post::<T>(ep.ia.async_evd(), DAT_ASYNC_ERROR_EP_BROKEN, h, DAT_EP_OTHER_ERROR as DAT_COUNT);
            }
        }
        AsyncEvent::SrqLimitReached { context } | AsyncEvent::SrqError { context } => {
            let h = context as DAT_HANDLE;
            if let Some(s) = handle::pin::<Srq<T>>(h) {
                s.ia.counters.add(DCNT_IA_ASYNC_ERROR, 1);
                // DAT names the reason, not an event number, for the low
                // watermark; it comes as an async error about the SRQ.
                let reason = if matches!(ev, AsyncEvent::SrqError { .. }) {
                    DAT_SRQ_OTHER_ERROR
                } else {
                    DAT_SRQ_LOW_WATERMARK_EVENT
                };
                post::<T>(s.ia.async_evd(), DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, h, reason as DAT_COUNT);
            }
        }
        AsyncEvent::Other { code } => log::debug!("device async event {code} (not reported to DAT consumers)"),
    }
}

fn post<T: Provider>(evd_h: DAT_EVD_HANDLE, number: DAT_EVENT_NUMBER, about: DAT_HANDLE, reason: DAT_COUNT) {
    let evd: Option<Pinned<Evd<T>>> = handle::pin(evd_h);
    match evd {
        Some(evd) => {
            let mut e = evd::new_event(number);
            e.event_data.asynch_error_event_data = DAT_ASYNCH_ERROR_EVENT_DATA { dat_handle: about, reason };
            evd.post(evd_h, e);
        }
        None => log::warn!("async event {number:#x} for {about:p}, but the IA has no async EVD"),
    }
}
