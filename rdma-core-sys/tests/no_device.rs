//! Tests that need no RDMA device (CI, build hosts).  Struct layouts are
//! checked at compile time by bindgen's generated assertions; these check
//! the library entry points and the hand-written inlines.
use core::ffi::c_int;
use core::mem::{offset_of, size_of, zeroed};
use core::ptr;
use rdma_core_sys::*;

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[test]
fn device_list_without_devices_does_not_crash() {
    let mut n: c_int = -1;
    // SAFETY: plain library call with a valid out-pointer.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        // Documented failure: NULL with errno (e.g. ENOSYS without the kernel module).
        assert_ne!(errno(), 0);
        return;
    }
    let mut count = 0;
    // SAFETY: the list is NULL-terminated.
    while !unsafe { *list.add(count) }.is_null() {
        // SAFETY: entries up to the NULL are valid devices.
        let name = unsafe { std::ffi::CStr::from_ptr(ibv_get_device_name(*list.add(count))) };
        eprintln!("device {count}: {name:?}");
        count += 1;
    }
    assert_eq!(count as c_int, n);
    // SAFETY: list came from ibv_get_device_list.
    unsafe { ibv_free_device_list(list) };
}

#[test]
fn event_channel_create_destroy_or_documented_errno() {
    // SAFETY: plain library call.
    let ch = unsafe { rdma_create_event_channel() };
    if ch.is_null() {
        // Without RDMA devices / the rdma_ucm module librdmacm's init fails:
        // ENODEV (no devices), or ENOENT/ENOSYS (no /dev/infiniband/rdma_cm).
        let e = errno();
        assert!(
            [libc::ENODEV, libc::ENOENT, libc::ENOSYS].contains(&e),
            "rdma_create_event_channel failed with unexpected errno {e}"
        );
        eprintln!("rdma_create_event_channel: NULL, errno {e} (no RDMA device)");
    } else {
        // SAFETY: ch is a live channel, destroyed once.
        unsafe { rdma_destroy_event_channel(ch) };
    }
}

#[test]
fn verbs_context_layout_matches_container_of() {
    // verbs_get_ctx relies on `sz` immediately preceding `context`, and
    // `context` being the last member.
    assert_eq!(
        offset_of!(verbs_context, context) - offset_of!(verbs_context, sz),
        size_of::<usize>()
    );
    assert_eq!(
        offset_of!(verbs_context, context) + size_of::<ibv_context>(),
        size_of::<verbs_context>()
    );
    // Constants are plain integers that OR together.
    let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    assert_eq!(access, 1 | 2 | 4);
    assert_eq!(IBV_QP_STATE | IBV_QP_PORT, 1 | (1 << 5));
}

#[test]
fn inc_rkey_wraps_tag_only() {
    assert_eq!(ibv_inc_rkey(0x1234_56ff), 0x1234_5600);
    assert_eq!(ibv_inc_rkey(0x1234_5601), 0x1234_5602);
}

unsafe extern "C" fn fake_query_port(
    _ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    assert_eq!(len, size_of::<ibv_port_attr>());
    // SAFETY: attr points at the caller's ibv_port_attr.
    unsafe { (*attr).lid = 0x40 + port as u16 };
    0
}

unsafe extern "C" fn fake_poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    assert!(n >= 1);
    // SAFETY: wc holds at least n entries; cq is the test's fake CQ.
    unsafe {
        (*wc).wr_id = 7;
        (*wc).status = IBV_WC_SUCCESS;
        (*wc).byte_len = (*cq).cqe as u32;
    }
    1
}

#[test]
fn inlines_call_through_the_provider_ops() {
    // A fake extended context, laid out as a provider would allocate it.
    // SAFETY: all-zero is a valid bit pattern for these C structs.
    let mut vctx: Box<verbs_context> = Box::new(unsafe { zeroed() });
    vctx.sz = size_of::<verbs_context>();
    vctx.context.abi_compat = usize::MAX as *mut _;
    vctx.query_port = Some(fake_query_port);
    vctx.context.ops.poll_cq = Some(fake_poll_cq);
    let ctx: *mut ibv_context = &mut vctx.context;

    // SAFETY: ctx is a live (fake) context for the duration of the test.
    unsafe {
        assert_eq!(verbs_get_ctx(ctx), &mut *vctx as *mut verbs_context);
        assert!(verbs_get_ctx_op!(ctx, query_port).is_some());
        assert!(verbs_get_ctx_op!(ctx, query_device_ex).is_none());

        let mut attr: ibv_port_attr = zeroed();
        assert_eq!(ibv_query_port(ctx, 1, &mut attr), 0);
        assert_eq!(attr.lid, 0x41);

        // A provider whose verbs_context predates `query_port` (shorter sz)
        // must not have the op looked up.
        (*verbs_get_ctx(ctx)).sz =
            size_of::<verbs_context>() - offset_of!(verbs_context, query_port) - 1;
        assert!(verbs_get_ctx_op!(ctx, query_port).is_none());

        // Not extended at all.
        (*ctx).abi_compat = ptr::null_mut();
        assert!(verbs_get_ctx(ctx).is_null());
        assert!(verbs_get_ctx_op!(ctx, query_port).is_none());

        let mut cq: ibv_cq = zeroed();
        cq.context = ctx;
        cq.cqe = 4096;
        let mut wc: [ibv_wc; 2] = zeroed();
        assert_eq!(ibv_poll_cq(&mut cq, 2, wc.as_mut_ptr()), 1);
        assert_eq!(
            (wc[0].wr_id, wc[0].status, wc[0].byte_len),
            (7, IBV_WC_SUCCESS, 4096)
        );

        // ops.alloc_mw unset: EOPNOTSUPP through errno, like the C inline.
        let mut pd: ibv_pd = zeroed();
        pd.context = ctx;
        assert!(ibv_alloc_mw(&mut pd, IBV_MW_TYPE_2).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
    }
}
