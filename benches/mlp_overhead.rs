//! Per-call overhead of the safe API against the raw PJRT C path, side by side.
//!
//! Workload (as in `shared/bench-anchors`): the MLP policy 50 → 256 → relu → 3 (f32),
//! parameters resident on the device; one call = upload the observation batch,
//! execute, download the output. For batch 1, 64 and 1024 it times
//!   - `safe`: `Client::buffer_from_host` + `LoadedExecutable::execute` +
//!     `Buffer::copy_to_host`;
//!   - `raw`: the same C calls through function pointers looked up once, no wrapper
//!     (`xlaclient::pjrt::bench_support`, the shape of the anchors' `pjrt_floor.c`),
//!
//! in the same process, alternating blocks of 50 calls so both see the same machine
//! state, and prints min / median µs per call and the ratio of medians.
//!
//! Waits:
//!   - `auto`: the client's default [`WaitPolicy::Auto`] for `safe` (poll up to 50 µs
//!     when recent waits were that short, else park at once); for `raw`, what a plain
//!     C caller does: poll `PJRT_Event_IsReady` up to 50 µs, then block in
//!     `PJRT_Event_Await`;
//!   - `spin`: poll for up to 1 ms, then block, on both paths;
//!   - `park`: never poll (`safe` parks until `PJRT_Event_OnReady`; `raw` blocks in
//!     `PJRT_Event_Await`).
//!
//! Two client configurations: the plugin's default (asynchronous) and
//! `asynchronous=false`; then 4 threads calling concurrently (one executable, one
//! set of parameters; each thread its own observations), safe vs raw in
//! alternating phases, with both waits.
//!
//! Run: `cargo bench --bench mlp_overhead` (env `CALLS` = timed calls per path and
//! batch, default 10000, a quarter of that at batch 1024; `PJRT_PLUGIN_PATH` picks
//! another plugin). The `spin` rows are what this crate did before `WaitPolicy`
//! (poll up to 1 ms, then block): compare them with `auto` for the policy's effect.

use std::time::{Duration, Instant};

use xlaclient::pjrt::bench_support::{RawCall, RawWait};
use xlaclient::pjrt::{AUTO_SPIN, WaitPolicy};
use xlaclient::{Buffer, Builder, Client, ClientOptions, Computation, Plugin, Shape};

const OBS: i64 = 50;
const HID: i64 = 256;
const ACT: i64 = 3;
const SPIN: Duration = Duration::from_millis(1);

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

/// (min, median) of `v`.
fn stats(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let med = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (v[0], med)
}

/// The raw path's wait for a safe client's policy (one thread): for `Auto`, what a
/// plain C caller would do, poll for [`AUTO_SPIN`] then block in `PJRT_Event_Await`
/// (the safe path decides by its recent waits whether to poll at all).
fn raw_wait(policy: WaitPolicy) -> RawWait {
    match policy {
        WaitPolicy::Auto => RawWait::Spin(AUTO_SPIN),
        WaitPolicy::Park => RawWait::Block,
        WaitPolicy::Spin(d) => RawWait::Spin(d),
    }
}

fn params(client: &Client) -> xlaclient::Result<Vec<Buffer>> {
    let host = [
        data((OBS * HID) as usize, 1),
        data(HID as usize, 2),
        data((HID * ACT) as usize, 3),
        data(ACT as usize, 4),
    ];
    let dims: [&[i64]; 4] = [&[OBS, HID], &[HID], &[HID, ACT], &[ACT]];
    host.iter()
        .zip(dims)
        .map(|(p, d)| Ok(client.buffer_from_host(p, d)?))
        .collect()
}

fn safe_call(
    client: &Client,
    exe: &xlaclient::LoadedExecutable,
    params: &[Buffer],
    obs: &[f32],
    dims: &[i64],
    out: &mut [f32],
) -> xlaclient::Result<()> {
    let o = client.buffer_from_host(obs, dims)?;
    let r = exe.execute(&[&params[0], &params[1], &params[2], &params[3], &o])?;
    Ok(r[0].copy_to_host(out)?)
}

fn header() {
    println!(
        "  {:>5} {:>6} | {:>8} {:>8} | {:>8} {:>8} | {:>8} | {:>7}",
        "wait", "batch", "safe_min", "safe_med", "raw_min", "raw_med", "safe/raw", "max_diff"
    );
}

fn single_thread(
    plugin: &Plugin,
    base: &ClientOptions,
    wait_name: &str,
    policy: WaitPolicy,
    calls: usize,
) -> xlaclient::Result<()> {
    let client = Client::new(plugin, &base.clone().wait_policy(policy))?;
    for batch in [1i64, 64, 1024] {
        let exe = client.compile(mlp(batch))?;
        let safe_params = params(&client)?;
        let raw = RawCall::new(&exe, params(&client)?, raw_wait(policy))?;
        let obs = data((batch * OBS) as usize, 7);
        let dims = [batch, OBS];
        let mut out_safe = vec![0f32; (batch * ACT) as usize];
        let mut out_raw = vec![0f32; (batch * ACT) as usize];
        let warm = if batch == 1024 { 100 } else { 300 };
        for _ in 0..warm {
            safe_call(&client, &exe, &safe_params, &obs, &dims, &mut out_safe)?;
            raw.call(&obs, &dims, &mut out_raw)?;
        }
        let calls = if batch == 1024 { calls / 4 } else { calls };
        let block = 50;
        let mut ts = Vec::with_capacity(calls);
        let mut tr = Vec::with_capacity(calls);
        while ts.len() < calls {
            for _ in 0..block {
                let t0 = Instant::now();
                safe_call(&client, &exe, &safe_params, &obs, &dims, &mut out_safe)?;
                ts.push(t0.elapsed().as_secs_f64() * 1e6);
            }
            for _ in 0..block {
                let t0 = Instant::now();
                raw.call(&obs, &dims, &mut out_raw)?;
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
            "  {:>5} {:>6} | {:>8.1} {:>8.1} | {:>8.1} {:>8.1} | {:>8.3} | {:>7.1e}",
            wait_name,
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

/// 4 threads calling at once, alternating safe and raw phases; median per-call
/// latency and total calls per second of each path.
fn four_threads(
    plugin: &Plugin,
    base: &ClientOptions,
    wait_name: &str,
    policy: WaitPolicy,
    calls: usize,
) -> xlaclient::Result<()> {
    const THREADS: usize = 4;
    let client = Client::new(plugin, &base.clone().wait_policy(policy))?;
    // Several threads wait at once, so `Auto` parks: the raw path blocks too.
    let raw_wait = match policy {
        WaitPolicy::Spin(d) => RawWait::Spin(d),
        WaitPolicy::Auto | WaitPolicy::Park => RawWait::Block,
    };
    for batch in [64i64, 1024] {
        let exe = client.compile(mlp(batch))?;
        let safe_params = params(&client)?;
        let raw = RawCall::new(&exe, params(&client)?, raw_wait)?;
        let per_thread = (if batch == 1024 { calls / 4 } else { calls }) / THREADS;
        let phase = 25;
        let mut ts = Vec::new();
        let mut tr = Vec::new();
        let (mut wall_s, mut wall_r) = (0f64, 0f64);
        let mut done = 0;
        let mut first = true;
        while done < per_thread {
            for use_raw in [false, true] {
                let t0 = Instant::now();
                let times: Vec<Vec<f64>> = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..THREADS)
                        .map(|t| {
                            let (client, exe, safe_params, raw) =
                                (&client, &exe, &safe_params, &raw);
                            s.spawn(move || {
                                let obs = data((batch * OBS) as usize, 7 + t as u32);
                                let dims = [batch, OBS];
                                let mut out = vec![0f32; (batch * ACT) as usize];
                                let mut v = Vec::with_capacity(phase);
                                for _ in 0..phase {
                                    let t0 = Instant::now();
                                    if use_raw {
                                        raw.call(&obs, &dims, &mut out).expect("raw call");
                                    } else {
                                        safe_call(client, exe, safe_params, &obs, &dims, &mut out)
                                            .expect("safe call");
                                    }
                                    v.push(t0.elapsed().as_secs_f64() * 1e6);
                                }
                                v
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().expect("thread"))
                        .collect()
                });
                let wall = t0.elapsed().as_secs_f64();
                if first {
                    continue; // warm-up phase
                }
                let all = times.into_iter().flatten();
                if use_raw {
                    tr.extend(all);
                    wall_r += wall;
                } else {
                    ts.extend(all);
                    wall_s += wall;
                }
            }
            if !first {
                done += phase;
            }
            first = false;
        }
        let (smin, smed) = stats(&mut ts);
        let (rmin, rmed) = stats(&mut tr);
        println!(
            "  {:>5} {:>6} | {:>8.1} {:>8.1} | {:>8.1} {:>8.1} | {:>8.3} | {:.0}, {:.0}",
            wait_name,
            batch,
            smin,
            smed,
            rmin,
            rmed,
            smed / rmed,
            ts.len() as f64 / wall_s,
            tr.len() as f64 / wall_r
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
        .unwrap_or(10_000);
    let plugin = Plugin::default_plugin()?;
    println!(
        "plugin {} (PJRT C API {}.{}), {} cores, {calls} timed calls per path and batch \
         (1/4 at batch 1024), µs per call",
        plugin.path().display(),
        plugin.api_version().0,
        plugin.api_version().1,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let configs = [
        (
            "default (asynchronous)",
            ClientOptions::new().cpu_device_count(1),
        ),
        (
            "asynchronous=false",
            ClientOptions::new().cpu_device_count(1).asynchronous(false),
        ),
    ];
    for (name, base) in &configs {
        println!("\nclient: {name} — safe vs raw, one thread");
        header();
        single_thread(&plugin, base, "auto", WaitPolicy::Auto, calls)?;
        single_thread(&plugin, base, "spin", WaitPolicy::Spin(SPIN), calls)?;
        single_thread(&plugin, base, "park", WaitPolicy::Park, calls)?;
        println!("client: {name} — 4 threads calling at once");
        println!(
            "  {:>5} {:>6} | {:>8} {:>8} | {:>8} {:>8} | {:>8} | calls/s safe, raw",
            "wait", "batch", "safe_min", "safe_med", "raw_min", "raw_med", "safe/raw"
        );
        four_threads(&plugin, base, "auto", WaitPolicy::Auto, calls)?;
        four_threads(&plugin, base, "spin", WaitPolicy::Spin(SPIN), calls)?;
    }
    Ok(())
}
