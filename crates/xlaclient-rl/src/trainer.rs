//! Training a network between stepper rounds (Alpacka's `TrainableNetwork` and
//! `Trainer`): [`Trainer`] owns the parameters and the optimizer state on the
//! device and runs one compiled, donating train step `(params, opt_state, batch)
//! -> (params, opt_state, loss)`; [`Trainer::publish`] hands the new parameters to
//! the stepper's [`BatchedNet`], whose next tick uses them without recompiling.
//!
//! The loss is the user's function of the parameters and a batch (a tree of
//! arrays, e.g. a [`ReplayBuffer`](crate::replay::ReplayBuffer) sample); two
//! common ones are here: [`policy_value_loss`] (AlphaZero's supervised targets:
//! cross-entropy to the search's visit distribution plus the squared error to the
//! game's outcome) and [`q_learning_loss`] (one-step TD targets `r + γ·max_a
//! Q(s', a)`, the target computed by the network itself, gradient stopped).
//!
//! ```no_run
//! use xlaclient_core::{Client, ClientExt, Op, Shape, Tree};
//! use xlaclient_nn::{Activation, Mlp, optim};
//! use xlaclient_rl::trainer::{Trainer, policy_value_loss};
//!
//! #[derive(Tree)]
//! struct Batch<T> { obs: T, policy: T, value: T }
//!
//! let client = Client::cpu()?;
//! let mlp = Mlp::new(&[84, 64, 8], Activation::Relu);
//! let init = client.jit("init", &(), |b, ()| mlp.init(&b.prng_key(0)))?;
//! let spec = Batch {
//!     obs: Shape::of::<f32>(&[32, 84]),
//!     policy: Shape::of::<f32>(&[32, 7]),
//!     value: Shape::of::<f32>(&[32]),
//! };
//! let mut trainer = Trainer::new(&client, init.output_spec(), init.call(&())?, &spec,
//!     &optim::adam(1e-3, 0.9, 0.999, 1e-8),
//!     move |p, b: &Batch<Op>| policy_value_loss(&mlp.apply(p, &b.obs), &b.policy, &b.value))?;
//! # Ok::<(), xlaclient_rl::Error>(())
//! ```

use xlaclient_core::{ClientExt, Jit};
use xlaclient_nn::{OptState, Optimizer};

use crate::builder::Op;
use crate::error::{Error, Result};
use crate::pjrt::{Buffer, Client};
use crate::replay::HostArray;
use crate::shape::Shape;
use crate::stepper::BatchedNet;
use crate::tree::Tree;

/// What the train step reads.
#[derive(xlaclient_core::Tree)]
struct TrainIn<T> {
    params: Vec<T>,
    opt: OptState<T, Vec<T>>,
    batch: Vec<T>,
}

/// What the train step writes: the new state (in the donated buffers), the loss,
/// and a second copy of the new parameters for the predicting network.
#[derive(xlaclient_core::Tree)]
struct TrainOut<T> {
    params: Vec<T>,
    opt: OptState<T, Vec<T>>,
    loss: T,
    fresh: Vec<T>,
}

/// The trainer's state on the device: the parameters' leaves and the optimizer's
/// state.
type DeviceState = (Vec<Buffer>, OptState<Buffer, Vec<Buffer>>);

/// A network's parameters and optimizer state on the device, updated by one
/// compiled train step per [`step`](Self::step) (donated: updated in place). `S` is
/// the parameters' tree of shapes (e.g. `MlpParams<Shape>`).
///
/// See the [module docs](self).
pub struct Trainer<S> {
    client: Client,
    param_spec: S,
    batch_shapes: Vec<Shape>,
    step: Jit<TrainIn<Shape>, TrainOut<Shape>>,
    copy: Jit<Vec<Shape>, Vec<Shape>>,
    state: Option<DeviceState>,
    fresh: Option<Vec<Buffer>>,
    steps: usize,
    published: usize,
}

impl<S> std::fmt::Debug for Trainer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("batch_shapes", &self.batch_shapes)
            .field("steps", &self.steps)
            .field("published", &self.published)
            .finish_non_exhaustive()
    }
}

impl<S: Tree<Shape>> Trainer<S> {
    /// Compiles the train step of `loss` (a scalar `f32` of the parameters, a tree
    /// shaped like `param_spec`, and a batch, a tree shaped like `batch_spec`) with
    /// `optimizer`, and takes `params` (its starting point) onto the trainer; the
    /// optimizer's state starts at its `init`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `params` does not have `param_spec`'s shapes
    /// or the loss is not an `f32` scalar; the trace's errors (a shape error in
    /// `loss`, at the user's line).
    pub fn new<B, F>(
        client: &Client,
        param_spec: &S,
        params: S::With<Buffer>,
        batch_spec: &B,
        optimizer: &Optimizer,
        loss: F,
    ) -> Result<Trainer<S>>
    where
        S: Clone,
        B: Tree<Shape>,
        F: FnOnce(&S::With<Op>, &B::With<Op>) -> Op,
    {
        let param_shapes: Vec<Shape> = param_spec.leaves().into_iter().cloned().collect();
        let leaves = params.into_leaves();
        check_shapes("Trainer::new: params", &leaves, &param_shapes)?;
        let batch_shapes: Vec<Shape> = batch_spec.leaves().into_iter().cloned().collect();
        let opt_init = client.jit("trainer_opt_init", &param_shapes, |b, p: Vec<Op>| {
            optimizer.init_in(b, &p)
        })?;
        let opt_state = opt_init.call(&leaves)?;
        let spec = TrainIn {
            params: param_shapes.clone(),
            opt: optimizer.state_spec(&param_shapes),
            batch: batch_shapes.clone(),
        };
        let step = client.jit_donating("trainer_step", &spec, move |b, s: TrainIn<Op>| {
            let batch = match batch_spec.rebuild(s.batch) {
                Ok(t) => t,
                Err(e) => {
                    let failed = b.error(format!("Trainer: the batch tree: {e}"));
                    return failed_out(&s.params, s.opt, &failed);
                }
            };
            let (value, (), grads) = b.value_and_grad(s.params.clone(), |p: Vec<Op>| {
                let l = match param_spec.rebuild(p) {
                    Ok(tree) => loss(&tree, &batch),
                    Err(e) => return (b.error(format!("Trainer: the parameter tree: {e}")), ()),
                };
                // Refused here with the trainer's words rather than by `grad`.
                match l.shape() {
                    Ok(s) if s != Shape::of::<f32>(&[]) => (
                        b.error(format!(
                            "Trainer::new: the loss is {s}; it must be an f32 scalar"
                        )),
                        (),
                    ),
                    _ => (l, ()),
                }
            });
            let (params, opt) = optimizer.update(&grads, s.opt, &s.params);
            TrainOut {
                fresh: params.clone(),
                params,
                opt,
                loss: value,
            }
        })?;
        let loss_shape = &step.output_spec().loss;
        if *loss_shape != Shape::of::<f32>(&[]) {
            return Err(Error::InvalidArgument {
                what: "loss",
                reason: format!("Trainer::new: the loss is {loss_shape}; it must be an f32 scalar"),
            });
        }
        let copy = client.jit("trainer_copy_params", &param_shapes, |_, p: Vec<Op>| p)?;
        Ok(Trainer {
            client: client.clone(),
            param_spec: param_spec.clone(),
            batch_shapes,
            step,
            copy,
            state: Some((leaves, opt_state)),
            fresh: None,
            steps: 0,
            published: 0,
        })
    }

    fn state(&self) -> Result<&DeviceState> {
        self.state.as_ref().ok_or(Error::InvalidArgument {
            what: "self",
            reason: "Trainer: a failed train step consumed the state; make a new trainer".into(),
        })
    }

    /// One train step on `batch` (buffers shaped like the batch spec, in its
    /// leaf order); returns the loss before the update.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the batch leaf whose shape differs; the
    /// runtime's error (the state is then lost: it was donated).
    pub fn step<B: Tree<Buffer>>(&mut self, batch: B) -> Result<f32> {
        let _span = tracing::debug_span!("train_step", step = self.steps).entered();
        let batch = batch.into_leaves();
        check_shapes("Trainer::step: batch", &batch, &self.batch_shapes)?;
        self.state()?;
        let Some((params, opt)) = self.state.take() else {
            return Err(Error::PolledAfterCompletion);
        };
        let out = self.step.call_donated(TrainIn { params, opt, batch })?;
        self.state = Some((out.params, out.opt));
        self.fresh = Some(out.fresh);
        self.steps += 1;
        Ok(out.loss.to_scalar::<f32>()?)
    }

    /// [`step`](Self::step) on a batch held on the host (uploaded first).
    ///
    /// # Errors
    /// As [`step`](Self::step).
    pub fn step_host<B: Tree<HostArray>>(&mut self, batch: &B) -> Result<f32> {
        let bufs = batch
            .leaves()
            .into_iter()
            .map(|a| a.to_buffer(&self.client))
            .collect::<Result<Vec<_>>>()?;
        self.step(bufs)
    }

    /// Gives `net` the current parameters: its next call uses them, with no
    /// recompilation (see [`BatchedNet::set_params`]). The copy made by the last
    /// step is handed over; without a step since the last publish, a copy is made.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `net`'s parameters have other shapes.
    pub fn publish(&mut self, net: &mut BatchedNet) -> Result<()> {
        let params = match self.fresh.take() {
            Some(p) => p,
            None => self.copy_params()?,
        };
        net.set_params(params)?;
        self.published += 1;
        Ok(())
    }

    /// A copy of the current parameters, as the parameters' tree (e.g. to build
    /// the stepper's [`BatchedNet`] from).
    ///
    /// # Errors
    /// The runtime's error.
    pub fn params_tree(&self) -> Result<S::With<Buffer>> {
        let copy = self.copy_params()?;
        Ok(self.param_spec.rebuild(copy)?)
    }

    fn copy_params(&self) -> Result<Vec<Buffer>> {
        let (params, _) = self.state()?;
        Ok(self.copy.call(params)?)
    }

    /// The current parameters downloaded, leaf by leaf (`f32` leaves).
    ///
    /// # Errors
    /// The runtime's error (e.g. a leaf that is not `f32`).
    pub fn host_params(&self) -> Result<Vec<Vec<f32>>> {
        let (params, _) = self.state()?;
        params
            .iter()
            .map(|b| Ok(b.to_vec::<f32>()?))
            .collect::<Result<Vec<_>>>()
    }

    /// Train steps taken.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Times [`publish`](Self::publish) handed parameters over.
    pub fn published(&self) -> usize {
        self.published
    }

    /// The parameters' tree of shapes.
    pub fn param_spec(&self) -> &S {
        &self.param_spec
    }
}

fn check_shapes(what: &str, bufs: &[Buffer], expected: &[Shape]) -> Result<()> {
    if bufs.len() != expected.len() {
        return Err(Error::InvalidArgument {
            what: "batch",
            reason: format!(
                "{what}: {} arrays given, {} expected ({expected:?})",
                bufs.len(),
                expected.len()
            ),
        });
    }
    for (i, (b, e)) in bufs.iter().zip(expected).enumerate() {
        let found = b.shape()?;
        if &found != e {
            return Err(Error::InvalidArgument {
                what: "batch",
                reason: format!(
                    "{what}: array {i} is {found}, the train step was compiled for {e}"
                ),
            });
        }
    }
    Ok(())
}

fn failed_out(params: &[Op], opt: OptState<Op, Vec<Op>>, failed: &Op) -> TrainOut<Op> {
    let f = |_: &Op| failed.clone();
    TrainOut {
        params: params.iter().map(f).collect(),
        opt: opt.map_ref(f),
        loss: failed.clone(),
        fresh: params.iter().map(f).collect(),
    }
}

/// AlphaZero's loss for a network whose output rows are `[logits (A), value]`
/// (`f32[B, A + 1]`, the value in `[-1, 1]`): the mean over the batch of the
/// cross-entropy between `softmax(logits)` and `policy_target` (`f32[B, A]`, e.g.
/// visit-count distributions) plus the squared error of the value to
/// `value_target` (`f32[B]`, the game's outcome from the mover's side).
#[track_caller]
pub fn policy_value_loss(output: &Op, policy_target: &Op, value_target: &Op) -> Op {
    let b = output.builder();
    let dims = match output.shape() {
        Ok(s) => s.dims().to_vec(),
        Err(e) => return b.error(format!("policy_value_loss: the output: {e}")),
    };
    let [_, cols] = dims[..] else {
        return b.error(format!(
            "policy_value_loss: the output is {dims:?}; it must be [batch, actions + 1]"
        ));
    };
    let logits = output.slice_in_dim(0, cols - 1, 1, 1);
    let value = output.slice_in_dim(cols - 1, cols, 1, 1).squeeze(&[1]);
    let ce = xlaclient_nn::losses::softmax_cross_entropy(&logits, policy_target);
    let err = &value - value_target;
    &ce.mean(&[0], false) + &(&err * &err).mean(&[0], false)
}

/// The one-step Q-learning loss: `mean((Q(s, a) − y)²) / 2` with the target `y =
/// r + γ · discount · max_a' Q(s', a')` held constant (gradient stopped). `q` and
/// `q_next` are `f32[B, A]` (the network on `s` and on `s'`), `actions` `s32[B]`,
/// `rewards` and `discounts` `f32[B]` (discount 0 where the episode ended).
#[track_caller]
pub fn q_learning_loss(
    q: &Op,
    actions: &Op,
    rewards: &Op,
    discounts: &Op,
    q_next: &Op,
    gamma: f32,
) -> Op {
    let q_sa = q
        .take_along_axis(&actions.expand_dims(-1), -1)
        .squeeze(&[-1]);
    let target =
        (rewards + &(&(discounts * f64::from(gamma)) * &q_next.reduce_max(&[1]))).stop_gradient();
    let err = &q_sa - &target;
    &(&err * &err).mean(&[0], false) * 0.5
}

/// The head of a policy-value network: raw rows `f32[B, A + 1]` to `[logits (A),
/// tanh(value)]`, the form [`policy_value_loss`] and
/// [`MctsAgent`](crate::agents::MctsAgent) read.
#[track_caller]
pub fn policy_value_head(raw: &Op) -> Op {
    let b = raw.builder();
    let dims = match raw.shape() {
        Ok(s) => s.dims().to_vec(),
        Err(e) => return b.error(format!("policy_value_head: the input: {e}")),
    };
    let [_, cols] = dims[..] else {
        return b.error(format!(
            "policy_value_head: the input is {dims:?}; it must be [batch, actions + 1]"
        ));
    };
    let logits = raw.slice_in_dim(0, cols - 1, 1, 1);
    let value = raw.slice_in_dim(cols - 1, cols, 1, 1).tanh();
    b.concatenate(&[&logits, &value], 1)
}
