//! The static registry file, `dat.conf` (format per dat.conf(5)).
//!
//! Parsing is pure and total: any byte string yields entries plus a list of
//! per-line complaints, so a broken line never hides the good ones around it.

use std::path::{Path, PathBuf};

/// Longest IA name that still fits `DAT_PROVIDER_INFO.ia_name` with its NUL.
pub const MAX_IA_NAME: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub line: usize,
    pub ia_name: String,
    /// `u` entries are for user-space DAT; `k` ones belong to kernel DAT.
    pub user_api: bool,
    pub api_major: u32,
    pub api_minor: u32,
    pub thread_safe: bool,
    pub is_default: bool,
    pub library: String,
    pub provider_id: String,
    pub provider_major: u32,
    pub provider_minor: u32,
    pub ia_params: String,
    pub platform_params: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

#[derive(Debug, Default, Clone)]
pub struct Conf {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
    pub errors: Vec<LineError>,
}

/// Where the registry reads from: `DAT_OVERRIDE` if set, as DAPL users expect.
pub fn default_path() -> PathBuf {
    match std::env::var_os("DAT_OVERRIDE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("/etc/dat.conf"),
    }
}

impl Conf {
    /// Reads and parses `path`; an unreadable file is one complaint, not a failure.
    pub fn load(path: &Path) -> Conf {
        match std::fs::read(path) {
            Ok(bytes) => {
                let mut conf = parse(&bytes);
                conf.path = path.to_owned();
                conf
            }
            Err(e) => Conf {
                path: path.to_owned(),
                entries: Vec::new(),
                errors: vec![LineError { line: 0, message: format!("cannot read file: {e}") }],
            },
        }
    }
}

pub fn parse(bytes: &[u8]) -> Conf {
    let mut conf = Conf::default();
    for (idx, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = idx + 1;
        let text = String::from_utf8_lossy(raw);
        match parse_line(&text) {
            Ok(None) => {}
            Ok(Some(mut entry)) => {
                entry.line = line;
                conf.entries.push(entry);
            }
            Err(message) => conf.errors.push(LineError { line, message }),
        }
    }
    conf
}

/// Splits a line into fields: whitespace separates, `#` outside quotes starts a
/// comment, and inside double quotes `\\` and `\"` are the escapes.
fn fields(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None | Some('#') => return Ok(out),
            Some('"') => {
                chars.next();
                let mut field = String::new();
                loop {
                    match chars.next() {
                        None => return Err("unterminated quoted field".into()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('\\' | '"')) => field.push(c),
                            Some(c) => {
                                field.push('\\');
                                field.push(c);
                            }
                            None => return Err("unterminated quoted field".into()),
                        },
                        Some(c) => field.push(c),
                    }
                }
                if chars.peek().is_some_and(|c| !c.is_whitespace() && *c != '#') {
                    return Err("text directly after a closing quote".into());
                }
                out.push(field);
            }
            Some(_) => {
                let mut field = String::new();
                while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '#') {
                    field.push(c);
                }
                out.push(field);
            }
        }
    }
}

fn parse_version(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.split_once('.')?;
    let num = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
    };
    Some((num(major)?, num(minor)?))
}

fn parse_line(text: &str) -> Result<Option<Entry>, String> {
    let f = fields(text)?;
    if f.is_empty() {
        return Ok(None);
    }
    // dat.conf(5) names eight fields; old files often leave out the unused
    // platform params, so seven is accepted too.
    if f.len() < 7 || f.len() > 8 {
        return Err(format!("expected 8 fields (ia_name api_version threadsafety default library provider_version \"ia_params\" \"platform_params\"), found {}", f.len()));
    }
    let ia_name = f[0].clone();
    if ia_name.len() > MAX_IA_NAME {
        return Err(format!("IA name is {} bytes long; at most {MAX_IA_NAME} fit", ia_name.len()));
    }
    if ia_name.contains('\0') {
        return Err("IA name contains a NUL byte".into());
    }
    let api = &f[1];
    let user_api = match api.chars().next() {
        Some('u') => true,
        Some('k') => false,
        _ => return Err(format!("api_version '{api}' must look like u2.0 or k2.0")),
    };
    let (api_major, api_minor) = parse_version(&api[1..])
        .ok_or_else(|| format!("api_version '{api}' must look like u2.0 or k2.0"))?;
    let thread_safe = match f[2].as_str() {
        "threadsafe" => true,
        "nonthreadsafe" => false,
        other => return Err(format!("threadsafety '{other}' must be threadsafe or nonthreadsafe")),
    };
    let is_default = match f[3].as_str() {
        "default" => true,
        "nondefault" => false,
        other => return Err(format!("default field '{other}' must be default or nondefault")),
    };
    let library = f[4].clone();
    if library.is_empty() || library.contains('\0') {
        return Err("library field is empty or contains a NUL byte".into());
    }
    let pv = &f[5];
    let (provider_id, provider_major, provider_minor) = pv
        .rsplit_once('.')
        .and_then(|(rest, minor)| {
            let (id, major) = rest.rsplit_once('.')?;
            let (maj, min) = parse_version(&format!("{major}.{minor}"))?;
            (!id.is_empty()).then(|| (id.to_owned(), maj, min))
        })
        .ok_or_else(|| format!("provider_version '{pv}' must look like dapl.2.0"))?;
    Ok(Some(Entry {
        line: 0,
        ia_name,
        user_api,
        api_major,
        api_minor,
        thread_safe,
        is_default,
        library,
        provider_id,
        provider_major,
        provider_minor,
        ia_params: f[6].clone(),
        platform_params: f.get(7).cloned().unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"";

    #[test]
    fn reads_a_reference_line() {
        let c = parse(GOOD.as_bytes());
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        let e = &c.entries[0];
        assert_eq!(e.ia_name, "ofa-v2-ib0");
        assert!(e.user_api && !e.thread_safe && e.is_default);
        assert_eq!((e.api_major, e.api_minor), (2, 0));
        assert_eq!(e.library, "libdaplofa.so.2");
        assert_eq!((e.provider_id.as_str(), e.provider_major, e.provider_minor), ("dapl", 2, 0));
        assert_eq!(e.ia_params, "ib0 0");
        assert_eq!(e.platform_params, "");
        assert_eq!(e.line, 1);
    }

    #[test]
    fn comments_blanks_and_escapes() {
        let text = "# header\n\n   \t# indented comment\nx u2.0 threadsafe nondefault /l.so p.q.1.2 \"a \\\"b\\\" \\\\c\" \"\" # tail\n";
        let c = parse(text.as_bytes());
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.entries.len(), 1);
        let e = &c.entries[0];
        assert_eq!(e.line, 4);
        assert_eq!(e.ia_params, "a \"b\" \\c");
        assert_eq!(e.provider_id, "p.q");
        assert!(e.thread_safe && !e.is_default);
    }

    #[test]
    fn broken_lines_are_reported_and_skipped() {
        let text = format!(
            "bad line here\n{GOOD}\nx u2 threadsafe default l p.2.0 \"\" \"\"\n\
             x u2.0 sometimes default l p.2.0 \"\" \"\"\nx u2.0 threadsafe default l p.2.0 \"open\n\
             x u2.0 threadsafe maybe l p.2.0 \"\" \"\"\nx u2.0 threadsafe default l p20 \"\" \"\"\n\
             x z2.0 threadsafe default l p.2.0 \"\" \"\"\n{} u2.0 threadsafe default l p.2.0 \"\" \"\"\n",
            "n".repeat(300)
        );
        let c = parse(text.as_bytes());
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.entries[0].line, 2);
        let lines: Vec<usize> = c.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![1, 3, 4, 5, 6, 7, 8, 9]);
        assert!(c.errors[0].message.contains("found 3"));
        assert!(c.errors[7].message.contains("at most 255"));
    }

    #[test]
    fn seven_fields_accepted_nine_refused() {
        let c = parse(b"a u2.0 threadsafe default l p.2.0 \"d 1\"\nb u2.0 threadsafe default l p.2.0 \"\" \"\" extra\n");
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.errors.len(), 1);
        assert_eq!(c.errors[0].line, 2);
    }

    #[test]
    fn any_bytes_parse_without_panic() {
        // A cheap deterministic sweep; the fuzz target covers far more.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let len = (state % 200) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    b"ab \t\"\\#.u2k0\n\xff"[(state % 14) as usize]
                })
                .collect();
            let c = parse(&bytes);
            assert!(c.entries.iter().all(|e| e.ia_name.len() <= MAX_IA_NAME));
        }
    }
}
