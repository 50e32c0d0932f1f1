//! # xlaclient-nn
//!
//! A small neural-network library on the graph API: initialisers ([`init`]),
//! layers and activations ([`layers`]), losses ([`losses`]) and optimizers
//! ([`optim`]), with the definitions of Haiku, `jax.nn` and optax, so that a model
//! written with them matches its JAX counterpart (the Anakin notebook's Haiku MLP
//! Q-network trained with `optax.adam`, for one).
//!
//! Everything builds ops into the program: parameters are initialised from a PRNG
//! key on the device, and a training step (forward pass, loss, gradient, optimizer
//! update) is one function on a tree, compiled once and called with donated
//! buffers. Parameters and optimizer state are trees (`#[derive(Tree)]`), so the
//! same types are the shape spec, the traced values and the device buffers.
//!
//! ```no_run
//! use xlaclient_core::{Client, ClientExt, Op, Tree};
//! use xlaclient_nn::{losses, optim, Activation, Mlp, MlpParams, OptState};
//!
//! #[derive(Tree)]
//! struct TrainState<T> {
//!     params: MlpParams<T>,
//!     opt: OptState<T, MlpParams<T>>,
//! }
//!
//! let client = Client::cpu()?;
//! let net = Mlp::new(&[1, 32, 32, 1], Activation::Tanh);
//! let opt = optim::adam(0.01, 0.9, 0.999, 1e-8);
//! // Initialisation is a program too; its outputs are the first state.
//! let init = client.jit("init", &(), |b, ()| {
//!     let params = net.init(&b.prng_key(7));
//!     TrainState { opt: opt.init(&params), params }
//! })?;
//! let mut state = init.call(&())?;
//! let xs: Vec<f32> = (0..64).map(|i| i as f32 / 16.0 - 2.0).collect();
//! let step = client.jit_donating("step", init.output_spec(), |b, s: TrainState<Op>| {
//!     let x = b.constant_vec(&xs).reshape(&[64, 1]);
//!     let (_loss, (), g) = b.value_and_grad(s.params.clone(), |p| {
//!         (losses::mse(&net.apply(&p, &x), &x.sin()), ())
//!     });
//!     let (params, opt_state) = opt.update(&g, s.opt, &s.params);
//!     TrainState { params, opt: opt_state }
//! })?;
//! for _ in 0..100 {
//!     state = step.call_donated(state)?;
//! }
//! # Ok::<(), xlaclient_nn::Error>(())
//! ```

//!
//! **What it may import:** the core (`xlaclient-core`: builder, ops, trees, jit, the
//! runtime under it) and `safetensors` for [`checkpoint`]s; nothing of `rl` or the
//! runner. Its error type ([`Error`]) wraps the core's.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod checkpoint;
pub mod error;
pub mod flax;
pub mod init;
pub mod layers;
pub mod losses;
pub mod optim;
pub mod schedule;

pub use error::{Error, Result};
pub use flax::param_key as flax_param_key;
pub use init::{Initializer, orthogonal};
pub use layers::{
    Activation, KeySequence, Linear, LinearParams, Mlp, MlpParams, elu, flatten, gelu, leaky_relu,
    log_softmax, relu, sigmoid, silu, softmax, softplus, swish,
};
pub use optim::{OptState, Optimizer};
pub use schedule::Schedule;

use xlaclient_core::{Builder, Comparison, ElementType, Op, Shape, Tree, pjrt, shape, tree};
