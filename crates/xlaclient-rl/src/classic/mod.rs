//! Classic-control tasks on the host with gymnasium's dynamics, in `f64` as gymnasium
//! computes them: [`CartPoleEnv`] (`CartPole-v1`) and [`AcrobotEnv`] (`Acrobot-v1`),
//! each an [`Environment`](crate::Environment) that can be cloned (a planner simulates
//! ahead in a copy, generator included) and started from an exact state
//! (`from_state`). [`acrobot`] also has Acrobot as ops, a batch of environments
//! stepped inside a compiled program (CartPole's are in [`crate::cartpole`]).
//!
//! Both are checked against episodes recorded from gymnasium 1.4.0
//! (`scripts/record_gymnasium.py`, `tests/data/gymnasium_*.json`): the same initial
//! state and actions give every observation to 1e-6 and the rewards, terminations and
//! truncations exactly (`tests/classic_control.rs`).
//!
//! **Ends of episodes.** gymnasium tells a *termination* (the task's own end: the
//! pole fell, the tip reached the line) from a *truncation* (the 500-step time
//! limit). [`EpisodeStep`] carries both; the inherent `step_episode` of each
//! environment is gymnasium's `step` (no reset; stepping an ended episode is an
//! error until `reset`). Through [`Environment::step`](crate::Environment::step) a
//! step that ends the episode either way has `terminal: true` (the environment resets
//! itself, as every [`Environment`](crate::Environment) does), and its `discount` is
//! 0 only for a termination: a truncated step keeps discount 1, so a TD target still
//! bootstraps from the state the time limit cut off.

pub mod acrobot;
pub mod cartpole;

pub use acrobot::AcrobotEnv;
pub use cartpole::CartPoleEnv;

use crate::env::{Rng, Transition};
use crate::error::{Error, Result};

/// One step of a classic-control episode, as gymnasium's `step` reports it (less the
/// observation, which the environment holds: see `observe`).
///
/// ```
/// use xlaclient_rl::classic::EpisodeStep;
///
/// let cut = EpisodeStep { reward: 1.0, terminated: false, truncated: true };
/// assert!(cut.ended());
/// let t = cut.transition();
/// assert_eq!((t.terminal, t.discount), (true, 1.0)); // ends, but bootstraps
/// let fell = EpisodeStep { reward: 1.0, terminated: true, truncated: false };
/// assert_eq!(fell.transition().discount, 0.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpisodeStep {
    /// The reward of the step.
    pub reward: f32,
    /// Whether the step reached a terminal state of the task.
    pub terminated: bool,
    /// Whether the step reached the time limit (both may be true on one step).
    pub truncated: bool,
}

impl EpisodeStep {
    /// Whether the episode ended with this step (terminated or truncated).
    pub fn ended(&self) -> bool {
        self.terminated || self.truncated
    }

    /// The step as a [`Transition`]: `terminal` when the episode ended either way,
    /// `discount` 0 only for a termination (1 at a truncation).
    pub fn transition(&self) -> Transition {
        Transition {
            reward: self.reward,
            discount: if self.terminated { 0.0 } else { 1.0 },
            terminal: self.ended(),
        }
    }
}

/// A uniform `f64` in `[lo, hi)` from 53 random bits.
fn uniform_f64(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    lo + (hi - lo) * u
}

/// Checks that every value of `state` is finite; `env` and `names` make the error.
fn check_finite(env: &str, names: &[&str], state: &[f64]) -> Result<()> {
    match state.iter().zip(names).find(|(v, _)| !v.is_finite()) {
        Some((v, name)) => Err(Error::InvalidArgument {
            what: "state",
            reason: format!("{env}::from_state: {name} = {v}, every value must be finite"),
        }),
        None => Ok(()),
    }
}

/// The error for a step of an episode that has ended (until `reset`).
fn episode_over(env: &str, steps: u32) -> Error {
    Error::InvalidArgument {
        what: "self",
        reason: format!(
            "{env}::step_episode: the episode ended at step {steps}; call reset (or step through Environment::step, which resets by itself)"
        ),
    }
}

/// Writes `values` as `f32` into `out`, which must hold exactly as many.
fn write_obs(env: &str, values: &[f64], out: &mut [f32]) -> Result<()> {
    if out.len() != values.len() {
        return Err(Error::Length {
            what: format!("{env}::observe output values"),
            given: out.len(),
            expected: values.len(),
        });
    }
    for (o, v) in out.iter_mut().zip(values) {
        *o = *v as f32;
    }
    Ok(())
}
