//! The two 8-bit float types JAX exposes (`jnp.float8_e5m2`, `jnp.float8_e4m3fn`),
//! as host values: one byte each, converted to and from wider floats by rounding to
//! nearest, ties to even, as `ml_dtypes` (JAX's host side) and XLA's `convert` do.
//!
//! - [`F8E5M2`]: 1 sign bit, 5 exponent bits (bias 15), 2 mantissa bits; the upper
//!   byte of an IEEE half, with infinities and NaN; largest finite 57344.
//! - [`F8E4M3FN`]: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; no
//!   infinities ("FN": finite), the all-ones pattern is NaN; largest finite 448, and
//!   a value beyond it rounds to NaN.
//!
//! ```
//! use xlaclient_pjrt::float8::{F8E4M3FN, F8E5M2};
//! assert_eq!(F8E5M2::from_f64(1.5).to_f64(), 1.5);
//! assert_eq!(F8E4M3FN::from_f64(0.3).to_f64(), 0.3125); // the nearest of 0.28125, 0.3125
//! assert!(F8E4M3FN::from_f64(500.0).to_f64().is_nan());
//! assert_eq!(F8E5M2::from_f64(1e6).to_f64(), f64::INFINITY);
//! ```

/// An `f8e5m2` value (its bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F8E5M2(pub u8);

/// An `f8e4m3fn` value (its bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F8E4M3FN(pub u8);

/// The layout of a small float: exponent and mantissa widths, and whether the
/// top exponent holds infinities (IEEE-like) or only the one NaN pattern (FN).
struct Layout {
    exp_bits: u32,
    man_bits: u32,
    ieee: bool,
}

const E5M2: Layout = Layout {
    exp_bits: 5,
    man_bits: 2,
    ieee: true,
};

const E4M3FN: Layout = Layout {
    exp_bits: 4,
    man_bits: 3,
    ieee: false,
};

impl Layout {
    fn bias(&self) -> i32 {
        (1 << (self.exp_bits - 1)) - 1
    }

    /// The NaN pattern (sign clear).
    fn nan(&self) -> u8 {
        if self.ieee {
            // Exponent all ones, mantissa's top bit.
            (((1u32 << self.exp_bits) - 1) << self.man_bits | 1 << (self.man_bits - 1)) as u8
        } else {
            0x7F
        }
    }

    /// The largest finite pattern (sign clear).
    fn max_finite(&self) -> u8 {
        if self.ieee {
            ((((1u32 << self.exp_bits) - 2) << self.man_bits) | ((1 << self.man_bits) - 1)) as u8
        } else {
            0x7E
        }
    }

    fn decode(&self, b: u8) -> f64 {
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        let mag = (b & 0x7F) as u32;
        let e = mag >> self.man_bits;
        let m = mag & ((1 << self.man_bits) - 1);
        let top = (1 << self.exp_bits) - 1;
        if self.ieee && e == top {
            return if m == 0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        if !self.ieee && mag == 0x7F {
            return f64::NAN;
        }
        let scale = (1u64 << self.man_bits) as f64;
        if e == 0 {
            sign * (m as f64 / scale) * 2f64.powi(1 - self.bias())
        } else {
            sign * (1.0 + m as f64 / scale) * 2f64.powi(e as i32 - self.bias())
        }
    }

    fn encode(&self, v: f64) -> u8 {
        if v.is_nan() {
            return self.nan();
        }
        let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
        let a = v.abs();
        if a.is_infinite() {
            return sign | self.overflow();
        }
        // The value in units of the smallest subnormal, rounded to nearest even:
        // below the normal range that is the pattern itself; above, rescale per
        // binade.
        let min_exp = 1 - self.bias(); // exponent of the smallest normal
        let unit = 2f64.powi(min_exp - self.man_bits as i32);
        let pattern = if a < 2f64.powi(min_exp) {
            round_even(a / unit) as u32 // may reach the smallest normal: same bits
        } else {
            let e = a.log2().floor() as i32;
            // Guard against log2's rounding at binade edges.
            let e = if 2f64.powi(e) > a {
                e - 1
            } else if 2f64.powi(e + 1) <= a {
                e + 1
            } else {
                e
            };
            let scale = (1u64 << self.man_bits) as f64;
            let m = round_even(a / 2f64.powi(e) * scale) as u32; // in [scale, 2·scale]
            let biased = (e + self.bias()) as i64;
            if biased > (1 << self.exp_bits) {
                u32::MAX
            } else {
                // m == 2·scale carries into the next exponent by the addition.
                ((biased as u32) << self.man_bits) + (m - scale as u32)
            }
        };
        if pattern > self.max_finite() as u32 {
            return sign | self.overflow();
        }
        sign | pattern as u8
    }

    /// What a value beyond the largest finite one becomes: infinity, or NaN for
    /// the finite-only type (sign clear).
    fn overflow(&self) -> u8 {
        if self.ieee {
            (((1u32 << self.exp_bits) - 1) << self.man_bits) as u8
        } else {
            self.nan()
        }
    }
}

/// Round half to even.
fn round_even(x: f64) -> f64 {
    let r = x.round();
    if (r - x).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

macro_rules! float8 {
    ($t:ident, $layout:ident) => {
        impl $t {
            /// The value nearest to `v` (ties to even; out of range as the type
            /// says).
            pub fn from_f64(v: f64) -> $t {
                $t($layout.encode(v))
            }

            /// The value nearest to `v`.
            pub fn from_f32(v: f32) -> $t {
                $t::from_f64(v as f64)
            }

            /// The value, exactly.
            pub fn to_f64(self) -> f64 {
                $layout.decode(self.0)
            }

            /// The value, exactly.
            pub fn to_f32(self) -> f32 {
                self.to_f64() as f32
            }

            /// The bits as one little-endian byte (for the literal layout).
            pub fn to_le_bytes(self) -> [u8; 1] {
                [self.0]
            }

            /// The value of one little-endian byte.
            pub fn from_le_bytes(b: [u8; 1]) -> $t {
                $t(b[0])
            }
        }
    };
}

float8!(F8E5M2, E5M2);
float8!(F8E4M3FN, E4M3FN);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_round_trips() {
        for b in 0..=255u8 {
            for (name, dec, enc) in [
                (
                    "e5m2",
                    F8E5M2(b).to_f64(),
                    F8E5M2::from_f64(F8E5M2(b).to_f64()).0,
                ),
                (
                    "e4m3fn",
                    F8E4M3FN(b).to_f64(),
                    F8E4M3FN::from_f64(F8E4M3FN(b).to_f64()).0,
                ),
            ] {
                if dec.is_nan() {
                    continue;
                }
                assert_eq!(enc, b, "{name} {b:#04x} = {dec}");
            }
        }
    }

    #[test]
    fn e5m2_is_the_top_byte_of_an_f16() {
        for b in 0..=255u8 {
            let h = half::f16::from_bits((b as u16) << 8).to_f64();
            let v = F8E5M2(b).to_f64();
            assert!(h == v || (h.is_nan() && v.is_nan()), "{b:#04x}: {h} vs {v}");
        }
    }

    #[test]
    fn rounding_ties_to_even_and_range_ends() {
        // 1.125 lies halfway between 1.0 and 1.25 in e5m2: even mantissa (1.0).
        assert_eq!(F8E5M2::from_f64(1.125).to_f64(), 1.0);
        assert_eq!(F8E5M2::from_f64(1.375).to_f64(), 1.5);
        assert_eq!(F8E4M3FN::from_f64(448.0).to_f64(), 448.0);
        assert_eq!(F8E4M3FN::from_f64(-448.0).to_f64(), -448.0);
        assert!(F8E4M3FN::from_f64(465.0).to_f64().is_nan());
        assert_eq!(F8E4M3FN::from_f64(2f64.powi(-9)).to_f64(), 2f64.powi(-9));
        assert_eq!(F8E4M3FN::from_f64(2f64.powi(-11)).to_f64(), 0.0);
        assert_eq!(F8E5M2::from_f64(57344.0).to_f64(), 57344.0);
        assert_eq!(F8E5M2::from_f64(61440.0).to_f64(), f64::INFINITY);
        assert_eq!(F8E5M2::from_f64(-0.0).0, 0x80);
    }
}
