//! `RedisStore` (feature `redis`) against a real Redis server that the test starts
//! on the loopback interface (`redis-server`, installed by `.ci/run`): put, get,
//! try-get, a get that waits for another node's put, timeouts, keys under the job's
//! prefix, a server that is not there, and two clients of one job sharing it.
//!
//!   cargo test --features redis --test distributed_redis
#![cfg(feature = "redis")]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xlaclient::pjrt::distributed::{Distributed, KeyValueStore, KvError, RedisStore};
use xlaclient::{Client, ClientOptions, Plugin};

/// A Redis server on a free loopback port, killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (installed by .ci/run: apt-get install redis-server)");
        let url = format!("redis://127.0.0.1:{port}/");
        let start = Instant::now();
        while RedisStore::connect(&url, "probe").is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn redis_store_puts_gets_waits_and_times_out() {
    let server = Server::start();
    let a = RedisStore::connect(&server.url, "job-a").unwrap();
    let other_job = RedisStore::connect(&server.url, "job-b").unwrap();
    a.put("node/0", b"\x00topology\xff").unwrap();
    assert_eq!(
        a.get("node/0", Duration::from_secs(1)).unwrap(),
        b"\x00topology\xff"
    );
    assert_eq!(a.try_get("node/0").unwrap().unwrap(), b"\x00topology\xff");
    // Another job's prefix does not see it.
    assert_eq!(other_job.try_get("node/0").unwrap(), None);
    // Missing: try-get says so, get times out after its timeout.
    assert_eq!(a.try_get("node/1").unwrap(), None);
    let t = Instant::now();
    let e = a.get("node/1", Duration::from_millis(100)).unwrap_err();
    assert!(matches!(e, KvError::Timeout { .. }), "{e}");
    assert!(t.elapsed() >= Duration::from_millis(100));
    // A get waits for another connection's put.
    let url = server.url.clone();
    let writer = std::thread::spawn(move || {
        let b = RedisStore::connect(&url, "job-a").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        b.put("node/1", b"second").unwrap();
    });
    assert_eq!(a.get("node/1", Duration::from_secs(5)).unwrap(), b"second");
    writer.join().unwrap();
}

#[test]
fn no_server_is_an_error_not_a_hang() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = RedisStore::connect(&format!("redis://127.0.0.1:{port}/"), "job").unwrap_err();
    assert!(matches!(e, KvError::Store(_)), "{e}");
    assert!(RedisStore::connect("not a url", "job").is_err());
}

/// A client made with the Redis store (node 0 of 1: the CPU plugins exchange
/// nothing at creation, so this checks the wiring, not a topology exchange).
#[test]
fn a_client_takes_the_redis_store() {
    let server = Server::start();
    let store: Arc<dyn KeyValueStore> = Arc::new(RedisStore::connect(&server.url, "job").unwrap());
    let options = ClientOptions::new()
        .cpu_device_count(2)
        .distributed(Distributed::new(0, 1, store).unwrap());
    let client = Client::new(&Plugin::default_plugin().unwrap(), &options).unwrap();
    assert_eq!(client.process_index().unwrap(), 0);
    assert_eq!(client.addressable_devices().len(), 2);
}
