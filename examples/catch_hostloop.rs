//! Worlds stepped in Rust, the policy on XLA: the host-loop workload of the JAX
//! anchor `shared/bench-anchors/jax_hostloop_catch.py`, written against this crate.
//!
//! N Catch environments (`xlaclient::rl::catch`, 10 × 5) are stepped in plain Rust.
//! One vector step of all N environments =
//!   render the observations `f32[N, 50]` into one reused host array
//!   → one batched policy call through PJRT (MLP 50 → 256 → relu → 3, parameters
//!     resident on the device; the observations are uploaded in the call)
//!   → Q-values back on the host → greedy argmax per environment (epsilon-greedy with
//!     `--epsilon`, default 0 as the anchor's)
//!   → each environment steps (auto-reset with a new random ball column).
//!
//! Parameters: the anchor's scheme, `w ~ N(0, 1) / sqrt(fan_in)` and zero biases, but
//! drawn from the crate's `rl::Rng` (Box–Muller), not numpy's stream: the values
//! differ from the anchor's, their distribution does not (the policy is untrained in
//! both; the cost of a step does not depend on the values).
//!
//! Call paths (`--mode M[,M...]`, alternated within each round; `--compare` = the
//! first five):
//!   - `fast` (default): a client created with `asynchronous=false` (the 0.115 CPU
//!     plugin then runs the program on the calling thread), `LoadedExecutable::execute`
//!     on resident parameter buffers, the observations uploaded from one reused host
//!     array, the Q-values read straight from the output's memory into one reused
//!     host slice (`Buffer::read_in_place`);
//!   - `fast-copy`: the same, the Q-values copied with `Buffer::copy_to_host` (the
//!     plugin's device-to-host copy);
//!   - `fast-async`: `fast` on a default (asynchronous) client;
//!   - `plain-sync`: `Client::jit` + `Jit::call` + `Buffer::to_vec` (a new vector per
//!     step) on the `asynchronous=false` client;
//!   - `plain`: the same on a default client: what a first program would write;
//!   - `sharded` (not in `--compare`; even N only): two CPU devices on an
//!     asynchronous client, each computing half the batch with its own parameter
//!     copy, launched by one `execute_replicated` call, Q-values read in place.
//!
//! Every path waits by the crate's default `WaitPolicy::Auto` (poll up to 50 µs when
//! recent waits were that short, else park); `--wait spin` polls up to 1 ms, then
//! parks, `--wait park` never polls.
//!
//! For N = 1, 64 and 1024 (`--n`) it prints environment steps per second
//! (N × steps / seconds), best and median over rounds, as the anchor does (3000 steps
//! per round, 600 at N ≥ 1024, 5 rounds, 200 warm-up steps). `--breakdown` adds where
//! a `fast` vector step's time goes (environments, upload, execute, download).
//! Correctness: for each N, the Q-values of one step are compared with a forward pass
//! in plain Rust on the same parameters and observations (max abs error printed; the
//! program fails above 1e-4).
//!
//! Run: `cargo run --release --example catch_hostloop -- [--n 1 64 1024] [--steps S]
//! [--rounds R] [--epsilon E] [--mode M[,M...] | --plain | --compare]
//! [--wait auto|spin|park] [--breakdown] [--quick]`. `--quick` (CI): 300 steps, 3
//! rounds, 50 warm-up steps. The last line is `steps_per_s_1024=<median>` of the last
//! mode given (of the last N when 1024 is not among them).

use std::time::{Duration, Instant};

use xlaclient::ClientExt;
use xlaclient::pjrt::WaitPolicy;
use xlaclient::rl::catch::{Catch, NUM_ACTIONS};
use xlaclient::rl::{Environment, Rng};
use xlaclient::{Buffer, Builder, Client, ClientOptions, Jit, LoadedExecutable, Shape};

const OBS: usize = 50;
const HID: usize = 256;
const ACT: usize = NUM_ACTIONS;
const MAX_ERR: f32 = 1e-4;
/// The polling budget of `--wait spin`: then park.
const SPIN: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Fast,
    FastCopy,
    FastAsync,
    Plain,
    PlainSync,
    Sharded,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Fast => "fast",
            Mode::FastCopy => "fast-copy",
            Mode::FastAsync => "fast-async",
            Mode::Plain => "plain",
            Mode::PlainSync => "plain-sync",
            Mode::Sharded => "sharded",
        }
    }

    fn parse(s: &str) -> Result<Mode, String> {
        match s {
            "fast" => Ok(Mode::Fast),
            "fast-copy" => Ok(Mode::FastCopy),
            "fast-async" => Ok(Mode::FastAsync),
            "plain" => Ok(Mode::Plain),
            "plain-sync" => Ok(Mode::PlainSync),
            "sharded" => Ok(Mode::Sharded),
            _ => Err(format!(
                "--mode {s}: expected fast, fast-copy, fast-async, plain, plain-sync or sharded"
            )),
        }
    }

    fn synchronous(self) -> bool {
        matches!(self, Mode::Fast | Mode::FastCopy | Mode::PlainSync)
    }
}

struct Config {
    ns: Vec<usize>,
    steps: usize,
    rounds: usize,
    warmup: usize,
    epsilon: f32,
    modes: Vec<Mode>,
    breakdown: bool,
    wait: WaitPolicy,
}

const USAGE: &str = "usage: catch_hostloop [--n N...] [--steps S] [--rounds R] [--epsilon E] \
[--mode M[,M...]] (M: fast|fast-copy|fast-async|plain|plain-sync|sharded) [--plain] [--compare] [--wait spin|auto|park] \
[--breakdown] [--quick]";

fn parse_args(args: &[String]) -> Result<Config, String> {
    let mut cfg = Config {
        ns: vec![1, 64, 1024],
        steps: 0,
        rounds: 5,
        warmup: 200,
        epsilon: 0.0,
        modes: vec![Mode::Fast],
        breakdown: false,
        wait: WaitPolicy::Auto,
    };
    let mut i = 0;
    let value = |i: usize, flag: &str| -> Result<&String, String> {
        args.get(i + 1)
            .ok_or_else(|| format!("{flag} needs a value"))
    };
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--n" => {
                let mut ns = Vec::new();
                while let Some(v) = args.get(i + 1).filter(|v| !v.starts_with("--")) {
                    let n: usize = v
                        .parse()
                        .map_err(|_| format!("--n {v}: not a whole number"))?;
                    if n == 0 || n > 1 << 20 {
                        return Err(format!("--n {n}: must be in 1..=1048576"));
                    }
                    ns.push(n);
                    i += 1;
                }
                if ns.is_empty() {
                    return Err("--n needs at least one value".into());
                }
                cfg.ns = ns;
            }
            "--steps" | "--rounds" => {
                let v = value(i, a)?;
                let n: usize = v
                    .parse()
                    .map_err(|_| format!("{a} {v}: not a whole number"))?;
                if n == 0 {
                    return Err(format!("{a} must be at least 1"));
                }
                if a == "--steps" {
                    cfg.steps = n;
                } else {
                    cfg.rounds = n;
                }
                i += 1;
            }
            "--epsilon" => {
                let v = value(i, a)?;
                let e: f32 = v
                    .parse()
                    .map_err(|_| format!("--epsilon {v}: not a number"))?;
                if !(0.0..=1.0).contains(&e) {
                    return Err(format!("--epsilon {e}: must be in [0, 1]"));
                }
                cfg.epsilon = e;
                i += 1;
            }
            "--mode" => {
                cfg.modes = value(i, a)?
                    .split(',')
                    .map(Mode::parse)
                    .collect::<Result<_, _>>()?;
                i += 1;
            }
            "--plain" => cfg.modes = vec![Mode::Plain],
            "--compare" => {
                cfg.modes = vec![
                    Mode::Plain,
                    Mode::PlainSync,
                    Mode::FastAsync,
                    Mode::FastCopy,
                    Mode::Fast,
                ]
            }
            "--breakdown" => cfg.breakdown = true,
            "--wait" => {
                cfg.wait = match value(i, a)?.as_str() {
                    "spin" => WaitPolicy::Spin(SPIN),
                    "auto" => WaitPolicy::Auto,
                    "park" => WaitPolicy::Park,
                    w => return Err(format!("--wait {w}: expected spin, auto or park")),
                };
                i += 1;
            }
            "--quick" => {
                cfg.rounds = 3;
                cfg.warmup = 50;
                if cfg.steps == 0 {
                    cfg.steps = 300;
                }
            }
            "--help" | "-h" => return Err(USAGE.into()),
            _ => return Err(format!("unknown argument {a}\n{USAGE}")),
        }
        i += 1;
    }
    Ok(cfg)
}

/// The policy's parameters on the host: `w1 [50, 256]`, `b1 [256]`, `w2 [256, 3]`,
/// `b2 [3]`, row-major.
struct HostParams {
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
}

impl HostParams {
    /// The anchor's initialisation scheme (`N(0,1) / sqrt(fan_in)`, zero biases),
    /// drawn from `Rng::new(seed)` with Box–Muller.
    fn init(seed: u64) -> HostParams {
        let mut rng = Rng::new(seed);
        let mut normal = move || {
            let u1 = 1.0 - rng.uniform() as f64; // (0, 1]
            let u2 = rng.uniform() as f64;
            ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
        };
        let mut draw = |n: usize, fan_in: usize| -> Vec<f32> {
            let s = 1.0 / (fan_in as f32).sqrt();
            (0..n).map(|_| normal() * s).collect()
        };
        let w1 = draw(OBS * HID, OBS);
        let w2 = draw(HID * ACT, HID);
        HostParams {
            w1,
            b1: vec![0.0; HID],
            w2,
            b2: vec![0.0; ACT],
        }
    }

    fn upload(&self, client: &Client) -> xlaclient::rl::Result<Vec<Buffer>> {
        Ok(vec![
            client.buffer_from_host(&self.w1, &[OBS as i64, HID as i64])?,
            client.buffer_from_host(&self.b1, &[HID as i64])?,
            client.buffer_from_host(&self.w2, &[HID as i64, ACT as i64])?,
            client.buffer_from_host(&self.b2, &[ACT as i64])?,
        ])
    }

    /// The forward pass in plain Rust (f64 accumulation), `q [batch, 3]`.
    fn forward(&self, obs: &[f32], batch: usize) -> Vec<f32> {
        let mut q = vec![0.0f32; batch * ACT];
        let mut h = vec![0.0f64; HID];
        for r in 0..batch {
            let x = &obs[r * OBS..(r + 1) * OBS];
            for (j, hj) in h.iter_mut().enumerate() {
                let mut s = self.b1[j] as f64;
                for (k, xk) in x.iter().enumerate() {
                    s += *xk as f64 * self.w1[k * HID + j] as f64;
                }
                *hj = s.max(0.0);
            }
            for a in 0..ACT {
                let mut s = self.b2[a] as f64;
                for (j, hj) in h.iter().enumerate() {
                    s += hj * self.w2[j * ACT + a] as f64;
                }
                q[r * ACT + a] = s as f32;
            }
        }
        q
    }
}

/// The policy as traced ops: `relu(obs @ w1 + b1) @ w2 + b2`.
fn mlp_ops(
    w1: &xlaclient::Op,
    b1: &xlaclient::Op,
    w2: &xlaclient::Op,
    b2: &xlaclient::Op,
    obs: &xlaclient::Op,
) -> xlaclient::Op {
    (obs.matmul(w1) + b1).relu().matmul(w2) + b2
}

fn param_shapes(batch: usize) -> Vec<Shape> {
    vec![
        Shape::of::<f32>(&[OBS as i64, HID as i64]),
        Shape::of::<f32>(&[HID as i64]),
        Shape::of::<f32>(&[HID as i64, ACT as i64]),
        Shape::of::<f32>(&[ACT as i64]),
        Shape::of::<f32>(&[batch as i64, OBS as i64]),
    ]
}

/// Where a `fast` vector step's time went (sums over the steps timed).
#[derive(Clone, Copy, Default)]
struct Breakdown {
    env: Duration,
    upload: Duration,
    execute: Duration,
    download: Duration,
    steps: usize,
}

/// One way of calling the policy.
enum Policy {
    /// `execute` on resident parameters, Q-values copied into `q` (reused).
    Fast {
        client: Client,
        exe: LoadedExecutable,
        params: Vec<Buffer>,
        dims: [i64; 2],
        q: Vec<f32>,
        /// Q-values read with `Buffer::read_in_place`, else `copy_to_host`.
        in_place: bool,
    },
    /// The batch split in two halves, one per CPU device, run by one
    /// `execute_replicated` call (the devices compute in parallel); per device its
    /// own parameter copy; Q-values read in place.
    Sharded {
        exe: LoadedExecutable,
        devices: Vec<xlaclient::Device>,
        params: Vec<Vec<Buffer>>,
        dims: [i64; 2],
        q: Vec<f32>,
    },
    /// `Jit::call` on `[w1, b1, w2, b2, obs]`, Q-values read with `to_vec`.
    Plain {
        client: Client,
        jit: Jit<Vec<Shape>, Shape>,
        args: Vec<Buffer>,
        dims: [i64; 2],
        q: Vec<f32>,
    },
}

impl Policy {
    fn new(
        mode: Mode,
        client: &Client,
        params: &HostParams,
        n: usize,
    ) -> xlaclient::rl::Result<Policy> {
        let dims = [n as i64, OBS as i64];
        match mode {
            Mode::Fast | Mode::FastCopy | Mode::FastAsync => {
                let b = Builder::new("catch_policy");
                let ps: Vec<_> = param_shapes(n)
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| b.parameter(i, s, &format!("p{i}")))
                    .collect();
                let module = b.build(&mlp_ops(&ps[0], &ps[1], &ps[2], &ps[3], &ps[4]))?;
                Ok(Policy::Fast {
                    client: client.clone(),
                    exe: client.compile(&module)?,
                    params: params.upload(client)?,
                    dims,
                    q: vec![0.0; n * ACT],
                    in_place: mode != Mode::FastCopy,
                })
            }
            Mode::Sharded => {
                let devices = client.addressable_devices();
                if devices.len() < 2 || n % 2 != 0 {
                    return Err(xlaclient::rl::Error::InvalidArgument {
                        what: "mode",
                        reason: format!(
                            "mode sharded needs 2 CPU devices ({} here) and an even N ({n})",
                            devices.len()
                        ),
                    });
                }
                let half = n / 2;
                let b = Builder::new("catch_policy_sharded");
                let ps: Vec<_> = param_shapes(half)
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| b.parameter(i, s, &format!("p{i}")))
                    .collect();
                let module = b.build(&mlp_ops(&ps[0], &ps[1], &ps[2], &ps[3], &ps[4]))?;
                let exe = client
                    .compile_with(&module, &xlaclient::CompileOptions::new().num_replicas(2))?;
                let mut per_device = Vec::new();
                for d in &devices[..2] {
                    per_device.push(vec![
                        d.buffer_from_host(&params.w1, &[OBS as i64, HID as i64])?,
                        d.buffer_from_host(&params.b1, &[HID as i64])?,
                        d.buffer_from_host(&params.w2, &[HID as i64, ACT as i64])?,
                        d.buffer_from_host(&params.b2, &[ACT as i64])?,
                    ]);
                }
                Ok(Policy::Sharded {
                    exe,
                    devices: devices[..2].to_vec(),
                    params: per_device,
                    dims: [half as i64, OBS as i64],
                    q: vec![0.0; n * ACT],
                })
            }
            Mode::Plain | Mode::PlainSync => {
                let jit = client.jit("catch_policy", &param_shapes(n), |_, p: Vec<_>| {
                    mlp_ops(&p[0], &p[1], &p[2], &p[3], &p[4])
                })?;
                let mut args = params.upload(client)?;
                args.push(client.buffer_from_host(&vec![0.0f32; n * OBS], &dims)?);
                Ok(Policy::Plain {
                    client: client.clone(),
                    jit,
                    args,
                    dims,
                    q: Vec::new(),
                })
            }
        }
    }

    /// The Q-values `[n, 3]` for `obs [n, 50]`.
    fn q(&mut self, obs: &[f32], bd: Option<&mut Breakdown>) -> xlaclient::rl::Result<&[f32]> {
        match self {
            Policy::Fast {
                client,
                exe,
                params,
                dims,
                q,
                in_place,
            } => {
                let read = |b: &Buffer, q: &mut [f32]| {
                    if *in_place {
                        b.read_in_place(q)
                    } else {
                        b.copy_to_host(q)
                    }
                };
                let Some(bd) = bd else {
                    let o = client.buffer_from_host(obs, dims)?;
                    let out = exe.execute(&[&params[0], &params[1], &params[2], &params[3], &o])?;
                    read(&out[0], q)?;
                    return Ok(q);
                };
                let t0 = Instant::now();
                let o = client.buffer_from_host(obs, dims)?;
                let t1 = Instant::now();
                let out = exe.execute(&[&params[0], &params[1], &params[2], &params[3], &o])?;
                let t2 = Instant::now();
                read(&out[0], q)?;
                let t3 = Instant::now();
                bd.upload += t1 - t0;
                bd.execute += t2 - t1;
                bd.download += t3 - t2;
                Ok(q)
            }
            Policy::Sharded {
                exe,
                devices,
                params,
                dims,
                q,
            } => {
                let (o0, o1) = obs.split_at(obs.len() / 2);
                let a = devices[0].buffer_from_host(o0, dims)?;
                let b = devices[1].buffer_from_host(o1, dims)?;
                let (p0, p1) = (&params[0], &params[1]);
                let out = exe.execute_replicated(&[
                    vec![&p0[0], &p0[1], &p0[2], &p0[3], &a],
                    vec![&p1[0], &p1[1], &p1[2], &p1[3], &b],
                ])?;
                let half = q.len() / 2;
                let (q0, q1) = q.split_at_mut(half);
                out[0][0].read_in_place(q0)?;
                out[1][0].read_in_place(q1)?;
                Ok(q)
            }
            Policy::Plain {
                client,
                jit,
                args,
                dims,
                q,
            } => {
                args[4] = client.buffer_from_host(obs, dims)?;
                *q = jit.call(args)?.to_vec()?;
                Ok(q)
            }
        }
    }
}

/// N environments and the host arrays of a vector step.
struct World {
    envs: Vec<Catch>,
    obs: Vec<f32>,
    rng: Rng,
    epsilon: f32,
    episodes: u64,
    reward: f64,
}

impl World {
    fn new(n: usize, epsilon: f32) -> xlaclient::rl::Result<World> {
        let envs: Vec<Catch> = (0..n as u64).map(|i| Catch::new(1000 + i)).collect();
        let mut obs = vec![0.0; n * OBS];
        for (e, o) in envs.iter().zip(obs.chunks_exact_mut(OBS)) {
            e.observe(o)?;
        }
        Ok(World {
            envs,
            obs,
            rng: Rng::new(7),
            epsilon,
            episodes: 0,
            reward: 0.0,
        })
    }

    /// Acts on `q` (greedy, first maximum as numpy's argmax; epsilon-greedy when
    /// `epsilon > 0`), steps every environment and renders the next observations.
    fn step(&mut self, q: &[f32]) -> xlaclient::rl::Result<()> {
        for ((env, qs), o) in self
            .envs
            .iter_mut()
            .zip(q.chunks_exact(ACT))
            .zip(self.obs.chunks_exact_mut(OBS))
        {
            let mut a = 0;
            for (k, v) in qs.iter().enumerate().skip(1) {
                if *v > qs[a] {
                    a = k;
                }
            }
            if self.epsilon > 0.0 && self.rng.uniform() < self.epsilon {
                a = self.rng.below(ACT as u64)? as usize;
            }
            let t = env.step(a)?;
            if t.terminal {
                self.episodes += 1;
                self.reward += t.reward as f64;
            }
            env.observe(o)?;
        }
        Ok(())
    }
}

/// Runs `steps` vector steps; returns the seconds taken.
fn run(
    world: &mut World,
    policy: &mut Policy,
    steps: usize,
    mut bd: Option<&mut Breakdown>,
) -> xlaclient::rl::Result<f64> {
    let t0 = Instant::now();
    for _ in 0..steps {
        let obs = std::mem::take(&mut world.obs);
        let q = policy.q(&obs, bd.as_deref_mut());
        world.obs = obs;
        let q = q?;
        match bd.as_deref_mut() {
            Some(bd) => {
                let te = Instant::now();
                world.step(q)?;
                bd.env += te.elapsed();
                bd.steps += 1;
            }
            None => world.step(q)?,
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match parse_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("catch_hostloop: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = real_main(&cfg) {
        eprintln!("catch_hostloop: {e}");
        std::process::exit(1);
    }
}

fn real_main(cfg: &Config) -> Result<(), Box<dyn std::error::Error>> {
    let plugin = xlaclient::Plugin::default_plugin()?;
    let base = ClientOptions::new().wait_policy(cfg.wait);
    let async_client = Client::new(&plugin, &base)?;
    let sync_client = Client::new(&plugin, &base.clone().asynchronous(false))?;
    // Two CPU devices, asynchronous: `execute_replicated` runs them in parallel.
    let sharded_client = Client::new(&plugin, &base.clone().cpu_device_count(2))?;
    println!(
        "plugin {} (PJRT C API {}.{}); modes {:?}; wait {:?}; epsilon {}; untrained policy, params N(0,1)/sqrt(fan_in) from rl::Rng(0)",
        plugin.path().display(),
        plugin.api_version().0,
        plugin.api_version().1,
        cfg.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
        cfg.wait,
        cfg.epsilon
    );
    let host = HostParams::init(0);
    let mut last = (0, 0.0);
    let mut at_1024 = None;
    for &n in &cfg.ns {
        let steps = if cfg.steps > 0 {
            cfg.steps
        } else if n < 1024 {
            3000
        } else {
            600
        };
        let mut world = World::new(n, cfg.epsilon)?;
        let mut policies = Vec::new();
        for &m in &cfg.modes {
            let client = match m {
                Mode::Sharded => &sharded_client,
                _ if m.synchronous() => &sync_client,
                _ => &async_client,
            };
            let mut p = Policy::new(m, client, &host, n)?;
            run(&mut world, &mut p, cfg.warmup, None)?;
            // Correctness: this step's Q-values against plain Rust.
            let obs = world.obs.clone();
            let got = p.q(&obs, None)?.to_vec();
            let want = host.forward(&obs, n);
            let err = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                // A NaN anywhere is kept (f32::max would drop it).
                .fold(0.0f32, |m, d| if d.is_nan() || d > m { d } else { m });
            println!("check mode={} n={n} max_abs_err={err:.3e}", m.name());
            if got.len() != want.len() || err.is_nan() || err > MAX_ERR {
                return Err(format!(
                    "mode {} n={n}: Q-values differ from the plain-Rust forward pass (max abs error {err}, {} values, want {})",
                    m.name(),
                    got.len(),
                    want.len()
                )
                .into());
            }
            policies.push((m, p, Vec::new()));
        }
        // Rounds: every mode once per round, the order rotated each round.
        for r in 0..cfg.rounds {
            let k = policies.len();
            for j in 0..k {
                let (_, p, times) = &mut policies[(j + r) % k];
                times.push(run(&mut world, p, steps, None)?);
            }
        }
        for (m, _, times) in &policies {
            let sps: Vec<f64> = times.iter().map(|t| (n * steps) as f64 / t).collect();
            let best = sps.iter().cloned().fold(0.0, f64::max);
            let med = median(&sps);
            let us: Vec<f64> = times.iter().map(|t| t / steps as f64 * 1e6).collect();
            println!(
                "mode={} n={n} steps={steps} rounds={} best={best:.4e} median={med:.4e} us_per_vector_step_median={:.2}",
                m.name(),
                cfg.rounds,
                median(&us)
            );
            if *m == cfg.modes[cfg.modes.len() - 1] {
                last = (n, med);
                if n == 1024 {
                    at_1024 = Some(med);
                }
            }
        }
        println!(
            "n={n} episodes={} mean_terminal_reward={:.3}",
            world.episodes,
            world.reward / world.episodes.max(1) as f64
        );
        if cfg.breakdown {
            // The `fast` path if it ran, else `fast-async`.
            let pick = policies
                .iter()
                .position(|(m, _, _)| *m == Mode::Fast)
                .or_else(|| policies.iter().position(|(m, _, _)| *m == Mode::FastAsync))
                .ok_or("--breakdown needs a fast mode (fast or fast-async)")?;
            let (m, p, _) = &mut policies[pick];
            let m = *m;
            let mut bd = Breakdown::default();
            run(&mut world, p, steps, Some(&mut bd))?;
            let us = |d: Duration| d.as_secs_f64() * 1e6 / bd.steps as f64;
            println!(
                "breakdown mode={} n={n} us_per_vector_step: env={:.2} upload={:.2} execute={:.2} download={:.2} total={:.2}",
                m.name(),
                us(bd.env),
                us(bd.upload),
                us(bd.execute),
                us(bd.download),
                us(bd.env + bd.upload + bd.execute + bd.download)
            );
        }
    }
    match at_1024 {
        Some(v) => println!("steps_per_s_1024={v:.4e}"),
        None => println!("steps_per_s_{}={:.4e}", last.0, last.1),
    }
    Ok(())
}
