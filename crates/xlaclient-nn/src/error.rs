//! The `nn` crate's error type: its own failures (checkpoints, host arrays) and the
//! core's, wrapped. It names nothing above `nn`.

use std::path::PathBuf;

use xlaclient_core::{ElementType, RuntimeError, TreeError};

use crate::checkpoint::CheckpointError;

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
    /// A host array ([`HostArray`](crate::checkpoint::HostArray)) was asked for
    /// another element type than it holds, or holds a type with no host form here.
    #[error("host array holds {held}; {wanted} was asked for")]
    HostArrayType {
        /// The array's element type.
        held: ElementType,
        /// The type asked for (or the complex type that has no host form).
        wanted: ElementType,
    },
    /// A host array's bytes do not fit its element type and dimensions.
    #[error("host array: {reason}")]
    HostArray {
        /// What does not fit (a negative dimension, a byte count, an invalid
        /// `pred` byte at an index).
        reason: String,
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
