//! `PJRT_LoadedExecutable`: a compiled program, loaded on its devices.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use smallvec::SmallVec;

use super::api::{copy_str, raw_slice};
use super::buffer::Buffer;
use super::client::{Client, ClientInner};
use super::device::Device;
use super::event::Event;
use super::raw::{self, PJRT_Buffer, PJRT_Device, PJRT_Executable, PJRT_LoadedExecutable, slot};
use crate::error::{Error, Result};
use crate::shape::{Dims, ElementType, Shape};

/// A compiled program, ready to run.
///
/// # Thread safety
/// `LoadedExecutable` is `Send` and `Sync`: PJRT executables may be executed from
/// several threads at once.
pub struct LoadedExecutable {
    pub(crate) client: Arc<ClientInner>,
    pub(crate) raw: *mut PJRT_LoadedExecutable,
    devices: Vec<*mut PJRT_Device>,
    num_outputs: usize,
    /// Shared with the executions launched while DEBUG tracing is on.
    name: Arc<str>,
    /// Element type and dims of each output, when the plugin reports them.
    output_shapes: Option<Vec<(ElementType, Dims)>>,
    /// The entry parameters' shapes, when the module stated them (tuple and token
    /// parameters are not checked); `None` for programs compiled from MLIR or
    /// deserialized (the C API does not report them).
    params: Option<Box<[Shape]>>,
    /// Whether the entry's parameters and result are known to have no dynamic
    /// dimensions (modules of the core, whose verifier refuses them, and programs
    /// whose optimized module was checked).
    entry_static: bool,
    /// XLA's bytes this executable was deserialized from: serializing it again
    /// returns them (both CPU plugins serialize a deserialized executable into
    /// bytes whose executions fail with "Function ... not found").
    payload: Option<Box<[u8]>>,
}

// SAFETY: a loaded executable is owned by exactly one `LoadedExecutable` (destroyed
// once, in Drop) and only queried or executed through the C API; PJRT executables
// may be executed from several threads at once (JAX does). The `Arc` keeps the
// client alive; `devices` are handles the client owns ("same lifetime as
// `client`").
unsafe impl Send for LoadedExecutable {}
// SAFETY: see `Send`. Through `&self` the plugin is only asked to execute (which it
// synchronises itself, concurrent executions of one executable included), to
// report facts (name, outputs, memory statistics, the optimized program) or to
// serialize; each query's `PJRT_Executable` is a fresh one of the calling thread
// (`ExecutableRef`), destroyed by it. The Rust fields (`params`, `payload`,
// `entry_static`) are written only through `&mut self`, before the executable is
// shared. Concurrent executions never donate a buffer another one holds: only an
// owned `Buffer` (`Arg::Donate`) is left out of the non-donatable list.
unsafe impl Sync for LoadedExecutable {}

/// Owns a `PJRT_Executable` obtained from a loaded executable, for queries.
struct ExecutableRef<'a> {
    client: &'a ClientInner,
    raw: *mut PJRT_Executable,
}

impl Drop for ExecutableRef<'_> {
    fn drop(&mut self) {
        let mut a = raw::PJRT_Executable_Destroy_Args::new();
        a.executable = self.raw;
        // SAFETY: GetExecutable hands out an executable the caller must destroy.
        let _ = unsafe { self.client.api.call(slot::PJRT_Executable_Destroy, &mut a) };
    }
}

impl LoadedExecutable {
    pub(crate) fn from_raw(
        client: &Arc<ClientInner>,
        raw: *mut PJRT_LoadedExecutable,
        params: Option<Vec<Shape>>,
    ) -> Result<Self> {
        let entry_static = params.is_some();
        let params = params.map(Vec::into_boxed_slice);
        let mut exe = LoadedExecutable {
            client: client.clone(),
            raw,
            devices: Vec::new(),
            num_outputs: 0,
            name: Arc::from(""),
            output_shapes: None,
            params,
            entry_static,
            payload: None,
        };
        // From here on `exe` owns `raw`: an error below destroys it in Drop.
        // SAFETY: `raw` is the live executable just returned to us; the device
        // array is owned by it (the devices by the client) and copied at once.
        unsafe {
            let d = client
                .api
                .query(slot::PJRT_LoadedExecutable_AddressableDevices, |a| {
                    a.executable = raw
                })?;
            exe.devices = raw_slice(d.addressable_devices, d.num_addressable_devices).to_vec();
        }
        let e = exe.executable()?;
        let er = e.raw;
        // SAFETY: `er` is live until `e` drops; a plain out-parameter.
        let n = unsafe {
            client
                .api
                .query(slot::PJRT_Executable_NumOutputs, |a| a.executable = er)?
        };
        // SAFETY: as above; the header: the name "has the same lifetime as
        // `executable`", and it is copied at once.
        let name = unsafe {
            let nm = client
                .api
                .query(slot::PJRT_Executable_Name, |a| a.executable = er)?;
            copy_str(nm.executable_name, nm.executable_name_size)
        };
        let shapes = output_shapes(client, e.raw, n.num_outputs);
        drop(e);
        exe.num_outputs = n.num_outputs;
        exe.name = Arc::from(name);
        exe.output_shapes = shapes;
        Ok(exe)
    }

    fn executable(&self) -> Result<ExecutableRef<'_>> {
        let le = self.raw;
        // SAFETY: `le` is live; the returned executable is ours to destroy
        // (`ExecutableRef` does).
        let g = unsafe {
            self.client
                .api
                .query(slot::PJRT_LoadedExecutable_GetExecutable, |a| {
                    a.loaded_executable = le
                })?
        };
        Ok(ExecutableRef {
            client: &self.client,
            raw: g.executable,
        })
    }

    /// Marks the entry as checked (a guarded executable: checked when it was
    /// serialized).
    pub(crate) fn set_checked_static(&mut self) {
        self.entry_static = true;
    }

    /// Sets the parameter shapes (a cached program's, from its module).
    pub(crate) fn set_params(&mut self, params: Vec<Shape>) {
        self.params = Some(params.into_boxed_slice());
    }

    /// Keeps the bytes the executable was deserialized from (see `payload`).
    pub(crate) fn set_payload(&mut self, bytes: &[u8]) {
        self.payload = Some(bytes.into());
    }

    /// Refuses a program whose entry parameters or result have dynamic dimensions,
    /// reading its shapes from the optimized module the plugin reports, and keeps
    /// the parameter shapes for argument checks when they were not known. A plugin
    /// that does not report the module leaves the entry unchecked.
    pub(crate) fn check_static_entry(&mut self) -> Result<()> {
        if self.entry_static {
            return Ok(());
        }
        if let Some(params) = self.read_static_entry()? {
            if self.params.is_none() {
                self.params = params.map(Vec::into_boxed_slice);
            }
            self.entry_static = true;
        }
        Ok(())
    }

    /// Reads the entry's shapes from the optimized module: `None` when the plugin
    /// does not report it, [`Error::DynamicShape`] when a parameter or the result
    /// has dynamic dimensions, else the parameter shapes when every parameter is
    /// an array (a tuple parameter, as with tupled arguments, is passed as its
    /// elements, which a count check would refuse).
    fn read_static_entry(&self) -> Result<Option<Option<Vec<Shape>>>> {
        let module = match self.optimized_module() {
            Ok(m) => m,
            Err(Error::Unsupported { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let eid = module.entry_computation_id;
        let Some(ps) = module
            .computations
            .iter()
            .find(|c| c.id == eid)
            .and_then(|c| c.program_shape.as_ref())
            .or(module.host_program_shape.as_ref())
        else {
            return Ok(None);
        };
        for (i, p) in ps.parameters.iter().enumerate() {
            if has_dynamic(p) {
                return Err(Error::DynamicShape {
                    what: format!("parameter {i}"),
                    shape: shape_text(p),
                });
            }
        }
        if let Some(r) = ps.result.as_ref().filter(|r| has_dynamic(r)) {
            return Err(Error::DynamicShape {
                what: "result".into(),
                shape: shape_text(r),
            });
        }
        Ok(Some(
            ps.parameters
                .iter()
                .map(|p| Shape::from_proto(p).filter(|s| matches!(s, Shape::Array { .. })))
                .collect(),
        ))
    }

    /// The program as XLA optimized it (`PJRT_Executable_OptimizedProgram`): the
    /// HLO module that runs, after fusion and layout assignment. Useful to see
    /// what XLA made of a program; [`Error::Unsupported`] from plugins that do
    /// not report it.
    pub fn optimized_module(&self) -> Result<crate::proto::HloModuleProto> {
        use prost::Message;
        let e = self.executable()?;
        let mut prog = raw::PJRT_Program::new();
        let mut a = raw::PJRT_Executable_OptimizedProgram_Args::new();
        a.executable = e.raw;
        a.program = &mut prog;
        // SAFETY: first call with a null `code`: the plugin writes the size it needs
        // into `prog.code_size` (and its own format string, which it owns).
        unsafe {
            self.client
                .api
                .call(slot::PJRT_Executable_OptimizedProgram, &mut a)?
        };
        let mut code = vec![0u8; prog.code_size];
        prog.code = code.as_mut_ptr().cast();
        a.program = &mut prog;
        // SAFETY: second call: `code` is writable for `code_size` bytes (the size the
        // plugin asked for) and outlives the call; `prog` is on this frame.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_Executable_OptimizedProgram, &mut a)?
        };
        code.truncate(prog.code_size);
        // SAFETY: the plugin's format string, owned by the executable `e` (alive),
        // copied at once.
        let format = unsafe { copy_str(prog.format, prog.format_size) };
        let decoded = match format.as_str() {
            "hlo_with_config" => crate::proto::HloModuleProtoWithConfig::decode(&code[..])
                .map(|w| w.hlo_module.unwrap_or_default()),
            _ => crate::proto::HloModuleProto::decode(&code[..]),
        };
        decoded.map_err(|err| Error::Decode {
            what: "optimized program",
            reason: err.to_string(),
        })
    }

    /// Element type and dims of output `i`, if the plugin reported them.
    pub(crate) fn output_shape(&self, i: usize) -> Option<(ElementType, &[i64])> {
        let (t, d) = self.output_shapes.as_ref()?.get(i)?;
        Some((*t, d))
    }

    /// What the compiled program needs in memory, as XLA's buffer assignment
    /// reports it: the arguments, the outputs (less what aliases donated
    /// arguments), the temporaries it allocates while running, and the generated
    /// code. The temporaries are what a program's intermediate values (a
    /// gradient's stored residuals, say) cost.
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        let e = self.executable()?;
        let er = e.raw;
        // SAFETY: `er` is live until `e` drops; plain integer out-parameters.
        let m = unsafe {
            self.client
                .api
                .query(slot::PJRT_Executable_GetCompiledMemoryStats, |a| {
                    a.executable = er
                })?
        };
        Ok(MemoryStats {
            generated_code_bytes: m.generated_code_size_in_bytes,
            argument_bytes: m.argument_size_in_bytes,
            output_bytes: m.output_size_in_bytes,
            alias_bytes: m.alias_size_in_bytes,
            temp_bytes: m.temp_size_in_bytes,
        })
    }

    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of outputs per device (the elements of a tuple result).
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The devices the program was loaded on.
    pub fn addressable_devices(&self) -> Vec<Device> {
        self.devices
            .iter()
            .map(|d| Device::new(&self.client, *d))
            .collect()
    }

    /// Serializes the compiled program with a guard (a header with a magic, a
    /// format version, the plugin's identity, the parameter shapes, the length and
    /// a SHA-256 of the whole): reload it with
    /// [`Client::deserialize_executable`](super::Client::deserialize_executable),
    /// which refuses damaged, truncated or foreign bytes before the plugin sees
    /// them. A program whose entry was never checked for dynamic dimensions
    /// (compiled from unchecked bytes) is checked now, and refused with
    /// [`Error::DynamicShape`].
    pub fn serialize(&self) -> Result<Vec<u8>> {
        let payload = self.serialize_unguarded()?;
        let params = match (&self.params, self.entry_static) {
            (p, true) => p.as_deref().map(<[Shape]>::to_vec),
            (p, false) => match self.read_static_entry()? {
                Some(read) => p.as_deref().map(<[Shape]>::to_vec).or(read),
                None => p.as_deref().map(<[Shape]>::to_vec),
            },
        };
        let identity = Client::from_inner(&self.client)
            .plugin_identity()?
            .to_string();
        Ok(crate::guard::wrap(&identity, params.as_deref(), &payload))
    }

    /// XLA's serialized executable, without the guard (for tools that read XLA's
    /// format; this crate loads it back only through the `unsafe`
    /// [`Client::deserialize_executable_unguarded`](super::Client::deserialize_executable_unguarded)).
    pub fn serialize_unguarded(&self) -> Result<Vec<u8>> {
        if let Some(p) = &self.payload {
            return Ok(p.to_vec());
        }
        let e = self.executable()?;
        let mut a = raw::PJRT_Executable_Serialize_Args::new();
        a.executable = e.raw;
        // SAFETY: the bytes are backed by `serialized_executable`, which the plugin's
        // deleter frees after `take_plugin_bytes` copies them.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_Executable_Serialize, &mut a)?;
            Ok(take_plugin_bytes(
                a.serialized_bytes,
                a.serialized_bytes_size,
                a.serialized_executable,
                a.serialized_executable_deleter,
            ))
        }
    }

    /// The compile options the program was compiled with, as the plugin reports them.
    ///
    /// Needs `PJRT_Executable_GetCompileOptions` (PJRT C API 0.8x and later):
    /// older plugins give [`Error::Unsupported`].
    pub fn compile_options(&self) -> Result<super::CompileOptions> {
        let e = self.executable()?;
        let mut a = raw::PJRT_Executable_GetCompileOptions_Args::new();
        a.executable = e.raw;
        // SAFETY: the bytes are backed by `serialized_compile_options`, which the
        // plugin's deleter frees after `take_plugin_bytes` copies them.
        let bytes = unsafe {
            self.client
                .api
                .call(slot::PJRT_Executable_GetCompileOptions, &mut a)?;
            take_plugin_bytes(
                a.serialized_bytes,
                a.serialized_bytes_size,
                a.serialized_compile_options,
                a.serialized_compile_options_deleter,
            )
        };
        super::CompileOptions::from_bytes(&bytes)
    }

    /// Runs the program on its first device with `args` as parameters (in parameter
    /// order) and returns its outputs (a tuple result comes back as one buffer per
    /// element). Does not wait for the computation: reading an output does, and an
    /// execution failure surfaces there as [`Error::Execution`].
    pub fn execute(&self, args: &[&Buffer]) -> Result<Vec<Buffer>> {
        let mut out = self.execute_devices(&[args], false)?;
        Ok(out.pop().map(|(bufs, _)| bufs).unwrap_or_default())
    }

    /// Like [`execute`](Self::execute), and waits until the computation is done
    /// (returning its error, if any).
    pub fn execute_sync(&self, args: &[&Buffer]) -> Result<Vec<Buffer>> {
        self.execute_async(args)?.wait()
    }

    /// Launches the program on its first device and returns at once; the returned
    /// [`Execution`] is a future of the outputs, ready when the device is done (the
    /// plugin's completion event wakes it). The host can work meanwhile:
    ///
    /// ```no_run
    /// # fn demo(exe: &xlaclient_pjrt::LoadedExecutable, x: &xlaclient_pjrt::Buffer) -> xlaclient_pjrt::Result<()> {
    /// let pending = exe.execute_async(&[x])?;
    /// // ... step the simulator on the host ...
    /// let outputs = pending.wait()?; // or `pending.await?` in async code
    /// # Ok(()) }
    /// ```
    pub fn execute_async(&self, args: &[&Buffer]) -> Result<Execution> {
        let mut out = self.execute_devices(&[args], true)?;
        let (outputs, event) = out.pop().unwrap_or_default();
        Ok(Execution {
            event,
            outputs,
            _client: self.client.clone(),
            trace: self.execution_trace(),
        })
    }

    /// Runs the program on its first device with arguments that may be donated
    /// ([`Arg::Donate`], which takes the buffer by value); returns at once like
    /// [`execute`](Self::execute).
    ///
    /// A donated buffer is given up whether or not the program reuses its memory
    /// (the module's `input_output_alias` says which inputs an output may reuse).
    /// Because the buffer is moved into the call, no other use of it (on this
    /// thread or another) can overlap the donation: the borrow checker rules it
    /// out, where the plugin would abort the process.
    ///
    /// ```
    /// use xlaclient_pjrt::{Arg, Client, CompileOptions};
    /// let client = Client::cpu()?;
    /// // Output 0 may reuse parameter 0's memory (`mhlo.input_output_alias`
    /// // is what the core crate's `Builder::build_aliased` writes for HLO).
    /// let step = "func.func public @main(%s: tensor<3xf32> {tf.aliasing_output = 0 : i32},
    ///     %lr: tensor<f32>) -> tensor<3xf32> {
    ///   %b = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<3xf32>
    ///   %y = stablehlo.subtract %s, %b : tensor<3xf32>
    ///   return %y : tensor<3xf32>
    /// }";
    /// let exe = client.compile_mlir(step.as_bytes(), &CompileOptions::new())?;
    /// let mut state = client.buffer_from_host(&[1.0f32, 2.0, 3.0], &[3])?;
    /// let lr = client.scalar(0.5f32)?;
    /// for _ in 0..2 {
    ///     // `state` moves in; the new state comes out.
    ///     let mut out = exe.execute_with([Arg::Donate(state), Arg::Keep(&lr)])?;
    ///     state = out.remove(0);
    /// }
    /// assert_eq!(state.to_vec::<f32>()?, vec![0.0, 1.0, 2.0]);
    /// # Ok::<(), xlaclient_pjrt::Error>(())
    /// ```
    pub fn execute_with<'a>(&self, args: impl IntoIterator<Item = Arg<'a>>) -> Result<Vec<Buffer>> {
        let args: SmallVec<[Arg<'a>; 8]> = args.into_iter().collect();
        let mut out = self.execute_devices(&[&args[..]], false)?;
        Ok(out.pop().map(|(bufs, _)| bufs).unwrap_or_default())
    }

    /// [`execute_async`](Self::execute_async) with arguments that may be donated
    /// (taken by value, as in [`execute_with`](Self::execute_with)).
    pub fn execute_async_with<'a>(
        &self,
        args: impl IntoIterator<Item = Arg<'a>>,
    ) -> Result<Execution> {
        let args: SmallVec<[Arg<'a>; 8]> = args.into_iter().collect();
        let mut out = self.execute_devices(&[&args[..]], true)?;
        let (outputs, event) = out.pop().unwrap_or_default();
        Ok(Execution {
            event,
            outputs,
            _client: self.client.clone(),
            trace: self.execution_trace(),
        })
    }

    /// Runs the program on every device it was loaded on (replicas/partitions):
    /// `args[d]` are the parameters for device `d`. Waits for every device and
    /// returns the outputs per device.
    pub fn execute_replicated(&self, args: &[Vec<&Buffer>]) -> Result<Vec<Vec<Buffer>>> {
        let lists: Vec<&[&Buffer]> = args.iter().map(|v| v.as_slice()).collect();
        let out = self.execute_devices(&lists, true)?;
        let mut res = Vec::with_capacity(out.len());
        let mut first_err = None;
        for (bufs, ev) in out {
            // Every event is awaited, even after a failure.
            if let Err(e) = super::event::wait_opt(ev) {
                first_err.get_or_insert(e);
            }
            res.push(bufs);
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(res),
        }
    }

    /// [`execute_replicated`](Self::execute_replicated) with arguments that may be
    /// donated ([`Arg::Donate`], taken by value as in
    /// [`execute_with`](Self::execute_with)): `args[d]` are device `d`'s. An
    /// argument position is donated only where every device donates it (the
    /// plugin's list of kept inputs is one for all devices); elsewhere the
    /// donated buffers are dropped after the launch. Waits for every device.
    pub fn execute_replicated_with<'a>(&self, args: Vec<Vec<Arg<'a>>>) -> Result<Vec<Vec<Buffer>>> {
        let lists: Vec<&[Arg<'a>]> = args.iter().map(|v| v.as_slice()).collect();
        let out = self.execute_devices(&lists, true)?;
        let mut res = Vec::with_capacity(out.len());
        let mut first_err = None;
        for (bufs, ev) in out {
            if let Err(e) = super::event::wait_opt(ev) {
                first_err.get_or_insert(e);
            }
            res.push(bufs);
        }
        drop(lists);
        drop(args);
        match first_err {
            Some(e) => Err(e),
            None => Ok(res),
        }
    }

    /// What an execution needs to report its end, when DEBUG tracing is on.
    fn execution_trace(&self) -> Option<(Arc<str>, std::time::Instant)> {
        tracing::enabled!(tracing::Level::DEBUG)
            .then(|| (self.name.clone(), std::time::Instant::now()))
    }

    /// Checks one device's arguments against the entry parameters (count,
    /// element type and dims), when they are known. Buffers made by this crate know
    /// their shape without a C call, so this is a few compares per argument.
    #[inline]
    fn check_arguments<A: ArgLike>(&self, device: usize, list: &[A]) -> Result<()> {
        let Some(params) = &self.params else {
            return Ok(());
        };
        if list.len() != params.len() {
            return Err(Error::ParameterCount {
                device,
                given: list.len(),
                expected: params.len(),
            });
        }
        for (argument, (a, p)) in list.iter().zip(params.iter()).enumerate() {
            let Shape::Array { ty, dims } = p else {
                continue;
            };
            let (bt, bd) = a.buffer().meta()?;
            if bt != ty || bd != dims {
                return Err(Error::ArgumentShape {
                    device,
                    argument,
                    expected: Box::new(Shape::array(*ty, dims)),
                    given: Box::new(Shape::array(*bt, bd)),
                });
            }
        }
        Ok(())
    }

    /// The entry parameters' shapes, when known (modules compiled from an HLO
    /// module that states them); `None` for programs compiled from MLIR or
    /// deserialized, whose arguments are checked by the plugin only (byte sizes).
    pub fn parameter_shapes(&self) -> Option<&[Shape]> {
        self.params.as_deref()
    }

    fn execute_devices<A: ArgLike>(
        &self,
        args: &[&[A]],
        want_events: bool,
    ) -> Result<Vec<(Vec<Buffer>, Option<Event>)>> {
        let num_devices = args.len();
        let _span = tracing::debug_span!(
            "execute",
            executable = &*self.name,
            devices = num_devices,
            wait_events = want_events,
        )
        .entered();
        if num_devices == 0 || num_devices > self.devices.len().max(1) {
            return Err(Error::DeviceCount {
                given: num_devices,
                loaded: self.devices.len(),
            });
        }
        let num_args = args[0].len();
        for (device, list) in args.iter().enumerate() {
            if list.len() != num_args {
                return Err(Error::ArgumentCount {
                    device,
                    given: list.len(),
                    expected: num_args,
                });
            }
            for (argument, a) in list.iter().enumerate() {
                let b = a.buffer();
                if !Arc::ptr_eq(&b.client, &self.client) {
                    return Err(Error::ForeignBuffer { argument });
                }
                // On several devices, a buffer of another device fails that
                // device's launch while the others wait in their collectives'
                // rendezvous, which aborts the process after 40 s (both CPU
                // plugins): refused here.
                if num_devices > 1 {
                    let on = b.device()?;
                    if on.raw != self.devices[device] {
                        let expected = super::Device::new(&self.client, self.devices[device]);
                        return Err(Error::ArgumentDevice {
                            device,
                            argument,
                            expected: expected.id()?,
                            given: on.id()?,
                        });
                    }
                }
            }
            self.check_arguments(device, list)?;
        }
        // Every input not donated is listed as non-donatable on every device (the
        // header: a list of input indices the caller keeps alive through the
        // call), so a module that aliases an input never consumes a kept buffer.
        let keep: SmallVec<[i64; 8]> = (0..num_args)
            .filter(|&i| args.iter().any(|l| !l[i].donated()))
            .map(|i| i as i64)
            .collect();
        let raw_args: SmallVec<[SmallVec<[*mut PJRT_Buffer; 8]>; 1]> = args
            .iter()
            .map(|l| l.iter().map(|a| a.buffer().raw).collect())
            .collect();
        let arg_ptrs: SmallVec<[*const *mut PJRT_Buffer; 1]> =
            raw_args.iter().map(|l| l.as_ptr()).collect();
        let mut outs: SmallVec<[SmallVec<[*mut PJRT_Buffer; 4]>; 1]> = (0..num_devices)
            .map(|_| SmallVec::from_elem(std::ptr::null_mut(), self.num_outputs))
            .collect();
        let out_ptrs: SmallVec<[*mut *mut PJRT_Buffer; 1]> =
            outs.iter_mut().map(|l| l.as_mut_ptr()).collect();
        let mut events: SmallVec<[*mut raw::PJRT_Event; 1]> =
            SmallVec::from_elem(std::ptr::null_mut(), num_devices);
        let mut opts = raw::PJRT_ExecuteOptions::new();
        if !keep.is_empty() {
            opts.non_donatable_input_indices = keep.as_ptr();
            opts.num_non_donatable_input_indices = keep.len();
        }
        let mut a = raw::PJRT_LoadedExecutable_Execute_Args::new();
        a.executable = self.raw;
        a.options = &mut opts;
        a.argument_lists = arg_ptrs.as_ptr();
        a.num_devices = num_devices;
        a.num_args = num_args;
        a.output_lists = out_ptrs.as_ptr();
        if want_events {
            a.device_complete_events = events.as_mut_ptr();
        }
        // SAFETY: the header's contract for Execute: `argument_lists` is
        // [num_devices][num_args] live buffers, `output_lists` is caller-allocated
        // [num_devices][num_outputs] (num_outputs from PJRT_Executable_NumOutputs),
        // `device_complete_events` (when given) has num_devices slots, and `options`
        // only needs to live through the call. All arrays are on this frame and the
        // argument buffers are borrowed for the call; the plugin keeps its own
        // reference to inputs that the launched work still uses.
        //
        // Donation: the plugin may only donate an input that nothing else holds
        // (it aborts the process on a buffer with a usage hold or an external
        // reference, e.g. one being enqueued by another thread's Execute or read in
        // place). Only `Arg::Donate`, which owns its `Buffer`, is left out of
        // `non_donatable_input_indices`, and a `Buffer` is the only handle to its
        // PJRT buffer: while this call owns it, no other thread can use it, and
        // the same buffer cannot be passed twice. After the call the donated
        // `Buffer` is dropped (Destroy on a donated buffer is allowed; the memory
        // now belongs to the launched work).
        unsafe {
            self.client
                .api
                .call(slot::PJRT_LoadedExecutable_Execute, &mut a)?
        };
        let mut res = Vec::with_capacity(num_devices);
        for (d, list) in outs.iter().enumerate() {
            let bufs = match &self.output_shapes {
                Some(shapes) => list
                    .iter()
                    .zip(shapes)
                    .map(|(p, (ty, dims))| Buffer::with_meta(&self.client, *p, *ty, dims))
                    .collect(),
                None => list
                    .iter()
                    .map(|p| Buffer::from_raw(&self.client, *p))
                    .collect(),
            };
            let ev = if want_events {
                self.client.event(events[d])
            } else {
                None
            };
            res.push((bufs, ev));
        }
        Ok(res)
    }
}

/// An argument of an execution, as the execute functions see it.
trait ArgLike {
    fn buffer(&self) -> &Buffer;
    fn donated(&self) -> bool;
}

impl ArgLike for &Buffer {
    fn buffer(&self) -> &Buffer {
        self
    }
    fn donated(&self) -> bool {
        false
    }
}

impl ArgLike for Arg<'_> {
    fn buffer(&self) -> &Buffer {
        match self {
            Arg::Keep(b) => b,
            Arg::Donate(b) => b,
        }
    }
    /// A buffer holding lent host memory (an `AlignedHost` upload) is never
    /// donated: the memory is the caller's array, which the plugin may only read.
    /// It is passed as kept, and dropped after the call like any donated buffer.
    fn donated(&self) -> bool {
        matches!(self, Arg::Donate(b) if !b.holds_host())
    }
}

/// An argument of [`LoadedExecutable::execute_with`]: kept (borrowed: the
/// caller's buffer stays valid) or donated (moved in: the program may write an
/// output into the buffer's memory, as the module's `input_output_alias` allows,
/// and the buffer is gone either way).
///
/// Donation saves an allocation and a copy per call for state that is replaced by
/// each step (parameters updated in place, an environment's state). Taking the
/// buffer by value is what makes it safe: no other thread can be reading it, or
/// passing it to another execution, while the plugin takes its memory over.
#[derive(Debug)]
pub enum Arg<'a> {
    /// The buffer stays the caller's (listed in the execution's
    /// `non_donatable_input_indices`).
    Keep(&'a Buffer),
    /// The buffer is given to the execution; its memory may be reused for an
    /// output it aliases.
    Donate(Buffer),
}

impl<'a> From<&'a Buffer> for Arg<'a> {
    fn from(b: &'a Buffer) -> Self {
        Arg::Keep(b)
    }
}

/// An execution launched by [`LoadedExecutable::execute_async`]: a future of its
/// outputs, ready once the device has finished (woken by the plugin's completion
/// event through `PJRT_Event_OnReady`). [`wait`](Self::wait) blocks instead.
///
/// # On an async runtime
/// `Execution` is `Send` and `Unpin`, and polling it never blocks (see [`Event`]'s
/// notes), so it can be awaited in a task of any executor, tokio's multi-thread
/// runtime included, with many in flight at once:
///
/// ```no_run
/// # async fn demo(exe: std::sync::Arc<xlaclient_pjrt::LoadedExecutable>, x: xlaclient_pjrt::Buffer) -> xlaclient_pjrt::Result<()> {
/// let outputs = exe.execute_async(&[&x])?.await?;
/// # Ok(()) }
/// ```
///
/// Launching is another matter: on a client created synchronous (the default,
/// see [`ClientOptions::asynchronous`](super::ClientOptions::asynchronous)) the
/// plugin runs the program inside `execute_async` itself, on the calling thread,
/// and the `Execution` is ready when it returns. For device work that overlaps
/// other tasks, create the client with `.asynchronous(true)`: then the launch
/// returns at once and the program runs on the plugin's threads.
///
/// Dropping it early does not cancel the work; the outputs are dropped (the plugin
/// frees them when the work is done), and the completion callback, which owns its
/// own state, still runs safely. The execution keeps its client alive until then.
#[must_use = "an execution's outputs are only returned by awaiting or waiting for it"]
pub struct Execution {
    // Dropped in this order: the event, the outputs, then the client (whose
    // destruction must come after every event and buffer made from it, also for a
    // program with no outputs).
    event: Option<Event>,
    outputs: Vec<Buffer>,
    _client: Arc<ClientInner>,
    /// The program's name and the launch's time, when DEBUG tracing was on.
    trace: Option<(Arc<str>, std::time::Instant)>,
}

impl Execution {
    /// Blocks until the device is done (as the client's wait policy says) and
    /// returns the outputs, or the execution's error.
    pub fn wait(mut self) -> Result<Vec<Buffer>> {
        let status = super::event::wait_opt(self.event.take());
        self.report(&status);
        status?;
        Ok(std::mem::take(&mut self.outputs))
    }

    /// The `execution finished` event (DEBUG): the program's name, the time from
    /// launch to the end being seen, and whether it failed.
    fn report(&mut self, status: &Result<()>) {
        if let Some((name, launched)) = self.trace.take() {
            let elapsed_us = launched.elapsed().as_micros().min(u64::MAX as u128) as u64;
            tracing::debug!(
                executable = &*name,
                elapsed_us,
                failed = status.is_err(),
                "execution finished"
            );
        }
    }

    /// True once the device is done.
    pub fn is_ready(&self) -> Result<bool> {
        self.event.as_ref().map_or(Ok(true), Event::is_ready)
    }
}

impl Future for Execution {
    type Output = Result<Vec<Buffer>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(ev) = &mut this.event {
            match Pin::new(ev).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(status) => {
                    this.event = None;
                    this.report(&status);
                    status?;
                }
            }
        }
        this.report(&Ok(()));
        Poll::Ready(Ok(std::mem::take(&mut this.outputs)))
    }
}

impl fmt::Debug for Execution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Execution")
            .field("outputs", &self.outputs.len())
            .field("pending", &self.event.is_some())
            .finish()
    }
}

/// Whether a shape (or an element of a tuple) has a dynamic dimension.
fn has_dynamic(p: &crate::proto::ShapeProto) -> bool {
    p.is_dynamic_dimension.iter().any(|d| *d) || p.tuple_shapes.iter().any(has_dynamic)
}

/// A shape as XLA prints it, with `<=` before dynamic dimensions (`f32[<=4,2]`).
fn shape_text(p: &crate::proto::ShapeProto) -> String {
    if !p.tuple_shapes.is_empty() {
        let parts: Vec<String> = p.tuple_shapes.iter().map(shape_text).collect();
        return format!("({})", parts.join(", "));
    }
    let ty = ElementType::from_primitive_type(p.element_type)
        .map_or_else(|| format!("type{}", p.element_type), |t| t.to_string());
    let dims: Vec<String> = p
        .dimensions
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let dynamic = p.is_dynamic_dimension.get(i).copied().unwrap_or(false);
            if dynamic {
                format!("<={d}")
            } else {
                d.to_string()
            }
        })
        .collect();
    format!("{ty}[{}]", dims.join(","))
}

/// Copies bytes the plugin owns, then frees their owner with the plugin's deleter.
///
/// # Safety
/// `bytes` must be null or point to `len` readable bytes that `owner` keeps alive;
/// `deleter` must be the function the plugin gave to free `owner`.
unsafe fn take_plugin_bytes<T>(
    bytes: *const std::ffi::c_char,
    len: usize,
    owner: *mut T,
    deleter: Option<unsafe extern "C" fn(*mut T)>,
) -> Vec<u8> {
    // SAFETY: per the contract above.
    unsafe {
        let out = raw_slice(bytes.cast::<u8>(), len).to_vec();
        if let Some(del) = deleter {
            del(owner);
        }
        out
    }
}

/// Output element types and dims from the executable, if the plugin reports them
/// (and every type is one the crate supports); `None` otherwise.
fn output_shapes(
    client: &ClientInner,
    exe: *mut PJRT_Executable,
    n: usize,
) -> Option<Vec<(ElementType, Dims)>> {
    // SAFETY: `exe` is alive here; the arrays returned are owned by it and copied
    // before it is destroyed; their lengths are checked against each other first.
    unsafe {
        let t = client
            .api
            .query(slot::PJRT_Executable_OutputElementTypes, |a| {
                a.executable = exe
            })
            .ok()?;
        let d = client
            .api
            .query(slot::PJRT_Executable_OutputDimensions, |a| {
                a.executable = exe
            })
            .ok()?;
        if t.num_output_types != n
            || d.num_outputs != n
            || (n > 0 && (t.output_types.is_null() || d.dim_sizes.is_null()))
        {
            return None;
        }
        // An empty tuple result has no outputs: the plugin may return null arrays.
        let types = raw_slice(t.output_types, n);
        let sizes = raw_slice(d.dim_sizes, n);
        let total = sizes.iter().try_fold(0usize, |a, s| a.checked_add(*s))?;
        if total > 0 && d.dims.is_null() {
            return None;
        }
        let dims = raw_slice(d.dims, total);
        let mut out = Vec::with_capacity(n);
        let mut off = 0;
        for (ty, sz) in types.iter().zip(sizes) {
            let et = super::buffer::element_type_of(*ty)?;
            out.push((et, Dims::from_slice(&dims[off..off + sz])));
            off += sz;
        }
        Some(out)
    }
}

impl Drop for LoadedExecutable {
    fn drop(&mut self) {
        let mut a = raw::PJRT_LoadedExecutable_Destroy_Args::new();
        a.executable = self.raw;
        // SAFETY: we own the executable and destroy it once. Outputs and pending
        // executions do not need it: the plugin keeps what running work uses.
        let _ = unsafe {
            self.client
                .api
                .call(slot::PJRT_LoadedExecutable_Destroy, &mut a)
        };
    }
}

impl fmt::Debug for LoadedExecutable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedExecutable")
            .field("name", &self.name)
            .field("num_outputs", &self.num_outputs)
            .field("devices", &self.devices.len())
            .finish()
    }
}

/// Memory a compiled program needs on its device (see
/// [`LoadedExecutable::memory_stats`]); all in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Size of the generated code.
    pub generated_code_bytes: i64,
    /// Size of the arguments.
    pub argument_bytes: i64,
    /// Size of the outputs.
    pub output_bytes: i64,
    /// How much of the outputs reuses (aliases) argument buffers.
    pub alias_bytes: i64,
    /// Temporary buffers allocated while the program runs.
    pub temp_bytes: i64,
}
