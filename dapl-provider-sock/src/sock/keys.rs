//! Protection domains, memory regions and windows, and the key tables the
//! data path checks every access against.
//!
//! A key is 32 random bits (getrandom), drawn anew for every registration
//! and every window bind, so a peer cannot walk from one key to the next.
//! An lkey reaches only its region for local access; an rkey reaches only
//! the range and rights it was given (a region registered with remote
//! rights, or a bound window), and only from a QP of the same PD.

use super::Sock;
use super::device::Shared;
use dapl_core::backend::{MrOps, MwOps, PdOps};
use dat_abi::*;
use super::hash::Map as HashMap;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

pub const LOCAL_WRITE: u32 = 1;
pub const REMOTE_READ: u32 = 2;
pub const REMOTE_WRITE: u32 = 4;
pub const REMOTE_ATOMIC: u32 = 8;

/// Memory a key reaches.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    pub addr: u64,
    pub len: u64,
    pub access: u32,
    pub pd: u32,
    /// A type 2 window answers only on the QP that bound it (0: any QP).
    pub qp: u32,
    /// A window's key (invalidation may remove it), not a region's.
    pub window: bool,
}

impl Region {
    /// Whether [addr, addr+len) lies inside and `need` rights are granted.
    #[inline]
    pub fn allows(&self, addr: u64, len: u64, need: u32, pd: u32) -> bool {
        self.pd == pd
            && self.access & need == need
            && addr >= self.addr
            && addr.checked_add(len).is_some_and(|end| end <= self.addr + self.len)
    }
}

static LKEYS: RwLock<Option<HashMap<u32, Region>>> = RwLock::new(None);
static RKEYS: RwLock<Option<HashMap<u32, Region>>> = RwLock::new(None);

fn random_u32() -> u32 {
    let mut v = 0u32;
    // SAFETY: getrandom writes at most 4 bytes into v.
    let n = unsafe { libc::getrandom(&mut v as *mut u32 as *mut libc::c_void, 4, 0) };
    if n != 4 {
        // No entropy source: still not sequential, from the clock and a counter.
        static MIX: AtomicU32 = AtomicU32::new(0x9e37_79b9);
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        v = MIX.fetch_add(0x9e37_79b9, Ordering::Relaxed).rotate_left(13) ^ t.wrapping_mul(0x85eb_ca6b);
    }
    v
}

/// Puts `r` in `table` under a fresh random key (never 0).
fn insert_new(table: &RwLock<Option<HashMap<u32, Region>>>, r: Region) -> u32 {
    let mut t = table.write().unwrap_or_else(|e| e.into_inner());
    let map = t.get_or_insert_with(HashMap::default);
    loop {
        let k = random_u32();
        if k != 0 && !map.contains_key(&k) {
            map.insert(k, r);
            return k;
        }
    }
}

fn remove(table: &RwLock<Option<HashMap<u32, Region>>>, key: u32) -> Option<Region> {
    let mut t = table.write().unwrap_or_else(|e| e.into_inner());
    let r = t.as_mut().and_then(|m| m.remove(&key));
    // Under the write lock, so a lookup that saw the key's region read
    // the older generation (see `KeyCache`).
    GENERATION.fetch_add(1, Ordering::Release);
    r
}

/// Counts removals from the key tables: a cached lookup made in an older
/// generation may name memory that is gone.
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The last local key a queue checked, and its region: a send queue or a
/// stream's receives usually name one buffer's key again and again, and a
/// lookup in the shared table costs its lock and a hash (about 90
/// instructions) where this costs a load and two compares. Valid while no
/// key was removed since it was filled; a consumer that frees an LMR with
/// requests still naming it sees them fail as before, once its free returns.
#[derive(Clone, Copy)]
pub struct KeyCache {
    generation: u64,
    key: u32,
    region: Region,
}

impl Default for KeyCache {
    fn default() -> Self {
        KeyCache { generation: 0, key: 0, region: Region { addr: 0, len: 0, access: 0, pd: 0, qp: 0, window: false } }
    }
}

impl KeyCache {
    /// `lookup_local`, from the cache when it still holds.
    /// Whether a local segment lies in its key's region, with `need`
    /// rights, in protection domain `pd`.
    #[inline]
    pub fn allows(&mut self, key: u32, addr: u64, len: u64, need: u32, pd: u32) -> bool {
        self.local(key).is_some_and(|r| r.allows(addr, len, need, pd))
    }

    #[inline]
    pub fn local(&mut self, key: u32) -> Option<Region> {
        // Read before the table: a removal racing the lookup below then
        // leaves this entry already stale.
        let g = GENERATION.load(Ordering::Acquire);
        if g == self.generation && key == self.key {
            return Some(self.region);
        }
        let r = lookup_local(key)?;
        *self = KeyCache { generation: g, key, region: r };
        Some(r)
    }
}

#[inline]
pub fn lookup_local(key: u32) -> Option<Region> {
    LKEYS.read().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&key).copied())
}

#[inline]
pub fn lookup_remote(key: u32) -> Option<Region> {
    RKEYS.read().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&key).copied())
}

/// Gives a window `key` over `r`, replacing what it reached before.
pub fn set_window(key: u32, r: Region) {
    RKEYS.write().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::default).insert(key, r);
}

/// Takes a window key out of use; false if it is no window's.
pub fn clear_window(key: u32) -> bool {
    let mut t = RKEYS.write().unwrap_or_else(|e| e.into_inner());
    let Some(m) = t.as_mut() else { return false };
    if m.get(&key).is_some_and(|r| r.window) {
        m.remove(&key);
        true
    } else {
        false
    }
}

/// A key for a window that is not yet in either table; reserved by the
/// caller's binding it (a collision with a live key is redrawn).
pub fn fresh_key() -> u32 {
    let t = RKEYS.read().unwrap_or_else(|e| e.into_inner());
    loop {
        let k = random_u32();
        if k != 0 && !t.as_ref().is_some_and(|m| m.contains_key(&k)) {
            return k;
        }
    }
}

pub fn access_of(privs: DAT_MEM_PRIV_FLAGS) -> u32 {
    let mut a = 0;
    if privs & (DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG) != 0 {
        a |= LOCAL_WRITE;
    }
    if privs & DAT_MEM_PRIV_REMOTE_READ_FLAG != 0 {
        a |= REMOTE_READ;
    }
    if privs & DAT_MEM_PRIV_REMOTE_WRITE_FLAG != 0 {
        a |= REMOTE_WRITE;
    }
    if privs & DAT_IB_MEM_PRIV_REMOTE_ATOMIC != 0 {
        a |= REMOTE_ATOMIC | LOCAL_WRITE;
    }
    a
}

/// Whether every page of [addr, addr+len) is mapped: a device would fail
/// to pin a hole, and our progress thread must never fault on one.
fn mapped(addr: usize, len: usize) -> bool {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: sysconf has no memory effects.
    let page = *PAGE.get_or_init(|| unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize);
    let Some(end) = addr.checked_add(len) else { return false };
    let mut at = addr & !(page - 1);
    // Only mincore's return is read, never what it writes here: left
    // unset, as zeroing it cost every registration a 4 KiB memset (about
    // 4,100 instructions, three quarters of a small LMR's create and free).
    let mut vec = [const { std::mem::MaybeUninit::<u8>::uninit() }; 4096];
    while at < end {
        let n = ((end - at).div_ceil(page)).min(vec.len());
        // SAFETY: mincore only reads the page tables for the range and writes a byte per page into vec, which has n.
        if unsafe { libc::mincore(at as *mut libc::c_void, n * page, vec.as_mut_ptr().cast()) } != 0 {
            return false;
        }
        at += n * page;
    }
    true
}

pub struct Pd {
    pub id: u32,
    pub shared: Arc<Shared>,
}

impl Pd {
    pub fn new(shared: Arc<Shared>) -> Pd {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        Pd { id: NEXT.fetch_add(1, Ordering::Relaxed), shared }
    }
}

impl PdOps<Sock> for Pd {
    fn register(&self, addr: *mut libc::c_void, len: usize, privs: DAT_MEM_PRIV_FLAGS) -> io::Result<Mr> {
        if addr.is_null() && len > 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        if !mapped(addr as usize, len) {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        let region = Region { addr: addr as u64, len: len as u64, access: access_of(privs), pd: self.id, qp: 0, window: false };
        let lkey = insert_new(&LKEYS, region);
        // Only memory the peer may touch gets a key it can use.
        let remote = region.access & (REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC) != 0;
        let rkey = if remote { insert_new(&RKEYS, region) } else { fresh_key() };
        Ok(Mr { lkey, rkey, remote, region })
    }

    fn alloc_mw(&self, type2: bool) -> io::Result<Mw> {
        Ok(Mw { type2, pd: self.id, rkey: AtomicU32::new(fresh_key()) })
    }

    fn create_srq(&self, max_wr: u32, max_sge: u32, limit: u32) -> io::Result<super::srq::Srq> {
        super::srq::Srq::create(self, max_wr, max_sge, limit)
    }

    fn create_ah(&self, path: &super::ud::Path) -> io::Result<super::ud::Ah> {
        Ok(super::ud::Ah::new(*path))
    }
}

pub struct Mr {
    lkey: u32,
    rkey: u32,
    remote: bool,
    pub region: Region,
}

impl MrOps for Mr {
    #[inline]
    fn lkey(&self) -> u32 {
        self.lkey
    }

    #[inline]
    fn rkey(&self) -> u32 {
        self.rkey
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        remove(&LKEYS, self.lkey);
        if self.remote {
            remove(&RKEYS, self.rkey);
        }
    }
}

pub struct Mw {
    type2: bool,
    pub pd: u32,
    rkey: AtomicU32,
}

impl MwOps for Mw {
    fn is_type2(&self) -> bool {
        self.type2
    }

    fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Acquire)
    }

    fn next_rkey(&self) -> u32 {
        fresh_key()
    }

    fn set_rkey(&self, rkey: u32) {
        self.rkey.store(rkey, Ordering::Release)
    }
}

impl Mw {
    /// A type 1 bind changes the key at post time, as verbs does.
    pub fn rekey(&self) -> u32 {
        let k = fresh_key();
        self.rkey.store(k, Ordering::Release);
        k
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        clear_window(self.rkey.load(Ordering::Acquire));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_check_range_rights_and_pd() {
        let r = Region { addr: 0x1000, len: 0x100, access: REMOTE_READ, pd: 3, qp: 0, window: false };
        assert!(r.allows(0x1000, 0x100, REMOTE_READ, 3));
        assert!(!r.allows(0x1000, 0x101, REMOTE_READ, 3));
        assert!(!r.allows(0xfff, 1, REMOTE_READ, 3));
        assert!(!r.allows(0x1000, 8, REMOTE_WRITE, 3));
        assert!(!r.allows(0x1000, 8, REMOTE_READ, 4));
        assert!(!r.allows(u64::MAX, 2, REMOTE_READ, 3));
    }

    #[test]
    fn keys_are_not_sequential() {
        let a = insert_new(&LKEYS, Region { addr: 0, len: 1, access: 0, pd: 1, qp: 0, window: false });
        let b = insert_new(&LKEYS, Region { addr: 0, len: 1, access: 0, pd: 1, qp: 0, window: false });
        assert_ne!(a, b);
        assert!(b.wrapping_sub(a) > 16 || a.wrapping_sub(b) > 16);
        assert!(lookup_local(a).is_some());
        remove(&LKEYS, a);
        remove(&LKEYS, b);
        assert!(lookup_local(a).is_none());
    }

    #[test]
    fn a_cached_key_dies_with_its_region() {
        let r = Region { addr: 0x2000, len: 64, access: LOCAL_WRITE, pd: 7, qp: 0, window: false };
        let k = insert_new(&LKEYS, r);
        let other = insert_new(&LKEYS, Region { len: 8, ..r });
        let mut c = KeyCache::default();
        assert_eq!(c.local(k).map(|g| (g.addr, g.len)), Some((0x2000, 64)));
        assert_eq!(c.local(k).map(|g| g.len), Some(64), "from the cache");
        assert_eq!(c.local(other).map(|g| g.len), Some(8), "another key replaces it");
        assert_eq!(c.local(k).map(|g| g.len), Some(64));
        remove(&LKEYS, k);
        assert!(c.local(k).is_none(), "a removed key must not be served from the cache");
        assert_eq!(c.local(other).map(|g| g.len), Some(8));
        assert!(c.local(0).is_none());
        remove(&LKEYS, other);
        assert!(c.local(other).is_none());
    }
}
