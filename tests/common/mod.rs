//! Shared test harness: one client of the plugin under test per test binary.
//!
//! The plugin is `PJRT_PLUGIN_PATH` when set, else the pinned CPU plugin (fetched on
//! first use). Run the whole suite against another plugin with
//! `PJRT_PLUGIN_PATH=/path/to/plugin.so cargo test`.

#![allow(dead_code)]

use std::sync::OnceLock;

use xlaclient::{Buffer, Client, ClientOptions, Computation, NativeType, Plugin};

/// The client every test shares (PJRT clients are thread-safe).
pub fn client() -> &'static Client {
    static C: OnceLock<Client> = OnceLock::new();
    C.get_or_init(|| {
        let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
        Client::new(&plugin, &ClientOptions::new().cpu_device_count(2)).expect("create a client")
    })
}

/// Uploads `data` with `dims` to the default device.
pub fn upload<T: NativeType>(data: &[T], dims: &[i64]) -> Buffer {
    client().buffer_from_host(data, dims).expect("upload")
}

/// Compiles `module`, runs it on `args`, returns the outputs.
pub fn run(module: &Computation, args: &[&Buffer]) -> Vec<Buffer> {
    let exe = client().compile(module).expect("compile");
    exe.execute(args).expect("execute")
}

/// Compiles and runs `module`, downloading its single output as `T`.
pub fn run1<T: NativeType>(module: &Computation, args: &[&Buffer]) -> Vec<T> {
    let out = run(module, args);
    assert_eq!(out.len(), 1, "expected one output");
    out[0].to_vec::<T>().expect("download")
}

/// The products of `module`'s optimized form (compiled by the plugin under test):
/// each one's name and dimension numbers.
pub fn optimized_products(
    module: &Computation,
) -> Vec<(String, xlaclient::proto::DotDimensionNumbers)> {
    let exe = client().compile(module).expect("compile");
    let optimized = exe.optimized_module().expect("the optimized module");
    optimized
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .filter(|i| i.opcode == "dot")
        .filter_map(|i| Some((i.name.clone(), i.dot_dimension_numbers.clone()?)))
        .collect()
}

/// The names of the products in `module`'s optimized form that contract their
/// left operand's axis 0: XLA's CPU backend runs those outside its fast matrix
/// kernels (`benches/dot_layouts.rs`).
pub fn leading_axis_products(module: &Computation) -> Vec<String> {
    optimized_products(module)
        .into_iter()
        .filter(|(_, d)| d.lhs_contracting_dimensions == [0])
        .map(|(name, _)| name)
        .collect()
}

/// How many products of `module`, compiled and optimized, have batch axes.
pub fn batched_products(module: &Computation) -> usize {
    optimized_products(module)
        .iter()
        .filter(|(_, d)| !d.lhs_batch_dimensions.is_empty())
        .count()
}

/// A small deterministic generator (SplitMix64) for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Asserts two float slices agree within `tol` (absolute + relative).
pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length differs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan()) || g == w;
        assert!(ok, "element {i}: got {g}, want {w} (tol {tol})");
    }
}

// Index arithmetic and checked downloads shared by the op tests.

pub fn count(dims: &[i64]) -> usize {
    dims.iter().product::<i64>() as usize
}

/// Row-major multi-index of `flat` in `dims`.
pub fn unravel(mut flat: i64, dims: &[i64]) -> Vec<i64> {
    let mut idx = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        idx[k] = flat % dims[k];
        flat /= dims[k];
    }
    idx
}

pub fn ravel(idx: &[i64], dims: &[i64]) -> usize {
    idx.iter().zip(dims).fold(0, |a, (i, d)| a * d + i) as usize
}

/// Downloads a buffer after checking its element type and dims.
pub fn fetch<T: NativeType>(buf: &Buffer, dims: &[i64], what: &str) -> Vec<T> {
    assert_eq!(buf.element_type().unwrap(), T::TYPE, "{what}: element type");
    assert_eq!(buf.dims().unwrap(), dims, "{what}: dims");
    buf.to_vec::<T>().unwrap()
}

/// The value after `--name` on a command line (the long-form examples' flags).
pub fn flag_value(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The number after `--name`, or `default`; a value that is not a number stops the
/// example with a message naming the flag.
pub fn flag_number(args: &[String], name: &str, default: u64) -> u64 {
    flag_value(args, name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} takes a number, got {v}"))
    })
}

/// gymnax's CartPole reset for `envs` environments as a port writes it: split the
/// key, a key per environment from one half, a `uniform(4)` from each, stacked, the
/// four columns sliced back out; outputs the columns, then the other half (the next
/// key). `unrolled` writes Threefry's rounds out instead of looping
/// (`Builder::unroll_threefry`). Shared by tests/threefry.rs and the compile-time
/// bench.
pub fn gymnax_reset(envs: i64, unrolled: bool) -> xlaclient::Result<Computation> {
    use xlaclient::{Builder, ElementType, Op, Shape};
    let b = Builder::new("reset");
    b.unroll_threefry(unrolled);
    let key = b.parameter(0, Shape::of::<u32>(&[2]), "key");
    let row = |k: &Op, i: i64| k.slice(&[i, 0], &[i + 1, 2], &[1, 1]).reshape(&[2]);
    let [next, reset_key] = key.split_keys();
    let per_env = reset_key.random_split(envs);
    let draws: Vec<Op> = (0..envs)
        .map(|i| row(&per_env, i).uniform(&[4], ElementType::F32, -0.05, 0.05))
        .collect();
    let refs: Vec<&Op> = draws.iter().collect();
    let states = b.stack(&refs, 0);
    let cols: Vec<Op> = (0..4)
        .map(|j| {
            states
                .slice(&[0, j], &[envs, j + 1], &[1, 1])
                .reshape(&[envs])
        })
        .collect();
    let outs: Vec<&Op> = cols.iter().chain([&next]).collect();
    b.build_tuple(&outs)
}

/// Set in the child process of [`in_child`]: run the body instead of spawning.
const CHILD: &str = "XLACLIENT_TEST_CHILD";

/// Runs `body` in a child process (this test binary, `--exact name`) and asserts
/// that the child passed; in the child, runs `body`. A plugin abort then fails the
/// test with its signal instead of killing the run.
pub fn in_child(name: &str, body: impl FnOnce()) {
    in_child_with_env(name, &[], body);
}

/// [`in_child`] with the child's environment changed: each `(name, Some(value))`
/// set, each `(name, None)` removed.
pub fn in_child_with_env(name: &str, env: &[(&str, Option<&str>)], body: impl FnOnce()) {
    use std::os::unix::process::ExitStatusExt;
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    for (key, value) in env {
        match value {
            Some(v) => child.env(key, v),
            None => child.env_remove(key),
        };
    }
    let out = child.output().expect("re-run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail = |s: &str| s[s.len().saturating_sub(4000)..].to_string();
    match (out.status.code(), out.status.signal()) {
        (Some(0), _) => assert!(
            stdout.contains("1 passed"),
            "the child ran no test named {name}:\n{stdout}"
        ),
        (code, signal) => panic!(
            "{name} failed in its child process (exit code {code:?}, signal {signal:?}):\n\
             --- stdout ---\n{}\n--- stderr ---\n{}",
            tail(&stdout),
            tail(&stderr)
        ),
    }
}

/// The `shape` of an array recorded as `{dtype, shape, data}` JSON (the JAX
/// recordings in `tests/data`).
pub fn dims_of(a: &serde_json::Value) -> Vec<i64> {
    a["shape"]
        .as_array()
        .expect("a shape")
        .iter()
        .map(|d| d.as_i64().expect("a dimension"))
        .collect()
}

/// The `data` of such an array as `f64` (the strings "nan", "inf", "-inf" too).
pub fn data_of(a: &serde_json::Value) -> Vec<f64> {
    a["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| match v {
            serde_json::Value::String(s) if s == "nan" => f64::NAN,
            serde_json::Value::String(s) if s == "inf" => f64::INFINITY,
            serde_json::Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
            v => v.as_f64().expect("a number"),
        })
        .collect()
}
