//! # xlaclient
//!
//! A pure-Rust XLA client. Write computations as Rust expressions on a typed op
//! graph ([`Builder`], [`Op`]); the crate checks every shape and element type as each
//! op is built and emits XLA's `HloModuleProto` itself. A thin backend ([`pjrt`])
//! loads a vendor PJRT C API plugin at run time and compiles and runs the module on
//! CPU, GPU or TPU.
//!
//! ```no_run
//! use xlaclient::{Builder, Client, Shape};
//!
//! // Build: y = tanh(x @ w + 1)
//! let b = Builder::new("layer");
//! let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
//! let w = b.parameter(1, Shape::of::<f32>(&[3, 2]), "w");
//! let y = (x.matmul(&w) + 1.0).tanh();
//! let module = b.build(&y)?;
//! println!("{}", module.to_hlo_text());
//!
//! // Run on the default plugin (the CPU plugin, fetched on first use).
//! let client = Client::cpu()?;
//! let exe = client.compile(&module)?;
//! let xs = client.buffer_from_host(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
//! let ws = client.buffer_from_host(&[0.1f32; 6], &[3, 2])?;
//! let out = exe.execute(&[&xs, &ws])?;
//! println!("{:?}", out[0].to_vec::<f32>()?);
//! # Ok::<(), xlaclient::Error>(())
//! ```
//!
//! Layout: [`ir`] (the typed IR: op kinds and the opcode table, lowering to protos,
//! HLO text, verifier, fingerprint), [`builder`] (the graph under construction,
//! closure conversion), [`ops`] (one file per op family: attribute types, shape rule,
//! builder methods, lowering, tests), [`tree`] and [`jit`] (trees of arrays and
//! compiled functions on them), [`rl`] (environments and async agents whose
//! predictions are batched into one call per tick), [`pjrt`] (the only `unsafe`
//! code), [`install`] (finding or installing the plugin), [`proto`] (our own
//! declarations of XLA's protos).

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

// `#[derive(Tree)]` names the trait `::xlaclient::tree::Tree`, inside this crate too.
extern crate self as xlaclient;

pub mod autodiff;
pub mod builder;
pub mod checkpoint;
pub mod error;
pub mod guide;
pub mod install;
pub mod ir;
pub mod jit;
pub mod nn;
pub mod ops;
pub mod pjrt;
pub mod rl;
#[cfg(feature = "runner")]
pub mod runner;
pub mod shape;
pub mod tree;

/// XLA's protocol buffers, generated from our own `.proto` declarations in
/// `proto/xla/` (field numbers identical to upstream XLA).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/xla.rs"));
}

pub use builder::{Builder, Computation, Op};
pub use error::{Error, PjrtErrorCode, Result, ShapeError, ShapeErrorKind};
/// The `half` crate, whose [`f16`](half::f16) and [`bf16`](half::bf16) are this
/// crate's host types for XLA's `f16` and `bf16` (re-exported so that the versions
/// match).
pub use half;
pub use jit::Jit;
pub use ops::control::ScanOptions;
pub use ops::elementwise::{BinaryOp, Comparison, Scalar, UnaryOp};
pub use ops::linalg::{DotDims, DotOptions, Precision};
pub use ops::structural::Function;
pub use pjrt::{
    Arg, Buffer, Client, ClientOptions, CompileOptions, Device, LoadedExecutable, MemoryStats,
    Plugin,
};
pub use shape::{ElementType, NativeType, Shape};
pub use tree::{Leaf, Tree, TreeError};
