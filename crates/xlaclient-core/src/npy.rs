//! NumPy files: `.npy` arrays and `.npz` archives read into buffers, arrays and
//! trees, and written back (feature `npy`).
//!
//! - [`read_npy`] / [`parse_npy`] read one array into an [`NdArray`] (its dtype
//!   decides the variant); [`load_npy`] uploads it to a [`Buffer`];
//!   [`write_npy`] / [`save_npy`] write one back (NumPy's format version 1.0,
//!   little-endian, C order).
//! - [`Npz`] is an `.npz` archive read into memory (`np.savez` and
//!   `np.savez_compressed` both: stored and deflated members). Its keys name the
//!   leaves of a tree: [`Npz::tree`] and [`Npz::buffers`] (and [`load_npz`]) read
//!   it into the structure of a spec of [`Shape`]s, key = the leaf's path
//!   ([`Tree::leaf_paths`]: `layers.0.w`, as checkpoints name their tensors,
//!   `xlaclient_nn::checkpoint`), with `/` in a key read as `.` (`layers/0/w`,
//!   the separator of flattened JAX/Flax parameter dicts) and `arr_0` (what
//!   `np.savez(f, a)` names a lone array) standing for a bare leaf's empty path.
//!   Every leaf's dtype and dims are checked against the spec; a missing key, a
//!   key that names no leaf, or two keys naming one leaf is an error naming them.
//!   [`save_npz`] and [`save_npz_arrays`] write a tree back under the same keys
//!   (stored, uncompressed), which `np.load` reads as a dict of arrays.
//!
//! Element types: NumPy's `bool`, `int8`…`int64`, `uint8`…`uint64`,
//! `float16`, `float32` and `float64` (either byte order; Fortran-order files are
//! read into the standard row-major layout). XLA's `bf16` and 8-bit floats have
//! no NumPy dtype (NumPy has no bfloat16; `ml_dtypes`' is stored as raw void
//! bytes) and are refused when writing; complex, string, structured and object
//! (pickled) arrays are refused when reading. Every malformed file — truncated,
//! trailing bytes, a bad header, a shape whose element count overflows, a
//! corrupt zip — is an [`Error::Npy`] naming the file, never a panic.
//!
//! The format is read and written by the `npyz` crate, chosen over
//! `ndarray-npy` for two reasons: it reads and writes `float16` through `half`
//! (the crate of this workspace's `f16`/`bf16` host types), where `ndarray-npy`
//! has no `float16`; and it exposes a file's dtype before decoding it, so an
//! archive of mixed dtypes is read by dispatching on each member's dtype at run
//! time (`ndarray-npy` wants the element type at compile time). The archive is
//! read and written with the `zip` crate directly (an `.npz` is a zip of `.npy`
//! members), not through `npyz`'s `npz` feature, whose zip 0.6 pulls every
//! compressor with it (C builds of bzip2 and zstd).
//!
//! ```
//! use ndarray::{array, Ix2};
//! use xlaclient_core::npy::{self, Npz};
//! use xlaclient_core::{Client, NdArray, Shape, Tree};
//!
//! #[derive(Tree)]
//! struct Layer<T> {
//!     w: T,
//!     b: T,
//! }
//!
//! let client = Client::cpu()?;
//! let dir = std::env::temp_dir().join(format!("xlaclient-npy-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let file = dir.join("params.npz");
//!
//! // A tree of buffers written as `0.w`, `0.b`, `1.w`, `1.b`.
//! let params = vec![
//!     Layer {
//!         w: client.buffer_from_array(&array![[1.0f32, 2.0], [3.0, 4.0]])?,
//!         b: client.buffer_from_array(&array![0.5f32, -0.5])?,
//!     },
//!     Layer {
//!         w: client.buffer_from_array(&array![[5.0f32], [6.0]])?,
//!         b: client.buffer_from_array(&array![7.0f32])?,
//!     },
//! ];
//! npy::save_npz(&file, &params)?;
//! assert_eq!(Npz::read(&file)?.names(), ["0.w", "0.b", "1.w", "1.b"]);
//!
//! // Read back into the structure of a spec, every leaf's dtype and dims checked.
//! let spec = vec![
//!     Layer { w: Shape::of::<f32>(&[2, 2]), b: Shape::of::<f32>(&[2]) },
//!     Layer { w: Shape::of::<f32>(&[2, 1]), b: Shape::of::<f32>(&[1]) },
//! ];
//! let restored = npy::load_npz(&client, &file, &spec)?;
//! assert_eq!(restored[1].w.to_array::<f32, Ix2>()?, array![[5.0f32], [6.0]]);
//!
//! // A spec the file does not fit: an error naming the leaf and both shapes.
//! let wrong = vec![Layer { w: Shape::of::<f64>(&[2, 2]), b: Shape::of::<f32>(&[2]) }];
//! let err = Npz::read(&file)?.tree(&wrong).err().unwrap().to_string();
//! assert!(err.contains("leaf 0.w: the spec is f64[2,2], the file holds f32[2,2]"), "{err}");
//!
//! // One array.
//! npy::write_npy(dir.join("x.npy"), &NdArray::from(array![1i64, 2, 3]))?;
//! let x = npy::read_npy(dir.join("x.npy"))?;
//! assert_eq!(x.into_array::<i64, ndarray::Ix1>()?, array![1i64, 2, 3]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), xlaclient_core::Error>(())
//! ```

use std::collections::HashMap;
use std::fmt::Display;
use std::io::{Cursor, Read, Write};
use std::path::Path;

use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use npyz::{DType, NpyFile, Order, TypeChar, WriterBuilder};

use crate::error::{Error, Result};
use crate::pjrt::{ArrayElement, Buffer, Client, NdArray};
use crate::shape::{ElementType, Shape};
use crate::tree::Tree;

/// What bytes in memory are called in errors.
const BYTES: &str = "<bytes>";

/// Brackets deeper than this in a header are refused before it is parsed (a
/// plain array's header nests 2 deep; the parser recurses on nesting).
const MAX_HEADER_NESTING: usize = 32;

fn npy_error(what: &str, reason: impl Display) -> Error {
    Error::Npy {
        path: what.to_string(),
        reason: reason.to_string(),
    }
}

/// Checks what `npyz` would trust in a header: the nesting of its brackets
/// (its parser recurses) and the element count of its shape (it multiplies the
/// dimensions unchecked). A header this does not understand is left to `npyz`,
/// which refuses it with an error.
fn guard_header(what: &str, bytes: &[u8]) -> Result<()> {
    if bytes.len() < 10 || !bytes.starts_with(b"\x93NUMPY") {
        return Ok(());
    }
    let (len, start): (usize, usize) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else if bytes.len() >= 12 {
        (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        )
    } else {
        return Ok(());
    };
    let text = &bytes[start..bytes.len().min(start.saturating_add(len))];
    let mut depth = 0usize;
    for &c in text {
        match c {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_HEADER_NESTING {
                    return Err(npy_error(
                        what,
                        format!("bad header: brackets nested more than {MAX_HEADER_NESTING} deep"),
                    ));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let text = String::from_utf8_lossy(text);
    let Some(at) = text.find("'shape'").or_else(|| text.find("\"shape\"")) else {
        return Ok(());
    };
    let rest = &text[at..];
    let (Some(open), Some(close)) = (rest.find('('), rest.find(')')) else {
        return Ok(());
    };
    if close < open {
        return Ok(());
    }
    let mut count: u64 = 1;
    for token in rest[open + 1..close].split(',') {
        let token = token.trim().trim_end_matches('L');
        if token.is_empty() {
            continue;
        }
        let Ok(d) = token.parse::<u64>() else {
            return Ok(());
        };
        // Zero-sized dimensions are skipped: the strides of the others must fit too.
        if d > 0 {
            count = count.checked_mul(d).ok_or_else(|| {
                npy_error(
                    what,
                    format!(
                        "bad header: the shape ({}) has more elements than fit in 64 bits",
                        rest[open + 1..close].trim()
                    ),
                )
            })?;
        }
    }
    Ok(())
}

/// A dtype as NumPy writes it in a header, without quotes (`<f4`).
fn descr_of(dtype: &DType) -> String {
    match dtype {
        DType::Plain(ts) => ts.to_string(),
        other => other.descr(),
    }
}

/// The XLA element type of a NumPy dtype, if it has one here.
fn element_type_of(dtype: &DType) -> Option<ElementType> {
    let DType::Plain(ts) = dtype else {
        return None;
    };
    Some(match (ts.type_char(), ts.size_field()) {
        (TypeChar::Bool, 1) => ElementType::Pred,
        (TypeChar::Int, 1) => ElementType::S8,
        (TypeChar::Int, 2) => ElementType::S16,
        (TypeChar::Int, 4) => ElementType::S32,
        (TypeChar::Int, 8) => ElementType::S64,
        (TypeChar::Uint, 1) => ElementType::U8,
        (TypeChar::Uint, 2) => ElementType::U16,
        (TypeChar::Uint, 4) => ElementType::U32,
        (TypeChar::Uint, 8) => ElementType::U64,
        (TypeChar::Float, 2) => ElementType::F16,
        (TypeChar::Float, 4) => ElementType::F32,
        (TypeChar::Float, 8) => ElementType::F64,
        _ => return None,
    })
}

/// Decodes the data of `bytes` (a whole `.npy`, header checked) as `T`.
fn decode<T>(what: &str, bytes: &[u8], shape: &[usize], order: Order) -> Result<NdArray>
where
    T: ArrayElement + npyz::Deserialize,
{
    let file = NpyFile::new(bytes).map_err(|e| npy_error(what, format!("bad header: {e}")))?;
    let values: Vec<T> = file
        .into_vec()
        .map_err(|e| npy_error(what, format!("bad data: {e}")))?;
    let dims = IxDyn(shape);
    let array = match order {
        Order::C => ArrayD::from_shape_vec(dims, values),
        Order::Fortran => {
            ArrayD::from_shape_vec(dims.f(), values).map(|a| a.as_standard_layout().into_owned())
        }
    }
    .map_err(|e| npy_error(what, format!("the data does not fill the shape: {e}")))?;
    Ok(T::wrap(array))
}

/// Reads a whole `.npy` file's bytes, errors naming `what`.
fn parse(what: &str, bytes: &[u8]) -> Result<NdArray> {
    guard_header(what, bytes)?;
    let file = NpyFile::new(bytes).map_err(|e| npy_error(what, format!("bad header: {e}")))?;
    let dtype = file.dtype();
    let order = file.order();
    let shape64 = file.shape().to_vec();
    let data_len = file.into_inner().len();
    let Some(ty) = element_type_of(&dtype) else {
        return Err(npy_error(
            what,
            format!(
                "dtype {} has no XLA element type here (supported: bool, int8-int64, uint8-uint64, float16, float32, float64)",
                descr_of(&dtype)
            ),
        ));
    };
    let shape = shape64
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<Vec<usize>, _>>()
        .map_err(|_| npy_error(what, format!("shape {shape64:?} does not fit in memory")))?;
    let needed = shape
        .iter()
        .try_fold(ty.byte_size(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| npy_error(what, format!("shape {shape64:?} does not fit in memory")))?;
    if data_len != needed {
        return Err(npy_error(
            what,
            format!(
                "{} data: the header's {} {shape64:?} needs {needed} bytes, the file holds {data_len}",
                if data_len < needed {
                    "truncated"
                } else {
                    "trailing bytes after the"
                },
                descr_of(&dtype)
            ),
        ));
    }
    match ty {
        ElementType::Pred => decode::<bool>(what, bytes, &shape, order),
        ElementType::S8 => decode::<i8>(what, bytes, &shape, order),
        ElementType::S16 => decode::<i16>(what, bytes, &shape, order),
        ElementType::S32 => decode::<i32>(what, bytes, &shape, order),
        ElementType::S64 => decode::<i64>(what, bytes, &shape, order),
        ElementType::U8 => decode::<u8>(what, bytes, &shape, order),
        ElementType::U16 => decode::<u16>(what, bytes, &shape, order),
        ElementType::U32 => decode::<u32>(what, bytes, &shape, order),
        ElementType::U64 => decode::<u64>(what, bytes, &shape, order),
        ElementType::F16 => decode::<half::f16>(what, bytes, &shape, order),
        ElementType::F32 => decode::<f32>(what, bytes, &shape, order),
        ElementType::F64 => decode::<f64>(what, bytes, &shape, order),
        other => Err(npy_error(what, format!("no reader for {other}"))),
    }
}

/// Parses the bytes of a `.npy` file into an array of its dtype.
///
/// # Errors
/// [`Error::Npy`] (named `<bytes>`) for a malformed, truncated or unsupported
/// file.
pub fn parse_npy(bytes: &[u8]) -> Result<NdArray> {
    parse(BYTES, bytes)
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| npy_error(&path.display().to_string(), format!("reading: {e}")))
}

/// Reads a `.npy` file into an array of its dtype.
///
/// # Errors
/// [`Error::Npy`] naming the file: it cannot be read, or is malformed,
/// truncated or of an unsupported dtype.
pub fn read_npy(path: impl AsRef<Path>) -> Result<NdArray> {
    let path = path.as_ref();
    parse(&path.display().to_string(), &read_file(path)?)
}

/// Reads a `.npy` file into a new buffer on the client's default device.
///
/// # Errors
/// As [`read_npy`]; the plugin's refusal.
pub fn load_npy(client: &Client, path: impl AsRef<Path>) -> Result<Buffer> {
    Ok(read_npy(path)?.to_buffer(client)?)
}

fn encode_typed<T: npyz::AutoSerialize + Copy>(array: &ArrayD<T>) -> std::io::Result<Vec<u8>> {
    let shape: Vec<u64> = array.shape().iter().map(|&d| d as u64).collect();
    let mut out = Vec::new();
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&shape)
        .writer(&mut out)
        .begin_nd()?;
    writer.extend(array.iter().copied())?;
    writer.finish()?;
    Ok(out)
}

fn encode(what: &str, array: &NdArray) -> Result<Vec<u8>> {
    let bytes = match array {
        NdArray::Pred(a) => encode_typed(a),
        NdArray::S8(a) => encode_typed(a),
        NdArray::S16(a) => encode_typed(a),
        NdArray::S32(a) => encode_typed(a),
        NdArray::S64(a) => encode_typed(a),
        NdArray::U8(a) => encode_typed(a),
        NdArray::U16(a) => encode_typed(a),
        NdArray::U32(a) => encode_typed(a),
        NdArray::U64(a) => encode_typed(a),
        NdArray::F16(a) => encode_typed(a),
        NdArray::F32(a) => encode_typed(a),
        NdArray::F64(a) => encode_typed(a),
        other => {
            return Err(npy_error(
                what,
                format!(
                    "{} has no NumPy dtype (NumPy has no bfloat16 or 8-bit floats): convert the array first",
                    other.element_type()
                ),
            ));
        }
    };
    bytes.map_err(|e| npy_error(what, format!("encoding: {e}")))
}

/// The bytes of a `.npy` file holding `array`.
///
/// # Errors
/// [`Error::Npy`] for an element type NumPy has no dtype for (`bf16`, 8-bit
/// floats).
pub fn npy_bytes(array: &NdArray) -> Result<Vec<u8>> {
    encode(BYTES, array)
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed over
/// `path` once complete: a failure never leaves a partial file under the name.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let what = path.display().to_string();
    let name = path
        .file_name()
        .ok_or_else(|| npy_error(&what, "the path names no file"))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        npy_error(&what, format!("writing: {e}"))
    })
}

/// Writes `array` as a `.npy` file (replacing `path` atomically).
///
/// # Errors
/// As [`npy_bytes`]; the I/O error.
pub fn write_npy(path: impl AsRef<Path>, array: &NdArray) -> Result<()> {
    let path = path.as_ref();
    let bytes = encode(&path.display().to_string(), array)?;
    write_atomically(path, &bytes)
}

/// Downloads `buffer` and writes it as a `.npy` file.
///
/// # Errors
/// As [`write_npy`]; the download's failure.
pub fn save_npy(path: impl AsRef<Path>, buffer: &Buffer) -> Result<()> {
    write_npy(path, &NdArray::from_buffer(buffer)?)
}

/// An `.npz` archive read into memory: its arrays by key (the member names
/// without `.npy`), in the archive's order.
#[derive(Clone, Debug)]
pub struct Npz {
    what: String,
    arrays: Vec<(String, NdArray)>,
}

/// The npz key of a leaf path: the path itself, `arr_0` for a bare leaf.
fn key_of_path(path: &str) -> String {
    if path.is_empty() {
        "arr_0".to_string()
    } else {
        path.to_string()
    }
}

/// The leaf path a key names: `/` read as `.`.
fn path_of_key(key: &str) -> String {
    key.replace('/', ".")
}

impl Npz {
    /// Reads an `.npz` file (from `np.savez` or `np.savez_compressed`).
    ///
    /// # Errors
    /// [`Error::Npy`] naming the file (and the member, `FILE:KEY`): it cannot be
    /// read, is not a zip, a member is corrupt (its CRC is checked), is not an
    /// `.npy`, or is malformed, truncated or of an unsupported dtype.
    pub fn read(path: impl AsRef<Path>) -> Result<Npz> {
        let path = path.as_ref();
        Npz::parse(path.display().to_string(), &read_file(path)?)
    }

    /// Parses the bytes of an `.npz` file (named `<bytes>` in errors).
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn from_bytes(bytes: &[u8]) -> Result<Npz> {
        Npz::parse(BYTES.to_string(), bytes)
    }

    fn parse(what: String, bytes: &[u8]) -> Result<Npz> {
        let zip_error = |e: zip::result::ZipError| npy_error(&what, format!("bad archive: {e}"));
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(zip_error)?;
        let mut arrays = Vec::new();
        for i in 0..zip.len() {
            let mut member = zip.by_index(i).map_err(zip_error)?;
            if member.is_dir() {
                continue;
            }
            let name = member.name().to_string();
            let member_what = format!("{what}:{name}");
            let Some(key) = name.strip_suffix(".npy") else {
                return Err(npy_error(&member_what, "a member that is not an .npy"));
            };
            // At most the declared size (and one byte to tell a longer member).
            let declared = member.size();
            let mut data = Vec::new();
            (&mut member)
                .take(declared.saturating_add(1))
                .read_to_end(&mut data)
                .map_err(|e| npy_error(&member_what, format!("bad archive member: {e}")))?;
            if data.len() as u64 != declared {
                return Err(npy_error(
                    &member_what,
                    format!(
                        "bad archive member: {} bytes declared, {} read",
                        declared,
                        data.len()
                    ),
                ));
            }
            let array = parse(&format!("{what}:{key}"), &data)?;
            arrays.push((key.to_string(), array));
        }
        Ok(Npz { what, arrays })
    }

    /// The keys, in the archive's order.
    pub fn names(&self) -> Vec<&str> {
        self.arrays.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// The array of `key`.
    pub fn get(&self, key: &str) -> Option<&NdArray> {
        self.arrays.iter().find(|(k, _)| k == key).map(|(_, a)| a)
    }

    /// The keys and their arrays, in the archive's order.
    pub fn arrays(&self) -> &[(String, NdArray)] {
        &self.arrays
    }

    /// The arrays in the structure of `spec`: each leaf's array is the one whose
    /// key is the leaf's path (see the [module docs](self) for the mapping), of
    /// the spec's element type and dims.
    ///
    /// # Errors
    /// [`Error::Npy`] for a leaf with no key, a leaf whose array has another
    /// dtype or dims than the spec (naming the leaf and both), keys that name no
    /// leaf, or two keys naming one leaf.
    pub fn tree<T: Tree<Shape>>(&self, spec: &T) -> Result<T::With<NdArray>> {
        let mut by_path: HashMap<String, usize> = HashMap::new();
        for (i, (key, _)) in self.arrays.iter().enumerate() {
            let path = if key == "arr_0" {
                String::new()
            } else {
                path_of_key(key)
            };
            if let Some(j) = by_path.insert(path.clone(), i) {
                return Err(npy_error(
                    &self.what,
                    format!(
                        "keys {:?} and {:?} both name the leaf {path:?}",
                        self.arrays[j].0, key
                    ),
                ));
            }
        }
        let mut used = vec![false; self.arrays.len()];
        let mut failure = None;
        let mut picked = Vec::new();
        spec.visit_paths(&mut String::new(), &mut |path, shape| {
            if failure.is_some() {
                return;
            }
            let Some(&i) = by_path.get(path) else {
                failure = Some(format!(
                    "no array for the leaf {:?} (key {:?}); the file holds {}",
                    path,
                    key_of_path(path),
                    self.names_listed()
                ));
                return;
            };
            used[i] = true;
            let array = &self.arrays[i].1;
            let held = array.xla_shape();
            if shape.element_type() != Some(array.element_type()) || shape.dims() != held.dims() {
                failure = Some(format!(
                    "leaf {}: the spec is {shape}, the file holds {held} (key {:?})",
                    if path.is_empty() { "(the root)" } else { path },
                    self.arrays[i].0
                ));
                return;
            }
            picked.push(array.clone());
        });
        if let Some(reason) = failure {
            return Err(npy_error(&self.what, reason));
        }
        let extra: Vec<&str> = self
            .arrays
            .iter()
            .zip(&used)
            .filter(|(_, u)| !**u)
            .map(|((k, _), _)| k.as_str())
            .collect();
        if !extra.is_empty() {
            return Err(npy_error(
                &self.what,
                format!("keys that name no leaf of the spec: {extra:?}"),
            ));
        }
        Ok(spec.rebuild(picked)?)
    }

    /// As [`tree`](Self::tree), each array uploaded to the client's default
    /// device.
    ///
    /// # Errors
    /// As [`tree`](Self::tree); the plugin's refusal.
    pub fn buffers<T: Tree<Shape>>(&self, client: &Client, spec: &T) -> Result<T::With<Buffer>> {
        let arrays = self.tree(spec)?;
        let device = client.default_device()?;
        let buffers = arrays
            .leaves()
            .into_iter()
            .map(|a| Ok(a.to_buffer_on(&device)?))
            .collect::<Result<Vec<Buffer>>>()?;
        Ok(spec.rebuild(buffers)?)
    }

    fn names_listed(&self) -> String {
        const SHOWN: usize = 8;
        let names = self.names();
        if names.len() <= SHOWN {
            format!("{names:?}")
        } else {
            format!("{:?} and {} more", &names[..SHOWN], names.len() - SHOWN)
        }
    }
}

/// Reads an `.npz` file into buffers in the structure of `spec` (see
/// [`Npz::tree`]).
///
/// # Errors
/// As [`Npz::read`] and [`Npz::buffers`].
pub fn load_npz<T: Tree<Shape>>(
    client: &Client,
    path: impl AsRef<Path>,
    spec: &T,
) -> Result<T::With<Buffer>> {
    Npz::read(path)?.buffers(client, spec)
}

/// The bytes of an `.npz` archive of `entries` (key, array), in order, stored
/// uncompressed.
///
/// # Errors
/// [`Error::Npy`] for an array NumPy has no dtype for, or a key given twice.
pub fn npz_bytes<'a>(entries: impl IntoIterator<Item = (&'a str, &'a NdArray)>) -> Result<Vec<u8>> {
    npz_encode(BYTES, entries)
}

fn npz_encode<'a>(
    what: &str,
    entries: impl IntoIterator<Item = (&'a str, &'a NdArray)>,
) -> Result<Vec<u8>> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(true);
    let zip_error = |e: zip::result::ZipError| npy_error(what, format!("writing the archive: {e}"));
    let mut seen = std::collections::HashSet::new();
    for (key, array) in entries {
        if !seen.insert(key) {
            return Err(npy_error(what, format!("the key {key:?} is given twice")));
        }
        let bytes = encode(&format!("{what}:{key}"), array)?;
        zip.start_file(format!("{key}.npy"), options)
            .map_err(zip_error)?;
        zip.write_all(&bytes)
            .map_err(|e| npy_error(what, format!("writing the archive: {e}")))?;
    }
    Ok(zip.finish().map_err(zip_error)?.into_inner())
}

/// Writes `entries` (key, array) as an `.npz` file (replacing `path`
/// atomically).
///
/// # Errors
/// As [`npz_bytes`]; the I/O error.
pub fn write_npz<'a>(
    path: impl AsRef<Path>,
    entries: impl IntoIterator<Item = (&'a str, &'a NdArray)>,
) -> Result<()> {
    let path = path.as_ref();
    let bytes = npz_encode(&path.display().to_string(), entries)?;
    write_atomically(path, &bytes)
}

/// Writes a tree of arrays as an `.npz` file, each leaf under its path
/// (`arr_0` for a bare leaf), which `np.load` reads as a dict and
/// [`load_npz`] reads back into the tree.
///
/// # Errors
/// As [`write_npz`].
pub fn save_npz_arrays<T: Tree<NdArray>>(path: impl AsRef<Path>, tree: &T) -> Result<()> {
    let mut entries: Vec<(String, &NdArray)> = Vec::new();
    tree.visit_paths(&mut String::new(), &mut |p, a| {
        entries.push((key_of_path(p), a))
    });
    write_npz(path, entries.iter().map(|(k, a)| (k.as_str(), *a)))
}

/// Downloads every leaf of a tree of buffers and writes them as an `.npz` file
/// (see [`save_npz_arrays`]).
///
/// # Errors
/// As [`write_npz`]; a download's failure.
pub fn save_npz<T: Tree<Buffer>>(path: impl AsRef<Path>, tree: &T) -> Result<()> {
    let arrays: T::With<NdArray> =
        tree.try_map_ref(&mut |b: &Buffer| -> Result<NdArray> { Ok(NdArray::from_buffer(b)?) })?;
    save_npz_arrays(path, &arrays)
}
