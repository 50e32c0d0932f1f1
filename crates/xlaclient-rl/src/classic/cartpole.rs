//! gymnasium's `CartPole-v1` on the host, in `f64`: [`CartPoleEnv`].
//!
//! A cart (mass 1.0) on a frictionless track carries a pole (mass 0.1, half-length
//! 0.5) on an unactuated joint; gravity is 9.8. Action 1 pushes the cart right with
//! force 10, action 0 left. One step is an explicit Euler step of 0.02 s of the
//! equations of motion (Barto, Sutton and Anderson's). The episode *terminates* when
//! the new state has `|x| > 2.4` or `|θ| > 12°`, and is *truncated* at 500 steps (the
//! `TimeLimit` of `gymnasium.make("CartPole-v1")`). Every step's reward is 1,
//! the terminating step's included. A reset draws `x, ẋ, θ, θ̇` uniformly from
//! `[−0.05, 0.05)`. Observations are the state as `f32`: `[x, ẋ, θ, θ̇]`.
//!
//! The state is kept in `f64` and each step computes what gymnasium computes, in
//! the same order, so a replay of gymnasium's episodes agrees to rounding
//! (`tests/classic_control.rs`). [`crate::cartpole`] is the same task as `f32` ops
//! for the device (gymnax's form).

use super::{EpisodeStep, check_finite, episode_over, uniform_f64, write_obs};
use crate::env::{Environment, Rng, Transition};
use crate::error::{Error, Result};

/// Gravity.
pub const GRAVITY: f64 = 9.8;
/// The cart's mass.
pub const MASS_CART: f64 = 1.0;
/// The pole's mass.
pub const MASS_POLE: f64 = 0.1;
/// Half the pole's length.
pub const LENGTH: f64 = 0.5;
/// The force of a push.
pub const FORCE_MAG: f64 = 10.0;
/// Seconds per step.
pub const TAU: f64 = 0.02;
/// The pole's angle limit, 12° in radians (`12 · 2π / 360`).
pub const THETA_THRESHOLD: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
/// The cart's position limit.
pub const X_THRESHOLD: f64 = 2.4;
/// Steps after which an episode is truncated.
pub const MAX_STEPS: u32 = 500;
/// Resets draw each value from `[−RESET_BOUND, RESET_BOUND)`.
pub const RESET_BOUND: f64 = 0.05;
/// Actions: push left (0), push right (1).
pub const NUM_ACTIONS: usize = 2;

const TOTAL_MASS: f64 = MASS_POLE + MASS_CART;
const POLE_MASS_LENGTH: f64 = MASS_POLE * LENGTH;
const NAMES: [&str; 4] = ["x", "x_dot", "theta", "theta_dot"];

/// gymnasium's `CartPole-v1` (see the [module](self)): the `f64` state `[x, ẋ, θ, θ̇]`,
/// the steps taken in the episode, and the [`Rng`] that draws resets. Cloning copies
/// the generator, so a copy stepped ahead sees the same future as the original.
///
/// ```
/// use xlaclient_rl::{Environment, Rng, classic::CartPoleEnv};
///
/// // The state gymnasium's `reset(seed=0)` gives, then pushes right until the end.
/// let start = [0.013696168732145436, -0.02302132862361297,
///              -0.045902647606380534, -0.04834723644714709];
/// let mut env = CartPoleEnv::from_state(start, Rng::new(0))?;
/// let mut steps = 0;
/// loop {
///     let s = env.step_episode(1)?;
///     steps += 1;
///     assert_eq!(s.reward, 1.0);
///     if s.ended() {
///         assert!(s.terminated && !s.truncated);
///         break;
///     }
/// }
/// assert!(env.state()[2] < -12f64.to_radians()); // fell to the left
/// assert!(env.step_episode(0).is_err());           // ended: reset first
/// assert!(env.step(2).is_err());                   // actions are 0 and 1
/// env.reset();
/// assert_eq!(env.observation().len(), 4);
/// # Ok::<(), xlaclient_rl::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CartPoleEnv {
    state: [f64; 4],
    steps: u32,
    ended: bool,
    rng: Rng,
}

impl CartPoleEnv {
    /// A new environment whose resets are drawn from `Rng::new(seed)`; the first
    /// episode starts at once.
    pub fn new(seed: u64) -> CartPoleEnv {
        let mut rng = Rng::new(seed);
        let state = Self::draw(&mut rng);
        CartPoleEnv {
            state,
            steps: 0,
            ended: false,
            rng,
        }
    }

    /// An environment at the start of an episode in `state` (`[x, ẋ, θ, θ̇]`, e.g.
    /// gymnasium's state after a reset), drawing later resets from `rng`. A state
    /// beyond the limits is allowed (the next step terminates).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first value that is NaN or infinite.
    pub fn from_state(state: [f64; 4], rng: Rng) -> Result<CartPoleEnv> {
        check_finite("CartPoleEnv", &NAMES, &state)?;
        Ok(CartPoleEnv {
            state,
            steps: 0,
            ended: false,
            rng,
        })
    }

    fn draw(rng: &mut Rng) -> [f64; 4] {
        std::array::from_fn(|_| uniform_f64(rng, -RESET_BOUND, RESET_BOUND))
    }

    /// The state `[x, ẋ, θ, θ̇]`.
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

    /// gymnasium's `step` (with the time limit): one Euler step with `action`,
    /// without a reset when the episode ends; the observation is then the episode's
    /// last, and further steps are refused until [`reset`](Environment::reset).
    ///
    /// # Errors
    /// [`Error::InvalidAction`] for an action other than 0 or 1,
    /// [`Error::InvalidArgument`] when the episode has ended. The state is then
    /// unchanged.
    pub fn step_episode(&mut self, action: usize) -> Result<EpisodeStep> {
        if action >= NUM_ACTIONS {
            return Err(Error::InvalidAction {
                what: "CartPoleEnv (0 push left, 1 push right)".into(),
                action: action as i64,
                actions: NUM_ACTIONS,
            });
        }
        if self.ended {
            return Err(episode_over("CartPoleEnv", self.steps));
        }
        self.state = dynamics(self.state, action);
        self.steps += 1;
        let [x, _, theta, _] = self.state;
        // gymnasium's four comparisons (not a range's `contains`: they differ on NaN,
        // which never terminates there).
        #[allow(clippy::manual_range_contains)]
        let terminated = x < -X_THRESHOLD
            || x > X_THRESHOLD
            || theta < -THETA_THRESHOLD
            || theta > THETA_THRESHOLD;
        let truncated = self.steps >= MAX_STEPS;
        self.ended = terminated || truncated;
        Ok(EpisodeStep {
            reward: 1.0,
            terminated,
            truncated,
        })
    }
}

/// One Euler step of the equations of motion, in gymnasium's order of operations.
fn dynamics(state: [f64; 4], action: usize) -> [f64; 4] {
    let [x, x_dot, theta, theta_dot] = state;
    let force = if action == 1 { FORCE_MAG } else { -FORCE_MAG };
    let (sin, cos) = theta.sin_cos();
    let temp = (force + POLE_MASS_LENGTH * (theta_dot * theta_dot) * sin) / TOTAL_MASS;
    let theta_acc = (GRAVITY * sin - cos * temp)
        / (LENGTH * (4.0 / 3.0 - MASS_POLE * (cos * cos) / TOTAL_MASS));
    let x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS;
    [
        x + TAU * x_dot,
        x_dot + TAU * x_acc,
        theta + TAU * theta_dot,
        theta_dot + TAU * theta_acc,
    ]
}

impl Environment for CartPoleEnv {
    fn observation_dims(&self) -> Vec<i64> {
        vec![4]
    }

    fn num_actions(&self) -> usize {
        NUM_ACTIONS
    }

    fn reset(&mut self) {
        self.state = Self::draw(&mut self.rng);
        self.steps = 0;
        self.ended = false;
    }

    /// [`step_episode`](CartPoleEnv::step_episode), then a reset when the episode
    /// ended; see [`EpisodeStep::transition`] for the discount at a truncation.
    fn step(&mut self, action: usize) -> Result<Transition> {
        let s = self.step_episode(action)?;
        if s.ended() {
            self.reset();
        }
        Ok(s.transition())
    }

    fn observe(&self, out: &mut [f32]) -> Result<()> {
        write_obs("CartPoleEnv", &self.state, out)
    }
}
