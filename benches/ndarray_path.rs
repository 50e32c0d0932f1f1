//! The cost of the `ndarray` path against the flat-slice path, side by side in
//! one process: one round trip = upload an f32 `[B, 64]` array to the default
//! device and read it back on the host, at B = 1 and B = 1024. Paths:
//!   - `flat`: `Client::buffer_from_host(&[f32], &dims)` + `Buffer::to_vec`;
//!   - `ndarray`: `Client::buffer_from_array(&Array2)` (standard layout: uploaded
//!     from the array's own slice) + `Buffer::to_array::<f32, Ix2>()`;
//!   - `ndarray-t`: the same from a transposed view (`a.t()` of a `[64, B]`
//!     array: copied into row-major order first) + `to_array`.
//!
//! The paths run alternately, in rounds of 25 calls per path with the order
//! rotated each round. Prints the load average before and after, one line per
//! path and batch (`batch=… path=… calls=… min_us=… median_us=…`), and the
//! median ratios to `flat`.
//!
//! Run: `cargo bench --features ndarray --bench ndarray_path`. Environment:
//! `CALLS` (timed round trips per path and batch, default 2000; a quarter at
//! B = 1024), `PJRT_PLUGIN_PATH` (another plugin).

use std::time::Instant;

use ndarray::{Array2, Ix2};
use xlaclient::{Client, ClientOptions, Plugin};

const COLS: usize = 64;
const BLOCK: usize = 25;
type R<T> = Result<T, Box<dyn std::error::Error>>;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> R<()> {
    let calls: usize = std::env::var("CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let plugin = Plugin::default_plugin()?;
    let client = Client::new(&plugin, &ClientOptions::new())?;
    println!(
        "plugin {} | load before {}",
        plugin.path().display(),
        load()
    );
    let paths = ["flat", "ndarray", "ndarray-t"];
    for batch in [1usize, 1024] {
        let n = if batch >= 1024 { calls / 4 } else { calls }.max(BLOCK);
        let values: Vec<f32> = (0..batch * COLS).map(|i| i as f32 * 0.25).collect();
        let a = Array2::from_shape_vec((batch, COLS), values.clone())?;
        // [64, B] in the standard layout (`to_owned` would keep the view's
        // Fortran order); its `.t()` is [B, 64] with strides (1, B): not standard.
        let t_src = a.t().as_standard_layout().into_owned();
        assert!(batch == 1 || !t_src.t().is_standard_layout());
        let dims = [batch as i64, COLS as i64];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
        let mut checksum = 0.0f64;
        // One untimed round to warm every path.
        let mut run = |p: usize, record: bool, times: &mut Vec<Vec<f64>>| -> R<()> {
            let start = Instant::now();
            let last = match p {
                0 => {
                    let b = client.buffer_from_host(&values, &dims)?;
                    *b.to_vec::<f32>()?.last().unwrap_or(&0.0)
                }
                1 => {
                    let b = client.buffer_from_array(&a)?;
                    *b.to_array::<f32, Ix2>()?.last().unwrap_or(&0.0)
                }
                _ => {
                    let b = client.buffer_from_array(&t_src.t())?;
                    *b.to_array::<f32, Ix2>()?.last().unwrap_or(&0.0)
                }
            };
            let us = start.elapsed().as_secs_f64() * 1e6;
            checksum += last as f64;
            if record {
                times[p].push(us);
            }
            Ok(())
        };
        for p in 0..paths.len() {
            run(p, false, &mut times)?;
        }
        let mut round = 0;
        while times[0].len() < n {
            for k in 0..paths.len() {
                let p = (k + round) % paths.len();
                for _ in 0..BLOCK {
                    run(p, true, &mut times)?;
                }
            }
            round += 1;
        }
        let mut medians = Vec::new();
        for (p, name) in paths.iter().enumerate() {
            let t = &mut times[p];
            let min = t.iter().cloned().fold(f64::INFINITY, f64::min);
            let med = median(t);
            medians.push(med);
            println!(
                "batch={batch} path={name} calls={} min_us={min:.2} median_us={med:.2}",
                t.len()
            );
        }
        println!(
            "batch={batch} ratio ndarray/flat={:.3} ndarray-t/flat={:.3} (checksum {checksum})",
            medians[1] / medians[0],
            medians[2] / medians[0]
        );
    }
    println!("load after {}", load());
    Ok(())
}
