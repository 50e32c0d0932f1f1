//! The small call with host work between calls, by every way of making it, side by
//! side in one process.
//!
//! Workload (as in `shared/bench-anchors`): the MLP policy 50 → 256 → relu → 3 (f32),
//! parameters resident on the device; one call = upload the observation batch,
//! execute, read the output on the host. Before each call the thread busy-waits
//! `gap` µs (not timed), the host work between policy calls of a simulation loop (the
//! anchors' `--gap-us`). Paths:
//!   - `default`: what users write: `Client::buffer_from_host` +
//!     `LoadedExecutable::execute` + `Buffer::to_vec`;
//!   - `jit`: `ClientExt::jit` of `f((w1, b1, w2, b2), obs)`, called with the tree of
//!     resident parameters and the uploaded observations, then `to_vec`;
//!   - `raw`: the anchors' C floor (`pjrt_floor.c --d2h ptr --no-exec-event`)
//!     through function pointers (`xlaclient::pjrt::bench_support::RawCall`): upload,
//!     execute without a completion event, wait for the output's ready event in
//!     `PJRT_Event_Await`, `PJRT_Buffer_UnsafePointer` + `memcpy`;
//!   - `raw-spin` (asynchronous clients only): the same, polling
//!     `PJRT_Event_IsReady` for up to 50 µs before `PJRT_Event_Await` (what
//!     `--spin` does, bounded);
//!   - `zero-copy`: `default` with the observations in an `AlignedHost` moved into
//!     the call (`Client::buffer_from_aligned`) and taken back after it
//!     (`Buffer::into_host`).
//!
//! Grid: batch 1, 64, 1024 × gap 0, 100, 1000 µs × an asynchronous and a synchronous
//! client (create option `asynchronous`; the synchronous one is the default) × 1 and
//! 4 threads (one executable, each thread its own observations and parameter copy:
//! one executable's parameters shared by threads calling at once contend in the
//! plugin for each buffer's usage holds). In each cell the paths run alternately, in rounds
//! of 25 calls per path with the order rotated each round (with 4 threads, all
//! threads run the same path at once). Prints one line per path and cell (`cell
//! threads=… client=… wait=… batch=… gap_us=… path=… calls=… min_us=… median_us=…
//! calls_per_s=…`: medians over all calls of all threads, and the calls per second of
//! all threads together, host gaps included), then a table of medians and ratios.
//!
//! Run: `cargo bench --bench call_paths`. Environment: `CALLS` (timed calls per path,
//! cell and thread, default 1000; a quarter at batch 1024), `THREADS` (default `1,4`),
//! `CLIENTS` (`async,sync`), `WAITS` (the safe paths' `WaitPolicy`: `auto`, `spin`
//! = poll up to 1 ms, `park`; default `auto`), `BATCHES` (`1,64,1024`), `GAPS`
//! (`0,100,1000`), `BREAKDOWN=1` (adds, with one thread, the paths `stages` =
//! `default` timed stage by stage: upload / execute / read / drop, and
//! `stages-plugin-read` = the same reading through the plugin's transfer,
//! `copy_to_host_via_plugin`, as every read did before reading in place was the
//! default), `PJRT_PLUGIN_PATH` (another plugin).

use std::sync::Barrier;
use std::time::{Duration, Instant};

use xlaclient::pjrt::bench_support::{RawCall, RawWait};
use xlaclient::pjrt::{AUTO_SPIN, AlignedHost, WaitPolicy};
use xlaclient::{
    Buffer, Client, ClientExt, ClientOptions, Jit, LoadedExecutable, Op, Plugin, Shape,
};

const OBS: i64 = 50;
const HID: i64 = 256;
const ACT: i64 = 3;
type R<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Calls per path per round.
const BLOCK: usize = 25;

type P4<T> = (T, T, T, T);
type MlpJit = Jit<(P4<Shape>, Shape), Shape>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    Default,
    Jit,
    Raw,
    RawSpin,
    ZeroCopy,
    Stages,
    StagesPluginRead,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Default => "default",
            Path::Jit => "jit",
            Path::Raw => "raw",
            Path::RawSpin => "raw-spin",
            Path::ZeroCopy => "zero-copy",
            Path::Stages => "stages",
            Path::StagesPluginRead => "stages-plugin-read",
        }
    }
}

fn mlp(p: &P4<Op>, obs: &Op) -> Op {
    let (w1, b1, w2, b2) = p;
    (obs.matmul(w1) + b1).relu().matmul(w2) + b2
}

fn spec(batch: i64) -> (P4<Shape>, Shape) {
    (
        (
            Shape::of::<f32>(&[OBS, HID]),
            Shape::of::<f32>(&[HID]),
            Shape::of::<f32>(&[HID, ACT]),
            Shape::of::<f32>(&[ACT]),
        ),
        Shape::of::<f32>(&[batch, OBS]),
    )
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

fn params(client: &Client) -> xlaclient::Result<P4<Buffer>> {
    Ok((
        client.buffer_from_host(&data((OBS * HID) as usize, 1), &[OBS, HID])?,
        client.buffer_from_host(&data(HID as usize, 2), &[HID])?,
        client.buffer_from_host(&data((HID * ACT) as usize, 3), &[HID, ACT])?,
        client.buffer_from_host(&data(ACT as usize, 4), &[ACT])?,
    ))
}

fn busy_wait(d: Duration) {
    if d.is_zero() {
        return;
    }
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// What one cell shares between its threads.
struct Cell<'a> {
    client: &'a Client,
    exe: &'a LoadedExecutable,
    jit: &'a MlpJit,
    batch: i64,
    gap: Duration,
}

/// One thread's state: its observations, its parameter copies (one for the safe
/// paths, one for each raw path).
struct Caller<'a> {
    cell: &'a Cell<'a>,
    obs: Vec<f32>,
    jit_args: (P4<Buffer>, Buffer),
    raw: RawCall<'a>,
    raw_spin: RawCall<'a>,
    out: Vec<f32>,
    last: Vec<f32>,
    /// The observations in an aligned array, for `zero-copy`.
    aligned: Option<AlignedHost<f32>>,
    /// Per stage of `stages` and `stages-plugin-read`: upload, execute, read, drop
    /// (µs).
    stages: [Stages; 2],
}

/// Times of the stages of a call: upload, execute, read, drop (µs).
type Stages = [Vec<f64>; 4];

impl<'a> Caller<'a> {
    fn new(cell: &'a Cell<'a>, seed: u32) -> R<Self> {
        let c = cell.client;
        let dims = [cell.batch, OBS];
        let obs = data((cell.batch * OBS) as usize, seed);
        let jit_args = (params(c)?, c.buffer_from_host(&obs, &dims)?);
        let p = |()| -> xlaclient::Result<Vec<Buffer>> {
            let (a, b, cc, d) = params(c)?;
            Ok(vec![a, b, cc, d])
        };
        Ok(Caller {
            cell,
            jit_args,
            raw: RawCall::new(cell.exe, p(())?, RawWait::Block)?,
            raw_spin: RawCall::new(cell.exe, p(())?, RawWait::Spin(AUTO_SPIN))?,
            out: vec![0.0; (cell.batch * ACT) as usize],
            last: Vec::new(),
            aligned: Some(AlignedHost::from_slice(&obs)?),
            obs,
            stages: Default::default(),
        })
    }

    /// One call of `path`; returns its µs.
    fn call(&mut self, path: Path) -> R<f64> {
        let c = self.cell;
        let dims = [c.batch, OBS];
        busy_wait(c.gap);
        let t0 = Instant::now();
        match path {
            Path::Default => {
                let o = c.client.buffer_from_host(&self.obs, &dims)?;
                let (w1, b1, w2, b2) = &self.jit_args.0;
                let r = c.exe.execute(&[w1, b1, w2, b2, &o])?;
                self.last = r[0].to_vec::<f32>()?;
            }
            Path::Jit => {
                self.jit_args.1 = c.client.buffer_from_host(&self.obs, &dims)?;
                self.last = c.jit.call(&self.jit_args)?.to_vec::<f32>()?;
            }
            Path::Raw => self.raw.call(&self.obs, &dims, &mut self.out)?,
            Path::RawSpin => self.raw_spin.call(&self.obs, &dims, &mut self.out)?,
            Path::ZeroCopy => {
                let host = self.aligned.take().ok_or("the aligned array was lost")?;
                let o = c.client.buffer_from_aligned(host, &dims)?;
                let (w1, b1, w2, b2) = &self.jit_args.0;
                let r = c.exe.execute(&[w1, b1, w2, b2, &o])?;
                self.last = r[0].to_vec::<f32>()?;
                self.aligned = Some(o.into_host()?);
            }
            Path::Stages | Path::StagesPluginRead => {
                let o = c.client.buffer_from_host(&self.obs, &dims)?;
                let t1 = Instant::now();
                let (w1, b1, w2, b2) = &self.jit_args.0;
                let r = c.exe.execute(&[w1, b1, w2, b2, &o])?;
                let t2 = Instant::now();
                let k = if path == Path::Stages {
                    self.last = r[0].to_vec::<f32>()?;
                    0
                } else {
                    self.last.resize(self.out.len(), 0.0);
                    r[0].copy_to_host_via_plugin(&mut self.last)?;
                    1
                };
                let t3 = Instant::now();
                drop(r);
                drop(o);
                let t4 = Instant::now();
                for (s, (a, b)) in
                    self.stages[k]
                        .iter_mut()
                        .zip([(t0, t1), (t1, t2), (t2, t3), (t3, t4)])
                {
                    s.push((b - a).as_secs_f64() * 1e6);
                }
            }
        }
        Ok(t0.elapsed().as_secs_f64() * 1e6)
    }
}

/// What one cell measured: per path every call's µs (all threads), and the
/// medians of each stage of `stages` and `stages-plugin-read`.
struct CellTimes {
    calls: Vec<Vec<f64>>,
    /// Per path, calls per second of all threads together: the calls of its
    /// rounds over the rounds' wall time (host gaps included; a round lasts until
    /// its slowest thread is done).
    rate: Vec<f64>,
    stages: [Option<[f64; 4]>; 2],
}

/// One thread's part of a cell: per path its calls' µs and the seconds each of its
/// rounds took, and its stage times.
type ThreadTimes = (Vec<Vec<f64>>, Vec<Vec<f64>>, [Stages; 2]);

/// Runs one cell: `threads` callers, the paths alternated.
fn run_cell(cell: &Cell<'_>, threads: usize, paths: &[Path], calls: usize) -> R<CellTimes> {
    let per_thread = calls.max(BLOCK);
    let rounds = per_thread.div_ceil(BLOCK);
    let warm_rounds = 2;
    let barrier = Barrier::new(threads);
    let results: Vec<R<ThreadTimes>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    // A failure stops this thread's calls, not its part in the
                    // barriers (the other threads would wait for it forever).
                    let mut failed = None;
                    let mut caller = Caller::new(cell, 7 + t as u32)
                        .map_err(|e| failed = Some(e))
                        .ok();
                    let mut times = vec![Vec::with_capacity(per_thread); paths.len()];
                    let mut walls = vec![Vec::with_capacity(rounds); paths.len()];
                    for r in 0..warm_rounds + rounds {
                        for k in 0..paths.len() {
                            let i = (k + r) % paths.len();
                            barrier.wait();
                            let start = Instant::now();
                            if r >= warm_rounds {
                                walls[i].push(0.0);
                            }
                            let Some(c) = caller.as_mut().filter(|_| failed.is_none()) else {
                                continue;
                            };
                            for _ in 0..BLOCK {
                                match c.call(paths[i]) {
                                    Ok(us) if r >= warm_rounds => times[i].push(us),
                                    Ok(_) => {}
                                    Err(e) => {
                                        failed = Some(e);
                                        break;
                                    }
                                }
                            }
                            if r >= warm_rounds {
                                if let Some(w) = walls[i].last_mut() {
                                    *w = start.elapsed().as_secs_f64();
                                }
                            }
                        }
                    }
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    let caller = caller.ok_or("no caller")?;
                    // The values agree across paths.
                    let want = &caller.out;
                    if paths.contains(&Path::Raw)
                        && (caller.last.len() != want.len()
                            || caller
                                .last
                                .iter()
                                .zip(want)
                                .any(|(a, b)| (a - b).abs() > 1e-5))
                    {
                        return Err("the paths disagree on the output".into());
                    }
                    Ok((times, walls, caller.stages))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a caller thread panicked")?)
            .collect()
    });
    let mut all = vec![Vec::new(); paths.len()];
    // Per path and round, the slowest thread's seconds.
    let mut round_walls: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    let mut stages: [Stages; 2] = Default::default();
    for r in results {
        let (times, walls, st) = r?;
        for (a, t) in all.iter_mut().zip(times) {
            a.extend(t);
        }
        for (a, w) in round_walls.iter_mut().zip(walls) {
            a.resize(w.len().max(a.len()), 0.0);
            for (x, y) in a.iter_mut().zip(w) {
                *x = x.max(y);
            }
        }
        for (a, t) in stages.iter_mut().zip(st) {
            for (x, y) in a.iter_mut().zip(t) {
                x.extend(y);
            }
        }
    }
    let rate = all
        .iter()
        .zip(&round_walls)
        .map(|(c, w)| c.len() as f64 / w.iter().sum::<f64>())
        .collect();
    Ok(CellTimes {
        calls: all,
        rate,
        stages: stages.map(|mut s| (!s[0].is_empty()).then(|| s.each_mut().map(|v| median(v)))),
    })
}

fn list<T: std::str::FromStr>(var: &str, default: &str) -> Vec<T> {
    std::env::var(var)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

struct Row {
    threads: usize,
    client: &'static str,
    wait: String,
    batch: i64,
    gap: u64,
    medians: Vec<(Path, f64)>,
}

fn wait_policy(name: &str) -> Option<WaitPolicy> {
    match name {
        "auto" => Some(WaitPolicy::Auto),
        "spin" => Some(WaitPolicy::Spin(Duration::from_millis(1))),
        "park" => Some(WaitPolicy::Park),
        _ => None,
    }
}

fn main() -> R<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let calls: usize = std::env::var("CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let threads_list: Vec<usize> = list("THREADS", "1,4");
    let clients: Vec<String> = list("CLIENTS", "async,sync");
    let waits: Vec<String> = list("WAITS", "auto");
    let batches: Vec<i64> = list("BATCHES", "1,64,1024");
    let gaps: Vec<u64> = list("GAPS", "0,100,1000");
    let breakdown = std::env::var("BREAKDOWN").is_ok_and(|v| v == "1");
    let plugin = Plugin::default_plugin()?;
    println!(
        "plugin {} (PJRT C API {}.{}), {} cores, {calls} timed calls per path, cell and \
         thread (a quarter at batch 1024), µs per call",
        plugin.path().display(),
        plugin.api_version().0,
        plugin.api_version().1,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let mut rows = Vec::new();
    for &threads in &threads_list {
        for client_name in &clients {
            let (name, asynchronous) = match client_name.as_str() {
                "async" => ("async", true),
                "sync" => ("sync", false),
                other => {
                    return Err(format!("CLIENTS: unknown client {other} (async or sync)").into());
                }
            };
            for wait in &waits {
                let policy = wait_policy(wait)
                    .ok_or_else(|| format!("WAITS: unknown policy {wait} (auto, spin or park)"))?;
                let options = ClientOptions::new()
                    .cpu_device_count(1)
                    .asynchronous(asynchronous)
                    .wait_policy(policy);
                let client = Client::new(&plugin, &options)?;
                let mut paths = vec![Path::Default, Path::Jit, Path::Raw, Path::ZeroCopy];
                if asynchronous {
                    paths.push(Path::RawSpin);
                }
                if breakdown && threads == 1 {
                    paths.extend([Path::Stages, Path::StagesPluginRead]);
                }
                for &batch in &batches {
                    let (ps, obs) = spec(batch);
                    let jit = client.jit("mlp", &(ps, obs), |_, (p, obs)| mlp(&p, &obs))?;
                    for &gap in &gaps {
                        let cell = Cell {
                            client: &client,
                            exe: jit.executable(),
                            jit: &jit,
                            batch,
                            gap: Duration::from_micros(gap),
                        };
                        let n = if batch >= 1024 { calls / 4 } else { calls };
                        let mut times = run_cell(&cell, threads, &paths, n)?;
                        let at = format!(
                            "threads={threads} client={name} wait={wait} batch={batch} gap_us={gap}"
                        );
                        let mut medians = Vec::new();
                        for ((p, t), rate) in
                            paths.iter().zip(times.calls.iter_mut()).zip(&times.rate)
                        {
                            let med = median(t);
                            let min = t.first().copied().unwrap_or(f64::NAN);
                            println!(
                                "cell {at} path={} calls={} min_us={min:.2} median_us={med:.2} calls_per_s={rate:.0}",
                                p.name(),
                                t.len()
                            );
                            medians.push((*p, med));
                        }
                        for (p, st) in [Path::Stages, Path::StagesPluginRead]
                            .iter()
                            .zip(times.stages)
                        {
                            if let Some([u, e, r, d]) = st {
                                println!(
                                    "stages {at} path={} upload_us={u:.2} execute_us={e:.2} read_us={r:.2} drop_us={d:.2}",
                                    p.name()
                                );
                            }
                        }
                        rows.push(Row {
                            threads,
                            client: name,
                            wait: wait.clone(),
                            batch,
                            gap,
                            medians,
                        });
                    }
                }
            }
        }
    }
    println!("\nmedian µs per call; ratios to raw (the C floor's sequence on the same client)");
    println!(
        "{:>7} {:>6} {:>5} {:>6} {:>5} | {:>8} {:>8} {:>8} {:>8} {:>9} | {:>11} {:>7} {:>9}",
        "threads",
        "client",
        "wait",
        "batch",
        "gap",
        "default",
        "jit",
        "raw",
        "raw-spin",
        "zero-copy",
        "default/raw",
        "jit/raw",
        "zc/default"
    );
    for r in &rows {
        let get = |p: Path| {
            r.medians
                .iter()
                .find(|(q, _)| *q == p)
                .map_or(f64::NAN, |(_, m)| *m)
        };
        let (d, j, raw, rs, zc) = (
            get(Path::Default),
            get(Path::Jit),
            get(Path::Raw),
            get(Path::RawSpin),
            get(Path::ZeroCopy),
        );
        println!(
            "{:>7} {:>6} {:>5} {:>6} {:>5} | {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>9.1} | {:>11.3} {:>7.3} {:>9.3}",
            r.threads,
            r.client,
            r.wait,
            r.batch,
            r.gap,
            d,
            j,
            raw,
            rs,
            zc,
            d / raw,
            j / raw,
            zc / d
        );
    }
    Ok(())
}
