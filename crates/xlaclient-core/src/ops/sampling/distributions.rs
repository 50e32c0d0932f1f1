//! The rest of `jax.random`'s distributions, each built from the uniform and normal
//! draws of [the module](super) with the ops JAX 0.10.2 applies, in its order, so
//! that the same key, dimensions and arguments give JAX's values (checked against
//! vectors recorded from jax 0.10.2, `scripts/record_jax_distributions.py`).
//!
//! Simple transforms of one uniform or normal draw: [`exponential`](Op::exponential),
//! [`laplace`](Op::laplace), [`logistic`](Op::logistic_sample) (named so beside the
//! sigmoid [`Op::logistic`]), [`cauchy`](Op::cauchy), [`rademacher`](Op::rademacher),
//! [`maxwell`](Op::maxwell), [`double_sided_maxwell`](Op::double_sided_maxwell),
//! [`rayleigh`](Op::rayleigh), [`pareto`](Op::pareto),
//! [`weibull_min`](Op::weibull_min), [`lognormal`](Op::lognormal),
//! [`triangular`](Op::triangular), [`geometric`](Op::geometric) and
//! [`wald`](Op::wald).
//!
//! Then the gamma family (`gamma`, `loggamma`, `beta`, `dirichlet`, `chisquare`,
//! `f_sample`, `student_t`, `generalized_normal`, `ball`), `poisson`, `binomial`,
//! `multinomial`, and
//! `multivariate_normal` and `orthogonal` through the crate's Cholesky and QR.
//!
//! Element types: the samplers built on `uniform` take `f32` or `f64`; those built
//! on `normal` are `f32` (as [`Op::normal`]). Parameters are [`Param`]s of the
//! sample's element type broadcasting to the sample's dimensions (JAX's `shape`
//! argument, which here is always given).

use super::*;

/// `a op b` with numpy broadcasting.
fn bin(a: &Op, op: BinaryOp, b: &Op, loc: Loc) -> Op {
    a.binary(op, b, loc)
}

fn add(a: &Op, b: &Op, loc: Loc) -> Op {
    bin(a, BinaryOp::Add, b, loc)
}

fn sub(a: &Op, b: &Op, loc: Loc) -> Op {
    bin(a, BinaryOp::Subtract, b, loc)
}

fn mul(a: &Op, b: &Op, loc: Loc) -> Op {
    bin(a, BinaryOp::Multiply, b, loc)
}

fn div(a: &Op, b: &Op, loc: Loc) -> Op {
    bin(a, BinaryOp::Divide, b, loc)
}

/// A float constant of `ty`.
fn fc(b: &Builder, ty: ElementType, v: f64, loc: Loc) -> Op {
    b.scalar_of(ty, Scalar::Float(v), loc)
}

/// `numpy.finfo(ty)`'s `eps`, `epsneg` and `tiny`.
fn finfo(ty: ElementType) -> (f64, f64, f64) {
    if ty == F64 {
        (f64::EPSILON, f64::EPSILON / 2.0, f64::MIN_POSITIVE)
    } else {
        (
            f32::EPSILON.into(),
            (f32::EPSILON / 2.0).into(),
            f32::MIN_POSITIVE.into(),
        )
    }
}

impl Key {
    /// `uniform(key, dims, ty, lo, hi)` with constant bounds.
    fn uniform_in(
        &self,
        dims: &[i64],
        ty: ElementType,
        lo: f64,
        hi: f64,
        what: &'static str,
        loc: Loc,
    ) -> Result<Op, Op> {
        let b = self.b();
        self.uniform(
            dims,
            ty,
            &fc(&b, ty, lo, loc),
            &fc(&b, ty, hi, loc),
            what,
            loc,
        )
    }

    /// JAX's `_exponential`: `-log1p(-u)`.
    fn exponential(
        &self,
        dims: &[i64],
        ty: ElementType,
        what: &'static str,
        loc: Loc,
    ) -> Result<Op, Op> {
        let u = self.uniform_in(dims, ty, 0.0, 1.0, what, loc)?;
        Ok(u.unary(UnaryOp::Negate, loc)
            .unary(UnaryOp::LogPlusOne, loc)
            .unary(UnaryOp::Negate, loc))
    }

    /// JAX's `_rademacher`: `2·bernoulli(0.5) - 1` in `ty`.
    fn rademacher(
        &self,
        dims: &[i64],
        ty: ElementType,
        what: &'static str,
        loc: Loc,
    ) -> Result<Op, Op> {
        let b = self.b();
        let u = self.uniform_in(dims, F32, 0.0, 1.0, what, loc)?;
        let heads = u
            .on(loc)
            .compare(&f32c(&b, 0.5, loc), Comparison::Lt)
            .on(loc)
            .convert(ty);
        let two = b.scalar_of(ty, Scalar::Int(2), loc);
        let one = b.scalar_of(ty, Scalar::Int(1), loc);
        Ok(sub(&mul(&two, &heads, loc), &one, loc))
    }

    /// JAX's `_maxwell`: the length of a standard normal 3-vector.
    fn maxwell(&self, dims: &[i64], what: &'static str, loc: Loc) -> Result<Op, Op> {
        let mut d3 = dims.to_vec();
        d3.push(3);
        let n = self.normal_f32(&d3, what, loc)?;
        Ok(mul(&n, &n, loc)
            .on(loc)
            .reduce_sum(&[dims.len() as i64])
            .unary(UnaryOp::Sqrt, loc))
    }
}

impl Op {
    /// The key, after checking it, the element type among `allowed` and `dims`.
    fn start(
        &self,
        what: &'static str,
        ty: ElementType,
        allowed: &[ElementType],
        dims: &[i64],
        loc: Loc,
    ) -> Result<(Key, Builder), Op> {
        let k = Key::of(self, what, loc)?;
        let b = self.builder();
        float_type(&b, ty, allowed, what, loc)?;
        check_dims(&b, what, dims, loc)?;
        Ok((k, b))
    }

    /// `jax.random.exponential(key, dims, ty)`: standard exponential samples of
    /// `ty` (`f32` or `f64`), `-log1p(-u)` with `u` uniform in `[0, 1)`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType};
    /// let b = Builder::new("draw");
    /// let key = b.prng_key(0);
    /// let x = key.exponential(&[3, 2], ElementType::F32);
    /// assert_eq!(x.dims()?, vec![3, 2]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn exponential(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        let go = || {
            let (k, _) = self.start("exponential", ty, &[F32, F64], dims, loc)?;
            k.exponential(dims, ty, "exponential", loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.laplace(key, dims, ty)`: standard Laplace samples of `ty` (`f32`
    /// or `f64`), `sign(u)·log1p(-|u|)` with `u` uniform in `[-1 + epsneg, 1)`.
    #[track_caller]
    pub fn laplace(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "laplace";
        let go = || {
            let (k, _) = self.start(WHAT, ty, &[F32, F64], dims, loc)?;
            let u = k.uniform_in(dims, ty, -1.0 + finfo(ty).1, 1.0, WHAT, loc)?;
            let m = u
                .unary(UnaryOp::Abs, loc)
                .unary(UnaryOp::Negate, loc)
                .unary(UnaryOp::LogPlusOne, loc);
            Ok(mul(&u.unary(UnaryOp::Sign, loc), &m, loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.logistic(key, dims, ty)`: standard logistic samples of `ty`
    /// (`f32` or `f64`), `log(u) - log1p(-u)` with `u` uniform in `[tiny, 1)`.
    /// (Named so beside [`Op::logistic`], the sigmoid.)
    #[track_caller]
    pub fn logistic_sample(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "logistic";
        let go = || {
            let (k, _) = self.start(WHAT, ty, &[F32, F64], dims, loc)?;
            let x = k.uniform_in(dims, ty, finfo(ty).2, 1.0, WHAT, loc)?;
            Ok(sub(
                &x.unary(UnaryOp::Log, loc),
                &x.unary(UnaryOp::Negate, loc)
                    .unary(UnaryOp::LogPlusOne, loc),
                loc,
            ))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.cauchy(key, dims, ty)`: standard Cauchy samples of `ty` (`f32`
    /// or `f64`), `tan(π·(u - 0.5))` with `u` uniform in `[eps, 1)`.
    #[track_caller]
    pub fn cauchy(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "cauchy";
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32, F64], dims, loc)?;
            let u = k.uniform_in(dims, ty, finfo(ty).0, 1.0, WHAT, loc)?;
            let c = sub(&u, &fc(&b, ty, 0.5, loc), loc);
            Ok(mul(&fc(&b, ty, std::f64::consts::PI, loc), &c, loc).unary(UnaryOp::Tan, loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.rademacher(key, dims, ty)`: `-1` or `1` with equal probability,
    /// as `ty` (a signed integer or float type; JAX's default is `s32`):
    /// `2·bernoulli(0.5) - 1`.
    #[track_caller]
    pub fn rademacher(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "rademacher";
        let go = || {
            let allowed = [
                ElementType::S8,
                ElementType::S16,
                S32,
                ElementType::S64,
                ElementType::F16,
                ElementType::Bf16,
                F32,
                F64,
            ];
            let (k, _) = self.start(WHAT, ty, &allowed, dims, loc)?;
            k.rademacher(dims, ty, WHAT, loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.maxwell(key, dims)`: Maxwell samples (`f32`), the length of a
    /// standard normal 3-vector (drawn as `normal(key, dims + [3])`).
    #[track_caller]
    pub fn maxwell(&self, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "maxwell";
        let go = || {
            let (k, _) = self.start(WHAT, ty, &[F32], dims, loc)?;
            k.maxwell(dims, WHAT, loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.double_sided_maxwell(key, loc, scale, shape)`: `f32` samples
    /// `sign·maxwell·scale + loc`, the sign Rademacher. `loc_` and `scale` broadcast
    /// to `dims`. (JAX's result has the dimensions `shape + broadcast(loc, scale)`:
    /// pass those as `dims` for the same values.)
    #[track_caller]
    pub fn double_sided_maxwell<'a>(
        &self,
        loc_: impl Into<Param<'a>>,
        scale: impl Into<Param<'a>>,
        dims: &[i64],
        ty: ElementType,
    ) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "double_sided_maxwell";
        let (mu, scale) = (loc_.into(), scale.into());
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            let mu = param_op(&b, mu, ty, Some(dims), WHAT, "loc", loc)?;
            let scale = param_op(&b, scale, ty, Some(dims), WHAT, "scale", loc)?;
            let ks = k.split(2, loc);
            let m = ks[0].maxwell(dims, WHAT, loc)?;
            let sign = ks[1].rademacher(dims, ty, WHAT, loc)?;
            Ok(add(&mul(&mul(&sign, &m, loc), &scale, loc), &mu, loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.rayleigh(key, scale, dims, ty)`: Rayleigh samples of `ty` (`f32`
    /// or `f64`), `scale·sqrt(-2·log(u))` with `u` uniform in `[0, 1)`.
    #[track_caller]
    pub fn rayleigh<'a>(&self, scale: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "rayleigh";
        let scale = scale.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32, F64], dims, loc)?;
            let scale = param_op(&b, scale, ty, Some(dims), WHAT, "scale", loc)?;
            let u = k.uniform_in(dims, ty, 0.0, 1.0, WHAT, loc)?;
            let r = mul(&u.unary(UnaryOp::Log, loc), &fc(&b, ty, -2.0, loc), loc)
                .unary(UnaryOp::Sqrt, loc);
            Ok(mul(&scale, &r, loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.pareto(key, b, dims, ty)`: Pareto samples of `ty` (`f32` or
    /// `f64`) with shape `b`, `exp(e / b)` with `e` standard exponential.
    #[track_caller]
    pub fn pareto<'a>(&self, b_: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "pareto";
        let shape = b_.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32, F64], dims, loc)?;
            let shape = param_op(&b, shape, ty, Some(dims), WHAT, "b", loc)?;
            let e = k.exponential(dims, ty, WHAT, loc)?;
            Ok(div(&e, &shape, loc).unary(UnaryOp::Exponential, loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.weibull_min(key, scale, concentration, dims, ty)`: Weibull
    /// samples of `ty` (`f32` or `f64`) by the inverse CDF,
    /// `(-log1p(-u))^(1/concentration)·scale`.
    #[track_caller]
    pub fn weibull_min<'a>(
        &self,
        scale: impl Into<Param<'a>>,
        concentration: impl Into<Param<'a>>,
        dims: &[i64],
        ty: ElementType,
    ) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "weibull_min";
        let (scale, conc) = (scale.into(), concentration.into());
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32, F64], dims, loc)?;
            let scale = param_op(&b, scale, ty, Some(dims), WHAT, "scale", loc)?;
            let conc = param_op(&b, conc, ty, Some(dims), WHAT, "concentration", loc)?;
            let u = k.uniform_in(dims, ty, 0.0, 1.0, WHAT, loc)?;
            let e = u
                .unary(UnaryOp::Negate, loc)
                .unary(UnaryOp::LogPlusOne, loc)
                .unary(UnaryOp::Negate, loc);
            let p = div(&fc(&b, ty, 1.0, loc), &conc, loc);
            Ok(mul(&bin(&e, BinaryOp::Power, &p, loc), &scale, loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.lognormal(key, sigma, dims)`: `f32` samples `exp(sigma·z)`, `z`
    /// standard normal.
    #[track_caller]
    pub fn lognormal<'a>(&self, sigma: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "lognormal";
        let sigma = sigma.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            let sigma = param_op(&b, sigma, ty, Some(dims), WHAT, "sigma", loc)?;
            let z = k.normal_f32(dims, WHAT, loc)?;
            Ok(mul(&z, &sigma, loc).unary(UnaryOp::Exponential, loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.triangular(key, left, mode, right, dims, ty)`: samples of `ty`
    /// (`f32` or `f64`) from the triangular distribution on `[left, right]` peaking
    /// at `mode`, by the inverse CDF.
    #[track_caller]
    pub fn triangular<'a>(
        &self,
        left: impl Into<Param<'a>>,
        mode: impl Into<Param<'a>>,
        right: impl Into<Param<'a>>,
        dims: &[i64],
        ty: ElementType,
    ) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "triangular";
        let (left, mode, right) = (left.into(), mode.into(), right.into());
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32, F64], dims, loc)?;
            let l = param_op(&b, left, ty, Some(dims), WHAT, "left", loc)?;
            let m = param_op(&b, mode, ty, Some(dims), WHAT, "mode", loc)?;
            let r = param_op(&b, right, ty, Some(dims), WHAT, "right", loc)?;
            let (l, m, r) = (
                l.on(loc).broadcast_to(dims),
                m.on(loc).broadcast_to(dims),
                r.on(loc).broadcast_to(dims),
            );
            let fcut = div(&sub(&m, &l, loc), &sub(&r, &l, loc), loc);
            let u = k.uniform_in(dims, ty, 0.0, 1.0, WHAT, loc)?;
            let s1 = mul(&mul(&u, &sub(&r, &l, loc), loc), &sub(&m, &l, loc), loc);
            let out1 = add(&l, &s1.unary(UnaryOp::Sqrt, loc), loc);
            let v = sub(&fc(&b, ty, 1.0, loc), &u, loc);
            let s2 = mul(&mul(&v, &sub(&r, &l, loc), loc), &sub(&r, &m, loc), loc);
            let out2 = sub(&r, &s2.unary(UnaryOp::Sqrt, loc), loc);
            let below = u.on(loc).compare(&fcut, Comparison::Lt);
            Ok(b.on(loc).select(&below, &out1, &out2))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.geometric(key, p, dims, ty)`: the number of Bernoulli(`p`)
    /// trials up to the first success (1 or more), as the integer type `ty` (JAX's
    /// default `s32`): `floor(log(u) / log1p(-p)) + 1` with `u` uniform of `p`'s
    /// type (`f32` for a number, or an `f32`/`f64` op).
    #[track_caller]
    pub fn geometric<'a>(&self, p: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "geometric";
        let p = p.into();
        let go = || {
            let ints = [
                ElementType::S8,
                ElementType::S16,
                S32,
                ElementType::S64,
                ElementType::U8,
                ElementType::U16,
                U32,
                U64,
            ];
            let (k, b) = self.start(WHAT, ty, &ints, dims, loc)?;
            let pty = match p {
                Param::Array(op) => match op.element_type() {
                    Ok(t @ (F32 | F64)) => t,
                    _ => F32,
                },
                Param::Number(_) => F32,
            };
            let p = param_op(&b, p, pty, Some(dims), WHAT, "p", loc)?;
            let u = k.uniform_in(dims, pty, 0.0, 1.0, WHAT, loc)?;
            let zero = u.on(loc).compare(&fc(&b, pty, 0.0, loc), Comparison::Eq);
            let one = fc(&b, pty, 1.0, loc).on(loc).broadcast_to(dims);
            let u = b.on(loc).select(&zero, &one, &u);
            let log_q = p
                .unary(UnaryOp::Negate, loc)
                .unary(UnaryOp::LogPlusOne, loc)
                .on(loc)
                .broadcast_to(dims);
            let g = div(&u.unary(UnaryOp::Log, loc), &log_q, loc).unary(UnaryOp::Floor, loc);
            Ok(add(&g, &fc(&b, pty, 1.0, loc), loc).on(loc).convert(ty))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.wald(key, mean, dims)`: `f32` samples of the Wald (inverse
    /// Gaussian) distribution with `mean` (and shape 1), by Michael, Schucany and
    /// Haas' transformation of a normal and a uniform draw.
    #[track_caller]
    pub fn wald<'a>(&self, mean: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "wald";
        let mean = mean.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            let mu = param_op(&b, mean, ty, Some(dims), WHAT, "mean", loc)?
                .on(loc)
                .broadcast_to(dims);
            let ks = k.split(2, loc);
            let v = ks[0].normal_f32(dims, WHAT, loc)?;
            let z = ks[1].uniform_in(dims, ty, 0.0, 1.0, WHAT, loc)?;
            let c = |v: f64| fc(&b, ty, v, loc);
            let y = mul(&v, &v, loc);
            let y_sq = mul(&y, &y, loc);
            let mu_sq = mul(&mu, &mu, loc);
            let sqrt_term = add(
                &mul(&mul(&c(4.0), &mu, loc), &y, loc),
                &mul(&mu_sq, &y_sq, loc),
                loc,
            )
            .unary(UnaryOp::Sqrt, loc);
            let x = sub(
                &add(&mu, &div(&mul(&mu_sq, &y, loc), &c(2.0), loc), loc),
                &mul(&div(&mu, &c(2.0), loc), &sqrt_term, loc),
                loc,
            );
            let keep = z
                .on(loc)
                .compare(&div(&mu, &add(&mu, &x, loc), loc), Comparison::Le);
            Ok(b.on(loc).select(&keep, &x, &div(&mu_sq, &x, loc)))
        };
        go().unwrap_or_else(|f| f)
    }
}

// ---------------------------------------------------------------------------------
// The gamma family: JAX's Marsaglia–Tsang sampler, one rejection loop per element.

/// One threefry key per element: its two words, `u32[n]` each.
#[derive(Clone)]
struct Keys(Op, Op);

impl Keys {
    /// `jax.random.split(key, num)` of each element's key.
    fn split(&self, num: u32, loc: Loc) -> Vec<Keys> {
        let b = self.0.builder();
        let dims = self.0.dims().expect("an array");
        let zero = b
            .scalar_of(U32, Scalar::Int(0), loc)
            .on(loc)
            .broadcast_to(&dims);
        (0..num)
            .map(|i| {
                let lo = b
                    .scalar_of(U32, Scalar::Int(i.into()), loc)
                    .on(loc)
                    .broadcast_to(&dims);
                let (a, c) =
                    super::super::threefry::threefry2x32(&self.0, &self.1, &zero, &lo, loc);
                Keys(a, c)
            })
            .collect()
    }

    /// Each element's `jax.random.bits(key, ())` (32 bits).
    fn bits(&self, loc: Loc) -> Op {
        let b = self.0.builder();
        let dims = self.0.dims().expect("an array");
        let zero = b
            .scalar_of(U32, Scalar::Int(0), loc)
            .on(loc)
            .broadcast_to(&dims);
        let (a, c) = super::super::threefry::threefry2x32(&self.0, &self.1, &zero, &zero, loc);
        a.bitwise(BitwiseOp::Xor, &c, loc)
    }

    /// Each element's `uniform(key, (), f32)` in `[0, 1)`.
    fn uniform01(&self, loc: Loc) -> Op {
        let b = self.0.builder();
        uniform_of_bits(
            &self.bits(loc),
            F32,
            &f32c(&b, 0.0, loc),
            &f32c(&b, 1.0, loc),
            loc,
        )
    }

    /// Each element's `normal(key, (), f32)`.
    fn normal(&self, loc: Loc) -> Op {
        let b = self.0.builder();
        let lo = f32c(&b, f32::from_bits(0xbf7f_ffff), loc);
        let u = uniform_of_bits(&self.bits(loc), F32, &lo, &f32c(&b, 1.0, loc), loc);
        mul(
            &erf_inv_f32(&u, loc),
            &f32c(&b, std::f32::consts::SQRT_2, loc),
            loc,
        )
    }

    fn select(&self, m: &Op, other: &Keys, loc: Loc) -> Keys {
        let b = self.0.builder();
        Keys(
            b.on(loc).select(m, &self.0, &other.0),
            b.on(loc).select(m, &self.1, &other.1),
        )
    }
}

/// Whether any element of a `pred[n]` is true.
fn any(m: &Op, loc: Loc) -> Op {
    let b = m.builder();
    let f = b.scalar_of(ElementType::Pred, Scalar::Int(0), loc);
    m.on(loc)
        .reduce(&f, &[0], |x, y| x.bitwise(BitwiseOp::Or, y, loc))
}

/// JAX's `_gamma_one` run for `n` elements at once as `vmap` runs it (each loop
/// runs until every element is done; an element's state changes only while its own
/// condition holds, so each equals its own sequential run): a `Gamma(alpha)` sample
/// (or its log) per element from `keys`.
fn gamma_one(keys: &Keys, alpha: &Op, log_space: bool, loc: Loc) -> Op {
    let b = alpha.builder();
    let c = |v: f32| f32c(&b, v, loc);
    let n = alpha.dims().expect("an array");
    let full = |v: f32| c(v).on(loc).broadcast_to(&n);
    let boost = alpha.on(loc).compare(&c(1.0), Comparison::Ge);
    let alpha1 = b.on(loc).select(&boost, alpha, &add(alpha, &c(1.0), loc));
    let third = c(1.0 / 3.0);
    let d = sub(&alpha1, &third, loc);
    let cc = div(&third, &d.unary(UnaryOp::Sqrt, loc), loc);
    let ks = keys.split(2, loc);
    let (key, subkey) = (ks[0].clone(), ks[1].clone());
    let go_on = |x: &Op, v: &Op, u: &Op| {
        let squeeze = u.on(loc).compare(
            &sub(&c(1.0), &mul(&c(0.0331), &mul(x, x, loc), loc), loc),
            Comparison::Ge,
        );
        let rhs = add(
            &mul(x, &c(0.5), loc),
            &mul(
                &d,
                &add(&sub(&c(1.0), v, loc), &v.unary(UnaryOp::Log, loc), loc),
                loc,
            ),
            loc,
        );
        let log_test = u
            .unary(UnaryOp::Log, loc)
            .on(loc)
            .compare(&rhs, Comparison::Ge);
        squeeze.bitwise(BitwiseOp::And, &log_test, loc)
    };
    let init = (key.0, key.1, full(0.0), full(1.0), full(2.0));
    let (_, _, _, v_out, _) = b.on(loc).while_loop(
        init,
        |(_, _, x, v, u)| any(&go_on(x, v, u), loc),
        |(k0, k1, x, v, u)| {
            let m = go_on(&x, &v, &u);
            let ks = Keys(k0.clone(), k1.clone()).split(3, loc);
            let (xk, uk) = (ks[1].clone(), ks[2].clone());
            let (_, _, xn, vn) = b.on(loc).while_loop(
                (xk.0, xk.1, full(0.0), full(-1.0)),
                |(_, _, _, v)| any(&v.on(loc).compare(&c(0.0), Comparison::Le), loc),
                |(j0, j1, x, v)| {
                    let m2 = v.on(loc).compare(&c(0.0), Comparison::Le);
                    let old = Keys(j0, j1);
                    let kk = old.split(2, loc);
                    let xs = kk[1].normal(loc);
                    let vs = add(&c(1.0), &mul(&xs, &cc, loc), loc);
                    let k = kk[0].select(&m2, &old, loc);
                    (
                        k.0,
                        k.1,
                        b.on(loc).select(&m2, &xs, &x),
                        b.on(loc).select(&m2, &vs, &v),
                    )
                },
            );
            let xx = mul(&xn, &xn, loc);
            let vv = mul(&mul(&vn, &vn, loc), &vn, loc);
            let uu = uk.uniform01(loc);
            let k = ks[0].select(&m, &Keys(k0, k1), loc);
            let sel = |new: &Op, old: &Op| b.on(loc).select(&m, new, old);
            (k.0, k.1, sel(&xx, &x), sel(&vv, &v), sel(&uu, &u))
        },
    );
    let inv_alpha = div(&c(1.0), alpha, loc);
    if log_space {
        let e = subkey
            .uniform01(loc)
            .unary(UnaryOp::Negate, loc)
            .unary(UnaryOp::LogPlusOne, loc)
            .unary(UnaryOp::Negate, loc);
        let ls = e.unary(UnaryOp::Negate, loc);
        let no_boost = boost.bitwise(
            BitwiseOp::Or,
            &ls.on(loc).compare(&c(0.0), Comparison::Eq),
            loc,
        );
        let log_boost = b
            .on(loc)
            .select(&no_boost, &full(0.0), &mul(&ls, &inv_alpha, loc));
        add(
            &add(
                &d.unary(UnaryOp::Log, loc),
                &v_out.unary(UnaryOp::Log, loc),
                loc,
            ),
            &log_boost,
            loc,
        )
    } else {
        let s = sub(&c(1.0), &subkey.uniform01(loc), loc);
        let bst = b.on(loc).select(
            &boost,
            &full(1.0),
            &bin(&s, BinaryOp::Power, &inv_alpha, loc),
        );
        mul(&mul(&d, &v_out, loc), &bst, loc)
    }
}

impl Key {
    /// JAX's `_gamma` (or `loggamma`) of `a` (`f32`, already of `dims`): one key per
    /// element from `split(key, n)`, then [`gamma_one`].
    fn gamma(
        &self,
        a: &Op,
        dims: &[i64],
        log_space: bool,
        what: &'static str,
        loc: Loc,
    ) -> Result<Op, Op> {
        let b = self.b();
        if self.imp != PrngImpl::Threefry2x32 {
            return Err(fail(
                &b,
                what,
                &[],
                ShapeErrorKind::Dimension,
                "takes a threefry key (u32[2]); JAX draws gamma with rbg keys through \
                 lax.map, not built here"
                    .into(),
                loc,
            ));
        }
        let n: i64 = dims.iter().product();
        if n == 0 {
            return Ok(a.on(loc).broadcast_to(dims));
        }
        let all = self.split_array(n, loc);
        let col = |j: i64| {
            all.on(loc)
                .slice(&[0, j], &[n, j + 1], &[1, 1])
                .on(loc)
                .reshape(&[n])
        };
        let keys = Keys(col(0), col(1));
        let alpha = a.on(loc).broadcast_to(dims).on(loc).reshape(&[n]);
        Ok(gamma_one(&keys, &alpha, log_space, loc)
            .on(loc)
            .reshape(dims))
    }
}

impl Op {
    fn gamma_common<'a>(
        &self,
        a: Param<'a>,
        dims: &[i64],
        ty: ElementType,
        log_space: bool,
        what: &'static str,
        loc: Loc,
    ) -> Result<Op, Op> {
        let (k, b) = self.start(what, ty, &[F32], dims, loc)?;
        let a = param_op(&b, a, ty, Some(dims), what, "a", loc)?;
        k.gamma(&a, dims, log_space, what, loc)
    }

    /// `jax.random.gamma(key, a, dims)`: `f32` samples of `Gamma(a, 1)`, `a`
    /// broadcasting to `dims`. As JAX: Marsaglia and Tsang's rejection sampler with
    /// one loop per element (each element drawing from its own key of
    /// `split(key, n)`), `a < 1` boosted to `a + 1` and scaled by `u^(1/a)`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType};
    /// let b = Builder::new("draw");
    /// let key = b.prng_key(0);
    /// let x = key.gamma(2.5f32, &[4], ElementType::F32);
    /// assert_eq!(x.dims()?, vec![4]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn gamma<'a>(&self, a: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        self.gamma_common(a.into(), dims, ty, false, "gamma", loc)
            .unwrap_or_else(|f| f)
    }

    /// `jax.random.loggamma(key, a, dims)`: the log of `Gamma(a, 1)` samples
    /// (`f32`), computed in log space so that small `a` does not underflow to 0.
    #[track_caller]
    pub fn loggamma<'a>(&self, a: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        self.gamma_common(a.into(), dims, ty, true, "loggamma", loc)
            .unwrap_or_else(|f| f)
    }

    /// `jax.random.beta(key, a, b, dims)`: `f32` samples of `Beta(a, b)`, from two
    /// log-gamma draws (`split(key)`), as `ga / (ga + gb)` scaled by their maximum.
    #[track_caller]
    pub fn beta<'a>(
        &self,
        a: impl Into<Param<'a>>,
        b_: impl Into<Param<'a>>,
        dims: &[i64],
        ty: ElementType,
    ) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "beta";
        let (a, bp) = (a.into(), b_.into());
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            let a = param_op(&b, a, ty, Some(dims), WHAT, "a", loc)?;
            let bb = param_op(&b, bp, ty, Some(dims), WHAT, "b", loc)?;
            let ks = k.split(2, loc);
            let la = ks[0].gamma(&a, dims, true, WHAT, loc)?;
            let lb = ks[1].gamma(&bb, dims, true, WHAT, loc)?;
            let m = bin(&la, BinaryOp::Maximum, &lb, loc);
            let ga = sub(&la, &m, loc).unary(UnaryOp::Exponential, loc);
            let gb = sub(&lb, &m, loc).unary(UnaryOp::Exponential, loc);
            Ok(div(&ga, &add(&ga, &gb, loc), loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.dirichlet(key, alpha, shape)`: `f32` samples of the Dirichlet
    /// distribution with concentrations `alpha` (`f32[..., k]`), of dimensions
    /// `batch + [k]` (`batch` must take `alpha`'s leading dimensions by broadcast):
    /// the softmax of `k` log-gamma draws.
    #[track_caller]
    pub fn dirichlet(&self, alpha: &Op, batch: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "dirichlet";
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], batch, loc)?;
            let s = alpha.shape().map_err(|_| alpha.clone())?;
            if !s.is_array() || s.rank() == 0 {
                return Err(fail(
                    &b,
                    WHAT,
                    &[&s],
                    ShapeErrorKind::Rank,
                    "alpha has rank 1 or more (the last axis holds the concentrations)".into(),
                    loc,
                ));
            }
            let mut dims = batch.to_vec();
            dims.push(*s.dims().last().expect("rank 1 or more"));
            let alpha = param_op(&b, Param::Array(alpha), ty, Some(&dims), WHAT, "alpha", loc)?;
            let lg = k.gamma(&alpha, &dims, true, WHAT, loc)?;
            Ok(lg.on(loc).softmax(-1))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.chisquare(key, df, dims)`: `f32` chi-square samples with `df`
    /// degrees of freedom, `2·exp(loggamma(df / 2))`.
    #[track_caller]
    pub fn chisquare<'a>(&self, df: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "chisquare";
        let df = df.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            let df = param_op(&b, df, ty, Some(dims), WHAT, "df", loc)?;
            k.chisquare(&df, dims, WHAT, loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.f(key, dfnum, dfden, dims)`: `f32` samples of the F distribution,
    /// `(chi2(dfnum) / dfnum) / (chi2(dfden) / dfden)` from two keys of
    /// `split(key)` (the denominator's first).
    #[track_caller]
    pub fn f_sample<'a>(
        &self,
        dfnum: impl Into<Param<'a>>,
        dfden: impl Into<Param<'a>>,
        dims: &[i64],
        ty: ElementType,
    ) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "f";
        let (num, den) = (dfnum.into(), dfden.into());
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            let num = param_op(&b, num, ty, Some(dims), WHAT, "dfnum", loc)?;
            let den = param_op(&b, den, ty, Some(dims), WHAT, "dfden", loc)?;
            let ks = k.split(2, loc);
            let cn = ks[1].chisquare(&num, dims, WHAT, loc)?;
            let cd = ks[0].chisquare(&den, dims, WHAT, loc)?;
            Ok(div(&div(&cn, &num, loc), &div(&cd, &den, loc), loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.t(key, df, dims)`: `f32` samples of Student's t with `df`
    /// degrees of freedom, `z·sqrt((df/2) / gamma(df/2))`.
    #[track_caller]
    pub fn student_t<'a>(&self, df: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "t";
        let df = df.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            let df = param_op(&b, df, ty, Some(dims), WHAT, "df", loc)?;
            let ks = k.split(2, loc);
            let z = ks[0].normal_f32(dims, WHAT, loc)?;
            let half = div(&df, &f32c(&b, 2.0, loc), loc);
            let g = ks[1].gamma(&half, dims, false, WHAT, loc)?;
            Ok(mul(&z, &div(&half, &g, loc).unary(UnaryOp::Sqrt, loc), loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.generalized_normal(key, p, dims)`: `f32` samples of density
    /// `∝ exp(-|x|^p)`, `sign·gamma(1/p)^(1/p)`.
    #[track_caller]
    pub fn generalized_normal<'a>(
        &self,
        p: impl Into<Param<'a>>,
        dims: &[i64],
        ty: ElementType,
    ) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "generalized_normal";
        let p = p.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            let p = param_op(&b, p, ty, Some(dims), WHAT, "p", loc)?;
            k.generalized_normal(&p, dims, WHAT, loc)
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.ball(key, d, p, dims)`: `f32` points uniform in the unit
    /// `p`-norm ball of dimension `d` (dimensions `dims + [d]`), as Barthe et al.:
    /// a generalized normal vector over `(Σ|g|^p + e)^(1/p)`, `e` exponential.
    /// (`p` is a number or an `f32` scalar op.)
    #[track_caller]
    pub fn ball<'a>(&self, d: i64, p: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "ball";
        let p = p.into();
        let go = || {
            let mut dd = dims.to_vec();
            dd.push(d);
            let (k, b) = self.start(WHAT, ty, &[F32], &dd, loc)?;
            let p = param_op(&b, p, ty, Some(&[]), WHAT, "p", loc)?;
            let ks = k.split(2, loc);
            let g = ks[0].generalized_normal(&p, &dd, WHAT, loc)?;
            let e = ks[1].exponential(dims, ty, WHAT, loc)?;
            let s = bin(&g.unary(UnaryOp::Abs, loc), BinaryOp::Power, &p, loc)
                .on(loc)
                .reduce_sum(&[dims.len() as i64]);
            let inv_p = div(&f32c(&b, 1.0, loc), &p, loc);
            let r = bin(&add(&s, &e, loc), BinaryOp::Power, &inv_p, loc);
            let mut rd = dims.to_vec();
            rd.push(1);
            Ok(div(&g, &r.on(loc).reshape(&rd), loc))
        };
        go().unwrap_or_else(|f| f)
    }
}

impl Key {
    /// JAX's `_chisquare`: `2·exp(loggamma(df / 2))`.
    fn chisquare(&self, df: &Op, dims: &[i64], what: &'static str, loc: Loc) -> Result<Op, Op> {
        let b = self.b();
        let two = f32c(&b, 2.0, loc);
        let lg = self.gamma(&div(df, &two, loc), dims, true, what, loc)?;
        Ok(mul(&lg.unary(UnaryOp::Exponential, loc), &two, loc))
    }

    /// JAX's `_generalized_normal`.
    fn generalized_normal(
        &self,
        p: &Op,
        dims: &[i64],
        what: &'static str,
        loc: Loc,
    ) -> Result<Op, Op> {
        let b = self.b();
        let ks = self.split(2, loc);
        let inv_p = div(&f32c(&b, 1.0, loc), p, loc);
        let g = ks[0].gamma(&inv_p, dims, false, what, loc)?;
        let r = ks[1].rademacher(dims, F32, what, loc)?;
        Ok(mul(&r, &bin(&g, BinaryOp::Power, &inv_p, loc), loc))
    }
}

// ---------------------------------------------------------------------------------
// Samplers through linear algebra.

impl Op {
    /// `jax.random.multivariate_normal(key, mean, cov, shape)` with JAX's default
    /// `method='cholesky'`: `f32` samples of dimensions `batch + [n]` from the normal
    /// distributions of `mean` (`f32[..., n]`) and `cov` (`f32[..., n, n]`, whose
    /// leading dimensions, like `mean`'s, broadcast to `batch`), as
    /// `mean + cholesky(cov) · z` with `z = normal(key, batch + [n])`.
    ///
    /// The normal draws are JAX's bit for bit; the Cholesky factor is XLA's (JAX
    /// calls LAPACK's `potrf` on the CPU), so the samples agree with JAX's to a few
    /// units in the last place, not bit for bit. (`svd` and `eigh` are not built.)
    #[track_caller]
    pub fn multivariate_normal(&self, mean: &Op, cov: &Op, batch: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "multivariate_normal";
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], batch, loc)?;
            let ms = mean.shape().map_err(|_| mean.clone())?;
            let cs = cov.shape().map_err(|_| cov.clone())?;
            let n = match ms.dims().last() {
                Some(n) if ms.is_array() => *n,
                _ => {
                    return Err(fail(
                        &b,
                        WHAT,
                        &[&ms, &cs],
                        ShapeErrorKind::Rank,
                        "mean has rank 1 or more".into(),
                        loc,
                    ));
                }
            };
            let cd = cs.dims();
            if !cs.is_array() || cd.len() < 2 || cd[cd.len() - 2..] != [n, n] {
                return Err(fail(
                    &b,
                    WHAT,
                    &[&ms, &cs],
                    ShapeErrorKind::Dimension,
                    format!("cov must be [..., {n}, {n}] for a mean of {n} entries"),
                    loc,
                ));
            }
            let mut zd = batch.to_vec();
            zd.push(n);
            let mean = param_op(&b, Param::Array(mean), ty, Some(&zd), WHAT, "mean", loc)?;
            let mut fd = batch.to_vec();
            fd.extend([n, n]);
            let cov = param_op(&b, Param::Array(cov), ty, Some(&fd), WHAT, "cov", loc)?;
            let factor = cov.on(loc).cholesky(true).on(loc).broadcast_to(&fd);
            let z = k.normal_f32(&zd, WHAT, loc)?;
            let mut col = zd.clone();
            col.push(1);
            let fz = factor
                .on(loc)
                .matmul(&z.on(loc).reshape(&col))
                .on(loc)
                .reshape(&zd);
            Ok(add(&mean, &fz, loc))
        };
        go().unwrap_or_else(|f| f)
    }

    /// `jax.random.orthogonal(key, n, shape, m=m)`: `f32` matrices of dimensions
    /// `batch + [n, m]` (`m = n`: orthogonal; else orthonormal columns or rows),
    /// uniform (Haar) as Mezzadri: the QR factorization of a normal matrix, `q`'s
    /// columns multiplied by the signs of `r`'s diagonal.
    ///
    /// The normal draws are JAX's bit for bit; the QR factorization is the crate's
    /// Householder loop with LAPACK's signs ([`Op::qr`]), so the matrices agree
    /// with JAX's (LAPACK's `geqrf`/`orgqr`) to a few units in the last place.
    #[track_caller]
    pub fn orthogonal(&self, n: i64, m: Option<i64>, batch: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "orthogonal";
        let go = || {
            let m = m.unwrap_or(n);
            let mut zd = batch.to_vec();
            zd.extend([n.max(m), n.min(m)]);
            let (k, b) = self.start(WHAT, ty, &[F32], &zd, loc)?;
            let z = k.normal_f32(&zd, WHAT, loc)?;
            let (q, r) = z.on(loc).qr(super::super::linalg::QrMode::Reduced);
            let kk = n.min(m);
            let rank = zd.len() as i64;
            let mut sq = batch.to_vec();
            sq.extend([kk, kk]);
            let eye = b
                .iota(S32, &sq, rank - 2)
                .on(loc)
                .compare(&b.iota(S32, &sq, rank - 1), Comparison::Eq)
                .on(loc)
                .convert(ty);
            let d = mul(&r, &eye, loc).on(loc).reduce_sum(&[rank - 1]);
            let mut sd = batch.to_vec();
            sd.extend([1, kk]);
            let x = mul(&q, &d.unary(UnaryOp::Sign, loc).on(loc).reshape(&sd), loc);
            if n < m {
                let mut perm: Vec<i64> = (0..rank - 2).collect();
                perm.extend([rank - 1, rank - 2]);
                Ok(x.on(loc).transpose(&perm))
            } else {
                Ok(x)
            }
        };
        go().unwrap_or_else(|f| f)
    }
}

// ---------------------------------------------------------------------------------
// Poisson: Knuth's product of uniforms below 10, Hörmann's transformed rejection
// (PTRS) above, both as whole-array loops as JAX writes them.

/// `lgamma` as XLA's CHLO lowering computes it (Lanczos' approximation with
/// g = 7 and 9 coefficients, Euler's reflection below 1/2), so that its bits are
/// JAX's.
fn lgamma_f32(x: &Op, loc: Loc) -> Op {
    const BASE: f64 = 0.999_999_999_999_809_9;
    const COEF: [f64; 8] = [
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let b = x.builder();
    let c = |v: f64| f32c(&b, v as f32, loc);
    let half = c(0.5);
    let reflect = x.on(loc).compare(&half, Comparison::Lt);
    let z = b.on(loc).select(
        &reflect,
        &x.unary(UnaryOp::Negate, loc),
        &sub(x, &c(1.0), loc),
    );
    let mut a = c(BASE);
    for (i, k) in COEF.iter().enumerate() {
        a = add(
            &a,
            &div(&c(*k), &add(&z, &c((i + 1) as f64), loc), loc),
            loc,
        );
    }
    let g_half = c(7.5);
    let t = add(&g_half, &z, loc);
    let log_t = add(
        &c(7.5f64.ln()),
        &div(&z, &g_half, loc).unary(UnaryOp::LogPlusOne, loc),
        loc,
    );
    let r = mul(
        &sub(&add(&z, &half, loc), &div(&t, &log_t, loc), loc),
        &log_t,
        loc,
    );
    let lg = add(
        &add(&c((2f64.ln() + std::f64::consts::PI.ln()) / 2.0), &r, loc),
        &a.unary(UnaryOp::Log, loc),
        loc,
    );
    let abs = x.unary(UnaryOp::Abs, loc);
    let frac = sub(&abs, &abs.unary(UnaryOp::Floor, loc), loc);
    let big = half.on(loc).compare(&frac, Comparison::Lt);
    let frac = b.on(loc).select(&big, &sub(&c(1.0), &frac, loc), &frac);
    let denom = mul(&c(std::f64::consts::PI), &frac, loc)
        .unary(UnaryOp::Sine, loc)
        .unary(UnaryOp::Log, loc);
    let refl = sub(&sub(&c(std::f64::consts::PI.ln()), &denom, loc), &lg, loc);
    let refl = b.on(loc).select(
        &denom.unary(UnaryOp::IsFinite, loc),
        &refl,
        &denom.unary(UnaryOp::Negate, loc),
    );
    let lg = b.on(loc).select(&reflect, &refl, &lg);
    let is_inf = abs.on(loc).compare(&c(f64::INFINITY), Comparison::Eq);
    b.on(loc).select(&is_inf, &c(f64::INFINITY), &lg)
}

impl Key {
    /// JAX's `_poisson_knuth`: count uniforms until their product drops below
    /// `exp(-lam)` (`lam` of `dims`; `f32` counts, minus one).
    fn poisson_knuth(&self, lam: &Op, dims: &[i64], what: &'static str, loc: Loc) -> Op {
        let b = self.b();
        let zeros = fc(&b, F32, 0.0, loc).on(loc).broadcast_to(dims);
        let neg_lam = lam.unary(UnaryOp::Negate, loc);
        let i0 = b.scalar_of(S32, Scalar::Int(0), loc);
        let imax = b.scalar_of(S32, Scalar::Int(i32::MAX.into()), loc);
        let s32 = b
            .scalar_of(S32, Scalar::Int(0), loc)
            .on(loc)
            .broadcast_to(dims);
        let (_, k, _, _) = b.on(loc).while_loop(
            (i0, s32, self.data.clone(), zeros),
            |(i, _, _, lp)| {
                let more = any_all(&lp.on(loc).compare(&neg_lam, Comparison::Gt), loc);
                more.bitwise(
                    BitwiseOp::And,
                    &i.on(loc).compare(&imax, Comparison::Lt),
                    loc,
                )
            },
            |(i, k, rng, lp)| {
                let key = Key {
                    data: rng,
                    imp: PrngImpl::Threefry2x32,
                };
                let ks = key.split(2, loc);
                let more = lp.on(loc).compare(&neg_lam, Comparison::Gt);
                let one = b.scalar_of(S32, Scalar::Int(1), loc);
                let k = b.on(loc).select(&more, &add(&k, &one, loc), &k);
                let u = ks[1]
                    .uniform_in(dims, F32, 0.0, 1.0, what, loc)
                    .unwrap_or_else(|f| f);
                let lp = add(&lp, &u.unary(UnaryOp::Log, loc), loc);
                (add(&i, &one, loc), k, ks[0].data.clone(), lp)
            },
        );
        sub(&k, &b.scalar_of(S32, Scalar::Int(1), loc), loc)
    }

    /// JAX's `_poisson_rejection` (Hörmann's PTRS) for `lam >= 10` (`f32` counts).
    fn poisson_rejection(&self, lam: &Op, dims: &[i64], what: &'static str, loc: Loc) -> Op {
        let b = self.b();
        let c = |v: f64| fc(&b, F32, v, loc);
        let log_lam = lam.unary(UnaryOp::Log, loc);
        let bb = add(
            &c(0.931),
            &mul(&c(2.53), &lam.unary(UnaryOp::Sqrt, loc), loc),
            loc,
        );
        let a = add(&c(-0.059), &mul(&c(0.02483), &bb, loc), loc);
        let inv_alpha = add(
            &c(1.1239),
            &div(&c(1.1328), &sub(&bb, &c(3.4), loc), loc),
            loc,
        );
        let v_r = sub(
            &c(0.9277),
            &div(&c(3.6224), &sub(&bb, &c(2.0), loc), loc),
            loc,
        );
        let k = self.rejection_loop(dims, what, loc, |u, v| {
            let us = sub(&c(0.5), &u.unary(UnaryOp::Abs, loc), loc);
            let k = add(
                &add(
                    &mul(
                        &add(&div(&mul(&c(2.0), &a, loc), &us, loc), &bb, loc),
                        u,
                        loc,
                    ),
                    lam,
                    loc,
                ),
                &c(0.43),
                loc,
            )
            .unary(UnaryOp::Floor, loc);
            let s = div(
                &mul(v, &inv_alpha, loc),
                &add(&div(&a, &mul(&us, &us, loc), loc), &bb, loc),
                loc,
            )
            .unary(UnaryOp::Log, loc);
            let t = sub(
                &add(
                    &lam.unary(UnaryOp::Negate, loc),
                    &mul(&k, &log_lam, loc),
                    loc,
                ),
                &lgamma_f32(&add(&k, &c(1.0), loc), loc),
                loc,
            );
            let and = |x: &Op, y: &Op| x.bitwise(BitwiseOp::And, y, loc);
            let or = |x: &Op, y: &Op| x.bitwise(BitwiseOp::Or, y, loc);
            let accept1 = and(
                &us.on(loc).compare(&c(0.07), Comparison::Ge),
                &v.on(loc).compare(&v_r, Comparison::Le),
            );
            let reject = or(
                &k.on(loc).compare(&c(0.0), Comparison::Lt),
                &and(
                    &us.on(loc).compare(&c(0.013), Comparison::Lt),
                    &v.on(loc).compare(&us, Comparison::Gt),
                ),
            );
            let accept2 = s.on(loc).compare(&t, Comparison::Le);
            (k, or(&accept1, &and(&reject.on(loc).not(), &accept2)))
        });
        k.on(loc).convert(S32)
    }
}

impl Key {
    /// The loop of JAX's rejection samplers (`_poisson_rejection`, `_btrs`): each
    /// round splits the key in three (the next key, then the keys of `u` and
    /// `v`), draws `u − ½` and `v` uniform per element, and `round(u, v)` gives
    /// each element's candidate and whether it is accepted; an element keeps its
    /// first accepted candidate (−1 before), and the loop runs until every element
    /// has one.
    fn rejection_loop(
        &self,
        dims: &[i64],
        what: &'static str,
        loc: Loc,
        round: impl Fn(&Op, &Op) -> (Op, Op),
    ) -> Op {
        let b = self.b();
        let i0 = b.scalar_of(S32, Scalar::Int(0), loc);
        let imax = b.scalar_of(S32, Scalar::Int(i32::MAX.into()), loc);
        let k0 = fc(&b, F32, -1.0, loc).on(loc).broadcast_to(dims);
        let acc0 = b
            .scalar_of(ElementType::Pred, Scalar::Int(0), loc)
            .on(loc)
            .broadcast_to(dims);
        let (_, k, _, _) = b.on(loc).while_loop(
            (i0, k0, acc0, self.data.clone()),
            |(i, _, accepted, _)| {
                any_all(&accepted.on(loc).not(), loc).bitwise(
                    BitwiseOp::And,
                    &i.on(loc).compare(&imax, Comparison::Lt),
                    loc,
                )
            },
            |(i, k_out, accepted, key)| {
                let key = Key {
                    data: key,
                    imp: PrngImpl::Threefry2x32,
                };
                let ks = key.split(3, loc);
                let unif = |k: &Key| {
                    k.uniform_in(dims, F32, 0.0, 1.0, what, loc)
                        .unwrap_or_else(|f| f)
                };
                let u = sub(&unif(&ks[1]), &fc(&b, F32, 0.5, loc), loc);
                let (k, accept) = round(&u, &unif(&ks[2]));
                let k_out = b.on(loc).select(&accept, &k, &k_out);
                let one = b.scalar_of(S32, Scalar::Int(1), loc);
                (
                    add(&i, &one, loc),
                    k_out,
                    accepted.bitwise(BitwiseOp::Or, &accept, loc),
                    ks[0].data.clone(),
                )
            },
        );
        k
    }
}

/// Whether any element of a `pred` array is true.
fn any_all(m: &Op, loc: Loc) -> Op {
    let rank = m.dims().expect("an array").len() as i64;
    let b = m.builder();
    let f = b.scalar_of(ElementType::Pred, Scalar::Int(0), loc);
    let axes: Vec<i64> = (0..rank).collect();
    m.on(loc)
        .reduce(&f, &axes, |x, y| x.bitwise(BitwiseOp::Or, y, loc))
}

impl Op {
    /// `jax.random.poisson(key, lam, dims)`: `s32` Poisson samples with rate `lam`
    /// (`f32`, broadcasting to `dims`). As JAX: Knuth's product of uniforms where
    /// `lam < 10` (or NaN), Hörmann's transformed rejection (PTRS, with XLA's
    /// Lanczos `lgamma`) elsewhere, both over the whole array from the same key,
    /// and 0 where `lam = 0`. Threefry keys only, as in JAX.
    #[track_caller]
    pub fn poisson<'a>(&self, lam: impl Into<Param<'a>>, dims: &[i64], ty: ElementType) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "poisson";
        let lam = lam.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[S32], dims, loc)?;
            if k.imp != PrngImpl::Threefry2x32 {
                return Err(fail(
                    &b,
                    WHAT,
                    &[],
                    ShapeErrorKind::Dimension,
                    "is only built for threefry keys (u32[2]), as in JAX".into(),
                    loc,
                ));
            }
            let lam = param_op(&b, lam, F32, Some(dims), WHAT, "lam", loc)?
                .on(loc)
                .broadcast_to(dims);
            let c = |v: f64| fc(&b, F32, v, loc);
            let nan = lam.on(loc).compare(&lam, Comparison::Ne);
            let knuth = nan.bitwise(
                BitwiseOp::Or,
                &lam.on(loc).compare(&c(10.0), Comparison::Lt),
                loc,
            );
            let full = |v: f64| c(v).on(loc).broadcast_to(dims);
            let lam_k = b.on(loc).select(&knuth, &lam, &full(0.0));
            let lam_r = b.on(loc).select(&knuth, &full(1e5), &lam);
            let r = b.on(loc).select(
                &knuth,
                &k.poisson_knuth(&lam_k, dims, WHAT, loc),
                &k.poisson_rejection(&lam_r, dims, WHAT, loc),
            );
            let zero = lam.on(loc).compare(&c(0.0), Comparison::Eq);
            let zeros = b
                .scalar_of(S32, Scalar::Int(0), loc)
                .on(loc)
                .broadcast_to(dims);
            Ok(b.on(loc).select(&zero, &zeros, &r))
        };
        go().unwrap_or_else(|f| f)
    }
}

// ---------------------------------------------------------------------------------
// Binomial: geometric inversion where `n·q <= 10`, Hörmann's BTRS elsewhere.

/// JAX's `_stirling_approx_tail`: the tail of Stirling's series at `k` (`f32`),
/// from a table for `k <= 9`.
fn stirling_tail(k: &Op, loc: Loc) -> Op {
    const TABLE: [f64; 10] = [
        0.081_061_466_795_327_2,
        0.041_340_695_955_409_2,
        0.027_677_925_684_998_3,
        0.020_790_672_103_765_09,
        0.016_644_691_189_821_1,
        0.013_876_128_823_070_7,
        0.011_896_709_945_891_7,
        0.010_411_265_261_972,
        0.009_255_462_182_712_73,
        0.008_330_563_433_362_87,
    ];
    let b = k.builder();
    let c = |v: f64| f32c(&b, v as f32, loc);
    let use_table = k.on(loc).compare(&c(9.0), Comparison::Le);
    let kc = bin(
        &bin(&c(0.0), BinaryOp::Maximum, k, loc),
        BinaryOp::Minimum,
        &c(9.0),
        loc,
    );
    let k1 = add(&kc, &c(1.0), loc);
    let kp1sq = mul(&k1, &k1, loc);
    let approx = div(
        &sub(
            &c(1.0 / 12.0),
            &div(
                &sub(&c(1.0 / 360.0), &div(&c(1.0 / 1260.0), &kp1sq, loc), loc),
                &kp1sq,
                loc,
            ),
            loc,
        ),
        &k1,
        loc,
    );
    let idx = kc.unary(UnaryOp::Floor, loc).on(loc).convert(S32);
    let mut tab = c(TABLE[9]);
    for (i, v) in TABLE.iter().enumerate().take(9).rev() {
        let here = idx.on(loc).compare(
            &b.scalar_of(S32, Scalar::Int(i as i64), loc),
            Comparison::Eq,
        );
        tab = b.on(loc).select(&here, &c(*v), &tab);
    }
    b.on(loc).select(&use_table, &tab, &approx)
}

impl Key {
    /// JAX's `_binomial_inversion`: count geometric waiting times until they pass
    /// `count`.
    fn binomial_inversion(
        &self,
        count: &Op,
        prob: &Op,
        dims: &[i64],
        what: &'static str,
        loc: Loc,
    ) -> Op {
        let b = self.b();
        let c = |v: f64| f32c(&b, v as f32, loc);
        let log_q = prob
            .unary(UnaryOp::Negate, loc)
            .unary(UnaryOp::LogPlusOne, loc);
        let zeros = c(0.0).on(loc).broadcast_to(dims);
        let i0 = b.scalar_of(S32, Scalar::Int(0), loc);
        let imax = b.scalar_of(S32, Scalar::Int(i32::MAX.into()), loc);
        let (_, k, _, _) = b.on(loc).while_loop(
            (i0, zeros.clone(), zeros, self.data.clone()),
            |(i, _, gs, _)| {
                any_all(&gs.on(loc).compare(count, Comparison::Le), loc).bitwise(
                    BitwiseOp::And,
                    &i.on(loc).compare(&imax, Comparison::Lt),
                    loc,
                )
            },
            |(i, ng, gs, key)| {
                let key = Key {
                    data: key,
                    imp: PrngImpl::Threefry2x32,
                };
                let ks = key.split(2, loc);
                let more = gs.on(loc).compare(count, Comparison::Le);
                let ng = b.on(loc).select(&more, &add(&ng, &c(1.0), loc), &ng);
                let u = ks[0]
                    .uniform_in(dims, F32, 0.0, 1.0, what, loc)
                    .unwrap_or_else(|f| f);
                let geom = div(&u.unary(UnaryOp::Log, loc), &log_q, loc).unary(UnaryOp::Ceil, loc);
                let one = b.scalar_of(S32, Scalar::Int(1), loc);
                (
                    add(&i, &one, loc),
                    ng,
                    add(&gs, &geom, loc),
                    ks[1].data.clone(),
                )
            },
        );
        sub(&k, &c(1.0), loc)
    }

    /// JAX's `_btrs`: Hörmann's transformed rejection with squeeze.
    fn binomial_btrs(
        &self,
        count: &Op,
        prob: &Op,
        dims: &[i64],
        what: &'static str,
        loc: Loc,
    ) -> Op {
        let b = self.b();
        let c = |v: f64| f32c(&b, v as f32, loc);
        let one_m_p = sub(&c(1.0), prob, loc);
        let stddev = mul(&mul(count, prob, loc), &one_m_p, loc).unary(UnaryOp::Sqrt, loc);
        let bb = add(&c(1.15), &mul(&c(2.53), &stddev, loc), loc);
        let a = add(
            &add(&c(-0.0873), &mul(&c(0.0248), &bb, loc), loc),
            &mul(&c(0.01), prob, loc),
            loc,
        );
        let cc = add(&mul(count, prob, loc), &c(0.5), loc);
        let v_r = sub(&c(0.92), &div(&c(4.2), &bb, loc), loc);
        let r = div(prob, &one_m_p, loc);
        let alpha = mul(&add(&c(2.83), &div(&c(5.1), &bb, loc), loc), &stddev, loc);
        let m = mul(&add(count, &c(1.0), loc), prob, loc).unary(UnaryOp::Floor, loc);

        self.rejection_loop(dims, what, loc, |u, v| {
            let us = sub(&c(0.5), &u.unary(UnaryOp::Abs, loc), loc);
            let and = |x: &Op, y: &Op| x.bitwise(BitwiseOp::And, y, loc);
            let or = |x: &Op, y: &Op| x.bitwise(BitwiseOp::Or, y, loc);
            let accept1 = and(
                &us.on(loc).compare(&c(0.07), Comparison::Ge),
                &v.on(loc).compare(&v_r, Comparison::Le),
            );
            let k = add(
                &mul(
                    &add(&div(&mul(&c(2.0), &a, loc), &us, loc), &bb, loc),
                    u,
                    loc,
                ),
                &cc,
                loc,
            )
            .unary(UnaryOp::Floor, loc);
            let reject = or(
                &k.on(loc).compare(&c(0.0), Comparison::Lt),
                &k.on(loc).compare(count, Comparison::Gt),
            );
            let v = div(
                &mul(v, &alpha, loc),
                &add(&div(&a, &mul(&us, &us, loc), loc), &bb, loc),
                loc,
            )
            .unary(UnaryOp::Log, loc);
            let log = |x: &Op| x.unary(UnaryOp::Log, loc);
            let n_m_1 = add(&sub(count, &m, loc), &c(1.0), loc);
            let n_k_1 = add(&sub(count, &k, loc), &c(1.0), loc);
            let t1 = mul(
                &add(&m, &c(0.5), loc),
                &log(&div(&add(&m, &c(1.0), loc), &mul(&r, &n_m_1, loc), loc)),
                loc,
            );
            let t2 = mul(
                &add(count, &c(1.0), loc),
                &log(&div(&n_m_1, &n_k_1, loc)),
                loc,
            );
            let t3 = mul(
                &add(&k, &c(0.5), loc),
                &log(&div(&mul(&r, &n_k_1, loc), &add(&k, &c(1.0), loc), loc)),
                loc,
            );
            let ub = sub(
                &sub(
                    &add(
                        &add(
                            &add(&add(&t1, &t2, loc), &t3, loc),
                            &stirling_tail(&m, loc),
                            loc,
                        ),
                        &stirling_tail(&sub(count, &m, loc), loc),
                        loc,
                    ),
                    &stirling_tail(&k, loc),
                    loc,
                ),
                &stirling_tail(&sub(count, &k, loc), loc),
                loc,
            );
            let accept2 = v.on(loc).compare(&ub, Comparison::Le);
            (k, or(&accept1, &and(&reject.on(loc).not(), &accept2)))
        })
    }
}

impl Op {
    /// `jax.random.binomial(key, n, p, dims)`: `f32` counts of successes in `n`
    /// Bernoulli(`p`) trials (`n`, `p` `f32`, broadcasting to `dims`). As JAX:
    /// with `q = min(p, 1 - p)`, geometric inversion where `n·q <= 10`, Hörmann's
    /// BTRS elsewhere, `n - x` where `p >= 1/2`; NaN for a negative or NaN `n` or
    /// a NaN `p` (or `q < 0`), infinity for an infinite `n`. Threefry keys only.
    #[track_caller]
    pub fn binomial<'a>(
        &self,
        n: impl Into<Param<'a>>,
        p: impl Into<Param<'a>>,
        dims: &[i64],
        ty: ElementType,
    ) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "binomial";
        let (n, p) = (n.into(), p.into());
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            if k.imp != PrngImpl::Threefry2x32 {
                return Err(fail(
                    &b,
                    WHAT,
                    &[],
                    ShapeErrorKind::Dimension,
                    "is only built for threefry keys (u32[2])".into(),
                    loc,
                ));
            }
            let count = param_op(&b, n, F32, Some(dims), WHAT, "n", loc)?
                .on(loc)
                .broadcast_to(dims);
            let prob = param_op(&b, p, F32, Some(dims), WHAT, "p", loc)?
                .on(loc)
                .broadcast_to(dims);
            Ok(k.binomial(&count, &prob, dims, WHAT, loc))
        };
        go().unwrap_or_else(|f| f)
    }
}

impl Key {
    /// JAX's `_binomial` of `count` and `prob` (`f32` of `dims`).
    fn binomial(&self, count: &Op, prob: &Op, dims: &[i64], what: &'static str, loc: Loc) -> Op {
        let (k, b) = (self, self.b());
        let (count, prob) = (count.clone(), prob.clone());
        {
            let c = |v: f64| f32c(&b, v as f32, loc);
            let full = |v: f64| c(v).on(loc).broadcast_to(dims);
            let sel = |m: &Op, x: &Op, y: &Op| b.on(loc).select(m, x, y);
            let and = |x: &Op, y: &Op| x.bitwise(BitwiseOp::And, y, loc);
            let or = |x: &Op, y: &Op| x.bitwise(BitwiseOp::Or, y, loc);
            let isnan = |x: &Op| x.on(loc).compare(x, Comparison::Ne);
            let p_lt_half = prob.on(loc).compare(&c(0.5), Comparison::Lt);
            let q = sel(&p_lt_half, &prob, &sub(&c(1.0), &prob, loc));
            let count_bad = or(
                &isnan(&count),
                &count.on(loc).compare(&c(0.0), Comparison::Lt),
            );
            let count_inf = count
                .unary(UnaryOp::Abs, loc)
                .on(loc)
                .compare(&c(f64::INFINITY), Comparison::Eq);
            let q_nan = isnan(&q);
            let q_neg = q.on(loc).compare(&c(0.0), Comparison::Lt);
            let q = sel(&or(&q_nan, &q_neg), &full(0.01), &q);
            let use_inv = or(
                &count_bad,
                &mul(&count, &q, loc)
                    .on(loc)
                    .compare(&c(10.0), Comparison::Le),
            );
            let count = count.unary(UnaryOp::Floor, loc);
            let count_inv = sel(&use_inv, &count, &full(0.0));
            let count_btrs = sel(&use_inv, &full(1e4), &count);
            let q_btrs = sel(&use_inv, &full(0.5), &q);
            let samples = sel(
                &use_inv,
                &k.binomial_inversion(&count_inv, &q, dims, what, loc),
                &k.binomial_btrs(&count_btrs, &q_btrs, dims, what, loc),
            );
            let invalid = or(&or(&q_neg, &q_nan), &count_bad);
            let samples = sel(&invalid, &full(f64::NAN), &samples);
            let samples = sel(
                &and(&count_inf, &invalid.on(loc).not()),
                &full(f64::INFINITY),
                &samples,
            );
            let keep = or(&or(&or(&p_lt_half, &count_bad), &q_nan), &count_inf);
            sel(&keep, &samples, &sub(&count, &samples, loc))
        }
    }
}

impl Op {
    /// `jax.random.multinomial(key, n, p, shape=dims)`: `f32` counts of `n` draws
    /// over the categories of `p` (`f32[..., k]`, broadcasting to `dims`, whose last
    /// dimension is `k`; `n` broadcasts to `dims` without it). As JAX: a binomial
    /// draw per category (keys from `split(key, k)`) of what remains, with the
    /// probability relative to the categories left (a reverse cumulative sum).
    #[track_caller]
    pub fn multinomial<'a>(
        &self,
        n: impl Into<Param<'a>>,
        p: &Op,
        dims: &[i64],
        ty: ElementType,
    ) -> Op {
        let loc = Location::caller();
        const WHAT: &str = "multinomial";
        let n = n.into();
        let go = || {
            let (k, b) = self.start(WHAT, ty, &[F32], dims, loc)?;
            if k.imp != PrngImpl::Threefry2x32 || dims.is_empty() {
                let why = if dims.is_empty() {
                    "dims end with the number of categories"
                } else {
                    "is only built for threefry keys (u32[2])"
                };
                return Err(fail(
                    &b,
                    WHAT,
                    &[],
                    ShapeErrorKind::Dimension,
                    why.into(),
                    loc,
                ));
            }
            let r = dims.len() - 1;
            let batch = &dims[..r];
            let cats = dims[r];
            let count = param_op(&b, n, F32, Some(batch), WHAT, "n", loc)?
                .on(loc)
                .broadcast_to(batch);
            let p = param_op(&b, Param::Array(p), F32, Some(dims), WHAT, "p", loc)?
                .on(loc)
                .broadcast_to(dims);
            // Categories first.
            let mut perm = vec![r as i64];
            perm.extend(0..r as i64);
            let p = p.on(loc).transpose(&perm);
            let zero = f32c(&b, 0.0, loc);
            let mut win = vec![WindowDim::new(1, 1); r + 1];
            win[0] = WindowDim {
                padding_high: cats - 1,
                ..WindowDim::new(cats, 1)
            };
            let left = p.reduce_window(&zero, &win, |x, y| x.binary(BinaryOp::Add, y, loc));
            let is0 = left.on(loc).compare(&zero, Comparison::Eq);
            let ones = f32c(&b, 1.0, loc)
                .on(loc)
                .broadcast_to(&left.dims().map_err(|_| left.clone())?);
            let ratios = div(&p, &b.on(loc).select(&is0, &ones, &left), loc);
            let keys = k.split(cats, loc);
            let mut rem = count;
            let mut counts = Vec::new();
            for (i, key) in keys.iter().enumerate() {
                let i = i as i64;
                let mut lo = vec![0; r + 1];
                lo[0] = i;
                let mut hi = vec![cats];
                hi.extend(batch);
                hi[0] = i + 1;
                let ratio = ratios
                    .on(loc)
                    .slice(&lo, &hi, &vec![1; r + 1])
                    .on(loc)
                    .reshape(batch);
                let ratio = bin(
                    &bin(&zero, BinaryOp::Maximum, &ratio, loc),
                    BinaryOp::Minimum,
                    &f32c(&b, 1.0, loc),
                    loc,
                );
                let cnt = key.binomial(&rem, &ratio, batch, WHAT, loc);
                rem = sub(&rem, &cnt, loc);
                let mut one = batch.to_vec();
                one.push(1);
                counts.push(cnt.on(loc).reshape(&one));
            }
            let refs: Vec<&Op> = counts.iter().collect();
            Ok(b.on(loc).concatenate(&refs, r as i64))
        };
        go().unwrap_or_else(|f| f)
    }
}
