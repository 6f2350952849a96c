//! What RDMA hardware and netdevs this host has, read from sysfs under a root
//! directory ("/" normally; a fake tree in tests).
//!
//! - RDMA devices: `/sys/class/infiniband/<dev>/ports/<n>/state` ("4: ACTIVE"),
//!   `link_layer`, and the netdevs of each port from `gid_attrs/ndevs/*`.
//! - netdevs: `/sys/class/net/*`, tied to an RDMA device by those `ndevs`
//!   files, by `/sys/class/net/<if>/device/infiniband/<dev>` (PCI NICs, with
//!   `dev_port` for the port) or by `/sys/class/infiniband/<dev>/parent`
//!   (Soft-RoCE, siw).

use std::collections::BTreeSet;
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub num: u32,
    /// The state's name as sysfs spells it ("ACTIVE", "DOWN", "INIT", ...),
    /// or "unknown" if the file is missing or unreadable.
    pub state: String,
    pub link_layer: Option<String>,
    /// netdevs named by this port's GID table.
    pub netdevs: Vec<String>,
}

impl Port {
    pub fn is_active(&self) -> bool {
        self.state == "ACTIVE"
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaDev {
    pub name: String,
    pub ports: Vec<Port>,
}

impl RdmaDev {
    pub fn port(&self, num: u32) -> Option<&Port> {
        self.ports.iter().find(|p| p.num == num)
    }

    /// "port 1 ACTIVE, port 2 DOWN"
    pub fn ports_summary(&self) -> String {
        if self.ports.is_empty() {
            return "no ports".into();
        }
        self.ports.iter().map(|p| format!("port {} {}", p.num, p.state)).collect::<Vec<_>>().join(", ")
    }
}

/// A netdev's tie to an RDMA device port (`port` is None when only the
/// device is known).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RdmaLink {
    pub dev: String,
    pub port: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDev {
    pub name: String,
    pub rdma: Vec<RdmaLink>,
    pub addrs: Vec<IpAddr>,
    /// Administratively up (IFF_UP in `flags`; without that file, `operstate`
    /// "up" or "unknown", which is what lo and tun devices report); None if
    /// sysfs says neither.
    pub up: Option<bool>,
}

impl NetDev {
    /// Its IPv4 addresses (the software provider's only kind).
    pub fn ipv4(&self) -> Vec<std::net::Ipv4Addr> {
        self.addrs.iter().filter_map(|a| match a {
            IpAddr::V4(v) => Some(*v),
            IpAddr::V6(_) => None,
        }).collect()
    }
}

/// IFF_UP from a netdev's sysfs `flags` ("0x1003"), else its `operstate`.
fn netdev_up(dir: &Path) -> Option<bool> {
    const IFF_UP: u32 = 0x1;
    if let Some(f) = read_trim(&dir.join("flags")).and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok()) {
        return Some(f & IFF_UP != 0);
    }
    match read_trim(&dir.join("operstate"))?.as_str() {
        "up" | "unknown" => Some(true),
        "down" | "lowerlayerdown" | "notpresent" | "dormant" => Some(false),
        _ => None,
    }
}

#[derive(Debug, Clone, Default)]
pub struct Host {
    pub root: PathBuf,
    pub devices: Vec<RdmaDev>,
    pub netdevs: Vec<NetDev>,
    /// Whether `addrs` of the netdevs were filled in (getifaddrs on the real
    /// host); with a fake root they are unknown, and IP checks are skipped.
    pub addrs_known: bool,
}

fn read_trim(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

fn dir_names(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(path) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort_by(|a, b| natural_cmp(a, b));
    names
}

/// Orders "port 2" before "port 10" and "eth2" before "eth10".
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(s: &str) -> (&str, Option<u64>) {
        let i = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        (&s[..i], s[i..].parse().ok())
    }
    split(a).cmp(&split(b)).then_with(|| a.cmp(b))
}

/// "4: ACTIVE" -> "ACTIVE"; "ACTIVE" stays.
pub fn parse_state(text: &str) -> String {
    let t = text.trim();
    let name = t.split_once(':').map(|(_, n)| n.trim()).unwrap_or(t);
    if name.is_empty() { "unknown".into() } else { name.to_owned() }
}

fn scan_port(dir: &Path, num: u32) -> Port {
    let state = read_trim(&dir.join("state")).map(|s| parse_state(&s)).unwrap_or_else(|| "unknown".into());
    let link_layer = read_trim(&dir.join("link_layer")).filter(|s| !s.is_empty());
    let mut netdevs = BTreeSet::new();
    let ndevs = dir.join("gid_attrs").join("ndevs");
    for idx in dir_names(&ndevs) {
        // Empty GID slots fail to read (EINVAL); filled ones hold a netdev name.
        if let Some(n) = read_trim(&ndevs.join(&idx)).filter(|s| !s.is_empty()) {
            netdevs.insert(n);
        }
    }
    Port { num, state, link_layer, netdevs: netdevs.into_iter().collect() }
}

/// Reads the RDMA devices and netdevs under `root` (no addresses: see
/// [`Host::fill_addrs`]).
pub fn scan(root: &Path) -> Host {
    let ib = root.join("sys/class/infiniband");
    let mut devices = Vec::new();
    let mut links: Vec<(String, RdmaLink)> = Vec::new();
    for name in dir_names(&ib) {
        let dir = ib.join(&name);
        let mut ports = Vec::new();
        for p in dir_names(&dir.join("ports")) {
            let Ok(num) = p.parse::<u32>() else { continue };
            let port = scan_port(&dir.join("ports").join(&p), num);
            for n in &port.netdevs {
                links.push((n.clone(), RdmaLink { dev: name.clone(), port: Some(num) }));
            }
            ports.push(port);
        }
        if let Some(parent) = read_trim(&dir.join("parent")).filter(|s| !s.is_empty()) {
            // rxe/siw have one port; say so when the device has exactly one.
            let port = (ports.len() == 1).then(|| ports[0].num);
            links.push((parent, RdmaLink { dev: name.clone(), port }));
        }
        devices.push(RdmaDev { name, ports });
    }
    let net = root.join("sys/class/net");
    let mut netdevs = Vec::new();
    for name in dir_names(&net) {
        let dir = net.join(&name);
        if !dir.is_dir() {
            continue; // e.g. bonding_masters
        }
        let dev_port = read_trim(&dir.join("dev_port")).and_then(|s| s.parse::<u32>().ok());
        let mut rdma: BTreeSet<RdmaLink> = links.iter().filter(|(n, _)| *n == name).map(|(_, l)| l.clone()).collect();
        for dev in dir_names(&dir.join("device/infiniband")) {
            let port = devices
                .iter()
                .find(|d| d.name == dev)
                .and_then(|d| match (dev_port, d.ports.len()) {
                    (_, 1) => Some(d.ports[0].num),
                    (Some(dp), _) => d.port(dp + 1).map(|p| p.num),
                    _ => None,
                });
            rdma.insert(RdmaLink { dev, port });
        }
        // A port-less link is redundant next to a precise one for that device.
        let precise: Vec<String> = rdma.iter().filter(|l| l.port.is_some()).map(|l| l.dev.clone()).collect();
        let rdma = rdma.into_iter().filter(|l| l.port.is_some() || !precise.contains(&l.dev)).collect();
        let up = netdev_up(&dir);
        netdevs.push(NetDev { name, rdma, addrs: Vec::new(), up });
    }
    Host { root: root.to_owned(), devices, netdevs, addrs_known: false }
}

impl Host {
    pub fn device(&self, name: &str) -> Option<&RdmaDev> {
        self.devices.iter().find(|d| d.name == name)
    }

    pub fn netdev(&self, name: &str) -> Option<&NetDev> {
        self.netdevs.iter().find(|n| n.name == name)
    }

    pub fn netdev_with_addr(&self, addr: &IpAddr) -> Option<&NetDev> {
        self.netdevs.iter().find(|n| n.addrs.contains(addr))
    }

    /// The state of a link's port, if the port is known.
    pub fn link_state(&self, link: &RdmaLink) -> Option<&str> {
        let port = link.port?;
        self.device(&link.dev)?.port(port).map(|p| p.state.as_str())
    }

    /// "rxe0 port 1 ACTIVE"
    pub fn describe_link(&self, link: &RdmaLink) -> String {
        match (link.port, self.link_state(link)) {
            (Some(p), Some(s)) => format!("{} port {p} {s}", link.dev),
            (Some(p), None) => format!("{} port {p}", link.dev),
            (None, _) => match self.device(&link.dev) {
                Some(d) => format!("{} ({})", link.dev, d.ports_summary()),
                None => link.dev.clone(),
            },
        }
    }

    /// "dum0 (rxe0 port 1 ACTIVE)" or "lo"
    pub fn describe_netdev(&self, n: &NetDev) -> String {
        if n.rdma.is_empty() {
            n.name.clone()
        } else {
            let links: Vec<String> = n.rdma.iter().map(|l| self.describe_link(l)).collect();
            format!("{} ({})", n.name, links.join(", "))
        }
    }

    /// Every netdev, RDMA-capable ones described: "dum0 (rxe0 port 1 ACTIVE), lo".
    pub fn netdevs_summary(&self) -> String {
        if self.netdevs.is_empty() {
            return format!("none ({} is empty or missing)", self.root.join("sys/class/net").display());
        }
        self.netdevs.iter().map(|n| self.describe_netdev(n)).collect::<Vec<_>>().join(", ")
    }

    /// "rxe0 (port 1 ACTIVE)" for every RDMA device.
    pub fn devices_summary(&self) -> String {
        if self.devices.is_empty() {
            return format!("none ({} is empty or missing)", self.root.join("sys/class/infiniband").display());
        }
        self.devices.iter().map(|d| format!("{} ({})", d.name, d.ports_summary())).collect::<Vec<_>>().join(", ")
    }

    /// Netdevs an RDMA device's port belongs to (for suggestions).
    pub fn netdevs_of(&self, dev: &str, port: Option<u32>) -> Vec<&str> {
        self.netdevs
            .iter()
            .filter(|n| n.rdma.iter().any(|l| l.dev == dev && (port.is_none() || l.port.is_none() || l.port == port)))
            .map(|n| n.name.as_str())
            .collect()
    }

    /// Fills in each netdev's IP addresses from the running system
    /// (getifaddrs); only meaningful when `root` is "/".
    pub fn fill_addrs(&mut self) {
        if let Some(list) = crate::ifaddrs::list() {
            for (name, addr) in list {
                let n = self.netdevs.iter_mut().find(|n| n.name == name);
                if let Some(n) = n.filter(|n| !n.addrs.contains(&addr)) {
                    n.addrs.push(addr);
                }
            }
            self.addrs_known = true;
        }
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A scratch directory under the system temp dir, removed on drop.
    pub struct TempDir(pub PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "dat-info-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    pub fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// rxe0 (port 1 ACTIVE) on dum0; mlx5_0 with ports 1 (ACTIVE, ib0 by PCI
    /// device link) and 2 (DOWN, no netdev); netdevs dum0, ib0, lo, eth10, eth2.
    pub fn fake_host() -> TempDir {
        let t = TempDir::new("sysfs");
        let r = &t.0;
        write(r, "sys/class/infiniband/rxe0/ports/1/state", "4: ACTIVE\n");
        write(r, "sys/class/infiniband/rxe0/ports/1/link_layer", "Ethernet\n");
        write(r, "sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "dum0\n");
        write(r, "sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/1", "dum0\n");
        // An empty GID slot: real sysfs fails the read; an empty file stands in.
        write(r, "sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/2", "");
        write(r, "sys/class/infiniband/rxe0/parent", "dum0\n");
        write(r, "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
        write(r, "sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
        write(r, "sys/class/infiniband/mlx5_0/ports/2/state", "1: DOWN\n");
        write(r, "sys/class/infiniband/mlx5_0/ports/2/link_layer", "InfiniBand\n");
        for n in ["dum0", "lo", "eth10", "eth2"] {
            write(r, &format!("sys/class/net/{n}/operstate"), "up\n");
        }
        write(r, "sys/class/net/ib0/dev_port", "0\n");
        fs::create_dir_all(r.join("sys/class/net/ib0/device/infiniband/mlx5_0")).unwrap();
        write(r, "sys/class/net/bonding_masters", "");
        t
    }

    #[test]
    fn state_names() {
        assert_eq!(parse_state("4: ACTIVE\n"), "ACTIVE");
        assert_eq!(parse_state("1: DOWN"), "DOWN");
        assert_eq!(parse_state("ACTIVE"), "ACTIVE");
        assert_eq!(parse_state(""), "unknown");
    }

    #[test]
    fn scans_devices_ports_and_netdevs() {
        let t = fake_host();
        let h = scan(&t.0);
        let names: Vec<&str> = h.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["mlx5_0", "rxe0"]);
        let rxe = h.device("rxe0").unwrap();
        assert_eq!(rxe.ports.len(), 1);
        assert!(rxe.ports[0].is_active());
        assert_eq!(rxe.ports[0].netdevs, ["dum0"]);
        assert_eq!(rxe.ports[0].link_layer.as_deref(), Some("Ethernet"));
        assert_eq!(h.device("mlx5_0").unwrap().ports_summary(), "port 1 ACTIVE, port 2 DOWN");
        let nd: Vec<&str> = h.netdevs.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(nd, ["dum0", "eth2", "eth10", "ib0", "lo"], "natural order, files skipped");
        assert_eq!(h.netdev("dum0").unwrap().rdma, [RdmaLink { dev: "rxe0".into(), port: Some(1) }]);
        assert_eq!(h.netdev("ib0").unwrap().rdma, [RdmaLink { dev: "mlx5_0".into(), port: Some(1) }]);
        assert!(h.netdev("lo").unwrap().rdma.is_empty());
        assert_eq!(
            h.netdevs_summary(),
            "dum0 (rxe0 port 1 ACTIVE), eth2, eth10, ib0 (mlx5_0 port 1 ACTIVE), lo"
        );
        assert_eq!(h.devices_summary(), "mlx5_0 (port 1 ACTIVE, port 2 DOWN), rxe0 (port 1 ACTIVE)");
        assert_eq!(h.netdevs_of("rxe0", Some(1)), ["dum0"]);
    }

    #[test]
    fn netdev_up_from_flags_then_operstate() {
        let t = fake_host();
        let r = &t.0;
        // flags wins over operstate: lo reports operstate "unknown" though up.
        write(r, "sys/class/net/lo/flags", "0x9\n");
        write(r, "sys/class/net/lo/operstate", "unknown\n");
        write(r, "sys/class/net/eth2/flags", "0x1002\n");
        write(r, "sys/class/net/eth10/operstate", "down\n");
        let h = scan(r);
        assert_eq!(h.netdev("lo").unwrap().up, Some(true));
        assert_eq!(h.netdev("eth2").unwrap().up, Some(false), "IFF_UP clear");
        assert_eq!(h.netdev("eth10").unwrap().up, Some(false));
        assert_eq!(h.netdev("dum0").unwrap().up, Some(true), "operstate up");
        assert_eq!(h.netdev("ib0").unwrap().up, None, "neither file");
    }

    #[test]
    fn empty_root() {
        let t = TempDir::new("empty");
        let h = scan(&t.0);
        assert!(h.devices.is_empty() && h.netdevs.is_empty());
        assert!(h.devices_summary().starts_with("none ("));
    }
}
