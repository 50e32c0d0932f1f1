//! Trees of arrays (JAX's pytrees): one struct, generic over its leaf type, is the
//! shape spec (`Params<Shape>`), the traced values (`Params<Op>`), the device buffers
//! (`Params<Buffer>`), the gradients and the host values (`Params<f32>`).
//!
//! [`Tree`] flattens a value into its leaves in a fixed order and rebuilds the same
//! structure with leaves of another type; `#[derive(Tree)]` writes it for a struct or
//! enum. The flattening order is the order of the fields as declared, depth first:
//! the order of parameters and outputs of a compiled function.
//!
//! ```
//! use xlaclient_core::{Shape, Tree};
//!
//! #[derive(Tree, Debug, PartialEq)]
//! struct Layer<T> {
//!     w: T,
//!     b: T,
//! }
//!
//! #[derive(Tree, Debug, PartialEq)]
//! struct Mlp<T> {
//!     layers: Vec<Layer<T>>,
//!     #[tree(skip)]
//!     name: String, // metadata, carried along unchanged
//! }
//!
//! // The spec: one shape per parameter.
//! let spec = Mlp {
//!     layers: vec![
//!         Layer { w: Shape::of::<f32>(&[3, 4]), b: Shape::of::<f32>(&[4]) },
//!         Layer { w: Shape::of::<f32>(&[4, 2]), b: Shape::of::<f32>(&[2]) },
//!     ],
//!     name: "mlp".to_string(),
//! };
//! assert_eq!(spec.num_leaves(), 4);
//!
//! // Same structure, other leaves: the element count of each parameter.
//! let sizes = spec.map_ref(|s| s.dims().iter().product::<i64>());
//! assert_eq!(sizes.leaves(), [&12, &4, &8, &2]);
//!
//! // Flat leaves back into the structure (what a compiled function's outputs become).
//! let flat: Vec<f32> = vec![0.5, 0.0, 0.25, 0.0];
//! let init = spec.rebuild(flat)?;
//! assert_eq!(init.layers[1].w, 0.25);
//! assert_eq!(init.name, "mlp");
//!
//! // Pair two trees of the same structure leaf by leaf (parameters and gradients).
//! let grads = init.map_ref(|_| 1.0f32);
//! let stepped = init.zip_map(&grads, |p, g| p - 0.1 * g)?;
//! assert_eq!(stepped.into_leaves(), [0.4, -0.1, 0.15, -0.1]);
//! # Ok::<(), xlaclient_core::tree::TreeError>(())
//! ```
//!
//! # What the derive rejects
//!
//! A field that is not a tree (mark metadata `#[tree(skip)]`):
//! ```compile_fail,E0277
//! #[derive(xlaclient_core::Tree)]
//! struct P<T> { w: T, name: String }
//! ```
//! More than one type parameter (the one type parameter is the leaf type):
//! ```compile_fail
//! #[derive(xlaclient_core::Tree)]
//! struct P<A, B> { a: A, b: B }
//! ```
//! Bounds on the leaf type (the derive rebuilds `P<U>` for every leaf type `U`):
//! ```compile_fail
//! #[derive(xlaclient_core::Tree)]
//! struct P<T: Clone> { w: T }
//! ```
//! A skipped field whose type mentions the leaf type (it is carried over unchanged):
//! ```compile_fail
//! #[derive(xlaclient_core::Tree)]
//! struct P<T> { w: T, #[tree(skip)] cache: Vec<T> }
//! ```

use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;

pub use xlaclient_derive::Tree;

/// Marker for the leaf types of a [`Tree`]: `Op` (a traced value), [`Shape`](crate::Shape),
/// [`Buffer`](crate::Buffer), and plain numbers for host-side values and tests.
///
/// Every leaf type is a one-leaf tree of itself. Implement it for your own leaf types
/// (a host array type, say); never for a container, which should implement [`Tree`].
pub trait Leaf {}

// `Op`'s impl is in `builder` (where `Op` is defined): this module imports nothing
// above the runtime, so the error type can name `TreeError` without a cycle.
impl Leaf for xlaclient_pjrt::Shape {}
impl Leaf for xlaclient_pjrt::Buffer {}
impl Leaf for f32 {}
impl Leaf for f64 {}
impl Leaf for i32 {}
impl Leaf for i64 {}
impl Leaf for u32 {}
impl Leaf for u64 {}
impl Leaf for bool {}
impl Leaf for half::f16 {}
impl Leaf for half::bf16 {}
/// An array of any element type (feature `ndarray`).
#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl Leaf for xlaclient_pjrt::NdArray {}
/// An `ndarray` array (feature `ndarray`).
#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T, D: ndarray::Dimension> Leaf for ndarray::Array<T, D> {}

/// A structure holding leaves of type `L`, flattened and rebuilt in a fixed order.
///
/// `L` is a parameter of the trait (not an associated type) so that leafless
/// structures — `()`, a unit struct, `PhantomData<L>` — are trees at every leaf type
/// and can sit inside any other tree.
///
/// Implemented for every [`Leaf`] (one leaf), `Vec<X>`, `[X; N]`, `Option<X>`,
/// `PhantomData<L>` (no leaves) and tuples of up to 12 trees (`()` has no leaves); and
/// by `#[derive(Tree)]` for your own structs and enums. The flattening order is
/// depth first, fields in declaration order, elements in index order.
///
/// The required methods take `&mut dyn FnMut` so that each derived type is compiled
/// once per leaf-type pair, not once per closure; the provided methods take closures.
///
/// # Example
///
/// ```
/// use xlaclient_core::{Shape, Tree};
///
/// #[derive(Tree)]
/// struct State<T> {
///     params: Vec<T>,
///     step: T,
/// }
///
/// let spec = State {
///     params: vec![Shape::of::<f32>(&[2, 3]), Shape::of::<f32>(&[3])],
///     step: Shape::of::<i64>(&[]),
/// };
/// let ranks = spec.map_ref(|s| s.dims().len() as i64);
/// assert_eq!(ranks.into_leaves(), [2, 1, 0]);
///
/// // Rebuilding needs exactly one leaf per leaf of the template.
/// let err = spec.rebuild([1.0f32, 2.0]).err().unwrap();
/// assert_eq!(err.to_string(), "tree rebuild: the structure has 3 leaves but 2 were given");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tree with `{L}` leaves",
    label = "not a `Tree<{L}>`",
    note = "trees are leaf types, Vec, [_; N], Option, tuples, PhantomData<L> and types with #[derive(Tree)]; mark a metadata field #[tree(skip)]"
)]
pub trait Tree<L: Leaf>: Sized {
    /// The same structure with leaves of type `U` (`Params<Shape>` → `Params<U>`).
    type With<U: Leaf>: Tree<U>;

    /// Calls `f` on each leaf, in flattening order.
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a L));

    /// Rebuilds the structure with `f` of each leaf, called in flattening order; stops
    /// at the first error.
    fn try_map_ref<U: Leaf, E>(
        &self,
        f: &mut dyn FnMut(&L) -> Result<U, E>,
    ) -> Result<Self::With<U>, E>;

    /// Rebuilds the structure with `f` of each leaf, consuming `self`; `f` is called in
    /// flattening order and the first error stops it.
    fn try_map<U: Leaf, E>(self, f: &mut dyn FnMut(L) -> Result<U, E>) -> Result<Self::With<U>, E>;

    /// Appends what varies between two values of this type besides their leaves, in
    /// flattening order: each `Vec`'s length, each `Option`'s presence (0 or 1), each
    /// enum's variant index. Two values of one type have the same structure exactly
    /// when these lists are equal.
    fn structure(&self, out: &mut Vec<usize>);

    /// Calls `f` on each leaf with its path, in flattening order: the segments from
    /// the root to the leaf, joined by `.` and appended to `path` (see
    /// [`Tree::leaf_paths`]). `path` is left as it was given.
    ///
    /// Derived types name each field (an enum also names its current variant);
    /// `Vec`, arrays and tuples name each element by its index; `Option` adds no
    /// segment; a leaf adds none. A hand-written impl that does not override this
    /// numbers its leaves `0`, `1`, … in flattening order.
    fn visit_paths<'a>(&'a self, path: &mut String, f: &mut dyn FnMut(&str, &'a L)) {
        let mut i = 0usize;
        self.visit(&mut |leaf| {
            let len = push_path(path, i);
            f(path, leaf);
            path.truncate(len);
            i += 1;
        });
    }

    /// The path of each leaf, in flattening order: field names and element indices
    /// from the root down, joined by `.` (`"layers.0.w"`). A bare leaf's path is
    /// empty. Distinct leaves of a derived tree have distinct paths; they name a
    /// checkpoint's tensors (`xlaclient_nn::checkpoint`).
    ///
    /// ```
    /// use xlaclient_core::{Shape, Tree};
    ///
    /// #[derive(Tree)]
    /// struct Layer<T> { w: T, b: Option<T> }
    ///
    /// #[derive(Tree)]
    /// struct Model<T> { layers: Vec<Layer<T>>, step: T }
    ///
    /// let m = Model {
    ///     layers: vec![Layer { w: 1.0f32, b: Some(2.0) }, Layer { w: 3.0, b: None }],
    ///     step: 4.0,
    /// };
    /// assert_eq!(m.leaf_paths(), ["layers.0.w", "layers.0.b", "layers.1.w", "step"]);
    /// ```
    fn leaf_paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.visit_paths(&mut String::new(), &mut |p, _| out.push(p.to_string()));
        out
    }

    /// Each leaf with its key path in JAX's `keystr` format, in flattening order
    /// (`jax.tree.leaves_with_path`, with each path rendered by [`keystr`]): a field
    /// is `.name`, an element of a `Vec`, array or tuple `[i]`, so the leaf
    /// `layers.0.w` of [`leaf_paths`](Tree::leaf_paths) is `.layers[0].w`, as JAX
    /// prints the path of a dataclass field holding a list. With
    /// [`structure`](Tree::structure) it is `jax.tree.flatten_with_path`.
    ///
    /// ```
    /// use xlaclient_core::Tree;
    ///
    /// #[derive(Tree)]
    /// struct Layer<T> { w: T, b: T }
    ///
    /// let t = (vec![Layer { w: 1.0f32, b: 2.0 }], 3.0f32);
    /// let paths: Vec<String> = t.leaves_with_path().into_iter().map(|(p, _)| p).collect();
    /// assert_eq!(paths, ["[0][0].w", "[0][0].b", "[1]"]);
    /// let scaled = t.map_with_path(|p, x| if p.ends_with(".b") { *x } else { 2.0 * x });
    /// assert_eq!(scaled.into_leaves(), [2.0, 2.0, 6.0]);
    /// ```
    fn leaves_with_path(&self) -> Vec<(String, &L)> {
        let mut out = Vec::new();
        self.visit_paths(&mut String::new(), &mut |p, leaf| {
            out.push((keystr(p, false, ""), leaf))
        });
        out
    }

    /// The same structure with `f(path, leaf)` of each leaf, the path in JAX's
    /// `keystr` format (`jax.tree.map_with_path`; see
    /// [`leaves_with_path`](Tree::leaves_with_path)).
    fn map_with_path<U: Leaf>(&self, mut f: impl FnMut(&str, &L) -> U) -> Self::With<U> {
        let mut paths = Vec::new();
        self.visit_paths(&mut String::new(), &mut |p, _| {
            paths.push(keystr(p, false, ""))
        });
        let mut paths = paths.into_iter();
        self.map_ref(|leaf| f(&paths.next().unwrap_or_default(), leaf))
    }

    /// The leaves, in flattening order.
    fn leaves(&self) -> Vec<&L> {
        let mut out = Vec::new();
        self.visit(&mut |leaf| out.push(leaf));
        out
    }

    /// The leaves, in flattening order, consuming `self`.
    fn into_leaves(self) -> Vec<L> {
        let mut out = Vec::new();
        let rebuilt = self.try_map::<Hole, Infallible>(&mut |leaf| {
            out.push(leaf);
            Ok(Hole)
        });
        let Ok(_) = rebuilt;
        out
    }

    /// The number of leaves.
    fn num_leaves(&self) -> usize {
        let mut n = 0;
        self.visit(&mut |_| n += 1);
        n
    }

    /// The same structure with `f` of each leaf (called in flattening order).
    fn map_ref<U: Leaf>(&self, mut f: impl FnMut(&L) -> U) -> Self::With<U> {
        let Ok(out) = self.try_map_ref::<U, Infallible>(&mut |leaf| Ok(f(leaf)));
        out
    }

    /// The same structure with `f` of each leaf (called in flattening order), consuming
    /// `self`.
    fn map<U: Leaf>(self, mut f: impl FnMut(L) -> U) -> Self::With<U> {
        let Ok(out) = self.try_map::<U, Infallible>(&mut |leaf| Ok(f(leaf)));
        out
    }

    /// The structure of `self` with the given leaves, taken in flattening order (JAX's
    /// `tree_unflatten`, with `self` as the template). Metadata fields are cloned from
    /// `self`.
    ///
    /// # Errors
    /// [`TreeError::LeafCount`] when `leaves` holds fewer or more leaves than `self`
    /// (more are counted by draining the iterator, so it must be finite).
    fn rebuild<U: Leaf>(
        &self,
        leaves: impl IntoIterator<Item = U>,
    ) -> Result<Self::With<U>, TreeError> {
        let expected = self.num_leaves();
        let mut leaves = leaves.into_iter();
        let mut got = 0;
        let out = self.try_map_ref(&mut |_| match leaves.next() {
            Some(leaf) => {
                got += 1;
                Ok(leaf)
            }
            None => Err(TreeError::LeafCount { expected, got }),
        })?;
        match leaves.count() {
            0 => Ok(out),
            extra => Err(TreeError::LeafCount {
                expected,
                got: expected + extra,
            }),
        }
    }

    /// Whether `other` has the same structure as `self`: the same `Vec` lengths,
    /// `Option` presences and enum variants (see [`Tree::structure`]).
    fn same_structure<V: Leaf>(&self, other: &Self::With<V>) -> bool {
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        self.structure(&mut mine);
        <Self::With<V> as Tree<V>>::structure(other, &mut theirs);
        mine == theirs
    }

    /// The structure of `self` with `f(mine, theirs)` of each pair of corresponding
    /// leaves, called in flattening order (pairing parameters with their gradients).
    ///
    /// # Errors
    /// [`TreeError::Structure`] when `other` differs from `self` in a `Vec` length, an
    /// `Option`'s presence or an enum variant.
    fn zip_map<V: Leaf, U: Leaf>(
        &self,
        other: &Self::With<V>,
        mut f: impl FnMut(&L, &V) -> U,
    ) -> Result<Self::With<U>, TreeError> {
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        self.structure(&mut mine);
        <Self::With<V> as Tree<V>>::structure(other, &mut theirs);
        if mine != theirs {
            return Err(TreeError::Structure {
                expected: mine,
                got: theirs,
            });
        }
        let others = <Self::With<V> as Tree<V>>::leaves(other);
        let expected = self.num_leaves();
        let got = others.len();
        let mut others = others.into_iter();
        // Equal structures of one type have equal leaf counts; a hand-written impl
        // that breaks this gets an error, not a panic.
        let out = self.try_map_ref(&mut |leaf| match others.next() {
            Some(theirs) => Ok(f(leaf, theirs)),
            None => Err(TreeError::LeafCount { expected, got }),
        })?;
        if others.next().is_some() {
            return Err(TreeError::LeafCount { expected, got });
        }
        Ok(out)
    }
}

/// A leaf that holds nothing: the target of [`Tree::into_leaves`]'s rebuild, which
/// only wants to move the leaves out (a tree of `Hole`s allocates nothing).
struct Hole;
impl Leaf for Hole {}

/// Appends one segment to a leaf path (after a `.` unless `path` is empty) and
/// returns the length to truncate back to: the building block of
/// [`Tree::visit_paths`], for hand-written impls and the derive.
///
/// ```
/// let mut path = String::from("layers");
/// let len = xlaclient_core::tree::push_path(&mut path, 3);
/// assert_eq!(path, "layers.3");
/// path.truncate(len);
/// assert_eq!(xlaclient_core::tree::push_path(&mut String::new(), "w"), 0);
/// ```
pub fn push_path(path: &mut String, segment: impl fmt::Display) -> usize {
    use fmt::Write as _;
    let len = path.len();
    if len > 0 {
        path.push('.');
    }
    // Writing into a `String` cannot fail.
    let _ = write!(path, "{segment}");
    len
}

/// A leaf path of [`Tree::leaf_paths`] (`"layers.0.w"`) in the format of JAX's
/// `jax.tree_util.keystr`: a segment that is a number is an element index
/// (`[0]`, JAX's `SequenceKey`), any other a field (`.w`, JAX's `GetAttrKey` of a
/// dataclass or flax struct). `simple` drops the brackets and dots (`layers`, `0`,
/// `w`), and `separator` goes between segments, as JAX's arguments of the same
/// names: `keystr(p, true, "/")` is `"layers/0/w"`.
///
/// ```
/// use xlaclient_core::tree::keystr;
/// assert_eq!(keystr("layers.0.w", false, ""), ".layers[0].w");
/// assert_eq!(keystr("layers.0.w", true, "/"), "layers/0/w");
/// assert_eq!(keystr("", false, ""), "");
/// ```
pub fn keystr(path: &str, simple: bool, separator: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = path
        .split('.')
        .map(|seg| match (simple, seg.parse::<u64>().is_ok()) {
            (true, _) => seg.to_string(),
            (false, true) => format!("[{seg}]"),
            (false, false) => format!(".{seg}"),
        })
        .collect();
    parts.join(separator)
}

/// A mismatch between a tree and the leaves or tree it is combined with.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TreeError {
    /// [`Tree::rebuild`] was given a different number of leaves than the structure has.
    LeafCount {
        /// The number of leaves of the structure.
        expected: usize,
        /// The number of leaves given.
        got: usize,
    },
    /// [`Tree::zip_map`] was given two trees of different structure.
    Structure {
        /// The structure of `self` (see [`Tree::structure`]).
        expected: Vec<usize>,
        /// The structure of the other tree.
        got: Vec<usize>,
    },
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeError::LeafCount { expected, got } => write!(
                f,
                "tree rebuild: the structure has {expected} leaves but {got} were given"
            ),
            TreeError::Structure { expected, got } => write!(
                f,
                "trees differ in structure (Vec lengths, Option presence, enum variants \
                 in flattening order): {expected:?} vs {got:?}"
            ),
        }
    }
}

impl std::error::Error for TreeError {}

impl<L: Leaf> Tree<L> for L {
    type With<U: Leaf> = U;

    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a L)) {
        f(self)
    }

    fn try_map_ref<U: Leaf, E>(&self, f: &mut dyn FnMut(&L) -> Result<U, E>) -> Result<U, E> {
        f(self)
    }

    fn try_map<U: Leaf, E>(self, f: &mut dyn FnMut(L) -> Result<U, E>) -> Result<U, E> {
        f(self)
    }

    fn structure(&self, _out: &mut Vec<usize>) {}

    fn visit_paths<'a>(&'a self, path: &mut String, f: &mut dyn FnMut(&str, &'a L)) {
        f(path, self)
    }
}

impl<L: Leaf, X: Tree<L>> Tree<L> for Vec<X> {
    type With<U: Leaf> = Vec<X::With<U>>;

    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a L)) {
        for x in self {
            x.visit(f);
        }
    }

    fn try_map_ref<U: Leaf, E>(
        &self,
        f: &mut dyn FnMut(&L) -> Result<U, E>,
    ) -> Result<Self::With<U>, E> {
        self.iter().map(|x| x.try_map_ref(f)).collect()
    }

    fn try_map<U: Leaf, E>(self, f: &mut dyn FnMut(L) -> Result<U, E>) -> Result<Self::With<U>, E> {
        self.into_iter().map(|x| x.try_map(f)).collect()
    }

    fn structure(&self, out: &mut Vec<usize>) {
        out.push(self.len());
        for x in self {
            x.structure(out);
        }
    }

    fn visit_paths<'a>(&'a self, path: &mut String, f: &mut dyn FnMut(&str, &'a L)) {
        for (i, x) in self.iter().enumerate() {
            let len = push_path(path, i);
            x.visit_paths(path, f);
            path.truncate(len);
        }
    }
}

impl<L: Leaf, X: Tree<L>, const N: usize> Tree<L> for [X; N] {
    type With<U: Leaf> = [X::With<U>; N];

    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a L)) {
        for x in self {
            x.visit(f);
        }
    }

    fn try_map_ref<U: Leaf, E>(
        &self,
        f: &mut dyn FnMut(&L) -> Result<U, E>,
    ) -> Result<Self::With<U>, E> {
        let mapped = self
            .iter()
            .map(|x| x.try_map_ref(f))
            .collect::<Result<Vec<_>, E>>()?;
        Ok(into_array(mapped))
    }

    fn try_map<U: Leaf, E>(self, f: &mut dyn FnMut(L) -> Result<U, E>) -> Result<Self::With<U>, E> {
        let mapped = self
            .into_iter()
            .map(|x| x.try_map(f))
            .collect::<Result<Vec<_>, E>>()?;
        Ok(into_array(mapped))
    }

    fn structure(&self, out: &mut Vec<usize>) {
        for x in self {
            x.structure(out);
        }
    }

    fn visit_paths<'a>(&'a self, path: &mut String, f: &mut dyn FnMut(&str, &'a L)) {
        for (i, x) in self.iter().enumerate() {
            let len = push_path(path, i);
            x.visit_paths(path, f);
            path.truncate(len);
        }
    }
}

/// The `N` elements mapped from an `[X; N]`, as an array again.
fn into_array<T, const N: usize>(v: Vec<T>) -> [T; N] {
    match v.try_into() {
        Ok(array) => array,
        Err(_) => unreachable!("mapping an array of {N} yields {N} elements"),
    }
}

impl<L: Leaf, X: Tree<L>> Tree<L> for Option<X> {
    type With<U: Leaf> = Option<X::With<U>>;

    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a L)) {
        if let Some(x) = self {
            x.visit(f);
        }
    }

    fn try_map_ref<U: Leaf, E>(
        &self,
        f: &mut dyn FnMut(&L) -> Result<U, E>,
    ) -> Result<Self::With<U>, E> {
        self.as_ref().map(|x| x.try_map_ref(f)).transpose()
    }

    fn try_map<U: Leaf, E>(self, f: &mut dyn FnMut(L) -> Result<U, E>) -> Result<Self::With<U>, E> {
        self.map(|x| x.try_map(f)).transpose()
    }

    fn structure(&self, out: &mut Vec<usize>) {
        out.push(usize::from(self.is_some()));
        if let Some(x) = self {
            x.structure(out);
        }
    }

    fn visit_paths<'a>(&'a self, path: &mut String, f: &mut dyn FnMut(&str, &'a L)) {
        if let Some(x) = self {
            x.visit_paths(path, f);
        }
    }
}

/// No leaves: lets a struct generic over its leaf type mark that it uses it only
/// through other fields' types (or not at all).
impl<L: Leaf> Tree<L> for PhantomData<L> {
    type With<U: Leaf> = PhantomData<U>;

    fn visit<'a>(&'a self, _f: &mut dyn FnMut(&'a L)) {}

    fn try_map_ref<U: Leaf, E>(
        &self,
        _f: &mut dyn FnMut(&L) -> Result<U, E>,
    ) -> Result<PhantomData<U>, E> {
        Ok(PhantomData)
    }

    fn try_map<U: Leaf, E>(
        self,
        _f: &mut dyn FnMut(L) -> Result<U, E>,
    ) -> Result<PhantomData<U>, E> {
        Ok(PhantomData)
    }

    fn structure(&self, _out: &mut Vec<usize>) {}

    fn visit_paths<'a>(&'a self, _path: &mut String, _f: &mut dyn FnMut(&str, &'a L)) {}
}

/// Tuples of trees with the same leaf type, elements in order; `()` has no leaves.
macro_rules! tuple_tree {
    ($($x:ident $i:tt),*) => {
        impl<L: Leaf, $($x: Tree<L>),*> Tree<L> for ($($x,)*) {
            type With<U: Leaf> = ($($x::With<U>,)*);

            fn visit<'a>(&'a self, _f: &mut dyn FnMut(&'a L)) {
                $(self.$i.visit(_f);)*
            }

            fn try_map_ref<U: Leaf, E>(
                &self,
                _f: &mut dyn FnMut(&L) -> Result<U, E>,
            ) -> Result<Self::With<U>, E> {
                Ok(($(self.$i.try_map_ref(_f)?,)*))
            }

            fn try_map<U: Leaf, E>(
                self,
                _f: &mut dyn FnMut(L) -> Result<U, E>,
            ) -> Result<Self::With<U>, E> {
                Ok(($(self.$i.try_map(_f)?,)*))
            }

            fn structure(&self, _out: &mut Vec<usize>) {
                $(self.$i.structure(_out);)*
            }

            fn visit_paths<'a>(
                &'a self,
                _path: &mut String,
                _f: &mut dyn FnMut(&str, &'a L),
            ) {
                $(
                    let len = push_path(_path, $i);
                    self.$i.visit_paths(_path, _f);
                    _path.truncate(len);
                )*
            }
        }
    };
}

tuple_tree!();
tuple_tree!(X0 0);
tuple_tree!(X0 0, X1 1);
tuple_tree!(X0 0, X1 1, X2 2);
tuple_tree!(X0 0, X1 1, X2 2, X3 3);
tuple_tree!(X0 0, X1 1, X2 2, X3 3, X4 4);
tuple_tree!(X0 0, X1 1, X2 2, X3 3, X4 4, X5 5);
tuple_tree!(X0 0, X1 1, X2 2, X3 3, X4 4, X5 5, X6 6);
tuple_tree!(X0 0, X1 1, X2 2, X3 3, X4 4, X5 5, X6 6, X7 7);
tuple_tree!(X0 0, X1 1, X2 2, X3 3, X4 4, X5 5, X6 6, X7 7, X8 8);
tuple_tree!(X0 0, X1 1, X2 2, X3 3, X4 4, X5 5, X6 6, X7 7, X8 8, X9 9);
tuple_tree!(X0 0, X1 1, X2 2, X3 3, X4 4, X5 5, X6 6, X7 7, X8 8, X9 9, X10 10);
tuple_tree!(X0 0, X1 1, X2 2, X3 3, X4 4, X5 5, X6 6, X7 7, X8 8, X9 9, X10 10, X11 11);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Shape;

    #[test]
    fn a_leaf_is_a_one_leaf_tree() {
        let x = 2.5f32;
        assert_eq!(x.leaves(), [&2.5]);
        assert_eq!(x.num_leaves(), 1);
        assert_eq!(x.map(|v| v as i64 * 2), 4i64);
        let mut s = Vec::new();
        x.structure(&mut s);
        assert!(s.is_empty());
    }

    #[test]
    fn containers_flatten_in_index_order() {
        let t: (Vec<f32>, [f32; 2], Option<f32>, Option<f32>, ()) =
            (vec![1.0, 2.0, 3.0], [4.0, 5.0], None, Some(6.0), ());
        assert_eq!(t.leaves(), [&1.0, &2.0, &3.0, &4.0, &5.0, &6.0]);
        let mut s = Vec::new();
        t.structure(&mut s);
        // Vec length 3, no entry for the array, None, Some, nothing for ().
        assert_eq!(s, [3, 0, 1]);
        let i = t.map(|v| (v * 10.0) as i64);
        assert_eq!(i, (vec![10, 20, 30], [40, 50], None, Some(60), ()));
    }

    #[test]
    fn tuples_up_to_twelve() {
        let t = (
            1i64, 2i64, 3i64, 4i64, 5i64, 6i64, 7i64, 8i64, 9i64, 10i64, 11i64, 12i64,
        );
        let expected: Vec<i64> = (1..=12).collect();
        assert_eq!(t.into_leaves(), expected);
    }

    #[test]
    fn leafless_trees_have_no_leaves_at_any_leaf_type() {
        let unit: () = <() as Tree<f32>>::map((), |v| v as i64);
        assert_eq!(<() as Tree<bool>>::num_leaves(&unit), 0);
        let p: PhantomData<i64> = PhantomData::<f32>.map(|v| v as i64);
        assert_eq!(p.num_leaves(), 0);
        let empty: Vec<()> = Vec::new();
        assert_eq!(
            <Vec<()> as Tree<bool>>::rebuild(&empty, Vec::<f32>::new()),
            Ok(Vec::new())
        );
    }

    #[test]
    fn rebuild_round_trips_and_counts_leaves() {
        let spec = vec![(Shape::of::<f32>(&[2]), Some(Shape::of::<f32>(&[3])))];
        let filled = spec.rebuild([1.0f32, 2.0]).unwrap();
        assert_eq!(filled, vec![(1.0, Some(2.0))]);
        let back = filled.rebuild(filled.clone().into_leaves()).unwrap();
        assert_eq!(back, filled);
        assert_eq!(
            spec.rebuild([1.0f32]),
            Err(TreeError::LeafCount {
                expected: 2,
                got: 1
            })
        );
        assert_eq!(
            spec.rebuild([1.0f32, 2.0, 3.0, 4.0]),
            Err(TreeError::LeafCount {
                expected: 2,
                got: 4
            })
        );
    }

    #[test]
    fn try_map_stops_at_the_first_error() {
        let v = vec![1i32, -2, 3, -4];
        let mut seen = Vec::new();
        let r = v.try_map_ref::<i64, String>(&mut |x| {
            seen.push(*x);
            if *x < 0 {
                Err(format!("negative {x}"))
            } else {
                Ok(i64::from(*x))
            }
        });
        assert_eq!(r, Err("negative -2".to_string()));
        assert_eq!(seen, [1, -2]);
    }

    #[test]
    fn zip_map_checks_structure() {
        let a = vec![vec![1.0f32], vec![2.0, 3.0]];
        let same_count_other_shape = vec![vec![10i64, 20], vec![30]];
        assert_eq!(
            a.zip_map(&same_count_other_shape, |x, y| *x as i64 + y),
            Err(TreeError::Structure {
                expected: vec![2, 1, 2],
                got: vec![2, 2, 1]
            })
        );
        assert!(!a.same_structure(&same_count_other_shape));
        let b = vec![vec![10i64], vec![20, 30]];
        assert!(a.same_structure(&b));
        assert_eq!(
            a.zip_map(&b, |x, y| *x as i64 + y),
            Ok(vec![vec![11], vec![22, 33]])
        );
    }

    /// The derive works inside this crate too (through `extern crate self as xlaclient`).
    #[derive(Tree, Debug, PartialEq)]
    struct Inner<T> {
        a: T,
        rest: Vec<T>,
    }

    #[test]
    fn derive_works_inside_the_crate() {
        let x = Inner {
            a: 1i32,
            rest: vec![2, 3],
        };
        assert_eq!(x.leaves(), [&1, &2, &3]);
        assert_eq!(
            x.map_ref(|v| i64::from(*v) * 2),
            Inner {
                a: 2i64,
                rest: vec![4, 6]
            }
        );
    }

    #[test]
    fn errors_display_their_counts() {
        let e = TreeError::LeafCount {
            expected: 5,
            got: 3,
        };
        assert_eq!(
            e.to_string(),
            "tree rebuild: the structure has 5 leaves but 3 were given"
        );
        let e = TreeError::Structure {
            expected: vec![2],
            got: vec![3],
        };
        assert_eq!(
            e.to_string(),
            "trees differ in structure (Vec lengths, Option presence, enum variants in \
             flattening order): [2] vs [3]"
        );
    }
}
