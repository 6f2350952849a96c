//! The exported C entry points. Each one is listed in `libdat2.map`.

mod extension;
mod forward;
mod ia;
mod registry_calls;
mod wait;

pub use extension::*;
pub use forward::*;
pub use ia::*;
pub use registry_calls::*;
pub use wait::*;
