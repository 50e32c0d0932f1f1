//! The wire format: one message (a trajectory or a parameter set) is a list of
//! arrays, each dtype + shape + raw little-endian bytes, sent as one or more
//! frames of at most [`MAX_CHUNK`] bytes.
//!
//! A frame is a fixed header followed by its share of the message's body:
//!
//! | bytes | field |
//! | --- | --- |
//! | 4 | magic `XLFT` |
//! | 2 | format version ([`FORMAT_VERSION`]) |
//! | 1 | kind ([`Kind`]) |
//! | 1 | reserved, 0 |
//! | 4 | actor index |
//! | 8 | actor epoch (a new one per actor process: sequence numbers restart with it) |
//! | 8 | sequence number within the epoch |
//! | 8 | parameter version (the one the actor acted with, or the one published) |
//! | 4 | chunk index |
//! | 4 | chunk count |
//! | 4 | payload length (the rest of the frame) |
//!
//! The body (the chunks' payloads joined) is a leaf count (`u32`) and per leaf: a
//! dtype byte ([`Dtype`]), a rank byte (at most [`MAX_RANK`]), the dimensions
//! (`u64` each), then the elements' bytes, little-endian, row-major. All integers
//! are little-endian.
//!
//! Why not Arrow IPC: the messages here are a handful of dense arrays, which Arrow
//! would wrap in a schema, record batches and per-column buffers for nothing; its
//! Rust crates are large dependencies; and the raw bytes here are already the host
//! layout PJRT's `buffer_from_host` takes, so a decoded leaf goes to the device
//! without any per-element conversion. The header carries what Arrow has no place
//! for anyway (actor, epoch, sequence and version ids, chunking).
//!
//! [`decode`] checks every field and every length; anything malformed, truncated or
//! foreign is a [`FrameError`] naming what was wrong, never a panic
//! (`tests/fleet_frame.rs` property-tests it with mutated and cut frames).

use std::collections::HashMap;
use std::fmt;

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"XLFT";
/// The format version this code writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// The largest frame, header included: 1 MiB (NATS's default `max_payload`).
pub const MAX_CHUNK: usize = 1 << 20;
/// The header's length in bytes.
pub const HEADER_LEN: usize = 48;
/// The most dimensions a leaf may have.
pub const MAX_RANK: usize = 8;
/// The most leaves a message may have.
pub const MAX_LEAVES: usize = 1024;
/// The most chunks a message may have (so at most 4 GiB).
pub const MAX_CHUNKS: u32 = 4096;

/// What a message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A trajectory from an actor.
    Trajectory,
    /// A parameter set from the learner.
    Params,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Trajectory => 1,
            Kind::Params => 2,
        }
    }

    fn from_code(c: u8) -> Option<Kind> {
        match c {
            1 => Some(Kind::Trajectory),
            2 => Some(Kind::Params),
            _ => None,
        }
    }
}

/// The element type of a leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// 32-bit float.
    F32,
    /// 32-bit signed integer.
    I32,
}

impl Dtype {
    fn code(self) -> u8 {
        match self {
            Dtype::F32 => 1,
            Dtype::I32 => 2,
        }
    }

    fn from_code(c: u8) -> Option<Dtype> {
        match c {
            1 => Some(Dtype::F32),
            2 => Some(Dtype::I32),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        4
    }
}

/// One array: dtype, dimensions and the elements' little-endian bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// The element type.
    pub dtype: Dtype,
    /// The dimensions.
    pub dims: Vec<u64>,
    /// The elements, little-endian, row-major.
    pub bytes: Vec<u8>,
}

impl Leaf {
    /// An `f32` leaf.
    ///
    /// # Errors
    /// [`FrameError::LeafLength`] when `values` does not hold the product of `dims`.
    pub fn f32(dims: &[u64], values: &[f32]) -> Result<Leaf, FrameError> {
        check_count(dims, values.len())?;
        Ok(Leaf {
            dtype: Dtype::F32,
            dims: dims.to_vec(),
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        })
    }

    /// An `i32` leaf.
    ///
    /// # Errors
    /// [`FrameError::LeafLength`] when `values` does not hold the product of `dims`.
    pub fn i32(dims: &[u64], values: &[i32]) -> Result<Leaf, FrameError> {
        check_count(dims, values.len())?;
        Ok(Leaf {
            dtype: Dtype::I32,
            dims: dims.to_vec(),
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }

    /// Whether the leaf holds no element.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The values of an `f32` leaf.
    ///
    /// # Errors
    /// [`FrameError::LeafType`] for another dtype.
    pub fn to_f32(&self) -> Result<Vec<f32>, FrameError> {
        if self.dtype != Dtype::F32 {
            return Err(FrameError::LeafType {
                expected: Dtype::F32,
                found: self.dtype,
            });
        }
        Ok(self
            .bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// The values of an `i32` leaf.
    ///
    /// # Errors
    /// [`FrameError::LeafType`] for another dtype.
    pub fn to_i32(&self) -> Result<Vec<i32>, FrameError> {
        if self.dtype != Dtype::I32 {
            return Err(FrameError::LeafType {
                expected: Dtype::I32,
                found: self.dtype,
            });
        }
        Ok(self
            .bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

fn check_count(dims: &[u64], n: usize) -> Result<(), FrameError> {
    let expected = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or(FrameError::Overflow)?;
    if expected != n as u64 {
        return Err(FrameError::LeafLength {
            dims: dims.to_vec(),
            values: n,
        });
    }
    if dims.len() > MAX_RANK {
        return Err(FrameError::Rank {
            leaf: 0,
            rank: dims.len(),
        });
    }
    Ok(())
}

/// A message: who sent it, which parameter version it relates to, and its arrays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// What it carries.
    pub kind: Kind,
    /// The actor's index (0 for the learner's messages).
    pub actor: u32,
    /// The actor process's epoch: a new one at each start.
    pub epoch: u64,
    /// The sequence number within the epoch.
    pub seq: u64,
    /// The parameter version.
    pub version: u64,
    /// The arrays.
    pub leaves: Vec<Leaf>,
}

/// What was wrong with a frame or a message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the header.
    #[error("frame of {len} bytes is shorter than the {HEADER_LEN}-byte header (truncated)")]
    Short {
        /// The frame's length.
        len: usize,
    },
    /// Not one of ours.
    #[error("foreign message: magic {found:02x?}, expected {MAGIC:02x?} (\"XLFT\")")]
    Magic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// Another format version.
    #[error("format version {found}; this build reads version {FORMAT_VERSION}")]
    Version {
        /// The version in the frame.
        found: u16,
    },
    /// An unknown kind.
    #[error("unknown message kind {found} (1 = trajectory, 2 = params)")]
    Kind {
        /// The kind byte.
        found: u8,
    },
    /// The reserved byte is not 0.
    #[error("reserved header byte is {found}, must be 0")]
    Reserved {
        /// The byte.
        found: u8,
    },
    /// Chunk index or count out of range.
    #[error(
        "chunk {index} of {count}: the index must be below the count, the count in 1..={MAX_CHUNKS}"
    )]
    Chunk {
        /// The chunk index.
        index: u32,
        /// The chunk count.
        count: u32,
    },
    /// The payload length in the header is not what follows it.
    #[error("header says {declared} payload bytes, the frame has {actual} (truncated or padded)")]
    PayloadLength {
        /// The header's length.
        declared: u64,
        /// The bytes after the header.
        actual: usize,
    },
    /// The frame is larger than [`MAX_CHUNK`].
    #[error("frame of {len} bytes exceeds the {MAX_CHUNK}-byte chunk limit")]
    TooLarge {
        /// The frame's length.
        len: usize,
    },
    /// The body ends inside a field.
    #[error("body truncated: {what} needs {needed} bytes at offset {offset}, {left} left")]
    BodyTruncated {
        /// The field being read.
        what: &'static str,
        /// Its offset in the body.
        offset: usize,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left.
        left: usize,
    },
    /// Too many leaves.
    #[error("{count} leaves; at most {MAX_LEAVES}")]
    LeafCount {
        /// The count in the body.
        count: u64,
    },
    /// An unknown dtype.
    #[error("leaf {leaf}: unknown dtype code {code} (1 = f32, 2 = i32)")]
    Dtype {
        /// The leaf's index.
        leaf: usize,
        /// The dtype byte.
        code: u8,
    },
    /// Too many dimensions.
    #[error("leaf {leaf}: rank {rank}; at most {MAX_RANK}")]
    Rank {
        /// The leaf's index.
        leaf: usize,
        /// Its rank.
        rank: usize,
    },
    /// The dimensions' product overflows.
    #[error("dimensions whose element count overflows 64 bits")]
    Overflow,
    /// Bytes after the last leaf.
    #[error("{extra} bytes after the last leaf")]
    Trailing {
        /// The extra bytes.
        extra: usize,
    },
    /// A leaf built with the wrong number of values.
    #[error("leaf of dims {dims:?} given {values} values")]
    LeafLength {
        /// The dims.
        dims: Vec<u64>,
        /// The values given.
        values: usize,
    },
    /// A leaf read as the wrong type.
    #[error("leaf is {found:?}, read as {expected:?}")]
    LeafType {
        /// The type asked for.
        expected: Dtype,
        /// The leaf's type.
        found: Dtype,
    },
    /// A chunk disagrees with the earlier chunks of its message.
    #[error("chunk {index} of message (actor {actor}, epoch {epoch}, seq {seq}) {what}")]
    ChunkMismatch {
        /// The actor.
        actor: u32,
        /// The epoch.
        epoch: u64,
        /// The sequence number.
        seq: u64,
        /// The chunk's index.
        index: u32,
        /// What disagreed.
        what: &'static str,
    },
    /// The message does not have the layout its kind needs.
    #[error("{0}")]
    Layout(String),
}

/// A decoded frame: the header's fields and this chunk's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What the message carries.
    pub kind: Kind,
    /// The actor.
    pub actor: u32,
    /// The actor's epoch.
    pub epoch: u64,
    /// The sequence number.
    pub seq: u64,
    /// The parameter version.
    pub version: u64,
    /// This chunk's index.
    pub chunk_index: u32,
    /// The message's chunk count.
    pub chunk_count: u32,
    /// This chunk's share of the body.
    pub payload: Vec<u8>,
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} actor {} epoch {} seq {} version {} chunk {}/{}",
            self.kind,
            self.actor,
            self.epoch,
            self.seq,
            self.version,
            self.chunk_index,
            self.chunk_count
        )
    }
}

/// The body of `m`: the leaves, serialised.
fn body(m: &Message) -> Vec<u8> {
    let size: usize = 4 + m
        .leaves
        .iter()
        .map(|l| 2 + 8 * l.dims.len() + l.bytes.len())
        .sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(m.leaves.len() as u32).to_le_bytes());
    for l in &m.leaves {
        out.push(l.dtype.code());
        out.push(l.dims.len() as u8);
        for d in &l.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&l.bytes);
    }
    out
}

/// Encodes `m` as frames of at most `max_frame` bytes (header included; clamped
/// to `HEADER_LEN + 1 ..= MAX_CHUNK`).
///
/// # Errors
/// [`FrameError::Layout`] when the message needs more than [`MAX_CHUNKS`] chunks or
/// has more than [`MAX_LEAVES`] leaves, or a leaf's bytes disagree with its dims.
pub fn encode(m: &Message, max_frame: usize) -> Result<Vec<Vec<u8>>, FrameError> {
    if m.leaves.len() > MAX_LEAVES {
        return Err(FrameError::LeafCount {
            count: m.leaves.len() as u64,
        });
    }
    for (i, l) in m.leaves.iter().enumerate() {
        if l.dims.len() > MAX_RANK {
            return Err(FrameError::Rank {
                leaf: i,
                rank: l.dims.len(),
            });
        }
        let n = l
            .dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or(FrameError::Overflow)?;
        if n.checked_mul(l.dtype.size() as u64) != Some(l.bytes.len() as u64) {
            return Err(FrameError::Layout(format!(
                "leaf {i}: {} bytes for dims {:?} of {:?}",
                l.bytes.len(),
                l.dims,
                l.dtype
            )));
        }
    }
    let max_frame = max_frame.clamp(HEADER_LEN + 1, MAX_CHUNK);
    let per = max_frame - HEADER_LEN;
    let body = body(m);
    let count = body.len().div_ceil(per).max(1);
    if count > MAX_CHUNKS as usize {
        return Err(FrameError::Layout(format!(
            "message of {} bytes needs {count} chunks; at most {MAX_CHUNKS}",
            body.len()
        )));
    }
    let mut frames = Vec::with_capacity(count);
    for i in 0..count {
        let part = &body[(i * per).min(body.len())..((i + 1) * per).min(body.len())];
        let mut f = Vec::with_capacity(HEADER_LEN + part.len());
        f.extend_from_slice(&MAGIC);
        f.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        f.push(m.kind.code());
        f.push(0);
        f.extend_from_slice(&m.actor.to_le_bytes());
        f.extend_from_slice(&m.epoch.to_le_bytes());
        f.extend_from_slice(&m.seq.to_le_bytes());
        f.extend_from_slice(&m.version.to_le_bytes());
        f.extend_from_slice(&(i as u32).to_le_bytes());
        f.extend_from_slice(&(count as u32).to_le_bytes());
        f.extend_from_slice(&(part.len() as u32).to_le_bytes());
        f.extend_from_slice(part);
        frames.push(f);
    }
    Ok(frames)
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[o..o + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// Decodes one frame's header and takes its payload.
///
/// # Errors
/// A [`FrameError`] naming the first thing wrong.
pub fn decode_frame(b: &[u8]) -> Result<Frame, FrameError> {
    if b.len() < HEADER_LEN {
        if b.len() >= 4 && b[..4] != MAGIC {
            let mut found = [0u8; 4];
            found.copy_from_slice(&b[..4]);
            return Err(FrameError::Magic { found });
        }
        return Err(FrameError::Short { len: b.len() });
    }
    if b.len() > MAX_CHUNK {
        return Err(FrameError::TooLarge { len: b.len() });
    }
    let mut found = [0u8; 4];
    found.copy_from_slice(&b[..4]);
    if found != MAGIC {
        return Err(FrameError::Magic { found });
    }
    let version = u16_at(b, 4);
    if version != FORMAT_VERSION {
        return Err(FrameError::Version { found: version });
    }
    let kind = Kind::from_code(b[6]).ok_or(FrameError::Kind { found: b[6] })?;
    if b[7] != 0 {
        return Err(FrameError::Reserved { found: b[7] });
    }
    let chunk_index = u32_at(b, 36);
    let chunk_count = u32_at(b, 40);
    if chunk_count == 0 || chunk_count > MAX_CHUNKS || chunk_index >= chunk_count {
        return Err(FrameError::Chunk {
            index: chunk_index,
            count: chunk_count,
        });
    }
    let declared = u64::from(u32_at(b, 44));
    let actual = b.len() - HEADER_LEN;
    if declared != actual as u64 {
        return Err(FrameError::PayloadLength { declared, actual });
    }
    Ok(Frame {
        kind,
        actor: u32_at(b, 8),
        epoch: u64_at(b, 12),
        seq: u64_at(b, 20),
        version: u64_at(b, 28),
        chunk_index,
        chunk_count,
        payload: b[HEADER_LEN..].to_vec(),
    })
}

/// Parses a message body into leaves.
///
/// # Errors
/// A [`FrameError`] naming the first thing wrong.
pub fn decode_body(body: &[u8]) -> Result<Vec<Leaf>, FrameError> {
    let mut at = 0usize;
    let take = |at: &mut usize,
                n: u64,
                what: &'static str|
     -> Result<std::ops::Range<usize>, FrameError> {
        let left = body.len() - *at;
        if n > left as u64 {
            return Err(FrameError::BodyTruncated {
                what,
                offset: *at,
                needed: n,
                left,
            });
        }
        let r = *at..*at + n as usize;
        *at += n as usize;
        Ok(r)
    };
    let r = take(&mut at, 4, "the leaf count")?;
    let count = u64::from(u32_at(body, r.start));
    if count > MAX_LEAVES as u64 {
        return Err(FrameError::LeafCount { count });
    }
    let mut leaves = Vec::with_capacity(count as usize);
    for leaf in 0..count as usize {
        let r = take(&mut at, 2, "a leaf's dtype and rank")?;
        let dtype = Dtype::from_code(body[r.start]).ok_or(FrameError::Dtype {
            leaf,
            code: body[r.start],
        })?;
        let rank = usize::from(body[r.start + 1]);
        if rank > MAX_RANK {
            return Err(FrameError::Rank { leaf, rank });
        }
        let r = take(&mut at, 8 * rank as u64, "a leaf's dimensions")?;
        let dims: Vec<u64> = (0..rank).map(|k| u64_at(body, r.start + 8 * k)).collect();
        let bytes = dims
            .iter()
            .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d))
            .ok_or(FrameError::Overflow)?;
        let r = take(&mut at, bytes, "a leaf's elements")?;
        leaves.push(Leaf {
            dtype,
            dims,
            bytes: body[r].to_vec(),
        });
    }
    if at != body.len() {
        return Err(FrameError::Trailing {
            extra: body.len() - at,
        });
    }
    Ok(leaves)
}

/// Decodes a message sent as a single frame.
///
/// # Errors
/// A [`FrameError`]; [`FrameError::Chunk`] for a frame that is one chunk of several
/// (use a [`Reassembler`]).
pub fn decode(b: &[u8]) -> Result<Message, FrameError> {
    let f = decode_frame(b)?;
    if f.chunk_count != 1 {
        return Err(FrameError::Chunk {
            index: f.chunk_index,
            count: f.chunk_count,
        });
    }
    Ok(Message {
        kind: f.kind,
        actor: f.actor,
        epoch: f.epoch,
        seq: f.seq,
        version: f.version,
        leaves: decode_body(&f.payload)?,
    })
}

type Key = (Kind, u32, u64, u64);

/// A message's version and the payloads of the chunks received so far.
type Partial = (u64, Vec<Option<Vec<u8>>>);

/// Joins chunks into messages, in any order.
#[derive(Debug, Default)]
pub struct Reassembler {
    partial: HashMap<Key, Partial>,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Reassembler {
        Reassembler::default()
    }

    /// Takes one frame; returns the message once all its chunks are in.
    ///
    /// # Errors
    /// The frame's or the joined body's [`FrameError`]; [`FrameError::ChunkMismatch`]
    /// when a chunk disagrees with the earlier ones (count or version) — that
    /// message's chunks are then dropped.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Option<Message>, FrameError> {
        let f = decode_frame(bytes)?;
        let key = (f.kind, f.actor, f.epoch, f.seq);
        let mismatch = |what| FrameError::ChunkMismatch {
            actor: f.actor,
            epoch: f.epoch,
            seq: f.seq,
            index: f.chunk_index,
            what,
        };
        let entry = self
            .partial
            .entry(key)
            .or_insert_with(|| (f.version, vec![None; f.chunk_count as usize]));
        if entry.1.len() != f.chunk_count as usize {
            self.partial.remove(&key);
            return Err(mismatch("has another chunk count"));
        }
        if entry.0 != f.version {
            self.partial.remove(&key);
            return Err(mismatch("has another parameter version"));
        }
        entry.1[f.chunk_index as usize] = Some(f.payload);
        if entry.1.iter().any(Option::is_none) {
            return Ok(None);
        }
        let (version, parts) = self.partial.remove(&key).unwrap_or_default();
        let body: Vec<u8> = parts.into_iter().flatten().flatten().collect();
        Ok(Some(Message {
            kind: f.kind,
            actor: f.actor,
            epoch: f.epoch,
            seq: f.seq,
            version,
            leaves: decode_body(&body)?,
        }))
    }

    /// Messages with chunks still missing.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }
}
