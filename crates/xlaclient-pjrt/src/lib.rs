//! # xlaclient-pjrt
//!
//! The runtime layer of xlaclient: it loads a vendor **PJRT C API plugin** (a `.so`
//! exporting `GetPjrtApi`) at run time and wraps its C objects in safe RAII types:
//! [`Plugin`], [`Client`], [`Device`], [`Buffer`], [`LoadedExecutable`], [`Event`],
//! with the compile and client options ([`CompileOptions`], [`ClientOptions`]),
//! finding or installing the plugin ([`install`]) and the array types it moves
//! ([`shape`]). It is the only crate of the workspace with `unsafe` code.
//!
//! **What it may import:** `xlaclient-proto` (the prost types of XLA's protos) and
//! outside crates; nothing of the IR, the builder or anything above. It is usable
//! alone by someone who only runs serialized modules: anything implementing
//! [`HloModuleSource`] (the core crate's `Computation`) compiles, and so does a
//! StableHLO text ([`Client::compile_mlir`]).
//!
//! Inside: `raw` declares the C structs and the function table's slots; `api`
//! holds the loaded table and the one call funnel (every `PJRT_Error` becomes
//! [`Error::Pjrt`]); the safe types sit on top, one per C object. Each handle owns
//! an `Arc` of what it depends on (buffer → client → plugin).
//!
//! **Async:** [`Execution`] and [`Event`] are futures of no particular runtime,
//! woken by the plugin's `PJRT_Event_OnReady` callback; polling never blocks, and
//! dropping one while pending is safe.
//!
//! **Tracing:** the crate prints nothing; it reports through `tracing`: an event
//! when a plugin loads (path, API version), a `client_create` span, a `compile`
//! span (module name, cache outcome, `elapsed_us`), an `execute` span (DEBUG) and
//! transfer events with their byte counts (DEBUG). With no subscriber installed
//! each costs a load and a branch.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]

mod api;
#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
pub mod array;
#[doc(hidden)]
pub mod bench_support;
mod buffer;
pub mod cache;
mod client;
mod device;
pub mod distributed;
mod elf;
pub mod error;
mod event;
mod executable;
pub mod ffi;
pub mod float8;
pub mod guard;
mod host;
pub mod host_callback;
pub mod install;
mod options;
mod raw;
pub mod shape;
pub mod xla_flags;

/// XLA's protocol buffers (the `xlaclient-proto` crate).
pub use xlaclient_proto as proto;

pub use api::{NamedValue, Plugin};
#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
pub use array::{ArrayElement, NdArray};
pub use buffer::Buffer;
pub use cache::{CacheStats, CompileCache};
pub use client::COMPILE_STACK;
pub use client::Client;
pub use device::Device;
pub use error::{Error, PjrtErrorCode, Result};
pub use event::{AUTO_SPIN, Event, WaitPolicy};
pub use executable::{Arg, Execution, LoadedExecutable, MemoryStats};
pub use ffi::UNINITIALIZED_TARGET;
pub use host::{AlignedHost, HOST_ALIGN};
pub use host_callback::{HOST_CALLBACK_TARGET, HostValue, register_host_callback};
pub use options::{
    ClientOptions, CompileOptions, LibraryFusion, MAX_CPU_DEVICES, ProgramFormat,
    XLA_DEBUG_DEFAULTS,
};
pub use shape::{ElementType, NativeType, Shape};

/// The PJRT C API major version this crate speaks (plugins of another major version
/// are refused with [`Error::IncompatibleApi`]).
pub const SUPPORTED_API_MAJOR: i32 = raw::PJRT_API_MAJOR;

/// Something the runtime can compile as an HLO module: the serialized
/// `HloModuleProto`, already checked by whoever made it. The core crate's
/// `Computation` is one: it is verified when it is built or raised from a proto.
///
/// # Safety
///
/// Implementing this trait is a promise that [`hlo_module_bytes`](Self::hlo_module_bytes)
/// returns a well-formed, complete module that XLA compiles or refuses with an
/// error (the same contract as [`Client::compile_hlo_bytes_unchecked`]): XLA checks
/// weakly and aborts the process on some malformed modules, and on modules whose
/// entry has dynamic dimensions when they run. The runtime has no verifier of its
/// own, so a safe `compile` relies on this promise; bytes from elsewhere go through
/// the core crate's `Computation::from_hlo_bytes`, which checks them.
pub unsafe trait HloModuleSource {
    /// The module's serialized `HloModuleProto`.
    fn hlo_module_bytes(&self) -> Vec<u8>;

    /// The entry computation's parameter shapes, in parameter order, when known.
    /// The runtime keeps them with the executable and checks every execution's
    /// arguments against them (PJRT itself compares only byte sizes); `None` (the
    /// default) leaves the check to the plugin.
    fn entry_parameter_shapes(&self) -> Option<Vec<Shape>> {
        None
    }

    /// Checks the module against the program's replica and partition counts
    /// before compiling (collectives naming replicas the program does not have:
    /// XLA may abort on them); `Err` says why. The default checks nothing.
    fn check_replicas(&self, _num_replicas: i64, _num_partitions: i64) -> Result<(), String> {
        Ok(())
    }

    /// The module as StableHLO text for a program of `num_replicas` replicas and
    /// `num_partitions` partitions, for a compile in [`ProgramFormat::StableHlo`]:
    /// `None` (the default) when the source cannot print it, `Err` naming what it
    /// cannot express. The text must compute what the HLO module computes, and
    /// carries the same promise as [`hlo_module_bytes`](Self::hlo_module_bytes).
    fn stablehlo_text(
        &self,
        _num_replicas: i64,
        _num_partitions: i64,
    ) -> Option<std::result::Result<String, String>> {
        None
    }

    /// Whether the module calls host callbacks ([`HOST_CALLBACK_TARGET`]): the
    /// client then registers the handler with its plugin before compiling
    /// ([`Plugin::enable_host_callbacks`]). The default says no.
    fn uses_host_callbacks(&self) -> bool {
        false
    }

    /// Whether the module starts some array from a buffer left as allocated (a
    /// custom call to [`UNINITIALIZED_TARGET`], which the core crate's loops use
    /// for stacks they write in full before reading). The client then registers
    /// that kernel with a CPU plugin ([`Plugin::enable_uninitialized_buffers`])
    /// and compiles [`hlo_module_bytes_zeroed`](Self::hlo_module_bytes_zeroed)
    /// where it cannot. The default says no.
    fn uses_uninitialized_buffers(&self) -> bool {
        false
    }

    /// The module with a broadcast of zeros in place of every uninitialized
    /// buffer: what the client compiles where the kernel is unavailable (another
    /// platform, an SPMD-partitioned program). It carries the promise of
    /// [`hlo_module_bytes`](Self::hlo_module_bytes) and must compute the same
    /// results. The default: the module's own bytes.
    fn hlo_module_bytes_zeroed(&self) -> Vec<u8> {
        self.hlo_module_bytes()
    }
}

// SAFETY: the bytes and shapes are `T`'s, which keeps the promise.
unsafe impl<T: HloModuleSource + ?Sized> HloModuleSource for &T {
    fn hlo_module_bytes(&self) -> Vec<u8> {
        (**self).hlo_module_bytes()
    }

    fn entry_parameter_shapes(&self) -> Option<Vec<Shape>> {
        (**self).entry_parameter_shapes()
    }

    fn check_replicas(&self, num_replicas: i64, num_partitions: i64) -> Result<(), String> {
        (**self).check_replicas(num_replicas, num_partitions)
    }

    fn stablehlo_text(
        &self,
        num_replicas: i64,
        num_partitions: i64,
    ) -> Option<std::result::Result<String, String>> {
        (**self).stablehlo_text(num_replicas, num_partitions)
    }

    fn uses_host_callbacks(&self) -> bool {
        (**self).uses_host_callbacks()
    }

    fn uses_uninitialized_buffers(&self) -> bool {
        (**self).uses_uninitialized_buffers()
    }

    fn hlo_module_bytes_zeroed(&self) -> Vec<u8> {
        (**self).hlo_module_bytes_zeroed()
    }
}
