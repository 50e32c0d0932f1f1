//! The fuzzer: a random-graph generator over the whole public op set, a mutator of
//! serialized modules, and a runner that executes each case in a child process (so
//! that an abort or a segfault in the plugin is caught and its seed reported).
//!
//! Shared by `tests/fuzz.rs` (a short run inside `cargo test`), `tests/ops_types.rs`
//! (the child-process runner) and `examples/fuzz.rs` (long runs). The including crate
//! must also declare the shared helpers as `mod common` (for [`Rng`]).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::Rng;
use xlaclient::ClientExt;
use xlaclient::ir::Opcode;
use xlaclient::ops::elementwise::{broadcast_dims, infer_binary, infer_unary};
use xlaclient::ops::linalg::infer_dot_general;
use xlaclient::ops::shape_ops::infer_reshape;
use xlaclient::proto::{self, HloModuleProto};
use xlaclient::{
    BinaryOp, Buffer, Builder, Client, ClientOptions, Comparison, CompileOptions, Computation,
    DotDims, DotOptions, ElementType, NativeType, Op, Plugin, Precision, Shape, UnaryOp,
};

/// The element types a parameter or an array constant can hold (uploadable from the
/// host, `f16` and `bf16` as the `half` crate's types); c64 and c128 values are made
/// by `convert`.
pub const HOST: [ElementType; 13] = [
    ElementType::Pred,
    ElementType::S8,
    ElementType::S16,
    ElementType::S32,
    ElementType::S64,
    ElementType::U8,
    ElementType::U16,
    ElementType::U32,
    ElementType::U64,
    ElementType::F16,
    ElementType::Bf16,
    ElementType::F32,
    ElementType::F64,
];

/// Runs `$body` with `$T` the Rust type of host element type `$ty`.
macro_rules! with_native {
    ($ty:expr, $T:ident => $body:expr) => {
        match $ty {
            ElementType::Pred => {
                type $T = bool;
                $body
            }
            ElementType::S8 => {
                type $T = i8;
                $body
            }
            ElementType::S16 => {
                type $T = i16;
                $body
            }
            ElementType::S32 => {
                type $T = i32;
                $body
            }
            ElementType::S64 => {
                type $T = i64;
                $body
            }
            ElementType::U8 => {
                type $T = u8;
                $body
            }
            ElementType::U16 => {
                type $T = u16;
                $body
            }
            ElementType::U32 => {
                type $T = u32;
                $body
            }
            ElementType::U64 => {
                type $T = u64;
                $body
            }
            ElementType::F16 => {
                type $T = xlaclient::half::f16;
                $body
            }
            ElementType::Bf16 => {
                type $T = xlaclient::half::bf16;
                $body
            }
            ElementType::F32 => {
                type $T = f32;
                $body
            }
            ElementType::F64 => {
                type $T = f64;
                $body
            }
            other => panic!("{other} has no host type"),
        }
    };
}

/// The largest element count the generator gives a value it means to be valid
/// (keeps compiles and runs fast).
const CAP: i64 = 2048;

fn count(d: &[i64]) -> i64 {
    d.iter().fold(1i64, |a, x| a.saturating_mul(*x))
}

impl Rng {
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    /// A random permutation of `0..n`.
    pub fn perm(&mut self, n: usize) -> Vec<i64> {
        let mut p: Vec<i64> = (0..n as i64).collect();
        for i in (1..n).rev() {
            p.swap(i, self.below(i + 1));
        }
        p
    }
}

/// The random graph under construction.
struct Gen {
    rng: Rng,
    b: Builder,
    /// Array values (the pool operands are drawn from).
    vals: Vec<Op>,
    /// Tuple values.
    tuples: Vec<Op>,
    params: usize,
    /// True for a graph meant to be valid: attributes and operands are chosen to
    /// fit (the builder may still reject it). False: each choice may be wrong.
    valid: bool,
}

fn shape_of(o: &Op) -> Shape {
    o.shape().unwrap_or(Shape::Tuple(vec![]))
}

fn ty_of(o: &Op) -> ElementType {
    o.element_type().unwrap_or(ElementType::F32)
}

fn dims_of(o: &Op) -> Vec<i64> {
    o.dims().unwrap_or_default()
}

fn unary_accepts(u: UnaryOp, t: ElementType) -> bool {
    infer_unary(u, &Shape::scalar(t)).is_ok()
}

fn binary_accepts(b: BinaryOp, t: ElementType) -> bool {
    let s = Shape::scalar(t);
    infer_binary(b, &s, &s).is_ok()
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut rng = Rng(seed);
        let valid = rng.chance(0.75);
        Gen {
            rng,
            b: Builder::new(&format!("fuzz_{seed}")),
            vals: Vec::new(),
            tuples: Vec::new(),
            params: 0,
            valid,
        }
    }

    /// True with probability `p` in a graph that may be invalid, never otherwise.
    fn bad(&mut self, p: f64) -> bool {
        !self.valid && self.rng.chance(p)
    }

    fn dim(&mut self) -> i64 {
        self.rng.pick(&[0, 1, 1, 2, 2, 3, 3, 4, 5, 7])
    }

    fn dims(&mut self) -> Vec<i64> {
        let rank = self.rng.pick(&[0, 1, 1, 2, 2, 2, 3, 3, 4]);
        let mut d: Vec<i64> = (0..rank).map(|_| self.dim()).collect();
        if self.rng.chance(0.7) {
            // Mostly non-empty arrays: zeros are rarer than the table says.
            for x in d.iter_mut() {
                if *x == 0 {
                    *x = 2;
                }
            }
        }
        self.fit(d)
    }

    /// Shrinks `d` until it holds at most [`CAP`] elements.
    fn fit(&mut self, mut d: Vec<i64>) -> Vec<i64> {
        while count(&d) > CAP {
            let i = self.rng.below(d.len());
            d[i] = (d[i] / 2).max(1);
        }
        d
    }

    fn any_type(&mut self) -> ElementType {
        self.rng.pick(&ElementType::ALL)
    }

    /// A new parameter of type `ty` (declared as f32 then converted for the types
    /// with no host upload).
    fn param(&mut self, ty: ElementType, dims: &[i64]) -> Op {
        let host = if HOST.contains(&ty) {
            ty
        } else {
            ElementType::F32
        };
        let mut n = self.params;
        if self.bad(0.05) {
            n = self.rng.below(self.params + 2); // a duplicate or a gap
        } else {
            self.params += 1;
        }
        let mut dims = dims.to_vec();
        if self.bad(0.05) && !dims.is_empty() {
            dims[0] = -1 - self.rng.below(3) as i64;
        }
        let p = self
            .b
            .parameter(n, Shape::array(host, &dims), &format!("p{n}"));
        p.convert(ty)
    }

    /// A new constant of type `ty`: an array literal, or a number of the type.
    fn constant(&mut self, ty: ElementType, dims: &[i64]) -> Op {
        if dims.is_empty() && self.rng.chance(0.5) {
            let v = self.rng.below(4) as i64;
            return self.b.constant_of_type(ty, v);
        }
        let host = if HOST.contains(&ty) {
            ty
        } else {
            ElementType::F32
        };
        let n = count(dims).clamp(0, CAP) as usize;
        let mut len = n;
        if self.bad(0.1) {
            len = n + 1;
        }
        let vals: Vec<f64> = (0..len)
            .map(|_| self.rng.below(7) as f64 - 2.0 + if self.rng.chance(0.3) { 0.5 } else { 0.0 })
            .collect();
        let c = with_native!(host, T => {
            let xs: Vec<T> = vals.iter().map(|v| {
                let v = if T::TYPE.is_unsigned_int() { v.abs() } else { *v };
                NativeType::from_f64(v)
            }).collect();
            self.b.constant_array(&xs, dims)
        });
        c.convert(ty)
    }

    /// A fresh value of `ty` and `dims`: a parameter or a constant.
    fn fresh(&mut self, ty: ElementType, dims: &[i64]) -> Op {
        if self.rng.chance(0.5) {
            self.param(ty, dims)
        } else {
            self.constant(ty, dims)
        }
    }

    /// An operand from the pool (or a fresh one).
    fn pick(&mut self) -> Op {
        if self.vals.is_empty() || self.rng.chance(0.1) {
            let (t, d) = (self.any_type(), self.dims());
            let v = self.fresh(t, &d);
            self.vals.push(v.clone());
            return v;
        }
        // Recent values more often: deeper graphs.
        let n = self.vals.len();
        let i = if self.rng.chance(0.6) {
            n - 1 - self.rng.below(n.min(3))
        } else {
            self.rng.below(n)
        };
        self.vals[i].clone()
    }

    /// `x` as element type `ty` (a fresh value when XLA cannot convert: complex to
    /// real).
    fn coerce(&mut self, x: &Op, ty: ElementType) -> Op {
        let from = ty_of(x);
        if from == ty || self.bad(0.2) {
            return x.clone();
        }
        if from.is_complex() && !ty.is_complex() && !self.bad(0.5) {
            let d = dims_of(x);
            return self.fresh(ty, &d);
        }
        x.convert(ty)
    }

    /// An operand whose type `ok` accepts.
    fn pick_typed(&mut self, ok: impl Fn(ElementType) -> bool) -> Op {
        let x = self.pick();
        if ok(ty_of(&x)) || self.bad(0.3) {
            return x;
        }
        let good: Vec<ElementType> = ElementType::ALL.into_iter().filter(|t| ok(*t)).collect();
        let t = self.rng.pick(&good);
        self.coerce(&x, t)
    }

    /// Dims that broadcast (numpy) with `d`: a suffix of it, some axes set to 1.
    fn compat_dims(&mut self, d: &[i64]) -> Vec<i64> {
        if self.bad(0.2) {
            return self.dims();
        }
        let keep = self.rng.below(d.len() + 1);
        let mut out: Vec<i64> = d[d.len() - keep..].to_vec();
        for x in out.iter_mut() {
            if self.rng.chance(0.3) {
                *x = 1;
            }
        }
        if self.rng.chance(0.15) && out.len() < 4 {
            // The other side may be the smaller one: extend with a new major axis.
            let mut big = vec![self.rng.pick(&[1, 2, 3])];
            big.extend(d);
            if big.len() <= 4 && count(&big) <= CAP {
                return big;
            }
        }
        out
    }

    /// An operand that broadcasts with `x` and has its element type.
    fn partner(&mut self, x: &Op) -> Op {
        let d = dims_of(x);
        let ty = ty_of(x);
        let cands: Vec<Op> = self
            .vals
            .iter()
            .filter(|v| {
                v.dims()
                    .map(|vd| broadcast_dims(&d, &vd).is_ok_and(|o| count(&o) <= CAP))
                    .unwrap_or(false)
            })
            .cloned()
            .collect();
        let y = if !cands.is_empty() && self.rng.chance(0.6) {
            let i = self.rng.below(cands.len());
            cands[i].clone()
        } else {
            let cd = self.compat_dims(&d);
            self.fresh(ty, &cd)
        };
        self.coerce(&y, ty)
    }

    /// A Rust number that fits `ty` (or may not, in an invalid graph).
    fn number(&mut self, ty: ElementType) -> f64 {
        if self.bad(0.3) {
            return self.rng.pick(&[-1.0, 2.5, 300.0, 1e10]);
        }
        if ty.is_float() || ty.is_complex() {
            self.rng.pick(&[0.5, 1.0, 2.0, -1.5])
        } else if ty == ElementType::Pred {
            self.rng.pick(&[0.0, 1.0])
        } else {
            self.rng.pick(&[0.0, 1.0, 2.0, 3.0])
        }
    }

    fn unary(&mut self, u: UnaryOp, f: impl Fn(&Op) -> Op) -> Op {
        let x = self.pick_typed(|t| unary_accepts(u, t));
        f(&x)
    }

    /// A binary op: two operands that broadcast, or an operand and a Rust number
    /// when the op has an operator (`sym`).
    fn binary(&mut self, b: BinaryOp, f: impl Fn(&Op, &Op) -> Op, sym: Option<char>) -> Op {
        let x = self.pick_typed(|t| binary_accepts(b, t));
        if let Some(c) = sym.filter(|_| self.rng.chance(0.3)) {
            let v = self.number(ty_of(&x));
            let left = self.rng.chance(0.5);
            let int = v.fract() == 0.0 && v.abs() < 1e9 && self.rng.chance(0.5);
            macro_rules! num {
                ($v:expr) => {
                    match (c, left) {
                        ('+', false) => &x + $v,
                        ('+', true) => $v + &x,
                        ('-', false) => &x - $v,
                        ('-', true) => $v - &x,
                        ('*', false) => &x * $v,
                        ('*', true) => $v * &x,
                        ('/', false) => &x / $v,
                        _ => $v / &x,
                    }
                };
            }
            return if int { num!(v as i64) } else { num!(v) };
        }
        let y = self.partner(&x);
        if self.rng.chance(0.5) {
            f(&x, &y)
        } else {
            f(&y, &x)
        }
    }

    fn compare(&mut self) -> Op {
        let x = self.pick();
        let y = self.partner(&x);
        let dir = self.rng.pick(&[
            Comparison::Eq,
            Comparison::Ne,
            Comparison::Lt,
            Comparison::Le,
            Comparison::Gt,
            Comparison::Ge,
        ]);
        x.compare(&y, dir)
    }

    fn select(&mut self) -> Op {
        let t = self.pick();
        let f = self.partner(&t);
        let (td, fd) = (dims_of(&t), dims_of(&f));
        let both = broadcast_dims(&td, &fd).unwrap_or(td);
        let preds: Vec<Op> = self
            .vals
            .iter()
            .filter(|v| {
                v.element_type().ok() == Some(ElementType::Pred)
                    && v.dims()
                        .is_ok_and(|d| broadcast_dims(&d, &both).is_ok_and(|o| count(&o) <= CAP))
            })
            .cloned()
            .collect();
        let p = if !preds.is_empty() && self.rng.chance(0.6) {
            let i = self.rng.below(preds.len());
            preds[i].clone()
        } else if self.bad(0.3) {
            self.pick()
        } else {
            let cd = self.compat_dims(&both);
            self.fresh(ElementType::Pred, &cd)
        };
        self.b.select(&p, &t, &f)
    }

    fn broadcast(&mut self) -> Op {
        let x = self.pick();
        let d = dims_of(&x);
        match self.rng.below(3) {
            0 => {
                // broadcast_in_dim: operand axes go to increasing output positions.
                let extra = self.rng.below(3).min(4 - d.len().min(4));
                let rank = d.len() + extra;
                let mut pos: Vec<i64> = self.rng.perm(rank)[..d.len()].to_vec();
                pos.sort_unstable();
                let mut out: Vec<i64> = (0..rank).map(|_| self.rng.pick(&[1, 2, 3])).collect();
                for (i, p) in pos.iter().enumerate() {
                    out[*p as usize] = if d[i] == 1 && self.rng.chance(0.3) {
                        3
                    } else {
                        d[i]
                    };
                }
                if self.bad(0.5) {
                    match self.rng.below(4) {
                        0 if !pos.is_empty() => pos.reverse(),
                        1 if !pos.is_empty() => pos[0] = rank as i64 + 1,
                        2 if !out.is_empty() => out[0] += 1,
                        _ => pos.push(0),
                    }
                }
                if count(&out) > CAP {
                    return x;
                }
                x.broadcast_in_dim(&out, &pos)
            }
            1 => {
                let n = self.rng.below(3).min(4 - d.len().min(4));
                let mut prefix: Vec<i64> = (0..n).map(|_| self.dim()).collect();
                if self.bad(0.3) {
                    prefix.push(-2);
                }
                if count(&prefix).saturating_mul(count(&d)) > CAP {
                    return x;
                }
                x.broadcast(&prefix)
            }
            _ => {
                let mut out = if self.rng.chance(0.5) && d.len() < 4 {
                    let mut o = vec![self.rng.pick(&[1, 2, 3])];
                    o.extend(&d);
                    o
                } else {
                    d.clone()
                };
                let off = out.len() - d.len();
                for (i, x) in d.iter().enumerate() {
                    if *x == 1 && self.rng.chance(0.5) {
                        out[off + i] = 2;
                    }
                }
                if self.bad(0.5) {
                    out = self.dims();
                }
                if count(&out) > CAP {
                    return x;
                }
                x.broadcast_to(&out)
            }
        }
    }

    fn reshape(&mut self) -> Op {
        let x = self.pick();
        let n = count(&dims_of(&x));
        let rank = self.rng.below(5);
        let mut out = Vec::new();
        if n == 0 {
            out = (0..rank.max(1))
                .map(|_| self.rng.pick(&[1, 2, 3]))
                .collect();
            let i = self.rng.below(out.len());
            out[i] = 0;
        } else if rank > 0 {
            let mut rem = n;
            for _ in 0..rank - 1 {
                let divs: Vec<i64> = (1..=rem).filter(|k| rem % k == 0 && *k <= 8).collect();
                let k = self.rng.pick(&divs);
                out.push(k);
                rem /= k;
            }
            out.push(rem);
            let p = self.rng.perm(out.len());
            out = p.iter().map(|i| out[*i as usize]).collect();
        } else if n != 1 {
            out.push(n);
        }
        if !out.is_empty() && self.rng.chance(0.3) {
            let i = self.rng.below(out.len());
            let mut with = out.clone();
            with[i] = -1;
            if infer_reshape(&shape_of(&x), &with).is_ok() || !self.valid {
                out = with;
            }
        }
        if self.bad(0.5) {
            match self.rng.below(3) {
                0 => out.push(3),
                1 => out = vec![-1, -1],
                _ => out = vec![i64::MAX, 2],
            }
        }
        x.reshape(&out)
    }

    fn transpose(&mut self) -> Op {
        let x = self.pick();
        let r = dims_of(&x).len();
        if self.rng.chance(0.25) {
            return x.t();
        }
        let mut p = self.rng.perm(r);
        for a in p.iter_mut() {
            if self.rng.chance(0.2) {
                *a -= r as i64; // negative axes count from the end
            }
        }
        if self.bad(0.5) {
            match self.rng.below(3) {
                0 => p.push(0),
                1 if r > 1 => p[0] = p[1],
                _ => p = vec![r as i64 + 1; r.max(1)],
            }
        }
        x.transpose(&p)
    }

    fn convert(&mut self) -> Op {
        let x = self.pick();
        let t = self.any_type();
        if ty_of(&x).is_complex() && !t.is_complex() && !self.bad(0.5) {
            return x.convert(ElementType::C128);
        }
        x.convert(t)
    }

    fn tuple(&mut self) -> Op {
        let n = self.rng.below(3) + 1;
        let mut elems: Vec<Op> = (0..n).map(|_| self.pick()).collect();
        if !self.tuples.is_empty() && self.rng.chance(0.2) {
            let i = self.rng.below(self.tuples.len());
            elems.push(self.tuples[i].clone());
        }
        let refs: Vec<&Op> = elems.iter().collect();
        self.b.tuple(&refs)
    }

    fn get_tuple_element(&mut self) -> Op {
        let t = if self.tuples.is_empty() || self.bad(0.1) {
            if self.bad(0.3) {
                self.pick()
            } else {
                let t = self.tuple();
                self.tuples.push(t.clone());
                t
            }
        } else {
            let i = self.rng.below(self.tuples.len());
            self.tuples[i].clone()
        };
        let n = match shape_of(&t) {
            Shape::Tuple(e) => e.len(),
            _ => 1,
        };
        let mut i = self.rng.below(n.max(1));
        if self.bad(0.3) {
            i = n + self.rng.below(2);
        }
        t.get_tuple_element(i)
    }

    fn dot(&mut self) -> Op {
        let x = self.pick_typed(|t| t != ElementType::Pred);
        let ty = ty_of(&x);
        let d = dims_of(&x);
        let r = d.len();
        if self.rng.chance(0.4) {
            // matmul: [k]x[k], [k]x[k,n], [..,m,k]x[k], [..,m,k]x[k,n], [b..,m,k]x[b..,k,n].
            if r == 0 && !self.bad(0.5) {
                return x;
            }
            let k = d.last().copied().unwrap_or(1);
            let n = self.rng.pick(&[1, 2, 3]);
            let rd = match self.rng.below(3) {
                0 => vec![k],
                1 => vec![k, n],
                _ if r >= 3 => {
                    let mut v = d[..r - 2].to_vec();
                    v.extend([k, n]);
                    v
                }
                _ => vec![k, n],
            };
            let rd = if self.bad(0.3) { self.dims() } else { rd };
            let (yty, opts) = self.dot_types(ty);
            let y = self.fresh(yty, &rd);
            return x.matmul_with(&y, opts);
        }
        // dot_general: batch and contracting axes of lhs, placed at random rhs axes.
        let axes = self.rng.perm(r);
        let nb = self.rng.below(r.min(2) + 1);
        let nc = self.rng.below((r - nb).min(2) + 1);
        let lb: Vec<i64> = axes[..nb].to_vec();
        let lc: Vec<i64> = axes[nb..nb + nc].to_vec();
        let free = self.rng.below(2);
        let rr = nb + nc + free;
        let pos = self.rng.perm(rr);
        let mut rd: Vec<i64> = (0..rr).map(|_| self.rng.pick(&[1, 2, 3])).collect();
        let rb: Vec<i64> = pos[..nb].to_vec();
        let rc: Vec<i64> = pos[nb..nb + nc].to_vec();
        for (l, q) in lb.iter().zip(&rb).chain(lc.iter().zip(&rc)) {
            rd[*q as usize] = d[*l as usize];
        }
        let mut dd = DotDims {
            lhs_contracting: lc,
            rhs_contracting: rc,
            lhs_batch: lb,
            rhs_batch: rb,
        };
        if self.bad(0.5) {
            match self.rng.below(4) {
                0 => dd.lhs_contracting.push(r as i64),
                1 => dd.rhs_batch.push(0),
                2 if !rd.is_empty() => rd[0] += 1,
                _ => dd.lhs_contracting.push(-1),
            }
        }
        let rd = self.fit(rd);
        let (yty, opts) = self.dot_types(ty);
        let y = self.fresh(yty, &rd);
        let out_ok = infer_dot_general(&shape_of(&x), &shape_of(&y), &dd, None)
            .map(|s| count(s.dims()) <= CAP)
            .unwrap_or(true);
        if !out_ok {
            return x;
        }
        if opts == DotOptions::default() && self.rng.chance(0.5) {
            x.dot_general(&y, &dd)
        } else {
            x.dot_general_with(&y, &dd, opts)
        }
    }

    /// The right operand's element type and the options of a dot whose left
    /// operand is of type `ty`: usually the same type and default options; else
    /// operand precisions, a preferred element type (any, valid or not), or a right
    /// operand of another type with a preferred type.
    fn dot_types(&mut self, ty: ElementType) -> (ElementType, DotOptions) {
        const PRECISIONS: [Precision; 3] =
            [Precision::Default, Precision::High, Precision::Highest];
        let mut opts = DotOptions::new();
        if self.rng.chance(0.3) {
            opts = opts.operand_precision(self.rng.pick(&PRECISIONS), self.rng.pick(&PRECISIONS));
        }
        let mut yty = ty;
        if self.rng.chance(0.4) {
            // A wider type of the same class, or any type at all.
            let p = if self.rng.chance(0.6) {
                let same: Vec<ElementType> = ElementType::ALL
                    .into_iter()
                    .filter(|t| {
                        t.byte_size() >= ty.byte_size()
                            && (t.is_float() == ty.is_float()
                                && t.is_complex() == ty.is_complex()
                                && t.is_signed_int() == ty.is_signed_int())
                    })
                    .collect();
                self.rng.pick(&same)
            } else {
                self.any_type()
            };
            opts = opts.preferred_element_type(p);
            if self.rng.chance(0.3) {
                yty = self.rng.pick(&ElementType::ALL);
            }
        } else if self.bad(0.1) {
            yty = self.any_type();
        }
        (yty, opts)
    }

    fn axes(&mut self, r: usize) -> Vec<i64> {
        let n = self.rng.below(r + 1);
        let mut a: Vec<i64> = self.rng.perm(r)[..n].to_vec();
        for x in a.iter_mut() {
            if self.rng.chance(0.2) {
                *x -= r as i64;
            }
        }
        if self.bad(0.4) {
            match self.rng.below(3) {
                0 => a.push(r as i64),
                1 if !a.is_empty() => a.push(a[0]),
                _ => a.push(-(r as i64) - 1),
            }
        }
        a
    }

    /// `acc (+) e` for a combiner that suits `ty` (logical or for pred).
    fn combine(a: &Op, e: &Op) -> Op {
        if a.element_type().ok() == Some(ElementType::Pred) {
            a.builder().select(e, e, a)
        } else {
            a + e
        }
    }

    /// A scalar of `ty` from the outer computation, for a body to capture.
    fn outer_scalar(&mut self, ty: ElementType) -> Op {
        let cands: Vec<Op> = self
            .vals
            .iter()
            .filter(|v| v.dims().is_ok_and(|d| d.is_empty()) && v.element_type().ok() == Some(ty))
            .cloned()
            .collect();
        if !cands.is_empty() && self.rng.chance(0.5) {
            let i = self.rng.below(cands.len());
            return cands[i].clone();
        }
        self.fresh(ty, &[])
    }

    fn reduce(&mut self) -> Op {
        let x = self.pick();
        let r = dims_of(&x).len();
        let axes = self.axes(r);
        let ty = ty_of(&x);
        match self.rng.below(6) {
            0 => x.reduce_sum(&axes),
            1 => x.reduce_max(&axes),
            2 => x.reduce_min(&axes),
            3 => x.mean(&axes, false),
            4 => {
                // A body that captures an outer scalar (or, invalid, an array).
                let s = if self.bad(0.3) {
                    self.pick()
                } else {
                    self.outer_scalar(ty)
                };
                let init = self.b.constant_of_type(ty, 0);
                x.reduce(&init, &axes, |a, e| {
                    if ty == ElementType::Pred {
                        let t = Self::combine(a, e);
                        t.builder().select(&s, &t, a)
                    } else {
                        a + &(e * &s)
                    }
                })
            }
            _ => {
                // Variadic: x with a second input of the same dims.
                let t2 = if self.rng.chance(0.5) {
                    ty
                } else {
                    self.any_type()
                };
                let mut yd = dims_of(&x);
                if self.bad(0.3) {
                    yd.push(2);
                }
                let y = self.fresh(t2, &yd);
                let mut inits = vec![
                    self.b.constant_of_type(ty, 0),
                    self.b.constant_of_type(t2, 0),
                ];
                if self.bad(0.2) {
                    inits.pop();
                }
                let cap = if self.rng.chance(0.3) {
                    Some(self.outer_scalar(t2))
                } else {
                    None
                };
                let init_refs: Vec<&Op> = inits.iter().collect();
                let outs = self.b.reduce_many(&[&x, &y], &init_refs, &axes, |acc, e| {
                    let second = Self::combine(&acc[1], &e[1]);
                    let second = match &cap {
                        Some(c) if t2 != ElementType::Pred => second * c,
                        _ => second,
                    };
                    vec![Self::combine(&acc[0], &e[0]), second]
                });
                let i = self.rng.below(outs.len());
                if outs.len() > 1 {
                    self.vals.push(outs[1 - i].clone());
                }
                outs[i].clone()
            }
        }
    }

    /// A small valid index operand (an `s32` scalar), or a wrong type when invalid.
    fn index(&mut self) -> Op {
        if self.bad(0.2) {
            return self.b.constant(1.5f32);
        }
        let v = self.rng.below(4) as i32 - 1;
        self.b.constant(v)
    }

    fn slice_op(&mut self) -> Op {
        let x = self.pick();
        let d = dims_of(&x);
        let (mut st, mut lim, mut str) = (vec![], vec![], vec![]);
        for n in &d {
            let a = self.rng.below(*n as usize + 1) as i64;
            let b = a + self.rng.below((*n - a) as usize + 1) as i64;
            st.push(a);
            lim.push(b);
            str.push(1 + self.rng.below(2) as i64);
        }
        if self.bad(0.5) && !d.is_empty() {
            lim[0] = d[0] + 1;
        }
        x.slice(&st, &lim, &str)
    }

    fn dynamic_slice(&mut self, update: bool) -> Op {
        let x = self.pick();
        let d = dims_of(&x);
        let idx: Vec<Op> = (0..d.len() + usize::from(self.bad(0.2)))
            .map(|_| self.index())
            .collect();
        let refs: Vec<&Op> = idx.iter().collect();
        let sizes: Vec<i64> = d
            .iter()
            .map(|n| self.rng.below(*n as usize + 1) as i64)
            .collect();
        if update {
            let u = self.fresh(ty_of(&x), &sizes);
            x.dynamic_update_slice(&u, &refs)
        } else {
            x.dynamic_slice(&refs, &sizes)
        }
    }

    fn concatenate(&mut self) -> Op {
        let x = self.pick();
        let d = dims_of(&x);
        if d.is_empty() {
            return self.b.concatenate(&[&x], 0);
        }
        let axis = self.rng.below(d.len());
        let mut yd = d.clone();
        yd[axis] = self.dim();
        if self.bad(0.3) {
            yd[(axis + 1) % d.len()] += 1;
        }
        let yd = self.fit(yd);
        let y = self.fresh(ty_of(&x), &yd);
        self.b.concatenate(
            &[&x, &y],
            axis as i64
                - if self.rng.chance(0.3) {
                    d.len() as i64
                } else {
                    0
                },
        )
    }

    fn pad(&mut self) -> Op {
        let x = self.pick();
        let v = self.b.constant_of_type(ty_of(&x), 0);
        let cfg: Vec<xlaclient::ops::slicing::PadDim> = dims_of(&x)
            .iter()
            .map(|_| xlaclient::ops::slicing::PadDim {
                lo: self.rng.below(3) as i64 - if self.valid { 0 } else { 1 },
                hi: self.rng.below(3) as i64,
                interior: self.rng.below(2) as i64,
            })
            .collect();
        x.pad(&v, &cfg)
    }

    fn sort(&mut self) -> Op {
        if self.rng.chance(0.3) {
            return self.top_k();
        }
        let x = self.pick_typed(|t| !t.is_complex());
        let r = dims_of(&x).len() as i64;
        let axis = if r == 0 || self.bad(0.3) {
            r
        } else {
            self.rng.below(r as usize) as i64
        };
        if self.rng.chance(0.5) {
            return x.sort_ascending(axis);
        }
        let idx = self
            .b
            .iota(ElementType::S32, &dims_of(&x), axis.min((r - 1).max(0)));
        let outs = self.b.sort(&[&x, &idx], axis, true, |l, rr| {
            l[0].compare(&rr[0], xlaclient::Comparison::Lt)
        });
        outs[1].clone()
    }

    /// Top-k of a value of rank 1 or more, `k` within the last axis (or, in a graph
    /// that may be invalid, sometimes one past it); either result.
    fn top_k(&mut self) -> Op {
        let mut x = self.pick_typed(|t| !t.is_complex());
        if dims_of(&x).is_empty() && !self.bad(0.5) {
            x = x.reshape(&[1]);
        }
        let n = dims_of(&x).last().copied().unwrap_or(0);
        let k = if self.bad(0.3) {
            n + 1
        } else {
            self.rng.below(n as usize + 1) as i64
        };
        let (values, indices) = x.top_k(k);
        if self.rng.chance(0.5) {
            values
        } else {
            indices
        }
    }

    /// Clamp of a value between bounds that are scalars, of its shape, or (numpy
    /// broadcasting) of a compatible shape.
    fn clamp(&mut self) -> Op {
        let x = self.pick_typed(|t| !t.is_complex());
        let ty = ty_of(&x);
        let bound = |g: &mut Self| {
            if g.rng.chance(0.5) {
                let d = if g.bad(0.2) { g.dims() } else { vec![] };
                g.fresh(ty, &d)
            } else {
                g.partner(&x)
            }
        };
        let lo = bound(self);
        let hi = bound(self);
        if self.rng.chance(0.3) {
            let (lo, hi) = (self.number(ty), self.number(ty));
            x.clip(lo.min(hi), lo.max(hi))
        } else {
            x.clamp(&lo, &hi)
        }
    }

    fn gather(&mut self) -> Op {
        let x = self.pick();
        let r = dims_of(&x).len();
        let (a, b, n) = (self.dim(), self.dim(), self.rng.below(3));
        let id = self.fit(vec![a, b][..n].to_vec());
        let n = id.iter().product::<i64>().max(0) as usize;
        let vals: Vec<i32> = (0..n).map(|_| self.rng.below(5) as i32 - 1).collect();
        let i = self.b.constant_array(&vals, &id);
        let axis = if r == 0 || self.bad(0.3) {
            r as i64
        } else {
            self.rng.below(r) as i64
        };
        x.take(&i, axis)
    }

    fn scatter(&mut self) -> Op {
        let x = self.pick_typed(|t| t != ElementType::Pred);
        let d = dims_of(&x);
        if d.is_empty() {
            return x;
        }
        let k = 1 + self.rng.below(3);
        let vals: Vec<i32> = (0..k)
            .map(|_| self.rng.below(d[0] as usize + 2) as i32 - 1)
            .collect();
        let i = self.b.constant_vec(&vals);
        let mut ud = vec![k as i64];
        ud.extend(&d[1..]);
        if self.bad(0.3) {
            ud[0] += 1;
        }
        let ud = self.fit(ud);
        let u = self.fresh(ty_of(&x), &ud);
        let dims = xlaclient::ops::indexing::ScatterDims {
            update_window_dims: (1..d.len() as i64).collect(),
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        self.b
            .scatter(&[&x], &i, &[&u], &dims, false, false, |o, n| {
                vec![&o[0] + &n[0]]
            })
            .remove(0)
    }

    fn window(&mut self, d: &[i64]) -> Vec<xlaclient::ops::window::WindowDim> {
        d.iter()
            .map(|n| xlaclient::ops::window::WindowDim {
                padding_low: self.rng.below(2) as i64,
                ..xlaclient::ops::window::WindowDim::new(
                    1 + self.rng.below((*n as usize).clamp(1, 2)) as i64,
                    1 + self.rng.below(2) as i64,
                )
            })
            .collect()
    }

    fn reduce_window(&mut self) -> Op {
        let x = self.pick_typed(|t| t.is_float() || t.is_integer());
        let mut w = self.window(&dims_of(&x));
        if self.bad(0.3) {
            w.pop();
        }
        if self.rng.chance(0.5) {
            x.max_pool(&w)
        } else {
            x.sum_pool(&w)
        }
    }

    fn select_and_scatter(&mut self) -> Op {
        let x = self.pick_typed(|t| t.is_float());
        let w: Vec<_> = dims_of(&x)
            .iter()
            .map(|n| xlaclient::ops::window::WindowDim::new((*n).clamp(1, 2), 1))
            .collect();
        let src = x.max_pool(&w);
        let zero = self.b.constant_of_type(ty_of(&x), 0);
        x.select_and_scatter(
            &src,
            &zero,
            &w,
            |a, c| a.compare(c, xlaclient::Comparison::Ge),
            |a, c| a + c,
        )
    }

    fn convolution(&mut self) -> Op {
        let ty = if self.rng.chance(0.5) {
            ElementType::F32
        } else {
            ElementType::F64
        };
        let c = 1 + self.rng.below(3) as i64;
        let (h, w) = (1 + self.rng.below(4) as i64, 1 + self.rng.below(4) as i64);
        let x = self.fresh(ty, &[1, h, w, c]);
        let kc = if self.bad(0.3) { c + 1 } else { c };
        let k = self.fresh(ty, &[1, 1, kc, 2]);
        x.conv_general_dilated(
            &k,
            &[1, 1],
            &[(0, 0); 2],
            &[1, 1],
            &[1, 1],
            &xlaclient::ops::linalg::ConvDims::channels_last(2),
            1,
        )
    }

    fn bits(&mut self, op: Opcode) -> Op {
        use xlaclient::ops::bitwise::BitwiseOp as W;
        let logical = matches!(op, Opcode::And | Opcode::Or | Opcode::Xor | Opcode::Not);
        let x = self.pick_typed(|t| t.is_integer() || (logical && t == ElementType::Pred));
        match op {
            Opcode::Not => x.not(),
            Opcode::Popcnt => x.popcnt(),
            Opcode::CountLeadingZeros => x.count_leading_zeros(),
            _ => {
                let y = self.partner(&x);
                let w = match op {
                    Opcode::And => W::And,
                    Opcode::Or => W::Or,
                    Opcode::Xor => W::Xor,
                    Opcode::ShiftLeft => W::ShiftLeft,
                    Opcode::ShiftRightArithmetic => W::ShiftRightArithmetic,
                    _ => W::ShiftRightLogical,
                };
                match w {
                    W::And => x.and(&y),
                    W::Or => x.or(&y),
                    W::Xor => x.xor(&y),
                    W::ShiftLeft => x.shift_left(&y),
                    W::ShiftRightArithmetic => x.shift_right_arithmetic(&y),
                    W::ShiftRightLogical => x.shift_right_logical(&y),
                }
            }
        }
    }

    /// One op of kind `op` on operands from the pool. The match has no wildcard arm:
    /// a new opcode does not compile until the fuzzer covers it.
    fn step(&mut self, op: Opcode) -> Op {
        use BinaryOp as B;
        use UnaryOp as U;
        match op {
            Opcode::Parameter => {
                let (t, d) = (self.any_type(), self.dims());
                self.param(t, &d)
            }
            Opcode::Constant => {
                let (t, d) = (self.any_type(), self.dims());
                self.constant(t, &d)
            }
            Opcode::Negate => self.unary(U::Negate, |x| {
                if x.rank().unwrap_or(0) % 2 == 0 {
                    -x
                } else {
                    x.neg()
                }
            }),
            Opcode::Exponential => self.unary(U::Exponential, Op::exp),
            Opcode::Log => self.unary(U::Log, Op::log),
            Opcode::Tanh => self.unary(U::Tanh, Op::tanh),
            Opcode::Abs => self.unary(U::Abs, Op::abs),
            Opcode::Sqrt => self.unary(U::Sqrt, Op::sqrt),
            Opcode::Rsqrt => self.unary(U::Rsqrt, Op::rsqrt),
            Opcode::Sine => self.unary(U::Sine, Op::sin),
            Opcode::Cosine => self.unary(U::Cosine, Op::cos),
            Opcode::Logistic => self.unary(U::Logistic, Op::logistic),
            Opcode::Floor => self.unary(U::Floor, Op::floor),
            Opcode::Ceil => self.unary(U::Ceil, Op::ceil),
            Opcode::Sign => self.unary(U::Sign, Op::sign),
            Opcode::ExponentialMinusOne => self.unary(U::ExponentialMinusOne, Op::expm1),
            Opcode::LogPlusOne => self.unary(U::LogPlusOne, Op::log1p),
            Opcode::RoundNearestAfz => self.unary(U::RoundNearestAfz, Op::round),
            Opcode::RoundNearestEven => self.unary(U::RoundNearestEven, Op::round_even),
            Opcode::Cbrt => self.unary(U::Cbrt, Op::cbrt),
            Opcode::Tan => self.unary(U::Tan, Op::tan),
            Opcode::Erf => self.unary(U::Erf, Op::erf),
            Opcode::IsFinite => self.unary(U::IsFinite, Op::is_finite),
            Opcode::Real => self.unary(U::Real, Op::real),
            Opcode::Imag => self.unary(U::Imag, Op::imag),
            Opcode::Complex => self.binary(B::Complex, Op::complex, None),
            Opcode::Clamp => self.clamp(),
            Opcode::Add => self.binary(B::Add, |a, b| a + b, Some('+')),
            Opcode::Subtract => self.binary(B::Subtract, Op::sub, Some('-')),
            Opcode::Multiply => self.binary(B::Multiply, |a, b| a * b, Some('*')),
            Opcode::Divide => self.binary(B::Divide, Op::div, Some('/')),
            Opcode::Maximum => self.binary(B::Maximum, Op::max, None),
            Opcode::Minimum => self.binary(B::Minimum, Op::min, None),
            Opcode::Power => self.binary(B::Power, Op::pow, None),
            Opcode::Remainder => self.binary(B::Remainder, Op::rem, None),
            Opcode::Atan2 => self.binary(B::Atan2, Op::atan2, None),
            Opcode::Compare => self.compare(),
            Opcode::Select => self.select(),
            Opcode::Broadcast => self.broadcast(),
            Opcode::Reshape => self.reshape(),
            Opcode::Transpose => self.transpose(),
            Opcode::Convert => self.convert(),
            Opcode::Tuple => self.tuple(),
            Opcode::GetTupleElement => self.get_tuple_element(),
            Opcode::Dot => self.dot(),
            Opcode::Reduce => self.reduce(),
            Opcode::Call => {
                let x = self.pick();
                self.b
                    .call("f", &[&x], |_, p| vec![Self::combine(&p[0], &p[0])])
                    .remove(0)
            }
            Opcode::Iota => {
                let (t, d) = (self.any_type(), self.dims());
                let axis = if d.is_empty() || self.bad(0.3) {
                    d.len() as i64
                } else {
                    self.rng.below(d.len()) as i64
                };
                self.b.iota(t, &d, axis)
            }
            Opcode::Slice => self.slice_op(),
            Opcode::DynamicSlice => self.dynamic_slice(false),
            Opcode::DynamicUpdateSlice => self.dynamic_slice(true),
            Opcode::Concatenate => self.concatenate(),
            Opcode::Pad => self.pad(),
            Opcode::Reverse => {
                let x = self.pick();
                let axes = self.axes(dims_of(&x).len());
                x.reverse(&axes)
            }
            Opcode::Sort => self.sort(),
            Opcode::Gather => self.gather(),
            Opcode::Scatter => self.scatter(),
            Opcode::BitcastConvert => {
                let x = self.pick_typed(|t| t != ElementType::Pred);
                let same: Vec<ElementType> = ElementType::ALL
                    .into_iter()
                    .filter(|t| t.byte_size() == ty_of(&x).byte_size() && *t != ElementType::Pred)
                    .collect();
                let t = if self.bad(0.3) {
                    self.any_type()
                } else {
                    self.rng.pick(&same)
                };
                x.bitcast_convert(t)
            }
            Opcode::RngBitGenerator => {
                let key = self.fresh(ElementType::U64, &[2]);
                let t = self
                    .rng
                    .pick(&[ElementType::U8, ElementType::U32, ElementType::U64]);
                let d = self.dims();
                let alg = self.rng.pick(&[
                    xlaclient::ops::random::RngAlgorithm::Default,
                    xlaclient::ops::random::RngAlgorithm::ThreeFry,
                    xlaclient::ops::random::RngAlgorithm::Philox,
                ]);
                key.rng_bit_generator(alg, t, &d).1
            }
            Opcode::ReduceWindow => self.reduce_window(),
            Opcode::SelectAndScatter => self.select_and_scatter(),
            Opcode::Convolution => self.convolution(),
            Opcode::Map => {
                let x = self.pick();
                let y = self.partner(&x);
                let y = if dims_of(&y) == dims_of(&x) {
                    y
                } else {
                    x.clone()
                };
                self.b.map(&[&x, &y], |s| Self::combine(&s[0], &s[1]))
            }
            Opcode::OptimizationBarrier => {
                let x = self.pick();
                self.b.optimization_barrier(&[&x]).remove(0)
            }
            // A custom call names a plugin's kernel; the CPU plugins have none for a
            // random graph to call, so it is built by its test (tests/ops_misc.rs).
            Opcode::CustomCall => self.pick(),
            // Collectives over the one replica a fuzz case runs on (group {0}, or no
            // groups where the op allows it); tests/collectives.rs runs them on
            // several devices.
            Opcode::ReplicaId => self.b.replica_id(),
            Opcode::PartitionId => self.b.partition_id(),
            Opcode::AllReduce => {
                let x = self.pick();
                let op = self
                    .rng
                    .pick(&[B::Add, B::Multiply, B::Maximum, B::Minimum]);
                let groups = if self.rng.chance(0.5) {
                    vec![]
                } else {
                    vec![vec![0]]
                };
                x.all_reduce(op, &groups)
            }
            Opcode::AllGather => {
                let x = self.pick();
                let d = self.rng.below(dims_of(&x).len() + 1) as i64;
                x.all_gather(d, &[vec![0]])
            }
            Opcode::ReduceScatter => {
                let x = self.pick();
                let d = self.rng.below(dims_of(&x).len() + 1) as i64;
                x.reduce_scatter(B::Add, d, &[vec![0]])
            }
            Opcode::CollectivePermute => {
                let x = self.pick();
                let pairs = if self.rng.chance(0.5) {
                    vec![]
                } else {
                    vec![(0, 0)]
                };
                x.collective_permute(&pairs)
            }
            Opcode::AllToAll => {
                let x = self.pick();
                let d = self.rng.below(dims_of(&x).len() + 1) as i64;
                x.all_to_all(d, &[vec![0]])
            }
            Opcode::Cholesky | Opcode::TriangularSolve => {
                let ty = if self.rng.chance(0.5) {
                    ElementType::F32
                } else {
                    ElementType::F64
                };
                let n = 1 + self.rng.below(3) as i64;
                let a = self.fresh(ty, &[n, n]);
                if op == Opcode::Cholesky {
                    a.cholesky(self.rng.chance(0.5))
                } else {
                    let m = if self.bad(0.3) { n + 1 } else { n };
                    let rhs = self.fresh(ty, &[m, 2]);
                    a.triangular_solve(
                        &rhs,
                        xlaclient::ops::linalg::TriangularSolveOptions {
                            left_side: true,
                            lower: self.rng.chance(0.5),
                            unit_diagonal: false,
                            transpose_a: xlaclient::ops::linalg::Transpose::No,
                        },
                    )
                }
            }
            Opcode::While => {
                let x = self.pick();
                let k = self.rng.below(3) as i32;
                self.b.fori_loop(0, k, x, |_, v| Self::combine(&v, &v))
            }
            Opcode::Conditional => {
                let x = self.pick();
                let p = self.fresh(ElementType::Pred, &[]);
                self.b.cond(&p, x, |v| v, |v| Self::combine(&v, &v))
            }
            Opcode::And
            | Opcode::Or
            | Opcode::Xor
            | Opcode::Not
            | Opcode::ShiftLeft
            | Opcode::ShiftRightArithmetic
            | Opcode::ShiftRightLogical
            | Opcode::Popcnt
            | Opcode::CountLeadingZeros => self.bits(op),
        }
    }
}

/// The graph of `seed`: its builder's result (the module, or the error), and
/// whether the generator meant it to be valid.
pub fn generate(seed: u64) -> (xlaclient::Result<Computation>, bool) {
    let mut g = Gen::new(seed);
    let n = 1 + g.rng.below(10);
    for _ in 0..n {
        let op = g.rng.pick(Opcode::ALL);
        let v = g.step(op);
        if v.is_poisoned() {
            break;
        }
        match shape_of(&v) {
            Shape::Tuple(_) => g.tuples.push(v),
            _ => g.vals.push(v),
        }
    }
    if g.vals.is_empty() {
        let v = g.pick();
        g.vals.push(v);
    }
    let last = g.vals.last().cloned().expect("one value");
    let m = match g.rng.below(10) {
        0..=5 => g.b.build(&last),
        6 if !g.tuples.is_empty() => {
            let i = g.rng.below(g.tuples.len());
            let t = g.tuples[i].clone();
            g.b.build(&t)
        }
        _ => {
            let n = 1 + g.rng.below(3);
            let outs: Vec<Op> = (0..n).map(|_| g.pick()).collect();
            let refs: Vec<&Op> = outs.iter().collect();
            g.b.build_tuple(&refs)
        }
    };
    (m, g.valid)
}

/// Runs `f`, turning a panic into an error message.
pub fn no_panic<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "(non-string panic)".into())
    })
}

/// How one case ended: a code (`rejected`, `ran`, `ok`, `err`, … ; `fail` is a
/// failure) and a detail line.
pub type Outcome = (&'static str, String);

/// A buffer of `shape` holding small values, for a parameter.
fn argument(client: &Client, shape: &Shape, seed: u64) -> xlaclient::Result<Buffer> {
    let ty = shape.element_type().unwrap_or(ElementType::F32);
    let n = count(shape.dims()) as usize;
    let mut rng = Rng(seed);
    with_native!(ty, T => {
        let xs: Vec<T> = (0..n)
            .map(|_| NativeType::from_f64(rng.below(5) as f64))
            .collect();
        Ok(client.buffer_from_host(&xs, shape.dims())?)
    })
}

/// Builds, compiles and runs graph `seed`; checks every output's type and dims
/// against the builder's. `hlo` receives the module's text before it is compiled.
/// Graph `seed` (its HLO text written to `hlo`, for a crash's report) and its
/// arguments uploaded to `client`, or the outcome that ends the case: the
/// builder panicked or refused it, or an upload failed.
fn graph_case(
    client: &Client,
    seed: u64,
    hlo: &Path,
) -> Result<(Computation, Vec<Buffer>), Outcome> {
    let m = match no_panic(|| generate(seed)) {
        Err(p) => return Err(("fail", format!("builder panicked: {p}"))),
        Ok((Err(e), _)) => return Err(("rejected", e.to_string())),
        Ok((Ok(m), _)) => m,
    };
    let _ = std::fs::write(hlo, m.to_hlo_text());
    let args: xlaclient::Result<Vec<Buffer>> = m
        .parameter_shapes()
        .iter()
        .enumerate()
        .map(|(i, s)| argument(client, s, seed ^ i as u64))
        .collect();
    match args {
        Ok(a) => Ok((m, a)),
        Err(e) => Err(("fail", format!("upload: {e}"))),
    }
}

pub fn run_graph(client: &Client, seed: u64, hlo: &Path) -> Outcome {
    let (m, args) = match graph_case(client, seed, hlo) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let exe = match client.compile(&m) {
        Ok(e) => e,
        Err(e) => return ("fail", format!("builder accepted, XLA rejected: {e}")),
    };
    let refs: Vec<&Buffer> = args.iter().collect();
    let outs = match exe.execute(&refs) {
        Ok(o) => o,
        Err(e) => return ("fail", format!("execute: {e}")),
    };
    let want: Vec<Shape> = match m.result_shape() {
        Shape::Tuple(e) => e,
        s => vec![s],
    };
    if outs.len() != want.len() {
        return (
            "fail",
            format!("{} outputs, the builder says {}", outs.len(), want.len()),
        );
    }
    for (i, (b, w)) in outs.iter().zip(&want).enumerate() {
        let got = (b.element_type(), b.dims());
        match got {
            (Ok(t), Ok(d)) if Some(t) == w.element_type() && d == w.dims() => {
                if let Err(e) = b.ready() {
                    return ("fail", format!("output {i}: {e}"));
                }
            }
            (t, d) => {
                return (
                    "fail",
                    format!("output {i} is {t:?} {d:?}, the builder says {w}"),
                );
            }
        }
    }
    ("ran", String::new())
}

/// Whether two outputs of element type `ty` hold the same bits, a NaN matching
/// any NaN (XLA leaves the sign and payload of a computed NaN unspecified, and
/// constant folding and run-time code make different ones).
fn same_bits(ty: Option<ElementType>, a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let (size, nan): (usize, fn(u64) -> bool) = match ty {
        Some(ElementType::F8E4M3FN) => (1, |v| v & 0x7F == 0x7F),
        Some(ElementType::F8E5M2) => (1, |v| v & 0x7C == 0x7C && v & 0x03 != 0),
        Some(ElementType::F16) => (2, |v| v & 0x7C00 == 0x7C00 && v & 0x3FF != 0),
        Some(ElementType::Bf16) => (2, |v| v & 0x7F80 == 0x7F80 && v & 0x7F != 0),
        // A complex value's parts compare as two floats.
        Some(ElementType::F32 | ElementType::C64) => (4, |v| f32::from_bits(v as u32).is_nan()),
        Some(ElementType::F64 | ElementType::C128) => (8, |v| f64::from_bits(v).is_nan()),
        _ => return false,
    };
    if a.len() != b.len() {
        return false;
    }
    let word = |c: &[u8]| c.iter().rev().fold(0u64, |w, x| (w << 8) | *x as u64);
    a.chunks(size)
        .zip(b.chunks(size))
        .all(|(x, y)| x == y || (nan(word(x)) && nan(word(y))))
}

/// Compiles `m` from its `HloModuleProto` and from its StableHLO text
/// (`Computation::to_stablehlo`, PJRT's `mlir` format) with `options`, runs both
/// on `args` (one list per replica) and compares every output of every replica
/// bit for bit (read as bytes, `Buffer::to_bytes`, so complex outputs too), NaNs
/// matching any NaN: `same` or `fail`.
pub fn compare_formats(
    client: &Client,
    m: &Computation,
    options: &CompileOptions,
    args: &[Vec<&Buffer>],
    hlo: &Path,
) -> Outcome {
    let counts = options
        .proto()
        .executable_build_options
        .as_ref()
        .map(|b| (b.num_replicas.max(1), b.num_partitions.max(1)))
        .unwrap_or((1, 1));
    let text = match no_panic(|| m.to_stablehlo_with(counts.0, counts.1)) {
        Err(p) => return ("fail", format!("to_stablehlo panicked: {p}")),
        Ok(Err(e)) => return ("fail", format!("to_stablehlo: {e}")),
        Ok(Ok(t)) => t,
    };
    let _ = std::fs::write(hlo, format!("{}\n{text}", m.to_hlo_text()));
    let from_hlo = match client.compile_with(m, options) {
        Ok(e) => e,
        Err(e) => return ("fail", format!("builder accepted, XLA rejected: {e}")),
    };
    let opts = options.clone().format(xlaclient::ProgramFormat::StableHlo);
    let from_shlo = match client.compile_with(m, &opts) {
        Ok(e) => e,
        Err(e) => return ("fail", format!("the StableHLO text did not compile: {e}")),
    };
    let (a, b) = match (
        from_hlo.execute_replicated(args),
        from_shlo.execute_replicated(args),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            return (
                "fail",
                format!(
                    "execute: from HLO {:?}, from StableHLO {:?}",
                    a.err(),
                    b.err()
                ),
            );
        }
    };
    for (r, (a, b)) in a.iter().zip(&b).enumerate() {
        if a.len() != b.len() {
            return (
                "fail",
                format!(
                    "replica {r}: {} outputs from HLO, {} from StableHLO",
                    a.len(),
                    b.len()
                ),
            );
        }
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let (tx, ty) = (x.element_type().ok(), y.element_type().ok());
            let (dx, dy) = (x.dims().ok(), y.dims().ok());
            if tx != ty || dx != dy {
                return (
                    "fail",
                    format!(
                        "replica {r} output {i}: {tx:?} {dx:?} from HLO, {ty:?} {dy:?} from StableHLO"
                    ),
                );
            }
            match (x.to_bytes(), y.to_bytes()) {
                (Ok(bx), Ok(by)) => {
                    if !same_bits(tx, &bx, &by) {
                        return (
                            "fail",
                            format!(
                                "replica {r} output {i} ({tx:?} {dx:?}) differs: HLO {bx:?}, StableHLO {by:?}"
                            ),
                        );
                    }
                }
                (x, y) => return ("fail", format!("output {i}: reading {x:?} / {y:?}")),
            }
        }
    }
    ("same", String::new())
}

/// StableHLO case `seed`: graph `seed` compiled from its `HloModuleProto` and from
/// its StableHLO text and run on the same arguments ([`compare_formats`]).
pub fn run_stablehlo(client: &Client, seed: u64, hlo: &Path) -> Outcome {
    let (m, args) = match graph_case(client, seed, hlo) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let refs: Vec<&Buffer> = args.iter().collect();
    compare_formats(client, &m, &CompileOptions::new(), &[refs], hlo)
}

// ---------------------------------------------------------------------------------
// Mutated modules.

/// The ways a serialized module is mutated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Flip one to eight bits.
    BitFlip,
    /// Set a byte to a random value.
    ByteSet,
    /// Cut the bytes short.
    Truncate,
    /// Change an instruction's element type or a dimension.
    InstrShape,
    /// Replace an instruction's opcode with another one of the table.
    Opcode,
    /// Point an operand at another instruction (earlier, later, or missing).
    OperandId,
    /// Renumber a parameter.
    ParameterNumber,
    /// Change the entry's program shape (a parameter's or the result's shape).
    ProgramShape,
    /// Change an instruction's attribute list (`dimensions`, tuple index, dot axes).
    Attribute,
    /// Change a computation's root id.
    RootId,
    /// Mark dimensions dynamic (`is_dynamic_dimension`) in an instruction's shape,
    /// an entry parameter's or the result's.
    DynamicDim,
    /// Move the entry's root to one of its parameters (the program shape's
    /// result following it, or not).
    RootToParam,
}

impl Mutation {
    /// Every kind.
    pub const ALL: [Mutation; 12] = [
        Mutation::BitFlip,
        Mutation::ByteSet,
        Mutation::Truncate,
        Mutation::InstrShape,
        Mutation::Opcode,
        Mutation::OperandId,
        Mutation::ParameterNumber,
        Mutation::ProgramShape,
        Mutation::Attribute,
        Mutation::RootId,
        Mutation::DynamicDim,
        Mutation::RootToParam,
    ];
}

/// Marks one dimension of `s` (or every one) dynamic, when it has any.
fn make_dynamic(rng: &mut Rng, s: &mut proto::ShapeProto) {
    if !s.tuple_shapes.is_empty() {
        let i = rng.below(s.tuple_shapes.len());
        return make_dynamic(rng, &mut s.tuple_shapes[i]);
    }
    let n = s.dimensions.len();
    s.is_dynamic_dimension.resize(n, false);
    if n == 0 {
        // No dimension to mark: a flag without one (a malformed shape).
        s.is_dynamic_dimension.push(true);
    } else if rng.chance(0.3) {
        s.is_dynamic_dimension.iter_mut().for_each(|d| *d = true);
    } else {
        s.is_dynamic_dimension[rng.below(n)] = true;
    }
}

fn mutate_shape(rng: &mut Rng, s: &mut proto::ShapeProto) {
    if !s.tuple_shapes.is_empty() && rng.chance(0.7) {
        let i = rng.below(s.tuple_shapes.len());
        return mutate_shape(rng, &mut s.tuple_shapes[i]);
    }
    match rng.below(4) {
        0 => s.element_type = rng.pick(&ElementType::ALL).primitive_type() as i32,
        1 if !s.dimensions.is_empty() => {
            let i = rng.below(s.dimensions.len());
            s.dimensions[i] = rng.pick(&[0, 1, 2, 5, 1 << 40]);
        }
        2 => {
            // One more (or one fewer) dimension, layout kept consistent.
            if s.dimensions.is_empty() || rng.chance(0.5) {
                s.dimensions.push(rng.pick(&[1, 2, 3]));
                s.is_dynamic_dimension.push(false);
            } else {
                s.dimensions.pop();
                s.is_dynamic_dimension.pop();
            }
            if let Some(l) = s.layout.as_mut() {
                l.minor_to_major = (0..s.dimensions.len() as i64).rev().collect();
            }
        }
        _ => {
            // Array <-> tuple.
            if s.element_type == proto::PrimitiveType::Tuple as i32 {
                *s = Shape::of::<f32>(&[2]).to_proto();
            } else {
                *s = Shape::Tuple(vec![Shape::of::<f32>(&[2])]).to_proto();
            }
        }
    }
}

/// Applies mutation `k` to module bytes `bytes`.
pub fn mutate(rng: &mut Rng, bytes: &[u8], k: Mutation) -> Vec<u8> {
    use prost::Message;
    let mut b = bytes.to_vec();
    let bytewise = match k {
        Mutation::BitFlip => Some(Damage::BitFlip),
        Mutation::ByteSet => Some(Damage::ByteSet),
        Mutation::Truncate => Some(Damage::Truncate),
        _ => None,
    };
    if let Some(d) = bytewise {
        damage_bytes(rng, &mut b, d);
        return b;
    }
    let Ok(mut m) = HloModuleProto::decode(bytes) else {
        return b;
    };
    let nc = m.computations.len();
    let ci = rng.below(nc);
    let c = &mut m.computations[ci];
    let ids: Vec<i64> = c.instructions.iter().map(|i| i.id).collect();
    let ni = c.instructions.len();
    let ii = rng.below(ni.max(1));
    match k {
        Mutation::InstrShape => {
            if let Some(s) = c.instructions.get_mut(ii).and_then(|i| i.shape.as_mut()) {
                mutate_shape(rng, s);
            }
        }
        Mutation::Opcode => {
            let op = rng.pick(Opcode::ALL).name().to_string();
            c.instructions[ii].opcode = op;
        }
        Mutation::OperandId => {
            let ins = &mut c.instructions[ii];
            let new = match rng.below(3) {
                0 => rng.pick(&ids),
                1 => ins.id + 1 + rng.below(3) as i64,
                _ => -1,
            };
            if ins.operand_ids.is_empty() || rng.chance(0.2) {
                ins.operand_ids.push(new);
            } else {
                let j = rng.below(ins.operand_ids.len());
                ins.operand_ids[j] = new;
            }
        }
        Mutation::ParameterNumber => {
            let params: Vec<usize> = (0..ni)
                .filter(|i| c.instructions[*i].opcode == "parameter")
                .collect();
            if params.is_empty() {
                c.instructions[ii].parameter_number = 1;
            } else {
                let p = rng.pick(&params);
                c.instructions[p].parameter_number = rng.pick(&[0, 1, 2, 7, -1]);
            }
        }
        Mutation::ProgramShape => {
            let ps = m.host_program_shape.get_or_insert_with(Default::default);
            if ps.parameters.is_empty() || rng.chance(0.5) {
                if let Some(r) = ps.result.as_mut() {
                    mutate_shape(rng, r);
                }
            } else {
                let i = rng.below(ps.parameters.len());
                mutate_shape(rng, &mut ps.parameters[i]);
            }
            if rng.chance(0.3) {
                // Keep the entry computation's own program shape in step.
                let eid = m.entry_computation_id;
                let hps = m.host_program_shape.clone();
                if let Some(e) = m.computations.iter_mut().find(|c| c.id == eid) {
                    e.program_shape = hps;
                }
            }
        }
        Mutation::Attribute => {
            let ins = &mut c.instructions[ii];
            match rng.below(3) {
                0 => {
                    if ins.dimensions.is_empty() || rng.chance(0.3) {
                        ins.dimensions.push(rng.below(4) as i64);
                    } else {
                        let j = rng.below(ins.dimensions.len());
                        ins.dimensions[j] = rng.pick(&[-1, 0, 1, 5]);
                    }
                }
                1 => ins.tuple_index = rng.pick(&[-1, 1, 3]),
                _ => {
                    let d = ins
                        .dot_dimension_numbers
                        .get_or_insert_with(Default::default);
                    d.lhs_contracting_dimensions.push(rng.below(3) as i64);
                }
            }
        }
        Mutation::RootId => {
            c.root_id = if rng.chance(0.8) {
                rng.pick(&ids)
            } else {
                12345
            };
        }
        Mutation::DynamicDim => {
            let eid = m.entry_computation_id;
            match rng.below(3) {
                0 => {
                    if let Some(s) = c.instructions.get_mut(ii).and_then(|i| i.shape.as_mut()) {
                        make_dynamic(rng, s);
                    }
                }
                _ => {
                    // An entry parameter (instruction and program shapes alike) or
                    // the result.
                    let param = rng.chance(0.6);
                    let k = rng.below(8);
                    let mut shapes: Vec<&mut proto::ShapeProto> = Vec::new();
                    if let Some(e) = m.computations.iter_mut().find(|c| c.id == eid) {
                        let root = e.root_id;
                        for ins in e.instructions.iter_mut() {
                            let hit = if param {
                                ins.opcode == "parameter" && ins.parameter_number == k as i64 % 2
                            } else {
                                ins.id == root
                            };
                            if hit {
                                shapes.extend(ins.shape.as_mut());
                            }
                        }
                        if let Some(ps) = e.program_shape.as_mut() {
                            if param {
                                shapes.extend(ps.parameters.get_mut(k % 2));
                            } else {
                                shapes.extend(ps.result.as_mut());
                            }
                        }
                    }
                    if let Some(ps) = m.host_program_shape.as_mut() {
                        if param {
                            shapes.extend(ps.parameters.get_mut(k % 2));
                        } else {
                            shapes.extend(ps.result.as_mut());
                        }
                    }
                    // The same marks on every copy of the shape.
                    let seed = rng.next_u64();
                    for s in shapes {
                        make_dynamic(&mut Rng(seed), s);
                    }
                }
            }
        }
        Mutation::RootToParam => {
            let eid = m.entry_computation_id;
            let follow = rng.chance(0.7);
            let pick = rng.next_u64();
            let mut new_result = None;
            if let Some(e) = m.computations.iter_mut().find(|c| c.id == eid) {
                let params: Vec<&proto::HloInstructionProto> = e
                    .instructions
                    .iter()
                    .filter(|i| i.opcode == "parameter")
                    .collect();
                if !params.is_empty() {
                    let p = params[(pick % params.len() as u64) as usize];
                    let (id, shape) = (p.id, p.shape.clone());
                    e.root_id = id;
                    if follow {
                        if let Some(ps) = e.program_shape.as_mut() {
                            ps.result = shape.clone();
                        }
                        new_result = Some(shape);
                    }
                }
            }
            if let (Some(r), Some(ps)) = (new_result, m.host_program_shape.as_mut()) {
                ps.result = r;
            }
        }
        Mutation::BitFlip | Mutation::ByteSet | Mutation::Truncate => unreachable!(),
    }
    m.encode_to_vec()
}

/// A valid module for module case `seed` (the first accepted graph from seeds
/// derived from it).
pub fn base_module(seed: u64) -> Computation {
    for i in 0.. {
        let s = seed.wrapping_mul(0x9E37_79B9).wrapping_add(i);
        if let Ok((Ok(m), _)) = no_panic(|| generate(s)) {
            return m;
        }
    }
    unreachable!()
}

/// Module case `seed`: a mutated module of one of `kinds`, compiled. Writes the
/// module's text (of the unmutated module, then the mutation) to `hlo` first.
pub fn run_module(client: &Client, seed: u64, kinds: &[Mutation], hlo: &Path) -> Outcome {
    let m = base_module(seed);
    let mut rng = Rng(seed ^ 0x5EED);
    let k = rng.pick(kinds);
    let bytes = mutate(&mut rng, &m.to_bytes(), k);
    let text = {
        use prost::Message;
        match HloModuleProto::decode(bytes.as_slice()) {
            Ok(p) => Computation::from_proto(p)
                .map_or_else(|e| format!("(refused: {e})"), |c| c.to_hlo_text()),
            Err(_) => "(does not decode)".into(),
        }
    };
    let _ = std::fs::write(
        hlo,
        format!(
            "mutation {k:?}\n--- before\n{}\n--- after\n{text}",
            m.to_hlo_text()
        ),
    );
    match no_panic(|| client.compile_hlo_bytes(&bytes, &CompileOptions::new())) {
        Err(p) => ("fail", format!("{k:?}: panicked: {p}")),
        Ok(Ok(exe)) => {
            // Accepted: it runs on arguments of its parameters' shapes (a module
            // the plugin compiles may still abort when it runs: dynamic entries did).
            let shapes = exe.parameter_shapes().map(<[Shape]>::to_vec);
            let Some(shapes) = shapes else {
                return (
                    "fail",
                    format!("{k:?}: an accepted module without parameter shapes"),
                );
            };
            let args: xlaclient::Result<Vec<Buffer>> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| argument(client, s, seed ^ i as u64))
                .collect();
            let ran = args.map_err(|e| e.to_string()).and_then(|args| {
                let refs: Vec<&Buffer> = args.iter().collect();
                exe.execute_sync(&refs).map_err(|e| e.to_string())
            });
            // "unchanged": the mutation found nothing to change (e.g. no parameter 1).
            let same = {
                use prost::Message;
                let decode = |b: &[u8]| HloModuleProto::decode(b).ok();
                if decode(&bytes) == decode(&m.to_bytes()) {
                    " unchanged"
                } else {
                    ""
                }
            };
            match ran {
                Ok(_) => ("ok", format!("{k:?}{same}")),
                Err(e) => ("ok", format!("{k:?}{same} (run: {})", first_line(&e))),
            }
        }
        Ok(Err(e)) => ("err", format!("{k:?}: {}", first_line(&e.to_string()))),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(200).collect()
}

// ---------------------------------------------------------------------------------
// Child processes.

/// The environment variable that makes a test or example binary a fuzz child:
/// `<kind> <start> <end> <dir>`.
pub const CHILD_ENV: &str = "XLACLIENT_FUZZ_CHILD";

/// A fresh client of the plugin under test (one per child).
pub fn fresh_client() -> Client {
    let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
    // No compilation cache: thousands of one-off modules would fill it.
    let options = ClientOptions::new().compile_cache(xlaclient::CompileCache::Off);
    Client::new(&plugin, &options).expect("create a client")
}

/// If this process is a fuzz child, runs its cases with `work(kind, index, client,
/// hlo_path)` and returns true. Each case's start and end are appended to
/// `<dir>/progress` (flushed), so the parent knows which case a crash interrupted.
pub fn child_main(work: &dyn Fn(&str, u64, &Client, &Path) -> Outcome) -> bool {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return false;
    };
    let parts: Vec<&str> = spec.splitn(4, ' ').collect();
    let (kind, start, end, dir) = (
        parts[0],
        parts[1].parse::<u64>().expect("start"),
        parts[2].parse::<u64>().expect("end"),
        PathBuf::from(parts[3]),
    );
    let client = fresh_client();
    let mut progress = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("progress"))
        .expect("progress file");
    let hlo = dir.join("current.hlo");
    // Panics are caught and reported as failures; keep their messages off stderr.
    std::panic::set_hook(Box::new(|_| {}));
    for i in start..end {
        writeln!(progress, "S {i}")
            .and_then(|_| progress.flush())
            .expect("write");
        let (code, detail) = no_panic(|| work(kind, i, &client, &hlo))
            .unwrap_or_else(|p| ("fail", format!("panic: {p}")));
        let detail = detail.replace('\n', " | ");
        writeln!(progress, "D {i} {code} {detail}")
            .and_then(|_| progress.flush())
            .expect("write");
    }
    true
}

// ---------------------------------------------------------------------------------
// Damaged serialized executables.

/// The ways a guarded executable is damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Flip one to eight bits anywhere.
    BitFlip,
    /// Set a byte to a random value.
    ByteSet,
    /// Cut the bytes short.
    Truncate,
    /// Append bytes.
    Extend,
    /// The header of one executable on the body of another.
    Swap,
    /// Intact bytes written by another client configuration (another identity).
    OtherPlugin,
    /// XLA's own bytes without the guard.
    Unguarded,
}

impl Damage {
    pub const ALL: [Damage; 7] = [
        Damage::BitFlip,
        Damage::ByteSet,
        Damage::Truncate,
        Damage::Extend,
        Damage::Swap,
        Damage::OtherPlugin,
        Damage::Unguarded,
    ];
}

/// Damages `b` in place the byte-level ways (`BitFlip`: one to eight bits,
/// `ByteSet`: one byte, `Truncate`, `Extend`: up to 64 random bytes appended); the
/// other kinds leave it as it is (their callers build the bytes).
fn damage_bytes(rng: &mut Rng, b: &mut Vec<u8>, k: Damage) {
    match k {
        Damage::BitFlip => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
        }
        Damage::ByteSet => {
            let i = rng.below(b.len());
            b[i] = rng.next_u64() as u8;
        }
        Damage::Truncate => {
            let n = rng.below(b.len());
            b.truncate(n);
        }
        Damage::Extend => b.extend((0..1 + rng.below(64)).map(|_| rng.next_u64() as u8)),
        Damage::Swap | Damage::OtherPlugin | Damage::Unguarded => {}
    }
}

/// A client of the plugin under test with two CPU devices: another identity
/// than [`fresh_client`]'s.
fn other_client() -> &'static Client {
    static C: std::sync::OnceLock<Client> = std::sync::OnceLock::new();
    C.get_or_init(|| {
        let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
        let options = ClientOptions::new()
            .cpu_device_count(2)
            .compile_cache(xlaclient::CompileCache::Off);
        Client::new(&plugin, &options).expect("a client")
    })
}

/// Executable case `seed`: a module's guarded executable, damaged, then loaded.
/// Loading must refuse it in the guard (never hand it to the plugin), unless the
/// damage left the bytes as they were.
pub fn run_executable(client: &Client, seed: u64, hlo: &Path) -> Outcome {
    let m = base_module(seed);
    let mut rng = Rng(seed ^ 0xE7EC);
    let k = rng.pick(&Damage::ALL);
    let _ = std::fs::write(hlo, format!("mutation {k:?}\n{}", m.to_hlo_text()));
    let exe = match client.compile(&m) {
        Ok(e) => e,
        Err(e) => return ("skip", format!("{k:?}: {}", first_line(&e.to_string()))),
    };
    let good = match exe.serialize() {
        Ok(b) => b,
        Err(e) => return ("fail", format!("{k:?}: serialize: {e}")),
    };
    let mut b = good.clone();
    match k {
        Damage::BitFlip | Damage::ByteSet | Damage::Truncate | Damage::Extend => {
            damage_bytes(&mut rng, &mut b, k)
        }
        Damage::Swap => {
            let other = base_module(seed.wrapping_add(7919));
            match client.compile(&other).and_then(|e| e.serialize()) {
                Ok(o) => {
                    let cut = 52.min(o.len());
                    b.truncate(cut);
                    b.extend_from_slice(&o[cut..]);
                }
                Err(e) => return ("skip", format!("{k:?}: {}", first_line(&e.to_string()))),
            }
        }
        Damage::OtherPlugin => match other_client().compile(&m).and_then(|e| e.serialize()) {
            Ok(o) => b = o,
            Err(e) => return ("skip", format!("{k:?}: {}", first_line(&e.to_string()))),
        },
        Damage::Unguarded => match exe.serialize_unguarded() {
            Ok(o) => b = o,
            Err(e) => return ("fail", format!("{k:?}: serialize: {e}")),
        },
    }
    match no_panic(|| client.deserialize_executable(&b)) {
        Err(p) => ("fail", format!("{k:?}: panicked: {p}")),
        Ok(Ok(_)) if b == good => ("ok", format!("{k:?} (unchanged)")),
        Ok(Ok(_)) => ("fail", format!("{k:?}: damaged bytes were accepted")),
        Ok(Err(xlaclient::RuntimeError::SerializedExecutable(g))) => {
            let what = format!("{g:?}");
            let name = what.split([' ', '{', '(']).next().unwrap_or("").to_string();
            (
                "err",
                format!("{k:?} {name}: {}", first_line(&g.to_string())),
            )
        }
        Ok(Err(e)) => (
            "fail",
            format!("{k:?}: refused by the plugin, not the guard: {e}"),
        ),
    }
}

/// Cache case `seed`: a module compiled into a fresh compilation-cache directory,
/// its entry damaged like an executable (bit flips, byte sets, truncation,
/// extension, another module's entry under this key, another client's entry under
/// this key, garbage), then compiled by a new client: the damaged entry must be
/// refused (never handed to the plugin: a refusal by the plugin counts as a
/// failure), the module compiled again and run, and the entry written anew.
pub fn run_cache(seed: u64, hlo: &Path) -> Outcome {
    let m = base_module(seed);
    let mut rng = Rng(seed ^ 0xCAC4E);
    let k = rng.pick(&Damage::ALL);
    let _ = std::fs::write(hlo, format!("mutation {k:?}\n{}", m.to_hlo_text()));
    let Ok(dir) = tempfile::tempdir() else {
        return ("fail", "no temporary directory".into());
    };
    let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
    let client = |devices: i64, d: &Path| {
        let options = ClientOptions::new()
            .cpu_device_count(devices)
            .compile_cache(xlaclient::CompileCache::Dir(d.to_path_buf()));
        Client::new(&plugin, &options).expect("a client")
    };
    let entries = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|r| r.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    if let Err(e) = client(1, dir.path()).compile(&m) {
        return ("skip", format!("{k:?}: {}", first_line(&e.to_string())));
    }
    let Some(path) = entries(dir.path()).into_iter().next() else {
        return ("fail", format!("{k:?}: nothing was stored"));
    };
    let good = std::fs::read(&path).unwrap_or_default();
    let mut b = good.clone();
    match k {
        Damage::BitFlip | Damage::ByteSet | Damage::Truncate | Damage::Extend => {
            damage_bytes(&mut rng, &mut b, k)
        }
        // Another module's entry, or another client's, renamed to this key.
        Damage::Swap | Damage::OtherPlugin => {
            let Ok(other_dir) = tempfile::tempdir() else {
                return ("fail", "no temporary directory".into());
            };
            let (other, devices) = if k == Damage::Swap {
                (base_module(seed.wrapping_add(7919)), 1)
            } else {
                (m.clone(), 2)
            };
            if let Err(e) = client(devices, other_dir.path()).compile(&other) {
                return ("skip", format!("{k:?}: {}", first_line(&e.to_string())));
            }
            b = entries(other_dir.path())
                .first()
                .and_then(|p| std::fs::read(p).ok())
                .unwrap_or_default();
            if k == Damage::OtherPlugin && b.len() >= 40 {
                // Under this key: only the guard's identity can tell.
                b[8..40].copy_from_slice(&good[8..40]);
            }
        }
        Damage::Unguarded => b = b"not an executable at all".to_vec(),
    }
    if std::fs::write(&path, &b).is_err() {
        return ("fail", "cannot write the entry".into());
    }
    let again = client(1, dir.path());
    let exe = match no_panic(|| again.compile(&m)) {
        Err(p) => return ("fail", format!("{k:?}: panicked: {p}")),
        Ok(Err(e)) => return ("fail", format!("{k:?}: compile failed: {e}")),
        Ok(Ok(exe)) => exe,
    };
    let s = again.compile_cache_stats();
    let unchanged = b == good;
    match (unchanged, s.hits, s.rejected, s.stored) {
        (true, 1, 0, 0) => {}
        (false, 0, 1, 1) => {}
        _ => return ("fail", format!("{k:?}: unexpected cache counts {s:?}")),
    }
    // The program runs, on arguments of its parameters' shapes.
    let Some(shapes) = exe.parameter_shapes().map(<[Shape]>::to_vec) else {
        return ("fail", format!("{k:?}: no parameter shapes"));
    };
    let args: xlaclient::Result<Vec<Buffer>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| argument(&again, s, seed ^ i as u64))
        .collect();
    if let Ok(args) = args {
        let refs: Vec<&Buffer> = args.iter().collect();
        let _ = exe.execute_sync(&refs);
    }
    if unchanged {
        ("ok", format!("{k:?} (unchanged)"))
    } else {
        ("err", format!("{k:?} refused and recompiled"))
    }
}

/// The fuzz work of this file: `graphs`, `modules` (every mutation kind, or
/// `modules:K1,K2` for some), `executables`, `cache`, `control` and `collectives`.
pub fn work(kind: &str, i: u64, client: &Client, hlo: &Path) -> Outcome {
    match kind {
        "graphs" => run_graph(client, i, hlo),
        "stablehlo" => run_stablehlo(client, i, hlo),
        "stablehlo-control" => run_control_stablehlo(client, i, hlo),
        "stablehlo-collectives" => run_collective_stablehlo(i, hlo),
        "modules" => run_module(client, i, &Mutation::ALL, hlo),
        "executables" => run_executable(client, i, hlo),
        "cache" => run_cache(i, hlo),
        "control" => run_control(client, i, hlo),
        "collectives" => run_collective(i, hlo),
        other => match other.strip_prefix("modules:") {
            // `modules:BitFlip,Opcode`: only these kinds.
            Some(names) => {
                let kinds: Vec<Mutation> = Mutation::ALL
                    .into_iter()
                    .filter(|k| names.split(',').any(|n| n == format!("{k:?}")))
                    .collect();
                assert!(!kinds.is_empty(), "no mutation kind in {names}");
                run_module(client, i, &kinds, hlo)
            }
            None => panic!("unknown fuzz kind {other}"),
        },
    }
}

/// A case that failed: its index (the seed), what happened, and the module's text.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub what: String,
    pub hlo: String,
}

/// Counts per outcome code, and the failures.
#[derive(Debug, Default)]
pub struct Report {
    pub counts: BTreeMap<String, u64>,
    /// Outcome detail counts (e.g. per mutation kind), `code detail-prefix`.
    pub details: BTreeMap<String, u64>,
    pub failures: Vec<Failure>,
    /// `(index, code, detail)` of every case, when asked for.
    pub cases: Vec<(u64, String, String)>,
}

/// Prints a run's summary and fails, listing every failure (seed, what, module
/// text), when it has any.
pub fn check(kind: &str, r: &Report) {
    eprintln!("{kind}: {}", r.summary());
    let shown: Vec<String> = r
        .failures
        .iter()
        .map(|f| format!("seed {}: {}\n{}", f.seed, f.what, f.hlo))
        .collect();
    assert!(
        r.failures.is_empty(),
        "{kind} failures:\n{}",
        shown.join("\n")
    );
}

impl Report {
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.counts {
            let _ = write!(s, "{k}: {v}  ");
        }
        s
    }
}

/// Options of a run of children.
pub struct RunOptions<'a> {
    /// The work kind (see [`work`]).
    pub kind: &'a str,
    /// Arguments that make the binary run its child entry (the test's name for a
    /// test binary).
    pub child_args: &'a [&'a str],
    pub jobs: usize,
    /// Cases per child process.
    pub chunk: u64,
    /// A child that makes no progress for this long is killed (a hang).
    pub hang: Duration,
    pub keep_cases: bool,
    /// Print each failure as it is found.
    pub verbose: bool,
}

/// Runs cases `range` in child processes of this binary, `opts.jobs` at a time; a
/// child that dies (abort, segfault, hang) is reported at the case it was running
/// and a new child goes on after it.
pub fn run_children(range: std::ops::Range<u64>, opts: &RunOptions) -> Report {
    let next = AtomicU64::new(range.start);
    let report = Mutex::new(Report::default());
    let base = std::env::temp_dir().join(format!(
        "xlaclient-fuzz-{}-{}",
        std::process::id(),
        opts.kind
    ));
    std::thread::scope(|s| {
        for job in 0..opts.jobs.max(1) {
            let (next, report, base) = (&next, &report, &base);
            s.spawn(move || {
                let dir = base.join(job.to_string());
                std::fs::create_dir_all(&dir).expect("temp dir");
                loop {
                    let a = next.fetch_add(opts.chunk, Ordering::SeqCst);
                    if a >= range.end {
                        break;
                    }
                    let b = (a + opts.chunk).min(range.end);
                    run_chunk(a..b, &dir, opts, report);
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&base);
    let mut r = report.into_inner().expect("report");
    r.failures.sort_by_key(|f| f.seed);
    r.cases.sort_by_key(|c| c.0);
    r
}

fn run_chunk(range: std::ops::Range<u64>, dir: &Path, opts: &RunOptions, report: &Mutex<Report>) {
    let exe = std::env::current_exe().expect("current exe");
    let mut start = range.start;
    while start < range.end {
        let progress = dir.join("progress");
        let _ = std::fs::remove_file(&progress);
        let _ = std::fs::remove_file(dir.join("current.hlo"));
        let stderr = std::fs::File::create(dir.join("stderr")).expect("stderr file");
        let mut child = Command::new(&exe)
            .args(opts.child_args)
            .env(
                CHILD_ENV,
                format!("{} {start} {} {}", opts.kind, range.end, dir.display()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn a child");
        let mut last_len = 0;
        let mut last_change = Instant::now();
        let (status, hung) = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break (Some(st), false);
            }
            let len = std::fs::metadata(&progress).map(|m| m.len()).unwrap_or(0);
            if len != last_len {
                last_len = len;
                last_change = Instant::now();
            } else if last_change.elapsed() > opts.hang {
                let _ = child.kill();
                let _ = child.wait();
                break (None, true);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = std::fs::read_to_string(&progress).unwrap_or_default();
        let mut started: Option<u64> = None;
        let mut r = report.lock().expect("report");
        for line in text.lines() {
            let mut it = line.splitn(4, ' ');
            match (it.next(), it.next().and_then(|x| x.parse::<u64>().ok())) {
                (Some("S"), Some(i)) => started = Some(i),
                (Some("D"), Some(i)) => {
                    started = None;
                    let code = it.next().unwrap_or("?").to_string();
                    let detail = it.next().unwrap_or("").to_string();
                    *r.counts.entry(code.clone()).or_default() += 1;
                    let key = format!("{code} {}", detail.split(':').next().unwrap_or(""));
                    *r.details.entry(key).or_default() += 1;
                    if code == "fail" {
                        let f = Failure {
                            seed: i,
                            what: detail.clone(),
                            hlo: String::new(),
                        };
                        if opts.verbose {
                            eprintln!("FAIL seed {i}: {detail}");
                        }
                        r.failures.push(f);
                    }
                    if opts.keep_cases {
                        r.cases.push((i, code, detail));
                    }
                    start = i + 1;
                }
                _ => {}
            }
        }
        let ok_exit = status.is_some_and(|s| s.success());
        if ok_exit && started.is_none() && start >= range.end {
            break;
        }
        // The child died: the case it had started (or, before any, the next one).
        let seed = started.unwrap_or(start);
        let hlo = std::fs::read_to_string(dir.join("current.hlo")).unwrap_or_default();
        let err = std::fs::read_to_string(dir.join("stderr")).unwrap_or_default();
        // XLA's fatal log line ("F0000 … Check failed: …") when there is one.
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = match lines
            .iter()
            .find(|l| l.starts_with('F') && l.contains("] ") || l.contains("Check failed"))
        {
            Some(l) => l.to_string(),
            None => lines[lines.len().saturating_sub(3)..].join(" | "),
        };
        let tail: String = tail.chars().take(400).collect();
        // The module runner writes its mutation kind on the first line.
        let tag = hlo
            .lines()
            .next()
            .filter(|l| l.starts_with("mutation "))
            .map(|l| format!("{}: ", &l[9..]))
            .unwrap_or_default();
        let what = if hung {
            format!("hang (no progress for {:?})", opts.hang)
        } else {
            format!("{tag}child died ({status:?}): {tail}")
        };
        if opts.verbose {
            eprintln!("CRASH seed {seed}: {what}");
        }
        *r.counts.entry("crash".into()).or_default() += 1;
        r.failures.push(Failure {
            seed,
            what: what.clone(),
            hlo,
        });
        if opts.keep_cases {
            r.cases.push((seed, "crash".into(), what));
        }
        start = seed + 1;
    }
}

// ---------------------------------------------------------------------------------
// Control flow under `grad`.

/// A random program over `f64[2]` values `v` (the carry) and `w` (an outside value
/// every body may read): loops with zero trips or more, bounded whiles, scans over
/// zero rows or more (with size-0 outputs), conds and switches (indices out of
/// range), nested to depth 3, in sequence. `While` (a plain `while_loop`) has no
/// gradient: a program holding one must be refused with that error.
#[derive(Clone, Debug)]
pub enum Plan {
    /// A smooth step: one of four.
    Leaf(u8),
    /// `fori_loop(lo, hi, ..)` (`hi <= lo`: no step).
    Fori(i32, i32, Box<Plan>),
    /// `while_loop_bounded` with this bound, while `Σv² < 4`.
    Bounded(i64, Box<Plan>),
    /// `scan` over this many rows, reversed or not, unrolled by this much, with a
    /// size-0 output next to the stacked carry or not.
    Scan(i64, bool, usize, bool, Box<Plan>),
    /// `cond(Σv > 0, ..)`.
    Cond(Box<Plan>, Box<Plan>),
    /// `switch` on a constant index (maybe out of range).
    Switch(i32, Vec<Plan>),
    /// A plain `while_loop` of three steps (no gradient).
    While(Box<Plan>),
    /// One after the other.
    Then(Box<Plan>, Box<Plan>),
}

impl Plan {
    /// A plan of at most `depth` nested bodies.
    pub fn random(rng: &mut Rng, depth: usize) -> Plan {
        let leaf = |rng: &mut Rng| Plan::Leaf(rng.below(4) as u8);
        if depth == 0 {
            return leaf(rng);
        }
        let sub = |rng: &mut Rng| Box::new(Plan::random(rng, depth - 1));
        match rng.below(20) {
            0..=2 => leaf(rng),
            3..=5 => {
                let lo = rng.below(3) as i32;
                let hi = lo + rng.below(5) as i32 - 2;
                Plan::Fori(lo, hi, sub(rng))
            }
            6..=7 => Plan::Bounded(rng.below(4) as i64, sub(rng)),
            8..=10 => Plan::Scan(
                rng.below(4) as i64,
                rng.chance(0.3),
                1 + rng.below(3),
                rng.chance(0.4),
                sub(rng),
            ),
            11..=13 => Plan::Cond(sub(rng), sub(rng)),
            14..=15 => {
                let n = 2 + rng.below(2);
                let i = rng.below(n + 2) as i32 - 1;
                Plan::Switch(i, (0..n).map(|_| Plan::random(rng, depth - 1)).collect())
            }
            16 => Plan::While(sub(rng)),
            _ => Plan::Then(sub(rng), sub(rng)),
        }
    }

    /// Whether the gradient must go through a plain `while_loop` (one in a body
    /// that runs: a loop of no step, or a scan of no row, is the identity, whose
    /// gradient never reads its body).
    pub fn needs_while_gradient(&self) -> bool {
        match self {
            Plan::Leaf(_) => false,
            Plan::While(_) => true,
            Plan::Fori(lo, hi, p) => hi > lo && p.needs_while_gradient(),
            Plan::Bounded(n, p) | Plan::Scan(n, _, _, _, p) => *n > 0 && p.needs_while_gradient(),
            Plan::Cond(a, b) | Plan::Then(a, b) => {
                a.needs_while_gradient() || b.needs_while_gradient()
            }
            Plan::Switch(_, ps) => ps.iter().any(Plan::needs_while_gradient),
        }
    }

    /// The plan applied to `v`, reading `w`.
    pub fn build(&self, v: &Op, w: &Op) -> Op {
        let b = v.builder();
        let sum_gt = |v: &Op, t: f64| {
            v.reduce_sum(&[0])
                .compare(&v.builder().constant(t), Comparison::Gt)
        };
        match self {
            Plan::Leaf(k) => match k {
                0 => (v * w).sin(),
                1 => &v.tanh() + w,
                2 => &(v * 0.5) + w,
                _ => &v.cos() * w,
            },
            Plan::Fori(lo, hi, p) => b.fori_loop(*lo, *hi, v.clone(), |_, v| p.build(&v, w)),
            Plan::Bounded(n, p) => b.while_loop_bounded(
                v.clone(),
                *n,
                |v| {
                    (v * v)
                        .reduce_sum(&[0])
                        .compare(&v.builder().constant(4f64), Comparison::Lt)
                },
                |v| p.build(&v, w),
            ),
            Plan::Scan(len, reverse, unroll, empty, p) => {
                let xs = (w * 0.5).broadcast_to(&[*len, 2]);
                let opts = xlaclient::ScanOptions::new()
                    .reverse(*reverse)
                    .unroll(*unroll);
                let (c, (ys, e)) = b.scan_with(v.clone(), xs, &opts, |h, x| {
                    let h2 = p.build(&(&h + &x), w);
                    let e = if *empty {
                        h2.slice(&[1], &[1], &[1])
                    } else {
                        h2.slice(&[0], &[1], &[1])
                    };
                    (h2.clone(), (h2, e))
                });
                &(&c + &ys.reduce_sum(&[0])) + &e.reduce_sum(&[0, 1])
            }
            Plan::Cond(a, c) => b.cond(
                &sum_gt(v, 0.0),
                v.clone(),
                |v| a.build(&v, w),
                |v| c.build(&v, w),
            ),
            Plan::Switch(i, ps) => {
                let mut fs: Vec<Box<dyn FnOnce(Op) -> Op + '_>> = ps
                    .iter()
                    .map(|p| Box::new(move |v: Op| p.build(&v, w)) as Box<dyn FnOnce(Op) -> Op>)
                    .collect();
                let first = fs.remove(0);
                b.switch(&b.constant(*i), v.clone(), first, fs)
            }
            Plan::While(p) => {
                let (v, _) = b.while_loop(
                    (v.clone(), b.constant(0i32)),
                    |(_, k)| k.compare(&k.builder().constant(3i32), Comparison::Lt),
                    |(v, k)| (p.build(&v, w), k + 1),
                );
                v
            }
            Plan::Then(a, c) => c.build(&a.build(v, w), w),
        }
    }
}

/// Control-flow case `seed`: a random [`Plan`] under `grad`. The gradient program
/// must build (or, where the gradient goes through a plain `while_loop`, be refused
/// with that loop's no-gradient error), never panic; built, it runs on the plugin, its loss equals
/// the loss program's, and its gradient matches central finite differences.
pub fn run_control(client: &Client, seed: u64, hlo: &Path) -> Outcome {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xC0);
    let plan = Plan::random(&mut rng, 3);
    let c = [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64];
    let x0 = [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64];
    let w0 = [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64];
    let build = |with_grad: bool| {
        let b = Builder::new("control");
        let x = b.parameter(0, Shape::of::<f64>(&[2]), "x");
        let w = b.parameter(1, Shape::of::<f64>(&[2]), "w");
        let out = plan.build(&x, &w);
        let loss = (&out * &b.constant_vec(&c)).reduce_sum(&[0]);
        if with_grad {
            let (gx, gw) = b.grad(&loss, &(x.clone(), w.clone()));
            b.build_tuple(&[&loss, &gx, &gw])
        } else {
            b.build(&loss)
        }
    };
    let grad_module = match no_panic(|| build(true)) {
        Err(p) => return ("fail", format!("builder panicked: {p} ({plan:?})")),
        Ok(Err(e)) => {
            let e = e.to_string();
            return if plan.needs_while_gradient() && e.contains("no gradient for `while`") {
                ("rejected", "no gradient for a plain while".into())
            } else {
                ("fail", format!("refused: {e} ({plan:?})"))
            };
        }
        Ok(Ok(_)) if plan.needs_while_gradient() => {
            return (
                "fail",
                format!("a gradient through a plain while built ({plan:?})"),
            );
        }
        Ok(Ok(m)) => m,
    };
    let _ = std::fs::write(hlo, grad_module.to_hlo_text());
    let loss_module = match no_panic(|| build(false)) {
        Ok(Ok(m)) => m,
        other => return ("fail", format!("the loss alone: {other:?} ({plan:?})")),
    };
    let run = |m: &Computation, x: &[f64], w: &[f64]| -> xlaclient::Result<Vec<Vec<f64>>> {
        let exe = client.compile(m)?;
        let xb = client.buffer_from_host(x, &[2])?;
        let wb = client.buffer_from_host(w, &[2])?;
        exe.execute(&[&xb, &wb])?
            .iter()
            .map(|o| o.to_vec::<f64>().map_err(Into::into))
            .collect()
    };
    let outs = match run(&grad_module, &x0, &w0) {
        Ok(o) => o,
        Err(e) => return ("fail", format!("the gradient program: {e} ({plan:?})")),
    };
    let loss_at = |x: &[f64], w: &[f64]| run(&loss_module, x, w).map(|o| o[0][0]);
    let alone = match loss_at(&x0, &w0) {
        Ok(l) => l,
        Err(e) => return ("fail", format!("the loss program: {e} ({plan:?})")),
    };
    if (outs[0][0] - alone).abs() > 1e-12 * (1.0 + alone.abs()) {
        return (
            "fail",
            format!("loss {} vs {alone} alone ({plan:?})", outs[0][0]),
        );
    }
    let h = 1e-6;
    for k in 0..4 {
        let moved = |d: f64| {
            let (mut x, mut w) = (x0, w0);
            if k < 2 {
                x[k] += d;
            } else {
                w[k - 2] += d;
            }
            loss_at(&x, &w)
        };
        let fd = match (moved(h), moved(-h)) {
            (Ok(a), Ok(b)) => (a - b) / (2.0 * h),
            (Err(e), _) | (_, Err(e)) => return ("fail", format!("finite differences: {e}")),
        };
        let got = if k < 2 { outs[1][k] } else { outs[2][k - 2] };
        if (got - fd).abs() > 1e-6 * (1.0 + fd.abs()) {
            return (
                "fail",
                format!(
                    "d/d{}[{}]: {got} vs finite differences {fd} ({plan:?})",
                    if k < 2 { "x" } else { "w" },
                    k % 2
                ),
            );
        }
    }
    ("ran", String::new())
}

/// StableHLO control case `seed`: the gradient program of control case `seed`
/// (loops, branches, scans under `grad`) compiled from HLO and from StableHLO,
/// outputs compared bit for bit ([`compare_formats`]).
pub fn run_control_stablehlo(client: &Client, seed: u64, hlo: &Path) -> Outcome {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xC0);
    let plan = Plan::random(&mut rng, 3);
    let c = [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64];
    let x0 = [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64];
    let w0 = [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64];
    let b = Builder::new("control");
    let x = b.parameter(0, Shape::of::<f64>(&[2]), "x");
    let w = b.parameter(1, Shape::of::<f64>(&[2]), "w");
    let built = no_panic(|| {
        let out = plan.build(&x, &w);
        let loss = (&out * &b.constant_vec(&c)).reduce_sum(&[0]);
        if plan.needs_while_gradient() {
            b.build_tuple(&[&loss, &out])
        } else {
            let (gx, gw) = b.grad(&loss, &(x.clone(), w.clone()));
            b.build_tuple(&[&loss, &gx, &gw])
        }
    });
    let m = match built {
        Err(p) => return ("fail", format!("builder panicked: {p} ({plan:?})")),
        Ok(Err(e)) => return ("fail", format!("refused: {e} ({plan:?})")),
        Ok(Ok(m)) => m,
    };
    let (xb, wb) = match (
        client.buffer_from_host(&x0, &[2]),
        client.buffer_from_host(&w0, &[2]),
    ) {
        (Ok(x), Ok(w)) => (x, w),
        _ => return ("fail", "upload".into()),
    };
    compare_formats(client, &m, &CompileOptions::new(), &[vec![&xb, &wb]], hlo)
}

// ---------------------------------------------------------------------------------
// Collectives on many devices.

/// The client of the `collectives` kind: eight CPU devices (one per child).
fn eight_devices() -> &'static Client {
    static EIGHT: std::sync::OnceLock<Client> = std::sync::OnceLock::new();
    EIGHT.get_or_init(|| {
        let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
        let options = ClientOptions::new()
            .cpu_device_count(8)
            .compile_cache(xlaclient::CompileCache::Off);
        Client::new(&plugin, &options).expect("create an 8-device client")
    })
}

/// Replica groups over `n` replicas: mostly a partition into groups of one size
/// (or none: all replicas), sometimes broken (a replica twice or missing, an id
/// out of range, an empty group, groups of different sizes).
fn random_groups(rng: &mut Rng, n: usize) -> Vec<Vec<i64>> {
    if rng.chance(0.2) {
        return Vec::new();
    }
    let sizes: Vec<usize> = (1..=n).filter(|k| n % k == 0).collect();
    let size = rng.pick(&sizes);
    let p = rng.perm(n);
    let mut groups: Vec<Vec<i64>> = p.chunks(size).map(<[i64]>::to_vec).collect();
    if rng.chance(0.25) {
        let g = rng.below(groups.len());
        match rng.below(5) {
            0 => {
                let v = groups[g][0];
                groups[g].push(v);
            }
            1 => {
                groups[g].pop();
            }
            2 => groups[g][0] = n as i64 + rng.below(4) as i64,
            3 => groups.push(Vec::new()),
            _ => groups[g][0] = -1,
        }
    }
    groups
}

/// StableHLO collective case `seed`: the module of collective case `seed`, when
/// it compiles from HLO, compiled from StableHLO too and run on every replica,
/// outputs compared bit for bit ([`compare_formats`]).
pub fn run_collective_stablehlo(seed: u64, hlo: &Path) -> Outcome {
    let client = eight_devices();
    let (module, replicas, dims) = match collective_module(seed) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let opts = CompileOptions::new().num_replicas(replicas as i64);
    if client.compile_with(&module, &opts).is_err() {
        return ("err", "compile".into());
    }
    let devices = client.addressable_devices();
    let len = count(&dims) as usize;
    let args: Vec<Buffer> = match (0..replicas)
        .map(|r| {
            let data: Vec<f32> = (0..len).map(|i| (r * 100 + i) as f32).collect();
            devices[r].buffer_from_host(&data, &dims)
        })
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(a) => a,
        Err(e) => return ("fail", format!("upload: {e}")),
    };
    let per_device: Vec<Vec<&Buffer>> = args.iter().map(|a| vec![a]).collect();
    compare_formats(client, &module, &opts, &per_device, hlo)
}

/// The module of collective case `seed` (as [`run_collective`] draws it), its
/// replica count and its parameter's dims; `Err` for a case the builder refuses.
fn collective_module(seed: u64) -> Result<(Computation, usize, Vec<i64>), Outcome> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xC011);
    let n = rng.pick(&[1usize, 2, 4, 8]);
    let replicas = if rng.chance(0.1) {
        rng.pick(&[3usize, 5, 9, 16])
    } else {
        n
    };
    let rank = 1 + rng.below(2);
    let dims: Vec<i64> = (0..rank).map(|_| rng.pick(&[1i64, 2, 3, 4, 8])).collect();
    let groups = random_groups(&mut rng, n);
    let dim = rng.below(rank + 1) as i64;
    let which = rng.below(9);
    let b = Builder::new("collective");
    let x = b.parameter(0, Shape::of::<f32>(&dims), "x");
    let y = match which {
        0 => x.psum(&groups),
        1 => x.pmax(&groups),
        2 => x.pmin(&groups),
        3 => x.pmean(&groups),
        4 => x.all_gather(dim, &groups),
        5 => x.reduce_scatter(BinaryOp::Add, dim, &groups),
        6 => x.all_to_all(dim, &groups),
        7 => {
            let p = rng.perm(n);
            let mut pairs: Vec<(i64, i64)> = (0..n)
                .filter(|_| rng.chance(0.7))
                .map(|i| (i as i64, p[i]))
                .collect();
            if rng.chance(0.2) && !pairs.is_empty() {
                let first = pairs[0];
                pairs.push(first);
            }
            x.collective_permute(&pairs)
        }
        _ => &x + &b.replica_id().convert(ElementType::F32),
    };
    match no_panic(|| b.build(&y)) {
        Ok(Ok(m)) if replicas <= 8 => Ok((m, replicas, dims)),
        Ok(Ok(_)) => Err(("rejected", "more replicas than devices".into())),
        _ => Err(("rejected", "refused by the builder".into())),
    }
}

/// Collective case `seed` on an eight-device client: a random collective (the
/// all-reduces, all-gather, reduce-scatter, all-to-all, collective-permute, and
/// replica-id) over random replica groups, axes and replica counts, valid or not.
/// It must be refused by the builder or by `compile_with` with an error naming what
/// is wrong, or run on every device with outputs of the inferred dims; the
/// all-reduces' values are checked against plain Rust. Never a crash or a hang.
pub fn run_collective(seed: u64, hlo: &Path) -> Outcome {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xC011);
    let client = eight_devices();
    let n = rng.pick(&[1usize, 2, 4, 8]);
    // Sometimes a replica count the client cannot seat, or one the groups do not
    // cover.
    let replicas = if rng.chance(0.1) {
        rng.pick(&[3usize, 5, 9, 16])
    } else {
        n
    };
    let rank = 1 + rng.below(2);
    let dims: Vec<i64> = (0..rank).map(|_| rng.pick(&[1i64, 2, 3, 4, 8])).collect();
    let groups = random_groups(&mut rng, n);
    let dim = rng.below(rank + 1) as i64; // one past the last axis: refused
    let which = rng.below(9);
    let b = Builder::new("collective");
    let x = b.parameter(0, Shape::of::<f32>(&dims), "x");
    let (name, y) = match which {
        0 => ("psum", x.psum(&groups)),
        1 => ("pmax", x.pmax(&groups)),
        2 => ("pmin", x.pmin(&groups)),
        3 => ("pmean", x.pmean(&groups)),
        4 => ("all-gather", x.all_gather(dim, &groups)),
        5 => (
            "reduce-scatter",
            x.reduce_scatter(BinaryOp::Add, dim, &groups),
        ),
        6 => ("all-to-all", x.all_to_all(dim, &groups)),
        7 => {
            let p = rng.perm(n);
            let mut pairs: Vec<(i64, i64)> = (0..n)
                .filter(|_| rng.chance(0.7))
                .map(|i| (i as i64, p[i]))
                .collect();
            if rng.chance(0.2) && !pairs.is_empty() {
                let first = pairs[0];
                pairs.push(first);
            }
            ("collective-permute", x.collective_permute(&pairs))
        }
        _ => ("replica-id", &x + &b.replica_id().convert(ElementType::F32)),
    };
    let module = match no_panic(|| b.build(&y)) {
        Err(p) => return ("fail", format!("{name}: the builder panicked: {p}")),
        Ok(Err(e)) => {
            let e = e.to_string();
            let named = e.contains(name) || e.contains("replica") || e.contains("group");
            return if named {
                ("rejected", format!("{name} built"))
            } else {
                ("fail", format!("{name}: an error that names nothing: {e}"))
            };
        }
        Ok(Ok(m)) => m,
    };
    let _ = std::fs::write(hlo, module.to_hlo_text());
    let out_dims = match y.dims() {
        Ok(d) => d,
        Err(e) => return ("fail", format!("{name}: built but no dims: {e}")),
    };
    let exe = match client.compile_with(
        &module,
        &CompileOptions::new().num_replicas(replicas as i64),
    ) {
        Ok(e) => e,
        Err(_) => return ("err", format!("{name} compile")),
    };
    let devices = client.addressable_devices();
    let len = count(&dims) as usize;
    let data = |r: usize| -> Vec<f32> { (0..len).map(|i| (r * 100 + i) as f32).collect() };
    let args: Vec<Buffer> = match (0..replicas)
        .map(|r| devices[r].buffer_from_host(&data(r), &dims))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(a) => a,
        Err(e) => return ("fail", format!("{name}: upload: {e}")),
    };
    let per_device: Vec<Vec<&Buffer>> = args.iter().map(|a| vec![a]).collect();
    let outs = match exe.execute_replicated(&per_device) {
        Ok(o) => o,
        Err(_) => return ("err", format!("{name} run")),
    };
    for (r, o) in outs.iter().enumerate() {
        let got: Vec<f32> = match o[0].to_vec() {
            Ok(v) => v,
            Err(e) => return ("fail", format!("{name}: read replica {r}: {e}")),
        };
        if got.len() as i64 != count(&out_dims) {
            return (
                "fail",
                format!(
                    "{name}: replica {r} gave {} values for {out_dims:?}",
                    got.len()
                ),
            );
        }
        if which <= 3 {
            let members: Vec<usize> = if groups.is_empty() {
                (0..replicas).collect()
            } else {
                match groups.iter().find(|g| g.contains(&(r as i64))) {
                    Some(g) => g.iter().map(|m| *m as usize).collect(),
                    None => return ("fail", format!("{name}: replica {r} in no group ran")),
                }
            };
            let want: Vec<f32> = (0..len)
                .map(|i| {
                    let vals = members.iter().map(|m| data(*m)[i]);
                    match which {
                        0 => vals.sum(),
                        1 => vals.fold(f32::MIN, f32::max),
                        2 => vals.fold(f32::MAX, f32::min),
                        _ => vals.sum::<f32>() / members.len() as f32,
                    }
                })
                .collect();
            if got != want {
                return ("fail", format!("{name}: replica {r}: {got:?} vs {want:?}"));
            }
        }
    }
    ("ran", name.to_string())
}
