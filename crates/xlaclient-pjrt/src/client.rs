//! `PJRT_Client`: devices, compilation and host-to-device transfers.

use std::ffi::c_char;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::api::{Api, NamedValue, Plugin, copy_str};
use super::buffer::{Buffer, HostLease};
use super::device::Device;
use super::event::{Event, WaitPolicy};
use super::executable::LoadedExecutable;
use super::options::{ClientOptions, CompileOptions};
use super::raw::{self, PJRT_Client, PJRT_Device, slot};
use crate::HloModuleSource;
use crate::error::{Error, Result};
use crate::host::{AlignedHost, HostPool, Lent};
use crate::shape::{ElementType, NativeType, Shape};

pub(crate) struct ClientInner {
    pub(crate) api: Arc<Api>,
    pub(crate) raw: *mut PJRT_Client,
    pub(crate) addressable: Vec<*mut PJRT_Device>,
    pub(crate) all: Vec<*mut PJRT_Device>,
    pub(crate) plugin: Plugin,
    /// How this client's events are waited for.
    pub(crate) wait: WaitPolicy,
    /// The identity written into guarded executables (made on first use).
    identity: std::sync::OnceLock<String>,
    /// The persistent compilation cache, if on.
    pub(crate) cache: Option<crate::cache::DiskCache>,
    /// Aligned host blocks for small uploads without a copy by the plugin.
    pub(crate) pool: Arc<HostPool>,
    /// Whether the plugin took a zero-copy upload: 0 not tried yet, 1 yes, 2 no
    /// (it refused one: uploads are then copied by the plugin during the call).
    zero_copy: std::sync::atomic::AtomicU8,
    /// The key-value store the plugin's callbacks reach (dropped after the client
    /// is destroyed: the plugin may call until then).
    _kv: Option<crate::distributed::StoreHandle>,
}

impl ClientInner {
    /// Wraps an event the plugin returned for this client's work.
    pub(crate) fn event(&self, raw: *mut raw::PJRT_Event) -> Option<Event> {
        Event::from_raw(&self.api, raw, self.wait)
    }
}

// SAFETY: the client is owned by exactly one `ClientInner` (destroyed once, in
// Drop, after every handle made from it: they all hold this `Arc`). PJRT clients
// are used from many threads at once (JAX compiles, uploads and executes from any
// thread on one client); the device pointers are owned by the client ("same
// lifetime as `client`") and only read.
unsafe impl Send for ClientInner {}
// SAFETY: see `Send`. The Rust fields are immutable after creation except the
// identity, a `OnceLock`; the C calls made through `&ClientInner` (compile,
// upload, queries, event wrapping) are ones PJRT makes from many threads at once.
unsafe impl Sync for ClientInner {}

impl Drop for ClientInner {
    fn drop(&mut self) {
        let mut a = raw::PJRT_Client_Destroy_Args::new();
        a.client = self.raw;
        // SAFETY: every buffer, executable, device and event of this client holds an
        // `Arc` of this inner client (events through the buffers and executions
        // that made them), so nothing made from it is alive; destroyed once.
        let _ = unsafe { self.api.call(slot::PJRT_Client_Destroy, &mut a) };
    }
}

/// A PJRT client: owns the devices of one plugin, compiles programs and moves data.
///
/// Cheap to clone (an `Arc`). Buffers, executables and devices keep their client
/// alive.
///
/// The runtime alone runs programs it is handed: here a StableHLO text (with the
/// core crate, a `Computation` built from Rust expressions goes to
/// [`compile`](Client::compile) instead).
///
/// ```
/// use xlaclient_pjrt::{Client, CompileOptions};
/// let client = Client::cpu()?;
/// let double = "func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
///   %y = stablehlo.add %x, %x : tensor<3xf32>
///   return %y : tensor<3xf32>
/// }";
/// let exe = client.compile_mlir(double.as_bytes(), &CompileOptions::new())?;
/// let input = client.buffer_from_host(&[1.0f32, 2.0, 3.0], &[3])?;
/// let out = exe.execute(&[&input])?;
/// assert_eq!(out[0].to_vec::<f32>()?, vec![2.0, 4.0, 6.0]);
/// # Ok::<(), xlaclient_pjrt::Error>(())
/// ```
///
/// # Thread safety
/// `Client` is `Send` and `Sync`: PJRT clients may be used from many threads at once.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

impl Client {
    /// Creates a client of `plugin` with the given create options.
    ///
    /// As in JAX, `XLA_FLAGS=--xla_force_host_platform_device_count=N` gives a CPU
    /// plugin's client `N` devices unless `options` set `cpu_device_count` (a CPU
    /// plugin is one whose file name says `cpu`).
    ///
    /// Unless `options` name `asynchronous`, the client is asked to run work on
    /// the calling thread (`asynchronous=false`, see
    /// [`ClientOptions::asynchronous`]): the faster choice for every pattern
    /// measured with the CPU plugin (`benches/call_paths.rs`). A plugin that
    /// refuses that option (one that is not a CPU plugin) gets `options` as given.
    pub fn new(plugin: &Plugin, options: &ClientOptions) -> Result<Client> {
        let _span =
            tracing::info_span!("client_create", plugin = %plugin.path().display()).entered();
        // The plugin reads XLA_FLAGS when the client is made and aborts on a flag
        // it does not know: a flag this crate cannot vouch for is refused here.
        let flags = crate::xla_flags::from_env().map_err(|reason| Error::InvalidOption {
            option: "XLA_FLAGS".into(),
            reason,
        })?;
        let from_flags;
        let options = match flags.xla_force_host_platform_device_count {
            Some(n)
                if !options.values.iter().any(|(k, _)| k == "cpu_device_count")
                    && plugin
                        .path()
                        .file_name()
                        .is_some_and(|f| f.to_string_lossy().contains("cpu")) =>
            {
                from_flags = options.clone().cpu_device_count(n.into());
                &from_flags
            }
            _ => options,
        };
        options.validate()?;
        if options.keep_host_heap {
            keep_host_heap()?;
        }
        let api = plugin.api.clone();
        let is_cpu = plugin
            .path()
            .file_name()
            .is_some_and(|f| f.to_string_lossy().contains("cpu"));
        let mut values = options.values.clone();
        let kv: Option<crate::distributed::StoreHandle> = options
            .distributed
            .as_ref()
            .map(|d| Box::new(d.store.clone()));
        if let Some(d) = &options.distributed {
            // A CPU plugin knows its process by `process_id`; CUDA's clients by
            // `node_id` among `num_nodes`.
            let named: &[(&str, u32)] = if is_cpu {
                &[("process_id", d.node_id)]
            } else {
                &[("node_id", d.node_id), ("num_nodes", d.num_nodes)]
            };
            for (name, v) in named {
                if !values.iter().any(|(n, _)| n == name) {
                    values.push((name.to_string(), NamedValue::Int64((*v).into())));
                }
            }
        }
        let create = || -> Result<(*mut PJRT_Client, Vec<(String, NamedValue)>)> {
            Ok(if values.iter().any(|(n, _)| n == "asynchronous") {
                (create_raw(&api, &values, kv.as_ref())?, values.clone())
            } else {
                let mut with_sync = values.clone();
                with_sync.push(("asynchronous".into(), NamedValue::Bool(false)));
                match create_raw(&api, &with_sync, kv.as_ref()) {
                    Ok(c) => (c, with_sync),
                    Err(_) => (create_raw(&api, &values, kv.as_ref())?, values.clone()),
                }
            })
        };
        // A mask that could not be restored after the create is reported once the
        // client is owned (and so destroyed with the error), never leaked.
        let ((raw_client, sent), unrestored) = match options.worker_threads {
            Some(n) => affinity::restricted(n, create)?,
            None => (create()?, None),
        };
        let mut inner = ClientInner {
            api: api.clone(),
            raw: raw_client,
            addressable: Vec::new(),
            all: Vec::new(),
            plugin: plugin.clone(),
            wait: options.wait,
            identity: std::sync::OnceLock::new(),
            cache: options.cache.resolve().map(|dir| {
                crate::cache::DiskCache::new(
                    dir,
                    options.cache_limit.unwrap_or(crate::cache::DEFAULT_LIMIT),
                )
            }),
            pool: Arc::default(),
            zero_copy: std::sync::atomic::AtomicU8::new(0),
            _kv: kv,
        };
        if let Some(e) = unrestored {
            return Err(e);
        }
        // SAFETY: the client was just created. The header: the device arrays and
        // the devices are owned by the client and live as long as it; the arrays
        // are copied at once.
        unsafe {
            let d = api.query(slot::PJRT_Client_AddressableDevices, |a| {
                a.client = raw_client
            })?;
            inner.addressable = ptr_slice(d.addressable_devices, d.num_addressable_devices);
            let d = api.query(slot::PJRT_Client_Devices, |a| a.client = raw_client)?;
            inner.all = ptr_slice(d.devices, d.num_devices);
        }
        let client = Client {
            inner: Arc::new(inner),
        };
        if let Some(d) = &options.distributed {
            let got = client.process_index()?;
            if i64::from(got) != i64::from(d.node_id) {
                return Err(Error::InvalidOption {
                    option: "distributed".into(),
                    reason: format!(
                        "the plugin did not take node id {} (its client reports process {got}): \
                         this plugin cannot join a job of several processes",
                        d.node_id
                    ),
                });
            }
        }
        tracing::info!(
            devices = client.inner.addressable.len(),
            options = client_options_text(&sent).as_str(),
            "client created"
        );
        Ok(client)
    }

    /// The client a handle (buffer, executable) belongs to.
    pub(crate) fn from_inner(inner: &Arc<ClientInner>) -> Client {
        Client {
            inner: inner.clone(),
        }
    }

    /// A client of the default plugin (see [`Plugin::default_plugin`]): the CPU plugin
    /// unless `PJRT_PLUGIN_PATH` names another.
    pub fn cpu() -> Result<Client> {
        Plugin::default_plugin()?.client()
    }

    /// The plugin this client was made from.
    pub fn plugin(&self) -> &Plugin {
        &self.inner.plugin
    }

    /// The platform name (`"cpu"`, `"cuda"`, `"tpu"`, …).
    pub fn platform_name(&self) -> Result<String> {
        let c = self.inner.raw;
        // SAFETY: the client is live; the header: the name "has the same lifetime as
        // `client`. It is owned by `client`"; copied at once.
        unsafe {
            let a = self
                .inner
                .api
                .query(slot::PJRT_Client_PlatformName, |a| a.client = c)?;
            Ok(copy_str(a.platform_name, a.platform_name_size))
        }
    }

    /// The platform version string.
    pub fn platform_version(&self) -> Result<String> {
        let c = self.inner.raw;
        // SAFETY: as in `platform_name`.
        unsafe {
            let a = self
                .inner
                .api
                .query(slot::PJRT_Client_PlatformVersion, |a| a.client = c)?;
            Ok(copy_str(a.platform_version, a.platform_version_size))
        }
    }

    /// The index of this process (0 unless running multi-process).
    pub fn process_index(&self) -> Result<i32> {
        let c = self.inner.raw;
        // SAFETY: the client is live; a plain out-parameter.
        let a = unsafe {
            self.inner
                .api
                .query(slot::PJRT_Client_ProcessIndex, |a| a.client = c)?
        };
        Ok(a.process_index)
    }

    /// The devices this process can use.
    pub fn addressable_devices(&self) -> Vec<Device> {
        self.inner
            .addressable
            .iter()
            .map(|d| Device::new(&self.inner, *d))
            .collect()
    }

    /// Every device the runtime knows, addressable or not.
    pub fn devices(&self) -> Vec<Device> {
        self.inner
            .all
            .iter()
            .map(|d| Device::new(&self.inner, *d))
            .collect()
    }

    /// The first addressable device (where single-device work runs by default).
    pub fn default_device(&self) -> Result<Device> {
        self.inner
            .addressable
            .first()
            .map(|d| Device::new(&self.inner, *d))
            .ok_or(Error::NoDevice)
    }

    /// Compiles an HLO module (e.g. a `Computation` built with the core crate's
    /// `Builder`) with default options.
    pub fn compile(&self, module: impl HloModuleSource) -> Result<LoadedExecutable> {
        self.compile_with(module, &CompileOptions::default())
    }

    /// Compiles an HLO module with the given options. The module is checked in Rust
    /// first (XLA may abort the process on a malformed module instead of returning
    /// an error).
    pub fn compile_with(
        &self,
        module: impl HloModuleSource,
        options: &CompileOptions,
    ) -> Result<LoadedExecutable> {
        options.validate(&self.device_ids()?)?;
        let (replicas, partitions) = options.counts();
        module
            .check_replicas(replicas, partitions)
            .map_err(|reason| Error::InvalidOption {
                option: "num_replicas".into(),
                reason,
            })?;
        if module.uses_host_callbacks() {
            self.plugin().enable_host_callbacks()?;
        }
        if options.program_format() == crate::ProgramFormat::StableHlo {
            let text = match module.stablehlo_text(replicas, partitions) {
                Some(Ok(t)) => t,
                Some(Err(reason)) => {
                    return Err(Error::InvalidOption {
                        option: "format".into(),
                        reason,
                    });
                }
                None => {
                    return Err(Error::InvalidOption {
                        option: "format".into(),
                        reason: "this module source cannot print StableHLO".into(),
                    });
                }
            };
            let params = (!options.spmd_partitioned())
                .then(|| module.entry_parameter_shapes())
                .flatten();
            let mut z = Vec::with_capacity(text.len() + 1);
            z.extend_from_slice(text.as_bytes());
            z.push(0);
            let mut exe = self.compile_program(b"mlir", &z[..text.len()], options, params)?;
            if options.spmd_partitioned() {
                exe.check_static_entry()?;
            }
            return Ok(exe);
        }
        // Uninitialized buffers on this plugin's CPU platform, zeros elsewhere
        // (and in SPMD-partitioned programs, which would split the kernel's
        // buffer as a replicated value).
        let bytes = if module.uses_uninitialized_buffers()
            && (options.spmd_partitioned()
                || !self.platform_name().is_ok_and(|p| p == "cpu")
                || self.plugin().enable_uninitialized_buffers().is_err())
        {
            module.hlo_module_bytes_zeroed()
        } else {
            module.hlo_module_bytes()
        };
        if options.spmd_partitioned() {
            // The module states the logical arrays; each partition's parameters are
            // its shards, read back from the partitioned program.
            let mut exe = self.compile_program(b"hlo", &bytes, options, None)?;
            exe.check_static_entry()?;
            return Ok(exe);
        }
        let params = module.entry_parameter_shapes();
        self.compile_program(b"hlo", &bytes, options, params)
    }

    /// Compiles a serialized `HloModuleProto` as it is, unchecked. The runtime has
    /// no verifier of its own: the core crate's `Computation::from_hlo_bytes`
    /// decodes and verifies bytes and is the safe way in (`client.compile(&computation)`).
    ///
    /// # Safety
    ///
    /// `bytes` must be a well-formed, complete `HloModuleProto` (host program shape,
    /// layouts on every shape, the entry computation id; every instruction
    /// well-typed): XLA checks weakly and may abort the process on a malformed
    /// module instead of returning an error.
    pub unsafe fn compile_hlo_bytes_unchecked(
        &self,
        bytes: &[u8],
        options: &CompileOptions,
    ) -> Result<LoadedExecutable> {
        self.compile_program(b"hlo", bytes, options, None)
    }

    /// Compiles a StableHLO/MLIR module (text or bytecode), as exported by JAX's
    /// `lowered.as_text()`.
    ///
    /// The plugin is handed a NUL-terminated copy of `code` (MLIR's lexer in some
    /// plugins reads past `code_size` up to a NUL: a truncated text crashed them).
    /// The entry's parameter and result shapes are read back from the compiled
    /// program (`PJRT_Executable_OptimizedProgram`): dynamic dimensions (a bounded
    /// `tensor<?xf32, #stablehlo.bounds<4>>`) are [`Error::DynamicShape`] (a
    /// plugin may abort the process when such a program is given an array of its
    /// actual size), and executions check their arguments' types and dimensions
    /// against the parameters, as for HLO modules. Plugins that do not report the
    /// program leave the check of arguments to the plugin (byte sizes).
    pub fn compile_mlir(&self, code: &[u8], options: &CompileOptions) -> Result<LoadedExecutable> {
        let mut z = Vec::with_capacity(code.len() + 1);
        z.extend_from_slice(code);
        z.push(0);
        let mut exe = self.compile_program(b"mlir", &z[..code.len()], options, None)?;
        exe.check_static_entry()?;
        Ok(exe)
    }

    /// The ids of every device of the client (for checking device assignments).
    fn device_ids(&self) -> Result<Vec<i64>> {
        self.devices()
            .iter()
            .map(|d| d.id().map(i64::from))
            .collect()
    }

    /// The directory of the client's persistent compilation cache, when it has
    /// one ([`ClientOptions::compile_cache`]).
    pub fn compile_cache_dir(&self) -> Option<&std::path::Path> {
        self.inner.cache.as_ref().map(|c| c.dir())
    }

    /// What the client's compilation cache did so far (all zero without a cache).
    pub fn compile_cache_stats(&self) -> crate::cache::CacheStats {
        self.inner
            .cache
            .as_ref()
            .map(|c| c.stats())
            .unwrap_or_default()
    }

    /// Checks `options`, then loads the program from the compilation cache or
    /// compiles it (and stores it there).
    fn compile_program(
        &self,
        format: &[u8],
        code: &[u8],
        options: &CompileOptions,
        params: Option<Vec<Shape>>,
    ) -> Result<LoadedExecutable> {
        let span = tracing::info_span!(
            "compile",
            format = std::str::from_utf8(format).unwrap_or("?"),
            bytes = code.len(),
            module = tracing::field::Empty,
            cache = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
        );
        let _entered = span.enter();
        let start = std::time::Instant::now();
        let (exe, cache) = self.compile_or_load(format, code, options, params)?;
        let elapsed = start.elapsed();
        let elapsed_us = elapsed.as_micros().min(u64::MAX as u128) as u64;
        span.record("module", exe.name());
        span.record("cache", cache);
        span.record("elapsed_us", elapsed_us);
        tracing::info!(module = exe.name(), cache, elapsed_us, "compiled");
        Ok(exe)
    }

    /// [`compile_program`](Self::compile_program)'s work; also says where the
    /// executable came from: `"hit"` (the cache), `"miss"` (compiled and stored)
    /// or `"off"` (compiled, no cache).
    fn compile_or_load(
        &self,
        format: &[u8],
        code: &[u8],
        options: &CompileOptions,
        params: Option<Vec<Shape>>,
    ) -> Result<(LoadedExecutable, &'static str)> {
        options.validate(&self.device_ids()?)?;
        let opts = options.to_bytes();
        // Without a cache, or when XLA is asked to dump its passes (which a load
        // from the cache would skip), compile.
        let Some(cache) = self.inner.cache.as_ref().filter(|_| !options.dumps()) else {
            return Ok((
                self.compile_fresh(format, code, &opts, options, params)?,
                "off",
            ));
        };
        let Ok(identity) = self.plugin_identity() else {
            return Ok((
                self.compile_fresh(format, code, &opts, options, params)?,
                "off",
            ));
        };
        let shapes: String = params.iter().flatten().map(|s| format!("{s};")).collect();
        let key = crate::cache::DiskCache::key(&[
            format,
            code,
            &opts,
            shapes.as_bytes(),
            identity.as_bytes(),
        ]);
        if let Some(guarded) = cache.load(&key) {
            match self.deserialize_executable(&guarded) {
                Ok(mut exe) => {
                    // The module's own shapes (when given) over the entry's.
                    if let Some(p) =
                        params.filter(|_| !options.proto().parameter_is_tupled_arguments)
                    {
                        exe.set_params(p);
                    }
                    cache.hit();
                    return Ok((exe, "hit"));
                }
                // Truncated, damaged, foreign, or refused by the plugin: never
                // used; compiled again and replaced below.
                Err(_) => cache.reject(&key),
            }
        }
        cache.miss();
        let exe = self.compile_fresh(format, code, &opts, options, params)?;
        // A plugin that cannot serialize (or a program it cannot) is simply not
        // cached.
        if let Ok(guarded) = exe.serialize() {
            cache.store(&key, &guarded);
        }
        Ok((exe, "miss"))
    }

    /// Compiles on a thread with a [`COMPILE_STACK`] stack.
    fn compile_fresh(
        &self,
        format: &[u8],
        code: &[u8],
        opts: &[u8],
        options: &CompileOptions,
        params: Option<Vec<Shape>>,
    ) -> Result<LoadedExecutable> {
        // Argument lists of tupled-argument programs are the tuple's elements:
        // not checked against the (single, tuple) parameter.
        let params = params.filter(|_| !options.proto().parameter_is_tupled_arguments);
        // Kept for the fallback below (the closure is dropped when no thread
        // starts); a few shapes, cloned once per compile.
        let fallback = params.clone();
        let compile = || self.compile_here(format, code, opts, params);
        std::thread::scope(|s| {
            match std::thread::Builder::new()
                .name("xlaclient-compile".into())
                .stack_size(COMPILE_STACK)
                .spawn_scoped(s, compile)
            {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                // No thread to be had (address space or thread limits): compile
                // here, as a plain C caller would.
                Err(_) => self.compile_here(format, code, opts, fallback),
            }
        })
    }

    /// Compiles on the calling thread.
    fn compile_here(
        &self,
        format: &[u8],
        code: &[u8],
        opts: &[u8],
        params: Option<Vec<Shape>>,
    ) -> Result<LoadedExecutable> {
        let mut prog = raw::PJRT_Program::new();
        // The C API declares `code` mutable (it is an out-parameter for other calls);
        // compilation only reads it.
        prog.code = code.as_ptr() as *mut c_char;
        prog.code_size = code.len();
        prog.format = format.as_ptr().cast::<c_char>();
        prog.format_size = format.len();
        let mut a = raw::PJRT_Client_Compile_Args::new();
        a.client = self.inner.raw;
        a.program = &prog;
        a.compile_options = opts.as_ptr().cast::<c_char>();
        a.compile_options_size = opts.len();
        // SAFETY: `prog`, `code`, `format` and `opts` outlive the call (the header:
        // the program and options are owned by the caller and read during the
        // call); the new executable is ours to destroy (`LoadedExecutable` does).
        unsafe { self.inner.api.call(slot::PJRT_Client_Compile, &mut a)? };
        LoadedExecutable::from_raw(&self.inner, a.executable, params)
    }

    /// Loads an executable written by [`LoadedExecutable::serialize`]: its guard is
    /// checked first (format, length, SHA-256, and that this client's plugin wrote
    /// it: see [`plugin_identity`](Self::plugin_identity)), and damaged, truncated or
    /// foreign bytes are [`Error::SerializedExecutable`] without reaching the plugin.
    /// The executable's arguments are checked against the parameter shapes the
    /// guard carries, as for a program compiled here.
    ///
    /// ```
    /// # use xlaclient_pjrt::{Client, CompileOptions, Error};
    /// # let client = Client::cpu()?;
    /// # let neg = "func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    /// #   %y = stablehlo.negate %x : tensor<2xf32>
    /// #   return %y : tensor<2xf32>
    /// # }";
    /// let exe = client.compile_mlir(neg.as_bytes(), &CompileOptions::new())?;
    /// let mut bytes = exe.serialize()?;
    /// let again = client.deserialize_executable(&bytes)?;
    /// let x = client.buffer_from_host(&[1.0f32, -2.0], &[2])?;
    /// assert_eq!(again.execute(&[&x])?[0].to_vec::<f32>()?, vec![-1.0, 2.0]);
    ///
    /// let last = bytes.len() - 1;
    /// bytes[last] ^= 1; // one bit flipped on disk
    /// assert!(matches!(
    ///     client.deserialize_executable(&bytes),
    ///     Err(Error::SerializedExecutable(_))
    /// ));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn deserialize_executable(&self, bytes: &[u8]) -> Result<LoadedExecutable> {
        let u = crate::guard::unwrap(bytes, self.plugin_identity()?)?;
        let mut exe = self.deserialize_raw(u.payload, u.params)?;
        exe.set_checked_static();
        Ok(exe)
    }

    /// Loads XLA's own serialized executable bytes, without a guard (bytes from
    /// [`LoadedExecutable::serialize_unguarded`] or another XLA client). The
    /// entry's shapes are then read from the program the plugin reports
    /// (`PJRT_Executable_OptimizedProgram`), and dynamic ones refused, when the
    /// plugin reports it.
    ///
    /// # Safety
    ///
    /// `bytes` must be an intact executable serialized by this very plugin build:
    /// plugins check little of what they deserialize, and damaged or foreign bytes
    /// can abort the process (the 0.81 CPU plugin does on single flipped bits) or
    /// run corrupt machine code. Prefer [`deserialize_executable`](Self::deserialize_executable).
    pub unsafe fn deserialize_executable_unguarded(
        &self,
        bytes: &[u8],
    ) -> Result<LoadedExecutable> {
        let mut exe = self.deserialize_raw(bytes, None)?;
        exe.check_static_entry()?;
        Ok(exe)
    }

    /// Hands XLA's serialized executable to the plugin (the guard, if any, checked
    /// by the caller).
    fn deserialize_raw(
        &self,
        bytes: &[u8],
        params: Option<Vec<Shape>>,
    ) -> Result<LoadedExecutable> {
        let mut a = raw::PJRT_Executable_DeserializeAndLoad_Args::new();
        a.client = self.inner.raw;
        a.serialized_executable = bytes.as_ptr().cast::<c_char>();
        a.serialized_executable_size = bytes.len();
        // SAFETY: `bytes` outlives the call (read during it); no compile-option
        // override or load options (null); the new executable is ours to destroy.
        // The bytes themselves are the plugin's to trust: both callers establish
        // that they are intact bytes of this plugin (the guard, or the caller of an
        // `unsafe fn`).
        unsafe {
            self.inner
                .api
                .call(slot::PJRT_Executable_DeserializeAndLoad, &mut a)?
        };
        let mut exe = LoadedExecutable::from_raw(&self.inner, a.loaded_executable, params)?;
        exe.set_payload(bytes);
        Ok(exe)
    }

    /// What names this client's plugin in the guard of serialized executables (and
    /// in the keys of compilation caches): the PJRT C API version, the platform's
    /// name and version, the plugin's attributes, the size and modification time of
    /// its file, the client's process index and the global ids of its devices (an
    /// executable compiled for one process's devices names them). Executables are
    /// loaded only by a client with the same identity.
    pub fn plugin_identity(&self) -> Result<&str> {
        if let Some(id) = self.inner.identity.get() {
            return Ok(id);
        }
        let plugin = &self.inner.plugin;
        let (major, minor) = plugin.api_version();
        // The devices by global id, and this client's process: an executable
        // compiled for process 0's devices must not load in process 1's client.
        let ids = self
            .devices()
            .iter()
            .map(|d| d.id().map(|i| i.to_string()))
            .collect::<Result<Vec<_>>>()?
            .join(",");
        let mut id = format!(
            "pjrt {major}.{minor}; {} {}; process {}; devices [{ids}]",
            self.platform_name()?,
            self.platform_version()?,
            self.process_index()?,
        );
        let mut attrs = plugin.attributes()?;
        attrs.sort_by(|a, b| a.0.cmp(&b.0));
        for (k, v) in attrs {
            id.push_str(&format!("; {k}={v:?}"));
        }
        let path = plugin.path();
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned());
        match std::fs::metadata(path) {
            Ok(m) => {
                let mtime = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                id.push_str(&format!(
                    "; file {} {} bytes mtime {mtime}",
                    file.unwrap_or_default(),
                    m.len()
                ));
            }
            // The file is gone (replaced after loading): an identity no file on
            // disk matches.
            Err(_) => id.push_str(&format!("; file {} (unreadable)", path.display())),
        }
        Ok(self.inner.identity.get_or_init(|| id))
    }

    /// Copies host data to a new buffer on the default device. `dims` must multiply
    /// to `data.len()`.
    pub fn buffer_from_host<T: NativeType>(&self, data: &[T], dims: &[i64]) -> Result<Buffer> {
        let dev = *self.inner.addressable.first().ok_or(Error::NoDevice)?;
        self.upload(data, dims, dev)
    }

    /// Copies a scalar to a new rank-0 buffer on the default device.
    pub fn scalar<T: NativeType>(&self, value: T) -> Result<Buffer> {
        self.buffer_from_host(&[value], &[])
    }

    /// Moves `host` into a new buffer on the default device without copying it
    /// where the plugin can use host memory as the buffer's (a CPU plugin, with the
    /// array's 64-byte alignment and dense layout: the C API's
    /// `kImmutableZeroCopy`); other plugins copy it. `dims` must multiply to
    /// `host.len()`. The buffer keeps the array, unchanged, as long as the plugin
    /// may read it; [`Buffer::into_host`] gives it back to be filled again (see
    /// [`AlignedHost`] for the loop). A buffer made this way is never donated
    /// (`Arg::Donate` passes it as kept): its memory is the array's.
    ///
    /// # Errors
    /// [`Error::HostLength`] when `dims` do not describe `host.len()` values (the
    /// array is dropped); the plugin's refusal.
    pub fn buffer_from_aligned<T: NativeType>(
        &self,
        host: AlignedHost<T>,
        dims: &[i64],
    ) -> Result<Buffer> {
        let dev = *self.inner.addressable.first().ok_or(Error::NoDevice)?;
        self.upload_aligned(host, dims, dev)
    }

    pub(crate) fn upload_aligned<T: NativeType>(
        &self,
        host: AlignedHost<T>,
        dims: &[i64],
        device: *mut PJRT_Device,
    ) -> Result<Buffer> {
        check_count(dims, host.len())?;
        tracing::debug!(
            bytes = std::mem::size_of_val(host.as_slice()),
            ty = %T::TYPE,
            zero_copy = true,
            "host_to_device"
        );
        self.upload_lent(Lent::Array(host.into_memory()), T::TYPE, dims, device)
    }

    pub(crate) fn upload<T: NativeType>(
        &self,
        data: &[T],
        dims: &[i64],
        device: *mut PJRT_Device,
    ) -> Result<Buffer> {
        check_count(dims, data.len())?;
        tracing::debug!(
            bytes = std::mem::size_of_val(data),
            ty = %T::TYPE,
            zero_copy = false,
            "host_to_device"
        );
        if self.inner.zero_copy.load(Ordering::Relaxed) != ZERO_COPY_REFUSED {
            if let Some(block) = self.inner.pool.copy_of(data) {
                return self.upload_lent(Lent::Pooled(block), T::TYPE, dims, device);
            }
        }
        // SAFETY: `data` holds exactly the elements `dims` describe (checked above);
        // with kImmutableOnlyDuringCall semantics the plugin reads `data` during the
        // call only.
        let (raw, done) = unsafe {
            self.upload_raw(
                data.as_ptr().cast(),
                T::TYPE,
                dims,
                device,
                raw::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
            )?
        };
        let buffer = Buffer::with_meta(&self.inner, raw, T::TYPE, dims);
        // The host data must stay untouched until this event fires. It has fired for
        // every plugin we know when the semantics is "only during call" (then the
        // wait is one IsReady call); when it has not, wait, so that `data` may be
        // reused as soon as we return.
        super::event::wait_opt(self.inner.event(done))?;
        Ok(buffer)
    }

    /// Uploads `memory` (whose element type is `ty`, its count checked against
    /// `dims` by the caller) with zero-copy semantics; the buffer keeps `memory`
    /// until the plugin is done with it. A plugin that refuses zero-copy uploads
    /// gets a copy during the call instead (remembered for the client's later
    /// uploads), and the memory is then the buffer's at once.
    fn upload_lent(
        &self,
        memory: Lent,
        ty: ElementType,
        dims: &[i64],
        device: *mut PJRT_Device,
    ) -> Result<Buffer> {
        let data = memory.memory().ptr().cast();
        if self.inner.zero_copy.load(Ordering::Relaxed) != ZERO_COPY_REFUSED {
            // SAFETY: `memory` holds exactly the elements `dims` describe (checked
            // by the caller), aligned to 64 bytes. With zero-copy semantics the
            // plugin may read it until the done-with-host-buffer event fires; the
            // returned buffer owns `memory` and frees, pools or returns it only
            // after that event (its `Drop` and `into_host`), and nothing can write
            // it meanwhile (the buffer holds the only handle and lends it to nobody
            // as writable). If the call fails no buffer exists, and the plugin
            // keeps no reference to the data of a failed upload.
            match unsafe {
                self.upload_raw(
                    data,
                    ty,
                    dims,
                    device,
                    raw::PJRT_HostBufferSemantics_kImmutableZeroCopy,
                )
            } {
                Ok((raw, done)) => {
                    self.inner
                        .zero_copy
                        .store(ZERO_COPY_TAKEN, Ordering::Relaxed);
                    let lease = HostLease { memory, done };
                    return Ok(Buffer::with_host(&self.inner, raw, ty, dims, lease));
                }
                // A plugin that has taken zero-copy uploads before refuses this
                // one for its own reasons (a bad device, say): report it.
                Err(e) if self.inner.zero_copy.load(Ordering::Relaxed) == ZERO_COPY_TAKEN => {
                    return Err(e);
                }
                Err(_) => self
                    .inner
                    .zero_copy
                    .store(ZERO_COPY_REFUSED, Ordering::Relaxed),
            }
        }
        // SAFETY: as above, read during the call only (kImmutableOnlyDuringCall).
        let (raw, done) = unsafe {
            self.upload_raw(
                data,
                ty,
                dims,
                device,
                raw::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
            )?
        };
        // The memory is kept (an `AlignedHost` goes back through `into_host`)
        // with the done event, which has fired or fires once the copy is made.
        let lease = HostLease { memory, done };
        Ok(Buffer::with_host(&self.inner, raw, ty, dims, lease))
    }

    /// `PJRT_Client_BufferFromHostBuffer`: returns the new buffer and the
    /// done-with-host-buffer event (both ours to destroy; the event may be null).
    ///
    /// # Safety
    /// `data` must point to the elements of type `ty` that `dims` describe, dense
    /// and row-major, readable as `semantics` says: during the call only
    /// (`kImmutableOnlyDuringCall`), or, unchanged, until the returned event fires
    /// (the other semantics). `device` must be an addressable device of this
    /// client.
    unsafe fn upload_raw(
        &self,
        data: *const std::ffi::c_void,
        ty: ElementType,
        dims: &[i64],
        device: *mut PJRT_Device,
        semantics: std::ffi::c_int,
    ) -> Result<(*mut raw::PJRT_Buffer, *mut raw::PJRT_Event)> {
        let mut a = raw::PJRT_Client_BufferFromHostBuffer_Args::new();
        a.client = self.inner.raw;
        a.data = data;
        a.type_ = super::buffer::buffer_type_of(ty);
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        a.host_buffer_semantics = semantics;
        a.device = device;
        // SAFETY: per this function's contract for `data` and `device`; `dims` is
        // read during the call. No strides, layout or memory (null). The new
        // buffer and event are returned to the caller to own.
        unsafe {
            self.inner
                .api
                .call(slot::PJRT_Client_BufferFromHostBuffer, &mut a)?
        };
        Ok((a.buffer, a.done_with_host_buffer))
    }
}

/// `ClientInner::zero_copy`: the plugin took a zero-copy upload.
const ZERO_COPY_TAKEN: u8 = 1;
/// `ClientInner::zero_copy`: the plugin refused a zero-copy upload.
const ZERO_COPY_REFUSED: u8 = 2;

/// Checks that `dims` describe `len` elements.
/// The create options as `name=value` pairs, for the client-creation event.
fn client_options_text(values: &[(String, NamedValue)]) -> String {
    values
        .iter()
        .map(|(n, v)| format!("{n}={v:?}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn check_count(dims: &[i64], len: usize) -> Result<()> {
    if element_count(dims) != Some(len as i64) {
        return Err(Error::HostLength {
            what: format!("dimensions {dims:?}"),
            expected: element_count(dims).unwrap_or(-1),
            given: len,
        });
    }
    Ok(())
}

/// `PJRT_Client_Create` with the named create options `values`: the new client,
/// ours to destroy.
fn create_raw(
    api: &Api,
    values: &[(String, NamedValue)],
    kv: Option<&crate::distributed::StoreHandle>,
) -> Result<*mut PJRT_Client> {
    // The named values borrow the option names and strings from `values`, which
    // outlives the call.
    let mut nvs: Vec<raw::PJRT_NamedValue> = Vec::with_capacity(values.len());
    for (name, value) in values {
        let mut nv = raw::PJRT_NamedValue::new();
        nv.name = name.as_ptr().cast::<c_char>();
        nv.name_size = name.len();
        match value {
            NamedValue::String(s) => {
                nv.type_ = raw::PJRT_NamedValue_kString;
                nv.value.string_value = s.as_ptr().cast::<c_char>();
                nv.value_size = s.len();
            }
            NamedValue::Int64(v) => {
                nv.type_ = raw::PJRT_NamedValue_kInt64;
                nv.value.int64_value = *v;
                nv.value_size = 1;
            }
            NamedValue::Int64List(v) => {
                nv.type_ = raw::PJRT_NamedValue_kInt64List;
                nv.value.int64_array_value = v.as_ptr();
                nv.value_size = v.len();
            }
            NamedValue::Float(v) => {
                nv.type_ = raw::PJRT_NamedValue_kFloat;
                nv.value.float_value = *v;
                nv.value_size = 1;
            }
            NamedValue::Bool(v) => {
                nv.type_ = raw::PJRT_NamedValue_kBool;
                nv.value.bool_value = *v;
                nv.value_size = 1;
            }
        }
        nvs.push(nv);
    }
    let mut a = raw::PJRT_Client_Create_Args::new();
    a.create_options = nvs.as_ptr();
    a.num_options = nvs.len();
    if let Some(handle) = kv {
        crate::distributed::wire(handle, &mut a);
    }
    // SAFETY: `nvs` and the names and strings it points into (owned by `values`)
    // outlive the call; the plugin copies what it keeps. The key-value callbacks'
    // store (if any) is owned by the client made from this call and dropped after
    // the client is destroyed. The new client is the caller's to destroy.
    unsafe { api.call(slot::PJRT_Client_Create, &mut a)? };
    Ok(a.client)
}

/// The stack of the thread XLA compiles on: 512 MiB.
///
/// XLA's HLO passes recurse along operand chains, so the stack a compile needs
/// grows with the depth of the graph: 100,000 chained adds overflowed the 8 MiB
/// main-thread stack inside the 0.115 CPU plugin and aborted the process
/// (measured: that chain needs between 10 and 12 MiB, about 120 bytes per level).
/// 512 MiB covers a chain of about four million instructions, four times the
/// largest graph the builder is measured with (1M instructions), whose compile
/// alone takes many minutes. Only the pages a compile touches are committed; the
/// rest is reserved address space. If no such thread can be started (address
/// space or thread limits), the compile runs on the calling thread. One thread
/// per compile (tens of microseconds) is noise next to an XLA compile
/// (milliseconds at least).
pub const COMPILE_STACK: usize = 512 << 20;

/// The number of elements `dims` describe; `None` for a negative size or an
/// overflow.
pub(crate) fn element_count(dims: &[i64]) -> Option<i64> {
    dims.iter().try_fold(
        1i64,
        |acc, d| if *d < 0 { None } else { acc.checked_mul(*d) },
    )
}

/// Copies a C array of device pointers.
///
/// # Safety
/// `p` must be null or point to `n` pointers.
unsafe fn ptr_slice(p: *const *mut PJRT_Device, n: usize) -> Vec<*mut PJRT_Device> {
    // SAFETY: per the contract.
    unsafe { super::api::raw_slice(p, n).to_vec() }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("plugin", &self.inner.plugin)
            .field("addressable_devices", &self.inner.addressable.len())
            .finish()
    }
}

/// [`ClientOptions::keep_host_heap`]: glibc's `mallopt` with the three settings
/// that keep freed memory in the heap, for every thread's arena. The settings
/// are the process's: they are made once, by the first client that asks, and
/// later clients get that outcome.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_host_heap() -> Result<()> {
    use std::ffi::c_int;
    unsafe extern "C" {
        /// glibc's `int mallopt(int param, int value)`; 1 on success.
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }
    // glibc's parameter numbers (malloc.h).
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_TOP_PAD: c_int = -2;
    const M_MMAP_THRESHOLD: c_int = -3;
    static DONE: std::sync::OnceLock<std::result::Result<(), String>> = std::sync::OnceLock::new();
    let done = DONE.get_or_init(|| {
        for (param, name, value) in [
            (M_MMAP_THRESHOLD, "M_MMAP_THRESHOLD", 1 << 30),
            (M_TRIM_THRESHOLD, "M_TRIM_THRESHOLD", c_int::MAX),
            (M_TOP_PAD, "M_TOP_PAD", 64 << 20),
        ] {
            // SAFETY: `mallopt` takes two integers and changes the allocator's
            // tunable parameters under its own lock; any value is accepted or
            // refused by its return code.
            if unsafe { mallopt(param, value) } != 1 {
                return Err(format!("glibc refused mallopt({name}, {value})"));
            }
        }
        Ok(())
    });
    done.clone().map_err(|reason| Error::InvalidOption {
        option: "keep_host_heap".into(),
        reason,
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_host_heap() -> Result<()> {
    Err(Error::InvalidOption {
        option: "keep_host_heap".into(),
        reason: "needs Linux with glibc (its mallopt)".into(),
    })
}

/// The CPU affinity masks behind [`ClientOptions::worker_threads`].
///
/// XLA's CPU client sizes its worker pool (the `XLAEigen` threads) when it is made,
/// from `NPROC` if set, else from the number of CPUs the *creating thread* may run
/// on (its `sched_getaffinity` mask). [`restricted`] narrows the calling thread's
/// mask to `n` of its CPUs around the create, then gives the calling thread and
/// every thread the create started its original mask back: the pool has `n`
/// workers, and neither they nor the caller stay pinned.
#[cfg(target_os = "linux")]
mod affinity {
    use std::collections::BTreeSet;

    use crate::error::{Error, Result};

    /// glibc's `cpu_set_t`: 1024 CPUs, one bit each.
    #[derive(Clone, Copy, PartialEq, Eq)]
    #[repr(C)]
    struct CpuSet([u64; 16]);

    unsafe extern "C" {
        fn sched_getaffinity(pid: i32, size: usize, mask: *mut CpuSet) -> i32;
        fn sched_setaffinity(pid: i32, size: usize, mask: *const CpuSet) -> i32;
    }

    impl CpuSet {
        fn count(&self) -> usize {
            self.0.iter().map(|w| w.count_ones() as usize).sum()
        }
        /// The first `n` CPUs of this set.
        fn first(&self, n: usize) -> CpuSet {
            let mut out = CpuSet([0; 16]);
            let mut left = n;
            for (i, w) in self.0.iter().enumerate() {
                for b in 0..64 {
                    if left > 0 && w & (1u64 << b) != 0 {
                        out.0[i] |= 1u64 << b;
                        left -= 1;
                    }
                }
            }
            out
        }
    }

    fn bad(reason: String) -> Error {
        Error::InvalidOption {
            option: "worker_threads".into(),
            reason,
        }
    }

    /// The mask of thread `tid` (0: the calling thread).
    fn get(tid: i32) -> std::io::Result<CpuSet> {
        let mut set = CpuSet([0; 16]);
        // SAFETY: `set` is a writable `cpu_set_t` of the size passed.
        let rc = unsafe { sched_getaffinity(tid, std::mem::size_of::<CpuSet>(), &mut set) };
        if rc == 0 {
            Ok(set)
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Sets the mask of thread `tid` (0: the calling thread).
    fn set(tid: i32, set: &CpuSet) -> std::io::Result<()> {
        // SAFETY: `set` is a readable `cpu_set_t` of the size passed.
        let rc = unsafe { sched_setaffinity(tid, std::mem::size_of::<CpuSet>(), set) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// The ids of this process's threads, or why they cannot be listed.
    fn threads() -> std::result::Result<BTreeSet<i32>, String> {
        let dir = std::fs::read_dir("/proc/self/task")
            .map_err(|e| format!("cannot list /proc/self/task: {e}"))?;
        Ok(dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect())
    }

    /// Runs `create` with the calling thread's CPU mask narrowed to `n` of its CPUs,
    /// then restores the caller's mask and gives the threads started meanwhile that
    /// inherited the narrowed mask the caller's original one. Returns what `create`
    /// made with the error of a mask that could not be restored, if any: the
    /// caller takes ownership of what was made before it reports that error.
    pub(super) fn restricted<T>(
        n: usize,
        create: impl FnOnce() -> Result<T>,
    ) -> Result<(T, Option<Error>)> {
        // One narrowed create at a time, so that the threads one create starts are
        // not taken for another's (a poisoned lock guards nothing that broke).
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let original =
            get(0).map_err(|e| bad(format!("cannot read this thread's CPU mask: {e}")))?;
        let allowed = original.count();
        if n == 0 || n > allowed {
            return Err(bad(format!(
                "{n} worker threads asked for; give 1 to {allowed} (the CPUs this thread may run on)"
            )));
        }
        let narrow = original.first(n);
        let before = threads().map_err(bad)?;
        set(0, &narrow).map_err(|e| bad(format!("cannot narrow this thread's CPU mask: {e}")))?;
        let made = create();
        let restored = set(0, &original);
        let mut failed = restored
            .err()
            .map(|e| format!("cannot restore this thread's CPU mask: {e}"));
        // Threads started during the create inherited the narrowed mask from this
        // one; a thread another part of the program started meanwhile keeps its
        // own mask unless it happens to equal the narrowed one.
        let after = threads().unwrap_or_else(|reason| {
            failed.get_or_insert(reason);
            BTreeSet::new()
        });
        for tid in after.difference(&before) {
            match get(*tid) {
                Ok(m) if m == narrow => {
                    if let Err(e) = set(*tid, &original) {
                        // A thread that exited meanwhile needs nothing.
                        if e.raw_os_error() != Some(3) {
                            failed.get_or_insert(format!(
                                "cannot restore the CPU mask of the plugin's thread {tid}: {e}"
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok((made?, failed.map(bad)))
    }
}

#[cfg(not(target_os = "linux"))]
mod affinity {
    use crate::error::{Error, Result};

    pub(super) fn restricted<T>(
        _n: usize,
        _create: impl FnOnce() -> Result<T>,
    ) -> Result<(T, Option<Error>)> {
        Err(Error::InvalidOption {
            option: "worker_threads".into(),
            reason: "sizing the plugin's worker pool is only implemented on Linux".into(),
        })
    }
}
