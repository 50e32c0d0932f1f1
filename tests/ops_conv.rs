//! Convolution on the real plugin against a direct plain-Rust convolution
//! (channels-last input [n, h, w, c], kernel [kh, kw, c / groups, out]): strides,
//! padding, input and kernel dilation, feature groups.

mod common;

use common::*;
use xlaclient::ops::linalg::ConvDims;
use xlaclient::ops::window::WindowDim;
use xlaclient::{Builder, Shape};

struct Conf {
    strides: [i64; 2],
    pad: [(i64, i64); 2],
    lhs_dil: [i64; 2],
    rhs_dil: [i64; 2],
    groups: i64,
}

fn conv_ref(x: &[f32], xd: [i64; 4], k: &[f32], kd: [i64; 4], c: &Conf) -> (Vec<f32>, Vec<i64>) {
    let [n, h, w, cin] = xd;
    let [kh, kw, kin, cout] = kd;
    let win = |i: usize, size: i64, len: i64| {
        WindowDim {
            size,
            stride: c.strides[i],
            padding_low: c.pad[i].0,
            padding_high: c.pad[i].1,
            window_dilation: c.rhs_dil[i],
            base_dilation: c.lhs_dil[i],
        }
        .output_size(len)
        .unwrap()
    };
    let (oh, ow) = (win(0, kh, h), win(1, kw, w));
    let per_group_out = cout / c.groups;
    let mut out = Vec::new();
    for b in 0..n {
        for y in 0..oh {
            for xo in 0..ow {
                for o in 0..cout {
                    let g = o / per_group_out;
                    let mut acc = 0.0f64;
                    for dy in 0..kh {
                        for dx in 0..kw {
                            let py = y * c.strides[0] + dy * c.rhs_dil[0] - c.pad[0].0;
                            let px = xo * c.strides[1] + dx * c.rhs_dil[1] - c.pad[1].0;
                            if py < 0 || px < 0 || py % c.lhs_dil[0] != 0 || px % c.lhs_dil[1] != 0
                            {
                                continue;
                            }
                            let (iy, ix) = (py / c.lhs_dil[0], px / c.lhs_dil[1]);
                            if iy >= h || ix >= w {
                                continue;
                            }
                            for ci in 0..kin {
                                let cx = g * kin + ci;
                                let xv = x[(((b * h + iy) * w + ix) * cin + cx) as usize];
                                let kv = k[(((dy * kw + dx) * kin + ci) * cout + o) as usize];
                                acc += xv as f64 * kv as f64;
                            }
                        }
                    }
                    out.push(acc as f32);
                }
            }
        }
    }
    (out, vec![n, oh, ow, cout])
}

#[test]
fn convolutions_match_the_direct_sum() {
    let mut rng = Rng(5);
    let cases = [
        (
            Conf {
                strides: [1, 1],
                pad: [(0, 0); 2],
                lhs_dil: [1, 1],
                rhs_dil: [1, 1],
                groups: 1,
            },
            [2, 5, 5, 3],
            [3, 3, 3, 4],
        ),
        (
            Conf {
                strides: [2, 1],
                pad: [(1, 1), (2, 0)],
                lhs_dil: [1, 1],
                rhs_dil: [1, 1],
                groups: 1,
            },
            [1, 6, 5, 2],
            [3, 2, 2, 3],
        ),
        (
            Conf {
                strides: [1, 2],
                pad: [(0, 1), (1, 1)],
                lhs_dil: [2, 1],
                rhs_dil: [1, 2],
                groups: 1,
            },
            [1, 4, 6, 2],
            [2, 2, 2, 2],
        ),
        (
            Conf {
                strides: [1, 1],
                pad: [(1, 1); 2],
                lhs_dil: [1, 1],
                rhs_dil: [1, 1],
                groups: 2,
            },
            [1, 4, 4, 4],
            [3, 3, 2, 6],
        ),
    ];
    for (c, xd, kd) in cases {
        let b = Builder::new("conv");
        let x = b.parameter(0, Shape::of::<f32>(&xd), "x");
        let k = b.parameter(1, Shape::of::<f32>(&kd), "k");
        let y = x.conv_general_dilated(
            &k,
            &c.strides,
            &c.pad,
            &c.lhs_dil,
            &c.rhs_dil,
            &ConvDims::channels_last(2),
            c.groups,
        );
        let m = b.build(&y).unwrap();
        let xs = rng.vec(count(&xd), -1.0, 1.0);
        let ks = rng.vec(count(&kd), -1.0, 1.0);
        let (want, od) = conv_ref(&xs, xd, &ks, kd, &c);
        let out = run(&m, &[&upload(&xs, &xd), &upload(&ks, &kd)]);
        let got = fetch::<f32>(&out[0], &od, "conv");
        assert_close(&got, &want, 1e-4);
    }
}

#[test]
fn convolution_rule_errors() {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[1, 4, 4, 3]), "x");
    let k = b.parameter(1, Shape::of::<f32>(&[3, 3, 2, 4]), "k"); // 2 in-features, input has 3
    let y = x.conv_general_dilated(
        &k,
        &[1, 1],
        &[(0, 0); 2],
        &[1, 1],
        &[1, 1],
        &ConvDims::channels_last(2),
        1,
    );
    let e = b.build(&y).unwrap_err().to_string();
    assert!(e.contains("input features"), "{e}");
}
