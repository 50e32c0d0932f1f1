//! Element types and shapes, shared by the graph builder and the PJRT runtime.

use std::fmt;

use smallvec::SmallVec;

use crate::proto;

/// The element type of an array, named as XLA names it (`f32`, `s32`, `pred`, …).
///
/// The discriminants are not meaningful; use [`ElementType::primitive_type`] for XLA's
/// `PrimitiveType` number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// Boolean (`pred`), one byte per element.
    Pred,
    /// Signed 8-bit integer.
    S8,
    /// Signed 16-bit integer.
    S16,
    /// Signed 32-bit integer.
    S32,
    /// Signed 64-bit integer.
    S64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE half precision float.
    F16,
    /// bfloat16.
    Bf16,
    /// IEEE single precision float.
    F32,
    /// IEEE double precision float.
    F64,
    /// Complex of two `f32`.
    C64,
    /// Complex of two `f64`.
    C128,
    /// 8-bit float, 5 exponent and 2 mantissa bits (`jnp.float8_e5m2`).
    F8E5M2,
    /// 8-bit float, 4 exponent and 3 mantissa bits, no infinities
    /// (`jnp.float8_e4m3fn`).
    F8E4M3FN,
}

impl ElementType {
    /// Every element type the crate knows.
    pub const ALL: [ElementType; 17] = [
        Self::Pred,
        Self::S8,
        Self::S16,
        Self::S32,
        Self::S64,
        Self::U8,
        Self::U16,
        Self::U32,
        Self::U64,
        Self::F16,
        Self::Bf16,
        Self::F32,
        Self::F64,
        Self::C64,
        Self::C128,
        Self::F8E5M2,
        Self::F8E4M3FN,
    ];

    /// XLA's `PrimitiveType` number for this type (as in `xla_data.proto`).
    pub fn primitive_type(self) -> proto::PrimitiveType {
        use proto::PrimitiveType as P;
        match self {
            Self::Pred => P::Pred,
            Self::S8 => P::S8,
            Self::S16 => P::S16,
            Self::S32 => P::S32,
            Self::S64 => P::S64,
            Self::U8 => P::U8,
            Self::U16 => P::U16,
            Self::U32 => P::U32,
            Self::U64 => P::U64,
            Self::F16 => P::F16,
            Self::Bf16 => P::Bf16,
            Self::F32 => P::F32,
            Self::F64 => P::F64,
            Self::C64 => P::C64,
            Self::C128 => P::C128,
            Self::F8E5M2 => P::F8e5m2,
            Self::F8E4M3FN => P::F8e4m3fn,
        }
    }

    /// The element type of an XLA `PrimitiveType` number, if it is an array type the
    /// crate supports.
    pub fn from_primitive_type(p: i32) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.primitive_type() as i32 == p)
    }

    /// Size of one element in bytes.
    pub fn byte_size(self) -> usize {
        match self {
            Self::Pred | Self::S8 | Self::U8 | Self::F8E5M2 | Self::F8E4M3FN => 1,
            Self::S16 | Self::U16 | Self::F16 | Self::Bf16 => 2,
            Self::S32 | Self::U32 | Self::F32 => 4,
            Self::S64 | Self::U64 | Self::F64 | Self::C64 => 8,
            Self::C128 => 16,
        }
    }

    /// True for real floating-point types.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Self::F16 | Self::Bf16 | Self::F32 | Self::F64 | Self::F8E5M2 | Self::F8E4M3FN
        )
    }

    /// True for complex types.
    pub fn is_complex(self) -> bool {
        matches!(self, Self::C64 | Self::C128)
    }

    /// True for signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(self, Self::S8 | Self::S16 | Self::S32 | Self::S64)
    }

    /// True for unsigned integer types.
    pub fn is_unsigned_int(self) -> bool {
        matches!(self, Self::U8 | Self::U16 | Self::U32 | Self::U64)
    }

    /// True for signed and unsigned integer types.
    pub fn is_integer(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// The name XLA's HLO text uses (`f32`, `pred`, …).
    pub fn hlo_name(self) -> &'static str {
        match self {
            Self::Pred => "pred",
            Self::S8 => "s8",
            Self::S16 => "s16",
            Self::S32 => "s32",
            Self::S64 => "s64",
            Self::U8 => "u8",
            Self::U16 => "u16",
            Self::U32 => "u32",
            Self::U64 => "u64",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::C64 => "c64",
            Self::C128 => "c128",
            Self::F8E5M2 => "f8e5m2",
            Self::F8E4M3FN => "f8e4m3fn",
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hlo_name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type whose values XLA stores natively: the types that can be uploaded,
/// downloaded and written as constants.
///
/// Implemented for `bool`, `i8`, `i16`, `i32`, `i64`, `u8`, `u16`, `u32`, `u64`, `f32`,
/// `f64`, and the `half` crate's [`f16`](half::f16) and [`bf16`](half::bf16) (IEEE
/// half precision and bfloat16: two bytes each, the bit layouts XLA uses). Sealed:
/// the byte layout must match XLA's exactly.
pub trait NativeType: sealed::Sealed + Copy + Default + Send + Sync + fmt::Debug + 'static {
    /// The XLA element type of `Self`.
    const TYPE: ElementType;
    /// Widen to `f64` (used for literal conversions and printing).
    fn to_f64(self) -> f64;
    /// Convert from `f64` with Rust's `as` semantics (for `f16`/`bf16`: rounded to
    /// nearest, ties to even, as `as` does for `f32`).
    fn from_f64(v: f64) -> Self;
    /// Appends the values' little-endian bytes (XLA's literal layout; `bool` as one
    /// byte 0 or 1).
    #[doc(hidden)]
    fn extend_le_bytes(values: &[Self], out: &mut Vec<u8>);
}

macro_rules! native {
    ($($t:ty => $et:ident, |$s:ident| $to:expr, |$v:ident| $from:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl NativeType for $t {
            const TYPE: ElementType = ElementType::$et;
            fn to_f64(self) -> f64 {
                let $s = self;
                $to
            }
            fn from_f64($v: f64) -> Self {
                $from
            }
            fn extend_le_bytes(values: &[Self], out: &mut Vec<u8>) {
                out.extend(values.iter().flat_map(|x| x.to_le_bytes()));
            }
        }
    )*};
}

impl sealed::Sealed for bool {}
impl NativeType for bool {
    const TYPE: ElementType = ElementType::Pred;
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn extend_le_bytes(values: &[Self], out: &mut Vec<u8>) {
        out.extend(values.iter().map(|b| *b as u8));
    }
}

native! {
    i8 => S8, |s| s as f64, |v| v as i8;
    i16 => S16, |s| s as f64, |v| v as i16;
    i32 => S32, |s| s as f64, |v| v as i32;
    i64 => S64, |s| s as f64, |v| v as i64;
    u8 => U8, |s| s as f64, |v| v as u8;
    u16 => U16, |s| s as f64, |v| v as u16;
    u32 => U32, |s| s as f64, |v| v as u32;
    u64 => U64, |s| s as f64, |v| v as u64;
    f32 => F32, |s| s as f64, |v| v as f32;
    f64 => F64, |s| s, |v| v;
    half::f16 => F16, |s| s.to_f64(), |v| half::f16::from_f32(f32_round_to_odd(v));
    half::bf16 => Bf16, |s| s.to_f64(), |v| half::bf16::from_f32(f32_round_to_odd(v));
    crate::float8::F8E5M2 => F8E5M2, |s| s.to_f64(), |v| crate::float8::F8E5M2::from_f64(v);
    crate::float8::F8E4M3FN => F8E4M3FN, |s| s.to_f64(), |v| crate::float8::F8E4M3FN::from_f64(v);
}

/// `v` rounded to `f32` toward zero, with the last bit set when inexact ("round to
/// odd"): rounding that once more to nearest-even in a format at least two bits
/// narrower (f16: 11 significant bits, bf16: 8, against f32's 24) gives `v`
/// correctly rounded, as if in one step. `half`'s own `from_f64` goes through `f32`
/// by nearest-even and may round twice (1 + 2^-11 + 2^-40 became 1.0 in f16, not
/// 1 + 2^-10).
fn f32_round_to_odd(v: f64) -> f32 {
    let f = v as f32;
    if f as f64 == v || v.is_nan() {
        return f;
    }
    // Inexact: step back toward zero if `as` rounded away from it (or overflowed to
    // infinity), then mark the lost bits in the last place.
    let t = if (f as f64).abs() > v.abs() {
        f32::from_bits(f.to_bits() - 1)
    } else {
        f
    };
    f32::from_bits(t.to_bits() | 1)
}

/// Dimension sizes of an array. Most arrays have rank ≤ 4, which stays inline.
pub type Dims = SmallVec<[i64; 4]>;

/// The shape of a value in an XLA program: an array (element type and dimension
/// sizes), a tuple of shapes, or a token.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A dense array in the default (row-major) layout.
    Array {
        /// Element type.
        ty: ElementType,
        /// Dimension sizes, major to minor; empty for a scalar.
        dims: Dims,
    },
    /// A tuple of shapes.
    Tuple(Vec<Shape>),
    /// A token (orders side effects).
    Token,
}

impl Shape {
    /// An array shape.
    pub fn array(ty: ElementType, dims: &[i64]) -> Shape {
        Shape::Array {
            ty,
            dims: dims.into(),
        }
    }

    /// A scalar (rank-0 array) shape.
    pub fn scalar(ty: ElementType) -> Shape {
        Shape::Array {
            ty,
            dims: Dims::new(),
        }
    }

    /// The array shape of `T` with the given dimensions.
    pub fn of<T: NativeType>(dims: &[i64]) -> Shape {
        Shape::array(T::TYPE, dims)
    }

    /// Element type of an array shape.
    pub fn element_type(&self) -> Option<ElementType> {
        match self {
            Shape::Array { ty, .. } => Some(*ty),
            _ => None,
        }
    }

    /// Dimension sizes of an array shape (empty for tuples and tokens).
    pub fn dims(&self) -> &[i64] {
        match self {
            Shape::Array { dims, .. } => dims,
            _ => &[],
        }
    }

    /// Rank of an array shape (0 for tuples and tokens).
    pub fn rank(&self) -> usize {
        self.dims().len()
    }

    /// True for array shapes.
    pub fn is_array(&self) -> bool {
        matches!(self, Shape::Array { .. })
    }

    /// True for tuple shapes.
    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }

    /// Number of elements of an array shape (1 for a scalar, 0 for non-arrays), or
    /// `None` if it overflows `i64`.
    pub fn element_count(&self) -> Option<i64> {
        match self {
            Shape::Array { dims, .. } => dims.iter().try_fold(1i64, |a, d| a.checked_mul(*d)),
            _ => Some(0),
        }
    }

    /// Size in bytes of an array shape's elements (0 for non-arrays), or `None` if
    /// the element count or the byte count overflows `i64`.
    pub fn byte_size(&self) -> Option<i64> {
        match self {
            Shape::Array { ty, .. } => self.element_count()?.checked_mul(ty.byte_size() as i64),
            _ => Some(0),
        }
    }

    /// The shape as XLA's `ShapeProto`, with the default major-to-minor layout on
    /// every array (XLA requires a layout on every shape of a module).
    pub fn to_proto(&self) -> proto::ShapeProto {
        match self {
            Shape::Array { ty, dims } => proto::ShapeProto {
                element_type: ty.primitive_type() as i32,
                dimensions: dims.to_vec(),
                is_dynamic_dimension: vec![false; dims.len()],
                layout: Some(proto::LayoutProto {
                    minor_to_major: (0..dims.len() as i64).rev().collect(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Shape::Tuple(elems) => proto::ShapeProto {
                element_type: proto::PrimitiveType::Tuple as i32,
                tuple_shapes: elems.iter().map(Shape::to_proto).collect(),
                ..Default::default()
            },
            Shape::Token => proto::ShapeProto {
                element_type: proto::PrimitiveType::Token as i32,
                ..Default::default()
            },
        }
    }

    /// Reads a `ShapeProto` (layouts are ignored). `None` for element types the crate
    /// does not support or negative dimensions.
    pub fn from_proto(p: &proto::ShapeProto) -> Option<Shape> {
        if p.element_type == proto::PrimitiveType::Tuple as i32 {
            let elems = p
                .tuple_shapes
                .iter()
                .map(Shape::from_proto)
                .collect::<Option<Vec<_>>>()?;
            return Some(Shape::Tuple(elems));
        }
        if p.element_type == proto::PrimitiveType::Token as i32 {
            return Some(Shape::Token);
        }
        let ty = ElementType::from_primitive_type(p.element_type)?;
        if p.dimensions.iter().any(|d| *d < 0) {
            return None;
        }
        Some(Shape::array(ty, &p.dimensions))
    }
}

impl fmt::Display for Shape {
    /// Formats as XLA does: `f32[2,3]`, `(f32[], s32[4])`, `token[]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Array { ty, dims } => {
                write!(f, "{ty}[")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{d}")?;
                }
                f.write_str("]")
            }
            Shape::Tuple(elems) => {
                f.write_str("(")?;
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str(")")
            }
            Shape::Token => f.write_str("token[]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_xla_spelling() {
        assert_eq!(Shape::of::<f32>(&[2, 3]).to_string(), "f32[2,3]");
        assert_eq!(Shape::scalar(ElementType::Pred).to_string(), "pred[]");
        let t = Shape::Tuple(vec![Shape::of::<i32>(&[4]), Shape::Token]);
        assert_eq!(t.to_string(), "(s32[4], token[])");
    }

    #[test]
    fn proto_round_trip_and_layout() {
        let s = Shape::Tuple(vec![Shape::of::<f64>(&[2, 3, 4]), Shape::of::<u8>(&[])]);
        let p = s.to_proto();
        assert_eq!(
            p.tuple_shapes[0].layout.as_ref().unwrap().minor_to_major,
            vec![2, 1, 0]
        );
        assert_eq!(Shape::from_proto(&p), Some(s));
    }

    #[test]
    fn primitive_types_round_trip() {
        for t in ElementType::ALL {
            assert_eq!(
                ElementType::from_primitive_type(t.primitive_type() as i32),
                Some(t)
            );
        }
    }

    #[test]
    fn sizes_are_checked() {
        let big = i64::MAX / 2 + 1;
        assert_eq!(Shape::of::<f32>(&[big, 2]).element_count(), None);
        assert_eq!(Shape::of::<u8>(&[big, 2]).byte_size(), None);
        assert_eq!(Shape::of::<f64>(&[big / 4]).byte_size(), None);
        assert_eq!(Shape::of::<f64>(&[big, 0]).byte_size(), Some(0));
        assert_eq!(Shape::of::<i16>(&[3, 5]).byte_size(), Some(30));
        assert_eq!(Shape::Tuple(vec![]).byte_size(), Some(0));
    }

    #[test]
    fn native_f64_conversions() {
        assert_eq!(true.to_f64(), 1.0);
        assert!(bool::from_f64(2.0));
        assert_eq!(i32::from_f64(-3.7), -3);
        assert_eq!(u8::TYPE.byte_size(), 1);
    }

    #[test]
    fn half_types_have_xla_layouts() {
        use half::{bf16, f16};
        // Uploads pass host slices to the plugin as they are: two bytes each, the
        // IEEE binary16 and bfloat16 bit patterns (bfloat16 is the top half of f32).
        assert_eq!(std::mem::size_of::<f16>(), 2);
        assert_eq!(std::mem::size_of::<bf16>(), 2);
        assert_eq!((f16::TYPE.byte_size(), bf16::TYPE.byte_size()), (2, 2));
        let mut b = Vec::new();
        f16::extend_le_bytes(&[f16::from_f64(1.0), f16::from_f64(-2.0)], &mut b);
        assert_eq!(b, [0x00, 0x3c, 0x00, 0xc0]);
        b.clear();
        bf16::extend_le_bytes(&[bf16::from_f64(1.0)], &mut b);
        let f = 1.0f32.to_le_bytes();
        assert_eq!(b, [f[2], f[3]]);
        // Ties to even from f64: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
        let f = |v: f64| <f16 as NativeType>::from_f64(v).to_f64();
        let b = |v: f64| <bf16 as NativeType>::from_f64(v).to_f64();
        assert_eq!(f(1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(f(1.0 + 3.0 * 2f64.powi(-11)), 1.0 + 2f64.powi(-9));
        // Just above the tie, by less than f32 can hold: rounded once, up.
        assert_eq!(
            f(1.0 + 2f64.powi(-11) + 2f64.powi(-40)),
            1.0 + 2f64.powi(-10)
        );
        assert_eq!(
            f(-1.0 - 2f64.powi(-11) - 2f64.powi(-40)),
            -1.0 - 2f64.powi(-10)
        );
        assert_eq!(b(1.0 + 2f64.powi(-8) + 2f64.powi(-40)), 1.0 + 2f64.powi(-7));
        assert_eq!(b(1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(f(65520.0), f64::INFINITY);
        assert_eq!(f(65519.99), 65504.0);
        assert_eq!(b(1e300), f64::INFINITY);
        assert_eq!(b(-1e300), f64::NEG_INFINITY);
        assert_eq!(b(3.3961e38), 3.3895313892515355e38);
        assert_eq!(f(1e-300), 0.0);
        assert!(f(-1e-300).is_sign_negative());
        assert!(f(f64::NAN).is_nan() && b(f64::NAN).is_nan());
        assert_eq!(f(2f64.powi(-25) * 1.0000001), 2f64.powi(-24));
    }
}
