//! # xlaclient-rl
//!
//! Reinforcement learning: environments stepped in plain Rust and agents written as
//! `async` code whose network predictions are batched into one compiled call per tick
//! (the design of Alpacka's batch stepper), Catch on the device and the Anakin
//! learner, and path-space reweighting.
//!
//! - [`env`](mod@env): the [`Environment`] trait, [`VecEnv`] (many environments stepped at
//!   once) and [`Rng`], a small seedable generator (SplitMix64).
//! - [`catch`]: the Catch environment (10 × 5), with its dynamics as a pure function
//!   ([`catch::step`]) so that other implementations can be checked against it.
//! - [`classic`]: gymnasium's `CartPole-v1` and `Acrobot-v1` on the host in `f64`
//!   ([`CartPoleEnv`], [`AcrobotEnv`]), checked against recorded gymnasium episodes,
//!   and Acrobot as ops ([`classic::acrobot`]).
//! - [`catch_device`]: Catch as ops, a batch of environments stepped inside a program.
//! - [`anakin`]: Podracer's Anakin learner on Catch, one compiled program.
//! - [`reweight`]: path-space reweighting (resampler, divergence estimate, fit step).
//! - [`stepper`]: [`BatchedNet`] (a network compiled for a fixed set of padded batch
//!   sizes, parameters resident on the device) and [`Stepper`], the executor that
//!   polls every agent until it waits on the network, gathers all pending requests
//!   into one batched execution and hands each agent its slice of the result;
//!   [`BatchedNet::set_params`] swaps its parameters between ticks without
//!   recompiling.
//! - [`trainer`]: [`trainer::Trainer`], parameters and optimizer state on the device
//!   updated by one compiled donating train step and published to a
//!   [`BatchedNet`]; AlphaZero's policy-value loss and the one-step Q-learning loss.
//! - [`replay`]: [`replay::ReplayBuffer`], a FIFO buffer of trees of host arrays with
//!   uniform sampling into stacked batches.
//! - [`agents`]: planning agents as `async` code: [`agents::ShootingAgent`] (random
//!   shooting in copies of an environment) and [`agents::MctsAgent`] (AlphaZero's
//!   PUCT search with the network's prior and value).
//! - [`connect_four`]: the [`connect_four::TwoPlayerGame`] trait and Connect Four.
//!
//! ```no_run
//! use xlaclient_nn::{Activation, Mlp};
//! use xlaclient_rl::{BatchSizes, BatchedNet, Environment, Stepper, catch::Catch};
//! use xlaclient_core::{Client, ClientExt};
//!
//! let client = Client::cpu()?;
//! let mlp = Mlp::new(&[50, 64, 3], Activation::Relu);
//! let params = client.jit("init", &(), |b, ()| mlp.init(&b.prng_key(0)))?.call(&())?;
//! let net = BatchedNet::new(&client, params, &[50], BatchSizes::powers_of_two(64)?,
//!     move |p, obs| mlp.apply(p, obs))?;
//! let mut stepper = Stepper::new(net);
//! for seed in 0..8 {
//!     stepper.spawn(move |net| async move {
//!         let mut env = Catch::new(seed);
//!         let mut total = 0.0;
//!         loop {
//!             let q = net.predict(env.observation()).await?;
//!             let action = (0..3).max_by(|&a, &b| q[a].total_cmp(&q[b])).unwrap();
//!             let t = env.step(action)?;
//!             total += t.reward;
//!             if t.terminal {
//!                 return Ok::<f32, xlaclient_rl::Error>(total);
//!             }
//!         }
//!     });
//! }
//! let returns = stepper.run()?; // one batched call per tick
//! # Ok::<(), xlaclient_rl::Error>(())
//! ```
//!
//! **What it may import:** the core (`xlaclient-core`) and `nn` (`xlaclient-nn`);
//! the runner's command-line, config, plotting and progress crates only behind its
//! feature `runner`. Its error type ([`Error`]) wraps theirs.

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

pub mod error;
#[cfg(feature = "runner")]
#[cfg_attr(docsrs, doc(cfg(feature = "runner")))]
pub mod runner;

pub mod agents;
pub mod anakin;
pub mod cartpole;
pub mod catch;
pub mod catch_device;
pub mod classic;
pub mod connect_four;
pub mod env;
pub mod ppo;
pub mod replay;
pub mod reweight;
pub mod stepper;
pub mod trainer;

pub use classic::{AcrobotEnv, CartPoleEnv, EpisodeStep};
pub use env::{Environment, Rng, Transition, VecEnv};
pub use stepper::{BatchSizes, BatchedNet, NetHandle, Prediction, Stepper, TickStats};

pub use error::{Error, NetworkOutputError, Result, WeightsError};

use xlaclient_core::{
    Buffer, Builder, Client, Comparison, DotDims, ElementType, Jit, Op, Shape, Tree, builder, pjrt,
    shape, tree,
};
use xlaclient_nn as nn;
#[cfg(feature = "runner")]
use xlaclient_nn::checkpoint;
