//! The fleet's transport on a real `nats-server -js` on 127.0.0.1 (installed by
//! the crate from its pinned wheel on first use): config and parameters in the
//! key-value store, trajectories through the work-queue stream with acks,
//! backpressure from `max_bytes`, malformed messages counted, version-skewed
//! actors dropped beyond the lag bound, and a short end-to-end run.

use std::time::{Duration, Instant};

use xlaclient::Client;
use xlaclient::fleet::catch::{self, ActorConfig, Learner, LearnerConfig, Sequence};
use xlaclient::fleet::frame::{Kind, Leaf, MAX_CHUNK};
use xlaclient::fleet::{NatsServer, Publish, Transport, TransportOptions};

fn server() -> (tempfile::TempDir, NatsServer) {
    let dir = tempfile::tempdir().unwrap();
    let s = NatsServer::start_local(dir.path().join("store")).unwrap();
    assert!(s.url().starts_with("nats://127.0.0.1:"));
    (dir, s)
}

fn connect(s: &NatsServer, prefix: &str, max_bytes: i64) -> Transport {
    let opts = TransportOptions {
        prefix: prefix.into(),
        max_bytes,
        ..TransportOptions::default()
    };
    Transport::connect(&s.url(), opts, Duration::from_secs(10)).unwrap()
}

fn seqs(seed: i32) -> Vec<Sequence> {
    (0..catch::B as i32)
        .map(|i| Sequence {
            obs: (0..(catch::T + 1) * catch::OBS)
                .map(|k| ((k as i32 + i + seed) % 2) as f32)
                .collect(),
            actions: vec![(i + seed).rem_euclid(3); catch::T],
            rewards: vec![0.0; catch::T],
            discounts: vec![1.0; catch::T],
        })
        .collect()
}

#[test]
fn config_params_and_trajectories_round_trip() {
    let (_d, s) = server();
    let tr = connect(&s, "rt", 64 << 20);
    assert!(tr.is_connected());
    assert_eq!(tr.get_config("lr").unwrap(), None);
    tr.put_config("lr", "0.003").unwrap();
    assert_eq!(tr.get_config("lr").unwrap().as_deref(), Some("0.003"));

    // Parameters: none yet, then version 7 (chunked: frames of 4 KiB), then
    // nothing newer than 7.
    assert!(tr.get_params(None).unwrap().is_none());
    let values: Vec<f32> = (0..5000).map(|i| i as f32 * 0.5).collect();
    let small = TransportOptions {
        prefix: "rt".into(),
        max_frame: 4096,
        ..TransportOptions::default()
    };
    let tr_small = Transport::connect(&s.url(), small, Duration::from_secs(5)).unwrap();
    tr_small
        .put_params(7, vec![Leaf::f32(&[50, 100], &values).unwrap()])
        .unwrap();
    let p = tr.get_params(None).unwrap().unwrap();
    assert_eq!((p.kind, p.version), (Kind::Params, 7));
    assert_eq!(p.leaves[0].to_f32().unwrap(), values);
    assert!(tr.get_params(Some(7)).unwrap().is_none());
    assert_eq!(tr.get_params(Some(6)).unwrap().unwrap().version, 7);

    // Trajectories: published, pulled, equal, acked, gone.
    for k in 0..3 {
        let m = catch::trajectory_message(1, 99, k, 7, &seqs(k as i32)).unwrap();
        assert_eq!(tr.publish(&m).unwrap(), Publish::Accepted);
    }
    assert_eq!(tr.stream_state().unwrap().messages, 3);
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < 3 && start.elapsed() < Duration::from_secs(10) {
        got.extend(tr.fetch(10, Duration::from_millis(200)).unwrap());
    }
    assert_eq!(got.len(), 3);
    for (k, d) in got.iter().enumerate() {
        let m = d.message.as_ref().unwrap().as_ref().unwrap();
        assert_eq!((m.actor, m.epoch, m.seq, m.version), (1, 99, k as u64, 7));
        assert_eq!(catch::sequences_of(m).unwrap(), seqs(k as i32));
        assert_eq!(d.delivered, 1);
    }
    // Unacked, they still take space in the work queue.
    assert_eq!(tr.stream_state().unwrap().messages, 3);
    tr.ack(got.into_iter().map(|d| d.into_ack()).collect())
        .unwrap();
    let start = Instant::now();
    while tr.stream_state().unwrap().messages != 0 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(tr.stream_state().unwrap().messages, 0);
}

#[test]
fn malformed_truncated_and_foreign_messages_are_counted() {
    let (_d, s) = server();
    let tr = connect(&s, "bad", 64 << 20);
    let client = Client::cpu().unwrap();
    let mut learner = Learner::new(&client, LearnerConfig::default()).unwrap();
    let good = catch::trajectory_message(0, 1, 0, 0, &seqs(0)).unwrap();
    let bytes = xlaclient::fleet::frame::encode(&good, MAX_CHUNK)
        .unwrap()
        .remove(0);
    // Foreign (JSON), truncated, and a well-formed frame with a bad layout.
    tr.publish_raw(
        0,
        br#"{"obs": [1, 2, 3], "note": "not a fleet frame at all"}"#.to_vec(),
    )
    .unwrap();
    tr.publish_raw(0, bytes[..bytes.len() / 2].to_vec())
        .unwrap();
    let mut wrong = good.clone();
    wrong.seq = 1;
    wrong.leaves.swap(1, 2);
    tr.publish(&wrong).unwrap();
    let mut fine = good.clone();
    fine.seq = 2;
    tr.publish(&fine).unwrap();
    let mut n = 0;
    let start = Instant::now();
    while n < 4 && start.elapsed() < Duration::from_secs(10) {
        let d = tr.fetch(10, Duration::from_millis(200)).unwrap();
        n += d.len();
        learner.receive(d);
    }
    let r = learner.report();
    assert_eq!(r.malformed, 3);
    assert_eq!(r.trajectories_trained, 1);
    assert_eq!(learner.replay_len(), catch::B);
    let last = r.last_malformed.clone().unwrap();
    assert!(
        last.contains("actions is F32 [32, 16], expected I32 [32, 16]"),
        "{last}"
    );
}

#[test]
fn full_stream_refuses_publishes_and_bounds_memory() {
    let (_d, s) = server();
    // Room for about 4 trajectories of ~109 kB.
    let max_bytes = 450_000;
    let tr = connect(&s, "bp", max_bytes);
    let m = |k: u64| catch::trajectory_message(0, 5, k, 0, &seqs(k as i32)).unwrap();
    let mut accepted = 0;
    let mut refused = None;
    for k in 0..20 {
        match tr.publish(&m(k)).unwrap() {
            Publish::Accepted => accepted += 1,
            Publish::Refused(why) => {
                refused = Some(why);
                break;
            }
        }
    }
    let why = refused.expect("the stream never refused a publish");
    assert!((3..=5).contains(&accepted), "accepted {accepted}");
    let st = tr.stream_state().unwrap();
    assert!(st.bytes <= max_bytes as u64, "{st:?}");
    // `send` waits through refusals until a consumer makes room.
    let consumer = std::thread::spawn({
        let url = s.url();
        move || {
            let opts = TransportOptions {
                prefix: "bp".into(),
                max_bytes,
                ..TransportOptions::default()
            };
            let tr = Transport::connect(&url, opts, Duration::from_secs(5)).unwrap();
            std::thread::sleep(Duration::from_millis(500));
            let d = tr.fetch(2, Duration::from_millis(500)).unwrap();
            let n = d.len();
            tr.ack(d.into_iter().map(|d| d.into_ack()).collect())
                .unwrap();
            n
        }
    });
    let stats = tr.send(&m(100), Duration::from_secs(20)).unwrap();
    assert!(consumer.join().unwrap() >= 1);
    assert!(stats.refused >= 1, "{stats:?} ({why})");
    assert!(tr.stream_state().unwrap().bytes <= max_bytes as u64);
}

#[test]
fn stale_trajectories_beyond_the_lag_bound_are_dropped() {
    let (_d, s) = server();
    let tr = connect(&s, "lag", 64 << 20);
    let client = Client::cpu().unwrap();
    let cfg = LearnerConfig {
        max_lag: 2,
        publish_every: 1,
        min_replay: 1,
        ..LearnerConfig::default()
    };
    let mut learner = Learner::new(&client, cfg).unwrap();
    learner.publish(&tr).unwrap(); // version 0
    // A version-skewed actor: acts with version 0 and never picks up newer ones.
    let mut frozen = ActorConfig::new(0);
    frozen.frozen_params = true;
    frozen.max_trajectories = Some(3);
    let actor_client = Client::cpu().unwrap();
    let a = catch::run_actor(&tr, &actor_client, &frozen).unwrap();
    assert_eq!((a.sent, a.version), (3, 0));
    // The first arrives while the learner is at version 0 (lag 0: used); then the
    // learner moves to version 5, and the other two (lag 5 > 2) are dropped.
    let mut d = Vec::new();
    while d.len() < 3 {
        d.extend(tr.fetch(3, Duration::from_millis(200)).unwrap());
    }
    let rest = d.split_off(1);
    learner.receive(d);
    for _ in 0..5 {
        learner.train_and_publish(&tr).unwrap();
    }
    assert_eq!(tr.get_params(None).unwrap().unwrap().version, 5);
    learner.receive(rest);
    // A fresh actor picks up version 5: its trajectory is used.
    let mut fresh = ActorConfig::new(1);
    fresh.max_trajectories = Some(1);
    let b = catch::run_actor(&tr, &actor_client, &fresh).unwrap();
    assert_eq!(b.version, 5);
    let d = tr.fetch(1, Duration::from_secs(2)).unwrap();
    learner.receive(d);
    let r = learner.report();
    assert_eq!((r.trajectories_trained, r.stale_dropped), (2, 2));
    assert_eq!(r.lag_histogram.get(&5), Some(&2));
    assert_eq!(r.lag_histogram.get(&0), Some(&2));
}
