//! gradcomp: a benchmark suite for gradient compression in distributed data-parallel
//! SGD. See README.md and docs/architecture.md.

pub mod bench;
pub mod cli;
pub mod comm;
pub mod compress;
pub mod config;
pub mod converge;
pub mod devcost;
pub mod engine;
pub mod error;
pub mod input;
pub mod measure;
pub mod models;
pub mod netmodel;
pub mod record;
pub mod roofline;
pub mod schedule;
pub mod sim;
pub mod units;

pub use error::{Error, Result};
