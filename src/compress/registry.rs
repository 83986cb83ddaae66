//! Method registry: CLI name -> constructor. Adding a method = one line here.

use super::{
    acpsgd::AcpSgd, dgc::Dgc, marsit::Marsit, powersgd::PowerSgd, qsgd::Qsgd, signsgd::SignSgd,
    sketch::Sketch, ssgd::Ssgd, topk::TopK,
};
use super::{
    Aggregation, CompressError, Compressor, FusionSizing, MethodParams, Result, WorkerCtx,
};

/// Names accepted by `--methods`, in the order reports list them.
pub const METHODS: &[&str] = &[
    "ssgd",
    "signsgd",
    "signsgd-mv",
    "topk",
    "dgc",
    "powersgd",
    "acpsgd",
    "marsit",
    "sketch",
    "qsgd",
];

/// Build the compressor `name` for this worker.
/// What method `name` sizes its fusion buckets on for tensors of `shapes` (given in the
/// order buckets are filled, backward order in e2e): ACP-SGD its compressed factors
/// ([`super::acpsgd::fusion_sizing`]), every other method its fp32 gradient bytes.
/// The engine and the simulator both plan with this, through `schedule::plan::phase_buckets`.
pub fn fusion_sizing(name: &str, p: &MethodParams, shapes: &[(usize, usize)]) -> FusionSizing {
    match name {
        "acpsgd" => super::acpsgd::fusion_sizing(p, shapes),
        _ => FusionSizing::gradient_bytes(shapes),
    }
}

pub fn build(name: &str, p: &MethodParams, ctx: WorkerCtx) -> Result<Box<dyn Compressor>> {
    Ok(match name {
        "ssgd" => Box::new(Ssgd::new(p, ctx)?),
        "topk" => Box::new(TopK::new(p, ctx)?),
        "dgc" => Box::new(Dgc::new(p, ctx)?),
        "powersgd" => Box::new(PowerSgd::new(p, ctx)?),
        "acpsgd" => Box::new(AcpSgd::new(p, ctx)?),
        "signsgd" => Box::new(SignSgd::new(p, ctx, false)?),
        "signsgd-mv" => Box::new(SignSgd::new(p, ctx, true)?),
        "marsit" => Box::new(Marsit::new(p, ctx)?),
        "sketch" => Box::new(Sketch::new(p, ctx)?),
        "qsgd" => Box::new(Qsgd::new(p, ctx)?),
        _ => return Err(unknown(name)),
    })
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
    build(
        name,
        &MethodParams::default(),
        WorkerCtx {
            rank: 0,
            world_size: 1,
            seed: 0,
        },
    )
    .map(|c| c.aggregation())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_method_builds_with_defaults_and_names_itself() {
        for &m in METHODS {
            let c = build(
                m,
                &MethodParams::default(),
                WorkerCtx {
                    rank: 0,
                    world_size: 2,
                    seed: 1,
                },
            )
            .unwrap();
            assert_eq!(c.name(), m);
        }
        assert!(build(
            "nope",
            &MethodParams::default(),
            WorkerCtx {
                rank: 0,
                world_size: 1,
                seed: 0
            }
        )
        .is_err());
    }
}
