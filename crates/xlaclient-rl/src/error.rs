//! The `rl` crate's error type: its own failures (environments, the stepper, the
//! resampler, the runner) and the lower crates', wrapped. It names nothing above
//! `rl`.

use xlaclient_core::{RuntimeError, Shape, TreeError};

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
    #[cfg_attr(docsrs, doc(cfg(feature = "runner")))]
    #[error(transparent)]
    Runner(Box<crate::runner::RunnerError>),
    /// Weights given to a resampler ([`crate::reweight`]) that do not define a
    /// distribution: see [`WeightsError`] for the kinds.
    #[error("invalid weights: {0}")]
    InvalidWeights(#[from] WeightsError),
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
    /// needs: see [`NetworkOutputError`] for the kinds.
    #[error("network output: {0}")]
    NetworkOutput(#[from] NetworkOutputError),
    /// A state no environment of its kind can be in (a Catch ball below the
    /// paddle's row, a column off the board): the first field out of its range.
    #[error(
        "invalid {env} state: {field} = {value}, must be in {}..{}",
        range.start,
        range.end
    )]
    InvalidState {
        /// The environment (`"Catch"`).
        env: &'static str,
        /// The field out of range (`"ball_y"`).
        field: &'static str,
        /// Its value.
        value: i64,
        /// The values it may take.
        range: std::ops::Range<i64>,
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
    /// A move in a two-player game that has already ended (a win or a draw).
    #[error("{game}: a move after the game ended ({outcome}, after {moves} moves)")]
    GameOver {
        /// The game (`"ConnectFour"`).
        game: &'static str,
        /// How it ended (`"player 0 won"`, `"draw"`).
        outcome: String,
        /// The moves played.
        moves: usize,
    },
}

/// Why weights do not define a distribution; carried by [`Error::InvalidWeights`].
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WeightsError {
    /// There are no weights.
    #[error("no weights")]
    Empty,
    /// A weight is negative, NaN or infinite: the first such one.
    #[error("weight {index} is {value}; weights must be finite and >= 0")]
    Invalid {
        /// Its index.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// Every weight is zero.
    #[error("all {count} weights are zero")]
    AllZero {
        /// How many there are.
        count: usize,
    },
    /// Each weight is finite but their sum is not.
    #[error("the sum of the {count} weights overflows")]
    SumOverflows {
        /// How many there are.
        count: usize,
    },
}

/// How a network's output does not fit its use; carried by [`Error::NetworkOutput`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetworkOutputError {
    /// The output of a [`BatchedNet`](crate::BatchedNet) is not `f32[batch, ...]`.
    #[error(
        "BatchedNet: the network's output is {found} for a batch of {batch}; it must be f32[{batch}, ...]"
    )]
    Shape {
        /// The output's shape.
        found: Shape,
        /// The batch size it was traced at.
        batch: usize,
    },
    /// A [`BatchedNet`](crate::BatchedNet)'s output row has other dimensions at one
    /// batch size than at the first one traced.
    #[error(
        "BatchedNet: at batch {batch} an output row is {dims:?}, at batch {first_batch} it was {first_dims:?}"
    )]
    RowDims {
        /// The batch size.
        batch: usize,
        /// An output row's dimensions there.
        dims: Vec<i64>,
        /// The batch size first traced.
        first_batch: usize,
        /// An output row's dimensions there.
        first_dims: Vec<i64>,
    },
    /// A compiled program returned no output.
    #[error("{program}: the program returned no output")]
    Missing {
        /// Whose program (`"BatchedNet"`, `"PolicyFit::probs"`).
        program: &'static str,
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
