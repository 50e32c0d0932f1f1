//! The graph under construction: [`Builder`] adds instructions to one computation of
//! a typed IR graph ([`crate::ir`]), [`Op`] is a cheap handle to one value. Every op
//! checks shapes and types when it is built (see [`crate::ops`]); the first error is
//! recorded with the caller's source location and returned by [`Builder::build`], so
//! that expressions can use plain operators (`&a + &b`) without `?` at every step.
//!
//! Bodies (reduce combiners today; loop bodies and branches later) are built from Rust
//! closures and may use any value of an enclosing computation: the builder passes it
//! in as an extra parameter of the body (closure conversion).

mod graph;

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;
use std::rc::Rc;
use std::sync::Arc;

use graph::Graph;
pub(crate) use graph::StoringLoop;

use crate::error::{Error, GraphError, Result, ShapeError};
use crate::ir::{self, CompId, OpKind, Value};
use crate::proto;
use crate::shape::{ElementType, Shape};

/// Builds one XLA computation (and the sub-computations it calls).
///
/// ```
/// use xlaclient_core::{Builder, Shape};
/// let b = Builder::new("affine");
/// let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
/// let w = b.parameter(1, Shape::of::<f32>(&[3, 2]), "w");
/// let y = (x.matmul(&w) + 1.0).tanh();
/// let module = b.build(&y)?;
/// assert_eq!(module.result_shape(), Shape::of::<f32>(&[4, 2]));
/// # Ok::<(), xlaclient_core::Error>(())
/// ```
///
/// A shape mistake is reported by `build` with the op, the shapes and the line:
///
/// ```
/// use xlaclient_core::{Builder, Shape};
/// let b = Builder::new("bad");
/// let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
/// let y = x.matmul(&x); // [4,3] x [4,3]
/// let err = b.build(&y).unwrap_err().to_string();
/// assert!(err.contains("dot_general") && err.contains("f32[4,3]"), "{err}");
/// ```
#[derive(Clone)]
pub struct Builder {
    pub(crate) g: Rc<RefCell<Graph>>,
    pub(crate) comp: CompId,
}

/// A value in a computation under construction: one result of one instruction, or
/// the result of a failed operation (whose error its shape queries return).
///
/// Cheap to clone. Operators (`+ - * /`, unary `-`) work on `Op` and `&Op`, and with
/// Rust numbers on either side (a number takes the element type of the other operand,
/// like a weakly-typed constant in JAX, and a float number makes an integer array
/// `f32` as in JAX: see [`Scalar`](crate::Scalar)). Arrays of different shapes
/// broadcast the numpy way.
#[derive(Clone)]
pub struct Op {
    pub(crate) g: Rc<RefCell<Graph>>,
    pub(crate) comp: CompId,
    pub(crate) v: Value,
}

/// The most parameters a computation may declare (numbers are `u32` in the IR).
const MAX_PARAMETERS: usize = 1 << 24;

/// The computation index of failed ops; their `v.instr` indexes the graph's errors.
const POISON: CompId = CompId(u32::MAX);

/// A finished module, ready to compile: the typed IR of a verified module, built
/// here or raised from a proto given from outside. Lowered to an
/// `HloModuleProto` (or its bytes) when asked.
#[derive(Clone)]
pub struct Computation {
    ir: Arc<ir::Module>,
    warnings: Arc<[crate::error::BuildWarning]>,
}

/// Traced values are the leaves of the trees a traced function takes and returns.
impl crate::tree::Leaf for Op {}

impl Computation {
    /// Raises a module proto (e.g. exported by JAX) into the IR and verifies it: the
    /// same shape rules as for a module built here run on every instruction. A
    /// malformed module, or one the crate cannot read (an opcode without a rule, a
    /// layout other than row-major), is an [`Error::InvalidModule`]. Its
    /// instructions carry the caller's line as their source location.
    #[track_caller]
    pub fn from_proto(proto: proto::HloModuleProto) -> Result<Computation> {
        Self::raise(&proto, Location::caller())
    }

    /// Decodes a serialized `HloModuleProto` and raises it as
    /// [`from_proto`](Self::from_proto) does; bytes that do not decode are an
    /// [`Error::InvalidModule`].
    #[track_caller]
    pub fn from_hlo_bytes(bytes: &[u8]) -> Result<Computation> {
        use prost::Message;
        let loc = Location::caller();
        let m = proto::HloModuleProto::decode(bytes).map_err(|e| Error::InvalidModule {
            reason: format!("bytes do not decode as an HloModuleProto: {e}"),
        })?;
        Self::raise(&m, loc)
    }

    fn raise(m: &proto::HloModuleProto, loc: &'static Location<'static>) -> Result<Computation> {
        let module = ir::raise::raise_module(m, &crate::ops::Table, loc)?;
        // A foreign module's every problem is the module's: a shape rule's error
        // too.
        ir::verify::verify(&module, &crate::ops::Table).map_err(|e| match e {
            Error::Shape(s) => Error::InvalidModule {
                reason: s.to_string(),
            },
            e => e,
        })?;
        Ok(Computation {
            ir: Arc::new(module),
            warnings: Arc::new([]),
        })
    }

    /// What was noticed while the module was built: legal ops that a JAX user
    /// probably did not mean (see [`BuildWarning`](crate::BuildWarning)). Empty for
    /// a module read from a proto.
    pub fn warnings(&self) -> &[crate::error::BuildWarning] {
        &self.warnings
    }

    /// The typed IR of the module.
    pub fn ir(&self) -> &ir::Module {
        &self.ir
    }

    /// The module as an `HloModuleProto` (lowered from the IR at each call).
    pub fn proto(&self) -> proto::HloModuleProto {
        ir::lower::to_proto(&self.ir, &crate::ops::Table)
    }

    /// The serialized `HloModuleProto` (streamed from the IR without building the
    /// whole proto).
    ///
    /// A loop's stacks may start from a custom call to
    /// [`UNINITIALIZED_TARGET`](crate::UNINITIALIZED_TARGET), a kernel of this
    /// runtime's that `Client::compile` registers with the CPU plugins: for
    /// another runtime take `hlo_module_bytes_zeroed` (of
    /// [`HloModuleSource`](crate::pjrt::HloModuleSource)), which has zeros in
    /// their place, or the StableHLO text ([`to_stablehlo`](Self::to_stablehlo)).
    pub fn to_bytes(&self) -> Vec<u8> {
        ir::lower::to_bytes(&self.ir, &crate::ops::Table)
    }

    /// The module as HLO text, for people to read.
    pub fn to_hlo_text(&self) -> String {
        ir::text::module_to_text(&self.ir, &crate::ops::Table)
    }

    /// The module as StableHLO text: MLIR in the `stablehlo` dialect, the entry as
    /// `func.func public @main`, computations that `call` calls as private
    /// functions, bodies of reductions, sorts, loops and branches inline in their
    /// ops' regions (see [`crate::stablehlo`]). Compiled by
    /// `client.compile_with(&c, &CompileOptions::new().format(ProgramFormat::StableHlo))`
    /// (PJRT's `mlir` format), it computes what the HLO module computes. An
    /// instruction StableHLO cannot express is an [`Error::Emit`] naming the op
    /// and where it was built.
    pub fn to_stablehlo(&self) -> Result<String> {
        crate::stablehlo::emit::module_to_stablehlo(&self.ir, None)
    }

    /// [`to_stablehlo`](Self::to_stablehlo) for a program of `num_replicas`
    /// replicas and `num_partitions` partitions: the counts are written as the
    /// module's `mhlo.num_replicas` and `mhlo.num_partitions` (as JAX writes them),
    /// and an all-to-all over every replica (no replica groups) gets the group of
    /// them all (StableHLO's `all_to_all` needs its split count).
    pub fn to_stablehlo_with(&self, num_replicas: i64, num_partitions: i64) -> Result<String> {
        crate::stablehlo::emit::module_to_stablehlo(&self.ir, Some((num_replicas, num_partitions)))
    }

    /// A structural fingerprint for caching (names and source locations ignored):
    /// see [`ir::Module::fingerprint`].
    pub fn fingerprint(&self) -> [u8; 32] {
        self.ir.fingerprint()
    }

    /// Shapes of the entry computation's parameters.
    pub fn parameter_shapes(&self) -> Vec<Shape> {
        self.ir.parameter_shapes()
    }

    /// Shape of the entry computation's result.
    pub fn result_shape(&self) -> Shape {
        self.ir.result_shape()
    }

    /// This computation with its module replaced by `module`, an edit of it made
    /// in the crate (shardings set on a built one), verified again.
    pub(crate) fn with_module(&self, module: ir::Module) -> Result<Computation> {
        ir::verify::verify(&module, &crate::ops::Table)?;
        let mut c = self.clone();
        c.ir = Arc::new(module);
        Ok(c)
    }
}

// The one `unsafe` of the layers above the runtime: not an unsafe operation but
// the promise that `HloModuleSource` asks of its implementors (bytes XLA compiles
// or refuses without aborting), which only the verifier can make. Checked to be
// the only one by tests/layers.rs.
// SAFETY: a `Computation` exists only once the verifier has accepted it (`build`,
// `from_proto`, `from_hlo_bytes` re-run every instruction's shape rule, refuse
// dynamic dimensions and check ids, layouts and the entry), and its bytes are
// lowered from that IR, with a layout on every shape and the program shape set.
#[allow(unsafe_code)]
unsafe impl xlaclient_pjrt::HloModuleSource for Computation {
    /// Verified by `build` or `from_proto` (every instruction's shape rule re-run)
    /// and streamed from the IR.
    fn hlo_module_bytes(&self) -> Vec<u8> {
        self.to_bytes()
    }

    fn entry_parameter_shapes(&self) -> Option<Vec<Shape>> {
        Some(self.parameter_shapes())
    }

    fn check_replicas(
        &self,
        num_replicas: i64,
        num_partitions: i64,
    ) -> std::result::Result<(), String> {
        crate::ops::collective::check_device_ids(self.ir(), num_replicas, num_partitions)?;
        crate::sharding::check_devices(self.ir(), num_partitions)
    }

    fn stablehlo_text(
        &self,
        num_replicas: i64,
        num_partitions: i64,
    ) -> Option<std::result::Result<String, String>> {
        Some(
            self.to_stablehlo_with(num_replicas, num_partitions)
                .map_err(|e| e.to_string()),
        )
    }

    fn uses_host_callbacks(&self) -> bool {
        self.calls(xlaclient_pjrt::HOST_CALLBACK_TARGET)
    }

    fn uses_uninitialized_buffers(&self) -> bool {
        self.calls(xlaclient_pjrt::UNINITIALIZED_TARGET)
    }

    /// The proto with each uninitialized buffer (a custom call that has no
    /// operands) turned into a broadcast of a zero constant placed just before it:
    /// the same shapes, and the same results, since every element of such a
    /// buffer is written before it is read.
    fn hlo_module_bytes_zeroed(&self) -> Vec<u8> {
        use prost::Message;
        let mut m = self.proto();
        let mut next = m
            .computations
            .iter()
            .flat_map(|c| c.instructions.iter().map(|i| i.id))
            .max()
            .unwrap_or(0)
            + 1;
        for c in &mut m.computations {
            let mut out = Vec::with_capacity(c.instructions.len());
            for mut i in std::mem::take(&mut c.instructions) {
                let uninit = i.opcode == "custom-call"
                    && i.custom_call_target == xlaclient_pjrt::UNINITIALIZED_TARGET
                    && i.operand_ids.is_empty();
                let ty = i
                    .shape
                    .as_ref()
                    .and_then(Shape::from_proto)
                    .and_then(|s| s.element_type());
                if let (true, Some(ty)) = (uninit, ty) {
                    let scalar = Shape::scalar(ty);
                    out.push(proto::HloInstructionProto {
                        name: format!("{}.zero", i.name),
                        opcode: "constant".into(),
                        shape: Some(scalar.to_proto()),
                        id: next,
                        literal: Some(crate::ops::structural::literal_proto(
                            &scalar,
                            &vec![0u8; ty.byte_size()],
                        )),
                        metadata: i.metadata.clone(),
                        ..Default::default()
                    });
                    i.opcode = "broadcast".into();
                    i.operand_ids = vec![next];
                    i.dimensions = Vec::new();
                    i.custom_call_target = String::new();
                    i.backend_config = Vec::new();
                    i.custom_call_api_version = 0;
                    i.custom_call_has_side_effect = false;
                    next += 1;
                }
                out.push(i);
            }
            c.instructions = out;
        }
        m.encode_to_vec()
    }
}

impl Computation {
    /// Whether any instruction calls the kernel `target`.
    fn calls(&self, target: &str) -> bool {
        self.ir().comps.iter().any(|c| {
            c.instrs
                .iter()
                .any(|i| matches!(&i.kind, ir::OpKind::CustomCall(a) if a.target == target))
        })
    }
}

impl PartialEq for Computation {
    fn eq(&self, other: &Self) -> bool {
        self.proto() == other.proto()
    }
}

impl fmt::Debug for Computation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hlo_text())
    }
}

impl fmt::Display for Computation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hlo_text())
    }
}

impl Builder {
    /// A builder for a new module whose entry computation is called `name`.
    pub fn new(name: &str) -> Builder {
        let g = Graph::new(name);
        Builder {
            g: Rc::new(RefCell::new(g)),
            comp: CompId(0),
        }
    }

    /// The first error recorded so far, if any (also returned by [`build`](Self::build)).
    pub fn first_error(&self) -> Option<String> {
        self.g.borrow().errors.first().map(|e| e.to_string())
    }

    /// Records an [`Error::Graph`] with `reason` and the caller's location, and returns
    /// a failed op that carries it: the way for code outside the core (a layer, an
    /// optimizer) to refuse a bad argument as the builder's own ops do. Ops built on
    /// the result fail with the same error, and [`build`](Self::build) returns it (the
    /// first error recorded wins) even if the op is never used.
    ///
    /// ```
    /// use xlaclient_core::Builder;
    /// let b = Builder::new("refused");
    /// let bad = b.error("`layers` must not be empty");
    /// let y = &bad + 1.0; // fails too, with the same error
    /// let err = b.build(&y).unwrap_err();
    /// assert!(err.to_string().contains("`layers` must not be empty"));
    /// assert_eq!(err.location().map(|l| l.line()), Some(line!() - 4));
    /// ```
    #[track_caller]
    pub fn error(&self, reason: impl Into<String>) -> Op {
        self.fail_graph(
            GraphError::Recorded {
                reason: reason.into(),
            },
            Location::caller(),
        )
    }

    /// Number of instructions in the graph so far (all computations, dead ones too).
    pub fn instruction_count(&self) -> usize {
        self.g.borrow().comps.iter().map(|c| c.instrs.len()).sum()
    }

    /// Declares parameter `number` of the computation, with a name for HLO text.
    /// Parameters must be numbered 0, 1, 2, … without gaps.
    #[track_caller]
    pub fn parameter(&self, number: usize, shape: Shape, name: &str) -> Op {
        let loc = Location::caller();
        let declared = {
            let g = self.g.borrow();
            g.comps[self.comp.0 as usize]
                .params
                .get(number)
                .copied()
                .flatten()
        };
        if declared.is_some() {
            return self.fail_graph(GraphError::ParameterTwice { number }, loc);
        }
        if number >= MAX_PARAMETERS {
            // Numbers are dense (gaps are errors), so a huge one is a mistake; it
            // would also size the parameter table.
            return self.fail_graph(
                GraphError::ParameterNumber {
                    number,
                    max: MAX_PARAMETERS,
                },
                loc,
            );
        }
        let kind = OpKind::Parameter {
            number: number as u32,
            name: name.into(),
        };
        let op = self.emit(kind, &[], Some(shape), loc);
        if !op.is_poisoned() {
            let mut g = self.g.borrow_mut();
            let params = &mut g.comps[self.comp.0 as usize].params;
            if params.len() <= number {
                params.resize(number + 1, None);
            }
            params[number] = Some(op.v.instr);
        }
        op
    }

    /// Finishes the module with `root` as the result of the entry computation.
    /// Returns the first error recorded while building, if any (every call does,
    /// once an op has failed). The result is an array or a flat tuple of arrays: a
    /// tuple containing a tuple is an [`Error::Graph`] (PJRT plugins refuse such
    /// results).
    #[track_caller]
    pub fn build(&self, root: &Op) -> Result<Computation> {
        self.finish_module(root, true, Location::caller())
    }

    /// `build`, with or without the verifier.
    fn finish_module(
        &self,
        root: &Op,
        verify: bool,
        loc: &'static Location<'static>,
    ) -> Result<Computation> {
        if let Some(e) = self.g.borrow().errors.first() {
            return Err(e.clone());
        }
        if root.is_poisoned() {
            // A failed op of another graph (a library that had no builder at hand
            // made it): its own error, not "another builder".
            // (`shape` of a failed op is always its error.)
            root.shape()?;
        }
        if !Rc::ptr_eq(&self.g, &root.g) {
            return Err(Error::Graph {
                kind: GraphError::ForeignOp {
                    used_as: "the root".into(),
                },
                location: Some(loc),
            });
        }
        if root.comp != self.comp {
            return Err(Error::Graph {
                kind: GraphError::OutOfScope {
                    used_as: "the root".into(),
                    reason: "it belongs to another computation of this builder (a body)".into(),
                },
                location: Some(loc),
            });
        }
        check_result(&root.shape()?, loc)?;
        let module = self.g.borrow().finish(self.comp, root.v)?;
        if verify {
            ir::verify::verify(&module, &crate::ops::Table)?;
        }
        Ok(Computation {
            ir: Arc::new(module),
            warnings: self.report_warnings(),
        })
    }

    /// Finishes the module with a tuple of `outputs` as its result.
    #[track_caller]
    pub fn build_tuple(&self, outputs: &[&Op]) -> Result<Computation> {
        let t = self.tuple(outputs);
        self.build(&t)
    }

    /// Finishes the module with a tuple of `outputs` as its result, where each
    /// `(output, parameter)` pair lets the output reuse the parameter's buffer (XLA's
    /// input/output aliasing; the parameter must be donated at execution for the
    /// update to happen in place, else XLA copies). Shapes must match.
    #[track_caller]
    pub fn build_aliased(
        &self,
        outputs: &[&Op],
        aliases: &[(usize, usize)],
    ) -> Result<Computation> {
        let loc = Location::caller();
        let t = self.tuple(outputs);
        if let Some(e) = self.g.borrow().errors.first() {
            return Err(e.clone());
        }
        check_result(&t.shape()?, loc)?;
        let mut module = self.g.borrow().finish(self.comp, t.v)?;
        module.aliases = aliases
            .iter()
            .map(|(o, p)| ir::Alias {
                output: vec![*o as i64],
                parameter: *p as u32,
            })
            .collect();
        ir::verify::verify(&module, &crate::ops::Table).map_err(|e| match e {
            Error::InvalidModule { reason } => Error::Graph {
                kind: GraphError::Unverified { reason },
                location: Some(loc),
            },
            e => e,
        })?;
        Ok(Computation {
            ir: Arc::new(module),
            warnings: self.report_warnings(),
        })
    }

    /// The warnings recorded so far (see [`BuildWarning`](crate::BuildWarning)).
    pub fn warnings(&self) -> Vec<crate::error::BuildWarning> {
        self.g.borrow().warnings.clone()
    }

    /// The warnings, for a finished module; each emitted as a `tracing` WARN
    /// event by the first module finished after it was recorded, unless
    /// `XLACLIENT_WARNINGS=0`.
    fn report_warnings(&self) -> Arc<[crate::error::BuildWarning]> {
        let mut g = self.g.borrow_mut();
        if std::env::var_os("XLACLIENT_WARNINGS").is_none_or(|v| v != "0") {
            for w in &g.warnings[g.warnings_printed..] {
                tracing::warn!(op = w.op.as_str(), "{w}");
            }
        }
        g.warnings_printed = g.warnings.len();
        g.warnings.clone().into()
    }

    /// Records a warning about the op built at `loc`.
    pub(crate) fn warn(&self, op: &str, message: String, loc: &'static Location<'static>) {
        let mut g = self.g.borrow_mut();
        let location = Some(g.origin.unwrap_or(loc));
        g.warnings.push(crate::error::BuildWarning {
            op: op.to_string(),
            message,
            location,
        });
    }

    // ---------------------------------------------------------------------------
    // Internals shared by the op families in `crate::ops`.

    /// An op handle for value `v` of computation `comp`.
    pub(crate) fn op(&self, comp: CompId, v: Value) -> Op {
        Op {
            g: self.g.clone(),
            comp,
            v,
        }
    }

    /// Records `e` (with `loc`) and returns a failed op that carries it.
    pub(crate) fn fail(&self, mut e: ShapeError, loc: &'static Location<'static>) -> Op {
        e.location = Some(self.g.borrow().origin.unwrap_or(loc));
        self.fail_with(Error::Shape(e))
    }

    pub(crate) fn fail_graph(&self, kind: GraphError, loc: &'static Location<'static>) -> Op {
        let location = Some(self.g.borrow().origin.unwrap_or(loc));
        self.fail_with(Error::Graph { kind, location })
    }

    /// `op` if it failed, else a new failure: `name` needs an array, `op` is not one.
    pub(crate) fn fail_not_array(
        &self,
        op: &Op,
        name: &'static str,
        loc: &'static Location<'static>,
    ) -> Op {
        match op.shape() {
            Err(_) => op.clone(),
            Ok(s) => self.fail(
                ShapeError::new(
                    name,
                    &[&s],
                    crate::error::ShapeErrorKind::Rank,
                    "expects an array operand",
                ),
                loc,
            ),
        }
    }

    pub(crate) fn fail_with(&self, e: Error) -> Op {
        let idx = {
            let mut g = self.g.borrow_mut();
            g.errors.push(e);
            g.errors.len() - 1
        };
        self.op(POISON, Value::of(idx as u32))
    }

    /// The computation an op on `operands` goes into: the innermost of this
    /// builder's and the operands' computations (values of enclosing computations
    /// are captured). Returns a failed op if an operand is failed or foreign.
    pub(crate) fn target(
        &self,
        operands: &[&Op],
        what: &str,
        loc: &'static Location<'static>,
    ) -> std::result::Result<CompId, Op> {
        for o in operands {
            if o.is_poisoned() {
                return Err((*o).clone());
            }
            if !Rc::ptr_eq(&self.g, &o.g) {
                return Err(self.fail_graph(
                    GraphError::ForeignOp {
                        used_as: format!("an operand of `{what}`"),
                    },
                    loc,
                ));
            }
        }
        let comps: Vec<CompId> = operands.iter().map(|o| o.comp).collect();
        let r = self.g.borrow().innermost(self.comp, &comps);
        r.map_err(|reason| {
            self.fail_graph(
                GraphError::OutOfScope {
                    used_as: format!("an operand of `{what}`"),
                    reason,
                },
                loc,
            )
        })
    }

    /// Infer-then-push: resolves the operands into the target computation (capturing
    /// outer values), runs the op's shape rule ([`ir::Rules::infer`] of [`crate::ops::Table`], the same rule the
    /// verifier runs) and appends the instruction. A failure is recorded (first error
    /// wins in `build`) and returned as a failed op; failed operands propagate.
    pub(crate) fn emit(
        &self,
        kind: OpKind,
        operands: &[&Op],
        target: Option<Shape>,
        loc: &'static Location<'static>,
    ) -> Op {
        // Ops a gradient rule builds carry the line of the op they differentiate.
        let loc = self.g.borrow().origin.unwrap_or(loc);
        // The backward pass's copies of a body leave host callbacks out (see
        // `Graph::in_backward`): their result is the empty tuple.
        if let OpKind::CustomCall(a) = &kind
            && a.has_side_effect
            && matches!(&target, Some(Shape::Tuple(t)) if t.is_empty())
            && self.g.borrow().in_backward > 0
        {
            return self.tuple(&[]);
        }
        let name = kind.opcode().name();
        let comp = match self.target(operands, name, loc) {
            Ok(c) => c,
            Err(failed) => return failed,
        };
        let vals = {
            let mut g = self.g.borrow_mut();
            operands
                .iter()
                .map(|o| g.import(o.comp, o.v, comp))
                .collect::<std::result::Result<ir::Operands, String>>()
        };
        let vals = match vals {
            Ok(v) => v,
            Err(reason) => {
                return self.fail_graph(
                    GraphError::OutOfScope {
                        used_as: format!("an operand of `{name}`"),
                        reason,
                    },
                    loc,
                );
            }
        };
        let result = self
            .g
            .borrow_mut()
            .push(comp, kind, vals, target.as_ref(), loc);
        match result {
            Ok(v) => self.op(comp, v),
            Err(e) => self.fail(e, loc),
        }
    }

    /// Builds a body (a reduce combiner, a loop body, …) inside computation
    /// `parent` from a closure that receives the body's builder and its declared
    /// parameters and returns its results. Values of enclosing computations the
    /// closure uses become extra parameters after the declared ones. Returns the
    /// body and its results, which the caller turns into the root; `Err` is a failed
    /// op carrying the recorded error.
    pub(crate) fn body(
        &self,
        parent: CompId,
        name: &str,
        params: &[Shape],
        loc: &'static Location<'static>,
        f: impl FnOnce(&Builder, &[Op]) -> Vec<Op>,
    ) -> std::result::Result<(CompId, Vec<Value>), Op> {
        let comp = self.g.borrow_mut().add_comp(name, Some(parent));
        let sub = Builder {
            g: self.g.clone(),
            comp,
        };
        let args: Vec<Op> = params
            .iter()
            .enumerate()
            .map(|(i, s)| sub.on(loc).parameter(i, s.clone(), &format!("p{i}")))
            .collect();
        let outs = f(&sub, &args);
        let mut roots = Vec::with_capacity(outs.len());
        for o in &outs {
            if o.is_poisoned() {
                return Err(o.clone());
            }
            if !Rc::ptr_eq(&self.g, &o.g) {
                return Err(self.fail_graph(
                    GraphError::ForeignOp {
                        used_as: format!("the result of the body of `{name}`"),
                    },
                    loc,
                ));
            }
            let r = self.g.borrow().innermost(comp, &[o.comp]);
            match r {
                Ok(c) if c == comp => {}
                _ => {
                    return Err(self.fail_graph(
                        GraphError::OutOfScope {
                            used_as: format!("the result of the body of `{name}`"),
                            reason: "it is a value of a computation the body is not inside".into(),
                        },
                        loc,
                    ));
                }
            }
            let imported = self.g.borrow_mut().import(o.comp, o.v, comp);
            match imported {
                Ok(v) => roots.push(v),
                Err(reason) => {
                    return Err(self.fail_graph(
                        GraphError::OutOfScope {
                            used_as: format!("the result of the body of `{name}`"),
                            reason,
                        },
                        loc,
                    ));
                }
            }
        }
        Ok((comp, roots))
    }
}

/// A builder or op whose graph's ops carry a given source location while this
/// lives (see [`Op::at`]).
pub(crate) struct At<'a, T> {
    target: &'a T,
    g: Rc<RefCell<Graph>>,
    /// Whether this scope set the location (an enclosing one's stays otherwise).
    set: bool,
}

impl<T> std::ops::Deref for At<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.target
    }
}

impl<T> Drop for At<'_, T> {
    fn drop(&mut self) {
        if self.set {
            self.g.borrow_mut().origin = None;
        }
    }
}

fn at<'a, T>(target: &'a T, g: &Rc<RefCell<Graph>>, loc: &'static Location<'static>) -> At<'a, T> {
    let set = {
        let mut g = g.borrow_mut();
        let unset = g.origin.is_none();
        if unset {
            g.origin = Some(loc);
        }
        unset
    };
    At {
        target,
        g: g.clone(),
        set,
    }
}

impl Op {
    /// This op, through which the ops built (with the public, `#[track_caller]`
    /// methods) carry `loc` as their source location, until the end of the
    /// statement: how the crate's own code builds ops for a user's line
    /// (`x.on(loc).reshape(&d)`). An enclosing scope's location (a gradient rule's:
    /// the line of the op it differentiates) stays.
    pub(crate) fn on(&self, loc: &'static Location<'static>) -> At<'_, Op> {
        at(self, &self.g, loc)
    }
}

impl Builder {
    /// This builder, as `Op::on`.
    pub(crate) fn on(&self, loc: &'static Location<'static>) -> At<'_, Builder> {
        at(self, &self.g, loc)
    }
}

/// The test-only escape hatch. These methods exist only so that tests can compare
/// the crate's shape rules with XLA's own (`tests/rules_vs_xla.rs`): they emit an
/// instruction exactly as given, even one its shape rule rejects, and finish a
/// module without the verifier, so that XLA can be asked about the program our rule
/// refuses. They are hidden from the docs and not part of the API: a module built
/// with them may be refused by XLA, and on some such modules XLA aborts the process.
impl Builder {
    /// Emits `kind` on `operands` exactly as given (none of the typed methods'
    /// help: no broadcasting, no negative axes) and returns its results (one op, or
    /// one per result of a multi-result op). The op's shape rule runs as usual; when
    /// it accepts, this is an ordinary instruction and the error is `None`. When it
    /// rejects, the instruction is emitted anyway, declared `stand_in` (a tuple of
    /// the results for a multi-result op), and the rule's error is returned. `target`
    /// is the result shape that ops with attributes in it read (parameter, reshape,
    /// broadcast, convert, iota, bitcast-convert, rng-bit-generator's bits).
    #[doc(hidden)]
    #[track_caller]
    pub fn emit_unchecked(
        &self,
        kind: OpKind,
        operands: &[&Op],
        target: Option<Shape>,
        stand_in: Shape,
    ) -> (Vec<Op>, Option<ShapeError>) {
        let loc = Location::caller();
        let comp = match self.target(operands, kind.opcode().name(), loc) {
            Ok(c) => c,
            Err(failed) => return (vec![failed], None),
        };
        let multi = kind.multi_result(operands.len());
        let (v, n, rejected) = {
            let mut g = self.g.borrow_mut();
            let vals = operands
                .iter()
                .map(|o| g.import(o.comp, o.v, comp))
                .collect::<std::result::Result<ir::Operands, String>>();
            let vals = match vals {
                Ok(v) => v,
                Err(reason) => {
                    drop(g);
                    let f = self.fail_graph(
                        GraphError::OutOfScope {
                            used_as: "an operand of emit_unchecked".into(),
                            reason,
                        },
                        loc,
                    );
                    return (vec![f], None);
                }
            };
            let (v, rejected) = g.push_unchecked(comp, kind, vals, target.as_ref(), stand_in, loc);
            let shape = g.shapes.get(g.comp(comp).instrs[v.instr as usize].shape);
            let n = match shape {
                Shape::Tuple(e) if multi => e.len(),
                _ => 1,
            };
            (v, n, rejected)
        };
        (self.results(self.op(comp, v), n, multi), rejected)
    }

    /// A body computation for the `OpKind` given to
    /// [`emit_unchecked`](Self::emit_unchecked): parameters of `params`, built by `f`
    /// (given the body's builder and parameters) with ordinary, checked ops; its
    /// result is `f`'s values (a tuple of them if several). It may not use values
    /// from outside it.
    #[doc(hidden)]
    #[track_caller]
    pub fn body_unchecked(
        &self,
        params: &[Shape],
        f: impl FnOnce(&Builder, &[Op]) -> Vec<Op>,
    ) -> Result<CompId> {
        let loc = Location::caller();
        let (comp, roots) = self
            .body(self.comp, "body", params, loc, f)
            .map_err(|failed| failed.shape().expect_err("a failed op"))?;
        if !self.g.borrow().comp(comp).captures.is_empty() {
            return Err(Error::Graph {
                kind: GraphError::Captures,
                location: Some(loc),
            });
        }
        self.finish_body(comp, &roots, loc)
            .map_err(|failed| failed.shape().expect_err("a failed op"))?;
        Ok(comp)
    }

    /// Finishes the module like [`build`](Self::build) but without the verifier,
    /// so that instructions from [`emit_unchecked`](Self::emit_unchecked) that their
    /// rules reject stay as emitted. Compiling the result hands it to XLA as is.
    #[doc(hidden)]
    #[track_caller]
    pub fn build_unverified(&self, root: &Op) -> Result<Computation> {
        self.finish_module(root, false, Location::caller())
    }
}

/// A module's result may be an array or a tuple of arrays: every PJRT plugin
/// refuses to compile a tuple containing a tuple as the result (its outputs are
/// one flat list of buffers). Refused here with the advice to flatten.
fn check_result(s: &Shape, loc: &'static Location<'static>) -> Result<()> {
    if let Shape::Tuple(elems) = s {
        if let Some(i) = elems.iter().position(Shape::is_tuple) {
            return Err(Error::Graph {
                kind: GraphError::NestedTupleResult {
                    shape: s.clone(),
                    element: i,
                },
                location: Some(loc),
            });
        }
    }
    Ok(())
}

/// Closure conversion for bodies whose signature XLA fixes (reduce, reduce-window,
/// sort, scatter, map): a captured scalar travels as one more operand whose every
/// element is the value (broadcast), so the body receives it as one more parameter
/// (or pair of parameters) and passes it on unchanged.
impl Builder {
    /// The values body `comp` captured from `target`, in order; each must be a
    /// scalar (else a failed op naming `op`).
    pub(crate) fn scalar_captures(
        &self,
        comp: CompId,
        target: CompId,
        op: &'static str,
        loc: &'static Location<'static>,
    ) -> std::result::Result<Vec<Value>, Op> {
        let captures: Vec<Value> = self
            .g
            .borrow()
            .comp(comp)
            .captures
            .keys()
            .copied()
            .collect();
        for c in &captures {
            let s = self.g.borrow().value_shape(target, *c).clone();
            if !(s.is_array() && s.rank() == 0) {
                return Err(self.fail(
                    ShapeError::new(
                        op,
                        &[&s],
                        crate::error::ShapeErrorKind::Body,
                        format!("a body of `{op}` can use outside values that are scalars; it uses a {s}"),
                    ),
                    loc,
                ));
            }
        }
        Ok(captures)
    }

    /// For a body with `declared` parameters followed by capture parameters: adds a
    /// partner parameter for each capture (the other half of an accumulator/element
    /// or lhs/rhs pair). Returns the declared, capture and partner parameters'
    /// instructions; number them with [`order_params`](Self::order_params).
    pub(crate) fn pair_captures(
        &self,
        comp: CompId,
        declared: usize,
    ) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let mut g = self.g.borrow_mut();
        let c = g.comp_mut(comp);
        let params: Vec<u32> = c.params.iter().map(|p| p.expect("declared")).collect();
        let (decl, caps) = params.split_at(declared);
        let partners = caps
            .iter()
            .map(|p| {
                let copy = c.instrs[*p as usize].clone();
                c.instrs.push(copy);
                c.instrs.len() as u32 - 1
            })
            .collect();
        (decl.to_vec(), caps.to_vec(), partners)
    }

    /// The accumulator/element layout of reduce-like bodies (reduce, reduce-window,
    /// scatter): a body declared with `n` accumulators then `n` elements, followed
    /// by capture parameters, gets a partner accumulator per capture; parameters
    /// become (accumulators, capture accumulators, elements, captures), and each
    /// capture is passed on as one more result in `roots`.
    pub(crate) fn captures_as_inputs(&self, comp: CompId, n: usize, roots: &mut Vec<Value>) {
        let (decl, caps, partners) = self.pair_captures(comp, 2 * n);
        if caps.is_empty() {
            return;
        }
        roots.extend(caps.iter().map(|c| Value::of(*c)));
        self.order_params(comp, [&decl[..n], &partners, &decl[n..], &caps].concat());
    }

    /// Makes `order` (parameter instructions of `comp`) its parameters 0, 1, 2, ….
    pub(crate) fn order_params(&self, comp: CompId, order: Vec<u32>) {
        let mut g = self.g.borrow_mut();
        let c = g.comp_mut(comp);
        for (number, i) in order.iter().enumerate() {
            if let OpKind::Parameter { number: n, .. } = &mut c.instrs[*i as usize].kind {
                *n = number as u32;
            }
        }
        c.params = order.into_iter().map(Some).collect();
    }

    /// Finishes body `comp` with `roots` as its result (a tuple of them if several).
    pub(crate) fn finish_body(
        &self,
        comp: CompId,
        roots: &[Value],
        loc: &'static Location<'static>,
    ) -> std::result::Result<(), Op> {
        let root = if let [r] = roots {
            *r
        } else {
            let pushed = self.g.borrow_mut().push(
                comp,
                OpKind::Tuple,
                roots.iter().copied().collect(),
                None,
                loc,
            );
            pushed.map_err(|e| self.fail(e, loc))?
        };
        self.g.borrow_mut().comp_mut(comp).root = Some(root);
        Ok(())
    }

    /// The results of instruction `r` (a multi-result one when `n_results > 1` or
    /// it has extra results), or `r` itself repeated on failure.
    pub(crate) fn results(&self, r: Op, n: usize, multi: bool) -> Vec<Op> {
        if r.is_poisoned() || !multi {
            return vec![r; n.max(1)];
        }
        (0..n)
            .map(|i| {
                self.op(
                    r.comp,
                    Value {
                        instr: r.v.instr,
                        result: i as u32,
                    },
                )
            })
            .collect()
    }
}

impl Op {
    /// The builder this op belongs to.
    pub fn builder(&self) -> Builder {
        Builder {
            g: self.g.clone(),
            comp: if self.is_poisoned() {
                CompId(0)
            } else {
                self.comp
            },
        }
    }

    /// The op's shape, or the error that made it fail.
    pub fn shape(&self) -> Result<Shape> {
        let g = self.g.borrow();
        if self.is_poisoned() {
            return Err(g.errors[self.v.instr as usize].clone());
        }
        Ok(g.value_shape(self.comp, self.v).clone())
    }

    /// Dimension sizes (an error for a failed op or a tuple).
    pub fn dims(&self) -> Result<Vec<i64>> {
        match self.shape()? {
            Shape::Array { dims, .. } => Ok(dims.to_vec()),
            s => Err(self.not_array(&s)),
        }
    }

    /// Rank (an error for a failed op or a tuple).
    pub fn rank(&self) -> Result<usize> {
        self.dims().map(|d| d.len())
    }

    /// Element type (an error for a failed op or a tuple).
    pub fn element_type(&self) -> Result<ElementType> {
        match self.shape()? {
            Shape::Array { ty, .. } => Ok(ty),
            s => Err(self.not_array(&s)),
        }
    }

    fn not_array(&self, s: &Shape) -> Error {
        Error::Graph {
            kind: GraphError::NotArray { shape: s.clone() },
            location: None,
        }
    }

    /// True if building this op failed (the error is reported by `build`).
    pub fn is_poisoned(&self) -> bool {
        self.comp == POISON
    }
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shape() {
            Ok(s) => write!(f, "Op(#{}.{} {s})", self.v.instr, self.v.result),
            Err(_) => f.write_str("Op(failed)"),
        }
    }
}
