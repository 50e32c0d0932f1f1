//! The `rl` crate's error type: its own failures (environments, the stepper, the
//! resampler, the runner) and the lower crates', wrapped. It names nothing above
//! `rl`.

use xlaclient_core::{RuntimeError, TreeError};

/// Result alias of the `rl` crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the `rl` crate.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Building, compiling or running a program failed (the core's error).
    #[error(transparent)]
    Core(#[from] xlaclient_core::Error),
    /// A checkpoint or another `nn` failure.
    #[error(transparent)]
    Nn(#[from] xlaclient_nn::Error),
    /// The experiment runner ([`crate::runner`]) failed: a bad command line or
    /// configuration key, a configuration that differs from the one being resumed, a
    /// file of the run that cannot be read or written.
    #[cfg(feature = "runner")]
    #[error(transparent)]
    Runner(Box<crate::runner::RunnerError>),
    /// Weights given to a resampler ([`crate::reweight`]) that do not define a
    /// distribution: negative, NaN or infinite, all zero, or none.
    #[error("invalid weights: {reason}")]
    InvalidWeights {
        /// What is wrong, naming the first bad weight's index and value.
        reason: String,
    },
    /// An argument of a constructor or function is out of its range (a batch size
    /// of 0, an empty range, observation dimensions below 1, …).
    #[error("invalid argument `{what}`: {reason}")]
    InvalidArgument {
        /// The argument, as the function names it.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Host data of the wrong length: observations, actions, an output slice.
    #[error("{what}: {given} given, {expected} needed")]
    Length {
        /// What was counted.
        what: String,
        /// How many were given.
        given: usize,
        /// How many are needed.
        expected: usize,
    },
    /// An action outside an environment's or a policy's action range.
    #[error("{what}: action {action}, must be in 0..{actions}")]
    InvalidAction {
        /// Whose action (an environment, a batch row).
        what: String,
        /// The action given.
        action: i64,
        /// The number of actions.
        actions: usize,
    },
    /// A network's program gave outputs of another shape or number than its use
    /// needs.
    #[error("network output: {reason}")]
    NetworkOutput {
        /// What is wrong with the output.
        reason: String,
    },
    /// A state no environment of its kind can be in (a Catch ball below the
    /// paddle's row, a column off the board).
    #[error("invalid state: {reason}")]
    InvalidState {
        /// Which field is out of range, and its range.
        reason: String,
    },
    /// More requests in one tick than the largest batch the network was compiled
    /// for.
    #[error(
        "a batch of {requests} requests, above the largest compiled batch size {max}; give larger BatchSizes"
    )]
    BatchTooLarge {
        /// The number of requests.
        requests: usize,
        /// The largest compiled batch size.
        max: usize,
    },
    /// The stepper was dropped before it answered a prediction (of `agent`, when
    /// known).
    #[error("the stepper was dropped; nothing will answer this prediction{}", agent.map(|a| format!(" (agent {a})")).unwrap_or_default())]
    StepperClosed {
        /// The agent whose prediction is unanswered, when known.
        agent: Option<usize>,
    },
    /// A prediction that already returned its error was polled again.
    #[error("a failed prediction was polled again after it returned")]
    PolledAfterCompletion,
    /// Agents are still running but none waits on a prediction: an agent awaits a
    /// future the stepper cannot wake.
    #[error(
        "tick {tick}: {running} agent(s) running but none waits on a prediction; an agent awaits a future the stepper cannot wake"
    )]
    Stalled {
        /// The tick.
        tick: usize,
        /// How many agents are still running.
        running: usize,
    },
}

impl From<RuntimeError> for Error {
    fn from(e: RuntimeError) -> Self {
        Error::Core(e.into())
    }
}

impl From<TreeError> for Error {
    fn from(e: TreeError) -> Self {
        Error::Core(e.into())
    }
}
