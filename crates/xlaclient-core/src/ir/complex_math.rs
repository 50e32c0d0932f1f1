//! Complex `sqrt`, `log` and `log-plus-one`, lowered to real arithmetic the way
//! StableHLO's complex math expander writes them.
//!
//! A StableHLO program reaches XLA through a pipeline that replaces these three
//! ops on complex values with accurate real-valued formulas (Dekker products and
//! 2Sum sums near the unit circle, rescaling against overflow; the algorithms of
//! the `functional_algorithms` project), while an `HloModuleProto` that names the
//! ops directly gets XLA's own elemental code, which answers differently: one ulp
//! apart for ordinary values (`sqrt(0.5i)` is `0.49999997 + 0.49999997i` there,
//! `0.5 + 0.5i` here) and far apart at singular points (`log1p(-1)` is `0` there,
//! `-inf` here). JAX only ever takes the StableHLO road, so these are JAX's
//! answers. Lowering the IR to HLO writes the same formulas, op for op, in place
//! of each such instruction, so that a program means the same whichever format
//! compiles it ([`lower`](super::lower) and the HLO text call [`expand`]); the IR
//! keeps the single op, so gradients, tangents and batching use its rules.

use std::borrow::Cow;
use std::panic::Location;

use super::attrs::{BinaryOp, BitwiseOp, Comparison, UnaryOp};
use super::op::OpKind;
use super::{Comp, Instr, Module, Operands, ShapeTable, Value, value_shape};
use crate::shape::{ElementType, Shape};

/// The module with every complex `sqrt`, `log` and `log-plus-one` replaced by its
/// real-valued formula; borrowed unchanged when it has none.
pub(crate) fn expand(m: &Module) -> Cow<'_, Module> {
    let has = |c: &Comp| {
        c.instrs
            .iter()
            .any(|ins| target(&m.shapes, c, ins).is_some())
    };
    if !m.comps.iter().any(has) {
        return Cow::Borrowed(m);
    }
    let mut out = m.clone();
    for (ci, c) in m.comps.iter().enumerate() {
        if !has(c) {
            continue;
        }
        // Old instruction index -> the instruction that now gives its value.
        let mut new_index: Vec<u32> = Vec::with_capacity(c.instrs.len());
        let mut instrs: Vec<Instr> = Vec::with_capacity(c.instrs.len() + 64);
        for old in &c.instrs {
            // Asked of the original instruction: its operands' numbers are the
            // old computation's (renumbered below for the new one).
            let expands = target(&m.shapes, c, old);
            let mut ins = old.clone();
            for v in ins.operands.iter_mut() {
                v.instr = new_index[v.instr as usize];
            }
            match expands {
                Some((op, real)) => {
                    let z = ins.operands[0];
                    let mut e = Emit {
                        instrs: &mut instrs,
                        shapes: &mut out.shapes,
                        real: Shape::array(real, m.shapes.get(ins.shape).dims()),
                        loc: ins.loc,
                    };
                    let v = match op {
                        UnaryOp::Sqrt => e.sqrt(z),
                        UnaryOp::Log => e.log(z),
                        _ => e.log1p(z),
                    };
                    if let Some(s) = ins.sharding.clone() {
                        instrs[v.instr as usize].sharding = Some(s);
                    }
                    new_index.push(v.instr);
                }
                None => {
                    new_index.push(instrs.len() as u32);
                    instrs.push(ins);
                }
            }
        }
        let nc = &mut out.comps[ci];
        nc.instrs = instrs;
        for p in nc.params.iter_mut().flatten() {
            *p = new_index[*p as usize];
        }
        if let Some(r) = nc.root.as_mut() {
            r.instr = new_index[r.instr as usize];
        }
        // Captures name values of the enclosing computation while a body is
        // built; a finished module does not read them.
        nc.captures.clear();
    }
    Cow::Owned(out)
}

/// The op and the real element type of an instruction this module expands.
fn target(shapes: &ShapeTable, c: &Comp, ins: &Instr) -> Option<(UnaryOp, ElementType)> {
    let OpKind::Unary(op @ (UnaryOp::Sqrt | UnaryOp::Log | UnaryOp::LogPlusOne)) = ins.kind else {
        return None;
    };
    let real = match value_shape(c, shapes, *ins.operands.first()?)?.element_type()? {
        ElementType::C64 => ElementType::F32,
        ElementType::C128 => ElementType::F64,
        _ => return None,
    };
    Some((op, real))
}

/// Appends real-valued instructions of one shape to a computation.
struct Emit<'a> {
    instrs: &'a mut Vec<Instr>,
    shapes: &'a mut ShapeTable,
    /// The real shape every value here has (predicates: the same dimensions).
    real: Shape,
    loc: &'static Location<'static>,
}

impl Emit<'_> {
    fn push(&mut self, kind: OpKind, operands: &[Value], shape: Shape) -> Value {
        let shape = self.shapes.intern(shape);
        self.instrs.push(Instr {
            kind,
            operands: Operands::from_slice(operands),
            shape,
            loc: self.loc,
            sharding: None,
        });
        Value::of(self.instrs.len() as u32 - 1)
    }

    fn ty(&self) -> ElementType {
        self.real.element_type().expect("a real array shape")
    }

    fn pred_shape(&self) -> Shape {
        Shape::array(ElementType::Pred, self.real.dims())
    }

    /// `v` in the real type (rounded from `f64` to `f32` as XLA rounds a
    /// constant), broadcast to the shape.
    fn k(&mut self, v: f64) -> Value {
        let ty = self.ty();
        let bytes: Box<[u8]> = match ty {
            ElementType::F32 => (v as f32).to_le_bytes().into(),
            _ => v.to_le_bytes().into(),
        };
        let scalar = self.push(OpKind::Constant(bytes), &[], Shape::scalar(ty));
        if self.real.dims().is_empty() {
            return scalar;
        }
        let shape = self.real.clone();
        self.push(OpKind::Broadcast { dims: Box::new([]) }, &[scalar], shape)
    }

    /// The largest finite value of the real type.
    fn largest(&self) -> f64 {
        match self.ty() {
            ElementType::F32 => f32::MAX as f64,
            _ => f64::MAX,
        }
    }

    fn un(&mut self, op: UnaryOp, x: Value) -> Value {
        let shape = self.real.clone();
        self.push(OpKind::Unary(op), &[x], shape)
    }

    fn bin(&mut self, op: BinaryOp, a: Value, b: Value) -> Value {
        let shape = self.real.clone();
        self.push(OpKind::Binary(op), &[a, b], shape)
    }

    fn add(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinaryOp::Add, a, b)
    }
    fn sub(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinaryOp::Subtract, a, b)
    }
    fn mul(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinaryOp::Multiply, a, b)
    }
    fn div(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinaryOp::Divide, a, b)
    }
    fn max(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinaryOp::Maximum, a, b)
    }
    fn min(&mut self, a: Value, b: Value) -> Value {
        self.bin(BinaryOp::Minimum, a, b)
    }

    fn cmp(&mut self, c: Comparison, a: Value, b: Value) -> Value {
        let shape = self.pred_shape();
        self.push(OpKind::Compare(c), &[a, b], shape)
    }

    fn and(&mut self, a: Value, b: Value) -> Value {
        let shape = self.pred_shape();
        self.push(OpKind::Bitwise(BitwiseOp::And), &[a, b], shape)
    }

    fn or(&mut self, a: Value, b: Value) -> Value {
        let shape = self.pred_shape();
        self.push(OpKind::Bitwise(BitwiseOp::Or), &[a, b], shape)
    }

    fn select(&mut self, p: Value, a: Value, b: Value) -> Value {
        let shape = self.real.clone();
        self.push(OpKind::Select, &[p, a, b], shape)
    }

    fn parts(&mut self, z: Value) -> (Value, Value) {
        (self.un(UnaryOp::Real, z), self.un(UnaryOp::Imag, z))
    }

    fn complex(&mut self, re: Value, im: Value) -> Value {
        let ty = match self.ty() {
            ElementType::F32 => ElementType::C64,
            _ => ElementType::C128,
        };
        let shape = Shape::array(ty, self.real.dims());
        self.push(OpKind::Binary(BinaryOp::Complex), &[re, im], shape)
    }

    /// Veltkamp's splitting constant of the real type (`2^s + 1`, `s` half the
    /// significand): `134217729` for f64, `4097` for f32.
    fn splitter(&mut self) -> Value {
        let v = if self.largest() > 1e308 {
            134217729.0
        } else {
            4097.0
        };
        self.k(v)
    }

    /// Dekker's square of `x`: the high part `x*x` (given) and the low part, so
    /// that `high + low` is `x²` to twice the precision.
    fn square_low(&mut self, x: Value, high: Value, splitter: Value) -> Value {
        let sx = self.mul(splitter, x);
        let d = self.sub(x, sx);
        let xh = self.add(sx, d);
        let xl = self.sub(x, xh);
        let neg = self.un(UnaryOp::Negate, high);
        let hh = self.mul(xh, xh);
        let a = self.add(neg, hh);
        let hl = self.mul(xh, xl);
        let a = self.add(a, hl);
        let a = self.add(a, hl);
        let ll = self.mul(xl, xl);
        self.add(a, ll)
    }

    /// `t[0] + t[1] + … + t[4]`, added left to right with each addition's
    /// rounding error recovered and the errors added back at the end: by 2Sum
    /// (no assumption on magnitudes), or by Fast2Sum where each partial sum
    /// outweighs the next term (`fast`).
    fn compensated_sum(&mut self, t: [Value; 5], fast: bool) -> Value {
        let mut high = t[0];
        let mut low: Option<Value> = None;
        for &b in &t[1..] {
            let a = high;
            high = self.add(a, b);
            // The error of `high = a + b`.
            let s = self.sub(high, a);
            let err = if fast {
                self.sub(b, s)
            } else {
                let r = self.sub(high, s);
                let u = self.sub(a, r);
                let w = self.sub(b, s);
                self.add(u, w)
            };
            low = Some(match low {
                None => err,
                Some(l) => self.add(l, err),
            });
        }
        let low = low.expect("four additions");
        self.add(high, low)
    }

    /// `log(mx) + log1p((mn/mx)²)/2`, with `mn/mx` taken as 1 where `mn == mx`
    /// (both zero or both infinite).
    fn log_hypot(&mut self, mx: Value, mn: Value, half: Value, one: Value, r_first: bool) -> Value {
        let eq = self.cmp(Comparison::Eq, mn, mx);
        let r = self.div(mn, mx);
        let arg = if r_first {
            // log1p: select(mn == mx, 1, r * r).
            let rr = self.mul(r, r);
            self.select(eq, one, rr)
        } else {
            // log: select(mn == mx, 1, r) squared.
            let q = self.select(eq, one, r);
            self.mul(q, q)
        };
        let l1 = self.un(UnaryOp::LogPlusOne, arg);
        let h = self.mul(half, l1);
        let lm = self.un(UnaryOp::Log, mx);
        self.add(lm, h)
    }

    /// `log1p(z)`: real part `log|1 + z|` by cases (large `|z|`: rescaled; `z`
    /// near -1: directly; otherwise `log1p(2x + x² + y²)/2` with Dekker squares
    /// and 2Sum), imaginary part `atan2(y, x + 1)`.
    fn log1p(&mut self, z: Value) -> Value {
        let (x, y) = self.parts(z);
        let ax = self.un(UnaryOp::Abs, x);
        let ay = self.un(UnaryOp::Abs, y);
        let mx = self.max(ax, ay);
        let mn = self.min(ax, ay);
        let half = self.k(0.5);
        let one = self.k(1.0);
        // sqrt(largest) * 0.01, computed in the real type as XLA folds it.
        let limit = match self.ty() {
            ElementType::F32 => (f32::MAX.sqrt() * 0.01f32) as f64,
            _ => f64::MAX.sqrt() * 0.01,
        };
        let limit = self.k(limit);
        let big = self.cmp(Comparison::Gt, mx, limit);
        let far = self.log_hypot(mx, mn, half, one, true);

        let xp1 = self.add(x, one);
        let axp1 = self.un(UnaryOp::Abs, xp1);
        let near_sum = self.add(axp1, ay);
        let p2 = self.k(0.2);
        let near = self.cmp(Comparison::Lt, near_sum, p2);
        let yy = self.mul(y, y);
        let xp1sq = self.mul(xp1, xp1);
        let s = self.add(xp1sq, yy);
        let ls = self.un(UnaryOp::Log, s);
        let near_value = self.mul(half, ls);

        // 2x + x² + y², summed in double precision.
        let x2 = self.add(x, x);
        let xx = self.mul(x, x);
        let split = self.splitter();
        let yy_low = self.square_low(y, yy, split);
        let xx_low = self.square_low(x, xx, split);
        let sum = self.compensated_sum([x2, yy, xx, yy_low, xx_low], false);
        let lsum = self.un(UnaryOp::LogPlusOne, sum);
        let middle = self.mul(half, lsum);

        let inner = self.select(near, near_value, middle);
        let re = self.select(big, far, inner);
        let im = self.bin(BinaryOp::Atan2, y, xp1);
        self.complex(re, im)
    }

    /// `log(z)`: real part `log1p(x² + y² - 1)/2` summed with Dekker squares and
    /// Fast2Sum where that is below 1/2 in magnitude, else `log|z|` rescaled;
    /// imaginary part `atan2(y, x)`.
    fn log(&mut self, z: Value) -> Value {
        let (x, y) = self.parts(z);
        let m1 = self.k(-1.0);
        let yy = self.mul(y, y);
        let xx = self.mul(x, x);
        let gt = self.cmp(Comparison::Gt, yy, xx);
        let mxh = self.select(gt, yy, xx);
        let mnh = self.select(gt, xx, yy);
        let split = self.splitter();
        let yy_low = self.square_low(y, yy, split);
        let xx_low = self.square_low(x, xx, split);
        let sum = self.compensated_sum([m1, mxh, mnh, yy_low, xx_low], true);
        let asum = self.un(UnaryOp::Abs, sum);
        let half = self.k(0.5);
        let close = self.cmp(Comparison::Lt, asum, half);
        let lsum = self.un(UnaryOp::LogPlusOne, sum);
        let close_value = self.mul(half, lsum);
        let ax = self.un(UnaryOp::Abs, x);
        let ay = self.un(UnaryOp::Abs, y);
        let mx = self.max(ax, ay);
        let mn = self.min(ax, ay);
        let one = self.k(1.0);
        let far = self.log_hypot(mx, mn, half, one, false);
        let re = self.select(close, close_value, far);
        let im = self.bin(BinaryOp::Atan2, y, x);
        self.complex(re, im)
    }

    /// `sqrt(mx² + mn²)`-like hypotenuse of the expander's `sqrt`: `√2·mx`
    /// where `mx == mn`, `mx + mx·r/2` where `√(1+r)` rounds to 1, else
    /// `mx·√(1+r)`, with `r = (mn/mx)²`.
    fn hypot(
        &mut self,
        mx: Value,
        mn: Value,
        sq2: Value,
        one: Value,
        two: Value,
        zero: Value,
    ) -> Value {
        let eq = self.cmp(Comparison::Eq, mx, mn);
        let a = self.mul(sq2, mx);
        let q = self.div(mn, mx);
        let r = self.mul(q, q);
        let s = self.add(one, r);
        let sqa = self.un(UnaryOp::Sqrt, s);
        let sqa_one = self.cmp(Comparison::Eq, sqa, one);
        let r_pos = self.cmp(Comparison::Gt, r, zero);
        let tiny = self.and(sqa_one, r_pos);
        let mr = self.mul(mx, r);
        let mr2 = self.div(mr, two);
        let b = self.add(mx, mr2);
        let c = self.mul(mx, sqa);
        let bc = self.select(tiny, b, c);
        self.select(eq, a, bc)
    }

    /// `sqrt(z)`: `u = √((|z| + |x|)/2)` and `|y|/(2u)`, with the cases where `u`
    /// underflows or overflows rescaled, signs from `x` and `y`.
    fn sqrt(&mut self, z: Value) -> Value {
        let (x, y) = self.parts(z);
        let zero = self.k(0.0);
        let one = self.k(1.0);
        let two = self.k(2.0);
        let sq2 = self.k(std::f64::consts::SQRT_2);
        let ax = self.un(UnaryOp::Abs, x);
        let ay = self.un(UnaryOp::Abs, y);
        let eq_ax_ay = self.cmp(Comparison::Eq, ax, ay);
        let sq_ax = self.un(UnaryOp::Sqrt, ax);
        // u where |x| == |y|: √|x| · √((1 + √2)/2) (the constant over √2).
        let c1 = self.k(1.5537739740300374);
        let ue = self.mul(sq_ax, c1);
        let u_eq = self.div(ue, sq2);
        let mx = self.max(ax, ay);
        let mn = self.min(ax, ay);
        let hyp = self.hypot(mx, mn, sq2, one, two, zero);
        let hyp2 = self.div(hyp, two);
        let ax2 = self.div(ax, two);
        let us = self.add(hyp2, ax2);
        let u_general = self.un(UnaryOp::Sqrt, us);
        let inf = self.k(f64::INFINITY);
        let u_zero = self.cmp(Comparison::Eq, u_general, zero);
        let u_inf = self.cmp(Comparison::Eq, u_general, inf);
        let rescale = self.or(u_zero, u_inf);
        let gt_ax_ay = self.cmp(Comparison::Gt, ax, ay);
        let lt_ax_ay = self.cmp(Comparison::Lt, ax, ay);
        let q1 = self.div(ax, ay);
        let q2 = self.div(ay, ax);
        let q = self.select(lt_ax_ay, q1, q2);
        let r0 = self.select(eq_ax_ay, one, q);
        let ar0 = self.un(UnaryOp::Abs, r0);
        let mx0 = self.max(one, ar0);
        let mn0 = self.min(one, ar0);
        let h = self.hypot(mx0, mn0, sq2, one, two, zero);
        let oh = self.add(one, h);
        let sq_1h = self.un(UnaryOp::Sqrt, oh);
        let sq_ay = self.un(UnaryOp::Sqrt, ay);
        let rh = self.add(r0, h);
        let sq_rh = self.un(UnaryOp::Sqrt, rh);
        // u.
        let d1 = self.div(sq_1h, sq2);
        let u_gt = self.mul(sq_ax, d1);
        let d2 = self.div(sq_rh, sq2);
        let u_lt = self.mul(sq_ay, d2);
        let u_scaled = self.select(gt_ax_ay, u_gt, u_lt);
        let u_rest = self.select(rescale, u_scaled, u_general);
        let u = self.select(eq_ax_ay, u_eq, u_rest);
        // |y| / u.
        let c2 = self.k(2.19736822693562);
        let v_eq = self.div(sq_ay, c2);
        let p1 = self.div(sq_ax, sq_ay);
        let p2 = self.div(sq_ay, sq_ax);
        let p = self.select(lt_ax_ay, p1, p2);
        let p = self.select(eq_ax_ay, one, p);
        let n = self.mul(sq_ay, p);
        let m = self.mul(sq_1h, sq2);
        let v_gt = self.div(n, m);
        let m2 = self.mul(sq_rh, sq2);
        let v_lt = self.div(sq_ay, m2);
        let v_scaled = self.select(gt_ax_ay, v_gt, v_lt);
        let ug2 = self.mul(u_general, two);
        let v_general = self.div(ay, ug2);
        let v_rest = self.select(rescale, v_scaled, v_general);
        let v = self.select(eq_ax_ay, v_eq, v_rest);
        // Signs.
        let x_ge = self.cmp(Comparison::Ge, x, zero);
        let re = self.select(x_ge, u, v);
        let x_lt = self.cmp(Comparison::Lt, x, zero);
        let y_lt = self.cmp(Comparison::Lt, y, zero);
        let nu = self.un(UnaryOp::Negate, u);
        let su = self.select(y_lt, nu, u);
        let nv = self.un(UnaryOp::Negate, v);
        let sv = self.select(y_lt, nv, v);
        let im = self.select(x_lt, su, sv);
        self.complex(re, im)
    }
}
