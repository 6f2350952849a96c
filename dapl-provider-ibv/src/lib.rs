//! The verbs provider lives here once issue 3 lands; the crate exists so the workspace layout is fixed.
