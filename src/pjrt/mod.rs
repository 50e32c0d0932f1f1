//! The thin PJRT backend: loads a vendor PJRT C API plugin at run time and wraps its
//! C objects in safe RAII types. The only module of the crate with `unsafe` code.
//!
//! Layers: `raw` declares the C structs and the function table's slots; `api`
//! holds the loaded table and the one call funnel (every `PJRT_Error` becomes
//! [`Error::Pjrt`](crate::Error::Pjrt)); the safe types sit on top, one per C object.
//! Each handle owns an `Arc` of what it depends on (buffer → client → plugin).

mod api;
#[doc(hidden)]
pub mod bench_support;
mod buffer;
mod client;
mod device;
mod elf;
mod event;
mod executable;
mod options;
mod raw;

pub use api::{NamedValue, Plugin};
pub use buffer::Buffer;
pub use client::COMPILE_STACK;
pub use client::Client;
pub use device::Device;
pub use event::{AUTO_SPIN, Event, WaitPolicy};
pub use executable::{Arg, Execution, LoadedExecutable, MemoryStats};
pub use options::{ClientOptions, CompileOptions, MAX_CPU_DEVICES, XLA_DEBUG_DEFAULTS};

/// The PJRT C API major version this crate speaks (plugins of another major version
/// are refused with [`Error::IncompatibleApi`](crate::Error::IncompatibleApi)).
pub const SUPPORTED_API_MAJOR: i32 = raw::PJRT_API_MAJOR;
