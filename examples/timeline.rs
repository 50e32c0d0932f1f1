//! A compile-and-execute timeline from the runtime's `tracing` spans.
//!
//! `cargo run --example timeline [-- STEPS]` installs `tracing-subscriber`'s `fmt`
//! subscriber with span close events (each closing span prints how long it was
//! busy and idle), then loads the plugin, creates a client, compiles a small MLP
//! step and runs it `STEPS` times (default 3) with an upload and a download each.
//! `RUST_LOG`-style filtering is left out to keep the dependencies small: every
//! span and event of every level is printed.

use tracing_subscriber::fmt::format::FmtSpan;
use xlaclient::{Builder, Client, ClientOptions, Shape};

fn main() -> xlaclient::Result<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .map_or(3, |a| a.parse().expect("STEPS is a number"));
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();

    let plugin = xlaclient::Plugin::default_plugin()?;
    let client = Client::new(
        &plugin,
        &ClientOptions::new()
            .cpu_device_count(1)
            .compile_cache(xlaclient::pjrt::cache::CompileCache::Off),
    )?;

    // One dense layer and a tanh: y = tanh(x·W + b), x: [32, 128], W: [128, 128].
    let b = Builder::new("mlp_layer");
    let x = b.parameter(0, Shape::of::<f32>(&[32, 128]), "x");
    let w = b.parameter(1, Shape::of::<f32>(&[128, 128]), "w");
    let bias = b.parameter(2, Shape::of::<f32>(&[128]), "b");
    let y = (x.matmul(&w) + bias.broadcast_to(&[32, 128])).tanh();
    let exe = client.compile(b.build(&y)?)?;

    let w_host: Vec<f32> = (0..128 * 128)
        .map(|i| ((i % 17) as f32 - 8.0) / 64.0)
        .collect();
    let b_host = vec![0.1f32; 128];
    let wb = client.buffer_from_host(&w_host, &[128, 128])?;
    let bb = client.buffer_from_host(&b_host, &[128])?;
    let mut out = vec![0.0f32; 32 * 128];
    for step in 0..steps {
        let x_host: Vec<f32> = (0..32 * 128)
            .map(|i| ((i + step) % 13) as f32 / 13.0)
            .collect();
        let xb = client.buffer_from_host(&x_host, &[32, 128])?;
        let r = exe.execute(&[&xb, &wb, &bb])?;
        r[0].copy_to_host(&mut out)?;
    }
    let mean = out.iter().map(|v| f64::from(*v)).sum::<f64>() / out.len() as f64;
    println!("{steps} steps; mean of the last output {mean:.4}");
    Ok(())
}
