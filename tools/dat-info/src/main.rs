//! dat-info: like ibv_devinfo/fi_info, for DAT. Reads the dat.conf the
//! registry reads, says for every line whether it is usable and if not why,
//! and shows the IA and provider attributes of those that open.

mod attrs;
mod dat;
mod generate;
mod ifaddrs;
mod libsearch;
mod params;
mod report;
mod sysfs;

use crate::attrs::{Fields, SUMMARY_IA, SUMMARY_PROVIDER};
use crate::dat::{LibDat2, LibProbe};
use tool_common::Json;
use crate::report::{Ctx, EntryReport, Probes};
use dat_abi::DAT_RETURN;
use dat_registry::conf::{self, Conf, Entry};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: dat-info [--file PATH] [--ia NAME] [--json] [-v] [--root DIR]
       dat-info --generate [--json] [--root DIR]

Reads the dat.conf the DAT registry reads ($DAT_OVERRIDE, else /etc/dat.conf),
checks every entry on this host and opens the usable ones through
libdat2.so.2 (found like any DAT program finds it: LD_LIBRARY_PATH, ld.so
cache), showing their IA and provider attributes.

  --file PATH   read PATH instead (and hand it to the registry as DAT_OVERRIDE)
  --ia NAME     only the entries named NAME
  --json        machine-readable output
  -v            all attributes, the library search, the raw lines
  --generate    print dat.conf lines for this host's RDMA netdevs and ACTIVE
                ports for our provider libdaplibv.so.2, then one for the
                software provider libdaplsock.so.2 (TCP/UDP) per up netdev
                with an IPv4 address, named ofa-v2-sock-<netdev>
  --root DIR    read sys/class/... under DIR instead of / (for testing)

Exit status: 0 every listed entry is usable; 1 some are not (or --generate
found nothing); 2 usage error or unreadable dat.conf.";

struct Args {
    file: Option<PathBuf>,
    ia: Option<String>,
    json: bool,
    verbose: bool,
    generate: bool,
    root: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { file: None, ia: None, json: false, verbose: false, generate: false, root: PathBuf::from("/") };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--file" | "-f" => a.file = Some(PathBuf::from(value("--file")?)),
            "--ia" | "-i" => a.ia = Some(value("--ia")?),
            "--root" => a.root = PathBuf::from(value("--root")?),
            "--json" => a.json = true,
            "-v" | "--verbose" => a.verbose = true,
            "--generate" => a.generate = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument '{arg}'")),
        }
    }
    Ok(a)
}

struct Real<'a> {
    lib: Result<&'a LibDat2, String>,
}

impl Probes for Real<'_> {
    fn library(&self, name: &str) -> LibProbe {
        dat::probe_library(name)
    }
    fn open(&self, e: &Entry) -> Result<Result<attrs::IaInfo, (DAT_RETURN, String)>, String> {
        let lib = self.lib.clone()?;
        Ok(lib.probe(&e.ia_name, e.api_major, e.api_minor, e.thread_safe))
    }
}

fn fields_json(f: &Fields) -> Json {
    Json::Obj(f.iter().map(|(k, v)| (k.to_string(), v.json())).collect())
}

fn entry_json(r: &EntryReport) -> Json {
    let mut o = Json::obj();
    o.set("line", r.line).set("ia_name", r.name()).set("usable", r.usable).set("status", r.status);
    o.set("reason", (!r.reason.is_empty()).then(|| r.reason.clone()));
    o.set("text", r.raw.clone());
    if let Some(e) = &r.entry {
        let mut c = Json::obj();
        c.set("api_version", format!("{}{}.{}", if e.user_api { "u" } else { "k" }, e.api_major, e.api_minor))
            .set("thread_safe", e.thread_safe)
            .set("default", e.is_default)
            .set("library", e.library.as_str())
            .set("provider_version", format!("{}.{}.{}", e.provider_id, e.provider_major, e.provider_minor))
            .set("ia_params", e.ia_params.as_str())
            .set("platform_params", e.platform_params.as_str());
        o.set("entry", c);
    }
    if let Some(l) = &r.library {
        let mut j = Json::obj();
        j.set("name", l.search.name.as_str())
            .set("found", l.search.found.as_ref().map(|(p, _)| p.display().to_string()))
            .set("found_via", l.search.found.as_ref().map(|(_, how)| *how))
            .set("loaded_from", l.loaded_from.as_ref().map(|p| p.display().to_string()))
            .set("looked", l.search.looked.clone());
        o.set("library", j);
    }
    if let Some(p) = &r.params {
        let mut j = Json::obj();
        j.set("ok", p.ok).set("status", p.status).set("text", p.text.as_str());
        o.set("ia_params_check", j);
    }
    if let Some(i) = &r.info {
        o.set("ia_attr", fields_json(&i.ia));
        o.set("provider_attr", fields_json(&i.provider));
        o.set("close_error", i.close_error.clone());
    }
    o
}

fn host_json(h: &sysfs::Host) -> (Json, Json) {
    let devs = h
        .devices
        .iter()
        .map(|d| {
            let ports = d
                .ports
                .iter()
                .map(|p| {
                    let mut j = Json::obj();
                    j.set("port", p.num).set("state", p.state.as_str()).set("link_layer", p.link_layer.clone()).set("netdevs", p.netdevs.clone());
                    j
                })
                .collect();
            let mut j = Json::obj();
            j.set("name", d.name.as_str()).set("ports", Json::Arr(ports));
            j
        })
        .collect();
    let nets = h
        .netdevs
        .iter()
        .map(|n| {
            let rdma = n
                .rdma
                .iter()
                .map(|l| {
                    let mut j = Json::obj();
                    j.set("device", l.dev.as_str()).set("port", l.port).set("state", h.link_state(l).map(str::to_owned));
                    j
                })
                .collect();
            let mut j = Json::obj();
            j.set("name", n.name.as_str())
                .set("rdma", Json::Arr(rdma))
                .set("addresses", n.addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>());
            j
        })
        .collect();
    (Json::Arr(devs), Json::Arr(nets))
}

fn print_fields(title: &str, f: &Fields, only: Option<&[&str]>) {
    let shown: Vec<&(&str, attrs::Val)> = f.iter().filter(|(k, _)| only.is_none_or(|o| o.contains(k))).collect();
    let w = shown.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    println!("    {title}:");
    for (k, v) in shown {
        println!("      {k:<w$}  {}", v.text());
    }
}

fn print_entry(r: &EntryReport, verbose: bool) {
    match r.name() {
        Some(n) if r.usable => println!("{n} (line {}): usable", r.line),
        Some(n) => println!("{n} (line {}): NOT USABLE: {}", r.line, r.reason),
        None => {
            println!("line {}: broken, {}", r.line, r.reason);
            println!("    | {}", r.raw);
            return;
        }
    }
    if verbose {
        println!("    | {}", r.raw);
    }
    if let Some(l) = &r.library {
        let name = &l.search.name;
        match (&l.loaded_from, &l.search.found) {
            (Some(p), Some((_, how))) => println!("    library    {name} -> {} ({how})", p.display()),
            (Some(p), None) => println!("    library    {name} -> {} (found by the loader)", p.display()),
            (None, Some((p, how))) => println!("    library    {name} -> {} ({how})", p.display()),
            (None, None) => println!("    library    {name}: not found"),
        }
        if verbose && !l.search.looked.is_empty() {
            println!("    search     {}", l.search.looked.join("; "));
        }
    }
    if let (Some(p), Some(e)) = (r.params.as_ref().filter(|p| p.ok), &r.entry) {
        println!("    ia_params  \"{}\": {}", e.ia_params, p.text);
    }
    if let Some(i) = &r.info {
        print_fields("IA (dat_ia_query)", &i.ia, (!verbose).then_some(SUMMARY_IA));
        print_fields("provider", &i.provider, (!verbose).then_some(SUMMARY_PROVIDER));
        if let Some(c) = &i.close_error {
            println!("    note: dat_ia_close failed: {c}");
        }
    }
}

fn run() -> Result<bool, (u8, String)> {
    let args = parse_args().map_err(|e| (2, format!("{e}\n\n{USAGE}")))?;
    let mut host = sysfs::scan(&args.root);
    if args.root == std::path::Path::new("/") {
        host.fill_addrs();
    }

    if args.generate {
        let g = generate::generate(&host);
        if args.json {
            let mut o = Json::obj();
            o.set("provider", generate::OUR_PROVIDER).set("sock_provider", generate::SOCK_PROVIDER).set("lines", g.lines.clone()).set("left_out", g.skipped.clone());
            println!("{}", o.render());
        } else {
            print!("{}", generate::render(&host, &g));
        }
        return Ok(!g.lines.is_empty());
    }

    // Which file, and why: the registry's own rule, unless --file overrides.
    let (path, why) = match &args.file {
        Some(p) => {
            // The registry reads DAT_OVERRIDE at its first call (the reference
            // one when it loads): set it before libdat2 is loaded, while this
            // process is still single-threaded.
            // SAFETY: no other thread exists yet.
            unsafe { std::env::set_var("DAT_OVERRIDE", p) };
            (p.clone(), "given with --file; passed to the registry as DAT_OVERRIDE".to_owned())
        }
        None => {
            let p = conf::default_path();
            let why = match std::env::var_os("DAT_OVERRIDE") {
                Some(v) if !v.is_empty() => "from $DAT_OVERRIDE".to_owned(),
                _ => "the default: DAT_OVERRIDE is not set".to_owned(),
            };
            (p, why)
        }
    };
    let text = std::fs::read(&path).map_err(|e| (2, format!("dat-info: cannot read {} ({why}): {e}", path.display())))?;
    let conf = Conf { path: path.clone(), ..conf::parse(&text) };
    let text = String::from_utf8_lossy(&text).into_owned();

    let lib = LibDat2::load();
    let lib_desc = match &lib {
        Ok(l) => l.path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(path unknown)".into()),
        Err(e) => format!("NOT LOADED: {e}"),
    };
    let ld_library_path = std::env::var("LD_LIBRARY_PATH").ok();
    let ctx = Ctx { host: &host, ld_library_path: ld_library_path.clone(), root: &args.root };
    let probes = Real { lib: lib.as_ref().map_err(|e| e.clone()) };
    let reports = report::diagnose_all(&conf, &text, &ctx, &probes, args.ia.as_deref());
    let usable = reports.iter().filter(|r| r.usable).count();
    let all_ok = !reports.is_empty() && usable == reports.len();

    if args.json {
        let (devs, nets) = host_json(&host);
        let mut o = Json::obj();
        let mut c = Json::obj();
        c.set("path", path.display().to_string()).set("why", why);
        o.set("dat_conf", c);
        let mut l = Json::obj();
        l.set("soname", dat::SONAME)
            .set("path", lib.as_ref().ok().and_then(|l| l.path.as_ref()).map(|p| p.display().to_string()))
            .set("error", lib.as_ref().err().cloned())
            .set("ld_library_path", ld_library_path);
        o.set("libdat2", l);
        o.set("rdma_devices", devs).set("netdevs", nets);
        o.set("entries", Json::Arr(reports.iter().map(entry_json).collect()));
        o.set("usable", usable).set("total", reports.len()).set("all_usable", all_ok);
        println!("{}", o.render());
    } else {
        println!("dat.conf:      {} ({why})", path.display());
        println!("libdat2:       {lib_desc}{}", match &ld_library_path {
            Some(p) if lib.is_ok() => format!(" (dlopen(\"{}\"), LD_LIBRARY_PATH={p})", dat::SONAME),
            _ if lib.is_ok() => format!(" (dlopen(\"{}\"), LD_LIBRARY_PATH not set)", dat::SONAME),
            _ => String::new(),
        });
        println!("RDMA devices:  {}", host.devices_summary());
        println!("netdevs:       {}", host.netdevs_summary());
        if args.verbose {
            for d in &host.devices {
                for p in &d.ports {
                    println!(
                        "  {} port {}: {}{}{}",
                        d.name,
                        p.num,
                        p.state,
                        p.link_layer.as_ref().map(|l| format!(", {l}")).unwrap_or_default(),
                        if p.netdevs.is_empty() { String::new() } else { format!(", netdev {}", p.netdevs.join(" ")) }
                    );
                }
            }
            for n in host.netdevs.iter().filter(|n| !n.addrs.is_empty()) {
                println!("  {}: {}", n.name, n.addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" "));
            }
        }
        println!();
        for r in &reports {
            print_entry(r, args.verbose);
        }
        println!();
        match &args.ia {
            Some(n) if reports.is_empty() => {
                let names: Vec<&str> = conf.entries.iter().map(|e| e.ia_name.as_str()).collect();
                println!("no entry named {n} in {}; names there: {}", path.display(), if names.is_empty() { "none".into() } else { names.join(", ") });
            }
            _ if reports.is_empty() => println!("{} has no entries", path.display()),
            _ => println!("{usable} of {} entries usable", reports.len()),
        }
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err((code, msg)) => {
            eprintln!("{msg}");
            ExitCode::from(code)
        }
    }
}
