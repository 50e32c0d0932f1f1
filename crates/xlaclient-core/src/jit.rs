//! Rust functions on trees of arrays, compiled: [`ClientExt::jit`] traces a function
//! from a spec of shapes (any [`Tree`] of [`Shape`]s, e.g. a derived `State<Shape>`)
//! to a compiled program called with the same tree of [`Buffer`]s, as JAX's `jit`.
//! [`ClientExt::jit_donating`] also lets each output reuse the buffer of an input of the
//! same shape, so that a training step updates its state in place.
//!
//! The methods are on [`Client`] (the runtime's type) through the extension trait
//! [`ClientExt`]: `use xlaclient_core::ClientExt;`.

use crate::builder::{Builder, Computation, Op};
use crate::error::Result;
use crate::pjrt::{Arg, Buffer, Client, CompileOptions, LoadedExecutable};
use crate::pmap::Pmap;
use crate::shape::Shape;
use crate::tree::{Tree, TreeError};

/// A compiled function from trees of buffers shaped like `I` to trees shaped like
/// `O` (both trees of [`Shape`]s: the input spec and the traced output's shapes).
///
/// ```no_run
/// use xlaclient_core::{Client, ClientExt, Op, Shape, Tree};
///
/// #[derive(Tree)]
/// struct State<T> {
///     w: T,
///     step: T,
/// }
///
/// let client = Client::cpu()?;
/// let spec = State { w: Shape::of::<f32>(&[3]), step: Shape::of::<f32>(&[]) };
/// let update = client.jit_donating("update", &spec, |_, s: State<Op>| State {
///     w: &s.w * 0.5,
///     step: &s.step + 1.0,
/// })?;
/// let state = State {
///     w: client.buffer_from_host(&[2.0f32, 4.0, 6.0], &[3])?,
///     step: client.scalar(0.0f32)?,
/// };
/// let state = update.call_donated(state)?; // the old buffers are given up
/// assert_eq!(state.w.to_vec::<f32>()?, vec![1.0, 2.0, 3.0]);
/// # Ok::<(), xlaclient_core::Error>(())
/// ```
pub struct Jit<I, O> {
    exe: LoadedExecutable,
    module: Computation,
    input: I,
    output: O,
    /// Per input leaf: whether an output may reuse its buffer.
    aliased: Vec<bool>,
}

/// What the core adds to the runtime's [`Client`] (the runtime crate knows nothing
/// of builders, trees or the verifier): `jit`, `jit_donating` and compiling checked
/// HLO bytes. `use xlaclient_core::ClientExt;` brings them into scope.
pub trait ClientExt {
    /// Compiles a serialized `HloModuleProto` (e.g. from JAX's
    /// `as_serialized_hlo_module_proto()`), decoded and checked first
    /// ([`Computation::from_hlo_bytes`]): garbage is
    /// [`Error::InvalidModule`](crate::Error::InvalidModule), never a crash.
    fn compile_hlo_bytes(&self, bytes: &[u8], options: &CompileOptions)
    -> Result<LoadedExecutable>;

    /// Traces `f` on parameters shaped like `spec` (one parameter per leaf, in the
    /// tree's order), compiles the program whose outputs are the leaves of the tree
    /// `f` returns, and returns it ready to call with trees of buffers.
    fn jit<I, R>(
        &self,
        name: &str,
        spec: &I,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>;

    /// As [`jit`](ClientExt::jit), and each input leaf may give its buffer to an output
    /// leaf of the same shape (the first such output not yet taken, in order):
    /// [`Jit::call_donated`] then updates those inputs in place.
    fn jit_donating<I, R>(
        &self,
        name: &str,
        spec: &I,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>;

    /// As [`jit`](ClientExt::jit), compiled with `options` instead of the defaults:
    /// e.g. [`CompileOptions::quick_compile`] for a program that runs once, such
    /// as an initializer (JAX's `jit(f).lower(…).compile(compiler_options=…)`).
    ///
    /// ```
    /// use xlaclient_core::{Client, ClientExt, CompileOptions};
    /// let client = Client::cpu()?;
    /// let init = client.jit_with("init", &(), &CompileOptions::new().quick_compile(), |b, ()| {
    ///     b.prng_key(0).normal(&[3], xlaclient_core::ElementType::F32)
    /// })?;
    /// assert_eq!(init.call(&())?.to_vec::<f32>()?.len(), 3);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    fn jit_with<I, R>(
        &self,
        name: &str,
        spec: &I,
        options: &CompileOptions,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>;

    /// As [`jit_donating`](ClientExt::jit_donating), compiled with `options`.
    fn jit_donating_with<I, R>(
        &self,
        name: &str,
        spec: &I,
        options: &CompileOptions,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>;

    /// JAX's `jax.jit(f, in_shardings=…, out_shardings=…)` over `mesh`: traces `f`
    /// on the logical (whole) arrays shaped like `spec`, with each input laid out
    /// as `in_specs` says and each output as `out_specs` says (trees of
    /// [`PartitionSpec`](crate::PartitionSpec)s of the inputs' and outputs'
    /// structure, or one spec for every leaf), and compiles it with XLA's SPMD
    /// partitioner into one program per mesh device (see [`crate::sharding`]).
    /// A spec that does not fit its array is an [`Error::Sharding`](crate::Error::Sharding).
    fn jit_sharded<I, R, IS, OS>(
        &self,
        name: &str,
        mesh: &crate::sharding::Mesh,
        spec: &I,
        in_specs: &IS,
        out_specs: &OS,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<crate::sharding::ShardedJit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>,
        IS: Tree<crate::sharding::PartitionSpec>,
        OS: Tree<crate::sharding::PartitionSpec>;
    /// JAX's `pmap`: traces `f` on one device's inputs (shaped like `spec`) with
    /// the named device `axes` bound (`&[("i", 8)]`, or a grid such as
    /// `&[("hosts", 2), ("devices", 4)]`; the product of the sizes is the number
    /// of devices, the client's first ones), so that `f` can use the named
    /// collectives (`psum_axis`, `pmean_axis`, `all_gather_axis`, …, see
    /// [`crate::pmap`]); compiles it for one replica per device and returns it
    /// ready to call with one tree of buffers per device.
    ///
    /// ```
    /// use xlaclient_core::{Client, ClientExt, ClientOptions, Op, Plugin, Shape, Stacked};
    ///
    /// let plugin = Plugin::default_plugin()?;
    /// let client = Client::new(&plugin, &ClientOptions::new().cpu_device_count(2))?;
    /// let spec = Shape::of::<f32>(&[3]);
    /// let centre = client.pmap("centre", &[("i", 2)], &spec, |_, x: Op| &x - &x.pmean_axis("i"))?;
    /// let xs = Stacked::new(vec![1.0f32, 2.0, 3.0, 3.0, 2.0, 1.0], &[2, 3])?;
    /// let out: Stacked<f32> = centre.stack_host(&centre.call(&centre.shard_host(&xs)?)?)?;
    /// assert_eq!(out.data(), &[-1.0, 0.0, 1.0, 1.0, 0.0, -1.0]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`PmapError::Axes`](crate::PmapError::Axes) for axes that are no grid,
    /// [`PmapError::TooFewDevices`](crate::PmapError::TooFewDevices) when they ask
    /// for more devices than the client has, and the builder's first error (an
    /// unknown axis name names the op, the axis and the line).
    fn pmap<I, R>(
        &self,
        name: &str,
        axes: &[(&str, usize)],
        spec: &I,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Pmap<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>;

    /// As [`pmap`](ClientExt::pmap), and each input leaf may give its buffer to
    /// an output leaf of the same shape (as [`jit_donating`](ClientExt::jit_donating)
    /// pairs them): [`Pmap::call_donated`] then updates those inputs in place on
    /// every device.
    fn pmap_donating<I, R>(
        &self,
        name: &str,
        axes: &[(&str, usize)],
        spec: &I,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Pmap<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>;
}

impl ClientExt for Client {
    fn pmap<I, R>(
        &self,
        name: &str,
        axes: &[(&str, usize)],
        spec: &I,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Pmap<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>,
    {
        crate::pmap::trace(self, name, axes, spec, false, f)
    }

    fn pmap_donating<I, R>(
        &self,
        name: &str,
        axes: &[(&str, usize)],
        spec: &I,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Pmap<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>,
    {
        crate::pmap::trace(self, name, axes, spec, true, f)
    }

    fn compile_hlo_bytes(
        &self,
        bytes: &[u8],
        options: &CompileOptions,
    ) -> Result<LoadedExecutable> {
        let module = Computation::from_hlo_bytes(bytes)?;
        Ok(self.compile_with(&module, options)?)
    }

    fn jit<I, R>(
        &self,
        name: &str,
        spec: &I,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>,
    {
        trace(self, name, spec, false, &CompileOptions::default(), f)
    }

    fn jit_with<I, R>(
        &self,
        name: &str,
        spec: &I,
        options: &CompileOptions,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>,
    {
        trace(self, name, spec, false, options, f)
    }

    fn jit_donating_with<I, R>(
        &self,
        name: &str,
        spec: &I,
        options: &CompileOptions,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>,
    {
        trace(self, name, spec, true, options, f)
    }

    fn jit_donating<I, R>(
        &self,
        name: &str,
        spec: &I,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>,
    {
        trace(self, name, spec, true, &CompileOptions::default(), f)
    }

    #[track_caller]
    fn jit_sharded<I, R, IS, OS>(
        &self,
        name: &str,
        mesh: &crate::sharding::Mesh,
        spec: &I,
        in_specs: &IS,
        out_specs: &OS,
        f: impl FnOnce(&Builder, I::With<Op>) -> R,
    ) -> Result<crate::sharding::ShardedJit<I::With<Shape>, R::With<Shape>>>
    where
        I: Tree<Shape>,
        R: Tree<Op>,
        IS: Tree<crate::sharding::PartitionSpec>,
        OS: Tree<crate::sharding::PartitionSpec>,
    {
        crate::sharding::trace_sharded(self, name, mesh, spec, in_specs, out_specs, f)
    }
}

/// A builder for tracing a function that runs on `client`, with JAX's choice per
/// platform: Threefry's rounds rolled into a loop on the CPU (XLA's CPU code
/// generation is slow on the unrolled hash), unrolled elsewhere.
pub(crate) fn tracing_builder(client: &Client, name: &str) -> Builder {
    let b = Builder::new(name);
    b.unroll_threefry(client.platform_name().is_ok_and(|p| p != "cpu"));
    b
}

/// A function traced into a finished module.
pub(crate) struct Traced<O> {
    /// The module: one parameter per input leaf, a tuple of the output leaves.
    pub module: Computation,
    /// The outputs' shapes, in the tree the function returned.
    pub output: O,
    /// Per input leaf: whether an output may reuse its buffer.
    pub aliased: Vec<bool>,
}

/// Traces `f` in `b` on parameters shaped like `spec` (one per leaf, in the tree's
/// order) and finishes the module with the leaves of what `f` returns. With
/// `donate`, each input leaf may give its buffer to the first output leaf of the
/// same shape not yet taken. What `jit` and `pmap` share.
pub(crate) fn trace_into<I, R>(
    b: &Builder,
    spec: &I,
    donate: bool,
    f: impl FnOnce(&Builder, I::With<Op>) -> R,
) -> Result<Traced<R::With<Shape>>>
where
    I: Tree<Shape>,
    R: Tree<Op>,
{
    let mut n = 0;
    let params = spec.map_ref(|s| {
        n += 1;
        b.parameter(n - 1, s.clone(), &format!("arg{}", n - 1))
    });
    let out = f(b, params);
    let output: R::With<Shape> = out.try_map_ref(&mut |op: &Op| op.shape())?;
    let outs = out.leaves();
    let in_shapes = spec.leaves();
    let out_shapes = output.leaves();
    let mut aliases = Vec::new();
    let mut aliased = vec![false; in_shapes.len()];
    if donate {
        let mut taken = vec![false; out_shapes.len()];
        for (i, s) in in_shapes.iter().enumerate() {
            if let Some(o) = (0..out_shapes.len()).find(|o| !taken[*o] && out_shapes[*o] == *s) {
                taken[o] = true;
                aliased[i] = true;
                aliases.push((o, i));
            }
        }
    }
    let module = b.build_aliased(&outs, &aliases)?;
    Ok(Traced {
        module,
        output,
        aliased,
    })
}

/// A call's buffers (in parameter order) split by `aliased`: those to donate and
/// those kept, each in order. The kept ones must outlive the call that borrows them.
pub(crate) fn split_donated(leaves: Vec<Buffer>, aliased: &[bool]) -> (Vec<Buffer>, Vec<Buffer>) {
    let (mut donated, mut kept) = (Vec::new(), Vec::new());
    for (b, a) in leaves.into_iter().zip(aliased) {
        if *a {
            donated.push(b);
        } else {
            kept.push(b);
        }
    }
    (donated, kept)
}

/// The argument list of [`split_donated`]'s halves, back in parameter order.
pub(crate) fn donation_args<'a>(
    aliased: &[bool],
    donated: Vec<Buffer>,
    kept: &'a [Buffer],
) -> Vec<Arg<'a>> {
    let (mut donated, mut kept) = (donated.into_iter(), kept.iter());
    aliased
        .iter()
        .filter_map(|a| {
            if *a {
                donated.next().map(Arg::Donate)
            } else {
                kept.next().map(Arg::Keep)
            }
        })
        .collect()
}

fn trace<I, R>(
    client: &Client,
    name: &str,
    spec: &I,
    donate: bool,
    options: &CompileOptions,
    f: impl FnOnce(&Builder, I::With<Op>) -> R,
) -> Result<Jit<I::With<Shape>, R::With<Shape>>>
where
    I: Tree<Shape>,
    R: Tree<Op>,
{
    let b = tracing_builder(client, name);
    let Traced {
        module,
        output,
        aliased,
    } = trace_into(&b, spec, donate, f)?;
    let exe = client.compile_with(&module, options)?;
    Ok(Jit {
        exe,
        module,
        input: spec.map_ref(Shape::clone),
        output,
        aliased,
    })
}

impl<I: Tree<Shape>, O: Tree<Shape>> Jit<I, O> {
    /// The traced module (e.g. to print as HLO text).
    pub fn computation(&self) -> &Computation {
        &self.module
    }

    /// The compiled executable.
    pub fn executable(&self) -> &LoadedExecutable {
        &self.exe
    }

    /// The input spec.
    pub fn input_spec(&self) -> &I {
        &self.input
    }

    /// The shapes of the outputs, in the tree `f` returned.
    pub fn output_spec(&self) -> &O {
        &self.output
    }

    /// For each input leaf (in the tree's order), whether an output may take over
    /// its buffer when it is donated.
    pub fn aliased_inputs(&self) -> &[bool] {
        &self.aliased
    }

    /// Checks that `args` has the spec's structure; each buffer's shape is checked
    /// by the executable against its parameter's (the runtime's `ArgumentShape`).
    fn check_args<'a>(&self, args: &'a I::With<Buffer>) -> Result<Vec<&'a Buffer>> {
        if !self.input.same_structure(args) {
            let (mut expected, mut got) = (Vec::new(), Vec::new());
            self.input.structure(&mut expected);
            args.structure(&mut got);
            return Err(TreeError::Structure { expected, got }.into());
        }
        Ok(args.leaves())
    }

    fn outputs(&self, outs: Vec<Buffer>) -> Result<O::With<Buffer>> {
        Ok(self.output.rebuild(outs)?)
    }

    /// Runs the program on `args` (kept: never donated; an aliased output then gets
    /// a copy) and returns the outputs in the traced tree's structure.
    pub fn call(&self, args: &I::With<Buffer>) -> Result<O::With<Buffer>> {
        let bufs = self.check_args(args)?;
        let outs = self.exe.execute(&bufs)?;
        self.outputs(outs)
    }

    /// Runs the program on `args`, taken by value: every aliased input (see
    /// [`aliased_inputs`](Self::aliased_inputs)) is donated, so its output is
    /// written into the input's memory; the other inputs are dropped once the call
    /// is launched (pass clones of buffers you want to keep using, or use
    /// [`call`](Self::call)). The usual way to run a training step whose state is
    /// updated in place.
    ///
    /// Taking the inputs is what makes donation safe: no other reference to a
    /// donated buffer can exist while the plugin takes its memory over (the
    /// plugin aborts the process on a buffer another thread is using).
    pub fn call_donated(&self, args: I::With<Buffer>) -> Result<O::With<Buffer>> {
        self.check_args(&args)?;
        let (donated, kept) = split_donated(args.into_leaves(), &self.aliased);
        let outs = self
            .exe
            .execute_with(donation_args(&self.aliased, donated, &kept))?;
        self.outputs(outs)
    }

    /// Runs the program on a tree of host arrays ([`NdArray`](crate::NdArray) or
    /// `Array<T, D>` leaves): uploads each leaf to the program's device, runs it as
    /// [`call`](Self::call) does, and reads every output back into the same leaf
    /// type (see [`crate::arrays`]). Feature `ndarray`.
    ///
    /// # Errors
    /// As [`call`](Self::call) (an argument of another shape than its parameter
    /// names both); an output that `L` cannot hold (another element type or rank
    /// than `L`'s, naming both).
    #[cfg(feature = "ndarray")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
    pub fn call_arrays<L: crate::arrays::HostLeaf>(&self, args: &I::With<L>) -> Result<O::With<L>> {
        let device = self
            .exe
            .addressable_devices()
            .into_iter()
            .next()
            .ok_or(crate::RuntimeError::NoDevice)?;
        if !self.input.same_structure(args) {
            let (mut expected, mut got) = (Vec::new(), Vec::new());
            self.input.structure(&mut expected);
            args.structure(&mut got);
            return Err(TreeError::Structure { expected, got }.into());
        }
        let uploaded = args
            .leaves()
            .into_iter()
            .map(|a| a.upload(&device))
            .collect::<Result<Vec<Buffer>>>()?;
        let bufs = self.input.rebuild(uploaded)?;
        let outs = self.call(&bufs)?;
        let host = outs
            .leaves()
            .into_iter()
            .map(|b| L::download(b))
            .collect::<Result<Vec<L>>>()?;
        Ok(self.output.rebuild(host)?)
    }
}
