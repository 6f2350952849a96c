//! The blocking entry points, `dat_evd_wait` and `dat_cno_wait`: routed like
//! the others (`forward.rs`), but a consumer may cancel the thread while the
//! provider sleeps (`dat_abi::cancel`). The handle is checked under the panic
//! guard; the provider is called outside it, with the C-unwind ABI, so the
//! cancelled thread's unwind goes on to the consumer, through our provider's
//! frames or the reference DAPL's alike.

use crate::dispatch;
use crate::status::NOT_IMPLEMENTED;
use dat_abi::cancel;
use dat_abi::status::{INTERNAL, guard_or};
use dat_abi::*;

type EvdWait = unsafe extern "C-unwind" fn(DAT_EVD_HANDLE, DAT_TIMEOUT, DAT_COUNT, *mut DAT_EVENT, *mut DAT_COUNT) -> DAT_RETURN;
type CnoWait = unsafe extern "C-unwind" fn(DAT_CNO_HANDLE, DAT_TIMEOUT, *mut DAT_EVD_HANDLE) -> DAT_RETURN;

/// The provider's function for an object handle, found under the guard.
#[cold]
#[inline(never)]
fn resolve<F>(name: &str, h: DAT_HANDLE, minor: u32, member: impl FnOnce(&DAT_PROVIDER) -> Option<F>) -> Result<(F, DAT_HANDLE), DAT_RETURN> {
    cancel::deferred(|| {
        guard_or(name, Err(INTERNAL), || {
            let (table, h) = dispatch::object(h, minor)?;
            member(table).map(|f| (f, h)).ok_or(NOT_IMPLEMENTED)
        })
    })
}

/// # Safety
/// The DAT 2.0 contract for this call: pointers valid as documented.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn dat_evd_wait(
    evd: DAT_EVD_HANDLE,
    timeout: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
) -> DAT_RETURN {
    // As in forward.rs: found without a guard, nothing to defer cancellation for.
    // SAFETY: fast_object gives registered tables only.
    let found = match dispatch::fast_object(evd).and_then(|t| unsafe { (*t).evd_wait_func }) {
        Some(f) => Ok((f, evd)),
        None => resolve("dat_evd_wait", evd, DAT_INVALID_HANDLE_EVD_REQUEST, |t| t.evd_wait_func),
    };
    match found {
        Err(e) => e,
        Ok((f, evd)) => {
            // SAFETY: the same C signature; C-unwind only lets a cancelled
            // thread's unwind pass back out of the provider.
            let f: EvdWait = unsafe { std::mem::transmute(f) };
            // SAFETY: a registered provider's function, the consumer's arguments.
            unsafe { f(evd, timeout, threshold, event, nmore) }
        }
    }
}

/// # Safety
/// The DAT 2.0 contract for this call: pointers valid as documented.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn dat_cno_wait(cno: DAT_CNO_HANDLE, timeout: DAT_TIMEOUT, evd: *mut DAT_EVD_HANDLE) -> DAT_RETURN {
    // SAFETY: as above.
    let found = match dispatch::fast_object(cno).and_then(|t| unsafe { (*t).cno_wait_func }) {
        Some(f) => Ok((f, cno)),
        None => resolve("dat_cno_wait", cno, DAT_INVALID_HANDLE_CNO, |t| t.cno_wait_func),
    };
    match found {
        Err(e) => e,
        Ok((f, cno)) => {
            // SAFETY: as for dat_evd_wait.
            let f: CnoWait = unsafe { std::mem::transmute(f) };
            // SAFETY: as for dat_evd_wait.
            unsafe { f(cno, timeout, evd) }
        }
    }
}

// The argument lists above are the headers': with the C ABI they must be the
// provider table's types (forward.rs checks its calls the same way).
// Spelled out, not aliased: the point is that they read as the headers do.
#[allow(clippy::type_complexity)]
const _: fn(DAT_EVD_WAIT_FUNC) -> Option<unsafe extern "C" fn(DAT_EVD_HANDLE, DAT_TIMEOUT, DAT_COUNT, *mut DAT_EVENT, *mut DAT_COUNT) -> DAT_RETURN> = |f| f;
const _: fn(DAT_CNO_WAIT_FUNC) -> Option<unsafe extern "C" fn(DAT_CNO_HANDLE, DAT_TIMEOUT, *mut DAT_EVD_HANDLE) -> DAT_RETURN> = |f| f;
