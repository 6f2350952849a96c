//! The core's logic on the host, over the mock backend: DTO bookkeeping
//! through EP, ring and EVD; parent/child refusals and IA close; the
//! active and passive connection state machines driven by hand-made
//! connection events.

use crate::backend::{CmEvent, CmEventKind, ConnIdOps};
use crate::mock::{self, Id, Mock};
use crate::{connection, cr, ep, evd, ia, psp, pz};
use dat_abi::*;
use std::ffi::CString;
use std::ptr::null_mut;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The mock's live-object counters are global: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

type T = Mock;

struct Setup {
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    dto: DAT_EVD_HANDLE,
    conn: DAT_EVD_HANDLE,
    ep: DAT_EP_HANDLE,
}

fn ok(r: DAT_RETURN) {
    assert_eq!(r, DAT_SUCCESS, "DAT call returned {r:#x}");
}

fn setup(name: &str) -> Setup {
    crate::table::for_instance::<T>(name).expect("table");
    crate::instance::add::<T>(name, "mock0 1");
    let cname = CString::new(name).unwrap();
    let (mut async_evd, mut ia, mut pz, mut dto, mut conn, mut ep) = (null_mut(), null_mut(), null_mut(), null_mut(), null_mut(), null_mut());
    // SAFETY: the provider's entry points, called as a consumer would, with valid out-pointers.
    unsafe {
        ok(crate::open::open::<T>(cname.as_ptr() as DAT_NAME_PTR, 8, &mut async_evd, &mut ia));
        ok(pz::create::<T>(ia, &mut pz));
        ok(evd::create::<T>(ia, 16, null_mut(), DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &mut dto));
        ok(evd::create::<T>(ia, 16, null_mut(), DAT_EVD_CONNECTION_FLAG | DAT_EVD_CR_FLAG, &mut conn));
        ok(ep::create::<T>(ia, pz, dto, dto, conn, std::ptr::null(), &mut ep));
    }
    Setup { ia, pz, dto, conn, ep }
}

fn triplet(key: u32, len: u32) -> DAT_LMR_TRIPLET {
    DAT_LMR_TRIPLET { lmr_context: key, virtual_address: 0x1000, segment_length: len as _ }
}

fn dequeue(evd_h: DAT_EVD_HANDLE) -> Option<DAT_EVENT> {
    // SAFETY: DAT_EVENT is plain C data, filled by the call.
    let mut e: DAT_EVENT = unsafe { std::mem::zeroed() };
    // SAFETY: a live EVD handle and our event.
    let r = unsafe { evd::dequeue::<T>(evd_h, &mut e) };
    (r == DAT_SUCCESS).then_some(e)
}

fn dto_of(e: &DAT_EVENT) -> DAT_DTO_COMPLETION_EVENT_DATA {
    assert_eq!(e.event_number, DAT_DTO_COMPLETION_EVENT);
    // SAFETY: the event number says which member is filled.
    unsafe { e.event_data.dto_completion_event_data }
}

fn conn_of(e: &DAT_EVENT) -> (DAT_EVENT_NUMBER, Vec<u8>) {
    // SAFETY: connection events fill this member; the data lives in the EP.
    let d = unsafe { e.event_data.connect_event_data };
    let pdata = if d.private_data.is_null() {
        Vec::new()
    } else {
        // SAFETY: private_data_size bytes the provider keeps until the next event.
        unsafe { std::slice::from_raw_parts(d.private_data as *const u8, d.private_data_size as usize) }.to_vec()
    };
    (e.event_number, pdata)
}

fn state(ep_h: DAT_EP_HANDLE) -> DAT_EP_STATE {
    ep::get::<T>(ep_h).unwrap().state.load(Ordering::Acquire)
}

fn event(kind: CmEventKind, id: Id, context: usize, pdata: &[u8]) -> CmEvent<'_, mock::Mock> {
    CmEvent { kind, id, context, pdata, ud_peer: None }
}

/// A connection event handled as the CM thread does, with nothing to acknowledge.
fn cm_event(ev: &CmEvent<'_, mock::Mock>) -> Option<Id> {
    connection::handle_event::<T>(ev, &mut || {})
}

fn post_send(ep_h: DAT_EP_HANDLE, t: &mut DAT_LMR_TRIPLET, cookie: u64) -> DAT_RETURN {
    // SAFETY: a consumer post with one triplet on our stack.
    unsafe { ep::post_send::<T>(ep_h, 1, t, DAT_DTO_COOKIE { as_64: cookie }, DAT_COMPLETION_DEFAULT_FLAG) }
}

/// dat_ep_connect, then the events of a connection the peer accepts.
fn connect(s: &Setup, accept_pdata: &[u8]) -> Id {
    // SAFETY: all-zero sockaddr_in, then its family.
    let mut peer: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    peer.sin_family = libc::AF_INET as _;
    // SAFETY: a consumer connect to a full sockaddr_in.
    ok(unsafe { connection::connect::<T>(s.ep, &mut peer as *mut _ as DAT_IA_ADDRESS_PTR, 7000, DAT_TIMEOUT_INFINITE, 0, null_mut(), 0, 0) });
    assert_eq!(state(s.ep), DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    let id = ep::get::<T>(s.ep).unwrap().cm_id.get().expect("an id while connecting");
    for kind in [CmEventKind::AddrResolved, CmEventKind::RouteResolved] {
        assert!(cm_event(&event(kind, id, s.ep as usize, &[])).is_none());
    }
    assert!(cm_event(&event(CmEventKind::ConnectResponse, id, s.ep as usize, accept_pdata)).is_none());
    id
}

/// A consumer PSP on the setup's CR-capable EVD, on `qual`.
fn consumer_psp(s: &Setup, qual: DAT_CONN_QUAL) -> DAT_PSP_HANDLE {
    let mut psp_h = null_mut();
    // SAFETY: live IA and EVD, our out-pointer.
    ok(unsafe { psp::create::<T>(s.ia, qual, s.conn, DAT_PSP_CONSUMER_FLAG, &mut psp_h) });
    psp_h
}

/// A connection request `req` to `psp_h`, and the CR it became.
fn request(s: &Setup, psp_h: DAT_PSP_HANDLE, req: Id, pdata: &[u8]) -> DAT_CR_HANDLE {
    assert!(cm_event(&event(CmEventKind::ConnectRequest, req, psp_h as usize, pdata)).is_none());
    let e = dequeue(s.conn).expect("a connection request");
    assert_eq!(e.event_number, DAT_CONNECTION_REQUEST_EVENT);
    // SAFETY: the event number names the member.
    unsafe { e.event_data.cr_arrival_event_data }.cr_handle
}

#[test]
fn receives_stay_through_a_reset_and_flush_at_an_abrupt_disconnect() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-flush");
    assert_eq!(state(s.ep), DAT_EP_STATE_UNCONNECTED);
    let mut t = triplet(5, 64);
    // Not connected: sends are refused and say why.
    assert_eq!(post_send(s.ep, &mut t, 1), dat_abi::status::invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED));
    // SAFETY: a consumer receive with one triplet.
    ok(unsafe { ep::post_recv::<T>(s.ep, 1, &mut t, DAT_DTO_COOKIE { as_64: 77 }, DAT_COMPLETION_DEFAULT_FLAG) });
    assert!(dequeue(s.dto).is_none());
    // DAT: a reset of an unconnected EP leaves its receives posted.
    // SAFETY: a live EP.
    ok(unsafe { ep::reset::<T>(s.ep) });
    assert!(dequeue(s.dto).is_none());
    // An abrupt disconnect is how they are flushed.
    // SAFETY: a live EP.
    ok(unsafe { connection::disconnect::<T>(s.ep, DAT_CLOSE_ABRUPT_FLAG) });
    let d = dto_of(&dequeue(s.dto).expect("the flushed receive"));
    // SAFETY: plain 8-byte union.
    assert_eq!((unsafe { d.user_cookie.as_64 }, d.status, d.operation, d.ep_handle), (77, DAT_DTO_ERR_FLUSHED, DAT_DTO_RECEIVE, s.ep));
    assert!(dequeue(s.dto).is_none());
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

#[test]
fn parents_outlive_children_and_close_frees_everything() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (pds, qps) = (mock::LIVE_PDS.load(Ordering::Acquire), mock::LIVE_QPS.load(Ordering::Acquire));
    let s = setup("mock-lifetimes");
    assert_eq!(mock::LIVE_QPS.load(Ordering::Acquire), qps + 1);
    // SAFETY: live handles, freed in a wrong order first.
    unsafe {
        assert_eq!(pz::free::<T>(s.pz), dat_abi::status::invalid_state(DAT_INVALID_STATE_PZ_IN_USE));
        assert_eq!(evd::free::<T>(s.dto), dat_abi::status::invalid_state(DAT_INVALID_STATE_EVD_IN_USE));
        assert_eq!(ia::close::<T>(s.ia, DAT_CLOSE_GRACEFUL_FLAG), dat_abi::status::invalid_state(DAT_INVALID_STATE_IA_IN_USE));
        ok(ep::free::<T>(s.ep));
        assert_eq!(mock::LIVE_QPS.load(Ordering::Acquire), qps);
        ok(pz::free::<T>(s.pz));
        assert_eq!(ep::free::<T>(s.ep), dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EP));
        // The EVDs are still there; an abrupt close takes them too.
        ok(ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG));
        assert_eq!(evd::free::<T>(s.conn), dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EVD_REQUEST));
    }
    assert_eq!(mock::LIVE_PDS.load(Ordering::Acquire), pds);
}

/// An abrupt close stops the IA's CM thread before it frees the EVDs that
/// thread posts to (ThreadSanitizer found the async event of a CQ overrun
/// written to the async EVD's eventfd as the close freed that EVD).
#[test]
fn ia_close_stops_its_events_before_freeing_evds() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-close-order");
    let live = mock::LIVE_EVENTS.load(Ordering::Acquire);
    assert!(live >= 1, "the IA started its events");
    // SAFETY: live handles; the close takes the EP and the EVDs with it.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
    assert_eq!(mock::LIVE_EVENTS.load(Ordering::Acquire), live - 1, "the close stopped the IA's events");
    assert_eq!(mock::EVENTS_AT_LAST_CQ_FREE.load(Ordering::Acquire), live - 1, "the EVDs' CQs were freed while the IA's events still ran");
}

#[test]
fn active_connection_then_an_error_completion_breaks_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ids = mock::LIVE_IDS.load(Ordering::Acquire);
    let s = setup("mock-active");
    let id = connect(&s, b"welcome");
    assert_eq!(id.with(|i| i.calls.clone()), ["resolve_addr", "resolve_route", "connect", "establish"]);
    assert_eq!(state(s.ep), DAT_EP_STATE_CONNECTED);
    assert_eq!(conn_of(&dequeue(s.conn).expect("established")), (DAT_CONNECTION_EVENT_ESTABLISHED, b"welcome".to_vec()));
    let mut t = triplet(5, 300);
    ok(post_send(s.ep, &mut t, 9));
    let d = dto_of(&dequeue(s.dto).expect("send completion"));
    assert_eq!((d.status, d.operation, d.transfered_length), (DAT_DTO_SUCCESS, DAT_DTO_SEND, 300));
    // A receive reports the bytes that arrived, not the buffer's size.
    // SAFETY: a consumer receive with one triplet.
    ok(unsafe { ep::post_recv::<T>(s.ep, 1, &mut t, DAT_DTO_COOKIE { as_64: 11 }, DAT_COMPLETION_DEFAULT_FLAG) });
    assert_eq!(ep::get::<T>(s.ep).unwrap().with_qp(|q| q.deliver(120)), Some(true));
    let d = dto_of(&dequeue(s.dto).expect("receive completion"));
    assert_eq!((d.status, d.operation, d.transfered_length), (DAT_DTO_SUCCESS, DAT_DTO_RECEIVE, 120));
    // A bad key completes in error: the EP is broken and the peer told.
    let mut bad = triplet(0, 8);
    ok(post_send(s.ep, &mut bad, 10));
    assert_eq!(dto_of(&dequeue(s.dto).expect("error completion")).status, DAT_DTO_ERR_LOCAL_PROTECTION);
    assert_eq!(state(s.ep), DAT_EP_STATE_DISCONNECTED);
    assert_eq!(conn_of(&dequeue(s.conn).expect("broken")).0, DAT_CONNECTION_EVENT_BROKEN);
    assert_eq!(id.with(|i| i.calls.last().copied()), Some("disconnect"));
    // The peer's DISCONNECTED that follows adds no second event.
    assert!(cm_event(&event(CmEventKind::Disconnected, id, s.ep as usize, &[])).is_none());
    assert!(dequeue(s.conn).is_none());
    // SAFETY: a live EP, then IA.
    unsafe {
        ok(ep::free::<T>(s.ep));
        ok(ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG));
    }
    assert!(id.with(|i| i.destroyed));
    assert_eq!(mock::LIVE_IDS.load(Ordering::Acquire), ids);
}

#[test]
fn a_consumer_reject_reaches_the_active_side_with_its_reason() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-reject");
    // SAFETY: all-zero sockaddr_in6, then its family.
    let mut peer: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    peer.sin6_family = libc::AF_INET6 as _;
    // SAFETY: a consumer connect to a full sockaddr_in6.
    ok(unsafe { connection::connect::<T>(s.ep, &mut peer as *mut _ as DAT_IA_ADDRESS_PTR, 7001, DAT_TIMEOUT_INFINITE, 0, null_mut(), 0, 0) });
    let id = ep::get::<T>(s.ep).unwrap().cm_id.get().unwrap();
    let spent = cm_event(&event(CmEventKind::Rejected { by_consumer: true }, id, s.ep as usize, b"busy"));
    // The spent id comes back to be destroyed after the event's ack.
    assert_eq!(spent, Some(id));
    spent.unwrap().destroy();
    assert_eq!(state(s.ep), DAT_EP_STATE_DISCONNECTED);
    assert_eq!(conn_of(&dequeue(s.conn).unwrap()), (DAT_CONNECTION_EVENT_PEER_REJECTED, b"busy".to_vec()));
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

#[test]
fn a_request_on_a_psp_becomes_a_cr_and_accepting_it_connects() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-passive");
    let psp_h = consumer_psp(&s, 7002);
    let req = Id::request();
    let cr_h = request(&s, psp_h, req, b"hello");
    assert_eq!(req.with(|i| i.context), cr_h as usize, "the request's events now name the CR");
    // SAFETY: DAT_CR_PARAM is plain C data, filled by the call.
    let mut p: DAT_CR_PARAM = unsafe { std::mem::zeroed() };
    // SAFETY: a live CR and our out-parameter.
    ok(unsafe { cr::query::<T>(cr_h, 0, &mut p) });
    // SAFETY: private_data_size bytes the CR keeps.
    assert_eq!(unsafe { std::slice::from_raw_parts(p.private_data as *const u8, p.private_data_size as usize) }, b"hello");
    // SAFETY: a live CR and EP, no private data.
    ok(unsafe { cr::accept::<T>(cr_h, s.ep, 0, null_mut()) });
    assert_eq!(state(s.ep), DAT_EP_STATE_COMPLETION_PENDING);
    assert_eq!(req.with(|i| (i.context, i.calls.clone())), (s.ep as usize, vec!["accept"]));
    assert!(cm_event(&event(CmEventKind::Established, req, s.ep as usize, &[])).is_none());
    assert_eq!(state(s.ep), DAT_EP_STATE_CONNECTED);
    assert_eq!(conn_of(&dequeue(s.conn).unwrap()).0, DAT_CONNECTION_EVENT_ESTABLISHED);
    // A graceful disconnect waits for the peer; its DISCONNECTED finishes it.
    // SAFETY: a live EP.
    ok(unsafe { connection::disconnect::<T>(s.ep, DAT_CLOSE_GRACEFUL_FLAG) });
    assert_eq!(state(s.ep), DAT_EP_STATE_DISCONNECT_PENDING);
    assert!(cm_event(&event(CmEventKind::Disconnected, req, s.ep as usize, &[])).is_none());
    assert_eq!(state(s.ep), DAT_EP_STATE_DISCONNECTED);
    assert_eq!(conn_of(&dequeue(s.conn).unwrap()).0, DAT_CONNECTION_EVENT_DISCONNECTED);
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
    assert!(req.with(|i| i.destroyed));
}

fn counters<const N: usize>(h: DAT_HANDLE) -> [u64; N] {
    let mut out = [0u64; N];
    // SAFETY: an array of the kind's full length, asking for all of them.
    ok(unsafe { crate::counter_calls::query_counters::<T>(h, N as i32, out.as_mut_ptr(), 0) });
    out
}

#[test]
fn counters_move_by_what_was_posted_and_completed() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-counters");
    const EP: usize = crate::counters::EP_COUNT;
    const EVD: usize = crate::counters::EVD_COUNT;
    const IA: usize = crate::counters::IA_COUNT;
    let ia0 = counters::<IA>(s.ia);
    // One PZ, two EVDs besides the async one, one EP, created by setup.
    assert_eq!(
        [ia0[DCNT_IA_PZ_CREATE as usize], ia0[DCNT_IA_EVD_CREATE as usize], ia0[DCNT_IA_EP_CREATE as usize]],
        [1, 3, 1]
    );
    let _id = connect(&s, b"");
    assert_eq!(counters::<IA>(s.ia)[DCNT_IA_CM_ACTIVE_EST as usize], 1);
    assert_eq!(counters::<EVD>(s.conn)[DCNT_EVD_CONN_CALLBACK as usize], 1);
    let mut t = triplet(5, 300);
    for i in 0..3 {
        ok(post_send(s.ep, &mut t, i));
    }
    // SAFETY: a consumer receive with one triplet.
    ok(unsafe { ep::post_recv::<T>(s.ep, 1, &mut t, DAT_DTO_COOKIE { as_64: 11 }, DAT_COMPLETION_DEFAULT_FLAG) });
    assert_eq!(ep::get::<T>(s.ep).unwrap().with_qp(|q| q.deliver(120)), Some(true));
    for _ in 0..4 {
        dequeue(s.dto).expect("a completion");
    }
    assert!(dequeue(s.dto).is_none());
    let e = counters::<EP>(s.ep);
    let at = |i: u32| e[i as usize];
    assert_eq!([at(DCNT_EP_CONNECT), at(DCNT_EP_POST_SEND), at(DCNT_EP_POST_SEND_DATA)], [1, 3, 900]);
    assert_eq!([at(DCNT_EP_POST_RECV), at(DCNT_EP_POST_RECV_DATA), at(DCNT_EP_RECV), at(DCNT_EP_RECV_DATA)], [1, 300, 1, 120]);
    assert_eq!(at(DCNT_EP_POST_WRITE), 0);
    let v = counters::<EVD>(s.dto);
    let at = |i: u32| v[i as usize];
    assert_eq!([at(DCNT_EVD_DEQUEUE), at(DCNT_EVD_DEQUEUE_FOUND), at(DCNT_EVD_DEQUEUE_NOT_FOUND)], [5, 4, 1]);
    assert_eq!([at(DCNT_EVD_DEQUEUE_POLL), at(DCNT_EVD_DEQUEUE_POLL_FOUND)], [5, 4]);
    // One counter lands at its own index; reset clears only what was read.
    let mut one = [0u64; EP];
    // SAFETY: a full-length array; one counter asked for, with reset.
    ok(unsafe { crate::counter_calls::query_counters::<T>(s.ep, DCNT_EP_POST_SEND as i32, one.as_mut_ptr(), 1) });
    assert_eq!((one[DCNT_EP_POST_SEND as usize], one[DCNT_EP_POST_SEND_DATA as usize]), (3, 0));
    let e = counters::<EP>(s.ep);
    assert_eq!((e[DCNT_EP_POST_SEND as usize], e[DCNT_EP_POST_SEND_DATA as usize]), (0, 900));
    // SAFETY: wrong kind of handle, a counter past the end, a NULL array.
    unsafe {
        assert_eq!(crate::counter_calls::query_counters::<T>(s.pz, 0, one.as_mut_ptr(), 0), dat_abi::status::invalid_handle(DAT_INVALID_HANDLE1));
        assert_eq!(crate::counter_calls::query_counters::<T>(s.ep, EP as i32 + 1, one.as_mut_ptr(), 0), dat_abi::status::invalid_arg(DAT_INVALID_ARG3));
        assert_eq!(crate::counter_calls::query_counters::<T>(s.ep, 0, null_mut(), 0), dat_abi::status::invalid_arg(DAT_INVALID_ARG4));
        // A group that was never started cannot stop.
        assert_eq!(crate::counter_calls::stop_counter::<T>(s.ia, DCNT_IA_LNK as i32), dat_abi::status::invalid_state(0));
        ok(crate::counter_calls::start_counter::<T>(s.ia, DCNT_IA_LNK as i32));
        ok(crate::counter_calls::stop_counter::<T>(s.ia, DCNT_IA_LNK as i32));
        assert_eq!(crate::counter_calls::start_counter::<T>(s.ia, 7), dat_abi::status::invalid_arg(DAT_INVALID_ARG3));
        ok(ep::free::<T>(s.ep));
    }
    assert_eq!(counters::<IA>(s.ia)[DCNT_IA_EP_FREE as usize], 1);
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// Fuzzer finding (tools/dat-fuzz): our registry's consumer IA handles are
/// small integers (1..=0xFFFF); one passed as an EVD to dat_ep_create was
/// dereferenced when it happened to be 8-aligned, and crashed the process.
#[test]
fn a_consumer_ia_handle_in_place_of_an_object_is_refused_not_read() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-small-handles");
    for small in [8usize, 16, 0x100, 0xFFF8] {
        let bogus = small as DAT_HANDLE;
        let mut ep = null_mut();
        // SAFETY: a consumer call with a bad EVD handle; the out-pointer is ours.
        let r = unsafe { ep::create::<T>(s.ia, s.pz, bogus, s.dto, s.conn, std::ptr::null(), &mut ep) };
        assert_eq!(r & DAT_TYPE_MASK, DAT_INVALID_HANDLE, "EVD handle {small:#x}: {r:#x}");
        assert!(dequeue(bogus).is_none());
    }
    // SAFETY: the setup's IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// dat-fuzz finding 2: an extension op the core does not implement (a
/// collective) on a freed handle said DAT_NOT_IMPLEMENTED: the registry
/// passes freed handles on (their slot still names our table), and the C
/// shim answered before looking at the handle.
#[test]
fn an_unimplemented_extension_op_on_a_freed_handle_is_invalid_handle() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-ext-unsupported");
    let mut freed = null_mut();
    // SAFETY: consumer calls on the setup's IA with our out-pointer.
    unsafe {
        ok(pz::create::<T>(s.ia, &mut freed));
        ok(pz::free::<T>(freed));
    }
    let r = crate::extension::unsupported::<T>(freed);
    assert_eq!(r & DAT_TYPE_MASK, DAT_INVALID_HANDLE, "freed PZ: {r:#x}");
    let r = crate::extension::unsupported::<T>(s.pz);
    assert_eq!(r & DAT_TYPE_MASK, DAT_NOT_IMPLEMENTED, "live PZ: {r:#x}");
    // SAFETY: the setup's IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// dat-fuzz finding 3: an atomic (dat_ib_post_fetch_and_add) on a handle
/// that is not an EP checked its remote address before the handle, and
/// answered DAT_INVALID_PARAMETER for a wrong-type handle.
#[test]
fn an_atomic_on_a_handle_that_is_no_ep_is_invalid_handle() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-ext-atomic-handle");
    let mut l = triplet(0, 8);
    // Misaligned remote: the argument check that used to answer first.
    let remote = DAT_RMR_TRIPLET { virtual_address: 0x1003, segment_length: 8, rmr_context: 1 };
    let p = crate::extension::ExtPost {
        segments: 1,
        local: &mut l,
        cookie: 7,
        remote: &remote,
        cmp_add: 1,
        swap: 0,
        immed: 0,
        ah: std::ptr::null(),
        flags: 0,
    };
    for h in [s.pz, s.dto, s.ia] {
        // SAFETY: our argument block; the handle is what is under test.
        let r = unsafe { crate::extension::ext_post::<T>(h, DAT_IB_FETCH_AND_ADD_OP as i32, &p) };
        assert_eq!(r & DAT_TYPE_MASK, DAT_INVALID_HANDLE, "handle {h:p}: {r:#x}");
    }
    // SAFETY: as above, on the EP: now the argument is what is refused.
    let r = unsafe { crate::extension::ext_post::<T>(s.ep, DAT_IB_FETCH_AND_ADD_OP as i32, &p) };
    assert_eq!(r & DAT_TYPE_MASK, DAT_INVALID_PARAMETER, "EP: {r:#x}");
    // SAFETY: the setup's IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// dat-fuzz finding 4: dat_ep_modify swapped the PZ, then refused the
/// connection EVD (no CONNECTION stream) and returned DAT_INVALID_HANDLE
/// with the new PZ recorded and the QP still on the old PZ's PD. A refused
/// modify leaves the EP as it was; a PZ of another IA is refused.
#[test]
fn a_refused_ep_modify_changes_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-modify-a");
    let other = setup("mock-modify-b");
    let mut pz2 = null_mut();
    // SAFETY: consumer calls with live handles and our out-pointers.
    unsafe {
        ok(pz::create::<T>(s.ia, &mut pz2));
        let query = |h| {
            let mut p: DAT_EP_PARAM = std::mem::zeroed();
            ok(ep::query::<T>(h, DAT_EP_FIELD_ALL as _, &mut p));
            (p.pz_handle, p.recv_evd_handle, p.request_evd_handle, p.connect_evd_handle)
        };
        let before = query(s.ep);
        let mut p: DAT_EP_PARAM = std::mem::zeroed();
        p.pz_handle = pz2;
        // A DTO-only EVD where the connection EVD goes.
        p.connect_evd_handle = s.dto;
        let mask = (DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_CONNECT_EVD_HANDLE) as DAT_EP_PARAM_MASK;
        let r = ep::modify::<T>(s.ep, mask, &p);
        assert_eq!(r & DAT_TYPE_MASK, DAT_INVALID_HANDLE, "{r:#x}");
        assert_eq!(query(s.ep), before, "a refused modify changed the EP");
        // The new PZ is not held by the EP: it frees.
        ok(pz::free::<T>(pz2));
        // A PZ of another IA.
        p.pz_handle = other.pz;
        let r = ep::modify::<T>(s.ep, DAT_EP_FIELD_PZ_HANDLE as DAT_EP_PARAM_MASK, &p);
        assert_eq!(r & DAT_TYPE_MASK, DAT_INVALID_HANDLE, "PZ of another IA: {r:#x}");
        assert_eq!(query(s.ep), before);
        ok(ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG));
        ok(ia::close::<T>(other.ia, DAT_CLOSE_ABRUPT_FLAG));
    }
}

/// dat-fuzz finding 7 (memcheck: a use after free): the peer's accept data
/// came with ESTABLISHED, then a DISCONNECTED without private data was
/// posted before the consumer dequeued ESTABLISHED. That freed the buffer
/// ESTABLISHED points at; DAT keeps it valid until the EP is reset or freed.
#[test]
fn connection_private_data_outlives_later_events() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-pdata-lifetime");
    let id = connect(&s, b"welcome");
    // The peer goes away before the consumer looked at anything.
    assert!(cm_event(&event(CmEventKind::Disconnected, id, s.ep as usize, &[])).is_none());
    let established = dequeue(s.conn).expect("established");
    // SAFETY: connection events fill this member.
    let d = unsafe { established.event_data.connect_event_data };
    assert_eq!((established.event_number, d.private_data_size), (DAT_CONNECTION_EVENT_ESTABLISHED, 7));
    {
        // The event points into the buffer the EP still owns, not a freed one.
        let keep = ep::get::<T>(s.ep).unwrap().peer_pdata.lock().unwrap();
        assert_eq!(d.private_data as *const u8, keep.as_ptr(), "ESTABLISHED's private data was replaced under it");
        assert_eq!(keep.as_slice(), b"welcome");
    }
    let (n, pdata) = conn_of(&dequeue(s.conn).expect("disconnected"));
    assert_eq!((n, pdata.len()), (DAT_CONNECTION_EVENT_DISCONNECTED, 0));
    // SAFETY: the setup's IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

#[test]
fn a_connect_and_an_accept_racing_for_one_ep_never_both_take_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-race");
    let psp_h = consumer_psp(&s, 7003);
    let (mut connects, mut accepts) = (0, 0);
    // The accept moves the QP before it is done: the connect lands there.
    mock::QP_MOVE_US.store(50, Ordering::Relaxed);
    for _ in 0..500 {
        let cr_h = request(&s, psp_h, Id::request(), &[]);
        let mut ep_h = null_mut();
        // SAFETY: a consumer EP on the setup's PZ and EVDs.
        ok(unsafe { ep::create::<T>(s.ia, s.pz, s.dto, s.dto, s.conn, std::ptr::null(), &mut ep_h) });
        let start = std::sync::Barrier::new(2);
        let (ep_a, cr_a) = (ep_h as usize, cr_h as usize);
        let (c, a) = std::thread::scope(|sc| {
            let connecting = sc.spawn(|| {
                // SAFETY: all-zero sockaddr_in, then its family.
                let mut peer: libc::sockaddr_in = unsafe { std::mem::zeroed() };
                peer.sin_family = libc::AF_INET as _;
                start.wait();
                // SAFETY: a consumer connect on a live EP to a full sockaddr_in.
                unsafe { connection::connect::<T>(ep_a as DAT_EP_HANDLE, &mut peer as *mut _ as DAT_IA_ADDRESS_PTR, 7000, DAT_TIMEOUT_INFINITE, 0, null_mut(), 0, 0) }
            });
            start.wait();
            // SAFETY: a live CR and EP, no private data.
            let a = unsafe { cr::accept::<T>(cr_a as DAT_CR_HANDLE, ep_a as DAT_EP_HANDLE, 0, null_mut()) };
            (connecting.join().unwrap(), a)
        });
        assert!(c != DAT_SUCCESS || a != DAT_SUCCESS, "a connect and an accept both took one EP");
        assert!(c == DAT_SUCCESS || a == DAT_SUCCESS, "neither took a free EP: {c:#x} {a:#x}");
        let loser = if c == DAT_SUCCESS { a } else { c };
        assert_eq!(loser, dat_abi::status::invalid_state(DAT_INVALID_STATE_EP_CONNECTED));
        let want = if c == DAT_SUCCESS { DAT_EP_STATE_ACTIVE_CONNECTION_PENDING } else { DAT_EP_STATE_COMPLETION_PENDING };
        assert_eq!(state(ep_h), want);
        connects += (c == DAT_SUCCESS) as u32;
        accepts += (a == DAT_SUCCESS) as u32;
        // SAFETY: live handles; a CR the accept did not take is rejected.
        unsafe {
            if a != DAT_SUCCESS {
                ok(cr::reject::<T>(cr_h, 0, null_mut()));
            }
            ok(ep::free::<T>(ep_h));
        }
        while dequeue(s.conn).is_some() {}
    }
    mock::QP_MOVE_US.store(0, Ordering::Relaxed);
    assert_eq!(connects + accepts, 500);
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

static AGENT_EP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static AGENT_FREE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-1);

/// Set by the handlers' `done` (the backend's acknowledgement); what the
/// agent found there when it ran.
static ACKED: AtomicBool = AtomicBool::new(false);
static ACKED_BEFORE_AGENT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-1);

unsafe extern "C" fn free_the_ep(_data: DAT_PVOID, _evd: DAT_EVD_HANDLE) {
    ACKED_BEFORE_AGENT.store(ACKED.load(Ordering::SeqCst) as i64, Ordering::SeqCst);
    // SAFETY: the EP the test stored, freed as a consumer's agent would.
    let r = unsafe { ep::free::<T>(AGENT_EP.load(Ordering::SeqCst) as DAT_EP_HANDLE) };
    AGENT_FREE.store(r as i64, Ordering::SeqCst);
}

unsafe extern "C" fn note_the_ack(_data: DAT_PVOID, _evd: DAT_EVD_HANDLE) {
    ACKED_BEFORE_AGENT.store(ACKED.load(Ordering::SeqCst) as i64, Ordering::SeqCst);
}

/// An async event pins the EP it names while it reads it, and a CNO agent
/// the event fires may free that EP: the agent runs once the pin is gone
/// (inside it, the free would wait for its own thread's pin for ever).
#[test]
fn an_agent_fired_by_an_async_event_may_free_the_ep_it_names() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-async-agent");
    let async_evd = crate::handle::get::<crate::ia::Ia<T>>(s.ia).unwrap().async_evd();
    AGENT_EP.store(s.ep as usize, Ordering::SeqCst);
    AGENT_FREE.store(-1, Ordering::SeqCst);
    ACKED.store(false, Ordering::SeqCst);
    ACKED_BEFORE_AGENT.store(-1, Ordering::SeqCst);
    let mut cno = null_mut();
    let agent = DAT_OS_WAIT_PROXY_AGENT { instance_data: null_mut(), proxy_agent_func: Some(free_the_ep) };
    // SAFETY: live handles and a valid out-pointer.
    unsafe {
        ok(crate::cno::create::<T>(s.ia, agent, &mut cno));
        ok(evd::modify_cno::<T>(async_evd, cno));
    }
    let ep_addr = s.ep as usize;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        crate::async_error::handle_event::<T>(&crate::backend::AsyncEvent::QpError { context: ep_addr, code: 5 }, &mut || {
            ACKED.store(true, Ordering::SeqCst)
        });
        tx.send(()).unwrap();
    });
    rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the async event's handler never returned");
    assert_eq!(AGENT_FREE.load(Ordering::SeqCst), DAT_SUCCESS as i64, "the agent's dat_ep_free");
    // verbs: a free on another thread waits for the acknowledgement, so an
    // agent run before it and waiting for that thread would wait for ever.
    assert_eq!(ACKED_BEFORE_AGENT.load(Ordering::SeqCst), 1, "the agent ran before the event was acknowledged");
    let e = dequeue(async_evd).expect("the async EVD holds the event");
    assert_eq!(e.event_number, DAT_ASYNC_ERROR_EP_BROKEN);
    // SAFETY: the event number says which member is filled.
    assert_eq!(unsafe { e.event_data.asynch_error_event_data.dat_handle } as usize, ep_addr);
    // SAFETY: a freed EP handle, refused; then the IA and what is left of it.
    unsafe {
        assert_eq!(ep::free::<T>(s.ep), dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EP));
        ok(ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG));
    }
}

/// A connection event's CNO agent runs after the event is acknowledged (on
/// verbs, rdma_destroy_id waits for that: an agent run before it that
/// waited for a thread freeing the EP would wait for ever).
#[test]
fn an_agent_fired_by_a_connection_event_runs_after_its_acknowledgement() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-cm-agent");
    ACKED.store(false, Ordering::SeqCst);
    ACKED_BEFORE_AGENT.store(-1, Ordering::SeqCst);
    let mut cno = null_mut();
    let agent = DAT_OS_WAIT_PROXY_AGENT { instance_data: null_mut(), proxy_agent_func: Some(note_the_ack) };
    // SAFETY: all-zero sockaddr_in, then its family.
    let mut peer: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    peer.sin_family = libc::AF_INET as _;
    // SAFETY: live handles, valid out-pointers, a full sockaddr_in.
    unsafe {
        ok(crate::cno::create::<T>(s.ia, agent, &mut cno));
        ok(evd::modify_cno::<T>(s.conn, cno));
        ok(connection::connect::<T>(s.ep, &mut peer as *mut _ as DAT_IA_ADDRESS_PTR, 7000, DAT_TIMEOUT_INFINITE, 0, null_mut(), 0, 0));
    }
    let id = ep::get::<T>(s.ep).unwrap().cm_id.get().expect("an id while connecting");
    for kind in [CmEventKind::AddrResolved, CmEventKind::RouteResolved] {
        assert!(cm_event(&event(kind, id, s.ep as usize, &[])).is_none());
    }
    assert_eq!(ACKED_BEFORE_AGENT.load(Ordering::SeqCst), -1, "an agent ran with no event queued");
    let spent = connection::handle_event::<T>(&event(CmEventKind::ConnectResponse, id, s.ep as usize, &[]), &mut || {
        ACKED.store(true, Ordering::SeqCst)
    });
    assert!(spent.is_none());
    assert_eq!(ACKED_BEFORE_AGENT.load(Ordering::SeqCst), 1, "the agent ran before the event was acknowledged");
    assert_eq!(conn_of(&dequeue(s.conn).expect("the ESTABLISHED event")).0, DAT_CONNECTION_EVENT_ESTABLISHED);
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// A request the connection manager no longer holds acceptable (rdma_cm:
/// the requester left, and moving the QP through its id fails with EINVAL)
/// is a state of the CR, not an internal error (dat-fuzz over verbs); the
/// EP is given back and the CR can still be rejected. Once the requester's
/// REJ arrives as an event, the CR has no id left and refuses at once.
#[test]
fn accepting_a_request_whose_requester_left_is_invalid_state() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-left");
    let psp_h = consumer_psp(&s, 7003);
    let first = request(&s, psp_h, Id::request(), &[]);
    mock::QP_MOVE_FAILS.store(libc::EINVAL, Ordering::Relaxed);
    // SAFETY: a live CR and EP.
    let r = unsafe { cr::accept::<T>(first, s.ep, 0, null_mut()) };
    mock::QP_MOVE_FAILS.store(0, Ordering::Relaxed);
    assert_eq!(r, dat_abi::status::invalid_state(0));
    assert_eq!(state(s.ep), DAT_EP_STATE_UNCONNECTED, "the EP is given back");
    // SAFETY: the CR is still there to reject.
    ok(unsafe { cr::reject::<T>(first, 0, null_mut()) });

    let req = Id::request();
    let second = request(&s, psp_h, req, &[]);
    let gone = cm_event(&event(CmEventKind::Rejected { by_consumer: false }, req, second as usize, &[]));
    assert!(gone.is_some(), "the requester's REJ takes the CR's id, to be destroyed");
    // SAFETY: a live CR (without its id) and EP.
    assert_eq!(unsafe { cr::accept::<T>(second, s.ep, 0, null_mut()) }, dat_abi::status::invalid_state(0));
    assert_eq!(state(s.ep), DAT_EP_STATE_UNCONNECTED);
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// Rebinding a bound type 2 window posts an invalidate first, under the
/// bind's cookie: when that fails, the consumer still gets one event for
/// its one dat_rmr_bind (the bind's, flushed), not two (dat-fuzz over
/// verbs: the invalidate's error and the bind's flush, one cookie twice).
#[test]
fn a_rebind_whose_invalidate_fails_completes_once() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-rebind");
    connect(&s, &[]);
    let buf = vec![0u8; 4096];
    let (mut lmr, mut lctx, mut rctx, mut rlen, mut raddr, mut rmr, mut rk) = (null_mut(), 0, 0, 0, 0, null_mut(), 0);
    let t = |lctx| DAT_LMR_TRIPLET { lmr_context: lctx, virtual_address: buf.as_ptr() as u64, segment_length: 64 };
    let events = || std::iter::from_fn(|| dequeue(s.dto)).map(|e| {
        assert_eq!(e.event_number, DAT_RMR_BIND_COMPLETION_EVENT);
        // SAFETY: the event number names the member.
        let d = unsafe { e.event_data.rmr_completion_event_data };
        // SAFETY: a plain 8-byte union.
        (unsafe { d.user_cookie.as_64 }, d.status)
    }).collect::<Vec<_>>();
    // SAFETY: consumer calls with live handles, our buffer and out-pointers.
    unsafe {
        let region = DAT_REGION_DESCRIPTION { for_va: buf.as_ptr() as DAT_PVOID };
        ok(crate::lmr::create::<T>(s.ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, s.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
            &mut lmr, &mut lctx, &mut rctx, &mut rlen, &mut raddr));
        ok(crate::rmr::create::<T>(s.pz, &mut rmr));
        ok(crate::rmr::bind::<T>(rmr, lmr, &t(lctx), DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, s.ep,
            DAT_RMR_COOKIE { as_64: 1 }, DAT_COMPLETION_DEFAULT_FLAG, &mut rk));
    }
    assert_eq!(events(), vec![(1, DAT_DTO_SUCCESS)]);
    mock::INVALIDATE_FAILS.store(true, Ordering::Relaxed);
    // SAFETY: as above; the window is bound, so its invalidate goes first.
    let r = unsafe { crate::rmr::bind::<T>(rmr, lmr, &t(lctx), DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, s.ep,
        DAT_RMR_COOKIE { as_64: 2 }, DAT_COMPLETION_DEFAULT_FLAG, &mut rk) };
    mock::INVALIDATE_FAILS.store(false, Ordering::Relaxed);
    ok(r);
    assert_eq!(events(), vec![(2, DAT_DTO_ERR_FLUSHED)], "one event for the one bind");
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// A device flushes in its own time after the QP's move to ERROR, and most
/// verbs libraries clean a QP's completions off its CQs when it enters
/// RESET (the mock does both): an abrupt disconnect of an unconnected EP
/// still reports each posted receive once, flushed, and a reset of a
/// disconnected EP keeps what was not dequeued yet: a send's completion
/// and a receive the device had still to flush.
#[test]
fn a_reset_keeps_completions_the_device_flushes_late() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-late");
    let mut t = triplet(5, 64);
    let recv = |cookie| {
        let mut t = triplet(5, 64);
        // SAFETY: a consumer receive with one triplet on our stack.
        ok(unsafe { ep::post_recv::<T>(s.ep, 1, &mut t, DAT_DTO_COOKIE { as_64: cookie }, DAT_COMPLETION_DEFAULT_FLAG) });
    };
    let events = || std::iter::from_fn(|| dequeue(s.dto)).map(|e| {
        let d = dto_of(&e);
        // SAFETY: a plain 8-byte union.
        (unsafe { d.user_cookie.as_64 }, d.operation, d.status)
    }).collect::<Vec<_>>();
    struct Late;
    impl Drop for Late {
        fn drop(&mut self) {
            // Even when an assertion below fails: the next test flushes at once.
            mock::FLUSH_LATE_MS.store(0, Ordering::Relaxed);
        }
    }
    let _late = Late;
    mock::FLUSH_LATE_MS.store(30, Ordering::Relaxed);
    (1..=3).for_each(recv);
    // SAFETY: a live EP.
    ok(unsafe { connection::disconnect::<T>(s.ep, DAT_CLOSE_ABRUPT_FLAG) });
    let flushed = |c| (c, DAT_DTO_RECEIVE, DAT_DTO_ERR_FLUSHED);
    assert_eq!(events(), vec![flushed(1), flushed(2), flushed(3)]);
    assert_eq!(state(s.ep), DAT_EP_STATE_UNCONNECTED);

    let id = connect(&s, &[]);
    assert_eq!(conn_of(&dequeue(s.conn).expect("established")).0, DAT_CONNECTION_EVENT_ESTABLISHED);
    ok(post_send(s.ep, &mut t, 9));
    recv(4);
    // SAFETY: a live EP.
    ok(unsafe { connection::disconnect::<T>(s.ep, DAT_CLOSE_ABRUPT_FLAG) });
    assert!(cm_event(&event(CmEventKind::Disconnected, id, s.ep as usize, &[])).is_none());
    assert_eq!(state(s.ep), DAT_EP_STATE_DISCONNECTED);
    // SAFETY: a live EP.
    ok(unsafe { ep::reset::<T>(s.ep) });
    assert_eq!(events(), vec![(9, DAT_DTO_SEND, DAT_DTO_SUCCESS), flushed(4)]);
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// `dat_cno_wait` finds the EVD with an event among those attached, however
/// many (the list is copied to the stack up to 16, to the heap beyond), and
/// times out with none.
#[test]
fn a_cno_wait_names_the_evd_with_the_event_among_many() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-cno-many");
    let mut cno = null_mut();
    let agent = DAT_OS_WAIT_PROXY_AGENT { instance_data: null_mut(), proxy_agent_func: None };
    let mut evds = Vec::new();
    // SAFETY: live handles and valid out-pointers.
    unsafe {
        ok(crate::cno::create::<T>(s.ia, agent, &mut cno));
        for _ in 0..20 {
            let mut e = null_mut();
            ok(evd::create::<T>(s.ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &mut e));
            evds.push(e);
        }
    }
    let wait = |timeout: DAT_TIMEOUT| {
        let mut found = null_mut();
        // SAFETY: a live CNO and our out-pointer.
        let r = unsafe { crate::cno::wait::<T>(cno, timeout, &mut found) };
        (r, found)
    };
    assert_eq!(wait(0).0 & 0x3fff_0000, DAT_TIMEOUT_EXPIRED, "no event anywhere");
    for (k, n) in [(2usize, 3usize), (17, 20)] {
        // Only the first `n` EVDs feed the CNO this round.
        for (i, &e) in evds.iter().enumerate() {
            // SAFETY: live EVD and CNO handles.
            ok(unsafe { evd::modify_cno::<T>(e, if i < n { cno } else { null_mut() }) });
        }
        // SAFETY: DAT_EVENT is plain C data; a software event carries a pointer only.
        let mut ev: DAT_EVENT = unsafe { std::mem::zeroed() };
        ev.event_number = DAT_SOFTWARE_EVENT;
        // SAFETY: a live software EVD and a filled event.
        ok(unsafe { evd::post_se::<T>(evds[k], &ev) });
        let before = crate::alloc_count::made();
        let (r, found) = wait(1_000_000);
        let made = crate::alloc_count::made() - before;
        ok(r);
        assert_eq!(found, evds[k], "EVD {k} of {n} holds the event");
        if n <= 16 {
            assert_eq!(made, 0, "a wait that found its event allocated");
        }
        assert!(dequeue(evds[k]).is_some());
    }
    // A wait that sleeps until another thread posts the event: it allocates
    // nothing either (the second time: the first may size what it uses).
    static GO: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    GO.store(0, Ordering::SeqCst);
    let target = evds[2] as usize;
    let poster = std::thread::spawn(move || {
        for round in 1..=2 {
            while GO.load(Ordering::SeqCst) < round {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            // SAFETY: DAT_EVENT is plain C data; a software event carries a pointer only.
            let mut ev: DAT_EVENT = unsafe { std::mem::zeroed() };
            ev.event_number = DAT_SOFTWARE_EVENT;
            // SAFETY: a live software EVD and a filled event.
            ok(unsafe { evd::post_se::<T>(target as DAT_EVD_HANDLE, &ev) });
        }
    });
    for (i, &e) in evds.iter().enumerate() {
        // SAFETY: live EVD and CNO handles.
        ok(unsafe { evd::modify_cno::<T>(e, if i < 3 { cno } else { null_mut() }) });
    }
    let mut slept = Vec::with_capacity(2);
    for round in 1..=2 {
        let before = crate::alloc_count::made();
        GO.store(round, Ordering::SeqCst);
        let (r, found) = wait(5_000_000);
        slept.push(crate::alloc_count::made() - before);
        ok(r);
        assert_eq!(found, evds[2], "the EVD the other thread posted to");
        assert!(dequeue(evds[2]).is_some());
    }
    poster.join().unwrap();
    assert_eq!(slept[1], 0, "a CNO wait that slept allocated (first time: {})", slept[0]);
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}

/// The fast path allocates nothing: posts, a dequeue that finds a
/// completion or none, and a wait whose event is there (after a first
/// round, which may size what is made on first use).
#[test]
fn posts_dequeues_and_a_wait_that_finds_its_event_allocate_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup("mock-no-alloc");
    let _id = connect(&s, b"");
    let mut t = triplet(5, 64);
    let mut made = Vec::new();
    for round in 0..2 {
        let before = crate::alloc_count::made();
        ok(post_send(s.ep, &mut t, round));
        // SAFETY: consumer receives with one triplet.
        unsafe {
            ok(ep::post_recv::<T>(s.ep, 1, &mut t, DAT_DTO_COOKIE { as_64: 10 + round }, DAT_COMPLETION_DEFAULT_FLAG));
            ok(ep::post_recv::<T>(s.ep, 1, &mut t, DAT_DTO_COOKIE { as_64: 20 + round }, DAT_COMPLETION_DEFAULT_FLAG));
        }
        let posted = crate::alloc_count::made();
        assert_eq!(ep::get::<T>(s.ep).unwrap().with_qp(|q| q.deliver(32)), Some(true));
        assert_eq!(ep::get::<T>(s.ep).unwrap().with_qp(|q| q.deliver(16)), Some(true));
        let delivered = crate::alloc_count::made();
        dequeue(s.dto).expect("the send's completion");
        // SAFETY: DAT_EVENT is plain C data, filled by the call.
        let mut e: DAT_EVENT = unsafe { std::mem::zeroed() };
        let mut left = 0;
        // SAFETY: a live EVD, our event and count.
        ok(unsafe { evd::wait::<T>(s.dto, 1_000_000, 1, &mut e, &mut left) });
        dequeue(s.dto).expect("the second receive's completion");
        assert!(dequeue(s.dto).is_none());
        made.push(((posted - before), crate::alloc_count::made() - delivered));
    }
    assert_eq!(made[1], (0, 0), "allocations (posting, reaping) in the second round; the first: {:?}", made[0]);
    // SAFETY: a live IA.
    ok(unsafe { ia::close::<T>(s.ia, DAT_CLOSE_ABRUPT_FLAG) });
}
