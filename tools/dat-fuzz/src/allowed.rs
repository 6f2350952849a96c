//! Which return codes each call may give, by major type (DAT_GET_TYPE),
//! from the DAT 2.0 specification's "Return Values" for each call and
//! include/dat2/dat_error.h. Anything else is a finding. DAT_INTERNAL_ERROR
//! is in no row: the spec allows it, but from the core on an in-memory
//! backend it can only mean a bug.

use dat_abi::*;

const COMMON: &[u32] = &[DAT_SUCCESS, DAT_INVALID_HANDLE, DAT_INVALID_PARAMETER];

pub fn allowed(call: &str) -> (&'static [u32], &'static [u32]) {
    let extra: &'static [u32] = match call {
        "dat_ia_query" | "dat_pz_query" | "dat_evd_query" | "dat_lmr_query" | "dat_rmr_query" | "dat_ep_query"
        | "dat_srq_query" | "dat_psp_query" | "dat_cr_query" | "dat_ep_get_status" | "dat_evd_enable"
        | "dat_evd_disable" | "dat_evd_set_unwaitable" | "dat_evd_clear_unwaitable" | "dat_set_consumer_context"
        | "dat_get_consumer_context" | "dat_get_handle_type" | "dat_cno_query" | "dat_rsp_query"
        | "dat_lmr_sync_rdma_read" | "dat_lmr_sync_rdma_write" => &[],
        "dat_ep_recv_query" => &[DAT_MODEL_NOT_SUPPORTED],
        "dat_ep_set_watermark" | "dat_evd_modify_cno" | "dat_srq_set_lw" => &[DAT_INVALID_STATE, DAT_MODEL_NOT_SUPPORTED],
        "dat_ep_modify" | "dat_srq_resize" => &[DAT_INVALID_STATE, DAT_INSUFFICIENT_RESOURCES, DAT_MODEL_NOT_SUPPORTED],
        "dat_cno_wait" => &[DAT_INVALID_STATE, DAT_TIMEOUT_EXPIRED, DAT_INTERRUPTED_CALL],
        // DAT 2.0 lists only the common codes; a CR whose requester is gone, or whose new EVD is full, is refused so.
        "dat_cr_handoff" => &[DAT_INVALID_STATE, DAT_INSUFFICIENT_RESOURCES],
        "dat_psp_create_any" => &[DAT_CONN_QUAL_UNAVAILABLE, DAT_INSUFFICIENT_RESOURCES, DAT_MODEL_NOT_SUPPORTED],
        // The IB extension: an op a provider lacks is DAT_NOT_IMPLEMENTED; the posts answer as the DTO posts.
        "dat_extension_op" => &[DAT_NOT_IMPLEMENTED, DAT_INVALID_STATE, DAT_INSUFFICIENT_RESOURCES, DAT_LENGTH_ERROR,
            DAT_PROTECTION_VIOLATION, DAT_PRIVILEGES_VIOLATION, DAT_MODEL_NOT_SUPPORTED],
        "dat_ia_close" => &[DAT_INVALID_STATE, DAT_INSUFFICIENT_RESOURCES],
        "dat_pz_create" => &[DAT_INSUFFICIENT_RESOURCES],
        "dat_cno_create" | "dat_evd_create" | "dat_rmr_create" | "dat_srq_create" | "dat_ep_create"
        | "dat_ep_create_with_srq" => &[DAT_INSUFFICIENT_RESOURCES, DAT_MODEL_NOT_SUPPORTED],
        "dat_pz_free" | "dat_cno_free" | "dat_evd_free" | "dat_lmr_free" | "dat_rmr_free" | "dat_ep_free"
        | "dat_srq_free" | "dat_psp_free" | "dat_rsp_free" | "dat_ep_reset" | "dat_ep_disconnect"
        | "dat_cr_reject" => &[DAT_INVALID_STATE],
        "dat_evd_dequeue" => &[DAT_QUEUE_EMPTY, DAT_INVALID_STATE],
        "dat_evd_wait" => &[DAT_INVALID_STATE, DAT_TIMEOUT_EXPIRED, DAT_INTERRUPTED_CALL],
        "dat_evd_resize" => &[DAT_INVALID_STATE, DAT_INSUFFICIENT_RESOURCES],
        "dat_evd_post_se" => &[DAT_QUEUE_FULL],
        "dat_lmr_create" => &[DAT_INSUFFICIENT_RESOURCES, DAT_INVALID_STATE, DAT_MODEL_NOT_SUPPORTED,
            DAT_PRIVILEGES_VIOLATION, DAT_PROTECTION_VIOLATION, DAT_LENGTH_ERROR],
        "dat_rmr_bind" | "dat_ep_post_send" | "dat_ep_post_recv" | "dat_ep_post_rdma_read"
        | "dat_ep_post_rdma_write" | "dat_srq_post_recv" => &[DAT_INVALID_STATE, DAT_INSUFFICIENT_RESOURCES,
            DAT_LENGTH_ERROR, DAT_PROTECTION_VIOLATION, DAT_PRIVILEGES_VIOLATION, DAT_MODEL_NOT_SUPPORTED],
        "dat_ep_connect" | "dat_ep_dup_connect" => &[DAT_INVALID_STATE, DAT_INVALID_ADDRESS, DAT_INSUFFICIENT_RESOURCES, DAT_MODEL_NOT_SUPPORTED],
        "dat_psp_create" => &[DAT_CONN_QUAL_IN_USE, DAT_INSUFFICIENT_RESOURCES, DAT_MODEL_NOT_SUPPORTED],
        "dat_rsp_create" => &[DAT_CONN_QUAL_IN_USE, DAT_INSUFFICIENT_RESOURCES, DAT_MODEL_NOT_SUPPORTED, DAT_INVALID_STATE],
        "dat_cr_accept" => &[DAT_INVALID_STATE, DAT_INSUFFICIENT_RESOURCES],
        other => panic!("no return-code row for {other}"),
    };
    (COMMON, extra)
}

pub fn is_allowed(call: &str, r: DAT_RETURN) -> bool {
    let major = r & DAT_TYPE_MASK;
    let (common, extra) = allowed(call);
    common.contains(&major) || extra.contains(&major)
}

pub fn name(r: DAT_RETURN) -> String {
    const NAMES: &[(u32, &str)] = &[
        (DAT_SUCCESS, "SUCCESS"), (DAT_ABORT, "ABORT"), (DAT_CONN_QUAL_IN_USE, "CONN_QUAL_IN_USE"),
        (DAT_INSUFFICIENT_RESOURCES, "INSUFFICIENT_RESOURCES"), (DAT_INTERNAL_ERROR, "INTERNAL_ERROR"),
        (DAT_INVALID_HANDLE, "INVALID_HANDLE"), (DAT_INVALID_PARAMETER, "INVALID_PARAMETER"),
        (DAT_INVALID_STATE, "INVALID_STATE"), (DAT_LENGTH_ERROR, "LENGTH_ERROR"),
        (DAT_MODEL_NOT_SUPPORTED, "MODEL_NOT_SUPPORTED"), (DAT_PROVIDER_NOT_FOUND, "PROVIDER_NOT_FOUND"),
        (DAT_PRIVILEGES_VIOLATION, "PRIVILEGES_VIOLATION"), (DAT_PROTECTION_VIOLATION, "PROTECTION_VIOLATION"),
        (DAT_QUEUE_EMPTY, "QUEUE_EMPTY"), (DAT_QUEUE_FULL, "QUEUE_FULL"), (DAT_TIMEOUT_EXPIRED, "TIMEOUT_EXPIRED"),
        (DAT_INVALID_ADDRESS, "INVALID_ADDRESS"), (DAT_INTERRUPTED_CALL, "INTERRUPTED_CALL"),
        (DAT_NOT_IMPLEMENTED, "NOT_IMPLEMENTED"), (DAT_CONN_QUAL_UNAVAILABLE, "CONN_QUAL_UNAVAILABLE"),
    ];
    let major = r & DAT_TYPE_MASK;
    let n = NAMES.iter().find(|(v, _)| *v == major).map_or("?", |(_, n)| n);
    format!("{r:#010x} ({n})")
}
