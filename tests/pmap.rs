//! `ClientExt::pmap` on the real CPU plugin with 1, 2, 4 and 8 devices: every
//! named collective checked against plain Rust, nested axes (a 2×4 grid), a
//! data-parallel SGD step (the batch split over the devices, the gradients
//! `pmean`'d) against the one-device step on the whole batch, gradients through
//! `psum` against JAX's transposition rule, donation, the host-side helpers, and
//! bad input (each an error, never a crash).
//!
//! Both CPU plugins: `PJRT_PLUGIN_PATH=… cargo test --test pmap` runs it against
//! another one.

use xlaclient::{
    Buffer, Client, ClientExt, ClientOptions, Error, Op, Plugin, PmapError, RuntimeError, Shape,
    Stacked, Tree,
};

/// A client of the plugin under test with `n` CPU devices.
fn client(n: usize) -> Client {
    let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
    Client::new(&plugin, &ClientOptions::new().cpu_device_count(n as i64)).expect("create a client")
}

/// Device `d`'s test data: `len` small integers (sums exact in f32).
fn data(d: usize, len: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((d * 7 + i * 3) % 11) as f32 - 5.0)
        .collect()
}

/// Rows `data(d, len)` for `n` devices, as one stacked host array of `[n, len]`.
fn stacked(n: usize, len: usize) -> (Vec<Vec<f32>>, Stacked<f32>) {
    let rows: Vec<Vec<f32>> = (0..n).map(|d| data(d, len)).collect();
    let s = Stacked::new(rows.concat(), &[n as i64, len as i64]).unwrap();
    (rows, s)
}

/// The outputs of one device, downloaded.
fn f32s(outs: &[Buffer]) -> Vec<Vec<f32>> {
    outs.iter().map(|b| b.to_vec::<f32>().unwrap()).collect()
}

fn reduce(rows: &[&Vec<f32>], f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    (0..rows[0].len())
        .map(|i| rows.iter().skip(1).fold(rows[0][i], |a, r| f(a, r[i])))
        .collect()
}

#[test]
fn named_collectives_match_plain_rust() {
    const LEN: usize = 4;
    for n in [1, 2, 4, 8] {
        let c = client(n);
        let f = c
            .pmap(
                "named",
                &[("i", n)],
                &Shape::of::<f32>(&[LEN as i64]),
                |b, x: Op| {
                    let ring: Vec<(i64, i64)> =
                        (0..n as i64).map(|s| (s, (s + 1) % n as i64)).collect();
                    vec![
                        x.psum_axis("i"),
                        x.pmean_axis("i"),
                        x.pmax_axis("i"),
                        x.pmin_axis("i"),
                        x.all_gather_axis("i", 0).reshape(&[(n * LEN) as i64]),
                        x.all_gather_axis("i", 1).reshape(&[(n * LEN) as i64]),
                        x.all_gather_axis_tiled("i", 0),
                        x.ppermute_axis("i", &ring),
                        b.axis_index("i").convert(xlaclient::ElementType::F32),
                    ]
                },
            )
            .unwrap();
        assert_eq!(f.num_devices(), n);
        let (rows, xs) = stacked(n, LEN);
        let args = f.shard_host(&xs).unwrap();
        for (d, a) in args.iter().enumerate() {
            assert_eq!(a.device().unwrap(), f.devices()[d]);
        }
        let outs = f.call(&args).unwrap();
        assert_eq!(outs.len(), n);
        let all: Vec<&Vec<f32>> = rows.iter().collect();
        let sum = reduce(&all, |a, b| a + b);
        let mean: Vec<f32> = sum.iter().map(|s| s / n as f32).collect();
        let max = reduce(&all, f32::max);
        let min = reduce(&all, f32::min);
        let stacked0 = rows.concat();
        // Stacked on a new last axis: [LEN, n], element (i, d) = rows[d][i].
        let stacked1: Vec<f32> = (0..LEN)
            .flat_map(|i| rows.iter().map(move |r| r[i]))
            .collect();
        for (d, o) in outs.iter().enumerate() {
            assert_eq!(
                o[0].device().unwrap(),
                f.devices()[d],
                "output on its device"
            );
            let o = f32s(o);
            assert_eq!(o[0], sum, "psum, n={n}, device {d}");
            for (got, want) in o[1].iter().zip(&mean) {
                assert!((got - want).abs() <= 1e-6, "pmean, n={n}: {got} vs {want}");
            }
            assert_eq!(o[2], max, "pmax, n={n}");
            assert_eq!(o[3], min, "pmin, n={n}");
            assert_eq!(o[4], stacked0, "all_gather axis 0, n={n}");
            assert_eq!(o[5], stacked1, "all_gather axis 1, n={n}");
            assert_eq!(o[6], stacked0, "all_gather tiled, n={n}");
            // Device d receives from its predecessor on the ring.
            assert_eq!(o[7], rows[(d + n - 1) % n], "ppermute, n={n}, device {d}");
            assert_eq!(o[8], [d as f32], "axis_index, n={n}");
        }
        // The host helpers agree with the per-device reads.
        let host: Vec<Stacked<f32>> = f.stack_host(&outs).unwrap();
        assert_eq!(host[0].dims(), &[n as i64, LEN as i64]);
        assert_eq!(host[0].row(n - 1), Some(&sum[..]));
        assert_eq!(host[0].row(n), None);
        assert_eq!(host[8].data(), (0..n).map(|d| d as f32).collect::<Vec<_>>());
    }
}

#[test]
fn psum_scatter_is_the_sum_split_over_the_axis() {
    for n in [1, 2, 4, 8] {
        let c = client(n);
        let len = 2 * n;
        let f = c
            .pmap(
                "scatter",
                &[("i", n)],
                &Shape::of::<f32>(&[len as i64]),
                |_, x: Op| x.psum_scatter_axis("i", 0),
            )
            .unwrap();
        let (rows, xs) = stacked(n, len);
        let outs = f.call(&f.shard_host(&xs).unwrap()).unwrap();
        let sum = reduce(&rows.iter().collect::<Vec<_>>(), |a, b| a + b);
        for (d, o) in outs.iter().enumerate() {
            assert_eq!(o.to_vec::<f32>().unwrap(), sum[2 * d..2 * d + 2], "n={n}");
        }
    }
}

#[test]
fn nested_axes_reduce_over_one_the_other_or_both() {
    // Replica r = host * 4 + device.
    let (h, dv) = (2usize, 4usize);
    let n = h * dv;
    let c = client(n);
    let f = c
        .pmap(
            "grid",
            &[("hosts", h), ("devices", dv)],
            &Shape::of::<f32>(&[3]),
            |b, x: Op| {
                let f = |o: Op| o.convert(xlaclient::ElementType::F32);
                vec![
                    x.psum_axis("devices"),
                    x.psum_axis("hosts"),
                    x.psum_axis(["hosts", "devices"]),
                    x.pmean_axis(["devices", "hosts"]),
                    x.pmax_axis("hosts"),
                    x.all_gather_axis(["hosts", "devices"], 0).reshape(&[24]),
                    x.all_gather_axis(["devices", "hosts"], 0).reshape(&[24]),
                    x.all_gather_axis("hosts", 0).reshape(&[6]),
                    x.ppermute_axis("hosts", &[(0, 1), (1, 0)]),
                    x.ppermute_axis("devices", &[(0, 3)]),
                    f(b.axis_index("hosts")),
                    f(b.axis_index("devices")),
                    f(b.axis_index(["hosts", "devices"])),
                    f(b.axis_index(["devices", "hosts"])),
                ]
            },
        )
        .unwrap();
    assert_eq!(f.axes(), &[("hosts".into(), 2), ("devices".into(), 4)]);
    let (rows, xs) = stacked(n, 3);
    let outs = f.call(&f.shard_host(&xs).unwrap()).unwrap();
    let r = |hh: usize, dd: usize| &rows[hh * dv + dd];
    for (id, o) in outs.iter().enumerate() {
        let (hi, di) = (id / dv, id % dv);
        let o = f32s(o);
        let same_host: Vec<&Vec<f32>> = (0..dv).map(|d| r(hi, d)).collect();
        let same_dev: Vec<&Vec<f32>> = (0..h).map(|x| r(x, di)).collect();
        let all: Vec<&Vec<f32>> = rows.iter().collect();
        assert_eq!(
            o[0],
            reduce(&same_host, |a, b| a + b),
            "over devices, r{id}"
        );
        assert_eq!(o[1], reduce(&same_dev, |a, b| a + b), "over hosts, r{id}");
        let total = reduce(&all, |a, b| a + b);
        assert_eq!(o[2], total, "over both, r{id}");
        for (g, t) in o[3].iter().zip(&total) {
            assert!((g - t / n as f32).abs() <= 1e-6, "pmean over both");
        }
        assert_eq!(o[4], reduce(&same_dev, f32::max), "pmax over hosts");
        assert_eq!(o[5], rows.concat(), "gather (hosts, devices)");
        let dev_major: Vec<f32> = (0..dv)
            .flat_map(|d| (0..h).flat_map(move |x| r(x, d).clone()))
            .collect();
        assert_eq!(o[6], dev_major, "gather (devices, hosts)");
        assert_eq!(o[7], [r(0, di).clone(), r(1, di).clone()].concat());
        assert_eq!(o[8], *r(1 - hi, di), "swap hosts");
        let shifted = if di == 3 {
            r(hi, 0).clone()
        } else {
            vec![0.0; 3]
        };
        assert_eq!(
            o[9], shifted,
            "device 0 to 3 within a host, zeros elsewhere"
        );
        assert_eq!(o[10], [hi as f32]);
        assert_eq!(o[11], [di as f32]);
        assert_eq!(o[12], [(hi * dv + di) as f32]);
        assert_eq!(o[13], [(di * h + hi) as f32]);
    }
}

// ---- gradients ---------------------------------------------------------------

#[derive(Tree, Clone, Debug)]
struct Mlp<T> {
    w1: T,
    b1: T,
    w2: T,
    b2: T,
}

#[derive(Tree, Clone, Debug)]
struct Batch<T> {
    x: T,
    y: T,
}

const IN: i64 = 3;
const HIDDEN: i64 = 5;
const BATCH: i64 = 16;
const LR: f32 = 0.3;

fn mlp_spec() -> Mlp<Shape> {
    Mlp {
        w1: Shape::of::<f32>(&[IN, HIDDEN]),
        b1: Shape::of::<f32>(&[HIDDEN]),
        w2: Shape::of::<f32>(&[HIDDEN, 1]),
        b2: Shape::of::<f32>(&[1]),
    }
}

/// The mean squared error of the MLP on a batch.
fn loss(p: &Mlp<Op>, batch: &Batch<Op>) -> Op {
    let h = (batch.x.matmul(&p.w1) + &p.b1).tanh();
    let pred = h.matmul(&p.w2) + &p.b2;
    let e = pred - &batch.y;
    (&e * &e).mean(&[0, 1], false)
}

/// One SGD step; `average` averages the gradients (and the loss) over devices.
fn sgd_step(p: Mlp<Op>, batch: &Batch<Op>, average: impl Fn(&Op) -> Op) -> (Mlp<Op>, Op) {
    let b = p.w1.builder();
    let (l, _, g) = b.value_and_grad(p.clone(), |p| (loss(&p, batch), ()));
    let g = g.map_ref(&average);
    let new = p.zip_map(&g, |w, g| w - &(g * LR as f64)).unwrap();
    (new, average(&l))
}

fn host_params() -> Mlp<Vec<f32>> {
    let v = |len: i64, k: f32| -> Vec<f32> {
        (0..len)
            .map(|i| ((i as f32 * 0.37 + k).sin()) * 0.5)
            .collect()
    };
    Mlp {
        w1: v(IN * HIDDEN, 0.1),
        b1: v(HIDDEN, 0.7),
        w2: v(HIDDEN, 1.3),
        b2: v(1, 2.1),
    }
}

#[test]
fn data_parallel_sgd_step_equals_the_one_device_step() {
    let xs: Vec<f32> = (0..BATCH * IN)
        .map(|i| ((i * 5 % 13) as f32 - 6.0) / 6.0)
        .collect();
    let ys: Vec<f32> = (0..BATCH)
        .map(|i| ((i * 3 % 7) as f32 - 3.0) / 3.0)
        .collect();
    let hp = host_params();
    let spec = mlp_spec();
    let dims = Mlp {
        w1: spec.w1.dims().to_vec(),
        b1: spec.b1.dims().to_vec(),
        w2: spec.w2.dims().to_vec(),
        b2: spec.b2.dims().to_vec(),
    };
    for n in [1usize, 2, 4, 8] {
        let c = client(n);
        // One device, whole batch: the reference.
        let one = c
            .jit(
                "one",
                &(
                    spec.clone(),
                    Batch {
                        x: Shape::of::<f32>(&[BATCH, IN]),
                        y: Shape::of::<f32>(&[BATCH, 1]),
                    },
                ),
                |_, (p, batch): (Mlp<Op>, Batch<Op>)| sgd_step(p, &batch, Op::clone),
            )
            .unwrap();
        let dev0 = &c.addressable_devices()[0];
        let upload = |v: &Vec<f32>, d: &Vec<i64>| dev0.buffer_from_host(v, d).unwrap();
        let p0 = Mlp {
            w1: upload(&hp.w1, &dims.w1),
            b1: upload(&hp.b1, &dims.b1),
            w2: upload(&hp.w2, &dims.w2),
            b2: upload(&hp.b2, &dims.b2),
        };
        let whole = Batch {
            x: upload(&xs, &vec![BATCH, IN]),
            y: upload(&ys, &vec![BATCH, 1]),
        };

        // n devices, the batch split, gradients pmean'd.
        let per = BATCH / n as i64;
        let step = c
            .pmap(
                "dp",
                &[("batch", n)],
                &(
                    spec.clone(),
                    Batch {
                        x: Shape::of::<f32>(&[per, IN]),
                        y: Shape::of::<f32>(&[per, 1]),
                    },
                ),
                |_, (p, batch): (Mlp<Op>, Batch<Op>)| {
                    sgd_step(p, &batch, |g| g.pmean_axis("batch"))
                },
            )
            .unwrap();
        let params = step.replicate(&p0).unwrap();
        let (want, want_loss) = one.call(&(p0, whole)).unwrap();
        let batches = step
            .shard_host(&Batch {
                x: Stacked::new(xs.clone(), &[n as i64, per, IN]).unwrap(),
                y: Stacked::new(ys.clone(), &[n as i64, per, 1]).unwrap(),
            })
            .unwrap();
        let args: Vec<_> = params.into_iter().zip(batches).collect();
        let outs = step.call(&args).unwrap();
        let want_leaves: Vec<Vec<f32>> = want
            .leaves()
            .iter()
            .map(|b| b.to_vec::<f32>().unwrap())
            .collect();
        let want_loss = want_loss.to_vec::<f32>().unwrap()[0];
        for (d, (p, l)) in outs.iter().enumerate() {
            let l = l.to_vec::<f32>().unwrap()[0];
            assert!(
                (l - want_loss).abs() <= 1e-5,
                "loss, n={n}, device {d}: {l} vs {want_loss}"
            );
            for (k, (got, w)) in p.leaves().iter().zip(&want_leaves).enumerate() {
                let got = got.to_vec::<f32>().unwrap();
                for (a, b) in got.iter().zip(w) {
                    assert!(
                        (a - b).abs() <= 1e-5,
                        "leaf {k}, n={n}, device {d}: {a} vs {b}"
                    );
                }
            }
        }
        // The step moved the parameters (the comparison is not of two no-ops).
        let moved = want_leaves[0]
            .iter()
            .zip(&hp.w1)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(moved > 1e-3, "the step changes w1 ({moved})");
    }
}

#[test]
fn gradient_through_psum_follows_jax_transposition() {
    // d/dw of psum_i(<w, x_i>) on device d: JAX transposes psum to psum of the
    // cotangents (1 on each of the n devices), so the gradient is n · x_d.
    for n in [1usize, 2, 4, 8] {
        let c = client(n);
        let f = c
            .pmap(
                "g",
                &[("i", n)],
                &(Shape::of::<f32>(&[3]), Shape::of::<f32>(&[3])),
                |b, (w, x): (Op, Op)| {
                    let (l, _, g) =
                        b.value_and_grad(w, |w| ((&w * &x).reduce_sum(&[0]).psum_axis("i"), ()));
                    // And through all_gather (whose transpose is a psum_scatter):
                    // d/dx of sum(all_gather(x) * k), k = 1..3n, is n · k's block.
                    let k = b.constant_vec(&(1..=3 * n).map(|v| v as f32).collect::<Vec<_>>());
                    let (_, _, gx) = b.value_and_grad(x.clone(), |x| {
                        ((x.all_gather_axis_tiled("i", 0) * &k).reduce_sum(&[0]), ())
                    });
                    (l, g, gx)
                },
            )
            .unwrap();
        let (xr, xs) = stacked(n, 3);
        let (_, ws) = stacked(n, 3);
        let args: Vec<_> = f
            .shard_host(&ws)
            .unwrap()
            .into_iter()
            .zip(f.shard_host(&xs).unwrap())
            .collect();
        let outs = f.call(&args).unwrap();
        for (d, (_, g, gx)) in outs.iter().enumerate() {
            let want: Vec<f32> = xr[d].iter().map(|v| v * n as f32).collect();
            assert_eq!(g.to_vec::<f32>().unwrap(), want, "n={n}, device {d}");
            let want_x: Vec<f32> = (0..3).map(|i| ((3 * d + i + 1) * n) as f32).collect();
            assert_eq!(gx.to_vec::<f32>().unwrap(), want_x, "n={n}, device {d}");
        }
    }
}

// ---- donation ----------------------------------------------------------------

#[derive(Tree, Clone, Debug)]
struct State<T> {
    w: T,
    steps: T,
}

#[test]
fn donated_state_is_updated_in_place_on_every_device() {
    for n in [1usize, 2, 4, 8] {
        let c = client(n);
        let spec = (
            State {
                w: Shape::of::<f32>(&[4]),
                steps: Shape::of::<f32>(&[]),
            },
            Shape::of::<f32>(&[4]),
        );
        let step = c
            .pmap_donating(
                "donate",
                &[("i", n)],
                &spec,
                |_, (s, x): (State<Op>, Op)| State {
                    w: &s.w + &x.psum_axis("i"),
                    steps: &s.steps + 1.0,
                },
            )
            .unwrap();
        // Both state leaves are aliased, the data is not.
        assert_eq!(step.aliased_inputs(), &[true, true, false]);
        let text = step.computation().to_hlo_text();
        assert!(text.contains("input_output_alias"), "{text}");
        let (rows, xs) = stacked(n, 4);
        let init = State {
            w: c.buffer_from_host(&[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap(),
            steps: c.scalar(0.0f32).unwrap(),
        };
        let mut state = step.replicate(&init).unwrap();
        let sum = reduce(&rows.iter().collect::<Vec<_>>(), |a, b| a + b);
        for k in 1..=3 {
            let data = step.shard_host(&xs).unwrap();
            let args: Vec<_> = state.into_iter().zip(data).collect();
            state = step.call_donated(args).unwrap();
            for s in &state {
                let want: Vec<f32> = [1.0f32, 2.0, 3.0, 4.0]
                    .iter()
                    .zip(&sum)
                    .map(|(w, s)| w + k as f32 * s)
                    .collect();
                assert_eq!(s.w.to_vec::<f32>().unwrap(), want, "n={n}, step {k}");
                assert_eq!(s.steps.to_vec::<f32>().unwrap(), [k as f32]);
            }
        }
        // Kept (not aliased) inputs stay the caller's with `call`.
        let data = step.shard_host(&xs).unwrap();
        let again = step.replicate(&init).unwrap();
        let args: Vec<_> = again.into_iter().zip(data).collect();
        step.call(&args).unwrap();
        assert_eq!(args[n - 1].1.to_vec::<f32>().unwrap(), rows[n - 1]);
        assert_eq!(args[0].0.w.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    }
}

// ---- bad input ---------------------------------------------------------------

fn pmap_error<T>(r: Result<T, Error>) -> PmapError {
    match r {
        Err(Error::Pmap(e)) => e,
        Err(e) => panic!("expected a pmap error, got {e}"),
        Ok(_) => panic!("expected a pmap error, got a result"),
    }
}

#[test]
fn bad_calls_are_errors() {
    let n = 4;
    let c = client(n);
    let spec = State {
        w: Shape::of::<f32>(&[2]),
        steps: Shape::of::<f32>(&[]),
    };
    let f = c
        .pmap("f", &[("i", n)], &spec, |_, s: State<Op>| {
            vec![s.w.psum_axis("i"), s.steps.clone()]
        })
        .unwrap();
    let tree = State {
        w: c.buffer_from_host(&[1.0f32, 2.0], &[2]).unwrap(),
        steps: c.scalar(0.0f32).unwrap(),
    };
    let good = f.replicate(&tree).unwrap();
    assert!(f.call(&good).is_ok());
    let fresh = || f.replicate(&tree).unwrap();

    // The wrong number of per-device trees.
    let e = pmap_error(f.call(&good[..3]));
    assert_eq!(
        e,
        PmapError::DeviceCount {
            given: 3,
            expected: 4
        }
    );
    assert!(e.to_string().contains("3 per-device trees"), "{e}");
    let mut five = fresh();
    five.extend(fresh().pop());
    assert!(matches!(
        pmap_error(f.call(&five)),
        PmapError::DeviceCount { given: 5, .. }
    ));

    // A buffer on the wrong device: device 2's `steps` lives on device 0.
    let mut wrong = fresh();
    wrong[2].steps = good[0].steps.copy_to_device(&f.devices()[0]).unwrap();
    let e = pmap_error(f.call(&wrong));
    assert!(
        matches!(&e, PmapError::WrongDevice { device: 2, leaf, .. } if leaf == "steps"),
        "{e:?}"
    );
    assert!(e.to_string().contains("leaf `steps` of device 2"), "{e}");
    // Donated too: refused before anything is given up.
    let e = pmap_error(f.call_donated(wrong));
    assert!(matches!(e, PmapError::WrongDevice { device: 2, .. }));

    // The wrong shape on one device: the runtime names the device and argument.
    let mut shaped = fresh();
    shaped[1].w = f.devices()[1]
        .buffer_from_host(&[1.0f32, 2.0, 3.0], &[3])
        .unwrap();
    match f.call(&shaped) {
        Err(Error::Runtime(RuntimeError::ArgumentShape {
            device, argument, ..
        })) => assert_eq!((device, argument), (1, 0)),
        Err(e) => panic!("expected ArgumentShape, got {e}"),
        Ok(_) => panic!("a wrong shape ran"),
    }

    // The wrong structure: a Vec of another length.
    let g = c
        .pmap(
            "v",
            &[("i", n)],
            &vec![Shape::of::<f32>(&[2]); 2],
            |_, v: Vec<Op>| v[0].psum_axis("i") + &v[1],
        )
        .unwrap();
    let one: Vec<Vec<Buffer>> = f
        .devices()
        .iter()
        .map(|d| vec![d.buffer_from_host(&[1.0f32, 2.0], &[2]).unwrap()])
        .collect();
    let e = pmap_error(g.call(&one));
    assert!(matches!(e, PmapError::Structure { device: 0, .. }), "{e:?}");
    let mut mixed: Vec<Vec<Buffer>> = f
        .devices()
        .iter()
        .map(|d| {
            (0..2)
                .map(|_| d.buffer_from_host(&[1.0f32, 2.0], &[2]).unwrap())
                .collect()
        })
        .collect();
    mixed[3].pop();
    assert!(matches!(
        pmap_error(g.call(&mixed)),
        PmapError::Structure { device: 3, .. }
    ));

    // Host arrays whose leading axis is not the device count.
    let bad = Stacked::new(vec![0.0f32; 6], &[3, 2]).unwrap();
    let e = pmap_error(g.shard_host(&vec![bad.clone(), bad]));
    assert!(
        matches!(&e, PmapError::Host { leaf, .. } if leaf == "0"),
        "{e:?}"
    );
    assert!(e.to_string().contains("3 rows"), "{e}");
    assert!(Stacked::new(vec![0.0f32; 5], &[2, 3]).is_err());
    assert!(Stacked::new(vec![0.0f32], &[]).is_err());
    // Downloads of another device count, or of the wrong element type.
    let outs = f.call(&good).unwrap();
    assert!(matches!(
        pmap_error(f.stack_host::<f32, _>(&outs[..2])),
        PmapError::DeviceCount { given: 2, .. }
    ));
    assert!(f.stack_host::<i32, _>(&outs).is_err());
}

#[test]
fn bad_axes_and_names_are_build_errors_naming_op_axis_and_line() {
    let c = client(4);
    let spec = Shape::of::<f32>(&[2]);
    // An unknown axis name: the op, the axis, the known axes and this line.
    let line = line!() + 2;
    let e = c
        .pmap("u", &[("i", 4)], &spec, |_, x: Op| x.psum_axis("j"))
        .err()
        .expect("an unknown axis is an error");
    let msg = e.to_string();
    assert!(
        msg.contains("`psum_axis` over axis `j`: no such axis")
            && msg.contains("i (4)")
            && msg.contains(&format!("tests/pmap.rs:{line}")),
        "{msg}"
    );
    for (name, f) in [
        ("pmean_axis", (|x: &Op| x.pmean_axis("k")) as fn(&Op) -> Op),
        ("all_gather_axis", |x| x.all_gather_axis("k", 0)),
        ("ppermute_axis", |x| x.ppermute_axis("k", &[(0, 1)])),
        ("psum_scatter_axis", |x| x.psum_scatter_axis("k", 0)),
        ("pmax_axis", |x| x.pmax_axis(["i", "k"])),
    ] {
        let e = c
            .pmap("u", &[("i", 4)], &spec, |_, x: Op| f(&x))
            .err()
            .expect("an unknown axis is an error")
            .to_string();
        assert!(e.contains(&format!("`{name}` over axis `k`")), "{e}");
    }
    // A name given twice, a permutation off the axis, a gather past the rank.
    let e = c
        .pmap("u", &[("i", 4)], &spec, |_, x: Op| x.psum_axis(["i", "i"]))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("given twice"), "{e}");
    let e = c
        .pmap("u", &[("i", 4)], &spec, |_, x: Op| {
            x.ppermute_axis("i", &[(0, 4)])
        })
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("(0, 4)") && e.contains("0..4"), "{e}");
    let e = c
        .pmap("u", &[("i", 4)], &spec, |_, x: Op| {
            x.all_gather_axis("i", 2)
        })
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("dimension 2"), "{e}");

    // A named collective outside pmap: `jit` binds no axes.
    let line = line!() + 2;
    let e = c
        .jit("outside", &spec, |_, x: Op| x.psum_axis("i"))
        .err()
        .expect("a named collective outside pmap is an error")
        .to_string();
    assert!(
        e.contains("`psum_axis` over axis `i`: no device axes are bound")
            && e.contains(&format!("tests/pmap.rs:{line}")),
        "{e}"
    );
    let b = xlaclient::Builder::new("outside");
    let e = b.build(&b.axis_index("i")).unwrap_err().to_string();
    assert!(e.contains("`axis_index`"), "{e}");

    // More devices than the client has.
    let e = pmap_error(c.pmap("big", &[("i", 8)], &spec, |_, x: Op| x.psum_axis("i")));
    assert_eq!(
        e,
        PmapError::TooFewDevices {
            wanted: 8,
            available: 4
        }
    );
    let e = pmap_error(c.pmap("big", &[("a", 2), ("b", 4)], &spec, |_, x: Op| x));
    assert!(matches!(e, PmapError::TooFewDevices { wanted: 8, .. }));
    // Axes that are no grid.
    for axes in [
        &[][..],
        &[("i", 2), ("i", 2)][..],
        &[("i", 0)][..],
        &[("", 2)][..],
    ] {
        let e = pmap_error(c.pmap("grid", axes, &spec, |_, x: Op| x));
        assert!(matches!(e, PmapError::Axes { .. }), "{axes:?}: {e:?}");
    }
}

#[test]
fn fewer_devices_than_the_client_has_use_the_first_ones() {
    let c = client(8);
    let f = c
        .pmap("two", &[("i", 2)], &Shape::of::<f32>(&[1]), |b, x: Op| {
            x.psum_axis("i") + &b.axis_index("i").convert(xlaclient::ElementType::F32)
        })
        .unwrap();
    let all = c.addressable_devices();
    assert_eq!(f.devices(), &all[..2]);
    let xs = Stacked::new(vec![3.0f32, 4.0], &[2, 1]).unwrap();
    let out: Stacked<f32> = f
        .stack_host(&f.call(&f.shard_host(&xs).unwrap()).unwrap())
        .unwrap();
    assert_eq!(out.data(), &[7.0, 8.0]);
}

#[test]
fn named_collectives_inside_loop_bodies() {
    // A fori_loop body (another computation of the same graph) sees the axes:
    // x ← pmean(x) + axis_index, 3 times.
    for n in [1usize, 2, 4, 8] {
        let c = client(n);
        let f = c
            .pmap("loop", &[("i", n)], &Shape::of::<f32>(&[2]), |b, x: Op| {
                b.fori_loop(0, 3, x, |_, x: Op| {
                    let body = x.builder(); // the loop body's builder
                    x.pmean_axis("i") + &body.axis_index("i").convert(xlaclient::ElementType::F32)
                })
            })
            .unwrap();
        let (rows, xs) = stacked(n, 2);
        let out: Stacked<f32> = f
            .stack_host(&f.call(&f.shard_host(&xs).unwrap()).unwrap())
            .unwrap();
        // Plain Rust: the same three steps on every device's row.
        let mut v = rows.clone();
        for _ in 0..3 {
            let mean: Vec<f32> = (0..2)
                .map(|i| v.iter().map(|r| r[i]).sum::<f32>() / n as f32)
                .collect();
            v = (0..n)
                .map(|d| mean.iter().map(|m| m + d as f32).collect())
                .collect();
        }
        for (d, want) in v.iter().enumerate() {
            for (a, b) in out.row(d).unwrap().iter().zip(want) {
                assert!((a - b).abs() <= 1e-5, "n={n}, device {d}: {a} vs {b}");
            }
        }
    }
}
