//! Reductions: XLA's `reduce` with a body built from a Rust closure, and the usual
//! sums, maxima, minima and means on top.
use super::elementwise::{BinaryOp, Scalar};
use super::{array_of, check_axes, check_one_float_type, resolve_axes};
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::panic::Location;

// ---------------------------------------------------------------------------------
// `reduce` (and `reduce_sum`, `reduce_max`, `reduce_min`, `mean` on it)

/// Variadic `reduce` rule. Operands: `n` input arrays of equal dimensions, then `n`
/// scalar initial values of their element types; `axes` in range and distinct. The
/// body (when given: its parameter shapes and result) takes `2n` scalars
/// (accumulators, then elements) and returns the `n` new accumulators: a scalar when
/// `n == 1`, else a tuple of scalars. The result drops the reduced axes: one array,
/// or a tuple of `n` arrays.
pub fn infer_reduce(
    operands: &[&Shape],
    axes: &[i64],
    body: Option<&(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    let err = |k: ShapeErrorKind, r: String| ShapeError::new("reduce", operands, k, r);
    if operands.is_empty() || operands.len() % 2 != 0 {
        return Err(err(
            ShapeErrorKind::Arity,
            format!(
                "takes n inputs and n initial values, got {} operands",
                operands.len()
            ),
        ));
    }
    let n = operands.len() / 2;
    let (inputs, inits) = operands.split_at(n);
    let (_, dims) = array_of("reduce", inputs[0])?;
    let mut types = Vec::with_capacity(n);
    for (x, init) in inputs.iter().zip(inits) {
        let (ty, d) = array_of("reduce", x)?;
        if d != dims {
            return Err(err(
                ShapeErrorKind::Dimension,
                format!(
                    "all inputs must have the same dimensions; {x} differs from {}",
                    inputs[0]
                ),
            ));
        }
        let (it, id) = array_of("reduce", init)?;
        if !id.is_empty() || it != ty {
            return Err(err(
                ShapeErrorKind::ElementType,
                format!("the initial value must be a {ty} scalar, got {init}"),
            ));
        }
        types.push(ty);
    }
    // A variadic reduce may mix an integer and a float, not f16 and f32 (fuzz
    // seeds 5362, 8634).
    check_one_float_type("reduce", operands)?;
    let axes = check_axes("reduce", inputs[0], axes)?;
    let kept: Vec<i64> = (0..dims.len())
        .filter(|i| !axes.contains(i))
        .map(|i| dims[i])
        .collect();
    if let Some((params, result)) = body {
        let scalars: Vec<Shape> = types.iter().map(|t| Shape::scalar(*t)).collect();
        let want_params: Vec<Shape> = scalars.iter().chain(&scalars).cloned().collect();
        let want_result = if n == 1 {
            scalars[0].clone()
        } else {
            Shape::Tuple(scalars)
        };
        if *params != want_params || *result != want_result {
            let shown: Vec<String> = params.iter().map(Shape::to_string).collect();
            return Err(err(
                ShapeErrorKind::Body,
                format!(
                    "the body must map ({}) to {want_result}; it maps ({}) to {result}",
                    want_params
                        .iter()
                        .map(Shape::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    shown.join(", ")
                ),
            ));
        }
    }
    let outs: Vec<Shape> = types.iter().map(|t| Shape::array(*t, &kept)).collect();
    Ok(if n == 1 {
        outs.into_iter().next().expect("n == 1")
    } else {
        Shape::Tuple(outs)
    })
}

pub(crate) fn shape_reduce(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Reduce { axes, body } = kind else {
        return Err(super::table::not_for("reduce", kind));
    };
    infer_reduce(cx.operands, axes, cx.signature(*body).as_ref())
}

pub(crate) fn lower_reduce(kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Reduce { axes, body } = kind {
        p.dimensions = axes.to_vec();
        p.called_computation_ids = vec![(cx.comp_id)(*body)];
    }
}

pub(crate) fn raise_reduce(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [body] = cx.calls(p)?;
    Ok(OpKind::Reduce {
        axes: p.dimensions.as_slice().into(),
        body,
    })
}

pub(crate) fn text_reduce(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Reduce { axes, body } = kind {
        out.list("dimensions", axes);
        out.callee(cx, "to_apply", *body);
    }
}

impl Op {
    /// XLA's Reduce over `axes`, starting from `init` (a scalar), combining with
    /// `body(accumulator, element)`, which must return a scalar of the same type.
    /// The body may use scalar values from outside it (they are passed in).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("r");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// let scale = b.parameter(1, Shape::of::<f32>(&[]), "scale");
    /// let m = x.reduce(&b.constant(0f32), &[1], |a, e| a + e * &scale);
    /// assert_eq!(m.dims()?, vec![2]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn reduce(&self, init: &Op, axes: &[i64], body: impl FnOnce(&Op, &Op) -> Op) -> Op {
        let loc = Location::caller();
        let mut out = self
            .builder()
            .on(loc)
            .reduce_many(&[self], &[init], axes, |acc, e| vec![body(&acc[0], &e[0])]);
        out.pop().expect("one result per input")
    }

    /// Sum over `axes` (negative axes count from the end).
    #[track_caller]
    pub fn reduce_sum(&self, axes: &[i64]) -> Op {
        self.reduce_binary(axes, BinaryOp::Add, |_| Scalar::Int(0), Location::caller())
    }

    /// Maximum over `axes`.
    #[track_caller]
    pub fn reduce_max(&self, axes: &[i64]) -> Op {
        self.reduce_binary(axes, BinaryOp::Maximum, lowest, Location::caller())
    }

    /// Minimum over `axes`.
    #[track_caller]
    pub fn reduce_min(&self, axes: &[i64]) -> Op {
        self.reduce_binary(axes, BinaryOp::Minimum, highest, Location::caller())
    }

    /// A reduction with one binary op starting from its identity (0 for add, 1 for
    /// multiply, the lowest/highest value for maximum/minimum).
    pub(crate) fn reduce_by(
        &self,
        axes: &[i64],
        op: BinaryOp,
        loc: &'static Location<'static>,
    ) -> Op {
        match op {
            BinaryOp::Multiply => self.reduce_binary(axes, op, |_| Scalar::Int(1), loc),
            BinaryOp::Maximum => self.reduce_binary(axes, op, lowest, loc),
            BinaryOp::Minimum => self.reduce_binary(axes, op, highest, loc),
            _ => self.reduce_binary(axes, op, |_| Scalar::Int(0), loc),
        }
    }

    /// A reduction whose body is one binary op, starting from its identity.
    fn reduce_binary(
        &self,
        axes: &[i64],
        op: BinaryOp,
        identity: impl FnOnce(ElementType) -> Scalar,
        loc: &'static Location<'static>,
    ) -> Op {
        let ty = match self.element_type() {
            Ok(ty) => ty,
            Err(_) => return self.builder().fail_not_array(self, "reduce", loc),
        };
        let init = self.builder().scalar_of(ty, identity(ty), loc);
        self.on(loc)
            .reduce(&init, axes, |a, e| a.binary(op, e, loc))
    }

    /// Mean over `axes` (`jnp.mean(x, axes, keepdims=keepdims)`), keeping them as
    /// size-1 axes if `keepdims`, like the other reductions (`sum`, `prod`, `amax`,
    /// `amin`, `var`, `std`). Floating-point (and complex) operands keep their type;
    /// an integer or `pred` operand is converted to `f32` first and its mean is
    /// `f32`, as `jnp.mean` does (no truncating division, no overflow of the count).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("m");
    /// let x = b.parameter(0, Shape::of::<u8>(&[300, 2]), "x");
    /// assert_eq!(x.mean(&[0], false).element_type()?, ElementType::F32);
    /// assert_eq!(x.mean(&[0], true).dims()?, vec![1, 2]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn mean(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        let r = self.mean_over(axes, loc);
        if keepdims { self.keep(r, axes, loc) } else { r }
    }

    fn mean_over(&self, axes: &[i64], loc: &'static Location<'static>) -> Op {
        let s = match self.shape() {
            Ok(s) if s.is_array() => s,
            _ => return self.builder().fail_not_array(self, "reduce", loc),
        };
        let count = match resolve_axes("reduce", &s, axes) {
            Ok(a) => a
                .iter()
                .try_fold(1i64, |acc, i| acc.checked_mul(s.dims()[*i])),
            Err(e) => return self.builder().fail(e, loc),
        };
        let Some(count) = count else {
            return self.builder().fail(
                ShapeError::new(
                    "reduce",
                    &[&s],
                    ShapeErrorKind::Dimension,
                    "the element count overflows",
                ),
                loc,
            );
        };
        let ty = s.element_type().expect("an array");
        let x = if ty.is_float() || ty.is_complex() {
            self.clone()
        } else {
            self.on(loc).convert(ElementType::F32)
        };
        let sum = x.reduce_at_sum(axes, loc);
        sum.binary_scalar(BinaryOp::Divide, Scalar::Int(count), false, loc)
    }

    fn reduce_at_sum(&self, axes: &[i64], loc: &'static Location<'static>) -> Op {
        self.reduce_binary(axes, BinaryOp::Add, |_| Scalar::Int(0), loc)
    }
}

impl Builder {
    /// XLA's variadic Reduce: reduces `inputs` (arrays of equal dimensions) together
    /// over `axes`, starting from `inits` (one scalar each), with
    /// `body(accumulators, elements)` returning the new accumulators. Returns one
    /// array per input. The body may use scalar values from outside it.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Comparison, Shape};
    /// // The maximum of each row and its column index (an argmax).
    /// let b = Builder::new("argmax");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// let idx = b.constant_array(&[0i32, 1, 2, 0, 1, 2], &[2, 3]);
    /// let out = b.reduce_many(
    ///     &[&x, &idx],
    ///     &[&b.constant(f32::NEG_INFINITY), &b.constant(0i32)],
    ///     &[1],
    ///     |acc, e| {
    ///         let take = e[0].compare(&acc[0], Comparison::Gt);
    ///         vec![acc[0].max(&e[0]), e[0].builder().select(&take, &e[1], &acc[1])]
    ///     },
    /// );
    /// assert_eq!(out[1].dims()?, vec![2]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn reduce_many(
        &self,
        inputs: &[&Op],
        inits: &[&Op],
        axes: &[i64],
        body: impl FnOnce(&[Op], &[Op]) -> Vec<Op>,
    ) -> Vec<Op> {
        let loc = Location::caller();
        let n = inputs.len().max(1);
        // A failure is one failed op per expected result.
        let failed = |op: Op| vec![op; n];
        let all: Vec<&Op> = inputs.iter().chain(inits).copied().collect();
        let target = match self.target(&all, "reduce", loc) {
            Ok(t) => t,
            Err(f) => return failed(f),
        };
        let shapes: Vec<Shape> = all.iter().map(|o| o.shape().expect("checked")).collect();
        let refs: Vec<&Shape> = shapes.iter().collect();
        if inputs.len() != inits.len() {
            return failed(self.fail(
                ShapeError::new(
                    "reduce",
                    &refs,
                    ShapeErrorKind::Arity,
                    format!("{} inputs but {} initial values", inputs.len(), inits.len()),
                ),
                loc,
            ));
        }
        // Negative axes count from the end; the instruction holds them resolved
        // and sorted.
        let axes: Vec<i64> = match shapes.first().filter(|s| s.is_array()) {
            Some(s) => match resolve_axes("reduce", s, axes) {
                Ok(a) => {
                    let mut a: Vec<i64> = a.into_iter().map(|a| a as i64).collect();
                    a.sort_unstable();
                    a
                }
                Err(e) => return failed(self.fail(e, loc)),
            },
            None => axes.to_vec(),
        };
        if let Err(e) = infer_reduce(&refs, &axes, None) {
            return failed(self.fail(e, loc));
        }
        let comp_name = format!("reduce_{}", shapes[0].element_type().expect("checked"));
        self.emit_reducer(
            ("reduce", &comp_name),
            (target, loc),
            (inputs, inits),
            &shapes,
            body,
            |body| OpKind::Reduce {
                axes: axes.into(),
                body,
            },
        )
    }

    /// What `reduce` and `reduce-window` share once their operands are checked:
    /// traces `body` on scalar parameters of the inputs' element types
    /// (accumulators, then elements), checks that it returns one value per input,
    /// turns the scalars it captures into more inputs (each spread to the inputs'
    /// dims, with itself as initial value; see `scalar_captures`), emits
    /// `kind(body)` in the computation `target` (for the user's line `loc`) and
    /// returns one result per input. `shapes` are the inputs' shapes then the
    /// initial values'.
    pub(crate) fn emit_reducer(
        &self,
        (op, comp_name): (&'static str, &str),
        (target, loc): (crate::ir::CompId, &'static Location<'static>),
        (inputs, inits): (&[&Op], &[&Op]),
        shapes: &[Shape],
        body: impl FnOnce(&[Op], &[Op]) -> Vec<Op>,
        kind: impl FnOnce(crate::ir::CompId) -> OpKind,
    ) -> Vec<Op> {
        let n = inputs.len();
        let failed = |op: Op| vec![op; n.max(1)];
        let refs: Vec<&Shape> = shapes.iter().collect();
        let types: Vec<ElementType> = shapes[..n]
            .iter()
            .map(|s| s.element_type().expect("checked"))
            .collect();
        let scalars: Vec<Shape> = types.iter().map(|t| Shape::scalar(*t)).collect();
        let params: Vec<Shape> = scalars.iter().chain(&scalars).cloned().collect();
        let (comp, mut roots) = match self.body(target, comp_name, &params, loc, |_, p| {
            body(&p[..n], &p[n..])
        }) {
            Ok(r) => r,
            Err(f) => return failed(f),
        };
        if roots.len() != n {
            return failed(self.fail(
                ShapeError::new(
                    op,
                    &refs,
                    ShapeErrorKind::Body,
                    format!(
                        "the body must return {n} values, it returns {}",
                        roots.len()
                    ),
                ),
                loc,
            ));
        }
        let captures = match self.scalar_captures(comp, target, op, loc) {
            Ok(c) => c,
            Err(f) => return failed(f),
        };
        let k = captures.len();
        self.captures_as_inputs(comp, n, &mut roots);
        if let Err(f) = self.finish_body(comp, &roots, loc) {
            return failed(f);
        }
        let caps: Vec<Op> = captures.iter().map(|c| self.op(target, *c)).collect();
        let spread: Vec<Op> = caps
            .iter()
            .map(|c| c.on(loc).broadcast_to(shapes[0].dims()))
            .collect();
        let operands: Vec<&Op> = inputs
            .iter()
            .copied()
            .chain(&spread)
            .chain(inits.iter().copied())
            .chain(&caps)
            .collect();
        let r = self.emit(kind(comp), &operands, None, loc);
        self.results(r, n, n + k > 1)
    }
}

/// The smallest value of `ty` (the identity of `max`).
fn lowest(ty: ElementType) -> Scalar {
    use ElementType::*;
    match ty {
        S8 => Scalar::Int(i8::MIN as i64),
        S16 => Scalar::Int(i16::MIN as i64),
        S32 => Scalar::Int(i32::MIN as i64),
        S64 => Scalar::Int(i64::MIN),
        _ if ty.is_float() => Scalar::Float(f64::NEG_INFINITY),
        _ => Scalar::Int(0),
    }
}

/// The largest value of `ty` (the identity of `min`).
fn highest(ty: ElementType) -> Scalar {
    use ElementType::*;
    match ty {
        S8 => Scalar::Int(i8::MAX as i64),
        S16 => Scalar::Int(i16::MAX as i64),
        S32 => Scalar::Int(i32::MAX as i64),
        S64 => Scalar::Int(i64::MAX),
        U8 => Scalar::Int(u8::MAX as i64),
        U16 => Scalar::Int(u16::MAX as i64),
        U32 => Scalar::Int(u32::MAX as i64),
        U64 => Scalar::UInt(u64::MAX),
        Pred => Scalar::Int(1),
        _ => Scalar::Float(f64::INFINITY),
    }
}

/// Reduce (see `reduce_cts`).
pub(crate) fn vjp_reduce(n: &Node) -> Grads {
    let OpKind::Reduce { axes, body } = n.kind else {
        return Err("not a reduce".into());
    };
    reduce_cts(axes, *body, n, &n.array_cts()).map(arrays)
}

/// Reduce: a sum sends the cotangent back along the reduced axes; a max or min
/// shares it among the elements equal to the result (JAX's rule for
/// `reduce_max`); a product multiplies it by the other factors; a body that
/// selects (an argmax: see [`vjp_selection_reduce`]) sends each float result's
/// cotangent to the position it was taken from. The initial value gets none. Other
/// bodies have no rule yet.
fn reduce_cts(
    axes: &[i64],
    body: crate::ir::CompId,
    n: &crate::autodiff::Node,
    cts: &[Option<Op>],
) -> Result<Vec<Option<Op>>, String> {
    let m = n.operands.len() / 2;
    let combiner = if m == 1 {
        simple_combiner(n.b, body)
    } else {
        None
    };
    if combiner.is_none() {
        if let Some(reads_element) = selection_body(n.b, body, m) {
            return vjp_selection_reduce(axes, n, cts, &reads_element);
        }
        return Err(if m == 1 {
            "this `reduce` combiner has no gradient rule yet (sum, product, max, min and bodies that select one of their parameters have)"
                .into()
        } else {
            "a variadic `reduce` has a gradient rule only when its body selects: each result one of its accumulator or element parameters for that position, chosen by `select` (or `max`/`min`), as an argmax; this body computes its results otherwise"
                .into()
        });
    }
    let (x, loc) = (&n.operands[0], n.loc);
    let ct = cts[0].clone().expect("called with a cotangent");
    let dims = x.dims().unwrap_or_default();
    let kept: Vec<i64> = (0..dims.len() as i64)
        .filter(|a| !axes.contains(a))
        .collect();
    let back = |v: &Op| v.broadcast_in_dim(&dims, &kept);
    match combiner {
        Some(BinaryOp::Add) => Ok(vec![Some(back(&ct)), None]),
        Some(BinaryOp::Maximum | BinaryOp::Minimum) => {
            let ty = x.element_type().unwrap_or(ElementType::F32);
            let at = x
                .compare(&back(n.out()), crate::Comparison::Eq)
                .convert(ty);
            let count = at.reduce_by(axes, BinaryOp::Add, loc);
            let share = ct.binary(BinaryOp::Divide, &count, loc);
            Ok(vec![
                Some(at.binary(BinaryOp::Multiply, &back(&share), loc)),
                None,
            ])
        }
        Some(BinaryOp::Multiply) => Ok(vec![Some(vjp_prod(x, axes, &ct, loc)), None]),
        _ => Err(
            "this `reduce` combiner has no gradient rule yet (sum, product, max, min and bodies that select one of their parameters have)"
                .into(),
        ),
    }
}

/// A product's gradient without dividing (right at zeros): each element gets the
/// cotangent times the product of the others, as the exclusive prefix product times
/// the exclusive suffix product along the reduced elements (reduce-windows of
/// multiplication reaching left and right).
fn vjp_prod(x: &Op, axes: &[i64], ct: &Op, loc: &'static Location<'static>) -> Op {
    use crate::ops::window::WindowDim;
    let dims = x.dims().unwrap_or_default();
    let r = dims.len() as i64;
    let kept: Vec<i64> = (0..r).filter(|a| !axes.contains(a)).collect();
    let n: i64 = axes.iter().map(|a| dims[*a as usize]).product();
    if n == 0 || dims.contains(&0) {
        return crate::autodiff::zeros_like(x, loc);
    }
    let m: i64 = kept.iter().map(|a| dims[*a as usize]).product();
    // Rows of the kept axes, the reduced elements along each row.
    let perm: Vec<i64> = kept.iter().chain(axes).copied().collect();
    let rows = x.transpose(&perm).reshape(&[m, n]);
    let ty = x.element_type().unwrap_or(ElementType::F32);
    let one = x.builder().scalar_of(ty, Scalar::Int(1), loc);
    let scan = |lo: i64, hi: i64| {
        let w = [
            WindowDim::new(1, 1),
            WindowDim {
                size: n,
                stride: 1,
                padding_low: lo,
                padding_high: hi,
                window_dilation: 1,
                base_dilation: 1,
            },
        ];
        rows.reduce_window(&one, &w, |a, e| a * e)
    };
    let others = scan(n, -1).binary(BinaryOp::Multiply, &scan(-1, n), loc);
    let g = others.binary(
        BinaryOp::Multiply,
        &ct.reshape(&[m]).broadcast_in_dim(&[m, n], &[0]),
        loc,
    );
    let permuted: Vec<i64> = perm.iter().map(|a| dims[*a as usize]).collect();
    let mut inv = vec![0i64; perm.len()];
    for (i, p) in perm.iter().enumerate() {
        inv[*p as usize] = i as i64;
    }
    g.reshape(&permuted).transpose(&inv)
}

/// The binary op a reduce body consists of (`body(a, e) = a op e` or `e op a`), if
/// it is that simple.
pub(crate) fn simple_combiner(b: &Builder, body: crate::ir::CompId) -> Option<BinaryOp> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let root = c.root?;
    let ins = c.instrs.get(root.instr as usize)?;
    let OpKind::Binary(op) = ins.kind else {
        return None;
    };
    let params: Vec<u32> = c.params.iter().filter_map(|p| *p).collect();
    let mut ops: Vec<u32> = ins.operands.iter().map(|v| v.instr).collect();
    ops.sort();
    let mut ps = params.clone();
    ps.sort();
    (params.len() == 2 && ops == ps).then_some(op)
}

/// Whether every result of a reduce (or reduce-window) body with `m` results is a
/// *selection*: one of the body's two parameters for its position (accumulator `j`
/// or element `m + j`), chosen by `select`s (whose predicates may be anything) or by
/// `max`/`min` of such choices, as an argmax's body. Then each result of the reduce
/// equals its input at some position along the reduced axes (or the initial value).
/// Returns, per result, whether it can take the element at all (a result that only
/// ever keeps its accumulator is the initial value, whatever the input), or `None`
/// for a body that is no selection.
pub(crate) fn selection_body(b: &Builder, body: crate::ir::CompId, m: usize) -> Option<Vec<bool>> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let root = c.root?;
    let roots: Vec<crate::ir::Value> = if m == 1 {
        vec![root]
    } else {
        match c.instrs.get(root.instr as usize) {
            Some(ins) if matches!(ins.kind, OpKind::Tuple) && ins.operands.len() == m => {
                ins.operands.to_vec()
            }
            _ => return None,
        }
    };
    let param = |k: usize| c.params.get(k).copied().flatten();
    roots
        .iter()
        .enumerate()
        .map(|(j, r)| {
            let (acc, elem) = (param(j)?, param(m + j)?);
            let mut reads_element = false;
            let mut seen = std::collections::HashSet::new();
            let mut stack = vec![*r];
            while let Some(v) = stack.pop() {
                if !seen.insert(v) || v.instr == acc {
                    continue;
                }
                if v.instr == elem {
                    reads_element = true;
                    continue;
                }
                let ins = c.instrs.get(v.instr as usize)?;
                match ins.kind {
                    OpKind::Select => stack.extend(ins.operands.iter().skip(1).copied()),
                    OpKind::Binary(BinaryOp::Maximum | BinaryOp::Minimum) => {
                        stack.extend(ins.operands.iter().copied())
                    }
                    _ => return None,
                }
            }
            Some(reads_element)
        })
        .collect()
}

/// The logical and of two predicate arrays of one shape.
pub(crate) fn logical_and(x: &Op, y: &Op) -> Op {
    x.builder().select(x, y, x)
}

/// A reduce whose body is a selection ([`selection_body`]): each floating-point
/// result's cotangent goes to the positions along the reduced axes where the whole
/// input tuple equals the result tuple (all operands compared with their results and
/// the masks and-ed; an integer operand such as an argmax's index makes the match
/// unique), split equally among several (ties in every operand, as JAX splits
/// `reduce_max`'s ties). Where no position matches the whole tuple (results chosen
/// independently of each other), result `j` falls back to the positions where input
/// `j` alone equals it, again split among ties; where none does (the result is the
/// initial value) it gets nothing; nor does a result whose body never takes the
/// element. Integer and predicate results carry no gradient; initial values get
/// none.
fn vjp_selection_reduce(
    axes: &[i64],
    n: &crate::autodiff::Node,
    cts: &[Option<Op>],
    reads_element: &[bool],
) -> Result<Vec<Option<Op>>, String> {
    let m = n.operands.len() / 2;
    let (inputs, loc) = (&n.operands[..m], n.loc);
    let mut out = vec![None; 2 * m];
    let todo = selection_todo(n, cts, reads_element);
    let Some(ty) = todo.first().and_then(|j| inputs[*j].element_type().ok()) else {
        return Ok(out);
    };
    let dims = inputs[0].dims().unwrap_or_default();
    let kept: Vec<i64> = (0..dims.len() as i64)
        .filter(|a| !axes.contains(a))
        .collect();
    let back = |v: &Op| v.broadcast_in_dim(&dims, &kept);
    let equal: Vec<Op> = (0..m)
        .map(|j| inputs[j].compare(&back(&n.results[j]), crate::Comparison::Eq))
        .collect();
    for (j, g) in selection_shares(&equal, axes, &back, cts, &todo, ty, loc) {
        out[j] = Some(g);
    }
    Ok(out)
}

/// The operands of a selection (`reduce` or `reduce-window`) whose gradient is
/// wanted: floating-point inputs whose result has a cotangent and can take them.
pub(crate) fn selection_todo(
    n: &crate::autodiff::Node,
    cts: &[Option<Op>],
    reads_element: &[bool],
) -> Vec<usize> {
    let m = n.operands.len() / 2;
    (0..m)
        .filter(|j| {
            reads_element[*j]
                && n.wanted[*j]
                && crate::autodiff::wants(&n.operands[*j])
                && matches!(cts.get(*j), Some(Some(_)))
        })
        .collect()
}

/// The shared part of the selection rules. `equal[j]`: where input `j`, laid out
/// so that reducing `axes` gives the result's shape, equals result `j` (false at
/// padding); `back` broadcasts a result-shaped array to that layout. Returns, for
/// each result `j` in `todo` (of float type `ty`), its cotangent spread over the
/// positions whose whole tuple matches (split among several), or where none does,
/// over the positions where input `j` alone matches.
pub(crate) fn selection_shares(
    equal: &[Op],
    axes: &[i64],
    back: &dyn Fn(&Op) -> Op,
    cts: &[Option<Op>],
    todo: &[usize],
    ty: ElementType,
    loc: &'static Location<'static>,
) -> Vec<(usize, Op)> {
    let count = |mask: &Op| mask.reduce_by(axes, BinaryOp::Add, loc);
    let b = equal[0].builder();
    let one = b.scalar_of(ty, Scalar::Int(1), loc);
    // The whole tuple's match and its count (one reduce for all results).
    let whole = (equal.len() > 1).then(|| {
        let all = equal[1..]
            .iter()
            .fold(equal[0].clone(), |a, e| logical_and(&a, e))
            .convert(ty);
        let c = count(&all);
        let zero = b.scalar_of(ty, Scalar::Int(0), loc);
        let any = c.compare(&zero, crate::Comparison::Gt);
        (all, c, any)
    });
    todo.iter()
        .map(|j| {
            let ct = cts[*j].clone().expect("only results with a cotangent");
            let own = equal[*j].convert(ty);
            let own_count = count(&own);
            let (mask, k) = match &whole {
                None => (own, own_count),
                Some((all, c, any)) => (
                    b.select(&back(any), all, &own),
                    b.select(any, c, &own_count),
                ),
            };
            // No match at all (the initial value won): nothing, not 0/0.
            let k = k.binary(BinaryOp::Maximum, &one, loc);
            let share = ct.binary(BinaryOp::Divide, &k, loc);
            (*j, mask.binary(BinaryOp::Multiply, &back(&share), loc))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_rule() {
        let x = Shape::of::<f32>(&[2, 3, 4]);
        let z = Shape::of::<f32>(&[]);
        assert_eq!(
            infer_reduce(&[&x, &z], &[1], None).unwrap(),
            Shape::of::<f32>(&[2, 4])
        );
        assert_eq!(
            infer_reduce(&[&x, &z], &[2, 0], None).unwrap(),
            Shape::of::<f32>(&[3])
        );
        let axis = |r: Result<Shape, ShapeError>| r.unwrap_err().kind;
        // The instruction's axes are resolved: XLA refuses -1 ("Reducing
        // out-of-bounds dimension -1", tests/rules_vs_xla.rs); `reduce` resolves it.
        assert_eq!(
            axis(infer_reduce(&[&x, &z], &[-1, 0], None)),
            ShapeErrorKind::Axis
        );
        assert_eq!(
            axis(infer_reduce(&[&x, &z], &[3], None)),
            ShapeErrorKind::Axis
        );
        assert_eq!(
            axis(infer_reduce(&[&x, &z], &[1, 1], None)),
            ShapeErrorKind::Axis
        );
        let i = Shape::of::<i32>(&[]);
        assert_eq!(
            axis(infer_reduce(&[&x, &i], &[0], None)),
            ShapeErrorKind::ElementType
        );
        assert!(infer_reduce(&[&x, &Shape::of::<f32>(&[1])], &[0], None).is_err());
    }

    #[test]
    fn variadic_reduce_rule_checks_the_body() {
        let x = Shape::of::<f32>(&[2, 3]);
        let y = Shape::of::<i32>(&[2, 3]);
        let (zf, zi) = (Shape::of::<f32>(&[]), Shape::of::<i32>(&[]));
        let good = (
            vec![zf.clone(), zi.clone(), zf.clone(), zi.clone()],
            Shape::Tuple(vec![zf.clone(), zi.clone()]),
        );
        assert_eq!(
            infer_reduce(&[&x, &y, &zf, &zi], &[1], Some(&good)).unwrap(),
            Shape::Tuple(vec![Shape::of::<f32>(&[2]), Shape::of::<i32>(&[2])])
        );
        let bad = (good.0.clone(), zf.clone());
        let e = infer_reduce(&[&x, &y, &zf, &zi], &[1], Some(&bad)).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::Body);
        let e = infer_reduce(&[&x, &Shape::of::<i32>(&[3, 2]), &zf, &zi], &[1], None).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::Dimension);
        let zd = Shape::of::<f64>(&[]);
        let e = infer_reduce(&[&x, &Shape::of::<f64>(&[2, 3]), &zf, &zd], &[1], None).unwrap_err();
        assert!(e.reason.contains("f32 and f64"), "{e}");
    }

    /// The body of the reduce that computed `out`.
    fn body_of(out: &Op) -> crate::ir::CompId {
        let g = out.g.borrow();
        match &g.comp(out.comp).instrs[out.v.instr as usize].kind {
            OpKind::Reduce { body, .. } => *body,
            other => panic!("not a reduce: {other:?}"),
        }
    }

    #[test]
    fn selection_bodies_are_recognised() {
        use crate::Comparison;
        let b = Builder::new("sel");
        let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
        let i = b.iota(ElementType::S32, &[2, 3], 1);
        let inits = [&b.constant(f32::NEG_INFINITY), &b.constant(0i32)];
        type Body<'a> = &'a dyn Fn(&[Op], &[Op]) -> Vec<Op>;
        let reduce = |f: Body| body_of(&b.reduce_many(&[&x, &i], &inits, &[1], f)[0]);
        // Value by `max`, index by `select` (as `reduce_many`'s example).
        let argmax = reduce(&|a, e| {
            let take = e[0].compare(&a[0], Comparison::Gt);
            vec![a[0].max(&e[0]), e[0].builder().select(&take, &e[1], &a[1])]
        });
        assert_eq!(selection_body(&b, argmax, 2), Some(vec![true, true]));
        // The index always kept: that result never takes the element.
        let kept = reduce(&|a, e| vec![a[0].max(&e[0]), a[1].clone()]);
        assert_eq!(selection_body(&b, kept, 2), Some(vec![true, false]));
        // Arithmetic, or another position's parameter: no selection.
        let sum = reduce(&|a, e| vec![&a[0] + &e[0], a[1].clone()]);
        assert_eq!(selection_body(&b, sum, 2), None);
        let swapped = reduce(&|a, e| {
            let take = e[0].compare(&a[0], Comparison::Gt);
            let bb = e[0].builder();
            vec![
                bb.select(&take, &e[0], &a[0]),
                bb.select(&take, &a[1], &e[0].convert(ElementType::S32)),
            ]
        });
        assert_eq!(selection_body(&b, swapped, 2), None);
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: the reduced axes move one on; the initial values must be the same
/// for every example.
pub(crate) fn batch_reduce(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Reduce { axes, body } = n.kind else {
        return Err("not a reduce".into());
    };
    let ops = crate::batching::inputs_then_inits(n)?;
    crate::batching::emit_front_ops(
        n,
        OpKind::Reduce {
            axes: crate::batching::plus_one(axes),
            body: *body,
        },
        &ops,
    )
}

/// Tangent: a sum is linear; a max or min takes the tangent at the elements equal
/// to the result (shared among ties, as the gradient rule shares the cotangent).
pub(crate) fn jvp_reduce(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let OpKind::Reduce { axes, body } = n.kind else {
        return Err("not a reduce".into());
    };
    let combiner = if n.operands.len() == 2 {
        simple_combiner(n.b, *body)
    } else {
        None
    };
    match combiner {
        Some(BinaryOp::Add) => crate::forward::linear(n),
        Some(BinaryOp::Maximum | BinaryOp::Minimum) => {
            let (x, loc) = (&n.operands[0], n.loc);
            let dims = x.dims().map_err(|e| e.to_string())?;
            let kept: Vec<i64> = (0..dims.len() as i64)
                .filter(|a| !axes.contains(a))
                .collect();
            let ty = x.element_type().map_err(|e| e.to_string())?;
            let at = x
                .compare(
                    &n.results[0].broadcast_in_dim(&dims, &kept),
                    crate::Comparison::Eq,
                )
                .convert(ty);
            let count = at.reduce_by(axes, BinaryOp::Add, loc);
            let picked = at.binary(BinaryOp::Multiply, &n.tangent(0), loc).reduce_by(
                axes,
                BinaryOp::Add,
                loc,
            );
            Ok(vec![Some(crate::autodiff::Ct::Array(picked.binary(
                BinaryOp::Divide,
                &count,
                loc,
            )))])
        }
        Some(BinaryOp::Multiply) => jvp_product(n, axes),
        _ => Err("a tangent rule for reduce by sum, product, max and min only".into()),
    }
}

/// Tangent of a product: `ẏ = Σᵢ ẋᵢ ∂y/∂xᵢ`, the partials `∂y/∂xᵢ = Πⱼ≠ᵢ xⱼ`
/// being the product's gradient for a cotangent of ones (each element feeds one
/// result, so that gradient holds every partial), zeros included; the initial
/// value's tangent adds `ẏ₀ · Πᵢ xᵢ`.
fn jvp_product(n: &crate::forward::JvpNode, axes: &[i64]) -> crate::forward::Tangents {
    let loc = n.loc;
    let ones = [Some(crate::autodiff::Ct::Array(
        n.results[0].full_like(1.0),
    ))];
    let wanted = [true, false];
    let node = crate::autodiff::Node {
        kind: n.kind,
        operands: n.operands,
        results: n.results,
        loc,
        b: n.b,
        wanted: &wanted,
        at: n.at,
        cts: &ones,
        active: &[],
    };
    let partials = match crate::ops::table::vjp(&node)?.into_iter().next().flatten() {
        Some(crate::autodiff::Ct::Array(p)) => p,
        _ => return Err("a product whose gradient is missing".into()),
    };
    let mut t = n
        .tangent(0)
        .binary(BinaryOp::Multiply, &partials, loc)
        .reduce_by(axes, BinaryOp::Add, loc);
    if n.has(1) {
        // y = y₀ · Πx: the product without the initial value, times ẏ₀.
        let prod = n.operands[0].reduce_by(axes, BinaryOp::Multiply, loc);
        t = t.binary(
            BinaryOp::Add,
            &n.tangent(1).binary(BinaryOp::Multiply, &prod, loc),
            loc,
        );
    }
    Ok(vec![Some(crate::autodiff::Ct::Array(t))])
}
