//! The fleet's errors.

use crate::frame::FrameError;

/// What went wrong in the fleet crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Installing the NATS server failed.
    #[error("installing nats-server: {0}")]
    Install(String),
    /// Starting or stopping the NATS server failed.
    #[error("nats-server: {0}")]
    Server(String),
    /// A NATS or JetStream operation failed (`what` names it).
    #[error("NATS {what}: {reason}")]
    Nats {
        /// The operation.
        what: String,
        /// The client's error.
        reason: String,
    },
    /// A malformed, truncated or foreign message.
    #[error("bad message: {0}")]
    Frame(#[from] FrameError),
    /// A setting read from the environment or the command line is invalid.
    #[error("settings: {0}")]
    Settings(String),
    /// The RL layer's error (stepper, environments).
    #[error(transparent)]
    Rl(#[from] xlaclient_rl::Error),
    /// The nn layer's error (checkpoints, optimizers).
    #[error(transparent)]
    Nn(#[from] xlaclient_nn::Error),
    /// The core's error (tracing, compiling, running).
    #[error(transparent)]
    Core(#[from] xlaclient_core::Error),
    /// A file or process error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<xlaclient_core::RuntimeError> for Error {
    fn from(e: xlaclient_core::RuntimeError) -> Error {
        Error::Core(e.into())
    }
}

impl From<xlaclient_core::TreeError> for Error {
    fn from(e: xlaclient_core::TreeError) -> Error {
        Error::Core(e.into())
    }
}

impl Error {
    pub(crate) fn nats(what: impl Into<String>, e: impl std::fmt::Display) -> Error {
        Error::Nats {
            what: what.into(),
            reason: e.to_string(),
        }
    }
}

/// The fleet's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
