//! Optimizers that build their update into the program, over trees of parameters,
//! with optax's update rules (`optax/_src/alias.py`, `transform.py`,
//! `transforms/`): [`sgd`] (`optax.sgd`: `trace` then scale by `−lr`), [`adam`]
//! (`scale_by_adam` with bias correction, then `−lr`), [`adamw`] (`scale_by_adam`,
//! `add_decayed_weights`, then `−lr`), and [`clip_by_global_norm`] (optax's, as a
//! function or chained in front of an optimizer with
//! [`Optimizer::clip_by_global_norm`]).
//!
//! An [`Optimizer`] is a small value. [`Optimizer::init`] builds its state for a
//! tree of parameters `P` (zeros made in the program, and a step counter);
//! [`Optimizer::update`] takes the gradients, the state and the parameters and
//! returns the new parameters and the new state. The state, [`OptState`], is itself
//! a tree, so it sits in the training state next to the parameters and a whole
//! training step is `fn(TrainState<Op>) -> TrainState<Op>`, ready for
//! [`ClientExt::jit_donating`](xlaclient_core::ClientExt::jit_donating):
//!
//! ```
//! use xlaclient_core::{Builder, Op, Tree};
//! use xlaclient_nn::{losses, optim, Activation, Mlp, MlpParams, OptState};
//!
//! #[derive(Tree)]
//! struct TrainState<T> {
//!     params: MlpParams<T>,
//!     opt: OptState<T, MlpParams<T>>,
//! }
//!
//! let net = Mlp::new(&[1, 32, 1], Activation::Tanh);
//! let opt = optim::adam(1e-3, 0.9, 0.999, 1e-8);
//! let b = Builder::new("train");
//! // Initialisation, in the program too.
//! let params = net.init(&b.prng_key(0));
//! let state = TrainState { opt: opt.init(&params), params };
//! // One step on a batch.
//! let x = b.constant_vec(&[0.5f32, -1.0]).reshape(&[2, 1]);
//! let y = x.sin();
//! let step = |s: TrainState<Op>| {
//!     let (_loss, (), g) =
//!         b.value_and_grad(s.params.clone(), |p| (losses::mse(&net.apply(&p, &x), &y), ()));
//!     let (params, opt_state) = opt.update(&g, s.opt, &s.params);
//!     TrainState { params, opt: opt_state }
//! };
//! let next = step(state);
//! assert_eq!(next.num_leaves(), 4 + 1 + 2 * 4); // params, count, mu and nu
//! let module = b.build_tuple(&next.leaves())?;
//! # let _ = module;
//! # Ok::<(), xlaclient_nn::Error>(())
//! ```

use super::schedule::Schedule;
use crate::tree::Leaf;
use crate::{Builder, Comparison, ElementType, Op, Shape, Tree};

/// An optimizer's state for parameters `P` (a tree of `L`): the number of updates
/// applied (`s32`, optax's `count`, which stops at `i32::MAX`), the first moment
/// (Adam's `mu`) or momentum trace (SGD's `trace`), and the second moment (Adam's
/// `nu`); a moment the optimizer does not keep is `None`.
///
/// A tree with leaf type `L` (count, then `mu`'s leaves, then `nu`'s), so that
/// `OptState<T, Params<T>>` can be a field of a `#[derive(Tree)]` struct.
#[derive(Clone, Debug, PartialEq)]
pub struct OptState<L, P> {
    /// Updates applied so far, an `s32` scalar.
    pub count: L,
    /// First moment or momentum trace, shaped like the parameters.
    pub mu: Option<P>,
    /// Second moment, shaped like the parameters.
    pub nu: Option<P>,
}

impl<L: Leaf, P: Tree<L>> Tree<L> for OptState<L, P> {
    type With<U: Leaf> = OptState<U, P::With<U>>;

    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a L)) {
        f(&self.count);
        self.mu.visit(f);
        self.nu.visit(f);
    }

    fn try_map_ref<U: Leaf, E>(
        &self,
        f: &mut dyn FnMut(&L) -> Result<U, E>,
    ) -> Result<Self::With<U>, E> {
        Ok(OptState {
            count: f(&self.count)?,
            mu: self.mu.try_map_ref(f)?,
            nu: self.nu.try_map_ref(f)?,
        })
    }

    fn try_map<U: Leaf, E>(self, f: &mut dyn FnMut(L) -> Result<U, E>) -> Result<Self::With<U>, E> {
        Ok(OptState {
            count: f(self.count)?,
            mu: self.mu.try_map(f)?,
            nu: self.nu.try_map(f)?,
        })
    }

    fn structure(&self, out: &mut Vec<usize>) {
        self.mu.structure(out);
        self.nu.structure(out);
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Rule {
    Sgd {
        lr: Schedule,
        momentum: f64,
        nesterov: bool,
    },
    Adam {
        lr: Schedule,
        b1: f64,
        b2: f64,
        eps: f64,
        weight_decay: f64,
    },
}

/// An optimizer: an update rule and its hyperparameters, optionally with gradient
/// clipping in front (see [the module docs](self)). Made by [`sgd`], [`adam`] and
/// [`adamw`].
#[derive(Clone, Debug, PartialEq)]
pub struct Optimizer {
    rule: Rule,
    clip: Option<f64>,
}

/// `optax.sgd(lr, momentum, nesterov)`: with `momentum > 0` the trace
/// `t ← g + momentum·t` and the update `−lr·t` (Nesterov: `−lr·(g + momentum·t)`);
/// with `momentum == 0` and no Nesterov, `−lr·g` and no trace in the state
/// (optax's `momentum=None`).
pub fn sgd(lr: impl Into<Schedule>, momentum: f64, nesterov: bool) -> Optimizer {
    Optimizer {
        rule: Rule::Sgd {
            lr: lr.into(),
            momentum,
            nesterov,
        },
        clip: None,
    }
}

/// `optax.adam(lr, b1, b2, eps)`: `m ← (1−b1)·g + b1·m`, `v ← (1−b2)·g² + b2·v`,
/// update `−lr · m̂ / (√v̂ + eps)` with `m̂ = m / (1 − b1ᵗ)`, `v̂ = v / (1 − b2ᵗ)` at
/// step `t` (counted from 1; `b^t` in `f32`).
pub fn adam(lr: impl Into<Schedule>, b1: f64, b2: f64, eps: f64) -> Optimizer {
    adamw(lr, b1, b2, eps, 0.0)
}

/// `optax.adamw(lr, b1, b2, eps, weight_decay)`: Adam's direction plus
/// `weight_decay · params` (`add_decayed_weights`), then scaled by `−lr` (optax's
/// default `weight_decay` is `1e-4`).
pub fn adamw(lr: impl Into<Schedule>, b1: f64, b2: f64, eps: f64, weight_decay: f64) -> Optimizer {
    Optimizer {
        rule: Rule::Adam {
            lr: lr.into(),
            b1,
            b2,
            eps,
            weight_decay,
        },
        clip: None,
    }
}

/// The gradient of each leaf paired with its state: leaves of `tree`, or `None`.
fn leaves_of<P: Tree<Op>>(tree: &Option<P>) -> Option<Vec<Op>> {
    tree.as_ref()
        .map(|t| t.leaves().into_iter().cloned().collect())
}

/// `tree` with every leaf `failed`: what a refused call returns, so that whatever
/// is built on any of its leaves fails with the recorded error.
fn failed_like<P: Tree<Op, With<Op> = P>>(tree: &P, failed: &Op) -> P {
    tree.map_ref(|_| failed.clone())
}

/// The structure of `tree` ([`Tree::structure`]) and its number of leaves, for
/// error messages.
fn shape_of_tree<P: Tree<Op>>(tree: &P) -> (Vec<usize>, usize) {
    let mut s = Vec::new();
    tree.structure(&mut s);
    (s, tree.num_leaves())
}

/// A scalar of `x`'s element type.
fn scalar_like(x: &Op, v: f64) -> Op {
    let ty = x.element_type().unwrap_or(ElementType::F32);
    x.builder().constant_of_type(ty, v)
}

/// Zeros of `x`'s shape and element type.
fn zeros_like(x: &Op) -> Op {
    match (x.element_type(), x.dims()) {
        (Ok(ty), Ok(dims)) => x.builder().zeros(ty, &dims),
        _ => x.clone(), // an op that failed: its error travels on
    }
}

/// `x` converted to `like`'s element type (unchanged if it has it).
fn convert_like(x: &Op, like: &Op) -> Op {
    match (x.element_type(), like.element_type()) {
        (Ok(a), Ok(b)) if a != b => x.convert(b),
        _ => x.clone(),
    }
}

impl Optimizer {
    /// The same optimizer with its gradients clipped first by
    /// [`clip_by_global_norm`]`(max_norm)` (`optax.chain(clip_by_global_norm(max_norm),
    /// opt)`).
    pub fn clip_by_global_norm(self, max_norm: f64) -> Optimizer {
        Optimizer {
            clip: Some(max_norm),
            ..self
        }
    }

    /// Which moments the state holds: (mu, nu).
    fn moments(&self) -> (bool, bool) {
        match self.rule {
            Rule::Sgd {
                momentum, nesterov, ..
            } => (momentum != 0.0 || nesterov, false),
            Rule::Adam { .. } => (true, true),
        }
    }

    /// The initial state for `params`: count 0, moments of zeros of each leaf's
    /// shape and type, built in `params`' program.
    ///
    /// A tree with no leaves has no program to build the count in: its state's
    /// count is then a failed op (in a graph of its own) carrying an
    /// [`Error::Graph`](xlaclient_core::Error::Graph) at the caller's line, which a `jit` of the
    /// state returns. [`init_in`](Self::init_in) builds the state of any tree, an
    /// empty one included, in a given program.
    #[track_caller]
    pub fn init<P>(&self, params: &P) -> OptState<Op, P>
    where
        P: Tree<Op, With<Op> = P>,
    {
        match params.leaves().first() {
            Some(leaf) => self.init_in(&leaf.builder(), params),
            None => {
                let failed = Builder::new("optimizer_state").error(
                    "Optimizer::init: the parameter tree has no leaves, so there is no \
                     program to build the state in; use Optimizer::init_in(&builder, &params)",
                );
                let (mu, nu) = self.moments();
                OptState {
                    count: failed,
                    mu: mu.then(|| params.map_ref(Op::clone)),
                    nu: nu.then(|| params.map_ref(Op::clone)),
                }
            }
        }
    }

    /// The initial state for `params` with its count built in `b`'s program (the
    /// moments, zeros like each leaf, in the leaves' own): as
    /// [`init`](Self::init), and for a tree with no leaves the state optax gives
    /// it, a count of 0 and empty moments.
    #[track_caller]
    pub fn init_in<P>(&self, b: &Builder, params: &P) -> OptState<Op, P>
    where
        P: Tree<Op, With<Op> = P>,
    {
        let (mu, nu) = self.moments();
        OptState {
            count: b.constant(0i32),
            mu: mu.then(|| params.map_ref(zeros_like)),
            nu: nu.then(|| params.map_ref(zeros_like)),
        }
    }

    /// The shapes of the state for parameters of shapes `params` (the spec of a
    /// state made on the host or read back).
    pub fn state_spec<S>(&self, params: &S) -> OptState<Shape, S>
    where
        S: Tree<Shape, With<Shape> = S>,
    {
        let (mu, nu) = self.moments();
        OptState {
            count: Shape::of::<i32>(&[]),
            mu: mu.then(|| params.map_ref(Shape::clone)),
            nu: nu.then(|| params.map_ref(Shape::clone)),
        }
    }

    /// One step: the new parameters and state from the gradients `grads` (a tree
    /// like `params`), the state and the current parameters (optax's `update`
    /// followed by `apply_updates`). Built in the program of the state's count, so
    /// a tree with no leaves works as in optax: nothing to update, the count moves
    /// on.
    ///
    /// Arguments that do not fit together are refused as the builder's ops refuse
    /// theirs: an [`Error::Graph`](xlaclient_core::Error::Graph) at the caller's
    /// line is recorded (and returned by `build`), and every leaf returned is a
    /// failed op carrying it. That is when `grads` has another structure than
    /// `params`, or the state's moments do (a state made for other parameters), or
    /// the state lacks a moment this optimizer keeps or holds one it does not (a
    /// state made by another optimizer).
    #[track_caller]
    pub fn update<P>(&self, grads: &P, state: OptState<Op, P>, params: &P) -> (P, OptState<Op, P>)
    where
        P: Tree<Op, With<Op> = P>,
    {
        // The count is always there, so its program is where the update is built,
        // whatever the parameters' tree holds.
        let b = state.count.builder();
        let refuse = |failed: Op| {
            (
                failed_like(params, &failed),
                OptState {
                    count: failed.clone(),
                    mu: state.mu.as_ref().map(|m| failed_like(m, &failed)),
                    nu: state.nu.as_ref().map(|m| failed_like(m, &failed)),
                },
            )
        };
        let expected = shape_of_tree(params);
        let others = [
            ("the gradients", Some(grads)),
            ("the state's mu", state.mu.as_ref()),
            ("the state's nu", state.nu.as_ref()),
        ];
        for (what, tree) in others {
            let Some(tree) = tree else { continue };
            let got = shape_of_tree(tree);
            if got != expected {
                let failed = b.error(format!(
                    "Optimizer::update: {what} and the parameters differ in structure \
                     ({} leaves, structure {:?}; the parameters: {} leaves, structure {:?})",
                    got.1, got.0, expected.1, expected.0
                ));
                return refuse(failed);
            }
        }
        let clipped;
        let grads = match self.clip {
            Some(max_norm) => {
                clipped = clip_by_global_norm(grads, max_norm);
                &clipped
            }
            None => grads,
        };
        let g: Vec<Op> = grads.leaves().into_iter().cloned().collect();
        let p: Vec<Op> = params.leaves().into_iter().cloned().collect();
        let mu = leaves_of(&state.mu);
        let nu = leaves_of(&state.nu);
        // The learning rate of this update: the schedule at the updates applied
        // before it (optax's scale_by_learning_rate), times −1; a constant stays a
        // Rust number.
        let lr_schedule = match &self.rule {
            Rule::Sgd { lr, .. } | Rule::Adam { lr, .. } => lr.clone(),
        };
        let lr_now = match lr_schedule {
            Schedule::Constant(lr) => Err(lr),
            schedule => Ok(schedule.at(&state.count)),
        };
        let scale = |x: &Op| match &lr_now {
            Ok(lr) => x * &(-&convert_like(lr, x)),
            Err(lr) => x * -lr,
        };
        // numerics.safe_increment: the count stops at i32::MAX.
        let count = &state.count;
        let below = count.compare(&b.constant(i32::MAX), Comparison::Lt);
        let count = b.select(&below, &(count + 1i64), count);

        let wants_mu = self.moments().0;
        let (updates, new_mu, new_nu): (Vec<Op>, Option<Vec<Op>>, Option<Vec<Op>>) =
            match (self.rule.clone(), mu, nu) {
                // transform.trace: t ← g + decay·t; Nesterov: g + decay·t.
                (
                    Rule::Sgd {
                        momentum, nesterov, ..
                    },
                    Some(mu),
                    None,
                ) if wants_mu => {
                    let trace: Vec<Op> = g
                        .iter()
                        .zip(&mu)
                        .map(|(g, t)| g + &(t * momentum))
                        .collect();
                    let dir: Vec<Op> = if nesterov {
                        g.iter()
                            .zip(&trace)
                            .map(|(g, t)| g + &(t * momentum))
                            .collect()
                    } else {
                        trace.clone()
                    };
                    let u = dir.iter().map(&scale).collect();
                    (u, Some(trace), None)
                }
                (Rule::Sgd { .. }, None, None) if !wants_mu => {
                    (g.iter().map(&scale).collect(), None, None)
                }
                (
                    Rule::Adam {
                        b1,
                        b2,
                        eps,
                        weight_decay,
                        ..
                    },
                    Some(mu),
                    Some(nu),
                ) => {
                    // tree_update_moment: (1 − decay)·g^order + decay·t.
                    let m: Vec<Op> = g
                        .iter()
                        .zip(&mu)
                        .map(|(g, t)| &(g * (1.0 - b1)) + &(t * b1))
                        .collect();
                    let v: Vec<Op> = g
                        .iter()
                        .zip(&nu)
                        .map(|(g, t)| &(&(g * g) * (1.0 - b2)) + &(t * b2))
                        .collect();
                    // The new moments go through an optimization barrier, so the
                    // parameter update reads them rather than recomputing them from
                    // the old ones: XLA then updates all three in place without first
                    // copying the old moments (two fewer passes over the state).
                    let (m, v): (Vec<Op>, Vec<Op>) = m
                        .iter()
                        .zip(&v)
                        .map(|(m, v)| {
                            // The barrier gives one op per value (a failed barrier
                            // gives failed ops, still two); the values themselves,
                            // unbarriered, would compute the same.
                            match b.optimization_barrier(&[m, v]).as_slice() {
                                [m, v] => (m.clone(), v.clone()),
                                _ => (m.clone(), v.clone()),
                            }
                        })
                        .unzip();
                    // tree_bias_correction: 1 − decay^count in f32, then the
                    // moment's type.
                    let t = count.convert(ElementType::F32);
                    let bc = |decay: f64| 1.0 - &b.constant(decay as f32).pow(&t);
                    let (bc1, bc2) = (bc(b1), bc(b2));
                    let u = m
                        .iter()
                        .zip(&v)
                        .zip(&p)
                        .map(|((m, v), p)| {
                            let m_hat = m / &convert_like(&bc1, m);
                            let v_hat = v / &convert_like(&bc2, v);
                            let mut u = &m_hat / &(&v_hat.sqrt() + eps);
                            if weight_decay != 0.0 {
                                // add_decayed_weights: g + wd·p.
                                u = &u + &(p * weight_decay);
                            }
                            scale(&u)
                        })
                        .collect();
                    (u, Some(m), Some(v))
                }
                (_, mu, nu) => {
                    let names = |mu: bool, nu: bool| match (mu, nu) {
                        (true, true) => "mu and nu",
                        (true, false) => "mu only",
                        (false, true) => "nu only",
                        (false, false) => "no moment",
                    };
                    let (wants_mu, wants_nu) = self.moments();
                    let failed = b.error(format!(
                        "Optimizer::update: the state holds {}, this optimizer keeps {} \
                         (was the state made by another optimizer?)",
                        names(mu.is_some(), nu.is_some()),
                        names(wants_mu, wants_nu)
                    ));
                    return refuse(failed);
                }
            };
        // apply_updates: p + u.
        let new_p: Vec<Op> = p.iter().zip(&updates).map(|(p, u)| p + u).collect();
        // One new leaf per leaf of `params` (the trees' structures were checked
        // above), so the rebuilds cannot fail; should one, its leaves fail.
        let rebuild = |leaves: Vec<Op>| match params.rebuild(leaves) {
            Ok(t) => t,
            Err(e) => failed_like(params, &b.error(format!("Optimizer::update: {e}"))),
        };
        (
            rebuild(new_p),
            OptState {
                count,
                mu: new_mu.map(rebuild),
                nu: new_nu.map(rebuild),
            },
        )
    }
}

/// The global L2 norm of all leaves, `√(Σ x²)` (`optax.tree.norm`), a scalar of the
/// first leaf's type.
///
/// A tree with no leaves (whose norm optax gives as 0) has no program to build the
/// norm in: the result is then a failed op, in a graph of its own, carrying an
/// [`Error::Graph`](xlaclient_core::Error::Graph) at the caller's line.
#[track_caller]
pub fn global_norm<P: Tree<Op>>(tree: &P) -> Op {
    let leaves = tree.leaves();
    let Some((first, rest)) = leaves.split_first() else {
        return Builder::new("global_norm").error(
            "global_norm: the tree has no leaves, so there is no program to build the norm in",
        );
    };
    let sq = |x: &Op| {
        let rank = x.dims().map(|d| d.len()).unwrap_or(0) as i64;
        let axes: Vec<i64> = (0..rank).collect();
        convert_like(&(x * x).sum(&axes, false), first)
    };
    let mut total = sq(first);
    for x in rest {
        total = &total + &sq(x);
    }
    total.sqrt()
}

/// `optax.clip_by_global_norm(max_norm)`: every leaf scaled by `max_norm / norm`
/// when the global norm ([`global_norm`]) is at least `max_norm`, unchanged below
/// it (computed as optax does: `select(norm < max_norm, t, (t / norm) · max_norm)`).
/// A tree with no leaves comes back as it is (as from optax).
#[track_caller]
pub fn clip_by_global_norm<P>(tree: &P, max_norm: f64) -> P
where
    P: Tree<Op, With<Op> = P>,
{
    if tree.num_leaves() == 0 {
        return tree.map_ref(Op::clone);
    }
    let norm = global_norm(tree);
    let b = norm.builder();
    let trigger = norm.compare(&scalar_like(&norm, max_norm), Comparison::Lt);
    tree.map_ref(|t| {
        let n = convert_like(&norm, t);
        b.select(&trigger, t, &(&(t / &n) * max_norm))
    })
}
