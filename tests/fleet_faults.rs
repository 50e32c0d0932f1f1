//! Faults, each on a real `nats-server -js` on 127.0.0.1, with actors and
//! learners in separate processes killed with SIGKILL:
//! - an actor killed mid-run: the learner goes on, a restarted actor rejoins;
//! - the learner killed: restarted from its checkpoint, no acked trajectory lost
//!   (what it had not acked is delivered again; duplicates dropped by id);
//! - the server killed and restarted: clients reconnect and work resumes.
//!
//! (Malformed messages, backpressure and version skew: `tests/fleet_transport.rs`.)
//!
//! The child processes are this test binary run again on the ignored test
//! `child_role`, which reads its role from `FLEET_TEST_ROLE`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xlaclient::Client;
use xlaclient::checkpoint::Checkpoint;
use xlaclient::fleet::catch::{self, ActorConfig, Learner, LearnerConfig, LearnerReport};
use xlaclient::fleet::{NatsServer, Transport, TransportOptions};

fn opts(prefix: &str) -> TransportOptions {
    TransportOptions {
        prefix: prefix.into(),
        max_bytes: 8 << 20,
        ..TransportOptions::default()
    }
}

fn learner_config(dir: Option<PathBuf>) -> LearnerConfig {
    LearnerConfig {
        checkpoint_dir: dir,
        max_time: Duration::from_secs(150),
        ..LearnerConfig::default()
    }
}

/// The entry point of the child processes (does nothing without
/// `FLEET_TEST_ROLE`).
#[test]
#[ignore = "entry point of the child processes the fault tests start"]
fn child_role() {
    let Ok(role) = std::env::var("FLEET_TEST_ROLE") else {
        return;
    };
    let url = std::env::var("FLEET_TEST_URL").unwrap();
    let prefix = std::env::var("FLEET_TEST_PREFIX").unwrap();
    let tr = Transport::connect(&url, opts(&prefix), Duration::from_secs(20)).unwrap();
    let client = Client::cpu().unwrap();
    match role.as_str() {
        "actor" => {
            let index = std::env::var("FLEET_TEST_INDEX").unwrap().parse().unwrap();
            let cfg = ActorConfig {
                max_trajectories: std::env::var("FLEET_TEST_MAX")
                    .ok()
                    .map(|m| m.parse().unwrap()),
                ..ActorConfig::new(index)
            };
            catch::run_actor(&tr, &client, &cfg).unwrap();
        }
        "learner" => {
            let dir = PathBuf::from(std::env::var("FLEET_TEST_DIR").unwrap());
            // Not done before the kill at 50 steps: the kill is mid-run.
            let cfg = LearnerConfig {
                min_train_steps: 300,
                ..learner_config(Some(dir.join("ckpt")))
            };
            let mut l = Learner::new(&client, cfg).unwrap();
            let r = l.run(&tr).unwrap();
            std::fs::write(
                dir.join("report.txt"),
                format!(
                    "{r} restored_at={:?} stale={}",
                    r.restored_at, r.stale_dropped
                ),
            )
            .unwrap();
        }
        other => panic!("FLEET_TEST_ROLE={other}"),
    }
}

fn spawn(role: &str, url: &str, prefix: &str, extra: &[(&str, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "child_role",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("FLEET_TEST_ROLE", role)
    .env("FLEET_TEST_URL", url)
    .env("FLEET_TEST_PREFIX", prefix)
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

fn kill(c: &mut Child) {
    c.kill().unwrap();
    c.wait().unwrap();
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sent_by(tr: &Transport, index: u32) -> Vec<u64> {
    tr.config_with_prefix(&format!("sent.{index}."))
        .unwrap()
        .iter()
        .map(|(_, v)| v.parse().unwrap())
        .collect()
}

fn finish(children: &mut [Child]) {
    for c in children {
        let start = Instant::now();
        while c.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(180) {
                kill(c);
                panic!("a child did not stop after the stop flag");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn killed_actor_restarts_and_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    let s = NatsServer::start_local(dir.path().join("store")).unwrap();
    let url = s.url();
    let tr = Transport::connect(&url, opts("ka"), Duration::from_secs(10)).unwrap();
    let learner = std::thread::spawn({
        let url = url.clone();
        move || {
            let tr = Transport::connect(&url, opts("ka"), Duration::from_secs(10)).unwrap();
            let client = Client::cpu().unwrap();
            // Long enough for the restarted actor to take part.
            let cfg = LearnerConfig {
                min_train_steps: 400,
                ..learner_config(None)
            };
            Learner::new(&client, cfg).unwrap().run(&tr).unwrap()
        }
    });
    let idx = |i: u32| vec![("FLEET_TEST_INDEX", i.to_string())];
    let mut a0 = spawn("actor", &url, "ka", &idx(0));
    // Actor 1 alone cannot take the learner to its 400 train steps (one per
    // trajectory once the replay holds 4), so the learner cannot stop before
    // the restarted actor 0 has sent, however slowly that one starts.
    let mut a1_env = idx(1);
    a1_env.push(("FLEET_TEST_MAX", "250".into()));
    let a1 = spawn("actor", &url, "ka", &a1_env);
    wait_for("actor 0's trajectories", Duration::from_secs(60), || {
        sent_by(&tr, 0).iter().sum::<u64>() >= 5
    });
    kill(&mut a0);
    let before: u64 = sent_by(&tr, 0).iter().sum();
    // The learner goes on with actor 1 meanwhile; actor 0 comes back with a new
    // epoch and its trajectories are taken.
    let a0b = spawn("actor", &url, "ka", &idx(0));
    wait_for(
        "the restarted actor's trajectories",
        Duration::from_secs(150),
        || sent_by(&tr, 0).len() == 2 && sent_by(&tr, 0).iter().all(|&n| n > 0),
    );
    let r: LearnerReport = learner.join().unwrap();
    finish(&mut [a0b, a1]);
    assert!(sent_by(&tr, 0).iter().sum::<u64>() > before);
    assert_eq!(r.eval, 1.0, "{r}");
    // A kill between a publish and its count's update makes `sent` short by one:
    // nothing is ever received that was not sent, and nothing sent is missing
    // but that one.
    assert!((-1..=0).contains(&r.lost), "{r}");
    assert_eq!(r.duplicates_dropped, 0, "{r}");
}

fn checkpoint_steps(p: &Path) -> Option<u64> {
    let c = Checkpoint::read(p).ok()?;
    c.metadata().get("train_steps")?.parse().ok()
}

#[test]
fn killed_learner_restarts_from_its_checkpoint_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = NatsServer::start_local(dir.path().join("store")).unwrap();
    let url = s.url();
    let tr = Transport::connect(&url, opts("kl"), Duration::from_secs(10)).unwrap();
    let d = vec![("FLEET_TEST_DIR", dir.path().display().to_string())];
    let mut l1 = spawn("learner", &url, "kl", &d);
    let mut a0 = spawn("actor", &url, "kl", &[("FLEET_TEST_INDEX", "0".into())]);
    let ckpt = dir.path().join("ckpt").join("learner.safetensors");
    wait_for(
        "a checkpoint after some training",
        Duration::from_secs(90),
        || checkpoint_steps(&ckpt).is_some_and(|n| n >= 50),
    );
    kill(&mut l1);
    let at_kill = checkpoint_steps(&ckpt).unwrap();
    let mut l2 = spawn("learner", &url, "kl", &d);
    finish(std::slice::from_mut(&mut l2));
    finish(std::slice::from_mut(&mut a0));
    let report = std::fs::read_to_string(dir.path().join("report.txt")).unwrap();
    let field = |k: &str| -> String {
        report
            .split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k} in {report}"))
            .to_string()
    };
    assert_eq!(field("restored_at"), format!("Some({at_kill})"), "{report}");
    assert_eq!(field("lost"), "0", "{report}");
    assert_eq!(field("eval"), "1.000", "{report}");
    let sent: u64 = sent_by(&tr, 0).iter().sum();
    assert_eq!(field("trajectories_sent"), sent.to_string());
    // Every trajectory sent was trained on, dropped as stale, or drained after
    // the stop, exactly once over both learners (the counts carry over in the
    // checkpoint): nothing acked was lost.
    assert_eq!(tr.stream_state().unwrap().messages, 0);
}

#[test]
fn server_restart_clients_reconnect_and_work_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = NatsServer::start_local(dir.path().join("store")).unwrap();
    let url = s.url();
    let tr = Transport::connect(&url, opts("sr"), Duration::from_secs(10)).unwrap();
    let learner = std::thread::spawn({
        let url = url.clone();
        move || {
            let tr = Transport::connect(&url, opts("sr"), Duration::from_secs(10)).unwrap();
            let client = Client::cpu().unwrap();
            Learner::new(&client, learner_config(None))
                .unwrap()
                .run(&tr)
                .unwrap()
        }
    });
    let mut a0 = spawn("actor", &url, "sr", &[("FLEET_TEST_INDEX", "0".into())]);
    wait_for("trajectories", Duration::from_secs(60), || {
        sent_by(&tr, 0).iter().sum::<u64>() >= 5
    });
    s.restart().unwrap();
    let after_restart = Instant::now();
    wait_for("the client to reconnect", Duration::from_secs(30), || {
        tr.is_connected()
    });
    let sent_then = sent_by(&tr, 0).iter().sum::<u64>();
    wait_for("work to resume", Duration::from_secs(60), || {
        sent_by(&tr, 0).iter().sum::<u64>() > sent_then + 3
    });
    let r = learner.join().unwrap();
    finish(std::slice::from_mut(&mut a0));
    assert!(after_restart.elapsed() > Duration::ZERO);
    assert_eq!(r.eval, 1.0, "{r}");
    assert_eq!(r.lost, 0, "{r}");
}
