//! The real registry, `libdat2.so.2`, loaded at run time by its soname so the
//! normal dlopen search (LD_LIBRARY_PATH, ld.so cache) picks the same one the
//! user's programs get: ours or the reference. dat-info links the
//! `dat-registry` rlib only for its dat.conf parser; no `dat_*` call goes
//! through that copy.

use crate::attrs::{IaInfo, read_ia_info};
use dat_abi::*;
use std::ffi::{CStr, CString, c_char};
use std::path::PathBuf;
use tool_common::maps::mapped_file;

type OpenFn = unsafe extern "C" fn(
    DAT_NAME_PTR,
    DAT_COUNT,
    *mut DAT_EVD_HANDLE,
    *mut DAT_IA_HANDLE,
    DAT_UINT32,
    DAT_UINT32,
    DAT_BOOLEAN,
) -> DAT_RETURN;
type QueryFn = unsafe extern "C" fn(
    DAT_IA_HANDLE,
    *mut DAT_EVD_HANDLE,
    DAT_IA_ATTR_MASK,
    *mut DAT_IA_ATTR,
    DAT_PROVIDER_ATTR_MASK,
    *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN;
type CloseFn = unsafe extern "C" fn(DAT_IA_HANDLE, DAT_CLOSE_FLAGS) -> DAT_RETURN;
type StrerrorFn = unsafe extern "C" fn(DAT_RETURN, *mut *const c_char, *mut *const c_char) -> DAT_RETURN;

/// `udat.h`'s DAT_IA_FIELD_ALL / DAT_PROVIDER_FIELD_ALL (UINT64_C macros,
/// which bindgen does not carry over).
pub const DAT_IA_FIELD_ALL: DAT_IA_ATTR_MASK = 0x3F_FFFF_FFFF;
pub const DAT_PROVIDER_FIELD_ALL: DAT_PROVIDER_ATTR_MASK = 0x7FFF_FFFF;

pub const SONAME: &str = "libdat2.so.2";

pub struct LibDat2 {
    _lib: libloading::Library,
    open: OpenFn,
    query: QueryFn,
    close: CloseFn,
    strerror: StrerrorFn,
    /// The file the loader picked, from /proc/self/maps.
    pub path: Option<PathBuf>,
}


impl LibDat2 {
    /// Loads libdat2.so.2 the way a program linked with -ldat2 would find it.
    pub fn load() -> Result<LibDat2, String> {
        // RTLD_GLOBAL, as for a program linked with -ldat2: providers such as
        // libdaplofa.so.2 do not list libdat2 as NEEDED and find
        // dat_registry_add_provider & co. in the global scope.
        use libloading::os::unix::{RTLD_GLOBAL, RTLD_NOW};
        // SAFETY: loading the registry runs its constructors, as any DAT program does.
        let lib: libloading::Library = unsafe { libloading::os::unix::Library::open(Some(SONAME), RTLD_NOW | RTLD_GLOBAL) }
            .map_err(|e| e.to_string())?
            .into();
        // SAFETY: the types are the DAT 2.0 prototypes (dat.h/udat.h), built
        // from dat_abi's types.
        unsafe {
            let open: OpenFn = *lib.get::<OpenFn>(b"dat_ia_openv\0").map_err(|e| e.to_string())?;
            let query: QueryFn = *lib.get::<QueryFn>(b"dat_ia_query\0").map_err(|e| e.to_string())?;
            let close: CloseFn = *lib.get::<CloseFn>(b"dat_ia_close\0").map_err(|e| e.to_string())?;
            let strerror: StrerrorFn = *lib.get::<StrerrorFn>(b"dat_strerror\0").map_err(|e| e.to_string())?;
            let path = mapped_file(open as usize);
            Ok(LibDat2 { _lib: lib, open, query, close, strerror, path })
        }
    }

    /// "DAT_PROVIDER_NOT_FOUND DAT_NAME_NOT_REGISTERED" (as dat_strerror says it).
    pub fn strerror(&self, r: DAT_RETURN) -> String {
        let mut major: *const c_char = std::ptr::null();
        let mut minor: *const c_char = std::ptr::null();
        // SAFETY: dat_strerror writes two static strings (or leaves them).
        let rc = unsafe { (self.strerror)(r, &mut major, &mut minor) };
        let s = |p: *const c_char| {
            // SAFETY: NULL or a static C string from the registry.
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        match (rc, s(major), s(minor)) {
            (DAT_SUCCESS, Some(a), Some(b)) if !b.is_empty() => format!("{a} {b}"),
            (DAT_SUCCESS, Some(a), _) => a,
            _ => format!("{r:#x}"),
        }
    }

    /// Opens the IA through the registry, queries everything, closes it.
    pub fn probe(&self, name: &str, major: u32, minor: u32, thread_safe: bool) -> Result<IaInfo, (DAT_RETURN, String)> {
        let cname = CString::new(name).map_err(|_| (0, "IA name contains a NUL byte".to_owned()))?;
        let mut evd: DAT_EVD_HANDLE = std::ptr::null_mut();
        let mut ia: DAT_IA_HANDLE = std::ptr::null_mut();
        // SAFETY: valid pointers for the call; the registry copies the name.
        let r = unsafe {
            (self.open)(cname.as_ptr() as DAT_NAME_PTR, 8, &mut evd, &mut ia, major, minor, thread_safe as DAT_BOOLEAN)
        };
        if r != DAT_SUCCESS {
            return Err((r, self.strerror(r)));
        }
        let mut ia_attr = DAT_IA_ATTR::default();
        let mut prov_attr = DAT_PROVIDER_ATTR::default();
        let mut qevd: DAT_EVD_HANDLE = std::ptr::null_mut();
        // SAFETY: an open IA and attribute structs we own.
        let q = unsafe {
            (self.query)(ia, &mut qevd, DAT_IA_FIELD_ALL, &mut ia_attr, DAT_PROVIDER_FIELD_ALL, &mut prov_attr)
        };
        // Pointers inside the attrs belong to the provider: read before close.
        let info = if q == DAT_SUCCESS {
            // SAFETY: filled in by a successful dat_ia_query.
            Ok(unsafe { read_ia_info(&ia_attr, &prov_attr) })
        } else {
            Err((q, format!("dat_ia_query failed: {}", self.strerror(q))))
        };
        // SAFETY: the IA we opened.
        let c = unsafe { (self.close)(ia, DAT_CLOSE_ABRUPT_FLAG) };
        let mut info = info?;
        if c != DAT_SUCCESS {
            info.close_error = Some(self.strerror(c));
        }
        Ok(info)
    }
}

/// Whether a library loads, and whether it is a DAT provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibProbe {
    LoadFailed(String),
    NotProvider { loaded_from: Option<PathBuf> },
    Provider { loaded_from: Option<PathBuf> },
}

/// dlopen()s a provider library as the registry does (RTLD_LAZY|RTLD_LOCAL)
/// and looks for `dat_provider_init`. The library stays loaded (the registry
/// never unloads providers either).
pub fn probe_library(name: &str) -> LibProbe {
    // SAFETY: loading runs the library's constructors, as the registry would.
    let lib = match unsafe { libloading::Library::new(name) } {
        Ok(l) => l,
        Err(e) => return LibProbe::LoadFailed(e.to_string()),
    };
    // SAFETY: only the symbol's address is used.
    let sym = unsafe { lib.get::<*const u8>(b"dat_provider_init\0") }.ok().map(|s| *s as usize);
    let any = unsafe { lib.get::<*const u8>(b"_init\0") }.ok().map(|s| *s as usize);
    let loaded_from = sym.or(any).and_then(mapped_file);
    std::mem::forget(lib);
    match sym {
        Some(_) => LibProbe::Provider { loaded_from },
        None => LibProbe::NotProvider { loaded_from },
    }
}
