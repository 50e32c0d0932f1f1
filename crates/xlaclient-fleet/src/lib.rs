//! Actors on many hosts feeding one learner through NATS JetStream: Podracer's
//! Sebulba and Alpacka's distributed stepper, on an existing engine.
//!
//! Layers, bottom to top:
//! - [`frame`]: the wire format (dtype + shape + raw bytes, chunks ≤ 1 MiB) and
//!   its validating decoder;
//! - [`server`]: the pinned `nats-server` installed from its wheel and started on
//!   127.0.0.1 ([`NatsServer::start_local`]);
//! - [`transport`]: the JetStream work-queue stream of trajectories (acks,
//!   bounded `max_bytes`, backpressure), the parameters and the run's config in
//!   key-value buckets ([`Transport`]);
//! - [`catch`]: the Catch workload: an actor stepping B environments with
//!   ε-greedy agents on the batch stepper, and a learner with a ring-buffer
//!   replay, one compiled Q(λ) train step, parameter publishing and checkpoints;
//! - [`settings`]: a role's settings from the environment (`NATS_URL`, the actor
//!   index from `JOB_COMPLETION_INDEX` or `SLURM_PROCID`, …).

pub mod catch;
pub mod error;
pub mod frame;
pub mod server;
pub mod settings;
pub mod transport;

pub use error::{Error, Result};
pub use server::NatsServer;
pub use transport::{Publish, Transport, TransportOptions};
