//! Does a dat.conf entry's `ia_params` name something present on this host?
//!
//! Two styles exist: rdma_cm providers (`libdaplofa.so.2`) take
//! `"<netdev> 0"` or `"<ip address> 0"`; scm/ucm providers (`libdaploscm`,
//! `libdaploucm`) take `"<verbs device> <port>"`; ours (`libdaplibv.so.2`)
//! takes either. The software provider (`libdaplsock.so.2`, TCP and UDP)
//! takes `"<netdev> <n>"` or `"<IPv4 address> <n>"`: the netdev must be up
//! with an IPv4 address, the address on an up netdev. For other libraries the string is the provider's business,
//! so a name that matches nothing is only a note.

use crate::sysfs::{Host, NetDev, RdmaLink};
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    RdmaCm,
    Verbs,
    Both,
    /// The software provider: a netdev or IPv4 address, then a number.
    Sock,
    Unknown,
}

impl Style {
    pub fn of(library: &str) -> Style {
        let base = library.rsplit('/').next().unwrap_or(library);
        if base.starts_with("libdaplofa") {
            Style::RdmaCm
        } else if base.starts_with("libdaploscm") || base.starts_with("libdaploucm") {
            Style::Verbs
        } else if base.starts_with("libdaplibv") {
            Style::Both
        } else if base.starts_with("libdaplsock") {
            Style::Sock
        } else {
            Style::Unknown
        }
    }

    pub fn expects(self) -> &'static str {
        match self {
            Style::RdmaCm => "\"<netdev> 0\" or \"<ip address> 0\" (rdma_cm provider)",
            Style::Verbs => "\"<verbs device> <port>\" (scm/ucm provider)",
            Style::Both => "\"<netdev> 0\", \"<ip address> 0\" or \"<verbs device> <port>\"",
            Style::Sock => "\"<netdev> <n>\" or \"<IPv4 address> <n>\" (software provider)",
            Style::Unknown => "whatever its provider defines",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// False: this entry cannot work as written.
    pub ok: bool,
    /// Machine-readable: "ok", "unchecked", "device-absent", "port-down",
    /// "no-rdma-device", "wrong-style", "bad-params", and for the software
    /// provider "netdev-down", "no-ipv4".
    pub status: &'static str,
    pub text: String,
}

fn good(text: String) -> Check {
    Check { ok: true, status: "ok", text }
}

fn bad(status: &'static str, text: String) -> Check {
    Check { ok: false, status, text }
}

/// A netdev's RDMA ports: ok if one is ACTIVE (or of unknown state).
fn netdev_ports(host: &Host, n: &NetDev, via: &str) -> Check {
    if n.rdma.is_empty() {
        let capable: Vec<String> =
            host.netdevs.iter().filter(|n| !n.rdma.is_empty()).map(|n| host.describe_netdev(n)).collect();
        return bad(
            "no-rdma-device",
            format!(
                "{via}netdev {} has no RDMA device (no /sys/class/infiniband/*/ports/*/gid_attrs/ndevs/* names it); RDMA-capable netdevs: {}",
                n.name,
                if capable.is_empty() { "none".to_owned() } else { capable.join(", ") }
            ),
        );
    }
    let desc = host.describe_netdev(n);
    let up = |l: &RdmaLink| host.link_state(l).is_none_or(|s| s == "ACTIVE");
    if n.rdma.iter().any(up) {
        good(format!("{via}netdev {desc}"))
    } else {
        bad("port-down", format!("{via}netdev {desc}: port is not ACTIVE (cable, switch/subnet manager, or `ip link set {} up`)", n.name))
    }
}

/// "up", "DOWN" or "state unknown".
fn up_word(n: &NetDev) -> &'static str {
    match n.up {
        Some(true) => "up",
        Some(false) => "DOWN",
        None => "state unknown",
    }
}

/// "10.0.0.1 10.0.0.2" or "no IPv4 address".
fn ipv4_list(n: &NetDev) -> String {
    let v = n.ipv4();
    if v.is_empty() { "no IPv4 address".into() } else { v.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" ") }
}

/// Up netdevs with IPv4 addresses: "eth0 10.0.0.1, lo 127.0.0.1".
fn usable_for_sock(host: &Host) -> String {
    let v: Vec<String> =
        host.netdevs.iter().filter(|n| n.up != Some(false) && !n.ipv4().is_empty()).map(|n| format!("{} {}", n.name, ipv4_list(n))).collect();
    if v.is_empty() { "none".into() } else { v.join(", ") }
}

/// The netdev a software-provider IA would use: up, with an IPv4 address
/// (unless addresses could not be read).
fn sock_netdev(host: &Host, n: &NetDev, via: &str) -> Check {
    if n.up == Some(false) {
        return bad("netdev-down", format!("{via}netdev {} is DOWN (`ip link set {} up`)", n.name, n.name));
    }
    if !host.addrs_known {
        return Check { ok: true, status: "unchecked", text: format!("{via}netdev {} {} (addresses not checked)", n.name, up_word(n)) };
    }
    if n.ipv4().is_empty() {
        return bad(
            "no-ipv4",
            format!("{via}netdev {} has no IPv4 address, which the software provider binds to; netdevs that would do: {}", n.name, usable_for_sock(host)),
        );
    }
    good(format!("{via}netdev {} {}, IPv4 {}", n.name, up_word(n), ipv4_list(n)))
}

/// The software provider's ia_params: "<netdev|IPv4> <n>".
fn check_sock(host: &Host, first: &str, second: Option<&str>) -> Check {
    if second.is_none_or(|s| s.parse::<u32>().is_err()) {
        return bad("bad-params", format!("\"{first}\" needs a number after it; this library expects {}", Style::Sock.expects()));
    }
    if let Ok(ip) = first.parse::<IpAddr>() {
        if ip.is_ipv6() {
            return bad("bad-params", format!("IPv6 address {ip} given; the software provider takes an IPv4 address or a netdev"));
        }
        if !host.addrs_known {
            return Check { ok: true, status: "unchecked", text: format!("IP address {ip} (addresses not checked)") };
        }
        return match host.netdev_with_addr(&ip) {
            Some(n) => sock_netdev(host, n, &format!("IP address {ip} is on ")),
            None => bad("device-absent", format!("IP address {ip} is on no netdev here; up netdevs with IPv4: {}", usable_for_sock(host))),
        };
    }
    match host.netdev(first) {
        Some(n) => sock_netdev(host, n, ""),
        None => bad("device-absent", format!("netdev {first} absent; up netdevs with IPv4: {}", usable_for_sock(host))),
    }
}

pub fn check(host: &Host, style: Style, params: &str) -> Check {
    let toks: Vec<&str> = params.split_whitespace().collect();
    let Some(&first) = toks.first() else {
        return if style == Style::Unknown {
            Check { ok: true, status: "unchecked", text: "ia_params empty".into() }
        } else {
            bad("bad-params", format!("ia_params is empty; this library expects {}", style.expects()))
        };
    };
    let second = toks.get(1).copied();
    if style == Style::Sock {
        return check_sock(host, first, second);
    }
    let lenient = style == Style::Unknown;

    if let Ok(ip) = first.parse::<IpAddr>() {
        if style == Style::Verbs {
            let hint = host.netdev_with_addr(&ip).and_then(|n| n.rdma.first()).and_then(|l| {
                l.port.map(|p| format!("; {ip} is on {} port {p}: use \"{} {p}\"", l.dev, l.dev))
            });
            return bad("wrong-style", format!("IP address {ip} given, but this library expects {}{}", style.expects(), hint.unwrap_or_default()));
        }
        if !host.addrs_known {
            return Check { ok: true, status: "unchecked", text: format!("IP address {ip} (addresses not checked)") };
        }
        return match host.netdev_with_addr(&ip) {
            Some(n) => {
                let c = netdev_ports(host, n, &format!("IP address {ip} is on "));
                if lenient && !c.ok { Check { ok: true, status: "unchecked", ..c } } else { c }
            }
            None => {
                let with: Vec<String> = host
                    .netdevs
                    .iter()
                    .filter(|n| !n.addrs.is_empty())
                    .map(|n| format!("{} {}", n.name, n.addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" ")))
                    .collect();
                let text = format!("IP address {ip} is on no netdev here; addresses: {}", with.join(", "));
                if lenient { Check { ok: true, status: "unchecked", text } } else { bad("device-absent", text) }
            }
        };
    }

    if let Some(dev) = host.device(first) {
        if style == Style::RdmaCm {
            let nds = host.netdevs_of(&dev.name, None);
            let hint = match nds.first() {
                Some(n) => format!(": use its netdev, \"{n} 0\""),
                None => String::new(),
            };
            return bad("wrong-style", format!("RDMA device {first} given, but this library expects {}{hint}", style.expects()));
        }
        let Some(port) = second.and_then(|p| p.parse::<u32>().ok()).filter(|&p| p > 0) else {
            if style == Style::Both && second == Some("0") {
                return bad("bad-params", format!("\"{first} 0\": port numbers start at 1; {first} has {}", dev.ports_summary()));
            }
            return bad("bad-params", format!("RDMA device {first} given without a port number (\"{first} <port>\"); it has {}", dev.ports_summary()));
        };
        return match dev.port(port) {
            None => bad("device-absent", format!("RDMA device {first} has no port {port}; it has {}", dev.ports_summary())),
            Some(p) if p.is_active() || p.state == "unknown" => {
                let nds = host.netdevs_of(&dev.name, Some(port));
                let on = if nds.is_empty() { String::new() } else { format!(" (netdev {})", nds.join(", ")) };
                good(format!("RDMA device {first} port {port} {}{on}", p.state))
            }
            Some(p) => bad("port-down", format!("RDMA device {first} port {port} is {}, not ACTIVE (cable, switch/subnet manager, or the netdev is down)", p.state)),
        };
    }

    if let Some(n) = host.netdev(first) {
        if style == Style::Verbs {
            let hint = n.rdma.iter().find_map(|l| l.port.map(|p| format!(": its RDMA port is {} {p}, use \"{} {p}\"", l.dev, l.dev)));
            return bad("wrong-style", format!("netdev {first} given, but this library expects {}{}", style.expects(), hint.unwrap_or_default()));
        }
        let c = netdev_ports(host, n, "");
        return if lenient && !c.ok { Check { ok: true, status: "unchecked", ..c } } else { c };
    }

    // Names nothing on this host.
    let text = match style {
        Style::RdmaCm => format!("netdev {first} absent; present: {}", host.netdevs_summary()),
        Style::Verbs => format!("RDMA device {first} absent; present: {}", host.devices_summary()),
        Style::Both | Style::Sock | Style::Unknown => format!(
            "{first} is neither a netdev, an IP address nor an RDMA device here; netdevs: {}; RDMA devices: {}",
            host.netdevs_summary(),
            host.devices_summary()
        ),
    };
    if lenient {
        let _ = text;
        Check { ok: true, status: "unchecked", text: "not checked (not a provider dat-info knows; the string is the provider's own)".into() }
    } else {
        bad("device-absent", text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::scan;
    use crate::sysfs::tests::fake_host;

    fn host() -> (crate::sysfs::tests::TempDir, Host) {
        let t = fake_host();
        let mut h = scan(&t.0);
        h.netdevs.iter_mut().find(|n| n.name == "dum0").unwrap().addrs.push("10.0.0.1".parse().unwrap());
        h.netdevs.iter_mut().find(|n| n.name == "lo").unwrap().addrs.push("127.0.0.1".parse().unwrap());
        h.addrs_known = true;
        (t, h)
    }

    #[test]
    fn styles() {
        assert_eq!(Style::of("libdaplofa.so.2"), Style::RdmaCm);
        assert_eq!(Style::of("/usr/lib/libdaploscm.so.2"), Style::Verbs);
        assert_eq!(Style::of("libdaploucm.so.2"), Style::Verbs);
        assert_eq!(Style::of("libdaplibv.so.2"), Style::Both);
        assert_eq!(Style::of("libdatmock.so.2"), Style::Unknown);
    }

    #[test]
    fn rdma_cm_netdev_and_ip() {
        let (_t, h) = host();
        let c = check(&h, Style::RdmaCm, "dum0 0");
        assert!(c.ok, "{c:?}");
        assert_eq!(c.text, "netdev dum0 (rxe0 port 1 ACTIVE)");
        let c = check(&h, Style::RdmaCm, "10.0.0.1 0");
        assert!(c.ok, "{c:?}");
        assert!(c.text.contains("10.0.0.1 is on netdev dum0"), "{c:?}");
        let c = check(&h, Style::RdmaCm, "10.9.9.9 0");
        assert_eq!(c.status, "device-absent");
        assert!(c.text.contains("dum0 10.0.0.1"), "{c:?}");
    }

    #[test]
    fn rdma_cm_absent_netdev_lists_present_ones() {
        let (_t, h) = host();
        let c = check(&h, Style::RdmaCm, "eth9 0");
        assert!(!c.ok);
        assert_eq!(c.status, "device-absent");
        assert_eq!(c.text, "netdev eth9 absent; present: dum0 (rxe0 port 1 ACTIVE), eth2, eth10, ib0 (mlx5_0 port 1 ACTIVE), lo");
    }

    #[test]
    fn netdev_without_rdma() {
        let (_t, h) = host();
        let c = check(&h, Style::RdmaCm, "eth2 0");
        assert_eq!(c.status, "no-rdma-device");
        assert!(c.text.contains("RDMA-capable netdevs: dum0 (rxe0 port 1 ACTIVE), ib0"), "{c:?}");
    }

    #[test]
    fn verbs_device_ports() {
        let (_t, h) = host();
        let c = check(&h, Style::Verbs, "rxe0 1");
        assert!(c.ok, "{c:?}");
        assert_eq!(c.text, "RDMA device rxe0 port 1 ACTIVE (netdev dum0)");
        let c = check(&h, Style::Verbs, "mlx5_0 2");
        assert_eq!(c.status, "port-down");
        assert!(c.text.contains("port 2 is DOWN"), "{c:?}");
        let c = check(&h, Style::Verbs, "mlx5_0 3");
        assert_eq!(c.status, "device-absent");
        assert!(c.text.contains("has no port 3; it has port 1 ACTIVE, port 2 DOWN"), "{c:?}");
        let c = check(&h, Style::Verbs, "mlx4_0 1");
        assert_eq!(c.text, "RDMA device mlx4_0 absent; present: mlx5_0 (port 1 ACTIVE, port 2 DOWN), rxe0 (port 1 ACTIVE)");
        let c = check(&h, Style::Verbs, "rxe0");
        assert_eq!(c.status, "bad-params");
    }

    #[test]
    fn wrong_style_gives_the_right_spelling() {
        let (_t, h) = host();
        let c = check(&h, Style::Verbs, "dum0 0");
        assert_eq!(c.status, "wrong-style");
        assert!(c.text.ends_with("use \"rxe0 1\""), "{c:?}");
        let c = check(&h, Style::RdmaCm, "rxe0 1");
        assert_eq!(c.status, "wrong-style");
        assert!(c.text.ends_with("use its netdev, \"dum0 0\""), "{c:?}");
    }

    #[test]
    fn ours_takes_both() {
        let (_t, h) = host();
        assert!(check(&h, Style::Both, "dum0 0").ok);
        assert!(check(&h, Style::Both, "rxe0 1").ok);
        assert!(!check(&h, Style::Both, "rxe0 0").ok);
        let c = check(&h, Style::Both, "eth9 0");
        assert!(c.text.starts_with("eth9 is neither"), "{c:?}");
    }

    #[test]
    fn software_provider_netdev_and_address() {
        let (_t, mut h) = host();
        assert_eq!(Style::of("/opt/x/libdaplsock.so.2"), Style::Sock);
        // lo: up, 127.0.0.1 (fake_host writes operstate "up" for it).
        let c = check(&h, Style::Sock, "lo 0");
        assert!(c.ok, "{c:?}");
        assert_eq!(c.text, "netdev lo up, IPv4 127.0.0.1");
        let c = check(&h, Style::Sock, "10.0.0.1 1");
        assert!(c.ok, "{c:?}");
        assert_eq!(c.text, "IP address 10.0.0.1 is on netdev dum0 up, IPv4 10.0.0.1");
        // eth2 is up but has no address: nothing to bind to.
        let c = check(&h, Style::Sock, "eth2 0");
        assert_eq!(c.status, "no-ipv4", "{c:?}");
        assert!(c.text.ends_with("would do: dum0 10.0.0.1, lo 127.0.0.1"), "{c:?}");
        let c = check(&h, Style::Sock, "eth9 0");
        assert_eq!(c.status, "device-absent");
        assert_eq!(c.text, "netdev eth9 absent; up netdevs with IPv4: dum0 10.0.0.1, lo 127.0.0.1");
        let c = check(&h, Style::Sock, "192.0.2.1 0");
        assert_eq!(c.status, "device-absent");
        assert!(c.text.starts_with("IP address 192.0.2.1 is on no netdev here"), "{c:?}");
        assert_eq!(check(&h, Style::Sock, "lo").status, "bad-params", "number missing");
        assert_eq!(check(&h, Style::Sock, "lo x").status, "bad-params");
        assert_eq!(check(&h, Style::Sock, "::1 0").status, "bad-params", "IPv6");
        // A verbs device name is not a netdev.
        assert_eq!(check(&h, Style::Sock, "rxe0 1").status, "device-absent");
        // Down: both by name and through its address.
        h.netdevs.iter_mut().find(|n| n.name == "dum0").unwrap().up = Some(false);
        let c = check(&h, Style::Sock, "dum0 0");
        assert_eq!(c.status, "netdev-down", "{c:?}");
        let c = check(&h, Style::Sock, "10.0.0.1 0");
        assert_eq!(c.status, "netdev-down", "{c:?}");
        assert!(c.text.contains("`ip link set dum0 up`"), "{c:?}");
        h.addrs_known = false;
        assert_eq!(check(&h, Style::Sock, "lo 0").status, "unchecked");
    }

    #[test]
    fn unknown_providers_are_not_judged() {
        let (_t, h) = host();
        let c = check(&h, Style::Unknown, "failopen");
        assert!(c.ok);
        assert_eq!(c.status, "unchecked");
        assert!(check(&h, Style::Unknown, "").ok);
        assert!(check(&h, Style::Unknown, "eth2 0").ok);
    }

    #[test]
    fn addresses_unknown_means_unchecked() {
        let (_t, mut h) = host();
        h.addrs_known = false;
        let c = check(&h, Style::RdmaCm, "10.9.9.9 0");
        assert!(c.ok);
        assert_eq!(c.status, "unchecked");
    }
}
