//! dat-fuzz: random sequences of DAT calls through `libdat2.so.2` into a
//! provider — `libdaplmock.so.2` (the core on its in-memory backend) or
//! `libdaplsock.so.2` (the core on sockets, over loopback, connections
//! included) — every return code, event and completion checked, and random
//! dat.conf files fed to fresh registries. See README.md for the design and
//! the figures.
//!
//! Options: `dat-fuzz --help` (USAGE below).

mod allowed;
mod api;
mod calls;
mod conf;
mod conn;
mod dto;
mod exec;
mod mem;
mod ops;
mod target;

use proptest::test_runner::{Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use target::{Leak, Target};

/// Minimal failing sequences found before, replayed first on every run (one file per target:
/// a seed makes a different sequence on each).
const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/regressions.txt");
const REGRESSIONS_SOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/regressions-sock.txt");
const REGRESSIONS_IBV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/regressions-ibv.txt");

struct Args {
    target: Target,
    lib_dir: PathBuf,
    seconds: Option<u64>,
    sequences: Option<u64>,
    seed: Option<u64>,
    max_len: usize,
    confs: u64,
    hang_secs: u64,
}

const USAGE: &str = "usage: dat-fuzz [--target mock|sock|ibv] [--lib-dir DIR] [--seconds N | --sequences N]
                [--seed HEX] [--max-len N] [--confs N] [--hang-secs N] [--ia-params S] [--addr IPV4]
  --target      the provider under test: mock (the core in memory), sock (sockets over
                loopback) or ibv (verbs; in the Soft-RoCE guest) (default mock)
  --lib-dir     where libdat2.so.2 and the provider are (default target/release)
  --seconds     run this long; --sequences: run this many sequences (default: 1000 sequences)
  --seed        the first sequence's seed, hex (default: from the clock; printed for a rerun)
  --max-len     most calls in one sequence (default 64)
  --confs       random dat.conf files fed to fresh registries (default 100)
  --hang-secs   a call running longer than this is a finding (default 60)
  --ia-params   the dat.conf entry's ia_params (default: mock0 1, lo 0, dum0 0)
  --addr        the IPv4 address connects dial: the IA's own (default 127.0.0.1)
See tools/dat-fuzz/README.md.";

/// Exits with the usage text and `why` on a bad command line (status 2),
/// or with the usage alone for --help (status 0).
fn usage_exit(why: Option<String>) -> ! {
    match why {
        Some(w) => {
            eprintln!("dat-fuzz: {w}\n{USAGE}");
            std::process::exit(2)
        }
        None => {
            println!("{USAGE}");
            std::process::exit(0)
        }
    }
}

fn parse() -> Args {
    let mut a = Args { target: Target::Mock, lib_dir: PathBuf::from("target/release"), seconds: None, sequences: None, seed: None, max_len: 64, confs: 100, hang_secs: 60 };
    let mut it = std::env::args().skip(1).peekable();
    if it.peek().is_some_and(|s| s == "--conf-child") {
        it.next();
        let (lib, conf, name) = (it.next().expect("lib"), it.next().expect("conf"), it.next().expect("name"));
        std::process::exit(conf::child(Path::new(&lib), Path::new(&conf), &name));
    }
    while let Some(k) = it.next() {
        if k == "--help" || k == "-h" {
            usage_exit(None);
        }
        let v = it.next().unwrap_or_else(|| usage_exit(Some(format!("{k} needs a value"))));
        let bad = |what: &str| -> ! { usage_exit(Some(format!("{k}: {what}, got {v:?}"))) };
        match k.as_str() {
            "--target" => a.target = Target::parse(&v).unwrap_or_else(|| bad("mock, sock or ibv")),
            "--lib-dir" => a.lib_dir = PathBuf::from(&v),
            "--seconds" => a.seconds = Some(v.parse().unwrap_or_else(|_| bad("a number of seconds"))),
            "--sequences" => a.sequences = Some(v.parse().unwrap_or_else(|_| bad("a number"))),
            "--seed" => a.seed = Some(u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or_else(|_| bad("a hex number"))),
            "--max-len" => a.max_len = v.parse().unwrap_or_else(|_| bad("a number")),
            "--confs" => a.confs = v.parse().unwrap_or_else(|_| bad("a number")),
            "--hang-secs" => a.hang_secs = v.parse().unwrap_or_else(|_| bad("a number of seconds")),
            "--ia-params" => {
                let _ = target::IA_PARAMS.set(v.clone());
            }
            "--addr" => {
                let _ = target::ADDR.set(v.parse().unwrap_or_else(|_| bad("an IPv4 address")));
            }
            _ => usage_exit(Some(format!("unknown argument {k}"))),
        }
    }
    a
}

/// Aborts the process when one call has run longer than `limit`: every
/// timeout the fuzzer passes is bounded, so that is a hang.
fn watchdog(limit: Duration) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let started = exec::CALL_STARTED.load(Ordering::Acquire);
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
            if started != 0 && now.saturating_sub(started) > limit.as_millis() as u64 {
                eprintln!("fuzz: HANG: a call ran over {}s: {}", limit.as_secs(), exec::CURRENT.lock().unwrap());
                println!("fuzz: finding: hang");
                std::process::abort();
            }
        }
    });
}

/// A directory of our own (mkdtemp): guests and helpers share /tmp.
fn temp_dir() -> PathBuf {
    let mut template = std::env::temp_dir().join("dat-fuzz.XXXXXX").into_os_string().into_encoded_bytes();
    template.push(0);
    // SAFETY: a NUL-terminated template we own, which mkdtemp rewrites in place.
    let p = unsafe { libc::mkdtemp(template.as_mut_ptr() as *mut libc::c_char) };
    assert!(!p.is_null(), "mkdtemp: {}", std::io::Error::last_os_error());
    template.pop();
    // SAFETY: mkdtemp kept the bytes a path.
    PathBuf::from(unsafe { std::ffi::OsString::from_encoded_bytes_unchecked(template) })
}

/// Sixteen consecutive qualifiers (TCP ports on 127.0.0.1) nothing listens
/// on now, below the kernel's ephemeral range: the sequences' PSPs listen
/// there and their connects go only there, so the fuzzer never dials
/// anything but itself. Qualifiers a PSP cannot take (in use) are part of
/// what is fuzzed.
fn qualifier_window(target: Target) -> (u64, u64) {
    if target == Target::Mock {
        return (0, 8);
    }
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let start = 20000 + (std::process::id() as u64 * 16) % 10000;
    for i in 0..600 {
        let base = 20000 + (start - 20000 + i * 16) % 10000;
        if (base..base + 16).all(|p| free(p as u16)) {
            return (base, 16);
        }
    }
    panic!("no 16 free ports between 20000 and 30000 on 127.0.0.1");
}

fn main() {
    let args = parse();
    let target = args.target;
    let lib_dir = std::fs::canonicalize(&args.lib_dir).expect("--lib-dir");
    let provider = target.library(&lib_dir);
    let dir = temp_dir();
    let conf_path = dir.join("dat.conf");
    std::fs::write(&conf_path, format!("{} u2.0 nonthreadsafe default {} dapl.2.0 {} \"\"\n", target.name(), provider.display(), target.ia_params())).unwrap();
    // SAFETY: set before any other thread exists and before the registry first reads it.
    unsafe { std::env::set_var("DAT_OVERRIDE", &conf_path) };
    let api = api::Api::load(&lib_dir.join("libdat2.so.2")).expect("load libdat2.so.2");
    // The registry loads the provider on the first open: one IA first, so the
    // mock's counters can be bound and the sock provider's lazily made state exists
    // before any baseline is taken.
    let leak = {
        let name = std::ffi::CString::new(target.name()).unwrap();
        let (mut ia, mut evd) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: a valid name and out-pointers.
        let r = unsafe { (api.dat_ia_openv)(name.as_ptr(), 8, &mut evd, &mut ia, 2, 0, 0) };
        assert_eq!(r, 0, "dat_ia_open of {}: {}", target.name(), allowed::name(r));
        let leak = match target {
            Target::Mock => Leak::Mock(api::Live::attach(&provider).expect("libdaplmock.so not loaded by the registry")),
            Target::Sock | Target::Ibv => Leak::Process,
        };
        // SAFETY: the IA just opened.
        unsafe { (api.dat_ia_close)(ia, dat_abi::DAT_CLOSE_ABRUPT_FLAG) };
        leak
    };
    let quals = qualifier_window(target);
    watchdog(Duration::from_secs(args.hang_secs));

    let seed = args.seed.unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    println!("fuzz: target {:?}, seed {seed:x} (rerun with --target {} --seed {seed:x}), qualifiers {}..{}",
        target, format!("{target:?}").to_lowercase(), quals.0, quals.0 + quals.1);
    let deadline = args.seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let wanted = args.sequences.unwrap_or(if deadline.is_some() { u64::MAX } else { 1000 });
    let sequences = AtomicU64::new(0);
    let mut findings = 0u64;
    let mut batch = 0u64;
    let start = Instant::now();
    while sequences.load(Ordering::Relaxed) < wanted && deadline.is_none_or(|d| Instant::now() < d) {
        let cases = (wanted - sequences.load(Ordering::Relaxed)).min(64) as u32;
        let config = Config {
            cases,
            failure_persistence: Some(Box::new(FileFailurePersistence::Direct(match target {
                Target::Mock => REGRESSIONS,
                Target::Sock => REGRESSIONS_SOCK,
                Target::Ibv => REGRESSIONS_IBV,
            }))),
            max_shrink_iters: if target.wire() { 1024 } else { 4096 },
            ..Config::default()
        };
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..16].copy_from_slice(&batch.to_le_bytes());
        key[16] = target as u8;
        let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
        let result = runner.run(&ops::sequence(args.max_len, target.profile()), |ops| {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                // Time is up: the rest of the batch passes without running.
                return Ok(());
            }
            let n = sequences.fetch_add(1, Ordering::Relaxed);
            exec::Seq::run(&api, &leak, target, quals, seed ^ n, &ops).map_err(TestCaseError::fail)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(why, ops)) => {
                findings += 1;
                println!("fuzz: FINDING (minimal sequence of {} calls): {why}", ops.len());
                for (i, op) in ops.iter().enumerate() {
                    println!("  {i}: {op:?}");
                }
                break;
            }
            Err(e) => {
                findings += 1;
                println!("fuzz: FINDING: {e}");
                break;
            }
        }
        batch += 1;
    }
    let fuzz_time = start.elapsed();
    let conf_findings = if findings == 0 { conf::run(&lib_dir, &dir, args.confs, seed, args.hang_secs, target) } else { 0 };
    findings += conf_findings;
    let _ = std::fs::remove_dir_all(&dir);
    if std::env::var_os("DAT_FUZZ_OUTCOMES").is_some() {
        for (call, major) in exec::OUTCOMES.lock().unwrap().iter() {
            println!("  {call} {}", allowed::name(*major));
        }
        for (number, status) in exec::EVENTS.lock().unwrap().iter() {
            println!("  event {number:#x} status {status}");
        }
    }
    let calls = exec::CALLS.load(Ordering::Relaxed);
    let s = &exec::STATS;
    println!(
        "fuzz figures ({}): {} sequences, {} calls ({:.0}/s), {} distinct call/outcome pairs, {} distinct event/status pairs, \
         {} connections established, {} completions checked, {} bytes verified ({} not verifiable), {} dat.conf files, {} findings",
        target.name(),
        sequences.load(Ordering::Relaxed),
        calls,
        calls as f64 / fuzz_time.as_secs_f64().max(1e-3),
        exec::OUTCOMES.lock().unwrap().len(),
        exec::EVENTS.lock().unwrap().len(),
        s.established.load(Ordering::Relaxed),
        s.completions.load(Ordering::Relaxed),
        s.bytes_verified.load(Ordering::Relaxed),
        s.unverifiable.load(Ordering::Relaxed),
        args.confs,
        findings,
    );
    println!("fuzz: {} sequences, {} calls, {} findings ({:.1}s)", sequences.load(Ordering::Relaxed), calls, findings, start.elapsed().as_secs_f64());
    std::process::exit(if findings == 0 { 0 } else { 1 });
}
