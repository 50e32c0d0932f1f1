//! Replicated programs over trees, with named device axes: JAX's `pmap`.
//!
//! [`ClientExt::pmap`](crate::ClientExt::pmap) traces a function of trees once (on
//! the shapes of *one* device's inputs), compiles it for `N` replicas (one per
//! device, the first `N` of the client's addressable devices) and returns a
//! [`Pmap`], called with one tree of buffers per device. The devices form a grid
//! of named axes — `&[("i", 8)]`, or nested: `&[("hosts", 2), ("devices", 4)]`,
//! replica `r = host * 4 + device` — and inside the function collectives are
//! written by axis name, as in JAX, and lowered to replica groups:
//!
//! | here | JAX |
//! |---|---|
//! | `x.psum_axis("i")` | `lax.psum(x, 'i')` |
//! | `x.pmean_axis("i")`, `pmax_axis`, `pmin_axis` | `lax.pmean`, `lax.pmax`, `lax.pmin` |
//! | `x.all_gather_axis("i", d)` | `lax.all_gather(x, 'i', axis=d)` |
//! | `x.all_gather_axis_tiled("i", d)` | `lax.all_gather(x, 'i', axis=d, tiled=True)` |
//! | `x.psum_scatter_axis("i", d)` | `lax.psum_scatter(x, 'i', scatter_dimension=d, tiled=True)` |
//! | `x.ppermute_axis("i", &[(0, 1), …])` | `lax.ppermute(x, 'i', perm=[(0, 1), …])` |
//! | `b.axis_index("i")` | `lax.axis_index('i')` |
//!
//! Every one takes one axis name or several (`["hosts", "devices"]`, a tuple of
//! names in JAX; `ppermute_axis` takes one): a collective over `"devices"` combines
//! the replicas that share the other coordinates (here: the 4 devices of one
//! host), one over both names combines all 8. Several names are ordered as given:
//! `all_gather_axis(["hosts", "devices"], 0)` stacks replica `h * 4 + d` at
//! position `h * 4 + d`, and `axis_index(["devices", "hosts"])` is `d * 2 + h`.
//!
//! An unknown axis name, a name given twice, and a named collective built outside
//! a replicated program (no axes bound) are errors of
//! [`Builder::build`](crate::Builder::build) (and of `pmap`) that name the op, the
//! axis and the user's line. The named collectives lower to the ops of
//! [`crate::ops::collective`], so gradients flow through them by those ops' rules
//! (the sum's cotangent is summed over the same groups, and so on).
//!
//! On the host side, [`Pmap::shard_host`] uploads a tree of [`Stacked`] host
//! arrays whose leading axis runs over the devices (JAX's `pmap` input
//! convention), [`Pmap::replicate`] copies one tree of buffers to every device,
//! and [`Pmap::stack_host`] downloads per-device outputs stacked on a leading
//! device axis.

use std::fmt;
use std::panic::Location;

use crate::builder::{Builder, Computation, Op};
use crate::error::{Error, GraphError, Result};
use crate::ops::elementwise::BinaryOp;
use crate::pjrt::{Arg, Buffer, Client, CompileOptions, Device, LoadedExecutable};
use crate::shape::{ElementType, NativeType, Shape};
use crate::tree::{Leaf, Tree};

// ---------------------------------------------------------------------------------
// Errors

/// What went wrong around a replicated program: its axes, its devices, or the
/// per-device trees it was called with. (Errors inside the traced function are
/// the builder's, [`Error::Graph`] or [`Error::Shape`].)
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PmapError {
    /// The axes given are not a grid: no axis, an empty name, a name twice, or a
    /// size of 0.
    Axes {
        /// The axes given, as `name (size)`.
        axes: String,
        /// What is wrong with them.
        reason: String,
    },
    /// The axes ask for more devices than the client has.
    TooFewDevices {
        /// Replicas the axes ask for (the product of their sizes).
        wanted: usize,
        /// Addressable devices of the client.
        available: usize,
    },
    /// A call was given another number of per-device trees than there are devices.
    DeviceCount {
        /// Trees given.
        given: usize,
        /// Devices the program runs on.
        expected: usize,
    },
    /// Device `device`'s tree differs in structure from the spec.
    Structure {
        /// The device (index into [`Pmap::devices`]).
        device: usize,
        /// The spec's structure (see [`Tree::structure`]).
        expected: Vec<usize>,
        /// The tree's.
        got: Vec<usize>,
    },
    /// A buffer of device `device`'s tree lives on another device.
    WrongDevice {
        /// The device the tree is for (index into [`Pmap::devices`]).
        device: usize,
        /// Its id.
        device_id: i32,
        /// The leaf's path in the tree (empty for a bare leaf).
        leaf: String,
        /// The id of the device the buffer is on.
        on: i32,
    },
    /// A host array for [`Pmap::shard_host`] (or built by [`Stacked::new`]) does
    /// not fit: its leading axis is not the number of devices, or its data does
    /// not fill its dimensions.
    Host {
        /// The leaf's path in the tree (empty for a bare leaf or a lone array).
        leaf: String,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for PmapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let leaf = |l: &str| {
            if l.is_empty() {
                "the leaf".to_string()
            } else {
                format!("leaf `{l}`")
            }
        };
        match self {
            PmapError::Axes { axes, reason } => {
                write!(f, "pmap axes [{axes}]: {reason}")
            }
            PmapError::TooFewDevices { wanted, available } => write!(
                f,
                "pmap: the axes ask for {wanted} devices but the client has {available} \
                 (ClientOptions::cpu_device_count sets the CPU plugin's count)"
            ),
            PmapError::DeviceCount { given, expected } => write!(
                f,
                "pmap call: {given} per-device trees given; the program runs on {expected} devices"
            ),
            PmapError::Structure {
                device,
                expected,
                got,
            } => write!(
                f,
                "pmap call: device {device}'s tree differs in structure from the spec \
                 (Vec lengths, Option presence, enum variants): {expected:?} vs {got:?}"
            ),
            PmapError::WrongDevice {
                device,
                device_id,
                leaf: l,
                on,
            } => write!(
                f,
                "pmap call: {} of device {device}'s tree is on device id {on}, not on \
                 device id {device_id} (copy it with Buffer::copy_to_device, or upload with \
                 Pmap::shard_host / Pmap::replicate)",
                leaf(l)
            ),
            PmapError::Host { leaf: l, reason } => {
                write!(f, "pmap host array ({}): {reason}", leaf(l))
            }
        }
    }
}

impl std::error::Error for PmapError {}

// ---------------------------------------------------------------------------------
// Axis names

/// One axis name or several, as the named collectives take them: `"i"`, or
/// `["hosts", "devices"]` (JAX's tuple of axis names), or a slice or `Vec` of
/// names.
pub trait AxisNames {
    /// The names, in the order given.
    fn names(&self) -> Vec<&str>;
}

impl AxisNames for &str {
    fn names(&self) -> Vec<&str> {
        vec![self]
    }
}

impl AxisNames for String {
    fn names(&self) -> Vec<&str> {
        vec![self.as_str()]
    }
}

impl AxisNames for &String {
    fn names(&self) -> Vec<&str> {
        vec![self.as_str()]
    }
}

impl<const N: usize> AxisNames for [&str; N] {
    fn names(&self) -> Vec<&str> {
        self.to_vec()
    }
}

impl AxisNames for &[&str] {
    fn names(&self) -> Vec<&str> {
        self.to_vec()
    }
}

impl AxisNames for Vec<&str> {
    fn names(&self) -> Vec<&str> {
        self.clone()
    }
}

/// `name (size), …` for messages.
fn axes_text<S: AsRef<str>>(axes: &[(S, usize)]) -> String {
    axes.iter()
        .map(|(n, s)| format!("{} ({s})", n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that `axes` form a grid and returns the number of replicas.
fn check_axes(axes: &[(&str, usize)]) -> std::result::Result<usize, PmapError> {
    let err = |reason: String| PmapError::Axes {
        axes: axes_text(axes),
        reason,
    };
    if axes.is_empty() {
        return Err(err("at least one axis is needed".into()));
    }
    for (i, (name, size)) in axes.iter().enumerate() {
        if name.is_empty() {
            return Err(err(format!("axis {i} has an empty name")));
        }
        if *size == 0 {
            return Err(err(format!("axis `{name}` has size 0")));
        }
        if axes[..i].iter().any(|(n, _)| n == name) {
            return Err(err(format!("axis `{name}` is named twice")));
        }
    }
    axes.iter()
        .try_fold(1usize, |n, (_, s)| n.checked_mul(*s))
        .filter(|&n| i64::try_from(n).is_ok())
        .ok_or_else(|| err("the product of the sizes overflows".into()))
}

/// The selected axes of a bound grid: positions in the grid, in the order named.
struct Selection {
    /// The grid (all bound axes).
    grid: Vec<(String, usize)>,
    /// Positions in `grid` of the named axes, in the order named.
    picked: Vec<usize>,
}

impl Selection {
    /// The stride of grid axis `k` in the replica id (row-major).
    fn stride(&self, k: usize) -> usize {
        self.grid[k + 1..].iter().map(|(_, s)| s).product()
    }

    /// The number of replicas in one group.
    fn group_size(&self) -> usize {
        self.picked.iter().map(|&k| self.grid[k].1).product()
    }

    /// The replica ids of the grid's points, each given as a function of its
    /// coordinates along the unpicked axes (`outer`, grid order) and along the
    /// picked ones (`inner`, the order named): groups of the picked axes, one
    /// per point of the others, members in row-major order of the names.
    fn groups(&self) -> Vec<Vec<i64>> {
        let others: Vec<usize> = (0..self.grid.len())
            .filter(|k| !self.picked.contains(k))
            .collect();
        let base_ids = self.points(&others);
        let member_ids = self.points(&self.picked);
        base_ids
            .iter()
            .map(|b| member_ids.iter().map(|m| (b + m) as i64).collect())
            .collect()
    }

    /// The id offsets of every point of the grid axes `axes` (row-major in the
    /// order of `axes`), the other coordinates 0.
    fn points(&self, axes: &[usize]) -> Vec<usize> {
        let mut out = vec![0usize];
        for &k in axes {
            let stride = self.stride(k);
            out = out
                .iter()
                .flat_map(|o| (0..self.grid[k].1).map(move |c| o + c * stride))
                .collect();
        }
        out
    }
}

impl Builder {
    /// Binds the named device axes of a replicated program to this builder's
    /// graph: the grid `axes` (row-major: the replica id is the coordinates'
    /// row-major index; the product of the sizes is the number of replicas to
    /// compile for). [`ClientExt::pmap`](crate::ClientExt::pmap) does this; call it
    /// to build a replicated module by hand (then compile it with
    /// `CompileOptions::num_replicas`). A second call replaces the axes for the
    /// ops built after it.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("by_hand");
    /// b.bind_axes(&[("hosts", 2), ("devices", 4)])?;
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let y = x.psum_axis("devices"); // replica groups {0,1,2,3}, {4,5,6,7}
    /// assert!(b.build(&y)?.to_hlo_text().contains("replica_groups={{0,1,2,3},{4,5,6,7}}"));
    /// assert!(b.bind_axes(&[("i", 2), ("i", 2)]).is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`PmapError::Axes`] for no axis, an empty name, a name twice or a size 0.
    pub fn bind_axes(&self, axes: &[(&str, usize)]) -> Result<()> {
        check_axes(axes)?;
        self.g.borrow_mut().axes = Some(axes.iter().map(|(n, s)| (n.to_string(), *s)).collect());
        Ok(())
    }

    /// The named device axes bound to this builder (empty outside a replicated
    /// program), as `(name, size)`.
    pub fn axes(&self) -> Vec<(String, usize)> {
        self.g.borrow().axes.clone().unwrap_or_default()
    }

    /// The axes `names` of the bound grid, or a failed op that names `op`, the
    /// axis and the line.
    fn select_axes(
        &self,
        op: &str,
        names: &[&str],
        loc: &'static Location<'static>,
    ) -> std::result::Result<Selection, Op> {
        let fail = |reason: String| {
            Err(self.fail_graph(
                GraphError::Recorded {
                    reason: format!("`{op}` {reason}"),
                },
                loc,
            ))
        };
        let Some(grid) = self.g.borrow().axes.clone() else {
            return fail(format!(
                "over axis {}: no device axes are bound here; named collectives run inside \
                 a replicated program (ClientExt::pmap, or Builder::bind_axes)",
                quoted(names)
            ));
        };
        if names.is_empty() {
            return fail("was given no axis name".into());
        }
        let mut picked = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return fail(format!("over axis `{name}`: the name is given twice"));
            }
            match grid.iter().position(|(n, _)| n == name) {
                Some(k) => picked.push(k),
                None => {
                    return fail(format!(
                        "over axis `{name}`: no such axis; the program's axes are {}",
                        axes_text(&grid)
                    ));
                }
            }
        }
        Ok(Selection { grid, picked })
    }

    /// `jax.lax.axis_index`: this replica's coordinate along the axis `names`
    /// (an `s32` scalar, 0 to the axis size − 1); several names give the
    /// row-major index over them, in the order named.
    ///
    /// ```
    /// use xlaclient_core::Builder;
    /// let b = Builder::new("where");
    /// b.bind_axes(&[("hosts", 2), ("devices", 4)])?;
    /// let d = b.axis_index("devices"); // replica % 4
    /// assert_eq!(d.dims()?, Vec::<i64>::new());
    /// let bad = b.axis_index("cores");
    /// let err = b.build(&bad).unwrap_err().to_string();
    /// assert!(err.contains("`axis_index` over axis `cores`: no such axis"), "{err}");
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn axis_index(&self, names: impl AxisNames) -> Op {
        let loc = Location::caller();
        if let [name] = names.names()[..] {
            if self.vmap_axis(name).is_some() {
                let zero = self.on(loc).constant(0i32);
                return crate::batching::marker(&zero, name, crate::batching::Named::Index, loc);
            }
        }
        let sel = match self.select_axes("axis_index", &names.names(), loc) {
            Ok(s) => s,
            Err(failed) => return failed,
        };
        let b = self.on(loc);
        let r = b.replica_id();
        let mut index: Option<Op> = None;
        for &k in &sel.picked {
            let (stride, size) = (sel.stride(k), sel.grid[k].1);
            let u = |v: usize| b.constant_of_type(ElementType::U32, v as u64);
            let coord = r.binary(BinaryOp::Divide, &u(stride), loc).binary(
                BinaryOp::Remainder,
                &u(size),
                loc,
            );
            index = Some(match index {
                None => coord,
                Some(i) => {
                    i.binary(BinaryOp::Multiply, &u(size), loc)
                        .binary(BinaryOp::Add, &coord, loc)
                }
            });
        }
        match index {
            Some(i) => i.convert(ElementType::S32),
            None => b.error("`axis_index` was given no axis name"),
        }
    }
}

/// `` `a`, `b` `` for messages.
fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Op {
    /// Inside `vmap` over the axis `names` names (one name): the marker of the
    /// collective over the batch (see `crate::batching`).
    fn vmap_collective(
        &self,
        names: &[&str],
        what: crate::batching::Named,
        loc: &'static Location<'static>,
    ) -> Option<Op> {
        match names {
            [name] if !self.is_poisoned() && self.builder().vmap_axis(name).is_some() => {
                Some(crate::batching::marker(self, name, what, loc))
            }
            _ => None,
        }
    }

    /// The replica groups of the named axes, or a failed op.
    fn named_groups(
        &self,
        op: &str,
        names: &[&str],
        loc: &'static Location<'static>,
    ) -> std::result::Result<(Vec<Vec<i64>>, usize), Op> {
        if self.is_poisoned() {
            return Err(self.clone());
        }
        let sel = self.builder().select_axes(op, names, loc)?;
        Ok((sel.groups(), sel.group_size()))
    }

    /// `jax.lax.psum`: the sum over the replicas along the axis `names` (the
    /// others' coordinates fixed). Lowered to an all-reduce with one replica group
    /// per point of the other axes; its gradient is the cotangent summed the same
    /// way.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("sums");
    /// b.bind_axes(&[("hosts", 2), ("devices", 4)])?;
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let within = x.psum_axis("devices");        // {0,1,2,3}, {4,5,6,7}
    /// let across = x.psum_axis("hosts");          // {0,4}, {1,5}, {2,6}, {3,7}
    /// let all = x.psum_axis(["hosts", "devices"]); // {0,…,7}
    /// let text = b.build_tuple(&[&within, &across, &all])?.to_hlo_text();
    /// assert!(text.contains("replica_groups={{0,4},{1,5},{2,6},{3,7}}"), "{text}");
    /// let oops = x.psum_axis("device");
    /// let err = b.build(&oops).unwrap_err().to_string();
    /// assert!(err.contains("`psum_axis` over axis `device`: no such axis"), "{err}");
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn psum_axis(&self, names: impl AxisNames) -> Op {
        self.reduce_axis(
            "psum_axis",
            BinaryOp::Add,
            &names.names(),
            Location::caller(),
        )
    }

    /// `jax.lax.pmax`: the maximum over the replicas along the axis `names`.
    #[track_caller]
    pub fn pmax_axis(&self, names: impl AxisNames) -> Op {
        self.reduce_axis(
            "pmax_axis",
            BinaryOp::Maximum,
            &names.names(),
            Location::caller(),
        )
    }

    /// `jax.lax.pmin`: the minimum over the replicas along the axis `names`.
    #[track_caller]
    pub fn pmin_axis(&self, names: impl AxisNames) -> Op {
        self.reduce_axis(
            "pmin_axis",
            BinaryOp::Minimum,
            &names.names(),
            Location::caller(),
        )
    }

    /// `jax.lax.pmean`: the mean over the replicas along the axis `names` (the
    /// sum divided by the number of replicas along them, a constant).
    #[track_caller]
    pub fn pmean_axis(&self, names: impl AxisNames) -> Op {
        let loc = Location::caller();
        if let Some(m) = self.vmap_collective(&names.names(), crate::batching::Named::Mean, loc) {
            return m;
        }
        match self.named_groups("pmean_axis", &names.names(), loc) {
            Ok((groups, _)) => self.on(loc).pmean(&groups),
            Err(failed) => failed,
        }
    }

    fn reduce_axis(
        &self,
        op: &str,
        by: BinaryOp,
        names: &[&str],
        loc: &'static Location<'static>,
    ) -> Op {
        if let Some(m) = self.vmap_collective(
            names,
            match by {
                BinaryOp::Add => crate::batching::Named::Sum,
                BinaryOp::Maximum => crate::batching::Named::Max,
                _ => crate::batching::Named::Min,
            },
            loc,
        ) {
            return m;
        }
        match self.named_groups(op, names, loc) {
            Ok((groups, _)) => self.all_reduce_by(
                by,
                &crate::ops::collective::CollectiveAttrs::groups(&groups),
                loc,
            ),
            Err(failed) => failed,
        }
    }

    /// `jax.lax.all_gather(x, names, axis=dimension)`: every replica's operand
    /// along the axis `names`, stacked on a new axis `dimension` of the result
    /// (of the size of the named axes; 0 ≤ `dimension` ≤ rank), in the order of
    /// the replicas' coordinates.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("gather");
    /// b.bind_axes(&[("i", 4)])?;
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// assert_eq!(x.all_gather_axis("i", 1).dims()?, vec![2, 4, 3]);
    /// assert_eq!(x.all_gather_axis_tiled("i", 1).dims()?, vec![2, 12]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn all_gather_axis(&self, names: impl AxisNames, dimension: i64) -> Op {
        let loc = Location::caller();
        if let (Ok(rank), true) = (
            self.rank(),
            (0..=self.rank().unwrap_or(0) as i64).contains(&dimension),
        ) {
            let _ = rank;
            if let Some(m) = self.vmap_collective(
                &names.names(),
                crate::batching::Named::Gather(dimension as usize),
                loc,
            ) {
                return m;
            }
        }
        let (groups, _) = match self.named_groups("all_gather_axis", &names.names(), loc) {
            Ok(g) => g,
            Err(failed) => return failed,
        };
        let rank = match self.rank() {
            Ok(r) => r as i64,
            Err(_) => return self.builder().fail_not_array(self, "all_gather_axis", loc),
        };
        if !(0..=rank).contains(&dimension) {
            return self.builder().fail_graph(
                GraphError::Recorded {
                    reason: format!(
                        "`all_gather_axis`: dimension {dimension} is not a place for a new axis \
                         of a rank-{rank} operand (0 to {rank})"
                    ),
                },
                loc,
            );
        }
        let x = self.on(loc);
        x.expand_dims(dimension).all_gather(dimension, &groups)
    }

    /// `jax.lax.all_gather(x, names, axis=dimension, tiled=True)`: the operands
    /// of the replicas along the axis `names` concatenated along `dimension`
    /// (which grows by the number of replicas along them).
    #[track_caller]
    pub fn all_gather_axis_tiled(&self, names: impl AxisNames, dimension: i64) -> Op {
        let loc = Location::caller();
        match self.named_groups("all_gather_axis_tiled", &names.names(), loc) {
            Ok((groups, _)) => self.on(loc).all_gather(dimension, &groups),
            Err(failed) => failed,
        }
    }

    /// `jax.lax.psum_scatter(x, names, scatter_dimension=dimension, tiled=True)`:
    /// the sum over the replicas along the axis `names`, of which replica `k`
    /// (its coordinate along them) keeps the `k`-th block along `dimension`
    /// (whose size must divide by the number of replicas). The transpose of
    /// [`all_gather_axis_tiled`](Self::all_gather_axis_tiled).
    #[track_caller]
    pub fn psum_scatter_axis(&self, names: impl AxisNames, dimension: i64) -> Op {
        let loc = Location::caller();
        match self.named_groups("psum_scatter_axis", &names.names(), loc) {
            Ok((groups, _)) => self
                .on(loc)
                .reduce_scatter(BinaryOp::Add, dimension, &groups),
            Err(failed) => failed,
        }
    }

    /// `jax.lax.ppermute(x, name, perm)`: along the axis `name`, the replica at
    /// coordinate `source` sends its operand to the one at `target` for each
    /// `(source, target)` of `perm` (within each line of the other axes); a
    /// replica that is no target gets zeros. No source and no target may appear
    /// twice, and each must be below the axis size. Its gradient sends the
    /// cotangents back along the pairs reversed.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("ring");
    /// b.bind_axes(&[("hosts", 2), ("devices", 2)])?;
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let swapped = x.ppermute_axis("devices", &[(0, 1), (1, 0)]);
    /// let text = b.build(&swapped)?.to_hlo_text();
    /// assert!(text.contains("source_target_pairs={{0,1},{1,0},{2,3},{3,2}}"), "{text}");
    /// assert!(b.build(&x.ppermute_axis("devices", &[(0, 2)])).is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn ppermute_axis(&self, name: &str, perm: &[(i64, i64)]) -> Op {
        let loc = Location::caller();
        if self.is_poisoned() {
            return self.clone();
        }
        let b = self.builder();
        let sel = match b.select_axes("ppermute_axis", &[name], loc) {
            Ok(s) => s,
            Err(failed) => return failed,
        };
        let k = sel.picked[0];
        let size = sel.grid[k].1 as i64;
        if let Some(&(s, t)) = perm
            .iter()
            .find(|&&(s, t)| !(0..size).contains(&s) || !(0..size).contains(&t))
        {
            return b.fail_graph(
                GraphError::Recorded {
                    reason: format!(
                        "`ppermute_axis` over axis `{name}`: the pair ({s}, {t}) names a \
                         coordinate outside 0..{size}"
                    ),
                },
                loc,
            );
        }
        let stride = sel.stride(k) as i64;
        let others: Vec<usize> = (0..sel.grid.len()).filter(|&j| j != k).collect();
        let mut pairs = Vec::with_capacity(perm.len() * sel.points(&others).len());
        for base in sel.points(&others) {
            let base = base as i64;
            pairs.extend(
                perm.iter()
                    .map(|&(s, t)| (base + s * stride, base + t * stride)),
            );
        }
        self.on(loc).collective_permute(&pairs)
    }
}

// ---------------------------------------------------------------------------------
// Host arrays with a leading device axis

/// A host array whose leading axis runs over devices: what [`Pmap::shard_host`]
/// splits (row `d` goes to device `d`) and [`Pmap::stack_host`] returns (device
/// `d`'s output as row `d`), as JAX's `pmap` takes and returns arrays. Row-major
/// values of one native type and the dimensions (`dims[0]` = devices).
#[derive(Clone, Debug, PartialEq)]
pub struct Stacked<T> {
    data: Vec<T>,
    dims: Vec<i64>,
}

impl<T: NativeType> Leaf for Stacked<T> {}

impl<T: NativeType> Stacked<T> {
    /// `data` (row-major) as an array of `dims`, whose first entry is the number
    /// of devices.
    ///
    /// ```
    /// use xlaclient_core::pmap::Stacked;
    /// let xs = Stacked::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// assert_eq!(xs.row(1), Some(&[4.0, 5.0, 6.0][..]));
    /// assert_eq!(xs.row(2), None);
    /// assert!(Stacked::new(vec![1.0f32; 5], &[2, 3]).is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`PmapError::Host`] when `dims` is empty or negative, or `data` does not
    /// have their product of elements.
    pub fn new(data: Vec<T>, dims: &[i64]) -> Result<Stacked<T>> {
        let err = |reason: String| {
            Error::from(PmapError::Host {
                leaf: String::new(),
                reason,
            })
        };
        if dims.is_empty() {
            return Err(err("a stacked array needs a leading device axis".into()));
        }
        if dims.iter().any(|&d| d < 0) {
            return Err(err(format!("negative dimension in {dims:?}")));
        }
        let n = dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
            .ok_or_else(|| err(format!("the dimensions {dims:?} overflow")))?;
        if n != data.len() {
            return Err(err(format!(
                "{} values given for dimensions {dims:?} ({n} values)",
                data.len()
            )));
        }
        Ok(Stacked {
            data,
            dims: dims.to_vec(),
        })
    }

    /// The dimensions (the leading one runs over devices).
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// All values, row-major.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// The values, row-major, taken out.
    pub fn into_data(self) -> Vec<T> {
        self.data
    }

    /// Row `d` (device `d`'s array), row-major; `None` when `d` is not below
    /// `dims()[0]`.
    pub fn row(&self, d: usize) -> Option<&[T]> {
        let rows = usize::try_from(self.dims[0]).ok()?;
        if d >= rows {
            return None;
        }
        let per = self.data.len() / rows;
        self.data.get(d * per..(d + 1) * per)
    }
}

// ---------------------------------------------------------------------------------
// The compiled program

/// A function of trees compiled for several devices (JAX's `pmap`): called with
/// one tree of buffers per device (each on its device), it runs the program on
/// every device at once and returns one output tree per device, with the
/// buffers on that device. `I` is one device's input spec and `O` its output
/// shapes (trees of [`Shape`]s).
///
/// ```
/// use xlaclient_core::{Client, ClientExt, ClientOptions, Op, Plugin, Shape};
/// use xlaclient_core::pmap::Stacked;
///
/// let plugin = Plugin::default_plugin()?;
/// let client = Client::new(&plugin, &ClientOptions::new().cpu_device_count(4))?;
/// // Each device normalises its row by the sum over all devices: jax.pmap(f, 'i').
/// let f = client.pmap("normalise", &[("i", 4)], &Shape::of::<f32>(&[2]), |_, x: Op| {
///     let total = x.psum_axis("i");
///     &x / &total
/// })?;
/// let xs = Stacked::new(vec![1.0f32, 1.0, 2.0, 1.0, 3.0, 1.0, 4.0, 1.0], &[4, 2])?;
/// let out = f.call(&f.shard_host(&xs)?)?; // one buffer per device
/// let ys: Stacked<f32> = f.stack_host(&out)?;
/// assert_eq!(ys.row(3), Some(&[0.4, 0.25][..]));
/// # Ok::<(), xlaclient_core::Error>(())
/// ```
pub struct Pmap<I, O> {
    exe: LoadedExecutable,
    module: Computation,
    input: I,
    output: O,
    aliased: Vec<bool>,
    devices: Vec<Device>,
    device_ids: Vec<i32>,
    axes: Vec<(String, usize)>,
}

/// Traces `f` on one device's `spec` with the axes bound, compiles it for one
/// replica per device (the client's first devices) and wraps it.
pub(crate) fn trace<I, R>(
    client: &Client,
    name: &str,
    axes: &[(&str, usize)],
    spec: &I,
    donate: bool,
    f: impl FnOnce(&Builder, I::With<Op>) -> R,
) -> Result<Pmap<I::With<Shape>, R::With<Shape>>>
where
    I: Tree<Shape>,
    R: Tree<Op>,
{
    let n = check_axes(axes)?;
    let available = client.addressable_devices();
    if n > available.len() {
        return Err(PmapError::TooFewDevices {
            wanted: n,
            available: available.len(),
        }
        .into());
    }
    let b = crate::jit::tracing_builder(client, name);
    b.bind_axes(axes)?;
    let crate::jit::Traced {
        module,
        output,
        aliased,
    } = crate::jit::trace_into(&b, spec, donate, f)?;
    let ids = available[..n]
        .iter()
        .map(Device::id)
        .collect::<std::result::Result<Vec<i32>, _>>()?;
    let assignment: Vec<Vec<i64>> = ids.iter().map(|&id| vec![id as i64]).collect();
    let options = CompileOptions::new()
        .num_replicas(n as i64)
        .device_assignment(&assignment);
    let exe = client.compile_with(&module, &options)?;
    // The executable's devices are in replica order: device `d` runs replica `d`.
    let devices = exe.addressable_devices();
    let device_ids = devices
        .iter()
        .map(Device::id)
        .collect::<std::result::Result<Vec<i32>, _>>()?;
    Ok(Pmap {
        exe,
        module,
        input: spec.map_ref(Shape::clone),
        output,
        aliased,
        devices,
        device_ids,
        axes: axes.iter().map(|(a, s)| (a.to_string(), *s)).collect(),
    })
}

impl<I: Tree<Shape>, O: Tree<Shape>> Pmap<I, O> {
    /// The traced module (one replica's program).
    pub fn computation(&self) -> &Computation {
        &self.module
    }

    /// The compiled executable (loaded on [`devices`](Self::devices)).
    pub fn executable(&self) -> &LoadedExecutable {
        &self.exe
    }

    /// One device's input spec.
    pub fn input_spec(&self) -> &I {
        &self.input
    }

    /// The shapes of one device's outputs, in the tree the function returned.
    pub fn output_spec(&self) -> &O {
        &self.output
    }

    /// For each input leaf, whether an output may take over its buffer when it
    /// is donated ([`call_donated`](Self::call_donated)).
    pub fn aliased_inputs(&self) -> &[bool] {
        &self.aliased
    }

    /// The devices, in replica order: the `d`-th tree of a call goes to
    /// `devices()[d]`, which runs as replica `d`.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The number of devices (replicas).
    pub fn num_devices(&self) -> usize {
        self.devices.len()
    }

    /// The named axes, `(name, size)`, outermost first.
    pub fn axes(&self) -> &[(String, usize)] {
        &self.axes
    }

    /// Checks one tree per device: the count, each tree's structure, each leaf's
    /// device. (Shapes are checked by the executable per device.)
    fn check_args(&self, args: &[I::With<Buffer>]) -> Result<()> {
        if args.len() != self.devices.len() {
            return Err(PmapError::DeviceCount {
                given: args.len(),
                expected: self.devices.len(),
            }
            .into());
        }
        for (d, tree) in args.iter().enumerate() {
            if !self.input.same_structure(tree) {
                let (mut expected, mut got) = (Vec::new(), Vec::new());
                self.input.structure(&mut expected);
                tree.structure(&mut got);
                return Err(PmapError::Structure {
                    device: d,
                    expected,
                    got,
                }
                .into());
            }
            let want = self.device_ids[d];
            for (i, leaf) in tree.leaves().into_iter().enumerate() {
                let on = leaf.device()?.id()?;
                if on != want {
                    return Err(PmapError::WrongDevice {
                        device: d,
                        device_id: want,
                        leaf: tree.leaf_paths().swap_remove(i),
                        on,
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    fn outputs(&self, outs: Vec<Vec<Buffer>>) -> Result<Vec<O::With<Buffer>>> {
        outs.into_iter()
            .map(|o| Ok(self.output.rebuild(o)?))
            .collect()
    }

    /// Runs the program on every device, `args[d]` on device `d` (each buffer on
    /// that device; kept, never donated), and returns each device's outputs in
    /// the traced tree's structure. Waits for every device.
    ///
    /// # Errors
    /// [`PmapError::DeviceCount`], [`PmapError::Structure`] or
    /// [`PmapError::WrongDevice`] for trees that do not fit; the runtime's
    /// `ArgumentShape` (naming the device and argument) for a leaf of another
    /// shape.
    pub fn call(&self, args: &[I::With<Buffer>]) -> Result<Vec<O::With<Buffer>>> {
        self.check_args(args)?;
        let lists: Vec<Vec<&Buffer>> = args.iter().map(|t| t.leaves()).collect();
        let outs = self.exe.execute_replicated(&lists)?;
        self.outputs(outs)
    }

    /// Runs the program as [`call`](Self::call) does, taking the trees by value:
    /// every aliased input (see [`aliased_inputs`](Self::aliased_inputs)) is
    /// donated on every device, so its output is written into its memory; the
    /// other inputs are dropped after the launch. The way to run a replicated
    /// training step whose state is updated in place.
    pub fn call_donated(&self, args: Vec<I::With<Buffer>>) -> Result<Vec<O::With<Buffer>>> {
        self.check_args(&args)?;
        let (donated, kept): (Vec<_>, Vec<_>) = args
            .into_iter()
            .map(|tree| crate::jit::split_donated(tree.into_leaves(), &self.aliased))
            .unzip();
        let lists: Vec<Vec<Arg<'_>>> = donated
            .into_iter()
            .zip(&kept)
            .map(|(give, keep)| crate::jit::donation_args(&self.aliased, give, keep))
            .collect();
        let outs = self.exe.execute_replicated_with(lists)?;
        self.outputs(outs)
    }

    /// One copy of `tree` on every device, in device order (JAX's
    /// `jax.device_put_replicated`): e.g. the parameters every replica starts
    /// from. Buffers of any device are copied.
    pub fn replicate<T: Tree<Buffer>>(&self, tree: &T) -> Result<Vec<T::With<Buffer>>> {
        self.devices
            .iter()
            .map(|dev| tree.try_map_ref(&mut |b: &Buffer| Ok(b.copy_to_device(dev)?)))
            .collect()
    }

    /// Uploads a tree of host arrays whose leading axis runs over the devices:
    /// row `d` of each leaf becomes device `d`'s buffer (of the remaining
    /// dimensions). The trees returned are ready for [`call`](Self::call). (For
    /// a tree of mixed element types, upload a tree per type, or per device with
    /// `Device::buffer_from_host`.)
    ///
    /// # Errors
    /// [`PmapError::Host`], naming the leaf, when a leaf's leading axis is not
    /// the number of devices.
    pub fn shard_host<T: NativeType, X: Tree<Stacked<T>>>(
        &self,
        tree: &X,
    ) -> Result<Vec<X::With<Buffer>>> {
        let n = self.devices.len();
        let paths = tree.leaf_paths();
        for (leaf, path) in tree.leaves().into_iter().zip(&paths) {
            if leaf.dims[0] != n as i64 {
                return Err(PmapError::Host {
                    leaf: path.clone(),
                    reason: format!(
                        "its leading axis has {} rows (dims {:?}) but the program runs on {n} devices",
                        leaf.dims[0], leaf.dims
                    ),
                }
                .into());
            }
        }
        self.devices
            .iter()
            .enumerate()
            .map(|(d, dev)| {
                tree.try_map_ref(&mut |leaf: &Stacked<T>| {
                    // Every leading axis was checked to be the device count.
                    let row = leaf.row(d).unwrap_or_default();
                    Ok(dev.buffer_from_host(row, &leaf.dims[1..])?)
                })
            })
            .collect()
    }

    /// Downloads one tree per device (e.g. a call's outputs) as one tree of host
    /// arrays stacked on a leading device axis: row `d` of each leaf is device
    /// `d`'s buffer. Every leaf must hold `T`.
    ///
    /// # Errors
    /// [`PmapError::DeviceCount`] for another number of trees than devices,
    /// [`PmapError::Structure`] for trees that differ from the first, the
    /// runtime's error for a leaf of another element type, [`PmapError::Host`]
    /// for a leaf whose dimensions differ between devices.
    pub fn stack_host<T: NativeType, X: Tree<Buffer>>(
        &self,
        per_device: &[X],
    ) -> Result<X::With<Stacked<T>>> {
        let n = self.devices.len();
        if per_device.len() != n {
            return Err(PmapError::DeviceCount {
                given: per_device.len(),
                expected: n,
            }
            .into());
        }
        let (mut first, mut other) = (Vec::new(), Vec::new());
        per_device[0].structure(&mut first);
        for (d, t) in per_device.iter().enumerate().skip(1) {
            other.clear();
            t.structure(&mut other);
            if other != first {
                return Err(PmapError::Structure {
                    device: d,
                    expected: first,
                    got: other,
                }
                .into());
            }
        }
        let leaves: Vec<Vec<&Buffer>> = per_device.iter().map(|t| t.leaves()).collect();
        let paths = per_device[0].leaf_paths();
        let mut i = 0;
        per_device[0].try_map_ref(&mut |_: &Buffer| -> Result<Stacked<T>> {
            let dims = leaves[0][i].dims()?;
            let mut data = Vec::new();
            for (d, l) in leaves.iter().enumerate() {
                let dd = l[i].dims()?;
                if dd != dims {
                    return Err(PmapError::Host {
                        leaf: paths[i].clone(),
                        reason: format!("device {d}'s buffer has dims {dd:?}, device 0's {dims:?}"),
                    }
                    .into());
                }
                data.extend(l[i].to_vec::<T>()?);
            }
            i += 1;
            let mut all = vec![n as i64];
            all.extend(dims);
            Ok(Stacked { data, dims: all })
        })
    }
}
