//! Compile time of long chains of adds (`y = y + x`, N times): the graph is as deep
//! as it is long, which XLA's recursive passes need stack for (see
//! `xlaclient::pjrt::COMPILE_STACK`). Prints one line per N.
//!
//! `cargo run --release --example deep_graph -- 10000 100000`; the plugin is
//! `PJRT_PLUGIN_PATH` or the default CPU plugin.

use std::time::Instant;

use xlaclient::{Builder, Client, Shape};

fn main() -> xlaclient::Result<()> {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a count of adds"))
        .collect();
    let counts = if counts.is_empty() {
        vec![10_000, 100_000]
    } else {
        counts
    };
    let client = Client::cpu()?;
    let (major, minor) = client.plugin().api_version();
    for n in counts {
        let t = Instant::now();
        let b = Builder::new("chain");
        let x = b.parameter(0, Shape::of::<f32>(&[]), "x");
        let mut y = x.clone();
        for _ in 0..n {
            y = &y + &x;
        }
        let m = b.build(&y)?;
        let build = t.elapsed();
        let t = Instant::now();
        let exe = client.compile(&m)?;
        let compile = t.elapsed();
        let out = exe.execute(&[&client.scalar(1.0f32)?])?[0].to_scalar::<f32>()?;
        assert_eq!(out, (n + 1) as f32);
        println!(
            "PJRT C API {major}.{minor}: {n} chained adds: build {:.3} s, compile {:.3} s",
            build.as_secs_f64(),
            compile.as_secs_f64()
        );
    }
    Ok(())
}
