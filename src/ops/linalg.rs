//! Linear algebra: `dot_general` and numpy-style `matmul`.

use std::panic::Location;

use super::array_of;
use crate::builder::Op;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::OpKind;
use crate::proto;
use crate::shape::Shape;

/// Dimension numbers of a `dot_general`: which axes are contracted (summed over) and
/// which are batch axes (kept, matched one-to-one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DotDims {
    /// Contracted axes of the left operand.
    pub lhs_contracting: Vec<i64>,
    /// Contracted axes of the right operand (paired with `lhs_contracting`).
    pub rhs_contracting: Vec<i64>,
    /// Batch axes of the left operand.
    pub lhs_batch: Vec<i64>,
    /// Batch axes of the right operand (paired with `lhs_batch`).
    pub rhs_batch: Vec<i64>,
}

impl DotDims {
    /// Contract `lhs` axis `l` with `rhs` axis `r`, no batch axes.
    pub fn contract(l: i64, r: i64) -> Self {
        DotDims {
            lhs_contracting: vec![l],
            rhs_contracting: vec![r],
            ..Default::default()
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

/// `dot_general` rule. Output axes: batch axes (in `lhs_batch` order), then the free
/// axes of `lhs`, then the free axes of `rhs`, each in their original order.
pub fn infer_dot_general(lhs: &Shape, rhs: &Shape, d: &DotDims) -> Result<Shape, ShapeError> {
    const OP: &str = "dot_general";
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
    let out = Shape::array(lt, &out);
    super::check_size(OP, &[lhs, rhs], &out)?;
    Ok(out)
}

impl Op {
    /// XLA's DotGeneral: contraction over `dims.lhs_contracting`/`rhs_contracting`
    /// with batch axes `lhs_batch`/`rhs_batch`. See [`infer_dot_general`] for the
    /// output axis order.
    #[track_caller]
    pub fn dot_general(&self, rhs: &Op, dims: &DotDims) -> Op {
        self.dot_general_at(rhs, dims, Location::caller())
    }

    pub(crate) fn dot_general_at(
        &self,
        rhs: &Op,
        dims: &DotDims,
        loc: &'static Location<'static>,
    ) -> Op {
        self.builder()
            .emit(OpKind::Dot(Box::new(dims.clone())), &[self, rhs], None, loc)
    }

    /// Numpy's `matmul`: vector·vector, matrix·vector, vector·matrix, matrix·matrix,
    /// and batched `[..., m, k] x [..., k, n]` with equal batch axes; a rank-2 right
    /// operand applies to every batch of the left one.
    #[track_caller]
    pub fn matmul(&self, rhs: &Op) -> Op {
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
                return self.dot_general_at(rhs, &DotDims::contract(0, rc), loc);
            }
            return self.dot_general_at(rhs, &DotDims::contract(lr - 1, rc), loc);
        }
        if lr == 2 {
            // [m, k] x [b..., k, n]: dot gives [m, b..., n]; move m behind the batch.
            let out = self.dot_general_at(rhs, &DotDims::contract(1, rr - 2), loc);
            let mut perm: Vec<i64> = (1..rr - 1).collect();
            perm.push(0);
            perm.push(rr - 1);
            return out.transpose_at(&perm, loc);
        }
        if lr != rr {
            return self.builder().fail(
                ShapeError::new(
                    "dot_general",
                    &[&ls, &rs],
                    ShapeErrorKind::Rank,
                    "batched matmul needs operands of equal rank (or a rank-2 operand)",
                ),
                loc,
            );
        }
        let batch: Vec<i64> = (0..lr - 2).collect();
        let dims = DotDims {
            lhs_contracting: vec![lr - 1],
            rhs_contracting: vec![rr - 2],
            lhs_batch: batch.clone(),
            rhs_batch: batch,
        };
        self.dot_general_at(rhs, &dims, loc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(d: &[i64]) -> Shape {
        Shape::of::<f32>(d)
    }

    #[test]
    fn matrix_product_shape() {
        let s = infer_dot_general(&f(&[4, 3]), &f(&[3, 2]), &DotDims::contract(1, 0)).unwrap();
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
            infer_dot_general(&f(&[5, 4, 3]), &f(&[5, 3, 2]), &d).unwrap(),
            f(&[5, 4, 2])
        );
    }

    #[test]
    fn each_invariant_has_its_message() {
        let e = infer_dot_general(&f(&[4, 3]), &f(&[4, 3]), &DotDims::contract(1, 0)).unwrap_err();
        assert!(e.reason.contains("contracting axes differ in size"), "{e}");
        let e = infer_dot_general(
            &f(&[4, 3]),
            &Shape::of::<f64>(&[3, 2]),
            &DotDims::contract(1, 0),
        )
        .unwrap_err();
        assert!(e.reason.contains("element types differ"), "{e}");
        let e = infer_dot_general(&f(&[4, 3]), &f(&[3, 2]), &DotDims::contract(2, 0)).unwrap_err();
        assert!(e.reason.contains("out of range"), "{e}");
        let d = DotDims {
            lhs_contracting: vec![1],
            rhs_contracting: vec![0],
            lhs_batch: vec![1],
            rhs_batch: vec![1],
        };
        let e = infer_dot_general(&f(&[4, 3]), &f(&[3, 3]), &d).unwrap_err();
        assert!(e.reason.contains("used twice"), "{e}");
        let d = DotDims {
            lhs_contracting: vec![1],
            rhs_contracting: vec![],
            ..Default::default()
        };
        assert!(infer_dot_general(&f(&[4, 3]), &f(&[3, 3]), &d).is_err());
    }
}
