//! `PJRT_Event`: completion of asynchronous work (a transfer, an execution).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::api::Api;
use super::raw::{self, PJRT_Event, slot};
use crate::error::Result;

/// How long [`Event::wait`] polls `PJRT_Event_IsReady` before it blocks in
/// `PJRT_Event_Await`. Blocking costs a thread sleep and wake-up (about 40 µs on a
/// small VM); short work finishes well within this window.
pub const SPIN_BEFORE_BLOCKING: Duration = Duration::from_millis(1);

/// A pending completion, owned: destroyed exactly once when dropped.
///
/// # Thread safety
/// `Event` is `Send` (PJRT events may be awaited from any thread) but not `Sync`.
pub struct Event {
    api: Arc<Api>,
    raw: *mut PJRT_Event,
}

// SAFETY: PJRT events are thread-safe reference-counted futures; one owner may move
// between threads.
unsafe impl Send for Event {}

impl Event {
    /// Takes ownership of `raw` (which may be null: then the event counts as done).
    pub(crate) fn from_raw(api: &Arc<Api>, raw: *mut PJRT_Event) -> Option<Event> {
        if raw.is_null() {
            None
        } else {
            Some(Event {
                api: api.clone(),
                raw,
            })
        }
    }

    /// True once the work is done (successfully or not).
    pub fn is_ready(&self) -> Result<bool> {
        let mut a = raw::PJRT_Event_IsReady_Args::new();
        a.event = self.raw;
        // SAFETY: `self.raw` is a live event we own.
        unsafe { self.api.call(slot::PJRT_Event_IsReady, &mut a)? };
        Ok(a.is_ready)
    }

    /// Waits until the work is done and returns its status. Polls first (see
    /// [`SPIN_BEFORE_BLOCKING`]), then blocks.
    pub fn wait(self) -> Result<()> {
        self.wait_spinning(SPIN_BEFORE_BLOCKING)
    }

    /// Waits, polling for at most `spin` before blocking in `PJRT_Event_Await`.
    pub fn wait_spinning(self, spin: Duration) -> Result<()> {
        if !spin.is_zero() {
            let start = Instant::now();
            let mut i = 0u32;
            while !self.is_ready()? {
                i = i.wrapping_add(1);
                if i % 64 == 0 && start.elapsed() >= spin {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let mut a = raw::PJRT_Event_Await_Args::new();
        a.event = self.raw;
        // SAFETY: `self.raw` is a live event; Await on a ready event returns at once
        // with its status.
        unsafe { self.api.call(slot::PJRT_Event_Await, &mut a) }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let mut a = raw::PJRT_Event_Destroy_Args::new();
        a.event = self.raw;
        // SAFETY: we own the event and destroy it once; a pending event may be
        // destroyed (the plugin keeps its own reference to the work).
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
