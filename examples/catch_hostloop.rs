//! Worlds stepped in Rust, the policy on XLA: the host-loop workload of the JAX
//! anchor `shared/bench-anchors/jax_hostloop_catch.py`, written against this crate.
//!
//! N Catch environments (`xlaclient::rl::catch`, 10 × 5) are stepped in plain Rust.
//! One vector step of all N environments =
//!   render the observations `f32[N, 50]` into a host array
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
//! first six):
//!   - `split` (default): the N environments split into one share per core (`--workers
//!     W`, default the number of cores; shares of at least 256 environments, so one
//!     share below N = 512), each share stepped by its own thread with the `fast`
//!     loop below, all threads at once on the default client (one executable per
//!     share size and one parameter set, shared). Each thread's policy call overlaps
//!     the other threads' world steps, and the batch's computation, which XLA runs on
//!     one core for this program, uses every core;
//!   - `fast`: one thread, `LoadedExecutable::execute` on resident parameter buffers
//!     on the default (synchronous) client; the observations rendered into an
//!     `AlignedHost` array that is moved into the call without a copy
//!     (`Client::buffer_from_aligned`) and taken back after it (`Buffer::into_host`);
//!     the Q-values read into one reused slice (`Buffer::copy_to_host`, in place);
//!   - `pipelined`: one thread, the N environments in two halves on an asynchronous
//!     client: each half's call is launched as soon as its observations are
//!     rendered, so its computation (on a plugin worker thread) overlaps the other
//!     half's world step, and the two halves' computations can run on two cores;
//!   - `fast-copy`: `fast` with the crate's copies: the observations uploaded with
//!     `Client::buffer_from_host`, the Q-values read through the plugin's transfer
//!     (`Buffer::copy_to_host_via_plugin`, what every read did before reading in place
//!     was the default);
//!   - `plain`: `Client::jit` + `Jit::call` + `Buffer::to_vec` (a new vector per step)
//!     on the default client: what a first program writes;
//!   - `plain-async`: the same on an asynchronous client (the default before the
//!     synchronous client was);
//!   - `fast-async` (not in `--compare`): `fast` on an asynchronous client;
//!   - `sharded` (not in `--compare`; even N only): two CPU devices on an
//!     asynchronous client, each computing half the batch with its own parameter
//!     copy, launched by one `execute_replicated` call, Q-values read in place.
//!
//! Every path waits by the crate's default `WaitPolicy::Auto`; `--wait spin` polls up
//! to 1 ms, then parks, `--wait park` never polls.
//!
//! For N = 1, 64 and 1024 (`--n`) it prints environment steps per second
//! (N × steps / seconds), best and median over rounds, as the anchor does (3000 steps
//! per round, 600 at N ≥ 1024, 5 rounds, 200 warm-up steps). `--breakdown` adds where
//! a `fast` vector step's time goes (environments, upload, execute, download).
//! Correctness: for each N and mode, the Q-values of one step of every world are
//! compared with a forward pass in plain Rust on the same parameters and
//! observations (max abs error printed; the program fails above 1e-4).
//!
//! Run: `cargo run --release --example catch_hostloop -- [--n 1 64 1024] [--steps S]
//! [--rounds R] [--epsilon E] [--mode M[,M...] | --plain | --compare] [--workers W]
//! [--wait auto|spin|park] [--breakdown] [--quick]`. `--quick` (CI): 300 steps, 3
//! rounds, 50 warm-up steps. The last line is `steps_per_s_1024=<median>` of the last
//! mode given (of the last N when 1024 is not among them).

use std::ops::Range;
use std::time::{Duration, Instant};

use xlaclient::ClientExt;
use xlaclient::pjrt::WaitPolicy;
use xlaclient::rl::catch::{Catch, NUM_ACTIONS};
use xlaclient::rl::{Environment, Rng};
use xlaclient::{
    AlignedHost, Buffer, Builder, Client, ClientOptions, Jit, LoadedExecutable, Shape,
};

const OBS: usize = 50;
const HID: usize = 256;
const ACT: usize = NUM_ACTIONS;
const MAX_ERR: f32 = 1e-4;
/// The fewest environments `split` gives a thread: a smaller share's policy call is
/// too short to pay for the thread (at N = 64 two shares of 32 were half as fast as
/// one thread on this 2-core VM).
const MIN_SHARE: usize = 256;
/// The polling budget of `--wait spin`: then park.
const SPIN: Duration = Duration::from_millis(1);

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Split,
    Fast,
    Pipelined,
    FastCopy,
    Plain,
    PlainAsync,
    FastAsync,
    Sharded,
}

const MODES: [Mode; 8] = [
    Mode::Split,
    Mode::Fast,
    Mode::Pipelined,
    Mode::FastCopy,
    Mode::Plain,
    Mode::PlainAsync,
    Mode::FastAsync,
    Mode::Sharded,
];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Split => "split",
            Mode::Fast => "fast",
            Mode::Pipelined => "pipelined",
            Mode::FastCopy => "fast-copy",
            Mode::Plain => "plain",
            Mode::PlainAsync => "plain-async",
            Mode::FastAsync => "fast-async",
            Mode::Sharded => "sharded",
        }
    }

    fn parse(s: &str) -> Result<Mode, String> {
        MODES.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            let names: Vec<_> = MODES.iter().map(|m| m.name()).collect();
            format!("--mode {s}: expected one of {}", names.join(", "))
        })
    }
}

struct Config {
    ns: Vec<usize>,
    steps: usize,
    rounds: usize,
    warmup: usize,
    epsilon: f32,
    modes: Vec<Mode>,
    workers: usize,
    breakdown: bool,
    wait: WaitPolicy,
}

const USAGE: &str = "usage: catch_hostloop [--n N...] [--steps S] [--rounds R] [--epsilon E] \
[--mode M[,M...]] (M: split|fast|pipelined|fast-copy|plain|plain-async|fast-async|sharded) [--plain] \
[--compare] [--workers W] [--wait spin|auto|park] [--breakdown] [--quick]";

fn parse_args(args: &[String]) -> Result<Config, String> {
    let mut cfg = Config {
        ns: vec![1, 64, 1024],
        steps: 0,
        rounds: 5,
        warmup: 200,
        epsilon: 0.0,
        modes: vec![Mode::Split],
        workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
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
            "--compare" => cfg.modes = MODES[..6].to_vec(),
            "--workers" => {
                let v = value(i, a)?;
                cfg.workers = v
                    .parse()
                    .ok()
                    .filter(|w| (1..=256).contains(w))
                    .ok_or_else(|| format!("--workers {v}: expected a whole number in 1..=256"))?;
                i += 1;
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

/// Environments and the host array their observations are rendered into.
struct World {
    envs: Vec<Catch>,
    /// `[envs, 50]`, aligned: moved into the policy call without a copy (`None`
    /// while it is).
    obs: Option<AlignedHost<f32>>,
    rng: Rng,
    epsilon: f32,
    episodes: u64,
    reward: f64,
}

impl World {
    /// The environments of global indices `range` (seeded by index, so a world
    /// split in shares steps the same environments as one world).
    fn new(range: Range<usize>, epsilon: f32) -> Res<World> {
        let envs: Vec<Catch> = range.clone().map(|i| Catch::new(1000 + i as u64)).collect();
        let mut obs = AlignedHost::new(envs.len() * OBS)?;
        for (e, o) in envs.iter().zip(obs.chunks_exact_mut(OBS)) {
            e.observe(o)?;
        }
        Ok(World {
            envs,
            obs: Some(obs),
            rng: Rng::new(7 + range.start as u64),
            epsilon,
            episodes: 0,
            reward: 0.0,
        })
    }

    fn len(&self) -> usize {
        self.envs.len()
    }

    fn obs(&self) -> Res<&[f32]> {
        Ok(self.obs.as_deref().ok_or("the observation array is lent")?)
    }

    /// Acts on `q` (greedy, first maximum as numpy's argmax; epsilon-greedy when
    /// `epsilon > 0`), steps every environment and renders the next observations.
    fn step(&mut self, q: &[f32]) -> Res<()> {
        let obs = self.obs.as_mut().ok_or("the observation array is lent")?;
        for ((env, qs), o) in self
            .envs
            .iter_mut()
            .zip(q.chunks_exact(ACT))
            .zip(obs.chunks_exact_mut(OBS))
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

/// The executable and resident parameters of one batch size, shared by threads.
struct Net {
    exe: LoadedExecutable,
    params: Vec<Buffer>,
}

impl Net {
    fn new(client: &Client, host: &HostParams, batch: usize) -> Res<Net> {
        let b = Builder::new("catch_policy");
        let ps: Vec<_> = param_shapes(batch)
            .into_iter()
            .enumerate()
            .map(|(i, s)| b.parameter(i, s, &format!("p{i}")))
            .collect();
        let module = b.build(&mlp_ops(&ps[0], &ps[1], &ps[2], &ps[3], &ps[4]))?;
        Ok(Net {
            exe: client.compile(&module)?,
            params: host.upload(client)?,
        })
    }

    /// Launches the call on `obs` (returns at once on an asynchronous client).
    fn launch(&self, obs: &Buffer) -> Res<Vec<Buffer>> {
        let p = &self.params;
        Ok(self.exe.execute(&[&p[0], &p[1], &p[2], &p[3], obs])?)
    }
}

/// `world`'s Q-values into `q`, the `fast` way (or with the crate's copies).
fn fast_q(
    client: &Client,
    net: &Net,
    world: &mut World,
    q: &mut [f32],
    copies: bool,
    bd: Option<&mut Breakdown>,
) -> Res<()> {
    let dims = [world.len() as i64, OBS as i64];
    let t0 = Instant::now();
    let (input, host_back) = if copies {
        (client.buffer_from_host(world.obs()?, &dims)?, false)
    } else {
        let host = world.obs.take().ok_or("the observation array is lent")?;
        (client.buffer_from_aligned(host, &dims)?, true)
    };
    let t1 = Instant::now();
    let out = net.launch(&input)?;
    let t2 = Instant::now();
    if copies {
        out[0].copy_to_host_via_plugin(q)?;
    } else {
        out[0].copy_to_host(q)?;
    }
    drop(out);
    if host_back {
        world.obs = Some(input.into_host()?);
    }
    if let Some(bd) = bd {
        let t3 = Instant::now();
        bd.upload += t1 - t0;
        bd.execute += t2 - t1;
        bd.download += t3 - t2;
    }
    Ok(())
}

/// One share of a `split` world: its environments, its Q-values.
struct Share {
    world: World,
    q: Vec<f32>,
}

/// One way of calling the policy, with the world(s) it steps.
enum Policy {
    /// `fast`, `fast-copy`, `fast-async`: one world, one call per vector step.
    Fast {
        client: Client,
        net: Net,
        world: World,
        q: Vec<f32>,
        copies: bool,
    },
    /// `split`: one share per thread, the same executable for every share size
    /// (shares differ by at most one environment: one or two executables).
    Split {
        client: Client,
        nets: Vec<(usize, Net)>,
        shares: Vec<Share>,
    },
    /// `pipelined`: two halves, calls launched as soon as a half is rendered.
    Pipelined {
        client: Client,
        nets: Vec<(usize, Net)>,
        halves: Vec<Share>,
    },
    /// The batch split in two halves, one per CPU device, run by one
    /// `execute_replicated` call (the devices compute in parallel); per device its
    /// own parameter copy; Q-values read in place.
    Sharded {
        exe: LoadedExecutable,
        devices: Vec<xlaclient::Device>,
        params: Vec<Vec<Buffer>>,
        world: World,
        q: Vec<f32>,
    },
    /// `plain`, `plain-async`: `Jit::call` on `[w1, b1, w2, b2, obs]`, Q-values read
    /// with `to_vec`.
    Plain {
        client: Client,
        jit: Jit<Vec<Shape>, Shape>,
        args: Vec<Buffer>,
        world: World,
        q: Vec<f32>,
    },
}

/// Splits `0..n` into `k` contiguous ranges whose lengths differ by at most one.
fn shares(n: usize, k: usize) -> Vec<Range<usize>> {
    let k = k.clamp(1, n.max(1));
    (0..k).map(|i| n * i / k..n * (i + 1) / k).collect()
}

/// The nets for every distinct length of `ranges`.
fn nets_for(client: &Client, host: &HostParams, ranges: &[Range<usize>]) -> Res<Vec<(usize, Net)>> {
    let mut nets: Vec<(usize, Net)> = Vec::new();
    for r in ranges {
        if !nets.iter().any(|(n, _)| *n == r.len()) {
            nets.push((r.len(), Net::new(client, host, r.len())?));
        }
    }
    Ok(nets)
}

fn net_of(nets: &[(usize, Net)], len: usize) -> Res<&Net> {
    Ok(nets
        .iter()
        .find(|(n, _)| *n == len)
        .map(|(_, net)| net)
        .ok_or("no executable for this share")?)
}

/// Runs one `split` share for `steps` vector steps on this thread.
fn run_share(client: &Client, nets: &[(usize, Net)], share: &mut Share, steps: usize) -> Res<()> {
    let net = net_of(nets, share.world.len())?;
    for _ in 0..steps {
        fast_q(client, net, &mut share.world, &mut share.q, false, None)?;
        share.world.step(&share.q)?;
    }
    Ok(())
}

impl Policy {
    fn new(
        mode: Mode,
        clients: &Clients,
        host: &HostParams,
        n: usize,
        cfg: &Config,
    ) -> Res<Policy> {
        let world = |r: Range<usize>| World::new(r, cfg.epsilon);
        match mode {
            Mode::Fast | Mode::FastCopy | Mode::FastAsync => {
                let client = if mode == Mode::FastAsync {
                    &clients.asynchronous
                } else {
                    &clients.default
                };
                Ok(Policy::Fast {
                    client: client.clone(),
                    net: Net::new(client, host, n)?,
                    world: world(0..n)?,
                    q: vec![0.0; n * ACT],
                    copies: mode == Mode::FastCopy,
                })
            }
            Mode::Split | Mode::Pipelined => {
                let (client, parts) = if mode == Mode::Split {
                    let workers = cfg.workers.min((n / MIN_SHARE).max(1));
                    (&clients.default, shares(n, workers))
                } else {
                    (&clients.asynchronous, shares(n, 2))
                };
                let nets = nets_for(client, host, &parts)?;
                let worlds = parts
                    .into_iter()
                    .map(|r| {
                        Ok(Share {
                            q: vec![0.0; r.len() * ACT],
                            world: world(r)?,
                        })
                    })
                    .collect::<Res<Vec<_>>>()?;
                Ok(if mode == Mode::Split {
                    Policy::Split {
                        client: client.clone(),
                        nets,
                        shares: worlds,
                    }
                } else {
                    Policy::Pipelined {
                        client: client.clone(),
                        nets,
                        halves: worlds,
                    }
                })
            }
            Mode::Sharded => {
                let client = &clients.sharded;
                let devices = client.addressable_devices();
                if devices.len() < 2 || n % 2 != 0 {
                    return Err(format!(
                        "mode sharded needs 2 CPU devices ({} here) and an even N ({n})",
                        devices.len()
                    )
                    .into());
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
                        d.buffer_from_host(&host.w1, &[OBS as i64, HID as i64])?,
                        d.buffer_from_host(&host.b1, &[HID as i64])?,
                        d.buffer_from_host(&host.w2, &[HID as i64, ACT as i64])?,
                        d.buffer_from_host(&host.b2, &[ACT as i64])?,
                    ]);
                }
                Ok(Policy::Sharded {
                    exe,
                    devices: devices[..2].to_vec(),
                    params: per_device,
                    world: world(0..n)?,
                    q: vec![0.0; n * ACT],
                })
            }
            Mode::Plain | Mode::PlainAsync => {
                let client = if mode == Mode::Plain {
                    &clients.default
                } else {
                    &clients.asynchronous
                };
                let jit = client.jit("catch_policy", &param_shapes(n), |_, p: Vec<_>| {
                    mlp_ops(&p[0], &p[1], &p[2], &p[3], &p[4])
                })?;
                let mut args = host.upload(client)?;
                args.push(
                    client.buffer_from_host(&vec![0.0f32; n * OBS], &[n as i64, OBS as i64])?,
                );
                Ok(Policy::Plain {
                    client: client.clone(),
                    jit,
                    args,
                    world: world(0..n)?,
                    q: Vec::new(),
                })
            }
        }
    }

    /// The worlds (one, or one per share).
    fn worlds(&self) -> Vec<&World> {
        match self {
            Policy::Fast { world, .. }
            | Policy::Sharded { world, .. }
            | Policy::Plain { world, .. } => {
                vec![world]
            }
            Policy::Split { shares: s, .. } | Policy::Pipelined { halves: s, .. } => {
                s.iter().map(|s| &s.world).collect()
            }
        }
    }

    /// Runs `steps` vector steps; returns the seconds taken.
    fn run(&mut self, steps: usize, mut bd: Option<&mut Breakdown>) -> Res<f64> {
        let t0 = Instant::now();
        match self {
            Policy::Fast {
                client,
                net,
                world,
                q,
                copies,
            } => {
                for _ in 0..steps {
                    fast_q(client, net, world, q, *copies, bd.as_deref_mut())?;
                    let te = Instant::now();
                    world.step(q)?;
                    if let Some(bd) = bd.as_deref_mut() {
                        bd.env += te.elapsed();
                        bd.steps += 1;
                    }
                }
            }
            Policy::Split {
                client,
                nets,
                shares,
            } => {
                let (client, nets) = (&*client, &nets[..]);
                std::thread::scope(|s| -> Res<()> {
                    let handles: Vec<_> = shares
                        .iter_mut()
                        .map(|share| s.spawn(move || run_share(client, nets, share, steps)))
                        .collect();
                    for h in handles {
                        h.join().map_err(|_| "a share's thread panicked")??;
                    }
                    Ok(())
                })?;
            }
            Policy::Pipelined {
                client,
                nets,
                halves,
            } => {
                // Per half: its launched call (input, outputs).
                let mut pending: Vec<Option<(Buffer, Vec<Buffer>)>> = Vec::new();
                let launch = |h: &mut Share| -> Res<(Buffer, Vec<Buffer>)> {
                    let dims = [h.world.len() as i64, OBS as i64];
                    let host = h.world.obs.take().ok_or("the observation array is lent")?;
                    let input = client.buffer_from_aligned(host, &dims)?;
                    let out = net_of(nets, h.world.len())?.launch(&input)?;
                    Ok((input, out))
                };
                for h in halves.iter_mut() {
                    pending.push(Some(launch(h)?));
                }
                for step in 0..steps {
                    for (h, p) in halves.iter_mut().zip(pending.iter_mut()) {
                        let (input, out) = p.take().ok_or("no call in flight")?;
                        out[0].copy_to_host(&mut h.q)?;
                        drop(out);
                        h.world.obs = Some(input.into_host()?);
                        h.world.step(&h.q)?;
                        if step + 1 < steps {
                            *p = Some(launch(h)?);
                        }
                    }
                }
            }
            Policy::Sharded {
                exe,
                devices,
                params,
                world,
                q,
            } => {
                for _ in 0..steps {
                    sharded_q(exe, devices, params, world.obs()?, q)?;
                    world.step(q)?;
                }
            }
            Policy::Plain {
                client,
                jit,
                args,
                world,
                q,
            } => {
                let dims = [world.len() as i64, OBS as i64];
                for _ in 0..steps {
                    args[4] = client.buffer_from_host(world.obs()?, &dims)?;
                    *q = jit.call(args)?.to_vec()?;
                    world.step(q)?;
                }
            }
        }
        Ok(t0.elapsed().as_secs_f64())
    }

    /// The largest difference, over every world, between this policy's Q-values
    /// for the world's current observations and the forward pass in plain Rust.
    fn check(&mut self, host: &HostParams) -> Res<f32> {
        let mut got_want: Vec<(Vec<f32>, Vec<f32>)> = Vec::new();
        match self {
            Policy::Fast {
                client,
                net,
                world,
                q,
                copies,
            } => {
                fast_q(client, net, world, q, *copies, None)?;
                got_want.push((q.clone(), host.forward(world.obs()?, world.len())));
            }
            Policy::Split {
                client,
                nets,
                shares: s,
            }
            | Policy::Pipelined {
                client,
                nets,
                halves: s,
            } => {
                for share in s.iter_mut() {
                    let net = net_of(nets, share.world.len())?;
                    fast_q(client, net, &mut share.world, &mut share.q, false, None)?;
                    got_want.push((
                        share.q.clone(),
                        host.forward(share.world.obs()?, share.world.len()),
                    ));
                }
            }
            Policy::Sharded {
                exe,
                devices,
                params,
                world,
                q,
            } => {
                sharded_q(exe, devices, params, world.obs()?, q)?;
                got_want.push((q.clone(), host.forward(world.obs()?, world.len())));
            }
            Policy::Plain {
                client,
                jit,
                args,
                world,
                ..
            } => {
                args[4] =
                    client.buffer_from_host(world.obs()?, &[world.len() as i64, OBS as i64])?;
                let got = jit.call(args)?.to_vec()?;
                got_want.push((got, host.forward(world.obs()?, world.len())));
            }
        }
        let mut err = 0.0f32;
        for (got, want) in got_want {
            if got.len() != want.len() {
                return Err(format!("{} Q-values, want {}", got.len(), want.len()).into());
            }
            for (g, w) in got.iter().zip(&want) {
                let d = (g - w).abs();
                // A NaN anywhere is kept (f32::max would drop it).
                if d.is_nan() || d > err {
                    err = d;
                }
            }
        }
        Ok(err)
    }
}

/// The `sharded` call: each half of `obs` to its device, Q-values read in place.
fn sharded_q(
    exe: &LoadedExecutable,
    devices: &[xlaclient::Device],
    params: &[Vec<Buffer>],
    obs: &[f32],
    q: &mut [f32],
) -> Res<()> {
    let dims = [(obs.len() / OBS / 2) as i64, OBS as i64];
    let (o0, o1) = obs.split_at(obs.len() / 2);
    let a = devices[0].buffer_from_host(o0, &dims)?;
    let b = devices[1].buffer_from_host(o1, &dims)?;
    let (p0, p1) = (&params[0], &params[1]);
    let out = exe.execute_replicated(&[
        vec![&p0[0], &p0[1], &p0[2], &p0[3], &a],
        vec![&p1[0], &p1[1], &p1[2], &p1[3], &b],
    ])?;
    let half = q.len() / 2;
    let (q0, q1) = q.split_at_mut(half);
    out[0][0].copy_to_host(q0)?;
    out[1][0].copy_to_host(q1)?;
    Ok(())
}

/// The clients the modes run on.
struct Clients {
    /// `Client::new` with default options: synchronous.
    default: Client,
    asynchronous: Client,
    /// Two CPU devices, asynchronous: `execute_replicated` runs them in parallel.
    sharded: Client,
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

fn real_main(cfg: &Config) -> Res<()> {
    let plugin = xlaclient::Plugin::default_plugin()?;
    let base = ClientOptions::new().wait_policy(cfg.wait);
    let asynchronous = base.clone().asynchronous(true);
    let clients = Clients {
        default: Client::new(&plugin, &base)?,
        asynchronous: Client::new(&plugin, &asynchronous)?,
        sharded: Client::new(&plugin, &asynchronous.cpu_device_count(2))?,
    };
    println!(
        "plugin {} (PJRT C API {}.{}); modes {:?}; workers {}; wait {:?}; epsilon {}; untrained policy, params N(0,1)/sqrt(fan_in) from rl::Rng(0)",
        plugin.path().display(),
        plugin.api_version().0,
        plugin.api_version().1,
        cfg.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
        cfg.workers,
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
        let mut policies = Vec::new();
        for &m in &cfg.modes {
            let mut p = Policy::new(m, &clients, &host, n, cfg)?;
            p.run(cfg.warmup, None)?;
            // Correctness: this step's Q-values against plain Rust.
            let err = p.check(&host)?;
            println!("check mode={} n={n} max_abs_err={err:.3e}", m.name());
            if err.is_nan() || err > MAX_ERR {
                return Err(format!(
                    "mode {} n={n}: Q-values differ from the plain-Rust forward pass (max abs error {err})",
                    m.name()
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
                times.push(p.run(steps, None)?);
            }
        }
        let (mut episodes, mut reward) = (0u64, 0.0f64);
        for (m, p, times) in &policies {
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
            for w in p.worlds() {
                episodes += w.episodes;
                reward += w.reward;
            }
        }
        println!(
            "n={n} episodes={episodes} mean_terminal_reward={:.3}",
            reward / episodes.max(1) as f64
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
            p.run(steps, Some(&mut bd))?;
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
