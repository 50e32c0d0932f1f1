//! `PJRT_Event`: completion of asynchronous work (a transfer, an execution).
//!
//! Waiting never burns a core the plugin needs: a short, bounded poll of
//! `PJRT_Event_IsReady` (only where spare cores exist, see [`WaitPolicy`]), then the
//! thread parks and the plugin's `PJRT_Event_OnReady` callback wakes it. The same
//! callback wakes the [`Waker`] of an `Event` polled as a [`Future`].

use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::api::Api;
use super::raw::{self, PJRT_Error, PJRT_Event, slot};
use crate::error::{Error, Result};

/// How a thread waits for the plugin's asynchronous work (a client option, see
/// [`ClientOptions::wait_policy`](super::ClientOptions::wait_policy)).
///
/// Polling answers fastest when the work is about to finish, but a polling thread
/// holds a core: on a small machine that is the core XLA's worker threads need to
/// finish the work. Parking costs a wake-up (tens of µs on a small VM) but no core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Poll for at most [`AUTO_SPIN`] when no other thread of this process is
    /// waiting on an event and either the machine has more than two cores or the
    /// recent waits of this process that had to wait were shorter than that budget
    /// (then polling almost surely ends the wait before it runs out, and holds the
    /// core only that long); otherwise park at once. A synchronous client (the
    /// default) hardly waits: its events have fired when asked, and such a wait
    /// neither polls nor parks.
    #[default]
    Auto,
    /// Poll for at most this long, then park.
    Spin(Duration),
    /// Never poll: park until the plugin signals completion.
    Park,
}

/// The polling budget of [`WaitPolicy::Auto`] on a machine with spare cores: about
/// the cost of one park and wake-up, so a wait costs at most twice the best choice.
pub const AUTO_SPIN: Duration = Duration::from_micros(50);

/// Threads of this process now inside a wait (`Auto` polls only when it is alone).
static WAITERS: AtomicUsize = AtomicUsize::new(0);

/// A running average (weight 1/8) of how long this process's waits took, in
/// nanoseconds (waits for events already fired are not counted). A parked wait
/// counts its wake-up too, which errs towards parking.
static RECENT_WAIT_NS: AtomicU64 = AtomicU64::new(0);

fn record_wait(d: Duration) {
    let sample = d.as_nanos().min(u64::MAX as u128) as u64;
    let old = RECENT_WAIT_NS.load(Ordering::Relaxed);
    RECENT_WAIT_NS.store(old - old / 8 + sample / 8, Ordering::Relaxed);
}

fn cores() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl WaitPolicy {
    /// The polling budget for a wait that starts now, given how many other threads
    /// were already waiting.
    fn budget(self, others_waiting: usize) -> Duration {
        match self {
            WaitPolicy::Auto
                if others_waiting == 0
                    && (cores() > 2
                        || RECENT_WAIT_NS.load(Ordering::Relaxed)
                            < AUTO_SPIN.as_nanos() as u64) =>
            {
                AUTO_SPIN
            }
            WaitPolicy::Auto | WaitPolicy::Park => Duration::ZERO,
            WaitPolicy::Spin(d) => d,
        }
    }
}

/// Counts this thread among the waiters while alive.
struct WaiterGuard;

impl WaiterGuard {
    /// Registers a waiter; returns how many were waiting before.
    fn enter() -> (WaiterGuard, usize) {
        (WaiterGuard, WAITERS.fetch_add(1, Ordering::Relaxed))
    }
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        WAITERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// State shared between an `Event` and its `PJRT_Event_OnReady` callback. The
/// callback owns one `Arc` reference (passed as `user_arg`), released when it runs.
struct Signal {
    api: Arc<Api>,
    done: AtomicBool,
    inner: Mutex<SignalInner>,
}

#[derive(Default)]
struct SignalInner {
    status: Option<Result<()>>,
    thread: Option<Thread>,
    waker: Option<Waker>,
}

impl Signal {
    fn lock(&self) -> std::sync::MutexGuard<'_, SignalInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the status and wakes whoever waits.
    fn complete(&self, status: Result<()>) {
        let (thread, waker) = {
            let mut g = self.lock();
            g.status = Some(status);
            self.done.store(true, Ordering::Release);
            (g.thread.take(), g.waker.take())
        };
        if let Some(t) = thread {
            t.unpark();
        }
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The `PJRT_Event_OnReadyCallback`: runs once, on a plugin thread or inside
/// `PJRT_Event_OnReady` itself when the event is already ready.
///
/// # Safety
/// `user_arg` is an `Arc<Signal>` reference leaked by [`Event::register`] for this
/// callback alone; `error` is null or an error whose ownership the header passes to
/// the callback ("The callback must destroy `error` via `PJRT_Error_Destroy`").
unsafe extern "C" fn on_ready(error: *mut PJRT_Error, user_arg: *mut c_void) {
    // SAFETY: per the contract above: this reclaims the reference leaked for us.
    let signal = unsafe { Arc::from_raw(user_arg.cast_const().cast::<Signal>()) };
    let status = if error.is_null() {
        Ok(())
    } else {
        // Destroys `error` (the callback owns it).
        Err(signal.api.event_error(error))
    };
    signal.complete(status);
}

/// A pending completion, owned: destroyed exactly once when dropped.
///
/// Wait for it with [`wait`](Self::wait) (blocking) or `.await` it (it is a
/// [`Future`] whose waker the plugin's `PJRT_Event_OnReady` callback wakes).
///
/// # Async
/// Polling never blocks: the first poll registers the task's waker with the
/// plugin's `PJRT_Event_OnReady` callback (a later poll only swaps the waker), so
/// any executor (tokio's multi-thread runtime, `futures`' executors, a hand-rolled
/// one) can await it without holding a worker thread. A plugin that takes no
/// callback has its wait handed to a helper thread, which owns the event from then
/// on and wakes the task when it is done. Dropping a pending `Event` is safe: the
/// callback owns its own reference to the state it writes (and to the plugin's
/// library), so it never touches freed memory, whenever it runs.
///
/// # Thread safety
/// `Event` is `Send` (PJRT events may be awaited from any thread) but not `Sync`.
pub struct Event {
    api: Arc<Api>,
    raw: *mut PJRT_Event,
    policy: WaitPolicy,
    /// Set once an `OnReady` callback is registered.
    signal: Option<Arc<Signal>>,
    /// The status, once known (a completed future returns it again if polled).
    status: Option<Result<()>>,
    /// An error from `IsReady`, reported once the work is done.
    early_error: Option<Error>,
    /// The client whose work this is, when nothing else keeps it alive as long as
    /// the event (an event handed out on its own): dropped after the event is
    /// destroyed.
    client: Option<Arc<crate::client::ClientInner>>,
}

// SAFETY: a `PJRT_Event` is a handle to a thread-safe future of the plugin (the C
// API's event functions may be called from any thread); one owner may move between
// threads. The `Signal` is `Send + Sync` (atomics and a mutex).
unsafe impl Send for Event {}

impl Event {
    /// Takes ownership of `raw` (which may be null: then the event counts as done).
    pub(crate) fn from_raw(
        api: &Arc<Api>,
        raw: *mut PJRT_Event,
        policy: WaitPolicy,
    ) -> Option<Event> {
        if raw.is_null() {
            None
        } else {
            Some(Event {
                api: api.clone(),
                raw,
                policy,
                signal: None,
                status: None,
                early_error: None,
                client: None,
            })
        }
    }

    /// An event that is done (successfully): for work that needed no event.
    pub(crate) fn done(api: &Arc<Api>, policy: WaitPolicy) -> Event {
        Event {
            api: api.clone(),
            raw: std::ptr::null_mut(),
            policy,
            signal: None,
            status: Some(Ok(())),
            early_error: None,
            client: None,
        }
    }

    /// Keeps `client` alive as long as the event.
    pub(crate) fn keeping(mut self, client: &Arc<crate::client::ClientInner>) -> Event {
        self.client = Some(client.clone());
        self
    }

    /// True once the work is done (successfully or not).
    pub fn is_ready(&self) -> Result<bool> {
        if self.status.is_some()
            || self
                .signal
                .as_ref()
                .is_some_and(|s| s.done.load(Ordering::Acquire))
        {
            return Ok(true);
        }
        if self.raw.is_null() {
            // Handed to a helper thread (see `wait_elsewhere`): not done yet.
            return Ok(false);
        }
        let mut a = raw::PJRT_Event_IsReady_Args::new();
        a.event = self.raw;
        // SAFETY: `self.raw` is a live event we own (destroyed only in Drop).
        unsafe { self.api.call(slot::PJRT_Event_IsReady, &mut a)? };
        Ok(a.is_ready)
    }

    /// Waits until the work is done and returns its status, as the client's
    /// [`WaitPolicy`] says.
    pub fn wait(self) -> Result<()> {
        let policy = self.policy;
        self.wait_with(policy)
    }

    /// Waits with an explicit policy.
    pub fn wait_with(mut self, policy: WaitPolicy) -> Result<()> {
        if let Some(s) = self.status.take() {
            return s;
        }
        // Already done (a synchronous client's events mostly are): no count of
        // waiters, no poll, no callback.
        if let Ok(true) = self.is_ready() {
            let status = self.status_of_ready();
            return self.finish(status);
        }
        let (_guard, others) = WaiterGuard::enter();
        let budget = policy.budget(others);
        let start = Instant::now();
        // An error from IsReady is returned, but only after the work is done: the
        // plugin may still be writing into memory the caller owns.
        let status = match self.poll_ready(budget) {
            Ok(true) => self.status_of_ready(),
            Ok(false) => self.park(),
            Err(e) => {
                self.early_error = Some(e);
                self.park()
            }
        };
        record_wait(start.elapsed());
        self.finish(status)
    }

    /// Polls `IsReady` for at most `budget` (once when `budget` is zero).
    fn poll_ready(&self, budget: Duration) -> Result<bool> {
        if self.is_ready()? {
            return Ok(true);
        }
        if budget.is_zero() {
            return Ok(false);
        }
        let start = Instant::now();
        let mut i = 0u32;
        loop {
            std::hint::spin_loop();
            if self.is_ready()? {
                return Ok(true);
            }
            i = i.wrapping_add(1);
            if i % 32 == 0 && start.elapsed() >= budget {
                return Ok(false);
            }
        }
    }

    /// The status of an event known to be ready (`PJRT_Event_Await` returns at once).
    fn status_of_ready(&self) -> Result<()> {
        if let Some(s) = &self.signal {
            if s.done.load(Ordering::Acquire) {
                return s.lock().status.take().unwrap_or(Ok(()));
            }
        }
        self.await_blocking()
    }

    /// `PJRT_Event_Await`: blocks inside the plugin. Used only when the event is
    /// ready, or when `PJRT_Event_OnReady` could not be registered.
    fn await_blocking(&self) -> Result<()> {
        let mut a = raw::PJRT_Event_Await_Args::new();
        a.event = self.raw;
        // SAFETY: `self.raw` is a live event we own.
        match unsafe { self.api.call(slot::PJRT_Event_Await, &mut a) } {
            Err(Error::Pjrt { code, message, .. }) => Err(Error::Execution { code, message }),
            other => other,
        }
    }

    /// Registers the `OnReady` callback (once); the waker and thread to wake are set
    /// by the caller before or after, under the signal's lock.
    ///
    /// Returns `false` if the plugin would not take the callback.
    fn register(&mut self, thread: Option<Thread>, waker: Option<Waker>) -> bool {
        if let Some(s) = &self.signal {
            let mut g = s.lock();
            if !s.done.load(Ordering::Acquire) {
                if thread.is_some() {
                    g.thread = thread;
                }
                if waker.is_some() {
                    g.waker = waker;
                }
            }
            return true;
        }
        let signal = Arc::new(Signal {
            api: self.api.clone(),
            done: AtomicBool::new(false),
            inner: Mutex::new(SignalInner {
                status: None,
                thread,
                waker,
            }),
        });
        let user_arg = Arc::into_raw(signal.clone()).cast_mut().cast::<c_void>();
        let mut a = raw::PJRT_Event_OnReady_Args::new();
        a.event = self.raw;
        a.callback = Some(on_ready);
        a.user_arg = user_arg;
        // SAFETY: `self.raw` is live. The header's contract: the callback is called
        // once when the event is ready (possibly at once, on this thread) with an
        // error it owns; `user_arg` stays ours to manage, and it is a leaked `Arc`
        // reference that `on_ready` reclaims, so it outlives the callback whatever
        // happens to this `Event`.
        match unsafe { self.api.call(slot::PJRT_Event_OnReady, &mut a) } {
            Ok(()) => {
                self.signal = Some(signal);
                true
            }
            Err(Error::Unsupported { .. }) => {
                // The function was never called: the leaked reference is ours again.
                // SAFETY: from `Arc::into_raw` above, not handed to the plugin.
                drop(unsafe { Arc::from_raw(user_arg.cast_const().cast::<Signal>()) });
                false
            }
            // The plugin refused the callback. Whether it may still call it is not
            // specified, so the reference stays leaked (a few bytes) rather than
            // risk a use after free.
            Err(_) => false,
        }
    }

    /// Records the final status (an earlier `IsReady` error wins).
    fn finish(&mut self, status: Result<()>) -> Result<()> {
        let s = match self.early_error.take() {
            Some(e) => Err(e),
            None => status,
        };
        self.status = Some(s.clone());
        s
    }

    /// Parks the thread until the plugin's callback fires, and returns the status.
    fn park(&mut self) -> Result<()> {
        if !self.register(Some(std::thread::current()), None) {
            return self.await_blocking();
        }
        let signal = self.signal.clone().expect("registered");
        while !signal.done.load(Ordering::Acquire) {
            std::thread::park();
        }
        signal.lock().status.take().unwrap_or(Ok(()))
    }
}

/// What [`Event::release_when_ready`] hands to the plugin's callback: the API (to
/// destroy the callback's error) and the value to drop.
struct Release<K> {
    api: Arc<Api>,
    keep: K,
}

/// The `PJRT_Event_OnReadyCallback` of [`Event::release_when_ready`]: drops the
/// kept value, and destroys the error (its status has no reader).
///
/// # Safety
/// `user_arg` is a `Box<Release<K>>` leaked by `release_when_ready` for this
/// callback alone; `error` is null or an error the callback owns.
unsafe extern "C" fn release_on_ready<K>(error: *mut PJRT_Error, user_arg: *mut c_void) {
    // SAFETY: per the contract above: reclaims the box leaked for us, once.
    let r = unsafe { Box::from_raw(user_arg.cast::<Release<K>>()) };
    let Release { api, keep } = *r;
    if !error.is_null() {
        // Destroys `error` (the callback owns it).
        drop(api.event_error(error));
    }
    drop(keep);
}

impl Event {
    /// Drops `keep` once the event is ready, without waiting for it: at once when
    /// it already is, else from the plugin's `PJRT_Event_OnReady` callback (on a
    /// plugin thread). What `keep` owns (host memory the plugin may still read)
    /// therefore lives until the plugin says it is done with it. When the plugin
    /// takes no callback the thread waits for the event instead; when it refuses
    /// one in a way that leaves unclear whether it will still call it, `keep` is
    /// leaked rather than risk freeing memory the plugin reads.
    pub(crate) fn release_when_ready<K: Send + 'static>(self, keep: K) {
        if matches!(self.is_ready(), Ok(true)) {
            drop(keep);
            return;
        }
        let user_arg = Box::into_raw(Box::new(Release {
            api: self.api.clone(),
            keep,
        }))
        .cast::<c_void>();
        let mut a = raw::PJRT_Event_OnReady_Args::new();
        a.event = self.raw;
        a.callback = Some(release_on_ready::<K>);
        a.user_arg = user_arg;
        // SAFETY: `self.raw` is live (destroyed when `self` drops, after this call;
        // the header lets a pending event be destroyed, its callback still fires).
        // The callback runs once, with an error it owns; `user_arg` is a leaked box
        // only `release_on_ready::<K>` reclaims, so it outlives the callback.
        match unsafe { self.api.call(slot::PJRT_Event_OnReady, &mut a) } {
            Ok(()) => {}
            Err(Error::Unsupported { .. }) => {
                // Never handed to the plugin: the box is ours again.
                // SAFETY: from `Box::into_raw` above, not given to the plugin.
                let r = unsafe { Box::from_raw(user_arg.cast::<Release<K>>()) };
                // Waits until the work is done (an error too is only returned
                // then), so dropping `keep` afterwards is safe.
                let _ = self.wait_with(WaitPolicy::Park);
                drop(r);
            }
            // The plugin refused the callback; whether it may still call it is not
            // specified, so the box stays leaked.
            Err(_) => {}
        }
    }
}

impl Future for Event {
    type Output = Result<()>;

    /// Ready with the work's status once it is done. Polling again after that returns
    /// the same status.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        if let Some(s) = &this.status {
            return Poll::Ready(s.clone());
        }
        if this.signal.is_none() {
            match this.is_ready() {
                Ok(true) => {
                    let s = this.status_of_ready();
                    return Poll::Ready(this.finish(s));
                }
                Ok(false) => {}
                // Reported only once the work is done: it may still use the caller's
                // memory.
                Err(e) => this.early_error = Some(e),
            }
        }
        if !this.register(None, Some(cx.waker().clone())) {
            // No callback: a helper thread waits in the plugin and wakes the task
            // (an executor's worker thread is never blocked here).
            if let Some(s) = this.wait_elsewhere(cx.waker().clone()) {
                return Poll::Ready(this.finish(s));
            }
        }
        let signal = this.signal.as_ref().expect("registered");
        if signal.done.load(Ordering::Acquire) {
            let s = signal.lock().status.take().unwrap_or(Ok(()));
            return Poll::Ready(this.finish(s));
        }
        Poll::Pending
    }
}

impl Event {
    /// For a plugin that takes no `OnReady` callback: hands the event to a new
    /// thread, which waits for it in the plugin (`PJRT_Event_Await`), records the
    /// status in a fresh signal, wakes `waker` and destroys the event. `self` keeps
    /// the signal (its `raw` is null from then on). Returns the status at once when
    /// no thread can be started (then this thread waits).
    fn wait_elsewhere(&mut self, waker: Waker) -> Option<Result<()>> {
        let signal = Arc::new(Signal {
            api: self.api.clone(),
            done: AtomicBool::new(false),
            inner: Mutex::new(SignalInner {
                status: None,
                thread: None,
                waker: Some(waker),
            }),
        });
        let (api, raw, policy) = (self.api.clone(), RawEvent(self.raw), self.policy);
        let for_thread = signal.clone();
        let spawned = std::thread::Builder::new()
            .name("xlaclient-event-wait".into())
            .spawn(move || {
                let raw = raw;
                // Owns the event from here: destroyed when `owned` drops, before
                // the waiter hears of the status.
                let status = match Event::from_raw(&api, raw.0, policy) {
                    Some(owned) => owned.await_blocking(),
                    None => Ok(()),
                };
                for_thread.complete(status);
            });
        match spawned {
            Ok(_) => {
                // The thread owns the event now.
                self.raw = std::ptr::null_mut();
                self.signal = Some(signal);
                None
            }
            // No thread to be had: the closure was dropped unrun (a raw pointer,
            // the event is still ours), so wait here, as a blocking caller would.
            Err(_) => Some(self.await_blocking()),
        }
    }
}

/// An event handle on its way to the thread that will own it.
struct RawEvent(*mut PJRT_Event);

// SAFETY: a `PJRT_Event` may be used from any thread (see `Event`'s `Send`); the
// handle is moved, and only the receiving thread uses it.
unsafe impl Send for RawEvent {}

impl Drop for Event {
    fn drop(&mut self) {
        if self.raw.is_null() {
            // Handed to a helper thread, which destroys it.
            return;
        }
        let mut a = raw::PJRT_Event_Destroy_Args::new();
        a.event = self.raw;
        // SAFETY: we own the event and destroy it once. The header allows destroying
        // a pending event; a registered callback still fires (its `Signal` is kept
        // alive by the reference the callback owns).
        let _ = unsafe { self.api.call(slot::PJRT_Event_Destroy, &mut a) };
    }
}

/// Waits for an optional event (a null event means the work is already done).
pub(crate) fn wait_opt(ev: Option<Event>) -> Result<()> {
    match ev {
        Some(e) => e.wait(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    use super::*;
    use crate::{Client, ClientOptions, CompileOptions, Plugin};

    /// `k` chained 256×256 matmuls with a tanh each, as StableHLO text.
    fn slow_mlir(k: usize) -> String {
        let ty = "tensor<256x256xf32>";
        let mut s = format!("func.func public @main(%x: {ty}) -> {ty} {{\n");
        let mut prev = "%x".to_string();
        for i in 0..k {
            s.push_str(&format!(
                "  %d{i} = stablehlo.dot_general {prev}, %x, contracting_dims = [1] x [0] : ({ty}, {ty}) -> {ty}\n  %t{i} = stablehlo.tanh %d{i} : {ty}\n"
            ));
            prev = format!("%t{i}");
        }
        s.push_str(&format!("  return {prev} : {ty}\n}}\n"));
        s
    }

    struct Counting {
        thread: std::thread::Thread,
        wakes: AtomicUsize,
    }

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.wakes.fetch_add(1, Ordering::SeqCst);
            self.thread.unpark();
        }
    }

    /// The path of a plugin that takes no `OnReady` callback, taken by hand on a
    /// real event: the wait goes to a helper thread, the task is woken, and an
    /// event dropped after the hand-off is destroyed by the helper, not twice.
    #[test]
    fn a_wait_handed_to_a_helper_thread_wakes_the_task() {
        let plugin = Plugin::default_plugin().expect("the plugin under test");
        let c = Client::new(
            &plugin,
            &ClientOptions::new().cpu_device_count(1).asynchronous(true),
        )
        .unwrap();
        let exe = c
            .compile_mlir(slow_mlir(40).as_bytes(), &CompileOptions::new())
            .unwrap();
        let x = c
            .buffer_from_host(&vec![0.5f32; 256 * 256], &[256, 256])
            .unwrap();
        let want = exe.execute_sync(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();

        let out = exe.execute(&[&x]).unwrap();
        let mut ev = out[0].ready_event().unwrap();
        let counting = Arc::new(Counting {
            thread: std::thread::current(),
            wakes: AtomicUsize::new(0),
        });
        let waker = Waker::from(counting.clone());
        let pending = !ev.is_ready().unwrap();
        assert!(ev.wait_elsewhere(waker.clone()).is_none());
        assert!(ev.raw.is_null(), "the helper thread owns the event");
        let mut cx = Context::from_waker(&waker);
        let status = loop {
            match Pin::new(&mut ev).poll(&mut cx) {
                Poll::Ready(s) => break s,
                Poll::Pending => std::thread::park_timeout(Duration::from_millis(50)),
            }
        };
        status.unwrap();
        assert!(ev.is_ready().unwrap());
        if pending {
            assert!(counting.wakes.load(Ordering::SeqCst) >= 1);
        }
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
        // Polling a finished event again gives the same status.
        assert!(matches!(
            Pin::new(&mut ev).poll(&mut cx),
            Poll::Ready(Ok(()))
        ));

        // Handed off, then dropped while the work runs.
        let out2 = exe.execute(&[&x]).unwrap();
        let mut ev2 = out2[0].ready_event().unwrap();
        assert!(ev2.wait_elsewhere(Waker::noop().clone()).is_none());
        drop(ev2);
        assert_eq!(out2[0].to_vec::<f32>().unwrap(), want);
        // And the blocking wait of a handed-off event parks until the helper is done.
        let out3 = exe.execute(&[&x]).unwrap();
        let mut ev3 = out3[0].ready_event().unwrap();
        assert!(ev3.wait_elsewhere(Waker::noop().clone()).is_none());
        ev3.wait().unwrap();
        assert_eq!(out3[0].to_vec::<f32>().unwrap(), want);
    }
}
