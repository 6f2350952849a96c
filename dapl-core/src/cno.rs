//! Consumer notification objects: one place to sleep for events on any of
//! several EVDs.

use crate::state::{Provider, Upcalls};
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::util::Inline;
use crate::wake::{self, Wake};
use dat_abi::status::{INTERNAL, error, guard, guard_or, invalid_arg, invalid_state, no_resources};
use dat_abi::*;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

pub struct Cno<T: Provider> {
    pub ia: &'static Ia<T>,
    ia_handle: usize,
    evds: Mutex<Vec<usize>>,
    wake: Wake,
    agent: Mutex<(usize, DAT_AGENT_FUNC)>,
    waiting: AtomicBool,
}

// The agent's instance_data is the consumer's opaque pointer, only handed back.
unsafe impl<T: Provider> Send for Cno<T> {}
unsafe impl<T: Provider> Sync for Cno<T> {}

/// Freed after the EVDs that feed it.
pub const RANK: u8 = 0;


impl<T: Provider> Object for Cno<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_CNO;
    const INVALID: u32 = DAT_INVALID_HANDLE_CNO;
}

impl<T: Provider> Cno<T> {
    pub fn attach(&self, evd: DAT_EVD_HANDLE) {
        self.evds.lock().unwrap_or_else(|e| e.into_inner()).push(evd as usize);
        self.wake.signal();
    }

    /// An event reached `evd`, which feeds this CNO: wake its waiter and
    /// call the proxy agent. As in DAPL, an agent fires once and is then
    /// cleared; `dat_cno_modify_agent` sets it up for the next event.
    pub fn trigger(&self, evd: DAT_EVD_HANDLE) {
        self.wake.signal();
        let mut agent = self.agent.lock().unwrap_or_else(|e| e.into_inner());
        if let (data, Some(func)) = *agent {
            *agent = (0, None);
            drop(agent);
            crate::quiesce::call_agent(func, data, evd);
        }
    }
}

/// Removes `evd` from the CNO `cno` (a handle value, 0 for none).
pub fn detach_from<T: Provider>(cno: usize, evd: DAT_EVD_HANDLE) {
    if cno == 0 {
        return;
    }
    if let Ok(c) = handle::get::<Cno<T>>(cno as DAT_HANDLE) {
        c.evds.lock().unwrap_or_else(|e| e.into_inner()).retain(|&e| e != evd as usize);
    }
}

pub unsafe extern "C" fn create<T: Provider>(ia_h: DAT_IA_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT, out: *mut DAT_CNO_HANDLE) -> DAT_RETURN {
    guard("dat_cno_create", || {
        let ia = match handle::get::<Ia<T>>(ia_h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        let Some(wake) = Wake::new() else { return no_resources(DAT_RESOURCE_MEMORY) };
        let h = handle::insert(Cno {
            ia,
            ia_handle: ia_h as usize,
            evds: Mutex::new(Vec::new()),
            wake,
            agent: Mutex::new((agent.instance_data as usize, agent.proxy_agent_func)),
            waiting: AtomicBool::new(false),
        }, ia.table());
        ia.adopt::<Cno<T>>(h, RANK, destroy::<T>);
        // SAFETY: checked non-null.
        unsafe { *out = h };
        DAT_SUCCESS
    })
}

fn destroy<T: Provider>(h: DAT_HANDLE) {
    if let Ok(c) = handle::get::<Cno<T>>(h) {
        c.ia.disown::<Cno<T>>(h);
        handle::remove::<Cno<T>>(h);
    }
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_CNO_HANDLE) -> DAT_RETURN {
    guard("dat_cno_free", || {
        let c = match handle::get::<Cno<T>>(h) {
            Ok(c) => c,
            Err(e) => return e,
        };
        if !c.evds.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            return invalid_state(DAT_INVALID_STATE_CNO_IN_USE);
        }
        destroy::<T>(h);
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn modify_agent<T: Provider>(h: DAT_CNO_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT) -> DAT_RETURN {
    guard("dat_cno_modify_agent", || match handle::get::<Cno<T>>(h) {
        Ok(c) => {
            *c.agent.lock().unwrap_or_else(|e| e.into_inner()) = (agent.instance_data as usize, agent.proxy_agent_func);
            DAT_SUCCESS
        }
        Err(e) => e,
    })
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_CNO_HANDLE, _mask: DAT_CNO_PARAM_MASK, out: *mut DAT_CNO_PARAM) -> DAT_RETURN {
    guard("dat_cno_query", || {
        let c = match handle::get::<Cno<T>>(h) {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        let (data, func) = *c.agent.lock().unwrap_or_else(|e| e.into_inner());
        p.ia_handle = c.ia_handle as DAT_IA_HANDLE;
        p.proxy_type = DAT_PROXY_TYPE_AGENT;
        p.proxy.agent = DAT_OS_WAIT_PROXY_AGENT { instance_data: data as DAT_PVOID, proxy_agent_func: func };
        DAT_SUCCESS
    })
}

/// C-unwind: the consumer may cancel a thread sleeping here (`wake::cancellable`).
pub unsafe extern "C-unwind" fn wait<T: Provider>(h: DAT_CNO_HANDLE, timeout: DAT_TIMEOUT, evd_out: *mut DAT_EVD_HANDLE) -> DAT_RETURN {
    let begun = dat_abi::cancel::deferred(|| {
        guard_or("dat_cno_wait", Err(INTERNAL), || {
            let c = handle::get::<Cno<T>>(h)?;
            if evd_out.is_null() {
                return Err(invalid_arg(DAT_INVALID_ARG3));
            }
            let claim = wake::Claim::take(&c.waiting).ok_or(invalid_state(DAT_INVALID_STATE_CNO_IN_USE))?;
            Ok((c, claim))
        })
    });
    let (c, _claim) = match begun {
        Ok(b) => b,
        Err(e) => return e,
    };
    // SAFETY: checked non-null above.
    let out = unsafe { &mut *evd_out };
    let deadline = wake::Deadline::new(timeout);
    wake::cancellable("dat_cno_wait", |_| wait_round::<T>(c, &deadline, out))
}

/// EVDs a CNO lists on the stack (`Inline`) for a look, and fds it sleeps on
/// (its own and two per EVD, what `wake::sleep_on_which` polls from the
/// stack); more go to the heap.
const ON_STACK: usize = (wake::POLL_ON_STACK - 1) / 2;
type Fds = Inline<i32, { wake::POLL_ON_STACK }>;

/// Calls `f` with the CNO's EVDs as they are now, the list's lock released
/// first: looking at an EVD may run a pass that calls a proxy agent, which
/// may attach or detach an EVD. Copied to the stack, not cloned: a wait
/// that finds its event allocated a list each look.
fn with_evds<T: Provider, R>(c: &Cno<T>, f: impl FnOnce(&[usize]) -> R) -> R {
    let copy = Inline::<usize, ON_STACK>::from_slice(&c.evds.lock().unwrap_or_else(|e| e.into_inner()), 0);
    f(copy.as_ref())
}

fn ready_evd<T: Provider>(c: &Cno<T>) -> Option<usize> {
    with_evds(c, |evds| evds.iter().copied().find(|&e| <T::Up as Upcalls<T>>::evd_has_event(e)))
}

fn wait_round<T: Provider>(c: &Cno<T>, deadline: &wake::Deadline, out: &mut DAT_EVD_HANDLE) -> wake::Step<Fds> {
    use wake::Step::{Done, Sleep};
    if let Some(e) = ready_evd::<T>(c) {
        *out = e as DAT_EVD_HANDLE;
        return Done(DAT_SUCCESS);
    }
    // As an EVD's wait: the backends' look first, before the wakeups are
    // cleared and the CQs armed (`CqOps::linger`).
    if with_evds(c, |evds| evds.iter().copied().any(<T::Up as Upcalls<T>>::evd_linger)) {
        if let Some(e) = ready_evd::<T>(c) {
            *out = e as DAT_EVD_HANDLE;
            return Done(DAT_SUCCESS);
        }
    }
    c.wake.clear();
    let mut fds = Fds::new(-1);
    fds.push(c.wake.fd());
    // Listed again after the clear: an EVD attached meanwhile signalled it.
    with_evds(c, |evds| {
        for &e in evds {
            for fd in <T::Up as Upcalls<T>>::evd_prepare_sleep(e).into_iter().flatten() {
                if fd >= 0 {
                    fds.push(fd);
                }
            }
        }
    });
    if let Some(e) = ready_evd::<T>(c) {
        *out = e as DAT_EVD_HANDLE;
        return Done(DAT_SUCCESS);
    }
    match deadline.remaining() {
        Ok(left) => Sleep(fds, left),
        Err(()) => Done(error(DAT_TIMEOUT_EXPIRED, 0)),
    }
}
