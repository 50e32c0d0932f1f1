//! The guard around serialized executables.
//!
//! XLA's serialized executables cannot be checked from outside, and some plugins
//! abort the process on damaged ones (the 0.81 CPU plugin: "Check failed:
//! code_align.value() <= page_size"). So what this crate writes carries a header,
//! and every byte of it is checked before any byte reaches the plugin:
//!
//! | bytes | what |
//! |---|---|
//! | 0..8 | the magic `XLACLEXE` |
//! | 8..12 | format version ([`FORMAT_VERSION`]), little-endian `u32` |
//! | 12..20 | length of everything after the checksum, little-endian `u64` |
//! | 20..52 | SHA-256 of everything after it |
//! | 52.. | the plugin's identity (length-prefixed UTF-8), the entry parameter shapes (a flag, then a length-prefixed `ProgramShapeProto`), XLA's bytes (length-prefixed) |
//!
//! The identity names the plugin that wrote the bytes (PJRT C API version,
//! platform name and version, the plugin's attributes, the size and modification
//! time of its file); bytes written by another plugin are refused, not handed over.
//! The checksum guards against damage and mix-ups (a truncated download, a flipped
//! bit, a file of another program), not against someone who rewrites the file on
//! purpose, checksum included: the bytes are trusted code either way.

use prost::Message;
use sha2::{Digest, Sha256};

use crate::proto;
use crate::shape::Shape;

/// The first bytes of every guarded executable.
pub const MAGIC: [u8; 8] = *b"XLACLEXE";

/// The version of the guarded layout this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Bytes before the guarded part: magic, version, length, checksum.
const FIXED: usize = 8 + 4 + 8 + 32;

/// Why guarded bytes were refused (see [`Error::SerializedExecutable`](crate::Error::SerializedExecutable)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// The bytes do not start with the guard's magic: not written by
    /// `LoadedExecutable::serialize` (raw XLA bytes from elsewhere load only through
    /// the `unsafe` `Client::deserialize_executable_unguarded`).
    #[error(
        "the bytes do not start with xlaclient's header (not written by LoadedExecutable::serialize)"
    )]
    NotGuarded,
    /// Written in another version of the guarded layout.
    #[error("format version {found}; this crate reads version {supported}")]
    FormatVersion {
        /// The version in the header.
        found: u32,
        /// The version this crate reads.
        supported: u32,
    },
    /// Fewer or more bytes than the header says (a truncated or appended file).
    #[error("the header says {expected} bytes follow it, {found} do (truncated or extended)")]
    Length {
        /// The length the header states.
        expected: u64,
        /// The length found.
        found: u64,
    },
    /// The bytes changed after they were written.
    #[error("the SHA-256 checksum does not match: the bytes were damaged after they were written")]
    Checksum,
    /// Written by another plugin (or another build or install of it).
    #[error("written by another plugin: `{written_by}`; this client's is `{this}`")]
    OtherPlugin {
        /// The identity in the header.
        written_by: String,
        /// This client's plugin identity.
        this: String,
    },
    /// The header's fields are inconsistent (checksum intact: written by a buggy
    /// or foreign writer).
    #[error("malformed header: {0}")]
    Malformed(String),
}

/// Wraps XLA's serialized executable `payload` with the guard.
pub(crate) fn wrap(identity: &str, params: Option<&[Shape]>, payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(payload.len() + identity.len() + 64);
    put_bytes(&mut body, identity.as_bytes());
    match params {
        None => body.push(0),
        Some(ps) => {
            body.push(1);
            let shape = proto::ProgramShapeProto {
                parameters: ps.iter().map(Shape::to_proto).collect(),
                ..Default::default()
            };
            put_bytes(&mut body, &shape.encode_to_vec());
        }
    }
    put_bytes(&mut body, payload);
    let mut out = Vec::with_capacity(FIXED + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(&body));
    out.extend_from_slice(&body);
    out
}

/// What a guarded executable holds.
#[derive(Debug)]
pub(crate) struct Unwrapped<'a> {
    /// The entry parameter shapes, when the writer knew them.
    pub params: Option<Vec<Shape>>,
    /// XLA's serialized executable.
    pub payload: &'a [u8],
}

/// Checks `bytes` against the guard and this plugin's `identity`; on success the
/// payload may be handed to the plugin.
pub(crate) fn unwrap<'a>(bytes: &'a [u8], identity: &str) -> Result<Unwrapped<'a>, GuardError> {
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(GuardError::NotGuarded);
    }
    if bytes.len() < FIXED {
        return Err(GuardError::Length {
            expected: FIXED as u64,
            found: bytes.len() as u64,
        });
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(GuardError::FormatVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let expected = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let body = &bytes[FIXED..];
    if expected != body.len() as u64 {
        return Err(GuardError::Length {
            expected,
            found: body.len() as u64,
        });
    }
    if Sha256::digest(body)[..] != bytes[20..FIXED] {
        return Err(GuardError::Checksum);
    }
    let mut r = Reader(body);
    let written_by = std::str::from_utf8(r.bytes("identity")?)
        .map_err(|_| GuardError::Malformed("the identity is not UTF-8".into()))?;
    if written_by != identity {
        return Err(GuardError::OtherPlugin {
            written_by: written_by.to_string(),
            this: identity.to_string(),
        });
    }
    let params = match r.byte("parameter flag")? {
        0 => None,
        1 => {
            let p = proto::ProgramShapeProto::decode(r.bytes("parameter shapes")?)
                .map_err(|e| GuardError::Malformed(format!("parameter shapes: {e}")))?;
            let shapes = p
                .parameters
                .iter()
                .map(|s| {
                    Shape::from_proto(s).ok_or_else(|| {
                        GuardError::Malformed("a parameter shape this crate does not read".into())
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Some(shapes)
        }
        f => return Err(GuardError::Malformed(format!("parameter flag {f}"))),
    };
    let payload = r.bytes("executable")?;
    if !r.0.is_empty() {
        return Err(GuardError::Malformed(format!(
            "{} bytes after the executable",
            r.0.len()
        )));
    }
    Ok(Unwrapped { params, payload })
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
}

/// Reads the length-prefixed fields of the guarded part.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], GuardError> {
        if self.0.len() < n {
            return Err(GuardError::Malformed(format!(
                "{what}: {n} bytes needed, {} left",
                self.0.len()
            )));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn byte(&mut self, what: &str) -> Result<u8, GuardError> {
        Ok(self.take(1, what)?[0])
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8], GuardError> {
        let n = u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes"));
        let n =
            usize::try_from(n).map_err(|_| GuardError::Malformed(format!("{what}: length {n}")))?;
        self.take(n, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::ElementType;

    fn sample() -> Vec<u8> {
        let params = [Shape::array(ElementType::F32, &[2, 3])];
        wrap("plugin A", Some(&params), b"xla bytes")
    }

    #[test]
    fn round_trip_keeps_the_parameters_and_the_payload() {
        let bytes = sample();
        let u = unwrap(&bytes, "plugin A").unwrap();
        assert_eq!(u.payload, b"xla bytes");
        assert_eq!(
            u.params,
            Some(vec![Shape::array(ElementType::F32, &[2, 3])])
        );
        let none = wrap("plugin A", None, b"");
        let u = unwrap(&none, "plugin A").unwrap();
        assert_eq!((u.params, u.payload), (None, &b""[..]));
    }

    #[test]
    fn every_single_bit_flip_is_refused() {
        let good = sample();
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut b = good.clone();
                b[i] ^= 1 << bit;
                assert!(unwrap(&b, "plugin A").is_err(), "byte {i} bit {bit}");
            }
        }
    }

    #[test]
    fn truncation_extension_and_other_plugins_are_refused() {
        let good = sample();
        for n in 0..good.len() {
            assert!(unwrap(&good[..n], "plugin A").is_err(), "cut at {n}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(matches!(
            unwrap(&longer, "plugin A"),
            Err(GuardError::Length { .. })
        ));
        assert!(matches!(
            unwrap(&good, "plugin B"),
            Err(GuardError::OtherPlugin { .. })
        ));
        assert_eq!(
            unwrap(b"\x7fELF....", "plugin A").unwrap_err(),
            GuardError::NotGuarded
        );
        let mut v2 = good;
        v2[8] = 2;
        assert!(matches!(
            unwrap(&v2, "plugin A"),
            Err(GuardError::FormatVersion { found: 2, .. })
        ));
    }
}
