//! One description per method (issue 51): what the rest of the suite needs to know about
//! a method without building it, declared once as `pub const SPEC: MethodSpec` beside the
//! method's code and listed once in [`super::registry::SPECS`]. The registry, the CLI
//! help, the device-profile parameter checks, the converge labels, the memory estimate
//! and `gradcomp methods --json` (which the analysis package reads) all derive from it.
//! `registry::tests` checks every spec against the compressor it builds.

use super::{Aggregation, Compressor, FusionSizing, MethodParams, Result, WorkerCtx};

/// Builds a method's compressor for one worker (validates the keys it reads).
pub type BuildFn = fn(&MethodParams, WorkerCtx) -> Result<Box<dyn Compressor>>;
/// A method's fusion sizing from shapes alone ([`super::registry::fusion_sizing`]).
pub type FusionFn = fn(&MethodParams, &[(usize, usize)]) -> FusionSizing;
/// Bytes of the state a method's parameters size beyond the tensor copies a case counts,
/// for tensors of the given element counts at a world size (an upper bound; saturating).
pub type StateBytesFn = fn(&MethodParams, &[usize], u64) -> u64;

/// One method, as the suite sees it from outside.
#[derive(Clone, Copy)]
pub struct MethodSpec {
    /// CLI/CSV name (`--methods`, the `method` column).
    pub name: &'static str,
    /// One line: what it sends and how it keeps what it did not.
    pub summary: &'static str,
    /// How the wire is combined ([`Compressor::aggregation`]).
    pub aggregation: Aggregation,
    /// Exchange rounds per step ([`Compressor::rounds`]).
    pub rounds: usize,
    /// Phases of the step cycle ([`Compressor::phases`]).
    pub phases: usize,
    /// The [`MethodParams`] keys it reads (names in [`super::params::PARAMS`]).
    pub params: &'static [&'static str],
    /// Its own default density, where it differs from [`super::DEFAULT_DENSITY`].
    pub density: Option<f64>,
    /// Its own default `min_compression_rate`, where it differs from
    /// [`super::params::POWERSGD_MIN_COMPRESSION_RATE`].
    pub min_compression_rate: Option<f64>,
    /// Its output is already a momentum update, so the optimiser's step adds none (DGC).
    pub owns_momentum: bool,
    /// Whether its device time depends on a tensor's element count alone (its kernels
    /// view the tensor flat), so a profile may be interpolated in elements.
    pub by_elements: bool,
    /// Bytes one worker sends per tensor of `d` elements and step (the closed form
    /// tests/wire_formula.rs checks).
    pub wire_bytes: &'static str,
    /// Per-tensor state it keeps between steps.
    pub memory: &'static str,
    /// Its state beyond the tensor copies, for the memory check; `None`: nothing that
    /// grows with its parameters or the world size.
    pub state_bytes: Option<StateBytesFn>,
    /// Papers and reference code (file, line) it follows.
    pub citations: &'static [&'static str],
    /// Its compressor.
    pub build: BuildFn,
    /// Its fusion sizing; `None`: fp32 gradient bytes ([`FusionSizing::gradient_bytes`]).
    pub fusion_sizing: Option<FusionFn>,
    /// Its host compression costs as measured on the reference machine: what the
    /// simulator charges when no fit is given (`sim::MethodCosts::reference`).
    pub reference_costs: ReferenceCosts,
}

impl MethodSpec {
    /// Whether the method reads the [`MethodParams`] key `key`.
    pub fn reads(&self, key: &str) -> bool {
        self.params.contains(&key)
    }
}

impl std::fmt::Debug for MethodSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodSpec")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// One phase's host cost, `fixed_s + per_element_s * numel` (a `gradcomp fit` line).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearCost {
    pub fixed_s: f64,
    pub per_element_s: f64,
}

impl LinearCost {
    /// `fixed_s + per_element_s * numel`.
    pub const fn new(fixed_s: f64, per_element_s: f64) -> LinearCost {
        LinearCost {
            fixed_s,
            per_element_s,
        }
    }
}

/// A method's reference host compression costs: `gradcomp fit`'s compression lines over
/// a one-rank run of bench-configs/reference-costs.toml (scripts/reference_costs.sh
/// measures them and prints this field for every method's spec).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReferenceCosts {
    /// How they were measured: date, gradcomp revision, machine, ranks, command.
    pub source: &'static str,
    pub compress: LinearCost,
    pub feedback: LinearCost,
    pub decompress: LinearCost,
}

/// The run that measured the reference costs of every method except those citing a
/// later run of their own; the simulator names it as the source of its default
/// compression costs (`sim::reference_source`).
pub const REFERENCE_FIT: &str = "reference fit, 2026-11-23, gradcomp c1372d8+uncommitted, \
    AMD EPYC (2 cores), 1 rank, bench-configs/reference-costs.toml + gradcomp fit";

/// One hyper-parameter: a field of [`MethodParams`], a TOML key and a CSV column.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    /// Field name = TOML key = CSV column.
    pub key: &'static str,
    /// Command-line flag.
    pub flag: &'static str,
    /// Rust type of the field.
    pub kind: &'static str,
    /// Allowed values (checked by each method that reads it).
    pub limits: &'static str,
    /// One line.
    pub doc: &'static str,
    /// Its value as the benchmark CSVs write it (`bench::rows::param_fields`).
    pub csv: fn(&MethodParams) -> String,
    /// Whether a method's device time depends on it: a compress profile must record it
    /// (`devcost::profile`, `check_params`).
    pub sets_cost: bool,
}

/// The bytes `per_tensor` gives for each tensor, each rounded down to whole bytes and
/// summed saturating (an absurd parameter gives `u64::MAX`, never an overflow), plus
/// `once` of the largest tensor.
pub fn state_sum(
    numels: &[usize],
    once: impl Fn(usize) -> f64,
    per_tensor: impl Fn(usize) -> f64,
) -> u64 {
    // f64 -> u64 saturates (and NaN gives 0; parameters are validated finite).
    let mut total = numels.iter().max().map_or(0, |&d| once(d) as u64);
    for &d in numels {
        total = total.saturating_add(per_tensor(d) as u64);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each tensor's bytes rounded down, plus `once` of the largest, by hand.
    #[test]
    fn state_sum_by_hand() {
        // once(5) = 10; per tensor 1.5 x 3 = 4.5 -> 4, 1.5 x 5 = 7.5 -> 7: 10 + 4 + 7.
        assert_eq!(
            state_sum(&[3, 5], |d| 2.0 * d as f64, |d| 1.5 * d as f64),
            21
        );
        // No tensor: nothing, not even `once`.
        assert_eq!(state_sum(&[], |_| 9.0, |_| 9.0), 0);
        // Saturating: two tensors of u64::MAX bytes each.
        assert_eq!(state_sum(&[1, 2], |_| 0.0, |_| f64::MAX), u64::MAX);
    }

    /// `{:?}` names the method and says the rest is left out.
    #[test]
    fn a_spec_debug_prints_its_name() {
        assert_eq!(
            format!("{:?}", crate::compress::ssgd::SPEC),
            "MethodSpec { name: \"ssgd\", .. }"
        );
    }
}
