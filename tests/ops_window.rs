//! Reduce-window (pooling) on the real plugin against plain-Rust windows: max and sum
//! pooling with strides, padding and dilations.

mod common;

use common::*;
use xlaclient::ops::window::WindowDim;
use xlaclient::{Builder, Comparison, Shape};

/// Reference 1-D/2-D window reduction over a row-major array, following the window
/// definition: base dilation spreads the elements, padding extends the edges, window
/// dilation spreads the taps; padding and holes contribute `init`.
fn pool_ref(
    x: &[f32],
    dims: &[i64],
    w: &[WindowDim],
    init: f32,
    f: fn(f32, f32) -> f32,
) -> (Vec<f32>, Vec<i64>) {
    let out: Vec<i64> = w
        .iter()
        .zip(dims)
        .map(|(w, d)| w.output_size(*d).unwrap())
        .collect();
    let mut res = Vec::new();
    for flat in 0..count(&out) as i64 {
        let o = unravel(flat, &out);
        let mut acc = init;
        let taps: Vec<i64> = w.iter().map(|w| w.size).collect();
        for tflat in 0..count(&taps) as i64 {
            let t = unravel(tflat, &taps);
            let mut idx = Vec::new();
            let mut inside = true;
            for a in 0..dims.len() {
                let pos = o[a] * w[a].stride + t[a] * w[a].window_dilation - w[a].padding_low;
                if pos < 0 || pos % w[a].base_dilation != 0 || pos / w[a].base_dilation >= dims[a] {
                    inside = false;
                    break;
                }
                idx.push(pos / w[a].base_dilation);
            }
            if inside {
                acc = f(acc, x[ravel(&idx, dims)]);
            }
        }
        res.push(acc);
    }
    (res, out)
}

#[test]
fn pooling_matches_the_window_definition() {
    let dims = [5i64, 6];
    let mut rng = Rng(11);
    let xs = rng.vec(30, -1.0, 1.0);
    let cases = [
        [WindowDim::new(2, 2), WindowDim::new(2, 2)],
        [WindowDim::new(3, 1), WindowDim::new(1, 3)],
        [
            WindowDim {
                padding_low: 1,
                padding_high: 1,
                ..WindowDim::new(3, 2)
            },
            WindowDim {
                window_dilation: 2,
                ..WindowDim::new(2, 1)
            },
        ],
        [
            WindowDim {
                base_dilation: 2,
                ..WindowDim::new(2, 1)
            },
            WindowDim {
                padding_low: -1,
                padding_high: 2,
                ..WindowDim::new(3, 3)
            },
        ],
    ];
    for w in cases {
        let b = Builder::new("pool");
        let x = b.parameter(0, Shape::of::<f32>(&dims), "x");
        let m = b.build_tuple(&[&x.max_pool(&w), &x.sum_pool(&w)]).unwrap();
        let out = run(&m, &[&upload(&xs, &dims)]);
        let (mx, od) = pool_ref(&xs, &dims, &w, f32::NEG_INFINITY, f32::max);
        let (sm, _) = pool_ref(&xs, &dims, &w, 0.0, |a, b| a + b);
        assert_eq!(out[0].dims().unwrap(), od, "{w:?}");
        assert_close(&out[0].to_vec::<f32>().unwrap(), &mx, 1e-6);
        assert_close(&out[1].to_vec::<f32>().unwrap(), &sm, 1e-5);
    }
}

#[test]
fn window_errors() {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let y = x.max_pool(&[WindowDim::new(0, 1)]);
    assert!(b.build(&y).is_err());
    let b = Builder::new("bad_rank");
    let x = b.parameter(0, Shape::of::<f32>(&[4, 4]), "x");
    let y = x.sum_pool(&[WindowDim::new(2, 2)]);
    assert!(b.build(&y).unwrap_err().to_string().contains("window axes"));
}

#[test]
fn select_and_scatter_is_the_max_pool_gradient() {
    // Each window's first maximum receives the window's source value (summed where
    // windows overlap), as a plain-Rust loop computes it.
    let dims = [4i64, 5];
    let mut rng = Rng(12);
    let xs = rng.vec(20, -1.0, 1.0);
    let w = [WindowDim::new(2, 1), WindowDim::new(3, 2)];
    let out_dims: Vec<i64> = w
        .iter()
        .zip(&dims)
        .map(|(w, d)| w.output_size(*d).unwrap())
        .collect();
    let src = rng.vec(count(&out_dims), 0.0, 1.0);
    let b = Builder::new("sas");
    let x = b.parameter(0, Shape::of::<f32>(&dims), "x");
    let s = b.parameter(1, Shape::of::<f32>(&out_dims), "s");
    let zero = b.constant(0f32);
    let y = x.select_and_scatter(
        &s,
        &zero,
        &w,
        |a, c| a.compare(c, Comparison::Ge),
        |acc, v| acc + v,
    );
    let m = b.build(&y).unwrap();
    let got = run1::<f32>(&m, &[&upload(&xs, &dims), &upload(&src, &out_dims)]);
    let mut want = vec![0f32; 20];
    for o in 0..count(&out_dims) as i64 {
        let oi = unravel(o, &out_dims);
        let mut best: Option<(usize, f32)> = None;
        for t in 0..(w[0].size * w[1].size) {
            let ti = unravel(t, &[w[0].size, w[1].size]);
            let idx = [oi[0] * w[0].stride + ti[0], oi[1] * w[1].stride + ti[1]];
            let k = ravel(&idx, &dims);
            if best.is_none_or(|(_, v)| xs[k] > v) {
                best = Some((k, xs[k]));
            }
        }
        want[best.unwrap().0] += src[o as usize];
    }
    assert_close(&got, &want, 1e-6);
}

#[test]
fn a_pooling_body_uses_an_outside_scalar() {
    // Sum of k * x over each window, k from outside the body.
    let b = Builder::new("scaled_pool");
    let x = b.parameter(0, Shape::of::<f32>(&[6]), "x");
    let k = b.parameter(1, Shape::of::<f32>(&[]), "k");
    let y = x.reduce_window(&b.constant(0f32), &[WindowDim::new(3, 3)], |acc, e| {
        acc + &(e * &k)
    });
    let m = b.build(&y).unwrap();
    let got = run1::<f32>(
        &m,
        &[
            &upload(&[1f32, 2., 3., 4., 5., 6.], &[6]),
            &upload(&[2f32], &[]),
        ],
    );
    assert_eq!(got, vec![12., 30.]);
}
