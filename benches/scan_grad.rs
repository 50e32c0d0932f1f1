//! The gradient of a 1,000-step scan under each checkpoint policy
//! (`ScanOptions::policy`, JAX's `jax.checkpoint_policies`): storing every value the
//! body computes at each step (`Everything`, the default), checkpointing (`Nothing`:
//! storing only the carry and recomputing the body in the backward pass), storing
//! the dot results only (`Dots`), and storing only the value tagged "pre" (`Names`).
//! Also the forward pass alone, for scale.
//!
//! The body is one RNN step, `h' = tanh(pre)`, `pre = h·W + x_t` with `h` of `[batch, width]`,
//! and `y_t = Σ h'`; the loss is `Σ_t y_t`, differentiated with respect to `W` and
//! the initial `h`. For each program the bench prints the compile time, XLA's
//! temporary-buffer size (`LoadedExecutable::memory_stats`: what the stored values
//! cost), and the median time of a call over several runs, then the ratios of the
//! gradient programs measured side by side.
//!
//! Run: `cargo bench --bench scan_grad` (optionally `-- STEPS BATCH WIDTH`).

use std::time::Instant;

use xlaclient::{Builder, CheckpointPolicy, Client, Computation, ScanOptions, Shape};

fn program(
    steps: i64,
    batch: i64,
    width: i64,
    grad: bool,
    policy: CheckpointPolicy,
) -> Computation {
    let b = Builder::new("scan_grad");
    let w = b.parameter(0, Shape::of::<f32>(&[width, width]), "w");
    let h0 = b.parameter(1, Shape::of::<f32>(&[batch, width]), "h0");
    let xs = b.parameter(2, Shape::of::<f32>(&[steps, batch, width]), "xs");
    let opts = ScanOptions::new().policy(policy);
    let (_, ys) = b.scan_with(h0.clone(), xs, &opts, |h, x| {
        let h2 = (&h.matmul(&w) + &x).checkpoint_name("pre").tanh();
        let y = h2.reduce_sum(&[0, 1]);
        (h2, y)
    });
    let loss = ys.reduce_sum(&[0]);
    if grad {
        let (gw, gh) = b.grad(&loss, &(w.clone(), h0.clone()));
        b.build_tuple(&[&loss, &gw, &gh])
    } else {
        b.build(&loss)
    }
    .expect("the program builds")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> xlaclient::Result<()> {
    let args: Vec<i64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (steps, batch, width) = (
        *args.first().unwrap_or(&1000),
        *args.get(1).unwrap_or(&32),
        *args.get(2).unwrap_or(&128),
    );
    println!("scan of {steps} steps, h: [{batch}, {width}], W: [{width}, {width}] (f32)");
    let client = Client::cpu()?;
    let mut fill = 0u32;
    let mut data = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                fill = fill.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (fill >> 8) as f32 / (1u32 << 24) as f32 * 0.2 - 0.1
            })
            .collect()
    };
    let w = client.buffer_from_host(&data((width * width) as usize), &[width, width])?;
    let h0 = client.buffer_from_host(&data((batch * width) as usize), &[batch, width])?;
    let xs = client.buffer_from_host(
        &data((steps * batch * width) as usize),
        &[steps, batch, width],
    )?;

    let mut exes = Vec::new();
    for (name, grad, policy) in [
        ("forward only", false, CheckpointPolicy::Everything),
        (
            "gradient, stored values",
            true,
            CheckpointPolicy::Everything,
        ),
        ("gradient, checkpointed", true, CheckpointPolicy::Nothing),
        ("gradient, dots saved", true, CheckpointPolicy::Dots),
        (
            "gradient, names saved",
            true,
            CheckpointPolicy::names(&["pre"]),
        ),
    ] {
        let t = Instant::now();
        let exe = client.compile(program(steps, batch, width, grad, policy))?;
        let compile = t.elapsed().as_secs_f64();
        let m = exe.memory_stats()?;
        exes.push((name, exe, compile, m.temp_bytes));
    }
    // Warm up, then alternate the programs so they share the machine's noise.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); exes.len()];
    for round in 0..7 {
        for (k, (_, exe, _, _)) in exes.iter().enumerate() {
            let t = Instant::now();
            let out = exe.execute(&[&w, &h0, &xs])?;
            out[0].to_vec::<f32>()?;
            if round > 0 {
                times[k].push(t.elapsed().as_secs_f64());
            }
        }
    }
    let med: Vec<f64> = times.into_iter().map(median).collect();
    for ((name, _, compile, temp), t) in exes.iter().zip(&med) {
        println!(
            "{name:<26} compile {compile:>6.2} s   temp buffers {:>9.1} MiB   run {:>8.1} ms",
            *temp as f64 / (1 << 20) as f64,
            t * 1e3
        );
    }
    let (stored, ckpt) = (&exes[1], &exes[2]);
    println!(
        "checkpointed / stored: memory {:.2}x, time {:.2}x",
        ckpt.3 as f64 / stored.3.max(1) as f64,
        med[2] / med[1]
    );
    println!(
        "gradient / forward: stored {:.2}x, checkpointed {:.2}x, dots {:.2}x, names {:.2}x",
        med[1] / med[0],
        med[2] / med[0],
        med[3] / med[0],
        med[4] / med[0]
    );
    Ok(())
}
