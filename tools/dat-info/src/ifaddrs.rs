//! IP addresses per netdev (getifaddrs), and reading a `struct sockaddr`.
//! Linux/glibc layouts, declared here so the tool needs no libc crate.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

#[repr(C)]
struct IfAddrs {
    ifa_next: *mut IfAddrs,
    ifa_name: *const c_char,
    ifa_flags: c_uint,
    ifa_addr: *const u8,
    ifa_netmask: *const u8,
    ifa_ifu: *const u8,
    ifa_data: *mut c_void,
}

unsafe extern "C" {
    fn getifaddrs(ifap: *mut *mut IfAddrs) -> c_int;
    fn freeifaddrs(ifa: *mut IfAddrs);
}

/// The IPv4/IPv6 address in a `struct sockaddr`, if it is one of those.
///
/// # Safety
/// `sa` is NULL or points to a sockaddr at least as long as its family says.
pub unsafe fn sockaddr_ip(sa: *const u8) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: per the contract; sa_family is the first u16 of every sockaddr.
    unsafe {
        let family = std::ptr::read_unaligned(sa as *const u16);
        match family {
            AF_INET => {
                let b = std::ptr::read_unaligned(sa.add(4) as *const [u8; 4]);
                Some(IpAddr::V4(Ipv4Addr::from(b)))
            }
            AF_INET6 => {
                let b = std::ptr::read_unaligned(sa.add(8) as *const [u8; 16]);
                Some(IpAddr::V6(Ipv6Addr::from(b)))
            }
            _ => None,
        }
    }
}

/// Every (netdev, address) pair, or None if getifaddrs fails.
pub fn list() -> Option<Vec<(String, IpAddr)>> {
    let mut head: *mut IfAddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list we free below.
    if unsafe { getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let node = unsafe { &*cur };
        if !node.ifa_name.is_null() {
            // SAFETY: ifa_name is a C string; ifa_addr a sockaddr or NULL.
            let name = unsafe { CStr::from_ptr(node.ifa_name) }.to_string_lossy().into_owned();
            if let Some(ip) = unsafe { sockaddr_ip(node.ifa_addr) } {
                out.push((name, ip));
            }
        }
        cur = node.ifa_next;
    }
    // SAFETY: the list getifaddrs allocated.
    unsafe { freeifaddrs(head) };
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed() {
        let l = list().expect("getifaddrs");
        // A sandbox may have no lo address; when it has one it must read right.
        if let Some((_, a)) = l.iter().find(|(n, a)| n == "lo" && a.is_ipv4()) {
            assert_eq!(*a, IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
    }

    #[test]
    fn reads_sockaddr_in() {
        let mut sa = [0u8; 16];
        sa[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        sa[4..8].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(unsafe { sockaddr_ip(sa.as_ptr()) }, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(unsafe { sockaddr_ip(std::ptr::null()) }, None);
    }
}
