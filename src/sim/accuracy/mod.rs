//! The simulator's accuracy (part of [`super`]): `measured.rs` reads a measured e2e.csv
//! as cases to simulate (`simulate --compare`) and compares them with the simulated rows;
//! `verdict.rs` judges each case against the tolerance and its noise and writes
//! sim_vs_measured.csv; `published.rs` holds OMGS-SGD's published cost model as
//! validation points (`--validate-published omgs`).

pub mod measured;
pub mod published;
pub mod verdict;

pub use measured::{
    compare, e2e_rows, measured_cases, Comparison, E2eRow, MeasuredCase, MeasuredRow,
};

// The simulator's names its files use (`super::X` there).
use super::{
    network, simulate_with, CostModel, Result, SimCase, SimError, SimRow, SimWorkload, WireCache,
};
