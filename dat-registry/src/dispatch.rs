//! From a consumer's handle to the provider table and handle to call with.
//!
//! Two ways in. `fast_object`/`fast_ia_or_object` are what every call tries
//! first: plain loads and compares, nothing that can panic or call out, so
//! an entry point that finds its provider this way is a few checks and a
//! tail call (no frame, no panic guard needed). They say None for anything
//! unusual (a bad handle, a table not in its home slot, an IA being closed),
//! and the entry point then takes `object`/`ia_or_object` under its panic
//! guard, which decide fully and give the error.

use crate::ia_table;
use crate::providers;
use crate::status::{NOT_IMPLEMENTED, invalid_handle};
use dat_abi::status::{INTERNAL, guard_or};
use dat_abi::*;

pub type Target = (&'static DAT_PROVIDER, DAT_HANDLE);

/// A handle of any object but an IA: its first word must be a known table.
/// Values in the consumer IA range are refused before any read: no object
/// lives there, and an IA handle passed where an object belongs is a common slip.
#[inline]
pub fn object(h: DAT_HANDLE, minor: u32) -> Result<Target, DAT_RETURN> {
    if (h as usize) <= ia_table::MAX_HANDLE {
        return Err(invalid_handle(minor));
    }
    providers::table_of(h).map(|t| (t, h)).ok_or(invalid_handle(minor))
}

/// A handle that may be an IA: consumer IA handles are translated to the
/// provider's own; anything else must be a provider object.
#[inline]
pub fn ia_or_object(h: DAT_HANDLE, minor: u32) -> Result<Target, DAT_RETURN> {
    if ia_table::is_consumer_handle(h) {
        let provider_ia = ia_table::resolve(h).ok_or(invalid_handle(minor))?;
        object(provider_ia, minor)
    } else {
        object(h, minor)
    }
}

/// `object`'s common case, or None (then `object` decides). A raw pointer,
/// to a registered table.
#[inline(always)]
pub fn fast_object(h: DAT_HANDLE) -> Option<*const DAT_PROVIDER> {
    if (h as usize) <= ia_table::MAX_HANDLE || (h as usize) % std::mem::align_of::<usize>() != 0 {
        return None;
    }
    // SAFETY: as in providers::table_of: the word DAT_HANDLE_TO_PROVIDER reads.
    let first = unsafe { std::ptr::read_volatile(h as *const *const DAT_PROVIDER) };
    // A match at home is a registered table (providers.rs: NULL never matches).
    providers::is_known_at_home(first).then_some(first)
}

/// `ia_or_object`'s common case, or None (then `ia_or_object` decides).
#[inline(always)]
pub fn fast_ia_or_object(h: DAT_HANDLE) -> Option<(*const DAT_PROVIDER, DAT_HANDLE)> {
    let h = if ia_table::is_consumer_handle(h) { ia_table::resolve(h)? } else { h };
    fast_object(h).map(|t| (t, h))
}

/// The provider's function for `h` when the fast way did not find it:
/// the full check, under the panic guard. Returns the function and the
/// handle to call it with, or None and the error the call returns (two
/// words, so they come back in registers and the caller's own call into
/// the provider stays a jump).
#[cold]
#[inline(never)]
pub fn checked<F>(
    name: &str,
    h: DAT_HANDLE,
    minor: u32,
    resolve: fn(DAT_HANDLE, u32) -> Result<Target, DAT_RETURN>,
    member: impl FnOnce(&'static DAT_PROVIDER) -> Option<F>,
) -> (Option<F>, usize) {
    let found = guard_or(name, Err(INTERNAL), || {
        let (table, h) = resolve(h, minor)?;
        member(table).map(|f| (f, h)).ok_or(NOT_IMPLEMENTED)
    });
    match found {
        Ok((f, h)) => (Some(f), h as usize),
        Err(e) => (None, e as usize),
    }
}

pub use dat_abi::status::guard;
