//! Composing `DAT_RETURN` words, shared by the registry and the providers.
//! (The only hand-written part of this crate; it uses only the generated
//! constants.)

use crate::*;

/// An error return: class bit, major type and minor subtype in one word,
/// laid out the way `DAT_GET_TYPE`/`DAT_GET_SUBTYPE` take it apart.
pub const fn error(major: u32, minor: u32) -> DAT_RETURN {
    DAT_CLASS_ERROR | major | minor
}

pub const INTERNAL: DAT_RETURN = error(DAT_INTERNAL_ERROR, 0);
pub const NOT_IMPLEMENTED: DAT_RETURN = error(DAT_NOT_IMPLEMENTED, 0);

pub const fn invalid_handle(minor: u32) -> DAT_RETURN {
    error(DAT_INVALID_HANDLE, minor)
}

pub const fn invalid_arg(minor: u32) -> DAT_RETURN {
    error(DAT_INVALID_PARAMETER, minor)
}

pub const fn invalid_state(minor: u32) -> DAT_RETURN {
    error(DAT_INVALID_STATE, minor)
}

pub const fn no_resources(minor: u32) -> DAT_RETURN {
    error(DAT_INSUFFICIENT_RESOURCES, minor)
}

pub const fn not_found(minor: u32) -> DAT_RETURN {
    error(DAT_PROVIDER_NOT_FOUND, minor)
}

/// Runs an entry point's body; a panic becomes DAT_INTERNAL_ERROR instead of
/// unwinding into C. Always inlined: it costs nothing on the way through,
/// and the body's constants stay constants.
#[inline(always)]
pub fn guard(name: &str, body: impl FnOnce() -> DAT_RETURN) -> DAT_RETURN {
    guard_or(name, INTERNAL, body)
}

/// `guard` for a body that returns something else: `on_panic` stands in for
/// its result after a panic.
#[inline(always)]
pub fn guard_or<T>(name: &str, on_panic: T, body: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(_) => {
            caught(name);
            on_panic
        }
    }
}

/// Out of line, so a guarded call keeps its name in a register for this
/// path only rather than in its frame on every call.
#[cold]
#[inline(never)]
fn caught(name: &str) {
    log::error!("{name}: internal panic caught at the DAT API boundary");
}
