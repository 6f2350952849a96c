//! dat-fuzz: random sequences of DAT calls through `libdat2.so.2` into
//! `libdaplmock.so.2` (the provider core on the in-memory backend), every
//! return code checked against the spec, and random dat.conf files fed to
//! fresh registries. See README.md for the design and the figures.
//!
//! usage: dat-fuzz [--lib-dir DIR] [--seconds N | --sequences N] [--seed HEX]
//!                 [--max-len N] [--confs N] [--hang-secs N]

mod allowed;
mod api;
mod conf;
mod exec;
mod ops;

use proptest::test_runner::{Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Minimal failing sequences found before, replayed first on every run.
const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/regressions.txt");

struct Args {
    lib_dir: PathBuf,
    seconds: Option<u64>,
    sequences: Option<u64>,
    seed: Option<u64>,
    max_len: usize,
    confs: u64,
    hang_secs: u64,
}

fn parse() -> Args {
    let mut a = Args { lib_dir: PathBuf::from("target/release"), seconds: None, sequences: None, seed: None, max_len: 64, confs: 100, hang_secs: 60 };
    let mut it = std::env::args().skip(1).peekable();
    if it.peek().is_some_and(|s| s == "--conf-child") {
        it.next();
        let (lib, conf) = (it.next().expect("lib"), it.next().expect("conf"));
        std::process::exit(conf::child(Path::new(&lib), Path::new(&conf)));
    }
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--lib-dir" => a.lib_dir = PathBuf::from(v()),
            "--seconds" => a.seconds = Some(v().parse().expect("seconds")),
            "--sequences" => a.sequences = Some(v().parse().expect("sequences")),
            "--seed" => a.seed = Some(u64::from_str_radix(v().trim_start_matches("0x"), 16).expect("hex seed")),
            "--max-len" => a.max_len = v().parse().expect("max-len"),
            "--confs" => a.confs = v().parse().expect("confs"),
            "--hang-secs" => a.hang_secs = v().parse().expect("hang-secs"),
            _ => panic!("unknown argument {k} (see the source's header)"),
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

fn main() {
    let args = parse();
    let lib_dir = std::fs::canonicalize(&args.lib_dir).expect("--lib-dir");
    let provider = lib_dir.join("libdaplmock.so");
    let dir = std::env::temp_dir().join(format!("dat-fuzz.{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf_path = dir.join("dat.conf");
    std::fs::write(&conf_path, format!("fuzz-mock u2.0 nonthreadsafe default {} dapl.2.0 \"mock0 1\" \"\"\n", provider.display())).unwrap();
    // SAFETY: set before any other thread exists and before the registry first reads it.
    unsafe { std::env::set_var("DAT_OVERRIDE", &conf_path) };
    let api = api::Api::load(&lib_dir.join("libdat2.so.2")).expect("load libdat2.so.2");
    // The registry loads the provider on the first open; open one IA so the counters can be bound.
    let live = {
        let name = std::ffi::CString::new("fuzz-mock").unwrap();
        let (mut ia, mut evd) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: a valid name and out-pointers.
        let r = unsafe { (api.dat_ia_openv)(name.as_ptr(), 8, &mut evd, &mut ia, 2, 0, 0) };
        assert_eq!(r, 0, "dat_ia_open of the mock provider: {}", allowed::name(r));
        let live = api::Live::attach(&provider).expect("libdaplmock.so not loaded by the registry");
        // SAFETY: the IA just opened.
        unsafe { (api.dat_ia_close)(ia, dat_abi::DAT_CLOSE_ABRUPT_FLAG) };
        live
    };
    watchdog(Duration::from_secs(args.hang_secs));

    let seed = args.seed.unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    println!("fuzz: seed {seed:x} (rerun with --seed {seed:x})");
    let deadline = args.seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let target = args.sequences.unwrap_or(if deadline.is_some() { u64::MAX } else { 1000 });
    let sequences = AtomicU64::new(0);
    let mut findings = 0u64;
    let mut batch = 0u64;
    let start = Instant::now();
    while sequences.load(Ordering::Relaxed) < target && deadline.is_none_or(|d| Instant::now() < d) {
        let cases = (target - sequences.load(Ordering::Relaxed)).min(256) as u32;
        let config = Config {
            cases,
            failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
            max_shrink_iters: 4096,
            ..Config::default()
        };
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..16].copy_from_slice(&batch.to_le_bytes());
        let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
        let result = runner.run(&ops::sequence(args.max_len), |ops| {
            sequences.fetch_add(1, Ordering::Relaxed);
            exec::Seq::run(&api, &live, "fuzz-mock", &ops).map_err(TestCaseError::fail)
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
    let conf_findings = if findings == 0 { conf::run(&lib_dir, &dir, args.confs, seed, args.hang_secs) } else { 0 };
    findings += conf_findings;
    let _ = std::fs::remove_dir_all(&dir);
    if std::env::var_os("DAT_FUZZ_OUTCOMES").is_some() {
        for (call, major) in exec::OUTCOMES.lock().unwrap().iter() {
            println!("  {call} {}", allowed::name(*major));
        }
    }
    println!(
        "fuzz: {} sequences, {} calls, {} distinct call/outcome pairs, {} dat.conf files, {} findings ({:.1}s)",
        sequences.load(Ordering::Relaxed),
        exec::CALLS.load(Ordering::Relaxed),
        exec::OUTCOMES.lock().unwrap().len(),
        args.confs,
        findings,
        start.elapsed().as_secs_f64()
    );
    std::process::exit(if findings == 0 { 0 } else { 1 });
}
