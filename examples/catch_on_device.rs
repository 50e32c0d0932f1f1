//! Podracer's Catch environment (rows 10, columns 5) on the device: a batch of
//! environments stepped by a uniformly random policy for 1,000 steps inside one
//! compiled program (`scan` over steps, JAX's threefry PRNG for actions and resets).
//! Prints the mean terminal reward, checks it against a plain-Rust simulation of the
//! same policy (within 4 standard errors of the difference), the compile time, and
//! ends with `steps_per_s=<value>` (environment steps per second, compile excluded).
//!
//! Run: `cargo run --release --example catch_on_device [-- BATCH STEPS]`.

use std::time::Instant;

use xlaclient::{Builder, Client, Comparison, ElementType, Op};

const ROWS: i64 = 10;
const COLS: i64 = 5;

/// One step of every environment (the seed's `Catch.step` and `reward`), with the
/// action and a reset column from the step's random bits.
fn step(
    b: &Builder,
    key: &Op,
    t: &Op,
    (by, bx, px): (Op, Op, Op),
    batch: i64,
) -> ((Op, Op, Op), Op, Op) {
    let bits = key.threefry_fold_in(t).threefry_bits(&[2, batch]);
    let three = b.constant(3u32);
    let five = b.constant(COLS as u32);
    let action = bits
        .slice(&[0, 0], &[1, batch], &[1, 1])
        .reshape(&[batch])
        .rem(&three)
        .convert(ElementType::S32);
    let reset_x = bits
        .slice(&[1, 0], &[2, batch], &[1, 1])
        .reshape(&[batch])
        .rem(&five)
        .convert(ElementType::S32);
    let terminal = by.compare(&b.constant((ROWS - 1) as i32), Comparison::Eq);
    let caught = bx.compare(&px, Comparison::Eq);
    let one = b.constant(1f32);
    let reward = b.select(
        &terminal,
        &b.select(&caught, &one, &(-&one)),
        &b.constant(0f32),
    );
    let moved = (&px + &action - 1)
        .max(&b.constant(0i32))
        .min(&b.constant((COLS - 1) as i32));
    let next = (
        b.select(&terminal, &b.constant(0i32), &(&by + 1)),
        b.select(&terminal, &reset_x, &bx),
        b.select(&terminal, &b.constant((COLS / 2) as i32), &moved),
    );
    (next, reward, terminal.convert(ElementType::S32))
}

/// The rollout: `steps` steps of `batch` environments, each starting as the seed's
/// `initial_state` (ball on the top row of a random column, paddle in the middle);
/// returns the sum of terminal rewards and the number of terminal states seen.
fn program(batch: i64, steps: i64) -> xlaclient::Result<xlaclient::Computation> {
    let b = Builder::new("catch");
    let seed = b.parameter(0, xlaclient::Shape::of::<u32>(&[2]), "key");
    let start_key = seed.threefry_fold_in(&b.constant(u32::MAX));
    let start_x = start_key
        .threefry_bits(&[batch])
        .rem(&b.constant(COLS as u32))
        .convert(ElementType::S32);
    let init = (
        b.constant(0u32),
        (
            b.zeros(ElementType::S32, &[batch]),
            start_x,
            b.full(ElementType::S32, &[batch], (COLS / 2) as f64),
        ),
        b.constant(0f32),
        b.constant(0i32),
    );
    let ((_, _, total, count), ()) = b.scan_with(
        init,
        (),
        &xlaclient::ScanOptions::new().length(steps),
        |(t, state, total, count), ()| {
            let (next, reward, terminal) = step(&t.builder(), &seed, &t, state, batch);
            (
                (
                    &t + 1,
                    next,
                    total + reward.reduce_sum(&[0]),
                    count + terminal.reduce_sum(&[0]),
                ),
                (),
            )
        },
    );
    b.build_tuple(&[&total, &count])
}

/// The same policy in plain Rust (SplitMix64 for the random choices): the mean
/// terminal reward over `episodes` episodes.
fn reference(episodes: u64) -> (f64, u64) {
    let mut s = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut total = 0i64;
    for _ in 0..episodes {
        let bx = (next() % COLS as u64) as i64;
        let mut px = COLS / 2;
        for _ in 0..ROWS - 1 {
            let a = (next() % 3) as i64;
            px = (px + a - 1).clamp(0, COLS - 1);
        }
        total += if bx == px { 1 } else { -1 };
    }
    (total as f64 / episodes as f64, episodes)
}

fn main() -> xlaclient::Result<()> {
    let args: Vec<i64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (batch, steps) = (
        *args.first().unwrap_or(&1024),
        *args.get(1).unwrap_or(&1000),
    );
    let client = Client::cpu()?;
    let module = program(batch, steps)?;
    let t0 = Instant::now();
    let exe = client.compile(&module)?;
    let compile_s = t0.elapsed().as_secs_f64();
    let key = client.buffer_from_host(&[0u32, 42], &[2])?;
    // Warm up once, then time a few runs.
    exe.execute_sync(&[&key])?;
    let runs = 3;
    let t1 = Instant::now();
    let mut last = Vec::new();
    for _ in 0..runs {
        last = exe.execute_sync(&[&key])?;
    }
    let run_s = t1.elapsed().as_secs_f64() / runs as f64;
    let total = last[0].to_scalar::<f32>()? as f64;
    let count = last[1].to_scalar::<i32>()? as u64;
    let mean = total / count as f64;
    let (want, n) = reference(200_000);
    // Each terminal reward is ±1: variance 1 - mean². Episodes of one environment
    // are independent, so the standard error of the difference is:
    let se = ((1.0 - mean * mean) / count as f64 + (1.0 - want * want) / n as f64).sqrt();
    println!("batch={batch} steps={steps} terminal_states={count}");
    println!("mean terminal reward on the device: {mean:.4}");
    println!(
        "plain-Rust simulation ({n} episodes): {want:.4} (difference {:.4}, tolerance 4 standard errors = {:.4})",
        mean - want,
        4.0 * se
    );
    println!("compile_s={compile_s:.3}");
    if (mean - want).abs() > 4.0 * se {
        eprintln!("the device's mean terminal reward disagrees with the reference");
        std::process::exit(1);
    }
    println!("steps_per_s={:.0}", (batch * steps) as f64 / run_s);
    Ok(())
}
