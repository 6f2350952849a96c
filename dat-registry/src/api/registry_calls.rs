//! The registry's own API: providers registering, listing, and error names.

use crate::dispatch::guard;
use crate::library::info_for;
use crate::providers;
use crate::registry;
use crate::status::{self, invalid_arg};
use dat_abi::*;

/// Called by a provider's `dat_provider_init`.
///
/// # Safety
/// `provider` a table that outlives its registration; `info` readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_registry_add_provider(
    provider: *const DAT_PROVIDER,
    info: *const DAT_PROVIDER_INFO,
) -> DAT_RETURN {
    guard("dat_registry_add_provider", || {
        if provider.is_null() {
            return invalid_arg(DAT_INVALID_ARG1);
        }
        // SAFETY: null checked; the provider's info struct.
        match unsafe { info.as_ref() } {
            Some(info) => providers::add(provider, info),
            None => invalid_arg(DAT_INVALID_ARG2),
        }
    })
}

/// Called by a provider's `dat_provider_fini`.
///
/// # Safety
/// As for add.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_registry_remove_provider(
    provider: *const DAT_PROVIDER,
    info: *const DAT_PROVIDER_INFO,
) -> DAT_RETURN {
    guard("dat_registry_remove_provider", || {
        if provider.is_null() {
            return invalid_arg(DAT_INVALID_ARG1);
        }
        // SAFETY: null checked.
        match unsafe { info.as_ref() } {
            Some(info) => providers::remove(provider, info),
            None => invalid_arg(DAT_INVALID_ARG2),
        }
    })
}

/// Lists the user-space entries of dat.conf, in file order.
///
/// # Safety
/// `list` holds `max` pointers, each to a writable DAT_PROVIDER_INFO.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_registry_list_providers(
    max: DAT_COUNT,
    returned: *mut DAT_COUNT,
    list: *mut *mut DAT_PROVIDER_INFO,
) -> DAT_RETURN {
    guard("dat_registry_list_providers", || {
        if max < 0 {
            return invalid_arg(DAT_INVALID_ARG1);
        }
        if returned.is_null() {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        let entries = registry::conf().entries.iter().filter(|e| e.user_api);
        // DAT lets a consumer ask for the count alone with max == 0.
        if max > 0 && list.is_null() {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        let mut n: DAT_COUNT = 0;
        for entry in entries.take(max as usize) {
            // SAFETY: the caller gave `max` slots.
            let slot = unsafe { *list.add(n as usize) };
            if slot.is_null() {
                return invalid_arg(DAT_INVALID_ARG3);
            }
            // SAFETY: non-null slot the caller owns.
            unsafe { *slot = info_for(entry) };
            n += 1;
        }
        if max == 0 {
            n = registry::conf().entries.iter().filter(|e| e.user_api).count() as DAT_COUNT;
        }
        // SAFETY: null checked.
        unsafe { *returned = n };
        DAT_SUCCESS
    })
}

/// # Safety
/// The out-pointers valid for writes (either may be NULL to skip it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_strerror(
    value: DAT_RETURN,
    major: *mut *const std::os::raw::c_char,
    minor: *mut *const std::os::raw::c_char,
) -> DAT_RETURN {
    guard("dat_strerror", || {
        let (major_s, minor_s) = status::describe(value);
        let (Some(major_s), Some(minor_s)) = (major_s, minor_s) else {
            return invalid_arg(DAT_INVALID_ARG1);
        };
        // SAFETY: each pointer checked before the write; the strings are static.
        unsafe {
            if let Some(m) = major.as_mut() {
                *m = major_s.as_ptr().cast();
            }
            if let Some(m) = minor.as_mut() {
                *m = minor_s.as_ptr().cast();
            }
        }
        DAT_SUCCESS
    })
}
