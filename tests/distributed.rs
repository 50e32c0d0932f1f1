//! A client as one node of a job of several processes (`ClientOptions::distributed`):
//! the node id reaches the plugin, the client reports it as its process index, its
//! devices carry that process's global ids, and replicated programs run on them. The
//! CPU plugins have no cross-process collectives, so the second node here is the
//! same process's other client; the key-value callbacks themselves are tested in
//! `crates/xlaclient-pjrt/src/distributed.rs` as the plugin calls them.

mod common;

use std::sync::Arc;

use xlaclient::pjrt::distributed::{Distributed, InMemoryStore, KeyValueStore};
use xlaclient::{Builder, Client, ClientOptions, CompileOptions, Error, Plugin, Shape};

fn node(node_id: u32, num_nodes: u32, store: &Arc<InMemoryStore>) -> Result<Client, Error> {
    let store: Arc<dyn KeyValueStore> = store.clone();
    let options = ClientOptions::new()
        .cpu_device_count(2)
        .distributed(Distributed::new(node_id, num_nodes, store)?);
    Ok(Client::new(&Plugin::default_plugin()?, &options)?)
}

/// `psum` of each device's `[index, 10]` over the client's two devices.
fn psum_on(client: &Client) -> Vec<Vec<f32>> {
    let b = Builder::new("psum");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let exe = client
        .compile_with(
            b.build(&x.psum(&[])).unwrap(),
            &CompileOptions::new().num_replicas(2),
        )
        .unwrap();
    let devices = client.addressable_devices();
    let args: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| d.buffer_from_host(&[i as f32, 10.0], &[2]).unwrap())
        .collect();
    let out = exe
        .execute_replicated(&[vec![&args[0]], vec![&args[1]]])
        .unwrap();
    out.iter().map(|o| o[0].to_vec::<f32>().unwrap()).collect()
}

#[test]
fn node_zero_of_one_is_an_ordinary_client() {
    let store = Arc::new(InMemoryStore::new());
    let client = node(0, 1, &store).unwrap();
    assert_eq!(client.process_index().unwrap(), 0);
    assert_eq!(client.addressable_devices().len(), 2);
    assert_eq!(psum_on(&client), [vec![1.0, 20.0], vec![1.0, 20.0]]);
}

/// Node 1 of 2: the 0.115 CPU plugin takes it as `process_id` (its devices' global
/// ids are then 2048 and 2049: process id × 2048 + local index) and runs replicated
/// programs on them; the 0.81 plugin ignores the option, which is an error here
/// rather than a client that would claim to be process 0.
#[test]
fn node_one_of_two_gets_its_process_index_and_global_device_ids_or_a_clear_error() {
    let store = Arc::new(InMemoryStore::new());
    let (major, minor) = common::client().plugin().api_version();
    match node(1, 2, &store) {
        Ok(client) => {
            assert!(
                (major, minor) >= (0, 100),
                "API {major}.{minor} took a node id"
            );
            assert_eq!(client.process_index().unwrap(), 1);
            let ids: Vec<i32> = client
                .addressable_devices()
                .iter()
                .map(|d| d.id().unwrap())
                .collect();
            assert_eq!(ids, [2048, 2049]);
            assert_eq!(psum_on(&client), [vec![1.0, 20.0], vec![1.0, 20.0]]);
            // Its replicas may be named by these global ids.
            let b = Builder::new("assigned");
            let x = b.parameter(0, Shape::of::<f32>(&[1]), "x");
            let opts = CompileOptions::new()
                .num_replicas(2)
                .device_assignment(&[vec![2049], vec![2048]]);
            assert!(
                client
                    .compile_with(b.build(&x.psum(&[])).unwrap(), &opts)
                    .is_ok()
            );
            // An id of another process is refused before the plugin sees it.
            let opts = CompileOptions::new()
                .num_replicas(2)
                .device_assignment(&[vec![0], vec![1]]);
            assert!(
                client
                    .compile_with(b.build(&x.psum(&[])).unwrap(), &opts)
                    .is_err()
            );
        }
        Err(e) => {
            assert!((major, minor) < (0, 100), "API {major}.{minor}: {e}");
            let msg = e.to_string();
            assert!(msg.contains("did not take node id 1"), "{msg}");
        }
    }
    // The store is the caller's, alive after the clients: what the CPU plugin put
    // into it (these plugins exchange nothing at creation) is listed, not assumed.
    eprintln!(
        "key-value calls by the plugin: {} ({:?})",
        store.calls(),
        store.keys()
    );
}

#[test]
fn a_node_id_outside_the_job_is_an_error() {
    let store: Arc<dyn KeyValueStore> = Arc::new(InMemoryStore::new());
    let e = Distributed::new(3, 2, store).unwrap_err().to_string();
    assert!(e.contains("node id 3 of 2 nodes"), "{e}");
}
