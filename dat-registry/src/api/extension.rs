//! `dat_extension_op`: the C shim in csrc/ captures the variadic arguments;
//! this routes them to the provider that owns the handle.

use crate::dispatch::{self, guard};
use crate::status::NOT_IMPLEMENTED;
use dat_abi::*;

/// # Safety
/// `args` is the caller's live va_list, forwarded untouched.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_registry_forward_extension(
    handle: DAT_HANDLE,
    op: DAT_EXTENDED_OP,
    args: *mut __va_list_tag,
) -> DAT_RETURN {
    guard("dat_extension_op", || {
        // Extension ops take IA handles too (counters, UD address queries).
        let (table, h) = match dispatch::ia_or_object(handle, DAT_INVALID_HANDLE1) {
            Ok(target) => target,
            Err(e) => return e,
        };
        match table.handle_extendedop_func {
            // SAFETY: a registered provider's entry, with the consumer's arguments.
            Some(f) => unsafe { f(h, op, args) },
            None => NOT_IMPLEMENTED,
        }
    })
}
