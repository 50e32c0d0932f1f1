//! Gradients of convolution, Cholesky and triangular solve on the real plugin,
//! each checked against central finite differences of the same program in f64
//! (`tests/common/fd.rs`): convolutions in one and two spatial dimensions with
//! several dimension numbers, strides, asymmetric and negative padding, input and
//! kernel dilation, feature and batch groups; Cholesky of a product `M Mᵀ + n·I`
//! and of a raw input (whose unread triangle must get no gradient); triangular
//! solves in every combination of options, with noise in the unread triangle; QR
//! (a composite of other ops) in both modes, square, tall, wide and batched.

mod common;
#[path = "common/fd.rs"]
mod fd;

use fd::check;
use xlaclient::ops::linalg::{ConvAttrs, ConvDims, Transpose, TriangularSolveOptions};
use xlaclient::ops::window::WindowDim;
use xlaclient::{Builder, Comparison, DotDims, ElementType, Op, QrMode};

// ---------------------------------------------------------------------------------
// Convolution.

/// One convolution: operand shapes, dimension numbers, per spatial axis the
/// stride, padding and dilations, and the group counts.
struct Conv {
    x: Vec<i64>,
    k: Vec<i64>,
    dims: ConvDims,
    strides: Vec<i64>,
    pad: Vec<(i64, i64)>,
    lhs_dil: Vec<i64>,
    rhs_dil: Vec<i64>,
    fg: i64,
    bg: i64,
}

impl Conv {
    fn new(x: &[i64], k: &[i64], dims: ConvDims) -> Self {
        let n = dims.input_spatial.len();
        Conv {
            x: x.to_vec(),
            k: k.to_vec(),
            dims,
            strides: vec![1; n],
            pad: vec![(0, 0); n],
            lhs_dil: vec![1; n],
            rhs_dil: vec![1; n],
            fg: 1,
            bg: 1,
        }
    }

    fn attrs(&self) -> ConvAttrs {
        let window = (0..self.strides.len())
            .map(|i| WindowDim {
                size: self.k[self.dims.kernel_spatial[i] as usize],
                stride: self.strides[i],
                padding_low: self.pad[i].0,
                padding_high: self.pad[i].1,
                window_dilation: self.rhs_dil[i],
                base_dilation: self.lhs_dil[i],
            })
            .collect();
        ConvAttrs {
            window,
            dims: self.dims.clone(),
            feature_group_count: self.fg,
            batch_group_count: self.bg,
        }
    }

    /// Checks the gradients with respect to input and kernel, building the
    /// convolution with `convolution` (all attributes).
    fn check(&self, name: &str) {
        let attrs = self.attrs();
        check(name, &[&self.x, &self.k], -1.0, 1.0, |p| {
            p[0].convolution(&p[1], &attrs)
        });
    }
}

/// `[batch, feature, spatial...]` input and output, `[out, in, spatial...]` kernel
/// (NCHW / OIHW).
fn channels_first(n: usize) -> ConvDims {
    let sp: Vec<i64> = (2..2 + n as i64).collect();
    ConvDims {
        input_batch: 0,
        input_feature: 1,
        input_spatial: sp.clone(),
        kernel_input_feature: 1,
        kernel_output_feature: 0,
        kernel_spatial: sp.clone(),
        output_batch: 0,
        output_feature: 1,
        output_spatial: sp,
    }
}

#[test]
fn conv_1d() {
    let mut c = Conv::new(&[2, 3, 7], &[4, 3, 3], channels_first(1));
    c.strides = vec![2];
    c.pad = vec![(1, 2)];
    c.check("conv1d_ncw_stride_asymmetric_pad");

    let mut c = Conv::new(&[2, 6, 2], &[2, 2, 3], ConvDims::channels_last(1));
    c.pad = vec![(-1, 2)];
    c.lhs_dil = vec![2];
    c.rhs_dil = vec![2];
    c.check("conv1d_nwc_negative_pad_dilations");

    let mut c = Conv::new(&[2, 9, 3], &[3, 3, 2], ConvDims::channels_last(1));
    c.strides = vec![3];
    c.pad = vec![(0, -1)];
    c.rhs_dil = vec![2];
    c.check("conv1d_nwc_stride_skips_the_end");

    // A window longer than the input: no output, zero gradients.
    Conv::new(&[1, 2, 3], &[2, 2, 5], channels_first(1)).check("conv1d_empty_output");

    // Input [w, c, n], kernel [i, w, o], output [o, w, n].
    let odd = ConvDims {
        input_batch: 2,
        input_feature: 1,
        input_spatial: vec![0],
        kernel_input_feature: 0,
        kernel_output_feature: 2,
        kernel_spatial: vec![1],
        output_batch: 2,
        output_feature: 0,
        output_spatial: vec![1],
    };
    let mut c = Conv::new(&[5, 2, 3], &[2, 3, 4], odd);
    c.strides = vec![2];
    c.pad = vec![(2, 0)];
    c.lhs_dil = vec![2];
    c.check("conv1d_odd_layout");
}

#[test]
fn conv_2d() {
    let mut c = Conv::new(&[1, 2, 5, 6], &[3, 2, 2, 3], channels_first(2));
    c.strides = vec![1, 2];
    c.pad = vec![(1, 0), (2, 1)];
    c.check("conv2d_nchw_strides_pad");

    let mut c = Conv::new(&[1, 5, 4, 2], &[2, 2, 2, 2], ConvDims::channels_last(2));
    c.strides = vec![2, 1];
    c.pad = vec![(-1, 2), (1, -1)];
    c.lhs_dil = vec![1, 2];
    c.rhs_dil = vec![2, 1];
    c.check("conv2d_nhwc_everything");

    // The public `conv_general_dilated` path, channels last with padding.
    check(
        "conv2d_nhwc_conv_general_dilated",
        &[&[2, 4, 3, 2], &[3, 2, 2, 3]],
        -1.0,
        1.0,
        |p| {
            p[0].conv_general_dilated(
                &p[1],
                &[1, 2],
                &[(1, 1), (0, 2)],
                &[1, 1],
                &[1, 1],
                &ConvDims::channels_last(2),
                1,
            )
        },
    );
}

#[test]
fn conv_feature_groups() {
    check(
        "conv2d_nhwc_feature_groups",
        &[&[2, 3, 3, 4], &[2, 2, 2, 6]],
        -1.0,
        1.0,
        |p| {
            p[0].conv_general_dilated(
                &p[1],
                &[1, 1],
                &[(1, 0), (0, 1)],
                &[1, 1],
                &[1, 1],
                &ConvDims::channels_last(2),
                2,
            )
        },
    );

    let mut c = Conv::new(&[1, 6, 8], &[3, 2, 2], channels_first(1));
    c.fg = 3;
    c.strides = vec![2];
    c.pad = vec![(0, -1)];
    c.lhs_dil = vec![2];
    c.rhs_dil = vec![2];
    c.check("conv1d_ncw_feature_groups_strides_dilations");

    // Spatial axes listed out of order: input [n, w, c, h], kernel [i, kw, kh, o],
    // output [o, n, h, w].
    let odd = ConvDims {
        input_batch: 0,
        input_feature: 2,
        input_spatial: vec![3, 1],
        kernel_input_feature: 0,
        kernel_output_feature: 3,
        kernel_spatial: vec![2, 1],
        output_batch: 1,
        output_feature: 0,
        output_spatial: vec![2, 3],
    };
    let mut c = Conv::new(&[2, 4, 4, 3], &[2, 2, 2, 4], odd);
    c.fg = 2;
    c.strides = vec![1, 2];
    c.pad = vec![(1, 1), (0, 1)];
    c.check("conv2d_odd_layout_feature_groups");
}

#[test]
fn conv_batch_groups() {
    let mut c = Conv::new(&[4, 2, 6], &[4, 2, 3], channels_first(1));
    c.bg = 2;
    c.pad = vec![(1, 1)];
    c.check("conv1d_ncw_batch_groups");

    let mut c = Conv::new(&[6, 4, 3, 2], &[2, 2, 2, 3], ConvDims::channels_last(2));
    c.bg = 3;
    c.strides = vec![2, 1];
    c.pad = vec![(0, 1), (0, -1)];
    c.lhs_dil = vec![1, 2];
    c.rhs_dil = vec![2, 1];
    c.check("conv2d_nhwc_batch_groups_strides_dilations");
}

// ---------------------------------------------------------------------------------
// Cholesky and triangular solve.

/// `v` on the diagonal of `[..., n, n]` matrices, zero elsewhere (f64).
fn diagonal(b: &Builder, dims: &[i64], v: f64) -> Op {
    let r = dims.len() as i64;
    let on = b
        .iota(ElementType::S32, dims, r - 2)
        .compare(&b.iota(ElementType::S32, dims, r - 1), Comparison::Eq);
    b.select(&on, &b.constant(v), &b.constant(0.0f64))
}

/// `x` with the other triangle of each matrix zeroed (`jnp.tril` / `jnp.triu`).
fn triangle(x: &Op, lower: bool) -> Op {
    let b = x.builder();
    let dims = x.dims().unwrap();
    let r = dims.len() as i64;
    let dir = if lower {
        Comparison::Ge
    } else {
        Comparison::Le
    };
    let keep = b
        .iota(ElementType::S32, &dims, r - 2)
        .compare(&b.iota(ElementType::S32, &dims, r - 1), dir);
    b.select(&keep, x, &b.constant(0.0f64))
}

/// `m mᵀ` over the last two axes.
fn gram(m: &Op) -> Op {
    let r = m.rank().unwrap() as i64;
    let dims = DotDims {
        lhs_contracting: vec![r - 1],
        rhs_contracting: vec![r - 1],
        lhs_batch: (0..r - 2).collect(),
        rhs_batch: (0..r - 2).collect(),
    };
    m.dot_general(m, &dims)
}

#[test]
fn cholesky_of_a_product() {
    for lower in [true, false] {
        for dims in [&[4i64, 4][..], &[2, 3, 3]] {
            let n = dims[dims.len() - 1] as f64;
            let name = format!("cholesky_mmt_{lower}_{}", dims.len());
            check(&name, &[dims], -1.0, 1.0, |p| {
                let a = &gram(&p[0]) + &diagonal(&p[0].builder(), dims, n);
                // The factor's other triangle is unspecified: read the factor.
                triangle(&a.cholesky(lower), lower)
            });
        }
    }
}

#[test]
fn cholesky_of_the_raw_input_reads_one_triangle() {
    for lower in [true, false] {
        for dims in [&[4i64, 4][..], &[2, 3, 3]] {
            let name = format!("cholesky_raw_{lower}_{}", dims.len());
            check(&name, &[dims], -1.0, 1.0, |p| {
                let a = &p[0] + &diagonal(&p[0].builder(), dims, 8.0);
                triangle(&a.cholesky(lower), lower)
            });
        }
    }
}

#[test]
fn cholesky_unmasked_factor() {
    // Both CPU plugins write zeros in the triangle the factor does not fill, so
    // the whole result may be read: the rule gives it no gradient either.
    for lower in [true, false] {
        let name = format!("cholesky_unmasked_{lower}");
        check(&name, &[&[3, 3]], -1.0, 1.0, |p| {
            let a = &p[0] + &diagonal(&p[0].builder(), &[3, 3], 8.0);
            a.cholesky_unmasked(lower)
        });
    }
}

#[test]
fn cholesky_then_solve() {
    // A Gaussian-process-like chain: L = chol(M Mᵀ + 3I), z = L⁻¹ y.
    check("cholesky_then_solve", &[&[3, 3], &[3, 2]], -1.0, 1.0, |p| {
        let a = &gram(&p[0]) + &diagonal(&p[0].builder(), &[3, 3], 3.0);
        let l = a.cholesky(true);
        let o = TriangularSolveOptions {
            left_side: true,
            lower: true,
            unit_diagonal: false,
            transpose_a: Transpose::No,
        };
        let z = l.triangular_solve(&p[1], o);
        &z * &z
    });
}

fn solve_case(name: &str, batch: &[i64], o: TriangularSolveOptions) {
    let m = 3;
    let a: Vec<i64> = batch.iter().copied().chain([m, m]).collect();
    let b: Vec<i64> = batch
        .iter()
        .copied()
        .chain(if o.left_side { [m, 2] } else { [2, m] })
        .collect();
    // The raw input with a large diagonal: its other triangle is noise the solve
    // must not read (finite differences then see no dependence on it).
    check(name, &[&a, &b], -1.0, 1.0, |p| {
        let a = &p[0] + &diagonal(&p[0].builder(), &a, 4.0);
        a.triangular_solve(&p[1], o)
    });
}

#[test]
fn triangular_solve_every_option() {
    for left_side in [true, false] {
        for lower in [true, false] {
            for transpose_a in [Transpose::No, Transpose::Transpose] {
                for unit_diagonal in [false, true] {
                    let o = TriangularSolveOptions {
                        left_side,
                        lower,
                        unit_diagonal,
                        transpose_a,
                    };
                    let name = format!(
                        "trsm_left{}_lower{}_{:?}_unit{}",
                        left_side as u8, lower as u8, transpose_a, unit_diagonal as u8
                    );
                    solve_case(&name, &[], o);
                }
            }
        }
    }
}

#[test]
fn triangular_solve_adjoint_and_batched() {
    for left_side in [true, false] {
        let o = TriangularSolveOptions {
            left_side,
            lower: !left_side,
            unit_diagonal: false,
            transpose_a: Transpose::Adjoint,
        };
        solve_case(&format!("trsm_adjoint_left{}", left_side as u8), &[], o);
        let o = TriangularSolveOptions {
            transpose_a: Transpose::Transpose,
            unit_diagonal: left_side,
            ..o
        };
        solve_case(&format!("trsm_batched_left{}", left_side as u8), &[2], o);
    }
}

// ---------------------------------------------------------------------------------
// QR: a composite of the ops above (Householder reflections in two fori_loops),
// differentiated through them. (Against jax.grad through JAX's QR rule:
// tests/ops_qr.rs.)

#[test]
fn qr_factors() {
    for (dims, mode) in [
        (&[3i64, 3][..], QrMode::Reduced),
        (&[4, 3], QrMode::Reduced),
        (&[3, 4], QrMode::Reduced),
        (&[4, 3], QrMode::Complete),
        (&[2, 3, 3], QrMode::Reduced),
    ] {
        let name = format!("qr_{mode:?}_{dims:?}");
        check(&name, &[dims], -1.0, 1.0, |p| {
            let (q, r) = p[0].qr(mode);
            p[0].builder()
                .concatenate(&[&q.reshape(&[-1]), &r.reshape(&[-1])], 0)
        });
    }
}
