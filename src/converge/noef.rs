//! The negative control of `gradcomp converge` (docs/methods.md, "Convergence check"):
//! `topk-noef`, the registry's Top-k with its residual dropped every step. It is the real
//! `topk` compressor, rebuilt and re-registered (residual 0) at each `begin_step`, so
//! only the error feedback is missing; it is not a method and is accepted by `converge`
//! only, to show that the tolerance check fails for a compressor that loses its residual.

use crate::compress::{
    registry, Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen,
    WorkerCtx,
};
use ndarray::{ArrayView2, ArrayViewMut2};

/// Name of the negative control.
pub const NAME: &str = "topk-noef";
/// The compressor it wraps.
pub const BASE: &str = "topk";

/// Top-k without error feedback.
pub struct NoResidual {
    inner: Box<dyn Compressor>,
    params: MethodParams,
    ctx: WorkerCtx,
    shapes: Vec<(TensorId, usize, usize)>,
}

impl NoResidual {
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<NoResidual> {
        Ok(NoResidual {
            inner: registry::build(BASE, p, ctx)?,
            params: p.clone(),
            ctx,
            shapes: Vec::new(),
        })
    }
}

impl Compressor for NoResidual {
    fn name(&self) -> &'static str {
        NAME
    }
    fn aggregation(&self) -> Aggregation {
        self.inner.aggregation()
    }
    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        self.shapes.push((t, rows, cols));
        self.inner.register(t, rows, cols)
    }
    fn wire_capacity(&self, t: TensorId, round: usize) -> WireLen {
        self.inner.wire_capacity(t, round)
    }
    fn begin_step(&mut self, step: u64) {
        // Drop every residual: a fresh compressor (allocates; a test control, not timed
        // against anything).
        if step > 0 {
            if let Ok(mut c) = registry::build(BASE, &self.params, self.ctx) {
                if self
                    .shapes
                    .iter()
                    .all(|&(t, r, cols)| c.register(t, r, cols).is_ok())
                {
                    self.inner = c;
                }
            }
        }
        self.inner.begin_step(step);
    }
    fn compress(
        &mut self,
        t: TensorId,
        round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        self.inner.compress(t, round, grad, wire)
    }
    fn feedback(&mut self, t: TensorId, round: usize) -> Result<()> {
        self.inner.feedback(t, round)
    }
    fn decompress(
        &mut self,
        t: TensorId,
        round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        self.inner.decompress(t, round, received, out)
    }
}
