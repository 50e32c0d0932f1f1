//! Reinforcement learning on the crate: path-space reweighting ([`reweight`]).

pub mod reweight;
