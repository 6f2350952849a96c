//! Keeps the split honest: the core (every module directly under src/)
//! must reach the transport only through `backend`, so a second backend
//! fits without touching it. Comments may name verbs concepts; code and
//! string literals may not.

use std::path::Path;

/// The one place the core names its backend: the `Active` alias.
const ALLOWED: &[(&str, &str)] = &[("backend.rs", "pub type Active = crate::verbs::Verbs;")];

/// Why `code` (one line, comments removed) names the verbs backend, if it does.
fn forbidden(code: &str) -> Option<String> {
    for path in ["rdma_core_sys", "crate::verbs", "verbs::", "ibv::"] {
        if code.contains(path) {
            return Some(format!("names `{path}`"));
        }
    }
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut rest = code;
    while let Some(start) = rest.find(ident) {
        let len = rest[start..].find(|c: char| !ident(c)).unwrap_or(rest.len() - start);
        let w = &rest[start..start + len];
        // A field of a DAT structure (`a.rdma_write_for_rdma_read_req`) is DAT's name, not verbs'.
        let field = rest[..start].ends_with('.');
        if !field && (["ibv_", "rdma_", "IBV_", "RDMA_"].iter().any(|p| w.starts_with(p)) || w == "ibv") {
            return Some(format!("names verbs/rdma_cm identifier `{w}`"));
        }
        rest = &rest[start + len..];
    }
    None
}

fn code_of(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

fn violations(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir).expect("src/ is readable").filter_map(|e| e.ok()).map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs")).collect();
    files.sort();
    assert!(!files.is_empty(), "no sources in {}", dir.display());
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&f).expect("core source is readable");
        // This file spells out the forbidden names on purpose.
        if name == "layering.rs" {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if ALLOWED.iter().any(|(file, l)| *file == name && line.trim() == *l) {
                continue;
            }
            if let Some(why) = forbidden(code_of(line)) {
                found.push(format!("src/{name}:{}: {why}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn core_does_not_name_the_verbs_backend() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = violations(&src);
    assert!(v.is_empty(), "core modules must use crate::backend, not verbs directly:\n{}", v.join("\n"));
}

#[test]
fn the_check_catches_what_it_should() {
    assert!(forbidden("use rdma_core_sys as ibv;").is_some());
    assert!(forbidden("let x = ibv::IBV_QPS_RTS;").is_some());
    assert!(forbidden("unsafe { rdma_disconnect(id) };").is_some());
    assert!(forbidden("use crate::verbs::cm;").is_some());
    assert!(forbidden("let wc: ibv_wc = x;").is_some());
    assert!(forbidden("a.max_rdma_read_in = 4;").is_none());
    assert!(forbidden("post_rdma_write(h)").is_none());
    assert!(forbidden("a.rdma_read_lmr_rmr_context_exposure = 0;").is_none());
    assert_eq!(code_of("let a = 1; // ibv_post_send"), "let a = 1; ");
    // The verbs backend itself is outside the check, and is what it would catch.
    let verbs = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/verbs");
    assert!(!violations(&verbs).is_empty());
}
