//! Gradient compressors: one method per file behind the [`Compressor`] trait.
//!
//! A compressor never communicates. The benchmark harness drives it per tensor and round:
//! `compress` fills a [`Wire`], `feedback` updates local error-feedback state while the
//! wire is in flight, the harness exchanges the wire sections over MPI, and `decompress`
//! turns the [`Received`] data into the worker-average gradient (methods whose error
//! feedback needs the global result update it there). Every buffer a method needs is
//! allocated in [`Compressor::register`]; the per-step calls allocate nothing.
//! See docs/architecture.md for the design and docs/methods.md for the algorithms.

use ndarray::{ArrayView2, ArrayViewMut2};
use thiserror::Error;

pub mod params;
pub mod registry;
pub mod spec;

// One file per method (docs/methods.md) and the shared kernels they use.
pub mod acpsgd;
pub mod bits;
pub mod check;
pub mod describe;
pub mod device;
pub mod dgc;
pub mod lowrank_kernels;
pub mod marsit;
pub mod noef;
pub mod orth;
pub mod powersgd;
pub mod qsgd;
pub mod randomk;
pub mod residual;
pub mod select;
pub mod setup;
pub mod signsgd;
pub mod sketch;
pub mod ssgd;
pub mod topk;

pub use params::{default_density, default_min_compression_rate, MethodParams, DEFAULT_DENSITY};

/// Index of a tensor in the registration order of a model or benchmark.
pub type TensorId = usize;

/// How a method's wire is combined across workers; declared up front so that the
/// configuration can reject combinations that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    /// Element-wise sum of `Wire::sum_f32` (MPI_Allreduce).
    AllReduce,
    /// Concatenation of every worker's `Wire::gather_u32` (MPI_Allgatherv).
    AllGather,
    /// `Wire::ring_u32` merged hop by hop along a ring by [`Compressor::ring_merge`].
    Ring,
}

impl Aggregation {
    pub fn name(self) -> &'static str {
        match self {
            Aggregation::AllReduce => "allreduce",
            Aggregation::AllGather => "allgather",
            Aggregation::Ring => "ring",
        }
    }
}

/// How a fusion bucket closes (docs/methods.md, "Fusion, pipelining and planners").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseRule {
    /// Append the tensor, then close once the bucket holds at least the threshold
    /// (PyTorch DDP's and Horovod's bucketing).
    AtThreshold,
    /// Close the bucket before a tensor would take it past the threshold; a tensor larger
    /// than the threshold travels alone (ACP-SGD's reference, lzhangbv/acpsgd `acpsgd.py`,
    /// `_generate_groups_with_threshold`).
    BeforeExceeding,
}

/// What a method's buckets are sized on, per phase of its step cycle (step `s` is phase
/// `s % phase_bytes.len()`): the bytes of each tensor (in the order given) that the bucket
/// threshold is compared with, the factor the user's threshold is scaled by in each
/// phase, and the closing rule. Built by [`registry::fusion_sizing`] without registering any tensor, so
/// the engine and the simulator plan the same buckets from shapes alone.
#[derive(Clone, Debug, PartialEq)]
pub struct FusionSizing {
    pub phase_bytes: Vec<Vec<u64>>,
    /// One factor per phase (same length as `phase_bytes`).
    pub threshold_scale: Vec<f64>,
    pub rule: CloseRule,
}

impl FusionSizing {
    /// One phase, fp32 gradient bytes, the threshold as given, DDP's closing rule: every
    /// method but ACP-SGD.
    pub fn gradient_bytes(shapes: &[(usize, usize)]) -> FusionSizing {
        FusionSizing {
            phase_bytes: vec![shapes.iter().map(|&(r, c)| 4 * (r * c) as u64).collect()],
            threshold_scale: vec![1.0],
            rule: CloseRule::AtThreshold,
        }
    }
}

/// Errors raised by compressors (bad parameters, shape mismatches, misuse).
#[derive(Debug, Error)]
pub enum CompressError {
    /// A hyper-parameter is outside its allowed range.
    #[error("method {method}: parameter '{key}' = {value} is invalid: {allowed}")]
    BadParam {
        method: &'static str,
        key: &'static str,
        value: String,
        allowed: String,
    },
    /// The tensor was not registered or the shape differs from the registered one.
    #[error("method {method}: tensor {tensor}: {msg}")]
    Tensor {
        method: &'static str,
        tensor: TensorId,
        msg: String,
    },
    /// The harness called the method in a way it does not support.
    #[error("method {method}: {msg}")]
    Unsupported { method: &'static str, msg: String },
}

/// Bad input: exit code 2 ([`crate::error::Error::Usage`]).
impl From<CompressError> for crate::error::Error {
    fn from(e: CompressError) -> Self {
        crate::error::Error::Usage(Box::new(e))
    }
}

pub type Result<T> = std::result::Result<T, CompressError>;

/// What one worker puts on the network for one tensor and round. Sections are
/// independent; a method fills the ones its [`Aggregation`] uses (Marsit uses two).
/// The buffers are reserved by the harness from [`Compressor::wire_capacity`] and
/// cleared/refilled by `compress`, so steady-state steps never allocate.
#[derive(Debug, Default, Clone)]
pub struct Wire {
    /// Summed element-wise across workers (all-reduce).
    pub sum_f32: Vec<f32>,
    /// Concatenated across workers (all-gather-v); f32 values are stored by their bits
    /// (`f32::to_bits`).
    pub gather_u32: Vec<u32>,
    /// Merged along the ring by [`Compressor::ring_merge`]; same length on every worker.
    pub ring_u32: Vec<u32>,
}

impl Wire {
    /// An empty wire whose sections hold `cap` words, allocated and touched (setup: the
    /// first timed step then pays no page faults).
    pub fn with_touched_capacity(cap: WireLen) -> Wire {
        let mut w = Wire::default();
        w.sum_f32.resize(cap.sum_f32, 0.0);
        w.gather_u32.resize(cap.gather_u32, 0);
        w.ring_u32.resize(cap.ring_u32, 0);
        w.clear();
        w
    }

    /// The section lengths (words); `gather_exact` is a property of the method, false here.
    pub fn lens(&self) -> WireLen {
        WireLen {
            sum_f32: self.sum_f32.len(),
            gather_u32: self.gather_u32.len(),
            ring_u32: self.ring_u32.len(),
            gather_exact: false,
        }
    }

    /// Bytes this worker sends for this wire (the sections' sizes; 4 bytes per word).
    pub fn bytes(&self) -> usize {
        4 * (self.sum_f32.len() + self.gather_u32.len() + self.ring_u32.len())
    }
    pub fn clear(&mut self) {
        self.sum_f32.clear();
        self.gather_u32.clear();
        self.ring_u32.clear();
    }
    /// Reserve room for the given capacity (setup only).
    pub fn reserve(&mut self, cap: WireLen) {
        self.sum_f32
            .reserve(cap.sum_f32.saturating_sub(self.sum_f32.len()));
        self.gather_u32
            .reserve(cap.gather_u32.saturating_sub(self.gather_u32.len()));
        self.ring_u32
            .reserve(cap.ring_u32.saturating_sub(self.ring_u32.len()));
    }
}

/// Maximum length of each wire section, in 4-byte words.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WireLen {
    pub sum_f32: usize,
    pub gather_u32: usize,
    pub ring_u32: usize,
    /// The gather section always holds exactly `gather_u32` words, on every worker and
    /// step (sign bits, fixed-k pairs, fixed-width codes): the exchange then gathers with
    /// MPI_Allgather and skips the all-gather of lengths that variable-length sections
    /// (DGC's thresholded pairs) need. Default `false`: variable length.
    pub gather_exact: bool,
}

impl WireLen {
    /// A wire of `words` in the one section a method aggregating by `agg` uses (the
    /// planners' and calibration's model of a group's message).
    pub fn of(agg: Aggregation, words: usize, gather_exact: bool) -> WireLen {
        match agg {
            Aggregation::AllReduce => WireLen {
                sum_f32: words,
                ..WireLen::default()
            },
            Aggregation::AllGather => WireLen {
                gather_u32: words,
                gather_exact,
                ..WireLen::default()
            },
            Aggregation::Ring => WireLen {
                ring_u32: words,
                ..WireLen::default()
            },
        }
    }

    /// Section-wise maximum (buffer sizing); exact only if both are.
    pub fn max(self, o: WireLen) -> WireLen {
        WireLen {
            sum_f32: self.sum_f32.max(o.sum_f32),
            gather_u32: self.gather_u32.max(o.gather_u32),
            ring_u32: self.ring_u32.max(o.ring_u32),
            gather_exact: self.gather_exact && o.gather_exact,
        }
    }
    /// Section-wise sum (the wires of a bucket's tensors, appended); exact only if both are.
    pub fn plus(self, o: WireLen) -> WireLen {
        WireLen {
            sum_f32: self.sum_f32 + o.sum_f32,
            gather_u32: self.gather_u32 + o.gather_u32,
            ring_u32: self.ring_u32 + o.ring_u32,
            gather_exact: self.gather_exact && o.gather_exact,
        }
    }
    pub fn bytes(self) -> usize {
        4 * (self.sum_f32 + self.gather_u32 + self.ring_u32)
    }
    /// Whether `wire` (produced under this declared size) may be gathered without
    /// exchanging lengths; an error when the method declared an exact gather section but
    /// produced another length (other ranks would be left in a mismatched MPI_Allgather).
    pub fn exact_gather_of(self, method: &'static str, wire: &Wire) -> Result<bool> {
        if self.gather_exact && wire.gather_u32.len() != self.gather_u32 {
            return Err(CompressError::Unsupported {
                method,
                msg: format!(
                    "declared an exact gather section of {} words but produced {} (a bug in the method)",
                    self.gather_u32,
                    wire.gather_u32.len()
                ),
            });
        }
        Ok(self.gather_exact)
    }
}

/// What the exchange produced for one tensor and round.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// Element-wise sum over workers of every worker's `Wire::sum_f32`.
    pub sum_f32: &'a [f32],
    /// Every worker's `Wire::gather_u32`, concatenated in rank order.
    pub gathered_u32: &'a [u32],
    /// Length of each worker's gathered section (rank order; sums to `gathered_u32.len()`).
    pub gather_counts: &'a [usize],
    /// `Wire::ring_u32` after the ring reduce-scatter + all-gather (identical on all workers).
    pub ring_u32: &'a [u32],
    /// Number of workers.
    pub world_size: usize,
}

impl<'a> Received<'a> {
    /// The gathered section of worker `w`.
    pub fn gathered(&self, w: usize) -> &'a [u32] {
        let start: usize = self.gather_counts[..w].iter().sum();
        &self.gathered_u32[start..start + self.gather_counts[w]]
    }
}

/// Identity of this worker and the run; seeds every random choice (docs/methods.md, "The
/// `Compressor` contract": RNGs are seeded by (run seed, step, tensor id), plus rank where
/// per-worker noise is wanted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerCtx {
    pub rank: usize,
    pub world_size: usize,
    pub seed: u64,
}

/// A gradient compression method. One implementation per file, described by its
/// [`spec::MethodSpec`]; adding a method is one new file, its `pub mod` line here and
/// one line in [`registry::SPECS`] (docs/architecture.md, "Adding a method").
pub trait Compressor: Send {
    /// CLI/CSV name of the method (e.g. `topk`).
    fn name(&self) -> &'static str;
    /// How the wire is combined across workers.
    fn aggregation(&self) -> Aggregation;
    /// Exchange rounds per step (Power-SGD: 2, its second depends on the first).
    fn rounds(&self) -> usize {
        1
    }
    /// Steps cycle through this many phases (step `s` is phase `s % phases()`), each with
    /// its own wire sizes and fusion plan (ACP-SGD: P steps and Q steps). Default 1.
    fn phases(&self) -> usize {
        1
    }
    /// Wire size of tensor `t` in `round` of steps of phase `phase` (setup only; the
    /// simulator charges it). Default: [`Compressor::wire_capacity`].
    fn phase_wire(&self, t: TensorId, round: usize, phase: usize) -> WireLen {
        let _ = phase;
        self.wire_capacity(t, round)
    }
    /// Setup: allocate and touch all per-tensor state (error feedback, factors, scratch)
    /// for a tensor viewed as `rows x cols` (1-D tensors: `rows = 1`).
    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()>;
    /// Largest wire `compress` can produce for this tensor and round (setup only).
    fn wire_capacity(&self, t: TensorId, round: usize) -> WireLen;
    /// Elements a step's `compress` selects over besides its pass over the tensor, at
    /// the steady-state parameters (setup only): the size of a selection whose cost does
    /// not follow the tensor's (DGC: its threshold sample, the whole tensor up to 9,216
    /// elements at density 0.001, then about 2,000; `dgc::sample_plan`). The simulator's
    /// host cost model charges it apart (`CompressCost::per_selected_s`,
    /// docs/architecture.md, "The simulator"). Default 0: work linear in the tensor.
    fn selection_elems(&self, t: TensorId) -> usize {
        let _ = t;
        0
    }
    /// Start step `step` (0-based): warm-up schedules and seeded RNG streams use it.
    fn begin_step(&mut self, step: u64) {
        let _ = step;
    }
    /// Encode `grad` (plus error feedback) into `wire` for `round`. Clears `wire` first.
    fn compress(
        &mut self,
        t: TensorId,
        round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()>;
    /// Local error-feedback update that can run while the wire is in flight (EF-SignSGD,
    /// Top-k, DGC masking; ACP-SGD updates its residual inside `compress`). Methods whose
    /// residual needs the global result do it in `decompress` instead. Default: nothing.
    fn feedback(&mut self, t: TensorId, round: usize) -> Result<()> {
        let _ = (t, round);
        Ok(())
    }
    /// Merge an incoming ring chunk that already aggregates `aggregated` workers into this
    /// worker's own chunk (in place), during the ring reduce-scatter. `offset` is the
    /// chunk's first word within `Wire::ring_u32`. Only for [`Aggregation::Ring`].
    fn ring_merge(
        &mut self,
        t: TensorId,
        aggregated: usize,
        offset: usize,
        incoming: &[u32],
        own: &mut [u32],
    ) -> Result<()> {
        let _ = (t, aggregated, offset, incoming, own);
        Err(CompressError::Unsupported {
            method: self.name(),
            msg: "does not aggregate along a ring".into(),
        })
    }
    /// The device kernels of `stage` of tensor `t`'s `round` in steps of `phase`, in launch
    /// order, as the method's reference implementation launches them on a GPU (PyTorch
    /// eager; docs/methods.md, "Device kernels"), for the device cost model
    /// (src/devcost/). Steady state (after warm-ups); nothing for an unregistered tensor
    /// or a round the tensor does not use. Setup only. No default: every method lists
    /// its own.
    fn device_kernels(
        &self,
        t: TensorId,
        round: usize,
        phase: usize,
        stage: crate::roofline::Stage,
        out: &mut dyn FnMut(crate::roofline::Kernel),
    );
    /// Consume the exchange of `round`; after the last round write the worker-average
    /// gradient into `out` (same shape as the registered tensor).
    fn decompress(
        &mut self,
        t: TensorId,
        round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()>;
    /// `micro --check` (docs/methods.md, "`--check`"): whether the checked step runs on
    /// integer-valued gradients, whose sums over workers are exact. Default: false.
    fn check_integer_gradient(&self) -> bool {
        false
    }
    /// `micro --check`: this worker's share of the reference for tensor
    /// [`check::CHECKED`] after step 0, from its gradient `grad` and `fresh` (a new
    /// instance, [`check::CheckCtx::fresh`]); the harness sums the shares over workers.
    /// Default: `fresh`'s decode of this worker's own wire alone.
    fn check_share(&self, grad: ArrayView2<f32>, fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
        check::own_decode(grad, fresh)
    }
    /// `micro --check`: whether `out`, this worker's step-0 result, matches `summed`
    /// (every worker's [`Compressor::check_share`], summed). Default: their mean, rtol 1e-5.
    fn check_verdict(
        &self,
        out: &[f32],
        summed: &[f32],
        c: &mut check::CheckCtx,
    ) -> Result<check::Verdict> {
        Ok(check::mean_of_decodes(out, summed, c.world_size))
    }
}

#[cfg(test)]
mod device_kernel_tests {
    //! Every registry method's device kernel lists (docs/methods.md, "Device kernels").
    use super::*;
    use crate::roofline::{DeviceSpec, Kernel, Stage};

    const STAGES: [Stage; 2] = [Stage::Compress, Stage::Decompress];
    /// Two matrices, then two 1-D tensors (`rows = 1`), each pair small then large.
    const SHAPES: [(usize, usize); 4] = [(256, 512), (1024, 1024), (1, 4096), (1, 65536)];

    fn built(m: &str, n: usize, p: &MethodParams) -> Box<dyn Compressor> {
        let ctx = WorkerCtx {
            rank: 0,
            world_size: n,
            seed: 1,
        };
        let mut c = registry::build(m, p, ctx).expect("build");
        for (t, &(r, cols)) in SHAPES.iter().enumerate() {
            c.register(t, r, cols).expect("register");
        }
        c
    }

    fn list(c: &dyn Compressor, t: TensorId, round: usize, phase: usize, s: Stage) -> Vec<Kernel> {
        device::collect(|o| c.device_kernels(t, round, phase, s, o))
    }

    fn bytes(v: &[Kernel]) -> f64 {
        v.iter().map(|k| k.bytes).sum()
    }

    #[test]
    fn every_method_lists_sane_kernels_for_every_stage() {
        for &m in registry::METHODS {
            for n in [1, 2, 4] {
                let c = built(m, n, &MethodParams::default());
                for phase in 0..c.phases() {
                    for round in 0..c.rounds() {
                        for s in STAGES {
                            let lists: Vec<Vec<Kernel>> = (0..SHAPES.len())
                                .map(|t| list(&*c, t, round, phase, s))
                                .collect();
                            let at = format!("{m} n={n} phase {phase} round {round} {}", s.name());
                            for (t, ks) in lists.iter().enumerate() {
                                for k in ks {
                                    assert!(!k.name.is_empty(), "{at}");
                                    assert!(k.bytes.is_finite() && k.bytes >= 0.0, "{at}: {k:?}");
                                    assert!(k.flops.is_finite() && k.flops >= 0.0, "{at}: {k:?}");
                                }
                                let d = (SHAPES[t].0 * SHAPES[t].1) as f64;
                                // Matrices: every stage of every round does work (an empty
                                // list, the old default, fails here).
                                if SHAPES[t].0 > 1 {
                                    assert!(!ks.is_empty(), "{at}: tensor {t} has no kernels");
                                }
                                // Compress reads the gradient at least once (1-D tensors of
                                // Power-SGD travel raw in round 0 only; Count Sketch's round
                                // 1 gathers its k candidates only).
                                if s == Stage::Compress
                                    && (round == 0 || (!ks.is_empty() && m != "sketch"))
                                {
                                    assert!(bytes(ks) >= 4.0 * d, "{at}: tensor {t} {}", bytes(ks));
                                }
                            }
                            // Non-decreasing in numel, for matrices and for 1-D tensors.
                            for (small, large) in [(0, 1), (2, 3)] {
                                assert!(
                                    bytes(&lists[small]) <= bytes(&lists[large]),
                                    "{at}: {small} vs {large}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn gathered_decompress_grows_with_world_size() {
        for &m in registry::METHODS {
            let (c2, c4) = (
                built(m, 2, &MethodParams::default()),
                built(m, 4, &MethodParams::default()),
            );
            if c2.aggregation() != Aggregation::AllGather {
                continue;
            }
            for (t, &(rows, _)) in SHAPES.iter().enumerate() {
                let (a, b) = (
                    list(&*c2, t, 0, 0, Stage::Decompress),
                    list(&*c4, t, 0, 0, Stage::Decompress),
                );
                // More bytes (DGC sorts every worker's pairs in one index_put_, the others
                // launch kernels per worker). DGC's 1-D tensors are all-reduced dense: the
                // same work at any n.
                if m == "dgc" && rows == 1 {
                    assert_eq!(a.len(), b.len());
                    continue;
                }
                assert!(
                    b.len() >= a.len() && bytes(&b) > bytes(&a),
                    "{m} tensor {t}: {} kernels / {} B at n=2, {} / {} at n=4",
                    a.len(),
                    bytes(&a),
                    b.len(),
                    bytes(&b)
                );
            }
        }
    }

    #[test]
    fn unregistered_tensors_have_no_kernels() {
        for &m in registry::METHODS {
            let c = built(m, 2, &MethodParams::default());
            for s in STAGES {
                assert!(list(&*c, 99, 0, 0, s).is_empty(), "{m}");
            }
        }
    }

    /// The table of docs/methods.md, "Device kernels": one 1024x1024 tensor at default
    /// parameters, 4 workers, priced on the v100 preset
    /// (`cargo test --lib device_kernel_table -- --nocapture`).
    #[test]
    fn device_kernel_table() {
        let v100 = DeviceSpec::preset("v100").expect("v100");
        println!("method      | phase | round | stage      | kernels | MB     | GFLOP | v100 us");
        for &m in registry::METHODS {
            let c = built(m, 4, &MethodParams::default());
            let (mut total_kernels, mut total_s) = (0, 0.0);
            for phase in 0..c.phases() {
                for round in 0..c.rounds() {
                    for s in STAGES {
                        let ks = list(&*c, 1, round, phase, s);
                        let sec: f64 = ks.iter().map(|k| v100.kernel_s(k)).sum();
                        let flops: f64 = ks.iter().map(|k| k.flops).sum();
                        println!(
                            "{m:<11} | {phase:>5} | {round:>5} | {:<10} | {:>7} | {:>6.2} | {:>5.3} | {:>7.1}",
                            s.name(),
                            ks.len(),
                            bytes(&ks) / 1e6,
                            flops / 1e9,
                            sec * 1e6
                        );
                        assert!(!ks.is_empty() && sec > 0.0);
                        total_kernels += ks.len();
                        total_s += sec;
                    }
                }
            }
            println!(
                "{m:<11} | step average over {} phase(s): {:.1} kernels, {:.1} us",
                c.phases(),
                total_kernels as f64 / c.phases() as f64,
                total_s * 1e6 / c.phases() as f64
            );
        }
    }
}

#[cfg(test)]
mod tests;
