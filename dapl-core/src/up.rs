//! The top floor's answers to the lower floors' upcalls (`state::Upcalls`),
//! named by every `Provider` as its `Up`.

use crate::backend::Completion;
use crate::evd::Evd;
use crate::handle;
use crate::state::{Provider, Upcalls};
use crate::{ep, ud};
use dat_abi::DAT_HANDLE;

pub struct Up;

impl<T: Provider> Upcalls<T> for Up {
    #[inline]
    fn ep_broken(owner: usize) {
        ep::break_on_error::<T>(owner);
    }

    #[inline(always)]
    fn ep_received(owner: usize, wc: &Completion, ud: bool) {
        ep::received::<T>(owner, wc, ud);
    }

    fn ep_freed(h: DAT_HANDLE) {
        ud::forget_ep::<T>(h);
    }

    fn evd_has_event(h: usize) -> bool {
        handle::get::<Evd<T>>(h as DAT_HANDLE).is_ok_and(|evd| evd.has_event())
    }

    fn evd_linger(h: usize) -> bool {
        handle::get::<Evd<T>>(h as DAT_HANDLE).is_ok_and(|evd| evd.linger())
    }

    fn evd_prepare_sleep(h: usize) -> Option<[i32; 2]> {
        let evd = handle::get::<Evd<T>>(h as DAT_HANDLE).ok()?;
        let fds = evd.fds();
        evd.arm();
        Some(fds)
    }
}
