//! The crate's error type: one enum, a variant per kind of failure, each carrying the
//! data a user needs to act on it.

use std::fmt;
use std::panic::Location;
use std::path::PathBuf;

use crate::install::InstallError;
use crate::shape::Shape;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Status codes a PJRT plugin reports (the absl status codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PjrtErrorCode {
    /// The operation was cancelled.
    Cancelled,
    /// Unknown error.
    Unknown,
    /// The caller passed an invalid argument.
    InvalidArgument,
    /// A deadline expired.
    DeadlineExceeded,
    /// Something was not found.
    NotFound,
    /// Something already exists.
    AlreadyExists,
    /// Permission denied.
    PermissionDenied,
    /// Out of memory or another resource.
    ResourceExhausted,
    /// The system is not in a state the operation needs.
    FailedPrecondition,
    /// The operation was aborted.
    Aborted,
    /// Out of range.
    OutOfRange,
    /// Not implemented by this plugin.
    Unimplemented,
    /// Internal error in the plugin.
    Internal,
    /// The service is unavailable.
    Unavailable,
    /// Data loss.
    DataLoss,
    /// Not authenticated.
    Unauthenticated,
    /// A code this crate does not know.
    Other(i32),
}

impl PjrtErrorCode {
    /// Maps the C enum value.
    pub fn from_raw(code: i32) -> Self {
        use PjrtErrorCode::*;
        match code {
            1 => Cancelled,
            2 => Unknown,
            3 => InvalidArgument,
            4 => DeadlineExceeded,
            5 => NotFound,
            6 => AlreadyExists,
            7 => PermissionDenied,
            8 => ResourceExhausted,
            9 => FailedPrecondition,
            10 => Aborted,
            11 => OutOfRange,
            12 => Unimplemented,
            13 => Internal,
            14 => Unavailable,
            15 => DataLoss,
            16 => Unauthenticated,
            c => Other(c),
        }
    }
}

/// Which kind of rule a [`ShapeError`] broke, so that code (and tests) can tell
/// errors apart without matching their text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShapeErrorKind {
    /// An element type is not accepted, or two operands' element types differ.
    ElementType,
    /// An operand has the wrong rank (or is a tuple where an array is needed).
    Rank,
    /// An axis is out of range or given twice.
    Axis,
    /// Dimension sizes do not agree (including element counts and broadcasting).
    Dimension,
    /// An attribute is malformed (dimension numbers, permutations, literal values).
    Attribute,
    /// A body (a reduce combiner, a loop body) has the wrong signature.
    Body,
    /// The number of operands is wrong.
    Arity,
}

impl ShapeErrorKind {
    /// A short name for the kind, as `Display` shows it.
    pub fn name(self) -> &'static str {
        match self {
            ShapeErrorKind::ElementType => "element type",
            ShapeErrorKind::Rank => "rank",
            ShapeErrorKind::Axis => "axis",
            ShapeErrorKind::Dimension => "dimension",
            ShapeErrorKind::Attribute => "attribute",
            ShapeErrorKind::Body => "body",
            ShapeErrorKind::Arity => "arity",
        }
    }
}

/// A shape or dtype rule violated while building a graph: names the op, the operand
/// shapes, the kind of rule and the caller's source line.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeError {
    /// The operation being built (XLA's name, e.g. `"dot_general"`).
    pub op: &'static str,
    /// The operand shapes the op was given.
    pub operands: Vec<Shape>,
    /// Which kind of rule was broken.
    pub kind: ShapeErrorKind,
    /// What rule was broken, in words.
    pub reason: String,
    /// Where in the user's code the op was built.
    pub location: Option<&'static Location<'static>>,
}

impl ShapeError {
    /// A rule violation of `kind` for `op` on `operands` (no location yet).
    pub fn new(
        op: &'static str,
        operands: &[&Shape],
        kind: ShapeErrorKind,
        reason: impl Into<String>,
    ) -> Self {
        ShapeError {
            op,
            operands: operands.iter().map(|s| (*s).clone()).collect(),
            kind,
            reason: reason.into(),
            location: None,
        }
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.op)?;
        if !self.operands.is_empty() {
            f.write_str(" on (")?;
            for (i, s) in self.operands.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{s}")?;
            }
            f.write_str(")")?;
        }
        if let Some(loc) = self.location {
            write!(f, " at {}:{}:{}", loc.file(), loc.line(), loc.column())?;
        }
        write!(f, ": {} ({} rule)", self.reason, self.kind.name())
    }
}

impl std::error::Error for ShapeError {}

/// Everything that can go wrong in this crate.
///
/// `Clone`, so that a stored error (a failed op's, a finished event's) can be handed
/// out again.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// An op was given operands of the wrong shape or type.
    Shape(ShapeError),
    /// Reverse mode reached an op, or a form of one, that has no gradient rule (see
    /// `autodiff::gradient`).
    NoGradient {
        /// The op, as XLA names it (`"custom-call"`, `"reduce"`).
        op: &'static str,
        /// Which form of the op has no rule, and what has one.
        form: String,
        /// Where in the user's code the op was built.
        location: Option<&'static Location<'static>>,
    },
    /// A graph was used wrongly (an op from another builder, a parameter number given
    /// twice, a module that is not well formed, …).
    Graph {
        /// What is wrong.
        reason: String,
        /// Where in the user's code, when known.
        location: Option<&'static Location<'static>>,
    },
    /// A PJRT C API function returned an error.
    Pjrt {
        /// The C function that failed, e.g. `"PJRT_Client_Compile"`.
        function: &'static str,
        /// The plugin's status code.
        code: PjrtErrorCode,
        /// The plugin's message.
        message: String,
    },
    /// The plugin file could not be opened as a shared library.
    PluginLoad {
        /// Path given.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// The shared library is not a PJRT plugin (no `GetPjrtApi`, or it returned null).
    NotAPlugin {
        /// Path given.
        path: PathBuf,
        /// What was missing.
        reason: String,
    },
    /// The plugin speaks another major version of the PJRT C API.
    IncompatibleApi {
        /// Path of the plugin.
        path: PathBuf,
        /// The plugin's major version.
        major: i32,
        /// The plugin's minor version.
        minor: i32,
    },
    /// The loaded plugin's function table has no entry for a function (the plugin is
    /// too old for it, or leaves it out).
    Unsupported {
        /// The C function that was needed.
        function: &'static str,
        /// The plugin's PJRT C API version `(major, minor)`.
        api_version: (i32, i32),
    },
    /// Finding or installing the default plugin failed.
    Install(InstallError),
    /// Asynchronous work on a device failed: an execution, or a transfer waiting on
    /// one. Reported by the work's completion event (for `execute`, when an output
    /// is read or awaited).
    Execution {
        /// The plugin's status code.
        code: PjrtErrorCode,
        /// The plugin's message.
        message: String,
    },
    /// The client has no addressable device to put data on or run on.
    NoDevice,
    /// Argument lists were given for another number of devices than the program is
    /// loaded on.
    DeviceCount {
        /// Number of argument lists given.
        given: usize,
        /// Number of devices the program is loaded on.
        loaded: usize,
    },
    /// The argument lists of a multi-device execution differ in length.
    ArgumentCount {
        /// The device whose list differs.
        device: usize,
        /// Its number of arguments.
        given: usize,
        /// The number of arguments for device 0.
        expected: usize,
    },
    /// An execution was given another number of arguments than the program has
    /// parameters.
    ParameterCount {
        /// The device whose argument list is wrong.
        device: usize,
        /// Number of arguments given.
        given: usize,
        /// Number of parameters of the program.
        expected: usize,
    },
    /// An argument's element type or dimensions differ from its parameter's (the
    /// plugin itself only compares byte sizes).
    ArgumentShape {
        /// The device whose argument is wrong.
        device: usize,
        /// Position of the argument.
        argument: usize,
        /// The parameter's shape (boxed: keeps `Error` small).
        expected: Box<Shape>,
        /// The buffer's shape.
        given: Box<Shape>,
    },
    /// A client create option or a compile option has a value the plugin would
    /// fail on (some plugins abort the process on them instead of returning an
    /// error), or the wrong type.
    InvalidOption {
        /// The option's name (`"cpu_device_count"`, `"num_replicas"`, …).
        option: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument buffer belongs to another client.
    ForeignBuffer {
        /// Position of the argument.
        argument: usize,
    },
    /// A device of another client was named (e.g. as a copy's destination).
    ForeignDevice,
    /// A buffer was used after it was donated to an execution (its memory now
    /// belongs to the execution's outputs).
    BufferDeleted,
    /// The plugin reported an element type this crate has no [`ElementType`]
    /// for.
    ///
    /// [`ElementType`]: crate::ElementType
    UnsupportedElementType {
        /// The C API's `PJRT_Buffer_Type` number.
        pjrt_type: i32,
    },
    /// Host data does not fit the buffer or program it is meant for.
    HostData {
        /// What does not fit.
        reason: String,
    },
    /// A tree of values does not match the structure it is used with (a jitted
    /// function called with another structure, leaves of the wrong count).
    Tree(crate::tree::TreeError),
    /// Bytes given as a serialized `HloModuleProto` do not decode or do not form a
    /// well-formed module.
    InvalidModule {
        /// What is wrong.
        reason: String,
    },
    /// Saving or loading a checkpoint failed: the file could not be read or written,
    /// is cut short or corrupt, or does not match the tree (a missing or extra
    /// tensor, another dtype or shape).
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong (boxed: keeps `Error` small).
        error: Box<crate::checkpoint::CheckpointError>,
    },
    /// The experiment runner ([`crate::runner`]) failed: a bad command line or
    /// configuration key, a configuration that differs from the one being resumed, a
    /// file of the run that cannot be read or written.
    #[cfg(feature = "runner")]
    Runner(Box<crate::runner::RunnerError>),
    /// Weights given to a resampler ([`crate::rl::reweight`]) that do not define a
    /// distribution: negative, NaN or infinite, all zero, or none.
    InvalidWeights {
        /// What is wrong, naming the first bad weight's index and value.
        reason: String,
    },
    /// An environment or the batch stepper of [`rl`](crate::rl) was misused: an
    /// action or state out of range, an observation of the wrong size, more
    /// requests in one tick than the largest compiled batch, agents waiting on
    /// something other than the network.
    Rl {
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// The location in the user's code the error points at, for shape and graph errors.
    pub fn location(&self) -> Option<&'static Location<'static>> {
        match self {
            Error::Shape(e) => e.location,
            Error::Graph { location, .. } | Error::NoGradient { location, .. } => *location,
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shape(e) => write!(f, "shape error in {e}"),
            Error::Graph { reason, location } => {
                write!(f, "graph error")?;
                if let Some(loc) = location {
                    write!(f, " at {}:{}:{}", loc.file(), loc.line(), loc.column())?;
                }
                write!(f, ": {reason}")
            }
            Error::NoGradient { op, form, location } => {
                write!(f, "no gradient for `{op}`")?;
                if let Some(loc) = location {
                    write!(
                        f,
                        " built at {}:{}:{}",
                        loc.file(),
                        loc.line(),
                        loc.column()
                    )?;
                }
                write!(f, ": {form}")
            }
            Error::Pjrt {
                function,
                code,
                message,
            } => write!(f, "{function} failed ({code:?}): {message}"),
            Error::PluginLoad { path, reason } => write!(
                f,
                "cannot load PJRT plugin {}: {reason} (set PJRT_PLUGIN_PATH or pass the path of a PJRT plugin .so)",
                path.display()
            ),
            Error::NotAPlugin { path, reason } => {
                write!(f, "{} is not a PJRT plugin: {reason}", path.display())
            }
            Error::IncompatibleApi { path, major, minor } => write!(
                f,
                "PJRT plugin {} implements PJRT C API {major}.{minor}; this crate speaks major version {}",
                path.display(),
                crate::pjrt::SUPPORTED_API_MAJOR
            ),
            Error::Unsupported {
                function,
                api_version: (major, minor),
            } => write!(
                f,
                "plugin too old for {function}: the loaded plugin (PJRT C API {major}.{minor}) does not provide it"
            ),
            Error::Install(e) => write!(f, "{e}"),
            Error::Execution { code, message } => {
                write!(f, "device execution failed ({code:?}): {message}")
            }
            Error::NoDevice => f.write_str("the client has no addressable device"),
            Error::DeviceCount { given, loaded } => write!(
                f,
                "argument lists for {given} device(s) given; the program is loaded on {loaded}"
            ),
            Error::ArgumentCount {
                device,
                given,
                expected,
            } => write!(
                f,
                "device {device} was given {given} argument(s), device 0 was given {expected}"
            ),
            Error::ParameterCount {
                device,
                given,
                expected,
            } => write!(
                f,
                "device {device} was given {given} argument(s); the program has {expected} parameter(s)"
            ),
            Error::ArgumentShape {
                device,
                argument,
                expected,
                given,
            } => write!(
                f,
                "argument {argument} (device {device}) is {given}; the program's parameter is {expected}"
            ),
            Error::InvalidOption { option, reason } => {
                write!(f, "invalid option `{option}`: {reason}")
            }
            Error::ForeignBuffer { argument } => {
                write!(f, "argument {argument} is a buffer of another client")
            }
            Error::ForeignDevice => f.write_str("the device belongs to another client"),
            Error::BufferDeleted => f.write_str(
                "the buffer was donated to an execution (or deleted) and holds no data any more",
            ),
            Error::UnsupportedElementType { pjrt_type } => write!(
                f,
                "the buffer's element type (PJRT_Buffer_Type {pjrt_type}) is not supported by this crate"
            ),
            Error::HostData { reason } => write!(f, "host data mismatch: {reason}"),
            Error::Tree(e) => write!(f, "{e}"),
            Error::InvalidModule { reason } => write!(f, "invalid HLO module: {reason}"),
            Error::Checkpoint { path, error } => {
                write!(f, "checkpoint {}: {error}", path.display())
            }
            #[cfg(feature = "runner")]
            Error::Runner(e) => write!(f, "{e}"),
            Error::InvalidWeights { reason } => write!(f, "invalid weights: {reason}"),
            Error::Rl { reason } => write!(f, "rl: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Shape(e) => Some(e),
            Error::Install(e) => Some(e),
            Error::Checkpoint { error, .. } => Some(&**error),
            #[cfg(feature = "runner")]
            Error::Runner(e) => Some(&**e),
            _ => None,
        }
    }
}

impl From<ShapeError> for Error {
    fn from(e: ShapeError) -> Self {
        Error::Shape(e)
    }
}

impl From<crate::tree::TreeError> for Error {
    fn from(e: crate::tree::TreeError) -> Self {
        Error::Tree(e)
    }
}

impl From<InstallError> for Error {
    fn from(e: InstallError) -> Self {
        Error::Install(e)
    }
}
