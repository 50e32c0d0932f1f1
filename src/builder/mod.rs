//! The graph under construction: [`Builder`] owns the instructions of one computation,
//! [`Op`] is a cheap handle to one of them. Every op checks shapes and types when it
//! is built (see [`crate::ops`]); the first error is recorded with the caller's source
//! location and returned by [`Builder::build`], so that expressions can use plain
//! operators (`&a + &b`) without `?` at every step.

pub(crate) mod graph;
pub mod text;

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;
use std::rc::Rc;

use graph::{Graph, POISON};

use crate::error::{Error, Result, ShapeError};
use crate::proto;
use crate::shape::{NativeType, Shape};

/// Builds one XLA computation (and the sub-computations it calls).
///
/// ```
/// use xlaclient::{Builder, Shape};
/// let b = Builder::new("affine");
/// let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
/// let w = b.parameter(1, Shape::of::<f32>(&[3, 2]), "w");
/// let y = (x.matmul(&w) + 1.0).tanh();
/// let module = b.build(&y)?;
/// assert_eq!(module.result_shape(), Shape::of::<f32>(&[4, 2]));
/// # Ok::<(), xlaclient::Error>(())
/// ```
///
/// A shape mistake is reported by `build` with the op, the shapes and the line:
///
/// ```
/// use xlaclient::{Builder, Shape};
/// let b = Builder::new("bad");
/// let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
/// let y = x.matmul(&x); // [4,3] x [4,3]
/// let err = b.build(&y).unwrap_err().to_string();
/// assert!(err.contains("dot_general") && err.contains("f32[4,3]"), "{err}");
/// ```
#[derive(Clone)]
pub struct Builder {
    pub(crate) g: Rc<RefCell<Graph>>,
    pub(crate) comp: usize,
}

/// A value in a computation under construction: a handle to one instruction.
///
/// Cheap to clone. Operators (`+ - * /`, unary `-`) work on `Op` and `&Op`, and with
/// Rust numbers on either side (a number takes the element type of the other operand,
/// like a weakly-typed constant in JAX). Arrays of different shapes broadcast the
/// numpy way.
#[derive(Clone)]
pub struct Op {
    pub(crate) g: Rc<RefCell<Graph>>,
    pub(crate) comp: usize,
    pub(crate) idx: u32,
}

/// A finished module: an XLA `HloModuleProto` ready to compile.
#[derive(Clone, Debug, PartialEq)]
pub struct Computation {
    proto: proto::HloModuleProto,
}

impl Computation {
    /// Wraps a module proto (e.g. decoded from bytes). It is checked when compiled.
    pub fn from_proto(proto: proto::HloModuleProto) -> Self {
        Computation { proto }
    }

    /// The module as a proto.
    pub fn proto(&self) -> &proto::HloModuleProto {
        &self.proto
    }

    /// The serialized `HloModuleProto`.
    pub fn to_bytes(&self) -> Vec<u8> {
        use prost::Message;
        self.proto.encode_to_vec()
    }

    /// The module as HLO text, for people to read.
    pub fn to_hlo_text(&self) -> String {
        text::module_to_text(&self.proto)
    }

    /// Shapes of the entry computation's parameters.
    pub fn parameter_shapes(&self) -> Vec<Shape> {
        self.proto
            .host_program_shape
            .as_ref()
            .map(|p| p.parameters.iter().filter_map(Shape::from_proto).collect())
            .unwrap_or_default()
    }

    /// Shape of the entry computation's result.
    pub fn result_shape(&self) -> Shape {
        self.proto
            .host_program_shape
            .as_ref()
            .and_then(|p| p.result.as_ref())
            .and_then(Shape::from_proto)
            .unwrap_or(Shape::Tuple(Vec::new()))
    }
}

impl AsRef<proto::HloModuleProto> for Computation {
    fn as_ref(&self) -> &proto::HloModuleProto {
        &self.proto
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
        let mut g = Graph::new(name);
        let comp = g.add_computation(name);
        Builder {
            g: Rc::new(RefCell::new(g)),
            comp,
        }
    }

    /// The first error recorded so far, if any (also returned by [`build`](Self::build)).
    pub fn first_error(&self) -> Option<String> {
        self.g.borrow().first_error.as_ref().map(|e| e.to_string())
    }

    /// Declares parameter `number` of the computation, with a name for HLO text.
    /// Parameters must be numbered 0, 1, 2, … without gaps.
    #[track_caller]
    pub fn parameter(&self, number: usize, shape: Shape, name: &str) -> Op {
        self.parameter_at(number, shape, name, Location::caller())
    }

    fn parameter_at(
        &self,
        number: usize,
        shape: Shape,
        name: &str,
        loc: &'static Location<'static>,
    ) -> Op {
        let dup = self.g.borrow().computations[self.comp]
            .params
            .iter()
            .any(|(n, _)| *n == number);
        if dup {
            self.g.borrow_mut().record(Error::Graph {
                reason: format!("parameter {number} is declared twice"),
                location: Some(loc),
            });
            return self.poisoned();
        }
        if let Err(reason) = graph::check_shape(&shape) {
            self.g.borrow_mut().record(Error::Shape(ShapeError {
                op: "parameter",
                operands: vec![],
                reason,
                location: Some(loc),
            }));
            return self.poisoned();
        }
        let instr = proto::HloInstructionProto {
            parameter_number: number as i64,
            ..Default::default()
        };
        let op = self.push("parameter", shape, &[], instr, Some(name), loc);
        self.g.borrow_mut().computations[self.comp]
            .params
            .push((number, op.idx));
        op
    }

    /// A scalar constant.
    #[track_caller]
    pub fn constant<T: NativeType>(&self, value: T) -> Op {
        self.constant_array(&[value], &[])
    }

    /// A rank-1 constant from a slice.
    #[track_caller]
    pub fn constant_vec<T: NativeType>(&self, values: &[T]) -> Op {
        self.constant_array(values, &[values.len() as i64])
    }

    /// An array constant: `values` in row-major order, `dims` multiplying to its length.
    #[track_caller]
    pub fn constant_array<T: NativeType>(&self, values: &[T], dims: &[i64]) -> Op {
        let loc = Location::caller();
        let shape = Shape::of::<T>(dims);
        let count = dims
            .iter()
            .try_fold(1i64, |a, d| if *d < 0 { None } else { a.checked_mul(*d) });
        if count != Some(values.len() as i64) {
            self.g.borrow_mut().record(Error::Shape(ShapeError {
                op: "constant",
                operands: vec![],
                reason: format!(
                    "{} values given for shape {shape} ({} elements)",
                    values.len(),
                    count.map_or("overflowing".to_string(), |c| c.to_string())
                ),
                location: Some(loc),
            }));
            return self.poisoned();
        }
        let mut literal = proto::LiteralProto {
            shape: Some(shape.to_proto()),
            ..Default::default()
        };
        T::push_to_literal(values, &mut literal);
        let instr = proto::HloInstructionProto {
            literal: Some(literal),
            ..Default::default()
        };
        self.push("constant", shape, &[], instr, None, loc)
    }

    /// A tuple of values (e.g. several outputs of a computation).
    #[track_caller]
    pub fn tuple(&self, elems: &[&Op]) -> Op {
        let loc = Location::caller();
        self.emit("tuple", elems, loc, |shapes| {
            Ok((
                Shape::Tuple(shapes.to_vec()),
                proto::HloInstructionProto::default(),
            ))
        })
    }

    /// Finishes the module with `root` as the result of the entry computation.
    /// Returns the first error recorded while building, if any.
    #[track_caller]
    pub fn build(&self, root: &Op) -> Result<Computation> {
        let loc = Location::caller();
        if let Some(e) = self.g.borrow_mut().first_error.take() {
            return Err(e);
        }
        self.check_same(root, loc)?;
        let g = self.g.borrow();
        let proto = g.to_module(self.comp, root.idx, loc)?;
        crate::ir::check_proto::verify_module(&proto)?;
        Ok(Computation { proto })
    }

    /// Finishes the module with a tuple of `outputs` as its result.
    #[track_caller]
    pub fn build_tuple(&self, outputs: &[&Op]) -> Result<Computation> {
        let t = self.tuple(outputs);
        self.build(&t)
    }

    // ---------------------------------------------------------------------------
    // Internals shared by the op families in `crate::ops`.

    pub(crate) fn poisoned(&self) -> Op {
        Op {
            g: self.g.clone(),
            comp: self.comp,
            idx: POISON,
        }
    }

    fn check_same(&self, op: &Op, loc: &'static Location<'static>) -> Result<()> {
        if !Rc::ptr_eq(&self.g, &op.g) || op.comp != self.comp {
            return Err(Error::Graph {
                reason: "the op belongs to another builder or computation".into(),
                location: Some(loc),
            });
        }
        if op.idx == POISON {
            return Err(Error::Graph {
                reason: "the op is the result of a failed operation".into(),
                location: Some(loc),
            });
        }
        Ok(())
    }

    /// Appends an instruction whose shape is already known to be valid.
    pub(crate) fn push(
        &self,
        opcode: &'static str,
        shape: Shape,
        operands: &[u32],
        instr: proto::HloInstructionProto,
        name: Option<&str>,
        loc: &'static Location<'static>,
    ) -> Op {
        let idx = self
            .g
            .borrow_mut()
            .push(self.comp, opcode, shape, operands, instr, name, loc);
        Op {
            g: self.g.clone(),
            comp: self.comp,
            idx,
        }
    }

    /// Infer-then-push: checks that `operands` belong here, runs the shape rule `rule`
    /// on their shapes, and appends the instruction. A failure is recorded (first
    /// error wins) and a poisoned op is returned; poisoned operands propagate quietly.
    pub(crate) fn emit(
        &self,
        opcode: &'static str,
        operands: &[&Op],
        loc: &'static Location<'static>,
        rule: impl FnOnce(
            &[Shape],
        )
            -> std::result::Result<(Shape, proto::HloInstructionProto), ShapeError>,
    ) -> Op {
        let mut shapes = Vec::with_capacity(operands.len());
        let mut ids = smallvec::SmallVec::<[u32; 4]>::new();
        for o in operands {
            if !Rc::ptr_eq(&self.g, &o.g) || o.comp != self.comp {
                self.g.borrow_mut().record(Error::Graph {
                    reason: format!(
                        "`{opcode}`: an operand belongs to another builder or computation"
                    ),
                    location: Some(loc),
                });
                return self.poisoned();
            }
            if o.idx == POISON {
                return self.poisoned();
            }
            shapes.push(self.g.borrow().shape(self.comp, o.idx).clone());
            ids.push(o.idx);
        }
        match rule(&shapes) {
            Ok((shape, instr)) => self.push(opcode, shape, &ids, instr, None, loc),
            Err(mut e) => {
                e.location = Some(loc);
                self.g.borrow_mut().record(Error::Shape(e));
                self.poisoned()
            }
        }
    }

    /// Records an error found outside a shape rule and returns a poisoned op.
    pub(crate) fn fail(&self, e: ShapeError, loc: &'static Location<'static>) -> Op {
        let mut e = e;
        e.location = Some(loc);
        self.g.borrow_mut().record(Error::Shape(e));
        self.poisoned()
    }

    /// Builds a sub-computation (a reduce body, a loop body, …) from a closure that
    /// receives the sub-builder and its parameters. Returns its index, or `None`
    /// after recording an error.
    pub(crate) fn sub_computation(
        &self,
        name: &str,
        params: &[Shape],
        loc: &'static Location<'static>,
        body: impl FnOnce(&Builder, &[Op]) -> Op,
    ) -> Option<usize> {
        let comp = self.g.borrow_mut().add_computation(name);
        let sub = Builder {
            g: self.g.clone(),
            comp,
        };
        let args: Vec<Op> = params
            .iter()
            .enumerate()
            .map(|(i, shape)| sub.parameter_at(i, shape.clone(), &format!("p{i}"), loc))
            .collect();
        let root = body(&sub, &args);
        if root.idx == POISON {
            return None;
        }
        if !Rc::ptr_eq(&root.g, &self.g) || root.comp != comp {
            self.g.borrow_mut().record(Error::Graph {
                reason: format!("the body of `{name}` returned an op of another computation"),
                location: Some(loc),
            });
            return None;
        }
        self.g.borrow_mut().computations[comp].root = Some(root.idx);
        Some(comp)
    }
}

impl Op {
    /// The builder this op belongs to.
    pub fn builder(&self) -> Builder {
        Builder {
            g: self.g.clone(),
            comp: self.comp,
        }
    }

    /// The op's shape, or `None` if the op is the result of a failed operation
    /// (whose error [`Builder::build`] reports).
    pub fn shape(&self) -> Option<Shape> {
        if self.idx == POISON {
            None
        } else {
            Some(self.g.borrow().shape(self.comp, self.idx).clone())
        }
    }

    /// Dimension sizes (empty for a failed op or a tuple).
    pub fn dims(&self) -> Vec<i64> {
        self.shape().map(|s| s.dims().to_vec()).unwrap_or_default()
    }

    /// Rank (0 for a failed op or a tuple).
    pub fn rank(&self) -> usize {
        self.dims().len()
    }

    /// Element type, or `None` for tuples and failed ops.
    pub fn element_type(&self) -> Option<crate::shape::ElementType> {
        self.shape().and_then(|s| s.element_type())
    }

    /// True if building this op failed (the error is reported by `build`).
    pub fn is_poisoned(&self) -> bool {
        self.idx == POISON
    }
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shape() {
            Some(s) => write!(f, "Op(#{} {s})", self.idx),
            None => f.write_str("Op(failed)"),
        }
    }
}
