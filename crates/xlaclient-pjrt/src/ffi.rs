//! XLA typed-FFI kernels that the runtime registers with a plugin: custom calls
//! whose kernel is a Rust function. Both CPU plugins offer the FFI extension
//! (`PJRT_FFI_Extension`, extension type 5), whose `register_handler` registers a C
//! function as the kernel of a typed-FFI custom call (API version 4) for a
//! platform. Two kernels use it:
//!
//! - the host callback ([`HOST_CALLBACK_TARGET`](crate::HOST_CALLBACK_TARGET), in
//!   `host_callback`), which calls a Rust closure with the operands;
//! - [`UNINITIALIZED_TARGET`], which returns its result buffer as XLA allocated
//!   it, without writing it: the starting value of a stack that a loop then
//!   writes row by row, in full, before anything reads it. A broadcast of zeros
//!   costs a pass over the whole stack's memory (2 ms for the 16 MB that a
//!   1,000-step scan's gradient stores, 4% of that gradient's time); this costs
//!   nothing.
//!
//! Each kernel is registered once per plugin and process (a registration lasts as
//! long as the process).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Mutex, OnceLock};

use crate::api::Plugin;
use crate::error::{Error, Result};

/// The custom-call target of a buffer left as allocated (see the module docs),
/// which [`Plugin::enable_uninitialized_buffers`] registers. A custom call to it
/// takes no operands and has one array result, whose contents are unspecified
/// until written.
pub const UNINITIALIZED_TARGET: &str = "xlaclient_uninitialized";

#[repr(C)]
pub(crate) struct ExtBase {
    pub(crate) struct_size: usize,
    pub(crate) type_: c_int,
    pub(crate) next: *mut ExtBase,
}

/// `PJRT_FFI_Extension`: base, then `type_id_register`, `user_data_add`,
/// `register_handler`.
#[repr(C)]
pub(crate) struct PjrtFfiExtension {
    pub(crate) base: ExtBase,
    pub(crate) type_id_register: *const c_void,
    pub(crate) user_data_add: *const c_void,
    pub(crate) register_handler:
        Option<unsafe extern "C" fn(*mut RegisterHandlerArgs) -> *mut c_void>,
}
pub(crate) const PJRT_EXTENSION_TYPE_FFI: c_int = 5;

/// `PJRT_FFI_Register_Handler_Args` (no `extension_start`).
#[repr(C)]
pub(crate) struct RegisterHandlerArgs {
    pub(crate) struct_size: usize,
    pub(crate) target_name: *const c_char,
    pub(crate) target_name_size: usize,
    pub(crate) handler: *const c_void,
    pub(crate) platform_name: *const c_char,
    pub(crate) platform_name_size: usize,
    pub(crate) traits: u32,
}

/// `PJRT_FFI_Register_Handler_Args_STRUCT_SIZE`: up to and including `traits`.
pub(crate) const REGISTER_HANDLER_ARGS_SIZE: usize =
    std::mem::offset_of!(RegisterHandlerArgs, traits) + std::mem::size_of::<u32>();

#[repr(C)]
pub(crate) struct FfiApiVersion {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut ExtBase,
    pub(crate) major: c_int,
    pub(crate) minor: c_int,
}

/// The head of `XLA_FFI_Api` up to `XLA_FFI_Error_Create`.
#[repr(C)]
pub(crate) struct FfiApi {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut ExtBase,
    pub(crate) api_version: FfiApiVersion,
    pub(crate) internal_api: *const c_void,
    pub(crate) error_create: Option<unsafe extern "C" fn(*mut ErrorCreateArgs) -> *mut c_void>,
}

#[repr(C)]
pub(crate) struct ErrorCreateArgs {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut ExtBase,
    pub(crate) message: *const c_char,
    pub(crate) errc: c_int,
}

#[repr(C)]
pub(crate) struct FfiArgs {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut ExtBase,
    pub(crate) size: i64,
    pub(crate) types: *const c_int,
    pub(crate) args: *const *mut c_void,
}

#[repr(C)]
pub(crate) struct FfiAttrs {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut ExtBase,
    pub(crate) size: i64,
    pub(crate) types: *const c_int,
    pub(crate) names: *const *const c_void,
    pub(crate) attrs: *const *mut c_void,
}

#[repr(C)]
pub(crate) struct CallFrame {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut ExtBase,
    pub(crate) api: *const FfiApi,
    pub(crate) ctx: *mut c_void,
    pub(crate) stage: c_int,
    pub(crate) args: FfiArgs,
    pub(crate) rets: FfiArgs,
    pub(crate) attrs: FfiAttrs,
    pub(crate) future: *mut c_void,
}

#[repr(C)]
pub(crate) struct FfiBuffer {
    pub(crate) struct_size: usize,
    pub(crate) extension_start: *mut ExtBase,
    pub(crate) dtype: c_int,
    pub(crate) data: *mut c_void,
    pub(crate) rank: i64,
    pub(crate) dims: *const i64,
}

#[repr(C)]
pub(crate) struct Metadata {
    pub(crate) struct_size: usize,
    pub(crate) api_version: FfiApiVersion,
    pub(crate) traits: u32,
}

#[repr(C)]
pub(crate) struct MetadataExtension {
    pub(crate) base: ExtBase,
    pub(crate) metadata: *mut Metadata,
}

pub(crate) const XLA_FFI_EXTENSION_METADATA: c_int = 1;
pub(crate) const XLA_FFI_STAGE_EXECUTE: c_int = 3;
pub(crate) const XLA_FFI_BUFFER: c_int = 1;
pub(crate) const XLA_FFI_ERROR_INTERNAL: c_int = 13;
pub(crate) const XLA_FFI_ERROR_INVALID_ARGUMENT: c_int = 3;

/// An `XLA_FFI_Error` with `message`, made by the framework's own constructor (null
/// when the framework offers none: the call then counts as a success).
///
/// # Safety
///
/// `api` is null or the call frame's `XLA_FFI_Api`.
pub(crate) unsafe fn ffi_error(api: *const FfiApi, code: c_int, message: &str) -> *mut c_void {
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

/// Answers the framework's metadata query (made when a kernel is registered) with
/// the framework's own API version and no traits; `true` when `f` was that query.
///
/// # Safety
///
/// `f` is the call frame XLA passed to a kernel, valid through the call.
pub(crate) unsafe fn answer_metadata(f: &CallFrame) -> bool {
    let mut ext = f.extension_start;
    while !ext.is_null() {
        // SAFETY: a chain of extension structs, each with the common head.
        let e = unsafe { &*ext };
        if e.type_ == XLA_FFI_EXTENSION_METADATA {
            // SAFETY: an extension of this type is a `XLA_FFI_Metadata_Extension`.
            let m = unsafe { (*ext.cast::<MetadataExtension>()).metadata };
            if !m.is_null() {
                let (major, minor) = if f.api.is_null() {
                    (0, 1)
                } else {
                    // SAFETY: `api` is the framework's table when non-null.
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
            return true;
        }
        ext = e.next;
    }
    false
}

/// A kernel's C entry point (`XLA_FFI_Handler`).
pub(crate) type Kernel = unsafe extern "C" fn(*mut CallFrame) -> *mut c_void;

/// Registers `kernel` under `target` for the CPU platform ("Host") with
/// `plugin`'s FFI extension, once per plugin and target (later calls return the
/// first answer). `what` names the kernel in errors; `missing` ends the error of a
/// plugin without the FFI extension (what the caller cannot do then).
pub(crate) fn register_kernel(
    plugin: &Plugin,
    target: &'static str,
    kernel: Kernel,
    what: &str,
    missing: &str,
) -> std::result::Result<(), String> {
    type Key = (std::path::PathBuf, &'static str);
    static DONE: OnceLock<Mutex<HashMap<Key, std::result::Result<(), String>>>> = OnceLock::new();
    let mut done = DONE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    done.entry((plugin.path().to_path_buf(), target))
        .or_insert_with(|| register_now(plugin, target, kernel, what, missing))
        .clone()
}

fn register_now(
    plugin: &Plugin,
    target: &'static str,
    kernel: Kernel,
    what: &str,
    missing: &str,
) -> std::result::Result<(), String> {
    let who = format!(
        "plugin {} (PJRT C API {}.{})",
        plugin.path().display(),
        plugin.api_version().0,
        plugin.api_version().1
    );
    let mut ext = plugin.api.extension_start().cast::<ExtBase>();
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
                target_name: target.as_ptr().cast(),
                target_name_size: target.len(),
                handler: kernel as *const c_void,
                platform_name: platform.as_ptr().cast(),
                platform_name_size: platform.len(),
                traits: 0,
            };
            // SAFETY: complete args; the strings are static and outlive the call.
            let err = unsafe { register(&mut args) };
            if err.is_null() {
                return Ok(());
            }
            let e = plugin
                .api
                .take_error("PJRT_FFI_Register_Handler", err.cast());
            return Err(format!("{who} refused the {what} kernel: {e}"));
        }
        ext = e.next;
    }
    Err(format!(
        "{who} has no FFI extension (PJRT_FFI_Extension), {missing}"
    ))
}

/// The kernel of [`UNINITIALIZED_TARGET`]: answers the metadata query and
/// otherwise does nothing, leaving its result as XLA allocated it.
///
/// # Safety
///
/// Called by XLA with a valid call frame (the FFI contract).
unsafe extern "C" fn uninitialized_kernel(frame: *mut CallFrame) -> *mut c_void {
    if !frame.is_null() {
        // SAFETY: XLA passes a valid frame that lives through the call.
        unsafe { answer_metadata(&*frame) };
    }
    std::ptr::null_mut()
}

impl Plugin {
    /// Registers the kernel of [`UNINITIALIZED_TARGET`] with this plugin (once;
    /// later calls return the first answer), for its CPU platform. An error names
    /// the plugin when it has no FFI extension or refuses the kernel.
    /// [`Client::compile`](crate::Client::compile) calls this for modules that
    /// use such buffers ([`HloModuleSource::uses_uninitialized_buffers`](crate::HloModuleSource::uses_uninitialized_buffers))
    /// on a CPU client, and compiles them with zeros in their place where it
    /// fails or the platform is another.
    pub fn enable_uninitialized_buffers(&self) -> Result<()> {
        register_kernel(
            self,
            UNINITIALIZED_TARGET,
            uninitialized_kernel,
            "uninitialized-buffer",
            "through which the uninitialized-buffer kernel runs",
        )
        .map_err(|reason| Error::InvalidOption {
            option: UNINITIALIZED_TARGET.into(),
            reason,
        })
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
}
