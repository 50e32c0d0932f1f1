//! The shipped launch files, validated as far as possible without a cluster:
//! every pod of `deploy/k8s/indexed-job.yaml` and every task of
//! `deploy/slurm/fleet.sbatch` resolves its settings (the code path of the
//! example's `--dry-run`) to the role, index and actor count intended, and the
//! manifests' counts agree. Untested at scale.

use std::collections::HashMap;

use xlaclient::fleet::settings::{Role, Settings};

/// The `name:`/`value:` pairs of each container's `env:` list, per document, and
/// each document's top-level `key: number` fields under `spec:` (completions,
/// parallelism) — a reader for this manifest's plain layout, not general YAML.
fn documents(yaml: &str) -> Vec<(HashMap<String, String>, HashMap<String, String>)> {
    yaml.split("\n---\n")
        .map(|doc| {
            let mut env = HashMap::new();
            let mut fields = HashMap::new();
            let mut name = None;
            for line in doc.lines() {
                let t = line.trim();
                if let Some(n) = t.strip_prefix("- name: ") {
                    name = Some(n.trim().to_string());
                } else if let Some(v) = t.strip_prefix("value: ") {
                    if let Some(n) = name.take() {
                        env.insert(n, v.trim().trim_matches('"').to_string());
                    }
                } else if let Some((k, v)) = t.split_once(": ") {
                    fields.insert(k.to_string(), v.trim().to_string());
                }
            }
            (env, fields)
        })
        .collect()
}

#[test]
fn kubernetes_indexed_job_resolves_every_pod() {
    let yaml = std::fs::read_to_string("deploy/k8s/indexed-job.yaml").unwrap();
    let docs = documents(&yaml);
    let job = |name: &str| {
        docs.iter()
            .find(|(_, f)| f.get("name").map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no document named {name}"))
    };
    let (actor_env, actor_fields) = job("fleet-actors");
    assert_eq!(actor_fields["completionMode"], "Indexed");
    let n: u32 = actor_fields["completions"].parse().unwrap();
    assert_eq!(actor_fields["parallelism"], n.to_string());
    for k in 0..n {
        let s = Settings::resolve(|v| match v {
            "JOB_COMPLETION_INDEX" => Some(k.to_string()),
            _ => actor_env.get(v).cloned(),
        })
        .unwrap();
        assert_eq!(s.role, Role::Actor(k));
        assert_eq!(s.actors, n);
        assert_eq!(s.nats_url, "nats://fleet-nats:4222");
        assert!(
            s.line()
                .starts_with(&format!("role=actor index={k} actors={n} ")),
            "{}",
            s.line()
        );
    }
    // An index past the count (a manifest edited in one place only) is refused.
    let e = Settings::resolve(|v| match v {
        "JOB_COMPLETION_INDEX" => Some(n.to_string()),
        _ => actor_env.get(v).cloned(),
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(&format!(
            "actor index {n} (from JOB_COMPLETION_INDEX) is not below the actor count {n}"
        )),
        "{e}"
    );
    let (learner_env, _) = job("fleet-learner");
    let s = Settings::resolve(|v| learner_env.get(v).cloned()).unwrap();
    assert_eq!((s.role, s.actors), (Role::Learner, n));
    assert_eq!(s.checkpoint_dir.unwrap().to_str(), Some("/checkpoints"));
    // The server's Service port is the one the URLs name.
    assert!(yaml.contains("port: 4222"));
}

#[test]
fn slurm_script_resolves_every_task() {
    let script = std::fs::read_to_string("deploy/slurm/fleet.sbatch").unwrap();
    let ntasks: u32 = script
        .lines()
        .find_map(|l| l.strip_prefix("#SBATCH --ntasks="))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(script.contains("srun \"$BIN\" --dry-run"));
    assert!(script.contains("srun \"$BIN\" run"));
    for procid in 0..ntasks {
        let s = Settings::resolve(|v| match v {
            "SLURM_PROCID" => Some(procid.to_string()),
            "SLURM_NTASKS" => Some(ntasks.to_string()),
            "NATS_URL" => Some("nats://node001:4222".into()),
            "XLACLIENT_FLEET_PREFIX" => Some("catch-123".into()),
            _ => None,
        })
        .unwrap();
        let want = if procid == 0 {
            Role::Learner
        } else {
            Role::Actor(procid - 1)
        };
        assert_eq!(s.role, want);
        assert_eq!(s.actors, ntasks - 1);
        assert_eq!(s.source, "SLURM_PROCID");
    }
}

#[test]
fn settings_errors_name_the_variable() {
    let none = Settings::resolve(|_| None).unwrap_err().to_string();
    assert!(none.contains("no role: set XLACLIENT_FLEET_ROLE"), "{none}");
    let bad = Settings::resolve(|v| match v {
        "JOB_COMPLETION_INDEX" => Some("three".into()),
        _ => None,
    })
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("JOB_COMPLETION_INDEX=\"three\": not a whole number"),
        "{bad}"
    );
    let url = Settings::resolve(|v| match v {
        "XLACLIENT_FLEET_ROLE" => Some("learner".into()),
        "XLACLIENT_FLEET_ACTORS" => Some("2".into()),
        "NATS_URL" => Some("http://x:4222".into()),
        _ => None,
    })
    .unwrap_err()
    .to_string();
    assert!(url.contains("NATS_URL=\"http://x:4222\""), "{url}");
}
