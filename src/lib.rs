//! # xlaclient
//!
//! A pure-Rust XLA client. Write computations as Rust expressions on a typed op
//! graph ([`Builder`], [`Op`]); every shape and element type is checked as each op
//! is built, and the crate emits XLA's `HloModuleProto` itself. A thin runtime
//! ([`pjrt`]) loads a vendor PJRT C API plugin at run time and compiles and runs the
//! module on CPU, GPU or TPU.
//!
//! ```
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
//! let y = out[0].to_vec::<f32>()?;
//! assert!((y[0] - (0.6f32 + 1.0).tanh()).abs() < 1e-6);
//! # Ok::<(), xlaclient::Error>(())
//! ```
//!
//! ## The layers
//!
//! This crate is the facade: it re-exports the crates of the workspace, each a
//! layer that imports only the layers below it (cargo forbids the other way).
//!
//! | crate | what | re-exported as |
//! |---|---|---|
//! | `xlaclient-proto` | XLA's protos as prost types (our own `.proto` files) | [`proto`] |
//! | `xlaclient-pjrt` | the runtime: plugin loading, client, devices, buffers, executables, plugin install; the only `unsafe` | [`pjrt`], [`install`], [`shape`] and the root types |
//! | `xlaclient-core` | IR, op families, builder, autodiff, trees, jit | everything at the root |
//! | `xlaclient-nn` (feature `nn`) | layers, losses, optimizers, schedules, checkpoints | [`nn`], [`checkpoint`] |
//! | `xlaclient-rl` (feature `rl`) | environments, the stepper, Anakin, path reweighting; the runner (feature `runner`) | [`rl`], [`runner`] |
//!
//! Each crate has its own error type, and each wraps the one below: [`Error`] (the
//! core's) wraps [`RuntimeError`] (the runtime's); `nn::Error` and `rl::Error` wrap
//! [`Error`]. A user who needs only the client (build, differentiate, run) depends
//! on this crate with `default-features = false, features = ["fetch-plugin"]`, or on
//! `xlaclient-core`: no config, plotting or RL crate is compiled then.
//!
//! ## Optional features
//!
//! Not in the default build: `ndarray` (buffers from and to `ndarray` arrays,
//! `NdArray` leaves, `Jit::call_arrays`: the module `arrays`), `npy` (`.npy` and
//! `.npz` files into buffers and trees, and back: the module `npy`), `redis`
//! (`pjrt::distributed::RedisStore`).

#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use xlaclient_core::*;

/// Neural networks (the `xlaclient-nn` crate): layers, losses, optimizers,
/// schedules, initializers, checkpoints.
#[cfg(feature = "nn")]
#[cfg_attr(docsrs, doc(cfg(feature = "nn")))]
pub use xlaclient_nn as nn;

/// The names `nn` users write most, at the root: `xlaclient::Schedule`,
/// `xlaclient::Optimizer`.
#[cfg(feature = "nn")]
#[cfg_attr(docsrs, doc(cfg(feature = "nn")))]
pub use xlaclient_nn::{Schedule, optim::Optimizer};

/// Checkpoints of trees of arrays in the safetensors format (`xlaclient_nn::checkpoint`).
#[cfg(feature = "nn")]
#[cfg_attr(docsrs, doc(cfg(feature = "nn")))]
pub use xlaclient_nn::checkpoint;

/// Reinforcement learning (the `xlaclient-rl` crate): environments, the batch
/// stepper, Anakin, path reweighting.
#[cfg(feature = "rl")]
#[cfg_attr(docsrs, doc(cfg(feature = "rl")))]
pub use xlaclient_rl as rl;

/// The experiment runner (`xlaclient_rl::runner`): config, `--set`, metrics CSV,
/// SVG curves, checkpoints, `--resume`.
#[cfg(feature = "runner")]
#[cfg_attr(docsrs, doc(cfg(feature = "runner")))]
pub use xlaclient_rl::runner;

/// Actors on many hosts feeding one learner through NATS JetStream
/// (`xlaclient_fleet`): the frame encoding, the transport, the local server
/// installer, the Catch actor and learner. Feature `fleet`, not on by default.
#[cfg(feature = "fleet")]
pub use xlaclient_fleet as fleet;

pub mod guide;
