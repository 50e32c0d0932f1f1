//! The loaded plugin: the library handle, the function table pointer, and the one
//! call funnel through which every C function is reached.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::raw::{self, Args, CFn, PJRT_Api, PJRT_Error, Slot, slot};
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

// SAFETY: `table` points into the plugin's static data (what `GetPjrtApi` returns),
// which is never written after load and lives as long as the process, since the
// library is never unloaded. Calling through it from several threads is how PJRT
// is used (JAX calls one plugin from many threads); each object's own thread
// contract is argued where its handle type is made `Send`/`Sync`.
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

    /// The head of the plugin's chain of extensions (`PJRT_Api::extension_start`),
    /// null when it has none.
    pub(crate) fn extension_start(&self) -> *const raw::PJRT_Extension_Base {
        // SAFETY: the table's head (struct_size, extension_start) exists in every
        // version of the API; the table is static.
        unsafe { (*self.table).extension_start }
    }

    /// The function in `s`, or a typed error when the plugin's table does not reach
    /// that slot (too old) or leaves it null.
    #[inline]
    fn slot_ptr<A, R>(&self, s: Slot<A, R>) -> Result<*const c_void> {
        if s.end() > self.table_size {
            return Err(self.unsupported(s.name));
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
            return Err(self.unsupported(s.name));
        }
        Ok(p)
    }

    fn unsupported(&self, function: &'static str) -> Error {
        Error::Unsupported {
            function,
            api_version: self.version,
        }
    }

    /// The function in slot `s`, typed by its args struct (for callers that keep
    /// function pointers, like the benchmark's raw path).
    #[inline]
    pub(crate) fn slot_fn<A: Args, R>(&self, s: Slot<A, R>) -> Result<CFn<A, R>> {
        let p = self.slot_ptr(s)?;
        // SAFETY: the table's entry at this position is the C function declared
        // there by the header, which takes `A*` and returns `R` (the slot list in
        // `raw` pairs each position with its args struct and return type).
        Ok(unsafe { std::mem::transmute_copy::<*const c_void, CFn<A, R>>(&p) })
    }

    /// Calls the C function in slot `s` with `args`; a returned `PJRT_Error` becomes
    /// [`Error::Pjrt`] (and is destroyed).
    ///
    /// # Safety
    /// Every pointer in `args` must be valid for what the C function does with it
    /// (the header's contract for that function); `A` matching the function is
    /// checked by the slot's type.
    #[inline]
    pub(crate) unsafe fn call<A: Args>(&self, s: Slot<A>, args: &mut A) -> Result<()> {
        let f = self.slot_fn(s)?;
        // SAFETY: `f` takes `A`, per the slot's type; the rest is the caller's.
        let err = unsafe { f(args) };
        if err.is_null() {
            Ok(())
        } else {
            Err(self.take_error(s.name, err))
        }
    }

    /// Makes a zeroed `A`, lets `set` fill its inputs, calls `s` and returns the
    /// struct with the outputs: the shape of every query (`..._Name`, `..._Id`, …).
    ///
    /// # Safety
    /// As [`call`](Self::call): the inputs `set` writes must be valid for the call.
    #[inline]
    pub(crate) unsafe fn query<A: Args>(&self, s: Slot<A>, set: impl FnOnce(&mut A)) -> Result<A> {
        let mut a = A::new();
        set(&mut a);
        // SAFETY: per this function's contract.
        unsafe { self.call(s, &mut a)? };
        Ok(a)
    }

    /// Calls one of the two `void`-returning error accessors.
    ///
    /// # Safety
    /// `args.error` must be a live error.
    unsafe fn call_void<A: Args>(&self, s: Slot<A, ()>, args: &mut A) -> Result<()> {
        let f = self.slot_fn(s)?;
        // SAFETY: per the slot's type and this function's contract.
        unsafe { f(args) };
        Ok(())
    }

    /// Turns a `PJRT_Error*` the plugin returned into [`Error::Pjrt`], destroying it.
    pub(crate) fn take_error(&self, function: &'static str, err: *mut PJRT_Error) -> Error {
        let mut msg = raw::PJRT_Error_Message_Args::new();
        msg.error = err;
        // SAFETY: `err` is a live error returned by the plugin. The header: the
        // message "has the lifetime of `error`", so it is copied before the error is
        // destroyed.
        let message = unsafe {
            match self.call_void(slot::PJRT_Error_Message, &mut msg) {
                Ok(()) => copy_str(msg.message, msg.message_size),
                Err(_) => String::from("(plugin gave no message)"),
            }
        };
        let mut code = raw::PJRT_Error_GetCode_Args::new();
        code.error = err;
        // SAFETY: as above; GetCode fails only on misuse.
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
    ///
    /// # Safety
    /// As [`call`](Self::call).
    unsafe fn call_nested<A: Args>(&self, s: Slot<A>, args: &mut A) -> std::result::Result<(), ()> {
        let f = self.slot_fn(s).map_err(|_| ())?;
        // SAFETY: as in `call`.
        let err = unsafe { f(args) };
        if err.is_null() {
            return Ok(());
        }
        let mut d = raw::PJRT_Error_Destroy_Args::new();
        d.error = err;
        // SAFETY: the plugin returned this error to us; destroyed once.
        let _ = unsafe { self.call_void(slot::PJRT_Error_Destroy, &mut d) };
        Err(())
    }
}

/// A slice over a (pointer, length) array the plugin returned: empty when the
/// pointer is null or the length zero (plugins return null for empty arrays, and
/// `slice::from_raw_parts` must never see a null pointer).
///
/// # Safety
/// Unless `p` is null or `len` zero, `p` must point to `len` initialised `T`s that
/// stay alive and unchanged for `'a`.
pub(crate) unsafe fn raw_slice<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: per the contract, `p` is non-null, aligned and valid for `len`.
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}

/// Copies a (pointer, length) string the plugin owns into a `String`.
///
/// # Safety
/// `p` must be null or point to `len` readable bytes.
pub(crate) unsafe fn copy_str(p: *const std::ffi::c_char, len: usize) -> String {
    // SAFETY: the caller guarantees `len` readable bytes at `p`, or a null `p`.
    let bytes = unsafe { raw_slice(p.cast::<u8>(), len) };
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
/// let plugin = xlaclient_pjrt::Plugin::load("/path/to/pjrt_c_api_cpu_plugin.so")?;
/// println!("PJRT C API {:?}", plugin.api_version());
/// let client = plugin.client()?;
/// println!("{} devices", client.addressable_devices().len());
/// # Ok::<(), xlaclient_pjrt::Error>(())
/// ```
///
/// # Thread safety
/// `Plugin` is `Send` and `Sync`: the PJRT C API may be called from any thread.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) api: Arc<Api>,
}

/// Every plugin loaded so far, keyed by the address of its `PJRT_Api` table: one
/// entry per loaded library, whatever path (symlink, copy, relative name) reached
/// it, so `PJRT_Plugin_Initialize` runs once per library.
fn registry() -> &'static Mutex<HashMap<usize, Plugin>> {
    static R: OnceLock<Mutex<HashMap<usize, Plugin>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Plugin {
    /// Loads the plugin at `path`: opens the library, calls `GetPjrtApi`, checks the
    /// API major version and calls `PJRT_Plugin_Initialize` (once per library: a
    /// library already loaded, through this path or another, gives the same
    /// `Plugin`).
    ///
    /// Errors: [`Error::PluginLoad`] if the file is missing or not a loadable shared
    /// library, [`Error::NotAPlugin`] if it has no `GetPjrtApi` (or it returns null),
    /// [`Error::IncompatibleApi`] for another major version.
    pub fn load(path: impl AsRef<Path>) -> Result<Plugin> {
        let path = path.as_ref();
        let path = std::fs::canonicalize(path).map_err(|e| Error::PluginLoad {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        // A truncated or foreign file would crash the process inside `dlopen`
        // (SIGBUS on a segment mapped past the end of the file): checked first.
        super::elf::check_shared_object(&path).map_err(|reason| Error::PluginLoad {
            path: path.clone(),
            reason,
        })?;
        // Held through initialisation, so that two threads loading one library
        // initialise it once.
        let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: loading a library runs its initialisers; that is what loading a
        // plugin means, and the caller chose the file. Loading a library that is
        // already loaded returns the same library (the loader counts references).
        let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| Error::PluginLoad {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        type GetApi = unsafe extern "C" fn() -> *const PJRT_Api;
        // SAFETY: `GetPjrtApi` has this signature in every PJRT plugin (the header's
        // entry point: `const PJRT_Api* GetPjrtApi()`).
        let get: libloading::Symbol<GetApi> =
            unsafe { lib.get(b"GetPjrtApi\0") }.map_err(|e| Error::NotAPlugin {
                path: path.clone(),
                reason: format!("no GetPjrtApi symbol ({e})"),
            })?;
        // SAFETY: the plugin's entry point, which takes nothing and returns a pointer
        // to its static function table.
        let table = unsafe { get() };
        if table.is_null() {
            return Err(Error::NotAPlugin {
                path,
                reason: "GetPjrtApi returned null".into(),
            });
        }
        if let Some(p) = reg.get(&(table as usize)) {
            // Already loaded and initialised. This second handle is never closed
            // either (plugins must not be unloaded; the extra reference is harmless).
            std::mem::forget(lib);
            return Ok(p.clone());
        }
        let plugin = Self::init(lib, table, &path)?;
        reg.insert(table as usize, plugin.clone());
        Ok(plugin)
    }

    /// Loads the default plugin: `PJRT_PLUGIN_PATH` if set, else the pinned CPU plugin
    /// (installed into the cache on first use; see [`install`](crate::install)).
    pub fn default_plugin() -> Result<Plugin> {
        let path = crate::install::default_plugin_path()?;
        Self::load(path)
    }

    /// Checks the table of a newly loaded library and initialises the plugin.
    fn init(lib: libloading::Library, table: *const PJRT_Api, path: &Path) -> Result<Plugin> {
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
        // SAFETY: no pointers in the args; called once per library (the registry in
        // `load` guarantees it, as the header asks).
        unsafe { api.call(slot::PJRT_Plugin_Initialize, &mut init)? };
        tracing::info!(
            path = %path.display(),
            api_major = major,
            api_minor = minor,
            "plugin loaded"
        );
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
        // SAFETY: no inputs; the header: "Returned attributes have the lifetime of
        // the process".
        let a = unsafe { self.api.query(slot::PJRT_Plugin_Attributes, |_| {})? };
        // SAFETY: `attributes` points to `num_attributes` named values owned by
        // the plugin (static), or is null when there are none.
        let attrs = unsafe { raw_slice(a.attributes, a.num_attributes) };
        let mut out = Vec::with_capacity(attrs.len());
        for nv in attrs {
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
                NamedValue::Int64List(raw_slice(nv.value.int64_array_value, nv.value_size).to_vec())
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
