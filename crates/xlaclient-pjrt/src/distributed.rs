//! Many processes, one program: which node of a multi-process job this client is,
//! and the key-value store through which a plugin's clients in several processes
//! find each other (the callbacks of `PJRT_Client_Create`).
//!
//! A plugin that spans processes (CUDA, TPU) exchanges its topology at client
//! creation through a key-value store the caller provides: each process puts its
//! local devices under keys of its own and gets the others'. This crate wires a
//! [`KeyValueStore`] to those callbacks. `InMemoryStore` serves clients of one
//! process (tests, one host); `RedisStore` (feature `redis`) keeps the keys in a
//! Redis server that the cluster runs. The guide's "Many hosts" section has the
//! design: how N processes × M devices form one global device assignment.
//!
//! ```
//! use std::sync::Arc;
//! use xlaclient_pjrt::{Client, ClientOptions, Plugin};
//! use xlaclient_pjrt::distributed::{Distributed, InMemoryStore};
//!
//! let store = Arc::new(InMemoryStore::new());
//! let options = ClientOptions::new()
//!     .cpu_device_count(2)
//!     .distributed(Distributed::new(0, 1, store.clone())?);
//! let client = Client::new(&Plugin::default_plugin()?, &options)?;
//! assert_eq!(client.process_index()?, 0);
//! # Ok::<(), xlaclient_pjrt::Error>(())
//! ```

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::raw;

/// Why a key-value store could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// No value appeared under the key within the time given.
    #[error("no value under key {key:?} within {timeout:?}")]
    Timeout {
        /// The key.
        key: String,
        /// How long the get waited.
        timeout: Duration,
    },
    /// The store failed (its own message: a lost connection, a refused write).
    #[error("key-value store: {0}")]
    Store(String),
}

/// A key-value store shared by the processes of one job: what a plugin uses to
/// exchange its topology when its clients span processes. Implementations must be
/// safe to call from any thread (the plugin calls from its own), and `get` blocks
/// until the key has a value or the timeout passes.
pub trait KeyValueStore: Send + Sync {
    /// The value under `key`, waiting up to `timeout` for one to be put.
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>, KvError>;

    /// The value under `key` if there is one now.
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError>;

    /// Puts `value` under `key` (replacing an earlier value).
    fn put(&self, key: &str, value: &[u8]) -> Result<(), KvError>;
}

/// A [`KeyValueStore`] in this process's memory: for clients of one process (tests,
/// several plugins' clients on one host). Counts the calls made on it.
#[derive(Default)]
pub struct InMemoryStore {
    map: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
    calls: std::sync::atomic::AtomicU64,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> InMemoryStore {
        InMemoryStore::default()
    }

    /// The keys held now, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self.lock().keys().cloned().collect();
        k.sort();
        k
    }

    /// How many `get`, `try_get` and `put` calls the store has served.
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
        // A panic while the lock was held cannot leave the map half-written (each
        // change is one insert), so a poisoned lock is still usable.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl fmt::Debug for InMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryStore")
            .field("keys", &self.keys())
            .finish()
    }
}

impl KeyValueStore for InMemoryStore {
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>, KvError> {
        self.count();
        let deadline = Instant::now() + timeout;
        let mut map = self.lock();
        loop {
            if let Some(v) = map.get(key) {
                return Ok(v.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(KvError::Timeout {
                    key: key.to_string(),
                    timeout,
                });
            }
            map = self
                .changed
                .wait_timeout(map, left)
                .map(|(m, _)| m)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        self.count();
        Ok(self.lock().get(key).cloned())
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), KvError> {
        self.count();
        self.lock().insert(key.to_string(), value.to_vec());
        self.changed.notify_all();
        Ok(())
    }
}

/// A [`KeyValueStore`] in a Redis server that the cluster runs (feature `redis`):
/// every process of the job connects to the same server and uses keys under one
/// prefix (the job's name), so that jobs sharing a server do not collide.
///
/// Redis because clusters commonly run one already, its Rust client (`redis`) is
/// well kept and has a synchronous connection (the plugin calls from its own
/// threads and blocks, so no async runtime is needed), and the server is a
/// package on every distribution. A blocking `get` polls with a growing pause (1 to
/// 50 ms) until the key appears or the timeout passes: topology exchange happens
/// once per client creation, where polling costs nothing that matters.
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct RedisStore {
    conn: Mutex<redis::Connection>,
    prefix: String,
}

#[cfg(feature = "redis")]
impl RedisStore {
    /// Connects to the server at `url` (`redis://host:port/`), keys under `prefix`.
    pub fn connect(url: &str, prefix: &str) -> Result<RedisStore, KvError> {
        let store = |e: redis::RedisError| KvError::Store(format!("redis at {url}: {e}"));
        let client = redis::Client::open(url).map_err(store)?;
        let conn = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .map_err(store)?;
        Ok(RedisStore {
            conn: Mutex::new(conn),
            prefix: prefix.to_string(),
        })
    }

    fn key(&self, key: &str) -> String {
        format!("{}/{key}", self.prefix)
    }

    fn fetch(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        redis::cmd("GET")
            .arg(self.key(key))
            .query::<Option<Vec<u8>>>(&mut *conn)
            .map_err(|e| KvError::Store(format!("redis GET {key:?}: {e}")))
    }
}

#[cfg(feature = "redis")]
impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "redis")]
impl KeyValueStore for RedisStore {
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>, KvError> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(v) = self.fetch(key)? {
                return Ok(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(KvError::Timeout {
                    key: key.to_string(),
                    timeout,
                });
            }
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        self.fetch(key)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), KvError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        redis::cmd("SET")
            .arg(self.key(key))
            .arg(value)
            .query::<()>(&mut *conn)
            .map_err(|e| KvError::Store(format!("redis SET {key:?}: {e}")))
    }
}

/// This process's place in a multi-process job: its node id among `num_nodes`, and
/// the store the nodes share. Given to a client by
/// [`ClientOptions::distributed`](crate::ClientOptions::distributed).
///
/// How the plugin is told: a CPU plugin takes the node id as its `process_id`
/// create option (its devices' ids then start at `process_id × 2048` in the 0.115
/// plugin); other plugins (CUDA) take `node_id` and `num_nodes`. Every plugin gets
/// the store's get, try-get and put callbacks. A client whose plugin ignored the
/// node id (its process index is not the one asked for) is an error, not a
/// silently wrong topology.
#[derive(Clone)]
pub struct Distributed {
    pub(crate) node_id: u32,
    pub(crate) num_nodes: u32,
    pub(crate) store: Arc<dyn KeyValueStore>,
}

impl Distributed {
    /// Node `node_id` of `num_nodes` (`node_id < num_nodes`), sharing `store`.
    pub fn new(node_id: u32, num_nodes: u32, store: Arc<dyn KeyValueStore>) -> Result<Self> {
        if num_nodes == 0 || node_id >= num_nodes {
            return Err(Error::InvalidOption {
                option: "distributed".into(),
                reason: format!(
                    "node id {node_id} of {num_nodes} nodes: ids run from 0 to the number of nodes - 1"
                ),
            });
        }
        Ok(Distributed {
            node_id,
            num_nodes,
            store,
        })
    }

    /// This process's node id.
    pub fn node_id(&self) -> u32 {
        self.node_id
    }

    /// The number of nodes (processes) of the job.
    pub fn num_nodes(&self) -> u32 {
        self.num_nodes
    }

    /// The shared store.
    pub fn store(&self) -> &Arc<dyn KeyValueStore> {
        &self.store
    }
}

impl fmt::Debug for Distributed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Distributed")
            .field("node_id", &self.node_id)
            .field("num_nodes", &self.num_nodes)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Distributed {
    fn eq(&self, other: &Self) -> bool {
        self.node_id == other.node_id
            && self.num_nodes == other.num_nodes
            && Arc::ptr_eq(&self.store, &other.store)
    }
}

// ---------------------------------------------------------------------------------
// The C callbacks. `user_arg` points at a `StoreHandle` that the client owns and
// drops only after `PJRT_Client_Destroy` (the plugin may call until then).

/// What the callbacks' `user_arg` points at: boxed, so its address is stable.
pub(crate) type StoreHandle = Box<Arc<dyn KeyValueStore>>;

/// The PJRT error codes the callbacks report.
const NOT_FOUND: c_int = 5;
const DEADLINE_EXCEEDED: c_int = 4;
const INTERNAL: c_int = 13;

/// The callbacks and their user argument, for `PJRT_Client_Create_Args`.
pub(crate) fn wire(handle: &StoreHandle, a: &mut raw::PJRT_Client_Create_Args) {
    let user = (&**handle as *const Arc<dyn KeyValueStore>)
        .cast_mut()
        .cast::<c_void>();
    a.kv_get_callback = Some(kv_get);
    a.kv_get_user_arg = user;
    a.kv_try_get_callback = Some(kv_try_get);
    a.kv_try_get_user_arg = user;
    a.kv_put_callback = Some(kv_put);
    a.kv_put_user_arg = user;
}

/// The plugin's error for `message` (null if the plugin gave no error maker).
///
/// # Safety
/// `maker` is null or points at the plugin's error function.
unsafe fn plugin_error(
    maker: *const raw::PJRT_CallbackError,
    code: c_int,
    message: &str,
) -> *mut raw::PJRT_Error {
    if maker.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's promise; the message lives through the call (the
    // header: the maker copies it).
    unsafe { (*maker)(code, message.as_ptr().cast::<c_char>(), message.len()) }
}

/// The key the plugin passed, as text (keys are UTF-8 in every plugin; other bytes
/// are replaced).
///
/// # Safety
/// `key` points at `len` readable bytes (or `len` is 0).
unsafe fn key_of(key: *const c_char, len: usize) -> String {
    if key.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: the caller's promise.
    let bytes = unsafe { std::slice::from_raw_parts(key.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// The store behind `user_arg`.
///
/// # Safety
/// `user` is the pointer `wire` set, whose handle is alive.
unsafe fn store_of<'a>(user: *mut c_void) -> &'a Arc<dyn KeyValueStore> {
    // SAFETY: the caller's promise.
    unsafe { &*user.cast::<Arc<dyn KeyValueStore>>() }
}

/// A value handed to the plugin: its length in 8 bytes in front of the bytes, so
/// that `free_value`, which gets only the pointer, can rebuild the allocation.
fn leak_value(v: Vec<u8>) -> (*mut c_char, usize) {
    let len = v.len();
    let mut block = Vec::with_capacity(8 + len);
    block.extend_from_slice(&(len as u64).to_le_bytes());
    block.extend_from_slice(&v);
    let block: Box<[u8]> = block.into_boxed_slice();
    let base = Box::into_raw(block).cast::<u8>();
    // SAFETY: the block has 8 + len bytes; the pointer stays inside it.
    (unsafe { base.add(8) }.cast::<c_char>(), len)
}

/// Frees a value made by `leak_value` (the deleter the callbacks return).
///
/// # Safety
/// `value` came from `leak_value` and is freed once.
unsafe extern "C" fn free_value(value: *mut c_char) {
    if value.is_null() {
        return;
    }
    // SAFETY: `leak_value` put the length 8 bytes before `value` in one boxed
    // block of 8 + len bytes.
    unsafe {
        let base = value.cast::<u8>().sub(8);
        let mut len = [0u8; 8];
        std::ptr::copy_nonoverlapping(base, len.as_mut_ptr(), 8);
        let len = u64::from_le_bytes(len) as usize;
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            base,
            8 + len,
        )));
    }
}

/// Runs a store call, turning a panic into a store error (a panic must not unwind
/// into the plugin).
fn guarded<T>(f: impl FnOnce() -> Result<T, KvError>) -> Result<T, KvError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(KvError::Store("the store panicked".into())))
}

/// `PJRT_KeyValueGetCallback`.
///
/// # Safety
/// Called by the plugin with valid args whose `user_arg` is what `wire` set.
unsafe extern "C" fn kv_get(args: *mut raw::PJRT_KeyValueGetCallback_Args) -> *mut raw::PJRT_Error {
    // SAFETY: the plugin's args, valid for the call.
    let a = unsafe { &mut *args };
    // SAFETY: as above.
    let (key, store) = unsafe { (key_of(a.key, a.key_size), store_of(a.user_arg)) };
    let timeout = Duration::from_millis(a.timeout_in_ms.max(0) as u64);
    match guarded(|| store.get(&key, timeout)) {
        Ok(v) => {
            let (ptr, len) = leak_value(v);
            a.value = ptr;
            a.value_size = len;
            a.value_deleter_callback = Some(free_value);
            std::ptr::null_mut()
        }
        // SAFETY: the plugin's error maker.
        Err(e @ KvError::Timeout { .. }) => unsafe {
            plugin_error(a.callback_error, DEADLINE_EXCEEDED, &e.to_string())
        },
        // SAFETY: as above.
        Err(e) => unsafe { plugin_error(a.callback_error, INTERNAL, &e.to_string()) },
    }
}

/// `PJRT_KeyValueTryGetCallback`.
///
/// # Safety
/// As `kv_get`.
unsafe extern "C" fn kv_try_get(
    args: *mut raw::PJRT_KeyValueTryGetCallback_Args,
) -> *mut raw::PJRT_Error {
    // SAFETY: the plugin's args, valid for the call.
    let a = unsafe { &mut *args };
    // SAFETY: as above.
    let (key, store) = unsafe { (key_of(a.key, a.key_size), store_of(a.user_arg)) };
    match guarded(|| store.try_get(&key)) {
        Ok(Some(v)) => {
            let (ptr, len) = leak_value(v);
            a.value = ptr;
            a.value_size = len;
            a.value_deleter_callback = Some(free_value);
            std::ptr::null_mut()
        }
        // SAFETY: the plugin's error maker.
        Ok(None) => unsafe {
            plugin_error(
                a.callback_error,
                NOT_FOUND,
                &format!("no value under key {key:?}"),
            )
        },
        // SAFETY: as above.
        Err(e) => unsafe { plugin_error(a.callback_error, INTERNAL, &e.to_string()) },
    }
}

/// `PJRT_KeyValuePutCallback`.
///
/// # Safety
/// As `kv_get`; `value` points at `value_size` bytes during the call.
unsafe extern "C" fn kv_put(args: *mut raw::PJRT_KeyValuePutCallback_Args) -> *mut raw::PJRT_Error {
    // SAFETY: the plugin's args, valid for the call.
    let a = unsafe { &mut *args };
    // SAFETY: as above (the value is the plugin's, alive during the call).
    let (key, store, value) = unsafe {
        let value = if a.value.is_null() || a.value_size == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(a.value.cast::<u8>(), a.value_size)
        };
        (key_of(a.key, a.key_size), store_of(a.user_arg), value)
    };
    match guarded(|| store.put(&key, value)) {
        Ok(()) => std::ptr::null_mut(),
        // SAFETY: the plugin's error maker.
        Err(e) => unsafe { plugin_error(a.callback_error, INTERNAL, &e.to_string()) },
    }
}

#[cfg(test)]
mod tests {
    //! The callbacks called as a plugin calls them: args laid out as the header
    //! says, an error maker that records what it was given.
    use super::*;
    use std::sync::Mutex as StdMutex;

    static MADE: StdMutex<Vec<(c_int, String)>> = StdMutex::new(Vec::new());

    /// A stand-in for the plugin's error maker: records the code and message and
    /// returns a non-null marker (never dereferenced).
    unsafe extern "C" fn record(
        code: c_int,
        msg: *const c_char,
        len: usize,
    ) -> *mut raw::PJRT_Error {
        // SAFETY: the callbacks pass a live message of `len` bytes.
        let m = unsafe { std::slice::from_raw_parts(msg.cast::<u8>(), len) };
        MADE.lock()
            .unwrap()
            .push((code, String::from_utf8_lossy(m).into_owned()));
        std::ptr::NonNull::<raw::PJRT_Error>::dangling().as_ptr()
    }

    const MAKER: raw::PJRT_CallbackError = record;

    struct Panicky;
    impl KeyValueStore for Panicky {
        fn get(&self, _: &str, _: Duration) -> Result<Vec<u8>, KvError> {
            panic!("store bug")
        }
        fn try_get(&self, _: &str) -> Result<Option<Vec<u8>>, KvError> {
            panic!("store bug")
        }
        fn put(&self, _: &str, _: &[u8]) -> Result<(), KvError> {
            Err(KvError::Store("read-only".into()))
        }
    }

    fn put(handle: &StoreHandle, key: &str, value: &[u8]) -> *mut raw::PJRT_Error {
        let mut c = raw::PJRT_Client_Create_Args::new();
        wire(handle, &mut c);
        let mut a = raw::PJRT_KeyValuePutCallback_Args::new();
        a.key = key.as_ptr().cast();
        a.key_size = key.len();
        a.value = value.as_ptr().cast();
        a.value_size = value.len();
        a.callback_error = &MAKER;
        a.user_arg = c.kv_put_user_arg;
        // SAFETY: args laid out as the plugin's.
        unsafe { (c.kv_put_callback.unwrap())(&mut a) }
    }

    /// Get (or try-get) as the plugin does; the value copied out and freed with
    /// the returned deleter.
    fn get(
        handle: &StoreHandle,
        key: &str,
        timeout_ms: Option<c_int>,
    ) -> Result<Vec<u8>, (c_int, String)> {
        let mut c = raw::PJRT_Client_Create_Args::new();
        wire(handle, &mut c);
        let (err, value, size, deleter) = match timeout_ms {
            Some(t) => {
                let mut a = raw::PJRT_KeyValueGetCallback_Args::new();
                a.key = key.as_ptr().cast();
                a.key_size = key.len();
                a.timeout_in_ms = t;
                a.callback_error = &MAKER;
                a.user_arg = c.kv_get_user_arg;
                // SAFETY: args laid out as the plugin's.
                let e = unsafe { (c.kv_get_callback.unwrap())(&mut a) };
                (e, a.value, a.value_size, a.value_deleter_callback)
            }
            None => {
                let mut a = raw::PJRT_KeyValueTryGetCallback_Args::new();
                a.key = key.as_ptr().cast();
                a.key_size = key.len();
                a.callback_error = &MAKER;
                a.user_arg = c.kv_try_get_user_arg;
                // SAFETY: args laid out as the plugin's.
                let e = unsafe { (c.kv_try_get_callback.unwrap())(&mut a) };
                (e, a.value, a.value_size, a.value_deleter_callback)
            }
        };
        if !err.is_null() {
            return Err(MADE.lock().unwrap().pop().expect("an error was made"));
        }
        // SAFETY: the callback returned `size` bytes at `value`, freed by `deleter`.
        let v = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size).to_vec() };
        // SAFETY: as above, once.
        unsafe { deleter.expect("a deleter")(value) };
        Ok(v)
    }

    #[test]
    fn callbacks_put_get_and_report_errors_as_the_plugin_expects() {
        let _serial = SERIAL.lock().unwrap();
        let store = Arc::new(InMemoryStore::new());
        let handle: StoreHandle = Box::new(store.clone());
        assert!(put(&handle, "node/0/devices", b"\x00\x01topology").is_null());
        assert_eq!(
            get(&handle, "node/0/devices", Some(1000)),
            Ok(b"\x00\x01topology".to_vec())
        );
        assert_eq!(
            get(&handle, "node/0/devices", None),
            Ok(b"\x00\x01topology".to_vec())
        );
        // An empty value round-trips too.
        assert!(put(&handle, "empty", b"").is_null());
        assert_eq!(get(&handle, "empty", None), Ok(vec![]));
        // Missing: try-get says NOT_FOUND at once, get DEADLINE_EXCEEDED after
        // its timeout.
        let (code, msg) = get(&handle, "node/1/devices", None).unwrap_err();
        assert_eq!((code, msg.contains("node/1/devices")), (NOT_FOUND, true));
        let t = Instant::now();
        let (code, msg) = get(&handle, "node/1/devices", Some(50)).unwrap_err();
        assert_eq!(code, DEADLINE_EXCEEDED, "{msg}");
        assert!(t.elapsed() >= Duration::from_millis(50));
        // A get waits for another thread's put.
        let h2: StoreHandle = Box::new(store.clone());
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            assert!(put(&h2, "late", b"here").is_null());
        });
        assert_eq!(get(&handle, "late", Some(5000)), Ok(b"here".to_vec()));
        writer.join().unwrap();
        assert_eq!(store.keys(), ["empty", "late", "node/0/devices"]);
        assert!(store.calls() >= 9, "{}", store.calls());
    }

    static SERIAL: StdMutex<()> = StdMutex::new(());

    #[test]
    fn a_failing_or_panicking_store_is_an_error_for_the_plugin_not_an_unwind() {
        let _serial = SERIAL.lock().unwrap();
        let handle: StoreHandle = Box::new(Arc::new(Panicky));
        let (code, msg) = get(&handle, "k", Some(10)).unwrap_err();
        assert_eq!(
            (code, msg.as_str()),
            (INTERNAL, "key-value store: the store panicked")
        );
        let (code, _) = get(&handle, "k", None).unwrap_err();
        assert_eq!(code, INTERNAL);
        assert!(!put(&handle, "k", b"v").is_null());
        let (code, msg) = MADE.lock().unwrap().pop().unwrap();
        assert_eq!(
            (code, msg.as_str()),
            (INTERNAL, "key-value store: read-only")
        );
    }

    #[test]
    fn node_ids_are_checked() {
        let s: Arc<dyn KeyValueStore> = Arc::new(InMemoryStore::new());
        assert!(Distributed::new(2, 2, s.clone()).is_err());
        assert!(Distributed::new(0, 0, s.clone()).is_err());
        let d = Distributed::new(1, 2, s).unwrap();
        assert_eq!((d.node_id(), d.num_nodes()), (1, 2));
    }
}
