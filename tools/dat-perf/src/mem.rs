//! Page-aligned buffers and their registration as LMRs.

use crate::dat::Dat;
use dat_abi::*;
use std::alloc::Layout;

/// A zeroed, page-aligned buffer the peer may write into at any time: all
/// access after registration goes through volatile reads and writes.
pub struct Buffer {
    ptr: *mut u8,
    layout: Layout,
}

impl Buffer {
    pub fn new(len: usize) -> Result<Buffer, String> {
        let layout = Layout::from_size_align(len.max(1), 4096).map_err(|e| format!("buffer of {len} bytes: {e}"))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(format!("cannot allocate a buffer of {len} bytes"));
        }
        Ok(Buffer { ptr, layout })
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Volatile, because the adapter writes behind the compiler's back.
    pub fn get(&self, i: usize) -> u8 {
        assert!(i < self.len());
        // SAFETY: in bounds of our allocation.
        unsafe { std::ptr::read_volatile(self.ptr.add(i)) }
    }

    pub fn set(&self, i: usize, v: u8) {
        assert!(i < self.len());
        // SAFETY: in bounds of our allocation.
        unsafe { std::ptr::write_volatile(self.ptr.add(i), v) }
    }

    pub fn read(&self, off: usize, out: &mut [u8]) {
        assert!(off + out.len() <= self.len());
        for (i, b) in out.iter_mut().enumerate() {
            *b = self.get(off + i);
        }
    }

    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len());
        for (i, b) in data.iter().enumerate() {
            self.set(off + i, *b);
        }
    }

    /// Touches every page so registration times do not include first-touch faults.
    pub fn touch(&self) {
        for i in (0..self.len()).step_by(4096) {
            self.set(i, 0);
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// A registered region: local and remote keys for its whole extent.
pub struct Lmr {
    pub handle: DAT_LMR_HANDLE,
    pub lmr_context: DAT_LMR_CONTEXT,
    pub rmr_context: DAT_RMR_CONTEXT,
}

impl Lmr {
    /// dat_lmr_create of [ptr, ptr+len) with every privilege, VA-based.
    pub fn create(dat: &Dat, ia: DAT_IA_HANDLE, pz: DAT_PZ_HANDLE, ptr: *mut u8, len: usize) -> Result<Lmr, String> {
        let mut lmr = Lmr { handle: std::ptr::null_mut(), lmr_context: 0, rmr_context: 0 };
        let mut reg_len: DAT_VLEN = 0;
        let mut reg_addr: DAT_VADDR = 0;
        let region = DAT_REGION_DESCRIPTION { for_va: ptr as DAT_PVOID };
        // SAFETY: the region is memory we own for at least as long as the LMR; out pointers are ours.
        let r = unsafe {
            (dat.lmr_create)(
                ia,
                DAT_MEM_TYPE_VIRTUAL,
                region,
                len as DAT_VLEN,
                pz,
                DAT_MEM_PRIV_ALL_FLAG,
                DAT_VA_TYPE_VA,
                &mut lmr.handle,
                &mut lmr.lmr_context,
                &mut lmr.rmr_context,
                &mut reg_len,
                &mut reg_addr,
            )
        };
        dat.check(r, &format!("dat_lmr_create({len} bytes)"))?;
        Ok(lmr)
    }

    pub fn free(&mut self, dat: &Dat) -> Result<(), String> {
        if self.handle.is_null() {
            return Ok(());
        }
        // SAFETY: an LMR we created and have not freed.
        let r = unsafe { (dat.lmr_free)(self.handle) };
        self.handle = std::ptr::null_mut();
        dat.check(r, "dat_lmr_free")
    }
}
