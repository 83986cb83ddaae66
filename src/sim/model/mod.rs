//! The simulator's cost model (part of [`super`]): what each operation of the schedule
//! costs and how the virtual clock walks them. `clock.rs` walks one iteration's operations
//! (the device stream `DevStream`), `costs.rs` holds [`CostModel`] (compression, copies,
//! the network, the host), `network.rs` a collective's cost (presets and fitted links),
//! `topology.rs` ranks per node and hierarchical collectives, `credit.rs` a token-bucket
//! link shaper's credit, and `wire.rs` the compressors' wire capacities (cached).
//! Its calibration is [`super::calibrate`], its accuracy [`super::accuracy`].

pub(super) mod clock;
pub mod costs;
pub mod credit;
pub mod network;
pub mod topology;
pub(super) mod wire;

// The simulator's names its files use (`super::X` there).
use super::{
    exchange_collectives, exchange_s, fit, gather_scale, host, merr, published, CostModel,
    MethodCosts, Nets, Result, SimCase, SimError, SimResult,
};
