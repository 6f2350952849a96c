//! `dat-info --generate`: dat.conf lines for this host's RDMA netdevs and
//! active ports, for our verbs provider `libdaplibv.so.2` (which takes both
//! `"<netdev> 0"` and `"<verbs device> <port>"`).

use crate::sysfs::Host;

pub const OUR_PROVIDER: &str = "libdaplibv.so.2";

pub struct Generated {
    pub lines: Vec<String>,
    /// Things left out, and why ("rxe1 port 1 is DOWN").
    pub skipped: Vec<String>,
}

fn line(ia: &str, params: &str) -> String {
    format!("{ia} u2.0 nonthreadsafe default {OUR_PROVIDER} dapl.2.0 \"{params}\" \"\"")
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
    g
}

/// The whole output: a header, the lines, and comments for what was left out.
pub fn render(host: &Host, g: &Generated) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# dat.conf entries for {OUR_PROVIDER} on this host (dat-info --generate)\n# RDMA devices: {}\n# netdevs: {}\n",
        host.devices_summary(),
        host.netdevs_summary()
    ));
    for l in &g.lines {
        out.push_str(l);
        out.push('\n');
    }
    for s in &g.skipped {
        out.push_str(&format!("# left out: {s} (bring the link up and run dat-info --generate again)\n"));
    }
    if g.lines.is_empty() {
        out.push_str("# no RDMA-capable netdev or ACTIVE port found: nothing to generate\n");
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
        assert_eq!(g.skipped, ["mlx5_0 port 2 is DOWN"]);
        let text = render(&h, &g);
        assert!(text.contains("# left out: mlx5_0 port 2 is DOWN"), "{text}");
        // Every generated line parses as a dat.conf entry.
        let c = dat_registry::conf::parse(text.as_bytes());
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.entries.len(), 4);
    }
}
