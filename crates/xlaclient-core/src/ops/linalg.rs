//! Linear algebra: `dot_general` and numpy-style `matmul`, convolution, Cholesky,
//! triangular solve, and `qr` (Householder reflections built from the other ops).
use super::array_of;
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::Op;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::attrs::WindowDim;
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::panic::Location;

// ---------------------------------------------------------------------------------
// `dot` (DotGeneral, numpy's `matmul`)

pub use crate::ir::attrs::{DotAttrs, DotDims, Precision};

/// What a dot computes beyond its dimension numbers, for
/// [`Op::dot_general_with`] and [`Op::matmul_with`]: each operand's
/// [`Precision`], and the preferred element type of the result (XLA's
/// `preferred_element_type`: `s8 × s8 → s32` or `bf16 × bf16 → f32` accumulate in
/// the wider type; operands of different floating-point types need one).
///
/// ```
/// use xlaclient_core::{Builder, DotDims, DotOptions, ElementType, Precision, Shape};
/// let b = Builder::new("int8");
/// let x = b.parameter(0, Shape::of::<i8>(&[2, 3]), "x");
/// let w = b.parameter(1, Shape::of::<i8>(&[3, 4]), "w");
/// let opts = DotOptions::new()
///     .precision(Precision::Highest)
///     .preferred_element_type(ElementType::S32);
/// let y = x.dot_general_with(&w, &DotDims::contract(1, 0), opts);
/// assert_eq!(y.shape()?, Shape::of::<i32>(&[2, 4]));
/// # Ok::<(), xlaclient_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DotOptions {
    /// The precision of the left and the right operand.
    pub precision: [Precision; 2],
    /// The result's element type; `None`: the operands' (which must then agree).
    pub preferred_element_type: Option<ElementType>,
}

impl DotOptions {
    /// Default precision, the operands' element type.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same precision for both operands.
    pub fn precision(mut self, p: Precision) -> Self {
        self.precision = [p, p];
        self
    }

    /// A precision for each operand.
    pub fn operand_precision(mut self, lhs: Precision, rhs: Precision) -> Self {
        self.precision = [lhs, rhs];
        self
    }

    /// The result's element type (see [`infer_dot_general`] for what is allowed).
    pub fn preferred_element_type(mut self, ty: ElementType) -> Self {
        self.preferred_element_type = Some(ty);
        self
    }
}

/// XLA's order of precision among element types (`primitive_util`'s
/// `HigherPrecisionType`, which JAX's dot rule copies): complex over real, then the
/// larger exponent range, the more mantissa bits, the wider type, signed over
/// unsigned. Integers have no exponent or mantissa, so any float is above them.
fn precision_key(t: ElementType) -> (bool, i32, i32, usize, bool) {
    use ElementType::*;
    let real = match t {
        C64 => F32,
        C128 => F64,
        t => t,
    };
    let (max_exp, mantissa) = match real {
        F16 => (16, 10),
        Bf16 => (128, 7),
        F32 => (128, 23),
        F64 => (1024, 52),
        _ => (-1, -1),
    };
    (
        t.is_complex(),
        max_exp,
        mantissa,
        real.byte_size(),
        !t.is_unsigned_int(),
    )
}

/// The element-type part of the dot rule: the result type of `lhs × rhs` with
/// preferred type `preferred`, or why there is none. XLA's rule (its shape
/// inference with `MaybeUpcast`, as JAX 0.10's `dot_general` dtype rule
/// replicates it), with three refusals of our own:
///
/// - The result is the preferred type, else the operands' type. Operands of
///   different types (any mix: `f16 × f32`, `s8 × s16`, `s8 × bf16`) need a
///   preferred type here (XLA would take the one of higher precision; like the
///   element-wise ops, the builder does not promote silently).
/// - A preferred type may not be narrower than the operands' (the higher
///   precision one's) unless that is floating point: `s32 × s32 → s16` is refused,
///   `f32 × f32 → bf16` is not.
/// - Ours: no `pred` operands or result (XLA computes them as 1-bit integers), and
///   no real result from complex operands (a complex-to-real `convert` crashed XLA's
///   constant folder; see [`infer_convert`](super::shape_ops::infer_convert)).
///
/// Both CPU plugins (PJRT C API 0.81 and 0.115) compile and compute every
/// combination of non-`pred` types, so this rule only refuses what XLA allows.
pub fn dot_result_type(
    lhs: ElementType,
    rhs: ElementType,
    preferred: Option<ElementType>,
) -> Result<ElementType, String> {
    if lhs == ElementType::Pred || rhs == ElementType::Pred {
        return Err("needs numeric operands, got pred".into());
    }
    let wider = if precision_key(rhs) > precision_key(lhs) {
        rhs
    } else {
        lhs
    };
    let Some(p) = preferred else {
        if lhs != rhs {
            return Err(format!(
                "element types differ ({lhs} vs {rhs}): give a preferred element type \
                 (DotOptions::preferred_element_type) or convert one operand"
            ));
        }
        return Ok(lhs);
    };
    if p == ElementType::Pred {
        return Err("preferred element type pred: a dot gives numbers".into());
    }
    if !wider.is_float() && p.byte_size() < wider.byte_size() {
        return Err(format!(
            "preferred element type {p} is narrower than the operands' {wider} \
             (only floating-point results may narrow)"
        ));
    }
    if wider.is_complex() && !p.is_complex() {
        return Err(format!(
            "preferred element type {p} is real; a product of complex {wider} is complex"
        ));
    }
    Ok(p)
}

/// `dot_general` rule. Output axes: batch axes (in `lhs_batch` order), then the free
/// axes of `lhs`, then the free axes of `rhs`, each in their original order. The
/// element type is the operands' or `preferred` (see [`dot_result_type`]).
pub fn infer_dot_general(
    lhs: &Shape,
    rhs: &Shape,
    d: &DotDims,
    preferred: Option<ElementType>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "dot_general";
    let (lt, ld) = array_of(OP, lhs)?;
    let (rt, rd) = array_of(OP, rhs)?;
    let err = |k: ShapeErrorKind, r: String| ShapeError::new(OP, &[lhs, rhs], k, r);
    let out_ty =
        dot_result_type(lt, rt, preferred).map_err(|r| err(ShapeErrorKind::ElementType, r))?;
    if d.lhs_contracting.len() != d.rhs_contracting.len() {
        return Err(err(
            ShapeErrorKind::Attribute,
            format!(
                "{} lhs contracting axes vs {} rhs contracting axes",
                d.lhs_contracting.len(),
                d.rhs_contracting.len()
            ),
        ));
    }
    if d.lhs_batch.len() != d.rhs_batch.len() {
        return Err(err(
            ShapeErrorKind::Attribute,
            format!(
                "{} lhs batch axes vs {} rhs batch axes",
                d.lhs_batch.len(),
                d.rhs_batch.len()
            ),
        ));
    }
    let check = |side: &str, axes: &[&[i64]], rank: usize| -> Result<(), ShapeError> {
        let mut seen = vec![false; rank];
        for a in axes.iter().flat_map(|x| x.iter()) {
            if *a < 0 || *a as usize >= rank {
                return Err(err(
                    ShapeErrorKind::Axis,
                    format!("{side} axis {a} is out of range for rank {rank}"),
                ));
            }
            if seen[*a as usize] {
                return Err(err(
                    ShapeErrorKind::Axis,
                    format!("{side} axis {a} is used twice"),
                ));
            }
            seen[*a as usize] = true;
        }
        Ok(())
    };
    check("lhs", &[&d.lhs_contracting, &d.lhs_batch], ld.len())?;
    check("rhs", &[&d.rhs_contracting, &d.rhs_batch], rd.len())?;
    for (l, r) in d.lhs_contracting.iter().zip(&d.rhs_contracting) {
        let (a, b) = (ld[*l as usize], rd[*r as usize]);
        if a != b {
            return Err(err(
                ShapeErrorKind::Dimension,
                format!(
                    "contracting axes differ in size: lhs axis {l} is {a}, rhs axis {r} is {b}"
                ),
            ));
        }
    }
    for (l, r) in d.lhs_batch.iter().zip(&d.rhs_batch) {
        let (a, b) = (ld[*l as usize], rd[*r as usize]);
        if a != b {
            return Err(err(
                ShapeErrorKind::Dimension,
                format!("batch axes differ in size: lhs axis {l} is {a}, rhs axis {r} is {b}"),
            ));
        }
    }
    let mut out: Vec<i64> = d.lhs_batch.iter().map(|a| ld[*a as usize]).collect();
    let free = |dims: &[i64], used: &[&[i64]]| -> Vec<i64> {
        (0..dims.len())
            .filter(|i| !used.iter().any(|u| u.contains(&(*i as i64))))
            .map(|i| dims[i])
            .collect()
    };
    out.extend(free(ld, &[&d.lhs_contracting, &d.lhs_batch]));
    out.extend(free(rd, &[&d.rhs_contracting, &d.rhs_batch]));
    let out = Shape::array(out_ty, &out);
    super::check_size(OP, &[lhs, rhs], &out)?;
    Ok(out)
}

pub(crate) fn shape_dot(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Dot(a) = kind else {
        return Err(super::table::not_for("dot", kind));
    };
    // The target's element type is the preferred element type (the builder passes
    // a scalar of it, a finished module the declared shape).
    infer_dot_general(
        cx.operands[0],
        cx.operands[1],
        &a.dims,
        cx.target.and_then(Shape::element_type),
    )
}

impl DotDims {
    pub(crate) fn from_proto(p: &proto::DotDimensionNumbers) -> Self {
        DotDims {
            lhs_contracting: p.lhs_contracting_dimensions.clone(),
            rhs_contracting: p.rhs_contracting_dimensions.clone(),
            lhs_batch: p.lhs_batch_dimensions.clone(),
            rhs_batch: p.rhs_batch_dimensions.clone(),
        }
    }

    pub(crate) fn to_proto(&self) -> proto::DotDimensionNumbers {
        proto::DotDimensionNumbers {
            lhs_contracting_dimensions: self.lhs_contracting.clone(),
            rhs_contracting_dimensions: self.rhs_contracting.clone(),
            lhs_batch_dimensions: self.lhs_batch.clone(),
            rhs_batch_dimensions: self.rhs_batch.clone(),
        }
    }
}

impl Precision {
    fn to_proto(self) -> proto::precision_config::Precision {
        use proto::precision_config::Precision as P;
        match self {
            Precision::Default => P::Default,
            Precision::High => P::High,
            Precision::Highest => P::Highest,
        }
    }

    fn from_proto(v: i32) -> Result<Self, String> {
        use proto::precision_config::Precision as P;
        match P::try_from(v) {
            Ok(P::Default) => Ok(Precision::Default),
            Ok(P::High) => Ok(Precision::High),
            Ok(P::Highest) => Ok(Precision::Highest),
            _ => Err(format!("operand precision {v} is not one this crate knows")),
        }
    }
}

pub(crate) fn lower_dot(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    let OpKind::Dot(a) = kind else { return };
    p.dot_dimension_numbers = Some(a.dims.to_proto());
    if a.precision != [Precision::Default; 2] {
        p.precision_config = Some(proto::PrecisionConfig {
            operand_precision: a.precision.iter().map(|x| x.to_proto() as i32).collect(),
            ..Default::default()
        });
    }
}

/// A dot's attributes from a proto. A missing precision list means `DEFAULT` for
/// both operands (XLA pads the list with `DEFAULT`); a list of another length, a
/// precision this crate does not know, or an explicit dot algorithm is refused.
pub(crate) fn raise_dot(p: &proto::HloInstructionProto, _: &RaiseCx<'_>) -> Result<OpKind, String> {
    let dims = DotDims::from_proto(
        p.dot_dimension_numbers
            .as_ref()
            .ok_or("a dot without dimension numbers")?,
    );
    let mut precision = [Precision::Default; 2];
    if let Some(pc) = &p.precision_config {
        match pc.operand_precision[..] {
            [] => {}
            [l, r] => precision = [Precision::from_proto(l)?, Precision::from_proto(r)?],
            ref v => {
                return Err(format!(
                    "{} operand precisions for a dot of 2 operands",
                    v.len()
                ));
            }
        }
        if pc.algorithm != 0 {
            return Err(format!(
                "dot algorithm {} is not supported by this crate",
                pc.algorithm
            ));
        }
    }
    Ok(OpKind::Dot(Box::new(DotAttrs { dims, precision })))
}

pub(crate) fn text_dot(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    let OpKind::Dot(a) = kind else { return };
    let d = &a.dims;
    if !d.lhs_batch.is_empty() {
        out.list("lhs_batch_dims", &d.lhs_batch);
        out.list("rhs_batch_dims", &d.rhs_batch);
    }
    out.list("lhs_contracting_dims", &d.lhs_contracting);
    out.list("rhs_contracting_dims", &d.rhs_contracting);
    out.attrs.push_str(&text_precision(&a.precision));
}

/// `, operand_precision={high,default}` unless both are the default (as XLA
/// prints it).
pub(crate) fn text_precision(p: &[Precision; 2]) -> String {
    if *p == [Precision::Default; 2] {
        return String::new();
    }
    format!(
        ", operand_precision={{{},{}}}",
        p[0].hlo_name(),
        p[1].hlo_name()
    )
}

impl Op {
    /// XLA's DotGeneral: contraction over `dims.lhs_contracting`/`rhs_contracting`
    /// with batch axes `lhs_batch`/`rhs_batch`. See [`infer_dot_general`] for the
    /// output axis order.
    #[track_caller]
    pub fn dot_general(&self, rhs: &Op, dims: &DotDims) -> Op {
        self.dot_general_with(rhs, dims, DotOptions::new())
    }

    /// [`dot_general`](Op::dot_general) with operand precisions and a preferred
    /// result element type ([`DotOptions`]): `s8 × s8 → s32`, `bf16 × bf16 → f32`,
    /// `f16 × f32 → f32`.
    #[track_caller]
    pub fn dot_general_with(&self, rhs: &Op, dims: &DotDims, opts: DotOptions) -> Op {
        let loc = Location::caller();
        let kind = OpKind::Dot(Box::new(DotAttrs {
            dims: dims.clone(),
            precision: opts.precision,
        }));
        // The dot's rule reads only the element type of the target: the preferred
        // element type (XLA keeps it in the result shape too).
        let target = opts.preferred_element_type.map(Shape::scalar);
        self.builder().emit(kind, &[self, rhs], target, loc)
    }

    /// Numpy's `matmul`: vector·vector, matrix·vector, vector·matrix, matrix·matrix,
    /// and batched `[..., m, k] x [..., k, n]` whose batch axes broadcast the numpy
    /// way (`[1, 2, 3] @ [4, 3, 5]` is `[4, 2, 5]`); a rank-2 right operand applies to
    /// every batch of the left one without copies.
    #[track_caller]
    pub fn matmul(&self, rhs: &Op) -> Op {
        self.matmul_with(rhs, DotOptions::new())
    }

    /// Numpy's `dot` (`jnp.dot`): with a scalar on either side the product; with a
    /// vector on the right the sum product over the last axis of each; otherwise
    /// the sum product of this array's last axis with `rhs`'s second-to-last, no
    /// axis batched: `[a, b, k] · [c, k, d]` is `[a, b, c, d]` (where
    /// [`matmul`](Op::matmul) would batch `a` with `c`).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("dot");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3, 4]), "x");
    /// let y = b.parameter(1, Shape::of::<f32>(&[5, 4, 6]), "y");
    /// assert_eq!(x.dot(&y).dims()?, vec![2, 3, 5, 6]);
    /// assert_eq!(x.dot(&b.constant(2f32)).dims()?, vec![2, 3, 4]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn dot(&self, rhs: &Op) -> Op {
        let loc = Location::caller();
        let (lr, rr) = match (self.rank(), rhs.rank()) {
            (Ok(l), Ok(r)) => (l as i64, r as i64),
            // A failed operand: the dot's own error names it.
            _ => return self.on(loc).dot_general(rhs, &DotDims::contract(0, 0)),
        };
        if lr == 0 || rr == 0 {
            return self.binary(crate::BinaryOp::Multiply, rhs, loc);
        }
        let rc = if rr == 1 { 0 } else { rr - 2 };
        self.on(loc)
            .dot_general(rhs, &DotDims::contract(lr - 1, rc))
    }

    /// [`matmul`](Op::matmul) with operand precisions and a preferred result
    /// element type ([`DotOptions`]).
    #[track_caller]
    pub fn matmul_with(&self, rhs: &Op, opts: DotOptions) -> Op {
        let loc = Location::caller();
        if let Err(failed) = self.builder().target(&[self, rhs], "dot_general", loc) {
            return failed;
        }
        let (Ok(ls), Ok(rs)) = (self.shape(), rhs.shape()) else {
            unreachable!("operands were checked above");
        };
        let (lr, rr) = (ls.rank() as i64, rs.rank() as i64);
        if lr == 0 || rr == 0 {
            return self.builder().fail(
                ShapeError::new(
                    "dot_general",
                    &[&ls, &rs],
                    ShapeErrorKind::Rank,
                    "matmul needs operands of rank 1 or more",
                ),
                loc,
            );
        }
        if rr <= 2 || lr == 1 {
            // Contract the last lhs axis with the first (rank 1) or second-to-last
            // (rank ≥ 2) rhs axis: output = lhs free axes, then rhs free axes.
            let rc = if rr == 1 { 0 } else { rr - 2 };
            if lr == 1 && rr > 2 {
                // [k] x [..., k, n] -> [..., n]
                return self
                    .on(loc)
                    .dot_general_with(rhs, &DotDims::contract(0, rc), opts);
            }
            return self
                .on(loc)
                .dot_general_with(rhs, &DotDims::contract(lr - 1, rc), opts);
        }
        // Both ≥ 2, rhs batched: batch axes broadcast the numpy way; both operands are
        // broadcast to the common batch shape, then contracted with batch axes.
        let (ld, rd) = (ls.dims(), rs.dims());
        let (lb, rb) = (&ld[..ld.len() - 2], &rd[..rd.len() - 2]);
        let batch = match super::elementwise::broadcast_dims(lb, rb) {
            Ok(b) => b,
            Err(reason) => {
                return self.builder().fail(
                    ShapeError::new(
                        "dot_general",
                        &[&ls, &rs],
                        ShapeErrorKind::Dimension,
                        format!("matmul batch axes do not broadcast: {reason}"),
                    ),
                    loc,
                );
            }
        };
        let nb = batch.len() as i64;
        let mut l_to = batch.clone();
        l_to.extend_from_slice(&ld[ld.len() - 2..]);
        let mut r_to = batch;
        r_to.extend_from_slice(&rd[rd.len() - 2..]);
        let l = self.broadcast_to(&l_to);
        let r = rhs.broadcast_to(&r_to);
        let dims = DotDims {
            lhs_contracting: vec![nb + 1],
            rhs_contracting: vec![nb],
            lhs_batch: (0..nb).collect(),
            rhs_batch: (0..nb).collect(),
        };
        l.dot_general_with(&r, &dims, opts)
    }
}

/// DotGeneral (see `dot_cts`).
pub(crate) fn vjp_dot(n: &Node) -> Grads {
    let OpKind::Dot(a) = n.kind else {
        return Err("not a dot".into());
    };
    Ok(arrays(dot_cts(a, n, &n.ct())))
}

/// DotGeneral: each operand's cotangent is a dot of the output cotangent with the
/// other operand over the other operand's free axes, batched over the batch axes,
/// then transposed into the operand's axis order (JAX's transpose rule).
fn dot_cts(a: &DotAttrs, n: &crate::autodiff::Node, ct: &Op) -> Vec<Option<Op>> {
    let (x, y) = (&n.operands[0], &n.operands[1]);
    [(0, x, y), (1, y, x)]
        .into_iter()
        .map(|(which, operand, other)| {
            if !crate::autodiff::wants(operand) {
                return None;
            }
            let rank = operand.rank().ok()? as i64;
            dot_operand_ct(
                a,
                which,
                other,
                ct,
                operand.element_type().ok(),
                rank,
                false,
            )
        })
        .collect()
}

/// The cotangent of operand `which` (0: lhs, 1: rhs) of a dot with attributes `a`,
/// given the `other` operand and the result's cotangent `ct`; the operand is of
/// element type `ty` (the result's type, `None`: the dot's rule picks) and rank
/// `rank`. With `stepped`, `other` and `ct` carry a leading axis of steps (one row
/// per step of a loop) and the result is the sum over the steps of each step's
/// cotangent, as one product contracting the step axis too: what a loop's
/// gradient computes after the loop for an operand the loop does not change.
pub(crate) fn dot_operand_ct(
    a: &DotAttrs,
    which: usize,
    other: &Op,
    ct: &Op,
    ty: Option<ElementType>,
    rank: i64,
    stepped: bool,
) -> Option<Op> {
    let d = &a.dims;
    let step = i64::from(stepped);
    let other_rank = other.rank().ok()? as i64 - step;
    let (xr, yr) = if which == 0 {
        (rank, other_rank)
    } else {
        (other_rank, rank)
    };
    let opts = DotOptions {
        precision: a.precision,
        preferred_element_type: ty,
    };
    let free = |rank: i64, c: &[i64], b: &[i64]| -> Vec<i64> {
        (0..rank)
            .filter(|a| !c.contains(a) && !b.contains(a))
            .collect()
    };
    let (xf, yf) = (
        free(xr, &d.lhs_contracting, &d.lhs_batch),
        free(yr, &d.rhs_contracting, &d.rhs_batch),
    );
    let nb = d.lhs_batch.len() as i64;
    // Axes of the output cotangent: batch, x's free, y's free.
    let ct_batch: Vec<i64> = (0..nb).collect();
    let ct_xf: Vec<i64> = (nb..nb + xf.len() as i64).collect();
    let ct_yf: Vec<i64> = (nb + xf.len() as i64..nb + (xf.len() + yf.len()) as i64).collect();
    if stepped && which == 1 && nb == 0 && xf.first() == Some(&0) {
        // `x · W` with x's axis 0 free (the rows of a batch): the step axis and
        // axis 0 are adjacent in both stacks, so each stack is one taller array
        // (a free reshape) and the sum over steps is the one-step product over
        // all rows (written as below for a matrix W).
        let merge = |v: &Op| -> Option<Op> {
            let dims = v.dims().ok()?;
            let mut m = vec![dims[0] * dims[1]];
            m.extend_from_slice(&dims[2..]);
            Some(v.reshape(&m))
        };
        return dot_operand_ct(a, which, &merge(other)?, &merge(ct)?, ty, rank, false);
    }
    if !stepped && which == 1 && nb == 0 && rank == 2 && xr >= 2 && d.lhs_contracting == [xr - 1] {
        // `x · W` for a matrix W and many rows of x (every axis of x but its last,
        // or every step's rows after a loop): where the product is narrow (see
        // `rows_product`), in the CPU backend's fast layout. x's rows and the
        // cotangent's are each one array of rows (a free reshape: the row axes
        // lead in both).
        let (xd, cd) = (other.dims().ok()?, ct.dims().ok()?);
        let rows: i64 = xd[..xd.len() - 1].iter().product();
        let (k, n) = (xd[xd.len() - 1], cd[cd.len() - 1]);
        // W's cotangent is `xᵀ · c` for `x · W` (W contracting its axis 0), the
        // transpose `cᵀ · x` for `x · Wᵀ` (its axis 1): rows_product's operands
        // with their widths.
        let operands = match d.rhs_contracting[..] {
            [0] => Some(((other, k), (ct, n))),
            [1] => Some(((ct, n), (other, k))),
            _ => None,
        };
        let float = matches!(
            ty.or(other.element_type().ok()),
            Some(ElementType::F32 | ElementType::F64)
        );
        if let Some(((p, a), (q, c))) = operands
            && let Some(layout) = rows_layout(rows, a, c, float)
        {
            let flat = |v: &Op, cols: i64| {
                if v.rank().ok()? == 2 {
                    Some(v.clone())
                } else {
                    Some(v.reshape(&[rows, cols]))
                }
            };
            return Some(rows_product(&flat(p, a)?, &flat(q, c)?, layout, opts));
        }
    }
    // With steps: every axis one further, and the step axis contracted on both
    // sides (paired first).
    let contracted = |axes: &[i64]| -> Vec<i64> {
        let steps = if stepped { Some(0) } else { None };
        steps
            .into_iter()
            .chain(axes.iter().map(|a| a + step))
            .collect()
    };
    let batch = |axes: &[i64]| -> Vec<i64> { axes.iter().map(|a| a + step).collect() };
    // Puts `r`, whose axes are `names` (axes of the operand), in operand order.
    let arrange = |r: Op, names: Vec<i64>| -> Op {
        let perm: Vec<i64> = (0..names.len() as i64)
            .map(|a| names.iter().position(|x| *x == a).expect("every axis") as i64)
            .collect();
        if perm.iter().enumerate().all(|(i, p)| i as i64 == *p) {
            r
        } else {
            r.transpose(&perm)
        }
    };
    if which == 0
        && !stepped
        && nb == 0
        && yr == 2
        && d.rhs_contracting == [0]
        && d.lhs_contracting == [xr - 1]
    {
        // `x · W` in a loop's backward step, W's transpose computed before the
        // loop (`Graph::transposed`): `ct · Wᵀ` contracting the transpose's first
        // axis, the CPU backend's fast layout.
        let twin = other
            .g
            .borrow()
            .transposed
            .get(&(other.comp, other.v))
            .copied();
        if let Some(t) = twin {
            let t = other.builder().op(other.comp, t);
            let last = ct.rank().ok()? as i64 - 1;
            return Some(ct.dot_general_with(&t, &DotDims::contract(last, 0), opts));
        }
    }
    if which == 0 {
        // ct · y over y's free axes: batch, x's free, then y's contracting axes in
        // y's order (each standing for its paired x axis).
        let dims = DotDims {
            lhs_contracting: contracted(&ct_yf),
            rhs_contracting: contracted(&yf),
            lhs_batch: batch(&ct_batch),
            rhs_batch: batch(&d.rhs_batch),
        };
        let r = ct.dot_general_with(other, &dims, opts);
        let mut yc: Vec<(i64, i64)> = d
            .rhs_contracting
            .iter()
            .zip(&d.lhs_contracting)
            .map(|(r, l)| (*r, *l))
            .collect();
        yc.sort();
        let names: Vec<i64> = d
            .lhs_batch
            .iter()
            .copied()
            .chain(xf.iter().copied())
            .chain(yc.iter().map(|(_, l)| *l))
            .collect();
        Some(arrange(r, names))
    } else {
        // x · ct over x's free axes: batch, x's contracting axes in x's order (each
        // standing for its paired y axis), then y's free.
        let dims = DotDims {
            lhs_contracting: contracted(&xf),
            rhs_contracting: contracted(&ct_xf),
            lhs_batch: batch(&d.lhs_batch),
            rhs_batch: batch(&ct_batch),
        };
        let r = other.dot_general_with(ct, &dims, opts);
        let mut xc: Vec<(i64, i64)> = d
            .lhs_contracting
            .iter()
            .zip(&d.rhs_contracting)
            .map(|(l, r)| (*l, *r))
            .collect();
        xc.sort();
        let names: Vec<i64> = d
            .rhs_batch
            .iter()
            .copied()
            .chain(xc.iter().map(|(_, r)| *r))
            .chain(yf.iter().copied())
            .collect();
        Some(arrange(r, names))
    }
}

/// How [`rows_product`] writes `pᵀ · q` for `p: [rows, a]`, `q: [rows, c]`
/// instead of the plain product contracting both operands' leading axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowsLayout {
    /// The narrower operand transposed behind an optimization barrier.
    Transposed,
    /// The rows cut into this many equal chunks: one batched product, summed.
    Chunks(i64),
}

/// The fastest way [`rows_product`] knows to write `pᵀ · q` for `p: [rows, a]`,
/// `q: [rows, c]` on XLA's CPU backend (`None`: the plain product), from `benches/dot_layouts.rs` (plugin
/// 0.115, 2 cores, medians of a call in µs, plain → chosen):
///
/// - a narrow side (2 to 16 columns) against a wide one (at least 16 and twice
///   as many), from 32 rows: the narrow side transposed, the product of a policy
///   or value head (`[2048, 256]ᵀ · [2048, 3]` 706 → 193, `[32000, 256]ᵀ · [32000,
///   3]` 7,596 → 2,532, `[128, 64]ᵀ · [128, 2]` 33 → 22, `[2048, 3]ᵀ · [2048,
///   256]` 152 → 120; `[100, 5]ᵀ · [100, 2]`, both narrow, not);
/// - from 8 to 255 rows, when the narrower side is at least 16 wide and the
///   transposed operand holds at most 32,768 elements: transposed. Per step of a
///   loop whose kernel makes `a`'s rows first (as a gradient's activations are;
///   `cargo bench --bench dot_layouts -- K A C --loop`, 2026-11-28, µs a step):
///   `[32, 128]ᵀ · [32, 128]` (an RNN step's weight product) 21.3 → 19.4,
///   `[128, 128]ᵀ · [128, 128]` 106 → 66, `[128, 64]ᵀ · [128, 256]` 116 → 66,
///   `[8, 32]ᵀ · [8, 32]` 5.4 → 2.6, `[128, 64]ᵀ · [128, 64]` 25.1 → 25.3; one
///   product a call from parameters: `[128, 128]ᵀ · [128, 128]` 127 → 76,
///   `[64, 256]ᵀ · [64, 256]` 180 → 141, `[32, 128]ᵀ · [32, 128]` the same,
///   `[128, 64]ᵀ · [128, 64]` 27 → 30 (the one loss measured: one small extra
///   kernel);
/// - from 256 rows, when the transposed side is at most 256 wide and either a
///   quarter of the other side's width or less (`[2048, 50]ᵀ · [2048, 256]`, the
///   first layer of Anakin's network, 5% faster in its whole training step than
///   plain, though the same alone) or at least 64 wide and small (`rows · min(a,
///   c)` at most 32,768 elements: `[256, 64]ᵀ · [256, 64]` 109 → 53, `[512, 64]ᵀ · [512, 64]` 240 →
///   188): transposed. XLA's CPU transpose moves about 0.5 G elements/s, so for
///   two wide sides over more rows the transpose costs more than the fast layout
///   saves (`[1024, 64]ᵀ · [1024, 64]` 265 plain against 346 transposed, `[32000,
///   128]ᵀ · [32000, 128]` 15,195 against 20,040, `[16384, 256]ᵀ · [16384, 256]`
///   18,561 against 37,008);
/// - from 4,096 rows (`f32` and `f64` only: the chunks are summed in the
///   result's type), in chunks of about 2,048 rows, a number of chunks that
///   divides the rows, when the chunks' products take no more room than half the
///   operands (`[4096, 128]ᵀ · [4096, 128]` 1,972 → 1,662, `[32000,
///   128]ᵀ · [32000, 128]` 15,195 → 10,724, `[16384, 256]ᵀ · [16384, 256]` 18,561 →
///   14,868), what the deferred weight product of a long loop's gradient is;
/// - otherwise plain (`[1024, 32]ᵀ · [1024, 32]` 78 against 110 transposed).
fn rows_layout(rows: i64, a: i64, c: i64, float: bool) -> Option<RowsLayout> {
    let (narrow, wide) = (a.min(c), a.max(c));
    if rows >= 32 && (2..=16).contains(&narrow) && wide >= 16.max(2 * narrow) {
        return Some(RowsLayout::Transposed);
    }
    if (8..256).contains(&rows) && narrow >= 16 && rows * narrow <= 32_768 {
        return Some(RowsLayout::Transposed);
    }
    if rows >= 256
        && narrow <= 256
        && (wide >= 4 * narrow || (narrow >= 64 && rows * narrow <= 32_768))
    {
        return Some(RowsLayout::Transposed);
    }
    if float && rows >= 4096 {
        let want = rows / 2048;
        let chunks = (want / 2..=want * 2)
            .filter(|s| *s >= 2 && rows % s == 0)
            .min_by_key(|s| (s - want).abs());
        if let Some(s) = chunks
            && s * a * c <= rows * (a + c) / 2
        {
            return Some(RowsLayout::Chunks(s));
        }
    }
    None
}

/// `Σ_k p[k, i] · q[k, j]` (`pᵀ · q`) for `p: [K, a]`, `q: [K, c]`, the rows `K`
/// many: a weight's cotangent over a batch's rows, or over every step's rows
/// after a loop, written in `layout` ([`rows_layout`] says which is fastest).
///
/// XLA's CPU backend runs a product contracting both operands' leading axis
/// outside its fast matrix kernels, about 3.5 times slower on `[2048, 256]ᵀ ·
/// [2048, 3]` (`benches/dot_layouts.rs`, plugin 0.115), and folds an explicit
/// transpose back into the product. So [`RowsLayout::Transposed`] transposes the
/// narrower operand behind an optimization barrier (which XLA cannot fold
/// through), and the product contracts the left operand's last axis with the
/// right one's first: `(pᵀ) · q` when `a ≤ c`, else `((qᵀ) · p)ᵀ`, the result
/// also behind a barrier so its transpose stays a small one.
/// [`RowsLayout::Chunks`] cuts the rows into `s` chunks (a free reshape to `[s,
/// K / s, a]` and `[s, K / s, c]`), multiplies chunk by chunk in one batched
/// product and sums the `s` results.
fn rows_product(p: &Op, q: &Op, layout: RowsLayout, opts: DotOptions) -> Op {
    let b = p.builder();
    let fence = |v: &Op| b.optimization_barrier(&[v]).remove(0);
    let (rows, a) = p.dims().map_or((0, 0), |d| (d[0], d[1]));
    let c = q.dims().map_or(0, |d| d[1]);
    let contract = DotDims::contract(1, 0);
    match layout {
        RowsLayout::Chunks(s) => {
            let dims = DotDims {
                lhs_contracting: vec![1],
                rhs_contracting: vec![1],
                lhs_batch: vec![0],
                rhs_batch: vec![0],
            };
            p.reshape(&[s, rows / s, a])
                .dot_general_with(&q.reshape(&[s, rows / s, c]), &dims, opts)
                .reduce_sum(&[0])
        }
        RowsLayout::Transposed if a <= c => {
            fence(&p.transpose(&[1, 0])).dot_general_with(q, &contract, opts)
        }
        RowsLayout::Transposed => {
            let r = fence(&q.transpose(&[1, 0])).dot_general_with(p, &contract, opts);
            fence(&r).transpose(&[1, 0])
        }
    }
}

#[cfg(test)]
fn f(d: &[i64]) -> Shape {
    Shape::of::<f32>(d)
}

#[cfg(test)]
mod dot_tests {
    use super::*;

    #[test]
    fn matrix_product_shape() {
        let s =
            infer_dot_general(&f(&[4, 3]), &f(&[3, 2]), &DotDims::contract(1, 0), None).unwrap();
        assert_eq!(s, f(&[4, 2]));
    }

    #[test]
    fn batch_axes_come_first() {
        let d = DotDims {
            lhs_contracting: vec![2],
            rhs_contracting: vec![1],
            lhs_batch: vec![0],
            rhs_batch: vec![0],
        };
        assert_eq!(
            infer_dot_general(&f(&[5, 4, 3]), &f(&[5, 3, 2]), &d, None).unwrap(),
            f(&[5, 4, 2])
        );
    }

    #[test]
    fn dot_element_types_follow_xla() {
        use ElementType::*;
        assert_eq!(dot_result_type(S8, S8, Some(S32)), Ok(S32));
        assert_eq!(dot_result_type(U8, U8, Some(S32)), Ok(S32));
        assert_eq!(dot_result_type(Bf16, Bf16, Some(F32)), Ok(F32));
        assert_eq!(dot_result_type(F16, F32, Some(F32)), Ok(F32));
        assert_eq!(dot_result_type(S8, Bf16, Some(F32)), Ok(F32));
        assert_eq!(dot_result_type(F32, F32, None), Ok(F32));
        // Floating-point results may narrow (XLA's MaybeUpcast checks integers only).
        assert_eq!(dot_result_type(F32, F32, Some(Bf16)), Ok(Bf16));
        assert_eq!(dot_result_type(S32, F16, Some(S8)), Ok(S8));
        let e = dot_result_type(S32, S32, Some(S16)).unwrap_err();
        assert!(e.contains("narrower than the operands' s32"), "{e}");
        // The wider operand counts: u16 is above s8 (bit width before signedness).
        let e = dot_result_type(S8, U16, Some(S8)).unwrap_err();
        assert!(e.contains("narrower than the operands' u16"), "{e}");
        let e = dot_result_type(F16, F32, None).unwrap_err();
        assert!(e.contains("give a preferred element type"), "{e}");
        assert!(dot_result_type(Pred, Pred, Some(S32)).is_err());
        assert!(dot_result_type(S32, S32, Some(Pred)).is_err());
        let e = dot_result_type(C64, C64, Some(F64)).unwrap_err();
        assert!(e.contains("complex"), "{e}");
        assert_eq!(dot_result_type(C64, F64, Some(C128)), Ok(C128));
        // XLA's order of precision.
        assert!(precision_key(Bf16) > precision_key(F16));
        assert!(precision_key(F32) > precision_key(Bf16));
        assert!(precision_key(F16) > precision_key(U64));
        assert!(precision_key(S32) > precision_key(U32));
        assert!(precision_key(C64) > precision_key(F64));
    }

    #[test]
    fn preferred_type_sets_the_result_and_precision_round_trips() {
        let f = |d: &[i64]| Shape::of::<i8>(d);
        let s = infer_dot_general(
            &f(&[4, 3]),
            &f(&[3, 2]),
            &DotDims::contract(1, 0),
            Some(ElementType::S32),
        )
        .unwrap();
        assert_eq!(s, Shape::of::<i32>(&[4, 2]));
        let e = infer_dot_general(
            &f(&[4, 3]),
            &f(&[3, 2]),
            &DotDims::contract(1, 0),
            Some(ElementType::Pred),
        )
        .unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::ElementType);
        let a = DotAttrs {
            dims: DotDims::contract(1, 0),
            precision: [Precision::Highest, Precision::Default],
        };
        let scalar = Shape::of::<f32>(&[]);
        let lcx = LowerCx {
            shape: &scalar,
            operands: &[],
            comp_id: &|_| 0,
        };
        let rcx = RaiseCx {
            shape: &scalar,
            operands: &[],
            comp: &|_| None,
        };
        let lower = |a: &DotAttrs, p: &mut proto::HloInstructionProto| {
            lower_dot(&OpKind::Dot(Box::new(a.clone())), &lcx, p)
        };
        let raise = |p: &proto::HloInstructionProto| match raise_dot(p, &rcx)? {
            OpKind::Dot(a) => Ok(*a),
            k => Err(format!("{k:?}")),
        };
        let mut p = proto::HloInstructionProto::default();
        lower(&a, &mut p);
        assert_eq!(
            p.precision_config.as_ref().unwrap().operand_precision,
            vec![2, 0]
        );
        assert_eq!(raise(&p), Ok(a.clone()));
        assert_eq!(
            text_precision(&a.precision),
            ", operand_precision={highest,default}"
        );
        // Default precision writes nothing (as XLA's printer and JAX's lowering).
        let mut q = proto::HloInstructionProto::default();
        lower(
            &DotAttrs {
                dims: a.dims.clone(),
                precision: Default::default(),
            },
            &mut q,
        );
        assert!(q.precision_config.is_none());
        assert_eq!(text_precision(&Default::default()), "");
        // An empty list is DEFAULT for both; three entries, an unknown precision or
        // an algorithm are refused.
        p.precision_config
            .as_mut()
            .unwrap()
            .operand_precision
            .clear();
        assert_eq!(raise(&p).unwrap().precision, [Precision::Default; 2]);
        p.precision_config.as_mut().unwrap().operand_precision = vec![0, 0, 0];
        assert!(raise(&p).unwrap_err().contains("3 operand precisions"));
        p.precision_config.as_mut().unwrap().operand_precision = vec![0, 3];
        assert!(raise(&p).unwrap_err().contains("precision 3"));
        p.precision_config.as_mut().unwrap().operand_precision = vec![];
        p.precision_config.as_mut().unwrap().algorithm = 11;
        assert!(raise(&p).unwrap_err().contains("algorithm 11"));
    }

    #[test]
    fn each_invariant_has_its_message() {
        let e = infer_dot_general(&f(&[4, 3]), &f(&[4, 3]), &DotDims::contract(1, 0), None)
            .unwrap_err();
        assert!(e.reason.contains("contracting axes differ in size"), "{e}");
        let e = infer_dot_general(
            &f(&[4, 3]),
            &Shape::of::<f64>(&[3, 2]),
            &DotDims::contract(1, 0),
            None,
        )
        .unwrap_err();
        assert!(e.reason.contains("element types differ"), "{e}");
        let e = infer_dot_general(&f(&[4, 3]), &f(&[3, 2]), &DotDims::contract(2, 0), None)
            .unwrap_err();
        assert!(e.reason.contains("out of range"), "{e}");
        let d = DotDims {
            lhs_contracting: vec![1],
            rhs_contracting: vec![0],
            lhs_batch: vec![1],
            rhs_batch: vec![1],
        };
        let e = infer_dot_general(&f(&[4, 3]), &f(&[3, 3]), &d, None).unwrap_err();
        assert!(e.reason.contains("used twice"), "{e}");
        let d = DotDims {
            lhs_contracting: vec![1],
            rhs_contracting: vec![],
            ..Default::default()
        };
        assert!(infer_dot_general(&f(&[4, 3]), &f(&[3, 3]), &d, None).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `convolution` (ConvGeneralDilated)

pub use crate::ir::attrs::{ConvAttrs, ConvDims};

/// Convolution rule (XLA's): input and kernel of one type and rank `spatial + 2`,
/// axes of each set distinct and in range; input features = kernel input features ×
/// feature groups; output features divisible by the group counts; batch divisible by
/// the batch groups; window sizes = kernel spatial sizes. Output spatial sizes follow
/// the window ([`WindowDim::output_size`]).
pub fn infer_convolution(lhs: &Shape, rhs: &Shape, a: &ConvAttrs) -> Result<Shape, ShapeError> {
    const OP: &str = "convolution";
    let (lt, ld) = array_of(OP, lhs)?;
    let (rt, rd) = array_of(OP, rhs)?;
    let err = |k: ShapeErrorKind, r: String| ShapeError::new(OP, &[lhs, rhs], k, r);
    if lt != rt {
        return Err(err(
            ShapeErrorKind::ElementType,
            format!("element types differ ({lt} vs {rt})"),
        ));
    }
    if lt == crate::shape::ElementType::Pred {
        return Err(err(
            ShapeErrorKind::ElementType,
            "needs a numeric element type, got pred".into(),
        ));
    }
    let d = &a.dims;
    let n = d.input_spatial.len();
    if d.kernel_spatial.len() != n || d.output_spatial.len() != n || a.window.len() != n {
        return Err(err(
            ShapeErrorKind::Attribute,
            format!(
                "input, kernel, output and window must all have {n} spatial axes ({}, {}, {})",
                d.kernel_spatial.len(),
                d.output_spatial.len(),
                a.window.len()
            ),
        ));
    }
    let rank = n + 2;
    if ld.len() != rank || rd.len() != rank {
        return Err(err(
            ShapeErrorKind::Rank,
            format!("input and kernel must have rank {rank}"),
        ));
    }
    let distinct = |what: &str, v: Vec<i64>| -> Result<(), ShapeError> {
        for (i, x) in v.iter().enumerate() {
            if *x < 0 || *x as usize >= rank || v[..i].contains(x) {
                return Err(err(
                    ShapeErrorKind::Axis,
                    format!("{what} axes {v:?} must be distinct and below {rank}"),
                ));
            }
        }
        Ok(())
    };
    distinct(
        "input",
        [
            vec![d.input_batch, d.input_feature],
            d.input_spatial.clone(),
        ]
        .concat(),
    )?;
    distinct(
        "kernel",
        [
            vec![d.kernel_input_feature, d.kernel_output_feature],
            d.kernel_spatial.clone(),
        ]
        .concat(),
    )?;
    distinct(
        "output",
        [
            vec![d.output_batch, d.output_feature],
            d.output_spatial.clone(),
        ]
        .concat(),
    )?;
    let (fg, bg) = (a.feature_group_count, a.batch_group_count);
    if fg < 1 || bg < 1 || (fg > 1 && bg > 1) {
        return Err(err(
            ShapeErrorKind::Attribute,
            format!("group counts {fg} and {bg}: each at least 1, not both above 1"),
        ));
    }
    let in_f = ld[d.input_feature as usize];
    let k_in = rd[d.kernel_input_feature as usize];
    let k_out = rd[d.kernel_output_feature as usize];
    let batch = ld[d.input_batch as usize];
    if in_f % fg != 0 || in_f / fg != k_in {
        return Err(err(
            ShapeErrorKind::Dimension,
            format!(
                "input features ({in_f}) must be kernel input features ({k_in}) x feature groups ({fg})"
            ),
        ));
    }
    if k_out % fg != 0 || k_out % bg != 0 || batch % bg != 0 {
        return Err(err(
            ShapeErrorKind::Dimension,
            format!(
                "output features ({k_out}) and batch ({batch}) must divide by the group counts ({fg}, {bg})"
            ),
        ));
    }
    let mut out = vec![0i64; rank];
    out[d.output_batch as usize] = batch / bg;
    out[d.output_feature as usize] = k_out;
    for i in 0..n {
        let w = &a.window[i];
        let k = rd[d.kernel_spatial[i] as usize];
        if w.size != k {
            return Err(err(
                ShapeErrorKind::Dimension,
                format!(
                    "window size {} on spatial axis {i} is not the kernel's {k}",
                    w.size
                ),
            ));
        }
        out[d.output_spatial[i] as usize] = w
            .output_size(ld[d.input_spatial[i] as usize])
            .map_err(|r| err(ShapeErrorKind::Attribute, r))?;
    }
    Ok(Shape::array(lt, &out))
}

pub(crate) fn shape_convolution(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Convolution(a) = kind else {
        return Err(super::table::not_for("convolution", kind));
    };
    infer_convolution(cx.operands[0], cx.operands[1], a)
}

impl ConvDims {
    pub(crate) fn to_proto(&self) -> proto::ConvolutionDimensionNumbers {
        proto::ConvolutionDimensionNumbers {
            input_batch_dimension: self.input_batch,
            input_feature_dimension: self.input_feature,
            input_spatial_dimensions: self.input_spatial.clone(),
            kernel_input_feature_dimension: self.kernel_input_feature,
            kernel_output_feature_dimension: self.kernel_output_feature,
            kernel_spatial_dimensions: self.kernel_spatial.clone(),
            output_batch_dimension: self.output_batch,
            output_feature_dimension: self.output_feature,
            output_spatial_dimensions: self.output_spatial.clone(),
        }
    }

    pub(crate) fn from_proto(p: &proto::ConvolutionDimensionNumbers) -> Self {
        ConvDims {
            input_batch: p.input_batch_dimension,
            input_feature: p.input_feature_dimension,
            input_spatial: p.input_spatial_dimensions.clone(),
            kernel_input_feature: p.kernel_input_feature_dimension,
            kernel_output_feature: p.kernel_output_feature_dimension,
            kernel_spatial: p.kernel_spatial_dimensions.clone(),
            output_batch: p.output_batch_dimension,
            output_feature: p.output_feature_dimension,
            output_spatial: p.output_spatial_dimensions.clone(),
        }
    }
}

pub(crate) fn lower_convolution(
    kind: &OpKind,
    _: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    let OpKind::Convolution(a) = kind else { return };
    p.window = Some(super::window::window_proto(&a.window));
    p.convolution_dimension_numbers = Some(a.dims.to_proto());
    p.feature_group_count = a.feature_group_count;
    p.batch_group_count = a.batch_group_count;
}

pub(crate) fn raise_convolution(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Convolution(Box::new(ConvAttrs {
        window: super::window::raise_window(p)?,
        dims: ConvDims::from_proto(
            p.convolution_dimension_numbers
                .as_ref()
                .ok_or("a convolution without dimension numbers")?,
        ),
        // Zero means 1 in protos written before the field existed.
        feature_group_count: p.feature_group_count.max(1),
        batch_group_count: p.batch_group_count.max(1),
    })))
}

pub(crate) fn text_convolution(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    let OpKind::Convolution(a) = kind else { return };
    out.attrs.push_str(&super::window::text_window(&a.window));
    if a.feature_group_count != 1 {
        out.attr("feature_group_count", a.feature_group_count);
    }
    if a.batch_group_count != 1 {
        out.attr("batch_group_count", a.batch_group_count);
    }
}

impl Op {
    /// XLA's ConvGeneralDilated (as `lax.conv_general_dilated`): this input with
    /// `kernel`, per spatial axis a stride, `(low, high)` padding, an input (lhs)
    /// dilation and a kernel (rhs) dilation; `dims` says which axes are which.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn conv_general_dilated(
        &self,
        kernel: &Op,
        strides: &[i64],
        padding: &[(i64, i64)],
        lhs_dilation: &[i64],
        rhs_dilation: &[i64],
        dims: &ConvDims,
        feature_group_count: i64,
    ) -> Op {
        let loc = Location::caller();
        let ks = match kernel.shape() {
            Ok(s) if s.is_array() => s,
            _ => return self.builder().fail_not_array(kernel, "convolution", loc),
        };
        let n = dims.kernel_spatial.len();
        let lens = [
            strides.len(),
            padding.len(),
            lhs_dilation.len(),
            rhs_dilation.len(),
        ];
        if lens.iter().any(|l| *l != n)
            || dims
                .kernel_spatial
                .iter()
                .any(|a| *a < 0 || *a as usize >= ks.rank())
        {
            return self.builder().fail(
                ShapeError::new(
                    "convolution",
                    &[&ks],
                    ShapeErrorKind::Attribute,
                    format!("strides, padding and dilations need one entry per spatial axis ({n}), got {lens:?}"),
                ),
                loc,
            );
        }
        let window = (0..n)
            .map(|i| WindowDim {
                size: ks.dims()[dims.kernel_spatial[i] as usize],
                stride: strides[i],
                padding_low: padding[i].0,
                padding_high: padding[i].1,
                window_dilation: rhs_dilation[i],
                base_dilation: lhs_dilation[i],
            })
            .collect();
        let attrs = ConvAttrs {
            window,
            dims: dims.clone(),
            feature_group_count,
            batch_group_count: 1,
        };
        self.convolution(kernel, &attrs)
    }

    /// XLA's Convolution with all its attributes ([`ConvAttrs`]): what
    /// [`conv_general_dilated`](Op::conv_general_dilated) builds, plus a batch group
    /// count (the batch split into groups, output feature group `g` seeing batch
    /// group `g`, as `lax.conv_general_dilated`'s `batch_group_count`). The window
    /// sizes must be the kernel's spatial sizes.
    #[track_caller]
    pub fn convolution(&self, kernel: &Op, attrs: &ConvAttrs) -> Op {
        self.builder().emit(
            OpKind::Convolution(Box::new(attrs.clone())),
            &[self, kernel],
            None,
            Location::caller(),
        )
    }
}

/// Convolution (see `convolution_cts`).
pub(crate) fn vjp_convolution(n: &Node) -> Grads {
    let OpKind::Convolution(a) = n.kind else {
        return Err("not a convolution".into());
    };
    convolution_cts(a, n, &n.ct()).map(arrays)
}

/// Convolution: the cotangents of the input and the kernel (JAX's
/// `_conv_general_dilated_transpose_lhs` and `_rhs`), for any dimension numbers,
/// strides, padding (negative too), dilations and group counts.
///
/// - Input: the output cotangent convolved with the kernel reversed in space and
///   its feature axes swapped; the forward strides become the input dilation and
///   the input dilation the strides, the padding makes the result the input's size.
///   Feature groups move into the kernel's new output features; batch groups too,
///   and the result's feature groups back into the batch.
/// - Kernel: the input convolved with the output cotangent as the kernel, batch
///   and feature axes swapped on both; the forward strides become the kernel
///   dilation and the kernel dilation the strides; feature groups become batch
///   groups and batch groups feature groups.
///
/// An output with no elements gives zeros.
fn convolution_cts(
    a: &ConvAttrs,
    n: &crate::autodiff::Node,
    ct: &Op,
) -> Result<Vec<Option<Op>>, String> {
    use crate::autodiff::{wants, zeros_like};
    use crate::ops::window::dilated;
    let (x, k, loc) = (&n.operands[0], &n.operands[1], n.loc);
    let (Ok(xd), Ok(kd), Ok(gd)) = (x.dims(), k.dims(), ct.dims()) else {
        return Ok(vec![None, None]);
    };
    let (fg, bg) = (a.feature_group_count, a.batch_group_count);
    if fg > 1 && bg > 1 {
        return Err(format!(
            "a convolution with both feature groups ({fg}) and batch groups ({bg}) has no gradient"
        ));
    }
    let d = &a.dims;
    let mut out = vec![None, None];
    if gd.contains(&0) || xd.contains(&0) || kd.contains(&0) {
        for (slot, v) in out.iter_mut().zip([x, k]) {
            if wants(v) {
                *slot = Some(zeros_like(v, loc));
            }
        }
        return Ok(out);
    }
    let ns = a.window.len();
    let at = |axes: &[i64], dims: &[i64], i: usize| dims[axes[i] as usize];
    if wants(x) {
        let groups = fg.max(bg);
        let mut kernel = k.clone();
        if groups > 1 {
            kernel = axis_out_of(&kernel, d.kernel_output_feature, groups);
            kernel = axis_into(&kernel, d.kernel_output_feature, d.kernel_input_feature);
        }
        let axes: Vec<i64> = d.kernel_spatial.clone();
        let kernel =
            n.b.emit(OpKind::Reverse { axes: axes.into() }, &[&kernel], None, loc);
        let window: Vec<WindowDim> = (0..ns)
            .map(|i| {
                let w = &a.window[i];
                let kext = dilated(w.size, w.window_dilation);
                let before = kext - w.padding_low - 1;
                let after = dilated(at(&d.input_spatial, &xd, i), w.base_dilation) + kext
                    - 1
                    - dilated(at(&d.output_spatial, &gd, i), w.stride)
                    - before;
                WindowDim {
                    size: w.size,
                    stride: w.base_dilation,
                    padding_low: before,
                    padding_high: after,
                    window_dilation: w.window_dilation,
                    base_dilation: w.stride,
                }
            })
            .collect();
        let attrs = ConvAttrs {
            window,
            dims: ConvDims {
                input_batch: d.output_batch,
                input_feature: d.output_feature,
                input_spatial: d.output_spatial.clone(),
                kernel_input_feature: d.kernel_output_feature,
                kernel_output_feature: d.kernel_input_feature,
                kernel_spatial: d.kernel_spatial.clone(),
                output_batch: d.input_batch,
                output_feature: d.input_feature,
                output_spatial: d.input_spatial.clone(),
            },
            feature_group_count: groups,
            batch_group_count: 1,
        };
        let mut g = ct.convolution(&kernel, &attrs);
        if bg > 1 {
            g = axis_out_of(&g, d.input_feature, bg);
            g = axis_into(&g, d.input_feature, d.input_batch);
        }
        out[0] = Some(g);
    }
    if wants(k) {
        let window: Vec<WindowDim> = (0..ns)
            .map(|i| {
                let w = &a.window[i];
                let gext = dilated(at(&d.output_spatial, &gd, i), w.stride);
                let after = gext - dilated(at(&d.input_spatial, &xd, i), w.base_dilation)
                    + dilated(w.size, w.window_dilation)
                    - w.padding_low
                    - 1;
                WindowDim {
                    size: at(&d.output_spatial, &gd, i),
                    stride: w.window_dilation,
                    padding_low: w.padding_low,
                    padding_high: after,
                    window_dilation: w.stride,
                    base_dilation: w.base_dilation,
                }
            })
            .collect();
        let attrs = ConvAttrs {
            window,
            dims: ConvDims {
                input_batch: d.input_feature,
                input_feature: d.input_batch,
                input_spatial: d.input_spatial.clone(),
                kernel_input_feature: d.output_batch,
                kernel_output_feature: d.output_feature,
                kernel_spatial: d.output_spatial.clone(),
                output_batch: d.kernel_input_feature,
                output_feature: d.kernel_output_feature,
                output_spatial: d.kernel_spatial.clone(),
            },
            feature_group_count: bg,
            batch_group_count: fg,
        };
        out[1] = Some(x.convolution(ct, &attrs));
    }
    Ok(out)
}

/// Splits axis `src` of `x` into `[size, rest]` (the new `size` axis at `src`; JAX's
/// `_reshape_axis_out_of`).
fn axis_out_of(x: &Op, src: i64, size: i64) -> Op {
    let Ok(mut d) = x.dims() else {
        return x.clone();
    };
    let s = src as usize;
    let rest = d[s] / size;
    d.splice(s..s + 1, [size, rest]);
    x.reshape(&d)
}

/// Merges axis `src` of `x` into axis `dst` (numbered with `src` removed), `src`
/// the major part (JAX's `_reshape_axis_into`).
fn axis_into(x: &Op, src: i64, dst: i64) -> Op {
    let Ok(d) = x.dims() else {
        return x.clone();
    };
    let mut perm: Vec<i64> = (0..d.len() as i64).filter(|a| *a != src).collect();
    perm.insert(dst as usize, src);
    let mut to: Vec<i64> = perm.iter().map(|a| d[*a as usize]).collect();
    to.remove(dst as usize);
    to[dst as usize] *= d[src as usize];
    x.transpose(&perm).reshape(&to)
}

// ---------------------------------------------------------------------------------
// Shared by the factorizations: square matrices, triangles

fn square_batch(
    op: &'static str,
    a: &Shape,
) -> Result<(crate::shape::ElementType, Vec<i64>), ShapeError> {
    let (t, d) = array_of(op, a)?;
    if !(t.is_float() || t.is_complex()) {
        return Err(ShapeError::new(
            op,
            &[a],
            ShapeErrorKind::ElementType,
            format!("needs a floating-point type, got {t}"),
        ));
    }
    if d.len() < 2 || d[d.len() - 1] != d[d.len() - 2] {
        return Err(ShapeError::new(
            op,
            &[a],
            ShapeErrorKind::Dimension,
            "needs square matrices in its last two axes",
        ));
    }
    Ok((t, d.to_vec()))
}

/// Which part of the last two axes a mask keeps.
#[derive(Clone, Copy)]
enum Part {
    /// Row ≥ column (`strict`: row > column).
    Lower { strict: bool },
    /// Row ≤ column (`strict`: row < column).
    Upper { strict: bool },
}

/// `x` with the elements outside `part` of each matrix (last two axes) zeroed.
fn mask(x: &Op, part: Part, loc: &'static Location<'static>) -> Op {
    use crate::Comparison;
    let (Ok(d), Ok(ty)) = (x.dims(), x.element_type()) else {
        return x.clone();
    };
    let b = x.builder();
    let r = d.len() as i64;
    let shape = Shape::array(ElementType::S32, &d);
    let row = b.emit(
        OpKind::Iota { dimension: r - 2 },
        &[],
        Some(shape.clone()),
        loc,
    );
    let col = b.emit(OpKind::Iota { dimension: r - 1 }, &[], Some(shape), loc);
    let dir = match part {
        Part::Lower { strict: false } => Comparison::Ge,
        Part::Lower { strict: true } => Comparison::Gt,
        Part::Upper { strict: false } => Comparison::Le,
        Part::Upper { strict: true } => Comparison::Lt,
    };
    let keep = row.compare(&col, dir);
    let zero = b.scalar_of(ty, crate::Scalar::Int(0), loc);
    b.select(&keep, x, &zero)
}

/// `x` with its last two axes swapped.
fn swap_last(x: &Op) -> Op {
    let r = x.rank().unwrap_or(2) as i64;
    let mut perm: Vec<i64> = (0..r).collect();
    perm.swap(r as usize - 2, r as usize - 1);
    x.transpose(&perm)
}

/// The batched product of the matrices in the last two axes of `x` and `y`,
/// contracting axis `xc` of `x` (`r - 2` or `r - 1`) with axis `yc` of `y`.
fn batch_dot(x: &Op, y: &Op, xc: i64, yc: i64) -> Op {
    let r = x.rank().unwrap_or(2) as i64;
    let dims = DotDims {
        lhs_contracting: vec![xc],
        rhs_contracting: vec![yc],
        lhs_batch: (0..r - 2).collect(),
        rhs_batch: (0..r - 2).collect(),
    };
    x.dot_general_with(y, &dims, DotOptions::new().precision(Precision::Highest))
}

// ---------------------------------------------------------------------------------
// `cholesky`

/// Cholesky rule: floating-point square matrices `[..., n, n]`; same shape out.
pub fn infer_cholesky(a: &Shape) -> Result<Shape, ShapeError> {
    square_batch("cholesky", a)?;
    Ok(a.clone())
}

pub(crate) fn shape_cholesky(_: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    infer_cholesky(cx.operands[0])
}

pub(crate) fn lower_cholesky(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Cholesky { lower } = kind {
        p.cholesky_options = Some(proto::CholeskyOptions { lower: *lower });
    }
}

pub(crate) fn raise_cholesky(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Cholesky {
        lower: p.cholesky_options.as_ref().is_some_and(|o| o.lower),
    })
}

pub(crate) fn text_cholesky(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Cholesky { lower } = kind {
        out.attr("lower", lower);
    }
}

impl Op {
    /// The triangular factor `l` of each symmetric positive-definite matrix in the
    /// last two axes (`a = l lᵀ` when `lower`, else `a = uᵀ u`), with the other
    /// triangle zero, as `jnp.linalg.cholesky` gives it.
    /// [`cholesky_unmasked`](Self::cholesky_unmasked) is XLA's own form.
    #[track_caller]
    pub fn cholesky(&self, lower: bool) -> Op {
        let loc = Location::caller();
        let part = if lower {
            Part::Lower { strict: false }
        } else {
            Part::Upper { strict: false }
        };
        mask(&self.on(loc).cholesky_unmasked(lower), part, loc)
    }

    /// XLA's Cholesky: the triangular factor as [`cholesky`](Self::cholesky), the
    /// other triangle of the result unspecified (XLA leaves it as is).
    #[track_caller]
    pub fn cholesky_unmasked(&self, lower: bool) -> Op {
        self.builder().emit(
            OpKind::Cholesky { lower },
            &[self],
            None,
            Location::caller(),
        )
    }
}

/// Cholesky (see `cholesky_cts`).
pub(crate) fn vjp_cholesky(n: &Node) -> Grads {
    let OpKind::Cholesky { lower } = n.kind else {
        return Err("not a cholesky".into());
    };
    cholesky_cts(*lower, n, &n.ct()).map(arrays)
}

/// Cholesky: with `L` the factor as a lower-triangular matrix (the transpose of
/// the upper factor when `!lower`; the unspecified triangle of the result is
/// masked out, and so is that of its cotangent `L̄`), `S = L⁻ᵀ Φ(Lᵀ L̄) L⁻¹` is the
/// cotangent of the symmetric matrix factored (Φ: the lower triangle with the
/// diagonal halved; JAX's rule). That matrix is built from the one triangle the op
/// reads, so the cotangent of the input is `S + Sᵀ` in that triangle off the
/// diagonal, `S` on it, and zero in the other triangle.
fn cholesky_cts(
    lower: bool,
    n: &crate::autodiff::Node,
    ct: &Op,
) -> Result<Vec<Option<Op>>, String> {
    use crate::BinaryOp;
    let (l, loc) = (n.out(), n.loc);
    let Ok(r) = l.rank() else {
        return Ok(vec![None]);
    };
    let r = r as i64;
    let low = Part::Lower { strict: false };
    let (l, lbar) = if lower {
        (mask(l, low, loc), mask(ct, low, loc))
    } else {
        (
            mask(&swap_last(l), low, loc),
            mask(&swap_last(ct), low, loc),
        )
    };
    // Φ(X): the strict lower triangle plus half the diagonal.
    let phi = |x: &Op| {
        let strict = mask(x, Part::Lower { strict: true }, loc);
        let half = mask(&mask(x, low, loc), Part::Upper { strict: false }, loc).binary_scalar(
            BinaryOp::Multiply,
            crate::Scalar::Float(0.5),
            false,
            loc,
        );
        strict.binary(BinaryOp::Add, &half, loc)
    };
    let p = phi(&batch_dot(&l, &lbar, r - 2, r - 2));
    let solve = |left_side, transpose_a, b: &Op| {
        let o = TriangularSolveOptions {
            left_side,
            lower: true,
            unit_diagonal: false,
            transpose_a,
        };
        l.triangular_solve(b, o)
    };
    // Lᵀ Y = P, then S L = Y.
    let y = solve(true, Transpose::Transpose, &p);
    let s = solve(false, Transpose::No, &y);
    let g = phi(&s.binary(BinaryOp::Add, &swap_last(&s), loc));
    Ok(vec![Some(if lower { g } else { swap_last(&g) })])
}

// ---------------------------------------------------------------------------------
// `triangular-solve`

pub use crate::ir::attrs::{Transpose, TriangularSolveOptions};

/// Triangular-solve rule: `a` square `[..., m, m]`, `b` of `a`'s type and batch with
/// `m` rows (left side) or `m` columns (right side); `b`'s shape out.
pub fn infer_triangular_solve(
    a: &Shape,
    b: &Shape,
    o: &TriangularSolveOptions,
) -> Result<Shape, ShapeError> {
    const OP: &str = "triangular-solve";
    let (t, ad) = square_batch(OP, a)?;
    let (bt, bd) = array_of(OP, b)?;
    let err = |k, r: String| ShapeError::new(OP, &[a, b], k, r);
    if bt != t {
        return Err(err(
            ShapeErrorKind::ElementType,
            format!("a is {t}, b is {bt}"),
        ));
    }
    if bd.len() != ad.len() || bd[..bd.len() - 2] != ad[..ad.len() - 2] {
        return Err(err(
            ShapeErrorKind::Dimension,
            "a and b must have the same batch axes".into(),
        ));
    }
    let m = ad[ad.len() - 1];
    let k = if o.left_side {
        bd[bd.len() - 2]
    } else {
        bd[bd.len() - 1]
    };
    if k != m {
        return Err(err(
            ShapeErrorKind::Dimension,
            format!(
                "b's {} axis is {k}, a is {m}x{m}",
                if o.left_side { "row" } else { "column" }
            ),
        ));
    }
    Ok(b.clone())
}

pub(crate) fn shape_triangular_solve(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::TriangularSolve(o) = kind else {
        return Err(super::table::not_for("triangular-solve", kind));
    };
    infer_triangular_solve(cx.operands[0], cx.operands[1], o)
}

pub(crate) fn lower_triangular_solve(
    kind: &OpKind,
    _: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    let OpKind::TriangularSolve(o) = kind else {
        return;
    };
    use proto::triangular_solve_options::Transpose as T;
    p.triangular_solve_options = Some(proto::TriangularSolveOptions {
        left_side: o.left_side,
        lower: o.lower,
        unit_diagonal: o.unit_diagonal,
        transpose_a: (match o.transpose_a {
            Transpose::No => T::NoTranspose,
            Transpose::Transpose => T::Transpose,
            Transpose::Adjoint => T::Adjoint,
        }) as i32,
    });
}

pub(crate) fn raise_triangular_solve(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    use proto::triangular_solve_options::Transpose as T;
    let o = p
        .triangular_solve_options
        .as_ref()
        .ok_or("a triangular-solve without options")?;
    Ok(OpKind::TriangularSolve(TriangularSolveOptions {
        left_side: o.left_side,
        lower: o.lower,
        unit_diagonal: o.unit_diagonal,
        transpose_a: match T::try_from(o.transpose_a) {
            Ok(T::NoTranspose) => Transpose::No,
            Ok(T::Transpose) => Transpose::Transpose,
            Ok(T::Adjoint) => Transpose::Adjoint,
            _ => return Err(format!("invalid transpose_a {}", o.transpose_a)),
        },
    }))
}

pub(crate) fn text_triangular_solve(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    let OpKind::TriangularSolve(o) = kind else {
        return;
    };
    out.attr("left_side", o.left_side);
    out.attr("lower", o.lower);
    out.attr("unit_diagonal", o.unit_diagonal);
    out.attr("transpose_a", format!("{:?}", o.transpose_a));
}

impl Op {
    /// XLA's TriangularSolve: `x` with `op(a) x = b` (or `x op(a) = b`), `a` being
    /// this triangular matrix (batched in leading axes).
    #[track_caller]
    pub fn triangular_solve(&self, b: &Op, options: TriangularSolveOptions) -> Op {
        let loc = Location::caller();
        self.builder()
            .emit(OpKind::TriangularSolve(options), &[self, b], None, loc)
    }
}

/// TriangularSolve (see `triangular_solve_cts`).
pub(crate) fn vjp_triangular_solve(n: &Node) -> Grads {
    let OpKind::TriangularSolve(o) = n.kind else {
        return Err("not a triangular-solve".into());
    };
    triangular_solve_cts(o, n, &n.ct()).map(arrays)
}

/// TriangularSolve (`op(A) X = B` or `X op(A) = B`, `op` the identity or the
/// transpose; real types, so `Adjoint` is `Transpose`): the cotangent of `B` is
/// the solve of the transposed system with `X̄`; that of `A` is `−B̄ Xᵀ` (left
/// side) or `−Xᵀ B̄` (right side), transposed when `op` is, kept in the triangle
/// the op reads (without the diagonal when it is taken as ones).
fn triangular_solve_cts(
    o: &TriangularSolveOptions,
    n: &crate::autodiff::Node,
    ct: &Op,
) -> Result<Vec<Option<Op>>, String> {
    use crate::autodiff::wants;
    let (a, b, x, loc) = (&n.operands[0], &n.operands[1], n.out(), n.loc);
    let Ok(r) = a.rank() else {
        return Ok(vec![None, None]);
    };
    let r = r as i64;
    let transposed = o.transpose_a != Transpose::No;
    let back = TriangularSolveOptions {
        transpose_a: if transposed {
            Transpose::No
        } else {
            Transpose::Transpose
        },
        ..*o
    };
    let bbar = a.triangular_solve(ct, back);
    let mut out = vec![None, None];
    if wants(a) {
        let m = if o.left_side {
            batch_dot(&bbar, x, r - 1, r - 1)
        } else {
            batch_dot(x, &bbar, r - 2, r - 2)
        };
        let m = if transposed { swap_last(&m) } else { m };
        let part = if o.lower {
            Part::Lower {
                strict: o.unit_diagonal,
            }
        } else {
            Part::Upper {
                strict: o.unit_diagonal,
            }
        };
        out[0] = Some(mask(&m, part, loc).unary(crate::UnaryOp::Negate, loc));
    }
    if wants(b) {
        out[1] = Some(bbar);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------
// `qr`: Householder reflections in two loops, a composite of the ops above (XLA
// has no QR instruction; JAX's CPU lowering calls LAPACK's `geqrf` and `orgqr`)

/// Which factors [`Op::qr`] gives: the `mode` of numpy's and JAX's
/// `jnp.linalg.qr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QrMode {
    /// `"reduced"` (the default): for `a: [..., m, n]` and `k = min(m, n)`,
    /// `q: [..., m, k]` with orthonormal columns and `r: [..., k, n]`.
    #[default]
    Reduced,
    /// `"complete"`: `q: [..., m, m]` orthogonal and `r: [..., m, n]` (its rows
    /// from `n` on zero).
    Complete,
}

/// The QR rule: `f32` or `f64` matrices in the last two axes `[..., m, n]` (rank 2
/// or more, batched over the leading axes); the shapes of `(q, r)` for `mode`
/// (see [`QrMode`]).
pub fn infer_qr(a: &Shape, mode: QrMode) -> Result<(Shape, Shape), ShapeError> {
    const OP: &str = "qr";
    let (t, d) = array_of(OP, a)?;
    if !matches!(t, ElementType::F32 | ElementType::F64) {
        let hint = if t.is_float() {
            " (convert to f32 first)"
        } else if t.is_complex() {
            " (complex QR is not supported)"
        } else {
            ""
        };
        return Err(ShapeError::new(
            OP,
            &[a],
            ShapeErrorKind::ElementType,
            format!("needs f32 or f64 matrices, got {t}{hint}"),
        ));
    }
    if d.len() < 2 {
        return Err(ShapeError::new(
            OP,
            &[a],
            ShapeErrorKind::Rank,
            format!(
                "needs matrices in the last two axes (rank 2 or more), got rank {}",
                d.len()
            ),
        ));
    }
    let (batch, m, n) = (&d[..d.len() - 2], d[d.len() - 2], d[d.len() - 1]);
    if m.min(n) > i64::from(i32::MAX) {
        return Err(ShapeError::new(
            OP,
            &[a],
            ShapeErrorKind::Dimension,
            format!("min(m, n) = {} is more steps than a loop counts", m.min(n)),
        ));
    }
    let k = m.min(n);
    let rows = match mode {
        QrMode::Reduced => k,
        QrMode::Complete => m,
    };
    let with = |tail: [i64; 2]| -> Vec<i64> { batch.iter().copied().chain(tail).collect() };
    Ok((
        Shape::array(t, &with([m, rows])),
        Shape::array(t, &with([rows, n])),
    ))
}

impl Op {
    /// The QR decomposition of each matrix in the last two axes, as
    /// `jnp.linalg.qr(a, mode)`: `(q, r)` with `a = q r`, `q`'s columns orthonormal
    /// and `r` upper triangular (shapes in [`QrMode`]; `f32` or `f64`, batched over
    /// leading axes).
    ///
    /// Built from the crate's ops as LAPACK computes it (`geqrf`, then `orgqr`),
    /// `min(m, n)` Householder reflections `H = I − τ v vᵀ` in a
    /// [`fori_loop`](crate::Builder::fori_loop), then their product in a second one. The signs are
    /// LAPACK's, so they equal JAX's on the CPU: the reflection for column `j`
    /// maps it to `β eⱼ` with `β = −sign(α)·‖column j from row j‖` (`α` its
    /// diagonal element; a negative zero counts as negative), so `r`'s diagonal
    /// is negative where `α ≥ 0`; a column already zero below the diagonal is left
    /// as it is (`τ = 0`). Gradients flow through the loops (the usual caveats:
    /// `r`'s signs and a rank-deficient `a` make the factors non-smooth there).
    ///
    /// ```
    /// use xlaclient_core::{Builder, QrMode, Shape};
    /// let b = Builder::new("qr");
    /// let a = b.parameter(0, Shape::of::<f32>(&[8, 5, 3]), "a");
    /// let (q, r) = a.qr(QrMode::Reduced);
    /// assert_eq!((q.dims()?, r.dims()?), (vec![8, 5, 3], vec![8, 3, 3]));
    /// let (q, r) = a.qr(QrMode::Complete);
    /// assert_eq!((q.dims()?, r.dims()?), (vec![8, 5, 5], vec![8, 5, 3]));
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn qr(&self, mode: QrMode) -> (Op, Op) {
        let loc = Location::caller();
        let Ok(s) = self.shape() else {
            return (self.clone(), self.clone());
        };
        if let Err(e) = infer_qr(&s, mode) {
            let f = self.builder().fail(e, loc);
            return (f.clone(), f);
        }
        // Every op built below carries the caller's line.
        let _here = self.on(loc);
        householder_qr(self, &s, mode)
    }
}

/// [`Op::qr`] on an operand its rule accepted (see there).
fn householder_qr(a: &Op, s: &Shape, mode: QrMode) -> (Op, Op) {
    use ElementType::{F64, S32, S64};
    let d = s.dims().to_vec();
    let ty = s.element_type().unwrap_or(ElementType::F32);
    let r = d.len();
    let (m, n) = (d[r - 2], d[r - 1]);
    let k = m.min(n);
    let cols = match mode {
        QrMode::Reduced => k,
        QrMode::Complete => m,
    };
    let with = |tail: &[i64]| -> Vec<i64> { d[..r - 2].iter().chain(tail).copied().collect() };
    // Axes: in `[batch, m, n]` (and `[batch, m]`) rows are `ax_m`, columns `ax_n`.
    let (ax_m, ax_n) = ((r - 2) as i64, (r - 1) as i64);
    let b = a.builder();
    let eye = {
        let (i, j) = (b.iota(S32, &[m, cols], 0), b.iota(S32, &[m, cols], 1));
        i.equal(&j).convert(ty).broadcast_to(&with(&[m, cols]))
    };
    if k == 0 {
        let (_, rs) = infer_qr(s, mode).unwrap_or((s.clone(), s.clone()));
        return (eye, b.zeros(ty, rs.dims()));
    }
    // `vᵀ x` for each batch: `v: [batch, m]`, `x: [batch, m, c]` → `[batch, c]`.
    let vt = |v: &Op, x: &Op| {
        let dims = DotDims {
            lhs_contracting: vec![ax_m],
            rhs_contracting: vec![ax_m],
            lhs_batch: (0..ax_m).collect(),
            rhs_batch: (0..ax_m).collect(),
        };
        v.dot_general_with(x, &dims, DotOptions::new().precision(Precision::Highest))
    };
    // `x + v (−τ w)ᵀ`: the reflection applied, with `w = vᵀ x` (LAPACK's `dlarf`).
    let reflect = |x: &Op, v: &Op, tau: &Op, c: i64| {
        let tw = &vt(v, x) * &tau.reshape(&with(&[1])).neg();
        x + &(&v.reshape(&with(&[m, 1])) * &tw.reshape(&with(&[1, c])))
    };
    // Index `j` (an `s32` scalar) of axis `axis` of `x`, the axis dropped.
    let take = |x: &Op, j: &Op, axis: i64| {
        let Ok(mut dims) = x.dims() else {
            return x.clone();
        };
        let zero = j.builder().zeros(S32, &[]);
        let start: Vec<&Op> = (0..dims.len() as i64)
            .map(|a| if a == axis { j } else { &zero })
            .collect();
        dims[axis as usize] = 1;
        let part = x.dynamic_slice_clamped(&start, &dims);
        dims.remove(axis as usize);
        part.reshape(&dims)
    };
    let int = if ty == F64 { S64 } else { S32 };
    let (k32, vs0, taus0) = (
        k as i32,
        b.zeros(ty, &with(&[m, k])),
        b.zeros(ty, &with(&[k])),
    );
    // `geqrf`: step `j` reflects column `j` to `β eⱼ` (LAPACK's `dlarfg`) and
    // applies the reflection to the columns after it; `v` and `τ` are kept.
    let (rr, vs, taus) = b.fori_loop(0, k32, (a.clone(), vs0, taus0), |j, (x, vs, taus)| {
        let bb = j.builder();
        let (zero, one) = (bb.zeros(ty, &[]), bb.ones(ty, &[]));
        let rows_mn = bb.iota(S32, &d, ax_m);
        let cols_mn = bb.iota(S32, &d, ax_n);
        let rows_m = bb.iota(S32, &with(&[m]), ax_m);
        // Column `j` and its diagonal element, bit for bit (a negative zero too).
        let col = take(&x, j, ax_n);
        let alpha = take(&col, j, ax_m);
        let at_j = rows_m.equal(j);
        let below = bb.select(&rows_m.gt(j), &col, &zero);
        // ‖(α, below)‖, scaled by the largest magnitude against overflow; the
        // selects keep every division and square root away from zero, so that
        // gradients stay finite where `τ = 0`.
        let xmax = below.abs().reduce_max(&[ax_m]);
        let trivial = xmax.equal(0.0);
        let scale = bb.select(&trivial, &one, &alpha.abs().max(&xmax));
        let ssq = &(&below / &scale.reshape(&with(&[1])))
            .square()
            .reduce_sum(&[ax_m])
            + &(&alpha / &scale).square();
        let norm = &scale * &bb.select(&trivial, &one, &ssq).sqrt();
        let negative = alpha.bitcast_convert(int).lt(0);
        let beta = bb.select(&trivial, &alpha, &bb.select(&negative, &norm, &norm.neg()));
        let tau = bb.select(
            &trivial,
            &zero,
            &(&(&beta - &alpha) / &bb.select(&trivial, &one, &beta)),
        );
        let inv = 1.0 / &bb.select(&trivial, &one, &(&alpha - &beta));
        let v = bb.select(&at_j, &one, &(&below * &inv.reshape(&with(&[1]))));
        let col_j = bb.select(
            &rows_mn.equal(j),
            &beta.reshape(&with(&[1, 1])),
            &bb.select(&rows_mn.lt(j), &x, &zero),
        );
        let x = bb.select(
            &cols_mn.gt(j),
            &reflect(&x, &v, &tau, n),
            &bb.select(&cols_mn.equal(j), &col_j, &x),
        );
        let cols_mk = bb.iota(S32, &with(&[m, k]), ax_n);
        let vs = bb.select(&cols_mk.equal(j), &v.reshape(&with(&[m, 1])), &vs);
        let ks = bb.iota(S32, &with(&[k]), ax_m);
        let taus = bb.select(&ks.equal(j), &tau.reshape(&with(&[1])), &taus);
        (x, vs, taus)
    });
    // `orgqr`: q = H₀ H₁ … H_{k−1} times the first `cols` columns of the identity,
    // applied from the last reflection back.
    let q = b.fori_loop(0, k32, eye, |i, q| {
        let j = i64::from(k32 - 1) - i;
        reflect(&q, &take(&vs, &j, ax_n), &take(&taus, &j, ax_m), cols)
    });
    let r_out = if mode == QrMode::Reduced && m > k {
        let mut lim = d.clone();
        lim[r - 2] = k;
        rr.slice(&vec![0; r], &lim, &vec![1; r])
    } else {
        rr
    };
    (q, r_out)
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: a batch axis of both operands becomes a new leading batch axis of
/// the dot; of one operand, a free axis of it (placed where dot_general puts
/// that operand's free axes).
pub(crate) fn batch_dot_general(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Dot(attrs) = n.kind else {
        return Err("not a dot".into());
    };
    let (l, lb) = n.operand(0)?;
    let (r, rb) = n.operand(1)?;
    let up = |v: &[i64]| v.iter().map(|a| a + 1).collect::<Vec<_>>();
    let d = &attrs.dims;
    let mut a = (**attrs).clone();
    match (lb, rb) {
        (Some(_), Some(_)) => {
            let (l, r) = (n.front(0)?, n.front(1)?);
            a.dims.lhs_batch = [vec![0], up(&d.lhs_batch)].concat();
            a.dims.rhs_batch = [vec![0], up(&d.rhs_batch)].concat();
            a.dims.lhs_contracting = up(&d.lhs_contracting);
            a.dims.rhs_contracting = up(&d.rhs_contracting);
            n.emit_front(OpKind::Dot(Box::new(a)), &[l, r])
        }
        (Some(_), None) => {
            let l = n.front(0)?;
            a.dims.lhs_batch = up(&d.lhs_batch);
            a.dims.lhs_contracting = up(&d.lhs_contracting);
            // The batch axis is lhs's first free axis: it follows the batch axes.
            let at = d.lhs_batch.len();
            dot_at(n, a, &l, &r, at)
        }
        (None, Some(_)) => {
            let r = n.front(1)?;
            a.dims.rhs_batch = up(&d.rhs_batch);
            a.dims.rhs_contracting = up(&d.rhs_contracting);
            let lrank = l.rank().map_err(|e| e.to_string())?;
            let at = lrank - d.lhs_contracting.len();
            dot_at(n, a, &l, &r, at)
        }
        (None, None) => Err("no operand is batched".into()),
    }
}

/// Emits the dot with `attrs`, whose result has the batch axis at `at`.
fn dot_at(
    n: &crate::batching::BatchNode,
    attrs: DotAttrs,
    l: &Op,
    r: &Op,
    at: usize,
) -> crate::batching::Batched {
    let out = n.b.emit(OpKind::Dot(Box::new(attrs)), &[l, r], None, n.loc);
    if let Some(e) = crate::batching::failure(&out) {
        return Err(e);
    }
    Ok(vec![crate::batching::BVal::at(out, at)])
}

/// Batching: Cholesky takes leading batch axes as they are.
pub(crate) fn batch_cholesky(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::shifted(n, n.kind.clone())
}

/// Batching: a triangular solve takes leading batch axes as they are (both
/// operands batched).
pub(crate) fn batch_triangular_solve(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::shifted(n, n.kind.clone())
}

/// Tangent: bilinear, `dot(ta, b) + dot(a, tb)`.
pub(crate) fn jvp_dot(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::bilinear(n)
}

/// Tangent: bilinear, `conv(ta, k) + conv(a, tk)`.
pub(crate) fn jvp_convolution(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::bilinear(n)
}

/// `x` (its batch axis of size `size` at `bdim`) with the batch folded into its
/// one-example axis `axis`: that axis, of size `d`, split into `groups` groups,
/// becomes `groups · size · d / groups` long, ordered (group, example, rest).
fn fold_batch(x: &Op, bdim: usize, axis: usize, groups: i64) -> Result<Op, String> {
    let front = crate::batching::move_axis(x, bdim, 0, Location::caller());
    let fd = front.dims().map_err(|e| e.to_string())?;
    let size = fd[0];
    let one = &fd[1..];
    let d = one[axis];
    if groups < 1 || d % groups != 0 {
        return Err(format!(
            "axis {axis} of {d} does not split into {groups} groups"
        ));
    }
    // [B, ..., G, d/G, ...]
    let mut split = vec![size];
    split.extend(&one[..axis]);
    split.extend([groups, d / groups]);
    split.extend(&one[axis + 1..]);
    let r = one.len() as i64;
    let a = axis as i64;
    // [..., G, B, d/G, ...]
    let mut perm: Vec<i64> = (1..=a).collect();
    perm.extend([a + 1, 0, a + 2]);
    perm.extend(a + 3..=r + 1);
    let mut out = one.to_vec();
    out[axis] = d * size;
    Ok(front.reshape(&split).transpose(&perm).reshape(&out))
}

/// The inverse of [`fold_batch`] on a result: axis `axis` of `y`, ordered
/// (group, example, rest), split into a batch axis of `size` at `axis` and the
/// one-example axis after it.
fn unfold_batch(y: &Op, axis: usize, groups: i64, size: i64) -> Result<Op, String> {
    let yd = y.dims().map_err(|e| e.to_string())?;
    let d = yd[axis];
    let rest = d / (groups * size);
    let mut split = yd[..axis].to_vec();
    split.extend([groups, size, rest]);
    split.extend(&yd[axis + 1..]);
    let a = axis as i64;
    let r = yd.len() as i64;
    let mut perm: Vec<i64> = (0..a).collect();
    perm.extend([a + 1, a, a + 2]);
    perm.extend(a + 3..r + 2);
    let mut out = yd[..axis].to_vec();
    out.extend([size, groups * rest]);
    out.extend(&yd[axis + 1..]);
    Ok(y.reshape(&split).transpose(&perm).reshape(&out))
}

/// Batching (the approach of JAX's convolution batch rule): a batched input
/// alone folds the batch into the input's batch axis (inside each batch group);
/// a batched kernel alone folds it into the kernel's output features (inside
/// each feature or batch group), so every example gets its own output features;
/// both batched make each example its own feature groups (the feature group
/// count times the batch size), or its own batch groups when the convolution
/// has batch groups. The result's batch (or feature) axis is split back.
pub(crate) fn batch_convolution(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Convolution(attrs) = n.kind else {
        return Err("not a convolution".into());
    };
    let (l, lb) = n.operand(0)?;
    let (r, rb) = n.operand(1)?;
    let d = &attrs.dims;
    let mut a = (**attrs).clone();
    let (fg, bg) = (attrs.feature_group_count, attrs.batch_group_count);
    let (lhs, rhs, out_axis, groups) = match (lb, rb) {
        (Some(lb), None) => (
            fold_batch(&l, lb, d.input_batch as usize, bg)?,
            r,
            d.output_batch as usize,
            1,
        ),
        (None, Some(rb)) => {
            let g = fg.max(bg);
            (
                l,
                fold_batch(&r, rb, d.kernel_output_feature as usize, g)?,
                d.output_feature as usize,
                g,
            )
        }
        (Some(lb), Some(rb)) if bg > 1 => {
            // Each example its own batch groups: the input's batch and the
            // kernel's output features, example outermost.
            a.batch_group_count = bg * n.size;
            (
                fold_batch(&l, lb, d.input_batch as usize, 1)?,
                fold_batch(&r, rb, d.kernel_output_feature as usize, 1)?,
                d.output_feature as usize,
                1,
            )
        }
        (Some(lb), Some(rb)) => {
            a.feature_group_count = fg * n.size;
            (
                fold_batch(&l, lb, d.input_feature as usize, 1)?,
                fold_batch(&r, rb, d.kernel_output_feature as usize, 1)?,
                d.output_feature as usize,
                1,
            )
        }
        (None, None) => return Err("no operand is batched".into()),
    };
    let out =
        n.b.emit(OpKind::Convolution(Box::new(a)), &[&lhs, &rhs], None, n.loc);
    if let Some(e) = crate::batching::failure(&out) {
        return Err(e);
    }
    let y = unfold_batch(&out, out_axis, groups, n.size)?;
    Ok(vec![crate::batching::BVal::at(y, out_axis)])
}

/// Tangent: with `L` the lower factor (the upper one transposed) and `Ȧ` the
/// tangent of the triangle the op reads, made symmetric,
/// `L̇ = L·Φ(L⁻¹ Ȧ L⁻ᵀ)` (`Φ`: the strict lower triangle plus half the
/// diagonal); the upper factor's tangent is `L̇ᵀ`.
pub(crate) fn jvp_cholesky(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    use crate::BinaryOp;
    let OpKind::Cholesky { lower } = n.kind else {
        return Err("not a cholesky".into());
    };
    let loc = n.loc;
    let r = n.results[0].rank().map_err(|e| e.to_string())? as i64;
    let low = Part::Lower { strict: false };
    let (l, ad) = if *lower {
        (mask(&n.results[0], low, loc), mask(&n.tangent(0), low, loc))
    } else {
        (
            mask(&swap_last(&n.results[0]), low, loc),
            mask(&swap_last(&n.tangent(0)), low, loc),
        )
    };
    // The symmetric matrix whose lower triangle was read.
    let strict = mask(&ad, Part::Lower { strict: true }, loc);
    let sym = ad.binary(BinaryOp::Add, &swap_last(&strict), loc);
    let solve = |left_side, transpose_a, b: &Op| {
        l.triangular_solve(
            b,
            TriangularSolveOptions {
                left_side,
                lower: true,
                unit_diagonal: false,
                transpose_a,
            },
        )
    };
    // X = L⁻¹ Ȧ, then Y Lᵀ = X.
    let x = solve(true, Transpose::No, &sym);
    let y = solve(false, Transpose::Transpose, &x);
    let phi = mask(&y, Part::Lower { strict: true }, loc).binary(
        BinaryOp::Add,
        &mask(&mask(&y, low, loc), Part::Upper { strict: false }, loc).binary_scalar(
            BinaryOp::Multiply,
            crate::Scalar::Float(0.5),
            false,
            loc,
        ),
        loc,
    );
    let ld = batch_dot(&l, &phi, r - 1, r - 2);
    let t = if *lower { ld } else { swap_last(&ld) };
    Ok(vec![Some(crate::autodiff::Ct::Array(t))])
}

/// Tangent: `op(A) X = B` (left side; `X op(A) = B` on the right) gives
/// `op(A) Ẋ = Ḃ − op(Ȧ) X` (`Ḃ − X op(Ȧ)`), solved with the same options; `Ȧ`
/// is the tangent of the triangle the op reads (without the diagonal when it is
/// taken as ones), `op` the transpose (or adjoint) the options say.
pub(crate) fn jvp_triangular_solve(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    use crate::BinaryOp;
    let OpKind::TriangularSolve(o) = n.kind else {
        return Err("not a triangular-solve".into());
    };
    let loc = n.loc;
    let x = &n.results[0];
    let mut rhs = n.tangent(1);
    if n.has(0) {
        let part = if o.lower {
            Part::Lower {
                strict: o.unit_diagonal,
            }
        } else {
            Part::Upper {
                strict: o.unit_diagonal,
            }
        };
        let ad = mask(&n.tangent(0), part, loc);
        let complex = ad.element_type().map_err(|e| e.to_string())?.is_complex();
        let op_a = match o.transpose_a {
            Transpose::No => ad,
            Transpose::Adjoint if complex => {
                return Err("a complex `a` taken as its adjoint".into());
            }
            Transpose::Transpose | Transpose::Adjoint => swap_last(&ad),
        };
        let r = x.rank().map_err(|e| e.to_string())? as i64;
        let term = if o.left_side {
            batch_dot(&op_a, x, r - 1, r - 2)
        } else {
            batch_dot(x, &op_a, r - 1, r - 2)
        };
        rhs = rhs.binary(BinaryOp::Subtract, &term, loc);
    }
    n.emit_like(n.kind.clone(), &[n.operands[0].clone(), rhs])
}
