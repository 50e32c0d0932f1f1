//! What one collective costs inside a replicated program: for N = 1, 2, 4, 8 CPU
//! devices, a `pmap`'d `fori_loop` of K steps, each `x ← pmean_axis(x) · a + b`,
//! against the same loop without the `pmean`; the difference over K is the time
//! of one all-reduce (its rendezvous of the N devices' threads, and the sum) on
//! this machine, for a small array (latency) and a larger one.
//!
//! Run: `cargo run --release --example pmap_overhead [-- K]` (default K = 2000).
//! Prints one line per (N, size): microseconds per step with and without the
//! collective, and their difference.

use std::time::Instant;

use xlaclient::{Client, ClientExt, ClientOptions, Op, Plugin, Shape, Stacked};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

/// Median seconds of `reps` calls of `f`.
fn median(reps: usize, mut f: impl FnMut() -> xlaclient::Result<()>) -> xlaclient::Result<f64> {
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    Ok(t[reps / 2])
}

fn run() -> xlaclient::Result<()> {
    let steps: i32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let plugin = Plugin::default_plugin()?;
    let client = Client::new(&plugin, &ClientOptions::new().cpu_device_count(8))?;
    println!("{steps} steps per call; median of 5 calls; microseconds per step");
    println!(
        "{:>7} {:>8} {:>12} {:>12} {:>14}",
        "devices", "floats", "with pmean", "without", "per all-reduce"
    );
    for n in [1usize, 2, 4, 8] {
        for len in [4i64, 16384] {
            let spec = Shape::of::<f32>(&[len]);
            let time = |collective: bool| -> xlaclient::Result<f64> {
                let f = client.pmap("overhead", &[("i", n)], &spec, |b, x: Op| {
                    b.fori_loop(0, steps, x, |_, x: Op| {
                        let y = if collective { x.pmean_axis("i") } else { x };
                        y * 0.5 + 1.0
                    })
                })?;
                let xs = Stacked::new(vec![1.0f32; n * len as usize], &[n as i64, len])?;
                let args = f.shard_host(&xs)?;
                f.call(&args)?; // warm up
                median(5, || {
                    let out = f.call(&args)?;
                    out[0].ready()?;
                    Ok(())
                })
            };
            let with = time(true)?;
            let without = time(false)?;
            let us = |s: f64| s * 1e6 / steps as f64;
            println!(
                "{n:>7} {len:>8} {:>12.2} {:>12.2} {:>14.2}",
                us(with),
                us(without),
                us(with) - us(without)
            );
        }
    }
    Ok(())
}
