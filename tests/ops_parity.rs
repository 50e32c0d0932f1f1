//! The numpy array functions of issue 24 against JAX 0.10.2: every case of
//! `tests/data/parity_jax.json` (recorded by `bench/record_parity_jax.py`: NaN,
//! infinities, ties, -0/+0, negative and out-of-range indices and shifts, empty
//! arrays, integer promotion) built with the crate's method, run on the CPU plugin,
//! and compared element by element (integers and booleans exactly, floats to a few
//! ulps, NaN to NaN), with the result's dtype and shape. Gradients of the float
//! functions against central differences in f64; bad arguments are errors that
//! name the op and this file's line.

mod common;
#[path = "common/fd.rs"]
mod fd;

use common::*;
use serde_json::Value as Json;
use xlaclient::{Buffer, Builder, ConvDims, ConvTransposePadding, ElementType, NormOrd, Op, Shape};

fn cases() -> Vec<Json> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/parity_jax.json"
    ))
    .expect("tests/data/parity_jax.json");
    let j: Json = serde_json::from_str(&text).expect("json");
    assert_eq!(j["jax_version"], "0.10.2");
    j["cases"].as_array().expect("cases").clone()
}

fn ty_of(dtype: &str) -> ElementType {
    match dtype {
        "float32" => ElementType::F32,
        "int32" => ElementType::S32,
        "int8" => ElementType::S8,
        "int16" => ElementType::S16,
        "uint8" => ElementType::U8,
        "uint32" => ElementType::U32,
        "bool" => ElementType::Pred,
        d => panic!("dtype {d} not handled"),
    }
}

fn upload_json(a: &Json) -> Buffer {
    let d = dims_of(a);
    let v = data_of(a);
    match ty_of(a["dtype"].as_str().unwrap()) {
        ElementType::F32 => upload(&v.iter().map(|x| *x as f32).collect::<Vec<_>>(), &d),
        ElementType::S32 => upload(&v.iter().map(|x| *x as i32).collect::<Vec<_>>(), &d),
        ElementType::S8 => upload(&v.iter().map(|x| *x as i8).collect::<Vec<_>>(), &d),
        ElementType::U8 => upload(&v.iter().map(|x| *x as u8).collect::<Vec<_>>(), &d),
        ElementType::U32 => upload(&v.iter().map(|x| *x as u32).collect::<Vec<_>>(), &d),
        ElementType::Pred => upload(&v.iter().map(|x| *x != 0.0).collect::<Vec<_>>(), &d),
        _ => unreachable!(),
    }
}

fn download(b: &Buffer) -> Vec<f64> {
    fn f64s<T: xlaclient::NativeType + Copy + Into<f64>>(b: &Buffer) -> Vec<f64> {
        b.to_vec::<T>()
            .unwrap()
            .into_iter()
            .map(Into::into)
            .collect()
    }
    match b.element_type().unwrap() {
        ElementType::F32 => f64s::<f32>(b),
        ElementType::S32 => f64s::<i32>(b),
        ElementType::S16 => f64s::<i16>(b),
        ElementType::S8 => f64s::<i8>(b),
        ElementType::U32 => f64s::<u32>(b),
        ElementType::U8 => f64s::<u8>(b),
        ElementType::Pred => b
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .map(|x| *x as u8 as f64)
            .collect(),
        t => panic!("output type {t} not handled"),
    }
}

fn ints(v: &Json) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn ord(name: &str) -> NormOrd {
    match name {
        "default" => NormOrd::Default,
        "fro" => NormOrd::Fro,
        "inf" => NormOrd::Inf,
        "neginf" => NormOrd::NegInf,
        "p1" => NormOrd::P(1.0),
        "pm1" => NormOrd::P(-1.0),
        "p2" => NormOrd::P(2.0),
        "p3" => NormOrd::P(3.0),
        "p0" => NormOrd::P(0.0),
        "p05" => NormOrd::P(0.5),
        o => panic!("ord {o}"),
    }
}

/// The crate's call for one recorded case.
fn apply(b: &Builder, op: &str, a: &Json, x: &[Op]) -> Vec<Op> {
    let axis = |k: &str| a[k].as_i64();
    let flag = |k: &str| a[k].as_bool().unwrap();
    let dtype = |k: &str| match a[k].as_str().unwrap() {
        "f32" => ElementType::F32,
        "s32" => ElementType::S32,
        d => panic!("{d}"),
    };
    let one = |o: Op| vec![o];
    match op {
        "repeat" => one(x[0].repeat(&ints(&a["repeats"]), axis("axis"))),
        "tile" => one(x[0].tile(&ints(&a["reps"]))),
        "roll" => one(x[0].roll(a["shift"].as_i64().unwrap(), axis("axis"))),
        "norm" => {
            let axes = a["axes"].as_array().map(|_| ints(&a["axes"]));
            one(x[0].linalg_norm(
                ord(a["ord"].as_str().unwrap()),
                axes.as_deref(),
                flag("keepdims"),
            ))
        }
        "var" => one(x[0].var_ddof(
            &ints(&a["axes"]),
            a["ddof"].as_i64().unwrap(),
            flag("keepdims"),
        )),
        "std" => one(x[0].std_ddof(
            &ints(&a["axes"]),
            a["ddof"].as_i64().unwrap(),
            flag("keepdims"),
        )),
        "cumsum" => one(x[0].cumsum(axis("axis").unwrap(), flag("reverse"))),
        "cumprod" => one(x[0].cumprod(axis("axis").unwrap(), flag("reverse"))),
        "cummax" => one(x[0].cummax(axis("axis").unwrap(), flag("reverse"))),
        "cummin" => one(x[0].cummin(axis("axis").unwrap(), flag("reverse"))),
        "eye" => one(b.eye(
            axis("n").unwrap(),
            axis("m").unwrap(),
            axis("k").unwrap(),
            dtype("dtype"),
        )),
        "tril" => one(x[0].tril(axis("k").unwrap())),
        "triu" => one(x[0].triu(axis("k").unwrap())),
        "diag" => one(x[0].diag(axis("k").unwrap())),
        "linspace" => one(b.linspace(
            a["start"].as_f64().unwrap(),
            a["stop"].as_f64().unwrap(),
            axis("num").unwrap(),
            flag("endpoint"),
            dtype("dtype"),
        )),
        "isnan" => one(x[0].isnan()),
        "isinf" => one(x[0].isinf()),
        "nan_to_num" => one(x[0].nan_to_num(
            a["nan"].as_f64().unwrap(),
            a["posinf"].as_f64(),
            a["neginf"].as_f64(),
        )),
        "divmod" => {
            let (q, r) = x[0].divmod(&x[1]);
            vec![q, r]
        }
        "floor_divide" => one(x[0].floor_divide(&x[1])),
        "remainder" => one(x[0].remainder(&x[1])),
        "count_nonzero" => one(x[0].count_nonzero(&ints(&a["axes"]), flag("keepdims"))),
        "isin" => one(x[0].isin(&x[1])),
        "array_equal" => one(x[0].array_equal(&x[1], flag("equal_nan"))),
        "argsort" => one(x[0].argsort(axis("axis").unwrap(), flag("descending"))),
        "logaddexp" => one(x[0].logaddexp(&x[1])),
        "log_sigmoid" => one(x[0].log_sigmoid()),
        "outer" => one(x[0].outer(&x[1])),
        "vdot" => one(x[0].vdot(&x[1])),
        "unravel_index" => x[0].unravel_index(&ints(&a["shape"])),
        "einsum" => {
            let refs: Vec<&Op> = x.iter().collect();
            one(b.einsum_many(a["spec"].as_str().unwrap(), &refs))
        }
        "conv_transpose" => {
            let pad = match &a["padding"] {
                Json::String(p) if p == "SAME" => ConvTransposePadding::Same,
                Json::String(p) if p == "VALID" => ConvTransposePadding::Valid,
                p => ConvTransposePadding::Explicit(
                    p.as_array()
                        .unwrap()
                        .iter()
                        .map(|lh| (lh[0].as_i64().unwrap(), lh[1].as_i64().unwrap()))
                        .collect(),
                ),
            };
            let n = x[0].rank().unwrap() - 2;
            one(x[0].conv_transpose(
                &x[1],
                &ints(&a["strides"]),
                &pad,
                &ints(&a["rhs_dilation"]),
                &ConvDims::channels_last(n),
                flag("transpose_kernel"),
            ))
        }
        "vectorize" => {
            let refs: Vec<&Op> = x.iter().collect();
            let sig = a["signature"].as_str().unwrap();
            one(match a["function"].as_str().unwrap() {
                "where_sub_mul" => b.vectorize(sig, &refs, |b, v| {
                    b.select(&v[0].gt(&v[1]), &(&v[0] - &v[1]), &(&v[0] * &v[1]))
                }),
                "dot_scaled" => b.vectorize(sig, &refs, |_, v| {
                    let dot = (&v[0] * &v[1]).sum(&[0], false);
                    &dot / &(v[0].amax(&[0], false) + 1.0)
                }),
                "normalize" => b.vectorize(sig, &refs, |_, v| &v[0] / &v[0].sum(&[0], false)),
                "matvec" => b.vectorize(sig, &refs, |_, v| v[0].dot(&v[1])),
                f => panic!("vectorize fn {f}"),
            })
        }
        "moveaxis" => one(x[0].moveaxis(axis("source").unwrap(), axis("destination").unwrap())),
        "swapaxes" => one(x[0].swapaxes(axis("a").unwrap(), axis("b").unwrap())),
        "unique" => one(x[0].unique(axis("size").unwrap(), a["fill"].as_f64())),
        "any" => one(x[0].any(&ints(&a["axes"]), flag("keepdims"))),
        "all" => one(x[0].all(&ints(&a["axes"]), flag("keepdims"))),
        o => panic!("op {o} not handled"),
    }
}

fn close(got: f64, want: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= 1e-6 + 4e-6 * want.abs()
}

#[test]
fn array_functions_match_jax() {
    let mut failures = Vec::new();
    let all = cases();
    for c in &all {
        let name = c["name"].as_str().unwrap();
        let b = Builder::new(name);
        let ins = c["inputs"].as_array().unwrap();
        let params: Vec<Op> = ins
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let s = Shape::array(ty_of(a["dtype"].as_str().unwrap()), &dims_of(a));
                b.parameter(i, s, &format!("x{i}"))
            })
            .collect();
        let outs = apply(&b, c["op"].as_str().unwrap(), &c["args"], &params);
        let refs: Vec<&Op> = outs.iter().collect();
        let m = match b.build_tuple(&refs) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: build error {e}"));
                continue;
            }
        };
        let bufs: Vec<Buffer> = ins.iter().map(upload_json).collect();
        let args: Vec<&Buffer> = bufs.iter().collect();
        let got = run(&m, &args);
        let want = c["outputs"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{name}: output count");
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            let wt = ty_of(w["dtype"].as_str().unwrap());
            if g.element_type().unwrap() != wt {
                failures.push(format!(
                    "{name}[{k}]: dtype {} (JAX {wt})",
                    g.element_type().unwrap()
                ));
                continue;
            }
            if g.dims().unwrap() != dims_of(w) {
                failures.push(format!(
                    "{name}[{k}]: dims {:?} (JAX {:?})",
                    g.dims().unwrap(),
                    dims_of(w)
                ));
                continue;
            }
            let (gv, wv) = (download(g), data_of(w));
            let exact = wt != ElementType::F32;
            let bad: Vec<String> = gv
                .iter()
                .zip(&wv)
                .enumerate()
                .filter(|(_, (g, w))| if exact { g != w } else { !close(**g, **w) })
                .map(|(i, (g, w))| format!("[{i}] {g} vs JAX {w}"))
                .collect();
            if !bad.is_empty() {
                failures.push(format!("{name}[{k}]: {}", bad.join(", ")));
            }
        }
    }
    assert!(all.len() >= 100, "{} cases", all.len());
    assert!(
        failures.is_empty(),
        "{} differences from JAX:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn gradients_against_finite_differences() {
    use fd::check;
    check("repeat", &[&[2, 3]], -1.0, 1.0, |p| {
        p[0].repeat(&[2, 0, 1], Some(1))
    });
    check("repeat_flat", &[&[2, 2]], -1.0, 1.0, |p| {
        p[0].repeat(&[3], None)
    });
    check("tile", &[&[2, 3]], -1.0, 1.0, |p| p[0].tile(&[2, 1, 2]));
    check("roll", &[&[3, 4]], -1.0, 1.0, |p| p[0].roll(-5, Some(1)));
    check("norm2", &[&[3, 4]], 0.5, 2.0, |p| {
        p[0].linalg_norm(NormOrd::Default, Some(&[1]), false)
    });
    check("norm3", &[&[5]], 0.5, 2.0, |p| {
        p[0].linalg_norm(NormOrd::P(3.0), None, false)
    });
    check("norm_inf", &[&[5]], 0.5, 2.0, |p| {
        p[0].linalg_norm(NormOrd::Inf, None, false)
    });
    check("norm_mat1", &[&[3, 4]], 0.5, 2.0, |p| {
        p[0].linalg_norm(NormOrd::P(1.0), None, false)
    });
    check("var", &[&[3, 4]], -1.0, 1.0, |p| {
        p[0].var_ddof(&[0], 1, false)
    });
    check("std", &[&[3, 4]], -1.0, 1.0, |p| {
        p[0].std_ddof(&[1], 0, true)
    });
    check("cumsum", &[&[3, 5]], -1.0, 1.0, |p| p[0].cumsum(1, false));
    check("cumsum_rev", &[&[6]], -1.0, 1.0, |p| p[0].cumsum(0, true));
    check("cumprod", &[&[2, 5]], 0.5, 1.5, |p| p[0].cumprod(1, false));
    check("cummax", &[&[7]], -1.0, 1.0, |p| p[0].cummax(0, false));
    check("cummin", &[&[7]], -1.0, 1.0, |p| p[0].cummin(0, true));
    check("tril", &[&[3, 4]], -1.0, 1.0, |p| p[0].tril(0));
    check("diag_get", &[&[3, 4]], -1.0, 1.0, |p| p[0].diag(1));
    check("diag_make", &[&[3]], -1.0, 1.0, |p| p[0].diag(-1));
    check("logaddexp", &[&[6], &[6]], -3.0, 3.0, |p| {
        p[0].logaddexp(&p[1])
    });
    check("log_sigmoid", &[&[6]], -5.0, 5.0, |p| p[0].log_sigmoid());
    check("outer", &[&[3], &[2, 2]], -1.0, 1.0, |p| p[0].outer(&p[1]));
    check("vdot", &[&[2, 3], &[6]], -1.0, 1.0, |p| p[0].vdot(&p[1]));
    check("einsum_chain", &[&[2, 3], &[3, 4], &[4]], -1.0, 1.0, |p| {
        p[0].builder()
            .einsum_many("ij,jk,k->i", &[&p[0], &p[1], &p[2]])
    });
    check("einsum_trace", &[&[3, 3]], -1.0, 1.0, |p| {
        p[0].builder().einsum_many("ii->", &[&p[0]])
    });
    check(
        "conv_transpose",
        &[&[1, 4, 2], &[3, 3, 2]],
        -1.0,
        1.0,
        |p| {
            p[0].conv_transpose(
                &p[1],
                &[2],
                &ConvTransposePadding::Same,
                &[],
                &ConvDims::channels_last(1),
                true,
            )
        },
    );
    check("vectorize", &[&[2, 1, 3], &[4, 3]], 0.5, 1.5, |p| {
        p[0].builder()
            .vectorize("(n),(n)->()", &[&p[0], &p[1]], |_, v| {
                (&v[0] * &v[1]).sum(&[0], false)
            })
    });
    check("moveaxis", &[&[2, 3, 4]], -1.0, 1.0, |p| {
        p[0].moveaxis(0, -1)
    });
    check("swapaxes", &[&[2, 3, 4]], -1.0, 1.0, |p| {
        p[0].swapaxes(0, 2)
    });
    check("nan_to_num", &[&[5]], -1.0, 1.0, |p| {
        p[0].nan_to_num(0.0, None, None)
    });
    check("triu", &[&[2, 3, 3]], -1.0, 1.0, |p| p[0].triu(1));
    check("norm_neginf", &[&[5]], 0.5, 2.0, |p| {
        p[0].linalg_norm(NormOrd::NegInf, None, false)
    });
    check(
        "einsum_ellipsis",
        &[&[2, 3, 4], &[2, 4, 5]],
        -1.0,
        1.0,
        |p| {
            p[0].builder()
                .einsum_many("...ij,...jk->...ik", &[&p[0], &p[1]])
        },
    );
    check("remainder", &[&[5]], 0.1, 0.9, |p| {
        let y = p[0].builder().constant(-1.0f64);
        p[0].remainder(&y.broadcast_to(&[5]))
    });
}

/// Bad arguments are build errors naming the op and the caller's line.
#[test]
fn bad_arguments_are_errors_at_the_callers_line() {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let i = b.parameter(1, Shape::of::<f32>(&[4]), "i");
    let line = line!();
    let bad: Vec<(&str, Op)> = vec![
        ("repeat", x.repeat(&[1, 2], Some(1))),
        ("repeat", x.repeat(&[-1], Some(0))),
        ("repeat", x.repeat(&[1], Some(2))),
        ("tile", x.tile(&[-1])),
        ("norm", x.linalg_norm(NormOrd::Fro, Some(&[0]), false)),
        ("norm", x.linalg_norm(NormOrd::P(2.0), Some(&[0, 1]), false)),
        (
            "norm",
            x.linalg_norm(NormOrd::Default, Some(&[0, 0]), false),
        ),
        ("cumsum", x.cumsum(2, false)),
        ("tril", i.tril(0)),
        ("diag", x.reshape(&[1, 2, 3]).diag(0)),
        ("unravel_index", i.unravel_index(&[2, 2])[0].clone()),
        ("vdot", x.vdot(&i)),
        ("eye", b.eye(-1, 3, 0, ElementType::F32)),
        ("linspace", b.linspace(0.0, 1.0, -2, true, ElementType::F32)),
        ("argsort", x.argsort(3, false)),
        ("unique", i.slice_in_dim(0, 0, 1, 0).unique(2, None)),
        ("einsum", b.einsum_many("ij,jk->ik", &[&x, &i])),
        ("einsum", b.einsum_many("ij,ij->", &[&x])),
        (
            "vectorize",
            b.vectorize("(n),(n)->()", &[&x], |_, v| v[0].clone()),
        ),
        (
            "vectorize",
            b.vectorize("(n)->()", &[&x], |_, v| v[0].clone()),
        ),
    ];
    let end = line!();
    for (op, o) in &bad {
        let e = o.dims().expect_err(op).to_string();
        assert!(e.contains(op), "error for {op} does not name it: {e}");
        // The location is this file, at a line of the list above.
        let at = e
            .split("ops_parity.rs:")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .and_then(|l| l.parse::<u32>().ok());
        assert!(
            at.is_some_and(|l| l > line && l < end),
            "error for {op} does not point at the caller's line: {e}"
        );
    }
}

#[derive(xlaclient::Tree)]
struct Layer<T> {
    w: T,
    b: T,
}

#[derive(xlaclient::Tree)]
struct Model<T> {
    layers: Vec<Layer<T>>,
    step: T,
}

/// `leaves_with_path`, `map_with_path` and `tree::keystr` against JAX's key paths of
/// the same trees (dataclasses holding lists in JAX, derived structs holding `Vec`s
/// here).
#[test]
fn tree_key_paths_match_jax() {
    use xlaclient::Tree;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/parity_jax.json"
    ))
    .unwrap();
    let j: Json = serde_json::from_str(&text).unwrap();
    let want = |k: &str| -> Vec<String> {
        j["tree_paths"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let model = || Model {
        layers: vec![Layer { w: 1.0f32, b: 2.0 }, Layer { w: 3.0, b: 4.0 }],
        step: 5.0f32,
    };
    let m = model();
    let paths: Vec<String> = m.leaves_with_path().into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, want("model"));
    let simple: Vec<String> = m
        .leaf_paths()
        .iter()
        .map(|p| xlaclient::tree::keystr(p, true, "/"))
        .collect();
    assert_eq!(simple, want("model_simple_slash"));
    let t = (model(), vec![6.0f32]);
    let paths: Vec<String> = t.leaves_with_path().into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, want("tuple_model_list"));
    // map_with_path sees the same paths, in the same order as the leaves.
    let seen = t.map_with_path(|p, x| (p.len() as f32) * 100.0 + x);
    let expect: Vec<f32> = want("tuple_model_list")
        .iter()
        .zip([1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
        .map(|(p, x)| p.len() as f32 * 100.0 + x)
        .collect();
    assert_eq!(seen.into_leaves(), expect);
}

/// `promote_types` against `jnp.promote_types` (64-bit types on) for every pair of
/// the crate's element types.
#[test]
fn promotion_matches_jax_for_every_pair() {
    use xlaclient::ops::arrays::promote_types;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/parity_jax.json"
    ))
    .unwrap();
    let j: Json = serde_json::from_str(&text).unwrap();
    let ty = |n: &str| match n {
        "bool" => ElementType::Pred,
        "uint8" => ElementType::U8,
        "uint16" => ElementType::U16,
        "uint32" => ElementType::U32,
        "uint64" => ElementType::U64,
        "int8" => ElementType::S8,
        "int16" => ElementType::S16,
        "int32" => ElementType::S32,
        "int64" => ElementType::S64,
        "bfloat16" => ElementType::Bf16,
        "float16" => ElementType::F16,
        "float32" => ElementType::F32,
        "float64" => ElementType::F64,
        "complex64" => ElementType::C64,
        "complex128" => ElementType::C128,
        t => panic!("{t}"),
    };
    let table = j["promote_types_x64"].as_object().unwrap();
    let mut n = 0;
    for (a, row) in table {
        for (b, want) in row.as_object().unwrap() {
            assert_eq!(
                promote_types(ty(a), ty(b)),
                ty(want.as_str().unwrap()),
                "promote_types({a}, {b})"
            );
            n += 1;
        }
    }
    assert_eq!(n, 225);
}
