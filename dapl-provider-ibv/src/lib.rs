//! `libdaplibv.so.2`: a DAT 2.0 provider over rdma-core verbs and rdma_cm.
//!
//! Named in dat.conf like DAPL's `libdaplofa.so.2`; the registry (ours or
//! the reference) loads it and calls `dat_provider_init` once per entry.
//!
//! The crate is a transport-independent core and one backend:
//!
//! - The core is every module directly under `src/`: DAT handles and the
//!   provider table, object lifetimes and parent/child bookkeeping, the
//!   EP/CR/SP state machines, EVD event queues and CNO notification,
//!   parameter validation and DAT error codes.
//! - `backend` is the contract between them: traits for the backend's
//!   objects (device, PD, MR, MW, SRQ, AH, CQ, QP, connection ids, the event
//!   thread) and the neutral data the core works in (`Completion`,
//!   `SendRequest`, `Limits`, `CmEvent`, `AsyncEvent`).
//! - `verbs/` implements it over libibverbs and librdmacm; every call into
//!   them, every verbs type, and rdma_cm's wire conventions shared with
//!   DAPL (reject header, qualifier-to-port mapping) live there.
//!
//! `backend::Active` picks the backend at compile time, so the post and
//! dequeue paths are static calls. A second backend is a module that
//! implements `backend::Transport` and a change to that one alias; the
//! `layering` test fails if a core module names verbs or rdma_cm directly.
//! Unit tests build the core over `mock`, an in-memory backend, so its
//! logic is tested on hosts without RDMA (`core_tests`).

mod async_error;
#[cfg_attr(test, allow(dead_code))]
mod backend;
mod cno;
mod connection;
mod counters;
#[cfg(test)]
mod core_tests;
mod cr;
mod dto;
mod ep;
mod evd;
mod extension;
mod generic;
mod handle;
mod ia;
mod instance;
#[cfg(test)]
mod layering;
mod lmr;
#[cfg(test)]
mod mock;
mod psp;
mod rmr;
mod pz;
mod rsp;
mod srq;
mod ud;
mod table;
// Unit tests run over the mock backend, which leaves parts of these unused.
#[cfg_attr(test, allow(dead_code))]
mod verbs;
mod wake;

use dat_abi::*;
use std::ffi::{CStr, CString};

/// A C string of `s`, with any NUL bytes in it dropped.
pub(crate) fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

type RegistryFn = unsafe extern "C" fn(*const DAT_PROVIDER, *const DAT_PROVIDER_INFO) -> DAT_RETURN;

/// The registry's add/remove entry, looked up at run time: this library
/// does not link libdat2, so whichever registry loaded it (ours or the
/// reference) is the one it registers with.
fn registry_fn(name: &CStr) -> Option<RegistryFn> {
    // SAFETY: dlsym on the global scope with a C string name.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    // SAFETY: the DAT registry defines these with exactly this signature.
    (!sym.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, RegistryFn>(sym) })
}

fn ia_name(info: &DAT_PROVIDER_INFO) -> String {
    let bytes: Vec<u8> = info.ia_name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// # Safety
/// Called by a DAT registry with its info for one dat.conf entry and that
/// entry's ia_params string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_provider_init(info: *const DAT_PROVIDER_INFO, params: *const std::os::raw::c_char) {
    dat_abi::logging::init("daplibv", &["DAPL_DBG_TYPE", "DAT_DBG_TYPE"]);
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the registry passes a valid info (null-checked).
        let Some(info) = (unsafe { info.as_ref() }) else { return };
        let name = ia_name(info);
        let params = if params.is_null() {
            String::new()
        } else {
            // SAFETY: a C string from the registry.
            unsafe { CStr::from_ptr(params) }.to_string_lossy().into_owned()
        };
        let Some(add) = registry_fn(c"dat_registry_add_provider") else {
            log::error!("no DAT registry in this process; cannot register IA '{name}'");
            return;
        };
        let Some(table) = table::for_instance(&name) else {
            log::error!("too many IA names registered; '{name}' refused");
            return;
        };
        instance::add(&name, &params);
        // SAFETY: our instance table, and the registry's own info.
        let rc = unsafe { add(table, info) };
        if rc != DAT_SUCCESS {
            log::error!("registering IA '{name}' failed: {rc:#x}");
            instance::remove(&name);
        } else {
            log::debug!("registered IA '{name}' with ia_params \"{params}\"");
        }
    });
}

/// # Safety
/// Called by the registry with the info given to `dat_provider_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_provider_fini(info: *const DAT_PROVIDER_INFO) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: null-checked registry info.
        let Some(info) = (unsafe { info.as_ref() }) else { return };
        let name = ia_name(info);
        instance::remove(&name);
        if let (Some(remove), Some(table)) = (registry_fn(c"dat_registry_remove_provider"), table::for_instance(&name)) {
            // SAFETY: as for add.
            unsafe { remove(table, info) };
        }
    });
}
