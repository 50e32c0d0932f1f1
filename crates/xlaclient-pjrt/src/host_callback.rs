//! Host callbacks from compiled code (the runtime half of `jax.debug.callback`),
//! through XLA's typed FFI: a custom call whose kernel is a Rust function.
//!
//! The PJRT C API's own route, host `send`/`recv` with `PJRT_ExecuteOptions`'
//! `send_callbacks`, is closed on the CPU plugins: their compiler has no lowering
//! for those opcodes ("HLO opcode `send` is not supported by XLA:CPU
//! ThunkEmitter", `tests/host_callbacks.rs`). Both CPU plugins do offer the FFI
//! extension (`PJRT_FFI_Extension`, extension type 5), whose `register_handler`
//! registers a C function as the kernel of a typed-FFI custom call (API version 4).
//! [`Plugin::enable_host_callbacks`] registers this module's handler under
//! [`HOST_CALLBACK_TARGET`]; a custom call to it whose first operand is the `s64[]`
//! id from [`register_host_callback`] calls that closure with the values of the
//! other operands, each time the call executes (every iteration of a loop). The
//! handler writes zeros into the call's results, which the program may use to keep
//! the call alive.
//!
//! Callbacks stay registered for the life of the process (programs compiled with
//! their id may run at any time); each holds its closure.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::api::Plugin;
use crate::error::{Error, Result};
use crate::ffi::{
    CallFrame, FfiBuffer, XLA_FFI_BUFFER, XLA_FFI_ERROR_INTERNAL, XLA_FFI_ERROR_INVALID_ARGUMENT,
    XLA_FFI_STAGE_EXECUTE, answer_metadata, ffi_error, register_kernel,
};
use crate::shape::{ElementType, NativeType};

/// The custom-call target name under which [`Plugin::enable_host_callbacks`]
/// registers the handler.
pub const HOST_CALLBACK_TARGET: &str = "xlaclient_host_callback";

/// One value handed to a host callback: a copy of an operand of the custom call.
#[derive(Clone, Debug, PartialEq)]
pub struct HostValue {
    /// Its element type.
    pub ty: ElementType,
    /// Its dimensions.
    pub dims: Vec<i64>,
    /// Its elements, row-major, in the platform's byte order.
    pub bytes: Vec<u8>,
}

impl HostValue {
    /// The elements as `T`; an error when `T` is not the value's element type.
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>> {
        if T::TYPE != self.ty {
            return Err(Error::HostCallback(format!(
                "the value is {}{:?}, read as {}",
                self.ty,
                self.dims,
                T::TYPE
            )));
        }
        let n = self.bytes.len() / std::mem::size_of::<T>();
        let mut out = Vec::with_capacity(n);
        for c in self.bytes.chunks_exact(std::mem::size_of::<T>()) {
            // SAFETY: `c` holds exactly `size_of::<T>()` bytes of a `T` (the types
            // match, checked above); `read_unaligned` accepts any alignment.
            out.push(unsafe { c.as_ptr().cast::<T>().read_unaligned() });
        }
        Ok(out)
    }
}

type Callback = Arc<dyn Fn(&[HostValue]) + Send + Sync>;

fn callbacks() -> &'static Mutex<HashMap<i64, Callback>> {
    static M: OnceLock<Mutex<HashMap<i64, Callback>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

/// Registers `f` and returns its id: the value of the `s64[]` first operand of a
/// custom call to [`HOST_CALLBACK_TARGET`] that runs `f`.
pub fn register_host_callback(f: impl Fn(&[HostValue]) + Send + Sync + 'static) -> i64 {
    static NEXT: AtomicI64 = AtomicI64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    callbacks()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Arc::new(f));
    id
}

/// The FFI handler: answers the framework's metadata query, and on execution calls
/// the registered closure with copies of the operands after the id.
///
/// # Safety
///
/// Called by XLA with a valid call frame (the FFI contract).
unsafe extern "C" fn handler(frame: *mut CallFrame) -> *mut c_void {
    // SAFETY: XLA passes a valid frame that lives through the call.
    let f = unsafe { &*frame };
    // Metadata query (at registration): report the framework's own API version.
    // SAFETY: the frame is XLA's, valid through the call.
    if unsafe { answer_metadata(f) } {
        return std::ptr::null_mut();
    }
    if f.stage != XLA_FFI_STAGE_EXECUTE {
        return std::ptr::null_mut();
    }
    let mut values = Vec::new();
    let mut id = None;
    for i in 0..f.args.size.max(0) as usize {
        // SAFETY: `types` and `args` have `size` entries (the FFI contract).
        let (ty, p) = unsafe { (*f.args.types.add(i), *f.args.args.add(i)) };
        if ty != XLA_FFI_BUFFER || p.is_null() {
            // SAFETY: the frame's API table.
            return unsafe {
                ffi_error(
                    f.api,
                    XLA_FFI_ERROR_INVALID_ARGUMENT,
                    &format!("{HOST_CALLBACK_TARGET}: operand {i} is not an array"),
                )
            };
        }
        // SAFETY: an argument of type BUFFER is an `XLA_FFI_Buffer`.
        let b = unsafe { &*p.cast::<FfiBuffer>() };
        let dims: Vec<i64> = if b.rank > 0 {
            // SAFETY: `dims` has `rank` entries.
            unsafe { std::slice::from_raw_parts(b.dims, b.rank as usize).to_vec() }
        } else {
            Vec::new()
        };
        let Some(ty) = ElementType::from_primitive_type(b.dtype) else {
            // SAFETY: the frame's API table.
            return unsafe {
                ffi_error(
                    f.api,
                    XLA_FFI_ERROR_INVALID_ARGUMENT,
                    &format!(
                        "{HOST_CALLBACK_TARGET}: operand {i} has element type {}, which \
                         host callbacks do not take",
                        b.dtype
                    ),
                )
            };
        };
        let len = dims.iter().product::<i64>().max(0) as usize * ty.byte_size();
        let bytes = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: a dense array of `len` bytes on the host (CPU plugins).
            unsafe { std::slice::from_raw_parts(b.data.cast::<u8>(), len).to_vec() }
        };
        let v = HostValue { ty, dims, bytes };
        if i == 0 {
            id = v
                .to_vec::<i64>()
                .ok()
                .filter(|x| x.len() == 1)
                .map(|x| x[0]);
        } else {
            values.push(v);
        }
    }
    let cb = id.and_then(|id| {
        callbacks()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    });
    let Some(cb) = cb else {
        // SAFETY: the frame's API table.
        return unsafe {
            ffi_error(
                f.api,
                XLA_FFI_ERROR_INVALID_ARGUMENT,
                &format!(
                    "{HOST_CALLBACK_TARGET}: the first operand is {id:?}, not the s64[] id \
                     of a registered host callback"
                ),
            )
        };
    };
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&values))).is_err() {
        // SAFETY: the frame's API table.
        return unsafe {
            ffi_error(
                f.api,
                XLA_FFI_ERROR_INTERNAL,
                &format!(
                    "{HOST_CALLBACK_TARGET}: host callback {} panicked",
                    id.unwrap_or(0)
                ),
            )
        };
    }
    // Results: zeros.
    for i in 0..f.rets.size.max(0) as usize {
        // SAFETY: as for the arguments.
        let (ty, p) = unsafe { (*f.rets.types.add(i), *f.rets.args.add(i)) };
        if ty != XLA_FFI_BUFFER || p.is_null() {
            continue;
        }
        // SAFETY: a result of type BUFFER is an `XLA_FFI_Buffer`.
        let b = unsafe { &*p.cast::<FfiBuffer>() };
        let Some(ty) = ElementType::from_primitive_type(b.dtype) else {
            continue;
        };
        let n: i64 = if b.rank > 0 {
            // SAFETY: `dims` has `rank` entries.
            unsafe { std::slice::from_raw_parts(b.dims, b.rank as usize) }
                .iter()
                .product()
        } else {
            1
        };
        // SAFETY: the result buffer holds `n` elements of `ty`.
        unsafe {
            std::ptr::write_bytes(b.data.cast::<u8>(), 0, n.max(0) as usize * ty.byte_size())
        };
    }
    std::ptr::null_mut()
}

impl Plugin {
    /// Registers the host-callback handler with this plugin (once; later calls
    /// return the first answer): a custom call to [`HOST_CALLBACK_TARGET`] then runs
    /// host closures (see the module docs). An error names the plugin when it has
    /// no FFI extension or refuses the handler.
    pub fn enable_host_callbacks(&self) -> Result<()> {
        register_kernel(
            self,
            HOST_CALLBACK_TARGET,
            handler,
            "host-callback",
            "through which host callbacks run; its compiler also has no host send/recv",
        )
        .map_err(Error::HostCallback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_their_type_only() {
        let v = HostValue {
            ty: ElementType::F32,
            dims: vec![2],
            bytes: [1.5f32, -2.0]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
        };
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![1.5, -2.0]);
        let e = v.to_vec::<i32>().unwrap_err().to_string();
        assert!(
            e.contains("f32[2] read as s32") || e.contains("read as"),
            "{e}"
        );
    }
}
