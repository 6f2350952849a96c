//! Consumer IA handles: small integers standing for provider IAs.
//!
//! Handing out small integers (as the reference registry does) lets the
//! registry tell an IA handle from any other handle by value alone, and lets
//! it refuse a closed IA's handle instead of calling through freed memory.

use dat_abi::DAT_IA_HANDLE;
use std::collections::HashMap;
use std::sync::Mutex;

/// Largest consumer IA handle value; no user-space object lives this low.
pub const MAX_HANDLE: usize = 0xFFFF;

pub struct Slot {
    pub provider_ia: DAT_IA_HANDLE,
    /// Index of the dat.conf entry that opened it, for reference counting.
    pub entry: usize,
    /// Set while dat_ia_close runs, so a second close or a lookup fails cleanly.
    pub closing: bool,
}

// Provider IA handles are opaque tokens here; the registry never dereferences them.
unsafe impl Send for Slot {}

#[derive(Default)]
struct Table {
    slots: HashMap<usize, Slot>,
    /// Handles are given out round-robin, so a stale handle is refused for as
    /// long as possible instead of naming the next IA opened.
    cursor: usize,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Table::default))
}

pub fn is_consumer_handle(h: DAT_IA_HANDLE) -> bool {
    (h as usize) != 0 && (h as usize) <= MAX_HANDLE
}

/// Records an open IA and returns the consumer's handle, or None when all are in use.
pub fn insert(provider_ia: DAT_IA_HANDLE, entry: usize) -> Option<DAT_IA_HANDLE> {
    with(|t| {
        for _ in 0..MAX_HANDLE {
            t.cursor = t.cursor % MAX_HANDLE + 1;
            if !t.slots.contains_key(&t.cursor) {
                t.slots.insert(t.cursor, Slot { provider_ia, entry, closing: false });
                return Some(t.cursor as DAT_IA_HANDLE);
            }
        }
        None
    })
}

/// The provider IA behind a consumer handle that is open and not closing.
pub fn resolve(h: DAT_IA_HANDLE) -> Option<DAT_IA_HANDLE> {
    with(|t| t.slots.get(&(h as usize)).filter(|s| !s.closing).map(|s| s.provider_ia))
}

/// Finds the consumer handle for `h`, which may be either a consumer handle or
/// the provider's own IA handle (as returned in EP/EVD/PZ query parameters).
fn key_of(t: &Table, h: DAT_IA_HANDLE) -> Option<usize> {
    if is_consumer_handle(h) {
        t.slots.contains_key(&(h as usize)).then_some(h as usize)
    } else {
        t.slots.iter().find(|(_, s)| s.provider_ia == h).map(|(k, _)| *k)
    }
}

/// Marks an IA as closing; returns its provider handle and entry. Fails if it
/// is unknown or another thread is already closing it.
pub fn begin_close(h: DAT_IA_HANDLE) -> Option<(usize, DAT_IA_HANDLE, usize)> {
    with(|t| {
        let key = key_of(t, h)?;
        let slot = t.slots.get_mut(&key)?;
        if slot.closing {
            return None;
        }
        slot.closing = true;
        Some((key, slot.provider_ia, slot.entry))
    })
}

pub fn finish_close(key: usize, closed: bool) {
    with(|t| {
        if closed {
            t.slots.remove(&key);
        } else if let Some(s) = t.slots.get_mut(&key) {
            s.closing = false;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle() {
        let p = 0x7f00_0000_1000usize as DAT_IA_HANDLE;
        let h = insert(p, 3).unwrap();
        assert!(is_consumer_handle(h));
        assert_eq!(resolve(h), Some(p));
        let (key, prov, entry) = begin_close(p).unwrap();
        assert_eq!((key, prov, entry), (h as usize, p, 3));
        assert!(begin_close(h).is_none(), "second close while closing");
        assert_eq!(resolve(h), None);
        finish_close(key, false);
        assert_eq!(resolve(h), Some(p));
        let (key, _, _) = begin_close(h).unwrap();
        finish_close(key, true);
        assert_eq!(resolve(h), None);
        let h2 = insert(p, 3).unwrap();
        assert_ne!(h2, h, "a closed handle is not handed out again at once");
        let (k2, _, _) = begin_close(h2).unwrap();
        finish_close(k2, true);
    }
}
