//! Control messages between client and server, sent as ordinary DAT sends
//! on the test connection itself (no private data: providers differ in how
//! much they carry, and the buffers are only known after the connection).

use crate::args::{Mode, Test};

/// Every control message is this long; receive slots are this big.
pub const CTRL_LEN: usize = 64;
// The largest message, Test, ends with `signal` at bytes 36..40.
const _: () = assert!(CTRL_LEN >= 40);
const MAGIC: u32 = 0x3146_5044; // "DPF1"

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestReq {
    pub test: Test,
    pub size: u64,
    pub iters: u64,
    pub warmup: u64,
    pub window: u32,
    /// Streams: every how many posts one asks for a completion.
    pub signal: u32,
    pub mode: Mode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctrl {
    /// The sender's target area: where the peer may write and read, its
    /// remote key and length; and the sender's queue depth.
    Hello { addr: u64, rkey: u32, len: u64, depth: u32 },
    /// Client: run this test (the server posts its receives, then acks).
    Test(TestReq),
    /// Server: receives are posted, start.
    Ack,
    /// Server: cannot run the test (code says why).
    Nak(u8),
    /// Client: my side of the test is complete.
    Done,
    /// Server: mine too; ready for the next test.
    Fin,
    /// Client: no more tests.
    Quit,
}

pub const NAK_TOO_BIG: u8 = 1;
pub const NAK_BAD_TEST: u8 = 2;

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

impl Ctrl {
    fn kind(&self) -> u8 {
        match self {
            Ctrl::Hello { .. } => 1,
            Ctrl::Test(_) => 2,
            Ctrl::Ack => 3,
            Ctrl::Nak(_) => 4,
            Ctrl::Done => 5,
            Ctrl::Fin => 6,
            Ctrl::Quit => 7,
        }
    }

    /// Layout: magic u32, kind u8, then fields little-endian from byte 8.
    pub fn encode(&self) -> [u8; CTRL_LEN] {
        let mut b = [0u8; CTRL_LEN];
        put(&mut b, 0, &MAGIC.to_le_bytes());
        b[4] = self.kind();
        match *self {
            Ctrl::Hello { addr, rkey, len, depth } => {
                put(&mut b, 8, &addr.to_le_bytes());
                put(&mut b, 16, &len.to_le_bytes());
                put(&mut b, 24, &rkey.to_le_bytes());
                put(&mut b, 28, &depth.to_le_bytes());
            }
            Ctrl::Test(t) => {
                b[5] = t.test.code();
                b[6] = matches!(t.mode, Mode::Wait) as u8;
                put(&mut b, 8, &t.size.to_le_bytes());
                put(&mut b, 16, &t.iters.to_le_bytes());
                put(&mut b, 24, &t.warmup.to_le_bytes());
                put(&mut b, 32, &t.window.to_le_bytes());
                put(&mut b, 36, &t.signal.to_le_bytes());
            }
            Ctrl::Nak(code) => b[5] = code,
            Ctrl::Ack | Ctrl::Done | Ctrl::Fin | Ctrl::Quit => {}
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Ctrl, String> {
        if b.len() < CTRL_LEN {
            return Err(format!("control message of {} bytes, expected {CTRL_LEN}", b.len()));
        }
        if u32_at(b, 0) != MAGIC {
            return Err(format!("control message with bad magic {:#010x} (peer is not dat-perf, or another version)", u32_at(b, 0)));
        }
        Ok(match b[4] {
            1 => Ctrl::Hello { addr: u64_at(b, 8), len: u64_at(b, 16), rkey: u32_at(b, 24), depth: u32_at(b, 28) },
            2 => Ctrl::Test(TestReq {
                test: Test::from_code(b[5]).ok_or_else(|| format!("unknown test code {}", b[5]))?,
                mode: if b[6] == 1 { Mode::Wait } else { Mode::Poll },
                size: u64_at(b, 8),
                iters: u64_at(b, 16),
                warmup: u64_at(b, 24),
                window: u32_at(b, 32),
                // A client from before --signal leaves this zero: every post signaled.
                signal: u32_at(b, 36).max(1),
            }),
            3 => Ctrl::Ack,
            4 => Ctrl::Nak(b[5]),
            5 => Ctrl::Done,
            6 => Ctrl::Fin,
            7 => Ctrl::Quit,
            k => return Err(format!("unknown control message kind {k}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let msgs = [
            Ctrl::Hello { addr: 0x7f00_1234_5000, rkey: 0xdead_beef, len: 4 << 20, depth: 512 },
            Ctrl::Test(TestReq { test: Test::ReadBibw, size: 65536, iters: 1000, warmup: 10, window: 64, signal: 1, mode: Mode::Wait }),
            Ctrl::Test(TestReq { test: Test::SendLat, size: 1, iters: 1, warmup: 0, window: 1, signal: 1, mode: Mode::Poll }),
            Ctrl::Test(TestReq { test: Test::MsgRate, size: 8, iters: 1 << 33, warmup: 100, window: 64, signal: 16, mode: Mode::Poll }),
            Ctrl::Test(TestReq { test: Test::WriteBibw, size: 4096, iters: 7, warmup: 3, window: u32::MAX, signal: u32::MAX - 1, mode: Mode::Wait }),
            Ctrl::Ack,
            Ctrl::Nak(NAK_TOO_BIG),
            Ctrl::Done,
            Ctrl::Fin,
            Ctrl::Quit,
        ];
        for m in msgs {
            assert_eq!(Ctrl::decode(&m.encode()), Ok(m));
        }
    }

    #[test]
    fn signal_on_the_wire() {
        let req = TestReq { test: Test::SendBw, size: 64, iters: 10, warmup: 2, window: 32, signal: 0x0102_0304, mode: Mode::Poll };
        let b = Ctrl::Test(req).encode();
        assert_eq!(&b[32..40], &[32, 0, 0, 0, 4, 3, 2, 1]);
        // What a client from before --signal sends.
        let mut old = b;
        old[36..40].fill(0);
        assert_eq!(Ctrl::decode(&old), Ok(Ctrl::Test(TestReq { signal: 1, ..req })));
    }

    #[test]
    fn rejects_garbage() {
        assert!(Ctrl::decode(&[0u8; CTRL_LEN]).unwrap_err().contains("magic"));
        assert!(Ctrl::decode(&[0u8; 10]).is_err());
        let mut b = Ctrl::Ack.encode();
        b[4] = 99;
        assert!(Ctrl::decode(&b).unwrap_err().contains("kind"));
        let mut b = Ctrl::Test(TestReq { test: Test::SendBw, size: 1, iters: 1, warmup: 0, window: 1, signal: 1, mode: Mode::Poll }).encode();
        b[5] = 200;
        assert!(Ctrl::decode(&b).unwrap_err().contains("test code"));
    }
}
