//! StableHLO, the versioned interchange format of the JAX ecosystem: printing a
//! module as StableHLO text ([`Computation::to_stablehlo`](crate::Computation::to_stablehlo)).

pub(crate) mod emit;
