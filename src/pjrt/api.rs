//! The loaded plugin: the library handle, the function table pointer, and the one
//! call funnel through which every C function is reached.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::raw::{self, ErrFn, PJRT_Api, PJRT_Error, Slot, VoidFn, slot};
use crate::error::{Error, PjrtErrorCode, Result};

/// The function table of one loaded plugin. Shared (`Arc`) by every object made
/// from it, so the library outlives them all; the library is never closed.
pub(crate) struct Api {
    // Never dropped: XLA plugins must not be unloaded (their static state and
    // threads outlive any client). Held so the handle is visibly owned.
    _lib: ManuallyDrop<libloading::Library>,
    table: *const PJRT_Api,
    table_size: usize,
    version: (i32, i32),
    path: PathBuf,
}

// SAFETY: the PJRT C API is thread-safe: its functions may be called from any thread
// concurrently (the header's contract, and what JAX does). `table` points into the
// plugin's static data, which is immutable and lives as long as the process, since
// the library is never unloaded.
unsafe impl Send for Api {}
// SAFETY: see `Send`; `Api` itself has no interior mutability.
unsafe impl Sync for Api {}

impl Api {
    /// The PJRT C API version the plugin reports, `(major, minor)`.
    pub(crate) fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The path the plugin was loaded from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The function in `s`, or a typed error when the plugin's table does not reach
    /// that slot (too old) or leaves it null.
    #[inline]
    fn slot_ptr(&self, s: Slot) -> Result<*const c_void> {
        if s.end() > self.table_size {
            return Err(self.unsupported(s));
        }
        // SAFETY: the slot lies inside the table (checked against the plugin's own
        // `struct_size` just above); the table is a static array of pointers.
        let p = unsafe {
            (self.table as *const u8)
                .add(s.offset())
                .cast::<*const c_void>()
                .read()
        };
        if p.is_null() {
            return Err(self.unsupported(s));
        }
        Ok(p)
    }

    fn unsupported(&self, s: Slot) -> Error {
        Error::Unsupported {
            function: s.name,
            api_version: self.version,
        }
    }

    /// The function in slot `s` as a callable pointer (used by `call` and by the
    /// raw floor benchmark).
    #[inline]
    pub(crate) fn slot_fn(&self, s: Slot) -> Result<ErrFn> {
        let p = self.slot_ptr(s)?;
        // SAFETY: every table slot except the two error accessors holds a
        // `PJRT_Error* (*)(Args*)`.
        Ok(unsafe { std::mem::transmute::<*const c_void, ErrFn>(p) })
    }

    /// Calls the C function in slot `s` with `args`; a returned `PJRT_Error` becomes
    /// [`Error::Pjrt`] (and is destroyed).
    ///
    /// # Safety
    /// `A` must be the args struct the C function in `s` takes, with `struct_size`
    /// set, and every pointer in it valid for what the function does with it.
    #[inline]
    pub(crate) unsafe fn call<A>(&self, s: Slot, args: &mut A) -> Result<()> {
        let f = self.slot_fn(s)?;
        // SAFETY: the caller guarantees `A` is the args type of the function in `s`.
        let err = unsafe { f((args as *mut A).cast::<c_void>()) };
        if err.is_null() {
            Ok(())
        } else {
            Err(self.take_error(s.name, err))
        }
    }

    /// Calls a `void`-returning error accessor.
    unsafe fn call_void<A>(&self, s: Slot, args: &mut A) -> Result<()> {
        let p = self.slot_ptr(s)?;
        // SAFETY: `PJRT_Error_Destroy` and `PJRT_Error_Message` are
        // `void (*)(Args*)`; the callers below pass their args types.
        let f: VoidFn = unsafe { std::mem::transmute::<*const c_void, VoidFn>(p) };
        unsafe { f((args as *mut A).cast::<c_void>()) };
        Ok(())
    }

    /// Turns a `PJRT_Error*` the plugin returned into [`Error::Pjrt`], destroying it.
    pub(crate) fn take_error(&self, function: &'static str, err: *mut PJRT_Error) -> Error {
        let mut msg = raw::PJRT_Error_Message_Args::new();
        msg.error = err;
        // SAFETY: `err` is a live error returned by the plugin; the message has the
        // lifetime of the error, so it is copied before the error is destroyed.
        let message = unsafe {
            match self.call_void(slot::PJRT_Error_Message, &mut msg) {
                Ok(()) => copy_str(msg.message, msg.message_size),
                Err(_) => String::from("(plugin gave no message)"),
            }
        };
        let mut code = raw::PJRT_Error_GetCode_Args::new();
        code.error = err;
        // SAFETY: as above; GetCode returns an error itself only on misuse.
        let code = match unsafe { self.call_nested(slot::PJRT_Error_GetCode, &mut code) } {
            Ok(()) => PjrtErrorCode::from_raw(code.code),
            Err(()) => PjrtErrorCode::Unknown,
        };
        let mut d = raw::PJRT_Error_Destroy_Args::new();
        d.error = err;
        // SAFETY: destroys the error exactly once; nothing refers to it afterwards.
        let _ = unsafe { self.call_void(slot::PJRT_Error_Destroy, &mut d) };
        Error::Pjrt {
            function,
            code,
            message,
        }
    }

    /// Turns the error status of an event (asynchronous work) into
    /// [`Error::Execution`], destroying it.
    pub(crate) fn event_error(&self, err: *mut PJRT_Error) -> Error {
        match self.take_error("PJRT_Event", err) {
            Error::Pjrt { code, message, .. } => Error::Execution { code, message },
            other => other,
        }
    }

    /// A call made while handling an error: a failure there is not converted again
    /// (no recursion), only destroyed.
    unsafe fn call_nested<A>(&self, s: Slot, args: &mut A) -> std::result::Result<(), ()> {
        let f = self.slot_fn(s).map_err(|_| ())?;
        // SAFETY: as in `call`.
        let err = unsafe { f((args as *mut A).cast::<c_void>()) };
        if err.is_null() {
            return Ok(());
        }
        let mut d = raw::PJRT_Error_Destroy_Args::new();
        d.error = err;
        let _ = unsafe { self.call_void(slot::PJRT_Error_Destroy, &mut d) };
        Err(())
    }
}

/// Copies a (pointer, length) string the plugin owns into a `String`.
///
/// # Safety
/// `p` must be null or point to `len` readable bytes.
pub(crate) unsafe fn copy_str(p: *const std::ffi::c_char, len: usize) -> String {
    if p.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: the caller guarantees `len` readable bytes at `p`.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// A value of a plugin attribute or a client create option.
#[derive(Clone, Debug, PartialEq)]
pub enum NamedValue {
    /// A string.
    String(String),
    /// A 64-bit integer.
    Int64(i64),
    /// A list of 64-bit integers.
    Int64List(Vec<i64>),
    /// A float.
    Float(f32),
    /// A boolean.
    Bool(bool),
}

impl fmt::Display for NamedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamedValue::String(s) => f.write_str(s),
            NamedValue::Int64(v) => write!(f, "{v}"),
            NamedValue::Int64List(v) => {
                let parts: Vec<String> = v.iter().map(i64::to_string).collect();
                f.write_str(&parts.join("."))
            }
            NamedValue::Float(v) => write!(f, "{v}"),
            NamedValue::Bool(v) => write!(f, "{v}"),
        }
    }
}

/// A loaded PJRT plugin (a vendor `.so` exporting `GetPjrtApi`).
///
/// Cheap to clone (an `Arc`). Loading the same file twice returns the same plugin:
/// `PJRT_Plugin_Initialize` runs once per library, and the library is never unloaded.
///
/// ```no_run
/// let plugin = xlaclient::Plugin::load("/path/to/pjrt_c_api_cpu_plugin.so")?;
/// println!("PJRT C API {:?}", plugin.api_version());
/// let client = plugin.client()?;
/// println!("{} devices", client.addressable_devices().len());
/// # Ok::<(), xlaclient::Error>(())
/// ```
///
/// # Thread safety
/// `Plugin` is `Send` and `Sync`: the PJRT C API may be called from any thread.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) api: Arc<Api>,
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Plugin>> {
    static R: OnceLock<Mutex<HashMap<PathBuf, Plugin>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Plugin {
    /// Loads the plugin at `path`: opens the library, calls `GetPjrtApi`, checks the
    /// API major version and calls `PJRT_Plugin_Initialize`.
    ///
    /// Errors: [`Error::PluginLoad`] if the file is missing or not a loadable shared
    /// library, [`Error::NotAPlugin`] if it has no `GetPjrtApi` (or it returns null),
    /// [`Error::IncompatibleApi`] for another major version.
    pub fn load(path: impl AsRef<Path>) -> Result<Plugin> {
        let path = path.as_ref();
        let key = std::fs::canonicalize(path).map_err(|e| Error::PluginLoad {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = reg.get(&key) {
            return Ok(p.clone());
        }
        let plugin = Self::open(&key)?;
        reg.insert(key, plugin.clone());
        Ok(plugin)
    }

    /// Loads the default plugin: `PJRT_PLUGIN_PATH` if set, else the pinned CPU plugin
    /// (fetched into the cache on first use; see [`fetch`](crate::pjrt::fetch)).
    pub fn default_plugin() -> Result<Plugin> {
        let path = super::fetch::default_plugin_path()?;
        Self::load(path)
    }

    fn open(path: &Path) -> Result<Plugin> {
        // SAFETY: loading a library runs its initialisers; that is what loading a
        // plugin means, and the user chose the file.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| Error::PluginLoad {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        type GetApi = unsafe extern "C" fn() -> *const PJRT_Api;
        // SAFETY: `GetPjrtApi` has this signature in every PJRT plugin.
        let get: libloading::Symbol<GetApi> =
            unsafe { lib.get(b"GetPjrtApi\0") }.map_err(|e| Error::NotAPlugin {
                path: path.to_path_buf(),
                reason: format!("no GetPjrtApi symbol ({e})"),
            })?;
        // SAFETY: calling the plugin's entry point, which takes nothing.
        let table = unsafe { get() };
        if table.is_null() {
            return Err(Error::NotAPlugin {
                path: path.to_path_buf(),
                reason: "GetPjrtApi returned null".into(),
            });
        }
        // SAFETY: `table` points to the plugin's `PJRT_Api`, whose head (struct_size,
        // extension_start, version) exists in every version of the API.
        let (table_size, major, minor) = unsafe {
            let t = &*table;
            (
                t.struct_size,
                t.pjrt_api_version.major_version,
                t.pjrt_api_version.minor_version,
            )
        };
        if table_size < raw::FN_TABLE_OFFSET {
            return Err(Error::NotAPlugin {
                path: path.to_path_buf(),
                reason: format!("PJRT_Api struct_size {table_size} is too small"),
            });
        }
        if major != raw::PJRT_API_MAJOR {
            return Err(Error::IncompatibleApi {
                path: path.to_path_buf(),
                major,
                minor,
            });
        }
        let api = Api {
            _lib: ManuallyDrop::new(lib),
            table,
            table_size,
            version: (major, minor),
            path: path.to_path_buf(),
        };
        let mut init = raw::PJRT_Plugin_Initialize_Args::new();
        // SAFETY: the args struct of PJRT_Plugin_Initialize; called once per library
        // (the registry in `load` guarantees it).
        unsafe { api.call(slot::PJRT_Plugin_Initialize, &mut init)? };
        Ok(Plugin { api: Arc::new(api) })
    }

    /// The PJRT C API version the plugin implements, `(major, minor)`.
    pub fn api_version(&self) -> (i32, i32) {
        self.api.version()
    }

    /// The file the plugin was loaded from (canonical path).
    pub fn path(&self) -> &Path {
        self.api.path()
    }

    /// The plugin's attributes (e.g. `xla_version`, `stablehlo_current_version`).
    pub fn attributes(&self) -> Result<Vec<(String, NamedValue)>> {
        let mut a = raw::PJRT_Plugin_Attributes_Args::new();
        // SAFETY: the args struct of PJRT_Plugin_Attributes; the returned array lives
        // as long as the process.
        unsafe { self.api.call(slot::PJRT_Plugin_Attributes, &mut a)? };
        let mut out = Vec::with_capacity(a.num_attributes);
        for i in 0..a.num_attributes {
            // SAFETY: `attributes` points to `num_attributes` named values.
            let nv = unsafe { &*a.attributes.add(i) };
            // SAFETY: each named value is consistent with its `type_` tag.
            out.push(unsafe { read_named_value(nv) });
        }
        Ok(out)
    }

    /// Creates a client with default options. See [`Client::new`](super::Client::new).
    pub fn client(&self) -> Result<super::Client> {
        super::Client::new(self, &super::ClientOptions::default())
    }
}

/// Reads one `PJRT_NamedValue` into Rust values.
///
/// # Safety
/// `nv` must be a named value the plugin filled in, consistent with its type tag.
unsafe fn read_named_value(nv: &raw::PJRT_NamedValue) -> (String, NamedValue) {
    // SAFETY: per the contract of this function.
    unsafe {
        let name = copy_str(nv.name, nv.name_size);
        let value = match nv.type_ {
            raw::PJRT_NamedValue_kString => {
                NamedValue::String(copy_str(nv.value.string_value, nv.value_size))
            }
            raw::PJRT_NamedValue_kInt64 => NamedValue::Int64(nv.value.int64_value),
            raw::PJRT_NamedValue_kInt64List => {
                let p = nv.value.int64_array_value;
                if p.is_null() || nv.value_size == 0 {
                    NamedValue::Int64List(Vec::new())
                } else {
                    NamedValue::Int64List(std::slice::from_raw_parts(p, nv.value_size).to_vec())
                }
            }
            raw::PJRT_NamedValue_kFloat => NamedValue::Float(nv.value.float_value),
            raw::PJRT_NamedValue_kBool => NamedValue::Bool(nv.value.bool_value),
            other => NamedValue::String(format!("(unknown named-value type {other})")),
        };
        (name, value)
    }
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.api.path)
            .field("api_version", &self.api.version)
            .finish()
    }
}
