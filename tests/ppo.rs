//! CartPole on the device and PPO (`xlaclient::rl::{cartpole, ppo}`): the device
//! CartPole against the plain-Rust one for the same actions and resets; the init
//! program and three PPO updates against the values recorded from
//! `bench/ppo_cartpole_jax.py --record tests/data/jax` (jax 0.10.2, optax); bad
//! configurations refused with errors naming the field.

mod common;

use common::{Rng, client};
use serde_json::Value;
use xlaclient::rl::cartpole::{self, CartPole};
use xlaclient::rl::ppo::{Ppo, PpoConfig, PpoState};
use xlaclient::{Buffer, ClientExt, Op, Shape};

#[test]
fn device_cartpole_equals_the_host_cartpole_for_the_same_actions() {
    let (batch, steps) = (5i64, 300i64);
    let mut rng = Rng(11);
    let mut unif = |n: i64| -> Vec<f32> {
        (0..n)
            .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 0.1 - 0.05)
            .collect()
    };
    let starts = unif(batch * 4);
    let resets = unif(steps * batch * 4);
    let mut rng = Rng(12);
    let actions: Vec<i32> = (0..steps * batch)
        .map(|t| {
            // Mostly alternating pushes (long episodes, some reaching the time
            // limit would need 500 steps), with random runs that tip the pole.
            let r = rng.next_u64();
            if r % 4 == 0 {
                (r >> 8) as i32 & 1
            } else {
                (t / batch) as i32 & 1
            }
        })
        .collect();
    let spec = (
        Shape::of::<f32>(&[batch, 4]),
        Shape::of::<i32>(&[steps, batch]),
        Shape::of::<f32>(&[steps, batch, 4]),
    );
    let run = client()
        .jit("cartpole_steps", &spec, |b, (start, a, r): (Op, Op, Op)| {
            let init = cartpole::from_rows(&start);
            let (_, (obs, rewards, dones)) = b.scan(init, (a, r), |s, (a, r)| {
                let (next, obs, reward, done) = cartpole::step(&s, &a, &r);
                (
                    next,
                    (obs, reward, done.convert(xlaclient::ElementType::S32)),
                )
            });
            (obs, rewards, dones)
        })
        .expect("compile");
    let args = (
        client().buffer_from_host(&starts, &[batch, 4]).unwrap(),
        client()
            .buffer_from_host(&actions, &[steps, batch])
            .unwrap(),
        client()
            .buffer_from_host(&resets, &[steps, batch, 4])
            .unwrap(),
    );
    let (obs, rewards, dones) = run.call(&args).expect("run");
    let (obs, rewards, dones) = (
        obs.to_vec::<f32>().unwrap(),
        rewards.to_vec::<f32>().unwrap(),
        dones.to_vec::<i32>().unwrap(),
    );
    let (mut episodes, mut worst) = (0, 0f32);
    for e in 0..batch as usize {
        let mut env = CartPole::new(starts[e * 4..e * 4 + 4].try_into().unwrap());
        for t in 0..steps as usize {
            let i = t * batch as usize + e;
            let reset: [f32; 4] = resets[i * 4..i * 4 + 4].try_into().unwrap();
            let (r, done) = env.step(actions[i] as u32, reset);
            assert_eq!(
                (rewards[i], dones[i] != 0),
                (r, done),
                "env {e} step {t}: reward and done"
            );
            for k in 0..4 {
                let d = (obs[i * 4 + k] - env.state[k]).abs();
                worst = worst.max(d);
                assert!(
                    d <= 1e-5 * (1.0 + env.state[k].abs()),
                    "env {e} step {t} value {k}: device {} host {}",
                    obs[i * 4 + k],
                    env.state[k]
                );
            }
            episodes += done as usize;
        }
    }
    // Random-ish pushes end many episodes in 300 steps; the resets were exercised.
    assert!(episodes >= 2 * batch as usize, "{episodes} episodes ended");
    eprintln!("{episodes} episodes, worst |device - host| = {worst:e}");
}

#[test]
fn host_cartpole_terminates_on_each_limit() {
    // Far right: terminal at once; the reward of a step from it is 0.
    let mut env = CartPole::new([2.5, 0.0, 0.0, 0.0]);
    assert!(env.is_terminal());
    assert_eq!(env.step(1, [0.01; 4]), (0.0, true));
    assert_eq!(env.state, [0.01; 4]);
    // Tilted past 12°.
    let env = CartPole::new([0.0, 0.0, -0.21, 0.0]);
    assert!(env.is_terminal());
    // Balanced forever by alternating pushes from the upright state: the time limit.
    let mut env = CartPole::new([0.0; 4]);
    let mut t = 0;
    loop {
        t += 1;
        let a = if env.state[2] + 0.1 * env.state[3] > 0.0 {
            1
        } else {
            0
        };
        let (r, done) = env.step(a, [0.0; 4]);
        assert_eq!(r, 1.0);
        if done {
            break;
        }
        assert!(t < 1000);
    }
    assert_eq!(t, cartpole::MAX_STEPS);
}

fn record(name: &str) -> Value {
    let path = format!("{}/tests/data/jax/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("read the recording"))
        .expect("parse")
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn config_of(rec: &Value) -> PpoConfig {
    let c = &rec["config"];
    let i = |k: &str| c[k].as_i64().unwrap();
    let f = |k: &str| c[k].as_f64().unwrap();
    PpoConfig {
        lr: f("LR"),
        num_envs: i("NUM_ENVS"),
        num_steps: i("NUM_STEPS"),
        total_timesteps: i("TOTAL_TIMESTEPS"),
        update_epochs: i("UPDATE_EPOCHS"),
        num_minibatches: i("NUM_MINIBATCHES"),
        gamma: f("GAMMA"),
        gae_lambda: f("GAE_LAMBDA"),
        clip_eps: f("CLIP_EPS"),
        ent_coef: f("ENT_COEF"),
        vf_coef: f("VF_COEF"),
        max_grad_norm: f("MAX_GRAD_NORM"),
        anneal_lr: c["ANNEAL_LR"].as_bool().unwrap(),
        hidden: i("HIDDEN"),
        seed: rec["seed"].as_u64().unwrap() as u32,
        updates_per_call: 1,
    }
}

/// The parameters of `s` by the recording's names, downloaded.
fn params_of(s: &PpoState<Buffer>) -> Vec<(String, Vec<f32>)> {
    let mut out = Vec::new();
    for (net, layers) in [("actor", &s.params.actor), ("critic", &s.params.critic)] {
        for (i, l) in layers.iter().enumerate() {
            out.push((format!("{net}_{i}_w"), l.w.to_vec::<f32>().unwrap()));
            out.push((format!("{net}_{i}_b"), l.b.to_vec::<f32>().unwrap()));
        }
    }
    out
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn env_of(s: &PpoState<Buffer>) -> Vec<(&'static str, Vec<f32>)> {
    vec![
        ("x", s.env.x.to_vec::<f32>().unwrap()),
        ("x_dot", s.env.x_dot.to_vec::<f32>().unwrap()),
        ("theta", s.env.theta.to_vec::<f32>().unwrap()),
        ("theta_dot", s.env.theta_dot.to_vec::<f32>().unwrap()),
        (
            "time",
            s.env
                .time
                .to_vec::<i32>()
                .unwrap()
                .into_iter()
                .map(|t| t as f32)
                .collect(),
        ),
    ]
}

/// The init program, then three updates from JAX's initial parameters, against
/// the recording.
fn check_against_jax(name: &str) {
    let rec = record(name);
    let config = config_of(&rec);
    let ppo = Ppo::new(client(), config).expect("build");
    let mut state = ppo.init().expect("init");
    // The init program: environments and key bit-equal to JAX's (threefry and
    // uniform are); the parameters to QR's rounding (orthogonal in f32).
    for (k, v) in env_of(&state) {
        assert_eq!(v, floats(&rec["init_env"][k]), "initial env {k}");
    }
    let key: Vec<u32> = state.key.to_vec::<u32>().unwrap();
    let want: Vec<u32> = rec["init_rng"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(key, want, "initial rollout key");
    for (k, v) in params_of(&state) {
        let d = max_diff(&v, &floats(&rec["init_params"][&k]));
        assert!(d <= 1e-5, "initial {k}: max |ours - JAX| = {d:e}");
    }
    // Start from JAX's parameters exactly.
    let up = |k: String, b: &Buffer| {
        let dims = b.shape().unwrap().dims().to_vec();
        client()
            .buffer_from_host(&floats(&rec["init_params"][&k]), &dims)
            .unwrap()
    };
    for (net, layers) in [
        ("actor", &mut state.params.actor),
        ("critic", &mut state.params.critic),
    ] {
        for (i, l) in layers.iter_mut().enumerate() {
            l.w = up(format!("{net}_{i}_w"), &l.w);
            l.b = up(format!("{net}_{i}_b"), &l.b);
        }
    }
    for (u, want) in rec["updates"].as_array().unwrap().iter().enumerate() {
        let (next, metrics) = ppo.step(state).expect("update");
        state = next;
        let worst = params_of(&state)
            .into_iter()
            .map(|(k, v)| max_diff(&v, &floats(&want["params"][&k])))
            .fold(0.0, f32::max);
        eprintln!(
            "{name}: update {} max |ours - JAX| over parameters {worst:e}",
            u + 1
        );
        assert!(
            worst <= 1e-5,
            "update {}: parameters differ by {worst:e}",
            u + 1
        );
        for (k, v) in env_of(&state) {
            let d = max_diff(&v, &floats(&want["env"][k]));
            assert!(d <= 1e-5, "update {}: env {k} differs by {d:e}", u + 1);
        }
        let key: Vec<u32> = state.key.to_vec::<u32>().unwrap();
        let want_key: Vec<u32> = want["rng"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(key, want_key, "update {}: key", u + 1);
        let ret = metrics.mean_return.to_vec::<f32>().unwrap();
        let loss = metrics.loss.to_vec::<f32>().unwrap();
        let (jr, jl) = (
            want["mean_return"].as_f64().unwrap() as f32,
            want["loss"].as_f64().unwrap() as f32,
        );
        assert!(
            (ret[0] - jr).abs() <= 1e-4,
            "update {}: return {} JAX {jr}",
            u + 1,
            ret[0]
        );
        assert!(
            (loss[0] - jl).abs() <= 1e-4 * (1.0 + jl.abs()),
            "update {}: loss {} JAX {jl}",
            u + 1,
            loss[0]
        );
    }
}

#[test]
fn ppo_updates_match_jax_with_a_constant_learning_rate() {
    check_against_jax("ppo_small_const");
}

#[test]
fn ppo_updates_match_jax_with_the_annealed_learning_rate() {
    check_against_jax("ppo_small_anneal");
}

#[test]
fn bad_configurations_are_errors_naming_the_field() {
    let small = PpoConfig {
        num_steps: 16,
        total_timesteps: 640,
        hidden: 8,
        updates_per_call: 1,
        ..PpoConfig::default()
    };
    let cases: [(PpoConfig, &str, &str); 5] = [
        (
            PpoConfig {
                num_minibatches: 3,
                ..small.clone()
            },
            "num_minibatches",
            "does not divide num_envs × num_steps = 4 × 16 = 64",
        ),
        (
            PpoConfig {
                num_envs: 0,
                ..small.clone()
            },
            "num_envs",
            "at least 1",
        ),
        (
            PpoConfig {
                total_timesteps: 10,
                ..small.clone()
            },
            "total_timesteps",
            "fewer than one update",
        ),
        (
            PpoConfig {
                clip_eps: f64::NAN,
                ..small.clone()
            },
            "clip_eps",
            "finite",
        ),
        (
            PpoConfig {
                update_epochs: -2,
                ..small.clone()
            },
            "update_epochs",
            "is -2",
        ),
    ];
    for (config, field, says) in cases {
        let err = match Ppo::new(client(), config) {
            Ok(_) => panic!("{field}: accepted"),
            Err(e) => e,
        };
        match &err {
            xlaclient::rl::Error::InvalidArgument { what, reason } => {
                assert_eq!(*what, field);
                assert!(reason.contains(says), "{field}: {reason}");
            }
            other => panic!("{field}: {other}"),
        }
    }
}

/// `ppo::update` writes its samplers with Threefry unrolled (the programs above
/// check that this computes JAX's bits) and leaves the builder's own setting as
/// it found it, either way.
#[test]
fn update_leaves_the_builders_threefry_setting_as_it_found_it() {
    let config = PpoConfig {
        num_envs: 2,
        num_steps: 4,
        total_timesteps: 8,
        update_epochs: 1,
        num_minibatches: 2,
        hidden: 4,
        updates_per_call: 1,
        ..PpoConfig::default()
    };
    for before in [false, true] {
        let b = xlaclient::Builder::new("ppo_threefry_setting");
        b.unroll_threefry(before);
        let s = xlaclient::rl::ppo::init_state(&b, &config);
        let (next, metrics) = xlaclient::rl::ppo::update(&config, s);
        assert_eq!(b.threefry_unrolled(), before, "setting after update");
        assert_eq!(metrics.loss.dims().unwrap(), Vec::<i64>::new());
        assert_eq!(next.key.dims().unwrap(), vec![2]);
    }
}
