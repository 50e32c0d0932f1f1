//! Checkpoints: trees of arrays saved to and loaded from
//! [safetensors](https://github.com/huggingface/safetensors) files.
//!
//! Each leaf of the tree is one tensor of the file, named by its path in the tree
//! ([`Tree::leaf_paths`]: field names and element indices joined by `.`, such as
//! `layers.0.w`), with the safetensors dtype of its element type (`pred` → `BOOL`,
//! `s8`…`s64` → `I8`…`I64`, `u8`…`u64` → `U8`…`U64`, `f16` → `F16`, `bf16` → `BF16`,
//! `f32` → `F32`, `f64` → `F64`) and its dimensions as the shape. The file may carry
//! string metadata (a step count, a format version). The format itself is read and
//! written by the `safetensors` crate.
//!
//! - [`save`] downloads every leaf of a tree of [`Buffer`]s and writes the file
//!   atomically: into a temporary file in the same directory, flushed to disk, then
//!   renamed over the final name. A crash or a failed download never leaves a partial
//!   file under that name (at worst a stray `.NAME.*.tmp` beside it).
//! - [`load`] reads a file back into buffers shaped like a spec tree of [`Shape`]s,
//!   checking every leaf: a missing tensor, a tensor the tree does not name, another
//!   dtype or other dims is a [`CheckpointError`] naming the leaf and both sides. A
//!   file cut short or corrupt is an error too, never a panic.
//! - [`Checkpoint`] is a file read into memory, for the metadata, the tensor list,
//!   loading with extra tensors allowed ([`OnExtra::Ignore`]) or onto the host
//!   ([`HostArray`] leaves).
//!
//! ```no_run
//! use xlaclient_nn::checkpoint::{self, Checkpoint};
//! use xlaclient_core::{Client, Shape, Tree};
//!
//! #[derive(Tree)]
//! struct Layer<T> {
//!     w: T,
//!     b: T,
//! }
//!
//! let client = Client::cpu()?;
//! let spec = vec![
//!     Layer { w: Shape::of::<f32>(&[3, 4]), b: Shape::of::<f32>(&[4]) },
//!     Layer { w: Shape::of::<f32>(&[4, 2]), b: Shape::of::<f32>(&[2]) },
//! ];
//! let params = spec.try_map_ref(&mut |s| {
//!     let n = s.element_count().unwrap_or(0) as usize;
//!     client.buffer_from_host(&vec![0.5f32; n], s.dims())
//! })?;
//!
//! // Tensors `0.w`, `0.b`, `1.w`, `1.b`, and the step as metadata.
//! checkpoint::save_with_metadata("params.safetensors", &params, [("step", "1000")])?;
//!
//! let restored = checkpoint::load(&client, "params.safetensors", &spec)?;
//! assert_eq!(restored[1].b.to_vec::<f32>()?, [0.5, 0.5]);
//!
//! let file = Checkpoint::read("params.safetensors")?;
//! assert_eq!(file.metadata().get("step"), Some(&"1000"));
//! # Ok::<(), xlaclient_nn::Error>(())
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Metadata, View};
use safetensors::{Dtype, SafeTensorError, SafeTensors};

use crate::error::{Error, Result};
use crate::pjrt::{Buffer, Client};
use crate::shape::{ElementType, NativeType, Shape};
use crate::tree::{Leaf, Tree};

/// What is wrong with a checkpoint, or with the tree saved to or loaded from it;
/// carried by [`Error::Checkpoint`] with the file's path.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Reading, writing or renaming the file failed.
    Io {
        /// What was being done (`"reading"`, `"creating a temporary file in"`, …).
        action: &'static str,
        /// The I/O error's kind.
        kind: std::io::ErrorKind,
        /// The I/O error's message.
        message: String,
    },
    /// The file is not a well-formed safetensors file: cut short, padded, a header
    /// length past the end, a header that is not JSON, tensor offsets that do not
    /// tile the data. Also a tree the safetensors crate cannot write.
    Format {
        /// What is wrong, in words (with the safetensors crate's message).
        reason: String,
    },
    /// The tree has a leaf the file holds no tensor for.
    MissingTensor {
        /// The leaf's path.
        name: String,
        /// The shape the tree expects.
        expected: Shape,
    },
    /// The file holds tensors the tree has no leaf for ([`load`] refuses them; see
    /// [`OnExtra::Ignore`]).
    ExtraTensors {
        /// Their names, sorted.
        names: Vec<String>,
    },
    /// A tensor's dtype is not the leaf's element type.
    ElementType {
        /// The leaf's path.
        name: String,
        /// The shape the tree expects.
        expected: Shape,
        /// The tensor's safetensors dtype (`"F64"`).
        found: String,
    },
    /// A tensor's dimensions are not the leaf's.
    Dims {
        /// The leaf's path.
        name: String,
        /// The shape the tree expects.
        expected: Shape,
        /// The tensor's dimensions in the file.
        found: Vec<usize>,
    },
    /// Two leaves of the tree have the same path (a hand-written [`Tree`] impl can do
    /// that; derived trees cannot).
    DuplicateName {
        /// The path given twice.
        name: String,
    },
    /// A leaf or tensor whose type a checkpoint does not hold: a complex or tuple
    /// leaf, or a tensor of a dtype without an XLA element type here (`F8_E4M3`).
    Unsupported {
        /// The leaf's or tensor's name.
        name: String,
        /// The type, as XLA (`c64[2]`) or safetensors (`F8_E4M3`) names it.
        what: String,
    },
    /// A tensor's bytes are not values of its type (a `BOOL` byte other than 0 or 1).
    InvalidValue {
        /// The tensor's name.
        name: String,
        /// The index of the first bad element.
        index: usize,
    },
    /// Downloading a leaf (on save) or uploading it (on load) failed.
    Transfer {
        /// The leaf's path.
        name: String,
        /// The runtime's error (boxed: `Error` holds this type).
        error: Box<Error>,
    },
}

impl std::error::Error for CheckpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckpointError::Transfer { error, .. } => Some(&**error),
            _ => None,
        }
    }
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Io {
                action, message, ..
            } => write!(f, "{action} the file failed: {message}"),
            CheckpointError::Format { reason } => {
                write!(f, "not a valid safetensors file: {reason}")
            }
            CheckpointError::MissingTensor { name, expected } => write!(
                f,
                "the file has no tensor `{name}` (the tree's leaf is {expected})"
            ),
            CheckpointError::ExtraTensors { names } => {
                write!(
                    f,
                    "the file has {} tensor(s) the tree has no leaf for: ",
                    names.len()
                )?;
                write_names(f, names)
            }
            CheckpointError::ElementType {
                name,
                expected,
                found,
            } => {
                let ty = expected.element_type();
                let want = ty.and_then(dtype_of).map(|d| d.to_string());
                write!(
                    f,
                    "tensor `{name}` is {found} in the file; the tree's leaf is {expected} ({})",
                    want.as_deref().unwrap_or("no safetensors dtype")
                )
            }
            CheckpointError::Dims {
                name,
                expected,
                found,
            } => write!(
                f,
                "tensor `{name}` has dims {found:?} in the file; the tree's leaf is {expected} (dims {:?})",
                expected.dims()
            ),
            CheckpointError::DuplicateName { name } => write!(
                f,
                "two leaves of the tree have the path `{name}`; tensor names must be unique"
            ),
            CheckpointError::Unsupported { name, what } => {
                write!(f, "`{name}` is {what}, which checkpoints do not hold")
            }
            CheckpointError::InvalidValue { name, index } => write!(
                f,
                "tensor `{name}` element {index} is not a valid value of its dtype"
            ),
            CheckpointError::Transfer { name, error } => write!(f, "leaf `{name}`: {error}"),
        }
    }
}

/// What is wrong with a [`HostArray`] made or read; carried by [`Error::HostArray`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostArrayError {
    /// Host arrays do not hold this element type (a complex type: checkpoints have
    /// no dtype for it).
    #[error("host arrays do not hold {ty} (it has no safetensors dtype)")]
    Unsupported {
        /// The element type.
        ty: ElementType,
    },
    /// The values were asked for as another element type than the array holds.
    #[error("the array holds {held}; {wanted} was asked for")]
    ElementType {
        /// The array's element type.
        held: ElementType,
        /// The type asked for.
        wanted: ElementType,
    },
    /// A dimension is negative.
    #[error("dimension {axis} of {dims:?} is negative")]
    NegativeDimension {
        /// The dimensions given.
        dims: Vec<i64>,
        /// The first negative one.
        axis: usize,
    },
    /// The array would have more bytes than a `usize` counts.
    #[error("{ty}{dims:?} has more bytes than fit in memory")]
    TooLarge {
        /// The element type.
        ty: ElementType,
        /// The dimensions given.
        dims: Vec<i64>,
    },
    /// The bytes given are not as many as the element type and dimensions need.
    #[error("{shape} needs {expected} bytes, {got} given")]
    ByteCount {
        /// The array's shape.
        shape: Shape,
        /// The bytes it needs.
        expected: usize,
        /// The bytes given.
        got: usize,
    },
    /// An element's bytes are not a value of the type (a `pred` byte other than 0
    /// or 1).
    #[error("element {index} is not a valid {ty} (pred bytes must be 0 or 1)")]
    InvalidValue {
        /// The element type.
        ty: ElementType,
        /// The index of the first bad element.
        index: usize,
    },
}

/// At most ten names, then a count.
fn write_names(f: &mut fmt::Formatter<'_>, names: &[String]) -> fmt::Result {
    for (i, n) in names.iter().take(10).enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "`{n}`")?;
    }
    if names.len() > 10 {
        write!(f, " and {} more", names.len() - 10)?;
    }
    Ok(())
}

/// The safetensors dtype of an element type; `None` for the complex types, which
/// checkpoints do not hold.
///
/// ```
/// use xlaclient_nn::checkpoint::dtype_of;
/// use xlaclient_core::ElementType;
///
/// assert_eq!(dtype_of(ElementType::Pred).unwrap().to_string(), "BOOL");
/// assert_eq!(dtype_of(ElementType::Bf16).unwrap().to_string(), "BF16");
/// assert_eq!(dtype_of(ElementType::C64), None);
/// ```
pub fn dtype_of(ty: ElementType) -> Option<Dtype> {
    use ElementType as E;
    Some(match ty {
        E::Pred => Dtype::BOOL,
        E::S8 => Dtype::I8,
        E::S16 => Dtype::I16,
        E::S32 => Dtype::I32,
        E::S64 => Dtype::I64,
        E::U8 => Dtype::U8,
        E::U16 => Dtype::U16,
        E::U32 => Dtype::U32,
        E::U64 => Dtype::U64,
        E::F16 => Dtype::F16,
        E::Bf16 => Dtype::BF16,
        E::F32 => Dtype::F32,
        E::F64 => Dtype::F64,
        // safetensors' F8_E4M3 is the finite-only e4m3 that PyTorch and JAX write.
        E::F8E5M2 => Dtype::F8_E5M2,
        E::F8E4M3FN => Dtype::F8_E4M3,
        E::C64 | E::C128 => return None,
    })
}

/// The element type of a safetensors dtype (the inverse of [`dtype_of`]).
fn element_type_of(d: Dtype) -> Option<ElementType> {
    ElementType::ALL
        .into_iter()
        .find(|&t| dtype_of(t) == Some(d))
}

/// Calls the generic function `$f::<T>($args)` with `T` the Rust type of the element
/// type `$ty`; complex types are [`HostArrayError::Unsupported`].
macro_rules! for_native_type {
    ($ty:expr, $f:ident $(::<$g:ty>)? ($($arg:expr),*)) => {
        match $ty {
            ElementType::Pred => $f::<bool $(, $g)?>($($arg),*),
            ElementType::S8 => $f::<i8 $(, $g)?>($($arg),*),
            ElementType::S16 => $f::<i16 $(, $g)?>($($arg),*),
            ElementType::S32 => $f::<i32 $(, $g)?>($($arg),*),
            ElementType::S64 => $f::<i64 $(, $g)?>($($arg),*),
            ElementType::U8 => $f::<u8 $(, $g)?>($($arg),*),
            ElementType::U16 => $f::<u16 $(, $g)?>($($arg),*),
            ElementType::U32 => $f::<u32 $(, $g)?>($($arg),*),
            ElementType::U64 => $f::<u64 $(, $g)?>($($arg),*),
            ElementType::F16 => $f::<half::f16 $(, $g)?>($($arg),*),
            ElementType::Bf16 => $f::<half::bf16 $(, $g)?>($($arg),*),
            ElementType::F32 => $f::<f32 $(, $g)?>($($arg),*),
            ElementType::F64 => $f::<f64 $(, $g)?>($($arg),*),
            ElementType::F8E5M2 => $f::<xlaclient_core::float8::F8E5M2 $(, $g)?>($($arg),*),
            ElementType::F8E4M3FN => $f::<xlaclient_core::float8::F8E4M3FN $(, $g)?>($($arg),*),
            ty @ (ElementType::C64 | ElementType::C128) => {
                Err(Error::HostArray(HostArrayError::Unsupported { ty }))
            }
        }
    };
}

/// Decoding one element from its little-endian bytes.
trait FromLe: NativeType {
    /// `None` when the bytes are not a value (a `bool` byte other than 0 or 1).
    fn from_le(bytes: &[u8]) -> Option<Self>;
}

macro_rules! from_le {
    ($($t:ty),*) => {$(
        impl FromLe for $t {
            fn from_le(bytes: &[u8]) -> Option<Self> {
                Some(<$t>::from_le_bytes(bytes.try_into().ok()?))
            }
        }
    )*};
}
from_le!(
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    f32,
    f64,
    half::f16,
    xlaclient_core::float8::F8E5M2,
    xlaclient_core::float8::F8E4M3FN,
    half::bf16
);

impl FromLe for bool {
    fn from_le(bytes: &[u8]) -> Option<Self> {
        match bytes {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }
}

/// The values of `bytes` as `T`; `Err(i)` names the first element that is no value.
fn decode<T: FromLe>(bytes: &[u8]) -> std::result::Result<Vec<T>, usize> {
    bytes
        .chunks_exact(std::mem::size_of::<T>())
        .enumerate()
        .map(|(i, c)| T::from_le(c).ok_or(i))
        .collect()
}

/// [`decode`] as `T`, called with `T` the array's own type `S` (checked by the
/// caller): the typed vector, re-typed without a copy through `Any`.
fn decode_as<S: FromLe, T: NativeType>(bytes: &[u8]) -> Result<Vec<T>> {
    let values =
        decode::<S>(bytes).map_err(|index| HostArrayError::InvalidValue { ty: S::TYPE, index })?;
    let any: Box<dyn std::any::Any> = Box::new(values);
    any.downcast::<Vec<T>>().map(|v| *v).map_err(|_| {
        HostArrayError::ElementType {
            held: S::TYPE,
            wanted: T::TYPE,
        }
        .into()
    })
}

/// An array on the host, as a checkpoint stores it: element type, dimensions and
/// little-endian bytes. The leaf type of [`Checkpoint::host`] and [`save_host`].
///
/// ```
/// use xlaclient_nn::checkpoint::HostArray;
/// use xlaclient_core::Shape;
///
/// let a = HostArray::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
/// assert_eq!(a.shape(), Shape::of::<f32>(&[3]));
/// assert_eq!(a.bytes().len(), 12);
/// assert_eq!(a.to_vec::<f32>()?, [1.0, 2.0, 3.0]);
/// assert!(a.to_vec::<f64>().is_err());
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostArray {
    ty: ElementType,
    dims: Vec<i64>,
    bytes: Vec<u8>,
    /// `dims` as the safetensors shape.
    shape: Vec<usize>,
}

impl Leaf for HostArray {}

impl HostArray {
    /// An array of `ty` and `dims` holding `bytes` (little endian, row major; `pred` as
    /// one byte 0 or 1).
    ///
    /// # Errors
    /// [`Error::HostArray`] with [`HostArrayError::Unsupported`] for a complex `ty`,
    /// [`HostArrayError::NegativeDimension`], [`HostArrayError::TooLarge`], or
    /// [`HostArrayError::ByteCount`] when the length of `bytes` is not what `ty` and
    /// `dims` need.
    pub fn new(ty: ElementType, dims: &[i64], bytes: Vec<u8>) -> Result<HostArray> {
        if dtype_of(ty).is_none() {
            return Err(HostArrayError::Unsupported { ty }.into());
        }
        if let Some(axis) = dims.iter().position(|&d| d < 0) {
            return Err(HostArrayError::NegativeDimension {
                dims: dims.to_vec(),
                axis,
            }
            .into());
        }
        let too_large = || HostArrayError::TooLarge {
            ty,
            dims: dims.to_vec(),
        };
        // None is negative, so a dimension that does not convert is above
        // `usize::MAX` (a 32-bit target): too large.
        let shape = dims
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(too_large)?;
        let need = shape
            .iter()
            .try_fold(ty.byte_size(), |n, &d| n.checked_mul(d))
            .ok_or_else(too_large)?;
        if bytes.len() != need {
            return Err(HostArrayError::ByteCount {
                shape: Shape::array(ty, dims),
                expected: need,
                got: bytes.len(),
            }
            .into());
        }
        Ok(HostArray {
            ty,
            dims: dims.to_vec(),
            bytes,
            shape,
        })
    }

    /// An array of `dims` holding `data`.
    ///
    /// # Errors
    /// [`Error::HostArray`] with [`HostArrayError::ByteCount`] when `data`'s length
    /// is not the product of `dims`, [`HostArrayError::NegativeDimension`].
    pub fn from_slice<T: NativeType>(data: &[T], dims: &[i64]) -> Result<HostArray> {
        let mut bytes = Vec::with_capacity(std::mem::size_of_val(data));
        T::extend_le_bytes(data, &mut bytes);
        HostArray::new(T::TYPE, dims, bytes)
    }

    /// Downloads a buffer.
    ///
    /// # Errors
    /// The buffer's download errors; [`HostArrayError::Unsupported`] for a complex
    /// buffer.
    pub fn from_buffer(buffer: &Buffer) -> Result<HostArray> {
        let (ty, dims) = (buffer.element_type()?, buffer.dims()?);
        let bytes = for_native_type!(ty, download(buffer))?;
        HostArray::new(ty, &dims, bytes)
    }

    /// Uploads the array to the client's default device.
    ///
    /// # Errors
    /// The upload's errors; [`HostArrayError::InvalidValue`] for a `pred` array
    /// holding a byte other than 0 or 1.
    pub fn to_buffer(&self, client: &Client) -> Result<Buffer> {
        for_native_type!(self.ty, upload(client, &self.bytes, &self.dims))
    }

    /// The values, typed.
    ///
    /// # Errors
    /// [`Error::HostArray`] with [`HostArrayError::ElementType`] when `T` is not the
    /// array's element type, [`HostArrayError::InvalidValue`] when a `pred` array
    /// holds a byte other than 0 or 1.
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>> {
        if T::TYPE != self.ty {
            return Err(HostArrayError::ElementType {
                held: self.ty,
                wanted: T::TYPE,
            }
            .into());
        }
        Ok(for_native_type!(self.ty, decode_as::<T>(&self.bytes))?)
    }

    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.ty
    }

    /// The dimension sizes.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// The shape (element type and dimensions).
    pub fn shape(&self) -> Shape {
        Shape::array(self.ty, &self.dims)
    }

    /// The little-endian bytes, row major.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, consuming the array.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

impl View for &HostArray {
    fn dtype(&self) -> Dtype {
        // `HostArray::new` refuses element types without a dtype.
        dtype_of(self.ty).unwrap_or(Dtype::U8)
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.bytes)
    }

    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn download<T: NativeType>(buffer: &Buffer) -> Result<Vec<u8>> {
    let values = buffer.to_vec::<T>()?;
    let mut bytes = Vec::with_capacity(std::mem::size_of_val(values.as_slice()));
    T::extend_le_bytes(&values, &mut bytes);
    Ok(bytes)
}

fn upload<T: FromLe>(client: &Client, bytes: &[u8], dims: &[i64]) -> Result<Buffer> {
    let values =
        decode::<T>(bytes).map_err(|index| HostArrayError::InvalidValue { ty: T::TYPE, index })?;
    Ok(client.buffer_from_host(&values, dims)?)
}

/// Saves a tree of buffers to a safetensors file at `path`, atomically (see
/// [`save_with_metadata`], which this calls with no metadata).
///
/// # Errors
/// As [`save_with_metadata`].
pub fn save<T: Tree<Buffer>>(path: impl AsRef<Path>, tree: &T) -> Result<()> {
    save_with_metadata(path, tree, std::iter::empty::<(String, String)>())
}

/// Downloads every leaf of `tree` and writes them with `metadata` (string pairs:
/// a step count, a format version) to a safetensors file at `path`, each tensor
/// named by its leaf's path ([`Tree::leaf_paths`]).
///
/// The file is written to a temporary file in `path`'s directory, flushed to disk
/// and renamed to `path`, replacing any file there: readers see the old file or the
/// complete new one, never a partial one. When a download fails nothing is written.
///
/// # Errors
/// [`Error::Checkpoint`] with [`CheckpointError::Transfer`] (a download failed, for
/// instance of a donated buffer), [`CheckpointError::Unsupported`] (a complex leaf),
/// [`CheckpointError::DuplicateName`], [`CheckpointError::Io`].
///
/// ```no_run
/// use xlaclient_core::Client;
/// use xlaclient_nn::checkpoint;
///
/// let client = Client::cpu()?;
/// let state = (client.buffer_from_host(&[1.0f32, 2.0], &[2])?, client.scalar(7i64)?);
/// // Tensors `0` (F32 [2]) and `1` (I64 []).
/// checkpoint::save_with_metadata("state.safetensors", &state, [("format", "1")])?;
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
pub fn save_with_metadata<T, K, V>(
    path: impl AsRef<Path>,
    tree: &T,
    metadata: impl IntoIterator<Item = (K, V)>,
) -> Result<()>
where
    T: Tree<Buffer>,
    K: Into<String>,
    V: Into<String>,
{
    let path = path.as_ref();
    let host = named_leaves(path, tree)?
        .into_iter()
        .map(|(name, buffer)| {
            let transfer = |name, e| {
                let error = Box::new(e);
                checkpoint_error(path, CheckpointError::Transfer { name, error })
            };
            match buffer.shape() {
                Ok(shape) if shape.element_type().and_then(dtype_of).is_none() => {
                    let what = shape.to_string();
                    Err(checkpoint_error(
                        path,
                        CheckpointError::Unsupported { name, what },
                    ))
                }
                Ok(_) => match HostArray::from_buffer(buffer) {
                    Ok(a) => Ok((name, a)),
                    Err(e) => Err(transfer(name, e)),
                },
                Err(e) => Err(transfer(name, e.into())),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    write_file(path, host, metadata)
}

/// Writes a tree of host arrays to a safetensors file at `path`, atomically, as
/// [`save_with_metadata`] does for buffers.
///
/// # Errors
/// [`Error::Checkpoint`] with [`CheckpointError::DuplicateName`] or
/// [`CheckpointError::Io`].
///
/// ```no_run
/// use xlaclient_nn::checkpoint::{self, HostArray};
///
/// let tree = vec![HostArray::from_slice(&[true, false], &[2])?];
/// checkpoint::save_host("mask.safetensors", &tree, [("step", "0")])?;
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
pub fn save_host<T, K, V>(
    path: impl AsRef<Path>,
    tree: &T,
    metadata: impl IntoIterator<Item = (K, V)>,
) -> Result<()>
where
    T: Tree<HostArray>,
    K: Into<String>,
    V: Into<String>,
{
    let path = path.as_ref();
    let named = named_leaves(path, tree)?;
    write_file(path, named, metadata)
}

/// The leaves of `tree` with their paths; an error if two share one.
fn named_leaves<'a, L: Leaf, T: Tree<L>>(path: &Path, tree: &'a T) -> Result<Vec<(String, &'a L)>> {
    let mut out = Vec::new();
    tree.visit_paths(&mut String::new(), &mut |p, leaf| {
        out.push((p.to_string(), leaf))
    });
    let mut seen = HashSet::new();
    for (name, _) in &out {
        if !seen.insert(name.as_str()) {
            return Err(checkpoint_error(
                path,
                CheckpointError::DuplicateName { name: name.clone() },
            ));
        }
    }
    Ok(out)
}

/// Serializes the named arrays and writes them to `path` through a temporary file.
fn write_file<A, K, V>(
    path: &Path,
    arrays: Vec<(String, A)>,
    metadata: impl IntoIterator<Item = (K, V)>,
) -> Result<()>
where
    A: std::borrow::Borrow<HostArray>,
    K: Into<String>,
    V: Into<String>,
{
    let metadata: HashMap<String, String> = metadata
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let bytes = safetensors::serialize(
        arrays.iter().map(|(n, a)| (n.as_str(), a.borrow())),
        (!metadata.is_empty()).then_some(metadata),
    )
    .map_err(|e| {
        checkpoint_error(
            path,
            CheckpointError::Format {
                reason: e.to_string(),
            },
        )
    })?;
    let io = |action: &'static str| {
        move |e: std::io::Error| {
            checkpoint_error(
                path,
                CheckpointError::Io {
                    action,
                    kind: e.kind(),
                    message: e.to_string(),
                },
            )
        }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io("creating a temporary file for"))?;
    temp.write_all(&bytes).map_err(io("writing"))?;
    temp.as_file().sync_all().map_err(io("flushing"))?;
    temp.persist(path)
        .map_err(|e| io("renaming the temporary file to")(e.error))?;
    // Make the rename itself durable; a directory that cannot be opened or synced
    // (some file systems) leaves the file complete, only its name less durable.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn checkpoint_error(path: &Path, error: CheckpointError) -> Error {
    Error::Checkpoint {
        path: path.to_path_buf(),
        error: Box::new(error),
    }
}

/// Loads a checkpoint into buffers on `client`'s default device, shaped like `spec`:
/// the tensor named by each leaf's path must exist and have the leaf's element type
/// and dims, and the file may hold no other tensor (see [`Checkpoint::buffers`] to
/// allow that).
///
/// # Errors
/// [`Error::Checkpoint`] naming the file and what is wrong: [`CheckpointError::Io`],
/// [`CheckpointError::Format`] (cut short or corrupt),
/// [`CheckpointError::MissingTensor`], [`CheckpointError::ExtraTensors`],
/// [`CheckpointError::ElementType`], [`CheckpointError::Dims`], … .
///
/// ```no_run
/// use xlaclient_core::{Client, Shape};
/// use xlaclient_nn::checkpoint;
///
/// let client = Client::cpu()?;
/// let spec = (Shape::of::<f32>(&[2]), Shape::of::<i64>(&[]));
/// let (x, step) = checkpoint::load(&client, "state.safetensors", &spec)?;
/// println!("{:?} at step {}", x.to_vec::<f32>()?, step.to_scalar::<i64>()?);
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
pub fn load<T: Tree<Shape>>(
    client: &Client,
    path: impl AsRef<Path>,
    spec: &T,
) -> Result<T::With<Buffer>> {
    Checkpoint::read(path)?.buffers(client, spec, OnExtra::Error)
}

/// Loads a checkpoint onto the host, shaped like `spec`, with the checks of [`load`].
///
/// # Errors
/// As [`load`].
///
/// ```no_run
/// use xlaclient_core::Shape;
/// use xlaclient_nn::checkpoint;
///
/// let spec = vec![Shape::of::<bool>(&[2])];
/// let mask = checkpoint::load_host("mask.safetensors", &spec)?;
/// assert_eq!(mask[0].to_vec::<bool>()?, [true, false]);
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
pub fn load_host<T: Tree<Shape>>(path: impl AsRef<Path>, spec: &T) -> Result<T::With<HostArray>> {
    Checkpoint::read(path)?.host(spec, OnExtra::Error)
}

/// What loading does with tensors of the file that the tree has no leaf for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnExtra {
    /// Refuse the file: [`CheckpointError::ExtraTensors`] (what [`load`] does).
    Error,
    /// Load the leaves the tree names and leave the rest (a sub-tree of a larger
    /// checkpoint).
    Ignore,
}

/// A safetensors file read into memory and checked to be well formed: its
/// metadata, its tensors, and loading them into a tree.
///
/// ```no_run
/// use xlaclient_nn::checkpoint::{Checkpoint, OnExtra};
/// use xlaclient_core::Shape;
///
/// let file = Checkpoint::read("state.safetensors")?;
/// for name in file.names() {
///     println!("{name}: {:?}", file.shape(&name));
/// }
/// // Just one tensor, leaving the others.
/// let step = file.host(&Shape::of::<i64>(&[]), OnExtra::Ignore);
/// # Ok::<(), xlaclient_nn::Error>(())
/// ```
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    bytes: Vec<u8>,
    /// Where the tensor data starts in `bytes` (after the length and the header).
    data_start: usize,
    header: Metadata,
}

impl Checkpoint {
    /// Reads the whole file and checks its header (the safetensors crate's checks:
    /// header length within the file, JSON, offsets that tile the data exactly).
    ///
    /// # Errors
    /// [`Error::Checkpoint`] with [`CheckpointError::Io`] or
    /// [`CheckpointError::Format`].
    pub fn read(path: impl AsRef<Path>) -> Result<Checkpoint> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| {
            checkpoint_error(
                path,
                CheckpointError::Io {
                    action: "reading",
                    kind: e.kind(),
                    message: e.to_string(),
                },
            )
        })?;
        Checkpoint::from_bytes(path, bytes)
    }

    /// Parses the bytes of a file; `path` is for error messages only.
    ///
    /// # Errors
    /// [`Error::Checkpoint`] with [`CheckpointError::Format`].
    pub fn from_bytes(path: impl AsRef<Path>, bytes: Vec<u8>) -> Result<Checkpoint> {
        let path = path.as_ref();
        match SafeTensors::read_metadata(&bytes) {
            Ok((n, header)) => Ok(Checkpoint {
                path: path.to_path_buf(),
                data_start: 8 + n,
                bytes,
                header,
            }),
            Err(e) => Err(checkpoint_error(
                path,
                CheckpointError::Format {
                    reason: format_reason(&bytes, &e),
                },
            )),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's string metadata (`__metadata__`), sorted by key.
    pub fn metadata(&self) -> BTreeMap<&str, &str> {
        self.header
            .metadata()
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// The names of the file's tensors, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.header.tensors().into_keys().collect();
        names.sort_unstable();
        names
    }

    /// The safetensors dtype of the tensor `name`; `None` when there is none.
    pub fn dtype(&self, name: &str) -> Option<Dtype> {
        self.header.info(name).map(|i| i.dtype)
    }

    /// The shape of the tensor `name`; `None` when there is none, or its dtype has
    /// no element type here (an 8-bit float: see [`Checkpoint::dtype`]).
    pub fn shape(&self, name: &str) -> Option<Shape> {
        let info = self.header.info(name)?;
        let ty = element_type_of(info.dtype)?;
        let dims = info
            .shape
            .iter()
            .map(|&d| i64::try_from(d).ok())
            .collect::<Option<Vec<i64>>>()?;
        Some(Shape::array(ty, &dims))
    }

    /// The tensors named by `spec`'s leaf paths, as host arrays in a tree shaped like
    /// `spec`, each checked against its leaf's shape.
    ///
    /// # Errors
    /// As [`load`]; tensors the tree does not name are an error only with
    /// [`OnExtra::Error`].
    pub fn host<T: Tree<Shape>>(&self, spec: &T, extra: OnExtra) -> Result<T::With<HostArray>> {
        let arrays = self.checked(spec, extra)?;
        spec.rebuild(arrays).map_err(Error::from)
    }

    /// The tensors named by `spec`'s leaf paths, uploaded to `client`'s default
    /// device, in a tree shaped like `spec`; each is checked against its leaf's
    /// shape before anything is uploaded.
    ///
    /// # Errors
    /// As [`load`]; tensors the tree does not name are an error only with
    /// [`OnExtra::Error`].
    pub fn buffers<T: Tree<Shape>>(
        &self,
        client: &Client,
        spec: &T,
        extra: OnExtra,
    ) -> Result<T::With<Buffer>> {
        let arrays = self.checked(spec, extra)?;
        let names = spec.leaf_paths();
        let buffers = arrays
            .iter()
            .zip(names)
            .map(|(a, name)| {
                a.to_buffer(client).map_err(|e| {
                    self.error(CheckpointError::Transfer {
                        name,
                        error: Box::new(e),
                    })
                })
            })
            .collect::<Result<Vec<_>>>()?;
        spec.rebuild(buffers).map_err(Error::from)
    }

    /// Every leaf of `spec` checked against its tensor and copied out, in flattening
    /// order; then the extra tensors.
    fn checked<T: Tree<Shape>>(&self, spec: &T, extra: OnExtra) -> Result<Vec<HostArray>> {
        let leaves = named_leaves(&self.path, spec)?;
        let mut out = Vec::with_capacity(leaves.len());
        for (name, expected) in &leaves {
            out.push(self.array(name, expected).map_err(|e| self.error(e))?);
        }
        if extra == OnExtra::Error {
            let wanted: HashSet<&str> = leaves.iter().map(|(n, _)| n.as_str()).collect();
            let mut names: Vec<String> = self
                .header
                .tensors()
                .into_keys()
                .filter(|n| !wanted.contains(n.as_str()))
                .collect();
            if !names.is_empty() {
                names.sort_unstable();
                return Err(self.error(CheckpointError::ExtraTensors { names }));
            }
        }
        Ok(out)
    }

    /// The tensor `name`, checked against the leaf's shape `expected`.
    fn array(
        &self,
        name: &str,
        expected: &Shape,
    ) -> std::result::Result<HostArray, CheckpointError> {
        let Some(ty) = expected.element_type().filter(|&t| dtype_of(t).is_some()) else {
            return Err(CheckpointError::Unsupported {
                name: name.to_string(),
                what: expected.to_string(),
            });
        };
        let Some(info) = self.header.info(name) else {
            return Err(CheckpointError::MissingTensor {
                name: name.to_string(),
                expected: expected.clone(),
            });
        };
        if element_type_of(info.dtype) != Some(ty) {
            return Err(CheckpointError::ElementType {
                name: name.to_string(),
                expected: expected.clone(),
                found: info.dtype.to_string(),
            });
        }
        let same_dims = info.shape.len() == expected.rank()
            && info
                .shape
                .iter()
                .zip(expected.dims())
                .all(|(&f, &e)| i64::try_from(f) == Ok(e));
        if !same_dims {
            return Err(CheckpointError::Dims {
                name: name.to_string(),
                expected: expected.clone(),
                found: info.shape.clone(),
            });
        }
        let (start, end) = info.data_offsets;
        // `read_metadata` checked that the offsets tile the data; checked again here
        // so that a mistake is an error, not a panic.
        let bytes = self
            .data_start
            .checked_add(start)
            .zip(self.data_start.checked_add(end))
            .and_then(|(s, e)| self.bytes.get(s..e))
            .ok_or_else(|| CheckpointError::Format {
                reason: format!("the offsets of tensor `{name}` lie outside the file"),
            })?;
        if ty == ElementType::Pred {
            if let Err(index) = decode::<bool>(bytes) {
                return Err(CheckpointError::InvalidValue {
                    name: name.to_string(),
                    index,
                });
            }
        }
        HostArray::new(ty, expected.dims(), bytes.to_vec()).map_err(|e| CheckpointError::Format {
            reason: format!("tensor `{name}`: {e}"),
        })
    }

    fn error(&self, error: CheckpointError) -> Error {
        checkpoint_error(&self.path, error)
    }
}

/// The safetensors crate's error, with what the first bytes of the file say.
fn format_reason(bytes: &[u8], e: &SafeTensorError) -> String {
    let len = bytes.len();
    let header_len = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes);
    match (e, header_len) {
        (SafeTensorError::HeaderTooSmall, _) => {
            format!("the file has {len} bytes, fewer than the 8 of the header length (cut short?)")
        }
        (SafeTensorError::InvalidHeaderLength, Some(n)) => {
            format!("the header length {n} runs past the end of the file ({len} bytes; cut short?)")
        }
        (SafeTensorError::HeaderTooLarge, Some(n)) => {
            format!("the header length {n} is too large (corrupt?)")
        }
        (SafeTensorError::MetadataIncompleteBuffer, _) => format!(
            "the tensors of the header do not cover the file's {len} bytes exactly (cut short or padded)"
        ),
        _ => format!("{e} (file of {len} bytes)"),
    }
}
