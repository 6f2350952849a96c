//! The registry, `libdat2.so.2`, loaded at run time by its soname: the normal
//! dlopen search (LD_LIBRARY_PATH, ld.so cache) picks ours or the reference
//! one, so the same binary measures either stack. The entry points are typed
//! with the provider-table function types bindgen made from the headers, so a
//! prototype here cannot drift from `dat.h`/`udat.h`.

use dat_abi::*;
use std::ffi::{CStr, CString, c_char};
use std::path::PathBuf;
use tool_common::maps::mapped_file;

pub const SONAME: &str = "libdat2.so.2";

/// `DAT_GET_TYPE`: the major code without the class bits.
pub fn major(r: DAT_RETURN) -> u32 {
    r & 0x3FFF_0000
}

type OpenFn = unsafe extern "C" fn(
    DAT_NAME_PTR,
    DAT_COUNT,
    *mut DAT_EVD_HANDLE,
    *mut DAT_IA_HANDLE,
    DAT_UINT32,
    DAT_UINT32,
    DAT_BOOLEAN,
) -> DAT_RETURN;
type StrerrorFn = unsafe extern "C" fn(DAT_RETURN, *mut *const c_char, *mut *const c_char) -> DAT_RETURN;

/// The function inside a bindgen `Option<unsafe extern "C" fn ...>` typedef.
pub trait Inner {
    type F: Copy;
}
impl<F: Copy> Inner for Option<F> {
    type F = F;
}

macro_rules! entry_points {
    ($($field:ident: $ty:ident = $sym:literal;)*) => {
        /// The `dat_*` entry points dat-perf calls, resolved once.
        pub struct Dat {
            _lib: libloading::Library,
            ia_openv: OpenFn,
            strerror_fn: StrerrorFn,
            /// The file the loader picked, from /proc/self/maps.
            pub path: Option<PathBuf>,
            $(pub $field: <$ty as Inner>::F,)*
        }

        impl Dat {
            /// Loads libdat2.so.2 the way a program linked with -ldat2 finds it.
            pub fn load() -> Result<Dat, String> {
                // RTLD_GLOBAL as for a linked program: providers such as
                // libdaplofa.so.2 do not list libdat2 as NEEDED and find
                // dat_registry_add_provider in the global scope.
                use libloading::os::unix::{RTLD_GLOBAL, RTLD_NOW};
                // SAFETY: loading the registry runs its constructors, as any DAT program does.
                let lib: libloading::Library = unsafe { libloading::os::unix::Library::open(Some(SONAME), RTLD_NOW | RTLD_GLOBAL) }
                    .map_err(|e| format!("cannot load {SONAME}: {e}"))?
                    .into();
                let missing = |s: &str, e: libloading::Error| format!("{SONAME} has no {s}: {e}");
                // SAFETY: each symbol is the DAT 2.0 entry point of that name, typed as in the headers.
                unsafe {
                    let ia_openv = *lib.get::<OpenFn>(b"dat_ia_openv\0").map_err(|e| missing("dat_ia_openv", e))?;
                    let strerror_fn = *lib.get::<StrerrorFn>(b"dat_strerror\0").map_err(|e| missing("dat_strerror", e))?;
                    $(
                        let $field = (*lib.get::<$ty>(concat!($sym, "\0").as_bytes()).map_err(|e| missing($sym, e))?)
                            .ok_or_else(|| format!("{SONAME}: {} is NULL", $sym))?;
                    )*
                    let path = mapped_file(ia_openv as usize);
                    Ok(Dat { _lib: lib, ia_openv, strerror_fn, path, $($field,)* })
                }
            }
        }
    };
}

entry_points! {
    ia_query: DAT_IA_QUERY_FUNC = "dat_ia_query";
    ia_close: DAT_IA_CLOSE_FUNC = "dat_ia_close";
    pz_create: DAT_PZ_CREATE_FUNC = "dat_pz_create";
    pz_free: DAT_PZ_FREE_FUNC = "dat_pz_free";
    lmr_create: DAT_LMR_CREATE_FUNC = "dat_lmr_create";
    lmr_free: DAT_LMR_FREE_FUNC = "dat_lmr_free";
    evd_create: DAT_EVD_CREATE_FUNC = "dat_evd_create";
    evd_free: DAT_EVD_FREE_FUNC = "dat_evd_free";
    evd_dequeue: DAT_EVD_DEQUEUE_FUNC = "dat_evd_dequeue";
    evd_wait: DAT_EVD_WAIT_FUNC = "dat_evd_wait";
    ep_create: DAT_EP_CREATE_FUNC = "dat_ep_create";
    ep_free: DAT_EP_FREE_FUNC = "dat_ep_free";
    ep_connect: DAT_EP_CONNECT_FUNC = "dat_ep_connect";
    ep_disconnect: DAT_EP_DISCONNECT_FUNC = "dat_ep_disconnect";
    ep_post_send: DAT_EP_POST_SEND_FUNC = "dat_ep_post_send";
    ep_post_recv: DAT_EP_POST_RECV_FUNC = "dat_ep_post_recv";
    ep_post_rdma_read: DAT_EP_POST_RDMA_READ_FUNC = "dat_ep_post_rdma_read";
    ep_post_rdma_write: DAT_EP_POST_RDMA_WRITE_FUNC = "dat_ep_post_rdma_write";
    psp_create: DAT_PSP_CREATE_FUNC = "dat_psp_create";
    psp_free: DAT_PSP_FREE_FUNC = "dat_psp_free";
    cr_accept: DAT_CR_ACCEPT_FUNC = "dat_cr_accept";
}


impl Dat {
    /// "DAT_INVALID_PARAMETER DAT_INVALID_ARG3" (as dat_strerror says it).
    pub fn strerror(&self, r: DAT_RETURN) -> String {
        let mut major: *const c_char = std::ptr::null();
        let mut minor: *const c_char = std::ptr::null();
        // SAFETY: dat_strerror writes two static strings (or leaves them).
        let rc = unsafe { (self.strerror_fn)(r, &mut major, &mut minor) };
        let s = |p: *const c_char| {
            // SAFETY: NULL or a static C string from the registry.
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        match (rc, s(major), s(minor)) {
            (DAT_SUCCESS, Some(a), Some(b)) if !b.is_empty() => format!("{a} {b} ({r:#x})"),
            (DAT_SUCCESS, Some(a), _) => format!("{a} ({r:#x})"),
            _ => format!("{r:#x}"),
        }
    }

    /// Ok for DAT_SUCCESS, else "CALL failed: STRERROR".
    pub fn check(&self, r: DAT_RETURN, call: &str) -> Result<(), String> {
        if r == DAT_SUCCESS { Ok(()) } else { Err(format!("{call} failed: {}", self.strerror(r))) }
    }

    /// dat_ia_open(name, DAT 2.0, not thread-safe): any entry of that name
    /// qualifies, thread-safe or not.
    pub fn ia_open(&self, name: &str) -> Result<DAT_IA_HANDLE, String> {
        let cname = CString::new(name).map_err(|_| "IA name contains a NUL byte".to_owned())?;
        let mut evd: DAT_EVD_HANDLE = std::ptr::null_mut();
        let mut ia: DAT_IA_HANDLE = std::ptr::null_mut();
        // SAFETY: valid out pointers; the registry copies the name.
        let r = unsafe { (self.ia_openv)(cname.as_ptr() as DAT_NAME_PTR, 16, &mut evd, &mut ia, 2, 0, DAT_FALSE) };
        self.check(r, &format!("dat_ia_open({name})"))?;
        Ok(ia)
    }

    pub fn ia_attr(&self, ia: DAT_IA_HANDLE) -> Result<DAT_IA_ATTR, String> {
        let mut attr = DAT_IA_ATTR::default();
        let mut evd: DAT_EVD_HANDLE = std::ptr::null_mut();
        // SAFETY: an open IA and an attribute struct we own; no provider attrs asked for.
        let r = unsafe { (self.ia_query)(ia, &mut evd, 0x3F_FFFF_FFFF, &mut attr, 0, std::ptr::null_mut()) };
        self.check(r, "dat_ia_query")?;
        Ok(attr)
    }

    pub fn pz(&self, ia: DAT_IA_HANDLE) -> Result<DAT_PZ_HANDLE, String> {
        let mut pz: DAT_PZ_HANDLE = std::ptr::null_mut();
        // SAFETY: an open IA and an out pointer.
        let r = unsafe { (self.pz_create)(ia, &mut pz) };
        self.check(r, "dat_pz_create")?;
        Ok(pz)
    }

    pub fn evd(&self, ia: DAT_IA_HANDLE, qlen: i32, flags: DAT_EVD_FLAGS) -> Result<DAT_EVD_HANDLE, String> {
        let mut evd: DAT_EVD_HANDLE = std::ptr::null_mut();
        // SAFETY: an open IA, no CNO, an out pointer.
        let r = unsafe { (self.evd_create)(ia, qlen, std::ptr::null_mut(), flags, &mut evd) };
        self.check(r, "dat_evd_create")?;
        Ok(evd)
    }
}
