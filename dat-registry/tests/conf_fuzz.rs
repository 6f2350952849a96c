//! Property test of the dat.conf parser (`dat_registry::conf`) over random
//! and mutated input, with a small self-contained PRNG (no extra crates).
//!
//! Properties:
//! - any bytes parse without a panic, deterministically, and every entry
//!   obeys the format's limits (IA name at most 255 bytes, no NUL, library
//!   present, line numbers in range and increasing);
//! - a randomly generated valid line (quoted fields with escapes, comments,
//!   odd whitespace, 7 or 8 fields) parses to exactly the fields it encodes;
//! - a mutated line (bytes flipped, inserted, deleted, lines spliced) never
//!   takes its valid neighbours down with it: they still parse, unchanged,
//!   at their own line numbers.
//!
//! `CONF_FUZZ_ITERS` scales the run (default 20000 per property).

use dat_registry::conf::{parse, Entry, MAX_IA_NAME};

/// xorshift64*: small, fast, and deterministic from its seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn iters() -> usize {
    std::env::var("CONF_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20000)
}

/// The invariants every parse result must keep, whatever the input.
fn check_invariants(input: &[u8]) -> dat_registry::conf::Conf {
    let c = parse(input);
    let lines = input.split(|&b| b == b'\n').count();
    let mut last = 0;
    for e in &c.entries {
        assert!(e.ia_name.len() <= MAX_IA_NAME, "IA name of {} bytes accepted", e.ia_name.len());
        assert!(!e.ia_name.is_empty() && !e.ia_name.contains('\0'), "bad IA name {:?}", e.ia_name);
        assert!(!e.library.is_empty() && !e.library.contains('\0'), "bad library {:?}", e.library);
        assert!(!e.provider_id.is_empty(), "empty provider id");
        assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}", e.line);
        assert!(e.line > last, "entries out of line order");
        last = e.line;
    }
    for err in &c.errors {
        assert!(err.line >= 1 && err.line <= lines, "error at line {} of {lines}", err.line);
        assert!(!err.message.is_empty());
        assert!(!c.entries.iter().any(|e| e.line == err.line), "line {} is both an entry and an error", err.line);
    }
    assert!(c.entries.len() + c.errors.len() <= lines);
    // Deterministic: the same bytes give the same answer.
    let again = parse(input);
    assert_eq!(again.entries, c.entries);
    assert_eq!(again.errors, c.errors);
    c
}

const ALPHABET: &[u8] = b"ab \t\"\\#.u2k0\n\xff\x00\r";

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(0x5eed_0001);
    for _ in 0..iters() {
        let len = rng.below(600);
        let bytes: Vec<u8> = (0..len)
            .map(|_| if rng.chance(50) { rng.next() as u8 } else { *rng.pick(ALPHABET) })
            .collect();
        check_invariants(&bytes);
    }
}

/// A field value and how it is written in the file.
fn quote(value: &str) -> String {
    let mut s = String::from("\"");
    for c in value.chars() {
        if c == '"' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

fn word(rng: &mut Rng, min: usize, max: usize, chars: &[u8]) -> String {
    let n = min + rng.below(max - min + 1);
    (0..n).map(|_| *rng.pick(chars) as char).collect()
}

const NAME_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:/+";

/// Any text a quoted field may hold: spaces, '#', quotes, backslashes, UTF-8.
fn free_text(rng: &mut Rng) -> String {
    let pieces = ["a", "Z", "0", " ", "\t", "#", "\"", "\\", "\\\"", "é", "ß", "→", "dum0", "rxe0 1", "10.0.0.1", "'"];
    let n = rng.below(12);
    (0..n).map(|_| *rng.pick(&pieces)).collect()
}

fn space(rng: &mut Rng) -> &'static str {
    rng.pick::<&str>(&[" ", "  ", "\t", " \t "])
}

/// A valid line and the entry it must parse to (line number filled later).
fn valid_line(rng: &mut Rng) -> (String, Entry) {
    let ia_name = if rng.chance(5) {
        "n".repeat(MAX_IA_NAME)
    } else {
        word(rng, 1, 40, NAME_CHARS)
    };
    let user_api = rng.chance(80);
    let (api_major, api_minor) = (rng.below(5) as u32, rng.below(100) as u32);
    let thread_safe = rng.chance(50);
    let is_default = rng.chance(50);
    let library = word(rng, 1, 60, NAME_CHARS);
    let provider_id = format!("{}{}", word(rng, 1, 8, b"abcdxyz"), if rng.chance(30) { ".v" } else { "" });
    let (provider_major, provider_minor) = (rng.below(1000) as u32, rng.below(1000) as u32);
    let ia_params = free_text(rng);
    let eight = rng.chance(80);
    let platform_params = if eight { free_text(rng) } else { String::new() };
    let field = |rng: &mut Rng, v: &str| if rng.chance(30) { quote(v) } else { v.to_owned() };
    let mut line = String::new();
    if rng.chance(20) {
        line.push_str(space(rng));
    }
    let fields = [
        field(rng, &ia_name),
        format!("{}{}.{}", if user_api { 'u' } else { 'k' }, api_major, api_minor),
        (if thread_safe { "threadsafe" } else { "nonthreadsafe" }).to_owned(),
        (if is_default { "default" } else { "nondefault" }).to_owned(),
        field(rng, &library),
        format!("{provider_id}.{provider_major}.{provider_minor}"),
        quote(&ia_params),
    ];
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            line.push_str(space(rng));
        }
        line.push_str(f);
    }
    if eight {
        line.push_str(space(rng));
        line.push_str(&quote(&platform_params));
    }
    if rng.chance(25) {
        line.push_str(space(rng));
        line.push_str("# trailing comment \"with quotes\"");
    } else if rng.chance(20) {
        line.push_str(space(rng));
    }
    let entry = Entry {
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
        ia_params,
        platform_params,
    };
    (line, entry)
}

#[test]
fn valid_lines_parse_to_their_fields() {
    let mut rng = Rng::new(0x5eed_0002);
    for _ in 0..iters() {
        let (line, mut want) = valid_line(&mut rng);
        let c = check_invariants(line.as_bytes());
        assert!(c.errors.is_empty(), "valid line refused: {line:?}: {:?}", c.errors);
        assert_eq!(c.entries.len(), 1, "{line:?}");
        want.line = 1;
        assert_eq!(c.entries[0], want, "line {line:?}");
    }
}

#[test]
fn a_whole_file_of_valid_lines_comments_and_blanks() {
    let mut rng = Rng::new(0x5eed_0003);
    for _ in 0..iters() / 20 {
        let mut text = String::new();
        let mut want = Vec::new();
        for n in 1..=rng.below(30) + 1 {
            match rng.below(10) {
                0 => text.push_str("# a comment line"),
                1 => text.push_str(space(&mut rng)),
                _ => {
                    let (line, mut e) = valid_line(&mut rng);
                    e.line = n;
                    text.push_str(&line);
                    want.push(e);
                }
            }
            text.push(if rng.chance(10) { '\r' } else { ' ' });
            text.push('\n');
        }
        let c = check_invariants(text.as_bytes());
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.entries, want);
    }
}

fn mutate(rng: &mut Rng, line: &str) -> Vec<u8> {
    let mut b = line.as_bytes().to_vec();
    for _ in 0..rng.below(4) + 1 {
        let at = if b.is_empty() { 0 } else { rng.below(b.len() + 1) };
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                b.remove(at.min(b.len() - 1));
            }
            2 => b.insert(at, *rng.pick(ALPHABET)),
            3 => b.insert(at, rng.next() as u8),
            4 if !b.is_empty() => {
                // duplicate a slice (fields run together or repeat)
                let end = (at + rng.below(20)).min(b.len());
                let piece = b[at.min(end)..end].to_vec();
                for (k, x) in piece.into_iter().enumerate() {
                    b.insert(at + k, x);
                }
            }
            _ => b.truncate(at),
        }
    }
    // A mutation that adds a newline makes more lines; keep it one line so
    // the neighbours' line numbers are known.
    b.retain(|&x| x != b'\n');
    b
}

#[test]
fn mutated_lines_leave_their_neighbours_alone() {
    let mut rng = Rng::new(0x5eed_0004);
    for _ in 0..iters() {
        let (before, mut e1) = valid_line(&mut rng);
        let (target, _) = valid_line(&mut rng);
        let (after, mut e3) = valid_line(&mut rng);
        let bad = mutate(&mut rng, &target);
        let mut text = before.into_bytes();
        text.push(b'\n');
        text.extend_from_slice(&bad);
        text.push(b'\n');
        text.extend_from_slice(after.as_bytes());
        let c = check_invariants(&text);
        e1.line = 1;
        e3.line = 3;
        assert_eq!(c.entries.first(), Some(&e1), "line 1 lost after mutating line 2 into {:?}", String::from_utf8_lossy(&bad));
        assert_eq!(c.entries.last(), Some(&e3), "line 3 lost after mutating line 2 into {:?}", String::from_utf8_lossy(&bad));
        // line 2 is an entry, an error, or blank/comment: never two things
        assert!(c.entries.len() <= 3 && c.errors.iter().all(|e| e.line == 2));
    }
}

#[test]
fn names_at_and_over_the_limit() {
    let ok = format!("{} u2.0 threadsafe default l p.2.0 \"\" \"\"", "a".repeat(MAX_IA_NAME));
    let c = check_invariants(ok.as_bytes());
    assert_eq!(c.entries.len(), 1);
    assert_eq!(c.entries[0].ia_name.len(), MAX_IA_NAME);
    for extra in [1usize, 2, 1000, 100_000] {
        let long = format!("{} u2.0 threadsafe default l p.2.0 \"\" \"\"", "a".repeat(MAX_IA_NAME + extra));
        let c = check_invariants(long.as_bytes());
        assert!(c.entries.is_empty(), "IA name of {} bytes accepted", MAX_IA_NAME + extra);
        assert_eq!(c.errors.len(), 1);
    }
    // multi-byte characters: the limit is in bytes
    let wide = format!("{} u2.0 threadsafe default l p.2.0 \"\" \"\"", "é".repeat(128));
    assert!(check_invariants(wide.as_bytes()).entries.is_empty(), "256 bytes of UTF-8 accepted");
    // numbers too large for their fields are refused, not wrapped
    let big = "x u99999999999999999999.0 threadsafe default l p.2.0 \"\" \"\"";
    assert!(check_invariants(big.as_bytes()).entries.is_empty());
    let big = "x u2.0 threadsafe default l p.2.99999999999999999999 \"\" \"\"";
    assert!(check_invariants(big.as_bytes()).entries.is_empty());
}
