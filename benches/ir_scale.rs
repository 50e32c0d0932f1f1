//! How the typed IR scales: builds a graph of about 1,000,000 instructions (an
//! unrolled chain of element-wise steps, as an unrolled rollout and its gradient
//! produce), then finishes it into a verified module and lowers it to an
//! `HloModuleProto`. Prints the build, finish+verify and lower times, the
//! instruction count, and memory per instruction: the growth of the resident set
//! while the graph is held (from /proc/self/statm) divided by the instruction count.
//!
//! Run: `cargo bench --bench ir_scale` (optionally `-- 2000000` for another size).

use std::time::Instant;

use xlaclient::{Builder, Shape};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let target: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let base = rss_bytes();
    let t0 = Instant::now();
    let b = Builder::new("chain");
    let x = b.parameter(0, Shape::of::<f32>(&[8]), "x");
    let w = b.parameter(1, Shape::of::<f32>(&[8]), "w");
    let mut h = x.clone();
    // Each step: h = tanh(h * w + 0.5) - h / 4, i.e. 8 instructions (two scalar
    // constants, their two broadcasts, multiply, add, tanh, divide, subtract
    // minus the ones shared below): counted from the builder, not assumed.
    while b.instruction_count() < target {
        h = (&h * &w + 0.5).tanh() - &h / 4.0;
    }
    let build_s = t0.elapsed().as_secs_f64();
    let n = b.instruction_count();
    let graph_rss = rss_bytes().saturating_sub(base);

    let t1 = Instant::now();
    let m = b.build(&h).expect("build");
    let finish_s = t1.elapsed().as_secs_f64();
    let with_module_rss = rss_bytes().saturating_sub(base);

    let t2 = Instant::now();
    let bytes = m.to_bytes().len();
    let lower_s = t2.elapsed().as_secs_f64();
    let peak_rss = rss_bytes().saturating_sub(base);
    let t3 = Instant::now();
    let text = m.to_hlo_text().len();
    let text_s = t3.elapsed().as_secs_f64();

    println!("instructions              {n}");
    println!("build graph               {build_s:.3} s");
    println!("finish + verify           {finish_s:.3} s");
    println!(
        "lower + encode (streamed) {lower_s:.3} s ({:.1} MB serialized)",
        bytes as f64 / 1e6
    );
    println!(
        "HLO text                  {text_s:.3} s ({:.1} MB)",
        text as f64 / 1e6
    );
    println!(
        "graph memory              {:.0} bytes/instruction ({:.1} MB resident growth)",
        graph_rss as f64 / n as f64,
        graph_rss as f64 / 1e6
    );
    println!(
        "graph + finished module   {:.0} bytes/instruction",
        with_module_rss as f64 / n as f64
    );
    println!(
        "after lowering            {:.0} bytes/instruction ({:.1} MB resident growth)",
        peak_rss as f64 / n as f64,
        peak_rss as f64 / 1e6
    );
}
