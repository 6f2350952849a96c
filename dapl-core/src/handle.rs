//! DAT handles: type-stable slots that outlive the objects in them.
//!
//! A handle is the address of a `Slot<T>`. The slot's first word is our
//! provider table (what DAT_HANDLE_TO_PROVIDER reads), the second a tag
//! saying which kind of object lives there, or that none does. Slots are
//! never given back to the allocator, only reused for the same type, oldest
//! first, so a freed or wrong-type handle reads a tag that says so and the
//! call returns DAT_INVALID_HANDLE instead of touching freed memory.
//!
//! The check on every call is two compares: the first word is one of this
//! transport's tables (they sit in one array, `state::Tables`, so that is a
//! range test; a handle made by another of our providers in the process,
//! which runs another copy of this code with its own tables, fails it),
//! and the tag is the wanted kind's. Within one transport each kind is one
//! Rust type, so the tag says what the body is.

use crate::state::{KINDS, Provider};
use dat_abi::status::invalid_handle;
use dat_abi::*;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Tags are this magic in the high half and the DAT_HANDLE_TYPE in the low.
const MAGIC: u32 = 0xDA70_0000;
const DEAD: u32 = 0xDEAD_0000;

#[repr(C)]
pub struct Header {
    /// Must stay the first word: consumers' macros and the registry read it.
    provider: AtomicPtr<DAT_PROVIDER>,
    tag: AtomicU32,
    /// The order in which an abrupt close of the parent frees this object
    /// (higher first), set with `parent`.
    rank: AtomicU32,
    /// The IA that owns the object (its address), 0 when none does: an
    /// IA's children are the live slots that name it (`children`), so
    /// adopting and dropping a child is a store, with no list to keep.
    parent: AtomicUsize,
    /// How the parent's abrupt close frees the object: a `fn(DAT_HANDLE)`.
    destroy: AtomicUsize,
    /// The consumer's DAT_CONTEXT, an 8-byte union kept as its bits.
    context: AtomicU64,
}

/// A live object that names a parent, as `children` reports it.
pub struct Child {
    pub handle: DAT_HANDLE,
    pub rank: u8,
    pub destroy: fn(DAT_HANDLE),
}

#[repr(C)]
pub struct Slot<T> {
    header: Header,
    body: UnsafeCell<MaybeUninit<T>>,
}

// Bodies are only reached through &T after the tag check; T's own fields
// carry the synchronisation (Object requires Sync).
unsafe impl<T: Sync> Sync for Slot<T> {}

/// A DAT object kind that lives in slots.
pub trait Object: Sized + Send + Sync + 'static {
    /// The transport whose provider tables the object's handles carry, and
    /// whose state keeps its freed slots.
    type P: Provider;
    /// Below `state::KINDS`, and one Rust type per transport: the tag names
    /// the body, and freed slots are kept by kind.
    const TYPE: DAT_HANDLE_TYPE;
    /// The DAT_INVALID_HANDLE minor for a bad handle of this kind.
    const INVALID: u32;
}

/// The tag of a live `O`.
#[inline(always)]
fn tag_of<O: Object>() -> u32 {
    const {
        assert!((O::TYPE as usize) < KINDS);
        MAGIC | O::TYPE
    }
}

/// The freed slots of `O`'s kind (addresses, oldest first).
fn free_list<O: Object>() -> std::sync::MutexGuard<'static, VecDeque<usize>> {
    O::P::state().free_slots[O::TYPE as usize].lock().unwrap_or_else(|e| e.into_inner())
}

/// Puts `value` in a slot owned by provider table `provider` and returns its handle.
pub fn insert<O: Object>(value: O, provider: *mut DAT_PROVIDER) -> DAT_HANDLE {
    let reused = free_list::<O>().pop_front();
    let slot: &'static Slot<O> = match reused {
        // SAFETY: the list for O's kind holds only addresses of leaked
        // Slot<O>s (see remove; the kind is one type).
        Some(a) => unsafe { &*(a as *const Slot<O>) },
        None => {
            let slot: &'static Slot<O> = Box::leak(Box::new(Slot {
                header: Header {
                    provider: AtomicPtr::new(provider),
                    tag: AtomicU32::new(DEAD),
                    rank: AtomicU32::new(0),
                    parent: AtomicUsize::new(0),
                    destroy: AtomicUsize::new(0),
                    context: AtomicU64::new(0),
                },
                body: UnsafeCell::new(MaybeUninit::uninit()),
            }));
            O::P::state().all_slots[O::TYPE as usize]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(slot as *const Slot<O> as usize);
            slot
        }
    };
    // SAFETY: the slot is dead (fresh, or taken off the free list), so no
    // one else reads or writes its body.
    unsafe { (*slot.body.get()).write(value) };
    slot.header.provider.store(provider, Ordering::Relaxed);
    slot.header.parent.store(0, Ordering::Relaxed);
    slot.header.context.store(0, Ordering::Relaxed);
    slot.header.tag.store(tag_of::<O>(), Ordering::Release);
    slot as *const Slot<O> as DAT_HANDLE
}

/// Ends the object behind `h` (which must have passed `get`) and queues its
/// slot for reuse. Returns false if another thread removed it first.
pub fn remove<O: Object>(h: DAT_HANDLE) -> bool {
    // SAFETY: callers pass handles that `get::<O>` accepted: a live slot of O.
    let slot: &'static Slot<O> = unsafe { &*(h as *const Slot<O>) };
    // SeqCst, as in `pin`: of this swap and a pinner's claim, whichever
    // comes second sees the other.
    if slot.header.tag.compare_exchange(tag_of::<O>(), DEAD, Ordering::SeqCst, Ordering::Acquire).is_err() {
        return false;
    }
    wait_unpinned::<O::P>(h as usize);
    // SAFETY: we won the tag race, so the body is initialised and ours to
    // drop, and no pin names it any more.
    unsafe { (*slot.body.get()).assume_init_drop() };
    free_list::<O>().push_back(slot as *const Slot<O> as usize);
    true
}

/// A live object that `remove` will not drop (nor its slot reuse) until
/// this is dropped. For threads that reach objects without the CM lock
/// while consumers may free them: the CM thread reporting a device async
/// event. The holder must not free the object itself, nor run consumer
/// code (a CNO agent may free it) while it holds the pin.
pub struct Pinned<O: Object> {
    object: &'static O,
    cell: &'static AtomicUsize,
}

impl<O: Object> std::ops::Deref for Pinned<O> {
    type Target = O;
    fn deref(&self) -> &O {
        self.object
    }
}

impl<O: Object> Drop for Pinned<O> {
    fn drop(&mut self) {
        self.cell.store(0, Ordering::Release);
        O::P::state().pinning.fetch_sub(1, Ordering::Release);
    }
}

/// Pins the object behind `h` if it is a live `O` of ours.
pub fn pin<O: Object>(h: DAT_HANDLE) -> Option<Pinned<O>> {
    let hdr = ours::<O::P>(h)?;
    let state = O::P::state();
    // Counted before the claim: a `remove` that reads no pin being taken
    // comes before this in the SeqCst order, so its swap is seen below.
    state.pinning.fetch_add(1, Ordering::SeqCst);
    let cells = &state.pins;
    let cell = loop {
        if let Some(c) = cells.iter().find(|c| c.compare_exchange(0, h as usize, Ordering::SeqCst, Ordering::Relaxed).is_ok()) {
            break c;
        }
        std::thread::yield_now();
    };
    // The claim is made before the tag is read (SeqCst both): a `remove`
    // whose swap comes later waits for the cell, one that came earlier is
    // seen here as a dead tag.
    if hdr.tag.load(Ordering::SeqCst) != tag_of::<O>() {
        cell.store(0, Ordering::Release);
        state.pinning.fetch_sub(1, Ordering::Release);
        return None;
    }
    // SAFETY: the tag says an O is initialised here (as in `get`), and the
    // pin keeps `remove` from dropping it until the Pinned goes.
    let object = unsafe { (*(*(h as *const Slot<O>)).body.get()).assume_init_ref() };
    Some(Pinned { object, cell })
}

/// Waits until no pin names `h` (whose tag `remove` has just killed).
fn wait_unpinned<T: Provider>(h: usize) {
    let state = T::state();
    if state.pinning.load(Ordering::SeqCst) == 0 {
        return;
    }
    while state.pins.iter().any(|c| c.load(Ordering::SeqCst) == h) {
        std::thread::yield_now();
    }
}

/// Handles at or below this are never ours (see `header`).
const LOWEST_INVALID: usize = 0xFFFF;

/// The header behind `h` if it is one of this transport's slots, live or
/// not. Nothing is mapped in the lowest 64 KiB (Linux's mmap_min_addr), and
/// our registry hands consumers IA handles 1..=0xFFFF: one of those passed
/// where an object belongs (fuzzer finding) must be refused, not read.
#[inline(always)]
fn ours<T: Provider>(h: DAT_HANDLE) -> Option<&'static Header> {
    if (h as usize) <= LOWEST_INVALID || (h as usize) % std::mem::align_of::<Header>() != 0 {
        return None;
    }
    // SAFETY: the DAT contract makes a handle point at an object whose first
    // word is its provider; we read that word, and our tag once it is ours.
    let hdr = unsafe { &*(h as *const Header) };
    T::state().tables.is_ours(hdr.provider.load(Ordering::Relaxed)).then_some(hdr)
}

/// The live header behind any handle of ours, or None.
#[inline]
fn header<T: Provider>(h: DAT_HANDLE) -> Option<&'static Header> {
    ours::<T>(h).filter(|hdr| hdr.tag.load(Ordering::Acquire) & 0xFFFF_0000 == MAGIC)
}

/// The object behind `h` if it is a live `O` of ours.
#[inline(always)]
pub fn get<O: Object>(h: DAT_HANDLE) -> Result<&'static O, DAT_RETURN> {
    match ours::<O::P>(h) {
        Some(hdr) if hdr.tag.load(Ordering::Acquire) == tag_of::<O>() => {
            // SAFETY: the tag says an O is initialised here (tags of one
            // transport's tables name one type each); slots are never freed.
            Ok(unsafe { (*(*(h as *const Slot<O>)).body.get()).assume_init_ref() })
        }
        _ => Err(invalid_handle(O::INVALID)),
    }
}

/// `get` for a handle the core recorded itself when it was live (a posted
/// request's EP): it is one of our slots, and slots are never freed, so
/// only the tag is checked, for an object freed since.
#[inline(always)]
pub fn get_recorded<O: Object>(h: usize) -> Option<&'static O> {
    // SAFETY: `h` is the address of a Slot<O> we made (the caller's word).
    let slot = unsafe { &*(h as *const Slot<O>) };
    // SAFETY: as in `get`.
    (slot.header.tag.load(Ordering::Acquire) == tag_of::<O>()).then(|| unsafe { (*slot.body.get()).assume_init_ref() })
}

/// The DAT_HANDLE_TYPE of a live handle of ours.
pub fn kind_of<T: Provider>(h: DAT_HANDLE) -> Option<DAT_HANDLE_TYPE> {
    header::<T>(h).map(|hdr| hdr.tag.load(Ordering::Acquire) & 0xFFFF)
}

/// The header of a slot of `O` the caller got from `insert` or `get::<O>`:
/// the slot exists for good, whatever has become of the object since.
#[inline(always)]
fn slot_header<O: Object>(h: DAT_HANDLE) -> &'static Header {
    // SAFETY: the caller's word: h is the address of a Slot<O> we made.
    unsafe { &(*(h as *const Slot<O>)).header }
}

/// Makes `parent` (an IA's address) the owner of `h`, which `insert` just made.
#[inline]
pub fn adopt<O: Object>(h: DAT_HANDLE, parent: usize, rank: u8, destroy: fn(DAT_HANDLE)) {
    let hdr = slot_header::<O>(h);
    hdr.rank.store(rank as u32, Ordering::Relaxed);
    hdr.destroy.store(destroy as usize, Ordering::Relaxed);
    hdr.parent.store(parent, Ordering::Release);
}

/// Ends `parent`'s ownership of `h` (which passed `get::<O>`); true for
/// the one call that did.
#[inline]
pub fn disown<O: Object>(h: DAT_HANDLE, parent: usize) -> bool {
    slot_header::<O>(h).parent.compare_exchange(parent, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// The live objects `parent` owns, of one kind or of all.
pub fn children<T: Provider>(parent: usize, kind: Option<DAT_HANDLE_TYPE>) -> Vec<Child> {
    let mut found = Vec::new();
    for (k, list) in T::state().all_slots.iter().enumerate() {
        if kind.is_some_and(|want| want as usize != k) {
            continue;
        }
        let slots: Vec<usize> = list.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for a in slots {
            // SAFETY: the list holds addresses of slots we made; slots are
            // never freed, and every slot starts with a Header.
            let hdr = unsafe { &*(a as *const Header) };
            if hdr.tag.load(Ordering::Acquire) != MAGIC | k as u32 || hdr.parent.load(Ordering::Acquire) != parent {
                continue;
            }
            let destroy = hdr.destroy.load(Ordering::Relaxed);
            if destroy == 0 {
                continue;
            }
            // SAFETY: a non-zero `destroy` was stored from a fn(DAT_HANDLE) by `adopt`.
            let destroy: fn(DAT_HANDLE) = unsafe { std::mem::transmute::<usize, fn(DAT_HANDLE)>(destroy) };
            found.push(Child { handle: a as DAT_HANDLE, rank: hdr.rank.load(Ordering::Relaxed) as u8, destroy });
        }
    }
    found
}

pub fn set_context<T: Provider>(h: DAT_HANDLE, context: DAT_CONTEXT) -> bool {
    header::<T>(h).map(|hdr| {
        // SAFETY: DAT_CONTEXT is an 8-byte union; every member is plain bits.
        hdr.context.store(unsafe { context.as_64 }, Ordering::Release)
    }).is_some()
}

pub fn context<T: Provider>(h: DAT_HANDLE) -> Option<DAT_CONTEXT> {
    header::<T>(h).map(|hdr| DAT_CONTEXT { as_64: hdr.context.load(Ordering::Acquire) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::Mock;

    /// Kinds no DAT object has (13 and 14), so their slots stay their own.
    struct Thing(u32);
    impl Object for Thing {
        type P = Mock;
        const TYPE: DAT_HANDLE_TYPE = 13;
        const INVALID: u32 = DAT_INVALID_HANDLE_PZ;
    }

    struct Other;
    impl Object for Other {
        type P = Mock;
        const TYPE: DAT_HANDLE_TYPE = 14;
        const INVALID: u32 = DAT_INVALID_HANDLE_LMR;
    }

    #[test]
    fn live_stale_and_wrong_type_handles() {
        // SAFETY: an all-zero DAT_PROVIDER is all-None function slots and NULL pointers.
        let table = Mock::state().tables.find_or_add("handle-test", || unsafe { std::mem::zeroed() }).unwrap();
        let h = insert(Thing(7), table);
        // SAFETY: reading the first word of our own slot, as a consumer's macro would.
        assert_eq!(unsafe { *(h as *const *mut DAT_PROVIDER) }, table);
        assert_eq!(get::<Thing>(h).map(|t| t.0), Ok(7));
        assert_eq!(kind_of::<Mock>(h), Some(13));
        assert_eq!(get::<Other>(h).err(), Some(invalid_handle(DAT_INVALID_HANDLE_LMR)));
        assert!(set_context::<Mock>(h, DAT_CONTEXT { as_64: 99 }));
        // SAFETY: reading back the plain 8-byte union we stored.
        assert_eq!(unsafe { context::<Mock>(h).unwrap().as_64 }, 99);
        assert!(remove::<Thing>(h));
        assert!(!remove::<Thing>(h), "a second free is refused");
        assert_eq!(get::<Thing>(h).err(), Some(invalid_handle(DAT_INVALID_HANDLE_PZ)));
        assert_eq!(kind_of::<Mock>(h), None);
        // The slot comes back for the next Thing, with its context cleared.
        let h2 = insert(Thing(8), table);
        assert_eq!(h2, h);
        // SAFETY: as above.
        assert_eq!(unsafe { context::<Mock>(h2).unwrap().as_64 }, 0);
        assert!(remove::<Thing>(h2));
    }

    /// A kind of its own (15), whose drop is seen.
    struct Watched(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Object for Watched {
        type P = Mock;
        const TYPE: DAT_HANDLE_TYPE = 15;
        const INVALID: u32 = DAT_INVALID_HANDLE_EP;
    }
    impl Drop for Watched {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn remove_waits_for_a_pin() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        use std::time::{Duration, Instant};
        // SAFETY: an all-zero DAT_PROVIDER is all-None function slots and NULL pointers.
        let table = Mock::state().tables.find_or_add("handle-test", || unsafe { std::mem::zeroed() }).unwrap();
        let dropped = Arc::new(AtomicBool::new(false));
        let h = insert(Watched(dropped.clone()), table);
        let pinned = pin::<Watched>(h).expect("a live object pins");
        let addr = h as usize;
        let remover = std::thread::spawn(move || remove::<Watched>(addr as DAT_HANDLE));
        // The handle dies at once for everyone else...
        let start = Instant::now();
        while get::<Watched>(h).is_ok() {
            assert!(start.elapsed() < Duration::from_secs(10), "remove never killed the tag");
            std::thread::yield_now();
        }
        assert!(pin::<Watched>(h).is_none(), "a dead handle does not pin");
        // ...but the body is not dropped while the pin holds it.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!dropped.load(Ordering::SeqCst), "remove dropped a pinned object");
        assert!(!remover.is_finished());
        assert!(!pinned.0.load(Ordering::SeqCst));
        drop(pinned);
        assert!(remover.join().unwrap());
        assert!(dropped.load(Ordering::SeqCst));
        assert!(Mock::state().pins.iter().all(|c| c.load(Ordering::SeqCst) != addr), "the pin's cell was given back");
    }

    #[test]
    fn foreign_null_and_misaligned_handles() {
        assert_eq!(get::<Thing>(std::ptr::null_mut()).err(), Some(invalid_handle(DAT_INVALID_HANDLE_PZ)));
        let foreign: [usize; 4] = [0x1234_5678, MAGIC as usize | 6, 0, 0];
        assert!(get::<Thing>(foreign.as_ptr() as DAT_HANDLE).is_err());
        // The right tag behind a table that is not one of ours (another
        // provider's, or a copy of ours): refused.
        // SAFETY: an all-zero DAT_PROVIDER is all-None function slots and NULL pointers.
        let not_ours: &'static DAT_PROVIDER = Box::leak(Box::new(unsafe { std::mem::zeroed() }));
        let lookalike: [usize; 4] = [not_ours as *const DAT_PROVIDER as usize, (MAGIC | 13) as usize, 0, 0];
        assert!(get::<Thing>(lookalike.as_ptr() as DAT_HANDLE).is_err());
        assert!(kind_of::<Mock>(lookalike.as_ptr() as DAT_HANDLE).is_none());
        let misaligned = (foreign.as_ptr() as usize + 1) as DAT_HANDLE;
        assert!(get::<Thing>(misaligned).is_err());
    }
}
