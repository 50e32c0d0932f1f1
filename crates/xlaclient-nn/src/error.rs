//! The `nn` crate's error type: its own failures (checkpoints, host arrays) and the
//! core's, wrapped. It names nothing above `nn`.

use std::path::PathBuf;

use xlaclient_core::{RuntimeError, TreeError};

use crate::checkpoint::{CheckpointError, HostArrayError};

/// Result alias of the `nn` crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the `nn` crate.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Building, compiling or running a program failed (the core's error).
    #[error(transparent)]
    Core(#[from] xlaclient_core::Error),
    /// Saving or loading a checkpoint failed: the file could not be read or written,
    /// is cut short or corrupt, or does not match the tree (a missing or extra
    /// tensor, another dtype or shape).
    #[error("checkpoint {}: {error}", path.display())]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong (boxed: keeps `Error` small).
        error: Box<CheckpointError>,
    },
    /// A host array ([`HostArray`](crate::checkpoint::HostArray)) cannot be made or
    /// read as asked: see [`HostArrayError`] for the kinds.
    #[error("host array: {0}")]
    HostArray(#[from] HostArrayError),
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
