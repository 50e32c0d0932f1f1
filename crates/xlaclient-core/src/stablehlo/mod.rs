//! StableHLO, the versioned interchange format of the JAX ecosystem, both ways.
//!
//! Emitting: [`Computation::to_stablehlo`](crate::Computation::to_stablehlo) prints a
//! module as StableHLO text (MLIR's generic form), which `compile` can take through
//! PJRT's `mlir` format (`CompileOptions::format(ProgramFormat::StableHlo)`).
//!
//! Importing: [`import()`] reads the MLIR text JAX prints
//! (`jax.jit(f).lower(*args).as_text()`) into the crate's IR, building each op
//! through the same shape rules as a program written here, so an imported module
//! gets argument checks, HLO text, a fingerprint, gradients and composition
//! ([`Builder::call_imported`](crate::Builder::call_imported)). The text is parsed
//! by [`parse`] into a syntax tree first.

pub(crate) mod emit;
pub mod import;
pub mod parse;

pub use import::{ImportedModule, import};
