//! The README's main example: a policy MLP (50 → 256 → relu → 3) built with the
//! graph builder, compiled and run on the CPU plugin for a batch of 64 observations,
//! and checked against the same forward pass computed in plain Rust.
//!
//! Run: `cargo run --release --example mlp` (fetches the CPU plugin on first use).
//! The last line printed is `max_abs_err=<value>`.

use xlaclient::{Builder, Client, Computation, Shape};

const OBS: usize = 50;
const HID: usize = 256;
const ACT: usize = 3;
const BATCH: usize = 64;

/// The policy network: `relu(obs @ w1 + b1) @ w2 + b2`.
fn policy(batch: usize) -> xlaclient::Result<Computation> {
    let b = Builder::new("mlp_policy");
    let w1 = b.parameter(0, Shape::of::<f32>(&[OBS as i64, HID as i64]), "w1");
    let b1 = b.parameter(1, Shape::of::<f32>(&[HID as i64]), "b1");
    let w2 = b.parameter(2, Shape::of::<f32>(&[HID as i64, ACT as i64]), "w2");
    let b2 = b.parameter(3, Shape::of::<f32>(&[ACT as i64]), "b2");
    let obs = b.parameter(4, Shape::of::<f32>(&[batch as i64, OBS as i64]), "obs");
    let hidden = (obs.matmul(&w1) + &b1).relu();
    let logits = hidden.matmul(&w2) + &b2;
    b.build(&logits)
}

/// A small deterministic generator (SplitMix64), so the example needs no crates.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale).collect()
    }
}

/// The same forward pass in plain Rust.
fn reference(
    w1: &[f32],
    b1: &[f32],
    w2: &[f32],
    b2: &[f32],
    obs: &[f32],
    batch: usize,
) -> Vec<f32> {
    let mut out = vec![0.0f32; batch * ACT];
    let mut h = vec![0.0f32; HID];
    for r in 0..batch {
        for (j, hj) in h.iter_mut().enumerate() {
            let mut s = b1[j];
            for k in 0..OBS {
                s += obs[r * OBS + k] * w1[k * HID + j];
            }
            *hj = s.max(0.0);
        }
        for a in 0..ACT {
            let mut s = b2[a];
            for (j, hj) in h.iter().enumerate() {
                s += hj * w2[j * ACT + a];
            }
            out[r * ACT + a] = s;
        }
    }
    out
}

fn main() -> xlaclient::Result<()> {
    let module = policy(BATCH)?;
    let client = Client::cpu()?;
    println!(
        "platform {} via {} (PJRT C API {}.{})",
        client.platform_name()?,
        client.plugin().path().display(),
        client.plugin().api_version().0,
        client.plugin().api_version().1
    );
    let exe = client.compile(&module)?;

    let mut rng = Rng(42);
    let w1 = rng.vec(OBS * HID, (1.0 / OBS as f32).sqrt());
    let b1 = rng.vec(HID, 0.1);
    let w2 = rng.vec(HID * ACT, (1.0 / HID as f32).sqrt());
    let b2 = rng.vec(ACT, 0.1);
    let obs = rng.vec(BATCH * OBS, 1.0);

    // Parameters stay resident on the device; only observations travel per call.
    let params = [
        client.buffer_from_host(&w1, &[OBS as i64, HID as i64])?,
        client.buffer_from_host(&b1, &[HID as i64])?,
        client.buffer_from_host(&w2, &[HID as i64, ACT as i64])?,
        client.buffer_from_host(&b2, &[ACT as i64])?,
    ];
    let obs_buf = client.buffer_from_host(&obs, &[BATCH as i64, OBS as i64])?;
    let out = exe.execute(&[&params[0], &params[1], &params[2], &params[3], &obs_buf])?;
    let got = out[0].to_vec::<f32>()?;

    let want = reference(&w1, &b1, &w2, &b2, &obs, BATCH);
    let max_abs_err = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    println!("logits[0] = {:?}", &got[..ACT]);
    println!("reference = {:?}", &want[..ACT]);
    println!("max_abs_err={max_abs_err:e}");
    if got.len() != want.len() || max_abs_err > 1e-4 {
        eprintln!("mismatch: {} outputs, max_abs_err {max_abs_err}", got.len());
        std::process::exit(1);
    }
    Ok(())
}
