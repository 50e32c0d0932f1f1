//! The runtime's error type: one enum, a variant per kind of failure of loading a
//! plugin, moving data or running a program, each carrying what a user needs to act
//! on it. It names nothing above the runtime; the core crate's error wraps it.

use std::path::PathBuf;

use crate::install::InstallError;
use crate::shape::{ElementType, Shape};

/// Result alias used throughout the runtime.
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

/// Everything that can go wrong in the runtime.
///
/// `Clone`, so that a stored error (a finished event's) can be handed out again.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A PJRT C API function returned an error.
    #[error("{function} failed ({code:?}): {message}")]
    Pjrt {
        /// The C function that failed, e.g. `"PJRT_Client_Compile"`.
        function: &'static str,
        /// The plugin's status code.
        code: PjrtErrorCode,
        /// The plugin's message.
        message: String,
    },
    /// The plugin file could not be opened as a shared library.
    #[error(
        "cannot load PJRT plugin {}: {reason} (set PJRT_PLUGIN_PATH or pass the path of a PJRT plugin .so)",
        path.display()
    )]
    PluginLoad {
        /// Path given.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// The shared library is not a PJRT plugin (no `GetPjrtApi`, or it returned null).
    #[error("{} is not a PJRT plugin: {reason}", path.display())]
    NotAPlugin {
        /// Path given.
        path: PathBuf,
        /// What was missing.
        reason: String,
    },
    /// The plugin speaks another major version of the PJRT C API.
    #[error(
        "PJRT plugin {} implements PJRT C API {major}.{minor}; this crate speaks major version {}",
        path.display(),
        crate::SUPPORTED_API_MAJOR
    )]
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
    #[error(
        "plugin too old for {function}: the loaded plugin (PJRT C API {}.{}) does not provide it",
        api_version.0,
        api_version.1
    )]
    Unsupported {
        /// The C function that was needed.
        function: &'static str,
        /// The plugin's PJRT C API version `(major, minor)`.
        api_version: (i32, i32),
    },
    /// A host callback could not be set up or run (the plugin and the reason).
    #[error("host callback: {0}")]
    HostCallback(String),
    /// Finding or installing the default plugin failed.
    #[error(transparent)]
    Install(#[from] InstallError),
    /// Asynchronous work on a device failed: an execution, or a transfer waiting on
    /// one. Reported by the work's completion event (for `execute`, when an output
    /// is read or awaited).
    #[error("device execution failed ({code:?}): {message}")]
    Execution {
        /// The plugin's status code.
        code: PjrtErrorCode,
        /// The plugin's message.
        message: String,
    },
    /// The client has no addressable device to put data on or run on.
    #[error("the client has no addressable device")]
    NoDevice,
    /// Argument lists were given for another number of devices than the program is
    /// loaded on.
    #[error("argument lists for {given} device(s) given; the program is loaded on {loaded}")]
    DeviceCount {
        /// Number of argument lists given.
        given: usize,
        /// Number of devices the program is loaded on.
        loaded: usize,
    },
    /// The argument lists of a multi-device execution differ in length.
    #[error("device {device} was given {given} argument(s), device 0 was given {expected}")]
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
    #[error(
        "device {device} was given {given} argument(s); the program has {expected} parameter(s)"
    )]
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
    #[error(
        "argument {argument} (device {device}) is {given}; the program's parameter is {expected}"
    )]
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
    /// In a multi-device execution, an argument lives on another device than the
    /// one its list is for (the plugin would fail that device while the others
    /// wait in their collectives, and abort the process).
    #[error(
        "argument {argument} for device {device} (id {expected}) is a buffer on device id {given}"
    )]
    ArgumentDevice {
        /// The position of the argument list (the executable's device index).
        device: usize,
        /// Position of the argument.
        argument: usize,
        /// The id of the device the list is for.
        expected: i32,
        /// The id of the device the buffer is on.
        given: i32,
    },
    /// A client create option or a compile option has a value the plugin would
    /// fail on (some plugins abort the process on them instead of returning an
    /// error), or the wrong type.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The option's name (`"cpu_device_count"`, `"num_replicas"`, …).
        option: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument buffer belongs to another client.
    #[error("argument {argument} is a buffer of another client")]
    ForeignBuffer {
        /// Position of the argument.
        argument: usize,
    },
    /// A device of another client was named (e.g. as a copy's destination).
    #[error("the device belongs to another client")]
    ForeignDevice,
    /// The plugin reported an element type this crate has no [`ElementType`] for.
    #[error(
        "the buffer's element type (PJRT_Buffer_Type {pjrt_type}) is not supported by this crate"
    )]
    UnsupportedElementType {
        /// The C API's `PJRT_Buffer_Type` number.
        pjrt_type: i32,
    },
    /// Host data has another element type than the buffer or program it is meant
    /// for.
    #[error("host data mismatch: the {what} holds {expected}, the host data is {given}")]
    HostType {
        /// What the data is for (`"buffer"`, `"program's output 0"`, …).
        what: &'static str,
        /// The element type the buffer or program has.
        expected: ElementType,
        /// The host data's element type.
        given: ElementType,
    },
    /// Host data has another number of elements than the dimensions it is given
    /// for, or the buffer it is read into.
    #[error("host data mismatch: {given} element(s) given for {expected} ({what})")]
    HostLength {
        /// What the count is checked against, in words (`"dimensions [2, 3]"`, …).
        what: String,
        /// The number of elements needed.
        expected: i64,
        /// The number of elements given.
        given: usize,
    },
    /// A buffer read into an `ndarray` array of another element type or rank, or
    /// an `NdArray` taken as an array of another one (feature `ndarray`: the
    /// module `array`).
    #[error("array mismatch: {what} is {expected}, the array asked for is {given}")]
    ArrayMismatch {
        /// What holds the values (`"the buffer"`, `"the NdArray"`).
        what: &'static str,
        /// Its element type and dimensions, as XLA prints a shape (`f32[2,3]`),
        /// with its rank.
        expected: String,
        /// The requested array's element type and rank.
        given: String,
    },
    /// Serialized bytes (compile options, an executable) do not decode.
    #[error("cannot decode {what}: {reason}")]
    Decode {
        /// What the bytes were meant to be.
        what: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// A program's entry parameter or result has dynamic dimensions (a bounded
    /// `f32[<=4]`, say). The runtime refuses them: the plugin sizes such buffers by
    /// their bound, and some plugins abort the process when given the buffer of an
    /// actual size.
    #[error(
        "the program's {what} has dynamic dimensions ({shape}); only static shapes are supported in a program's parameters and results"
    )]
    DynamicShape {
        /// Which one (`"parameter 0"`, `"result"`).
        what: String,
        /// The shape as XLA prints it (e.g. `f32[<=4]`).
        shape: String,
    },
    /// Bytes given to [`Client::deserialize_executable`](crate::Client::deserialize_executable)
    /// are not an intact executable that this crate wrote for this plugin; nothing
    /// was handed to the plugin.
    #[error("serialized executable refused: {0}")]
    SerializedExecutable(#[from] crate::guard::GuardError),
}
