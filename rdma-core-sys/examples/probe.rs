//! probe: a loopback RC send/receive on one RDMA device, through the raw
//! bindings and the inline data-path helpers.  Needs a real (or Soft-RoCE)
//! device:
//!
//!     probe [DEVICE] [PORT]        (defaults: rxe0, 1; PROBE_GID_INDEX=0)
//!
//! Opens the device, queries it and the port (inline ibv_query_port),
//! allocates a PD, registers a 4 KiB MR, creates a CQ on a completion
//! channel and two RC QPs, connects them to each other by hand
//! (INIT -> RTR -> RTS over the port's GID), posts a receive on one and a
//! send on the other, waits for the CQ event, polls with the inline
//! ibv_poll_cq, checks the bytes, and prints "probe: OK".
use std::ffi::CStr;
use std::mem::zeroed;
use std::process::exit;
use std::ptr;
use std::time::{Duration, Instant};

use rdma_core_sys::*;

const BUF: usize = 4096;
const MSG: usize = 64;

fn fail(what: &str) -> ! {
    eprintln!("probe: FAILED: {what}: {}", std::io::Error::last_os_error());
    exit(1)
}

fn check(rc: i32, what: &str) {
    if rc != 0 {
        eprintln!(
            "probe: FAILED: {what}: {}",
            std::io::Error::from_raw_os_error(rc.abs())
        );
        exit(1)
    }
}

fn gid_str(gid: &ibv_gid) -> String {
    // SAFETY: every bit pattern of the union is a valid byte array.
    let raw = unsafe { gid.raw };
    raw.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

struct Qp {
    qp: *mut ibv_qp,
}

fn create_qp(pd: *mut ibv_pd, cq: *mut ibv_cq) -> Qp {
    // SAFETY: zeroed ibv_qp_init_attr is the documented "no options" value.
    let mut init: ibv_qp_init_attr = unsafe { zeroed() };
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 4;
    init.cap.max_recv_wr = 4;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    // SAFETY: pd, cq live; init filled in.
    let qp = unsafe { ibv_create_qp(pd, &mut init) };
    if qp.is_null() {
        fail("ibv_create_qp");
    }
    Qp { qp }
}

fn connect(qp: &Qp, remote_qpn: u32, port: u8, gid: ibv_gid, gid_index: u8, mtu: ibv_mtu) {
    // SAFETY: zeroed ibv_qp_attr is valid; only masked fields are read.
    let mut a: ibv_qp_attr = unsafe { zeroed() };
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    let mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    // SAFETY: qp live; attr filled for the mask.
    check(
        unsafe { ibv_modify_qp(qp.qp, &mut a, mask as i32) },
        "modify_qp INIT",
    );

    // SAFETY: as above.
    let mut a: ibv_qp_attr = unsafe { zeroed() };
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = remote_qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.sgid_index = gid_index;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.sl = 0;
    a.ah_attr.port_num = port;
    let mask = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;
    // SAFETY: qp live; attr filled for the mask.
    check(
        unsafe { ibv_modify_qp(qp.qp, &mut a, mask as i32) },
        "modify_qp RTR",
    );

    // SAFETY: as above.
    let mut a: ibv_qp_attr = unsafe { zeroed() };
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    let mask = IBV_QP_STATE
        | IBV_QP_TIMEOUT
        | IBV_QP_RETRY_CNT
        | IBV_QP_RNR_RETRY
        | IBV_QP_SQ_PSN
        | IBV_QP_MAX_QP_RD_ATOMIC;
    // SAFETY: qp live; attr filled for the mask.
    check(
        unsafe { ibv_modify_qp(qp.qp, &mut a, mask as i32) },
        "modify_qp RTS",
    );
}

/// rdma_cm: an event channel and an id bound to the device's IP
/// (PROBE_IP, default 10.0.0.1), read back through rdma_get_local_addr.
unsafe fn rdma_cm_check() {
    let ip: std::net::Ipv4Addr = std::env::var("PROBE_IP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or([10, 0, 0, 1].into());
    // SAFETY: librdmacm calls on objects created here, destroyed once.
    unsafe {
        let ch = rdma_create_event_channel();
        if ch.is_null() {
            fail("rdma_create_event_channel");
        }
        let mut id = ptr::null_mut();
        check(
            rdma_create_id(ch, &mut id, ptr::null_mut(), RDMA_PS_TCP),
            "rdma_create_id",
        );
        let mut sin: libc::sockaddr_in = zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from(ip).to_be();
        if rdma_bind_addr(id, (&raw mut sin).cast()) != 0 {
            fail("rdma_bind_addr");
        }
        let local = rdma_get_local_addr(id).cast::<libc::sockaddr_in>();
        let bound = std::net::Ipv4Addr::from(u32::from_be((*local).sin_addr.s_addr));
        let dev = if (*id).verbs.is_null() {
            "-".into()
        } else {
            CStr::from_ptr(ibv_get_device_name((*(*id).verbs).device))
                .to_string_lossy()
                .into_owned()
        };
        println!(
            "probe: rdma_cm id bound to {bound} on {dev} port {}",
            (*id).port_num
        );
        if bound != ip {
            eprintln!("probe: FAILED: rdma_get_local_addr gave {bound}, bound {ip}");
            exit(1);
        }
        check(rdma_destroy_id(id), "rdma_destroy_id");
        rdma_destroy_event_channel(ch);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let want = args.get(1).map(String::as_str).unwrap_or("rxe0");
    let port: u8 = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(1);
    let want_gid: Option<i32> = std::env::var("PROBE_GID_INDEX")
        .ok()
        .and_then(|v| v.parse().ok());

    // SAFETY: every call below follows the libibverbs API contract: objects
    // are used only while live and destroyed once, in reverse order.
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        if list.is_null() {
            fail("ibv_get_device_list");
        }
        let mut dev = ptr::null_mut();
        for i in 0..n as usize {
            let d = *list.add(i);
            let name = CStr::from_ptr(ibv_get_device_name(d)).to_string_lossy();
            println!("probe: device {i}: {name}");
            if name == want {
                dev = d;
            }
        }
        if dev.is_null() {
            eprintln!("probe: FAILED: no device {want}");
            exit(1);
        }
        let ctx = ibv_open_device(dev);
        if ctx.is_null() {
            fail("ibv_open_device");
        }
        println!(
            "probe: opened {want}, extended verbs context: {}",
            !verbs_get_ctx(ctx).is_null()
        );

        let mut dattr: ibv_device_attr_ex = zeroed();
        check(
            ibv_query_device_ex(ctx, ptr::null(), &mut dattr),
            "ibv_query_device_ex",
        );
        let fw = CStr::from_ptr(dattr.orig_attr.fw_ver.as_ptr()).to_string_lossy();
        println!(
            "probe: device: fw '{fw}', max_qp {}, max_cq {}, max_mr_size {}, max_qp_wr {}, phys_ports {}",
            dattr.orig_attr.max_qp,
            dattr.orig_attr.max_cq,
            dattr.orig_attr.max_mr_size,
            dattr.orig_attr.max_qp_wr,
            dattr.orig_attr.phys_port_cnt
        );

        let mut pattr: ibv_port_attr = zeroed();
        check(ibv_query_port(ctx, port, &mut pattr), "ibv_query_port");
        let state = CStr::from_ptr(ibv_port_state_str(pattr.state)).to_string_lossy();
        println!(
            "probe: port {port}: state {state}, active_mtu {}, max_mtu {}, link_layer {}, gid_tbl_len {}, lid {}",
            128 << pattr.active_mtu,
            128 << pattr.max_mtu,
            if pattr.link_layer as u32 == IBV_LINK_LAYER_ETHERNET {
                "Ethernet"
            } else {
                "IB"
            },
            pattr.gid_tbl_len,
            pattr.lid
        );
        if pattr.state != IBV_PORT_ACTIVE {
            eprintln!("probe: FAILED: port {port} not active");
            exit(1);
        }

        // GID: index 0 unless PROBE_GID_INDEX says otherwise; if that entry
        // is empty, the first non-empty one.
        let mut gid_index = want_gid.unwrap_or(0);
        let mut gid: ibv_gid = zeroed();
        check(
            ibv_query_gid(ctx, port, gid_index, &mut gid),
            "ibv_query_gid",
        );
        if gid.raw == [0; 16] && want_gid.is_none() {
            for i in 1..pattr.gid_tbl_len {
                let mut g: ibv_gid = zeroed();
                if ibv_query_gid(ctx, port, i, &mut g) == 0 && g.raw != [0; 16] {
                    gid_index = i;
                    gid = g;
                    break;
                }
            }
        }
        let mut entry: ibv_gid_entry = zeroed();
        let gid_type = if ibv_query_gid_ex(ctx, port as u32, gid_index as u32, &mut entry, 0) == 0 {
            match entry.gid_type {
                IBV_GID_TYPE_IB => "IB",
                IBV_GID_TYPE_ROCE_V1 => "RoCE v1",
                IBV_GID_TYPE_ROCE_V2 => "RoCE v2",
                _ => "?",
            }
        } else {
            "?"
        };
        println!("probe: gid[{gid_index}] = {} ({gid_type})", gid_str(&gid));

        let pd = ibv_alloc_pd(ctx);
        if pd.is_null() {
            fail("ibv_alloc_pd");
        }
        let mut buf = vec![0u8; BUF];
        let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        let mr = ibv_reg_mr(pd, buf.as_mut_ptr().cast(), BUF, access as i32);
        if mr.is_null() {
            fail("ibv_reg_mr");
        }
        println!(
            "probe: MR 4 KiB lkey {:#x} rkey {:#x}",
            (*mr).lkey,
            (*mr).rkey
        );

        let chan = ibv_create_comp_channel(ctx);
        if chan.is_null() {
            fail("ibv_create_comp_channel");
        }
        let cq = ibv_create_cq(ctx, 16, ptr::null_mut(), chan, 0);
        if cq.is_null() {
            fail("ibv_create_cq");
        }
        let a = create_qp(pd, cq);
        let b = create_qp(pd, cq);
        let mtu = pattr.active_mtu.min(IBV_MTU_1024);
        connect(&a, (*b.qp).qp_num, port, gid, gid_index as u8, mtu);
        connect(&b, (*a.qp).qp_num, port, gid, gid_index as u8, mtu);
        println!(
            "probe: QPs {:#x} <-> {:#x} in RTS",
            (*a.qp).qp_num,
            (*b.qp).qp_num
        );

        // Payload in the first half of the MR, landing zone in the second.
        for (i, byte) in buf[..MSG].iter_mut().enumerate() {
            *byte = (i as u8).wrapping_mul(7).wrapping_add(0x5a);
        }
        let base = buf.as_mut_ptr() as u64;

        check(ibv_req_notify_cq(cq, 0), "ibv_req_notify_cq");

        let mut rsge = ibv_sge {
            addr: base + (BUF / 2) as u64,
            length: (BUF / 2) as u32,
            lkey: (*mr).lkey,
        };
        let mut rwr: ibv_recv_wr = zeroed();
        rwr.wr_id = 2;
        rwr.sg_list = &mut rsge;
        rwr.num_sge = 1;
        let mut bad_r = ptr::null_mut();
        check(ibv_post_recv(b.qp, &mut rwr, &mut bad_r), "ibv_post_recv");

        let mut ssge = ibv_sge {
            addr: base,
            length: MSG as u32,
            lkey: (*mr).lkey,
        };
        let mut swr: ibv_send_wr = zeroed();
        swr.wr_id = 1;
        swr.sg_list = &mut ssge;
        swr.num_sge = 1;
        swr.opcode = IBV_WR_SEND;
        swr.send_flags = IBV_SEND_SIGNALED;
        let mut bad_s = ptr::null_mut();
        check(ibv_post_send(a.qp, &mut swr, &mut bad_s), "ibv_post_send");

        // The completion channel must fire (the CQ was armed).
        let mut pfd = libc::pollfd {
            fd: (*chan).fd,
            events: libc::POLLIN,
            revents: 0,
        };
        match libc::poll(&mut pfd, 1, 30_000) {
            1 => {}
            0 => {
                eprintln!("probe: FAILED: no completion event within 30 s");
                exit(1)
            }
            _ => fail("poll(comp channel)"),
        }
        let mut ev_cq = ptr::null_mut();
        let mut ev_ctx = ptr::null_mut();
        check(
            ibv_get_cq_event(chan, &mut ev_cq, &mut ev_ctx),
            "ibv_get_cq_event",
        );
        assert_eq!(ev_cq, cq);
        ibv_ack_cq_events(cq, 1);
        println!("probe: completion event on the channel");

        let mut got_send = false;
        let mut got_recv = None;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !(got_send && got_recv.is_some()) {
            let mut wc: [ibv_wc; 4] = zeroed();
            let k = ibv_poll_cq(cq, wc.len() as i32, wc.as_mut_ptr());
            if k < 0 {
                eprintln!("probe: FAILED: ibv_poll_cq returned {k}");
                exit(1);
            }
            for w in &wc[..k as usize] {
                let status = CStr::from_ptr(ibv_wc_status_str(w.status)).to_string_lossy();
                println!(
                    "probe: wc wr_id {} status {status} opcode {} byte_len {} qp {:#x}",
                    w.wr_id, w.opcode, w.byte_len, w.qp_num
                );
                if w.status != IBV_WC_SUCCESS {
                    eprintln!("probe: FAILED: completion status {status}");
                    exit(1);
                }
                match (w.wr_id, w.opcode) {
                    (1, IBV_WC_SEND) => got_send = true,
                    (2, IBV_WC_RECV) => got_recv = Some(w.byte_len),
                    _ => {
                        eprintln!("probe: FAILED: unexpected completion");
                        exit(1)
                    }
                }
            }
            if Instant::now() > deadline {
                eprintln!("probe: FAILED: completions missing after 30 s");
                exit(1);
            }
            if k == 0 {
                std::thread::yield_now();
            }
        }
        if got_recv != Some(MSG as u32) {
            eprintln!("probe: FAILED: received {got_recv:?} bytes, sent {MSG}");
            exit(1);
        }
        if buf[BUF / 2..BUF / 2 + MSG] != buf[..MSG] {
            eprintln!("probe: FAILED: received bytes differ from the sent ones");
            exit(1);
        }
        println!("probe: {MSG} bytes arrived intact");

        check(ibv_destroy_qp(a.qp), "ibv_destroy_qp");
        check(ibv_destroy_qp(b.qp), "ibv_destroy_qp");
        check(ibv_destroy_cq(cq), "ibv_destroy_cq");
        check(ibv_destroy_comp_channel(chan), "ibv_destroy_comp_channel");
        check(ibv_dereg_mr(mr), "ibv_dereg_mr");
        check(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
        check(ibv_close_device(ctx), "ibv_close_device");
        ibv_free_device_list(list);
        drop(buf);

        rdma_cm_check();
    }
    println!("probe: OK");
}
