//! Trees of `ndarray` arrays in and out of programs (feature `ndarray`).
//!
//! Two host leaf types ([`HostLeaf`]): [`NdArray`] (any element type, so a tree
//! may mix `f32` weights and an `i64` counter) and `Array<T, D>` (one element type
//! for the whole tree; `ArrayD<T>` for leaves of different ranks). [`to_buffers`]
//! uploads such a tree, [`from_buffers`] reads a tree of buffers back, and
//! [`Jit::call_arrays`](crate::Jit::call_arrays) does both around a call of a
//! jitted function: the least that turns `jit` into a function of arrays, with
//! the spec, the tracing and the compiled program unchanged.
//!
//! ```
//! use ndarray::{array, ArrayD, Ix1, Ix2};
//! use xlaclient_core::{Client, ClientExt, NdArray, Op, Shape, Tree};
//!
//! #[derive(Tree)]
//! struct Layer<T> {
//!     w: T,
//!     b: T,
//! }
//!
//! let client = Client::cpu()?;
//! let spec = Layer { w: Shape::of::<f32>(&[2, 2]), b: Shape::of::<f32>(&[2]) };
//! let step = client.jit("step", &spec, |_, p: Layer<Op>| Layer { w: &p.w * 2.0, b: &p.b + 1.0 })?;
//! let params = Layer {
//!     w: NdArray::from(array![[1.0f32, 2.0], [3.0, 4.0]]),
//!     b: NdArray::from(array![0.5f32, -0.5]),
//! };
//! let out = step.call_arrays(&params)?;
//! assert_eq!(out.w.into_array::<f32, Ix2>()?, array![[2.0f32, 4.0], [6.0, 8.0]]);
//! assert_eq!(out.b.into_array::<f32, Ix1>()?, array![1.5f32, 0.5]);
//!
//! // One element type throughout: plain `ArrayD<f32>` leaves.
//! let params: Layer<ArrayD<f32>> = Layer {
//!     w: array![[1.0f32, 2.0], [3.0, 4.0]].into_dyn(),
//!     b: array![0.5f32, -0.5].into_dyn(),
//! };
//! let out = step.call_arrays(&params)?;
//! assert_eq!(out.b, array![1.5f32, 0.5].into_dyn());
//! # Ok::<(), xlaclient_core::Error>(())
//! ```

use ndarray::{Array, Dimension};

use crate::error::Result;
use crate::pjrt::{Buffer, Client, Device, NativeType, NdArray};
use crate::tree::{Leaf, Tree};

/// A host array that a tree can hold as a leaf and move to and from a device:
/// [`NdArray`] and `Array<T, D>`.
pub trait HostLeaf: Leaf + Sized {
    /// Uploads the array to a new buffer on `device`.
    ///
    /// # Errors
    /// The plugin's refusal.
    fn upload(&self, device: &Device) -> Result<Buffer>;

    /// Reads a buffer into an array of this type.
    ///
    /// # Errors
    /// [`RuntimeError::ArrayMismatch`](crate::RuntimeError::ArrayMismatch) when the
    /// buffer's element type or rank is not this type's (naming both); the
    /// computation's failure.
    fn download(buffer: &Buffer) -> Result<Self>;
}

impl HostLeaf for NdArray {
    fn upload(&self, device: &Device) -> Result<Buffer> {
        Ok(self.to_buffer_on(device)?)
    }

    fn download(buffer: &Buffer) -> Result<Self> {
        Ok(NdArray::from_buffer(buffer)?)
    }
}

impl<T: NativeType, D: Dimension> HostLeaf for Array<T, D> {
    fn upload(&self, device: &Device) -> Result<Buffer> {
        Ok(device.buffer_from_array(self)?)
    }

    fn download(buffer: &Buffer) -> Result<Self> {
        Ok(buffer.to_array::<T, D>()?)
    }
}

/// Uploads every leaf of a tree of host arrays to the client's default device:
/// the same tree of [`Buffer`]s.
///
/// # Errors
/// The first upload's failure.
pub fn to_buffers<L: HostLeaf, T: Tree<L>>(client: &Client, tree: &T) -> Result<T::With<Buffer>> {
    let device = client.default_device()?;
    tree.try_map_ref(&mut |a: &L| a.upload(&device))
}

/// Reads every leaf of a tree of buffers into host arrays of type `L` (the same
/// tree of arrays).
///
/// # Errors
/// The first leaf whose element type or rank `L` cannot hold (naming both), or
/// whose computation failed.
pub fn from_buffers<L: HostLeaf, T: Tree<Buffer>>(tree: &T) -> Result<T::With<L>> {
    tree.try_map_ref(&mut |b: &Buffer| L::download(b))
}
