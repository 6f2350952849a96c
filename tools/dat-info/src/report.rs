//! The verdict for each dat.conf line: usable, or why not, in words a user
//! can act on. The steps that touch the running system (dlopen of the
//! provider, dat_ia_open through libdat2) come in through [`Probes`], so the
//! logic is tested with fakes; the host's devices come from a sysfs root.

use crate::attrs::IaInfo;
use crate::dat::LibProbe;
use crate::libsearch::{self, Search};
use crate::params::{self, Style};
use crate::sysfs::Host;
use dat_abi::*;
use dat_registry::conf::{Conf, Entry};
use std::path::{Path, PathBuf};

/// Our registry's own minor codes under DAT_PROVIDER_NOT_FOUND
/// (dat-registry/src/status.rs; not in the public headers).
const DAT_LIBRARY_LOAD_FAILED: u32 = 0x7000;
const DAT_PROVIDER_INIT_FAILED: u32 = 0x7001;

pub trait Probes {
    fn library(&self, name: &str) -> LibProbe;
    /// Open + query + close through libdat2; Err(message) if libdat2 itself
    /// is not available.
    fn open(&self, e: &Entry) -> Result<Result<IaInfo, (DAT_RETURN, String)>, String>;
}

#[derive(Debug, Clone)]
pub struct LibraryReport {
    pub search: Search,
    pub loaded_from: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct EntryReport {
    pub line: usize,
    /// The line as written (for broken lines; and shown with -v).
    pub raw: String,
    pub entry: Option<Entry>,
    pub usable: bool,
    /// "usable", "broken-line", "kernel-entry", "shadowed", "library-not-found",
    /// "library-load-failed", "not-a-provider", "device-absent", "port-down",
    /// "no-rdma-device", "wrong-style", "bad-params", "init-failed",
    /// "open-failed", "no-libdat2".
    pub status: &'static str,
    /// Why not usable (empty when usable).
    pub reason: String,
    pub library: Option<LibraryReport>,
    pub params: Option<params::Check>,
    pub info: Option<IaInfo>,
}

impl EntryReport {
    pub fn name(&self) -> Option<&str> {
        self.entry.as_ref().map(|e| e.ia_name.as_str())
    }
}

/// Which entry the registry picks for `dat_ia_open(name, major.minor, ts)`:
/// the same rule as dat-registry's `choose` (exact match first, then a newer
/// minor or a thread-safe entry for a non-thread-safe request).
pub fn registry_pick(entries: &[Entry], name: &str, major: u32, minor: u32, ts: bool) -> Option<usize> {
    let named = || entries.iter().enumerate().filter(|(_, e)| e.user_api && e.ia_name == name);
    named()
        .find(|(_, e)| e.api_major == major && e.api_minor == minor && e.thread_safe == ts)
        .or_else(|| named().find(|(_, e)| e.api_major == major && e.api_minor >= minor && (e.thread_safe || !ts)))
        .map(|(i, _)| i)
}

fn not_usable(r: &mut EntryReport, status: &'static str, reason: String) {
    r.usable = false;
    r.status = status;
    r.reason = reason;
}

pub struct Ctx<'a> {
    pub host: &'a Host,
    pub ld_library_path: Option<String>,
    /// Root for the library search's ld.so cache and default directories.
    pub root: &'a Path,
}

pub fn diagnose_entry(conf: &Conf, index: usize, raw: &str, ctx: &Ctx, probes: &dyn Probes) -> EntryReport {
    let e = &conf.entries[index];
    let mut r = EntryReport {
        line: e.line,
        raw: raw.to_owned(),
        entry: Some(e.clone()),
        usable: false,
        status: "usable",
        reason: String::new(),
        library: None,
        params: None,
        info: None,
    };
    if !e.user_api {
        not_usable(&mut r, "kernel-entry", "a kernel DAT entry (api_version k…); the user-space registry libdat2 ignores it (use u2.0)".into());
        return r;
    }
    match registry_pick(&conf.entries, &e.ia_name, e.api_major, e.api_minor, e.thread_safe) {
        Some(j) if j != index => {
            let other = &conf.entries[j];
            not_usable(
                &mut r,
                "shadowed",
                format!(
                    "never used: dat_ia_open(\"{}\") picks line {} first (same IA name); remove or rename one of them",
                    e.ia_name, other.line
                ),
            );
            return r;
        }
        _ => {}
    }

    let search = libsearch::search(&e.library, ctx.ld_library_path.as_deref(), ctx.root);
    let probe = probes.library(&e.library);
    let loaded_from = match &probe {
        LibProbe::Provider { loaded_from } | LibProbe::NotProvider { loaded_from } => loaded_from.clone(),
        LibProbe::LoadFailed(_) => None,
    };
    r.library = Some(LibraryReport { search: search.clone(), loaded_from: loaded_from.clone() });
    let where_ = || {
        loaded_from
            .clone()
            .or_else(|| search.found.as_ref().map(|(p, _)| p.clone()))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| e.library.clone())
    };
    match &probe {
        LibProbe::LoadFailed(err) => {
            if search.found.is_none() && !e.library.contains('/') || e.library.contains('/') && !Path::new(&e.library).exists() {
                let fix = if e.library.contains('/') {
                    "fix the path in dat.conf, or install the provider there"
                } else {
                    "install the provider package, or add its directory to LD_LIBRARY_PATH (or /etc/ld.so.conf.d/ and run ldconfig), or give an absolute path in dat.conf"
                };
                not_usable(&mut r, "library-not-found", format!("library {} not found: {}; {fix}", e.library, search.not_found_text()));
            } else {
                not_usable(
                    &mut r,
                    "library-load-failed",
                    format!("library {} is present ({}) but does not load: {err}", e.library, where_()),
                );
            }
            return r;
        }
        LibProbe::NotProvider { .. } => {
            not_usable(
                &mut r,
                "not-a-provider",
                format!(
                    "library {} ({}) loads but is not a DAT provider: it has no dat_provider_init; the library field must name a uDAPL provider such as libdaplofa.so.2",
                    e.library,
                    where_()
                ),
            );
            return r;
        }
        LibProbe::Provider { .. } => {}
    }

    let style = Style::of(&e.library);
    let check = params::check(ctx.host, style, &e.ia_params);
    r.params = Some(check.clone());
    if !check.ok {
        not_usable(&mut r, check.status, check.text);
        return r;
    }

    match probes.open(e) {
        Err(msg) => not_usable(&mut r, "no-libdat2", format!("not opened: libdat2.so.2 did not load ({msg}); set LD_LIBRARY_PATH to its directory")),
        Ok(Err((ret, text))) => {
            let minor = ret & 0xffff;
            let major = ret & 0x3fff_0000;
            if major == DAT_PROVIDER_NOT_FOUND && minor == DAT_PROVIDER_INIT_FAILED {
                not_usable(
                    &mut r,
                    "init-failed",
                    format!(
                        "the provider's dat_provider_init did not register the IA ({text}): its device or ia_params \"{}\" may be wrong; DAPL_DBG_TYPE=0xffff shows the provider's own messages",
                        e.ia_params
                    ),
                );
            } else if major == DAT_PROVIDER_NOT_FOUND && minor == DAT_LIBRARY_LOAD_FAILED {
                not_usable(&mut r, "library-load-failed", format!("the registry could not load {} ({text}); DAT_DBG_TYPE=0x4 shows why", e.library));
            } else {
                not_usable(&mut r, "open-failed", format!("dat_ia_open failed: {text}"));
            }
        }
        Ok(Ok(info)) => {
            r.usable = true;
            r.info = Some(info);
        }
    }
    r
}

pub fn broken_line(line: usize, message: &str, raw: &str) -> EntryReport {
    EntryReport {
        line,
        raw: raw.to_owned(),
        entry: None,
        usable: false,
        status: "broken-line",
        reason: format!("line skipped by the registry: {message}"),
        library: None,
        params: None,
        info: None,
    }
}

/// Every entry and broken line of `conf` in line order; `only` keeps the
/// entries with that IA name (and broken lines that start with it).
pub fn diagnose_all(conf: &Conf, text: &str, ctx: &Ctx, probes: &dyn Probes, only: Option<&str>) -> Vec<EntryReport> {
    let lines: Vec<&str> = text.split('\n').collect();
    let raw = |n: usize| lines.get(n.wrapping_sub(1)).copied().unwrap_or("").trim_end_matches('\r').to_owned();
    let mut out = Vec::new();
    for err in conf.errors.iter().filter(|e| e.line > 0) {
        let line = raw(err.line);
        if only.is_none_or(|n| line.split_whitespace().next() == Some(n)) {
            out.push(broken_line(err.line, &err.message, &line));
        }
    }
    for (i, e) in conf.entries.iter().enumerate() {
        if only.is_none_or(|n| e.ia_name == n) {
            out.push(diagnose_entry(conf, i, &raw(e.line), ctx, probes));
        }
    }
    out.sort_by_key(|r| r.line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::Val;
    use crate::sysfs::scan;
    use crate::sysfs::tests::fake_host;
    use dat_registry::conf::parse;

    struct Fake {
        providers: Vec<&'static str>,
        plain: Vec<&'static str>,
        libdat2: bool,
        fail_open: Option<DAT_RETURN>,
    }

    impl Probes for Fake {
        fn library(&self, name: &str) -> LibProbe {
            if self.providers.contains(&name) {
                LibProbe::Provider { loaded_from: Some(PathBuf::from(format!("/x/{name}"))) }
            } else if self.plain.contains(&name) {
                LibProbe::NotProvider { loaded_from: None }
            } else {
                LibProbe::LoadFailed(format!("{name}: cannot open shared object file: No such file or directory"))
            }
        }
        fn open(&self, e: &Entry) -> Result<Result<IaInfo, (DAT_RETURN, String)>, String> {
            if !self.libdat2 {
                return Err("libdat2.so.2: cannot open shared object file".into());
            }
            if let Some(r) = self.fail_open {
                return Ok(Err((r, "DAT_PROVIDER_NOT_FOUND something".into())));
            }
            let mut info = IaInfo::default();
            info.ia.push(("adapter_name", Val::Str(e.ia_name.clone())));
            Ok(Ok(info))
        }
    }

    fn fake() -> Fake {
        Fake { providers: vec!["libdaplofa.so.2", "libdaploscm.so.2", "libdatmock.so.2"], plain: vec!["libc.so.6"], libdat2: true, fail_open: None }
    }

    const CONF: &str = "# comment\n\
        ofa-v2-rxe u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"dum0 0\" \"\"\n\
        this line is broken\n\
        ofa-v2-eth9 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"eth9 0\" \"\"\n\
        nolib u2.0 nonthreadsafe default libnothere.so.2 dapl.2.0 \"dum0 0\" \"\"\n\
        libc u2.0 nonthreadsafe default libc.so.6 dapl.2.0 \"dum0 0\" \"\"\n\
        scm-down u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 \"mlx5_0 2\" \"\"\n\
        ofa-v2-rxe u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"10.0.0.1 0\" \"\"\n\
        kern k2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"dum0 0\" \"\"\n\
        mock u2.0 nonthreadsafe default libdatmock.so.2 dapl.2.0 \"anything\" \"\"\n";

    fn run(f: &Fake, only: Option<&str>) -> Vec<EntryReport> {
        let t = fake_host();
        let host = scan(&t.0);
        let conf = parse(CONF.as_bytes());
        let ctx = Ctx { host: &host, ld_library_path: Some("/nonexistent/lib".into()), root: &t.0 };
        diagnose_all(&conf, CONF, &ctx, f, only)
    }

    #[test]
    fn verdicts_in_line_order() {
        let rs = run(&fake(), None);
        let got: Vec<(usize, &str)> = rs.iter().map(|r| (r.line, r.status)).collect();
        assert_eq!(
            got,
            [
                (2, "usable"),
                (3, "broken-line"),
                (4, "device-absent"),
                (5, "library-not-found"),
                (6, "not-a-provider"),
                (7, "port-down"),
                (8, "shadowed"),
                (9, "kernel-entry"),
                (10, "usable"),
            ]
        );
        assert!(rs[0].usable && rs[8].usable);
        assert!(rs.iter().filter(|r| r.usable).count() == 2);
        assert_eq!(rs[1].raw, "this line is broken");
        assert!(rs[1].reason.contains("found 4"), "{}", rs[1].reason);
        assert_eq!(rs[2].reason, "netdev eth9 absent; present: dum0 (rxe0 port 1 ACTIVE), eth2, eth10, ib0 (mlx5_0 port 1 ACTIVE), lo");
        assert!(rs[3].reason.starts_with("library libnothere.so.2 not found: not in LD_LIBRARY_PATH (/nonexistent/lib)"), "{}", rs[3].reason);
        assert!(rs[4].reason.contains("not a DAT provider"), "{}", rs[4].reason);
        assert!(rs[5].reason.contains("port 2 is DOWN"), "{}", rs[5].reason);
        assert!(rs[6].reason.contains("picks line 2 first"), "{}", rs[6].reason);
        assert_eq!(rs[8].params.as_ref().unwrap().status, "unchecked");
    }

    #[test]
    fn only_one_name() {
        let rs = run(&fake(), Some("ofa-v2-rxe"));
        assert_eq!(rs.iter().map(|r| r.line).collect::<Vec<_>>(), [2, 8]);
        let rs = run(&fake(), Some("this"));
        assert_eq!(rs.iter().map(|r| r.status).collect::<Vec<_>>(), ["broken-line"]);
    }

    #[test]
    fn open_failures_are_explained() {
        let mut f = fake();
        f.fail_open = Some(DAT_CLASS_ERROR | DAT_PROVIDER_NOT_FOUND | DAT_PROVIDER_INIT_FAILED);
        let rs = run(&f, Some("ofa-v2-rxe"));
        assert_eq!(rs[0].status, "init-failed");
        assert!(rs[0].reason.contains("\"dum0 0\""), "{}", rs[0].reason);
        f.fail_open = Some(DAT_CLASS_ERROR | DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY);
        assert_eq!(run(&f, Some("mock"))[0].status, "open-failed");
        f.fail_open = None;
        f.libdat2 = false;
        let rs = run(&f, Some("mock"));
        assert_eq!(rs[0].status, "no-libdat2");
        assert!(!rs[0].usable);
    }

    #[test]
    fn pick_follows_the_registry() {
        let c = parse(
            b"a u2.0 nonthreadsafe default l p.2.0 \"\" \"\"\na u2.0 threadsafe default l p.2.0 \"\" \"\"\na u2.1 nonthreadsafe default l p.2.0 \"\" \"\"\n",
        );
        assert_eq!(registry_pick(&c.entries, "a", 2, 0, false), Some(0));
        assert_eq!(registry_pick(&c.entries, "a", 2, 0, true), Some(1));
        assert_eq!(registry_pick(&c.entries, "a", 2, 1, false), Some(2));
        assert_eq!(registry_pick(&c.entries, "b", 2, 0, false), None);
    }
}
