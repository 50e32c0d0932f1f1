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
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::api::Plugin;
use crate::error::{Error, Result};
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

// ---- the C side: declarations from `xla/ffi/api/c_api.h` and
// `xla/pjrt/c/pjrt_c_api_ffi_extension.h` -------------------------------------------

#[repr(C)]
struct ExtBase {
    struct_size: usize,
    type_: c_int,
    next: *mut ExtBase,
}

/// `PJRT_FFI_Extension`: base, then `type_id_register`, `user_data_add`,
/// `register_handler`.
#[repr(C)]
struct PjrtFfiExtension {
    base: ExtBase,
    type_id_register: *const c_void,
    user_data_add: *const c_void,
    register_handler: Option<unsafe extern "C" fn(*mut RegisterHandlerArgs) -> *mut c_void>,
}
const PJRT_EXTENSION_TYPE_FFI: c_int = 5;

/// `PJRT_FFI_Register_Handler_Args` (no `extension_start`).
#[repr(C)]
struct RegisterHandlerArgs {
    struct_size: usize,
    target_name: *const c_char,
    target_name_size: usize,
    handler: *const c_void,
    platform_name: *const c_char,
    platform_name_size: usize,
    traits: u32,
}

/// `PJRT_FFI_Register_Handler_Args_STRUCT_SIZE`: up to and including `traits`.
const REGISTER_HANDLER_ARGS_SIZE: usize =
    std::mem::offset_of!(RegisterHandlerArgs, traits) + std::mem::size_of::<u32>();

#[repr(C)]
struct FfiApiVersion {
    struct_size: usize,
    extension_start: *mut ExtBase,
    major: c_int,
    minor: c_int,
}

/// The head of `XLA_FFI_Api` up to `XLA_FFI_Error_Create`.
#[repr(C)]
struct FfiApi {
    struct_size: usize,
    extension_start: *mut ExtBase,
    api_version: FfiApiVersion,
    internal_api: *const c_void,
    error_create: Option<unsafe extern "C" fn(*mut ErrorCreateArgs) -> *mut c_void>,
}

#[repr(C)]
struct ErrorCreateArgs {
    struct_size: usize,
    extension_start: *mut ExtBase,
    message: *const c_char,
    errc: c_int,
}

#[repr(C)]
struct FfiArgs {
    struct_size: usize,
    extension_start: *mut ExtBase,
    size: i64,
    types: *const c_int,
    args: *const *mut c_void,
}

#[repr(C)]
struct FfiAttrs {
    struct_size: usize,
    extension_start: *mut ExtBase,
    size: i64,
    types: *const c_int,
    names: *const *const c_void,
    attrs: *const *mut c_void,
}

#[repr(C)]
struct CallFrame {
    struct_size: usize,
    extension_start: *mut ExtBase,
    api: *const FfiApi,
    ctx: *mut c_void,
    stage: c_int,
    args: FfiArgs,
    rets: FfiArgs,
    attrs: FfiAttrs,
    future: *mut c_void,
}

#[repr(C)]
struct FfiBuffer {
    struct_size: usize,
    extension_start: *mut ExtBase,
    dtype: c_int,
    data: *mut c_void,
    rank: i64,
    dims: *const i64,
}

#[repr(C)]
struct Metadata {
    struct_size: usize,
    api_version: FfiApiVersion,
    traits: u32,
}

#[repr(C)]
struct MetadataExtension {
    base: ExtBase,
    metadata: *mut Metadata,
}

const XLA_FFI_EXTENSION_METADATA: c_int = 1;
const XLA_FFI_STAGE_EXECUTE: c_int = 3;
const XLA_FFI_BUFFER: c_int = 1;
const XLA_FFI_ERROR_INTERNAL: c_int = 13;
const XLA_FFI_ERROR_INVALID_ARGUMENT: c_int = 3;

/// An `XLA_FFI_Error` with `message`, made by the framework's own constructor (null
/// when the framework offers none: the call then counts as a success).
///
/// # Safety
///
/// `api` is null or the call frame's `XLA_FFI_Api`.
unsafe fn ffi_error(api: *const FfiApi, code: c_int, message: &str) -> *mut c_void {
    if api.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the framework's API table, valid through the call.
    let Some(create) = (unsafe { (*api).error_create }) else {
        return std::ptr::null_mut();
    };
    let text = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
    let mut args = ErrorCreateArgs {
        struct_size: std::mem::offset_of!(ErrorCreateArgs, errc) + std::mem::size_of::<c_int>(),
        extension_start: std::ptr::null_mut(),
        message: text.as_ptr(),
        errc: code,
    };
    // SAFETY: the args are complete; the framework copies the message.
    unsafe { create(&mut args) }
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
    let mut ext = f.extension_start;
    while !ext.is_null() {
        // SAFETY: a chain of extension structs, each with the common head.
        let e = unsafe { &*ext };
        if e.type_ == XLA_FFI_EXTENSION_METADATA {
            // SAFETY: an extension of this type is a `XLA_FFI_Metadata_Extension`.
            let m = unsafe { (*ext.cast::<MetadataExtension>()).metadata };
            if !m.is_null() {
                // SAFETY: `api` is the framework's table when non-null.
                let (major, minor) = if f.api.is_null() {
                    (0, 1)
                } else {
                    let v = unsafe { &(*f.api).api_version };
                    (v.major, v.minor)
                };
                // SAFETY: `m` is the framework's metadata struct, ours to fill.
                unsafe {
                    (*m).api_version = FfiApiVersion {
                        struct_size: std::mem::size_of::<FfiApiVersion>(),
                        extension_start: std::ptr::null_mut(),
                        major,
                        minor,
                    };
                    (*m).traits = 0;
                }
            }
            return std::ptr::null_mut();
        }
        ext = e.next;
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
        static DONE: OnceLock<Mutex<HashMap<std::path::PathBuf, std::result::Result<(), String>>>> =
            OnceLock::new();
        let mut done = DONE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let key = self.path().to_path_buf();
        let r = done
            .entry(key)
            .or_insert_with(|| self.register_handler())
            .clone();
        r.map_err(Error::HostCallback)
    }

    fn register_handler(&self) -> std::result::Result<(), String> {
        let who = format!(
            "plugin {} (PJRT C API {}.{})",
            self.path().display(),
            self.api_version().0,
            self.api_version().1
        );
        let mut ext = self.api.extension_start().cast::<ExtBase>();
        while !ext.is_null() {
            // SAFETY: the plugin's static chain of extension structs, each with the
            // common head (`PJRT_Extension_Base`).
            let e = unsafe { &*ext };
            if e.type_ == PJRT_EXTENSION_TYPE_FFI {
                let need = std::mem::size_of::<PjrtFfiExtension>();
                if e.struct_size < need {
                    return Err(format!(
                        "{who}: its FFI extension ({} bytes) has no register_handler",
                        e.struct_size
                    ));
                }
                // SAFETY: an extension of type FFI is a `PJRT_FFI_Extension`, long
                // enough (checked just above).
                let ffi = unsafe { &*ext.cast::<PjrtFfiExtension>() };
                let Some(register) = ffi.register_handler else {
                    return Err(format!("{who}: its FFI extension has no register_handler"));
                };
                let platform = "Host";
                let mut args = RegisterHandlerArgs {
                    struct_size: REGISTER_HANDLER_ARGS_SIZE,
                    target_name: HOST_CALLBACK_TARGET.as_ptr().cast(),
                    target_name_size: HOST_CALLBACK_TARGET.len(),
                    handler: handler as *const c_void,
                    platform_name: platform.as_ptr().cast(),
                    platform_name_size: platform.len(),
                    traits: 0,
                };
                // SAFETY: complete args; the strings are static and outlive the call.
                let err = unsafe { register(&mut args) };
                if err.is_null() {
                    return Ok(());
                }
                let e = self.api.take_error("PJRT_FFI_Register_Handler", err.cast());
                return Err(format!("{who} refused the host-callback handler: {e}"));
            }
            ext = e.next;
        }
        Err(format!(
            "{who} has no FFI extension (PJRT_FFI_Extension), through which host callbacks \
             run; its compiler also has no host send/recv"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Sizes and offsets from the headers (`pjrt_c_api_ffi_extension.h`,
    /// `xla/ffi/api/c_api.h`, x86-64 and aarch64 layouts).
    #[test]
    fn layouts_match_the_headers() {
        assert_eq!(size_of::<ExtBase>(), 24);
        assert_eq!(size_of::<PjrtFfiExtension>(), 48);
        assert_eq!(REGISTER_HANDLER_ARGS_SIZE, 52);
        assert_eq!(size_of::<FfiApiVersion>(), 24);
        assert_eq!(offset_of!(FfiApi, error_create), 48);
        assert_eq!(size_of::<FfiArgs>(), 40);
        assert_eq!(size_of::<FfiAttrs>(), 48);
        assert_eq!(offset_of!(CallFrame, stage), 32);
        assert_eq!(offset_of!(CallFrame, args), 40);
        assert_eq!(offset_of!(CallFrame, rets), 80);
        assert_eq!(offset_of!(CallFrame, attrs), 120);
        assert_eq!(offset_of!(CallFrame, future), 168);
        assert_eq!(size_of::<FfiBuffer>(), 48);
        assert_eq!(offset_of!(Metadata, traits), 32);
        assert_eq!(size_of::<MetadataExtension>(), 32);
        assert_eq!(offset_of!(ErrorCreateArgs, errc) + size_of::<c_int>(), 28);
    }

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
