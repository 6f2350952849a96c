//! A hasher for the backend's maps, whose keys are counters (connection
//! tokens, ids) or random 32-bit values we drew ourselves (memory keys):
//! one multiply spreads them. SipHash, the std default, guards against
//! keys chosen to collide, which none of these can be, and costs a post
//! and a poll a few dozen instructions per lookup.

use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default)]
pub struct Mix(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(K);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(K);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
}

pub type Map<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Mix>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_spread_over_buckets() {
        let mut m: Map<u64, u64> = Map::default();
        for i in 0..10_000u64 {
            m.insert(i, i * 2);
        }
        assert!((0..10_000u64).all(|i| m.get(&i) == Some(&(i * 2))));
        // The top bits (what hashbrown's control bytes use) differ.
        let tops: std::collections::HashSet<u64> = (0..256u64).map(|i| {
            let mut h = Mix::default();
            h.write_u64(i);
            h.finish() >> 57
        }).collect();
        assert!(tops.len() > 64, "{} distinct top-7-bit groups of 256", tops.len());
    }
}
