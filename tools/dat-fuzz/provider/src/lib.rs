//! `libdaplmock.so.2`: the provider core instantiated on the in-memory mock
//! backend (`dapl_core::mock`), so a consumer can drive the whole core
//! through the registry on a host without RDMA. It exists for
//! `tools/dat-fuzz` (it lives there, not beside the backend crates, because it is no backend: the layering test treats every `dapl-provider-*` as one); it is a test fixture, not a product.
//!
//! dat.conf's ia_params must be `"mock0 1"` (what the mock device accepts).
//! Besides the provider entry points it exports
//! `daplmock_live_objects`, the mock's live backend-object counters, so a
//! consumer can check that closing an IA gave everything back.

use dapl_core::mock;

// dapl-core's `mock` feature already makes `Mock` a provider named "daplmock".
dapl_core::entry_points!(mock::Mock);

/// Writes up to `n` live-object counts (pd, qp, id, cq, mr, mw, srq, in that
/// order) to `out` and returns how many kinds there are.
///
/// # Safety
/// `out` is null or points to `n` writable `usize`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daplmock_live_objects(out: *mut usize, n: usize) -> usize {
    let live = mock::live_objects();
    if !out.is_null() {
        for (i, (_, count)) in live.iter().take(n).enumerate() {
            // SAFETY: i < n, and the caller gave n writable slots.
            unsafe { out.add(i).write(*count) };
        }
    }
    live.len()
}
