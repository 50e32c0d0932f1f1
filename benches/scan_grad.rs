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
//! Three hand-written programs give the scale of what any gradient of this scan can
//! cost on the backend: the same backward pass written out by hand (a forward loop
//! stacking `h'`, a backward loop with the step's two products, `dpre·Wᵀ` with `Wᵀ`
//! transposed once and the weight's `h_{t-1}ᵀ·dpre`, as the automatic gradient
//! does), the same without the weight's product (`W`'s cotangent left out: a floor
//! no gradient with respect to `W` can go under), and the weight's product taken
//! after the backward loop over every step's rows at once (what the engine does
//! for loops whose steps no cotangent chains, measured here for a recurrent one).
//! Their ratios to the forward pass are printed too.
//!
//! One more program bounds what any gradient computed one step at a time can
//! cost here: the forward loop with three products of the forward step's size a
//! step instead of one (the gradient's products: the forward step's, then the
//! state's `dpre·Wᵀ` and the weight's `hᵀ·dpre` in the backward step). Its ratio
//! to the forward pass is the gradient's floor while the products run one after
//! another on one thread, before any element-wise work of the backward step.
//!
//! The forward pass and the default gradient are compiled a second time with
//! `CompileOptions::library_fusions` holding `Dot` in place of XLA's
//! `IndividualDot` (a product and the element-wise work around it, such as the
//! gradient's accumulation of the weight's product, in one library call), and
//! that gradient's ratio to that forward pass printed beside the others.
//!
//! The default gradient's backward loop runs 4 steps per iteration and takes the
//! weight's product once per 4 steps (`ScanOptions::backward_chunk`); the same
//! gradient with a product per step (`backward_chunk(1)`) is compiled too and its
//! ratio printed beside it.
//!
//! Run: `cargo bench --bench scan_grad` (optionally `-- STEPS BATCH WIDTH`, and
//! `--keep-host-heap` for a client made with `ClientOptions::keep_host_heap`:
//! the weight's product after the loop needs more than glibc's 32 MiB mmap
//! threshold of temporaries at the default size).

use std::time::Instant;

use xlaclient::{
    Builder, CheckpointPolicy, Client, ClientOptions, Comparison, CompileOptions, Computation,
    DotDims, ElementType, LibraryFusion, Plugin, ScanOptions, Shape,
};

fn program(
    steps: i64,
    batch: i64,
    width: i64,
    grad: bool,
    policy: CheckpointPolicy,
    chunk: usize,
) -> Computation {
    let b = Builder::new("scan_grad");
    let w = b.parameter(0, Shape::of::<f32>(&[width, width]), "w");
    let h0 = b.parameter(1, Shape::of::<f32>(&[batch, width]), "h0");
    let xs = b.parameter(2, Shape::of::<f32>(&[steps, batch, width]), "xs");
    let opts = ScanOptions::new().policy(policy).backward_chunk(chunk);
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

/// Where the hand-written gradient computes `W`'s cotangent.
#[derive(Clone, Copy, PartialEq)]
enum Weight {
    /// In the backward loop, one small product per step, as the automatic
    /// gradient does.
    InLoop,
    /// After the backward loop: the loop stacks each step's `dpre` at row `t − 1`
    /// (step 0's at the last row, which no other step writes), and one product
    /// over all `steps · batch` rows, in chunks of 2,000 rows, pairs row `r` of
    /// the `h'` stack (the state entering step `r + 1`) with it; the last row's
    /// pairing is corrected to `h0`'s with one small product.
    AfterLoop,
    /// Not at all (`W`'s cotangent returned as zeros): the floor.
    Without,
}

/// The scan's gradient written by hand, `W`'s cotangent computed as `weight`
/// says.
fn hand_written(steps: i64, batch: i64, width: i64, weight: Weight) -> Computation {
    let b = Builder::new("scan_grad_by_hand");
    let w = b.parameter(0, Shape::of::<f32>(&[width, width]), "w");
    let h0 = b.parameter(1, Shape::of::<f32>(&[batch, width]), "h0");
    let xs = b.parameter(2, Shape::of::<f32>(&[steps, batch, width]), "xs");
    let zero = b.constant(0i32);
    let row = |stack: &xlaclient::Op, t: &xlaclient::Op| {
        stack
            .dynamic_slice(&[t, &zero, &zero], &[1, batch, width])
            .reshape(&[batch, width])
    };
    // Forward: h' per step stacked, y_t = Σ h' stacked.
    let init = (
        h0.clone(),
        b.zeros(ElementType::F32, &[steps, batch, width]),
        b.zeros(ElementType::F32, &[steps]),
    );
    let (_, hs, ys) = b.fori_loop(0, steps as i32, init, |t, (h, hs, ys)| {
        let h2 = (&h.matmul(&w) + &row(&xs, t)).tanh();
        let hs = hs.dynamic_update_slice(&h2.reshape(&[1, batch, width]), &[t, &zero, &zero]);
        let ys = ys.dynamic_update_slice(&h2.reduce_sum(&[0, 1]).reshape(&[1]), &[t]);
        (h2, hs, ys)
    });
    let loss = ys.reduce_sum(&[0]);
    // Backward, t = steps-1 … 0: dpre = (dh + 1)·(1 − h'²), dh ← dpre·Wᵀ (with
    // `Wᵀ` transposed once before the loop, as the automatic gradient does) and
    // dW += h_{t-1}ᵀ·dpre (h_{-1} = h0).
    let wt = b.optimization_barrier(&[&w.transpose(&[1, 0])]).remove(0);
    let init = (
        b.zeros(ElementType::F32, &[batch, width]),
        b.zeros(ElementType::F32, &[width, width]),
        b.zeros(ElementType::F32, &[steps, batch, width]),
    );
    let (dh, dw, dpres) = b.fori_loop(0, steps as i32, init, |s, (dh, dw, dpres)| {
        let t = -s + (steps - 1);
        let h2 = row(&hs, &t);
        let dpre = &(&dh + 1.0) * &(1.0 - &(&h2 * &h2));
        let dh = dpre.matmul(&wt);
        let first = t.compare(&zero, Comparison::Eq);
        match weight {
            Weight::Without => (dh, dw, dpres),
            Weight::InLoop => {
                let first = first.broadcast_in_dim(&[batch, width], &[]);
                let prev = b.select(&first, &h0, &row(&hs, &(&t - 1i64).max(&zero)));
                let dw = &dw + &prev.dot_general(&dpre, &DotDims::contract(0, 0));
                (dh, dw, dpres)
            }
            Weight::AfterLoop => {
                let at = b.select(&first, &b.constant((steps - 1) as i32), &(&t - 1i64));
                let dpres = dpres
                    .dynamic_update_slice(&dpre.reshape(&[1, batch, width]), &[&at, &zero, &zero]);
                (dh, dw, dpres)
            }
        }
    });
    let dw = if weight == Weight::AfterLoop {
        let s = (steps * batch / 2000).max(1);
        let chunked = DotDims {
            lhs_contracting: vec![1],
            rhs_contracting: vec![1],
            lhs_batch: vec![0],
            rhs_batch: vec![0],
        };
        let all = hs
            .reshape(&[s, steps * batch / s, width])
            .dot_general(&dpres.reshape(&[s, steps * batch / s, width]), &chunked)
            .reduce_sum(&[0]);
        let last = b.constant((steps - 1) as i32);
        let fix =
            (&h0 - &row(&hs, &last)).dot_general(&row(&dpres, &last), &DotDims::contract(0, 0));
        &all + &fix
    } else {
        dw
    };
    b.build_tuple(&[&loss, &dw, &dh])
        .expect("the program builds")
}

/// The forward loop with three products a step (`h·W`, then that times `W`
/// twice) where the forward pass has one: the products a gradient step computes
/// one after another.
fn three_products(steps: i64, batch: i64, width: i64) -> Computation {
    let b = Builder::new("three_products");
    let w = b.parameter(0, Shape::of::<f32>(&[width, width]), "w");
    let h0 = b.parameter(1, Shape::of::<f32>(&[batch, width]), "h0");
    let xs = b.parameter(2, Shape::of::<f32>(&[steps, batch, width]), "xs");
    let (_, ys) = b.scan(h0, xs, |h, x| {
        let p = h.matmul(&w).matmul(&w).matmul(&w);
        let h2 = (&p + &x).tanh();
        let y = h2.reduce_sum(&[0, 1]);
        (h2, y)
    });
    b.build(&ys.reduce_sum(&[0])).expect("the program builds")
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
    let keep_heap = std::env::args().any(|a| a == "--keep-host-heap");
    let (steps, batch, width) = (
        *args.first().unwrap_or(&1000),
        *args.get(1).unwrap_or(&32),
        *args.get(2).unwrap_or(&128),
    );
    println!(
        "scan of {steps} steps, h: [{batch}, {width}], W: [{width}, {width}] (f32){}",
        if keep_heap { ", host heap kept" } else { "" }
    );
    let client = Client::new(
        &Plugin::default_plugin()?,
        &ClientOptions::new().keep_host_heap(keep_heap),
    )?;
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

    let dot_fusions = CompileOptions::new().library_fusions(&[
        LibraryFusion::Dot,
        LibraryFusion::IndividualConvolution,
        LibraryFusion::Reduce,
    ]);
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
        let exe = client.compile(program(steps, batch, width, grad, policy, 0))?;
        let compile = t.elapsed().as_secs_f64();
        let m = exe.memory_stats()?;
        exes.push((name, exe, compile, m.temp_bytes));
    }
    for (name, with_weight) in [
        ("by hand, same backward", Weight::InLoop),
        ("by hand, no weight grad", Weight::Without),
        ("by hand, weight after", Weight::AfterLoop),
    ] {
        let t = Instant::now();
        let exe = client.compile(hand_written(steps, batch, width, with_weight))?;
        let compile = t.elapsed().as_secs_f64();
        let m = exe.memory_stats()?;
        exes.push((name, exe, compile, m.temp_bytes));
    }
    {
        let t = Instant::now();
        let exe = client.compile(three_products(steps, batch, width))?;
        let compile = t.elapsed().as_secs_f64();
        let m = exe.memory_stats()?;
        exes.push(("three products a step", exe, compile, m.temp_bytes));
    }
    for (name, grad) in [
        ("forward, Dot fusions", false),
        ("gradient, Dot fusions", true),
    ] {
        let t = Instant::now();
        let exe = client.compile_with(
            program(steps, batch, width, grad, CheckpointPolicy::Everything, 0),
            &dot_fusions,
        )?;
        let compile = t.elapsed().as_secs_f64();
        let m = exe.memory_stats()?;
        exes.push((name, exe, compile, m.temp_bytes));
    }
    {
        // The weight's product per step (`backward_chunk(1)`), against the
        // default's one product per chunk of steps.
        let t = Instant::now();
        let exe = client.compile(program(
            steps,
            batch,
            width,
            true,
            CheckpointPolicy::Everything,
            1,
        ))?;
        let compile = t.elapsed().as_secs_f64();
        let m = exe.memory_stats()?;
        exes.push(("gradient, product a step", exe, compile, m.temp_bytes));
    }
    // The hand-written gradient computes what the automatic one does.
    let auto = exes[1].1.execute(&[&w, &h0, &xs])?;
    let hand = exes[5].1.execute(&[&w, &h0, &xs])?;
    let after = exes[7].1.execute(&[&w, &h0, &xs])?;
    for (what, other) in [("after-loop", &after), ("hand-written", &hand)] {
        for k in 0..3 {
            let (a, h) = (auto[k].to_vec::<f32>()?, other[k].to_vec::<f32>()?);
            let scale = a.iter().fold(1f32, |m, x| m.max(x.abs()));
            let err = a
                .iter()
                .zip(&h)
                .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            assert!(
                err <= 1e-4 * scale,
                "the {what} gradient's output {k} differs by {err}"
            );
        }
    }
    // Warm up, then alternate the programs so they share the machine's noise.
    const ROUNDS: usize = 13;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); exes.len()];
    for round in 0..ROUNDS {
        for (k, (_, exe, _, _)) in exes.iter().enumerate() {
            let t = Instant::now();
            let out = exe.execute(&[&w, &h0, &xs])?;
            out[0].to_vec::<f32>()?;
            if round > 0 {
                times[k].push(t.elapsed().as_secs_f64());
            }
        }
    }
    // Each round's ratio to the forward pass of the same round, whose median is
    // steadier than the ratio of medians when the machine's speed drifts.
    let per_round = |k: usize, base: usize| {
        median(
            times[k]
                .iter()
                .zip(&times[base])
                .map(|(t, f)| t / f)
                .collect(),
        )
    };
    let paired: Vec<f64> = (0..times.len()).map(|k| per_round(k, 0)).collect();
    // The Dot-fusion gradient against the Dot-fusion forward pass.
    let dot_paired = per_round(10, 9);
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
    println!(
        "by hand / forward: same backward {:.2}x, without the weight's product {:.2}x (floor); \
         automatic / by hand {:.2}x",
        med[5] / med[0],
        med[6] / med[0],
        med[1] / med[5]
    );
    println!(
        "per-round ratios to the forward pass (median of {} rounds): stored {:.2}x, \
         checkpointed {:.2}x, dots {:.2}x, names {:.2}x, by hand {:.2}x, floor {:.2}x",
        ROUNDS - 1,
        paired[1],
        paired[2],
        paired[3],
        paired[4],
        paired[5],
        paired[6]
    );
    println!(
        "by hand, weight product after the loop / forward: {:.2}x (per-round {:.2}x)",
        med[7] / med[0],
        paired[7]
    );
    println!(
        "with Dot library fusions: forward {:.1} ms, gradient {:.1} ms, gradient / forward \
         {:.2}x (per-round {:.2}x); that gradient / the default forward {:.2}x (per-round {:.2}x)",
        med[9] * 1e3,
        med[10] * 1e3,
        med[10] / med[9],
        dot_paired,
        med[10] / med[0],
        paired[10]
    );
    println!(
        "three products a step / forward: {:.2}x (per-round {:.2}x): the floor of a \
         gradient whose products run one after another",
        med[8] / med[0],
        paired[8]
    );
    println!(
        "the weight's product per step (backward_chunk(1)) / forward: {:.2}x (per-round \
         {:.2}x), against the default's chunks of steps {:.2}x (per-round {:.2}x)",
        med[11] / med[0],
        paired[11],
        med[1] / med[0],
        paired[1]
    );
    Ok(())
}
