//! # The xlaclient guide
//!
//! A user guide in chapters. Each chapter is a markdown file in the repository's
//! `guide/` directory, compiled here as the documentation of an empty module, so
//! every Rust code block in it is a doc test that `cargo test` compiles and runs
//! (`cargo test --doc -- guide` runs just these).
//!
//! 1. [Getting started](getting_started): what the crate is, adding it, the two
//!    commands, a first program.
//! 2. [Building programs](building_programs): the builder, shapes checked as ops are
//!    built, errors that name the op and your line, numpy broadcasting, the lax and
//!    numpy faces.
//! 3. [Running programs](running_programs): clients, buffers, executing, donation,
//!    asynchronous execution and how a thread waits, executions awaited on tokio.
//! 4. [Trees and jit](trees_and_jit): structs of arrays as arguments and results,
//!    compiled functions on them, state updated in place.
//! 5. [Control flow and random numbers](control_flow): loops, `scan`, `cond`,
//!    functions, JAX's PRNG and samplers.
//! 6. [Gradients](gradients): reverse mode inside the program, through loops.
//! 7. [Many devices](many_devices): replicas and collectives, SPMD sharding; what has not landed.
//! 8. [Neural networks](neural_networks): `nn` (layers, losses, optimizers,
//!    schedules, initialisers) and checkpoints.
//! 9. [Reinforcement learning](reinforcement_learning): environments, the host loop,
//!    async agents, Catch on the device, Anakin, path reweighting, the runner.
//! 10. [Plugins](plugins): where the plugin comes from, other plugins, the suite
//!     against a given plugin.
//! 11. [Reliability](reliability): bad input is an error, fuzzing, shape rules
//!     against XLA, tracing spans and events, leaks, the test suite.
//! 12. [Performance](performance): every measured table, with its machine and
//!     conditions.
//! 13. [Design](design): the crates, the IR, the builder, the runtime.
//! 14. [Ops](ops): every op of the opcode table, its tests and its gradient.
//! 15. [Porting from JAX](porting_from_jax): JAX idioms next to their Rust forms,
//!     and the traps.
//! 16. [JAX parity](jax_parity): every name JAX code uses most, with its Rust
//!     form and whether it means the same.
//! 17. [Interchange with JAX](interchange_with_jax): StableHLO emitted from the IR
//!     (compiled through PJRT's `mlir` format, run by JAX) and imported from JAX.

// Cross-chapter links. A chapter links to another with `[text][chapter-name]` and
// defines `[chapter-name]: NN-chapter-name.md` at its end (for reading on GitHub).
// These definitions come first in the rendered text, and the first definition of a
// label wins, so in rustdoc the links go to the chapter modules instead.
macro_rules! chapter_links {
    () => {
        "[getting-started]: crate::guide::getting_started\n\
         [building-programs]: crate::guide::building_programs\n\
         [running-programs]: crate::guide::running_programs\n\
         [trees-and-jit]: crate::guide::trees_and_jit\n\
         [control-flow]: crate::guide::control_flow\n\
         [gradients]: crate::guide::gradients\n\
         [many-devices]: crate::guide::many_devices\n\
         [neural-networks]: crate::guide::neural_networks\n\
         [reinforcement-learning]: crate::guide::reinforcement_learning\n\
         [plugins]: crate::guide::plugins\n\
         [reliability]: crate::guide::reliability\n\
         [performance]: crate::guide::performance\n\
         [design]: crate::guide::design\n\
         [ops]: crate::guide::ops\n\
         [porting-from-jax]: crate::guide::porting_from_jax\n\
         [jax-parity]: crate::guide::jax_parity\n\
         [interchange-with-jax]: crate::guide::interchange_with_jax\n\n"
    };
}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/01-getting-started.md")]
pub mod getting_started {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/02-building-programs.md")]
pub mod building_programs {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/03-running-programs.md")]
pub mod running_programs {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/04-trees-and-jit.md")]
pub mod trees_and_jit {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/05-control-flow.md")]
pub mod control_flow {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/06-gradients.md")]
pub mod gradients {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/07-many-devices.md")]
pub mod many_devices {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/08-neural-networks.md")]
pub mod neural_networks {}

// Its examples use the runner (a default feature).
#[cfg(feature = "runner")]
#[cfg_attr(docsrs, doc(cfg(feature = "runner")))]
#[doc = chapter_links!()]
#[doc = include_str!("../guide/09-reinforcement-learning.md")]
pub mod reinforcement_learning {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/10-plugins.md")]
pub mod plugins {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/11-reliability.md")]
pub mod reliability {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/12-performance.md")]
pub mod performance {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/13-design.md")]
pub mod design {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/14-ops.md")]
pub mod ops {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/15-porting-from-jax.md")]
pub mod porting_from_jax {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/16-jax-parity.md")]
pub mod jax_parity {}

#[doc = chapter_links!()]
#[doc = include_str!("../guide/17-interchange-with-jax.md")]
pub mod interchange_with_jax {}
