//! # xlaclient-core
//!
//! The core of xlaclient: write computations as Rust expressions on a typed op
//! graph ([`Builder`], [`Op`]); every shape and element type is checked as each op
//! is built, and the finished [`Computation`] is XLA's `HloModuleProto`, which the
//! runtime ([`pjrt`]) compiles and runs through a PJRT plugin.
//!
//! ```no_run
//! use xlaclient_core::{Builder, Client, Shape};
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
//! # Ok::<(), xlaclient_core::Error>(())
//! ```
//!
//! **What it holds, bottom to top:** [`ir`] (the typed IR: instructions, op kinds,
//! modules, the verifier's structure, lowering to protos, HLO text, fingerprint),
//! [`ops`] (one file per op family: shape rule, builder method, lowering, gradient
//! per op), [`builder`] (the graph under construction, closure conversion),
//! [`autodiff`] (reverse mode, as a pass over the IR reading per-op rules),
//! [`tree`] and [`jit`] (trees of arrays and compiled functions on them).
//!
//! **What it may import:** the runtime (`xlaclient-pjrt`, re-exported as [`pjrt`]
//! with its [`shape`] and [`install`] modules), the protos (`xlaclient-proto`,
//! re-exported as [`proto`]) and the derive macro; nothing of `nn`, `rl` or the
//! runner. Its error type ([`Error`]) wraps the runtime's.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Denied, not forbidden: one unsafe trait impl (the verifier's promise to the
// runtime's `HloModuleSource`, in builder/mod.rs) is allowed by name; tests/layers.rs
// checks that it is the only `unsafe` of the crate.
#![deny(unsafe_code)]

// `#[derive(Tree)]` names the trait `::xlaclient_core::tree::Tree` here.
extern crate self as xlaclient_core;

#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
pub mod arrays;
pub mod autodiff;
pub mod batching;
pub mod builder;
pub mod error;
pub mod forward;
pub mod ir;
pub mod jit;
#[cfg(feature = "npy")]
#[cfg_attr(docsrs, doc(cfg(feature = "npy")))]
pub mod npy;
mod op_table;
pub mod ops;
pub mod pmap;
pub mod sharding;
pub mod stablehlo;
pub mod tree;

/// The runtime crate (`xlaclient-pjrt`): plugin, client, devices, buffers,
/// executables.
pub use xlaclient_pjrt as pjrt;
/// Element types, shapes and the host types that map to them.
pub use xlaclient_pjrt::float8;
/// Finding the PJRT plugin to load, and installing the pinned CPU plugin.
pub use xlaclient_pjrt::install;
pub use xlaclient_pjrt::shape;
/// XLA's protocol buffers (the `xlaclient-proto` crate).
pub use xlaclient_proto as proto;

#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
pub use arrays::HostLeaf;
pub use batching::{Axes, Vmap};
pub use builder::{Builder, Computation, Op};
pub use error::{
    BuildWarning, Error, GraphError, PjrtErrorCode, Result, RuntimeError, ShapeError,
    ShapeErrorKind,
};
/// The `half` crate, whose [`f16`](half::f16) and [`bf16`](half::bf16) are the host
/// types for XLA's `f16` and `bf16` (re-exported so that the versions match).
pub use half;
pub use jit::{ClientExt, Jit};
/// The `ndarray` crate (feature `ndarray`), re-exported so that arrays are made
/// with the version this crate takes.
#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
pub use ndarray;
pub use ops::control::{CheckpointPolicy, ScanOptions};
pub use ops::elementwise::{BinaryOp, Comparison, Scalar, UnaryOp};
pub use ops::indexing::{GatherDims, ScatterDims, TakeMode};
pub use ops::linalg::{
    ConvAttrs, ConvDims, DotDims, DotOptions, Precision, QrMode, Transpose, TriangularSolveOptions,
};
pub use ops::numpy::PadMode;
pub use ops::numpy_index::{AtIndex, IndexMode, Ix};
pub use ops::sampling::{Param, Population, PrngImpl};
pub use ops::slicing::PadDim;
pub use ops::structural::Function;
pub use ops::window::WindowDim;
pub use pmap::{AxisNames, Pmap, PmapError, Stacked};
pub use shape::{ElementType, NativeType, Shape};
pub use sharding::{Mesh, P, PartitionSpec, ShardedArray, ShardedJit};
pub use tree::{Leaf, Tree, TreeError};
pub use xlaclient_pjrt::WaitPolicy;
pub use xlaclient_pjrt::{
    AlignedHost, Arg, Buffer, CacheStats, Client, ClientOptions, CompileCache, CompileOptions,
    Device, HloModuleSource, LibraryFusion, LoadedExecutable, MemoryStats, Plugin, ProgramFormat,
};
#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
pub use xlaclient_pjrt::{ArrayElement, NdArray};
pub use xlaclient_pjrt::{HOST_CALLBACK_TARGET, HostValue, UNINITIALIZED_TARGET};

// numpy's array functions and lax.conv_transpose (issue 24).
pub use ops::arrays::{ConvTransposePadding, NormOrd};
