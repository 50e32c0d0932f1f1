//! The Catch workload, actor and learner.
//!
//! Fixed so that other stacks can be measured against it: Catch 10 × 5
//! (`xlaclient_rl::catch`, observations of 50 floats, 3 actions); a Q-network MLP
//! 50 → 64 → relu → 3 in `f32`.
//!
//! - **Actor** ([`run_actor`]): steps [`B`] Catch environments, each an ε-greedy
//!   agent written as `async` code on the batch stepper (`xlaclient_rl::Stepper`),
//!   their predictions batched into one call of the network compiled locally
//!   through XLA. One round = [`T`] steps of every environment; the trajectory
//!   message holds the round's observations (and the bootstrap observation after
//!   the last step), actions, rewards, discounts and the parameter version the
//!   round acted with. Between rounds it picks up the newest parameters and checks
//!   the run's stop flag.
//! - **Learner** ([`Learner`]): pulls trajectories, drops those it already has
//!   (by `(actor, epoch, seq)`) and those acting on parameters more than
//!   [`LearnerConfig::max_lag`] versions old, keeps the rest in a ring-buffer
//!   replay (uniform sampling), and trains one compiled, donating Q(λ) step
//!   (`xlaclient_rl::anakin::td_loss`, Adam) on sampled sequences. Every
//!   [`LearnerConfig::publish_every`] steps it publishes the parameters as a new
//!   version. It writes a checkpoint (parameters, Adam's state, the counters and
//!   the ids it has seen) every [`LearnerConfig::checkpoint_every`], and acks the
//!   trajectories only once a checkpoint holds them: a learner killed at any point
//!   restarts from its checkpoint, and what it had not acked is delivered again —
//!   nothing acked is lost, and nothing is used twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use xlaclient_core::{Buffer, Client, ClientExt, ElementType, Jit, Op, Shape, Tree};
use xlaclient_nn::checkpoint::{self, Checkpoint};
use xlaclient_nn::{Activation, Mlp, OptState, optim};
use xlaclient_rl::catch::{Catch, NUM_ACTIONS};
use xlaclient_rl::{BatchSizes, BatchedNet, Environment, NetHandle, Rng, Stepper};

use crate::error::{Error, Result};
use crate::frame::{FrameError, Kind, Leaf, Message};
use crate::transport::{AckHandle, Transport};

/// Environments per actor process.
pub const B: usize = 32;
/// Steps per trajectory message.
pub const T: usize = 16;
/// Values in one observation.
pub const OBS: usize = 50;
/// Hidden units.
pub const HIDDEN: usize = 64;

/// The network: MLP 50 → 64 → relu → 3.
pub fn network() -> Mlp {
    Mlp::new(
        &[OBS as i64, HIDDEN as i64, NUM_ACTIONS as i64],
        Activation::Relu,
    )
}

/// The parameters' shapes, leaf by leaf (`w1, b1, w2, b2`).
pub fn param_shapes() -> Vec<Shape> {
    vec![
        Shape::of::<f32>(&[OBS as i64, HIDDEN as i64]),
        Shape::of::<f32>(&[HIDDEN as i64]),
        Shape::of::<f32>(&[HIDDEN as i64, NUM_ACTIONS as i64]),
        Shape::of::<f32>(&[NUM_ACTIONS as i64]),
    ]
}

fn mlp_apply(mlp: &Mlp, p: &[Op], x: &Op) -> Op {
    let params = vec![
        xlaclient_nn::LinearParams {
            w: p[0].clone(),
            b: p[1].clone(),
        },
        xlaclient_nn::LinearParams {
            w: p[2].clone(),
            b: p[3].clone(),
        },
    ];
    mlp.apply(&params, x)
}

/// The Q-values of one observation in plain Rust (for the greedy evaluation).
pub fn q_values(p: &[Vec<f32>], obs: &[f32]) -> [f32; NUM_ACTIONS] {
    let (w1, b1, w2, b2) = (&p[0], &p[1], &p[2], &p[3]);
    let mut h = [0f32; HIDDEN];
    for (j, hj) in h.iter_mut().enumerate() {
        let mut s = b1[j];
        for k in 0..OBS {
            s += obs[k] * w1[k * HIDDEN + j];
        }
        *hj = s.max(0.0);
    }
    let mut q = [0f32; NUM_ACTIONS];
    for (a, qa) in q.iter_mut().enumerate() {
        *qa = b2[a]
            + (0..HIDDEN)
                .map(|j| h[j] * w2[j * NUM_ACTIONS + a])
                .sum::<f32>();
    }
    q
}

/// The greedy policy's expected return under parameters `p` (host leaves).
pub fn greedy_eval(p: &[Vec<f32>]) -> f64 {
    xlaclient_rl::catch::greedy_eval(|obs| q_values(p, obs))
}

fn argmax(xs: &[f32]) -> usize {
    (0..xs.len()).fold(0, |best, i| if xs[i] > xs[best] { i } else { best })
}

/// One environment's share of a trajectory: `T` steps and the bootstrap
/// observation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sequence {
    /// `[T + 1, OBS]` observations.
    pub obs: Vec<f32>,
    /// `[T]` actions.
    pub actions: Vec<i32>,
    /// `[T]` rewards.
    pub rewards: Vec<f32>,
    /// `[T]` discounts.
    pub discounts: Vec<f32>,
}

/// Encodes sequences of `B` environments as a trajectory message.
///
/// # Errors
/// [`Error::Frame`] when a sequence has another length.
pub fn trajectory_message(
    actor: u32,
    epoch: u64,
    seq: u64,
    version: u64,
    seqs: &[Sequence],
) -> Result<Message> {
    let b = seqs.len() as u64;
    let cat_f =
        |f: &dyn Fn(&Sequence) -> &[f32]| seqs.iter().flat_map(f).copied().collect::<Vec<f32>>();
    let obs = cat_f(&|s| &s.obs);
    let rewards = cat_f(&|s| &s.rewards);
    let discounts = cat_f(&|s| &s.discounts);
    let actions: Vec<i32> = seqs
        .iter()
        .flat_map(|s| s.actions.iter().copied())
        .collect();
    Ok(Message {
        kind: Kind::Trajectory,
        actor,
        epoch,
        seq,
        version,
        leaves: vec![
            Leaf::f32(&[b, T as u64 + 1, OBS as u64], &obs)?,
            Leaf::i32(&[b, T as u64], &actions)?,
            Leaf::f32(&[b, T as u64], &rewards)?,
            Leaf::f32(&[b, T as u64], &discounts)?,
        ],
    })
}

/// The sequences of a trajectory message, checked: four leaves of the layout
/// [`trajectory_message`] writes, actions in range, discounts 0 or 1.
///
/// # Errors
/// [`FrameError::Layout`] naming the leaf and what is wrong with it.
pub fn sequences_of(m: &Message) -> std::result::Result<Vec<Sequence>, FrameError> {
    let bad = |s: String| FrameError::Layout(format!("trajectory from actor {}: {s}", m.actor));
    if m.leaves.len() != 4 {
        return Err(bad(format!(
            "{} arrays, expected 4 (obs, actions, rewards, discounts)",
            m.leaves.len()
        )));
    }
    let b = m.leaves[0].dims.first().copied().unwrap_or(0);
    if !(1..=4096).contains(&b) {
        return Err(bad(format!(
            "obs dims {:?}: batch must be in 1..=4096",
            m.leaves[0].dims
        )));
    }
    let want: [(&str, Vec<u64>, crate::frame::Dtype); 4] = [
        (
            "obs",
            vec![b, T as u64 + 1, OBS as u64],
            crate::frame::Dtype::F32,
        ),
        ("actions", vec![b, T as u64], crate::frame::Dtype::I32),
        ("rewards", vec![b, T as u64], crate::frame::Dtype::F32),
        ("discounts", vec![b, T as u64], crate::frame::Dtype::F32),
    ];
    for (leaf, (name, dims, dtype)) in m.leaves.iter().zip(&want) {
        if &leaf.dims != dims || leaf.dtype != *dtype {
            return Err(bad(format!(
                "{name} is {:?} {:?}, expected {dtype:?} {dims:?}",
                leaf.dtype, leaf.dims
            )));
        }
    }
    let obs = m.leaves[0].to_f32()?;
    let actions = m.leaves[1].to_i32()?;
    let rewards = m.leaves[2].to_f32()?;
    let discounts = m.leaves[3].to_f32()?;
    if let Some(a) = actions
        .iter()
        .find(|&&a| !(0..NUM_ACTIONS as i32).contains(&a))
    {
        return Err(bad(format!("action {a} outside 0..{NUM_ACTIONS}")));
    }
    if let Some(d) = discounts.iter().find(|&&d| d != 0.0 && d != 1.0) {
        return Err(bad(format!("discount {d}, expected 0 or 1")));
    }
    if let Some(x) = obs.iter().chain(&rewards).find(|x| !x.is_finite()) {
        return Err(bad(format!("non-finite value {x}")));
    }
    let o = (T + 1) * OBS;
    Ok((0..b as usize)
        .map(|i| Sequence {
            obs: obs[i * o..(i + 1) * o].to_vec(),
            actions: actions[i * T..(i + 1) * T].to_vec(),
            rewards: rewards[i * T..(i + 1) * T].to_vec(),
            discounts: discounts[i * T..(i + 1) * T].to_vec(),
        })
        .collect())
}

/// Parameter leaves as frame leaves.
///
/// # Errors
/// The runtime's error downloading them.
pub fn param_leaves(params: &[Buffer]) -> Result<Vec<Leaf>> {
    params
        .iter()
        .map(|b| {
            let dims: Vec<u64> = b.dims()?.iter().map(|&d| d as u64).collect();
            Ok(Leaf::f32(&dims, &b.to_vec::<f32>()?)?)
        })
        .collect()
}

/// A parameter message's leaves as host vectors, checked against
/// [`param_shapes`].
///
/// # Errors
/// [`FrameError::Layout`] naming the leaf.
pub fn host_params_of(m: &Message) -> std::result::Result<Vec<Vec<f32>>, FrameError> {
    let shapes = param_shapes();
    if m.leaves.len() != shapes.len() {
        return Err(FrameError::Layout(format!(
            "parameters: {} arrays, expected {}",
            m.leaves.len(),
            shapes.len()
        )));
    }
    m.leaves
        .iter()
        .zip(&shapes)
        .enumerate()
        .map(|(i, (l, s))| {
            let dims: Vec<u64> = s.dims().iter().map(|&d| d as u64).collect();
            if l.dims != dims {
                return Err(FrameError::Layout(format!(
                    "parameter {i} has dims {:?}, expected {dims:?}",
                    l.dims
                )));
            }
            l.to_f32()
        })
        .collect()
}

/// What an actor does.
#[derive(Clone, Debug)]
pub struct ActorConfig {
    /// Its index among the actors.
    pub index: u32,
    /// Its epoch: a new one per process start (nanoseconds since 1970 by default).
    pub epoch: u64,
    /// ε of the ε-greedy policy.
    pub epsilon: f32,
    /// Stop after this many trajectories (None: until the run's stop flag).
    pub max_trajectories: Option<u64>,
    /// How long to keep retrying a publish (server away, stream full) before
    /// giving up with an error.
    pub give_up: Duration,
    /// Act with the parameter version given (never pick up newer ones): a
    /// version-skewed actor, for tests.
    pub frozen_params: bool,
}

impl ActorConfig {
    /// Actor `index`, epoch from the clock, ε = 0.1, until the stop flag.
    pub fn new(index: u32) -> ActorConfig {
        ActorConfig {
            index,
            epoch: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            epsilon: 0.1,
            max_trajectories: None,
            give_up: Duration::from_secs(120),
            frozen_params: false,
        }
    }
}

/// What an actor did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ActorStats {
    /// Trajectories the server accepted.
    pub sent: u64,
    /// Publishes refused (stream full) and waited through.
    pub refused: u64,
    /// Transport errors waited through.
    pub errors: u64,
    /// Time spent held back.
    pub waited: Duration,
    /// Parameter versions picked up.
    pub param_updates: u64,
    /// Environment steps taken.
    pub env_steps: u64,
    /// The version of the last parameters used.
    pub version: u64,
    /// Seconds from the first round to the last.
    pub seconds: f64,
}

/// The config key an actor's sent count lives under.
pub fn sent_key(index: u32, epoch: u64) -> String {
    format!("sent.{index}.{epoch}")
}

/// The config key an actor writes when it stops (its final sent count).
pub fn done_key(index: u32, epoch: u64) -> String {
    format!("done.{index}.{epoch}")
}

/// The config key of the run's stop flag.
pub const STOP_KEY: &str = "stop";

async fn agent(
    net: NetHandle,
    mut env: Catch,
    mut rng: Rng,
    epsilon: f32,
) -> xlaclient_rl::Result<(Catch, Rng, Sequence)> {
    let mut s = Sequence {
        obs: Vec::with_capacity((T + 1) * OBS),
        actions: Vec::with_capacity(T),
        rewards: Vec::with_capacity(T),
        discounts: Vec::with_capacity(T),
    };
    for _ in 0..T {
        let obs = env.observation();
        let q = net.predict(obs.as_slice()).await?;
        let a = if rng.uniform() < epsilon {
            rng.below(NUM_ACTIONS as u64)? as usize
        } else {
            argmax(&q)
        };
        let t = env.step(a)?;
        s.obs.extend_from_slice(&obs);
        s.actions.push(a as i32);
        s.rewards.push(t.reward);
        s.discounts.push(t.discount);
    }
    s.obs.extend_from_slice(&env.observation());
    Ok((env, rng, s))
}

fn wait_for_params(tr: &Transport, have: Option<u64>, timeout: Duration) -> Result<Message> {
    let start = Instant::now();
    loop {
        match tr.get_params(have) {
            Ok(Some(m)) => return Ok(m),
            Ok(None) => {}
            Err(e @ Error::Frame(_)) => return Err(e),
            Err(e) if start.elapsed() > timeout => return Err(e),
            Err(_) => {}
        }
        if start.elapsed() > timeout {
            return Err(Error::Nats {
                what: "wait for parameters".into(),
                reason: format!("none published within {timeout:?}"),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn upload_params(client: &Client, host: &[Vec<f32>]) -> Result<Vec<Buffer>> {
    host.iter()
        .zip(param_shapes())
        .map(|(v, s)| Ok(client.buffer_from_host(v, s.dims())?))
        .collect()
}

/// Runs an actor until the run's stop flag is set (or `max_trajectories`).
///
/// # Errors
/// A transport error that outlasted `give_up`; the stepper's or the runtime's.
pub fn run_actor(tr: &Transport, client: &Client, cfg: &ActorConfig) -> Result<ActorStats> {
    let mut stats = ActorStats::default();
    let first = wait_for_params(tr, None, cfg.give_up)?;
    let mut version = first.version;
    let host = host_params_of(&first)?;
    let mlp = network();
    let mut net = Some(BatchedNet::new(
        client,
        upload_params(client, &host)?,
        &[OBS as i64],
        BatchSizes::new(&[B])?,
        move |p: &Vec<Op>, obs| mlp_apply(&mlp, p, obs),
    )?);
    stats.version = version;
    let base = cfg.epoch ^ (u64::from(cfg.index) << 32);
    let mut envs: Vec<(Catch, Rng)> = (0..B as u64)
        .map(|i| {
            (
                Catch::new(base.wrapping_add(2 * i)),
                Rng::new(base.wrapping_add(2 * i + 1)),
            )
        })
        .collect();
    let start = Instant::now();
    let mut seq = 0u64;
    loop {
        if cfg.max_trajectories.is_some_and(|m| seq >= m) {
            break;
        }
        match tr.get_config(STOP_KEY) {
            Ok(Some(v)) if v == "1" => break,
            _ => {}
        }
        if !cfg.frozen_params
            && let Ok(Some(m)) = tr.get_params(Some(version))
            && let Ok(host) = host_params_of(&m)
            && let Some(n) = net.as_mut()
        {
            n.set_params(upload_params(client, &host)?)?;
            version = m.version;
            stats.param_updates += 1;
        }
        let mut stepper = Stepper::new(net.take().ok_or(Error::Settings("net lost".into()))?);
        for (env, rng) in envs.drain(..) {
            let eps = cfg.epsilon;
            stepper.spawn(move |h| agent(h, env, rng, eps));
        }
        let outs = stepper.run()?;
        net = Some(stepper.into_net());
        let mut seqs = Vec::with_capacity(B);
        for o in outs {
            let (env, rng, s) = o?;
            envs.push((env, rng));
            seqs.push(s);
        }
        let m = trajectory_message(cfg.index, cfg.epoch, seq, version, &seqs)?;
        let s = tr.send(&m, cfg.give_up)?;
        stats.refused += s.refused;
        stats.errors += s.errors;
        stats.waited += s.waited;
        seq += 1;
        stats.sent = seq;
        stats.env_steps += (B * T) as u64;
        stats.version = version;
        // The count is for the learner's `lost` figure; a failure to write it
        // (server away) is made up for by the next one.
        let _ = tr.put_config(&sent_key(cfg.index, cfg.epoch), &seq.to_string());
    }
    stats.seconds = start.elapsed().as_secs_f64();
    // Tells the learner's drain that nothing more comes from this epoch.
    let _ = tr.put_config(&done_key(cfg.index, cfg.epoch), &seq.to_string());
    Ok(stats)
}

/// What the learner does.
#[derive(Clone, Debug)]
pub struct LearnerConfig {
    /// Adam's learning rate.
    pub lr: f64,
    /// λ of the Q(λ) targets.
    pub lambda: f64,
    /// Sequences per train step.
    pub batch: usize,
    /// Sequences the replay keeps.
    pub replay_capacity: usize,
    /// Sequences in the replay before training starts.
    pub min_replay: usize,
    /// Train steps per new trajectory received (a fraction is carried over).
    pub train_ratio: f64,
    /// Publish the parameters every this many train steps.
    pub publish_every: u64,
    /// Trajectories acting on parameters more than this many versions older than
    /// the learner's are dropped (counted in `stale_dropped`).
    pub max_lag: u64,
    /// Where checkpoints go (None: no checkpoints; acks then follow each fetch).
    pub checkpoint_dir: Option<PathBuf>,
    /// How often to checkpoint (and ack what the checkpoint holds).
    pub checkpoint_every: Duration,
    /// Stop once the greedy evaluation reaches this (checked every
    /// `eval_every` train steps).
    pub target_eval: f64,
    /// Train steps between evaluations.
    pub eval_every: u64,
    /// Do not stop (on reaching the target) before this many train steps.
    pub min_train_steps: u64,
    /// Stop after this many train steps at most.
    pub max_train_steps: u64,
    /// Stop after this long at most.
    pub max_time: Duration,
    /// Seed of the initial parameters and the replay's sampling.
    pub seed: u64,
}

impl Default for LearnerConfig {
    fn default() -> Self {
        LearnerConfig {
            lr: 3e-3,
            lambda: 0.9,
            batch: 64,
            replay_capacity: 4096,
            min_replay: 128,
            train_ratio: 1.0,
            publish_every: 5,
            max_lag: 20,
            checkpoint_dir: None,
            checkpoint_every: Duration::from_millis(500),
            target_eval: 1.0,
            eval_every: 25,
            min_train_steps: 0,
            max_train_steps: 20_000,
            max_time: Duration::from_secs(120),
            seed: 0,
        }
    }
}

#[derive(xlaclient_core::Tree)]
struct TrainIn<X> {
    params: Vec<X>,
    opt: OptState<X, Vec<X>>,
    batch: Vec<X>,
}

#[derive(xlaclient_core::Tree)]
struct TrainOut<X> {
    params: Vec<X>,
    opt: OptState<X, Vec<X>>,
    loss: X,
}

/// What a learner checkpoint holds on the device side.
#[derive(xlaclient_core::Tree)]
struct Saved<X> {
    params: Vec<X>,
    opt: OptState<X, Vec<X>>,
}

/// The learner's counters and figures (its final line is [`LearnerReport`]'s
/// `Display`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LearnerReport {
    /// Trajectories the actors report as accepted by the server.
    pub trajectories_sent: u64,
    /// Trajectories put in the replay and trained on.
    pub trajectories_trained: u64,
    /// Sent but never received: `sent − (trained + stale + drained)`.
    pub lost: i64,
    /// Redeliveries of trajectories already used, dropped.
    pub duplicates_dropped: u64,
    /// Trajectories beyond the lag bound, dropped.
    pub stale_dropped: u64,
    /// Received after the stop (not trained on).
    pub drained: u64,
    /// Malformed, truncated or foreign messages.
    pub malformed: u64,
    /// The last malformed message's error.
    pub last_malformed: Option<String>,
    /// Environment steps per second received (trained trajectories × B × T over
    /// the time from the first to the stop).
    pub env_steps_per_s: f64,
    /// Policy lag (learner version − the trajectory's version) at receipt: median.
    pub policy_lag_p50: u64,
    /// Policy lag, 99th percentile.
    pub policy_lag_p99: u64,
    /// The greedy evaluation at the end.
    pub eval: f64,
    /// Train steps.
    pub train_steps: u64,
    /// The last published parameter version.
    pub version: u64,
    /// The train step the run restarted from, when it did.
    pub restored_at: Option<u64>,
    /// The lags seen, histogram: lag → count.
    pub lag_histogram: BTreeMap<u64, u64>,
}

impl std::fmt::Display for LearnerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "trajectories_sent={} trajectories_trained={} lost={} duplicates_dropped={} \
             env_steps_per_s={:.0} policy_lag_p50={} policy_lag_p99={} eval={:.3}",
            self.trajectories_sent,
            self.trajectories_trained,
            self.lost,
            self.duplicates_dropped,
            self.env_steps_per_s,
            self.policy_lag_p50,
            self.policy_lag_p99,
            self.eval
        )
    }
}

fn percentile(hist: &BTreeMap<u64, u64>, q: f64) -> u64 {
    let total: u64 = hist.values().sum();
    if total == 0 {
        return 0;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut acc = 0;
    for (&lag, &n) in hist {
        acc += n;
        if acc >= rank {
            return lag;
        }
    }
    0
}

/// The ids seen from one actor epoch, as ranges.
type Seen = BTreeMap<(u32, u64), BTreeSet<u64>>;

fn encode_seen(seen: &Seen) -> String {
    let mut out = String::new();
    for ((a, e), seqs) in seen {
        out.push_str(&format!("{a}.{e}:"));
        let mut it = seqs.iter().copied().peekable();
        let mut first = true;
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&(hi + 1)) {
                hi += 1;
                it.next();
            }
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&format!("{lo}-{hi}"));
        }
        out.push(';');
    }
    out
}

fn decode_seen(s: &str) -> Result<Seen> {
    let bad = || Error::Settings(format!("checkpoint's seen-ids entry {s:?} is malformed"));
    let mut seen = Seen::new();
    for part in s.split(';').filter(|p| !p.is_empty()) {
        let (id, ranges) = part.split_once(':').ok_or_else(bad)?;
        let (a, e) = id.split_once('.').ok_or_else(bad)?;
        let key = (a.parse().map_err(|_| bad())?, e.parse().map_err(|_| bad())?);
        let set = seen.entry(key).or_default();
        for r in ranges.split(',').filter(|r| !r.is_empty()) {
            let (lo, hi) = r.split_once('-').ok_or_else(bad)?;
            let (lo, hi): (u64, u64) = (
                lo.parse().map_err(|_| bad())?,
                hi.parse().map_err(|_| bad())?,
            );
            if hi < lo || hi - lo > 1 << 32 {
                return Err(bad());
            }
            set.extend(lo..=hi);
        }
    }
    Ok(seen)
}

/// The parameters' leaves and Adam's state, on the device.
type DeviceState = (Vec<Buffer>, OptState<Buffer, Vec<Buffer>>);

/// The learner (see the [module docs](self)).
pub struct Learner {
    client: Client,
    cfg: LearnerConfig,
    step: Jit<TrainIn<Shape>, TrainOut<Shape>>,
    state: Option<DeviceState>,
    replay: Vec<Sequence>,
    next_slot: usize,
    rng: Rng,
    seen: Seen,
    pending_acks: Vec<AckHandle>,
    report: LearnerReport,
    credit: f64,
    first_data: Option<Instant>,
    last_checkpoint: Instant,
    stopping: bool,
}

impl std::fmt::Debug for Learner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learner")
            .field("cfg", &self.cfg)
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

const CHECKPOINT_FILE: &str = "learner.safetensors";

impl Learner {
    /// Compiles the train step and starts from the checkpoint in
    /// `cfg.checkpoint_dir` when there is one, else from fresh parameters.
    ///
    /// # Errors
    /// Compile errors; a checkpoint that does not load.
    pub fn new(client: &Client, cfg: LearnerConfig) -> Result<Learner> {
        let mlp = network();
        let opt = optim::adam(cfg.lr, 0.9, 0.999, 1e-8);
        let shapes = param_shapes();
        let n = cfg.batch as i64;
        let t1 = T as i64 + 1;
        let batch_spec = vec![
            Shape::of::<f32>(&[n, t1, OBS as i64]),
            Shape::of::<i32>(&[n, t1]),
            Shape::of::<f32>(&[n, t1]),
            Shape::of::<f32>(&[n, t1]),
        ];
        let spec = TrainIn {
            params: shapes.clone(),
            opt: opt.state_spec(&shapes),
            batch: batch_spec,
        };
        let lambda = cfg.lambda;
        let m2 = mlp.clone();
        let opt2 = opt.clone();
        let step = client.jit_donating("fleet_train_step", &spec, move |b, s: TrainIn<Op>| {
            let batch = s.batch.clone();
            let (loss, (), grads) = b.value_and_grad(s.params.clone(), |p: Vec<Op>| {
                let x = batch[0].reshape(&[n * t1, OBS as i64]);
                let q = mlp_apply(&m2, &p, &x).reshape(&[n, t1, NUM_ACTIONS as i64]);
                let l = xlaclient_rl::anakin::td_loss(&q, &batch[1], &batch[2], &batch[3], lambda);
                (l.mean(&[0], false), ())
            });
            let (params, opt) = opt2.update(&grads, s.opt, &s.params);
            TrainOut { params, opt, loss }
        })?;
        let mut report = LearnerReport::default();
        let ckpt = cfg.checkpoint_dir.as_ref().map(|d| d.join(CHECKPOINT_FILE));
        let mut seen = Seen::new();
        let state = match ckpt.filter(|p| p.is_file()) {
            Some(path) => {
                let saved_spec = Saved {
                    params: shapes.clone(),
                    opt: opt.state_spec(&shapes),
                };
                let saved = checkpoint::load(client, &path, &saved_spec)?;
                let file = Checkpoint::read(&path)?;
                let meta = file.metadata();
                let num = |k: &str| -> Result<u64> {
                    meta.get(k).and_then(|v| v.parse().ok()).ok_or_else(|| {
                        Error::Settings(format!("checkpoint {}: no number {k}", path.display()))
                    })
                };
                report.train_steps = num("train_steps")?;
                report.version = num("version")?;
                report.trajectories_trained = num("trajectories_trained")?;
                report.duplicates_dropped = num("duplicates_dropped")?;
                report.stale_dropped = num("stale_dropped")?;
                report.malformed = num("malformed")?;
                report.restored_at = Some(report.train_steps);
                seen = decode_seen(meta.get("seen").copied().unwrap_or(""))?;
                (saved.params, saved.opt)
            }
            None => {
                let init = client.jit("fleet_init", &(), |b, ()| {
                    mlp.init(&b.prng_key(cfg.seed as u32)).into_leaves()
                })?;
                let params: Vec<Buffer> = init.call(&())?;
                let opt_init = client.jit("fleet_opt_init", &shapes, |b, p: Vec<Op>| {
                    opt.init_in(b, &p)
                })?;
                let o = opt_init.call(&params)?;
                (params, o)
            }
        };
        Ok(Learner {
            client: client.clone(),
            rng: Rng::new(cfg.seed ^ 0x5eed ^ report.train_steps),
            cfg,
            step,
            state: Some(state),
            replay: Vec::new(),
            next_slot: 0,
            seen,
            pending_acks: Vec::new(),
            report,
            credit: 0.0,
            first_data: None,
            last_checkpoint: Instant::now(),
            stopping: false,
        })
    }

    /// The counters so far.
    pub fn report(&self) -> &LearnerReport {
        &self.report
    }

    /// Sequences in the replay.
    pub fn replay_len(&self) -> usize {
        self.replay.len()
    }

    fn params(&self) -> Result<&Vec<Buffer>> {
        self.state
            .as_ref()
            .map(|s| &s.0)
            .ok_or_else(|| Error::Settings("the learner's state was lost in a failed step".into()))
    }

    /// The parameters, downloaded.
    ///
    /// # Errors
    /// The runtime's error.
    pub fn host_params(&self) -> Result<Vec<Vec<f32>>> {
        self.params()?
            .iter()
            .map(|b| Ok(b.to_vec::<f32>()?))
            .collect()
    }

    /// The greedy evaluation of the current parameters.
    ///
    /// # Errors
    /// The runtime's error.
    pub fn eval(&self) -> Result<f64> {
        Ok(greedy_eval(&self.host_params()?))
    }

    /// Publishes the current parameters as the current version.
    ///
    /// # Errors
    /// Transport errors.
    pub fn publish(&self, tr: &Transport) -> Result<()> {
        tr.put_params(self.report.version, param_leaves(self.params()?)?)
    }

    /// Takes the trajectories of one fetch: drops duplicates, stale and
    /// malformed ones (counted), puts the rest in the replay.
    pub fn receive(&mut self, deliveries: Vec<crate::transport::Delivery>) {
        for d in deliveries {
            let msg = match &d.message {
                Ok(Some(m)) => {
                    sequences_of(m).map(|s| Some((m.actor, m.epoch, m.seq, m.version, s)))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e.clone()),
            };
            match msg {
                Err(e) => {
                    self.report.malformed += 1;
                    self.report.last_malformed = Some(e.to_string());
                }
                Ok(None) => {}
                Ok(Some((actor, epoch, seq, version, seqs))) => {
                    let set = self.seen.entry((actor, epoch)).or_default();
                    if !set.insert(seq) {
                        self.report.duplicates_dropped += 1;
                    } else if self.stopping {
                        self.report.drained += 1;
                    } else {
                        let lag = self.report.version.saturating_sub(version);
                        *self.report.lag_histogram.entry(lag).or_default() += 1;
                        if lag > self.cfg.max_lag {
                            self.report.stale_dropped += 1;
                        } else {
                            self.first_data.get_or_insert_with(Instant::now);
                            self.report.trajectories_trained += 1;
                            self.credit += self.cfg.train_ratio;
                            for s in seqs {
                                if self.replay.len() < self.cfg.replay_capacity {
                                    self.replay.push(s);
                                } else {
                                    self.replay[self.next_slot] = s;
                                }
                                self.next_slot = (self.next_slot + 1) % self.cfg.replay_capacity;
                            }
                        }
                    }
                }
            }
            self.pending_acks.push(d.into_ack());
        }
    }

    /// One train step on a uniform sample of the replay; returns the loss.
    ///
    /// # Errors
    /// The runtime's error (the state is then lost).
    pub fn train_step(&mut self) -> Result<f32> {
        let n = self.cfg.batch;
        let t1 = T + 1;
        let mut obs = Vec::with_capacity(n * t1 * OBS);
        let mut act = vec![0i32; n * t1];
        let mut rew = vec![0f32; n * t1];
        let mut dis = vec![0f32; n * t1];
        for i in 0..n {
            let k = self.rng.below(self.replay.len().max(1) as u64)? as usize;
            let s = &self.replay[k];
            obs.extend_from_slice(&s.obs);
            act[i * t1..i * t1 + T].copy_from_slice(&s.actions);
            rew[i * t1..i * t1 + T].copy_from_slice(&s.rewards);
            dis[i * t1..i * t1 + T].copy_from_slice(&s.discounts);
        }
        let (ni, ti) = (n as i64, t1 as i64);
        let batch = vec![
            self.client.buffer_from_host(&obs, &[ni, ti, OBS as i64])?,
            self.client.buffer_from_host(&act, &[ni, ti])?,
            self.client.buffer_from_host(&rew, &[ni, ti])?,
            self.client.buffer_from_host(&dis, &[ni, ti])?,
        ];
        let (params, opt) = self.state.take().ok_or_else(|| {
            Error::Settings("the learner's state was lost in a failed step".into())
        })?;
        let out = self.step.call_donated(TrainIn { params, opt, batch })?;
        self.state = Some((out.params, out.opt));
        self.report.train_steps += 1;
        Ok(out.loss.to_scalar::<f32>()?)
    }

    /// One [`train_step`](Self::train_step); every
    /// [`LearnerConfig::publish_every`] steps the version goes up by one and the
    /// parameters are published (a publish that fails, the server away, is
    /// skipped: the next one carries newer parameters).
    ///
    /// # Errors
    /// As [`train_step`](Self::train_step).
    pub fn train_and_publish(&mut self, tr: &Transport) -> Result<f32> {
        let loss = self.train_step()?;
        if self.report.train_steps % self.cfg.publish_every.max(1) == 0 {
            self.report.version += 1;
            let _ = self.publish(tr);
        }
        Ok(loss)
    }

    /// Writes the checkpoint (when a directory is set), then acks everything
    /// received so far: the checkpoint holds it.
    ///
    /// # Errors
    /// Checkpoint or transport errors (unacked frames are delivered again).
    pub fn checkpoint_and_ack(&mut self, tr: &Transport) -> Result<()> {
        if let Some(dir) = &self.cfg.checkpoint_dir {
            std::fs::create_dir_all(dir)?;
            let (params, opt) = self
                .state
                .take()
                .ok_or_else(|| Error::Settings("the learner's state was lost".into()))?;
            let saved = Saved { params, opt };
            let r = &self.report;
            let meta = [
                ("train_steps", r.train_steps.to_string()),
                ("version", r.version.to_string()),
                ("trajectories_trained", r.trajectories_trained.to_string()),
                ("duplicates_dropped", r.duplicates_dropped.to_string()),
                ("stale_dropped", r.stale_dropped.to_string()),
                ("malformed", r.malformed.to_string()),
                ("seen", encode_seen(&self.seen)),
            ];
            let written = checkpoint::save_with_metadata(dir.join(CHECKPOINT_FILE), &saved, meta);
            self.state = Some((saved.params, saved.opt));
            written?;
        }
        let acks = std::mem::take(&mut self.pending_acks);
        self.last_checkpoint = Instant::now();
        tr.ack(acks)
    }

    /// Runs until the greedy evaluation reaches the target (or the step or time
    /// limit), then sets the stop flag, drains what the actors still send, and
    /// returns the report. Transport errors (the server away) are waited through.
    ///
    /// # Errors
    /// Runtime or checkpoint errors.
    pub fn run(&mut self, tr: &Transport) -> Result<LearnerReport> {
        let start = Instant::now();
        // A restarted learner resumes the run: clear a stop flag left by an
        // earlier one.
        let _ = tr.put_config(STOP_KEY, "0");
        self.publish_retrying(tr)?;
        let mut eval = 0.0;
        loop {
            if start.elapsed() > self.cfg.max_time
                || self.report.train_steps >= self.cfg.max_train_steps
            {
                break;
            }
            match tr.fetch(64, Duration::from_millis(5)) {
                Ok(d) => self.receive(d),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
            if self.replay.len() >= self.cfg.min_replay {
                while self.credit >= 1.0 {
                    self.credit -= 1.0;
                    self.train_and_publish(tr)?;
                    if self.report.train_steps % self.cfg.eval_every == 0 {
                        eval = self.eval()?;
                        if eval >= self.cfg.target_eval {
                            // Stop with the parameters that reached it.
                            self.credit = 0.0;
                            break;
                        }
                    }
                }
            } else {
                self.credit = 0.0;
            }
            if self.last_checkpoint.elapsed() >= self.cfg.checkpoint_every {
                let _ = self.checkpoint_and_ack(tr);
            }
            if eval >= self.cfg.target_eval && self.report.train_steps >= self.cfg.min_train_steps {
                break;
            }
        }
        let end = Instant::now();
        self.stopping = true;
        let _ = tr.put_config(STOP_KEY, "1");
        self.drain(tr, Duration::from_secs(15));
        let _ = self.checkpoint_and_ack(tr);
        let final_eval = greedy_eval(&self.host_params()?);
        let r = &mut self.report;
        r.eval = final_eval;
        let secs = self
            .first_data
            .map_or(0.0, |t| end.duration_since(t).as_secs_f64());
        r.env_steps_per_s = if secs > 0.0 {
            (r.trajectories_trained * (B * T) as u64) as f64 / secs
        } else {
            0.0
        };
        r.policy_lag_p50 = percentile(&r.lag_histogram, 0.5);
        r.policy_lag_p99 = percentile(&r.lag_histogram, 0.99);
        Ok(self.report.clone())
    }

    fn publish_retrying(&self, tr: &Transport) -> Result<()> {
        let start = Instant::now();
        loop {
            match self.publish(tr) {
                Ok(()) => return Ok(()),
                Err(e) if start.elapsed() > Duration::from_secs(30) => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// After the stop flag: receive until every actor epoch that sent anything
    /// has stopped (its `done` key written, or its sent count unchanged for 2 s:
    /// a killed actor) and everything they report sent has arrived (or `limit`
    /// passed), then compute `lost`.
    fn drain(&mut self, tr: &Transport, limit: Duration) {
        let start = Instant::now();
        let mut quiet = 0;
        let mut last_change: BTreeMap<String, (String, Instant)> = BTreeMap::new();
        loop {
            let got = tr.fetch(64, Duration::from_millis(100)).unwrap_or_default();
            let n = got.len();
            self.receive(got);
            // Checkpoint and ack as it goes: the stream must have room for the
            // actors' last sends.
            if !self.pending_acks.is_empty() {
                let _ = self.checkpoint_and_ack(tr);
            }
            quiet = if n == 0 { quiet + 1 } else { 0 };
            // `done` first: an actor writes its last `sent` before its `done`,
            // whose value is the final count.
            let done: BTreeMap<String, u64> = tr
                .config_with_prefix("done.")
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k["done.".len()..].to_string(), v.parse().unwrap_or(0)))
                .collect();
            let sent_now = tr.config_with_prefix("sent.").unwrap_or_default();
            let now = Instant::now();
            let mut all_stopped = true;
            let mut sent = 0u64;
            for (k, v) in &sent_now {
                let id = k["sent.".len()..].to_string();
                sent += v
                    .parse::<u64>()
                    .unwrap_or(0)
                    .max(done.get(&id).copied().unwrap_or(0));
                let e = last_change.entry(id.clone()).or_insert((v.clone(), now));
                if &e.0 != v {
                    *e = (v.clone(), now);
                }
                if !done.contains_key(&id) && now.duration_since(e.1) < Duration::from_secs(2) {
                    all_stopped = false;
                }
            }
            let received = self.received();
            if (all_stopped && received >= sent && quiet >= 3) || start.elapsed() > limit {
                self.report.trajectories_sent = sent;
                self.report.lost = sent as i64 - received as i64;
                return;
            }
        }
    }

    fn received(&self) -> u64 {
        let r = &self.report;
        r.trajectories_trained + r.stale_dropped + r.drained
    }
}

/// `JoinHandle` alias for tests and the example's learner thread.
pub type LearnerThread = std::thread::JoinHandle<Result<LearnerReport>>;

/// A single-process stepper run of the same actor work (no transport): env
/// steps per second of `rounds` rounds of `B` environments × `T` steps, for the
/// transport's cost per step in the benchmark.
///
/// # Errors
/// The runtime's or the stepper's errors.
pub fn in_process_steps_per_s(client: &Client, rounds: usize) -> Result<f64> {
    let mlp = network();
    let init = client.jit("fleet_bench_init", &(), |b, ()| {
        mlp.init(&b.prng_key(0)).into_leaves()
    })?;
    let params: Vec<Buffer> = init.call(&())?;
    let m2 = mlp.clone();
    let mut net = Some(BatchedNet::new(
        client,
        params,
        &[OBS as i64],
        BatchSizes::new(&[B])?,
        move |p: &Vec<Op>, obs| mlp_apply(&m2, p, obs),
    )?);
    let mut envs: Vec<(Catch, Rng)> = (0..B as u64)
        .map(|i| (Catch::new(i), Rng::new(i + 1000)))
        .collect();
    let run_round =
        |envs: &mut Vec<(Catch, Rng)>, net: &mut Option<BatchedNet>| -> Result<Vec<Sequence>> {
            let mut stepper = Stepper::new(net.take().ok_or(Error::Settings("net lost".into()))?);
            for (env, rng) in envs.drain(..) {
                stepper.spawn(move |h| agent(h, env, rng, 0.1));
            }
            let outs = stepper.run()?;
            *net = Some(stepper.into_net());
            let mut seqs = Vec::new();
            for o in outs {
                let (e, r, s) = o?;
                envs.push((e, r));
                seqs.push(s);
            }
            Ok(seqs)
        };
    run_round(&mut envs, &mut net)?;
    let t = Instant::now();
    for i in 0..rounds {
        let seqs = run_round(&mut envs, &mut net)?;
        // The message is built as an actor builds it (the encoding is part of an
        // actor's work; the transport is not).
        let m = trajectory_message(0, 0, i as u64, 0, &seqs)?;
        std::hint::black_box(crate::frame::encode(&m, crate::frame::MAX_CHUNK)?);
    }
    let _ = ElementType::F32;
    Ok((rounds * B * T) as f64 / t.elapsed().as_secs_f64())
}
