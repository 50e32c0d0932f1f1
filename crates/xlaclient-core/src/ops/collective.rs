//! Collectives: the ops through which the replicas (and partitions) of one program
//! talk to each other while it runs on several devices (`replica-id`,
//! `partition-id`, `all-reduce`, `all-gather`, `reduce-scatter`,
//! `collective-permute`, `all-to-all`). Compile such a program with
//! `CompileOptions::num_replicas(n)` and run it with `execute_replicated`.
//!
//! A replica group is a list of replica ids (device ids with
//! `use_global_device_ids`) that combine among themselves; no id may be in two
//! groups. No groups at all means one group of every replica. The ids are checked
//! against the number of replicas when the program is compiled.
use super::array_of;
use super::elementwise::{BinaryOp, Scalar};
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{self, CompId, InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::collections::HashSet;
use std::panic::Location;

pub use crate::ir::attrs::{CollectiveAttrs, PermuteAttrs};

// ---------------------------------------------------------------------------------
// What the collectives share: replica groups, channel, the reducer body

impl CollectiveAttrs {
    /// These replica groups (empty: one group of every replica), no channel.
    pub fn groups(replica_groups: &[Vec<i64>]) -> Self {
        CollectiveAttrs {
            replica_groups: replica_groups.to_vec(),
            ..Self::default()
        }
    }

    /// The same with XLA's channel id `id` (at least 1).
    pub fn channel(mut self, id: i64) -> Self {
        self.channel_id = Some(id);
        self
    }

    /// The same with the groups read as global device ids (needs a channel).
    pub fn global_device_ids(mut self) -> Self {
        self.use_global_device_ids = true;
        self
    }
}

/// Checks replica groups: no empty group, no negative id, no id twice; with
/// `uniform`, every group of one size. Returns the group size (`None` without
/// groups).
fn check_groups(
    op: &'static str,
    operands: &[&Shape],
    a: &CollectiveAttrs,
    uniform: bool,
) -> Result<Option<i64>, ShapeError> {
    let err = |r: String| ShapeError::new(op, operands, ShapeErrorKind::Attribute, r);
    if let Some(c) = a.channel_id {
        if c < 1 {
            return Err(err(format!("the channel id must be at least 1, got {c}")));
        }
    }
    if a.use_global_device_ids && a.channel_id.is_none() {
        return Err(err(
            "use_global_device_ids needs a channel id (XLA reads the groups as replica ids without one)".into(),
        ));
    }
    let mut seen = HashSet::new();
    for g in &a.replica_groups {
        if g.is_empty() {
            return Err(err("a replica group is empty".into()));
        }
        for &id in g {
            if id < 0 {
                return Err(err(format!("replica id {id} is negative")));
            }
            if !seen.insert(id) {
                return Err(err(format!(
                    "replica {id} is in the replica groups twice ({:?})",
                    a.replica_groups
                )));
            }
        }
    }
    let size = a.replica_groups.first().map(|g| g.len() as i64);
    if uniform
        && a.replica_groups
            .iter()
            .any(|g| Some(g.len() as i64) != size)
    {
        return Err(err(format!(
            "the replica groups must all have one size, got {:?}",
            a.replica_groups
        )));
    }
    Ok(size)
}

/// Checks that a reducer body takes two scalars of `ty` and returns one.
fn check_body(
    op: &'static str,
    operands: &[&Shape],
    ty: ElementType,
    sig: Option<(Vec<Shape>, Shape)>,
) -> Result<(), ShapeError> {
    let Some((params, result)) = sig else {
        return Ok(());
    };
    let s = Shape::scalar(ty);
    if params != [s.clone(), s.clone()] || result != s {
        return Err(ShapeError::new(
            op,
            operands,
            ShapeErrorKind::Body,
            format!(
                "the reducer must take two {s} and return one, it takes ({}) and returns {result}",
                params
                    .iter()
                    .map(Shape::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(())
}

/// Checks that `dimension` is an axis of `dims`.
fn check_axis(
    op: &'static str,
    operands: &[&Shape],
    dims: &[i64],
    dimension: i64,
) -> Result<usize, ShapeError> {
    if dimension < 0 || dimension as usize >= dims.len() {
        return Err(ShapeError::new(
            op,
            operands,
            ShapeErrorKind::Dimension,
            format!(
                "dimension {dimension} is not an axis of a rank-{} operand",
                dims.len()
            ),
        ));
    }
    Ok(dimension as usize)
}

fn lower_groups(a: &CollectiveAttrs, p: &mut proto::HloInstructionProto) {
    p.replica_groups = a
        .replica_groups
        .iter()
        .map(|g| proto::ReplicaGroup {
            replica_ids: g.clone(),
        })
        .collect();
    p.channel_id = a.channel_id.unwrap_or(0);
    p.use_global_device_ids = a.use_global_device_ids;
}

fn raise_groups(p: &proto::HloInstructionProto) -> Result<Box<CollectiveAttrs>, String> {
    if p.replica_group_list.is_some() {
        return Err(format!(
            "`{}` gives its replica groups as a device list; only `replica_groups` is read",
            p.opcode
        ));
    }
    Ok(Box::new(CollectiveAttrs {
        replica_groups: p
            .replica_groups
            .iter()
            .map(|g| g.replica_ids.clone())
            .collect(),
        channel_id: (p.channel_id != 0).then_some(p.channel_id),
        use_global_device_ids: p.use_global_device_ids,
    }))
}

fn groups_text(groups: &[Vec<i64>]) -> String {
    let inner: Vec<String> = groups
        .iter()
        .map(|g| {
            let ids: Vec<String> = g.iter().map(i64::to_string).collect();
            format!("{{{}}}", ids.join(","))
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn text_groups(a: &CollectiveAttrs, out: &mut OpText) {
    if let Some(c) = a.channel_id {
        out.attr("channel_id", c);
    }
    out.attr("replica_groups", groups_text(&a.replica_groups));
    if a.use_global_device_ids {
        out.attr("use_global_device_ids", "true");
    }
}

/// Whether `op` is one of the binary reductions the collectives take by name.
fn is_reducer(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Add | BinaryOp::Multiply | BinaryOp::Maximum | BinaryOp::Minimum
    )
}

impl Builder {
    /// Builds a reducer body `f(a, b)` on two scalars of `ty` inside `target`.
    fn reducer(
        &self,
        target: CompId,
        name: &str,
        ty: ElementType,
        loc: &'static Location<'static>,
        f: impl FnOnce(&Op, &Op) -> Op,
    ) -> Result<CompId, Op> {
        let s = Shape::scalar(ty);
        let (comp, roots) = self.body(target, name, &[s.clone(), s], loc, |_, p| {
            vec![f(&p[0], &p[1])]
        })?;
        self.finish_body(comp, &roots, loc)?;
        Ok(comp)
    }

    /// The kind `make(body)` emitted on `x` with a reducer body `f`.
    fn emit_reducing(
        &self,
        x: &Op,
        op: &'static str,
        loc: &'static Location<'static>,
        f: impl FnOnce(&Op, &Op) -> Op,
        make: impl FnOnce(CompId) -> OpKind,
    ) -> Op {
        let target = match self.target(&[x], op, loc) {
            Ok(t) => t,
            Err(failed) => return failed,
        };
        let ty = match x.element_type() {
            Ok(ty) => ty,
            Err(_) => return self.fail_not_array(x, op, loc),
        };
        let body = match self.reducer(target, &format!("{op}_{ty}"), ty, loc, f) {
            Ok(b) => b,
            Err(failed) => return failed,
        };
        self.emit(make(body), &[x], None, loc)
    }
}

/// A binary op as a reducer closure, or an error op naming the collective.
fn binary_reducer(
    x: &Op,
    op: &'static str,
    by: BinaryOp,
    loc: &'static Location<'static>,
) -> Result<impl FnOnce(&Op, &Op) -> Op, Op> {
    if !is_reducer(by) {
        let s = x.shape().unwrap_or(Shape::Tuple(vec![]));
        return Err(x.builder().fail(
            ShapeError::new(
                op,
                &[&s],
                ShapeErrorKind::Attribute,
                format!("reduces with add, multiply, maximum or minimum, not {by:?}"),
            ),
            loc,
        ));
    }
    Ok(move |a: &Op, b: &Op| a.binary(by, b, loc))
}

// ---------------------------------------------------------------------------------
// `replica-id` and `partition-id`

pub(crate) fn shape_replica_id(_: &OpKind, _: &InferCx<'_>) -> Result<Shape, ShapeError> {
    Ok(Shape::scalar(ElementType::U32))
}

pub(crate) fn raise_replica_id(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::ReplicaId)
}

pub(crate) fn shape_partition_id(_: &OpKind, _: &InferCx<'_>) -> Result<Shape, ShapeError> {
    Ok(Shape::scalar(ElementType::U32))
}

pub(crate) fn raise_partition_id(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::PartitionId)
}

impl Builder {
    /// XLA's ReplicaId: the replica this copy of the program runs as (`u32[]`,
    /// 0 to `num_replicas - 1`; `jax.lax.axis_index` over replicas).
    #[track_caller]
    pub fn replica_id(&self) -> Op {
        self.emit(OpKind::ReplicaId, &[], None, Location::caller())
    }

    /// XLA's PartitionId: the partition this copy runs as (`u32[]`).
    #[track_caller]
    pub fn partition_id(&self) -> Op {
        self.emit(OpKind::PartitionId, &[], None, Location::caller())
    }
}

// ---------------------------------------------------------------------------------
// `all-reduce`

/// All-reduce rule: an array operand, valid replica groups, and (when known) a
/// reducer of two scalars of its type; the result has the operand's shape.
pub fn infer_all_reduce(
    operand: &Shape,
    attrs: &CollectiveAttrs,
    body: Option<(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "all-reduce";
    let (ty, _) = array_of(OP, operand)?;
    check_groups(OP, &[operand], attrs, false)?;
    check_body(OP, &[operand], ty, body)?;
    Ok(operand.clone())
}

pub(crate) fn shape_all_reduce(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::AllReduce { attrs, body } = kind else {
        return Err(super::table::not_for("all-reduce", kind));
    };
    infer_all_reduce(cx.operands[0], attrs, cx.signature(*body))
}

pub(crate) fn lower_all_reduce(
    kind: &OpKind,
    cx: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::AllReduce { attrs, body } = kind {
        lower_groups(attrs, p);
        p.called_computation_ids = vec![(cx.comp_id)(*body)];
    }
}

pub(crate) fn raise_all_reduce(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [body] = cx.calls(p)?;
    Ok(OpKind::AllReduce {
        attrs: raise_groups(p)?,
        body,
    })
}

pub(crate) fn text_all_reduce(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::AllReduce { attrs, body } = kind {
        text_groups(attrs, out);
        out.callee(cx, "to_apply", *body);
    }
}

impl Op {
    /// XLA's AllReduce with one binary op (`Add`, `Multiply`, `Maximum`,
    /// `Minimum`): every device of a replica group gets the combination of the
    /// group's operands (`groups` empty: all replicas).
    ///
    /// ```
    /// use xlaclient_core::{BinaryOp, Builder, Shape};
    /// let b = Builder::new("psum");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    /// let total = x.all_reduce(BinaryOp::Add, &[]);
    /// let pairs = x.all_reduce(BinaryOp::Maximum, &[vec![0, 1], vec![2, 3]]);
    /// assert_eq!(total.dims()?, vec![4]);
    /// assert!(x.all_reduce(BinaryOp::Add, &[vec![0, 0]]).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn all_reduce(&self, op: BinaryOp, groups: &[Vec<i64>]) -> Op {
        self.all_reduce_by(op, &CollectiveAttrs::groups(groups), Location::caller())
    }

    /// The sum over the devices of each group (`jax.lax.psum`).
    #[track_caller]
    pub fn psum(&self, groups: &[Vec<i64>]) -> Op {
        self.all_reduce_by(
            BinaryOp::Add,
            &CollectiveAttrs::groups(groups),
            Location::caller(),
        )
    }

    /// The maximum over the devices of each group (`jax.lax.pmax`).
    #[track_caller]
    pub fn pmax(&self, groups: &[Vec<i64>]) -> Op {
        self.all_reduce_by(
            BinaryOp::Maximum,
            &CollectiveAttrs::groups(groups),
            Location::caller(),
        )
    }

    /// The minimum over the devices of each group (`jax.lax.pmin`).
    #[track_caller]
    pub fn pmin(&self, groups: &[Vec<i64>]) -> Op {
        self.all_reduce_by(
            BinaryOp::Minimum,
            &CollectiveAttrs::groups(groups),
            Location::caller(),
        )
    }

    /// The mean over the devices of each group (`jax.lax.pmean`): the sum divided
    /// by the group's size, a constant when the groups are given and of one size,
    /// else counted on the devices (an all-reduce of ones, as JAX does).
    #[track_caller]
    pub fn pmean(&self, groups: &[Vec<i64>]) -> Op {
        let loc = Location::caller();
        let attrs = CollectiveAttrs::groups(groups);
        let s = self.all_reduce_by(BinaryOp::Add, &attrs, loc);
        let ty = match s.element_type() {
            Ok(ty) => ty,
            Err(_) => return s,
        };
        let b = self.builder();
        let size = groups.first().map(Vec::len);
        let n = if size.is_some() && groups.iter().all(|g| Some(g.len()) == size) {
            b.scalar_of(ty, Scalar::Float(size.unwrap_or(1) as f64), loc)
        } else {
            b.scalar_of(ty, Scalar::Float(1.0), loc)
                .all_reduce_by(BinaryOp::Add, &attrs, loc)
        };
        s.binary(BinaryOp::Divide, &n, loc)
    }

    /// XLA's AllReduce with all its attributes and a reducer closure
    /// `body(a, b)` on two scalars of the operand's type.
    #[track_caller]
    pub fn all_reduce_with(
        &self,
        attrs: &CollectiveAttrs,
        body: impl FnOnce(&Op, &Op) -> Op,
    ) -> Op {
        let loc = Location::caller();
        let attrs = Box::new(attrs.clone());
        self.builder()
            .emit_reducing(self, "all-reduce", loc, body, |body| OpKind::AllReduce {
                attrs,
                body,
            })
    }

    pub(crate) fn all_reduce_by(
        &self,
        op: BinaryOp,
        attrs: &CollectiveAttrs,
        loc: &'static Location<'static>,
    ) -> Op {
        let f = match binary_reducer(self, "all-reduce", op, loc) {
            Ok(f) => f,
            Err(failed) => return failed,
        };
        let attrs = Box::new(attrs.clone());
        self.builder()
            .emit_reducing(self, "all-reduce", loc, f, |body| OpKind::AllReduce {
                attrs,
                body,
            })
    }
}

/// All-reduce: a sum's cotangent is the sum of the cotangents over the same groups
/// (JAX's `psum` transpose); other reducers have no rule.
pub(crate) fn vjp_all_reduce(n: &Node) -> Grads {
    let OpKind::AllReduce { attrs, body } = n.kind else {
        return Err("not an all-reduce".into());
    };
    if super::reduction::simple_combiner(n.b, *body) != Some(BinaryOp::Add) {
        return Err(
            "this `all-reduce` reducer has no gradient rule (a sum has: the cotangent summed over the same groups)"
                .into(),
        );
    }
    let ct = n.ct();
    Ok(arrays(vec![Some(ct.all_reduce_by(
        BinaryOp::Add,
        attrs,
        n.loc,
    ))]))
}

// ---------------------------------------------------------------------------------
// `all-gather`

/// All-gather rule: the operands of a group joined along `dimension`, so that
/// axis grows by the group size. Without groups the group size is the number of
/// replicas, known only to the compiler: then the declared result (`target`)
/// must be the operand with that axis a multiple of it.
pub fn infer_all_gather(
    operand: &Shape,
    attrs: &CollectiveAttrs,
    dimension: i64,
    target: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "all-gather";
    let (ty, dims) = array_of(OP, operand)?;
    let axis = check_axis(OP, &[operand], dims, dimension)?;
    match check_groups(OP, &[operand], attrs, true)? {
        Some(k) => {
            let mut out = dims.to_vec();
            out[axis] = dims[axis].checked_mul(k).ok_or_else(|| {
                ShapeError::new(OP, &[operand], ShapeErrorKind::Dimension, "size overflows")
            })?;
            Ok(Shape::array(ty, &out))
        }
        None => from_target(OP, operand, axis, target, |i, o| {
            (i == 0 && o == 0) || (i > 0 && o % i == 0 && o >= i)
        }),
    }
}

/// The declared result of a collective without groups: the operand's type and
/// dimensions except along `axis`, where `ok(in, out)` must hold.
fn from_target(
    op: &'static str,
    operand: &Shape,
    axis: usize,
    target: Option<&Shape>,
    ok: impl Fn(i64, i64) -> bool,
) -> Result<Shape, ShapeError> {
    let err = |r: String| ShapeError::new(op, &[operand], ShapeErrorKind::Dimension, r);
    let Some(t @ Shape::Array { ty, dims: out }) = target else {
        return Err(err(
            "without replica groups the group size is unknown here: give the groups".into(),
        ));
    };
    let (ity, dims) = array_of(op, operand)?;
    let fits = *ty == ity
        && out.len() == dims.len()
        && dims
            .iter()
            .zip(out.iter())
            .enumerate()
            .all(|(a, (i, o))| if a == axis { ok(*i, *o) } else { i == o });
    if !fits {
        return Err(err(format!(
            "the declared result {t} does not fit the operand along dimension {axis}"
        )));
    }
    Ok(t.clone())
}

pub(crate) fn shape_all_gather(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::AllGather { attrs, dimension } = kind else {
        return Err(super::table::not_for("all-gather", kind));
    };
    infer_all_gather(cx.operands[0], attrs, *dimension, cx.target)
}

pub(crate) fn lower_all_gather(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::AllGather { attrs, dimension } = kind {
        lower_groups(attrs, p);
        p.dimensions = vec![*dimension];
    }
}

pub(crate) fn raise_all_gather(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::AllGather {
        attrs: raise_groups(p)?,
        dimension: cx.one_dimension(p)?,
    })
}

pub(crate) fn text_all_gather(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::AllGather { attrs, dimension } = kind {
        text_groups(attrs, out);
        out.list("dimensions", &[*dimension]);
    }
}

impl Op {
    /// XLA's AllGather: the operands of each replica group joined along
    /// `dimension` in the group's order (`jax.lax.all_gather(x, axis, tiled=True)`).
    /// The groups must be given (their size sets the result's) and of one size.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("gather");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// assert_eq!(x.all_gather(0, &[vec![0, 1, 2, 3]]).dims()?, vec![8, 3]);
    /// assert!(x.all_gather(2, &[vec![0, 1]]).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn all_gather(&self, dimension: i64, groups: &[Vec<i64>]) -> Op {
        self.all_gather_with(dimension, &CollectiveAttrs::groups(groups))
    }

    /// XLA's AllGather with all its attributes.
    #[track_caller]
    pub fn all_gather_with(&self, dimension: i64, attrs: &CollectiveAttrs) -> Op {
        self.all_gather_at(dimension, attrs, Location::caller())
    }

    fn all_gather_at(
        &self,
        dimension: i64,
        attrs: &CollectiveAttrs,
        loc: &'static Location<'static>,
    ) -> Op {
        self.builder().emit(
            OpKind::AllGather {
                attrs: Box::new(attrs.clone()),
                dimension,
            },
            &[self],
            None,
            loc,
        )
    }
}

/// All-gather: each device's cotangent is the sum over the group of the
/// cotangents' blocks that came from it: a reduce-scatter (sum) along the same
/// axis.
pub(crate) fn vjp_all_gather(n: &Node) -> Grads {
    let OpKind::AllGather { attrs, dimension } = n.kind else {
        return Err("not an all-gather".into());
    };
    let ct = n.ct();
    Ok(arrays(vec![Some(ct.reduce_scatter_by(
        BinaryOp::Add,
        *dimension,
        attrs,
        n.loc,
    ))]))
}

// ---------------------------------------------------------------------------------
// `reduce-scatter`

/// Reduce-scatter rule: an array whose `dimension` divides by the group size, a
/// reducer of two scalars of its type; the result is the operand with that axis
/// divided by the group size. Without groups, as all-gather, the declared result
/// says the group size.
pub fn infer_reduce_scatter(
    operand: &Shape,
    attrs: &CollectiveAttrs,
    dimension: i64,
    body: Option<(Vec<Shape>, Shape)>,
    target: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "reduce-scatter";
    let (ty, dims) = array_of(OP, operand)?;
    let axis = check_axis(OP, &[operand], dims, dimension)?;
    check_body(OP, &[operand], ty, body)?;
    if dims[axis] == 0 {
        // The CPU runtime divides by the scattered size: the process dies of
        // SIGFPE (fuzz seed 95 of the executables kind, its swap module).
        return Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::Dimension,
            format!("dimension {dimension} has size 0: nothing to scatter"),
        ));
    }
    match check_groups(OP, &[operand], attrs, true)? {
        Some(k) => {
            if dims[axis] % k != 0 {
                return Err(ShapeError::new(
                    OP,
                    &[operand],
                    ShapeErrorKind::Dimension,
                    format!(
                        "dimension {dimension} of size {} does not divide by the group size {k}",
                        dims[axis]
                    ),
                ));
            }
            let mut out = dims.to_vec();
            out[axis] /= k;
            Ok(Shape::array(ty, &out))
        }
        None => from_target(OP, operand, axis, target, |i, o| {
            (i == 0 && o == 0) || (o > 0 && i % o == 0)
        }),
    }
}

pub(crate) fn shape_reduce_scatter(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::ReduceScatter {
        attrs,
        dimension,
        body,
    } = kind
    else {
        return Err(super::table::not_for("reduce-scatter", kind));
    };
    infer_reduce_scatter(
        cx.operands[0],
        attrs,
        *dimension,
        cx.signature(*body),
        cx.target,
    )
}

pub(crate) fn lower_reduce_scatter(
    kind: &OpKind,
    cx: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::ReduceScatter {
        attrs,
        dimension,
        body,
    } = kind
    {
        lower_groups(attrs, p);
        p.dimensions = vec![*dimension];
        p.called_computation_ids = vec![(cx.comp_id)(*body)];
    }
}

pub(crate) fn raise_reduce_scatter(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [body] = cx.calls(p)?;
    Ok(OpKind::ReduceScatter {
        attrs: raise_groups(p)?,
        dimension: cx.one_dimension(p)?,
        body,
    })
}

pub(crate) fn text_reduce_scatter(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::ReduceScatter {
        attrs,
        dimension,
        body,
    } = kind
    {
        text_groups(attrs, out);
        out.list("dimensions", &[*dimension]);
        out.callee(cx, "to_apply", *body);
    }
}

impl Op {
    /// XLA's ReduceScatter with one binary op: the operands of each group
    /// combined, then split along `dimension` into one block per member; member
    /// `j` of a group keeps block `j` (`jax.lax.psum_scatter(x, axis, tiled=True)`).
    ///
    /// ```
    /// use xlaclient_core::{BinaryOp, Builder, Shape};
    /// let b = Builder::new("scatter");
    /// let x = b.parameter(0, Shape::of::<f32>(&[8, 3]), "x");
    /// assert_eq!(x.reduce_scatter(BinaryOp::Add, 0, &[vec![0, 1, 2, 3]]).dims()?, vec![2, 3]);
    /// assert!(x.reduce_scatter(BinaryOp::Add, 1, &[vec![0, 1]]).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn reduce_scatter(&self, op: BinaryOp, dimension: i64, groups: &[Vec<i64>]) -> Op {
        self.reduce_scatter_by(
            op,
            dimension,
            &CollectiveAttrs::groups(groups),
            Location::caller(),
        )
    }

    /// XLA's ReduceScatter with all its attributes and a reducer closure.
    #[track_caller]
    pub fn reduce_scatter_with(
        &self,
        dimension: i64,
        attrs: &CollectiveAttrs,
        body: impl FnOnce(&Op, &Op) -> Op,
    ) -> Op {
        let attrs = Box::new(attrs.clone());
        self.builder()
            .emit_reducing(self, "reduce-scatter", Location::caller(), body, |body| {
                OpKind::ReduceScatter {
                    attrs,
                    dimension,
                    body,
                }
            })
    }

    pub(crate) fn reduce_scatter_by(
        &self,
        op: BinaryOp,
        dimension: i64,
        attrs: &CollectiveAttrs,
        loc: &'static Location<'static>,
    ) -> Op {
        let f = match binary_reducer(self, "reduce-scatter", op, loc) {
            Ok(f) => f,
            Err(failed) => return failed,
        };
        let attrs = Box::new(attrs.clone());
        self.builder()
            .emit_reducing(self, "reduce-scatter", loc, f, |body| {
                OpKind::ReduceScatter {
                    attrs,
                    dimension,
                    body,
                }
            })
    }
}

/// Reduce-scatter (sum): each device's block of the sum came from every member's
/// operand, so each operand's cotangent is the group's cotangents joined: an
/// all-gather along the same axis. Other reducers have no rule.
pub(crate) fn vjp_reduce_scatter(n: &Node) -> Grads {
    let OpKind::ReduceScatter {
        attrs,
        dimension,
        body,
    } = n.kind
    else {
        return Err("not a reduce-scatter".into());
    };
    if super::reduction::simple_combiner(n.b, *body) != Some(BinaryOp::Add) {
        return Err(
            "this `reduce-scatter` reducer has no gradient rule (a sum has: an all-gather of the cotangents)"
                .into(),
        );
    }
    let ct = n.ct();
    Ok(arrays(vec![Some(
        ct.all_gather_at(*dimension, attrs, n.loc),
    )]))
}

// ---------------------------------------------------------------------------------
// `collective-permute`

/// Collective-permute rule: an array operand, pairs of non-negative ids with no
/// source and no target twice; the result has the operand's shape.
pub fn infer_collective_permute(
    operand: &Shape,
    attrs: &PermuteAttrs,
) -> Result<Shape, ShapeError> {
    const OP: &str = "collective-permute";
    array_of(OP, operand)?;
    let err = |r: String| ShapeError::new(OP, &[operand], ShapeErrorKind::Attribute, r);
    if let Some(c) = attrs.channel_id.filter(|c| *c < 1) {
        return Err(err(format!("the channel id must be at least 1, got {c}")));
    }
    let (mut sources, mut targets) = (HashSet::new(), HashSet::new());
    for &(s, t) in &attrs.pairs {
        if s < 0 || t < 0 {
            return Err(err(format!("the pair ({s}, {t}) has a negative id")));
        }
        if !sources.insert(s) {
            return Err(err(format!("source {s} is in two pairs")));
        }
        if !targets.insert(t) {
            return Err(err(format!("target {t} is in two pairs")));
        }
    }
    Ok(operand.clone())
}

pub(crate) fn shape_collective_permute(
    kind: &OpKind,
    cx: &InferCx<'_>,
) -> Result<Shape, ShapeError> {
    let OpKind::CollectivePermute(attrs) = kind else {
        return Err(super::table::not_for("collective-permute", kind));
    };
    infer_collective_permute(cx.operands[0], attrs)
}

pub(crate) fn lower_collective_permute(
    kind: &OpKind,
    _: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::CollectivePermute(attrs) = kind {
        p.source_target_pairs = attrs
            .pairs
            .iter()
            .map(|&(source, target)| proto::SourceTarget { source, target })
            .collect();
        p.channel_id = attrs.channel_id.unwrap_or(0);
    }
}

pub(crate) fn raise_collective_permute(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::CollectivePermute(Box::new(PermuteAttrs {
        pairs: p
            .source_target_pairs
            .iter()
            .map(|st| (st.source, st.target))
            .collect(),
        channel_id: (p.channel_id != 0).then_some(p.channel_id),
    })))
}

pub(crate) fn text_collective_permute(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::CollectivePermute(attrs) = kind {
        if let Some(c) = attrs.channel_id {
            out.attr("channel_id", c);
        }
        let pairs: Vec<Vec<i64>> = attrs.pairs.iter().map(|&(s, t)| vec![s, t]).collect();
        out.attr("source_target_pairs", groups_text(&pairs));
    }
}

impl Op {
    /// XLA's CollectivePermute: replica `source` sends its operand to `target`
    /// for each pair; a replica that is no target gets zeros
    /// (`jax.lax.ppermute`). No source and no target may appear twice.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("ring");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let shifted = x.collective_permute(&[(0, 1), (1, 2), (2, 3), (3, 0)]);
    /// assert_eq!(shifted.dims()?, vec![3]);
    /// assert!(x.collective_permute(&[(0, 1), (0, 2)]).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn collective_permute(&self, pairs: &[(i64, i64)]) -> Op {
        self.collective_permute_with(&PermuteAttrs {
            pairs: pairs.to_vec(),
            channel_id: None,
        })
    }

    /// XLA's CollectivePermute with all its attributes.
    #[track_caller]
    pub fn collective_permute_with(&self, attrs: &PermuteAttrs) -> Op {
        self.builder().emit(
            OpKind::CollectivePermute(Box::new(attrs.clone())),
            &[self],
            None,
            Location::caller(),
        )
    }
}

/// Collective-permute: the cotangents go back along the pairs reversed (JAX's
/// `ppermute` transpose).
pub(crate) fn vjp_collective_permute(n: &Node) -> Grads {
    let OpKind::CollectivePermute(attrs) = n.kind else {
        return Err("not a collective-permute".into());
    };
    let back = PermuteAttrs {
        pairs: attrs.pairs.iter().map(|&(s, t)| (t, s)).collect(),
        channel_id: attrs.channel_id,
    };
    let ct = n.ct();
    Ok(arrays(vec![Some(ct.builder().emit(
        OpKind::CollectivePermute(Box::new(back)),
        &[&ct],
        None,
        n.loc,
    ))]))
}

// ---------------------------------------------------------------------------------
// `all-to-all`

/// All-to-all rule (XLA's array form, one split and join axis): `dimension` an
/// axis whose size divides by the group size; the result has the operand's shape.
pub fn infer_all_to_all(
    operand: &Shape,
    attrs: &CollectiveAttrs,
    dimension: i64,
) -> Result<Shape, ShapeError> {
    const OP: &str = "all-to-all";
    let (_, dims) = array_of(OP, operand)?;
    let axis = check_axis(OP, &[operand], dims, dimension)?;
    if let Some(k) = check_groups(OP, &[operand], attrs, true)? {
        if dims[axis] % k != 0 {
            return Err(ShapeError::new(
                OP,
                &[operand],
                ShapeErrorKind::Dimension,
                format!(
                    "dimension {dimension} of size {} does not divide by the group size {k}",
                    dims[axis]
                ),
            ));
        }
    }
    Ok(operand.clone())
}

pub(crate) fn shape_all_to_all(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::AllToAll { attrs, dimension } = kind else {
        return Err(super::table::not_for("all-to-all", kind));
    };
    infer_all_to_all(cx.operands[0], attrs, *dimension)
}

pub(crate) fn lower_all_to_all(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::AllToAll { attrs, dimension } = kind {
        lower_groups(attrs, p);
        p.dimensions = vec![*dimension];
    }
}

pub(crate) fn raise_all_to_all(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::AllToAll {
        attrs: raise_groups(p)?,
        dimension: cx.one_dimension(p).map_err(|_| {
            "`all-to-all` is read in its array form only (one split dimension)".to_string()
        })?,
    })
}

pub(crate) fn text_all_to_all(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::AllToAll { attrs, dimension } = kind {
        text_groups(attrs, out);
        out.list("dimensions", &[*dimension]);
    }
}

impl Op {
    /// XLA's AllToAll (array form): each device splits its operand along
    /// `dimension` into one block per member of its group, sends block `j` to
    /// member `j`, and joins the blocks it receives along `dimension` in the
    /// group's order. The groups must be given and of one size that divides the
    /// axis.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("exchange");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
    /// assert_eq!(x.all_to_all(0, &[vec![0, 1]]).dims()?, vec![4, 3]);
    /// assert!(x.all_to_all(1, &[vec![0, 1]]).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn all_to_all(&self, dimension: i64, groups: &[Vec<i64>]) -> Op {
        self.all_to_all_with(dimension, &CollectiveAttrs::groups(groups))
    }

    /// XLA's AllToAll with all its attributes.
    #[track_caller]
    pub fn all_to_all_with(&self, dimension: i64, attrs: &CollectiveAttrs) -> Op {
        self.builder().emit(
            OpKind::AllToAll {
                attrs: Box::new(attrs.clone()),
                dimension,
            },
            &[self],
            None,
            Location::caller(),
        )
    }
}

/// All-to-all: block `j` of device `i` lands as block `i` of device `j`, an
/// exchange that is its own inverse, so the cotangents take the same all-to-all.
pub(crate) fn vjp_all_to_all(n: &Node) -> Grads {
    let OpKind::AllToAll { attrs, dimension } = n.kind else {
        return Err("not an all-to-all".into());
    };
    let ct = n.ct();
    Ok(arrays(vec![Some(ct.builder().emit(
        OpKind::AllToAll {
            attrs: attrs.clone(),
            dimension: *dimension,
        },
        &[&ct],
        None,
        n.loc,
    ))]))
}

// ---------------------------------------------------------------------------------
// Ids against the number of replicas, when a program is compiled

/// What the ids of a collective name.
enum Ids {
    Replicas,
    Partitions,
    Devices,
}

/// Checks every collective of `module` against the program's `replicas` and
/// `partitions`: each replica id (device id with global device ids, partition id
/// for a collective-permute or an all-to-all with a channel) below their count,
/// and replica groups, where given, covering every replica (device) as XLA's
/// verifier asks, so that the error names the op and the user's line. Both CPU
/// plugins abort the process (`Span::at` out of range) on a channel permute
/// naming a partition the program does not have.
pub fn check_device_ids(module: &ir::Module, replicas: i64, partitions: i64) -> Result<(), String> {
    for c in &module.comps {
        for ins in &c.instrs {
            // What the ids name: devices with global ids; partitions for a
            // permute or an all-to-all with a channel (XLA's cross-partition
            // mode); replicas otherwise.
            let (ids, space, op): (Vec<i64>, Ids, &str) = match &ins.kind {
                OpKind::AllReduce { attrs, .. }
                | OpKind::AllGather { attrs, .. }
                | OpKind::ReduceScatter { attrs, .. }
                | OpKind::AllToAll { attrs, .. } => (
                    attrs.replica_groups.iter().flatten().copied().collect(),
                    if attrs.use_global_device_ids {
                        Ids::Devices
                    } else if attrs.channel_id.is_some()
                        && matches!(ins.kind, OpKind::AllToAll { .. })
                    {
                        Ids::Partitions
                    } else {
                        Ids::Replicas
                    },
                    ins.kind.opcode().name(),
                ),
                OpKind::CollectivePermute(attrs) => (
                    attrs.pairs.iter().flat_map(|&(s, t)| [s, t]).collect(),
                    if attrs.channel_id.is_some() {
                        Ids::Partitions
                    } else {
                        Ids::Replicas
                    },
                    "collective-permute",
                ),
                _ => continue,
            };
            let (limit, what) = match space {
                Ids::Devices => (replicas * partitions, "device"),
                Ids::Partitions => (partitions, "partition"),
                Ids::Replicas => (replicas, "replica"),
            };
            if let Some(bad) = ids.iter().find(|&&id| id >= limit) {
                return Err(format!(
                    "`{op}` at {} names {what} {bad}, but the program has {limit} {what}s",
                    ins.loc
                ));
            }
            // XLA's verifier wants every replica (device) in some group.
            if let OpKind::AllReduce { attrs, .. }
            | OpKind::AllGather { attrs, .. }
            | OpKind::ReduceScatter { attrs, .. }
            | OpKind::AllToAll { attrs, .. } = &ins.kind
            {
                if !attrs.replica_groups.is_empty() && ids.len() as i64 != limit {
                    return Err(format!(
                        "`{op}` at {}: its replica groups cover {} of the {limit} {what}s; they must cover all",
                        ins.loc,
                        ids.len()
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(d: &[i64]) -> Shape {
        Shape::of::<f32>(d)
    }

    #[test]
    fn group_rules() {
        let g = |v: &[&[i64]]| {
            CollectiveAttrs::groups(&v.iter().map(|g| g.to_vec()).collect::<Vec<_>>())
        };
        assert_eq!(
            infer_all_reduce(&f32s(&[3]), &g(&[&[0, 1], &[2, 3]]), None).unwrap(),
            f32s(&[3])
        );
        let e = infer_all_reduce(&f32s(&[3]), &g(&[&[0, 1], &[1, 2]]), None).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        assert!(infer_all_reduce(&f32s(&[3]), &g(&[&[-1]]), None).is_err());
        assert!(infer_all_reduce(&f32s(&[3]), &g(&[&[]]), None).is_err());
        let global = CollectiveAttrs::groups(&[]).global_device_ids();
        assert!(infer_all_reduce(&f32s(&[3]), &global, None).is_err());
        assert!(infer_all_reduce(&f32s(&[3]), &global.channel(1), None).is_ok());
        // A reducer of the wrong type.
        let body = Some((vec![Shape::of::<f64>(&[]); 2], Shape::of::<f64>(&[])));
        assert!(infer_all_reduce(&f32s(&[3]), &g(&[]), body).is_err());
    }

    #[test]
    fn gather_scatter_to_all_rules() {
        let g4 = CollectiveAttrs::groups(&[vec![0, 1, 2, 3]]);
        assert_eq!(
            infer_all_gather(&f32s(&[2, 3]), &g4, 1, None).unwrap(),
            f32s(&[2, 12])
        );
        assert!(infer_all_gather(&f32s(&[2, 3]), &g4, 2, None).is_err());
        assert!(infer_all_gather(&f32s(&[2, 3]), &g4, -1, None).is_err());
        let uneven = CollectiveAttrs::groups(&[vec![0, 1, 2], vec![3]]);
        assert!(infer_all_gather(&f32s(&[2]), &uneven, 0, None).is_err());
        // Without groups the declared result decides.
        let all = CollectiveAttrs::default();
        assert_eq!(
            infer_all_gather(&f32s(&[2, 3]), &all, 0, Some(&f32s(&[8, 3]))).unwrap(),
            f32s(&[8, 3])
        );
        assert!(infer_all_gather(&f32s(&[2, 3]), &all, 0, Some(&f32s(&[7, 3]))).is_err());
        assert!(infer_all_gather(&f32s(&[2, 3]), &all, 0, None).is_err());
        assert_eq!(
            infer_reduce_scatter(&f32s(&[8, 3]), &g4, 0, None, None).unwrap(),
            f32s(&[2, 3])
        );
        let e = infer_reduce_scatter(&f32s(&[8, 3]), &g4, 1, None, None).unwrap_err();
        assert!(e.to_string().contains("divide"), "{e}");
        assert_eq!(
            infer_all_to_all(&f32s(&[4, 3]), &g4, 0).unwrap(),
            f32s(&[4, 3])
        );
        assert!(infer_all_to_all(&f32s(&[4, 3]), &g4, 1).is_err());
    }

    #[test]
    fn permute_rules() {
        let p = |pairs: &[(i64, i64)]| PermuteAttrs {
            pairs: pairs.to_vec(),
            channel_id: None,
        };
        assert!(infer_collective_permute(&f32s(&[2]), &p(&[(0, 1), (1, 0)])).is_ok());
        assert!(infer_collective_permute(&f32s(&[2]), &p(&[(0, 1), (0, 2)])).is_err());
        assert!(infer_collective_permute(&f32s(&[2]), &p(&[(0, 1), (2, 1)])).is_err());
        assert!(infer_collective_permute(&f32s(&[2]), &p(&[(-1, 1)])).is_err());
    }

    #[test]
    fn builder_errors_name_the_op_and_the_line() {
        let b = Builder::new("c");
        let x = b.parameter(0, f32s(&[3]), "x");
        let e = x.reduce_scatter(BinaryOp::Add, 0, &[vec![0, 1]]);
        let msg = e.dims().unwrap_err().to_string();
        assert!(
            msg.contains("reduce-scatter") && msg.contains("collective.rs"),
            "{msg}"
        );
        let e = x.all_reduce(BinaryOp::Subtract, &[]);
        assert!(e.dims().unwrap_err().to_string().contains("all-reduce"));
        assert_eq!(
            b.replica_id().shape().unwrap(),
            Shape::scalar(ElementType::U32)
        );
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: an all-reduce combines element by element: the batched value as it is.
pub(crate) fn batch_all_reduce(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::shifted(n, n.kind.clone())
}

/// Batching: gathered along the axis one on.
pub(crate) fn batch_all_gather(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::AllGather { attrs, dimension } = n.kind else {
        return Err("not an all-gather".into());
    };
    crate::batching::shifted(
        n,
        OpKind::AllGather {
            attrs: attrs.clone(),
            dimension: dimension + 1,
        },
    )
}

/// Batching: scattered along the axis one on.
pub(crate) fn batch_reduce_scatter(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::ReduceScatter {
        attrs,
        dimension,
        body,
    } = n.kind
    else {
        return Err("not a reduce-scatter".into());
    };
    crate::batching::shifted(
        n,
        OpKind::ReduceScatter {
            attrs: attrs.clone(),
            dimension: dimension + 1,
            body: *body,
        },
    )
}

/// Batching: the batched value sent as it is.
pub(crate) fn batch_collective_permute(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::shifted(n, n.kind.clone())
}

/// Batching: split and joined along the axis one on.
pub(crate) fn batch_all_to_all(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::AllToAll { attrs, dimension } = n.kind else {
        return Err("not an all-to-all".into());
    };
    crate::batching::shifted(
        n,
        OpKind::AllToAll {
            attrs: attrs.clone(),
            dimension: dimension + 1,
        },
    )
}

/// Tangent: a sum over devices is linear.
pub(crate) fn jvp_all_reduce(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    sum_only(n)
}

/// Tangent: linear.
pub(crate) fn jvp_all_gather(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: a summing reduce-scatter is linear.
pub(crate) fn jvp_reduce_scatter(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    sum_only(n)
}

/// Tangent: linear.
pub(crate) fn jvp_collective_permute(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear.
pub(crate) fn jvp_all_to_all(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

fn sum_only(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let body = match n.kind {
        OpKind::AllReduce { body, .. } | OpKind::ReduceScatter { body, .. } => *body,
        _ => return Err("not a reduction over devices".into()),
    };
    match super::reduction::simple_combiner(n.b, body) {
        Some(BinaryOp::Add) => crate::forward::linear(n),
        _ => Err("a tangent rule for sums over devices only".into()),
    }
}
