//! The providers the fuzzer drives, and how each one's leaks are counted.

use crate::api::{LIVE_KINDS, Live};
use crate::ops::Profile;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Target {
    /// `libdaplmock.so.2`: the core on its in-memory backend, no wire.
    Mock,
    /// `libdaplsock.so.2`: the core on TCP/UDP sockets, over loopback.
    Sock,
    /// `libdaplibv.so.2`: the core on verbs and rdma_cm, over the netdev
    /// and address `--ia-params` and `--addr` name (the Soft-RoCE guest's).
    Ibv,
}

/// Where the wire targets' connects go (`--addr`): loopback for sock.
pub static ADDR: std::sync::OnceLock<std::net::Ipv4Addr> = std::sync::OnceLock::new();

/// The provider's ia_params (`--ia-params`), unquoted.
pub static IA_PARAMS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub fn addr() -> std::net::Ipv4Addr {
    *ADDR.get().unwrap_or(&std::net::Ipv4Addr::LOCALHOST)
}

impl Target {
    pub fn parse(s: &str) -> Option<Target> {
        match s {
            "mock" => Some(Target::Mock),
            "sock" => Some(Target::Sock),
            "ibv" => Some(Target::Ibv),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Mock => "fuzz-mock",
            Target::Sock => "fuzz-sock",
            Target::Ibv => "fuzz-ibv",
        }
    }

    pub fn library(self, lib_dir: &Path) -> PathBuf {
        lib_dir.join(match self {
            Target::Mock => "libdaplmock.so",
            Target::Sock => "libdaplsock.so.2",
            Target::Ibv => "libdaplibv.so.2",
        })
    }

    /// dat.conf's ia_params field, quoted: `--ia-params`, or the target's own.
    pub fn ia_params(self) -> String {
        let own = match self {
            Target::Mock => "mock0 1",
            Target::Sock => "lo 0",
            Target::Ibv => "dum0 0",
        };
        format!("\"{}\"", IA_PARAMS.get().map_or(own, String::as_str))
    }

    /// Connections form, data moves: every target but the mock.
    pub fn wire(self) -> bool {
        self != Target::Mock
    }

    pub fn profile(self) -> Profile {
        Profile { wire: self.wire() }
    }

    /// How long the end of a sequence waits for flushed completions and for
    /// threads to end: the sock provider's progress thread runs on its own.
    pub fn settle(self) -> Duration {
        match self {
            Target::Mock => Duration::from_millis(20),
            Target::Sock | Target::Ibv => Duration::from_secs(3),
        }
    }
}

/// What "closing the IA released everything" is measured by.
pub enum Leak {
    /// The mock backend's live-object counters.
    Mock(Live),
    /// The sock backend keeps no counters (and another branch is reworking
    /// its internals), so the process's own resources stand in for them:
    /// every socket, eventfd and epoll instance is a file descriptor, and
    /// every IA runs threads. Both must come back to what they were.
    Process,
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// What each open descriptor is, for a leak's report.
fn open_fds() -> Vec<String> {
    let Ok(d) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    d.flatten().map(|e| {
        let link = std::fs::read_link(e.path()).map_or("?".into(), |l| l.display().to_string());
        let what = link.strip_prefix("socket:[").and_then(|i| i.strip_suffix(']')).map(socket_of).unwrap_or_default();
        format!("{}={link}{what}", e.file_name().to_string_lossy())
    }).collect()
}

/// The /proc/net line of a socket inode (protocol, addresses, state), to tell a leaked listener from a stream.
fn socket_of(inode: &str) -> String {
    for proto in ["tcp", "udp", "tcp6", "udp6", "unix"] {
        let Ok(t) = std::fs::read_to_string(format!("/proc/self/net/{proto}")) else { continue };
        if let Some(l) = t.lines().find(|l| l.split_whitespace().any(|f| f == inode)) {
            return format!("({proto}: {})", l.split_whitespace().take(4).collect::<Vec<_>>().join(" "));
        }
    }
    String::new()
}

fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim().parse().unwrap_or(0))))
        .unwrap_or(0)
}

impl Leak {
    pub fn read(&self) -> Vec<(&'static str, usize)> {
        match self {
            Leak::Mock(live) => LIVE_KINDS.iter().copied().zip(live.read()).collect(),
            Leak::Process => vec![("fds", fds()), ("threads", threads())],
        }
    }

    /// Waits up to `settle` for the counts to come back to `baseline`; the
    /// differences if they do not.
    pub fn compare(&self, baseline: &[(&'static str, usize)], settle: Duration) -> Option<String> {
        let deadline = Instant::now() + settle;
        loop {
            let now = self.read();
            if now == baseline {
                return None;
            }
            if Instant::now() >= deadline {
                let diff: Vec<String> = baseline.iter().zip(now.iter())
                    .filter(|(b, a)| b.1 != a.1).map(|(b, a)| format!("{} {}->{}", b.0, b.1, a.1)).collect();
                let open = match self {
                    Leak::Process => format!("; open now: {}", open_fds().join(" ")),
                    Leak::Mock(_) => String::new(),
                };
                return Some(format!("{}{open}", diff.join(", ")));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// The TCP port the sock provider listens on for a qualifier (docs/sock.md:
/// above 65535 they fold as DAPL's rdma_cm provider folds them).
pub fn port_of(qual: u64) -> u64 {
    if qual > 0xffff { (qual % 32001) + 33534 } else { qual }
}
