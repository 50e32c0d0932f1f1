//! Numeric edge cases on the real plugin, each against an independent reference:
//! plain Rust (wrapping integer arithmetic, `as` casts, IEEE operations), XLA's
//! documented semantics, or values recorded from jax 0.10.2 on CPU
//! (`scripts/record_jax_edge.py`, `tests/data/jax/edge.json`).
//!
//! - integer overflow wraps; division and remainder by zero and of MIN by -1;
//! - float-to-integer `convert` saturates (NaN to 0) and truncates toward zero;
//! - NaN, infinities and signed zeros through element-wise ops and sums;
//! - argmax/argmin ties and NaNs, sort stability, NaNs and signed zeros;
//! - negative padding, zero-size dimensions, rank-0 values.
//!
//! Found on the way: XLA's CPU runtime flushes f32 subnormals to zero, as inputs
//! and as results of arithmetic (`1e-45 * 1 = 0`, `sign(1e-45) = 0`); JAX shows the
//! same, so it is XLA's behaviour, not our lowering.

mod common;
use common::*;

use serde_json::Value;
use xlaclient::ops::slicing::PadDim;
use xlaclient::{Buffer, Builder, Comparison, DotDims, ElementType, Op, Shape};

// ---------------------------------------------------------------------------------
// Values recorded from JAX.

/// One element, as recorded: floats by their bits.
#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    F32(u32),
    F64(u64),
    I(i128),
    B(bool),
}

impl V {
    fn is_nan(self) -> bool {
        match self {
            V::F32(b) => f32::from_bits(b).is_nan(),
            V::F64(b) => f64::from_bits(b).is_nan(),
            _ => false,
        }
    }
}

impl std::fmt::Display for V {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            V::F32(b) => write!(f, "{:?}", f32::from_bits(*b)),
            V::F64(b) => write!(f, "{:?}", f64::from_bits(*b)),
            V::I(i) => write!(f, "{i}"),
            V::B(x) => write!(f, "{x}"),
        }
    }
}

fn element_type(dtype: &str) -> ElementType {
    match dtype {
        "float32" => ElementType::F32,
        "float64" => ElementType::F64,
        "int8" => ElementType::S8,
        "int32" => ElementType::S32,
        "int64" => ElementType::S64,
        "uint8" => ElementType::U8,
        "uint32" => ElementType::U32,
        "uint64" => ElementType::U64,
        "bool" => ElementType::Pred,
        d => panic!("dtype {d}"),
    }
}

struct Arr {
    ty: ElementType,
    dims: Vec<i64>,
    data: Vec<V>,
}

fn arr(a: &Value) -> Arr {
    let ty = element_type(a["dtype"].as_str().unwrap());
    let dims = a["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect();
    let data = a["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| match ty {
            ElementType::F32 => V::F32(x.as_u64().unwrap() as u32),
            ElementType::F64 => V::F64(x.as_u64().unwrap()),
            ElementType::Pred => V::B(x.as_bool().unwrap()),
            _ => V::I(
                x.as_i64()
                    .map(i128::from)
                    .unwrap_or_else(|| x.as_u64().unwrap() as i128),
            ),
        })
        .collect();
    Arr { ty, dims, data }
}

fn upload_arr(a: &Arr) -> Buffer {
    macro_rules! ints {
        ($t:ty) => {
            upload(
                &a.data
                    .iter()
                    .map(|v| match v {
                        V::I(i) => *i as $t,
                        _ => unreachable!(),
                    })
                    .collect::<Vec<$t>>(),
                &a.dims,
            )
        };
    }
    match a.ty {
        ElementType::F32 => upload(
            &a.data
                .iter()
                .map(|v| match v {
                    V::F32(b) => f32::from_bits(*b),
                    _ => unreachable!(),
                })
                .collect::<Vec<_>>(),
            &a.dims,
        ),
        ElementType::F64 => upload(
            &a.data
                .iter()
                .map(|v| match v {
                    V::F64(b) => f64::from_bits(*b),
                    _ => unreachable!(),
                })
                .collect::<Vec<_>>(),
            &a.dims,
        ),
        ElementType::S8 => ints!(i8),
        ElementType::S32 => ints!(i32),
        ElementType::S64 => ints!(i64),
        ElementType::U8 => ints!(u8),
        ElementType::U32 => ints!(u32),
        ElementType::U64 => ints!(u64),
        t => panic!("upload {t}"),
    }
}

fn download(b: &Buffer) -> Vec<V> {
    macro_rules! ints {
        ($t:ty) => {
            b.to_vec::<$t>()
                .unwrap()
                .into_iter()
                .map(|x| V::I(x as i128))
                .collect()
        };
    }
    match b.element_type().unwrap() {
        ElementType::F32 => b
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(|x| V::F32(x.to_bits()))
            .collect(),
        ElementType::F64 => b
            .to_vec::<f64>()
            .unwrap()
            .into_iter()
            .map(|x| V::F64(x.to_bits()))
            .collect(),
        ElementType::Pred => b.to_vec::<bool>().unwrap().into_iter().map(V::B).collect(),
        ElementType::S8 => ints!(i8),
        ElementType::S32 => ints!(i32),
        ElementType::S64 => ints!(i64),
        ElementType::U8 => ints!(u8),
        ElementType::U32 => ints!(u32),
        ElementType::U64 => ints!(u64),
        t => panic!("download {t}"),
    }
}

/// Distance in units in the last place between two finite f32 values of one sign.
fn ulps(a: u32, b: u32) -> u32 {
    let (x, y) = (f32::from_bits(a), f32::from_bits(b));
    if x.is_sign_negative() != y.is_sign_negative() {
        return if x == y { 0 } else { u32::MAX };
    }
    a.abs_diff(b)
}

/// Our op for a recorded case, by its name.
fn our_op(name: &str, b: &Builder, x: &[Op]) -> Op {
    let ty = |s: &str| element_type(s);
    if let Some(t) = name.strip_prefix("convert_f32_") {
        return x[0].convert(ty(t));
    }
    if let Some(t) = name.strip_prefix("convert_f64_") {
        return x[0].convert(ty(t));
    }
    if name == "convert_int32_bool" {
        return x[0].convert(ElementType::Pred);
    }
    if name.starts_with("div_") || name == "binary_div" {
        return &x[0] / &x[1];
    }
    if name.starts_with("rem_") || name == "binary_rem" {
        return x[0].rem(&x[1]);
    }
    match name {
        "unary_exp" => x[0].exp(),
        "unary_log" => x[0].log(),
        "unary_sqrt" => x[0].sqrt(),
        "unary_sign" => x[0].sign(),
        "unary_abs" => x[0].abs(),
        "unary_neg" => -&x[0],
        "unary_log1p" => x[0].log1p(),
        "unary_expm1" => x[0].expm1(),
        "unary_tanh" => x[0].tanh(),
        "unary_floor" => x[0].floor(),
        "unary_ceil" => x[0].ceil(),
        "binary_pow" => x[0].pow(&x[1]),
        "binary_atan2" => x[0].atan2(&x[1]),
        "binary_mul" | "ftz_mul" => &x[0] * &x[1],
        "binary_add" => &x[0] + &x[1],
        "binary_sub" => &x[0] - &x[1],
        "reduce_sum" => x[0].reduce_sum(&[1]),
        "argmax_f32" | "argmax_int32" => x[0].argmax(1),
        "argmin_f32" | "argmin_int32" => x[0].argmin(1),
        "sort_keys" => x[0].sort_ascending(0),
        "sort_payload" => {
            b.sort(&[&x[0], &x[1]], 0, true, |l, r| nan_last_less(&l[0], &r[0]))[1].clone()
        }
        n => panic!("no op for case {n}"),
    }
}

/// `l < r` with NaNs after every number (JAX's sort order; -0.0 equals 0.0).
fn nan_last_less(l: &Op, r: &Op) -> Op {
    let b = l.builder();
    let lt = l.compare(r, Comparison::Lt);
    let r_nan = r.compare(r, Comparison::Ne);
    let l_num = l.compare(l, Comparison::Eq);
    b.select(&r_nan, &l_num, &lt)
}

/// Ops whose results are not exactly specified (transcendental functions): how many
/// f32 ulps from JAX's value are accepted on ordinary (finite, nonzero) results.
fn tolerance(name: &str) -> u32 {
    match name {
        "unary_exp" | "unary_log" | "unary_log1p" | "unary_expm1" | "unary_tanh" | "binary_pow"
        | "binary_atan2" => 2,
        _ => 0,
    }
}

#[test]
fn edge_cases_agree_with_jax() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jax/edge.json");
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(rec["jax_version"], "0.10.2");
    let cases = rec["cases"].as_object().unwrap();
    assert!(cases.len() >= 45, "{} cases", cases.len());
    let mut disagreements = Vec::new();
    let mut compared = 0;
    for (name, c) in cases {
        let inputs: Vec<Arr> = c["inputs"].as_array().unwrap().iter().map(arr).collect();
        let want = arr(&c["output"]);
        let b = Builder::new(name);
        let params: Vec<Op> = inputs
            .iter()
            .enumerate()
            .map(|(i, a)| b.parameter(i, Shape::array(a.ty, &a.dims), &format!("x{i}")))
            .collect();
        let out = our_op(name, &b, &params);
        let m = b.build(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        let bufs: Vec<Buffer> = inputs.iter().map(upload_arr).collect();
        let o = run(&m, &bufs.iter().collect::<Vec<_>>());
        assert_eq!(
            o[0].element_type().unwrap(),
            want.ty,
            "{name}: element type"
        );
        assert_eq!(o[0].dims().unwrap(), want.dims, "{name}: dims");
        let got = download(&o[0]);
        assert_eq!(got.len(), want.data.len(), "{name}: length");
        compared += got.len();
        let tol = tolerance(name);
        for (i, (g, w)) in got.iter().zip(&want.data).enumerate() {
            let ok = g == w
                || g.is_nan() && w.is_nan()
                || matches!((g, w), (V::F32(a), V::F32(b)) if ulps(*a, *b) <= tol);
            if !ok {
                let args: Vec<String> = inputs.iter().map(|a| a.data[i].to_string()).collect();
                disagreements.push(format!("{name}({}): ours {g}, jax {w}", args.join(", ")));
            }
        }
    }
    eprintln!("{compared} elements compared with JAX");
    assert!(compared > 1400, "{compared}");
    assert!(
        disagreements.is_empty(),
        "{} disagreements with JAX:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

// ---------------------------------------------------------------------------------
// Integers: wrapping, division by zero, MIN / -1.

/// `x op y` for each pair, on the plugin.
fn binary_on_plugin<T: xlaclient::NativeType>(xs: &[T], ys: &[T], f: fn(&Op, &Op) -> Op) -> Vec<T> {
    let n = xs.len() as i64;
    let b = Builder::new("bin");
    let x = b.parameter(0, Shape::of::<T>(&[n]), "x");
    let y = b.parameter(1, Shape::of::<T>(&[n]), "y");
    let m = b.build(&f(&x, &y)).unwrap();
    run1::<T>(&m, &[&upload(xs, &[n]), &upload(ys, &[n])])
}

/// Every pair of `vals`, as two columns.
fn pairs<T: Copy>(vals: &[T]) -> (Vec<T>, Vec<T>) {
    let xs = vals
        .iter()
        .flat_map(|a| vals.iter().map(move |_| *a))
        .collect();
    let ys = vals.iter().flat_map(|_| vals.iter().copied()).collect();
    (xs, ys)
}

macro_rules! integer_edges {
    ($t:ty, $vals:expr) => {{
        let vals: Vec<$t> = $vals;
        let (xs, ys) = pairs(&vals);
        let check = |what: &str, got: Vec<$t>, f: fn($t, $t) -> $t| {
            for ((g, x), y) in got.iter().zip(&xs).zip(&ys) {
                assert_eq!(*g, f(*x, *y), "{} {what}({x}, {y})", stringify!($t));
            }
        };
        // Two's complement wrapping (XLA: integer arithmetic is modular).
        check(
            "add",
            binary_on_plugin(&xs, &ys, |a, b| a + b),
            <$t>::wrapping_add,
        );
        check(
            "subtract",
            binary_on_plugin(&xs, &ys, |a, b| a - b),
            <$t>::wrapping_sub,
        );
        check(
            "multiply",
            binary_on_plugin(&xs, &ys, |a, b| a * b),
            <$t>::wrapping_mul,
        );
        // XLA's CPU emitter (and JAX, recorded in edge.json): x / 0 has every bit set
        // (-1, or MAX unsigned), x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0; otherwise
        // truncation toward zero, the remainder taking the dividend's sign.
        check(
            "divide",
            binary_on_plugin(&xs, &ys, |a, b| a / b),
            |x, y| {
                if y == 0 { !0 } else { x.wrapping_div(y) }
            },
        );
        check(
            "remainder",
            binary_on_plugin(&xs, &ys, |a, b| a.rem(b)),
            |x, y| {
                if y == 0 { x } else { x.wrapping_rem(y) }
            },
        );
    }};
}

#[test]
fn integer_arithmetic_wraps_and_division_by_zero_is_defined() {
    integer_edges!(
        i8,
        vec![i8::MIN, i8::MIN + 1, -7, -1, 0, 1, 2, 7, 100, i8::MAX]
    );
    integer_edges!(i16, vec![i16::MIN, -300, -1, 0, 1, 3, 255, i16::MAX]);
    integer_edges!(
        i32,
        vec![i32::MIN, -65536, -7, -1, 0, 1, 2, 65536, i32::MAX]
    );
    integer_edges!(
        i64,
        vec![i64::MIN, -(1 << 40), -1, 0, 1, 3, 1 << 33, i64::MAX]
    );
    integer_edges!(u8, vec![0, 1, 2, 5, 10, 128, 200, 255]);
    integer_edges!(u16, vec![0, 1, 7, 256, 40000, u16::MAX]);
    integer_edges!(u32, vec![0, 1, 3, 1 << 31, u32::MAX - 1, u32::MAX]);
    integer_edges!(u64, vec![0, 1, 5, 1 << 63, u64::MAX]);
}

#[test]
fn negating_min_wraps_to_min() {
    let b = Builder::new("neg");
    let x8 = b.parameter(0, Shape::of::<i8>(&[4]), "x8");
    let x32 = b.parameter(1, Shape::of::<i32>(&[3]), "x32");
    let x64 = b.parameter(2, Shape::of::<i64>(&[3]), "x64");
    let m = b.build_tuple(&[&-&x8, &-&x32, &-&x64, &x8.abs()]).unwrap();
    let v8 = [i8::MIN, -1, 0, i8::MAX];
    let v32 = [i32::MIN, 5, i32::MAX];
    let v64 = [i64::MIN, -5, i64::MAX];
    let o = run(
        &m,
        &[&upload(&v8, &[4]), &upload(&v32, &[3]), &upload(&v64, &[3])],
    );
    let n8: Vec<i8> = v8.iter().map(|v| v.wrapping_neg()).collect();
    assert_eq!(o[0].to_vec::<i8>().unwrap(), n8);
    assert_eq!(n8[0], i8::MIN);
    let n32: Vec<i32> = v32.iter().map(|v| v.wrapping_neg()).collect();
    assert_eq!(o[1].to_vec::<i32>().unwrap(), n32);
    let n64: Vec<i64> = v64.iter().map(|v| v.wrapping_neg()).collect();
    assert_eq!(o[2].to_vec::<i64>().unwrap(), n64);
    // |MIN| wraps to MIN as well.
    let a8: Vec<i8> = v8.iter().map(|v| v.wrapping_abs()).collect();
    assert_eq!(o[3].to_vec::<i8>().unwrap(), a8);
}

// ---------------------------------------------------------------------------------
// Float to integer conversion: saturating, NaN to 0, toward zero (Rust's `as`).

#[test]
fn float_to_integer_convert_saturates_like_rust_as() {
    let xs: Vec<f32> = vec![
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.5,
        0.5,
        -1.5,
        1.5,
        -0.0,
        2.5,
        -2.5,
        127.5,
        128.0,
        -128.5,
        -129.0,
        255.5,
        256.0,
        -1.0,
        32767.9,
        65535.5,
        65536.0,
        2147483520.0,
        2147483648.0,
        -2147483904.0,
        4294967040.0,
        4294967296.0,
        9.2e18,
        9.3e18,
        -9.3e18,
        1.8e19,
        1.9e19,
        1e30,
        -1e30,
        1e-30,
        f32::MAX,
        f32::MIN,
    ];
    let xd: Vec<f64> = xs
        .iter()
        .map(|v| *v as f64)
        .chain([
            9223372036854774784.0,
            9223372036854775808.0,
            18446744073709549568.0,
            1e300,
        ])
        .collect();
    let b = Builder::new("f2i");
    let x = b.parameter(0, Shape::of::<f32>(&[xs.len() as i64]), "x");
    let d = b.parameter(1, Shape::of::<f64>(&[xd.len() as i64]), "d");
    use ElementType::*;
    let tys = [S8, S16, S32, S64, U8, U16, U32, U64];
    let mut outs: Vec<Op> = tys.iter().map(|t| x.convert(*t)).collect();
    outs.extend(tys.iter().map(|t| d.convert(*t)));
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let o = run(
        &m,
        &[
            &upload(&xs, &[xs.len() as i64]),
            &upload(&xd, &[xd.len() as i64]),
        ],
    );
    macro_rules! check {
        ($i:expr, $t:ty) => {{
            let got: Vec<$t> = o[$i].to_vec().unwrap();
            let want: Vec<$t> = xs.iter().map(|v| *v as $t).collect();
            assert_eq!(got, want, "f32 -> {}", stringify!($t));
            let got: Vec<$t> = o[$i + 8].to_vec().unwrap();
            let want: Vec<$t> = xd.iter().map(|v| *v as $t).collect();
            assert_eq!(got, want, "f64 -> {}", stringify!($t));
        }};
    }
    check!(0, i8);
    check!(1, i16);
    check!(2, i32);
    check!(3, i64);
    check!(4, u8);
    check!(5, u16);
    check!(6, u32);
    check!(7, u64);
    // The reference itself: NaN -> 0, saturation, truncation toward zero.
    let nan = xs[0];
    assert_eq!((nan as i32, xs[3] as u8, xs[6] as i8), (0, 0, -1));
    assert_eq!((xs[12] as i8, xs[4] as u32), (127, 0));
}

// ---------------------------------------------------------------------------------
// Signed zeros, NaN and infinities.

/// XLA's sign: NaN stays NaN, ±0 stays ±0 (Rust's `signum(-0.0)` is -1).
fn xla_sign(x: f32) -> f32 {
    if x == 0.0 || x.is_nan() {
        x
    } else {
        x.signum()
    }
}

#[test]
fn signed_zeros_and_specials_follow_ieee() {
    let xs: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        4.0,
    ];
    let ys: Vec<f32> = vec![-0.0, -0.0, -0.0, 0.0, 0.0, -3.0, 1.0, -0.0];
    let n = xs.len() as i64;
    let b = Builder::new("zeros");
    let x = b.parameter(0, Shape::of::<f32>(&[n]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[n]), "y");
    let outs = [-&x, x.abs(), x.sign(), &x * &y, x.sqrt(), &x + &y, &x - &x];
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let o = run(&m, &[&upload(&xs, &[n]), &upload(&ys, &[n])]);
    type Ref = (&'static str, fn(f32, f32) -> f32);
    let refs: [Ref; 7] = [
        ("negate", |x, _| -x),
        ("abs", |x, _| x.abs()),
        ("sign", |x, _| xla_sign(x)),
        ("multiply", |x, y| x * y),
        ("sqrt", |x, _| x.sqrt()),
        ("add", |x, y| x + y),
        ("x - x", |x, _| x - x),
    ];
    for ((name, r), buf) in refs.iter().zip(&o) {
        let got: Vec<f32> = buf.to_vec().unwrap();
        for ((g, x), y) in got.iter().zip(&xs).zip(&ys) {
            let w = r(*x, *y);
            assert!(
                g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(),
                "{name}({x:?}, {y:?}): got {g:?}, want {w:?}"
            );
        }
    }
    // The signs themselves: -0 * 5 = -0, sqrt(-0) = -0, |-0| = +0, -(+0) = -0.
    let mul: Vec<f32> = o[3].to_vec().unwrap();
    assert!(mul[0].is_sign_negative() && mul[1].is_sign_positive());
    let sq: Vec<f32> = o[4].to_vec().unwrap();
    assert!(sq[1] == 0.0 && sq[1].is_sign_negative());
}

#[test]
fn sums_of_infinities() {
    let rows: Vec<[f32; 3]> = vec![
        [f32::INFINITY, f32::NEG_INFINITY, 1.0],
        [f32::INFINITY, 1.0, 2.0],
        [f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0],
        [f32::INFINITY, f32::INFINITY, f32::MAX],
        [f32::MAX, f32::MAX, 0.0],
        [f32::NAN, 1.0, 2.0],
    ];
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    let b = Builder::new("sums");
    let x = b.parameter(0, Shape::of::<f32>(&[rows.len() as i64, 3]), "x");
    let m = b
        .build_tuple(&[
            &x.reduce_sum(&[1]),
            &x.reduce_max(&[1]),
            &x.reduce_min(&[1]),
        ])
        .unwrap();
    let o = run(&m, &[&upload(&flat, &[rows.len() as i64, 3])]);
    let sum: Vec<f32> = o[0].to_vec().unwrap();
    for (r, g) in rows.iter().zip(&sum) {
        let w: f32 = r.iter().sum();
        assert!(
            g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(),
            "sum {r:?}: {g} vs {w}"
        );
    }
    assert!(sum[0].is_nan() && sum[1] == f32::INFINITY && sum[2] == f32::NEG_INFINITY);
    assert_eq!(sum[4], f32::INFINITY, "MAX + MAX overflows");
    // max/min propagate NaN (the default compile options, as JAX).
    let mx: Vec<f32> = o[1].to_vec().unwrap();
    let mn: Vec<f32> = o[2].to_vec().unwrap();
    assert!(mx[5].is_nan() && mn[5].is_nan());
    assert_eq!((mx[0], mn[0]), (f32::INFINITY, f32::NEG_INFINITY));
}

// ---------------------------------------------------------------------------------
// argmax / argmin and sort.

/// `jnp.argmax` by definition: the first NaN if there is one, else the first of the
/// largest (`better(a, b)`: a beats b).
fn arg_best(row: &[f32], better: fn(f32, f32) -> bool) -> i32 {
    if let Some(i) = row.iter().position(|v| v.is_nan()) {
        return i as i32;
    }
    let mut best = 0;
    for (i, v) in row.iter().enumerate() {
        if better(*v, row[best]) {
            best = i;
        }
    }
    best as i32
}

#[test]
fn argmax_and_argmin_take_the_first_tie_and_the_first_nan() {
    // Few distinct values, so ties are everywhere; both axes.
    let vals = [0.0f32, -0.0, 1.0, 2.0, f32::NAN, f32::NEG_INFINITY];
    let mut rng = Rng(17);
    let (r, c) = (12usize, 7usize);
    let data: Vec<f32> = (0..r * c)
        .map(|_| vals[rng.next_u64() as usize % vals.len()])
        .collect();
    let b = Builder::new("argbest");
    let x = b.parameter(0, Shape::of::<f32>(&[r as i64, c as i64]), "x");
    let m = b
        .build_tuple(&[&x.argmax(1), &x.argmin(1), &x.argmax(0), &x.argmin(0)])
        .unwrap();
    let o = run(&m, &[&upload(&data, &[r as i64, c as i64])]);
    let rows: Vec<Vec<f32>> = (0..r).map(|i| data[i * c..(i + 1) * c].to_vec()).collect();
    let cols: Vec<Vec<f32>> = (0..c)
        .map(|j| (0..r).map(|i| data[i * c + j]).collect())
        .collect();
    let gt = |a: f32, b: f32| a > b;
    let lt = |a: f32, b: f32| a < b;
    let want = [
        rows.iter().map(|v| arg_best(v, gt)).collect::<Vec<_>>(),
        rows.iter().map(|v| arg_best(v, lt)).collect(),
        cols.iter().map(|v| arg_best(v, gt)).collect(),
        cols.iter().map(|v| arg_best(v, lt)).collect(),
    ];
    for (k, w) in want.iter().enumerate() {
        assert_eq!(&o[k].to_vec::<i32>().unwrap(), w, "output {k}");
    }
}

/// JAX's sort order for floats: numbers ascending with -0.0 == 0.0, NaNs last.
fn key_cmp(a: &f32, b: &f32) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => a.partial_cmp(b).unwrap(),
    }
}

#[test]
fn sort_is_stable_with_equal_keys() {
    let vals = [0.0f32, -0.0, 1.0, -1.0, f32::NAN, f32::INFINITY];
    let mut rng = Rng(23);
    let n = 64usize;
    let keys: Vec<f32> = (0..n)
        .map(|_| vals[rng.next_u64() as usize % vals.len()])
        .collect();
    let ikeys: Vec<i32> = (0..n).map(|_| (rng.next_u64() % 4) as i32 - 2).collect();
    let b = Builder::new("stable");
    let k = b.parameter(0, Shape::of::<f32>(&[n as i64]), "k");
    let ik = b.parameter(1, Shape::of::<i32>(&[n as i64]), "ik");
    let idx = b.iota(ElementType::S32, &[n as i64], 0);
    let by_float = b.sort(&[&k, &idx], 0, true, |l, r| nan_last_less(&l[0], &r[0]));
    let by_int = b.sort(&[&ik, &idx], 0, true, |l, r| {
        l[0].compare(&r[0], Comparison::Lt)
    });
    let m = b
        .build_tuple(&[&by_float[0], &by_float[1], &by_int[1], &k.sort_ascending(0)])
        .unwrap();
    let o = run(
        &m,
        &[&upload(&keys, &[n as i64]), &upload(&ikeys, &[n as i64])],
    );
    // Rust's sort_by is stable: equal keys keep their order.
    let mut perm: Vec<usize> = (0..n).collect();
    perm.sort_by(|a, b| key_cmp(&keys[*a], &keys[*b]));
    let want_keys: Vec<u32> = perm.iter().map(|i| keys[*i].to_bits()).collect();
    let bits = |v: Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let nan_free = |v: Vec<u32>| {
        v.into_iter()
            .map(|b| {
                if f32::from_bits(b).is_nan() {
                    f32::NAN.to_bits()
                } else {
                    b
                }
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        nan_free(bits(o[0].to_vec().unwrap())),
        nan_free(want_keys.clone())
    );
    let want_perm: Vec<i32> = perm.iter().map(|i| *i as i32).collect();
    assert_eq!(o[1].to_vec::<i32>().unwrap(), want_perm, "float keys");
    let mut iperm: Vec<usize> = (0..n).collect();
    iperm.sort_by_key(|i| ikeys[*i]);
    let want_iperm: Vec<i32> = iperm.iter().map(|i| *i as i32).collect();
    assert_eq!(o[2].to_vec::<i32>().unwrap(), want_iperm, "int keys");
    // sort_ascending is the same stable order (-0.0 and 0.0 keep their places).
    assert_eq!(nan_free(bits(o[3].to_vec().unwrap())), nan_free(want_keys));
}

// ---------------------------------------------------------------------------------
// Negative padding, zero-size dimensions, rank-0 values.

/// XLA's pad by its definition: output index `o` along an axis comes from input
/// index `(o - lo) / (interior + 1)` when that divides exactly and is in range.
fn pad_ref(x: &[f32], dims: &[i64], cfg: &[PadDim], value: f32) -> (Vec<f32>, Vec<i64>) {
    let out_dims: Vec<i64> = dims
        .iter()
        .zip(cfg)
        .map(|(d, p)| p.lo + p.hi + d + (d - 1).max(0) * p.interior)
        .collect();
    let out = (0..count(&out_dims) as i64)
        .map(|flat| {
            let oi = unravel(flat, &out_dims);
            let mut ii = Vec::new();
            for ((o, d), p) in oi.iter().zip(dims).zip(cfg) {
                let pos = o - p.lo;
                let step = p.interior + 1;
                if pos < 0 || pos % step != 0 || pos / step >= *d {
                    return value;
                }
                ii.push(pos / step);
            }
            x[ravel(&ii, dims)]
        })
        .collect();
    (out, out_dims)
}

#[test]
fn negative_padding_crops() {
    let dims = [3i64, 4];
    let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let p = |lo, hi, interior| PadDim { lo, hi, interior };
    let configs = [
        vec![p(-1, 1, 0), p(1, -1, 0)],
        vec![p(-2, -1, 1), p(0, 0, 2)],
        vec![p(-1, -1, 0), p(-2, -2, 0)], // crops the 4 columns away: [1, 0]
        vec![p(0, 0, 0), p(-3, 2, 1)],    // cuts into the interior padding
    ];
    let b = Builder::new("pad");
    let xp = b.parameter(0, Shape::of::<f32>(&dims), "x");
    let v = b.constant(-7.0f32);
    let outs: Vec<Op> = configs.iter().map(|c| xp.pad(&v, c)).collect();
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let o = run(&m, &[&upload(&x, &dims)]);
    for (c, buf) in configs.iter().zip(&o) {
        let (want, wd) = pad_ref(&x, &dims, c, -7.0);
        assert_eq!(fetch::<f32>(buf, &wd, "pad"), want, "{c:?}");
    }
    assert_eq!(o[2].dims().unwrap(), vec![1, 0]);
}

#[test]
fn zero_size_dimensions() {
    let b = Builder::new("empty");
    let e = b.parameter(0, Shape::of::<f32>(&[0, 3]), "e");
    let ei = b.parameter(1, Shape::of::<i32>(&[0, 3]), "ei");
    let x = b.parameter(2, Shape::of::<f32>(&[2, 3]), "x");
    let w0 = b.parameter(3, Shape::of::<f32>(&[2, 0]), "w0");
    let z0 = b.parameter(4, Shape::of::<f32>(&[0, 4]), "z0");
    let outs = [
        e.reduce_sum(&[0]),                 // 0: [0, 0, 0]
        e.reduce_max(&[0]),                 // 1: -inf
        e.reduce_min(&[0]),                 // 2: +inf
        ei.reduce_max(&[0]),                // 3: i32::MIN
        ei.reduce_sum(&[0, 1]),             // 4: 0
        b.concatenate(&[&x, &e], 0),        // 5: x
        b.concatenate(&[&e, &e], 0),        // 6: [0, 3]
        x.slice(&[1, 1], &[1, 3], &[1, 1]), // 7: [0, 2]
        w0.matmul(&z0),                     // 8: zeros [2, 4]
        w0.convert(ElementType::S32)
            .dot_general(&z0.convert(ElementType::S32), &DotDims::contract(1, 0)), // 9
        e.mean(&[0], false),                // 10: 0 / 0 = NaN
        e.transpose(&[1, 0]).reshape(&[3, 0, 5]), // 11
    ];
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let xs = [1f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let empty: [f32; 0] = [];
    let o = run(
        &m,
        &[
            &upload(&empty, &[0, 3]),
            &upload(&[0i32; 0], &[0, 3]),
            &upload(&xs, &[2, 3]),
            &upload(&empty, &[2, 0]),
            &upload(&empty, &[0, 4]),
        ],
    );
    assert_eq!(fetch::<f32>(&o[0], &[3], "sum"), vec![0.0; 3]);
    assert_eq!(fetch::<f32>(&o[1], &[3], "max"), vec![f32::NEG_INFINITY; 3]);
    assert_eq!(fetch::<f32>(&o[2], &[3], "min"), vec![f32::INFINITY; 3]);
    assert_eq!(fetch::<i32>(&o[3], &[3], "int max"), vec![i32::MIN; 3]);
    assert_eq!(fetch::<i32>(&o[4], &[], "int sum"), vec![0]);
    assert_eq!(fetch::<f32>(&o[5], &[2, 3], "concat"), xs.to_vec());
    assert!(fetch::<f32>(&o[6], &[0, 3], "concat empty").is_empty());
    assert!(fetch::<f32>(&o[7], &[0, 2], "slice").is_empty());
    assert_eq!(fetch::<f32>(&o[8], &[2, 4], "dot k=0"), vec![0.0; 8]);
    assert_eq!(fetch::<i32>(&o[9], &[2, 4], "s32 dot k=0"), vec![0; 8]);
    assert!(
        fetch::<f32>(&o[10], &[3], "mean")
            .iter()
            .all(|v| v.is_nan())
    );
    assert!(fetch::<f32>(&o[11], &[3, 0, 5], "reshape").is_empty());
}

#[test]
fn rank_zero_values() {
    let b = Builder::new("scalars");
    let s = b.parameter(0, Shape::of::<f32>(&[]), "s");
    let t = b.parameter(1, Shape::of::<f32>(&[]), "t");
    let outs = [
        s.broadcast(&[2, 3]),                   // 0
        s.broadcast_in_dim(&[4], &[]),          // 1
        s.reshape(&[1, 1, 1]),                  // 2
        s.reshape(&[1, 1]).reshape(&[]),        // 3
        s.reduce_sum(&[]),                      // 4: no axes: the value itself
        s.reshape(&[1]).reduce_max(&[0]),       // 5
        s.dot_general(&t, &DotDims::default()), // 6: a product
        s.transpose(&[]),                       // 7
        &s * &t + 1.0,                          // 8
    ];
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let (sv, tv) = (-2.5f32, 4.0f32);
    let o = run(&m, &[&upload(&[sv], &[]), &upload(&[tv], &[])]);
    assert_eq!(fetch::<f32>(&o[0], &[2, 3], "broadcast"), vec![sv; 6]);
    assert_eq!(fetch::<f32>(&o[1], &[4], "broadcast_in_dim"), vec![sv; 4]);
    assert_eq!(fetch::<f32>(&o[2], &[1, 1, 1], "reshape up"), vec![sv]);
    assert_eq!(fetch::<f32>(&o[3], &[], "reshape down"), vec![sv]);
    assert_eq!(fetch::<f32>(&o[4], &[], "reduce no axes"), vec![sv]);
    assert_eq!(fetch::<f32>(&o[5], &[], "reduce [1]"), vec![sv]);
    assert_eq!(fetch::<f32>(&o[6], &[], "scalar dot"), vec![sv * tv]);
    assert_eq!(fetch::<f32>(&o[7], &[], "transpose"), vec![sv]);
    assert_eq!(o[8].to_scalar::<f32>().unwrap(), sv * tv + 1.0);
}
