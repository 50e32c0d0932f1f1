//! Train in JAX, run in Rust: a Catch policy exported by JAX as StableHLO text
//! (`scripts/export_jax_policy.py`: `jax.jit(policy).lower(params, obs).as_text()`)
//! with its parameters in safetensors, imported into the crate's IR
//! (`xlaclient::stablehlo::import`: every op through the crate's shape rules), and
//! run in a host loop on Catch (`xlaclient::rl::catch`, stepped in plain Rust).
//!
//! Checks, in order:
//!   1. the imported module's Q-values on the boards the script recorded equal
//!      JAX's (`max_abs_err`, the last line; the example fails above 1e-5);
//!   2. in the host loop (8 Catch worlds, greedy actions, 500 vector steps), every
//!      step's Q-values equal a plain-Rust forward pass of the same parameters
//!      (the program fails above 1e-5).
//!
//! Run: `cargo run --release --example jax_exported_policy`. The last line is
//! `max_abs_err=<float>`.

use xlaclient::checkpoint::{Checkpoint, OnExtra};
use xlaclient::rl::catch::{Catch, NUM_ACTIONS};
use xlaclient::rl::{Environment, Rng};
use xlaclient::{Client, Tree, stablehlo};

const OBS: usize = 50;
const HID: usize = 64;
const MAX_ERR: f32 = 1e-5;

#[derive(Tree, Debug)]
struct Params<T> {
    w1: T,
    b1: T,
    w2: T,
    b2: T,
}

fn data(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/stablehlo")
        .join(file)
}

/// The policy in plain Rust: relu(obs @ w1 + b1) @ w2 + b2, one row.
fn forward(p: &Params<Vec<f32>>, obs: &[f32]) -> [f32; NUM_ACTIONS] {
    let mut h = p.b1.clone();
    for (o, row) in obs.iter().zip(p.w1.chunks(HID)) {
        for (hj, w) in h.iter_mut().zip(row) {
            *hj += o * w;
        }
    }
    let mut q = [0.0f32; NUM_ACTIONS];
    for (a, qa) in q.iter_mut().enumerate() {
        *qa = p.b2[a]
            + (0..HID)
                .map(|j| h[j].max(0.0) * p.w2[j * NUM_ACTIONS + a])
                .sum::<f32>();
    }
    q
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(data("policy.mlir"))?;
    let t0 = std::time::Instant::now();
    let module = stablehlo::import(&text)?;
    let import_s = t0.elapsed().as_secs_f64();
    // How long a large module takes: one Anakin update (91 kB of MLIR).
    let anakin = std::fs::read_to_string(data("anakin.mlir"))?;
    let t0 = std::time::Instant::now();
    let big = stablehlo::import(&anakin)?;
    let anakin_s = t0.elapsed().as_secs_f64();
    println!(
        "import: policy.mlir {:.2} ms, anakin.mlir ({} bytes, {} computations) {:.1} ms",
        import_s * 1e3,
        anakin.len(),
        big.computation().ir().comps.len(),
        anakin_s * 1e3
    );
    let shapes = module.parameter_shapes();
    let n = shapes[4].dims()[0] as usize;
    println!(
        "imported policy.mlir: {} ops, arguments {:?}",
        module.computation().ir().comps[0].instrs.len(),
        shapes.iter().map(ToString::to_string).collect::<Vec<_>>()
    );

    // The parameters, by name, checked against the module's argument shapes.
    let spec = Params {
        w1: shapes[0].clone(),
        b1: shapes[1].clone(),
        w2: shapes[2].clone(),
        b2: shapes[3].clone(),
    };
    let file = Checkpoint::read(data("policy.safetensors"))?;
    let client = Client::cpu()?;
    let bufs = file.buffers(&client, &spec, OnExtra::Error)?;
    let host = file.host(&spec, OnExtra::Error)?;
    let params = Params {
        w1: host.w1.to_vec::<f32>()?,
        b1: host.b1.to_vec::<f32>()?,
        w2: host.w2.to_vec::<f32>()?,
        b2: host.b2.to_vec::<f32>()?,
    };
    let exe = client.compile(module.computation())?;
    let run = |obs: &[f32]| -> Result<Vec<f32>, Box<dyn std::error::Error>> {
        let o = client.buffer_from_host(obs, &[n as i64, OBS as i64])?;
        let out = exe.execute(&[&bufs.w1, &bufs.b1, &bufs.w2, &bufs.b2, &o])?;
        Ok(out[0].to_vec::<f32>()?)
    };

    // 2. The host loop: n Catch worlds stepped in Rust, the policy through PJRT.
    let mut rng = Rng::new(7);
    let mut envs: Vec<Catch> = (0..n).map(|_| Catch::new(rng.next_u64())).collect();
    let mut obs = vec![0.0f32; n * OBS];
    let (mut reward, mut episodes, mut loop_err) = (0.0f64, 0usize, 0.0f32);
    let steps = 500;
    for _ in 0..steps {
        for (e, o) in envs.iter_mut().zip(obs.chunks_mut(OBS)) {
            e.observe(o)?;
        }
        let q = run(&obs)?;
        for (i, e) in envs.iter_mut().enumerate() {
            let qi = &q[i * NUM_ACTIONS..(i + 1) * NUM_ACTIONS];
            let want = forward(&params, &obs[i * OBS..(i + 1) * OBS]);
            for (a, b) in qi.iter().zip(&want) {
                loop_err = loop_err.max((a - b).abs());
            }
            let act = (0..NUM_ACTIONS)
                .max_by(|a, b| qi[*a].total_cmp(&qi[*b]))
                .unwrap_or(0);
            let t = e.step(act)?;
            if t.terminal {
                reward += f64::from(t.reward);
                episodes += 1;
            }
        }
    }
    println!(
        "host loop: {n} worlds x {steps} steps, {episodes} episodes, mean reward {:.3} (untrained policy), max |q - rust| = {loop_err:.3e}",
        reward / episodes.max(1) as f64
    );
    if loop_err > MAX_ERR {
        return Err(format!("Q-values differ from the Rust forward pass by {loop_err}").into());
    }

    // 1. JAX's own Q-values on the recorded boards.
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("policy.json"))?)?;
    let floats = |k: &str| -> Vec<f32> {
        rec[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_f64())
                    .map(|x| x as f32)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (jobs, jq) = (floats("obs"), floats("q"));
    let q = run(&jobs)?;
    if q.len() != jq.len() || jq.is_empty() {
        return Err(format!("{} Q-values, JAX recorded {}", q.len(), jq.len()).into());
    }
    let err = q
        .iter()
        .zip(&jq)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!(
        "q[0] = {:?}, JAX {:?}",
        &q[..NUM_ACTIONS],
        &jq[..NUM_ACTIONS]
    );
    println!("max_abs_err={err:e}");
    if err > MAX_ERR {
        return Err(format!("max_abs_err {err} above {MAX_ERR}").into());
    }
    Ok(())
}
