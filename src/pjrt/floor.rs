//! The per-call floor: one MLP-style call (upload an observation, execute with
//! resident parameters, download the output) driven through the raw C function
//! table with no safe wrapper in between, exactly as a C program would (the shape of
//! `pjrt_floor.c` in the benchmark anchors, with events polled before they are
//! awaited). `benches/mlp_overhead.rs` measures the safe API against it.
//!
//! Not part of the stable API; public so that the benchmark can reach it while every
//! `unsafe` line stays in `src/pjrt/`.

use std::ffi::c_void;

use super::buffer::Buffer;
use super::client::Client;
use super::executable::LoadedExecutable;
use super::raw::{self, ErrFn, PJRT_Buffer, PJRT_Event, slot};
use crate::error::{Error, Result};

/// Function pointers looked up once, then called directly.
pub struct RawMlpCall {
    client: Client,
    exe_raw: *mut raw::PJRT_LoadedExecutable,
    device: *mut raw::PJRT_Device,
    params: Vec<*mut PJRT_Buffer>,
    _keep: Vec<Buffer>,
    from_host: ErrFn,
    execute: ErrFn,
    to_host: ErrFn,
    is_ready: ErrFn,
    await_: ErrFn,
    event_destroy: ErrFn,
    buffer_destroy: ErrFn,
}

impl RawMlpCall {
    /// Prepares raw calls of `exe` with `params` (resident buffers) as its first
    /// arguments; the observation is the last argument, the output is one array.
    pub fn new(client: &Client, exe: &LoadedExecutable, params: Vec<Buffer>) -> Result<Self> {
        let api = &client.inner.api;
        let get = |s| -> Result<ErrFn> {
            let p = api.slot_fn(s)?;
            Ok(p)
        };
        Ok(RawMlpCall {
            client: client.clone(),
            exe_raw: exe.raw_handle(),
            device: *client
                .inner
                .addressable
                .first()
                .ok_or_else(|| Error::HostData {
                    reason: "no device".into(),
                })?,
            params: params.iter().map(|b| b.raw).collect(),
            _keep: params,
            from_host: get(slot::PJRT_Client_BufferFromHostBuffer)?,
            execute: get(slot::PJRT_LoadedExecutable_Execute)?,
            to_host: get(slot::PJRT_Buffer_ToHostBuffer)?,
            is_ready: get(slot::PJRT_Event_IsReady)?,
            await_: get(slot::PJRT_Event_Await)?,
            event_destroy: get(slot::PJRT_Event_Destroy)?,
            buffer_destroy: get(slot::PJRT_Buffer_Destroy)?,
        })
    }

    fn check(&self, f: &'static str, err: *mut raw::PJRT_Error) -> Result<()> {
        if err.is_null() {
            Ok(())
        } else {
            Err(self.client.inner.api.take_error(f, err))
        }
    }

    /// Polls the event until ready, awaits it (returns its status) and destroys it.
    ///
    /// # Safety
    /// `ev` must be a live event (or null).
    unsafe fn spin_await(&self, ev: *mut PJRT_Event) -> Result<()> {
        if ev.is_null() {
            return Ok(());
        }
        let mut r = raw::PJRT_Event_IsReady_Args::new();
        r.event = ev;
        loop {
            // SAFETY: `ev` is live.
            let e = unsafe {
                (self.is_ready)((&mut r as *mut raw::PJRT_Event_IsReady_Args).cast::<c_void>())
            };
            self.check("PJRT_Event_IsReady", e)?;
            if r.is_ready {
                break;
            }
            std::hint::spin_loop();
        }
        let mut a = raw::PJRT_Event_Await_Args::new();
        a.event = ev;
        // SAFETY: `ev` is live and ready.
        let e =
            unsafe { (self.await_)((&mut a as *mut raw::PJRT_Event_Await_Args).cast::<c_void>()) };
        let status = self.check("PJRT_Event_Await", e);
        let mut d = raw::PJRT_Event_Destroy_Args::new();
        d.event = ev;
        // SAFETY: destroyed once.
        let e = unsafe {
            (self.event_destroy)((&mut d as *mut raw::PJRT_Event_Destroy_Args).cast::<c_void>())
        };
        status.and(self.check("PJRT_Event_Destroy", e))
    }

    /// One call: upload `obs` (f32, `obs_dims`), execute, download into `out`.
    pub fn call(&self, obs: &[f32], obs_dims: &[i64], out: &mut [f32]) -> Result<()> {
        // SAFETY: every pointer handed to C is live for the call that uses it: `obs`
        // and `obs_dims` (copied during the upload call: "immutable only during
        // call"), the argument/output arrays on this stack frame, `out` (written by
        // the device-to-host copy, which is awaited before returning). Each buffer
        // and event created here is destroyed exactly once.
        unsafe {
            let mut h = raw::PJRT_Client_BufferFromHostBuffer_Args::new();
            h.client = self.client.inner.raw;
            h.data = obs.as_ptr().cast();
            h.type_ = raw::PJRT_Buffer_Type_F32;
            h.dims = obs_dims.as_ptr();
            h.num_dims = obs_dims.len();
            h.host_buffer_semantics = raw::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
            h.device = self.device;
            let e = (self.from_host)(
                (&mut h as *mut raw::PJRT_Client_BufferFromHostBuffer_Args).cast(),
            );
            self.check("PJRT_Client_BufferFromHostBuffer", e)?;
            let obs_buf = h.buffer;

            let mut args: [*mut PJRT_Buffer; 8] = [std::ptr::null_mut(); 8];
            let n = self.params.len();
            args[..n].copy_from_slice(&self.params);
            args[n] = obs_buf;
            let arg_lists: [*const *mut PJRT_Buffer; 1] = [args.as_ptr()];
            let mut outs: [*mut PJRT_Buffer; 1] = [std::ptr::null_mut()];
            let out_lists: [*mut *mut PJRT_Buffer; 1] = [outs.as_mut_ptr()];
            let mut opts = raw::PJRT_ExecuteOptions::new();
            let mut x = raw::PJRT_LoadedExecutable_Execute_Args::new();
            x.executable = self.exe_raw;
            x.options = &mut opts;
            x.argument_lists = arg_lists.as_ptr();
            x.num_devices = 1;
            x.num_args = n + 1;
            x.output_lists = out_lists.as_ptr();
            let e = (self.execute)((&mut x as *mut raw::PJRT_LoadedExecutable_Execute_Args).cast());
            self.check("PJRT_LoadedExecutable_Execute", e)?;

            let mut t = raw::PJRT_Buffer_ToHostBuffer_Args::new();
            t.src = outs[0];
            t.dst = out.as_mut_ptr().cast();
            t.dst_size = std::mem::size_of_val(out);
            let e = (self.to_host)((&mut t as *mut raw::PJRT_Buffer_ToHostBuffer_Args).cast());
            self.check("PJRT_Buffer_ToHostBuffer", e)?;
            let copied = self.spin_await(t.event);

            for b in [outs[0], obs_buf] {
                let mut d = raw::PJRT_Buffer_Destroy_Args::new();
                d.buffer = b;
                let e =
                    (self.buffer_destroy)((&mut d as *mut raw::PJRT_Buffer_Destroy_Args).cast());
                self.check("PJRT_Buffer_Destroy", e)?;
            }
            self.spin_await(h.done_with_host_buffer)?;
            copied
        }
    }
}
