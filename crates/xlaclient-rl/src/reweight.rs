//! Path-space reweighting: train a stochastic policy `W` by simulating `N` paths with
//! it (a sample of its path distribution `P`), scoring each path with a quality
//! `q ≥ 0`, resampling `N` paths with probability proportional to `q` (a draw from the
//! reweighted empirical distribution `Q`), and fitting `W` to the resampled paths'
//! actions given their states by maximum likelihood; then repeating with the improved
//! `W`.
//!
//! The pieces here:
//!
//! - [`resample`]: indices drawn proportionally to the weights ([`Resampling`]:
//!   multinomial or systematic), from a seeded generator (Xoshiro256++, so a seed
//!   gives the same indices on every platform and `rand` version).
//! - [`divergence_bits`]: `log2 N − H(w / Σw)`, the divergence of the reweighted
//!   sample from the plain one, in bits (see its docs for exactly what it estimates).
//! - [`PolicyFit`]: a compiled program doing `K` optimizer steps on the mean negative
//!   log-likelihood of a batch of (observation, action) pairs under a softmax policy
//!   (an [`Mlp`] giving logits), the parameters and optimizer state staying on the
//!   device; and [`PolicyFit::probs`], the policy's action probabilities for a batch
//!   of observations, for simulating.
//!
//! ```no_run
//! use xlaclient_core::Client;
//! use xlaclient_nn::{optim, Activation, Mlp};
//! use xlaclient_rl::reweight::{self, PolicyFit, Resampling};
//!
//! let client = Client::cpu()?;
//! // 2 observation features → 16 → tanh → 4 action logits; Adam; batches of 8 pairs,
//! // 10 steps per call; the policy evaluated on 8 observations at a time.
//! let net = Mlp::new(&[2, 16, 4], Activation::Tanh);
//! let fit = PolicyFit::new(&client, net, optim::adam(1e-2, 0.9, 0.999, 1e-8), 8, 10, 8)?;
//! let mut state = fit.init(0)?;
//! let probs = fit.probs(&state.params, &[0.0; 2 * 8])?; // 8 × 4 probabilities
//! # let _ = probs;
//! let q = [0.1, 2.0, 0.0, 1.0];
//! let picked = reweight::resample(&q, 4, Resampling::Systematic, 7)?;
//! println!("D(Q||P) = {:.3} bits", reweight::divergence_bits(&q)?);
//! # let _ = picked;
//! let obs = vec![0.5f32; 2 * 8];
//! let actions = vec![1i32; 8];
//! state = fit.fit(state, &obs, &actions)?;
//! # Ok::<(), xlaclient_rl::Error>(())
//! ```

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt as _, SeedableRng as _};

use crate::error::{Error, NetworkOutputError, Result, WeightsError};
use crate::nn::{Mlp, MlpParams, OptState, Optimizer, log_softmax};
use crate::pjrt::{Buffer, Client};
use crate::shape::{ElementType, Shape};
use crate::tree::Tree;
use crate::{Jit, Op};
use xlaclient_core::ClientExt;

/// How [`resample`] draws its indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resampling {
    /// `n` independent draws from the normalised weights (each index's count is
    /// binomial with mean `n·w_i/Σw`).
    Multinomial,
    /// One uniform offset `u ∈ [0, 1)`, then the points `(u + k)/n` for `k < n`,
    /// each mapped to the index whose cumulative-weight interval holds it: each
    /// index's count is `⌊n·w_i/Σw⌋` or one more, so its variance is lower than
    /// multinomial's. The indices come out in increasing order.
    Systematic,
}

/// Checks the weights and returns their sum: an error unless every weight is finite
/// and `≥ 0`, at least one is `> 0`, and there is at least one.
fn checked_total(weights: &[f64]) -> Result<f64> {
    if weights.is_empty() {
        return Err(WeightsError::Empty.into());
    }
    if let Some((index, &value)) = weights
        .iter()
        .enumerate()
        .find(|(_, w)| !w.is_finite() || **w < 0.0)
    {
        return Err(WeightsError::Invalid { index, value }.into());
    }
    let count = weights.len();
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return Err(WeightsError::AllZero { count }.into());
    }
    if !total.is_finite() {
        return Err(WeightsError::SumOverflows { count }.into());
    }
    Ok(total)
}

/// The weights divided by their sum (the resampling distribution), with the checks
/// of [`resample`].
pub fn normalized(weights: &[f64]) -> Result<Vec<f64>> {
    let total = checked_total(weights)?;
    Ok(weights.iter().map(|w| w / total).collect())
}

/// `n` indices into `weights`, each drawn with probability `w_i / Σw` (see
/// [`Resampling`] for the two schemes), from a Xoshiro256++ generator seeded with
/// `seed`. An index of weight zero is never drawn.
///
/// Errors ([`Error::InvalidWeights`], of the kinds of [`WeightsError`]): no
/// weights, a negative, NaN or infinite weight, all weights zero, a sum that
/// overflows.
///
/// ```
/// use xlaclient_rl::reweight::{resample, Resampling};
///
/// let idx = resample(&[0.0, 1.0, 3.0], 8, Resampling::Systematic, 0)?;
/// assert_eq!(idx.iter().filter(|&&i| i == 2).count(), 6); // 8 · 3/4, exactly
/// assert!(!idx.contains(&0));
/// assert!(resample(&[0.0, 0.0], 2, Resampling::Multinomial, 0).is_err());
/// # Ok::<(), xlaclient_rl::Error>(())
/// ```
pub fn resample(weights: &[f64], n: usize, method: Resampling, seed: u64) -> Result<Vec<usize>> {
    let total = checked_total(weights)?;
    let mut cumulative = Vec::with_capacity(weights.len());
    let mut acc = 0.0;
    for w in weights {
        acc += w / total;
        cumulative.push(acc);
    }
    // The last index of positive weight: where a point rounding past the final
    // cumulative sum (which may be 1 − ε) lands.
    let last = weights.iter().rposition(|w| *w > 0.0).unwrap_or(0);
    let find = |u: f64| -> usize {
        // The first index whose cumulative sum exceeds u: never one of weight zero,
        // as its cumulative sum equals its predecessor's.
        cumulative.partition_point(|c| *c <= u).min(last)
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Ok(match method {
        Resampling::Multinomial => (0..n).map(|_| find(rng.random::<f64>())).collect(),
        Resampling::Systematic => {
            let u: f64 = rng.random();
            (0..n).map(|k| find((u + k as f64) / n as f64)).collect()
        }
    })
}

/// The divergence of the reweighted sample from the plain one, in bits:
/// `log2 N − H(p)` where `p_i = w_i / Σw` and `H(p) = −Σ p_i log2 p_i` (with
/// `0 log 0 = 0`).
///
/// Exactly: for `N` paths sampled from `P` and weighted by `w`, this is the
/// Kullback–Leibler divergence `D(Q̂ ‖ P̂) = Σ p_i log2(p_i / (1/N))` between the
/// weighted empirical distribution `Q̂` (mass `p_i` on path `i`) and the plain
/// empirical distribution `P̂` (mass `1/N` on each path), treating the `N` sampled
/// paths as distinct points. It is the plug-in estimate of `D(Q ‖ P)` for the
/// reweighting `Q ∝ q·P`; it lies in `[0, log2 N]` — 0 for equal weights, `log2 N`
/// when one path has all the weight — so it saturates at `log2 N` and
/// underestimates a divergence larger than the sample can show. `N·2^(−D)` is the
/// perplexity-based effective sample size of the reweighted sample.
///
/// Errors as [`resample`]'s.
///
/// ```
/// use xlaclient_rl::reweight::divergence_bits;
///
/// assert_eq!(divergence_bits(&[2.0; 8])?, 0.0);
/// assert!((divergence_bits(&[0.0, 0.0, 5.0, 0.0])? - 2.0).abs() < 1e-12);
/// # Ok::<(), xlaclient_rl::Error>(())
/// ```
pub fn divergence_bits(weights: &[f64]) -> Result<f64> {
    let p = normalized(weights)?;
    let entropy: f64 = p
        .iter()
        .filter(|pi| **pi > 0.0)
        .map(|pi| -pi * pi.log2())
        .sum();
    // Rounding can leave a hair below zero for equal weights.
    Ok(((p.len() as f64).log2() - entropy).max(0.0))
}

/// The state [`PolicyFit`] trains: the policy's parameters, the optimizer's state and
/// the last step's loss (the mean negative log-likelihood, in nats, before that
/// step's update).
#[derive(crate::Tree, Clone, Debug)]
pub struct FitState<T> {
    /// The policy network's parameters.
    pub params: MlpParams<T>,
    /// The optimizer's state.
    pub opt: OptState<T, MlpParams<T>>,
    /// The mean negative log-likelihood at the start of the last step (`f32`).
    pub loss: T,
}

/// A batch of (observation, action) pairs: `observations` `f32[B, obs]`, `actions`
/// `s32[B]`.
#[derive(crate::Tree, Clone, Debug)]
pub struct FitBatch<T> {
    /// One observation per row.
    pub observations: T,
    /// The action taken at each observation, in `0..actions`.
    pub actions: T,
}

/// The mean negative log-likelihood of `actions` (`s32[B]`) under the softmax policy
/// whose logits are `net.apply(params, observations)`:
/// `−(1/B) Σ_b log softmax(logits_b)[a_b]`, in nats.
#[track_caller]
pub fn mean_nll(net: &Mlp, params: &MlpParams<Op>, observations: &Op, actions: &Op) -> Op {
    let logits = net.apply(params, observations);
    let classes = net.layers.last().map_or(1, |l| l.output);
    let logp = log_softmax(&logits, -1);
    let picked = (&actions.one_hot(classes, ElementType::F32) * &logp).sum(&[-1], false);
    -&picked.mean(&[0], false)
}

/// The fit step of path-space reweighting, compiled: `K` optimizer steps on
/// [`mean_nll`] for one batch per call, the state donated and updated in place on the
/// device; and the policy's forward pass for simulating.
pub struct PolicyFit {
    net: Mlp,
    batch: usize,
    probs_batch: usize,
    obs_dim: usize,
    actions: usize,
    init: Jit<Shape, FitState<Shape>>,
    step: Jit<(FitState<Shape>, FitBatch<Shape>), FitState<Shape>>,
    probs: Jit<(MlpParams<Shape>, Shape), Shape>,
    client: Client,
}

impl std::fmt::Debug for PolicyFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyFit")
            .field("net", &self.net)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl PolicyFit {
    /// Compiles the programs for the softmax policy `net` (observations of
    /// `net`'s input size, one logit per action), optimizer `opt`, fit batches of
    /// `batch` pairs, `steps` optimizer steps per [`fit`](PolicyFit::fit) call (a
    /// `fori_loop` in the program; each step uses the whole batch) and
    /// [`probs`](PolicyFit::probs) batches of `probs_batch` observations.
    ///
    /// Errors: `batch`, `steps` or `probs_batch` zero ([`Error::InvalidArgument`]),
    /// or a failed compile.
    pub fn new(
        client: &Client,
        net: Mlp,
        opt: Optimizer,
        batch: usize,
        steps: u32,
        probs_batch: usize,
    ) -> Result<PolicyFit> {
        for (name, v) in [
            ("batch", batch),
            ("steps", steps as usize),
            ("probs_batch", probs_batch),
        ] {
            if v == 0 {
                return Err(Error::InvalidArgument {
                    what: name,
                    reason: "needs 1 or more".into(),
                });
            }
        }
        if steps > i32::MAX as u32 {
            return Err(Error::InvalidArgument {
                what: "steps",
                reason: format!("{steps} is over i32::MAX"),
            });
        }
        let obs_dim = net.layers.first().map_or(0, |l| l.input);
        let actions = net.layers.last().map_or(0, |l| l.output);
        let net2 = net.clone();
        let key_spec = Shape::of::<u32>(&[2]);
        let init = client.jit("policy_init", &key_spec, |b, key: Op| {
            let params = net2.init(&key);
            FitState {
                opt: opt.init(&params),
                params,
                loss: b.constant(f32::NAN),
            }
        })?;
        let batch_spec = FitBatch {
            observations: Shape::of::<f32>(&[batch as i64, obs_dim]),
            actions: Shape::of::<i32>(&[batch as i64]),
        };
        let spec = (init.output_spec().clone(), batch_spec);
        let net3 = net.clone();
        let step = client.jit_donating(
            "policy_fit",
            &spec,
            |b, (s, data): (FitState<Op>, FitBatch<Op>)| {
                b.fori_loop(0, steps as i32, s, |_, s| {
                    let (loss, (), grads) = b.value_and_grad(s.params.clone(), |p| {
                        (mean_nll(&net3, &p, &data.observations, &data.actions), ())
                    });
                    let (params, opt) = opt.update(&grads, s.opt, &s.params);
                    FitState { params, opt, loss }
                })
            },
        )?;
        let net4 = net.clone();
        let probs_spec = (net.spec(), Shape::of::<f32>(&[probs_batch as i64, obs_dim]));
        let probs = client.jit("policy_probs", &probs_spec, |_, (p, x)| {
            net4.apply(&p, &x).softmax(-1)
        })?;
        Ok(PolicyFit {
            net,
            batch,
            probs_batch,
            obs_dim: obs_dim as usize,
            actions: actions as usize,
            init,
            step,
            probs,
            client: client.clone(),
        })
    }

    /// The number of pairs [`fit`](PolicyFit::fit) takes.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The number of observations [`probs`](PolicyFit::probs) takes.
    pub fn probs_batch(&self) -> usize {
        self.probs_batch
    }

    /// The number of actions (the network's output size).
    pub fn num_actions(&self) -> usize {
        self.actions
    }

    /// The observation size (the network's input size).
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    /// The shapes of the state.
    pub fn state_spec(&self) -> &FitState<Shape> {
        self.step.output_spec()
    }

    /// A fresh state: the network's initialisers drawn on the device from
    /// `prng_key(seed)`, the optimizer's initial state, loss NaN.
    pub fn init(&self, seed: u32) -> Result<FitState<Buffer>> {
        let key = self.client.buffer_from_host(&[0u32, seed], &[2])?;
        Ok(self.init.call(&key)?)
    }

    fn check_batch(&self, observations: &[f32], actions: Option<&[i32]>) -> Result<()> {
        let rows = if actions.is_some() {
            self.batch
        } else {
            self.probs_batch
        };
        if observations.len() != rows * self.obs_dim {
            return Err(Error::Length {
                what: format!(
                    "observation values (the policy takes {rows} × {}, batch × features)",
                    self.obs_dim
                ),
                given: observations.len(),
                expected: rows * self.obs_dim,
            });
        }
        if let Some(actions) = actions {
            if actions.len() != self.batch {
                return Err(Error::Length {
                    what: "actions, one per row of the batch".into(),
                    given: actions.len(),
                    expected: self.batch,
                });
            }
            if let Some((i, a)) = actions
                .iter()
                .enumerate()
                .find(|(_, a)| **a < 0 || **a as usize >= self.actions)
            {
                return Err(Error::InvalidAction {
                    what: format!("fit batch row {i}"),
                    action: i64::from(*a),
                    actions: self.actions,
                });
            }
        }
        Ok(())
    }

    /// `K` optimizer steps on the batch; the state is donated (updated in place) and
    /// returned. `observations` is `batch × obs` values, row-major; `actions` one per
    /// row, in `0..actions`.
    pub fn fit(
        &self,
        state: FitState<Buffer>,
        observations: &[f32],
        actions: &[i32],
    ) -> Result<FitState<Buffer>> {
        self.check_batch(observations, Some(actions))?;
        let batch = FitBatch {
            observations: self
                .client
                .buffer_from_host(observations, &[self.batch as i64, self.obs_dim as i64])?,
            actions: self
                .client
                .buffer_from_host(actions, &[self.batch as i64])?,
        };
        Ok(self.step.call_donated((state, batch))?)
    }

    /// The policy's action probabilities for `probs_batch` observations
    /// (`probs_batch × obs` values, row-major): `probs_batch × actions` values,
    /// row-major. The parameters stay
    /// on the device; only the observations go up and the probabilities come back.
    pub fn probs(&self, params: &MlpParams<Buffer>, observations: &[f32]) -> Result<Vec<f32>> {
        self.check_batch(observations, None)?;
        let x = self.client.buffer_from_host(
            observations,
            &[self.probs_batch as i64, self.obs_dim as i64],
        )?;
        let mut args: Vec<&Buffer> = params.leaves();
        args.push(&x);
        let out = self.probs.executable().execute(&args)?;
        Ok(out
            .first()
            .ok_or(NetworkOutputError::Missing {
                program: "PolicyFit::probs",
            })?
            .to_vec::<f32>()?)
    }
}
