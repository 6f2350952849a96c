//! Keeps the layering honest, over every crate of the workspace:
//!
//! - the core (this crate) reaches a transport only through `backend`, so
//!   a new backend fits without touching it: it names no backend crate,
//!   no verbs or rdma_cm identifier (comments may name verbs concepts);
//! - no backend crate (`dapl-provider-*`) names another.

use std::path::{Path, PathBuf};

/// The workspace root, from this crate's directory.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the core sits in the workspace").to_path_buf()
}

fn code_of(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

/// The identifiers in `code`, with whether each follows a `.` (a field).
fn idents(code: &str) -> Vec<(&str, bool)> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut rest = code;
    let mut at = 0;
    while let Some(start) = rest.find(ident) {
        let len = rest[start..].find(|c: char| !ident(c)).unwrap_or(rest.len() - start);
        let field = code[..at + start].ends_with('.');
        out.push((&rest[start..start + len], field));
        at += start + len;
        rest = &rest[start + len..];
    }
    out
}

/// A backend crate: its directory and the names its code is known by.
struct Backend {
    dir: PathBuf,
    names: Vec<String>,
}

/// Every `dapl-provider-*` crate of the workspace, with its package and
/// lib names as Rust spells them.
fn backends() -> Vec<Backend> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(workspace()).expect("workspace is readable").flatten() {
        let dir = e.path();
        let dname = e.file_name().to_string_lossy().into_owned();
        let Ok(toml) = std::fs::read_to_string(dir.join("Cargo.toml")) else { continue };
        if !dname.starts_with("dapl-provider-") {
            continue;
        }
        let mut names = vec![dname.replace('-', "_")];
        // `name = "..."` lines: the package's and, under [lib], the library's.
        for line in toml.lines() {
            if let Some(v) = line.trim().strip_prefix("name = \"").and_then(|v| v.strip_suffix('"')) {
                names.push(v.replace('-', "_"));
            }
        }
        names.sort();
        names.dedup();
        found.push(Backend { dir, names });
    }
    found
}

/// Why `code` (one line, comments removed) names a backend, if it does.
fn forbidden(code: &str, backend_names: &[String]) -> Option<String> {
    for path in ["rdma_core_sys", "crate::verbs", "verbs::", "ibv::", "crate::sock", "sock::"] {
        if code.contains(path) {
            return Some(format!("names `{path}`"));
        }
    }
    for (w, field) in idents(code) {
        // A field of a DAT structure (`a.rdma_write_for_rdma_read_req`) is DAT's name, not verbs'.
        if !field && (["ibv_", "rdma_", "IBV_", "RDMA_"].iter().any(|p| w.starts_with(p)) || w == "ibv") {
            return Some(format!("names verbs/rdma_cm identifier `{w}`"));
        }
        if backend_names.iter().any(|b| b == w) {
            return Some(format!("names backend crate `{w}`"));
        }
    }
    None
}

/// The .rs files under `dir`, recursively, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{} is readable: {e}", d.display())).flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no sources in {}", dir.display());
    out
}

/// Lines of the files under `dir` that name a backend, as "file:line: why: code".
fn violations(dir: &Path, names: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for f in sources(dir) {
        // This file spells out the forbidden names on purpose.
        if f.file_name().is_some_and(|n| n == "layering.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("source is readable");
        for (n, line) in text.lines().enumerate() {
            if let Some(why) = forbidden(code_of(line), names) {
                found.push(format!("{}:{}: {why}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn core_does_not_name_a_backend() {
    let names: Vec<String> = backends().into_iter().flat_map(|b| b.names).collect();
    assert!(names.iter().any(|n| n == "daplibv"), "the verbs backend crate is found: {names:?}");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = violations(&src, &names);
    assert!(v.is_empty(), "core modules must use crate::backend, not a backend directly:\n{}", v.join("\n"));
}

#[test]
fn no_backend_names_another() {
    let all = backends();
    let mut v = Vec::new();
    for b in &all {
        let others: Vec<String> = all.iter().filter(|o| o.dir != b.dir).flat_map(|o| o.names.clone()).collect();
        v.extend(violations(&b.dir.join("src"), &others).into_iter().filter(|l| l.contains("backend crate")));
        let toml = std::fs::read_to_string(b.dir.join("Cargo.toml")).expect("Cargo.toml is readable");
        for o in all.iter().filter(|o| o.dir != b.dir) {
            let dir = o.dir.file_name().unwrap().to_string_lossy().into_owned();
            if toml.contains(&format!("../{dir}")) || toml.lines().any(|l| l.trim().starts_with(&format!("{dir} "))) {
                v.push(format!("{}: depends on {dir}", b.dir.join("Cargo.toml").display()));
            }
        }
    }
    assert!(v.is_empty(), "a backend crate must not name another:\n{}", v.join("\n"));
}

#[test]
fn the_backend_check_catches_what_it_should() {
    let names = vec!["daplibv".to_owned(), "dapl_provider_sock".to_owned()];
    assert!(forbidden("use rdma_core_sys as ibv;", &names).is_some());
    assert!(forbidden("let x = ibv::IBV_QPS_RTS;", &names).is_some());
    assert!(forbidden("unsafe { rdma_disconnect(id) };", &names).is_some());
    assert!(forbidden("use crate::verbs::cm;", &names).is_some());
    assert!(forbidden("let wc: ibv_wc = x;", &names).is_some());
    assert!(forbidden("use dapl_provider_sock::Sock;", &names).is_some());
    assert!(forbidden("type A = daplibv::Verbs;", &names).is_some());
    assert!(forbidden("a.max_rdma_read_in = 4;", &names).is_none());
    assert!(forbidden("post_rdma_write(h)", &names).is_none());
    assert!(forbidden("a.rdma_read_lmr_rmr_context_exposure = 0;", &names).is_none());
    assert!(forbidden("dapl_core::provider!(verbs::Verbs, \"daplibv\");", &[]).is_some());
    assert_eq!(code_of("let a = 1; // ibv_post_send"), "let a = 1; ");
    // The verbs backend is outside the core check, and is what it would catch.
    let verbs = workspace().join("dapl-provider-ibv/src/verbs");
    assert!(!violations(&verbs, &[]).is_empty());
}
