//! The cost model's calibration (part of [`super`]): `gradcomp fit`. `fit.rs` fits the
//! network and compression costs of a results directory (micro_comm.csv,
//! micro_compress.csv) and, from its e2e.csv and run.json, `host.rs`'s host model (CPU
//! share, start and resynchronisation latencies, by bisection); `fit_table.rs` prints the
//! fits, poor or oversubscribed ones marked; `trust.rs` says whether the calibration run
//! shared its cores with other work (`simulate --fits` refuses one that did).

pub mod fit;
mod fit_compress;
pub mod fit_table;
pub mod host;
pub mod trust;

// The simulator's names its files use (`super::X` there).
use super::{
    credit, e2e_rows, measured, network, simulate, summary, CostModel, MethodCosts, Result,
    SimCase, SimError,
};
