//! What the core keeps per transport, and how it reaches it.
//!
//! Rust has no generic statics, so everything the core would keep in a
//! static that depends on the transport lives in one `State<T>`: `provider!`
//! defines it as a static in the backend's crate and `Provider::state`
//! returns its address, a direct call that inlines to a constant. Each
//! cdylib links its own copy of the core and its own state, so two of our
//! providers loaded in one process stay independent.

use crate::backend::{Completion, Transport};
use dat_abi::*;
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// A transport the core is instantiated on: the backend's `Transport`, plus
/// what `provider!` adds in the backend's crate.
pub trait Provider: Transport {
    /// The provider's name, as DAPL's are: logs, provider attributes.
    const NAME: &'static str;
    /// The higher floors' answers to calls from lower ones.
    type Up: Upcalls<Self>;
    fn state() -> &'static State<Self>;
}

/// Calls from a lower floor of the core into a higher one. The lower floor
/// declares what it needs here; the top floor implements it (`up::Up`), so
/// the call is static and inlinable (one is on the dequeue path).
pub trait Upcalls<T: Provider> {
    /// An error completion broke the connection of the EP `owner`.
    fn ep_broken(owner: usize);
    /// A receive completed on the EP `owner`, for its counters.
    fn ep_received(owner: usize, wc: &Completion, ud: bool);
    /// The EP `h` is being freed: what hangs off it on higher floors goes too.
    fn ep_freed(h: DAT_HANDLE);
    /// For a CNO's wait: whether the EVD `h` has an event ready.
    fn evd_has_event(h: usize) -> bool;
    /// For a CNO's wait: the backend's look for a completion on the EVD
    /// `h` before the sleep is prepared (`CqOps::linger`).
    fn evd_linger(h: usize) -> bool;
    /// For a CNO's wait: arms the EVD `h` and returns the fds to sleep on.
    fn evd_prepare_sleep(h: usize) -> Option<[i32; 2]>;
}

/// Object kinds have DAT_HANDLE_TYPE values below this (the IB extension's
/// is 12); `handle` keeps a list of freed slots for each.
pub const KINDS: usize = 16;

/// Handles pinned at once, across all IAs: each CM thread pins at most two
/// while it reports a device async event; a pinner finding every cell
/// taken waits for one.
pub const PINS: usize = 16;

/// The per-transport statics. Fields are named for the module that owns them.
pub struct State<T: Transport> {
    /// `table`: one provider table per IA name registered.
    pub(crate) tables: Tables,
    /// `instance`: the IA names registered, with their ia_params.
    pub(crate) instances: Mutex<Option<HashMap<String, String>>>,
    /// `handle`: freed slots waiting for reuse, one list per object kind
    /// (DAT_HANDLE_TYPE), oldest first.
    pub(crate) free_slots: [Mutex<VecDeque<usize>>; KINDS],
    /// `handle`: every slot ever made, by kind (slots are never freed).
    pub(crate) all_slots: [Mutex<Vec<usize>>; KINDS],
    /// `handle`: the handles a thread outside the CM lock is using now
    /// (`pin`), 0 in a free cell.
    pub(crate) pins: [AtomicUsize; PINS],
    /// `handle`: pins held or being taken, so that a `remove` while none
    /// is (nearly always) reads one word instead of every cell.
    pub(crate) pinning: AtomicUsize,
    /// `quiesce`: held while a connection event is handled.
    pub(crate) cm: Mutex<()>,
    /// `srq`: the EP behind each QP number that takes receives from an SRQ.
    pub(crate) srq_qps: Mutex<Option<HashMap<u32, usize>>>,
    /// `ud`: address handles made for UD peers, with the EP they belong to.
    pub(crate) ahs: Mutex<Vec<(usize, T::Ah)>>,
}

impl<T: Transport> State<T> {
    pub const fn new() -> Self {
        State {
            tables: Tables::new(),
            instances: Mutex::new(None),
            free_slots: [const { Mutex::new(VecDeque::new()) }; KINDS],
            all_slots: [const { Mutex::new(Vec::new()) }; KINDS],
            pins: [const { AtomicUsize::new(0) }; PINS],
            pinning: AtomicUsize::new(0),
            cm: Mutex::new(()),
            srq_qps: Mutex::new(None),
            ahs: Mutex::new(Vec::new()),
        }
    }
}

impl<T: Transport> Default for State<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Instance tables never go away (handles point at them for as long as
/// the process lives); a name registered again gets its old table back.
const MAX_INSTANCES: usize = 64;

/// The tables live in one array inside the state, so "is this one of our
/// tables" (`is_ours`, on every handle check) is a range test. Table `i` is
/// written once, under `create`, before `slots[i]` publishes it, and never
/// after.
pub(crate) struct Tables {
    slots: [AtomicPtr<DAT_PROVIDER>; MAX_INSTANCES],
    store: [UnsafeCell<MaybeUninit<DAT_PROVIDER>>; MAX_INSTANCES],
    create: Mutex<()>,
}

// `store` entries are written before they are published and only read after.
unsafe impl Sync for Tables {}

impl Tables {
    const fn new() -> Self {
        Tables {
            slots: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_INSTANCES],
            store: [const { UnsafeCell::new(MaybeUninit::uninit()) }; MAX_INSTANCES],
            create: Mutex::new(()),
        }
    }

    fn named(&self, name: &CStr) -> Result<*mut DAT_PROVIDER, Option<usize>> {
        for (i, slot) in self.slots.iter().enumerate() {
            let p = slot.load(Ordering::Acquire);
            if p.is_null() {
                return Err(Some(i));
            }
            // SAFETY: published tables are immutable; device_name is a C string.
            if unsafe { CStr::from_ptr((*p).device_name) } == name {
                return Ok(p);
            }
        }
        Err(None)
    }

    /// The table registered for `name`, if there is one.
    pub fn find(&self, name: &str) -> Option<*mut DAT_PROVIDER> {
        self.named(crate::util::cstring(name).as_c_str()).ok()
    }

    /// The table for `name`: `make`'s copy with `device_name` set, created
    /// on first use; None when all are taken.
    pub fn find_or_add(&self, name: &str, make: impl FnOnce() -> DAT_PROVIDER) -> Option<*mut DAT_PROVIDER> {
        let _guard = self.create.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = crate::util::cstring(name);
        match self.named(wanted.as_c_str()) {
            Ok(p) => Some(p),
            Err(None) => None,
            Err(Some(i)) => {
                let mut t = make();
                t.device_name = Box::leak(wanted.into_boxed_c_str()).as_ptr();
                // SAFETY: entry i is unpublished (its slot is null) and we
                // hold `create`, so no one else reads or writes it.
                let p = unsafe { (*self.store[i].get()).write(t) as *mut DAT_PROVIDER };
                self.slots[i].store(p, Ordering::Release);
                Some(p)
            }
        }
    }

    /// True when `p` is one of these tables: within the array (an address
    /// there that is not a table's start is never in a slot of ours).
    #[inline(always)]
    pub fn is_ours(&self, p: *const DAT_PROVIDER) -> bool {
        (p as usize).wrapping_sub(self.store.as_ptr() as usize) < std::mem::size_of_val(&self.store)
    }
}
