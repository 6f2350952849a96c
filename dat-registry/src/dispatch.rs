//! From a consumer's handle to the provider table and handle to call with.

use crate::ia_table;
use crate::providers;
use crate::status::invalid_handle;
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

pub use dat_abi::status::guard;
