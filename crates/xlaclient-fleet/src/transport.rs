//! The JetStream transport: trajectories through a work-queue stream, parameters
//! and the run's config through key-value buckets.
//!
//! - **Trajectories**: stream `<prefix>_TRAJ` on subjects `<prefix>.traj.<actor>`,
//!   retention *work queue* (a message is removed once acked), `max_bytes`
//!   bounded with *discard new*: when the learner falls behind the stream fills,
//!   the server refuses new publishes, and [`Transport::send`] backs off and
//!   retries — the actors are held back and the stream's memory stays bounded.
//!   The learner pulls through the durable consumer `<prefix>_learner` with
//!   explicit acks; what it has not acked is delivered again after a restart
//!   (at-least-once). The `(actor, epoch, seq)` ids in every frame let the
//!   learner drop what it has already used.
//! - **Parameters**: bucket `<prefix>_params`, keys `chunk.<i>` (the frames of one
//!   parameter message) then `latest` (`"<version> <chunks>"`), written in that
//!   order; a reader that finds a chunk of another version (overwritten while it
//!   read) reads again.
//! - **Config**: bucket `<prefix>_config`, free-form string values (the run's
//!   settings, the stop flag, each actor's sent count).
//!
//! The API is blocking: each call runs on a private tokio runtime (one worker
//! thread, which also keeps the connection alive and reconnects between calls),
//! so the caller's thread can own the stepper and the compiled programs. The
//! client reconnects by itself after the server restarts (no reconnect limit);
//! calls made while it is away fail with [`Error::Nats`] and may be retried.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, kv, stream};
use bytes::Bytes;
use futures::StreamExt;

use crate::error::{Error, Result};
use crate::frame::{self, FrameError, Kind, Leaf, Message, Reassembler};

/// How the transport's streams and buckets are set up.
#[derive(Clone, Debug)]
pub struct TransportOptions {
    /// The prefix of every stream, subject, consumer and bucket name (one run's
    /// namespace on a shared server). Default `"fleet"`.
    pub prefix: String,
    /// The trajectory stream's `max_bytes`: what the server keeps for unacked
    /// trajectories before refusing new ones. Default 64 MiB.
    pub max_bytes: i64,
    /// How long a delivered, unacked trajectory waits before it is delivered
    /// again (to a restarted learner, say). Default 5 s: ten times the
    /// learner's checkpoint interval, as it acks only what a checkpoint holds.
    pub ack_wait: Duration,
    /// The longest a frame may be (header included). Default [`frame::MAX_CHUNK`].
    pub max_frame: usize,
    /// Create the stream and buckets when missing (the learner does); when
    /// false (actors), [`Transport::connect`] waits for them instead, so the
    /// stream's limits are always the learner's.
    pub create: bool,
}

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions {
            prefix: "fleet".into(),
            max_bytes: 64 << 20,
            ack_wait: Duration::from_secs(5),
            max_frame: frame::MAX_CHUNK,
            create: true,
        }
    }
}

/// The outcome of one publish attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publish {
    /// Stored by the server.
    Accepted,
    /// Refused because the stream is full (backpressure): the server's words.
    Refused(String),
}

/// A trajectory frame pulled from the stream: the message (or what was wrong with
/// it), how often the server has delivered it, and its ack handle.
pub struct Delivery {
    /// The decoded message once all its chunks are in (`Ok(None)` for a chunk
    /// of a message still missing others), or the decoding error.
    pub message: std::result::Result<Option<Message>, FrameError>,
    /// Deliveries of this frame so far (1 the first time).
    pub delivered: i64,
    /// The frame's sequence number in the stream.
    pub stream_seq: u64,
    ack: jetstream::Message,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("message", &self.message)
            .field("delivered", &self.delivered)
            .field("stream_seq", &self.stream_seq)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// The handle to ack this frame with ([`Transport::ack`]).
    pub fn into_ack(self) -> AckHandle {
        AckHandle(self.ack)
    }
}

/// What acks one delivered frame.
pub struct AckHandle(jetstream::Message);

impl std::fmt::Debug for AckHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AckHandle")
    }
}

/// The stream's current contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamState {
    /// Frames stored (delivered-but-unacked ones included).
    pub messages: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// A connection to the fleet's streams and buckets (see the [module docs](self)).
pub struct Transport {
    rt: tokio::runtime::Runtime,
    client: async_nats::Client,
    js: jetstream::Context,
    opts: TransportOptions,
    config: kv::Store,
    params: kv::Store,
    consumer: Mutex<Option<consumer::PullConsumer>>,
    reassembler: Mutex<Reassembler>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Connects to `url` (retrying for up to `connect_timeout` while the server
    /// is not up yet) and creates the streams and buckets if they do not exist.
    ///
    /// # Errors
    /// [`Error::Nats`] naming the step that failed.
    pub fn connect(
        url: &str,
        opts: TransportOptions,
        connect_timeout: Duration,
    ) -> Result<Transport> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let (client, js, config, params) = rt.block_on(async {
            let start = Instant::now();
            let client = loop {
                match async_nats::ConnectOptions::new()
                    .max_reconnects(None)
                    .connection_timeout(Duration::from_secs(2))
                    .connect(url)
                    .await
                {
                    Ok(c) => break c,
                    Err(e) if start.elapsed() < connect_timeout => {
                        let _ = e;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => return Err(Error::nats(format!("connect to {url}"), e)),
                }
            };
            let js = jetstream::new(client.clone());
            let p = &opts.prefix;
            // The stream's limits are its creator's (the learner's, normally):
            // an existing stream is used as it is.
            while !opts.create
                && (js.get_stream(format!("{p}_TRAJ")).await.is_err()
                    || js.get_key_value(format!("{p}_params")).await.is_err())
            {
                if start.elapsed() > connect_timeout {
                    return Err(Error::nats(
                        format!("wait for stream {p}_TRAJ"),
                        "not created by a learner in time",
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if js.get_stream(format!("{p}_TRAJ")).await.is_err() {
                let created = js
                    .create_stream(stream::Config {
                        name: format!("{p}_TRAJ"),
                        subjects: vec![format!("{p}.traj.>")],
                        retention: stream::RetentionPolicy::WorkQueue,
                        discard: stream::DiscardPolicy::New,
                        max_bytes: opts.max_bytes,
                        storage: stream::StorageType::File,
                        ..Default::default()
                    })
                    .await;
                // Another process may have created it meanwhile.
                if let Err(e) = created
                    && js.get_stream(format!("{p}_TRAJ")).await.is_err()
                {
                    return Err(Error::nats(format!("create stream {p}_TRAJ"), e));
                }
            }
            let bucket = |name: String| kv::Config {
                bucket: name,
                history: 1,
                storage: stream::StorageType::File,
                ..Default::default()
            };
            let mut stores = Vec::new();
            for name in [format!("{p}_config"), format!("{p}_params")] {
                let store = match js.get_key_value(name.clone()).await {
                    Ok(s) => s,
                    Err(_) => match js.create_key_value(bucket(name.clone())).await {
                        Ok(s) => s,
                        // Another process may have created it meanwhile.
                        Err(e) => js
                            .get_key_value(name.clone())
                            .await
                            .map_err(|_| Error::nats(format!("create bucket {name}"), e))?,
                    },
                };
                stores.push(store);
            }
            let params = stores.pop().ok_or_else(|| Error::nats("buckets", "none"))?;
            let config = stores.pop().ok_or_else(|| Error::nats("buckets", "none"))?;
            Ok::<_, Error>((client, js, config, params))
        })?;
        Ok(Transport {
            rt,
            client,
            js,
            opts,
            config,
            params,
            consumer: Mutex::new(None),
            reassembler: Mutex::new(Reassembler::new()),
        })
    }

    /// The options it was made with.
    pub fn options(&self) -> &TransportOptions {
        &self.opts
    }

    /// Whether the client is connected now.
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Publishes raw bytes on actor `actor`'s trajectory subject, once.
    ///
    /// # Errors
    /// [`Error::Nats`] when the server cannot be reached or does not answer.
    pub fn publish_raw(&self, actor: u32, bytes: Vec<u8>) -> Result<Publish> {
        let subject = format!("{}.traj.{actor}", self.opts.prefix);
        self.rt.block_on(async {
            let ack = self
                .js
                .publish(subject.clone(), Bytes::from(bytes))
                .await
                .map_err(|e| Error::nats(format!("publish on {subject}"), e))?;
            match ack.await {
                Ok(_) => Ok(Publish::Accepted),
                Err(e) => {
                    let s = e.to_string();
                    if s.contains("maximum bytes") || s.contains("resource limits") {
                        Ok(Publish::Refused(s))
                    } else {
                        Err(Error::nats(format!("publish on {subject}"), s))
                    }
                }
            }
        })
    }

    /// Publishes a trajectory message once: every frame, stopping at the first
    /// refusal.
    ///
    /// # Errors
    /// [`Error::Frame`] when it cannot be encoded; [`Error::Nats`] as
    /// [`publish_raw`](Self::publish_raw).
    pub fn publish(&self, m: &Message) -> Result<Publish> {
        for f in frame::encode(m, self.opts.max_frame)? {
            if let Publish::Refused(why) = self.publish_raw(m.actor, f)? {
                return Ok(Publish::Refused(why));
            }
        }
        Ok(Publish::Accepted)
    }

    /// Publishes a trajectory message until the server takes it: a refusal (the
    /// stream is full) or a transport error (the server away) waits, doubling
    /// from 5 ms to 500 ms, and tries again, until `give_up` has passed since
    /// the first try. Returns the refusals and errors it waited through.
    ///
    /// # Errors
    /// The last [`Error::Nats`] when `give_up` passed without success.
    pub fn send(&self, m: &Message, give_up: Duration) -> Result<SendStats> {
        let start = Instant::now();
        let mut stats = SendStats::default();
        let mut wait = Duration::from_millis(5);
        loop {
            let err = match self.publish(m) {
                Ok(Publish::Accepted) => return Ok(stats),
                Ok(Publish::Refused(why)) => {
                    stats.refused += 1;
                    Error::nats("publish (stream full)", why)
                }
                Err(e) => {
                    stats.errors += 1;
                    e
                }
            };
            if start.elapsed() > give_up {
                return Err(err);
            }
            std::thread::sleep(wait);
            stats.waited += wait;
            wait = (wait * 2).min(Duration::from_millis(500));
        }
    }

    fn pull_consumer(&self) -> Result<consumer::PullConsumer> {
        let mut guard = self.consumer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = guard.as_ref() {
            return Ok(c.clone());
        }
        let p = &self.opts.prefix;
        let c = self.rt.block_on(async {
            let s = self
                .js
                .get_stream(format!("{p}_TRAJ"))
                .await
                .map_err(|e| Error::nats(format!("get stream {p}_TRAJ"), e))?;
            s.get_or_create_consumer(
                &format!("{p}_learner"),
                consumer::pull::Config {
                    durable_name: Some(format!("{p}_learner")),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: self.opts.ack_wait,
                    max_ack_pending: 1_000_000,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| Error::nats(format!("create consumer {p}_learner"), e))
        })?;
        *guard = Some(c.clone());
        Ok(c)
    }

    /// Pulls up to `max` trajectory frames, waiting up to `wait` for the first.
    ///
    /// # Errors
    /// [`Error::Nats`] when the server cannot be reached.
    pub fn fetch(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>> {
        let c = self.pull_consumer()?;
        let raw = self.rt.block_on(async {
            let mut batch = c
                .batch()
                .max_messages(max)
                .expires(wait.max(Duration::from_millis(10)))
                .messages()
                .await
                .map_err(|e| Error::nats("fetch trajectories", e))?;
            let mut out = Vec::new();
            while let Some(m) = batch.next().await {
                match m {
                    Ok(m) => out.push(m),
                    Err(e) => {
                        if out.is_empty() {
                            return Err(Error::nats("fetch trajectories", e));
                        }
                        break;
                    }
                }
            }
            Ok(out)
        })?;
        let mut r = self.reassembler.lock().unwrap_or_else(|p| p.into_inner());
        Ok(raw
            .into_iter()
            .map(|m| {
                let (delivered, stream_seq) = m
                    .info()
                    .map(|i| (i.delivered, i.stream_sequence))
                    .unwrap_or((1, 0));
                let message = r.push(&m.payload).and_then(|msg| match msg {
                    Some(msg) if msg.kind != Kind::Trajectory => Err(FrameError::Layout(format!(
                        "a {:?} message on the trajectory stream",
                        msg.kind
                    ))),
                    other => Ok(other),
                });
                Delivery {
                    message,
                    delivered,
                    stream_seq,
                    ack: m,
                }
            })
            .collect())
    }

    /// Acks frames: the server removes them from the stream.
    ///
    /// # Errors
    /// [`Error::Nats`] for the first ack that failed (the others are still sent).
    pub fn ack(&self, handles: Vec<AckHandle>) -> Result<()> {
        self.rt.block_on(async {
            let mut first = None;
            for h in handles {
                if let Err(e) = h.0.ack().await {
                    first.get_or_insert(Error::nats("ack", e));
                }
            }
            if let Err(e) = self.client.flush().await {
                first.get_or_insert(Error::nats("flush acks", e));
            }
            first.map_or(Ok(()), Err)
        })
    }

    /// The trajectory stream's frames and bytes now.
    ///
    /// # Errors
    /// [`Error::Nats`].
    pub fn stream_state(&self) -> Result<StreamState> {
        let p = &self.opts.prefix;
        self.rt.block_on(async {
            let mut s = self
                .js
                .get_stream(format!("{p}_TRAJ"))
                .await
                .map_err(|e| Error::nats(format!("get stream {p}_TRAJ"), e))?;
            let info = s
                .info()
                .await
                .map_err(|e| Error::nats(format!("stream info {p}_TRAJ"), e))?;
            Ok(StreamState {
                messages: info.state.messages,
                bytes: info.state.bytes,
            })
        })
    }

    /// Sets a config value.
    ///
    /// # Errors
    /// [`Error::Nats`].
    pub fn put_config(&self, key: &str, value: &str) -> Result<()> {
        self.rt.block_on(async {
            self.config
                .put(key, Bytes::from(value.to_owned()))
                .await
                .map(|_| ())
                .map_err(|e| Error::nats(format!("put config {key}"), e))
        })
    }

    /// A config value, if set.
    ///
    /// # Errors
    /// [`Error::Nats`]; [`Error::Settings`] for a value that is not UTF-8.
    pub fn get_config(&self, key: &str) -> Result<Option<String>> {
        let v = self.rt.block_on(async {
            self.config
                .get(key)
                .await
                .map_err(|e| Error::nats(format!("get config {key}"), e))
        })?;
        v.map(|b| {
            String::from_utf8(b.to_vec())
                .map_err(|_| Error::Settings(format!("config {key}: not UTF-8")))
        })
        .transpose()
    }

    /// The config keys that start with `prefix`, with their values.
    ///
    /// # Errors
    /// [`Error::Nats`].
    pub fn config_with_prefix(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let keys: Vec<String> = self.rt.block_on(async {
            let mut keys = self
                .config
                .keys()
                .await
                .map_err(|e| Error::nats("list config keys", e))?;
            let mut out = Vec::new();
            while let Some(k) = keys.next().await {
                match k {
                    Ok(k) if k.starts_with(prefix) => out.push(k),
                    Ok(_) => {}
                    Err(e) => return Err(Error::nats("list config keys", e)),
                }
            }
            Ok(out)
        })?;
        let mut out = Vec::new();
        for k in keys {
            if let Some(v) = self.get_config(&k)? {
                out.push((k, v));
            }
        }
        Ok(out)
    }

    /// Publishes parameter set `version` (its leaves): the chunks, then `latest`.
    ///
    /// # Errors
    /// [`Error::Frame`] when it cannot be encoded; [`Error::Nats`].
    pub fn put_params(&self, version: u64, leaves: Vec<Leaf>) -> Result<()> {
        let m = Message {
            kind: Kind::Params,
            actor: 0,
            epoch: 0,
            seq: version,
            version,
            leaves,
        };
        // A key-value entry carries some headers besides the value: leave room.
        let frames = frame::encode(&m, self.opts.max_frame.min(frame::MAX_CHUNK - 4096))?;
        let n = frames.len();
        self.rt.block_on(async {
            for (i, f) in frames.into_iter().enumerate() {
                self.params
                    .put(format!("chunk.{i}"), Bytes::from(f))
                    .await
                    .map_err(|e| Error::nats(format!("put params chunk {i}"), e))?;
            }
            self.params
                .put("latest", Bytes::from(format!("{version} {n}")))
                .await
                .map_err(|e| Error::nats("put params latest", e))?;
            Ok(())
        })
    }

    /// The newest parameter set if its version is above `have`.
    ///
    /// # Errors
    /// [`Error::Nats`]; [`Error::Frame`] for a malformed entry.
    pub fn get_params(&self, have: Option<u64>) -> Result<Option<Message>> {
        for _ in 0..5 {
            let got = self.rt.block_on(async {
                let Some(latest) = self
                    .params
                    .get("latest")
                    .await
                    .map_err(|e| Error::nats("get params latest", e))?
                else {
                    return Ok(None);
                };
                let text = String::from_utf8_lossy(&latest).into_owned();
                let mut it = text.split(' ').map(str::parse::<u64>);
                let (Some(Ok(version)), Some(Ok(n)), None) = (it.next(), it.next(), it.next())
                else {
                    return Err(Error::Frame(FrameError::Layout(format!(
                        "params latest entry {text:?}: expected '<version> <chunks>'"
                    ))));
                };
                if have.is_some_and(|h| version <= h) {
                    return Ok(None);
                }
                let mut r = Reassembler::new();
                for i in 0..n {
                    let Some(b) = self
                        .params
                        .get(format!("chunk.{i}"))
                        .await
                        .map_err(|e| Error::nats(format!("get params chunk {i}"), e))?
                    else {
                        return Ok(Some(None));
                    };
                    let f = frame::decode_frame(&b)?;
                    if f.version != version || f.chunk_count as u64 != n {
                        return Ok(Some(None)); // overwritten meanwhile: read again
                    }
                    if let Some(m) = r.push(&b)? {
                        return Ok(Some(Some(m)));
                    }
                }
                Ok(Some(None))
            })?;
            match got {
                None => return Ok(None),
                Some(Some(m)) => return Ok(Some(m)),
                Some(None) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        Ok(None)
    }
}

/// What [`Transport::send`] waited through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendStats {
    /// Refusals (stream full).
    pub refused: u64,
    /// Transport errors (server away, timeouts).
    pub errors: u64,
    /// Time spent waiting.
    pub waited: Duration,
}
