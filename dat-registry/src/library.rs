//! Provider libraries: loading one for a dat.conf entry, running its
//! `dat_provider_init`, and `dat_provider_fini` once its last IA closes.

use crate::conf::Entry;
use crate::providers::{self, Key};
use crate::status::{DAT_LIBRARY_LOAD_FAILED, DAT_PROVIDER_INIT_FAILED, not_found};
use dat_abi::*;
use std::collections::HashMap;
use std::ffi::CString;
use std::path::Path;
use std::sync::Mutex;

struct Active {
    /// Boxed so the address the provider saw at init stays valid until fini.
    info: Box<DAT_PROVIDER_INFO>,
    table: &'static DAT_PROVIDER,
    fini: DAT_PROVIDER_FINI_FUNC,
    opens: usize,
}

// The provider table is static data of a library we never unload.
unsafe impl Send for Active {}

/// Per dat.conf entry (by index), the provider it has running.
static ACTIVE: Mutex<Option<HashMap<usize, Active>>> = Mutex::new(None);

pub fn info_for(entry: &Entry) -> DAT_PROVIDER_INFO {
    let mut info = DAT_PROVIDER_INFO::default();
    for (dst, src) in info.ia_name.iter_mut().zip(entry.ia_name.bytes().take(crate::conf::MAX_IA_NAME)) {
        *dst = src as _;
    }
    info.dapl_version_major = entry.api_major;
    info.dapl_version_minor = entry.api_minor;
    info.is_thread_safe = entry.thread_safe as DAT_BOOLEAN;
    info
}

fn where_(conf_path: &Path, entry: &Entry) -> String {
    format!("{}:{}: IA '{}'", conf_path.display(), entry.line, entry.ia_name)
}

/// Loads and initialises the entry's provider if needed and counts one more
/// open on it. Returns its table, or the error the consumer should see.
pub fn acquire(conf_path: &Path, index: usize, entry: &Entry) -> Result<&'static DAT_PROVIDER, DAT_RETURN> {
    let mut guard = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
    let active = guard.get_or_insert_with(HashMap::new);
    if let Some(a) = active.get_mut(&index) {
        a.opens += 1;
        return Ok(a.table);
    }
    let at = where_(conf_path, entry);
    // SAFETY: loading a library runs its constructors; naming it in dat.conf
    // is the administrator's statement that it is a DAT provider.
    let lib = unsafe { libloading::Library::new(&entry.library) }.map_err(|e| {
        log::error!("{at}: cannot load provider library '{}': {e}", entry.library);
        not_found(DAT_LIBRARY_LOAD_FAILED)
    })?;
    // SAFETY: the symbol's type is fixed by dat_registry.h.
    let init: DAT_PROVIDER_INIT_FUNC = unsafe { lib.get::<DAT_PROVIDER_INIT_FUNC>(b"dat_provider_init\0") }
        .map(|s| *s)
        .map_err(|e| {
            log::error!("{at}: '{}' is not a DAT provider (no dat_provider_init): {e}", entry.library);
            not_found(DAT_LIBRARY_LOAD_FAILED)
        })?;
    // SAFETY: as above; fini is optional.
    let fini: DAT_PROVIDER_FINI_FUNC =
        unsafe { lib.get::<DAT_PROVIDER_FINI_FUNC>(b"dat_provider_fini\0") }.map(|s| *s).unwrap_or(None);
    // Provider code keeps threads and callbacks alive past any fini, so the
    // library stays mapped for the life of the process.
    std::mem::forget(lib);
    let Some(init) = init else {
        log::error!("{at}: dat_provider_init in '{}' is NULL", entry.library);
        return Err(not_found(DAT_LIBRARY_LOAD_FAILED));
    };
    let info = Box::new(info_for(entry));
    let params = CString::new(entry.ia_params.replace('\0', "")).unwrap_or_default();
    log::debug!("{at}: calling dat_provider_init in '{}' with \"{}\"", entry.library, entry.ia_params);
    // SAFETY: both pointers stay valid for the call; the info for longer.
    unsafe { init(&*info, params.as_ptr()) };
    let Some(table) = providers::lookup(&Key::from_info(&info)) else {
        log::error!(
            "{at}: dat_provider_init in '{}' did not register the IA (its device or parameters \"{}\" may be wrong; set DAPL_DBG_TYPE for the provider's own messages)",
            entry.library, entry.ia_params
        );
        return Err(not_found(DAT_PROVIDER_INIT_FAILED));
    };
    // SAFETY: registered tables are static data of a library we never unload.
    let table: &'static DAT_PROVIDER = unsafe { &*table };
    active.insert(index, Active { info, table, fini, opens: 1 });
    Ok(table)
}

/// Counts one open fewer; the last one runs the provider's fini.
pub fn release(index: usize) {
    let mut guard = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(active) = guard.as_mut() else { return };
    let Some(a) = active.get_mut(&index) else { return };
    a.opens -= 1;
    if a.opens == 0 {
        let a = active.remove(&index).expect("present");
        log::debug!("last IA of '{}' closed; calling dat_provider_fini", providers::name_of(&a.info));
        if let Some(fini) = a.fini {
            // SAFETY: the info is the one init was given; it outlives the call.
            unsafe { fini(&*a.info) };
        }
        // A provider whose fini forgot to unregister must not stay dispatchable
        // with a table that no longer has an open IA behind it.
        let _ = providers::remove(a.table, &a.info);
    }
}
