//! Structured control flow over trees of values: `while_loop`, `fori_loop` (static
//! trip count), `cond` and `switch` (XLA's conditional). Bodies are Rust closures
//! that may use any value of an enclosing computation: those values travel in the
//! loop's carry (or as branch operands), added by the builder.
use crate::autodiff::{Ct, Grads, Node};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{CompId, InferCx, LowerCx, OpKind, OpText, Operands, RaiseCx, TextCx, Value};
use crate::proto;
use crate::shape::{ElementType, Shape};
use crate::tree::Tree;
use indexmap::IndexSet;
use std::collections::HashMap;
use std::panic::Location;

// ---------------------------------------------------------------------------------
// Shared: tuple bodies and carries

/// A body built with one tuple parameter whose elements the closure sees as its
/// values; captured outside values are collected for the caller to thread in.
struct TupleBody {
    comp: CompId,
    /// The tuple parameter's instruction.
    param: u32,
    roots: Vec<Value>,
}

impl Builder {
    /// Builds a body of `target` taking one tuple of `shapes`; `f` gets the elements.
    fn tuple_body(
        &self,
        target: CompId,
        name: &str,
        shapes: &[Shape],
        loc: &'static Location<'static>,
        f: impl FnOnce(Vec<Op>) -> Vec<Op>,
    ) -> Result<TupleBody, Op> {
        let tuple = Shape::Tuple(shapes.to_vec());
        let (comp, roots) = self.body(target, name, &[tuple], loc, |sb, p| {
            let elems = (0..shapes.len())
                .map(|i| {
                    sb.emit(
                        OpKind::GetTupleElement { index: i as u32 },
                        &[&p[0]],
                        None,
                        loc,
                    )
                })
                .collect();
            f(elems)
        })?;
        let param = self.g.borrow().comp(comp).params[0].expect("declared");
        Ok(TupleBody { comp, param, roots })
    }

    /// Turns body `b`'s captured values (values of `target`) into elements of its
    /// tuple parameter after the `carry`'s, which become the carry's shapes then
    /// every value of `union` in order. Returns the element value of each of `union`
    /// in the body.
    fn thread_captures(
        &self,
        b: &TupleBody,
        target: CompId,
        carry: &[Shape],
        union: &IndexSet<Value>,
        loc: &'static Location<'static>,
    ) -> Vec<Value> {
        let n = carry.len();
        let mut g = self.g.borrow_mut();
        let shapes: Vec<Shape> = carry
            .iter()
            .cloned()
            .chain(union.iter().map(|v| g.value_shape(target, *v).clone()))
            .collect();
        let tuple = g.shapes.intern(Shape::Tuple(shapes.to_vec()));
        let captured: Vec<(Value, u32)> = g
            .comp(b.comp)
            .captures
            .iter()
            .map(|(v, i)| (*v, *i))
            .collect();
        let c = g.comp_mut(b.comp);
        c.instrs[b.param as usize].shape = tuple;
        let mut elems = vec![None; union.len()];
        for (pv, instr) in captured {
            let j = union.get_index_of(&pv).expect("in the union");
            let ins = &mut c.instrs[instr as usize];
            ins.kind = OpKind::GetTupleElement {
                index: (n + j) as u32,
            };
            ins.operands = Operands::from_slice(&[Value::of(b.param)]);
            elems[j] = Some(Value::of(instr));
        }
        c.params = vec![Some(b.param)];
        c.captures.clear();
        elems
            .into_iter()
            .enumerate()
            .map(|(j, e)| {
                e.unwrap_or_else(|| {
                    let shape = g.shapes.intern(shapes[n + j].clone());
                    let c = g.comp_mut(b.comp);
                    c.instrs.push(crate::ir::Instr {
                        kind: OpKind::GetTupleElement {
                            index: (n + j) as u32,
                        },
                        operands: Operands::from_slice(&[Value::of(b.param)]),
                        shape,
                        loc,
                        sharding: None,
                    });
                    Value::of(c.instrs.len() as u32 - 1)
                })
            })
            .collect()
    }

    /// Finishes `comp` with a tuple of `roots` as its result (even of one value).
    fn finish_tuple_body(
        &self,
        comp: CompId,
        roots: &[Value],
        loc: &'static Location<'static>,
    ) -> Result<(), Op> {
        let pushed = self.g.borrow_mut().push(
            comp,
            OpKind::Tuple,
            roots.iter().copied().collect(),
            None,
            loc,
        );
        let root = pushed.map_err(|e| self.fail(e, loc))?;
        self.g.borrow_mut().comp_mut(comp).root = Some(root);
        Ok(())
    }

    /// Checks that `outs` have the carry's `shapes`: which carry, expected vs got.
    fn check_carry(
        &self,
        what: &'static str,
        shapes: &[Shape],
        outs: &[Value],
        comp: CompId,
        loc: &'static Location<'static>,
    ) -> Result<(), Op> {
        if outs.len() != shapes.len() {
            return Err(self.fail(
                ShapeError::new(
                    what,
                    &[],
                    ShapeErrorKind::Body,
                    format!(
                        "the body returns {} values for a carry of {}",
                        outs.len(),
                        shapes.len()
                    ),
                ),
                loc,
            ));
        }
        for (i, (v, s)) in outs.iter().zip(shapes).enumerate() {
            let got = self.g.borrow().value_shape(comp, *v).clone();
            if &got != s {
                return Err(self.fail(
                    ShapeError::new(
                        what,
                        &[s, &got],
                        ShapeErrorKind::Body,
                        format!("carry {i} enters as {s} but the body returns {got}"),
                    ),
                    loc,
                ));
            }
        }
        Ok(())
    }
}

/// How each element of a loop body's carry is used: passed through unchanged
/// (`invariant`: captured values, constants of the loop), or only written into by
/// a dynamic-update-slice of itself (`write_only`: the stacked outputs of a scan,
/// whose values no gradient depends on). Neither kind is stored per step.
fn carry_roles(b: &Builder, body: CompId, k: usize) -> (Vec<bool>, Vec<bool>) {
    let g = b.g.borrow();
    let c = g.comp(body);
    let mut invariant = vec![false; k];
    let mut write_only = vec![false; k];
    let (Some(root), Some(Some(param))) = (c.root, c.params.first()) else {
        return (invariant, write_only);
    };
    let element = |v: Value| match c.instrs[v.instr as usize].kind {
        OpKind::GetTupleElement { index } => {
            (c.instrs[v.instr as usize].operands[0].instr == *param).then_some(index as usize)
        }
        _ => None,
    };
    let mut uses = vec![0usize; c.instrs.len()];
    for ins in &c.instrs {
        for v in &ins.operands {
            uses[v.instr as usize] += 1;
        }
    }
    let root_ins = &c.instrs[root.instr as usize];
    if !matches!(root_ins.kind, OpKind::Tuple) {
        return (invariant, write_only);
    }
    for (j, r) in root_ins.operands.iter().enumerate().take(k) {
        if element(*r) == Some(j) {
            invariant[j] = true;
            continue;
        }
        let ins = &c.instrs[r.instr as usize];
        if matches!(ins.kind, OpKind::DynamicUpdateSlice) {
            let base = ins.operands[0];
            // The element's only use, and the update does not read it.
            let reads_only_here = (0..c.instrs.len())
                .filter(|i| element(Value::of(*i as u32)) == Some(j))
                .all(|i| i == base.instr as usize && uses[i] == 1);
            write_only[j] = element(base) == Some(j) && reads_only_here;
        }
    }
    (invariant, write_only)
}

/// Which write-only carry elements (see [`carry_roles`]) get one row written per
/// step at a row no other step writes: the update's start index along the stacked
/// axis is the loop's counter (an element that the body increments by a
/// constant), or a constant minus it (a scan walking backwards), and its other
/// start indices are constants.
fn rows_once(b: &Builder, body: CompId, write_only: &[bool]) -> Vec<bool> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let mut out = vec![false; write_only.len()];
    let (Some(root), Some(Some(param))) = (c.root, c.params.first()) else {
        return out;
    };
    let ins = |v: Value| &c.instrs[v.instr as usize];
    let element = |v: Value| match ins(v).kind {
        OpKind::GetTupleElement { index } if ins(v).operands[0].instr == *param => {
            Some(index as usize)
        }
        _ => None,
    };
    let is_constant = |v: Value| matches!(ins(v).kind, OpKind::Constant(_));
    let root_ops = &ins(root).operands;
    // Elements that step by a constant: `e + c` or `c + e`.
    let counter = |e: usize| -> bool {
        let Some(r) = root_ops.get(e) else {
            return false;
        };
        let r = ins(*r);
        matches!(r.kind, OpKind::Binary(crate::BinaryOp::Add))
            && ((element(r.operands[0]) == Some(e) && is_constant(r.operands[1]))
                || (element(r.operands[1]) == Some(e) && is_constant(r.operands[0])))
    };
    let counted = |v: Value| element(v).is_some_and(counter);
    for (j, w) in write_only.iter().enumerate() {
        if !*w {
            continue;
        }
        let Some(r) = root_ops.get(j) else { continue };
        let dus = ins(*r);
        let Some((first, rest)) = dus.operands.get(2..).and_then(|s| s.split_first()) else {
            continue;
        };
        let first_ok = counted(*first)
            || match &ins(*first).kind {
                OpKind::Unary(crate::UnaryOp::Negate) => {
                    let sub = ins(ins(*first).operands[0]);
                    matches!(sub.kind, OpKind::Binary(crate::BinaryOp::Subtract))
                        && counted(sub.operands[0])
                        && is_constant(sub.operands[1])
                }
                _ => false,
            };
        out[j] = first_ok && rest.iter().all(|v| is_constant(*v));
    }
    out
}

/// Whether `x` is a constant or a broadcast of one (what a scan's stacked outputs
/// start from): nothing differentiates through it.
fn constant_like(x: &Op) -> bool {
    let g = x.g.borrow();
    if x.is_poisoned() {
        return false;
    }
    let c = g.comp(x.comp);
    let mut v = x.v;
    loop {
        let ins = &c.instrs[v.instr as usize];
        match &ins.kind {
            OpKind::Constant(_) | OpKind::Iota { .. } => return true,
            OpKind::CustomCall(a) => return a.target == xlaclient_pjrt::UNINITIALIZED_TARGET,
            OpKind::Broadcast { .. } | OpKind::Reshape => v = ins.operands[0],
            _ => return false,
        }
    }
}

/// The elements of a tuple built by a `tuple` instruction.
fn tuple_elements(t: &Op) -> Result<Vec<Op>, String> {
    let b = t.builder();
    let g = t.g.borrow();
    let ins = &g.comp(t.comp).instrs[t.v.instr as usize];
    if !matches!(ins.kind, OpKind::Tuple) {
        return Err("a `while` whose carry is not built in this program has no gradient".into());
    }
    Ok(ins.operands.iter().map(|v| b.op(t.comp, *v)).collect())
}

/// Whether `s` is an array with a size-0 dimension (it holds no element).
fn holds_nothing(s: &Shape) -> bool {
    s.is_array() && s.dims().contains(&0)
}

/// `buf` with the block at `starts` set to `update`, or `buf` itself where either
/// holds no element: such an update changes nothing (and XLA refuses it), which
/// is what a stack of size-0 rows, or of no rows, needs.
fn write_block(buf: &Op, update: &Op, starts: &[&Op]) -> Op {
    let empty = |o: &Op| o.shape().is_ok_and(|s| holds_nothing(&s));
    if empty(buf) || empty(update) {
        buf.clone()
    } else {
        // (Starts made here are never negative: XLA's form, no wrapping ops.)
        buf.dynamic_update_slice_clamped(update, starts)
    }
}

/// The block of `sizes` at `starts` of `x`, or zeros of that size where it holds
/// no element or `x` has none to read (a stack of no rows).
fn read_block(x: &Op, starts: &[&Op], sizes: &[i64], loc: &'static Location<'static>) -> Op {
    let empty = sizes.contains(&0) || x.shape().is_ok_and(|s| holds_nothing(&s));
    match x.element_type() {
        Ok(t) if empty => x
            .builder()
            .scalar_of(t, crate::Scalar::Int(0), loc)
            .broadcast_to(sizes),
        _ => x.on(loc).dynamic_slice_clamped(starts, sizes),
    }
}

// ---------------------------------------------------------------------------------
// `while` (`while_loop`, `fori_loop`, `while_loop_bounded`, `scan`)

/// While rule: one tuple operand (the carry); the condition maps it to `pred[]`, the
/// body maps it to itself. The result is the final carry.
pub fn infer_while(
    operand: &Shape,
    cond: Option<&(Vec<Shape>, Shape)>,
    body: Option<&(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "while";
    if !operand.is_tuple() {
        return Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::Rank,
            "the carry must be a tuple",
        ));
    }
    let one = std::slice::from_ref(operand);
    match cond {
        Some((p, r)) if p.as_slice() == one && *r == Shape::scalar(ElementType::Pred) => {}
        _ => {
            return Err(ShapeError::new(
                OP,
                &[operand],
                ShapeErrorKind::Body,
                format!("the condition must map {operand} to pred[]"),
            ));
        }
    }
    match body {
        Some((p, r)) if p.as_slice() == one && r == operand => Ok(operand.clone()),
        Some((_, r)) => Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::Body,
            format!("the body must map the carry {operand} to itself, it gives {r}"),
        )),
        None => Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::Body,
            "the body is not finished",
        )),
    }
}

pub(crate) fn shape_while(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::While { cond, body } = kind else {
        return Err(super::table::not_for("while", kind));
    };
    infer_while(
        cx.operands[0],
        cx.signature(*cond).as_ref(),
        cx.signature(*body).as_ref(),
    )
}

/// XLA keeps a while's body first, then its condition.
pub(crate) fn lower_while(kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::While { cond, body } = kind {
        p.called_computation_ids = vec![(cx.comp_id)(*body), (cx.comp_id)(*cond)];
    }
}

pub(crate) fn raise_while(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [body, cond] = cx.calls(p)?;
    Ok(OpKind::While { cond, body })
}

pub(crate) fn text_while(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::While { cond, body } = kind {
        out.callee(cx, "condition", *cond);
        out.callee(cx, "body", *body);
    }
}

/// What the backward pass of a loop stores from each forward step, and so what it
/// recomputes: the policies of `jax.checkpoint` (`jax.remat`), per loop
/// ([`ScanOptions::policy`], [`Builder::fori_loop_with`],
/// [`Builder::while_loop_bounded_with`]). Every policy gives the same gradient;
/// they trade memory (rows stacked per step) for time (ops run again in the
/// backward loop). The carry entering each step is always stored (except the
/// elements the loop passes through unchanged and the stacked outputs it only
/// writes). A body that holds loops, branches or calls is recomputed whole
/// (`Nothing`) under every policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckpointPolicy {
    /// Store every value each step computes; the backward pass recomputes nothing
    /// (`jax.checkpoint_policies.everything_saveable`; the default, as JAX's scan
    /// without `jax.checkpoint`).
    #[default]
    Everything,
    /// Store only the carry; the backward pass runs each step's body again
    /// (`jax.checkpoint_policies.nothing_saveable`, plain `jax.checkpoint`).
    Nothing,
    /// Store the results of the body's `dot` and `convolution` instructions (and
    /// the carry); recompute the rest, the cheap element-wise work, from them
    /// (`jax.checkpoint_policies.dots_saveable`, alias `checkpoint_dots`).
    Dots,
    /// Store the results of the body's `dot` instructions without batch dimensions
    /// (and the carry); recompute the rest
    /// (`jax.checkpoint_policies.dots_with_no_batch_dims_saveable`).
    DotsWithNoBatchDims,
    /// Store the values tagged by [`Op::checkpoint_name`] with one of these names
    /// (and the carry); recompute the rest
    /// (`jax.checkpoint_policies.save_only_these_names`).
    Names(Vec<String>),
}

impl CheckpointPolicy {
    /// [`CheckpointPolicy::Names`] of these names.
    pub fn names(names: &[&str]) -> Self {
        CheckpointPolicy::Names(names.iter().map(|n| n.to_string()).collect())
    }
}

/// The options of [`Builder::scan_with`], as `lax.scan` takes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// The number of steps when `xs` has no leaves (else it must equal their
    /// leading axis).
    pub length: Option<i64>,
    /// Walk the slices from the last (the stacked ys keep the slices' order).
    pub reverse: bool,
    /// Steps per iteration of the compiled loop (1 or 0: no unrolling; at least
    /// the length: no loop at all).
    pub unroll: usize,
    /// For the gradient: what each step stores for the backward pass and what it
    /// recomputes ([`CheckpointPolicy`]; `Everything` by default).
    pub policy: CheckpointPolicy,
    /// For the gradient of a recurrent scan (one whose state's cotangent chains
    /// the steps, an RNN): steps per iteration of the backward loop, whose
    /// weights' cotangents of products `x · W` are then one product over those
    /// steps' rows of `x` instead of one per step. 0 (the default) chooses: 2–4
    /// steps, about 128 rows in all, where the step count has such a divisor;
    /// 1 takes a product per step; `k > 1` asks for `k`, or the largest divisor of
    /// the step count below it. Other loops ignore it.
    pub backward_chunk: usize,
}

impl ScanOptions {
    /// No `length`, forwards, no unrolling, every value stored.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `length`.
    pub fn length(mut self, n: i64) -> Self {
        self.length = Some(n);
        self
    }

    /// Sets `reverse`.
    pub fn reverse(mut self, on: bool) -> Self {
        self.reverse = on;
        self
    }

    /// Sets `unroll` (0 counts as 1).
    pub fn unroll(mut self, k: usize) -> Self {
        self.unroll = k;
        self
    }

    /// Sets `policy`.
    pub fn policy(mut self, p: CheckpointPolicy) -> Self {
        self.policy = p;
        self
    }

    /// Sets `backward_chunk` (0: chosen; 1: a weight product per step).
    pub fn backward_chunk(mut self, k: usize) -> Self {
        self.backward_chunk = k;
        self
    }

    /// Shorthand: `true` sets `policy` to [`CheckpointPolicy::Nothing`] (recompute
    /// each step's body in the backward pass from the stored carry: one carry per
    /// step in memory, the body runs once more), `false` to
    /// [`CheckpointPolicy::Everything`].
    pub fn checkpoint(self, on: bool) -> Self {
        self.policy(if on {
            CheckpointPolicy::Nothing
        } else {
            CheckpointPolicy::Everything
        })
    }
}

impl Builder {
    /// A loop: while `cond(&carry)` (a `pred[]` scalar) holds, `carry = body(carry)`.
    /// The carry is any tree of arrays (a derived struct, a tuple, a `Vec`); each
    /// leaf keeps its shape and type. Both closures may use outside values.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Comparison, Shape};
    /// // Doubles x until it exceeds a limit, counting the steps.
    /// let b = Builder::new("loop");
    /// let x = b.parameter(0, Shape::of::<f32>(&[]), "x");
    /// let limit = b.parameter(1, Shape::of::<f32>(&[]), "limit");
    /// let (y, n) = b.while_loop(
    ///     (x, b.constant(0i32)),
    ///     |(v, _)| v.compare(&limit, Comparison::Le),
    ///     |(v, k)| (v * 2.0, k + 1),
    /// );
    /// assert_eq!(n.dims()?, Vec::<i64>::new());
    /// # let _ = y;
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn while_loop<T>(
        &self,
        init: T,
        cond: impl FnOnce(&T) -> Op,
        body: impl FnOnce(T) -> T,
    ) -> T
    where
        T: Tree<Op, With<Op> = T>,
    {
        let loc = Location::caller();
        let leaves: Vec<Op> = init.leaves().into_iter().cloned().collect();
        let refs: Vec<&Op> = leaves.iter().collect();
        let target = match self.target(&refs, "while", loc) {
            Ok(t) => t,
            Err(f) => return init.map_ref(|_| f.clone()),
        };
        let shapes: Vec<Shape> = leaves.iter().map(|o| o.shape().expect("checked")).collect();
        let n = shapes.len();
        let rebuild = |elems: Vec<Op>| init.rebuild(elems).expect("one element per leaf");
        let c = match self.tuple_body(target, "cond", &shapes, loc, |e| vec![cond(&rebuild(e))]) {
            Ok(b) => b,
            Err(f) => return init.map_ref(|_| f.clone()),
        };
        let bd = match self.tuple_body(target, "body", &shapes, loc, |e| {
            body(rebuild(e)).into_leaves()
        }) {
            Ok(b) => b,
            Err(f) => return init.map_ref(|_| f.clone()),
        };
        if let Err(f) = self.check_carry("while", &shapes, &bd.roots, bd.comp, loc) {
            return init.map_ref(|_| f.clone());
        }
        // Every value either body captured travels in the carry.
        let union: IndexSet<Value> = {
            let g = self.g.borrow();
            g.comp(c.comp)
                .captures
                .keys()
                .chain(g.comp(bd.comp).captures.keys())
                .copied()
                .collect()
        };
        self.thread_captures(&c, target, &shapes, &union, loc);
        let passed = self.thread_captures(&bd, target, &shapes, &union, loc);
        let roots: Vec<Value> = bd.roots.iter().copied().chain(passed).collect();
        // The condition returns its predicate; the body, always a tuple (the carry).
        let done = self
            .finish_body(c.comp, &c.roots, loc)
            .and_then(|()| self.finish_tuple_body(bd.comp, &roots, loc));
        if let Err(f) = done {
            return init.map_ref(|_| f.clone());
        }
        let captured: Vec<Op> = union.iter().map(|v| self.op(target, *v)).collect();
        let carry: Vec<&Op> = refs.iter().copied().chain(&captured).collect();
        // In the loop's computation (see `switch`).
        let here = Builder {
            g: self.g.clone(),
            comp: target,
        };
        let tuple = here.tuple(&carry);
        let r = self.emit(
            OpKind::While {
                cond: c.comp,
                body: bd.comp,
            },
            &[&tuple],
            None,
            loc,
        );
        let outs = self.results(r, n, true);
        init.rebuild(outs).expect("one result per leaf")
    }

    /// A loop of a static trip count: `carry = body(i, carry)` for `i` in `lo..hi`
    /// (an `s32[]` counter). Lowered to a while loop whose counter runs from `lo` to
    /// `hi`; the trip count `hi - lo` is known when the program is built.
    #[track_caller]
    pub fn fori_loop<T>(&self, lo: i32, hi: i32, init: T, body: impl FnOnce(&Op, T) -> T) -> T
    where
        T: Tree<Op, With<Op> = T>,
    {
        let loc = Location::caller();
        self.fori_loop_at(lo, hi, init, &CheckpointPolicy::Everything, body, loc)
    }

    /// [`Builder::fori_loop`] with what its gradient stores per step
    /// ([`CheckpointPolicy`]), as `jax.checkpoint(body, policy=...)` inside a
    /// `fori_loop` would choose.
    ///
    /// ```
    /// use xlaclient_core::{Builder, CheckpointPolicy, Shape};
    /// let b = Builder::new("fori");
    /// let w = b.parameter(0, Shape::of::<f32>(&[3, 3]), "w");
    /// let x = b.parameter(1, Shape::of::<f32>(&[3]), "x");
    /// let h = b.fori_loop_with(0, 8, x, &CheckpointPolicy::Dots, |_, h| w.matmul(&h).tanh());
    /// let g = b.grad(&h.reduce_sum(&[0]), &w);
    /// assert_eq!(g.dims()?, vec![3, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn fori_loop_with<T>(
        &self,
        lo: i32,
        hi: i32,
        init: T,
        policy: &CheckpointPolicy,
        body: impl FnOnce(&Op, T) -> T,
    ) -> T
    where
        T: Tree<Op, With<Op> = T>,
    {
        self.fori_loop_at(lo, hi, init, policy, body, Location::caller())
    }

    fn fori_loop_at<T>(
        &self,
        lo: i32,
        hi: i32,
        init: T,
        policy: &CheckpointPolicy,
        body: impl FnOnce(&Op, T) -> T,
        loc: &'static Location<'static>,
    ) -> T
    where
        T: Tree<Op, With<Op> = T>,
    {
        let i0 = self.scalar_of(ElementType::S32, crate::Scalar::Int(lo.into()), loc);
        let (i_out, out) = self.while_loop(
            (i0, init),
            |(i, _)| {
                i.binary_scalar(
                    crate::BinaryOp::Subtract,
                    crate::Scalar::Int(hi.into()),
                    false,
                    loc,
                )
                .on(loc)
                .compare(
                    &i.builder()
                        .scalar_of(ElementType::S32, crate::Scalar::Int(0), loc),
                    crate::Comparison::Lt,
                )
            },
            |(i, carry)| {
                let next = body(&i, carry);
                (
                    i.binary_scalar(crate::BinaryOp::Add, crate::Scalar::Int(1), false, loc),
                    next,
                )
            },
        );
        self.record_trip_count(&i_out, (i64::from(hi) - i64::from(lo)).max(0));
        self.record_policy(&i_out, policy);
        out
    }

    /// A while loop that stops after at most `max_steps` iterations: while
    /// `cond(&carry)` holds and fewer than `max_steps` steps have run, `carry =
    /// body(carry)`. The bound is what makes it differentiable: the backward pass
    /// stores up to `max_steps` carries and reverses the steps actually taken
    /// (`jax.lax.while_loop` has no reverse mode at all). Use it where a loop's
    /// length depends on the data (an episode that ends early) and a bound is known.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Comparison, Shape};
    /// let b = Builder::new("bounded");
    /// let x = b.parameter(0, Shape::of::<f32>(&[]), "x");
    /// let y = b.while_loop_bounded(
    ///     x.clone(),
    ///     100,
    ///     |v| v.compare(&v.builder().constant(10f32), Comparison::Lt),
    ///     |v| &v * 1.5,
    /// );
    /// let g = b.grad(&y, &x); // 1.5^steps
    /// assert_eq!(g.dims()?, Vec::<i64>::new());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn while_loop_bounded<T>(
        &self,
        init: T,
        max_steps: i64,
        cond: impl FnOnce(&T) -> Op,
        body: impl FnOnce(T) -> T,
    ) -> T
    where
        T: Tree<Op, With<Op> = T>,
    {
        let loc = Location::caller();
        let policy = &CheckpointPolicy::Everything;
        self.while_loop_bounded_at(init, max_steps, policy, cond, body, loc)
    }

    /// [`Builder::while_loop_bounded`] with what its gradient stores per step
    /// ([`CheckpointPolicy`]).
    #[track_caller]
    pub fn while_loop_bounded_with<T>(
        &self,
        init: T,
        max_steps: i64,
        policy: &CheckpointPolicy,
        cond: impl FnOnce(&T) -> Op,
        body: impl FnOnce(T) -> T,
    ) -> T
    where
        T: Tree<Op, With<Op> = T>,
    {
        let loc = Location::caller();
        self.while_loop_bounded_at(init, max_steps, policy, cond, body, loc)
    }

    fn while_loop_bounded_at<T>(
        &self,
        init: T,
        max_steps: i64,
        policy: &CheckpointPolicy,
        cond: impl FnOnce(&T) -> Op,
        body: impl FnOnce(T) -> T,
        loc: &'static Location<'static>,
    ) -> T
    where
        T: Tree<Op, With<Op> = T>,
    {
        let k0 = self.scalar_of(ElementType::S32, crate::Scalar::Int(0), loc);
        let (k, out) = self.while_loop(
            (k0, init),
            |(k, c)| {
                let more = k.on(loc).compare(
                    &k.builder()
                        .scalar_of(ElementType::S32, crate::Scalar::Int(max_steps), loc),
                    crate::Comparison::Lt,
                );
                cond(c).bitwise(crate::ops::bitwise::BitwiseOp::And, &more, loc)
            },
            |(k, c)| {
                let next = k.binary_scalar(crate::BinaryOp::Add, crate::Scalar::Int(1), false, loc);
                (next, body(c))
            },
        );
        self.record_bound(&k, max_steps.max(0));
        self.record_policy(&k, policy);
        out
    }

    /// Notes what the gradient of the while loop that produced `result` stores per
    /// step (nothing to note for the default, `Everything`).
    fn record_policy(&self, result: &Op, policy: &CheckpointPolicy) {
        if !result.is_poisoned() && *policy != CheckpointPolicy::Everything {
            self.g
                .borrow_mut()
                .checkpointed
                .insert((result.comp, result.v.instr), policy.clone());
        }
    }

    /// Notes the bound of a while loop built by [`Builder::while_loop_bounded`].
    fn record_bound(&self, result: &Op, n: i64) {
        if !result.is_poisoned() {
            self.g
                .borrow_mut()
                .loop_bounds
                .insert((result.comp, result.v.instr), n);
        }
    }

    /// Notes the static trip count of the while loop that produced `result`, which
    /// is what lets the backward pass reverse it.
    fn record_trip_count(&self, result: &Op, n: i64) {
        if !result.is_poisoned() {
            self.g
                .borrow_mut()
                .trip_counts
                .insert((result.comp, result.v.instr), n);
        }
    }

    /// `lax.scan(body, init, xs)`: runs `body(carry, x)` for each slice `x` of `xs`
    /// along their leading axis, threading the carry and stacking each step's `y`
    /// along a new leading axis. Returns the final carry and the stacked `ys`. The
    /// body runs twice while the program is built (once to learn the shapes of `y`),
    /// hence `Fn`; it may use outside values. Lowered to a while loop with a static
    /// trip count. Options by name (`length` when `xs` has no leaves, `reverse`,
    /// `unroll`, `checkpoint`) go through [`Builder::scan_with`] and
    /// [`ScanOptions`]: `b.scan_with(init, (), &ScanOptions::new().length(10), body)`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// // Running sums of the rows of x.
    /// let b = Builder::new("cumsum");
    /// let x = b.parameter(0, Shape::of::<f32>(&[5, 3]), "x");
    /// let zero = b.zeros(xlaclient_core::ElementType::F32, &[3]);
    /// let (total, sums) = b.scan(zero, x, |acc, row| {
    ///     let next = &acc + &row;
    ///     (next.clone(), next)
    /// });
    /// assert_eq!(sums.dims()?, vec![5, 3]);
    /// assert_eq!(total.dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn scan<C, X, Y>(&self, init: C, xs: X, body: impl Fn(C, X) -> (C, Y)) -> (C, Y)
    where
        C: Tree<Op, With<Op> = C>,
        X: Tree<Op, With<Op> = X>,
        Y: Tree<Op, With<Op> = Y>,
    {
        self.scan_with(init, xs, &ScanOptions::default(), body)
    }

    /// [`Builder::scan`] with its options in one value, `unroll` among them: each
    /// iteration of the while loop runs `unroll` steps of the body (the last
    /// `length % unroll` steps run after the loop), so XLA sees `unroll` steps at
    /// once and the loop's per-iteration overhead is paid `length / unroll` times.
    /// The results do not depend on `unroll`; the body is traced `unroll + 1` times
    /// (plus the remainder).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ScanOptions, Shape};
    /// let b = Builder::new("cumsum");
    /// let x = b.parameter(0, Shape::of::<f32>(&[10, 3]), "x");
    /// let zero = b.zeros(xlaclient_core::ElementType::F32, &[3]);
    /// let opts = ScanOptions::new().reverse(true).unroll(4);
    /// let (_, sums) = b.scan_with(zero, x, &opts, |acc, row| {
    ///     let next = &acc + &row;
    ///     (next.clone(), next)
    /// });
    /// assert_eq!(sums.dims()?, vec![10, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn scan_with<C, X, Y>(
        &self,
        init: C,
        xs: X,
        options: &ScanOptions,
        body: impl Fn(C, X) -> (C, Y),
    ) -> (C, Y)
    where
        C: Tree<Op, With<Op> = C>,
        X: Tree<Op, With<Op> = X>,
        Y: Tree<Op, With<Op> = Y>,
    {
        let loc = Location::caller();
        let ScanOptions {
            length,
            reverse,
            unroll,
            ref policy,
            backward_chunk,
        } = *options;
        let x_leaves: Vec<Op> = xs.leaves().into_iter().cloned().collect();
        let c_leaves: Vec<Op> = init.leaves().into_iter().cloned().collect();
        let all: Vec<&Op> = x_leaves.iter().chain(&c_leaves).collect();
        let fail_out = |f: Op, init: C, xs: X| -> (C, Y) {
            let c = init.map_ref(|_| f.clone());
            let (_, y) = body(c.map_ref(|_| f.clone()), xs.map_ref(|_| f.clone()));
            (c, y.map_ref(|_| f.clone()))
        };
        let target = match self.target(&all, "scan", loc) {
            Ok(t) => t,
            Err(f) => return fail_out(f, init, xs),
        };
        let x_shapes: Vec<Shape> = x_leaves
            .iter()
            .map(|o| o.shape().expect("checked"))
            .collect();
        let len = match (x_shapes.first(), length) {
            (Some(s), _) if s.rank() == 0 => None,
            (Some(s), l)
                if l.is_none_or(|l| l == s.dims()[0])
                    && x_shapes
                        .iter()
                        .all(|t| t.rank() > 0 && t.dims()[0] == s.dims()[0]) =>
            {
                Some(s.dims()[0])
            }
            (None, Some(l)) if l >= 0 => Some(l),
            _ => None,
        };
        let Some(len) = len else {
            let f = self.fail(
                ShapeError::new(
                    "scan",
                    &x_shapes.iter().collect::<Vec<_>>(),
                    ShapeErrorKind::Dimension,
                    format!("every xs leaf needs the same leading axis (and `length`, {length:?}, must agree or be given without xs)"),
                ),
                loc,
            );
            return fail_out(f, init, xs);
        };
        let slice_dims: Vec<Vec<i64>> = x_shapes.iter().map(|s| s.dims()[1..].to_vec()).collect();
        // The step's slice index: i, or len - 1 - i walking backwards.
        let position = |i: &Op| -> Op {
            if reverse {
                i.binary_scalar(
                    crate::BinaryOp::Subtract,
                    crate::Scalar::Int(len - 1),
                    false,
                    loc,
                )
                .unary(crate::UnaryOp::Negate, loc)
            } else {
                i.clone()
            }
        };
        let take = |i: &Op| -> X {
            let b = i.builder();
            let zero = b.scalar_of(ElementType::S32, crate::Scalar::Int(0), loc);
            let pos = position(i);
            let slices: Vec<Op> = x_leaves
                .iter()
                .zip(&slice_dims)
                .map(|(x, d)| {
                    let mut start = vec![&pos];
                    start.extend(std::iter::repeat_n(&zero, d.len()));
                    let mut sizes = vec![1];
                    sizes.extend(d);
                    read_block(x, &start, &sizes, loc).on(loc).reshape(d)
                })
                .collect();
            xs.rebuild(slices).expect("one slice per leaf")
        };
        // Learn the shapes of y from a trace the finished program never calls.
        let c_shapes: Vec<Shape> = c_leaves
            .iter()
            .map(|o| o.shape().expect("checked"))
            .collect();
        let probe_params: Vec<Shape> = std::iter::once(Shape::scalar(ElementType::S32))
            .chain(c_shapes.iter().cloned())
            .collect();
        let mut y_shapes: Vec<Shape> = Vec::new();
        // The probe's y gives the structure of the stacked ys when no step runs.
        let mut y_probe: Option<Y> = None;
        let probed = self.body(target, "scan_shapes", &probe_params, loc, |_, p| {
            let c = init.rebuild(p[1..].to_vec()).expect("one value per leaf");
            let (c2, y) = body(c, take(&p[0]));
            let ys: Vec<Op> = y.leaves().into_iter().cloned().collect();
            y_shapes = ys.iter().filter_map(|o| o.shape().ok()).collect();
            y_probe = Some(y);
            c2.into_leaves().into_iter().chain(ys).collect()
        });
        if let Err(f) = probed {
            return fail_out(f, init, xs);
        }
        // Each row is written by its step before anything reads the stack: no
        // pass of zeros over it first.
        let ys0: Vec<Op> = y_shapes
            .iter()
            .map(|s| {
                let mut d = vec![len];
                d.extend(s.dims());
                self.uninitialized(s.element_type().expect("an array"), &d, loc)
            })
            .collect();
        // One step at counter `i`: the body on slice `i`, its y stored at row `i`.
        let step = |i: &Op, c: C, ys: Vec<Op>| -> (C, Vec<Op>, Y) {
            let b = i.builder();
            let zero = b.scalar_of(ElementType::S32, crate::Scalar::Int(0), loc);
            let pos = position(i);
            let (c2, y) = body(c, take(i));
            let ys2: Vec<Op> = ys
                .iter()
                .zip(y.leaves())
                .map(|(buf, yv)| {
                    let d = yv.dims().unwrap_or_default();
                    let mut up = vec![1];
                    up.extend(&d);
                    let mut start = vec![&pos];
                    start.extend(std::iter::repeat_n(&zero, d.len()));
                    write_block(buf, &yv.on(loc).reshape(&up), &start)
                })
                .collect();
            (c2, ys2, y)
        };
        let unroll = unroll.max(1) as i64;
        // Steps `0..full` run in the loop, `unroll` per iteration; `full..len` after
        // it. A loop with no iteration is left out: with no step at all (`len` 0,
        // as JAX) the scan is its init and ys of no rows, whose gradient passes the
        // carry's cotangent straight through.
        let full = len / unroll * unroll;
        let mut y_template: Option<Y> = None;
        let (mut c, mut ys) = if full > 0 {
            let i0 = self.scalar_of(ElementType::S32, crate::Scalar::Int(0), loc);
            let (i_out, c, ys) = self.on(loc).while_loop(
                (i0, init, ys0),
                |(i, _, _)| {
                    i.on(loc).compare(
                        &i.builder()
                            .scalar_of(ElementType::S32, crate::Scalar::Int(full), loc),
                        crate::Comparison::Lt,
                    )
                },
                |(i, mut c, mut ys)| {
                    for k in 0..unroll.min(len.max(1)) {
                        let ik = if k == 0 {
                            i.clone()
                        } else {
                            i.binary_scalar(crate::BinaryOp::Add, crate::Scalar::Int(k), false, loc)
                        };
                        let (c2, ys2, y) = step(&ik, c, ys);
                        (c, ys) = (c2, ys2);
                        y_template = Some(y);
                    }
                    let next = i.binary_scalar(
                        crate::BinaryOp::Add,
                        crate::Scalar::Int(unroll),
                        false,
                        loc,
                    );
                    (next, c, ys)
                },
            );
            self.record_trip_count(&i_out, full / unroll);
            self.record_policy(&i_out, policy);
            if backward_chunk != 0 && !i_out.is_poisoned() {
                self.g
                    .borrow_mut()
                    .backward_chunks
                    .insert((i_out.comp, i_out.v.instr), backward_chunk);
            }
            (c, ys)
        } else {
            (init, ys0)
        };
        for k in full..len {
            let i = self.scalar_of(ElementType::S32, crate::Scalar::Int(k), loc);
            let (c2, ys2, y) = step(&i, c, ys);
            (c, ys) = (c2, ys2);
            y_template = Some(y);
        }
        let y = y_template
            .or(y_probe)
            .expect("the body ran")
            .rebuild(ys)
            .expect("one stack per leaf");
        (c, y)
    }
}

/// While: reversed when the builder knows its trip count (`fori_loop`, `scan`) or
/// a bound (`while_loop_bounded`); see `while_cts`. One cotangent per element of
/// the loop's tuple operand.
pub(crate) fn vjp_while(n: &Node) -> Grads {
    let OpKind::While { cond, body } = n.kind else {
        return Err("not a while".into());
    };
    let (trips, policy, asked_chunk) = {
        let g = n.b.g.borrow();
        let trips = g
            .trip_counts
            .get(&n.at)
            .map(|t| Trips::Exactly(*t))
            .or_else(|| g.loop_bounds.get(&n.at).map(|t| Trips::AtMost(*t)));
        let policy = g.checkpointed.get(&n.at).cloned().unwrap_or_default();
        let chunk = g.backward_chunks.get(&n.at).copied().unwrap_or(0);
        (trips, policy, chunk)
    };
    let Some(trips) = trips else {
        return Err(
            "a `while` loop without a static trip count has no gradient: use fori_loop or scan (whose trip count is known), or while_loop_bounded (a declared bound)"
                .into(),
        );
    };
    while_cts(*cond, *body, trips, &policy, asked_chunk, n, &n.array_cts())
        .map(|parts| vec![Some(Ct::Tuple(parts))])
}

/// How many iterations a while loop runs, as far as the builder knows.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Trips {
    /// Exactly this many (`fori_loop`, `scan`).
    Exactly(i64),
    /// At most this many (`while_loop_bounded`); the count is known at run time.
    AtMost(i64),
}

/// A while loop of `trips` iterations (or at most that many), reversed: a forward
/// loop of the same steps stores the carry of every step (all but the invariant
/// and write-only elements, a state whose next value is a stored body value, and
/// a recurrent loop's counter: the backward step gets those from the stored
/// value's previous row and from the step) and, unless checkpointed, the body's
/// values; it also
/// serves the original loop's results, which is then dead (the forward steps run
/// once). A backward loop walks the steps from the last, reading each step's
/// values back (or recomputing the body from its stored carry) and pulling the
/// cotangent back through it. Values the body captured are carry elements passed
/// through, so their cotangents add up over the steps.
#[allow(clippy::too_many_arguments)]
fn while_cts(
    cond: CompId,
    body: CompId,
    trips: Trips,
    policy: &CheckpointPolicy,
    asked_chunk: usize,
    n: &crate::autodiff::Node,
    cts: &[Option<Op>],
) -> Result<Vec<Option<Op>>, String> {
    let (bounded, trips) = match trips {
        Trips::Exactly(t) => (false, t),
        Trips::AtMost(t) => (true, t),
    };
    use crate::autodiff::{ct_or_zeros, differentiable, inline, local, zeros_like};
    let (b, loc) = (n.b, n.loc);
    let init = tuple_elements(&n.operands[0])?;
    if trips <= 0 {
        // No step can run: the loop is the identity on its carry, so each
        // element's cotangent passes straight through (and the stacks of the
        // general case would have no row to write or read).
        return Ok((0..init.len())
            .map(|j| {
                let float = init[j].element_type().is_ok_and(differentiable);
                float.then(|| ct_or_zeros(cts, j, &n.results[j], loc))
            })
            .collect());
    }
    let k = init.len();
    let shapes: Vec<Shape> = init.iter().map(|x| x.shape().expect("an array")).collect();
    let (invariant, write_only) = carry_roles(b, body, k);
    // The stacked outputs' new values (a dynamic-update-slice of the whole stack):
    // no rule reads them, and storing one per step would take memory quadratic in
    // the steps. The backward pass reads the stack's final value in their place.
    let unstored = written_stacks(b, body, &write_only);
    // The body's intermediate values the policy keeps are stored too (when the
    // body is flat: no loops, branches or calls inside); `partial`: some are not,
    // and the backward loop recomputes them from the carry and the stored ones.
    let (stored, partial): (Vec<(u32, u32, Shape)>, bool) = match (policy, stored_values(b, body)) {
        (CheckpointPolicy::Nothing, _) | (_, None) => (Vec::new(), false),
        (p, Some(all)) => {
            let read = read_backward(b, body, &shapes);
            let all: Vec<(u32, u32, Shape)> = all
                .into_iter()
                .filter(|(i, _, _)| read[*i as usize] && !unstored.iter().any(|(u, _)| u == i))
                .collect();
            if *p == CheckpointPolicy::Everything {
                (all, false)
            } else {
                let keep = saveable(b, body, p);
                let kept: Vec<_> = all
                    .into_iter()
                    .filter(|(i, _, _)| keep[*i as usize])
                    .collect();
                (kept, true)
            }
        }
    };
    let store = !stored.is_empty();
    let stacked: Vec<usize> = (0..k)
        .filter(|j| !invariant[*j] && !write_only[*j])
        .collect();
    // Where a recurrent state's cotangent chains the steps (an RNN).
    let recurrent = stacked.iter().any(|j| {
        shapes[*j]
            .element_type()
            .is_some_and(crate::autodiff::differentiable)
    });
    // Float carry elements whose new value is a stored body value (an RNN's
    // state `h' = tanh(..)`, whose tanh the backward step reads): the value
    // entering step `t > 0` is that stored value's row `t - 1` (and the loop's
    // initial value at step 0), so the forward loop does not stack them a second
    // time (one stack and one write per step less).
    let shifted = shifted_elements(b, body, &stacked, &stored, &shapes);
    // Integer scalar elements that step by a constant (a scan's counter): the
    // value entering step `t` is `init + t·c`, computed in the backward step
    // instead of stacked (one write per forward step less). In recurrent loops
    // (whose backward steps run as a loop); the batched backward pass of
    // independent steps reads every step's counter from its stack.
    let counters = if recurrent {
        counter_elements(b, body, &stacked, &shapes)
    } else {
        Vec::new()
    };
    let stacked: Vec<usize> = stacked
        .into_iter()
        .filter(|j| !shifted.iter().any(|(e, _)| e == j) && !counters.iter().any(|(e, _)| e == j))
        .collect();
    let s32 = |b: &Builder, v: i64| b.scalar_of(ElementType::S32, crate::Scalar::Int(v), loc);
    let at_step = |i: &Op, rank: usize| -> Vec<Op> {
        let zero = s32(&i.builder(), 0);
        std::iter::once(i.clone())
            .chain(std::iter::repeat_n(zero, rank))
            .collect()
    };
    let with_step_axis =
        |s: &Shape| -> Vec<i64> { std::iter::once(1).chain(s.dims().iter().copied()).collect() };
    let plus_one = |i: Op| i.binary_scalar(crate::BinaryOp::Add, crate::Scalar::Int(1), false, loc);

    // The loop that runs the forward steps and stores the carry entering each step
    // (and, without checkpointing, the body's values): one stack of `trips` rows
    // per value. It computes the original loop's results too, which it then serves
    // (`Graph::forwarded`): the original is dead, the forward loop runs once. A
    // second gradient of the same loop reuses it.
    let here = n
        .results
        .first()
        .filter(|r| !r.is_poisoned() && r.comp == b.comp)
        .map(|r| (r.comp, r.v.instr));
    let cached = here.and_then(|key| b.g.borrow().storing.get(&key).cloned());
    let (count, stacks) = match cached {
        Some(s) => (
            b.op(b.comp, s.count),
            s.stacks.iter().map(|v| b.op(b.comp, *v)).collect(),
        ),
        None => {
            // The storing loop replaces the forward loop: its copy of the body
            // keeps the body's host callbacks.
            let outer = std::mem::take(&mut b.g.borrow_mut().in_backward);
            let (count, outs, stacks) = storing_loop(
                b, cond, body, bounded, trips, &init, &stacked, &stored, &shapes, loc,
            );
            b.g.borrow_mut().in_backward = outer;
            let all_ok = !count.is_poisoned()
                && outs.iter().chain(&stacks).all(|o| !o.is_poisoned())
                && outs.len() == n.results.len();
            if let (Some(key), true) = (here, all_ok) {
                let mut g = b.g.borrow_mut();
                for (orig, new) in n.results.iter().zip(&outs) {
                    g.forwarded.insert((key.0, orig.v), new.v);
                }
                g.storing.insert(
                    key,
                    crate::builder::StoringLoop {
                        count: count.v,
                        stacks: stacks.iter().map(|s| s.v).collect(),
                    },
                );
            }
            (count, stacks)
        }
    };

    // Backward: step t = count - 1 - s. Only the float elements that depend on a
    // value differentiated against get cotangents: a constant the loop reads (its
    // captured xs, say) has none to accumulate step by step.
    let entering: Vec<bool> = init.iter().map(|x| n.may_be_active(x)).collect();
    let moving = loop_active(b, body, &entering);
    let float: Vec<usize> = (0..k)
        .filter(|j| moving[*j] && shapes[*j].element_type().is_some_and(differentiable))
        .collect();
    let ct0: Vec<Op> = float
        .iter()
        .map(|j| ct_or_zeros(cts, *j, &n.results[*j], loc))
        .collect();
    // Dots whose cotangent for a loop-invariant operand (a weight the body reads)
    // is summed over the steps after the loop, in one product over the stacked
    // rows, instead of one small product and an add per step. Only where no float
    // cotangent flows from step to step (every float element of the carry is
    // invariant or a stacked output, as in a rollout whose state is discrete):
    // there the backward steps are independent and the per-step products were the
    // work. Where a recurrent state's cotangent chains the steps (an RNN), one
    // product after the loop measured slower (benches/scan_grad.rs: 6.5-9.7x the
    // forward pass against 3.9-5.0x, the product after the loop taken in every
    // layout: transposed, canonical, or batched over chunks of rows; guide 12):
    // there the products are summed a few steps at a time instead (`chunked`
    // below).
    let deferred: Vec<DeferredDot> = if store && !recurrent {
        deferrable_dots(b, body, &invariant, &shapes, &stacked, &stored, &[])
    } else {
        Vec::new()
    };
    // Stacked outputs written one row per step (a scan's ys), whose initial value
    // is a constant: their cotangent passes through the backward loop unchanged.
    let once: Vec<bool> = {
        let rows = rows_once(b, body, &write_only);
        (0..k).map(|j| rows[j] && constant_like(&init[j])).collect()
    };
    // Rows of a loop-invariant float element that the body reads one per step at
    // the counter (a scan's xs): their cotangents are written into a stack at the
    // same rows, not added into a whole array of the element's size every step.
    let row_reads: Vec<RowRead> = if store {
        let available = |v: Value| {
            partial
                || stored
                    .iter()
                    .any(|(i, r, _)| (*i, *r) == (v.instr, v.result))
        };
        sliced_rows(b, body, &invariant, &float, available)
    } else {
        Vec::new()
    };
    // A row read's start that the backward step cannot get (`sliced_rows` checks
    // that it can: stored or recomputed) is an error at build time, never a
    // wrong row.
    let lost = |bb: &Builder| {
        let why = "the gradient lost a start index of a row the loop reads";
        bb.fail(
            ShapeError::new("while", &[], ShapeErrorKind::Body, why),
            loc,
        )
    };
    // In a recurrent loop (an RNN: the state's cotangent chains the steps, so
    // they run one after another), the products that give a weight's cotangent
    // (`x · W` for an invariant matrix W, x's rows stacked) are summed over
    // `chunk` steps at once: each iteration of the backward loop runs `chunk`
    // steps and then one product over their rows, instead of one small product
    // and one add of W's size per step (`benches/scan_grad.rs`; guide 12).
    let (chunk, chunked): (i64, Vec<DeferredDot>) = if recurrent && store && !bounded {
        let dots: Vec<DeferredDot> =
            deferrable_dots(b, body, &invariant, &shapes, &stacked, &stored, &shifted)
                .into_iter()
                .filter(|d| {
                    let dd = &d.attrs.dims;
                    // A weight that gets a cotangent (one differentiated against).
                    float.contains(&d.element)
                        && d.operand == 1
                        && shapes[d.element].rank() == 2
                        && dd.lhs_batch.is_empty()
                        && dd.rhs_batch.is_empty()
                        && d.out.rank() == 2
                })
                .collect();
        // Rows of x per step: the first axis of the dot's result.
        let rows = dots.iter().map(|d| d.out.dims()[0]).max().unwrap_or(0);
        let c = chunk_steps(trips, rows, asked_chunk as i64);
        if c > 1 { (c, dots) } else { (1, Vec::new()) }
    } else {
        (1, Vec::new())
    };
    let defer_edges: std::collections::HashSet<(u32, usize)> = deferred
        .iter()
        .chain(&chunked)
        .map(|d| (d.dot, d.operand))
        .chain(row_reads.iter().map(|r| (r.slice, 0)))
        .collect();
    // Where no float cotangent chains the steps (every float element the
    // gradient reaches is loop-invariant, or a stacked output whose cotangent
    // passes through unchanged), the backward steps are independent of each
    // other: they run as one batched computation over the steps (a `vmap` of the
    // backward step over the forward loop's stacks) instead of a loop of small
    // ones, as a hand-batched loss would; the invariant elements' cotangents are
    // then sums over the step axis. Only with an exact trip count (every stacked
    // row holds a step), and only under `Everything`: the batched steps hold
    // every step's cotangents at once, of the size of what that policy stores,
    // where a partial policy asked for less memory (their backward loop recomputes
    // one step at a time). The rows the steps read of an invariant element get
    // their cotangents by one scatter-add.
    let batched = !bounded
        && shifted.is_empty()
        && counters.is_empty()
        && store
        && !partial
        && !recurrent
        && float.iter().all(|j| invariant[*j] || once[*j]);
    let (mut out, ct_stacks): (Vec<Option<Op>>, Vec<Op>) = if batched {
        batched_backward(
            &BackwardStep {
                body,
                k,
                init: &init,
                results: n.results,
                shapes: &shapes,
                invariant: &invariant,
                stacked: &stacked,
                stored: &stored,
                unstored: &unstored,
                partial,
                float: &float,
                once: &once,
                defer_edges: &defer_edges,
                deferred: &deferred,
                row_reads: &row_reads,
            },
            b,
            &stacks,
            &ct0,
            loc,
        )
    } else {
        let ct_stacks0: Vec<Op> = deferred
            .iter()
            .map(|d| {
                let dims: Vec<i64> = std::iter::once(trips)
                    .chain(d.out.dims().iter().copied())
                    .collect();
                stack_start(b, d.out.element_type().expect("array"), &dims, bounded, loc)
            })
            .chain(row_reads.iter().map(|r| zeros_like(&init[r.element], loc)))
            .collect();
        // Each weight the steps multiply by (`x · W`), transposed once here (behind
        // a barrier, so that XLA does not fold it back into the products): the
        // backward step's `ct · Wᵀ` reads it in the fast layout.
        let transposed: Vec<(usize, Op)> = transposed_weights(b, body, &invariant, &shapes)
            .into_iter()
            .map(|j| {
                let t = init[j].transpose(&[1, 0]);
                (j, b.optimization_barrier(&[&t]).remove(0))
            })
            .collect();
        // Rows `lo .. lo + chunk` of a chunked dot's other operand, as
        // `[chunk, ..]`, in the loop body's builder `bb`.
        let chunk_rows = |bb: &Builder, other: &Rows, lo: &Op| -> Op {
            let block = |stack: &Op, shape: &Shape, start: &Op| {
                let starts = at_step(start, shape.rank());
                let refs: Vec<&Op> = starts.iter().collect();
                let mut sizes = vec![chunk];
                sizes.extend(shape.dims());
                read_block(&local(bb, stack), &refs, &sizes, loc)
            };
            match *other {
                Rows::Carry(p) => block(&stacks[p], &shapes[stacked[p]], lo),
                Rows::Stored(p) => block(&stacks[stacked.len() + p], &stored[p].2, lo),
                Rows::Shifted { element, stored: q } => {
                    // The stored value's rows `lo - 1 ..`; at `lo = 0` the
                    // initial value, then the stored rows `0 .. chunk - 1`.
                    let shape = &shapes[element];
                    let zero = s32(bb, 0);
                    let start = lo
                        .binary_scalar(crate::BinaryOp::Subtract, crate::Scalar::Int(1), false, loc)
                        .binary(crate::BinaryOp::Maximum, &zero, loc);
                    let rows = block(&stacks[stacked.len() + q], shape, &start);
                    let first = local(bb, &init[element]).reshape(&with_step_axis(shape));
                    let mut limit = vec![chunk - 1];
                    limit.extend(shape.dims());
                    let head = rows.slice(&vec![0; limit.len()], &limit, &vec![1; limit.len()]);
                    let from_start = bb.concatenate(&[&first, &head], 0);
                    let at_start = lo.compare(&zero, crate::Comparison::Eq);
                    bb.select(&at_start, &from_start, &rows)
                }
            }
        };
        // One backward step at step `t`, in the loop body's builder `bb`: the
        // new float cotangents, the new rows of the cotangent stacks, and the
        // cotangents the step captured at the deferred edges.
        let step = |bb: &Builder,
                    t: &Op,
                    ct: &[Op],
                    ct_rows: &[Op]|
         -> (Vec<Op>, Vec<Op>, HashMap<u32, Op>) {
            let t = t.clone();
            // Row `t` of a stack.
            let slice_at = |stack: &Op, shape: &Shape, row: &Op| {
                let starts = at_step(row, shape.rank());
                let refs: Vec<&Op> = starts.iter().collect();
                read_block(&local(bb, stack), &refs, &with_step_axis(shape), loc)
                    .reshape(shape.dims())
            };
            let slice = |stack: &Op, shape: &Shape| slice_at(stack, shape, &t);
            let c_t: Vec<Op> = (0..k)
                .map(|j| {
                    let dims = shapes[j].dims().to_vec();
                    let shift = shifted.iter().find(|(e, _)| *e == j);
                    let counter = counters.iter().find(|(e, _)| *e == j);
                    match stacked.iter().position(|x| *x == j) {
                        Some(p) => slice(&stacks[p], &shapes[j]),
                        // `init + t·c`.
                        None if counter.is_some() => {
                            let step = counter.map_or(0, |(_, c)| *c);
                            let g = bb.g.borrow();
                            let ins = &g.comp(body).instrs[step as usize];
                            let (kind, shape) = (ins.kind.clone(), g.shapes.get(ins.shape).clone());
                            drop(g);
                            let c = bb.emit(kind, &[], Some(shape), loc);
                            local(bb, &init[j]).reshape(&dims).binary(
                                crate::BinaryOp::Add,
                                &t.binary(crate::BinaryOp::Multiply, &c, loc),
                                loc,
                            )
                        }
                        // The stored value of the step before (row `t - 1`,
                        // clamped at 0), or the initial value at step 0.
                        None if shift.is_some() => {
                            let q = shift.map_or(0, |(_, q)| *q);
                            let zero = s32(bb, 0);
                            let prev = t
                                .binary_scalar(
                                    crate::BinaryOp::Subtract,
                                    crate::Scalar::Int(1),
                                    false,
                                    loc,
                                )
                                .binary(crate::BinaryOp::Maximum, &zero, loc);
                            let row = slice_at(&stacks[stacked.len() + q], &shapes[j], &prev);
                            let first = t.compare(&zero, crate::Comparison::Eq);
                            bb.select(&first, &local(bb, &init[j]).reshape(&dims), &row)
                        }
                        // A value of its own for each element, so that two elements
                        // holding the same outside value get separate cotangents.
                        None => {
                            let src = if invariant[j] {
                                &init[j]
                            } else {
                                &n.results[j]
                            };
                            local(bb, src).reshape(&dims)
                        }
                    }
                })
                .collect();
            for (j, t) in &transposed {
                let twin = local(bb, t);
                if !twin.is_poisoned() && !c_t[*j].is_poisoned() {
                    bb.g.borrow_mut()
                        .transposed
                        .insert((bb.comp, c_t[*j].v), twin.v);
                }
            }
            let (back, captured, vals) = if store {
                // The step's values, read back from the stacks.
                let mut vals: HashMap<(u32, u32), Op> = stored
                    .iter()
                    .enumerate()
                    .map(|(p, (ins, r, shape))| {
                        ((*ins, *r), slice(&stacks[stacked.len() + p], shape))
                    })
                    .collect();
                for (ins, j) in &unstored {
                    vals.insert((*ins, 0), c_t[*j].clone());
                }
                if partial {
                    // The others, computed again from those and the carry.
                    recompute(bb, body, &c_t, &mut vals, loc);
                }
                let (back, captured) =
                    backprop_stored(bb, body, &c_t, &vals, &float, ct, &defer_edges, loc);
                (back, captured, vals)
            } else {
                let outs = inline(bb, body, &c_t);
                let outs_f: Vec<&Op> = float.iter().map(|j| &outs[*j]).collect();
                let wrt_f: Vec<&Op> = float.iter().map(|j| &c_t[*j]).collect();
                let ct_refs: Vec<&Op> = ct.iter().collect();
                (
                    bb.vjp(&outs_f, &ct_refs, &wrt_f),
                    HashMap::new(),
                    HashMap::new(),
                )
            };
            // A stacked output's cotangent stays the final one: each step reads
            // its own row of it, which no later step's write has touched (see
            // `rows_once`); zeroing the row after reading it would make the
            // plugin copy the whole stack every step.
            let back: Vec<Op> = back
                .into_iter()
                .zip(ct)
                .zip(&float)
                .map(|((bk, c), j)| if once[*j] { c.clone() } else { bk })
                .collect();
            // Row `t` of each deferred dot's result cotangents.
            let rows: Vec<Op> = deferred
                .iter()
                .zip(ct_rows)
                .map(|(d, buf)| {
                    let row = d
                        .result_ct(&captured, bb, loc)
                        .reshape(&with_step_axis(&d.out));
                    let starts = at_step(&t, d.out.rank());
                    let refs: Vec<&Op> = starts.iter().collect();
                    write_block(buf, &row, &refs)
                })
                .chain(
                    row_reads
                        .iter()
                        .zip(&ct_rows[deferred.len()..])
                        .map(|(r, buf)| {
                            // The step's rows, at the step's own start indices.
                            let starts: Vec<Op> = r
                                .starts
                                .iter()
                                .map(|v| match v {
                                    Start::Element(e) => c_t[*e].clone(),
                                    Start::Value(v) => vals
                                        .get(&(v.instr, v.result))
                                        .cloned()
                                        .unwrap_or_else(|| lost(bb)),
                                    Start::Constant(kind, shape) => {
                                        bb.emit(kind.clone(), &[], Some(shape.clone()), loc)
                                    }
                                })
                                .collect();
                            // (No cotangent reached the read: nothing to write.)
                            let Some(row) = captured.get(&r.slice) else {
                                return buf.clone();
                            };
                            let refs: Vec<&Op> = starts.iter().collect();
                            write_block(buf, row, &refs)
                        }),
                )
                .collect();
            (back, rows, captured)
        };
        // Each iteration runs `chunk` steps, from the last; the chunked dots'
        // cotangents for their weights are then one product over the steps' rows.
        let iterations = trips / chunk;
        let (bwd_i, ct_in, ct_stacks) = b.while_loop(
            (s32(b, 0), ct0, ct_stacks0),
            |(s, _, _)| {
                let bb = s.builder();
                let n = if chunk > 1 {
                    s32(&bb, iterations)
                } else {
                    local(&bb, &count)
                };
                s.compare(&n, crate::Comparison::Lt)
            },
            |(s, ct, ct_rows)| {
                let bb = s.builder();
                let last = local(&bb, &count).binary_scalar(
                    crate::BinaryOp::Subtract,
                    crate::Scalar::Int(1),
                    false,
                    loc,
                );
                if chunk <= 1 {
                    let t = last.binary(crate::BinaryOp::Subtract, &s, loc);
                    let (back, rows, _) = step(&bb, &t, &ct, &ct_rows);
                    return (plus_one(s), back, rows);
                }
                // Steps `hi`, `hi - 1`, …, `lo`.
                let hi = last.binary(
                    crate::BinaryOp::Subtract,
                    &s.binary_scalar(
                        crate::BinaryOp::Multiply,
                        crate::Scalar::Int(chunk),
                        false,
                        loc,
                    ),
                    loc,
                );
                let (mut ct, mut ct_rows) = (ct, ct_rows);
                let mut caught: Vec<Vec<Op>> = vec![Vec::new(); chunked.len()];
                for j in 0..chunk {
                    let t = hi.binary_scalar(
                        crate::BinaryOp::Subtract,
                        crate::Scalar::Int(j),
                        false,
                        loc,
                    );
                    let (back, rows, captured) = step(&bb, &t, &ct, &ct_rows);
                    for (d, c) in chunked.iter().zip(&mut caught) {
                        c.push(d.result_ct(&captured, &bb, loc));
                    }
                    (ct, ct_rows) = (back, rows);
                }
                let lo = hi.binary_scalar(
                    crate::BinaryOp::Subtract,
                    crate::Scalar::Int(chunk - 1),
                    false,
                    loc,
                );
                for (d, c) in chunked.iter().zip(caught) {
                    // The steps' result cotangents in step order, `lo` first.
                    let rows: Vec<Op> = c
                        .iter()
                        .rev()
                        .map(|r| r.reshape(&with_step_axis(&d.out)))
                        .collect();
                    let refs: Vec<&Op> = rows.iter().collect();
                    let ct_block = bb.concatenate(&refs, 0);
                    let other = chunk_rows(&bb, &d.other, &lo);
                    let Some(sum) = d.weight_ct(&shapes[d.element], &other, &ct_block) else {
                        continue;
                    };
                    if let Some(p) = float.iter().position(|j| *j == d.element) {
                        ct[p] = ct[p].binary(crate::BinaryOp::Add, &sum, loc);
                    }
                }
                (plus_one(s), ct, ct_rows)
            },
        );
        // The backward loop has a trip count or bound too: the gradient is
        // differentiable again.
        if bounded {
            b.record_bound(&bwd_i, trips)
        } else {
            b.record_trip_count(&bwd_i, iterations)
        }
        let mut out = vec![None; k];
        for (c, j) in ct_in.into_iter().zip(&float) {
            // A constant's cotangent goes nowhere (and this one was not zeroed).
            if !once[*j] {
                out[*j] = Some(c);
            }
        }
        // Each row read's cotangents, written row by row: the element's cotangent
        // from those reads.
        for (r, rows) in row_reads.iter().zip(&ct_stacks[deferred.len()..]) {
            out[r.element] = Some(match out[r.element].take() {
                Some(c) => c.binary(crate::BinaryOp::Add, rows, loc),
                None => rows.clone(),
            });
        }
        (out, ct_stacks)
    };

    // Each deferred dot's contribution to its invariant operand: the sum over the
    // steps, as one product of the other operand's stacked rows (from the forward
    // loop's stacks) with the stacked result cotangents.
    for (d, ct_stack) in deferred.iter().zip(&ct_stacks) {
        let other = match d.other {
            Rows::Carry(p) => &stacks[p],
            Rows::Stored(p) => &stacks[stacked.len() + p],
            // Not deferred after the loop (only chunked, see `chunked`).
            Rows::Shifted { .. } => continue,
        };
        let Some(sum) = d.weight_ct(&shapes[d.element], other, ct_stack) else {
            continue;
        };
        out[d.element] = Some(match out[d.element].take() {
            Some(c) => c.binary(crate::BinaryOp::Add, &sum, loc),
            None => sum,
        });
    }
    Ok(out)
}

/// What one backward step of a loop reads (see `while_cts`): the loop's body and
/// carry, what the forward loop stacks, and which cotangents flow where.
struct BackwardStep<'a> {
    /// The loop's body.
    body: CompId,
    /// The number of carry elements.
    k: usize,
    /// The carry entering the loop.
    init: &'a [Op],
    /// The loop's results.
    results: &'a [Op],
    /// The carry elements' shapes.
    shapes: &'a [Shape],
    /// Which elements the body passes through unchanged.
    invariant: &'a [bool],
    /// The elements stacked per step, in the order of the forward loop's stacks.
    stacked: &'a [usize],
    /// The body values stacked per step, after the stacked elements.
    stored: &'a [(u32, u32, Shape)],
    /// The stacked outputs' new values (read as the loop's final stack).
    unstored: &'a [(u32, usize)],
    /// Whether the values not stored are computed again.
    partial: bool,
    /// The float elements that get cotangents.
    float: &'a [usize],
    /// Which elements are stacked outputs whose cotangent passes through.
    once: &'a [bool],
    /// The edges whose cotangent the step returns instead of sending on.
    defer_edges: &'a std::collections::HashSet<(u32, usize)>,
    /// The dots whose invariant operand's cotangent is one product after.
    deferred: &'a [DeferredDot],
    /// The rows the steps read of invariant elements.
    row_reads: &'a [RowRead],
}

/// The backward steps of a loop whose steps no float cotangent chains, batched
/// over the steps: one `vmap` of the backward step over the forward loop's
/// `stacks` (row `t` of each is step `t`'s value). Each invariant float element's
/// cotangent is its final one (`ct0`) plus the sum over the steps of what each
/// step sends it; each deferred dot's result cotangents come out stacked, one row
/// per step, as the backward loop would have written them. Returns the elements'
/// cotangents (none yet from the deferred dots) and those stacks.
fn batched_backward(
    s: &BackwardStep<'_>,
    b: &Builder,
    stacks: &[Op],
    ct0: &[Op],
    loc: &'static Location<'static>,
) -> (Vec<Option<Op>>, Vec<Op>) {
    use crate::autodiff::{local, zeros_like};
    let n_st = s.stacked.len();
    let rows = b
        .on(loc)
        .vmap(&crate::Vmap::new(), stacks.to_vec(), |bb, rows| {
            let c_t: Vec<Op> = (0..s.k)
                .map(|j| match s.stacked.iter().position(|x| *x == j) {
                    Some(p) => rows[p].clone(),
                    None => {
                        let src = if s.invariant[j] {
                            &s.init[j]
                        } else {
                            &s.results[j]
                        };
                        local(bb, src).reshape(s.shapes[j].dims())
                    }
                })
                .collect();
            let mut vals: HashMap<(u32, u32), Op> = s
                .stored
                .iter()
                .enumerate()
                .map(|(p, (ins, r, _))| ((*ins, *r), rows[n_st + p].clone()))
                .collect();
            for (ins, j) in s.unstored {
                vals.insert((*ins, 0), c_t[*j].clone());
            }
            if s.partial {
                recompute(bb, s.body, &c_t, &mut vals, loc);
            }
            // The stacked outputs' final cotangent, the same for every step; an
            // invariant element's own cotangent only passes through a step, so each
            // step gets none for it and returns what it adds.
            let ct: Vec<Op> = s
                .float
                .iter()
                .zip(ct0)
                .map(|(j, c)| {
                    if s.once[*j] {
                        local(bb, c)
                    } else {
                        zeros_like(&c_t[*j], loc)
                    }
                })
                .collect();
            let (back, captured) =
                backprop_stored(bb, s.body, &c_t, &vals, s.float, &ct, s.defer_edges, loc);
            let mut outs: Vec<Op> = s
                .float
                .iter()
                .zip(back)
                .filter(|(j, _)| !s.once[**j])
                .map(|(_, bk)| bk)
                .collect();
            outs.extend(s.deferred.iter().map(|d| d.result_ct(&captured, bb, loc)));
            // Each row read's row cotangent (zeros where none reached it) and the
            // row's index along the element's first axis.
            for r in s.row_reads {
                let row = captured.get(&r.slice).cloned().unwrap_or_else(|| {
                    let mut dims = s.shapes[r.element].dims().to_vec();
                    dims[0] = 1;
                    bb.scalar_of(
                        s.shapes[r.element].element_type().expect("array"),
                        crate::Scalar::Int(0),
                        loc,
                    )
                    .broadcast_to(&dims)
                });
                let first = match &r.starts[0] {
                    Start::Element(e) => c_t[*e].clone(),
                    Start::Value(v) => {
                        vals.get(&(v.instr, v.result)).cloned().unwrap_or_else(|| {
                            bb.fail(
                                ShapeError::new(
                                    "while",
                                    &[],
                                    ShapeErrorKind::Body,
                                    "the gradient lost a start index of a row the loop reads",
                                ),
                                loc,
                            )
                        })
                    }
                    Start::Constant(kind, shape) => {
                        bb.emit(kind.clone(), &[], Some(shape.clone()), loc)
                    }
                };
                outs.push(row);
                outs.push(first);
            }
            outs
        });
    let mut rows = rows.into_iter();
    let mut out = vec![None; s.k];
    for (j, c) in s.float.iter().zip(ct0) {
        // A stacked output's cotangent goes nowhere (its initial value is a
        // constant).
        if s.once[*j] {
            continue;
        }
        let Some(per_step) = rows.next() else { break };
        let sum = per_step.on(loc).reduce_sum(&[0]);
        out[*j] = Some(c.binary(crate::BinaryOp::Add, &sum, loc));
    }
    let ct_stacks: Vec<Op> = rows.by_ref().take(s.deferred.len()).collect();
    // The rows read, added into the element's cotangent at their (clamped, as
    // the dynamic-slice clamps) indices: one scatter-add over the steps.
    for r in s.row_reads {
        let (Some(row), Some(first)) = (rows.next(), rows.next()) else {
            break;
        };
        let dims = s.shapes[r.element].dims();
        let trips = row.dims().map(|d| d[0]).unwrap_or(0);
        let idx = first
            .clamp(
                &first.full_like(0.0),
                &first.full_like((dims[0] - 1) as f64),
            )
            .reshape(&[trips, 1]);
        let update: Vec<i64> = std::iter::once(trips)
            .chain(dims[1..].iter().copied())
            .collect();
        let row = row.reshape(&update);
        let sd = crate::ops::indexing::ScatterDims {
            update_window_dims: (1..dims.len() as i64).collect(),
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            input_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
        };
        let zeros = zeros_like(&s.init[r.element], loc);
        let ct = b
            .on(loc)
            .scatter(&[&zeros], &idx, &[&row], &sd, false, false, |old, new| {
                vec![old[0].binary(crate::BinaryOp::Add, &new[0], loc)]
            });
        let ct = ct.into_iter().next().expect("one input");
        out[r.element] = Some(match out[r.element].take() {
            Some(c) => c.binary(crate::BinaryOp::Add, &ct, loc),
            None => ct,
        });
    }
    (out, ct_stacks)
}

/// A start index of a row read ([`RowRead`]) as the backward step gets it.
#[derive(Clone, Debug)]
enum Start {
    /// The carry element entering the step (the counter).
    Element(usize),
    /// A value of the body, stored or recomputed.
    Value(Value),
    /// A constant, made again.
    Constant(OpKind, Shape),
}

/// A dynamic-slice in a loop body that reads one row per step of a loop-invariant
/// float carry element at the counter: each step reads a row no other step reads.
#[derive(Clone, Debug)]
struct RowRead {
    /// The slice's instruction in the body.
    slice: u32,
    /// The carry element it reads.
    element: usize,
    /// Its start indices.
    starts: Vec<Start>,
}

/// The row reads of a loop body (see [`RowRead`]): dynamic-slices of a float
/// (`float`), loop-invariant carry element, one row along the first axis (the
/// whole of the others), whose first start is the loop's counter (an element the
/// body increments by a constant, `c + counter`, or `c - counter` negated, as a
/// reversed scan reads), the rest constants; every start the backward step can
/// get (`available`: stored or recomputed).
fn sliced_rows(
    b: &Builder,
    body: CompId,
    invariant: &[bool],
    float: &[usize],
    available: impl Fn(Value) -> bool,
) -> Vec<RowRead> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let (Some(Some(param)), Some(root)) = (c.params.first().copied(), c.root) else {
        return Vec::new();
    };
    let ins = |v: Value| &c.instrs[v.instr as usize];
    let element = |v: Value| match ins(v).kind {
        OpKind::GetTupleElement { index } if ins(v).operands[0].instr == param => {
            Some(index as usize)
        }
        _ => None,
    };
    let constant = |v: Value| matches!(ins(v).kind, OpKind::Constant(_));
    let root_ops = &ins(root).operands;
    // An element the body steps by a constant.
    let counter = |v: Value| -> bool {
        let Some(e) = element(v) else { return false };
        let Some(r) = root_ops.get(e) else {
            return false;
        };
        let r = ins(*r);
        matches!(r.kind, OpKind::Binary(crate::BinaryOp::Add))
            && ((element(r.operands[0]) == Some(e) && constant(r.operands[1]))
                || (element(r.operands[1]) == Some(e) && constant(r.operands[0])))
    };
    let counted = |v: Value| -> bool {
        counter(v)
            || match ins(v).kind {
                OpKind::Binary(crate::BinaryOp::Add) => {
                    let o = &ins(v).operands;
                    (counter(o[0]) && constant(o[1])) || (counter(o[1]) && constant(o[0]))
                }
                OpKind::Unary(crate::UnaryOp::Negate) => {
                    let sub = ins(ins(v).operands[0]);
                    matches!(sub.kind, OpKind::Binary(crate::BinaryOp::Subtract))
                        && counter(sub.operands[0])
                        && constant(sub.operands[1])
                }
                _ => false,
            }
    };
    let mut out = Vec::new();
    for (i, s) in c.instrs.iter().enumerate() {
        let OpKind::DynamicSlice { sizes } = &s.kind else {
            continue;
        };
        let Some(j) = element(s.operands[0]) else {
            continue;
        };
        if !invariant.get(j).copied().unwrap_or(false) || !float.contains(&j) {
            continue;
        }
        let whole = g.shapes.get(ins(s.operands[0]).shape).dims().to_vec();
        let one_row = sizes.first() == Some(&1) && sizes[1..] == whole[1..];
        let Some((first, rest)) = s.operands[1..].split_first() else {
            continue;
        };
        if !one_row || !counted(*first) || !rest.iter().all(|v| constant(*v)) {
            continue;
        }
        let starts: Option<Vec<Start>> = s.operands[1..]
            .iter()
            .map(|v| {
                if let Some(e) = element(*v) {
                    Some(Start::Element(e))
                } else if constant(*v) {
                    Some(Start::Constant(
                        ins(*v).kind.clone(),
                        g.shapes.get(ins(*v).shape).clone(),
                    ))
                } else {
                    available(*v).then_some(Start::Value(*v))
                }
            })
            .collect();
        if let Some(starts) = starts {
            out.push(RowRead {
                slice: i as u32,
                element: j,
                starts,
            });
        }
    }
    out
}

/// Where the rows of a deferred dot's other operand come from: the forward loop's
/// stack of a carry element, or of a stored body value.
#[derive(Clone, Copy, Debug)]
enum Rows {
    /// Position in the stacked carry elements.
    Carry(usize),
    /// Position in the stored values.
    Stored(usize),
    /// A carry element that is not stacked because its new value is a stored
    /// value (see `shifted_elements`): its value entering step `t` is that stored
    /// value's row `t - 1`, the initial value at step 0.
    Shifted {
        /// The carry element.
        element: usize,
        /// Position of its new value in the stored values.
        stored: usize,
    },
}

/// A dot in a loop body one of whose operands is a loop-invariant float carry
/// element: its cotangent for that operand is summed over the steps after the loop.
#[derive(Clone, Debug)]
struct DeferredDot {
    /// The dot's instruction in the body.
    dot: u32,
    /// Which operand is the invariant one (0 lhs, 1 rhs).
    operand: usize,
    /// The carry element it reads.
    element: usize,
    /// The other operand's rows.
    other: Rows,
    /// The dot's attributes.
    attrs: crate::ops::linalg::DotAttrs,
    /// The dot's result shape (one row of the cotangent stack).
    out: Shape,
}

/// Steps per iteration of a recurrent loop's backward pass whose weight products
/// are chunked (see `while_cts`), a divisor of the step count (every iteration
/// runs whole chunks), at most `asked` where that is above 0
/// (`ScanOptions::backward_chunk`); by default enough steps for about 128 rows
/// of x in each weight product (the CPU backend's library products run such a
/// product faster per row than one of 32 rows, `benches/dot_layouts.rs`), at
/// most 4. 1 (no chunks) where the steps already have 128 rows or more, or the
/// count has no such divisor.
fn chunk_steps(trips: i64, rows: i64, asked: i64) -> i64 {
    if rows <= 0 || asked == 1 {
        return 1;
    }
    let most = if asked > 1 {
        asked
    } else {
        (128 / rows).clamp(1, 4)
    };
    (2..=most)
        .rev()
        .find(|c| trips % c == 0 && trips >= *c)
        .unwrap_or(1)
}

impl DeferredDot {
    /// The step's cotangent of the dot's result, as `captured` at the deferred
    /// edge (zeros where no cotangent reached the dot).
    fn result_ct(
        &self,
        captured: &HashMap<u32, Op>,
        bb: &Builder,
        loc: &'static Location<'static>,
    ) -> Op {
        captured.get(&self.dot).cloned().unwrap_or_else(|| {
            bb.scalar_of(
                self.out.element_type().expect("array"),
                crate::Scalar::Int(0),
                loc,
            )
            .broadcast_to(self.out.dims())
        })
    }

    /// The sum over steps of the invariant operand's cotangent (of shape `w`):
    /// one product of the other operand's rows with the result cotangents, both
    /// stacked along a leading step axis.
    fn weight_ct(&self, w: &Shape, other: &Op, ct_stack: &Op) -> Option<Op> {
        crate::ops::linalg::dot_operand_ct(
            &self.attrs,
            self.operand,
            other,
            ct_stack,
            w.element_type(),
            w.rank() as i64,
            true,
        )
    }
}

/// The stacked `s32` scalar carry elements that the body steps by a constant
/// (`e + c` or `c + e`, a loop's counter): per such element, the constant's
/// instruction in the body.
fn counter_elements(
    b: &Builder,
    body: CompId,
    stacked: &[usize],
    shapes: &[Shape],
) -> Vec<(usize, u32)> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let (Some(root), Some(Some(param))) = (c.root, c.params.first()) else {
        return Vec::new();
    };
    let ins = |v: Value| &c.instrs[v.instr as usize];
    if !matches!(ins(root).kind, OpKind::Tuple) {
        return Vec::new();
    }
    let element = |v: Value| match ins(v).kind {
        OpKind::GetTupleElement { index } if ins(v).operands[0].instr == *param => {
            Some(index as usize)
        }
        _ => None,
    };
    let scalar_s32 = Shape::of::<i32>(&[]);
    let constant = |v: Value| {
        matches!(ins(v).kind, OpKind::Constant(_))
            && v.result == 0
            && *g.shapes.get(ins(v).shape) == scalar_s32
    };
    stacked
        .iter()
        .filter(|j| shapes[**j] == scalar_s32)
        .filter_map(|j| {
            let r = ins(*ins(root).operands.get(*j)?);
            if !matches!(r.kind, OpKind::Binary(crate::BinaryOp::Add)) {
                return None;
            }
            let (x, y) = (r.operands[0], r.operands[1]);
            if element(x) == Some(*j) && constant(y) {
                Some((*j, y.instr))
            } else if element(y) == Some(*j) && constant(x) {
                Some((*j, x.instr))
            } else {
                None
            }
        })
        .collect()
}

/// The values a loop body gives as its new carry: the elements of its root
/// tuple (`None` for a body whose root is not a tuple).
fn carry_results(c: &crate::ir::Comp) -> Option<&[Value]> {
    let root = c.root?;
    let ins = &c.instrs[root.instr as usize];
    matches!(ins.kind, OpKind::Tuple).then_some(&ins.operands[..])
}

/// The stacked float carry elements whose new value (the body's result for them)
/// is one of the `stored` body values, of the element's shape: per such element,
/// its position in `stored`. The carry entering step `t > 0` is then that value
/// at step `t - 1`, read from its stack.
fn shifted_elements(
    b: &Builder,
    body: CompId,
    stacked: &[usize],
    stored: &[(u32, u32, Shape)],
    shapes: &[Shape],
) -> Vec<(usize, usize)> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let Some(new_carry) = carry_results(c) else {
        return Vec::new();
    };
    stacked
        .iter()
        .filter(|j| {
            shapes[**j]
                .element_type()
                .is_some_and(crate::autodiff::differentiable)
        })
        .filter_map(|j| {
            let r = new_carry.get(*j)?;
            let q = stored
                .iter()
                .position(|(i, res, s)| (*i, *res) == (r.instr, r.result) && *s == shapes[*j])?;
            Some((*j, q))
        })
        .collect()
}

/// The dots of a flat loop body that read a loop-invariant float carry element
/// directly as one operand, and whose other operand has a row per step in the
/// forward loop's stacks (a stacked carry element or a stored value).
fn deferrable_dots(
    b: &Builder,
    body: CompId,
    invariant: &[bool],
    shapes: &[Shape],
    stacked: &[usize],
    stored: &[(u32, u32, Shape)],
    shifted: &[(usize, usize)],
) -> Vec<DeferredDot> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let Some(Some(param)) = c.params.first().copied() else {
        return Vec::new();
    };
    let element_of = |v: Value| carry_element(c, param, v);
    let float = |j: usize| {
        shapes[j]
            .element_type()
            .is_some_and(crate::autodiff::differentiable)
    };
    let mut out = Vec::new();
    for (i, ins) in c.instrs.iter().enumerate() {
        let OpKind::Dot(attrs) = &ins.kind else {
            continue;
        };
        for operand in 0..2 {
            let Some(j) = element_of(ins.operands[operand]) else {
                continue;
            };
            if !invariant[j] || !float(j) {
                continue;
            }
            let o = ins.operands[1 - operand];
            let other = match element_of(o) {
                Some(m) => match stacked.iter().position(|x| *x == m) {
                    Some(p) => Rows::Carry(p),
                    None => match shifted.iter().find(|(e, _)| *e == m) {
                        Some((_, q)) => Rows::Shifted {
                            element: m,
                            stored: *q,
                        },
                        None => continue,
                    },
                },
                None => match stored
                    .iter()
                    .position(|(si, sr, _)| *si == o.instr && *sr == o.result)
                {
                    Some(p) => Rows::Stored(p),
                    None => continue,
                },
            };
            out.push(DeferredDot {
                dot: i as u32,
                operand,
                element: j,
                other,
                attrs: (**attrs).clone(),
                out: g.shapes.get(ins.shape).clone(),
            });
            break;
        }
    }
    out
}

/// The carry element `v` reads in the loop body `c` whose carry parameter is
/// instruction `param`, if `v` is a get-tuple-element of the carry.
fn carry_element(c: &crate::ir::Comp, param: u32, v: Value) -> Option<usize> {
    if v.result != 0 {
        return None;
    }
    let ins = c.instrs.get(v.instr as usize)?;
    match ins.kind {
        OpKind::GetTupleElement { index } if ins.operands[0].instr == param => Some(index as usize),
        _ => None,
    }
}

/// The carry elements that are matrices the loop does not change and that a
/// product of the body multiplies from the right, contracting their first axis
/// (`x · W`, no batch axes): `x`'s cotangent is `ct · Wᵀ`, which the backward
/// step computes with `W`'s transpose computed once (see `Graph::transposed`).
fn transposed_weights(
    b: &Builder,
    body: CompId,
    invariant: &[bool],
    shapes: &[Shape],
) -> Vec<usize> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let Some(Some(param)) = c.params.first().copied() else {
        return Vec::new();
    };
    let mut out: Vec<usize> = Vec::new();
    for ins in &c.instrs {
        let OpKind::Dot(attrs) = &ins.kind else {
            continue;
        };
        let d = &attrs.dims;
        if d.rhs_contracting != [0] || !d.rhs_batch.is_empty() {
            continue;
        }
        let Some(j) = carry_element(c, param, ins.operands[1]) else {
            continue;
        };
        if invariant.get(j) == Some(&true)
            && shapes[j].rank() == 2
            && shapes[j]
                .element_type()
                .is_some_and(crate::autodiff::differentiable)
            && !out.contains(&j)
        {
            out.push(j);
        }
    }
    out
}

/// The dynamic-update-slices that give the new value of a write-only carry element
/// (see [`carry_roles`]) and that nothing but the body's result reads: per such
/// instruction, the element.
fn written_stacks(b: &Builder, body: CompId, write_only: &[bool]) -> Vec<(u32, usize)> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let Some(new_carry) = carry_results(c) else {
        return Vec::new();
    };
    let mut uses = vec![0usize; c.instrs.len()];
    for ins in &c.instrs {
        for v in &ins.operands {
            uses[v.instr as usize] += 1;
        }
    }
    new_carry
        .iter()
        .enumerate()
        .filter(|(j, r)| {
            write_only.get(*j).copied().unwrap_or(false)
                && r.result == 0
                && matches!(c.instrs[r.instr as usize].kind, OpKind::DynamicUpdateSlice)
                && uses[r.instr as usize] == 1
        })
        .map(|(j, r)| (r.instr, j))
        .collect()
}

/// Per element of a loop's carry: whether it may depend on a value differentiated
/// against, given which elements do when the loop starts (`entering`): those, and
/// every element the body computes from one that does, until nothing changes.
fn loop_active(b: &Builder, body: CompId, entering: &[bool]) -> Vec<bool> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let mut on = entering.to_vec();
    let (Some(Some(param)), Some(root)) = (c.params.first().copied(), c.root) else {
        return vec![true; entering.len()];
    };
    let root_ins = &c.instrs[root.instr as usize];
    if !matches!(root_ins.kind, OpKind::Tuple) {
        return vec![true; entering.len()];
    }
    loop {
        let mut active = vec![false; c.instrs.len()];
        for (i, ins) in c.instrs.iter().enumerate() {
            active[i] = match ins.kind {
                OpKind::GetTupleElement { index } if ins.operands[0].instr == param => {
                    on.get(index as usize).copied().unwrap_or(true)
                }
                // (A parameter read any other way, or a nested computation's
                // captures: counted as active.)
                OpKind::Parameter { .. } => true,
                _ => ins.operands.iter().any(|v| active[v.instr as usize]),
            };
        }
        let mut changed = false;
        for (j, v) in root_ins.operands.iter().enumerate() {
            if j < on.len() && !on[j] && active[v.instr as usize] {
                on[j] = true;
                changed = true;
            }
        }
        if !changed {
            return on;
        }
    }
}

/// Per instruction of a flat loop body: whether the backward pass of one step
/// reads its values, so that they are worth storing. The backward pass walks the
/// instructions that depend on a float element of the carry (`shapes`) and lead to
/// one of the body's float results (as `backprop_deferring` does), and reads their
/// operands and results; the rest (dead values, the index arithmetic of other
/// results) it never reads.
fn read_backward(b: &Builder, body: CompId, shapes: &[Shape]) -> Vec<bool> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let n = c.instrs.len();
    let (Some(Some(param)), Some(root)) = (c.params.first().copied(), c.root) else {
        return vec![true; n];
    };
    let float = |j: usize| {
        shapes
            .get(j)
            .and_then(|s| s.element_type())
            .is_some_and(crate::autodiff::differentiable)
    };
    let stopped = |i: usize| g.stopped.contains(&(body, Value::of(i as u32)));
    let mut active = vec![false; n];
    for (i, ins) in c.instrs.iter().enumerate() {
        active[i] = match ins.kind {
            OpKind::GetTupleElement { index } if ins.operands[0].instr == param => {
                float(index as usize)
            }
            _ => ins.operands.iter().any(|v| active[v.instr as usize]),
        } && !stopped(i);
    }
    let mut needed = vec![false; n];
    let root_ins = &c.instrs[root.instr as usize];
    if matches!(root_ins.kind, OpKind::Tuple) {
        for (j, v) in root_ins.operands.iter().enumerate() {
            if float(j) {
                needed[v.instr as usize] = true;
            }
        }
    } else {
        needed[root.instr as usize] = true;
    }
    let mut read = vec![false; n];
    for i in (0..n).rev() {
        if needed[i] && active[i] && i != root.instr as usize {
            read[i] = true;
            for v in &c.instrs[i].operands {
                needed[v.instr as usize] = true;
                read[v.instr as usize] = true;
            }
        }
    }
    read
}

/// Per instruction of a loop body: whether `policy` stores its values (a
/// partial policy: `Dots`, `DotsWithNoBatchDims`, `Names`).
fn saveable(b: &Builder, body: CompId, policy: &CheckpointPolicy) -> Vec<bool> {
    let g = b.g.borrow();
    let c = g.comp(body);
    c.instrs
        .iter()
        .enumerate()
        .map(|(i, ins)| match policy {
            CheckpointPolicy::Everything => true,
            CheckpointPolicy::Nothing => false,
            CheckpointPolicy::Dots => {
                matches!(ins.kind, OpKind::Dot(_) | OpKind::Convolution(_))
            }
            CheckpointPolicy::DotsWithNoBatchDims => match &ins.kind {
                OpKind::Dot(a) => a.dims.lhs_batch.is_empty() && a.dims.rhs_batch.is_empty(),
                _ => false,
            },
            CheckpointPolicy::Names(names) => g
                .checkpoint_names
                .get(&(body, Value::of(i as u32)))
                .is_some_and(|n| names.contains(n)),
        })
        .collect()
}

/// Computes again, in `bb`'s computation, every value of the flat loop body `body`
/// that `vals` lacks, in order: from the step's carry (`carry`, for the elements of
/// its tuple parameter) and the values in `vals` (stored ones), which it extends.
fn recompute(
    bb: &Builder,
    body: CompId,
    carry: &[Op],
    vals: &mut HashMap<(u32, u32), Op>,
    loc: &'static Location<'static>,
) {
    type Copied = (OpKind, Vec<Value>, Shape, usize);
    let (instrs, param, root): (Vec<Copied>, u32, u32) = {
        let g = bb.g.borrow();
        let c = g.comp(body);
        let instrs = c
            .instrs
            .iter()
            .map(|i| {
                let shape = g.shapes.get(i.shape).clone();
                let n = match (&shape, i.kind.multi_result(i.operands.len())) {
                    (Shape::Tuple(e), true) => e.len(),
                    _ => 1,
                };
                (i.kind.clone(), i.operands.to_vec(), shape, n)
            })
            .collect();
        let (Some(Some(param)), Some(root)) = (c.params.first().copied(), c.root) else {
            return;
        };
        (instrs, param, root.instr)
    };
    for (i, (kind, operands, shape, results)) in instrs.into_iter().enumerate() {
        let i = i as u32;
        if i == param || i == root || vals.contains_key(&(i, 0)) {
            continue;
        }
        let out = match kind {
            OpKind::GetTupleElement { index } if operands[0].instr == param => {
                carry[index as usize].clone()
            }
            _ => {
                let ops: Option<Vec<Op>> = operands
                    .iter()
                    .map(|v| vals.get(&(v.instr, v.result)).cloned())
                    .collect();
                // (A flat body's operands come first; a gap leaves the value to the
                // tape's fallback, as before.)
                let Some(ops) = ops else { continue };
                let refs: Vec<&Op> = ops.iter().collect();
                bb.emit(kind, &refs, Some(shape), loc)
            }
        };
        for r in 0..results as u32 {
            let v = if r == 0 {
                out.clone()
            } else {
                bb.op(
                    out.comp,
                    Value {
                        instr: out.v.instr,
                        result: r,
                    },
                )
            };
            vals.insert((i, r), v);
        }
    }
}

/// The values of a loop body worth storing per step for the backward pass: every
/// array result of its instructions but the carry's elements, constants and iotas
/// (cheaper to make again). `None` when the body is not flat (it holds loops,
/// branches, calls or tuples, whose gradients need their structure).
fn stored_values(b: &Builder, body: CompId) -> Option<Vec<(u32, u32, Shape)>> {
    let g = b.g.borrow();
    let c = g.comp(body);
    let param = (*c.params.first()?)?;
    let root = c.root?;
    let mut out = Vec::new();
    for (i, ins) in c.instrs.iter().enumerate() {
        let i = i as u32;
        let shape = g.shapes.get(ins.shape);
        match &ins.kind {
            OpKind::Parameter { .. } if i == param => continue,
            OpKind::GetTupleElement { .. } if ins.operands[0].instr == param => continue,
            OpKind::Tuple if i == root.instr => continue,
            OpKind::Constant(_) | OpKind::Iota { .. } => continue,
            OpKind::While { .. }
            | OpKind::Conditional { .. }
            | OpKind::Call { .. }
            | OpKind::Tuple
            | OpKind::GetTupleElement { .. }
            | OpKind::Parameter { .. } => return None,
            k if k.multi_result(ins.operands.len()) => match shape {
                Shape::Tuple(e) => {
                    for (r, s) in e.iter().enumerate() {
                        out.push((i, r as u32, s.clone()));
                    }
                }
                _ => return None,
            },
            _ => match shape {
                Shape::Array { .. } => out.push((i, 0, shape.clone())),
                _ => return None,
            },
        }
    }
    Some(out)
}

/// One step of a loop body, pulled back over its stored values (no
/// recomputation): the carry entering the step is `carry`, the other values are
/// `vals` (constants and iotas are made again). Returns the cotangents of the
/// carry's float elements (`float`), given those of the step's results (`ct`).
#[allow(clippy::too_many_arguments)]
fn backprop_stored(
    bb: &Builder,
    body: CompId,
    carry: &[Op],
    vals: &HashMap<(u32, u32), Op>,
    float: &[usize],
    ct: &[Op],
    deferred: &std::collections::HashSet<(u32, usize)>,
    loc: &'static Location<'static>,
) -> (Vec<Op>, HashMap<u32, Op>) {
    use crate::autodiff::{Tape, backprop_deferring, zeros_like};
    let tape = Tape::of_comp(bb, body, usize::MAX);
    let (param, root) = {
        let g = bb.g.borrow();
        let c = g.comp(body);
        (c.params[0].expect("a body"), c.root.expect("finished"))
    };
    // The values the tape reads: the carry for the parameter's elements, remade
    // constants, stored values for the rest.
    let mut table: HashMap<(u32, u32), Op> = vals.clone();
    let mut elements: Vec<Vec<Value>> = vec![Vec::new(); carry.len()];
    for (i, kind) in tape.kinds.iter().enumerate() {
        let i32_ = i as u32;
        match kind {
            OpKind::GetTupleElement { index } if tape.operands[i][0].instr == param => {
                table.insert((i32_, 0), carry[*index as usize].clone());
                elements[*index as usize].push(Value::of(i32_));
            }
            OpKind::Constant(_) | OpKind::Iota { .. } => {
                let shape = bb.g.borrow().comp(body).instrs[i].shape;
                let shape = bb.g.borrow().shapes.get(shape).clone();
                table.insert((i32_, 0), bb.emit(kind.clone(), &[], Some(shape), loc));
            }
            _ => {}
        }
    }
    let root_elems: Vec<Value> = tape.operands[root.instr as usize].clone();
    let fallback = zeros_like(&carry[0], loc);
    let tape = Tape {
        value: Box::new(move |v: Value| {
            table
                .get(&(v.instr, v.result))
                .cloned()
                .unwrap_or_else(|| fallback.clone())
        }),
        ..tape
    };
    let seeds: Vec<(Value, Op)> = float
        .iter()
        .zip(ct)
        .map(|(j, c)| (root_elems[*j], c.clone()))
        .collect();
    let wrt: Vec<Value> = float.iter().flat_map(|j| elements[*j].clone()).collect();
    let (got, captured) = match backprop_deferring(bb, &tape, &seeds, &wrt, deferred, loc) {
        Ok(g) => g,
        Err(f) => return (vec![f; float.len()], HashMap::new()),
    };
    // Each element's cotangent: the sum over the instructions that read it.
    let mut got = got.into_iter();
    let cts = float
        .iter()
        .map(|j| {
            let mut sum: Option<Op> = None;
            for _ in &elements[*j] {
                if let Some(g) = got.next().flatten() {
                    sum = Some(match sum {
                        Some(s) => s.binary(crate::BinaryOp::Add, &g, loc),
                        None => g,
                    });
                }
            }
            sum.unwrap_or_else(|| zeros_like(&carry[*j], loc))
        })
        .collect();
    (cts, captured)
}

/// The starting value of a stack with a row per step of a loop: left as allocated
/// where every step runs and writes its row before any row is read; zeros in a
/// bounded loop, whose steps that do not run leave their rows as they start, and
/// whose readers take them masked (the backward pass) or whole (a deferred
/// product).
fn stack_start(
    b: &Builder,
    ty: ElementType,
    dims: &[i64],
    bounded: bool,
    loc: &'static Location<'static>,
) -> Op {
    if bounded {
        b.scalar_of(ty, crate::Scalar::Int(0), loc)
            .broadcast_to(dims)
    } else {
        b.uninitialized(ty, dims, loc)
    }
}

/// The loop of [`vjp_while`]'s forward steps: the original loop's steps (its
/// condition when `bounded`, else `trips` steps), storing at each step `t` row `t`
/// of one stack per stored carry element (`stacked`, the carry entering the step)
/// and per body value (`stored`). Returns the number of steps taken, the final
/// carry (the original loop's results) and the stacks.
#[allow(clippy::too_many_arguments)]
fn storing_loop(
    b: &Builder,
    cond: CompId,
    body: CompId,
    bounded: bool,
    trips: i64,
    init: &[Op],
    stacked: &[usize],
    stored: &[(u32, u32, Shape)],
    shapes: &[Shape],
    loc: &'static Location<'static>,
) -> (Op, Vec<Op>, Vec<Op>) {
    use crate::autodiff::{inline, inline_values};
    let s32 = |b: &Builder, v: i64| b.scalar_of(ElementType::S32, crate::Scalar::Int(v), loc);
    let stacks0: Vec<Op> = stacked
        .iter()
        .map(|j| &shapes[*j])
        .chain(stored.iter().map(|(_, _, s)| s))
        .map(|s| {
            let dims: Vec<i64> = std::iter::once(trips)
                .chain(s.dims().iter().copied())
                .collect();
            stack_start(b, s.element_type().expect("array"), &dims, bounded, loc)
        })
        .collect();
    let (count, outs, stacks) = b.while_loop(
        (s32(b, 0), init.to_vec(), stacks0),
        |(i, c, _)| {
            if bounded {
                // The loop's own condition (its bound included) decides.
                inline(&i.builder(), cond, c).swap_remove(0)
            } else {
                i.compare(&s32(&i.builder(), trips), crate::Comparison::Lt)
            }
        },
        |(i, c, st)| {
            let bb = i.builder();
            let (c2, vals) = inline_values(&bb, body, &c);
            let rows = stacked
                .iter()
                .map(|j| c[*j].clone())
                .chain(stored.iter().map(|(ins, r, _)| vals(*ins, *r)));
            let st2: Vec<Op> = st
                .iter()
                .zip(rows)
                .map(|(buf, v)| {
                    let s = v.shape().expect("an array");
                    let row = v.reshape(
                        &std::iter::once(1)
                            .chain(s.dims().iter().copied())
                            .collect::<Vec<i64>>(),
                    );
                    let starts: Vec<Op> = std::iter::once(i.clone())
                        .chain(std::iter::repeat_n(s32(&bb, 0), s.rank()))
                        .collect();
                    let refs: Vec<&Op> = starts.iter().collect();
                    write_block(buf, &row, &refs)
                })
                .collect();
            let next = i.binary_scalar(crate::BinaryOp::Add, crate::Scalar::Int(1), false, loc);
            (next, c2, st2)
        },
    );
    // A trip count or bound of its own: the gradient is differentiable again.
    if bounded {
        b.record_bound(&count, trips)
    } else {
        b.record_trip_count(&count, trips)
    }
    (count, outs, stacks)
}

// ---------------------------------------------------------------------------------
// `conditional` (`cond`, `switch`)

/// Conditional rule (the instruction, XLA's): an index (`s32[]`; out of range means the last branch) or a
/// predicate (`pred[]`, with two branches: true first), then one operand per branch;
/// branch `i` maps operand `i` to the common result shape.
pub fn infer_conditional(
    operands: &[&Shape],
    branches: &[Option<(Vec<Shape>, Shape)>],
) -> Result<Shape, ShapeError> {
    const OP: &str = "conditional";
    let Some((sel, args)) = operands.split_first() else {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Arity,
            "needs a selector",
        ));
    };
    if branches.is_empty() || args.len() != branches.len() {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Arity,
            format!(
                "{} branches for {} branch operands",
                branches.len(),
                args.len()
            ),
        ));
    }
    let pred = Shape::scalar(ElementType::Pred);
    if !(**sel == Shape::scalar(ElementType::S32) || (**sel == pred && branches.len() == 2)) {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::ElementType,
            format!("the selector must be s32[] (or pred[] with two branches), got {sel}"),
        ));
    }
    let mut result: Option<&Shape> = None;
    for (i, (b, a)) in branches.iter().zip(args).enumerate() {
        let Some((p, r)) = b else {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Body,
                format!("branch {i} is not finished"),
            ));
        };
        if p.len() != 1 || &p[0] != *a {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Body,
                format!("branch {i} must take its operand {a}"),
            ));
        }
        if let Some(first) = result {
            if r != first {
                return Err(ShapeError::new(
                    OP,
                    operands,
                    ShapeErrorKind::Body,
                    format!("branch {i} gives {r}, branch 0 gives {first}"),
                ));
            }
        }
        result = Some(r);
    }
    Ok(result.expect("at least one branch").clone())
}

pub(crate) fn shape_conditional(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Conditional { branches } = kind else {
        return Err(super::table::not_for("conditional", kind));
    };
    let sigs: Vec<_> = branches.iter().map(|b| cx.signature(*b)).collect();
    infer_conditional(cx.operands, &sigs)
}

pub(crate) fn lower_conditional(
    kind: &OpKind,
    cx: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::Conditional { branches } = kind {
        p.called_computation_ids = branches.iter().map(|b| (cx.comp_id)(*b)).collect();
    }
}

pub(crate) fn raise_conditional(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Conditional {
        branches: cx.calls_any(p)?.into(),
    })
}

pub(crate) fn text_conditional(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Conditional { branches } = kind {
        let names: Vec<String> = branches
            .iter()
            .map(|b| format!("%{}", (cx.comp_name)(*b)))
            .collect();
        out.attr("branch_computations", format!("{{{}}}", names.join(", ")));
    }
}

impl Builder {
    /// XLA's conditional on a `pred[]`: `on_true(x)` if `pred` holds, else
    /// `on_false(x)`; both branches return trees of the same shapes. The branches
    /// may use outside values.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Comparison, Shape};
    /// let b = Builder::new("c");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let p = x.reduce_sum(&[0]).compare(&b.constant(0f32), Comparison::Gt);
    /// let y = b.cond(&p, x, |x| x.exp(), |x| -x);
    /// assert_eq!(y.dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn cond<T, R>(
        &self,
        pred: &Op,
        x: T,
        on_true: impl FnOnce(T) -> R,
        on_false: impl FnOnce(T) -> R,
    ) -> R
    where
        T: Tree<Op, With<Op> = T> + Clone,
        R: Tree<Op, With<Op> = R>,
    {
        self.switch(pred, x, Box::new(on_true), vec![Box::new(on_false)])
    }

    /// JAX's `lax.switch`: branch `index` (`s32[]`, clamped into range as JAX does:
    /// a negative index runs the first branch, one past the end the last) applied
    /// to `x`, the branches being `first` then `rest`. All return trees of the same
    /// shapes; they may use outside values. (XLA's own conditional runs the last
    /// branch for every out-of-range index, a negative one included; the clamp
    /// makes -1 run branch 0, as in JAX.) A `pred[]` index is `cond`'s: true runs
    /// `first`.
    #[track_caller]
    pub fn switch<'f, T, R>(
        &self,
        index: &Op,
        x: T,
        first: Box<dyn FnOnce(T) -> R + 'f>,
        rest: Vec<Box<dyn FnOnce(T) -> R + 'f>>,
    ) -> R
    where
        T: Tree<Op, With<Op> = T> + Clone,
        R: Tree<Op, With<Op> = R>,
    {
        let loc = Location::caller();
        let last = rest.len() as i64;
        // JAX's clamp of an integer index (XLA would run the last branch for a
        // negative one).
        let clamped;
        let sel = if index.element_type().ok() == Some(ElementType::S32) && last > 0 {
            let at = |v: i64| {
                index
                    .builder()
                    .scalar_of(ElementType::S32, crate::Scalar::Int(v), loc)
            };
            clamped = index.on(loc).clamp(&at(0), &at(last));
            &clamped
        } else {
            index
        };
        let leaves: Vec<Op> = x.leaves().into_iter().cloned().collect();
        let mut refs: Vec<&Op> = leaves.iter().collect();
        refs.push(sel);
        let target = match self.target(&refs, "conditional", loc) {
            // The result's structure comes from running a branch: on failure, the
            // first branch runs on failed values and every leaf carries the error.
            Err(f) => return first(x.map_ref(|_| f.clone())).map_ref(|_| f.clone()),
            Ok(t) => t,
        };
        let shapes: Vec<Shape> = leaves.iter().map(|o| o.shape().expect("checked")).collect();
        let mut built = Vec::new();
        let mut template: Option<R> = None;
        for (i, br) in std::iter::once(first).chain(rest).enumerate() {
            let xx = x.clone();
            let mut out = None;
            let b = self.tuple_body(target, &format!("branch_{i}"), &shapes, loc, |e| {
                let r = br(xx.rebuild(e).expect("one element per leaf"));
                let leaves = r.leaves().into_iter().cloned().collect();
                out = Some(r);
                leaves
            });
            let out = out.expect("the branch ran");
            match b {
                Ok(b) => built.push(b),
                Err(f) => return out.map_ref(|_| f.clone()),
            }
            template.get_or_insert(out);
        }
        let template = template.expect("at least the first branch");
        // Each branch's captured values join its operand tuple; each branch returns
        // a tuple of the result's leaves.
        let mut operands: Vec<Op> = Vec::with_capacity(built.len());
        for b in &built {
            let union: IndexSet<Value> = self
                .g
                .borrow()
                .comp(b.comp)
                .captures
                .keys()
                .copied()
                .collect();
            self.thread_captures(b, target, &shapes, &union, loc);
            if let Err(f) = self.finish_tuple_body(b.comp, &b.roots, loc) {
                return template.map_ref(|_| f.clone());
            }
            let captured: Vec<Op> = union.iter().map(|v| self.op(target, *v)).collect();
            let elems: Vec<&Op> = leaves.iter().chain(&captured).collect();
            // In the conditional's computation, also when every element is a value
            // of an enclosing one (the selector is what puts it deeper): the
            // gradient reads the tuple's elements where the conditional is.
            let here = Builder {
                g: self.g.clone(),
                comp: target,
            };
            operands.push(here.tuple(&elems));
        }
        let all: Vec<&Op> = std::iter::once(sel).chain(operands.iter()).collect();
        let r = self.emit(
            OpKind::Conditional {
                branches: built.iter().map(|b| b.comp).collect(),
            },
            &all,
            None,
            loc,
        );
        let count = template.num_leaves();
        template
            .rebuild(self.results(r, count, true))
            .expect("one result per leaf")
    }
}

/// Conditional (see `conditional_cts`): one tuple cotangent per branch operand.
pub(crate) fn vjp_conditional(n: &Node) -> Grads {
    let OpKind::Conditional { branches } = n.kind else {
        return Err("not a conditional".into());
    };
    conditional_cts(branches, n, &n.array_cts())
        .map(|g| g.into_iter().map(|c| c.map(Ct::Tuple)).collect())
}

/// A conditional, reversed: a conditional on the same selector whose branch `k`
/// recomputes forward branch `k` on its operands and pulls the result's cotangent
/// back through it; the other branches' operands get zeros. Returns, per operand
/// of the forward conditional (the selector, then one tuple per branch), the
/// cotangents of the tuple's elements.
#[allow(clippy::type_complexity)]
fn conditional_cts(
    branches: &[CompId],
    n: &crate::autodiff::Node,
    cts: &[Option<Op>],
) -> Result<Vec<Option<Vec<Option<Op>>>>, String> {
    use crate::autodiff::{ct_or_zeros, differentiable, inline, local};
    let (b, loc) = (n.b, n.loc);
    let elems: Vec<Vec<Op>> = n.operands[1..]
        .iter()
        .map(tuple_elements)
        .collect::<Result<_, _>>()?;
    let float = |x: &Op| x.element_type().is_ok_and(differentiable);
    let res_float: Vec<usize> = (0..n.results.len())
        .filter(|j| float(&n.results[*j]))
        .collect();
    let ct: Vec<Op> = res_float
        .iter()
        .map(|j| ct_or_zeros(cts, *j, &n.results[*j], loc))
        .collect();
    let mut out: Vec<Option<Vec<Option<Op>>>> = vec![None];
    // A cotangent that failed upstream (an op without a gradient further on) fails
    // every operand's cotangent with the same error. Building the backward
    // conditional on it would run a branch on failed values, whose builder is the
    // top computation's, and import this conditional's operands into it, a
    // computation they are not in.
    if let Some(f) = ct.iter().find(|c| c.is_poisoned()) {
        out.extend(
            elems
                .iter()
                .map(|e| Some(e.iter().map(|x| float(x).then(|| f.clone())).collect())),
        );
        return Ok(out);
    }
    // The float elements of every branch's operand, in branch order.
    let slots: Vec<(usize, usize)> = elems
        .iter()
        .enumerate()
        .flat_map(|(k, e)| {
            (0..e.len())
                .filter(move |j| float(&e[*j]))
                .map(move |j| (k, j))
        })
        .collect();
    let zeros_in = |bb: &Builder, x: &Op| -> Op {
        let s = x.shape().expect("an array");
        bb.scalar_of(s.element_type().expect("array"), crate::Scalar::Int(0), loc)
            .broadcast_to(s.dims())
    };
    let branch = |k: usize| -> Box<dyn FnOnce(Vec<Op>) -> Vec<Op> + '_> {
        let (elems, slots, res_float) = (&elems, &slots, &res_float);
        Box::new(move |ct: Vec<Op>| {
            let bb = match ct.first() {
                // Failed values (the switch could not be built): fail alike.
                Some(c) if c.is_poisoned() => return vec![c.clone(); slots.len()],
                Some(c) => c.builder(),
                None => b.clone(),
            };
            let mine: Vec<Op> = elems[k]
                .iter()
                .map(|e| {
                    let d = e.dims().unwrap_or_default();
                    local(&bb, e).reshape(&d)
                })
                .collect();
            let outs = inline(&bb, branches[k], &mine);
            let outs_f: Vec<&Op> = res_float.iter().map(|j| &outs[*j]).collect();
            let my_slots: Vec<usize> = slots
                .iter()
                .filter(|(kk, _)| *kk == k)
                .map(|(_, j)| *j)
                .collect();
            let wrt: Vec<&Op> = my_slots.iter().map(|j| &mine[*j]).collect();
            let ct_refs: Vec<&Op> = ct.iter().collect();
            let mut grads = bb.vjp(&outs_f, &ct_refs, &wrt).into_iter();
            slots
                .iter()
                .map(|(kk, j)| {
                    if *kk == k {
                        grads.next().expect("one per slot")
                    } else {
                        zeros_in(&bb, &elems[*kk][*j])
                    }
                })
                .collect()
        })
    };
    let rest: Vec<Box<dyn FnOnce(Vec<Op>) -> Vec<Op> + '_>> =
        (1..branches.len()).map(branch).collect();
    let back: Vec<Op> = b.switch(&n.operands[0], ct, branch(0), rest);
    out.extend(elems.iter().map(|e| Some(vec![None; e.len()])));
    for ((k, j), g) in slots.iter().zip(back) {
        if let Some(Some(t)) = out.get_mut(k + 1) {
            t[*j] = Some(g);
        }
    }
    Ok(out)
}

// ---- Batching (vmap) and tangent (jvp) rules of the control-flow ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

use crate::batching::{BVal, BatchNode, Batched};
use crate::forward::{JvpNode, Tangents};

/// The elements of a carry value (a tuple value, element by element).
fn carry_elems(v: &BVal) -> Vec<BVal> {
    match v {
        BVal::Tuple(e) => e.clone(),
        other => vec![other.clone()],
    }
}

/// Batching a while loop: the carry elements that depend on the batch (at the
/// start or after any number of steps) are batched at 0, the others stay shared.
/// When the predicate depends on the batch, the loop runs until every example is
/// done and the finished examples keep their carry through a select: every carry
/// element is then batched, and each step costs the whole batch's step until the
/// slowest example finishes.
pub(crate) fn batch_while(n: &BatchNode) -> Batched {
    let OpKind::While { cond, body } = n.kind else {
        return Err("not a while".into());
    };
    let (cond, body, loc, size) = (*cond, *body, n.loc, n.size);
    let init = carry_elems(&n.operands[0]);
    let k = init.len();
    let body_deps = crate::batching::tuple_deps(n.b, body, k);
    let cond_deps = crate::batching::tuple_deps(n.b, cond, k);
    let mut batched: Vec<bool> = init.iter().map(BVal::is_batched).collect();
    loop {
        let next: Vec<bool> = (0..k)
            .map(|j| {
                batched[j]
                    || body_deps
                        .get(j)
                        .is_some_and(|d| d.iter().zip(&batched).any(|(a, b)| *a && *b))
            })
            .collect();
        if next == batched {
            break;
        }
        batched = next;
    }
    let pred_batched = cond_deps
        .first()
        .is_some_and(|d| d.iter().zip(&batched).any(|(a, b)| *a && *b));
    if pred_batched {
        batched = vec![true; k];
    }
    let carry: Vec<BVal> = init
        .iter()
        .zip(&batched)
        .map(|(v, b)| {
            if *b {
                v.all_front(size, loc)
            } else {
                Ok(v.clone())
            }
        })
        .collect::<Result<_, _>>()?;
    let like = BVal::Tuple(carry.clone());
    // The condition: per example, then "any example still running".
    let c = crate::batching::batch_comp_into(
        n.pass,
        loc,
        cond,
        std::slice::from_ref(&like),
        "cond",
        |_, p| match p {
            BVal::Array { op, bdim: Some(d) } => Ok(BVal::same(
                op.convert(ElementType::S32)
                    .reduce_max(&[d as i64])
                    .compare(&op.builder().constant(0i32), crate::Comparison::Gt),
            )),
            other => Ok(other),
        },
    )?;
    let pass = n.pass;
    let bd = crate::batching::batch_comp_into(
        pass,
        loc,
        body,
        std::slice::from_ref(&like),
        "body",
        |bb, out| {
            let outs = carry_elems(&out);
            let mut elems = Vec::with_capacity(k);
            for (j, o) in outs.iter().enumerate() {
                elems.push(if batched[j] {
                    BVal::at(o.front(size, loc)?, 0)
                } else if o.is_batched() {
                    return Err(
                        "a carry element the analysis found shared came out batched (a bug)".into(),
                    );
                } else {
                    o.clone()
                });
            }
            if pred_batched {
                // Finished examples keep their carry: re-evaluate the predicate on the
                // step's input (the parameter) and select per example.
                let param = bb.op(
                    bb.comp,
                    Value::of(bb.g.borrow().comp(bb.comp).params[0].expect("param")),
                );
                let old = crate::batching::param_like(&like, &param, loc);
                let inner = crate::batching::Batcher {
                    size,
                    axis: pass.axis.clone(),
                    b: bb.clone(),
                };
                let (cparams, croot) = {
                    let g = bb.g.borrow();
                    let cc = g.comp(cond);
                    (cc.params.clone(), cc.root)
                };
                let mut env = HashMap::new();
                env.insert(Value::of(cparams[0].expect("param")), old.clone());
                let p = inner
                    .run(cond, &mut env, &[croot.expect("finished")])
                    .map_err(|f| crate::batching::failure(&f).unwrap_or_default())?;
                let p = p[0].front(size, loc)?;
                let olds = carry_elems(&old);
                for (j, e) in elems.iter_mut().enumerate() {
                    let (new, _) = e.array()?;
                    let (prev, _) = olds[j].array()?;
                    let dims = new.dims().map_err(|x| x.to_string())?;
                    let pb = p.broadcast_in_dim(&dims, &[0]);
                    *e = BVal::at(pb.builder().select(&pb, new, prev), 0);
                }
            }
            Ok(BVal::Tuple(elems))
        },
    )?;
    let tuple = like.plain(n.b, loc);
    let r =
        n.b.emit(OpKind::While { cond: c, body: bd }, &[&tuple], None, loc);
    if let Some(e) = crate::batching::failure(&r) {
        return Err(e);
    }
    if !pred_batched {
        let mut g = n.b.g.borrow_mut();
        if let Some(t) = g.trip_counts.get(&n.at).copied() {
            g.trip_counts.insert((r.comp, r.v.instr), t);
        }
        if let Some(t) = g.loop_bounds.get(&n.at).copied() {
            g.loop_bounds.insert((r.comp, r.v.instr), t);
        }
    }
    Ok(n.b
        .results(r, k, true)
        .into_iter()
        .zip(&batched)
        .map(|(o, b)| if *b { BVal::at(o, 0) } else { BVal::same(o) })
        .collect())
}

/// Batching a conditional: a shared selector keeps the conditional, its branches
/// batched (operands and results batched at 0); a selector that differs per
/// example runs every branch on the whole batch and picks each example's result
/// with selects (an index out of range picks the last branch, as XLA's
/// conditional does): the cost of all the branches.
pub(crate) fn batch_conditional(n: &BatchNode) -> Batched {
    let OpKind::Conditional { branches } = n.kind else {
        return Err("not a conditional".into());
    };
    let (loc, size) = (n.loc, n.size);
    let nres = n.shapes.len();
    let sel = &n.operands[0];
    if !sel.is_batched() {
        let args: Vec<BVal> = n.operands[1..]
            .iter()
            .map(|v| v.all_front(size, loc))
            .collect::<Result<_, _>>()?;
        let mut new = Vec::with_capacity(branches.len());
        for (k, br) in branches.iter().enumerate() {
            new.push(crate::batching::batch_comp_into(
                n.pass,
                loc,
                *br,
                std::slice::from_ref(&args[k]),
                "branch",
                |_, v| v.all_front(size, loc),
            )?);
        }
        let mut ops = vec![sel.plain(n.b, loc)];
        ops.extend(args.iter().map(|a| a.plain(n.b, loc)));
        let refs: Vec<&Op> = ops.iter().collect();
        let r = n.b.emit(
            OpKind::Conditional {
                branches: new.into(),
            },
            &refs,
            None,
            loc,
        );
        if let Some(e) = crate::batching::failure(&r) {
            return Err(e);
        }
        return Ok(n
            .b
            .results(r, nres, true)
            .into_iter()
            .map(|o| BVal::at(o, 0))
            .collect());
    }
    // Every branch on the whole batch, here.
    let mut outs: Vec<Vec<Op>> = Vec::with_capacity(branches.len());
    for (k, br) in branches.iter().enumerate() {
        let (params, root) = {
            let g = n.b.g.borrow();
            let c = g.comp(*br);
            (c.params.clone(), c.root)
        };
        let mut env = HashMap::new();
        env.insert(
            Value::of(params[0].expect("param")),
            n.operands[k + 1].clone(),
        );
        let v = n
            .pass
            .run(*br, &mut env, &[root.ok_or("an unfinished branch")?])
            .map_err(|f| crate::batching::failure(&f).unwrap_or_default())?;
        let elems = carry_elems(&v[0]);
        outs.push(
            elems
                .iter()
                .map(|e| e.front(size, loc))
                .collect::<Result<_, _>>()?,
        );
    }
    let s = sel.front(size, loc)?;
    let last = branches.len() - 1;
    let is_pred = s
        .element_type()
        .map(|t| t == ElementType::Pred)
        .unwrap_or(false);
    let mut result = Vec::with_capacity(nres);
    #[allow(clippy::needless_range_loop)] // result j of every branch
    for j in 0..nres {
        let mut r = outs[last][j].clone();
        let dims = r.dims().map_err(|e| e.to_string())?;
        for k in (0..last).rev() {
            let hit = if is_pred {
                s.clone()
            } else {
                s.compare(
                    &s.builder()
                        .constant_of_type(s.element_type().map_err(|e| e.to_string())?, k as i64),
                    crate::Comparison::Eq,
                )
            };
            let hit = hit.broadcast_in_dim(&dims, &[0]);
            r = hit.builder().select(&hit, &outs[k][j], &r);
        }
        result.push(BVal::at(r, 0));
    }
    Ok(result)
}

/// In a new body: the tuple of the copied body's results `outs` and the tangents
/// of those at `which` (zeros where none), pushed forward from `seeds` through the
/// instructions from `start` on; a failed op on error.
fn with_tangents(
    bb: &Builder,
    seeds: &[(Value, Ct)],
    outs: &[Op],
    which: &[usize],
    start: usize,
    loc: &'static Location<'static>,
) -> Op {
    let roots: Vec<Value> = which.iter().map(|j| outs[*j].v).collect();
    let t = match crate::forward::push_forward(bb, bb.comp, seeds, &roots, start) {
        Ok(t) => t,
        Err(f) => return f,
    };
    let mut all = outs.to_vec();
    for (i, j) in which.iter().enumerate() {
        all.push(match &t[i] {
            Some(Ct::Array(a)) => a.clone(),
            _ => crate::autodiff::zeros_like(&outs[*j], loc),
        });
    }
    let refs: Vec<&Op> = all.iter().collect();
    bb.tuple(&refs)
}

/// The tangent rule of a while loop: a loop carrying the tangents of the float
/// carry elements that depend on the values differentiated (after any number of
/// steps) next to the primal carry; its primal results serve the original loop's
/// uses, so the loop runs once.
pub(crate) fn jvp_while(n: &JvpNode) -> Tangents {
    let OpKind::While { cond, body } = n.kind else {
        return Err("not a while".into());
    };
    let (cond, body, loc) = (*cond, *body, n.loc);
    let k = n.results.len();
    let tuple = &n.operands[0];
    let prim: Vec<Op> = (0..k).map(|j| tuple.get_tuple_element(j)).collect();
    let init_t: Vec<Option<Op>> = match n.tangents.first() {
        Some(Some(Ct::Tuple(e))) => (0..k).map(|j| e.get(j).cloned().flatten()).collect(),
        _ => vec![None; k],
    };
    let float: Vec<bool> = prim
        .iter()
        .map(|p| p.element_type().map(|t| t.is_float()).unwrap_or(false))
        .collect();
    let deps = crate::batching::tuple_deps(n.b, body, k);
    let mut active: Vec<bool> = init_t.iter().map(Option::is_some).collect();
    loop {
        let next: Vec<bool> = (0..k)
            .map(|j| {
                float[j]
                    && (active[j]
                        || deps
                            .get(j)
                            .is_some_and(|d| d.iter().zip(&active).any(|(a, b)| *a && *b)))
            })
            .collect();
        if next == active {
            break;
        }
        active = next;
    }
    let act: Vec<usize> = (0..k).filter(|j| active[*j]).collect();
    let tans: Vec<Op> = act
        .iter()
        .map(|j| {
            init_t[*j]
                .clone()
                .unwrap_or_else(|| crate::autodiff::zeros_like(&prim[*j], loc))
        })
        .collect();
    let mut shapes: Vec<Shape> = prim
        .iter()
        .map(|p| p.shape().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    for j in &act {
        shapes.push(shapes[*j].clone());
    }
    let tshape = Shape::Tuple(shapes.clone());
    let parent = n.b.comp;
    let fail = |f: Op| crate::batching::failure(&f).unwrap_or_default();
    // cond: on the primal part.
    let (cc, croots) =
        n.b.body(
            parent,
            "cond",
            std::slice::from_ref(&tshape),
            loc,
            |bb, ps| {
                let elems: Vec<Op> = (0..k).map(|j| ps[0].get_tuple_element(j)).collect();
                crate::autodiff::inline(bb, cond, &elems)
            },
        )
        .map_err(fail)?;
    n.b.finish_body(cc, &croots, loc).map_err(fail)?;
    let (bc, broots) =
        n.b.body(
            parent,
            "body",
            std::slice::from_ref(&tshape),
            loc,
            |bb, ps| {
                let elems: Vec<Op> = (0..k).map(|j| ps[0].get_tuple_element(j)).collect();
                let tin: Vec<Op> = (0..act.len())
                    .map(|i| ps[0].get_tuple_element(k + i))
                    .collect();
                let start = bb.g.borrow().comp(bb.comp).instrs.len();
                let outs = crate::autodiff::inline(bb, body, &elems);
                if let Some(f) = outs.iter().find(|o| o.is_poisoned()) {
                    return vec![f.clone()];
                }
                let seeds: Vec<(Value, Ct)> = act
                    .iter()
                    .zip(&tin)
                    .map(|(j, t)| (elems[*j].v, Ct::Array(t.clone())))
                    .collect();
                vec![with_tangents(bb, &seeds, &outs, &act, start, loc)]
            },
        )
        .map_err(fail)?;
    n.b.finish_body(bc, &broots, loc).map_err(fail)?;
    let mut carry: Vec<Op> = prim.clone();
    carry.extend(tans);
    let refs: Vec<&Op> = carry.iter().collect();
    let init = n.b.tuple(&refs);
    let r =
        n.b.emit(OpKind::While { cond: cc, body: bc }, &[&init], None, loc);
    if let Some(e) = crate::batching::failure(&r) {
        return Err(e);
    }
    let res = n.b.results(r.clone(), k + act.len(), true);
    {
        let mut g = n.b.g.borrow_mut();
        if let Some(t) = g.trip_counts.get(&n.at).copied() {
            g.trip_counts.insert((r.comp, r.v.instr), t);
        }
        if let Some(t) = g.loop_bounds.get(&n.at).copied() {
            g.loop_bounds.insert((r.comp, r.v.instr), t);
        }
        // The original loop's results are served by this one's primal part.
        for (j, orig) in n.results.iter().enumerate() {
            g.forwarded.insert((orig.comp, orig.v), res[j].v);
        }
    }
    let mut out = vec![None; k];
    for (i, j) in act.iter().enumerate() {
        out[*j] = Some(Ct::Array(res[k + i].clone()));
    }
    Ok(out)
}

/// The tangent rule of a conditional: each branch replayed with its tangents
/// pushed through, in a conditional whose branches return the primal results and
/// their tangents (zeros where a branch gives none); its primal results serve the
/// original's uses.
pub(crate) fn jvp_conditional(n: &JvpNode) -> Tangents {
    let OpKind::Conditional { branches } = n.kind else {
        return Err("not a conditional".into());
    };
    let loc = n.loc;
    let k = n.results.len();
    let shapes: Vec<Shape> = n
        .results
        .iter()
        .map(|r| r.shape().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let float: Vec<bool> = shapes
        .iter()
        .map(|s| s.element_type().is_some_and(|t| t.is_float()))
        .collect();
    let fl: Vec<usize> = (0..k).filter(|j| float[*j]).collect();
    let fail = |f: Op| crate::batching::failure(&f).unwrap_or_default();
    let mut new = Vec::with_capacity(branches.len());
    let mut args: Vec<Op> = vec![n.operands[0].clone()];
    for (bi, br) in branches.iter().enumerate() {
        let x = &n.operands[bi + 1];
        let t = n.tangents.get(bi + 1).cloned().flatten();
        let xs = x.shape().map_err(|e| e.to_string())?;
        // The branch's operand and its tangent (a tuple operand's tangent as a
        // tuple, zeros where none).
        let tan_op = match (&t, &xs) {
            (Some(Ct::Array(a)), _) => Some(a.clone()),
            (Some(Ct::Tuple(e)), Shape::Tuple(ss)) => {
                let elems: Vec<Op> = ss
                    .iter()
                    .enumerate()
                    .map(|(i, s)| match e.get(i).cloned().flatten() {
                        Some(a) => a,
                        None => {
                            let g = x.get_tuple_element(i);
                            if s.element_type().is_some_and(|t| t.is_float()) {
                                crate::autodiff::zeros_like(&g, loc)
                            } else {
                                g
                            }
                        }
                    })
                    .collect();
                let refs: Vec<&Op> = elems.iter().collect();
                Some(n.b.tuple(&refs))
            }
            _ => None,
        };
        let pair: Vec<Op> = match &tan_op {
            Some(tt) => vec![x.clone(), tt.clone()],
            None => vec![x.clone()],
        };
        let pr: Vec<&Op> = pair.iter().collect();
        let arg = n.b.tuple(&pr);
        let ashape = arg.shape().map_err(|e| e.to_string())?;
        let has_t = tan_op.is_some();
        let (bc, roots) =
            n.b.body(
                n.b.comp,
                "branch",
                std::slice::from_ref(&ashape),
                loc,
                |bb, ps| {
                    let xin = ps[0].get_tuple_element(0);
                    let start = bb.g.borrow().comp(bb.comp).instrs.len();
                    let args = crate::forward::elements_of(std::slice::from_ref(&xin), loc);
                    let outs = crate::autodiff::inline(bb, *br, &args);
                    if let Some(f) = outs.iter().find(|o| o.is_poisoned()) {
                        return vec![f.clone()];
                    }
                    let seeds: Vec<(Value, Ct)> = if has_t {
                        let tin = ps[0].get_tuple_element(1);
                        let tans: Vec<Op> = match &xs {
                            Shape::Tuple(ss) => {
                                (0..ss.len()).map(|i| tin.get_tuple_element(i)).collect()
                            }
                            _ => vec![tin],
                        };
                        args.iter()
                            .zip(tans)
                            .filter(|(a, _)| {
                                a.element_type().map(|t| t.is_float()).unwrap_or(false)
                            })
                            .map(|(a, t)| (a.v, Ct::Array(t)))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    vec![with_tangents(bb, &seeds, &outs, &fl, start, loc)]
                },
            )
            .map_err(fail)?;
        n.b.finish_body(bc, &roots, loc).map_err(fail)?;
        new.push(bc);
        args.push(arg);
    }
    let refs: Vec<&Op> = args.iter().collect();
    let r = n.b.emit(
        OpKind::Conditional {
            branches: new.into(),
        },
        &refs,
        None,
        loc,
    );
    if let Some(e) = crate::batching::failure(&r) {
        return Err(e);
    }
    let res = n.b.results(r, k + fl.len(), true);
    {
        let mut g = n.b.g.borrow_mut();
        for (j, orig) in n.results.iter().enumerate() {
            g.forwarded.insert((orig.comp, orig.v), res[j].v);
        }
    }
    let mut out = vec![None; k];
    for (i, j) in fl.iter().enumerate() {
        out[*j] = Some(Ct::Array(res[k + i].clone()));
    }
    Ok(out)
}
