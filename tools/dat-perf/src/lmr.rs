//! Cost of registering memory: dat_lmr_create + dat_lmr_free through the
//! registry, and ibv_reg_mr + ibv_dereg_mr on the device directly.

use crate::dat::Dat;
use crate::mem::{Buffer, Lmr};
use crate::progress::Progress;
use rdma_core_sys as ibv;
use std::ffi::CStr;
use std::time::Instant;

/// Registrations per size: `iters`, but no more than 1 GiB in all (pinning
/// 64 MiB a thousand times is minutes under emulation), and at least 5.
pub fn reg_iters(size: u64, iters: u64) -> u64 {
    iters.min(((1u64 << 30) / size).max(5))
}

/// Untimed registrations first: a tenth of the timed ones, at most `warmup`.
pub fn reg_warmup(n: u64, warmup: u64) -> u64 {
    warmup.min((n / 10).max(1))
}

/// Times `n` create+free pairs after `w` untimed ones; microseconds each.
fn time_pairs(n: u64, w: u64, progress: &mut Progress, mut pair: impl FnMut() -> Result<(), String>) -> Result<Vec<f64>, String> {
    for _ in 0..w {
        pair()?;
    }
    let mut samples = Vec::with_capacity(n as usize);
    for i in 0..n {
        let t0 = Instant::now();
        pair()?;
        samples.push(t0.elapsed().as_secs_f64() * 1e6);
        progress.tick(i + 1);
    }
    Ok(samples)
}

/// One result per size: (size, iterations, samples in µs).
pub type RegResult = (u64, u64, Vec<f64>);

pub fn dat_reg(dat: &Dat, ia_name: &str, sizes: &[u64], iters: u64, warmup: u64, show: bool) -> Result<Vec<RegResult>, String> {
    let ia = dat.ia_open(ia_name)?;
    let res = (|| {
        let pz = dat.pz(ia)?;
        let mut out = Vec::new();
        for &size in sizes {
            let buf = Buffer::new(size as usize)?;
            buf.touch();
            let n = reg_iters(size, iters);
            let mut progress = Progress::new(format!("lmr_reg {size} B"), n, show);
            let samples = time_pairs(n, reg_warmup(n, warmup), &mut progress, || {
                Lmr::create(dat, ia, pz, buf.ptr(), size as usize)?.free(dat)
            });
            match samples {
                Ok(s) => out.push((size, n, s)),
                Err(e) => {
                    // SAFETY: the PZ we made; nothing is registered in it any more.
                    unsafe { (dat.pz_free)(pz) };
                    return Err(e);
                }
            }
        }
        // SAFETY: the PZ we made, empty again.
        let r = unsafe { (dat.pz_free)(pz) };
        dat.check(r, "dat_pz_free")?;
        Ok(out)
    })();
    // SAFETY: the IA we opened.
    unsafe { (dat.ia_close)(ia, dat_abi::DAT_CLOSE_ABRUPT_FLAG) };
    res
}

/// The device and a PD, closed on drop.
struct Device {
    ctx: *mut ibv::ibv_context,
    pd: *mut ibv::ibv_pd,
}

impl Device {
    fn open(name: &str) -> Result<Device, String> {
        let mut num = 0;
        // SAFETY: returns a NULL-terminated array we free below.
        let list = unsafe { ibv::ibv_get_device_list(&mut num) };
        if list.is_null() {
            return Err(format!("ibv_get_device_list failed: {}", std::io::Error::last_os_error()));
        }
        let mut names = Vec::new();
        let mut ctx = std::ptr::null_mut();
        for i in 0..num.max(0) as usize {
            // SAFETY: i < num entries of the list.
            let dev = unsafe { *list.add(i) };
            // SAFETY: a device from the list has a NUL-terminated name.
            let n = unsafe { CStr::from_ptr(ibv::ibv_get_device_name(dev)) }.to_string_lossy().into_owned();
            if n == name {
                // SAFETY: a device from the live list.
                ctx = unsafe { ibv::ibv_open_device(dev) };
            }
            names.push(n);
        }
        // SAFETY: the list from ibv_get_device_list; an opened context stays valid.
        unsafe { ibv::ibv_free_device_list(list) };
        if ctx.is_null() {
            return Err(if names.contains(&name.to_owned()) {
                format!("ibv_open_device({name}) failed: {}", std::io::Error::last_os_error())
            } else {
                format!("no verbs device {name}; present: {}", if names.is_empty() { "none".into() } else { names.join(", ") })
            });
        }
        // SAFETY: an open context.
        let pd = unsafe { ibv::ibv_alloc_pd(ctx) };
        if pd.is_null() {
            // SAFETY: the context we opened.
            unsafe { ibv::ibv_close_device(ctx) };
            return Err(format!("ibv_alloc_pd on {name} failed"));
        }
        Ok(Device { ctx, pd })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: our PD (no MRs left) and context.
        unsafe {
            ibv::ibv_dealloc_pd(self.pd);
            ibv::ibv_close_device(self.ctx);
        }
    }
}

pub fn verbs_reg(dev: &str, sizes: &[u64], iters: u64, warmup: u64, show: bool) -> Result<Vec<RegResult>, String> {
    let d = Device::open(dev)?;
    // What DAT_MEM_PRIV_ALL_FLAG asks for.
    let access = (ibv::IBV_ACCESS_LOCAL_WRITE | ibv::IBV_ACCESS_REMOTE_WRITE | ibv::IBV_ACCESS_REMOTE_READ) as i32;
    let mut out = Vec::new();
    for &size in sizes {
        let buf = Buffer::new(size as usize)?;
        buf.touch();
        let n = reg_iters(size, iters);
        let mut progress = Progress::new(format!("ibv_reg {size} B"), n, show);
        let samples = time_pairs(n, reg_warmup(n, warmup), &mut progress, || {
            // SAFETY: our PD and buffer; the MR is deregistered at once.
            let mr = unsafe { ibv::ibv_reg_mr(d.pd, buf.ptr() as *mut _, size as usize, access) };
            if mr.is_null() {
                return Err(format!("ibv_reg_mr({size} bytes) failed: {}", std::io::Error::last_os_error()));
            }
            // SAFETY: the MR just registered.
            let r = unsafe { ibv::ibv_dereg_mr(mr) };
            if r != 0 {
                return Err(format!("ibv_dereg_mr failed: {}", std::io::Error::from_raw_os_error(r)));
            }
            Ok(())
        })?;
        out.push((size, n, samples));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iteration_caps() {
        assert_eq!(reg_iters(4096, 1000), 1000);
        assert_eq!(reg_iters(64 << 20, 1000), 16);
        assert_eq!(reg_iters(1 << 30, 1000), 5);
        assert_eq!(reg_iters(1 << 30, 2), 2);
        assert_eq!(reg_warmup(1000, 100), 100);
        assert_eq!(reg_warmup(16, 100), 1);
        assert_eq!(reg_warmup(16, 0), 0);
    }
}
