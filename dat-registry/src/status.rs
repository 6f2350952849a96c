//! Building `DAT_RETURN` values and naming them for `dat_strerror`.

use dat_abi::*;

pub use dat_abi::status::{INTERNAL, NOT_IMPLEMENTED, error, invalid_arg, invalid_handle, not_found};

/// Minor codes of our own under `DAT_PROVIDER_NOT_FOUND`. The DAT headers only
/// know "name not registered", which told users nothing when the real cause was
/// a missing library or a provider whose init failed; these keep the major type
/// consumers test for and say which step failed. They live here, not in the
/// public headers, so the headers stay identical to DAT 2.0.
pub const DAT_LIBRARY_LOAD_FAILED: u32 = 0x7000;
pub const DAT_PROVIDER_INIT_FAILED: u32 = 0x7001;

macro_rules! named {
    ($($name:ident),* $(,)?) => {
        &[$(($name as u32, concat!(stringify!($name), "\0"))),*]
    };
}

/// Every major type, with the C string `dat_strerror` hands out for it.
static MAJORS: &[(u32, &str)] = named![
    DAT_SUCCESS, DAT_ABORT, DAT_CONN_QUAL_IN_USE, DAT_INSUFFICIENT_RESOURCES,
    DAT_INTERNAL_ERROR, DAT_INVALID_HANDLE, DAT_INVALID_PARAMETER, DAT_INVALID_STATE,
    DAT_LENGTH_ERROR, DAT_MODEL_NOT_SUPPORTED, DAT_PROVIDER_NOT_FOUND,
    DAT_PRIVILEGES_VIOLATION, DAT_PROTECTION_VIOLATION, DAT_QUEUE_EMPTY, DAT_QUEUE_FULL,
    DAT_TIMEOUT_EXPIRED, DAT_PROVIDER_ALREADY_REGISTERED, DAT_PROVIDER_IN_USE,
    DAT_INVALID_ADDRESS, DAT_INTERRUPTED_CALL, DAT_CONN_QUAL_UNAVAILABLE, DAT_RESERVED_LMR,
    DAT_PORT_IN_USE, DAT_COMM_NOT_SUPPORTED, DAT_EXTENSION_BASE, DAT_NOT_IMPLEMENTED,
];

/// Every minor subtype the headers define, then ours.
static MINORS: &[(u32, &str)] = named![
    DAT_SUB_INTERRUPTED, DAT_RESOURCE_MEMORY, DAT_RESOURCE_DEVICE, DAT_RESOURCE_TEP,
    DAT_RESOURCE_TEVD, DAT_RESOURCE_PROTECTION_DOMAIN, DAT_RESOURCE_MEMORY_REGION,
    DAT_RESOURCE_ERROR_HANDLER, DAT_RESOURCE_CREDITS, DAT_RESOURCE_SRQ,
    DAT_INVALID_HANDLE_IA, DAT_INVALID_HANDLE_EP, DAT_INVALID_HANDLE_LMR,
    DAT_INVALID_HANDLE_RMR, DAT_INVALID_HANDLE_PZ, DAT_INVALID_HANDLE_PSP,
    DAT_INVALID_HANDLE_RSP, DAT_INVALID_HANDLE_CR, DAT_INVALID_HANDLE_CNO,
    DAT_INVALID_HANDLE_EVD_CR, DAT_INVALID_HANDLE_EVD_REQUEST, DAT_INVALID_HANDLE_EVD_RECV,
    DAT_INVALID_HANDLE_EVD_CONN, DAT_INVALID_HANDLE_EVD_ASYNC, DAT_INVALID_HANDLE_SRQ,
    DAT_INVALID_HANDLE_CSP, DAT_INVALID_HANDLE1, DAT_INVALID_HANDLE2, DAT_INVALID_HANDLE3,
    DAT_INVALID_HANDLE4, DAT_INVALID_HANDLE5, DAT_INVALID_HANDLE6, DAT_INVALID_HANDLE7,
    DAT_INVALID_HANDLE8, DAT_INVALID_HANDLE9, DAT_INVALID_HANDLE10, DAT_INVALID_ARG1,
    DAT_INVALID_ARG2, DAT_INVALID_ARG3, DAT_INVALID_ARG4, DAT_INVALID_ARG5, DAT_INVALID_ARG6,
    DAT_INVALID_ARG7, DAT_INVALID_ARG8, DAT_INVALID_ARG9, DAT_INVALID_ARG10,
    DAT_INVALID_STATE_EP_UNCONNECTED, DAT_INVALID_STATE_EP_ACTCONNPENDING,
    DAT_INVALID_STATE_EP_PASSCONNPENDING, DAT_INVALID_STATE_EP_TENTCONNPENDING,
    DAT_INVALID_STATE_EP_CONNECTED, DAT_INVALID_STATE_EP_DISCONNECTED,
    DAT_INVALID_STATE_EP_RESERVED, DAT_INVALID_STATE_EP_COMPLPENDING,
    DAT_INVALID_STATE_EP_DISCPENDING, DAT_INVALID_STATE_EP_PROVIDERCONTROL,
    DAT_INVALID_STATE_EP_NOTREADY, DAT_INVALID_STATE_EP_RECV_WATERMARK,
    DAT_INVALID_STATE_EP_PZ, DAT_INVALID_STATE_EP_EVD_REQUEST, DAT_INVALID_STATE_EP_EVD_RECV,
    DAT_INVALID_STATE_EP_EVD_CONNECT, DAT_INVALID_STATE_EP_UNCONFIGURED,
    DAT_INVALID_STATE_EP_UNCONFRESERVED, DAT_INVALID_STATE_EP_UNCONFPASSIVE,
    DAT_INVALID_STATE_EP_UNCONFTENTATIVE, DAT_INVALID_STATE_CNO_IN_USE,
    DAT_INVALID_STATE_CNO_DEAD, DAT_INVALID_STATE_EVD_OPEN, DAT_INVALID_STATE_EVD_ENABLED,
    DAT_INVALID_STATE_EVD_DISABLED, DAT_INVALID_STATE_EVD_WAITABLE,
    DAT_INVALID_STATE_EVD_UNWAITABLE, DAT_INVALID_STATE_EVD_IN_USE,
    DAT_INVALID_STATE_EVD_CONFIG_NOTIFY, DAT_INVALID_STATE_EVD_CONFIG_SOLICITED,
    DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD, DAT_INVALID_STATE_EVD_WAITER,
    DAT_INVALID_STATE_EVD_ASYNC, DAT_INVALID_STATE_IA_IN_USE, DAT_INVALID_STATE_LMR_IN_USE,
    DAT_INVALID_STATE_LMR_FREE, DAT_INVALID_STATE_PZ_IN_USE, DAT_INVALID_STATE_PZ_FREE,
    DAT_INVALID_STATE_SRQ_OPERATIONAL, DAT_INVALID_STATE_SRQ_ERROR,
    DAT_INVALID_STATE_SRQ_IN_USE, DAT_INVALID_STATE_SRQ_SHUTDOWN, DAT_PRIVILEGES_READ,
    DAT_PRIVILEGES_WRITE, DAT_PRIVILEGES_RDMA_READ, DAT_PRIVILEGES_RDMA_WRITE,
    DAT_PROTECTION_READ, DAT_PROTECTION_WRITE, DAT_PROTECTION_RDMA_READ,
    DAT_PROTECTION_RDMA_WRITE, DAT_INVALID_ADDRESS_UNSUPPORTED,
    DAT_INVALID_ADDRESS_UNREACHABLE, DAT_INVALID_ADDRESS_MALFORMED, DAT_NAME_NOT_REGISTERED,
    DAT_MAJOR_NOT_FOUND, DAT_MINOR_NOT_FOUND, DAT_THREAD_SAFETY_NOT_FOUND,
    DAT_LIBRARY_LOAD_FAILED, DAT_PROVIDER_INIT_FAILED,
];

/// The strings for a return value, NUL-terminated for C. A subtype of zero
/// has the empty string, as the reference gives it; an unknown part is `None`.
pub fn describe(value: DAT_RETURN) -> (Option<&'static str>, Option<&'static str>) {
    let major = value & DAT_TYPE_MASK;
    let minor = value & DAT_SUBTYPE_MASK;
    let find = |table: &'static [(u32, &'static str)], v| {
        table.iter().find(|(code, _)| *code == v).map(|(_, s)| *s)
    };
    let minor_str = if minor == DAT_NO_SUBTYPE { Some("\0") } else { find(MINORS, minor) };
    (find(MAJORS, major), minor_str)
}

/// Human-readable form for log lines.
pub fn name(value: DAT_RETURN) -> String {
    let (major, minor) = describe(value);
    let clean = |s: Option<&str>| s.map(|s| s.trim_end_matches('\0').to_owned());
    match (clean(major), clean(minor)) {
        (Some(a), Some(b)) if !b.is_empty() => format!("{a} {b}"),
        (Some(a), _) => a,
        _ => format!("{value:#x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composes_like_the_reference() {
        // The reference registry returns exactly this word for an unknown IA name.
        assert_eq!(not_found(DAT_NAME_NOT_REGISTERED), 0x800a_0064);
    }

    #[test]
    fn every_code_has_a_unique_name() {
        for table in [MAJORS, MINORS] {
            for (i, (code, name)) in table.iter().enumerate() {
                assert!(name.ends_with('\0'));
                assert!(table[i + 1..].iter().all(|(c, _)| c != code), "{name} twice");
            }
        }
        assert_eq!(describe(not_found(DAT_NAME_NOT_REGISTERED)),
            (Some("DAT_PROVIDER_NOT_FOUND\0"), Some("DAT_NAME_NOT_REGISTERED\0")));
        assert_eq!(describe(0x1234_5678), (None, None));
        assert_eq!(name(not_found(DAT_LIBRARY_LOAD_FAILED)),
            "DAT_PROVIDER_NOT_FOUND DAT_LIBRARY_LOAD_FAILED");
    }
}
