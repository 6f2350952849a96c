//! The provider core: DAT 2.0's objects, handles, state machines and event
//! queues, generic over the transport (`backend::Transport`).
//!
//! A backend crate implements `Transport` and instantiates the core on it
//! with two macros: `provider!` (the per-transport statics, see `state`)
//! and `entry_points!` (`dat_provider_init`/`fini` and the symbols the IB
//! extension's C shim calls). Every DAT call is then a monomorphised
//! function of that backend's crate and the post and dequeue paths make
//! static calls into the backend. Each cdylib links its own copy of the
//! core, so two providers built on it stay independent in one process.
//!
//! The modules stand in floors; each imports only from floors below its
//! own (the `layering` test checks it). Where a lower floor needs a
//! higher one, it says so in `state::Upcalls`, which the top implements.
//!
//! | floor | modules | holds |
//! |---|---|---|
//! | 0 | `backend`, `wake`, `util`, `tsan`, `alloc_count` | the transport contract; eventfd sleeps; small helpers; edges for ThreadSanitizer; tests' allocation count |
//! | 1 | `state`, `counters`, `sge`, `mock` | per-transport statics and upcalls; counter arrays; SGE lists; the test backend |
//! | 2 | `handle`, `instance`, `quiesce`, `dto` | handle slots; registered IA names; the CM lock; posted-request rings and completion events |
//! | 3 | `ia`, `generic` | the IA; calls on any handle |
//! | 4 | `pz`, `cno` | IA children that need no other object |
//! | 5 | `lmr`, `evd`, `srq` | memory regions, event dispatchers, shared receive queues |
//! | 6 | `ep` | endpoints and the post path |
//! | 7 | `rmr`, `ud`, `psp`, `async_error` | windows, UD resolution, public service points, async errors |
//! | 8 | `rsp`, `cr` | reserved service points, connection requests |
//! | 9 | `connection` | connection state machines and the CM thread's handler |
//! | 10 | `open`, `counter_calls` | dat_ia_open; the counter extension calls |
//! | 11 | `extension` | the IB extension's other calls |
//! | 12 | `table`, `up` | the DAT_PROVIDER table; the upcalls' implementation |
//! | 13 | `registry` | dat_provider_init/fini |
//! | 14 | this file | the instantiation macros |
//!
//! `mock` is an in-memory backend (feature `mock`, and unit tests) on which
//! `core_tests` drive the core through its DAT entry points.

#[cfg(test)]
mod alloc_count;
mod async_error;
pub mod backend;
mod cno;
mod connection;
#[cfg(test)]
mod core_tests;
mod counter_calls;
mod counters;
mod cr;
mod dto;
mod ep;
mod evd;
mod extension;
mod generic;
mod handle;
mod ia;
mod instance;
#[cfg(test)]
mod layering;
mod lmr;
#[cfg(any(test, feature = "mock"))]
pub mod mock;
mod open;
mod psp;
mod pz;
mod quiesce;
mod registry;
mod rmr;
mod rsp;
mod sge;
mod srq;
mod state;
mod table;
pub mod tsan;
mod ud;
mod up;
pub mod util;
pub mod wake;

pub use dat_abi;
pub use state::{Provider, State, Upcalls};
pub use up::Up;

/// What `entry_points!` calls; not an API.
#[doc(hidden)]
pub mod __entry {
    pub use crate::counter_calls::{print_counters, query_counters, start_counter, stop_counter};
    pub use crate::extension::{ExtPost, close_query, ext_post, open_query, ud_ah_free, ud_cm_free, unsupported};
    pub use crate::registry::{fini, init};
}

/// Makes `$t` (a `backend::Transport`) a `Provider` named `$name`: defines
/// its `State` as a static in the calling crate.
#[macro_export]
macro_rules! provider {
    ($t:ty, $name:literal) => {
        impl $crate::Provider for $t {
            const NAME: &'static str = $name;
            type Up = $crate::Up;
            #[inline(always)]
            fn state() -> &'static $crate::State<Self> {
                static STATE: $crate::State<$t> = $crate::State::new();
                &STATE
            }
        }
    };
}

/// Exports the provider entry points of the core instantiated on `$t`:
/// `dat_provider_init`, `dat_provider_fini`, and the `daplibv_ext_*`
/// functions the IB extension's C shim (csrc/) calls by name. One provider
/// per cdylib.
#[macro_export]
macro_rules! entry_points {
    ($t:ty) => {
        const _: () = {
            use $crate::dat_abi::{DAT_HANDLE, DAT_IA_ATTR, DAT_IA_ATTR_MASK, DAT_IA_HANDLE, DAT_IB_ADDR_HANDLE,
                DAT_PROVIDER_ATTR, DAT_PROVIDER_ATTR_MASK, DAT_PROVIDER_INFO, DAT_RETURN, DAT_UINT64};
            use ::std::os::raw::{c_char, c_int, c_void};
            use $crate::__entry as e;

            /// # Safety
            /// Called by a DAT registry with its info for one dat.conf entry
            /// and that entry's ia_params string.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn dat_provider_init(info: *const DAT_PROVIDER_INFO, params: *const c_char) {
                // SAFETY: the registry's arguments, passed on.
                unsafe { e::init::<$t>(info, params) }
            }

            /// # Safety
            /// Called by the registry with the info given to `dat_provider_init`.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn dat_provider_fini(info: *const DAT_PROVIDER_INFO) {
                // SAFETY: as above.
                unsafe { e::fini::<$t>(info) }
            }

            // The C shim's arguments, unpacked from the consumer's va_list,
            // are passed on; each callee states what it needs.
            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_post(h: DAT_HANDLE, op: c_int, p: *const e::ExtPost) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::ext_post::<$t>(h, op, p) }
            }

            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_open_query(name: *const c_char, ia: *mut DAT_IA_HANDLE, ia_mask: DAT_IA_ATTR_MASK,
                ia_attr: *mut DAT_IA_ATTR, pr_mask: DAT_PROVIDER_ATTR_MASK, pr_attr: *mut DAT_PROVIDER_ATTR) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::open_query::<$t>(name, ia, ia_mask, ia_attr, pr_mask, pr_attr) }
            }

            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_close_query(h: DAT_HANDLE) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::close_query::<$t>(h) }
            }

            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_ud_cm_free(ep: DAT_HANDLE, cm: *mut c_void) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::ud_cm_free::<$t>(ep, cm) }
            }

            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_ud_ah_free(ep: DAT_HANDLE, ah: *const DAT_IB_ADDR_HANDLE) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::ud_ah_free::<$t>(ep, ah) }
            }

            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_query_counters(h: DAT_HANDLE, cntr: c_int, out: *mut DAT_UINT64, reset: c_int) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::query_counters::<$t>(h, cntr, out, reset) }
            }

            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_print_counters(h: DAT_HANDLE, cntr: c_int, reset: c_int) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::print_counters::<$t>(h, cntr, reset) }
            }

            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_start_counter(h: DAT_HANDLE, t: c_int) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::start_counter::<$t>(h, t) }
            }

            #[unsafe(no_mangle)]
            unsafe extern "C" fn daplibv_ext_stop_counter(h: DAT_HANDLE, t: c_int) -> DAT_RETURN {
                // SAFETY: see above.
                unsafe { e::stop_counter::<$t>(h, t) }
            }

            #[unsafe(no_mangle)]
            extern "C" fn daplibv_ext_unsupported(h: DAT_HANDLE) -> DAT_RETURN {
                e::unsupported::<$t>(h)
            }
        };
    };
}

// Unit tests (and crates with the `mock` feature) run the core on the mock.
#[cfg(any(test, feature = "mock"))]
provider!(mock::Mock, "daplmock");
#[cfg(test)]
entry_points!(mock::Mock);
