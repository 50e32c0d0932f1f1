//! Reinforcement learning on the crate: Catch on the device ([`catch_device`]),
//! the Anakin learner ([`anakin`]) and path-space reweighting ([`reweight`]).

pub mod anakin;
pub mod catch_device;
pub mod reweight;
