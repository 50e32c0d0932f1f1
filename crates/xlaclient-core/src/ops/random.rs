//! Random bits on the device: XLA's `rng-bit-generator`, a counter-based generator
//! (three-fry or philox) that maps a state to a new state and an array of random
//! bits, so random streams stay reproducible and functional.
use super::array_of;
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx, Value};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::panic::Location;

// ---------------------------------------------------------------------------------
// `bitcast-convert`

/// Bitcast-convert rule: the same bits seen as another element type. Equal widths
/// keep the dimensions; a narrower type adds a last axis of the width ratio; a wider
/// one consumes a last axis that must be that ratio. `pred` only to itself: XLA
/// would reinterpret it as a byte, but a byte other than 0 or 1 is no boolean (JAX
/// refuses it too).
pub fn infer_bitcast_convert(operand: &Shape, to: ElementType) -> Result<Shape, ShapeError> {
    const OP: &str = "bitcast-convert";
    let (ty, dims) = array_of(OP, operand)?;
    if ty.is_complex() != to.is_complex() {
        return Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::ElementType,
            format!("XLA does not bitcast between complex and real types ({ty} to {to})"),
        ));
    }
    if (ty == ElementType::Pred || to == ElementType::Pred) && ty != to {
        return Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::ElementType,
            "pred has no bit layout to reinterpret",
        ));
    }
    let (from_w, to_w) = (ty.byte_size() as i64, to.byte_size() as i64);
    let mut out = dims.to_vec();
    if to_w < from_w {
        out.push(from_w / to_w);
    } else if to_w > from_w {
        if dims.last() != Some(&(to_w / from_w)) {
            return Err(ShapeError::new(
                OP,
                &[operand],
                ShapeErrorKind::Dimension,
                format!("{ty} to {to} needs a last axis of size {}", to_w / from_w),
            ));
        }
        out.pop();
    }
    Ok(Shape::array(to, &out))
}

pub(crate) fn shape_bitcast_convert(_: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let to = cx
        .target("bitcast-convert")?
        .element_type()
        .ok_or_else(|| {
            ShapeError::new(
                "bitcast-convert",
                cx.operands,
                ShapeErrorKind::ElementType,
                "converts to an array type",
            )
        })?;
    infer_bitcast_convert(cx.operands[0], to)
}

pub(crate) fn raise_bitcast_convert(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::BitcastConvert)
}

impl Op {
    /// XLA's BitcastConvertType: the same bits as elements of `ty` (see
    /// [`infer_bitcast_convert`] for how widths change the dimensions).
    #[track_caller]
    pub fn bitcast_convert(&self, ty: ElementType) -> Op {
        let loc = Location::caller();
        self.builder().emit(
            OpKind::BitcastConvert,
            &[self],
            Some(Shape::scalar(ty)),
            loc,
        )
    }
}

#[cfg(test)]
mod bitcast_convert_tests {
    use super::*;

    #[test]
    fn bitcast_convert_rule() {
        let s = |t: ElementType, d: &[i64]| Shape::array(t, d);
        use ElementType::*;
        assert_eq!(
            infer_bitcast_convert(&s(F32, &[3]), S32).unwrap(),
            s(S32, &[3])
        );
        assert_eq!(
            infer_bitcast_convert(&s(F32, &[3]), U8).unwrap(),
            s(U8, &[3, 4])
        );
        assert_eq!(
            infer_bitcast_convert(&s(U8, &[3, 4]), F32).unwrap(),
            s(F32, &[3])
        );
        assert!(infer_bitcast_convert(&s(U8, &[3, 2]), F32).is_err());
        // pred only to itself (XLA also takes pred as a byte; JAX refuses that, as
        // do we; pred to pred was refused until tests/rules_vs_xla.rs showed XLA
        // compiles it).
        assert_eq!(
            infer_bitcast_convert(&s(Pred, &[2, 3]), Pred).unwrap(),
            s(Pred, &[2, 3])
        );
        assert!(infer_bitcast_convert(&s(Pred, &[4]), F32).is_err());
        assert!(infer_bitcast_convert(&s(U32, &[]), Pred).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `rng-bit-generator` (and `uniform_f32` on it)

pub use crate::ir::attrs::RngAlgorithm;

impl RngAlgorithm {
    pub(crate) fn to_proto(self) -> i32 {
        (match self {
            RngAlgorithm::Default => proto::RandomAlgorithm::RngDefault,
            RngAlgorithm::ThreeFry => proto::RandomAlgorithm::RngThreeFry,
            RngAlgorithm::Philox => proto::RandomAlgorithm::RngPhilox,
        }) as i32
    }

    pub(crate) fn from_proto(v: i32) -> Result<Self, String> {
        match proto::RandomAlgorithm::try_from(v) {
            Ok(proto::RandomAlgorithm::RngDefault) => Ok(RngAlgorithm::Default),
            Ok(proto::RandomAlgorithm::RngThreeFry) => Ok(RngAlgorithm::ThreeFry),
            Ok(proto::RandomAlgorithm::RngPhilox) => Ok(RngAlgorithm::Philox),
            Err(_) => Err(format!("unknown random algorithm {v}")),
        }
    }
}

/// Rng-bit-generator rule: the state is a `u64` vector (2 words for three-fry, 2 or
/// 3 for philox, either for the default); the output is an array of an unsigned
/// integer type. The result is `(new state, bits)`.
pub fn infer_rng_bit_generator(
    state: &Shape,
    algorithm: RngAlgorithm,
    output: &Shape,
) -> Result<Shape, ShapeError> {
    const OP: &str = "rng-bit-generator";
    let (st, sd) = array_of(OP, state)?;
    let words_ok = match algorithm {
        RngAlgorithm::ThreeFry => sd == [2],
        RngAlgorithm::Philox | RngAlgorithm::Default => sd == [2] || sd == [3],
    };
    if st != ElementType::U64 || !words_ok {
        return Err(ShapeError::new(
            OP,
            &[state],
            ShapeErrorKind::Dimension,
            format!(
                "the state of {} must be u64[2] (or u64[3] for philox), got {state}",
                algorithm.hlo_name()
            ),
        ));
    }
    let (ot, od) = array_of(OP, output)?;
    if !ot.is_unsigned_int() {
        return Err(ShapeError::new(
            OP,
            &[state],
            ShapeErrorKind::ElementType,
            format!("random bits come as an unsigned integer type, not {ot}"),
        ));
    }
    if od.iter().any(|d| *d < 0) {
        return Err(ShapeError::new(
            OP,
            &[state],
            ShapeErrorKind::Dimension,
            format!("negative dimension in {output}"),
        ));
    }
    Ok(Shape::Tuple(vec![state.clone(), output.clone()]))
}

pub(crate) fn shape_rng_bit_generator(
    kind: &OpKind,
    cx: &InferCx<'_>,
) -> Result<Shape, ShapeError> {
    let OpKind::RngBitGenerator { algorithm } = kind else {
        return Err(super::table::not_for("rng-bit-generator", kind));
    };
    // The target is the bits' shape (from the builder) or the whole tuple (from a
    // finished module).
    let bits = match cx.target("rng-bit-generator")? {
        Shape::Tuple(e) if e.len() == 2 => &e[1],
        s => s,
    };
    infer_rng_bit_generator(cx.operands[0], *algorithm, bits)
}

pub(crate) fn lower_rng_bit_generator(
    kind: &OpKind,
    _: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::RngBitGenerator { algorithm } = kind {
        p.rng_algorithm = algorithm.to_proto();
    }
}

pub(crate) fn raise_rng_bit_generator(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::RngBitGenerator {
        algorithm: RngAlgorithm::from_proto(p.rng_algorithm)?,
    })
}

pub(crate) fn text_rng_bit_generator(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::RngBitGenerator { algorithm } = kind {
        out.attr("algorithm", algorithm.hlo_name());
    }
}

impl Op {
    /// XLA's RngBitGenerator on this state (`u64[2]`, or `u64[3]` for philox):
    /// returns `(new_state, bits)` with `bits` an array of `ty` (an unsigned integer
    /// type) and `dims`. The same state always gives the same bits; feed the new
    /// state to the next call.
    ///
    /// ```
    /// use xlaclient_core::ops::random::RngAlgorithm;
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("bits");
    /// let key = b.parameter(0, Shape::of::<u64>(&[2]), "key");
    /// let (next, bits) = key.rng_bit_generator(RngAlgorithm::ThreeFry, ElementType::U32, &[4]);
    /// assert_eq!(bits.dims()?, vec![4]);
    /// assert_eq!(next.dims()?, vec![2]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn rng_bit_generator(
        &self,
        algorithm: RngAlgorithm,
        ty: ElementType,
        dims: &[i64],
    ) -> (Op, Op) {
        let loc = Location::caller();
        let b: Builder = self.builder();
        let r = b.emit(
            OpKind::RngBitGenerator { algorithm },
            &[self],
            Some(Shape::array(ty, dims)),
            loc,
        );
        if r.is_poisoned() {
            return (r.clone(), r);
        }
        let at = |i| {
            b.op(
                r.comp,
                Value {
                    instr: r.v.instr,
                    result: i,
                },
            )
        };
        (at(0), at(1))
    }

    /// Uniform `f32` samples in `[0, 1)` of `dims` from this state: 23 random
    /// mantissa bits over the exponent of 1.0, minus 1 (exact and unbiased). Returns
    /// `(new_state, samples)`.
    #[track_caller]
    pub fn uniform_f32(&self, algorithm: RngAlgorithm, dims: &[i64]) -> (Op, Op) {
        let loc = Location::caller();
        let (next, bits) = self.rng_bit_generator(algorithm, ElementType::U32, dims);
        let b = self.builder();
        let one = b.scalar_of(ElementType::U32, crate::Scalar::Int(0x3f80_0000), loc);
        let nine = b.scalar_of(ElementType::U32, crate::Scalar::Int(1 << 9), loc);
        // bits >> 9 | 0x3f800000, as f32 in [1, 2): shift by division (no shift op yet).
        let mantissa = bits.binary(crate::BinaryOp::Divide, &nine, loc);
        let word = mantissa.binary(crate::BinaryOp::Add, &one, loc);
        let f = word.bitcast_convert(ElementType::F32);
        (next, f - 1.0)
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: element-wise (a change of width adds or drops a trailing axis,
/// after the batch axis).
pub(crate) fn batch_bitcast_convert(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}

/// Batching: a generator state that differs per example has no rule (the crate's
/// samplers use Threefry, whose ops batch element-wise).
pub(crate) fn batch_rng_bit_generator(_n: &crate::batching::BatchNode) -> crate::batching::Batched {
    Err("a generator state that differs per example (use the Threefry samplers of `random`)".into())
}
