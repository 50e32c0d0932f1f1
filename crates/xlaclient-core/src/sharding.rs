//! SPMD sharding, as JAX's `jax.sharding`: a device [`Mesh`] with named axes, a
//! [`PartitionSpec`] ([`P`]) saying which mesh axes split which array axis, arrays
//! whose shards live on the mesh's devices ([`ShardedArray`]), a sharding
//! constraint inside a program ([`Op::with_sharding_constraint`]) and functions
//! compiled for the mesh with their inputs' and outputs' shardings
//! ([`ClientExt::jit_sharded`](crate::ClientExt::jit_sharded), JAX's
//! `jax.jit(f, in_shardings=…, out_shardings=…)`).
//!
//! One program is written for the logical (whole) arrays; XLA's SPMD partitioner
//! compiles it into the program each device runs on its shards, inserting the
//! collectives it needs (an `all-reduce` of a data-parallel gradient, an
//! `all-gather` of a split weight). The shardings travel as XLA's `OpSharding` on
//! the parameters, the root and the constraints ([`ir::Sharding`]).
//!
//! ```no_run
//! use xlaclient_core::{Client, ClientExt, ClientOptions, Mesh, Op, P, Plugin, Shape, ShardedArray};
//!
//! let plugin = Plugin::default_plugin()?;
//! let client = Client::new(&plugin, &ClientOptions::new().cpu_device_count(4))?;
//! let mesh = Mesh::new(&client, &[("data", 4)])?;
//! let x = ShardedArray::upload(&mesh, &P::new([Some("data"), None]), &[1.0f32; 16], &[8, 2])?;
//! let f = client.jit_sharded(
//!     "double",
//!     &mesh,
//!     &Shape::of::<f32>(&[8, 2]),
//!     &P::new([Some("data"), None]),
//!     &P::replicated(),
//!     |_, x: Op| &x * 2.0,
//! )?;
//! let y = f.call(&x)?;
//! assert_eq!(y.to_vec::<f32>()?, vec![2.0; 16]);
//! # Ok::<(), xlaclient_core::Error>(())
//! ```

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

use crate::builder::{Builder, Computation, Op};
use crate::error::{Error, GraphError, Result};
use crate::ir::{self, OpKind, Sharding};
use crate::pjrt::{Buffer, Client, CompileOptions, Device, LoadedExecutable};
use crate::shape::{ElementType, NativeType, Shape};
use crate::tree::{Leaf, Tree, TreeError};

fn err(reason: impl Into<String>) -> Error {
    Error::Sharding {
        reason: reason.into(),
    }
}

// ---------------------------------------------------------------------------------
// Mesh

/// Devices arranged in an n-dimensional grid with named axes (JAX's `Mesh`):
/// `Mesh::new(&client, &[("data", 4), ("model", 2)])` puts the client's first 8
/// devices in a 4 × 2 grid, row-major (device `2·i + j` at `data=i, model=j`).
///
/// Cheap to clone (shared). The mesh's position of a device is its partition
/// number in programs compiled for the mesh.
#[derive(Clone)]
pub struct Mesh {
    inner: Arc<MeshInner>,
}

struct MeshInner {
    client: Client,
    axes: Vec<(String, i64)>,
    devices: Vec<Device>,
    ids: Vec<i64>,
}

impl Mesh {
    /// A mesh over the client's first addressable devices (as many as the axes'
    /// sizes multiply to). A mesh with no axes, an axis of size 0, an empty or
    /// repeated axis name, or more devices than the client has is an
    /// [`Error::Sharding`].
    pub fn new(client: &Client, axes: &[(&str, usize)]) -> Result<Mesh> {
        let n = mesh_size(axes)?;
        let devices = client.addressable_devices();
        if n > devices.len() {
            return Err(err(format!(
                "the mesh {} needs {n} devices, the client has {}",
                axes_text(axes),
                devices.len()
            )));
        }
        Mesh::with_devices(client, axes, &devices[..n])
    }

    /// A mesh over the given devices of `client`, in row-major order of the axes.
    /// The count must be the axes' product, and each device the client's own and
    /// listed once.
    pub fn with_devices(
        client: &Client,
        axes: &[(&str, usize)],
        devices: &[Device],
    ) -> Result<Mesh> {
        let n = mesh_size(axes)?;
        if devices.len() != n {
            return Err(err(format!(
                "the mesh {} needs {n} devices, {} were given",
                axes_text(axes),
                devices.len()
            )));
        }
        let own = client.addressable_devices();
        let mut ids = Vec::with_capacity(n);
        for (i, d) in devices.iter().enumerate() {
            if !own.contains(d) {
                return Err(err(format!(
                    "device {i} of the mesh is not an addressable device of the client"
                )));
            }
            if devices[..i].contains(d) {
                return Err(err(format!("device {i} of the mesh is listed twice")));
            }
            ids.push(i64::from(d.id()?));
        }
        Ok(Mesh {
            inner: Arc::new(MeshInner {
                client: client.clone(),
                axes: axes
                    .iter()
                    .map(|(a, s)| (a.to_string(), *s as i64))
                    .collect(),
                devices: devices.to_vec(),
                ids,
            }),
        })
    }

    /// The axes, with their sizes, in order.
    pub fn axes(&self) -> impl Iterator<Item = (&str, usize)> + '_ {
        self.inner
            .axes
            .iter()
            .map(|(a, s)| (a.as_str(), *s as usize))
    }

    /// The size of axis `name`, if the mesh has it.
    pub fn axis_size(&self, name: &str) -> Option<usize> {
        self.axis_index(name).map(|i| self.inner.axes[i].1 as usize)
    }

    fn axis_index(&self, name: &str) -> Option<usize> {
        self.inner.axes.iter().position(|(a, _)| a == name)
    }

    /// The number of devices.
    pub fn size(&self) -> usize {
        self.inner.devices.len()
    }

    /// The devices, row-major over the axes.
    pub fn devices(&self) -> &[Device] {
        &self.inner.devices
    }

    /// The devices' ids, row-major over the axes.
    pub fn device_ids(&self) -> &[i64] {
        &self.inner.ids
    }

    /// The client the devices belong to.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The options programs for the mesh are compiled with: one replica, one
    /// partition per device, XLA's SPMD partitioner on, the mesh's devices as the
    /// device assignment (partition `p` on the mesh's device `p`).
    pub fn compile_options(&self) -> CompileOptions {
        CompileOptions::new()
            .num_replicas(1)
            .num_partitions(self.size() as i64)
            .use_spmd_partitioning(true)
            .device_assignment(std::slice::from_ref(&self.inner.ids))
    }

    /// Whether `other` is the same mesh (the same devices and axes).
    pub fn same_as(&self, other: &Mesh) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.axes == other.inner.axes && self.inner.ids == other.inner.ids)
    }

    /// The coordinates of mesh position `p` on each axis.
    fn coords(&self, mut p: usize) -> Vec<i64> {
        let mut c = vec![0i64; self.inner.axes.len()];
        for (k, (_, s)) in self.inner.axes.iter().enumerate().rev() {
            c[k] = p as i64 % s;
            p /= *s as usize;
        }
        c
    }

    /// How `spec` cuts an array of `dims` named `what` over this mesh.
    fn layout(&self, spec: &PartitionSpec, dims: &[i64], what: &str) -> Result<Layout> {
        if spec.dims.len() > dims.len() {
            return Err(err(format!(
                "{what}: {spec} has {} entries, but the array has rank {} (dims {dims:?})",
                spec.dims.len(),
                dims.len()
            )));
        }
        let mut used: Vec<usize> = Vec::new();
        let mut axes = vec![Vec::new(); dims.len()];
        let mut parts = vec![1i64; dims.len()];
        for (d, names) in spec.dims.iter().enumerate() {
            for name in names {
                let a = self.axis_index(name).ok_or_else(|| {
                    err(format!(
                        "{what}: {spec} names mesh axis `{name}`, which the mesh {self:?} does not have"
                    ))
                })?;
                if used.contains(&a) {
                    return Err(err(format!("{what}: {spec} uses mesh axis `{name}` twice")));
                }
                used.push(a);
                axes[d].push(a);
                parts[d] *= self.inner.axes[a].1;
            }
            if dims[d] % parts[d] != 0 {
                let names: Vec<String> = names
                    .iter()
                    .map(|n| format!("`{n}`={}", self.axis_size(n).unwrap_or(0)))
                    .collect();
                return Err(err(format!(
                    "{what}: dimension {d} of the array (dims {dims:?}) has size {}, which does not divide into {} shards (mesh axis {} of {spec})",
                    dims[d],
                    parts[d],
                    names.join(" × ")
                )));
            }
        }
        let rest: Vec<usize> = (0..self.inner.axes.len())
            .filter(|a| !used.contains(a))
            .collect();
        Ok(Layout {
            shard: dims.iter().zip(&parts).map(|(d, p)| d / p).collect(),
            parts,
            axes,
            rest,
        })
    }

    /// The tile of each mesh position (index per array dimension) and the copy
    /// index among positions holding the same tile.
    fn tile_of(&self, l: &Layout, p: usize) -> (Vec<i64>, i64) {
        let c = self.coords(p);
        let idx = l
            .axes
            .iter()
            .map(|ax| {
                ax.iter()
                    .fold(0i64, |acc, a| acc * self.inner.axes[*a].1 + c[*a])
            })
            .collect();
        let copy = l
            .rest
            .iter()
            .fold(0i64, |acc, a| acc * self.inner.axes[*a].1 + c[*a]);
        (idx, copy)
    }

    /// XLA's sharding of an array of `dims` laid out by `spec` over this mesh
    /// (partition numbers are mesh positions); `what` names the array in errors.
    pub fn sharding(&self, spec: &PartitionSpec, dims: &[i64], what: &str) -> Result<Sharding> {
        let l = self.layout(spec, dims, what)?;
        Ok(self.hlo_sharding(&l))
    }

    fn hlo_sharding(&self, l: &Layout) -> Sharding {
        if l.parts.iter().all(|p| *p == 1) {
            return Sharding::Replicated;
        }
        let copies: i64 = l.rest.iter().map(|a| self.inner.axes[*a].1).product();
        let mut tile_dims = l.parts.clone();
        if copies > 1 {
            tile_dims.push(copies);
        }
        let mut devices = vec![0i64; self.size()];
        for p in 0..self.size() {
            let (idx, copy) = self.tile_of(l, p);
            let mut pos = idx
                .iter()
                .zip(&l.parts)
                .fold(0i64, |acc, (i, n)| acc * n + i);
            if copies > 1 {
                pos = pos * copies + copy;
            }
            devices[pos as usize] = p as i64;
        }
        Sharding::Tiled {
            tile_dims,
            devices,
            replicate_last: copies > 1,
        }
    }
}

impl fmt::Debug for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let axes: Vec<String> = self
            .inner
            .axes
            .iter()
            .map(|(a, s)| format!("{a}={s}"))
            .collect();
        write!(f, "Mesh({}; devices {:?})", axes.join(", "), self.inner.ids)
    }
}

fn axes_text(axes: &[(&str, usize)]) -> String {
    let a: Vec<String> = axes.iter().map(|(a, s)| format!("{a}={s}")).collect();
    format!("({})", a.join(", "))
}

fn mesh_size(axes: &[(&str, usize)]) -> Result<usize> {
    if axes.is_empty() {
        return Err(err("a mesh needs at least one axis"));
    }
    let mut n = 1usize;
    for (i, (a, s)) in axes.iter().enumerate() {
        if a.is_empty() {
            return Err(err(format!("mesh axis {i} has an empty name")));
        }
        if axes[..i].iter().any(|(b, _)| b == a) {
            return Err(err(format!(
                "mesh axis `{a}` appears twice in {}",
                axes_text(axes)
            )));
        }
        if *s == 0 {
            return Err(err(format!(
                "mesh axis `{a}` has size 0 in {}",
                axes_text(axes)
            )));
        }
        n = n
            .checked_mul(*s)
            .filter(|n| *n <= 1 << 20)
            .ok_or_else(|| err(format!("the mesh {} is too large", axes_text(axes))))?;
    }
    Ok(n)
}

/// How a spec cuts one array over a mesh.
struct Layout {
    /// Pieces per array dimension.
    parts: Vec<i64>,
    /// The mesh axes (indices) splitting each array dimension, major first.
    axes: Vec<Vec<usize>>,
    /// The mesh axes not used: positions that differ only there hold copies.
    rest: Vec<usize>,
    /// The dims of each shard.
    shard: Vec<i64>,
}

// ---------------------------------------------------------------------------------
// PartitionSpec

/// Which mesh axes split which array dimension (JAX's `PartitionSpec`, also
/// spelled [`P`]): entry `d` lists the mesh axes that cut dimension `d` (major
/// first; none: not split). Dimensions past the last entry are not split, and the
/// array is a copy on every device of a mesh axis no entry names.
///
/// ```
/// use xlaclient_core::P;
/// let rows = P::new([Some("data"), None]);         // P('data', None)
/// let both = P::split([vec!["data", "model"], vec![]]); // P(('data', 'model'), None)
/// assert_eq!(rows.to_string(), "P('data', None)");
/// assert_eq!(both.to_string(), "P(('data', 'model'), None)");
/// assert_eq!(P::replicated().to_string(), "P()");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PartitionSpec {
    dims: Vec<Vec<String>>,
}

/// JAX's short name for [`PartitionSpec`].
pub type P = PartitionSpec;

/// Partition specs are the leaves of the sharding trees given to
/// [`ClientExt::jit_sharded`](crate::ClientExt::jit_sharded).
impl Leaf for PartitionSpec {}

impl PartitionSpec {
    /// One entry per array dimension: `Some(axis)` splits it over that mesh axis,
    /// `None` does not split it.
    pub fn new<S: AsRef<str>>(dims: impl IntoIterator<Item = Option<S>>) -> PartitionSpec {
        PartitionSpec {
            dims: dims
                .into_iter()
                .map(|d| d.map(|a| vec![a.as_ref().to_string()]).unwrap_or_default())
                .collect(),
        }
    }

    /// One list of mesh axes per array dimension (major first; empty: not split),
    /// so that one dimension may be split over several mesh axes.
    pub fn split<S: AsRef<str>, D: IntoIterator<Item = S>>(
        dims: impl IntoIterator<Item = D>,
    ) -> PartitionSpec {
        PartitionSpec {
            dims: dims
                .into_iter()
                .map(|d| d.into_iter().map(|a| a.as_ref().to_string()).collect())
                .collect(),
        }
    }

    /// No dimension split: a copy of the whole array on every device (`P()`).
    pub fn replicated() -> PartitionSpec {
        PartitionSpec::default()
    }

    /// The mesh axes of each entry.
    pub fn dims(&self) -> &[Vec<String>] {
        &self.dims
    }

    /// The spec without trailing unsplit entries (equal meaning).
    fn normalized(&self) -> PartitionSpec {
        let mut dims = self.dims.clone();
        while dims.last().is_some_and(Vec::is_empty) {
            dims.pop();
        }
        PartitionSpec { dims }
    }

    /// Whether the two specs lay arrays out the same way.
    pub fn same_as(&self, other: &PartitionSpec) -> bool {
        self.normalized() == other.normalized()
    }
}

impl fmt::Display for PartitionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e: Vec<String> = self
            .dims
            .iter()
            .map(|d| match d.as_slice() {
                [] => "None".to_string(),
                [a] => format!("'{a}'"),
                many => {
                    let q: Vec<String> = many.iter().map(|a| format!("'{a}'")).collect();
                    format!("({})", q.join(", "))
                }
            })
            .collect();
        write!(f, "P({})", e.join(", "))
    }
}

// ---------------------------------------------------------------------------------
// ShardedArray

/// One logical array whose shards live on the devices of a [`Mesh`] (JAX's
/// `jax.Array` with a `NamedSharding`): one buffer per mesh device, in mesh order,
/// each holding that device's tile of the array (a whole copy where the spec does
/// not split).
pub struct ShardedArray {
    mesh: Mesh,
    spec: PartitionSpec,
    ty: ElementType,
    dims: Vec<i64>,
    shard_dims: Vec<i64>,
    shards: Vec<Buffer>,
}

/// Sharded arrays are the leaves of the trees a sharded function takes and
/// returns.
impl Leaf for ShardedArray {}

impl ShardedArray {
    /// Splits the host array `data` (row-major, `dims`) into the shards `spec`
    /// gives each device of `mesh`, and uploads each to its device. A spec that
    /// does not divide a dimension, an unknown mesh axis or data of the wrong
    /// length is an [`Error::Sharding`].
    pub fn upload<T: NativeType>(
        mesh: &Mesh,
        spec: &PartitionSpec,
        data: &[T],
        dims: &[i64],
    ) -> Result<ShardedArray> {
        let what = "the uploaded array";
        if dims.iter().any(|d| *d < 0) {
            return Err(err(format!("{what}: negative dimension in {dims:?}")));
        }
        let n: i64 = dims.iter().product();
        if n != data.len() as i64 {
            return Err(err(format!(
                "{what}: dims {dims:?} hold {n} elements, the data has {}",
                data.len()
            )));
        }
        let l = mesh.layout(spec, dims, what)?;
        let shard_len: i64 = l.shard.iter().product();
        let mut shards = Vec::with_capacity(mesh.size());
        let mut host = vec![data.first().copied().unwrap_or_else(zero::<T>); shard_len as usize];
        for (p, dev) in mesh.devices().iter().enumerate() {
            let (idx, _) = mesh.tile_of(&l, p);
            let offset: Vec<i64> = idx.iter().zip(&l.shard).map(|(i, s)| i * s).collect();
            copy_block(data, dims, &mut host, &l.shard, &offset);
            shards.push(dev.buffer_from_host(&host, &l.shard)?);
        }
        Ok(ShardedArray {
            mesh: mesh.clone(),
            spec: spec.clone(),
            ty: T::TYPE,
            dims: dims.to_vec(),
            shard_dims: l.shard,
            shards,
        })
    }

    /// A sharded array made of existing buffers, one per mesh device in mesh
    /// order, each on its device and of the shard's shape. The wrong number of
    /// shards, a shard on another device or of another shape is an
    /// [`Error::Sharding`].
    pub fn from_shards(
        mesh: &Mesh,
        spec: &PartitionSpec,
        ty: ElementType,
        dims: &[i64],
        shards: Vec<Buffer>,
    ) -> Result<ShardedArray> {
        let what = "the sharded array";
        let l = mesh.layout(spec, dims, what)?;
        if shards.len() != mesh.size() {
            return Err(err(format!(
                "{what}: {} shards given, the mesh {mesh:?} has {} devices",
                shards.len(),
                mesh.size()
            )));
        }
        for (p, (b, dev)) in shards.iter().zip(mesh.devices()).enumerate() {
            let on = b.device()?;
            if &on != dev {
                return Err(err(format!(
                    "{what}: shard {p} is on device {}, the mesh puts it on device {}",
                    on.id()?,
                    dev.id()?
                )));
            }
            let (bt, bd) = (b.element_type()?, b.dims()?);
            if bt != ty || bd != l.shard {
                return Err(err(format!(
                    "{what}: shard {p} is {}, the spec {spec} makes each shard {}",
                    Shape::array(bt, &bd),
                    Shape::array(ty, &l.shard)
                )));
            }
        }
        Ok(ShardedArray {
            mesh: mesh.clone(),
            spec: spec.clone(),
            ty,
            dims: dims.to_vec(),
            shard_dims: l.shard,
            shards,
        })
    }

    /// Downloads the shards and assembles the logical array (row-major). Each
    /// tile is read from the first device holding it. `T` must be the element type.
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>> {
        if T::TYPE != self.ty {
            return Err(err(format!(
                "the sharded array holds {:?}, read as {:?}",
                self.ty,
                T::TYPE
            )));
        }
        let l = self
            .mesh
            .layout(&self.spec, &self.dims, "the sharded array")?;
        let n: i64 = self.dims.iter().product();
        let mut out = vec![zero::<T>(); n as usize];
        for (p, b) in self.shards.iter().enumerate() {
            let (idx, copy) = self.mesh.tile_of(&l, p);
            if copy != 0 {
                continue;
            }
            let shard = b.to_vec::<T>()?;
            let offset: Vec<i64> = idx.iter().zip(&l.shard).map(|(i, s)| i * s).collect();
            copy_block_into(&mut out, &self.dims, &shard, &l.shard, &offset);
        }
        Ok(out)
    }

    /// The same array laid out as `spec` (JAX's `jax.device_put(x,
    /// NamedSharding(mesh, spec))` of a sharded array): a program compiled for
    /// the mesh that takes the array as it is and returns it as `spec`, so the
    /// shards move between devices (XLA's collectives), not through the host.
    pub fn reshard(&self, spec: &PartitionSpec) -> Result<ShardedArray> {
        let client = self.mesh.client().clone();
        let f = crate::jit::ClientExt::jit_sharded(
            &client,
            "reshard",
            &self.mesh,
            &self.shape(),
            &self.spec,
            spec,
            |_, x: Op| x,
        )?;
        f.call(self)
    }

    /// The logical array's shape.
    pub fn shape(&self) -> Shape {
        Shape::array(self.ty, &self.dims)
    }

    /// The logical array's dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.ty
    }

    /// Each shard's dimensions.
    pub fn shard_dims(&self) -> &[i64] {
        &self.shard_dims
    }

    /// The shards, one per mesh device in mesh order.
    pub fn shards(&self) -> &[Buffer] {
        &self.shards
    }

    /// The buffers, one per mesh device in mesh order.
    pub fn into_shards(self) -> Vec<Buffer> {
        self.shards
    }

    /// How the array is laid out.
    pub fn spec(&self) -> &PartitionSpec {
        &self.spec
    }

    /// The mesh it lives on.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }
}

impl fmt::Debug for ShardedArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ShardedArray({} as {} on {:?}, shards {})",
            self.shape(),
            self.spec,
            self.mesh,
            Shape::array(self.ty, &self.shard_dims)
        )
    }
}

fn zero<T: NativeType>() -> T {
    T::default()
}

/// Copies the block of `shard`'s dims at `offset` of the row-major array `full`
/// into `shard`.
fn copy_block<T: Copy>(
    full: &[T],
    full_dims: &[i64],
    shard: &mut [T],
    shard_dims: &[i64],
    offset: &[i64],
) {
    for_each_row(full_dims, shard_dims, offset, |src, dst, len| {
        shard[dst..dst + len].copy_from_slice(&full[src..src + len]);
    });
}

/// Copies `shard` into the block at `offset` of the row-major array `full`.
fn copy_block_into<T: Copy>(
    full: &mut [T],
    full_dims: &[i64],
    shard: &[T],
    shard_dims: &[i64],
    offset: &[i64],
) {
    for_each_row(full_dims, shard_dims, offset, |dst, src, len| {
        full[dst..dst + len].copy_from_slice(&shard[src..src + len]);
    });
}

/// Calls `f(full_start, shard_start, len)` for each contiguous row (last
/// dimension) of the block.
fn for_each_row(
    full_dims: &[i64],
    shard_dims: &[i64],
    offset: &[i64],
    mut f: impl FnMut(usize, usize, usize),
) {
    let r = full_dims.len();
    if r == 0 {
        f(0, 0, 1);
        return;
    }
    if shard_dims.contains(&0) {
        return;
    }
    let mut stride = vec![1i64; r];
    for d in (0..r - 1).rev() {
        stride[d] = stride[d + 1] * full_dims[d + 1];
    }
    let len = shard_dims[r - 1] as usize;
    let rows: i64 = shard_dims[..r - 1].iter().product();
    let mut idx = vec![0i64; r - 1];
    for row in 0..rows {
        let start: i64 = (0..r)
            .map(|d| (offset[d] + if d < r - 1 { idx[d] } else { 0 }) * stride[d])
            .sum();
        f(start as usize, (row as usize) * len, len);
        for d in (0..r - 1).rev() {
            idx[d] += 1;
            if idx[d] < shard_dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

// ---------------------------------------------------------------------------------
// Sharding constraints

impl Op {
    /// JAX's `with_sharding_constraint`: the same value, laid out as `spec` says
    /// over `mesh` at this point of the program (XLA's `custom-call` to `Sharding`
    /// carrying the sharding; the SPMD partitioner reshards as needed). A spec
    /// that does not fit the value (an unknown axis, a split that does not divide a
    /// dimension) fails the op, naming the line.
    #[track_caller]
    pub fn with_sharding_constraint(&self, mesh: &Mesh, spec: &PartitionSpec) -> Op {
        let loc = Location::caller();
        let b = self.builder();
        let fail = |reason: String| b.fail_graph(GraphError::Recorded { reason }, loc);
        let shape = match self.shape() {
            Ok(s) => s,
            Err(_) => return self.clone(),
        };
        let Shape::Array { dims, .. } = &shape else {
            return fail(format!(
                "with_sharding_constraint: the value is {shape}, not an array"
            ));
        };
        let sharding =
            match mesh.sharding(spec, dims, &format!("with_sharding_constraint on {shape}")) {
                Ok(s) => s,
                Err(e) => return fail(e.to_string()),
            };
        let at = b.on(loc);
        let attrs = crate::ops::misc::CustomCallAttrs {
            target: "Sharding".into(),
            opaque: Vec::new(),
            api_version: 1,
            has_side_effect: false,
        };
        let out = at.custom_call(&attrs, &[self], shape.clone());
        if !out.is_poisoned() {
            let mut g = out.g.borrow_mut();
            g.comp_mut(out.comp).instrs[out.v.instr as usize].sharding = Some(Box::new(sharding));
        }
        out
    }
}

// ---------------------------------------------------------------------------------
// Sharded jit

/// A function compiled for a [`Mesh`] by
/// [`ClientExt::jit_sharded`](crate::ClientExt::jit_sharded): called with a tree of
/// [`ShardedArray`]s laid out as its input specs, it runs on every device of the
/// mesh and returns a tree of sharded arrays laid out as its output specs.
pub struct ShardedJit<I, O> {
    exe: LoadedExecutable,
    module: Computation,
    mesh: Mesh,
    input: I,
    output: O,
    in_specs: Vec<PartitionSpec>,
    out_specs: Vec<PartitionSpec>,
    out_shards: Vec<Vec<i64>>,
    /// The mesh position of each of the executable's devices, in its order.
    positions: Vec<usize>,
}

/// The leaves of a spec tree, one per leaf of a tree of `n` leaves and
/// `structure`: the same structure, or a single spec for every leaf (JAX's prefix
/// rule, in its simplest form).
fn spec_leaves<S: Tree<PartitionSpec>>(
    specs: &S,
    n: usize,
    structure: &[usize],
    what: &str,
) -> Result<Vec<PartitionSpec>> {
    let mut st = Vec::new();
    specs.structure(&mut st);
    let leaves: Vec<PartitionSpec> = specs.leaves().into_iter().cloned().collect();
    if st.is_empty() && leaves.len() == 1 {
        return Ok(vec![leaves[0].clone(); n]);
    }
    if st != structure || leaves.len() != n {
        let e = TreeError::Structure {
            expected: structure.to_vec(),
            got: st,
        };
        return Err(err(format!("{what}: {e}")));
    }
    Ok(leaves)
}

#[track_caller]
pub(crate) fn trace_sharded<I, R, IS, OS>(
    client: &Client,
    name: &str,
    mesh: &Mesh,
    spec: &I,
    in_specs: &IS,
    out_specs: &OS,
    f: impl FnOnce(&Builder, I::With<Op>) -> R,
) -> Result<ShardedJit<I::With<Shape>, R::With<Shape>>>
where
    I: Tree<Shape>,
    R: Tree<Op>,
    IS: Tree<PartitionSpec>,
    OS: Tree<PartitionSpec>,
{
    if client.addressable_devices() != mesh.client().addressable_devices() {
        return Err(err(format!(
            "jit_sharded `{name}`: the mesh's devices belong to another client"
        )));
    }
    let mut in_structure = Vec::new();
    spec.structure(&mut in_structure);
    let in_specs = spec_leaves(in_specs, spec.num_leaves(), &in_structure, "in_specs")?;
    let b = crate::jit::tracing_builder(client, name);
    // The parameters and the root carry the caller's line.
    let loc = Location::caller();
    let mut n = 0;
    let params = {
        let at = b.on(loc);
        spec.map_ref(|s| {
            n += 1;
            at.parameter(n - 1, s.clone(), &format!("arg{}", n - 1))
        })
    };
    let out = f(&b, params);
    let output: R::With<Shape> = out.try_map_ref(&mut |op: &Op| op.shape())?;
    let mut out_structure = Vec::new();
    output.structure(&mut out_structure);
    let out_specs = spec_leaves(out_specs, output.num_leaves(), &out_structure, "out_specs")?;
    let outs = out.leaves();
    let module = {
        let at = b.on(loc);
        at.build_aliased(&outs, &[])?
    };
    // The parameters' and outputs' shardings.
    let mut in_shardings = Vec::new();
    for (i, (s, p)) in spec.leaves().into_iter().zip(&in_specs).enumerate() {
        let what = format!("jit_sharded `{name}`: input {i} ({s})");
        in_shardings.push(mesh.sharding(p, s.dims(), &what)?);
    }
    let mut out_shardings = Vec::new();
    let mut out_shards = Vec::new();
    for (i, (s, p)) in output.leaves().into_iter().zip(&out_specs).enumerate() {
        let what = format!("jit_sharded `{name}`: output {i} ({s})");
        let l = mesh.layout(p, s.dims(), &what)?;
        out_shardings.push(mesh.hlo_sharding(&l));
        out_shards.push(l.shard);
    }
    let mut m: ir::Module = module.ir().clone();
    let entry = m.entry.0 as usize;
    let c = &mut m.comps[entry];
    let params: Vec<u32> = c.param_instrs().collect();
    for (p, s) in params.iter().zip(in_shardings) {
        c.instrs[*p as usize].sharding = Some(Box::new(s));
    }
    let root = c.root.expect("a built module has a root");
    let root_ins = &mut c.instrs[root.instr as usize];
    if !matches!(root_ins.kind, OpKind::Tuple) || root.result != 0 {
        return Err(err(format!(
            "jit_sharded `{name}`: the program's result is not a tuple (a bug)"
        )));
    }
    root_ins.sharding = Some(Box::new(Sharding::Tuple(out_shardings)));
    let module = module.with_module(m)?;
    let exe = client.compile_with(&module, &mesh.compile_options())?;
    // The per-device parameters XLA made must be the shards we send.
    if let Some(ps) = exe.parameter_shapes() {
        let leaves = spec.leaves();
        if ps.len() != leaves.len() {
            return Err(err(format!(
                "jit_sharded `{name}`: the partitioned program has {} parameters, the function {}",
                ps.len(),
                leaves.len()
            )));
        }
        for (i, ((s, p), got)) in leaves.iter().zip(&in_specs).zip(ps).enumerate() {
            let l = mesh.layout(p, s.dims(), "input")?;
            if got.dims() != l.shard.as_slice() {
                return Err(err(format!(
                    "jit_sharded `{name}`: input {i} ({s} as {p}) has shards of dims {:?}, but the partitioned program's parameter {i} is {got}",
                    l.shard
                )));
            }
        }
    }
    let exe_devices = exe.addressable_devices();
    let mut positions = Vec::with_capacity(exe_devices.len());
    for d in &exe_devices {
        let p = mesh.devices().iter().position(|m| m == d).ok_or_else(|| {
            err(format!(
                "jit_sharded `{name}`: the program runs on a device outside the mesh"
            ))
        })?;
        positions.push(p);
    }
    if positions.len() != mesh.size() {
        return Err(err(format!(
            "jit_sharded `{name}`: the program was loaded on {} devices, the mesh has {}",
            positions.len(),
            mesh.size()
        )));
    }
    Ok(ShardedJit {
        exe,
        module,
        mesh: mesh.clone(),
        input: spec.map_ref(Shape::clone),
        output,
        in_specs,
        out_specs,
        out_shards,
        positions,
    })
}

impl<I: Tree<Shape>, O: Tree<Shape>> ShardedJit<I, O> {
    /// The traced module, with its shardings (e.g. to print as HLO text).
    pub fn computation(&self) -> &Computation {
        &self.module
    }

    /// The compiled, partitioned executable ([`LoadedExecutable::optimized_module`]
    /// shows the collectives XLA inserted).
    pub fn executable(&self) -> &LoadedExecutable {
        &self.exe
    }

    /// The mesh it runs on.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// The logical input shapes.
    pub fn input_spec(&self) -> &I {
        &self.input
    }

    /// The logical output shapes.
    pub fn output_spec(&self) -> &O {
        &self.output
    }

    /// The input leaves' partition specs.
    pub fn in_specs(&self) -> &[PartitionSpec] {
        &self.in_specs
    }

    /// The output leaves' partition specs.
    pub fn out_specs(&self) -> &[PartitionSpec] {
        &self.out_specs
    }

    /// Runs the program on every device of the mesh. Each argument must be a
    /// sharded array on this mesh, of its input's shape, laid out as its input
    /// spec (else an [`Error::Sharding`] naming the input); the outputs come back
    /// as sharded arrays in the traced tree.
    pub fn call(&self, args: &I::With<ShardedArray>) -> Result<O::With<ShardedArray>> {
        if !self.input.same_structure(args) {
            let (mut expected, mut got) = (Vec::new(), Vec::new());
            self.input.structure(&mut expected);
            args.structure(&mut got);
            return Err(TreeError::Structure { expected, got }.into());
        }
        let leaves = args.leaves();
        for (i, ((a, s), p)) in leaves
            .iter()
            .zip(self.input.leaves())
            .zip(&self.in_specs)
            .enumerate()
        {
            if !a.mesh.same_as(&self.mesh) {
                return Err(err(format!(
                    "input {i}: the array lives on {:?}, the function runs on {:?}",
                    a.mesh, self.mesh
                )));
            }
            if a.shape() != *s {
                return Err(err(format!(
                    "input {i}: the array is {}, the function takes {s}",
                    a.shape()
                )));
            }
            if !a.spec.same_as(p) {
                return Err(err(format!(
                    "input {i} ({s}): the array is laid out as {}, the function takes {p}",
                    a.spec
                )));
            }
        }
        let per_device: Vec<Vec<&Buffer>> = self
            .positions
            .iter()
            .map(|p| leaves.iter().map(|a| &a.shards[*p]).collect())
            .collect();
        let outs = self.exe.execute_replicated(&per_device)?;
        let n_out = self.out_specs.len();
        let mut by_position: Vec<Option<Vec<Buffer>>> =
            (0..self.mesh.size()).map(|_| None).collect();
        for (d, bufs) in outs.into_iter().enumerate() {
            if bufs.len() != n_out {
                return Err(err(format!(
                    "the program returned {} outputs on device {d}, expected {n_out}",
                    bufs.len()
                )));
            }
            by_position[self.positions[d]] = Some(bufs);
        }
        let mut columns: Vec<Vec<Buffer>> = (0..n_out).map(|_| Vec::new()).collect();
        for bufs in by_position {
            let bufs = bufs.ok_or_else(|| err("a mesh device returned no outputs"))?;
            for (o, b) in bufs.into_iter().enumerate() {
                columns[o].push(b);
            }
        }
        let mut arrays = Vec::with_capacity(n_out);
        for (o, (shards, (s, p))) in columns
            .into_iter()
            .zip(self.output.leaves().into_iter().zip(&self.out_specs))
            .enumerate()
        {
            for b in &shards {
                let bd = b.dims()?;
                if bd != self.out_shards[o] {
                    return Err(err(format!(
                        "output {o} ({s} as {p}): a device returned a shard of dims {bd:?}, expected {:?}",
                        self.out_shards[o]
                    )));
                }
            }
            arrays.push(ShardedArray {
                mesh: self.mesh.clone(),
                spec: p.clone(),
                ty: s.element_type().unwrap_or(ElementType::F32),
                dims: s.dims().to_vec(),
                shard_dims: self.out_shards[o].clone(),
                shards,
            });
        }
        Ok(self.output.rebuild(arrays)?)
    }
}

/// Refuses shardings naming partitions the program does not have (`Err` says
/// which instruction), before XLA sees them.
pub(crate) fn check_devices(
    m: &ir::Module,
    num_partitions: i64,
) -> std::result::Result<(), String> {
    for c in &m.comps {
        for (i, ins) in c.instrs.iter().enumerate() {
            if let Some(d) = ins.sharding.as_ref().and_then(|s| s.max_device()) {
                if d >= num_partitions {
                    return Err(format!(
                        "instruction {i} (`{}`) of `{}` has the sharding {}, which names partition {d}, but the program has {num_partitions} partition(s) (line {})",
                        ins.kind.opcode().name(),
                        c.name,
                        ins.sharding
                            .as_deref()
                            .map(|s| s.to_string())
                            .unwrap_or_default(),
                        ins.loc.line()
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The gradient of a `Sharding` custom call (a sharding constraint): its cotangent,
/// under the same constraint (JAX's transpose of `with_sharding_constraint`).
/// `Err` for other kernels, which have no rule.
pub(crate) fn vjp_sharding_constraint(
    n: &crate::autodiff::Node,
) -> std::result::Result<Option<Op>, String> {
    let OpKind::CustomCall(a) = n.kind else {
        return Err("not a custom-call".into());
    };
    if a.target != "Sharding" || n.operands.len() != 1 {
        return Err(format!(
            "the kernel `{}` has no gradient rule (only the `Sharding` constraint of with_sharding_constraint has)",
            a.target
        ));
    }
    let sharding = {
        let g = n.b.g.borrow();
        g.comp(n.at.0).instrs[n.at.1 as usize].sharding.clone()
    };
    let ct = n.ct();
    let shape = ct.shape().map_err(|e| e.to_string())?;
    let out = n.b.custom_call(a, &[&ct], shape);
    if !out.is_poisoned() {
        let mut g = out.g.borrow_mut();
        g.comp_mut(out.comp).instrs[out.v.instr as usize].sharding = sharding;
    }
    Ok(Some(out))
}
