//! DAT_IA_ATTR and DAT_PROVIDER_ATTR as ordered (name, value) lists, so the
//! text and JSON outputs show the same fields in the same order.

use tool_common::Json;
use dat_abi::*;
use std::ffi::{CStr, c_char};

#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Str(String),
    Int(i64),
    Bool(bool),
    List(Vec<String>),
}

impl Val {
    pub fn text(&self) -> String {
        match self {
            Val::Str(s) if s.is_empty() => "\"\"".into(),
            Val::Str(s) => s.clone(),
            Val::Int(i) => i.to_string(),
            Val::Bool(b) => if *b { "yes" } else { "no" }.into(),
            Val::List(l) if l.is_empty() => "none".into(),
            Val::List(l) => l.join(", "),
        }
    }

    pub fn json(&self) -> Json {
        match self {
            Val::Str(s) => Json::Str(s.clone()),
            Val::Int(i) => Json::Int(*i),
            Val::Bool(b) => Json::Bool(*b),
            Val::List(l) => Json::Arr(l.iter().map(|s| Json::Str(s.clone())).collect()),
        }
    }
}

pub type Fields = Vec<(&'static str, Val)>;

#[derive(Debug, Clone, Default)]
pub struct IaInfo {
    pub ia: Fields,
    pub provider: Fields,
    /// dat_ia_close's error, if closing failed (worth knowing, not fatal).
    pub close_error: Option<String>,
}

/// Shown without -v.
pub const SUMMARY_IA: &[&str] = &[
    "adapter_name", "vendor_name", "ia_address", "max_eps", "max_evds", "max_evd_qlen", "max_lmrs",
    "max_rmrs", "max_pzs", "max_message_size", "max_rdma_size", "max_iov_segments_per_dto",
];
pub const SUMMARY_PROVIDER: &[&str] =
    &["provider_name", "provider_version", "dapl_version", "is_thread_safe", "features"];

fn cstr(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// # Safety
/// `attrs` points to `n` named attributes with C strings (or NULL).
unsafe fn named(n: DAT_COUNT, attrs: *const DAT_NAMED_ATTR) -> Vec<String> {
    if attrs.is_null() || n <= 0 {
        return Vec::new();
    }
    let s = |p: *const c_char| {
        // SAFETY: per the contract.
        if p.is_null() { "(null)".to_owned() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() }
    };
    // SAFETY: per the contract; capped against a garbage count.
    (0..n.min(256) as usize).map(|i| unsafe { &*attrs.add(i) }).map(|a| format!("{}={}", s(a.name), s(a.value))).collect()
}

fn flags(v: u32, names: &[(u32, &str)]) -> Vec<String> {
    let mut out: Vec<String> = names.iter().filter(|(b, _)| *b != 0 && v & b != 0).map(|(_, n)| n.to_string()).collect();
    let known: u32 = names.iter().map(|(b, _)| b).fold(0, |a, b| a | b);
    if v & !known != 0 {
        out.push(format!("{:#x}", v & !known));
    }
    out
}

fn int(v: impl TryInto<i64>) -> Val {
    Val::Int(v.try_into().unwrap_or(i64::MAX))
}

fn boolean(v: DAT_BOOLEAN) -> Val {
    Val::Bool(v != 0)
}

/// Reads everything out of a successful dat_ia_query.
///
/// # Safety
/// The attrs were filled in by a provider: their pointers are valid now.
pub unsafe fn read_ia_info(ia: &DAT_IA_ATTR, p: &DAT_PROVIDER_ATTR) -> IaInfo {
    // SAFETY: per the contract.
    let addr = unsafe { crate::ifaddrs::sockaddr_ip(ia.ia_address_ptr as *const u8) };
    let ext = match ia.extension_supported {
        DAT_EXTENSION_NONE => "none".to_owned(),
        DAT_EXTENSION_IB => format!("IB (version {})", ia.extension_version),
        DAT_EXTENSION_IW => format!("iWARP (version {})", ia.extension_version),
        o => format!("{o} (version {})", ia.extension_version),
    };
    let ia_fields: Fields = vec![
        ("adapter_name", Val::Str(cstr(&ia.adapter_name))),
        ("vendor_name", Val::Str(cstr(&ia.vendor_name))),
        ("hardware_version", Val::Str(format!("{}.{}", ia.hardware_version_major, ia.hardware_version_minor))),
        ("firmware_version", Val::Str(format!("{}.{}", ia.firmware_version_major, ia.firmware_version_minor))),
        ("ia_address", Val::Str(addr.map(|a| a.to_string()).unwrap_or_else(|| "none".into()))),
        ("max_eps", int(ia.max_eps)),
        ("max_dto_per_ep", int(ia.max_dto_per_ep)),
        ("max_rdma_read_per_ep_in", int(ia.max_rdma_read_per_ep_in)),
        ("max_rdma_read_per_ep_out", int(ia.max_rdma_read_per_ep_out)),
        ("max_evds", int(ia.max_evds)),
        ("max_evd_qlen", int(ia.max_evd_qlen)),
        ("max_iov_segments_per_dto", int(ia.max_iov_segments_per_dto)),
        ("max_lmrs", int(ia.max_lmrs)),
        ("max_lmr_block_size", int(ia.max_lmr_block_size)),
        ("max_lmr_virtual_address", Val::Str(format!("{:#x}", ia.max_lmr_virtual_address))),
        ("max_pzs", int(ia.max_pzs)),
        ("max_message_size", int(ia.max_message_size)),
        ("max_rdma_size", int(ia.max_rdma_size)),
        ("max_rmrs", int(ia.max_rmrs)),
        ("max_rmr_target_address", Val::Str(format!("{:#x}", ia.max_rmr_target_address))),
        ("max_srqs", int(ia.max_srqs)),
        ("max_ep_per_srq", int(ia.max_ep_per_srq)),
        ("max_recv_per_srq", int(ia.max_recv_per_srq)),
        ("max_iov_segments_per_rdma_read", int(ia.max_iov_segments_per_rdma_read)),
        ("max_iov_segments_per_rdma_write", int(ia.max_iov_segments_per_rdma_write)),
        ("max_rdma_read_in", int(ia.max_rdma_read_in)),
        ("max_rdma_read_out", int(ia.max_rdma_read_out)),
        ("max_rdma_read_per_ep_in_guaranteed", boolean(ia.max_rdma_read_per_ep_in_guaranteed)),
        ("max_rdma_read_per_ep_out_guaranteed", boolean(ia.max_rdma_read_per_ep_out_guaranteed)),
        ("zb_supported", boolean(ia.zb_supported)),
        ("extension", Val::Str(ext)),
        // SAFETY: per the contract.
        ("transport_attr", Val::List(unsafe { named(ia.num_transport_attr, ia.transport_attr) })),
        ("vendor_attr", Val::List(unsafe { named(ia.num_vendor_attr, ia.vendor_attr) })),
    ];

    let mut features = Vec::new();
    if ia.extension_supported != DAT_EXTENSION_NONE {
        features.push(match ia.extension_supported {
            DAT_EXTENSION_IB => "extensions (IB)".to_owned(),
            DAT_EXTENSION_IW => "extensions (iWARP)".to_owned(),
            o => format!("extensions ({o})"),
        });
    }
    for (on, name) in [
        (p.srq_supported != 0, "SRQ"),
        (p.supports_multipath != 0, "multipath"),
        (p.ha_supported != 0, "HA"),
        (p.is_signal_safe != 0, "signal-safe"),
        (ia.zb_supported != 0, "zero-based virtual addresses"),
        (p.dto_async_return_guaranteed != 0, "async DTO return"),
        (p.lmr_sync_req != 0, "LMR sync required"),
        (p.rdma_write_for_rdma_read_req != 0, "RDMA read needs remote write access"),
    ] {
        if on {
            features.push(name.to_owned());
        }
    }
    let mem = {
        let mut m = vec!["virtual".to_owned()];
        m.extend(flags(p.lmr_mem_types_supported, &[(DAT_MEM_TYPE_LMR, "lmr"), (DAT_MEM_TYPE_SHARED_VIRTUAL, "shared_virtual")]));
        m
    };
    let qos = {
        let mut q = vec!["best_effort".to_owned()];
        q.extend(flags(p.dat_qos_supported, &[
            (DAT_QOS_HIGH_THROUGHPUT, "high_throughput"),
            (DAT_QOS_LOW_LATENCY, "low_latency"),
            (DAT_QOS_ECONOMY, "economy"),
            (DAT_QOS_PREMIUM, "premium"),
        ]));
        q
    };
    let completion = flags(p.completion_flags_supported, &[
        (DAT_COMPLETION_SUPPRESS_FLAG, "suppress"),
        (DAT_COMPLETION_SOLICITED_WAIT_FLAG, "solicited_wait"),
        (DAT_COMPLETION_UNSIGNALLED_FLAG, "unsignalled"),
        (DAT_COMPLETION_BARRIER_FENCE_FLAG, "barrier_fence"),
        (DAT_COMPLETION_EVD_THRESHOLD_FLAG, "evd_threshold"),
        (DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG, "lmr_invalidate_fence"),
    ]);
    let iov = match p.iov_ownership_on_return {
        DAT_IOV_CONSUMER => "consumer".to_owned(),
        DAT_IOV_PROVIDER_NOMOD => "provider_nomod".to_owned(),
        DAT_IOV_PROVIDER_MOD => "provider_mod".to_owned(),
        o => o.to_string(),
    };
    let rmr_scope = match p.rmr_scope_supported {
        DAT_RMR_SCOPE_EP => "ep".to_owned(),
        DAT_RMR_SCOPE_PZ => "pz".to_owned(),
        DAT_RMR_SCOPE_ANY => "any".to_owned(),
        o => o.to_string(),
    };
    let provider: Fields = vec![
        ("provider_name", Val::Str(cstr(&p.provider_name))),
        ("provider_version", Val::Str(format!("{}.{}", p.provider_version_major, p.provider_version_minor))),
        ("dapl_version", Val::Str(format!("{}.{}", p.dapl_version_major, p.dapl_version_minor))),
        ("is_thread_safe", boolean(p.is_thread_safe)),
        ("features", Val::List(features)),
        ("lmr_mem_types_supported", Val::List(mem)),
        ("iov_ownership_on_return", Val::Str(iov)),
        ("dat_qos_supported", Val::List(qos)),
        ("completion_flags_supported", Val::List(completion)),
        ("max_private_data_size", int(p.max_private_data_size)),
        ("supports_multipath", boolean(p.supports_multipath)),
        ("ep_creator", Val::Str(format!("{}", p.ep_creator))),
        ("pz_support", Val::Str(format!("{}", p.pz_support))),
        ("optimal_buffer_alignment", int(p.optimal_buffer_alignment)),
        ("srq_supported", boolean(p.srq_supported)),
        ("srq_watermarks_supported", int(p.srq_watermarks_supported)),
        ("srq_ep_pz_difference_supported", boolean(p.srq_ep_pz_difference_supported)),
        ("srq_info_supported", int(p.srq_info_supported)),
        ("ep_recv_info_supported", int(p.ep_recv_info_supported)),
        ("lmr_sync_req", boolean(p.lmr_sync_req)),
        ("dto_async_return_guaranteed", boolean(p.dto_async_return_guaranteed)),
        ("rdma_write_for_rdma_read_req", boolean(p.rdma_write_for_rdma_read_req)),
        ("rdma_read_lmr_rmr_context_exposure", boolean(p.rdma_read_lmr_rmr_context_exposure)),
        ("rmr_scope_supported", Val::Str(rmr_scope)),
        ("is_signal_safe", boolean(p.is_signal_safe)),
        ("ha_supported", boolean(p.ha_supported)),
        ("ha_loadbalancing", int(p.ha_loadbalancing)),
        // SAFETY: per the contract.
        ("provider_specific_attr", Val::List(unsafe { named(p.num_provider_specific_attr, p.provider_specific_attr) })),
    ];
    IaInfo { ia: ia_fields, provider, close_error: None }
}
