//! Compile time of real programs, for the side-by-side with JAX in
//! `bench/compile_time_vs_jax.sh` (which runs this once per program and repetition,
//! alternating with `bench/compile_time_jax.py` on the same programs).
//!
//! Programs (the JAX script builds the same ones):
//!   - `reset4`: gymnax's CartPole reset for 4 environments (split a key, split one
//!     half into a key per environment, a `uniform(4)` from each, stacked, columns
//!     sliced back out); `reset64` the same for 64;
//!   - `samplers`: eight samplers from eight split keys (uniform, normal,
//!     bernoulli, randint, categorical, truncated normal, gumbel, permutation);
//!   - `rnn_grad`: a 100-step tanh RNN scanned over a sequence, loss and gradient
//!     through the scan;
//!   - `anakin`: the Anakin Catch learner (`xlaclient::rl::anakin`, the notebook's
//!     layout), whose JAX side is `../shared/bench-anchors/jax_anakin_catch.py`;
//!   - `ppo_init`, `ppo_update`: PureJaxRL's PPO on CartPole (`xlaclient::rl::ppo`,
//!     the default configuration): the init program, and the update program of
//!     `updates_per_call` (122) updates, as in `examples/ppo_cartpole.rs` (its JAX
//!     side is `bench/ppo_cartpole_jax.py`'s `init` and a `lax.scan` of 122
//!     `update`s).
//!
//! Prints `program=<name> build_s=<trace and lower> compile_s=<XLA> total_s=<sum>`.
//! The compilation cache is off: every compile compiles.
//!
//!   cargo bench --bench compile_time -- [PROGRAM ...]     (default: all)

use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;

use xlaclient::rl::anakin::{Anakin, AnakinConfig};
use xlaclient::rl::ppo::{self, PpoConfig, PpoState};
use xlaclient::{
    Builder, Client, ClientOptions, CompileCache, Computation, ElementType, Op, Plugin, Shape, Tree,
};

const PROGRAMS: [&str; 7] = [
    "reset4",
    "reset64",
    "samplers",
    "rnn_grad",
    "anakin",
    "ppo_init",
    "ppo_update",
];

/// The PPO init program (PureJaxRL's CartPole configuration).
fn ppo_init() -> xlaclient::Result<Computation> {
    let b = Builder::new("ppo_init");
    let s = ppo::init_state(&b, &PpoConfig::default());
    b.build_tuple(&s.leaves())
}

/// The PPO update program: `updates_per_call` updates of a state given as
/// parameters.
fn ppo_update() -> xlaclient::Result<Computation> {
    let c = PpoConfig::default();
    let spec: PpoState<Shape> = {
        let b = Builder::new("ppo_spec");
        ppo::init_state(&b, &c).map_ref(|o: &Op| o.shape().expect("the init program's shapes"))
    };
    let b = Builder::new("ppo_update");
    let mut i = 0;
    let s = spec.map_ref(|shape: &Shape| {
        i += 1;
        b.parameter(i - 1, shape.clone(), "state")
    });
    let (s, m) = ppo::updates(&c, s);
    let mut outs = s.leaves();
    outs.extend(m.leaves());
    b.build_tuple(&outs)
}

/// Row `i` of a `[n, 2]` array of keys.
fn key_row(keys: &Op, i: i64) -> Op {
    keys.slice(&[i, 0], &[i + 1, 2], &[1, 1]).reshape(&[2])
}

fn samplers() -> xlaclient::Result<Computation> {
    let b = Builder::new("samplers");
    let key = b.parameter(0, Shape::of::<u32>(&[2]), "key");
    let logits = b.parameter(1, Shape::of::<f32>(&[32, 6]), "logits");
    let ks = key.random_split(8);
    let k = |i| key_row(&ks, i);
    let outs = [
        k(0).uniform(&[64, 64], ElementType::F32, 0.0, 1.0),
        k(1).normal(&[64, 64], ElementType::F32),
        k(2).bernoulli(0.3, &[256]).convert(ElementType::F32),
        k(3).randint(&[128], 0, 10).convert(ElementType::F32),
        k(4).categorical(&logits, 1).convert(ElementType::F32),
        k(5).truncated_normal(-2.0, 2.0, &[128]),
        k(6).gumbel(&[64], ElementType::F32),
        k(7).permutation(100).convert(ElementType::F32),
    ];
    let refs: Vec<&Op> = outs.iter().collect();
    b.build_tuple(&refs)
}

fn rnn_grad() -> xlaclient::Result<Computation> {
    let (t, batch, d_in, d_h) = (100, 8, 32, 64);
    let b = Builder::new("rnn_grad");
    let wx = b.parameter(0, Shape::of::<f32>(&[d_in, d_h]), "wx");
    let wh = b.parameter(1, Shape::of::<f32>(&[d_h, d_h]), "wh");
    let xs = b.parameter(2, Shape::of::<f32>(&[t, batch, d_in]), "xs");
    let h0 = b.zeros(ElementType::F32, &[batch, d_h]);
    let (loss, (), (gx, gh)) = b.value_and_grad((wx, wh), |(wx, wh)| {
        let (_h, ys) = b.scan(h0.clone(), xs.clone(), |h, x| {
            let h = (&x.matmul(&wx) + &h.matmul(&wh)).tanh();
            (h.clone(), h)
        });
        (ys.square().mean(&[0, 1, 2], false), ())
    });
    b.build_tuple(&[&loss, &gx, &gh])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let chosen: Vec<&str> = if args.is_empty() {
        PROGRAMS.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    let plugin = Plugin::default_plugin()?;
    let client = Client::new(
        &plugin,
        &ClientOptions::new().compile_cache(CompileCache::Off),
    )?;
    for name in chosen {
        let t0 = Instant::now();
        let (build_s, compile_s) = if name == "anakin" {
            let a = Anakin::new(&client, AnakinConfig::default())?;
            let total = t0.elapsed().as_secs_f64();
            (total - a.compile_s(), a.compile_s())
        } else {
            let m = match name {
                "reset4" => common::gymnax_reset(4, false)?,
                "reset64" => common::gymnax_reset(64, false)?,
                "samplers" => samplers()?,
                "rnn_grad" => rnn_grad()?,
                "ppo_init" => ppo_init()?,
                "ppo_update" => ppo_update()?,
                other => {
                    eprintln!("unknown program {other}; one of {PROGRAMS:?}");
                    std::process::exit(2);
                }
            };
            let bytes = m.to_bytes();
            let build_s = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            client.compile(&m)?;
            let _ = bytes;
            (build_s, t1.elapsed().as_secs_f64())
        };
        println!(
            "program={name} build_s={build_s:.3} compile_s={compile_s:.3} total_s={:.3}",
            build_s + compile_s
        );
    }
    Ok(())
}
