//! PPO on CartPole-v1 as PureJaxRL writes it (`ppo.py`): the environments, the
//! actor and critic, the rollout, GAE, epochs of minibatch updates with the clipped
//! objective and Adam, all inside compiled programs, the training state donated
//! from one call to the next. See `examples/ppo_cartpole.rs` for the command line
//! and `bench/ppo_cartpole_jax.py` for the same algorithm in JAX.
//!
//! Two programs: **init** (the parameters, Adam's state, the environments reset
//! and the PRNG key, from [`PpoConfig::seed`]) and **update**
//! ([`PpoConfig::updates_per_call`] PPO updates in a `scan`). The init program
//! runs once, and compiling it is most of what it costs: its six orthogonal
//! kernels draw their normals in one hash ([`Linear::init_many`]) and
//! [`Ppo::new`] compiles each of its loops (the QRs, the hashes) as one kernel
//! ([`CompileOptions::single_kernel_loops`]; the update's GAE scan too). It
//! compiled in 2.2 s and now does in 1.2 s on a 2-core machine, to the same
//! bits. One update:
//! - a rollout of [`PpoConfig::num_steps`] steps of [`PpoConfig::num_envs`]
//!   CartPoles ([`crate::cartpole`], gymnax's dynamics and automatic resets) by
//!   `scan`: actions sampled from the actor's logits (`categorical`), values from
//!   the critic, episode returns tracked as gymnax's `LogWrapper` does;
//! - GAE by a reverse `scan` (γ, λ), targets = advantages + values;
//! - [`PpoConfig::update_epochs`] epochs, each a permutation of the `num_steps ×
//!   num_envs` transitions cut into [`PpoConfig::num_minibatches`] minibatches, a
//!   `scan` over them of: the clipped surrogate loss on normalised advantages, the
//!   clipped value loss, the entropy bonus, their gradient, then
//!   `chain(clip_by_global_norm, adam(eps = 1e-5))` with the learning rate annealed
//!   as PureJaxRL's `LR · (1 − (count // (minibatches · epochs)) / num_updates)`
//!   (a [`Schedule::from_fn`]).
//!
//! The keys are split in PureJaxRL's order, and every sampler equals JAX's, so from
//! the same initial parameters the programs compute what `bench/ppo_cartpole_jax.py`
//! computes (`tests/ppo.rs` checks it to 1e-5 after 3 updates).
//!
//! The return of an update ([`PpoMetrics::mean_return`]) is the mean over its
//! rollout's steps and environments of the return of each environment's last
//! finished episode (gymnax's `returned_episode_returns`, 0 before the first), as
//! PureJaxRL plots it.

use std::time::Instant;

use super::cartpole::{self, CartPoleState};
use crate::nn::optim::{self, transform};
use crate::nn::{Activation, Linear, Mlp, MlpParams, OptState, Schedule, init};
use crate::{Buffer, Builder, Client, ElementType, Error, Jit, Op, Result, Shape, Tree};
use xlaclient_core::{ClientExt, CompileOptions, ScanOptions};

/// PPO's hyperparameters; the defaults are PureJaxRL's for CartPole-v1.
#[derive(Clone, Debug, PartialEq)]
pub struct PpoConfig {
    /// Adam's learning rate (the start of the annealing). Default 2.5e-4.
    pub lr: f64,
    /// Environments stepped together. Default 4.
    pub num_envs: i64,
    /// Steps per rollout. Default 128.
    pub num_steps: i64,
    /// Environment steps in all; updates = `total_timesteps / num_steps /
    /// num_envs`. Default 500 000.
    pub total_timesteps: i64,
    /// Passes over each rollout. Default 4.
    pub update_epochs: i64,
    /// Minibatches per pass; must divide `num_envs × num_steps`. Default 4.
    pub num_minibatches: i64,
    /// Discount. Default 0.99.
    pub gamma: f64,
    /// GAE's λ. Default 0.95.
    pub gae_lambda: f64,
    /// The ratio's (and the value's) clipping range. Default 0.2.
    pub clip_eps: f64,
    /// Entropy bonus coefficient. Default 0.01.
    pub ent_coef: f64,
    /// Value loss coefficient. Default 0.5.
    pub vf_coef: f64,
    /// Gradients are clipped to this global norm. Default 0.5.
    pub max_grad_norm: f64,
    /// Anneal the learning rate linearly to 0 over the updates. Default true.
    pub anneal_lr: bool,
    /// Hidden units of each of the two layers of the actor and of the critic.
    /// Default 64.
    pub hidden: i64,
    /// Seed of the parameters, the environments and the rollouts. Default 0.
    pub seed: u32,
    /// Updates per call of the update program (its `scan`). Default 122 (8 calls
    /// for the default 976 updates).
    pub updates_per_call: i64,
}

impl Default for PpoConfig {
    fn default() -> Self {
        PpoConfig {
            lr: 2.5e-4,
            num_envs: 4,
            num_steps: 128,
            total_timesteps: 500_000,
            update_epochs: 4,
            num_minibatches: 4,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip_eps: 0.2,
            ent_coef: 0.01,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            anneal_lr: true,
            hidden: 64,
            seed: 0,
            updates_per_call: 122,
        }
    }
}

impl PpoConfig {
    /// PureJaxRL's `NUM_UPDATES`: `total_timesteps / num_steps / num_envs`.
    pub fn num_updates(&self) -> i64 {
        if self.num_steps < 1 || self.num_envs < 1 {
            return 0;
        }
        self.total_timesteps / self.num_steps / self.num_envs
    }

    /// Transitions per minibatch: `num_envs × num_steps / num_minibatches`.
    pub fn minibatch_size(&self) -> i64 {
        if self.num_minibatches < 1 {
            return 0;
        }
        self.num_envs * self.num_steps / self.num_minibatches
    }

    /// Environment steps per call of the update program.
    pub fn steps_per_call(&self) -> i64 {
        self.updates_per_call * self.num_steps * self.num_envs
    }

    /// Checks that the configuration makes sense.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the field: a count below 1, fewer
    /// timesteps than one update takes, minibatches that do not divide `num_envs ×
    /// num_steps`, a negative or non-finite coefficient.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &'static str, reason: String| Err(Error::InvalidArgument { what, reason });
        let counts: [(&'static str, i64); 6] = [
            ("num_envs", self.num_envs),
            ("num_steps", self.num_steps),
            ("update_epochs", self.update_epochs),
            ("num_minibatches", self.num_minibatches),
            ("hidden", self.hidden),
            ("updates_per_call", self.updates_per_call),
        ];
        for (what, v) in counts {
            if v < 1 {
                return bad(
                    what,
                    format!("PpoConfig::{what} is {v}; it must be at least 1"),
                );
            }
        }
        if self.num_updates() < 1 {
            return bad(
                "total_timesteps",
                format!(
                    "PpoConfig::total_timesteps is {}, fewer than one update's num_steps × num_envs = {}",
                    self.total_timesteps,
                    self.num_steps * self.num_envs
                ),
            );
        }
        let batch = self.num_envs * self.num_steps;
        if batch % self.num_minibatches != 0 {
            return bad(
                "num_minibatches",
                format!(
                    "PpoConfig::num_minibatches is {}, which does not divide num_envs × num_steps = {} × {} = {batch}",
                    self.num_minibatches, self.num_envs, self.num_steps
                ),
            );
        }
        let coefs: [(&'static str, f64); 8] = [
            ("lr", self.lr),
            ("gamma", self.gamma),
            ("gae_lambda", self.gae_lambda),
            ("clip_eps", self.clip_eps),
            ("ent_coef", self.ent_coef),
            ("vf_coef", self.vf_coef),
            ("max_grad_norm", self.max_grad_norm),
            ("lr", self.lr),
        ];
        for (what, v) in coefs {
            if !v.is_finite() || v < 0.0 {
                return bad(
                    what,
                    format!("PpoConfig::{what} is {v}; it must be finite and at least 0"),
                );
            }
        }
        Ok(())
    }

    /// The actor (4 → hidden → hidden → 2) and the critic (4 → hidden → hidden →
    /// 1), tanh between layers, PureJaxRL's initializers: orthogonal(√2) hidden
    /// kernels, orthogonal(0.01) for the actor's head, orthogonal(1) for the
    /// critic's, zero biases.
    pub fn networks(&self) -> (Mlp, Mlp) {
        let layer =
            |i, o, scale: f64| Linear::new(i, o).with_init(init::orthogonal(scale), init::zeros());
        let h = self.hidden;
        let s2 = 2f64.sqrt();
        let net = |head: i64, head_scale: f64| Mlp {
            layers: vec![
                layer(cartpole::OBS, h, s2),
                layer(h, h, s2),
                layer(h, head, head_scale),
            ],
            activation: Activation::Tanh,
        };
        (net(cartpole::ACTIONS, 0.01), net(1, 1.0))
    }

    /// The optimizer: `chain(clip_by_global_norm(max_grad_norm), adam(lr, eps =
    /// 1e-5))`, the learning rate annealed if [`anneal_lr`](Self::anneal_lr).
    pub fn optimizer(&self) -> optim::Optimizer {
        let lr = if self.anneal_lr {
            let (lr, per_update, updates) = (
                self.lr,
                self.num_minibatches * self.update_epochs,
                self.num_updates(),
            );
            // LR · (1 − (count // (minibatches · epochs)) / num_updates).
            Schedule::from_fn(move |count: &Op| {
                let done = (count / per_update).convert(ElementType::F32);
                (1.0 - &(done / updates as f64)) * lr
            })
        } else {
            Schedule::Constant(self.lr)
        };
        optim::chain([
            transform::clip_by_global_norm(self.max_grad_norm),
            optim::adam(lr, 0.9, 0.999, 1e-5),
        ])
    }
}

/// The actor's and the critic's parameters.
#[derive(Tree, Clone, Debug, PartialEq)]
pub struct ActorCriticParams<T> {
    /// The actor (policy logits): three layers.
    pub actor: MlpParams<T>,
    /// The critic (value): three layers.
    pub critic: MlpParams<T>,
}

/// Everything an update reads and writes (donated to each call).
#[derive(Tree, Clone, Debug, PartialEq)]
pub struct PpoState<T> {
    /// The networks.
    pub params: ActorCriticParams<T>,
    /// Adam's state.
    pub opt: OptState<T, ActorCriticParams<T>>,
    /// The environments (their observations are their states).
    pub env: CartPoleState<T>,
    /// The return of each environment's episode so far (`f32[num_envs]`).
    pub episode_returns: T,
    /// The return of each environment's last finished episode (`f32[num_envs]`).
    pub returned_episode_returns: T,
    /// The PRNG key of the rollouts and permutations (`u32[2]`).
    pub key: T,
}

/// What a call of the update program reports, one value per update.
#[derive(Tree, Clone, Debug, PartialEq)]
pub struct PpoMetrics<T> {
    /// Mean of `returned_episode_returns` over the rollout (`f32[updates_per_call]`).
    pub mean_return: T,
    /// Mean total loss over the update's minibatches (`f32[updates_per_call]`).
    pub loss: T,
}

/// One rollout step's record.
#[derive(Tree, Clone, Debug, PartialEq)]
struct Transition<T> {
    done: T,
    action: T,
    value: T,
    reward: T,
    log_prob: T,
    obs: T,
    returned: T,
}

/// A minibatch (or the whole batch) of transitions with their targets.
#[derive(Tree, Clone, Debug, PartialEq)]
struct Batch<T> {
    obs: T,
    action: T,
    value: T,
    log_prob: T,
    adv: T,
    targets: T,
}

/// The actor's logits (`[…, 2]`) and the critic's values (`[…]`) of `obs` (`[…, 4]`).
pub fn apply(nets: &(Mlp, Mlp), params: &ActorCriticParams<Op>, obs: &Op) -> (Op, Op) {
    let logits = nets.0.apply(&params.actor, obs);
    let v = nets.1.apply(&params.critic, obs);
    let mut dims = v.dims().unwrap_or_default();
    dims.pop();
    (logits, v.reshape(&dims))
}

/// The initial state in `b`'s program, with PureJaxRL's key splits: the networks
/// from the first key (one split key per layer, as `bench/ppo_cartpole_jax.py`),
/// the environments reset from one key each of the second, the rollout key last.
pub fn init_state(b: &Builder, c: &PpoConfig) -> PpoState<Op> {
    let (actor, critic) = c.networks();
    let opt = c.optimizer();
    let rng = b.prng_key(c.seed);
    let [rng, k] = rng.split_keys();
    let ks: [Op; 6] = k.split_keys();
    // Layer by layer as `Linear::init`, the six orthogonal draws in one hash.
    let layers: Vec<(&Linear, &Op)> = actor.layers.iter().chain(&critic.layers).zip(&ks).collect();
    let mut all = Linear::init_many(&layers);
    let critic_params = all.split_off(actor.layers.len());
    let params = ActorCriticParams {
        actor: all,
        critic: critic_params,
    };
    let [rng, k] = rng.split_keys();
    let env = cartpole::reset(&k.random_split(c.num_envs));
    let [_, key] = rng.split_keys();
    let zeros = b.zeros(ElementType::F32, &[c.num_envs]);
    PpoState {
        opt: opt.init(&params),
        params,
        env,
        episode_returns: zeros.clone(),
        returned_episode_returns: zeros,
        key,
    }
}

/// PureJaxRL's loss of one minibatch: the total (clipped surrogate + `vf_coef` ×
/// clipped value loss − `ent_coef` × entropy).
fn loss(c: &PpoConfig, nets: &(Mlp, Mlp), p: &ActorCriticParams<Op>, mb: &Batch<Op>) -> Op {
    let m = c.minibatch_size();
    let (logits, value) = apply(nets, p, &mb.obs);
    let logp_all = logits.log_softmax(-1);
    let log_prob = logp_all
        .take_along_axis(&mb.action.reshape(&[m, 1]), 1)
        .reshape(&[m]);
    let eps = c.clip_eps;
    let v_clipped = &mb.value + &(&value - &mb.value).clip(-eps, eps);
    let v_losses = (&value - &mb.targets).square();
    let v_losses_clipped = (&v_clipped - &mb.targets).square();
    let v_loss = v_losses.max(&v_losses_clipped).mean(&[0], false) * 0.5;
    let ratio = (&log_prob - &mb.log_prob).exp();
    let gae = &(&mb.adv - &mb.adv.mean(&[0], false)) / &(mb.adv.std(&[0], false) + 1e-8);
    let a1 = &ratio * &gae;
    let a2 = &ratio.clip(1.0 - eps, 1.0 + eps) * &gae;
    let a_loss = -a1.min(&a2).mean(&[0], false);
    let entropy = (-(&logp_all.exp() * &logp_all).sum(&[1], false)).mean(&[0], false);
    &(&a_loss + &(v_loss * c.vf_coef)) - &(entropy * c.ent_coef)
}

/// One PPO update of `s`: the new state, the update's mean return and mean loss.
///
/// Its samplers are written with Threefry's rounds unrolled
/// ([`Builder::unroll_threefry`]; the builder's setting is restored after): the
/// same bits as the rolled loop XLA's CPU backend gets by default, but each hash
/// compiles to one fused kernel instead of a 5-step loop of small ones, which
/// halves the rollout's time on the CPU (its six hashes a step were most of it).
/// The hashes here are small (at most `num_steps × num_envs` counters), so the
/// unrolled code compiles as fast.
pub fn update(c: &PpoConfig, s: PpoState<Op>) -> (PpoState<Op>, PpoMetrics<Op>) {
    let b = s.key.builder();
    let was_unrolled = b.threefry_unrolled();
    b.unroll_threefry(true);
    let out = update_unrolled(c, s);
    b.unroll_threefry(was_unrolled);
    out
}

/// [`update`]'s program, with the builder's Threefry setting as it finds it.
fn update_unrolled(c: &PpoConfig, s: PpoState<Op>) -> (PpoState<Op>, PpoMetrics<Op>) {
    let nets = c.networks();
    let opt = c.optimizer();
    let b = s.key.builder();
    let n = c.num_envs;
    let params = s.params.clone();
    // The rollout.
    let carry = (s.env, s.episode_returns, s.returned_episode_returns, s.key);
    let ((env, ep_ret, ret_ret, rng), traj) = b.scan_with(
        carry,
        (),
        &ScanOptions::new().length(c.num_steps),
        |(env, ep_ret, ret_ret, rng), ()| {
            let [rng, k] = rng.split_keys();
            let obs = cartpole::observe(&env);
            let (logits, value) = apply(&nets, &params, &obs);
            let action = k.categorical(&logits, -1);
            let log_prob = logits
                .log_softmax(-1)
                .take_along_axis(&action.reshape(&[n, 1]), 1)
                .reshape(&[n]);
            let [rng, k] = rng.split_keys();
            let (env, _, reward, done) =
                cartpole::step_with_keys(&env, &action, &k.random_split(n));
            // gymnax's LogWrapper.
            let done = done.convert(ElementType::F32);
            let new_ret = &ep_ret + &reward;
            let ep_ret = &new_ret * &(1.0 - &done);
            let ret_ret = &(&ret_ret * &(1.0 - &done)) + &(&new_ret * &done);
            let t = Transition {
                done,
                action,
                value,
                reward,
                log_prob,
                obs,
                returned: ret_ret.clone(),
            };
            ((env, ep_ret, ret_ret, rng), t)
        },
    );
    let (_, last_val) = apply(&nets, &params, &cartpole::observe(&env));
    // GAE, backwards over the rollout.
    let (gamma, gl) = (c.gamma, c.gamma * c.gae_lambda);
    let (_, adv) = b.scan_with(
        (last_val.zeros_like(), last_val),
        (traj.done.clone(), traj.value.clone(), traj.reward.clone()),
        &ScanOptions::new()
            .reverse(true)
            .unroll(16.min(c.num_steps as usize)),
        |(gae, next_value), (done, value, reward)| {
            let notdone = 1.0 - &done;
            let delta = &(&reward + &(&(next_value * gamma) * &notdone)) - &value;
            let gae = &delta + &(&(&notdone * gl) * &gae);
            ((gae.clone(), value), gae)
        },
    );
    let targets = &adv + &traj.value;
    // Flatten [steps, envs, …] to [steps · envs, …].
    let size = c.num_steps * n;
    let flat = |x: &Op| {
        let mut dims = vec![size];
        dims.extend(x.dims().unwrap_or_default().into_iter().skip(2));
        x.reshape(&dims)
    };
    let batch = Batch {
        obs: flat(&traj.obs),
        action: flat(&traj.action),
        value: flat(&traj.value),
        log_prob: flat(&traj.log_prob),
        adv: flat(&adv),
        targets: flat(&targets),
    };
    let mbs = c.num_minibatches;
    let (((params, opt_state), rng), losses) = b.scan_with(
        ((s.params, s.opt), rng),
        (),
        &ScanOptions::new().length(c.update_epochs),
        |((p, o), rng), ()| {
            let [rng, k] = rng.split_keys();
            let perm = k.permutation(size);
            let minibatches = batch.map_ref(|x: &Op| {
                let mut dims = vec![mbs, size / mbs];
                dims.extend(x.dims().unwrap_or_default().into_iter().skip(1));
                x.take(&perm, 0).reshape(&dims)
            });
            let ((p, o), losses) = b.scan(
                (p, o),
                minibatches,
                |(p, o): (ActorCriticParams<Op>, OptState<Op, ActorCriticParams<Op>>),
                 mb: Batch<Op>| {
                    let (total, (), grads) =
                        b.value_and_grad(p.clone(), |q| (loss(c, &nets, &q, &mb), ()));
                    let (p, o) = opt.update(&grads, o, &p);
                    ((p, o), total)
                },
            );
            (((p, o), rng), losses)
        },
    );
    let metrics = PpoMetrics {
        mean_return: traj.returned.mean(&[0, 1], false),
        loss: losses.mean(&[0, 1], false),
    };
    let state = PpoState {
        params,
        opt: opt_state,
        env,
        episode_returns: ep_ret,
        returned_episode_returns: ret_ret,
        key: rng,
    };
    (state, metrics)
}

/// [`PpoConfig::updates_per_call`] updates of `s` in a `scan`: the new state and
/// the metrics of each update (`f32[updates_per_call]` each).
pub fn updates(c: &PpoConfig, s: PpoState<Op>) -> (PpoState<Op>, PpoMetrics<Op>) {
    let b = s.key.builder();
    b.scan_with(
        s,
        (),
        &ScanOptions::new().length(c.updates_per_call),
        |s, ()| update(c, s),
    )
}

/// The compiled init and update programs of a configuration.
pub struct Ppo {
    config: PpoConfig,
    init: Jit<(), PpoState<Shape>>,
    update: Jit<PpoState<Shape>, (PpoState<Shape>, PpoMetrics<Shape>)>,
    init_s: f64,
    update_s: f64,
}

impl Ppo {
    /// Traces and compiles the two programs for `config`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a configuration that
    /// [`PpoConfig::validate`] refuses; build and compile errors.
    pub fn new(client: &Client, config: PpoConfig) -> Result<Ppo> {
        config.validate()?;
        let c = config.clone();
        let t = Instant::now();
        // Loops over less than 1 MiB as one kernel each: the init program's (QR
        // steps, hashes) compile in 1.3 s instead of 1.75 s, the update's GAE scan
        // 0.15 s faster, to the same bits (guide 12). (`quick_compile`'s lower
        // optimization level would save 0.1 s more on init, but moves the last
        // bits of a QR, and so the whole training's path.)
        let loops = CompileOptions::new().single_kernel_loops(1 << 20);
        let init = client.jit_with("ppo_init", &(), &loops, |b, ()| init_state(b, &c))?;
        let init_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let update =
            client.jit_donating_with("ppo_update", init.output_spec(), &loops, |_, s| {
                updates(&c, s)
            })?;
        let update_s = t.elapsed().as_secs_f64();
        Ok(Ppo {
            config,
            init,
            update,
            init_s,
            update_s,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PpoConfig {
        &self.config
    }

    /// Seconds spent tracing and compiling the init program and the update
    /// program.
    pub fn compile_s(&self) -> (f64, f64) {
        (self.init_s, self.update_s)
    }

    /// The update program (e.g. for its HLO text or its input spec).
    pub fn update_program(&self) -> &Jit<PpoState<Shape>, (PpoState<Shape>, PpoMetrics<Shape>)> {
        &self.update
    }

    /// The initial state.
    pub fn init(&self) -> Result<PpoState<Buffer>> {
        Ok(self.init.call(&())?)
    }

    /// One call: [`PpoConfig::updates_per_call`] updates; the state is donated.
    pub fn step(&self, state: PpoState<Buffer>) -> Result<(PpoState<Buffer>, PpoMetrics<Buffer>)> {
        let _span = tracing::debug_span!("ppo_step").entered();
        Ok(self.update.call_donated(state)?)
    }
}
