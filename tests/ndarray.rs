//! `ndarray` in and out (feature `ndarray`), on the real plugin: arrays of every
//! rank 0 to 4 and every element type round-trip; transposed, permuted, sliced,
//! stepped, negative-stride, broadcast and Fortran-order arrays upload the values
//! a plain-Rust index loop reads from them (and XLA's own transpose agrees);
//! `f16`/`bf16` computed on by XLA against `half`'s arithmetic; trees of arrays
//! through `jit` (`Jit::call_arrays`, mixed element types with `NdArray`); and a
//! wrong element type or rank is an error naming both.
//!
//! Run: `cargo test --features ndarray,npy --test ndarray`.

use std::sync::OnceLock;

use ndarray::{Array, ArrayD, Axis, Ix0, Ix1, Ix2, Ix3, IxDyn, ShapeBuilder, array, s};
use xlaclient::half::{bf16, f16};
use xlaclient::{
    Builder, Client, ClientExt, ClientOptions, ElementType, Error, NdArray, Op, Plugin,
    RuntimeError, Shape, Tree,
};

fn client() -> &'static Client {
    static C: OnceLock<Client> = OnceLock::new();
    C.get_or_init(|| {
        let plugin = Plugin::default_plugin().expect("load the plugin");
        Client::new(&plugin, &ClientOptions::new().cpu_device_count(2)).expect("create a client")
    })
}

/// The values of `a` in row-major order, read element by element with `a[idx]`
/// over every multi-index (the reference for what an upload must hold).
fn row_major<T: Copy>(a: &ndarray::ArrayViewD<'_, T>) -> Vec<T> {
    let shape = a.shape().to_vec();
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(a[IxDyn(&idx)]);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

fn iota(shape: &[usize]) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(|i| i as f32 * 0.5 - 3.0).collect()).unwrap()
}

/// Uploads `view`, checks the buffer's dims and values against the index loop.
fn check_upload(name: &str, view: ndarray::ArrayViewD<'_, f32>) {
    let b = client().buffer_from_array(&view).expect(name);
    let dims: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
    assert_eq!(b.dims().unwrap(), dims, "{name}: dims");
    assert_eq!(
        b.to_vec::<f32>().unwrap(),
        row_major(&view),
        "{name}: values"
    );
    assert_eq!(b.to_arrayd::<f32>().unwrap(), view, "{name}: to_arrayd");
}

#[test]
fn every_rank_round_trips() {
    for shape in [
        &[][..],
        &[5],
        &[2, 3],
        &[2, 3, 4],
        &[2, 1, 3, 2],
        &[0, 3],
        &[3, 0, 2],
    ] {
        let a = iota(shape);
        assert!(a.is_standard_layout());
        check_upload(&format!("{shape:?}"), a.view());
    }
    // The fixed-dimension forms.
    let a = array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]];
    let b = client().buffer_from_array(&a).unwrap();
    assert_eq!(b.to_array::<f32, Ix2>().unwrap(), a);
    let s = client().buffer_from_array(&ndarray::arr0(2.5f64)).unwrap();
    assert_eq!(s.dims().unwrap(), Vec::<i64>::new());
    assert_eq!(s.to_array::<f64, Ix0>().unwrap().into_scalar(), 2.5);
}

#[test]
fn non_standard_strides_are_copied_in_row_major_order() {
    let a = iota(&[4, 6]);
    let a2 = a.view().into_dimensionality::<Ix2>().unwrap();
    let cases: Vec<(&str, ndarray::ArrayViewD<'_, f32>)> = vec![
        ("transposed", a2.t().into_dyn()),
        ("column slice", a2.slice(s![.., 1..4]).into_dyn()),
        (
            "stepped rows and columns",
            a2.slice(s![..;2, 1..;3]).into_dyn(),
        ),
        ("negative stride rows", a2.slice(s![..;-1, ..]).into_dyn()),
        (
            "negative stride columns",
            a2.slice(s![.., ..;-2]).into_dyn(),
        ),
        ("one column", a2.slice(s![.., 2..3]).into_dyn()),
        (
            "transposed slice",
            a2.slice(s![1..3, ..;-1]).reversed_axes().into_dyn(),
        ),
    ];
    for (name, v) in cases {
        assert!(!v.is_standard_layout(), "{name} should not be standard");
        check_upload(name, v);
    }
    let c = iota(&[2, 3, 4]);
    let mut p = c.view();
    p.swap_axes(0, 2);
    check_upload("3-d axes swapped", p.clone());
    let permuted = c.view().permuted_axes(IxDyn(&[1, 2, 0]));
    check_upload("3-d permuted", permuted);
    let b = iota(&[3]);
    let broadcast = b.broadcast(IxDyn(&[2, 4, 3])).unwrap();
    check_upload("broadcast (zero strides)", broadcast);
    let f = Array::from_shape_vec((3, 4).f(), (0..12).map(|i| i as f32).collect()).unwrap();
    assert!(!f.is_standard_layout());
    check_upload("Fortran order", f.view().into_dyn());
    let inserted = a2.insert_axis(Axis(1));
    check_upload("inserted axis", inserted.into_dyn());
}

#[test]
fn xla_transpose_agrees_with_a_transposed_view() {
    // The standard array uploaded as is and transposed by XLA, against the
    // transposed view uploaded (copied on the host): XLA's own answer.
    let a = iota(&[3, 5]);
    let b = Builder::new("t");
    let x = b.parameter(0, Shape::of::<f32>(&[3, 5]), "x");
    let module = b.build(&x.transpose(&[1, 0])).unwrap();
    let exe = client().compile(&module).unwrap();
    let up = client().buffer_from_array(&a).unwrap();
    let by_xla = exe.execute(&[&up]).unwrap().remove(0);
    let by_host = client().buffer_from_array(&a.t()).unwrap();
    assert_eq!(
        by_xla.to_array::<f32, IxDyn>().unwrap(),
        by_host.to_array::<f32, IxDyn>().unwrap()
    );
}

#[test]
fn every_element_type_round_trips_through_ndarray() {
    fn check<T: xlaclient::ArrayElement + PartialEq>(values: Vec<T>) {
        let a = Array::from_shape_vec((2, 2), values).unwrap();
        let nd = NdArray::from(a.clone());
        assert_eq!(nd.element_type(), T::TYPE);
        let b = nd.to_buffer(client()).unwrap();
        assert_eq!(b.element_type().unwrap(), T::TYPE);
        let back = NdArray::from_buffer(&b).unwrap();
        assert_eq!(back, nd);
        assert_eq!(back.into_array::<T, Ix2>().unwrap(), a);
        // A transposed view of the same, through the typed path.
        let t = client().buffer_from_array(&a.t()).unwrap();
        assert_eq!(t.to_array::<T, Ix2>().unwrap(), a.t());
    }
    check(vec![true, false, false, true]);
    check(vec![i8::MIN, -1, 0, i8::MAX]);
    check(vec![i16::MIN, -1, 0, i16::MAX]);
    check(vec![i32::MIN, -1, 0, i32::MAX]);
    check(vec![i64::MIN, -1, 0, i64::MAX]);
    check(vec![0u8, 1, 2, u8::MAX]);
    check(vec![0u16, 1, 2, u16::MAX]);
    check(vec![0u32, 1, 2, u32::MAX]);
    check(vec![0u64, 1, 2, u64::MAX]);
    check(vec![
        f16::from_f32(-1.5),
        f16::MIN_POSITIVE,
        f16::MAX,
        f16::from_f32(0.1),
    ]);
    check(vec![
        bf16::from_f32(-1.5),
        bf16::MIN_POSITIVE,
        bf16::MAX,
        bf16::from_f32(0.1),
    ]);
    check(vec![0.5f32, -0.25, f32::MAX, f32::MIN_POSITIVE]);
    check(vec![0.5f64, -0.25, f64::MAX, f64::MIN_POSITIVE]);
}

#[test]
fn half_precision_arrays_computed_on_by_xla() {
    // x * x + x in f16 and bf16, by XLA, against `half`'s own arithmetic (one
    // rounding per operation, as XLA's CPU code does for these types after
    // widening each op to f32: exact products and sums of these small values).
    let xs = [-2.0f32, -0.5, 0.0, 0.25, 1.5, 3.0];
    let b = Builder::new("h");
    let x = b.parameter(0, Shape::of::<f16>(&[2, 3]), "x");
    let module = b.build(&(&(&x * &x) + &x)).unwrap();
    let exe = client().compile(&module).unwrap();
    let a = Array::from_shape_vec((3, 2), xs.iter().map(|&v| f16::from_f32(v)).collect()).unwrap();
    // Uploaded through a transposed view: [2, 3].
    let up = client().buffer_from_array(&a.t()).unwrap();
    let out = exe
        .execute(&[&up])
        .unwrap()
        .remove(0)
        .to_array::<f16, Ix2>()
        .unwrap();
    let want = a.t().mapv(|v| v * v + v);
    assert_eq!(out, want);

    let b = Builder::new("bh");
    let x = b.parameter(0, Shape::of::<bf16>(&[6]), "x");
    let module = b.build(&(&x * 2.0)).unwrap();
    let exe = client().compile(&module).unwrap();
    let a: Array<bf16, Ix1> = xs.iter().map(|&v| bf16::from_f32(v)).collect();
    let out = exe
        .execute(&[&client().buffer_from_array(&a).unwrap()])
        .unwrap()
        .remove(0)
        .to_array::<bf16, Ix1>()
        .unwrap();
    assert_eq!(out, a.mapv(|v| v * bf16::from_f32(2.0)));
}

#[test]
fn wrong_element_type_or_rank_names_both() {
    let b = client().buffer_from_array(&iota(&[2, 3])).unwrap();
    let msg = |e: RuntimeError| e.to_string();
    assert_eq!(
        msg(b.to_array::<f64, Ix2>().unwrap_err()),
        "array mismatch: the buffer is f32[2,3] (rank 2), the array asked for is f64 of rank 2"
    );
    assert_eq!(
        msg(b.to_array::<f32, Ix3>().unwrap_err()),
        "array mismatch: the buffer is f32[2,3] (rank 2), the array asked for is f32 of rank 3"
    );
    assert_eq!(
        msg(b.to_arrayd::<i32>().unwrap_err()),
        "array mismatch: the buffer is f32[2,3] (rank 2), the array asked for is s32 of any rank"
    );
    let nd = NdArray::from(array![1i64, 2]);
    assert_eq!(
        msg(nd.clone().into_array::<f32, Ix1>().unwrap_err()),
        "array mismatch: the NdArray is s64[2] (rank 1), the array asked for is f32 of rank 1"
    );
    assert_eq!(
        msg(nd.clone().into_array::<i64, Ix2>().unwrap_err()),
        "array mismatch: the NdArray is s64[2] (rank 1), the array asked for is s64 of rank 2"
    );
    assert!(nd.view::<u8>().is_err());
    assert_eq!(nd.view::<i64>().unwrap(), array![1i64, 2].into_dyn());
    assert!(matches!(
        b.to_array::<f64, Ix2>(),
        Err(RuntimeError::ArrayMismatch { .. })
    ));
}

#[test]
fn upload_to_another_device() {
    let devices = client().addressable_devices();
    assert!(devices.len() >= 2);
    let a = iota(&[3, 2]);
    let b = devices[1].buffer_from_array(&a.t()).unwrap();
    assert_eq!(b.device().unwrap().id().unwrap(), devices[1].id().unwrap());
    assert_eq!(b.to_arrayd::<f32>().unwrap(), a.t());
}

#[derive(Tree, Debug, PartialEq)]
struct State<T> {
    w: T,
    bias: Vec<T>,
    step: T,
}

#[test]
fn jit_takes_and_returns_trees_of_arrays() {
    let spec = State {
        w: Shape::of::<f32>(&[2, 3]),
        bias: vec![Shape::of::<f32>(&[3]), Shape::of::<f16>(&[2])],
        step: Shape::of::<i64>(&[]),
    };
    let f = client()
        .jit("step", &spec, |_, s: State<Op>| State {
            w: &s.w * 2.0,
            bias: vec![&s.bias[0] + 1.0, &s.bias[1] * &s.bias[1]],
            step: &s.step + 1,
        })
        .unwrap();
    let w = iota(&[3, 2]).into_dimensionality::<Ix2>().unwrap();
    let b0 = array![0.5f32, -1.0, 2.0];
    let b1 = array![f16::from_f32(1.5), f16::from_f32(-3.0)];
    let args = State {
        // A transposed view's copy: non-standard layout in the tree.
        w: NdArray::from(w.t().to_owned()),
        bias: vec![NdArray::from(b0.clone()), NdArray::from(b1.clone())],
        step: NdArray::from(ndarray::arr0(41i64)),
    };
    let out = f.call_arrays(&args).unwrap();
    assert_eq!(
        out.w.clone().into_array::<f32, Ix2>().unwrap(),
        w.t().mapv(|v| v * 2.0)
    );
    assert_eq!(
        out.bias[0].clone().into_array::<f32, Ix1>().unwrap(),
        b0.mapv(|v| v + 1.0)
    );
    assert_eq!(
        out.bias[1].clone().into_array::<f16, Ix1>().unwrap(),
        b1.mapv(|v| v * v)
    );
    assert_eq!(
        out.step
            .clone()
            .into_array::<i64, Ix0>()
            .unwrap()
            .into_scalar(),
        42
    );

    // One element type: plain ArrayD<f32> leaves.
    let g = client()
        .jit(
            "g",
            &vec![Shape::of::<f32>(&[2, 3]), Shape::of::<f32>(&[3])],
            |_, v: Vec<Op>| vec![v[0].sum(&[0], false), &v[1] - 1.0],
        )
        .unwrap();
    let a = iota(&[2, 3]);
    let c = iota(&[3]);
    let out: Vec<ArrayD<f32>> = g.call_arrays(&vec![a.clone(), c.clone()]).unwrap();
    assert_eq!(out[0], a.sum_axis(Axis(0)));
    assert_eq!(out[1], c.mapv(|v| v - 1.0));

    // A tree of another structure: the tree error, before any upload.
    let err = g.call_arrays(&vec![a.clone()]).unwrap_err();
    assert!(matches!(err, Error::Tree(_)), "{err}");
    // An argument of another shape: the executable's argument check names both.
    let err = g
        .call_arrays(&vec![a.clone(), iota(&[4])])
        .unwrap_err()
        .to_string();
    assert!(err.contains("f32[3]") && err.contains("f32[4]"), "{err}");
    // Outputs that the leaf type cannot hold (rank 1 read as Ix2): names both.
    let h = client()
        .jit("h", &vec![Shape::of::<f32>(&[2, 3])], |_, v: Vec<Op>| {
            vec![v[0].sum(&[1], false)]
        })
        .unwrap();
    let a2 = a.clone().into_dimensionality::<Ix2>().unwrap();
    let err = h.call_arrays(&vec![a2]).unwrap_err().to_string();
    assert_eq!(
        err,
        "array mismatch: the buffer is f32[2] (rank 1), the array asked for is f32 of rank 2"
    );
}

#[test]
fn tree_helpers_move_whole_trees() {
    let tree = State {
        w: NdArray::from(iota(&[2, 2])),
        bias: vec![NdArray::from(array![1u8, 2, 3])],
        step: NdArray::from(ndarray::arr0(true)),
    };
    let bufs = xlaclient::arrays::to_buffers(client(), &tree).unwrap();
    assert_eq!(bufs.bias[0].element_type().unwrap(), ElementType::U8);
    let back: State<NdArray> = xlaclient::arrays::from_buffers(&bufs).unwrap();
    assert_eq!(back, tree);
}
