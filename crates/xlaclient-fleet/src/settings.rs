//! A role's settings, from the environment, as orchestrators give them.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `XLACLIENT_FLEET_ROLE` | `learner` or `actor` |
//! | `NATS_URL` | the server (default `nats://127.0.0.1:4222`) |
//! | `XLACLIENT_FLEET_ACTOR_INDEX` | this actor's index |
//! | `JOB_COMPLETION_INDEX` | Kubernetes Indexed Job: the actor index |
//! | `SLURM_PROCID` | Slurm: process 0 is the learner, process `k` is actor `k − 1` |
//! | `XLACLIENT_FLEET_ACTORS` | the number of actors (else `SLURM_NTASKS − 1`) |
//! | `XLACLIENT_FLEET_PREFIX` | the run's namespace on the server (default `fleet`) |
//! | `XLACLIENT_FLEET_CHECKPOINT_DIR` | the learner's checkpoint directory |
//!
//! An explicit `XLACLIENT_FLEET_ROLE` / `XLACLIENT_FLEET_ACTOR_INDEX` wins over
//! what the orchestrator's variables imply.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// What a process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The learner.
    Learner,
    /// Actor with this index.
    Actor(u32),
}

/// A role's resolved settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The role.
    pub role: Role,
    /// The NATS server's URL.
    pub nats_url: String,
    /// How many actors the run has.
    pub actors: u32,
    /// The run's namespace on the server.
    pub prefix: String,
    /// The learner's checkpoint directory.
    pub checkpoint_dir: Option<PathBuf>,
    /// Which variable gave the role (for the dry run's line).
    pub source: &'static str,
}

fn parse<T: std::str::FromStr>(name: &str, v: &str) -> Result<T> {
    v.trim()
        .parse()
        .map_err(|_| Error::Settings(format!("{name}={v:?}: not a whole number")))
}

impl Settings {
    /// Resolves the settings from `var` (e.g. `|k| std::env::var(k).ok()`).
    ///
    /// # Errors
    /// [`Error::Settings`] naming the variable that is missing or malformed.
    pub fn resolve(var: impl Fn(&str) -> Option<String>) -> Result<Settings> {
        let get = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let nats_url = get("NATS_URL").unwrap_or_else(|| "nats://127.0.0.1:4222".into());
        if !(nats_url.starts_with("nats://") || nats_url.starts_with("tls://")) {
            return Err(Error::Settings(format!(
                "NATS_URL={nats_url:?}: expected nats://HOST:PORT or tls://HOST:PORT"
            )));
        }
        let explicit_index = get("XLACLIENT_FLEET_ACTOR_INDEX")
            .map(|v| parse::<u32>("XLACLIENT_FLEET_ACTOR_INDEX", &v))
            .transpose()?;
        let job_index = get("JOB_COMPLETION_INDEX")
            .map(|v| parse::<u32>("JOB_COMPLETION_INDEX", &v))
            .transpose()?;
        let slurm = get("SLURM_PROCID")
            .map(|v| parse::<u32>("SLURM_PROCID", &v))
            .transpose()?;
        let role_var = get("XLACLIENT_FLEET_ROLE");
        let (role, source) = match role_var.as_deref().map(str::trim) {
            Some("learner") => (Role::Learner, "XLACLIENT_FLEET_ROLE"),
            Some("actor") => {
                let (i, src) = match (explicit_index, job_index, slurm) {
                    (Some(i), _, _) => (i, "XLACLIENT_FLEET_ACTOR_INDEX"),
                    (None, Some(i), _) => (i, "JOB_COMPLETION_INDEX"),
                    (None, None, Some(p)) if p > 0 => (p - 1, "SLURM_PROCID"),
                    _ => {
                        return Err(Error::Settings(
                            "XLACLIENT_FLEET_ROLE=actor needs an index: XLACLIENT_FLEET_ACTOR_INDEX, \
                             JOB_COMPLETION_INDEX or SLURM_PROCID >= 1"
                                .into(),
                        ));
                    }
                };
                (Role::Actor(i), src)
            }
            Some(other) => {
                return Err(Error::Settings(format!(
                    "XLACLIENT_FLEET_ROLE={other:?}: expected learner or actor"
                )));
            }
            None => match (explicit_index, job_index, slurm) {
                (Some(i), _, _) => (Role::Actor(i), "XLACLIENT_FLEET_ACTOR_INDEX"),
                (None, Some(i), _) => (Role::Actor(i), "JOB_COMPLETION_INDEX"),
                (None, None, Some(0)) => (Role::Learner, "SLURM_PROCID"),
                (None, None, Some(p)) => (Role::Actor(p - 1), "SLURM_PROCID"),
                (None, None, None) => {
                    return Err(Error::Settings(
                        "no role: set XLACLIENT_FLEET_ROLE (learner|actor), or run under an \
                         Indexed Job (JOB_COMPLETION_INDEX) or Slurm (SLURM_PROCID)"
                            .into(),
                    ));
                }
            },
        };
        let actors = match get("XLACLIENT_FLEET_ACTORS") {
            Some(v) => parse::<u32>("XLACLIENT_FLEET_ACTORS", &v)?,
            None => match get("SLURM_NTASKS") {
                Some(v) => parse::<u32>("SLURM_NTASKS", &v)?.saturating_sub(1),
                None => {
                    return Err(Error::Settings(
                        "the number of actors: set XLACLIENT_FLEET_ACTORS (or run under Slurm: \
                         SLURM_NTASKS − 1)"
                            .into(),
                    ));
                }
            },
        };
        if actors == 0 {
            return Err(Error::Settings("the run needs at least one actor".into()));
        }
        if let Role::Actor(i) = role
            && i >= actors
        {
            return Err(Error::Settings(format!(
                "actor index {i} (from {source}) is not below the actor count {actors}"
            )));
        }
        let prefix = get("XLACLIENT_FLEET_PREFIX").unwrap_or_else(|| "fleet".into());
        if !prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(Error::Settings(format!(
                "XLACLIENT_FLEET_PREFIX={prefix:?}: letters, digits, '_' and '-' only"
            )));
        }
        Ok(Settings {
            role,
            nats_url,
            actors,
            prefix,
            checkpoint_dir: get("XLACLIENT_FLEET_CHECKPOINT_DIR").map(PathBuf::from),
            source,
        })
    }

    /// From the process's environment.
    ///
    /// # Errors
    /// As [`resolve`](Self::resolve).
    pub fn from_env() -> Result<Settings> {
        Settings::resolve(|k| std::env::var(k).ok())
    }

    /// One line: `role=… index=… actors=… nats_url=… prefix=… checkpoint_dir=… source=…`.
    pub fn line(&self) -> String {
        let (role, index) = match self.role {
            Role::Learner => ("learner", "-".to_string()),
            Role::Actor(i) => ("actor", i.to_string()),
        };
        format!(
            "role={role} index={index} actors={} nats_url={} prefix={} checkpoint_dir={} source={}",
            self.actors,
            self.nats_url,
            self.prefix,
            self.checkpoint_dir
                .as_ref()
                .map_or("-".into(), |p| p.display().to_string()),
            self.source
        )
    }
}
