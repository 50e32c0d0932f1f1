//! Environments stepped on the host: the [`Environment`] trait, [`VecEnv`] for many
//! environments at once, and [`Rng`], the seedable generator they draw from.

use crate::error::{Error, Result};

/// A small seedable pseudo-random generator (SplitMix64: a 64-bit counter passed
/// through a bijective mixing function). Plain Rust, no crate: environments need
/// reproducible draws from a seed, not cryptographic or statistical strength, and the
/// whole state is one `u64`, so copying an environment (to simulate ahead) copies its
/// generator too.
///
/// ```
/// use xlaclient_rl::Rng;
///
/// let mut a = Rng::new(7);
/// let mut b = Rng::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// let x = a.below(5)?;
/// assert!(x < 5);
/// # Ok::<(), xlaclient_rl::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n`, without modulo bias (draws again, rarely, when
    /// the 64 bits fall in the incomplete last block).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `n` is 0 (the range is empty).
    pub fn below(&mut self, n: u64) -> Result<u64> {
        if n == 0 {
            return Err(Error::InvalidArgument {
                what: "n",
                reason: "Rng::below(0): the range 0..0 is empty".into(),
            });
        }
        // The largest multiple of n that fits in 2^64, as a threshold: bits at or
        // above it would make small values more likely.
        let zone = u64::MAX - (u64::MAX % n + 1) % n;
        loop {
            let x = self.next_u64();
            if x <= zone {
                return Ok(x % n);
            }
        }
    }

    /// A uniform `f32` in `[0, 1)` (24 random bits).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// What one step of an environment gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    /// The reward of the transition.
    pub reward: f32,
    /// The discount of the transition: 0 where the episode terminated, else 1. An
    /// episode cut off by a time limit (a truncation, as in
    /// [`crate::classic`]) ends with `terminal` true and discount 1, so that a TD
    /// target still bootstraps from the state it was cut off in.
    pub discount: f32,
    /// Whether the episode ended with this step, by termination or truncation (the
    /// environment has already started the next one: its observation is the new
    /// episode's first).
    pub terminal: bool,
}

/// An environment stepped on the host, observed as a flat `f32` array.
///
/// Environments reset themselves when an episode ends (as Catch does), so an agent
/// just keeps stepping; [`reset`](Environment::reset) starts a new episode at any
/// time. Bad input (an action out of range, an output slice of the wrong length) is
/// an error ([`Error::InvalidAction`], [`Error::InvalidState`]), never a panic.
pub trait Environment {
    /// The dimensions of one observation (e.g. `[10, 5]` for Catch's board).
    fn observation_dims(&self) -> Vec<i64>;

    /// The number of discrete actions; valid actions are `0..num_actions()`.
    fn num_actions(&self) -> usize;

    /// Starts a new episode (drawing from the environment's own generator).
    fn reset(&mut self);

    /// Takes `action`; at the end of an episode the environment resets itself.
    ///
    /// # Errors
    /// [`Error::InvalidAction`] for an action outside `0..num_actions()` (the state is then
    /// unchanged).
    fn step(&mut self, action: usize) -> Result<Transition>;

    /// Writes the current observation into `out`, which must hold exactly
    /// [`observation_len`](Environment::observation_len) values.
    ///
    /// # Errors
    /// [`Error::Length`] when `out` has another length.
    fn observe(&self, out: &mut [f32]) -> Result<()>;

    /// The number of values in one observation (the product of its dimensions; 0
    /// if one is negative, `usize::MAX` if the product overflows).
    fn observation_len(&self) -> usize {
        let dims = self.observation_dims();
        if dims.iter().any(|&d| d < 0) {
            return 0;
        }
        dims.iter().fold(1usize, |n, &d| {
            n.saturating_mul(d.try_into().unwrap_or(usize::MAX))
        })
    }

    /// The current observation as a new vector.
    fn observation(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.observation_len()];
        // The length is the one `observe` asks for, so this cannot fail for a
        // consistent implementation; an inconsistent one gets zeros.
        let _ = self.observe(&mut out);
        out
    }
}

/// Many environments of one kind stepped together (the batched form of
/// [`Environment`]): one action per environment in, one transition each out, and all
/// observations as one `[n, ...]` array.
///
/// ```
/// use xlaclient_rl::{Environment, VecEnv, catch::Catch};
///
/// let mut envs = VecEnv::new((0..4).map(Catch::new).collect())?;
/// let obs = envs.observations();            // [4, 10, 5], flattened
/// assert_eq!(obs.len(), 4 * 50);
/// let steps = envs.step(&[0, 1, 2, 1])?;
/// assert_eq!(steps.len(), 4);
/// assert!(envs.step(&[0, 1]).is_err());    // one action per environment
/// # Ok::<(), xlaclient_rl::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct VecEnv<E> {
    envs: Vec<E>,
}

impl<E: Environment> VecEnv<E> {
    /// Wraps `envs`, which must all have the same observation dimensions and number
    /// of actions.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when they differ.
    pub fn new(envs: Vec<E>) -> Result<VecEnv<E>> {
        if let Some(first) = envs.first() {
            let (dims, actions) = (first.observation_dims(), first.num_actions());
            for (i, e) in envs.iter().enumerate() {
                if e.observation_dims() != dims || e.num_actions() != actions {
                    return Err(Error::InvalidArgument {
                        what: "envs",
                        reason: format!(
                            "VecEnv: environment {i} observes {:?} with {} actions, environment 0 {dims:?} with {actions}",
                            e.observation_dims(),
                            e.num_actions()
                        ),
                    });
                }
            }
        }
        Ok(VecEnv { envs })
    }

    /// The number of environments.
    pub fn len(&self) -> usize {
        self.envs.len()
    }

    /// Whether there are no environments.
    pub fn is_empty(&self) -> bool {
        self.envs.is_empty()
    }

    /// The environments.
    pub fn envs(&self) -> &[E] {
        &self.envs
    }

    /// The environments, mutably.
    pub fn envs_mut(&mut self) -> &mut [E] {
        &mut self.envs
    }

    /// Resets every environment.
    pub fn reset(&mut self) {
        self.envs.iter_mut().for_each(Environment::reset);
    }

    /// Steps environment `i` with `actions[i]`. Every action is checked before any
    /// environment moves, so on an error none has.
    ///
    /// # Errors
    /// [`Error::Length`] when `actions` has another length than the number of
    /// environments, [`Error::InvalidAction`] when an action is out of range.
    pub fn step(&mut self, actions: &[usize]) -> Result<Vec<Transition>> {
        if actions.len() != self.envs.len() {
            return Err(Error::Length {
                what: "VecEnv::step: actions, one per environment".into(),
                given: actions.len(),
                expected: self.envs.len(),
            });
        }
        for (i, (e, &a)) in self.envs.iter().zip(actions).enumerate() {
            if a >= e.num_actions() {
                return Err(Error::InvalidAction {
                    what: format!("VecEnv::step, environment {i}"),
                    action: a as i64,
                    actions: e.num_actions(),
                });
            }
        }
        self.envs
            .iter_mut()
            .zip(actions)
            .map(|(e, &a)| e.step(a))
            .collect()
    }

    /// All observations, environment after environment: a flattened `[n, ...]` array.
    pub fn observations(&self) -> Vec<f32> {
        let len = self.envs.first().map_or(0, Environment::observation_len);
        let mut out = vec![0.0; len * self.envs.len()];
        if len > 0 {
            for (e, chunk) in self.envs.iter().zip(out.chunks_exact_mut(len)) {
                let _ = e.observe(chunk);
            }
        }
        out
    }
}
