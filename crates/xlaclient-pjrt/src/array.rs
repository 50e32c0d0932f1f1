//! `ndarray` arrays in and out of buffers (feature `ndarray`).
//!
//! - [`Client::buffer_from_array`] uploads any [`ArrayBase`] (an owned array, a
//!   view, a `CowArray`, an `ArcArray`) of any rank and any strides. An array
//!   already in the standard layout (row-major, contiguous: what
//!   `ArrayBase::as_slice` accepts) goes up from its own memory, exactly as
//!   [`Client::buffer_from_host`] with its slice; any other (a transposed,
//!   sliced, stepped or negative-stride view, a Fortran-order array) is first
//!   copied into row-major order, once.
//! - [`Buffer::to_array`] reads a buffer into an owned [`Array`] of a fixed
//!   dimension (`to_array::<f32, Ix2>()`) or of dynamic rank (`IxDyn`,
//!   [`Buffer::to_arrayd`]). Another element type or rank than the buffer's is an
//!   [`Error::ArrayMismatch`] naming both.
//! - [`NdArray`] is an array of any element type (one variant per XLA element
//!   type), for trees whose leaves differ in type (a model's `f32` weights and
//!   its `i64` step counter) and for files read without knowing their types.
//!
//! `f16` and `bf16` elements are the `half` crate's [`half::f16`] and
//! [`half::bf16`]: the crate's own host types for XLA's `f16` and `bf16` (the
//! same two-byte layouts), so `Array<half::f16, _>` moves as any other array.
//!
//! ```
//! use ndarray::{array, s, Ix2};
//! use xlaclient_pjrt::Client;
//!
//! let client = Client::cpu()?;
//! let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! // A transposed view: copied into row-major order, then uploaded.
//! let t = client.buffer_from_array(&a.t())?;
//! assert_eq!(t.dims()?, [3, 2]);
//! assert_eq!(t.to_array::<f32, Ix2>()?, a.t());
//! // A negative-stride slice.
//! let r = client.buffer_from_array(&a.slice(s![.., ..;-2]))?;
//! assert_eq!(r.to_vec::<f32>()?, [3.0, 1.0, 6.0, 4.0]);
//! // Another type or rank than the buffer's: an error naming both.
//! let err = t.to_array::<f64, ndarray::Ix3>().unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "array mismatch: the buffer is f32[3,2] (rank 2), the array asked for is f64 of rank 3"
//! );
//! # Ok::<(), xlaclient_pjrt::Error>(())
//! ```

use std::borrow::Cow;

use ndarray::{Array, ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};

use crate::buffer::Buffer;
use crate::client::Client;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::float8::{F8E4M3FN, F8E5M2};
use crate::shape::{ElementType, NativeType, Shape};

/// An array's dimensions as XLA's (`i64`).
fn dims_of(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// `"f64 of rank 3"` or `"f64 of any rank"`: what a requested array type is.
fn requested<T: NativeType, D: Dimension>() -> String {
    match D::NDIM {
        Some(r) => format!("{} of rank {r}", T::TYPE),
        None => format!("{} of any rank", T::TYPE),
    }
}

/// `"f32[2,3] (rank 2)"`.
fn described(ty: ElementType, dims: &[i64]) -> String {
    format!("{} (rank {})", Shape::array(ty, dims), dims.len())
}

/// Whether an array of `ty` and `dims` can be read as `Array<T, D>`.
fn check<T: NativeType, D: Dimension>(
    what: &'static str,
    ty: ElementType,
    dims: &[i64],
) -> Result<()> {
    if ty != T::TYPE || D::NDIM.is_some_and(|r| r != dims.len()) {
        return Err(Error::ArrayMismatch {
            what,
            expected: described(ty, dims),
            given: requested::<T, D>(),
        });
    }
    Ok(())
}

impl Client {
    /// Uploads an `ndarray` array (owned, a view, any rank, any strides) to a new
    /// buffer on the default device, with the array's shape as the dims.
    ///
    /// An array in the standard layout goes up from its own memory, as
    /// [`buffer_from_host`](Self::buffer_from_host) with its slice (no copy on
    /// the Rust side); any other is copied into row-major order first.
    ///
    /// # Errors
    /// The plugin's refusal (e.g. out of memory).
    pub fn buffer_from_array<S, D>(&self, array: &ArrayBase<S, D>) -> Result<Buffer>
    where
        S: Data,
        S::Elem: NativeType,
        D: Dimension,
    {
        let (values, dims) = row_major(array);
        self.buffer_from_host(&values, &dims)
    }
}

/// An array's values in row-major order (borrowed when its layout already is
/// the standard one, else copied) and its dimensions.
fn row_major<S, D>(array: &ArrayBase<S, D>) -> (Cow<'_, [S::Elem]>, Vec<i64>)
where
    S: Data,
    S::Elem: Clone,
    D: Dimension,
{
    let values = match array.as_slice() {
        Some(values) => Cow::Borrowed(values),
        None => Cow::Owned(array.iter().cloned().collect()),
    };
    (values, dims_of(array.shape()))
}

impl Device {
    /// Uploads an `ndarray` array to a new buffer on this device (see
    /// [`Client::buffer_from_array`]).
    ///
    /// # Errors
    /// The plugin's refusal.
    pub fn buffer_from_array<S, D>(&self, array: &ArrayBase<S, D>) -> Result<Buffer>
    where
        S: Data,
        S::Elem: NativeType,
        D: Dimension,
    {
        let (values, dims) = row_major(array);
        self.buffer_from_host(&values, &dims)
    }
}

impl Buffer {
    /// The buffer's values in a new array of element type `T` and dimension `D`
    /// (`Ix2`, or `IxDyn` for any rank), in the standard layout.
    ///
    /// # Errors
    /// [`Error::ArrayMismatch`] when `T` is not the buffer's element type or `D`
    /// not its rank (naming both); as [`copy_to_host`](Self::copy_to_host).
    pub fn to_array<T: NativeType, D: Dimension>(&self) -> Result<Array<T, D>> {
        let ty = self.element_type()?;
        let dims = self.dims()?;
        check::<T, D>("the buffer", ty, &dims)?;
        let values = self.to_vec::<T>()?;
        let shape: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
        let a = ArrayD::from_shape_vec(IxDyn(&shape), values).map_err(|e| Error::HostLength {
            what: format!("the buffer's dimensions {dims:?} ({e})"),
            expected: shape.iter().product::<usize>() as i64,
            given: 0,
        })?;
        a.into_dimensionality::<D>()
            .map_err(|_| Error::ArrayMismatch {
                what: "the buffer",
                expected: described(ty, &dims),
                given: requested::<T, D>(),
            })
    }

    /// The buffer's values in a new array of any rank ([`to_array`](Self::to_array)
    /// with `IxDyn`).
    ///
    /// # Errors
    /// As [`to_array`](Self::to_array).
    pub fn to_arrayd<T: NativeType>(&self) -> Result<ArrayD<T>> {
        self.to_array::<T, IxDyn>()
    }

    /// The buffer's values in an [`NdArray`] of its own element type.
    ///
    /// # Errors
    /// As [`copy_to_host`](Self::copy_to_host).
    pub fn to_ndarray(&self) -> Result<NdArray> {
        NdArray::from_buffer(self)
    }
}

macro_rules! nd_array {
    ($($variant:ident($t:ty)),* $(,)?) => {
        /// An `ndarray` array of any element type XLA stores: one variant per
        /// [`ElementType`], each an [`ArrayD`] of that type's host type. A tree
        /// leaf for trees whose arrays differ in element type, and what a NumPy
        /// file's array is read into.
        ///
        /// Made from any array with `From` (`NdArray::from(array)`) or from a
        /// buffer ([`NdArray::from_buffer`]); taken apart with
        /// [`into_array`](NdArray::into_array) and [`view`](NdArray::view).
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub enum NdArray {
            $(
                #[doc = concat!("An array of `", stringify!($t), "` (XLA's `", stringify!($variant), "`).")]
                $variant(ArrayD<$t>),
            )*
        }

        $(
            impl ArrayElement for $t {
                fn wrap(array: ArrayD<Self>) -> NdArray {
                    NdArray::$variant(array)
                }
                fn unwrap(array: NdArray) -> std::result::Result<ArrayD<Self>, NdArray> {
                    match array {
                        NdArray::$variant(a) => Ok(a),
                        other => Err(other),
                    }
                }
                fn unwrap_ref(array: &NdArray) -> Option<&ArrayD<Self>> {
                    match array {
                        NdArray::$variant(a) => Some(a),
                        _ => None,
                    }
                }
            }
        )*

        impl NdArray {
            /// The element type.
            pub fn element_type(&self) -> ElementType {
                match self {
                    $(NdArray::$variant(_) => <$t as NativeType>::TYPE,)*
                }
            }

            /// The dimension sizes.
            pub fn shape(&self) -> &[usize] {
                match self {
                    $(NdArray::$variant(a) => a.shape(),)*
                }
            }

            /// Uploads the array to a new buffer on the client's default device
            /// (see [`Client::buffer_from_array`]).
            ///
            /// # Errors
            /// The plugin's refusal.
            pub fn to_buffer(&self, client: &Client) -> Result<Buffer> {
                match self {
                    $(NdArray::$variant(a) => client.buffer_from_array(a),)*
                }
            }

            /// Uploads the array to a new buffer on `device`.
            ///
            /// # Errors
            /// The plugin's refusal.
            pub fn to_buffer_on(&self, device: &Device) -> Result<Buffer> {
                match self {
                    $(NdArray::$variant(a) => device.buffer_from_array(a),)*
                }
            }

            /// A buffer's values, in the variant of its element type.
            ///
            /// # Errors
            /// [`Error::ArrayMismatch`] for a complex buffer (`c64`, `c128`: no
            /// host type); as [`Buffer::copy_to_host`].
            pub fn from_buffer(buffer: &Buffer) -> Result<NdArray> {
                match buffer.element_type()? {
                    $(ElementType::$variant => Ok(NdArray::$variant(buffer.to_arrayd::<$t>()?)),)*
                    other => Err(Error::ArrayMismatch {
                        what: "the buffer",
                        expected: described(other, &buffer.dims()?),
                        given: "an NdArray, which holds no complex numbers".to_string(),
                    }),
                }
            }
        }
    };
}

nd_array! {
    Pred(bool),
    S8(i8),
    S16(i16),
    S32(i32),
    S64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F16(half::f16),
    Bf16(half::bf16),
    F32(f32),
    F64(f64),
    F8E5M2(F8E5M2),
    F8E4M3FN(F8E4M3FN),
}

/// An element type of an [`NdArray`]: every [`NativeType`]. The methods move an
/// array in and out of its variant (used by `From`, [`NdArray::into_array`] and
/// [`NdArray::view`]).
pub trait ArrayElement: NativeType {
    /// The array in its variant.
    fn wrap(array: ArrayD<Self>) -> NdArray;
    /// The array of the variant of `Self`, or `array` back when it holds another.
    fn unwrap(array: NdArray) -> std::result::Result<ArrayD<Self>, NdArray>;
    /// A reference to the array of the variant of `Self`, if it is that one.
    fn unwrap_ref(array: &NdArray) -> Option<&ArrayD<Self>>;
}

impl NdArray {
    /// The dimension sizes as XLA's `i64`s.
    pub fn dims(&self) -> Vec<i64> {
        dims_of(self.shape())
    }

    /// The element type and dims as a [`Shape`].
    pub fn xla_shape(&self) -> Shape {
        Shape::array(self.element_type(), &self.dims())
    }

    /// The array as `Array<T, D>` (`into_array::<f32, Ix2>()`, or `IxDyn` for any
    /// rank), without a copy.
    ///
    /// # Errors
    /// [`Error::ArrayMismatch`] for another element type or rank, naming both.
    pub fn into_array<T: ArrayElement, D: Dimension>(self) -> Result<Array<T, D>> {
        let (ty, dims) = (self.element_type(), self.dims());
        let mismatch = || Error::ArrayMismatch {
            what: "the NdArray",
            expected: described(ty, &dims),
            given: requested::<T, D>(),
        };
        check::<T, D>("the NdArray", ty, &dims)?;
        T::unwrap(self)
            .map_err(|_| mismatch())?
            .into_dimensionality::<D>()
            .map_err(|_| mismatch())
    }

    /// A view of the array as elements of `T` (any rank).
    ///
    /// # Errors
    /// [`Error::ArrayMismatch`] for another element type, naming both.
    pub fn view<T: ArrayElement>(&self) -> Result<ArrayViewD<'_, T>> {
        check::<T, IxDyn>("the NdArray", self.element_type(), &self.dims())?;
        T::unwrap_ref(self)
            .map(|a| a.view())
            .ok_or_else(|| Error::ArrayMismatch {
                what: "the NdArray",
                expected: described(self.element_type(), &self.dims()),
                given: requested::<T, IxDyn>(),
            })
    }
}

impl<T: ArrayElement, D: Dimension> From<Array<T, D>> for NdArray {
    fn from(array: Array<T, D>) -> NdArray {
        T::wrap(array.into_dyn())
    }
}
