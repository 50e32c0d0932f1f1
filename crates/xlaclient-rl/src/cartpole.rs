//! CartPole-v1 with gymnax's dynamics: as ops, a batch of environments stepped
//! inside a compiled program ([`step`], [`step_with_keys`]), and in plain Rust
//! ([`CartPole`], one environment, `f32` arithmetic in the same order), the
//! reference the device version is tested against. gymnasium's `CartPole-v1` as a
//! host [`Environment`](crate::Environment) in `f64` is
//! [`CartPoleEnv`](crate::classic::CartPoleEnv); `tests/classic_control.rs` checks
//! these ops against it.
//!
//! The dynamics (gymnax's `CartPole-v1`, after the classic-control task): Euler
//! steps of length [`TAU`] of a cart (mass 1.0) with a pole (mass 0.1, half-length
//! 0.5) under gravity 9.8, pushed with force ±10 (action 1 right, 0 left). A state
//! is terminal when `|x| > 2.4`, `|θ| > 12°` or after 500 steps. The reward of a
//! step is `1 − terminal(previous state)` (always 1 with automatic resets). A reset
//! draws the four values `x, ẋ, θ, θ̇` uniformly from `[−0.05, 0.05)`.
//!
//! gymnax's `Environment.step` resets automatically: it splits the environment's
//! key, steps, and when the new state is terminal replaces it (and the
//! observation) by a reset drawn from the key's second half. [`step_with_keys`] is
//! that, for a batch with one key per environment; [`step`] takes the reset draws
//! as an array (to drive it with host data).
//!
//! A batch's state is five arrays of `[batch]` ([`CartPoleState`]); observations
//! are `f32[batch, 4]`, rows `x, ẋ, θ, θ̇`.

use crate::{ElementType, Op, Tree};

/// Observation size.
pub const OBS: i64 = 4;
/// Actions: push left (0), push right (1).
pub const ACTIONS: i64 = 2;
/// Gravity.
pub const GRAVITY: f32 = 9.8;
/// The cart's mass.
pub const MASS_CART: f32 = 1.0;
/// The pole's mass.
pub const MASS_POLE: f32 = 0.1;
/// Cart plus pole.
pub const TOTAL_MASS: f32 = 1.1;
/// Half the pole's length.
pub const LENGTH: f32 = 0.5;
/// Pole mass × half-length.
pub const POLE_MASS_LENGTH: f32 = 0.05;
/// The force of a push.
pub const FORCE_MAG: f32 = 10.0;
/// Seconds per step.
pub const TAU: f32 = 0.02;
/// The pole's angle limit, 12° in radians (`12 · 2π / 360`).
pub const THETA_THRESHOLD: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
/// The cart's position limit.
pub const X_THRESHOLD: f64 = 2.4;
/// Steps after which an episode ends.
pub const MAX_STEPS: i32 = 500;
/// Resets draw each value from `[−RESET_BOUND, RESET_BOUND)`.
pub const RESET_BOUND: f64 = 0.05;

/// A batch of CartPole states: `f32[batch]` each, `time` `s32[batch]`.
#[derive(Tree, Clone, Debug, PartialEq)]
pub struct CartPoleState<T> {
    /// The cart's position.
    pub x: T,
    /// The cart's velocity.
    pub x_dot: T,
    /// The pole's angle (radians, 0 upright).
    pub theta: T,
    /// The pole's angular velocity.
    pub theta_dot: T,
    /// Steps since the reset (`s32`).
    pub time: T,
}

/// Column `i` of a `[batch, 4]` array, as `[batch]`.
fn column(x: &Op, i: i64) -> Op {
    let batch = x.dims().ok().and_then(|d| d.first().copied()).unwrap_or(0);
    x.slice(&[0, i], &[batch, i + 1], &[1, 1]).reshape(&[batch])
}

/// The states whose values are the rows of `values` (`f32[batch, 4]`: `x, ẋ, θ,
/// θ̇`), at time 0 (a reset).
#[track_caller]
pub fn from_rows(values: &Op) -> CartPoleState<Op> {
    let b = values.builder();
    let batch = values
        .dims()
        .ok()
        .and_then(|d| d.first().copied())
        .unwrap_or(0);
    CartPoleState {
        x: column(values, 0),
        x_dot: column(values, 1),
        theta: column(values, 2),
        theta_dot: column(values, 3),
        time: b.zeros(ElementType::S32, &[batch]),
    }
}

/// The reset values drawn from each key (`keys` is `u32[batch, 2]`): gymnax's
/// `reset_env`, `uniform(key, (4,), −0.05, 0.05)` per environment, stacked to
/// `f32[batch, 4]`.
#[track_caller]
pub fn reset_draws(keys: &Op) -> Op {
    // gymnax's reset for one key, vmapped over the keys (as PureJaxRL does).
    keys.builder()
        .vmap(&xlaclient_core::Vmap::new(), keys.clone(), |_, key| {
            key.uniform(&[4], ElementType::F32, -RESET_BOUND, RESET_BOUND)
        })
}

/// gymnax's `reset` of a batch, one key per environment (`u32[batch, 2]`).
#[track_caller]
pub fn reset(keys: &Op) -> CartPoleState<Op> {
    from_rows(&reset_draws(keys))
}

/// The observations, `f32[batch, 4]`.
#[track_caller]
pub fn observe(s: &CartPoleState<Op>) -> Op {
    s.x.builder()
        .stack(&[&s.x, &s.x_dot, &s.theta, &s.theta_dot], 1)
}

/// Whether each state is terminal (`pred[batch]`).
#[track_caller]
pub fn is_terminal(s: &CartPoleState<Op>) -> Op {
    let x_out = s.x.lt(-X_THRESHOLD).or(&s.x.gt(X_THRESHOLD));
    let theta_out = s
        .theta
        .lt(-THETA_THRESHOLD)
        .or(&s.theta.gt(THETA_THRESHOLD));
    x_out.or(&theta_out).or(&s.time.ge(MAX_STEPS as f64))
}

/// One step without resets (gymnax's `step_env`): the next states, the rewards
/// (`f32[batch]`) and whether the next states are terminal (`pred[batch]`).
/// `actions` is `s32[batch]`.
#[track_caller]
pub fn step_env(s: &CartPoleState<Op>, actions: &Op) -> (CartPoleState<Op>, Op, Op) {
    let prev_terminal = is_terminal(s);
    let a = actions.convert(ElementType::F32);
    let force = &(&a * FORCE_MAG as f64) - &((1.0 - &a) * FORCE_MAG as f64);
    let cos = s.theta.cos();
    let sin = s.theta.sin();
    let temp = &(&force + &(&(&s.theta_dot.square() * POLE_MASS_LENGTH as f64) * &sin))
        / TOTAL_MASS as f64;
    let den = (4.0f32 / 3.0) as f64 - &(&(&cos.square() * MASS_POLE as f64) / TOTAL_MASS as f64);
    let theta_acc = &(&(&sin * GRAVITY as f64) - &(&cos * &temp)) / &(&den * LENGTH as f64);
    let x_acc = &temp - &(&(&(&theta_acc * POLE_MASS_LENGTH as f64) * &cos) / TOTAL_MASS as f64);
    let next = CartPoleState {
        x: &s.x + &(&s.x_dot * TAU as f64),
        x_dot: &s.x_dot + &(&x_acc * TAU as f64),
        theta: &s.theta + &(&s.theta_dot * TAU as f64),
        theta_dot: &s.theta_dot + &(&theta_acc * TAU as f64),
        time: &s.time + 1i64,
    };
    let reward = 1.0 - &prev_terminal.convert(ElementType::F32);
    let done = is_terminal(&next);
    (next, reward, done)
}

/// One step with automatic resets: a terminal next state is replaced by the reset
/// whose values are the row of `resets` (`f32[batch, 4]`). Returns the next states,
/// their observations (`f32[batch, 4]`), the rewards (`f32[batch]`) and whether
/// the step ended an episode (`pred[batch]`).
#[track_caller]
pub fn step(s: &CartPoleState<Op>, actions: &Op, resets: &Op) -> (CartPoleState<Op>, Op, Op, Op) {
    let b = s.x.builder();
    let (next, reward, done) = step_env(s, actions);
    let fresh = from_rows(resets);
    let pick = |r: &Op, n: &Op| b.select(&done, r, n);
    let next = CartPoleState {
        x: pick(&fresh.x, &next.x),
        x_dot: pick(&fresh.x_dot, &next.x_dot),
        theta: pick(&fresh.theta, &next.theta),
        theta_dot: pick(&fresh.theta_dot, &next.theta_dot),
        time: pick(&fresh.time, &next.time),
    };
    let obs = observe(&next);
    (next, obs, reward, done)
}

/// gymnax's `Environment.step` for a batch, one key per environment (`u32[batch,
/// 2]`): each key is split, and a terminal step resets from the second half's
/// draws. Returns as [`step`].
#[track_caller]
pub fn step_with_keys(
    s: &CartPoleState<Op>,
    actions: &Op,
    keys: &Op,
) -> (CartPoleState<Op>, Op, Op, Op) {
    // One key per environment, vmapped: the reset state drawn from the key's
    // second half (gymnax's `step`).
    let resets = keys
        .builder()
        .vmap(&xlaclient_core::Vmap::new(), keys.clone(), |_, key| {
            let [_, key_reset] = key.split_keys();
            key_reset.uniform(&[4], ElementType::F32, -RESET_BOUND, RESET_BOUND)
        });
    step(s, actions, &resets)
}

/// One CartPole in plain Rust with the same `f32` arithmetic as the ops (the
/// reference that tests check the device version against).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CartPole {
    /// `x, ẋ, θ, θ̇`.
    pub state: [f32; 4],
    /// Steps since the reset.
    pub time: i32,
}

impl CartPole {
    /// A fresh episode starting at `values` (`x, ẋ, θ, θ̇`).
    pub fn new(values: [f32; 4]) -> CartPole {
        CartPole {
            state: values,
            time: 0,
        }
    }

    /// Whether the state is terminal.
    pub fn is_terminal(&self) -> bool {
        let [x, _, theta, _] = self.state;
        let (xt, tt) = (X_THRESHOLD as f32, THETA_THRESHOLD as f32);
        x < -xt || x > xt || theta < -tt || theta > tt || self.time >= MAX_STEPS
    }

    /// One step with `action` (0 or 1, anything else counts as 1 as the
    /// dynamics' formula gives it); when the step ends the episode, the
    /// environment restarts at `reset`. Returns the reward and whether the step
    /// ended the episode.
    pub fn step(&mut self, action: u32, reset: [f32; 4]) -> (f32, bool) {
        let prev_terminal = self.is_terminal();
        let [x, x_dot, theta, theta_dot] = self.state;
        let a = if action == 0 { 0.0f32 } else { 1.0 };
        let force = a * FORCE_MAG - (1.0 - a) * FORCE_MAG;
        let (cos, sin) = (theta.cos(), theta.sin());
        let temp = (force + theta_dot * theta_dot * POLE_MASS_LENGTH * sin) / TOTAL_MASS;
        let den = 4.0f32 / 3.0 - cos * cos * MASS_POLE / TOTAL_MASS;
        let theta_acc = (sin * GRAVITY - cos * temp) / (den * LENGTH);
        let x_acc = temp - theta_acc * POLE_MASS_LENGTH * cos / TOTAL_MASS;
        self.state = [
            x + x_dot * TAU,
            x_dot + x_acc * TAU,
            theta + theta_dot * TAU,
            theta_dot + theta_acc * TAU,
        ];
        self.time += 1;
        let reward = if prev_terminal { 0.0 } else { 1.0 };
        let done = self.is_terminal();
        if done {
            *self = CartPole::new(reset);
        }
        (reward, done)
    }
}
