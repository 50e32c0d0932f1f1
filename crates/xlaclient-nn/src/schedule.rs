//! Learning-rate schedules (optax's `schedules`), evaluated in the program from the
//! optimizer's step count: give one wherever an optimizer takes a learning rate
//! (a plain `f64` is [`Schedule::Constant`]).
//!
//! As in optax, the learning rate of an update is the schedule at the number of
//! updates applied *before* it (0 for the first update).
//!
//! Any function of the step count works too ([`Schedule::from_fn`], optax's
//! `count -> lr` callables), traced into the program, e.g. PureJaxRL's annealing
//! `LR · (1 − (count // (minibatches · epochs)) / num_updates)`:
//!
//! ```
//! use xlaclient_nn::{optim, Schedule};
//! let (lr, minibatches, epochs, num_updates) = (2.5e-4, 4.0, 4.0, 1000.0);
//! let anneal = Schedule::from_fn(move |count| {
//!     let done = (count.convert(xlaclient_core::ElementType::F32) / (minibatches * epochs)).floor();
//!     (1.0 - done / num_updates) * lr
//! });
//! let opt = optim::adam(anneal, 0.9, 0.999, 1e-5).clip_by_global_norm(0.5);
//! # let _ = opt;
//! ```
//!
//! ```
//! use xlaclient_nn::{optim, Schedule};
//! // Linear warm-up from 0 to 1e-3 over 100 steps, then cosine decay to 1e-5 at
//! // step 1,000 (optax.warmup_cosine_decay_schedule).
//! let sched = Schedule::WarmupCosineDecay {
//!     init: 0.0,
//!     peak: 1e-3,
//!     warmup_steps: 100,
//!     decay_steps: 1000,
//!     end: 1e-5,
//! };
//! assert!((sched.value(100).unwrap() - 1e-3).abs() < 1e-12);
//! let opt = optim::adam(sched, 0.9, 0.999, 1e-8);
//! # let _ = opt;
//! ```

use std::sync::Arc;

use crate::{Comparison, ElementType, Op};

/// A schedule written as a function of the step count (see [`Schedule::from_fn`]):
/// it receives the count (an `s32` scalar op of the update's program) and returns
/// the learning rate (a scalar op). Two are equal when they are the same function
/// object.
#[derive(Clone)]
pub struct ScheduleFn(Arc<dyn Fn(&Op) -> Op + Send + Sync>);

impl std::fmt::Debug for ScheduleFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScheduleFn(..)")
    }
}

impl PartialEq for ScheduleFn {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A learning rate as a function of the step (the number of updates applied).
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// The same value at every step (`optax.constant_schedule`).
    Constant(f64),
    /// `init · decay_rate^(step / transition_steps)`, the exponent floored with
    /// `staircase` (`optax.exponential_decay` with `transition_begin = 0`, no
    /// end value); `transition_steps ≤ 0` gives `init` at every step.
    ExponentialDecay {
        /// The value at step 0.
        init: f64,
        /// Steps per factor of `decay_rate`.
        transition_steps: i64,
        /// The factor per `transition_steps` steps.
        decay_rate: f64,
        /// Decay in whole steps of `transition_steps` (floored exponent).
        staircase: bool,
    },
    /// `init · ((1 − alpha) · ½(1 + cos(π · min(step, decay_steps) / decay_steps)) +
    /// alpha)` (`optax.cosine_decay_schedule` with exponent 1): from `init` to
    /// `alpha · init` at `decay_steps`, then constant.
    CosineDecay {
        /// The value at step 0.
        init: f64,
        /// Steps of the decay.
        decay_steps: i64,
        /// The final value as a fraction of `init`.
        alpha: f64,
    },
    /// From `init` to `end` linearly over `transition_steps`, then `end`
    /// (`optax.linear_schedule` with `transition_begin = 0`).
    Linear {
        /// The value at step 0.
        init: f64,
        /// The value from `transition_steps` on.
        end: f64,
        /// Steps of the ramp.
        transition_steps: i64,
    },
    /// Linear from `init` to `peak` over `warmup_steps`, then cosine decay from
    /// `peak` to `end` at step `decay_steps` (counted from step 0, warm-up
    /// included), then `end` (`optax.warmup_cosine_decay_schedule`, exponent 1).
    WarmupCosineDecay {
        /// The value at step 0.
        init: f64,
        /// The value at the end of the warm-up.
        peak: f64,
        /// Steps of the warm-up.
        warmup_steps: i64,
        /// The step where the decay ends (warm-up included).
        decay_steps: i64,
        /// The value from `decay_steps` on.
        end: f64,
    },
    /// `(init − end) · (1 − min(max(step − transition_begin, 0), transition_steps) /
    /// transition_steps)^power + end` (`optax.polynomial_schedule`);
    /// `transition_steps ≤ 0` gives `init` at every step.
    Polynomial {
        /// The value at step 0 (and until `transition_begin`).
        init: f64,
        /// The value from `transition_begin + transition_steps` on.
        end: f64,
        /// The exponent of the decay.
        power: f64,
        /// Steps of the decay.
        transition_steps: i64,
        /// Steps before the decay starts.
        transition_begin: i64,
    },
    /// `init`, multiplied by each `scale` whose `boundary` the step has reached
    /// (`optax.piecewise_constant_schedule`).
    PiecewiseConstant {
        /// The value before the first boundary.
        init: f64,
        /// `(boundary, scale)`: from step `boundary` on, the value is multiplied
        /// by `scale`.
        boundaries_and_scales: Vec<(i64, f64)>,
    },
    /// Any function of the step count, traced into the program
    /// ([`Schedule::from_fn`]).
    Fn(ScheduleFn),
}

impl From<f64> for Schedule {
    fn from(lr: f64) -> Schedule {
        Schedule::Constant(lr)
    }
}

impl Schedule {
    /// A schedule given as a function of the step count, as optax takes any
    /// `count -> lr` callable: `f` receives the count of updates applied before
    /// this one (an `s32` scalar op) and returns the learning rate (a scalar op,
    /// converted to each parameter's type). It is traced into every update that
    /// uses it.
    pub fn from_fn(f: impl Fn(&Op) -> Op + Send + Sync + 'static) -> Schedule {
        Schedule::Fn(ScheduleFn(Arc::new(f)))
    }

    /// The value at `step`, computed on the host in `f64`; `None` for a schedule
    /// given as a function ([`Schedule::from_fn`]), which exists only in programs.
    pub fn value(&self, step: i64) -> Option<f64> {
        Some(match *self {
            Schedule::Fn(_) => return None,
            Schedule::Polynomial {
                init,
                end,
                power,
                transition_steps,
                transition_begin,
            } => {
                if transition_steps <= 0 {
                    return Some(init);
                }
                let c = (step - transition_begin).clamp(0, transition_steps) as f64;
                (init - end) * (1.0 - c / transition_steps as f64).powf(power) + end
            }
            Schedule::PiecewiseConstant {
                init,
                ref boundaries_and_scales,
            } => {
                let mut sorted = boundaries_and_scales.clone();
                sorted.sort_by_key(|(b, _)| *b);
                sorted
                    .iter()
                    .filter(|(b, _)| step >= *b)
                    .fold(init, |v, (_, s)| v * s)
            }
            Schedule::Constant(v) => v,
            Schedule::ExponentialDecay {
                init,
                transition_steps,
                decay_rate,
                staircase,
            } => {
                if transition_steps <= 0 {
                    return Some(init);
                }
                let mut p = step.max(0) as f64 / transition_steps as f64;
                if staircase {
                    p = p.floor();
                }
                init * decay_rate.powf(p)
            }
            Schedule::CosineDecay {
                init,
                decay_steps,
                alpha,
            } => cosine(init, decay_steps, alpha, step),
            Schedule::Linear {
                init,
                end,
                transition_steps,
            } => linear(init, end, transition_steps, step),
            Schedule::WarmupCosineDecay {
                init,
                peak,
                warmup_steps,
                decay_steps,
                end,
            } => {
                if step < warmup_steps {
                    linear(init, peak, warmup_steps, step)
                } else {
                    let alpha = if peak == 0.0 { 0.0 } else { end / peak };
                    cosine(
                        peak,
                        decay_steps.saturating_sub(warmup_steps),
                        alpha,
                        step.saturating_sub(warmup_steps),
                    )
                }
            }
        })
    }

    /// Whether the value is the same at every step.
    pub fn is_constant(&self) -> bool {
        matches!(self, Schedule::Constant(_))
    }

    /// The value at `step` (an `s32` scalar op) as an `f32` scalar op of `step`'s
    /// program.
    #[track_caller]
    pub fn at(&self, step: &Op) -> Op {
        let b = step.builder();
        let f = |v: f64| b.constant(v as f32);
        let t = step.convert(ElementType::F32);
        match *self {
            Schedule::Fn(ref g) => (g.0)(step),
            Schedule::Polynomial {
                init,
                end,
                power,
                transition_steps,
                transition_begin,
            } => {
                if transition_steps <= 0 {
                    return f(init);
                }
                let c = (&t - transition_begin as f64).clamp(&f(0.0), &f(transition_steps as f64));
                let frac = 1.0 - &c / transition_steps as f64;
                &(&frac.pow(&f(power)) * (init - end)) + end
            }
            Schedule::PiecewiseConstant {
                init,
                ref boundaries_and_scales,
            } => {
                let mut sorted = boundaries_and_scales.clone();
                sorted.sort_by_key(|(b, _)| *b);
                sorted.iter().fold(f(init), |v, (boundary, scale)| {
                    let reached = step.compare(&b.constant(*boundary as i32), Comparison::Ge);
                    b.select(&reached, &(&v * *scale), &v)
                })
            }
            Schedule::Constant(v) => f(v),
            Schedule::ExponentialDecay {
                init,
                transition_steps,
                decay_rate,
                staircase,
            } => {
                if transition_steps <= 0 {
                    return f(init);
                }
                let mut p = &t.max(&f(0.0)) / transition_steps as f64;
                if staircase {
                    p = p.floor();
                }
                &f(decay_rate).pow(&p) * init
            }
            Schedule::CosineDecay {
                init,
                decay_steps,
                alpha,
            } => cosine_op(&t, init, decay_steps, alpha),
            Schedule::Linear {
                init,
                end,
                transition_steps,
            } => linear_op(&t, init, end, transition_steps),
            Schedule::WarmupCosineDecay {
                init,
                peak,
                warmup_steps,
                decay_steps,
                end,
            } => {
                let alpha = if peak == 0.0 { 0.0 } else { end / peak };
                let warm = linear_op(&t, init, peak, warmup_steps);
                let decay = cosine_op(
                    &(&t - warmup_steps as f64),
                    peak,
                    decay_steps.saturating_sub(warmup_steps),
                    alpha,
                );
                let warming = step.compare(&b.constant(warmup_steps as i32), Comparison::Lt);
                b.select(&warming, &warm, &decay)
            }
        }
    }
}

fn cosine(init: f64, decay_steps: i64, alpha: f64, step: i64) -> f64 {
    if decay_steps <= 0 {
        return init * alpha;
    }
    let c = step.clamp(0, decay_steps) as f64 / decay_steps as f64;
    init * ((1.0 - alpha) * 0.5 * (1.0 + (std::f64::consts::PI * c).cos()) + alpha)
}

fn linear(init: f64, end: f64, transition_steps: i64, step: i64) -> f64 {
    if transition_steps <= 0 {
        return init;
    }
    let frac = 1.0 - step.clamp(0, transition_steps) as f64 / transition_steps as f64;
    (init - end) * frac + end
}

fn cosine_op(t: &Op, init: f64, decay_steps: i64, alpha: f64) -> Op {
    let b = t.builder();
    if decay_steps <= 0 {
        return b.constant((init * alpha) as f32);
    }
    let c = &t.clamp(&b.constant(0f32), &b.constant(decay_steps as f32)) / decay_steps as f64;
    let cos = (&c * std::f64::consts::PI).cos();
    &(&(&(&cos + 1.0) * (0.5 * (1.0 - alpha))) + alpha) * init
}

fn linear_op(t: &Op, init: f64, end: f64, transition_steps: i64) -> Op {
    let b = t.builder();
    if transition_steps <= 0 {
        return b.constant(init as f32);
    }
    let frac = 1.0
        - &t.clamp(&b.constant(0f32), &b.constant(transition_steps as f32))
            / transition_steps as f64;
    &(&frac * (init - end)) + end
}
