//! An experiment runner: configuration from a TOML file and `--set key=value`
//! overrides, an output directory with the operative configuration, a metrics CSV, an
//! SVG learning curve and checkpoints, `--resume`, and progress while it runs.
//! Behind the cargo feature `runner` (on by default).
//!
//! The configuration is the user's own struct, `#[derive(Serialize, Deserialize)]`
//! with a [`Default`] that gives every key its default. The command line is
//!
//! ```text
//! PROGRAM [--config FILE] [--set KEY=VALUE]... [--output-dir DIR] [--resume] [--overwrite]
//! ```
//!
//! - The operative configuration is the defaults, then the file's keys, then each
//!   `--set` in order. A key may be dotted (`--set net.hidden=64`) to reach a nested
//!   table. A value is read as a TOML value (`--set lr=1e-3`, `--set name="x"`,
//!   `--set sizes=[64,64]`); where the key's default is a string, a value that is not
//!   TOML (the shell ate the quotes: `--set name=x`) is taken as that string. An
//!   integer is accepted where the default is a float.
//! - A key the struct does not have is [`RunnerError::UnknownKey`], naming it; a value
//!   of another type than the key's default is [`RunnerError::WrongType`], naming the
//!   key and the expected type. Both come back as [`Error::Runner`].
//! - `--help` lists the options and, after them, every config key with its default
//!   (the default configuration rendered as TOML).
//!
//! Into the output directory (default `runs/PROGRAM/UNIX_SECONDS`) go:
//!
//! - `config.toml`: the operative configuration;
//! - `metrics.csv`: one row per [`Runner::log`] call, a `step` column then the metrics
//!   of the first call, in that order (later calls must log the same names);
//! - `curves.svg`: one learning-curve panel per metric against the step, rewritten by
//!   every [`Runner::checkpoint`] and by [`Runner::finish`];
//! - `checkpoints/step-NNNNNNNNNN.safetensors`: the trees given to
//!   [`Runner::checkpoint`], written by [`crate::checkpoint`] with the step and the
//!   configuration as metadata.
//!
//! `--resume` continues the run in `--output-dir`: it reads the latest checkpoint
//! ([`Runner::start_step`] is its step, [`Runner::restore`] loads its tree), keeps the
//! metrics rows up to that step (rows logged after it are dropped, as that work is
//! done again) and appends to them. Without `--config` and `--set` the saved
//! configuration is used; with them, the result must equal the saved one, else
//! [`RunnerError::ConfigMismatch`] lists every key that differs. A directory that
//! already holds a run is refused without `--resume` (or `--overwrite`, which
//! deletes its metrics, plot and checkpoints first).
//!
//! Progress: when stderr is a terminal, an `indicatif` spinner (or bar, after
//! [`Runner::set_total`]) with the step, the rate and the last metrics; otherwise a
//! plain line on stderr at most every two seconds. That progress display (and
//! [`Runner::println`], [`Runner::finish`]'s closing line) is the runner's user
//! interface, printed whether or not a `tracing` subscriber is installed; the
//! runner also emits `tracing` events for each logged step (INFO, target
//! `xlaclient_rl::runner`, fields `step` and `metrics`), each checkpoint (a
//! `checkpoint` span with `step`, `path` and `elapsed_us`), a resume and the end
//! of the run.
//!
//! ```no_run
//! use serde::{Deserialize, Serialize};
//! use xlaclient_rl::runner::Runner;
//!
//! #[derive(Serialize, Deserialize)]
//! #[serde(default)]
//! struct Config {
//!     lr: f64,
//!     steps: u64,
//!     seed: u64,
//! }
//!
//! impl Default for Config {
//!     fn default() -> Self {
//!         Config { lr: 1e-3, steps: 100, seed: 0 }
//!     }
//! }
//!
//! let mut run = Runner::<Config>::from_args()?;
//! run.set_total(run.config.steps);
//! for step in run.start_step() + 1..=run.config.steps {
//!     let loss = 1.0 / step as f64;
//!     run.log(step, &[("loss", loss)])?;
//! }
//! run.finish()?;
//! # Ok::<(), xlaclient_rl::Error>(())
//! ```

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use serde::Serialize;
use serde::de::DeserializeOwned;
use toml::{Table, Value};

use crate::checkpoint::{self, Checkpoint, OnExtra};
use crate::error::{Error, Result};
use crate::pjrt::{Buffer, Client};
use crate::shape::Shape;
use crate::tree::Tree;

/// What went wrong in the runner; carried by [`Error::Runner`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RunnerError {
    /// `--help` was asked for: the text to print (the runner's
    /// [`Runner::from_args`] prints it and exits with status 0).
    Help {
        /// The help text.
        text: String,
    },
    /// The command line does not parse (clap's message, with the usage).
    Usage {
        /// The message.
        message: String,
    },
    /// The `--config` file cannot be read or is not TOML.
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A `--set` argument is not `KEY=VALUE` with a non-empty dotted key.
    SetSyntax {
        /// The argument as given.
        arg: String,
        /// What is wrong.
        reason: String,
    },
    /// A key the configuration does not have.
    UnknownKey {
        /// The dotted key.
        key: String,
        /// The keys the configuration has (dotted), sorted.
        known: Vec<String>,
    },
    /// A value of another type than the key's.
    WrongType {
        /// The dotted key.
        key: String,
        /// The type the key takes (`"float"`, `"integer"`, `"string"`, `"boolean"`,
        /// `"array"`, `"table"`, `"datetime"`).
        expected: &'static str,
        /// The value given, as TOML, and its type.
        found: String,
    },
    /// The configuration struct refused the merged values (a value out of an enum's
    /// set, a wrong element type inside an array, …): the deserializer's message.
    Invalid {
        /// The message.
        message: String,
    },
    /// `--resume` with a configuration other than the saved one.
    ConfigMismatch {
        /// Each key that differs: the key, the saved value, the given value (as TOML;
        /// `(absent)` when a side lacks it).
        differences: Vec<(String, String, String)>,
    },
    /// `--resume` but the output directory has no saved run or no checkpoint.
    NothingToResume {
        /// The output directory.
        dir: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// The output directory already holds a run and neither `--resume` nor
    /// `--overwrite` was given.
    RunExists {
        /// The output directory.
        dir: PathBuf,
    },
    /// Reading or writing a file of the run failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The I/O error's message.
        message: String,
    },
    /// The metrics file or a logged row is wrong: a corrupt CSV, other metric names
    /// than the first row's, a step not after the previous one.
    Metrics {
        /// The metrics file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Drawing the learning-curve plot failed.
    Plot {
        /// The plot file.
        path: PathBuf,
        /// The plotting library's message.
        message: String,
    },
}

impl std::error::Error for RunnerError {}

impl fmt::Display for RunnerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunnerError::Help { text } => f.write_str(text),
            RunnerError::Usage { message } => f.write_str(message.trim_end()),
            RunnerError::ConfigFile { path, reason } => {
                write!(f, "config file {}: {reason}", path.display())
            }
            RunnerError::SetSyntax { arg, reason } => {
                write!(f, "--set {arg:?}: {reason} (expected KEY=VALUE)")
            }
            RunnerError::UnknownKey { key, known } => {
                write!(f, "unknown config key `{key}`; the keys are: ")?;
                for (i, k) in known.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{k}`")?;
                }
                Ok(())
            }
            RunnerError::WrongType {
                key,
                expected,
                found,
            } => write!(f, "config key `{key}` takes a {expected}; got {found}"),
            RunnerError::Invalid { message } => {
                write!(f, "invalid configuration: {}", message.trim_end())
            }
            RunnerError::ConfigMismatch { differences } => {
                write!(
                    f,
                    "--resume: the configuration differs from the saved one in {} key(s):",
                    differences.len()
                )?;
                for (k, saved, given) in differences {
                    write!(f, " `{k}` saved {saved}, given {given};")?;
                }
                f.write_str(" resume without --config/--set to use the saved configuration")
            }
            RunnerError::NothingToResume { dir, reason } => {
                write!(
                    f,
                    "--resume: nothing to resume in {}: {reason}",
                    dir.display()
                )
            }
            RunnerError::RunExists { dir } => write!(
                f,
                "{} already holds a run (config.toml); pass --resume to continue it, \
                 --overwrite to replace it, or another --output-dir",
                dir.display()
            ),
            RunnerError::Io {
                path,
                action,
                message,
            } => write!(f, "{action} {} failed: {message}", path.display()),
            RunnerError::Metrics { path, reason } => {
                write!(f, "metrics file {}: {reason}", path.display())
            }
            RunnerError::Plot { path, message } => {
                write!(f, "plot {}: {message}", path.display())
            }
        }
    }
}

impl From<RunnerError> for Error {
    fn from(e: RunnerError) -> Self {
        Error::Runner(Box::new(e))
    }
}

fn io_err<'a>(path: &'a Path, action: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |e| {
        RunnerError::Io {
            path: path.to_path_buf(),
            action,
            message: e.to_string(),
        }
        .into()
    }
}

/// The runner's command-line options.
#[derive(Parser, Debug)]
struct Cli {
    /// A TOML file of config keys (see the keys below); keys it leaves out keep their
    /// defaults.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Sets one config key, after the file: a dotted key for nested tables, the value
    /// read as TOML (`--set lr=1e-3`, `--set net.hidden=64`, `--set name="x"`).
    /// Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Where the run writes config.toml, metrics.csv, curves.svg and checkpoints/
    /// [default: runs/PROGRAM/UNIX_SECONDS].
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Continue the run in --output-dir from its latest checkpoint (with the saved
    /// configuration; --config/--set must agree with it).
    #[arg(long, requires = "output_dir")]
    resume: bool,
    /// Replace a run already in --output-dir (its metrics, plot and checkpoints are
    /// deleted).
    #[arg(long, conflicts_with = "resume")]
    overwrite: bool,
}

const CONFIG_FILE: &str = "config.toml";
const METRICS_FILE: &str = "metrics.csv";
const PLOT_FILE: &str = "curves.svg";
const CHECKPOINT_DIR: &str = "checkpoints";

/// A TOML value's type, as the errors name it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Integer(_) => "integer",
        Value::Float(_) => "float",
        Value::Boolean(_) => "boolean",
        Value::Datetime(_) => "datetime",
        Value::Array(_) => "array",
        Value::Table(_) => "table",
    }
}

/// A value as TOML text (inline).
fn show(v: &Value) -> String {
    v.to_string()
}

/// All dotted leaf keys of a table (a nested table's keys, not the table's own).
fn leaf_keys(t: &Table, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in t {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Table(inner) => leaf_keys(inner, &key, out),
            _ => out.push(key),
        }
    }
}

fn lookup<'a>(t: &'a Table, key: &str) -> Option<&'a Value> {
    let mut parts = key.split('.');
    let mut cur = t.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_table()?.get(p)?;
    }
    Some(cur)
}

/// Removes the dotted key from a table (nothing if absent).
fn remove(t: &mut Table, key: &str) {
    match key.split_once('.') {
        None => {
            t.remove(key);
        }
        Some((head, rest)) => {
            if let Some(Value::Table(inner)) = t.get_mut(head) {
                remove(inner, rest);
            }
        }
    }
}

/// Puts a value at the dotted key, creating tables on the way (replacing a value
/// that is not one).
fn insert(t: &mut Table, key: &str, value: Value) {
    match key.split_once('.') {
        None => {
            t.insert(key.to_string(), value);
        }
        Some((head, rest)) => {
            let entry = t
                .entry(head.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            if !entry.is_table() {
                *entry = Value::Table(Table::new());
            }
            if let Value::Table(inner) = entry {
                insert(inner, rest, value);
            }
        }
    }
}

/// The configuration being assembled: the defaults' table (the type reference), the
/// merged values, and the keys given that the defaults do not have.
struct Merge {
    defaults: Table,
    merged: Table,
    extra: Vec<String>,
}

impl Merge {
    /// Puts `value` at the dotted `path`, checked against the default's type.
    /// `raw` is the `--set` text, taken as a string where the default is one and the
    /// text is not TOML of another type.
    fn set(&mut self, path: &[&str], value: Value, raw: Option<&str>) -> Result<()> {
        let key = path.join(".");
        let default = {
            let mut cur: Option<&Value> = None;
            let mut table = Some(&self.defaults);
            for p in path {
                cur = table.and_then(|t| t.get(*p));
                table = cur.and_then(Value::as_table);
            }
            cur.cloned()
        };
        let value = match (&default, value) {
            (Some(Value::Table(_)), Value::Table(t)) => {
                // Merge a table key by key, so that its other keys keep their values.
                for (k, v) in t {
                    let mut sub: Vec<&str> = path.to_vec();
                    sub.push(&k);
                    self.set(&sub, v, None)?;
                }
                return Ok(());
            }
            (Some(Value::Float(_)), Value::Integer(i)) => Value::Float(i as f64),
            (Some(Value::String(_)), v) if !v.is_str() && raw.is_some() => {
                Value::String(raw.unwrap_or_default().to_string())
            }
            (Some(d), v) if std::mem::discriminant(d) != std::mem::discriminant(&v) => {
                return Err(RunnerError::WrongType {
                    key,
                    expected: type_name(d),
                    found: format!("{} ({})", show(&v), type_name(&v)),
                }
                .into());
            }
            (None, v) => {
                self.extra.push(key.clone());
                v
            }
            (Some(_), v) => v,
        };
        // Walk to the parent table, creating tables the defaults lack. (Every
        // caller gives a key of one part or more.)
        let Some((last, parents)) = path.split_last() else {
            return Ok(());
        };
        let mut table = &mut self.merged;
        for p in parents {
            let entry = table
                .entry(p.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            table = match entry {
                Value::Table(t) => t,
                _ => {
                    // A key below a key that is not a table: no such key.
                    let mut known = Vec::new();
                    leaf_keys(&self.defaults, "", &mut known);
                    known.sort();
                    return Err(RunnerError::UnknownKey {
                        key: path.join("."),
                        known,
                    }
                    .into());
                }
            };
        }
        table.insert(last.to_string(), value);
        Ok(())
    }
}

/// Parses one `--set KEY=VALUE`.
fn parse_set(arg: &str) -> Result<(Vec<String>, Value, String)> {
    let syntax = |reason: &str| -> Error {
        RunnerError::SetSyntax {
            arg: arg.to_string(),
            reason: reason.to_string(),
        }
        .into()
    };
    let (key, raw) = arg.split_once('=').ok_or_else(|| syntax("no `=`"))?;
    let key = key.trim();
    let path: Vec<String> = key.split('.').map(|s| s.trim().to_string()).collect();
    if path.iter().any(String::is_empty) {
        return Err(syntax("empty key or key part"));
    }
    let raw = raw.trim();
    let parsed = format!("v = {raw}")
        .parse::<Table>()
        .ok()
        .filter(|t| t.len() == 1)
        .and_then(|mut t| t.remove("v"));
    let value = parsed.unwrap_or_else(|| Value::String(raw.to_string()));
    Ok((path, value, raw.to_string()))
}

/// The configuration `C`'s defaults as a TOML table.
fn defaults_table<C: Serialize + Default>() -> Result<Table> {
    to_table(&C::default())
}

fn to_table<C: Serialize>(c: &C) -> Result<Table> {
    match Value::try_from(c) {
        Ok(Value::Table(t)) => Ok(t),
        Ok(other) => Err(RunnerError::Invalid {
            message: format!(
                "the config type serializes to a TOML {}, not a table",
                type_name(&other)
            ),
        }
        .into()),
        Err(e) => Err(RunnerError::Invalid {
            message: format!("the config type does not serialize to TOML: {e}"),
        }
        .into()),
    }
}

/// Assembles `C` from a base table, an optional file and `--set`s, with the checks of
/// the module docs. Returns the struct and its table (as the struct serializes it).
fn assemble<C: Serialize + DeserializeOwned + Default>(
    base: Option<Table>,
    file: Option<&Path>,
    sets: &[String],
) -> Result<(C, Table)> {
    let defaults = defaults_table::<C>()?;
    let mut m = Merge {
        merged: defaults.clone(),
        defaults,
        extra: Vec::new(),
    };
    for (k, v) in base.unwrap_or_default() {
        m.set(&[k.as_str()], v, None)?;
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|e| RunnerError::ConfigFile {
            path: path.to_path_buf(),
            reason: format!("cannot read it: {e}"),
        })?;
        let table = text.parse::<Table>().map_err(|e| RunnerError::ConfigFile {
            path: path.to_path_buf(),
            reason: format!("not valid TOML: {}", e.to_string().trim_end()),
        })?;
        for (k, v) in table {
            m.set(&[k.as_str()], v, None)?;
        }
    }
    for arg in sets {
        let (path, value, raw) = parse_set(arg)?;
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        m.set(&parts, value, Some(&raw))?;
    }
    let known = || {
        let mut k = Vec::new();
        leaf_keys(&m.defaults, "", &mut k);
        k.sort();
        k
    };
    let deserialize = |t: &Table| -> std::result::Result<C, toml::de::Error> {
        Value::Table(t.clone()).try_into()
    };
    let unknown = |key: &str| -> Error {
        RunnerError::UnknownKey {
            key: key.to_string(),
            known: known(),
        }
        .into()
    };
    let config: C = match deserialize(&m.merged) {
        Ok(c) => c,
        Err(e) if m.extra.is_empty() => {
            return Err(RunnerError::Invalid {
                message: e.to_string(),
            }
            .into());
        }
        Err(e) => {
            let message = e.to_string();
            // Find which key the defaults lack is at fault: each alone on top of the
            // others' absence.
            let mut base = m.merged.clone();
            for key in &m.extra {
                remove(&mut base, key);
            }
            if deserialize(&base).is_err() {
                return Err(RunnerError::Invalid { message }.into());
            }
            for key in &m.extra {
                let mut trial = base.clone();
                if let Some(v) = lookup(&m.merged, key) {
                    insert(&mut trial, key, v.clone());
                }
                if let Err(e) = deserialize(&trial) {
                    let message = e.to_string();
                    // A struct with `deny_unknown_fields` names the field.
                    if message.contains("unknown field") {
                        return Err(unknown(key));
                    }
                    return Err(RunnerError::Invalid {
                        message: format!("config key `{key}`: {message}"),
                    }
                    .into());
                }
            }
            return Err(RunnerError::Invalid { message }.into());
        }
    };
    let table = to_table(&config)?;
    // A key the struct ignored does not come back when it is serialized again.
    if let Some(key) = m.extra.iter().find(|k| lookup(&table, k).is_none()) {
        return Err(unknown(key));
    }
    Ok((config, table))
}

/// The keys whose values differ between two configuration tables.
fn differences(saved: &Table, given: &Table) -> Vec<(String, String, String)> {
    let mut keys = Vec::new();
    leaf_keys(saved, "", &mut keys);
    leaf_keys(given, "", &mut keys);
    let keys: BTreeSet<String> = keys.into_iter().collect();
    let shown = |v: Option<&Value>| v.map_or_else(|| "(absent)".to_string(), show);
    keys.into_iter()
        .filter_map(|k| {
            let (a, b) = (lookup(saved, &k), lookup(given, &k));
            (a != b).then(|| (k, shown(a), shown(b)))
        })
        .collect()
}

/// The rows of the metrics file and the writer appending to it.
struct Metrics {
    path: PathBuf,
    /// Metric names (without `step`); empty until the first row or a resumed file.
    columns: Vec<String>,
    /// Every row so far (`step`, then the metrics), for the plot.
    rows: Vec<(u64, Vec<f64>)>,
    writer: Option<csv::Writer<std::fs::File>>,
}

impl Metrics {
    fn corrupt(&self, reason: impl Into<String>) -> Error {
        RunnerError::Metrics {
            path: self.path.clone(),
            reason: reason.into(),
        }
        .into()
    }

    /// Reads the rows of an existing file up to `last_step`.
    fn read(path: PathBuf, last_step: u64) -> Result<Metrics> {
        let mut m = Metrics {
            path,
            columns: Vec::new(),
            rows: Vec::new(),
            writer: None,
        };
        if !m.path.exists() {
            return Ok(m);
        }
        let mut reader = csv::Reader::from_path(&m.path).map_err(|e| m.corrupt(e.to_string()))?;
        let header = reader
            .headers()
            .map_err(|e| m.corrupt(e.to_string()))?
            .clone();
        if header.is_empty() {
            // A run that logged nothing before it stopped.
            m.rewrite()?;
            return Ok(m);
        }
        if header.get(0) != Some("step") {
            return Err(m.corrupt("the first column is not `step`"));
        }
        m.columns = header.iter().skip(1).map(str::to_string).collect();
        for (i, rec) in reader.records().enumerate() {
            let rec = rec.map_err(|e| m.corrupt(e.to_string()))?;
            let bad = |what: &str| format!("row {}: {what}", i + 1);
            let step: u64 = rec
                .get(0)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| m.corrupt(bad("the step is not an integer")))?;
            let vals = rec
                .iter()
                .skip(1)
                .map(|s| s.parse::<f64>())
                .collect::<std::result::Result<Vec<f64>, _>>()
                .map_err(|_| m.corrupt(bad("a metric is not a number")))?;
            if vals.len() != m.columns.len() {
                return Err(m.corrupt(bad("another number of columns than the header")));
            }
            if step <= last_step {
                m.rows.push((step, vals));
            }
        }
        // Rewrite the file without the rows after the checkpoint.
        m.rewrite()?;
        Ok(m)
    }

    fn rewrite(&mut self) -> Result<()> {
        let mut w = csv::Writer::from_path(&self.path).map_err(|e| self.corrupt(e.to_string()))?;
        if !self.columns.is_empty() {
            let mut header = vec!["step".to_string()];
            header.extend(self.columns.iter().cloned());
            w.write_record(&header)
                .map_err(|e| self.corrupt(e.to_string()))?;
            for (step, vals) in &self.rows {
                let mut rec = vec![step.to_string()];
                rec.extend(vals.iter().map(|v| v.to_string()));
                w.write_record(&rec)
                    .map_err(|e| self.corrupt(e.to_string()))?;
            }
        }
        w.flush().map_err(io_err(&self.path, "writing"))?;
        self.writer = Some(w);
        Ok(())
    }

    fn append(&mut self, step: u64, metrics: &[(&str, f64)]) -> Result<()> {
        if self.columns.is_empty() && self.rows.is_empty() {
            if metrics.is_empty() {
                return Err(self.corrupt("the first row logs no metric"));
            }
            let mut names = BTreeSet::new();
            for (n, _) in metrics {
                if *n == "step" || !names.insert(*n) {
                    return Err(self.corrupt(format!("metric name `{n}` is `step` or given twice")));
                }
            }
            self.columns = metrics.iter().map(|(n, _)| n.to_string()).collect();
            self.writer = None;
            self.rewrite()?;
        }
        let names: Vec<&str> = metrics.iter().map(|(n, _)| *n).collect();
        if names != self.columns.iter().map(String::as_str).collect::<Vec<_>>() {
            return Err(self.corrupt(format!(
                "step {step} logs {names:?}; the file's columns are {:?} (fixed by the first row)",
                self.columns
            )));
        }
        if let Some((last, _)) = self.rows.last() {
            if step <= *last {
                return Err(self.corrupt(format!(
                    "step {step} logged after step {last}; steps must increase"
                )));
            }
        }
        let vals: Vec<f64> = metrics.iter().map(|(_, v)| *v).collect();
        let mut rec = vec![step.to_string()];
        rec.extend(vals.iter().map(|v| v.to_string()));
        let path = self.path.clone();
        let w = self.writer.as_mut().ok_or_else(|| RunnerError::Metrics {
            path: path.clone(),
            reason: "the file is not open".into(),
        })?;
        w.write_record(&rec).map_err(|e| RunnerError::Metrics {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        w.flush().map_err(io_err(&path, "writing"))?;
        self.rows.push((step, vals));
        Ok(())
    }
}

/// Draws one panel per metric against the step into an SVG file.
fn plot(path: &Path, columns: &[String], rows: &[(u64, Vec<f64>)]) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn fmt::Display| -> Error {
        RunnerError::Plot {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
        .into()
    };
    if columns.is_empty() || rows.is_empty() {
        return Ok(());
    }
    let height = u32::try_from(columns.len()).map_or(u32::MAX, |n| n.saturating_mul(260));
    let root = SVGBackend::new(path, (720, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let panels = root.split_evenly((columns.len(), 1));
    let (x0, x1) = (rows[0].0 as f64, rows[rows.len() - 1].0 as f64);
    let (x0, x1) = if x1 > x0 {
        (x0, x1)
    } else {
        (x0 - 1.0, x0 + 1.0)
    };
    for (c, (name, panel)) in columns.iter().zip(&panels).enumerate() {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .map(|(s, v)| (*s as f64, v[c]))
            .filter(|(_, y)| y.is_finite())
            .collect();
        let (mut lo, mut hi) = pts
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (_, y)| {
                (a.min(*y), b.max(*y))
            });
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        let pad = if hi > lo { 0.05 * (hi - lo) } else { 0.5 };
        let mut chart = ChartBuilder::on(panel)
            .caption(name, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, (lo - pad)..(hi + pad))
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("step")
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(LineSeries::new(pts, &BLUE))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Progress display: a bar on a terminal, periodic lines otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    started: Instant,
    first_step: u64,
    /// The first logged step and when it was logged: the rate is measured from
    /// there (the time before it includes compiling).
    anchor: Option<(u64, Instant)>,
    last_print: Option<Instant>,
    interval: Duration,
}

impl Progress {
    fn new(first_step: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            started: Instant::now(),
            first_step,
            anchor: None,
            last_print: None,
            interval: Duration::from_secs(2),
        }
    }

    fn set_total(&mut self, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
        }
    }

    fn update(&mut self, step: u64, metrics: &[(&str, f64)]) {
        let (from_step, from) = *self.anchor.get_or_insert((step, Instant::now()));
        let rate = if step > from_step {
            (step - from_step) as f64 / from.elapsed().as_secs_f64().max(1e-9)
        } else {
            step.saturating_sub(self.first_step) as f64
                / self.started.elapsed().as_secs_f64().max(1e-9)
        };
        let mut msg = format!("{rate:.1} steps/s");
        for (n, v) in metrics {
            msg.push_str(&format!(" {n}={v:.4}"));
        }
        match &self.bar {
            Some(bar) => {
                bar.set_position(step);
                bar.set_message(msg);
            }
            None => {
                let due = self.last_print.is_none_or(|t| t.elapsed() >= self.interval);
                if due {
                    eprintln!("[runner] step {step} {msg}");
                    self.last_print = Some(Instant::now());
                }
            }
        }
    }

    fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => println!("{line}"),
        }
    }
}

/// A program's own `--help` text for [`Runner::from_args_with_help`]: what it does,
/// and a sentence for each top-level config key (shown next to its default).
#[derive(Clone, Debug)]
pub struct Help {
    /// The first line of `--help`.
    pub about: String,
    /// `(key, sentence)` pairs.
    pub keys: Vec<(&'static str, &'static str)>,
}

impl Default for Help {
    fn default() -> Self {
        Help {
            about: "An experiment run by xlaclient's runner.".to_string(),
            keys: Vec::new(),
        }
    }
}

/// An experiment run: its configuration, output directory, metrics, checkpoints and
/// progress (see [the module docs](self)).
pub struct Runner<C> {
    /// The operative configuration.
    pub config: C,
    dir: PathBuf,
    start_step: u64,
    resumed: Option<Checkpoint>,
    metrics: Metrics,
    progress: Progress,
    config_text: String,
    keep: Option<usize>,
}

impl<C> fmt::Debug for Runner<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runner")
            .field("dir", &self.dir)
            .field("start_step", &self.start_step)
            .finish_non_exhaustive()
    }
}

impl<C: Serialize + DeserializeOwned + Default> Runner<C> {
    /// The help text: the options, then every config key with its default.
    pub fn help() -> String {
        Self::command("PROGRAM", &Help::default())
            .render_help()
            .to_string()
    }

    fn command(program: &str, help: &Help) -> clap::Command {
        let defaults = toml::to_string(&C::default())
            .unwrap_or_else(|e| format!("(the defaults do not serialize to TOML: {e})"));
        let mut text = String::from(
            "Config keys and their defaults (TOML; set with --config FILE or --set KEY=VALUE):\n\n",
        );
        let width = defaults.lines().map(str::len).max().unwrap_or(0);
        for line in defaults.lines() {
            text.push_str("    ");
            text.push_str(line);
            let key = line.split('=').next().unwrap_or("").trim();
            if let Some((_, doc)) = help.keys.iter().find(|(k, _)| *k == key) {
                text.push_str(&" ".repeat(width - line.len() + 2));
                text.push_str("# ");
                text.push_str(doc);
            }
            text.push('\n');
        }
        Cli::command()
            .name(program.to_string())
            .about(help.about.clone())
            .after_help(text)
    }

    /// Parses the process's command line and opens the run. `--help` prints the help
    /// and exits with status 0; every other error is returned.
    pub fn from_args() -> Result<Self> {
        Self::from_args_with_help(&Help::default())
    }

    /// [`from_args`](Runner::from_args) with the program's own `--help` text: a
    /// line saying what it does and a sentence per config key (shown next to the
    /// key's default).
    pub fn from_args_with_help(help: &Help) -> Result<Self> {
        match Self::from_args_iter_with_help(std::env::args_os(), help) {
            Err(Error::Runner(e)) if matches!(*e, RunnerError::Help { .. }) => {
                print!("{e}");
                std::process::exit(0)
            }
            other => other,
        }
    }

    /// Parses the given command line (the first item is the program name) and opens
    /// the run. `--help` gives [`RunnerError::Help`] with the text.
    pub fn from_args_iter<I, T>(args: I) -> Result<Self>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Self::from_args_iter_with_help(args, &Help::default())
    }

    /// [`from_args_iter`](Runner::from_args_iter) with the program's own help text.
    pub fn from_args_iter_with_help<I, T>(args: I, help: &Help) -> Result<Self>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let program = args
            .first()
            .and_then(|a| {
                Path::new(a)
                    .file_stem()
                    .map(|s| s.to_string_lossy().to_string())
            })
            .unwrap_or_else(|| "run".to_string());
        let matches = Self::command(&program, help)
            .try_get_matches_from(&args)
            .map_err(|e| clap_error(&e))?;
        let cli = Cli::from_arg_matches(&matches).map_err(|e| clap_error(&e))?;
        let dir = cli.output_dir.clone().unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            PathBuf::from("runs").join(&program).join(secs.to_string())
        });
        Self::open(cli, dir)
    }

    fn open(cli: Cli, dir: PathBuf) -> Result<Self> {
        let config_path = dir.join(CONFIG_FILE);
        if cli.resume {
            let nothing = |reason: String| -> Error {
                RunnerError::NothingToResume {
                    dir: dir.clone(),
                    reason,
                }
                .into()
            };
            let saved_text = std::fs::read_to_string(&config_path)
                .map_err(|e| nothing(format!("cannot read {CONFIG_FILE}: {e}")))?;
            let saved_table = saved_text
                .parse::<Table>()
                .map_err(|e| nothing(format!("{CONFIG_FILE} is not valid TOML: {e}")))?;
            let (saved, saved_table): (C, Table) = assemble(Some(saved_table), None, &[])?;
            let config = if cli.config.is_some() || !cli.sets.is_empty() {
                let (given, given_table): (C, Table) =
                    assemble(None, cli.config.as_deref(), &cli.sets)?;
                let diffs = differences(&saved_table, &given_table);
                if !diffs.is_empty() {
                    return Err(RunnerError::ConfigMismatch { differences: diffs }.into());
                }
                given
            } else {
                saved
            };
            let (step, path) = latest_checkpoint(&dir)?
                .ok_or_else(|| nothing(format!("no checkpoint in {CHECKPOINT_DIR}/")))?;
            let ckpt = Checkpoint::read(&path)?;
            let meta_step = ckpt
                .metadata()
                .get("step")
                .and_then(|s| s.parse::<u64>().ok());
            if meta_step != Some(step) {
                return Err(xlaclient_nn::Error::Checkpoint {
                    path: path.clone(),
                    error: Box::new(checkpoint::CheckpointError::Format {
                        reason: format!(
                            "its metadata step is {meta_step:?}; the file name says {step}"
                        ),
                    }),
                }
                .into());
            }
            let metrics = Metrics::read(dir.join(METRICS_FILE), step)?;
            let config_text = toml::to_string(&config).unwrap_or_default();
            return Ok(Runner {
                config,
                progress: Progress::new(step),
                dir,
                start_step: step,
                resumed: Some(ckpt),
                metrics,
                config_text,
                keep: None,
            });
        }
        let (config, _table): (C, Table) = assemble(None, cli.config.as_deref(), &cli.sets)?;
        if config_path.exists() {
            if !cli.overwrite {
                return Err(RunnerError::RunExists { dir }.into());
            }
            for f in [METRICS_FILE, PLOT_FILE] {
                let p = dir.join(f);
                if p.exists() {
                    std::fs::remove_file(&p).map_err(io_err(&p, "removing"))?;
                }
            }
            let ck = dir.join(CHECKPOINT_DIR);
            if ck.exists() {
                std::fs::remove_dir_all(&ck).map_err(io_err(&ck, "removing"))?;
            }
        }
        std::fs::create_dir_all(&dir).map_err(io_err(&dir, "creating"))?;
        let config_text = toml::to_string(&config).map_err(|e| RunnerError::Invalid {
            message: format!("the config does not serialize to TOML: {e}"),
        })?;
        std::fs::write(&config_path, &config_text).map_err(io_err(&config_path, "writing"))?;
        let mut metrics = Metrics {
            path: dir.join(METRICS_FILE),
            columns: Vec::new(),
            rows: Vec::new(),
            writer: None,
        };
        metrics.rewrite()?;
        Ok(Runner {
            config,
            progress: Progress::new(0),
            dir,
            start_step: 0,
            resumed: None,
            metrics,
            config_text,
            keep: None,
        })
    }
}

fn clap_error(e: &clap::Error) -> Error {
    use clap::error::ErrorKind;
    let text = e.render().to_string();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => RunnerError::Help { text }.into(),
        _ => RunnerError::Usage {
            message: text.strip_prefix("error: ").unwrap_or(&text).to_string(),
        }
        .into(),
    }
}

/// The checkpoint with the highest step in `dir/checkpoints`.
fn latest_checkpoint(dir: &Path) -> Result<Option<(u64, PathBuf)>> {
    Ok(list_checkpoints(dir)?.pop())
}

/// The checkpoints in `dir/checkpoints` (files named `step-N.safetensors`), by step.
fn list_checkpoints(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let ck = dir.join(CHECKPOINT_DIR);
    if !ck.exists() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&ck).map_err(io_err(&ck, "listing"))? {
        let entry = entry.map_err(io_err(&ck, "listing"))?;
        let name = entry.file_name().to_string_lossy().to_string();
        let step = name
            .strip_prefix("step-")
            .and_then(|s| s.strip_suffix(".safetensors"))
            .and_then(|s| s.parse::<u64>().ok());
        if let Some(step) = step {
            found.push((step, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

impl<C> Runner<C> {
    /// The output directory.
    pub fn output_dir(&self) -> &Path {
        &self.dir
    }

    /// The step the run continues after: the resumed checkpoint's step, or 0.
    pub fn start_step(&self) -> u64 {
        self.start_step
    }

    /// Whether this run resumed from a checkpoint.
    pub fn is_resumed(&self) -> bool {
        self.resumed.is_some()
    }

    /// The operative configuration as TOML (what `config.toml` holds).
    pub fn config_toml(&self) -> &str {
        &self.config_text
    }

    /// The metrics logged so far (with a resumed file's rows up to the checkpoint):
    /// the metric names and the rows `(step, values)`.
    pub fn metrics(&self) -> (&[String], &[(u64, Vec<f64>)]) {
        (&self.metrics.columns, &self.metrics.rows)
    }

    /// The resumed checkpoint's tree on the device, shaped like `spec` (every leaf
    /// checked: names, element types, dims), or `None` on a fresh run.
    pub fn restore<T: Tree<Shape>>(
        &self,
        client: &Client,
        spec: &T,
    ) -> Result<Option<T::With<Buffer>>> {
        if self.resumed.is_some() {
            tracing::info!(step = self.start_step(), "restoring the resumed checkpoint");
        }
        self.resumed
            .as_ref()
            .map(|c| c.buffers(client, spec, OnExtra::Error))
            .transpose()
            .map_err(Error::from)
    }

    /// Sets the last step, for a progress bar with a length.
    pub fn set_total(&mut self, last_step: u64) {
        self.progress.set_total(last_step);
    }

    /// Appends a row of metrics for `step` to `metrics.csv` and updates the progress.
    /// The first row fixes the columns; later rows must give the same names in the
    /// same order, and steps must increase.
    pub fn log(&mut self, step: u64, metrics: &[(&str, f64)]) -> Result<()> {
        self.metrics.append(step, metrics)?;
        tracing::info!(step, metrics = ?metrics, "runner step");
        self.progress.update(step, metrics);
        Ok(())
    }

    /// Prints a line (on stdout, or above the progress bar on a terminal).
    pub fn println(&self, line: &str) {
        self.progress.println(line);
    }

    /// Saves `tree` as the checkpoint of `step` (with the step and the configuration
    /// as metadata) and redraws the plot. Returns the file's path.
    pub fn checkpoint<T: Tree<Buffer>>(&mut self, step: u64, tree: &T) -> Result<PathBuf> {
        let span = tracing::info_span!(
            "checkpoint",
            step,
            path = tracing::field::Empty,
            elapsed_us = tracing::field::Empty
        );
        let _entered = span.enter();
        let start = std::time::Instant::now();
        let path = self.save_checkpoint(step, tree)?;
        let elapsed_us = start.elapsed().as_micros().min(u64::MAX as u128) as u64;
        span.record("path", tracing::field::display(path.display()));
        span.record("elapsed_us", elapsed_us);
        tracing::info!(step, path = %path.display(), elapsed_us, "checkpoint saved");
        Ok(path)
    }

    fn save_checkpoint<T: Tree<Buffer>>(&mut self, step: u64, tree: &T) -> Result<PathBuf> {
        let ck = self.dir.join(CHECKPOINT_DIR);
        std::fs::create_dir_all(&ck).map_err(io_err(&ck, "creating"))?;
        let path = ck.join(format!("step-{step:010}.safetensors"));
        let step_text = step.to_string();
        checkpoint::save_with_metadata(
            &path,
            tree,
            [("step", step_text.as_str()), ("config", &self.config_text)],
        )?;
        if let Some(keep) = self.keep {
            let all = list_checkpoints(&self.dir)?;
            for (_, old) in &all[..all.len().saturating_sub(keep)] {
                std::fs::remove_file(old).map_err(io_err(old, "removing"))?;
            }
        }
        self.plot()?;
        Ok(path)
    }

    /// Keeps only the `n` latest checkpoints (at least 1): each
    /// [`checkpoint`](Runner::checkpoint) then deletes older ones. All are kept by
    /// default.
    pub fn keep_checkpoints(&mut self, n: usize) {
        self.keep = Some(n.max(1));
    }

    /// Redraws `curves.svg` from the metrics so far (nothing before the first row).
    pub fn plot(&self) -> Result<()> {
        plot(
            &self.dir.join(PLOT_FILE),
            &self.metrics.columns,
            &self.metrics.rows,
        )
    }

    /// Ends the run: draws the plot, closes the progress bar and prints where the
    /// files are (on stderr).
    pub fn finish(self) -> Result<()> {
        self.plot()?;
        if let Some(bar) = &self.progress.bar {
            bar.finish();
        }
        tracing::info!(
            rows = self.metrics.rows.len(),
            dir = %self.dir.display(),
            "run finished"
        );
        eprintln!(
            "[runner] {} rows in {}, plot {}, checkpoints in {}",
            self.metrics.rows.len(),
            self.metrics.path.display(),
            self.dir.join(PLOT_FILE).display(),
            self.dir.join(CHECKPOINT_DIR).display()
        );
        Ok(())
    }
}
