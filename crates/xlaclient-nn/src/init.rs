//! Initialisers: seeded, reproducible parameter values built into the program from a
//! PRNG key (so initialisation runs on the device, like everything else).
//!
//! Each one is Haiku's definition (`haiku/_src/initializers.py`) written with this
//! crate's `jax.random` samplers, which equal jax 0.10.2's bit for bit on threefry
//! keys: on the same key and dimensions an initialiser gives the values Haiku's
//! gives (checked against values recorded from jax 0.10.2,
//! `scripts/record_jax_nn.py`). The named constructors are Haiku's table, with
//! flax's `orthogonal` (`jax.nn.initializers.orthogonal`, checked against jax 0.10.2
//! and flax 0.12.8 with `scripts/record_flax_init.py`; flax's parameter keys are
//! [`flax_param_key`](crate::flax_param_key)):
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
//! | [`orthogonal`] | flax's and `jax.nn.initializers.orthogonal(scale)` | `scale` times orthonormal columns (rows if fewer), from a QR of a normal draw |
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
use xlaclient_core::QrMode;

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
    /// `jax.nn.initializers.orthogonal(scale, column_axis)` (flax's
    /// `nn.initializers.orthogonal`; see [`orthogonal`]): `scale` times a matrix
    /// with orthonormal columns (or rows, whichever are fewer) along
    /// `column_axis`, the other axes flattened into rows.
    Orthogonal {
        /// Multiplies the orthogonal matrix (`√2` for ReLU and tanh layers in
        /// PureJaxRL's PPO, `0.01` for its policy head).
        scale: f64,
        /// The axis of the columns (negative counts from the end; `-1` in JAX).
        column_axis: i64,
    },
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
        match self.draw(key, dims) {
            Ok(Draw::Normal(d)) => self.finish(dims, &key.normal(&d, F32)),
            Ok(Draw::Uniform { lo, hi }) => self.finish(dims, &key.uniform(dims, F32, lo, hi)),
            Ok(Draw::Truncated) => self.finish(dims, &key.truncated_normal(-2.0, 2.0, dims)),
            Err(done) => done,
        }
    }

    /// The sampler call [`init`](Self::init) makes on its key for a parameter of
    /// `dims`, or the parameter itself where it draws nothing (a constant; an
    /// orthogonal parameter with a zero dim, or one it refuses).
    #[track_caller]
    fn draw(&self, key: &Op, dims: &[i64]) -> Result<Draw, Op> {
        match *self {
            Initializer::Constant(v) => Err(key.builder().full(F32, dims, v)),
            Initializer::Uniform { lo, hi } => Ok(Draw::Uniform { lo, hi }),
            Initializer::Normal { .. } => Ok(Draw::Normal(dims.to_vec())),
            Initializer::TruncatedNormal { .. } | Initializer::TruncatedNormalFanIn => {
                Ok(Draw::Truncated)
            }
            Initializer::Orthogonal { column_axis, .. } => {
                orthogonal_plan(key, dims, column_axis).map(|p| Draw::Normal(vec![p.long, p.short]))
            }
            Initializer::VarianceScaling {
                scale,
                mode,
                distribution,
            } => Ok(match distribution {
                Distribution::TruncatedNormal => Draw::Truncated,
                Distribution::Normal => Draw::Normal(dims.to_vec()),
                Distribution::Uniform => {
                    let limit = (3.0 * variance(scale, mode, dims)).sqrt();
                    Draw::Uniform {
                        lo: -limit,
                        hi: limit,
                    }
                }
            }),
        }
    }

    /// The parameter of `dims` from the values `z` of [`draw`](Self::draw)'s sampler.
    fn finish(&self, dims: &[i64], z: &Op) -> Op {
        let b = z.builder();
        let f32c = |v: f64| b.constant(v as f32);
        // Haiku's TruncatedNormal and RandomNormal, with `s` and `m` rounded to f32.
        let truncated = |mean: f64, stddev: f64| &(&f32c(stddev) * z) + &f32c(mean);
        let normal = |mean: f64, stddev: f64| &f32c(mean) + &(&f32c(stddev) * z);
        match *self {
            Initializer::Constant(_) | Initializer::Uniform { .. } => z.clone(),
            Initializer::Normal { mean, stddev } => normal(mean, stddev),
            Initializer::TruncatedNormal { mean, stddev } => truncated(mean, stddev),
            Initializer::TruncatedNormalFanIn => truncated(0.0, 1.0 / fans(dims).0.sqrt()),
            Initializer::Orthogonal { scale, column_axis } => {
                match orthogonal_plan(z, dims, column_axis) {
                    Ok(plan) => plan.finish(z, dims, scale),
                    Err(done) => done,
                }
            }
            Initializer::VarianceScaling {
                scale,
                mode,
                distribution,
            } => {
                let var = variance(scale, mode, dims);
                match distribution {
                    Distribution::TruncatedNormal => {
                        // Haiku divides the f64 stddev by the f32-rounded constant.
                        let d = f64::from(TRUNCATED_STDDEV as f32);
                        truncated(0.0, var.sqrt() / d)
                    }
                    Distribution::Normal => normal(0.0, var.sqrt()),
                    Distribution::Uniform => z.clone(),
                }
            }
        }
    }
}

/// The sampler call of an initializer (see [`Initializer::draw`]); the uniform and
/// truncated normal ones draw over the parameter's own dims.
enum Draw {
    /// `normal(dims)`.
    Normal(Vec<i64>),
    /// `uniform(dims, lo, hi)`.
    Uniform { lo: f64, hi: f64 },
    /// `truncated_normal(-2, 2, dims)`.
    Truncated,
}

/// A variance-scaling initializer's variance for `dims`: `scale / fan`, the fan
/// chosen by `mode`, at least 1.
fn variance(scale: f64, mode: FanMode, dims: &[i64]) -> f64 {
    let (fan_in, fan_out) = fans(dims);
    let fan = match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
        FanMode::FanAvg => (fan_in + fan_out) / 2.0,
    };
    scale / fan.max(1.0)
}

const F32: ElementType = ElementType::F32;

/// `jax.nn.initializers.orthogonal(scale, column_axis)(key, dims, float32)`, op for
/// op (jax 0.10.2's `initializers.py` and `random.orthogonal`): with `n_cols =
/// dims[column_axis]` and `n_rows` the product of the other dims, a standard normal
/// `z` of `[max, min]` of the two is factored `q r = z` (reduced), `q`'s columns
/// are multiplied by the signs of `r`'s diagonal (which makes the result
/// independent of the QR's own sign convention), transposed when `n_rows < n_cols`,
/// reshaped to the other dims followed by `n_cols`, the last axis moved to
/// `column_axis`, and multiplied by `scale` (as `f32`). Dims with a zero give zeros.
///
/// The plan: what it draws and how it shapes the result, for valid dims (the
/// normal `z` is `[long, short]`); [`OrthogonalPlan::finish`] does the rest.
#[derive(Clone, Copy)]
struct OrthogonalPlan {
    axis: i64,
    n_rows: i64,
    n_cols: i64,
    long: i64,
    short: i64,
}

/// The plan for `dims`, or the finished op where there is nothing to draw: an
/// error (rank below 2, axis out of range, negative dims, too many elements) or
/// zeros (a zero dim).
#[track_caller]
fn orthogonal_plan(key: &Op, dims: &[i64], column_axis: i64) -> Result<OrthogonalPlan, Op> {
    let b = key.builder();
    let rank = dims.len() as i64;
    if rank < 2 {
        return Err(b.error(format!(
            "init::orthogonal needs a parameter of rank 2 or more, got dims {dims:?}"
        )));
    }
    let axis = if column_axis < 0 {
        column_axis + rank
    } else {
        column_axis
    };
    if !(0..rank).contains(&axis) {
        return Err(b.error(format!(
            "init::orthogonal: column axis {column_axis} is out of range for dims {dims:?}"
        )));
    }
    if dims.iter().any(|d| *d < 0) {
        // The sampler names the op, the dims and the line.
        return Err(key.normal(dims, F32));
    }
    if dims.contains(&0) {
        return Err(b.full(F32, dims, 0.0));
    }
    let n_cols = dims[axis as usize];
    let Some(size) = dims.iter().try_fold(1i64, |p, d| p.checked_mul(*d)) else {
        return Err(b.error(format!(
            "init::orthogonal: dims {dims:?} have more elements than an i64 counts"
        )));
    };
    let n_rows = size / n_cols;
    Ok(OrthogonalPlan {
        axis,
        n_rows,
        n_cols,
        long: n_rows.max(n_cols),
        short: n_rows.min(n_cols),
    })
}

impl OrthogonalPlan {
    /// The parameter from the normal draw `z` (`[long, short]`).
    fn finish(&self, z: &Op, dims: &[i64], scale: f64) -> Op {
        let b = z.builder();
        let &OrthogonalPlan {
            axis,
            n_rows,
            n_cols,
            short,
            ..
        } = self;
        let rank = dims.len() as i64;
        let (q, r) = z.qr(QrMode::Reduced);
        let diagonal = b.iota(ElementType::S32, &[short, short], 0).equal(&b.iota(
            ElementType::S32,
            &[short, short],
            1,
        ));
        let d = b.select(&diagonal, &r, &b.zeros(F32, &[])).reduce_sum(&[0]);
        let x = &q * &d.sign().reshape(&[1, short]);
        let x = if n_rows < n_cols { x.t() } else { x };
        let mut to: Vec<i64> = dims.to_vec();
        to.remove(axis as usize);
        to.push(n_cols);
        let mut x = x.reshape(&to);
        if axis != rank - 1 {
            // jnp.moveaxis(x, -1, column_axis)
            let mut perm: Vec<i64> = (0..rank - 1).collect();
            perm.insert(axis as usize, rank - 1);
            x = x.transpose(&perm);
        }
        &b.constant(scale as f32) * &x
    }
}

/// `initializer.init(key, dims)` for each `(initializer, key, dims)`: the same
/// values, bit for bit, with the random draws of all of them made by one Threefry
/// hash per kind of sampler ([`Builder::normal_many`](xlaclient_core::Builder::normal_many),
/// [`uniform_many`](xlaclient_core::Builder::uniform_many),
/// [`truncated_normal_many`](xlaclient_core::Builder::truncated_normal_many)). A
/// network initialised layer by layer, each from its own key, otherwise compiles
/// one hash loop per parameter (PPO's six orthogonal kernels: the init program's
/// compile 1.8 s → 1.3 s on a 2-core machine).
///
/// ```
/// use xlaclient_core::Builder;
/// use xlaclient_nn::init;
/// let b = Builder::new("init");
/// let [k0, k1] = b.prng_key(0).split_keys();
/// let ws = init::init_many(&[
///     (init::orthogonal(2f64.sqrt()), &k0, &[4, 64]),
///     (init::orthogonal(0.01), &k1, &[64, 2]),
/// ]);
/// assert_eq!(ws[1].dims()?, vec![64, 2]);
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
#[track_caller]
pub fn init_many(params: &[(Initializer, &Op, &[i64])]) -> Vec<Op> {
    let mut out: Vec<Option<Op>> = vec![None; params.len()];
    let (mut normals, mut uniforms, mut truncated) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (init, key, dims)) in params.iter().enumerate() {
        match init.draw(key, dims) {
            Ok(Draw::Normal(d)) => normals.push((i, d)),
            Ok(Draw::Uniform { lo, hi }) => uniforms.push((i, lo, hi)),
            Ok(Draw::Truncated) => truncated.push(i),
            Err(done) => out[i] = Some(done),
        }
    }
    let mut finish = |i: usize, z: Op| {
        let (init, _, dims) = &params[i];
        out[i] = Some(init.finish(dims, &z));
    };
    if let Some((first, _)) = normals.first() {
        let draws: Vec<(&Op, &[i64])> = normals
            .iter()
            .map(|(i, d)| (params[*i].1, &d[..]))
            .collect();
        let zs = params[*first].1.builder().normal_many(&draws);
        normals.iter().zip(zs).for_each(|((i, _), z)| finish(*i, z));
    }
    if let Some((first, ..)) = uniforms.first() {
        let draws: Vec<(&Op, &[i64], f64, f64)> = uniforms
            .iter()
            .map(|(i, lo, hi)| (params[*i].1, params[*i].2, *lo, *hi))
            .collect();
        let zs = params[*first].1.builder().uniform_many(&draws);
        uniforms
            .iter()
            .zip(zs)
            .for_each(|((i, ..), z)| finish(*i, z));
    }
    if let Some(first) = truncated.first() {
        let draws: Vec<(&Op, f64, f64, &[i64])> = truncated
            .iter()
            .map(|i| (params[*i].1, -2.0, 2.0, params[*i].2))
            .collect();
        let zs = params[*first].1.builder().truncated_normal_many(&draws);
        truncated.iter().zip(zs).for_each(|(i, z)| finish(*i, z));
    }
    out.into_iter().flatten().collect()
}

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

/// flax's `nn.initializers.orthogonal(scale)` (`jax.nn.initializers.orthogonal`,
/// column axis `-1`): `scale` times a random matrix with orthonormal columns, or
/// rows when there are fewer rows (the leading axes of a kernel of rank > 2 count
/// as rows). On the same key and dims the values are JAX's (QR in `f32` rounds
/// differently from LAPACK's: within `2e-6·scale` for 64×64). PureJaxRL's PPO uses
/// `orthogonal(2f64.sqrt())` for its hidden layers. Another column axis:
/// [`Initializer::Orthogonal`].
///
/// ```
/// use xlaclient_core::Builder;
/// use xlaclient_nn::init;
///
/// let b = Builder::new("ppo");
/// let w = init::orthogonal(2f64.sqrt()).init(&b.prng_key(0), &[4, 64]);
/// assert_eq!(w.dims()?, vec![4, 64]);
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
pub fn orthogonal(scale: f64) -> Initializer {
    Initializer::Orthogonal {
        scale,
        column_axis: -1,
    }
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
