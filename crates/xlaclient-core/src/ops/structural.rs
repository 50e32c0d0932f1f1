//! Structural ops: parameters, constants, tuples. (Parameters are declared with
//! [`Builder::parameter`]; their rule lives here.)
use crate::autodiff::{Ct, Grads, Node, arrays};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, NativeType, Shape};
use std::panic::Location;

// ---------------------------------------------------------------------------------
// `parameter` (declared with `Builder::parameter`)

/// Parameter rule: any shape without negative dimensions (tuples included, for
/// bodies; the verifier requires arrays for the entry's parameters).
pub fn infer_parameter(shape: &Shape) -> Result<Shape, ShapeError> {
    check_dims("parameter", shape)?;
    Ok(shape.clone())
}

fn check_dims(op: &'static str, s: &Shape) -> Result<(), ShapeError> {
    match s {
        Shape::Array { dims, .. } => {
            if dims.iter().any(|d| *d < 0) {
                return Err(ShapeError::new(
                    op,
                    &[],
                    ShapeErrorKind::Dimension,
                    format!("negative dimension in {s}"),
                ));
            }
            super::check_size(op, &[], s)
        }
        Shape::Tuple(e) => e.iter().try_for_each(|s| check_dims(op, s)),
        Shape::Token => Ok(()),
    }
}

pub(crate) fn shape_parameter(_: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    infer_parameter(cx.target("parameter")?)
}

pub(crate) fn lower_parameter(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Parameter { number, .. } = kind {
        p.parameter_number = *number as i64;
    }
}

pub(crate) fn raise_parameter(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Parameter {
        number: u32::try_from(p.parameter_number)
            .map_err(|_| format!("parameter number {} out of range", p.parameter_number))?,
        name: p.name.as_str().into(),
    })
}

pub(crate) fn text_parameter(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Parameter { number, .. } = kind {
        out.args = Some(number.to_string());
    }
}

// ---------------------------------------------------------------------------------
// `constant`

/// Constant rule: an array shape whose element count times element size is the
/// literal's byte length.
pub fn infer_constant(bytes: &[u8], shape: &Shape) -> Result<Shape, ShapeError> {
    check_dims("constant", shape)?;
    let Shape::Array { ty, dims } = shape else {
        return Err(ShapeError::new(
            "constant",
            &[],
            ShapeErrorKind::Rank,
            format!("a constant is an array, not {shape}"),
        ));
    };
    let count = dims
        .iter()
        .try_fold(1i64, |a, d| a.checked_mul(*d))
        .and_then(|c| (c as u64).checked_mul(ty.byte_size() as u64));
    if count != Some(bytes.len() as u64) {
        return Err(ShapeError::new(
            "constant",
            &[],
            ShapeErrorKind::Dimension,
            format!(
                "{} bytes of data for shape {shape} ({} elements)",
                bytes.len(),
                dims.iter()
                    .try_fold(1i64, |a, d| a.checked_mul(*d))
                    .map_or("overflowing".to_string(), |c| c.to_string())
            ),
        ));
    }
    Ok(shape.clone())
}

pub(crate) fn shape_constant(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Constant(bytes) = kind else {
        return Err(super::table::not_for("constant", kind));
    };
    infer_constant(bytes, cx.target("constant")?)
}

pub(crate) fn lower_constant(kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Constant(bytes) = kind {
        p.literal = Some(literal_proto(cx.shape, bytes));
    }
}

pub(crate) fn raise_constant(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let lit = p.literal.as_ref().ok_or("a constant without a literal")?;
    Ok(OpKind::Constant(literal_bytes(lit, cx.shape)?.into()))
}

pub(crate) fn text_constant(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Constant(bytes) = kind {
        out.args = Some(literal_text(cx.shape, bytes));
    }
}

/// The literal of a constant of `shape` holding `bytes` (little-endian elements).
pub(crate) fn literal_proto(shape: &Shape, bytes: &[u8]) -> proto::LiteralProto {
    let mut l = proto::LiteralProto {
        shape: Some(shape.to_proto()),
        ..Default::default()
    };
    let Some(ty) = shape.element_type() else {
        return l;
    };
    macro_rules! words {
        ($t:ty, $n:literal) => {
            bytes
                .chunks_exact($n)
                .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk size")))
        };
    }
    use ElementType::*;
    match ty {
        Pred => l.preds = bytes.iter().map(|b| *b != 0).collect(),
        S8 => l.s8s = bytes.to_vec(),
        U8 => l.u8s = bytes.to_vec(),
        // 16-bit types are stored as little-endian bytes in the proto.
        S16 => l.s16s = bytes.to_vec(),
        U16 => l.u16s = bytes.to_vec(),
        F16 => l.f16s = bytes.to_vec(),
        Bf16 => l.bf16s = bytes.to_vec(),
        F8E5M2 => l.f8e5m2s = bytes.to_vec(),
        F8E4M3FN => l.f8e4m3fns = bytes.to_vec(),
        S32 => l.s32s = words!(i32, 4).collect(),
        U32 => l.u32s = words!(u32, 4).collect(),
        S64 => l.s64s = words!(i64, 8).collect(),
        U64 => l.u64s = words!(u64, 8).collect(),
        F32 => l.f32s = words!(f32, 4).collect(),
        F64 => l.f64s = words!(f64, 8).collect(),
        C64 => l.c64s = words!(f32, 4).collect(),
        C128 => l.c128s = words!(f64, 8).collect(),
    }
    l
}

/// The little-endian element bytes of a literal of `shape` (the inverse of
/// [`literal_proto`]); the literal's own shape must be `shape`.
pub(crate) fn literal_bytes(l: &proto::LiteralProto, shape: &Shape) -> Result<Vec<u8>, String> {
    let ls = l
        .shape
        .as_ref()
        .and_then(Shape::from_proto)
        .ok_or("a literal without a readable shape")?;
    if &ls != shape {
        return Err(format!(
            "the literal's shape {ls} is not the instruction's {shape}"
        ));
    }
    let Some(ty) = shape.element_type() else {
        return Err(format!("a constant of shape {shape}"));
    };
    fn le<T: Copy, const N: usize>(v: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|x| f(*x)).collect()
    }
    use ElementType::*;
    Ok(match ty {
        Pred => l.preds.iter().map(|b| *b as u8).collect(),
        S8 => l.s8s.clone(),
        U8 => l.u8s.clone(),
        S16 => l.s16s.clone(),
        U16 => l.u16s.clone(),
        F16 => l.f16s.clone(),
        Bf16 => l.bf16s.clone(),
        F8E5M2 => l.f8e5m2s.clone(),
        F8E4M3FN => l.f8e4m3fns.clone(),
        S32 => le(&l.s32s, i32::to_le_bytes),
        U32 => le(&l.u32s, u32::to_le_bytes),
        S64 => le(&l.s64s, i64::to_le_bytes),
        U64 => le(&l.u64s, u64::to_le_bytes),
        F32 => le(&l.f32s, f32::to_le_bytes),
        F64 => le(&l.f64s, f64::to_le_bytes),
        C64 => le(&l.c64s, f32::to_le_bytes),
        C128 => le(&l.c128s, f64::to_le_bytes),
    })
}

/// A constant's value as HLO text (`1.5`, `{1, 2, 3}`; long ones elided).
pub(crate) fn literal_text(shape: &Shape, bytes: &[u8]) -> String {
    let Some(ty) = shape.element_type() else {
        return String::new();
    };
    macro_rules! fmt {
        ($t:ty, $n:literal, $f:expr) => {
            bytes
                .chunks_exact($n)
                .map(|c| $f(<$t>::from_le_bytes(c.try_into().expect("chunk size"))))
                .collect::<Vec<String>>()
        };
    }
    use ElementType::*;
    let vals: Vec<String> = match ty {
        Pred => bytes.iter().map(|b| (*b != 0).to_string()).collect(),
        S8 => fmt!(i8, 1, |v: i8| v.to_string()),
        U8 => fmt!(u8, 1, |v: u8| v.to_string()),
        S16 => fmt!(i16, 2, |v: i16| v.to_string()),
        U16 => fmt!(u16, 2, |v: u16| v.to_string()),
        S32 => fmt!(i32, 4, |v: i32| v.to_string()),
        U32 => fmt!(u32, 4, |v: u32| v.to_string()),
        S64 => fmt!(i64, 8, |v: i64| v.to_string()),
        U64 => fmt!(u64, 8, |v: u64| v.to_string()),
        F32 => fmt!(f32, 4, |v: f32| format!("{v:?}")),
        F64 => fmt!(f64, 8, |v: f64| format!("{v:?}")),
        F16 => fmt!(half::f16, 2, |v: half::f16| format!("{:?}", v.to_f32())),
        Bf16 => fmt!(half::bf16, 2, |v: half::bf16| format!("{:?}", v.to_f32())),
        F8E5M2 => bytes
            .iter()
            .map(|b| format!("{:?}", crate::float8::F8E5M2(*b).to_f32()))
            .collect(),
        F8E4M3FN => bytes
            .iter()
            .map(|b| format!("{:?}", crate::float8::F8E4M3FN(*b).to_f32()))
            .collect(),
        C64 | C128 => vec!["...".into()],
    };
    const MAX: usize = 8;
    if vals.len() == 1 && shape.rank() == 0 {
        vals[0].clone()
    } else if vals.len() <= MAX {
        format!("{{{}}}", vals.join(", "))
    } else {
        format!("{{{}, ...}}", vals[..MAX].join(", "))
    }
}

impl Builder {
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
        let count = dims
            .iter()
            .try_fold(1i64, |a, d| if *d < 0 { None } else { a.checked_mul(*d) });
        if count != Some(values.len() as i64) {
            return self.fail(
                ShapeError::new(
                    "constant",
                    &[],
                    ShapeErrorKind::Dimension,
                    format!(
                        "{} values given for shape {} ({} elements)",
                        values.len(),
                        Shape::of::<T>(dims),
                        count.map_or("overflowing".to_string(), |c| c.to_string())
                    ),
                ),
                loc,
            );
        }
        let mut bytes = Vec::with_capacity(values.len() * T::TYPE.byte_size());
        T::extend_le_bytes(values, &mut bytes);
        self.constant_bytes(Shape::of::<T>(dims), bytes, loc)
    }

    /// A constant of `shape` from its elements' little-endian bytes.
    pub(crate) fn constant_bytes(
        &self,
        shape: Shape,
        bytes: Vec<u8>,
        loc: &'static Location<'static>,
    ) -> Op {
        self.emit(OpKind::Constant(bytes.into()), &[], Some(shape), loc)
    }
}

#[cfg(test)]
mod constant_tests {
    use super::*;

    #[test]
    fn constant_rule_checks_the_byte_count() {
        let s = Shape::of::<f32>(&[2]);
        assert_eq!(infer_constant(&[0; 8], &s).unwrap(), s);
        let e = infer_constant(&[0; 4], &s).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::Dimension);
        let huge = Shape::of::<f32>(&[i64::MAX, 4]);
        assert!(infer_constant(&[], &huge).is_err());
    }

    #[test]
    fn literals_round_trip_through_the_proto_fields() {
        let s = Shape::of::<i32>(&[3]);
        let mut b = Vec::new();
        i32::extend_le_bytes(&[1, -2, 3], &mut b);
        assert_eq!(literal_proto(&s, &b).s32s, vec![1, -2, 3]);
        assert_eq!(literal_text(&s, &b), "{1, -2, 3}");
        let f = Shape::of::<f32>(&[]);
        assert_eq!(literal_text(&f, &1.5f32.to_le_bytes()), "1.5");
        // f16 and bf16 travel as raw little-endian bytes in their own fields.
        let h = Shape::of::<half::f16>(&[2]);
        let mut b = Vec::new();
        half::f16::extend_le_bytes(&[half::f16::from_f64(-0.5), half::f16::INFINITY], &mut b);
        assert_eq!(literal_proto(&h, &b).f16s, [0x00, 0xb8, 0x00, 0x7c]);
        assert_eq!(literal_text(&h, &b), "{-0.5, inf}");
        let bh = Shape::of::<half::bf16>(&[]);
        let l = literal_proto(&bh, &half::bf16::from_f64(3.0).to_le_bytes());
        assert_eq!(l.bf16s, 3.0f32.to_le_bytes()[2..]);
        assert!(l.f16s.is_empty() && l.f32s.is_empty());
        assert_eq!(literal_bytes(&l, &bh).unwrap(), l.bf16s);
    }
}

// ---------------------------------------------------------------------------------
// `tuple`

/// Tuple rule: any operands; their shapes in order.
pub fn infer_tuple(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    Ok(Shape::Tuple(
        operands.iter().map(|s| (*s).clone()).collect(),
    ))
}

pub(crate) fn shape_tuple(_: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    infer_tuple(cx.operands)
}

pub(crate) fn raise_tuple(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Tuple)
}

impl Builder {
    /// A tuple of values (e.g. several outputs of a computation).
    #[track_caller]
    pub fn tuple(&self, elems: &[&Op]) -> Op {
        self.emit(OpKind::Tuple, elems, None, Location::caller())
    }
}

/// Tuple: the cotangent's elements go to the operands.
pub(crate) fn vjp_tuple(n: &Node) -> Grads {
    Ok(match n.cts.first() {
        Some(Some(Ct::Tuple(parts))) => arrays(parts.clone()),
        _ => vec![None; n.operands.len()],
    })
}

// ---------------------------------------------------------------------------------
// `call` (functions, `custom_vjp`)

/// Call rule: the operands are the callee's parameters, shape for shape; the result
/// is the callee's.
pub fn infer_call(
    operands: &[&Shape],
    body: Option<&(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    let Some((params, result)) = body else {
        return Err(ShapeError::new(
            "call",
            operands,
            ShapeErrorKind::Body,
            "the called computation is not finished",
        ));
    };
    if params.len() != operands.len() || params.iter().zip(operands).any(|(p, o)| p != *o) {
        return Err(ShapeError::new(
            "call",
            operands,
            ShapeErrorKind::Body,
            format!(
                "the called computation takes ({})",
                params
                    .iter()
                    .map(Shape::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(result.clone())
}

pub(crate) fn shape_call(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Call { body } = kind else {
        return Err(super::table::not_for("call", kind));
    };
    infer_call(cx.operands, cx.signature(*body).as_ref())
}

pub(crate) fn lower_call(kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Call { body } = kind {
        p.called_computation_ids = vec![(cx.comp_id)(*body)];
    }
}

pub(crate) fn raise_call(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [body] = cx.calls(p)?;
    Ok(OpKind::Call { body })
}

pub(crate) fn text_call(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Call { body } = kind {
        out.callee(cx, "to_apply", *body);
    }
}

impl Builder {
    /// XLA's Call: runs `body` as a computation of its own on `args` and returns its
    /// results. The body may use values from outside it (they are passed in as more
    /// arguments). Several results travel as a tuple, taken apart here. To call the
    /// same computation from several places, define it once with
    /// [`Builder::function`].
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("c");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let k = b.parameter(1, Shape::of::<f32>(&[]), "k");
    /// let out = b.call("scaled", &[&x], |_, p| vec![&p[0] * &k, p[0].exp()]);
    /// assert_eq!(out[1].dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn call(
        &self,
        name: &str,
        args: &[&Op],
        body: impl FnOnce(&Builder, &[Op]) -> Vec<Op>,
    ) -> Vec<Op> {
        self.call_at(name, args, body, Location::caller())
    }

    /// A function with its own backward rule (`jax.custom_vjp`): the result is
    /// `forward(args)`, computed as a `call`; the gradient pass does not look inside
    /// `forward` but calls `backward(args, results, cotangents)`, which returns one
    /// cotangent per argument (of its shape), for instance a numerically stable
    /// formula or a straight-through estimator. `backward` builds ops in the
    /// computation where the gradient is taken.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("clipped");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// // Identity forward, gradient clipped to [-1, 1] backward.
    /// let y = b.custom_vjp(
    ///     "clip_grad",
    ///     &[&x],
    ///     |_, a| vec![a[0].clone()],
    ///     |_, _, ct| vec![ct[0].clip(-1.0, 1.0)],
    /// );
    /// let g = b.grad(&y[0].reduce_sum(&[0]), &x);
    /// assert_eq!(g.dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn custom_vjp(
        &self,
        name: &str,
        args: &[&Op],
        forward: impl FnOnce(&Builder, &[Op]) -> Vec<Op>,
        backward: impl Fn(&[Op], &[Op], &[Op]) -> Vec<Op> + 'static,
    ) -> Vec<Op> {
        let out = self.call_at(name, args, forward, Location::caller());
        if let Some(key) = self.call_instruction(&out) {
            let rule: BackwardRule = std::rc::Rc::new(backward);
            self.g
                .borrow_mut()
                .custom_vjps
                .insert(key, (args.len(), rule));
        }
        out
    }

    /// [`call`](Self::call) for the user's line `loc`.
    #[track_caller]
    fn call_at(
        &self,
        name: &str,
        args: &[&Op],
        body: impl FnOnce(&Builder, &[Op]) -> Vec<Op>,
        loc: &'static Location<'static>,
    ) -> Vec<Op> {
        let target = match self.target(args, "call", loc) {
            Ok(t) => t,
            Err(failed) => return vec![failed],
        };
        let shapes: Vec<Shape> = args.iter().map(|a| a.shape().expect("checked")).collect();
        self.define(target, name, &shapes, body, loc).call(args)
    }

    /// The call instruction behind a call's results: the result itself, or the
    /// tuple its elements come from (`None` for a failed call).
    fn call_instruction(&self, out: &[Op]) -> Option<(crate::ir::CompId, u32)> {
        let first = out.first().filter(|o| !o.is_poisoned())?;
        let g = self.g.borrow();
        let ins = &g.comp(first.comp).instrs[first.v.instr as usize];
        Some(match ins.kind {
            OpKind::GetTupleElement { .. } => (first.comp, ins.operands[0].instr),
            _ => (first.comp, first.v.instr),
        })
    }

    /// `jax.checkpoint` (`jax.remat`) of a function: `body` on `args` as a
    /// [`call`](Self::call), whose gradient does not read the values computed inside
    /// it but computes them again in the backward pass, from the call's operands
    /// behind an [`optimization_barrier`](Self::optimization_barrier) (so that XLA
    /// cannot merge the recomputation back into the forward pass: JAX's
    /// `prevent_cse`). Memory for time: only the arguments (and the values the body
    /// reads from outside) are kept for the backward pass. Values and gradients are
    /// the same as without it. JAX's policy argument is what
    /// [`CheckpointPolicy`](crate::CheckpointPolicy) gives per loop body; a
    /// checkpointed function saves nothing (`nothing_saveable`, JAX's default).
    /// Measured (`tests/checkpoint_policies.rs`, twelve blocks of two 128×128
    /// matmuls): temp memory 0.8 MiB against 1.5 MiB without, on plugin 0.115; the
    /// 0.81 plugin's XLA merges the recomputation back (no memory saved).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("remat");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    /// let w = b.parameter(1, Shape::of::<f32>(&[4]), "w");
    /// let y = b.checkpoint("block", &[&x], |_, a| vec![(&a[0] * &w).tanh().sin()]);
    /// let g = b.grad(&y[0].reduce_sum(&[0]), &w); // recomputes tanh, sin
    /// assert!(b.build(&g)?.to_hlo_text().contains("opt-barrier"));
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn checkpoint(
        &self,
        name: &str,
        args: &[&Op],
        body: impl FnOnce(&Builder, &[Op]) -> Vec<Op>,
    ) -> Vec<Op> {
        let out = self.call_at(name, args, body, Location::caller());
        if let Some(key) = self.call_instruction(&out) {
            self.g
                .borrow_mut()
                .checkpointed
                .insert(key, crate::CheckpointPolicy::Nothing);
        }
        out
    }

    /// Defines a function: `body` on parameters of `params`, emitted once as a
    /// computation of its own, called with [`Function::call`] from any number of
    /// places (in this computation or in the bodies of loops and branches inside
    /// it), each call an XLA `call` of the same computation. The body may use
    /// values from outside it; they are passed in at every call.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("twice");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let w = b.parameter(1, Shape::of::<f32>(&[3]), "w");
    /// let layer = b.function("layer", &[Shape::of::<f32>(&[3])], |_, p| {
    ///     vec![(&p[0] * &w).tanh()]
    /// });
    /// let h = layer.call(&[&x]);
    /// let y = layer.call(&[&h[0]]);
    /// let m = b.build(&y[0])?;
    /// assert_eq!(m.to_hlo_text().matches("layer").count() >= 3, true);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn function(
        &self,
        name: &str,
        params: &[Shape],
        body: impl FnOnce(&Builder, &[Op]) -> Vec<Op>,
    ) -> Function {
        self.define(self.comp, name, params, body, Location::caller())
    }

    fn define(
        &self,
        target: crate::ir::CompId,
        name: &str,
        params: &[Shape],
        body: impl FnOnce(&Builder, &[Op]) -> Vec<Op>,
        loc: &'static Location<'static>,
    ) -> Function {
        let failed = |f: Op| Function {
            b: self.clone(),
            name: name.to_string(),
            def: target,
            comp: None,
            params: params.to_vec(),
            results: 1,
            captures: Vec::new(),
            failed: Some(f),
        };
        let (comp, roots) = match self.body(target, name, params, loc, body) {
            Ok(r) => r,
            Err(f) => return failed(f),
        };
        if let Err(f) = self.finish_body(comp, &roots, loc) {
            return failed(f);
        }
        let captures = self
            .g
            .borrow()
            .comp(comp)
            .captures
            .keys()
            .copied()
            .collect();
        Function {
            b: self.clone(),
            name: name.to_string(),
            def: target,
            comp: Some(comp),
            params: params.to_vec(),
            results: roots.len(),
            captures,
            failed: None,
        }
    }
}

/// A computation defined once by [`Builder::function`] and called from any number
/// of places; each call is an XLA `call` of the same computation.
#[derive(Clone)]
pub struct Function {
    b: Builder,
    name: String,
    /// The computation it was defined in (its captures are values of it).
    def: crate::ir::CompId,
    comp: Option<crate::ir::CompId>,
    params: Vec<Shape>,
    results: usize,
    captures: Vec<crate::ir::Value>,
    /// The recorded error when the definition failed.
    failed: Option<Op>,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("params", &self.params)
            .field("results", &self.results)
            .finish()
    }
}

impl Function {
    /// The parameter shapes.
    pub fn params(&self) -> &[Shape] {
        &self.params
    }

    /// Calls the function on `args` (one per parameter, of its shape) and returns
    /// its results. A wrong argument count or shape is a build error naming the
    /// function and the caller's line.
    #[track_caller]
    pub fn call(&self, args: &[&Op]) -> Vec<Op> {
        let loc = Location::caller();
        let b = &self.b;
        let n = self.results.max(1);
        let comp = match (&self.failed, self.comp) {
            (Some(f), _) => return vec![f.clone(); n],
            (None, Some(c)) => c,
            (None, None) => unreachable!("a function is defined or failed"),
        };
        if let Some(bad) = args.iter().find(|a| a.is_poisoned()) {
            return vec![(*bad).clone(); n];
        }
        let shapes: Vec<Shape> = args.iter().filter_map(|a| a.shape().ok()).collect();
        if shapes != self.params {
            let refs: Vec<&Shape> = shapes.iter().collect();
            let want: Vec<String> = self.params.iter().map(|s| s.to_string()).collect();
            return vec![
                b.fail(
                    crate::error::ShapeError::new(
                        "call",
                        &refs,
                        crate::error::ShapeErrorKind::Body,
                        format!(
                            "function `{}` takes ({}), called with {} argument(s)",
                            self.name,
                            want.join(", "),
                            args.len()
                        ),
                    ),
                    loc,
                );
                n
            ];
        }
        let captures: Vec<Op> = self.captures.iter().map(|v| b.op(self.def, *v)).collect();
        let operands: Vec<&Op> = args.iter().copied().chain(&captures).collect();
        let out = b.emit(OpKind::Call { body: comp }, &operands, None, loc);
        if self.results == 1 || out.is_poisoned() {
            return vec![out; n];
        }
        (0..self.results)
            .map(|i| {
                b.emit(
                    OpKind::GetTupleElement { index: i as u32 },
                    &[&out],
                    None,
                    loc,
                )
            })
            .collect()
    }
}

/// Call: through the user's backward rule if `custom_vjp` gave one, else through
/// the called computation; one cotangent per result of the callee.
pub(crate) fn vjp_call(n: &Node) -> Grads {
    let OpKind::Call { body } = n.kind else {
        return Err("not a call".into());
    };
    let parts: Vec<Option<Op>> = match n.cts.first() {
        Some(Some(Ct::Array(a))) => vec![Some(a.clone())],
        Some(Some(Ct::Tuple(p))) => p.clone(),
        _ => Vec::new(),
    };
    let custom = n.b.g.borrow().custom_vjps.get(&n.at).cloned();
    Ok(arrays(match custom {
        Some(rule) => vjp_custom(&rule, n, &parts),
        None => vjp_through_body(*body, n, &parts),
    }))
}

/// A user-given backward rule: `(args, results, cotangents) -> cotangent per arg`.
pub(crate) type BackwardRule = std::rc::Rc<dyn Fn(&[Op], &[Op], &[Op]) -> Vec<Op>>;

/// The results of a call instruction as ops (its elements for a tuple result).
fn call_results(n: &Node, count: usize) -> Vec<Op> {
    match n.out().shape() {
        Ok(Shape::Tuple(_)) => (0..count)
            .map(|i| {
                n.b.emit(
                    OpKind::GetTupleElement { index: i as u32 },
                    &[n.out()],
                    None,
                    n.loc,
                )
            })
            .collect(),
        _ => vec![n.out().clone()],
    }
}

/// Call: the called computation, recomputed on the call's operands, and the
/// cotangents pulled back through it.
fn vjp_through_body(body: crate::ir::CompId, n: &Node, cts: &[Option<Op>]) -> Vec<Option<Op>> {
    use crate::autodiff::{ct_or_zeros, inline, wants};
    let (b, loc) = (n.b, n.loc);
    let remat = b.g.borrow().checkpointed.contains_key(&n.at);
    // A value of its own per operand: an argument passed twice gets two cotangents.
    // A checkpointed call recomputes from behind a barrier that also holds the
    // incoming cotangents: XLA can neither merge the recomputation with the
    // forward pass (CSE) nor start it before the backward pass reaches the call.
    let mut fenced_cts: Vec<Option<Op>> = cts.to_vec();
    let args: Vec<Op> = if remat && !n.operands.is_empty() {
        let mut refs: Vec<&Op> = n.operands.iter().collect();
        refs.extend(cts.iter().flatten());
        let mut fenced = b.on(loc).optimization_barrier(&refs).into_iter();
        let args: Vec<Op> = fenced.by_ref().take(n.operands.len()).collect();
        for c in fenced_cts.iter_mut().flatten() {
            *c = fenced.next().expect("one per cotangent");
        }
        args
    } else {
        n.operands
            .iter()
            .map(|a| a.reshape(&a.dims().unwrap_or_default()))
            .collect()
    };
    let cts = &fenced_cts[..];
    let outs = inline(b, body, &args);
    let float: Vec<usize> = (0..outs.len()).filter(|j| wants(&outs[*j])).collect();
    let ct: Vec<Op> = float
        .iter()
        .map(|j| ct_or_zeros(cts, *j, &outs[*j], loc))
        .collect();
    let wrt: Vec<usize> = (0..args.len()).filter(|k| wants(&args[*k])).collect();
    let outs_f: Vec<&Op> = float.iter().map(|j| &outs[*j]).collect();
    let ct_refs: Vec<&Op> = ct.iter().collect();
    let wrt_refs: Vec<&Op> = wrt.iter().map(|k| &args[*k]).collect();
    let mut g = b.vjp(&outs_f, &ct_refs, &wrt_refs).into_iter();
    (0..args.len())
        .map(|k| if wrt.contains(&k) { g.next() } else { None })
        .collect()
}

/// A call with a user-given backward rule (see [`Builder::custom_vjp`]): the rule
/// gets the arguments (the call's operands without the captured values after
/// them), the results and their cotangents (zeros where none arrived).
fn vjp_custom(
    (n_args, rule): &(usize, BackwardRule),
    n: &Node,
    cts: &[Option<Op>],
) -> Vec<Option<Op>> {
    let loc = n.loc;
    let count = match n.out().shape() {
        Ok(Shape::Tuple(e)) => e.len(),
        _ => 1,
    };
    let results = call_results(n, count);
    let ct: Vec<Op> = (0..count)
        .map(|j| crate::autodiff::ct_or_zeros(cts, j, &results[j], loc))
        .collect();
    let user = rule(&n.operands[..*n_args], &results, &ct);
    (0..n.operands.len())
        .map(|k| {
            let g = user.get(k)?;
            let (want, got) = (n.operands[k].shape().ok()?, g.shape().ok()?);
            if want == got {
                return Some(g.clone());
            }
            Some(n.b.fail(
                ShapeError::new(
                    "custom_vjp",
                    &[&want, &got],
                    ShapeErrorKind::Body,
                    format!("the backward rule returns {got} for argument {k}, which is {want}"),
                ),
                loc,
            ))
        })
        .collect()
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: a tuple of the operands (kept element by element).
pub(crate) fn batch_tuple(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    Ok(vec![crate::batching::BVal::Tuple(n.operands.to_vec())])
}

/// Tangent: the tuple of the operands' tangents.
pub(crate) fn jvp_tuple(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    Ok(vec![Some(crate::autodiff::Ct::Tuple(
        n.tangents
            .iter()
            .map(|t| match t {
                Some(crate::autodiff::Ct::Array(a)) => Some(a.clone()),
                _ => None,
            })
            .collect(),
    ))])
}

/// Batching: the callee batched into a new computation (every operand and the
/// result batched at 0), called. A `custom_vjp` function keeps its backward rule:
/// the rule, vmapped, serves the batched call.
pub(crate) fn batch_call(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Call { body } = n.kind else {
        return Err("not a call".into());
    };
    let ops = (0..n.operands.len())
        .map(|k| n.front(k))
        .collect::<Result<Vec<_>, _>>()?;
    let callee = crate::batching::batch_body(n, *body, &ops, "call")?;
    let refs: Vec<&Op> = ops.iter().collect();
    let target = crate::batching::with_batch(&n.shapes[0], n.size);
    let r =
        n.b.emit(OpKind::Call { body: callee }, &refs, Some(target), n.loc);
    if let Some(e) = crate::batching::failure(&r) {
        return Err(e);
    }
    let custom = n.b.g.borrow().custom_vjps.get(&n.at).cloned();
    if let Some((n_args, rule)) = custom {
        let batched: BackwardRule =
            std::rc::Rc::new(move |args: &[Op], outs: &[Op], cts: &[Op]| {
                let Some(first) = args.first().or(outs.first()) else {
                    return Vec::new();
                };
                let rule = rule.clone();
                first.builder().vmap(
                    &crate::batching::Vmap::new(),
                    (args.to_vec(), outs.to_vec(), cts.to_vec()),
                    move |_, (a, o, c)| rule(&a, &o, &c),
                )
            });
        n.b.g
            .borrow_mut()
            .custom_vjps
            .insert((r.comp, r.v.instr), (n_args, batched));
    }
    let like = match &n.shapes[0] {
        Shape::Tuple(e) => crate::batching::BVal::Tuple(
            e.iter()
                .map(|_| crate::batching::BVal::at(r.clone(), 0))
                .collect(),
        ),
        _ => crate::batching::BVal::at(r.clone(), 0),
    };
    Ok(vec![crate::batching::split_like(&like, &r, n.loc)])
}

/// Tangent: the callee's instructions replayed here and pushed forward.
pub(crate) fn jvp_call(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let OpKind::Call { body } = n.kind else {
        return Err("not a call".into());
    };
    if n.b.g.borrow().custom_vjps.contains_key(&n.at) {
        // As in JAX: a custom_vjp function has a backward rule only.
        return Err(
            "forward mode through a custom_vjp function (it has a backward rule only; JAX refuses it too)"
                .into(),
        );
    }
    crate::forward::through_body(n, *body)
}
