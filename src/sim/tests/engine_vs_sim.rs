//! (The loopback schedule test; `make check` runs it.) The e2e schedule of every method x fusion x pipelining (x collective at 3 ranks) runs
//! on the in-process loopback backend at 1-4 ranks, without mpirun, and the engine runs
//! the same operations with the same messages as the simulator prices
//! (docs/architecture.md, "The e2e iteration").

use crate::comm::exchange::CollectiveMode;
use crate::comm::loopback;
use crate::compress::{registry, MethodParams, WireLen};
use crate::config::ComputeMode;
use crate::engine::{self, E2eSetup, TensorSpec};
use crate::measure::stats::Timing;
use crate::schedule::plan::Fusion;
use crate::schedule::{Executed, Op};
use crate::sim::{self, CostModel, SimCase, SimWorkload};

/// A small CNN-like model: conv weights and biases, then a classifier (registration order).
fn model() -> Vec<TensorSpec> {
    [
        (32, 72),
        (32, 1),
        (64, 288),
        (64, 1),
        (64, 576),
        (10, 256),
        (10, 1),
    ]
    .iter()
    .enumerate()
    .map(|(i, &(rows, cols))| TensorSpec {
        name: format!("t{i}"),
        rows,
        cols,
    })
    .collect()
}

fn params() -> MethodParams {
    MethodParams {
        density: Some(0.01),
        ..MethodParams::default()
    }
}

/// `(e2e method, compressor, merged)`: every registry method and the two merged ones.
fn methods() -> Vec<(&'static str, &'static str, bool)> {
    let mut v: Vec<_> = registry::METHODS.iter().map(|&m| (m, m, false)).collect();
    v.push(("omgs", "topk", true));
    v.push(("sketch-fusion", "sketch", true));
    v
}

const FUSIONS: [&str; 6] = ["none", "16KiB", "single", "mgwfbp", "omgs", "layerfusion"];

/// The same section lengths; a gather section the method does not fix in advance (DGC's
/// pairs) may be shorter than the capacity the simulator prices. An exchange also agrees
/// on whether lengths are exchanged (`gather_exact`, declared per bucket).
fn same_wire(op: Op, engine: WireLen, sim: WireLen) -> bool {
    let exchange = matches!(op, Op::Exchange { .. });
    engine.sum_f32 == sim.sum_f32
        && engine.ring_u32 == sim.ring_u32
        && (!exchange || engine.gather_exact == sim.gather_exact)
        && if sim.gather_exact {
            engine.gather_u32 == sim.gather_u32
        } else {
            engine.gather_u32 <= sim.gather_u32
        }
}

fn compare(label: &str, engine: &[Vec<Executed>], sim: &[Vec<Executed>]) {
    assert!(!engine.is_empty(), "{label}: the engine ran nothing");
    for (p, e) in engine.iter().enumerate() {
        let s = &sim[p % sim.len()];
        let ops = |x: &[Executed]| x.iter().map(|x| x.op).collect::<Vec<Op>>();
        assert_eq!(ops(e), ops(s), "{label}: phase {p}: operations differ");
        for (a, b) in e.iter().zip(s) {
            assert!(
                same_wire(a.op, a.wire, b.wire),
                "{label}: phase {p}: {:?} sent {:?}, the simulator priced {:?}",
                a.op,
                a.wire,
                b.wire
            );
        }
    }
}

/// Run one case on `n` loopback ranks and in the simulator; compare.
fn check(
    n: usize,
    method: &str,
    base: &str,
    merge: bool,
    fusion: Fusion,
    pipelining: bool,
    mode: CollectiveMode,
) {
    let tensors = model();
    let bwd_s = vec![0.0; tensors.len()];
    let params = params();
    let label = format!(
        "{method}/{fusion}/pipelining={pipelining}/{}/n={n}",
        mode.name()
    );
    let runs = loopback::run(n, |world| {
        let setup = E2eSetup {
            tensors: &tensors,
            bwd_s: &bwd_s,
            fwd_s: 0.0,
            method: base,
            params: &params,
            seed: 1,
            fusion,
            pipelining,
            collective: mode,
            compute: ComputeMode::None,
            merge,
            cost_comm: None,
            planner_costs: None,
            compress_on: crate::devcost::CompressOn::Host,
            device_costs: None,
            planned: None,
        };
        // 3 iterations: both phases of a two-phase method (ACP-SGD) run.
        engine::run(&world, &setup, Timing::fixed(2), 1, None)
            .unwrap_or_else(|e| panic!("{label}: {e}"))
    });
    // Every rank ran the same buckets and sent the same wire bytes (maxed over ranks).
    for r in &runs[1..] {
        assert_eq!(r.plan, runs[0].plan, "{label}: ranks planned differently");
        assert_eq!(r.wire_bytes, runs[0].wire_bytes, "{label}");
    }
    let e = &runs[0];
    let workload = SimWorkload {
        model: "test".into(),
        tensors: tensors.clone(),
        bwd_s: bwd_s.clone(),
        fwd_s: 0.0,
        batch: 1,
        device: "none".into(),
    };
    let mut case = SimCase::new(
        workload,
        method,
        fusion,
        pipelining,
        mode,
        n,
        params.clone(),
    );
    if matches!(case.fusion, Fusion::Planner(_)) {
        // The planners' costs differ (calibrated vs modelled): replay the engine's plan.
        case.fixed_plan = Some(e.plan.clone());
    }
    let costs = CostModel::preset("10gbe").expect("preset");
    let s = sim::simulate(&case, &costs).unwrap_or_else(|err| panic!("{label}: {err}"));
    assert_eq!(e.plan, s.plan, "{label}: buckets differ");
    compare(&label, &e.executed, &s.executed);
    // The reported bytes per step, through the bucket path: S-SGD sends every gradient
    // once, 4 bytes per element, whatever the buckets (closed form); every method sends
    // what the simulator prices (DGC's thresholded pairs: at most that).
    if method == "ssgd" {
        let d: usize = tensors.iter().map(|t| t.rows * t.cols).sum();
        assert_eq!(e.wire_bytes, 4 * d as u64, "{label}: e2e wire_bytes");
    }
    if base == "dgc" {
        assert!(
            e.wire_bytes <= s.wire_bytes,
            "{label}: {} > {}",
            e.wire_bytes,
            s.wire_bytes
        );
    } else {
        assert_eq!(
            e.wire_bytes, s.wire_bytes,
            "{label}: e2e vs simulated wire_bytes"
        );
    }
}

fn sweep(n: usize, every_collective: bool) {
    for (method, base, merge) in methods() {
        let fusions: &[&str] = if merge { &["none"] } else { &FUSIONS };
        for f in fusions {
            let fusion = Fusion::parse(f).expect("fusion");
            for pipelining in [false, true] {
                let modes: Vec<CollectiveMode> = if every_collective {
                    ["auto", "allreduce", "allgather", "ps", "ring"]
                        .iter()
                        .filter_map(|m| CollectiveMode::parse(m))
                        .collect()
                } else {
                    vec![CollectiveMode::Native]
                };
                for mode in modes {
                    let agg = registry::build(
                        base,
                        &params(),
                        crate::compress::WorkerCtx {
                            rank: 0,
                            world_size: n,
                            seed: 1,
                        },
                    )
                    .expect("method builds")
                    .aggregation();
                    if mode.supports(agg).is_err() {
                        continue;
                    }
                    check(n, method, base, merge, fusion, pipelining, mode);
                }
            }
        }
    }
}

#[test]
fn every_method_fusion_and_pipelining_at_1_rank() {
    sweep(1, false);
}

#[test]
fn every_method_fusion_and_pipelining_at_2_ranks() {
    sweep(2, false);
}

#[test]
fn every_method_fusion_pipelining_and_collective_at_3_ranks() {
    sweep(3, true);
}

#[test]
fn every_method_fusion_and_pipelining_at_4_ranks() {
    sweep(4, false);
}
