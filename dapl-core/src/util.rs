//! Small helpers the core and its backends share.

use std::ffi::CString;

/// A C string of `s`, with any NUL bytes in it dropped.
pub fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// The length of a sockaddr of this family, for the families DAT addresses use.
pub fn sockaddr_len(family: libc::sa_family_t) -> Option<usize> {
    match family as i32 {
        libc::AF_INET => Some(std::mem::size_of::<libc::sockaddr_in>()),
        libc::AF_INET6 => Some(std::mem::size_of::<libc::sockaddr_in6>()),
        _ => None,
    }
}
