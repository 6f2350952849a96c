//! Command line: which tests, sizes, iteration counts, and which side we are.

pub const USAGE: &str = "\
usage: dat-perf --ia NAME [options]                     server (waits for one client)
       dat-perf --ia NAME --server ADDR [options]       client (runs the tests)
       dat-perf --ia NAME --test lmr_reg [options]      local tests need no peer
       dat-perf --verbs DEV --test ibv_reg [options]    native verbs registration cost

Latency, bandwidth and message rate over the DAT 2.0 API, through
libdat2.so.2 (found like any DAT program finds it: LD_LIBRARY_PATH, ld.so
cache), on whichever provider dat.conf names for the IA. The client drives:
the server takes each test's parameters from it.

  --ia NAME, -i NAME    the IA (dat.conf entry) to open
  --server ADDR, -s     be the client and connect to ADDR (IPv4 address or name)
  --port N, -q N        connection qualifier (default 20518)
  --test LIST, -t       comma-separated: send_lat write_lat read_lat send_bw write_bw
                        read_bw send_bibw write_bibw read_bibw msg_rate lmr_reg
                        ibv_reg, or all (default: send_lat)
  --sizes LIST          message sizes, e.g. 1,64,4K,64K,4M (default 64,4K,64K;
                        msg_rate 64; lmr_reg and ibv_reg 4K,64K,1M,16M,64M)
  --max-size N          all powers of two from 1 byte to N instead of --sizes
  --iters N, -n N       measured iterations per size (default 1000)
  --iter-bytes N        fewer iterations for large messages: per size, N / size
                        iterations, but no more than --iters and no fewer than
                        --min-iters (e.g. 64M: 64 KiB runs 1000, 4 MiB 100)
  --min-iters N         floor for --iter-bytes (default 100)
  --warmup N, -w N      untimed iterations first (default 100)
  --window N            operations in flight for bandwidth and message rate (default 64)
  --signal N            in those streams, a completion for every N-th post only, the
                        rest posted with DAT_COMPLETION_SUPPRESS_FLAG (like perftest's
                        --cq-mod); 1 to --window (default 1: every post signaled)
  --mode poll|wait      reap completions with dat_evd_dequeue (default) or dat_evd_wait
  --depth N             send/receive queue depth of the endpoint (default 512)
  --timeout SECS        longest wait for any one completion or connection (default 30)
  --verbs DEV           device for ibv_reg (native ibv_reg_mr + ibv_dereg_mr)
  --json                machine-readable output
  --samples FILE        also write every measured iteration of the latency tests to
                        FILE, one line each: test, size, iteration, microseconds
                        (for the tail and for slow phases a mean hides)
  --quiet               no progress line
  -h, --help            this text

Latencies are in microseconds from the monotonic clock: send_lat and
write_lat report half the round trip (as perftest does), read_lat the whole
read. MB/s is 2^20 bytes per second (as perftest's MB/sec); bi-directional
figures add both directions. Exit status: 0 all tests ran; 1 a test or the
connection failed; 2 usage error.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    SendLat,
    WriteLat,
    ReadLat,
    SendBw,
    WriteBw,
    ReadBw,
    SendBibw,
    WriteBibw,
    ReadBibw,
    MsgRate,
    LmrReg,
    IbvReg,
}

/// The transfer a network test is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Send,
    Write,
    Read,
}

pub const ALL_NETWORK: [Test; 10] = [
    Test::SendLat,
    Test::WriteLat,
    Test::ReadLat,
    Test::SendBw,
    Test::WriteBw,
    Test::ReadBw,
    Test::SendBibw,
    Test::WriteBibw,
    Test::ReadBibw,
    Test::MsgRate,
];

impl Test {
    pub fn name(self) -> &'static str {
        match self {
            Test::SendLat => "send_lat",
            Test::WriteLat => "write_lat",
            Test::ReadLat => "read_lat",
            Test::SendBw => "send_bw",
            Test::WriteBw => "write_bw",
            Test::ReadBw => "read_bw",
            Test::SendBibw => "send_bibw",
            Test::WriteBibw => "write_bibw",
            Test::ReadBibw => "read_bibw",
            Test::MsgRate => "msg_rate",
            Test::LmrReg => "lmr_reg",
            Test::IbvReg => "ibv_reg",
        }
    }

    pub fn from_name(s: &str) -> Option<Test> {
        ALL_NETWORK.iter().chain(&[Test::LmrReg, Test::IbvReg]).copied().find(|t| t.name() == s)
    }

    /// Wire code in the control messages.
    pub fn code(self) -> u8 {
        self as u8 + 1
    }

    pub fn from_code(c: u8) -> Option<Test> {
        ALL_NETWORK.iter().chain(&[Test::LmrReg, Test::IbvReg]).copied().find(|t| t.code() == c)
    }

    /// Runs in one process, without a peer.
    pub fn is_local(self) -> bool {
        matches!(self, Test::LmrReg | Test::IbvReg)
    }

    pub fn is_latency(self) -> bool {
        matches!(self, Test::SendLat | Test::WriteLat | Test::ReadLat)
    }

    pub fn op(self) -> Op {
        match self {
            Test::SendLat | Test::SendBw | Test::SendBibw | Test::MsgRate => Op::Send,
            Test::WriteLat | Test::WriteBw | Test::WriteBibw => Op::Write,
            _ => Op::Read,
        }
    }

    pub fn bidirectional(self) -> bool {
        matches!(self, Test::SendBibw | Test::WriteBibw | Test::ReadBibw)
    }

    fn default_sizes(self) -> Vec<u64> {
        match self {
            Test::MsgRate => vec![64],
            Test::LmrReg | Test::IbvReg => vec![4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20],
            _ => vec![64, 4 << 10, 64 << 10],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Poll,
    Wait,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Poll => "poll",
            Mode::Wait => "wait",
        }
    }
}

/// Largest message a network test takes: the buffers are registered whole.
pub const MAX_SIZE: u64 = 1 << 30;

#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    pub ia: Option<String>,
    pub server: Option<String>,
    pub port: u64,
    pub tests: Vec<Test>,
    pub sizes: Option<Vec<u64>>,
    pub iters: u64,
    /// With it, iterations shrink for large messages (see `iters_for`).
    pub iter_bytes: Option<u64>,
    pub min_iters: u64,
    pub warmup: u64,
    pub window: u32,
    /// Every how many stream posts one is signaled (the others suppressed).
    pub signal: u32,
    pub mode: Mode,
    pub depth: u32,
    pub timeout_s: u64,
    pub verbs: Option<String>,
    pub json: bool,
    pub quiet: bool,
    /// Where the latency tests' per-iteration times go (`--samples`).
    pub samples: Option<String>,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            ia: None,
            server: None,
            port: 20518,
            tests: vec![Test::SendLat],
            sizes: None,
            iters: 1000,
            iter_bytes: None,
            min_iters: 100,
            warmup: 100,
            window: 64,
            signal: 1,
            mode: Mode::Poll,
            depth: 512,
            timeout_s: 30,
            verbs: None,
            json: false,
            quiet: false,
            samples: None,
        }
    }
}

// Made once per run: the size of `Run` against `Help` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
pub enum Cmd {
    Run(Args),
    Help,
}

impl Args {
    pub fn sizes_for(&self, t: Test) -> Vec<u64> {
        self.sizes.clone().unwrap_or_else(|| t.default_sizes())
    }

    /// Measured iterations at `size`: `--iters`, or with `--iter-bytes B`
    /// B / size clamped to [min(--min-iters, --iters), --iters], so a sweep
    /// up to megabytes takes seconds rather than minutes. tools/bench-host.sh
    /// computes the same for the other stacks.
    pub fn iters_for(&self, size: u64) -> u64 {
        match self.iter_bytes {
            None => self.iters,
            Some(b) => (b / size.max(1)).clamp(self.min_iters.min(self.iters), self.iters),
        }
    }

    /// Whether this invocation needs a peer. Without --server that makes it
    /// the server, which serves whatever the client asks for.
    pub fn networked(&self) -> bool {
        self.tests.iter().any(|t| !t.is_local())
    }
}

/// "4096", "4K", "64KiB", "4M", "1G" (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().map_err(|_| format!("bad size '{s}'"))?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("bad size '{s}' (use a number with an optional K, M or G)")),
    };
    let v = n.checked_mul(mult).ok_or_else(|| format!("size '{s}' too large"))?;
    if v == 0 {
        return Err(format!("size '{s}' must be at least 1 byte"));
    }
    Ok(v)
}

fn parse_num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{flag}: '{v}' is not a valid number"))
}

pub fn parse<I: IntoIterator<Item = String>>(argv: I) -> Result<Cmd, String> {
    let mut a = Args::default();
    let mut max_size: Option<u64> = None;
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--ia" | "-i" => a.ia = Some(value()?),
            "--server" | "-s" => a.server = Some(value()?),
            "--port" | "-q" => a.port = parse_num(&flag, &value()?)?,
            "--test" | "-t" => {
                let mut tests = Vec::new();
                for name in value()?.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if name == "all" {
                        tests.extend(ALL_NETWORK);
                        tests.push(Test::LmrReg);
                    } else {
                        tests.push(Test::from_name(name).ok_or_else(|| format!("unknown test '{name}'"))?);
                    }
                }
                if tests.is_empty() {
                    return Err("--test needs at least one test".into());
                }
                a.tests = tests;
            }
            "--sizes" => {
                let v = value()?;
                let sizes = v.split(',').filter(|s| !s.trim().is_empty()).map(parse_size).collect::<Result<Vec<_>, _>>()?;
                if sizes.is_empty() {
                    return Err("--sizes needs at least one size".into());
                }
                a.sizes = Some(sizes);
            }
            "--max-size" => max_size = Some(parse_size(&value()?)?),
            "--iters" | "-n" => a.iters = parse_num(&flag, &value()?)?,
            "--iter-bytes" => a.iter_bytes = Some(parse_size(&value()?)?),
            "--min-iters" => a.min_iters = parse_num(&flag, &value()?)?,
            "--warmup" | "-w" => a.warmup = parse_num(&flag, &value()?)?,
            "--window" => a.window = parse_num(&flag, &value()?)?,
            "--signal" => a.signal = parse_num(&flag, &value()?)?,
            "--depth" => a.depth = parse_num(&flag, &value()?)?,
            "--timeout" => a.timeout_s = parse_num(&flag, &value()?)?,
            "--mode" => {
                a.mode = match value()?.as_str() {
                    "poll" => Mode::Poll,
                    "wait" => Mode::Wait,
                    m => return Err(format!("--mode: '{m}' is neither poll nor wait")),
                }
            }
            "--verbs" => a.verbs = Some(value()?),
            "--json" => a.json = true,
            "--quiet" => a.quiet = true,
            "--samples" => a.samples = Some(value()?),
            "-h" | "--help" => return Ok(Cmd::Help),
            _ => return Err(format!("unknown argument '{arg}'")),
        }
    }
    if let Some(m) = max_size {
        if a.sizes.is_some() {
            return Err("give --sizes or --max-size, not both".into());
        }
        a.sizes = Some(std::iter::successors(Some(1u64), |s| s.checked_mul(2)).take_while(|s| *s <= m).collect());
    }
    if let Some(big) = a.sizes.iter().flatten().find(|s| **s > MAX_SIZE) {
        return Err(format!("size {big} is larger than the {MAX_SIZE}-byte limit"));
    }
    if a.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    if a.min_iters == 0 {
        return Err("--min-iters must be at least 1".into());
    }
    if a.window == 0 {
        return Err("--window must be at least 1".into());
    }
    // Past the window a full window could hold no signaled post, and the
    // stream would wait for a completion that never comes.
    if a.signal == 0 || a.signal > a.window {
        return Err(format!("--signal must be between 1 and the window ({}), got {}", a.window, a.signal));
    }
    if a.depth < 16 {
        return Err("--depth must be at least 16".into());
    }
    if a.window + 8 > a.depth {
        return Err(format!("--window {} needs --depth of at least {}", a.window, a.window + 8));
    }
    if a.timeout_s == 0 {
        return Err("--timeout must be at least 1 second".into());
    }
    if a.tests.contains(&Test::IbvReg) && a.verbs.is_none() {
        return Err("ibv_reg needs --verbs DEV (e.g. --verbs rxe0)".into());
    }
    let needs_ia = a.networked() || a.tests.contains(&Test::LmrReg);
    if needs_ia && a.ia.is_none() {
        return Err("--ia NAME is required (the dat.conf entry to open)".into());
    }
    Ok(Cmd::Run(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Args, String> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Cmd::Run(a) => Ok(a),
            Cmd::Help => Err("help".into()),
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4m"), Ok(4 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("4X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("K").is_err());
    }

    #[test]
    fn defaults_and_server() {
        let a = run(&["--ia", "x"]).unwrap();
        assert_eq!(a.server, None);
        assert_eq!(a.tests, vec![Test::SendLat]);
        assert_eq!(a.sizes_for(Test::SendLat), vec![64, 4096, 65536]);
        assert_eq!(a.sizes_for(Test::MsgRate), vec![64]);
        assert!(a.networked());
        assert_eq!(a.mode, Mode::Poll);
    }

    #[test]
    fn client_options() {
        let a = run(&["-i", "ibv", "-s", "10.0.0.1", "-q", "7", "--test", "send_lat,write_bw", "--sizes=1,4K", "-n", "50", "--warmup", "5", "--window", "16", "--mode", "wait", "--json"]).unwrap();
        assert_eq!(a.ia.as_deref(), Some("ibv"));
        assert_eq!(a.server.as_deref(), Some("10.0.0.1"));
        assert_eq!(a.port, 7);
        assert_eq!(a.tests, vec![Test::SendLat, Test::WriteBw]);
        assert_eq!(a.sizes, Some(vec![1, 4096]));
        assert_eq!((a.iters, a.warmup, a.window, a.mode, a.json), (50, 5, 16, Mode::Wait, true));
        assert_eq!(a.sizes_for(Test::MsgRate), vec![1, 4096]);
        assert_eq!(a.samples, None);
        assert_eq!(run(&["-i", "x", "-s", "h", "--samples", "/tmp/s.txt"]).unwrap().samples.as_deref(), Some("/tmp/s.txt"));
        assert!(run(&["-i", "x", "-s", "h", "--samples"]).is_err());
    }

    #[test]
    fn signal() {
        assert_eq!(run(&["--ia", "x"]).unwrap().signal, 1);
        let a = run(&["--ia", "x", "--signal", "16"]).unwrap();
        assert_eq!((a.signal, a.window), (16, 64));
        assert_eq!(run(&["--ia", "x", "--signal=64"]).unwrap().signal, 64);
        assert_eq!(run(&["--ia", "x", "--window", "8", "--signal", "8"]).unwrap().signal, 8);
        let e = run(&["--ia", "x", "--window", "64", "--signal", "100"]).unwrap_err();
        assert!(e.contains("--signal must be between 1 and the window (64), got 100"), "{e}");
        assert!(run(&["--ia", "x", "--signal", "0"]).unwrap_err().contains("--signal"));
        assert!(run(&["--ia", "x", "--signal", "-1"]).unwrap_err().contains("not a valid number"));
        assert!(run(&["--ia", "x", "--signal"]).unwrap_err().contains("needs a value"));
    }

    #[test]
    fn iteration_budget() {
        let a = run(&["--ia", "x", "--iters", "1000", "--iter-bytes", "64M"]).unwrap();
        assert_eq!(a.iters_for(1), 1000);
        assert_eq!(a.iters_for(64 << 10), 1000);
        assert_eq!(a.iters_for(128 << 10), 512);
        assert_eq!(a.iters_for(1 << 20), 100);
        assert_eq!(a.iters_for(4 << 20), 100);
        let a = run(&["--ia", "x", "--iters", "50", "--iter-bytes", "1K", "--min-iters", "10"]).unwrap();
        assert_eq!(a.iters_for(8), 50);
        assert_eq!(a.iters_for(64), 16);
        assert_eq!(a.iters_for(4096), 10);
        // A floor above --iters is capped by --iters.
        let a = run(&["--ia", "x", "--iters", "20", "--iter-bytes", "1K"]).unwrap();
        assert_eq!(a.iters_for(1 << 20), 20);
        assert_eq!(run(&["--ia", "x"]).unwrap().iters_for(1 << 30), 1000);
        assert!(run(&["--ia", "x", "--min-iters", "0"]).unwrap_err().contains("--min-iters"));
        assert!(run(&["--ia", "x", "--iter-bytes", "0"]).is_err());
    }

    #[test]
    fn all_and_max_size() {
        let a = run(&["--ia", "x", "-s", "h", "--test", "all", "--max-size", "8"]).unwrap();
        assert_eq!(a.tests.len(), 11);
        assert_eq!(a.tests.last(), Some(&Test::LmrReg));
        assert_eq!(a.sizes, Some(vec![1, 2, 4, 8]));
    }

    #[test]
    fn local_tests() {
        let a = run(&["--verbs", "rxe0", "--test", "ibv_reg"]).unwrap();
        assert!(!a.networked());
        assert!(run(&["--test", "lmr_reg"]).unwrap_err().contains("--ia"));
        assert!(!run(&["--ia", "x", "--test", "lmr_reg"]).unwrap().networked());
        assert!(run(&["--ia", "x", "--test", "ibv_reg"]).unwrap_err().contains("--verbs"));
    }

    #[test]
    fn errors() {
        assert!(run(&["--ia"]).unwrap_err().contains("needs a value"));
        assert!(run(&["--ia", "x", "--bogus"]).unwrap_err().contains("unknown argument"));
        assert!(run(&["--ia", "x", "--test", "nope"]).unwrap_err().contains("unknown test"));
        assert!(run(&["--ia", "x", "--mode", "spin"]).unwrap_err().contains("poll nor wait"));
        assert!(run(&["--ia", "x", "-n", "ten"]).unwrap_err().contains("not a valid number"));
        assert!(run(&["--ia", "x", "-n", "0"]).is_err());
        assert!(run(&["--ia", "x", "--window", "600"]).unwrap_err().contains("--depth"));
        assert!(run(&["--ia", "x", "--sizes", "1", "--max-size", "4"]).unwrap_err().contains("not both"));
        assert!(run(&["--ia", "x", "--sizes", "2G"]).unwrap_err().contains("limit"));
        assert!(run(&["-s", "h"]).unwrap_err().contains("--ia"));
        assert_eq!(parse(["--help".to_string()]), Ok(Cmd::Help));
    }
}
