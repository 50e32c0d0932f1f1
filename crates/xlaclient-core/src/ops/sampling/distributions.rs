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
            .at(loc)
            .compare(&f32c(&b, 0.5, loc), Comparison::Lt)
            .at(loc)
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
            .at(loc)
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
                l.at(loc).broadcast_to(dims),
                m.at(loc).broadcast_to(dims),
                r.at(loc).broadcast_to(dims),
            );
            let fcut = div(&sub(&m, &l, loc), &sub(&r, &l, loc), loc);
            let u = k.uniform_in(dims, ty, 0.0, 1.0, WHAT, loc)?;
            let s1 = mul(&mul(&u, &sub(&r, &l, loc), loc), &sub(&m, &l, loc), loc);
            let out1 = add(&l, &s1.unary(UnaryOp::Sqrt, loc), loc);
            let v = sub(&fc(&b, ty, 1.0, loc), &u, loc);
            let s2 = mul(&mul(&v, &sub(&r, &l, loc), loc), &sub(&r, &m, loc), loc);
            let out2 = sub(&r, &s2.unary(UnaryOp::Sqrt, loc), loc);
            let below = u.at(loc).compare(&fcut, Comparison::Lt);
            Ok(b.at(loc).select(&below, &out1, &out2))
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
            let zero = u.at(loc).compare(&fc(&b, pty, 0.0, loc), Comparison::Eq);
            let one = fc(&b, pty, 1.0, loc).at(loc).broadcast_to(dims);
            let u = b.at(loc).select(&zero, &one, &u);
            let log_q = p
                .unary(UnaryOp::Negate, loc)
                .unary(UnaryOp::LogPlusOne, loc)
                .at(loc)
                .broadcast_to(dims);
            let g = div(&u.unary(UnaryOp::Log, loc), &log_q, loc).unary(UnaryOp::Floor, loc);
            Ok(add(&g, &fc(&b, pty, 1.0, loc), loc).at(loc).convert(ty))
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
                .at(loc)
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
                .at(loc)
                .compare(&div(&mu, &add(&mu, &x, loc), loc), Comparison::Le);
            Ok(b.at(loc).select(&keep, &x, &div(&mu_sq, &x, loc)))
        };
        go().unwrap_or_else(|f| f)
    }
}
