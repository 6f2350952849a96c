//! Random dat.conf files. The registry reads dat.conf once per process, so
//! each file goes to a fresh child process (this binary, `--conf-child`),
//! which lists the providers and opens each; the parent checks it neither
//! crashed nor hung.

use crate::api::Api;
use crate::target::Target;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn field(provider: String, target: Target) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(target.name().to_string()),
        Just(provider),
        Just(target.ia_params().to_string()),
        Just("\"lo 0\"".to_string()),
        Just("\"127.0.0.1 0\"".to_string()),
        Just("u2.0".to_string()),
        Just("u1.2".to_string()),
        Just("nonthreadsafe".to_string()),
        Just("threadsafe".to_string()),
        Just("default".to_string()),
        Just("nonexistent.so.2".to_string()),
        Just("dapl.2.0".to_string()),
        Just("\"\"".to_string()),
        Just("\"".to_string()),
        Just("#".to_string()),
        "[ -~]{0,40}",
        "\\PC{0,20}",
    ]
}

fn line(provider: String, target: Target) -> impl Strategy<Value = Vec<u8>> {
    let valid = format!("{} u2.0 nonthreadsafe default {provider} dapl.2.0 {} \"\"", target.name(), target.ia_params());
    prop_oneof![
        // A real entry, then cut or with bytes flipped.
        (Just(valid.clone()), any::<prop::sample::Index>(), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4))
            .prop_map(|(v, cut, flips)| {
                let mut b = v.into_bytes();
                for (i, x) in flips {
                    let i = i.index(b.len());
                    b[i] = x;
                }
                if cut.index(4) == 0 {
                    b.truncate(cut.index(b.len() + 1));
                }
                b
            }),
        // Eight-odd fields from a pool, with whatever spacing.
        prop::collection::vec((field(provider, target), prop_oneof![Just(" "), Just("\t"), Just("  "), Just("")]), 0..12)
            .prop_map(|v| v.into_iter().flat_map(|(f, s)| [f, s.to_string()]).collect::<String>().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..300),
    ]
}

fn file(provider: String, target: Target) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec((line(provider, target), prop_oneof![Just(&b"\n"[..]), Just(&b"\r\n"[..]), Just(&b""[..])]), 0..12)
        .prop_map(|v| v.into_iter().flat_map(|(mut l, e)| { l.extend_from_slice(e); l }).collect())
}

/// Runs `n` random files; returns the number of findings (crash or hang).
pub fn run(lib_dir: &Path, dir: &Path, n: u64, seed: u64, hang_secs: u64, target: Target) -> u64 {
    let me = std::env::current_exe().expect("own path");
    let provider = target.library(lib_dir).display().to_string();
    let mut key = [0xc0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let strategy = file(provider, target);
    let conf = dir.join("random.conf");
    for i in 0..n {
        let bytes = strategy.new_tree(&mut runner).expect("a dat.conf").current();
        std::fs::write(&conf, &bytes).unwrap();
        let mut child = Command::new(&me)
            .arg("--conf-child").arg(lib_dir.join("libdat2.so.2")).arg(&conf).arg(target.name())
            .stdout(Stdio::null()).stderr(Stdio::null())
            .spawn().expect("spawn the conf child");
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if start.elapsed() > Duration::from_secs(hang_secs) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if status.is_none_or(|s| !s.success()) {
            let kept = dir.with_extension(format!("finding-{i}.conf"));
            let _ = std::fs::write(&kept, &bytes);
            println!("fuzz: FINDING: dat.conf #{i} made the registry {} (file kept at {})",
                status.map_or("hang".to_string(), |s| format!("exit with {s}")), kept.display());
            return 1;
        }
    }
    0
}

/// In the child: list the providers of `conf` and open (and close) each, and `name`.
pub fn child(lib: &Path, conf: &Path, name: &str) -> i32 {
    // SAFETY: single-threaded here, before the registry reads the environment.
    unsafe { std::env::set_var("DAT_OVERRIDE", conf) };
    let api = Api::load(lib).expect("load libdat2.so.2");
    // SAFETY: zeroed C structs the registry fills; pointers to our own storage.
    unsafe {
        let mut infos: Vec<dat_abi::DAT_PROVIDER_INFO> = vec![std::mem::zeroed(); 64];
        let mut ptrs: Vec<*mut dat_abi::DAT_PROVIDER_INFO> = infos.iter_mut().map(|p| p as *mut _).collect();
        let mut count = 0;
        let r = (api.dat_registry_list_providers)(64, &mut count, ptrs.as_mut_ptr());
        let mut names: Vec<Vec<std::os::raw::c_char>> = vec![name.bytes().chain([0]).map(|b| b as _).collect()];
        if r == 0 {
            for info in infos.iter().take(count.clamp(0, 64) as usize) {
                let n = &info.ia_name;
                let end = n.iter().position(|&c| c == 0).unwrap_or(n.len() - 1);
                let mut v = n[..end].to_vec();
                v.push(0);
                names.push(v);
            }
        }
        for name in names {
            let (mut ia, mut evd) = (std::ptr::null_mut(), std::ptr::null_mut());
            if (api.dat_ia_openv)(name.as_ptr(), 8, &mut evd, &mut ia, 2, 0, 0) == 0 {
                let r = (api.dat_ia_close)(ia, dat_abi::DAT_CLOSE_ABRUPT_FLAG);
                if r != 0 {
                    return 3;
                }
            }
        }
    }
    0
}
