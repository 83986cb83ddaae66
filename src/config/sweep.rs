//! The method-parameter sweep that `[[micro-compress]]`, `[[micro]]`, `[[e2e]]` and
//! `[[converge]]` share: `densities`, `lowrank_ranks` (with its deprecated name `ranks`)
//! and `params`, expanded into one [`MethodParams`] per combination.
//!
//! Each section declares these keys itself: serde's `flatten` cannot be combined with
//! `deny_unknown_fields` (an unknown key must stay an error naming it) and would lose the
//! line of a wrong-typed value. The rules live here once.

use super::*;
use crate::compress::MethodParams;

/// Most Count Sketch rows (`sketch_rows`): each row is a hash and a row of the table.
pub const MAX_SKETCH_ROWS: usize = 1024;

/// Most Count Sketch columns per kept element (`sketch_cols_per_k`).
pub const MAX_SKETCH_COLS_PER_K: f64 = 1000.0;

/// A section's sweep keys, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct Sweep<'a> {
    /// Density sweep (overrides `params.density`).
    pub densities: &'a Option<Vec<f64>>,
    /// Power-SGD/ACP-SGD rank sweep (overrides `params.rank`).
    pub lowrank_ranks: &'a Option<Vec<usize>>,
    /// Deprecated name of `lowrank_ranks` (accepted with a warning).
    pub ranks: &'a Option<Vec<usize>>,
    pub params: &'a MethodParams,
}

impl<'a> Sweep<'a> {
    pub fn new(
        densities: &'a Option<Vec<f64>>,
        lowrank_ranks: &'a Option<Vec<usize>>,
        ranks: &'a Option<Vec<usize>>,
        params: &'a MethodParams,
    ) -> Self {
        Sweep {
            densities,
            lowrank_ranks,
            ranks,
            params,
        }
    }

    /// One parameter set per density x rank, each checked by every one of `methods`
    /// (registry names, already validated).
    pub fn expand(
        &self,
        methods: &[String],
        origin: &Origin,
    ) -> Result<Vec<MethodParams>, ConfigError> {
        use crate::compress::{registry, WorkerCtx};
        // `None`: each method's own default (resolved per case: `MethodParams::for_method`).
        let densities: Vec<Option<f64>> = match self.densities {
            Some(v) => v.iter().map(|&d| Some(d)).collect(),
            None => vec![self.params.density],
        };
        let ranks = lowrank_sweep(self.lowrank_ranks, self.ranks, origin)?
            .unwrap_or_else(|| vec![self.params.rank]);
        no_repeats(origin, "densities", &densities, |d| format!("{d:?}"))?;
        no_repeats(origin, "lowrank_ranks", &ranks, |r| r.to_string())?;
        if densities.is_empty() || ranks.is_empty() {
            return Err(origin.invalid(
                if densities.is_empty() {
                    "densities"
                } else {
                    "lowrank_ranks"
                },
                "is empty; give at least one value or leave it out",
            ));
        }
        // Bounds the registry does not set: a count that sizes an allocation before any
        // tensor is seen (one hash per sketch row) must not abort the run.
        if self.params.sketch_rows > MAX_SKETCH_ROWS {
            return Err(origin.invalid(
                "sketch_rows",
                format!(
                    "{} rows is more than {MAX_SKETCH_ROWS}; give 1 to {MAX_SKETCH_ROWS} (odd, e.g. 3 or 5)",
                    self.params.sketch_rows
                ),
            ));
        }
        let c = self.params.sketch_cols_per_k;
        if c.is_finite() && c > MAX_SKETCH_COLS_PER_K {
            return Err(origin.invalid(
                "sketch_cols_per_k",
                format!("{c} columns per kept element is more than {MAX_SKETCH_COLS_PER_K} (a sketch wider than the tensor compresses nothing); give a value in (0, {MAX_SKETCH_COLS_PER_K}], e.g. 20"),
            ));
        }
        let mut params = Vec::new();
        for &d in &densities {
            for &r in &ranks {
                let mut p = self.params.clone();
                p.density = d;
                p.rank = r;
                // Each method validates the keys it reads.
                for m in methods {
                    registry::build(
                        m,
                        &p,
                        WorkerCtx {
                            rank: 0,
                            world_size: 1,
                            seed: 0,
                        },
                    )
                    .map_err(|e| {
                        let key = match &e {
                            // The swept rank: named as the user gave it (--rank,
                            // the deprecated name, or --lowrank-rank).
                            crate::compress::CompressError::BadParam { key: "rank", .. }
                                if self.ranks.is_some() =>
                            {
                                "ranks"
                            }
                            crate::compress::CompressError::BadParam { key: "rank", .. }
                                if self.lowrank_ranks.is_some()
                                    || matches!(origin, Origin::Cli) =>
                            {
                                "lowrank_ranks"
                            }
                            crate::compress::CompressError::BadParam { key, .. } => *key,
                            _ => "params",
                        };
                        origin.invalid(key, e)
                    })?;
                }
                params.push(p);
            }
        }
        Ok(params)
    }

    /// The parameter sets of a section whose methods run as the registry compressors
    /// `bases` (e2e, converge), by the rules of `[[micro-compress]]` (a base named twice is
    /// checked once); `iters` is the section's, refused when 0.
    pub fn expand_for<'m>(
        &self,
        bases: impl IntoIterator<Item = &'m str>,
        iters: Option<u64>,
        origin: &Origin,
    ) -> Result<Vec<MethodParams>, ConfigError> {
        let mut methods: Vec<String> = Vec::new();
        for b in bases {
            if !methods.iter().any(|m| m == b) {
                methods.push(b.to_string());
            }
        }
        let spec = CompressSection {
            methods,
            shapes: vec!["1".into()],
            models: Vec::new(),
            densities: self.densities.clone(),
            lowrank_ranks: self.lowrank_ranks.clone(),
            ranks: self.ranks.clone(),
            params: self.params.clone(),
            iters,
            warmup: None,
            check: false,
        }
        .validate(origin, false)?;
        Ok(spec.params)
    }
}

/// The Power-SGD/ACP-SGD rank sweep of a section: `lowrank_ranks` (`--lowrank-rank`), or
/// the deprecated `ranks` (`--rank`), which an MPI user reads as a process count; the old
/// key still works, with a warning; both at once are refused.
fn lowrank_sweep(
    lowrank_ranks: &Option<Vec<usize>>,
    ranks: &Option<Vec<usize>>,
    origin: &Origin,
) -> Result<Option<Vec<usize>>, ConfigError> {
    let (old, new) = match origin {
        Origin::Cli => ("--rank", "--lowrank-rank"),
        Origin::File { .. } => ("ranks", "lowrank_ranks"),
    };
    match (lowrank_ranks, ranks) {
        (Some(_), Some(_)) => Err(origin.invalid(
            "ranks",
            format!("{old} is the deprecated name of {new}: give {new} only"),
        )),
        (None, Some(r)) => {
            let at = match origin {
                Origin::Cli => String::new(),
                Origin::File {
                    file,
                    section,
                    index,
                } => format!("{file}: [[{section}]] #{index}: "),
            };
            warn(format!(
                "{at}{old} is deprecated (it is the Power-SGD/ACP-SGD rank, not a number of MPI ranks): write {new}"
            ));
            Ok(Some(r.clone()))
        }
        (l, None) => Ok(l.clone()),
    }
}
