//! The raw comparison path of `benches/call_paths.rs`: one MLP-style call
//! (upload an input, execute with resident parameters, read output 0) driven
//! through C function pointers looked up once, with no safe wrapper in between, as a
//! C program would (`pjrt_floor.c` of the benchmark anchors). By default it is the
//! anchors' floor (`pjrt_floor.c --d2h ptr --no-exec-event`): no completion event
//! asked of the execution, output 0 read through `PJRT_Buffer_ReadyEvent` +
//! `PJRT_Buffer_UnsafePointer` + `memcpy` where the buffer is on the CPU;
//! [`RawCall::read`] and [`RawCall::upload`] pick the other sequences.
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

/// How the raw path reads output 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawRead {
    /// `PJRT_Buffer_ReadyEvent`, wait, `PJRT_Buffer_UnsafePointer`, `memcpy`: the
    /// anchors' floor (`--d2h ptr`), CPU plugins only (checked once, at
    /// [`RawCall::new`], by `PJRT_Buffer_IsOnCpu` on a parameter).
    Pointer,
    /// `PJRT_Buffer_ToHostBuffer` and a wait for its event (`--d2h copy`).
    Copy,
}

/// How the raw path uploads its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawUpload {
    /// `kImmutableOnlyDuringCall`: the plugin copies during the call.
    DuringCall,
    /// `kImmutableZeroCopy`: the plugin may use the host memory itself (when it is
    /// aligned as the plugin wants); the input buffer is destroyed and its
    /// done-with-host-buffer event waited for before the call returns.
    ZeroCopy,
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
    ready_event: CFn<raw::PJRT_Buffer_ReadyEvent_Args>,
    unsafe_pointer: CFn<raw::PJRT_Buffer_UnsafePointer_Args>,
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
    read: RawRead,
    upload: RawUpload,
    on_cpu: bool,
    /// Whether output 0 holds exactly `out_len` f32 values on the device (asked of
    /// the first output; the program's output shape is static).
    pointer_ok: std::sync::OnceLock<bool>,
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
    /// reported at compile time. Reads by pointer ([`RawRead::Pointer`]) when the
    /// parameters live on the CPU, else by copy; uploads with
    /// [`RawUpload::DuringCall`].
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
            ready_event: api.slot_fn(slot::PJRT_Buffer_ReadyEvent)?,
            unsafe_pointer: api.slot_fn(slot::PJRT_Buffer_UnsafePointer)?,
        };
        let on_cpu = match params.first() {
            Some(p) => {
                let b = p.raw;
                // SAFETY: a live buffer owned by `params`; the answer is a bool.
                matches!(unsafe { api.query(slot::PJRT_Buffer_IsOnCpu, |a| a.buffer = b) },
                    Ok(a) if a.is_on_cpu)
            }
            None => false,
        };
        Ok(RawCall {
            exe,
            client: client.raw,
            device: *client.addressable.first().ok_or(Error::NoDevice)?,
            param_ptrs: params.iter().map(|b| b.raw).collect(),
            params,
            out_len,
            wait,
            read: if on_cpu {
                RawRead::Pointer
            } else {
                RawRead::Copy
            },
            upload: RawUpload::DuringCall,
            on_cpu,
            pointer_ok: std::sync::OnceLock::new(),
            fns,
        })
    }

    /// Reads output 0 this way ([`RawRead::Pointer`] only where the parameters
    /// live on the CPU: elsewhere it stays [`RawRead::Copy`]).
    pub fn read(mut self, read: RawRead) -> Self {
        self.read = if self.on_cpu { read } else { RawRead::Copy };
        self
    }

    /// Uploads the input this way.
    pub fn upload(mut self, upload: RawUpload) -> Self {
        self.upload = upload;
        self
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
        h.host_buffer_semantics = match self.upload {
            RawUpload::DuringCall => raw::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
            RawUpload::ZeroCopy => raw::PJRT_HostBufferSemantics_kImmutableZeroCopy,
        };
        h.device = self.device;
        // SAFETY: `input` holds exactly the elements `dims` describe (checked above).
        // With "immutable only during call" semantics it is read during the call
        // only; with zero-copy semantics the plugin may read it until the
        // done-with-host-buffer event fires, which this function waits for (after
        // destroying the input buffer) before it returns, while `input` is borrowed
        // and so unmodified. The client and device are live for `'e`.
        let e = unsafe { (self.fns.from_host)(&mut h) };
        self.check("PJRT_Client_BufferFromHostBuffer", e)?;
        // Destroys the input buffer and then waits for its done-with-host-buffer
        // event, on every path.
        let input = Input {
            call: self,
            buf: h.buffer,
            done: h.done_with_host_buffer,
        };

        let mut args: SmallVec<[*mut PJRT_Buffer; 8]> = self.param_ptrs.iter().copied().collect();
        args.push(input.buf);
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

        let read = match self.read {
            RawRead::Copy => self.copy_out(outputs[0].1, out),
            RawRead::Pointer if self.pointer_readable(outputs[0].1, out.len()) => {
                self.read_pointer(outputs[0].1, out)
            }
            RawRead::Pointer => self.copy_out(outputs[0].1, out),
        };
        drop(outputs);
        let uploaded = input.finish();
        read.and(uploaded)
    }

    /// `PJRT_Buffer_ToHostBuffer` of `buf` (output 0, live, owned by the caller)
    /// into `out` (its length checked by `call`), and the wait for it.
    fn copy_out(&self, buf: *mut PJRT_Buffer, out: &mut [f32]) -> Result<()> {
        let mut t = raw::PJRT_Buffer_ToHostBuffer_Args::new();
        t.src = buf;
        t.dst = out.as_mut_ptr().cast();
        t.dst_size = std::mem::size_of_val(out);
        // SAFETY: `out` has room for exactly output 0 (f32, `out_len` elements,
        // checked by `call`) and is not touched again before the copy's event is
        // done, which `finish_event` waits for before this function returns.
        let e = unsafe { (self.fns.to_host)(&mut t) };
        self.check("PJRT_Buffer_ToHostBuffer", e)?;
        // SAFETY: the copy's event, returned to us.
        unsafe { self.finish_event(t.event) }
    }

    /// Whether output 0 (`buf`, live) takes exactly `len` f32 values on the device,
    /// asked once per `RawCall`.
    fn pointer_readable(&self, buf: *mut PJRT_Buffer, len: usize) -> bool {
        *self.pointer_ok.get_or_init(|| {
            // SAFETY: a live buffer owned by the caller; the answer is a size.
            let size = unsafe {
                self.exe
                    .client
                    .api
                    .query(slot::PJRT_Buffer_OnDeviceSizeInBytes, |a| a.buffer = buf)
            };
            matches!(size, Ok(a) if a.on_device_size_in_bytes == len * 4)
        })
    }

    /// Waits until `buf` (output 0 of an execution) is ready, then copies its
    /// memory into `out`.
    fn read_pointer(&self, buf: *mut PJRT_Buffer, out: &mut [f32]) -> Result<()> {
        let mut r = raw::PJRT_Buffer_ReadyEvent_Args::new();
        r.buffer = buf;
        // SAFETY: `buf` is a live buffer owned by the caller; the event is ours.
        let e = unsafe { (self.fns.ready_event)(&mut r) };
        self.check("PJRT_Buffer_ReadyEvent", e)?;
        // SAFETY: the ready event, returned to us.
        unsafe { self.finish_event(r.event)? };
        let mut u = raw::PJRT_Buffer_UnsafePointer_Args::new();
        u.buffer = buf;
        // SAFETY: a live buffer; the answer is an address.
        let e = unsafe { (self.fns.unsafe_pointer)(&mut u) };
        self.check("PJRT_Buffer_UnsafePointer", e)?;
        if u.buffer_pointer == 0 {
            return Err(Error::Unsupported {
                function: "PJRT_Buffer_UnsafePointer (null address)",
                api_version: self.exe.client.api.version(),
            });
        }
        // SAFETY: the buffer lives on the CPU (checked at `new`), is ready (its
        // computation is done, so nothing writes it any more) and owned by the
        // caller until after this copy; it takes exactly `out`'s bytes on the device
        // (`pointer_readable`, the output's static size), and `out` is a distinct
        // writable slice. (The order of the values is the program's output layout,
        // dense row-major for these programs; the bench compares the values with
        // the safe path's.)
        unsafe {
            std::ptr::copy_nonoverlapping(
                u.buffer_pointer as *const u8,
                out.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(out),
            );
        }
        Ok(())
    }
}

/// The uploaded input: on drop or [`finish`](Input::finish), the buffer is destroyed
/// first and then its done-with-host-buffer event waited for (a zero-copy input's
/// event fires only once the buffer is gone); after that the plugin no longer reads
/// the host input.
struct Input<'r, 'e> {
    call: &'r RawCall<'e>,
    buf: *mut PJRT_Buffer,
    done: *mut PJRT_Event,
}

impl Input<'_, '_> {
    fn release(&mut self) -> Result<()> {
        drop(OwnedRaw(
            &self.call.fns,
            std::mem::replace(&mut self.buf, std::ptr::null_mut()),
        ));
        let ev = std::mem::replace(&mut self.done, std::ptr::null_mut());
        // SAFETY: the event (if any) was returned to us by the upload and is
        // finished once (the field is cleared).
        unsafe { self.call.finish_event(ev) }
    }

    fn finish(mut self) -> Result<()> {
        self.release()
    }
}

impl Drop for Input<'_, '_> {
    fn drop(&mut self) {
        let _ = self.release();
    }
}
