//! Windowed ops: XLA's `reduce-window` (pooling) with its window (sizes, strides,
//! padding, base and window dilations), and helpers `max_pool`/`sum_pool`.
use super::array_of;
use super::elementwise::{BinaryOp, Scalar};
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::Op;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::fmt::Write;
use std::panic::Location;

// ---------------------------------------------------------------------------------
// Windows (shared by `reduce-window`, `select-and-scatter` and `convolution`)

pub use crate::ir::attrs::WindowDim;

impl WindowDim {
    /// The number of window positions over an axis of `n` elements, or why none.
    pub fn output_size(&self, n: i64) -> Result<i64, String> {
        if self.size < 1 || self.stride < 1 || self.window_dilation < 1 || self.base_dilation < 1 {
            return Err(format!(
                "window {self:?}: size, stride and dilations must be at least 1"
            ));
        }
        let over = || format!("window {self:?} overflows");
        let base = if n == 0 {
            0
        } else {
            (n - 1)
                .checked_mul(self.base_dilation)
                .and_then(|x| x.checked_add(1))
                .ok_or_else(over)?
        };
        let padded = base
            .checked_add(self.padding_low)
            .and_then(|x| x.checked_add(self.padding_high))
            .ok_or_else(over)?;
        if padded < 0 {
            return Err(format!(
                "window {self:?} cuts more than the axis's {n} elements"
            ));
        }
        let win = (self.size - 1)
            .checked_mul(self.window_dilation)
            .and_then(|x| x.checked_add(1))
            .ok_or_else(over)?;
        Ok(if padded < win {
            0
        } else {
            (padded - win) / self.stride + 1
        })
    }
}

pub(crate) fn window_proto(w: &[WindowDim]) -> proto::Window {
    proto::Window {
        dimensions: w
            .iter()
            .map(|d| proto::WindowDimension {
                size: d.size,
                stride: d.stride,
                padding_low: d.padding_low,
                padding_high: d.padding_high,
                window_dilation: d.window_dilation,
                base_dilation: d.base_dilation,
                window_reversal: false,
            })
            .collect(),
    }
}

pub(crate) fn raise_window(p: &proto::HloInstructionProto) -> Result<Vec<WindowDim>, String> {
    let w = p.window.as_ref().ok_or("a windowed op without a window")?;
    w.dimensions
        .iter()
        .map(|d| {
            if d.window_reversal {
                return Err("window reversal is not supported".to_string());
            }
            Ok(WindowDim {
                size: d.size,
                stride: d.stride,
                padding_low: d.padding_low,
                padding_high: d.padding_high,
                window_dilation: d.window_dilation,
                base_dilation: d.base_dilation,
            })
        })
        .collect()
}

pub(crate) fn text_window(w: &[WindowDim]) -> String {
    let field = |f: &dyn Fn(&WindowDim) -> String| w.iter().map(f).collect::<Vec<_>>().join("x");
    let mut out = format!(", window={{size={}", field(&|d| d.size.to_string()));
    if w.iter().any(|d| d.stride != 1) {
        let _ = write!(out, " stride={}", field(&|d| d.stride.to_string()));
    }
    if w.iter().any(|d| d.padding_low != 0 || d.padding_high != 0) {
        let _ = write!(
            out,
            " pad={}",
            field(&|d| format!("{}_{}", d.padding_low, d.padding_high))
        );
    }
    if w.iter().any(|d| d.base_dilation != 1) {
        let _ = write!(
            out,
            " lhs_dilate={}",
            field(&|d| d.base_dilation.to_string())
        );
    }
    if w.iter().any(|d| d.window_dilation != 1) {
        let _ = write!(
            out,
            " rhs_dilate={}",
            field(&|d| d.window_dilation.to_string())
        );
    }
    out.push('}');
    out
}

/// `1 + d (s - 1)`: the extent of `s` elements spaced `d` apart (0 for none; JAX's
/// `_dilate_shape`).
pub(crate) fn dilated(s: i64, d: i64) -> i64 {
    if s == 0 { 0 } else { 1 + d * (s - 1) }
}

#[cfg(test)]
mod window_tests {
    use super::*;

    #[test]
    fn window_output_sizes() {
        assert_eq!(WindowDim::new(2, 2).output_size(5).unwrap(), 2);
        assert_eq!(WindowDim::new(3, 1).output_size(5).unwrap(), 3);
        let padded = WindowDim {
            padding_low: 1,
            padding_high: 1,
            ..WindowDim::new(3, 1)
        };
        assert_eq!(padded.output_size(5).unwrap(), 5);
        let dilated = WindowDim {
            window_dilation: 2,
            ..WindowDim::new(2, 1)
        };
        assert_eq!(dilated.output_size(5).unwrap(), 3);
        let base = WindowDim {
            base_dilation: 2,
            ..WindowDim::new(1, 1)
        };
        assert_eq!(base.output_size(3).unwrap(), 5);
        assert_eq!(WindowDim::new(6, 1).output_size(5).unwrap(), 0);
        assert!(WindowDim::new(0, 1).output_size(5).is_err());
        let cut = WindowDim {
            padding_low: -6,
            ..WindowDim::new(1, 1)
        };
        assert!(cut.output_size(5).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `reduce-window` (pooling: `max_pool`, `sum_pool`)

/// Reduce-window rule: `n` input arrays of equal dimensions then `n` scalar initial
/// values of their types, one [`WindowDim`] per axis; the body (when given) maps `2n`
/// scalars to `n` (a scalar when `n == 1`). Each axis has
/// [`WindowDim::output_size`] elements; the result is one array per input.
pub fn infer_reduce_window(
    operands: &[&Shape],
    window: &[WindowDim],
    body: Option<&(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "reduce-window";
    if operands.is_empty() || operands.len() % 2 != 0 {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Arity,
            "takes n inputs and n initial values",
        ));
    }
    let n = operands.len() / 2;
    let (inputs, inits) = operands.split_at(n);
    let (_, dims) = array_of(OP, inputs[0])?;
    if window.len() != dims.len() {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Attribute,
            format!("{} window axes for rank {}", window.len(), dims.len()),
        ));
    }
    let out: Vec<i64> = window
        .iter()
        .zip(dims)
        .map(|(w, d)| w.output_size(*d))
        .collect::<Result<_, _>>()
        .map_err(|r| ShapeError::new(OP, operands, ShapeErrorKind::Attribute, r))?;
    let mut types = Vec::with_capacity(n);
    for (x, init) in inputs.iter().zip(inits) {
        let (t, d) = array_of(OP, x)?;
        let (it, id) = array_of(OP, init)?;
        if d != dims {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Dimension,
                "all inputs must have the same dimensions",
            ));
        }
        if it != t || !id.is_empty() {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::ElementType,
                format!("the initial value must be a {t} scalar, got {init}"),
            ));
        }
        types.push(t);
    }
    if let Some((params, result)) = body {
        let scalars: Vec<Shape> = types.iter().map(|t| Shape::scalar(*t)).collect();
        let want: Vec<Shape> = scalars.iter().chain(&scalars).cloned().collect();
        let want_r = if n == 1 {
            scalars[0].clone()
        } else {
            Shape::Tuple(scalars)
        };
        if *params != want || *result != want_r {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Body,
                format!("the body must map {} scalars to {want_r}", want.len()),
            ));
        }
    }
    let outs: Vec<Shape> = types.iter().map(|t| Shape::array(*t, &out)).collect();
    Ok(if n == 1 {
        outs.into_iter().next().expect("n == 1")
    } else {
        Shape::Tuple(outs)
    })
}

pub(crate) fn shape_reduce_window(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::ReduceWindow { window, body } = kind else {
        return Err(super::table::not_for("reduce-window", kind));
    };
    infer_reduce_window(cx.operands, window, cx.signature(*body).as_ref())
}

pub(crate) fn lower_reduce_window(
    kind: &OpKind,
    cx: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::ReduceWindow { window, body } = kind {
        p.window = Some(window_proto(window));
        p.called_computation_ids = vec![(cx.comp_id)(*body)];
    }
}

pub(crate) fn raise_reduce_window(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [body] = cx.calls(p)?;
    Ok(OpKind::ReduceWindow {
        window: raise_window(p)?.into(),
        body,
    })
}

pub(crate) fn text_reduce_window(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::ReduceWindow { window, body } = kind {
        out.attrs.push_str(&text_window(window));
        out.callee(cx, "to_apply", *body);
    }
}

impl Op {
    /// XLA's ReduceWindow with one input: reduces each window of `window` (one
    /// [`WindowDim`] per axis) starting from `init` with `body(acc, element)`. The
    /// body may use outside scalars.
    #[track_caller]
    pub fn reduce_window(
        &self,
        init: &Op,
        window: &[WindowDim],
        body: impl FnOnce(&Op, &Op) -> Op,
    ) -> Op {
        let loc = Location::caller();
        self.builder()
            .on(loc)
            .reduce_window_many(&[self], &[init], window, |a, e| vec![body(&a[0], &e[0])])
            .remove(0)
    }

    /// Max pooling: the maximum of each window (padding counts as −∞ for floats, the
    /// type's minimum for integers).
    #[track_caller]
    pub fn max_pool(&self, window: &[WindowDim]) -> Op {
        self.pool(window, BinaryOp::Maximum, Location::caller())
    }

    /// Sum pooling: the sum of each window (padding counts as 0).
    #[track_caller]
    pub fn sum_pool(&self, window: &[WindowDim]) -> Op {
        self.pool(window, BinaryOp::Add, Location::caller())
    }

    fn pool(&self, window: &[WindowDim], op: BinaryOp, loc: &'static Location<'static>) -> Op {
        let ty = match self.element_type() {
            Ok(t) => t,
            Err(_) => return self.builder().fail_not_array(self, "reduce-window", loc),
        };
        let init = match op {
            BinaryOp::Maximum if ty.is_float() => Scalar::Float(f64::NEG_INFINITY),
            BinaryOp::Maximum => match ty {
                ElementType::S8 => Scalar::Int(i8::MIN.into()),
                ElementType::S16 => Scalar::Int(i16::MIN.into()),
                ElementType::S32 => Scalar::Int(i32::MIN.into()),
                ElementType::S64 => Scalar::Int(i64::MIN),
                _ => Scalar::Int(0),
            },
            _ => Scalar::Int(0),
        };
        let init = self.builder().scalar_of(ty, init, loc);
        self.on(loc)
            .reduce_window(&init, window, |a, e| a.binary(op, e, loc))
    }
}

impl crate::builder::Builder {
    /// XLA's variadic ReduceWindow: reduces `inputs` (arrays of equal dimensions)
    /// together over each window of `window` (one [`WindowDim`] per axis), starting
    /// from `inits` (one scalar each), with `body(accumulators, elements)` returning
    /// the new accumulators. Returns one array per input. The body may use outside
    /// scalars.
    ///
    /// ```
    /// use xlaclient_core::ops::window::WindowDim;
    /// use xlaclient_core::{Builder, Comparison, Shape};
    /// // The maximum of each window of 2 and its index (an argmax pooling).
    /// let b = Builder::new("argmax_pool");
    /// let x = b.parameter(0, Shape::of::<f32>(&[6]), "x");
    /// let idx = b.constant_array(&[0i32, 1, 2, 3, 4, 5], &[6]);
    /// let out = b.reduce_window_many(
    ///     &[&x, &idx],
    ///     &[&b.constant(f32::NEG_INFINITY), &b.constant(0i32)],
    ///     &[WindowDim::new(2, 2)],
    ///     |acc, e| {
    ///         let take = e[0].compare(&acc[0], Comparison::Gt);
    ///         let bb = e[0].builder();
    ///         vec![bb.select(&take, &e[0], &acc[0]), bb.select(&take, &e[1], &acc[1])]
    ///     },
    /// );
    /// assert_eq!(out[1].dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn reduce_window_many(
        &self,
        inputs: &[&Op],
        inits: &[&Op],
        window: &[WindowDim],
        body: impl FnOnce(&[Op], &[Op]) -> Vec<Op>,
    ) -> Vec<Op> {
        let loc = Location::caller();
        const OP: &str = "reduce-window";
        let b = self;
        let failed = |op: Op| vec![op; inputs.len().max(1)];
        let all: Vec<&Op> = inputs.iter().chain(inits).copied().collect();
        let target = match b.target(&all, OP, loc) {
            Ok(t) => t,
            Err(f) => return failed(f),
        };
        let shapes: Vec<Shape> = all.iter().map(|o| o.shape().expect("checked")).collect();
        let refs: Vec<&Shape> = shapes.iter().collect();
        if inputs.len() != inits.len() {
            return failed(b.fail(
                ShapeError::new(
                    OP,
                    &refs,
                    ShapeErrorKind::Arity,
                    format!("{} inputs but {} initial values", inputs.len(), inits.len()),
                ),
                loc,
            ));
        }
        if let Err(e) = infer_reduce_window(&refs, window, None) {
            return failed(b.fail(e, loc));
        }
        let comp_name = format!(
            "reduce_window_{}",
            shapes[0].element_type().expect("checked")
        );
        b.emit_reducer(
            (OP, &comp_name),
            (target, loc),
            (inputs, inits),
            &shapes,
            body,
            |body| OpKind::ReduceWindow {
                window: window.into(),
                body,
            },
        )
    }
}

/// Reduce-window (see `reduce_window_cts`).
pub(crate) fn vjp_reduce_window(n: &Node) -> Grads {
    let OpKind::ReduceWindow { window, body } = n.kind else {
        return Err("not a reduce-window".into());
    };
    reduce_window_cts(window, *body, n, &n.array_cts()).map(arrays)
}

/// Reduce-window: a sum sends each window's cotangent back to the elements it
/// covered (the cotangent, spread by the strides and padded, summed over windows
/// again: JAX's transpose rule); a max or min sends it to the element the window
/// chose (select-and-scatter, first of equals; no dilation); a body that selects
/// (an argmax pooling, [`vjp_selection_reduce_window`](vjp_selection_reduce_window)) to the elements whose tuple
/// each window's result is. Other bodies have no rule yet.
fn reduce_window_cts(
    window: &[WindowDim],
    body: crate::ir::CompId,
    n: &crate::autodiff::Node,
    cts: &[Option<Op>],
) -> Result<Vec<Option<Op>>, String> {
    let m = n.operands.len() / 2;
    let combiner = if m == 1 {
        crate::ops::reduction::simple_combiner(n.b, body)
    } else {
        None
    };
    if combiner.is_none() {
        if let Some(reads_element) = crate::ops::reduction::selection_body(n.b, body, m) {
            return vjp_selection_reduce_window(window, n, cts, &reads_element);
        }
        return Err(if m == 1 {
            "this `reduce-window` combiner has no gradient rule yet (sum, max, min and bodies that select one of their parameters have)"
                .into()
        } else {
            "a variadic `reduce-window` has a gradient rule only when its body selects: each result one of its accumulator or element parameters for that position, chosen by `select` (or `max`/`min`), as an argmax pooling; this body computes its results otherwise"
                .into()
        });
    }
    let ct = &cts[0].clone().expect("called with a cotangent");
    let (x, loc) = (&n.operands[0], n.loc);
    let ty = x.element_type().unwrap_or(ElementType::F32);
    let b = x.builder();
    let zero = b.scalar_of(ty, crate::Scalar::Int(0), loc);
    match combiner {
        Some(BinaryOp::Add) => {
            let xd = x.dims().unwrap_or_default();
            let cd = ct.dims().unwrap_or_default();
            let config: Vec<crate::ops::slicing::PadDim> = window
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let before = dilated(w.size, w.window_dilation) - w.padding_low - 1;
                    let after = dilated(xd[i], w.base_dilation)
                        + dilated(w.size, w.window_dilation)
                        - 1
                        - dilated(cd[i], w.stride)
                        - before;
                    crate::ops::slicing::PadDim {
                        lo: before,
                        hi: after,
                        interior: w.stride - 1,
                    }
                })
                .collect();
            let spread = ct.pad(&zero, &config);
            let back: Vec<WindowDim> = window
                .iter()
                .map(|w| WindowDim {
                    size: w.size,
                    stride: w.base_dilation,
                    padding_low: 0,
                    padding_high: 0,
                    window_dilation: w.window_dilation,
                    base_dilation: 1,
                })
                .collect();
            let g = spread.reduce_window(&zero, &back, |a, e| a + e);
            Ok(vec![Some(g), None])
        }
        Some(op @ (BinaryOp::Maximum | BinaryOp::Minimum)) => {
            // The cotangent goes to the first maximum (minimum) of each window in
            // the window's order, as JAX's select-and-scatter-add with `ge` (`le`).
            let dir = if op == BinaryOp::Maximum {
                crate::Comparison::Ge
            } else {
                crate::Comparison::Le
            };
            if window
                .iter()
                .all(|w| w.window_dilation == 1 && w.base_dilation == 1)
            {
                let g =
                    x.select_and_scatter(ct, &zero, window, |a, e| a.compare(e, dir), |a, e| a + e);
                return Ok(vec![Some(g), None]);
            }
            // With dilation (which select-and-scatter has not): each window's
            // choice as a flat index, and the cotangent scatter-added there.
            let (at, kept) = window_choice(x, window, dir, loc)?;
            let xd = x.dims().unwrap_or_default();
            let ct = b.select(&kept, ct, &crate::autodiff::zeros_like(ct, loc));
            let flat = b
                .scalar_of(ty, crate::Scalar::Int(0), loc)
                .broadcast_to(&[xd.iter().product()]);
            let dims = crate::ops::indexing::ScatterDims {
                update_window_dims: vec![],
                inserted_window_dims: vec![0],
                scatter_dims_to_operand_dims: vec![0],
                index_vector_dim: xd.len() as i64,
                input_batching_dims: vec![],
                scatter_indices_batching_dims: vec![],
            };
            let g = b
                .scatter(&[&flat], &at, &[&ct], &dims, false, false, |o, u| {
                    vec![&o[0] + &u[0]]
                })
                .remove(0)
                .reshape(&xd);
            Ok(vec![Some(g), None])
        }
        _ => Err(
            "this `reduce-window` combiner has no gradient rule yet (sum, max, min and bodies that select one of their parameters have)".into(),
        ),
    }
}

/// A reduce-window whose body is a selection
/// ([`selection_body`](crate::ops::reduction::selection_body)), as an argmax
/// pooling: per window, each float result's cotangent goes to the window's elements
/// whose whole input tuple equals the result tuple (split among several), or where
/// none does (results chosen independently) to those where its own input equals it;
/// padding and base-dilation holes get nothing. Built from the window's taps: for
/// each tap and window position the flat index of the element it reads (a constant
/// per axis), the inputs gathered there, and the shares scatter-added back.
fn vjp_selection_reduce_window(
    window: &[WindowDim],
    n: &crate::autodiff::Node,
    cts: &[Option<Op>],
    reads_element: &[bool],
) -> Result<Vec<Option<Op>>, String> {
    use crate::ops::reduction::{logical_and, selection_shares, selection_todo};
    let m = n.operands.len() / 2;
    let (inputs, loc) = (&n.operands[..m], n.loc);
    let mut out = vec![None; 2 * m];
    let todo = selection_todo(n, cts, reads_element);
    let Some(ty) = todo.first().and_then(|j| inputs[*j].element_type().ok()) else {
        return Ok(out);
    };
    let xd = inputs[0].dims().map_err(|e| e.to_string())?;
    let od = n.results[0].dims().map_err(|e| e.to_string())?;
    let r = xd.len();
    let count: i64 = xd.iter().product();
    let taps: i64 = window.iter().map(|w| w.size).product();
    if count == 0 || taps * od.iter().product::<i64>() == 0 {
        return Ok(out);
    }
    let b = inputs[0].builder();
    let s64 = ElementType::S64;
    let zero = b.scalar_of(s64, Scalar::Int(0), loc);
    // Layout [tap axes..., window position axes...]: per axis, the input index tap
    // `k` of window `o` reads, or -1 (padding, a base-dilation hole).
    let full: Vec<i64> = window.iter().map(|w| w.size).chain(od.clone()).collect();
    let mut flat: Option<Op> = None;
    let mut valid: Option<Op> = None;
    let mut row = 1i64;
    for d in (0..r).rev() {
        let w = window[d];
        let mut at = Vec::with_capacity((w.size * od[d]) as usize);
        for k in 0..w.size {
            for o in 0..od[d] {
                let c = o * w.stride + k * w.window_dilation - w.padding_low;
                let hit = c >= 0 && c % w.base_dilation == 0 && c / w.base_dilation < xd[d];
                at.push(if hit { c / w.base_dilation } else { -1 });
            }
        }
        let at = b
            .constant_array(&at, &[w.size, od[d]])
            .broadcast_in_dim(&full, &[d as i64, (r + d) as i64]);
        let hit = at.compare(&zero, crate::Comparison::Ge);
        let term = at.binary(
            BinaryOp::Multiply,
            &b.scalar_of(s64, Scalar::Int(row), loc),
            loc,
        );
        flat = Some(match flat {
            None => term,
            Some(f) => f.binary(BinaryOp::Add, &term, loc),
        });
        valid = Some(match valid {
            None => hit,
            Some(v) => logical_and(&v, &hit),
        });
        row *= xd[d];
    }
    let (flat, valid) = (flat.expect("rank >= 1"), valid.expect("rank >= 1"));
    let wide: Vec<i64> = std::iter::once(taps).chain(od.clone()).collect();
    let valid = valid.reshape(&wide);
    let index = b.select(&valid, &flat.reshape(&wide), &zero.broadcast_to(&wide));
    let position_axes: Vec<i64> = (1..=r as i64).collect();
    let back = |v: &Op| v.broadcast_in_dim(&wide, &position_axes);
    let equal: Vec<Op> = (0..m)
        .map(|j| {
            let read = inputs[j].reshape(&[count]).take(&index, 0);
            let eq = read.compare(&back(&n.results[j]), crate::Comparison::Eq);
            logical_and(&valid, &eq)
        })
        .collect();
    let dims = crate::ops::indexing::ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: r as i64 + 1,
        input_batching_dims: vec![],
        scatter_indices_batching_dims: vec![],
    };
    let zeros = b.scalar_of(ty, Scalar::Int(0), loc).broadcast_to(&[count]);
    for (j, g) in selection_shares(&equal, &[0], &back, cts, &todo, ty, loc) {
        let g = b
            .scatter(&[&zeros], &index, &[&g], &dims, false, false, |o, u| {
                vec![&o[0] + &u[0]]
            })
            .remove(0)
            .reshape(&xd);
        out[j] = Some(g);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------
// `select-and-scatter`

/// Select-and-scatter rule: an operand array, a source of the operand's type shaped
/// like the operand's reduce-window output for this window, a scalar initial value;
/// `select(a, b)` maps two scalars to `pred`, `scatter(acc, x)` two scalars to one.
/// The result has the operand's shape.
pub fn infer_select_and_scatter(
    operands: &[&Shape],
    window: &[WindowDim],
    select: Option<&(Vec<Shape>, Shape)>,
    scatter: Option<&(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "select-and-scatter";
    let (operand, source, init) = (operands[0], operands[1], operands[2]);
    let (ty, d) = array_of(OP, operand)?;
    if d.is_empty() {
        // XLA aborts the process compiling a rank-0 select-and-scatter ("Check
        // failed: param_instructions_[param_no] == nullptr"; found by the fuzzer).
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Rank,
            "needs an operand of rank 1 or more",
        ));
    }
    let pooled = infer_reduce_window(&[operand, init], window, None).map_err(|mut e| {
        e.op = OP;
        e
    })?;
    let (st, _) = array_of(OP, source)?;
    if st != ty || &pooled != source {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Dimension,
            format!("the source must be the window's output shape {pooled}, got {source}"),
        ));
    }
    let s = Shape::scalar(ty);
    if let Some((p, r)) = select {
        if *p != [s.clone(), s.clone()] || *r != Shape::scalar(ElementType::Pred) {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Body,
                format!("select must map ({s}, {s}) to pred[]"),
            ));
        }
    }
    if let Some((p, r)) = scatter {
        if *p != [s.clone(), s.clone()] || *r != s {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Body,
                format!("scatter must map ({s}, {s}) to {s}"),
            ));
        }
    }
    Ok(operand.clone())
}

pub(crate) fn shape_select_and_scatter(
    kind: &OpKind,
    cx: &InferCx<'_>,
) -> Result<Shape, ShapeError> {
    let OpKind::SelectAndScatter {
        window,
        select,
        scatter,
    } = kind
    else {
        return Err(super::table::not_for("select-and-scatter", kind));
    };
    infer_select_and_scatter(
        cx.operands,
        window,
        cx.signature(*select).as_ref(),
        cx.signature(*scatter).as_ref(),
    )
}

pub(crate) fn lower_select_and_scatter(
    kind: &OpKind,
    cx: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::SelectAndScatter {
        window,
        select,
        scatter,
    } = kind
    {
        p.window = Some(window_proto(window));
        p.called_computation_ids = vec![(cx.comp_id)(*select), (cx.comp_id)(*scatter)];
    }
}

pub(crate) fn raise_select_and_scatter(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [select, scatter] = cx.calls(p)?;
    Ok(OpKind::SelectAndScatter {
        window: raise_window(p)?.into(),
        select,
        scatter,
    })
}

pub(crate) fn text_select_and_scatter(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::SelectAndScatter {
        window,
        select,
        scatter,
    } = kind
    {
        out.attrs.push_str(&text_window(window));
        out.callee(cx, "select", *select);
        out.callee(cx, "scatter", *scatter);
    }
}

impl Op {
    /// XLA's SelectAndScatter: for each window position, `select(a, b)` (keep `a`
    /// over `b`) picks one element of this array's window, and the matching element
    /// of `source` (shaped like the pooled output) is combined into the result at
    /// that element with `scatter(acc, x)`, starting from `init` everywhere. The
    /// gradient of max pooling is `select = a >= b`, `scatter = acc + x`. The bodies
    /// cannot use outside values yet.
    #[track_caller]
    pub fn select_and_scatter(
        &self,
        source: &Op,
        init: &Op,
        window: &[WindowDim],
        select: impl FnOnce(&Op, &Op) -> Op,
        scatter: impl FnOnce(&Op, &Op) -> Op,
    ) -> Op {
        let loc = Location::caller();
        let b = self.builder();
        let target = match b.target(&[self, source, init], "select-and-scatter", loc) {
            Ok(t) => t,
            Err(f) => return f,
        };
        let shapes: Vec<Shape> = [self, source, init]
            .iter()
            .map(|o| o.shape().expect("checked"))
            .collect();
        let refs: Vec<&Shape> = shapes.iter().collect();
        if let Err(e) = infer_select_and_scatter(&refs, window, None, None) {
            return b.fail(e, loc);
        }
        let s = Shape::scalar(shapes[0].element_type().expect("checked"));
        let mut bodies = Vec::new();
        for (name, f) in [
            (
                "select",
                Box::new(select) as Box<dyn FnOnce(&Op, &Op) -> Op>,
            ),
            ("scatter", Box::new(scatter)),
        ] {
            let (comp, roots) = match b.body(target, name, &[s.clone(), s.clone()], loc, |_, p| {
                vec![f(&p[0], &p[1])]
            }) {
                Ok(r) => r,
                Err(f) => return f,
            };
            if !b.g.borrow().comp(comp).captures.is_empty() {
                // XLA fixes both bodies' signatures and has no operand to carry an
                // outside value through.
                return b.fail(
                    ShapeError::new(
                        "select-and-scatter",
                        &refs,
                        ShapeErrorKind::Body,
                        format!("the {name} body cannot use values from outside it yet"),
                    ),
                    loc,
                );
            }
            b.g.borrow_mut().comp_mut(comp).root = Some(roots[0]);
            bodies.push(comp);
        }
        b.emit(
            OpKind::SelectAndScatter {
                window: window.into(),
                select: bodies[0],
                scatter: bodies[1],
            },
            &[self, source, init],
            None,
            loc,
        )
    }
}

/// Select-and-scatter (see `select_and_scatter_cts`).
pub(crate) fn vjp_select_and_scatter(n: &Node) -> Grads {
    let OpKind::SelectAndScatter {
        window,
        select,
        scatter,
    } = n.kind
    else {
        return Err("not a select-and-scatter".into());
    };
    select_and_scatter_cts(window, *select, *scatter, n, &n.ct()).map(arrays)
}

/// Select-and-scatter with `select = a <dir> b` and `scatter = acc + x` (the
/// gradient of max or min pooling): each source element's cotangent is the
/// cotangent at the element its window picked (JAX's select-and-gather-add), zero
/// for a window that picked none; the initial value, added to every element, gets
/// the cotangent's sum; the operand only decides the picks, so it gets none.
fn select_and_scatter_cts(
    window: &[WindowDim],
    select: crate::ir::CompId,
    scatter: crate::ir::CompId,
    n: &crate::autodiff::Node,
    ct: &Op,
) -> Result<Vec<Option<Op>>, String> {
    let dir = simple_select(n.b, select);
    let add = crate::ops::reduction::simple_combiner(n.b, scatter) == Some(BinaryOp::Add);
    let Some(dir) = dir.filter(|_| add) else {
        return Err(
            "only a `select-and-scatter` that selects with one comparison (a >= b, a > b, a <= b, a < b) and scatters by adding has a gradient rule"
                .into(),
        );
    };
    let (x, loc) = (&n.operands[0], n.loc);
    let b = x.builder();
    let (at, kept) = window_choice(x, window, dir, loc)?;
    let n_all: i64 = ct.dims().unwrap_or_default().iter().product();
    let picked = ct.reshape(&[n_all]).take(&at, 0);
    let ct_src = b.select(&kept, &picked, &crate::autodiff::zeros_like(&picked, loc));
    let rank = ct.dims().unwrap_or_default().len() as i64;
    let all: Vec<i64> = (0..rank).collect();
    let ct_init = ct.reduce_by(&all, BinaryOp::Add, loc);
    Ok(vec![None, Some(ct_src), Some(ct_init)])
}

/// The direction of a select-and-scatter's `select` body when it is one comparison
/// of its two parameters in order (`a >= b` for max pooling's gradient).
pub(crate) fn simple_select(
    b: &crate::builder::Builder,
    body: crate::ir::CompId,
) -> Option<crate::Comparison> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let ins = c.instrs.get(c.root?.instr as usize)?;
    let OpKind::Compare(dir) = ins.kind else {
        return None;
    };
    let params: Vec<u32> = c.params.iter().filter_map(|p| *p).collect();
    let ops: Vec<u32> = ins.operands.iter().map(|v| v.instr).collect();
    (params.len() == 2 && ops == params).then_some(dir)
}

/// For each window of `x` (one element per output position of a reduce-window of
/// `window`): the row-major flat index into `x` of the element a select-and-scatter
/// with `select = a <dir> b` picks: the greatest (`Ge`, `Gt`) or least (`Le`, `Lt`),
/// among equals the first in the window's order (`Ge`, `Le`) or the last (`Gt`,
/// `Lt`). Padding and base-dilation holes are never picked; a window of nothing
/// else has no pick. Returns the indices (`s32`, clamped into `x`) and whether
/// each window picked an element. Built as a reduce-window over (value, index)
/// pairs, so it handles every window, dilated or not.
pub(crate) fn window_choice(
    x: &Op,
    window: &[WindowDim],
    dir: crate::Comparison,
    loc: &'static Location<'static>,
) -> Result<(Op, Op), String> {
    use crate::Comparison as C;
    let b = x.builder();
    let ty = x.element_type().map_err(|e| e.to_string())?;
    if !ty.is_float() {
        return Err(format!("a window choice over {ty} values has no gradient"));
    }
    let xd = x.dims().map_err(|e| e.to_string())?;
    let n: i64 = xd.iter().product();
    if n >= i64::from(i32::MAX) {
        return Err(format!("{n} elements are too many to index with s32"));
    }
    let (greater, first) = match dir {
        C::Ge => (true, true),
        C::Gt => (true, false),
        C::Le => (false, true),
        C::Lt => (false, false),
        other => {
            return Err(format!(
                "a `select` comparing with {other:?} has no gradient rule"
            ));
        }
    };
    let s32 = ElementType::S32;
    let index = b.iota(s32, &[n], 0).reshape(&xd);
    let init_v = b.scalar_of(
        ty,
        Scalar::Float(if greater {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }),
        loc,
    );
    // Among equal values the preferred index wins; padding's index never is.
    let init_i = b.scalar_of(
        s32,
        Scalar::Int(if first { i64::from(i32::MAX) } else { -1 }),
        loc,
    );
    let (vs, is) = (Shape::scalar(ty), Shape::scalar(s32));
    let (comp, roots) = b
        .body(
            x.comp,
            "window_choice",
            &[vs.clone(), is.clone(), vs, is],
            loc,
            |bb, p| {
                let (av, ai, ev, ei) = (&p[0], &p[1], &p[2], &p[3]);
                let better = av.compare(ev, if greater { C::Gt } else { C::Lt });
                let tie = av.compare(ev, C::Eq);
                let earlier = ai.compare(ei, if first { C::Lt } else { C::Gt });
                use crate::ops::bitwise::BitwiseOp;
                let keep = better.bitwise(
                    BitwiseOp::Or,
                    &tie.bitwise(BitwiseOp::And, &earlier, loc),
                    loc,
                );
                vec![bb.select(&keep, av, ev), bb.select(&keep, ai, ei)]
            },
        )
        .map_err(
            |_| "its window choice (a reduce-window over value-index pairs) failed to build",
        )?;
    b.finish_body(comp, &roots, loc).map_err(
        |_| "its window choice (a reduce-window over value-index pairs) failed to build",
    )?;
    let r = b.emit(
        OpKind::ReduceWindow {
            window: window.into(),
            body: comp,
        },
        &[x, &index, &init_v, &init_i],
        None,
        loc,
    );
    let at = b.results(r, 2, true).remove(1);
    let zero = b.scalar_of(s32, Scalar::Int(0), loc);
    let last = b.scalar_of(s32, Scalar::Int(n - 1), loc);
    let kept = at.compare(&zero, C::Ge).bitwise(
        crate::ops::bitwise::BitwiseOp::And,
        &at.compare(&last, C::Le),
        loc,
    );
    let at = at
        .binary(BinaryOp::Maximum, &zero, loc)
        .binary(BinaryOp::Minimum, &last, loc);
    Ok((at, kept))
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: a window of 1 over the batch axis.
pub(crate) fn batch_reduce_window(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::ReduceWindow { window, body } = n.kind else {
        return Err("not a reduce-window".into());
    };
    let ops = crate::batching::inputs_then_inits(n)?;
    crate::batching::emit_front_ops(
        n,
        OpKind::ReduceWindow {
            window: unit_window(window),
            body: *body,
        },
        &ops,
    )
}

/// A window of size 1 over a new leading axis, then `w`.
fn unit_window(w: &[WindowDim]) -> Box<[WindowDim]> {
    let mut d = vec![WindowDim {
        size: 1,
        stride: 1,
        padding_low: 0,
        padding_high: 0,
        window_dilation: 1,
        base_dilation: 1,
    }];
    d.extend(w.iter().copied());
    d.into()
}

/// Batching: operand and source batched at 0 with a window of 1 over the batch
/// axis; the initial value must be the same for every example.
pub(crate) fn batch_select_and_scatter(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::SelectAndScatter {
        window,
        select,
        scatter,
    } = n.kind
    else {
        return Err("not a select-and-scatter".into());
    };
    if n.operands[2].is_batched() {
        return Err("an initial value that differs per example".into());
    }
    let init = n.operands[2].array()?.0.clone();
    crate::batching::emit_front_ops(
        n,
        OpKind::SelectAndScatter {
            window: unit_window(window),
            select: *select,
            scatter: *scatter,
        },
        &[n.front(0)?, n.front(1)?, init],
    )
}

/// Tangent: a windowed sum is linear.
pub(crate) fn jvp_reduce_window(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let OpKind::ReduceWindow { body, .. } = n.kind else {
        return Err("not a reduce-window".into());
    };
    match (
        n.operands.len(),
        super::reduction::simple_combiner(n.b, *body),
    ) {
        (2, Some(BinaryOp::Add)) => crate::forward::linear(n),
        (2, Some(op @ (BinaryOp::Maximum | BinaryOp::Minimum))) => jvp_pool(n, op),
        _ => Err("a tangent rule for a windowed sum, max or min only".into()),
    }
}

/// Tangent of max (min) pooling: a reduce-window over the values and their
/// tangents together whose body keeps the pair with the larger (smaller) value,
/// so each window's tangent is the tangent at its arg-max (the initial value's
/// where the window holds only padding).
fn jvp_pool(n: &crate::forward::JvpNode, op: BinaryOp) -> crate::forward::Tangents {
    let OpKind::ReduceWindow { window, .. } = n.kind else {
        return Err("not a reduce-window".into());
    };
    let dir = if op == BinaryOp::Maximum {
        crate::Comparison::Gt
    } else {
        crate::Comparison::Lt
    };
    let (x, init) = (&n.operands[0], &n.operands[1]);
    let (tx, ti) = (n.tangent(0), n.tangent(1));
    let out =
        n.b.reduce_window_many(&[x, &tx], &[init, &ti], window, |acc, e| {
            let bb = e[0].builder();
            let take = e[0].compare(&acc[0], dir);
            vec![
                bb.select(&take, &e[0], &acc[0]),
                bb.select(&take, &e[1], &acc[1]),
            ]
        });
    if let Some(e) = crate::batching::failure(&out[1]) {
        return Err(e);
    }
    Ok(vec![Some(crate::autodiff::Ct::Array(out[1].clone()))])
}

/// Tangent: linear in the source and the initial value when the scatter adds
/// (the selection, by the operand, is piecewise constant: the same selection
/// scatters the source's tangent).
pub(crate) fn jvp_select_and_scatter(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let OpKind::SelectAndScatter { scatter, .. } = n.kind else {
        return Err("not a select-and-scatter".into());
    };
    if super::reduction::simple_combiner(n.b, *scatter) != Some(BinaryOp::Add) {
        return Err("a scatter that does not add".into());
    }
    n.emit_like(
        n.kind.clone(),
        &[n.operands[0].clone(), n.tangent(1), n.tangent(2)],
    )
}
