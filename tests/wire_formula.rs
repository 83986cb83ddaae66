//! Every method's e2e `wire_bytes` against the closed form of its paper (issue 50, item 3).
//!
//! `wire_bytes` is the bytes one worker puts into the collectives per step, all buckets
//! and rounds, mean over the timed steps rounded to a byte (docs/csv-schema.md, e2e.csv;
//! docs/methods.md, "How to read the result"): a worker's contribution, not the link
//! traffic of the collective, so it does not change with the world size (checked at 2, 3
//! and 4 ranks, Marsit's ring included). Each method's bytes are written here again from
//! its paper or reference code, never read from the compressor's declared wire
//! (`wire_capacity`, which is what the simulator charges), and compared with what the
//! engine counted while running on the loopback backend, through the bucket path (fusion
//! `none`, `single`, a 16 KiB size threshold, and the merged buckets of OMGS and
//! Sketch-Fusion), per step and per exchange (bucket and round).
//!
//! One part is gradcomp's own framing, in no paper: an all-gather method's bucket ends
//! with a trailer of one u32 length per compression unit in it, which the receivers split
//! the concatenated sections with (docs/csv-schema.md, e2e.csv `wire_bytes`: "includes
//! per-bucket trailers of all-gather methods"). It is written here as that rule.

use gradcomp::comm::exchange::CollectiveMode;
use gradcomp::comm::loopback;
use gradcomp::compress::MethodParams;
use gradcomp::config::ComputeMode;
use gradcomp::engine::{self, E2eMeasurement, E2eSetup, TensorSpec};
use gradcomp::measure::stats::Timing;
use gradcomp::schedule::plan::{Fusion, PlannerKind};
use gradcomp::schedule::planner::FixedCosts;
use gradcomp::schedule::Op;

/// Bytes of one f32 value, one u32 index or one u32 word of packed bits.
const WORD: u64 = 4;
/// Density of Top-k and DGC when none is given: DGC's 0.1% (Lin et al., ICLR 2018,
/// Sec. 4: "99.9% of the gradient exchange is redundant"; docs/methods.md,
/// "Hyper-parameters").
const SPARSE_DENSITY: f64 = 0.001;
/// Density of Count Sketch when none is given: FetchSGD's default `k` over its default
/// model (kiddyboots216/CommEfficient `CommEfficient/utils.py` at 02d621e, line 105,
/// `--k` 50000, over ResNet-9's 6,573,120 parameters), to two digits.
const SKETCH_DENSITY: f64 = 0.0076;

/// A small CNN's gradients as the compressors see them (rows x cols, registration order):
/// conv weights as `out x (in k k)`, 1-D biases and norms as `1 x n`. The sizes are chosen
/// so the closed forms round: `d` not a multiple of 32 (sign and code words pad),
/// `rho d` not whole (k rounds up), a matrix Power-SGD leaves raw (`head`), one it
/// compresses at rank 4 but not at rank 16 with rate 2 (`fc1`: rows < rank).
const MODEL: &[(&str, usize, usize)] = &[
    ("conv1.weight", 16, 27),
    ("conv1.bias", 1, 16),
    ("conv2.weight", 32, 144),
    ("bn2.weight", 1, 32),
    ("fc1.weight", 10, 800),
    ("fc1.bias", 1, 10),
    ("head.weight", 4, 6),
];

fn specs(shapes: &[(&str, usize, usize)]) -> Vec<TensorSpec> {
    shapes
        .iter()
        .map(|&(name, rows, cols)| TensorSpec {
            name: name.into(),
            rows,
            cols,
        })
        .collect()
}

/// `k = ceil(rho d)`, at least one element: the kept count of Top-k (Stich et al.,
/// NeurIPS 2018, "top_k"), DGC (Lin et al., ICLR 2018, Sec. 3: `num_selects =
/// ceil(numel * ratio)` in synxlin/deep-gradient-compression `dgc/compression.py`) and
/// the heavy hitters of Count Sketch (FetchSGD, Rothchild et al., ICML 2020, Alg. 1,
/// "top-k").
fn kept(rho: f64, d: usize) -> u64 {
    ((rho * d as f64).ceil() as u64).clamp(1, d as u64)
}

/// `ceil(log2(x))` for `x >= 1`, by doubling (no floating point).
fn ceil_log2(x: u64) -> u64 {
    let mut bits = 0;
    while (1u64 << bits) < x {
        bits += 1;
    }
    bits
}

/// Sign words: one bit per element, 32 to a word.
fn sign_words(d: usize) -> u64 {
    (d as u64).div_ceil(32)
}

/// DGC's exponential warm-up (Lin et al., ICLR 2018, Sec. 3.4, "Warm-up training": the
/// sparsity rises 75%, 93.75%, 98.4375%, 99.6% over the first four epochs, then the
/// final density): the density of `step` with `per_epoch` steps per warm-up epoch
/// (0: no warm-up), never below the final density.
fn dgc_density(rho: f64, per_epoch: u64, step: u64) -> f64 {
    // Densities 25%, 6.25%, 1.5625%, 0.4% (sparsity 75%, 93.75%, 98.4375%, 99.6%).
    let warm = [0.25, 0.0625, 0.015625, 0.004];
    if per_epoch == 0 {
        return rho;
    }
    match warm.get((step / per_epoch) as usize) {
        Some(&w) => f64::max(w, rho),
        None => rho,
    }
}

/// Low-rank rank of a `rows x cols` matrix for `method`, or `None` when it travels raw.
/// Power-SGD: PyTorch's `powerSGD_hook` (`torch/distributed/algorithms/ddp_comm_hooks/
/// powerSGD_hook.py`, `_should_compress`: compressed size `(rows + cols) min(rows, cols,
/// rank)`, compressed only if that times `min_compression_rate`, default 2, is below
/// `rows cols`; 1-D tensors always raw). ACP-SGD: every tensor of two or more dimensions
/// (lzhangbv/acpsgd `acpsgd.py` at 4f560a2, line 84 `if p.ndimension() > 1`), that is a
/// rate of 0 unless one is given.
fn lowrank(method: &str, rows: usize, cols: usize, p: &MethodParams) -> Option<u64> {
    let rate = p
        .min_compression_rate
        .unwrap_or(if method == "acpsgd" { 0.0 } else { 2.0 });
    let r = p.rank.min(rows).min(cols);
    if rows < 2 || r == 0 {
        return None;
    }
    let compressed = ((rows + cols) * r) as f64;
    (compressed * rate < (rows * cols) as f64).then_some(r as u64)
}

/// Whether `method` exchanges by all-gather (its buckets carry the length trailer).
fn gathers(method: &str) -> bool {
    matches!(method, "topk" | "dgc" | "signsgd" | "signsgd-mv" | "qsgd")
}

/// Rounds per step (Power-SGD: P then Q; Count Sketch: the sketch then the candidates'
/// exact values).
fn rounds(method: &str) -> usize {
    match method {
        "powersgd" | "sketch" => 2,
        _ => 1,
    }
}

/// Bytes one worker sends for one compression unit (`rows x cols`) of `method` in round
/// `round` of step `step`, from the papers.
fn unit_bytes(
    method: &str,
    p: &MethodParams,
    (rows, cols): (usize, usize),
    step: u64,
    round: usize,
) -> u64 {
    let d = rows * cols;
    let dense = WORD * d as u64;
    match (method, round) {
        // S-SGD: the fp32 gradient, all-reduced.
        ("ssgd", 0) => dense,
        // Top-k (Stich et al. 2018; OMGS-SGD's merged buckets, Shi et al., INFOCOM 2020):
        // k (u32 index, f32 value) pairs.
        ("topk", 0) => 2 * WORD * kept(p.density.unwrap_or(SPARSE_DENSITY), d),
        // DGC (Lin et al. 2018): k_t (u32 index, f32 value) pairs at the step's warm-up
        // density; 1-D tensors all-reduced dense, as the reference compresses tensors of
        // two or more dimensions only (`dgc/compression.py`, `initialize`: `if
        // tensor.dim() > 1`).
        ("dgc", 0) if rows > 1 => {
            let rho = dgc_density(
                p.density.unwrap_or(SPARSE_DENSITY),
                p.warmup_steps_per_epoch,
                step,
            );
            2 * WORD * kept(rho, d)
        }
        ("dgc", 0) => dense,
        // EF-SignSGD (Karimireddy et al., ICML 2019, Alg. 1): the scale `||p||_1 / d` as
        // one f32 and one sign bit per element.
        ("signsgd", 0) => WORD * (1 + sign_words(d)),
        // signSGD with majority vote (Bernstein et al., ICML 2018, Alg. 3): the sign bits.
        ("signsgd-mv", 0) => WORD * sign_words(d),
        // QSGD (Alistarh et al., NeurIPS 2017, Sec. 3.1): `||g||_2` as one f32, and per
        // element a sign bit and a level in `0..=s`, `ceil(log2(s + 1))` bits, at fixed
        // width (GRACE's `qsgd.py` keeps one int8 per element at s = 127), packed.
        ("qsgd", 0) => {
            let b = 1 + ceil_log2(u64::from(p.qsgd_levels) + 1);
            WORD * (1 + (b * d as u64).div_ceil(32))
        }
        // Power-SGD (Vogels et al., NeurIPS 2019, Alg. 1): round 0 all-reduces P = M Q
        // (rows x r), round 1 Q = M^T P (cols x r): `4 r (rows + cols)` a step. Raw
        // tensors, and every tensor before `start_iter` (powerSGD_hook's
        // `start_powerSGD_iter`: a vanilla all-reduce), in round 0 only.
        ("powersgd", round) => match lowrank("powersgd", rows, cols, p) {
            Some(r) if step >= p.start_iter => WORD * r * [rows, cols][round] as u64,
            _ if round == 0 => dense,
            _ => 0,
        },
        // ACP-SGD (Zhang et al., ICDCS 2023, Sec. IV): one factor a step, alternating,
        // P (rows x r) on even 0-based steps and Q (cols x r) on odd ones; raw tensors
        // every step.
        ("acpsgd", 0) => match lowrank("acpsgd", rows, cols, p) {
            Some(r) => WORD * r * [rows, cols][(step % 2) as usize] as u64,
            None => dense,
        },
        // Marsit (Wu et al. 2022): one sign bit per element through the ring, the f32
        // scale riding in the ring message's first word.
        ("marsit", 0) => WORD * (1 + sign_words(d)),
        // Count Sketch (Charikar et al. 2002) as in Sketched-SGD (Ivkin et al., NeurIPS
        // 2019, Alg. 1, with its second round): round 0 the r x c table,
        // `c = ceil(cols_per_k k)`; round 1 the exact values of the k heavy hitters. A
        // tensor whose two rounds would carry at least its own d words travels raw, as
        // Sketched-SGD's unsketched parameters (dhroth/sketchedsgd
        // `sketched_optimizer.py`, `sketchMask`, summed exactly every step): d words in
        // round 0, none in round 1.
        ("sketch", round) => {
            let k = kept(p.density.unwrap_or(SKETCH_DENSITY), d);
            let c = (p.sketch_cols_per_k * k as f64).ceil().max(1.0) as u64;
            let table = p.sketch_rows as u64 * c;
            match round {
                _ if table + k >= d as u64 => [dense, 0][round],
                0 => WORD * table,
                _ => WORD * k,
            }
        }
        // Random-k (Stich et al. 2018, rand_k; sands-lab/grace `randomk.py`, `compress`:
        // the seed `sum(name) + global_step` is every worker's, so only `[values]` is
        // returned for the all-reduce, the indices stay in `ctx`): the k f32 values.
        ("randomk", 0) => WORD * kept(p.density.unwrap_or(SPARSE_DENSITY), d),
        _ => 0,
    }
}

/// Bytes of one bucket's exchange: its units' bytes plus, for an all-gather method,
/// the trailer of one u32 length per unit.
fn bucket_bytes(
    method: &str,
    p: &MethodParams,
    units: &[(usize, usize)],
    step: u64,
    round: usize,
) -> u64 {
    let trailer = if gathers(method) {
        WORD * units.len() as u64
    } else {
        0
    };
    trailer
        + units
            .iter()
            .map(|&u| unit_bytes(method, p, u, step, round))
            .sum::<u64>()
}

/// The compression units of each bucket: its tensors, or (merged) the bucket's tensors
/// packed into one `1 x sum d` tensor. `plan`: buckets as backward positions.
fn bucket_units(
    shapes: &[(&str, usize, usize)],
    plan: &[Vec<usize>],
    merge: bool,
) -> Vec<Vec<(usize, usize)>> {
    let m = shapes.len();
    plan.iter()
        .map(|b| {
            let tensors: Vec<(usize, usize)> = b
                .iter()
                .map(|&pos| (shapes[m - 1 - pos].1, shapes[m - 1 - pos].2))
                .collect();
            if merge {
                vec![(1, tensors.iter().map(|&(r, c)| r * c).sum())]
            } else {
                tensors
            }
        })
        .collect()
}

/// PyTorch DDP's bucketing (`torch/nn/parallel/distributed.py`, `bucket_cap_mb`;
/// Horovod's fusion buffer likewise): gradients in backward order, a bucket closed once
/// it holds at least `threshold` bytes of fp32 gradients.
fn ddp_buckets(shapes: &[(&str, usize, usize)], threshold: u64) -> Vec<Vec<usize>> {
    let m = shapes.len();
    let (mut out, mut cur, mut bytes) = (Vec::new(), Vec::new(), 0u64);
    for pos in 0..m {
        let (_, rows, cols) = shapes[m - 1 - pos];
        cur.push(pos);
        bytes += WORD * (rows * cols) as u64;
        if bytes >= threshold {
            out.push(std::mem::take(&mut cur));
            bytes = 0;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// One e2e case.
#[derive(Clone)]
struct Case {
    method: &'static str,
    params: MethodParams,
    fusion: Fusion,
    merge: bool,
    warmup: u64,
    timed: u64,
}

impl Case {
    fn new(method: &'static str, params: MethodParams, fusion: Fusion) -> Case {
        Case {
            method,
            params,
            fusion,
            merge: false,
            warmup: 1,
            timed: 2,
        }
    }
}

/// Run `c` on `n` loopback ranks over `shapes`; every rank's measurement.
fn run(n: usize, shapes: &[(&str, usize, usize)], c: &Case) -> Vec<E2eMeasurement> {
    let tensors = specs(shapes);
    let bwd_s = vec![2e-4; tensors.len()];
    loopback::run(n, |world| {
        let setup = E2eSetup {
            tensors: &tensors,
            bwd_s: &bwd_s,
            fwd_s: 0.0,
            method: c.method,
            params: &c.params,
            seed: 7,
            fusion: c.fusion,
            pipelining: true,
            collective: CollectiveMode::Native,
            compute: ComputeMode::None,
            merge: c.merge,
            cost_comm: None,
            // Planner fusions plan from these costs, not a calibration (a plan that does
            // not change run to run); the bytes below follow whatever plan ran.
            planner_costs: Some(FixedCosts {
                alpha_s: 5e-4,
                beta_s_per_byte: 1e-9,
                per_element_s: 1e-9,
                fixed_s: 5e-5,
            }),
            compress_on: gradcomp::devcost::CompressOn::Host,
            device_costs: None,
            planned: None,
        };
        engine::run(&world, &setup, Timing::fixed(c.timed), c.warmup, None)
            .unwrap_or_else(|e| panic!("{} {}: {e}", c.method, c.fusion))
    })
}

/// Run `c` at `n` ranks and check, against the closed forms: `wire_bytes` (the mean
/// over the timed steps, rounded to a byte, on every rank), and per exchange of the last
/// iteration of each phase the bytes of that bucket and round. Returns `wire_bytes`.
fn check(n: usize, shapes: &[(&str, usize, usize)], c: &Case) -> u64 {
    let label = format!(
        "{} fusion {} merge {} at {n} ranks ({:?})",
        c.method, c.fusion, c.merge, c.params
    );
    let runs = run(n, shapes, c);
    let m = &runs[0];
    // The buckets that ran (phase 0): the ones the fusion rule gives, for every fusion
    // that is not a planner's and every method bucketed on its gradient bytes.
    let plan = &m.plan;
    let want_plan: Option<Vec<Vec<usize>>> = match c.fusion {
        Fusion::None => Some((0..shapes.len()).map(|i| vec![i]).collect()),
        Fusion::Single => Some(vec![(0..shapes.len()).collect()]),
        Fusion::Bytes(t) if c.method != "acpsgd" => Some(ddp_buckets(shapes, t)),
        _ => None,
    };
    if let Some(w) = want_plan {
        assert_eq!(plan, &w, "{label}: buckets");
    }
    let units = bucket_units(shapes, plan, c.merge);
    let step_bytes = |step: u64| -> u64 {
        (0..rounds(c.method))
            .map(|r| {
                units
                    .iter()
                    .map(|u| bucket_bytes(c.method, &c.params, u, step, r))
                    .sum::<u64>()
            })
            .sum()
    };
    let total: u64 = (c.warmup..c.warmup + c.timed).map(step_bytes).sum();
    let want = (total as f64 / c.timed as f64).round() as u64;
    for (rank, r) in runs.iter().enumerate() {
        assert_eq!(
            r.wire_bytes, want,
            "{label}: rank {rank} wire_bytes (closed form {want} B per step)"
        );
    }
    // Per exchange: the last iteration of each phase, bucket by bucket and round by
    // round (ACP-SGD's Q steps have their own buckets under a size threshold: there the
    // phase's total per round).
    let phases = m.executed.len();
    let last_step = c.warmup + c.timed - 1;
    for (ph, ops) in m.executed.iter().enumerate() {
        let step = (0..=last_step)
            .rev()
            .find(|s| s % phases as u64 == ph as u64)
            .unwrap();
        let exchanges: Vec<(usize, usize, u64)> = ops
            .iter()
            .filter_map(|e| match e.op {
                Op::Exchange { bucket, round } => Some((bucket, round, e.wire.bytes() as u64)),
                _ => None,
            })
            .collect();
        assert!(
            !exchanges.is_empty(),
            "{label}: phase {ph} exchanged nothing"
        );
        for r in 0..rounds(c.method) {
            let sent: u64 = exchanges.iter().filter(|x| x.1 == r).map(|x| x.2).sum();
            let want: u64 = units
                .iter()
                .map(|u| bucket_bytes(c.method, &c.params, u, step, r))
                .sum();
            assert_eq!(sent, want, "{label}: step {step} round {r} bytes");
        }
        if ph == 0 {
            for &(b, r, sent) in &exchanges {
                let want = bucket_bytes(c.method, &c.params, &units[b], step, r);
                assert_eq!(sent, want, "{label}: step {step} bucket {b} round {r}");
            }
        }
    }
    m.wire_bytes
}

/// The fusions every method runs through: one bucket per tensor, one bucket, and a
/// 16 KiB threshold (three buckets of this model: 32,136 B, 18,560 B and 1,792 B).
fn fusions() -> [Fusion; 3] {
    [Fusion::None, Fusion::Single, Fusion::Bytes(16 << 10)]
}

fn with(f: impl FnOnce(&mut MethodParams)) -> MethodParams {
    let mut p = MethodParams::default();
    f(&mut p);
    p
}

/// S-SGD, Top-k, Random-k, both Sign-SGDs, QSGD, Power-SGD, ACP-SGD, Marsit and Count Sketch at 3
/// ranks through every fusion, at default and other parameters.
#[test]
fn every_method_sends_its_papers_bytes_through_every_fusion() {
    let cases: Vec<(&'static str, MethodParams)> = vec![
        ("ssgd", MethodParams::default()),
        ("topk", MethodParams::default()),
        ("topk", with(|p| p.density = Some(0.01))),
        ("randomk", MethodParams::default()),
        ("randomk", with(|p| p.density = Some(0.01))),
        ("signsgd", MethodParams::default()),
        ("signsgd-mv", MethodParams::default()),
        ("qsgd", MethodParams::default()),
        ("qsgd", with(|p| p.qsgd_levels = 5)),
        ("qsgd", with(|p| p.qsgd_levels = 3)),
        // s + 1 not a power of two but s is: levels 0..=4 need 3 bits, 0..=1 one.
        ("qsgd", with(|p| p.qsgd_levels = 4)),
        ("qsgd", with(|p| p.qsgd_levels = 1)),
        ("powersgd", MethodParams::default()),
        // r' = min(rank, rows, cols) below the rank: fc1 (10 rows) at rank 16.
        (
            "powersgd",
            with(|p| {
                p.rank = 16;
                p.min_compression_rate = Some(0.5);
            }),
        ),
        ("acpsgd", MethodParams::default()),
        ("acpsgd", with(|p| p.rank = 2)),
        ("marsit", MethodParams::default()),
        ("sketch", MethodParams::default()),
        (
            "sketch",
            with(|p| {
                p.density = Some(0.05);
                p.sketch_rows = 5;
                p.sketch_cols_per_k = 2.5;
            }),
        ),
    ];
    // Every case runs; the failures are listed together (each printed as it fails).
    let mut failed = Vec::new();
    for (method, params) in cases {
        for fusion in fusions() {
            let c = Case::new(method, params.clone(), fusion);
            if std::panic::catch_unwind(|| check(3, MODEL, &c)).is_err() {
                failed.push(format!("{method} fusion {fusion} ({params:?})"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} case(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// A worker's bytes do not change with the world size: all-gather sections are each
/// worker's own (the concatenation grows with P, the contribution does not), and
/// Marsit's ring message is its own 1-bit words however many hops merge it.
#[test]
fn a_workers_bytes_do_not_change_with_the_world_size() {
    for method in [
        "topk", "signsgd", "qsgd", "marsit", "powersgd", "sketch", "randomk",
    ] {
        let c = Case::new(method, MethodParams::default(), Fusion::Bytes(16 << 10));
        let at: Vec<u64> = [2, 3, 4].iter().map(|&n| check(n, MODEL, &c)).collect();
        assert!(at.windows(2).all(|w| w[0] == w[1]), "{method}: {at:?}");
    }
}

/// ACP-SGD alternates P and Q: over an odd number of steps starting at a P step the mean
/// is `(2 P + Q) / 3`, not `(P + Q) / 2` and not `P + Q`.
#[test]
fn acpsgd_alternates_p_and_q() {
    for fusion in fusions() {
        let c = Case {
            warmup: 0,
            timed: 3,
            ..Case::new("acpsgd", MethodParams::default(), fusion)
        };
        check(3, MODEL, &c);
    }
}

/// Power-SGD's dense warm-up (`start_iter` = powerSGD_hook's `start_powerSGD_iter`):
/// the first two steps all-reduce every gradient whole in round 0, then P and Q.
#[test]
fn powersgd_sends_dense_until_start_iter() {
    for fusion in fusions() {
        let c = Case {
            warmup: 0,
            timed: 4,
            ..Case::new("powersgd", with(|p| p.start_iter = 2), fusion)
        };
        check(3, MODEL, &c);
    }
}

/// OMGS (merged Top-k) and Sketch-Fusion (merged Count Sketch): `k` of each bucket's
/// packed gradient, one trailer word per bucket, through their planners and through
/// DDP's buckets and one bucket.
#[test]
fn merged_buckets_send_the_papers_bytes_of_the_bucket() {
    let runs = [
        ("topk", PlannerKind::Omgs, MethodParams::default()),
        ("topk", PlannerKind::Omgs, with(|p| p.density = Some(0.01))),
        ("sketch", PlannerKind::LayerFusion, MethodParams::default()),
    ];
    for (method, planner, params) in runs {
        let mut fs = fusions().to_vec();
        fs.push(Fusion::Planner(planner));
        for fusion in fs {
            let c = Case {
                merge: true,
                ..Case::new(method, params.clone(), fusion)
            };
            check(3, MODEL, &c);
        }
    }
}

/// DGC at its final density: with the whole tensor as the threshold sample (`d <=
/// ceil(2 / rho)`, reference `initialize`) the selection is the exact top k, so exactly
/// `k` pairs go; a warm-up of one step per epoch has ended after four steps.
#[test]
fn dgc_sends_k_pairs_at_its_final_density() {
    // 2 / rho = 8192 >= every tensor of the model.
    let rho = 1.0 / 4096.0;
    for fusion in fusions() {
        check(
            3,
            MODEL,
            &Case::new("dgc", with(|p| p.density = Some(rho)), fusion),
        );
        let c = Case {
            warmup: 4,
            timed: 3,
            ..Case::new(
                "dgc",
                with(|p| {
                    p.density = Some(rho);
                    p.warmup_steps_per_epoch = 1;
                }),
                fusion,
            )
        };
        check(3, MODEL, &c);
    }
}

/// DGC's warm-up schedule step by step: tensors of at most 8 elements are their own
/// threshold sample at every warm-up density (2 / 0.25 = 8), so each step sends exactly
/// its `k_t`; two steps per warm-up epoch, ten steps timed.
#[test]
fn dgc_follows_its_warm_up_schedule() {
    let tiny: &[(&str, usize, usize)] = &[("a", 2, 4), ("b", 1, 5), ("c", 2, 3)];
    for fusion in fusions() {
        let c = Case {
            warmup: 0,
            timed: 10,
            ..Case::new("dgc", with(|p| p.warmup_steps_per_epoch = 2), fusion)
        };
        check(3, tiny, &c);
    }
}

/// DGC at the default density samples the threshold from ~1% of a large tensor and
/// sends at most `k` pairs (reference `_sparsify`: `indices[:num_selects]`, fewer when
/// the adapted threshold passes fewer): the closed form with `k` is an upper bound, and
/// the dense 1-D tensors and the trailer are always sent.
#[test]
fn dgc_sends_at_most_k_pairs_when_it_samples_the_threshold() {
    let p = MethodParams::default();
    for fusion in fusions() {
        let c = Case::new("dgc", p.clone(), fusion);
        let m = &run(3, MODEL, &c)[0];
        let units = bucket_units(MODEL, &m.plan, false);
        let at_most: u64 = units.iter().map(|u| bucket_bytes("dgc", &p, u, 1, 0)).sum();
        let floor: u64 = units
            .iter()
            .flatten()
            .map(|&(rows, cols)| if rows > 1 { 0 } else { WORD * (rows * cols) as u64 } + WORD)
            .sum();
        assert!(
            (floor..=at_most).contains(&m.wire_bytes),
            "dgc fusion {fusion}: {} B, closed form at most {at_most} B, at least {floor} B",
            m.wire_bytes
        );
    }
}

/// The negative controls of `gradcomp converge` (`topk-noef`, `powersgd-noef`,
/// `signsgd-noef`: the compressor rebuilt every step, residual dropped) send what their
/// methods send, step by step (converge.csv `wire_bytes`, each step's, mean over ranks),
/// through converge's own path (engine layout and executor, fusion `none` and `single`).
#[test]
fn the_no_feedback_controls_send_their_methods_bytes_in_converge() {
    use gradcomp::converge::{self, RunContext};
    // The MLP of `converge` (src/converge/model.rs): `W_l` is `out x in`, `b_l` `1 x out`.
    let (input, hidden, classes) = (20usize, 24usize, 6usize);
    let mlp: &[(&str, usize, usize)] = &[
        ("w1", hidden, input),
        ("b1", 1, hidden),
        ("w2", classes, hidden),
        ("b2", 1, classes),
    ];
    let density = 0.05;
    let steps = 3u64;
    for fusion in ["none", "single"] {
        let dir = std::env::temp_dir().join(format!(
            "gradcomp-wire-formula-{}-{fusion}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let toml = format!(
            "[[converge]]\nmethods = [\"topk-noef\", \"powersgd-noef\", \"signsgd-noef\", \
             \"topk\", \"powersgd\", \"signsgd\"]\nhidden = [{hidden}]\ninput = {input}\n\
             classes = {classes}\nsteps = {steps}\neval_every = {steps}\nbatch = 8\n\
             fusion = \"{fusion}\"\nparams = {{ density = {density} }}\n"
        );
        let path = dir.join("c.toml");
        std::fs::write(&path, toml).unwrap();
        let (_, sections) = gradcomp::config::sections_from_file(&path).unwrap();
        let origin = gradcomp::config::Origin::File {
            file: path.display().to_string(),
            section: "converge",
            index: 0,
        };
        let n = 3;
        let cases = sections[0].validate(&origin, n, 1).unwrap();
        let csv = dir.join("converge.csv");
        let done = std::collections::HashSet::new();
        loopback::run(n, |world| {
            let ctx = RunContext {
                run_id: "wire",
                quiet: true,
                done: &done,
            };
            let mut sink = world
                .is_root()
                .then(|| gradcomp::record::CsvSink::create(&csv).unwrap());
            let mut summary = gradcomp::record::meta::RunSummary::default();
            converge::run_all(&world, &cases, &ctx, sink.as_mut(), &mut summary).unwrap();
        });
        let text = std::fs::read_to_string(&csv).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let (cm, cs, cw) = (col("method"), col("step"), col("wire_bytes"));
        let mut seen = 0;
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            let method = f[cm].trim_end_matches("-noef");
            let step: u64 = f[cs].parse().unwrap();
            let p = with(|p| p.density = Some(density));
            // One unit per tensor; the buckets' trailers count one word per tensor.
            let want: u64 = (0..rounds(method))
                .map(|r| bucket_bytes(method, &p, &specs_units(mlp), step, r))
                .sum();
            assert_eq!(
                f[cw].parse::<u64>().unwrap(),
                want,
                "{} fusion {fusion} step {step}",
                f[cm]
            );
            seen += 1;
        }
        assert_eq!(seen, 6 * steps as usize, "fusion {fusion}: rows");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Every tensor as its own compression unit.
fn specs_units(shapes: &[(&str, usize, usize)]) -> Vec<(usize, usize)> {
    shapes.iter().map(|&(_, r, c)| (r, c)).collect()
}
