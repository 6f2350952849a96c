//! Where `dlopen` looks for a provider library, replayed so a missing one can
//! be explained: a name with a `/` is a path; a bare name is looked up in
//! `LD_LIBRARY_PATH`, then the ld.so cache (`/etc/ld.so.cache`, built by
//! ldconfig from `/etc/ld.so.conf`), then the default directories.
//! (RPATH/RUNPATH of libdat2 itself would come in between; ours has none.)
//! The real dlopen is still what decides; this only tells where to look.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    pub name: String,
    /// The file and which step found it ("LD_LIBRARY_PATH", "ld.so cache",
    /// "default directory", "path").
    pub found: Option<(PathBuf, &'static str)>,
    /// Each step that did not find it, in order: "not in LD_LIBRARY_PATH (/a, /b)".
    pub looked: Vec<String>,
}

impl Search {
    /// "not in LD_LIBRARY_PATH (...), not in the ld.so cache (...), not in ..."
    pub fn not_found_text(&self) -> String {
        self.looked.join("; ")
    }
}

/// Directories glibc searches after the cache on this architecture
/// (Debian's multiarch directories first).
pub fn default_dirs() -> Vec<String> {
    let tuple = match std::env::consts::ARCH {
        "x86_64" => Some("x86_64-linux-gnu"),
        "aarch64" => Some("aarch64-linux-gnu"),
        "x86" => Some("i386-linux-gnu"),
        _ => None,
    };
    let mut dirs = Vec::new();
    if let Some(t) = tuple {
        dirs.push(format!("/lib/{t}"));
        dirs.push(format!("/usr/lib/{t}"));
    }
    if cfg!(target_pointer_width = "64") {
        dirs.push("/lib64".into());
        dirs.push("/usr/lib64".into());
    }
    dirs.push("/lib".into());
    dirs.push("/usr/lib".into());
    dirs
}

/// The ld.so cache's (name -> path) entries for this architecture, from the
/// glibc >= 2.32 format ("glibc-ld.so.cache1.1"). None if unreadable.
pub fn read_ld_cache(bytes: &[u8]) -> Option<Vec<(String, String)>> {
    const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    let start = bytes.windows(MAGIC.len()).position(|w| w == MAGIC)?;
    let u32_at = |off: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(bytes.get(off..off + 4)?.try_into().ok()?))
    };
    let nlibs = u32_at(start + 20)? as usize;
    let cstr_at = |off: usize| -> Option<String> {
        // Offsets are from the start of the new-format header.
        let s = bytes.get(start + off..)?;
        let end = s.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&s[..end]).into_owned())
    };
    let arch_flag: Option<u32> = match std::env::consts::ARCH {
        "x86_64" => Some(0x0300),
        "aarch64" => Some(0x0a00),
        _ => None,
    };
    let mut out = Vec::with_capacity(nlibs.min(1 << 16));
    for i in 0..nlibs {
        let e = start + 48 + i * 24;
        let flags = u32_at(e)?;
        if arch_flag.is_some_and(|f| flags & 0xff00 != f) {
            continue;
        }
        out.push((cstr_at(u32_at(e + 4)? as usize)?, cstr_at(u32_at(e + 8)? as usize)?));
    }
    Some(out)
}

/// Replays the search for `library` under `root` ("/" normally), with the
/// given LD_LIBRARY_PATH value.
pub fn search(library: &str, ld_library_path: Option<&str>, root: &Path) -> Search {
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    let mut s = Search { name: library.to_owned(), found: None, looked: Vec::new() };
    if library.contains('/') {
        let p = Path::new(library);
        if p.is_file() {
            s.found = Some((p.to_owned(), "path"));
        } else {
            s.looked.push(format!("no file at {library} (dat.conf gives a path, so nothing else is searched)"));
        }
        return s;
    }
    // LD_LIBRARY_PATH: ':' or ';' separated; an empty element is the cwd.
    if let Some(lp) = ld_library_path.filter(|v| !v.is_empty()) {
        let dirs: Vec<&str> = lp.split([':', ';']).collect();
        for d in &dirs {
            let dir = if d.is_empty() { "." } else { d };
            let p = Path::new(dir).join(library);
            if p.is_file() {
                s.found = Some((p, "LD_LIBRARY_PATH"));
                return s;
            }
        }
        s.looked.push(format!("not in LD_LIBRARY_PATH ({})", dirs.join(", ")));
    } else {
        s.looked.push("LD_LIBRARY_PATH not set".into());
    }
    let cache_path = at("/etc/ld.so.cache");
    match std::fs::read(&cache_path).ok().as_deref().and_then(read_ld_cache) {
        Some(entries) => {
            if let Some((_, p)) = entries.iter().find(|(k, _)| k == library) {
                s.found = Some((PathBuf::from(p), "ld.so cache"));
                return s;
            }
            s.looked.push(format!(
                "not in the ld.so cache (/etc/ld.so.cache, {} libraries; rebuilt from /etc/ld.so.conf by ldconfig)",
                entries.len()
            ));
        }
        None => s.looked.push("no ld.so cache (/etc/ld.so.cache missing or unreadable)".into()),
    }
    let dirs = default_dirs();
    for d in &dirs {
        if at(d).join(library).is_file() {
            s.found = Some((Path::new(d).join(library), "default directory"));
            return s;
        }
    }
    s.looked.push(format!("not in the default directories ({})", dirs.join(", ")));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::tests::{TempDir, write};

    fn fake_cache(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut strings = Vec::new();
        let base = 48 + 24 * entries.len();
        let mut recs = Vec::new();
        for (k, v) in entries {
            let ko = base + strings.len();
            strings.extend_from_slice(k.as_bytes());
            strings.push(0);
            let vo = base + strings.len();
            strings.extend_from_slice(v.as_bytes());
            strings.push(0);
            recs.push((ko as u32, vo as u32));
        }
        let mut b = b"glibc-ld.so.cache1.1".to_vec();
        b.extend_from_slice(&(entries.len() as u32).to_ne_bytes());
        b.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        b.resize(48, 0);
        let flags: u32 = match std::env::consts::ARCH {
            "x86_64" => 0x0303,
            "aarch64" => 0x0a03,
            _ => 3,
        };
        for (k, v) in recs {
            for w in [flags, k, v, 0] {
                b.extend_from_slice(&w.to_ne_bytes());
            }
            b.extend_from_slice(&0u64.to_ne_bytes());
        }
        b.extend_from_slice(&strings);
        b
    }

    #[test]
    fn parses_a_cache() {
        let c = fake_cache(&[("libfoo.so.2", "/opt/x/libfoo.so.2"), ("libc.so.6", "/lib/libc.so.6")]);
        let e = read_ld_cache(&c).unwrap();
        assert_eq!(e[0], ("libfoo.so.2".into(), "/opt/x/libfoo.so.2".into()));
        assert_eq!(e.len(), 2);
        assert!(read_ld_cache(b"garbage").is_none());
    }

    #[test]
    fn parses_this_hosts_cache_if_any() {
        if let Ok(b) = std::fs::read("/etc/ld.so.cache") {
            let e = read_ld_cache(&b).expect("this host's cache parses");
            assert!(e.iter().any(|(k, _)| k.starts_with("libc.so")), "libc in the cache");
        }
    }

    #[test]
    fn search_order_and_not_found_text() {
        let t = TempDir::new("libsearch");
        let r = &t.0;
        let lp = r.join("lp");
        write(&lp, "libinlp.so.2", "x");
        write(r, "etc/ld.so.cache", "");
        std::fs::write(r.join("etc/ld.so.cache"), fake_cache(&[("libcached.so.2", "/opt/libcached.so.2")])).unwrap();
        write(r, "usr/lib/libdefault.so.2", "x");
        let lps = format!("/nonexistent:{}", lp.display());

        let s = search("libinlp.so.2", Some(&lps), r);
        assert_eq!(s.found, Some((lp.join("libinlp.so.2"), "LD_LIBRARY_PATH")));
        let s = search("libcached.so.2", Some(&lps), r);
        assert_eq!(s.found, Some((PathBuf::from("/opt/libcached.so.2"), "ld.so cache")));
        let s = search("libdefault.so.2", None, r);
        assert_eq!(s.found, Some((PathBuf::from("/usr/lib/libdefault.so.2"), "default directory")));

        let s = search("libnope.so.2", Some(&lps), r);
        assert!(s.found.is_none());
        let text = s.not_found_text();
        assert!(text.contains(&format!("LD_LIBRARY_PATH (/nonexistent, {})", lp.display())), "{text}");
        assert!(text.contains("ld.so cache (/etc/ld.so.cache, 1 libraries"), "{text}");
        assert!(text.contains("/usr/lib)"), "{text}");

        let s = search("/abs/libnope.so.2", None, r);
        assert!(s.not_found_text().starts_with("no file at /abs/libnope.so.2"));
    }
}
