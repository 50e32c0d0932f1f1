//! Reverse-mode automatic differentiation inside the program: the backward pass is
//! emitted into the same computation as the forward one and compiles with it, as
//! `jax.grad` inside `jit` does.
//!
//! The engine here walks the instructions between the outputs and the values
//! differentiated against, latest first, and asks each instruction's gradient rule
//! for the cotangents of its operands. The rules live with their ops, in each family
//! file (`vjp_*` functions in [`crate::ops`]); the op table
//! ([`crate::ops::table`]) dispatches to them.
//!
//! Only floating-point values carry gradients. Integer and `pred` values (indices,
//! comparisons, random bits) pass none; asking for the gradient of or with respect
//! to one is an error naming the value and the caller's line. An op (or a form of
//! one) without a rule ([`gradient`] lists them) is an
//! [`Error::NoGradient`](crate::Error::NoGradient) naming the op, the form and the
//! line that built it, never a silent zero.

use std::collections::{HashMap, HashSet};
use std::panic::Location;

use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{CompId, OpKind, Value};
pub use crate::ops::table::{Gradient, gradient};
use crate::shape::{ElementType, Shape};
use crate::tree::Tree;

/// One instruction as a gradient rule sees it: its op, its operands and results as
/// ops of the computation, and the user's line that built it (the backward ops get
/// that line too, so an error in them points at the forward op).
pub(crate) struct Node<'a> {
    /// The op with its attributes.
    pub kind: &'a OpKind,
    /// The operands.
    pub operands: &'a [Op],
    /// One op per result (a single-result instruction has one).
    pub results: &'a [Op],
    /// Where the forward op was built.
    pub loc: &'static Location<'static>,
    /// The builder of the computation.
    pub b: &'a Builder,
    /// Per operand: whether its cotangent is used (it depends on a value
    /// differentiated against); a rule may skip, or not refuse, the others.
    pub wanted: &'a [bool],
    /// The instruction's computation and index: the key of the graph's side tables
    /// (trip counts, custom rules).
    pub at: (CompId, u32),
    /// The cotangent of each result (`None` where none arrived).
    pub cts: &'a [Option<Ct>],
    /// Per instruction of the computation `at.0`: whether it depends on a value
    /// differentiated against (a loop's rule asks this of its carry's elements).
    pub active: &'a [bool],
}

impl Node<'_> {
    /// Whether `x` may depend on a value differentiated against: `false` only for
    /// a value of this node's computation known not to.
    pub fn may_be_active(&self, x: &Op) -> bool {
        x.is_poisoned()
            || x.comp != self.at.0
            || self.active.get(x.v.instr as usize).copied().unwrap_or(true)
    }
}

impl Node<'_> {
    /// The single result.
    pub fn out(&self) -> &Op {
        &self.results[0]
    }

    /// The array cotangent of result 0 (zeros where none arrived: only another
    /// result's did).
    pub fn ct(&self) -> Op {
        match self.cts.first() {
            Some(Some(Ct::Array(c))) => c.clone(),
            _ => zeros_like(self.out(), self.loc),
        }
    }

    /// The array cotangent of each result (`None` where none arrived, or where the
    /// result is a tuple).
    pub fn array_cts(&self) -> Vec<Option<Op>> {
        self.cts
            .iter()
            .map(|c| match c {
                Some(Ct::Array(a)) => Some(a.clone()),
                _ => None,
            })
            .collect()
    }
}

/// A rule's answer: one cotangent per operand (`None`: no gradient flows there, as
/// for indices and predicates, or it is zero), or why this form of the op has no
/// rule.
pub(crate) type Grads = Result<Vec<Option<Ct>>, String>;

/// Array cotangents as a rule's answer.
pub(crate) fn arrays(v: Vec<Option<Op>>) -> Vec<Option<Ct>> {
    v.into_iter().map(|c| c.map(Ct::Array)).collect()
}

/// A cotangent: of an array, or of a tuple (per element; `None` is zero).
#[derive(Clone)]
pub(crate) enum Ct {
    /// Of an array.
    Array(Op),
    /// Of a tuple, per element.
    Tuple(Vec<Option<Op>>),
}

/// True for the element types that carry gradients: real and complex floats (a
/// complex value's cotangent follows JAX's convention: the transpose of the
/// linear map, not its conjugate).
pub(crate) fn differentiable(t: ElementType) -> bool {
    t.is_float() || t.is_complex()
}

/// Zeros of `x`'s shape and type.
pub(crate) fn zeros_like(x: &Op, loc: &'static Location<'static>) -> Op {
    x.on(loc).full_like(0.0)
}

/// The cotangent `cts[j]`, or zeros like `like` where none arrived.
pub(crate) fn ct_or_zeros(
    cts: &[Option<Op>],
    j: usize,
    like: &Op,
    loc: &'static Location<'static>,
) -> Op {
    match cts.get(j) {
        Some(Some(c)) => c.clone(),
        _ => zeros_like(like, loc),
    }
}

impl Builder {
    /// Vector-Jacobian product: the cotangents of `wrt` given `cotangents` of
    /// `outputs` (one each, of its shape), i.e. `Σ_k cotangents[k] · ∂outputs[k]/∂wrt`,
    /// emitted into this computation. Values of `wrt` the outputs do not depend on
    /// get zeros. All values must belong to one computation.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("vjp");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let y = x.sin();
    /// let ct = b.parameter(1, Shape::of::<f32>(&[3]), "ct");
    /// let g = b.vjp(&[&y], &[&ct], &[&x]); // ct * cos(x)
    /// assert_eq!(g[0].dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn vjp(&self, outputs: &[&Op], cotangents: &[&Op], wrt: &[&Op]) -> Vec<Op> {
        let (b, loc) = (self, Location::caller());
        let n = wrt.len();
        let all: Vec<&Op> = outputs
            .iter()
            .chain(cotangents)
            .chain(wrt)
            .copied()
            .collect();
        let fail_all = |f: Op| vec![f; n];
        let comp = match b.target(&all, "vjp", loc) {
            Ok(c) => c,
            Err(f) => return fail_all(f),
        };
        let bad = |what: String, shapes: &[&Shape]| {
            b.fail(
                ShapeError::new("vjp", shapes, ShapeErrorKind::Attribute, what),
                loc,
            )
        };
        if outputs.len() != cotangents.len() {
            return fail_all(bad(
                format!(
                    "{} outputs but {} cotangents",
                    outputs.len(),
                    cotangents.len()
                ),
                &[],
            ));
        }
        // Values of enclosing computations are used here through their captures: the
        // gradient with respect to one is through its uses in this computation.
        let inner = Builder {
            g: b.g.clone(),
            comp,
        };
        let b = &inner;
        let outputs: Vec<Op> = outputs.iter().map(|o| local(&inner, o)).collect();
        let cotangents: Vec<Op> = cotangents.iter().map(|o| local(&inner, o)).collect();
        let wrt: Vec<Op> = wrt.iter().map(|o| local(&inner, o)).collect();
        let all: Vec<&Op> = outputs.iter().chain(&cotangents).chain(&wrt).collect();
        for (k, o) in all.iter().enumerate() {
            let s = o.shape().expect("checked by target");
            let what = if k < outputs.len() {
                format!("output {k}")
            } else if k < 2 * outputs.len() {
                format!("cotangent {}", k - outputs.len())
            } else {
                format!("value {} differentiated against", k - 2 * outputs.len())
            };
            match s.element_type() {
                Some(t) if differentiable(t) => {}
                _ => {
                    return fail_all(bad(
                        format!("{what} is {s}: only floating-point arrays have gradients"),
                        &[&s],
                    ));
                }
            }
        }
        for (k, (o, c)) in outputs.iter().zip(&cotangents).enumerate() {
            let (so, sc) = (o.shape().expect("checked"), c.shape().expect("checked"));
            if so != sc {
                return fail_all(bad(
                    format!("cotangent {k} is {sc}, its output {so}"),
                    &[&so, &sc],
                ));
            }
        }

        let last = outputs.iter().map(|o| o.v.instr).max().unwrap_or(0) as usize + 1;
        let tape = Tape::of_comp(b, comp, last);
        let seeds: Vec<(Value, Op)> = outputs
            .iter()
            .zip(&cotangents)
            .map(|(o, c)| (o.v, c.clone()))
            .collect();
        let wrt_values: Vec<Value> = wrt.iter().map(|w| w.v).collect();
        match backprop(b, &tape, &seeds, &wrt_values, loc) {
            Ok(g) => g
                .into_iter()
                .zip(&wrt)
                .map(|(g, w)| g.unwrap_or_else(|| zeros_like(w, loc)))
                .collect(),
            Err(failed) => fail_all(failed),
        }
    }

    /// The gradient of the scalar `loss` with respect to every leaf of `params`, as
    /// a tree of the same type (a parameter struct gives a gradient struct).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("grad");
    /// let w = b.parameter(0, Shape::of::<f32>(&[3]), "w");
    /// let c = b.parameter(1, Shape::of::<f32>(&[]), "c");
    /// let loss = (&w * &w).reduce_sum(&[0]) + &c;
    /// let (gw, gc) = b.grad(&loss, &(w.clone(), c.clone()));
    /// assert_eq!(gw.dims()?, vec![3]); // 2w
    /// assert_eq!(gc.dims()?, Vec::<i64>::new()); // 1
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn grad<P>(&self, loss: &Op, params: &P) -> P
    where
        P: Tree<Op, With<Op> = P>,
    {
        let (b, loc) = (self, Location::caller());
        let leaves: Vec<&Op> = params.leaves();
        let fail = |f: Op| params.map_ref(|_| f.clone());
        let one = match loss.shape() {
            Ok(s) if s.is_array() && s.rank() == 0 => loss.builder().scalar_of(
                s.element_type().expect("array"),
                crate::Scalar::Int(1),
                loc,
            ),
            Ok(s) => {
                return fail(b.fail(
                    ShapeError::new(
                        "grad",
                        &[&s],
                        ShapeErrorKind::Rank,
                        "the loss must be a scalar (use vjp for other outputs)".to_string(),
                    ),
                    loc,
                ));
            }
            Err(_) => return fail(loss.clone()),
        };
        let g = b.vjp(&[loss], &[&one], &leaves);
        params.rebuild(g).expect("one gradient per leaf")
    }

    /// `jax.value_and_grad` with `has_aux`: calls `f(params)`, which returns a
    /// scalar loss and anything else (auxiliary outputs, passed through), and
    /// returns the loss, the auxiliary value and the gradient of the loss with
    /// respect to `params` (a tree of the same type).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("vg");
    /// let w = b.parameter(0, Shape::of::<f32>(&[2, 2]), "w");
    /// let x = b.parameter(1, Shape::of::<f32>(&[2]), "x");
    /// let (loss, pred, gw) = b.value_and_grad(w, |w| {
    ///     let pred = w.matmul(&x);
    ///     ((&pred * &pred).reduce_sum(&[0]), pred)
    /// });
    /// assert_eq!(gw.dims()?, vec![2, 2]);
    /// assert_eq!(pred.dims()?, vec![2]);
    /// # let _ = loss;
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn value_and_grad<P, A>(&self, params: P, f: impl FnOnce(P) -> (Op, A)) -> (Op, A, P)
    where
        P: Tree<Op, With<Op> = P>,
    {
        let (loss, aux) = f(params.map_ref(|p| p.clone()));
        let g = self.grad(&loss, &params);
        (loss, aux, g)
    }
}

impl Op {
    /// The same value, through which no gradient flows (`lax.stop_gradient`): the
    /// backward pass treats it as a constant.
    #[track_caller]
    pub fn stop_gradient(&self) -> Op {
        let loc = Location::caller();
        let dims = match self.shape() {
            Ok(s) if s.is_array() => s.dims().to_vec(),
            Ok(_) => return self.builder().fail_not_array(self, "stop_gradient", loc),
            Err(_) => return self.clone(),
        };
        // A reshape to the same dimensions: XLA removes it; the graph remembers it.
        let out = self.reshape(&dims);
        if !out.is_poisoned() {
            out.g.borrow_mut().stopped.insert((out.comp, out.v));
        }
        out
    }
}

impl Op {
    /// The same value, tagged `name` for the gradient of the loops around it
    /// (`jax.ad_checkpoint.checkpoint_name`): a loop whose policy is
    /// [`CheckpointPolicy::Names`](crate::CheckpointPolicy::Names) with this name
    /// stores it at each step for the backward pass, and recomputes the untagged
    /// values from it and the stored carry. Outside such a loop it is the identity
    /// (XLA removes it).
    ///
    /// ```
    /// use xlaclient_core::{Builder, CheckpointPolicy, ScanOptions, Shape};
    /// let b = Builder::new("named");
    /// let w = b.parameter(0, Shape::of::<f32>(&[4, 4]), "w");
    /// let xs = b.parameter(1, Shape::of::<f32>(&[10, 4]), "xs");
    /// let opts = ScanOptions::new().policy(CheckpointPolicy::names(&["pre"]));
    /// let (h, _) = b.scan_with(b.zeros(xlaclient_core::ElementType::F32, &[4]), xs, &opts, |h, x| {
    ///     let pre = (&w.matmul(&h) + &x).checkpoint_name("pre");
    ///     (pre.tanh(), ())
    /// });
    /// let g = b.grad(&h.reduce_sum(&[0]), &w);
    /// assert_eq!(g.dims()?, vec![4, 4]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn checkpoint_name(&self, name: &str) -> Op {
        let loc = Location::caller();
        let dims = match self.shape() {
            Ok(s) if s.is_array() => s.dims().to_vec(),
            Ok(_) => return self.builder().fail_not_array(self, "checkpoint_name", loc),
            Err(_) => return self.clone(),
        };
        // A reshape to the same dimensions, as `stop_gradient`: XLA removes it.
        let out = self.on(loc).reshape(&dims);
        if !out.is_poisoned() {
            out.g
                .borrow_mut()
                .checkpoint_names
                .insert((out.comp, out.v), name.to_string());
        }
        out
    }
}

/// Instructions to pull cotangents back through: their ops, operands (values of
/// the tape, in topological order) and results, with how to get each value as an
/// op. A computation gives one ([`Tape::of_comp`]); a loop body whose values were
/// stored step by step gives another, whose values are the stored ones.
pub(crate) struct Tape<'a> {
    /// The computation the instructions come from (the key of the graph's side
    /// tables: stopped gradients, trip counts, custom rules).
    pub src: crate::ir::CompId,
    /// Each instruction's op.
    pub kinds: Vec<OpKind>,
    /// Each instruction's operands.
    pub operands: Vec<Vec<Value>>,
    /// Where each was built.
    pub locs: Vec<&'static Location<'static>>,
    /// How many results each has.
    pub results: Vec<usize>,
    /// The op holding a value.
    pub value: Box<dyn Fn(Value) -> Op + 'a>,
}

impl Tape<'_> {
    /// The first `end` instructions of computation `comp`, their values its own.
    pub(crate) fn of_comp(b: &Builder, comp: crate::ir::CompId, end: usize) -> Tape<'static> {
        let g = b.g.borrow();
        let c = g.comp(comp);
        let end = end.min(c.instrs.len());
        let instrs = &c.instrs[..end];
        let bb = Builder {
            g: b.g.clone(),
            comp,
        };
        Tape {
            src: comp,
            kinds: instrs.iter().map(|i| i.kind.clone()).collect(),
            operands: instrs.iter().map(|i| i.operands.to_vec()).collect(),
            locs: instrs.iter().map(|i| i.loc).collect(),
            results: instrs
                .iter()
                .map(|i| {
                    if i.kind.multi_result(i.operands.len()) {
                        match g.shapes.get(i.shape) {
                            Shape::Tuple(e) => e.len(),
                            _ => 1,
                        }
                    } else {
                        1
                    }
                })
                .collect(),
            value: Box::new(move |v| bb.op(comp, v)),
        }
    }
}

/// The engine: pulls the `seeds` (a cotangent per output value) back through the
/// tape, latest instruction first, and returns the cotangent of each `wrt` value
/// (`None`: no path, zero). Emits into `b`'s computation. `Err` is a failed op
/// carrying the error (an op without a rule, a loop without a trip count).
pub(crate) fn backprop(
    b: &Builder,
    tape: &Tape,
    seeds: &[(Value, Op)],
    wrt: &[Value],
    loc: &'static Location<'static>,
) -> Result<Vec<Option<Op>>, Op> {
    backprop_deferring(b, tape, seeds, wrt, &HashSet::new(), loc).map(|(g, _)| g)
}

/// The result cotangents [`backprop_deferring`] hands back, by instruction.
pub(crate) type Captured = HashMap<u32, Op>;

/// [`backprop`], leaving out the cotangents that some instructions would send to
/// some of their operands: for each `(instruction, operand)` in `deferred`, that
/// operand gets nothing from that instruction, and the cotangent arriving at the
/// instruction's result is returned instead (by instruction; zeros where the
/// result got none). A loop's gradient uses this to sum a dot's contributions to a
/// loop-invariant operand over all steps in one product after the loop.
pub(crate) fn backprop_deferring(
    b: &Builder,
    tape: &Tape,
    seeds: &[(Value, Op)],
    wrt: &[Value],
    deferred: &HashSet<(u32, usize)>,
    loc: &'static Location<'static>,
) -> Result<(Vec<Option<Op>>, Captured), Op> {
    let mut captured: HashMap<u32, Op> = HashMap::new();
    let comp = tape.src;
    let (kinds, operands, locs, results) = (&tape.kinds, &tape.operands, &tape.locs, &tape.results);
    let end = kinds.len();
    let value = |v: Value| (tape.value)(v);
    let stopped = |v: Value| b.g.borrow().stopped.contains(&(comp, v));
    let mut active = vec![false; end];
    for w in wrt {
        if (w.instr as usize) < end {
            active[w.instr as usize] = true;
        }
    }
    for i in 0..end {
        if !active[i] && !stopped(Value::of(i as u32)) {
            active[i] = operands[i].iter().any(|v| active[v.instr as usize]);
        }
        if stopped(Value::of(i as u32)) {
            active[i] = false;
        }
    }
    let mut needed = vec![false; end];
    for (o, _) in seeds {
        if (o.instr as usize) < end {
            needed[o.instr as usize] = true;
        }
    }
    for i in (0..end).rev() {
        if needed[i] && active[i] {
            for v in &operands[i] {
                needed[v.instr as usize] = true;
            }
        }
    }

    let mut cts: HashMap<Value, Ct> = HashMap::new();
    let add = |cts: &mut HashMap<Value, Ct>, v: Value, ct: Ct, loc| {
        let sum = match (cts.remove(&v), ct) {
            (None, ct) => ct,
            (Some(Ct::Array(a)), Ct::Array(c)) => {
                Ct::Array(a.binary(crate::BinaryOp::Add, &c, loc))
            }
            (Some(Ct::Tuple(a)), Ct::Tuple(c)) => Ct::Tuple(
                a.into_iter()
                    .zip(c)
                    .map(|(x, y)| match (x, y) {
                        (Some(x), Some(y)) => Some(x.binary(crate::BinaryOp::Add, &y, loc)),
                        (x, None) => x,
                        (None, y) => y,
                    })
                    .collect(),
            ),
            (Some(old), _) => old,
        };
        cts.insert(v, sum);
    };
    for (o, c) in seeds {
        add(&mut cts, *o, Ct::Array(c.clone()), loc);
    }
    for i in (0..end).rev() {
        if !(active[i] && needed[i]) {
            continue;
        }
        let res: Vec<Value> = (0..results[i] as u32)
            .map(|r| Value {
                instr: i as u32,
                result: r,
            })
            .collect();
        if res.iter().all(|v| !cts.contains_key(v)) {
            continue;
        }
        if matches!(kinds[i], OpKind::Parameter { .. } | OpKind::Constant(_)) {
            continue;
        }
        let ops: Vec<Op> = operands[i].iter().map(|v| value(*v)).collect();
        let res_cts: Vec<Option<Ct>> = res.iter().map(|v| cts.get(v).cloned()).collect();
        let outs: Vec<Op> = res.iter().map(|v| value(*v)).collect();
        let wanted: Vec<bool> = operands[i]
            .iter()
            .map(|v| active[v.instr as usize])
            .collect();
        let node = Node {
            kind: &kinds[i],
            operands: &ops,
            results: &outs,
            loc: locs[i],
            b,
            wanted: &wanted,
            at: (comp, i as u32),
            cts: &res_cts,
            active: &active,
        };
        if deferred.iter().any(|(d, _)| *d as usize == i) {
            captured.insert(i as u32, node.ct());
        }
        // The ops the rule builds carry this instruction's line.
        let outer_origin = b.g.borrow_mut().origin.replace(locs[i]);
        let named = b.g.borrow().vmap_named.get(&(comp, i as u32)).cloned();
        b.g.borrow_mut().in_backward += 1;
        let got = match named {
            Some((axis, what)) => crate::batching::named_vjp(&node, &axis, &what),
            None => crate::ops::table::vjp(&node),
        };
        b.g.borrow_mut().in_backward -= 1;
        b.g.borrow_mut().origin = outer_origin;
        let got = match got {
            Ok(g) => g,
            Err(form) => {
                return Err(b.fail_with(crate::Error::NoGradient {
                    op: kinds[i].opcode().name(),
                    form,
                    location: Some(locs[i]),
                }));
            }
        };
        for (k, g) in got.into_iter().enumerate() {
            let Some(g) = g else { continue };
            let v = operands[i][k];
            if !active[v.instr as usize] || deferred.contains(&(i as u32, k)) {
                continue;
            }
            let keep = match &g {
                Ct::Array(_) => wants(&ops[k]),
                Ct::Tuple(_) => true,
            };
            if keep {
                add(&mut cts, v, g, locs[i]);
            }
        }
    }
    let grads = wrt
        .iter()
        .map(|w| match cts.get(w) {
            Some(Ct::Array(g)) => Some(g.clone()),
            _ => None,
        })
        .collect();
    Ok((grads, captured))
}

/// For rules: is `v` a value whose gradient matters (a float array)?
pub(crate) fn wants(x: &Op) -> bool {
    x.element_type().map(differentiable).unwrap_or(false)
}

/// `x`, a value of `b`'s computation or of one enclosing it, as a value of `b`'s
/// computation (captured into the bodies between). A value of a computation that
/// does not enclose `b`'s gives a failed op carrying the error.
#[track_caller]
pub(crate) fn local(b: &Builder, x: &Op) -> Op {
    if x.is_poisoned() || x.comp == b.comp {
        return x.clone();
    }
    let imported = b.g.borrow_mut().import(x.comp, x.v, b.comp);
    match imported {
        Ok(v) => b.op(b.comp, v),
        Err(reason) => b.fail_graph(
            crate::error::GraphError::OutOfScope {
                used_as: "a value a gradient rule reads".into(),
                reason,
            },
            Location::caller(),
        ),
    }
}

/// Copies the finished body `src` into `b`'s computation with `args` for its
/// parameters (for a loop body, whose one parameter is the carry tuple, `args` are
/// the tuple's elements) and returns its results (a tuple root gives its
/// elements). Trip counts and stopped gradients of the copied instructions carry
/// over.
pub(crate) fn inline(b: &Builder, src: crate::ir::CompId, args: &[Op]) -> Vec<Op> {
    inline_values(b, src, args).0
}

/// [`inline`], also giving each copied value: `values(instr, result)` is the copy
/// of `src`'s value `(instr, result)`.
#[allow(clippy::type_complexity)]
pub(crate) fn inline_values(
    b: &Builder,
    src: crate::ir::CompId,
    args: &[Op],
) -> (Vec<Op>, Box<dyn Fn(u32, u32) -> Op>) {
    let (instrs, root, tuple_param) = {
        let g = b.g.borrow();
        let c = g.comp(src);
        let instrs: Vec<(OpKind, Vec<Value>, Shape, &'static Location<'static>)> = c
            .instrs
            .iter()
            .map(|i| {
                (
                    i.kind.clone(),
                    i.operands.to_vec(),
                    g.shapes.get(i.shape).clone(),
                    i.loc,
                )
            })
            .collect();
        let tuple_param = c.params.len() == 1
            && c.params[0]
                .map(|p| matches!(g.shapes.get(c.instrs[p as usize].shape), Shape::Tuple(_)))
                .unwrap_or(false);
        (instrs, c.root, tuple_param)
    };
    let mut map: Vec<Option<Op>> = vec![None; instrs.len()];
    // Result `r` of the copy of an instruction, from the copy's op (result 0).
    let result = |b: &Builder, base: Op, r: u32| -> Op {
        if r == 0 {
            base
        } else {
            b.op(
                base.comp,
                Value {
                    instr: base.v.instr,
                    result: r,
                },
            )
        }
    };
    let get = |map: &Vec<Option<Op>>, v: Value| -> Op {
        let base = map[v.instr as usize].clone().expect("operands come first");
        result(b, base, v.result)
    };
    for (i, (kind, operands, shape, loc)) in instrs.iter().enumerate() {
        let op = match kind {
            OpKind::Parameter { number, .. } => {
                if tuple_param {
                    continue;
                }
                args[*number as usize].clone()
            }
            OpKind::GetTupleElement { index }
                if tuple_param
                    && matches!(
                        instrs[operands[0].instr as usize].0,
                        OpKind::Parameter { .. }
                    ) =>
            {
                args[*index as usize].clone()
            }
            _ => {
                let ops: Vec<Op> = operands.iter().map(|v| get(&map, *v)).collect();
                let refs: Vec<&Op> = ops.iter().collect();
                let out = b.emit(kind.clone(), &refs, Some(shape.clone()), loc);
                if !out.is_poisoned() {
                    let mut g = b.g.borrow_mut();
                    if let Some(n) = g.trip_counts.get(&(src, i as u32)).copied() {
                        g.trip_counts.insert((out.comp, out.v.instr), n);
                    }
                    if let Some(n) = g.loop_bounds.get(&(src, i as u32)).copied() {
                        g.loop_bounds.insert((out.comp, out.v.instr), n);
                    }
                    if let Some(p) = g.checkpointed.get(&(src, i as u32)).cloned() {
                        g.checkpointed.insert((out.comp, out.v.instr), p);
                    }
                    if g.stopped.contains(&(src, Value::of(i as u32))) {
                        g.stopped.insert((out.comp, out.v));
                    }
                    if let Some(m) = g.vmap_named.get(&(src, i as u32)).cloned() {
                        g.vmap_named.insert((out.comp, out.v.instr), m);
                    }
                    if let Some(name) = g.checkpoint_names.get(&(src, Value::of(i as u32))) {
                        let name = name.clone();
                        g.checkpoint_names.insert((out.comp, out.v), name);
                    }
                }
                out
            }
        };
        map[i] = Some(op);
    }
    // Loops served by their residual-storing copies (see `Graph::forwarded`) are in
    // the copy too.
    {
        let copied = |v: Value| -> Option<Value> {
            if !matches!(instrs[v.instr as usize].0, OpKind::While { .. }) {
                return None;
            }
            let o = map[v.instr as usize].as_ref()?;
            (!o.is_poisoned() && o.comp == b.comp).then_some(Value {
                instr: o.v.instr,
                result: v.result,
            })
        };
        let mut g = b.g.borrow_mut();
        let fw: Vec<(Value, Value)> = g
            .forwarded
            .iter()
            .filter(|((c, _), _)| *c == src)
            .filter_map(|((_, v), t)| Some((copied(*v)?, copied(*t)?)))
            .collect();
        for (v, t) in fw {
            g.forwarded.insert((b.comp, v), t);
        }
        let st: Vec<(u32, crate::builder::StoringLoop)> = g
            .storing
            .iter()
            .filter(|((c, _), _)| *c == src)
            .filter_map(|((_, i), s)| {
                let l = copied(Value::of(*i))?;
                let count = copied(s.count)?;
                let stacks = s.stacks.iter().map(|v| copied(*v)).collect::<Option<_>>()?;
                Some((l.instr, crate::builder::StoringLoop { count, stacks }))
            })
            .collect();
        for (i, s) in st {
            g.storing.insert((b.comp, i), s);
        }
    }
    let root = root.expect("a finished body");
    let roots = match &instrs[root.instr as usize].0 {
        OpKind::Tuple => instrs[root.instr as usize]
            .1
            .iter()
            .map(|v| get(&map, *v))
            .collect(),
        _ => vec![get(&map, root)],
    };
    let bb = b.clone();
    let values = move |instr: u32, r: u32| -> Op {
        let base = map[instr as usize].clone().expect("copied");
        result(&bb, base, r)
    };
    (roots, Box::new(values))
}
