//! Client create options and compile options.

use prost::Message;

use super::WaitPolicy;
use crate::proto;

/// Options for [`Client::new`](super::Client::new): the plugin's named create options,
/// and how the client's threads wait for asynchronous work ([`WaitPolicy`]).
///
/// ```
/// use xlaclient_pjrt::WaitPolicy;
/// let opts = xlaclient_pjrt::ClientOptions::new()
///     .cpu_device_count(1)
///     .asynchronous(false)
///     .wait_policy(WaitPolicy::Park);
/// assert_eq!(opts.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientOptions {
    pub(crate) values: Vec<(String, super::NamedValue)>,
    pub(crate) wait: WaitPolicy,
    pub(crate) cache: crate::cache::CompileCache,
    pub(crate) cache_limit: Option<u64>,
    pub(crate) distributed: Option<crate::distributed::Distributed>,
    pub(crate) worker_threads: Option<usize>,
    pub(crate) keep_host_heap: bool,
}

impl ClientOptions {
    /// No options: the plugin's defaults, except that the client runs work on the
    /// calling thread unless [`asynchronous`](Self::asynchronous) says otherwise.
    pub fn new() -> Self {
        Self::default()
    }

    /// How waits for this client's events (transfers, executions) poll and park;
    /// [`WaitPolicy::Auto`] by default.
    pub fn wait_policy(mut self, policy: WaitPolicy) -> Self {
        self.wait = policy;
        self
    }

    /// Which persistent compilation cache the client uses: by default
    /// `XLACLIENT_COMPILE_CACHE` or the user cache directory (see
    /// [`cache`](crate::cache)); `CompileCache::Off` compiles every program;
    /// `CompileCache::Dir(path)` keeps the client's programs there.
    ///
    /// ```
    /// use xlaclient_pjrt::{ClientOptions, cache::CompileCache};
    /// let no_cache = ClientOptions::new().compile_cache(CompileCache::Off);
    /// let here = ClientOptions::new().compile_cache(CompileCache::Dir("/tmp/exes".into()));
    /// # let _ = (no_cache, here);
    /// ```
    pub fn compile_cache(mut self, cache: crate::cache::CompileCache) -> Self {
        self.cache = cache;
        self
    }

    /// The size limit of the compilation cache's directory in bytes
    /// ([`cache::DEFAULT_LIMIT`](crate::cache::DEFAULT_LIMIT) by default): past it,
    /// the least recently used entries are removed.
    pub fn compile_cache_limit(mut self, bytes: u64) -> Self {
        self.cache_limit = Some(bytes);
        self
    }

    /// Makes the client node `node_id` of a job of several processes, sharing a
    /// key-value store with the others (see [`distributed`](crate::distributed)).
    pub fn distributed(mut self, d: crate::distributed::Distributed) -> Self {
        self.distributed = Some(d);
        self
    }

    /// CPU plugin, Linux: the number of worker threads of the plugin's intra-op pool
    /// (the `XLAEigen` threads that run a program's kernels), by default one per
    /// CPU the creating thread may run on (or `NPROC`, when that environment
    /// variable is set).
    ///
    /// The plugin takes no create option for it: it sizes the pool from the
    /// creating thread's CPU affinity mask. So [`Client::new`](super::Client::new)
    /// narrows the calling thread's mask to `n` of its CPUs for the duration of the
    /// create, then restores it and gives the threads the create started the
    /// original mask back: the pool has `n` workers (at least one per device:
    /// `max(n, cpu_device_count)`), none of them pinned. Other
    /// threads of the process are not touched, and the environment is not written.
    ///
    /// One worker suits programs of many small kernels on a small machine (an RL
    /// step, an optimizer update): the kernels run one after another on one thread
    /// instead of being handed between threads (PPO on CartPole: about 30% fewer
    /// CPU seconds on 2 cores, see the guide's Performance chapter). Programs of
    /// large kernels (big products, convolutions) lose their intra-op parallelism
    /// with it.
    ///
    /// `n` must be between 1 and the number of CPUs the calling thread may run on;
    /// anything else, or an OS other than Linux, is [`Error::InvalidOption`] when
    /// the client is created. With `NPROC` set, the plugin follows `NPROC` instead;
    /// a plugin that sizes its pool some other way ignores the setting (the CPU
    /// plugins 0.115 and 0.0.1 follow it, `tests/worker_threads.rs`).
    ///
    /// ```
    /// let opts = xlaclient_pjrt::ClientOptions::new().cpu_device_count(1).worker_threads(1);
    /// assert_eq!(opts.worker_threads_count(), Some(1));
    /// ```
    ///
    /// [`Error::InvalidOption`]: crate::Error::InvalidOption
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.worker_threads = Some(n);
        self
    }

    /// Linux with glibc: keep freed host memory in the process's heap instead of
    /// returning it to the OS (off by default). **This changes `malloc` for the
    /// whole process**, from the moment the client is created, for every thread.
    ///
    /// Why: the CPU plugin allocates a program's temporary buffers with `malloc`,
    /// as one block, on every call. glibc serves a block over 32 MiB with a fresh
    /// `mmap` and unmaps it when freed, so each call page-faults all of it in
    /// again. A thread other than the main one allocates from its own arena,
    /// whose heaps (64 MiB at most) are also unmapped once empty. With this
    /// option, [`Client::new`](super::Client::new) calls `mallopt` three times:
    /// `M_MMAP_THRESHOLD` 1 GiB (blocks up to that come from the heap),
    /// `M_TRIM_THRESHOLD` at its maximum (the main heap is not shrunk) and
    /// `M_TOP_PAD` 64 MiB (which also keeps the other arenas' heaps mapped).
    /// Blocks over 64 MiB allocated by a thread other than the main one are still
    /// `mmap`ed: a heap of such an arena cannot hold them.
    ///
    /// Measured (2026-11-27, a 2-core VM, plugin 0.115): a program with 32.3 MiB
    /// of temporaries took 8,350–8,850 page faults a call without it, on the
    /// main thread and on another; with it, 75–331 on the main thread and
    /// 128–131 on another. That program was the `scan_grad` bench's gradient with
    /// the weight's product after the loop; it ran 69–92 ms a call without the
    /// faults, against 79–116 ms with them. The cost: the process's resident
    /// memory does not shrink after a peak.
    ///
    /// Anywhere but Linux with glibc, asking for it is
    /// [`Error::InvalidOption`](crate::Error::InvalidOption) when the client is
    /// created.
    ///
    /// ```
    /// let opts = xlaclient_pjrt::ClientOptions::new().keep_host_heap(true);
    /// assert!(opts.keeps_host_heap());
    /// ```
    pub fn keep_host_heap(mut self, on: bool) -> Self {
        self.keep_host_heap = on;
        self
    }

    /// Whether [`keep_host_heap`](Self::keep_host_heap) is on.
    pub fn keeps_host_heap(&self) -> bool {
        self.keep_host_heap
    }

    /// The worker pool size set by [`worker_threads`](Self::worker_threads), if any.
    pub fn worker_threads_count(&self) -> Option<usize> {
        self.worker_threads
    }

    /// Number of named create options set.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no option is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Sets any named option (replacing an earlier value of the same name).
    pub fn set(mut self, name: &str, value: super::NamedValue) -> Self {
        self.values.retain(|(n, _)| n != name);
        self.values.push((name.to_string(), value));
        self
    }

    /// Checks the values of the options this crate knows (their type and range):
    /// plugins abort the process on some bad values instead of returning an error.
    /// Options of other names go to the plugin unchecked (it rejects names it does
    /// not know).
    pub(crate) fn validate(&self) -> crate::Result<()> {
        use super::NamedValue as V;
        for (name, value) in &self.values {
            let bad = |reason: String| crate::Error::InvalidOption {
                option: name.clone(),
                reason,
            };
            if name.is_empty() {
                return Err(bad("an option needs a name".into()));
            }
            let ty = match value {
                V::String(_) => "a string",
                V::Int64(_) => "an integer",
                V::Int64List(_) => "a list of integers",
                V::Float(_) => "a float",
                V::Bool(_) => "a bool",
            };
            match (name.as_str(), value) {
                ("cpu_device_count", V::Int64(n)) if !(1..=MAX_CPU_DEVICES).contains(n) => {
                    return Err(bad(format!("{n} devices; give 1 to {MAX_CPU_DEVICES}")));
                }
                ("max_inflight_computations", V::Int64(n)) if *n < 1 => {
                    return Err(bad(format!("{n}; give at least 1")));
                }
                ("cpu_device_count" | "max_inflight_computations", V::Int64(_)) => {}
                ("asynchronous", V::Bool(_)) => {}
                ("cpu_device_count" | "max_inflight_computations", _) => {
                    return Err(bad(format!("{ty} was given; it takes an integer")));
                }
                ("asynchronous", _) => {
                    return Err(bad(format!("{ty} was given; it takes a bool")));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// CPU plugin: number of CPU devices to create (the plugin's default is 4;
    /// 1 to 1024 are accepted, anything else is [`Error::InvalidOption`] when the
    /// client is created).
    ///
    /// [`Error::InvalidOption`]: crate::Error::InvalidOption
    pub fn cpu_device_count(self, n: i64) -> Self {
        self.set("cpu_device_count", super::NamedValue::Int64(n))
    }

    /// CPU plugin: run work asynchronously on the plugin's worker threads (`true`)
    /// or on the calling thread (`false`; honoured by recent plugins, such as the
    /// 0.115 CPU plugin; older ones, such as the 0.81 one, ignore it).
    ///
    /// Unless this is set, [`Client::new`](super::Client::new) asks for `false`
    /// (and falls back to the plugin's own default, `true` for the CPU plugin, when
    /// a plugin refuses the option): on a small machine the hand-off to a worker
    /// thread and back costs more than a small program takes, more still after the
    /// thread has slept between calls, and with several threads calling at once
    /// the calling threads do the work themselves instead of queueing it
    /// (`benches/call_paths.rs`, figures in the guide's Performance chapter). Ask
    /// for `true` to overlap host work with device work through
    /// [`LoadedExecutable::execute_async`](super::LoadedExecutable::execute_async):
    /// on a synchronous client it returns only once the work is done.
    pub fn asynchronous(self, on: bool) -> Self {
        self.set("asynchronous", super::NamedValue::Bool(on))
    }
}

/// The most CPU devices a client may be asked for: each is a thread pool and a
/// set of allocators in the plugin; more than this is certainly a mistake.
pub const MAX_CPU_DEVICES: i64 = 1024;

/// XLA's default `DebugOptions`, serialized: every field XLA sets to a non-zero
/// default, recorded from jaxlib 0.10.2 by `scripts/record_debug_options.py`.
///
/// A `DebugOptions` message in the compile options replaces XLA's defaults as a
/// whole (a message with one field set leaves the others at zero, and then every
/// CPU compile fails), so [`CompileOptions::to_bytes`] sends this set first and the
/// crate's and the user's settings after it; protobuf merges repeated occurrences of
/// a message, and the last value of a scalar field wins. A plugin built from an older
/// XLA ignores the fields it does not know.
pub const XLA_DEBUG_DEFAULTS: &[u8] = include_bytes!("xla_debug_defaults.bin");

/// XLA compile options (`CompileOptionsProto`), exposed in full.
///
/// The default is one replica and one partition, which every plugin accepts (an empty
/// `CompileOptionsProto` aborts some plugins), XLA's default debug options (see
/// [`XLA_DEBUG_DEFAULTS`]) and NaN-propagating `maximum`/`minimum`, as JAX compiles
/// them (see [`CompileOptions::fast_min_max`]). Anything else can be set through
/// [`CompileOptions::proto_mut`]; fields set there win over the defaults.
///
/// ```
/// let opts = xlaclient_pjrt::CompileOptions::new().num_replicas(2);
/// assert_eq!(opts.proto().executable_build_options.as_ref().unwrap().num_replicas, 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CompileOptions {
    proto: proto::CompileOptionsProto,
    xla_debug_defaults: bool,
    /// Set by the program (`None`: the crate's default, off, under `XLA_FLAGS`).
    fast_min_max: Option<bool>,
    dump_to: Option<String>,
    /// Set by the program: `xla_backend_optimization_level` (`None`: XLA's 3).
    optimization_level: Option<i32>,
    /// Set by the program: the CPU backend's `xla_cpu_small_while_loop_byte_threshold`.
    small_while_loop_bytes: Option<u64>,
    /// Set by the program: the CPU backend's library fusions (`None`: XLA's, or
    /// `XLA_FLAGS`'s).
    library_fusions: Option<Vec<LibraryFusion>>,
    /// `XLA_FLAGS` as read when the options were made (or what is wrong with it).
    xla_flags: Result<proto::DebugOptions, String>,
    /// The form the module is handed to the plugin in.
    format: ProgramFormat,
}

/// What XLA's CPU backend hands to its matrix library (YNNPACK) as one call
/// ("library fusions", `DebugOptions.LibraryFusionType`, XLA's
/// `xla_cpu_experimental_ynn_fusion_type`); see
/// [`CompileOptions::library_fusions`]. XLA's default (jaxlib 0.10.2's too) is
/// [`IndividualDot`](LibraryFusion::IndividualDot),
/// [`IndividualConvolution`](LibraryFusion::IndividualConvolution) and
/// [`Reduce`](LibraryFusion::Reduce).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LibraryFusion {
    /// Matrix products together with the element-wise work around them (an
    /// accumulation `acc + x·y`, a bias) in one library call.
    Dot,
    /// Element-wise operations.
    Eltwise,
    /// Reductions.
    Reduce,
    /// Each matrix product alone.
    IndividualDot,
    /// Each convolution alone.
    IndividualConvolution,
}

impl LibraryFusion {
    /// The `LibraryFusionType` number.
    pub fn number(self) -> i32 {
        match self {
            LibraryFusion::Dot => 1,
            LibraryFusion::Eltwise => 2,
            LibraryFusion::Reduce => 3,
            LibraryFusion::IndividualDot => 4,
            LibraryFusion::IndividualConvolution => 5,
        }
    }

    /// The kind named as XLA's flag names it (`dot`, `eltwise`, `reduce`,
    /// `individual_dot`, `individual_convolution`; any case).
    pub fn from_name(name: &str) -> Option<LibraryFusion> {
        Some(match name.to_ascii_lowercase().as_str() {
            "dot" => LibraryFusion::Dot,
            "eltwise" => LibraryFusion::Eltwise,
            "reduce" => LibraryFusion::Reduce,
            "individual_dot" => LibraryFusion::IndividualDot,
            "individual_convolution" => LibraryFusion::IndividualConvolution,
            _ => return None,
        })
    }
}

/// `debug` (a serialized `DebugOptions`) without its library fusion types
/// (field 422), so that a list set later replaces them instead of adding to
/// them (protobuf appends repeated fields when messages merge). Bytes that do
/// not parse are returned as they are.
fn without_library_fusions(debug: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    use prost::encoding::{WireType, decode_key, decode_varint};
    let mut rest = debug;
    let mut out = Vec::with_capacity(debug.len());
    while !rest.is_empty() {
        let start = rest;
        let Ok((field, wire)) = decode_key(&mut rest) else {
            return debug.into();
        };
        let skipped = match wire {
            WireType::Varint => decode_varint(&mut rest).is_ok(),
            WireType::SixtyFourBit if rest.len() >= 8 => {
                rest = &rest[8..];
                true
            }
            WireType::ThirtyTwoBit if rest.len() >= 4 => {
                rest = &rest[4..];
                true
            }
            WireType::LengthDelimited => match decode_varint(&mut rest) {
                Ok(n) if n <= rest.len() as u64 => {
                    rest = &rest[n as usize..];
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if !skipped {
            return debug.into();
        }
        if field != 422 {
            out.extend_from_slice(&start[..start.len() - rest.len()]);
        }
    }
    out.into()
}

/// The form in which `Client::compile_with` hands a module to the plugin (the
/// `PJRT_Program` format).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProgramFormat {
    /// A serialized `HloModuleProto` (PJRT's `hlo`), the default.
    #[default]
    Hlo,
    /// StableHLO text (PJRT's `mlir`), printed by the module source
    /// ([`HloModuleSource::stablehlo_text`](crate::HloModuleSource::stablehlo_text);
    /// the core crate's `Computation::to_stablehlo`).
    StableHlo,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            proto: proto::CompileOptionsProto {
                executable_build_options: Some(proto::ExecutableBuildOptionsProto {
                    num_replicas: 1,
                    num_partitions: 1,
                    ..Default::default()
                }),
                ..Default::default()
            },
            xla_debug_defaults: true,
            fast_min_max: None,
            dump_to: std::env::var("XLACLIENT_DUMP_TO")
                .ok()
                .filter(|d| !d.is_empty()),
            optimization_level: None,
            small_while_loop_bytes: None,
            library_fusions: None,
            xla_flags: crate::xla_flags::from_env(),
            format: ProgramFormat::Hlo,
        }
    }
}

impl CompileOptions {
    /// One replica, one partition.
    pub fn new() -> Self {
        Self::default()
    }

    fn build_options(&mut self) -> &mut proto::ExecutableBuildOptionsProto {
        self.proto
            .executable_build_options
            .get_or_insert_with(Default::default)
    }

    /// The form the module is handed to the plugin in: an `HloModuleProto` (the
    /// default) or StableHLO text printed from it.
    ///
    /// ```
    /// use xlaclient_pjrt::{CompileOptions, ProgramFormat};
    /// let opts = CompileOptions::new().format(ProgramFormat::StableHlo);
    /// assert_eq!(opts.program_format(), ProgramFormat::StableHlo);
    /// ```
    pub fn format(mut self, format: ProgramFormat) -> Self {
        self.format = format;
        self
    }

    /// The form the module is handed to the plugin in (see [`format`](Self::format)).
    pub fn program_format(&self) -> ProgramFormat {
        self.format
    }

    /// Number of replicas (data-parallel copies of the program).
    pub fn num_replicas(mut self, n: i64) -> Self {
        self.build_options().num_replicas = n;
        self
    }

    /// The replica and partition counts (1 where unset).
    pub(crate) fn counts(&self) -> (i64, i64) {
        let b = self.proto.executable_build_options.as_ref();
        let n = |v: Option<i64>| v.filter(|v| *v >= 1).unwrap_or(1);
        (n(b.map(|b| b.num_replicas)), n(b.map(|b| b.num_partitions)))
    }

    /// Number of partitions (model-parallel shards of the program).
    pub fn num_partitions(mut self, n: i64) -> Self {
        self.build_options().num_partitions = n;
        self
    }

    /// Whether XLA partitions the program over its `num_partitions` devices
    /// (SPMD): one program whose instructions carry shardings is compiled into the
    /// per-device program each partition runs, with the collectives it needs
    /// inserted. The executable's parameters are then the per-device shards'
    /// shapes, read back from the compiled program.
    pub fn use_spmd_partitioning(mut self, on: bool) -> Self {
        self.build_options().use_spmd_partitioning = on;
        self
    }

    /// Whether the program is partitioned by XLA's SPMD partitioner over more than
    /// one partition (its parameters are then per-device shards).
    pub(crate) fn spmd_partitioned(&self) -> bool {
        let b = self.proto.executable_build_options.as_ref();
        b.is_some_and(|b| b.use_spmd_partitioning) && self.counts().1 > 1
    }

    /// Explicit device assignment: `devices[replica][partition]` = device id.
    pub fn device_assignment(mut self, devices: &[Vec<i64>]) -> Self {
        let replicas = devices.len() as i32;
        let partitions = devices.first().map_or(0, |r| r.len()) as i32;
        let computation_devices = (0..partitions as usize)
            .map(|p| proto::device_assignment_proto::ComputationDevice {
                replica_device_ids: devices
                    .iter()
                    .map(|r| r.get(p).copied().unwrap_or(-1))
                    .collect(),
            })
            .collect();
        self.build_options().device_assignment = Some(proto::DeviceAssignmentProto {
            replica_count: replicas,
            computation_count: partitions,
            computation_devices,
        });
        self
    }

    /// Whether `maximum` and `minimum` (and so `relu`, `reduce_max`, pooling) may
    /// skip NaN and signed-zero handling. Off by default, as in JAX: `max(0, NaN)`
    /// is NaN, a NaN anywhere in a `reduce_max` gives NaN. On, XLA's CPU and GPU
    /// backends use the plain compare-and-select form, which is a little faster and
    /// returns the second operand when a NaN is involved. This setting travels as
    /// `xla_cpu_enable_fast_min_max` and `xla_gpu_enable_fast_min_max` and needs
    /// [`CompileOptions::xla_debug_defaults`].
    pub fn fast_min_max(mut self, on: bool) -> Self {
        self.fast_min_max = Some(on);
        self
    }

    /// XLA's backend optimization level (`xla_backend_optimization_level`): 3,
    /// XLA's default, runs LLVM's full optimization pipeline over every kernel;
    /// lower levels run less of it, which compiles faster and makes slower
    /// kernels. The program is the same, its results the same to rounding but not
    /// always to the bit. Measured on the CPU with plugin 0.115: level 0 skips
    /// the contraction of multiplies and adds into FMAs and the pass that puts
    /// XLA's own `exp`, `log` and `tanh` in place of libm's (a `uniform` in
    /// `[-0.05, 0.05)` and 139 of 4,096 normal draws differ from level 3 in the
    /// last bit, a 64×48 Householder QR by up to 1e-5 of its largest element);
    /// level 1 gave level 3's bits for those, and for PPO's init program all but
    /// 37 of the 256 elements of one 64×4 QR (by at most 4.5e-8). Needs
    /// [`CompileOptions::xla_debug_defaults`].
    ///
    /// ```
    /// let opts = xlaclient_pjrt::CompileOptions::new().optimization_level(0);
    /// assert_eq!(opts.optimization_level_set(), Some(0));
    /// ```
    pub fn optimization_level(mut self, level: u8) -> Self {
        self.optimization_level = Some(i32::from(level));
        self
    }

    /// The optimization level set by [`CompileOptions::optimization_level`] (`None`:
    /// XLA's default, or `XLA_FLAGS`'s).
    pub fn optimization_level_set(&self) -> Option<i32> {
        self.optimization_level
    }

    /// On the CPU, every `while` loop whose state (its carried arrays) takes at
    /// most `max_bytes` compiles into one kernel (the backend's
    /// `xla_cpu_small_while_loop_byte_threshold`, 1 kB by default). Above it, a
    /// loop's body is a kernel per fusion, each compiled on its own and run by
    /// the executor step by step, which is what lets the body's products use the
    /// plugin's matrix library. Fewer kernels compile faster: PPO's init program
    /// (its QR steps and hashes, loops over at most 48 KiB) compiles in 1.3 s
    /// instead of 1.7 s on a 2-core machine, to the same bits. Other
    /// backends ignore the setting. Needs [`CompileOptions::xla_debug_defaults`].
    pub fn single_kernel_loops(mut self, max_bytes: u64) -> Self {
        self.small_while_loop_bytes = Some(max_bytes);
        self
    }

    /// What the CPU backend hands to its matrix library (YNNPACK), replacing
    /// XLA's list (and `XLA_FLAGS`'s `--xla_cpu_experimental_ynn_fusion_type`); an
    /// empty list hands it nothing. [`LibraryFusion::Dot`] in place of
    /// [`LibraryFusion::IndividualDot`] runs a product and the element-wise work
    /// around it as one call: a loop's gradient adding each step's weight product
    /// into its accumulator does it in the library's product. Other backends
    /// ignore the setting. Needs [`CompileOptions::xla_debug_defaults`].
    ///
    /// ```
    /// use xlaclient_pjrt::{CompileOptions, LibraryFusion};
    /// let opts = CompileOptions::new().library_fusions(&[LibraryFusion::Dot, LibraryFusion::Reduce]);
    /// assert_eq!(opts.library_fusions_set(), Some(&[LibraryFusion::Dot, LibraryFusion::Reduce][..]));
    /// ```
    pub fn library_fusions(mut self, kinds: &[LibraryFusion]) -> Self {
        self.library_fusions = Some(kinds.to_vec());
        self
    }

    /// The list set by [`CompileOptions::library_fusions`] (`None`: XLA's, or
    /// `XLA_FLAGS`'s).
    pub fn library_fusions_set(&self) -> Option<&[LibraryFusion]> {
        self.library_fusions.as_deref()
    }

    /// Settings for a program that runs once or a few times, such as an
    /// initializer, where compile time matters more than the kernels' speed:
    /// [`optimization_level(1)`](CompileOptions::optimization_level) and
    /// [`single_kernel_loops(1 << 20)`](CompileOptions::single_kernel_loops). What
    /// the program computes is the same, to rounding (see
    /// [`optimization_level`](CompileOptions::optimization_level)); how fast it
    /// runs is not. PPO's init program compiles in 1.15 s instead of 1.75 s on a
    /// 2-core machine (1.3 s with the loops alone), with the last bits of 37 of
    /// the 256 elements of one of its six QRs changed; level 0 saved 0.5 s more
    /// there (measured before the init's draws were batched), but also changes
    /// the samplers' last bits, which level 1 keeps equal to JAX's.
    pub fn quick_compile(mut self) -> Self {
        self.optimization_level = Some(1);
        self.small_while_loop_bytes = Some(1 << 20);
        self
    }

    /// Asks XLA to write the module before and after its optimisation passes, as
    /// HLO text, into the directory `dir` (XLA's `--xla_dump_to` with
    /// `--xla_dump_hlo_as_text`): what the compiler made of a program, for
    /// performance work. The default comes from the environment variable
    /// `XLACLIENT_DUMP_TO` (the plugin does not read `XLA_FLAGS` when it is given
    /// debug options, as it is here). Needs [`CompileOptions::xla_debug_defaults`].
    pub fn dump_to(mut self, dir: impl Into<String>) -> Self {
        self.dump_to = Some(dir.into());
        self
    }

    /// Whether XLA is asked to dump what it compiles (a compile that must happen:
    /// the compilation cache is bypassed).
    pub(crate) fn dumps(&self) -> bool {
        self.dump_to.is_some()
            || self
                .xla_flags
                .as_ref()
                .is_ok_and(|f| f.xla_dump_to.is_some())
    }

    /// Replaces the `XLA_FLAGS` read from the environment when the options were
    /// made with `flags` (the same syntax; see [`xla_flags`](crate::xla_flags)).
    /// `""` ignores the environment's.
    pub fn xla_flags(mut self, flags: &str) -> Self {
        self.xla_flags = crate::xla_flags::parse(flags);
        self
    }

    /// Whether [`CompileOptions::to_bytes`] sends XLA's default debug options
    /// ([`XLA_DEBUG_DEFAULTS`]) before the proto (on by default). Off, the proto is
    /// sent as it is: the plugin then uses its own defaults only if the proto holds
    /// no `debug_options`, and [`CompileOptions::fast_min_max`] has no effect.
    pub fn xla_debug_defaults(mut self, on: bool) -> Self {
        self.xla_debug_defaults = on;
        self
    }

    /// The options as a proto.
    pub fn proto(&self) -> &proto::CompileOptionsProto {
        &self.proto
    }

    /// The options as a proto, for fields without a helper.
    pub fn proto_mut(&mut self) -> &mut proto::CompileOptionsProto {
        &mut self.proto
    }

    /// Checks the options before they reach the plugin, which aborts the process
    /// (or throws a C++ exception through the C API) on some bad values: the build
    /// options must be present, replica and partition counts at least 1 and within
    /// the client's `num_devices`, a device assignment consistent with them and
    /// naming devices the client has (`device_ids`), and the other counts not
    /// negative.
    pub(crate) fn validate(&self, device_ids: &[i64]) -> crate::Result<()> {
        let bad = |option: &str, reason: String| crate::Error::InvalidOption {
            option: option.to_string(),
            reason,
        };
        if let Err(e) = &self.xla_flags {
            return Err(bad("XLA_FLAGS", e.clone()));
        }
        let b = self
            .proto
            .executable_build_options
            .as_ref()
            .ok_or_else(|| {
                bad(
                    "executable_build_options",
                    "missing (some plugins abort without them); start from CompileOptions::new()"
                        .into(),
                )
            })?;
        let n = device_ids.len() as i64;
        for (option, v) in [
            ("num_replicas", b.num_replicas),
            ("num_partitions", b.num_partitions),
        ] {
            if v < 1 {
                return Err(bad(option, format!("{v}; give at least 1")));
            }
            if v > n {
                return Err(bad(option, format!("{v}; the client has {n} device(s)")));
            }
        }
        if b.num_replicas * b.num_partitions > n {
            return Err(bad(
                "num_replicas",
                format!(
                    "{} replicas × {} partitions need more devices than the client's {n}",
                    b.num_replicas, b.num_partitions
                ),
            ));
        }
        if b.device_ordinal < -1 || b.device_ordinal >= n {
            return Err(bad(
                "device_ordinal",
                format!("{}; give -1 (any) or 0 to {}", b.device_ordinal, n - 1),
            ));
        }
        for (option, v) in [
            ("device_memory_size", b.device_memory_size),
            ("process_index", b.process_index),
            ("process_count", b.process_count),
            ("slice_size", b.slice_size),
            ("profile_version", self.proto.profile_version),
        ] {
            if v < 0 {
                return Err(bad(option, format!("{v} is negative")));
            }
        }
        if let Some(da) = &b.device_assignment {
            let what = "device_assignment";
            if i64::from(da.replica_count) != b.num_replicas
                || i64::from(da.computation_count) != b.num_partitions
            {
                return Err(bad(
                    what,
                    format!(
                        "{} replicas × {} partitions, but num_replicas is {} and num_partitions {}",
                        da.replica_count, da.computation_count, b.num_replicas, b.num_partitions
                    ),
                ));
            }
            if da.computation_devices.len() != da.computation_count as usize {
                return Err(bad(
                    what,
                    format!(
                        "{} partitions listed, computation_count is {}",
                        da.computation_devices.len(),
                        da.computation_count
                    ),
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for (p, c) in da.computation_devices.iter().enumerate() {
                if c.replica_device_ids.len() != da.replica_count as usize {
                    return Err(bad(
                        what,
                        format!(
                            "partition {p} lists {} device(s), replica_count is {}",
                            c.replica_device_ids.len(),
                            da.replica_count
                        ),
                    ));
                }
                for id in &c.replica_device_ids {
                    if !device_ids.contains(id) {
                        return Err(bad(
                            what,
                            format!("device id {id} is not a device of the client {device_ids:?}"),
                        ));
                    }
                    if !seen.insert(*id) {
                        return Err(bad(what, format!("device id {id} is used twice")));
                    }
                }
            }
        }
        Ok(())
    }

    /// Decodes serialized `CompileOptionsProto` bytes.
    pub fn from_bytes(bytes: &[u8]) -> crate::Result<Self> {
        let proto =
            proto::CompileOptionsProto::decode(bytes).map_err(|e| crate::Error::Decode {
                what: "compile options (CompileOptionsProto)",
                reason: e.to_string(),
            })?;
        Ok(CompileOptions {
            proto,
            ..Default::default()
        })
    }

    /// Serialized bytes, as `PJRT_Client_Compile` takes them: XLA's default debug
    /// options and the min/max setting (unless [`CompileOptions::xla_debug_defaults`]
    /// is off), then the proto, whose fields override both.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(XLA_DEBUG_DEFAULTS.len() + 64);
        if self.xla_debug_defaults {
            // Weakest first (see `xla_flags`): the crate's defaults, XLA_FLAGS, then
            // what the program set.
            let defaults = proto::DebugOptions {
                xla_cpu_enable_fast_min_max: Some(false),
                xla_gpu_enable_fast_min_max: Some(false),
                ..Default::default()
            }
            .encode_to_vec();
            // A list of library fusions replaces XLA's: the program's, else
            // XLA_FLAGS's (repeated fields would otherwise add up).
            let flag_fusions = self
                .xla_flags
                .as_ref()
                .ok()
                .map(|f| f.xla_cpu_experimental_ynn_fusion_type.clone())
                .filter(|v| !v.is_empty());
            let fusions: Option<Vec<i32>> = self
                .library_fusions
                .as_ref()
                .map(|v| v.iter().map(|k| k.number()).collect())
                .or(flag_fusions);
            let xla_defaults = if fusions.is_some() {
                without_library_fusions(XLA_DEBUG_DEFAULTS)
            } else {
                XLA_DEBUG_DEFAULTS.into()
            };
            let flags = self
                .xla_flags
                .as_ref()
                .map(|f| {
                    let mut f = f.clone();
                    f.xla_cpu_experimental_ynn_fusion_type.clear();
                    f.encode_to_vec()
                })
                .unwrap_or_default();
            let settings = proto::DebugOptions {
                xla_cpu_experimental_ynn_fusion_type: fusions.unwrap_or_default(),
                xla_cpu_enable_fast_min_max: self.fast_min_max,
                xla_gpu_enable_fast_min_max: self.fast_min_max,
                xla_dump_to: self.dump_to.clone(),
                xla_dump_hlo_as_text: self.dump_to.as_ref().map(|_| true),
                xla_backend_optimization_level: self.optimization_level,
                xla_backend_extra_options: self
                    .small_while_loop_bytes
                    .map(|n| {
                        [(
                            "xla_cpu_small_while_loop_byte_threshold".to_string(),
                            n.to_string(),
                        )]
                        .into()
                    })
                    .unwrap_or_default(),
                ..Default::default()
            }
            .encode_to_vec();
            for debug in [&xla_defaults[..], &defaults, &flags, &settings] {
                // CompileOptionsProto.executable_build_options (3) holding
                // ExecutableBuildOptionsProto.debug_options (3) holding `debug`.
                let mut build = Vec::with_capacity(debug.len() + 4);
                prost::encoding::encode_key(
                    3,
                    prost::encoding::WireType::LengthDelimited,
                    &mut build,
                );
                prost::encoding::encode_varint(debug.len() as u64, &mut build);
                build.extend_from_slice(debug);
                prost::encoding::encode_key(
                    3,
                    prost::encoding::WireType::LengthDelimited,
                    &mut out,
                );
                prost::encoding::encode_varint(build.len() as u64, &mut out);
                out.extend_from_slice(&build);
            }
        }
        self.proto.encode(&mut out).expect("a Vec grows as needed");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_debug_defaults_the_options_are_the_minimal_proto() {
        // executable_build_options { num_replicas: 1 num_partitions: 1 }
        assert_eq!(
            CompileOptions::new().xla_debug_defaults(false).to_bytes(),
            vec![0x1a, 0x04, 0x20, 0x01, 0x28, 0x01]
        );
    }

    #[test]
    fn the_debug_defaults_decode_and_merge_under_the_settings() {
        // The recorded set holds XLA's documented defaults.
        let d = proto::DebugOptions::decode(XLA_DEBUG_DEFAULTS).unwrap();
        assert_eq!(d.xla_backend_optimization_level, Some(3));
        assert_eq!(d.xla_cpu_multi_thread_eigen, Some(true));
        // Sent bytes decode to one proto: the defaults, then the min/max setting,
        // then the user's fields, last wins.
        let mut o = CompileOptions::new().fast_min_max(true).num_replicas(1);
        o.proto_mut()
            .executable_build_options
            .as_mut()
            .unwrap()
            .debug_options = Some(proto::DebugOptions {
            xla_backend_optimization_level: Some(1),
            ..Default::default()
        });
        let back = proto::CompileOptionsProto::decode(&o.to_bytes()[..]).unwrap();
        let b = back.executable_build_options.unwrap();
        assert_eq!(b.num_replicas, 1);
        let d = b.debug_options.unwrap();
        assert_eq!(d.xla_backend_optimization_level, Some(1));
        assert_eq!(d.xla_cpu_enable_fast_min_max, Some(true));
        assert_eq!(d.xla_cpu_multi_thread_eigen, Some(true));
        let plain = proto::CompileOptionsProto::decode(&CompileOptions::new().to_bytes()[..])
            .unwrap()
            .executable_build_options
            .unwrap()
            .debug_options
            .unwrap();
        assert_eq!(plain.xla_cpu_enable_fast_min_max, Some(false));
    }

    /// The debug options `o` sends, merged as the plugin reads them.
    fn sent_debug_options(o: &CompileOptions) -> proto::DebugOptions {
        proto::CompileOptionsProto::decode(&o.to_bytes()[..])
            .unwrap()
            .executable_build_options
            .unwrap()
            .debug_options
            .unwrap()
    }

    #[test]
    fn a_library_fusion_list_replaces_xlas_instead_of_adding_to_it() {
        use LibraryFusion::*;
        // XLA's own list, as recorded: individual dots, convolutions, reductions.
        assert_eq!(
            sent_debug_options(&CompileOptions::new().xla_flags(""))
                .xla_cpu_experimental_ynn_fusion_type,
            vec![4, 5, 3]
        );
        let o = CompileOptions::new()
            .xla_flags("")
            .library_fusions(&[Dot, Reduce]);
        assert_eq!(
            sent_debug_options(&o).xla_cpu_experimental_ynn_fusion_type,
            vec![1, 3]
        );
        // An empty list hands the library nothing.
        let o = CompileOptions::new().xla_flags("").library_fusions(&[]);
        assert!(
            sent_debug_options(&o)
                .xla_cpu_experimental_ynn_fusion_type
                .is_empty()
        );
        // XLA_FLAGS's list replaces XLA's too, and the program's replaces both.
        let f =
            CompileOptions::new().xla_flags("--xla_cpu_experimental_ynn_fusion_type=DOT,eltwise");
        assert_eq!(
            sent_debug_options(&f).xla_cpu_experimental_ynn_fusion_type,
            vec![1, 2]
        );
        let f = f.library_fusions(&[IndividualDot]);
        assert_eq!(
            sent_debug_options(&f).xla_cpu_experimental_ynn_fusion_type,
            vec![4]
        );
        // Every other default is untouched by the removal.
        let mut all = proto::DebugOptions::decode(XLA_DEBUG_DEFAULTS).unwrap();
        let kept =
            proto::DebugOptions::decode(&without_library_fusions(XLA_DEBUG_DEFAULTS)[..]).unwrap();
        assert!(!all.xla_cpu_experimental_ynn_fusion_type.is_empty());
        all.xla_cpu_experimental_ynn_fusion_type.clear();
        assert_eq!(all, kept);
        assert!(without_library_fusions(XLA_DEBUG_DEFAULTS).len() < XLA_DEBUG_DEFAULTS.len());
        // Bytes that do not parse are passed on as they are.
        assert_eq!(
            &without_library_fusions(&[0x0a, 0x05, 0x01])[..],
            &[0x0a, 0x05, 0x01]
        );
        assert_eq!(
            LibraryFusion::from_name("Individual_Convolution"),
            Some(IndividualConvolution)
        );
        assert_eq!(LibraryFusion::from_name("dots"), None);
    }

    #[test]
    fn quick_compile_overrides_the_flags_and_keeps_their_other_extra_options() {
        let o = CompileOptions::new()
            .xla_flags(
                "--xla_backend_optimization_level=2 \
                 --xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=64,other=1",
            )
            .quick_compile();
        let d = sent_debug_options(&o);
        assert_eq!(d.xla_backend_optimization_level, Some(1));
        let extra = &d.xla_backend_extra_options;
        assert_eq!(extra["xla_cpu_small_while_loop_byte_threshold"], "1048576");
        assert_eq!(extra["other"], "1");
        // The two settings alone.
        let d = sent_debug_options(&CompileOptions::new().optimization_level(0));
        assert_eq!(d.xla_backend_optimization_level, Some(0));
        assert!(d.xla_backend_extra_options.is_empty());
        let d = sent_debug_options(&CompileOptions::new().single_kernel_loops(4096));
        assert_eq!(d.xla_backend_optimization_level, Some(3));
        assert_eq!(
            d.xla_backend_extra_options["xla_cpu_small_while_loop_byte_threshold"],
            "4096"
        );
        // Without them, the flags' settings stand.
        let o = CompileOptions::new().xla_flags("--xla_backend_optimization_level=2");
        let d = sent_debug_options(&o);
        assert_eq!(d.xla_backend_optimization_level, Some(2));
        assert!(d.xla_backend_extra_options.is_empty());
    }

    #[test]
    fn client_options_replace_by_name() {
        let o = ClientOptions::new().cpu_device_count(2).cpu_device_count(3);
        assert_eq!(o.len(), 1);
        assert_eq!(o.values[0].1, super::super::NamedValue::Int64(3));
    }
}
