//! Local memory regions: registered memory, by virtual address or by
//! sharing another LMR's region.

use crate::state::Provider;
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::pz::Pz;
use crate::backend::{MrOps, PdOps};
use dat_abi::status::{error, guard, invalid_arg, invalid_handle, no_resources};
use dat_abi::*;
use std::sync::atomic::Ordering;

pub struct Lmr<T: Provider> {
    pz: &'static Pz<T>,
    pz_handle: usize,
    mem_type: DAT_MEM_TYPE,
    region: DAT_REGION_DESCRIPTION,
    addr: u64,
    len: u64,
    privs: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    pub mr: T::Mr,
    /// RMRs bound into this region; it cannot be freed while any are.
    pub windows: std::sync::atomic::AtomicUsize,
}

// DAT_REGION_DESCRIPTION is a union of pointers kept only to hand back in queries.
unsafe impl<T: Provider> Send for Lmr<T> {}
unsafe impl<T: Provider> Sync for Lmr<T> {}

/// Abrupt IA close frees LMRs before the PZs they hold.
pub const RANK: u8 = 5;


impl<T: Provider> Object for Lmr<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_LMR;
    const INVALID: u32 = DAT_INVALID_HANDLE_LMR;
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn create<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    mem_type: DAT_MEM_TYPE,
    region: DAT_REGION_DESCRIPTION,
    len: DAT_VLEN,
    pz_h: DAT_PZ_HANDLE,
    privs: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    lmr_out: *mut DAT_LMR_HANDLE,
    lmr_ctx: *mut DAT_LMR_CONTEXT,
    rmr_ctx: *mut DAT_RMR_CONTEXT,
    reg_len: *mut DAT_VLEN,
    reg_addr: *mut DAT_VADDR,
) -> DAT_RETURN {
    guard("dat_lmr_create", || {
        let ia = match handle::get::<Ia<T>>(ia_h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        let pz = match handle::get::<Pz<T>>(pz_h) {
            Ok(pz) => pz,
            Err(e) => return e,
        };
        if !std::ptr::eq(pz.ia, ia) {
            return invalid_handle(DAT_INVALID_HANDLE_PZ);
        }
        if lmr_out.is_null() {
            return invalid_arg(DAT_INVALID_ARG8);
        }
        if va_type != DAT_VA_TYPE_VA {
            // Zero-based addressing is not offered (ia_query says zb_supported = false).
            return invalid_arg(DAT_INVALID_ARG7);
        }
        let addr: *mut libc::c_void = match mem_type {
            // SAFETY: the union member the memory type names.
            DAT_MEM_TYPE_VIRTUAL => unsafe { region.for_va },
            DAT_MEM_TYPE_LMR => {
                // SAFETY: as above.
                let other = unsafe { region.for_lmr_handle };
                match handle::get::<Lmr<T>>(other) {
                    Ok(o) if len <= o.len => o.addr as *mut libc::c_void,
                    Ok(_) => return error(DAT_LENGTH_ERROR, 0),
                    Err(_) => return invalid_arg(DAT_INVALID_ARG3),
                }
            }
            _ => return error(DAT_MODEL_NOT_SUPPORTED, 0),
        };
        if len == 0 || addr.is_null() {
            return invalid_arg(if addr.is_null() { DAT_INVALID_ARG3 } else { DAT_INVALID_ARG4 });
        }
        let registered = pz.pd.register(addr, len as usize, privs);
        let mr = match registered {
            Ok(mr) => mr,
            Err(e) => {
                log::warn!("registering {len} bytes at {addr:p}: {e}");
                return match e.raw_os_error() {
                    Some(libc::EFAULT) | Some(libc::EINVAL) => error(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3),
                    _ => no_resources(DAT_RESOURCE_MEMORY_REGION),
                };
            }
        };
        let (lkey, rkey) = (mr.lkey(), mr.rkey());
        pz.users.fetch_add(1, Ordering::AcqRel);
        let h = handle::insert(Lmr {
            pz,
            pz_handle: pz_h as usize,
            mem_type,
            region,
            addr: addr as u64,
            len,
            privs,
            va_type,
            mr,
            windows: std::sync::atomic::AtomicUsize::new(0),
        }, ia.table());
        ia.adopt::<Lmr<T>>(h, RANK, destroy::<T>);
        ia.counters.add(DCNT_IA_MEM_ALLOC, 1);
        ia.counters.add(DCNT_IA_MEM_ALLOC_DATA, len);
        // SAFETY: each out-pointer is the consumer's; optional ones null-checked.
        unsafe {
            *lmr_out = h;
            if let Some(p) = lmr_ctx.as_mut() {
                *p = lkey;
            }
            if let Some(p) = rmr_ctx.as_mut() {
                *p = rkey;
            }
            if let Some(p) = reg_len.as_mut() {
                *p = len;
            }
            if let Some(p) = reg_addr.as_mut() {
                *p = addr as u64;
            }
        }
        DAT_SUCCESS
    })
}

impl<T: Provider> Lmr<T> {
    /// True when [addr, addr+len) lies inside this region.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr && addr.checked_add(len).is_some_and(|end| end <= self.addr + self.len)
    }
}

fn destroy<T: Provider>(h: DAT_HANDLE) {
    if let Ok(lmr) = handle::get::<Lmr<T>>(h) {
        let pz = lmr.pz;
        pz.ia.disown::<Lmr<T>>(h);
        if handle::remove::<Lmr<T>>(h) {
            pz.users.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_LMR_HANDLE, _mask: DAT_LMR_PARAM_MASK, out: *mut DAT_LMR_PARAM) -> DAT_RETURN {
    guard("dat_lmr_query", || {
        let lmr = match handle::get::<Lmr<T>>(h) {
            Ok(l) => l,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        p.ia_handle = lmr.pz.ia_handle as DAT_IA_HANDLE;
        p.mem_type = lmr.mem_type;
        p.region_desc = lmr.region;
        p.length = lmr.len;
        p.pz_handle = lmr.pz_handle as DAT_PZ_HANDLE;
        p.mem_priv = lmr.privs;
        p.va_type = lmr.va_type;
        p.lmr_context = lmr.mr.lkey();
        p.rmr_context = lmr.mr.rkey();
        p.registered_size = lmr.len;
        p.registered_address = lmr.addr;
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_LMR_HANDLE) -> DAT_RETURN {
    guard("dat_lmr_free", || {
        match handle::get::<Lmr<T>>(h) {
            Err(e) => e,
            Ok(l) if l.windows.load(Ordering::Acquire) != 0 => {
                dat_abi::status::invalid_state(DAT_INVALID_STATE_LMR_IN_USE)
            }
            Ok(_) => {
                destroy::<T>(h);
                DAT_SUCCESS
            }
        }
    })
}

/// The memory on the hosts we run on is coherent with the adapter, so there
/// is nothing to flush; the arguments are still checked.
fn sync<T: Provider>(ia_h: DAT_IA_HANDLE, iov: *const DAT_LMR_TRIPLET, n: DAT_VLEN) -> DAT_RETURN {
    if let Err(e) = handle::get::<Ia<T>>(ia_h) {
        return e;
    }
    if iov.is_null() && n != 0 {
        return invalid_arg(DAT_INVALID_ARG2);
    }
    DAT_SUCCESS
}

pub unsafe extern "C" fn sync_rdma_read<T: Provider>(ia: DAT_IA_HANDLE, iov: *const DAT_LMR_TRIPLET, n: DAT_VLEN) -> DAT_RETURN {
    guard("dat_lmr_sync_rdma_read", || sync::<T>(ia, iov, n))
}

pub unsafe extern "C" fn sync_rdma_write<T: Provider>(ia: DAT_IA_HANDLE, iov: *const DAT_LMR_TRIPLET, n: DAT_VLEN) -> DAT_RETURN {
    guard("dat_lmr_sync_rdma_write", || sync::<T>(ia, iov, n))
}
