//! The raw comparison path of `benches/mlp_overhead.rs`: one MLP-style call
//! (upload an input, execute with resident parameters, download output 0) driven
//! through C function pointers looked up once, with no safe wrapper in between, as a
//! C program would (`pjrt_floor.c` of the benchmark anchors).
//!
//! Not part of the API (hidden from the docs, may change at any time). It lives here
//! so that every `unsafe` line stays in `src/pjrt/`; its interface is safe: it
//! borrows the executable, owns its parameters, and checks every length it hands to
//! C.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::buffer::Buffer;
use super::executable::LoadedExecutable;
use super::raw::{self, CFn, PJRT_Buffer, PJRT_Client, PJRT_Device, PJRT_Event, slot};
use crate::error::{Error, Result};
use crate::shape::ElementType;

/// How the raw path waits for an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawWait {
    /// `PJRT_Event_IsReady` once, then `PJRT_Event_Await` (blocks in the plugin):
    /// the plain C sequence.
    Block,
    /// Poll `PJRT_Event_IsReady` for at most this long, then `PJRT_Event_Await`.
    Spin(Duration),
}

/// Function pointers looked up once, then called directly.
struct Fns {
    from_host: CFn<raw::PJRT_Client_BufferFromHostBuffer_Args>,
    execute: CFn<raw::PJRT_LoadedExecutable_Execute_Args>,
    to_host: CFn<raw::PJRT_Buffer_ToHostBuffer_Args>,
    is_ready: CFn<raw::PJRT_Event_IsReady_Args>,
    await_: CFn<raw::PJRT_Event_Await_Args>,
    event_destroy: CFn<raw::PJRT_Event_Destroy_Args>,
    buffer_destroy: CFn<raw::PJRT_Buffer_Destroy_Args>,
}

/// Raw calls of one executable: parameters resident, an f32 input uploaded per call
/// as the last argument, output 0 (f32) downloaded.
pub struct RawCall<'e> {
    exe: &'e LoadedExecutable,
    client: *mut PJRT_Client,
    device: *mut PJRT_Device,
    params: Vec<Buffer>,
    param_ptrs: Vec<*mut PJRT_Buffer>,
    out_len: usize,
    wait: RawWait,
    fns: Fns,
}

// SAFETY: the pointers are the client, its first device and buffers owned by
// `params`: PJRT clients, devices and buffers may be used from any thread at once
// (what the safe `Client`, `Device` and `Buffer` types rely on too). `exe` is a
// shared borrow of a `Sync` executable; the function pointers are plain code.
unsafe impl Send for RawCall<'_> {}
// SAFETY: see `Send`; `call` takes `&self` and keeps all its state on the stack.
unsafe impl Sync for RawCall<'_> {}

/// Destroys a buffer the raw path created, on every exit path.
struct OwnedRaw<'a>(&'a Fns, *mut PJRT_Buffer);

impl Drop for OwnedRaw<'_> {
    fn drop(&mut self) {
        if self.1.is_null() {
            return;
        }
        let mut d = raw::PJRT_Buffer_Destroy_Args::new();
        d.buffer = self.1;
        // SAFETY: a buffer the plugin returned to us, destroyed exactly once; the
        // header lets a buffer be destroyed while work still uses it (its memory is
        // freed when that work is done). An error here is dropped unread: destroying
        // it needs the error accessors, and Destroy fails only on misuse.
        let _ = unsafe { (self.0.buffer_destroy)(&mut d) };
    }
}

impl<'e> RawCall<'e> {
    /// Prepares raw calls of `exe` with `params` (resident buffers of its client) as
    /// its first arguments. Output 0 must be an f32 array whose shape the plugin
    /// reported at compile time.
    pub fn new(exe: &'e LoadedExecutable, params: Vec<Buffer>, wait: RawWait) -> Result<Self> {
        let client = &exe.client;
        for (argument, p) in params.iter().enumerate() {
            if !std::sync::Arc::ptr_eq(&p.client, client) {
                return Err(Error::ForeignBuffer { argument });
            }
        }
        let out_len = match exe.output_shape(0) {
            Some((ElementType::F32, dims)) => dims.iter().product::<i64>() as usize,
            other => {
                return Err(Error::HostType {
                    what: "program's output 0 (the raw path needs f32)",
                    expected: other.map_or(ElementType::F32, |(t, _)| t),
                    given: ElementType::F32,
                });
            }
        };
        let api = &client.api;
        let fns = Fns {
            from_host: api.slot_fn(slot::PJRT_Client_BufferFromHostBuffer)?,
            execute: api.slot_fn(slot::PJRT_LoadedExecutable_Execute)?,
            to_host: api.slot_fn(slot::PJRT_Buffer_ToHostBuffer)?,
            is_ready: api.slot_fn(slot::PJRT_Event_IsReady)?,
            await_: api.slot_fn(slot::PJRT_Event_Await)?,
            event_destroy: api.slot_fn(slot::PJRT_Event_Destroy)?,
            buffer_destroy: api.slot_fn(slot::PJRT_Buffer_Destroy)?,
        };
        Ok(RawCall {
            exe,
            client: client.raw,
            device: *client.addressable.first().ok_or(Error::NoDevice)?,
            param_ptrs: params.iter().map(|b| b.raw).collect(),
            params,
            out_len,
            wait,
            fns,
        })
    }

    /// The resident parameters.
    pub fn params(&self) -> &[Buffer] {
        &self.params
    }

    fn check(&self, function: &'static str, err: *mut raw::PJRT_Error) -> Result<()> {
        if err.is_null() {
            Ok(())
        } else {
            Err(self.exe.client.api.take_error(function, err))
        }
    }

    /// Waits for `ev` as `self.wait` says, returns its status and destroys it. Waits
    /// even when `IsReady` fails (the plugin may still write into caller memory).
    ///
    /// # Safety
    /// `ev` must be null or a live event the caller owns (it is destroyed here).
    unsafe fn finish_event(&self, ev: *mut PJRT_Event) -> Result<()> {
        if ev.is_null() {
            return Ok(());
        }
        let mut r = raw::PJRT_Event_IsReady_Args::new();
        r.event = ev;
        let budget = match self.wait {
            RawWait::Block => Duration::ZERO,
            RawWait::Spin(d) => d,
        };
        let start = Instant::now();
        let mut first_err = Ok(());
        loop {
            // SAFETY: `ev` is live (destroyed only below).
            let e = unsafe { (self.fns.is_ready)(&mut r) };
            if let Err(e) = self.check("PJRT_Event_IsReady", e) {
                first_err = Err(e);
                break;
            }
            if r.is_ready || start.elapsed() >= budget {
                break;
            }
            std::hint::spin_loop();
        }
        let mut a = raw::PJRT_Event_Await_Args::new();
        a.event = ev;
        // SAFETY: `ev` is live; Await blocks until it is ready and returns its
        // status as an error we own (converted and destroyed by `check`).
        let e = unsafe { (self.fns.await_)(&mut a) };
        let status = self.check("PJRT_Event_Await", e);
        let mut d = raw::PJRT_Event_Destroy_Args::new();
        d.event = ev;
        // SAFETY: destroyed once, after it is ready.
        let e = unsafe { (self.fns.event_destroy)(&mut d) };
        first_err
            .and(status)
            .and(self.check("PJRT_Event_Destroy", e))
    }

    /// One call: upload `input` (f32, `dims`) as the last argument, execute, copy
    /// output 0 into `out` (its length must be output 0's element count).
    pub fn call(&self, input: &[f32], dims: &[i64], out: &mut [f32]) -> Result<()> {
        if super::client::element_count(dims) != Some(input.len() as i64) {
            return Err(Error::HostLength {
                what: format!("dimensions {dims:?}"),
                expected: super::client::element_count(dims).unwrap_or(-1),
                given: input.len(),
            });
        }
        if out.len() != self.out_len {
            return Err(Error::HostLength {
                what: "output 0".into(),
                expected: self.out_len as i64,
                given: out.len(),
            });
        }
        let mut h = raw::PJRT_Client_BufferFromHostBuffer_Args::new();
        h.client = self.client;
        h.data = input.as_ptr().cast();
        h.type_ = raw::PJRT_Buffer_Type_F32;
        h.dims = dims.as_ptr();
        h.num_dims = dims.len();
        h.host_buffer_semantics = raw::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
        h.device = self.device;
        // SAFETY: `input` holds exactly the elements `dims` describe (checked above)
        // and, with "immutable only during call" semantics, is read during the call
        // only; the client and device are live for `'e`.
        let e = unsafe { (self.fns.from_host)(&mut h) };
        self.check("PJRT_Client_BufferFromHostBuffer", e)?;
        let input_buf = OwnedRaw(&self.fns, h.buffer);
        // SAFETY: the event (if any) was returned to us by the upload.
        let uploaded = unsafe { self.finish_event(h.done_with_host_buffer) };

        let mut args: SmallVec<[*mut PJRT_Buffer; 8]> = self.param_ptrs.iter().copied().collect();
        args.push(input_buf.1);
        let arg_lists = [args.as_ptr()];
        let n_out = self.exe.num_outputs();
        let mut outs: SmallVec<[*mut PJRT_Buffer; 4]> =
            SmallVec::from_elem(std::ptr::null_mut(), n_out);
        let out_lists = [outs.as_mut_ptr()];
        // Nothing is donated: the resident parameters are shared by every call (and
        // every thread: `RawCall` is `Sync`), and the plugin aborts on donating a
        // buffer another call holds. Listing every input as non-donatable makes a
        // module that aliases an input copy instead.
        let keep: SmallVec<[i64; 8]> = (0..args.len() as i64).collect();
        let mut opts = raw::PJRT_ExecuteOptions::new();
        opts.non_donatable_input_indices = keep.as_ptr();
        opts.num_non_donatable_input_indices = keep.len();
        let mut x = raw::PJRT_LoadedExecutable_Execute_Args::new();
        x.executable = self.exe.raw;
        x.options = &mut opts;
        x.argument_lists = arg_lists.as_ptr();
        x.num_devices = 1;
        x.num_args = args.len();
        x.output_lists = out_lists.as_ptr();
        // SAFETY: the header's Execute contract: one argument list of `num_args`
        // live buffers (resident parameters owned by `self`, the input buffer owned
        // above), one caller-allocated output list of `num_outputs` slots, and
        // options (with the non-donatable list) that outlive the call.
        let e = unsafe { (self.fns.execute)(&mut x) };
        self.check("PJRT_LoadedExecutable_Execute", e)?;
        let outputs: SmallVec<[OwnedRaw<'_>; 4]> =
            outs.iter().map(|p| OwnedRaw(&self.fns, *p)).collect();

        let mut t = raw::PJRT_Buffer_ToHostBuffer_Args::new();
        t.src = outputs[0].1;
        t.dst = out.as_mut_ptr().cast();
        t.dst_size = std::mem::size_of_val(out);
        // SAFETY: `out` has room for exactly output 0 (f32, `out_len` elements,
        // checked above) and is not touched again before the copy's event is done,
        // which `finish_event` waits for before this function returns.
        let e = unsafe { (self.fns.to_host)(&mut t) };
        self.check("PJRT_Buffer_ToHostBuffer", e)?;
        // SAFETY: the copy's event, returned to us.
        let copied = unsafe { self.finish_event(t.event) };
        drop(outputs);
        drop(input_buf);
        uploaded.and(copied)
    }
}
