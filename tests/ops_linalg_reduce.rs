//! Linear algebra and reductions on the real plugin: dot_general (batch and
//! contracting axes anywhere), every form of matmul, reduce_sum/max/min/mean over
//! single, multiple, negative and all axes, custom `reduce` bodies, integer reductions.
//! Dot options: a preferred element type (`s8 × s8 → s32`, `bf16 × bf16 → f32`,
//! `f16 × f32 → f32`) and operand precisions, and the errors of the type rule.

mod common;
use common::*;

use xlaclient::half::{bf16, f16};
use xlaclient::{
    Builder, DotDims, DotOptions, ElementType, Error, Op, Precision, Shape, ShapeErrorKind,
};

/// dot_general by definition: output axes are batch, lhs free, rhs free; each output
/// element sums over every combination of contracted indices. Generic over the
/// element type through f64 (exact for the small integers used with s32).
fn dot_general_ref(
    l: &[f64],
    ld: &[i64],
    r: &[f64],
    rd: &[i64],
    d: &DotDims,
) -> (Vec<f64>, Vec<i64>) {
    let free = |rank: usize, used: &[&Vec<i64>]| -> Vec<usize> {
        (0..rank)
            .filter(|i| !used.iter().any(|u| u.contains(&(*i as i64))))
            .collect()
    };
    let lfree = free(ld.len(), &[&d.lhs_contracting, &d.lhs_batch]);
    let rfree = free(rd.len(), &[&d.rhs_contracting, &d.rhs_batch]);
    let mut out_dims: Vec<i64> = d.lhs_batch.iter().map(|a| ld[*a as usize]).collect();
    out_dims.extend(lfree.iter().map(|a| ld[*a]));
    out_dims.extend(rfree.iter().map(|a| rd[*a]));
    let cdims: Vec<i64> = d.lhs_contracting.iter().map(|a| ld[*a as usize]).collect();
    let nb = d.lhs_batch.len();
    let out = (0..count(&out_dims) as i64)
        .map(|flat| {
            let oi = unravel(flat, &out_dims);
            let mut li = vec![0i64; ld.len()];
            let mut ri = vec![0i64; rd.len()];
            for (k, (la, ra)) in d.lhs_batch.iter().zip(&d.rhs_batch).enumerate() {
                li[*la as usize] = oi[k];
                ri[*ra as usize] = oi[k];
            }
            for (k, a) in lfree.iter().enumerate() {
                li[*a] = oi[nb + k];
            }
            for (k, a) in rfree.iter().enumerate() {
                ri[*a] = oi[nb + lfree.len() + k];
            }
            let mut acc = 0.0;
            for cflat in 0..count(&cdims) as i64 {
                let ci = unravel(cflat, &cdims);
                for (k, (la, ra)) in d.lhs_contracting.iter().zip(&d.rhs_contracting).enumerate() {
                    li[*la as usize] = ci[k];
                    ri[*ra as usize] = ci[k];
                }
                acc += l[ravel(&li, ld)] * r[ravel(&ri, rd)];
            }
            acc
        })
        .collect();
    (out, out_dims)
}

fn to64(x: &[f32]) -> Vec<f64> {
    x.iter().map(|v| *v as f64).collect()
}

fn to32(x: &[f64]) -> Vec<f32> {
    x.iter().map(|v| *v as f32).collect()
}

#[test]
fn dot_general_with_batch_and_contracting_axes() {
    let mut rng = Rng(1);
    // (lhs dims, rhs dims, dimension numbers)
    let cases: Vec<(Vec<i64>, Vec<i64>, DotDims)> = vec![
        // [b,m,k] x [b,k,n]
        (
            vec![2, 3, 4],
            vec![2, 4, 5],
            DotDims {
                lhs_contracting: vec![2],
                rhs_contracting: vec![1],
                lhs_batch: vec![0],
                rhs_batch: vec![0],
            },
        ),
        // [k,b,m] x [b,n,k]: batch and contracting axes in unusual places
        (
            vec![4, 2, 3],
            vec![2, 5, 4],
            DotDims {
                lhs_contracting: vec![0],
                rhs_contracting: vec![2],
                lhs_batch: vec![1],
                rhs_batch: vec![0],
            },
        ),
        // two contracting axes, paired in swapped order
        (
            vec![3, 4, 5],
            vec![5, 4, 2],
            DotDims {
                lhs_contracting: vec![1, 2],
                rhs_contracting: vec![1, 0],
                ..Default::default()
            },
        ),
        // two batch axes
        (
            vec![2, 3, 4, 2],
            vec![3, 2, 4],
            DotDims {
                lhs_contracting: vec![2],
                rhs_contracting: vec![2],
                lhs_batch: vec![0, 1],
                rhs_batch: vec![1, 0],
            },
        ),
        // outer product (no contraction)
        (vec![3], vec![4], DotDims::default()),
        // plain matrix product as a contraction of axis 1 with axis 0
        (vec![3, 4], vec![4, 2], DotDims::contract(1, 0)),
    ];
    let b = Builder::new("dot_general");
    let mut outs = Vec::new();
    let mut args = Vec::new();
    let mut refs = Vec::new();
    for (i, (ld, rd, d)) in cases.iter().enumerate() {
        let l = b.parameter(2 * i, Shape::of::<f32>(ld), "l");
        let r = b.parameter(2 * i + 1, Shape::of::<f32>(rd), "r");
        let y = l.dot_general(&r, d);
        let (ldata, rdata) = (rng.vec(count(ld), -1.0, 1.0), rng.vec(count(rd), -1.0, 1.0));
        let (want, wd) = dot_general_ref(&to64(&ldata), ld, &to64(&rdata), rd, d);
        assert_eq!(y.dims().unwrap(), wd, "case {i}");
        outs.push(y);
        args.push(upload(&ldata, ld));
        args.push(upload(&rdata, rd));
        refs.push((to32(&want), wd));
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &args.iter().collect::<Vec<_>>());
    for (i, ((want, wd), buf)) in refs.iter().zip(&res).enumerate() {
        let got = fetch::<f32>(buf, wd, "dot_general");
        assert!(got.len() == want.len(), "case {i}");
        assert_close(&got, want, 1e-5);
    }
}

#[test]
fn dot_general_s32_is_exact() {
    let ld = [2i64, 3, 4];
    let rd = [2i64, 4, 2];
    let l: Vec<i32> = (0..24).map(|i| (i * 7 % 11) - 5).collect();
    let r: Vec<i32> = (0..16).map(|i| (i * 5 % 9) - 4).collect();
    let d = DotDims {
        lhs_contracting: vec![2],
        rhs_contracting: vec![1],
        lhs_batch: vec![0],
        rhs_batch: vec![0],
    };
    let b = Builder::new("dot_s32");
    let pl = b.parameter(0, Shape::of::<i32>(&ld), "l");
    let pr = b.parameter(1, Shape::of::<i32>(&rd), "r");
    let module = b.build(&pl.dot_general(&pr, &d)).unwrap();
    let res = run(&module, &[&upload(&l, &ld), &upload(&r, &rd)]);
    let f = |v: &[i32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
    let (want, wd) = dot_general_ref(&f(&l), &ld, &f(&r), &rd, &d);
    assert_eq!(wd, vec![2, 3, 2]);
    assert_eq!(
        fetch::<i32>(&res[0], &wd, "s32 dot"),
        want.iter().map(|v| *v as i32).collect::<Vec<_>>()
    );
}

#[test]
fn s8_dot_accumulates_in_s32() {
    // Products up to 127 * 128 and 16 of them per output: far beyond s8 (and s16).
    let (m, k, n) = (3i64, 16i64, 4i64);
    let mut rng = Rng(21);
    let l: Vec<i8> = (0..m * k)
        .map(|_| (rng.next_u64() % 256) as u8 as i8)
        .collect();
    let r: Vec<i8> = (0..k * n)
        .map(|_| (rng.next_u64() % 256) as u8 as i8)
        .collect();
    let mut l2 = l.clone();
    l2[..k as usize].fill(i8::MIN); // row 0: -128 * ...
    let mut r2 = r.clone();
    for j in 0..k as usize {
        r2[j * n as usize] = i8::MIN; // column 0: (-128) * (-128) = 16384, 16 times
    }
    let want: Vec<i32> = (0..m)
        .flat_map(|i| {
            let (l2, r2) = (&l2, &r2);
            (0..n).map(move |j| {
                (0..k)
                    .map(|t| l2[(i * k + t) as usize] as i32 * r2[(t * n + j) as usize] as i32)
                    .sum::<i32>()
            })
        })
        .collect();
    assert_eq!(want[0], 16 * 16384);
    let b = Builder::new("s8_dot");
    let x = b.parameter(0, Shape::of::<i8>(&[m, k]), "x");
    let w = b.parameter(1, Shape::of::<i8>(&[k, n]), "w");
    let wide = x.dot_general_with(
        &w,
        &DotDims::contract(1, 0),
        DotOptions::new().preferred_element_type(ElementType::S32),
    );
    // Without a preferred type the result is s8: the same sums modulo 256 (wrapping
    // is a ring homomorphism, so the order of the additions does not matter).
    let narrow = x.matmul(&w);
    let module = b.build_tuple(&[&wide, &narrow]).unwrap();
    let out = run(&module, &[&upload(&l2, &[m, k]), &upload(&r2, &[k, n])]);
    assert_eq!(fetch::<i32>(&out[0], &[m, n], "s8 x s8 -> s32"), want);
    let wrapped: Vec<i8> = want.iter().map(|v| *v as i8).collect();
    assert_eq!(fetch::<i8>(&out[1], &[m, n], "s8 x s8 -> s8"), wrapped);
}

#[test]
fn bf16_and_f16_dots_accumulate_in_f32() {
    // 257 ones: 257 is not a bf16 (256 and 258 are), but it is an f32.
    let ones = vec![bf16::ONE; 257];
    let mut rng = Rng(5);
    let (m, k, n) = (4i64, 32i64, 3i64);
    let lb: Vec<bf16> = rng
        .vec((m * k) as usize, -2.0, 2.0)
        .iter()
        .map(|v| bf16::from_f32(*v))
        .collect();
    let rb: Vec<bf16> = rng
        .vec((k * n) as usize, -2.0, 2.0)
        .iter()
        .map(|v| bf16::from_f32(*v))
        .collect();
    let lh: Vec<f16> = lb.iter().map(|v| f16::from_f32(v.to_f32())).collect();
    let rf: Vec<f32> = rng.vec((k * n) as usize, -2.0, 2.0);
    let b = Builder::new("mixed");
    let po = b.parameter(0, Shape::of::<bf16>(&[1, 257]), "ones");
    let plb = b.parameter(1, Shape::of::<bf16>(&[m, k]), "lb");
    let prb = b.parameter(2, Shape::of::<bf16>(&[k, n]), "rb");
    let plh = b.parameter(3, Shape::of::<f16>(&[m, k]), "lh");
    let prf = b.parameter(4, Shape::of::<f32>(&[k, n]), "rf");
    let to_f32 = DotOptions::new().preferred_element_type(ElementType::F32);
    let ones_t = po.transpose(&[1, 0]);
    let outs = [
        po.matmul_with(&ones_t, to_f32),
        po.matmul(&ones_t),
        plb.matmul_with(&prb, to_f32),
        plh.matmul_with(&prf, to_f32),
        plh.dot_general_with(&prf, &DotDims::contract(1, 0), to_f32),
    ];
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let text = module.to_hlo_text();
    assert!(text.contains("f32[4,3]{1,0} dot(f16[4,32]{1,0}"), "{text}");
    let out = run(
        &module,
        &[
            &upload(&ones, &[1, 257]),
            &upload(&lb, &[m, k]),
            &upload(&rb, &[k, n]),
            &upload(&lh, &[m, k]),
            &upload(&rf, &[k, n]),
        ],
    );
    assert_eq!(fetch::<f32>(&out[0], &[1, 1], "ones f32"), vec![257.0]);
    let b16 = fetch::<bf16>(&out[1], &[1, 1], "ones bf16")[0].to_f32();
    assert!(
        b16 == 256.0 || b16 == 258.0,
        "a bf16 result cannot be 257: {b16}"
    );
    // References in f64 on the exact operand values; bf16 and f16 products are exact
    // in f32, so only the f32 additions round.
    let reference = |l: &[f64], r: &[f64]| -> (Vec<f64>, Vec<f64>) {
        let mut v = vec![0.0; (m * n) as usize];
        let mut mag = vec![0.0; (m * n) as usize];
        for i in 0..m {
            for j in 0..n {
                for t in 0..k {
                    let p = l[(i * k + t) as usize] * r[(t * n + j) as usize];
                    v[(i * n + j) as usize] += p;
                    mag[(i * n + j) as usize] += p.abs();
                }
            }
        }
        (v, mag)
    };
    let check = |got: Vec<f32>, (want, mag): (Vec<f64>, Vec<f64>), what: &str| {
        for (i, ((g, w), a)) in got.iter().zip(&want).zip(&mag).enumerate() {
            let bound = k as f64 * 2f64.powi(-24) * a + 1e-30;
            assert!(
                (*g as f64 - w).abs() <= bound,
                "{what} element {i}: got {g}, want {w} (bound {bound:e})"
            );
        }
    };
    let b64 = |v: &[bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
    let h64: Vec<f64> = lh.iter().map(|x| x.to_f64()).collect();
    let f64s: Vec<f64> = rf.iter().map(|x| *x as f64).collect();
    check(
        fetch::<f32>(&out[2], &[m, n], "bf16 x bf16 -> f32"),
        reference(&b64(&lb), &b64(&rb)),
        "bf16 x bf16 -> f32",
    );
    check(
        fetch::<f32>(&out[3], &[m, n], "f16 x f32 -> f32"),
        reference(&h64, &f64s),
        "f16 x f32 -> f32",
    );
    assert_eq!(
        out[3].to_vec::<f32>().unwrap(),
        out[4].to_vec::<f32>().unwrap()
    );
}

#[test]
fn highest_precision_f32_dot_matches_f64() {
    let (m, k, n) = (8i64, 96i64, 5i64);
    let mut rng = Rng(8);
    let l = rng.vec((m * k) as usize, -1.0, 1.0);
    let r = rng.vec((k * n) as usize, -1.0, 1.0);
    let b = Builder::new("highest");
    let x = b.parameter(0, Shape::of::<f32>(&[m, k]), "x");
    let w = b.parameter(1, Shape::of::<f32>(&[k, n]), "w");
    let y = x.matmul_with(&w, DotOptions::new().precision(Precision::Highest));
    let z = x.dot_general_with(
        &w,
        &DotDims::contract(1, 0),
        DotOptions::new().operand_precision(Precision::High, Precision::Default),
    );
    let module = b.build_tuple(&[&y, &z]).unwrap();
    let text = module.to_hlo_text();
    assert!(
        text.contains("operand_precision={highest,highest}"),
        "{text}"
    );
    assert!(text.contains("operand_precision={high,default}"), "{text}");
    // The precision reaches XLA (the proto's precision_config).
    let dots: Vec<Vec<i32>> = module.proto().computations[0]
        .instructions
        .iter()
        .filter(|i| i.opcode == "dot")
        .map(|i| {
            i.precision_config
                .as_ref()
                .unwrap()
                .operand_precision
                .clone()
        })
        .collect();
    assert_eq!(dots, vec![vec![2, 2], vec![1, 0]]);
    let out = run(&module, &[&upload(&l, &[m, k]), &upload(&r, &[k, n])]);
    let (want, _) = dot_general_ref(
        &to64(&l),
        &[m, k],
        &to64(&r),
        &[k, n],
        &DotDims::contract(1, 0),
    );
    for o in &out {
        let got = fetch::<f32>(o, &[m, n], "highest");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // f32 rounding of k products and sums of terms below 1 in magnitude.
            let bound = k as f64 * 2f64.powi(-23);
            assert!(
                (*g as f64 - w).abs() <= bound,
                "element {i}: got {g}, f64 {w}"
            );
        }
    }
}

fn dot_error(err: &Error, shapes: &[&str], line: u32, needle: &str) {
    let msg = err.to_string();
    let Error::Shape(e) = err else {
        panic!("not a shape error: {msg}")
    };
    assert_eq!(e.kind, ShapeErrorKind::ElementType, "{msg}");
    assert!(msg.contains("`dot_general`"), "{msg}");
    for s in shapes {
        assert!(msg.contains(s), "message does not name {s}: {msg}");
    }
    assert!(msg.contains(needle), "{msg} (wanted `{needle}`)");
    let loc = err.location().expect("a location");
    assert!(
        loc.file().ends_with("ops_linalg_reduce.rs"),
        "{}",
        loc.file()
    );
    assert_eq!(loc.line(), line, "{msg}");
}

#[test]
fn dot_type_errors_name_the_op_shapes_and_line() {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<i32>(&[2, 3]), "x");
    let w = b.parameter(1, Shape::of::<i32>(&[3, 4]), "w");
    let narrow = DotOptions::new().preferred_element_type(ElementType::S16);
    let (z, line) = (x.matmul_with(&w, narrow), line!());
    dot_error(
        &b.build(&z).unwrap_err(),
        &["s32[2,3]", "s32[3,4]"],
        line,
        "narrower than the operands' s32",
    );

    let b = Builder::new("mixed");
    let x = b.parameter(0, Shape::of::<f16>(&[2, 3]), "x");
    let w = b.parameter(1, Shape::of::<f32>(&[3, 4]), "w");
    let (z, line) = (x.dot_general(&w, &DotDims::contract(1, 0)), line!());
    dot_error(
        &b.build(&z).unwrap_err(),
        &["f16[2,3]", "f32[3,4]"],
        line,
        "give a preferred element type",
    );

    let b = Builder::new("complex_to_real");
    let x = b
        .parameter(0, Shape::of::<f32>(&[2, 3]), "x")
        .convert(ElementType::C64);
    let real = DotOptions::new().preferred_element_type(ElementType::F64);
    let (z, line) = (x.matmul_with(&x.transpose(&[1, 0]), real), line!());
    dot_error(
        &b.build(&z).unwrap_err(),
        &["c64[2,3]", "c64[3,2]"],
        line,
        "is real",
    );

    let b = Builder::new("pred");
    let x = b.parameter(0, Shape::of::<bool>(&[2, 2]), "x");
    let s32 = DotOptions::new().preferred_element_type(ElementType::S32);
    let (z, line) = (x.matmul_with(&x, s32), line!());
    dot_error(&b.build(&z).unwrap_err(), &["pred[2,2]"], line, "pred");
}

/// numpy.matmul by its definition: vectors are promoted (a leading/trailing 1 that is
/// removed again) and batch axes broadcast.
fn matmul_ref(a: &[f32], ad: &[i64], b: &[f32], bd: &[i64]) -> (Vec<f32>, Vec<i64>) {
    let a2: Vec<i64> = if ad.len() == 1 {
        vec![1, ad[0]]
    } else {
        ad.to_vec()
    };
    let b2: Vec<i64> = if bd.len() == 1 {
        vec![bd[0], 1]
    } else {
        bd.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let n = b2[b2.len() - 1];
    assert_eq!(k, b2[b2.len() - 2]);
    let (ab, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let nbatch = ab.len().max(bb.len());
    let batch: Vec<i64> = (0..nbatch)
        .map(|i| {
            let x = if i + ab.len() >= nbatch {
                ab[i + ab.len() - nbatch]
            } else {
                1
            };
            let y = if i + bb.len() >= nbatch {
                bb[i + bb.len() - nbatch]
            } else {
                1
            };
            x.max(y)
        })
        .collect();
    let bidx = |bi: &[i64], own: &[i64]| -> usize {
        let off = nbatch - own.len();
        own.iter().enumerate().fold(0i64, |acc, (j, d)| {
            acc * d + if *d == 1 { 0 } else { bi[off + j] }
        }) as usize
    };
    let mut out = Vec::new();
    for bflat in 0..count(&batch) as i64 {
        let bi = unravel(bflat, &batch);
        let (ao, bo) = (
            bidx(&bi, ab) * (m * k) as usize,
            bidx(&bi, bb) * (k * n) as usize,
        );
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f64;
                for p in 0..k {
                    acc +=
                        a[ao + (i * k + p) as usize] as f64 * b[bo + (p * n + j) as usize] as f64;
                }
                out.push(acc as f32);
            }
        }
    }
    let mut od = batch;
    if ad.len() > 1 {
        od.push(m);
    }
    if bd.len() > 1 {
        od.push(n);
    }
    (out, od)
}

#[test]
fn matmul_in_every_form() {
    let mut rng = Rng(2);
    // (lhs, rhs, numpy's output dims)
    let cases: [(&[i64], &[i64], &[i64]); 13] = [
        (&[4], &[4], &[]),                             // vec · vec
        (&[3, 4], &[4], &[3]),                         // mat · vec
        (&[4], &[4, 5], &[5]),                         // vec · mat
        (&[3, 4], &[4, 5], &[3, 5]),                   // mat · mat
        (&[2, 3, 4], &[2, 4, 5], &[2, 3, 5]),          // batched
        (&[2, 3, 4], &[4, 5], &[2, 3, 5]),             // batched x shared matrix
        (&[3, 4], &[2, 4, 5], &[2, 3, 5]),             // shared matrix x batched
        (&[4], &[2, 4, 5], &[2, 5]),                   // vec x batched
        (&[2, 3, 4], &[4], &[2, 3]),                   // batched x vec
        (&[2, 2, 3, 4], &[2, 2, 4, 5], &[2, 2, 3, 5]), // two batch axes
        (&[3, 4], &[2, 3, 4, 5], &[2, 3, 3, 5]),       // shared matrix x two batch axes
        (&[1, 2, 3], &[4, 3, 5], &[4, 2, 5]),          // batch axes broadcast (1 vs 4)
        (&[5, 2, 3], &[2, 5, 3, 4], &[2, 5, 2, 4]),    // batch axes broadcast (rank)
    ];
    let b = Builder::new("matmul");
    let mut outs = Vec::new();
    let mut args = Vec::new();
    let mut refs = Vec::new();
    for (i, (ld, rd, od)) in cases.iter().enumerate() {
        let l = b.parameter(2 * i, Shape::of::<f32>(ld), "l");
        let r = b.parameter(2 * i + 1, Shape::of::<f32>(rd), "r");
        let y = l.matmul(&r);
        assert_eq!(y.dims().unwrap(), od.to_vec(), "{ld:?} @ {rd:?}");
        let (ldata, rdata) = (rng.vec(count(ld), -1.0, 1.0), rng.vec(count(rd), -1.0, 1.0));
        let (want, wd) = matmul_ref(&ldata, ld, &rdata, rd);
        assert_eq!(wd, od.to_vec(), "reference dims for {ld:?} @ {rd:?}");
        outs.push(y);
        args.push(upload(&ldata, ld));
        args.push(upload(&rdata, rd));
        refs.push(want);
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &args.iter().collect::<Vec<_>>());
    for ((ld, rd, od), (want, buf)) in cases.iter().zip(refs.iter().zip(&res)) {
        let got = fetch::<f32>(buf, od, &format!("{ld:?} @ {rd:?}"));
        assert_close(&got, want, 1e-5);
    }
    // The reference itself on a hand-checkable case: [[1,2],[3,4]] @ [5,6] = [17, 39].
    assert_eq!(
        matmul_ref(&[1.0, 2.0, 3.0, 4.0], &[2, 2], &[5.0, 6.0], &[2]).0,
        [17.0, 39.0]
    );
}

// ---------------------------------------------------------------------------------
// Reductions.

/// Reduces `axes` (already non-negative) of `x` with `f` from `init`, row-major order.
fn reduce_ref<T: Copy>(
    x: &[T],
    dims: &[i64],
    axes: &[usize],
    init: T,
    f: impl Fn(T, T) -> T,
) -> (Vec<T>, Vec<i64>) {
    let keep: Vec<usize> = (0..dims.len()).filter(|a| !axes.contains(a)).collect();
    let od: Vec<i64> = keep.iter().map(|a| dims[*a]).collect();
    let mut out = vec![init; count(&od)];
    for flat in 0..x.len() as i64 {
        let idx = unravel(flat, dims);
        let oi: Vec<i64> = keep.iter().map(|a| idx[*a]).collect();
        let o = ravel(&oi, &od);
        out[o] = f(out[o], x[flat as usize]);
    }
    (out, od)
}

fn resolve(axes: &[i64], rank: usize) -> Vec<usize> {
    axes.iter()
        .map(|a| {
            if *a < 0 {
                (*a + rank as i64) as usize
            } else {
                *a as usize
            }
        })
        .collect()
}

#[test]
fn reduce_sum_max_min_mean_over_axis_sets() {
    let dims = [2i64, 3, 4];
    let mut rng = Rng(3);
    let x = rng.vec(24, -5.0, 5.0);
    let axis_sets: [&[i64]; 9] = [
        &[0],
        &[1],
        &[2],
        &[-1],
        &[-2],
        &[0, 2],
        &[-1, -3],
        &[2, 0, 1],
        &[],
    ];
    let b = Builder::new("reductions");
    let px = b.parameter(0, Shape::of::<f32>(&dims), "x");
    let mut outs: Vec<Op> = Vec::new();
    for axes in &axis_sets {
        outs.push(px.reduce_sum(axes));
        outs.push(px.reduce_max(axes));
        outs.push(px.reduce_min(axes));
        outs.push(px.mean(axes, false));
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &[&upload(&x, &dims)]);
    let x64 = to64(&x);
    for (s, axes) in axis_sets.iter().enumerate() {
        let ax = resolve(axes, 3);
        let (sum, od) = reduce_ref(&x64, &dims, &ax, 0.0, |a, e| a + e);
        let (max, _) = reduce_ref(&x, &dims, &ax, f32::NEG_INFINITY, f32::max);
        let (min, _) = reduce_ref(&x, &dims, &ax, f32::INFINITY, f32::min);
        let n: i64 = ax.iter().map(|a| dims[*a]).product();
        let mean: Vec<f64> = sum.iter().map(|v| v / n as f64).collect();
        for (k, o) in outs[4 * s..4 * s + 4].iter().enumerate() {
            assert_eq!(
                o.dims().unwrap(),
                od,
                "inferred dims of reduction {k} over {axes:?}"
            );
        }
        let what = |k: &str| format!("{k} over {axes:?}");
        assert_close(
            &fetch::<f32>(&res[4 * s], &od, &what("sum")),
            &to32(&sum),
            1e-5,
        );
        assert_eq!(
            fetch::<f32>(&res[4 * s + 1], &od, &what("max")),
            max,
            "{}",
            what("max")
        );
        assert_eq!(
            fetch::<f32>(&res[4 * s + 2], &od, &what("min")),
            min,
            "{}",
            what("min")
        );
        assert_close(
            &fetch::<f32>(&res[4 * s + 3], &od, &what("mean")),
            &to32(&mean),
            1e-5,
        );
    }
}

#[test]
fn custom_reduce_bodies() {
    let dims = [3i64, 4];
    let mut rng = Rng(4);
    let x = rng.vec(12, 0.5, 1.5);
    let b = Builder::new("custom_reduce");
    let px = b.parameter(0, Shape::of::<f32>(&dims), "x");
    let one = b.constant(1.0f32);
    let prod_rows = px.reduce(&one, &[1], |a, e| a * e);
    let prod_all = px.reduce(&one, &[0, 1], |a, e| a.mul(e));
    // A body that uses a constant of its own builder: max(a, e) via select.
    let ninf = b.constant(f32::NEG_INFINITY);
    let max_cols = px.reduce(&ninf, &[-2], |a, e| {
        a.builder()
            .select(&a.compare(e, xlaclient::Comparison::Gt), a, e)
    });
    // The initial value takes part: sum from 100.
    let sum_from_100 = px.reduce(&b.constant(100.0f32), &[0], |a, e| a + e);
    assert_eq!(prod_rows.dims().unwrap(), vec![3]);
    assert_eq!(prod_all.dims().unwrap(), Vec::<i64>::new());
    assert_eq!(max_cols.dims().unwrap(), vec![4]);
    let module = b
        .build_tuple(&[&prod_rows, &prod_all, &max_cols, &sum_from_100])
        .unwrap();
    let res = run(&module, &[&upload(&x, &dims)]);
    let x64 = to64(&x);
    let (want, od) = reduce_ref(&x64, &dims, &[1], 1.0, |a, e| a * e);
    assert_close(
        &fetch::<f32>(&res[0], &od, "product over rows"),
        &to32(&want),
        1e-5,
    );
    let (want, od) = reduce_ref(&x64, &dims, &[0, 1], 1.0, |a, e| a * e);
    assert_close(
        &fetch::<f32>(&res[1], &od, "product of all"),
        &to32(&want),
        1e-5,
    );
    let (want, od) = reduce_ref(&x, &dims, &[0], f32::NEG_INFINITY, f32::max);
    assert_eq!(fetch::<f32>(&res[2], &od, "max via select"), want);
    let (want, od) = reduce_ref(&x64, &dims, &[0], 100.0, |a, e| a + e);
    assert_close(
        &fetch::<f32>(&res[3], &od, "sum from 100"),
        &to32(&want),
        1e-6,
    );
}

#[test]
fn integer_reductions() {
    let dims = [3i64, 4];
    // Every value negative: a max that started from 0 would give 0.
    let neg: Vec<i32> = vec![
        -5,
        -17,
        -3,
        -100,
        -2,
        -9,
        -1_000_000,
        -8,
        -7,
        -6,
        -40,
        i32::MIN,
    ];
    // Every value positive: a min that started from 0 would give 0.
    let pos: Vec<i32> = vec![5, 17, 3, 100, 2, 9, 1_000_000, 8, 7, 6, 40, i32::MAX];
    let big: Vec<u32> = vec![
        1,
        4_000_000_000,
        3,
        2_147_483_648,
        0,
        7,
        9,
        8,
        4_000_000_001,
        5,
        6,
        2,
    ];
    let b = Builder::new("int_reduce");
    let pn = b.parameter(0, Shape::of::<i32>(&dims), "neg");
    let pp = b.parameter(1, Shape::of::<i32>(&dims), "pos");
    let pu = b.parameter(2, Shape::of::<u32>(&dims), "big");
    let outs = [
        pn.reduce_max(&[1]),
        pn.reduce_max(&[0, 1]),
        pp.reduce_min(&[0]),
        pn.reduce_sum(&[-1]),
        pu.reduce_max(&[1]),
        pu.reduce_min(&[0]),
        pn.reduce_min(&[1]),
    ];
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(
        &module,
        &[
            &upload(&neg, &dims),
            &upload(&pos, &dims),
            &upload(&big, &dims),
        ],
    );
    let (w, od) = reduce_ref(&neg, &dims, &[1], i32::MIN, i32::max);
    assert_eq!(fetch::<i32>(&res[0], &od, "s32 max rows"), w);
    let (w, od) = reduce_ref(&neg, &dims, &[0, 1], i32::MIN, i32::max);
    assert_eq!(fetch::<i32>(&res[1], &od, "s32 max all"), w);
    assert_eq!(w, [-2]);
    let (w, od) = reduce_ref(&pos, &dims, &[0], i32::MAX, i32::min);
    assert_eq!(fetch::<i32>(&res[2], &od, "s32 min cols"), w);
    let (w, od) = reduce_ref(&neg, &dims, &[1], 0, i32::wrapping_add);
    assert_eq!(fetch::<i32>(&res[3], &od, "s32 sum"), w);
    let (w, od) = reduce_ref(&big, &dims, &[1], 0, u32::max);
    assert_eq!(fetch::<u32>(&res[4], &od, "u32 max"), w);
    let (w, od) = reduce_ref(&big, &dims, &[0], u32::MAX, u32::min);
    assert_eq!(fetch::<u32>(&res[5], &od, "u32 min"), w);
    let (w, od) = reduce_ref(&neg, &dims, &[1], i32::MAX, i32::min);
    assert_eq!(fetch::<i32>(&res[6], &od, "s32 min rows"), w);
}

#[test]
fn reduce_body_must_return_a_scalar_of_the_type() {
    let b = Builder::new("bad_body");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let zero = b.constant(0.0f32);
    let body = |a: &Op, _: &Op| a.convert(xlaclient::ElementType::S32);
    let (y, line) = (x.reduce(&zero, &[0], body), line!());
    let err = b.build(&y).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("`reduce`") && msg.contains("s32[]") && msg.contains("f32[]"),
        "{msg}"
    );
    assert_eq!(err.location().map(|l| l.line()), Some(line), "{msg}");

    // A non-scalar or mistyped initial value.
    let b = Builder::new("bad_init");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let (y, line) = (x.reduce(&b.constant(0i32), &[0], |a, e| a + e), line!());
    let err = b.build(&y).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("`reduce`") && msg.contains("s32[]") && msg.contains("f32[2,3]"),
        "{msg}"
    );
    assert_eq!(err.location().map(|l| l.line()), Some(line), "{msg}");
}

#[test]
fn the_mean_of_integers_is_a_float() {
    // u8 over 300 elements: the count does not fit u8, and 1+2 over 2 is 1.5.
    let b = Builder::new("int_mean");
    let x = b.parameter(0, Shape::of::<u8>(&[300]), "x");
    let y = b.parameter(1, Shape::of::<i32>(&[2]), "y");
    let (mx, my) = (x.mean(&[0], false), y.mean(&[0], false));
    assert_eq!(mx.shape().unwrap(), Shape::of::<f32>(&[]));
    let m = b.build_tuple(&[&mx, &my]).unwrap();
    let xs: Vec<u8> = (0..300).map(|i| (i % 256) as u8).collect();
    let want = xs.iter().map(|v| *v as f64).sum::<f64>() / 300.0;
    let out = run(&m, &[&upload(&xs, &[300]), &upload(&[1i32, 2], &[2])]);
    assert_close(&[out[0].to_scalar::<f32>().unwrap()], &[want as f32], 1e-6);
    assert_eq!(out[1].to_scalar::<f32>().unwrap(), 1.5);
}

#[test]
fn reductions_share_one_signature_and_var_std_equal_plain_rust() {
    // sum, prod, amax, amin, mean, var and std all take (axes, keepdims).
    let b = Builder::new("reductions");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let outs = [
        x.sum(&[1], true),
        x.prod(&[1], true),
        x.amax(&[1], true),
        x.amin(&[1], true),
        x.mean(&[1], true),
        x.var(&[1], true),
        x.std(&[1], false),
        x.var(&[0, 1], false),
    ];
    for o in &outs[..6] {
        assert_eq!(o.dims().unwrap(), vec![2, 1]);
    }
    assert_eq!(outs[6].dims().unwrap(), vec![2]);
    assert_eq!(outs[7].dims().unwrap(), Vec::<i64>::new());
    let refs: Vec<&xlaclient::Op> = outs.iter().collect();
    let m = b.build_tuple(&refs).unwrap();
    let xs = [1.0f32, 2.0, 4.0, -1.0, 0.5, 3.0];
    let out = run(&m, &[&upload(&xs, &[2, 3])]);
    let got: Vec<Vec<f32>> = out.iter().map(|o| o.to_vec::<f32>().unwrap()).collect();
    let rows = [&xs[..3], &xs[3..]];
    let mean = |r: &[f32]| r.iter().map(|v| f64::from(*v)).sum::<f64>() / r.len() as f64;
    let var = |r: &[f32]| {
        let m = mean(r);
        r.iter().map(|v| (f64::from(*v) - m).powi(2)).sum::<f64>() / r.len() as f64
    };
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(got[0][i], r.iter().sum::<f32>());
        assert_eq!(got[1][i], r.iter().product::<f32>());
        assert_eq!(got[2][i], r.iter().cloned().fold(f32::MIN, f32::max));
        assert_eq!(got[3][i], r.iter().cloned().fold(f32::MAX, f32::min));
        assert!((f64::from(got[4][i]) - mean(r)).abs() < 1e-6);
        assert!((f64::from(got[5][i]) - var(r)).abs() < 1e-5);
        assert!((f64::from(got[6][i]) - var(r).sqrt()).abs() < 1e-5);
    }
    assert!((f64::from(got[7][0]) - var(&xs)).abs() < 1e-5);
}
