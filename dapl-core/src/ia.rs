//! The Interface Adapter: one opened adapter port, parent of every other object.

use crate::backend::DeviceOps;
use crate::counters::{self, Counters};
use crate::handle::{self, Object};
use crate::state::Provider;
use crate::util::cstring;
use dat_abi::status::{guard, invalid_arg, invalid_state};
use dat_abi::*;
use std::ffi::CString;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub struct Ia<T: Provider> {
    /// The provider table of this IA's dat.conf entry; every child's first word.
    table: usize,
    /// Declared first so it stops (dropped first) before the device's channel goes.
    cm: Mutex<Option<T::Events>>,
    pub name: String,
    pub device: T::Device,
    /// The async EVD: created by us at open unless the consumer gave one.
    async_evd: AtomicUsize,
    owns_async_evd: AtomicBool,
    /// Provider-specific attributes, as DAPL's providers publish them
    /// (dtestsrq reads DAT_IB_TRANSPORT_MTU); the array points into `strings`.
    named: Vec<DAT_NAMED_ATTR>,
    _strings: Vec<CString>,
    /// Active connects with a timeout: (EP handle, when it expires).
    pub connects: Mutex<Vec<(usize, std::time::Instant)>>,
    pub counters: Counters<{ crate::counters::IA_COUNT }>,
    /// Device counter groups started by dat_ib_start_counter, with their start values.
    pub baseline: crate::counters::Baseline,
}

// `named` holds pointers into `_strings`, which live and never move with the IA.
unsafe impl<T: Provider> Send for Ia<T> {}
unsafe impl<T: Provider> Sync for Ia<T> {}

fn named_attrs<T: Provider>(device: &T::Device) -> (Vec<DAT_NAMED_ATTR>, Vec<CString>) {
    let atomics = device.limits().atomics;
    let truth = |b: bool| if b { "TRUE" } else { "FALSE" };
    let mut pairs = vec![("DAT_IB_PROVIDER_NAME", T::NAME.to_owned())];
    pairs.extend(device.describe());
    pairs.extend([
        // The IB extensions, named as dtestx and MPI stacks look them up.
        ("DAT_EXTENSION_INTERFACE", "TRUE".to_owned()),
        ("DAT_IB_FETCH_AND_ADD", truth(atomics).to_owned()),
        ("DAT_IB_CMP_AND_SWAP", truth(atomics).to_owned()),
        ("DAT_IB_IMMED_DATA", "TRUE".to_owned()),
        ("DAT_IB_UD", "TRUE".to_owned()),
        // dtestx -p queries and prints the counters only when this is present.
        ("DAT_COUNTERS", "TRUE".to_owned()),
    ]);
    let strings: Vec<CString> = pairs.iter().flat_map(|(k, v)| [cstring(k), cstring(v)]).collect();
    let named = strings
        .chunks(2)
        .map(|kv| DAT_NAMED_ATTR { name: kv[0].as_ptr(), value: kv[1].as_ptr() })
        .collect();
    (named, strings)
}

impl<T: Provider> Object for Ia<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_IA;
    const INVALID: u32 = DAT_INVALID_HANDLE_IA;
}

impl<T: Provider> Ia<T> {
    /// Every object of the IA comes through here once, which makes it the
    /// one place its create counter moves (and its free counter in disown).
    pub fn adopt<O: Object<P = T>>(&self, h: DAT_HANDLE, rank: u8, destroy: fn(DAT_HANDLE)) {
        if let Some((created, _)) = counters::lifetime_counters(O::TYPE) {
            self.counters.add(created, 1);
        }
        if O::TYPE == DAT_HANDLE_TYPE_PSP || O::TYPE == DAT_HANDLE_TYPE_RSP {
            self.counters.add(DCNT_IA_CM_LISTEN, 1);
        }
        handle::adopt::<O>(h, self.id(), rank, destroy);
    }

    /// `h` leaves the IA (it is being freed); `h` passed `get::<O>`.
    pub fn disown<O: Object<P = T>>(&self, h: DAT_HANDLE) {
        // Only the call that took it from the IA counts the free.
        if !handle::disown::<O>(h, self.id()) {
            return;
        }
        if let Some((_, Some(freed))) = counters::lifetime_counters(O::TYPE) {
            self.counters.add(freed, 1);
            if O::TYPE == DAT_HANDLE_TYPE_LMR {
                self.counters.add(DCNT_IA_MEM_FREE, 1);
            }
        }
    }

    /// What children name as their parent: the IA's address, stable while
    /// it lives (slots never move).
    fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// The live children of one handle kind, as a snapshot.
    pub fn children_of_kind(&self, kind: DAT_HANDLE_TYPE) -> Vec<DAT_HANDLE> {
        handle::children::<T>(self.id(), Some(kind)).into_iter().map(|c| c.handle).collect()
    }

    pub fn table(&self) -> *mut DAT_PROVIDER {
        self.table as *mut DAT_PROVIDER
    }

    pub fn is_async_evd(&self, h: DAT_EVD_HANDLE) -> bool {
        self.owns_async_evd.load(Ordering::Acquire) && self.async_evd.load(Ordering::Acquire) == h as usize
    }

    pub fn async_evd(&self) -> DAT_EVD_HANDLE {
        self.async_evd.load(Ordering::Acquire) as DAT_EVD_HANDLE
    }
}

/// Puts a new IA for `device` in a slot of provider table `table`, with
/// the consumer's async EVD if it gave one (already checked).
pub fn insert<T: Provider>(name: String, table: *mut DAT_PROVIDER, device: T::Device, async_evd: DAT_EVD_HANDLE) -> DAT_IA_HANDLE {
    let (named, strings) = named_attrs::<T>(&device);
    handle::insert(Ia::<T> {
        named,
        _strings: strings,
        table: table as usize,
        cm: Mutex::new(None),
        name,
        device,
        async_evd: AtomicUsize::new(async_evd as usize),
        owns_async_evd: AtomicBool::new(false),
        connects: Mutex::new(Vec::new()),
        counters: Counters::new(),
        baseline: Mutex::new(Vec::new()),
    }, table)
}

/// Ends an IA that `insert` made but that could not be completed.
pub fn discard<T: Provider>(h: DAT_IA_HANDLE) {
    handle::remove::<Ia<T>>(h);
}

impl<T: Provider> Ia<T> {
    /// Keeps the running event thread, which stops when the IA closes.
    pub fn set_events(&self, events: T::Events) {
        *self.cm.lock().unwrap_or_else(|e| e.into_inner()) = Some(events);
    }

    /// Makes `h` the async EVD, one the IA created and frees with itself.
    pub fn set_own_async_evd(&self, h: DAT_EVD_HANDLE) {
        self.async_evd.store(h as usize, Ordering::Release);
        self.owns_async_evd.store(true, Ordering::Release);
    }
}

fn copy_name(dst: &mut [std::os::raw::c_char], src: &str) {
    let c = cstring(src);
    let bytes = c.as_bytes_with_nul();
    let n = bytes.len().min(dst.len());
    for (d, s) in dst[..n].iter_mut().zip(bytes) {
        *d = *s as _;
    }
    if let Some(last) = dst.last_mut() {
        *last = 0;
    }
}

fn clamp(v: i64) -> DAT_COUNT {
    v.clamp(0, DAT_COUNT::MAX as i64) as DAT_COUNT
}

fn fill_ia_attr<T: Provider>(ia: &Ia<T>, a: &mut DAT_IA_ATTR) {
    let d = ia.device.limits();
    *a = DAT_IA_ATTR::default();
    copy_name(&mut a.adapter_name, ia.device.name());
    copy_name(&mut a.vendor_name, &format!("vendor 0x{:x} part 0x{:x}", d.vendor_id, d.vendor_part_id));
    a.hardware_version_major = d.hw_ver;
    let mut fw_parts = d.fw_ver.split('.').map(|s| s.parse::<u32>().unwrap_or(0));
    a.firmware_version_major = fw_parts.next().unwrap_or(0);
    a.firmware_version_minor = fw_parts.next().unwrap_or(0);
    a.ia_address_ptr = ia.device.ia_address();
    a.max_eps = clamp(d.max_qp as i64);
    a.max_dto_per_ep = clamp(d.max_qp_wr as i64);
    a.max_rdma_read_per_ep_in = clamp(d.max_qp_rd_atom as i64);
    a.max_rdma_read_per_ep_out = clamp(d.max_qp_init_rd_atom as i64);
    a.max_evds = clamp(d.max_cq as i64);
    a.max_evd_qlen = clamp(d.max_cqe as i64);
    a.max_iov_segments_per_dto = clamp(d.max_sge as i64);
    a.max_lmrs = clamp(d.max_mr as i64);
    a.max_lmr_block_size = d.max_mr_size.min(u32::MAX as u64) as DAT_SEG_LENGTH;
    a.max_lmr_virtual_address = u64::MAX;
    a.max_pzs = clamp(d.max_pd as i64);
    a.max_message_size = d.max_msg_size as DAT_SEG_LENGTH;
    a.max_rdma_size = d.max_msg_size as DAT_SEG_LENGTH;
    a.max_rmrs = clamp(d.max_mw as i64);
    a.max_rmr_target_address = u64::MAX;
    a.max_srqs = clamp(d.max_srq as i64);
    a.max_ep_per_srq = a.max_eps;
    a.max_recv_per_srq = clamp(d.max_srq_wr as i64);
    a.max_iov_segments_per_rdma_read = clamp(d.max_sge_rd.max(1) as i64);
    a.max_iov_segments_per_rdma_write = clamp(d.max_sge as i64);
    a.max_rdma_read_in = clamp(d.max_res_rd_atom as i64);
    a.max_rdma_read_out = clamp(d.max_qp_init_rd_atom as i64);
    a.max_rdma_read_per_ep_in_guaranteed = DAT_TRUE as _;
    a.max_rdma_read_per_ep_out_guaranteed = DAT_TRUE as _;
    a.zb_supported = DAT_FALSE as _;
    a.extension_supported = DAT_EXTENSION_IB;
    a.extension_version = DAT_IB_EXTENSION_VERSION as DAT_COUNT;
}

fn fill_provider_attr<T: Provider>(ia: &Ia<T>, a: &mut DAT_PROVIDER_ATTR) {
    *a = DAT_PROVIDER_ATTR::default();
    copy_name(&mut a.provider_name, T::NAME);
    a.provider_version_major = 2;
    a.provider_version_minor = 0;
    a.dapl_version_major = DAT_VERSION_MAJOR;
    a.dapl_version_minor = DAT_VERSION_MINOR;
    a.lmr_mem_types_supported = DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR;
    a.iov_ownership_on_return = DAT_IOV_CONSUMER;
    a.dat_qos_supported = DAT_QOS_BEST_EFFORT;
    a.completion_flags_supported = DAT_COMPLETION_DEFAULT_FLAG;
    a.is_thread_safe = DAT_FALSE as _;
    a.max_private_data_size = 0;
    a.supports_multipath = DAT_FALSE as _;
    a.ep_creator = DAT_PSP_CREATES_EP_NEVER;
    a.pz_support = DAT_PZ_UNIQUE;
    a.optimal_buffer_alignment = 64;
    a.srq_supported = DAT_TRUE as _;
    a.lmr_sync_req = DAT_FALSE as _;
    a.dto_async_return_guaranteed = DAT_FALSE as _;
    a.rdma_write_for_rdma_read_req = DAT_FALSE as _;
    a.rdma_read_lmr_rmr_context_exposure = DAT_FALSE as _;
    a.rmr_scope_supported = DAT_RMR_SCOPE_EP;
    a.is_signal_safe = DAT_FALSE as _;
    a.ha_supported = DAT_FALSE as _;
    a.num_provider_specific_attr = ia.named.len() as DAT_COUNT;
    a.provider_specific_attr = ia.named.as_ptr() as *mut DAT_NAMED_ATTR;
}

pub unsafe extern "C" fn query<T: Provider>(
    h: DAT_IA_HANDLE,
    async_evd: *mut DAT_EVD_HANDLE,
    ia_mask: DAT_IA_ATTR_MASK,
    ia_attr: *mut DAT_IA_ATTR,
    prov_mask: DAT_PROVIDER_ATTR_MASK,
    prov_attr: *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN {
    guard("dat_ia_query", || {
        let ia = match handle::get::<Ia<T>>(h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        if ia_mask != 0 && ia_attr.is_null() {
            return invalid_arg(DAT_INVALID_ARG4);
        }
        if prov_mask != 0 && prov_attr.is_null() {
            return invalid_arg(DAT_INVALID_ARG6);
        }
        // SAFETY: each out-pointer is null-checked; they are the consumer's.
        unsafe {
            if let Some(out) = async_evd.as_mut() {
                *out = ia.async_evd();
            }
            if let Some(a) = ia_attr.as_mut() {
                fill_ia_attr::<T>(ia, a);
            }
            if let Some(a) = prov_attr.as_mut() {
                fill_provider_attr::<T>(ia, a);
            }
        }
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn close<T: Provider>(h: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    guard("dat_ia_close", || {
        let ia = match handle::get::<Ia<T>>(h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        if flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        let in_use = handle::children::<T>(ia.id(), None).iter().any(|c| !ia.is_async_evd(c.handle));
        if flags == DAT_CLOSE_GRACEFUL_FLAG && in_use {
            return invalid_state(DAT_INVALID_STATE_IA_IN_USE);
        }
        // The CM thread stops first (joined), then the children go, listed
        // after it stopped (it may have made a CR just before). It posts
        // async events to the async EVD without the CM lock (an EP's verbs
        // QP is destroyed under that lock, and the destroy waits for the
        // thread to acknowledge the QP's async events), so an EVD freed
        // while it ran could be written after its eventfd was closed
        // (ThreadSanitizer, conformance cq_overflow: an 8-byte write to a
        // closed, perhaps reused, descriptor).
        drop(ia.cm.lock().unwrap_or_else(|e| e.into_inner()).take());
        let mut children = handle::children::<T>(ia.id(), None);
        children.sort_by_key(|c| std::cmp::Reverse(c.rank));
        for c in children {
            (c.destroy)(c.handle);
        }
        log::debug!("IA '{}' on {} closed", ia.name, ia.device.name());
        handle::remove::<Ia<T>>(h);
        DAT_SUCCESS
    })
}
