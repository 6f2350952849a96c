//! The dynamic registry: provider tables that libraries registered through
//! `dat_registry_add_provider`, and the set of known tables that every call
//! dispatch checks a handle's first word against.

use crate::status::error;
use dat_abi::*;
use std::ffi::CStr;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// How many distinct provider tables one process may hold at once.
const MAX_TABLES: usize = 64;

/// Lock-free membership test for dispatch: the fast path reads these slots
/// and never takes a lock. A table is put in its home slot (`home`) when that
/// is free, so the usual check is one load and one compare; a table whose
/// home was taken sits in the first free slot and is found by the scan.
///
/// A free slot holds its own `vacant` mark, a small address whose home is
/// another slot: so no value ever finds its slot's mark at home, and a
/// match at home is always a registered table, with no other test. Every
/// slot can be a table's home. (One reserved slot, holding NULL, was the
/// home of one table address in 64: a process whose provider's table
/// landed there, as ASLR put it, took the slow way on every call, about
/// 100 instructions more.)
static KNOWN: [AtomicPtr<DAT_PROVIDER>; MAX_TABLES] = {
    let mut k = [const { AtomicPtr::new(ptr::null_mut()) }; MAX_TABLES];
    let mut i = 0;
    while i < MAX_TABLES {
        k[i] = AtomicPtr::new(vacant(i));
        i += 1;
    }
    k
};
/// Below this no table lives (nothing is mapped that low): the marks.
const MARKS_BELOW: usize = 4096;

/// Slot `i`'s mark when free: the first 8-aligned small address whose home
/// is not `i`.
const fn vacant(i: usize) -> *mut DAT_PROVIDER {
    let mut a = 8;
    while home_of(a) == i {
        a += 8;
    }
    assert!(a < MARKS_BELOW);
    ptr::without_provenance_mut(a)
}
/// Slots at or past this index have never been used, so scans stop here.
static KNOWN_END: AtomicUsize = AtomicUsize::new(0);

/// The slot a table tries first: a multiplicative hash of its address.
#[inline(always)]
fn home(p: *const DAT_PROVIDER) -> usize {
    home_of(p as usize)
}

const fn home_of(address: usize) -> usize {
    const _: () = assert!(MAX_TABLES == 64);
    (address >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58
}

struct Registered {
    key: Key,
    table: *const DAT_PROVIDER,
}

// The table pointer is only compared and handed back, never dereferenced here.
unsafe impl Send for Registered {}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Key {
    pub ia_name: Vec<u8>,
    pub major: u32,
    pub minor: u32,
    pub thread_safe: bool,
}

impl Key {
    pub fn from_info(info: &DAT_PROVIDER_INFO) -> Key {
        // SAFETY: ia_name is a fixed array; the last byte is forced to NUL-stop the scan.
        let bytes: &[u8; DAT_NAME_MAX_LENGTH as usize] =
            unsafe { &*(info.ia_name.as_ptr() as *const [u8; DAT_NAME_MAX_LENGTH as usize]) };
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Key {
            ia_name: bytes[..len].to_vec(),
            major: info.dapl_version_major,
            minor: info.dapl_version_minor,
            thread_safe: info.is_thread_safe != 0,
        }
    }
}

static TABLE: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

fn table() -> std::sync::MutexGuard<'static, Vec<Registered>> {
    // A panic while holding the lock cannot leave the Vec half-updated.
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn add(provider: *const DAT_PROVIDER, info: &DAT_PROVIDER_INFO) -> DAT_RETURN {
    let key = Key::from_info(info);
    let mut regs = table();
    if regs.iter().any(|r| r.key == key) {
        return error(DAT_PROVIDER_ALREADY_REGISTERED, 0);
    }
    if !KNOWN.iter().any(|s| ptr::eq(s.load(Ordering::Acquire), provider)) {
        let take = |i: usize| {
            KNOWN[i].compare_exchange(vacant(i), provider as *mut _, Ordering::AcqRel, Ordering::Acquire).is_ok()
        };
        let slot = if take(home(provider)) { Some(home(provider)) } else { (0..MAX_TABLES).find(|&i| take(i)) };
        let Some(slot) = slot else {
            log::error!("more than {MAX_TABLES} provider tables registered; refusing {:?}",
                String::from_utf8_lossy(&key.ia_name));
            return error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        };
        KNOWN_END.fetch_max(slot + 1, Ordering::AcqRel);
    }
    log::debug!("provider registered: IA {}", String::from_utf8_lossy(&key.ia_name));
    regs.push(Registered { key, table: provider });
    DAT_SUCCESS
}

pub fn remove(provider: *const DAT_PROVIDER, info: &DAT_PROVIDER_INFO) -> DAT_RETURN {
    let key = Key::from_info(info);
    let mut regs = table();
    let Some(pos) = regs.iter().position(|r| r.key == key && ptr::eq(r.table, provider)) else {
        return error(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    };
    regs.remove(pos);
    if !regs.iter().any(|r| ptr::eq(r.table, provider)) {
        for (i, slot) in KNOWN.iter().enumerate() {
            let _ = slot.compare_exchange(provider as *mut _, vacant(i), Ordering::AcqRel, Ordering::Acquire);
        }
    }
    log::debug!("provider removed: IA {}", String::from_utf8_lossy(&key.ia_name));
    DAT_SUCCESS
}

pub fn lookup(key: &Key) -> Option<*const DAT_PROVIDER> {
    table().iter().find(|r| &r.key == key).map(|r| r.table)
}

/// True when `p` is a provider table some library registered and has not removed.
#[inline]
pub fn is_known(p: *const DAT_PROVIDER) -> bool {
    // Free slots hold marks below MARKS_BELOW: none is a table.
    if (p as usize) < MARKS_BELOW {
        return false;
    }
    ptr::eq(KNOWN[home(p)].load(Ordering::Acquire), p) || scan_known(p)
}

/// `is_known`'s first test alone: the table is in its home slot (the
/// usual case). False says nothing; `is_known` then decides.
#[inline(always)]
pub fn is_known_at_home(p: *const DAT_PROVIDER) -> bool {
    ptr::eq(KNOWN[home(p)].load(Ordering::Acquire), p)
}

/// The rest of `is_known`: a table not in its home slot, or none at all.
#[cold]
#[inline(never)]
fn scan_known(p: *const DAT_PROVIDER) -> bool {
    let end = KNOWN_END.load(Ordering::Acquire).min(MAX_TABLES);
    KNOWN[..end].iter().any(|s| ptr::eq(s.load(Ordering::Acquire), p))
}

/// The provider table a non-IA handle belongs to, if it has one we know.
///
/// Every DAT object's first word is its provider table pointer; a handle
/// whose first word is not a table we know is refused before anything is
/// called through it.
#[inline]
pub fn table_of(handle: DAT_HANDLE) -> Option<&'static DAT_PROVIDER> {
    if handle.is_null() || (handle as usize) % std::mem::align_of::<usize>() != 0 {
        return None;
    }
    // SAFETY: the DAT contract makes a handle point at an object whose first
    // word is its provider; this is the same read DAT_HANDLE_TO_PROVIDER does.
    let first = unsafe { ptr::read_volatile(handle as *const *const DAT_PROVIDER) };
    // SAFETY: known tables are static data of loaded providers.
    is_known(first).then(|| unsafe { &*first })
}

pub fn name_of(info: &DAT_PROVIDER_INFO) -> String {
    // SAFETY: the array is NUL-terminated by every writer we know of; if not,
    // from_bytes_until_nul fails and we print nothing wrong.
    let bytes = unsafe {
        std::slice::from_raw_parts(info.ia_name.as_ptr() as *const u8, info.ia_name.len())
    };
    CStr::from_bytes_until_nul(bytes).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_value_finds_a_free_slots_mark_at_home_and_every_slot_is_a_home() {
        let mut homes = [false; MAX_TABLES];
        for i in 0..MAX_TABLES {
            let m = vacant(i) as usize;
            assert!(m != 0 && m < MARKS_BELOW && m % 8 == 0);
            assert_ne!(home_of(m), i, "slot {i}'s mark is at home there");
            assert!(!is_known(m as *const DAT_PROVIDER));
        }
        // Table addresses land in every slot, the one NULL's mark held for
        // good before included.
        let words = vec![0u64; 64 * 1024];
        for w in &words {
            homes[home_of(w as *const u64 as usize)] = true;
        }
        assert!(homes.iter().all(|&h| h));
        assert!(!is_known_at_home(ptr::null()));
        // One whose home was that slot is registered there, and found at home.
        let old = home_of(8);
        let t = words.iter().map(|w| w as *const u64 as *const DAT_PROVIDER).find(|&t| home(t) == old).unwrap();
        // SAFETY: all-zero is a valid DAT_PROVIDER_INFO (a C struct of numbers).
        let mut info: DAT_PROVIDER_INFO = unsafe { std::mem::zeroed() };
        for (d, s) in info.ia_name.iter_mut().zip(b"providers-unit-test") {
            *d = *s as _;
        }
        assert_eq!(add(t, &info), DAT_SUCCESS);
        assert!(is_known_at_home(t), "a table whose home is that slot is not found at home");
        assert_eq!(remove(t, &info), DAT_SUCCESS);
        assert!(!is_known(t));
    }
}
