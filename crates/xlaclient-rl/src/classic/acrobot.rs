//! gymnasium's `Acrobot-v1`: on the host in `f64` ([`AcrobotEnv`]) and as `f32` ops,
//! a batch of environments stepped inside a compiled program ([`step`],
//! [`step_with_keys`]), the two checked against each other.
//!
//! Two links (length 1, mass 1, centre of mass at 0.5, moment of inertia 1) hang
//! from a fixed joint; the joint between them is actuated with torque −1, 0 or +1
//! (actions 0, 1, 2). The state is `[θ₁, θ₂, θ̇₁, θ̇₂]` (θ₁ the first link's angle
//! from hanging down, θ₂ the second link's relative to the first). One step
//! integrates the book's equations of motion (Sutton and Barto; gymnasium's
//! `book_or_nips = "book"`, gravity 9.8) over 0.2 s with one classical Runge–Kutta
//! (RK4) step, the torque held constant; then both angles are wrapped into
//! `[−π, π]` and the velocities clipped to `|θ̇₁| ≤ 4π`, `|θ̇₂| ≤ 9π`. The episode
//! *terminates* when the tip is above the line one link-length over the fixed joint,
//! `−cos θ₁ − cos(θ₁ + θ₂) > 1`, and is *truncated* at 500 steps. The reward is −1
//! per step, 0 on the terminating step. A reset draws the four values uniformly
//! from `[−0.1, 0.1)`, rounded to `f32` (gymnasium stores the reset state as
//! `float32`). Observations are `f32[6]`: `cos θ₁, sin θ₁, cos θ₂, sin θ₂, θ̇₁, θ̇₂`.
//!
//! The ops mirror [`crate::cartpole`]: a batch's state is five `[batch]` arrays
//! ([`AcrobotState`]), [`step`] resets terminal rows from given draws,
//! [`step_with_keys`] from one key per row (gymnax's automatic reset). On the device
//! the angles are wrapped in one step, `θ − 2π·floor((θ + π) / 2π)` (into
//! `[−π, π)`), which equals the host's loop except at `θ = π` exactly.

use std::f64::consts::PI;

use super::{EpisodeStep, check_finite, episode_over, uniform_f64, write_obs};
use crate::env::{Environment, Rng, Transition};
use crate::error::{Error, Result};
use crate::{ElementType, Op, Tree};

/// Seconds per step (one RK4 step).
pub const DT: f64 = 0.2;
/// Link lengths (both), masses (both) and moments of inertia (both).
pub const LINK_LENGTH: f64 = 1.0;
/// Each link's mass.
pub const LINK_MASS: f64 = 1.0;
/// Each link's centre of mass, from its joint.
pub const LINK_COM: f64 = 0.5;
/// Each link's moment of inertia.
pub const LINK_MOI: f64 = 1.0;
/// Gravity.
pub const GRAVITY: f64 = 9.8;
/// The first joint's speed limit, `4π`.
pub const MAX_VEL_1: f64 = 4.0 * PI;
/// The second joint's speed limit, `9π`.
pub const MAX_VEL_2: f64 = 9.0 * PI;
/// The torque of each action: −1, 0, +1.
pub const TORQUES: [f64; 3] = [-1.0, 0.0, 1.0];
/// Number of actions.
pub const NUM_ACTIONS: usize = 3;
/// Observation size.
pub const OBS: i64 = 6;
/// Steps after which an episode is truncated.
pub const MAX_STEPS: u32 = 500;
/// Resets draw each value from `[−RESET_BOUND, RESET_BOUND)`.
pub const RESET_BOUND: f64 = 0.1;

const NAMES: [&str; 4] = ["theta1", "theta2", "dtheta1", "dtheta2"];

/// gymnasium's `Acrobot-v1` on the host (see the [module](self)): the `f64` state
/// `[θ₁, θ₂, θ̇₁, θ̇₂]`, the steps taken in the episode and the [`Rng`] that draws
/// resets. Cloning copies the generator too.
///
/// ```
/// use xlaclient_rl::{Environment, classic::AcrobotEnv};
///
/// let mut env = AcrobotEnv::new(3);
/// let obs = env.observation();               // cos θ₁, sin θ₁, cos θ₂, sin θ₂, θ̇₁, θ̇₂
/// assert!(obs[0] > 0.99);                     // hanging down
/// let t = env.step(2)?;                       // torque +1
/// assert_eq!((t.reward, t.terminal), (-1.0, false));
/// assert!(env.step(3).is_err());              // actions are 0, 1, 2
/// // Pumping energy with the second joint's swing reaches the line in ~100 steps.
/// let mut steps = 1;
/// loop {
///     let a = if env.state()[3] > 0.0 { 2 } else { 0 };
///     let s = env.step_episode(a)?;
///     steps += 1;
///     if s.ended() {
///         assert!(s.terminated && s.reward == 0.0);
///         break;
///     }
/// }
/// assert!(steps < 500, "{steps}");
/// # Ok::<(), xlaclient_rl::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct AcrobotEnv {
    state: [f64; 4],
    steps: u32,
    ended: bool,
    rng: Rng,
}

impl AcrobotEnv {
    /// A new environment whose resets are drawn from `Rng::new(seed)`; the first
    /// episode starts at once.
    pub fn new(seed: u64) -> AcrobotEnv {
        let mut rng = Rng::new(seed);
        let state = Self::draw(&mut rng);
        AcrobotEnv {
            state,
            steps: 0,
            ended: false,
            rng,
        }
    }

    /// An environment at the start of an episode in `state` (`[θ₁, θ₂, θ̇₁, θ̇₂]`,
    /// e.g. gymnasium's state after a reset), drawing later resets from `rng`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first value that is NaN or infinite, an
    /// angle outside `[−π, π]` or a speed above its limit (states the environment
    /// never reaches).
    pub fn from_state(state: [f64; 4], rng: Rng) -> Result<AcrobotEnv> {
        check_finite("AcrobotEnv", &NAMES, &state)?;
        let limits = [PI, PI, MAX_VEL_1, MAX_VEL_2];
        for ((v, limit), name) in state.iter().zip(limits).zip(NAMES) {
            if v.abs() > limit {
                return Err(Error::InvalidArgument {
                    what: "state",
                    reason: format!(
                        "AcrobotEnv::from_state: {name} = {v}, must be in [-{limit}, {limit}]"
                    ),
                });
            }
        }
        Ok(AcrobotEnv {
            state,
            steps: 0,
            ended: false,
            rng,
        })
    }

    fn draw(rng: &mut Rng) -> [f64; 4] {
        // gymnasium keeps the reset state as float32.
        std::array::from_fn(|_| uniform_f64(rng, -RESET_BOUND, RESET_BOUND) as f32 as f64)
    }

    /// The state `[θ₁, θ₂, θ̇₁, θ̇₂]`.
    pub fn state(&self) -> [f64; 4] {
        self.state
    }

    /// Steps taken in the current episode.
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// Whether the current episode has ended (through
    /// [`step_episode`](Self::step_episode); [`Environment::step`] resets at once).
    pub fn episode_ended(&self) -> bool {
        self.ended
    }

    /// gymnasium's `step` (with the time limit): one RK4 step with `action`'s
    /// torque, without a reset when the episode ends; further steps are then refused
    /// until [`reset`](Environment::reset).
    ///
    /// # Errors
    /// [`Error::InvalidAction`] for an action outside `0..3`,
    /// [`Error::InvalidArgument`] when the episode has ended. The state is then
    /// unchanged.
    pub fn step_episode(&mut self, action: usize) -> Result<EpisodeStep> {
        if action >= NUM_ACTIONS {
            return Err(Error::InvalidAction {
                what: "AcrobotEnv (0 torque -1, 1 none, 2 torque +1)".into(),
                action: action as i64,
                actions: NUM_ACTIONS,
            });
        }
        if self.ended {
            return Err(episode_over("AcrobotEnv", self.steps));
        }
        let next = rk4(self.state, TORQUES[action]);
        self.state = [
            wrap(next[0]),
            wrap(next[1]),
            next[2].clamp(-MAX_VEL_1, MAX_VEL_1),
            next[3].clamp(-MAX_VEL_2, MAX_VEL_2),
        ];
        self.steps += 1;
        let [t1, t2, _, _] = self.state;
        let terminated = -t1.cos() - (t2 + t1).cos() > 1.0;
        let truncated = self.steps >= MAX_STEPS;
        self.ended = terminated || truncated;
        Ok(EpisodeStep {
            reward: if terminated { 0.0 } else { -1.0 },
            terminated,
            truncated,
        })
    }
}

/// An angle wrapped into `[−π, π]` by whole turns (gymnasium's `wrap`). The angle
/// after a step from a valid state is finite and within a few turns; the loop is
/// bounded all the same.
fn wrap(mut x: f64) -> f64 {
    let turn = 2.0 * PI;
    if !x.is_finite() || x.abs() > 1e6 {
        return (x + PI).rem_euclid(turn) - PI;
    }
    while x > PI {
        x -= turn;
    }
    while x < -PI {
        x += turn;
    }
    x
}

/// The time derivative of `[θ₁, θ₂, θ̇₁, θ̇₂]` under torque `a` (the book's
/// equations), in gymnasium's order of operations.
fn derivatives(s: [f64; 4], a: f64) -> [f64; 4] {
    let (m1, m2, l1, lc1, lc2) = (LINK_MASS, LINK_MASS, LINK_LENGTH, LINK_COM, LINK_COM);
    let (i1, i2, g) = (LINK_MOI, LINK_MOI, GRAVITY);
    let [theta1, theta2, dtheta1, dtheta2] = s;
    let (sin2, cos2) = (theta2.sin(), theta2.cos());
    let d1 = m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2.0 * l1 * lc2 * cos2) + i1 + i2;
    let d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos2) + i2;
    let phi2 = m2 * lc2 * g * (theta1 + theta2 - PI / 2.0).cos();
    let phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin2
        - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
        + (m1 * lc1 + m2 * l1) * g * (theta1 - PI / 2.0).cos()
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin2 - phi2)
        / (m2 * (lc2 * lc2) + i2 - (d2 * d2) / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2]
}

/// One classical Runge–Kutta step of length [`DT`] under constant torque `a`.
fn rk4(y0: [f64; 4], a: f64) -> [f64; 4] {
    let h = DT / 2.0;
    let at = |k: &[f64; 4], step: f64| -> [f64; 4] { std::array::from_fn(|i| y0[i] + step * k[i]) };
    let k1 = derivatives(y0, a);
    let k2 = derivatives(at(&k1, h), a);
    let k3 = derivatives(at(&k2, h), a);
    let k4 = derivatives(at(&k3, DT), a);
    std::array::from_fn(|i| y0[i] + DT / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]))
}

impl Environment for AcrobotEnv {
    fn observation_dims(&self) -> Vec<i64> {
        vec![OBS]
    }

    fn num_actions(&self) -> usize {
        NUM_ACTIONS
    }

    fn reset(&mut self) {
        self.state = Self::draw(&mut self.rng);
        self.steps = 0;
        self.ended = false;
    }

    /// [`step_episode`](AcrobotEnv::step_episode), then a reset when the episode
    /// ended; see [`EpisodeStep::transition`] for the discount at a truncation.
    fn step(&mut self, action: usize) -> Result<Transition> {
        let s = self.step_episode(action)?;
        if s.ended() {
            self.reset();
        }
        Ok(s.transition())
    }

    fn observe(&self, out: &mut [f32]) -> Result<()> {
        let [t1, t2, d1, d2] = self.state;
        write_obs(
            "AcrobotEnv",
            &[t1.cos(), t1.sin(), t2.cos(), t2.sin(), d1, d2],
            out,
        )
    }
}

// ------------------------------------------------------------------- the ops

/// A batch of Acrobot states: `f32[batch]` each, `time` `s32[batch]`.
///
/// ```
/// use xlaclient_core::{Client, ClientExt, Op, Shape};
/// use xlaclient_rl::classic::{AcrobotEnv, acrobot};
/// use xlaclient_rl::{Environment, Rng};
///
/// // Three Acrobots from given states, one step each with torques −1, 0, +1.
/// let client = Client::cpu()?;
/// let step = client.jit("acrobot_step", &Shape::of::<f32>(&[3, 4]), |b, rows: Op| {
///     let s = acrobot::from_rows(&rows);
///     let (next, reward, _terminated, _truncated) =
///         acrobot::step_env(&s, &b.constant_vec(&[0i32, 1, 2]));
///     (acrobot::observe(&next), reward)
/// })?;
/// let rows = [0.1f32, -0.05, 0.3, 0.0, 0.0, 0.02, -0.1, 0.2, -0.08, 0.0, 0.05, 0.01];
/// let (obs, reward) = step.call(&client.buffer_from_host(&rows, &[3, 4])?)?;
/// let (obs, reward) = (obs.to_vec::<f32>()?, reward.to_vec::<f32>()?);
/// assert_eq!(reward, [-1.0; 3]);
/// // The same steps on the host, in f64.
/// for e in 0..3 {
///     let start = std::array::from_fn(|k| f64::from(rows[e * 4 + k]));
///     let mut env = AcrobotEnv::from_state(start, Rng::new(0))?;
///     env.step_episode(e)?;
///     for (k, h) in env.observation().iter().enumerate() {
///         assert!((obs[e * 6 + k] - h).abs() < 1e-5);
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Tree, Clone, Debug, PartialEq)]
pub struct AcrobotState<T> {
    /// The first link's angle (0 hanging down).
    pub theta1: T,
    /// The second link's angle relative to the first.
    pub theta2: T,
    /// The first joint's angular velocity.
    pub dtheta1: T,
    /// The second joint's angular velocity.
    pub dtheta2: T,
    /// Steps since the reset (`s32`).
    pub time: T,
}

/// Column `i` of a `[batch, 4]` array, as `[batch]`.
fn column(x: &Op, i: i64) -> Op {
    let batch = x.dims().ok().and_then(|d| d.first().copied()).unwrap_or(0);
    x.slice(&[0, i], &[batch, i + 1], &[1, 1]).reshape(&[batch])
}

/// The states whose values are the rows of `values` (`f32[batch, 4]`: `θ₁, θ₂, θ̇₁,
/// θ̇₂`), at time 0 (a reset).
#[track_caller]
pub fn from_rows(values: &Op) -> AcrobotState<Op> {
    let batch = values
        .dims()
        .ok()
        .and_then(|d| d.first().copied())
        .unwrap_or(0);
    AcrobotState {
        theta1: column(values, 0),
        theta2: column(values, 1),
        dtheta1: column(values, 2),
        dtheta2: column(values, 3),
        time: values.builder().zeros(ElementType::S32, &[batch]),
    }
}

/// The reset values drawn from each key (`keys` is `u32[batch, 2]`):
/// `uniform(key, (4,), −0.1, 0.1)` per row, `f32[batch, 4]`.
#[track_caller]
pub fn reset_draws(keys: &Op) -> Op {
    keys.builder()
        .vmap(&xlaclient_core::Vmap::new(), keys.clone(), |_, key| {
            key.uniform(&[4], ElementType::F32, -RESET_BOUND, RESET_BOUND)
        })
}

/// A reset of a batch, one key per environment (`u32[batch, 2]`).
#[track_caller]
pub fn reset(keys: &Op) -> AcrobotState<Op> {
    from_rows(&reset_draws(keys))
}

/// The observations, `f32[batch, 6]`: `cos θ₁, sin θ₁, cos θ₂, sin θ₂, θ̇₁, θ̇₂`.
#[track_caller]
pub fn observe(s: &AcrobotState<Op>) -> Op {
    let (c1, s1) = (s.theta1.cos(), s.theta1.sin());
    let (c2, s2) = (s.theta2.cos(), s.theta2.sin());
    s.theta1
        .builder()
        .stack(&[&c1, &s1, &c2, &s2, &s.dtheta1, &s.dtheta2], 1)
}

/// Whether the tip is above the line (`pred[batch]`): the task's termination.
#[track_caller]
pub fn above_line(s: &AcrobotState<Op>) -> Op {
    let height = &(-&s.theta1.cos()) - &(&s.theta2 + &s.theta1).cos();
    height.gt(1.0)
}

/// The derivative of the four state arrays under the torques `a` (`f32[batch]`).
fn derivatives_op(s: [&Op; 4], a: &Op) -> [Op; 4] {
    let (m1, m2, l1, lc1, lc2) = (LINK_MASS, LINK_MASS, LINK_LENGTH, LINK_COM, LINK_COM);
    let (i1, i2, g) = (LINK_MOI, LINK_MOI, GRAVITY);
    let [theta1, theta2, dtheta1, dtheta2] = s;
    let (sin2, cos2) = (theta2.sin(), theta2.cos());
    let d1 =
        &(&cos2 * (m2 * 2.0 * l1 * lc2)) + (m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2) + i1 + i2);
    let d2 = &(&cos2 * (m2 * l1 * lc2)) + (m2 * lc2 * lc2 + i2);
    let phi2 = &(theta1 + theta2 - PI / 2.0).cos() * (m2 * lc2 * g);
    let phi1 = &(&(&(&(&dtheta2.square() * (-m2 * l1 * lc2)) * &sin2)
        - &(&(&(dtheta2 * dtheta1) * (2.0 * m2 * l1 * lc2)) * &sin2))
        + &(&(theta1 - PI / 2.0).cos() * ((m1 * lc1 + m2 * l1) * g)))
        + &phi2;
    let num = &(&(a + &(&(&d2 / &d1) * &phi1)) - &(&(&dtheta1.square() * (m2 * l1 * lc2)) * &sin2))
        - &phi2;
    let den = (m2 * lc2 * lc2 + i2) - &(&d2.square() / &d1);
    let ddtheta2 = &num / &den;
    let ddtheta1 = -&(&(&(&d2 * &ddtheta2) + &phi1) / &d1);
    [dtheta1.clone(), dtheta2.clone(), ddtheta1, ddtheta2]
}

/// `θ` wrapped into `[−π, π)`: `θ − 2π·floor((θ + π) / 2π)`.
fn wrap_op(x: &Op) -> Op {
    let turns = (&(x + PI) / (2.0 * PI)).floor();
    x - &(&turns * (2.0 * PI))
}

/// One step without resets: the next states, the rewards (`f32[batch]`: −1, 0 on a
/// termination), whether the step terminated (tip above the line) and whether it
/// was truncated (the 500th step), both `pred[batch]`. `actions` is `s32[batch]`
/// (0, 1, 2: torque −1, 0, +1; others are clamped into that range).
#[track_caller]
pub fn step_env(s: &AcrobotState<Op>, actions: &Op) -> (AcrobotState<Op>, Op, Op, Op) {
    let torque = &actions.convert(ElementType::F32).clip(0.0, 2.0) - 1.0;
    let y0 = [&s.theta1, &s.theta2, &s.dtheta1, &s.dtheta2];
    let at = |k: &[Op; 4], h: f64| -> [Op; 4] { std::array::from_fn(|i| y0[i] + &(&k[i] * h)) };
    let k1 = derivatives_op(y0, &torque);
    let y = at(&k1, DT / 2.0);
    let k2 = derivatives_op([&y[0], &y[1], &y[2], &y[3]], &torque);
    let y = at(&k2, DT / 2.0);
    let k3 = derivatives_op([&y[0], &y[1], &y[2], &y[3]], &torque);
    let y = at(&k3, DT);
    let k4 = derivatives_op([&y[0], &y[1], &y[2], &y[3]], &torque);
    let next: [Op; 4] = std::array::from_fn(|i| {
        let sum = &(&(&k1[i] + &(&k2[i] * 2.0)) + &(&k3[i] * 2.0)) + &k4[i];
        y0[i] + &(&sum * (DT / 6.0))
    });
    let next = AcrobotState {
        theta1: wrap_op(&next[0]),
        theta2: wrap_op(&next[1]),
        dtheta1: next[2].clip(-MAX_VEL_1, MAX_VEL_1),
        dtheta2: next[3].clip(-MAX_VEL_2, MAX_VEL_2),
        time: &s.time + 1i64,
    };
    let terminated = above_line(&next);
    let truncated = next.time.ge(f64::from(MAX_STEPS));
    let reward = &terminated.convert(ElementType::F32) - 1.0;
    (next, reward, terminated, truncated)
}

/// One step with automatic resets: a row whose episode ended (terminated or
/// truncated) restarts at the row of `resets` (`f32[batch, 4]`). Returns the next
/// states, their observations (`f32[batch, 6]`), the rewards (`f32[batch]`), and
/// whether the step terminated and whether it was truncated (`pred[batch]` each).
#[track_caller]
pub fn step(s: &AcrobotState<Op>, actions: &Op, resets: &Op) -> (AcrobotState<Op>, Op, Op, Op, Op) {
    let b = s.theta1.builder();
    let (next, reward, terminated, truncated) = step_env(s, actions);
    let done = terminated.or(&truncated);
    let fresh = from_rows(resets);
    let pick = |r: &Op, n: &Op| b.select(&done, r, n);
    let next = AcrobotState {
        theta1: pick(&fresh.theta1, &next.theta1),
        theta2: pick(&fresh.theta2, &next.theta2),
        dtheta1: pick(&fresh.dtheta1, &next.dtheta1),
        dtheta2: pick(&fresh.dtheta2, &next.dtheta2),
        time: pick(&fresh.time, &next.time),
    };
    let obs = observe(&next);
    (next, obs, reward, terminated, truncated)
}

/// [`step`] with the resets drawn from one key per environment (`u32[batch, 2]`):
/// each key is split and a reset uses the second half's draws (gymnax's
/// automatic reset).
#[track_caller]
pub fn step_with_keys(
    s: &AcrobotState<Op>,
    actions: &Op,
    keys: &Op,
) -> (AcrobotState<Op>, Op, Op, Op, Op) {
    let resets = keys
        .builder()
        .vmap(&xlaclient_core::Vmap::new(), keys.clone(), |_, key| {
            let [_, key_reset] = key.split_keys();
            key_reset.uniform(&[4], ElementType::F32, -RESET_BOUND, RESET_BOUND)
        });
    step(s, actions, &resets)
}
