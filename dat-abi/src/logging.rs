//! Log output switched on by the variables DAPL users already set:
//! `DAT_DBG_TYPE` for the registry, `DAPL_DBG_TYPE` for providers.
//!
//! Each DAT library (libdat2, every provider) is its own shared object with
//! its own copy of `log`, so each installs this logger for itself.
//!
//! Bits as the reference registry reads them: 0x1 errors, 0x2 general, 0x4
//! static registry, 0x8 dynamic registry, 0x10/0x20 provider/consumer API
//! calls. Warnings and errors (a broken dat.conf line, a library that will
//! not load) are always shown, as the reference always prints its ERR lines.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;
use std::sync::{Once, OnceLock};

struct StderrLogger {
    prefix: OnceLock<&'static str>,
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            // One write per line, so lines from several threads do not interleave.
            let prefix = self.prefix.get().copied().unwrap_or("dat");
            let line = match record.level() {
                Level::Error => format!("{prefix} ERR: {}\n", record.args()),
                Level::Warn => format!("{prefix} WARN: {}\n", record.args()),
                // Debug lines name their process: MPI ranks share one stderr.
                _ => format!("{prefix} dbg [{}]: {}\n", std::process::id(), record.args()),
            };
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

/// Parses `0x…` hex or decimal, as DAPL's variables are written either way.
pub fn parse_mask(text: &str) -> Option<u32> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

pub fn level_for(mask: u32) -> LevelFilter {
    if mask & 0x30 != 0 {
        LevelFilter::Trace
    } else if mask & 0x0e != 0 {
        LevelFilter::Debug
    } else {
        LevelFilter::Warn
    }
}

static LOGGER: StderrLogger = StderrLogger { prefix: OnceLock::new() };

/// Installs the logger once, with lines prefixed by `prefix` and the level
/// from the first of `vars` that is set. If the program already installed
/// its own logger in this library's copy of `log`, that one is kept.
pub fn init(prefix: &'static str, vars: &[&str]) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mask = vars
            .iter()
            .find_map(|v| std::env::var(v).ok().and_then(|v| parse_mask(&v)))
            .unwrap_or(0);
        let _ = LOGGER.prefix.set(prefix);
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(level_for(mask));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(parse_mask("0xffff"), Some(0xffff));
        assert_eq!(parse_mask(" 12 "), Some(12));
        assert_eq!(parse_mask("zz"), None);
        assert_eq!(level_for(0), LevelFilter::Warn);
        assert_eq!(level_for(1), LevelFilter::Warn);
        assert_eq!(level_for(4), LevelFilter::Debug);
        assert_eq!(level_for(0xff), LevelFilter::Trace);
    }
}
