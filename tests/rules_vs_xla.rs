//! Our shape rules property-tested against XLA itself, one proptest per op family.
//!
//! For each family a proptest strategy generates instructions (ranks 0–4,
//! dimensions from {0, 1, 2, 3}, every element type from `pred`, `s8`…`u64`, `f16`,
//! `bf16`, `f32`, `f64`, random attributes), valid ones of which more than half are
//! then perturbed (an operand's element type, rank or dimension, an attribute entry
//! or list length, an operand more or fewer, a body's parameter or result), many
//! into invalid ones. Each case is one instruction on parameters, emitted exactly as
//! generated through the builder's test-only escape hatch
//! (`Builder::emit_unchecked`: the typed methods' conveniences such as numpy
//! broadcasting are not applied, except in the element-wise family's `numpy`
//! cases), and judged by our shape rule:
//!
//! - **our rule accepts**: the module (built with the verifier) must compile on the
//!   plugin, and executing it on zero-filled inputs must give outputs of our
//!   element types and dimensions (XLA's verifier also compares every declared
//!   shape with its own inference while compiling);
//! - **our rule rejects**: the same instruction, emitted anyway and declared a
//!   stand-in shape, in a module finished without our verifier
//!   (`Builder::build_unverified`), must be refused by XLA with an error. XLA's
//!   verifier saying "Expected instruction to have shape equal to S" about the
//!   instruction means XLA's own shape inference accepted it: the case is emitted
//!   again declared `S`, and if XLA compiles that, XLA accepts what we refuse — a
//!   failure, unless we are stricter on purpose there ([`stricter_on_purpose`],
//!   each case with its reason) or, for an element-wise op on empty arrays, XLA
//!   refuses the same op on non-empty ones (it drops ops on empty arrays before
//!   checking some element types). Later refusals (e.g. "implicit broadcast is not
//!   allowed", or the verifier objecting to an instruction one of XLA's passes
//!   made) count as refusals.
//!
//! Every compile runs in a child process (this binary re-invoked, as in
//! `tests/fuzz.rs`; one child per family unless one dies), so an abort of the
//! plugin is caught. A crash on a case our rule rejects is a case our rule must keep
//! guarding: it is recorded in [`KNOWN_ABORTS`], whose matching cases are no longer
//! compiled (`known_aborts_are_rejected_by_our_rules` checks that our rule rejects
//! each recorded example and that XLA, given it, aborts or returns an error). A
//! crash anywhere else fails the test. The disagreements found so far are kept as
//! regular cases in [`FOUND`]. Each family prints how many of its cases our rule
//! accepted and rejected, and asserts it had a fair share of both.
//!
//! **Case counts.** Each family runs [`DEFAULT_CASES`] (64) cases by default: the
//! whole file, 704 cases, takes about 10 s per plugin on a 2-core machine.
//! `XLACLIENT_PROPTEST_CASES=N` runs `N` per family instead, e.g.
//! `XLACLIENT_PROPTEST_CASES=1500 cargo test --test rules_vs_xla` (about 5 minutes).
//! The cases are the same on every run (a fixed seed, so the suite is
//! reproducible); `XLACLIENT_PROPTEST_SEED=S` draws another set, and a failure names
//! its seed and case index. Cases are not shrunk: each is a single small instruction
//! and is printed whole. `XLACLIENT_PROPTEST_VERBOSE=1` prints every case with XLA's
//! answer.

mod common;
#[macro_use]
#[path = "common/fuzz.rs"]
mod fuzz;

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRng, TestRunner};
use xlaclient::ir::{CompId, OpKind};
use xlaclient::ops::bitwise::{BitwiseOp, BitwiseUnary};
use xlaclient::ops::indexing::{GatherAttrs, GatherDims, ScatterAttrs, ScatterDims};
use xlaclient::ops::linalg::{
    ConvAttrs, ConvDims, DotAttrs, Precision, Transpose, TriangularSolveOptions,
};
use xlaclient::ops::random::RngAlgorithm;
use xlaclient::ops::slicing::{PadDim, SliceAttrs};
use xlaclient::ops::window::WindowDim;
use xlaclient::{
    BinaryOp, Buffer, Builder, Client, Comparison, Computation, DotDims, ElementType, NativeType,
    Op, Shape, UnaryOp,
};

use ElementType::{Bf16, F16, F32, F64, Pred, S8, S16, S32, S64, U8, U16, U32, U64};
use fuzz::{Outcome, RunOptions};

/// Cases per family when `XLACLIENT_PROPTEST_CASES` is not set.
const DEFAULT_CASES: u64 = 64;

/// The element types cases are drawn from.
const TYPES: [ElementType; 13] = [
    Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, Bf16, F32, F64,
];
const INTS: [ElementType; 8] = [S8, S16, S32, S64, U8, U16, U32, U64];
const UNSIGNED: [ElementType; 4] = [U8, U16, U32, U64];
const DIRS: [Comparison; 6] = [
    Comparison::Eq,
    Comparison::Ne,
    Comparison::Lt,
    Comparison::Le,
    Comparison::Gt,
    Comparison::Ge,
];

// ---------------------------------------------------------------------------------
// Cases.

/// An operand: a parameter of this element type and dims (an `f16` or `bf16` one
/// is an `f32` parameter converted: there are no host types for them yet).
#[derive(Clone, Debug, PartialEq)]
struct Arg {
    ty: ElementType,
    dims: Vec<i64>,
}

impl Arg {
    fn new(ty: ElementType, dims: &[i64]) -> Arg {
        Arg {
            ty,
            dims: dims.to_vec(),
        }
    }
    fn shape(&self) -> Shape {
        Shape::array(self.ty, &self.dims)
    }
}

/// A body computation: its parameters, and its results, each parameter `.0`
/// (modulo the count) converted to type `.1`.
#[derive(Clone, Debug)]
struct Body {
    params: Vec<Arg>,
    results: Vec<(usize, ElementType)>,
}

impl Body {
    /// A reduce-like combiner of `types`: `2n` scalars (accumulators, elements) to
    /// `n`, each result the accumulator or (where `elem[i]`) the element.
    fn combiner(types: &[ElementType], elem: &[bool]) -> Body {
        let n = types.len();
        let scalars: Vec<Arg> = types.iter().map(|t| Arg::new(*t, &[])).collect();
        Body {
            params: [scalars.clone(), scalars].concat(),
            results: (0..n)
                .map(|i| (if elem[i % elem.len()] { n + i } else { i }, types[i]))
                .collect(),
        }
    }
}

/// Which instruction a case is, with its attributes that are not integers.
#[derive(Clone, Debug)]
enum Kind {
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// A binary op through the typed method (numpy broadcasting); its escape
    /// hatch is the raw op on the same operands.
    Numpy(BinaryOp),
    Compare(Comparison),
    Select,
    /// Operands: min, x, max.
    Clamp,
    Bitwise(BitwiseOp),
    BitwiseUnary(BitwiseUnary),
    /// ints: output dims, broadcast dimensions.
    Broadcast,
    /// ints: output dims.
    Reshape,
    /// ints: permutation.
    Transpose,
    Convert(ElementType),
    /// ints: start, limit, strides.
    Slice,
    /// ints: sizes.
    DynamicSlice,
    DynamicUpdateSlice,
    /// ints: [dimension].
    Concatenate,
    /// ints: low, high, interior.
    Pad,
    /// ints: axes.
    Reverse,
    /// ints: dims, [dimension].
    Iota(ElementType),
    /// ints: axes.
    Reduce,
    /// ints: window sizes, strides, padding low, padding high, window dilations,
    /// base dilations.
    ReduceWindow,
    /// ints: as reduce-window.
    SelectAndScatter,
    /// ints: lhs contracting, rhs contracting, lhs batch, rhs batch. The preferred
    /// element type, the operands' precisions.
    Dot(Option<ElementType>, [Precision; 2]),
    /// ints: [input batch, input feature], input spatial, [kernel input feature,
    /// kernel output feature], kernel spatial, [output batch, output feature],
    /// output spatial, then the window as reduce-window's (sizes, strides, low,
    /// high, rhs dilation, lhs dilation), then [feature groups, batch groups].
    Conv,
    Cholesky(bool),
    TriangularSolve(TriangularSolveOptions),
    /// ints: offset dims, collapsed slice dims, start index map, [index vector
    /// dim], slice sizes, operand batching dims, start indices batching dims.
    /// Indices sorted.
    Gather(bool),
    /// ints: update window dims, inserted window dims, scatter dims to operand
    /// dims, [index vector dim], input batching dims, scatter indices batching
    /// dims. Indices sorted, unique.
    Scatter(bool, bool),
    /// ints: [dimension]. Stable.
    Sort(bool),
    BitcastConvert(ElementType),
    /// ints: the bits' dims.
    Rng(RngAlgorithm, ElementType),
    /// ints: dimensions.
    Map,
}

impl Kind {
    /// Takes any number of operands (perturbations may add or drop one).
    fn variadic(&self) -> bool {
        matches!(
            self,
            Kind::Reduce
                | Kind::ReduceWindow
                | Kind::Concatenate
                | Kind::Sort(_)
                | Kind::Map
                | Kind::Scatter(..)
                | Kind::DynamicSlice
                | Kind::DynamicUpdateSlice
        )
    }

    fn set_type(&mut self, t: ElementType) {
        match self {
            Kind::Convert(x) | Kind::Iota(x) | Kind::BitcastConvert(x) | Kind::Rng(_, x) => *x = t,
            Kind::Dot(p, _) => *p = Some(t),
            _ => {}
        }
    }
}

/// One instruction to judge.
#[derive(Clone, Debug)]
struct Case {
    kind: Kind,
    /// Operands, in order.
    args: Vec<Arg>,
    /// Integer attributes (see [`Kind`]).
    ints: Vec<Vec<i64>>,
    bodies: Vec<Body>,
}

impl Case {
    fn op(kind: Kind, args: Vec<Arg>) -> Case {
        Case::with(kind, args, vec![])
    }
    fn with(kind: Kind, args: Vec<Arg>, ints: Vec<Vec<i64>>) -> Case {
        Case {
            kind,
            args,
            ints,
            bodies: vec![],
        }
    }
    fn int_list(&self, k: usize) -> Vec<i64> {
        self.ints.get(k).cloned().unwrap_or_default()
    }
    fn int(&self, k: usize, j: usize) -> i64 {
        self.ints
            .get(k)
            .and_then(|v| v.get(j))
            .copied()
            .unwrap_or(0)
    }
    fn ty0(&self) -> ElementType {
        self.args.first().map_or(F32, |a| a.ty)
    }
    fn dims0(&self) -> Vec<i64> {
        self.args.first().map_or(vec![], |a| a.dims.clone())
    }

    /// The shape a rejected instruction is declared: a guess at what XLA infers
    /// (or, for ops whose attributes live in the result shape, that shape).
    fn stand_in(&self) -> Shape {
        let n = self.args.len();
        let tuple = |v: &[Arg]| Shape::Tuple(v.iter().map(Arg::shape).collect());
        let first = || self.args.first().map_or(Shape::scalar(F32), Arg::shape);
        match &self.kind {
            Kind::Compare(_) => Shape::array(Pred, &self.dims0()),
            Kind::Select | Kind::Clamp => self.args.get(1).map_or(first(), Arg::shape),
            Kind::Broadcast | Kind::Reshape => Shape::array(self.ty0(), &self.int_list(0)),
            Kind::Convert(t) | Kind::BitcastConvert(t) => Shape::array(*t, &self.dims0()),
            Kind::Dot(p, _) => Shape::array(p.unwrap_or(self.ty0()), &self.dims0()),
            Kind::Iota(t) => Shape::array(*t, &self.int_list(0)),
            Kind::Rng(_, t) => Shape::Tuple(vec![first(), Shape::array(*t, &self.int_list(0))]),
            Kind::Reduce | Kind::ReduceWindow if n > 2 => tuple(&self.args[..n / 2]),
            Kind::Sort(_) if n > 1 => tuple(&self.args),
            Kind::Scatter(..) if n > 3 => tuple(&self.args[..(n - 1) / 2]),
            Kind::Map => {
                let t = self.bodies.first().and_then(|b| b.results.first());
                Shape::array(t.map_or(self.ty0(), |r| r.1), &self.dims0())
            }
            _ => first(),
        }
    }

    /// The XLA opcode of the instruction under test.
    fn opcode(&self) -> &'static str {
        let (k, _) = self.instruction(&[]);
        k.opcode().name()
    }

    /// The instruction: its kind with attributes (given the bodies' ids), and the
    /// result shape its rule reads attributes from.
    fn instruction(&self, comps: &[CompId]) -> (OpKind, Option<Shape>) {
        let l = |k| self.int_list(k);
        let body = |i: usize| comps.get(i).copied().unwrap_or(CompId(0));
        let window = |k: usize| -> Vec<WindowDim> {
            let (s, st, lo, hi, wd, bd) = (l(k), l(k + 1), l(k + 2), l(k + 3), l(k + 4), l(k + 5));
            let n = [s.len(), st.len(), lo.len(), hi.len(), wd.len(), bd.len()];
            (0..*n.iter().min().expect("six lists"))
                .map(|i| WindowDim {
                    size: s[i],
                    stride: st[i],
                    padding_low: lo[i],
                    padding_high: hi[i],
                    window_dilation: wd[i],
                    base_dilation: bd[i],
                })
                .collect()
        };
        let ty = self.ty0();
        match &self.kind {
            Kind::Unary(u) => (OpKind::Unary(*u), None),
            Kind::Binary(b) | Kind::Numpy(b) => (OpKind::Binary(*b), None),
            Kind::Compare(c) => (OpKind::Compare(*c), None),
            Kind::Select => (OpKind::Select, None),
            Kind::Clamp => (OpKind::Clamp, None),
            Kind::Bitwise(b) => (OpKind::Bitwise(*b), None),
            Kind::BitwiseUnary(u) => (OpKind::BitwiseUnary(*u), None),
            Kind::Broadcast => (
                OpKind::Broadcast { dims: l(1).into() },
                Some(Shape::array(ty, &l(0))),
            ),
            Kind::Reshape => (OpKind::Reshape, Some(Shape::array(ty, &l(0)))),
            Kind::Transpose => (OpKind::Transpose { perm: l(0).into() }, None),
            Kind::Convert(t) => (OpKind::Convert, Some(Shape::array(*t, &self.dims0()))),
            Kind::Slice => {
                // One (start, limit, stride) per axis, as the proto holds them.
                let n = l(0).len().min(l(1).len()).min(l(2).len());
                let cut = |k| l(k)[..n].to_vec();
                (
                    OpKind::Slice(Box::new(SliceAttrs {
                        start: cut(0),
                        limit: cut(1),
                        strides: cut(2),
                    })),
                    None,
                )
            }
            Kind::DynamicSlice => (OpKind::DynamicSlice { sizes: l(0).into() }, None),
            Kind::DynamicUpdateSlice => (OpKind::DynamicUpdateSlice, None),
            Kind::Concatenate => (
                OpKind::Concatenate {
                    dimension: self.int(0, 0),
                },
                None,
            ),
            Kind::Pad => {
                let (lo, hi, interior) = (l(0), l(1), l(2));
                let n = lo.len().min(hi.len()).min(interior.len());
                let c: Vec<PadDim> = (0..n)
                    .map(|i| PadDim {
                        lo: lo[i],
                        hi: hi[i],
                        interior: interior[i],
                    })
                    .collect();
                (OpKind::Pad(c.into()), None)
            }
            Kind::Reverse => (OpKind::Reverse { axes: l(0).into() }, None),
            Kind::Iota(t) => (
                OpKind::Iota {
                    dimension: self.int(1, 0),
                },
                Some(Shape::array(*t, &l(0))),
            ),
            Kind::Reduce => (
                OpKind::Reduce {
                    axes: l(0).into(),
                    body: body(0),
                },
                None,
            ),
            Kind::ReduceWindow => (
                OpKind::ReduceWindow {
                    window: window(0).into(),
                    body: body(0),
                },
                None,
            ),
            Kind::SelectAndScatter => (
                OpKind::SelectAndScatter {
                    window: window(0).into(),
                    select: body(0),
                    scatter: body(1),
                },
                None,
            ),
            Kind::Dot(preferred, precision) => (
                OpKind::Dot(Box::new(DotAttrs {
                    dims: DotDims {
                        lhs_contracting: l(0),
                        rhs_contracting: l(1),
                        lhs_batch: l(2),
                        rhs_batch: l(3),
                    },
                    precision: *precision,
                })),
                // The rule reads the preferred element type from the target.
                preferred.map(Shape::scalar),
            ),
            Kind::Conv => {
                let dims = ConvDims {
                    input_batch: self.int(0, 0),
                    input_feature: self.int(0, 1),
                    input_spatial: l(1),
                    kernel_input_feature: self.int(2, 0),
                    kernel_output_feature: self.int(2, 1),
                    kernel_spatial: l(3),
                    output_batch: self.int(4, 0),
                    output_feature: self.int(4, 1),
                    output_spatial: l(5),
                };
                let attrs = ConvAttrs {
                    window: window(6),
                    dims,
                    feature_group_count: self.int(12, 0),
                    batch_group_count: self.int(12, 1),
                };
                (OpKind::Convolution(Box::new(attrs)), None)
            }
            Kind::Cholesky(lower) => (OpKind::Cholesky { lower: *lower }, None),
            Kind::TriangularSolve(o) => (OpKind::TriangularSolve(*o), None),
            Kind::Gather(sorted) => (
                OpKind::Gather(Box::new(GatherAttrs {
                    dims: GatherDims {
                        offset_dims: l(0),
                        collapsed_slice_dims: l(1),
                        start_index_map: l(2),
                        index_vector_dim: self.int(3, 0),
                        operand_batching_dims: l(5),
                        start_indices_batching_dims: l(6),
                    },
                    slice_sizes: l(4),
                    indices_are_sorted: *sorted,
                })),
                None,
            ),
            Kind::Scatter(sorted, unique) => (
                OpKind::Scatter {
                    attrs: Box::new(ScatterAttrs {
                        dims: ScatterDims {
                            update_window_dims: l(0),
                            inserted_window_dims: l(1),
                            scatter_dims_to_operand_dims: l(2),
                            index_vector_dim: self.int(3, 0),
                            input_batching_dims: l(4),
                            scatter_indices_batching_dims: l(5),
                        },
                        indices_are_sorted: *sorted,
                        unique_indices: *unique,
                    }),
                    body: body(0),
                },
                None,
            ),
            Kind::Sort(stable) => (
                OpKind::Sort {
                    dimension: self.int(0, 0),
                    stable: *stable,
                    comparator: body(0),
                },
                None,
            ),
            Kind::BitcastConvert(t) => (OpKind::BitcastConvert, Some(Shape::scalar(*t))),
            Kind::Rng(a, t) => (
                OpKind::RngBitGenerator { algorithm: *a },
                Some(Shape::array(*t, &l(0))),
            ),
            Kind::Map => (
                OpKind::Map {
                    dims: l(0).into(),
                    body: body(0),
                },
                None,
            ),
        }
    }
}

// ---------------------------------------------------------------------------------
// Perturbations.

/// One change that may make a valid case invalid. Indices are taken modulo the
/// number of candidates; a perturbation with nothing to change leaves the case as
/// it is.
#[derive(Clone, Debug)]
enum Perturb {
    /// An operand's element type.
    Type(usize, ElementType),
    /// One dimension of an operand.
    Dim(usize, usize, i64),
    /// One dimension more (at the end) of an operand.
    AddDim(usize, i64),
    /// The last dimension of an operand dropped.
    DropDim(usize),
    /// One entry of an integer attribute.
    Int(usize, usize, i64),
    /// One entry more for an integer attribute list.
    AddInt(usize, i64),
    /// The last entry of an integer attribute list dropped.
    DropInt(usize),
    /// One operand more (a copy of the last) for a variadic op.
    AddOperand,
    /// The last operand dropped from a variadic op.
    DropOperand,
    /// A body parameter's element type.
    BodyParamType(usize, usize, ElementType),
    /// A body result's element type.
    BodyResultType(usize, usize, ElementType),
    /// A body parameter made an array of 2.
    BodyParamDims(usize, usize),
    /// A body's last parameter dropped.
    DropBodyParam(usize),
    /// The element type an op's attributes name (convert, iota, bitcast, rng).
    AttrType(ElementType),
}

fn nth<T>(v: &mut [T], i: usize) -> Option<&mut T> {
    let n = v.len();
    if n == 0 { None } else { v.get_mut(i % n) }
}

impl Case {
    fn perturbed(mut self, ps: &[Perturb]) -> Case {
        for p in ps {
            self.apply(p);
        }
        self
    }

    fn apply(&mut self, p: &Perturb) {
        let variadic = self.kind.variadic();
        match *p {
            Perturb::Type(i, t) => {
                if let Some(a) = nth(&mut self.args, i) {
                    a.ty = t;
                }
            }
            Perturb::Dim(i, j, v) => {
                if let Some(d) = nth(&mut self.args, i).and_then(|a| nth(&mut a.dims, j)) {
                    *d = v;
                }
            }
            Perturb::AddDim(i, v) => {
                if let Some(a) = nth(&mut self.args, i) {
                    if a.dims.len() < 4 {
                        a.dims.push(v);
                    }
                }
            }
            Perturb::DropDim(i) => {
                if let Some(a) = nth(&mut self.args, i) {
                    a.dims.pop();
                }
            }
            Perturb::Int(i, j, v) => {
                if let Some(x) = nth(&mut self.ints, i).and_then(|l| nth(l, j)) {
                    *x = v;
                }
            }
            Perturb::AddInt(i, v) => {
                if let Some(l) = nth(&mut self.ints, i) {
                    l.push(v);
                }
            }
            Perturb::DropInt(i) => {
                if let Some(l) = nth(&mut self.ints, i) {
                    l.pop();
                }
            }
            Perturb::AddOperand => {
                if variadic {
                    if let Some(a) = self.args.last().cloned() {
                        self.args.push(a);
                    }
                }
            }
            Perturb::DropOperand => {
                if variadic && self.args.len() > 1 {
                    self.args.pop();
                }
            }
            Perturb::BodyParamType(k, j, t) => {
                if let Some(a) = nth(&mut self.bodies, k).and_then(|b| nth(&mut b.params, j)) {
                    a.ty = t;
                }
            }
            Perturb::BodyResultType(k, j, t) => {
                if let Some(r) = nth(&mut self.bodies, k).and_then(|b| nth(&mut b.results, j)) {
                    r.1 = t;
                }
            }
            Perturb::BodyParamDims(k, j) => {
                if let Some(a) = nth(&mut self.bodies, k).and_then(|b| nth(&mut b.params, j)) {
                    a.dims = vec![2];
                }
            }
            Perturb::DropBodyParam(k) => {
                if let Some(b) = nth(&mut self.bodies, k) {
                    if b.params.len() > 1 {
                        b.params.pop();
                    }
                }
            }
            Perturb::AttrType(t) => self.kind.set_type(t),
        }
    }
}

// ---------------------------------------------------------------------------------
// Strategies.

fn ty() -> impl Strategy<Value = ElementType> {
    select(TYPES.to_vec())
}

/// A dimension: 0 now and then, else 1 to 3.
fn dim() -> impl Strategy<Value = i64> {
    prop_oneof![1 => Just(0i64), 6 => 1i64..=3]
}

fn dims(rank: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(dim(), rank)
}

fn arg(rank: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Arg> {
    (ty(), dims(rank)).prop_map(|(ty, dims)| Arg { ty, dims })
}

/// A permutation of `0..n`.
fn perm(n: usize) -> impl Strategy<Value = Vec<i64>> {
    Just((0..n as i64).collect::<Vec<_>>()).prop_shuffle()
}

/// A subset of `0..n`, increasing.
fn subset(n: usize) -> impl Strategy<Value = Vec<i64>> {
    subsequence((0..n as i64).collect::<Vec<_>>(), 0..=n)
}

/// A subset of `0..n` in any order.
fn subset_any_order(n: usize) -> impl Strategy<Value = Vec<i64>> {
    subset(n).prop_flat_map(|v| Just(v).prop_shuffle())
}

fn perturbation() -> impl Strategy<Value = Perturb> {
    let i = || any::<usize>();
    let v = || -1i64..=4;
    prop_oneof![
        3 => (i(), ty()).prop_map(|(a, t)| Perturb::Type(a, t)),
        3 => (i(), i(), dim()).prop_map(|(a, j, d)| Perturb::Dim(a, j, d)),
        1 => (i(), dim()).prop_map(|(a, d)| Perturb::AddDim(a, d)),
        1 => i().prop_map(Perturb::DropDim),
        4 => (i(), i(), v()).prop_map(|(k, j, x)| Perturb::Int(k, j, x)),
        1 => (i(), v()).prop_map(|(k, x)| Perturb::AddInt(k, x)),
        1 => i().prop_map(Perturb::DropInt),
        1 => Just(Perturb::AddOperand),
        1 => Just(Perturb::DropOperand),
        1 => (i(), i(), ty()).prop_map(|(k, j, t)| Perturb::BodyParamType(k, j, t)),
        1 => (i(), i(), ty()).prop_map(|(k, j, t)| Perturb::BodyResultType(k, j, t)),
        1 => (i(), i()).prop_map(|(k, j)| Perturb::BodyParamDims(k, j)),
        1 => i().prop_map(Perturb::DropBodyParam),
        1 => ty().prop_map(Perturb::AttrType),
    ]
}

/// Valid cases, more than half of them perturbed once or twice.
fn with_perturbations(valid: BoxedStrategy<Case>) -> BoxedStrategy<Case> {
    prop_oneof![
        4 => valid.clone(),
        4 => (valid.clone(), perturbation()).prop_map(|(c, p)| c.perturbed(&[p])),
        2 => (valid, perturbation(), perturbation()).prop_map(|(c, p, q)| c.perturbed(&[p, q])),
    ]
    .boxed()
}

/// Element-wise unary, binary, compare, select and clamp on operands of one shape
/// (clamp's bounds may be scalars), and binary ops through the typed methods on
/// numpy-broadcastable operands.
fn elementwise() -> BoxedStrategy<Case> {
    let numpy = (
        select(BinaryOp::ALL),
        arg(0..=4),
        prop::collection::vec(any::<bool>(), 4),
        prop::collection::vec(any::<bool>(), 4),
        0..=4usize,
        0..=4usize,
    )
        .prop_map(|(op, x, ones_a, ones_b, ra, rb)| {
            let r = x.dims.len();
            let side = |ones: &[bool], rank: usize| -> Vec<i64> {
                (r - rank.min(r)..r)
                    .map(|i| if ones[i] { 1 } else { x.dims[i] })
                    .collect()
            };
            let (a, b) = (side(&ones_a, ra), side(&ones_b, rb));
            Case::op(
                Kind::Numpy(op),
                vec![Arg::new(x.ty, &a), Arg::new(x.ty, &b)],
            )
        });
    prop_oneof![
        (select(UnaryOp::ALL), arg(0..=4)).prop_map(|(u, x)| Case::op(Kind::Unary(u), vec![x])),
        (select(BinaryOp::ALL), arg(0..=4))
            .prop_map(|(b, x)| Case::op(Kind::Binary(b), vec![x.clone(), x])),
        (select(DIRS.to_vec()), arg(0..=4))
            .prop_map(|(d, x)| Case::op(Kind::Compare(d), vec![x.clone(), x])),
        arg(0..=4)
            .prop_map(|x| Case::op(Kind::Select, vec![Arg::new(Pred, &x.dims), x.clone(), x])),
        // Bounds scalar (refused: see `stricter_on_purpose`) or of the operand's dims.
        (arg(0..=4), any::<bool>(), any::<bool>()).prop_map(|(x, lo_scalar, hi_scalar)| {
            let bound = |scalar: bool| Arg::new(x.ty, if scalar { &[] } else { &x.dims });
            let (lo, hi) = (bound(lo_scalar), bound(hi_scalar));
            Case::op(Kind::Clamp, vec![lo, x, hi])
        }),
        numpy,
    ]
    .boxed()
}

/// broadcast (BroadcastInDim, dimensions in any order), reshape, transpose, convert.
fn shape_ops() -> BoxedStrategy<Case> {
    let broadcast = arg(0..=3)
        .prop_flat_map(|x| {
            let r = x.dims.len();
            (Just(x), r..=4usize).prop_flat_map(move |(x, out_rank)| {
                let map = subsequence((0..out_rank as i64).collect::<Vec<_>>(), r);
                let any_order = map.clone().prop_flat_map(|m| Just(m).prop_shuffle());
                (
                    Just(x),
                    prop_oneof![map, any_order],
                    dims(out_rank..=out_rank),
                )
            })
        })
        .prop_map(|(x, map, mut out)| {
            for (i, d) in map.iter().enumerate() {
                out[*d as usize] = x.dims[i];
            }
            Case::with(Kind::Broadcast, vec![x], vec![out, map])
        });
    let reshape = (arg(0..=4), 0..=2usize, any::<bool>())
        .prop_flat_map(|(x, ones, merge)| {
            let mut t = x.dims.clone();
            t.extend(std::iter::repeat_n(1, ones));
            (Just(x), Just(t).prop_shuffle(), Just(merge))
        })
        .prop_map(|(x, mut t, merge)| {
            // Merging two neighbours keeps the element count.
            let mut merge = merge && t.len() >= 2;
            while merge || t.len() > 4 {
                let p = t.remove(0) * t[0];
                t[0] = p;
                merge = false;
            }
            Case::with(Kind::Reshape, vec![x], vec![t])
        });
    let transpose = arg(0..=4)
        .prop_flat_map(|x| {
            let r = x.dims.len();
            (Just(x), perm(r))
        })
        .prop_map(|(x, p)| Case::with(Kind::Transpose, vec![x], vec![p]));
    let convert = (arg(0..=4), ty()).prop_map(|(x, t)| Case::op(Kind::Convert(t), vec![x]));
    // Any dims: the same element count by chance only.
    let reshape_any =
        (arg(0..=4), dims(0..=4)).prop_map(|(x, t)| Case::with(Kind::Reshape, vec![x], vec![t]));
    // Convert takes any pair of these types: rarely invalid.
    prop_oneof![
        3 => broadcast,
        3 => reshape,
        1 => reshape_any,
        3 => transpose,
        1 => convert
    ]
    .boxed()
}

/// slice, dynamic-slice, dynamic-update-slice, concatenate, pad (negative and
/// interior too), reverse, iota.
fn slicing() -> BoxedStrategy<Case> {
    let slice = (
        arg(0..=4),
        prop::collection::vec((0..=3i64, 0..=3i64, 1..=3i64), 4),
    )
        .prop_map(|(x, m)| {
            let (mut s, mut l, mut st) = (vec![], vec![], vec![]);
            for (i, d) in x.dims.iter().enumerate() {
                let a = m[i].0.min(*d);
                s.push(a);
                l.push(a + m[i].1.min(d - a));
                st.push(m[i].2);
            }
            Case::with(Kind::Slice, vec![x], vec![s, l, st])
        });
    let indices = |x: &Arg, it: ElementType| -> Vec<Arg> {
        x.dims.iter().map(|_| Arg::new(it, &[])).collect()
    };
    let dynamic_slice = (
        arg(0..=4),
        select(INTS.to_vec()),
        prop::collection::vec(0..=3i64, 4),
    )
        .prop_map(move |(x, it, m)| {
            let sizes: Vec<i64> = x.dims.iter().zip(&m).map(|(d, s)| (*s).min(*d)).collect();
            let args = [vec![x.clone()], indices(&x, it)].concat();
            Case::with(Kind::DynamicSlice, args, vec![sizes])
        });
    let dynamic_update_slice = (
        arg(0..=4),
        select(INTS.to_vec()),
        prop::collection::vec(0..=3i64, 4),
    )
        .prop_map(move |(x, it, m)| {
            let ud: Vec<i64> = x
                .dims
                .iter()
                .zip(&m)
                .map(|(d, s)| if *d == 0 { 0 } else { 1 + s % d })
                .collect();
            let args = [vec![x.clone(), Arg::new(x.ty, &ud)], indices(&x, it)].concat();
            Case::op(Kind::DynamicUpdateSlice, args)
        });
    let concatenate = (arg(1..=4), 0..4usize, prop::collection::vec(dim(), 1..=3)).prop_map(
        |(x, axis, sizes)| {
            let axis = axis % x.dims.len();
            let args = sizes
                .iter()
                .map(|s| {
                    let mut d = x.dims.clone();
                    d[axis] = *s;
                    Arg::new(x.ty, &d)
                })
                .collect();
            Case::with(Kind::Concatenate, args, vec![vec![axis as i64]])
        },
    );
    let pad = (
        arg(0..=4),
        prop::collection::vec((-1..=2i64, -1..=2i64, 0..=2i64), 4),
    )
        .prop_map(|(x, m)| {
            let r = x.dims.len();
            let ints = vec![
                m[..r].iter().map(|p| p.0).collect(),
                m[..r].iter().map(|p| p.1).collect(),
                m[..r].iter().map(|p| p.2).collect(),
            ];
            Case::with(Kind::Pad, vec![x.clone(), Arg::new(x.ty, &[])], ints)
        });
    let reverse = arg(0..=4)
        .prop_flat_map(|x| {
            let r = x.dims.len();
            (Just(x), subset_any_order(r))
        })
        .prop_map(|(x, axes)| Case::with(Kind::Reverse, vec![x], vec![axes]));
    let iota = (ty(), dims(0..=4), 0..4i64).prop_map(|(t, d, a)| {
        let a = if d.is_empty() { 0 } else { a % d.len() as i64 };
        Case::with(Kind::Iota(t), vec![], vec![d, vec![a]])
    });
    prop_oneof![
        slice,
        dynamic_slice,
        dynamic_update_slice,
        concatenate,
        pad,
        reverse,
        iota
    ]
    .boxed()
}

/// Reduce of one to three inputs (types may differ), over any axes.
fn reduce() -> BoxedStrategy<Case> {
    (
        1..=3usize,
        dims(0..=4),
        prop::collection::vec(ty(), 3),
        any::<bool>(),
        prop::collection::vec(any::<bool>(), 3),
    )
        .prop_flat_map(|(n, d, ts, same, elem)| {
            let types: Vec<ElementType> =
                (0..n).map(|i| if same { ts[0] } else { ts[i] }).collect();
            let r = d.len();
            (Just((d, types, elem)), subset_any_order(r))
        })
        .prop_map(|((d, types, elem), axes)| {
            let mut args: Vec<Arg> = types.iter().map(|t| Arg::new(*t, &d)).collect();
            args.extend(types.iter().map(|t| Arg::new(*t, &[])));
            Case {
                kind: Kind::Reduce,
                args,
                ints: vec![axes],
                bodies: vec![Body::combiner(&types, &elem)],
            }
        })
        .boxed()
}

/// A window of `rank` axes, as six attribute lists.
fn window(rank: usize) -> impl Strategy<Value = Vec<Vec<i64>>> {
    let axis = (
        1..=3i64,
        1..=2i64,
        0..=1i64,
        0..=1i64,
        prop_oneof![3 => Just(1i64), 1 => Just(2i64)],
        prop_oneof![3 => Just(1i64), 1 => Just(2i64)],
    );
    prop::collection::vec(axis, rank).prop_map(|w| {
        vec![
            w.iter().map(|a| a.0).collect(),
            w.iter().map(|a| a.1).collect(),
            w.iter().map(|a| a.2).collect(),
            w.iter().map(|a| a.3).collect(),
            w.iter().map(|a| a.4).collect(),
            w.iter().map(|a| a.5).collect(),
        ]
    })
}

fn window_dims(w: &[Vec<i64>]) -> Vec<WindowDim> {
    (0..w[0].len())
        .map(|i| WindowDim {
            size: w[0][i],
            stride: w[1][i],
            padding_low: w[2][i],
            padding_high: w[3][i],
            window_dilation: w[4][i],
            base_dilation: w[5][i],
        })
        .collect()
}

/// Reduce-window of one or two inputs, and select-and-scatter.
fn windows() -> BoxedStrategy<Case> {
    let reduce_window = (
        1..=2usize,
        dims(0..=4),
        ty(),
        ty(),
        any::<bool>(),
        prop::collection::vec(any::<bool>(), 2),
    )
        .prop_flat_map(|(n, d, t0, t1, same, elem)| {
            let types: Vec<ElementType> = [t0, if same { t0 } else { t1 }][..n].to_vec();
            let r = d.len();
            (Just((d, types, elem)), window(r))
        })
        .prop_map(|((d, types, elem), w)| {
            let mut args: Vec<Arg> = types.iter().map(|t| Arg::new(*t, &d)).collect();
            args.extend(types.iter().map(|t| Arg::new(*t, &[])));
            Case {
                kind: Kind::ReduceWindow,
                args,
                ints: w,
                bodies: vec![Body::combiner(&types, &elem)],
            }
        });
    let select_and_scatter = arg(0..=4)
        .prop_flat_map(|x| {
            let r = x.dims.len();
            (Just(x), window(r))
        })
        .prop_map(|(x, w)| {
            let out: Vec<i64> = window_dims(&w)
                .iter()
                .zip(&x.dims)
                .map(|(wd, d)| wd.output_size(*d).unwrap_or(*d))
                .collect();
            let s = Arg::new(x.ty, &[]);
            Case {
                kind: Kind::SelectAndScatter,
                args: vec![x.clone(), Arg::new(x.ty, &out), s.clone()],
                ints: w,
                bodies: vec![
                    Body {
                        params: vec![s.clone(), s.clone()],
                        results: vec![(0, Pred)],
                    },
                    Body {
                        params: vec![s.clone(), s],
                        results: vec![(1, x.ty)],
                    },
                ],
            }
        });
    prop_oneof![reduce_window, select_and_scatter].boxed()
}

/// dot_general (batch, contracting and free axes in any order), convolution (any
/// dimension numbers, feature or batch groups, strides, padding, dilations),
/// cholesky, triangular-solve.
fn linalg() -> BoxedStrategy<Case> {
    let dot = (dims(0..=1), dims(0..=2), dims(0..=1), dims(0..=1), ty())
        .prop_flat_map(|(batch, contract, lf, rf, t)| {
            let lr = batch.len() + contract.len() + lf.len();
            let rr = batch.len() + contract.len() + rf.len();
            let precisions = select(vec![
                Precision::Default,
                Precision::High,
                Precision::Highest,
            ]);
            (
                Just((batch, contract, lf, rf, t)),
                perm(lr),
                perm(rr),
                prop_oneof![2 => Just(None), 1 => ty().prop_map(Some)],
                [precisions.clone(), precisions],
            )
        })
        .prop_map(
            |((batch, contract, lf, rf, t), lp, rp, preferred, precision)| {
                // Logical axes (batch, contracting, free) placed by the permutations.
                let place = |free: &[i64], p: &[i64]| -> (Vec<i64>, Vec<i64>, Vec<i64>) {
                    let logical = [batch.clone(), contract.clone(), free.to_vec()].concat();
                    let mut d = vec![0; logical.len()];
                    for (i, x) in logical.iter().enumerate() {
                        d[p[i] as usize] = *x;
                    }
                    let nb = batch.len();
                    (d, p[..nb].to_vec(), p[nb..nb + contract.len()].to_vec())
                };
                let (ld, lb, lc) = place(&lf, &lp);
                let (rd, rb, rc) = place(&rf, &rp);
                Case::with(
                    Kind::Dot(preferred, precision),
                    vec![Arg::new(t, &ld), Arg::new(t, &rd)],
                    vec![lc, rc, lb, rb],
                )
            },
        );
    let conv = (
        0..=2usize,
        ty(),
        prop_oneof![3 => Just((1i64, 1i64)), 1 => Just((2, 1)), 1 => Just((1, 2))],
        (1..=2i64, 1..=2i64, 1..=2i64),
        prop::collection::vec((dim(), 1..=3i64), 2),
    )
        .prop_flat_map(|(n, t, groups, sizes, spatial)| {
            let r = n + 2;
            (
                Just((n, t, groups, sizes, spatial)),
                perm(r),
                perm(r),
                perm(r),
                window(n),
            )
        })
        .prop_map(
            |((n, t, (fg, bg), (b, kin, kout), spatial), ip, kp, op, mut w)| {
                let r = n + 2;
                let (batch, in_f, kout) = (b * bg, kin * fg, kout * fg * bg);
                let mut x = vec![0; r];
                let mut k = vec![0; r];
                x[ip[0] as usize] = batch;
                x[ip[1] as usize] = in_f;
                k[kp[0] as usize] = kin;
                k[kp[1] as usize] = kout;
                for i in 0..n {
                    x[ip[2 + i] as usize] = spatial[i].0;
                    k[kp[2 + i] as usize] = spatial[i].1;
                    w[0][i] = spatial[i].1;
                }
                let mut ints = vec![
                    ip[..2].to_vec(),
                    ip[2..].to_vec(),
                    kp[..2].to_vec(),
                    kp[2..].to_vec(),
                    op[..2].to_vec(),
                    op[2..].to_vec(),
                ];
                // The window's lists: sizes, strides, low, high, then rhs (window)
                // dilation and lhs (base) dilation.
                ints.extend(w);
                ints.push(vec![fg, bg]);
                Case::with(Kind::Conv, vec![Arg::new(t, &x), Arg::new(t, &k)], ints)
            },
        );
    let cholesky = (ty(), dims(0..=2), 0..=3i64, any::<bool>()).prop_map(|(t, mut d, m, lower)| {
        d.extend([m, m]);
        Case::op(Kind::Cholesky(lower), vec![Arg::new(t, &d)])
    });
    let transposes = select(vec![
        Transpose::No,
        Transpose::Transpose,
        Transpose::Adjoint,
    ]);
    let triangular_solve = (
        ty(),
        dims(0..=2),
        (0..=3i64, 0..=3i64),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        transposes,
    )
        .prop_map(
            |(t, batch, (m, k), (left_side, lower, unit_diagonal), transpose_a)| {
                let a = [batch.clone(), vec![m, m]].concat();
                let b = [batch, if left_side { vec![m, k] } else { vec![k, m] }].concat();
                let o = TriangularSolveOptions {
                    left_side,
                    lower,
                    unit_diagonal,
                    transpose_a,
                };
                Case::op(
                    Kind::TriangularSolve(o),
                    vec![Arg::new(t, &a), Arg::new(t, &b)],
                )
            },
        );
    prop_oneof![3 => dot, 3 => conv, 1 => cholesky, 1 => triangular_solve].boxed()
}

/// Indices of `batch` dims with index vectors of `k` entries at `ivd` (or, for
/// `k == 1` and `implicit`, no index vector axis: `ivd` is the rank).
fn index_dims(batch: &[i64], k: usize, ivd: usize, implicit: bool) -> (Vec<i64>, i64) {
    if k == 1 && implicit {
        (batch.to_vec(), batch.len() as i64)
    } else {
        let ivd = ivd.min(batch.len());
        let mut d = batch.to_vec();
        d.insert(ivd, k as i64);
        (d, ivd as i64)
    }
}

/// Gather and scatter with random dimension numbers.
fn indexing() -> BoxedStrategy<Case> {
    let gather = arg(0..=3)
        .prop_flat_map(|x| {
            let r = x.dims.len();
            (
                Just(x),
                subset_any_order(r),
                subset(r),
                prop::collection::vec(0..=3i64, r),
                dims(0..=2),
                (0..=2usize, any::<bool>()),
                select(INTS.to_vec()),
                any::<bool>(),
            )
        })
        .prop_flat_map(
            |(x, start_map, collapsed, raw, batch, (ivd, implicit), it, sorted)| {
                let r = x.dims.len();
                let sizes: Vec<i64> = (0..r)
                    .map(|i| {
                        if collapsed.contains(&(i as i64)) {
                            x.dims[i].min(1)
                        } else {
                            raw[i].min(x.dims[i])
                        }
                    })
                    .collect();
                let (idx, ivd) = index_dims(&batch, start_map.len(), ivd, implicit);
                let w = r - collapsed.len();
                let out_rank = batch.len() + w;
                let offset = subsequence((0..out_rank as i64).collect::<Vec<_>>(), w);
                (
                    Just((
                        x,
                        start_map,
                        collapsed,
                        sizes,
                        Arg::new(it, &idx),
                        ivd,
                        sorted,
                    )),
                    offset,
                )
            },
        )
        .prop_map(
            |((x, start_map, collapsed, sizes, idx, ivd, sorted), offset)| {
                Case::with(
                    Kind::Gather(sorted),
                    vec![x, idx],
                    vec![
                        offset,
                        collapsed,
                        start_map,
                        vec![ivd],
                        sizes,
                        vec![],
                        vec![],
                    ],
                )
            },
        );
    let scatter = (1..=2usize, arg(0..=3), ty(), any::<bool>())
        .prop_flat_map(|(n, x, t1, same)| {
            let r = x.dims.len();
            let types: Vec<ElementType> = [x.ty, if same { x.ty } else { t1 }][..n].to_vec();
            (
                Just((x, types)),
                subset(r),
                subset_any_order(r),
                dims(0..=2),
                (0..=2usize, any::<bool>()),
                select(INTS.to_vec()),
                prop::collection::vec(0..=3i64, r),
                (any::<bool>(), any::<bool>()),
                prop::collection::vec(any::<bool>(), 2),
            )
        })
        .prop_flat_map(
            |((x, types), inserted, to_operand, batch, (ivd, implicit), it, raw, flags, elem)| {
                let r = x.dims.len();
                let window_axes: Vec<usize> = (0..r)
                    .filter(|a| !inserted.contains(&(*a as i64)))
                    .collect();
                let w = window_axes.len();
                let update_rank = batch.len() + w;
                let uwd = subsequence((0..update_rank as i64).collect::<Vec<_>>(), w);
                let (idx, ivd) = index_dims(&batch, to_operand.len(), ivd, implicit);
                let sizes: Vec<i64> = window_axes
                    .iter()
                    .map(|a| raw[*a].min(x.dims[*a]))
                    .collect();
                (
                    Just((
                        x,
                        types,
                        inserted,
                        to_operand,
                        batch,
                        Arg::new(it, &idx),
                        ivd,
                        sizes,
                        flags,
                        elem,
                    )),
                    uwd,
                )
            },
        )
        .prop_map(
            |(
                (x, types, inserted, to_operand, batch, idx, ivd, sizes, (sorted, unique), elem),
                uwd,
            )| {
                let update_rank = batch.len() + sizes.len();
                let (mut b, mut s) = (batch.iter(), sizes.iter());
                let ud: Vec<i64> = (0..update_rank as i64)
                    .map(|i| *if uwd.contains(&i) { s.next() } else { b.next() }.expect("counted"))
                    .collect();
                let mut args: Vec<Arg> = types.iter().map(|t| Arg::new(*t, &x.dims)).collect();
                args.push(idx);
                args.extend(types.iter().map(|t| Arg::new(*t, &ud)));
                Case {
                    kind: Kind::Scatter(sorted, unique),
                    args,
                    ints: vec![uwd, inserted, to_operand, vec![ivd], vec![], vec![]],
                    bodies: vec![Body::combiner(&types, &elem)],
                }
            },
        );
    prop_oneof![gather, scatter].boxed()
}

/// Sort of one to three operands (any types) along any axis.
fn sort() -> BoxedStrategy<Case> {
    (
        1..=3usize,
        dims(0..=4),
        prop::collection::vec(ty(), 3),
        0..4i64,
        any::<bool>(),
    )
        .prop_map(|(n, d, ts, axis, stable)| {
            let axis = if d.is_empty() {
                0
            } else {
                axis % d.len() as i64
            };
            let params = ts[..n]
                .iter()
                .flat_map(|t| [Arg::new(*t, &[]), Arg::new(*t, &[])])
                .collect();
            Case {
                kind: Kind::Sort(stable),
                args: ts[..n].iter().map(|t| Arg::new(*t, &d)).collect(),
                ints: vec![vec![axis]],
                bodies: vec![Body {
                    params,
                    results: vec![(0, Pred)],
                }],
            }
        })
        .boxed()
}

/// and/or/xor/not, shifts, popcnt, count-leading-zeros.
fn bitwise() -> BoxedStrategy<Case> {
    prop_oneof![
        (select(BitwiseOp::ALL), arg(0..=4))
            .prop_map(|(b, x)| Case::op(Kind::Bitwise(b), vec![x.clone(), x])),
        (select(BitwiseUnary::ALL), arg(0..=4))
            .prop_map(|(u, x)| Case::op(Kind::BitwiseUnary(u), vec![x])),
    ]
    .boxed()
}

/// bitcast-convert (equal, narrower and wider types) and rng-bit-generator.
fn random() -> BoxedStrategy<Case> {
    let bitcast = (arg(0..=3), ty()).prop_map(|(mut x, to)| {
        let (from_w, to_w) = (x.ty.byte_size(), to.byte_size());
        if to_w > from_w {
            x.dims.push((to_w / from_w) as i64);
        }
        Case::op(Kind::BitcastConvert(to), vec![x])
    });
    let algorithms = vec![
        RngAlgorithm::Default,
        RngAlgorithm::ThreeFry,
        RngAlgorithm::Philox,
    ];
    let rng = (
        select(algorithms),
        prop_oneof![Just(2i64), Just(3i64)],
        prop_oneof![3 => select(UNSIGNED.to_vec()), 1 => ty()],
        dims(0..=4),
    )
        .prop_map(|(a, words, t, d)| {
            Case::with(Kind::Rng(a, t), vec![Arg::new(U64, &[words])], vec![d])
        });
    prop_oneof![bitcast, rng].boxed()
}

/// Map of one to three operands (any types) with a function of any result type.
fn map() -> BoxedStrategy<Case> {
    (
        1..=3usize,
        dims(0..=4),
        prop::collection::vec(ty(), 3),
        ty(),
        0..3usize,
    )
        .prop_map(|(n, d, ts, rt, src)| Case {
            kind: Kind::Map,
            args: ts[..n].iter().map(|t| Arg::new(*t, &d)).collect(),
            ints: vec![(0..d.len() as i64).collect()],
            bodies: vec![Body {
                params: ts[..n].iter().map(|t| Arg::new(*t, &[])).collect(),
                results: vec![(src, rt)],
            }],
        })
        .boxed()
}

// ---------------------------------------------------------------------------------
// Families.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Elementwise,
    ShapeOps,
    Slicing,
    Reduce,
    Windows,
    Linalg,
    Indexing,
    Sort,
    Bitwise,
    Random,
    Map,
}

impl Family {
    const ALL: [Family; 11] = [
        Family::Elementwise,
        Family::ShapeOps,
        Family::Slicing,
        Family::Reduce,
        Family::Windows,
        Family::Linalg,
        Family::Indexing,
        Family::Sort,
        Family::Bitwise,
        Family::Random,
        Family::Map,
    ];

    fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::ShapeOps => "shape_ops",
            Family::Slicing => "slicing",
            Family::Reduce => "reduce",
            Family::Windows => "windows",
            Family::Linalg => "linalg",
            Family::Indexing => "indexing",
            Family::Sort => "sort",
            Family::Bitwise => "bitwise",
            Family::Random => "random",
            Family::Map => "map",
        }
    }

    fn strategy(self) -> BoxedStrategy<Case> {
        with_perturbations(match self {
            Family::Elementwise => elementwise(),
            Family::ShapeOps => shape_ops(),
            Family::Slicing => slicing(),
            Family::Reduce => reduce(),
            Family::Windows => windows(),
            Family::Linalg => linalg(),
            Family::Indexing => indexing(),
            Family::Sort => sort(),
            Family::Bitwise => bitwise(),
            Family::Random => random(),
            Family::Map => map(),
        })
    }
}

/// Case `i` of `family` for `seed`: drawn by proptest from its own generator, so
/// that the parent and the child processes agree on it without sharing state.
fn case_at(family: Family, seed: u64, i: u64) -> Case {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&i.to_le_bytes());
    key[16] = family as u8;
    let rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &key);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    family
        .strategy()
        .new_tree(&mut runner)
        .expect("the strategies have no filters")
        .current()
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

/// Cases per family: `XLACLIENT_PROPTEST_CASES`, else [`DEFAULT_CASES`].
fn case_count() -> u64 {
    env_u64("XLACLIENT_PROPTEST_CASES").unwrap_or(DEFAULT_CASES)
}

/// The seed: `XLACLIENT_PROPTEST_SEED`, else a fixed one.
fn seed() -> u64 {
    env_u64("XLACLIENT_PROPTEST_SEED").unwrap_or(0x5eed_0001)
}

// ---------------------------------------------------------------------------------
// Building a case.

/// Parameter `n` holding `a` (an `f32` one converted for types without a host type).
fn param(b: &Builder, n: usize, a: &Arg) -> Op {
    if fuzz::HOST.contains(&a.ty) {
        b.parameter(n, a.shape(), &format!("p{n}"))
    } else {
        b.parameter(n, Shape::array(F32, &a.dims), &format!("p{n}"))
            .convert(a.ty)
    }
}

fn body(b: &Builder, body: &Body) -> xlaclient::Result<CompId> {
    let params: Vec<Shape> = body.params.iter().map(Arg::shape).collect();
    b.body_unchecked(&params, |_, p| {
        body.results
            .iter()
            .map(|(i, t)| {
                let x = &p[i % p.len()];
                if x.element_type().ok() == Some(*t) {
                    x.clone()
                } else {
                    x.convert(*t)
                }
            })
            .collect()
    })
}

/// A case built: the module (with the verifier when our rule accepted, without it
/// otherwise), and our rule's error if it rejected the instruction.
struct Built {
    module: xlaclient::Result<Computation>,
    rejected: Option<String>,
}

/// Builds `case`; a rejected instruction is declared `stand_in`.
fn build(case: &Case, stand_in: &Shape) -> Built {
    if let Kind::Numpy(op) = case.kind {
        // Through the typed method first (numpy broadcasting); the program
        // without our check is the raw op on the same operands.
        let b = Builder::new("numpy");
        let x = param(&b, 0, &case.args[0]);
        let y = param(&b, 1, &case.args[1]);
        let out = match op {
            BinaryOp::Add => x.add(&y),
            BinaryOp::Subtract => x.sub(&y),
            BinaryOp::Multiply => x.mul(&y),
            BinaryOp::Divide => x.div(&y),
            BinaryOp::Maximum => x.max(&y),
            BinaryOp::Minimum => x.min(&y),
            BinaryOp::Power => x.pow(&y),
            BinaryOp::Remainder => x.rem(&y),
            BinaryOp::Atan2 => x.atan2(&y),
            BinaryOp::Complex => x.complex(&y),
        };
        match b.build(&out) {
            Ok(m) => {
                return Built {
                    module: Ok(m),
                    rejected: None,
                };
            }
            Err(e) => {
                let raw = build_raw(case, stand_in);
                return Built {
                    module: raw.module,
                    rejected: Some(e.to_string()),
                };
            }
        }
    }
    build_raw(case, stand_in)
}

fn build_raw(case: &Case, stand_in: &Shape) -> Built {
    let b = Builder::new("case");
    let ops: Vec<Op> = case
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| param(&b, i, a))
        .collect();
    let comps: xlaclient::Result<Vec<CompId>> = case.bodies.iter().map(|x| body(&b, x)).collect();
    let comps = match comps {
        Ok(c) => c,
        Err(e) => {
            return Built {
                module: Err(e),
                rejected: None,
            };
        }
    };
    let (kind, target) = case.instruction(&comps);
    let refs: Vec<&Op> = ops.iter().collect();
    let (results, rejected) = b.emit_unchecked(kind, &refs, target, stand_in.clone());
    let root = match &results[..] {
        [r] => r.clone(),
        rs => b.tuple(&rs.iter().collect::<Vec<_>>()),
    };
    let module = if rejected.is_some() {
        b.build_unverified(&root)
    } else {
        b.build(&root)
    };
    Built {
        module,
        rejected: rejected.map(|e| e.to_string()),
    }
}

// ---------------------------------------------------------------------------------
// XLA's answers.

/// Where our rule refuses what XLA compiles, on purpose: the reason, given the case
/// and our rule's error (so that only that refusal is excused). Each was found by
/// this test or `tests/ops_types.rs`.
fn stricter_on_purpose(case: &Case, ours: &str) -> Option<&'static str> {
    let pred = case.args.first().is_some_and(|a| a.ty == Pred);
    let says = |s: &str| ours.contains(s);
    match case.kind {
        Kind::Binary(BinaryOp::Add | BinaryOp::Multiply)
        | Kind::Numpy(BinaryOp::Add | BinaryOp::Multiply)
            if pred && says("got pred") =>
        {
            Some("add/multiply on pred: XLA adds 1-bit integers, not a clear or/and")
        }
        Kind::Dot(..) | Kind::Conv
            if case.args.iter().any(|a| a.ty == Pred) && says("got pred") =>
        {
            Some("dot/convolution on pred: 1-bit integer arithmetic")
        }
        Kind::Dot(..) if says("is narrower than the operands") => Some(
            "a dot of integers with a narrower preferred element type: XLA's HLO verifier \
             takes any declared type (both plugins); XLA's builder (MaybeUpcast) and JAX \
             refuse it, as do we",
        ),
        Kind::Dot(..) if says("preferred element type pred") => {
            Some("a dot giving pred: 1-bit integer arithmetic")
        }
        Kind::Dot(..) | Kind::Conv if says("element types differ") => Some(
            "dot without a preferred element type, or convolution, of two element types: \
             XLA gives the declared result type (its preferred_element_type); ours asks \
             for one (dot) or one operand type (convolution), never promoting silently",
        ),
        Kind::Conv if says("group counts") && (case.int(12, 0) < 1 || case.int(12, 1) < 1) => Some(
            "a group count below 1: XLA reads it in a proto as unset (1), as \
                 check_proto does; in the IR it is a mistake",
        ),
        Kind::Scatter(..)
            if says("all inputs must have the same dimensions")
                || says("all updates must have the same dimensions") =>
        {
            Some(
                "a scatter of inputs or updates of different dims: XLA's verifier takes \
                 them (each input scattered on its own), but its CPU pipeline fails on \
                 some (\"Slice dim size 2 greater than dynamic slice dimension: 1\"); ours \
                 take one shape, as JAX's and XLA's docs do",
            )
        }
        Kind::Scatter(..) if says("rank-0 array") => Some(
            "a batch of several updates into a rank-0 array: XLA fails on it (an internal \
             error) unless the combiner ignores the updates, when it drops the scatter",
        ),
        Kind::Map
            if says("all operands must have the same dimensions")
                && case.args.iter().any(|a| a.dims.is_empty()) =>
        {
            Some(
                "map of a scalar beside arrays: XLA's check skips scalars, then its map \
                 inliner makes an implicit broadcast it refuses, unless the body ignores \
                 the scalar",
            )
        }
        Kind::Clamp if says("scalar bound") => Some(
            "clamp with scalar bounds: XLA's rule takes them and the 0.81 plugin compiles \
             them, the 0.115 one fails (\"xtile.extract\"); ours want the operand's \
             dims, and `clamp` broadcasts (plugins differ)",
        ),
        Kind::Broadcast if says("twice") => Some(
            "broadcast dimensions naming an output axis twice: XLA takes a diagonal (each \
             operand axis indexed by the output's), JAX refuses duplicates; so do we",
        ),
        Kind::Select
            if says("same dimensions")
                && case.args[0].dims.is_empty()
                && case.args[1..].iter().all(|a| a.dims == case.args[1].dims) =>
        {
            Some(
                "select by a scalar predicate: the 0.81 plugin's XLA still takes it, the \
                 0.115 one refuses it, as do we (plugins differ)",
            )
        }
        Kind::Map if says("map dimensions") => Some(
            "map dimensions other than every axis in order: XLA ignores the attribute \
             (its verifier assumes every axis), so the module would not do what it says",
        ),
        Kind::Sort(_) | Kind::SelectAndScatter | Kind::Scatter(..)
            if says("comparator must map")
                || says("select must map")
                || says("scatter must map")
                || says("update computation must map") =>
        {
            Some(
                "a sort comparator, select-and-scatter or scatter body taking another \
                 float type than the operands: XLA checks these bodies ignoring float \
                 precision (reduce and map bodies exactly); ours are all exact",
            )
        }
        Kind::DynamicSlice | Kind::DynamicUpdateSlice
            if says("start indices")
                && case.args.len()
                    == if matches!(case.kind, Kind::DynamicSlice) {
                        2
                    } else {
                        3
                    }
                && case.args.last().is_some_and(|i| i.dims.len() == 1) =>
        {
            Some(
                "start indices as one vector: XLA still takes its deprecated form; ours \
                 are one scalar per axis",
            )
        }
        Kind::Sort(_) if says("is negative") => Some(
            "a negative sort dimension: XLA's verifier checks only that it is below the \
             rank; what a negative one means is not documented",
        ),
        _ => None,
    }
}

/// For an element-wise case with an empty operand: the same case with every
/// dimension 0 made 1. XLA replaces an op on empty arrays by an empty constant
/// before it checks some element types (a shift of `f32[0]` compiles, of `f32[1]`
/// not), so an acceptance on empty arrays is checked again on non-empty ones.
fn non_empty(case: &Case) -> Option<Case> {
    let elementwise = matches!(
        case.kind,
        Kind::Unary(_)
            | Kind::Binary(_)
            | Kind::Numpy(_)
            | Kind::Compare(_)
            | Kind::Select
            | Kind::Clamp
            | Kind::Bitwise(_)
            | Kind::BitwiseUnary(_)
    );
    if !elementwise || !case.args.iter().any(|a| a.dims.contains(&0)) {
        return None;
    }
    let mut c = case.clone();
    for a in &mut c.args {
        a.dims.iter_mut().filter(|d| **d == 0).for_each(|d| *d = 1);
    }
    Some(c)
}

/// A program XLA aborts the process on, which our rule must keep rejecting.
struct KnownAbort {
    what: &'static str,
    /// The cases it covers (not compiled again).
    matches: fn(&Case) -> bool,
    /// A program that aborts XLA (the instruction our rule rejects, emitted anyway).
    example: fn() -> Built,
}

/// A convolution, reduce-window or select-and-scatter with an axis whose window
/// cuts more than the (dilated, padded) input has: a negative size.
fn window_cuts(c: &Case) -> bool {
    let Some(x) = c.args.first() else {
        return false;
    };
    let (window, axes): (Vec<WindowDim>, Vec<i64>) = match c.instruction(&[]).0 {
        OpKind::Convolution(a) => (a.window, a.dims.input_spatial),
        OpKind::SelectAndScatter { window, .. } | OpKind::ReduceWindow { window, .. } => {
            (window.to_vec(), (0..x.dims.len() as i64).collect())
        }
        _ => return false,
    };
    window.iter().zip(&axes).any(|(w, axis)| {
        let n = usize::try_from(*axis).ok().and_then(|i| x.dims.get(i));
        n.is_some_and(|n| w.output_size(*n).is_err_and(|e| e.contains("cuts more")))
    })
}

/// The programs XLA aborts the process on (a `Check failed`) rather than returning
/// an error; our rules reject them, and cases they cover are not compiled.
const KNOWN_ABORTS: &[KnownAbort] = &[
    KnownAbort {
        what: "dynamic-update-slice with an empty update, then a reshape: XLA's simplifier \
               aborts (`Check failed: ... StaticExtentProduct(shape) == ...`; fuzz seed 503852; \
               alone such an update compiles)",
        matches: |c| {
            matches!(c.kind, Kind::DynamicUpdateSlice)
                && c.args.get(1).is_some_and(|u| u.dims.contains(&0))
        },
        example: || {
            let b = Builder::new("dus_empty");
            let x = b
                .parameter(0, Shape::array(F32, &[2, 2]), "x")
                .broadcast_in_dim(&[2, 1, 2], &[0, 2]);
            let update = b.constant_array::<f32>(&[], &[2, 0, 2]);
            let at = [b.constant(-1i32), b.constant(-1i32), b.constant(2i32)];
            let (r, rejected) = b.emit_unchecked(
                OpKind::DynamicUpdateSlice,
                &[&x, &update, &at[0], &at[1], &at[2]],
                None,
                Shape::array(F32, &[2, 1, 2]),
            );
            Built {
                module: b.build_unverified(&r[0].reshape(&[2, 2])),
                rejected: rejected.map(|e| e.to_string()),
            }
        },
    },
    KnownAbort {
        what: "select-and-scatter of rank 0: `Check failed: param_instructions_[param_no] == nullptr` (fuzzer)",
        matches: |c| {
            matches!(c.kind, Kind::SelectAndScatter)
                && c.args.first().is_some_and(|x| x.dims.is_empty())
        },
        example: || {
            let s = Arg::new(F32, &[]);
            let case = Case {
                kind: Kind::SelectAndScatter,
                args: vec![s.clone(), s.clone(), s.clone()],
                ints: vec![vec![]; 6],
                bodies: vec![
                    Body {
                        params: vec![s.clone(), s.clone()],
                        results: vec![(0, Pred)],
                    },
                    Body {
                        params: vec![s.clone(), s],
                        results: vec![(1, F32)],
                    },
                ],
            };
            build(&case, &case.stand_in())
        },
    },
    KnownAbort {
        what: "sort of several operands along a dimension at or past their rank (rank 0 \
               too): `Check failed: buffer != nullptr` (shape.h; found by this test; one \
               operand gets an error)",
        matches: |c| {
            matches!(c.kind, Kind::Sort(_))
                && c.args.len() > 1
                && c.int(0, 0) >= c.args[0].dims.len() as i64
        },
        example: || {
            let case = Case {
                kind: Kind::Sort(true),
                args: vec![Arg::new(S8, &[]), Arg::new(U32, &[])],
                ints: vec![vec![0]],
                bodies: vec![Body {
                    params: [vec![Arg::new(S8, &[]); 2], vec![Arg::new(U32, &[]); 2]].concat(),
                    results: vec![(0, Pred)],
                }],
            };
            build(&case, &case.stand_in())
        },
    },
    KnownAbort {
        what: "shift-left/right of floats: the 0.81 plugin's LLVM emitter crashes (a \
               segfault; the 0.115 plugin refuses them, but compiles them on empty arrays)",
        matches: |c| {
            matches!(
                c.kind,
                Kind::Bitwise(
                    BitwiseOp::ShiftLeft
                        | BitwiseOp::ShiftRightArithmetic
                        | BitwiseOp::ShiftRightLogical
                )
            ) && c.args.iter().any(|a| a.ty.is_float())
        },
        example: || {
            let x = Arg::new(F32, &[3]);
            let case = Case::op(Kind::Bitwise(BitwiseOp::ShiftLeft), vec![x.clone(), x]);
            build(&case, &case.stand_in())
        },
    },
    KnownAbort {
        what: "bitcast-convert between pred and another type: the 0.81 plugin takes pred \
               as a bit and segfaults; the 0.115 one compiles it, pred as a byte (JAX \
               refuses it, as do we; plugins differ)",
        matches: |c| match c.kind {
            Kind::BitcastConvert(to) => c
                .args
                .first()
                .is_some_and(|x| (x.ty == Pred) != (to == Pred)),
            _ => false,
        },
        example: || {
            // Declared as the 0.81 plugin infers it (a bit per pred), on which it
            // crashes; the 0.115 one infers pred[2,1,4] (a byte per pred).
            let case = Case::op(Kind::BitcastConvert(Pred), vec![Arg::new(S32, &[2, 1])]);
            build(&case, &Shape::array(Pred, &[2, 1, 32]))
        },
    },
    KnownAbort {
        what: "gather collapsing a slice of size 0: XLA's simplifier aborts (`Check \
               failed: ... StaticExtentProduct`; the result would claim elements of an \
               empty slice; found by this test)",
        matches: |c| {
            matches!(c.kind, Kind::Gather(_))
                && c.int_list(1)
                    .iter()
                    .any(|a| usize::try_from(*a).is_ok_and(|a| c.int_list(4).get(a) == Some(&0)))
        },
        example: || {
            let case = Case::with(
                Kind::Gather(true),
                vec![Arg::new(F32, &[2, 1, 1]), Arg::new(U8, &[0])],
                vec![vec![0, 1], vec![1], vec![], vec![0], vec![2, 0, 1]],
            );
            build(&case, &Shape::array(F32, &[2, 1]))
        },
    },
    KnownAbort {
        what: "convolution whose window cuts more than the padded input: XLA aborts in \
               window_util (found by this test)",
        matches: |c| matches!(c.kind, Kind::Conv) && window_cuts(c),
        example: || {
            let case = Case::with(
                Kind::Conv,
                vec![Arg::new(F32, &[1, 1, 0]), Arg::new(F32, &[1, 1, 1])],
                vec![
                    vec![0, 1],
                    vec![2],
                    vec![0, 1],
                    vec![2],
                    vec![0, 1],
                    vec![2],
                    vec![1],
                    vec![1],
                    vec![0],
                    vec![-1],
                    vec![1],
                    vec![1],
                    vec![1, 1],
                ],
            );
            build(&case, &case.stand_in())
        },
    },
    KnownAbort {
        what: "select-and-scatter whose window cuts more than the padded operand: XLA \
               aborts in window_util (found by this test)",
        matches: |c| matches!(c.kind, Kind::SelectAndScatter) && window_cuts(c),
        example: || {
            let (x, s) = (Arg::new(S64, &[0]), Arg::new(S64, &[]));
            let case = Case {
                kind: Kind::SelectAndScatter,
                args: vec![x.clone(), x, s.clone()],
                ints: vec![vec![1], vec![1], vec![0], vec![-1], vec![1], vec![2]],
                bodies: vec![
                    Body {
                        params: vec![s.clone(), s.clone()],
                        results: vec![(0, Pred)],
                    },
                    Body {
                        params: vec![s.clone(), s],
                        results: vec![(1, S64)],
                    },
                ],
            };
            build(&case, &case.stand_in())
        },
    },
    KnownAbort {
        what: "reduce-window whose window cuts more than the padded operand: XLA aborts \
               in window_util (found by this test)",
        matches: |c| matches!(c.kind, Kind::ReduceWindow) && window_cuts(c),
        example: || {
            let case = Case {
                kind: Kind::ReduceWindow,
                args: vec![Arg::new(F32, &[0]), Arg::new(F32, &[])],
                ints: vec![vec![3], vec![1], vec![0], vec![-1], vec![1], vec![1]],
                bodies: vec![Body::combiner(&[F32], &[false])],
            };
            build(&case, &case.stand_in())
        },
    },
];

/// The shape XLA's verifier says it infers ("Expected instruction to have shape
/// equal to S, actual shape is T:\n<instruction>"), with the instruction's text.
fn xla_inferred(message: &str) -> Option<(Shape, String)> {
    const KEY: &str = "Expected instruction to have shape equal to ";
    let at = message.find(KEY)? + KEY.len();
    let (s, rest) = parse_shape(&message[at..])?;
    let instr = rest.split_once(":\n").map_or("", |x| x.1);
    Some((s, instr.lines().next().unwrap_or("").to_string()))
}

/// Parses an XLA shape (`f32[2,3]{1,0}`, `pred[]`, `(s32[], u8[4])`); returns it and
/// the rest of the text.
fn parse_shape(s: &str) -> Option<(Shape, &str)> {
    let s = s.trim_start();
    if let Some(mut r) = s.strip_prefix('(') {
        let mut elems = Vec::new();
        loop {
            r = r.trim_start();
            if let Some(rest) = r.strip_prefix(')') {
                return Some((Shape::Tuple(elems), rest));
            }
            let (e, rest) = parse_shape(r)?;
            elems.push(e);
            r = rest.trim_start();
            r = r.strip_prefix(',').unwrap_or(r);
        }
    }
    let open = s.find('[')?;
    let ty = ElementType::ALL
        .into_iter()
        .find(|t| t.hlo_name() == &s[..open])?;
    let close = open + s[open..].find(']')?;
    let inner = &s[open + 1..close];
    let dims: Vec<i64> = if inner.is_empty() {
        vec![]
    } else {
        inner
            .split(',')
            .map(|d| d.trim().parse().ok())
            .collect::<Option<_>>()?
    };
    let mut rest = &s[close + 1..];
    if rest.starts_with('{') {
        rest = &rest[rest.find('}')? + 1..];
    }
    Some((Shape::array(ty, &dims), rest))
}

fn first_line(e: &dyn std::error::Error) -> String {
    let s = e.to_string();
    s.lines().next().unwrap_or("").chars().take(300).collect()
}

/// A zero-filled buffer of `shape`.
fn zeros(client: &Client, shape: &Shape) -> xlaclient::Result<Buffer> {
    let ty = shape.element_type().expect("parameters are arrays");
    let n = shape.element_count().expect("small") as usize;
    with_native!(ty, T => {
        let v: Vec<T> = vec![<T as NativeType>::from_f64(0.0); n];
        Ok(client.buffer_from_host(&v, shape.dims())?)
    })
}

/// Compiles and runs an accepted module; its outputs must have our types and dims.
fn run_accepted(client: &Client, case: &Case, m: &Computation) -> Outcome {
    let exe = match client.compile(m) {
        Ok(e) => e,
        Err(e) => {
            return (
                "fail",
                format!(
                    "our rule accepts ({}), XLA rejects: {}",
                    m.result_shape(),
                    first_line(&e)
                ),
            );
        }
    };
    let args: xlaclient::Result<Vec<Buffer>> = m
        .parameter_shapes()
        .iter()
        .map(|s| zeros(client, s))
        .collect();
    let args = match args {
        Ok(a) => a,
        Err(e) => return ("fail", format!("upload: {e}")),
    };
    let refs: Vec<&Buffer> = args.iter().collect();
    let outs = match exe.execute(&refs) {
        Ok(o) => o,
        Err(e) => return ("fail", format!("execute: {}", first_line(&e))),
    };
    let want = match m.result_shape() {
        Shape::Tuple(e) => e,
        s => vec![s],
    };
    let got: Vec<String> = outs
        .iter()
        .map(|b| match (b.element_type(), b.dims()) {
            (Ok(t), Ok(d)) => Shape::array(t, &d).to_string(),
            (t, d) => format!("{t:?} {d:?}"),
        })
        .collect();
    let want_s: Vec<String> = want.iter().map(Shape::to_string).collect();
    if got != want_s {
        return (
            "fail",
            format!("our rule says {want_s:?}, XLA's outputs are {got:?} ({case:?})"),
        );
    }
    if let Some(e) = outs.iter().find_map(|b| b.ready().err()) {
        return ("fail", format!("execute: {}", first_line(&e)));
    }
    ("accepted", m.result_shape().to_string())
}

/// XLA's answer to a case our rule rejects.
enum Answer {
    /// XLA refuses it: its error.
    Refuses(String),
    /// XLA compiles it, declared this shape.
    Accepts(Shape),
    /// This test could not ask (a failure).
    Broken(String),
}

/// Compiles `case` emitted without our check: first declared our guess; if XLA's
/// verifier names the shape it infers for the instruction, again declared that.
fn ask_xla(client: &Client, case: &Case, hlo: &Path) -> Answer {
    let mut declared = case.stand_in();
    for attempt in 0..2 {
        let m = match build(case, &declared).module {
            Ok(m) => m,
            Err(e) => return Answer::Broken(format!("building the unchecked module: {e}")),
        };
        let _ = std::fs::write(hlo, format!("{case:?}\n{}", m.to_hlo_text()));
        let e = match client.compile(&m) {
            Ok(_) => return Answer::Accepts(declared),
            Err(e) => e,
        };
        let Some((s, instr)) = xla_inferred(&e.to_string()) else {
            return Answer::Refuses(first_line(&e));
        };
        if !instr.contains(&format!(" {}(", case.opcode())) {
            // About an instruction one of XLA's passes made (rng-bit-generator's
            // expansion, say): an error all the same.
            return Answer::Refuses(format!("(after a pass: {instr}) {}", first_line(&e)));
        }
        if attempt == 1 {
            return Answer::Refuses(format!("(XLA infers {declared}) {}", first_line(&e)));
        }
        // XLA's shape inference accepted the instruction, not our guess.
        declared = s;
    }
    unreachable!("two attempts")
}

/// Judges one case against XLA: compiles (and runs) it in this process.
fn judge(client: &Client, case: &Case, hlo: &Path) -> Outcome {
    let built = build(case, &case.stand_in());
    let m = match built.module {
        Ok(m) => m,
        Err(e) => {
            let what = if built.rejected.is_some() {
                "building the unchecked module"
            } else {
                "the verifier rejects what the rule accepted"
            };
            return ("fail", format!("{what}: {e}"));
        }
    };
    let _ = std::fs::write(hlo, format!("{case:?}\n{}", m.to_hlo_text()));
    let Some(ours) = built.rejected else {
        return run_accepted(client, case, &m);
    };
    if let Some(k) = KNOWN_ABORTS.iter().find(|k| (k.matches)(case)) {
        return ("known-abort", k.what.to_string());
    }
    match ask_xla(client, case, hlo) {
        Answer::Refuses(e) => ("rejected", e),
        Answer::Broken(e) => ("fail", e),
        Answer::Accepts(shape) => {
            if let Some(why) = stricter_on_purpose(case, &ours) {
                return ("stricter", why.to_string());
            }
            if let Some(c) = non_empty(case) {
                if let Answer::Refuses(e) = ask_xla(client, &c, hlo) {
                    return (
                        "stricter",
                        format!(
                            "XLA compiles it only for empty arrays (it removes the op first); \
                             on non-empty ones: {e}"
                        ),
                    );
                }
            }
            (
                "fail",
                format!("our rule rejects ({ours}); XLA accepts it, inferring {shape}"),
            )
        }
    }
}

/// Child work: kind `<family>:<seed>` (case `i` of that family), `known` (the
/// example of known abort `i`, compiled regardless) or `found` (regression case `i`).
fn work(kind: &str, i: u64, client: &Client, hlo: &Path) -> Outcome {
    if kind == "known" {
        let built = (KNOWN_ABORTS[i as usize].example)();
        let m = built.module.expect("an unchecked module");
        let _ = std::fs::write(hlo, m.to_hlo_text());
        return match client.compile(&m) {
            Ok(_) => ("fail", "XLA compiles it".into()),
            Err(e) => ("rejected", first_line(&e)),
        };
    }
    if kind == "found" {
        return judge(client, &(FOUND[i as usize].1)(), hlo);
    }
    let (name, seed) = kind.split_once(':').expect("family:seed");
    let family = Family::ALL
        .into_iter()
        .find(|f| f.name() == name)
        .expect("a family");
    let case = case_at(family, seed.parse().expect("seed"), i);
    judge(client, &case, hlo)
}

/// The disagreements this test found, each kept as a regular case: what XLA said,
/// the case, and whether our rule accepts it now. Each is judged again like a
/// generated case (`found_disagreements_stay_fixed`).
#[allow(clippy::type_complexity)]
const FOUND: &[(&str, fn() -> Case, bool)] = &[
    (
        "reduce over axis -1: ours accepted (negative axes resolved), XLA refused \
         (\"Reducing out-of-bounds dimension -1\")",
        || Case {
            kind: Kind::Reduce,
            args: vec![Arg::new(S8, &[2, 2]), Arg::new(S8, &[])],
            ints: vec![vec![-1]],
            bodies: vec![Body::combiner(&[S8], &[false])],
        },
        false,
    ),
    (
        "reverse over axis -1: ours accepted, XLA refused (\"One of the reverse \
         dimensions (-1) is out-of-bounds\")",
        || Case::with(Kind::Reverse, vec![Arg::new(S16, &[1])], vec![vec![-1]]),
        false,
    ),
    (
        "map of f16 and f32 operands: ours accepted, XLA refused (\"Seen floating point \
         types of different precisions\")",
        || Case {
            kind: Kind::Map,
            args: vec![Arg::new(F16, &[2]), Arg::new(F32, &[2])],
            ints: vec![vec![0]],
            bodies: vec![Body {
                params: vec![Arg::new(F16, &[]), Arg::new(F32, &[])],
                results: vec![(0, S16)],
            }],
        },
        false,
    ),
    (
        "scatter of f16 and f32 inputs: ours accepted, XLA refused (\"Seen floating \
         point types of different precisions\")",
        || Case {
            kind: Kind::Scatter(false, false),
            args: vec![
                Arg::new(F16, &[2]),
                Arg::new(F32, &[2]),
                Arg::new(S32, &[1, 1]),
                Arg::new(F16, &[1]),
                Arg::new(F32, &[1]),
            ],
            ints: vec![vec![], vec![0], vec![0], vec![1]],
            bodies: vec![Body::combiner(&[F16, F32], &[true])],
        },
        false,
    ),
    (
        "scatter whose two updates differ in dims: ours accepted, XLA refused (\"Slice \
         dim size 2 greater than dynamic slice dimension: 1\")",
        || Case {
            kind: Kind::Scatter(false, false),
            args: vec![
                Arg::new(S32, &[2]),
                Arg::new(F16, &[2]),
                Arg::new(U64, &[0]),
                Arg::new(S32, &[2]),
                Arg::new(F16, &[1]),
            ],
            ints: vec![vec![0], vec![], vec![], vec![0]],
            bodies: vec![Body::combiner(&[S32, F16], &[false])],
        },
        false,
    ),
    (
        "scatter into a rank-0 array with a 3x3 batch of updates: ours accepted, XLA \
         failed (RET_CHECK in hlo_computation.cc: \"call\" (s8[]) vs the update s8[3,3])",
        || Case {
            kind: Kind::Scatter(true, true),
            args: vec![
                Arg::new(S8, &[]),
                Arg::new(U32, &[0, 3, 3]),
                Arg::new(S8, &[3, 3]),
            ],
            ints: vec![vec![], vec![], vec![], vec![0]],
            bodies: vec![Body::combiner(&[S8], &[true])],
        },
        false,
    ),
    (
        "gather collapsing a slice of size 0 (operand f32[2,1,1], slice [2,0,1]): ours \
         accepted f32[2,1], XLA aborted (a known abort now)",
        || {
            Case::with(
                Kind::Gather(true),
                vec![Arg::new(F32, &[2, 1, 1]), Arg::new(U8, &[0])],
                vec![vec![0, 1], vec![1], vec![], vec![0], vec![2, 0, 1]],
            )
        },
        false,
    ),
    (
        "clamp of s32[2,1] between scalar bounds: ours accepted (XLA's rule takes \
         scalar bounds), the 0.115 plugin failed (\"'xtile.extract' op full tile shape \
         size: 2 does not match rank of buffer: 0\")",
        || {
            let (s, x) = (Arg::new(S32, &[]), Arg::new(S32, &[2, 1]));
            Case::op(Kind::Clamp, vec![s.clone(), x, s])
        },
        false,
    ),
    (
        "bitcast-convert of pred to pred: ours refused (no pred bitcasts), XLA compiles it",
        || Case::op(Kind::BitcastConvert(Pred), vec![Arg::new(Pred, &[2, 3])]),
        true,
    ),
];

/// The entry point of child processes (does nothing in a normal run).
#[test]
fn rules_child() {
    fuzz::child_main(&work);
}

fn run(kind: &str, n: u64) -> fuzz::Report {
    fuzz::run_children(
        0..n,
        &RunOptions {
            kind,
            child_args: &["rules_child", "--exact", "--nocapture", "--test-threads=1"],
            // One child per family: the test harness runs two families at a time.
            jobs: 1,
            chunk: n.max(1),
            hang: Duration::from_secs(120),
            keep_cases: true,
            verbose: false,
        },
    )
}

/// Runs `family`'s cases against XLA, prints the tally and asserts no
/// disagreement, and a fair share of both accepted and rejected cases.
fn check_family(family: Family) {
    let (n, seed) = (case_count(), seed());
    let t0 = Instant::now();
    let r = run(&format!("{}:{seed}", family.name()), n);
    let count = |code: &str| r.cases.iter().filter(|c| c.1 == code).count() as u64;
    let (accepted, rejected, known, stricter) = (
        count("accepted"),
        count("rejected"),
        count("known-abort"),
        count("stricter"),
    );
    let mut failures: Vec<String> = Vec::new();
    let verbose = std::env::var_os("XLACLIENT_PROPTEST_VERBOSE").is_some();
    for (i, code, detail) in &r.cases {
        if verbose {
            eprintln!("{i} {code}: {detail}\n    {:?}", case_at(family, seed, *i));
        }
        if code == "fail" || code == "crash" {
            let case = case_at(family, seed, *i);
            let ours = build(&case, &case.stand_in()).rejected;
            let what = if code == "crash" {
                match &ours {
                    Some(e) => format!(
                        "XLA aborts on a case our rule rejects ({e}): record it in KNOWN_ABORTS: {detail}"
                    ),
                    None => format!("our rule accepts, XLA aborts: {detail}"),
                }
            } else {
                detail.clone()
            };
            failures.push(format!("seed {seed} case {i}: {what}\n    {case:?}"));
        }
    }
    // Past the test harness's capture, so that every run shows the split.
    let _ = writeln!(
        std::io::stderr(),
        "{}: {n} cases in {:.1} s: {accepted} accepted by our rule (compiled, outputs of our \
         types and dims), {} rejected ({rejected} refused by XLA too, {known} known aborts \
         not compiled, {stricter} stricter on purpose)",
        family.name(),
        t0.elapsed().as_secs_f64(),
        rejected + known + stricter,
    );
    let mut reasons: std::collections::BTreeMap<String, u64> = Default::default();
    for (_, code, detail) in &r.cases {
        if code == "rejected" {
            let key: String = detail.chars().take(110).collect();
            *reasons.entry(key).or_default() += 1;
        }
    }
    let mut top: Vec<(String, u64)> = reasons.into_iter().collect();
    top.sort_by_key(|(_, k)| std::cmp::Reverse(*k));
    for (why, k) in top.iter().take(4) {
        eprintln!("    XLA refused {k}: {why}");
    }
    assert!(
        failures.is_empty(),
        "{}: {} disagreements with XLA:\n{}",
        family.name(),
        failures.len(),
        failures.join("\n")
    );
    let share = (n / 8).max(1);
    assert!(
        accepted >= share && rejected + known + stricter >= share,
        "{}: too few accepted ({accepted}) or rejected ({}) cases of {n} for the property to mean much",
        family.name(),
        rejected + known + stricter
    );
}

#[test]
fn elementwise_rules_match_xla() {
    check_family(Family::Elementwise);
}

#[test]
fn broadcast_reshape_transpose_convert_rules_match_xla() {
    check_family(Family::ShapeOps);
}

#[test]
fn slicing_rules_match_xla() {
    check_family(Family::Slicing);
}

#[test]
fn reduce_rules_match_xla() {
    check_family(Family::Reduce);
}

#[test]
fn reduce_window_and_select_and_scatter_rules_match_xla() {
    check_family(Family::Windows);
}

#[test]
fn dot_conv_cholesky_triangular_solve_rules_match_xla() {
    check_family(Family::Linalg);
}

#[test]
fn gather_and_scatter_rules_match_xla() {
    check_family(Family::Indexing);
}

#[test]
fn sort_rules_match_xla() {
    check_family(Family::Sort);
}

#[test]
fn bitwise_rules_match_xla() {
    check_family(Family::Bitwise);
}

#[test]
fn bitcast_convert_and_rng_bit_generator_rules_match_xla() {
    check_family(Family::Random);
}

#[test]
fn map_rules_match_xla() {
    check_family(Family::Map);
}

#[test]
fn known_aborts_are_rejected_by_our_rules() {
    // Our rule rejects each recorded example; XLA, given it anyway, aborts (on the
    // plugin the entry names, at least) or returns an error, never compiles it.
    for k in KNOWN_ABORTS {
        let built = (k.example)();
        assert!(built.rejected.is_some(), "{}: our rule accepts it", k.what);
    }
    let r = run("known", KNOWN_ABORTS.len() as u64);
    assert_eq!(r.cases.len(), KNOWN_ABORTS.len(), "{}", r.summary());
    for (i, code, detail) in &r.cases {
        let k = &KNOWN_ABORTS[*i as usize];
        let answer = match code.as_str() {
            "crash" => "aborts",
            "rejected" => "returns an error",
            _ => panic!("{}: XLA {detail}", k.what),
        };
        eprintln!("{}: XLA {answer}", k.what);
    }
}

#[test]
fn found_disagreements_stay_fixed() {
    for (what, case, accepts) in FOUND {
        let built = build(&case(), &case().stand_in());
        assert_eq!(
            built.rejected.is_none(),
            *accepts,
            "{what}: {:?}",
            built.rejected
        );
    }
    let r = run("found", FOUND.len() as u64);
    let bad: Vec<String> = r
        .cases
        .iter()
        .filter(|c| c.1 == "fail" || c.1 == "crash")
        .map(|(i, code, detail)| format!("{} ({code}): {detail}", FOUND[*i as usize].0))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert_eq!(r.cases.len(), FOUND.len(), "{}", r.summary());
}

#[test]
fn the_escape_hatch_reaches_xla() {
    // `add` on pred: our rule rejects it, XLA compiles it (stricter on purpose).
    // Declared pred[3] instead of pred[2], XLA's verifier names its own shape; the
    // retry with that shape compiles. This proves that rejected instructions reach
    // XLA as emitted and that the verifier's answer is read right.
    let case = Case::op(Kind::Binary(BinaryOp::Add), vec![Arg::new(Pred, &[2]); 2]);
    let wrong = build(&case, &Shape::array(Pred, &[3]));
    assert!(wrong.rejected.is_some());
    let e = common::client()
        .compile(wrong.module.expect("unchecked module"))
        .map(|_| ())
        .expect_err("declared pred[3]");
    let (s, instr) = xla_inferred(&e.to_string()).unwrap_or_else(|| panic!("{e}"));
    assert_eq!(s, Shape::array(Pred, &[2]));
    assert!(instr.contains(" add("), "{instr}");
    let right = build(&case, &s);
    common::client()
        .compile(right.module.expect("unchecked module"))
        .expect("XLA compiles add on pred");
    assert_eq!(
        parse_shape("(f32[2,3]{1,0}, pred[], s8[0]{0})").map(|x| x.0),
        Some(Shape::Tuple(vec![
            Shape::array(F32, &[2, 3]),
            Shape::scalar(Pred),
            Shape::array(S8, &[0])
        ]))
    );
}

#[test]
fn cases_are_reproducible() {
    // The parent and the children draw the same case for the same index.
    for f in Family::ALL {
        let a = format!("{:?}", case_at(f, 7, 3));
        assert_eq!(a, format!("{:?}", case_at(f, 7, 3)));
        assert_ne!(a, format!("{:?}", case_at(f, 7, 4)));
    }
}
