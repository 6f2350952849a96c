//! The IB extension's counter calls: dat_ib_query_counters and
//! dat_ib_print_counters over an IA's, EP's or EVD's array, and
//! dat_ib_start_counter/dat_ib_stop_counter over the device's groups.

use crate::backend::DeviceOps;
use crate::counters::{EP_NAMES, EVD_NAMES, IA_NAMES, read, selection};
use crate::ep::Ep;
use crate::evd::Evd;
use crate::handle;
use crate::ia::Ia;
use crate::state::Provider;
use crate::util::cstring;
use dat_abi::status::{guard, invalid_arg, invalid_handle, invalid_state};
use dat_abi::*;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::AtomicU64;

/// A kind's counters and their names.
type Array = (&'static [AtomicU64], &'static [(&'static str, u32)]);

/// The counter array behind `h` and its names: IA, EP or EVD.
fn array_of<T: Provider>(h: DAT_HANDLE) -> Result<Array, DAT_RETURN> {
    let bad = invalid_handle(DAT_INVALID_HANDLE1);
    match handle::kind_of::<T>(h) {
        Some(DAT_HANDLE_TYPE_IA) => handle::get::<Ia<T>>(h).map(|o| (o.counters.all(), IA_NAMES)).map_err(|_| bad),
        Some(DAT_HANDLE_TYPE_EP) => handle::get::<Ep<T>>(h).map(|o| (o.counters.all(), EP_NAMES)).map_err(|_| bad),
        Some(DAT_HANDLE_TYPE_EVD) => handle::get::<Evd<T>>(h).map(|o| (o.counters.all(), EVD_NAMES)).map_err(|_| bad),
        _ => Err(bad),
    }
}

/// The counters `cntr` selects on handle `h`, with their names.
fn selected<T: Provider>(h: DAT_HANDLE, cntr: c_int) -> Result<(Array, std::ops::Range<usize>), DAT_RETURN> {
    let array = array_of::<T>(h)?;
    let range = selection(cntr, array.0.len())?;
    Ok((array, range))
}

/// dat_ib_query_counters. As in DAPL, counter i lands in `out[i]` whether
/// one or all are asked for, so `out` is an array of the kind's length.
///
/// # Safety
/// `out` null or the consumer's array of at least `cntr + 1` counts (all of
/// them for `*_ALL_COUNTERS`).
pub unsafe fn query_counters<T: Provider>(h: DAT_HANDLE, cntr: c_int, out: *mut DAT_UINT64, reset: c_int) -> DAT_RETURN {
    guard("dat_ib_query_counters", || {
        let ((array, _), range) = match selected::<T>(h, cntr) {
            Ok(s) => s,
            Err(e) => return e,
        };
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG4);
        }
        for i in range {
            // SAFETY: the consumer's array covers index i (see above).
            unsafe { *out.add(i) = read(&array[i], reset != 0) };
        }
        DAT_SUCCESS
    })
}

unsafe extern "C" {
    /// Writes through C's stdout (csrc/extension_args.c), so the lines keep
    /// their place among the consumer's own buffered printf output.
    fn daplibv_print_text(text: *const c_char);
}

/// dat_ib_print_counters: one line per selected counter on stdout.
///
/// # Safety
/// Any handle value; it is validated.
pub unsafe fn print_counters<T: Provider>(h: DAT_HANDLE, cntr: c_int, reset: c_int) -> DAT_RETURN {
    guard("dat_ib_print_counters", || {
        let ((array, names), range) = match selected::<T>(h, cntr) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let pid = std::process::id();
        let mut text = String::new();
        for i in range {
            text.push_str(&format!("{} {pid} {h:p}: {} = {}\n", T::NAME, names[i].0, read(&array[i], reset != 0)));
        }
        let text = cstring(&text);
        // SAFETY: a NUL-terminated string that outlives the call.
        unsafe { daplibv_print_text(text.as_ptr()) };
        DAT_SUCCESS
    })
}

/// The IA and device counter group a start or stop names.
fn ia_group<T: Provider>(h: DAT_HANDLE, t: c_int) -> Result<(&'static Ia<T>, DAT_IA_COUNTER_TYPE), DAT_RETURN> {
    let ia = handle::get::<Ia<T>>(h).map_err(|_| invalid_handle(DAT_INVALID_HANDLE1))?;
    match u32::try_from(t) {
        Ok(g @ (DCNT_IA_CM | DCNT_IA_LNK | DCNT_IA_DIAG)) => Ok((ia, g)),
        _ => Err(invalid_arg(DAT_INVALID_ARG3)),
    }
}

/// dat_ib_start_counter: remembers the device's counts of one group
/// (DCNT_IA_CM, _LNK, _DIAG) so that the stop can report what moved since.
///
/// # Safety
/// Any handle value; it is validated.
pub unsafe fn start_counter<T: Provider>(h: DAT_HANDLE, t: c_int) -> DAT_RETURN {
    guard("dat_ib_start_counter", || {
        let (ia, g) = match ia_group::<T>(h, t) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let now = ia.device.group_counters(g);
        let mut started = ia.baseline.lock().unwrap_or_else(|e| e.into_inner());
        started.retain(|(k, _)| *k != g);
        started.push((g, now));
        DAT_SUCCESS
    })
}

/// dat_ib_stop_counter: sets the group's IA counters to how far the device's
/// counts moved since the start; DAT_INVALID_STATE if it was not started.
///
/// # Safety
/// Any handle value; it is validated.
pub unsafe fn stop_counter<T: Provider>(h: DAT_HANDLE, t: c_int) -> DAT_RETURN {
    guard("dat_ib_stop_counter", || {
        let (ia, g) = match ia_group::<T>(h, t) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let start = {
            let mut started = ia.baseline.lock().unwrap_or_else(|e| e.into_inner());
            let Some(pos) = started.iter().position(|(k, _)| *k == g) else { return invalid_state(0) };
            started.remove(pos).1
        };
        for (i, now) in ia.device.group_counters(g) {
            let before = start.iter().find(|(j, _)| *j == i).map_or(0, |(_, v)| *v);
            ia.counters.set(i, now.saturating_sub(before));
        }
        DAT_SUCCESS
    })
}

