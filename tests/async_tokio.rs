//! Executions awaited on tokio's multi-thread runtime: many in flight at once, a
//! worker thread never blocked while one runs, pending futures dropped safely.
//!
//! The clients here are asynchronous (`ClientOptions::asynchronous(true)`): a
//! synchronous client (the default) runs the program inside `execute_async`,
//! which then returns a finished execution.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::client;

/// The tests of this file run one at a time: the second one measures how often
/// another task runs while an execution is awaited, which the others' CPU load
/// would distort.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `test` on a fresh tokio multi-thread runtime with `workers` worker
/// threads (timers enabled), alone among this file's tests.
fn on_tokio<F: std::future::Future>(workers: usize, test: F) -> F::Output {
    let _alone = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .expect("a tokio runtime")
        .block_on(test)
}
use xlaclient::{Builder, Client, ClientOptions, Computation, LoadedExecutable, Shape};

/// An asynchronous client of the plugin under test, with one device.
fn async_client() -> Client {
    Client::new(
        client().plugin(),
        &ClientOptions::new().cpu_device_count(1).asynchronous(true),
    )
    .expect("an asynchronous client")
}

/// `y = x*x + 3x - 7`, elementwise on `f32[n]`.
fn poly(n: i64) -> Computation {
    let b = Builder::new("poly");
    let x = b.parameter(0, Shape::of::<f32>(&[n]), "x");
    b.build(&(&x * &x + x.clone() * 3.0 + (-7.0))).unwrap()
}

/// The same in plain Rust. Integer-valued inputs with |x| <= 200 keep every
/// intermediate an integer below 2^24: exact in f32, whatever order or fusion XLA
/// chooses.
fn poly_ref(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| v * v + 3.0 * v - 7.0).collect()
}

/// A program that takes a while on the CPU: `k` chained 256×256 matmuls.
fn slow(k: usize) -> Computation {
    let b = Builder::new("slow");
    let x = b.parameter(0, Shape::of::<f32>(&[256, 256]), "x");
    let mut y = x.clone();
    for _ in 0..k {
        y = (y.matmul(&x) * (1.0 / 256.0)).tanh();
    }
    b.build(&y).unwrap()
}

/// A `slow` program that runs for at least about `at_least` here (the chain is
/// lengthened until one execution takes that long, measured synchronously), with
/// its input.
fn slow_program(c: &Client, at_least: Duration) -> (Arc<LoadedExecutable>, xlaclient::Buffer) {
    let x = c
        .buffer_from_host(&vec![0.5f32; 256 * 256], &[256, 256])
        .unwrap();
    let mut k = 20;
    loop {
        let exe = c.compile(slow(k)).unwrap();
        let t = Instant::now();
        exe.execute_sync(&[&x]).unwrap();
        let took = t.elapsed();
        if took >= at_least || k >= 5000 {
            return (Arc::new(exe), x);
        }
        let scale = at_least.as_secs_f64() / took.as_secs_f64().max(1e-4);
        k = ((k as f64 * scale.min(20.0)) * 1.2).ceil() as usize;
    }
}

#[test]
fn sixty_four_executions_in_flight_each_checked_against_plain_rust() {
    on_tokio(2, async {
        let c = async_client();
        let n = 1 << 18;
        let exe = Arc::new(c.compile(poly(n)).unwrap());
        let c = Arc::new(c);
        // Executions launched and not finished yet, now and at most.
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for t in 0..64 {
            let (c, exe) = (c.clone(), exe.clone());
            let (in_flight, most) = (in_flight.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                let x: Vec<f32> = (0..n)
                    .map(|i| ((i * 7 + t * 13) % 401 - 200) as f32)
                    .collect();
                let xb = c.buffer_from_host(&x, &[n]).unwrap();
                let running = exe.execute_async(&[&xb]).unwrap();
                if !running.is_ready().unwrap() {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let out = running.await.unwrap();
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    (t, out)
                } else {
                    (t, running.await.unwrap())
                }
            }));
        }
        let mut seen = [false; 64];
        for (t, task) in tasks.into_iter().enumerate() {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 7 + t as i64 * 13) % 401 - 200) as f32)
                .collect();
            let (tt, out) = task.await.expect("task");
            assert_eq!(tt as usize, t);
            assert_eq!(out.len(), 1);
            assert!(
                out[0].to_vec::<f32>().unwrap() == poly_ref(&x),
                "execution {t} differs from plain Rust"
            );
            seen[t] = true;
        }
        assert!(seen.iter().all(|s| *s));
        let most = most.load(Ordering::SeqCst);
        eprintln!("at most {most} executions were pending at once");
        assert!(most >= 2, "at most {most} execution was pending at once");
    });
}

/// With one worker thread, a task awaiting a long execution leaves the worker to
/// another task, which keeps ticking meanwhile. The same task blocking in
/// `execute_sync` instead stops the ticker dead: the measure can tell the two apart.
#[test]
fn awaiting_a_long_execution_does_not_block_the_only_worker() {
    on_tokio(1, async {
        let c = async_client();
        let (exe, x) = slow_program(&c, Duration::from_millis(150));
        let x = Arc::new(x);
        let want = exe.execute_sync(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();

        let ticks = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (ticks, stop) = (ticks.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    ticks.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        // Let the ticker start.
        while ticks.load(Ordering::Relaxed) < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }

        // Awaited: the worker runs the ticker while the plugin's threads work.
        let awaited = {
            let (exe, x, ticks) = (exe.clone(), x.clone(), ticks.clone());
            tokio::spawn(async move {
                let before = ticks.load(Ordering::Relaxed);
                let t = Instant::now();
                let out = exe.execute_async(&[&x]).unwrap().await.unwrap();
                let took = t.elapsed();
                let during = ticks.load(Ordering::Relaxed) - before;
                (out[0].to_vec::<f32>().unwrap(), took, during)
            })
        };
        let (got, took, during) = awaited.await.unwrap();
        assert_eq!(got, want);
        assert!(
            during >= 2,
            "the ticker ticked {during} times during a {took:?} execution that was awaited"
        );

        // Control: blocking in the task holds the only worker, and the ticker stops.
        let blocked = {
            let (exe, x, ticks) = (exe.clone(), x.clone(), ticks.clone());
            tokio::spawn(async move {
                let before = ticks.load(Ordering::Relaxed);
                let t = Instant::now();
                let out = exe.execute_sync(&[&x]).unwrap();
                let took = t.elapsed();
                let during = ticks.load(Ordering::Relaxed) - before;
                (out[0].to_vec::<f32>().unwrap(), took, during)
            })
        };
        let (got, took_blocked, during_blocked) = blocked.await.unwrap();
        assert_eq!(got, want);
        assert_eq!(
            during_blocked, 0,
            "a blocking wait of {took_blocked:?} left the worker to the ticker?"
        );
        stop.store(true, Ordering::Relaxed);
        ticker.await.unwrap();
    });
}

/// Executions whose futures are dropped while pending (after a poll registered the
/// task's waker with the plugin's callback, or never polled, or with the task
/// aborted) leave the client working: later results are still right, and the
/// callbacks that fire after the drops touch nothing freed.
#[test]
fn dropping_pending_executions_is_safe() {
    on_tokio(2, async {
        let c = async_client();
        let (exe, x) = slow_program(&c, Duration::from_millis(20));
        let want = exe.execute_sync(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
        let x = Arc::new(x);
        let mut dropped_pending = 0;
        for round in 0..16 {
            // Polled once (the waker registered), then dropped by the timeout.
            let pending = exe.execute_async(&[&x]).unwrap();
            match tokio::time::timeout(Duration::from_micros(50), pending).await {
                Err(_) => dropped_pending += 1,
                Ok(out) => assert_eq!(out.unwrap()[0].to_vec::<f32>().unwrap(), want),
            }
            // Never polled.
            drop(exe.execute_async(&[&x]).unwrap());
            // Awaited in a task that is aborted while it waits.
            let task = {
                let (exe, x) = (exe.clone(), x.clone());
                tokio::spawn(async move { exe.execute_async(&[&x]).unwrap().await.map(|_| ()) })
            };
            if round % 2 == 0 {
                tokio::task::yield_now().await;
            }
            task.abort();
            let _ = task.await;
        }
        assert!(
            dropped_pending > 0,
            "no execution was still pending when its future was dropped"
        );
        // The client and the executable still work, and give the same answer.
        for _ in 0..3 {
            let out = exe.execute_async(&[&x]).unwrap().await.unwrap();
            assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
        }
        let small = c.compile(poly(5)).unwrap();
        let v = [1.0f32, -2.0, 3.0, 0.0, 200.0];
        let xb = c.buffer_from_host(&v, &[5]).unwrap();
        let out = small.execute_async(&[&xb]).unwrap().await.unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), poly_ref(&v));
    });
}

/// A pending execution dropped after its client and executable: the execution
/// keeps the client alive until its event and outputs are gone.
#[test]
fn a_pending_execution_outlives_its_client_and_executable() {
    on_tokio(2, async {
        let c = async_client();
        let (exe, x) = slow_program(&c, Duration::from_millis(20));
        let want = exe.execute_sync(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
        let first = exe.execute_async(&[&x]).unwrap();
        let second = exe.execute_async(&[&x]).unwrap();
        drop(x);
        drop(exe);
        drop(c);
        let out = first.await.unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
        drop(second);
    });
}

/// A buffer's ready event awaited on tokio: outputs of executions launched with
/// `execute` (which returns at once on an asynchronous client) are awaited in
/// many tasks, then read and checked against plain Rust; others' ready events
/// are dropped while pending.
#[test]
fn buffer_ready_events_are_awaited_and_dropped_safely() {
    on_tokio(2, async {
        let c = Arc::new(async_client());
        let (slow_exe, sx) = slow_program(&c, Duration::from_millis(20));
        let want_slow = slow_exe.execute_sync(&[&sx]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        let n = 1024;
        let exe = Arc::new(c.compile(poly(n)).unwrap());
        let mut tasks = Vec::new();
        for t in 0..32i64 {
            let (c, exe) = (c.clone(), exe.clone());
            tasks.push(tokio::spawn(async move {
                let x: Vec<f32> = (0..n).map(|i| ((i * 3 + t) % 301 - 150) as f32).collect();
                let xb = c.buffer_from_host(&x, &[n]).unwrap();
                let out = exe.execute(&[&xb]).unwrap();
                out[0].ready_event().unwrap().await.unwrap();
                assert!(out[0].ready_event().unwrap().is_ready().unwrap());
                out[0].to_vec::<f32>().unwrap() == poly_ref(&x)
            }));
        }
        for (t, task) in tasks.into_iter().enumerate() {
            assert!(task.await.unwrap(), "task {t} differs from plain Rust");
        }
        // Ready events of slow outputs, polled once and dropped, then the
        // outputs dropped too.
        let mut dropped_pending = 0;
        for _ in 0..8 {
            let out = slow_exe.execute(&[&sx]).unwrap();
            let ev = out[0].ready_event().unwrap();
            if tokio::time::timeout(Duration::from_micros(50), ev)
                .await
                .is_err()
            {
                dropped_pending += 1;
            }
            drop(out);
        }
        assert!(dropped_pending > 0, "no ready event was dropped pending");
        let out = slow_exe.execute(&[&sx]).unwrap();
        out[0].ready_event().unwrap().await.unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want_slow);
    });
}
