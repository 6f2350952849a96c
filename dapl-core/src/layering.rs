//! Keeps the layering honest, over every crate of the workspace:
//!
//! - the core (this crate) reaches a transport only through `backend`, so
//!   a new backend fits without touching it: it names no backend crate,
//!   no verbs or rdma_cm identifier (comments may name verbs concepts);
//! - no backend crate (`dapl-provider-*`) names another;
//! - the core's modules stand in the floors lib.rs's doc table gives them,
//!   and each names only modules on floors below its own.

use std::collections::HashMap;
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

/// The floor of each core module, from lib.rs's doc table: rows
/// `//! | N | \`a\`, \`b\` | ...`. lib.rs ("this file") is on the last row.
fn floors() -> HashMap<String, u32> {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).expect("lib.rs is readable");
    let mut map = HashMap::new();
    for line in lib.lines() {
        let Some(row) = line.strip_prefix("//! |") else { continue };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Ok(floor) = cells[0].parse::<u32>() else { continue };
        for m in cells[1].split(',').map(str::trim) {
            let name = if m == "this file" { "lib" } else { m.trim_matches('`') };
            assert!(map.insert(name.to_owned(), floor).is_none(), "{name} is on two floors");
        }
    }
    map
}

/// The crate modules `text` names: `crate::m` anywhere in code, and each
/// `m` of `use crate::{m, n::x}`.
fn crate_refs(text: &str) -> Vec<String> {
    let code: String = text.lines().map(code_of).collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Only the names at the group's top level are modules.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(std::mem::take(&mut item));
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            out.push(item);
        } else {
            out.push(rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect());
        }
    }
    out.into_iter()
        .map(|s| s.trim().split("::").next().unwrap_or("").trim().to_owned())
        .filter(|s| !s.is_empty() && s != "self")
        .collect()
}

/// Each use of a module on the user's own floor or a higher one.
fn floor_violations(floors: &HashMap<String, u32>, files: &[(String, String)]) -> Vec<String> {
    let mut v = Vec::new();
    for (name, text) in files {
        let Some(&mine) = floors.get(name) else {
            v.push(format!("{name}.rs has no floor in lib.rs's table"));
            continue;
        };
        for m in crate_refs(text) {
            match floors.get(&m) {
                _ if m == *name => {}
                Some(&theirs) if theirs < mine => {}
                Some(&theirs) => v.push(format!("{name}.rs (floor {mine}) uses {m} (floor {theirs})")),
                // Items lib.rs re-exports at the crate root (`crate::Provider`).
                None if floors.get("lib") == Some(&mine) => {}
                None => v.push(format!("{name}.rs uses crate::{m}, which has no floor")),
            }
        }
    }
    v
}

#[test]
fn each_module_uses_only_lower_floors() {
    let floors = floors();
    // Test-only modules stand outside the floors: they drive all of them.
    let exempt = ["core_tests", "layering"];
    let files: Vec<(String, String)> = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
        .into_iter()
        .map(|f| (f.file_stem().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&f).expect("readable")))
        .filter(|(n, _)| !exempt.contains(&n.as_str()))
        .collect();
    for name in floors.keys() {
        assert!(name == "lib" || files.iter().any(|(n, _)| n == name), "lib.rs's floor table names {name}, which is not a module file");
    }
    let v = floor_violations(&floors, &files);
    assert!(v.is_empty(), "a module may use only modules on lower floors (lib.rs's table):\n{}", v.join("\n"));
}

#[test]
fn the_floor_check_catches_what_it_should() {
    let refs = crate_refs("use crate::backend::{A, B};\nuse crate::{ep::{self, Ep}, evd, handle};\nlet x = crate::dto::f(); // crate::table\n");
    assert_eq!(refs, ["backend", "ep", "evd", "handle", "dto"]);
    let floors: HashMap<String, u32> = [("a", 0), ("b", 1), ("c", 1)].into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let file = |n: &str, t: &str| (n.to_owned(), t.to_owned());
    assert!(floor_violations(&floors, &[file("b", "use crate::a::X;\nuse crate::b::Y;")]).is_empty());
    assert_eq!(floor_violations(&floors, &[file("b", "use crate::c;")]).len(), 1, "same floor");
    assert_eq!(floor_violations(&floors, &[file("a", "crate::b::f()")]).len(), 1, "upward");
    assert_eq!(floor_violations(&floors, &[file("d", "")]).len(), 1, "no floor");
}
