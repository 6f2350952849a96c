//! Runs the built dat-info against a temporary dat.conf, with our
//! libdat2.so.2 (target/release, from tools/build.sh) and the mock provider
//! (ctest/build/libdatmock.so.2, from `make -C ctest`) on LD_LIBRARY_PATH.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
fn tmp(tag: &str) -> Tmp {
    let p = std::env::temp_dir().join(format!("dat-info-cli-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&p);
    fs::create_dir_all(&p).unwrap();
    Tmp(p)
}

fn dat_info(args: &[&str], ld_path: Option<String>) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dat-info"));
    c.args(args).env_remove("DAT_OVERRIDE").env_remove("DAT_DBG_TYPE");
    match ld_path {
        Some(p) => c.env("LD_LIBRARY_PATH", p),
        None => c.env_remove("LD_LIBRARY_PATH"),
    };
    let Output { status, stdout, stderr } = c.output().expect("run dat-info");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// LD_LIBRARY_PATH with our registry and the mock provider; panics with the
/// fix if either was not built.
fn our_libs() -> String {
    let ws = workspace();
    let (lib, mock) = (ws.join("target/release/libdat2.so.2"), ws.join("ctest/build/libdatmock.so.2"));
    assert!(lib.exists() && mock.exists(), "{} or {} missing: run tools/build.sh first", lib.display(), mock.display());
    format!("{}:{}", ws.join("target/release").display(), ws.join("ctest/build").display())
}

const CONF: &str = "# dat-info integration test\n\
    this line is broken\n\
    nolib u2.0 nonthreadsafe default libdat-info-nothere.so.2 dapl.2.0 \"ib0 0\" \"\"\n\
    libc u2.0 nonthreadsafe default libc.so.6 dapl.2.0 \"ib0 0\" \"\"\n\
    mock u2.0 nonthreadsafe default libdatmock.so.2 dapl.2.0 \"normal\" \"\"\n\
    mockfail u2.0 nonthreadsafe default libdatmock.so.2 dapl.2.0 \"failopen\" \"\"\n";

#[test]
fn verdicts_for_each_kind_of_entry() {
    let libs = our_libs();
    let t = tmp("verdicts");
    let conf = t.0.join("dat.conf");
    fs::write(&conf, CONF).unwrap();
    let conf_s = conf.to_str().unwrap();
    let (code, out, err) = dat_info(&["--file", conf_s], Some(libs.clone()));
    let all = format!("--- stdout\n{out}--- stderr\n{err}");
    assert_eq!(code, 1, "{all}");
    assert!(out.contains(&format!("dat.conf:      {conf_s} (given with --file")), "{all}");
    let ours = workspace().join("target/release/libdat2.so.2");
    assert!(out.contains(&format!("libdat2:       {}", ours.display())), "prints which libdat2: {all}");
    assert!(out.contains("line 2: broken, line skipped by the registry: expected 8 fields"), "{all}");
    assert!(out.contains("    | this line is broken"), "{all}");
    assert!(
        out.contains("nolib (line 3): NOT USABLE: library libdat-info-nothere.so.2 not found: not in LD_LIBRARY_PATH ("),
        "{all}"
    );
    assert!(out.contains("not in the default directories ("), "{all}");
    assert!(out.contains("libc (line 4): NOT USABLE: library libc.so.6 ("), "{all}");
    assert!(out.contains("loads but is not a DAT provider: it has no dat_provider_init"), "{all}");
    assert!(out.contains("mock (line 5): usable"), "{all}");
    assert!(out.contains("libdatmock.so.2 -> ") && out.contains("ctest/build/libdatmock.so.2 (LD_LIBRARY_PATH)"), "{all}");
    // The mock's ia_query fills adapter and provider names and versions.
    assert!(out.contains("adapter_name              mock"), "{all}");
    assert!(out.contains("provider_name     mock"), "{all}");
    assert!(out.contains("mockfail (line 6): NOT USABLE: dat_ia_open failed: DAT_INSUFFICIENT_RESOURCES DAT_RESOURCE_MEMORY"), "{all}");
    assert!(out.contains("1 of 5 entries usable"), "{all}");

    // --ia: exit status for that entry alone.
    let (code, out, _) = dat_info(&["--file", conf_s, "--ia", "mock"], Some(libs.clone()));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 of 1 entries usable"), "{out}");
    let (code, out, _) = dat_info(&["--file", conf_s, "--ia", "nosuch"], Some(libs.clone()));
    assert_eq!(code, 1);
    assert!(out.contains("no entry named nosuch"), "{out}");

    // DAT_OVERRIDE is the registry's rule when --file is absent.
    let mut c = Command::new(env!("CARGO_BIN_EXE_dat-info"));
    let o = c.args(["--ia", "mock"]).env("DAT_OVERRIDE", &conf).env("LD_LIBRARY_PATH", &libs).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains(&format!("dat.conf:      {conf_s} (from $DAT_OVERRIDE)")), "{out}");
}

#[test]
fn json_output() {
    let libs = our_libs();
    let t = tmp("json");
    let conf = t.0.join("dat.conf");
    fs::write(&conf, CONF).unwrap();
    let (code, out, _) = dat_info(&["--file", conf.to_str().unwrap(), "--json", "-v"], Some(libs));
    assert_eq!(code, 1);
    for want in [
        "\"status\": \"broken-line\"",
        "\"status\": \"library-not-found\"",
        "\"status\": \"not-a-provider\"",
        "\"status\": \"open-failed\"",
        "\"adapter_name\": \"mock\"",
        "\"usable\": 1,",
        "\"total\": 5,",
    ] {
        assert!(out.contains(want), "{want} in {out}");
    }
    assert!(out.starts_with('{') && out.trim_end().ends_with('}'), "only JSON on stdout: {out}");
}

#[test]
fn usage_and_file_errors_exit_2() {
    let (code, _, err) = dat_info(&["--bogus"], None);
    assert_eq!(code, 2);
    assert!(err.contains("unknown argument '--bogus'") && err.contains("usage: dat-info"), "{err}");
    let (code, _, err) = dat_info(&["--file", "/nonexistent/dat.conf"], None);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read /nonexistent/dat.conf (given with --file"), "{err}");
    let (code, _, _) = dat_info(&["--file"], None);
    assert_eq!(code, 2);
}

#[test]
fn generate_from_a_fake_sysfs() {
    let t = tmp("generate");
    let w = |rel: &str, text: &str| {
        let p = t.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    w("sys/class/infiniband/rxe0/ports/1/state", "4: ACTIVE\n");
    w("sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "dum0\n");
    w("sys/class/infiniband/rxe1/ports/1/state", "1: DOWN\n");
    w("sys/class/infiniband/rxe1/ports/1/gid_attrs/ndevs/0", "eth1\n");
    for n in ["dum0", "eth1", "lo"] {
        w(&format!("sys/class/net/{n}/operstate"), "up\n");
    }
    let (code, out, err) = dat_info(&["--generate", "--root", t.0.to_str().unwrap()], None);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "ofa-v2-dum0 u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 \"dum0 0\" \"\"",
            "ofa-v2-rxe0-1 u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 \"rxe0 1\" \"\"",
        ]
    );
    assert!(out.contains("# left out: netdev eth1 (rxe1 port 1 DOWN)"), "{out}");
    assert!(out.contains("# left out: rxe1 port 1 is DOWN"), "{out}");

    // And an entry naming an absent netdev, diagnosed against that tree.
    let conf = t.0.join("dat.conf");
    fs::write(&conf, "ofa-v2-eth9 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"eth9 0\" \"\"\n").unwrap();
    let (code, out, _) = dat_info(&["--file", conf.to_str().unwrap(), "--root", t.0.to_str().unwrap()], None);
    assert_eq!(code, 1, "{out}");
    if !out.contains("library libdaplofa.so.2 not found") {
        // Where the reference provider is installed, the device is the problem.
        assert!(
            out.contains("NOT USABLE: netdev eth9 absent; present: dum0 (rxe0 port 1 ACTIVE), eth1 (rxe1 port 1 DOWN), lo"),
            "{out}"
        );
    }
}

/// Whether lo is up with 127.0.0.1 here (a sandbox may lack either).
fn lo_up_with_127() -> bool {
    let up = fs::read_to_string("/sys/class/net/lo/flags")
        .ok()
        .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & 1 != 0);
    // `ip` is how a user would check too; its absence makes this unknowable.
    let addr = Command::new("ip").args(["-4", "-o", "addr", "show", "dev", "lo"]).output();
    up && addr.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("inet 127.0.0.1/"))
}

#[test]
fn generate_adds_software_provider_entries_on_the_real_host() {
    let (code, out, err) = dat_info(&["--generate"], None);
    let lo_line = "ofa-v2-sock-lo u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 \"lo 0\" \"\"";
    if lo_up_with_127() {
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.lines().any(|l| l == lo_line), "{out}");
        // After every verbs entry: the registry's default IA stays an RDMA one.
        let entries: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        let first_sock = entries.iter().position(|l| l.contains(" libdaplsock.so.2 ")).unwrap();
        assert!(entries[first_sock..].iter().all(|l| l.contains(" libdaplsock.so.2 ")), "{out}");
    } else {
        assert!(!out.contains(lo_line), "{out}");
        assert!(out.contains("# left out: libdaplsock.so.2 on netdev lo:"), "{out}");
    }
    let (_, json, _) = dat_info(&["--generate", "--json"], None);
    assert!(json.contains("\"sock_provider\": \"libdaplsock.so.2\""), "{json}");
}

#[test]
fn explains_software_provider_entries() {
    let libs = our_libs();
    let t = tmp("sock");
    // The mock provider standing in as libdaplsock.so.2: dat-info picks how
    // to read ia_params by the library's name, and the mock loads anywhere.
    fs::copy(workspace().join("ctest/build/libdatmock.so.2"), t.0.join("libdaplsock.so.2")).unwrap();
    let conf = t.0.join("dat.conf");
    fs::write(
        &conf,
        "sock-lo u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 \"lo 0\" \"\"\n\
         sock-nodev u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 \"eth9x 0\" \"\"\n\
         sock-noaddr u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 \"192.0.2.77 0\" \"\"\n\
         sock-nonum u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 \"lo\" \"\"\n",
    )
    .unwrap();
    let libs = format!("{}:{libs}", t.0.display());
    let (code, out, err) = dat_info(&["--file", conf.to_str().unwrap()], Some(libs));
    let all = format!("--- stdout\n{out}--- stderr\n{err}");
    assert_eq!(code, 1, "{all}");
    if lo_up_with_127() {
        assert!(out.contains("ia_params  \"lo 0\": netdev lo up, IPv4 127.0.0.1"), "{all}");
    }
    assert!(out.contains("sock-nodev (line 2): NOT USABLE: netdev eth9x absent; up netdevs with IPv4: "), "{all}");
    assert!(out.contains("sock-noaddr (line 3): NOT USABLE: IP address 192.0.2.77 is on no netdev here"), "{all}");
    assert!(out.contains("sock-nonum (line 4): NOT USABLE: \"lo\" needs a number after it"), "{all}");
}
