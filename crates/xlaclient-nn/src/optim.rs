//! Optimizers that build their update into the program, over trees of parameters,
//! with optax's update rules (`optax/_src/alias.py`, `transform.py`,
//! `transforms/`). An [`Optimizer`] is optax's `chain` of gradient
//! transformations ([`Transform`]), applied in order: [`chain`] composes any of
//! them, [`transform`] has the one-step ones (`clip_by_global_norm`,
//! `scale_by_adam`, `trace`, `add_decayed_weights`, `scale_by_learning_rate`,
//! `scale_by_schedule`, `scale`), and the aliases are chains: [`sgd`]
//! (`optax.sgd`: `trace` then scale by `−lr`), [`adam`] (`scale_by_adam` with bias
//! correction, then `−lr`), [`adamw`] (`scale_by_adam`, `add_decayed_weights`,
//! then `−lr`). [`clip_by_global_norm`] is also a function of a tree, and
//! [`Optimizer::clip_by_global_norm`] puts it in front of a chain.
//!
//! ```
//! use xlaclient_nn::optim::{self, transform};
//! // optax.chain(optax.clip_by_global_norm(0.5), optax.adam(2.5e-4, eps=1e-5))
//! let opt = optim::chain([
//!     transform::clip_by_global_norm(0.5),
//!     optim::adam(2.5e-4, 0.9, 0.999, 1e-5),
//! ]);
//! # let _ = opt;
//! ```
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

/// One gradient transformation, optax's `GradientTransformation`: a step of an
/// [`Optimizer`], which is a chain of them applied in order to the gradients (the
/// result is added to the parameters). Made by the constructors in [`transform`]
/// (as optax's functions of the same names) and composed with [`chain`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Transform {
    /// `optax.clip_by_global_norm(max_norm)`: see [`clip_by_global_norm`].
    ClipByGlobalNorm(f64),
    /// `optax.scale_by_adam(b1, b2, eps)`: the moments `m ← (1−b1)·g + b1·m`, `v ←
    /// (1−b2)·g² + b2·v`, the update `m̂ / (√v̂ + eps)` with bias correction at step
    /// `t` (counted from 1; `b^t` in `f32`). Keeps `mu` and `nu`.
    ScaleByAdam {
        /// Decay of the first moment.
        b1: f64,
        /// Decay of the second moment.
        b2: f64,
        /// Added to `√v̂`.
        eps: f64,
    },
    /// `optax.trace(decay, nesterov)`: `t ← g + decay·t`, the update `t` (Nesterov:
    /// `g + decay·t`). Keeps `mu`.
    Trace {
        /// The momentum.
        decay: f64,
        /// Nesterov's form.
        nesterov: bool,
    },
    /// `optax.add_decayed_weights(weight_decay)`: `u + weight_decay · params`.
    AddDecayedWeights(f64),
    /// `optax.scale_by_learning_rate(lr)`: `u · (−lr(count))`, the schedule at the
    /// number of updates applied before this one.
    ScaleByLearningRate(Schedule),
    /// `optax.scale_by_schedule(f)`: `u · f(count)` (no sign change).
    ScaleBySchedule(Schedule),
    /// `optax.scale(factor)`: `u · factor`.
    Scale(f64),
}

impl Transform {
    /// Which moments it keeps in the state: (mu, nu).
    fn moments(&self) -> (bool, bool) {
        match self {
            Transform::ScaleByAdam { .. } => (true, true),
            Transform::Trace { .. } => (true, false),
            _ => (false, false),
        }
    }
}

/// An optimizer: a chain of [`Transform`]s applied in order to the gradients,
/// optax's `chain(...)` (see [the module docs](self)). Made by [`sgd`], [`adam`],
/// [`adamw`], the one-step constructors of [`transform`], and [`chain`] of any of
/// them.
///
/// The state ([`OptState`]) has one step count, shared by every step of the chain
/// (optax keeps one per step that counts; they are always equal), and room for the
/// moments of one moment-keeping step ([`Transform::ScaleByAdam`] or
/// [`Transform::Trace`]): a chain with two of them is refused by
/// [`init`](Optimizer::init) and [`update`](Optimizer::update) with an error.
#[derive(Clone, Debug, PartialEq)]
pub struct Optimizer {
    transforms: Vec<Transform>,
}

/// `optax.chain(*parts)`: the transformations of each part, in order, as one
/// optimizer.
///
/// ```
/// use xlaclient_nn::optim::{self, transform};
/// // PureJaxRL's optimizer: optax.chain(clip_by_global_norm(0.5), adam(2.5e-4, eps=1e-5)).
/// let opt = optim::chain([
///     transform::clip_by_global_norm(0.5),
///     optim::adam(2.5e-4, 0.9, 0.999, 1e-5),
/// ]);
/// assert_eq!(opt, optim::adam(2.5e-4, 0.9, 0.999, 1e-5).clip_by_global_norm(0.5));
/// assert_eq!(opt.transforms().len(), 3); // clip, scale_by_adam, scale_by_learning_rate
/// ```
pub fn chain(parts: impl IntoIterator<Item = Optimizer>) -> Optimizer {
    Optimizer {
        transforms: parts.into_iter().flat_map(|o| o.transforms).collect(),
    }
}

/// optax's one-step gradient transformations, each an [`Optimizer`] of one
/// [`Transform`], to compose with [`chain`].
pub mod transform {
    use super::{Optimizer, Schedule, Transform};

    fn one(t: Transform) -> Optimizer {
        Optimizer {
            transforms: vec![t],
        }
    }

    /// `optax.clip_by_global_norm(max_norm)`.
    pub fn clip_by_global_norm(max_norm: f64) -> Optimizer {
        one(Transform::ClipByGlobalNorm(max_norm))
    }

    /// `optax.scale_by_adam(b1, b2, eps)`.
    pub fn scale_by_adam(b1: f64, b2: f64, eps: f64) -> Optimizer {
        one(Transform::ScaleByAdam { b1, b2, eps })
    }

    /// `optax.trace(decay, nesterov)`.
    pub fn trace(decay: f64, nesterov: bool) -> Optimizer {
        one(Transform::Trace { decay, nesterov })
    }

    /// `optax.add_decayed_weights(weight_decay)`.
    pub fn add_decayed_weights(weight_decay: f64) -> Optimizer {
        one(Transform::AddDecayedWeights(weight_decay))
    }

    /// `optax.scale_by_learning_rate(lr)`: multiplies by `−lr(count)`.
    pub fn scale_by_learning_rate(lr: impl Into<Schedule>) -> Optimizer {
        one(Transform::ScaleByLearningRate(lr.into()))
    }

    /// `optax.scale_by_schedule(f)`: multiplies by `f(count)`.
    pub fn scale_by_schedule(schedule: impl Into<Schedule>) -> Optimizer {
        one(Transform::ScaleBySchedule(schedule.into()))
    }

    /// `optax.scale(factor)`.
    pub fn scale(factor: f64) -> Optimizer {
        one(Transform::Scale(factor))
    }
}

/// `optax.sgd(lr, momentum, nesterov)`: with `momentum > 0` the trace
/// `t ← g + momentum·t` and the update `−lr·t` (Nesterov: `−lr·(g + momentum·t)`);
/// with `momentum == 0` and no Nesterov, `−lr·g` and no trace in the state
/// (optax's `momentum=None`). The chain `[trace(momentum, nesterov),
/// scale_by_learning_rate(lr)]`.
pub fn sgd(lr: impl Into<Schedule>, momentum: f64, nesterov: bool) -> Optimizer {
    let mut parts = Vec::new();
    if momentum != 0.0 || nesterov {
        parts.push(transform::trace(momentum, nesterov));
    }
    parts.push(transform::scale_by_learning_rate(lr));
    chain(parts)
}

/// `optax.adam(lr, b1, b2, eps)`: `m ← (1−b1)·g + b1·m`, `v ← (1−b2)·g² + b2·v`,
/// update `−lr · m̂ / (√v̂ + eps)` with `m̂ = m / (1 − b1ᵗ)`, `v̂ = v / (1 − b2ᵗ)` at
/// step `t` (counted from 1; `b^t` in `f32`). The chain `[scale_by_adam(b1, b2,
/// eps), scale_by_learning_rate(lr)]`.
pub fn adam(lr: impl Into<Schedule>, b1: f64, b2: f64, eps: f64) -> Optimizer {
    adamw(lr, b1, b2, eps, 0.0)
}

/// `optax.adamw(lr, b1, b2, eps, weight_decay)`: Adam's direction plus
/// `weight_decay · params` (`add_decayed_weights`), then scaled by `−lr` (optax's
/// default `weight_decay` is `1e-4`; 0 leaves the step out).
pub fn adamw(lr: impl Into<Schedule>, b1: f64, b2: f64, eps: f64, weight_decay: f64) -> Optimizer {
    let mut parts = vec![transform::scale_by_adam(b1, b2, eps)];
    if weight_decay != 0.0 {
        parts.push(transform::add_decayed_weights(weight_decay));
    }
    parts.push(transform::scale_by_learning_rate(lr));
    chain(parts)
}

/// The error of a step that finds no moment in the state (not reached: the
/// state's moments are checked against the chain's first).
const MOMENTS_CHECKED: &str =
    "Optimizer::update: a step that keeps moments found none in the state";

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
        chain([transform::clip_by_global_norm(max_norm), self])
    }

    /// The transformations of the chain, in the order they apply.
    pub fn transforms(&self) -> &[Transform] {
        &self.transforms
    }

    /// Which moments the state holds: (mu, nu).
    fn moments(&self) -> (bool, bool) {
        self.transforms
            .iter()
            .map(Transform::moments)
            .fold((false, false), |(a, b), (c, d)| (a || c, b || d))
    }

    /// An error message when the chain has more than one moment-keeping step
    /// (the state has room for one).
    fn too_many_moments(&self, what: &str) -> Option<String> {
        let keepers: Vec<&Transform> = self.transforms.iter().filter(|t| t.moments().0).collect();
        (keepers.len() > 1).then(|| {
            format!(
                "Optimizer::{what}: the chain has {} steps that keep moments ({keepers:?}); \
                 its state has room for one (scale_by_adam or trace)",
                keepers.len()
            )
        })
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
        let count = match self.too_many_moments("init") {
            Some(msg) => b.error(msg),
            None => b.constant(0i32),
        };
        OptState {
            count,
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
        if let Some(msg) = self.too_many_moments("update") {
            return refuse(b.error(msg));
        }
        let (wants_mu, wants_nu) = self.moments();
        if (state.mu.is_some(), state.nu.is_some()) != (wants_mu, wants_nu) {
            let names = |mu: bool, nu: bool| match (mu, nu) {
                (true, true) => "mu and nu",
                (true, false) => "mu only",
                (false, true) => "nu only",
                (false, false) => "no moment",
            };
            let failed = b.error(format!(
                "Optimizer::update: the state holds {}, this optimizer keeps {} \
                 (was the state made by another optimizer?)",
                names(state.mu.is_some(), state.nu.is_some()),
                names(wants_mu, wants_nu)
            ));
            return refuse(failed);
        }
        let mut u: Vec<Op> = grads.leaves().into_iter().cloned().collect();
        let p: Vec<Op> = params.leaves().into_iter().cloned().collect();
        let mu = leaves_of(&state.mu);
        let nu = leaves_of(&state.nu);
        let (mut new_mu, mut new_nu): (Option<Vec<Op>>, Option<Vec<Op>>) = (None, None);
        // numerics.safe_increment: the count stops at i32::MAX.
        let old_count = &state.count;
        let below = old_count.compare(&b.constant(i32::MAX), Comparison::Lt);
        let count = b.select(&below, &(old_count + 1i64), old_count);
        // `x · factor`, the factor a schedule at the updates applied before this
        // one (optax's scale_by_schedule), negated for a learning rate; a constant
        // stays a Rust number.
        let scaled = |u: &[Op], schedule: &Schedule, sign: f64| -> Vec<Op> {
            match schedule {
                Schedule::Constant(v) => u.iter().map(|x| x * (sign * v)).collect(),
                s => {
                    let f = s.at(old_count);
                    u.iter()
                        .map(|x| {
                            let f = convert_like(&f, x);
                            if sign < 0.0 { x * &(-&f) } else { x * &f }
                        })
                        .collect()
                }
            }
        };
        for t in &self.transforms {
            u = match t {
                Transform::ClipByGlobalNorm(max_norm) => clip_by_global_norm(&u, *max_norm),
                // transform.trace: t ← g + decay·t; Nesterov: g + decay·t.
                &Transform::Trace { decay, nesterov } => {
                    let Some(mu) = &mu else {
                        return refuse(b.error(MOMENTS_CHECKED));
                    };
                    let trace: Vec<Op> = u.iter().zip(mu).map(|(g, t)| g + &(t * decay)).collect();
                    let dir = if nesterov {
                        u.iter()
                            .zip(&trace)
                            .map(|(g, t)| g + &(t * decay))
                            .collect()
                    } else {
                        trace.clone()
                    };
                    new_mu = Some(trace);
                    dir
                }
                &Transform::ScaleByAdam { b1, b2, eps } => {
                    let (Some(mu), Some(nu)) = (&mu, &nu) else {
                        return refuse(b.error(MOMENTS_CHECKED));
                    };
                    // tree_update_moment: (1 − decay)·g^order + decay·t.
                    let m: Vec<Op> = u
                        .iter()
                        .zip(mu)
                        .map(|(g, t)| &(g * (1.0 - b1)) + &(t * b1))
                        .collect();
                    let v: Vec<Op> = u
                        .iter()
                        .zip(nu)
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
                    let dir = m
                        .iter()
                        .zip(&v)
                        .map(|(m, v)| {
                            let m_hat = m / &convert_like(&bc1, m);
                            let v_hat = v / &convert_like(&bc2, v);
                            &m_hat / &(&v_hat.sqrt() + eps)
                        })
                        .collect();
                    new_mu = Some(m);
                    new_nu = Some(v);
                    dir
                }
                // add_decayed_weights: u + wd·p.
                &Transform::AddDecayedWeights(wd) => {
                    u.iter().zip(&p).map(|(u, p)| u + &(p * wd)).collect()
                }
                Transform::ScaleByLearningRate(lr) => scaled(&u, lr, -1.0),
                Transform::ScaleBySchedule(s) => scaled(&u, s, 1.0),
                &Transform::Scale(k) => u.iter().map(|x| x * k).collect(),
            };
        }
        let updates = u;
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
