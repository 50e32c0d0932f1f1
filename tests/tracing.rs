//! `tracing` spans and events of the runtime, captured by a small `Layer`: the
//! compile span carries the module's name and its time, and a program's upload,
//! execution and download appear in that order.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::{LookupSpan, Registry};
use xlaclient::{Builder, Client, ClientOptions, Shape};

/// What the layer saw, in order.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    /// A span opened: its name and fields.
    Open(String, Vec<(String, String)>),
    /// A span closed: its name, its fields (with those recorded later), and how
    /// long it was open by the layer's own clock.
    Close(String, Vec<(String, String)>, std::time::Duration),
    /// An event: its message, its other fields, and the spans it is inside.
    Event(String, Vec<(String, String)>, Vec<String>),
}

#[derive(Default)]
struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }
}

/// A span's fields and opening time, kept in the registry's extensions.
struct SpanData {
    fields: Vec<(String, String)>,
    opened: Instant,
}

/// Records every span and event of the `xlaclient*` crates into `seen`.
struct Capture {
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn ours(target: &str) -> bool {
    target.starts_with("xlaclient")
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        attrs.record(&mut f);
        let span = ctx.span(id).expect("a new span");
        if ours(attrs.metadata().target()) {
            self.seen
                .lock()
                .unwrap()
                .push(Seen::Open(span.name().to_string(), f.0.clone()));
        }
        span.extensions_mut().insert(SpanData {
            fields: f.0,
            opened: Instant::now(),
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        values.record(&mut f);
        if let Some(span) = ctx.span(id) {
            if let Some(d) = span.extensions_mut().get_mut::<SpanData>() {
                d.fields.extend(f.0);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !ours(event.metadata().target()) {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        let message =
            f.0.iter()
                .position(|(k, _)| k == "message")
                .map(|i| f.0.remove(i).1)
                .unwrap_or_default();
        let scope = ctx
            .event_scope(event)
            .map(|s| s.from_root().map(|sp| sp.name().to_string()).collect())
            .unwrap_or_default();
        self.seen
            .lock()
            .unwrap()
            .push(Seen::Event(message, f.0, scope));
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).expect("a closing span");
        if !ours(span.metadata().target()) {
            return;
        }
        let ext = span.extensions();
        let d = ext.get::<SpanData>().expect("span data");
        self.seen.lock().unwrap().push(Seen::Close(
            span.name().to_string(),
            d.fields.clone(),
            d.opened.elapsed(),
        ));
    }
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Runs `f` with the capturing layer as this thread's subscriber; returns what
/// it saw.
fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<Seen>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let subscriber = Registry::default().with(Capture { seen: seen.clone() });
    let r = tracing::subscriber::with_default(subscriber, f);
    let seen = seen.lock().unwrap().clone();
    (r, seen)
}

#[test]
fn compile_execute_and_transfers_are_traced_in_order() {
    let plugin = common::client().plugin().clone();
    let x_host: Vec<f32> = (0..64).map(|i| i as f32 - 20.0).collect();
    let (out, seen) = capture(|| {
        // A fresh client with no compile cache: the module is compiled here.
        let c = Client::new(
            &plugin,
            &ClientOptions::new()
                .cpu_device_count(2)
                .compile_cache(xlaclient::pjrt::cache::CompileCache::Off),
        )
        .unwrap();
        let b = Builder::new("traced_affine");
        let x = b.parameter(0, Shape::of::<f32>(&[64]), "x");
        let exe = c.compile(b.build(&(x * 2.0 + 1.0)).unwrap()).unwrap();
        let xb = c.buffer_from_host(&x_host, &[64]).unwrap();
        let out = exe.execute(&[&xb]).unwrap();
        let here = out[0].to_vec::<f32>().unwrap();
        let there = out[0]
            .copy_to_device(&c.addressable_devices()[1])
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let awaited = exe.execute_async(&[&xb]).unwrap().wait().unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(awaited, here);
        (here, there)
    });
    let want: Vec<f32> = x_host.iter().map(|v| v * 2.0 + 1.0).collect();
    assert_eq!(out.0, want);
    assert_eq!(out.1, want);

    // The client's creation: a span, and an event inside it with the devices.
    let created = seen
        .iter()
        .find_map(|s| match s {
            Seen::Event(m, f, scope) if m == "client created" => Some((f, scope)),
            _ => None,
        })
        .expect("a `client created` event");
    assert_eq!(field(created.0, "devices"), Some("2"));
    assert_eq!(created.1, &vec!["client_create".to_string()]);

    // The compile span: opened with the format, closed with the module's name,
    // where the executable came from and the compile's time (no longer than the
    // span was open by the layer's clock).
    let (fields, open_for) = seen
        .iter()
        .find_map(|s| match s {
            Seen::Close(n, f, d) if n == "compile" => Some((f, *d)),
            _ => None,
        })
        .expect("a closed `compile` span");
    assert_eq!(field(fields, "format"), Some("hlo"));
    assert_eq!(field(fields, "module"), Some("traced_affine"));
    assert_eq!(field(fields, "cache"), Some("off"));
    let us: u128 = field(fields, "elapsed_us")
        .expect("elapsed_us")
        .parse()
        .unwrap();
    assert!(us > 0, "compile took {us} µs?");
    assert!(
        us <= open_for.as_micros(),
        "compile's {us} µs > the span's {open_for:?}"
    );
    // The `compiled` event inside the span says the same.
    let compiled = seen
        .iter()
        .find_map(|s| match s {
            Seen::Event(m, f, scope) if m == "compiled" => Some((f, scope)),
            _ => None,
        })
        .expect("a `compiled` event");
    assert_eq!(field(compiled.0, "module"), Some("traced_affine"));
    assert_eq!(compiled.1, &vec!["compile".to_string()]);

    // Upload (256 bytes), then the execution's span, then the download: in order.
    let pos = |pred: &dyn Fn(&Seen) -> bool| {
        seen.iter()
            .position(pred)
            .expect("an expected span or event")
    };
    let compile_closed = pos(&|s| matches!(s, Seen::Close(n, _, _) if n == "compile"));
    let upload = pos(
        &|s| matches!(s, Seen::Event(m, f, _) if m == "host_to_device" && field(f, "bytes") == Some("256")),
    );
    let exec_open = pos(
        &|s| matches!(s, Seen::Open(n, f) if n == "execute" && field(f, "executable") == Some("traced_affine")),
    );
    let exec_close = pos(&|s| matches!(s, Seen::Close(n, _, _) if n == "execute"));
    let download = pos(
        &|s| matches!(s, Seen::Event(m, f, _) if m == "device_to_host" && field(f, "bytes") == Some("256")),
    );
    let between = pos(
        &|s| matches!(s, Seen::Event(m, f, _) if m == "device_to_device" && field(f, "bytes") == Some("256")),
    );
    assert!(
        compile_closed < upload
            && upload < exec_open
            && exec_open < exec_close
            && exec_close < download
            && download < between,
        "out of order: {seen:#?}"
    );
    // An `execute_async` reports its end, with the time since its launch.
    let finished = pos(&|s| {
        matches!(s, Seen::Event(m, f, _) if m == "execution finished"
            && field(f, "executable") == Some("traced_affine")
            && field(f, "failed") == Some("false")
            && field(f, "elapsed_us").is_some_and(|v| v.parse::<u64>().is_ok()))
    });
    assert!(between < finished, "{seen:#?}");
    // Nothing of the runtime is left open.
    let opened = seen.iter().filter(|s| matches!(s, Seen::Open(..))).count();
    let closed = seen.iter().filter(|s| matches!(s, Seen::Close(..))).count();
    assert_eq!(opened, closed, "{seen:#?}");
}

/// The runner's steps and checkpoints: one `runner step` event per logged row, in
/// order, and a `checkpoint` span with the step, the file's path and its time,
/// the buffers' downloads inside it.
#[cfg(feature = "runner")]
#[test]
fn runner_steps_and_checkpoints_are_traced() {
    use serde::{Deserialize, Serialize};
    use xlaclient::Tree;
    use xlaclient::runner::Runner;

    #[derive(Serialize, Deserialize, Default)]
    #[serde(default)]
    struct Cfg {
        lr: f64,
    }
    #[derive(Tree)]
    struct Params<T> {
        w: T,
        b: T,
    }

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let c = common::client();
    let (path, seen) = capture(|| {
        let mut run = Runner::<Cfg>::from_args_iter([
            "prog".to_string(),
            "--output-dir".into(),
            dir.display().to_string(),
        ])
        .unwrap();
        let mut path = None;
        for step in 1..=3u64 {
            run.log(step, &[("loss", 1.0 / step as f64)]).unwrap();
            if step == 2 {
                let p = Params {
                    w: c.buffer_from_host(&[1.0f32, 2.0, 3.0], &[3]).unwrap(),
                    b: c.scalar(0.5f32).unwrap(),
                };
                path = Some(run.checkpoint(step, &p).unwrap());
            }
        }
        run.finish().unwrap();
        path.unwrap()
    });
    assert!(path.is_file());

    let steps: Vec<(String, String)> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Event(m, f, _) if m == "runner step" => Some((
                field(f, "step").unwrap().to_string(),
                field(f, "metrics").unwrap().to_string(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(steps.len(), 3, "{seen:#?}");
    for (i, (step, metrics)) in steps.iter().enumerate() {
        assert_eq!(step, &(i + 1).to_string());
        assert!(metrics.contains("\"loss\""), "{metrics}");
    }

    let (fields, open_for) = seen
        .iter()
        .find_map(|s| match s {
            Seen::Close(n, f, d) if n == "checkpoint" => Some((f, *d)),
            _ => None,
        })
        .expect("a closed `checkpoint` span");
    assert_eq!(field(fields, "step"), Some("2"));
    assert_eq!(
        field(fields, "path"),
        Some(path.display().to_string().as_str())
    );
    let us: u128 = field(fields, "elapsed_us").unwrap().parse().unwrap();
    assert!(us > 0 && us <= open_for.as_micros());
    // The checkpoint reads its two buffers back inside its span (12 and 4 bytes),
    // after the second step's row and before the third's.
    let downloads: Vec<&str> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Event(m, f, scope)
                if m == "device_to_host" && scope.iter().any(|n| n == "checkpoint") =>
            {
                field(f, "bytes")
            }
            _ => None,
        })
        .collect();
    let mut sorted = downloads.clone();
    sorted.sort();
    assert_eq!(sorted, vec!["12", "4"], "{seen:#?}");
    let at = |pred: &dyn Fn(&Seen) -> bool| seen.iter().position(pred).unwrap();
    let step2 = at(
        &|s| matches!(s, Seen::Event(m, f, _) if m == "runner step" && field(f, "step") == Some("2")),
    );
    let step3 = at(
        &|s| matches!(s, Seen::Event(m, f, _) if m == "runner step" && field(f, "step") == Some("3")),
    );
    let ck = at(&|s| matches!(s, Seen::Open(n, _) if n == "checkpoint"));
    assert!(step2 < ck && ck < step3);
    assert!(seen.iter().any(
        |s| matches!(s, Seen::Event(m, f, _) if m == "run finished" && field(f, "rows") == Some("3"))
    ));
}
