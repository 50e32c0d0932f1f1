//! Initialisers: seeded, reproducible parameter values built into the program from a
//! PRNG key (so initialisation runs on the device, like everything else).
//!
//! Each one is Haiku's definition (`haiku/_src/initializers.py`) written with this
//! crate's `jax.random` samplers, which equal jax 0.10.2's bit for bit on threefry
//! keys: on the same key and dimensions an initialiser gives the values Haiku's
//! gives (checked against values recorded from jax 0.10.2,
//! `scripts/record_jax_nn.py`). The named constructors are Haiku's table:
//!
//! | constructor | Haiku | values |
//! |---|---|---|
//! | [`truncated_normal_fan_in`] | `hk.Linear`'s default `w_init`, `TruncatedNormal(1/√fan_in)` | normal, stddev `1/√fan_in` before truncation at ±2 stddev |
//! | [`uniform_fan_in`] | `VarianceScaling(1/3, "fan_in", "uniform")` | uniform in `±1/√fan_in` (PyTorch's `Linear` default) |
//! | [`normal_fan_in`] | `VarianceScaling(1, "fan_in", "normal")` | normal, stddev `1/√fan_in` |
//! | [`glorot_uniform`] | `VarianceScaling(1, "fan_avg", "uniform")` | uniform in `±√(6/(fan_in+fan_out))` |
//! | [`glorot_normal`] | `VarianceScaling(1, "fan_avg", "truncated_normal")` | stddev `√(2/(fan_in+fan_out))` after truncation |
//! | [`he_uniform`] | `VarianceScaling(2, "fan_in", "uniform")` | uniform in `±√(6/fan_in)` |
//! | [`he_normal`] | `VarianceScaling(2, "fan_in", "truncated_normal")` | stddev `√(2/fan_in)` after truncation |
//! | [`lecun_uniform`] | `VarianceScaling(1, "fan_in", "uniform")` | uniform in `±√(3/fan_in)` |
//! | [`lecun_normal`] | `VarianceScaling(1, "fan_in", "truncated_normal")` | stddev `√(1/fan_in)` after truncation |
//!
//! Fans follow Haiku's `_compute_fans` ([`fans`]): a matrix `[in, out]` has
//! `fan_in = in`, `fan_out = out`; a convolution kernel `[..., in, out]` multiplies
//! both by the receptive field (the product of the leading axes); a vector `[n]`
//! has both `n`; a scalar both 1. A "truncated normal" is cut at ±2 standard
//! deviations of the untruncated normal (`jax.random.truncated_normal(key, -2, 2)`),
//! and the variance-scaling ones divide their stddev by `0.8796…`, the truncated
//! distribution's standard deviation, so that the result has the stated one.
//!
//! The values are `f32` (the crate's `normal` and `truncated_normal` samplers are
//! `f32`). Key splitting is the caller's: Haiku draws each parameter's key from its
//! own sequence, so a network's parameters equal Haiku's only given the same keys.
//!
//! ```
//! use xlaclient_core::Builder;
//! use xlaclient_nn::init;
//!
//! let b = Builder::new("init");
//! let key = b.prng_key(0);
//! let w = init::glorot_uniform().init(&key, &[50, 256]);
//! let b0 = init::Initializer::Constant(0.0).init(&key, &[256]);
//! assert_eq!(w.dims()?, vec![50, 256]);
//! assert_eq!(b0.dims()?, vec![256]);
//! # Ok::<(), xlaclient_nn::Error>(())
//! ```

use crate::{ElementType, Op};

/// The standard deviation of the standard normal truncated to `[-2, 2]`
/// (`scipy.stats.truncnorm.std(a=-2, b=2)`), Haiku's constant, which Haiku rounds to
/// `f32` before dividing by it.
pub const TRUNCATED_STDDEV: f64 = 0.879_625_661_034_239_8;

/// Which fan a [`Initializer::VarianceScaling`] divides its scale by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// The number of inputs.
    FanIn,
    /// The number of outputs.
    FanOut,
    /// Their mean.
    FanAvg,
}

/// The distribution a [`Initializer::VarianceScaling`] draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Normal truncated at ±2 stddev, rescaled to the target stddev.
    TruncatedNormal,
    /// Normal.
    Normal,
    /// Uniform in `±√(3·variance)`.
    Uniform,
}

/// How to fill a parameter: a constant, a distribution with fixed moments, or one
/// whose scale follows the parameter's fans (Haiku's initialisers, same names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Initializer {
    /// Every element `value` (`hk.initializers.Constant`; zeros for biases).
    Constant(f64),
    /// `jax.random.uniform(key, dims, minval=lo, maxval=hi)`
    /// (`hk.initializers.RandomUniform`).
    Uniform {
        /// Lower bound (inclusive).
        lo: f64,
        /// Upper bound (exclusive).
        hi: f64,
    },
    /// `mean + stddev · normal(key, dims)` (`hk.initializers.RandomNormal`).
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        stddev: f64,
    },
    /// `stddev · truncated_normal(key, -2, 2, dims) + mean`
    /// (`hk.initializers.TruncatedNormal`): `stddev` is the untruncated normal's.
    TruncatedNormal {
        /// Mean.
        mean: f64,
        /// Standard deviation of the normal before truncation.
        stddev: f64,
    },
    /// `hk.initializers.VarianceScaling`: variance `scale / fan` (the fan chosen by
    /// `mode`, at least 1), drawn from `distribution`.
    VarianceScaling {
        /// Multiplies the variance.
        scale: f64,
        /// Which fan divides it.
        mode: FanMode,
        /// The distribution.
        distribution: Distribution,
    },
    /// `hk.Linear`'s default weights: [`Initializer::TruncatedNormal`] with mean 0 and
    /// stddev `1/√fan_in` of the parameter's dimensions.
    TruncatedNormalFanIn,
}

/// Haiku's `_compute_fans`: `(fan_in, fan_out)` of a parameter of `dims` (see
/// [the module docs](self)).
pub fn fans(dims: &[i64]) -> (f64, f64) {
    match dims {
        [] => (1.0, 1.0),
        [n] => (*n as f64, *n as f64),
        [i, o] => (*i as f64, *o as f64),
        [lead @ .., i, o] => {
            // In f64: exact for any real kernel, and dimensions whose product
            // overflows i64 (refused by the ops anyway) cannot panic here.
            let rf: f64 = lead.iter().map(|&d| d as f64).product();
            (*i as f64 * rf, *o as f64 * rf)
        }
    }
}

impl Initializer {
    /// Whether [`init`](Self::init) reads its key (everything but a constant).
    pub fn is_random(&self) -> bool {
        !matches!(self, Initializer::Constant(_))
    }

    /// The `f32` values of a parameter of `dims`, drawn from `key` (a threefry
    /// `u32[2]` or rbg `u32[4]` key; a constant ignores it).
    #[track_caller]
    pub fn init(&self, key: &Op, dims: &[i64]) -> Op {
        let b = key.builder();
        let f32c = |v: f64| b.constant(v as f32);
        // Haiku's TruncatedNormal and RandomNormal, with `s` and `m` rounded to f32.
        let truncated = |mean: f64, stddev: f64| {
            &(&f32c(stddev) * &key.truncated_normal(-2.0, 2.0, dims)) + &f32c(mean)
        };
        let normal =
            |mean: f64, stddev: f64| &f32c(mean) + &(&f32c(stddev) * &key.normal(dims, F32));
        match *self {
            Initializer::Constant(v) => b.full(F32, dims, v),
            Initializer::Uniform { lo, hi } => key.uniform(dims, F32, lo, hi),
            Initializer::Normal { mean, stddev } => normal(mean, stddev),
            Initializer::TruncatedNormal { mean, stddev } => truncated(mean, stddev),
            Initializer::TruncatedNormalFanIn => truncated(0.0, 1.0 / fans(dims).0.sqrt()),
            Initializer::VarianceScaling {
                scale,
                mode,
                distribution,
            } => {
                let (fan_in, fan_out) = fans(dims);
                let fan = match mode {
                    FanMode::FanIn => fan_in,
                    FanMode::FanOut => fan_out,
                    FanMode::FanAvg => (fan_in + fan_out) / 2.0,
                };
                let var = scale / fan.max(1.0);
                match distribution {
                    Distribution::TruncatedNormal => {
                        // Haiku divides the f64 stddev by the f32-rounded constant.
                        let d = f64::from(TRUNCATED_STDDEV as f32);
                        truncated(0.0, var.sqrt() / d)
                    }
                    Distribution::Normal => normal(0.0, var.sqrt()),
                    Distribution::Uniform => {
                        let limit = (3.0 * var).sqrt();
                        key.uniform(dims, F32, -limit, limit)
                    }
                }
            }
        }
    }
}

const F32: ElementType = ElementType::F32;

fn vs(scale: f64, mode: FanMode, distribution: Distribution) -> Initializer {
    Initializer::VarianceScaling {
        scale,
        mode,
        distribution,
    }
}

/// Zeros (Haiku's default for biases).
pub fn zeros() -> Initializer {
    Initializer::Constant(0.0)
}

/// `hk.Linear`'s default weights: a normal of stddev `1/√fan_in` truncated at ±2
/// stddev ([`Initializer::TruncatedNormalFanIn`]).
pub fn truncated_normal_fan_in() -> Initializer {
    Initializer::TruncatedNormalFanIn
}

/// Uniform in `±1/√fan_in` (`VarianceScaling(1/3, fan_in, uniform)`).
pub fn uniform_fan_in() -> Initializer {
    vs(1.0 / 3.0, FanMode::FanIn, Distribution::Uniform)
}

/// Normal with stddev `1/√fan_in` (`VarianceScaling(1, fan_in, normal)`).
pub fn normal_fan_in() -> Initializer {
    vs(1.0, FanMode::FanIn, Distribution::Normal)
}

/// Glorot (Xavier) uniform: `VarianceScaling(1, fan_avg, uniform)`.
pub fn glorot_uniform() -> Initializer {
    vs(1.0, FanMode::FanAvg, Distribution::Uniform)
}

/// Glorot (Xavier) normal: `VarianceScaling(1, fan_avg, truncated_normal)`.
pub fn glorot_normal() -> Initializer {
    vs(1.0, FanMode::FanAvg, Distribution::TruncatedNormal)
}

/// He (Kaiming) uniform: `VarianceScaling(2, fan_in, uniform)`.
pub fn he_uniform() -> Initializer {
    vs(2.0, FanMode::FanIn, Distribution::Uniform)
}

/// He (Kaiming) normal: `VarianceScaling(2, fan_in, truncated_normal)`.
pub fn he_normal() -> Initializer {
    vs(2.0, FanMode::FanIn, Distribution::TruncatedNormal)
}

/// LeCun uniform: `VarianceScaling(1, fan_in, uniform)`.
pub fn lecun_uniform() -> Initializer {
    vs(1.0, FanMode::FanIn, Distribution::Uniform)
}

/// LeCun normal: `VarianceScaling(1, fan_in, truncated_normal)`.
pub fn lecun_normal() -> Initializer {
    vs(1.0, FanMode::FanIn, Distribution::TruncatedNormal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fans_follow_haiku() {
        assert_eq!(fans(&[]), (1.0, 1.0));
        assert_eq!(fans(&[7]), (7.0, 7.0));
        assert_eq!(fans(&[3, 5]), (3.0, 5.0));
        assert_eq!(fans(&[2, 3, 4, 5]), (24.0, 30.0));
    }
}
