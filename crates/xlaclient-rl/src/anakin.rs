//! Podracer's "Anakin" on Catch: a whole reinforcement-learning training loop —
//! environments, Q-network, rollout, TD(λ) loss, its gradient and Adam — as one
//! compiled XLA program, called with donated state so that nothing leaves the
//! device between calls. A port of the notebook's demo (see
//! `examples/anakin.rs` for the command-line program and
//! `../shared/bench-anchors/jax_anakin_catch.py` for the same workload in JAX).
//!
//! One call of [`Anakin::step`] runs [`AnakinConfig::iterations`] updates in a
//! `fori_loop`; each update:
//! - draws the reset columns of the rollout's steps from the state's PRNG key;
//! - rolls out [`AnakinConfig::rollout_len`] steps of [`AnakinConfig::batch`]
//!   Catch environments with a `scan`, greedy actions from the Q-network
//!   Flatten(10×5) → Linear 256 → relu → Linear 3;
//! - computes per trajectory the TD(λ) errors of Q(s_t, a_t) against λ-returns
//!   bootstrapped with max_a Q(s_{t+1}, a) (agent discount 1, targets held fixed by
//!   `stop_gradient`), the loss being the mean squared TD error;
//! - takes the gradient and applies optax's Adam.
//!
//! Two layouts ([`AnakinConfig::shared_params`]):
//! - the notebook's: one learner per environment, each with its own copy of the
//!   parameters and of Adam's state, the gradients averaged across learners before
//!   each update (its `pmean`), so the copies stay equal. Written as the notebook
//!   writes it: one learner's update, batched with `vmap` over the learners
//!   ([`AnakinConfig::vmap_learners`], the default); or with the batch axis
//!   written into every op by hand (a leading axis of `batch` on every parameter),
//!   kept for comparison (`bench/anakin_vmap.sh`: the same speed);
//! - shared: one copy, the loss averaged over the batch; the same learning with
//!   `batch` times less optimizer work.
//!
//! Across devices ([`AnakinConfig::devices`], default 1), as the notebook runs it:
//! the learner is replicated over the devices with `pmap` (axis `"devices"`),
//! each device runs [`AnakinConfig::batch`] learners (one batch of the layouts
//! above), and the gradients are averaged over both: the batch mean inside each
//! device, then `pmean` over the devices, so every device applies the same update
//! and the parameter copies stay identical. The devices split one batch of
//! `devices × batch` environments: every device draws the random numbers of the
//! whole batch from the same key and takes its own block of columns, so that a run
//! on `devices` devices takes the same steps as a one-device run with `devices ×
//! batch` environments (`tests/anakin.rs` checks it). Start it with
//! [`Anakin::init_devices`] and step it with [`Anakin::step_devices`] (one state
//! per device).
//!
//! Two ways to the gradient ([`AnakinConfig::grad_through_scan`]): by default the
//! rollout records the observations, the first layer's activations, the actions,
//! rewards and discounts, and the loss is one batched pass over all `rollout_len ×
//! batch` steps that reuses the recorded activations (a `custom_vjp` whose value is
//! the rollout's activations and whose gradient is the first layer's), so the
//! backward pass is a few large matrix products. With `grad_through_scan` the
//! Q-values come out of the rollout scan as the notebook computes them and the
//! gradient flows back through the scan (a reverse loop of `rollout_len` small
//! products). The two give the same gradient (`tests/anakin.rs` checks it): the
//! Q-values are the same function of the parameters either way.

use std::time::Instant;

use super::catch_device::{self as catch, CatchState};
use crate::nn::{Activation, LinearParams, Mlp, MlpParams, OptState, layers::split_keys, optim};
use crate::{Buffer, Client, DotDims, Error, Jit, Op, Result, Shape, Tree};
use xlaclient_core::ClientExt;
use xlaclient_core::{Builder, Computation, Pmap};

/// What to train, and how; the default is the notebook's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct AnakinConfig {
    /// Environments (and, in the notebook's layout, learners). Default 128.
    pub batch: i64,
    /// Steps per rollout. Default 16.
    pub rollout_len: i64,
    /// Updates per call (the program's `fori_loop`). Default 100.
    pub iterations: i32,
    /// Adam's learning rate. Default 1e-4.
    pub lr: f64,
    /// λ of the TD(λ) targets. Default 0.99.
    pub lambda: f64,
    /// Hidden units of the Q-network. Default 256.
    pub hidden: i64,
    /// Seed of the parameters and the environments. Default 42.
    pub seed: u32,
    /// One shared parameter copy instead of one per learner. Default false.
    pub shared_params: bool,
    /// Differentiate through the rollout scan (see the module docs). Default false.
    pub grad_through_scan: bool,
    /// Devices the learner is replicated over (`pmap`), each with `batch`
    /// learners; the client must have at least this many. Default 1.
    pub devices: usize,
    /// In the notebook's layout: write the update for one learner (one
    /// environment, one parameter copy, the shared layout's code with a batch of
    /// one) and batch it over the learners with `vmap`, the gradients averaged by
    /// `pmean` over the vmapped axis, as the notebook does; otherwise the batch
    /// axis is written into every op by hand. The same learning either way
    /// (`tests/anakin.rs`) at the same speed (`bench/anakin_vmap.sh`). Default
    /// true.
    pub vmap_learners: bool,
}

impl Default for AnakinConfig {
    fn default() -> Self {
        AnakinConfig {
            batch: 128,
            rollout_len: 16,
            iterations: 100,
            lr: 1e-4,
            lambda: 0.99,
            hidden: 256,
            seed: 42,
            shared_params: false,
            grad_through_scan: false,
            devices: 1,
            vmap_learners: true,
        }
    }
}

impl AnakinConfig {
    /// Frames (environment steps) per call, over all devices: `iterations ×
    /// rollout_len × batch × devices`.
    pub fn frames_per_call(&self) -> f64 {
        self.iterations as f64
            * self.rollout_len as f64
            * self.batch as f64
            * self.devices.max(1) as f64
    }
}

/// Everything a call reads and writes (donated to each call).
#[derive(Tree, Clone, Debug, PartialEq)]
pub struct AnakinState<T> {
    /// Q-network parameters: `[50, hidden]`, `[hidden]`, `[hidden, 3]`, `[3]`, with a
    /// leading `batch` axis in the notebook's layout.
    pub params: MlpParams<T>,
    /// Adam's state.
    pub opt: OptState<T, MlpParams<T>>,
    /// The PRNG key the environments' resets are drawn from (`u32[2]`).
    pub key: T,
    /// The environments.
    pub env: CatchState<T>,
    /// The last update's loss (mean over learners), `f32[]`; NaN before the first.
    pub loss: T,
}

/// The compiled initialiser and learner.
pub struct Anakin {
    config: AnakinConfig,
    net: Mlp,
    programs: Programs,
    compile_s: f64,
}

/// One device's programs (`jit`), or the replicated ones (`pmap`).
enum Programs {
    One {
        init: Jit<(), AnakinState<Shape>>,
        learner: Jit<AnakinState<Shape>, AnakinState<Shape>>,
    },
    Many {
        init: Pmap<(), AnakinState<Shape>>,
        learner: Pmap<AnakinState<Shape>, AnakinState<Shape>>,
    },
}

/// The axis name of the devices in the replicated learner.
pub const DEVICE_AXIS: &str = "devices";

impl Anakin {
    /// Traces and compiles the initialiser and the learner for `config`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `batch`, `hidden` or `devices` below 1,
    /// a `rollout_len` below 2 (a TD target needs a next step) or negative
    /// `iterations`; more `devices` than the client has; compile errors.
    pub fn new(client: &Client, config: AnakinConfig) -> Result<Anakin> {
        let checks: [(&'static str, i64, i64); 5] = [
            ("batch", config.batch, 1),
            ("hidden", config.hidden, 1),
            ("rollout_len", config.rollout_len, 2),
            ("iterations", config.iterations.into(), 0),
            ("devices", config.devices.min(i64::MAX as usize) as i64, 1),
        ];
        if let Some((what, v, min)) = checks.into_iter().find(|(_, v, min)| v < min) {
            return Err(Error::InvalidArgument {
                what,
                reason: format!("AnakinConfig::{what} is {v}; it must be at least {min}"),
            });
        }
        let net = Mlp::new(
            &[catch::OBS, config.hidden, catch::ACTIONS],
            Activation::Relu,
        );
        let opt = optim::adam(config.lr, 0.9, 0.999, 1e-8);
        let c = config.clone();
        let per_learner = !c.shared_params;
        let init_fn = |b: &Builder, ()| {
            let keys = split_keys(&b.prng_key(c.seed), 3);
            let mut params = net.init(&keys[0]);
            if per_learner {
                params = params.map_ref(|p: &Op| {
                    let mut dims = vec![c.batch];
                    dims.extend(p.dims().unwrap_or_default());
                    p.expand_dims(0).broadcast_to(&dims)
                });
            }
            // Every device draws the whole batch's columns and keeps its block.
            let columns = keys[1].randint(&[c.batch * c.devices as i64], 0, catch::COLUMNS);
            let columns = device_block(&columns, c.devices, c.batch);
            AnakinState {
                opt: opt.init(&params),
                params,
                key: keys[2].clone(),
                env: catch::initial_state(&columns),
                loss: b.constant(f32::NAN),
            }
        };
        let learner_fn = |b: &Builder, s: AnakinState<Op>| {
            b.fori_loop(0, c.iterations, s, |_, s| update(&c, &opt, s))
        };
        let t;
        let programs = if c.devices == 1 {
            let init = client.jit("anakin_init", &(), init_fn)?;
            t = Instant::now();
            let learner = client.jit_donating("anakin", init.output_spec(), learner_fn)?;
            Programs::One { init, learner }
        } else {
            let axes = [(DEVICE_AXIS, c.devices)];
            let init = client.pmap("anakin_init", &axes, &(), init_fn)?;
            t = Instant::now();
            let learner = client.pmap_donating("anakin", &axes, init.output_spec(), learner_fn)?;
            Programs::Many { init, learner }
        };
        let compile_s = t.elapsed().as_secs_f64();
        Ok(Anakin {
            config,
            net,
            programs,
            compile_s,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AnakinConfig {
        &self.config
    }

    /// Seconds spent tracing and compiling the learner.
    pub fn compile_s(&self) -> f64 {
        self.compile_s
    }

    /// The one-device learner program (`None` with several devices: see
    /// [`replicated_learner`](Self::replicated_learner)).
    pub fn learner(&self) -> Option<&Jit<AnakinState<Shape>, AnakinState<Shape>>> {
        match &self.programs {
            Programs::One { learner, .. } => Some(learner),
            Programs::Many { .. } => None,
        }
    }

    /// The learner replicated over [`AnakinConfig::devices`] devices (`None` with
    /// one device).
    pub fn replicated_learner(&self) -> Option<&Pmap<AnakinState<Shape>, AnakinState<Shape>>> {
        match &self.programs {
            Programs::One { .. } => None,
            Programs::Many { learner, .. } => Some(learner),
        }
    }

    /// The learner's module, one device's program (e.g. for its HLO text).
    pub fn computation(&self) -> &Computation {
        match &self.programs {
            Programs::One { learner, .. } => learner.computation(),
            Programs::Many { learner, .. } => learner.computation(),
        }
    }

    /// The shapes of one device's state.
    pub fn state_spec(&self) -> &AnakinState<Shape> {
        match &self.programs {
            Programs::One { learner, .. } => learner.input_spec(),
            Programs::Many { learner, .. } => learner.input_spec(),
        }
    }

    /// The initial state: one Haiku-initialised network (copied per learner in the
    /// notebook's layout), Adam's zeros, environments at their initial states.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with several devices (use
    /// [`init_devices`](Self::init_devices)).
    pub fn init(&self) -> Result<AnakinState<Buffer>> {
        match &self.programs {
            Programs::One { init, .. } => Ok(init.call(&())?),
            Programs::Many { .. } => Err(self.one_device_only("init", "init_devices")),
        }
    }

    /// One call: [`AnakinConfig::iterations`] updates; the state is donated.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with several devices (use
    /// [`step_devices`](Self::step_devices)); the runtime's errors.
    pub fn step(&self, state: AnakinState<Buffer>) -> Result<AnakinState<Buffer>> {
        let _span = tracing::debug_span!("anakin_step").entered();
        match &self.programs {
            Programs::One { learner, .. } => Ok(learner.call_donated(state)?),
            Programs::Many { .. } => Err(self.one_device_only("step", "step_devices")),
        }
    }

    /// The initial state of every device, in device order (one state with one
    /// device): the same network on every device, each device's block of the
    /// environments.
    pub fn init_devices(&self) -> Result<Vec<AnakinState<Buffer>>> {
        match &self.programs {
            Programs::One { init, .. } => Ok(vec![init.call(&())?]),
            Programs::Many { init, .. } => {
                let none = vec![(); init.num_devices()];
                Ok(init.call(&none)?)
            }
        }
    }

    /// One call on every device: [`AnakinConfig::iterations`] updates, the
    /// gradients averaged over the devices; the states (one per device, each on
    /// its device, as [`init_devices`](Self::init_devices) returns them) are
    /// donated.
    pub fn step_devices(
        &self,
        states: Vec<AnakinState<Buffer>>,
    ) -> Result<Vec<AnakinState<Buffer>>> {
        let _span = tracing::debug_span!("anakin_step", devices = states.len()).entered();
        match &self.programs {
            Programs::One { learner, .. } => states
                .into_iter()
                .map(|s| Ok(learner.call_donated(s)?))
                .collect(),
            Programs::Many { learner, .. } => Ok(learner.call_donated(states)?),
        }
    }

    fn one_device_only(&self, what: &'static str, instead: &str) -> Error {
        Error::InvalidArgument {
            what,
            reason: format!(
                "the learner runs on {} devices: use Anakin::{instead}, one state per device",
                self.config.devices
            ),
        }
    }

    /// The parameters of learner 0 (all copies are equal), downloaded:
    /// `w1, b1, w2, b2` flattened row-major.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `state`'s parameters are not shaped as this
    /// learner's (a state of another configuration); download errors.
    pub fn host_params(&self, state: &AnakinState<Buffer>) -> Result<Vec<Vec<f32>>> {
        let spec: Vec<&Shape> = self.state_spec().params.leaves();
        let shapes = state
            .params
            .leaves()
            .into_iter()
            .map(Buffer::shape)
            .collect::<std::result::Result<Vec<Shape>, _>>()?;
        if shapes.len() != spec.len() || shapes.iter().zip(&spec).any(|(a, b)| a != *b) {
            let show = |s: &[&Shape]| {
                s.iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(Error::InvalidArgument {
                what: "state",
                reason: format!(
                    "its parameters are [{}]; this learner's are [{}] (a state of another configuration?)",
                    show(&shapes.iter().collect::<Vec<_>>()),
                    show(&spec)
                ),
            });
        }
        // Learner 0's copy: the first elements of each (all of it when shared).
        let sizes = self
            .net
            .spec()
            .leaves()
            .iter()
            .map(|s| s.dims().iter().product::<i64>() as usize)
            .collect::<Vec<usize>>();
        state
            .params
            .leaves()
            .into_iter()
            .zip(sizes)
            .map(|(b, n)| {
                let mut v = b.to_vec::<f32>()?;
                v.truncate(n);
                Ok(v)
            })
            .collect()
    }

    /// The greedy policy's exact expected terminal reward (see
    /// [`greedy_eval`](super::catch::greedy_eval)), computed in plain Rust from the downloaded
    /// parameters of learner 0.
    ///
    /// # Errors
    /// As [`host_params`](Self::host_params).
    pub fn greedy_reward(&self, state: &AnakinState<Buffer>) -> Result<f64> {
        let p = self.host_params(state)?;
        let (obs, hidden) = (catch::OBS as usize, self.config.hidden as usize);
        // Four leaves of the network's shapes: `host_params` checked them.
        let [w1, b1, w2, b2] = p.as_slice() else {
            return Err(Error::InvalidArgument {
                what: "state",
                reason: format!("{} parameter arrays, the Q-network has 4", p.len()),
            });
        };
        Ok(super::catch::greedy_eval(|board| {
            let h: Vec<f32> = (0..hidden)
                .map(|j| {
                    let s: f32 = (0..obs).map(|i| board[i] * w1[i * hidden + j]).sum();
                    (s + b1[j]).max(0.0)
                })
                .collect();
            let mut q = [0f32; 3];
            for (k, qk) in q.iter_mut().enumerate() {
                *qk = h
                    .iter()
                    .enumerate()
                    .map(|(j, hj)| hj * w2[j * 3 + k])
                    .sum::<f32>()
                    + b2[k];
            }
            q
        }))
    }
}

/// One matrix product per learner (row `b` of `x` with learner `b`'s `w`), or one
/// for all rows with the shared `w`; `x` is `[batch, in]` or `[batch, n, in]`.
fn affine(x: &Op, p: &LinearParams<Op>, per_learner: bool) -> Op {
    if !per_learner {
        return &x.matmul(&p.w) + &p.b;
    }
    if x.dims().map(|d| d.len()).unwrap_or(0) == 2 {
        // [B, in] · [B, in, out]: a matrix-vector product per learner.
        let per_row = DotDims {
            lhs_contracting: vec![1],
            rhs_contracting: vec![1],
            lhs_batch: vec![0],
            rhs_batch: vec![0],
        };
        return &x.dot_general(&p.w, &per_row) + &p.b;
    }
    // [B, n, in] × [B, in, out] with biases [B, 1, out].
    &x.matmul(&p.w) + &p.b.expand_dims(1)
}

/// The first layer's activations, `relu(obs · w1 + b1)`, of the observations
/// `obs` recorded by the rollout, as a function of `w1` and `b1` whose value is the
/// rollout's own activations `h` (`[batch, T, hidden]`, computed with the same
/// parameters) and whose gradient is the layer's: `dz = dh ⊙ [h > 0]` (relu's
/// derivative, 0 at 0 as in JAX), `dw1 = obsᵀ dz`, `db1 = Σ dz`. The loss thus
/// reuses the rollout's forward pass instead of computing it a second time.
fn first_layer(l1: &LinearParams<Op>, h: &Op, obs: &Op, per_learner: bool) -> Op {
    let b = h.builder();
    let backward = move |args: &[Op], out: &[Op], ct: &[Op]| {
        let (obs, h) = (&args[3], &out[0]);
        let live = h.compare(&h.zeros_like(), crate::Comparison::Gt);
        let dz = h.builder().select(&live, &ct[0], &ct[0].zeros_like());
        let (dw, db) = if per_learner {
            // Per learner: contract the time axis, keep the batch axis.
            let dims = DotDims {
                lhs_contracting: vec![1],
                rhs_contracting: vec![1],
                lhs_batch: vec![0],
                rhs_batch: vec![0],
            };
            (obs.dot_general(&dz, &dims), dz.sum(&[1], false))
        } else {
            let dims = DotDims {
                lhs_contracting: vec![0, 1],
                rhs_contracting: vec![0, 1],
                lhs_batch: vec![],
                rhs_batch: vec![],
            };
            (obs.dot_general(&dz, &dims), dz.sum(&[0, 1], false))
        };
        vec![dw, db, args[2].zeros_like(), args[3].zeros_like()]
    };
    // The recorded values carry no gradient: without `stop_gradient` the zero
    // cotangents given to them would be carried back through the rollout's scan.
    let (h, obs) = (h.stop_gradient(), obs.stop_gradient());
    b.custom_vjp(
        "first_layer",
        &[&l1.w, &l1.b, &h, &obs],
        |_, a| vec![a[2].clone()],
        backward,
    )
    .remove(0)
}

/// λ-returns (rlax's `lambda_returns`) of rewards `r`, discounts `d` and bootstrap
/// values `v`, each `[batch, T]`, time on axis 1: `G_t = r_t + d_t ((1 − λ) v_t + λ
/// G_{t+1})` with `G_T = v_{T−1}`; unrolled, as `T` is small and static.
///
/// Rewards of another rank, or no step (`T = 0`), record an error at the caller's
/// line (a failed op); other shape mistakes are the ops' own errors.
#[track_caller]
pub fn lambda_returns(r: &Op, d: &Op, v: &Op, lambda: f64) -> Op {
    let (batch, t) = match r.dims() {
        Ok(dims) => match dims[..] {
            [batch, t] if t >= 1 => (batch, t),
            _ => {
                return r.builder().error(format!(
                    "lambda_returns: rewards of dims {dims:?}; they must be [batch, T] with T >= 1"
                ));
            }
        },
        Err(_) => return r.clone(), // a failed op: its error travels on
    };
    let col = |x: &Op, i: i64| x.slice(&[0, i], &[batch, i + 1], &[1, 1]);
    let mut acc = col(v, t - 1);
    let mut out = Vec::with_capacity(t as usize);
    for i in (0..t).rev() {
        let mix = &(&col(v, i) * (1.0 - lambda)) + &(&acc * lambda);
        acc = &col(r, i) + &(&col(d, i) * &mix);
        out.push(acc.clone());
    }
    out.reverse();
    let refs: Vec<&Op> = out.iter().collect();
    r.builder().concatenate(&refs, 1)
}

/// The TD(λ) loss of each trajectory, `[batch]`, from the Q-values `q` (`[batch, T,
/// 3]`) of a rollout and its actions, rewards and discounts (`[batch, T]`).
///
/// Q-values of another rank, or fewer than two steps (`T < 2`: a target needs a
/// next step), record an error at the caller's line (a failed op); other shape
/// mistakes are the ops' own errors.
#[track_caller]
pub fn td_loss(q: &Op, actions: &Op, rewards: &Op, discounts: &Op, lambda: f64) -> Op {
    let (batch, t) = match q.dims() {
        Ok(dims) => match dims[..] {
            [batch, t, _] if t >= 2 => (batch, t),
            _ => {
                return q.builder().error(format!(
                    "td_loss: Q-values of dims {dims:?}; they must be [batch, T, actions] with T >= 2"
                ));
            }
        },
        Err(_) => return q.clone(), // a failed op: its error travels on
    };
    // Steps 0..T−1 of a `[batch, T]` array.
    let head = |x: &Op| x.slice(&[0, 0], &[batch, t - 1], &[1, 1]);
    // Q(s_t, a_t) for t < T − 1.
    let q_head = q.slice(&[0, 0, 0], &[batch, t - 1, catch::ACTIONS], &[1, 1, 1]);
    let qa = (&q_head * &head(actions).one_hot(catch::ACTIONS, crate::ElementType::F32))
        .sum(&[2], false);
    // max_a Q(s_{t+1}, a), held fixed.
    let v = q
        .slice(&[0, 1, 0], &[batch, t, catch::ACTIONS], &[1, 1, 1])
        .stop_gradient()
        .amax(&[2], false);
    let target = lambda_returns(&head(rewards), &head(discounts), &v, lambda).stop_gradient();
    let td = &target - &qa;
    (&td * &td).sum(&[1], false) / (t - 1) as f64
}

/// This device's block of `batch` entries of `x`'s last axis, which holds
/// `devices × batch` (the whole of it with one device).
fn device_block(x: &Op, devices: usize, batch: i64) -> Op {
    if devices == 1 {
        return x.clone();
    }
    let b = x.builder();
    let dims = x.dims().unwrap_or_default();
    let last = dims.len().saturating_sub(1);
    let start = b.axis_index(DEVICE_AXIS) * batch;
    let zero = b.constant(0i32);
    let starts: Vec<&Op> = (0..dims.len())
        .map(|k| if k == last { &start } else { &zero })
        .collect();
    let mut sizes = dims.clone();
    sizes[last] = batch;
    x.dynamic_slice_clamped(&starts, &sizes)
}

/// `[T, batch, …]` to `[batch, T, …]`.
fn batch_major(x: &Op) -> Op {
    let rank = x.dims().map(|d| d.len()).unwrap_or(2) as i64;
    let mut perm = vec![1, 0];
    perm.extend(2..rank);
    x.transpose(&perm)
}

/// One update: rollout, loss, gradient, Adam.
fn update(c: &AnakinConfig, opt: &optim::Optimizer, s: AnakinState<Op>) -> AnakinState<Op> {
    let b = s.key.builder();
    let per_learner = !c.shared_params;
    let batch = c.batch;
    let keys = split_keys(&s.key, 2);
    // The ball column each environment starts its next episode with, should step t
    // end one.
    // Every device draws the whole batch's and keeps its block.
    let resets = keys[1].randint(
        &[c.rollout_len, batch * c.devices as i64],
        0,
        catch::COLUMNS,
    );
    let resets = device_block(&resets, c.devices, batch);
    // The notebook's pmean over the devices (after the mean over the batch).
    let across = |x: Op| {
        if c.devices > 1 {
            x.pmean_axis(DEVICE_AXIS)
        } else {
            x
        }
    };
    if per_learner && c.vmap_learners {
        return update_vmapped(c, opt, s, resets, keys[0].clone(), &across);
    }
    let (loss, env, grads) = loss_and_grads(c, per_learner, &s.params, &s.env, &resets);
    let (grads, loss) = if per_learner {
        // The notebook's pmean over the batch axis.
        let g = grads.map_ref(|g: &Op| {
            let dims = g.dims().unwrap_or_default();
            across(g.sum(&[0], true) / batch as f64).broadcast_to(&dims)
        });
        (g, across(loss / batch as f64))
    } else {
        (grads.map_ref(|g: &Op| across(g.clone())), across(loss))
    };
    let _ = &b;
    let (params, opt_state) = opt.update(&grads, s.opt, &s.params);
    AnakinState {
        params,
        opt: opt_state,
        key: keys[0].clone(),
        env,
        loss,
    }
}

/// The vmapped axis of the learners ([`AnakinConfig::vmap_learners`]).
pub const LEARNER_AXIS: &str = "learners";

/// The notebook's layout as the notebook writes it: one learner's update (one
/// environment, its own parameters and Adam state) batched over the learners with
/// `vmap`, the gradients averaged with `pmean` over the vmapped axis.
fn update_vmapped(
    c: &AnakinConfig,
    opt: &optim::Optimizer,
    s: AnakinState<Op>,
    resets: Op,
    key: Op,
    across: &dyn Fn(Op) -> Op,
) -> AnakinState<Op> {
    let b = key.builder();
    let one = AnakinConfig {
        batch: 1,
        shared_params: true,
        ..c.clone()
    };
    let args = (s.params.clone(), s.opt.clone(), s.env.clone(), resets);
    // Adam's step count is shared (a scalar); every other leaf is per learner, and
    // the resets are `[T, batch]`: learners along axis 1.
    let n = args.num_leaves();
    let axes: Vec<Option<i64>> = args
        .leaves()
        .iter()
        .enumerate()
        .map(|(k, x)| {
            if k == n - 1 {
                Some(1)
            } else if x.rank().unwrap_or(0) == 0 {
                None
            } else {
                Some(0)
            }
        })
        .collect();
    let mut out_axes: Vec<Option<i64>> = axes[..n - 1].to_vec();
    out_axes.push(None); // the loss, averaged over the learners
    let spec = xlaclient_core::Vmap::new()
        .in_axes(axes)
        .out_axes(out_axes)
        .axis_name(LEARNER_AXIS);
    let (params, opt_state, env, loss) = b.vmap(&spec, args, |_, (p, o, env, reset)| {
        // A batch of one environment, with the shared layout's code.
        let env1 = env.map_ref(|x: &Op| x.expand_dims(0));
        let reset1 = reset.expand_dims(1);
        let (loss, env, grads) = loss_and_grads(&one, false, &p, &env1, &reset1);
        let grads = grads.map_ref(|g: &Op| across(g.pmean_axis(LEARNER_AXIS)));
        let loss = across(loss.pmean_axis(LEARNER_AXIS));
        let (params, o) = opt.update(&grads, o, &p);
        let env = env.map_ref(|x: &Op| x.reshape(&[]));
        (params, o, env, loss)
    });
    AnakinState {
        params,
        opt: opt_state,
        key,
        env,
        loss,
    }
}

/// The rollout of `params` from `env` with the reset columns `resets` (`[T,
/// batch]`), the TD(λ) loss (summed over learners in the per-learner layout, the
/// batch mean when shared) and its gradient: `(loss, final env, gradients)`.
fn loss_and_grads(
    c: &AnakinConfig,
    per_learner: bool,
    params: &MlpParams<Op>,
    env: &CatchState<Op>,
    resets: &Op,
) -> (Op, CatchState<Op>, MlpParams<Op>) {
    let b = resets.builder();
    let (batch, lambda) = (c.batch, c.lambda);
    // The rollout: greedy actions from the Q-network, recording per step the
    // observation, the first layer's activations, the Q-values, the action, the
    // reward and the discount.
    let rollout = |params: &MlpParams<Op>| {
        b.scan(env.clone(), resets.clone(), |env, reset| {
            let obs = catch::render(&env);
            let h = affine(&obs, &params[0], per_learner).relu();
            let q = affine(&h, &params[1], per_learner);
            let a = q.argmax(1);
            let (next, r, d) = catch::step(&env, &a, &reset);
            (next, (obs, h, q, a, r, d))
        })
    };
    // Per learner, each loss is its own learner's (their sum's gradient is each
    // learner's gradient); shared, the mean over the batch.
    let total = |l: &Op| {
        if per_learner {
            l.sum(&[0], false)
        } else {
            l.sum(&[0], false) / batch as f64
        }
    };
    if c.grad_through_scan {
        // As the notebook: the Q-values come out of the scan, and the gradient
        // flows back through it.
        b.value_and_grad(params.clone(), |p| {
            let (env, (_, _, q, a, r, d)) = rollout(&p);
            let [q, a, r, d] = [q, a, r, d].map(|x| batch_major(&x));
            (total(&td_loss(&q, &a, &r, &d, lambda)), env)
        })
    } else {
        // The loss on the recorded rollout: its activations reused (see
        // `first_layer`), the second layer and the loss in one batched pass.
        let (env, (obs, h, _, a, r, d)) = rollout(params);
        let [obs, h, a, r, d] = [obs, h, a, r, d].map(|x| batch_major(&x));
        let (loss, (), g) = b.value_and_grad(params.clone(), |p| {
            let h = first_layer(&p[0], &h, &obs, per_learner);
            let q = affine(&h, &p[1], per_learner);
            (total(&td_loss(&q, &a, &r, &d, lambda)), ())
        });
        (loss, env, g)
    }
}
