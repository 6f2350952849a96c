//! The engine's connections, found by token in a few loads. A connection's
//! token is handed to epoll and to its QP and comes back on every event,
//! post and pass; a hash map (even with a one-multiply hash) cost a pass
//! about 30 instructions per lookup, and a send and its receive make a
//! dozen lookups. A token here names its slot and the slot's generation,
//! so a token kept after its connection ended (an event already fetched
//! in the same epoll batch, a QP's stale copy) finds nothing, even once the
//! slot holds a newer connection.
//!
//! Token layout: bit 63 set (the engine's other tokens, listeners and UD
//! sockets, count up from 1 and never reach it; 0 is the thread's
//! doorbell), bits 32..63 the slot's generation, bits 0..32 the slot.

const TAG: u64 = 1 << 63;
const GEN_MASK: u64 = (1 << 31) - 1;

struct Entry<T> {
    /// The token of the value held, or of the last one (then `val` is None).
    token: u64,
    val: Option<T>,
}

pub struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { entries: Vec::new(), free: Vec::new(), len: 0 }
    }
}

impl<T> Slab<T> {
    /// Whether `token` could name a slot of a slab (and not another table's key).
    #[inline]
    pub fn is_slab_token(token: u64) -> bool {
        token & TAG != 0
    }

    /// Stores `val` and returns its token.
    pub fn insert(&mut self, val: T) -> u64 {
        self.len += 1;
        if let Some(i) = self.free.pop() {
            let e = &mut self.entries[i as usize];
            let generation = ((e.token >> 32) + 1) & GEN_MASK;
            e.token = TAG | generation << 32 | i as u64;
            e.val = Some(val);
            return e.token;
        }
        let i = self.entries.len() as u64;
        assert!(i < u32::MAX as u64, "sock: connection slots exhausted");
        let token = TAG | i;
        self.entries.push(Entry { token, val: Some(val) });
        token
    }

    #[inline]
    fn slot(&self, token: u64) -> Option<&Entry<T>> {
        self.entries.get(token as u32 as usize).filter(|e| e.token == token)
    }

    #[inline]
    pub fn get(&self, token: &u64) -> Option<&T> {
        self.slot(*token)?.val.as_ref()
    }

    #[inline]
    pub fn get_mut(&mut self, token: &u64) -> Option<&mut T> {
        let t = *token;
        self.entries.get_mut(t as u32 as usize).filter(|e| e.token == t)?.val.as_mut()
    }

    pub fn contains_key(&self, token: &u64) -> bool {
        self.get(token).is_some()
    }

    pub fn remove(&mut self, token: &u64) -> Option<T> {
        let t = *token;
        let e = self.entries.get_mut(t as u32 as usize).filter(|e| e.token == t)?;
        let v = e.val.take()?;
        self.free.push(t as u32);
        self.len -= 1;
        Some(v)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.entries.iter().filter_map(|e| e.val.as_ref().map(|v| (e.token, v)))
    }

    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(t, _)| t)
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.iter().map(|(_, v)| v)
    }

    /// Empties the slab, handing out every value; the slots keep their
    /// generations, so the values' tokens stay dead.
    pub fn drain(&mut self) -> Vec<(u64, T)> {
        let mut out = Vec::with_capacity(self.len);
        for (i, e) in self.entries.iter_mut().enumerate() {
            if let Some(v) = e.val.take() {
                self.free.push(i as u32);
                out.push((e.token, v));
            }
        }
        self.len = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_finds_its_value_and_no_other() {
        let mut s: Slab<&str> = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert!(Slab::<()>::is_slab_token(a) && Slab::<()>::is_slab_token(b));
        assert_ne!(a, 0);
        assert_eq!((s.get(&a), s.get(&b), s.len()), (Some(&"a"), Some(&"b"), 2));
        // The engine's other tokens (small counters) and the doorbell's 0 miss.
        assert!((0..64u64).all(|t| s.get(&t).is_none()));
        assert_eq!(s.remove(&a), Some("a"));
        assert!(s.get(&a).is_none());
        assert_eq!((s.remove(&a), s.len()), (None, 1));
    }

    #[test]
    fn a_reused_slot_refuses_the_old_token() {
        let mut s: Slab<u32> = Slab::default();
        let old = s.insert(1);
        s.remove(&old);
        let new = s.insert(2);
        assert_eq!(new as u32, old as u32, "the freed slot is reused");
        assert_ne!(new, old);
        assert_eq!((s.get(&old), s.get(&new)), (None, Some(&2)));
        assert!(s.get_mut(&old).is_none() && s.remove(&old).is_none());
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn iteration_and_drain_see_live_values_only() {
        let mut s: Slab<u32> = Slab::default();
        let t: Vec<u64> = (0..5).map(|v| s.insert(v)).collect();
        s.remove(&t[1]);
        s.remove(&t[3]);
        let mut live: Vec<(u64, u32)> = s.iter().map(|(k, v)| (k, *v)).collect();
        live.sort();
        assert_eq!(live, vec![(t[0], 0), (t[2], 2), (t[4], 4)]);
        assert_eq!(s.keys().count(), 3);
        assert_eq!(s.values().sum::<u32>(), 6);
        let mut drained: Vec<u32> = s.drain().into_iter().map(|(_, v)| v).collect();
        drained.sort();
        assert_eq!(drained, vec![0, 2, 4]);
        assert!(s.len() == 0 && t.iter().all(|k| s.get(k).is_none()));
        let again = s.insert(9);
        assert!(!t.contains(&again));
        assert_eq!(s.get(&again), Some(&9));
    }
}
