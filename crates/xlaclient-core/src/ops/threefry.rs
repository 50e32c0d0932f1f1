//! JAX's default PRNG, bit for bit: keys are `u32[2]`, and `threefry_split`,
//! `threefry_fold_in`, `threefry_bits` and `threefry_uniform` compute what
//! `jax.random.split`, `fold_in`, `bits` and `uniform` compute for the same key and
//! shape (JAX's Threefry-2x32 with `jax_threefry_partitionable`, its default since
//! 0.5). Built from the crate's own ops, so it runs inside any program, loops
//! included. Checked against vectors recorded from jax 0.10.2
//! (`scripts/record_jax_random.py`).

use std::panic::Location;

use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ops::elementwise::{BinaryOp, Scalar};
use crate::shape::{ElementType, Shape};

const U32: ElementType = ElementType::U32;

fn u32c(b: &Builder, v: u32, loc: &'static Location<'static>) -> Op {
    b.scalar_of(U32, Scalar::Int(v.into()), loc)
}

/// `x << d | x >> (32 - d)` on `u32`.
fn rotl(x: &Op, d: u32, loc: &'static Location<'static>) -> Op {
    let b = x.builder();
    let l = x.bitwise(
        crate::ops::bitwise::BitwiseOp::ShiftLeft,
        &u32c(&b, d, loc),
        loc,
    );
    let r = x.bitwise(
        crate::ops::bitwise::BitwiseOp::ShiftRightLogical,
        &u32c(&b, 32 - d, loc),
        loc,
    );
    l.bitwise(crate::ops::bitwise::BitwiseOp::Or, &r, loc)
}

/// Threefry-2x32's rotation amounts: four rounds with the first set, four with the
/// second, alternately.
const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

/// The Threefry-2x32 hash (20 rounds) of counters `(x0, x1)` under key `(k0, k1)`
/// (`u32` scalars and equal-shape `u32` arrays).
///
/// Written as JAX lowers it for the builder's platform
/// ([`Builder::unroll_threefry`]): by default the rounds run as a 5-step
/// `fori_loop` of 4 rounds each, carrying the key schedule and the rotation
/// amounts (JAX's CPU lowering: XLA's CPU backend spends minutes generating code
/// for the unrolled hash fused across many draws); unrolled, all 20 rounds are
/// written out (JAX's GPU lowering). Both compute the same bits.
pub(crate) fn threefry2x32(
    k0: &Op,
    k1: &Op,
    x0: &Op,
    x1: &Op,
    loc: &'static Location<'static>,
) -> (Op, Op) {
    use crate::ops::bitwise::BitwiseOp::Xor;
    let b = k0.builder();
    let add = |a: &Op, c: &Op| a.binary(BinaryOp::Add, c, loc);
    let ks = [
        k0.clone(),
        k1.clone(),
        k0.bitwise(Xor, k1, loc)
            .bitwise(Xor, &u32c(&b, 0x1BD1_1BDA, loc), loc),
    ];
    let x = [add(x0, &ks[0]), add(x1, &ks[1])];
    if b.g.borrow().threefry_unrolled {
        unrolled_rounds(x, &ks, loc)
    } else {
        rolled_rounds(x, &ks, loc)
    }
}

/// Four rounds with rotation amounts `rot`, then the key injection of step `i`.
fn rounds_then_inject(
    mut x: [Op; 2],
    rot: &[Op; 4],
    inject: [&Op; 2],
    i: &Op,
    loc: &'static Location<'static>,
) -> [Op; 2] {
    use crate::ops::bitwise::BitwiseOp::{Or, ShiftLeft, ShiftRightLogical, Xor};
    let add = |a: &Op, c: &Op| a.binary(BinaryOp::Add, c, loc);
    let b = x[0].builder();
    for r in rot {
        let s = add(&x[0], &x[1]);
        let left = x[1].bitwise(ShiftLeft, r, loc);
        let back = u32c(&b, 32, loc).binary(BinaryOp::Subtract, r, loc);
        let right = x[1].bitwise(ShiftRightLogical, &back, loc);
        let t = left.bitwise(Or, &right, loc).bitwise(Xor, &s, loc);
        x = [s, t];
    }
    let one = u32c(&b, 1, loc);
    [
        add(&x[0], inject[0]),
        add(&add(&x[1], inject[1]), &add(i, &one)),
    ]
}

/// The rounds as a 5-step loop carrying the key schedule (rotated left each step)
/// and the two rotation sets (swapped each step), as JAX's rolled lowering does.
fn rolled_rounds(x: [Op; 2], ks: &[Op; 3], loc: &'static Location<'static>) -> (Op, Op) {
    let b = x[0].builder();
    let rot = |set: usize| b.constant_vec(&ROTATIONS[set]);
    let init = (
        (x[0].clone(), x[1].clone()),
        (ks[1].clone(), ks[2].clone(), ks[0].clone()),
        (rot(0), rot(1)),
    );
    let ((a, c), _, _) = b.fori_loop(0, 5, init, |i, (x, ks, rots)| {
        let i = i.on(loc).convert(U32);
        let r: [Op; 4] = std::array::from_fn(|j| {
            let j = j as i64;
            rots.0
                .on(loc)
                .slice(&[j], &[j + 1], &[1])
                .on(loc)
                .reshape(&[])
        });
        let [s, t] = rounds_then_inject([x.0, x.1], &r, [&ks.0, &ks.1], &i, loc);
        ((s, t), (ks.1, ks.2, ks.0), (rots.1, rots.0))
    });
    (a, c)
}

/// All 20 rounds written out.
fn unrolled_rounds(mut x: [Op; 2], ks: &[Op; 3], loc: &'static Location<'static>) -> (Op, Op) {
    use crate::ops::bitwise::BitwiseOp::Xor;
    let b = x[0].builder();
    let add = |a: &Op, c: &Op| a.binary(BinaryOp::Add, c, loc);
    let rot = ROTATIONS;
    for i in 0..5usize {
        for r in rot[i % 2] {
            let s = add(&x[0], &x[1]);
            let t = rotl(&x[1], r, loc).bitwise(Xor, &s, loc);
            x = [s, t];
        }
        let inject = u32c(&b, i as u32 + 1, loc);
        x = [
            add(&x[0], &ks[(i + 1) % 3]),
            add(&add(&x[1], &ks[(i + 2) % 3]), &inject),
        ];
    }
    let [a, c] = x;
    (a, c)
}

impl Builder {
    /// Whether the Threefry hash behind every sampler is written with its 20 rounds
    /// unrolled (`true`: JAX's lowering for GPUs, fastest to run) or as a 5-step
    /// loop (`false`, the default: JAX's lowering for the CPU, where XLA takes
    /// minutes to generate code for many unrolled hashes fused together). The bits
    /// are the same either way. [`ClientExt::jit`](crate::ClientExt::jit) chooses
    /// by the client's platform; set it before building samplers.
    pub fn unroll_threefry(&self, on: bool) {
        self.g.borrow_mut().threefry_unrolled = on;
    }

    /// `jax.random.key_data(jax.random.PRNGKey(seed))` with JAX's default 32-bit
    /// integers: the key `[0, seed]`. (With `jax_enable_x64`, JAX keys a 64-bit seed
    /// as `[high word, low word]`: build that with `constant_vec`.)
    #[track_caller]
    pub fn prng_key(&self, seed: u32) -> Op {
        self.constant_vec(&[0, seed])
    }
}

impl Op {
    /// The key's two words as `u32` scalars, or why this is not a key.
    pub(crate) fn key_words(
        &self,
        what: &'static str,
        loc: &'static Location<'static>,
    ) -> Result<(Op, Op), Op> {
        match self.shape() {
            Ok(s) if s == Shape::of::<u32>(&[2]) => {}
            Ok(s) => {
                return Err(self.builder().fail(
                    ShapeError::new(
                        what,
                        &[&s],
                        ShapeErrorKind::Dimension,
                        "a threefry key is u32[2]",
                    ),
                    loc,
                ));
            }
            Err(_) => return Err(self.clone()),
        }
        let w = |i: i64| {
            self.on(loc)
                .slice(&[i], &[i + 1], &[1])
                .on(loc)
                .reshape(&[])
        };
        Ok((w(0), w(1)))
    }

    /// The hash of the counters 0, 1, 2, … over `dims` (JAX's `iota_2x32_shape`: the
    /// flat index's high word, always 0 here, and low word).
    pub(crate) fn hash_iota(
        &self,
        dims: &[i64],
        what: &'static str,
        loc: &'static Location<'static>,
    ) -> Result<(Op, Op), Op> {
        let (k0, k1) = self.key_words(what, loc)?;
        let n = dims.iter().try_fold(1i64, |a, d| a.checked_mul(*d));
        if n.is_none_or(|n| n > u32::MAX as i64) {
            return Err(self.builder().fail(
                ShapeError::new(
                    what,
                    &[],
                    ShapeErrorKind::Dimension,
                    format!("{dims:?} holds more than 2^32 values"),
                ),
                loc,
            ));
        }
        let b = self.builder();
        let lo = b.iota(U32, &[n.expect("checked")], 0).on(loc).reshape(dims);
        let hi = u32c(&b, 0, loc).on(loc).broadcast_to(dims);
        Ok(threefry2x32(&k0, &k1, &hi, &lo, loc))
    }

    /// `jax.random.split(key, n)`: `n` new keys, `u32[n, 2]`.
    #[track_caller]
    pub fn threefry_split(&self, n: i64) -> Op {
        let loc = Location::caller();
        match self.hash_iota(&[n], "threefry_split", loc) {
            Ok((a, c)) => {
                let b = self.builder();
                b.on(loc).concatenate(
                    &[&a.on(loc).reshape(&[n, 1]), &c.on(loc).reshape(&[n, 1])],
                    1,
                )
            }
            Err(f) => f,
        }
    }

    /// `jax.random.fold_in(key, data)`: a new key mixing in `data` (a `u32` or `s32`
    /// scalar, taken as its 32 bits).
    #[track_caller]
    pub fn threefry_fold_in(&self, data: &Op) -> Op {
        let loc = Location::caller();
        let (k0, k1) = match self.key_words("threefry_fold_in", loc) {
            Ok(k) => k,
            Err(f) => return f,
        };
        let d = match data.element_type() {
            Ok(ElementType::U32) => data.clone(),
            Ok(ElementType::S32) => data.on(loc).bitcast_convert(U32),
            _ => {
                let s = data.shape().ok();
                let shapes: Vec<&Shape> = s.iter().collect();
                return self.builder().fail(
                    ShapeError::new(
                        "threefry_fold_in",
                        &shapes,
                        ShapeErrorKind::ElementType,
                        "data must be a u32 or s32 scalar",
                    ),
                    loc,
                );
            }
        };
        // The counters are JAX's seed of `data`: (0, data).
        let zero = u32c(&self.builder(), 0, loc);
        let (a, c) = threefry2x32(&k0, &k1, &zero, &d, loc);
        self.builder()
            .concatenate(&[&a.reshape(&[1]), &c.reshape(&[1])], 0)
    }

    /// `jax.random.bits(key, dims)` (32-bit): random `u32` of `dims`.
    #[track_caller]
    pub fn threefry_bits(&self, dims: &[i64]) -> Op {
        let loc = Location::caller();
        match self.hash_iota(dims, "threefry_bits", loc) {
            Ok((a, c)) => a.bitwise(crate::ops::bitwise::BitwiseOp::Xor, &c, loc),
            Err(f) => f,
        }
    }

    /// `jax.random.uniform(key, dims, minval=lo, maxval=hi)` as `f32`: 23 random
    /// mantissa bits over 1.0's exponent, minus 1, scaled into `[lo, hi)`.
    #[track_caller]
    pub fn threefry_uniform(&self, dims: &[i64], lo: f32, hi: f32) -> Op {
        use crate::ops::bitwise::BitwiseOp::{Or, ShiftRightLogical};
        let loc = Location::caller();
        let bits = match self.hash_iota(dims, "threefry_uniform", loc) {
            Ok((a, c)) => a.bitwise(crate::ops::bitwise::BitwiseOp::Xor, &c, loc),
            Err(f) => return f,
        };
        let b = self.builder();
        let mant = bits.bitwise(ShiftRightLogical, &u32c(&b, 9, loc), loc);
        let one_bits = u32c(&b, 1.0f32.to_bits(), loc);
        let f = mant
            .bitwise(Or, &one_bits, loc)
            .on(loc)
            .bitcast_convert(ElementType::F32);
        let lo_c = b.scalar_of(ElementType::F32, Scalar::Float(lo.into()), loc);
        let span = b.scalar_of(ElementType::F32, Scalar::Float((hi - lo).into()), loc);
        let x = f
            .binary_scalar(BinaryOp::Subtract, Scalar::Float(1.0), false, loc)
            .binary(BinaryOp::Multiply, &span, loc)
            .binary(BinaryOp::Add, &lo_c, loc);
        x.binary(BinaryOp::Maximum, &lo_c, loc)
    }
}
