//! Checking a compress profile against a run: coverage of its methods, shapes and world
//! size, the method parameters the times were taken at, and the recorded parameters
//! themselves.

use super::{method_info, param_keys, stage_code, CompressProfile, ProfileError, SCRIPT};
use crate::compress::MethodParams;
use crate::roofline::Stage;

impl CompressProfile {
    /// Check that the profile covers a run: every method of `methods` (registry names),
    /// both stages of each of its rounds and phases for every shape of `shapes`, and, for
    /// an all-gather method's decompress, `world_size` exactly. The first gap is the
    /// error, naming the method, the shape and the fix.
    pub fn check(
        &self,
        methods: &[&str],
        shapes: &[(usize, usize)],
        world_size: usize,
    ) -> Result<(), ProfileError> {
        let mut distinct: Vec<(usize, usize)> = shapes.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let have = || {
            let m = self.methods();
            if m.is_empty() {
                "no method rows".to_string()
            } else {
                m.join(", ")
            }
        };
        for &method in methods {
            let (Some(ops), Some((rounds, phases, _))) =
                (self.times.get(method), method_info(method))
            else {
                return Err(ProfileError::MissingMethod {
                    at: self.at(0),
                    method: method.to_string(),
                    have: have(),
                });
            };
            let mut first = None;
            let mut missing = 0;
            for &(rows, cols) in &distinct {
                let mut gap = None;
                'ops: for round in 0..rounds {
                    for phase in 0..phases {
                        for stage in [Stage::Compress, Stage::Decompress] {
                            if self
                                .time_s(method, stage, round, phase, rows, cols, world_size)
                                .is_none()
                            {
                                gap = Some((stage, round, phase));
                                break 'ops;
                            }
                        }
                    }
                }
                let Some((stage, round, phase)) = gap else {
                    continue;
                };
                if let Some(ws) = ops.get(&(stage_code(stage), round, phase, rows, cols)) {
                    // The shape is there at other world sizes only.
                    return Err(ProfileError::MissingWorldSize {
                        at: self.at(0),
                        method: method.to_string(),
                        rows,
                        cols,
                        world_size,
                        have: ws
                            .keys()
                            .map(|w| w.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
                missing += 1;
                first.get_or_insert((stage, round, phase, rows, cols));
            }
            if let Some((stage, round, phase, rows, cols)) = first {
                return Err(ProfileError::MissingShape {
                    at: self.at(0),
                    method: method.to_string(),
                    stage: stage.name(),
                    round,
                    phase,
                    rows,
                    cols,
                    missing,
                    total: distinct.len(),
                });
            }
        }
        Ok(())
    }

    /// Check that the profile was measured at the run's method parameters where the
    /// times of `methods` depend on them (`density` for topk, dgc, sketch; `rank` and
    /// `min_compression_rate` for powersgd, acpsgd; `nesterov` and `clip_norm` for dgc;
    /// `sketch_rows`, `sketch_cols_per_k` for sketch; `qsgd_levels` for qsgd): each must
    /// be recorded as a comment `# key: value` equal to the run's.
    pub fn check_params(
        &self,
        methods: &[&str],
        params: &MethodParams,
    ) -> Result<(), ProfileError> {
        for (key, users) in param_keys() {
            let flag = match key {
                "rank" => "--lowrank-rank".to_string(),
                _ => format!("--{}", key.replace('_', "-")),
            };
            for &user in methods.iter().filter(|m| users.contains(m)) {
                // Each method at the density and rate it runs at (`MethodParams::for_method`).
                let run = serde_json::to_value(params.for_method(user)).unwrap_or_default();
                let want = &run[key];
                let shown_want = match want {
                    serde_json::Value::Number(n) => n.to_string(),
                    other => other.to_string(),
                };
                // (value, line, what the message calls it)
                let (got, line, shown_got) = match self.meta.iter().find(|m| m.0 == key) {
                    Some((_, got, line)) => (got.clone(), *line, format!("{key} = {got}")),
                    // Not recorded: every method at its own default (the script records
                    // the density and the rate only when given one).
                    None if key == "density" => {
                        let ours = crate::compress::default_density(user);
                        (
                            ours.to_string(),
                            0,
                            format!("{user}'s default density {ours}"),
                        )
                    }
                    None if key == "min_compression_rate" => {
                        let ours = crate::compress::default_min_compression_rate(user);
                        (
                            ours.to_string(),
                            0,
                            format!("{user}'s default min_compression_rate {ours}"),
                        )
                    }
                    None => {
                        return Err(ProfileError::Param {
                            at: self.at(0),
                            msg: format!("{user}'s time depends on {key}, which the profile does not record; re-run {SCRIPT} {flag} {shown_want} (it writes '# {key}: {shown_want}'), or add that comment if the profile was taken at it"),
                        });
                    }
                };
                let same = match want {
                    serde_json::Value::Bool(b) => got.parse::<bool>().ok() == Some(*b),
                    serde_json::Value::Number(n) => {
                        let w = n.as_f64().unwrap_or(f64::NAN);
                        got.parse::<f64>()
                            .map(|g| (g - w).abs() <= 1e-9 * w.abs().max(g.abs()))
                            .unwrap_or(false)
                    }
                    _ => false,
                };
                if !same {
                    // A density left to the methods: the script's default does the same.
                    let rerun = if key == "density" && params.density.is_none() {
                        format!("{SCRIPT} without --density (each method at its own)")
                    } else if key == "min_compression_rate" && params.min_compression_rate.is_none()
                    {
                        format!("{SCRIPT} without --min-compression-rate (each method at its own)")
                    } else {
                        format!("{SCRIPT} {flag} {shown_want}")
                    };
                    return Err(ProfileError::Param {
                        at: self.at(line),
                        msg: format!("measured at {shown_got}, but the run uses {key} = {shown_want}, and {user}'s time depends on it; re-run {rerun}"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Method parameters recorded in comments must be numbers (or `true`/`false`).
    pub(super) fn check_meta(&self) -> Result<(), ProfileError> {
        for (k, v, line) in &self.meta {
            if !param_keys().iter().any(|p| p.0 == k) {
                continue;
            }
            let ok = v.parse::<f64>().map(f64::is_finite).unwrap_or(false)
                || v == "true"
                || v == "false";
            if !ok {
                return Err(ProfileError::Meta {
                    at: self.at(*line),
                    key: k.clone(),
                    value: v.clone(),
                    msg: "is not a number (or true/false); write the value the profile was measured at".into(),
                });
            }
            if let Some((_, v2, l2)) = self.meta.iter().find(|m| m.0 == *k && m.1 != *v) {
                return Err(ProfileError::Meta {
                    at: self.at(*l2),
                    key: k.clone(),
                    value: v2.clone(),
                    msg: format!(
                        "differs from '{v}' on line {line}: one profile is measured at one value"
                    ),
                });
            }
        }
        Ok(())
    }
}
