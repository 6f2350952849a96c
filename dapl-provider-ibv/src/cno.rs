//! Consumer notification objects: one place to sleep for events on any of
//! several EVDs.

use crate::evd::Evd;
use crate::handle::{self, Object, Pool};
use crate::ia::Ia;
use crate::wake::{self, Wake};
use dat_abi::status::{INTERNAL, error, guard, guard_or, invalid_arg, invalid_state, no_resources};
use dat_abi::*;
use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

pub struct Cno {
    pub ia: &'static Ia,
    ia_handle: usize,
    evds: Mutex<Vec<usize>>,
    wake: Wake,
    agent: Mutex<(usize, DAT_AGENT_FUNC)>,
    waiting: AtomicBool,
}

// The agent's instance_data is the consumer's opaque pointer, only handed back.
unsafe impl Send for Cno {}
unsafe impl Sync for Cno {}

/// Freed after the EVDs that feed it.
pub const RANK: u8 = 0;

static POOL: Pool<Cno> = Pool::new();

impl Object for Cno {
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_CNO;
    const INVALID: u32 = DAT_INVALID_HANDLE_CNO;
}

impl Cno {
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
            call_agent(func, data, evd);
        }
    }
}

type AgentFn = unsafe extern "C" fn(DAT_PVOID, DAT_EVD_HANDLE);

thread_local! {
    /// Agent calls held back while this thread handles connection events
    /// under the CM lock: an agent may call back into DAT (free an EP, say),
    /// which takes that lock.
    static HELD: RefCell<Option<Vec<(AgentFn, usize, usize)>>> = const { RefCell::new(None) };
}

fn call_agent(func: AgentFn, data: usize, evd: DAT_EVD_HANDLE) {
    let held = HELD.with(|h| h.borrow_mut().as_mut().map(|calls| calls.push((func, data, evd as usize))).is_some());
    if !held {
        invoke(func, data, evd as usize);
    }
}

fn invoke(func: AgentFn, data: usize, evd: usize) {
    // SAFETY: the consumer's agent, called as DAT defines it with its own
    // instance data and the EVD that triggered the CNO.
    unsafe { func(data as DAT_PVOID, evd as DAT_EVD_HANDLE) };
}

/// Ends the outermost held section: makes the held calls, or on a panic in
/// the section drops them, so the thread never stays in holding mode.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let calls = HELD.with(|h| h.borrow_mut().take()).unwrap_or_default();
        if !std::thread::panicking() {
            for (func, data, evd) in calls {
                invoke(func, data, evd);
            }
        }
    }
}

/// Runs `f` with agent calls held until it returns (outside any lock `f`
/// takes), then makes them.
pub fn with_agents_held<R>(f: impl FnOnce() -> R) -> R {
    let outer = HELD.with(|h| {
        let mut h = h.borrow_mut();
        h.is_none().then(|| *h = Some(Vec::new())).is_some()
    });
    // Lazily: a Release made and dropped for an inner section would end the outer one.
    let _release = outer.then(|| Release);
    f()
}

/// Removes `evd` from the CNO `cno` (a handle value, 0 for none).
pub fn detach_from(cno: usize, evd: DAT_EVD_HANDLE) {
    if cno == 0 {
        return;
    }
    if let Ok(c) = handle::get::<Cno>(cno as DAT_HANDLE) {
        c.evds.lock().unwrap_or_else(|e| e.into_inner()).retain(|&e| e != evd as usize);
    }
}

pub unsafe extern "C" fn create(ia_h: DAT_IA_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT, out: *mut DAT_CNO_HANDLE) -> DAT_RETURN {
    guard("dat_cno_create", || {
        let ia = match handle::get::<Ia>(ia_h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        let Some(wake) = Wake::new() else { return no_resources(DAT_RESOURCE_MEMORY) };
        let h = POOL.insert(Cno {
            ia,
            ia_handle: ia_h as usize,
            evds: Mutex::new(Vec::new()),
            wake,
            agent: Mutex::new((agent.instance_data as usize, agent.proxy_agent_func)),
            waiting: AtomicBool::new(false),
        }, ia.table());
        ia.adopt(h, RANK, destroy);
        // SAFETY: checked non-null.
        unsafe { *out = h };
        DAT_SUCCESS
    })
}

fn destroy(h: DAT_HANDLE) {
    if let Ok(c) = handle::get::<Cno>(h) {
        c.ia.disown(h);
        POOL.remove(h);
    }
}

pub unsafe extern "C" fn free(h: DAT_CNO_HANDLE) -> DAT_RETURN {
    guard("dat_cno_free", || {
        let c = match handle::get::<Cno>(h) {
            Ok(c) => c,
            Err(e) => return e,
        };
        if !c.evds.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            return invalid_state(DAT_INVALID_STATE_CNO_IN_USE);
        }
        destroy(h);
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn modify_agent(h: DAT_CNO_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT) -> DAT_RETURN {
    guard("dat_cno_modify_agent", || match handle::get::<Cno>(h) {
        Ok(c) => {
            *c.agent.lock().unwrap_or_else(|e| e.into_inner()) = (agent.instance_data as usize, agent.proxy_agent_func);
            DAT_SUCCESS
        }
        Err(e) => e,
    })
}

pub unsafe extern "C" fn query(h: DAT_CNO_HANDLE, _mask: DAT_CNO_PARAM_MASK, out: *mut DAT_CNO_PARAM) -> DAT_RETURN {
    guard("dat_cno_query", || {
        let c = match handle::get::<Cno>(h) {
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
pub unsafe extern "C-unwind" fn wait(h: DAT_CNO_HANDLE, timeout: DAT_TIMEOUT, evd_out: *mut DAT_EVD_HANDLE) -> DAT_RETURN {
    let begun = dat_abi::cancel::deferred(|| {
        guard_or("dat_cno_wait", Err(INTERNAL), || {
            let c = handle::get::<Cno>(h)?;
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
    wake::cancellable("dat_cno_wait", |_| wait_round(c, &deadline, out))
}

fn ready_evd(c: &Cno) -> Option<usize> {
    let evds = c.evds.lock().unwrap_or_else(|e| e.into_inner()).clone();
    evds.into_iter().find(|&e| handle::get::<Evd>(e as DAT_HANDLE).is_ok_and(|evd| evd.has_event()))
}

fn wait_round(c: &Cno, deadline: &wake::Deadline, out: &mut DAT_EVD_HANDLE) -> wake::Step<Vec<i32>> {
    use wake::Step::{Done, Sleep};
    if let Some(e) = ready_evd(c) {
        *out = e as DAT_EVD_HANDLE;
        return Done(DAT_SUCCESS);
    }
    c.wake.clear();
    let mut fds = vec![c.wake.fd()];
    let evds = c.evds.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for e in evds {
        if let Ok(evd) = handle::get::<Evd>(e as DAT_HANDLE) {
            fds.extend(evd.fds().into_iter().filter(|&fd| fd >= 0));
            evd.arm();
        }
    }
    if let Some(e) = ready_evd(c) {
        *out = e as DAT_EVD_HANDLE;
        return Done(DAT_SUCCESS);
    }
    match deadline.remaining() {
        Ok(left) => Sleep(fds, left),
        Err(()) => Done(error(DAT_TIMEOUT_EXPIRED, 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
    static SEEN_WHILE_HELD: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn record(data: DAT_PVOID, evd: DAT_EVD_HANDLE) {
        CALLS.lock().unwrap().push((data as usize, evd as usize));
    }

    #[test]
    fn agents_called_at_once_or_after_the_held_section() {
        CALLS.lock().unwrap().clear();
        call_agent(record, 1, 0x10 as DAT_EVD_HANDLE);
        assert_eq!(*CALLS.lock().unwrap(), vec![(1, 0x10)]);
        with_agents_held(|| {
            call_agent(record, 2, 0x20 as DAT_EVD_HANDLE);
            // Nested sections hand their calls to the outermost one.
            with_agents_held(|| call_agent(record, 3, 0x30 as DAT_EVD_HANDLE));
            SEEN_WHILE_HELD.store(CALLS.lock().unwrap().len(), Ordering::SeqCst);
        });
        assert_eq!(SEEN_WHILE_HELD.load(Ordering::SeqCst), 1, "no agent may run inside the held section");
        assert_eq!(*CALLS.lock().unwrap(), vec![(1, 0x10), (2, 0x20), (3, 0x30)]);
        call_agent(record, 4, 0x40 as DAT_EVD_HANDLE);
        assert_eq!(CALLS.lock().unwrap().len(), 4, "holding ends with the outermost section");

        // A section that panics drops what it held and leaves the thread
        // calling agents at once again.
        let r = std::panic::catch_unwind(|| {
            with_agents_held(|| {
                call_agent(record, 5, 0x50 as DAT_EVD_HANDLE);
                panic!("handler failed");
            })
        });
        assert!(r.is_err());
        call_agent(record, 6, 0x60 as DAT_EVD_HANDLE);
        assert_eq!(CALLS.lock().unwrap().last(), Some(&(6, 0x60)));
        assert_eq!(CALLS.lock().unwrap().len(), 5);
    }
}
