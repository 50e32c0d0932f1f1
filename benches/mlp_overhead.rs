//! Per-call overhead of the safe API against the raw PJRT C floor, side by side.
//!
//! Workload (as in `shared/bench-anchors`): the MLP policy 50 → 256 → relu → 3 (f32),
//! parameters resident on the device; one call = upload the observation batch,
//! execute, download the output. For batch 1, 64 and 1024 it times
//!   - `safe`: `Client::buffer_from_host` + `LoadedExecutable::execute` +
//!     `Buffer::copy_to_host`;
//!   - `raw`:  the same C calls driven directly through the function table
//!     (`xlaclient::pjrt::floor`), no wrapper;
//!
//! alternating blocks of calls so both see the same machine state, and prints
//! min / median µs per call and the ratio of medians. Two client configurations:
//! the plugin's default (asynchronous) and `asynchronous=false`.
//!
//! Run: `cargo bench --bench mlp_overhead` (env `CALLS` = timed calls per path and
//! batch, default 4000; `PJRT_PLUGIN_PATH` picks another plugin).

use std::time::Instant;

use xlaclient::pjrt::floor::RawMlpCall;
use xlaclient::{Builder, Client, ClientOptions, Computation, Plugin, Shape};

const OBS: i64 = 50;
const HID: i64 = 256;
const ACT: i64 = 3;

fn mlp(batch: i64) -> Computation {
    let b = Builder::new("mlp");
    let w1 = b.parameter(0, Shape::of::<f32>(&[OBS, HID]), "w1");
    let b1 = b.parameter(1, Shape::of::<f32>(&[HID]), "b1");
    let w2 = b.parameter(2, Shape::of::<f32>(&[HID, ACT]), "w2");
    let b2 = b.parameter(3, Shape::of::<f32>(&[ACT]), "b2");
    let obs = b.parameter(4, Shape::of::<f32>(&[batch, OBS]), "obs");
    let h = (obs.matmul(&w1) + &b1).relu();
    b.build(&(h.matmul(&w2) + &b2)).expect("mlp builds")
}

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) as f32
                / (1 << 24) as f32
                - 0.5)
                * 0.2
        })
        .collect()
}

fn stats(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (v[0], med)
}

fn run(client: &Client, label: &str, calls: usize) -> xlaclient::Result<()> {
    println!("\n{label}");
    println!(
        "  {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>12} | {:>8}",
        "batch", "safe_min", "safe_med", "raw_min", "raw_med", "safe/raw med", "max_diff"
    );
    for batch in [1i64, 64, 1024] {
        let exe = client.compile(mlp(batch))?;
        let params_host = [
            data((OBS * HID) as usize, 1),
            data(HID as usize, 2),
            data((HID * ACT) as usize, 3),
            data(ACT as usize, 4),
        ];
        let dims: [&[i64]; 4] = [&[OBS, HID], &[HID], &[HID, ACT], &[ACT]];
        let mut params = Vec::new();
        for (p, d) in params_host.iter().zip(dims) {
            params.push(client.buffer_from_host(p, d)?);
        }
        let mut raw_params = Vec::new();
        for (p, d) in params_host.iter().zip(dims) {
            raw_params.push(client.buffer_from_host(p, d)?);
        }
        let raw = RawMlpCall::new(client, &exe, raw_params)?;
        let obs = data((batch * OBS) as usize, 7);
        let obs_dims = [batch, OBS];
        let mut out_safe = vec![0f32; (batch * ACT) as usize];
        let mut out_raw = vec![0f32; (batch * ACT) as usize];

        let safe_call = |out: &mut [f32]| -> xlaclient::Result<()> {
            let o = client.buffer_from_host(&obs, &obs_dims)?;
            let r = exe.execute(&[&params[0], &params[1], &params[2], &params[3], &o])?;
            r[0].copy_to_host(out)
        };
        for _ in 0..300 {
            safe_call(&mut out_safe)?;
            raw.call(&obs, &obs_dims, &mut out_raw)?;
        }
        let calls = if batch == 1024 { calls / 4 } else { calls };
        let block = 50;
        let mut ts = Vec::with_capacity(calls);
        let mut tr = Vec::with_capacity(calls);
        while ts.len() < calls {
            for _ in 0..block {
                let t0 = Instant::now();
                safe_call(&mut out_safe)?;
                ts.push(t0.elapsed().as_secs_f64() * 1e6);
            }
            for _ in 0..block {
                let t0 = Instant::now();
                raw.call(&obs, &obs_dims, &mut out_raw)?;
                tr.push(t0.elapsed().as_secs_f64() * 1e6);
            }
        }
        let max_diff = out_safe
            .iter()
            .zip(&out_raw)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let (smin, smed) = stats(&mut ts);
        let (rmin, rmed) = stats(&mut tr);
        println!(
            "  {:>6} | {:>9.1} {:>9.1} | {:>9.1} {:>9.1} | {:>12.3} | {:>8.1e}",
            batch,
            smin,
            smed,
            rmin,
            rmed,
            smed / rmed,
            max_diff
        );
    }
    Ok(())
}

fn main() -> xlaclient::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let calls: usize = std::env::var("CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let plugin = Plugin::default_plugin()?;
    println!(
        "plugin {} (PJRT C API {}.{}), {calls} timed calls per path and batch (1/4 at batch 1024), µs per call",
        plugin.path().display(),
        plugin.api_version().0,
        plugin.api_version().1
    );
    let c = Client::new(&plugin, &ClientOptions::new().cpu_device_count(1))?;
    run(&c, "client: default (asynchronous) — safe vs raw", calls)?;
    drop(c);
    let c = Client::new(
        &plugin,
        &ClientOptions::new().cpu_device_count(1).asynchronous(false),
    )?;
    run(&c, "client: asynchronous=false — safe vs raw", calls)?;
    Ok(())
}
