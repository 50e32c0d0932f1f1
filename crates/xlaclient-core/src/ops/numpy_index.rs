//! numpy's indexing, with JAX's meaning: `x[idx]` is [`Op::index`], and JAX's
//! functional updates `x.at[idx].set(v)` / `.add` / `.mul` / `.min` / `.max` /
//! `.get()` are [`Op::at`] followed by the method ([`AtIndex`]).
//!
//! An index is a list of [`Ix`] entries, written with the [`ix!`](crate::ix)
//! macro: integers (negative ones count from the end), ranges (`1..3`, `..`,
//! `2..`), slices with a step ([`Ix::slice`], [`Ix::step`]), index arrays (any
//! integer [`Op`], a scalar op included), [`Ix::NewAxis`], [`Ix::Ellipsis`] and
//! constant boolean masks ([`Ix::mask`]). The result follows numpy's rules: basic
//! indices keep or drop axes in place; index arrays broadcast together and their
//! axes go where the first one was when they are adjacent (an integer next to them
//! counts as one), else in front.
//!
//! Out-of-range values, as JAX: an integer written in the index is checked when
//! the op is built (an error, as JAX's `IndexError`); an index array's negative
//! entries count from the end, and what is still out of range is clamped by
//! [`index`](Op::index) and by `get` ([`IndexMode::Clip`], JAX's default for
//! reading), or gives a fill value with [`IndexMode::Fill`]; the updates skip it
//! ([`IndexMode::Drop`], JAX's default for updates) or clamp it with
//! [`IndexMode::Clip`].
//!
//! Everything is built from the other families' ops (slice, reverse, reshape,
//! gather, scatter, select), so gradients, batching and forward mode come from
//! theirs.
//!
//! ```
//! use xlaclient_core::{ix, Builder, Ix, Shape};
//! let b = Builder::new("index");
//! let x = b.parameter(0, Shape::of::<f32>(&[3, 4, 5]), "x");
//! let i = b.parameter(1, Shape::of::<i32>(&[2]), "i");
//! assert_eq!(x.index(&ix![0]).dims()?, vec![4, 5]);
//! assert_eq!(x.index(&ix![.., -1, 1..3]).dims()?, vec![3, 2]);
//! assert_eq!(x.index(&ix![Ix::step(-1), Ix::NewAxis]).dims()?, vec![3, 1, 4, 5]);
//! assert_eq!(x.index(&ix![Ix::Ellipsis, &i]).dims()?, vec![3, 4, 2]);
//! assert_eq!(x.index(&ix![&i, .., &i]).dims()?, vec![2, 4]);
//! assert_eq!(x.index(&ix![.., &i, 0]).dims()?, vec![3, 2]);
//! assert_eq!(x.index(&ix![&i, 0, &i]).dims()?, vec![2]); // all adjacent
//! assert_eq!(x.index(&ix![&i, .., 0]).dims()?, vec![2, 4]); // apart: in front
//! let y = x.at(&ix![.., 0]).add(1.0);
//! assert_eq!(y.dims()?, vec![3, 4, 5]);
//! # Ok::<(), xlaclient_core::Error>(())
//! ```

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};
use std::panic::Location;

use super::elementwise::broadcast_dims;
use super::indexing::{GatherDims, ScatterDims};
use super::sampling::Param;
use crate::builder::Op;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::shape::{ElementType, Shape};

type Loc = &'static Location<'static>;

/// One entry of a numpy index (see [the module](self)). Build lists of them with
/// [`ix!`](crate::ix), which turns each entry into an `Ix` with `Ix::from`.
#[derive(Clone, Debug)]
pub enum Ix {
    /// One element along the axis; the axis goes away. Negative counts from the
    /// end; out of range is an error when the op is built.
    Int(i64),
    /// numpy's `start:stop:step` (each part optional; a negative start or stop
    /// counts from the end, out-of-range bounds are clipped, a negative step walks
    /// backwards). The axis stays, with the slice's length.
    Slice {
        /// First index (`None`: the start in the step's direction).
        start: Option<i64>,
        /// One past the last (`None`: through the end in the step's direction).
        stop: Option<i64>,
        /// Stride; not 0.
        step: i64,
    },
    /// numpy's `None` / `jnp.newaxis`: a new axis of length 1.
    NewAxis,
    /// numpy's `...`: as many whole axes as the other entries leave.
    Ellipsis,
    /// An index array (any integer type; a scalar op too): the elements at those
    /// positions along the axis, its axes in place of the axis.
    Array(Op),
    /// A constant boolean mask over `dims.len()` axes (which it must match): the
    /// elements where it is true, in row-major order, as one axis. A mask known
    /// only at run time has no static size: use `where_` or `nonzero` with a size.
    Mask {
        /// The mask, row-major.
        values: Vec<bool>,
        /// Its dimensions.
        dims: Vec<i64>,
    },
}

impl Ix {
    /// numpy's `start:stop:step`.
    pub fn slice(start: Option<i64>, stop: Option<i64>, step: i64) -> Ix {
        Ix::Slice { start, stop, step }
    }

    /// numpy's `::step` (the whole axis, every `step`-th element; `-1` reverses).
    pub fn step(step: i64) -> Ix {
        Ix::Slice {
            start: None,
            stop: None,
            step,
        }
    }

    /// A constant boolean mask with dimensions `dims` (row-major `values`).
    pub fn mask(values: &[bool], dims: &[i64]) -> Ix {
        Ix::Mask {
            values: values.to_vec(),
            dims: dims.to_vec(),
        }
    }
}

macro_rules! ix_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Ix {
            fn from(i: $t) -> Ix {
                Ix::Int(i as i64)
            }
        }
        impl From<Range<$t>> for Ix {
            fn from(r: Range<$t>) -> Ix {
                Ix::slice(Some(r.start as i64), Some(r.end as i64), 1)
            }
        }
        impl From<RangeFrom<$t>> for Ix {
            fn from(r: RangeFrom<$t>) -> Ix {
                Ix::slice(Some(r.start as i64), None, 1)
            }
        }
        impl From<RangeTo<$t>> for Ix {
            fn from(r: RangeTo<$t>) -> Ix {
                Ix::slice(None, Some(r.end as i64), 1)
            }
        }
        impl From<RangeInclusive<$t>> for Ix {
            fn from(r: RangeInclusive<$t>) -> Ix {
                let end = *r.end() as i64;
                // `a..=-1` is through the end, as numpy's `a:` would be.
                let stop = if end == -1 { None } else { Some(end + 1) };
                Ix::slice(Some(*r.start() as i64), stop, 1)
            }
        }
        impl From<RangeToInclusive<$t>> for Ix {
            fn from(r: RangeToInclusive<$t>) -> Ix {
                let end = r.end as i64;
                let stop = if end == -1 { None } else { Some(end + 1) };
                Ix::slice(None, stop, 1)
            }
        }
    )*};
}
ix_from_int!(i32, i64, usize);

impl From<RangeFull> for Ix {
    fn from(_: RangeFull) -> Ix {
        Ix::step(1)
    }
}

impl From<&Op> for Ix {
    fn from(op: &Op) -> Ix {
        Ix::Array(op.clone())
    }
}

impl From<Op> for Ix {
    fn from(op: Op) -> Ix {
        Ix::Array(op)
    }
}

/// A numpy index: `ix![0, .., 1..3, &i, Ix::NewAxis]` is an array of [`Ix`], each
/// entry converted with `Ix::from` (integers, ranges, `..`, `&Op` index arrays,
/// and `Ix` values such as [`Ix::step`], [`Ix::NewAxis`], [`Ix::Ellipsis`],
/// [`Ix::mask`]). Pass it by reference to [`Op::index`] or [`Op::at`].
#[macro_export]
macro_rules! ix {
    ($($e:expr),* $(,)?) => {
        [$($crate::Ix::from($e)),*]
    };
}

/// What the updates of [`Op::at`] and its `get` do with an index array's entry
/// that is out of range after negative entries were counted from the end (JAX's
/// `mode=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexMode {
    /// Clamped into range (JAX's `"clip"`; what reading does by default).
    Clip,
    /// Reading gives the fill value: NaN for floats, the lowest value of a signed
    /// integer type, the highest of an unsigned one, true for `pred` (JAX's
    /// `"fill"`); for updates it is [`Drop`](Self::Drop).
    Fill,
    /// The update of that element is skipped (JAX's `"drop"`, its default for
    /// updates); reading clamps.
    Drop,
}

/// How one axis of the (new-axis-expanded) operand is indexed.
#[derive(Clone, Debug)]
enum Dim {
    /// `len` elements from `start`, step 1: a window of the gather/scatter.
    Window { start: i64, len: i64 },
    /// `len` elements `start, start + step, …` (step not 1): its own result axis.
    Strided { start: i64, step: i64, len: i64 },
    /// One element, checked in range: the axis goes away.
    Int(i64),
    /// The index array at position `k` of the plan's arrays.
    Array(usize),
}

/// The static part of an index, resolved against the operand's shape.
struct Plan {
    /// The operand's dimensions with the new axes inserted.
    dims: Vec<i64>,
    /// How each of those axes is indexed.
    how: Vec<Dim>,
    /// The index arrays (masks turned into constant arrays), in order.
    arrays: Vec<Op>,
    /// The broadcast shape of the index arrays (integers count as 0-d arrays).
    adv: Vec<i64>,
    /// Where the index arrays' axes go among the result's axes.
    adv_at: usize,
    /// The result's dimensions.
    out: Vec<i64>,
}

impl Plan {
    fn has_arrays(&self) -> bool {
        !self.arrays.is_empty()
    }

    /// Whether axis `d` is indexed by an integer or an array.
    fn advanced(&self, d: usize) -> bool {
        matches!(self.how[d], Dim::Int(_) | Dim::Array(_))
            && (self.has_arrays() || matches!(self.how[d], Dim::Array(_)))
    }
}

fn err(shape: &Shape, kind: ShapeErrorKind, reason: String) -> ShapeError {
    ShapeError::new("index", &[shape], kind, reason)
}

/// numpy's `slice.indices(n)` then the count: the first index, the step and the
/// number of elements.
fn resolve_slice(start: Option<i64>, stop: Option<i64>, step: i64, n: i64) -> (i64, i64) {
    let (lo, hi) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let norm = |v: i64| {
        let v = if v < 0 { v + n } else { v };
        v.clamp(lo, hi)
    };
    let s = start.map_or(if step > 0 { lo } else { hi }, norm);
    let e = stop.map_or(if step > 0 { hi } else { lo }, norm);
    let len = if step > 0 {
        if e > s { (e - s + step - 1) / step } else { 0 }
    } else if s > e {
        (s - e + (-step) - 1) / (-step)
    } else {
        0
    };
    (s, len)
}

/// numpy broadcasting of several shapes ([`broadcast_dims`] folded over them).
fn broadcast_shapes(shapes: &[Vec<i64>]) -> Option<Vec<i64>> {
    shapes
        .iter()
        .try_fold(Vec::new(), |acc, s| broadcast_dims(&acc, s).ok())
}

fn plan(x: &Op, index: &[Ix]) -> Result<Plan, ShapeError> {
    let shape = x
        .shape()
        .map_err(|_| ShapeError::new("index", &[], ShapeErrorKind::Rank, "the operand failed"))?;
    if !shape.is_array() {
        return Err(err(
            &shape,
            ShapeErrorKind::Rank,
            "a tuple cannot be indexed".into(),
        ));
    }
    let xd = shape.dims().to_vec();
    let consumed: usize = index
        .iter()
        .map(|e| match e {
            Ix::NewAxis | Ix::Ellipsis => 0,
            Ix::Mask { dims, .. } => dims.len(),
            _ => 1,
        })
        .sum();
    let ellipses = index.iter().filter(|e| matches!(e, Ix::Ellipsis)).count();
    if ellipses > 1 {
        return Err(err(
            &shape,
            ShapeErrorKind::Attribute,
            "an index can have only one ellipsis".into(),
        ));
    }
    if consumed > xd.len() {
        return Err(err(
            &shape,
            ShapeErrorKind::Rank,
            format!(
                "too many indices: {consumed} axes indexed, the array has {}",
                xd.len()
            ),
        ));
    }
    let fill = xd.len() - consumed;
    let mut entries: Vec<Ix> = Vec::with_capacity(index.len() + fill);
    for e in index {
        if matches!(e, Ix::Ellipsis) {
            entries.extend((0..fill).map(|_| Ix::step(1)));
        } else {
            entries.push(e.clone());
        }
    }
    if ellipses == 0 {
        entries.extend((0..fill).map(|_| Ix::step(1)));
    }

    let b = x.builder();
    let mut dims = Vec::new();
    let mut how = Vec::new();
    let mut arrays: Vec<Op> = Vec::new();
    let mut next = 0usize; // the operand's axis the next entry indexes
    for e in entries {
        match e {
            Ix::NewAxis => {
                dims.push(1);
                how.push(Dim::Window { start: 0, len: 1 });
            }
            Ix::Ellipsis => unreachable!("expanded above"),
            Ix::Int(i) => {
                let n = xd[next];
                let j = if i < 0 { i + n } else { i };
                if j < 0 || j >= n {
                    return Err(err(
                        &shape,
                        ShapeErrorKind::Dimension,
                        format!("index {i} is out of bounds for axis {next} with size {n}"),
                    ));
                }
                dims.push(n);
                how.push(Dim::Int(j));
                next += 1;
            }
            Ix::Slice { start, stop, step } => {
                if step == 0 || step == i64::MIN {
                    return Err(err(
                        &shape,
                        ShapeErrorKind::Attribute,
                        format!("the slice on axis {next} has step {step}"),
                    ));
                }
                let n = xd[next];
                let (s, len) = resolve_slice(start, stop, step, n);
                dims.push(n);
                how.push(if step == 1 || len <= 1 {
                    Dim::Window {
                        start: if len == 0 { 0 } else { s },
                        len,
                    }
                } else {
                    Dim::Strided {
                        start: s,
                        step,
                        len,
                    }
                });
                next += 1;
            }
            Ix::Array(op) => {
                let t = op.element_type().map_err(|_| {
                    err(
                        &shape,
                        ShapeErrorKind::ElementType,
                        "the index array failed".into(),
                    )
                })?;
                if t == ElementType::Pred {
                    return Err(err(
                        &shape,
                        ShapeErrorKind::ElementType,
                        format!(
                            "a boolean index array on axis {next} has no static size; \
                             use a constant mask (Ix::mask) or `where_`"
                        ),
                    ));
                }
                if !t.is_integer() {
                    return Err(err(
                        &shape,
                        ShapeErrorKind::ElementType,
                        format!(
                            "the index array on axis {next} is {t}; it must be an integer type"
                        ),
                    ));
                }
                dims.push(xd[next]);
                how.push(Dim::Array(arrays.len()));
                arrays.push(op);
                next += 1;
            }
            Ix::Mask { values, dims: md } => {
                let count: i64 = md.iter().product();
                if md.is_empty() || count != values.len() as i64 {
                    return Err(err(
                        &shape,
                        ShapeErrorKind::Attribute,
                        format!(
                            "a mask of dimensions {md:?} needs {count} values and rank ≥ 1, it has {}",
                            values.len()
                        ),
                    ));
                }
                if md[..] != xd[next..next + md.len()] {
                    return Err(err(
                        &shape,
                        ShapeErrorKind::Dimension,
                        format!(
                            "a mask of dimensions {md:?} does not match axes {next}.. of {xd:?}"
                        ),
                    ));
                }
                // The true positions, one coordinate array per masked axis.
                let trues: Vec<usize> = (0..values.len()).filter(|&k| values[k]).collect();
                let mut coords = vec![Vec::with_capacity(trues.len()); md.len()];
                for &flat in &trues {
                    let mut rest = flat as i64;
                    for a in (0..md.len()).rev() {
                        coords[a].push((rest % md[a]) as i32);
                        rest /= md[a];
                    }
                }
                for (a, c) in coords.iter().enumerate() {
                    dims.push(md[a]);
                    how.push(Dim::Array(arrays.len()));
                    arrays.push(b.constant_array(c, &[c.len() as i64]));
                }
                next += md.len();
            }
        }
    }

    // The index arrays' broadcast shape and where it goes.
    let mut shapes = Vec::new();
    for a in &arrays {
        shapes.push(a.dims().map_err(|_| {
            err(
                &shape,
                ShapeErrorKind::Rank,
                "the index array failed".into(),
            )
        })?);
    }
    let adv = broadcast_shapes(&shapes).ok_or_else(|| {
        err(
            &shape,
            ShapeErrorKind::Dimension,
            format!("index arrays of shapes {shapes:?} do not broadcast together"),
        )
    })?;
    let mut p = Plan {
        dims,
        how,
        arrays,
        adv,
        adv_at: 0,
        out: Vec::new(),
    };
    let advanced: Vec<usize> = (0..p.dims.len()).filter(|&d| p.advanced(d)).collect();
    let adjacent = advanced.windows(2).all(|w| w[1] == w[0] + 1);
    p.adv_at = match advanced.first() {
        Some(&first) if adjacent => (0..first).filter(|&d| !p.advanced(d)).count(),
        _ => 0,
    };
    let mut out = Vec::new();
    for d in 0..p.dims.len() {
        if p.advanced(d) {
            continue;
        }
        match p.how[d] {
            Dim::Window { len, .. } | Dim::Strided { len, .. } => out.push(len),
            Dim::Int(_) | Dim::Array(_) => {}
        }
    }
    if p.has_arrays() {
        let at = p.adv_at;
        out.splice(at..at, p.adv.iter().copied());
    }
    p.out = out;
    Ok(p)
}

/// Which axis of the result each indexed axis's own result axis is (windows and
/// strided slices; `None` for the others), and the result axes of the index
/// arrays' block.
fn result_axes(p: &Plan) -> (Vec<Option<usize>>, std::ops::Range<usize>) {
    let block = if p.has_arrays() { p.adv.len() } else { 0 };
    let mut pos = vec![None; p.dims.len()];
    let mut k = 0usize; // non-advanced axes seen
    for (d, slot) in pos.iter_mut().enumerate() {
        if p.advanced(d) || matches!(p.how[d], Dim::Int(_)) {
            continue;
        }
        *slot = Some(if k < p.adv_at { k } else { k + block });
        k += 1;
    }
    (pos, p.adv_at..p.adv_at + block)
}

/// A gather or scatter's index arrays and dimension numbers for a plan.
struct Lowered {
    /// `s32/s64[batch..., k]`.
    indices: Op,
    /// The result's window axes (gather's `offset_dims`, scatter's `update_window_dims`).
    windows: Vec<i64>,
    /// The axes of the operand a window does not cover (collapsed / inserted).
    collapsed: Vec<i64>,
    /// The operand axes of the index vector's components, in order.
    components: Vec<i64>,
    /// The slice size per operand axis.
    sizes: Vec<i64>,
    /// The batch rank (the index vector's axis).
    batch_rank: usize,
    /// Whether each index array entry is in range (over the batch axes), when
    /// asked for.
    valid: Option<Op>,
}

fn lower(
    p: &Plan,
    b: &crate::builder::Builder,
    clamp: bool,
    want_valid: bool,
    loc: Loc,
) -> Lowered {
    let (pos, block) = result_axes(p);
    let wide = p.arrays.iter().any(|a| {
        matches!(
            a.element_type(),
            Ok(ElementType::S64 | ElementType::U64 | ElementType::U32)
        )
    }) || p.dims.iter().any(|&n| n > i32::MAX as i64);
    let it = if wide {
        ElementType::S64
    } else {
        ElementType::S32
    };
    let k = |v: i64| b.scalar_of(it, crate::Scalar::Int(v), loc);
    // The batch axes: the result's axes that are not windows, in order.
    let windows: Vec<i64> = (0..p.dims.len())
        .filter_map(|d| match p.how[d] {
            Dim::Window { .. } => pos[d].map(|r| r as i64),
            _ => None,
        })
        .collect();
    let batch_axes: Vec<usize> = (0..p.out.len())
        .filter(|r| !windows.contains(&(*r as i64)))
        .collect();
    let batch: Vec<i64> = batch_axes.iter().map(|&r| p.out[r]).collect();
    let batch_of = |r: usize| {
        batch_axes
            .iter()
            .position(|&a| a == r)
            .expect("a batch axis")
    };
    let mut shape_k = batch.clone();
    shape_k.push(1);
    let block_batch: Vec<i64> = block.clone().map(|r| batch_of(r) as i64).collect();

    let mut parts: Vec<Op> = Vec::new();
    let mut components = Vec::new();
    let mut collapsed = Vec::new();
    let mut sizes = Vec::new();
    let mut valid: Option<Op> = None;
    for (d, how) in p.how.iter().enumerate() {
        let n = p.dims[d];
        match *how {
            Dim::Window { start, len } => {
                sizes.push(len);
                if start != 0 || len != n {
                    components.push(d as i64);
                    parts.push(k(start).on(loc).broadcast_to(&shape_k));
                }
            }
            Dim::Strided { start, step, len } => {
                sizes.push(1);
                collapsed.push(d as i64);
                components.push(d as i64);
                let r = pos[d].expect("a strided axis has a result axis");
                let i = b.on(loc).iota(it, &[len], 0);
                let i = i.on(loc).mul(&k(step)).on(loc).add(&k(start));
                parts.push(i.on(loc).broadcast_in_dim(&shape_k, &[batch_of(r) as i64]));
            }
            Dim::Int(j) => {
                sizes.push(1);
                collapsed.push(d as i64);
                components.push(d as i64);
                parts.push(k(j).on(loc).broadcast_to(&shape_k));
            }
            Dim::Array(a) => {
                sizes.push(1);
                collapsed.push(d as i64);
                components.push(d as i64);
                let arr = &p.arrays[a];
                let at = arr.element_type().expect("checked in plan");
                let mut i = if at == it {
                    arr.clone()
                } else {
                    arr.on(loc).convert(it)
                };
                if at.is_signed_int() {
                    let neg = i.on(loc).lt(0);
                    let wrapped = i.on(loc).add(&k(n));
                    i = b.on(loc).select(&neg, &wrapped, &i);
                }
                let rank = arr.dims().map(|d| d.len()).unwrap_or(0);
                let lead = block_batch.len() - rank;
                let on = &block_batch[lead..];
                let i = i.on(loc).broadcast_in_dim(&batch, on);
                if want_valid {
                    let ok = i.on(loc).ge(0).and(&i.on(loc).lt(n));
                    valid = Some(match valid {
                        Some(v) => v.on(loc).and(&ok),
                        None => ok,
                    });
                }
                let i = if clamp {
                    i.on(loc).clamp(&k(0), &k((n - 1).max(0)))
                } else {
                    i
                };
                parts.push(i.on(loc).reshape(&shape_k));
            }
        }
    }
    let indices = match parts.len() {
        0 => b
            .on(loc)
            .zeros(it, &shape_k[..batch.len()])
            .on(loc)
            .reshape(&{
                let mut s = batch.clone();
                s.push(0);
                s
            }),
        1 => parts.pop().expect("one part"),
        _ => {
            let refs: Vec<&Op> = parts.iter().collect();
            b.on(loc).concatenate(&refs, batch.len() as i64)
        }
    };
    Lowered {
        indices,
        windows,
        collapsed,
        components,
        sizes,
        batch_rank: batch.len(),
        valid,
    }
}

impl Op {
    /// numpy's `x[idx]` with JAX's meaning (see [the module](self)): integers,
    /// ranges, slices with steps, index arrays (clamped when out of range after
    /// negative entries count from the end, as JAX's reads), new axes, an
    /// ellipsis and constant boolean masks.
    ///
    /// ```
    /// use xlaclient_core::{ix, Builder, Ix, Shape};
    /// let b = Builder::new("index");
    /// let x = b.parameter(0, Shape::of::<f32>(&[6, 4]), "x");
    /// assert_eq!(x.index(&ix![-1]).dims()?, vec![4]);
    /// assert_eq!(x.index(&ix![Ix::slice(Some(1), None, 2), ..2]).dims()?, vec![3, 2]);
    /// assert_eq!(x.index(&ix![.., Ix::mask(&[true, false, true, true], &[4])]).dims()?, vec![6, 3]);
    /// assert!(x.index(&ix![6]).dims().is_err()); // out of bounds, as JAX's IndexError
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn index(&self, index: &[Ix]) -> Op {
        self.index_mode(index, IndexMode::Clip, Location::caller())
    }

    fn index_mode(&self, index: &[Ix], mode: IndexMode, loc: Loc) -> Op {
        let b = self.builder();
        if self.shape().is_err() {
            return self.clone();
        }
        let p = match plan(self, index) {
            Ok(p) => p,
            Err(e) => return b.fail(e, loc),
        };
        let ty = self.element_type().expect("an array");
        let y = self.on(loc).reshape(&p.dims);
        if p.out.contains(&0) {
            return b.on(loc).zeros(ty, &p.out);
        }
        if !p.has_arrays() {
            // Slices, reversals and a reshape.
            let r = p.dims.len();
            let (mut start, mut limit, mut strides) = (vec![0; r], p.dims.clone(), vec![1; r]);
            let mut rev = Vec::new();
            for (d, how) in p.how.iter().enumerate() {
                match *how {
                    Dim::Window { start: s, len } => {
                        start[d] = s;
                        limit[d] = s + len;
                    }
                    Dim::Int(j) => {
                        start[d] = j;
                        limit[d] = j + 1;
                    }
                    Dim::Strided {
                        start: s,
                        step,
                        len,
                    } => {
                        let last = s + (len - 1) * step;
                        let (lo, hi) = if step > 0 { (s, last) } else { (last, s) };
                        start[d] = lo;
                        limit[d] = hi + 1;
                        strides[d] = step.abs();
                        if step < 0 {
                            rev.push(d as i64);
                        }
                    }
                    Dim::Array(_) => unreachable!("no arrays here"),
                }
            }
            let z = y.on(loc).slice(&start, &limit, &strides);
            let z = if rev.is_empty() {
                z
            } else {
                z.on(loc).reverse(&rev)
            };
            return z.on(loc).reshape(&p.out);
        }
        if let Some(d) = (0..p.dims.len()).find(|&d| p.advanced(d) && p.dims[d] == 0) {
            return b.fail(
                err(
                    &self.shape().expect("an array"),
                    ShapeErrorKind::Dimension,
                    format!("an index array cannot index axis {d}, of size 0"),
                ),
                loc,
            );
        }
        let l = lower(&p, &b, false, mode == IndexMode::Fill, loc);
        let dims = GatherDims {
            offset_dims: l.windows.clone(),
            collapsed_slice_dims: l.collapsed.clone(),
            start_index_map: l.components.clone(),
            index_vector_dim: l.batch_rank as i64,
            ..Default::default()
        };
        let got = y.on(loc).gather(&l.indices, &dims, &l.sizes, false);
        match l.valid {
            Some(valid) if mode == IndexMode::Fill => {
                let batch_axes: Vec<i64> = (0..p.out.len() as i64)
                    .filter(|r| !l.windows.contains(r))
                    .collect();
                let valid = valid.on(loc).broadcast_in_dim(&p.out, &batch_axes);
                let fill = b.scalar_of(ty, super::indexing::fill_value(ty), loc);
                b.on(loc).select(&valid, &got, &fill)
            }
            _ => got,
        }
    }

    /// JAX's `x.at[idx]`: the indexed elements of this array, to read
    /// ([`AtIndex::get`]) or to update functionally ([`AtIndex::set`],
    /// [`add`](AtIndex::add), [`mul`](AtIndex::mul), [`min`](AtIndex::min),
    /// [`max`](AtIndex::max)), which return the whole updated array. Index entries
    /// as [`index`](Self::index)'s; an update's value broadcasts to the indexed
    /// shape and is converted to this array's type (a Rust number too). Index
    /// arrays with repeated entries: `add`/`mul`/`min`/`max` combine every update,
    /// `set` keeps one of them (which one is unspecified, as in JAX).
    ///
    /// ```
    /// use xlaclient_core::{ix, Builder, IndexMode, Shape};
    /// let b = Builder::new("at");
    /// let x = b.parameter(0, Shape::of::<f32>(&[5, 3]), "x");
    /// let i = b.parameter(1, Shape::of::<i32>(&[]), "i");
    /// let row = b.parameter(2, Shape::of::<f32>(&[3]), "row");
    /// let y = x.at(&ix![&i]).set(&row); // buffer.at[i].set(row)
    /// let z = x.at(&ix![.., 0]).mode(IndexMode::Clip).add(1.0);
    /// assert_eq!((y.dims()?, z.dims()?), (vec![5, 3], vec![5, 3]));
    /// assert_eq!(x.at(&ix![1..3]).get().dims()?, vec![2, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn at(&self, index: &[Ix]) -> AtIndex {
        AtIndex {
            x: self.clone(),
            index: index.to_vec(),
            mode: None,
        }
    }
}

/// JAX's `x.at[idx]`, made by [`Op::at`]: call one of its methods.
#[derive(Clone, Debug)]
#[must_use = "an `at` does nothing until `get`, `set`, `add`, … is called"]
pub struct AtIndex {
    x: Op,
    index: Vec<Ix>,
    mode: Option<IndexMode>,
}

#[derive(Clone, Copy)]
enum Update {
    Set,
    Add,
    Mul,
    Min,
    Max,
}

impl AtIndex {
    /// How out-of-range index array entries are treated (JAX's `mode=`); the
    /// default is [`IndexMode::Clip`] for `get`, [`IndexMode::Drop`] for updates.
    pub fn mode(mut self, mode: IndexMode) -> AtIndex {
        self.mode = Some(mode);
        self
    }

    /// The indexed elements (`x.at[idx].get(mode=…)`).
    #[track_caller]
    pub fn get(&self) -> Op {
        let mode = self.mode.unwrap_or(IndexMode::Clip);
        self.x.index_mode(&self.index, mode, Location::caller())
    }

    /// This array with the indexed elements replaced by `v` (`.set(v)`).
    #[track_caller]
    pub fn set<'a>(&self, v: impl Into<Param<'a>>) -> Op {
        self.update(Update::Set, v.into(), Location::caller())
    }

    /// This array with `v` added to the indexed elements (`.add(v)`; repeated
    /// indices add every time).
    #[track_caller]
    pub fn add<'a>(&self, v: impl Into<Param<'a>>) -> Op {
        self.update(Update::Add, v.into(), Location::caller())
    }

    /// This array with the indexed elements multiplied by `v` (`.multiply(v)`).
    #[track_caller]
    pub fn mul<'a>(&self, v: impl Into<Param<'a>>) -> Op {
        self.update(Update::Mul, v.into(), Location::caller())
    }

    /// This array with the indexed elements replaced by their minimum with `v`
    /// (`.min(v)`).
    #[track_caller]
    pub fn min<'a>(&self, v: impl Into<Param<'a>>) -> Op {
        self.update(Update::Min, v.into(), Location::caller())
    }

    /// This array with the indexed elements replaced by their maximum with `v`
    /// (`.max(v)`).
    #[track_caller]
    pub fn max<'a>(&self, v: impl Into<Param<'a>>) -> Op {
        self.update(Update::Max, v.into(), Location::caller())
    }

    fn update(&self, how: Update, v: Param<'_>, loc: Loc) -> Op {
        let x = &self.x;
        let b = x.builder();
        if x.shape().is_err() {
            return x.clone();
        }
        if let Param::Array(v) = v
            && v.shape().is_err()
        {
            return v.clone();
        }
        let p = match plan(x, &self.index) {
            Ok(p) => p,
            Err(e) => return b.fail(e, loc),
        };
        let xs = x.shape().expect("checked");
        let ty = xs.element_type().expect("an array");
        let v = match v {
            Param::Number(s) => b.scalar_of(ty, s, loc),
            Param::Array(v) if v.element_type().ok() == Some(ty) => v.clone(),
            Param::Array(v) => v.on(loc).convert(ty),
        };
        // The value, broadcast to the indexed shape (numpy's rules).
        let vd = v.dims().expect("checked");
        if broadcast_shapes(&[vd.clone(), p.out.clone()]).as_deref() != Some(&p.out[..]) {
            return b.fail(
                ShapeError::new(
                    "index_update",
                    &[&xs, &v.shape().expect("checked")],
                    ShapeErrorKind::Dimension,
                    format!(
                        "the update of shape {vd:?} does not broadcast to the indexed shape {:?}",
                        p.out
                    ),
                ),
                loc,
            );
        }
        if p.out.contains(&0) {
            return x.clone();
        }
        let upd = if vd == p.out {
            v
        } else {
            v.on(loc).broadcast_to(&p.out)
        };
        let clamp = self.mode == Some(IndexMode::Clip);
        let l = lower(&p, &b, clamp, false, loc);
        let y = x.on(loc).reshape(&p.dims);
        let dims = ScatterDims {
            update_window_dims: l.windows.clone(),
            inserted_window_dims: l.collapsed.clone(),
            scatter_dims_to_operand_dims: l.components.clone(),
            index_vector_dim: l.batch_rank as i64,
            ..Default::default()
        };
        let out = b.on(loc).scatter(
            &[&y],
            &l.indices,
            &[&upd],
            &dims,
            false,
            false,
            |old, new| {
                vec![match how {
                    Update::Set => new[0].clone(),
                    Update::Add => old[0].add(&new[0]),
                    Update::Mul => old[0].mul(&new[0]),
                    Update::Min => old[0].min(&new[0]),
                    Update::Max => old[0].max(&new[0]),
                }]
            },
        );
        out[0].on(loc).reshape(xs.dims())
    }
}
