//! Reinforcement learning: environments and agents.

pub mod catch_device;
