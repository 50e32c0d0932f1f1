//! The experiment runner (`xlaclient::runner`): configuration overrides, errors for
//! unknown keys and wrong types, the metrics CSV, checkpoints and `--resume`, the
//! plot, and the refusal of another configuration on resume.
#![cfg(feature = "runner")]

use std::path::Path;

use serde::{Deserialize, Serialize};
use xlaclient::rl::Error;
use xlaclient::runner::{Help, Runner, RunnerError};
use xlaclient::{Client, Shape, Tree};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(default)]
struct Net {
    hidden: i64,
    layers: i64,
}

impl Default for Net {
    fn default() -> Self {
        Net {
            hidden: 32,
            layers: 2,
        }
    }
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(default)]
struct Config {
    name: String,
    lr: f64,
    steps: u64,
    shared_params: bool,
    sizes: Vec<i64>,
    clip: Option<f64>,
    net: Net,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            name: "run".into(),
            lr: 1e-3,
            steps: 10,
            shared_params: false,
            sizes: vec![4, 4],
            clip: None,
            net: Net::default(),
        }
    }
}

#[derive(Tree, Debug)]
struct Params<T> {
    w: T,
    b: T,
}

fn open(dir: &Path, extra: &[&str]) -> xlaclient::rl::Result<Runner<Config>> {
    let mut args = vec![
        "prog".to_string(),
        "--output-dir".into(),
        dir.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Runner::<Config>::from_args_iter(args)
}

fn runner_error(e: Error) -> RunnerError {
    match e {
        Error::Runner(r) => *r,
        other => panic!("expected a runner error, got {other}"),
    }
}

#[test]
fn file_and_set_overrides_nested_and_typed() -> xlaclient::rl::Result<()> {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exp.toml");
    std::fs::write(&file, "lr = 0.5\nsteps = 3\n[net]\nhidden = 8\n").unwrap();
    let dir = tmp.path().join("out");
    let run = open(
        &dir,
        &[
            "--config",
            file.to_str().unwrap(),
            "--set",
            "net.layers=3",
            "--set",
            "lr=1e-3",
            "--set",
            "name=\"quoted\"",
            "--set",
            "sizes=[1, 2, 3]",
            "--set",
            "shared_params=true",
            "--set",
            "steps=7",
            "--set",
            "clip=0.5",
        ],
    )?;
    let want = Config {
        name: "quoted".into(),
        lr: 1e-3,
        steps: 7,
        shared_params: true,
        sizes: vec![1, 2, 3],
        clip: Some(0.5),
        net: Net {
            hidden: 8,
            layers: 3,
        },
    };
    assert_eq!(run.config, want);
    // The operative configuration is written, and reads back as the same struct.
    let text = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    assert_eq!(toml::from_str::<Config>(&text).unwrap(), want);
    drop(run);

    // An integer where the default is a float; a bare word (the shell ate the
    // quotes) where the default is a string; later --set wins.
    let run = open(
        &tmp.path().join("out2"),
        &["--set", "lr=2", "--set", "name=plain", "--set", "lr=4"],
    )?;
    assert_eq!(run.config.lr, 4.0);
    assert_eq!(run.config.name, "plain");
    assert_eq!(run.config.net, Net::default());
    assert_eq!(run.config.clip, None);
    Ok(())
}

#[test]
fn unknown_keys_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    match runner_error(open(&tmp.path().join("a"), &["--set", "nett.hidden=3"]).unwrap_err()) {
        RunnerError::UnknownKey { key, known } => {
            assert_eq!(key, "nett.hidden");
            assert!(known.contains(&"net.hidden".to_string()), "{known:?}");
        }
        other => panic!("{other}"),
    }
    let file = tmp.path().join("bad.toml");
    std::fs::write(&file, "[net]\nhiden = 1\n").unwrap();
    let e = open(&tmp.path().join("b"), &["--config", file.to_str().unwrap()]).unwrap_err();
    assert!(
        e.to_string().contains("unknown config key `net.hiden`"),
        "{e}"
    );
    // A key below a key that is not a table.
    let e = runner_error(open(&tmp.path().join("a"), &["--set", "lr.x=1"]).unwrap_err());
    assert!(
        matches!(&e, RunnerError::UnknownKey { key, .. } if key == "lr.x"),
        "{e}"
    );
    // A value for an optional key (absent from the defaults) must have its type.
    let e = runner_error(open(&tmp.path().join("a"), &["--set", "clip=\"x\""]).unwrap_err());
    assert!(matches!(e, RunnerError::Invalid { .. }), "{e}");
    assert!(e.to_string().contains("config key `clip`"), "{e}");
    // Nothing was written for a refused configuration.
    assert!(!tmp.path().join("b").exists());
}

#[test]
fn wrong_types_name_key_and_type() {
    let tmp = tempfile::tempdir().unwrap();
    for (set, key, expected) in [
        ("steps=\"many\"", "steps", "integer"),
        ("shared_params=3", "shared_params", "boolean"),
        ("net.hidden=1.5", "net.hidden", "integer"),
        ("sizes=4", "sizes", "array"),
        ("net=3", "net", "table"),
    ] {
        match runner_error(open(&tmp.path().join("a"), &["--set", set]).unwrap_err()) {
            RunnerError::WrongType {
                key: k,
                expected: e,
                ..
            } => {
                assert_eq!((k.as_str(), e), (key, expected), "--set {set}");
            }
            other => panic!("--set {set}: {other}"),
        }
    }
    let file = tmp.path().join("bad.toml");
    std::fs::write(&file, "lr = \"fast\"\n").unwrap();
    let e = open(&tmp.path().join("b"), &["--config", file.to_str().unwrap()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "config key `lr` takes a float; got \"fast\" (string)"
    );
    // Malformed --set and config files.
    let e = runner_error(open(&tmp.path().join("c"), &["--set", "lr"]).unwrap_err());
    assert!(matches!(e, RunnerError::SetSyntax { .. }), "{e}");
    std::fs::write(&file, "lr = = 1\n").unwrap();
    let e = runner_error(
        open(&tmp.path().join("c"), &["--config", file.to_str().unwrap()]).unwrap_err(),
    );
    assert!(matches!(e, RunnerError::ConfigFile { .. }), "{e}");
    let e = runner_error(open(&tmp.path().join("c"), &["--bogus"]).unwrap_err());
    assert!(matches!(e, RunnerError::Usage { .. }), "{e}");
    // --resume needs --output-dir, and excludes --overwrite.
    let e = runner_error(Runner::<Config>::from_args_iter(["prog", "--resume"]).unwrap_err());
    assert!(
        matches!(&e, RunnerError::Usage { message } if message.contains("--output-dir")),
        "{e}"
    );
    let e = runner_error(open(&tmp.path().join("c"), &["--resume", "--overwrite"]).unwrap_err());
    assert!(matches!(e, RunnerError::Usage { .. }), "{e}");
}

#[test]
fn help_lists_options_and_config_defaults() {
    let e = runner_error(Runner::<Config>::from_args_iter(["prog", "--help"]).unwrap_err());
    let RunnerError::Help { text } = e else {
        panic!("{e}")
    };
    for want in [
        "--config <FILE>",
        "--set <KEY=VALUE>",
        "--output-dir <DIR>",
        "--resume",
        "lr = 0.001",
        "steps = 10",
        "[net]",
        "hidden = 32",
    ] {
        assert!(text.contains(want), "help lacks {want:?}:\n{text}");
    }
}

#[test]
fn a_programs_help_says_what_it_does_and_documents_its_keys() {
    let help = Help {
        about: "Fits a line.".to_string(),
        keys: vec![("lr", "the learning rate"), ("steps", "updates to run")],
    };
    let e = runner_error(
        Runner::<Config>::from_args_iter_with_help(["prog", "--help"], &help).unwrap_err(),
    );
    let RunnerError::Help { text } = e else {
        panic!("{e}")
    };
    assert!(text.starts_with("Fits a line."), "{text}");
    let line = |key: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{key} =")))
            .unwrap_or_else(|| panic!("no line for {key}:\n{text}"))
            .to_string()
    };
    assert!(line("lr").contains("lr = 0.001") && line("lr").ends_with("# the learning rate"));
    assert!(line("steps").ends_with("# updates to run"));
    // A key without a sentence keeps its plain line.
    assert!(!line("hidden").contains('#'), "{}", line("hidden"));
}

fn params(client: &Client, step: u64) -> xlaclient::rl::Result<Params<xlaclient::Buffer>> {
    Ok(Params {
        w: client.buffer_from_host(&[step as f32, 2.0 * step as f32, -1.0], &[3])?,
        b: client.scalar(0.5f32 + step as f32)?,
    })
}

fn spec() -> Params<Shape> {
    Params {
        w: Shape::of::<f32>(&[3]),
        b: Shape::of::<f32>(&[]),
    }
}

fn read_csv(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

/// A run logs steps 1..=5 and checkpoints at step 3; resuming starts after step 3
/// with the saved parameters, keeps rows 1..=3, drops 4 and 5 (work done again) and
/// appends the new rows.
#[test]
fn csv_checkpoint_resume_and_plot() -> xlaclient::rl::Result<()> {
    let client = Client::cpu()?;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut run = open(&dir, &["--set", "lr=0.25"])?;
    assert_eq!(run.start_step(), 0);
    assert!(run.restore(&client, &spec())?.is_none());
    for step in 1..=5u64 {
        run.log(
            step,
            &[("loss", 1.0 / step as f64), ("reward", step as f64)],
        )?;
        if step == 3 {
            let path = run.checkpoint(step, &params(&client, step)?)?;
            assert!(path.ends_with("checkpoints/step-0000000003.safetensors"));
        }
    }
    // Metrics must keep the first row's columns and increasing steps.
    let e = run.log(6, &[("reward", 1.0)]).unwrap_err();
    assert!(e.to_string().contains("fixed by the first row"), "{e}");
    let e = run.log(5, &[("loss", 1.0), ("reward", 1.0)]).unwrap_err();
    assert!(e.to_string().contains("steps must increase"), "{e}");
    run.finish()?;

    let rows = read_csv(&dir.join("metrics.csv"));
    assert_eq!(rows[0], ["step", "loss", "reward"]);
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[2], ["2", "0.5", "2"]);

    let svg = std::fs::read_to_string(dir.join("curves.svg")).unwrap();
    assert!(
        svg.trim_start().starts_with("<svg"),
        "{}",
        &svg[..80.min(svg.len())]
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    // One titled panel per metric: a <text> element holding the name.
    let texts: Vec<&str> = svg
        .split("</text>")
        .filter_map(|piece| piece.rsplit_once('>').map(|(_, t)| t.trim()))
        .collect();
    assert!(
        texts.contains(&"loss") && texts.contains(&"reward"),
        "{texts:?}"
    );
    // Each metric's curve is a polyline through its 5 points (axes and ticks are
    // 2-point polylines).
    let curves = svg
        .split("<polyline")
        .skip(1)
        .filter(|el| {
            let points = el
                .split("points=\"")
                .nth(1)
                .and_then(|p| p.split('"').next());
            points.is_some_and(|p| p.split_whitespace().count() == 5)
        })
        .count();
    assert_eq!(curves, 2, "one 5-point curve per metric");

    // A fresh run into the same directory is refused.
    let e = runner_error(open(&dir, &[]).unwrap_err());
    assert!(matches!(e, RunnerError::RunExists { .. }), "{e}");

    // Resume: the saved configuration (lr 0.25), step 3, the saved parameters.
    let mut run = open(&dir, &["--resume"])?;
    assert_eq!(run.config.lr, 0.25);
    assert_eq!(run.start_step(), 3);
    assert!(run.is_resumed());
    let p = run.restore(&client, &spec())?.expect("a checkpoint");
    assert_eq!(p.w.to_vec::<f32>()?, [3.0, 6.0, -1.0]);
    assert_eq!(p.b.to_scalar::<f32>()?, 3.5);
    assert_eq!(run.metrics().1.len(), 3);
    for step in run.start_step() + 1..=6 {
        run.log(step, &[("loss", 100.0 + step as f64), ("reward", 0.0)])?;
    }
    run.checkpoint(6, &params(&client, 6)?)?;
    run.finish()?;
    let rows = read_csv(&dir.join("metrics.csv"));
    let steps: Vec<&str> = rows[1..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(steps, ["1", "2", "3", "4", "5", "6"]);
    assert_eq!(rows[3], ["3", &(1.0f64 / 3.0).to_string(), "3"]);
    assert_eq!(rows[4], ["4", "104", "0"]);

    // Resuming again takes the latest checkpoint (step 6), with the same --set;
    // keeping 2 checkpoints deletes the older ones at the next save.
    let mut run = open(&dir, &["--resume", "--set", "lr=0.25"])?;
    run.keep_checkpoints(2);
    run.checkpoint(7, &params(&client, 7)?)?;
    let mut kept: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        ["step-0000000006.safetensors", "step-0000000007.safetensors"]
    );
    drop(run);
    let run = open(&dir, &["--resume", "--set", "lr=0.25"])?;
    assert_eq!(run.start_step(), 7);
    let p = run.restore(&client, &spec())?.expect("a checkpoint");
    assert_eq!(p.b.to_scalar::<f32>()?, 7.5);
    Ok(())
}

#[test]
fn resume_refuses_another_config_and_bad_checkpoints() -> xlaclient::rl::Result<()> {
    let client = Client::cpu()?;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut run = open(&dir, &["--set", "net.hidden=16"])?;
    // Nothing to resume before the first checkpoint.
    let e = runner_error(open(&dir, &["--resume"]).unwrap_err());
    assert!(matches!(e, RunnerError::NothingToResume { .. }), "{e}");
    run.log(1, &[("loss", 1.0)])?;
    run.checkpoint(1, &params(&client, 1)?)?;
    run.finish()?;

    match runner_error(
        open(
            &dir,
            &["--resume", "--set", "lr=0.5", "--set", "net.hidden=16"],
        )
        .unwrap_err(),
    ) {
        RunnerError::ConfigMismatch { differences } => {
            assert_eq!(
                differences,
                [("lr".to_string(), "0.001".to_string(), "0.5".to_string())]
            );
        }
        other => panic!("{other}"),
    }
    // Leaving out a key that was set also differs (the given one is the default).
    let e = open(&dir, &["--resume", "--set", "lr=0.001"]).unwrap_err();
    assert!(
        e.to_string().contains("`net.hidden` saved 16, given 32"),
        "{e}"
    );

    // A corrupt checkpoint is a checkpoint error, not a panic.
    let ck = dir.join("checkpoints/step-0000000001.safetensors");
    let bytes = std::fs::read(&ck).unwrap();
    std::fs::write(&ck, &bytes[..bytes.len() / 2]).unwrap();
    let e = open(&dir, &["--resume"]).unwrap_err();
    assert!(
        matches!(e, Error::Nn(xlaclient::nn::Error::Checkpoint { .. })),
        "{e}"
    );
    std::fs::write(&ck, b"not a checkpoint").unwrap();
    let e = open(&dir, &["--resume"]).unwrap_err();
    assert!(
        matches!(e, Error::Nn(xlaclient::nn::Error::Checkpoint { .. })),
        "{e}"
    );

    // A checkpoint whose tree differs from the spec is refused when restored.
    let mut run = open(&tmp.path().join("other"), &[])?;
    run.checkpoint(2, &params(&client, 2)?)?;
    drop(run);
    let run = open(&tmp.path().join("other"), &["--resume"])?;
    let wrong = Params {
        w: Shape::of::<f32>(&[4]),
        b: Shape::of::<f32>(&[]),
    };
    let e = run.restore(&client, &wrong).unwrap_err();
    assert!(
        matches!(e, Error::Nn(xlaclient::nn::Error::Checkpoint { .. })),
        "{e}"
    );
    Ok(())
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Default)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    Fast,
    Slow,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
struct Strict {
    mode: Mode,
    n: u32,
}

/// A struct with `deny_unknown_fields` and an enum: the unknown key is still named;
/// a value serde refuses (an enum variant, a negative `u32`) is `Invalid` with
/// serde's reason.
#[test]
fn strict_structs_and_enums() -> xlaclient::rl::Result<()> {
    let tmp = tempfile::tempdir().unwrap();
    let open = |dir: &str, set: &str| {
        let d = tmp.path().join(dir).display().to_string();
        Runner::<Strict>::from_args_iter(["prog", "--output-dir", &d, "--set", set])
    };
    assert_eq!(open("a", "mode=slow")?.config.mode, Mode::Slow);
    match runner_error(open("b", "extra=1").unwrap_err()) {
        RunnerError::UnknownKey { key, known } => {
            assert_eq!(key, "extra");
            assert_eq!(known, ["mode", "n"]);
        }
        other => panic!("{other}"),
    }
    let e = runner_error(open("c", "mode=medium").unwrap_err());
    assert!(
        matches!(e, RunnerError::Invalid { .. }) && e.to_string().contains("medium"),
        "{e}"
    );
    let e = runner_error(open("d", "n=-1").unwrap_err());
    assert!(
        matches!(e, RunnerError::Invalid { .. }) && e.to_string().contains("-1"),
        "{e}"
    );
    Ok(())
}
