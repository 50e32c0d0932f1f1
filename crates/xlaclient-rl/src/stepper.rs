//! Agents written as `async` code, their network predictions batched: Alpacka's batch
//! stepper in Rust.
//!
//! An agent is a future (an `async` block or `async fn`) that awaits predictions:
//! `let q = net.predict(obs).await?;`. The [`Stepper`] is its executor. Each
//! [`tick`](Stepper::tick):
//!
//! 1. polls every agent that can make progress (all of them at the first tick, then
//!    those whose predictions arrived) until it waits on the network or finishes;
//! 2. gathers **all** pending requests, of every agent (any number per agent: a
//!    planner may await several at once with `futures::future::join_all`), in the
//!    order they were made;
//! 3. runs them as **one** batched execution of the compiled network
//!    ([`BatchedNet`]), padded with zero rows up to the smallest of a fixed set of
//!    batch sizes ([`BatchSizes`]), each size compiled once and cached;
//! 4. sends each request its own row of the output (a oneshot channel per request),
//!    which wakes the agent that made it for the next tick.
//!
//! So a tick makes exactly one executable call whenever any request is pending,
//! whatever the mix of agents, and none when no agent asked for anything.
//!
//! No async runtime: the futures are polled here, on the caller's thread, with
//! wakers from the `futures` crate ([`ArcWake`]) that only mark an agent as ready to
//! poll. An agent that awaits anything other than predictions (or futures built from
//! them) would never be woken; the stepper reports that as an error instead of
//! waiting forever.
//!
//! Why not `FuturesUnordered` (which also tracks which futures were woken): it polls
//! in wake order and returns `Pending` after a polling budget even while futures
//! are ready, so "every agent waits on the network" could not be read from it; a
//! flag per agent, scanned in spawn order, keeps the batch order deterministic and
//! the end of the polling phase exact.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use futures::task::{ArcWake, waker};

use crate::builder::{Builder, Op};
use crate::error::{Error, NetworkOutputError, Result};
use crate::pjrt::{AlignedHost, Buffer, Client, LoadedExecutable};
use crate::shape::{ElementType, Shape};
use crate::tree::Tree;

/// The batch sizes a [`BatchedNet`] is compiled for, ascending. A batch of `n`
/// requests runs at the smallest size `≥ n` (zero rows fill the rest), so at most
/// `len()` programs are ever compiled, however the batch varies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchSizes(Vec<usize>);

impl BatchSizes {
    /// The given sizes (sorted, duplicates dropped).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the list is empty or holds 0.
    pub fn new(sizes: &[usize]) -> Result<BatchSizes> {
        let mut s = sizes.to_vec();
        s.sort_unstable();
        s.dedup();
        if s.is_empty() || s[0] == 0 {
            return Err(Error::InvalidArgument {
                what: "sizes",
                reason: format!("BatchSizes: {sizes:?}; give at least one size, all above 0"),
            });
        }
        Ok(BatchSizes(s))
    }

    /// `1, 2, 4, …` up to `max` (and `max` itself when it is not a power of two).
    ///
    /// ```
    /// use xlaclient_rl::BatchSizes;
    /// assert_eq!(BatchSizes::powers_of_two(20)?.sizes(), [1, 2, 4, 8, 16, 20]);
    /// assert_eq!(BatchSizes::powers_of_two(20)?.fit(5), Some(8));
    /// assert_eq!(BatchSizes::powers_of_two(20)?.fit(21), None);
    /// # Ok::<(), xlaclient_rl::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `max` is 0.
    pub fn powers_of_two(max: usize) -> Result<BatchSizes> {
        let mut s: Vec<usize> = std::iter::successors(Some(1usize), |&p| p.checked_mul(2))
            .take_while(|&p| p <= max)
            .collect();
        if max > 0 && s.last() != Some(&max) {
            s.push(max);
        }
        BatchSizes::new(&s)
    }

    /// The sizes, ascending.
    pub fn sizes(&self) -> &[usize] {
        &self.0
    }

    /// The largest size.
    pub fn max(&self) -> usize {
        // `new` refuses an empty list, the only way to make one.
        self.0.last().copied().unwrap_or(0)
    }

    /// The smallest size.
    fn smallest(&self) -> usize {
        self.0.first().copied().unwrap_or(0)
    }

    /// The size a batch of `n` runs at: the smallest size `≥ n`, or `None` when `n`
    /// is above the largest.
    pub fn fit(&self, n: usize) -> Option<usize> {
        self.0.iter().copied().find(|&s| s >= n)
    }
}

type TraceFn = Box<dyn Fn(&Builder, i64) -> Op>;

/// The number of values in an array of `dims` (none negative), if a `usize` holds it.
fn values_in(dims: &[i64]) -> Option<usize> {
    dims.iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
}

/// A network compiled from observations `f32[B, obs...]` to outputs `f32[B, out...]`
/// for each batch size `B` of a [`BatchSizes`] (compiled when first needed, then
/// cached), with its parameters resident on the device as buffers.
///
/// Rows must not interact (row `i` of the output depends on row `i` of the input
/// only, as for any per-example network): padding rows are zeros and their outputs
/// are dropped.
///
/// ```no_run
/// use xlaclient_nn::{Activation, Mlp};
/// use xlaclient_rl::{BatchSizes, BatchedNet};
/// use xlaclient_core::{Client, ClientExt};
///
/// let client = Client::cpu()?;
/// let mlp = Mlp::new(&[50, 64, 3], Activation::Relu);
/// let params = client.jit("init", &(), |b, ()| mlp.init(&b.prng_key(0)))?.call(&())?;
/// let mut net = BatchedNet::new(&client, params, &[50], BatchSizes::powers_of_two(64)?,
///     move |p, obs| mlp.apply(p, obs))?;
/// let q = net.predict_batch(&vec![0.0; 3 * 50], 3)?; // runs at batch 4
/// assert_eq!(q.len(), 3 * 3);
/// assert_eq!((net.calls(), net.compiles()), (1, 1));
/// # Ok::<(), xlaclient_rl::Error>(())
/// ```
pub struct BatchedNet {
    client: Client,
    obs_dims: Vec<i64>,
    obs_len: usize,
    out_dims: Vec<i64>,
    out_len: usize,
    sizes: BatchSizes,
    params: Vec<Buffer>,
    /// The shapes of `params`, in order: what [`BatchedNet::set_params`] must match.
    param_shapes: Vec<Shape>,
    /// How many times the parameters were replaced.
    param_updates: usize,
    trace: TraceFn,
    compiled: BTreeMap<usize, LoadedExecutable>,
    compiles: usize,
    calls: usize,
    busy: Duration,
    /// Per batch size, the aligned host array the observations are padded in:
    /// moved into the call's input buffer without a copy and taken back after it.
    padded: BTreeMap<usize, AlignedHost<f32>>,
}

impl fmt::Debug for BatchedNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchedNet")
            .field("obs_dims", &self.obs_dims)
            .field("out_dims", &self.out_dims)
            .field("sizes", &self.sizes)
            .field("compiled", &self.compiled.keys().collect::<Vec<_>>())
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}

impl BatchedNet {
    /// The network `f(params, obs)`, where `obs` is `f32[B, obs_dims...]` and
    /// `params` the tree of `params`' shapes as traced values; its result must be
    /// `f32[B, ...]`. The buffers `params` stay on the device and are passed to every
    /// call. `f` is traced once here (to learn the output's dimensions) and once per
    /// batch size compiled.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an observation dimension below 1, [`Error::NetworkOutput`] for an output that is not
    /// `f32[B, ...]`; the trace's own errors (a shape error in `f`).
    pub fn new<P, F>(
        client: &Client,
        params: P,
        obs_dims: &[i64],
        sizes: BatchSizes,
        f: F,
    ) -> Result<BatchedNet>
    where
        P: Tree<Buffer>,
        P::With<Shape>: 'static,
        F: Fn(&<P::With<Shape> as Tree<Shape>>::With<Op>, &Op) -> Op + 'static,
    {
        if obs_dims.iter().any(|&d| d < 1) {
            return Err(Error::InvalidArgument {
                what: "obs_dims",
                reason: format!(
                    "BatchedNet: observation dimensions {obs_dims:?}; each must be at least 1"
                ),
            });
        }
        let Some(obs_len) = values_in(obs_dims) else {
            return Err(Error::InvalidArgument {
                what: "obs_dims",
                reason: format!(
                    "BatchedNet: observation dimensions {obs_dims:?} hold more values than fit in memory"
                ),
            });
        };
        let spec: P::With<Shape> = params.try_map_ref(&mut |b: &Buffer| b.shape())?;
        let param_shapes = spec.map_ref(Shape::clone).into_leaves();
        let params = params.into_leaves();
        let dims = obs_dims.to_vec();
        let trace: TraceFn = Box::new(move |b, batch| {
            let mut n = 0;
            let p = spec.map_ref(|s| {
                n += 1;
                b.parameter(n - 1, s.clone(), &format!("param{}", n - 1))
            });
            let mut obs_shape = vec![batch];
            obs_shape.extend_from_slice(&dims);
            let obs = b.parameter(n, Shape::of::<f32>(&obs_shape), "obs");
            f(&p, &obs)
        });
        let smallest = sizes.smallest();
        let b = Builder::new("batched_net_shape");
        let out = trace(&b, smallest as i64).shape()?;
        let out_dims = Self::check_output(&out, smallest)?;
        let Some(out_len) = values_in(&out_dims) else {
            return Err(Error::InvalidArgument {
                what: "f",
                reason: format!(
                    "BatchedNet: the network's output rows {out_dims:?} hold more values than fit in memory"
                ),
            });
        };
        Ok(BatchedNet {
            client: client.clone(),
            obs_len,
            obs_dims: obs_dims.to_vec(),
            out_len,
            out_dims,
            sizes,
            params,
            param_shapes,
            param_updates: 0,
            trace,
            compiled: BTreeMap::new(),
            compiles: 0,
            calls: 0,
            busy: Duration::ZERO,
            padded: BTreeMap::new(),
        })
    }

    /// The output's dimensions after the batch axis, if it is `f32[batch, ...]`.
    fn check_output(out: &Shape, batch: usize) -> Result<Vec<i64>> {
        match (out.element_type(), out.dims().first()) {
            (Some(ElementType::F32), Some(&b)) if b == batch as i64 => Ok(out.dims()[1..].to_vec()),
            _ => Err(NetworkOutputError::Shape {
                found: out.clone(),
                batch,
            }
            .into()),
        }
    }

    /// The dimensions of one observation.
    pub fn observation_dims(&self) -> &[i64] {
        &self.obs_dims
    }

    /// The number of values in one observation.
    pub fn observation_len(&self) -> usize {
        self.obs_len
    }

    /// The dimensions of one output row.
    pub fn output_dims(&self) -> &[i64] {
        &self.out_dims
    }

    /// The number of values in one output row.
    pub fn output_len(&self) -> usize {
        self.out_len
    }

    /// The batch sizes it runs at.
    pub fn batch_sizes(&self) -> &BatchSizes {
        &self.sizes
    }

    /// How many programs were compiled (at most one per batch size).
    pub fn compiles(&self) -> usize {
        self.compiles
    }

    /// The batch sizes compiled so far, ascending.
    pub fn compiled_sizes(&self) -> Vec<usize> {
        self.compiled.keys().copied().collect()
    }

    /// How many times an executable was run.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// The time spent in calls so far (padding, upload, execution, download;
    /// compiles not included).
    pub fn busy(&self) -> Duration {
        self.busy
    }

    /// Replaces the parameters the network is called with, e.g. with those a
    /// [`Trainer`](crate::trainer::Trainer) just computed: the next call (the
    /// stepper's next tick) uses them. Nothing is recompiled: the parameters are
    /// arguments of the compiled programs, and the new ones must have the shapes
    /// of the old ones, leaf by leaf (any tree with those leaves in that order).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first leaf whose shape differs, or the
    /// counts when the number of leaves differs; the network keeps its parameters.
    pub fn set_params<P: Tree<Buffer>>(&mut self, params: P) -> Result<()> {
        let leaves = params.into_leaves();
        if leaves.len() != self.param_shapes.len() {
            return Err(Error::InvalidArgument {
                what: "params",
                reason: format!(
                    "BatchedNet::set_params: {} parameter arrays given, the network takes {}",
                    leaves.len(),
                    self.param_shapes.len()
                ),
            });
        }
        for (i, (b, expected)) in leaves.iter().zip(&self.param_shapes).enumerate() {
            let found = b.shape()?;
            if &found != expected {
                return Err(Error::InvalidArgument {
                    what: "params",
                    reason: format!(
                        "BatchedNet::set_params: parameter {i} is {found}, the network was compiled for {expected}"
                    ),
                });
            }
        }
        self.params = leaves;
        self.param_updates += 1;
        Ok(())
    }

    /// The parameters the network is called with (the leaves, in order).
    pub fn params(&self) -> &[Buffer] {
        &self.params
    }

    /// The shapes of the parameters, leaf by leaf.
    pub fn param_shapes(&self) -> &[Shape] {
        &self.param_shapes
    }

    /// How many times [`set_params`](Self::set_params) replaced the parameters.
    pub fn param_updates(&self) -> usize {
        self.param_updates
    }

    /// Compiles every batch size now (instead of when first needed).
    ///
    /// # Errors
    /// A trace or compile error.
    pub fn compile_all(&mut self) -> Result<()> {
        for s in self.sizes.sizes().to_vec() {
            self.executable(s)?;
        }
        Ok(())
    }

    fn executable(&mut self, size: usize) -> Result<&LoadedExecutable> {
        if !self.compiled.contains_key(&size) {
            let b = Builder::new(&format!("batched_net_{size}"));
            let out = (self.trace)(&b, size as i64);
            let dims = Self::check_output(&out.shape()?, size)?;
            if dims != self.out_dims {
                return Err(NetworkOutputError::RowDims {
                    batch: size,
                    dims,
                    first_batch: self.sizes.smallest(),
                    first_dims: self.out_dims.clone(),
                }
                .into());
            }
            let exe = self.client.compile(&b.build(&out)?)?;
            self.compiles += 1;
            self.compiled.insert(size, exe);
        }
        Ok(&self.compiled[&size])
    }

    /// Runs the network once on `n` observations (`obs` holds `n` rows, flattened),
    /// padded to the batch size [`BatchSizes::fit`] picks; returns the `n` output
    /// rows, flattened. `n = 0` returns nothing and runs nothing.
    ///
    /// # Errors
    /// [`Error::Length`] when `obs` does not hold `n` observations, [`Error::BatchTooLarge`] when `n` is above the
    /// largest batch size; compile and execution errors.
    pub fn predict_batch(&mut self, obs: &[f32], n: usize) -> Result<Vec<f32>> {
        let expected = n.saturating_mul(self.obs_len);
        if obs.len() != expected {
            return Err(Error::Length {
                what: format!(
                    "BatchedNet: observation values for {n} observations of {:?}",
                    self.obs_dims
                ),
                given: obs.len(),
                expected,
            });
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let Some(size) = self.sizes.fit(n) else {
            return Err(Error::BatchTooLarge {
                requests: n,
                max: self.sizes.max(),
            });
        };
        self.executable(size)?;
        let start = Instant::now();
        let result = self.run_padded(obs, n, size);
        self.busy += start.elapsed();
        result
    }

    fn run_padded(&mut self, obs: &[f32], n: usize, size: usize) -> Result<Vec<f32>> {
        let mut padded = match self.padded.remove(&size) {
            Some(p) => p,
            None => AlignedHost::new(size * self.obs_len)?,
        };
        let (rows, pad) = padded.split_at_mut(obs.len());
        rows.copy_from_slice(obs);
        pad.fill(0.0);
        let mut dims = vec![size as i64];
        dims.extend_from_slice(&self.obs_dims);
        // Moved in without a copy where the plugin can read host memory; back
        // below, to be filled again next time.
        let obs_buf = self.client.buffer_from_aligned(padded, &dims)?;
        let mut args: Vec<&Buffer> = self.params.iter().collect();
        args.push(&obs_buf);
        self.calls += 1;
        let exe = &self.compiled[&size];
        let out = exe.execute(&args)?;
        let first = out.first().ok_or(NetworkOutputError::Missing {
            program: "BatchedNet",
        })?;
        // Read in place where the output lives in host memory.
        let mut values = first.to_vec::<f32>()?;
        values.truncate(n * self.out_len);
        drop(out);
        self.padded.insert(size, obs_buf.into_host()?);
        Ok(values)
    }
}

/// One pending prediction: an observation and where its answer goes.
struct Request {
    obs: Vec<f32>,
    reply: oneshot::Sender<Result<Vec<f32>>>,
}

/// What the handles and the stepper share: the queue of requests of this tick.
struct Shared {
    queue: RefCell<Vec<Request>>,
    /// Set when the stepper is dropped: nobody will answer any more.
    closed: Cell<bool>,
    obs_dims: Vec<i64>,
    obs_len: usize,
    out_len: usize,
}

/// An agent's access to the network: [`predict`](NetHandle::predict) queues a
/// request for the stepper's next batched call. Cheap to clone (the clones share the
/// queue); not `Send` (the stepper runs its agents on one thread).
#[derive(Clone)]
pub struct NetHandle {
    shared: Rc<Shared>,
    agent: usize,
}

impl fmt::Debug for NetHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetHandle")
            .field("agent", &self.agent)
            .field("obs_dims", &self.shared.obs_dims)
            .finish_non_exhaustive()
    }
}

impl NetHandle {
    /// The index of the agent this handle was given to (its [`Stepper::spawn`]
    /// number).
    pub fn agent(&self) -> usize {
        self.agent
    }

    /// The dimensions of one observation.
    pub fn observation_dims(&self) -> &[i64] {
        &self.shared.obs_dims
    }

    /// The number of values in one output row.
    pub fn output_len(&self) -> usize {
        self.shared.out_len
    }

    /// Asks for the network's output on one observation (flattened, `f32`). The
    /// request is queued now and answered by the stepper's next batched call; the
    /// returned future gives the output row (flattened).
    ///
    /// An observation of the wrong length is not queued: the future gives
    /// [`Error::Length`] saying what was expected, [`Error::StepperClosed`] when the stepper is gone.
    pub fn predict(&self, obs: impl Into<Vec<f32>>) -> Prediction {
        let obs = obs.into();
        if obs.len() != self.shared.obs_len {
            return Prediction(State::Failed(Some(Error::Length {
                what: format!(
                    "agent {}: observation values (the network takes {:?})",
                    self.agent, self.shared.obs_dims
                ),
                given: obs.len(),
                expected: self.shared.obs_len,
            })));
        }
        if self.shared.closed.get() {
            return Prediction(State::Failed(Some(Error::StepperClosed {
                agent: Some(self.agent),
            })));
        }
        let (reply, answer) = oneshot::channel();
        self.shared.queue.borrow_mut().push(Request { obs, reply });
        Prediction(State::Waiting(answer))
    }
}

enum State {
    Waiting(oneshot::Receiver<Result<Vec<f32>>>),
    Failed(Option<Error>),
}

/// The answer to one [`NetHandle::predict`]: a future of the output row.
#[must_use = "a prediction does nothing unless awaited"]
pub struct Prediction(State);

impl fmt::Debug for Prediction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            State::Waiting(_) => f.write_str("Prediction(waiting)"),
            State::Failed(e) => write!(f, "Prediction(failed: {e:?})"),
        }
    }
}

impl Future for Prediction {
    type Output = Result<Vec<f32>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            State::Failed(e) => Poll::Ready(Err(e.take().unwrap_or(Error::PolledAfterCompletion))),
            State::Waiting(rx) => rx
                .poll_unpin(cx)
                .map(|answer| answer.unwrap_or_else(|_| Err(Error::StepperClosed { agent: None }))),
        }
    }
}

/// The flag an agent's waker sets: "poll me again".
struct ReadyFlag(AtomicBool);

impl ArcWake for ReadyFlag {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.store(true, Ordering::Release);
    }
}

struct Agent<T> {
    future: Option<LocalBoxFuture<'static, T>>,
    output: Option<T>,
    ready: Arc<ReadyFlag>,
    waker: Waker,
}

/// What one [`Stepper::tick`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickStats {
    /// Requests gathered (over all agents).
    pub requests: usize,
    /// The batch size they ran at (0 when there was no call).
    pub batch: usize,
    /// Executable calls made: 1 when there were requests, else 0.
    pub calls: usize,
    /// The agents that finished during this tick.
    pub finished: Vec<usize>,
    /// Agents still running after it.
    pub running: usize,
}

/// Runs agents written as `async` code and batches their predictions: one
/// executable call per tick (see the [module docs](self)). `T` is what each agent's
/// future returns.
///
/// Ticks are deterministic: agents are polled in the order they were spawned, and
/// requests batched in the order they were made.
///
/// # Thread safety
/// Not `Send`: agents share the request queue through `Rc` and run on the thread
/// that calls [`tick`](Self::tick).
pub struct Stepper<T> {
    net: BatchedNet,
    shared: Owner,
    agents: Vec<Agent<T>>,
    ticks: usize,
    max_calls_in_a_tick: usize,
    requests: usize,
    obs: Vec<f32>,
}

impl<T: 'static> fmt::Debug for Stepper<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stepper")
            .field("net", &self.net)
            .field("agents", &self.agents.len())
            .field("running", &self.running())
            .field("ticks", &self.ticks)
            .finish_non_exhaustive()
    }
}

impl<T: 'static> Stepper<T> {
    /// A stepper with no agents, batching onto `net`.
    pub fn new(net: BatchedNet) -> Stepper<T> {
        let shared = Rc::new(Shared {
            queue: RefCell::new(Vec::new()),
            closed: Cell::new(false),
            obs_dims: net.obs_dims.clone(),
            obs_len: net.obs_len,
            out_len: net.out_len,
        });
        Stepper {
            net,
            shared: Owner(shared),
            agents: Vec::new(),
            ticks: 0,
            max_calls_in_a_tick: 0,
            requests: 0,
            obs: Vec::new(),
        }
    }

    /// Adds an agent: `agent` is called at once with the agent's [`NetHandle`] and
    /// returns its future (typically an `async move` block), first polled at the next
    /// tick. Returns the agent's index (`0, 1, …` in spawn order).
    pub fn spawn<F, Fut>(&mut self, agent: F) -> usize
    where
        F: FnOnce(NetHandle) -> Fut,
        Fut: Future<Output = T> + 'static,
    {
        let id = self.agents.len();
        let handle = NetHandle {
            shared: Rc::clone(&self.shared.0),
            agent: id,
        };
        let ready = Arc::new(ReadyFlag(AtomicBool::new(true)));
        self.agents.push(Agent {
            future: Some(agent(handle).boxed_local()),
            output: None,
            waker: waker(Arc::clone(&ready)),
            ready,
        });
        id
    }

    /// One tick: poll the agents that can make progress until each waits on the
    /// network or finishes, run every pending request in one batched call, and send
    /// each its answer (the agents resume at the next tick).
    ///
    /// # Errors
    /// [`Error::Stalled`] when agents are still running but none made a request (they
    /// wait on something the stepper cannot wake) or the requests exceed the
    /// largest batch size; the network's compile or execution error. The agents
    /// whose requests were in the failed batch get the same error from their
    /// predictions.
    pub fn tick(&mut self) -> Result<TickStats> {
        self.ticks += 1;
        let _span = tracing::debug_span!("stepper_tick", tick = self.ticks).entered();
        let mut stats = TickStats::default();
        // Poll until no agent is marked ready: an agent that wakes itself (e.g. a
        // combinator yielding) is polled again within the same tick.
        loop {
            let mut polled = false;
            for (i, a) in self.agents.iter_mut().enumerate() {
                let Some(fut) = a.future.as_mut() else {
                    continue;
                };
                if !a.ready.0.swap(false, Ordering::AcqRel) {
                    continue;
                }
                polled = true;
                if let Poll::Ready(out) = fut.as_mut().poll(&mut Context::from_waker(&a.waker)) {
                    a.output = Some(out);
                    a.future = None;
                    stats.finished.push(i);
                }
            }
            if !polled {
                break;
            }
        }
        stats.running = self.running();
        let requests = std::mem::take(&mut *self.shared.0.queue.borrow_mut());
        if requests.is_empty() {
            if stats.running > 0 {
                return Err(Error::Stalled {
                    tick: self.ticks,
                    running: stats.running,
                });
            }
            return Ok(stats);
        }
        let n = requests.len();
        self.obs.clear();
        for r in &requests {
            self.obs.extend_from_slice(&r.obs);
        }
        stats.requests = n;
        stats.batch = self.net.sizes.fit(n).unwrap_or(0);
        self.requests += n;
        let calls_before = self.net.calls;
        let result = self.net.predict_batch(&self.obs, n);
        stats.calls = self.net.calls - calls_before;
        self.max_calls_in_a_tick = self.max_calls_in_a_tick.max(stats.calls);
        match result {
            Ok(out) => {
                let len = self.net.out_len;
                for (i, r) in requests.into_iter().enumerate() {
                    // A dropped receiver (the agent gave up on this prediction) is
                    // not an error.
                    let _ = r.reply.send(Ok(out[i * len..(i + 1) * len].to_vec()));
                }
                Ok(stats)
            }
            Err(e) => {
                for r in requests {
                    let _ = r.reply.send(Err(e.clone()));
                }
                Err(e)
            }
        }
    }

    /// Ticks until every agent has finished; returns their outputs in spawn order
    /// (taking them: a second `run` returns only agents spawned since).
    ///
    /// # Errors
    /// The first error of a [`tick`](Self::tick).
    pub fn run(&mut self) -> Result<Vec<T>> {
        while self.running() > 0 {
            self.tick()?;
        }
        Ok(self
            .agents
            .iter_mut()
            .filter_map(|a| a.output.take())
            .collect())
    }

    /// The number of agents not finished yet.
    pub fn running(&self) -> usize {
        self.agents.iter().filter(|a| a.future.is_some()).count()
    }

    /// The number of agents spawned.
    pub fn agents(&self) -> usize {
        self.agents.len()
    }

    /// Takes agent `agent`'s output, if it has finished (and it was not taken yet).
    pub fn take_output(&mut self, agent: usize) -> Option<T> {
        self.agents.get_mut(agent).and_then(|a| a.output.take())
    }

    /// Ticks so far.
    pub fn ticks(&self) -> usize {
        self.ticks
    }

    /// Requests answered so far (over all ticks).
    pub fn requests(&self) -> usize {
        self.requests
    }

    /// The largest number of executable calls made in one tick (1 once any request
    /// was made; never more).
    pub fn max_calls_in_a_tick(&self) -> usize {
        self.max_calls_in_a_tick
    }

    /// The network (its call and compile counts).
    pub fn net(&self) -> &BatchedNet {
        &self.net
    }

    /// The network, mutably (e.g. to [`compile_all`](BatchedNet::compile_all)).
    pub fn net_mut(&mut self) -> &mut BatchedNet {
        &mut self.net
    }

    /// Gives the network back (with its compiled sizes), e.g. for a new stepper.
    /// Agents still running are dropped; a prediction asked through a handle that
    /// outlives them fails.
    pub fn into_net(self) -> BatchedNet {
        self.net
    }
}

/// The stepper's own reference to the queue: when the stepper goes, it marks the
/// queue closed and drops the requests in it (their senders with them), so a
/// prediction asked or awaited through a handle kept elsewhere ends with an error
/// instead of waiting forever.
struct Owner(Rc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.closed.set(true);
        self.0.queue.borrow_mut().clear();
    }
}
