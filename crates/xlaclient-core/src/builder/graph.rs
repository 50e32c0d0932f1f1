//! The arena behind [`Builder`](super::Builder): computations of IR instructions
//! under construction, the interned shapes, the recorded errors, closure
//! conversion, and the step from a graph to a finished [`Module`].

use std::panic::Location;

use crate::error::{Error, GraphError, Result, ShapeError};
use crate::ir::op::OpKind;
use crate::ir::{
    Comp, CompId, InferCx, Instr, Module, Operands, Rules, ShapeTable, Signatures, Value,
    value_shape,
};
use crate::shape::Shape;

pub(crate) struct Graph {
    pub(crate) name: String,
    pub(crate) comps: Vec<Comp>,
    pub(crate) shapes: ShapeTable,
    /// Every error recorded, in order; the first is what `build` reports.
    pub(crate) errors: Vec<Error>,
    /// Legal ops that a JAX user probably did not mean, in order.
    pub(crate) warnings: Vec<crate::error::BuildWarning>,
    /// How many of the warnings were printed (each once, by the first module
    /// finished after it was recorded).
    pub(crate) warnings_printed: usize,
    /// Values made by `stop_gradient`: constants to the backward pass.
    pub(crate) stopped: std::collections::HashSet<(CompId, Value)>,
    /// The static trip counts of while loops (by computation and instruction) that
    /// `fori_loop` and `scan` build: what makes them differentiable.
    pub(crate) trip_counts: std::collections::HashMap<(CompId, u32), i64>,
    /// The bounds of while loops built by `while_loop_bounded`.
    pub(crate) loop_bounds: std::collections::HashMap<(CompId, u32), i64>,
    /// While a gradient rule runs: the line of the op it differentiates, which the
    /// ops it builds (and their errors) carry instead of the rule's own lines.
    pub(crate) origin: Option<&'static Location<'static>>,
    /// How many gradient rules are building ops now: what they build is the
    /// backward pass, whose copies of a body leave host callbacks out (a callback
    /// runs once per forward step, as JAX's `debug.callback` under `grad`). The
    /// storing loop, which replaces a forward loop, resets it while it is built.
    pub(crate) in_backward: u32,
    /// While loops whose backward pass stores less than every value of each step
    /// (`ScanOptions::policy`), by computation and instruction: what it stores.
    pub(crate) checkpointed:
        std::collections::HashMap<(CompId, u32), crate::ops::control::CheckpointPolicy>,
    /// Scans whose gradient's backward loop was asked for a number of steps per
    /// iteration (`ScanOptions::backward_chunk`), by computation and instruction.
    pub(crate) backward_chunks: std::collections::HashMap<(CompId, u32), usize>,
    /// Values tagged by `Op::checkpoint_name`, which `CheckpointPolicy::Names`
    /// stores per step.
    pub(crate) checkpoint_names: std::collections::HashMap<(CompId, Value), String>,
    /// Whether Threefry's 20 rounds are written out in full (fast to run, slow to
    /// compile) rather than as a 5-step loop (what JAX does on CPU).
    pub(crate) threefry_unrolled: bool,
    /// User-given backward rules of `call` instructions made by `custom_vjp`.
    pub(crate) custom_vjps:
        std::collections::HashMap<(CompId, u32), (usize, crate::ops::structural::BackwardRule)>,
    /// Values served by another value of the same computation, computed the same
    /// way: a while loop's results, once its gradient rule has built the loop that
    /// runs the same steps and also stores what the backward pass needs. When the
    /// module is finished, each use of a key reads its target instead (when the
    /// target is live anyway), so the original loop is dead and never emitted: the
    /// forward loop runs once.
    pub(crate) forwarded: std::collections::HashMap<(CompId, Value), Value>,
    /// The residual-storing loop built for a while loop (by computation and
    /// instruction): a second gradient of the same loop reuses it.
    pub(crate) storing: std::collections::HashMap<(CompId, u32), StoringLoop>,
    /// Matrices a loop's backward step reads that the loop does not change (a
    /// weight `W` of `x · W`), by value in the backward step's computation, and
    /// their transposes, computed once before the backward loop: the dot rule
    /// writes `x`'s cotangent `ct · Wᵀ` as a product with the transpose in the
    /// CPU backend's fast layout instead of contracting `W`'s second axis every
    /// step (see `linalg::dot_operand_ct`).
    pub(crate) transposed: std::collections::HashMap<(CompId, Value), Value>,
    /// The named device axes the program runs over (`pmap`'s, or
    /// `Builder::bind_axes`'s): what named collectives lower to replica groups
    /// with (see `crate::pmap`). `None` outside a replicated program.
    pub(crate) axes: Option<Vec<(String, usize)>>,
    /// The vmaps being traced, innermost last: their axis names, sizes and scratch
    /// computations (see `crate::batching`).
    pub(crate) vmap_axes: Vec<(String, i64, CompId)>,
    /// The identity instructions that stand for named collectives over a vmapped
    /// axis (by computation and instruction): the axis and the collective.
    pub(crate) vmap_named:
        std::collections::HashMap<(CompId, u32), (String, crate::batching::Named)>,
}

/// What the gradient rule of a while loop stored for it: values of the loop's
/// computation.
#[derive(Clone, Debug)]
pub(crate) struct StoringLoop {
    /// The number of steps taken.
    pub(crate) count: Value,
    /// One stack of per-step rows per stored value.
    pub(crate) stacks: Vec<Value>,
}

impl Signatures for Graph {
    fn signature(&self, c: CompId) -> Option<(Vec<Shape>, Shape)> {
        let comp = self.comps.get(c.0 as usize)?;
        let root = comp.root?;
        let params = comp
            .params
            .iter()
            .map(|p| p.map(|i| self.shapes.get(comp.instrs[i as usize].shape).clone()))
            .collect::<Option<Vec<_>>>()?;
        Some((params, value_shape(comp, &self.shapes, root)?.clone()))
    }
}

impl Graph {
    pub(crate) fn new(name: &str) -> Graph {
        Graph {
            name: name.to_string(),
            comps: vec![Comp::new(name.to_string(), None)],
            shapes: ShapeTable::default(),
            errors: Vec::new(),
            warnings: Vec::new(),
            warnings_printed: 0,
            stopped: Default::default(),
            trip_counts: Default::default(),
            loop_bounds: Default::default(),
            in_backward: 0,
            custom_vjps: Default::default(),
            checkpointed: Default::default(),
            backward_chunks: Default::default(),
            checkpoint_names: Default::default(),
            threefry_unrolled: false,
            forwarded: Default::default(),
            storing: Default::default(),
            transposed: Default::default(),
            axes: None,
            vmap_axes: Vec::new(),
            vmap_named: Default::default(),
            origin: None,
        }
    }

    pub(crate) fn add_comp(&mut self, name: &str, parent: Option<CompId>) -> CompId {
        self.comps.push(Comp::new(name.to_string(), parent));
        CompId(self.comps.len() as u32 - 1)
    }

    pub(crate) fn comp(&self, c: CompId) -> &Comp {
        &self.comps[c.0 as usize]
    }

    pub(crate) fn comp_mut(&mut self, c: CompId) -> &mut Comp {
        &mut self.comps[c.0 as usize]
    }

    pub(crate) fn value_shape(&self, c: CompId, v: Value) -> &Shape {
        value_shape(self.comp(c), &self.shapes, v).expect("op handles point at existing values")
    }

    fn depth(&self, mut c: CompId) -> usize {
        let mut d = 0;
        while let Some(p) = self.comp(c).parent {
            c = p;
            d += 1;
        }
        d
    }

    fn is_ancestor_or_self(&self, a: CompId, mut c: CompId) -> bool {
        loop {
            if a == c {
                return true;
            }
            match self.comp(c).parent {
                Some(p) => c = p,
                None => return false,
            }
        }
    }

    /// The innermost of `base` and `comps`, which must all lie on one chain of
    /// enclosing computations, none of them a finished body.
    pub(crate) fn innermost(
        &self,
        base: CompId,
        comps: &[CompId],
    ) -> std::result::Result<CompId, String> {
        let mut inner = base;
        for c in comps {
            if self.depth(*c) > self.depth(inner) {
                inner = *c;
            }
        }
        for c in comps.iter().chain([&base]) {
            if !self.is_ancestor_or_self(*c, inner) {
                return Err(
                    "an operand belongs to a computation that does not enclose this one (a value of another body)"
                        .into(),
                );
            }
            let comp = self.comp(*c);
            if comp.parent.is_some() && comp.root.is_some() {
                return Err(format!(
                    "an operand belongs to the finished body `{}`; a body's values cannot be used outside it",
                    comp.name
                ));
            }
        }
        Ok(inner)
    }

    /// Value `v` of computation `from` as a value of `to`, which `from` encloses:
    /// each body between them gets (or reuses) a parameter carrying it. `Err` (and
    /// nothing changed) when `from` does not enclose `to`.
    pub(crate) fn import(
        &mut self,
        from: CompId,
        v: Value,
        to: CompId,
    ) -> std::result::Result<Value, String> {
        if from == to {
            return Ok(v);
        }
        let Some(parent) = self.comp(to).parent else {
            return Err(format!(
                "a value of `{}` is used in `{}`, which is not inside it",
                self.comp(from).name,
                self.comp(to).name
            ));
        };
        let pv = self.import(from, v, parent)?;
        if let Some(p) = self.comp(to).captures.get(&pv) {
            return Ok(Value::of(*p));
        }
        let shape = self.value_shape(parent, pv).clone();
        let number = self.comp(to).params.len();
        let shape = self.shapes.intern(shape);
        let loc = self.comp(parent).instrs[pv.instr as usize].loc;
        let comp = self.comp_mut(to);
        comp.instrs.push(Instr {
            kind: OpKind::Parameter {
                number: number as u32,
                name: "capture".into(),
            },
            operands: Operands::new(),
            shape,
            loc,
            sharding: None,
        });
        let idx = comp.instrs.len() as u32 - 1;
        comp.params.push(Some(idx));
        comp.captures.insert(pv, idx);
        Ok(Value::of(idx))
    }

    /// Runs the op's shape rule and appends the instruction to `comp`.
    pub(crate) fn push(
        &mut self,
        comp: CompId,
        kind: OpKind,
        operands: Operands,
        target: Option<&Shape>,
        loc: &'static Location<'static>,
    ) -> std::result::Result<Value, ShapeError> {
        let shape = self.infer(comp, &kind, &operands, target)?;
        Ok(self.append(comp, kind, operands, shape, loc))
    }

    /// Test-only (see [`Builder::emit_unchecked`](super::Builder::emit_unchecked)):
    /// runs the op's shape rule and appends the instruction even when the rule
    /// rejects it, then declared `stand_in`; returns the rule's error too.
    pub(crate) fn push_unchecked(
        &mut self,
        comp: CompId,
        kind: OpKind,
        operands: Operands,
        target: Option<&Shape>,
        stand_in: Shape,
        loc: &'static Location<'static>,
    ) -> (Value, Option<ShapeError>) {
        let (shape, rejected) = match self.infer(comp, &kind, &operands, target) {
            Ok(s) => (s, None),
            Err(e) => (stand_in, Some(e)),
        };
        (self.append(comp, kind, operands, shape, loc), rejected)
    }

    /// The shape rule of `kind` on `operands` (values of `comp`).
    fn infer(
        &self,
        comp: CompId,
        kind: &OpKind,
        operands: &Operands,
        target: Option<&Shape>,
    ) -> std::result::Result<Shape, ShapeError> {
        let c = self.comp(comp);
        let shapes: Vec<&Shape> = operands
            .iter()
            .map(|v| value_shape(c, &self.shapes, *v).expect("imported operands exist"))
            .collect();
        let cx = InferCx {
            operands: &shapes,
            target,
            sigs: self,
        };
        crate::ops::Table.infer(kind, &cx)
    }

    /// Appends an instruction of result `shape` to `comp`.
    fn append(
        &mut self,
        comp: CompId,
        kind: OpKind,
        operands: Operands,
        shape: Shape,
        loc: &'static Location<'static>,
    ) -> Value {
        let shape = self.shapes.intern(shape);
        let c = self.comp_mut(comp);
        c.instrs.push(Instr {
            kind,
            operands,
            shape,
            loc,
            sharding: None,
        });
        Value::of(c.instrs.len() as u32 - 1)
    }

    /// The finished module with computation `entry` as entry and `root` as its
    /// result: the computations it reaches (callees first), dead instructions
    /// removed (parameters are kept), instructions renumbered.
    pub(crate) fn finish(&self, entry: CompId, root: Value) -> Result<Module> {
        let effects = self.effectful_comps();
        // The computations the root reaches through live instructions, and whom
        // each calls.
        let n = self.comps.len();
        let mut reach = vec![false; n];
        let mut callees: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut work = vec![entry.0 as usize];
        reach[entry.0 as usize] = true;
        while let Some(ci) = work.pop() {
            let c = &self.comps[ci];
            let r = if ci == entry.0 as usize {
                Some(root)
            } else {
                c.root
            };
            let (_, live) = self.forwarding(CompId(ci as u32), r, &effects);
            for (i, ins) in c.instrs.iter().enumerate() {
                if live[i] {
                    for callee in ins.kind.called() {
                        let k = callee.0 as usize;
                        if !callees[ci].contains(&k) {
                            callees[ci].push(k);
                        }
                        if !reach[k] {
                            reach[k] = true;
                            work.push(k);
                        }
                    }
                }
            }
        }
        // Callees first. Among the computations whose callees are all placed, the
        // one created last goes next: a body is created after the computation it is
        // in, so without shared functions this is decreasing creation order.
        let mut waiting: Vec<usize> = callees.iter().map(Vec::len).collect();
        let mut callers: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (ci, cs) in callees.iter().enumerate() {
            for &k in cs {
                callers[k].push(ci);
            }
        }
        let mut ready: std::collections::BinaryHeap<usize> =
            (0..n).filter(|c| reach[*c] && waiting[*c] == 0).collect();
        let mut order: Vec<usize> = Vec::with_capacity(n);
        while let Some(ci) = ready.pop() {
            order.push(ci);
            for &caller in &callers[ci] {
                waiting[caller] -= 1;
                if waiting[caller] == 0 {
                    ready.push(caller);
                }
            }
        }
        let mut new_id = vec![u32::MAX; self.comps.len()];
        for (n, c) in order.iter().enumerate() {
            new_id[*c] = n as u32;
        }
        let mut comps = Vec::with_capacity(order.len());
        for &ci in &order {
            let c = &self.comps[ci];
            let r = if ci == entry.0 as usize {
                root
            } else {
                c.root.ok_or_else(|| Error::Graph {
                    kind: GraphError::UnfinishedBody {
                        name: c.name.clone(),
                    },
                    location: None,
                })?
            };
            let (operands, live) = self.forwarding(CompId(ci as u32), Some(r), &effects);
            let r = operands.root.expect("a root");
            let mut remap = vec![u32::MAX; c.instrs.len()];
            let mut instrs = Vec::with_capacity(live.iter().filter(|l| **l).count());
            let order = emission_order(&operands.of, &live);
            if order.len() != live.iter().filter(|l| **l).count() {
                return Err(Error::Graph {
                    kind: GraphError::Unverified {
                        reason: format!(
                            "the values forwarded in `{}` depend on each other",
                            c.name
                        ),
                    },
                    location: None,
                });
            }
            for i in order {
                let mut ins = c.instrs[i].clone();
                ins.operands = operands.of[i].clone();
                for v in ins.operands.iter_mut() {
                    v.instr = remap[v.instr as usize];
                }
                ins.kind.remap_called(|k| CompId(new_id[k.0 as usize]));
                remap[i] = instrs.len() as u32;
                instrs.push(ins);
            }
            comps.push(Comp {
                name: c.name.clone(),
                instrs,
                params: c
                    .params
                    .iter()
                    .map(|p| p.map(|i| remap[i as usize]))
                    .collect(),
                parent: None,
                captures: Default::default(),
                root: Some(Value {
                    instr: remap[r.instr as usize],
                    result: r.result,
                }),
            });
        }
        Ok(Module {
            name: self.name.clone(),
            entry: CompId(new_id[entry.0 as usize]),
            comps,
            shapes: self.shapes.clone(),
            aliases: Vec::new(),
        })
    }
}

/// A computation's operands (and root) with the forwarded values replaced.
struct Forwarded {
    of: Vec<Operands>,
    root: Option<Value>,
}

impl Graph {
    /// The operands of computation `comp` with each forwarded value replaced by
    /// its target (see [`Graph::forwarded`]), and which instructions the result
    /// `root` then depends on. A value is replaced only by a target that the root
    /// depends on without any replacement: a loop whose gradient is built but not
    /// used keeps the original loop (which stores nothing).
    fn forwarding(
        &self,
        comp: CompId,
        root: Option<Value>,
        effects: &[bool],
    ) -> (Forwarded, Vec<bool>) {
        let c = self.comp(comp);
        let plain: Vec<Operands> = c.instrs.iter().map(|i| i.operands.clone()).collect();
        let effectful: Vec<bool> = c
            .instrs
            .iter()
            .map(|i| {
                i.kind.has_side_effect() || i.kind.called().iter().any(|b| effects[b.0 as usize])
            })
            .collect();
        let live0 = live_instrs(c, &plain, root, &effectful);
        if !self.forwarded.keys().any(|(k, _)| *k == comp) {
            return (Forwarded { of: plain, root }, live0);
        }
        let resolve = |mut v: Value| -> Value {
            let mut hops = 0;
            while let Some(t) = self.forwarded.get(&(comp, v)) {
                hops += 1;
                if !live0[t.instr as usize] || hops > c.instrs.len() {
                    break;
                }
                v = *t;
            }
            v
        };
        let of: Vec<Operands> = plain
            .iter()
            .map(|ops| ops.iter().map(|v| resolve(*v)).collect())
            .collect();
        let root = root.map(resolve);
        // A loop whose results are all served by its storing copy (which runs its
        // effects) is not kept for its own effects.
        let mut effectful = effectful;
        for ((k, v), t) in &self.forwarded {
            if *k == comp && live0[t.instr as usize] {
                effectful[v.instr as usize] = false;
            }
        }
        let live = live_instrs(c, &of, root, &effectful);
        (Forwarded { of, root }, live)
    }

    /// Which computations have a side effect (a host callback), directly or through
    /// a computation they call: instructions that have one or call one are live
    /// whether or not the result depends on them.
    pub(crate) fn effectful_comps(&self) -> Vec<bool> {
        let mut fx: Vec<bool> = self
            .comps
            .iter()
            .map(|c| c.instrs.iter().any(|i| i.kind.has_side_effect()))
            .collect();
        loop {
            let mut changed = false;
            for (ci, c) in self.comps.iter().enumerate() {
                if !fx[ci]
                    && c.instrs
                        .iter()
                        .any(|i| i.kind.called().iter().any(|b| fx[b.0 as usize]))
                {
                    fx[ci] = true;
                    changed = true;
                }
            }
            if !changed {
                return fx;
            }
        }
    }
}

/// Which instructions of `c` (with operands `operands`) the root depends on, plus
/// every parameter and every instruction with a side effect (`effectful`) and what
/// it depends on.
fn live_instrs(
    c: &Comp,
    operands: &[Operands],
    root: Option<Value>,
    effectful: &[bool],
) -> Vec<bool> {
    let mut live = vec![false; c.instrs.len()];
    let mut work: Vec<usize> = Vec::new();
    if let Some(r) = root {
        work.push(r.instr as usize);
    }
    work.extend((0..c.instrs.len()).filter(|i| effectful[*i]));
    work.extend(c.param_instrs().map(|p| p as usize));
    while let Some(i) = work.pop() {
        if live[i] {
            continue;
        }
        live[i] = true;
        work.extend(operands[i].iter().map(|o| o.instr as usize));
    }
    live
}

/// The live instructions in an order where operands come first: creation order,
/// except that an instruction waits for a forwarded operand created after it
/// (among the instructions ready, the earliest created goes first, so without
/// forwarding this is exactly creation order).
fn emission_order(operands: &[Operands], live: &[bool]) -> Vec<usize> {
    let n = operands.len();
    let mut waiting = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in (0..n).filter(|i| live[*i]) {
        let mut seen: Vec<usize> = operands[i].iter().map(|v| v.instr as usize).collect();
        seen.sort_unstable();
        seen.dedup();
        waiting[i] = seen.len();
        for o in seen {
            users[o].push(i);
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..n)
        .filter(|i| live[*i] && waiting[*i] == 0)
        .map(std::cmp::Reverse)
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(std::cmp::Reverse(u));
            }
        }
    }
    order
}
