//! Forward-mode automatic differentiation (`jax.jvp`) as a pass over the IR: the
//! tangents are emitted into the same computation as the primal values, walking
//! the instructions between the inputs and the outputs in order and asking each
//! op's tangent rule (`jvp_*` in its family file, dispatched by the op table,
//! [`crate::ops::table`]) for the tangents of its results.
//!
//! Most rules are direct: a linear op applies itself to the tangents
//! (`linear`), a bilinear one (dot, convolution) sums its two partial products
//! (`bilinear`), an element-wise op multiplies by its derivative (derived from
//! its gradient rule: an element-wise op's Jacobian is diagonal, so its transpose
//! is itself, `diagonal`). Loops and conditionals carry the tangents alongside
//! the primal values. On top: [`Builder::jvp`], [`Builder::jacfwd`],
//! [`Builder::jacrev`] and [`Builder::hessian`].

pub use crate::ops::table::tangent;
use std::collections::HashMap;
use std::panic::Location;

use crate::autodiff::{Ct, Node, differentiable, zeros_like};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{CompId, OpKind, Value};
use crate::shape::Shape;
use crate::tree::Tree;

/// One instruction as a tangent rule sees it.
pub(crate) struct JvpNode<'a> {
    /// The op with its attributes.
    pub kind: &'a OpKind,
    /// The primal operands.
    pub operands: &'a [Op],
    /// The primal results (one per result).
    pub results: &'a [Op],
    /// The tangent of each operand (`None`: zero).
    pub tangents: &'a [Option<Ct>],
    /// The builder of the computation.
    pub b: &'a Builder,
    /// Where the op was built.
    pub loc: &'static Location<'static>,
    /// The instruction (computation, index): the key of the side tables.
    pub at: (CompId, u32),
}

/// A tangent rule's answer: one tangent per result (`None`: zero), or why this
/// form of the op has no rule.
pub(crate) type Tangents = Result<Vec<Option<Ct>>, String>;

impl JvpNode<'_> {
    /// The array tangent of operand `k` (zeros where none arrived).
    pub fn tangent(&self, k: usize) -> Op {
        match self.tangents.get(k) {
            Some(Some(Ct::Array(t))) => t.clone(),
            _ => zeros_like(&self.operands[k], self.loc),
        }
    }

    /// Whether operand `k` has a tangent.
    pub fn has(&self, k: usize) -> bool {
        matches!(self.tangents.get(k), Some(Some(_)))
    }

    /// Emits `kind` on `operands` with the primal results' shapes and returns
    /// its results as array tangents (`None` for the non-float ones).
    pub fn emit_like(&self, kind: OpKind, operands: &[Op]) -> Tangents {
        let refs: Vec<&Op> = operands.iter().collect();
        let multi = kind.multi_result(operands.len());
        let shapes: Vec<Shape> = self
            .results
            .iter()
            .map(|r| r.shape().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let target = if multi {
            Shape::Tuple(shapes.clone())
        } else {
            shapes[0].clone()
        };
        let r = self.b.emit(kind, &refs, Some(target), self.loc);
        if let Some(e) = crate::batching::failure(&r) {
            return Err(e);
        }
        Ok(self
            .b
            .results(r, self.results.len(), multi)
            .into_iter()
            .zip(&shapes)
            .map(|(o, s)| float(s).then_some(Ct::Array(o)))
            .collect())
    }
}

fn float(s: &Shape) -> bool {
    s.element_type().is_some_and(differentiable)
}

/// The rule of the linear ops (in their float operands, the others fixed): the op
/// itself on the tangents (zeros for a float operand without one, the primal
/// value for an integer or predicate operand: indices, a select's predicate).
pub(crate) fn linear(n: &JvpNode) -> Tangents {
    let ops: Vec<Op> = (0..n.operands.len())
        .map(|k| {
            let s = n.operands[k].shape().map_err(|e| e.to_string())?;
            Ok(if float(&s) {
                n.tangent(k)
            } else {
                n.operands[k].clone()
            })
        })
        .collect::<Result<_, String>>()?;
    n.emit_like(n.kind.clone(), &ops)
}

/// The rule of the bilinear ops of two operands (dot, convolution):
/// `op(ta, b) + op(a, tb)`.
pub(crate) fn bilinear(n: &JvpNode) -> Tangents {
    let (a, b) = (&n.operands[0], &n.operands[1]);
    let mut sum: Option<Op> = None;
    for (k, pair) in [
        (0, [n.tangent(0), b.clone()]),
        (1, [a.clone(), n.tangent(1)]),
    ] {
        if !n.has(k) {
            continue;
        }
        let t = match n.emit_like(n.kind.clone(), &pair)?.remove(0) {
            Some(Ct::Array(t)) => t,
            _ => return Ok(vec![None]),
        };
        sum = Some(match sum {
            None => t,
            Some(s) => s.binary(crate::BinaryOp::Add, &t, n.loc),
        });
    }
    Ok(vec![sum.map(Ct::Array)])
}

/// The rule of the element-wise ops of one result, from their gradient rule: the
/// Jacobian with respect to each operand is diagonal, so applying the gradient
/// rule to operand `k`'s tangent (as the result's cotangent) gives that operand's
/// share of the result's tangent.
pub(crate) fn diagonal(n: &JvpNode) -> Tangents {
    let mut sum: Option<Op> = None;
    for k in 0..n.operands.len() {
        let Some(Some(Ct::Array(t))) = n.tangents.get(k) else {
            continue;
        };
        let mut wanted = vec![false; n.operands.len()];
        wanted[k] = true;
        let cts = [Some(Ct::Array(t.clone()))];
        let node = Node {
            kind: n.kind,
            operands: n.operands,
            results: n.results,
            loc: n.loc,
            b: n.b,
            wanted: &wanted,
            at: n.at,
            cts: &cts,
            active: &[],
        };
        let grads = crate::ops::table::vjp(&node)?;
        let part = match grads.into_iter().nth(k).flatten() {
            Some(Ct::Array(p)) => p,
            _ => continue,
        };
        sum = Some(match sum {
            None => part,
            Some(s) => s.binary(crate::BinaryOp::Add, &part, n.loc),
        });
    }
    Ok(vec![sum.map(Ct::Array)])
}

impl Builder {
    /// Jacobian-vector product (`jax.jvp` on values already built): the tangents
    /// of `outputs` when the values `wrt` move along `tangents` (one each, of its
    /// shape), i.e. `Σ_k ∂outputs/∂wrt[k] · tangents[k]`, emitted into this
    /// computation by the ops' tangent rules (forward mode: the cost of one more
    /// forward pass, whatever the number of outputs). Outputs that do not depend on
    /// `wrt` get zeros.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("jvp");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let v = b.parameter(1, Shape::of::<f32>(&[3]), "v");
    /// let y = x.sin();
    /// let t = b.jvp(&[&y], &[&x], &[&v]); // cos(x) * v
    /// assert_eq!(t[0].dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn jvp(&self, outputs: &[&Op], wrt: &[&Op], tangents: &[&Op]) -> Vec<Op> {
        let loc = Location::caller();
        let n = outputs.len();
        let fail_all = |f: Op| vec![f; n];
        let all: Vec<&Op> = outputs.iter().chain(wrt).chain(tangents).copied().collect();
        let comp = match self.target(&all, "jvp", loc) {
            Ok(c) => c,
            Err(f) => return fail_all(f),
        };
        let bad = |what: String, shapes: &[&Shape]| {
            self.fail(
                ShapeError::new("jvp", shapes, ShapeErrorKind::Attribute, what),
                loc,
            )
        };
        if wrt.len() != tangents.len() {
            return fail_all(bad(
                format!("{} values but {} tangents", wrt.len(), tangents.len()),
                &[],
            ));
        }
        let inner = Builder {
            g: self.g.clone(),
            comp,
        };
        let local = |o: &Op| -> Result<Op, Op> {
            let r = self.g.borrow_mut().import(o.comp, o.v, comp);
            match r {
                Ok(v) => Ok(inner.op(comp, v)),
                Err(reason) => Err(self.fail_graph(
                    crate::error::GraphError::OutOfScope {
                        used_as: "a value of `jvp`".into(),
                        reason,
                    },
                    loc,
                )),
            }
        };
        let mut locals = Vec::with_capacity(all.len());
        for o in &all {
            match local(o) {
                Ok(l) => locals.push(l),
                Err(f) => return fail_all(f),
            }
        }
        let (outs, rest) = locals.split_at(n);
        let (ws, ts) = rest.split_at(wrt.len());
        for (k, (w, t)) in ws.iter().zip(ts).enumerate() {
            let (sw, st) = (w.shape().expect("checked"), t.shape().expect("checked"));
            if !float(&sw) {
                return fail_all(bad(
                    format!("value {k} is {sw}: only floating-point arrays have tangents"),
                    &[&sw],
                ));
            }
            if sw != st {
                return fail_all(bad(
                    format!("tangent {k} is {st}, its value {sw}"),
                    &[&sw, &st],
                ));
            }
        }
        let seeds: Vec<(Value, Ct)> = ws
            .iter()
            .zip(ts)
            .map(|(w, t)| (w.v, Ct::Array(t.clone())))
            .collect();
        let roots: Vec<Value> = outs.iter().map(|o| o.v).collect();
        match push_forward(&inner, comp, &seeds, &roots, 0) {
            Ok(tans) => tans
                .into_iter()
                .zip(outs)
                .map(|(t, o)| match t {
                    Some(Ct::Array(t)) => t,
                    _ => zeros_like(o, loc),
                })
                .collect(),
            Err(f) => fail_all(f),
        }
    }

    /// `jax.jvp(f, primals, tangents)` on trees: calls `f(primals)` and returns its
    /// outputs and their tangents along `tangents` (a tree like `primals`).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("jvp_fn");
    /// let w = b.parameter(0, Shape::of::<f32>(&[2, 2]), "w");
    /// let v = b.parameter(1, Shape::of::<f32>(&[2, 2]), "v");
    /// let (y, ty) = b.jvp_fn(w, v, |w| w.matmul(&w).tanh());
    /// assert_eq!((y.dims()?, ty.dims()?), (vec![2, 2], vec![2, 2]));
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn jvp_fn<P, O>(&self, primals: P, tangents: P, f: impl FnOnce(P) -> O) -> (O, O)
    where
        P: Tree<Op, With<Op> = P>,
        O: Tree<Op, With<Op> = O>,
    {
        let ws: Vec<Op> = primals.leaves().into_iter().cloned().collect();
        let ts: Vec<Op> = tangents.leaves().into_iter().cloned().collect();
        let out = f(primals);
        let outs: Vec<&Op> = out.leaves();
        let wr: Vec<&Op> = ws.iter().collect();
        let tr: Vec<&Op> = ts.iter().collect();
        let t = self.jvp(&outs, &wr, &tr);
        let tangent = out.rebuild(t).expect("one tangent per output");
        (out, tangent)
    }

    /// `jax.jacfwd(f)(x)`: the Jacobian of `f` at `x` by forward mode, one tangent
    /// per element of `x`, pushed through together (`vmap` over the rows of an
    /// identity). The result has `f(x)`'s dimensions then `x`'s.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("jac");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let j = b.jacfwd(&x, |x| x.sin().reduce_sum(&[0]) * x); // [3] → [3]
    /// assert_eq!(j.dims()?, vec![3, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn jacfwd(&self, x: &Op, f: impl Fn(&Op) -> Op) -> Op {
        let loc = Location::caller();
        self.jacobian(x, f, true, loc)
    }

    /// `jax.jacrev(f)(x)`: the Jacobian of `f` at `x` by reverse mode, one
    /// cotangent per element of `f(x)` (batched with `vmap`). The result has
    /// `f(x)`'s dimensions then `x`'s, as [`jacfwd`](Self::jacfwd)'s.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("jacrev");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let j = b.jacrev(&x, |x| x.slice_in_dim(0, 2, 1, 0).exp()); // [3] → [2]
    /// assert_eq!(j.dims()?, vec![2, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn jacrev(&self, x: &Op, f: impl Fn(&Op) -> Op) -> Op {
        let loc = Location::caller();
        self.jacobian(x, f, false, loc)
    }

    /// `jax.hessian(f)(x)`: the Hessian of the scalar `f` at `x` (forward over
    /// reverse: `jacfwd` of the gradient), of `x`'s dimensions twice.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("hess");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let h = b.hessian(&x, |x| (x * x * x).reduce_sum(&[0])); // diag(6x)
    /// assert_eq!(h.dims()?, vec![3, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn hessian(&self, x: &Op, f: impl Fn(&Op) -> Op) -> Op {
        let loc = Location::caller();
        self.jacobian(
            x,
            |x| {
                let loss = f(x);
                x.builder().on(loc).grad(&loss, x)
            },
            true,
            loc,
        )
    }

    fn jacobian(
        &self,
        x: &Op,
        f: impl Fn(&Op) -> Op,
        forward: bool,
        loc: &'static Location<'static>,
    ) -> Op {
        let mut j = self.jacobian_tree(x, |x: Op| f(&x), forward, loc);
        j.pop()
            .and_then(|mut r| r.pop())
            .unwrap_or_else(|| x.clone())
    }

    /// `jax.jacfwd(f)(x)` on trees: the Jacobian block `[i][j]` of output leaf
    /// `i` with respect to input leaf `j`, of the output leaf's dimensions then the
    /// input leaf's (forward mode: one tangent per input element, batched).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("jac_tree");
    /// let w = b.parameter(0, Shape::of::<f32>(&[2, 3]), "w");
    /// let c = b.parameter(1, Shape::of::<f32>(&[3]), "c");
    /// let j = b.jacfwd_tree(&(w, c), |(w, c)| (w.matmul(&c), c.sin()));
    /// assert_eq!(j[0][0].dims()?, vec![2, 2, 3]); // ∂(w c)/∂w
    /// assert_eq!(j[0][1].dims()?, vec![2, 3]);    // ∂(w c)/∂c
    /// assert_eq!(j[1][1].dims()?, vec![3, 3]);    // ∂ sin(c)/∂c
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn jacfwd_tree<P, O>(&self, x: &P, f: impl Fn(P) -> O) -> Vec<Vec<Op>>
    where
        P: Tree<Op, With<Op> = P>,
        O: Tree<Op, With<Op> = O>,
    {
        self.jacobian_tree(x, f, true, Location::caller())
    }

    /// `jax.jacrev(f)(x)` on trees: the blocks of [`jacfwd_tree`](Self::jacfwd_tree),
    /// by reverse mode (one cotangent per output element, batched).
    #[track_caller]
    pub fn jacrev_tree<P, O>(&self, x: &P, f: impl Fn(P) -> O) -> Vec<Vec<Op>>
    where
        P: Tree<Op, With<Op> = P>,
        O: Tree<Op, With<Op> = O>,
    {
        self.jacobian_tree(x, f, false, Location::caller())
    }

    /// `jax.hessian(f)(x)` on trees: block `[i][j]` is `∂²f/∂x_i∂x_j`, of leaf
    /// `i`'s dimensions then leaf `j`'s (forward over reverse).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("hess_tree");
    /// let a = b.parameter(0, Shape::of::<f32>(&[2]), "a");
    /// let c = b.parameter(1, Shape::of::<f32>(&[]), "c");
    /// let h = b.hessian_tree(&(a, c), |(a, c)| (&a * &a).reduce_sum(&[0]) * &c);
    /// assert_eq!(h[0][0].dims()?, vec![2, 2]); // 2c·I
    /// assert_eq!(h[0][1].dims()?, vec![2]);    // 2a
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn hessian_tree<P>(&self, x: &P, f: impl Fn(P) -> Op) -> Vec<Vec<Op>>
    where
        P: Tree<Op, With<Op> = P>,
    {
        let loc = Location::caller();
        self.jacobian_tree(
            x,
            |p: P| {
                let keep = p.map_ref(|o| o.clone());
                let loss = f(p);
                loss.builder().on(loc).grad(&loss, &keep)
            },
            true,
            loc,
        )
    }

    fn jacobian_tree<P, O>(
        &self,
        x: &P,
        f: impl Fn(P) -> O,
        forward: bool,
        loc: &'static Location<'static>,
    ) -> Vec<Vec<Op>>
    where
        P: Tree<Op, With<Op> = P>,
        O: Tree<Op, With<Op> = O>,
    {
        let xs: Vec<Op> = x.leaves().into_iter().cloned().collect();
        let fail = |f: Op, n: usize| vec![vec![f; xs.len()]; n.max(1)];
        let mut xd = Vec::with_capacity(xs.len());
        for o in &xs {
            match o.dims() {
                Ok(d) => xd.push(d),
                Err(_) => return fail(o.clone(), 1),
            }
        }
        let ty = match xs.first().map(|o| o.element_type()) {
            Some(Ok(t)) => t,
            Some(Err(_)) => return fail(xs[0].clone(), 1),
            None => return Vec::new(),
        };
        let b = self.on(loc);
        let sizes =
            |ds: &[Vec<i64>]| -> Vec<i64> { ds.iter().map(|d| d.iter().product()).collect() };
        // The rows of an identity, one block of columns per leaf of `dims`.
        let basis = |ds: &[Vec<i64>], ty| -> Vec<Op> {
            let n: Vec<i64> = sizes(ds);
            let total: i64 = n.iter().sum();
            let eye = identity(&b, ty, total, &[total]);
            let mut off = 0;
            ds.iter()
                .zip(&n)
                .map(|(d, k)| {
                    let block = eye.slice(&[0, off], &[total, off + k], &[1, 1]);
                    off += k;
                    let mut to = vec![total];
                    to.extend(d);
                    block.reshape(&to)
                })
                .collect()
        };
        // Rows `off..off + n_i` of the batched results, per block.
        let split = |rows: &Op, ns: &[i64], i: usize| -> Op {
            let off: i64 = ns[..i].iter().sum();
            let d = rows.dims().unwrap_or_default();
            let mut lo = vec![0i64; d.len()];
            let mut hi = d.clone();
            lo[0] = off;
            hi[0] = off + ns[i];
            rows.slice(&lo, &hi, &vec![1; d.len()])
        };
        let nx = xs.len();
        if forward {
            let tangents = basis(&xd, ty);
            let mut yd: Vec<Vec<i64>> = Vec::new();
            let mut axes = vec![None; nx];
            axes.extend(vec![Some(0); nx]);
            let outs = self.vmap(
                &crate::batching::Vmap::new().in_axes(axes),
                (xs.clone(), tangents),
                |bb, (xv, tv)| {
                    let p = x.rebuild(xv.clone()).expect("one leaf each");
                    let y = f(p);
                    let ys: Vec<&Op> = y.leaves();
                    yd = ys.iter().map(|o| o.dims().unwrap_or_default()).collect();
                    let xr: Vec<&Op> = xv.iter().collect();
                    let tr: Vec<&Op> = tv.iter().collect();
                    bb.on(loc).jvp(&ys, &xr, &tr)
                },
            );
            let nxs = sizes(&xd);
            // outs[i]: [Nx, y_i...]; block j: [n_j, y_i...] → [x_j..., y_i...] →
            // [y_i..., x_j...].
            outs.iter()
                .enumerate()
                .map(|(i, o)| {
                    let yi = yd.get(i).cloned().unwrap_or_default();
                    (0..nx)
                        .map(|j| {
                            let blk = split(o, &nxs, j);
                            let mut d = xd[j].clone();
                            d.extend(&yi);
                            let rx = xd[j].len() as i64;
                            let ry = yi.len() as i64;
                            let perm: Vec<i64> = (rx..rx + ry).chain(0..rx).collect();
                            blk.reshape(&d).transpose(&perm)
                        })
                        .collect()
                })
                .collect()
        } else {
            // The outputs' shapes, from a trace of f outside (dead unless used).
            let probe = f(x.map_ref(|o| o.clone()));
            let ys: Vec<Op> = probe.leaves().into_iter().cloned().collect();
            let mut yd = Vec::with_capacity(ys.len());
            for y in &ys {
                match y.dims() {
                    Ok(d) => yd.push(d),
                    Err(_) => return fail(y.clone(), ys.len()),
                }
            }
            let yt = ys.first().and_then(|y| y.element_type().ok()).unwrap_or(ty);
            let cts = basis(&yd, yt);
            let ny = ys.len();
            let mut axes = vec![None; nx];
            axes.extend(vec![Some(0); ny]);
            let rows = self.vmap(
                &crate::batching::Vmap::new().in_axes(axes),
                (xs.clone(), cts),
                |bb, (xv, cv)| {
                    let p = x.rebuild(xv.clone()).expect("one leaf each");
                    let y = f(p);
                    let yl: Vec<&Op> = y.leaves();
                    let cr: Vec<&Op> = cv.iter().collect();
                    let xr: Vec<&Op> = xv.iter().collect();
                    bb.on(loc).vjp(&yl, &cr, &xr)
                },
            );
            let nys = sizes(&yd);
            // rows[j]: [Ny, x_j...]; block i: [m_i, x_j...] → [y_i..., x_j...].
            (0..ny)
                .map(|i| {
                    rows.iter()
                        .enumerate()
                        .map(|(j, r)| {
                            let mut d = yd[i].clone();
                            d.extend(&xd[j]);
                            split(r, &nys, i).reshape(&d)
                        })
                        .collect()
                })
                .collect()
        }
    }
}

/// The `n × n` identity of type `ty`, its rows reshaped to `dims`: `[n, dims…]`.
fn identity(b: &Builder, ty: crate::shape::ElementType, n: i64, dims: &[i64]) -> Op {
    let r = b.iota(crate::shape::ElementType::S32, &[n, n], 0);
    let c = b.iota(crate::shape::ElementType::S32, &[n, n], 1);
    let eye = r.compare(&c, crate::Comparison::Eq).convert(ty);
    let mut d = vec![n];
    d.extend(dims);
    eye.reshape(&d)
}

/// The engine: pushes the `seeds` (a tangent per input value) forward through the
/// instructions of `comp` that lie between them and `roots`, in order, and returns
/// the tangent of each root (`None`: zero). Emits into `b`'s computation (which is
/// `comp`).
pub(crate) fn push_forward(
    b: &Builder,
    comp: CompId,
    seeds: &[(Value, Ct)],
    roots: &[Value],
    start: usize,
) -> Result<Vec<Option<Ct>>, Op> {
    let (instrs, stopped, named) = {
        let g = b.g.borrow();
        let c = g.comp(comp);
        let end = roots
            .iter()
            .map(|r| r.instr as usize + 1)
            .max()
            .unwrap_or(0);
        let instrs: Vec<crate::ir::Instr> = c.instrs[..end.min(c.instrs.len())].to_vec();
        let stopped: Vec<bool> = (0..instrs.len())
            .map(|i| g.stopped.contains(&(comp, Value::of(i as u32))))
            .collect();
        let named: HashMap<u32, (String, crate::batching::Named)> = g
            .vmap_named
            .iter()
            .filter(|((c, _), _)| *c == comp)
            .map(|((_, i), v)| (*i, v.clone()))
            .collect();
        (instrs, stopped, named)
    };
    let mut tan: HashMap<Value, Ct> = HashMap::new();
    for (v, t) in seeds {
        // Two seeds on one value add.
        let sum = match (tan.remove(v), t) {
            (Some(Ct::Array(old)), Ct::Array(t)) => {
                Ct::Array(old.binary(crate::BinaryOp::Add, t, b_loc(&instrs, v)))
            }
            _ => t.clone(),
        };
        tan.insert(*v, sum);
    }
    let first = seeds
        .iter()
        .map(|(v, _)| v.instr as usize)
        .min()
        .unwrap_or(usize::MAX)
        .max(start);
    let op = |v: Value| b.op(comp, v);
    for i in first..instrs.len() {
        let ins = &instrs[i];
        if seeds.iter().any(|(v, _)| v.instr as usize == i) || stopped[i] {
            continue;
        }
        let tangents: Vec<Option<Ct>> = ins.operands.iter().map(|v| tan.get(v).cloned()).collect();
        if tangents.iter().all(Option::is_none) {
            continue;
        }
        let loc = ins.loc;
        let shape = b.g.borrow().shapes.get(ins.shape).clone();
        let multi = ins.kind.multi_result(ins.operands.len());
        let nres = match (&shape, multi) {
            (Shape::Tuple(e), true) => e.len(),
            _ => 1,
        };
        let results: Vec<Op> = (0..nres)
            .map(|k| {
                op(Value {
                    instr: i as u32,
                    result: k as u32,
                })
            })
            .collect();
        let operands: Vec<Op> = ins.operands.iter().map(|v| op(*v)).collect();
        let out: Vec<Option<Ct>> = if let Some((axis, what)) = named.get(&(i as u32)) {
            // A named collective over a vmapped axis is linear: the same collective
            // of the tangent (a stand-in for the batching pass to resolve).
            match &tangents[0] {
                Some(Ct::Array(t)) => vec![Some(Ct::Array(crate::batching::marker(
                    t,
                    axis,
                    what.clone(),
                    loc,
                )))],
                _ => vec![None],
            }
        } else {
            match &ins.kind {
                OpKind::Tuple => vec![Some(Ct::Tuple(
                    tangents
                        .iter()
                        .map(|t| match t {
                            Some(Ct::Array(a)) => Some(a.clone()),
                            _ => None,
                        })
                        .collect(),
                ))],
                OpKind::GetTupleElement { index } => match &tangents[0] {
                    Some(Ct::Tuple(e)) => {
                        vec![e.get(*index as usize).cloned().flatten().map(Ct::Array)]
                    }
                    _ => vec![None],
                },
                kind => {
                    let node = JvpNode {
                        kind,
                        operands: &operands,
                        results: &results,
                        tangents: &tangents,
                        b,
                        loc,
                        at: (comp, i as u32),
                    };
                    let _origin = b.on(loc);
                    match crate::ops::table::jvp(&node) {
                        Ok(t) if t.len() == nres => t,
                        Ok(_) => {
                            return Err(b.fail_graph(
                                crate::error::GraphError::Recorded {
                                    reason: "jvp: a rule gave the wrong number of tangents (a bug)"
                                        .into(),
                                },
                                loc,
                            ));
                        }
                        Err(reason) => {
                            return Err(b.fail_with(crate::error::Error::NoRule {
                                transform: "tangent",
                                op: kind.opcode().name(),
                                form: reason,
                                location: Some(loc),
                            }));
                        }
                    }
                }
            }
        };
        for (k, t) in out.into_iter().enumerate() {
            if let Some(t) = t {
                if let Some(f) = match &t {
                    Ct::Array(a) if a.is_poisoned() => Some(a.clone()),
                    _ => None,
                } {
                    return Err(f);
                }
                tan.insert(
                    Value {
                        instr: i as u32,
                        result: k as u32,
                    },
                    t,
                );
            }
        }
    }
    Ok(roots.iter().map(|r| tan.get(r).cloned()).collect())
}

fn b_loc(instrs: &[crate::ir::Instr], v: &Value) -> &'static Location<'static> {
    instrs
        .get(v.instr as usize)
        .map(|i| i.loc)
        .unwrap_or(Location::caller())
}

/// The tangent rule of a call: the callee's instructions copied into the caller's
/// computation on the operands, and the tangents pushed through the copy.
pub(crate) fn through_body(n: &JvpNode, callee: CompId) -> Tangents {
    let here = n.b.clone();
    let start = here.g.borrow().comp(here.comp).instrs.len();
    let args = elements_of(n.operands, n.loc);
    let outs = crate::autodiff::inline(&here, callee, &args);
    if let Some(f) = outs.iter().find(|o| o.is_poisoned()) {
        return Err(crate::batching::failure(f).unwrap_or_default());
    }
    let arg_tans = elements_of_tangents(n.operands, n.tangents);
    let seeds: Vec<(Value, Ct)> = args
        .iter()
        .zip(arg_tans)
        .filter_map(|(a, t)| t.map(|t| (a.v, Ct::Array(t))))
        .collect();
    let roots: Vec<Value> = outs.iter().map(|o| o.v).collect();
    // The operands come before the copy: seed them, walk only the copy.
    let t = push_forward(&here, here.comp, &seeds, &roots, start)
        .map_err(|f| crate::batching::failure(&f).unwrap_or_default())?;
    let tuple = matches!(n.results[0].shape(), Ok(Shape::Tuple(_)));
    Ok(vec![if tuple {
        Some(Ct::Tuple(
            t.into_iter()
                .map(|x| match x {
                    Some(Ct::Array(a)) => Some(a),
                    _ => None,
                })
                .collect(),
        ))
    } else {
        t.into_iter().next().flatten()
    }])
}

/// The arguments of a copied body (`autodiff::inline`): the operands, or the
/// elements of a single tuple operand.
pub(crate) fn elements_of(operands: &[Op], loc: &'static Location<'static>) -> Vec<Op> {
    match operands {
        [one] => match one.shape() {
            Ok(Shape::Tuple(e)) => (0..e.len())
                .map(|i| one.on(loc).get_tuple_element(i))
                .collect(),
            _ => vec![one.clone()],
        },
        _ => operands.to_vec(),
    }
}

/// The tangents of [`elements_of`]'s arguments.
pub(crate) fn elements_of_tangents(operands: &[Op], tangents: &[Option<Ct>]) -> Vec<Option<Op>> {
    match (operands, tangents) {
        ([one], [t]) if matches!(one.shape(), Ok(Shape::Tuple(_))) => {
            let n = match one.shape() {
                Ok(Shape::Tuple(e)) => e.len(),
                _ => 0,
            };
            match t {
                Some(Ct::Tuple(e)) => (0..n).map(|i| e.get(i).cloned().flatten()).collect(),
                _ => vec![None; n],
            }
        }
        _ => tangents
            .iter()
            .map(|t| match t {
                Some(Ct::Array(a)) => Some(a.clone()),
                _ => None,
            })
            .collect(),
    }
}

/// The body computation `comp` (a comparator, a map's function) inlined into
/// `b`'s computation on `args` (its declared parameters, in order); the values of
/// enclosing computations it captured are used as they are. Returns its root.
pub(crate) fn inline(b: &Builder, comp: CompId, args: &[Op]) -> Result<Op, String> {
    let (params, captures, parent) = {
        let g = b.g.borrow();
        let c = g.comp(comp);
        let caps: HashMap<u32, Value> = c.captures.iter().map(|(o, p)| (*p, *o)).collect();
        (c.params.clone(), caps, c.parent)
    };
    let mut all = args.to_vec();
    for p in params.iter().skip(args.len()) {
        let outer = p.and_then(|p| captures.get(&p).copied());
        match (outer, parent) {
            (Some(v), Some(parent)) => all.push(b.op(parent, v)),
            _ => return Err("a body with more parameters than its operands".into()),
        }
    }
    let out = crate::autodiff::inline(b, comp, &all);
    match out.into_iter().next() {
        Some(o) if o.is_poisoned() => Err(crate::batching::failure(&o).unwrap_or_default()),
        Some(o) => Ok(o),
        None => Err("a body without a result".into()),
    }
}
