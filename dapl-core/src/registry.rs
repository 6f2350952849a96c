//! dat_provider_init and dat_provider_fini: registering each dat.conf entry
//! that names this library with whichever DAT registry loaded it.

use crate::instance;
use crate::state::Provider;
use crate::table;
use dat_abi::*;
use std::ffi::CStr;

type RegistryFn = unsafe extern "C" fn(*const DAT_PROVIDER, *const DAT_PROVIDER_INFO) -> DAT_RETURN;

/// The registry's add/remove entry, looked up at run time: the provider
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
pub unsafe fn init<T: Provider>(info: *const DAT_PROVIDER_INFO, params: *const std::os::raw::c_char) {
    dat_abi::logging::init(T::NAME, &["DAPL_DBG_TYPE", "DAT_DBG_TYPE"]);
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
        let Some(table) = table::for_instance::<T>(&name) else {
            log::error!("too many IA names registered; '{name}' refused");
            return;
        };
        instance::add::<T>(&name, &params);
        // SAFETY: our instance table, and the registry's own info.
        let rc = unsafe { add(table, info) };
        if rc != DAT_SUCCESS {
            log::error!("registering IA '{name}' failed: {rc:#x}");
            instance::remove::<T>(&name);
        } else {
            log::debug!("registered IA '{name}' with ia_params \"{params}\"");
        }
    });
}

/// # Safety
/// Called by the registry with the info given to `dat_provider_init`.
pub unsafe fn fini<T: Provider>(info: *const DAT_PROVIDER_INFO) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: null-checked registry info.
        let Some(info) = (unsafe { info.as_ref() }) else { return };
        let name = ia_name(info);
        instance::remove::<T>(&name);
        if let (Some(remove), Some(table)) = (registry_fn(c"dat_registry_remove_provider"), table::for_instance::<T>(&name)) {
            // SAFETY: as for add.
            unsafe { remove(table, info) };
        }
    });
}
