//! `gradcomp methods [--json]`: every method's [`super::spec::MethodSpec`], the
//! hyper-parameters' [`super::spec::ParamSpec`]s and the names that run a method, as a
//! table or as the JSON that the analysis package and `analysis/profile_compress.py`
//! read (a copy is committed as `analysis/methods.json`; `tests/methods_json.rs` checks
//! it is this output). Every field comes from the specs or from the built compressor.

use super::params::{self, default_values, PARAMS};
use super::registry::{self, SPECS, VARIANTS};
use super::{device, noef, MethodParams, WorkerCtx};
use crate::roofline::Stage;
use serde_json::{json, Value};

/// The tensor whose device kernels the description lists (rows x cols), at
/// [`KERNELS_WORLD_SIZE`] workers and default parameters: the size of the kernel table of
/// docs/methods.md, "Device kernels".
pub const KERNELS_SHAPE: (usize, usize) = (1024, 1024);
/// Workers of the listed all-gather decompressions.
pub const KERNELS_WORLD_SIZE: usize = 2;

/// The kernel names of every phase, round and stage of `name` on [`KERNELS_SHAPE`].
fn kernels(name: &str) -> Value {
    let ctx = WorkerCtx {
        rank: 0,
        world_size: KERNELS_WORLD_SIZE,
        seed: 0,
    };
    let Ok(mut c) = registry::build(name, &MethodParams::default(), ctx) else {
        return Value::Null;
    };
    let _untouched = super::setup::untouched_registration();
    if c.register(0, KERNELS_SHAPE.0, KERNELS_SHAPE.1).is_err() {
        return Value::Null;
    }
    let mut out = Vec::new();
    for phase in 0..c.phases() {
        for round in 0..c.rounds() {
            for stage in [Stage::Compress, Stage::Decompress] {
                let names: Vec<&str> =
                    device::collect(|o| c.device_kernels(0, round, phase, stage, o))
                        .iter()
                        .map(|k| k.name)
                        .collect();
                out.push(json!({
                    "phase": phase,
                    "round": round,
                    "stage": stage.name(),
                    "kernels": names,
                }));
            }
        }
    }
    Value::Array(out)
}

/// Everything `gradcomp methods --json` prints.
pub fn methods_json() -> Value {
    let defaults = default_values();
    let methods: Vec<Value> = SPECS
        .iter()
        .map(|s| {
            // The values it runs at by default, of the keys it reads.
            let resolved = serde_json::to_string(&MethodParams::default().for_method(s.name))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .unwrap_or_default();
            let own: serde_json::Map<String, Value> = s
                .params
                .iter()
                .map(|k| (k.to_string(), resolved[*k].clone()))
                .collect();
            json!({
                "name": s.name,
                "summary": s.summary,
                "aggregation": s.aggregation.name(),
                "rounds": s.rounds,
                "phases": s.phases,
                "params": s.params,
                "defaults": own,
                "owns_momentum": s.owns_momentum,
                "by_elements": s.by_elements,
                "wire_bytes": s.wire_bytes,
                "memory": s.memory,
                "citations": s.citations,
                "device_kernels": kernels(s.name),
            })
        })
        .collect();
    let params: Vec<Value> = PARAMS
        .iter()
        .map(|p| {
            json!({
                "key": p.key,
                "flag": p.flag,
                "kind": p.kind,
                "limits": p.limits,
                "doc": p.doc,
                "sets_cost": p.sets_cost,
                "default": defaults[p.key],
                "methods": registry::readers(p.key),
            })
        })
        .collect();
    let pairs = |v: &[(&str, &str)]| -> Vec<Value> {
        v.iter()
            .map(|(n, m)| json!({"name": n, "method": m}))
            .collect()
    };
    json!({
        "generated_by": "gradcomp methods --json",
        "default_density": params::DEFAULT_DENSITY,
        "default_min_compression_rate": params::POWERSGD_MIN_COMPRESSION_RATE,
        "device_kernels_at": {
            "rows": KERNELS_SHAPE.0,
            "cols": KERNELS_SHAPE.1,
            "world_size": KERNELS_WORLD_SIZE,
        },
        "methods": methods,
        "variants": pairs(VARIANTS),
        "controls": pairs(noef::CONTROLS),
        "params": params,
    })
}

/// `gradcomp methods`: one block per method, then the hyper-parameters.
pub fn methods_table() -> String {
    let mut s = String::new();
    for m in SPECS {
        let own = if m.params.is_empty() {
            "none".to_string()
        } else {
            m.params.join(", ")
        };
        s.push_str(&format!(
            "{}: {}\n  aggregation {}, {} round(s), {} phase(s); parameters: {own}\n  wire bytes: {}\n  memory: {}\n  cites: {}\n",
            m.name,
            m.summary,
            m.aggregation.name(),
            m.rounds,
            m.phases,
            m.wire_bytes,
            m.memory,
            m.citations.join("; "),
        ));
    }
    let variants: Vec<String> = VARIANTS
        .iter()
        .chain(noef::CONTROLS)
        .map(|(n, m)| format!("{n} ({m})"))
        .collect();
    s.push_str(&format!(
        "\nnames that run a method: {}\n\nparameters (TOML key / CSV column, flag, type, limits):\n",
        variants.join(", ")
    ));
    let defaults = default_values();
    for p in PARAMS {
        let default = match &defaults[p.key] {
            Value::Null => "each method's own".to_string(),
            v => v.to_string(),
        };
        s.push_str(&format!(
            "  {:<24} {:<26} {:<6} {:<14} default {default}: {} ({})\n",
            p.key,
            p.flag,
            p.kind,
            p.limits,
            p.doc,
            registry::readers(p.key).join(", ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The description agrees with what the code does: each method's aggregation, rounds
    /// and phases are its built compressor's, each default is what `for_method` resolves,
    /// and every listed kernel list is the compressor's own.
    #[test]
    fn the_json_agrees_with_the_compressors() {
        let j = methods_json();
        let methods = j["methods"].as_array().unwrap();
        let names: Vec<&str> = methods
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, registry::METHODS);
        for m in methods {
            let name = m["name"].as_str().unwrap();
            let c = registry::build(
                name,
                &MethodParams::default(),
                WorkerCtx {
                    rank: 0,
                    world_size: 2,
                    seed: 0,
                },
            )
            .unwrap();
            assert_eq!(m["aggregation"], c.aggregation().name(), "{name}");
            assert_eq!(m["rounds"], c.rounds(), "{name}");
            assert_eq!(m["phases"], c.phases(), "{name}");
            let p = MethodParams::default().for_method(name);
            if let Some(d) = m["defaults"].get("density") {
                assert_eq!(d.as_f64(), p.density, "{name}");
            }
            if let Some(r) = m["defaults"].get("min_compression_rate") {
                assert_eq!(r.as_f64(), p.min_compression_rate, "{name}");
            }
            if let Some(r) = m["defaults"].get("rank") {
                assert_eq!(r.as_u64(), Some(p.rank as u64), "{name}");
            }
            let lists = m["device_kernels"].as_array().unwrap();
            assert_eq!(lists.len(), 2 * c.rounds() * c.phases(), "{name}");
            assert!(
                lists
                    .iter()
                    .any(|l| !l["kernels"].as_array().unwrap().is_empty()),
                "{name}"
            );
        }
        assert_eq!(j["default_density"], params::DEFAULT_DENSITY);
        // Parameter defaults as the field types print them (f32 0.9, not 0.89999...).
        let momentum = j["params"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["key"] == "momentum")
            .unwrap();
        assert_eq!(momentum["default"].to_string(), "0.9");
        assert_eq!(momentum["methods"], json!(["dgc"]));
        assert!(methods_table().contains("topk: exact top-k"));
    }
}
