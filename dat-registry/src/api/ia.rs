//! Opening and closing IAs: where a name from dat.conf becomes a provider IA.

use crate::conf::{Entry, MAX_IA_NAME};
use crate::dispatch::{self, guard};
use crate::status::{self, error, invalid_arg, invalid_handle, not_found};
use crate::{ia_table, library, registry};
use dat_abi::*;
use std::ffi::CStr;

/// Picks the entry for a request. The reference matches version and thread
/// safety exactly; we also take a newer minor or a thread-safe library for a
/// non-thread-safe consumer, since both serve the request, and say which field
/// failed when nothing fits.
fn choose<'a>(entries: &'a [Entry], name: &str, major: u32, minor: u32, thread_safe: bool)
    -> Result<(usize, &'a Entry), DAT_RETURN>
{
    let named: Vec<(usize, &Entry)> =
        entries.iter().enumerate().filter(|(_, e)| e.user_api && e.ia_name == name).collect();
    if named.is_empty() {
        return Err(not_found(DAT_NAME_NOT_REGISTERED));
    }
    let exact = |e: &Entry| e.api_major == major && e.api_minor == minor && e.thread_safe == thread_safe;
    let fits = |e: &Entry| e.api_major == major && e.api_minor >= minor && (e.thread_safe || !thread_safe);
    if let Some(found) = named.iter().find(|(_, e)| exact(e)).or_else(|| named.iter().find(|(_, e)| fits(e))) {
        return Ok(*found);
    }
    let why = if !named.iter().any(|(_, e)| e.api_major == major) {
        DAT_MAJOR_NOT_FOUND
    } else if !named.iter().any(|(_, e)| e.api_major == major && e.api_minor >= minor) {
        DAT_MINOR_NOT_FOUND
    } else {
        DAT_THREAD_SAFETY_NOT_FOUND
    };
    Err(not_found(why))
}

/// # Safety
/// `name` a NUL-terminated string; `async_evd` and `ia` valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_ia_openv(
    name: DAT_NAME_PTR,
    async_qlen: DAT_COUNT,
    async_evd: *mut DAT_EVD_HANDLE,
    ia: *mut DAT_IA_HANDLE,
    major: DAT_UINT32,
    minor: DAT_UINT32,
    thread_safe: DAT_BOOLEAN,
) -> DAT_RETURN {
    guard("dat_ia_openv", || {
        if name.is_null() {
            return invalid_arg(DAT_INVALID_ARG1);
        }
        if async_evd.is_null() {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        if ia.is_null() {
            return invalid_arg(DAT_INVALID_ARG4);
        }
        // SAFETY: checked non-null above; the caller promises a C string. The
        // scan stops one past the longest name dat.conf can hold.
        let bytes = unsafe { bounded_cstr(name, MAX_IA_NAME + 1) };
        let Some(requested) = bytes.and_then(|b| std::str::from_utf8(b).ok()) else {
            log::warn!("dat_ia_openv: IA name is not a short UTF-8 string; no dat.conf entry can match");
            return not_found(DAT_NAME_NOT_REGISTERED);
        };
        let conf = registry::conf();
        let (index, entry) = match choose(&conf.entries, requested, major, minor, thread_safe != 0) {
            Ok(found) => found,
            Err(e) => {
                log::warn!(
                    "dat_ia_openv: no usable entry for IA '{requested}' (DAT {major}.{minor}, {}) in {}: {}",
                    if thread_safe != 0 { "threadsafe" } else { "nonthreadsafe" },
                    conf.path.display(),
                    status::name(e)
                );
                return e;
            }
        };
        let table = match library::acquire(&conf.path, index, entry) {
            Ok(t) => t,
            Err(e) => return e,
        };
        let Some(open) = table.ia_open_func else {
            library::release(index);
            return status::NOT_IMPLEMENTED;
        };
        let mut provider_ia: DAT_IA_HANDLE = std::ptr::null_mut();
        // SAFETY: a registered provider's ia_open with the consumer's own arguments.
        let r = unsafe { open(name, async_qlen, async_evd, &mut provider_ia) };
        if r != DAT_SUCCESS {
            log::debug!("dat_ia_openv: provider for '{requested}' refused: {}", status::name(r));
            library::release(index);
            return r;
        }
        match ia_table::insert(provider_ia, index) {
            Some(h) => {
                // SAFETY: checked non-null above.
                unsafe { *ia = h };
                log::debug!("dat_ia_openv: '{requested}' open as IA handle {}", h as usize);
                DAT_SUCCESS
            }
            None => {
                if let Some(close) = table.ia_close_func {
                    // SAFETY: closing the IA we just opened and cannot hand out.
                    unsafe { close(provider_ia, DAT_CLOSE_ABRUPT_FLAG) };
                }
                library::release(index);
                error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY)
            }
        }
    })
}

/// Reads at most `limit` bytes looking for the NUL; None if there is none.
///
/// # Safety
/// `p` must be readable up to its NUL or `limit` bytes, whichever is first.
unsafe fn bounded_cstr<'a>(p: *const std::os::raw::c_char, limit: usize) -> Option<&'a [u8]> {
    let mut len = 0;
    // SAFETY: the caller's contract; we stop at the first NUL.
    while len < limit && unsafe { *p.add(len) } != 0 {
        len += 1;
    }
    // SAFETY: the bytes up to len were just read.
    (len < limit).then(|| unsafe { CStr::from_ptr(p).to_bytes() })
}

/// # Safety
/// `ia` a handle from dat_ia_openv (or the provider's IA handle).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_ia_close(ia: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    guard("dat_ia_close", || {
        if flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        let Some((key, provider_ia, index)) = ia_table::begin_close(ia) else {
            return invalid_handle(DAT_INVALID_HANDLE_IA);
        };
        let r = match dispatch::object(provider_ia, DAT_INVALID_HANDLE_IA) {
            Ok((table, h)) => match table.ia_close_func {
                // SAFETY: the provider's own IA handle, recorded at open.
                Some(close) => unsafe { close(h, flags) },
                None => status::NOT_IMPLEMENTED,
            },
            Err(e) => e,
        };
        let closed = r == DAT_SUCCESS;
        ia_table::finish_close(key, closed);
        if closed {
            library::release(index);
        }
        r
    })
}

/// Maps a consumer IA handle to the provider's, as the reference exports it.
///
/// # Safety
/// `out` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dats_get_ia_handle(ia: DAT_IA_HANDLE, out: *mut DAT_IA_HANDLE) -> DAT_RETURN {
    guard("dats_get_ia_handle", || {
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        match dispatch::ia_or_object(ia, DAT_INVALID_HANDLE_IA) {
            Ok((_, h)) => {
                // SAFETY: checked non-null.
                unsafe { *out = h };
                DAT_SUCCESS
            }
            Err(e) => e,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::parse;

    #[test]
    fn choosing_entries() {
        let c = parse(
            b"a u2.0 nonthreadsafe default l p.2.0 \"\" \"\"\n\
              a u2.0 threadsafe default l p.2.0 \"\" \"\"\n\
              b u2.1 threadsafe default l p.2.0 \"\" \"\"\n\
              k k2.0 threadsafe default l p.2.0 \"\" \"\"\n",
        );
        assert_eq!(choose(&c.entries, "a", 2, 0, false).unwrap().0, 0);
        assert_eq!(choose(&c.entries, "a", 2, 0, true).unwrap().0, 1);
        assert_eq!(choose(&c.entries, "b", 2, 0, false).unwrap().0, 2);
        assert_eq!(choose(&c.entries, "zz", 2, 0, false), Err(not_found(DAT_NAME_NOT_REGISTERED)));
        assert_eq!(choose(&c.entries, "k", 2, 0, false), Err(not_found(DAT_NAME_NOT_REGISTERED)));
        assert_eq!(choose(&c.entries, "a", 1, 2, false), Err(not_found(DAT_MAJOR_NOT_FOUND)));
        assert_eq!(choose(&c.entries, "a", 2, 5, false), Err(not_found(DAT_MINOR_NOT_FOUND)));
        let nts = parse(b"n u2.0 nonthreadsafe default l p.2.0 \"\" \"\"\n");
        assert_eq!(choose(&nts.entries, "n", 2, 0, true), Err(not_found(DAT_THREAD_SAFETY_NOT_FOUND)));
    }
}
