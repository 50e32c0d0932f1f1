//! Batching (`jax.vmap`) as a pass over the IR: the user's function is traced once
//! for one example into a scratch computation, then each instruction the results
//! depend on is emitted again into the caller's computation with a batch axis, by
//! the op's batching rule (`batch_*` in its family file, dispatched by the op
//! table, [`crate::ops::table`]).
//!
//! A value during batching is a `BVal`: the op holding it in the caller's
//! computation and where its batch axis is, or `None` when it is the same for every
//! example (an unbatched value is never broadcast until an op needs it batched). An
//! instruction none of whose operands is batched is copied as it is. An op without
//! a rule is an error naming the op and the line that built it, never a wrong
//! answer.
//!
//! Named axes: inside `vmap` with [`Vmap::axis_name`], the named collectives
//! (`psum_axis`, `pmean_axis`, `pmax_axis`, `pmin_axis`, `all_gather_axis`,
//! `axis_index`) over that name reduce over (or gather along) the batch axis, as
//! JAX's collectives over a vmapped axis do.

pub use crate::ops::table::batching;
use std::collections::HashMap;
use std::panic::Location;

use crate::builder::{Builder, Op};
use crate::error::{GraphError, ShapeError, ShapeErrorKind};
use crate::ir::{CompId, OpKind, Value};
use crate::shape::Shape;
use crate::tree::Tree;

/// A value during batching: an array with its batch axis (`None`: the same for
/// every example), or a tuple of such values.
#[derive(Clone)]
pub(crate) enum BVal {
    /// An array of the caller's computation.
    Array {
        /// The op holding it (with the batch axis, when batched).
        op: Op,
        /// Where the batch axis is.
        bdim: Option<usize>,
    },
    /// A tuple, element by element.
    Tuple(Vec<BVal>),
}

impl BVal {
    /// A batched array with the batch axis at `bdim`.
    pub(crate) fn at(op: Op, bdim: usize) -> BVal {
        BVal::Array {
            op,
            bdim: Some(bdim),
        }
    }

    /// An unbatched array.
    pub(crate) fn same(op: Op) -> BVal {
        BVal::Array { op, bdim: None }
    }

    /// Whether any part is batched.
    pub(crate) fn is_batched(&self) -> bool {
        match self {
            BVal::Array { bdim, .. } => bdim.is_some(),
            BVal::Tuple(e) => e.iter().any(BVal::is_batched),
        }
    }

    /// The array's op and batch axis (`Err` for a tuple).
    pub(crate) fn array(&self) -> Result<(&Op, Option<usize>), String> {
        match self {
            BVal::Array { op, bdim } => Ok((op, *bdim)),
            BVal::Tuple(_) => Err("a tuple where an array was expected".into()),
        }
    }

    /// The value as one op of the caller's computation, unbatched (a tuple is
    /// built from its elements). Only for unbatched values.
    pub(crate) fn plain(&self, b: &Builder, loc: &'static Location<'static>) -> Op {
        match self {
            BVal::Array { op, .. } => op.clone(),
            BVal::Tuple(e) => {
                let ops: Vec<Op> = e.iter().map(|v| v.plain(b, loc)).collect();
                let refs: Vec<&Op> = ops.iter().collect();
                b.emit(OpKind::Tuple, &refs, None, loc)
            }
        }
    }

    /// The array with its batch axis at 0: moved there, or broadcast to `size`
    /// when unbatched.
    pub(crate) fn front(&self, size: i64, loc: &'static Location<'static>) -> Result<Op, String> {
        let (op, bdim) = self.array()?;
        Ok(match bdim {
            Some(0) => op.clone(),
            Some(d) => move_axis(op, d, 0, loc),
            None => {
                let dims = op.dims().map_err(|e| e.to_string())?;
                let mut out = vec![size];
                out.extend(&dims);
                let map: Vec<i64> = (1..=dims.len() as i64).collect();
                op.on(loc).broadcast_in_dim(&out, &map)
            }
        })
    }

    /// The value with every batched array's axis at 0 and every unbatched one
    /// broadcast (tuples element by element): what a loop carry needs.
    pub(crate) fn all_front(
        &self,
        size: i64,
        loc: &'static Location<'static>,
    ) -> Result<BVal, String> {
        match self {
            BVal::Array { .. } => Ok(BVal::at(self.front(size, loc)?, 0)),
            BVal::Tuple(e) => Ok(BVal::Tuple(
                e.iter()
                    .map(|v| v.all_front(size, loc))
                    .collect::<Result<_, _>>()?,
            )),
        }
    }
}

/// `op` with axis `from` moved to position `to` (the others keep their order).
pub(crate) fn move_axis(op: &Op, from: usize, to: usize, loc: &'static Location<'static>) -> Op {
    if from == to {
        return op.clone();
    }
    let rank = match op.rank() {
        Ok(r) => r,
        Err(_) => return op.clone(),
    };
    let mut perm: Vec<i64> = (0..rank as i64).filter(|a| *a != from as i64).collect();
    perm.insert(to, from as i64);
    op.on(loc).transpose(&perm)
}

/// `s` with a batch axis of `size` at 0 (every array of a tuple).
pub(crate) fn with_batch(s: &Shape, size: i64) -> Shape {
    match s {
        Shape::Array { ty, dims } => {
            let mut d = vec![size];
            d.extend(dims);
            Shape::Array {
                ty: *ty,
                dims: d.into(),
            }
        }
        Shape::Tuple(e) => Shape::Tuple(e.iter().map(|x| with_batch(x, size)).collect()),
        other => other.clone(),
    }
}

/// One instruction as a batching rule sees it.
pub(crate) struct BatchNode<'a> {
    /// The op with its attributes (of the one-example instruction).
    pub kind: &'a OpKind,
    /// The operands, batched or not.
    pub operands: &'a [BVal],
    /// The one-example shape of each result.
    pub shapes: &'a [Shape],
    /// The batch size.
    pub size: i64,
    /// The computation the batched ops go into.
    pub b: &'a Builder,
    /// The line that built the one-example instruction.
    pub loc: &'static Location<'static>,
    /// The one-example instruction (computation, index): the key of the graph's
    /// side tables.
    pub at: (CompId, u32),
    /// The pass (for rules that batch a body: loops, conditionals, calls).
    pub pass: &'a Batcher,
}

/// A batching rule's answer: one value per result, or why this form of the op
/// has no rule.
pub(crate) type Batched = Result<Vec<BVal>, String>;

impl BatchNode<'_> {
    /// Operand `k` with its batch axis at 0 (broadcast when unbatched).
    pub fn front(&self, k: usize) -> Result<Op, String> {
        self.operands[k].front(self.size, self.loc)
    }

    /// The op with its batch axis (or `None`) of operand `k`.
    pub fn operand(&self, k: usize) -> Result<(Op, Option<usize>), String> {
        let (o, d) = self.operands[k].array()?;
        Ok((o.clone(), d))
    }

    /// Emits `kind` on `operands` (arrays batched at 0, the results too) and
    /// returns its results, batched at 0.
    pub fn emit_front(&self, kind: OpKind, operands: &[Op]) -> Batched {
        let refs: Vec<&Op> = operands.iter().collect();
        let multi = kind.multi_result(operands.len());
        let target = if multi {
            Shape::Tuple(
                self.shapes
                    .iter()
                    .map(|s| with_batch(s, self.size))
                    .collect(),
            )
        } else {
            with_batch(&self.shapes[0], self.size)
        };
        let r = self.b.emit(kind, &refs, Some(target), self.loc);
        if let Some(e) = failure(&r) {
            return Err(e);
        }
        Ok(self
            .b
            .results(r, self.shapes.len(), multi)
            .into_iter()
            .map(|o| BVal::at(o, 0))
            .collect())
    }
}

/// The error of a failed op, as a rule's reason.
pub(crate) fn failure(op: &Op) -> Option<String> {
    if !op.is_poisoned() {
        return None;
    }
    Some(match op.shape() {
        Err(e) => e.to_string(),
        Ok(_) => "a batched op failed".into(),
    })
}

/// The rule of the element-wise ops: every operand batched at 0 (a scalar operand
/// of an array op, a select's predicate or a clamp's bound, broadcast to the
/// result's shape).
pub(crate) fn elementwise(n: &BatchNode) -> Batched {
    let out = n.shapes[0].dims().to_vec();
    let mut full = vec![n.size];
    full.extend(&out);
    let ops = (0..n.operands.len())
        .map(|k| {
            let f = n.front(k)?;
            let r = f.rank().map_err(|e| e.to_string())?;
            Ok(if r == 1 && !out.is_empty() && n.operands.len() > 1 {
                f.on(n.loc).broadcast_in_dim(&full, &[0])
            } else {
                f
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    n.emit_front(n.kind.clone(), &ops)
}

/// The rule of ops whose attributes name axes: operands batched at 0 and every axis
/// attribute shifted by one (`shift` rebuilds the kind).
pub(crate) fn shifted(n: &BatchNode, kind: OpKind) -> Batched {
    let ops = (0..n.operands.len())
        .map(|k| n.front(k))
        .collect::<Result<Vec<_>, _>>()?;
    n.emit_front(kind, &ops)
}

/// `axes` shifted past a leading batch axis.
pub(crate) fn plus_one(axes: &[i64]) -> Box<[i64]> {
    axes.iter().map(|a| a + 1).collect()
}

/// A named collective over a vmapped axis, recorded when it is built inside the
/// traced function (an identity instruction stands for it there).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Named {
    /// `psum` over the batch.
    Sum,
    /// `pmean` over the batch.
    Mean,
    /// `pmax` over the batch.
    Max,
    /// `pmin` over the batch.
    Min,
    /// `all_gather` along a new axis at this position.
    Gather(usize),
    /// The example's index along the axis (`axis_index`).
    Index,
}

/// How one `vmap` maps its function: the batch axis of each input leaf and of each
/// output leaf (`None`: not batched, JAX's `None`), the axis' name for the named
/// collectives, and the batch size when no input is batched.
///
/// ```
/// use xlaclient_core::{Builder, Shape, Vmap};
/// let b = Builder::new("vmap");
/// let xs = b.parameter(0, Shape::of::<f32>(&[8, 3]), "xs");
/// let w = b.parameter(1, Shape::of::<f32>(&[3, 2]), "w");
/// // One example's function, mapped over the rows of `xs`; `w` is shared.
/// let ys = b.vmap(&Vmap::new().in_axes([Some(0), None]), (xs, w), |_, (x, w)| {
///     x.matmul(&w).tanh()
/// });
/// assert_eq!(ys.dims()?, vec![8, 2]);
/// # Ok::<(), xlaclient_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Vmap {
    in_axes: Axes,
    out_axes: Axes,
    name: Option<String>,
    size: Option<i64>,
}

/// Batch axes for the leaves of a tree: one for every leaf, or one per leaf (in
/// flattening order); `None` is "not batched". Negative axes count from the end.
#[derive(Clone, Debug, PartialEq)]
pub enum Axes {
    /// The same for every leaf.
    All(Option<i64>),
    /// One per leaf.
    Each(Vec<Option<i64>>),
}

impl From<i64> for Axes {
    fn from(a: i64) -> Axes {
        Axes::All(Some(a))
    }
}

impl From<Option<i64>> for Axes {
    fn from(a: Option<i64>) -> Axes {
        Axes::All(a)
    }
}

impl From<Vec<Option<i64>>> for Axes {
    fn from(a: Vec<Option<i64>>) -> Axes {
        Axes::Each(a)
    }
}

impl<const N: usize> From<[Option<i64>; N]> for Axes {
    fn from(a: [Option<i64>; N]) -> Axes {
        Axes::Each(a.to_vec())
    }
}

impl Axes {
    fn resolve(&self, n: usize, what: &str) -> Result<Vec<Option<i64>>, String> {
        match self {
            Axes::All(a) => Ok(vec![*a; n]),
            Axes::Each(v) if v.len() == n => Ok(v.clone()),
            Axes::Each(v) => Err(format!(
                "{} {what} axes for {n} leaves (give one per leaf, in flattening order)",
                v.len()
            )),
        }
    }
}

impl Default for Vmap {
    fn default() -> Self {
        Vmap::new()
    }
}

impl Vmap {
    /// Every input and output leaf batched along axis 0 (`jax.vmap(f)`).
    pub fn new() -> Vmap {
        Vmap {
            in_axes: Axes::All(Some(0)),
            out_axes: Axes::All(Some(0)),
            name: None,
            size: None,
        }
    }

    /// The inputs' batch axes (`in_axes`).
    pub fn in_axes(mut self, axes: impl Into<Axes>) -> Vmap {
        self.in_axes = axes.into();
        self
    }

    /// The outputs' batch axes (`out_axes`); an unbatched output with an axis is
    /// broadcast, a batched one with `None` is an error.
    pub fn out_axes(mut self, axes: impl Into<Axes>) -> Vmap {
        self.out_axes = axes.into();
        self
    }

    /// Names the batch axis (`axis_name`): the named collectives over this name
    /// inside the function combine the examples.
    pub fn axis_name(mut self, name: &str) -> Vmap {
        self.name = Some(name.to_string());
        self
    }

    /// The batch size (`axis_size`), needed only when no input is batched.
    pub fn axis_size(mut self, size: i64) -> Vmap {
        self.size = Some(size);
        self
    }
}

impl Builder {
    /// `jax.vmap`: `f` written for one example, applied to a batch. `args` is a
    /// tree of ops; the leaves `spec`'s input axes mark are split along that axis
    /// (all the same size), the others are shared by every example. `f` receives
    /// the one-example values and returns a tree of ops; each output leaf gets the
    /// batch axis `spec`'s output axes say. The result is the batched outputs, in
    /// this builder's computation.
    ///
    /// Works on any program built from ops with a batching rule (the op table's
    /// batching column), loops and conditionals included, and nests (a `vmap`
    /// inside `f`, `f` inside a loop body). An op without a rule, mismatched batch
    /// sizes or a bad axis is an error naming the op and the line.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape, Vmap};
    /// let b = Builder::new("per_example_grads");
    /// let w = b.parameter(0, Shape::of::<f32>(&[3]), "w");
    /// let xs = b.parameter(1, Shape::of::<f32>(&[16, 3]), "xs");
    /// // The gradient of one example's loss, for each of the 16 examples.
    /// let g = b.vmap(&Vmap::new().in_axes([None, Some(0)]), (w, xs), |b, (w, x)| {
    ///     let loss = (&w * &x).reduce_sum(&[0]).tanh();
    ///     b.grad(&loss, &w)
    /// });
    /// assert_eq!(g.dims()?, vec![16, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn vmap<I, O>(&self, spec: &Vmap, args: I, f: impl FnOnce(&Builder, I) -> O) -> O
    where
        I: Tree<Op, With<Op> = I>,
        O: Tree<Op, With<Op> = O>,
    {
        let loc = Location::caller();
        match self.vmap_leaves(spec, args, f, loc) {
            Ok(out) => out,
            Err((template, failed)) => template.map_ref(|_| failed.clone()),
        }
    }

    /// [`vmap`](Self::vmap) on flat leaves; `Err` carries the output tree (or a
    /// stand-in) and the failed op.
    #[allow(clippy::type_complexity)]
    fn vmap_leaves<I, O>(
        &self,
        spec: &Vmap,
        args: I,
        f: impl FnOnce(&Builder, I) -> O,
        loc: &'static Location<'static>,
    ) -> Result<O, (O, Op)>
    where
        I: Tree<Op, With<Op> = I>,
        O: Tree<Op, With<Op> = O>,
    {
        let leaves: Vec<Op> = args.leaves().into_iter().cloned().collect();
        let bad = |what: String| {
            self.fail(
                ShapeError::new("vmap", &[], ShapeErrorKind::Attribute, what),
                loc,
            )
        };
        // Until `f` has run there is no output tree: a failure before it runs `f` on
        // the arguments as they are, only for the structure.
        let prep = (|| -> Result<(CompId, i64, Vec<(Shape, Option<usize>)>), Op> {
            let in_axes = match spec.in_axes.resolve(leaves.len(), "input") {
                Ok(a) => a,
                Err(e) => return Err(bad(e)),
            };
            let refs: Vec<&Op> = leaves.iter().collect();
            let outer = self.target(&refs, "vmap", loc)?;
            // The batch size and each input's one-example shape.
            let mut size = spec.size;
            let mut inputs: Vec<(Shape, Option<usize>)> = Vec::with_capacity(leaves.len());
            for (k, (x, a)) in leaves.iter().zip(&in_axes).enumerate() {
                let s = match x.shape() {
                    Ok(s) if s.is_array() => s,
                    Ok(s) => {
                        return Err(bad(format!("input {k} is {s}; vmap maps arrays")));
                    }
                    Err(_) => return Err(x.clone()),
                };
                let Some(a) = a else {
                    inputs.push((s, None));
                    continue;
                };
                let r = s.rank() as i64;
                let ax = if *a < 0 { a + r } else { *a };
                if ax < 0 || ax >= r {
                    return Err(bad(format!("input {k} ({s}) has no axis {a} to map over")));
                }
                let n = s.dims()[ax as usize];
                match size {
                    Some(m) if m != n => {
                        return Err(bad(format!(
                            "input {k} ({s}) has {n} examples along axis {ax}, another input or axis_size {m}"
                        )));
                    }
                    _ => size = Some(n),
                }
                let mut d = s.dims().to_vec();
                d.remove(ax as usize);
                let one = Shape::Array {
                    ty: s.element_type().expect("array"),
                    dims: d.into(),
                };
                inputs.push((one, Some(ax as usize)));
            }
            let Some(size) = size else {
                return Err(bad(
                    "no input is batched: give the batch size with axis_size".into(),
                ));
            };
            Ok((outer, size, inputs))
        })();
        let (outer, size, inputs) = match prep {
            Ok(p) => p,
            Err(failed) => return Err((f(self, args), failed)),
        };
        let ob = Builder {
            g: self.g.clone(),
            comp: outer,
        };
        // Trace `f` for one example into a scratch computation inside `outer`.
        let scratch = self.g.borrow_mut().add_comp("vmap", Some(outer));
        let sb = Builder {
            g: self.g.clone(),
            comp: scratch,
        };
        let params: Vec<Op> = inputs
            .iter()
            .enumerate()
            .map(|(k, (s, _))| sb.on(loc).parameter(k, s.clone(), &format!("x{k}")))
            .collect();
        let one_args = args
            .rebuild(params.clone())
            .expect("one parameter per leaf");
        if let Some(name) = &spec.name {
            self.g
                .borrow_mut()
                .vmap_axes
                .push((name.clone(), size, scratch));
        }
        let out = f(&sb, one_args);
        if spec.name.is_some() {
            self.g.borrow_mut().vmap_axes.pop();
        }
        let outs: Vec<Op> = out.leaves().into_iter().cloned().collect();
        let fail_out = |failed: Op| (out.map_ref(|_| failed.clone()), failed);
        if let Some(p) = outs.iter().find(|o| o.is_poisoned()) {
            return Err(fail_out(p.clone()));
        }
        let out_axes = match spec.out_axes.resolve(outs.len(), "output") {
            Ok(a) => a,
            Err(e) => return Err(fail_out(bad(e))),
        };
        // The outputs as values of the scratch computation (outer values come in as
        // captures).
        let mut roots = Vec::with_capacity(outs.len());
        for o in &outs {
            let r = self.g.borrow_mut().import(o.comp, o.v, scratch);
            match r {
                Ok(v) => roots.push(v),
                Err(reason) => {
                    return Err(fail_out(self.fail_graph(
                        GraphError::OutOfScope {
                            used_as: "an output of the function given to `vmap`".into(),
                            reason,
                        },
                        loc,
                    )));
                }
            }
        }
        let mut env: HashMap<Value, BVal> = HashMap::new();
        for (k, (p, (_, ax))) in params.iter().zip(&inputs).enumerate() {
            let x = leaves[k].clone();
            env.insert(p.v, BVal::Array { op: x, bdim: *ax });
        }
        let batcher = Batcher {
            size,
            axis: spec.name.clone(),
            b: ob.clone(),
        };
        let vals = match batcher.run(scratch, &mut env, &roots) {
            Ok(v) => v,
            Err(failed) => return Err(fail_out(failed)),
        };
        let mut result = Vec::with_capacity(vals.len());
        for (k, (v, a)) in vals.iter().zip(&out_axes).enumerate() {
            let (op, bdim) = match v.array() {
                Ok(x) => x,
                Err(e) => return Err(fail_out(bad(format!("output {k}: {e}")))),
            };
            let placed = match (bdim, a) {
                (_, None) if bdim.is_some() => {
                    return Err(fail_out(bad(format!(
                        "output {k} depends on the batch but its out_axes entry is None"
                    ))));
                }
                (_, None) => op.clone(),
                (d, Some(a)) => {
                    let r = op.rank().unwrap_or(0) as i64 + i64::from(d.is_none());
                    let to = if *a < 0 { a + r } else { *a };
                    if to < 0 || to >= r {
                        return Err(fail_out(bad(format!(
                            "output {k} has no axis {a} to put the batch at"
                        ))));
                    }
                    let front = match v.front(size, loc) {
                        Ok(f) => f,
                        Err(e) => return Err(fail_out(bad(e))),
                    };
                    move_axis(&front, 0, to as usize, loc)
                }
            };
            result.push(placed);
        }
        match out.rebuild(result) {
            Ok(o) => Ok(o),
            Err(e) => {
                let failed = bad(e.to_string());
                Err(fail_out(failed))
            }
        }
    }
}

/// The pass: batches instructions of one computation into another.
pub(crate) struct Batcher {
    /// The batch size.
    pub size: i64,
    /// The batch axis' name.
    pub axis: Option<String>,
    /// Where the batched instructions go.
    pub b: Builder,
}

impl Batcher {
    /// Emits, into `self.b`, the batched form of the instructions of `src` that
    /// `roots` depend on. `env` holds the values of `src`'s parameters (and gets
    /// every value computed); captures of `src` not in it are unbatched values of
    /// its parent. Returns the roots' values, or a failed op.
    pub(crate) fn run(
        &self,
        src: CompId,
        env: &mut HashMap<Value, BVal>,
        roots: &[Value],
    ) -> Result<Vec<BVal>, Op> {
        let (mut instrs, parent, captures, forwarded) = {
            let g = self.b.g.borrow();
            let c = g.comp(src);
            let caps: HashMap<u32, Value> =
                c.captures.iter().map(|(outer, p)| (*p, *outer)).collect();
            let fw: HashMap<Value, Value> = g
                .forwarded
                .iter()
                .filter(|((c, _), _)| *c == src)
                .map(|((_, v), t)| (*v, *t))
                .collect();
            (c.instrs.clone(), c.parent, caps, fw)
        };
        let live_of = |instrs: &[crate::ir::Instr], roots: &[Value]| -> Vec<bool> {
            let mut live = vec![false; instrs.len()];
            let mut work: Vec<usize> = roots.iter().map(|r| r.instr as usize).collect();
            while let Some(i) = work.pop() {
                if !live[i] {
                    live[i] = true;
                    work.extend(instrs[i].operands.iter().map(|v| v.instr as usize));
                }
            }
            live
        };
        // A loop's results served by the loop its gradient rule built (which also
        // stores what the backward pass needs: see `Graph::forwarded`) are read
        // from that loop when it is live anyway, so only it is batched and the
        // forward loop runs once, as in the unbatched program.
        let mut roots = roots.to_vec();
        if !forwarded.is_empty() {
            let live0 = live_of(&instrs, &roots);
            let n = instrs.len();
            let resolve = |mut v: Value| {
                let mut hops = 0;
                while let Some(t) = forwarded.get(&v) {
                    hops += 1;
                    if !live0[t.instr as usize] || hops > n {
                        break;
                    }
                    v = *t;
                }
                v
            };
            for ins in instrs.iter_mut() {
                for v in ins.operands.iter_mut() {
                    *v = resolve(*v);
                }
            }
            for r in roots.iter_mut() {
                *r = resolve(*r);
            }
        }
        // Instructions with a side effect (host callbacks, loops that run one) are
        // batched whether or not the roots depend on them.
        let seeds: Vec<Value> = {
            let effects = self.b.g.borrow().effectful_comps();
            let fx = (0..instrs.len()).filter(|i| {
                let k = &instrs[*i].kind;
                k.has_side_effect() || k.called().iter().any(|c| effects[c.0 as usize])
            });
            roots
                .iter()
                .copied()
                .chain(fx.map(|i| Value::of(i as u32)))
                .collect()
        };
        let live = live_of(&instrs, &seeds);
        // Operands first (forwarding can point an instruction at a later one).
        let mut order: Vec<usize> = Vec::with_capacity(instrs.len());
        let mut state = vec![0u8; instrs.len()];
        for r in &seeds {
            let mut stack = vec![(r.instr as usize, false)];
            while let Some((i, done)) = stack.pop() {
                if done {
                    if state[i] != 2 {
                        state[i] = 2;
                        order.push(i);
                    }
                    continue;
                }
                if state[i] != 0 {
                    continue;
                }
                state[i] = 1;
                stack.push((i, true));
                for v in instrs[i].operands.iter().rev() {
                    if state[v.instr as usize] == 0 {
                        stack.push((v.instr as usize, false));
                    }
                }
            }
        }
        for i in order {
            let ins = &instrs[i];
            if !live[i] || env.contains_key(&Value::of(i as u32)) {
                continue;
            }
            let loc = ins.loc;
            if let OpKind::Parameter { .. } = ins.kind {
                let Some(outer) = captures.get(&(i as u32)) else {
                    return Err(self.internal("a parameter without a value", loc));
                };
                let parent = parent.expect("a capture has a parent");
                env.insert(Value::of(i as u32), BVal::same(self.b.op(parent, *outer)));
                continue;
            }
            let operands: Vec<BVal> = ins
                .operands
                .iter()
                .map(|v| env.get(v).cloned())
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| self.internal("an operand without a value", loc))?;
            let shape = self.b.g.borrow().shapes.get(ins.shape).clone();
            let multi = ins.kind.multi_result(ins.operands.len());
            let shapes: Vec<Shape> = match (&shape, multi) {
                (Shape::Tuple(e), true) => e.clone(),
                _ => vec![shape.clone()],
            };
            let named = self.b.g.borrow().vmap_named.get(&(src, i as u32)).cloned();
            let results: Vec<BVal> = match (&ins.kind, named) {
                (_, Some((axis, what))) => {
                    vec![self.named(&operands[0], &axis, &what, &shapes[0], loc)?]
                }
                (OpKind::Tuple, _) => vec![BVal::Tuple(operands)],
                (OpKind::GetTupleElement { index }, _) => match &operands[0] {
                    BVal::Tuple(e) => vec![e[*index as usize].clone()],
                    BVal::Array { op, bdim: None } => {
                        vec![BVal::same(op.on(loc).get_tuple_element(*index as usize))]
                    }
                    BVal::Array { .. } => {
                        return Err(self.internal("a batched tuple held as one op", loc));
                    }
                },
                (kind, _) if !operands.iter().any(BVal::is_batched) => {
                    let ops: Vec<Op> = operands.iter().map(|v| v.plain(&self.b, loc)).collect();
                    let refs: Vec<&Op> = ops.iter().collect();
                    let r = self.b.emit(kind.clone(), &refs, Some(shape.clone()), loc);
                    if r.is_poisoned() {
                        return Err(r);
                    }
                    self.b
                        .results(r, shapes.len(), multi)
                        .into_iter()
                        .map(BVal::same)
                        .collect()
                }
                (kind, _) => {
                    let node = BatchNode {
                        kind,
                        operands: &operands,
                        shapes: &shapes,
                        size: self.size,
                        b: &self.b,
                        loc,
                        at: (src, i as u32),
                        pass: self,
                    };
                    let _origin = self.b.on(loc);
                    match crate::ops::table::batch(&node) {
                        Ok(v) if v.len() == shapes.len() => v,
                        Ok(_) => {
                            return Err(
                                self.internal("a rule gave the wrong number of results", loc)
                            );
                        }
                        Err(reason) => {
                            return Err(self.b.fail_with(crate::error::Error::NoRule {
                                transform: "batching",
                                op: kind.opcode().name(),
                                form: reason,
                                location: Some(loc),
                            }));
                        }
                    }
                }
            };
            for (k, r) in results.into_iter().enumerate() {
                env.insert(
                    Value {
                        instr: i as u32,
                        result: k as u32,
                    },
                    r,
                );
            }
        }
        roots
            .iter()
            .map(|r| {
                env.get(r)
                    .cloned()
                    .ok_or_else(|| self.internal("a root without a value", Location::caller()))
            })
            .collect()
    }

    fn internal(&self, what: &str, loc: &'static Location<'static>) -> Op {
        self.b.fail_graph(
            GraphError::Recorded {
                reason: format!("vmap: {what} (a bug of the batching pass)"),
            },
            loc,
        )
    }

    /// A named collective over the batch axis.
    fn named(
        &self,
        x: &BVal,
        axis: &str,
        what: &Named,
        one: &Shape,
        loc: &'static Location<'static>,
    ) -> Result<BVal, Op> {
        let mine = self.axis.as_deref() == Some(axis);
        let (op, bdim) = x.array().map_err(|e| self.internal(&e, loc))?;
        if !mine {
            // An enclosing vmap's axis: the marker stays (on the value batched over
            // this axis) for that vmap's pass to batch.
            return match (what, bdim) {
                (Named::Sum | Named::Mean | Named::Max | Named::Min, _) | (_, None) => {
                    let m = marker(op, axis, what.clone(), loc);
                    Ok(BVal::Array { op: m, bdim })
                }
                _ => Err(self.b.fail_with(crate::error::Error::NoRule {
                    transform: "batching",
                    op: "all_gather_axis",
                    form: format!(
                        "gathering along the enclosing vmap axis `{axis}` a value batched by an inner vmap"
                    ),
                    location: Some(loc),
                })),
            };
        }
        let n = self.size;
        let o = op.on(loc);
        Ok(match (what, bdim) {
            (Named::Sum, None) => BVal::same(&*o * n as f64),
            (Named::Mean | Named::Max | Named::Min, None) => BVal::same(op.clone()),
            (Named::Sum | Named::Mean | Named::Max | Named::Min, Some(d)) => {
                let r = match what {
                    Named::Sum => o.reduce_sum(&[d as i64]),
                    Named::Mean => o.reduce_sum(&[d as i64]) / n as f64,
                    Named::Max => o.reduce_max(&[d as i64]),
                    _ => o.reduce_min(&[d as i64]),
                };
                BVal::same(r)
            }
            (Named::Gather(at), _) => {
                let front = x.front(n, loc).map_err(|e| self.internal(&e, loc))?;
                BVal::same(move_axis(&front, 0, *at, loc))
            }
            (Named::Index, _) => {
                let ty = one.element_type().unwrap_or(crate::shape::ElementType::S32);
                BVal::at(self.b.on(loc).iota(ty, &[n], 0), 0)
            }
        })
    }
}

/// The identity instruction that stands for a named collective over the vmapped
/// axis `axis` while the function is traced (see [`Named`]).
pub(crate) fn marker(x: &Op, axis: &str, what: Named, loc: &'static Location<'static>) -> Op {
    let dims = match x.dims() {
        Ok(d) => d,
        Err(_) => return x.clone(),
    };
    let out = x.on(loc).reshape(&dims);
    if !out.is_poisoned() {
        out.g
            .borrow_mut()
            .vmap_named
            .insert((out.comp, out.v.instr), (axis.to_string(), what));
    }
    out
}

impl Builder {
    /// The size of the vmapped axis `name` this builder's computation is traced
    /// inside, if any (the innermost of that name).
    pub(crate) fn vmap_axis(&self, name: &str) -> Option<i64> {
        let g = self.g.borrow();
        g.vmap_axes
            .iter()
            .rev()
            .find(|(n, _, _)| n == name)
            .map(|(_, size, _)| *size)
    }
}

/// The operands of a reduce-like op (`n` inputs, then `n` initial values): the
/// inputs batched at 0, the initial values as they are (an initial value that
/// differs per example has no rule, as in JAX).
pub(crate) fn inputs_then_inits(n: &BatchNode) -> Result<Vec<Op>, String> {
    let m = n.operands.len() / 2;
    if n.operands[m..].iter().any(|v| v.is_batched()) {
        return Err("an initial value that differs per example".into());
    }
    let mut ops = Vec::with_capacity(n.operands.len());
    for k in 0..m {
        ops.push(n.front(k)?);
    }
    for k in m..n.operands.len() {
        ops.push(n.operands[k].array()?.0.clone());
    }
    Ok(ops)
}

/// [`BatchNode::emit_front`] as a function (for rules that build their operands).
pub(crate) fn emit_front_ops(n: &BatchNode, kind: OpKind, ops: &[Op]) -> Batched {
    n.emit_front(kind, ops)
}

/// The value `out` (one op, of `like`'s structure) as a [`BVal`] with `like`'s
/// batch axes: a tuple's elements are taken out.
pub(crate) fn split_like(like: &BVal, out: &Op, loc: &'static Location<'static>) -> BVal {
    match like {
        BVal::Array { bdim, .. } => BVal::Array {
            op: out.clone(),
            bdim: *bdim,
        },
        BVal::Tuple(e) => BVal::Tuple(
            e.iter()
                .enumerate()
                .map(|(k, x)| split_like(x, &out.on(loc).get_tuple_element(k), loc))
                .collect(),
        ),
    }
}

/// A parameter `p` of a new body, of the structure and batch axes of `like`.
pub(crate) fn param_like(like: &BVal, p: &Op, loc: &'static Location<'static>) -> BVal {
    split_like(like, p, loc)
}

/// A new computation inside `n`'s: `callee` batched, its parameters the values
/// `args` describes (structure and batch axes), its result batched at 0 (every
/// array of it). Returns the computation.
pub(crate) fn batch_comp_into(
    pass: &Batcher,
    loc: &'static Location<'static>,
    callee: CompId,
    args: &[BVal],
    name: &str,
    finish: impl FnOnce(&Builder, BVal) -> Result<BVal, String>,
) -> Result<CompId, String> {
    let shapes: Vec<Shape> = args
        .iter()
        .map(|a| a.plain(&pass.b, loc).shape().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let (params, root) = {
        let g = pass.b.g.borrow();
        let c = g.comp(callee);
        let params: Vec<u32> = c.params.iter().map(|p| p.unwrap_or(u32::MAX)).collect();
        (params, c.root)
    };
    let root = root.ok_or_else(|| "an unfinished body".to_string())?;
    let mut err: Option<String> = None;
    let made = pass.b.body(pass.b.comp, name, &shapes, loc, |bb, ps| {
        let mut env: HashMap<Value, BVal> = HashMap::new();
        for ((p, param), like) in params.iter().zip(ps).zip(args) {
            env.insert(Value::of(*p), param_like(like, param, loc));
        }
        let inner = Batcher {
            size: pass.size,
            axis: pass.axis.clone(),
            b: bb.clone(),
        };
        let out = match inner.run(callee, &mut env, &[root]) {
            Ok(mut v) => v.remove(0),
            Err(f) => return vec![f],
        };
        match finish(bb, out) {
            Ok(v) => vec![v.plain(bb, loc)],
            Err(e) => {
                err = Some(e.clone());
                vec![bb.error(e)]
            }
        }
    });
    let (comp, roots) =
        made.map_err(|f| err.clone().or_else(|| failure(&f)).unwrap_or_default())?;
    pass.b
        .finish_body(comp, &roots, loc)
        .map_err(|f| failure(&f).unwrap_or_default())?;
    Ok(comp)
}

/// [`batch_comp_into`] for a rule whose operands are batched at 0 (`ops`):
/// the callee's result batched at 0 too.
pub(crate) fn batch_body(
    n: &BatchNode,
    callee: CompId,
    ops: &[Op],
    name: &str,
) -> Result<CompId, String> {
    let args: Vec<BVal> = ops.iter().map(|o| BVal::at(o.clone(), 0)).collect();
    let size = n.size;
    let loc = n.loc;
    batch_comp_into(n.pass, loc, callee, &args, name, |_, v| {
        v.all_front(size, loc)
    })
}

/// For a body computation with one tuple parameter: which elements of that
/// parameter each element of the (tuple) root depends on (`None` for a root that
/// is no tuple instruction: then it depends on all).
pub(crate) fn tuple_deps(b: &Builder, comp: CompId, n_elems: usize) -> Vec<Vec<bool>> {
    let g = b.g.borrow();
    let c = g.comp(comp);
    let param = c.params.first().copied().flatten();
    let mut deps: Vec<Vec<bool>> = Vec::with_capacity(c.instrs.len());
    for (i, ins) in c.instrs.iter().enumerate() {
        let mut d = vec![false; n_elems];
        match (&ins.kind, ins.operands.first()) {
            (OpKind::GetTupleElement { index }, Some(o)) if Some(o.instr) == param => {
                if let Some(x) = d.get_mut(*index as usize) {
                    *x = true;
                }
            }
            (OpKind::Parameter { .. }, _) if Some(i as u32) == param => d = vec![true; n_elems],
            _ => {
                for o in &ins.operands {
                    for (x, y) in d.iter_mut().zip(&deps[o.instr as usize]) {
                        *x |= *y;
                    }
                }
            }
        }
        deps.push(d);
    }
    let Some(root) = c.root else {
        return vec![vec![true; n_elems]];
    };
    match &c.instrs[root.instr as usize].kind {
        OpKind::Tuple => c.instrs[root.instr as usize]
            .operands
            .iter()
            .map(|o| deps[o.instr as usize].clone())
            .collect(),
        _ => vec![deps[root.instr as usize].clone()],
    }
}

/// The gradient rule of a named collective over a vmapped axis (JAX's
/// transposes): a sum's cotangent is summed over the axis, a mean's averaged.
pub(crate) fn named_vjp(
    n: &crate::autodiff::Node,
    axis: &str,
    what: &Named,
) -> crate::autodiff::Grads {
    match what {
        Named::Sum | Named::Mean => Ok(vec![Some(crate::autodiff::Ct::Array(marker(
            &n.ct(),
            axis,
            what.clone(),
            n.loc,
        )))]),
        Named::Index => Ok(vec![None]),
        Named::Max | Named::Min | Named::Gather(_) => Err(format!(
            "the gradient of pmax, pmin or all_gather over the vmapped axis `{axis}` has no rule yet"
        )),
    }
}
