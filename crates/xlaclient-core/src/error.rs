//! The core's error type: one enum, a variant per kind of failure of building,
//! checking or running a program, each carrying the data a user needs to act on
//! it. It wraps the runtime's error ([`RuntimeError`]) and names nothing above the
//! core; the `nn` and `rl` crates' errors wrap it in turn.

use std::fmt;
use std::panic::Location;

/// The runtime's error (`xlaclient_pjrt::Error`), wrapped as [`Error::Runtime`].
pub use xlaclient_pjrt::error::Error as RuntimeError;
pub use xlaclient_pjrt::error::PjrtErrorCode;
use xlaclient_pjrt::install::InstallError;

use crate::shape::Shape;

/// Result alias used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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

/// Everything that can go wrong while building, checking, compiling or running a
/// program: the core's own failures, and the runtime's ([`Error::Runtime`]).
///
/// `Clone`, so that a stored error (a failed op's, a finished event's) can be handed
/// out again.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An op was given operands of the wrong shape or type.
    #[error("shape error in {0}")]
    Shape(#[from] ShapeError),
    /// Reverse mode reached an op, or a form of one, that has no gradient rule (see
    /// `autodiff::gradient`).
    #[error("no gradient for `{op}`{}: {form}", located("built at", location))]
    NoGradient {
        /// The op, as XLA names it (`"custom-call"`, `"reduce"`).
        op: &'static str,
        /// Which form of the op has no rule, and what has one.
        form: String,
        /// Where in the user's code the op was built.
        location: Option<&'static Location<'static>>,
    },
    /// A transform (`vmap`, `jvp`) reached an op, or a form of one, without a rule
    /// for it (the op table's batching and tangent columns).
    #[error(
        "no {transform} rule for `{op}`{}: {form}",
        located("built at", location)
    )]
    NoRule {
        /// The transform: `"batching"` (vmap) or `"tangent"` (jvp).
        transform: &'static str,
        /// The op, as XLA names it.
        op: &'static str,
        /// Which form of the op has no rule, and why.
        form: String,
        /// Where in the user's code the op was built.
        location: Option<&'static Location<'static>>,
    },
    /// A graph was used wrongly: an op from another builder, a parameter number given
    /// twice, a value used outside its body, a result PJRT refuses, … (the kinds are
    /// [`GraphError`]'s).
    #[error("graph error{}: {kind}", located("at", location))]
    Graph {
        /// What is wrong.
        kind: GraphError,
        /// Where in the user's code, when known.
        location: Option<&'static Location<'static>>,
    },
    /// The runtime failed: loading the plugin, moving data, compiling or running
    /// (see [`RuntimeError`] for the kinds).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A tree of values does not match the structure it is used with (a jitted
    /// function called with another structure, leaves of the wrong count).
    #[error(transparent)]
    Tree(#[from] crate::tree::TreeError),
    /// A replicated program's axes, devices or per-device trees do not fit (see
    /// [`crate::pmap`]).
    #[error(transparent)]
    Pmap(#[from] crate::pmap::PmapError),
    /// Bytes given as a serialized `HloModuleProto` do not decode or do not form a
    /// well-formed module.
    #[error("invalid HLO module: {reason}")]
    InvalidModule {
        /// What is wrong.
        reason: String,
    },
    /// StableHLO text that does not parse or import ([`crate::stablehlo::import()`]):
    /// the line and column of the MLIR text, the op, and what is wrong.
    #[error("StableHLO at line {line}:{col}: `{op}`: {reason}")]
    StableHlo {
        /// Line of the MLIR text, from 1.
        line: u32,
        /// Column, from 1.
        col: u32,
        /// The op (or the construct) at fault.
        op: String,
        /// What is wrong.
        reason: String,
    },
    /// An instruction that StableHLO text cannot express
    /// (`Computation::to_stablehlo`).
    #[error("cannot emit `{op}` as StableHLO: {reason}")]
    Emit {
        /// The op, as XLA names it.
        op: &'static str,
        /// Why, with where in the user's code the instruction was built.
        reason: String,
    },
    /// A device mesh, a partition spec or a sharded array does not fit what it is
    /// used with (an unknown mesh axis, a split that does not divide a dimension,
    /// a mesh larger than the client, shards on the wrong devices, …).
    #[error("sharding: {reason}")]
    Sharding {
        /// What is wrong, naming the array, the axis and the sizes.
        reason: String,
    },
    /// A NumPy `.npy` or `.npz` file cannot be read or written, or does not fit
    /// the tree it is loaded into (feature `npy`: the module `npy`).
    #[error("NumPy file {path}: {reason}")]
    Npy {
        /// The file (`<bytes>` for bytes in memory; `FILE:KEY` for a member of an
        /// `.npz`).
        path: String,
        /// What is wrong: the I/O error, the malformed header, the truncated data,
        /// the leaf and both dtypes or shapes.
        reason: String,
    },
}

/// The kinds of [`Error::Graph`]: how a graph was used wrongly.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// A parameter number was declared twice in one computation.
    #[error("parameter {number} is declared twice")]
    ParameterTwice {
        /// The parameter number.
        number: usize,
    },
    /// A parameter number too large to be meant (numbers are dense).
    #[error("parameter number {number} is too large (at most {max} parameters)")]
    ParameterNumber {
        /// The number given.
        number: usize,
        /// The most parameters a computation may declare.
        max: usize,
    },
    /// An op of another builder was used: as an operand, as the root, as a body's
    /// result.
    #[error("{used_as} belongs to another builder")]
    ForeignOp {
        /// Where it was used (`` "an operand of `add`" ``, `"the root"`, …).
        used_as: String,
    },
    /// A value was used outside the computation it belongs to: a value of another
    /// body, of a finished body, or a root that is not of the computation being
    /// finished.
    #[error("{used_as}: {reason}")]
    OutOfScope {
        /// Where it was used.
        used_as: String,
        /// Which computation it belongs to, and why that does not enclose the use.
        reason: String,
    },
    /// A body given to `emit_unchecked` uses a value from outside it.
    #[error("a body for emit_unchecked uses a value from outside it")]
    Captures,
    /// A body was never finished (its closure did not return).
    #[error("body `{name}` was never finished")]
    UnfinishedBody {
        /// The body's name.
        name: String,
    },
    /// A result PJRT plugins refuse: a tuple nested in the result tuple.
    #[error(
        "the result {shape} is a nested tuple (element {element} is a tuple), which PJRT plugins refuse: return its arrays in one flat tuple (get_tuple_element then build_tuple)"
    )]
    NestedTupleResult {
        /// The result's shape.
        shape: Shape,
        /// The first element that is a tuple.
        element: usize,
    },
    /// An array was needed and the value is a tuple.
    #[error("the value is a {shape}, not an array")]
    NotArray {
        /// The value's shape.
        shape: Shape,
    },
    /// A built module failed its verification: a bug of this crate (the builder
    /// checks every op as it is made), reported instead of handing XLA a bad module.
    #[error("the built module does not verify (a bug: please report it): {reason}")]
    Unverified {
        /// The verifier's finding.
        reason: String,
    },
    /// An error a library above the core recorded in the graph
    /// ([`Builder::error`](crate::Builder::error)), in its own words.
    #[error("{reason}")]
    Recorded {
        /// What the library found wrong.
        reason: String,
    },
}

/// `" {word} file:line:col"` for a known location, else nothing.
fn located(word: &str, location: &Option<&'static Location<'static>>) -> String {
    match location {
        Some(l) => format!(" {word} {}:{}:{}", l.file(), l.line(), l.column()),
        None => String::new(),
    }
}

impl Error {
    /// The location in the user's code the error points at, for shape and graph errors.
    pub fn location(&self) -> Option<&'static Location<'static>> {
        match self {
            Error::Shape(e) => e.location,
            Error::Graph { location, .. }
            | Error::NoGradient { location, .. }
            | Error::NoRule { location, .. } => *location,
            _ => None,
        }
    }
}

impl From<InstallError> for Error {
    fn from(e: InstallError) -> Self {
        Error::Runtime(RuntimeError::Install(e))
    }
}

/// Something legal that a JAX user probably did not mean, noticed while an op was
/// built (the op is built all the same). [`Builder::warnings`](crate::Builder::warnings)
/// and [`Computation::warnings`](crate::Computation::warnings) list them, and
/// finishing a module emits each once as a `tracing` event at level WARN (shown by
/// whatever subscriber the program installs, as a compiler prints its warnings),
/// unless the environment variable `XLACLIENT_WARNINGS` is `0`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildWarning {
    /// The op's name (`select`).
    pub op: String,
    /// What was noticed, and what to write instead.
    pub message: String,
    /// The user's line that built the op.
    pub location: Option<&'static std::panic::Location<'static>>,
}

impl std::fmt::Display for BuildWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(l) = self.location {
            write!(f, "{}:{}:{}: ", l.file(), l.line(), l.column())?;
        }
        write!(f, "warning: {}: {}", self.op, self.message)
    }
}
