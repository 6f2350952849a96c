//! The static registry as this process read it: dat.conf, once.

use crate::conf::{self, Conf};
use std::sync::OnceLock;

/// Read on first use rather than at load time, so a program that sets
/// DAT_OVERRIDE before its first DAT call is honoured.
pub fn conf() -> &'static Conf {
    static CONF: OnceLock<Conf> = OnceLock::new();
    CONF.get_or_init(|| {
        dat_abi::logging::init("dat-registry", &["DAT_DBG_TYPE"]);
        let conf = Conf::load(&conf::default_path());
        for e in &conf.errors {
            if e.line == 0 {
                log::warn!("{}: {}", conf.path.display(), e.message);
            } else {
                log::warn!("{}:{}: line skipped: {}", conf.path.display(), e.line, e.message);
            }
        }
        log::debug!("{}: {} provider entries", conf.path.display(), conf.entries.len());
        conf
    })
}
