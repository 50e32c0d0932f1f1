//! Map, optimization barrier and custom call on the real plugin: map against a
//! plain-Rust element-wise function (with an outside scalar), the barrier passes its
//! values through, and a custom call to a kernel the plugin lacks is a compile error.

mod common;

use common::*;
use xlaclient::ClientExt;
use xlaclient::RuntimeError;
use xlaclient::ops::misc::CustomCallAttrs;
use xlaclient::{Builder, Comparison, CompileOptions, Error, Shape};

#[test]
fn map_applies_a_scalar_function() {
    let b = Builder::new("map");
    let x = b.parameter(0, Shape::of::<f32>(&[5]), "x");
    let y = b.parameter(1, Shape::of::<i32>(&[5]), "y");
    let k = b.parameter(2, Shape::of::<f32>(&[]), "k");
    let z = b.map(&[&x, &y], |s| {
        let yf = s[1].convert(xlaclient::ElementType::F32);
        let big = s[0].compare(&yf, Comparison::Gt);
        s[0].builder().select(&big, &(&s[0] * &k), &yf)
    });
    let m = b.build(&z).unwrap();
    let xs = [1.0f32, -2.0, 3.5, 0.0, 9.0];
    let ys = [0i32, 1, 4, -1, 9];
    let got = run1::<f32>(
        &m,
        &[
            &upload(&xs, &[5]),
            &upload(&ys, &[5]),
            &upload(&[2f32], &[]),
        ],
    );
    let want: Vec<f32> = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| if *x > y as f32 { x * 2.0 } else { y as f32 })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn the_barrier_passes_values_through() {
    let b = Builder::new("barrier");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let y = x.exp();
    let out = b.optimization_barrier(&[&x, &y]);
    let m = b.build(&(&out[0] + &out[1])).unwrap();
    assert!(m.to_hlo_text().contains("opt-barrier("));
    let xs = [0f32, 1.0, -1.0];
    let want: Vec<f32> = xs.iter().map(|v| v + v.exp()).collect();
    assert_close(&run1::<f32>(&m, &[&upload(&xs, &[3])]), &want, 1e-6);
}

#[test]
fn a_custom_call_to_a_missing_kernel_is_a_compile_error() {
    let b = Builder::new("cc");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let attrs = CustomCallAttrs {
        target: "xlaclient_no_such_kernel".into(),
        opaque: b"config".to_vec(),
        api_version: 1,
        has_side_effect: false,
    };
    let y = b.custom_call(&attrs, &[&x], Shape::of::<f32>(&[3]));
    let m = b.build(&y).unwrap();
    assert!(
        m.to_hlo_text()
            .contains("custom_call_target=\"xlaclient_no_such_kernel\"")
    );
    // The module reads back through the checks of foreign modules, and the plugin
    // refuses it with an error.
    let e = client()
        .compile_hlo_bytes(&m.to_bytes(), &CompileOptions::new())
        .unwrap_err();
    assert!(
        matches!(e, Error::Runtime(RuntimeError::Pjrt { .. })),
        "{e}"
    );
}
