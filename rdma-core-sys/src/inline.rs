//! Rust versions of the `static inline` functions (and function-like macros)
//! of `<infiniband/verbs.h>` and `<rdma/rdma_cma.h>`.
//!
//! bindgen only sees exported symbols, but most of the verbs data path is
//! header-only: `ibv_post_send` is a call through `qp->context->ops.post_send`,
//! `ibv_query_port` is a macro that prefers the provider's extended
//! `verbs_context::query_port`, and so on.  Each function here does what the
//! C inline does, through the same function pointers, so the Rust provider
//! gets the same behaviour (and speed) as a C consumer compiled against the
//! same headers: no allocation, no locking, one indirect call.
//!
//! Conventions kept from C:
//! * functions returning `c_int` report failure as a positive errno value
//!   (`ibv_poll_cq` as a negative count), those returning pointers return
//!   NULL and set `errno`;
//! * an extended op the provider does not implement gives `EOPNOTSUPP`,
//!   exactly where the C inline checks for it (`verbs_get_ctx_op`).
//!
//! Where C calls an op without checking it (the op is always set by
//! libibverbs or by the provider for the object in hand), a missing op
//! here panics instead of jumping through NULL.
//!
//! Not provided (not needed by the DAT provider; add them the same way if
//! they are): flow steering, flow actions, counters, WQs and RWQ indirection
//! tables, and `rdma_verbs.h`'s `rdma_post_*` conveniences.

use core::ffi::{c_int, c_uint, c_void};
use core::mem::{offset_of, size_of};
use core::ptr;

use crate::*;

#[cold]
#[inline(never)]
fn missing_op(op: &'static str) -> ! {
    panic!("rdma-core-sys: provider left verbs op `{op}` unset")
}

#[inline]
fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// `verbs_get_ctx`: the `verbs_context` around `ctx`, or NULL when the
/// context was not created by an extended (post-2013) provider.
///
/// # Safety
/// `ctx` must be a live context from `ibv_open_device`.
#[inline]
pub unsafe fn verbs_get_ctx(ctx: *mut ibv_context) -> *mut verbs_context {
    // SAFETY: ctx is live (caller); abi_compat is a plain pointer field.
    let compat = unsafe { (*ctx).abi_compat };
    // __VERBS_ABI_IS_EXTENDED is (void *)UINTPTR_MAX.
    if compat as usize != usize::MAX {
        return ptr::null_mut();
    }
    // container_of: `context` is the last member of struct verbs_context.
    ctx.cast::<u8>()
        .wrapping_sub(offset_of!(verbs_context, context))
        .cast::<verbs_context>()
}

/// `verbs_get_ctx_op(ctx, op)`, returning the op itself: `Some(fn)` when
/// `ctx` is an extended context, the provider's `verbs_context` is large
/// enough to contain `op` (its `sz` field), and `op` is set; else `None`.
///
/// Must be used inside an `unsafe` block, with `ctx` a live `*mut ibv_context`.
#[macro_export]
macro_rules! verbs_get_ctx_op {
    ($ctx:expr, $op:ident) => {{
        let vctx = $crate::verbs_get_ctx($ctx);
        if vctx.is_null()
            || (*vctx).sz
                < ::core::mem::size_of::<$crate::verbs_context>()
                    - ::core::mem::offset_of!($crate::verbs_context, $op)
        {
            None
        } else {
            // Only this field is read (no reference to the whole struct):
            // an older provider's verbs_context may be shorter than ours.
            (*vctx).$op
        }
    }};
}

// ---------------------------------------------------------------- device

unsafe extern "C" {
    /// Exported compat `ibv_query_port` symbol (the pre-extended
    /// `struct _compat_ibv_port_attr` ABI); use [`ibv_query_port`] instead.
    #[link_name = "ibv_query_port"]
    pub fn ibv_query_port_compat(
        context: *mut ibv_context,
        port_num: u8,
        port_attr: *mut _compat_ibv_port_attr,
    ) -> c_int;
}

/// `ibv_query_port` (the macro over `___ibv_query_port`): the provider's
/// extended `query_port` with the full `ibv_port_attr`, falling back to the
/// exported compat entry point with a zeroed attribute.
///
/// # Safety
/// `context` live; `port_attr` valid for writes.
#[inline]
pub unsafe fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: context is live (caller); the macro reads only checked fields.
    match unsafe { verbs_get_ctx_op!(context, query_port) } {
        // SAFETY: op set by the provider for this context; port_attr writable.
        Some(f) => unsafe { f(context, port_num, port_attr, size_of::<ibv_port_attr>()) },
        None => {
            // SAFETY: port_attr is writable (caller); the compat struct is a
            // prefix of ibv_port_attr, so zero the whole thing first.
            unsafe {
                ptr::write_bytes(port_attr, 0, 1);
                ibv_query_port_compat(context, port_num, port_attr.cast())
            }
        }
    }
}

/// `ibv_query_gid_ex`.
///
/// # Safety
/// `context` live; `entry` valid for writes.
#[inline]
pub unsafe fn ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
) -> c_int {
    // SAFETY: forwards the caller's pointers with the entry size the library expects.
    unsafe {
        _ibv_query_gid_ex(
            context,
            port_num,
            gid_index,
            entry,
            flags,
            size_of::<ibv_gid_entry>(),
        )
    }
}

/// `ibv_query_gid_table`.
///
/// # Safety
/// `context` live; `entries` valid for `max_entries` writes.
#[inline]
pub unsafe fn ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
) -> isize {
    // SAFETY: forwards the caller's pointers with the entry size the library expects.
    unsafe {
        _ibv_query_gid_table(
            context,
            entries,
            max_entries,
            flags,
            size_of::<ibv_gid_entry>(),
        )
    }
}

/// `ibv_query_device_ex`: the provider's extended query, or the legacy
/// `ibv_query_device` into a zeroed `attr.orig_attr` when the provider lacks
/// it (or answers `EOPNOTSUPP`/`ENOSYS`).
///
/// # Safety
/// `context` live; `input` NULL or readable; `attr` valid for writes.
#[inline]
pub unsafe fn ibv_query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
) -> c_int {
    // SAFETY: input is NULL or readable (caller).
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return libc::EINVAL;
    }
    // SAFETY: context is live (caller).
    if let Some(f) = unsafe { verbs_get_ctx_op!(context, query_device_ex) } {
        // SAFETY: op set by the provider; pointers from the caller.
        let ret = unsafe { f(context, input, attr, size_of::<ibv_device_attr_ex>()) };
        if ret != libc::EOPNOTSUPP && ret != libc::ENOSYS {
            return ret;
        }
    }
    // SAFETY: attr is writable (caller); orig_attr is its first member.
    unsafe {
        ptr::write_bytes(attr, 0, 1);
        ibv_query_device(context, &raw mut (*attr).orig_attr)
    }
}

/// `ibv_query_rt_values_ex`.
///
/// # Safety
/// `context` live; `values` valid for reads and writes.
#[inline]
pub unsafe fn ibv_query_rt_values_ex(
    context: *mut ibv_context,
    values: *mut ibv_values_ex,
) -> c_int {
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, query_rt_values) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, values) },
        None => libc::EOPNOTSUPP,
    }
}

// ---------------------------------------------------------------- PD / MR / MW

/// `ibv_alloc_mw`.
///
/// # Safety
/// `pd` live.
#[inline]
pub unsafe fn ibv_alloc_mw(pd: *mut ibv_pd, type_: ibv_mw_type) -> *mut ibv_mw {
    // SAFETY: pd and its context are live (caller).
    match unsafe { (*(*pd).context).ops.alloc_mw } {
        // SAFETY: op set by the provider for this context.
        Some(f) => unsafe { f(pd, type_) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_dealloc_mw`.
///
/// # Safety
/// `mw` live; it is freed.
#[inline]
pub unsafe fn ibv_dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: mw and its context are live (caller).
    let Some(f) = (unsafe { (*(*mw).context).ops.dealloc_mw }) else {
        missing_op("dealloc_mw")
    };
    // SAFETY: op set by the provider; mw is live.
    unsafe { f(mw) }
}

/// `ibv_inc_rkey`: bump the 8-bit key tag in the low byte of `rkey`.
#[inline]
pub const fn ibv_inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// `ibv_bind_mw` (type 1 windows): checks the bind like the C inline does,
/// then posts it through the provider.
///
/// # Safety
/// `qp`, `mw` live; `mw_bind` readable, its `bind_info.mr` NULL or live.
#[inline]
pub unsafe fn ibv_bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, mw_bind: *mut ibv_mw_bind) -> c_int {
    // SAFETY: mw and mw_bind are valid (caller).
    let (mw_type, mw_pd, info) = unsafe { ((*mw).type_, (*mw).pd, &(*mw_bind).bind_info) };
    if mw_type != IBV_MW_TYPE_1 {
        return libc::EINVAL;
    }
    if info.mr.is_null() {
        if info.addr != 0 || info.length != 0 {
            return libc::EINVAL;
        }
    // SAFETY: a non-NULL bind_info.mr is a live MR (caller).
    } else if unsafe { (*info.mr).pd } != mw_pd {
        return libc::EPERM;
    }
    // SAFETY: mw and its context are live (caller).
    let Some(f) = (unsafe { (*(*mw).context).ops.bind_mw }) else {
        missing_op("bind_mw")
    };
    // SAFETY: op set by the provider; pointers from the caller.
    unsafe { f(qp, mw, mw_bind) }
}

/// `ibv_advise_mr`.
///
/// # Safety
/// `pd` live; `sg_list` valid for `num_sge` reads.
#[inline]
pub unsafe fn ibv_advise_mr(
    pd: *mut ibv_pd,
    advice: ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    // SAFETY: pd and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*pd).context, advise_mr) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(pd, advice, flags, sg_list, num_sge) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_alloc_null_mr`.
///
/// # Safety
/// `pd` live.
#[inline]
pub unsafe fn ibv_alloc_null_mr(pd: *mut ibv_pd) -> *mut ibv_mr {
    // SAFETY: pd and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*pd).context, alloc_null_mr) } {
        // SAFETY: op set by the provider.
        Some(f) => unsafe { f(pd) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_alloc_dm`.
///
/// # Safety
/// `context` live; `attr` readable.
#[inline]
pub unsafe fn ibv_alloc_dm(context: *mut ibv_context, attr: *mut ibv_alloc_dm_attr) -> *mut ibv_dm {
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, alloc_dm) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, attr) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_free_dm`.
///
/// # Safety
/// `dm` live; it is freed.
#[inline]
pub unsafe fn ibv_free_dm(dm: *mut ibv_dm) -> c_int {
    // SAFETY: dm and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*dm).context, free_dm) } {
        // SAFETY: op set by the provider.
        Some(f) => unsafe { f(dm) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_memcpy_to_dm`.
///
/// # Safety
/// `dm` live; `host_addr` valid for `length` reads.
#[inline]
pub unsafe fn ibv_memcpy_to_dm(
    dm: *mut ibv_dm,
    dm_offset: u64,
    host_addr: *const c_void,
    length: usize,
) -> c_int {
    // SAFETY: dm is live (caller).
    let Some(f) = (unsafe { (*dm).memcpy_to_dm }) else {
        missing_op("memcpy_to_dm")
    };
    // SAFETY: op set by the provider for this DM; pointers from the caller.
    unsafe { f(dm, dm_offset, host_addr, length) }
}

/// `ibv_memcpy_from_dm`.
///
/// # Safety
/// `dm` live; `host_addr` valid for `length` writes.
#[inline]
pub unsafe fn ibv_memcpy_from_dm(
    host_addr: *mut c_void,
    dm: *mut ibv_dm,
    dm_offset: u64,
    length: usize,
) -> c_int {
    // SAFETY: dm is live (caller).
    let Some(f) = (unsafe { (*dm).memcpy_from_dm }) else {
        missing_op("memcpy_from_dm")
    };
    // SAFETY: op set by the provider for this DM; pointers from the caller.
    unsafe { f(host_addr, dm, dm_offset, length) }
}

/// `ibv_reg_dm_mr`.
///
/// # Safety
/// `pd`, `dm` live.
#[inline]
pub unsafe fn ibv_reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    dm_offset: u64,
    length: usize,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: pd and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*pd).context, reg_dm_mr) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(pd, dm, dm_offset, length, access) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_alloc_td`.
///
/// # Safety
/// `context` live; `init_attr` readable.
#[inline]
pub unsafe fn ibv_alloc_td(
    context: *mut ibv_context,
    init_attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, alloc_td) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, init_attr) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_dealloc_td`.
///
/// # Safety
/// `td` live; it is freed.
#[inline]
pub unsafe fn ibv_dealloc_td(td: *mut ibv_td) -> c_int {
    // SAFETY: td and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*td).context, dealloc_td) } {
        // SAFETY: op set by the provider.
        Some(f) => unsafe { f(td) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_alloc_parent_domain`.
///
/// # Safety
/// `context` live; `attr` readable.
#[inline]
pub unsafe fn ibv_alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, alloc_parent_domain) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, attr) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_open_xrcd`.
///
/// # Safety
/// `context` live; `xrcd_init_attr` readable.
#[inline]
pub unsafe fn ibv_open_xrcd(
    context: *mut ibv_context,
    xrcd_init_attr: *mut ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, open_xrcd) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, xrcd_init_attr) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_close_xrcd`.
///
/// # Safety
/// `xrcd` live (so its context is extended and has `close_xrcd`); it is freed.
#[inline]
pub unsafe fn ibv_close_xrcd(xrcd: *mut ibv_xrcd) -> c_int {
    // SAFETY: xrcd exists, so its context is extended (C does not check either).
    let Some(f) = (unsafe { (*verbs_get_ctx((*xrcd).context)).close_xrcd }) else {
        missing_op("close_xrcd")
    };
    // SAFETY: op set by the provider.
    unsafe { f(xrcd) }
}

// ---------------------------------------------------------------- CQ

/// `ibv_poll_cq`: up to `num_entries` completions into `wc`; returns how
/// many, or a negative value on error.
///
/// # Safety
/// `cq` live; `wc` valid for `num_entries` writes.
#[inline]
pub unsafe fn ibv_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: cq and its context are live (caller).
    let Some(f) = (unsafe { (*(*cq).context).ops.poll_cq }) else {
        missing_op("poll_cq")
    };
    // SAFETY: op set by the provider; wc holds num_entries (caller).
    unsafe { f(cq, num_entries, wc) }
}

/// `ibv_req_notify_cq`: arm the CQ's completion channel.
///
/// # Safety
/// `cq` live.
#[inline]
pub unsafe fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: cq and its context are live (caller).
    let Some(f) = (unsafe { (*(*cq).context).ops.req_notify_cq }) else {
        missing_op("req_notify_cq")
    };
    // SAFETY: op set by the provider.
    unsafe { f(cq, solicited_only) }
}

/// `ibv_modify_cq`.
///
/// # Safety
/// `cq` live; `attr` readable.
#[inline]
pub unsafe fn ibv_modify_cq(cq: *mut ibv_cq, attr: *mut ibv_modify_cq_attr) -> c_int {
    // SAFETY: cq and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*cq).context, modify_cq) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(cq, attr) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_create_cq_ex`.
///
/// # Safety
/// `context` live; `cq_attr` readable.
#[inline]
pub unsafe fn ibv_create_cq_ex(
    context: *mut ibv_context,
    cq_attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, create_cq_ex) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, cq_attr) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_cq_ex_to_cq`: an extended CQ starts with the plain `ibv_cq`.
#[inline]
pub const fn ibv_cq_ex_to_cq(cq: *mut ibv_cq_ex) -> *mut ibv_cq {
    cq.cast()
}

/// Defines `pub unsafe fn $name($obj, args..) -> ret` calling the function
/// pointer `(*$obj).$op` (the per-object ops of `ibv_cq_ex`, `ibv_qp_ex`,
/// `ibv_wq`), as the corresponding one-line C inline does.
macro_rules! obj_op {
    ($(#[$m:meta])* $name:ident => $op:ident($obj:ident: *mut $ty:ty $(, $a:ident: $at:ty)*) $(-> $ret:ty)?) => {
        $(#[$m])*
        ///
        /// # Safety
        /// The object is live and was created with the capability this op
        /// belongs to; pointer arguments are valid as the C API requires.
        #[inline]
        pub unsafe fn $name($obj: *mut $ty $(, $a: $at)*) $(-> $ret)? {
            // SAFETY: the object is live (caller), so its op table is readable.
            let Some(f) = (unsafe { (*$obj).$op }) else { missing_op(stringify!($op)) };
            // SAFETY: op set by the provider for this object; arguments from the caller.
            unsafe { f($obj $(, $a)*) }
        }
    };
}

obj_op!(/// `ibv_start_poll`.
    ibv_start_poll => start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int);
obj_op!(/// `ibv_next_poll`.
    ibv_next_poll => next_poll(cq: *mut ibv_cq_ex) -> c_int);
obj_op!(/// `ibv_end_poll`.
    ibv_end_poll => end_poll(cq: *mut ibv_cq_ex));
obj_op!(/// `ibv_wc_read_opcode`.
    ibv_wc_read_opcode => read_opcode(cq: *mut ibv_cq_ex) -> ibv_wc_opcode);
obj_op!(/// `ibv_wc_read_vendor_err`.
    ibv_wc_read_vendor_err => read_vendor_err(cq: *mut ibv_cq_ex) -> u32);
obj_op!(/// `ibv_wc_read_byte_len`.
    ibv_wc_read_byte_len => read_byte_len(cq: *mut ibv_cq_ex) -> u32);
obj_op!(/// `ibv_wc_read_imm_data`.
    ibv_wc_read_imm_data => read_imm_data(cq: *mut ibv_cq_ex) -> __be32);
obj_op!(/// `ibv_wc_read_invalidated_rkey` (shares the immediate-data slot).
    ibv_wc_read_invalidated_rkey => read_imm_data(cq: *mut ibv_cq_ex) -> u32);
obj_op!(/// `ibv_wc_read_qp_num`.
    ibv_wc_read_qp_num => read_qp_num(cq: *mut ibv_cq_ex) -> u32);
obj_op!(/// `ibv_wc_read_src_qp`.
    ibv_wc_read_src_qp => read_src_qp(cq: *mut ibv_cq_ex) -> u32);
obj_op!(/// `ibv_wc_read_wc_flags`.
    ibv_wc_read_wc_flags => read_wc_flags(cq: *mut ibv_cq_ex) -> c_uint);
obj_op!(/// `ibv_wc_read_slid`.
    ibv_wc_read_slid => read_slid(cq: *mut ibv_cq_ex) -> u32);
obj_op!(/// `ibv_wc_read_sl`.
    ibv_wc_read_sl => read_sl(cq: *mut ibv_cq_ex) -> u8);
obj_op!(/// `ibv_wc_read_dlid_path_bits`.
    ibv_wc_read_dlid_path_bits => read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8);
obj_op!(/// `ibv_wc_read_completion_ts`.
    ibv_wc_read_completion_ts => read_completion_ts(cq: *mut ibv_cq_ex) -> u64);
obj_op!(/// `ibv_wc_read_completion_wallclock_ns`.
    ibv_wc_read_completion_wallclock_ns => read_completion_wallclock_ns(cq: *mut ibv_cq_ex) -> u64);
obj_op!(/// `ibv_wc_read_cvlan`.
    ibv_wc_read_cvlan => read_cvlan(cq: *mut ibv_cq_ex) -> u16);
obj_op!(/// `ibv_wc_read_flow_tag`.
    ibv_wc_read_flow_tag => read_flow_tag(cq: *mut ibv_cq_ex) -> u32);
obj_op!(/// `ibv_wc_read_tm_info`.
    ibv_wc_read_tm_info => read_tm_info(cq: *mut ibv_cq_ex, tm_info: *mut ibv_wc_tm_info));

// ---------------------------------------------------------------- SRQ

/// `ibv_create_srq_ex`: a plain `ibv_create_srq` when the attributes ask for
/// nothing beyond a basic SRQ on a PD, else the provider's extended op.
///
/// # Safety
/// `context` live; `srq_init_attr_ex` readable and writable.
#[inline]
pub unsafe fn ibv_create_srq_ex(
    context: *mut ibv_context,
    srq_init_attr_ex: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    // SAFETY: srq_init_attr_ex is readable (caller).
    let (mask, srq_type, pd) = unsafe {
        (
            (*srq_init_attr_ex).comp_mask,
            (*srq_init_attr_ex).srq_type,
            (*srq_init_attr_ex).pd,
        )
    };
    let basic = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
    if mask & !basic == 0
        && mask & IBV_SRQ_INIT_ATTR_PD != 0
        && (mask & IBV_SRQ_INIT_ATTR_TYPE == 0 || srq_type == IBV_SRQT_BASIC)
    {
        // SAFETY: ibv_srq_init_attr is the leading part of ibv_srq_init_attr_ex.
        return unsafe { ibv_create_srq(pd, srq_init_attr_ex.cast()) };
    }
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, create_srq_ex) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, srq_init_attr_ex) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_get_srq_num`.
///
/// # Safety
/// `srq` live; `srq_num` writable.
#[inline]
pub unsafe fn ibv_get_srq_num(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int {
    // SAFETY: srq and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*srq).context, get_srq_num) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(srq, srq_num) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_srq_recv`.
///
/// # Safety
/// `srq` live; `recv_wr` a valid list; `bad_recv_wr` writable.
#[inline]
pub unsafe fn ibv_post_srq_recv(
    srq: *mut ibv_srq,
    recv_wr: *mut ibv_recv_wr,
    bad_recv_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: srq and its context are live (caller).
    let Some(f) = (unsafe { (*(*srq).context).ops.post_srq_recv }) else {
        missing_op("post_srq_recv")
    };
    // SAFETY: op set by the provider; pointers from the caller.
    unsafe { f(srq, recv_wr, bad_recv_wr) }
}

/// `ibv_post_srq_ops` (tag matching).
///
/// # Safety
/// `srq` live; `op` a valid list; `bad_op` writable.
#[inline]
pub unsafe fn ibv_post_srq_ops(
    srq: *mut ibv_srq,
    op: *mut ibv_ops_wr,
    bad_op: *mut *mut ibv_ops_wr,
) -> c_int {
    // SAFETY: srq and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*srq).context, post_srq_ops) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(srq, op, bad_op) },
        None => {
            // SAFETY: bad_op is writable (caller).
            unsafe { *bad_op = op };
            libc::EOPNOTSUPP
        }
    }
}

// ---------------------------------------------------------------- QP

/// `ibv_create_qp_ex`: a plain `ibv_create_qp` when only the PD is given,
/// else the provider's extended op.
///
/// # Safety
/// `context` live; `qp_init_attr_ex` readable and writable.
#[inline]
pub unsafe fn ibv_create_qp_ex(
    context: *mut ibv_context,
    qp_init_attr_ex: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: qp_init_attr_ex is readable (caller).
    let (mask, pd) = unsafe { ((*qp_init_attr_ex).comp_mask, (*qp_init_attr_ex).pd) };
    if mask == IBV_QP_INIT_ATTR_PD {
        // SAFETY: ibv_qp_init_attr is the leading part of ibv_qp_init_attr_ex.
        return unsafe { ibv_create_qp(pd, qp_init_attr_ex.cast()) };
    }
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, create_qp_ex) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, qp_init_attr_ex) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_open_qp`.
///
/// # Safety
/// `context` live; `qp_open_attr` readable.
#[inline]
pub unsafe fn ibv_open_qp(
    context: *mut ibv_context,
    qp_open_attr: *mut ibv_qp_open_attr,
) -> *mut ibv_qp {
    // SAFETY: context is live (caller).
    match unsafe { verbs_get_ctx_op!(context, open_qp) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(context, qp_open_attr) },
        None => {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    }
}

/// `ibv_modify_qp_rate_limit`.
///
/// # Safety
/// `qp` live; `attr` readable.
#[inline]
pub unsafe fn ibv_modify_qp_rate_limit(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_rate_limit_attr,
) -> c_int {
    // SAFETY: qp and its context are live (caller).
    match unsafe { verbs_get_ctx_op!((*qp).context, modify_qp_rate_limit) } {
        // SAFETY: op set by the provider; pointers from the caller.
        Some(f) => unsafe { f(qp, attr) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_send`: returns 0 or an errno value, with `*bad_wr` set to the
/// first request not posted.
///
/// # Safety
/// `qp` live; `wr` a valid list; `bad_wr` writable.
#[inline]
pub unsafe fn ibv_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: qp and its context are live (caller).
    let Some(f) = (unsafe { (*(*qp).context).ops.post_send }) else {
        missing_op("post_send")
    };
    // SAFETY: op set by the provider; pointers from the caller.
    unsafe { f(qp, wr, bad_wr) }
}

/// `ibv_post_recv`: returns 0 or an errno value, with `*bad_wr` set to the
/// first request not posted.
///
/// # Safety
/// `qp` live; `wr` a valid list; `bad_wr` writable.
#[inline]
pub unsafe fn ibv_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: qp and its context are live (caller).
    let Some(f) = (unsafe { (*(*qp).context).ops.post_recv }) else {
        missing_op("post_recv")
    };
    // SAFETY: op set by the provider; pointers from the caller.
    unsafe { f(qp, wr, bad_wr) }
}

// The `ibv_qp_ex` work-request builder (`ibv_wr_*`), QPs created with
// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS; get the `ibv_qp_ex` with ibv_qp_to_qp_ex.
obj_op!(/// `ibv_wr_start`.
    ibv_wr_start => wr_start(qp: *mut ibv_qp_ex));
obj_op!(/// `ibv_wr_complete`.
    ibv_wr_complete => wr_complete(qp: *mut ibv_qp_ex) -> c_int);
obj_op!(/// `ibv_wr_abort`.
    ibv_wr_abort => wr_abort(qp: *mut ibv_qp_ex));
obj_op!(/// `ibv_wr_atomic_cmp_swp`.
    ibv_wr_atomic_cmp_swp => wr_atomic_cmp_swp(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, compare: u64, swap: u64));
obj_op!(/// `ibv_wr_atomic_fetch_add`.
    ibv_wr_atomic_fetch_add => wr_atomic_fetch_add(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64));
obj_op!(/// `ibv_wr_atomic_write`.
    ibv_wr_atomic_write => wr_atomic_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, atomic_wr: *const c_void));
obj_op!(/// `ibv_wr_bind_mw`.
    ibv_wr_bind_mw => wr_bind_mw(qp: *mut ibv_qp_ex, mw: *mut ibv_mw, rkey: u32, bind_info: *const ibv_mw_bind_info));
obj_op!(/// `ibv_wr_local_inv`.
    ibv_wr_local_inv => wr_local_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32));
obj_op!(/// `ibv_wr_rdma_read`.
    ibv_wr_rdma_read => wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64));
obj_op!(/// `ibv_wr_rdma_write`.
    ibv_wr_rdma_write => wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64));
obj_op!(/// `ibv_wr_rdma_write_imm`.
    ibv_wr_rdma_write_imm => wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm_data: __be32));
obj_op!(/// `ibv_wr_send`.
    ibv_wr_send => wr_send(qp: *mut ibv_qp_ex));
obj_op!(/// `ibv_wr_send_imm`.
    ibv_wr_send_imm => wr_send_imm(qp: *mut ibv_qp_ex, imm_data: __be32));
obj_op!(/// `ibv_wr_send_inv`.
    ibv_wr_send_inv => wr_send_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32));
obj_op!(/// `ibv_wr_send_tso`.
    ibv_wr_send_tso => wr_send_tso(qp: *mut ibv_qp_ex, hdr: *mut c_void, hdr_sz: u16, mss: u16));
obj_op!(/// `ibv_wr_set_ud_addr`.
    ibv_wr_set_ud_addr => wr_set_ud_addr(qp: *mut ibv_qp_ex, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32));
obj_op!(/// `ibv_wr_set_xrc_srqn`.
    ibv_wr_set_xrc_srqn => wr_set_xrc_srqn(qp: *mut ibv_qp_ex, remote_srqn: u32));
obj_op!(/// `ibv_wr_set_inline_data`.
    ibv_wr_set_inline_data => wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize));
obj_op!(/// `ibv_wr_set_inline_data_list`.
    ibv_wr_set_inline_data_list => wr_set_inline_data_list(qp: *mut ibv_qp_ex, num_buf: usize, buf_list: *const ibv_data_buf));
obj_op!(/// `ibv_wr_set_sge`.
    ibv_wr_set_sge => wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32));
obj_op!(/// `ibv_wr_set_sge_list`.
    ibv_wr_set_sge_list => wr_set_sge_list(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge));

// ---------------------------------------------------------------- rdma_cm

/// `rdma_get_local_addr`: the bound source address of `id`.
///
/// # Safety
/// `id` live.
#[inline]
pub unsafe fn rdma_get_local_addr(id: *mut rdma_cm_id) -> *mut sockaddr {
    // SAFETY: id is live (caller); only a field address is computed.
    unsafe { (&raw mut (*id).route.addr.__bindgen_anon_1.src_addr).cast() }
}

/// `rdma_get_peer_addr`: the resolved destination address of `id`.
///
/// # Safety
/// `id` live.
#[inline]
pub unsafe fn rdma_get_peer_addr(id: *mut rdma_cm_id) -> *mut sockaddr {
    // SAFETY: id is live (caller); only a field address is computed.
    unsafe { (&raw mut (*id).route.addr.__bindgen_anon_2.dst_addr).cast() }
}
