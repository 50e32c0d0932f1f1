//! Actors in separate processes feeding one learner through NATS JetStream
//! (`xlaclient::fleet`): Catch, Q(λ), the batch stepper in every actor.
//!
//! `cargo run --release --features fleet --example distributed -- --actors 4`
//! installs (first time) and starts a local `nats-server -js` on 127.0.0.1 with a
//! temporary store, runs the learner in this process and starts 4 actor
//! processes (this same binary, role `actor`), trains until the greedy
//! evaluation reaches 1.0, stops everything and prints one line:
//!
//! `trajectories_sent=… trajectories_trained=… lost=… duplicates_dropped=…
//! env_steps_per_s=… policy_lag_p50=… policy_lag_p99=… eval=…`
//!
//! It exits non-zero when the evaluation is below 1.0 or a trajectory was lost.
//!
//! On a cluster every process is started by the orchestrator instead, its role
//! and index read from the environment (`deploy/k8s/indexed-job.yaml`,
//! `deploy/slurm/fleet.sbatch`; the variables are listed in
//! `xlaclient::fleet::settings`):
//! - `distributed run` (or `learner` / `actor`, the same): run the role the
//!   environment gives (`XLACLIENT_FLEET_ROLE`, else `SLURM_PROCID` or
//!   `JOB_COMPLETION_INDEX`) against `NATS_URL`;
//! - `distributed --dry-run`: print the resolved settings and exit.
//!
//! Options of the local run: `--actors N` (default 4), `--max-time SECONDS`
//! (default 90), `--epsilon E` (default 0.1); `--bench SECONDS` trains for that
//! long with the Ray twin's learner settings (`bench/ray_catch_actors.py`) and
//! does not stop when the evaluation reaches 1.0 (the throughput benchmark). `--in-process ROUNDS` instead runs
//! the actors' work (stepper, network, message encoding) in this process with no
//! transport and prints `in_process_env_steps_per_s=…` (the benchmark's baseline).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xlaclient::Client;
use xlaclient::fleet::catch::{ActorConfig, Learner, LearnerConfig, run_actor};
use xlaclient::fleet::settings::{Role, Settings};
use xlaclient::fleet::{NatsServer, Transport, TransportOptions};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "usage: distributed [--actors N] [--max-time SECONDS | --bench SECONDS] [--epsilon E] \
                     | distributed --in-process ROUNDS \
                     | distributed run|learner|actor | distributed --dry-run";

fn learner_config(checkpoint_dir: Option<std::path::PathBuf>, max_time: f64) -> LearnerConfig {
    LearnerConfig {
        checkpoint_dir,
        // What was received is acked once a checkpoint holds it: with the
        // queue's bound, the interval caps the actors' rate (16 MiB per 0.2 s).
        checkpoint_every: Duration::from_millis(200),
        max_time: Duration::from_secs_f64(max_time),
        ..LearnerConfig::default()
    }
}

/// `--bench SECONDS`: the Ray twin's learner (`bench/ray_catch_actors.py`: 32
/// sequences a step, parameters every 4 steps, λ 0.99, Adam 1e-3, one step per
/// trajectory) for a fixed time, never stopping early on the evaluation.
fn bench_config(checkpoint_dir: Option<std::path::PathBuf>, seconds: f64) -> LearnerConfig {
    LearnerConfig {
        lr: 1e-3,
        lambda: 0.99,
        batch: 32,
        publish_every: 4,
        target_eval: f64::INFINITY,
        max_train_steps: u64::MAX,
        ..learner_config(checkpoint_dir, seconds)
    }
}

fn run_role(settings: &Settings, epsilon: f32, max_time: f64) -> Res<()> {
    let opts = TransportOptions {
        prefix: settings.prefix.clone(),
        // Actors wait for the learner to create the stream (its limits).
        create: settings.role == Role::Learner,
        ..TransportOptions::default()
    };
    let tr = Transport::connect(&settings.nats_url, opts, Duration::from_secs(60))?;
    let client = Client::cpu()?;
    match settings.role {
        Role::Actor(i) => {
            let mut cfg = ActorConfig::new(i);
            cfg.epsilon = epsilon;
            let s = run_actor(&tr, &client, &cfg)?;
            eprintln!(
                "actor {i}: sent={} refused={} errors={} waited={:.2}s param_updates={} env_steps={} {:.0} steps/s",
                s.sent,
                s.refused,
                s.errors,
                s.waited.as_secs_f64(),
                s.param_updates,
                s.env_steps,
                s.env_steps as f64 / s.seconds.max(1e-9)
            );
        }
        Role::Learner => {
            let mut l = Learner::new(
                &client,
                learner_config(settings.checkpoint_dir.clone(), max_time),
            )?;
            let r = l.run(&tr)?;
            println!("{r}");
            if r.eval < 1.0 {
                return Err(format!("greedy evaluation {} is below 1.0", r.eval).into());
            }
        }
    }
    Ok(())
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("distributed: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut actors = 4u32;
    let mut max_time = 90.0f64;
    let mut epsilon = 0.1f32;
    let mut bench = false;
    let mut i = 0;
    let value = |i: usize| {
        args.get(i + 1)
            .ok_or_else(|| format!("{} needs a value\n{USAGE}", args[i]))
    };
    while i < args.len() {
        match args[i].as_str() {
            "learner" | "actor" | "run" => {
                let settings = Settings::from_env()?;
                return run_role(&settings, epsilon, max_time);
            }
            "--in-process" => {
                // The same actor work in this process, no transport: the
                // benchmark's baseline (bench/distributed_throughput.sh).
                let rounds: usize = value(i)?.parse().map_err(|_| "--in-process ROUNDS")?;
                let client = Client::cpu()?;
                let sps = xlaclient::fleet::catch::in_process_steps_per_s(&client, rounds)?;
                println!("in_process_env_steps_per_s={sps:.0}");
                return Ok(());
            }
            "--dry-run" => {
                println!("{}", Settings::from_env()?.line());
                return Ok(());
            }
            "--actors" => {
                actors = value(i)?
                    .parse()
                    .ok()
                    .filter(|&n| (1..=64).contains(&n))
                    .ok_or("--actors: 1..=64")?;
                i += 1;
            }
            "--max-time" => {
                max_time = value(i)?
                    .parse()
                    .ok()
                    .filter(|&t: &f64| t > 0.0)
                    .ok_or("--max-time: seconds > 0")?;
                i += 1;
            }
            "--bench" => {
                max_time = value(i)?
                    .parse()
                    .ok()
                    .filter(|&t: &f64| t > 0.0)
                    .ok_or("--bench: seconds > 0")?;
                bench = true;
                i += 1;
            }
            "--epsilon" => {
                epsilon = value(i)?
                    .parse()
                    .ok()
                    .filter(|e| (0.0..=1.0).contains(e))
                    .ok_or("--epsilon: in [0, 1]")?;
                i += 1;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            a => return Err(format!("unknown argument {a}\n{USAGE}").into()),
        }
        i += 1;
    }

    let t0 = Instant::now();
    let store = std::env::temp_dir().join(format!("xlaclient-fleet-{}", std::process::id()));
    let server = NatsServer::start_local(&store)?;
    eprintln!(
        "nats-server on {} (store {})",
        server.url(),
        store.display()
    );
    let prefix = "catch";
    let exe = std::env::current_exe()?;
    let mut children: Vec<Child> = Vec::new();
    for k in 0..actors {
        children.push(
            Command::new(&exe)
                .arg("actor")
                .arg("--epsilon")
                .arg(epsilon.to_string())
                .env("XLACLIENT_FLEET_ROLE", "actor")
                .env("XLACLIENT_FLEET_ACTOR_INDEX", k.to_string())
                .env("XLACLIENT_FLEET_ACTORS", actors.to_string())
                .env("XLACLIENT_FLEET_PREFIX", prefix)
                .env("NATS_URL", server.url())
                .stdin(Stdio::null())
                .spawn()?,
        );
    }
    let opts = TransportOptions {
        prefix: prefix.into(),
        // About 150 trajectories of 109 KB, received or waiting: the learner acks
        // what it received only once a checkpoint holds it (every 0.2 s), so the
        // bound must cover that long of the actors' output, or it throttles them
        // to max_bytes per checkpoint (2 MiB per 0.5 s held them to ~20k env
        // steps/s, 16 MiB per 0.5 s to ~145k).
        max_bytes: 16 << 20,
        ..TransportOptions::default()
    };
    let result = (|| -> Res<_> {
        let tr = Transport::connect(&server.url(), opts, Duration::from_secs(20))?;
        let client = Client::cpu()?;
        let dir = Some(store.join("checkpoints"));
        let cfg = if bench {
            bench_config(dir, max_time)
        } else {
            learner_config(dir, max_time)
        };
        let mut learner = Learner::new(&client, cfg)?;
        Ok(learner.run(&tr)?)
    })();
    // The learner set the stop flag: the actors finish their round and exit.
    let deadline = Instant::now() + Duration::from_secs(20);
    for c in &mut children {
        loop {
            match c.try_wait()? {
                Some(_) => break,
                None if Instant::now() > deadline => {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&store);
    let r = result?;
    eprintln!(
        "{} actors, {:.1} s in all; train_steps={} version={} stale_dropped={} malformed={} drained={}",
        actors,
        t0.elapsed().as_secs_f64(),
        r.train_steps,
        r.version,
        r.stale_dropped,
        r.malformed,
        r.drained
    );
    let lags: Vec<String> = r
        .lag_histogram
        .iter()
        .map(|(l, n)| format!("{l}:{n}"))
        .collect();
    eprintln!(
        "policy lag histogram (versions behind: trajectories): {}",
        lags.join(" ")
    );
    println!("{r}");
    if r.eval < 1.0 {
        return Err(format!("greedy evaluation {} is below 1.0", r.eval).into());
    }
    if r.lost != 0 {
        return Err(format!("{} trajectories lost", r.lost).into());
    }
    Ok(())
}
