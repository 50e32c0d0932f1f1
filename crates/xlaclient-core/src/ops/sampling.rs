//! `jax.random`'s samplers on a key: `uniform`, `normal`, `truncated_normal`,
//! `randint`, `bernoulli`, `gumbel`, `categorical`, `permutation`/`shuffle` and
//! `choice`, plus the key operations `random_split`, `random_fold_in` and
//! `random_bits`, each built from the crate's own ops in the order JAX 0.10.2
//! builds it, so that the same key, shape and arguments give the same values as
//! `jax.random` (checked against vectors recorded from jax 0.10.2 on the CPU,
//! `scripts/record_jax_samplers.py`, and the digests of a million draws each).
//!
//! # The other distributions
//!
//! Built on those draws in JAX's order as well (checked against
//! `scripts/record_jax_distributions.py`, `tests/distributions.rs`):
//! [`exponential`](Op::exponential), [`laplace`](Op::laplace),
//! [`logistic_sample`](Op::logistic_sample) (JAX's `logistic`),
//! [`cauchy`](Op::cauchy), [`rademacher`](Op::rademacher),
//! [`maxwell`](Op::maxwell), [`double_sided_maxwell`](Op::double_sided_maxwell),
//! [`rayleigh`](Op::rayleigh), [`pareto`](Op::pareto),
//! [`weibull_min`](Op::weibull_min), [`lognormal`](Op::lognormal),
//! [`triangular`](Op::triangular), [`geometric`](Op::geometric),
//! [`wald`](Op::wald); the gamma family [`gamma`](Op::gamma),
//! [`loggamma`](Op::loggamma), [`beta`](Op::beta), [`dirichlet`](Op::dirichlet),
//! [`chisquare`](Op::chisquare), [`f_sample`](Op::f_sample) (JAX's `f`),
//! [`student_t`](Op::student_t) (JAX's `t`),
//! [`generalized_normal`](Op::generalized_normal), [`ball`](Op::ball);
//! [`poisson`](Op::poisson), [`binomial`](Op::binomial),
//! [`multinomial`](Op::multinomial); and, through a factorization that JAX leaves to
//! LAPACK (so equal to a few ulp, not bit for bit),
//! [`multivariate_normal`](Op::multivariate_normal) and
//! [`orthogonal`](Op::orthogonal). On the pinned plugin the `f32` samples equal
//! JAX's bit for bit but for `logistic_sample` (within 4 ulp: a 1-ulp `log1p`
//! difference inside the fused kernel, amplified near ½); the `f64` ones built on
//! `log1p` are within 256 ulp (jaxlib's `f64` `log1p` is up to 127 ulp from the
//! correctly rounded value; the plugins' within 1).
//!
//! # Two kinds of key
//!
//! The key's shape says which PRNG it belongs to, as a typed JAX key carries its
//! implementation:
//!
//! - `u32[2]`, **threefry2x32** ([`Builder::prng_key`]), the default, as in JAX:
//!   random bits are the Threefry-2x32 hash of counters, built from integer ops, so
//!   the bits (and the integer samplers built on them) equal JAX's on every backend
//!   and XLA version; keys split and fold into independent streams.
//! - `u32[4]`, **rbg** ([`Builder::rbg_key`], JAX's `jax.random.key(seed,
//!   impl='rbg')`): keys split and fold with threefry as above, but a sampler's bits
//!   come from XLA's own `rng-bit-generator` with the backend's default algorithm.
//!   This is the fast path on backends where that op is a native kernel (JAX
//!   recommends rbg on TPUs); on the CPU plugins it is not faster (XLA expands it
//!   into Philox: about 3× the time of the threefry hash for 10M `u32`, measured on
//!   the pinned plugin). XLA promises no particular bits for it: they may change
//!   across backends and versions (today they equal jaxlib 0.10.2's on both CPU
//!   plugins).
//!
//! Threefry is the default because its values are defined by the algorithm alone:
//! reproducible on every backend and equal to JAX's default, which is what results
//! are compared against; on the CPU it is also the faster of the two.
//!
//! # Floats and XLA versions
//!
//! Float samplers end in XLA's `log` (`gumbel`, `categorical`, `choice` with
//! probabilities) or `log1p` (`normal`, `truncated_normal`), whose last bit is the
//! backend's. On the pinned CPU plugin every sampler equals jax 0.10.2's bit for
//! bit; on the older 0.81 plugin, whose `log1p` differs from jaxlib's in the last
//! bit on 2.6% of inputs, `normal` and `truncated_normal` differ by at most 3 ulp
//! on about 0.5% of draws (the rest is equal there too).
//!
//! # Arguments
//!
//! Bounds and probabilities are a [`Param`]: a Rust number (taking the sampler's
//! element type, as a Python number does in JAX) or an op whose dimensions
//! broadcast to the sample's. A key of another shape or type, negative dimensions,
//! a bound of the wrong element type or dimensions are build errors naming the
//! sampler and the caller's line.
//!
//! # Element types
//!
//! `uniform`, `gumbel` and `bernoulli` take `f32` or `f64`; `normal` and
//! `truncated_normal` are `f32` (their `f64` forms use other polynomials, not built
//! here); `randint`, `permutation`, `categorical` and integer `choice` give `s32`
//! (JAX's default integers).
//!
//! # Compile-time constants
//!
//! A bound or probability given as a constant may be folded by XLA when the program
//! is compiled, which evaluates `log` (in `choice` with probabilities and no
//! replacement) with the host's libm instead of the compiled kernel: the last bit
//! may differ from a run where the same values arrive as parameters. JAX has the
//! same behaviour under `jit`; its eager calls pass them as parameters.

use std::panic::Location;

mod distributions;

use super::elementwise::{BinaryOp, Comparison, Scalar, UnaryOp};
use super::random::RngAlgorithm;
use super::window::WindowDim;
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ops::bitwise::BitwiseOp;
use crate::shape::{ElementType, Shape};

type Loc = &'static Location<'static>;

const U32: ElementType = ElementType::U32;
const U64: ElementType = ElementType::U64;
const S32: ElementType = ElementType::S32;
const F32: ElementType = ElementType::F32;
const F64: ElementType = ElementType::F64;

/// Which pseudo-random generator a key belongs to (told by the key's shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrngImpl {
    /// JAX's default, Threefry-2x32 on a `u32[2]` key: bits equal to JAX's
    /// everywhere.
    Threefry2x32,
    /// JAX's `rbg` on a `u32[4]` key: threefry for split and fold-in, XLA's
    /// `rng-bit-generator` (the backend's default algorithm) for bits.
    Rbg,
}

impl PrngImpl {
    /// The shape of this implementation's keys: `u32[2]` or `u32[4]`.
    pub fn key_shape(self) -> Shape {
        match self {
            PrngImpl::Threefry2x32 => Shape::of::<u32>(&[2]),
            PrngImpl::Rbg => Shape::of::<u32>(&[4]),
        }
    }

    /// The implementation whose keys have `shape`, if any.
    pub fn of_key_shape(shape: &Shape) -> Option<PrngImpl> {
        [PrngImpl::Threefry2x32, PrngImpl::Rbg]
            .into_iter()
            .find(|i| i.key_shape() == *shape)
    }
}

/// A sampler's bound or probability: a Rust number, which takes the sample's
/// element type, or an op of that element type whose dimensions broadcast (numpy's
/// rule) to the sample's.
#[derive(Clone, Copy, Debug)]
pub enum Param<'a> {
    /// A number, like a Python scalar in JAX.
    Number(Scalar),
    /// An array (or scalar op) of the sample's element type.
    Array(&'a Op),
}

macro_rules! param_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Param<'_> {
            fn from(x: $t) -> Self {
                Param::Number(x.into())
            }
        }
    )*};
}
param_from!(f32, f64, i32, i64, u32);

impl<'a> From<&'a Op> for Param<'a> {
    fn from(x: &'a Op) -> Self {
        Param::Array(x)
    }
}

/// What `choice` draws from: the integers `0..n`, or the entries of an array along
/// an axis.
#[derive(Clone, Copy, Debug)]
pub enum Population<'a> {
    /// `0..n` (JAX's `choice(key, n, …)`).
    Range(i64),
    /// The slices of an array along an axis (JAX's `choice(key, a, …, axis=axis)`).
    Array(&'a Op, i64),
}

impl From<i64> for Population<'_> {
    fn from(n: i64) -> Self {
        Population::Range(n)
    }
}

impl From<i32> for Population<'_> {
    fn from(n: i32) -> Self {
        Population::Range(n.into())
    }
}

impl<'a> From<&'a Op> for Population<'a> {
    fn from(a: &'a Op) -> Self {
        Population::Array(a, 0)
    }
}

fn fail(
    b: &Builder,
    what: &'static str,
    shapes: &[&Shape],
    kind: ShapeErrorKind,
    reason: String,
    loc: Loc,
) -> Op {
    b.fail(ShapeError::new(what, shapes, kind, reason), loc)
}

fn check_dims(b: &Builder, what: &'static str, dims: &[i64], loc: Loc) -> Result<(), Op> {
    if dims.iter().any(|d| *d < 0) {
        return Err(fail(
            b,
            what,
            &[],
            ShapeErrorKind::Dimension,
            format!("negative dimension in {dims:?}"),
            loc,
        ));
    }
    Ok(())
}

/// numpy's broadcast of two dimension lists.
fn broadcast(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let n = a.len().max(b.len());
    let pad = |d: &[i64], i: usize| {
        let off = n - d.len();
        if i < off { 1 } else { d[i - off] }
    };
    (0..n)
        .map(|i| match (pad(a, i), pad(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// A validated key: its data and its implementation.
#[derive(Clone)]
struct Key {
    data: Op,
    imp: PrngImpl,
}

impl Key {
    fn of(op: &Op, what: &'static str, loc: Loc) -> Result<Key, Op> {
        let s = op.shape().map_err(|_| op.clone())?;
        match PrngImpl::of_key_shape(&s) {
            Some(imp) => Ok(Key {
                data: op.clone(),
                imp,
            }),
            None => Err(fail(
                &op.builder(),
                what,
                &[&s],
                ShapeErrorKind::Dimension,
                "a PRNG key is u32[2] (threefry2x32, JAX's default) or u32[4] (rbg)".into(),
                loc,
            )),
        }
    }

    fn b(&self) -> Builder {
        self.data.builder()
    }

    /// The two threefry halves of an rbg key.
    fn halves(&self, loc: Loc) -> [Op; 2] {
        let h = |i: i64| self.data.on(loc).slice(&[2 * i], &[2 * i + 2], &[1]);
        [h(0), h(1)]
    }

    /// `jax.random.bits`: random `u32` (or `u64` if `wide`) of `dims`.
    fn bits(&self, wide: bool, dims: &[i64], what: &'static str, loc: Loc) -> Result<Op, Op> {
        check_dims(&self.b(), what, dims, loc)?;
        match self.imp {
            PrngImpl::Threefry2x32 => {
                let (a, c) = self.data.hash_iota(dims, what, loc)?;
                Ok(if wide {
                    let b = self.b();
                    let hi = a.on(loc).convert(U64);
                    let lo = c.on(loc).convert(U64);
                    let sh = b.scalar_of(U64, Scalar::Int(32), loc);
                    hi.bitwise(BitwiseOp::ShiftLeft, &sh, loc)
                        .bitwise(BitwiseOp::Or, &lo, loc)
                } else {
                    a.bitwise(BitwiseOp::Xor, &c, loc)
                })
            }
            PrngImpl::Rbg => {
                // JAX passes the u32[4] key to XLA as u64[2]: word i is
                // key[2i] | key[2i+1] << 32.
                let state = self
                    .data
                    .on(loc)
                    .reshape(&[2, 2])
                    .on(loc)
                    .bitcast_convert(U64);
                let (_, bits) = state.rng_bit_generator(
                    RngAlgorithm::Default,
                    if wide { U64 } else { U32 },
                    dims,
                );
                Ok(bits)
            }
        }
    }

    /// `jax.random.split(key, n)` as an array of `n` keys.
    fn split_array(&self, n: i64, loc: Loc) -> Op {
        match self.imp {
            PrngImpl::Threefry2x32 => self.data.on(loc).threefry_split(n),
            PrngImpl::Rbg => {
                let [h0, h1] = self.halves(loc);
                let (s0, s1) = (h0.on(loc).threefry_split(n), h1.on(loc).threefry_split(n));
                self.b().on(loc).concatenate(&[&s0, &s1], 1)
            }
        }
    }

    /// `jax.random.split(key, n)` as `n` keys.
    fn split(&self, n: i64, loc: Loc) -> Vec<Key> {
        let all = self.split_array(n, loc);
        let w = if self.imp == PrngImpl::Rbg { 4 } else { 2 };
        (0..n)
            .map(|i| Key {
                data: all
                    .on(loc)
                    .slice(&[i, 0], &[i + 1, w], &[1, 1])
                    .on(loc)
                    .reshape(&[w]),
                imp: self.imp,
            })
            .collect()
    }

    fn fold_in(&self, data: &Op, loc: Loc) -> Op {
        match self.imp {
            PrngImpl::Threefry2x32 => self.data.on(loc).threefry_fold_in(data),
            PrngImpl::Rbg => {
                let [h0, h1] = self.halves(loc);
                let (f0, f1) = (
                    h0.on(loc).threefry_fold_in(data),
                    h1.on(loc).threefry_fold_in(data),
                );
                self.b().on(loc).concatenate(&[&f0, &f1], 0)
            }
        }
    }

    /// JAX's `_normal_real` for `f32`: `sqrt(2)·erf_inv(u)` with `u` uniform in
    /// `(-1, 1)`.
    fn normal_f32(&self, dims: &[i64], what: &'static str, loc: Loc) -> Result<Op, Op> {
        Ok(normal_of_bits(&self.bits(false, dims, what, loc)?, loc))
    }

    /// JAX's `_uniform`: `max(lo, floats * (hi - lo) + lo)` with `floats` in
    /// `[0, 1)` from the mantissa bits over 1.0's exponent; `lo`, `hi` are ops of
    /// `ty` broadcasting to `dims`.
    fn uniform(
        &self,
        dims: &[i64],
        ty: ElementType,
        lo: &Op,
        hi: &Op,
        what: &'static str,
        loc: Loc,
    ) -> Result<Op, Op> {
        let bits = self.bits(ty == F64, dims, what, loc)?;
        Ok(uniform_of_bits(&bits, ty, lo, hi, loc))
    }
}

/// JAX's `_uniform` from its random bits (`u32` for `f32`, `u64` for `f64`).
fn uniform_of_bits(bits: &Op, ty: ElementType, lo: &Op, hi: &Op, loc: Loc) -> Op {
    let b = bits.builder();
    let (wide, nbits, nmant, one_bits) = match ty {
        ElementType::F32 => (false, 32, 23, u64::from(1.0f32.to_bits())),
        ElementType::F64 => (true, 64, 52, 1.0f64.to_bits()),
        _ => unreachable!("checked by the callers"),
    };
    let uty = if wide { U64 } else { U32 };
    let shift = b.scalar_of(uty, Scalar::Int(nbits - nmant), loc);
    let one = b.scalar_of(uty, Scalar::UInt(one_bits), loc);
    let floats = bits
        .bitwise(BitwiseOp::ShiftRightLogical, &shift, loc)
        .bitwise(BitwiseOp::Or, &one, loc)
        .on(loc)
        .bitcast_convert(ty)
        .binary_scalar(BinaryOp::Subtract, Scalar::Float(1.0), false, loc);
    let span = hi.binary(BinaryOp::Subtract, lo, loc);
    let x = floats
        .binary(BinaryOp::Multiply, &span, loc)
        .binary(BinaryOp::Add, lo, loc);
    lo.binary(BinaryOp::Maximum, &x, loc)
}

/// A [`Param`] as an op of `ty` whose dimensions broadcast to `dims` (or, if `dims`
/// is `None`, any dimensions), or the error naming `what` and the argument.
fn param_op(
    b: &Builder,
    p: Param,
    ty: ElementType,
    dims: Option<&[i64]>,
    what: &'static str,
    arg: &str,
    loc: Loc,
) -> Result<Op, Op> {
    match p {
        Param::Number(v) => {
            if ty.is_integer() {
                let fits = match v {
                    Scalar::Int(i) => i32::try_from(i).is_ok(),
                    Scalar::UInt(u) => i32::try_from(u).is_ok(),
                    Scalar::Float(_) => false,
                };
                if !fits {
                    return Err(fail(
                        b,
                        what,
                        &[],
                        ShapeErrorKind::ElementType,
                        format!("`{arg}` must be an {ty} integer, got {v}"),
                        loc,
                    ));
                }
            }
            Ok(b.scalar_of(ty, v, loc))
        }
        Param::Array(op) => {
            let s = op.shape().map_err(|_| op.clone())?;
            if s.element_type() != Some(ty) {
                return Err(fail(
                    b,
                    what,
                    &[&s],
                    ShapeErrorKind::ElementType,
                    format!("`{arg}` must be {ty}, got {s}"),
                    loc,
                ));
            }
            if let Some(dims) = dims
                && broadcast(s.dims(), dims).as_deref() != Some(dims)
            {
                return Err(fail(
                    b,
                    what,
                    &[&s],
                    ShapeErrorKind::Dimension,
                    format!("`{arg}` {s} does not broadcast to the sample's dimensions {dims:?}"),
                    loc,
                ));
            }
            Ok(op.clone())
        }
    }
}

fn float_type(
    b: &Builder,
    ty: ElementType,
    allowed: &[ElementType],
    what: &'static str,
    loc: Loc,
) -> Result<(), Op> {
    if allowed.contains(&ty) {
        return Ok(());
    }
    let names: Vec<String> = allowed.iter().map(|t| t.to_string()).collect();
    Err(fail(
        b,
        what,
        &[],
        ShapeErrorKind::ElementType,
        format!("samples {} only, not {ty}", names.join(" or ")),
        loc,
    ))
}

/// JAX's `truncated_normal` from `uniform(a, c)` (a uniform draw between
/// `erf(lower/√2)` and `erf(upper/√2)`): `sqrt(2)·erf_inv(u)` clipped into the
/// open interval `(lower, upper)`.
fn truncated_normal_of(
    b: &Builder,
    lower: &Op,
    upper: &Op,
    loc: Loc,
    uniform: impl FnOnce(&Op, &Op) -> Result<Op, Op>,
) -> Result<Op, Op> {
    // JAX divides by √2; XLA turns that into a product with the f32 1/√2.
    let inv_sqrt2 = f32c(b, 1.0 / std::f32::consts::SQRT_2, loc);
    let a = erf_f32(&lower.binary(BinaryOp::Multiply, &inv_sqrt2, loc), loc);
    let c = erf_f32(&upper.binary(BinaryOp::Multiply, &inv_sqrt2, loc), loc);
    let u = uniform(&a, &c)?;
    let out = erf_inv_f32(&u, loc).binary(
        BinaryOp::Multiply,
        &f32c(b, std::f32::consts::SQRT_2, loc),
        loc,
    );
    let lo = next_after_f32(lower, true, loc);
    let hi = next_after_f32(upper, false, loc);
    Ok(hi.binary(
        BinaryOp::Minimum,
        &lo.binary(BinaryOp::Maximum, &out, loc),
        loc,
    ))
}

/// JAX's `_normal_real` for `f32` from its random bits: `u` uniform in
/// `(nextafter(-1, 0), 1)`, then `sqrt(2)·erf_inv(u)`.
fn normal_of_bits(bits: &Op, loc: Loc) -> Op {
    let b = bits.builder();
    let lo = f32c(&b, f32::from_bits(0xbf7f_ffff), loc);
    let u = uniform_of_bits(bits, F32, &lo, &f32c(&b, 1.0, loc), loc);
    erf_inv_f32(&u, loc).binary(
        BinaryOp::Multiply,
        &f32c(&b, std::f32::consts::SQRT_2, loc),
        loc,
    )
}

/// `flat` cut into consecutive parts of `counts` elements, each reshaped to its
/// dims.
fn cut<'a>(flat: &Op, dims: impl Iterator<Item = &'a [i64]>, counts: &[i64], loc: Loc) -> Vec<Op> {
    let mut at = 0;
    dims.zip(counts)
        .map(|(dims, n)| {
            let part = flat
                .on(loc)
                .slice(&[at], &[at + n], &[1])
                .on(loc)
                .reshape(dims);
            at += n;
            part
        })
        .collect()
}

/// An `f32` scalar bound as the samplers make one from a number (`param_op`).
fn scalar_f32(b: &Builder, v: f64, loc: Loc) -> Op {
    b.scalar_of(F32, Scalar::Float(v), loc)
}

fn f32c(b: &Builder, v: f32, loc: Loc) -> Op {
    b.scalar_of(F32, Scalar::Float(v.into()), loc)
}

/// `erf_inv` for `f32`, the op sequence JAX's `chlo.erf_inv` becomes in XLA (Giles'
/// single-precision approximation: a degree-8 polynomial in `w = -log1p(-x²)` or
/// in `sqrt(w)`, switched at `w = 5`), so the values equal JAX's.
pub(crate) fn erf_inv_f32(x: &Op, loc: Loc) -> Op {
    const SMALL: [f32; 9] = [
        2.810_226_4e-8,
        3.432_739_4e-7,
        -3.523_387_7e-6,
        -4.391_506_5e-6,
        0.000_218_580_87,
        -0.001_253_725,
        -0.004_177_681_6,
        0.246_640_73,
        1.501_409_4,
    ];
    const LARGE: [f32; 9] = [
        -0.000_200_214_26,
        0.000_100_950_56,
        0.001_349_343_2,
        -0.003_673_428_4,
        0.005_739_507_7,
        -0.007_622_461_3,
        0.009_438_870_5,
        1.001_674,
        2.832_976_8,
    ];
    let b = x.builder();
    let w = x
        .binary(BinaryOp::Multiply, &x.unary(UnaryOp::Negate, loc), loc)
        .unary(UnaryOp::LogPlusOne, loc)
        .unary(UnaryOp::Negate, loc);
    let small = w.on(loc).compare(&f32c(&b, 5.0, loc), Comparison::Lt);
    let t = b.on(loc).select(
        &small,
        &w.binary_scalar(BinaryOp::Subtract, Scalar::Float(2.5), false, loc),
        &w.unary(UnaryOp::Sqrt, loc).binary_scalar(
            BinaryOp::Subtract,
            Scalar::Float(3.0),
            false,
            loc,
        ),
    );
    let coef = |i: usize| {
        b.on(loc)
            .select(&small, &f32c(&b, SMALL[i], loc), &f32c(&b, LARGE[i], loc))
    };
    let mut p = coef(0);
    for i in 1..9 {
        p = coef(i).binary(BinaryOp::Add, &p.binary(BinaryOp::Multiply, &t, loc), loc);
    }
    let r = p.binary(BinaryOp::Multiply, x, loc);
    let at_one = x
        .unary(UnaryOp::Abs, loc)
        .on(loc)
        .compare(&f32c(&b, 1.0, loc), Comparison::Eq);
    let inf = x.binary(BinaryOp::Multiply, &f32c(&b, f32::INFINITY, loc), loc);
    b.on(loc).select(&at_one, &inf, &r)
}

/// `erf` for `f32` as XLA's CPU backend computes its `erf` op inside a fusion,
/// which is where JAX's `truncated_normal` meets it (`erf(lower · 1/√2)`): the
/// rational approximation `x·P(x²)/Q(x²)` of Eigen's `generic_fast_erf_float`,
/// evaluated with fused multiply-adds, and `±1` from `|x| ≥ 3.7439…` (=
/// erfinv(1 − 2⁻²³)). (A lone `erf` op, outside any fusion, switches to `±1` only
/// from 3.8325…; the two differ for 3.7439 ≤ |x| < 3.8325.) Built from ops until
/// the crate has XLA's `erf` op. Each fused multiply-add `a·b + c` of `f32` values
/// is computed in `f64`: the product is exact, the sum is rounded to odd (of the
/// two `f64` neighbours of the exact sum, the one whose last bit is 1, found with
/// Knuth's two-sum), and the conversion to `f32` then rounds as the fused operation
/// does (53 ≥ 24 + 2 bits: Boldo and Melquiond's round-to-odd). The result equals
/// the fused evaluation for every `f32` input (checked exhaustively on the host).
fn erf_f32(x: &Op, loc: Loc) -> Op {
    // The last coefficient is fitted: one ulp below 2/√π as an f32.
    #[allow(clippy::approx_constant)]
    const ALPHA: [f32; 5] = [
        0.000_229_050_65,
        0.003_408_291,
        0.050_955_694,
        0.185_208_32,
        1.128_379_1,
    ];
    const BETA: [f32; 7] = [
        -1.179_160_3e-7,
        0.000_023_547_966,
        0.001_017_962_6,
        0.014_070_47,
        0.110_985_05,
        0.497_469_25,
        1.0,
    ];
    let b = x.builder();
    let x2 = x.binary(BinaryOp::Multiply, x, loc);
    let x2w = x2.on(loc).convert(F64);
    let c64 = |v: f32| b.scalar_of(F64, Scalar::Float(v.into()), loc);
    let s64 = |v: i64| b.scalar_of(ElementType::S64, Scalar::Int(v), loc);
    // fma(x2, acc, c) as f32 through f64 rounded to odd (see above).
    let fma = |acc: &Op, c: f32| {
        let (p, c) = (x2w.binary(BinaryOp::Multiply, acc, loc), c64(c));
        let s = p.binary(BinaryOp::Add, &c, loc);
        let bb = s.binary(BinaryOp::Subtract, &p, loc);
        let e = p
            .binary(
                BinaryOp::Subtract,
                &s.binary(BinaryOp::Subtract, &bb, loc),
                loc,
            )
            .binary(BinaryOp::Add, &c.binary(BinaryOp::Subtract, &bb, loc), loc);
        let bits = s.on(loc).bitcast_convert(ElementType::S64);
        let zero = c64(0.0);
        let even = bits
            .bitwise(BitwiseOp::And, &s64(1), loc)
            .on(loc)
            .compare(&s64(0), Comparison::Eq);
        let inexact = e.on(loc).compare(&zero, Comparison::Ne);
        // One step toward the exact sum: away from zero if e has s's sign.
        let away = e
            .on(loc)
            .compare(&zero, Comparison::Gt)
            .on(loc)
            .compare(&s.on(loc).compare(&zero, Comparison::Gt), Comparison::Eq);
        let step = b.on(loc).select(&away, &s64(1), &s64(-1));
        let odd = bits
            .binary(BinaryOp::Add, &step, loc)
            .on(loc)
            .bitcast_convert(F64);
        let fix = inexact.bitwise(BitwiseOp::And, &even, loc);
        let r = b.on(loc).select(&fix, &odd, &s).on(loc).convert(F32);
        // The barrier keeps XLA from folding this f64 → f32 → f64 pair away (it
        // may when excess precision is allowed), which would skip the rounding.
        b.optimization_barrier(&[&r]).remove(0)
    };
    let horner = |coefs: &[f32]| {
        let mut acc = f32c(&b, coefs[0], loc);
        for c in &coefs[1..] {
            let wide = acc.on(loc).convert(F64);
            acc = fma(&wide, *c);
        }
        acc
    };
    let p = x.binary(BinaryOp::Multiply, &horner(&ALPHA), loc);
    let q = horner(&BETA);
    let big = f32c(&b, 3.743_921_2, loc)
        .on(loc)
        .compare(&x.unary(UnaryOp::Abs, loc), Comparison::Le);
    let neg = x.on(loc).compare(&f32c(&b, 0.0, loc), Comparison::Lt);
    let sign = b
        .on(loc)
        .select(&neg, &f32c(&b, -1.0, loc), &f32c(&b, 1.0, loc));
    b.on(loc)
        .select(&big, &sign, &p.binary(BinaryOp::Divide, &q, loc))
}

/// `nextafter(x, ±inf)` for `f32` (`up` toward `+inf`), from the bits.
fn next_after_f32(x: &Op, up: bool, loc: Loc) -> Op {
    let b = x.builder();
    let s32 = |v: i64| b.scalar_of(S32, Scalar::Int(v), loc);
    let bits = x.on(loc).bitcast_convert(S32);
    let target = f32c(&b, if up { f32::INFINITY } else { f32::NEG_INFINITY }, loc);
    let is_zero = bits
        .bitwise(BitwiseOp::And, &s32(0x7fff_ffff), loc)
        .on(loc)
        .compare(&s32(0), Comparison::Eq);
    // Away from zero adds one to the magnitude's bits, toward zero takes one.
    let positive = bits.on(loc).compare(&s32(0), Comparison::Ge);
    let step = b.on(loc).select(
        &positive,
        &s32(if up { 1 } else { -1 }),
        &s32(if up { -1 } else { 1 }),
    );
    let moved = bits.binary(BinaryOp::Add, &step, loc);
    let tiny = s32(if up {
        1
    } else {
        i64::from(0x8000_0001u32 as i32)
    });
    let r = b
        .on(loc)
        .select(&is_zero, &tiny, &moved)
        .on(loc)
        .bitcast_convert(F32);
    let at_target = x.on(loc).compare(&target, Comparison::Eq);
    let r = b.on(loc).select(&at_target, x, &r);
    let nan = x.on(loc).compare(x, Comparison::Ne);
    b.on(loc).select(&nan, x, &r)
}

/// JAX's `_shuffle`: sorts `x` along `axis` by fresh random `u32` keys, as many
/// rounds as JAX takes for `size` elements (a round more above 2^(32/3) elements,
/// so that ties in the keys leave no bias).
fn shuffle_core(
    key: &Key,
    x: &Op,
    axis: i64,
    size: i64,
    what: &'static str,
    loc: Loc,
) -> Result<Op, Op> {
    let rounds = (3.0 * (size.max(1) as f64).ln() / (u32::MAX as f64).ln()).ceil() as usize;
    let dims = x.dims().map_err(|_| x.clone())?;
    let (mut key, mut x) = (key.clone(), x.clone());
    for _ in 0..rounds {
        let mut ks = key.split(2, loc);
        let sub = ks.pop().expect("two keys");
        key = ks.pop().expect("two keys");
        let sort_keys = sub.bits(false, &dims, what, loc)?;
        let b = x.builder();
        x = b
            .sort(&[&sort_keys, &x], axis, true, |l, r| {
                l[0].on(loc).compare(&r[0], Comparison::Lt)
            })
            .pop()
            .expect("two results");
    }
    Ok(x)
}

/// The indices of the `k` largest entries along the last axis, largest first, the
/// smaller index first among equals (XLA's `TopK` on the CPU: floats in their total
/// order, `-0 < +0`).
fn top_k_indices(x: &Op, k: i64, loc: Loc) -> Op {
    let b = x.builder();
    let dims = x.dims().expect("an array");
    let last = dims.len() as i64 - 1;
    let (ity, max) = match x.element_type() {
        Ok(ElementType::F64) => (ElementType::S64, i64::MAX),
        _ => (S32, i64::from(i32::MAX)),
    };
    // Floats as integers in the same order: negative floats count down from the top.
    let bits = x.on(loc).bitcast_convert(ity);
    let zero = b.scalar_of(ity, Scalar::Int(0), loc);
    let flipped = b
        .scalar_of(ity, Scalar::Int(max), loc)
        .binary(BinaryOp::Subtract, &bits, loc);
    let order = b.on(loc).select(
        &bits.on(loc).compare(&zero, Comparison::Lt),
        &flipped,
        &bits,
    );
    let idx = b.iota(S32, &dims, last);
    let sorted = b.sort(&[&order, &idx], last, true, |l, r| {
        l[0].on(loc).compare(&r[0], Comparison::Gt)
    });
    let mut lim = dims.clone();
    lim[last as usize] = k;
    sorted[1]
        .on(loc)
        .slice(&vec![0; dims.len()], &lim, &vec![1; dims.len()])
}

impl Builder {
    /// `key.normal(dims, F32)` for each `(key, dims)`: the same values, bit for
    /// bit, drawn by one Threefry hash over all the draws' counters (each element
    /// hashed under its own draw's key), one uniform-to-normal transform, then cut
    /// back into the draws. Each draw's values depend only on its key and counter,
    /// so batching changes nothing but the program: one hash loop to compile
    /// instead of one per draw (six draws of PPO's kernels' sizes, `[64, 4]` to
    /// `[64, 64]`: 0.79 s of compile against 0.31 s on a 2-core machine, with
    /// loops compiled as single kernels), which is what a program that
    /// initialises many parameters, each from its own key, spends its compile on.
    ///
    /// Keys that are not threefry `u32[2]` (rbg keys), bad dims, or fewer than two
    /// draws: each drawn on its own, with [`Op::normal`]'s errors.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType};
    /// let b = Builder::new("init");
    /// let [k0, k1] = b.prng_key(0).split_keys();
    /// let z = b.normal_many(&[(&k0, &[64, 4]), (&k1, &[64, 64])]);
    /// assert_eq!(z[1].dims()?, vec![64, 64]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn normal_many(&self, draws: &[(&Op, &[i64])]) -> Vec<Op> {
        let loc = Location::caller();
        let Some((bits, counts)) = self.bits_many(draws, loc) else {
            return draws
                .iter()
                .map(|(k, dims)| k.on(loc).normal(dims, F32))
                .collect();
        };
        // The transform over all the draws at once, then cut.
        cut(
            &normal_of_bits(&bits, loc),
            draws.iter().map(|d| d.1),
            &counts,
            loc,
        )
    }

    /// `key.uniform(dims, F32, lo, hi)` for each `(key, dims, lo, hi)`: the same
    /// values, bit for bit, their bits drawn by one Threefry hash as
    /// [`normal_many`](Builder::normal_many) draws them (each draw's transform
    /// into `[lo, hi)` on its own part). The same fallback: rbg keys, bad dims or
    /// fewer than two draws are drawn one by one, with `uniform`'s errors.
    #[track_caller]
    pub fn uniform_many(&self, draws: &[(&Op, &[i64], f64, f64)]) -> Vec<Op> {
        let loc = Location::caller();
        let keys: Vec<(&Op, &[i64])> = draws.iter().map(|d| (d.0, d.1)).collect();
        let Some((bits, counts)) = self.bits_many(&keys, loc) else {
            return draws
                .iter()
                .map(|(k, dims, lo, hi)| k.on(loc).uniform(dims, F32, *lo, *hi))
                .collect();
        };
        cut(&bits, keys.iter().map(|d| d.1), &counts, loc)
            .iter()
            .zip(draws)
            .map(|(bits, (_, _, lo, hi))| {
                let (lo, hi) = (scalar_f32(self, *lo, loc), scalar_f32(self, *hi, loc));
                uniform_of_bits(bits, F32, &lo, &hi, loc)
            })
            .collect()
    }

    /// `key.truncated_normal(lower, upper, dims)` for each `(key, lower, upper,
    /// dims)`: the same values, bit for bit, their bits drawn by one Threefry
    /// hash as [`normal_many`](Builder::normal_many) draws them. The same
    /// fallback, with `truncated_normal`'s errors.
    #[track_caller]
    pub fn truncated_normal_many(&self, draws: &[(&Op, f64, f64, &[i64])]) -> Vec<Op> {
        let loc = Location::caller();
        let keys: Vec<(&Op, &[i64])> = draws.iter().map(|d| (d.0, d.3)).collect();
        let Some((bits, counts)) = self.bits_many(&keys, loc) else {
            return draws
                .iter()
                .map(|(k, lower, upper, dims)| k.on(loc).truncated_normal(*lower, *upper, dims))
                .collect();
        };
        cut(&bits, keys.iter().map(|d| d.1), &counts, loc)
            .iter()
            .zip(draws)
            .map(|(bits, (_, lower, upper, _))| {
                let (lower, upper) = (scalar_f32(self, *lower, loc), scalar_f32(self, *upper, loc));
                truncated_normal_of(self, &lower, &upper, loc, |a, c| {
                    Ok(uniform_of_bits(bits, F32, a, c, loc))
                })
                .unwrap_or_else(|f| f)
            })
            .collect()
    }

    /// The `u32` bits of `key.random_bits(dims)` for every `(key, dims)`, by one
    /// hash: the draws' counters `0..n` laid end to end, each element hashed under
    /// its own draw's key words (the hash is elementwise in key and counter).
    /// Returns the flat bits and each draw's count; `None` (draw one by one) for
    /// fewer than two draws, a key that is not a threefry `u32[2]`, or dims that
    /// are negative, empty of elements or past 2³² elements.
    fn bits_many(&self, draws: &[(&Op, &[i64])], loc: Loc) -> Option<(Op, Vec<i64>)> {
        if draws.len() < 2 {
            return None;
        }
        let words: Vec<(Op, Op, i64)> = draws
            .iter()
            .map(|(k, dims)| {
                // Checked without recording an error: a bad key is left to the
                // one-by-one draws, which name their own sampler.
                let imp = PrngImpl::of_key_shape(&k.shape().ok()?)?;
                let n = dims
                    .iter()
                    .try_fold(1i64, |a, d| (*d >= 0).then(|| a.checked_mul(*d)).flatten())?;
                let threefry = imp == PrngImpl::Threefry2x32 && n > 0 && n <= u32::MAX as i64;
                let (k0, k1) = threefry.then(|| k.key_words("random_bits", loc).ok())??;
                Some((k0, k1, n))
            })
            .collect::<Option<_>>()?;
        let total: i64 = words.iter().map(|w| w.2).sum();
        let cat = |parts: Vec<Op>| {
            let refs: Vec<&Op> = parts.iter().collect();
            self.on(loc).concatenate(&refs, 0)
        };
        let k0 = cat(words
            .iter()
            .map(|(k, _, n)| k.on(loc).broadcast_to(&[*n]))
            .collect());
        let k1 = cat(words
            .iter()
            .map(|(_, k, n)| k.on(loc).broadcast_to(&[*n]))
            .collect());
        let lo = cat(words
            .iter()
            .map(|(_, _, n)| self.on(loc).iota(U32, &[*n], 0))
            .collect());
        let hi = self
            .scalar_of(U32, Scalar::Int(0), loc)
            .on(loc)
            .broadcast_to(&[total]);
        let (a, c) = super::threefry::threefry2x32(&k0, &k1, &hi, &lo, loc);
        Some((
            a.bitwise(BitwiseOp::Xor, &c, loc),
            words.iter().map(|w| w.2).collect(),
        ))
    }

    /// `jax.random.key_data(jax.random.key(seed, impl='rbg'))`: the rbg key
    /// `[0, seed, 0, seed]` (`u32[4]`), whose samplers take their bits from XLA's
    /// `rng-bit-generator` (see [the module docs](crate::ops::sampling)).
    #[track_caller]
    pub fn rbg_key(&self, seed: u32) -> Op {
        self.constant_vec(&[0, seed, 0, seed])
    }
}

impl Op {
    /// `jax.random.split(key, n)`: `n` new keys of this key's kind, `u32[n, 2]`
    /// (threefry) or `u32[n, 4]` (rbg).
    #[track_caller]
    pub fn random_split(&self, n: i64) -> Op {
        let loc = Location::caller();
        match Key::of(self, "random_split", loc) {
            Ok(k) if n >= 0 => k.split_array(n, loc),
            Ok(_) => fail(
                &self.builder(),
                "random_split",
                &[],
                ShapeErrorKind::Dimension,
                format!("cannot split into {n} keys"),
                loc,
            ),
            Err(f) => f,
        }
    }

    /// `rng, key = jax.random.split(rng)` as `let [rng, key] = rng.split_keys();`:
    /// `N` new keys of this key's kind (rows of [`random_split`](Self::random_split)).
    /// (`split` is numpy's `jnp.split` of an array.)
    ///
    /// ```
    /// # use xlaclient_core::{Builder, ElementType};
    /// let b = Builder::new("keys");
    /// let rng = b.prng_key(0);
    /// let [rng, key] = rng.split_keys();
    /// let x = key.uniform(&[3], ElementType::F32, 0.0, 1.0);
    /// let [_a, _b, _c] = rng.split_keys();
    /// assert_eq!(x.dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn split_keys<const N: usize>(&self) -> [Op; N] {
        let loc = Location::caller();
        let keys = self.on(loc).random_split(N as i64);
        let width = keys
            .dims()
            .ok()
            .and_then(|d| d.get(1).copied())
            .unwrap_or(2);
        std::array::from_fn(|i| {
            let i = i as i64;
            keys.on(loc)
                .slice(&[i, 0], &[i + 1, width], &[1, 1])
                .on(loc)
                .reshape(&[width])
        })
    }

    /// `jax.random.fold_in(key, data)` with a Rust number as the data.
    #[track_caller]
    pub fn fold_in(&self, data: u32) -> Op {
        let loc = Location::caller();
        let d = self
            .builder()
            .scalar_of(ElementType::U32, Scalar::UInt(data.into()), loc);
        self.on(loc).random_fold_in(&d)
    }

    /// `jax.random.fold_in(key, data)`: a new key of this key's kind mixing in
    /// `data` (a `u32` or `s32` scalar).
    #[track_caller]
    pub fn random_fold_in(&self, data: &Op) -> Op {
        let loc = Location::caller();
        match Key::of(self, "random_fold_in", loc) {
            Ok(k) => k.fold_in(data, loc),
            Err(f) => f,
        }
    }

    /// `jax.random.bits(key, dims, dtype)`: random `u32` or `u64` of `dims`.
    #[track_caller]
    pub fn random_bits(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        let go = || {
            let k = Key::of(self, "random_bits", loc)?;
            float_type(&self.builder(), ty, &[U32, U64], "random_bits", loc)?;
            k.bits(ty == U64, dims, "random_bits", loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.uniform(key, dims, ty, minval=lo, maxval=hi)`: samples of `ty`
    /// (`f32` or `f64`) in `[lo, hi)`, with the bounds broadcasting to `dims`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType};
    /// let b = Builder::new("draw");
    /// let key = b.prng_key(42); // jax.random.PRNGKey(42)
    /// let keys = key.random_split(2);
    /// let k1 = keys.slice(&[0, 0], &[1, 2], &[1, 1]).reshape(&[2]);
    /// let u = k1.uniform(&[3, 4], ElementType::F32, -1.0, 1.0);
    /// let z = key.normal(&[1000], ElementType::F32);
    /// let i = key.randint(&[8], 0, 10);
    /// assert_eq!(u.dims()?, vec![3, 4]);
    /// assert_eq!(z.dims()?, vec![1000]);
    /// assert_eq!(i.element_type()?, ElementType::S32);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn uniform<'a>(
        &self,
        dims: &[i64],
        ty: ElementType,
        lo: impl Into<Param<'a>>,
        hi: impl Into<Param<'a>>,
    ) -> Op {
        let loc = Location::caller();
        let (lo, hi) = (lo.into(), hi.into());
        let go = || {
            let k = Key::of(self, "uniform", loc)?;
            let b = self.builder();
            float_type(&b, ty, &[F32, F64], "uniform", loc)?;
            check_dims(&b, "uniform", dims, loc)?;
            let lo = param_op(&b, lo, ty, Some(dims), "uniform", "lo", loc)?;
            let hi = param_op(&b, hi, ty, Some(dims), "uniform", "hi", loc)?;
            k.uniform(dims, ty, &lo, &hi, "uniform", loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.normal(key, dims)`: standard normal `f32` samples,
    /// `sqrt(2)·erf_inv(u)` with `u` uniform in `(-1, 1)`.
    #[track_caller]
    pub fn normal(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        let go = || {
            let k = Key::of(self, "normal", loc)?;
            let b = self.builder();
            float_type(&b, ty, &[F32], "normal", loc)?;
            check_dims(&b, "normal", dims, loc)?;
            k.normal_f32(dims, "normal", loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.truncated_normal(key, lower, upper, dims)`: standard normal `f32`
    /// samples conditioned on `lower < x < upper` (bounds may be infinite, and
    /// broadcast to `dims`), by inverting the CDF between `erf(lower/√2)` and
    /// `erf(upper/√2)`; the result is clipped into the open interval.
    #[track_caller]
    pub fn truncated_normal<'a>(
        &self,
        lower: impl Into<Param<'a>>,
        upper: impl Into<Param<'a>>,
        dims: &[i64],
    ) -> Op {
        let loc = Location::caller();
        let (lower, upper) = (lower.into(), upper.into());
        let go = || {
            let k = Key::of(self, "truncated_normal", loc)?;
            let b = self.builder();
            check_dims(&b, "truncated_normal", dims, loc)?;
            let lower = param_op(&b, lower, F32, Some(dims), "truncated_normal", "lower", loc)?;
            let upper = param_op(&b, upper, F32, Some(dims), "truncated_normal", "upper", loc)?;
            truncated_normal_of(&b, &lower, &upper, loc, |a, c| {
                k.uniform(dims, F32, a, c, "truncated_normal", loc)
            })
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.randint(key, dims, lo, hi)`: `s32` samples in `[lo, hi)` (all
    /// `lo` where `hi <= lo`), bounds broadcasting to `dims`. As in JAX, each value
    /// is a 64-bit draw (two 32-bit words from two split keys) reduced modulo the
    /// span, so each value's probability is within 2⁻⁶⁴ of `1/span` for any span.
    #[track_caller]
    pub fn randint<'a>(
        &self,
        dims: &[i64],
        lo: impl Into<Param<'a>>,
        hi: impl Into<Param<'a>>,
    ) -> Op {
        let loc = Location::caller();
        let (lo, hi) = (lo.into(), hi.into());
        let go = || {
            let k = Key::of(self, "randint", loc)?;
            let b = self.builder();
            check_dims(&b, "randint", dims, loc)?;
            let lo = param_op(&b, lo, S32, Some(dims), "randint", "lo", loc)?;
            let hi = param_op(&b, hi, S32, Some(dims), "randint", "hi", loc)?;
            self.randint_core(&k, dims, &lo, &hi, loc)
        };
        go().unwrap_or_else(|f| f)
    }

    fn randint_core(&self, k: &Key, dims: &[i64], lo: &Op, hi: &Op, loc: Loc) -> Result<Op, Op> {
        let b = self.builder();
        let ks = k.split(2, loc);
        let higher = ks[0].bits(false, dims, "randint", loc)?;
        let lower = ks[1].bits(false, dims, "randint", loc)?;
        let u = |v: i64| b.scalar_of(U32, Scalar::Int(v), loc);
        let span = hi.binary(BinaryOp::Subtract, lo, loc).on(loc).convert(U32);
        let empty = hi.on(loc).compare(lo, Comparison::Le);
        let span = b.on(loc).select(&empty, &u(1), &span);
        // 2^32 mod span, as (2^16 mod span)^2 mod span.
        let m = u(1 << 16).binary(BinaryOp::Remainder, &span, loc);
        let m = m
            .binary(BinaryOp::Multiply, &m, loc)
            .binary(BinaryOp::Remainder, &span, loc);
        let off = higher
            .binary(BinaryOp::Remainder, &span, loc)
            .binary(BinaryOp::Multiply, &m, loc)
            .binary(
                BinaryOp::Add,
                &lower.binary(BinaryOp::Remainder, &span, loc),
                loc,
            )
            .binary(BinaryOp::Remainder, &span, loc);
        Ok(lo.binary(BinaryOp::Add, &off.on(loc).convert(S32), loc))
    }

    /// `jax.random.bernoulli(key, p, dims)`: `pred` samples, true with probability
    /// `p` (`uniform < p`; `p` is `f32`, or an `f32`/`f64` op broadcasting to
    /// `dims`).
    #[track_caller]
    pub fn bernoulli<'a>(&self, p: impl Into<Param<'a>>, dims: &[i64]) -> Op {
        let loc = Location::caller();
        let p = p.into();
        let go = || {
            let k = Key::of(self, "bernoulli", loc)?;
            let b = self.builder();
            check_dims(&b, "bernoulli", dims, loc)?;
            let ty = match p {
                Param::Array(op) => match op.element_type() {
                    Ok(t @ (F32 | F64)) => t,
                    _ => F32,
                },
                Param::Number(_) => F32,
            };
            let p = param_op(&b, p, ty, Some(dims), "bernoulli", "p", loc)?;
            let u = k.uniform(
                dims,
                ty,
                &b.scalar_of(ty, Scalar::Float(0.0), loc),
                &b.scalar_of(ty, Scalar::Float(1.0), loc),
                "bernoulli",
                loc,
            )?;
            Ok(u.on(loc).compare(&p, Comparison::Lt))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.gumbel(key, dims, ty)`: standard Gumbel samples of `ty` (`f32`
    /// or `f64`), `-log(-log(u))` with `u` uniform in `[tiny, 1)` (JAX's default
    /// "low" mode).
    #[track_caller]
    pub fn gumbel(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        let go = || {
            let k = Key::of(self, "gumbel", loc)?;
            let b = self.builder();
            float_type(&b, ty, &[F32, F64], "gumbel", loc)?;
            check_dims(&b, "gumbel", dims, loc)?;
            self.gumbel_core(&k, dims, ty, loc)
        };
        go().unwrap_or_else(|f| f)
    }

    fn gumbel_core(&self, k: &Key, dims: &[i64], ty: ElementType, loc: Loc) -> Result<Op, Op> {
        let b = self.builder();
        let tiny = if ty == F64 {
            f64::MIN_POSITIVE
        } else {
            f32::MIN_POSITIVE.into()
        };
        let lo = b.scalar_of(ty, Scalar::Float(tiny), loc);
        let u = k.uniform(
            dims,
            ty,
            &lo,
            &b.scalar_of(ty, Scalar::Float(1.0), loc),
            "gumbel",
            loc,
        )?;
        Ok(u.unary(UnaryOp::Log, loc)
            .unary(UnaryOp::Negate, loc)
            .unary(UnaryOp::Log, loc)
            .unary(UnaryOp::Negate, loc))
    }

    /// `jax.random.categorical(key, logits, axis)`: one `s32` category index per
    /// distribution, the distributions being the slices of `logits` along `axis`
    /// (unnormalized log-probabilities; `-inf` never drawn). Gumbel-max:
    /// `argmax(logits + gumbel)`.
    #[track_caller]
    pub fn categorical(&self, logits: &Op, axis: i64) -> Op {
        self.categorical_core(logits, axis, None, true, Location::caller())
    }

    /// `jax.random.categorical(key, logits, axis, shape, replace)`: samples of
    /// `shape`, which ends with the batch dimensions (`logits`' without `axis`,
    /// broadcast) after leading sample dimensions. Without replacement
    /// (`replace = false`, the Gumbel top-k trick) the leading dimensions hold at
    /// most as many samples as there are categories, all distinct.
    #[track_caller]
    pub fn categorical_with(&self, logits: &Op, axis: i64, shape: &[i64], replace: bool) -> Op {
        self.categorical_core(logits, axis, Some(shape), replace, Location::caller())
    }

    fn categorical_core(
        &self,
        logits: &Op,
        axis: i64,
        shape: Option<&[i64]>,
        replace: bool,
        loc: Loc,
    ) -> Op {
        const WHAT: &str = "categorical";
        let go = || {
            let k = Key::of(self, WHAT, loc)?;
            let b = self.builder();
            let s = logits.shape().map_err(|_| logits.clone())?;
            let ty = match s.element_type() {
                Some(t @ (F32 | F64)) if s.rank() >= 1 => t,
                _ => {
                    return Err(fail(
                        &b,
                        WHAT,
                        &[&s],
                        ShapeErrorKind::ElementType,
                        "logits are an f32 or f64 array of rank 1 or more".into(),
                        loc,
                    ));
                }
            };
            let rank = s.rank();
            let ax = super::resolve_axis(WHAT, &s, axis).map_err(|e| b.fail(e, loc))?;
            let ldims = s.dims().to_vec();
            let mut batch = ldims.clone();
            batch.remove(ax);
            let shape = shape.map(<[i64]>::to_vec).unwrap_or_else(|| batch.clone());
            check_dims(&b, WHAT, &shape, loc)?;
            if shape.len() < batch.len() || broadcast(&shape, &batch).as_deref() != Some(&shape[..])
            {
                return Err(fail(
                    &b,
                    WHAT,
                    &[&s],
                    ShapeErrorKind::Dimension,
                    format!(
                        "shape {shape:?} must end with the batch dimensions {batch:?} (or broadcast them)"
                    ),
                    loc,
                ));
            }
            let np = shape.len() - batch.len();
            let prefix = &shape[..np];
            if replace {
                let mut gdims = prefix.to_vec();
                let mut tail = shape[np..].to_vec();
                tail.insert(ax, ldims[ax]);
                gdims.extend(tail);
                let g = self.gumbel_core(&k, &gdims, ty, loc)?;
                let mut edims = vec![1; np];
                edims.extend(&ldims);
                let x = g.binary(BinaryOp::Add, &logits.on(loc).reshape(&edims), loc);
                Ok(x.argmax((np + ax) as i64))
            } else {
                let n: i64 = prefix.iter().product();
                if n > ldims[ax] {
                    return Err(fail(
                        &b,
                        WHAT,
                        &[&s],
                        ShapeErrorKind::Dimension,
                        format!(
                            "{n} samples without replacement from {} categories",
                            ldims[ax]
                        ),
                        loc,
                    ));
                }
                if shape[np..] != batch[..] {
                    return Err(fail(
                        &b,
                        WHAT,
                        &[&s],
                        ShapeErrorKind::Dimension,
                        format!(
                            "without replacement, shape {shape:?} must end with the batch dimensions {batch:?}"
                        ),
                        loc,
                    ));
                }
                let g = self.gumbel_core(&k, &ldims, ty, loc)?;
                let x = logits.binary(BinaryOp::Add, &g, loc);
                // Move `axis` last, take the top n, then move the samples first.
                let mut perm: Vec<i64> = (0..rank as i64).filter(|i| *i != ax as i64).collect();
                perm.push(ax as i64);
                let top = top_k_indices(&x.on(loc).transpose(&perm), n, loc);
                let mut back = vec![batch.len() as i64];
                back.extend(0..batch.len() as i64);
                Ok(top.on(loc).transpose(&back).on(loc).reshape(&shape))
            }
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.permutation(key, n)`: a random ordering of `0..n` (`s32[n]`),
    /// by sorting on random keys (twice above 2^(32/3) elements, as JAX).
    #[track_caller]
    pub fn permutation(&self, n: i64) -> Op {
        let loc = Location::caller();
        let go = || {
            let k = Key::of(self, "permutation", loc)?;
            let b = self.builder();
            check_dims(&b, "permutation", &[n], loc)?;
            shuffle_core(&k, &b.iota(S32, &[n], 0), 0, n, "permutation", loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.permutation(key, x, axis, independent)`: `x` with its slices
    /// along `axis` in a random order — the same order for every slice, or, if
    /// `independent`, each 1-D lane along `axis` shuffled on its own.
    #[track_caller]
    pub fn shuffle(&self, x: &Op, axis: i64, independent: bool) -> Op {
        let loc = Location::caller();
        let go = || {
            let k = Key::of(self, "shuffle", loc)?;
            let b = self.builder();
            let s = x.shape().map_err(|_| x.clone())?;
            if !s.is_array() || s.rank() == 0 {
                return Err(fail(
                    &b,
                    "shuffle",
                    &[&s],
                    ShapeErrorKind::Rank,
                    "shuffles an array of rank 1 or more".into(),
                    loc,
                ));
            }
            let ax = super::resolve_axis("shuffle", &s, axis).map_err(|e| b.fail(e, loc))?;
            let size: i64 = s.dims().iter().product();
            if independent || s.rank() == 1 {
                return shuffle_core(&k, x, ax as i64, size, "shuffle", loc);
            }
            let n = s.dims()[ax];
            let ind = shuffle_core(&k, &b.iota(S32, &[n], 0), 0, n, "shuffle", loc)?;
            Ok(x.take(&ind, ax as i64))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.choice(key, a, dims, replace, p)`: `dims` draws from `a` — the
    /// integers `0..n` (`s32`), or the slices of an array along an axis (the result
    /// then has the array's dimensions with that axis replaced by `dims`). `p`
    /// (`f32`/`f64`, one per entry) weights the draws; without replacement no entry
    /// is drawn twice. As in JAX: with `p` and replacement, the inverse of the
    /// cumulative sum; with `p` and no replacement, the Gumbel top-k trick; without
    /// `p`, `randint` or a permutation.
    #[track_caller]
    pub fn choice<'a>(
        &self,
        a: impl Into<Population<'a>>,
        dims: &[i64],
        replace: bool,
        p: Option<&Op>,
    ) -> Op {
        let loc = Location::caller();
        let a = a.into();
        const WHAT: &str = "choice";
        let go = || {
            let k = Key::of(self, WHAT, loc)?;
            let b = self.builder();
            check_dims(&b, WHAT, dims, loc)?;
            let (n, arr) = match a {
                Population::Range(n) => (n, None),
                Population::Array(x, axis) => {
                    let s = x.shape().map_err(|_| x.clone())?;
                    if !s.is_array() || s.rank() == 0 {
                        return Err(fail(
                            &b,
                            WHAT,
                            &[&s],
                            ShapeErrorKind::Rank,
                            "draws from an array of rank 1 or more".into(),
                            loc,
                        ));
                    }
                    let ax = super::resolve_axis(WHAT, &s, axis).map_err(|e| b.fail(e, loc))?;
                    (s.dims()[ax], Some((x, ax as i64)))
                }
            };
            let draws: i64 = dims.iter().product();
            if draws == 0 {
                // JAX returns zeros of `dims` (of the array's type).
                let ty = arr
                    .map_or(Ok(S32), |(x, _)| x.element_type())
                    .map_err(|_| self.clone())?;
                return Ok(b
                    .scalar_of(ty, Scalar::Int(0), loc)
                    .on(loc)
                    .broadcast_to(dims));
            }
            if n <= 0 || n > i64::from(i32::MAX) {
                return Err(fail(
                    &b,
                    WHAT,
                    &[],
                    ShapeErrorKind::Dimension,
                    format!("draws from a population of {n}"),
                    loc,
                ));
            }
            if !replace && draws > n {
                return Err(fail(
                    &b,
                    WHAT,
                    &[],
                    ShapeErrorKind::Dimension,
                    format!("{draws} draws without replacement from a population of {n}"),
                    loc,
                ));
            }
            let p = match p {
                None => None,
                Some(p) => {
                    let s = p.shape().map_err(|_| p.clone())?;
                    if !matches!(s.element_type(), Some(F32 | F64)) || s.dims() != [n] {
                        return Err(fail(
                            &b,
                            WHAT,
                            &[&s],
                            ShapeErrorKind::Dimension,
                            format!("p must be f32[{n}] or f64[{n}], one weight per entry"),
                            loc,
                        ));
                    }
                    Some((p, s.element_type().expect("an array")))
                }
            };
            let ind = match (p, replace) {
                (None, true) => self.randint_core(
                    &k,
                    dims,
                    &b.scalar_of(S32, Scalar::Int(0), loc),
                    &b.scalar_of(S32, Scalar::Int(n), loc),
                    loc,
                )?,
                (None, false) => {
                    let perm = shuffle_core(&k, &b.iota(S32, &[n], 0), 0, n, WHAT, loc)?;
                    perm.on(loc)
                        .slice(&[0], &[draws], &[1])
                        .on(loc)
                        .reshape(dims)
                }
                (Some((p, ty)), true) => {
                    // The cumulative sum as JAX's cumsum lowers it (a window sum).
                    let zero = b.scalar_of(ty, Scalar::Float(0.0), loc);
                    let win = WindowDim {
                        padding_low: n - 1,
                        ..WindowDim::new(n, 1)
                    };
                    let cum =
                        p.reduce_window(&zero, &[win], |x, y| x.binary(BinaryOp::Add, y, loc));
                    let total = cum.on(loc).slice(&[n - 1], &[n], &[1]).on(loc).reshape(&[]);
                    let u = k.uniform(
                        dims,
                        ty,
                        &zero,
                        &b.scalar_of(ty, Scalar::Float(1.0), loc),
                        WHAT,
                        loc,
                    )?;
                    let r = total.binary(
                        BinaryOp::Multiply,
                        &u.binary_scalar(BinaryOp::Subtract, Scalar::Float(1.0), true, loc),
                        loc,
                    );
                    search_sorted_left(&cum, &r, n, loc)
                }
                (Some((p, ty)), false) => {
                    let g = self.gumbel_core(&k, &[n], ty, loc)?;
                    let x = g.binary(BinaryOp::Add, &p.unary(UnaryOp::Log, loc), loc);
                    top_k_indices(&x, draws, loc).on(loc).reshape(dims)
                }
            };
            Ok(match arr {
                None => ind,
                Some((x, axis)) => x.take(&ind, axis),
            })
        };
        go().unwrap_or_else(|f| f)
    }
}

/// `jnp.searchsorted(sorted, q, side='left')` as JAX computes it: a binary search of
/// `ceil(log2(n + 1))` halving steps, giving for each query the first index whose
/// entry is `>= q`.
fn search_sorted_left(sorted: &Op, q: &Op, n: i64, loc: Loc) -> Op {
    let b = sorted.builder();
    let dims = q.dims().expect("an array");
    let levels = 64 - (n as u64).leading_zeros();
    let mut low = b
        .scalar_of(S32, Scalar::Int(0), loc)
        .on(loc)
        .broadcast_to(&dims);
    let mut high = b
        .scalar_of(S32, Scalar::Int(n), loc)
        .on(loc)
        .broadcast_to(&dims);
    let two = b.scalar_of(U32, Scalar::Int(2), loc);
    for _ in 0..levels {
        let mid = low
            .on(loc)
            .convert(U32)
            .binary(BinaryOp::Add, &high.on(loc).convert(U32), loc)
            .binary(BinaryOp::Divide, &two, loc)
            .on(loc)
            .convert(S32);
        let left = q.on(loc).compare(&sorted.take(&mid, 0), Comparison::Le);
        low = b.on(loc).select(&left, &low, &mid);
        high = b.on(loc).select(&left, &mid, &high);
    }
    high
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_kinds_by_shape() {
        assert_eq!(
            PrngImpl::of_key_shape(&Shape::of::<u32>(&[2])),
            Some(PrngImpl::Threefry2x32)
        );
        assert_eq!(
            PrngImpl::of_key_shape(&Shape::of::<u32>(&[4])),
            Some(PrngImpl::Rbg)
        );
        assert_eq!(PrngImpl::of_key_shape(&Shape::of::<i32>(&[2])), None);
    }

    #[test]
    fn numpy_broadcast_of_dims() {
        assert_eq!(broadcast(&[2, 1], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast(&[], &[4, 5]), Some(vec![4, 5]));
        assert_eq!(broadcast(&[2], &[3]), None);
    }

    /// The build error of what `f` makes on a fresh builder with a threefry key.
    fn err(f: impl FnOnce(&Builder, &Op) -> Op) -> String {
        let b = Builder::new("bad");
        let key = b.prng_key(0);
        let op = f(&b, &key);
        b.build(&op).unwrap_err().to_string()
    }

    #[test]
    fn misuse_is_a_build_error_at_the_callers_line() {
        let e = err(|b, _| b.constant_vec(&[1i32, 2]).normal(&[3], F32));
        assert!(e.contains("normal") && e.contains("u32[2]"), "{e}");
        let mut line = 0;
        let e = err(|b, _| {
            line = line!();
            b.constant_vec(&[1u32, 2, 3]).normal(&[3], F32)
        });
        assert!(
            e.contains("u32[4]") && e.contains(&format!(":{}:", line + 1)),
            "{e}"
        );
        let e = err(|_, k| k.uniform(&[-1], F32, 0.0, 1.0));
        assert!(e.contains("uniform") && e.contains("negative"), "{e}");
        let e = err(|_, k| k.uniform(&[2], ElementType::S32, 0.0, 1.0));
        assert!(e.contains("uniform") && e.contains("s32"), "{e}");
        let e = err(|_, k| k.randint(&[2], 0.5, 3));
        assert!(e.contains("randint") && e.contains("`lo`"), "{e}");
        let e = err(|_, k| k.randint(&[2], 0, 1i64 << 40));
        assert!(e.contains("randint") && e.contains("`hi`"), "{e}");
        let e = err(|b, k| k.uniform(&[2], F32, &b.constant_vec(&[0.0f32, 1.0, 2.0]), 1.0));
        assert!(e.contains("uniform") && e.contains("broadcast"), "{e}");
        let e = err(|b, k| k.truncated_normal(&b.constant_vec(&[0i32, 1]), 1.0, &[2]));
        assert!(
            e.contains("truncated_normal") && e.contains("`lower`"),
            "{e}"
        );
        let e = err(|_, k| k.choice(3, &[4], false, None));
        assert!(
            e.contains("choice") && e.contains("without replacement"),
            "{e}"
        );
        let e = err(|b, k| k.categorical_with(&b.constant_vec(&[0.0f32, 1.0]), 0, &[3], false));
        assert!(e.contains("categorical"), "{e}");
        let e = err(|b, k| k.shuffle(&b.constant(1.0f32), 0, false));
        assert!(e.contains("shuffle"), "{e}");
        let e = err(|_, k| k.random_bits(&[2], F32));
        assert!(e.contains("random_bits"), "{e}");
    }

    #[test]
    fn shapes_of_samples() {
        for rbg in [false, true] {
            let b = Builder::new("shapes");
            let key = if rbg { b.rbg_key(1) } else { b.prng_key(1) };
            assert_eq!(
                key.random_split(3).dims().unwrap(),
                vec![3, key.dims().unwrap()[0]]
            );
            assert_eq!(key.gumbel(&[2, 3], F64).element_type().unwrap(), F64);
            let logits = b.parameter(0, Shape::of::<f32>(&[4, 5]), "l");
            assert_eq!(key.categorical(&logits, 0).dims().unwrap(), vec![5]);
            assert_eq!(
                key.categorical_with(&logits, 1, &[3, 4], true)
                    .dims()
                    .unwrap(),
                vec![3, 4]
            );
            assert_eq!(
                key.categorical_with(&logits, 1, &[2, 4], false)
                    .dims()
                    .unwrap(),
                vec![2, 4]
            );
            let x = b.parameter(1, Shape::of::<i32>(&[4, 2]), "x");
            assert_eq!(key.choice(&x, &[3], true, None).dims().unwrap(), vec![3, 2]);
            assert_eq!(
                key.choice(Population::Array(&x, 1), &[5], true, None)
                    .dims()
                    .unwrap(),
                vec![4, 5]
            );
            assert_eq!(
                key.bernoulli(0.5, &[7]).element_type().unwrap(),
                ElementType::Pred
            );
        }
    }
}
