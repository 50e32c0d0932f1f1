//! The persistent compilation cache: compiled programs kept on disk between
//! processes, so that a program compiled once loads in milliseconds the next time.
//!
//! - **Where**: `<cache>/executables`, `<cache>` being the plugin cache directory
//!   ([`install::cache_dir`](crate::install::cache_dir): `XLACLIENT_CACHE_DIR`,
//!   else `$XDG_CACHE_HOME/xlaclient`, else `~/.cache/xlaclient`). The environment
//!   variable `XLACLIENT_COMPILE_CACHE` moves it (a directory) or turns it off
//!   (`0`, `off`, `false`, `no`); per client, [`ClientOptions::compile_cache`](crate::ClientOptions::compile_cache)
//!   chooses.
//! - **Key**: SHA-256 of the program's bytes (the serialized `HloModuleProto` the
//!   core lowers deterministically from its IR, or the MLIR text), the serialized
//!   compile options, the entry parameter shapes, the plugin's identity
//!   ([`Client::plugin_identity`](crate::Client::plugin_identity)) and `XLA_FLAGS`.
//! - **Entry**: `<key>.xlaexe`: a magic, the key again, and the executable
//!   serialized with its guard ([`guard`](crate::guard)). A truncated, damaged,
//!   swapped (another key's file under this name) or foreign entry is detected
//!   before any byte reaches the plugin, removed, and the program compiled again
//!   and stored anew; nothing read from a bad entry is used.
//! - **Writes** go to a temporary file in the same directory, renamed into place:
//!   readers see a whole entry or none, and processes sharing the directory are
//!   safe (two that compile the same program at once both write it; the last
//!   rename wins, with identical contents).
//! - **Size**: entries are kept under a limit ([`DEFAULT_LIMIT`] by default), the
//!   least recently used (by modification time, which a hit refreshes) removed
//!   first.
//!
//! A cache that cannot be read or written never fails a compile: the program is
//! compiled as without a cache, and [`CacheStats`] counts what happened.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// The first bytes of a cache entry.
const ENTRY_MAGIC: [u8; 8] = *b"XLACLKEY";

/// The file name extension of cache entries.
const EXTENSION: &str = "xlaexe";

/// The default size limit of a cache directory: 2 GiB.
pub const DEFAULT_LIMIT: u64 = 2 << 30;

/// The environment variable that moves the cache (a directory) or turns it off
/// (`0`, `off`, `false`, `no`).
pub const ENV: &str = "XLACLIENT_COMPILE_CACHE";

/// Which persistent compilation cache a client uses
/// ([`ClientOptions::compile_cache`](crate::ClientOptions::compile_cache)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CompileCache {
    /// `XLACLIENT_COMPILE_CACHE` if set, else `<cache>/executables` (see the
    /// [module docs](self)).
    #[default]
    Default,
    /// No cache: every compile compiles.
    Off,
    /// This directory (created when needed).
    Dir(PathBuf),
}

impl CompileCache {
    /// The directory this setting names, if any.
    pub(crate) fn resolve(&self) -> Option<PathBuf> {
        match self {
            CompileCache::Off => None,
            CompileCache::Dir(d) => Some(d.clone()),
            CompileCache::Default => from_env(std::env::var_os(ENV), default_dir),
        }
    }
}

/// The cache directory `XLACLIENT_COMPILE_CACHE`'s value names: unset or empty,
/// the default; `0`, `off`, `false` or `no`, none; else that directory.
fn from_env(
    value: Option<std::ffi::OsString>,
    default: impl FnOnce() -> Option<PathBuf>,
) -> Option<PathBuf> {
    match value {
        Some(v) if !v.is_empty() => {
            let s = v.to_string_lossy().to_ascii_lowercase();
            if ["0", "off", "false", "no"].contains(&s.as_str()) {
                None
            } else {
                Some(PathBuf::from(v))
            }
        }
        _ => default(),
    }
}

fn default_dir() -> Option<PathBuf> {
    crate::install::cache_dir()
        .ok()
        .map(|d| d.join("executables"))
}

/// What a client's compilation cache did since the client was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Programs loaded from the cache instead of compiled.
    pub hits: u64,
    /// Programs compiled (no entry, or a bad one).
    pub misses: u64,
    /// Entries found bad (truncated, damaged, swapped, of another plugin, refused
    /// by the plugin) and removed.
    pub rejected: u64,
    /// Entries written.
    pub stored: u64,
    /// Entries that could not be written (the compile went on).
    pub write_errors: u64,
    /// Entries removed to keep the cache under its size limit.
    pub evicted: u64,
}

/// A cache directory and its counters.
#[derive(Debug)]
pub(crate) struct DiskCache {
    dir: PathBuf,
    limit: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    rejected: AtomicU64,
    stored: AtomicU64,
    write_errors: AtomicU64,
    evicted: AtomicU64,
}

/// A cache key: 32 bytes of SHA-256.
pub(crate) type Key = [u8; 32];

impl DiskCache {
    pub(crate) fn new(dir: PathBuf, limit: u64) -> DiskCache {
        DiskCache {
            dir,
            limit,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn stats(&self) -> CacheStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            hits: get(&self.hits),
            misses: get(&self.misses),
            rejected: get(&self.rejected),
            stored: get(&self.stored),
            write_errors: get(&self.write_errors),
            evicted: get(&self.evicted),
        }
    }

    /// The key of a program: everything that decides what the plugin compiles.
    pub(crate) fn key(parts: &[&[u8]]) -> Key {
        let mut h = Sha256::new();
        h.update(b"xlaclient compile cache 1\0");
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
        }
        let flags = std::env::var("XLA_FLAGS").unwrap_or_default();
        h.update((flags.len() as u64).to_le_bytes());
        h.update(flags.as_bytes());
        h.finalize().into()
    }

    /// The path of `key`'s entry.
    pub(crate) fn path(&self, key: &Key) -> PathBuf {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.{EXTENSION}"))
    }

    /// The guarded executable stored under `key`, if there is an entry whose
    /// header names this key; an entry that names another key (or none) is
    /// removed. The guard itself is checked by the caller's deserialization.
    pub(crate) fn load(&self, key: &Key) -> Option<Vec<u8>> {
        let path = self.path(key);
        let mut bytes = fs::read(&path).ok()?;
        let head = ENTRY_MAGIC.len() + key.len();
        if bytes.len() < head || bytes[..8] != ENTRY_MAGIC || bytes[8..head] != key[..] {
            self.reject(key);
            return None;
        }
        // A hit is a use: the entry moves to the young end of the eviction order.
        if let Ok(f) = fs::File::options().write(true).open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
        bytes.drain(..head);
        Some(bytes)
    }

    /// Removes `key`'s entry (found bad) and counts it.
    pub(crate) fn reject(&self, key: &Key) {
        let _ = fs::remove_file(self.path(key));
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes `guarded` under `key` atomically, then keeps the directory under its
    /// limit. Failures are counted, never returned.
    pub(crate) fn store(&self, key: &Key, guarded: &[u8]) {
        match self.write(key, guarded) {
            Ok(()) => {
                self.stored.fetch_add(1, Ordering::Relaxed);
                self.evict(key);
            }
            Err(_) => {
                self.write_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn write(&self, key: &Key, guarded: &[u8]) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".partial-")
            .tempfile_in(&self.dir)?;
        tmp.write_all(&ENTRY_MAGIC)?;
        tmp.write_all(key)?;
        tmp.write_all(guarded)?;
        tmp.as_file().sync_data()?;
        tmp.persist(self.path(key)).map_err(|e| e.error)?;
        Ok(())
    }

    /// Removes the least recently used entries until the directory holds at most
    /// `limit` bytes of entries (never `keep`, the entry just written), and
    /// partial files older than an hour (left by a process that died writing).
    fn evict(&self, keep: &Key) {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return;
        };
        let keep = self.path(keep);
        let now = SystemTime::now();
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        let mut total = 0u64;
        for e in dir.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            let mtime = meta.modified().unwrap_or(now);
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".partial-") {
                let old = now.duration_since(mtime).is_ok_and(|d| d.as_secs() > 3600);
                if old {
                    let _ = fs::remove_file(&path);
                }
                continue;
            }
            if path.extension().and_then(|x| x.to_str()) != Some(EXTENSION) {
                continue;
            }
            total += meta.len();
            if path != keep {
                entries.push((mtime, meta.len(), path));
            }
        }
        if total <= self.limit {
            return;
        }
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.limit {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= len;
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_moves_or_turns_off_the_cache() {
        let d = || Some(PathBuf::from("/default"));
        let v = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(from_env(None, d), d());
        assert_eq!(from_env(v(""), d), d());
        for off in ["0", "off", "OFF", "false", "no"] {
            assert_eq!(from_env(v(off), d), None, "{off}");
        }
        assert_eq!(from_env(v("/x/y"), d), Some(PathBuf::from("/x/y")));
        assert_eq!(CompileCache::Off.resolve(), None);
        assert_eq!(
            CompileCache::Dir("/z".into()).resolve(),
            Some(PathBuf::from("/z"))
        );
    }

    #[test]
    fn keys_separate_their_parts() {
        // Length prefixes: moving a byte from one part to the next changes the key.
        assert_ne!(
            DiskCache::key(&[b"ab", b"c"]),
            DiskCache::key(&[b"a", b"bc"])
        );
        assert_eq!(
            DiskCache::key(&[b"ab", b"c"]),
            DiskCache::key(&[b"ab", b"c"])
        );
    }

    #[test]
    fn eviction_keeps_the_newest_under_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path().to_path_buf(), 2500);
        let keys: Vec<Key> = (0..4u8).map(|i| DiskCache::key(&[&[i]])).collect();
        for (i, k) in keys.iter().enumerate() {
            cache.store(k, &vec![i as u8; 1000]);
            // Distinct modification times, oldest first.
            let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + i as u64);
            let f = fs::File::options().write(true).open(cache.path(k)).unwrap();
            f.set_modified(t).unwrap();
        }
        // Each entry is 1040 bytes: two fit under 2500, the two oldest went.
        assert!(cache.load(&keys[0]).is_none());
        assert!(cache.load(&keys[1]).is_none());
        assert_eq!(cache.load(&keys[3]).unwrap(), vec![3u8; 1000]);
        assert_eq!(cache.load(&keys[2]).unwrap(), vec![2u8; 1000]);
        assert_eq!(cache.stats().evicted, 2);
        assert_eq!(cache.stats().stored, 4);
    }
}
