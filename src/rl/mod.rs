//! Reinforcement learning: environments and agents.

pub mod anakin;
pub mod catch_device;
