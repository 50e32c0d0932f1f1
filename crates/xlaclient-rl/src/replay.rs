//! A replay buffer of trees on the host: [`ReplayBuffer`] keeps the last
//! `capacity` items pushed (FIFO: the oldest goes first), samples uniformly with
//! replacement from an [`Rng`], and stacks the sampled items into one batch per
//! leaf, ready to upload for a [`Trainer`](crate::trainer::Trainer) step.
//!
//! An item is any [`Tree`] whose leaves are [`HostArray`]s (`f32` or `i32` arrays of
//! one example); a batch of `n` is the same tree with each leaf stacked to
//! `[n, ...]`.
//!
//! ```
//! use xlaclient_core::Tree;
//! use xlaclient_rl::Rng;
//! use xlaclient_rl::replay::{HostArray, ReplayBuffer};
//!
//! #[derive(Tree)]
//! struct Sample<T> {
//!     obs: T,
//!     action: T,
//! }
//!
//! let mut buffer = ReplayBuffer::new(2)?;
//! for i in 0..3 {
//!     buffer.push(Sample {
//!         obs: HostArray::f32(&[2], vec![i as f32, 1.0])?,
//!         action: HostArray::scalar_i32(i),
//!     })?;
//! }
//! assert_eq!(buffer.len(), 2); // item 0 was evicted
//! let batch = buffer.sample(5, &mut Rng::new(0))?;
//! assert_eq!(batch.obs.dims(), [5, 2]);
//! assert!(batch.action.as_i32().unwrap().iter().all(|&a| a == 1 || a == 2));
//! # Ok::<(), xlaclient_rl::Error>(())
//! ```

use xlaclient_core::tree::Leaf;

use crate::env::Rng;
use crate::error::{Error, Result};
use crate::pjrt::{Buffer, Client};
use crate::shape::{ElementType, Shape};
use crate::tree::Tree;

/// The values of a [`HostArray`].
#[derive(Clone, Debug, PartialEq)]
pub enum HostValues {
    /// `f32` values.
    F32(Vec<f32>),
    /// `i32` values.
    I32(Vec<i32>),
}

/// An `f32` or `i32` array on the host, row-major: one field of a replay item, or
/// a batch of them stacked. A [`Leaf`] of trees.
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    dims: Vec<i64>,
    values: HostValues,
}

impl Leaf for HostArray {}

fn count(dims: &[i64]) -> Option<usize> {
    dims.iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
}

impl HostArray {
    fn checked(dims: &[i64], values: HostValues, len: usize) -> Result<HostArray> {
        match count(dims) {
            Some(n) if n == len => Ok(HostArray {
                dims: dims.to_vec(),
                values,
            }),
            Some(n) => Err(Error::Length {
                what: format!("HostArray of dimensions {dims:?}: values"),
                given: len,
                expected: n,
            }),
            None => Err(Error::InvalidArgument {
                what: "dims",
                reason: format!("HostArray: dimensions {dims:?} must be non-negative"),
            }),
        }
    }

    /// An `f32` array of dimensions `dims`.
    ///
    /// # Errors
    /// [`Error::Length`] when `values` does not hold the product of `dims`,
    /// [`Error::InvalidArgument`] for a negative dimension.
    pub fn f32(dims: &[i64], values: Vec<f32>) -> Result<HostArray> {
        let n = values.len();
        HostArray::checked(dims, HostValues::F32(values), n)
    }

    /// An `i32` array of dimensions `dims`.
    ///
    /// # Errors
    /// As [`f32`](Self::f32).
    pub fn i32(dims: &[i64], values: Vec<i32>) -> Result<HostArray> {
        let n = values.len();
        HostArray::checked(dims, HostValues::I32(values), n)
    }

    /// An `f32` scalar.
    pub fn scalar_f32(x: f32) -> HostArray {
        HostArray {
            dims: Vec::new(),
            values: HostValues::F32(vec![x]),
        }
    }

    /// An `i32` scalar.
    pub fn scalar_i32(x: i32) -> HostArray {
        HostArray {
            dims: Vec::new(),
            values: HostValues::I32(vec![x]),
        }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// The element type (`F32` or `S32`).
    pub fn element_type(&self) -> ElementType {
        match self.values {
            HostValues::F32(_) => ElementType::F32,
            HostValues::I32(_) => ElementType::S32,
        }
    }

    /// The shape (element type and dimensions).
    pub fn shape(&self) -> Shape {
        match self.values {
            HostValues::F32(_) => Shape::of::<f32>(&self.dims),
            HostValues::I32(_) => Shape::of::<i32>(&self.dims),
        }
    }

    /// The values.
    pub fn values(&self) -> &HostValues {
        &self.values
    }

    /// The values, if `f32`.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.values {
            HostValues::F32(v) => Some(v),
            HostValues::I32(_) => None,
        }
    }

    /// The values, if `i32`.
    pub fn as_i32(&self) -> Option<&[i32]> {
        match &self.values {
            HostValues::I32(v) => Some(v),
            HostValues::F32(_) => None,
        }
    }

    /// Uploads the array to the client's first device.
    ///
    /// # Errors
    /// The runtime's error.
    pub fn to_buffer(&self, client: &Client) -> Result<Buffer> {
        Ok(match &self.values {
            HostValues::F32(v) => client.buffer_from_host(v, &self.dims)?,
            HostValues::I32(v) => client.buffer_from_host(v, &self.dims)?,
        })
    }

    /// `items` (all of one shape) stacked along a new first axis.
    fn stack(items: &[&HostArray], what: &str) -> Result<HostArray> {
        let Some(first) = items.first() else {
            return Err(Error::InvalidArgument {
                what: "items",
                reason: format!("{what}: nothing to stack"),
            });
        };
        let mut dims = vec![items.len() as i64];
        dims.extend_from_slice(&first.dims);
        let values = match &first.values {
            HostValues::F32(_) => HostValues::F32(
                items
                    .iter()
                    .flat_map(|a| a.as_f32().unwrap_or(&[]).iter().copied())
                    .collect(),
            ),
            HostValues::I32(_) => HostValues::I32(
                items
                    .iter()
                    .flat_map(|a| a.as_i32().unwrap_or(&[]).iter().copied())
                    .collect(),
            ),
        };
        Ok(HostArray { dims, values })
    }
}

/// A fixed-capacity FIFO buffer of items (trees of [`HostArray`]s) with uniform
/// sampling: see the [module docs](self).
///
/// Every item must have the structure, leaf shapes and element types of the first
/// one pushed; another is refused with an error naming the leaf.
#[derive(Clone, Debug)]
pub struct ReplayBuffer<S> {
    capacity: usize,
    items: Vec<S>,
    /// Where the next item goes once the buffer is full (the oldest item).
    next: usize,
    pushed: usize,
    /// The first item's leaf paths and shapes.
    signature: Option<Vec<(String, Shape)>>,
}

impl<S: Tree<HostArray>> ReplayBuffer<S> {
    /// An empty buffer that keeps at most `capacity` items.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a capacity of 0.
    pub fn new(capacity: usize) -> Result<ReplayBuffer<S>> {
        if capacity == 0 {
            return Err(Error::InvalidArgument {
                what: "capacity",
                reason: "ReplayBuffer::new(0): the capacity must be at least 1".into(),
            });
        }
        Ok(ReplayBuffer {
            capacity,
            items: Vec::new(),
            next: 0,
            pushed: 0,
            signature: None,
        })
    }

    fn signature_of(item: &S) -> Vec<(String, Shape)> {
        item.leaves_with_path()
            .into_iter()
            .map(|(p, a)| (p, a.shape()))
            .collect()
    }

    /// Adds `item`; when the buffer is full the oldest item is dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `item`'s leaves differ from the first item's
    /// (naming the first leaf that differs and both shapes).
    pub fn push(&mut self, item: S) -> Result<()> {
        let sig = Self::signature_of(&item);
        match &self.signature {
            None => self.signature = Some(sig),
            Some(expected) if *expected != sig => {
                let reason = if expected.len() != sig.len() {
                    format!(
                        "ReplayBuffer::push: the item has {} leaves, the buffer's items {}",
                        sig.len(),
                        expected.len()
                    )
                } else {
                    let (i, ((ep, es), (gp, gs))) = expected
                        .iter()
                        .zip(&sig)
                        .enumerate()
                        .find(|(_, (e, g))| e != g)
                        .unwrap_or((0, (&expected[0], &sig[0])));
                    format!(
                        "ReplayBuffer::push: leaf {i} `{gp}` is {gs}, the buffer's items have `{ep}` {es}"
                    )
                };
                return Err(Error::InvalidArgument {
                    what: "item",
                    reason,
                });
            }
            Some(_) => {}
        }
        if self.items.len() < self.capacity {
            self.items.push(item);
        } else {
            self.items[self.next] = item;
            self.next = (self.next + 1) % self.capacity;
        }
        self.pushed += 1;
        Ok(())
    }

    /// The number of items held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item is held.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The most items it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many items were pushed since it was made (evicted ones included).
    pub fn pushed(&self) -> usize {
        self.pushed
    }

    /// The items held, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &S> {
        let (newer, older) = self.items.split_at(self.next);
        older.iter().chain(newer)
    }

    /// The item `i` places from the oldest (`0` the oldest held).
    pub fn get(&self, i: usize) -> Option<&S> {
        if i >= self.items.len() {
            return None;
        }
        self.items.get((self.next + i) % self.items.len())
    }

    /// `n` indices drawn uniformly (with replacement) from `0..len()`, in the
    /// order of [`get`](Self::get).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the buffer is empty.
    pub fn sample_indices(&self, n: usize, rng: &mut Rng) -> Result<Vec<usize>> {
        if self.items.is_empty() {
            return Err(Error::InvalidArgument {
                what: "n",
                reason: format!("ReplayBuffer::sample({n}): the buffer is empty"),
            });
        }
        (0..n)
            .map(|_| Ok(rng.below(self.items.len() as u64)? as usize))
            .collect()
    }

    /// The items at `indices` (as [`get`](Self::get) numbers them) stacked: each
    /// leaf becomes `[indices.len(), ...]`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no index or an index out of range.
    pub fn gather(&self, indices: &[usize]) -> Result<S::With<HostArray>> {
        let mut leaves: Vec<Vec<&HostArray>> = Vec::new();
        for &i in indices {
            let Some(item) = self.get(i) else {
                return Err(Error::InvalidArgument {
                    what: "indices",
                    reason: format!(
                        "ReplayBuffer::gather: index {i}, the buffer holds {}",
                        self.len()
                    ),
                });
            };
            for (k, leaf) in item.leaves().into_iter().enumerate() {
                if leaves.len() <= k {
                    leaves.push(Vec::new());
                }
                leaves[k].push(leaf);
            }
        }
        let Some(first) = indices.first().and_then(|&i| self.get(i)) else {
            return Err(Error::InvalidArgument {
                what: "indices",
                reason: "ReplayBuffer::gather: no index given".into(),
            });
        };
        let mut k = 0;
        first.try_map_ref(&mut |_| {
            k += 1;
            HostArray::stack(&leaves[k - 1], "ReplayBuffer::gather")
        })
    }

    /// `n` items drawn uniformly with replacement, stacked (see
    /// [`gather`](Self::gather)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the buffer is empty or `n` is 0.
    pub fn sample(&self, n: usize, rng: &mut Rng) -> Result<S::With<HostArray>> {
        let idx = self.sample_indices(n, rng)?;
        self.gather(&idx)
    }

    /// The shapes of a batch of `n` stacked items (for
    /// [`Trainer::new`](crate::trainer::Trainer::new)'s batch spec), once an item
    /// was pushed.
    pub fn batch_spec(&self, n: usize) -> Option<S::With<Shape>> {
        let first = self.items.first()?;
        Some(first.map_ref(|a| {
            let mut dims = vec![n as i64];
            dims.extend_from_slice(a.dims());
            match a.values() {
                HostValues::F32(_) => Shape::of::<f32>(&dims),
                HostValues::I32(_) => Shape::of::<i32>(&dims),
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(xlaclient_core::Tree)]
    struct Item<T> {
        x: T,
        k: T,
    }

    fn item(i: i32) -> Item<HostArray> {
        Item {
            x: HostArray::f32(&[2], vec![i as f32, -(i as f32)]).unwrap_or_else(|e| panic!("{e}")),
            k: HostArray::scalar_i32(i),
        }
    }

    fn ids(b: &ReplayBuffer<Item<HostArray>>) -> Vec<i32> {
        b.iter().map(|it| it.k.as_i32().unwrap_or(&[])[0]).collect()
    }

    #[test]
    fn capacity_and_fifo_order() -> Result<()> {
        let mut b = ReplayBuffer::new(3)?;
        assert!(b.is_empty());
        for i in 0..2 {
            b.push(item(i))?;
        }
        assert_eq!(ids(&b), [0, 1]);
        for i in 2..7 {
            b.push(item(i))?;
            assert!(b.len() <= 3);
        }
        assert_eq!((b.len(), b.capacity(), b.pushed()), (3, 3, 7));
        assert_eq!(ids(&b), [4, 5, 6]);
        assert_eq!(b.get(0).map(|it| it.k.as_i32().unwrap_or(&[])[0]), Some(4));
        assert!(b.get(3).is_none());
        Ok(())
    }

    #[test]
    fn gather_stacks_each_leaf() -> Result<()> {
        let mut b = ReplayBuffer::new(4)?;
        for i in 0..6 {
            b.push(item(i))?;
        }
        // Held: 2, 3, 4, 5.
        let batch = b.gather(&[3, 0, 0])?;
        assert_eq!(batch.x.dims(), [3, 2]);
        assert_eq!(
            batch.x.as_f32(),
            Some(&[5.0, -5.0, 2.0, -2.0, 2.0, -2.0][..])
        );
        assert_eq!(batch.k.dims(), [3]);
        assert_eq!(batch.k.as_i32(), Some(&[5, 2, 2][..]));
        let spec = b.batch_spec(3).ok_or(Error::PolledAfterCompletion)?;
        assert_eq!(spec.x, Shape::of::<f32>(&[3, 2]));
        assert_eq!(spec.k, Shape::of::<i32>(&[3]));
        assert!(b.gather(&[4]).is_err());
        assert!(b.gather(&[]).is_err());
        Ok(())
    }

    #[test]
    fn sampling_is_uniform() -> Result<()> {
        // 5 items, 50 000 draws: each count within 4 standard deviations of the
        // binomial mean (n p = 10 000, sd = sqrt(n p (1 - p)) ≈ 89.4).
        let mut b = ReplayBuffer::new(5)?;
        for i in 0..8 {
            b.push(item(i))?; // holds 3..8
        }
        let mut rng = Rng::new(3);
        let batch = b.sample(50_000, &mut rng)?;
        let mut counts = [0usize; 8];
        for &k in batch.k.as_i32().unwrap_or(&[]) {
            counts[k as usize] += 1;
        }
        assert_eq!(&counts[..3], &[0, 0, 0]);
        let sd = (50_000.0f64 * 0.2 * 0.8).sqrt();
        for (k, &c) in counts.iter().enumerate().skip(3) {
            assert!(
                (c as f64 - 10_000.0).abs() < 4.0 * sd,
                "item {k} drawn {c} times of 50000"
            );
        }
        // The x leaf follows the same draws.
        let xs = batch.x.as_f32().unwrap_or(&[]);
        for (row, &k) in batch.k.as_i32().unwrap_or(&[]).iter().enumerate().take(100) {
            assert_eq!(xs[2 * row], k as f32);
        }
        Ok(())
    }

    #[test]
    fn bad_input_is_an_error() -> Result<()> {
        assert!(ReplayBuffer::<Item<HostArray>>::new(0).is_err());
        let mut b = ReplayBuffer::new(2)?;
        assert!(b.sample(1, &mut Rng::new(0)).is_err());
        b.push(item(0))?;
        let wrong = Item {
            x: HostArray::f32(&[3], vec![0.0; 3])?,
            k: HostArray::scalar_i32(1),
        };
        let e = b.push(wrong).unwrap_err().to_string();
        assert!(
            e.contains("`.x`") && e.contains("f32[3]") && e.contains("f32[2]"),
            "{e}"
        );
        let wrong_type = Item {
            x: HostArray::f32(&[2], vec![0.0; 2])?,
            k: HostArray::scalar_f32(1.0),
        };
        assert!(b.push(wrong_type).is_err());
        assert_eq!(b.len(), 1);
        assert!(HostArray::f32(&[2, 2], vec![0.0; 3]).is_err());
        Ok(())
    }
}
