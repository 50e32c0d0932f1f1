//! `PJRT_Buffer`: an array on a device.

use std::ffi::c_int;
use std::fmt;
use std::sync::{Arc, OnceLock};

use super::client::ClientInner;
use super::device::Device;
use super::event::Event;
use super::raw::{self, PJRT_Buffer, slot};
use crate::error::{Error, Result};
use crate::host::{AlignedHost, Lent};
use crate::shape::{Dims, ElementType, NativeType, Shape};

/// The C API's buffer type number for an element type.
pub(crate) fn buffer_type_of(t: ElementType) -> c_int {
    match t {
        ElementType::Pred => raw::PJRT_Buffer_Type_PRED,
        ElementType::S8 => raw::PJRT_Buffer_Type_S8,
        ElementType::S16 => raw::PJRT_Buffer_Type_S16,
        ElementType::S32 => raw::PJRT_Buffer_Type_S32,
        ElementType::S64 => raw::PJRT_Buffer_Type_S64,
        ElementType::U8 => raw::PJRT_Buffer_Type_U8,
        ElementType::U16 => raw::PJRT_Buffer_Type_U16,
        ElementType::U32 => raw::PJRT_Buffer_Type_U32,
        ElementType::U64 => raw::PJRT_Buffer_Type_U64,
        ElementType::F16 => raw::PJRT_Buffer_Type_F16,
        ElementType::Bf16 => raw::PJRT_Buffer_Type_BF16,
        ElementType::F32 => raw::PJRT_Buffer_Type_F32,
        ElementType::F64 => raw::PJRT_Buffer_Type_F64,
        ElementType::C64 => raw::PJRT_Buffer_Type_C64,
        ElementType::C128 => raw::PJRT_Buffer_Type_C128,
        ElementType::F8E5M2 => raw::PJRT_Buffer_Type_F8E5M2,
        ElementType::F8E4M3FN => raw::PJRT_Buffer_Type_F8E4M3FN,
    }
}

/// The element type of a C API buffer type number, if the crate supports it.
pub(crate) fn element_type_of(t: c_int) -> Option<ElementType> {
    ElementType::ALL
        .into_iter()
        .find(|e| buffer_type_of(*e) == t)
}

/// An array on a device, owned: destroyed exactly once when dropped.
///
/// Buffers come from [`Client::buffer_from_host`](super::Client::buffer_from_host)
/// or are the outputs of [`LoadedExecutable::execute`](super::LoadedExecutable::execute);
/// an output can be passed straight back as an input, without a trip to the host.
///
/// # Thread safety
/// `Buffer` is `Send` and `Sync`: PJRT buffers are thread-safe.
pub struct Buffer {
    pub(crate) client: Arc<ClientInner>,
    pub(crate) raw: *mut PJRT_Buffer,
    /// Element type and dims, when known without asking the plugin (uploads and
    /// outputs of executables whose output shapes were read at compile time).
    meta: OnceLock<(ElementType, Dims)>,
    /// For a buffer uploaded from an [`AlignedHost`]: the host memory, which the
    /// plugin may use as the buffer's own until the done event fires.
    host: Option<HostLease>,
}

/// Host memory lent to the plugin by an upload without a copy, and the upload's
/// done-with-host-buffer event (null: the plugin said it was done at once), owned
/// by the buffer (wrapped in an `Event` when the buffer is taken apart; kept raw
/// so that a buffer stays small).
pub(crate) struct HostLease {
    pub(crate) memory: Lent,
    pub(crate) done: *mut raw::PJRT_Event,
}

// SAFETY: a PJRT buffer is owned by exactly one `Buffer` (destroyed once, in Drop)
// and only used through the C API, which PJRT allows from any thread (buffers are
// shared by JAX's threads); the `Arc` keeps the client, which owns the device
// memory, alive. Moving a `Buffer` to another thread moves the only handle.
unsafe impl Send for Buffer {}
// SAFETY: see `Send`. Every method takes `&self` and only makes C calls the
// plugin synchronises itself (queries, ready events, copies to the host, use as a
// kept execution argument), so any number of threads may make them at once. The
// one use the plugin does not synchronise, donation (it aborts on a buffer another
// thread holds), needs the `Buffer` by value (`Arg::Donate`), which no `&Buffer`
// can give: no shared reference can exist while a buffer is donated. Lent host
// memory (`host`) is never written through `&Buffer` (the plugin only reads it,
// in-place reads copy out of it), and its `Event` is only used by value (in
// `into_host` and `Drop`), never through a shared reference.
unsafe impl Sync for Buffer {}

impl Buffer {
    pub(crate) fn from_raw(client: &Arc<ClientInner>, raw: *mut PJRT_Buffer) -> Buffer {
        Buffer {
            client: client.clone(),
            raw,
            meta: OnceLock::new(),
            host: None,
        }
    }

    /// A buffer uploaded without a copy from `memory`, which it keeps until the
    /// plugin is done with it (`done`).
    pub(crate) fn with_host(
        client: &Arc<ClientInner>,
        raw: *mut PJRT_Buffer,
        ty: ElementType,
        dims: &[i64],
        lease: HostLease,
    ) -> Buffer {
        let mut b = Buffer::with_meta(client, raw, ty, dims);
        b.host = Some(lease);
        b
    }

    /// Whether the buffer holds host memory lent to the plugin (such a buffer is
    /// never donated: its memory is an array of the caller or of the client's
    /// pool, not the plugin's to reuse).
    pub(crate) fn holds_host(&self) -> bool {
        self.host.is_some()
    }

    /// A buffer whose element type and dims are already known.
    pub(crate) fn with_meta(
        client: &Arc<ClientInner>,
        raw: *mut PJRT_Buffer,
        ty: ElementType,
        dims: &[i64],
    ) -> Buffer {
        let b = Buffer::from_raw(client, raw);
        let _ = b.meta.set((ty, dims.into()));
        b
    }

    /// Element type and dims, asked of the plugin once.
    pub(crate) fn meta(&self) -> Result<&(ElementType, Dims)> {
        if let Some(m) = self.meta.get() {
            return Ok(m);
        }
        let m = (self.query_element_type()?, self.query_dims()?.into());
        Ok(self.meta.get_or_init(|| m))
    }

    /// The element type.
    pub fn element_type(&self) -> Result<ElementType> {
        Ok(self.meta()?.0)
    }

    /// The dimension sizes.
    pub fn dims(&self) -> Result<Vec<i64>> {
        Ok(self.meta()?.1.to_vec())
    }

    fn query_element_type(&self) -> Result<ElementType> {
        let b = self.raw;
        // SAFETY: `b` is a live buffer we own; a plain out-parameter.
        let a = unsafe {
            self.client
                .api
                .query(slot::PJRT_Buffer_ElementType, |a| a.buffer = b)?
        };
        element_type_of(a.type_).ok_or(Error::UnsupportedElementType { pjrt_type: a.type_ })
    }

    fn query_dims(&self) -> Result<Vec<i64>> {
        let b = self.raw;
        // SAFETY: `b` is a live buffer we own; the header: the dims "have the
        // lifetime of `buffer`", and they are copied at once.
        unsafe {
            let a = self
                .client
                .api
                .query(slot::PJRT_Buffer_Dimensions, |a| a.buffer = b)?;
            Ok(super::api::raw_slice(a.dims, a.num_dims).to_vec())
        }
    }

    /// The shape (element type and dimensions).
    pub fn shape(&self) -> Result<Shape> {
        Ok(Shape::array(self.element_type()?, &self.dims()?))
    }

    /// Bytes the buffer takes on its device.
    pub fn on_device_size_in_bytes(&self) -> Result<usize> {
        let b = self.raw;
        // SAFETY: `b` is a live buffer we own (never donated while borrowed).
        let a = unsafe {
            self.client
                .api
                .query(slot::PJRT_Buffer_OnDeviceSizeInBytes, |a| a.buffer = b)?
        };
        Ok(a.on_device_size_in_bytes)
    }

    /// The device holding the buffer.
    pub fn device(&self) -> Result<Device> {
        let b = self.raw;
        // SAFETY: `b` is a live buffer we own; the device it names is owned by the
        // client, which `Device` keeps alive.
        let a = unsafe {
            self.client
                .api
                .query(slot::PJRT_Buffer_Device, |a| a.buffer = b)?
        };
        Ok(Device::new(&self.client, a.device))
    }

    /// Copies the buffer to another device.
    pub fn copy_to_device(&self, device: &Device) -> Result<Buffer> {
        if !Arc::ptr_eq(&device.client, &self.client) {
            return Err(Error::ForeignDevice);
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            let bytes = self
                .meta()
                .ok()
                .map(|(ty, dims)| ty.byte_size() * dims.iter().product::<i64>().max(0) as usize);
            tracing::debug!(bytes, "device_to_device");
        }
        let (b, d) = (self.raw, device.raw);
        // SAFETY: a live buffer and a device of the same live client; the new
        // buffer is returned to us to own.
        let a = unsafe {
            self.client.api.query(slot::PJRT_Buffer_CopyToDevice, |a| {
                a.buffer = b;
                a.dst_device = d;
            })?
        };
        // Owned by the destination device's client (the same client, checked
        // above; taken from the device so that a copy can never outlive the
        // client that holds its memory).
        Ok(Buffer::from_raw(&device.client, a.dst_buffer))
    }

    /// Waits until the buffer's contents are computed (or their computation failed).
    pub fn ready(&self) -> Result<()> {
        let b = self.raw;
        // SAFETY: a live buffer we own; the returned event is ours to destroy
        // (`Event` does).
        let a = unsafe {
            self.client
                .api
                .query(slot::PJRT_Buffer_ReadyEvent, |a| a.buffer = b)?
        };
        super::event::wait_opt(self.client.event(a.event))
    }

    /// The buffer's ready event, to `.await` (or [`wait`](Event::wait) for): it
    /// completes once the buffer's contents are computed, with the computation's
    /// error if it failed. Awaiting it never blocks the executor's thread (see
    /// [`Event`]). A buffer that is already ready gives an event that is done.
    ///
    /// ```
    /// # let client = xlaclient_pjrt::Client::cpu()?;
    /// let x = client.buffer_from_host(&[1.0f32, 2.0], &[2])?;
    /// let ready = x.ready_event()?;
    /// ready.wait()?; // or `ready.await?` in async code
    /// # Ok::<(), xlaclient_pjrt::Error>(())
    /// ```
    pub fn ready_event(&self) -> Result<Event> {
        let b = self.raw;
        // SAFETY: a live buffer we own; the returned event is ours to destroy
        // (`Event` does).
        let a = unsafe {
            self.client
                .api
                .query(slot::PJRT_Buffer_ReadyEvent, |a| a.buffer = b)?
        };
        Ok(self
            .client
            .event(a.event)
            .unwrap_or_else(|| Event::done(&self.client.api, self.client.wait))
            .keeping(&self.client))
    }

    /// Checks that `out` can hold the buffer: the same element type and count.
    fn check_host<T: NativeType>(&self, out: &[T]) -> Result<()> {
        let (ty, dims) = self.meta()?;
        if *ty != T::TYPE {
            return Err(Error::HostType {
                what: "buffer",
                expected: *ty,
                given: T::TYPE,
            });
        }
        let n: i64 = dims.iter().product();
        if n != out.len() as i64 {
            return Err(Error::HostLength {
                what: format!("the buffer's dimensions {dims:?}"),
                expected: n,
                given: out.len(),
            });
        }
        Ok(())
    }

    /// Copies the buffer's values to the host into `out`, whose length must equal
    /// the buffer's element count and whose type must match its element type; waits
    /// for the computation that produces them.
    ///
    /// Where the buffer lives in host memory (a CPU device) in the dense row-major
    /// layout (minor-to-major `[rank-1, …, 0]`, no tiles) and takes exactly `out`'s
    /// bytes, it waits for the buffer to be ready and copies its memory with
    /// `memcpy`, on the calling thread. Anything else (another device, another
    /// layout, a plugin without the needed functions) goes through the plugin's
    /// device-to-host transfer ([`copy_to_host_via_plugin`](Self::copy_to_host_via_plugin)),
    /// so the values are the same either way. The in-place read skips the plugin's
    /// transfer, which the CPU plugin runs as a task on a worker thread even for a
    /// synchronous client: a thread hand-off that costs tens of µs on a small, busy
    /// machine (more after the thread has slept), for a copy of a few bytes.
    ///
    /// # Errors
    /// Another element type or length than the buffer's ([`Error::HostType`],
    /// [`Error::HostLength`]); the failure of the computation that defines the
    /// buffer ([`Error::Execution`]).
    pub fn copy_to_host<T: NativeType>(&self, out: &mut [T]) -> Result<()> {
        self.check_host(out)?;
        tracing::debug!(bytes = std::mem::size_of_val(out), ty = %T::TYPE, "device_to_host");
        if self.read_host_memory(out)? {
            return Ok(());
        }
        // SAFETY: `out` is a writable slice of exactly the buffer's byte size (checked
        // above: same element type, same count), alive until the copy event fires,
        // which `copy_raw` waits for.
        unsafe { self.copy_raw(out.as_mut_ptr().cast(), std::mem::size_of_val(out)) }
    }

    /// Copies the buffer to the host through the plugin's device-to-host transfer
    /// (`PJRT_Buffer_ToHostBuffer`) always, even where
    /// [`copy_to_host`](Self::copy_to_host) would read the memory in place.
    ///
    /// # Errors
    /// As [`copy_to_host`](Self::copy_to_host).
    pub fn copy_to_host_via_plugin<T: NativeType>(&self, out: &mut [T]) -> Result<()> {
        self.check_host(out)?;
        tracing::debug!(bytes = std::mem::size_of_val(out), ty = %T::TYPE, "device_to_host");
        // SAFETY: as in `copy_to_host`.
        unsafe { self.copy_raw(out.as_mut_ptr().cast(), std::mem::size_of_val(out)) }
    }

    /// The same as [`copy_to_host`](Self::copy_to_host), which reads in place
    /// wherever it can (this name is from before that was the default).
    ///
    /// # Errors
    /// As [`copy_to_host`](Self::copy_to_host).
    pub fn read_in_place<T: NativeType>(&self, out: &mut [T]) -> Result<()> {
        self.copy_to_host(out)
    }

    /// Reads the buffer's memory into `out` (whose type and length are checked)
    /// when it can be read in place; `Ok(false)` when it cannot (the caller then
    /// copies through the plugin).
    fn read_host_memory<T: NativeType>(&self, out: &mut [T]) -> Result<bool> {
        let size = std::mem::size_of_val(out);
        if size == 0 {
            // Nothing to read; the computation's failure, if any, is still reported.
            self.ready()?;
            return Ok(true);
        }
        let rank = self.meta()?.1.len();
        if !self.host_readable(rank, size)? {
            return Ok(false);
        }
        // Waits for the computation that defines the buffer (and reports its
        // failure); after this the memory holds the final values.
        self.ready()?;
        let b = self.raw;
        // SAFETY: a live buffer we own; the answer is an address.
        let pointer = match unsafe {
            self.client
                .api
                .query(slot::PJRT_Buffer_UnsafePointer, |a| a.buffer = b)
        } {
            Ok(a) if a.buffer_pointer != 0 => a.buffer_pointer,
            _ => return Ok(false),
        };
        // SAFETY: the buffer is on the CPU, ready, dense row-major with exactly
        // `size` bytes on the device (checked by `host_readable`), so `size` bytes
        // from its pointer are its elements in `out`'s order. The memory stays put
        // and unwritten while `self` is borrowed: a ready buffer is not written any
        // more, only `Drop` destroys it, and only donation (which takes the `Buffer`
        // by value, impossible while it is borrowed) could hand its memory to other
        // work; memory lent by an `AlignedHost` is owned by `self` and never
        // written while lent. `out` is a distinct, writable slice of `size` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                pointer as *const u8,
                out.as_mut_ptr().cast::<u8>(),
                size,
            );
        }
        Ok(true)
    }

    /// Whether the buffer may be read in place: on the CPU, dense row-major layout
    /// of `rank` dimensions, `size` bytes on the device. Any query the plugin
    /// refuses answers "no" (the caller then copies).
    fn host_readable(&self, rank: usize, size: usize) -> Result<bool> {
        let b = self.raw;
        // SAFETY: a live buffer we own; the answer is a bool.
        let on_cpu = unsafe {
            self.client
                .api
                .query(slot::PJRT_Buffer_IsOnCpu, |a| a.buffer = b)
        };
        if !matches!(on_cpu, Ok(a) if a.is_on_cpu) {
            return Ok(false);
        }
        if !matches!(self.on_device_size_in_bytes(), Ok(s) if s == size) {
            return Ok(false);
        }
        // SAFETY: a live buffer we own; the layout's arrays are owned by the buffer
        // and read below while `self` is borrowed, with the lengths the plugin gave.
        let layout = unsafe {
            self.client
                .api
                .query(slot::PJRT_Buffer_GetMemoryLayout, |a| {
                    a.buffer = b;
                    a.layout.struct_size = raw::PJRT_Buffer_MemoryLayout::STRUCT_SIZE;
                    a.layout.tiled.struct_size = raw::PJRT_Buffer_MemoryLayout_Tiled::STRUCT_SIZE;
                })
        };
        let Ok(a) = layout else { return Ok(false) };
        let l = &a.layout;
        if l.type_ != raw::PJRT_Buffer_MemoryLayout_Type_Tiled
            || l.tiled.num_tiles != 0
            || l.tiled.minor_to_major_size != rank
        {
            return Ok(false);
        }
        // SAFETY: `minor_to_major` holds `minor_to_major_size` values owned by the
        // live buffer (null or empty is handled by `raw_slice`).
        let m2m =
            unsafe { super::api::raw_slice(l.tiled.minor_to_major, l.tiled.minor_to_major_size) };
        Ok(m2m
            .iter()
            .enumerate()
            .all(|(i, &d)| d == (rank - 1 - i) as i64))
    }

    /// Copies the buffer to a new `Vec` on the host (in place where it can, as
    /// [`copy_to_host`](Self::copy_to_host)).
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>> {
        let mut v = vec![T::default(); self.element_count()?];
        self.copy_to_host(&mut v)?;
        Ok(v)
    }

    /// Copies the buffer's elements to the host as their little-endian bytes, in
    /// row-major order, for any element type: the way to read types without a host
    /// type of their own (`c64`/`c128`: each element its real then its imaginary
    /// part, `f32`/`f64` bytes each), and a byte-exact view of any other (in place
    /// where it can, as [`copy_to_host`](Self::copy_to_host)).
    ///
    /// # Errors
    /// The failure of the computation that defines the buffer
    /// ([`Error::Execution`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let ty = self.meta()?.0;
        let mut out = vec![0u8; self.element_count()? * ty.byte_size()];
        tracing::debug!(bytes = out.len(), ty = %ty, "device_to_host");
        if self.read_host_memory(&mut out)? {
            return Ok(out);
        }
        // SAFETY: `out` is writable for exactly the buffer's element count times
        // its element size, the bytes the plugin writes for a dense host copy;
        // alive until `copy_raw` returns after the copy event.
        unsafe { self.copy_raw(out.as_mut_ptr().cast(), out.len()) }?;
        Ok(out)
    }

    fn element_count(&self) -> Result<usize> {
        Ok(self.meta()?.1.iter().product::<i64>().max(0) as usize)
    }

    /// Copies a rank-0 buffer to the host (in place where it can, as
    /// [`copy_to_host`](Self::copy_to_host)).
    pub fn to_scalar<T: NativeType>(&self) -> Result<T> {
        let mut v = [T::default()];
        self.copy_to_host(&mut v)?;
        Ok(v[0])
    }

    /// # Safety
    /// `dst` must be writable for `size` bytes until this returns.
    unsafe fn copy_raw(&self, dst: *mut std::ffi::c_void, size: usize) -> Result<()> {
        let mut a = raw::PJRT_Buffer_ToHostBuffer_Args::new();
        a.src = self.raw;
        a.dst = dst;
        a.dst_size = size;
        // SAFETY: per the contract; we wait for the copy before returning, so `dst`
        // is not written after we return.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_Buffer_ToHostBuffer, &mut a)?
        };
        super::event::wait_opt(self.client.event(a.event))
    }

    /// The buffer's values in an [`AlignedHost`] array, giving the buffer up. A
    /// buffer uploaded from an `AlignedHost`
    /// ([`Client::buffer_from_aligned`](super::Client::buffer_from_aligned)) gives
    /// that very array back, unchanged, once the plugin no longer reads it (the
    /// buffer is destroyed first; executions still using it are waited for): the
    /// way to reuse one host array for every step's upload. Any other buffer is
    /// copied into a new array ([`copy_to_host`](Self::copy_to_host)).
    ///
    /// # Errors
    /// [`Error::HostType`] when `T` is not the buffer's element type; as
    /// [`copy_to_host`](Self::copy_to_host) for a copy; the failure of the upload's
    /// done event (the array is then not given back, it stays with the plugin).
    pub fn into_host<T: NativeType>(mut self) -> Result<AlignedHost<T>> {
        let ty = self.meta()?.0;
        if ty != T::TYPE {
            return Err(Error::HostType {
                what: "buffer",
                expected: ty,
                given: T::TYPE,
            });
        }
        let Some(lease) = self.host.take() else {
            let mut a = AlignedHost::new(self.element_count()?)?;
            self.copy_to_host(&mut a)?;
            return Ok(a);
        };
        self.destroy();
        let HostLease { memory, done } = lease;
        if let Some(done) = self.client.event(done) {
            if let Err(e) = done.wait() {
                // The plugin reported a failure of the event; keep the memory out
                // of reach for good rather than reuse what it may still read.
                std::mem::forget(memory);
                return Err(e);
            }
        }
        // An upload records the array's own element type as the buffer's (checked
        // against `T` above), so this is the array that was lent (or the pool's
        // block holding a copy of the uploaded values).
        AlignedHost::from_memory(memory.into_memory()).map_err(|m| Error::HostType {
            what: "buffer's host array",
            expected: m.element_type(),
            given: T::TYPE,
        })
    }

    /// Destroys the PJRT buffer (once; `raw` is null afterwards).
    fn destroy(&mut self) {
        if self.raw.is_null() {
            return;
        }
        let mut a = raw::PJRT_Buffer_Destroy_Args::new();
        a.buffer = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: we own the buffer and destroy it once (the field is cleared).
        // The runtime keeps the memory alive for work still using it (PJRT tracks
        // usage).
        let _ = unsafe { self.client.api.call(slot::PJRT_Buffer_Destroy, &mut a) };
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.destroy();
        // Lent host memory is freed once the plugin is done with it: when the
        // upload's done event fires, which for memory the plugin uses as the
        // buffer's is after the buffer is destroyed (just above) and no execution
        // uses it any more. Freed from the event's callback, so dropping never
        // blocks.
        if let Some(HostLease { memory, done }) = self.host.take() {
            match self.client.event(done) {
                Some(ev) => ev.release_when_ready(memory),
                None => drop(memory),
            }
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shape() {
            Ok(s) => write!(f, "Buffer({s})"),
            Err(_) => f.write_str("Buffer(?)"),
        }
    }
}
