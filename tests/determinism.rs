//! Determinism of every compressor in `registry::METHODS`.
//!
//! (a) Two independent instances with the same `WorkerCtx`, fed the same seeded
//!     gradients for 3 steps (begin_step; per round compress, feedback, decompress of a
//!     one-worker `Received` built from the instance's own wire, as micro-compress does),
//!     produce bit-identical wires at every step and round, and bit-identical outputs.
//! (b) Cross-rank: methods whose algorithm needs the same randomness on every worker
//!     (powersgd/acpsgd initial factors, sketch hashes, dgc's (seed, step, tensor) sample,
//!     the deterministic topk/ssgd/signsgd/signsgd-mv/marsit encoders) give identical
//!     wires for the same input whatever the rank. Methods with per-worker noise (qsgd's
//!     stochastic rounding, marsit's ring-merge masks) give different results on
//!     different ranks and repeat exactly on the same rank.
//!
//! Wires are compared section by section: `sum_f32` through `f32::to_bits`, `gather_u32`
//! and `ring_u32` as words.

use gradcomp::comm::exchange::received_alone;
use gradcomp::compress::{registry, Compressor, MethodParams, Wire, WireLen, WorkerCtx};
use gradcomp::measure::shape::Shape;
use gradcomp::measure::tensors::gradient;
use ndarray::Array2;

const SEED: u64 = 0x5EED_2024;
const STEPS: u64 = 3;
const WORLD: usize = 4;

/// A matrix, a 1-D tensor, and a matrix of d >= 65536 (topk's sampled-threshold path,
/// dgc's random-start strided sample).
const SHAPES: &[Shape] = &[
    Shape { rows: 64, cols: 48 },
    Shape {
        rows: 1,
        cols: 1000,
    },
    Shape {
        rows: 256,
        cols: 300,
    },
];

/// Methods whose wire must not depend on the rank (same input => same wire).
const SHARED_RANDOMNESS: &[&str] = &[
    "ssgd",
    "signsgd",
    "signsgd-mv",
    "topk",
    "dgc",
    "powersgd",
    "acpsgd",
    "marsit",
    "sketch",
    // Its indices come from a stream every worker seeds alike (run seed, step, tensor).
    "randomk",
];
/// Methods whose wire carries per-worker noise.
const PER_WORKER_NOISE: &[&str] = &["qsgd"];

/// Hyper-parameter sets: the defaults, and one that turns on every optional path
/// (Power-SGD dense warm-up, DGC warm-up + Nesterov + clipping, an even sketch, few QSGD
/// levels, higher density so more entries move).
fn param_sets() -> Vec<(&'static str, MethodParams)> {
    let tuned = MethodParams {
        density: Some(0.05),
        rank: 2,
        min_compression_rate: Some(1.0),
        start_iter: 1,
        momentum: 0.5,
        nesterov: true,
        clip_norm: 0.01,
        warmup_steps_per_epoch: 1,
        sketch_rows: 4,
        sketch_cols_per_k: 2.0,
        qsgd_levels: 15,
    };
    vec![("default", MethodParams::default()), ("tuned", tuned)]
}

/// One wire, bit for bit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct WireBits {
    sum_f32: Vec<u32>,
    gather_u32: Vec<u32>,
    ring_u32: Vec<u32>,
}

impl WireBits {
    fn of(w: &Wire) -> WireBits {
        WireBits {
            sum_f32: w.sum_f32.iter().map(|x| x.to_bits()).collect(),
            gather_u32: w.gather_u32.clone(),
            ring_u32: w.ring_u32.clone(),
        }
    }
    fn words(&self) -> usize {
        self.sum_f32.len() + self.gather_u32.len() + self.ring_u32.len()
    }
}

/// Every wire (per step and round) and every output (per step) of one run.
struct Trace {
    label: String,
    wires: Vec<(u64, usize, WireBits)>,
    outs: Vec<Vec<u32>>,
}

/// Run `method` for STEPS steps on the seeded gradients of `input_rank`, the way
/// micro-compress drives a compressor on one rank.
fn run(
    method: &str,
    pname: &str,
    p: &MethodParams,
    ctx: WorkerCtx,
    shape: Shape,
    input_rank: usize,
) -> Trace {
    let label = format!("{method} [{pname}] {shape} ctx={ctx:?} input_rank={input_rank}");
    let mut c: Box<dyn Compressor> =
        registry::build(method, p, ctx).unwrap_or_else(|e| panic!("{label}: build: {e}"));
    assert_eq!(c.name(), method, "{label}: name");
    c.register(0, shape.rows, shape.cols)
        .unwrap_or_else(|e| panic!("{label}: register: {e}"));
    let caps: Vec<WireLen> = (0..c.rounds()).map(|r| c.wire_capacity(0, r)).collect();
    let mut wire = Wire::default();
    wire.reserve(caps.iter().copied().fold(WireLen::default(), WireLen::max));
    let mut out = Array2::<f32>::zeros((shape.rows, shape.cols));
    let mut counts = vec![0usize; 1];
    let (mut wires, mut outs) = (Vec::new(), Vec::new());
    for step in 0..STEPS {
        let g = gradient(shape, SEED, step as usize, input_rank);
        c.begin_step(step);
        for (round, &cap) in caps.iter().enumerate() {
            c.compress(0, round, g.view(), &mut wire)
                .unwrap_or_else(|e| panic!("{label}: step {step} round {round}: compress: {e}"));
            c.feedback(0, round)
                .unwrap_or_else(|e| panic!("{label}: step {step} round {round}: feedback: {e}"));
            assert!(
                wire.sum_f32.len() <= cap.sum_f32 && wire.gather_u32.len() <= cap.gather_u32 && wire.ring_u32.len() <= cap.ring_u32,
                "{label}: step {step} round {round}: wire ({}, {}, {}) exceeds wire_capacity {cap:?}",
                wire.sum_f32.len(),
                wire.gather_u32.len(),
                wire.ring_u32.len()
            );
            wires.push((step, round, WireBits::of(&wire)));
            counts[0] = wire.gather_u32.len();
            c.decompress(0, round, &received_alone(&wire, &counts), out.view_mut())
                .unwrap_or_else(|e| panic!("{label}: step {step} round {round}: decompress: {e}"));
        }
        outs.push(out.iter().map(|x| x.to_bits()).collect());
    }
    let total: usize = wires.iter().map(|(_, _, w)| w.words()).sum();
    assert!(total > 0, "{label}: sent nothing in {STEPS} steps");
    Trace { label, wires, outs }
}

/// First index where two word slices differ, for readable messages.
fn first_diff(a: &[u32], b: &[u32]) -> String {
    if a.len() != b.len() {
        return format!("lengths {} vs {}", a.len(), b.len());
    }
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at word {i}: {:#010x} vs {:#010x}",
            a[i], b[i]
        ),
        None => "equal".into(),
    }
}

/// Assert two traces are bit-identical, wire section by wire section, then outputs.
fn assert_same(a: &Trace, b: &Trace, what: &str) {
    assert_eq!(
        a.wires.len(),
        b.wires.len(),
        "{what}: {} vs {}: number of rounds",
        a.label,
        b.label
    );
    for ((s, r, wa), (_, _, wb)) in a.wires.iter().zip(&b.wires) {
        for (sec, x, y) in [
            ("sum_f32", &wa.sum_f32, &wb.sum_f32),
            ("gather_u32", &wa.gather_u32, &wb.gather_u32),
            ("ring_u32", &wa.ring_u32, &wb.ring_u32),
        ] {
            assert!(
                x == y,
                "{what}: {} vs {}: step {s} round {r}: wire.{sec} differs ({})",
                a.label,
                b.label,
                first_diff(x, y)
            );
        }
    }
    for (s, (oa, ob)) in a.outs.iter().zip(&b.outs).enumerate() {
        assert!(
            oa == ob,
            "{what}: {} vs {}: step {s}: decompressed output differs ({})",
            a.label,
            b.label,
            first_diff(oa, ob)
        );
    }
}

#[test]
fn every_method_is_classified() {
    for m in registry::METHODS {
        let n = SHARED_RANDOMNESS.contains(m) as usize + PER_WORKER_NOISE.contains(m) as usize;
        assert_eq!(
            n, 1,
            "method {m}: list it in exactly one of SHARED_RANDOMNESS / PER_WORKER_NOISE"
        );
    }
    for m in SHARED_RANDOMNESS.iter().chain(PER_WORKER_NOISE) {
        assert!(
            registry::METHODS.contains(m),
            "method {m} is not in registry::METHODS"
        );
    }
}

/// (a) Same WorkerCtx, same input: bit-identical wires and outputs, for every method.
#[test]
fn same_ctx_same_input_gives_identical_wires() {
    for &method in registry::METHODS {
        for (pname, p) in param_sets() {
            for &shape in SHAPES {
                for rank in [0, 2] {
                    let ctx = WorkerCtx {
                        rank,
                        world_size: WORLD,
                        seed: SEED,
                    };
                    let a = run(method, pname, &p, ctx, shape, rank);
                    let b = run(method, pname, &p, ctx, shape, rank);
                    assert_same(
                        &a,
                        &b,
                        &format!("method {method}: two instances with the same ctx"),
                    );
                }
            }
        }
    }
}

/// (a') Interleaved instances (A step, B step, ...): no shared hidden state between
/// instances, e.g. a global RNG or scratch buffer.
#[test]
fn interleaved_instances_do_not_interfere() {
    let shape = SHAPES[0];
    for &method in registry::METHODS {
        let p = MethodParams::default();
        let ctx = WorkerCtx {
            rank: 1,
            world_size: WORLD,
            seed: SEED,
        };
        let mut cs: Vec<Box<dyn Compressor>> = (0..2)
            .map(|_| registry::build(method, &p, ctx).unwrap())
            .collect();
        let mut wires = [Wire::default(), Wire::default()];
        let mut outs = vec![Array2::<f32>::zeros((shape.rows, shape.cols)); 2];
        for c in cs.iter_mut() {
            c.register(0, shape.rows, shape.cols).unwrap();
        }
        let mut counts = vec![0usize; 1];
        for step in 0..STEPS {
            let g = gradient(shape, SEED, step as usize, 1);
            for c in cs.iter_mut() {
                c.begin_step(step);
            }
            for round in 0..cs[0].rounds() {
                for (c, wire) in cs.iter_mut().zip(wires.iter_mut()) {
                    c.compress(0, round, g.view(), wire).unwrap();
                }
                for c in cs.iter_mut() {
                    c.feedback(0, round).unwrap();
                }
                let (a, b) = (WireBits::of(&wires[0]), WireBits::of(&wires[1]));
                assert!(a == b, "method {method}: interleaved instances: step {step} round {round}: wires differ");
                for i in 0..2 {
                    counts[0] = wires[i].gather_u32.len();
                    cs[i]
                        .decompress(
                            0,
                            round,
                            &received_alone(&wires[i], &counts),
                            outs[i].view_mut(),
                        )
                        .unwrap();
                }
            }
            let bits = |o: &Array2<f32>| o.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&outs[0]) == bits(&outs[1]),
                "method {method}: interleaved instances: step {step}: outputs differ"
            );
        }
    }
}

/// (b) Shared randomness: every rank encodes the same input into the same wire.
#[test]
fn shared_randomness_methods_are_rank_independent() {
    for &method in SHARED_RANDOMNESS {
        for (pname, p) in param_sets() {
            for &shape in SHAPES {
                let base = run(
                    method,
                    pname,
                    &p,
                    WorkerCtx {
                        rank: 0,
                        world_size: WORLD,
                        seed: SEED,
                    },
                    shape,
                    0,
                );
                for rank in 1..WORLD {
                    let other = run(
                        method,
                        pname,
                        &p,
                        WorkerCtx {
                            rank,
                            world_size: WORLD,
                            seed: SEED,
                        },
                        shape,
                        0,
                    );
                    assert_same(
                        &base,
                        &other,
                        &format!("method {method}: rank 0 vs rank {rank} on the same input"),
                    );
                }
            }
        }
    }
}

/// (b) Per-worker noise (qsgd): different ranks quantise the same input differently at
/// every step; the same rank repeats exactly.
#[test]
fn per_worker_noise_methods_differ_across_ranks_and_repeat_per_rank() {
    for &method in PER_WORKER_NOISE {
        for (pname, p) in param_sets() {
            for &shape in SHAPES {
                let traces: Vec<Trace> = (0..WORLD)
                    .map(|rank| {
                        run(
                            method,
                            pname,
                            &p,
                            WorkerCtx {
                                rank,
                                world_size: WORLD,
                                seed: SEED,
                            },
                            shape,
                            0,
                        )
                    })
                    .collect();
                for (rank, trace) in traces.iter().enumerate() {
                    let again = run(
                        method,
                        pname,
                        &p,
                        WorkerCtx {
                            rank,
                            world_size: WORLD,
                            seed: SEED,
                        },
                        shape,
                        0,
                    );
                    assert_same(
                        trace,
                        &again,
                        &format!("method {method}: rank {rank} repeated"),
                    );
                }
                for a in 0..WORLD {
                    for b in a + 1..WORLD {
                        for ((s, r, wa), (_, _, wb)) in traces[a].wires.iter().zip(&traces[b].wires)
                        {
                            assert!(
                                wa != wb,
                                "method {method} [{pname}] {shape}: ranks {a} and {b} sent identical wires at step {s} round {r} for the same input (per-worker noise expected)"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Marsit's encoder is rank-independent (above) but its ring merge draws per-worker
/// masks seeded by (seed, step, tensor, rank, offset, hops): same rank => same merge,
/// different rank => different merge.
#[test]
fn marsit_ring_merge_is_per_rank_and_reproducible() {
    let shape = Shape { rows: 64, cols: 48 };
    // The f32 scale, then the sign bits.
    let words = 1 + shape.numel().div_ceil(32);
    let merge = |rank: usize, step: u64, aggregated: usize| -> Vec<u32> {
        let ctx = WorkerCtx {
            rank,
            world_size: WORLD,
            seed: SEED,
        };
        let mut c = registry::build("marsit", &MethodParams::default(), ctx).unwrap();
        c.register(0, shape.rows, shape.cols).unwrap();
        let mut wire = Wire::default();
        for s in 0..=step {
            c.begin_step(s);
            c.compress(0, 0, gradient(shape, SEED, s as usize, 0).view(), &mut wire)
                .unwrap();
        }
        let own_bits = wire.ring_u32.clone();
        assert_eq!(own_bits.len(), words, "method marsit: ring words");
        // Incoming bits are the complement of ours, so every mask bit shows.
        let incoming: Vec<u32> = own_bits.iter().map(|w| !w).collect();
        let mut own = own_bits.clone();
        c.ring_merge(0, aggregated, 0, &incoming, &mut own).unwrap();
        assert_ne!(own, own_bits, "method marsit: ring_merge kept every own bit (rank {rank}, step {step}, aggregated {aggregated})");
        own
    };
    for step in 0..STEPS {
        for aggregated in 1..WORLD {
            let r0 = merge(0, step, aggregated);
            assert_eq!(
                r0,
                merge(0, step, aggregated),
                "method marsit: ring_merge not reproducible (step {step}, aggregated {aggregated})"
            );
            for rank in 1..WORLD {
                assert_ne!(r0, merge(rank, step, aggregated), "method marsit: ranks 0 and {rank} drew the same ring_merge mask (step {step}, aggregated {aggregated})");
            }
        }
    }
}

/// The seed is actually used where a method draws random numbers (otherwise the
/// cross-rank test above would hold vacuously), and topk's seeded threshold sample
/// changes the speed, never the selection.
#[test]
fn seed_dependence() {
    let p = MethodParams::default();
    let m = Shape { rows: 64, cols: 48 };
    let ctx = |seed| WorkerCtx {
        rank: 0,
        world_size: WORLD,
        seed,
    };
    for method in ["powersgd", "acpsgd", "sketch", "qsgd"] {
        let a = run(method, "default", &p, ctx(SEED), m, 0);
        let b = run(method, "default", &p, ctx(SEED + 1), m, 0);
        assert!(
            a.wires[0].2 != b.wires[0].2,
            "method {method}: seeds {SEED} and {} gave the same step-0 wire",
            SEED + 1
        );
    }
    for &shape in SHAPES {
        let a = run("topk", "default", &p, ctx(SEED), shape, 0);
        let b = run("topk", "default", &p, ctx(SEED + 1), shape, 0);
        assert_same(
            &a,
            &b,
            "method topk: the threshold sample's seed must not change the result",
        );
    }
}
