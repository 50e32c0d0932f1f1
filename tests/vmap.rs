//! `vmap`, `jvp`, `jacfwd`, `jacrev` and `hessian` on programs whose answers were
//! recorded from JAX 0.10.2 by `bench/record_vmap_jax.py` (`tests/data/vmap_jax.json`:
//! per-example gradients of an MLP, a Hessian, a jvp, vmap over a while loop with
//! per-example trip counts, over cond/switch with batched selectors, over a scan,
//! batched sampling bit for bit, and collectives over a named vmapped axis).

mod common;

use common::{run, upload};
use serde_json::Value as Json;
use xlaclient::{Builder, Comparison, ElementType, Op, Shape, Tree, Vmap};

fn data() -> &'static Json {
    static D: std::sync::OnceLock<Json> = std::sync::OnceLock::new();
    D.get_or_init(|| {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/vmap_jax.json"
        ))
        .unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

/// One input or output of an entry: its shape and values (as f64).
fn field(entry: &str, kind: &str, name: &str) -> (Vec<i64>, Vec<f64>) {
    let e = &data()["entries"][entry][kind];
    let f = e
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{entry}: no {kind} {name}"));
    let dims = f["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect();
    let vals = f["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    (dims, vals)
}

fn input_f32(entry: &str, name: &str) -> (Vec<i64>, Vec<f32>) {
    let (d, v) = field(entry, "inputs", name);
    (d, v.into_iter().map(|x| x as f32).collect())
}

fn output_f32(entry: &str, name: &str) -> Vec<f32> {
    field(entry, "outputs", name)
        .1
        .into_iter()
        .map(|x| x as f32)
        .collect()
}

fn close(got: &[f32], want: &[f32], rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rtol * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, JAX {w}"
        );
    }
}

fn param(b: &Builder, k: usize, dims: &[i64], name: &str) -> Op {
    b.parameter(k, Shape::of::<f32>(dims), name)
}

/// Runs `module` on f32 inputs and returns every output as f32 (or converted).
fn exec(module: &xlaclient::Computation, inputs: &[(Vec<i64>, Vec<f32>)]) -> Vec<Vec<f32>> {
    let bufs: Vec<_> = inputs.iter().map(|(d, v)| upload(v, d)).collect();
    let refs: Vec<_> = bufs.iter().collect();
    run(module, &refs)
        .iter()
        .map(|b| b.to_vec::<f32>().unwrap())
        .collect()
}

#[test]
fn per_example_gradients_of_an_mlp_equal_jax() {
    let e = "mlp_per_example_grads";
    let names = ["w1", "b1", "w2", "b2", "x", "t"];
    let ins: Vec<_> = names.iter().map(|n| input_f32(e, n)).collect();
    let b = Builder::new("per_example");
    let ps: Vec<Op> = names
        .iter()
        .enumerate()
        .map(|(k, n)| param(&b, k, &ins[k].0, n))
        .collect();
    let params = (ps[0].clone(), ps[1].clone(), ps[2].clone(), ps[3].clone());
    let spec = Vmap::new().in_axes([None, None, None, None, Some(0), Some(0)]);
    let (grads, losses) = b.vmap(
        &spec,
        (params, ps[4].clone(), ps[5].clone()),
        |b, (params, x, t)| {
            let (w1, b1, w2, b2) = params.clone();
            let loss = {
                let h = (x.matmul(&w1) + &b1).tanh();
                let y = h.matmul(&w2) + &b2;
                let d = &y - &t;
                (&d * &d).reduce_sum(&[0]) * 0.5
            };
            (b.grad(&loss, &params), loss)
        },
    );
    let (g1, g2, g3, g4) = grads;
    let m = b.build_tuple(&[&g1, &g2, &g3, &g4, &losses]).unwrap();
    let out = exec(&m, &ins);
    for (k, n) in [
        "grad_w1",
        "grad_b1",
        "grad_w2",
        "grad_b2",
        "per_example_loss",
    ]
    .iter()
    .enumerate()
    {
        close(&out[k], &output_f32(e, n), 1e-5, n);
    }
}

#[test]
fn clipped_per_example_gradients_equal_jax() {
    // DP-SGD: each example's gradient clipped to norm 1, then averaged.
    let e = "per_example_grad_clip";
    let names = ["w1", "b1", "w2", "b2", "x", "t"];
    let ins: Vec<_> = names.iter().map(|n| input_f32(e, n)).collect();
    let b = Builder::new("clip");
    let ps: Vec<Op> = names
        .iter()
        .enumerate()
        .map(|(k, n)| param(&b, k, &ins[k].0, n))
        .collect();
    let params = vec![ps[0].clone(), ps[1].clone(), ps[2].clone(), ps[3].clone()];
    let spec = Vmap::new().in_axes([None, None, None, None, Some(0), Some(0)]);
    let clipped = b.vmap(
        &spec,
        (params, ps[4].clone(), ps[5].clone()),
        |b, (p, x, t)| {
            let h = (x.matmul(&p[0]) + &p[1]).tanh();
            let y = h.matmul(&p[2]) + &p[3];
            let d = &y - &t;
            let loss = (&d * &d).reduce_sum(&[0]) * 0.5;
            let g = b.grad(&loss, &p);
            let sq = g
                .iter()
                .map(|gi| {
                    let axes: Vec<i64> = (0..gi.rank().unwrap() as i64).collect();
                    (gi * gi).reduce_sum(&axes)
                })
                .reduce(|a, c| a + c)
                .unwrap();
            let scale = b.constant(1f32) / sq.sqrt().max(&b.constant(1f32));
            g.iter().map(|gi| gi * &scale).collect::<Vec<_>>()
        },
    );
    let means: Vec<Op> = clipped.iter().map(|c| c.reduce_sum(&[0]) / 5.0).collect();
    let refs: Vec<&Op> = means.iter().collect();
    let m = b.build_tuple(&refs).unwrap();
    let out = exec(&m, &ins);
    for (k, n) in ["w1", "b1", "w2", "b2"].iter().enumerate() {
        let name = format!("mean_clipped_grad_{n}");
        close(&out[k], &output_f32(e, &name), 1e-5, &name);
    }
}

#[test]
fn hessian_jacfwd_and_jacrev_equal_jax() {
    let e = "hessian_small";
    let (ad, av) = input_f32(e, "A");
    let (wd, wv) = input_f32(e, "w");
    let b = Builder::new("hess");
    let a = param(&b, 0, &ad, "A");
    let w = param(&b, 1, &wd, "w");
    let f = |w: &Op| {
        let t = a.matmul(w).tanh();
        (&t * &t).reduce_sum(&[0]) + (w * w * w * w).reduce_sum(&[0]) * 0.1
    };
    let h = b.hessian(&w, f);
    let grad_of = |w: &Op| {
        let loss = f(w);
        w.builder().grad(&loss, w)
    };
    let jf = b.jacfwd(&w, grad_of);
    let jr = b.jacrev(&w, |w| a.matmul(w).tanh());
    let jr_fwd = b.jacfwd(&w, |w| a.matmul(w).tanh());
    let m = b.build_tuple(&[&h, &jf, &jr, &jr_fwd]).unwrap();
    let out = exec(&m, &[(ad, av), (wd, wv)]);
    close(&out[0], &output_f32(e, "hessian"), 1e-5, "hessian");
    close(&out[1], &output_f32(e, "jacfwd_grad"), 1e-5, "jacfwd(grad)");
    close(&out[2], &output_f32(e, "jacrev_g"), 1e-5, "jacrev");
    close(&out[3], &output_f32(e, "jacrev_g"), 1e-5, "jacfwd = jacrev");
}

#[test]
fn jvp_equals_jax() {
    let e = "jvp_program";
    let ins: Vec<_> = ["x", "B", "v"].iter().map(|n| input_f32(e, n)).collect();
    let b = Builder::new("jvp");
    let x = param(&b, 0, &ins[0].0, "x");
    let bm = param(&b, 1, &ins[1].0, "B");
    let v = param(&b, 2, &ins[2].0, "v");
    let (y, ty) = b.jvp_fn(x, v, |x| {
        let s = x.cos().reduce_sum(&[0, 1]);
        (x.matmul(&bm).exp() + 1.0).log() * &s
    });
    let m = b.build_tuple(&[&y, &ty]).unwrap();
    let out = exec(&m, &ins);
    close(&out[0], &output_f32(e, "primal"), 1e-5, "primal");
    close(&out[1], &output_f32(e, "tangent"), 1e-5, "tangent");
}

#[test]
fn vmap_of_a_while_loop_with_per_example_trip_counts_equals_jax() {
    let e = "vmap_while_trips";
    let (xd, xv) = input_f32(e, "x");
    let nv: Vec<i32> = field(e, "inputs", "n")
        .1
        .iter()
        .map(|v| *v as i32)
        .collect();
    let b = Builder::new("trips");
    let x = param(&b, 0, &xd, "x");
    let n = b.parameter(1, Shape::of::<i32>(&[5]), "n");
    let (value, count) = b.vmap(&Vmap::new(), (x, n), |b, (x, n)| {
        let zero = b.constant(0i32);
        b.while_loop(
            (x, zero),
            |(_, i)| i.compare(&n, Comparison::Lt),
            |(v, i)| (&v * 1.5 + 1.0, &i + 1),
        )
    });
    let m = b.build_tuple(&[&value, &count]).unwrap();
    let bx = upload(&xv, &xd);
    let bn = upload(&nv, &[5]);
    let out = run(&m, &[&bx, &bn]);
    close(
        &out[0].to_vec::<f32>().unwrap(),
        &output_f32(e, "value"),
        0.0,
        "value",
    );
    let want: Vec<i32> = field(e, "outputs", "count")
        .1
        .iter()
        .map(|v| *v as i32)
        .collect();
    assert_eq!(out[1].to_vec::<i32>().unwrap(), want);
}

#[test]
fn vmap_of_cond_and_switch_with_batched_selectors_equals_jax() {
    let e = "vmap_cond";
    let p: Vec<bool> = field(e, "inputs", "p")
        .1
        .iter()
        .map(|v| *v != 0.0)
        .collect();
    let (xd, xv) = input_f32(e, "x");
    let idx: Vec<i32> = field(e, "inputs", "index")
        .1
        .iter()
        .map(|v| *v as i32)
        .collect();
    let (sd, sv) = input_f32(e, "x_switch");
    let b = Builder::new("conds");
    let pp = b.parameter(0, Shape::of::<bool>(&[3]), "p");
    let x = param(&b, 1, &xd, "x");
    let ii = b.parameter(2, Shape::of::<i32>(&[4]), "index");
    let xs = param(&b, 3, &sd, "xs");
    let c = b.vmap(&Vmap::new(), (pp, x), |b, (p, x)| {
        b.cond(&p, x, |x| &x * 2.0, |x| &x - 1.0)
    });
    let s = b.vmap(&Vmap::new(), (ii, xs), |b, (i, x)| {
        b.switch(
            &i,
            x,
            Box::new(|x: Op| &x + 1.0),
            vec![Box::new(|x: Op| &x * &x), Box::new(|x: Op| -&x)],
        )
    });
    let m = b.build_tuple(&[&c, &s]).unwrap();
    let bufs = [
        upload(&p, &[3]),
        upload(&xv, &xd),
        upload(&idx, &[4]),
        upload(&sv, &sd),
    ];
    let out = run(&m, &[&bufs[0], &bufs[1], &bufs[2], &bufs[3]]);
    close(
        &out[0].to_vec::<f32>().unwrap(),
        &output_f32(e, "cond"),
        0.0,
        "cond",
    );
    close(
        &out[1].to_vec::<f32>().unwrap(),
        &output_f32(e, "switch"),
        0.0,
        "switch",
    );
}

#[test]
fn vmap_of_a_scan_equals_jax() {
    let e = "vmap_scan";
    let ins: Vec<_> = ["c0", "xs"].iter().map(|n| input_f32(e, n)).collect();
    let b = Builder::new("scan");
    let c0 = param(&b, 0, &ins[0].0, "c0");
    let xs = param(&b, 1, &ins[1].0, "xs");
    let (c, ys) = b.vmap(&Vmap::new(), (c0, xs), |b, (c0, xs)| {
        b.scan(c0, xs, |c: Op, x: Op| (&c * 0.9 + &x, c))
    });
    let m = b.build_tuple(&[&c, &ys]).unwrap();
    let out = exec(&m, &ins);
    close(&out[0], &output_f32(e, "carry"), 1e-6, "carry");
    close(&out[1], &output_f32(e, "ys"), 1e-6, "ys");
}

#[test]
fn batched_sampling_is_jaxs_bit_for_bit() {
    let e = "batched_sampling";
    let keys: Vec<u32> = field(e, "inputs", "keys")
        .1
        .iter()
        .map(|v| *v as u32)
        .collect();
    let b = Builder::new("samplers");
    let k = b.parameter(0, Shape::of::<u32>(&[4, 2]), "keys");
    let outs = b.vmap(&Vmap::new(), k, |b, k| {
        let logits = b.constant_vec(&[0f32, 1.0, 2.0]);
        vec![
            k.normal(&[3], ElementType::F32),
            k.uniform(&[3], ElementType::F32, 0.0, 1.0),
            k.bernoulli(0.3, &[5]).convert(ElementType::U32),
            k.randint(&[4], 0, 10).convert(ElementType::U32),
            k.categorical(&logits, -1).convert(ElementType::U32),
            k.random_bits(&[2], ElementType::U32),
            k.random_split(2),
            k.fold_in(7),
        ]
    });
    let refs: Vec<&Op> = outs.iter().collect();
    let m = b.build_tuple(&refs).unwrap();
    let bk = upload(&keys, &[4, 2]);
    let out = run(&m, &[&bk]);
    let normal = out[0].to_vec::<f32>().unwrap();
    let uniform = out[1].to_vec::<f32>().unwrap();
    close(&normal, &output_f32(e, "vmap/normal"), 0.0, "normal");
    close(&uniform, &output_f32(e, "vmap/uniform"), 0.0, "uniform");
    for (k, n) in [
        "bernoulli",
        "randint",
        "categorical",
        "bits",
        "split",
        "fold_in_7",
    ]
    .iter()
    .enumerate()
    {
        let got = out[k + 2].to_vec::<u32>().unwrap();
        let want: Vec<u32> = field(e, "outputs", &format!("vmap/{n}"))
            .1
            .iter()
            .map(|v| *v as i64 as u32)
            .collect();
        assert_eq!(got, want, "{n}");
    }
}

#[test]
fn collectives_over_a_named_vmapped_axis_equal_jax() {
    let e = "vmap_mean_axis_name";
    let ins = vec![input_f32(e, "x")];
    let b = Builder::new("named");
    let x = param(&b, 0, &ins[0].0, "x");
    let spec = Vmap::new().axis_name("b");
    let centered = b.vmap(&spec, x.clone(), |_, x| &x - x.pmean_axis("b"));
    let total = b.vmap(&spec, x, |_, x| x.psum_axis("b"));
    let m = b.build_tuple(&[&centered, &total]).unwrap();
    let out = exec(&m, &ins);
    close(&out[0], &output_f32(e, "pmean_centered"), 1e-6, "pmean");
    close(&out[1], &output_f32(e, "psum"), 1e-6, "psum");
}

#[test]
fn vmap_axes_nesting_and_errors() {
    // in/out axes other than 0 and nesting: against plain Rust.
    let b = Builder::new("axes");
    let x = b.parameter(0, Shape::of::<f32>(&[3, 4]), "x"); // batch along axis 1
    let w = b.parameter(1, Shape::of::<f32>(&[3]), "w");
    let y = b.vmap(
        &Vmap::new().in_axes([Some(1), None]).out_axes(1),
        (x.clone(), w.clone()),
        |_, (col, w)| &col * &w, // [3]
    ); // [3, 4]
    // Nested: outer over rows of x, inner over elements of each row.
    let z = b.vmap(&Vmap::new(), x.clone(), |b, row| {
        b.vmap(&Vmap::new(), row, |_, e| &e * &e + 1.0)
    });
    let m = b.build_tuple(&[&y, &z]).unwrap();
    let xv: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let wv = vec![1.0f32, -2.0, 3.0];
    let out = run(&m, &[&upload(&xv, &[3, 4]), &upload(&wv, &[3])]);
    let want_y: Vec<f32> = (0..12).map(|i| xv[i] * wv[i / 4]).collect();
    let want_z: Vec<f32> = xv.iter().map(|v| v * v + 1.0).collect();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want_y);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), want_z);

    // Mismatched batch sizes: an error naming vmap and the shapes.
    let b = Builder::new("bad");
    let a = b.parameter(0, Shape::of::<f32>(&[3, 2]), "a");
    let c = b.parameter(1, Shape::of::<f32>(&[4, 2]), "c");
    let bad = b.vmap(&Vmap::new(), (a, c), |_, (a, c)| &a + &c);
    let err = b.build(&bad).unwrap_err().to_string();
    assert!(err.contains("vmap") && err.contains("4 examples"), "{err}");
    assert!(err.contains("tests/vmap.rs"), "{err}");

    // An op without a rule: an opaque custom-call kernel.
    let b = Builder::new("norule");
    let xs = b.parameter(0, Shape::of::<f32>(&[3, 5]), "xs");
    let attrs = xlaclient::ops::misc::CustomCallAttrs {
        target: "my_kernel".into(),
        opaque: Vec::new(),
        api_version: 1,
        has_side_effect: false,
    };
    let out = b.vmap(&Vmap::new(), xs, |b, x| {
        b.custom_call(&attrs, &[&x], Shape::of::<f32>(&[5]))
    });
    let err = b.build(&out).unwrap_err().to_string();
    assert!(
        err.contains("no batching rule for `custom-call`") && err.contains("tests/vmap.rs"),
        "{err}"
    );
}

#[test]
fn jvp_through_loops_and_conditionals_matches_finite_differences() {
    // f(x) = fori 5: x = sin(x) * 1.1 + cond(sum(x) > 0, x*x, -x)*0.1
    let build = || {
        let b = Builder::new("jvp_loop");
        let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
        let v = b.parameter(1, Shape::of::<f32>(&[3]), "v");
        let f = |x: Op| {
            let b = x.builder();
            b.fori_loop(0, 5, x, |_, x| {
                let s = x.reduce_sum(&[0]);
                let p = s.compare(&b.constant(0f32), Comparison::Gt);
                let c = b.cond(&p, x.clone(), |x| &x * &x, |x| -&x);
                x.sin() * 1.1 + c * 0.1
            })
        };
        let (y, t) = b.jvp_fn(x, v, f);
        (b.build_tuple(&[&y, &t]).unwrap(), ())
    };
    let (m, ()) = build();
    let x0 = vec![0.3f32, -0.2, 0.5];
    let v = vec![1.0f32, 0.5, -0.7];
    let out = run(&m, &[&upload(&x0, &[3]), &upload(&v, &[3])]);
    let t = out[1].to_vec::<f32>().unwrap();
    // Central differences of the primal output along v.
    let h = 1e-3f32;
    let at = |s: f32| {
        let xs: Vec<f32> = x0.iter().zip(&v).map(|(a, d)| a + s * d).collect();
        run(&m, &[&upload(&xs, &[3]), &upload(&v, &[3])])[0]
            .to_vec::<f32>()
            .unwrap()
    };
    let (p, q) = (at(h), at(-h));
    for i in 0..3 {
        let fd = (p[i] - q[i]) / (2.0 * h);
        assert!(
            (fd - t[i]).abs() < 2e-2 * (1.0 + fd.abs()),
            "{i}: jvp {} fd {fd}",
            t[i]
        );
    }
}

#[test]
fn vmap_of_grad_equals_grad_per_example_and_grad_of_vmap_sums() {
    // grad of vmap: the gradient of the summed per-example losses is the sum of
    // the per-example gradients.
    let b = Builder::new("grad_of_vmap");
    let w = b.parameter(0, Shape::of::<f32>(&[3]), "w");
    let xs = b.parameter(1, Shape::of::<f32>(&[4, 3]), "xs");
    let spec = Vmap::new().in_axes([None, Some(0)]);
    let per = b.vmap(&spec, (w.clone(), xs.clone()), |b, (w, x)| {
        let l = (&w * &x).reduce_sum(&[0]).tanh();
        b.grad(&l, &w)
    });
    let losses = b.vmap(&spec, (w.clone(), xs), |_, (w, x)| {
        (&w * &x).reduce_sum(&[0]).tanh()
    });
    let total = losses.reduce_sum(&[0]);
    let g = b.grad(&total, &w);
    let summed = per.reduce_sum(&[0]);
    let m = b.build_tuple(&[&g, &summed, &per]).unwrap();
    let wv = vec![0.5f32, -0.3, 0.8];
    let xv: Vec<f32> = (0..12).map(|i| ((i as f32) * 0.7).sin()).collect();
    let out = run(&m, &[&upload(&wv, &[3]), &upload(&xv, &[4, 3])]);
    let g = out[0].to_vec::<f32>().unwrap();
    let s = out[1].to_vec::<f32>().unwrap();
    let per = out[2].to_vec::<f32>().unwrap();
    close(&g, &s, 1e-6, "grad(vmap) = sum(vmap(grad))");
    // Plain Rust: d tanh(w·x)/dw = (1 - tanh²) x.
    for e in 0..4 {
        let x = &xv[e * 3..e * 3 + 3];
        let d: f32 = wv.iter().zip(x).map(|(a, b)| a * b).sum();
        let k = 1.0 - d.tanh().powi(2);
        for j in 0..3 {
            assert!((per[e * 3 + j] - k * x[j]).abs() < 1e-5);
        }
    }
    let _ = Tree::<Op>::num_leaves(&());
}

#[test]
fn gradients_through_collectives_over_a_vmapped_axis_transpose_them() {
    // Per example: loss_i = sum((x_i - pmean(x))^2); its gradient inside the vmap
    // (JAX's convention: pmean's transpose is pmean) against plain Rust.
    let b = Builder::new("grad_pmean");
    let xs = b.parameter(0, Shape::of::<f32>(&[4, 2]), "xs");
    let g = b.vmap(&Vmap::new().axis_name("b"), xs, |b, x| {
        let c = &x - x.pmean_axis("b");
        let loss = (&c * &c).reduce_sum(&[0]);
        b.grad(&loss, &x)
    });
    let m = b.build(&g).unwrap();
    let xv: Vec<f32> = (0..8).map(|i| (i as f32 * 0.9).cos()).collect();
    let got = run(&m, &[&upload(&xv, &[4, 2])])[0]
        .to_vec::<f32>()
        .unwrap();
    // d/dx_i of sum((x_i - m)^2) with m's cotangent averaged over the batch:
    // 2c_i - mean_j(2c_j) = 2c_i (the centred c sums to zero).
    for j in 0..2 {
        let mean: f32 = (0..4).map(|e| xv[e * 2 + j]).sum::<f32>() / 4.0;
        for e in 0..4 {
            let want = 2.0 * (xv[e * 2 + j] - mean);
            assert!((got[e * 2 + j] - want).abs() < 1e-5, "{e},{j}");
        }
    }
}

#[test]
fn vmap_keeps_a_custom_vjp_rule_and_jvp_refuses_it() {
    // A function whose backward rule clips the cotangent to [-1, 1]: per example,
    // the gradient of 3 * sum(f(x)) is clip(3) = 1 per element (not 3).
    let b = Builder::new("custom");
    let xs = b.parameter(0, Shape::of::<f32>(&[4, 2]), "xs");
    let g = b.vmap(&Vmap::new(), xs.clone(), |b, x| {
        let y = b.custom_vjp(
            "clipped",
            &[&x],
            |_, a| vec![a[0].clone()],
            |_, _, ct| vec![ct[0].clip(-1.0, 1.0)],
        );
        let loss = y[0].reduce_sum(&[0]) * 3.0;
        b.grad(&loss, &x)
    });
    let m = b.build(&g).unwrap();
    let out = run(&m, &[&upload(&[0.5f32; 8], &[4, 2])])[0]
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(out, vec![1.0; 8]);
    // grad of vmap: the batched call keeps the rule too.
    let b = Builder::new("custom_outer");
    let xs = b.parameter(0, Shape::of::<f32>(&[4, 2]), "xs");
    let ys = b.vmap(&Vmap::new(), xs.clone(), |b, x| {
        b.custom_vjp(
            "clipped",
            &[&x],
            |_, a| vec![a[0].clone()],
            |_, _, ct| vec![ct[0].clip(-1.0, 1.0)],
        )
        .remove(0)
    });
    let g = b.grad(&(ys.reduce_sum(&[0, 1]) * 3.0), &xs);
    let m = b.build(&g).unwrap();
    let out = run(&m, &[&upload(&[0.5f32; 8], &[4, 2])])[0]
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(out, vec![1.0; 8]);
    // Forward mode through it is an error naming the op and the line.
    let b = Builder::new("custom_jvp");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let v = b.parameter(1, Shape::of::<f32>(&[2]), "v");
    let (_, t) = b.jvp_fn(x, v, |x| {
        x.builder()
            .custom_vjp(
                "c",
                &[&x],
                |_, a| vec![a[0].sin()],
                |_, _, ct| vec![ct[0].clone()],
            )
            .remove(0)
    });
    let err = b.build(&t).unwrap_err().to_string();
    assert!(
        err.contains("no tangent rule for `call`") && err.contains("custom_vjp"),
        "{err}"
    );
}

#[test]
fn jacobians_and_hessians_on_trees() {
    // f(w, c) = (w c, sin(c) * sum(w)): jacfwd_tree = jacrev_tree, and both equal
    // plain-Rust derivatives; hessian_tree of sum(a²)·c is [[2c I, 2a], [2aᵀ, 0]].
    let b = Builder::new("trees");
    let w = b.parameter(0, Shape::of::<f32>(&[2, 3]), "w");
    let c = b.parameter(1, Shape::of::<f32>(&[3]), "c");
    let f = |(w, c): (Op, Op)| (w.matmul(&c), c.sin() * w.reduce_sum(&[0, 1]));
    let jf = b.jacfwd_tree(&(w.clone(), c.clone()), f);
    let jr = b.jacrev_tree(&(w.clone(), c.clone()), f);
    let a = b.parameter(2, Shape::of::<f32>(&[2]), "a");
    let s = b.parameter(3, Shape::of::<f32>(&[]), "s");
    let h = b.hessian_tree(&(a, s), |(a, s)| (&a * &a).reduce_sum(&[0]) * &s);
    let mut outs: Vec<&Op> = Vec::new();
    for j in jf.iter().chain(&jr).chain(&h) {
        outs.extend(j.iter());
    }
    let m = b.build_tuple(&outs).unwrap();
    let wv = [0.1f32, -0.2, 0.3, 0.4, 0.5, -0.6];
    let cv = [0.7f32, -0.8, 0.9];
    let av = [1.5f32, -2.0];
    let sv = [0.25f32];
    let r = run(
        &m,
        &[
            &upload(&wv, &[2, 3]),
            &upload(&cv, &[3]),
            &upload(&av, &[2]),
            &upload(&sv, &[]),
        ],
    );
    let v: Vec<Vec<f32>> = r.iter().map(|x| x.to_vec::<f32>().unwrap()).collect();
    // Forward and reverse agree block by block.
    for k in 0..4 {
        close(
            &v[k],
            &v[k + 4],
            1e-6,
            &format!("jacfwd vs jacrev block {k}"),
        );
    }
    // d(w c)_i / d w_kl = δ_ik c_l ; d(w c)_i / d c_l = w_il.
    let mut want = vec![0f32; 12];
    for i in 0..2 {
        for l in 0..3 {
            want[i * 6 + i * 3 + l] = cv[l];
        }
    }
    close(&v[0], &want, 1e-6, "d(wc)/dw");
    close(&v[1], &wv, 1e-6, "d(wc)/dc");
    // d(sin(c) S)/dw = sin(c) ⊗ ones; d/dc = diag(cos(c)) S.
    let sum: f32 = wv.iter().sum();
    let want: Vec<f32> = (0..3).flat_map(|l| vec![cv[l].sin(); 6]).collect();
    close(&v[2], &want, 1e-6, "d(sin c S)/dw");
    let mut want = vec![0f32; 9];
    for l in 0..3 {
        want[l * 3 + l] = cv[l].cos() * sum;
    }
    close(&v[3], &want, 1e-6, "d(sin c S)/dc");
    // Hessian blocks.
    close(&v[8], &[0.5, 0.0, 0.0, 0.5], 1e-6, "H_aa");
    close(&v[9], &[3.0, -4.0], 1e-6, "H_as");
    close(&v[10], &[3.0, -4.0], 1e-6, "H_sa");
    close(&v[11], &[0.0], 1e-6, "H_ss");
}

#[test]
fn vmap_inside_a_loop_body_and_collectives_of_an_enclosing_vmap() {
    // A fori_loop whose body is a vmap: x_{k+1} = vmap(e -> 0.5 e + sum(row))(x_k).
    let b = Builder::new("loop_of_vmap");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let y = b.fori_loop(0, 3, x.clone(), |_, x| {
        let b = x.builder();
        b.vmap(&Vmap::new(), x, |_, row| &row * 0.5 + row.reduce_sum(&[0]))
    });
    // Nested vmaps, the inner function summing over the outer axis `i` and
    // averaging over the inner axis `j`.
    let z = b.vmap(&Vmap::new().axis_name("i"), x.clone(), |b, row| {
        b.vmap(&Vmap::new().axis_name("j"), row, |_, e| {
            e.psum_axis("i") - e.pmean_axis("j")
        })
    });
    let m = b.build_tuple(&[&y, &z]).unwrap();
    let xv = [1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0];
    let out = run(&m, &[&upload(&xv, &[2, 3])]);
    let mut want = xv.to_vec();
    for _ in 0..3 {
        for r in 0..2 {
            let s: f32 = want[r * 3..r * 3 + 3].iter().sum();
            for c in 0..3 {
                want[r * 3 + c] = 0.5 * want[r * 3 + c] + s;
            }
        }
    }
    close(
        &out[0].to_vec::<f32>().unwrap(),
        &want,
        1e-6,
        "loop of vmap",
    );
    let mut want_z = vec![0f32; 6];
    for r in 0..2 {
        let mean: f32 = xv[r * 3..r * 3 + 3].iter().sum::<f32>() / 3.0;
        for c in 0..3 {
            want_z[r * 3 + c] = xv[c] + xv[3 + c] - mean;
        }
    }
    close(
        &out[1].to_vec::<f32>().unwrap(),
        &want_z,
        1e-6,
        "nested axes",
    );
}

#[test]
fn vmap_of_grad_through_a_scan_runs_the_forward_loop_once() {
    // The gradient of a scan stores its residuals in a loop that also serves the
    // forward results; batched, the program keeps that: as many loops as the
    // unbatched gradient (the storing forward loop and the backward loop).
    let loops = |batched: bool| {
        let b = Builder::new("scan_grad");
        let w = b.parameter(0, Shape::of::<f32>(&[3]), "w");
        let xs = b.parameter(1, Shape::of::<f32>(&[4, 5, 3]), "xs");
        let one = |b: &Builder, w: Op, xs: Op| {
            let (h, ys) = b.scan(w.clone() * 0.0, xs, |h: Op, x: Op| {
                let h = (&h * &w + &x).tanh();
                (h.clone(), h)
            });
            let loss = ys.reduce_sum(&[0, 1]) + h.reduce_sum(&[0]);
            (b.grad(&loss, &w), h)
        };
        let (g, h) = if batched {
            b.vmap(
                &Vmap::new().in_axes([None, Some(0)]),
                (w, xs),
                |b, (w, xs)| one(b, w, xs),
            )
        } else {
            let x0 = xs
                .slice(&[0, 0, 0], &[1, 5, 3], &[1, 1, 1])
                .reshape(&[5, 3]);
            one(&b, w, x0)
        };
        let text = b.build_tuple(&[&g, &h]).unwrap().to_hlo_text();
        text.matches(" while(").count()
    };
    let (plain, batched) = (loops(false), loops(true));
    assert_eq!(
        plain, 2,
        "unbatched: the storing loop and the backward loop"
    );
    assert_eq!(batched, plain, "batched: the same loops");
}
