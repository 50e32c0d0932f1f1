//! Shape ops on the real plugin (broadcast_in_dim, broadcast, broadcast_to, reshape,
//! transpose, t, convert, tuples) against index-arithmetic references, and shape
//! errors reported by `build` with the op, the shapes and the caller's line.

mod common;
use common::*;

use xlaclient::{Builder, DotDims, ElementType, Error, Op, Shape};

/// XLA BroadcastInDim semantics (with size-1 operand axes stretching).
fn broadcast_in_dim_ref(x: &[f32], in_dims: &[i64], out_dims: &[i64], bdims: &[i64]) -> Vec<f32> {
    (0..count(out_dims) as i64)
        .map(|flat| {
            let oi = unravel(flat, out_dims);
            let ii: Vec<i64> = in_dims
                .iter()
                .zip(bdims)
                .map(|(d, b)| if *d == 1 { 0 } else { oi[*b as usize] })
                .collect();
            x[ravel(&ii, in_dims)]
        })
        .collect()
}

/// Output axis `i` is input axis `perm[i]`.
fn transpose_ref(x: &[f32], dims: &[i64], perm: &[usize]) -> (Vec<f32>, Vec<i64>) {
    let out_dims: Vec<i64> = perm.iter().map(|p| dims[*p]).collect();
    let data = (0..count(&out_dims) as i64)
        .map(|flat| {
            let oi = unravel(flat, &out_dims);
            let mut ii = vec![0; dims.len()];
            for (o, p) in perm.iter().enumerate() {
                ii[*p] = oi[o];
            }
            x[ravel(&ii, dims)]
        })
        .collect();
    (data, out_dims)
}

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 + 1.0).collect()
}

#[test]
fn broadcast_in_dim_broadcast_and_broadcast_to() {
    // (input dims, output dims, broadcast dimensions); values are distinct so a wrong
    // mapping of axes shows.
    let cases: [(&[i64], &[i64], &[i64]); 7] = [
        (&[3], &[2, 3], &[1]),
        (&[2], &[2, 3], &[0]),
        (&[2, 1], &[2, 4], &[0, 1]),       // size-1 axis stretches
        (&[1, 3], &[4, 2, 3], &[0, 2]),    // stretches and inserts
        (&[2, 3], &[2, 4, 3], &[0, 2]),    // inserts a middle axis
        (&[], &[2, 2], &[]),               // scalar
        (&[3, 2], &[3, 5, 2, 1], &[0, 2]), // inserted axes of size 5 and 1
    ];
    let b = Builder::new("bcast");
    let mut outs = Vec::new();
    let mut refs = Vec::new();
    let mut args = Vec::new();
    let mut p = 0;
    for (id, od, bd) in cases.iter() {
        let x = b.parameter(p, Shape::of::<f32>(id), "x");
        p += 1;
        let y = x.broadcast_in_dim(od, bd);
        assert_eq!(
            y.dims().unwrap(),
            od.to_vec(),
            "{id:?} -> {od:?} via {bd:?}"
        );
        let data = iota(count(id));
        refs.push((broadcast_in_dim_ref(&data, id, od, bd), od.to_vec()));
        args.push(upload(&data, id));
        outs.push(y);
    }
    // broadcast(prefix): new major axes.
    let x = b.parameter(p, Shape::of::<f32>(&[2, 3]), "x");
    let data = iota(6);
    let y = x.broadcast(&[4]);
    assert_eq!(y.dims().unwrap(), vec![4, 2, 3]);
    refs.push((
        broadcast_in_dim_ref(&data, &[2, 3], &[4, 2, 3], &[1, 2]),
        vec![4, 2, 3],
    ));
    outs.push(y);
    let y = x.broadcast(&[2, 1]);
    assert_eq!(y.dims().unwrap(), vec![2, 1, 2, 3]);
    refs.push((
        broadcast_in_dim_ref(&data, &[2, 3], &[2, 1, 2, 3], &[2, 3]),
        vec![2, 1, 2, 3],
    ));
    outs.push(y);
    args.push(upload(&data, &[2, 3]));
    // broadcast_to: numpy alignment at the right, size-1 axes stretch.
    let z = b.parameter(p + 1, Shape::of::<f32>(&[3, 1]), "z");
    let zdata = iota(3);
    let y = z.broadcast_to(&[2, 3, 4]);
    assert_eq!(y.dims().unwrap(), vec![2, 3, 4]);
    refs.push((
        broadcast_in_dim_ref(&zdata, &[3, 1], &[2, 3, 4], &[1, 2]),
        vec![2, 3, 4],
    ));
    outs.push(y);
    args.push(upload(&zdata, &[3, 1]));

    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &args.iter().collect::<Vec<_>>());
    assert_eq!(res.len(), refs.len());
    for (i, ((want, dims), buf)) in refs.iter().zip(&res).enumerate() {
        assert_eq!(&fetch::<f32>(buf, dims, "broadcast"), want, "output {i}");
    }
    // Spot check of the reference itself: [2,1] -> [2,4] repeats each row value.
    assert_eq!(
        broadcast_in_dim_ref(&[1.0, 2.0], &[2, 1], &[2, 4], &[0, 1]),
        [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]
    );
}

#[test]
fn reshape_keeps_row_major_order() {
    let data = iota(24);
    let b = Builder::new("reshape");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3, 4]), "x");
    let targets: [(&[i64], &[i64]); 6] = [
        (&[6, 4], &[6, 4]),
        (&[4, -1], &[4, 6]),
        (&[-1], &[24]),
        (&[2, -1, 3], &[2, 4, 3]),
        (&[1, 24, 1], &[1, 24, 1]),
        (&[4, 3, 2], &[4, 3, 2]),
    ];
    let mut outs: Vec<Op> = targets
        .iter()
        .map(|(t, want)| {
            let y = x.reshape(t);
            assert_eq!(y.dims().unwrap(), want.to_vec(), "reshape to {t:?}");
            y
        })
        .collect();
    // To and from a scalar.
    let s = b.parameter(1, Shape::of::<f32>(&[1, 1]), "s");
    let sc = s.reshape(&[]);
    assert_eq!(sc.dims().unwrap(), Vec::<i64>::new());
    outs.push(sc.reshape(&[1, 1, 1]));
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(
        &module,
        &[&upload(&data, &[2, 3, 4]), &upload(&[7.5f32], &[1, 1])],
    );
    for ((_, want), buf) in targets.iter().zip(&res) {
        assert_eq!(fetch::<f32>(buf, want, "reshape"), data);
    }
    assert_eq!(fetch::<f32>(&res[6], &[1, 1, 1], "scalar reshape"), [7.5]);
}

#[test]
fn transpose_rank3_and_t() {
    let dims = [2i64, 3, 4];
    let data = iota(24);
    let b = Builder::new("transpose");
    let x = b.parameter(0, Shape::of::<f32>(&dims), "x");
    let m = b.parameter(1, Shape::of::<f32>(&[2, 5]), "m");
    // (perm as given, perm resolved)
    let perms: [(&[i64], [usize; 3]); 5] = [
        (&[2, 0, 1], [2, 0, 1]),
        (&[1, 2, 0], [1, 2, 0]),
        (&[2, 1, 0], [2, 1, 0]),
        (&[-1, 0, -2], [2, 0, 1]),
        (&[0, 1, 2], [0, 1, 2]),
    ];
    let mut outs = Vec::new();
    let mut refs = Vec::new();
    for (p, resolved) in &perms {
        let y = x.transpose(p);
        let (want, want_dims) = transpose_ref(&data, &dims, resolved);
        assert_eq!(y.dims().unwrap(), want_dims, "transpose {p:?}");
        outs.push(y);
        refs.push((want, want_dims));
    }
    // t(): swaps the last two axes, batched and plain.
    let y = x.t();
    refs.push(transpose_ref(&data, &dims, &[0, 2, 1]));
    assert_eq!(y.dims().unwrap(), vec![2, 4, 3]);
    outs.push(y);
    let mdata = iota(10);
    let y = m.t();
    refs.push(transpose_ref(&mdata, &[2, 5], &[1, 0]));
    assert_eq!(y.dims().unwrap(), vec![5, 2]);
    outs.push(y);
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &[&upload(&data, &dims), &upload(&mdata, &[2, 5])]);
    for (i, ((want, wd), buf)) in refs.iter().zip(&res).enumerate() {
        assert_eq!(&fetch::<f32>(buf, wd, "transpose"), want, "output {i}");
    }
    // The reference itself: element [i,j,k] of x is at [k,i,j] of x.transpose([2,0,1]).
    let (t, td) = transpose_ref(&data, &dims, &[2, 0, 1]);
    assert_eq!(t[ravel(&[3, 1, 2], &td)], data[ravel(&[1, 2, 3], &dims)]);
}

/// f32 -> bf16 -> f32 with round-to-nearest-even on the upper 16 bits (finite values).
fn round_bf16(x: f32) -> f32 {
    let b = x.to_bits();
    f32::from_bits((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF_0000)
}

#[test]
fn half_precision_types_and_their_scalars() {
    let mut rng = Rng(8);
    let xs = rng.vec(16, -300.0, 300.0);
    // For f16 (10 mantissa bits): 1 + 2^-11 is halfway between 1 and 1 + 2^-10 and
    // rounds to even (1); 1 + 3 * 2^-12 rounds up to 1 + 2^-10; 0.375 and -2.5 are exact.
    let hs: Vec<f32> = vec![
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-12),
        0.375,
        -2.5,
    ];
    let hwant: Vec<f32> = vec![1.0, 1.0 + 2f32.powi(-10), 0.375, -2.5];
    let b = Builder::new("half");
    let px = b.parameter(0, Shape::of::<f32>(&[16]), "x");
    let ph = b.parameter(1, Shape::of::<f32>(&[4]), "h");
    let xb = px.convert(ElementType::Bf16);
    assert_eq!(xb.element_type().ok(), Some(ElementType::Bf16));
    // A Rust number next to a bf16/f16 array takes that type.
    let xb2 = &xb * 2.0;
    assert_eq!(xb2.element_type().ok(), Some(ElementType::Bf16));
    let hh = ph.convert(ElementType::F16);
    let hh2 = 0.5 - &hh;
    assert_eq!(hh2.element_type().ok(), Some(ElementType::F16));
    let outs = [
        xb.convert(ElementType::F32),
        xb2.convert(ElementType::F32),
        hh.convert(ElementType::F32),
        hh2.convert(ElementType::F32),
    ];
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &[&upload(&xs, &[16]), &upload(&hs, &[4])]);
    let rb: Vec<f32> = xs.iter().map(|x| round_bf16(*x)).collect();
    assert_eq!(fetch::<f32>(&res[0], &[16], "f32->bf16->f32"), rb);
    // Doubling is exact in bf16.
    assert_eq!(
        fetch::<f32>(&res[1], &[16], "bf16 * 2"),
        rb.iter().map(|x| x * 2.0).collect::<Vec<_>>()
    );
    assert_eq!(fetch::<f32>(&res[2], &[4], "f32->f16->f32"), hwant);
    // 0.5 - h is exact in f16 for the rounded h (-0.5 - 2^-10 has spacing 2^-11 there).
    let want: Vec<f32> = vec![-0.5, 0.5 - (1.0 + 2f32.powi(-10)), 0.125, 3.0];
    assert_eq!(fetch::<f32>(&res[3], &[4], "0.5 - f16"), want);
}

#[test]
fn constants_of_every_native_type() {
    let b = Builder::new("constants");
    let outs = [
        b.constant_array(&[true, false, false, true], &[2, 2]),
        b.constant_array(&[-128i8, -1, 0, 127], &[2, 2]),
        b.constant_array(&[-32768i16, -2, 300, 32767], &[2, 2]),
        b.constant_array(&[i32::MIN, -3, 70_000, i32::MAX], &[2, 2]),
        b.constant_array(&[i64::MIN, -4, 1 << 40, i64::MAX], &[2, 2]),
        b.constant_array(&[0u8, 1, 128, 255], &[2, 2]),
        b.constant_array(&[0u16, 1, 40_000, 65_535], &[2, 2]),
        b.constant_array(&[0u32, 1, 3_000_000_000, u32::MAX], &[2, 2]),
        b.constant_array(&[0u64, 1, 1 << 63, u64::MAX], &[2, 2]),
        b.constant_array(&[-0.5f32, 1e-30, 3.5, f32::MAX], &[2, 2]),
        b.constant_array(&[-0.1f64, 1e-300, 3.5, f64::MAX], &[2, 2]),
        b.constant(42i32),
        b.constant_vec(&[1.5f32, -2.5]),
    ];
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let r = run(&module, &[]);
    assert_eq!(
        fetch::<bool>(&r[0], &[2, 2], "pred"),
        [true, false, false, true]
    );
    assert_eq!(fetch::<i8>(&r[1], &[2, 2], "s8"), [-128, -1, 0, 127]);
    assert_eq!(
        fetch::<i16>(&r[2], &[2, 2], "s16"),
        [-32768, -2, 300, 32767]
    );
    assert_eq!(
        fetch::<i32>(&r[3], &[2, 2], "s32"),
        [i32::MIN, -3, 70_000, i32::MAX]
    );
    assert_eq!(
        fetch::<i64>(&r[4], &[2, 2], "s64"),
        [i64::MIN, -4, 1 << 40, i64::MAX]
    );
    assert_eq!(fetch::<u8>(&r[5], &[2, 2], "u8"), [0, 1, 128, 255]);
    assert_eq!(fetch::<u16>(&r[6], &[2, 2], "u16"), [0, 1, 40_000, 65_535]);
    assert_eq!(
        fetch::<u32>(&r[7], &[2, 2], "u32"),
        [0, 1, 3_000_000_000, u32::MAX]
    );
    assert_eq!(
        fetch::<u64>(&r[8], &[2, 2], "u64"),
        [0, 1, 1 << 63, u64::MAX]
    );
    assert_eq!(
        fetch::<f32>(&r[9], &[2, 2], "f32"),
        [-0.5, 1e-30, 3.5, f32::MAX]
    );
    assert_eq!(
        fetch::<f64>(&r[10], &[2, 2], "f64"),
        [-0.1, 1e-300, 3.5, f64::MAX]
    );
    assert_eq!(fetch::<i32>(&r[11], &[], "scalar"), [42]);
    assert_eq!(fetch::<f32>(&r[12], &[2], "vec"), [1.5, -2.5]);
    // A constant whose values do not fit its dims is an error at that line.
    let b = Builder::new("bad_constant");
    let (c, line) = (b.constant_array(&[1.0f32, 2.0, 3.0], &[2, 2]), line!());
    check_error(&b.build(&c).unwrap_err(), "constant", &["f32[2,2]"], line);
}

#[test]
fn convert_between_element_types() {
    let f: Vec<f32> = vec![-2.7, -0.5, 0.5, 2.7, 100.9, -100.9, 0.0, 1e-3];
    let i: Vec<i32> = vec![-16_777_217, -3, 0, 1, 42, 16_777_217, i32::MAX, i32::MIN];
    let p: Vec<bool> = vec![true, false, false, true, true, false, true, false];
    let b = Builder::new("convert");
    let pf = b.parameter(0, Shape::of::<f32>(&[8]), "f");
    let pi = b.parameter(1, Shape::of::<i32>(&[8]), "i");
    let pp = b.parameter(2, Shape::of::<bool>(&[8]), "p");
    let outs = [
        pf.convert(ElementType::S32),
        pi.convert(ElementType::F32),
        pf.convert(ElementType::F64),
        pp.convert(ElementType::F32),
        pi.convert(ElementType::S64),
        pf.convert(ElementType::F32), // same type: a no-op
    ];
    let types = [
        ElementType::S32,
        ElementType::F32,
        ElementType::F64,
        ElementType::F32,
        ElementType::S64,
        ElementType::F32,
    ];
    for (o, t) in outs.iter().zip(types) {
        assert_eq!(o.shape().ok(), Some(Shape::array(t, &[8])));
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(
        &module,
        &[&upload(&f, &[8]), &upload(&i, &[8]), &upload(&p, &[8])],
    );
    // f32 -> s32 truncates toward zero (Rust's `as` does the same in range).
    assert_eq!(
        fetch::<i32>(&res[0], &[8], "f32->s32"),
        f.iter().map(|x| *x as i32).collect::<Vec<_>>()
    );
    assert_eq!(fetch::<i32>(&res[0], &[8], "f32->s32")[..4], [-2, 0, 0, 2]);
    // s32 -> f32 rounds to nearest (2^24 + 1 is not representable).
    assert_eq!(
        fetch::<f32>(&res[1], &[8], "s32->f32"),
        i.iter().map(|x| *x as f32).collect::<Vec<_>>()
    );
    assert_eq!(
        fetch::<f64>(&res[2], &[8], "f32->f64"),
        f.iter().map(|x| *x as f64).collect::<Vec<_>>()
    );
    assert_eq!(
        fetch::<f32>(&res[3], &[8], "pred->f32"),
        p.iter()
            .map(|x| if *x { 1.0 } else { 0.0 })
            .collect::<Vec<f32>>()
    );
    assert_eq!(
        fetch::<i64>(&res[4], &[8], "s32->s64"),
        i.iter().map(|x| *x as i64).collect::<Vec<_>>()
    );
    assert_eq!(fetch::<f32>(&res[5], &[8], "f32->f32"), f);
}

#[test]
fn build_tuple_with_three_types() {
    let x: Vec<f32> = vec![1.5, -2.0, 3.25, 0.0, 8.0, -1.0];
    let b = Builder::new("tuple3");
    let px = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let doubled = &px * 2.0;
    let ints = px.reshape(&[6]).convert(ElementType::S32);
    let any_neg = px
        .reduce_min(&[0, 1])
        .compare(&b.constant(0.0f32), xlaclient::Comparison::Lt);
    let module = b.build_tuple(&[&doubled, &ints, &any_neg]).unwrap();
    assert_eq!(
        module.result_shape(),
        Shape::Tuple(vec![
            Shape::of::<f32>(&[2, 3]),
            Shape::of::<i32>(&[6]),
            Shape::of::<bool>(&[])
        ])
    );
    let res = run(&module, &[&upload(&x, &[2, 3])]);
    assert_eq!(res.len(), 3);
    assert_eq!(
        fetch::<f32>(&res[0], &[2, 3], "f32 out"),
        x.iter().map(|v| v * 2.0).collect::<Vec<_>>()
    );
    assert_eq!(
        fetch::<i32>(&res[1], &[6], "s32 out"),
        x.iter().map(|v| *v as i32).collect::<Vec<_>>()
    );
    assert_eq!(
        fetch::<bool>(&res[2], &[], "pred out"),
        [x.iter().any(|v| *v < 0.0)]
    );
    assert_eq!(
        res[2].to_scalar::<bool>().unwrap(),
        x.iter().any(|v| *v < 0.0)
    );
}

#[test]
fn get_tuple_element_of_a_tuple_built_in_the_graph() {
    let x: Vec<f32> = vec![1.0, 2.0, 3.0];
    let y: Vec<i32> = vec![4, -5];
    let b = Builder::new("gte");
    let px = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let py = b.parameter(1, Shape::of::<i32>(&[2]), "y");
    let t = b.tuple(&[&px, &py, &(&px + 1.0)]);
    assert_eq!(
        t.shape().ok(),
        Some(Shape::Tuple(vec![
            Shape::of::<f32>(&[3]),
            Shape::of::<i32>(&[2]),
            Shape::of::<f32>(&[3])
        ]))
    );
    let a = t.get_tuple_element(2) * 10.0;
    let c = t.get_tuple_element(1) - 1;
    assert_eq!(a.shape().ok(), Some(Shape::of::<f32>(&[3])));
    assert_eq!(c.shape().ok(), Some(Shape::of::<i32>(&[2])));
    let module = b.build_tuple(&[&a, &c]).unwrap();
    let res = run(&module, &[&upload(&x, &[3]), &upload(&y, &[2])]);
    assert_eq!(
        fetch::<f32>(&res[0], &[3], "gte 2"),
        x.iter().map(|v| (v + 1.0) * 10.0).collect::<Vec<_>>()
    );
    assert_eq!(
        fetch::<i32>(&res[1], &[2], "gte 1"),
        y.iter().map(|v| v - 1).collect::<Vec<_>>()
    );

    // Out of range and on a non-tuple: errors naming the op.
    let b = Builder::new("gte_bad");
    let px = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let t = b.tuple(&[&px]);
    let line = line!();
    let bad = t.get_tuple_element(1);
    let err = b.build(&bad).unwrap_err();
    check_error(&err, "get-tuple-element", &["(f32[3])"], line + 1);
}

// ---------------------------------------------------------------------------------
// Shape errors.

/// Checks a shape error: its message names `op`, each of `shapes`, this file and
/// `line`; `location()` points at this file and line.
fn check_error(err: &Error, op: &str, shapes: &[&str], line: u32) {
    let msg = err.to_string();
    assert!(matches!(err, Error::Shape(_)), "not a shape error: {msg}");
    assert!(
        msg.contains(&format!("`{op}`")),
        "message does not name `{op}`: {msg}"
    );
    for s in shapes {
        assert!(msg.contains(s), "message does not name {s}: {msg}");
    }
    assert!(
        msg.contains(&format!("ops_shape.rs:{line}:")),
        "message does not name ops_shape.rs:{line}: {msg}"
    );
    let loc = err.location().expect("a location");
    assert!(
        loc.file().ends_with("ops_shape.rs"),
        "location file {}",
        loc.file()
    );
    assert_eq!(loc.line(), line, "location line in {msg}");
}

#[test]
fn binary_shape_mismatch_names_op_shapes_and_line() {
    let b = Builder::new("bad_add");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[4]), "y");
    let (z, line) = (&x + &y, line!());
    assert!(z.is_poisoned());
    // A failed op's shape queries return its error (never a fake rank 0).
    check_error(
        &z.shape().unwrap_err(),
        "add",
        &["f32[2,3]", "f32[4]"],
        line,
    );
    assert!(z.dims().is_err() && z.rank().is_err() && z.element_type().is_err());
    // Ops on a failed op carry its error; the first error wins.
    let w = (z.exp() * 2.0).reshape(&[5]);
    assert!(w.is_poisoned());
    check_error(
        &w.shape().unwrap_err(),
        "add",
        &["f32[2,3]", "f32[4]"],
        line,
    );
    let err = b.build(&w).unwrap_err();
    check_error(&err, "add", &["f32[2,3]", "f32[4]"], line);
    // Every later build keeps reporting it, even of a valid op.
    assert!(b.first_error().is_some());
    let again = b.build(&x).unwrap_err();
    check_error(&again, "add", &["f32[2,3]", "f32[4]"], line);

    // Subtraction with mismatched element types.
    let b = Builder::new("bad_types");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let y = b.parameter(1, Shape::of::<i32>(&[2]), "y");
    let (z, line) = (x.sub(&y), line!());
    let err = b.build(&z).unwrap_err();
    check_error(&err, "subtract", &["f32[2]", "s32[2]"], line);
}

#[test]
fn dot_general_mismatch_names_op_shapes_and_line() {
    let b = Builder::new("bad_dot");
    let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[4, 5]), "y");
    let (z, line) = (x.matmul(&y), line!());
    let err = b.build(&(z + 1.0)).unwrap_err();
    check_error(&err, "dot_general", &["f32[4,3]", "f32[4,5]"], line);

    let b = Builder::new("bad_dot_general");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3, 4]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[5, 4, 6]), "y");
    let dims = DotDims {
        lhs_contracting: vec![2],
        rhs_contracting: vec![1],
        lhs_batch: vec![0],
        rhs_batch: vec![0],
    };
    let (z, line) = (x.dot_general(&y, &dims), line!());
    let err = b.build(&z).unwrap_err();
    check_error(&err, "dot_general", &["f32[2,3,4]", "f32[5,4,6]"], line);
    assert!(err.to_string().contains("batch"), "{err}");
}

#[test]
fn reshape_transpose_broadcast_errors_name_op_shape_and_line() {
    let b = Builder::new("bad_reshape");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let (z, line) = (x.reshape(&[4]), line!());
    check_error(&b.build(&z).unwrap_err(), "reshape", &["f32[2,3]"], line);

    let b = Builder::new("bad_reshape_infer");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let (z, line) = (x.reshape(&[4, -1]), line!());
    check_error(&b.build(&z).unwrap_err(), "reshape", &["f32[2,3]"], line);

    let b = Builder::new("bad_transpose");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3, 4]), "x");
    let (z, line) = (x.transpose(&[0, 0, 1]), line!());
    check_error(
        &b.build(&z).unwrap_err(),
        "transpose",
        &["f32[2,3,4]"],
        line,
    );

    let b = Builder::new("bad_broadcast");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let (z, line) = (x.broadcast_in_dim(&[2, 4], &[1]), line!());
    check_error(&b.build(&z).unwrap_err(), "broadcast", &["f32[3]"], line);

    let b = Builder::new("bad_broadcast_to");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let (z, line) = (x.broadcast_to(&[3]), line!());
    check_error(&b.build(&z).unwrap_err(), "broadcast", &["f32[2,3]"], line);

    let b = Builder::new("bad_reduce");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let (z, line) = (x.reduce_sum(&[2]), line!());
    check_error(&b.build(&z).unwrap_err(), "reduce", &["f32[2,3]"], line);

    let b = Builder::new("bad_select");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let p = b.parameter(1, Shape::of::<bool>(&[2]), "p");
    let (z, line) = (b.select(&p, &x, &x), line!());
    check_error(
        &b.build(&z).unwrap_err(),
        "select",
        &["pred[2]", "f32[2,3]"],
        line,
    );
}

#[test]
fn broadcast_stretch_error_names_the_users_operand() {
    // A size-1 axis that would stretch, with another axis that does not fit: the
    // message should name the operand as the user wrote it.
    let b = Builder::new("bad_broadcast_stretch");
    let x = b.parameter(0, Shape::of::<f32>(&[1, 3]), "x");
    let (z, line) = (x.broadcast_in_dim(&[4, 5], &[0, 1]), line!());
    check_error(&b.build(&z).unwrap_err(), "broadcast", &["f32[1,3]"], line);

    let b = Builder::new("bad_broadcast_to_stretch");
    let x = b.parameter(0, Shape::of::<f32>(&[1, 3]), "x");
    let (z, line) = (x.broadcast_to(&[4, 5]), line!());
    check_error(&b.build(&z).unwrap_err(), "broadcast", &["f32[1,3]"], line);
}

#[test]
fn the_first_of_several_errors_is_reported() {
    let b = Builder::new("two_errors");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[3, 2]), "y");
    let (_bad1, line) = (&x * &y, line!());
    let _bad2 = x.reshape(&[7]);
    let ok = x.exp();
    let err = b.build(&ok).unwrap_err();
    check_error(&err, "multiply", &["f32[2,3]", "f32[3,2]"], line);
}

#[test]
fn broadcast_in_dim_with_a_permuting_dimension_list() {
    // XLA (and lax.broadcast_in_dim) accept dimensions out of order: operand axis 0
    // goes to output axis 1 and axis 1 to axis 0, a transpose, here with a new axis.
    let b = Builder::new("perm");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let y = x.broadcast_in_dim(&[3, 4, 2], &[2, 0]);
    let m = b.build(&y).unwrap();
    let xs: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let got = run1::<f32>(&m, &[&upload(&xs, &[2, 3])]);
    let mut want = Vec::new();
    for i in 0..3 {
        for _ in 0..4 {
            for k in 0..2 {
                want.push(xs[k * 3 + i]);
            }
        }
    }
    assert_eq!(got, want);
}
