//! Miscellaneous ops: `map` (a scalar function applied element-wise, from a
//! closure), `opt-barrier` (values the compiler may not move computations across),
//! and `custom-call` (a plugin's own kernel by name).
use super::array_of;
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::panic::Location;

// ---------------------------------------------------------------------------------
// `map`

/// Map rule: one or more arrays of equal dimensions; the function (when given) takes
/// one scalar of each operand's type and returns a scalar, whose type the result
/// has, with the operands' dimensions. `dims` must be all axes in order.
pub fn infer_map(
    operands: &[&Shape],
    dims: &[i64],
    f: Option<&(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "map";
    let Some(first) = operands.first() else {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Arity,
            "needs at least one operand",
        ));
    };
    let (_, d0) = array_of(OP, first)?;
    let mut types = Vec::new();
    for s in operands {
        let (t, d) = array_of(OP, s)?;
        if d != d0 {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Dimension,
                "all operands must have the same dimensions",
            ));
        }
        types.push(Shape::scalar(t));
    }
    super::check_one_float_type(OP, operands)?;
    if dims.len() != d0.len() || dims.iter().enumerate().any(|(i, a)| *a != i as i64) {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Attribute,
            format!("map dimensions {dims:?} must be every axis in order"),
        ));
    }
    let Some((params, result)) = f else {
        return Ok((*first).clone());
    };
    let (rt, rd) = array_of(OP, result)?;
    if *params != types || !rd.is_empty() {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Body,
            format!(
                "the function must map ({}) to a scalar",
                types
                    .iter()
                    .map(Shape::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(Shape::array(rt, d0))
}

pub(crate) fn shape_map(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Map { dims, body } = kind else {
        return Err(super::table::not_for("map", kind));
    };
    infer_map(cx.operands, dims, cx.signature(*body).as_ref())
}

pub(crate) fn lower_map(kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Map { dims, body } = kind {
        p.dimensions = dims.to_vec();
        p.called_computation_ids = vec![(cx.comp_id)(*body)];
    }
}

pub(crate) fn raise_map(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [body] = cx.calls(p)?;
    Ok(OpKind::Map {
        dims: p.dimensions.as_slice().into(),
        body,
    })
}

pub(crate) fn text_map(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Map { dims, body } = kind {
        out.list("dimensions", dims);
        out.callee(cx, "to_apply", *body);
    }
}

impl Builder {
    /// XLA's Map: applies `f` (scalars in, a scalar out) to the elements of
    /// `operands` (arrays of equal dimensions) at each position. The function may
    /// use outside scalars.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("map");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let y = b.parameter(1, Shape::of::<f32>(&[3]), "y");
    /// let z = b.map(&[&x, &y], |s| (&s[0] * &s[1]).tanh());
    /// assert_eq!(z.dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn map(&self, operands: &[&Op], f: impl FnOnce(&[Op]) -> Op) -> Op {
        let loc = Location::caller();
        let target = match self.target(operands, "map", loc) {
            Ok(t) => t,
            Err(failed) => return failed,
        };
        let shapes: Vec<Shape> = operands
            .iter()
            .map(|o| o.shape().expect("checked"))
            .collect();
        let refs: Vec<&Shape> = shapes.iter().collect();
        let rank = shapes.first().map_or(0, Shape::rank) as i64;
        let dims: Vec<i64> = (0..rank).collect();
        if let Err(e) = infer_map(&refs, &dims, None) {
            return self.fail(e, loc);
        }
        let params: Vec<Shape> = shapes
            .iter()
            .map(|s| Shape::scalar(s.element_type().expect("checked")))
            .collect();
        let (comp, roots) = match self.body(target, "map", &params, loc, |_, p| vec![f(p)]) {
            Ok(r) => r,
            Err(failed) => return failed,
        };
        // Captured scalars come in as more mapped operands (see `scalar_captures`).
        let captures = match self.scalar_captures(comp, target, "map", loc) {
            Ok(c) => c,
            Err(f) => return f,
        };
        if let Err(f) = self.finish_body(comp, &roots, loc) {
            return f;
        }
        let d0 = shapes[0].dims().to_vec();
        let spread: Vec<Op> = captures
            .iter()
            .map(|c| self.op(target, *c).on(loc).broadcast_to(&d0))
            .collect();
        let all: Vec<&Op> = operands.iter().copied().chain(&spread).collect();
        self.emit(
            OpKind::Map {
                dims: dims.into(),
                body: comp,
            },
            &all,
            None,
            loc,
        )
    }
}

/// Map (see `map_cts`).
pub(crate) fn vjp_map(n: &Node) -> Grads {
    let OpKind::Map { body, .. } = n.kind else {
        return Err("not a map".into());
    };
    Ok(arrays(map_cts(*body, n, &n.ct())))
}

/// Map: per operand, a map of the scalar function's derivative times the
/// cotangent (the function recomputed and differentiated inside each map body).
fn map_cts(body: crate::ir::CompId, n: &crate::autodiff::Node, ct: &Op) -> Vec<Option<Op>> {
    use crate::autodiff::{inline, wants};
    let k = n.operands.len();
    (0..k)
        .map(|i| {
            if !wants(&n.operands[i]) {
                return None;
            }
            let ops: Vec<&Op> = n.operands.iter().chain([ct]).collect();
            Some(n.b.map(&ops, |p| {
                let bb = p[0].builder();
                let out = inline(&bb, body, &p[..k]).swap_remove(0);
                let wrt: Vec<&Op> = p[..k].iter().collect();
                bb.vjp(&[&out], &[&p[k]], &wrt).swap_remove(i)
            }))
        })
        .collect()
}

#[cfg(test)]
mod map_tests {
    use super::*;

    #[test]
    fn map_rule() {
        let x = Shape::of::<f32>(&[2, 3]);
        let i = Shape::of::<i32>(&[2, 3]);
        let f = (
            vec![Shape::of::<f32>(&[]), Shape::of::<i32>(&[])],
            Shape::of::<bool>(&[]),
        );
        assert_eq!(
            infer_map(&[&x, &i], &[0, 1], Some(&f)).unwrap(),
            Shape::of::<bool>(&[2, 3])
        );
        assert!(infer_map(&[&x, &i], &[1, 0], Some(&f)).is_err());
        assert!(infer_map(&[&x, &Shape::of::<i32>(&[3, 2])], &[0, 1], None).is_err());
        let bad = (vec![Shape::of::<f32>(&[])], Shape::of::<f32>(&[]));
        assert_eq!(
            infer_map(&[&x, &i], &[0, 1], Some(&bad)).unwrap_err().kind,
            ShapeErrorKind::Body
        );
        // Operands mixing float precisions: XLA's verifier refuses them (found by
        // tests/rules_vs_xla.rs); an integer beside a float is fine.
        let h = Shape::array(crate::shape::ElementType::F16, &[2, 3]);
        let e = infer_map(&[&h, &x], &[0, 1], None).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::ElementType);
        assert!(infer_map(&[&h, &i], &[0, 1], None).is_ok());
    }
}

// ---------------------------------------------------------------------------------
// `opt-barrier`

pub(crate) fn shape_optimization_barrier(
    _: &OpKind,
    cx: &InferCx<'_>,
) -> Result<Shape, ShapeError> {
    Ok(cx.operands[0].clone())
}

pub(crate) fn raise_optimization_barrier(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::OptimizationBarrier)
}

impl Builder {
    /// XLA's OptimizationBarrier: the values unchanged, but the compiler may not move
    /// computations across this point (e.g. to keep a rematerialization from being
    /// undone).
    #[track_caller]
    pub fn optimization_barrier(&self, values: &[&Op]) -> Vec<Op> {
        let loc = Location::caller();
        let t = self.tuple(values);
        let r = self.emit(OpKind::OptimizationBarrier, &[&t], None, loc);
        (0..values.len())
            .map(|i| {
                self.emit(
                    OpKind::GetTupleElement { index: i as u32 },
                    &[&r],
                    None,
                    loc,
                )
            })
            .collect()
    }
}

/// Optimization barrier: its values are its operand's, and so is the cotangent.
pub(crate) fn vjp_optimization_barrier(n: &Node) -> Grads {
    Ok(vec![n.cts.first().cloned().flatten()])
}

// ---------------------------------------------------------------------------------
// `custom-call`

pub use crate::ir::attrs::CustomCallAttrs;

/// Custom-call rule: a kernel name and a known calling convention (API version 1 to
/// 4: XLA aborts compiling a nameless one inside a body, found by the fuzzer), any
/// operands; the result is the declared shape (arrays or a tuple of arrays), which the
/// kernel must produce: nothing else can be checked.
pub fn infer_custom_call(
    attrs: &CustomCallAttrs,
    operands: &[&Shape],
    result: &Shape,
) -> Result<Shape, ShapeError> {
    if attrs.target.is_empty() || !(1..=4).contains(&attrs.api_version) {
        return Err(ShapeError::new(
            "custom-call",
            operands,
            ShapeErrorKind::Attribute,
            format!(
                "needs a kernel name and an API version 1 to 4 (got `{}`, {})",
                attrs.target, attrs.api_version
            ),
        ));
    }
    fn ok(s: &Shape) -> bool {
        match s {
            Shape::Array { dims, .. } => dims.iter().all(|d| *d >= 0),
            Shape::Tuple(e) => e.iter().all(|s| matches!(s, Shape::Array { .. }) && ok(s)),
            Shape::Token => false,
        }
    }
    if !ok(result) {
        return Err(ShapeError::new(
            "custom-call",
            operands,
            ShapeErrorKind::Attribute,
            format!("a custom call returns arrays or a tuple of arrays, not {result}"),
        ));
    }
    Ok(result.clone())
}

pub(crate) fn shape_custom_call(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::CustomCall(a) = kind else {
        return Err(super::table::not_for("custom-call", kind));
    };
    infer_custom_call(a, cx.operands, cx.target("custom-call")?)
}

pub(crate) fn lower_custom_call(
    kind: &OpKind,
    _: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    let OpKind::CustomCall(a) = kind else { return };
    p.custom_call_target = a.target.clone();
    p.backend_config = a.opaque.clone();
    p.custom_call_api_version = a.api_version;
    p.custom_call_has_side_effect = a.has_side_effect;
}

pub(crate) fn raise_custom_call(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::CustomCall(Box::new(CustomCallAttrs {
        target: p.custom_call_target.clone(),
        opaque: p.backend_config.clone(),
        api_version: p.custom_call_api_version,
        has_side_effect: p.custom_call_has_side_effect,
    })))
}

/// Custom call: the `Sharding` constraint passes its cotangent back under the same
/// constraint (JAX's rule for `with_sharding_constraint`); other kernels have no
/// rule.
pub(crate) fn vjp_custom_call(n: &Node) -> Grads {
    crate::sharding::vjp_sharding_constraint(n).map(|g| arrays(vec![g]))
}

pub(crate) fn text_custom_call(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::CustomCall(a) = kind {
        out.attr("custom_call_target", format!("\"{}\"", a.target));
    }
}

impl Builder {
    /// An array of `ty` and `dims` whose contents are unspecified until written:
    /// the starting value of a stack that a loop writes in full, row by row,
    /// before anything reads it (a scan's stacked outputs, a gradient's stored
    /// values). On the CPU plugins it is a custom call to
    /// [`UNINITIALIZED_TARGET`](xlaclient_pjrt::UNINITIALIZED_TARGET), whose kernel
    /// leaves the buffer as allocated instead of writing zeros over it; elsewhere
    /// the client compiles zeros in its place (`HloModuleSource::hlo_module_bytes_zeroed`).
    /// Only for values every element of which is written before it is read.
    pub(crate) fn uninitialized(
        &self,
        ty: ElementType,
        dims: &[i64],
        loc: &'static Location<'static>,
    ) -> Op {
        self.emit(
            OpKind::CustomCall(Box::new(CustomCallAttrs {
                target: xlaclient_pjrt::UNINITIALIZED_TARGET.to_string(),
                opaque: Vec::new(),
                api_version: 4,
                has_side_effect: false,
            })),
            &[],
            Some(Shape::array(ty, dims)),
            loc,
        )
    }

    /// XLA's CustomCall: the plugin's kernel `attrs.target` on `operands`, declared
    /// to return `result` (arrays or a tuple of arrays). The crate cannot check what
    /// the kernel does; a kernel the plugin does not have is a compile error.
    #[track_caller]
    pub fn custom_call(&self, attrs: &CustomCallAttrs, operands: &[&Op], result: Shape) -> Op {
        self.emit(
            OpKind::CustomCall(Box::new(attrs.clone())),
            operands,
            Some(result),
            Location::caller(),
        )
    }
}

#[cfg(test)]
mod custom_call_tests {
    use super::*;

    #[test]
    fn custom_call_rule() {
        let a = CustomCallAttrs {
            target: "k".into(),
            opaque: vec![],
            api_version: 1,
            has_side_effect: false,
        };
        assert!(infer_custom_call(&a, &[], &Shape::of::<f32>(&[2])).is_ok());
        assert!(infer_custom_call(&a, &[], &Shape::Token).is_err());
        let nested = Shape::Tuple(vec![Shape::Tuple(vec![])]);
        assert!(infer_custom_call(&a, &[], &nested).is_err());
        let nameless = CustomCallAttrs {
            target: String::new(),
            ..a.clone()
        };
        assert!(infer_custom_call(&nameless, &[], &Shape::of::<f32>(&[2])).is_err());
        let unversioned = CustomCallAttrs {
            api_version: 0,
            ..a
        };
        assert!(infer_custom_call(&unversioned, &[], &Shape::of::<f32>(&[2])).is_err());
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: the scalar function mapped over the batch axis too.
pub(crate) fn batch_map(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Map { dims, body } = n.kind else {
        return Err("not a map".into());
    };
    let d: Vec<i64> = (0..=dims.len() as i64).collect();
    crate::batching::shifted(
        n,
        OpKind::Map {
            dims: d.into(),
            body: *body,
        },
    )
}

/// Batching: the barrier on the batched values.
pub(crate) fn batch_optimization_barrier(
    n: &crate::batching::BatchNode,
) -> crate::batching::Batched {
    let v = n.operands[0].all_front(n.size, n.loc)?;
    let op = v.plain(n.b, n.loc);
    let out = n.b.emit(OpKind::OptimizationBarrier, &[&op], None, n.loc);
    if let Some(e) = crate::batching::failure(&out) {
        return Err(e);
    }
    Ok(vec![crate::batching::split_like(&v, &out, n.loc)])
}

/// Tangent: the tangents pass the barrier unchanged.
pub(crate) fn jvp_optimization_barrier(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    Ok(vec![n.tangents[0].clone()])
}

/// Tangent: a map of the function's tangent: a new scalar body on the values and
/// the tangents of the float operands that have one, which runs the function and
/// pushes the tangents through it (forward mode on scalars).
pub(crate) fn jvp_map(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let OpKind::Map { body, .. } = n.kind else {
        return Err("not a map".into());
    };
    let k = n.operands.len();
    let with: Vec<usize> = (0..k)
        .filter(|j| {
            n.has(*j)
                && n.operands[*j]
                    .element_type()
                    .is_ok_and(crate::autodiff::differentiable)
        })
        .collect();
    let tans: Vec<Op> = with.iter().map(|j| n.tangent(*j)).collect();
    let mut ops: Vec<&Op> = n.operands.iter().collect();
    ops.extend(tans.iter());
    let mut err = None;
    let out = n.b.map(&ops, |ps| {
        let bb = ps[0].builder();
        let run = || -> Result<Op, String> {
            let y = crate::forward::inline(&bb, *body, &ps[..k])?;
            let seeds: Vec<(crate::ir::Value, crate::autodiff::Ct)> = with
                .iter()
                .enumerate()
                .map(|(i, j)| (ps[*j].v, crate::autodiff::Ct::Array(ps[k + i].clone())))
                .collect();
            let t = crate::forward::push_forward(&bb, bb.comp, &seeds, &[y.v], 0)
                .map_err(|f| crate::batching::failure(&f).unwrap_or_default())?;
            Ok(match t.into_iter().next().flatten() {
                Some(crate::autodiff::Ct::Array(t)) => t,
                _ => y.full_like(0.0),
            })
        };
        match run() {
            Ok(t) => t,
            Err(e) => {
                err = Some(e.clone());
                bb.error(e)
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    if let Some(e) = crate::batching::failure(&out) {
        return Err(e);
    }
    Ok(vec![Some(crate::autodiff::Ct::Array(out))])
}

/// Batching: the `Sharding` constraint (`with_sharding_constraint`) holds on the
/// batched value with the batch axis not split (one tile along it). Any other
/// kernel has no rule: the crate cannot know what an opaque kernel does with a
/// leading axis, so running it per example or on the batch could differ.
pub(crate) fn batch_custom_call(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::CustomCall(a) = n.kind else {
        return Err("not a custom-call".into());
    };
    if a.target == xlaclient_pjrt::HOST_CALLBACK_TARGET {
        return crate::ops::debug::batch_host_callback(n, a);
    }
    if a.target != "Sharding" || n.operands.len() != 1 {
        return Err(format!(
            "the kernel `{}`: an opaque kernel's behaviour on a batch axis is unknown (only the `Sharding` constraint has a rule)",
            a.target
        ));
    }
    let sharding = {
        let g = n.b.g.borrow();
        g.comp(n.at.0).instrs[n.at.1 as usize].sharding.clone()
    };
    let sharding = sharding.map(|s| match *s {
        crate::ir::sharding::Sharding::Tiled {
            mut tile_dims,
            devices,
            replicate_last,
        } => {
            tile_dims.insert(0, 1);
            Box::new(crate::ir::sharding::Sharding::Tiled {
                tile_dims,
                devices,
                replicate_last,
            })
        }
        other => Box::new(other),
    });
    let x = n.front(0)?;
    let shape = x.shape().map_err(|e| e.to_string())?;
    let out = n.b.custom_call(a, &[&x], shape);
    if let Some(e) = crate::batching::failure(&out) {
        return Err(e);
    }
    {
        let mut g = out.g.borrow_mut();
        g.comp_mut(out.comp).instrs[out.v.instr as usize].sharding = sharding;
    }
    Ok(vec![crate::batching::BVal::at(out, 0)])
}

/// Tangent: the `Sharding` constraint is the identity on values: the tangent gets
/// the same constraint. Other kernels have no rule (their derivative is unknown).
pub(crate) fn jvp_custom_call(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let OpKind::CustomCall(a) = n.kind else {
        return Err("not a custom-call".into());
    };
    if a.target != "Sharding" || n.operands.len() != 1 {
        return Err(format!(
            "the kernel `{}` has no tangent rule (only the `Sharding` constraint has)",
            a.target
        ));
    }
    let sharding = {
        let g = n.b.g.borrow();
        g.comp(n.at.0).instrs[n.at.1 as usize].sharding.clone()
    };
    let t = n.tangent(0);
    let shape = t.shape().map_err(|e| e.to_string())?;
    let out = n.b.custom_call(a, &[&t], shape);
    if let Some(e) = crate::batching::failure(&out) {
        return Err(e);
    }
    {
        let mut g = out.g.borrow_mut();
        g.comp_mut(out.comp).instrs[out.v.instr as usize].sharding = sharding;
    }
    Ok(vec![Some(crate::autodiff::Ct::Array(out))])
}
