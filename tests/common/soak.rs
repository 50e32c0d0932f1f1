//! The concurrency soak: worker threads that mix every way of running a program
//! and reading its buffers on one client, each value checked exactly against plain
//! Rust.
//!
//! Shared by `tests/soak.rs` (a few short runs inside `cargo test`) and
//! `examples/soak.rs` (long runs, each in a child process so that a crash is
//! counted). The including crate must also declare the shared helpers as
//! `mod common` (for [`Rng`]).
//!
//! Each worker draws its operations from its own SplitMix64 stream (the seed and the
//! thread's index), so the mix is the same from run to run; only the interleaving
//! of the threads differs. The operations:
//!
//! - `execute`, `execute_sync`, `execute_with` (all kept) on shared inputs
//!   (`Arc<Buffer>`s every thread reads), outputs checked at once;
//! - `execute` on a private input dropped as soon as the call is launched, the
//!   output sent to the dropper thread (read and checked there, or dropped unread);
//! - `execute_async` / `execute_async_with` (kept), a few left in flight and
//!   waited later, or handed to the dropper (waited and checked, or dropped
//!   unwaited);
//! - a donation chain per thread (`state = step(Donate(state), Keep(&w))`),
//!   synchronous and asynchronous (the chain's next step then donates the output of
//!   an execution still in flight);
//! - donating the chain's state while an execution launched just before still
//!   reads it as a kept input (that execution's outputs are checked against the old
//!   state);
//! - an `i32` chain (`(5 s + w) rem 1000003`) with shared or private `w`;
//! - `Jit::call_donated` on a tree `(a, n, x) -> (a + x, n + 1)` (`a` and `n`
//!   donated, `x` a private input dropped after the launch);
//! - `read_in_place`, `to_vec` and `copy_to_host` of shared buffers, chain states
//!   and outputs, from every thread at once;
//! - a hand-off between paired threads: one thread shares a chain state that is
//!   still being computed (an `Arc`), the partner reads it while the owner reads it
//!   too, and the owner donates it as soon as the partner has let it go;
//! - a chain's state retired to the dropper (read there, or dropped unread), a
//!   fresh chain started.
//!
//! Integer-valued `f32` and `i32` data keep every result exact.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::Rng;
use xlaclient::pjrt::{Execution, WaitPolicy};
use xlaclient::{
    Arg, Buffer, Builder, Client, ClientExt, ClientOptions, Jit, LoadedExecutable, NativeType, Op,
    Shape,
};

/// Elements of the `f32` programs' vectors.
pub const N: usize = 256;
/// Elements of the `i32` chain.
pub const NI: usize = 64;
/// Elements of the jit tree's vector.
pub const NJ: usize = 32;
/// The modulus of the `i32` chain.
pub const MODULUS: i32 = 1_000_003;
/// A chain whose values grow past this is retired and restarted (every `f32` value
/// stays an exact integer).
const BOUND: f32 = (1 << 20) as f32;
/// How long a hand-off may wait for its partner before the run fails as hung.
const HANDOFF_PATIENCE: Duration = Duration::from_secs(120);

/// What a thread that stops early because another failed says.
const STOPPED: &str = "stopped: another thread failed";

/// The operations, with their weights out of 100.
pub const KINDS: [(&str, u64); 14] = [
    ("execute", 12),
    ("execute_to_dropper", 8),
    ("execute_async", 10),
    ("async_to_dropper", 5),
    ("donate_step", 12),
    ("donate_async", 8),
    ("donate_in_flight", 10),
    ("read_shared", 10),
    ("read_chain", 5),
    ("i32_chain", 6),
    ("jit_donated", 5),
    ("handoff", 4),
    ("retire", 3),
    ("drain", 2),
];

const K_EXECUTE: usize = 0;
const K_EXECUTE_TO_DROPPER: usize = 1;
const K_EXECUTE_ASYNC: usize = 2;
const K_ASYNC_TO_DROPPER: usize = 3;
const K_DONATE_STEP: usize = 4;
const K_DONATE_ASYNC: usize = 5;
const K_DONATE_IN_FLIGHT: usize = 6;
const K_READ_SHARED: usize = 7;
const K_READ_CHAIN: usize = 8;
const K_I32_CHAIN: usize = 9;
const K_JIT: usize = 10;
const K_HANDOFF: usize = 11;
const K_RETIRE: usize = 12;
const K_DRAIN: usize = 13;

/// The ways a buffer is read back.
pub const READS: [&str; 3] = ["read_in_place", "to_vec", "copy_to_host"];

/// What a run did: operations by kind, and what they amounted to.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Operations made, per entry of [`KINDS`].
    pub ops: [u64; KINDS.len()],
    /// Executions launched (every `execute*` and `call_donated`).
    pub launches: u64,
    /// Buffers donated.
    pub donations: u64,
    /// Buffers read back and compared exactly with the host's values, per way of
    /// reading ([`READS`]).
    pub reads: [u64; 3],
    /// Reads of a hand-off buffer by the partner thread.
    pub handoff_reads: u64,
    /// Buffers and executions the dropper thread took.
    pub dropper_received: u64,
    /// Outputs the dropper dropped without reading them.
    pub dropped_unread: u64,
    /// Executions dropped before anyone waited for them.
    pub abandoned: u64,
    /// Chains restarted (retired to the dropper).
    pub retired: u64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        for (a, b) in self.ops.iter_mut().zip(&o.ops) {
            *a += b;
        }
        for (a, b) in self.reads.iter_mut().zip(&o.reads) {
            *a += b;
        }
        self.launches += o.launches;
        self.donations += o.donations;
        self.handoff_reads += o.handoff_reads;
        self.dropper_received += o.dropper_received;
        self.dropped_unread += o.dropped_unread;
        self.abandoned += o.abandoned;
        self.retired += o.retired;
    }

    /// Operations made, all kinds together.
    pub fn total_ops(&self) -> u64 {
        self.ops.iter().sum()
    }

    /// Values compared with the host's, all ways of reading together.
    pub fn checks(&self) -> u64 {
        self.reads.iter().sum()
    }

    /// The kinds of operation never made.
    pub fn missing_kinds(&self) -> Vec<&'static str> {
        KINDS
            .iter()
            .zip(&self.ops)
            .filter(|(_, n)| **n == 0)
            .map(|((k, _), _)| *k)
            .collect()
    }

    /// One line: totals, then the count of each kind and each way of reading.
    pub fn summary(&self) -> String {
        let kinds: Vec<String> = KINDS
            .iter()
            .zip(&self.ops)
            .map(|((k, _), n)| format!("{k}={n}"))
            .collect();
        let reads: Vec<String> = READS
            .iter()
            .zip(&self.reads)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        format!(
            "ops={} launches={} donations={} checks={} handoff_reads={} dropper={} \
             dropped_unread={} abandoned={} retired={} [{}] [{}]",
            self.total_ops(),
            self.launches,
            self.donations,
            self.checks(),
            self.handoff_reads,
            self.dropper_received,
            self.dropped_unread,
            self.abandoned,
            self.retired,
            kinds.join(" "),
            reads.join(" ")
        )
    }

    /// Checks that a run of `threads × calls_per_thread` made them all and checked
    /// values, and (in runs of 1,000 operations or more, where a kind of 2 % missing
    /// has odds under 1e-8) made every kind of operation (the hand-off needs two
    /// threads); the problems, if any.
    pub fn incomplete(&self, threads: usize, calls_per_thread: usize) -> Option<String> {
        let want = (threads * calls_per_thread) as u64;
        let mut missing = self.missing_kinds();
        if threads < 2 {
            missing.retain(|k| *k != "handoff");
        }
        if want < 1000 {
            missing.clear();
        }
        let mut problems = Vec::new();
        if self.total_ops() != want {
            problems.push(format!("{} operations, expected {want}", self.total_ops()));
        }
        if !missing.is_empty() {
            problems.push(format!("never made: {}", missing.join(", ")));
        }
        if want >= 1000 && self.reads.contains(&0) {
            problems.push(format!("a way of reading was never used: {:?}", self.reads));
        }
        if want >= 1000 && threads >= 2 && self.handoff_reads == 0 {
            problems.push("no hand-off was read by a partner".into());
        }
        if self.launches < want / 2 || self.donations == 0 {
            problems.push(format!(
                "{} launches, {} donations",
                self.launches, self.donations
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }
}

/// The client options of run `run` (the default, synchronous client and
/// asynchronous ones with each wait policy take turns; run 0 is the default
/// client).
pub fn client_options(run: u64) -> ClientOptions {
    let asynchronous = ClientOptions::new().asynchronous(true);
    match run % 4 {
        0 => ClientOptions::new(),
        1 => asynchronous.wait_policy(WaitPolicy::Park),
        2 => asynchronous.wait_policy(WaitPolicy::Spin(Duration::from_micros(200))),
        _ => asynchronous,
    }
}

/// What a buffer must hold.
#[derive(Clone, Debug)]
pub enum Want {
    F32(Vec<f32>),
    I32(Vec<i32>),
}

/// The programs every thread runs.
pub struct Programs {
    /// `(x: f32[N], w: f32[N]) -> 2 x + w`.
    affine: LoadedExecutable,
    /// `(s: f32[N], w: f32[N]) -> s + w`, the output aliasing `s`.
    step: LoadedExecutable,
    /// `(s: i32[NI], w: i32[NI]) -> (5 s + w) rem MODULUS`, the output aliasing `s`.
    step_i32: LoadedExecutable,
    /// `(a: f32[NJ], n: i32[], x: f32[NJ]) -> (a + x, n + 1)`, `a` and `n` donated.
    tree: Jit<(Shape, Shape, Shape), (Shape, Shape)>,
}

impl Programs {
    pub fn compile(client: &Client) -> Result<Programs, String> {
        let e = |e: xlaclient::Error| format!("building the soak programs: {e}");
        let vf = Shape::of::<f32>(&[N as i64]);
        let b = Builder::new("affine");
        let x = b.parameter(0, vf.clone(), "x");
        let w = b.parameter(1, vf.clone(), "w");
        let affine = client
            .compile(&b.build(&(&x * 2.0 + &w)).map_err(e)?)
            .map_err(|x| e(x.into()))?;

        let b = Builder::new("step");
        let s = b.parameter(0, vf.clone(), "s");
        let w = b.parameter(1, vf, "w");
        let module = b.build_aliased(&[&(&s + &w)], &[(0, 0)]).map_err(e)?;
        let step = client.compile(&module).map_err(|x| e(x.into()))?;

        let vi = Shape::of::<i32>(&[NI as i64]);
        let b = Builder::new("step_i32");
        let s = b.parameter(0, vi.clone(), "s");
        let w = b.parameter(1, vi, "w");
        let next = (&s * 5i64 + &w).rem(&b.constant(MODULUS));
        let module = b.build_aliased(&[&next], &[(0, 0)]).map_err(e)?;
        let step_i32 = client.compile(&module).map_err(|x| e(x.into()))?;

        let vj = Shape::of::<f32>(&[NJ as i64]);
        let spec = (vj.clone(), Shape::of::<i32>(&[]), vj);
        let tree = client
            .jit_donating("tree", &spec, |_, (a, n, x): (Op, Op, Op)| {
                (&a + &x, &n + 1i64)
            })
            .map_err(e)?;
        if tree.aliased_inputs() != [true, true, false] {
            return Err(format!(
                "the tree's aliases: {:?}, expected a and n",
                tree.aliased_inputs()
            ));
        }
        Ok(Programs {
            affine,
            step,
            step_i32,
            tree,
        })
    }
}

/// The shared inputs: uploaded once, read (never donated) by every thread.
struct Shared {
    x: Arc<Buffer>,
    x_host: Vec<f32>,
    w: Arc<Buffer>,
    w_host: Vec<f32>,
    wi: Arc<Buffer>,
    wi_host: Vec<i32>,
}

/// Runs the soak: `threads` workers of `calls_per_thread` operations each, plus a
/// dropper thread, on `client`. Returns the counts, or the first wrong value or
/// error (with the thread, the operation and the seed).
pub fn soak(
    client: &Client,
    threads: usize,
    calls_per_thread: usize,
    seed: u64,
) -> Result<Stats, String> {
    assert!(threads >= 1, "at least one thread");
    let programs = Programs::compile(client)?;
    let mut rng = Rng(seed ^ 0x5EED_50AC);
    let up = |e: xlaclient::pjrt::Error| format!("upload: {e}");
    let x_host = ints_f32(&mut rng, N, -8, 8);
    let w_host = ints_f32(&mut rng, N, -3, 3);
    let wi_host = ints_i32(&mut rng, NI, 0, 100);
    let shared = Shared {
        x: Arc::new(client.buffer_from_host(&x_host, &[N as i64]).map_err(up)?),
        w: Arc::new(client.buffer_from_host(&w_host, &[N as i64]).map_err(up)?),
        wi: Arc::new(
            client
                .buffer_from_host(&wi_host, &[NI as i64])
                .map_err(up)?,
        ),
        x_host,
        w_host,
        wi_host,
    };

    let abort = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let fail = |msg: String| {
        abort.store(true, Ordering::SeqCst);
        errors.lock().expect("errors").push(msg);
    };
    let (to_dropper, dropper_rx) = mpsc::sync_channel::<ToDropper>(64);
    let (inbox_tx, inbox_rx): (Vec<_>, Vec<_>) = (0..threads).map(|_| mpsc::channel()).unzip();

    let mut total = Stats::default();
    std::thread::scope(|s| {
        let dropper = s.spawn(|| dropper(dropper_rx, &abort, &fail));
        let mut workers = Vec::new();
        for (t, inbox) in inbox_rx.into_iter().enumerate() {
            let partner = (threads >= 2).then(|| inbox_tx[partner_of(t, threads)].clone());
            let mut w = Worker {
                t,
                seed,
                op: 0,
                kind: "setup",
                rng: Rng(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                client,
                p: &programs,
                sh: Shared {
                    x: Arc::clone(&shared.x),
                    x_host: shared.x_host.clone(),
                    w: Arc::clone(&shared.w),
                    w_host: shared.w_host.clone(),
                    wi: Arc::clone(&shared.wi),
                    wi_host: shared.wi_host.clone(),
                },
                to_dropper: to_dropper.clone(),
                inbox,
                partner,
                abort: &abort,
                done: &done,
                threads,
                stats: Stats::default(),
                inflight: VecDeque::new(),
                max_inflight: 1,
                chain: None,
                chain_i: None,
                tree: None,
            };
            let fail = &fail;
            workers.push(s.spawn(move || {
                // A panic is a failure like the others (and the thread still counts
                // as finished, so that no partner waits for it).
                let mut r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    w.run(calls_per_thread)
                }))
                .unwrap_or_else(|p| Err(format!("thread {t} panicked: {}", panic_text(&p))));
                // Counted as finished even on failure (the others then stop).
                w.done.fetch_add(1, Ordering::SeqCst);
                if r.is_ok() {
                    r = w.serve_until_all_done();
                }
                match r {
                    Ok(()) => Some(w.stats),
                    Err(e) => {
                        fail(e);
                        None
                    }
                }
            }));
        }
        drop(to_dropper);
        drop(inbox_tx);
        for h in workers {
            match h.join() {
                Ok(Some(st)) => total.add(&st),
                Ok(None) => {}
                Err(p) => fail(format!("a worker panicked: {}", panic_text(&p))),
            }
        }
        match dropper.join() {
            Ok(st) => total.add(&st),
            Err(p) => fail(format!("the dropper panicked: {}", panic_text(&p))),
        }
    });
    // Threads stopped because another failed say so; the first failure is the news.
    let mut errors = errors.into_inner().expect("errors");
    errors.sort_by_key(|e| e.contains(STOPPED));
    if let Some(first) = errors.first() {
        return Err(format!(
            "{first}{}",
            if errors.len() > 1 {
                format!(" (and {} more errors)", errors.len() - 1)
            } else {
                String::new()
            }
        ));
    }
    // The shared inputs were only ever kept: still whole and unchanged.
    let mut st = Stats::default();
    for (i, (buf, want)) in [
        (&shared.x, Want::F32(shared.x_host.clone())),
        (&shared.w, Want::F32(shared.w_host.clone())),
        (&shared.wi, Want::I32(shared.wi_host.clone())),
    ]
    .into_iter()
    .enumerate()
    {
        check(buf, &want, i as u64, &mut st)
            .map_err(|e| format!("shared input {i} after the run: {e}"))?;
    }
    total.add(&st);
    Ok(total)
}

/// Threads are paired (0-1, 2-3, …); an odd last thread pairs with thread 0.
fn partner_of(t: usize, threads: usize) -> usize {
    let p = t ^ 1;
    if p < threads { p } else { 0 }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "?".into())
}

// ---------------------------------------------------------------------------------
// Host values and reads.

fn below(rng: &mut Rng, n: u64) -> u64 {
    rng.next_u64() % n
}

fn ints_f32(rng: &mut Rng, n: usize, lo: i64, hi: i64) -> Vec<f32> {
    (0..n)
        .map(|_| (lo + below(rng, (hi - lo + 1) as u64) as i64) as f32)
        .collect()
}

fn ints_i32(rng: &mut Rng, n: usize, lo: i32, hi: i32) -> Vec<i32> {
    (0..n)
        .map(|_| lo + below(rng, (hi - lo) as u64) as i32)
        .collect()
}

fn affine_host(x: &[f32], w: &[f32]) -> Vec<f32> {
    x.iter().zip(w).map(|(x, w)| 2.0 * x + w).collect()
}

fn add_host(s: &mut [f32], w: &[f32]) {
    for (s, w) in s.iter_mut().zip(w) {
        *s += w;
    }
}

fn step_i32_host(s: &mut [i32], w: &[i32]) {
    for (s, w) in s.iter_mut().zip(w) {
        *s = (5 * *s + w) % MODULUS;
    }
}

fn read<T: NativeType>(buf: &Buffer, n: usize, how: usize) -> xlaclient::pjrt::Result<Vec<T>> {
    match how {
        0 => {
            let mut v = vec![T::default(); n];
            buf.read_in_place(&mut v)?;
            Ok(v)
        }
        1 => buf.to_vec::<T>(),
        _ => {
            let mut v = vec![T::default(); n];
            buf.copy_to_host(&mut v)?;
            Ok(v)
        }
    }
}

fn compare<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} elements, expected {}", got.len(), want.len()));
    }
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => Err(format!(
            "element {i} is {:?}, expected {:?} (got {:?}, expected {:?})",
            got[i],
            want[i],
            &got[..got.len().min(8)],
            &want[..want.len().min(8)]
        )),
    }
}

/// Reads `buf` (the way `how % 3` names) and compares it exactly with `want`.
fn check(buf: &Buffer, want: &Want, how: u64, st: &mut Stats) -> Result<(), String> {
    let how = (how % 3) as usize;
    let e = |e: xlaclient::pjrt::Error| format!("{}: {e}", READS[how]);
    let n = match want {
        Want::F32(v) => v.len(),
        Want::I32(v) => v.len(),
    };
    let dims = buf.dims().map_err(e)?;
    // The jit tree's counter is a scalar.
    let want_dims: Vec<i64> = if n == 1 && dims.is_empty() {
        vec![]
    } else {
        vec![n as i64]
    };
    if dims != want_dims {
        return Err(format!("dims {dims:?}, expected {want_dims:?}"));
    }
    match want {
        Want::F32(w) => compare(&read::<f32>(buf, n, how).map_err(e)?, w),
        Want::I32(w) => compare(&read::<i32>(buf, n, how).map_err(e)?, w),
    }
    .map_err(|m| format!("{}: {m}", READS[how]))?;
    st.reads[how] += 1;
    Ok(())
}

// ---------------------------------------------------------------------------------
// The dropper thread.

enum ToDropper {
    /// Read it, check it, drop it.
    Read(Buffer, Want, String),
    /// Drop it unread.
    Drop(Buffer),
    /// Wait for it, check its outputs, drop them.
    Wait(Execution, Vec<Want>, String),
    /// Drop it without waiting.
    Abandon(Execution),
}

fn dropper(rx: Receiver<ToDropper>, abort: &AtomicBool, fail: &dyn Fn(String)) -> Stats {
    let mut st = Stats::default();
    let mut how = 0u64;
    for msg in rx {
        st.dropper_received += 1;
        if abort.load(Ordering::SeqCst) {
            continue; // dropped
        }
        how += 1;
        let r = match msg {
            ToDropper::Read(buf, want, ctx) => {
                check(&buf, &want, how, &mut st).map_err(|e| format!("dropper, {ctx}: {e}"))
            }
            ToDropper::Drop(buf) => {
                st.dropped_unread += 1;
                drop(buf);
                Ok(())
            }
            ToDropper::Wait(exe, wants, ctx) => match exe.wait() {
                Ok(outs) => check_outputs(&outs, &wants, how, &mut st)
                    .map_err(|e| format!("dropper, {ctx}: {e}")),
                Err(e) => Err(format!("dropper, {ctx}: wait: {e}")),
            },
            ToDropper::Abandon(exe) => {
                st.abandoned += 1;
                drop(exe);
                Ok(())
            }
        };
        if let Err(e) = r {
            fail(e);
        }
    }
    st
}

fn check_outputs(outs: &[Buffer], wants: &[Want], how: u64, st: &mut Stats) -> Result<(), String> {
    if outs.len() != wants.len() {
        return Err(format!("{} outputs, expected {}", outs.len(), wants.len()));
    }
    for (i, (o, w)) in outs.iter().zip(wants).enumerate() {
        check(o, w, how + i as u64, st).map_err(|e| format!("output {i}: {e}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// A worker.

/// A chain's state: a buffer, or the execution that computes it.
enum Slot {
    Ready(Buffer),
    Pending(Execution),
}

struct Chain<T> {
    slot: Slot,
    host: Vec<T>,
}

/// A buffer one thread shares with its partner, and what it must hold.
struct Handoff {
    buf: Arc<Buffer>,
    want: Arc<Want>,
    from: usize,
}

struct InFlight {
    exe: Execution,
    wants: Vec<Want>,
    what: String,
}

struct Worker<'a> {
    t: usize,
    seed: u64,
    op: usize,
    kind: &'static str,
    rng: Rng,
    client: &'a Client,
    p: &'a Programs,
    sh: Shared,
    to_dropper: SyncSender<ToDropper>,
    inbox: Receiver<Handoff>,
    partner: Option<Sender<Handoff>>,
    abort: &'a AtomicBool,
    done: &'a AtomicUsize,
    threads: usize,
    stats: Stats,
    inflight: VecDeque<InFlight>,
    max_inflight: usize,
    chain: Option<Chain<f32>>,
    chain_i: Option<Chain<i32>>,
    tree: Option<(Buffer, Buffer, Vec<f32>, i32)>,
}

type R = Result<(), String>;

impl Worker<'_> {
    fn ctx(&self) -> String {
        format!(
            "thread {} op {} ({}) seed {}",
            self.t, self.op, self.kind, self.seed
        )
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> String {
        format!("{}: {what}: {e}", self.ctx())
    }

    fn below(&mut self, n: u64) -> u64 {
        below(&mut self.rng, n)
    }

    fn check(&mut self, buf: &Buffer, want: &Want, what: &str) -> R {
        let how = self.below(3);
        check(buf, want, how, &mut self.stats).map_err(|e| self.err(what, e))
    }

    fn check_outputs(&mut self, outs: &[Buffer], wants: &[Want], what: &str) -> R {
        let how = self.below(3);
        check_outputs(outs, wants, how, &mut self.stats).map_err(|e| self.err(what, e))
    }

    fn send(&self, msg: ToDropper) -> R {
        self.to_dropper
            .send(msg)
            .map_err(|_| self.err("send to the dropper", "the dropper is gone"))
    }

    fn upload_f32(&mut self, n: usize, lo: i64, hi: i64) -> Result<(Buffer, Vec<f32>), String> {
        let host = ints_f32(&mut self.rng, n, lo, hi);
        let buf = self
            .client
            .buffer_from_host(&host, &[n as i64])
            .map_err(|e| self.err("upload", e))?;
        Ok((buf, host))
    }

    fn upload_i32(&mut self, n: usize, lo: i32, hi: i32) -> Result<(Buffer, Vec<i32>), String> {
        let host = ints_i32(&mut self.rng, n, lo, hi);
        let buf = self
            .client
            .buffer_from_host(&host, &[n as i64])
            .map_err(|e| self.err("upload", e))?;
        Ok((buf, host))
    }

    fn run(&mut self, calls: usize) -> R {
        self.max_inflight = 1 + self.below(4) as usize;
        let (buf, host) = self.upload_f32(N, -100, 100)?;
        self.chain = Some(Chain {
            slot: Slot::Ready(buf),
            host,
        });
        let (buf, host) = self.upload_i32(NI, 0, MODULUS)?;
        self.chain_i = Some(Chain {
            slot: Slot::Ready(buf),
            host,
        });
        let (a, a_host) = self.upload_f32(NJ, -50, 50)?;
        let n = self
            .client
            .scalar(0i32)
            .map_err(|e| self.err("upload", e))?;
        self.tree = Some((a, n, a_host, 0));

        for i in 0..calls {
            if self.abort.load(Ordering::SeqCst) {
                return Err(format!("thread {} stopped at op {i}: {STOPPED}", self.t));
            }
            self.op = i;
            self.service_inbox()?;
            let mut pick = self.below(100);
            let k = KINDS
                .iter()
                .position(|(_, w)| {
                    if pick < *w {
                        true
                    } else {
                        pick -= w;
                        false
                    }
                })
                .expect("the weights sum to 100");
            self.kind = KINDS[k].0;
            self.stats.ops[k] += 1;
            match k {
                K_EXECUTE => self.execute()?,
                K_EXECUTE_TO_DROPPER => self.execute_to_dropper()?,
                K_EXECUTE_ASYNC => self.execute_async()?,
                K_ASYNC_TO_DROPPER => self.async_to_dropper()?,
                K_DONATE_STEP => self.donate_step()?,
                K_DONATE_ASYNC => self.donate_async()?,
                K_DONATE_IN_FLIGHT => self.donate_in_flight()?,
                K_READ_SHARED => self.read_shared()?,
                K_READ_CHAIN => self.read_chain()?,
                K_I32_CHAIN => self.i32_chain()?,
                K_JIT => self.jit_donated()?,
                K_HANDOFF => self.handoff()?,
                K_RETIRE => self.retire()?,
                K_DRAIN => self.drain()?,
                _ => unreachable!(),
            }
            while self.inflight.len() > self.max_inflight {
                self.wait_oldest()?;
            }
            let big = self
                .chain
                .as_ref()
                .is_some_and(|c| c.host.iter().any(|v| v.abs() > BOUND));
            if big {
                self.retire()?;
            }
        }
        self.kind = "finish";
        self.drain()?;
        self.finish_chains()
    }

    /// After this thread's operations: serves the partner's hand-offs until every
    /// thread has finished.
    fn serve_until_all_done(&mut self) -> R {
        while self.done.load(Ordering::SeqCst) < self.threads && !self.abort.load(Ordering::SeqCst)
        {
            self.service_inbox()?;
            std::thread::sleep(Duration::from_micros(200));
        }
        self.service_inbox()
    }

    /// Reads and checks every buffer the partner has shared, then lets it go.
    fn service_inbox(&mut self) -> R {
        while let Ok(h) = self.inbox.try_recv() {
            // Not from the thread's stream: how many hand-offs arrive here depends
            // on the interleaving, and the stream must not (the mix of operations
            // is the same in every run of a seed).
            let how = self.stats.handoff_reads;
            check(&h.buf, &h.want, how, &mut self.stats).map_err(|e| {
                format!("{}: reading thread {}'s hand-off: {e}", self.ctx(), h.from)
            })?;
            self.stats.handoff_reads += 1;
        }
        Ok(())
    }

    fn wait_oldest(&mut self) -> R {
        if let Some(f) = self.inflight.pop_front() {
            let outs = f.exe.wait().map_err(|e| self.err(&f.what, e))?;
            self.check_outputs(&outs, &f.wants, &f.what)?;
        }
        Ok(())
    }

    fn push(&mut self, exe: Execution, wants: Vec<Want>, what: &str) {
        self.stats.launches += 1;
        self.inflight.push_back(InFlight {
            exe,
            wants,
            what: format!("{} (in flight from op {})", what, self.op),
        });
    }

    fn affine_want(&self) -> Want {
        Want::F32(affine_host(&self.sh.x_host, &self.sh.w_host))
    }

    /// Kept shared inputs, outputs checked at once.
    fn execute(&mut self) -> R {
        let (x, w) = (Arc::clone(&self.sh.x), Arc::clone(&self.sh.w));
        let how = self.below(3);
        let out = match how {
            0 => self.p.affine.execute(&[&x, &w]),
            1 => self.p.affine.execute_sync(&[&x, &w]),
            _ => self.p.affine.execute_with([Arg::Keep(&x), Arg::Keep(&w)]),
        }
        .map_err(|e| self.err("execute", e))?;
        self.stats.launches += 1;
        let want = self.affine_want();
        self.check_outputs(&out, &[want], "execute's output")
    }

    /// A private input dropped right after the launch; the output goes to the
    /// dropper (checked there, or dropped unread).
    fn execute_to_dropper(&mut self) -> R {
        let (x, x_host) = self.upload_f32(N, -8, 8)?;
        let mut out = self
            .p
            .affine
            .execute(&[&x, &self.sh.w])
            .map_err(|e| self.err("execute", e))?;
        drop(x);
        self.stats.launches += 1;
        let out = out.remove(0);
        if self.below(3) == 0 {
            self.send(ToDropper::Drop(out))
        } else {
            let want = Want::F32(affine_host(&x_host, &self.sh.w_host));
            self.send(ToDropper::Read(out, want, self.ctx()))
        }
    }

    fn launch_affine_async(&mut self) -> Result<Execution, String> {
        let (x, w) = (&self.sh.x, &self.sh.w);
        if self.rng.next_u64() & 1 == 0 {
            self.p.affine.execute_async(&[x, w])
        } else {
            self.p
                .affine
                .execute_async_with([Arg::Keep(x), Arg::Keep(w)])
        }
        .map_err(|e| self.err("execute_async", e))
    }

    fn execute_async(&mut self) -> R {
        let exe = self.launch_affine_async()?;
        let want = self.affine_want();
        self.push(exe, vec![want], "execute_async");
        Ok(())
    }

    fn async_to_dropper(&mut self) -> R {
        let exe = self.launch_affine_async()?;
        self.stats.launches += 1;
        if self.below(3) == 0 {
            self.send(ToDropper::Abandon(exe))
        } else {
            let want = self.affine_want();
            self.send(ToDropper::Wait(exe, vec![want], self.ctx()))
        }
    }

    /// Takes the chain's state, waiting for it when it is still being computed
    /// asynchronously (the buffer comes with the execution's outputs).
    fn take_chain(&mut self) -> Result<(Buffer, Vec<f32>), String> {
        let c = self.chain.take().expect("a chain");
        let buf = self.settle(c.slot, "the chain's pending step")?;
        Ok((buf, c.host))
    }

    fn settle(&mut self, slot: Slot, what: &str) -> Result<Buffer, String> {
        match slot {
            Slot::Ready(b) => Ok(b),
            Slot::Pending(exe) => {
                let mut outs = exe.wait().map_err(|e| self.err(what, e))?;
                if outs.len() != 1 {
                    return Err(self.err(what, format!("{} outputs", outs.len())));
                }
                Ok(outs.remove(0))
            }
        }
    }

    /// One step of the chain, the state donated: returns the new state (in flight).
    fn step(&mut self, state: Buffer) -> Result<Buffer, String> {
        let w = Arc::clone(&self.sh.w);
        let mut out = self
            .p
            .step
            .execute_with([Arg::Donate(state), Arg::Keep(&w)])
            .map_err(|e| self.err("execute_with(Donate)", e))?;
        self.stats.launches += 1;
        self.stats.donations += 1;
        if out.len() != 1 {
            return Err(self.err("execute_with(Donate)", format!("{} outputs", out.len())));
        }
        Ok(out.remove(0))
    }

    fn donate_step(&mut self) -> R {
        let (state, mut host) = self.take_chain()?;
        let state = self.step(state)?;
        add_host(&mut host, &self.sh.w_host);
        if self.below(3) == 0 {
            self.check(&state, &Want::F32(host.clone()), "the stepped state")?;
        }
        self.chain = Some(Chain {
            slot: Slot::Ready(state),
            host,
        });
        Ok(())
    }

    /// The step launched asynchronously; the chain's next operation takes its
    /// output from the execution.
    fn donate_async(&mut self) -> R {
        let (state, mut host) = self.take_chain()?;
        let w = Arc::clone(&self.sh.w);
        let exe = self
            .p
            .step
            .execute_async_with([Arg::Donate(state), Arg::Keep(&w)])
            .map_err(|e| self.err("execute_async_with(Donate)", e))?;
        self.stats.launches += 1;
        self.stats.donations += 1;
        add_host(&mut host, &self.sh.w_host);
        self.chain = Some(Chain {
            slot: Slot::Pending(exe),
            host,
        });
        Ok(())
    }

    /// An execution reads the state as a kept input; the state is donated to the
    /// next step while that execution may still be running.
    fn donate_in_flight(&mut self) -> R {
        let (state, mut host) = self.take_chain()?;
        let want = Want::F32(affine_host(&host, &self.sh.w_host));
        let w = Arc::clone(&self.sh.w);
        let reader_async = self.rng.next_u64() & 1 == 0;
        let mut sync_out = None;
        if reader_async {
            let exe = self
                .p
                .affine
                .execute_async(&[&state, &w])
                .map_err(|e| self.err("execute_async (reader)", e))?;
            self.push(exe, vec![want.clone()], "the reader of a donated state");
        } else {
            let out = self
                .p
                .affine
                .execute(&[&state, &w])
                .map_err(|e| self.err("execute (reader)", e))?;
            self.stats.launches += 1;
            sync_out = Some(out);
        }
        let state = if self.rng.next_u64() & 1 == 0 {
            self.step(state)?
        } else {
            let exe = self
                .p
                .step
                .execute_async_with([Arg::Donate(state), Arg::Keep(&w)])
                .map_err(|e| self.err("execute_async_with(Donate)", e))?;
            self.stats.launches += 1;
            self.stats.donations += 1;
            self.settle(Slot::Pending(exe), "the donating step")?
        };
        add_host(&mut host, &self.sh.w_host);
        if let Some(mut out) = sync_out {
            // The reader's output: here, or on the dropper thread.
            if self.rng.next_u64() & 1 == 0 {
                self.check_outputs(&out, &[want], "the reader of a donated state")?;
            } else {
                let ctx = format!("{}: the reader of a donated state", self.ctx());
                self.send(ToDropper::Read(out.remove(0), want, ctx))?;
            }
        }
        self.chain = Some(Chain {
            slot: Slot::Ready(state),
            host,
        });
        Ok(())
    }

    fn read_shared(&mut self) -> R {
        let (buf, want) = match self.below(3) {
            0 => (Arc::clone(&self.sh.x), Want::F32(self.sh.x_host.clone())),
            1 => (Arc::clone(&self.sh.w), Want::F32(self.sh.w_host.clone())),
            _ => (Arc::clone(&self.sh.wi), Want::I32(self.sh.wi_host.clone())),
        };
        self.check(&buf, &want, "a shared input")
    }

    fn read_chain(&mut self) -> R {
        let (state, host) = self.take_chain()?;
        self.check(&state, &Want::F32(host.clone()), "the chain's state")?;
        self.chain = Some(Chain {
            slot: Slot::Ready(state),
            host,
        });
        Ok(())
    }

    fn i32_chain(&mut self) -> R {
        let c = self.chain_i.take().expect("an i32 chain");
        let mut host = c.host;
        let state = self.settle(c.slot, "the i32 chain's pending step")?;
        // `w`: the shared one, or a private one dropped right after the launch.
        let private = self.rng.next_u64() & 1 == 0;
        let (w, w_host) = if private {
            let (b, h) = self.upload_i32(NI, 0, 100)?;
            (Arc::new(b), h)
        } else {
            (Arc::clone(&self.sh.wi), self.sh.wi_host.clone())
        };
        let slot = if self.rng.next_u64() & 1 == 0 {
            let mut out = self
                .p
                .step_i32
                .execute_with([Arg::Donate(state), Arg::Keep(&w)])
                .map_err(|e| self.err("i32 execute_with(Donate)", e))?;
            if out.len() != 1 {
                return Err(self.err("i32 step", format!("{} outputs", out.len())));
            }
            Slot::Ready(out.remove(0))
        } else {
            Slot::Pending(
                self.p
                    .step_i32
                    .execute_async_with([Arg::Donate(state), Arg::Keep(&w)])
                    .map_err(|e| self.err("i32 execute_async_with(Donate)", e))?,
            )
        };
        drop(w);
        self.stats.launches += 1;
        self.stats.donations += 1;
        step_i32_host(&mut host, &w_host);
        let slot = match slot {
            Slot::Ready(b) if self.below(3) == 0 => {
                self.check(&b, &Want::I32(host.clone()), "the i32 chain's state")?;
                Slot::Ready(b)
            }
            other => other,
        };
        self.chain_i = Some(Chain { slot, host });
        Ok(())
    }

    fn jit_donated(&mut self) -> R {
        let (a, n, mut a_host, n_host) = self.tree.take().expect("a tree");
        let (x, x_host) = self.upload_f32(NJ, -3, 3)?;
        let (a, n) = self
            .p
            .tree
            .call_donated((a, n, x))
            .map_err(|e| self.err("Jit::call_donated", e))?;
        self.stats.launches += 1;
        self.stats.donations += 2;
        add_host(&mut a_host, &x_host);
        let n_host = n_host + 1;
        if a_host.iter().any(|v| v.abs() > BOUND) {
            return Err(self.err("the tree", "grew past the bound (cannot happen)"));
        }
        if self.below(4) == 0 {
            self.check(&a, &Want::F32(a_host.clone()), "the tree's a")?;
            self.check(&n, &Want::I32(vec![n_host]), "the tree's n")?;
        }
        self.tree = Some((a, n, a_host, n_host));
        Ok(())
    }

    /// Steps the chain, shares the new state (still being computed) with the
    /// partner, reads it here too, and donates it to the next step as soon as the
    /// partner has let it go.
    fn handoff(&mut self) -> R {
        let Some(partner) = self.partner.clone() else {
            return self.donate_step();
        };
        let (state, mut host) = self.take_chain()?;
        let state = self.step(state)?;
        add_host(&mut host, &self.sh.w_host);
        let want = Arc::new(Want::F32(host.clone()));
        let mut shared = Arc::new(state);
        partner
            .send(Handoff {
                buf: Arc::clone(&shared),
                want: Arc::clone(&want),
                from: self.t,
            })
            .map_err(|_| self.err("hand-off", "the partner is gone"))?;
        self.check(&shared, &want, "the shared state (owner's read)")?;
        let start = Instant::now();
        let mut spins = 0u32;
        let state = loop {
            match Arc::try_unwrap(shared) {
                Ok(b) => break b,
                Err(back) => shared = back,
            }
            self.service_inbox()?;
            if self.abort.load(Ordering::SeqCst) {
                return Err(self.err("hand-off", STOPPED));
            }
            if start.elapsed() > HANDOFF_PATIENCE {
                return Err(self.err("hand-off", "the partner never let the buffer go"));
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        };
        let state = self.step(state)?;
        add_host(&mut host, &self.sh.w_host);
        self.chain = Some(Chain {
            slot: Slot::Ready(state),
            host,
        });
        Ok(())
    }

    /// Sends the chain's state to the dropper (read there, or dropped unread;
    /// waited there, or abandoned, when still pending) and starts a new chain.
    fn retire(&mut self) -> R {
        let c = self.chain.take().expect("a chain");
        let want = Want::F32(c.host);
        let read = self.below(3) != 0;
        let ctx = format!("{}: a retired chain", self.ctx());
        let msg = match (c.slot, read) {
            (Slot::Ready(b), true) => ToDropper::Read(b, want, ctx),
            (Slot::Ready(b), false) => ToDropper::Drop(b),
            (Slot::Pending(e), true) => ToDropper::Wait(e, vec![want], ctx),
            (Slot::Pending(e), false) => ToDropper::Abandon(e),
        };
        self.send(msg)?;
        self.stats.retired += 1;
        let (buf, host) = self.upload_f32(N, -100, 100)?;
        self.chain = Some(Chain {
            slot: Slot::Ready(buf),
            host,
        });
        Ok(())
    }

    fn drain(&mut self) -> R {
        while !self.inflight.is_empty() {
            self.wait_oldest()?;
        }
        Ok(())
    }

    /// The chains' final states, checked.
    fn finish_chains(&mut self) -> R {
        let (state, host) = self.take_chain()?;
        self.check(&state, &Want::F32(host), "the chain's final state")?;
        let c = self.chain_i.take().expect("an i32 chain");
        let state = self.settle(c.slot, "the i32 chain's last step")?;
        self.check(&state, &Want::I32(c.host), "the i32 chain's final state")?;
        let (a, n, a_host, n_host) = self.tree.take().expect("a tree");
        self.check(&a, &Want::F32(a_host), "the tree's final a")?;
        self.check(&n, &Want::I32(vec![n_host]), "the tree's final n")?;
        Ok(())
    }
}
