//! Opening the RDMA device an IA's ia_params name.
//!
//! Two dat.conf styles are in use: `"<netdev> 0"` or `"<ip address> 0"` (as
//! for libdaplofa) and `"<verbs device> <port>"` (as for libdaploscm/ucm).
//! Either way the device is found through rdma_cm, binding an id to the
//! interface address, so the verbs context is the one rdma_cm will use for
//! this IA's connections.

use super::Verbs;
use dapl_core::backend::{AsyncHandler, CmHandler, DeviceOps, Limits, QpCaps, Tick};
use dat_abi::status::{error, no_resources};
use dat_abi::*;
use rdma_core_sys as ibv;
use std::ffi::CStr;
use std::net::IpAddr;
use std::path::Path;

pub struct Device {
    pub ctx: *mut ibv::ibv_context,
    pub port: u8,
    pub name: String,
    pub netdev: Option<String>,
    /// The IA address, as a sockaddr DAT hands out by pointer.
    pub addr: Box<libc::sockaddr_storage>,
    pub dev_attr: ibv::ibv_device_attr,
    pub port_attr: ibv::ibv_port_attr,
    limits: Limits,
    pub channel: *mut ibv::rdma_event_channel,
    id: *mut ibv::rdma_cm_id,
}

// The verbs context and cm id are thread-safe in rdma-core; we only read them.
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: both were created in open() and nothing else owns them.
        unsafe {
            ibv::rdma_destroy_id(self.id);
            ibv::rdma_destroy_event_channel(self.channel);
        }
    }
}

enum Target {
    Address(IpAddr, Option<String>),
    VerbsPort(String, u8),
}

fn parse(params: &str, sys: &Path) -> Result<Target, String> {
    let mut words = params.split_whitespace();
    let first = words.next().ok_or("ia_params is empty; expected \"<netdev> 0\" or \"<device> <port>\"")?;
    let port: u8 = match words.next() {
        Some(p) => p.parse().map_err(|_| format!("port '{p}' in ia_params is not a number"))?,
        None => 0,
    };
    if let Ok(ip) = first.parse::<IpAddr>() {
        return Ok(Target::Address(ip, None));
    }
    if sys.join("class/net").join(first).exists() {
        let ip = netdev_address(first).ok_or(format!("netdev {first} has no IP address"))?;
        return Ok(Target::Address(ip, Some(first.to_owned())));
    }
    if sys.join("class/infiniband").join(first).exists() {
        return Ok(Target::VerbsPort(first.to_owned(), port.max(1)));
    }
    let present = |dir: &str| {
        std::fs::read_dir(sys.join(dir))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    };
    Err(format!(
        "'{first}' is neither an address, a netdev ({}) nor an RDMA device ({})",
        present("class/net"),
        present("class/infiniband")
    ))
}

/// The first IPv4 address of a netdev, else its first IPv6 one.
fn netdev_address(name: &str) -> Option<IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found: Option<IpAddr> = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: walking the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        // SAFETY: ifa_name is a C string for every entry.
        if ifa.ifa_addr.is_null() || unsafe { CStr::from_ptr(ifa.ifa_name) }.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: sa_family says which sockaddr this is.
        let ip = unsafe {
            match (*ifa.ifa_addr).sa_family as i32 {
                libc::AF_INET => Some(IpAddr::from(u32::from_be((*(ifa.ifa_addr as *const libc::sockaddr_in)).sin_addr.s_addr).to_be_bytes())),
                libc::AF_INET6 => Some(IpAddr::from((*(ifa.ifa_addr as *const libc::sockaddr_in6)).sin6_addr.s6_addr)),
                _ => None,
            }
        };
        match ip {
            Some(v4 @ IpAddr::V4(_)) => {
                found = Some(v4);
                break;
            }
            Some(v6) if found.is_none() => found = Some(v6),
            _ => {}
        }
    }
    // SAFETY: the list from getifaddrs above.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// The netdev carrying a verbs device port (RoCE/iWARP, or IPoIB).
fn port_netdev(sys: &Path, dev: &str, port: u8) -> Option<String> {
    if !sys.join(format!("class/infiniband/{dev}/ports/{port}")).exists() {
        return None;
    }
    let ndevs = sys.join(format!("class/infiniband/{dev}/ports/{port}/gid_attrs/ndevs/0"));
    if let Ok(name) = std::fs::read_to_string(ndevs) {
        let name = name.trim();
        if !name.is_empty() {
            return Some(name.to_owned());
        }
    }
    // IPoIB interfaces point back at their device instead.
    std::fs::read_dir(sys.join("class/net")).ok()?.filter_map(|e| e.ok()).find_map(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        sys.join(format!("class/net/{n}/device/infiniband/{dev}")).exists().then_some(n)
    })
}

pub fn sockaddr_of(ip: IpAddr) -> libc::sockaddr_storage {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match ip {
        IpAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any sockaddr.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as _;
            sin.sin_addr.s_addr = u32::from_ne_bytes(v4.octets());
        }
        IpAddr::V6(v6) => {
            // SAFETY: as above.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as _;
            sin6.sin6_addr.s6_addr = v6.octets();
        }
    }
    ss
}

fn unreachable(msg: String) -> DAT_RETURN {
    log::error!("{msg}");
    error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE)
}

impl Device {
    fn open_port(params: &str) -> Result<Device, DAT_RETURN> {
        let sys = Path::new("/sys");
        let target = parse(params, sys).map_err(|m| unreachable(format!("ia_params \"{params}\": {m}")))?;
        let (ip, netdev, want) = match target {
            Target::Address(ip, netdev) => (ip, netdev, None),
            Target::VerbsPort(dev, port) => {
                let netdev = port_netdev(sys, &dev, port).ok_or_else(|| {
                    let ports = std::fs::read_dir(sys.join(format!("class/infiniband/{dev}/ports")))
                        .map(|d| d.filter_map(|e| e.ok()).map(|e| format!("{dev} port {}", e.file_name().to_string_lossy()))
                            .collect::<Vec<_>>().join(", "))
                        .unwrap_or_default();
                    unreachable(format!(
                        "{dev} port {port}: no such port or no network interface on it, so rdma_cm cannot address it (present: {ports})"))
                })?;
                let ip = netdev_address(&netdev)
                    .ok_or_else(|| unreachable(format!("{netdev} (of {dev} port {port}) has no IP address")))?;
                (ip, Some(netdev), Some((dev, port)))
            }
        };
        // SAFETY: plain constructor; checked for NULL.
        let channel = unsafe { ibv::rdma_create_event_channel() };
        if channel.is_null() {
            log::error!("rdma_cm is not available ({}); is rdma_ucm loaded and /dev/infiniband/rdma_cm present?",
                std::io::Error::last_os_error());
            return Err(no_resources(DAT_RESOURCE_DEVICE));
        }
        let mut id: *mut ibv::rdma_cm_id = std::ptr::null_mut();
        // SAFETY: channel is live; id receives a new cm id.
        if unsafe { ibv::rdma_create_id(channel, &mut id, std::ptr::null_mut(), ibv::RDMA_PS_TCP) } != 0 {
            // SAFETY: created above.
            unsafe { ibv::rdma_destroy_event_channel(channel) };
            return Err(no_resources(DAT_RESOURCE_DEVICE));
        }
        let mut addr = Box::new(sockaddr_of(ip));
        // SAFETY: id is live; addr is a valid sockaddr for its family.
        let bound = unsafe { ibv::rdma_bind_addr(id, &mut *addr as *mut _ as *mut libc::sockaddr) } == 0;
        // SAFETY: after a successful bind, verbs names the device behind the address.
        let ctx = if bound { unsafe { (*id).verbs } } else { std::ptr::null_mut() };
        if ctx.is_null() {
            let err = std::io::Error::last_os_error();
            // SAFETY: both created above.
            unsafe {
                ibv::rdma_destroy_id(id);
                ibv::rdma_destroy_event_channel(channel);
            }
            return Err(unreachable(format!("no RDMA device has address {ip} ({err})")));
        }
        // SAFETY: ctx is live; the name is a C string owned by the device.
        let name = unsafe { CStr::from_ptr(ibv::ibv_get_device_name((*ctx).device)) }.to_string_lossy().into_owned();
        // SAFETY: set by the bind.
        let port = unsafe { (*id).port_num };
        let mut dev = Device {
            ctx,
            port,
            name,
            netdev,
            addr,
            // SAFETY: plain C structs, filled below.
            dev_attr: unsafe { std::mem::zeroed() },
            port_attr: unsafe { std::mem::zeroed() },
            limits: Limits::default(),
            channel,
            id,
        };
        if let Some((want_dev, want_port)) = want {
            if dev.name != want_dev || dev.port != want_port {
                return Err(unreachable(format!(
                    "{ip} belongs to {} port {}, not {want_dev} port {want_port}", dev.name, dev.port)));
            }
        }
        // SAFETY: live context, out-structs owned by dev.
        let rc = unsafe { ibv::ibv_query_device(ctx, &mut dev.dev_attr) };
        // SAFETY: as above; the inline helper picks the right ABI for the port query.
        let rc2 = unsafe { ibv::ibv_query_port(ctx, port, &mut dev.port_attr) };
        if rc != 0 || rc2 != 0 {
            log::error!("querying {} failed: {}", dev.name, std::io::Error::last_os_error());
            return Err(no_resources(DAT_RESOURCE_DEVICE));
        }
        dev.limits = dev.limits_of();
        log::debug!("ia_params \"{params}\": {} port {} at {ip} ({})", dev.name, dev.port,
            dev.netdev.as_deref().unwrap_or("no netdev"));
        Ok(dev)
    }

    /// Whether the device offers memory windows at all, and of type 2.
    fn windows(&self) -> (bool, bool) {
        let caps = self.dev_attr.device_cap_flags;
        let any = self.dev_attr.max_mw > 0 || caps & ibv::IBV_DEVICE_MEM_WINDOW != 0;
        let type2 = caps & (ibv::IBV_DEVICE_MEM_WINDOW_TYPE_2A | ibv::IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
        (any, type2)
    }

    fn limits_of(&self) -> Limits {
        let d = &self.dev_attr;
        let p = &self.port_attr;
        let (windows, windows_type2) = self.windows();
        Limits {
            vendor_id: d.vendor_id,
            vendor_part_id: d.vendor_part_id,
            hw_ver: d.hw_ver,
            // SAFETY: fw_ver is a NUL-terminated array filled by the kernel.
            fw_ver: unsafe { CStr::from_ptr(d.fw_ver.as_ptr()) }.to_string_lossy().into_owned(),
            max_qp: d.max_qp,
            max_qp_wr: d.max_qp_wr,
            max_sge: d.max_sge,
            max_sge_rd: d.max_sge_rd,
            max_cq: d.max_cq,
            max_cqe: d.max_cqe,
            max_mr: d.max_mr,
            max_mr_size: d.max_mr_size,
            max_pd: d.max_pd,
            max_qp_rd_atom: d.max_qp_rd_atom,
            max_res_rd_atom: d.max_res_rd_atom,
            max_qp_init_rd_atom: d.max_qp_init_rd_atom,
            max_mw: d.max_mw,
            max_srq: d.max_srq,
            max_srq_wr: d.max_srq_wr,
            max_srq_sge: d.max_srq_sge,
            max_msg_size: p.max_msg_sz,
            mtu: 128 << p.active_mtu.clamp(1, 5),
            atomics: d.atomic_cap != ibv::IBV_ATOMIC_NONE,
            windows,
            windows_type2,
        }
    }
}

fn mtu_bytes(mtu: u32) -> u32 {
    // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5
    if (1..=5).contains(&mtu) { 128 << mtu } else { 0 }
}

impl DeviceOps<Verbs> for Device {
    fn open(params: &str) -> Result<Device, DAT_RETURN> {
        Device::open_port(params)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn ia_address(&self) -> DAT_IA_ADDRESS_PTR {
        &*self.addr as *const libc::sockaddr_storage as DAT_IA_ADDRESS_PTR
    }

    fn describe(&self) -> Vec<(&'static str, String)> {
        let state = match self.port_attr.state {
            ibv::IBV_PORT_ACTIVE => "ACTIVE",
            ibv::IBV_PORT_DOWN => "DOWN",
            ibv::IBV_PORT_INIT => "INIT",
            ibv::IBV_PORT_ARMED => "ARMED",
            _ => "UNKNOWN",
        };
        vec![
            ("DAT_IB_DEVICE_NAME", self.name.clone()),
            ("DAT_IB_PORT_NUMBER", self.port.to_string()),
            ("DAT_IB_PORT_STATUS", state.to_owned()),
            ("DAT_IB_TRANSPORT_MTU", mtu_bytes(self.port_attr.active_mtu).to_string()),
            ("DAT_IB_NETDEV", self.netdev.clone().unwrap_or_default()),
        ]
    }

    fn address(&self) -> &libc::sockaddr_storage {
        &self.addr
    }

    fn create_conn_id(&self, context: usize, datagram: bool) -> std::io::Result<super::cm::CmId> {
        super::cm::create_id(self.channel, context, if datagram { ibv::RDMA_PS_UDP } else { ibv::RDMA_PS_TCP })
    }

    fn listen(&self, port: u16, context: usize, datagram: bool) -> std::io::Result<(super::cm::CmId, u16)> {
        super::cm::listen(self.channel, &self.addr, port, context, if datagram { ibv::RDMA_PS_UDP } else { ibv::RDMA_PS_TCP })
    }

    fn start_events(&self, on_cm: CmHandler<Verbs>, on_async: AsyncHandler, tick: Tick) -> std::io::Result<super::cm::CmThread> {
        super::cm::CmThread::start(self.channel, on_cm, self.ctx, on_async, tick)
    }

    fn alloc_pd(&self) -> std::io::Result<super::pd::Pd> {
        super::pd::Pd::alloc(self.ctx, self.windows().0)
    }

    fn create_cq(&self, depth: i32) -> std::io::Result<super::cq::Cq> {
        super::cq::Cq::create(self.ctx, depth)
    }

    fn create_qp(
        &self,
        pd: &super::pd::Pd,
        send_cq: &super::cq::Cq,
        recv_cq: &super::cq::Cq,
        srq: Option<&super::srq::VSrq>,
        caps: &QpCaps,
        context: DAT_HANDLE,
    ) -> std::io::Result<super::qp::Qp> {
        let srq = srq.map_or(std::ptr::null_mut(), |s| s.0);
        super::qp::Qp::create(pd.pd, send_cq.cq, recv_cq.cq, srq, caps, self.port, context)
    }

    fn group_counters(&self, group: DAT_IA_COUNTER_TYPE) -> Vec<(u32, u64)> {
        super::counters::read(Path::new("/sys"), &self.name, self.port, group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_styles() {
        let root = std::env::temp_dir().join(format!("daplibv-sys-{}", std::process::id()));
        std::fs::create_dir_all(root.join("class/net/lo")).unwrap();
        std::fs::create_dir_all(root.join("class/infiniband/mlx5_0")).unwrap();
        assert!(matches!(parse("10.0.0.1 0", &root), Ok(Target::Address(_, None))));
        assert!(matches!(parse("fe80::1 0", &root), Ok(Target::Address(_, None))));
        assert!(matches!(parse("lo 0", &root), Ok(Target::Address(_, Some(ref n))) if n == "lo"));
        assert!(matches!(parse("mlx5_0 2", &root), Ok(Target::VerbsPort(ref d, 2)) if d == "mlx5_0"));
        assert!(matches!(parse("mlx5_0", &root), Ok(Target::VerbsPort(_, 1))));
        let err = parse("eth9 0", &root).err().unwrap();
        assert!(err.contains("lo") && err.contains("mlx5_0"), "{err}");
        assert!(parse("", &root).is_err());
        assert!(parse("mlx5_0 x", &root).is_err());
        std::fs::remove_dir_all(root).unwrap();
    }
}
