//! `dat-info --generate`: dat.conf lines for this host's RDMA netdevs and
//! active ports, for our verbs provider `libdaplibv.so.2` (which takes both
//! `"<netdev> 0"` and `"<verbs device> <port>"`), then for the software
//! provider `libdaplsock.so.2` (TCP/UDP, any host): one entry per up netdev
//! with an IPv4 address, lo included, named `ofa-v2-sock-<netdev>` with
//! ia_params `"<netdev> 0"`. Naming the netdev rather than its address keeps
//! the entry right when DHCP changes the address.

use crate::sysfs::Host;

pub const OUR_PROVIDER: &str = "libdaplibv.so.2";
pub const SOCK_PROVIDER: &str = "libdaplsock.so.2";
/// IA names of generated software-provider entries: this, then the netdev.
pub const SOCK_IA_PREFIX: &str = "ofa-v2-sock-";

pub struct Generated {
    pub lines: Vec<String>,
    /// Things left out, and why ("rxe1 port 1 is DOWN").
    pub skipped: Vec<String>,
}

fn line(ia: &str, params: &str) -> String {
    lib_line(ia, OUR_PROVIDER, params)
}

fn lib_line(ia: &str, lib: &str, params: &str) -> String {
    format!("{ia} u2.0 nonthreadsafe default {lib} dapl.2.0 \"{params}\" \"\"")
}

pub fn generate(host: &Host) -> Generated {
    let mut g = Generated { lines: Vec::new(), skipped: Vec::new() };
    for n in host.netdevs.iter().filter(|n| !n.rdma.is_empty()) {
        let up = n.rdma.iter().any(|l| host.link_state(l).is_none_or(|s| s == "ACTIVE"));
        if up {
            g.lines.push(line(&format!("ofa-v2-{}", n.name), &format!("{} 0", n.name)));
        } else {
            g.skipped.push(format!("netdev {}: its RDMA port is not ACTIVE", host.describe_netdev(n)));
        }
    }
    for d in &host.devices {
        for p in &d.ports {
            if p.is_active() {
                g.lines.push(line(&format!("ofa-v2-{}-{}", d.name, p.num), &format!("{} {}", d.name, p.num)));
            } else {
                g.skipped.push(format!("{} port {} is {}", d.name, p.num, p.state));
            }
        }
    }
    // Software provider, after the verbs entries (the registry's default IA
    // for a program naming none is the first entry: keep that RDMA).
    if !host.addrs_known {
        g.skipped.push(format!("{SOCK_PROVIDER} entries: netdev addresses unknown (only read on the running host, not under --root)"));
        return g;
    }
    for n in &host.netdevs {
        match (n.up, n.ipv4().is_empty()) {
            (Some(false), _) => g.skipped.push(format!("{SOCK_PROVIDER} on netdev {}: it is DOWN", n.name)),
            (_, true) => g.skipped.push(format!("{SOCK_PROVIDER} on netdev {}: no IPv4 address", n.name)),
            _ => g.lines.push(lib_line(&format!("{SOCK_IA_PREFIX}{}", n.name), SOCK_PROVIDER, &format!("{} 0", n.name))),
        }
    }
    g
}

/// The whole output: a header, the lines, and comments for what was left out.
pub fn render(host: &Host, g: &Generated) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# dat.conf entries for {OUR_PROVIDER} (verbs) and {SOCK_PROVIDER} (TCP/UDP) on this host (dat-info --generate)\n# RDMA devices: {}\n# netdevs: {}\n",
        host.devices_summary(),
        host.netdevs_summary()
    ));
    for l in &g.lines {
        out.push_str(l);
        out.push('\n');
    }
    for s in &g.skipped {
        out.push_str(&format!("# left out: {s}\n"));
    }
    if g.lines.is_empty() {
        out.push_str("# no RDMA-capable netdev, ACTIVE port or up IPv4 netdev found: nothing to generate\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::scan;
    use crate::sysfs::tests::fake_host;

    #[test]
    fn lines_for_netdevs_and_active_ports() {
        let t = fake_host();
        let h = scan(&t.0);
        let g = generate(&h);
        assert_eq!(
            g.lines,
            [
                "ofa-v2-dum0 u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 \"dum0 0\" \"\"",
                "ofa-v2-ib0 u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 \"ib0 0\" \"\"",
                "ofa-v2-mlx5_0-1 u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 \"mlx5_0 1\" \"\"",
                "ofa-v2-rxe0-1 u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 \"rxe0 1\" \"\"",
            ]
        );
        assert_eq!(g.skipped[0], "mlx5_0 port 2 is DOWN");
        assert!(g.skipped[1].starts_with("libdaplsock.so.2 entries: netdev addresses unknown"), "{:?}", g.skipped);
        let text = render(&h, &g);
        assert!(text.contains("# left out: mlx5_0 port 2 is DOWN"), "{text}");
        // Every generated line parses as a dat.conf entry.
        let c = dat_registry::conf::parse(text.as_bytes());
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.entries.len(), 4);
    }

    #[test]
    fn software_provider_lines_for_up_ipv4_netdevs() {
        let t = fake_host();
        let mut h = scan(&t.0);
        let mut set = |name: &str, addr: Option<&str>, up: bool| {
            let n = h.netdevs.iter_mut().find(|n| n.name == name).unwrap();
            n.addrs.extend(addr.map(|a| a.parse::<std::net::IpAddr>().unwrap()));
            n.up = Some(up);
        };
        set("lo", Some("127.0.0.1"), true);
        set("dum0", Some("10.0.0.1"), true);
        set("eth2", Some("fe80::1"), true); // IPv6 only: the provider cannot use it
        set("eth10", Some("192.168.1.5"), false);
        h.addrs_known = true;
        let g = generate(&h);
        // The verbs entries first, unchanged, then one per up IPv4 netdev.
        assert_eq!(g.lines.len(), 6, "{:?}", g.lines);
        assert!(g.lines[..4].iter().all(|l| l.contains(" libdaplibv.so.2 ")), "{:?}", g.lines);
        assert_eq!(
            g.lines[4..],
            [
                "ofa-v2-sock-dum0 u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 \"dum0 0\" \"\"",
                "ofa-v2-sock-lo u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 \"lo 0\" \"\"",
            ]
        );
        assert!(g.skipped.contains(&"libdaplsock.so.2 on netdev eth2: no IPv4 address".to_owned()), "{:?}", g.skipped);
        assert!(g.skipped.contains(&"libdaplsock.so.2 on netdev eth10: it is DOWN".to_owned()), "{:?}", g.skipped);
        // ib0 has no address at all.
        assert!(g.skipped.contains(&"libdaplsock.so.2 on netdev ib0: no IPv4 address".to_owned()), "{:?}", g.skipped);
        // And each generated entry passes dat-info's own check of its ia_params.
        for l in &g.lines[4..] {
            let e = &dat_registry::conf::parse(l.as_bytes()).entries[0];
            let c = crate::params::check(&h, crate::params::Style::of(&e.library), &e.ia_params);
            assert!(c.ok, "{l}: {c:?}");
        }
    }
}
