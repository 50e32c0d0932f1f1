//! `ClientOptions::keep_host_heap`: a program whose temporaries pass glibc's
//! 32 MiB `mmap` threshold no longer page-faults them in on every call, on a
//! thread other than the main one (the harder case: such a thread allocates from
//! its own arena).
//!
//! Run in a child process (the option changes `malloc` for the whole process),
//! on a test thread of that child, with `GLIBC_TUNABLES` removed from its
//! environment.

mod common;

use common::in_child_with_env;
use xlaclient::{Builder, Client, ClientOptions, ElementType, LoadedExecutable, Plugin, Shape};

/// The process's minor page faults so far (`/proc/self/stat`, field 10), on
/// every thread: the plugin's worker threads may touch the temporaries too. The
/// child process runs this one test.
fn process_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("process stat");
    let after_name = &stat[stat.rfind(')').expect("stat format") + 2..];
    after_name
        .split(' ')
        .nth(7)
        .expect("minflt field")
        .parse()
        .expect("minflt number")
}

/// The median of the minor faults of 9 calls of `exe`, after `WARM` warm-up
/// calls, and the value it computes. (The 0.81 plugin runs calls on its worker
/// threads, each allocating from its own arena: now and then a call lands on one
/// that has not run it yet.)
fn faults_per_call(client: &Client, exe: &LoadedExecutable) -> (u64, f32) {
    let x = client
        .buffer_from_host(&[0.5f32, 0.25], &[2])
        .expect("upload");
    let run = || -> f32 {
        exe.execute(&[&x]).expect("execute")[0]
            .to_vec::<f32>()
            .expect("read")[0]
    };
    for _ in 0..WARM {
        run();
    }
    let mut v = 0.0;
    let mut faults: Vec<u64> = (0..9)
        .map(|_| {
            let before = process_faults();
            v = run();
            process_faults() - before
        })
        .collect();
    faults.sort_unstable();
    (faults[4], v)
}

/// Calls before the count starts: enough that every worker thread of the
/// plugin has run the program (the 0.81 plugin runs calls on its pool).
const WARM: usize = 12;

/// `N` elements of state, updated in a loop: the loop's state is a temporary
/// buffer of `4 N` bytes.
const N: i64 = 3_200_000;

/// Σ over the state after 3 steps of `s ← s · x₀ + x₁`, from `s = 1`.
fn program() -> xlaclient::Computation {
    let b = Builder::new("big_state");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let a = x.slice(&[0], &[1], &[1]).reshape(&[]);
    let c = x.slice(&[1], &[2], &[1]).reshape(&[]);
    let s0 = &b.zeros(ElementType::F32, &[N]) + 1.0;
    let s = b.fori_loop(0, 3, s0, |_, s| &(&s * &a) + &c);
    b.build(&s.reduce_sum(&[0])).expect("builds")
}

#[test]
fn a_kept_heap_serves_large_temporaries_without_page_faults() {
    let name = "a_kept_heap_serves_large_temporaries_without_page_faults";
    in_child_with_env(name, &[("GLIBC_TUNABLES", None)], || {
        let plugin = Plugin::default_plugin().expect("plugin");
        let plain = Client::new(&plugin, &ClientOptions::new()).expect("client");
        let exe = plain.compile(program()).expect("compile");
        let temp = exe.memory_stats().expect("stats").temp_bytes;
        // Over glibc's largest mmap threshold, within one arena heap.
        assert!(
            (32 << 20..60 << 20).contains(&temp),
            "temporaries of {temp} bytes"
        );
        let pages = temp as u64 / 4096;
        let (before, v) = faults_per_call(&plain, &exe);
        // s = 1 → 0.75 → 0.625 → 0.5625 at every element.
        let want = 0.5625 * N as f32;
        assert!((v - want).abs() <= 1e-3 * want, "{v} against {want}");

        let kept = Client::new(&plugin, &ClientOptions::new().keep_host_heap(true))
            .expect("client keeping the heap");
        let exe2 = kept.compile(program()).expect("compile");
        let (after, v2) = faults_per_call(&kept, &exe2);
        assert_eq!(v2, v);
        // The same executable of the plain client is served from the heap too:
        // the setting is the process's.
        let (after_plain, _) = faults_per_call(&plain, &exe);
        println!(
            "temporaries {temp} bytes ({pages} pages); median faults a call: {before} with \
             glibc's defaults, {after} and {after_plain} with the heap kept"
        );
        assert!(
            after < pages / 8 && after_plain < pages / 8,
            "{after} and {after_plain} faults a call for {pages} pages of temporaries \
             (before: {before})"
        );
    });
}

#[test]
fn the_option_reads_back() {
    assert!(!ClientOptions::new().keeps_host_heap());
    assert!(ClientOptions::new().keep_host_heap(true).keeps_host_heap());
}
