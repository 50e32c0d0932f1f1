//! `ClientOptions::worker_threads`: the CPU plugin's worker pool gets the number of
//! threads asked for, none of its threads (nor the caller) stays pinned, the numbers
//! a program computes are unchanged, and bad counts are errors.
//!
//! The thread counts are taken in a child process of this binary with `NPROC`
//! removed from its environment (the plugin follows `NPROC` when it is set) and no
//! other client alive.

mod common;

use std::collections::BTreeSet;

use common::in_child_with_env;
use xlaclient::{Builder, Client, ClientOptions, Plugin, RuntimeError, Shape};

/// This process's thread ids.
fn tids() -> BTreeSet<u32> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// A thread's name (its `comm`) and the CPUs it may run on (`Cpus_allowed_list`).
fn thread_info(tid: &str) -> Option<(String, String)> {
    let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim()
        .to_string();
    Some((comm.trim().to_string(), cpus))
}

/// The calling thread's CPUs (`Cpus_allowed_list`).
fn my_cpus() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// Makes a client with `options`; returns it, the number of XLA worker threads
/// (`tf_XLAEigen`) it started, and checks that the caller's CPU mask is unchanged
/// and that every thread it started may run on the caller's CPUs.
fn client_and_workers(options: &ClientOptions) -> (Client, usize) {
    let cpus = my_cpus();
    let before = tids();
    let client = Client::new(&Plugin::default_plugin().unwrap(), options).unwrap();
    assert_eq!(my_cpus(), cpus, "the caller's CPU mask was not restored");
    let mut workers = 0;
    for tid in tids().difference(&before) {
        let Some((name, allowed)) = thread_info(&tid.to_string()) else {
            continue;
        };
        assert_eq!(allowed, cpus, "thread {tid} ({name}) was left pinned");
        if name.contains("XLAEigen") {
            workers += 1;
        }
    }
    (client, workers)
}

/// The pool's size: the plugin's default (one worker per CPU), then `worker_threads`
/// 1, 2 and every CPU with one and four devices (at least one worker per device),
/// none of the threads pinned after the create or after a run. In a child process
/// with `NPROC` removed (the plugin follows it when set) and no other client alive.
#[test]
fn pool_size_follows_worker_threads() {
    let env = [("NPROC", None), ("XLACLIENT_COMPILE_CACHE", Some("0"))];
    in_child_with_env("pool_size_follows_worker_threads", &env, counts_workers);
}

fn counts_workers() {
    assert!(std::env::var_os("NPROC").is_none());
    let available = std::thread::available_parallelism().unwrap().get();
    // The plugin's default: one worker per CPU this thread may run on.
    let (client, default_workers) = client_and_workers(&ClientOptions::new().cpu_device_count(1));
    assert_eq!(default_workers, available);
    drop(client);
    for n in [1, 2, available].into_iter().filter(|n| *n <= available) {
        for devices in [1, 4] {
            let opts = ClientOptions::new()
                .cpu_device_count(devices)
                .worker_threads(n);
            let (client, workers) = client_and_workers(&opts);
            // The plugin keeps at least one worker per device.
            let want = n.max(devices as usize);
            assert_eq!(workers, want, "worker_threads({n}) with {devices} devices");
            assert_eq!(client.addressable_devices().len(), devices as usize);
            // Running a program starts no thread pinned to the narrowed set.
            let b = Builder::new("run");
            let x = b.parameter(0, Shape::of::<f32>(&[64, 64]), "x");
            let exe = client.compile(b.build(&x.matmul(&x)).unwrap()).unwrap();
            let input = client
                .buffer_from_host(&[1.0f32; 64 * 64], &[64, 64])
                .unwrap();
            let out = exe.execute(&[&input]).unwrap()[0].to_vec::<f32>().unwrap();
            assert!(out.iter().all(|v| *v == 64.0));
            let cpus = my_cpus();
            for tid in tids() {
                if let Some((name, allowed)) = thread_info(&tid.to_string()) {
                    assert_eq!(allowed, cpus, "thread {tid} ({name}) is pinned after a run");
                }
            }
        }
    }
}

/// A product and elementwise work, run on one worker and on the default pool,
/// against the same sums in plain Rust.
#[test]
fn results_unchanged_with_one_worker() {
    let n = 96;
    let b = Builder::new("mlp");
    let x = b.parameter(0, Shape::of::<f32>(&[n, n]), "x");
    let w = b.parameter(1, Shape::of::<f32>(&[n, n]), "w");
    let y = x.matmul(&w).tanh();
    let comp = b.build(&y).unwrap();
    let xs: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
        .collect();
    let ws: Vec<f32> = (0..n * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 20.0)
        .collect();
    let nu = n as usize;
    let mut want = vec![0f32; nu * nu];
    for i in 0..nu {
        for j in 0..nu {
            let s: f64 = (0..nu)
                .map(|k| f64::from(xs[i * nu + k]) * f64::from(ws[k * nu + j]))
                .sum();
            want[i * nu + j] = s.tanh() as f32;
        }
    }
    for opts in [
        ClientOptions::new().cpu_device_count(1).worker_threads(1),
        ClientOptions::new().cpu_device_count(1),
    ] {
        let client = Client::new(&Plugin::default_plugin().unwrap(), &opts).unwrap();
        let exe = client.compile(comp.clone()).unwrap();
        let xb = client.buffer_from_host(&xs, &[n, n]).unwrap();
        let wb = client.buffer_from_host(&ws, &[n, n]).unwrap();
        let got = exe.execute(&[&xb, &wb]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5, "{opts:?}: {g} against {w}");
        }
    }
}

#[test]
fn bad_counts_are_errors() {
    let available = std::thread::available_parallelism().unwrap().get();
    let cpus = my_cpus();
    for n in [0, available + 1, 5000] {
        let err = Client::new(
            &Plugin::default_plugin().unwrap(),
            &ClientOptions::new().cpu_device_count(1).worker_threads(n),
        )
        .err()
        .unwrap_or_else(|| panic!("worker_threads({n}) was accepted"));
        assert!(
            matches!(&err, RuntimeError::InvalidOption { option, .. } if option == "worker_threads"),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains(&format!("{n} worker threads")), "{text}");
        assert!(text.contains(&format!("give 1 to {available}")), "{text}");
        assert_eq!(my_cpus(), cpus);
    }
}
