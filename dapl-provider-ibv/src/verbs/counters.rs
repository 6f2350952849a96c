//! The device's own statistics, read from sysfs for dat_ib_start_counter /
//! dat_ib_stop_counter: the kernel IB CM's message counts per port, the
//! port's link error counters, and the diagnostic counters some HCAs keep.
//! A file the device does not have is left out, so its DAT counter stays 0.

use dat_abi::*;
use std::path::{Path, PathBuf};

/// (file under the group's directory, IA counter it feeds)
type Map = &'static [(&'static str, u32)];

const CM: Map = &[
    ("cm_tx_msgs/req", DCNT_IA_CM_REQ_TX),
    ("cm_tx_msgs/rep", DCNT_IA_CM_REP_TX),
    ("cm_tx_msgs/rtu", DCNT_IA_CM_RTU_TX),
    ("cm_tx_msgs/rej", DCNT_IA_CM_USER_REJ_TX),
    ("cm_tx_msgs/mra", DCNT_IA_CM_MRA_TX),
    ("cm_tx_msgs/dreq", DCNT_IA_CM_DREQ_TX),
    ("cm_tx_msgs/drep", DCNT_IA_CM_DREP_TX),
    ("cm_rx_msgs/req", DCNT_IA_CM_REQ_RX),
    ("cm_rx_msgs/rep", DCNT_IA_CM_REP_RX),
    ("cm_rx_msgs/rtu", DCNT_IA_CM_RTU_RX),
    ("cm_rx_msgs/rej", DCNT_IA_CM_USER_REJ_RX),
    ("cm_rx_msgs/mra", DCNT_IA_CM_MRA_RX),
    ("cm_rx_msgs/dreq", DCNT_IA_CM_DREQ_RX),
    ("cm_rx_msgs/drep", DCNT_IA_CM_DREP_RX),
    ("cm_tx_retries/req", DCNT_IA_CM_ERR_REQ_RETRY),
    ("cm_tx_retries/rep", DCNT_IA_CM_ERR_REP_RETRY),
    ("cm_tx_retries/rtu", DCNT_IA_CM_ERR_RTU_RETRY),
    ("cm_tx_retries/mra", DCNT_IA_CM_ERR_MRA_RETRY),
    ("cm_tx_retries/dreq", DCNT_IA_CM_ERR_DREQ_RETRY),
    ("cm_tx_retries/drep", DCNT_IA_CM_ERR_DREP_RETRY),
    ("cm_tx_duplicates/req", DCNT_IA_CM_ERR_REQ_DUP),
    ("cm_tx_duplicates/rep", DCNT_IA_CM_ERR_REP_DUP),
    ("cm_tx_duplicates/rtu", DCNT_IA_CM_ERR_RTU_DUP),
    ("cm_tx_duplicates/mra", DCNT_IA_CM_ERR_MRA_DUP),
    ("cm_tx_duplicates/dreq", DCNT_IA_CM_ERR_DREQ_DUP),
    ("cm_tx_duplicates/drep", DCNT_IA_CM_ERR_DREP_DUP),
];

const LNK: Map = &[
    ("port_rcv_errors", DCNT_IA_LNK_ERR_RCV),
    ("port_rcv_remote_physical_errors", DCNT_IA_LNK_ERR_RCV_REM_PHYS),
    ("port_rcv_constraint_errors", DCNT_IA_LNK_ERR_RCV_CONSTRAINT),
    ("port_xmit_discards", DCNT_IA_LNK_ERR_XMT_DISCARDS),
    ("port_xmit_constraint_errors", DCNT_IA_LNK_ERR_XMT_CONTRAINT),
    ("local_link_integrity_errors", DCNT_IA_LNK_ERR_INTEGRITY),
    ("excessive_buffer_overrun_errors", DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN),
    ("port_rcv_switch_relay_errors", DCNT_IA_LNK_WARN_RCV_SW_RELAY),
    ("port_xmit_wait", DCNT_IA_LNK_WARN_XMT_WAIT),
];

const DIAG: Map = &[
    ("rq_num_rae", DCNT_IA_DIAG_ERR_RQ_RAE),
    ("rq_num_oos", DCNT_IA_DIAG_ERR_RQ_OOS),
    ("rq_num_rire", DCNT_IA_DIAG_ERR_RQ_RIRE),
    ("rq_num_udsdprd", DCNT_IA_DIAG_ERR_RQ_UDSDPRD),
    ("sq_num_rae", DCNT_IA_DIAG_ERR_SQ_RAE),
    ("sq_num_oos", DCNT_IA_DIAG_ERR_SQ_OOS),
    ("sq_num_rire", DCNT_IA_DIAG_ERR_SQ_RIRE),
    ("sq_num_rree", DCNT_IA_DIAG_ERR_SQ_RREE),
    ("sq_num_tree", DCNT_IA_DIAG_ERR_SQ_TREE),
];

/// Where one group's files live for `dev` port `port` under `sys`.
fn group_dir(sys: &Path, dev: &str, port: u8, group: DAT_IA_COUNTER_TYPE) -> Option<(PathBuf, Map)> {
    Some(match group {
        DCNT_IA_CM => (sys.join(format!("class/infiniband_cm/{dev}/{port}")), CM),
        DCNT_IA_LNK => (sys.join(format!("class/infiniband/{dev}/ports/{port}/counters")), LNK),
        DCNT_IA_DIAG => (sys.join(format!("class/infiniband/{dev}/diag_counters")), DIAG),
        _ => return None,
    })
}

pub fn read(sys: &Path, dev: &str, port: u8, group: DAT_IA_COUNTER_TYPE) -> Vec<(u32, u64)> {
    let Some((dir, map)) = group_dir(sys, dev, port, group) else { return Vec::new() };
    map.iter()
        .filter_map(|(file, i)| {
            let text = std::fs::read_to_string(dir.join(file)).ok()?;
            // Some counters print in hex (0x...); most in decimal.
            let t = text.trim();
            let v = match t.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                None => t.parse().ok()?,
            };
            Some((*i, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_exists() {
        let root = std::env::temp_dir().join(format!("daplibv-cntr-{}", std::process::id()));
        let lnk = root.join("class/infiniband/dev0/ports/1/counters");
        std::fs::create_dir_all(&lnk).unwrap();
        std::fs::write(lnk.join("port_rcv_errors"), "7\n").unwrap();
        std::fs::write(lnk.join("port_xmit_wait"), "0x10\n").unwrap();
        std::fs::write(lnk.join("port_xmit_discards"), "garbage\n").unwrap();
        let mut got = read(&root, "dev0", 1, DCNT_IA_LNK);
        got.sort();
        let mut want = vec![(DCNT_IA_LNK_ERR_RCV, 7), (DCNT_IA_LNK_WARN_XMT_WAIT, 16)];
        want.sort();
        assert_eq!(got, want);
        assert!(read(&root, "dev0", 1, DCNT_IA_CM).is_empty());
        assert!(read(&root, "dev0", 1, 99).is_empty());
        std::fs::remove_dir_all(root).unwrap();
    }
}
