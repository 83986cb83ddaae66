//! Method registry: every method's [`MethodSpec`], in the order reports list them.
//! Adding a method = its file (with its `SPEC`), its `pub mod` line in `compress/mod.rs`
//! and one line in [`SPECS`]; everything else here derives from the list.

use super::spec::MethodSpec;
use super::{
    noef, Aggregation, CompressError, Compressor, FusionSizing, MethodParams, Result, WorkerCtx,
};

/// Every method, in the order reports list them (one line per method).
pub const SPECS: &[&MethodSpec] = &[
    &super::ssgd::SPEC,
    &super::signsgd::SPEC,
    &super::signsgd::SPEC_MV,
    &super::topk::SPEC,
    &super::dgc::SPEC,
    &super::powersgd::SPEC,
    &super::acpsgd::SPEC,
    &super::marsit::SPEC,
    &super::sketch::SPEC,
    &super::qsgd::SPEC,
    &super::randomk::SPEC,
];

/// Names that build another method's compressor: the e2e methods that compress each
/// bucket merged, over their own planner's buckets (`config::E2E_METHODS` adds the
/// planner): (name, method).
pub const VARIANTS: &[(&str, &str)] = &[("omgs", "topk"), ("sketch-fusion", "sketch")];

const N_METHODS: usize = SPECS.len();
const NAMES: [&str; N_METHODS] = names();

const fn names() -> [&'static str; N_METHODS] {
    let mut out = [""; N_METHODS];
    let mut i = 0;
    while i < N_METHODS {
        out[i] = SPECS[i].name;
        i += 1;
    }
    out
}

/// Names accepted by `--methods`, in the order reports list them ([`SPECS`]' names).
pub const METHODS: &[&str] = &NAMES;

/// The spec of the method `name`.
pub fn spec(name: &str) -> Result<&'static MethodSpec> {
    SPECS
        .iter()
        .copied()
        .find(|s| s.name == name)
        .ok_or_else(|| unknown(name))
}

/// The method a name runs: itself for a method, the method behind a [`VARIANTS`] name
/// or a converge control ([`noef::CONTROLS`]), `None` for any other name.
pub fn base_of(name: &str) -> Option<&'static str> {
    if let Ok(s) = spec(name) {
        return Some(s.name);
    }
    VARIANTS
        .iter()
        .find(|(v, _)| *v == name)
        .map(|(_, b)| *b)
        .or_else(|| noef::base_of(name))
}

/// The spec of the method `name` runs ([`base_of`]).
pub fn spec_of(name: &str) -> Option<&'static MethodSpec> {
    base_of(name).and_then(|b| spec(b).ok())
}

/// Whether the method `name` runs ([`base_of`]) reads the [`MethodParams`] key `key`.
pub fn reads(name: &str, key: &str) -> bool {
    spec_of(name).is_some_and(|s| s.reads(key))
}

/// The methods that read the key `key`, in registry order.
pub fn readers(key: &str) -> Vec<&'static str> {
    SPECS
        .iter()
        .filter(|s| s.reads(key))
        .map(|s| s.name)
        .collect()
}

/// What method `name` sizes its fusion buckets on for tensors of `shapes` (given in the
/// order buckets are filled, backward order in e2e): its spec's sizing (ACP-SGD its
/// compressed factors, [`super::acpsgd::fusion_sizing`]), else its fp32 gradient bytes.
/// The engine and the simulator both plan with this, through `schedule::plan::phase_buckets`.
pub fn fusion_sizing(name: &str, p: &MethodParams, shapes: &[(usize, usize)]) -> FusionSizing {
    match spec(name).ok().and_then(|s| s.fusion_sizing) {
        Some(f) => f(p, shapes),
        None => FusionSizing::gradient_bytes(shapes),
    }
}

/// Build the compressor `name` for this worker.
pub fn build(name: &str, p: &MethodParams, ctx: WorkerCtx) -> Result<Box<dyn Compressor>> {
    (spec(name)?.build)(p, ctx)
}

/// The error for a name that is not a method.
pub fn unknown(name: &str) -> CompressError {
    CompressError::Unsupported {
        method: "registry",
        msg: format!("unknown method '{name}'; allowed: {}", METHODS.join(", ")),
    }
}

/// Aggregation of a method without building it (for up-front validation).
pub fn aggregation(name: &str) -> Result<Aggregation> {
    spec(name).map(|s| s.aggregation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::params::{param, PARAMS};

    fn ctx(world_size: usize) -> WorkerCtx {
        WorkerCtx {
            rank: 0,
            world_size,
            seed: 1,
        }
    }

    #[test]
    fn every_listed_method_builds_with_defaults_and_names_itself() {
        for &m in METHODS {
            let c = build(m, &MethodParams::default(), ctx(2)).unwrap();
            assert_eq!(c.name(), m);
        }
        assert!(build("nope", &MethodParams::default(), ctx(1)).is_err());
        let e = aggregation("nope").unwrap_err().to_string();
        assert!(
            e.contains("unknown method 'nope'") && e.contains("ssgd, signsgd"),
            "{e}"
        );
    }

    /// What each spec declares is what its compressor does.
    #[test]
    fn every_spec_agrees_with_its_compressor() {
        let mut names = METHODS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METHODS.len(), "a name listed twice");
        for s in SPECS {
            for n in [1, 2, 4] {
                let c = build(s.name, &MethodParams::default(), ctx(n)).unwrap();
                assert_eq!(c.name(), s.name);
                assert_eq!(c.aggregation(), s.aggregation, "{}", s.name);
                assert_eq!(c.rounds(), s.rounds, "{}", s.name);
                assert_eq!(c.phases(), s.phases, "{}", s.name);
            }
            for k in s.params {
                assert!(
                    param(k).is_some(),
                    "{}: '{k}' is not a MethodParams key",
                    s.name
                );
            }
            assert!(
                !s.citations.is_empty() && !s.summary.is_empty(),
                "{}",
                s.name
            );
            assert!(s.density.is_none() || s.reads("density"), "{}", s.name);
            assert!(
                s.min_compression_rate.is_none() || s.reads("min_compression_rate"),
                "{}",
                s.name
            );
        }
        for (v, b) in VARIANTS {
            assert!(spec(v).is_err() && spec(b).is_ok(), "{v} -> {b}");
        }
    }

    /// A method rejects a bad value of every key its spec says it reads (so the list is
    /// not longer than what the method reads).
    #[test]
    fn every_method_validates_the_keys_its_spec_lists() {
        let bad = |key: &str| {
            let mut p = MethodParams::default();
            match key {
                "density" => p.density = Some(1.5),
                "rank" => p.rank = 0,
                "min_compression_rate" => p.min_compression_rate = Some(f64::NAN),
                "momentum" => p.momentum = 1.5,
                "clip_norm" => p.clip_norm = f32::NAN,
                "sketch_rows" => p.sketch_rows = 0,
                "sketch_cols_per_k" => p.sketch_cols_per_k = f64::NAN,
                "qsgd_levels" => p.qsgd_levels = 0,
                // Every value is valid.
                "start_iter" | "nesterov" | "warmup_steps_per_epoch" => return None,
                other => panic!("no bad value for '{other}'"),
            }
            Some(p)
        };
        for s in SPECS {
            for k in s.params {
                if let Some(p) = bad(k) {
                    assert!(
                        build(s.name, &p, ctx(2)).is_err(),
                        "{} accepts a bad {k}",
                        s.name
                    );
                }
            }
        }
        // The flat table lists every MethodParams field, in its order.
        let json = serde_json::to_value(MethodParams::default()).unwrap();
        let fields: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        let keys: Vec<&str> = PARAMS.iter().map(|p| p.key).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(fields, sorted, "serde_json sorts keys");
        assert_eq!(keys[0], "density");
    }

    /// The per-method defaults derive from the specs, e2e variants and controls included.
    #[test]
    fn defaults_follow_the_spec_of_the_method_a_name_runs() {
        use crate::compress::params::*;
        assert_eq!(default_density("sketch"), SKETCH_DENSITY);
        assert_eq!(default_density("sketch-fusion"), SKETCH_DENSITY);
        assert_eq!(default_density("topk"), DEFAULT_DENSITY);
        assert_eq!(default_density("omgs"), DEFAULT_DENSITY);
        assert_eq!(default_density("topk-noef"), DEFAULT_DENSITY);
        assert_eq!(default_density("nope"), DEFAULT_DENSITY);
        assert_eq!(default_min_compression_rate("acpsgd"), 0.0);
        assert_eq!(default_min_compression_rate("powersgd"), 2.0);
        assert_eq!(default_min_compression_rate("powersgd-noef"), 2.0);
        assert_eq!(base_of("omgs"), Some("topk"));
        assert_eq!(base_of("signsgd-noef"), Some("signsgd"));
        assert_eq!(base_of("nope"), None);
        assert!(reads("sketch-fusion", "sketch_rows") && !reads("ssgd", "density"));
        assert_eq!(readers("rank"), ["powersgd", "acpsgd"]);
    }
}
