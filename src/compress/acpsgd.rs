//! ACP-SGD (Zhang, Shi, Wang & Li, "Evaluation and Optimization of Gradient Compression
//! for Distributed Deep Learning", ICDCS 2023, §IV: alternate compressed Power-SGD),
//! docs/methods.md, "acpsgd".
//!
//! Keeps both factors `P` (rows x r') and `Q` (cols x r') per tensor and alternates which
//! one is computed and all-reduced, one round per step:
//! - P step: `Q = orth(Q_reduced_prev)`; `P = (M+e) Q`; `e = (M+e) - P Q^T`; all-reduce P;
//!   result `P_sum Q^T / n`.
//! - Q step: `P = orth(P_reduced_prev)`; `Q = (M+e)^T P`; `e = (M+e) - P Q^T`; all-reduce Q;
//!   result `P Q_sum^T / n`.
//!
//! Step parity: with the 0-based step given to `begin_step`, **even steps (0, 2, ...) are
//! P steps** (the paper's odd steps, counted from 1), odd steps are Q steps.
//!
//! The residual update is local, so each step touches the matrix in one streaming pass:
//! a step forms `M+e` and accumulates its product, and its `e -= P Q^T` (which needs the
//! complete product) is deferred to the next step's pass, applied chunk by chunk before
//! the chunk is used ([`LowRank::add_project_rows_deferred`],
//! [`LowRank::add_project_t_deferred`]; same arithmetic as the eager update). `feedback`
//! has nothing left to do. 1-D and uncompressible tensors travel raw every step.
//!
//! Memory traffic of a step on a `d`-element matrix (f32): the one pass reads `g` and `e`
//! and writes `e` back (`8d` bytes read), decompress writes `out` (`4d`, streamed): `12d`
//! bytes read per step, against Power-SGD's `20d`.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::check::{self, CheckCtx, Verdict};
use super::device::{self, Out, F32};
use super::orth::{
    check_dims, check_len, compressed_rank, load_memory_order, push_memory_order, push_raw,
    put_slot, slot_mut, validate_lowrank_params, write_average, Slot,
};
use super::{
    Aggregation, CloseRule, CompressError, Compressor, FusionSizing, MethodParams, Received,
    Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::roofline::{Kernel, Stage};

const NAME: &str = "acpsgd";

/// ACP-SGD's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "alternate compressed Power-SGD: one factor per step (P on even steps, Q on odd), all-reduced",
    aggregation: Aggregation::AllReduce,
    rounds: 1,
    phases: 2,
    params: &["rank", "min_compression_rate"],
    density: None,
    min_compression_rate: Some(super::params::ACPSGD_MIN_COMPRESSION_RATE),
    owns_momentum: false,
    by_elements: false,
    wire_bytes: "4 r' rows on P steps, 4 r' cols on Q steps, r' = min(rank, rows, cols); 4 d for 1-D tensors",
    memory: "residual e (d floats), factors P (rows r') and Q (cols r')",
    state_bytes: None,
    citations: &[
        "Zhang, Shi, Wang & Li, ICDCS 2023, Sec. IV",
        "lzhangbv/acpsgd acpsgd.py at 4f560a2",
    ],
    build: |p, ctx| Ok(Box::new(AcpSgd::new(p, ctx)?)),
    fusion_sizing: Some(fusion_sizing),
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(0.0, 5.857438399989999e-10),
        feedback: super::spec::LinearCost::new(3.238119138720145e-8, 1.0013900462422885e-13),
        decompress: super::spec::LinearCost::new(8.936667465805552e-8, 1.5355205059036602e-10),
    },
};

/// ACP-SGD compressor (CLI name `acpsgd`): one all-reduce of P or Q per step.
#[derive(Debug)]
pub struct AcpSgd {
    params: MethodParams,
    ctx: WorkerCtx,
    step: u64,
    slots: Vec<Option<Slot>>,
}

impl AcpSgd {
    /// Validates `rank >= 1` and `min_compression_rate >= 0` (finite; default 0, every
    /// matrix, as the reference).
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        validate_lowrank_params(NAME, p)?;
        Ok(AcpSgd {
            params: p.clone(),
            ctx,
            step: 0,
            slots: Vec::new(),
        })
    }

    /// True when the current step computes and sends P (even 0-based steps).
    pub fn is_p_step(&self) -> bool {
        self.step % 2 == 0
    }
}

/// ACP-SGD's fusion buckets (lzhangbv/acpsgd `acpsgd.py` at 4f560a2,
/// `_generate_groups_with_threshold`, lines 74-134; docs/methods.md, "acpsgd"): P steps
/// group tensors by their P factor's bytes (`4 rows r'`), Q steps by their Q factor's
/// (`4 cols r'`); raw tensors count their full `4 d` in both (lines 82-94). Which
/// tensors are compressed: [`compressed_rank`] at `min_compression_rate` (default 0:
/// every matrix, as the reference's `p.ndimension() > 1`, line 84). A group closes
/// before a tensor would take it past the threshold ([`CloseRule::BeforeExceeding`],
/// `tot_size == 0 or tot_size + ps <= threshold_p`, lines 108 and 125). The dense
/// threshold is scaled per phase by that phase's compression ratio, `sum P / sum d` for
/// P steps and `sum Q / sum d` for Q steps (`threshold_p`, `threshold_q`, lines 99-100).
pub fn fusion_sizing(p: &MethodParams, shapes: &[(usize, usize)]) -> FusionSizing {
    let (mut pb, mut qb) = (
        Vec::with_capacity(shapes.len()),
        Vec::with_capacity(shapes.len()),
    );
    let rate = p.min_compression_rate_for(NAME);
    for &(rows, cols) in shapes {
        let d = (rows * cols) as u64;
        match compressed_rank(rows, cols, p.rank, rate) {
            Some(r) => {
                pb.push(4 * (rows * r) as u64);
                qb.push(4 * (cols * r) as u64);
            }
            None => {
                pb.push(4 * d);
                qb.push(4 * d);
            }
        }
    }
    let dense: u64 = shapes.iter().map(|&(r, c)| 4 * (r * c) as u64).sum();
    let ratio = |b: &[u64]| {
        if dense == 0 {
            1.0
        } else {
            b.iter().sum::<u64>() as f64 / dense as f64
        }
    };
    FusionSizing {
        threshold_scale: vec![ratio(&pb), ratio(&qb)],
        phase_bytes: vec![pb, qb],
        rule: CloseRule::BeforeExceeding,
    }
}

impl Compressor for AcpSgd {
    fn name(&self) -> &'static str {
        NAME
    }

    fn aggregation(&self) -> Aggregation {
        Aggregation::AllReduce
    }

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        put_slot(
            &mut self.slots,
            t,
            Slot::new(NAME, rows, cols, &self.params, self.ctx.seed, t),
        );
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        self.phase_wire(t, 0, 0).max(self.phase_wire(t, 0, 1))
    }

    /// P steps (phase 0) and Q steps (phase 1).
    fn phases(&self) -> usize {
        2
    }

    /// P steps send `rows x r'`, Q steps `cols x r'`; raw tensors `d` in both.
    fn phase_wire(&self, t: TensorId, _round: usize, phase: usize) -> WireLen {
        let sum_f32 = match self.slots.get(t).and_then(|s| s.as_ref()) {
            None => 0,
            Some(Slot::Raw { rows, cols }) => rows * cols,
            Some(Slot::LowRank(lr)) if phase % 2 == 0 => lr.rows * lr.rank,
            Some(Slot::LowRank(lr)) => lr.cols * lr.rank,
        };
        WireLen {
            sum_f32,
            ..WireLen::default()
        }
    }

    fn begin_step(&mut self, step: u64) {
        self.step = step;
    }

    /// lzhangbv/acpsgd `acpsgd.py` (docs/methods.md, "Device kernels"): compress
    /// (`_alternative_compress`) the QR of the factor kept from the previous step
    /// (`7r' - 1` kernels, [`device::householder_qr`]) and 6 kernels: `M + E`, the product,
    /// its `copy_` into the fusion buffer, `P Q^T`, `M - P Q^T`, `E +=`; decompress
    /// (`_bp_barrier`) `P Q^T`, `copy_` into the gradient, `/ n`. Raw tensors: `copy_`
    /// into the buffer | `copy_` out and `/ n`, every step, at full size.
    fn device_kernels(&self, t: TensorId, round: usize, phase: usize, stage: Stage, out: Out) {
        if round != 0 {
            return;
        }
        match self.slots.get(t).and_then(|s| s.as_ref()) {
            None => {}
            Some(Slot::Raw { rows, cols }) => {
                let bytes = F32 * (rows * cols) as f64;
                match stage {
                    Stage::Compress => out(Kernel::copy("copy_ into the P/Q buffer", bytes)),
                    Stage::Decompress => {
                        out(Kernel::copy("grad.copy_(buffer)", bytes));
                        out(device::mem("grad /= n", 2.0 * bytes));
                    }
                }
            }
            Some(Slot::LowRank(lr)) => {
                let (rows, cols, r) = (lr.rows, lr.cols, lr.rank);
                let d = rows * cols;
                match stage {
                    Stage::Compress => {
                        if phase % 2 == 0 {
                            device::orth(out, cols, r, device::householder_qr);
                            out(device::ew("M + E", d, 2, 1));
                            out(Kernel::gemm("P = (M + E) Q", rows, cols, r));
                            out(Kernel::copy(
                                "P.copy_ into the P buffer",
                                F32 * (rows * r) as f64,
                            ));
                        } else {
                            device::orth(out, rows, r, device::householder_qr);
                            out(device::ew("M + E", d, 2, 1));
                            out(Kernel::gemm("Q = (M + E)^T P", cols, rows, r));
                            out(Kernel::copy(
                                "Q.copy_ into the Q buffer",
                                F32 * (cols * r) as f64,
                            ));
                        }
                        out(Kernel::gemm("P Q^T", rows, r, cols));
                        out(device::ew("M - P Q^T", d, 2, 1));
                        out(device::ew("E += M - P Q^T", d, 2, 1));
                    }
                    Stage::Decompress => {
                        out(Kernel::gemm("P Q^T", rows, r, cols));
                        out(device::ew("grad.copy_(P Q^T)", d, 1, 1));
                        out(device::ew("grad /= n", d, 1, 1));
                    }
                }
            }
        }
    }

    fn compress(
        &mut self,
        t: TensorId,
        round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        wire.clear();
        if round != 0 {
            return Err(CompressError::Unsupported {
                method: NAME,
                msg: format!("round {round} requested; ACP-SGD has one round per step"),
            });
        }
        let p_step = self.is_p_step();
        let slot = slot_mut(&mut self.slots, t, NAME)?;
        check_dims(NAME, t, "gradient", slot.dims(), grad.dim())?;
        match slot {
            Slot::Raw { .. } => push_raw(&mut wire.sum_f32, grad),
            Slot::LowRank(lr) if p_step => {
                lr.orth_q();
                lr.add_project_rows_deferred(grad);
                push_memory_order(&mut wire.sum_f32, &lr.p);
            }
            Slot::LowRank(lr) => {
                lr.orth_p();
                lr.add_project_t_deferred(grad);
                push_memory_order(&mut wire.sum_f32, &lr.q);
            }
        }
        Ok(())
    }

    fn decompress(
        &mut self,
        t: TensorId,
        round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        if round != 0 {
            return Err(CompressError::Unsupported {
                method: NAME,
                msg: format!("round {round} requested; ACP-SGD has one round per step"),
            });
        }
        let p_step = self.is_p_step();
        let n = received.world_size.max(1);
        let slot = slot_mut(&mut self.slots, t, NAME)?;
        let dims = slot.dims();
        check_dims(NAME, t, "output", dims, out.dim())?;
        match slot {
            Slot::Raw { .. } => {
                check_len(NAME, t, dims.0 * dims.1, received.sum_f32.len())?;
                write_average(out, received.sum_f32, n);
            }
            Slot::LowRank(lr) => {
                // Keep the reduced factor: the next step orthogonalises it (warm start).
                let f = if p_step { &mut lr.p } else { &mut lr.q };
                check_len(NAME, t, f.len(), received.sum_f32.len())?;
                load_memory_order(f, received.sum_f32);
                lr.reconstruct(1.0 / n as f32, out, false);
            }
        }
        Ok(())
    }
    fn check_share(&self, grad: ArrayView2<f32>, _fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
        check::gradient_share(grad)
    }
    /// Step 0 is a P step: `out = S Q Qᵀ`, the projection of the dense average `S` onto the
    /// row space `out` spans; `S` itself for raw tensors.
    fn check_verdict(&self, out: &[f32], summed: &[f32], c: &mut CheckCtx) -> Result<Verdict> {
        Ok(check::lowrank(NAME, out, summed, c, false, true))
    }
}

#[cfg(test)]
mod tests;
