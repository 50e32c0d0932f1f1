//! An MLP's SGD step (64 → 256 → relu → 8, mean squared error) trained three
//! ways on 8 CPU devices of one client: on one device (`jit`), with the batch split
//! over a `data=8` mesh (`jit_sharded`, parameters replicated: XLA inserts the
//! gradient's all-reduce), and with the first weight matrix split over `model`
//! (mesh `data=2 × model=4`). Each runs the same steps from the same start; the
//! example prints the compile time, the median step time and the final loss of
//! each, and checks that the sharded runs' parameters match the one-device run's.
//!
//! Run: `cargo run --release --example sharded_mlp -- [batch] [steps]` (defaults
//! 1024 and 50). The figures in guide 07 come from this.

use std::time::Instant;

use xlaclient::{
    Builder, Client, ClientExt, ClientOptions, Mesh, Op, P, PartitionSpec, Plugin, Shape,
    ShardedArray, Tree,
};

const IN: i64 = 64;
const HIDDEN: i64 = 256;
const OUTS: i64 = 8;
const LR: f64 = 0.05;

#[derive(Tree)]
struct Mlp<T> {
    w1: T,
    b1: T,
    w2: T,
    b2: T,
}

#[derive(Tree)]
struct Step<T> {
    params: Mlp<T>,
    x: T,
    y: T,
}

#[derive(Tree)]
struct Out<T> {
    params: Mlp<T>,
    loss: T,
}

fn spec(batch: i64) -> Step<Shape> {
    let f = |d: &[i64]| Shape::of::<f32>(d);
    Step {
        params: Mlp {
            w1: f(&[IN, HIDDEN]),
            b1: f(&[HIDDEN]),
            w2: f(&[HIDDEN, OUTS]),
            b2: f(&[OUTS]),
        },
        x: f(&[batch, IN]),
        y: f(&[batch, OUTS]),
    }
}

fn step(b: &Builder, s: Step<Op>) -> Out<Op> {
    let p = &s.params;
    let h = (s.x.matmul(&p.w1) + &p.b1).relu();
    let loss = (h.matmul(&p.w2) + &p.b2 - &s.y)
        .square()
        .mean(&[0, 1], false);
    let g = b.grad(&loss, &s.params);
    Out {
        params: Mlp {
            w1: &p.w1 - &g.w1 * LR,
            b1: &p.b1 - &g.b1 * LR,
            w2: &p.w2 - &g.w2 * LR,
            b2: &p.b2 - &g.b2 * LR,
        },
        loss,
    }
}

/// SplitMix64 values in [-scale, scale).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn host(batch: i64) -> Vec<Vec<f32>> {
    spec(batch)
        .leaves()
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let n = s.dims().iter().product::<i64>() as usize;
            values(n, i as u64 + 1, if i < 4 { 0.2 } else { 1.0 })
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Run {
    name: &'static str,
    compile_s: f64,
    step_ms: f64,
    loss: f32,
    params: Vec<Vec<f32>>,
}

fn one_device(client: &Client, batch: i64, steps: usize) -> xlaclient::Result<Run> {
    let t = Instant::now();
    let f = client.jit("mlp_step", &spec(batch), step)?;
    let compile_s = t.elapsed().as_secs_f64();
    let sp = spec(batch);
    let bufs = host(batch)
        .iter()
        .zip(sp.leaves())
        .map(|(v, s)| client.buffer_from_host(v, s.dims()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut args = sp.rebuild(bufs)?;
    let mut times = Vec::new();
    let mut loss = 0.0;
    for _ in 0..steps {
        let t = Instant::now();
        let out = f.call(&args)?;
        loss = out.loss.to_vec::<f32>()?[0];
        times.push(t.elapsed().as_secs_f64());
        args = Step {
            params: out.params,
            x: args.x,
            y: args.y,
        };
    }
    let params = args
        .params
        .leaves()
        .into_iter()
        .map(|b| b.to_vec::<f32>())
        .collect::<Result<_, _>>()?;
    Ok(Run {
        name: "one device",
        compile_s,
        step_ms: median(times) * 1e3,
        loss,
        params,
    })
}

fn sharded(
    name: &'static str,
    client: &Client,
    mesh: &Mesh,
    specs: Mlp<PartitionSpec>,
    batch: i64,
    steps: usize,
) -> xlaclient::Result<Run> {
    let rows = P::new([Some("data"), None]);
    let in_specs = Step {
        params: specs,
        x: rows.clone(),
        y: rows.clone(),
    };
    let out_specs = Out {
        params: in_specs.params.map_ref(Clone::clone),
        loss: P::replicated(),
    };
    let t = Instant::now();
    let f = client.jit_sharded("mlp_step", mesh, &spec(batch), &in_specs, &out_specs, step)?;
    let compile_s = t.elapsed().as_secs_f64();
    let arrays = host(batch)
        .iter()
        .zip(spec(batch).leaves())
        .zip(in_specs.leaves())
        .map(|((v, s), p)| ShardedArray::upload(mesh, p, v, s.dims()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut args = spec(batch).rebuild(arrays)?;
    let mut times = Vec::new();
    let mut loss = 0.0;
    for _ in 0..steps {
        let t = Instant::now();
        let out = f.call(&args)?;
        loss = out.loss.to_vec::<f32>()?[0];
        times.push(t.elapsed().as_secs_f64());
        args = Step {
            params: out.params,
            x: args.x,
            y: args.y,
        };
    }
    let params = args
        .params
        .leaves()
        .into_iter()
        .map(|a| a.to_vec::<f32>())
        .collect::<Result<_, _>>()?;
    Ok(Run {
        name,
        compile_s,
        step_ms: median(times) * 1e3,
        loss,
        params,
    })
}

fn main() -> xlaclient::Result<()> {
    let mut a = std::env::args().skip(1);
    let batch: i64 = a.next().and_then(|s| s.parse().ok()).unwrap_or(1024);
    let steps: usize = a.next().and_then(|s| s.parse().ok()).unwrap_or(50);
    let plugin = Plugin::default_plugin()?;
    let client = Client::new(&plugin, &ClientOptions::new().cpu_device_count(8))?;
    let rep = P::replicated;
    let runs = [
        one_device(&client, batch, steps)?,
        sharded(
            "data=8 (batch split)",
            &client,
            &Mesh::new(&client, &[("data", 8)])?,
            Mlp {
                w1: rep(),
                b1: rep(),
                w2: rep(),
                b2: rep(),
            },
            batch,
            steps,
        )?,
        sharded(
            "data=2 x model=4 (w1 split)",
            &client,
            &Mesh::new(&client, &[("data", 2), ("model", 4)])?,
            Mlp {
                w1: P::new([None, Some("model")]),
                b1: P::new([Some("model")]),
                w2: P::new([Some("model"), None]),
                b2: rep(),
            },
            batch,
            steps,
        )?,
    ];
    println!("batch {batch}, {steps} steps, MLP {IN}-{HIDDEN}-{OUTS}");
    let mut worst = 0f32;
    for r in &runs {
        for (p, q) in r.params.iter().zip(&runs[0].params) {
            for (x, y) in p.iter().zip(q) {
                worst = worst.max((x - y).abs());
            }
        }
        println!(
            "{:<28} compile {:.3} s, median step {:.3} ms, final loss {:.6}",
            r.name, r.compile_s, r.step_ms, r.loss
        );
    }
    println!("max_param_diff_vs_one_device={worst:e}");
    assert!(
        worst < 1e-4,
        "the sharded runs drifted from the one-device run"
    );
    Ok(())
}
