//! Consumer IA handles: small integers standing for provider IAs.
//!
//! Handing out small integers (as the reference registry does) lets the
//! registry tell an IA handle from any other handle by value alone, and lets
//! it refuse a closed IA's handle instead of calling through freed memory.
//!
//! A handle is a slot index (low bits) and the slot's generation (high
//! bits), so every call on an IA handle (`dat_lmr_create`, `dat_ep_create`,
//! ...) finds its provider IA with two loads and no lock; opening and closing
//! take a lock. Slots are taken round-robin and a slot's generation moves on
//! each time it is reused, so a closed IA's handle stays refused until the
//! same value comes round again, after `SLOTS - 1` × `GENERATIONS` opens.

use dat_abi::DAT_IA_HANDLE;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// Largest consumer IA handle value; no user-space object lives this low.
pub const MAX_HANDLE: usize = 0xFFFF;

const INDEX_BITS: u32 = 10;
/// IAs open at once, at most `SLOTS - 1` (index 0 would make handle 0 possible).
const SLOTS: usize = 1 << INDEX_BITS;
const GENERATIONS: u32 = ((MAX_HANDLE + 1) >> INDEX_BITS) as u32;
const _: () = assert!(GENERATIONS == 64 && (GENERATIONS as usize) * SLOTS == MAX_HANDLE + 1);

/// `state` bits above the generation.
const OPEN: u32 = 1 << 8;
const CLOSING: u32 = 1 << 9;

struct Slot {
    /// The generation (low 8 bits) with OPEN and CLOSING; the generation is
    /// the handle's high bits while the slot is open.
    state: AtomicU32,
    provider_ia: AtomicPtr<std::ffi::c_void>,
    /// Index of the dat.conf entry that opened it, for reference counting.
    entry: AtomicUsize,
}

static SLOT: [Slot; SLOTS] = [const {
    Slot { state: AtomicU32::new(0), provider_ia: AtomicPtr::new(std::ptr::null_mut()), entry: AtomicUsize::new(0) }
}; SLOTS];

/// Held by the calls that change slots (open, close); the cursor is where
/// the round-robin search for a free slot goes on from.
static WRITER: Mutex<usize> = Mutex::new(0);

fn writer() -> std::sync::MutexGuard<'static, usize> {
    WRITER.lock().unwrap_or_else(|e| e.into_inner())
}

#[inline(always)]
pub fn is_consumer_handle(h: DAT_IA_HANDLE) -> bool {
    (h as usize) != 0 && (h as usize) <= MAX_HANDLE
}

#[inline(always)]
fn split(h: DAT_IA_HANDLE) -> (usize, u32) {
    let v = h as usize;
    (v & (SLOTS - 1), (v >> INDEX_BITS) as u32)
}

/// Records an open IA and returns the consumer's handle, or None when all are in use.
pub fn insert(provider_ia: DAT_IA_HANDLE, entry: usize) -> Option<DAT_IA_HANDLE> {
    let mut cursor = writer();
    for _ in 1..SLOTS {
        *cursor = *cursor % (SLOTS - 1) + 1;
        let i = *cursor;
        let s = &SLOT[i];
        let state = s.state.load(Ordering::Acquire);
        if state & OPEN != 0 {
            continue;
        }
        let generation = ((state & 0xFF) + 1) % GENERATIONS;
        s.provider_ia.store(provider_ia, Ordering::Release);
        s.entry.store(entry, Ordering::Release);
        s.state.store(generation | OPEN, Ordering::Release);
        return Some(((generation as usize) << INDEX_BITS | i) as DAT_IA_HANDLE);
    }
    None
}

/// The provider IA behind a consumer handle that is open and not closing.
#[inline]
pub fn resolve(h: DAT_IA_HANDLE) -> Option<DAT_IA_HANDLE> {
    let (i, generation) = split(h);
    let s = &SLOT[i];
    let state = s.state.load(Ordering::Acquire);
    if i == 0 || state != generation | OPEN {
        return None;
    }
    let p = s.provider_ia.load(Ordering::Acquire);
    // Closed and opened again between the two loads: not this handle's IA.
    (s.state.load(Ordering::Acquire) == state).then_some(p)
}

/// Finds the slot for `h`, which may be either a consumer handle or the
/// provider's own IA handle (as returned in EP/EVD/PZ query parameters).
fn slot_of(h: DAT_IA_HANDLE) -> Option<usize> {
    if is_consumer_handle(h) {
        let (i, generation) = split(h);
        (i != 0 && SLOT[i].state.load(Ordering::Acquire) & (0xFF | OPEN) == generation | OPEN).then_some(i)
    } else {
        (1..SLOTS).find(|&i| {
            SLOT[i].state.load(Ordering::Acquire) & OPEN != 0 && SLOT[i].provider_ia.load(Ordering::Acquire) == h
        })
    }
}

/// Marks an IA as closing; returns its slot, provider handle and entry.
/// Fails if it is unknown or another thread is already closing it.
pub fn begin_close(h: DAT_IA_HANDLE) -> Option<(usize, DAT_IA_HANDLE, usize)> {
    let _w = writer();
    let i = slot_of(h)?;
    let s = &SLOT[i];
    let state = s.state.load(Ordering::Acquire);
    if state & CLOSING != 0 {
        return None;
    }
    s.state.store(state | CLOSING, Ordering::Release);
    Some((i, s.provider_ia.load(Ordering::Acquire), s.entry.load(Ordering::Acquire)))
}

/// Ends a close `begin_close` started: the slot is free if the provider
/// closed the IA, else the handle works again.
pub fn finish_close(key: usize, closed: bool) {
    let _w = writer();
    let s = &SLOT[key];
    let state = s.state.load(Ordering::Acquire) & 0xFF;
    s.state.store(if closed { state } else { state | OPEN }, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots are process-wide: the tests take turns.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    #[test]
    fn lifecycle() {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let p = 0x7f00_0000_1000usize as DAT_IA_HANDLE;
        let h = insert(p, 3).unwrap();
        assert!(is_consumer_handle(h));
        assert_eq!(resolve(h), Some(p));
        let (key, prov, entry) = begin_close(p).unwrap();
        assert_eq!((prov, entry), (p, 3));
        assert_eq!(key, h as usize & (SLOTS - 1));
        assert!(begin_close(h).is_none(), "second close while closing");
        assert_eq!(resolve(h), None);
        finish_close(key, false);
        assert_eq!(resolve(h), Some(p));
        let (key, _, _) = begin_close(h).unwrap();
        finish_close(key, true);
        assert_eq!(resolve(h), None);
        assert!(begin_close(h).is_none(), "a closed handle cannot be closed");
        let h2 = insert(p, 3).unwrap();
        assert_ne!(h2, h, "a closed handle is not handed out again at once");
        assert_eq!(resolve(h), None);
        let (k2, _, _) = begin_close(h2).unwrap();
        finish_close(k2, true);
    }

    #[test]
    fn handles_stay_small_and_a_stale_one_misses_its_slot_reused() {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let p = 0x7f00_0000_2000usize as DAT_IA_HANDLE;
        let first = insert(p, 1).unwrap();
        let (k, _, _) = begin_close(first).unwrap();
        finish_close(k, true);
        // Go round every slot until the first one is taken again.
        let mut again = None;
        for _ in 0..SLOTS {
            let h = insert(p, 1).unwrap();
            assert!(is_consumer_handle(h));
            let (k, _, _) = begin_close(h).unwrap();
            if k == first as usize & (SLOTS - 1) {
                again = Some(h);
                finish_close(k, false);
                break;
            }
            finish_close(k, true);
        }
        let again = again.expect("the slot came round again");
        assert_ne!(again, first, "same slot, next generation");
        assert_eq!(resolve(first), None);
        assert_eq!(resolve(again), Some(p));
        let (k, _, _) = begin_close(again).unwrap();
        finish_close(k, true);
        assert_eq!(resolve(0 as DAT_IA_HANDLE), None);
        assert_eq!(resolve(SLOTS as DAT_IA_HANDLE), None, "index 0 is never handed out");
    }
}
