//! Property tests of `vmap` and `jvp`, op family by op family (issue 20, item 4),
//! on the real plugin.
//!
//! * `vmap`: for drawn one-example shapes, a batch size of 1 to 4 and, for every
//!   operand, a batch axis at any position (spelled positively or negatively) or
//!   none (the operand shared by every example), `vmap(f)` is compared with the
//!   reference "stack of `f` per example": each example sliced out of the batched
//!   parameters with plain ops, `f` traced once per example, the results stacked
//!   along the drawn output axis. Both are outputs of ONE program per case, so
//!   XLA's own answer for the unbatched `f` is the reference. Integers must agree
//!   exactly, floats within a small tolerance (a batched op may sum in another
//!   order).
//! * `jvp`: for f64 inputs, the tangent `J v` computed by `Builder::jvp` is
//!   compared with central differences `(f(x + h v) - f(x - h v)) / 2h`, and the
//!   dot-product identity `<u, J v> = <Jᵀ u, v>` is checked against the crate's
//!   `vjp`; all in one program per case.
//! * An op without a rule gives an error naming the op and the user's line.
//!
//! Covered by `vmap`: unary, binary (float and integer, numpy broadcasting),
//! compare, select, clamp, bitwise, broadcast, reshape, transpose, convert,
//! bitcast-convert, dot_general (matmul, batch dims, vector dot, matrix-vector),
//! reduce (sum/max/min over any axes), slice, dynamic_slice and
//! dynamic_update_slice (unbatched starts), concatenate, pad (a batched padding
//! value too), reverse, sort (one and two operands), reduce_window (max/sum
//! pools), select_and_scatter, cholesky, triangular_solve, map, call,
//! optimization_barrier, iota/constants/rng with a shared state mixed in,
//! fori_loop, while with per-example trip counts, scan, cond/switch with batched
//! and unbatched index, nested vmap, vmap of grad and jvp. By `jvp`: the smooth
//! unary and all binary ops, select, clamp, the structural ops, gather (`take`),
//! dot_general, convolution, reduce sum/max/min, sum pooling, call,
//! optimization_barrier, fori_loop, scan, bounded while, cond, switch, and a
//! gradient (forward over reverse, through scatter-add). Errors asserted: vmap
//! of gather with batched indices, of rng_bit_generator with a batched state, of
//! dynamic_slice with batched starts and of convolution; jvp of sort, max
//! pooling, cholesky, triangular_solve and map.
//!
//! Cases per property: `XLACLIENT_PROPTEST_CASES` (default 8); draws move with
//! `XLACLIENT_PROPTEST_SEED`. About 2 minutes in all on a 2-core VM (debug
//! build, plugin 0.115).

mod common;
use common::{Rng, count, run, upload};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use xlaclient::ops::random::RngAlgorithm as BitAlgorithm;
use xlaclient::{
    Buffer, Builder, Comparison, ConvDims, DotDims, ElementType, Op, PadDim, Shape, Transpose,
    TriangularSolveOptions, Vmap, WindowDim,
};

// ---------------------------------------------------------------------------------
// The harness.

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

/// A runner whose draws depend on the property's name only (and
/// `XLACLIENT_PROPTEST_SEED`), so a failure reproduces.
fn runner(name: &str) -> TestRunner {
    let mut key = [0u8; 32];
    let seed = env_u64("XLACLIENT_PROPTEST_SEED").unwrap_or(0x7a_b5);
    key[..8].copy_from_slice(&seed.to_le_bytes());
    for (i, c) in name.bytes().enumerate() {
        key[8 + i % 24] ^= c.wrapping_mul(i as u8 | 1);
    }
    let config = Config {
        cases: env_u64("XLACLIENT_PROPTEST_CASES").map_or(8, |n| n as u32),
        max_shrink_iters: 8,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key))
}

/// An element type of a test input.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    F32,
    S32,
    U32,
}

/// One input of the one-example function: its one-example dims, type, the range
/// of its values (`[lo, hi)` for floats, `lo..=hi` for integers; integers with
/// `lo == hi == 0` take all bit patterns), and whether it may be batched.
#[derive(Clone, Debug)]
struct Arg {
    dims: Vec<i64>,
    ty: Ty,
    lo: f64,
    hi: f64,
    batchable: bool,
}

fn f32a(dims: &[i64], lo: f64, hi: f64) -> Arg {
    Arg {
        dims: dims.to_vec(),
        ty: Ty::F32,
        lo,
        hi,
        batchable: true,
    }
}

fn s32a(dims: &[i64], lo: i64, hi: i64) -> Arg {
    Arg {
        dims: dims.to_vec(),
        ty: Ty::S32,
        lo: lo as f64,
        hi: hi as f64,
        batchable: true,
    }
}

fn u32a(dims: &[i64]) -> Arg {
    Arg {
        dims: dims.to_vec(),
        ty: Ty::U32,
        lo: 0.0,
        hi: 0.0,
        batchable: true,
    }
}

/// `a`, never batched.
fn shared(mut a: Arg) -> Arg {
    a.batchable = false;
    a
}

fn element_type(t: Ty) -> ElementType {
    match t {
        Ty::F32 => ElementType::F32,
        Ty::S32 => ElementType::S32,
        Ty::U32 => ElementType::U32,
    }
}

/// Random values of `a`'s type for `dims`, uploaded.
fn random_buffer(rng: &mut Rng, a: &Arg, dims: &[i64]) -> Buffer {
    let n = count(dims);
    let int = |rng: &mut Rng| -> i64 {
        let span = (a.hi - a.lo) as u64 + 1;
        a.lo as i64 + (rng.next_u64() % span) as i64
    };
    match a.ty {
        Ty::F32 => upload(&rng.vec(n, a.lo as f32, a.hi as f32), dims),
        Ty::S32 if a.lo == 0.0 && a.hi == 0.0 => {
            let v: Vec<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
            upload(&v, dims)
        }
        Ty::S32 => {
            let v: Vec<i32> = (0..n).map(|_| int(rng) as i32).collect();
            upload(&v, dims)
        }
        Ty::U32 if a.lo == 0.0 && a.hi == 0.0 => {
            let v: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
            upload(&v, dims)
        }
        Ty::U32 => {
            let v: Vec<u32> = (0..n).map(|_| int(rng) as u32).collect();
            upload(&v, dims)
        }
    }
}

/// A buffer's values as f64 (exact for every type used here), and whether they are
/// floats.
fn values(buf: &Buffer) -> (Vec<f64>, bool) {
    let ty = buf.element_type().expect("element type");
    match ty {
        ElementType::F32 => (
            buf.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| *v as f64)
                .collect(),
            true,
        ),
        ElementType::F64 => (buf.to_vec::<f64>().unwrap(), true),
        ElementType::S32 => (
            buf.to_vec::<i32>()
                .unwrap()
                .iter()
                .map(|v| *v as f64)
                .collect(),
            false,
        ),
        ElementType::U32 => (
            buf.to_vec::<u32>()
                .unwrap()
                .iter()
                .map(|v| *v as f64)
                .collect(),
            false,
        ),
        ElementType::Pred => (
            buf.to_vec::<bool>()
                .unwrap()
                .iter()
                .map(|v| f64::from(u8::from(*v)))
                .collect(),
            false,
        ),
        other => panic!("no comparison for {other:?} outputs"),
    }
}

/// Where the batch goes for a drawn selector: `None` (one draw in five, or when
/// the input may not be batched), else a position among the `rank + 1`, spelled
/// negatively when the selector's top bit is set.
fn pick_axis(sel: u8, rank: usize, batchable: bool) -> Option<i64> {
    if !batchable || sel % 5 == 0 {
        return None;
    }
    let slots = rank as i64 + 1;
    let pos = i64::from(sel / 5) % slots;
    Some(if sel & 0x80 != 0 { pos - slots } else { pos })
}

fn resolve(a: i64, rank_with_batch: usize) -> usize {
    if a < 0 {
        (a + rank_with_batch as i64) as usize
    } else {
        a as usize
    }
}

/// The vmap property for one family: `case` draws the inputs and the family's
/// attributes; `f` is the one-example function; floats compare within `tol`
/// (absolute plus relative).
fn vmap_prop<A: Clone + std::fmt::Debug + 'static>(
    name: &str,
    tol: f64,
    case: impl Strategy<Value = (Vec<Arg>, A)>,
    f: impl Fn(&Builder, &[Op], &A) -> Vec<Op>,
) {
    let strategy = (
        case,
        1i64..=4,
        prop::collection::vec(any::<u8>(), 6),
        prop::collection::vec(any::<u8>(), 4),
        any::<u64>(),
    );
    let result = runner(name).run(&strategy, |((args, attrs), n, in_sel, out_sel, seed)| {
        check_vmap(name, tol, &args, &attrs, n, &in_sel, &out_sel, seed, &f)
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

#[allow(clippy::too_many_arguments)]
fn check_vmap<A: std::fmt::Debug>(
    name: &str,
    tol: f64,
    args: &[Arg],
    attrs: &A,
    n: i64,
    in_sel: &[u8],
    out_sel: &[u8],
    seed: u64,
    f: &impl Fn(&Builder, &[Op], &A) -> Vec<Op>,
) -> Result<(), TestCaseError> {
    let in_axes: Vec<Option<i64>> = args
        .iter()
        .enumerate()
        .map(|(k, a)| pick_axis(in_sel[k % in_sel.len()], a.dims.len(), a.batchable))
        .collect();
    let what = format!("{name}: n = {n}, in_axes {in_axes:?}, args {args:?}, attrs {attrs:?}");
    let b = Builder::new(name);
    let mut stored_dims = Vec::new();
    let params: Vec<Op> = args
        .iter()
        .zip(&in_axes)
        .enumerate()
        .map(|(k, (a, ax))| {
            let mut d = a.dims.clone();
            if let Some(ax) = ax {
                d.insert(resolve(*ax, a.dims.len() + 1), n);
            }
            stored_dims.push(d.clone());
            b.parameter(k, Shape::array(element_type(a.ty), &d), &format!("a{k}"))
        })
        .collect();
    // The reference: f per example, on slices of the batched parameters.
    let per_example: Vec<Vec<Op>> = (0..n)
        .map(|i| {
            let xs: Vec<Op> = params
                .iter()
                .zip(&in_axes)
                .zip(args)
                .map(|((p, ax), a)| match ax {
                    None => p.clone(),
                    Some(ax) => {
                        let at = resolve(*ax, a.dims.len() + 1) as i64;
                        p.slice_in_dim(i, i + 1, 1, at).reshape(&a.dims)
                    }
                })
                .collect();
            f(&b, &xs, attrs)
        })
        .collect();
    let n_out = per_example[0].len();
    let mut out_axes = Vec::new();
    let mut reference = Vec::new();
    for k in 0..n_out {
        let rank = per_example[0][k]
            .rank()
            .map_err(|e| TestCaseError::fail(format!("{what}: the reference f fails: {e}")))?;
        let sel = out_sel[k % out_sel.len()];
        let slots = rank as i64 + 1;
        let pos = i64::from(sel & 0x7f) % slots;
        let ax = if sel & 0x80 != 0 { pos - slots } else { pos };
        out_axes.push(Some(ax));
        let refs: Vec<&Op> = per_example.iter().map(|o| &o[k]).collect();
        reference.push(b.stack(&refs, resolve(ax, rank + 1) as i64));
    }
    let spec = Vmap::new()
        .in_axes(in_axes.clone())
        .out_axes(out_axes.clone())
        .axis_size(n);
    let batched: Vec<Op> = b.vmap(&spec, params.clone(), |bb, xs: Vec<Op>| f(bb, &xs, attrs));
    let what = format!("{what}, out_axes {out_axes:?}");
    let outs: Vec<&Op> = batched.iter().chain(&reference).collect();
    let module = b
        .build_tuple(&outs)
        .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    let mut rng = Rng(seed);
    let bufs: Vec<Buffer> = args
        .iter()
        .zip(&stored_dims)
        .map(|(a, d)| random_buffer(&mut rng, a, d))
        .collect();
    let refs: Vec<&Buffer> = bufs.iter().collect();
    let res = run(&module, &refs);
    for k in 0..n_out {
        let (got, want) = (&res[k], &res[n_out + k]);
        prop_assert_eq!(
            got.dims().unwrap(),
            want.dims().unwrap(),
            "{}: output {} dims",
            what,
            k
        );
        prop_assert_eq!(got.element_type().unwrap(), want.element_type().unwrap());
        let ((g, float), (w, _)) = (values(got), values(want));
        for (i, (g, w)) in g.iter().zip(&w).enumerate() {
            let ok = if float {
                (g - w).abs() <= tol * (1.0 + w.abs()) || g == w || (g.is_nan() && w.is_nan())
            } else {
                g == w
            };
            prop_assert!(
                ok,
                "{}: output {} element {}: vmap {} vs stacked {}",
                what,
                k,
                i,
                g,
                w
            );
        }
    }
    Ok(())
}

fn dims(ranks: std::ops::RangeInclusive<usize>, max: i64) -> BoxedStrategy<Vec<i64>> {
    prop::collection::vec(1..=max, ranks).boxed()
}

/// A permutation of `0..r` from `seed` (Fisher–Yates).
fn permutation(r: usize, seed: u64) -> Vec<i64> {
    let mut perm: Vec<i64> = (0..r as i64).collect();
    let mut rng = Rng(seed);
    for i in (1..r).rev() {
        perm.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    perm
}

/// Two shapes that numpy-broadcast together (a suffix of a common shape, some axes
/// replaced by 1).
fn broadcast_pair() -> BoxedStrategy<(Vec<i64>, Vec<i64>)> {
    dims(0..=3, 3)
        .prop_flat_map(|out| {
            let r = out.len();
            let operand = move |out: Vec<i64>| {
                (0..=r, prop::collection::vec(any::<bool>(), r)).prop_map(move |(rank, ones)| {
                    (r - rank..r)
                        .map(|i| if ones[i] { 1 } else { out[i] })
                        .collect::<Vec<i64>>()
                })
            };
            (operand(out.clone()), operand(out))
        })
        .boxed()
}

// ---------------------------------------------------------------------------------
// vmap: element-wise ops.

const UNARY: usize = 20;

fn unary(x: &Op, which: usize) -> Op {
    match which {
        0 => x.neg(),
        1 => x.exp(),
        2 => (x.abs() + 0.5).log(),
        3 => x.tanh(),
        4 => x.abs(),
        5 => x.abs().sqrt(),
        6 => (x.abs() + 0.5).rsqrt(),
        7 => x.sin(),
        8 => x.cos(),
        9 => x.logistic(),
        10 => x.floor(),
        11 => x.ceil(),
        12 => x.sign(),
        13 => x.expm1(),
        14 => x.abs().log1p(),
        15 => (x * 3.0).round(),
        16 => (x * 3.0).round_even(),
        17 => x.cbrt(),
        18 => x.erf(),
        _ => x.tan(),
    }
}

#[test]
fn vmap_unary() {
    vmap_prop(
        "vmap_unary",
        1e-6,
        (dims(0..=3, 4), 0..UNARY).prop_map(|(d, op)| (vec![f32a(&d, -1.5, 1.5)], op)),
        |_, x, op| {
            vec![
                unary(&x[0], *op),
                x[0].is_finite().convert(ElementType::F32),
            ]
        },
    );
}

fn binary(x: &Op, y: &Op, which: usize) -> Op {
    match which {
        0 => x + y,
        1 => x - y,
        2 => x * y,
        3 => x / &(y.abs() + 0.5),
        4 => x.max(y),
        5 => x.min(y),
        6 => (x.abs() + 0.5).pow(y),
        7 => x.rem(&(y.abs() + 0.5)),
        _ => x.atan2(y),
    }
}

#[test]
fn vmap_binary_with_numpy_broadcasting() {
    vmap_prop(
        "vmap_binary",
        1e-6,
        (broadcast_pair(), 0usize..9)
            .prop_map(|((xd, yd), op)| (vec![f32a(&xd, -2.0, 2.0), f32a(&yd, -2.0, 2.0)], op)),
        |_, a, op| vec![binary(&a[0], &a[1], *op)],
    );
}

#[test]
fn vmap_integer_binary() {
    vmap_prop(
        "vmap_int_binary",
        0.0,
        (broadcast_pair(), 0usize..5)
            .prop_map(|((xd, yd), op)| (vec![s32a(&xd, -50, 50), s32a(&yd, 1, 9)], op)),
        |_, a, op| {
            let (x, y) = (&a[0], &a[1]);
            vec![match op {
                0 => x + y,
                1 => x * y,
                2 => x.max(y),
                3 => x.rem(y),
                _ => x / y,
            }]
        },
    );
}

const DIRECTIONS: [Comparison; 6] = [
    Comparison::Eq,
    Comparison::Ne,
    Comparison::Lt,
    Comparison::Le,
    Comparison::Gt,
    Comparison::Ge,
];

#[test]
fn vmap_compare_and_select() {
    // Integers drawn from a few values so that Eq and Ne see both answers.
    vmap_prop(
        "vmap_compare_select",
        0.0,
        (dims(0..=3, 4), 0usize..6, any::<bool>()).prop_map(|(d, dir, scalar_pred)| {
            let args = vec![
                s32a(&d, -2, 2),
                s32a(&d, -2, 2),
                s32a(&d, -9, 9),
                s32a(&[], -1, 1),
            ];
            (args, (dir, scalar_pred))
        }),
        |b, a, (dir, scalar_pred)| {
            let pred = a[0].compare(&a[1], DIRECTIONS[*dir]);
            let chosen = b.select(&pred, &a[0], &a[2]);
            // A scalar predicate broadcast over array operands.
            let p = a[3].compare(&b.constant(0i32), Comparison::Gt);
            let mixed = if *scalar_pred {
                b.select(&p, &a[2], &a[1])
            } else {
                b.select(&pred, &a[3], &a[2])
            };
            vec![chosen, pred, mixed]
        },
    );
}

#[test]
fn vmap_clamp() {
    vmap_prop(
        "vmap_clamp",
        0.0,
        (dims(0..=3, 4), any::<bool>()).prop_map(|(d, scalar_bounds)| {
            let bd = if scalar_bounds { vec![] } else { d.clone() };
            let args = vec![
                f32a(&d, -3.0, 3.0),
                f32a(&bd, -2.0, 0.0),
                f32a(&bd, 0.0, 2.0),
            ];
            (args, ())
        }),
        |_, a, _| vec![a[0].clamp(&a[1], &a[2])],
    );
}

#[test]
fn vmap_bitwise() {
    vmap_prop(
        "vmap_bitwise",
        0.0,
        (broadcast_pair(), 0usize..9, any::<bool>()).prop_map(|((xd, yd), op, signed)| {
            let (x, y) = if signed {
                (s32a(&xd, 0, 0), s32a(&yd, 0, 35))
            } else {
                (
                    u32a(&xd),
                    Arg {
                        lo: 0.0,
                        hi: 35.0,
                        ..u32a(&yd)
                    },
                )
            };
            (vec![x, y], op)
        }),
        |_, a, op| {
            let (x, y) = (&a[0], &a[1]);
            vec![match op {
                0 => x.and(y),
                1 => x.or(y),
                2 => x.xor(y),
                3 => x.shift_left(y),
                4 => x.shift_right_arithmetic(y),
                5 => x.shift_right_logical(y),
                6 => x.not(),
                7 => x.popcnt(),
                _ => x.count_leading_zeros(),
            }]
        },
    );
}

// ---------------------------------------------------------------------------------
// vmap: shapes.

#[test]
fn vmap_broadcast_in_dim() {
    vmap_prop(
        "vmap_broadcast",
        0.0,
        (
            dims(0..=3, 3),
            prop::collection::vec(any::<bool>(), 3),
            prop::collection::vec(any::<bool>(), 3),
            dims(0..=2, 3),
        )
            .prop_map(|(out, keep, ones, prefix)| {
                let map: Vec<i64> = (0..out.len() as i64)
                    .filter(|i| keep[*i as usize])
                    .collect();
                let xd: Vec<i64> = map
                    .iter()
                    .map(|i| {
                        if ones[*i as usize] {
                            1
                        } else {
                            out[*i as usize]
                        }
                    })
                    .collect();
                (vec![f32a(&xd, -2.0, 2.0)], (out, map, prefix))
            }),
        |_, a, (out, map, prefix)| vec![a[0].broadcast_in_dim(out, map), a[0].broadcast(prefix)],
    );
}

#[test]
fn vmap_reshape_and_transpose() {
    vmap_prop(
        "vmap_reshape_transpose",
        0.0,
        (
            dims(0..=3, 4),
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            any::<u64>(),
        )
            .prop_map(|(d, order, hole, perm_seed)| {
                let r = d.len();
                let mut target = d.clone();
                if r > 0 {
                    target.rotate_left(order.index(r));
                    target[hole.index(r)] = -1;
                }
                (
                    vec![f32a(&d, -2.0, 2.0)],
                    (target, permutation(r, perm_seed)),
                )
            }),
        |_, a, (target, perm)| {
            let flat = a[0].reshape(&[-1]);
            vec![a[0].reshape(target), a[0].transpose(perm), flat]
        },
    );
}

#[test]
fn vmap_convert() {
    vmap_prop(
        "vmap_convert",
        0.0,
        dims(0..=3, 4).prop_map(|d| (vec![f32a(&d, -40.0, 40.0), s32a(&d, -1000, 1000)], ())),
        |_, a, _| {
            vec![
                a[0].convert(ElementType::S32),
                a[0].convert(ElementType::F64),
                a[1].convert(ElementType::F32),
                a[1].convert(ElementType::U32),
            ]
        },
    );
}

#[test]
fn vmap_dot_general() {
    vmap_prop(
        "vmap_dot_general",
        1e-5,
        (0usize..4, 1i64..=4, 1i64..=4, 1i64..=4, 1i64..=3).prop_map(|(form, m, k, n, bs)| {
            let args = match form {
                // matmul
                0 => vec![f32a(&[m, k], -2.0, 2.0), f32a(&[k, n], -2.0, 2.0)],
                // dot_general with batch dims (batch axes at 0 and 2)
                1 => vec![f32a(&[bs, m, k], -2.0, 2.0), f32a(&[k, n, bs], -2.0, 2.0)],
                // vector dot
                2 => vec![f32a(&[k], -2.0, 2.0), f32a(&[k], -2.0, 2.0)],
                // matrix-vector
                _ => vec![f32a(&[m, k], -2.0, 2.0), f32a(&[k], -2.0, 2.0)],
            };
            (args, form)
        }),
        |_, a, form| {
            vec![match form {
                0 => a[0].matmul(&a[1]),
                1 => a[0].dot_general(
                    &a[1],
                    &DotDims {
                        lhs_contracting: vec![2],
                        rhs_contracting: vec![0],
                        lhs_batch: vec![0],
                        rhs_batch: vec![2],
                    },
                ),
                2 => a[0].dot(&a[1]),
                _ => a[0].matmul(&a[1]),
            }]
        },
    );
}

#[test]
fn vmap_reduce() {
    vmap_prop(
        "vmap_reduce",
        1e-5,
        (dims(0..=3, 4), any::<u8>(), any::<u8>(), 0usize..3).prop_map(|(d, mask, neg, op)| {
            let r = d.len();
            let axes: Vec<i64> = (0..r)
                .filter(|a| mask & (1 << a) != 0)
                .map(|a| {
                    if neg & (1 << a) != 0 {
                        a as i64 - r as i64
                    } else {
                        a as i64
                    }
                })
                .collect();
            (vec![f32a(&d, -2.0, 2.0), s32a(&d, -9, 9)], (axes, op))
        }),
        |_, a, (axes, op)| {
            let red = |x: &Op| match op {
                0 => x.reduce_sum(axes),
                1 => x.reduce_max(axes),
                _ => x.reduce_min(axes),
            };
            vec![red(&a[0]), red(&a[1])]
        },
    );
}

// ---------------------------------------------------------------------------------
// vmap: slicing.

#[test]
fn vmap_slice() {
    vmap_prop(
        "vmap_slice",
        0.0,
        (
            dims(1..=3, 5),
            prop::collection::vec((any::<u8>(), any::<u8>(), 1i64..=2), 3),
        )
            .prop_map(|(d, picks)| {
                let (mut start, mut limit, mut stride) = (vec![], vec![], vec![]);
                for (k, dk) in d.iter().enumerate() {
                    let (s, l, st) = picks[k];
                    let s0 = i64::from(s) % dk;
                    start.push(s0);
                    limit.push(s0 + 1 + i64::from(l) % (dk - s0));
                    stride.push(st);
                }
                (vec![f32a(&d, -2.0, 2.0)], (start, limit, stride))
            }),
        |_, a, (s, l, st)| vec![a[0].slice(s, l, st)],
    );
}

#[test]
fn vmap_dynamic_slice_unbatched_starts() {
    vmap_prop(
        "vmap_dynamic_slice",
        0.0,
        (dims(1..=3, 5), prop::collection::vec(any::<u8>(), 3)).prop_map(|(d, picks)| {
            let sizes: Vec<i64> = d
                .iter()
                .zip(&picks)
                .map(|(dk, p)| 1 + i64::from(*p) % dk)
                .collect();
            let mut args = vec![f32a(&d, -2.0, 2.0)];
            // Starts out of range on purpose: XLA clamps them.
            args.extend(d.iter().map(|dk| shared(s32a(&[], -1, *dk))));
            (args, sizes)
        }),
        |_, a, sizes| {
            let starts: Vec<&Op> = a[1..].iter().collect();
            vec![a[0].dynamic_slice(&starts, sizes)]
        },
    );
}

#[test]
fn vmap_dynamic_update_slice_unbatched_starts() {
    vmap_prop(
        "vmap_dynamic_update_slice",
        0.0,
        (dims(1..=3, 5), prop::collection::vec(any::<u8>(), 3)).prop_map(|(d, picks)| {
            let ud: Vec<i64> = d
                .iter()
                .zip(&picks)
                .map(|(dk, p)| 1 + i64::from(*p) % dk)
                .collect();
            let mut args = vec![f32a(&d, -2.0, 2.0), f32a(&ud, 5.0, 6.0)];
            args.extend(d.iter().map(|dk| shared(s32a(&[], -1, *dk))));
            (args, ())
        }),
        |_, a, _| {
            let starts: Vec<&Op> = a[2..].iter().collect();
            vec![a[0].dynamic_update_slice(&a[1], &starts)]
        },
    );
}

#[test]
fn vmap_concatenate() {
    vmap_prop(
        "vmap_concatenate",
        0.0,
        (
            dims(1..=3, 4),
            2usize..=3,
            prop::collection::vec(1i64..=3, 3),
            any::<u8>(),
        )
            .prop_map(|(d, parts, widths, ax)| {
                let r = d.len() as i64;
                let axis = i64::from(ax & 0x7f) % r;
                let args = (0..parts)
                    .map(|k| {
                        let mut dk = d.clone();
                        dk[axis as usize] = widths[k];
                        f32a(&dk, -2.0, 2.0)
                    })
                    .collect();
                let spelled = if ax & 0x80 != 0 { axis - r } else { axis };
                (args, spelled)
            }),
        |b, a, axis| {
            let refs: Vec<&Op> = a.iter().collect();
            vec![b.concatenate(&refs, *axis)]
        },
    );
}

#[test]
fn vmap_pad() {
    vmap_prop(
        "vmap_pad",
        0.0,
        (
            dims(0..=3, 4),
            prop::collection::vec((-1i64..=2, -1i64..=2, 0i64..=1), 3),
        )
            .prop_map(|(d, cfg)| {
                let config: Vec<PadDim> = d
                    .iter()
                    .zip(&cfg)
                    .map(|(dk, (lo, hi, interior))| {
                        // Keep the padded size at least 1.
                        let hi = if dk + lo + hi + (dk - 1) * interior < 1 {
                            0
                        } else {
                            *hi
                        };
                        let lo = if dk + lo + hi + (dk - 1) * interior < 1 {
                            0
                        } else {
                            *lo
                        };
                        PadDim {
                            lo,
                            hi,
                            interior: *interior,
                        }
                    })
                    .collect();
                (vec![f32a(&d, -2.0, 2.0), f32a(&[], 7.0, 8.0)], config)
            }),
        |_, a, config| vec![a[0].pad(&a[1], config)],
    );
}

#[test]
fn vmap_reverse() {
    vmap_prop(
        "vmap_reverse",
        0.0,
        (dims(0..=3, 4), any::<u8>()).prop_map(|(d, mask)| {
            let r = d.len();
            let axes: Vec<i64> = (0..r as i64).filter(|a| mask & (1 << a) != 0).collect();
            (vec![f32a(&d, -2.0, 2.0)], axes)
        }),
        |_, a, axes| vec![a[0].reverse(axes)],
    );
}

// ---------------------------------------------------------------------------------
// vmap: sorting, windows, linear algebra, map.

#[test]
fn vmap_sort() {
    vmap_prop(
        "vmap_sort",
        0.0,
        (dims(1..=3, 4), any::<u8>()).prop_map(|(d, ax)| {
            let r = d.len() as i64;
            let axis = i64::from(ax & 0x7f) % r;
            let spelled = if ax & 0x80 != 0 { axis - r } else { axis };
            (vec![f32a(&d, -2.0, 2.0), s32a(&d, -99, 99)], spelled)
        }),
        |b, a, axis| {
            let single = a[0].sort_ascending(*axis);
            // Keys and values sorted together, descending.
            let pair = b.sort(&[&a[0], &a[1]], *axis, true, |l, r| {
                l[0].compare(&r[0], Comparison::Gt)
            });
            vec![single, pair[0].clone(), pair[1].clone()]
        },
    );
}

#[test]
fn vmap_reduce_window_pools() {
    vmap_prop(
        "vmap_reduce_window",
        1e-5,
        (
            dims(1..=3, 5),
            prop::collection::vec((any::<u8>(), 1i64..=2, 0i64..=1, 0i64..=1), 3),
            any::<bool>(),
        )
            .prop_map(|(d, w, max)| {
                let window: Vec<WindowDim> = d
                    .iter()
                    .zip(&w)
                    .map(|(dk, (s, stride, lo, hi))| WindowDim {
                        padding_low: *lo,
                        padding_high: *hi,
                        ..WindowDim::new(1 + i64::from(*s) % dk, *stride)
                    })
                    .collect();
                (vec![f32a(&d, -2.0, 2.0)], (window, max))
            }),
        |_, a, (window, max)| {
            vec![if *max {
                a[0].max_pool(window)
            } else {
                a[0].sum_pool(window)
            }]
        },
    );
}

/// `a aᵀ + m I`: symmetric positive definite.
fn spd(b: &Builder, a: &Op, m: i64) -> Op {
    eye(b, m) * (m as f64) + a.matmul(&a.transpose(&[1, 0]))
}

fn eye(b: &Builder, m: i64) -> Op {
    let r = b.iota(ElementType::S32, &[m, m], 0);
    let c = b.iota(ElementType::S32, &[m, m], 1);
    r.compare(&c, Comparison::Eq).convert(ElementType::F32)
}

#[test]
fn vmap_cholesky() {
    vmap_prop(
        "vmap_cholesky",
        1e-4,
        (1i64..=4, any::<bool>())
            .prop_map(|(m, lower)| (vec![f32a(&[m, m], -1.0, 1.0)], (m, lower))),
        |b, a, (m, lower)| vec![spd(b, &a[0], *m).cholesky(*lower)],
    );
}

#[test]
fn vmap_triangular_solve() {
    vmap_prop(
        "vmap_triangular_solve",
        1e-4,
        (
            1i64..=4,
            1i64..=3,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(m, k, left, lower, unit, trans)| {
                let bd = if left { vec![m, k] } else { vec![k, m] };
                let opts = TriangularSolveOptions {
                    left_side: left,
                    lower,
                    unit_diagonal: unit,
                    transpose_a: if trans {
                        Transpose::Transpose
                    } else {
                        Transpose::No
                    },
                };
                (
                    vec![f32a(&[m, m], -1.0, 1.0), f32a(&bd, -2.0, 2.0)],
                    (m, opts),
                )
            }),
        |b, a, (m, opts)| {
            // Diagonally dominant: well conditioned.
            let well = &a[0] + &(eye(b, *m) * (*m as f64 + 1.0));
            vec![well.triangular_solve(&a[1], *opts)]
        },
    );
}

#[test]
fn vmap_map() {
    vmap_prop(
        "vmap_map",
        1e-6,
        dims(0..=3, 4).prop_map(|d| (vec![f32a(&d, -2.0, 2.0), f32a(&d, -2.0, 2.0)], ())),
        |b, a, _| vec![b.map(&[&a[0], &a[1]], |s| (&s[0] * &s[1]).tanh() + &s[0])],
    );
}

#[test]
fn vmap_iota_and_constants_mixed_in() {
    vmap_prop(
        "vmap_iota_constant",
        1e-6,
        (dims(1..=3, 4), any::<u8>()).prop_map(|(d, ax)| {
            let axis = i64::from(ax) % d.len() as i64;
            (vec![f32a(&d, -2.0, 2.0)], (d, axis))
        }),
        |b, a, (d, axis)| {
            let iota = b.iota(ElementType::F32, d, *axis);
            let n = count(d);
            let table: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 1.0).collect();
            let c = b.constant_array(&table, d);
            vec![&a[0] * &iota + &c + 2.0, iota, c]
        },
    );
}

#[test]
fn vmap_select_and_scatter() {
    // The gradient form of max pooling: the source, shaped like the pooled output,
    // scattered onto each window's maximum.
    vmap_prop(
        "vmap_select_and_scatter",
        1e-6,
        (
            dims(1..=2, 5),
            prop::collection::vec((any::<u8>(), 1i64..=2), 2),
        )
            .prop_map(|(d, w)| {
                let window: Vec<WindowDim> = d
                    .iter()
                    .zip(&w)
                    .map(|(dk, (s, stride))| WindowDim::new(1 + i64::from(*s) % dk, *stride))
                    .collect();
                let pooled: Vec<i64> = d
                    .iter()
                    .zip(&window)
                    .map(|(dk, wd)| (dk - wd.size) / wd.stride + 1)
                    .collect();
                (vec![f32a(&d, -2.0, 2.0), f32a(&pooled, -1.0, 1.0)], window)
            }),
        |b, a, window| {
            let init = b.constant(0f32);
            vec![a[0].select_and_scatter(
                &a[1],
                &init,
                window,
                |x, y| x.compare(y, Comparison::Ge),
                |acc, x| acc + x,
            )]
        },
    );
}

#[test]
fn vmap_bitcast_barrier_call_and_unbatched_rng() {
    vmap_prop(
        "vmap_misc",
        1e-6,
        dims(0..=3, 4).prop_map(|d| {
            (
                vec![f32a(&d, -2.0, 2.0), u32a(&d), f32a(&[], -1.0, 1.0)],
                (),
            )
        }),
        |b, a, _| {
            let (x, bits, k) = (&a[0], &a[1], &a[2]);
            let as_bits = x.bitcast_convert(ElementType::U32);
            let as_float = bits.bitcast_convert(ElementType::F32);
            let kept = b.optimization_barrier(&[x, k]);
            // A call whose body uses an outside value (batched or not).
            let called = b.call("scaled", &[x], |_, p| vec![(&p[0] * k).exp()]);
            // The state is the same for every example: the bits are shared.
            let state = b.constant_vec(&[7u64, 11u64]);
            let d = x.dims().unwrap();
            let (_, random) = state.rng_bit_generator(BitAlgorithm::ThreeFry, ElementType::U32, &d);
            let mixed = random.xor(&as_bits);
            vec![
                as_bits,
                as_float,
                &kept[0] * &kept[1],
                called[0].clone(),
                mixed,
            ]
        },
    );
}

// ---------------------------------------------------------------------------------
// vmap: control flow.

#[test]
fn vmap_fori_loop() {
    vmap_prop(
        "vmap_fori_loop",
        1e-5,
        (dims(0..=2, 3), 0i32..=3).prop_map(|(d, trips)| {
            (
                vec![
                    f32a(&d, -1.0, 1.0),
                    f32a(&d, -1.0, 1.0),
                    f32a(&[], -1.0, 1.0),
                ],
                trips,
            )
        }),
        |b, a, trips| {
            let (x, w, s) = (&a[0], &a[1], &a[2]);
            let acc0 = x.zeros_like();
            // The body uses outside values (w, s), batched or not.
            let (xo, acc) = b.fori_loop(0, *trips, (x.clone(), acc0), |i, (x, acc)| {
                let step = (&x * w).sin() + i.convert(ElementType::F32) * 0.5;
                (&x * s + 0.25, &acc * 0.5 + step)
            });
            vec![xo, acc]
        },
    );
}

#[test]
fn vmap_while_with_per_example_trip_counts() {
    vmap_prop(
        "vmap_while",
        1e-5,
        dims(0..=2, 3).prop_map(|d| (vec![f32a(&d, 0.1, 1.0), f32a(&[], 1.0, 30.0)], ())),
        |b, a, _| {
            let limit = a[1].clone();
            // The trip count depends on the data: a batched predicate runs every
            // example until the last is done.
            let (v, k) = b.while_loop(
                (a[0].clone(), b.constant(0i32)),
                |(v, _)| {
                    let all: Vec<i64> = (0..v.rank().unwrap() as i64).collect();
                    v.reduce_sum(&all).compare(&limit, Comparison::Lt)
                },
                |(v, k)| (&v * 1.5 + 0.25, k + 1),
            );
            vec![v, k]
        },
    );
}

#[test]
fn vmap_scan() {
    vmap_prop(
        "vmap_scan",
        1e-5,
        (1i64..=4, dims(0..=2, 3)).prop_map(|(t, d)| {
            let mut xd = vec![t];
            xd.extend(&d);
            (
                vec![
                    f32a(&d, -1.0, 1.0),
                    f32a(&xd, -1.0, 1.0),
                    f32a(&d, -1.0, 1.0),
                ],
                (),
            )
        }),
        |b, a, _| {
            let w = a[2].clone();
            let (carry, ys) = b.scan(a[0].clone(), a[1].clone(), |c, x| {
                let next = (&c * &w + &x).tanh();
                (next.clone(), &next * 2.0)
            });
            vec![carry, ys]
        },
    );
}

#[test]
fn vmap_cond_and_switch() {
    vmap_prop(
        "vmap_cond_switch",
        1e-6,
        dims(0..=2, 3).prop_map(|d| {
            let args = vec![
                f32a(&d, -1.0, 1.0),
                f32a(&d, -1.0, 1.0),
                // The switch index: batched or not as drawn; -1 and 3 are clamped.
                s32a(&[], -1, 3),
                // A predicate input that is never batched.
                shared(f32a(&[], -1.0, 1.0)),
            ];
            (args, ())
        }),
        |b, a, _| {
            let (x, y) = (&a[0], &a[1]);
            let all: Vec<i64> = (0..x.rank().unwrap() as i64).collect();
            // A predicate from the batched data.
            let p = x
                .reduce_sum(&all)
                .compare(&b.constant(0f32), Comparison::Gt);
            let c1 = b.cond(&p, x.clone(), |x| x.exp() + y, |x| &x * y);
            // A predicate from an unbatched input (stays a conditional).
            let q = a[3].compare(&b.constant(0f32), Comparison::Gt);
            let c2 = b.cond(
                &q,
                (x.clone(), y.clone()),
                |(x, y)| &x - &y,
                |(x, y)| x.max(&y),
            );
            let s = b.switch(
                &a[2],
                x.clone(),
                Box::new(|x: Op| x.sin()),
                vec![Box::new(|x: Op| &x + y), Box::new(|x: Op| &x * 3.0)],
            );
            vec![c1, c2, s]
        },
    );
}

#[test]
fn vmap_nested() {
    // A vmap inside the function: the inner one maps the rows of each example.
    vmap_prop(
        "vmap_nested",
        1e-5,
        (1i64..=3, 1i64..=3)
            .prop_map(|(r, c)| (vec![f32a(&[r, c], -1.0, 1.0), f32a(&[c], -1.0, 1.0)], ())),
        |b, a, _| {
            let inner = Vmap::new().in_axes([Some(0), None]);
            vec![b.vmap(&inner, (a[0].clone(), a[1].clone()), |_, (row, w)| {
                (&row * &w).reduce_sum(&[0]).tanh()
            })]
        },
    );
}

#[test]
fn vmap_of_grad_and_jvp() {
    // Per-example gradients and tangents: the ops the reverse and forward passes
    // emit, batched.
    vmap_prop(
        "vmap_grad_jvp",
        1e-5,
        (1i64..=3, 1i64..=3).prop_map(|(m, k)| {
            let args = vec![
                f32a(&[k], -1.0, 1.0),
                f32a(&[m, k], -1.0, 1.0),
                f32a(&[k], -1.0, 1.0),
            ];
            (args, ())
        }),
        |b, a, _| {
            let (w, x, v) = (&a[0], &a[1], &a[2]);
            let loss = x.matmul(w).tanh().reduce_sum(&[0]) + (w * w).reduce_sum(&[0]);
            let g = b.grad(&loss, w);
            let t = b.jvp(&[&loss], &[w], &[v]).remove(0);
            vec![g, t]
        },
    );
}

// ---------------------------------------------------------------------------------
// jvp: finite differences and the dot-product identity, in f64.

const H: f64 = 1e-6;

/// The jvp property for one family: f64 inputs of the drawn dims with values in
/// `[lo, hi)`; `J v` against central differences within `tol` (absolute plus
/// relative to the largest difference quotient), and `<u, J v>` against
/// `<Jᵀ u, v>` within 1e-9.
fn jvp_prop<A: Clone + std::fmt::Debug + 'static>(
    name: &str,
    lo: f64,
    hi: f64,
    tol: f64,
    case: impl Strategy<Value = (Vec<Vec<i64>>, A)>,
    f: impl Fn(&Builder, &[Op], &A) -> Op,
) {
    let strategy = (case, any::<u64>());
    let result = runner(name).run(&strategy, |((shapes, attrs), seed)| {
        check_jvp(name, lo, hi, tol, &shapes, &attrs, seed, &f)
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

fn f64s(rng: &mut Rng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n)
        .map(|_| lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn check_jvp<A: std::fmt::Debug>(
    name: &str,
    lo: f64,
    hi: f64,
    tol: f64,
    shapes: &[Vec<i64>],
    attrs: &A,
    seed: u64,
    f: &impl Fn(&Builder, &[Op], &A) -> Op,
) -> Result<(), TestCaseError> {
    let what = format!("{name}: shapes {shapes:?}, attrs {attrs:?}");
    let m = shapes.len();
    let b = Builder::new(name);
    let param = |k: usize, d: &[i64], s: &str| b.parameter(k, Shape::of::<f64>(d), s);
    let xs: Vec<Op> = shapes
        .iter()
        .enumerate()
        .map(|(k, d)| param(k, d, "x"))
        .collect();
    let vs: Vec<Op> = shapes
        .iter()
        .enumerate()
        .map(|(k, d)| param(m + k, d, "v"))
        .collect();
    let y = f(&b, &xs, attrs);
    let yd = y
        .dims()
        .map_err(|e| TestCaseError::fail(format!("{what}: f fails: {e}")))?;
    let u = param(2 * m, &yd, "u");
    let xr: Vec<&Op> = xs.iter().collect();
    let vr: Vec<&Op> = vs.iter().collect();
    let jv = b.jvp(&[&y], &xr, &vr).remove(0);
    let moved = |sign: f64| {
        let at: Vec<Op> = xs
            .iter()
            .zip(&vs)
            .map(|(x, v)| x + &(v * (sign * H)))
            .collect();
        f(&b, &at, attrs)
    };
    let fd = (moved(1.0) - moved(-1.0)) / (2.0 * H);
    let all = |o: &Op| -> Vec<i64> { (0..o.rank().unwrap_or(0) as i64).collect() };
    let u_jv = (&u * &jv).reduce_sum(&all(&y));
    let jtu = b.vjp(&[&y], &[&u], &xr);
    let mut jtu_v = b.constant(0f64);
    for (g, v) in jtu.iter().zip(&vs) {
        jtu_v = &jtu_v + &(g * v).reduce_sum(&all(v));
    }
    let module = b
        .build_tuple(&[&jv, &fd, &u_jv, &jtu_v])
        .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    let mut rng = Rng(seed);
    let mut bufs = Vec::new();
    for d in shapes {
        bufs.push(upload(&f64s(&mut rng, count(d), lo, hi), d));
    }
    for d in shapes {
        bufs.push(upload(&f64s(&mut rng, count(d), -1.0, 1.0), d));
    }
    bufs.push(upload(&f64s(&mut rng, count(&yd), -1.0, 1.0), &yd));
    let refs: Vec<&Buffer> = bufs.iter().collect();
    let res = run(&module, &refs);
    let jv: Vec<f64> = res[0].to_vec().unwrap();
    let fd: Vec<f64> = res[1].to_vec().unwrap();
    let scale = fd.iter().fold(1.0f64, |a, v| a.max(v.abs()));
    for (i, (t, d)) in jv.iter().zip(&fd).enumerate() {
        prop_assert!(
            (t - d).abs() <= tol * scale,
            "{}: element {}: jvp {} vs finite differences {}",
            what,
            i,
            t,
            d
        );
    }
    let (a, c): (f64, f64) = (res[2].to_vec().unwrap()[0], res[3].to_vec().unwrap()[0]);
    prop_assert!(
        (a - c).abs() <= 1e-9 * (1.0 + a.abs()),
        "{}: <u, J v> = {} but <J^T u, v> = {}",
        what,
        a,
        c
    );
    Ok(())
}

/// The unary ops with a tangent rule (`unary` numbering), on inputs where they are
/// smooth.
const SMOOTH_UNARY: [usize; 15] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 14, 17, 18, 19];

#[test]
fn jvp_unary() {
    jvp_prop(
        "jvp_unary",
        0.1,
        1.2,
        1e-6,
        (dims(0..=3, 3), prop::sample::select(SMOOTH_UNARY.to_vec()))
            .prop_map(|(d, op)| (vec![d], op)),
        |_, x, op| unary(&x[0], *op) * (&x[0] - 0.3),
    );
}

#[test]
fn jvp_binary_with_numpy_broadcasting() {
    jvp_prop(
        "jvp_binary",
        -2.0,
        2.0,
        1e-6,
        (broadcast_pair(), 0usize..9).prop_map(|((xd, yd), op)| (vec![xd, yd], op)),
        |_, a, op| binary(&a[0], &a[1], *op),
    );
}

#[test]
fn jvp_select_and_clamp() {
    jvp_prop(
        "jvp_select_clamp",
        -2.0,
        2.0,
        1e-6,
        (dims(0..=3, 3), any::<bool>()).prop_map(|(d, scalar)| {
            let bd = if scalar { vec![] } else { d.clone() };
            (vec![d.clone(), d, bd], ())
        }),
        |b, a, _| {
            let pred = a[0].compare(&a[1], Comparison::Lt);
            let lo = &a[2] * 0.5 - 0.5;
            let hi = &a[2] * 0.5 + 0.5;
            b.select(&pred, &a[0], &a[1]) + a[0].clamp(&lo, &hi) * &a[1]
        },
    );
}

/// Structural ops, each with a tangent rule; `which` picks one.
fn structural(b: &Builder, x: &Op, y: &Op, which: usize) -> Op {
    let d = x.dims().unwrap();
    let r = d.len();
    match which {
        0 => {
            let mut out = vec![2];
            out.extend(&d);
            let map: Vec<i64> = (1..=r as i64).collect();
            x.broadcast_in_dim(&out, &map)
        }
        1 => x.reshape(&[-1]),
        2 => x.transpose(&(0..r as i64).rev().collect::<Vec<_>>()),
        3 => {
            let start: Vec<i64> = d.iter().map(|k| k / 2).collect();
            let strides = vec![2; r];
            x.slice(&start, &d, &strides)
        }
        4 => {
            let cfg: Vec<PadDim> = (0..r)
                .map(|_| PadDim {
                    lo: 1,
                    hi: -1,
                    interior: 1,
                })
                .collect();
            x.pad(
                &y.reshape(&[-1]).slice_in_dim(0, 1, 1, 0).reshape(&[]),
                &cfg,
            )
        }
        5 => x.reverse(&(0..r as i64).collect::<Vec<_>>()),
        6 => b.concatenate(&[x, y, x], 0),
        7 => {
            let one = b.constant(1i32);
            let starts: Vec<&Op> = vec![&one; r];
            let sizes: Vec<i64> = d.iter().map(|k| (k - 1).max(1)).collect();
            x.dynamic_slice(&starts, &sizes)
        }
        8 => {
            let zero = b.constant(0i32);
            let starts: Vec<&Op> = vec![&zero; r];
            let upd = y.slice(&vec![0; r], &vec![1; r], &vec![1; r]);
            x.dynamic_update_slice(&upd.sin(), &starts)
        }
        _ => {
            let idx = b.constant_vec(&[0i32, (d[0] - 1) as i32, 0]);
            x.take(&idx, 0)
        }
    }
}

#[test]
fn jvp_structural_ops() {
    jvp_prop(
        "jvp_structural",
        -2.0,
        2.0,
        1e-6,
        (dims(1..=3, 4), 0usize..10).prop_map(|(d, op)| (vec![d.clone(), d], op)),
        |b, a, op| structural(b, &a[0], &a[1], *op) * structural(b, &a[1], &a[0], *op),
    );
}

#[test]
fn jvp_dot_general() {
    jvp_prop(
        "jvp_dot",
        -2.0,
        2.0,
        1e-6,
        (0usize..3, 1i64..=3, 1i64..=3, 1i64..=3, 1i64..=2).prop_map(|(form, m, k, n, bs)| {
            let shapes = match form {
                0 => vec![vec![m, k], vec![k, n]],
                1 => vec![vec![bs, m, k], vec![k, n, bs]],
                _ => vec![vec![k], vec![k]],
            };
            (shapes, form)
        }),
        |_, a, form| match form {
            0 => a[0].matmul(&a[1]).tanh(),
            1 => a[0].dot_general(
                &a[1],
                &DotDims {
                    lhs_contracting: vec![2],
                    rhs_contracting: vec![0],
                    lhs_batch: vec![0],
                    rhs_batch: vec![2],
                },
            ),
            _ => a[0].dot(&a[1]) * &a[0],
        },
    );
}

#[test]
fn jvp_reduce_sum_max_min_and_sum_pool() {
    jvp_prop(
        "jvp_reduce",
        -2.0,
        2.0,
        1e-6,
        (dims(1..=3, 4), any::<u8>(), 0usize..4).prop_map(|(d, mask, form)| {
            let axes: Vec<i64> = (0..d.len() as i64)
                .filter(|a| mask & (1 << a) != 0)
                .collect();
            (vec![d], (axes, form))
        }),
        |_, a, (axes, form)| {
            let x = a[0].sin() * &a[0] + &a[0] * 0.1;
            if *form == 1 {
                x.reduce_max(axes)
            } else if *form == 2 {
                x.reduce_min(axes)
            } else if *form == 3 {
                let window: Vec<WindowDim> = x
                    .dims()
                    .unwrap()
                    .iter()
                    .map(|k| WindowDim::new((*k).min(2), 1))
                    .collect();
                x.sum_pool(&window)
            } else {
                x.reduce_sum(axes)
            }
        },
    );
}

#[test]
fn jvp_loops_and_conditionals() {
    jvp_prop(
        "jvp_control",
        -1.0,
        1.0,
        1e-6,
        (dims(0..=2, 3), 0usize..5, 1i64..=3).prop_map(|(d, form, t)| {
            let mut xd = vec![t];
            xd.extend(&d);
            (vec![d, xd], form)
        }),
        |b, a, form| {
            let (x, xs) = (&a[0], &a[1]);
            let all: Vec<i64> = (0..x.rank().unwrap() as i64).collect();
            match form {
                0 => {
                    let (c, acc) = b.fori_loop(0, 3, (x.clone(), x.zeros_like()), |i, (c, acc)| {
                        let s = i.convert(ElementType::F64) * 0.25 + 1.0;
                        ((&c * x).sin() * s, &acc + &c.cos())
                    });
                    c + acc
                }
                1 => {
                    let (c, ys) = b.scan(x.clone(), xs.clone(), |c, row| {
                        let next = (&c * &row + x).tanh();
                        (next.clone(), &next * &row)
                    });
                    ys.reduce_sum(&[0]) + c
                }
                2 => {
                    let p = x
                        .reduce_sum(&all)
                        .compare(&b.constant(0f64), Comparison::Gt);
                    b.cond(&p, x.clone(), |v| v.exp() * &v, |v| (&v * &v).sin())
                }
                3 => {
                    // A trip count that depends on the data (constant near the
                    // point); bounded, so that `vjp` (the identity's other side)
                    // can reverse it.
                    b.while_loop_bounded(
                        x.clone(),
                        6,
                        |v| {
                            let size = v.abs().reduce_sum(&all);
                            size.compare(&b.constant(4f64), Comparison::Lt)
                        },
                        |v| &v * 1.5 + &v.sin() * 0.25,
                    )
                }
                _ => {
                    let s = xs.reduce_sum(&(0..xs.rank().unwrap() as i64).collect::<Vec<_>>());
                    let idx = (s.abs() * 2.0).floor().convert(ElementType::S32);
                    b.switch(
                        &idx,
                        x.clone(),
                        Box::new(|v: Op| v.sin()),
                        vec![Box::new(|v: Op| &v * &v), Box::new(|v: Op| v.exp())],
                    )
                }
            }
        },
    );
}

#[test]
fn jvp_convolution_call_barrier_and_second_order() {
    jvp_prop(
        "jvp_conv_second_order",
        -1.0,
        1.0,
        1e-6,
        (0usize..3, 1i64..=2, 3i64..=5, 1i64..=2, 1i64..=2, 1i64..=2).prop_map(
            |(form, n, w, c, kw, o)| {
                let shapes = match form {
                    0 => vec![vec![n, w, c], vec![kw, c, o]],
                    _ => vec![vec![w], vec![w]],
                };
                (shapes, form)
            },
        ),
        |b, a, form| match form {
            0 => a[0]
                .conv_general_dilated(
                    &a[1],
                    &[1],
                    &[(1, 0)],
                    &[1],
                    &[1],
                    &ConvDims::channels_last(1),
                    1,
                )
                .tanh(),
            1 => {
                // Forward over reverse: the tangent of a gradient (a Hessian-vector
                // product), through the scatter-add that `take`'s gradient is.
                let (x, w) = (&a[0], &a[1]);
                let n = x.dims().unwrap()[0] as i32;
                let idx = b.constant_vec(&[0i32, n - 1, n / 2, 0]);
                let loss =
                    (x.take(&idx, 0) * 0.5).sin().reduce_sum(&[0]) + (x * x * w).reduce_sum(&[0]);
                b.grad(&loss, x)
            }
            _ => {
                let (x, w) = (&a[0], &a[1]);
                let called = b.call("inner", &[x], |_, p| vec![p[0].sin() * w]);
                let kept = b.optimization_barrier(&[&called[0], x]);
                &kept[0] * &kept[1]
            }
        },
    );
}

// ---------------------------------------------------------------------------------
// Ops without a rule: an error naming the op and the user's line, no panic.

fn build_error(b: &Builder, out: &Op) -> String {
    match b.build(out) {
        Ok(_) => panic!("the program built; an error was expected"),
        Err(e) => e.to_string(),
    }
}

fn assert_names(err: &str, op: &str, transform: &str, line: u32) {
    assert!(
        err.contains(&format!("no {transform} rule for `{op}`")),
        "the error does not name {transform} of `{op}`: {err}"
    );
    let at = format!("vmap_props.rs:{line}");
    assert!(
        err.contains(&at),
        "the error does not name the line {at}: {err}"
    );
}

#[test]
fn vmap_of_rng_bit_generator_with_batched_state_is_an_error() {
    let b = Builder::new("rng");
    let keys = b.parameter(0, Shape::of::<u64>(&[4, 2]), "keys");
    let mut line = 0;
    let bits = b.vmap(&Vmap::new(), keys, |_, key| {
        line = line!() + 1;
        let (_, bits) = key.rng_bit_generator(BitAlgorithm::ThreeFry, ElementType::U32, &[3]);
        bits
    });
    assert_names(
        &build_error(&b, &bits),
        "rng-bit-generator",
        "batching",
        line,
    );
}

#[test]
fn jvp_of_ops_without_a_tangent_rule_is_an_error() {
    // The forms without a tangent rule (the op table's tangent column): an opaque
    // kernel, and a reduce whose initial value moves.
    let b = Builder::new("jvp_no_rule");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let v = b.parameter(1, Shape::of::<f32>(&[4]), "v");
    let attrs = xlaclient::ops::misc::CustomCallAttrs {
        target: "my_kernel".into(),
        opaque: Vec::new(),
        api_version: 1,
        has_side_effect: false,
    };
    let line = line!() + 1;
    let y = b.custom_call(&attrs, &[&x], Shape::of::<f32>(&[4]));
    let t = b.jvp(&[&y], &[&x], &[&v]).remove(0);
    let err = match b.build(&t) {
        Ok(_) => panic!("the jvp of an opaque kernel built; an error was expected"),
        Err(e) => e.to_string(),
    };
    assert_names(&err, "custom-call", "tangent", line);
}
