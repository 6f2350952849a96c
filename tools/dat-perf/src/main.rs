//! dat-perf: perftest for DAT. Latency, bandwidth and message rate between a
//! server and a client over any provider dat.conf names, plus the cost of
//! registering memory, through libdat2.so.2 loaded at run time.

mod args;
mod bandwidth;
mod conn;
mod dat;
mod latency;
mod lmr;
mod mem;
mod progress;
mod proto;
mod report;
mod run;
mod stats;

use crate::args::{Args, Cmd, Test};
use crate::dat::Dat;
use tool_common::Json;
use crate::report::Row;
use std::process::ExitCode;

fn local_rows(dat: Option<&Dat>, args: &Args) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for &test in args.tests.iter().filter(|t| t.is_local()) {
        let sizes = args.sizes_for(test);
        let results = match test {
            Test::LmrReg => {
                let dat = dat.expect("loaded for lmr_reg");
                lmr::dat_reg(dat, args.ia.as_deref().expect("checked by args"), &sizes, args.iters, args.warmup, !args.quiet)?
            }
            _ => lmr::verbs_reg(args.verbs.as_deref().expect("checked by args"), &sizes, args.iters, args.warmup, !args.quiet)?,
        };
        for (size, n, samples) in results {
            rows.push(Row::times(test, size, n, lmr::reg_warmup(n, args.warmup), args.mode, &samples)?);
        }
    }
    Ok(rows)
}

fn run(args: &Args) -> Result<(), String> {
    let needs_dat = args.networked() || args.tests.contains(&Test::LmrReg);
    let dat = if needs_dat { Some(Dat::load()?) } else { None };
    let lib = dat.as_ref().and_then(|d| d.path.as_ref()).map(|p| p.display().to_string());

    if args.networked() && args.server.is_none() {
        let dat = dat.as_ref().expect("loaded");
        if !args.json {
            println!("dat-perf server: IA {}, libdat2 {}", args.ia.as_deref().unwrap_or(""), lib.as_deref().unwrap_or("?"));
        }
        let n = run::server(dat, args, args.quiet || args.json)?;
        if args.json {
            let mut o = Json::obj();
            o.set("tool", "dat-perf").set("role", "server").set("ia", args.ia.clone()).set("libdat2", lib).set("tests_served", n);
            println!("{}", o.render());
        } else {
            println!("dat-perf server: served {n} test runs");
        }
        return Ok(());
    }

    if !args.json {
        let peer = args.server.as_ref().map(|s| format!(", server {s} conn_qual {}", args.port)).unwrap_or_default();
        println!(
            "dat-perf: IA {}{peer}, libdat2 {}",
            args.ia.as_deref().unwrap_or("-"),
            lib.as_deref().unwrap_or("not loaded")
        );
    }
    let mut rows = Vec::new();
    let mut failure = None;
    let mut printer = report::Printer::default();
    let mut show = |r: &Row| {
        if !args.json {
            print!("{}", printer.row(r));
        }
    };
    if args.networked() {
        match run::client(dat.as_ref().expect("loaded"), args, &mut show) {
            Ok(r) => rows.extend(r),
            Err(e) => failure = Some(e),
        }
    }
    if failure.is_none() {
        match local_rows(dat.as_ref(), args) {
            Ok(r) => {
                r.iter().for_each(&mut show);
                rows.extend(r);
            }
            Err(e) => failure = Some(e),
        }
    }
    if !args.json {
        print!("{}", printer.end());
    }
    if args.json {
        let header = vec![
            ("role", Json::from(if args.server.is_some() { "client" } else { "local" })),
            ("ia", Json::from(args.ia.clone())),
            ("server", Json::from(args.server.clone())),
            ("libdat2", Json::from(lib)),
            ("error", Json::from(failure.clone())),
        ];
        println!("{}", report::json(header, &rows).render());
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn main() -> ExitCode {
    let args = match args::parse(std::env::args().skip(1)) {
        Ok(Cmd::Run(a)) => a,
        Ok(Cmd::Help) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("dat-perf: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dat-perf: {e}");
            ExitCode::from(1)
        }
    }
}
