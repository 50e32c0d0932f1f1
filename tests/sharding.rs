//! SPMD sharding on the real CPU plugin with 8 devices: a device `Mesh`,
//! `PartitionSpec`s, `ShardedArray` uploads and downloads (each shard checked
//! against a block cut out in plain Rust), a sharding constraint inside a program,
//! and `jit_sharded` MLP training steps (data parallel over 8 devices, and the
//! first weight matrix split over a `model` axis) that give the one-device
//! program's results, with the collectives XLA inserted found in the partitioned
//! program. Bad meshes, specs and shards are errors naming what is wrong; the
//! cases that reach the plugin with something it might abort on run in a child
//! process.
//!
//! Both CPU plugins run it (`PJRT_PLUGIN_PATH=… cargo test --test sharding`).

mod common;
use common::in_child;
use xlaclient::{
    Builder, Client, ClientExt, ClientOptions, ElementType, Error, Mesh, Op, P, PartitionSpec,
    Plugin, Shape, ShardedArray, Tree,
};

/// A client of the plugin under test with `n` CPU devices.
fn client(n: usize) -> Client {
    let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
    Client::new(&plugin, &ClientOptions::new().cpu_device_count(n as i64)).expect("create a client")
}

/// Deterministic test data in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The opcodes of every instruction of a module proto.
fn opcodes(m: &xlaclient::proto::HloModuleProto) -> Vec<String> {
    m.computations
        .iter()
        .flat_map(|c| c.instructions.iter().map(|i| i.opcode.clone()))
        .collect()
}

fn sharding_error(e: Error) -> String {
    match e {
        Error::Sharding { reason } => reason,
        other => panic!("expected a sharding error, got {other}"),
    }
}

// ---------------------------------------------------------------------------------
// Upload and download

/// The block of the row-major array `full` (`dims`) from `start`, of `size`,
/// cut out index by index.
fn block(full: &[f32], dims: &[i64], start: &[i64], size: &[i64]) -> Vec<f32> {
    let n: i64 = size.iter().product();
    let mut out = Vec::with_capacity(n as usize);
    for k in 0..n {
        // The k-th index of the block, row-major.
        let mut rem = k;
        let mut flat = 0i64;
        for d in 0..dims.len() {
            let inner: i64 = size[d + 1..].iter().product();
            let i = rem / inner;
            rem %= inner;
            let stride: i64 = dims[d + 1..].iter().product();
            flat += (start[d] + i) * stride;
        }
        out.push(full[flat as usize]);
    }
    out
}

#[test]
fn upload_and_download_round_trip_for_several_specs() {
    let c = client(8);
    let mesh = Mesh::new(&c, &[("data", 4), ("model", 2)]).unwrap();
    // (spec, dims, the mesh axes splitting each dimension, major first).
    let cases: Vec<(PartitionSpec, Vec<i64>, Vec<Vec<usize>>)> = vec![
        (P::replicated(), vec![8, 6], vec![vec![], vec![]]),
        (P::new([Some("data")]), vec![8, 6], vec![vec![0], vec![]]),
        (
            P::new([None, Some("model")]),
            vec![8, 6],
            vec![vec![], vec![1]],
        ),
        (
            P::new([Some("model"), Some("data")]),
            vec![4, 8],
            vec![vec![1], vec![0]],
        ),
        (
            P::split([vec!["data", "model"], vec![]]),
            vec![16, 3],
            vec![vec![0, 1], vec![]],
        ),
        (
            P::split([vec!["model", "data"], vec![]]),
            vec![8, 2],
            vec![vec![1, 0], vec![]],
        ),
        (
            P::new([Some("data"), None, Some("model")]),
            vec![4, 3, 2],
            vec![vec![0], vec![], vec![1]],
        ),
        (P::new([Some("data")]), vec![8], vec![vec![0]]),
        (P::replicated(), vec![], vec![]),
    ];
    let sizes = [4i64, 2];
    for (spec, dims, axes) in cases {
        let n: i64 = dims.iter().product();
        let full = data(n as usize, n as u64);
        let a = ShardedArray::upload(&mesh, &spec, &full, &dims).unwrap();
        assert_eq!(a.shards().len(), 8);
        let parts: Vec<i64> = axes
            .iter()
            .map(|ax| ax.iter().map(|a| sizes[*a]).product())
            .collect();
        let shard: Vec<i64> = dims.iter().zip(&parts).map(|(d, p)| d / p).collect();
        assert_eq!(a.shard_dims(), shard.as_slice(), "{spec}");
        for (p, b) in a.shards().iter().enumerate() {
            let coord = [p as i64 / 2, p as i64 % 2];
            assert_eq!(b.device().unwrap(), mesh.devices()[p]);
            let start: Vec<i64> = axes
                .iter()
                .zip(&shard)
                .map(|(ax, s)| ax.iter().fold(0, |acc, a| acc * sizes[*a] + coord[*a]) * s)
                .collect();
            assert_eq!(
                b.to_vec::<f32>().unwrap(),
                block(&full, &dims, &start, &shard),
                "{spec} on {dims:?}, device {p}"
            );
        }
        assert_eq!(a.to_vec::<f32>().unwrap(), full, "{spec} on {dims:?}");
        // XLA reads the sharding the way the upload laid the shards out: a
        // program taking the array as `spec` sees every element where it is
        // (returned replicated, and as `spec` again).
        let f = c
            .jit_sharded(
                "layout",
                &mesh,
                &Shape::of::<f32>(&dims),
                &spec,
                &(P::replicated(), spec.clone()),
                |_, x: Op| (&x + 1.0, &x * 2.0),
            )
            .unwrap();
        let (plus, twice) = f.call(&a).unwrap();
        let want: Vec<f32> = full.iter().map(|v| v + 1.0).collect();
        assert_eq!(plus.to_vec::<f32>().unwrap(), want, "{spec} on {dims:?}");
        let want: Vec<f32> = full.iter().map(|v| v * 2.0).collect();
        assert_eq!(twice.to_vec::<f32>().unwrap(), want, "{spec} on {dims:?}");
        for (p, b) in twice.shards().iter().enumerate() {
            assert_eq!(b.dims().unwrap(), shard, "{spec}, device {p}");
        }
    }
    // Resharding on the devices: every pair of a few specs.
    let specs = [
        P::replicated(),
        P::new([Some("data"), None]),
        P::new([None, Some("model")]),
        P::new([Some("model"), Some("data")]),
        P::split([vec!["data", "model"], vec![]]),
    ];
    let full = data(64, 3);
    for from in &specs {
        let a = ShardedArray::upload(&mesh, from, &full, &[8, 8]).unwrap();
        for to in &specs {
            let b = a.reshard(to).unwrap();
            assert_eq!(b.spec(), to);
            assert_eq!(b.to_vec::<f32>().unwrap(), full, "{from} -> {to}");
        }
    }
    // Another element type, through from_shards of the uploaded shards.
    let ints: Vec<i32> = (0..24).collect();
    let a = ShardedArray::upload(&mesh, &P::new([None, Some("data")]), &ints, &[3, 8]).unwrap();
    let b = ShardedArray::from_shards(
        &mesh,
        &P::new([None, Some("data")]),
        ElementType::S32,
        &[3, 8],
        a.into_shards(),
    )
    .unwrap();
    assert_eq!(b.to_vec::<i32>().unwrap(), ints);
    assert!(b.to_vec::<f32>().is_err());
}

#[test]
fn specs_lower_to_xla_shardings() {
    let c = client(8);
    let mesh = Mesh::new(&c, &[("data", 4), ("model", 2)]).unwrap();
    let s =
        |spec: &PartitionSpec, dims: &[i64]| mesh.sharding(spec, dims, "x").unwrap().to_string();
    assert_eq!(s(&P::replicated(), &[8, 4]), "{replicated}");
    assert_eq!(
        s(&P::new([Some("data"), Some("model")]), &[8, 4]),
        "{devices=[4,2]0,1,2,3,4,5,6,7}"
    );
    // Transposed mesh axes: tile (i, j) holds model=i, data=j: device 2j+i.
    assert_eq!(
        s(&P::new([Some("model"), Some("data")]), &[8, 4]),
        "{devices=[2,4]0,2,4,6,1,3,5,7}"
    );
    // Partial replication: copies over `model` last.
    assert_eq!(
        s(&P::new([Some("data"), None]), &[8, 4]),
        "{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"
    );
    assert_eq!(
        s(&P::new([None, Some("model")]), &[8, 4]),
        "{devices=[1,2,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}"
    );
    assert_eq!(
        s(&P::split([vec!["model", "data"]]), &[8]),
        "{devices=[8]0,2,4,6,1,3,5,7}"
    );
}

// ---------------------------------------------------------------------------------
// The MLP step

#[derive(Tree, Debug)]
struct Mlp<T> {
    w1: T,
    b1: T,
    w2: T,
    b2: T,
}

#[derive(Tree, Debug)]
struct Batch<T> {
    x: T,
    y: T,
}

#[derive(Tree, Debug)]
struct Step<T> {
    params: Mlp<T>,
    batch: Batch<T>,
}

#[derive(Tree, Debug)]
struct Out<T> {
    params: Mlp<T>,
    loss: T,
}

const BATCH: i64 = 32;
const IN: i64 = 6;
const HIDDEN: i64 = 16;
const OUTS: i64 = 3;
const LR: f64 = 0.1;

fn step_spec() -> Step<Shape> {
    let f = |d: &[i64]| Shape::of::<f32>(d);
    Step {
        params: Mlp {
            w1: f(&[IN, HIDDEN]),
            b1: f(&[HIDDEN]),
            w2: f(&[HIDDEN, OUTS]),
            b2: f(&[OUTS]),
        },
        batch: Batch {
            x: f(&[BATCH, IN]),
            y: f(&[BATCH, OUTS]),
        },
    }
}

fn loss_of(p: &Mlp<Op>, b: &Batch<Op>) -> Op {
    let h = (b.x.matmul(&p.w1) + &p.b1).relu();
    let out = h.matmul(&p.w2) + &p.b2;
    (out - &b.y).square().mean(&[0, 1], false)
}

/// One SGD step on the mean squared error of a two-layer MLP.
fn sgd_step(bld: &Builder, s: Step<Op>) -> Out<Op> {
    let loss = loss_of(&s.params, &s.batch);
    let g = bld.grad(&loss, &s.params);
    let params = Mlp {
        w1: &s.params.w1 - &g.w1 * LR,
        b1: &s.params.b1 - &g.b1 * LR,
        w2: &s.params.w2 - &g.w2 * LR,
        b2: &s.params.b2 - &g.b2 * LR,
    };
    Out { params, loss }
}

/// The step's inputs on the host, leaf by leaf (w1, b1, w2, b2, x, y).
fn host_step() -> Vec<Vec<f32>> {
    step_spec()
        .leaves()
        .into_iter()
        .enumerate()
        .map(|(i, s)| data(s.dims().iter().product::<i64>() as usize, i as u64 + 1))
        .collect()
}

/// The forward loss in plain Rust (an independent check of both programs).
fn rust_loss(host: &[Vec<f32>]) -> f32 {
    let [w1, b1, w2, b2, x, y] = host else {
        panic!("six leaves")
    };
    let (n, i, h, o) = (BATCH as usize, IN as usize, HIDDEN as usize, OUTS as usize);
    let mut total = 0f64;
    for r in 0..n {
        let hid: Vec<f32> = (0..h)
            .map(|k| {
                let s: f32 = (0..i).map(|j| x[r * i + j] * w1[j * h + k]).sum::<f32>() + b1[k];
                s.max(0.0)
            })
            .collect();
        for q in 0..o {
            let out: f32 = (0..h).map(|k| hid[k] * w2[k * o + q]).sum::<f32>() + b2[q];
            total += f64::from((out - y[r * o + q]).powi(2));
        }
    }
    (total / (n * o) as f64) as f32
}

/// The one-device step's outputs (params leaves then the loss).
fn one_device(host: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let c = client(1);
    let f = c.jit("mlp_step", &step_spec(), sgd_step).unwrap();
    let spec = step_spec();
    let bufs: Vec<xlaclient::Buffer> = host
        .iter()
        .zip(spec.leaves())
        .map(|(v, s)| c.buffer_from_host(v, s.dims()).unwrap())
        .collect();
    let args = spec.rebuild(bufs).unwrap();
    let out = f.call(&args).unwrap();
    out.leaves()
        .into_iter()
        .map(|b| b.to_vec::<f32>().unwrap())
        .collect()
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs one device {w}"
        );
    }
}

/// Runs the step sharded over `mesh` with the given specs and compares every
/// output with the one-device run; returns the partitioned program's opcodes.
fn sharded_step(
    mesh: &Mesh,
    c: &Client,
    in_specs: &Step<PartitionSpec>,
    out_specs: &Out<PartitionSpec>,
) -> Vec<String> {
    let host = host_step();
    let want = one_device(&host);
    let f = c
        .jit_sharded(
            "mlp_step",
            mesh,
            &step_spec(),
            in_specs,
            out_specs,
            sgd_step,
        )
        .unwrap();
    let args: Vec<ShardedArray> = host
        .iter()
        .zip(step_spec().leaves())
        .zip(in_specs.leaves())
        .map(|((v, s), p)| ShardedArray::upload(mesh, p, v, s.dims()).unwrap())
        .collect();
    let args = step_spec().rebuild(args).unwrap();
    let out = f.call(&args).unwrap();
    let got: Vec<Vec<f32>> = out
        .leaves()
        .into_iter()
        .map(|a| a.to_vec::<f32>().unwrap())
        .collect();
    let names = ["w1", "b1", "w2", "b2", "loss"];
    for ((g, w), n) in got.iter().zip(&want).zip(names) {
        close(g, w, n);
    }
    // Both agree with the loss computed in plain Rust.
    let l = rust_loss(&host);
    assert!(
        (got[4][0] - l).abs() <= 1e-5 * (1.0 + l.abs()),
        "{} vs {l}",
        got[4][0]
    );
    // The outputs are laid out as asked.
    for (a, p) in out.leaves().into_iter().zip(out_specs.leaves()) {
        assert_eq!(a.spec(), p);
        assert_eq!(a.shards().len(), mesh.size());
    }
    opcodes(&f.executable().optimized_module().unwrap())
}

#[test]
fn data_parallel_mlp_step_matches_one_device() {
    let c = client(8);
    let mesh = Mesh::new(&c, &[("data", 8)]).unwrap();
    let rep = P::replicated();
    let rows = P::new([Some("data"), None]);
    let in_specs = Step {
        params: Mlp {
            w1: rep.clone(),
            b1: rep.clone(),
            w2: rep.clone(),
            b2: rep.clone(),
        },
        batch: Batch {
            x: rows.clone(),
            y: rows.clone(),
        },
    };
    // One spec for every output (the parameters and the loss replicated).
    let out_specs = Out {
        params: Mlp {
            w1: rep.clone(),
            b1: rep.clone(),
            w2: rep.clone(),
            b2: rep.clone(),
        },
        loss: rep.clone(),
    };
    let ops = sharded_step(&mesh, &c, &in_specs, &out_specs);
    // The gradient (and loss) sums over the batch: an all-reduce across devices.
    assert!(ops.iter().any(|o| o == "all-reduce"), "{ops:?}");
}

#[test]
fn model_parallel_mlp_step_matches_one_device() {
    let c = client(8);
    let mesh = Mesh::new(&c, &[("data", 2), ("model", 4)]).unwrap();
    let rep = P::replicated();
    let rows = P::new([Some("data"), None]);
    let in_specs = Step {
        params: Mlp {
            w1: P::new([None, Some("model")]),
            b1: P::new([Some("model")]),
            w2: P::new([Some("model"), None]),
            b2: rep.clone(),
        },
        batch: Batch {
            x: rows.clone(),
            y: rows.clone(),
        },
    };
    let out_specs = Out {
        params: Mlp {
            w1: P::new([None, Some("model")]),
            b1: P::new([Some("model")]),
            w2: P::new([Some("model"), None]),
            b2: rep.clone(),
        },
        loss: rep.clone(),
    };
    let ops = sharded_step(&mesh, &c, &in_specs, &out_specs);
    // The hidden layer's contraction over `model` and the batch's gradient sums.
    assert!(ops.iter().any(|o| o == "all-reduce"), "{ops:?}");
}

// ---------------------------------------------------------------------------------
// Sharding constraints

#[test]
fn a_sharding_constraint_inside_a_program() {
    let c = client(8);
    let mesh = Mesh::new(&c, &[("data", 4), ("model", 2)]).unwrap();
    let dims = [8i64, 4];
    let full = data(32, 7);
    let x = ShardedArray::upload(&mesh, &P::new([Some("data"), None]), &full, &dims).unwrap();
    let constrained = P::new([None, Some("model")]);
    let f = c
        .jit_sharded(
            "constrained",
            &mesh,
            &Shape::of::<f32>(&dims),
            &P::new([Some("data"), None]),
            &P::new([Some("data"), None]),
            |_, x: Op| {
                let y = (&x * 3.0).with_sharding_constraint(&mesh, &constrained);
                &y + y.reduce_sum(&[0])
            },
        )
        .unwrap();
    let text = f.computation().to_hlo_text();
    assert!(
        text.contains("custom-call(")
            && text.contains("custom_call_target=\"Sharding\"")
            && text.contains("sharding={devices=[1,2,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}"),
        "{text}"
    );
    let got = f.call(&x).unwrap().to_vec::<f32>().unwrap();
    for i in 0..8 {
        for j in 0..4 {
            let s: f32 = (0..8).map(|k| 3.0 * full[k * 4 + j]).sum();
            let w = 3.0 * full[i * 4 + j] + s;
            assert!((got[i * 4 + j] - w).abs() < 1e-5, "[{i},{j}]");
        }
    }
    // The constraint survives a trip through the proto (field 40).
    let shardings = |m: &xlaclient::proto::HloModuleProto| -> Vec<(String, Option<xlaclient::proto::OpSharding>)> {
        m.computations
            .iter()
            .flat_map(|c| c.instructions.iter().map(|i| (i.opcode.clone(), i.sharding.clone())))
            .collect()
    };
    let proto = f.computation().proto();
    let back = xlaclient::Computation::from_proto(proto.clone()).unwrap();
    assert_eq!(shardings(&back.proto()), shardings(&proto));
    assert_eq!(
        shardings(&proto)
            .iter()
            .filter(|(_, s)| s.is_some())
            .count(),
        3
    );
    // A constraint that does not fit fails the op, naming the line.
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[6, 4]), "x");
    let line = line!() + 1;
    let y = x.with_sharding_constraint(&mesh, &P::new([Some("data"), None]));
    let e = b.build(&y).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("size 6") && msg.contains("`data`=4"), "{msg}");
    assert_eq!(e.location().map(|l| l.line()), Some(line), "{msg}");
    let b = Builder::new("bad_axis");
    let x = b.parameter(0, Shape::of::<f32>(&[8, 4]), "x");
    let y = x.with_sharding_constraint(&mesh, &P::new([Some("batch"), None]));
    let e = b.build(&y).unwrap_err().to_string();
    assert!(e.contains("`batch`"), "{e}");
}

#[test]
fn a_sharding_constraint_has_a_gradient() {
    let c = client(8);
    let mesh = Mesh::new(&c, &[("data", 4), ("model", 2)]).unwrap();
    let dims = [8i64, 4];
    let xs = data(32, 11);
    let ws = data(32, 12);
    let rows = P::new([Some("data"), None]);
    let x = ShardedArray::upload(&mesh, &rows, &xs, &dims).unwrap();
    let w = ShardedArray::upload(&mesh, &rows, &ws, &dims).unwrap();
    let shape = Shape::of::<f32>(&dims);
    let f = c
        .jit_sharded(
            "grad",
            &mesh,
            &(shape.clone(), shape.clone()),
            &rows,
            &rows,
            |b, (x, w): (Op, Op)| {
                // loss = Σ (x·w)², with the product constrained to `model` columns.
                let y = (&x * &w).with_sharding_constraint(&mesh, &P::new([None, Some("model")]));
                let loss = y.square().reduce_sum(&[0, 1]);
                b.grad(&loss, &x)
            },
        )
        .unwrap();
    // The cotangent passes the same constraint on its way back.
    let text = f.computation().to_hlo_text();
    assert_eq!(
        text.matches("custom_call_target=\"Sharding\"").count(),
        2,
        "{text}"
    );
    let got = f.call(&(x, w)).unwrap().to_vec::<f32>().unwrap();
    // d/dx Σ (x w)² = 2 x w².
    for (i, g) in got.iter().enumerate() {
        let want = 2.0 * xs[i] * ws[i] * ws[i];
        assert!((g - want).abs() < 1e-5, "[{i}] {g} vs {want}");
    }
    // Other kernels still have no rule.
    let b = Builder::new("no_rule");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let attrs = xlaclient::ops::misc::CustomCallAttrs {
        target: "my_kernel".into(),
        opaque: Vec::new(),
        api_version: 1,
        has_side_effect: false,
    };
    let y = b.custom_call(&attrs, &[&x], Shape::of::<f32>(&[2]));
    let g = b.grad(&y.reduce_sum(&[0]), &x);
    let e = b.build(&g).unwrap_err().to_string();
    assert!(e.contains("my_kernel") && e.contains("no gradient"), "{e}");
}

#[test]
fn a_mesh_over_devices_in_another_order() {
    // Mesh position p on device 7 - p: shards, partitions and outputs follow the
    // mesh, whatever order the executable lists its devices in.
    let c = client(8);
    let devs = c.addressable_devices();
    let rev: Vec<_> = devs.iter().rev().cloned().collect();
    let mesh = Mesh::with_devices(&c, &[("data", 8)], &rev).unwrap();
    let xs = data(16, 5);
    let rows = P::new([Some("data")]);
    let x = ShardedArray::upload(&mesh, &rows, &xs, &[16]).unwrap();
    assert_eq!(x.shards()[0].device().unwrap(), devs[7]);
    assert_eq!(x.shards()[0].to_vec::<f32>().unwrap(), &xs[..2]);
    let f = c
        .jit_sharded(
            "reversed",
            &mesh,
            &Shape::of::<f32>(&[16]),
            &rows,
            &(rows.clone(), P::replicated()),
            |_, x: Op| {
                let s = x.reduce_sum(&[0]);
                (&x - &s, s)
            },
        )
        .unwrap();
    let (y, s) = f.call(&x).unwrap();
    let total: f32 = xs.iter().sum();
    let sum = s.to_vec::<f32>().unwrap()[0];
    assert!((sum - total).abs() < 1e-5);
    for (g, v) in y.to_vec::<f32>().unwrap().iter().zip(&xs) {
        assert!((g - (v - sum)).abs() < 1e-6);
    }
    for (p, b) in y.shards().iter().enumerate() {
        assert_eq!(b.device().unwrap(), devs[7 - p]);
    }
    // Shardings are part of a module's fingerprint (the compilation cache's key).
    let g = c
        .jit_sharded(
            "reversed",
            &mesh,
            &Shape::of::<f32>(&[16]),
            &P::replicated(),
            &(rows.clone(), P::replicated()),
            |_, x: Op| {
                let s = x.reduce_sum(&[0]);
                (&x - &s, s)
            },
        )
        .unwrap();
    assert_ne!(f.computation().fingerprint(), g.computation().fingerprint());
}

// ---------------------------------------------------------------------------------
// Bad input

#[test]
fn bad_meshes_are_errors() {
    let c = client(4);
    let e = sharding_error(Mesh::new(&c, &[("data", 8)]).unwrap_err());
    assert!(e.contains("needs 8 devices") && e.contains("has 4"), "{e}");
    let e = sharding_error(Mesh::new(&c, &[("data", 2), ("model", 0)]).unwrap_err());
    assert!(e.contains("`model` has size 0"), "{e}");
    let e = sharding_error(Mesh::new(&c, &[("data", 2), ("data", 2)]).unwrap_err());
    assert!(e.contains("`data` appears twice"), "{e}");
    let e = sharding_error(Mesh::new(&c, &[]).unwrap_err());
    assert!(e.contains("at least one axis"), "{e}");
    let devs = c.addressable_devices();
    let e = sharding_error(
        Mesh::with_devices(&c, &[("data", 2)], &[devs[1].clone(), devs[1].clone()]).unwrap_err(),
    );
    assert!(e.contains("twice"), "{e}");
    let other = client(2);
    let e = sharding_error(
        Mesh::with_devices(&c, &[("data", 2)], &other.addressable_devices()).unwrap_err(),
    );
    assert!(e.contains("not an addressable device"), "{e}");
    // A mesh over chosen devices, in the order given.
    let m = Mesh::with_devices(&c, &[("data", 2)], &[devs[3].clone(), devs[1].clone()]).unwrap();
    let a = ShardedArray::upload(&m, &P::new([Some("data")]), &[1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(a.shards()[0].device().unwrap(), devs[3]);
    assert_eq!(a.shards()[1].to_vec::<f32>().unwrap(), [2.0]);
}

#[test]
fn bad_specs_and_shards_are_errors() {
    let c = client(8);
    let mesh = Mesh::new(&c, &[("data", 4), ("model", 2)]).unwrap();
    let six = data(24, 1);
    // A split that does not divide a dimension: the array, the axis, the sizes.
    let e = sharding_error(
        ShardedArray::upload(&mesh, &P::new([Some("data"), None]), &six, &[6, 4]).unwrap_err(),
    );
    assert!(
        e.contains("dimension 0")
            && e.contains("size 6")
            && e.contains("4 shards")
            && e.contains("`data`=4"),
        "{e}"
    );
    let e = sharding_error(
        ShardedArray::upload(&mesh, &P::split([vec!["data", "model"]]), &six[..12], &[12])
            .unwrap_err(),
    );
    assert!(
        e.contains("size 12") && e.contains("8 shards") && e.contains("`data`=4 × `model`=2"),
        "{e}"
    );
    // An axis the mesh does not have.
    let e = sharding_error(
        ShardedArray::upload(&mesh, &P::new([Some("batch")]), &six, &[24]).unwrap_err(),
    );
    assert!(
        e.contains("`batch`") && e.contains("data=4, model=2"),
        "{e}"
    );
    // An axis twice, a spec longer than the rank, data of the wrong length.
    let e = sharding_error(
        ShardedArray::upload(&mesh, &P::new([Some("data"), Some("data")]), &six, &[4, 6])
            .unwrap_err(),
    );
    assert!(e.contains("twice"), "{e}");
    let e = sharding_error(
        ShardedArray::upload(&mesh, &P::new([None, None, Some("data")]), &six, &[4, 6])
            .unwrap_err(),
    );
    assert!(e.contains("rank 2"), "{e}");
    let e =
        sharding_error(ShardedArray::upload(&mesh, &P::replicated(), &six, &[5, 5]).unwrap_err());
    assert!(e.contains("25 elements"), "{e}");

    // Shards: the wrong number, on the wrong device, of the wrong shape.
    let devs = mesh.devices();
    let spec = P::new([Some("data")]);
    let shards = |on: &dyn Fn(usize) -> usize, len: usize| -> Vec<xlaclient::Buffer> {
        (0..8)
            .map(|p| {
                devs[on(p)]
                    .buffer_from_host(&vec![p as f32; len], &[len as i64])
                    .unwrap()
            })
            .collect()
    };
    let mut three = shards(&|p| p, 2);
    three.truncate(3);
    let e = sharding_error(
        ShardedArray::from_shards(&mesh, &spec, ElementType::F32, &[8], three).unwrap_err(),
    );
    assert!(e.contains("3 shards") && e.contains("8 devices"), "{e}");
    let e = sharding_error(
        ShardedArray::from_shards(
            &mesh,
            &spec,
            ElementType::F32,
            &[8],
            shards(&|p| (p + 1) % 8, 2),
        )
        .unwrap_err(),
    );
    assert!(e.contains("shard 0 is on device"), "{e}");
    let e = sharding_error(
        ShardedArray::from_shards(&mesh, &spec, ElementType::F32, &[8], shards(&|p| p, 3))
            .unwrap_err(),
    );
    assert!(e.contains("f32[3]") && e.contains("f32[2]"), "{e}");

    // jit_sharded: specs that do not fit, arguments laid out otherwise.
    let shape = Shape::of::<f32>(&[6, 4]);
    let r = c.jit_sharded(
        "f",
        &mesh,
        &shape,
        &P::new([Some("data")]),
        &P::replicated(),
        |_, x: Op| x + 1.0,
    );
    let e = sharding_error(r.err().expect("a spec that does not divide"));
    assert!(e.contains("input 0") && e.contains("size 6"), "{e}");
    let r = c.jit_sharded(
        "f",
        &mesh,
        &shape,
        &P::replicated(),
        &P::new([None, Some("nope")]),
        |_, x: Op| x + 1.0,
    );
    let e = sharding_error(r.err().expect("an unknown axis"));
    assert!(e.contains("output 0") && e.contains("`nope`"), "{e}");
    let r = c.jit_sharded(
        "f",
        &mesh,
        &(shape.clone(), shape.clone()),
        &(P::replicated(), P::replicated(), P::replicated()),
        &P::replicated(),
        |_, (x, y): (Op, Op)| x + y,
    );
    assert!(
        sharding_error(r.err().expect("a spec tree of another structure")).contains("in_specs")
    );
    let f = c
        .jit_sharded(
            "f",
            &mesh,
            &Shape::of::<f32>(&[8, 4]),
            &P::new([None, Some("model")]),
            &P::replicated(),
            |_, x: Op| x + 1.0,
        )
        .unwrap();
    let rows = ShardedArray::upload(&mesh, &P::new([Some("data")]), &data(32, 2), &[8, 4]).unwrap();
    let e = sharding_error(f.call(&rows).unwrap_err());
    assert!(
        e.contains("P('data')") && e.contains("P(None, 'model')"),
        "{e}"
    );
    let small =
        ShardedArray::upload(&mesh, &P::new([None, Some("model")]), &data(16, 2), &[4, 4]).unwrap();
    let e = sharding_error(f.call(&small).unwrap_err());
    assert!(e.contains("f32[4,4]") && e.contains("f32[8,4]"), "{e}");
    let mesh2 = Mesh::new(&c, &[("model", 2), ("data", 4)]).unwrap();
    let elsewhere = ShardedArray::upload(
        &mesh2,
        &P::new([None, Some("model")]),
        &data(32, 2),
        &[8, 4],
    )
    .unwrap();
    let e = sharding_error(f.call(&elsewhere).unwrap_err());
    assert!(e.contains("lives on"), "{e}");
    // The right one runs.
    let ok =
        ShardedArray::upload(&mesh, &P::new([None, Some("model")]), &data(32, 2), &[8, 4]).unwrap();
    let got = f.call(&ok).unwrap().to_vec::<f32>().unwrap();
    let want: Vec<f32> = data(32, 2).iter().map(|v| v + 1.0).collect();
    assert_eq!(got, want);
}

#[test]
fn shardings_naming_missing_partitions_are_compile_errors() {
    in_child(
        "shardings_naming_missing_partitions_are_compile_errors",
        || {
            let c = client(8);
            let mesh8 = Mesh::new(&c, &[("data", 8)]).unwrap();
            let mesh4 = Mesh::new(&c, &[("data", 4)]).unwrap();
            let f = c
                .jit_sharded(
                    "f",
                    &mesh8,
                    &Shape::of::<f32>(&[8]),
                    &P::new([Some("data")]),
                    &P::replicated(),
                    |_, x: Op| x * 2.0,
                )
                .unwrap();
            // The program for 8 partitions compiled for 4: refused before XLA.
            let e = c
                .compile_with(f.computation(), &mesh4.compile_options())
                .expect_err("a sharding naming partition 7 of 4")
                .to_string();
            assert!(
                e.contains("partition 7") && e.contains("4 partition"),
                "{e}"
            );
            // The wrong number of per-device argument lists and a shard on the wrong
            // device reach the runtime's checks, not the plugin.
            let x =
                ShardedArray::upload(&mesh8, &P::new([Some("data")]), &[1.0f32; 8], &[8]).unwrap();
            let exe = f.executable();
            let few: Vec<Vec<&xlaclient::Buffer>> =
                x.shards()[..3].iter().map(|b| vec![b]).collect();
            assert!(exe.execute_replicated(&few).is_err());
            let wrong_shape = mesh8.devices()[0]
                .buffer_from_host(&[1.0f32; 8], &[8])
                .unwrap();
            let mut lists: Vec<Vec<&xlaclient::Buffer>> =
                x.shards().iter().map(|b| vec![b]).collect();
            lists[0] = vec![&wrong_shape];
            let e = exe.execute_replicated(&lists).unwrap_err().to_string();
            assert!(e.contains("f32[1]") && e.contains("f32[8]"), "{e}");
            // Device 1's shard in device 0's list: both plugins fail device 0
            // while the others wait in the all-gather, and abort the process
            // after 40 s; refused before the launch.
            let mut lists: Vec<Vec<&xlaclient::Buffer>> =
                x.shards().iter().map(|b| vec![b]).collect();
            lists.swap(0, 1);
            let e = exe.execute_replicated(&lists).unwrap_err().to_string();
            assert!(
                e.contains("argument 0 for device 0") && e.contains("on device id 1"),
                "{e}"
            );
            // One argument list for a program loaded on 8 devices.
            let e = exe.execute(&[&x.shards()[0]]).unwrap_err().to_string();
            assert!(e.contains("1 argument lists") && e.contains("8"), "{e}");
            // The program still runs with the right lists afterwards.
            let out = f.call(&x).unwrap();
            assert_eq!(out.to_vec::<f32>().unwrap(), [2.0f32; 8]);
        },
    );
}
