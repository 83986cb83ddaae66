//! The negative controls of `gradcomp converge` (docs/methods.md, "Convergence check"):
//! `topk-noef`, `powersgd-noef` and `signsgd-noef`, the registry's compressor with its
//! state dropped every step. Each is the real compressor, rebuilt and re-registered
//! (residual 0; Power-SGD also loses its warm start) at each `begin_step`, so only the
//! error feedback is missing. They are not methods and are accepted by `converge` only,
//! to show that the tolerance check fails for a compressor that loses its residual.

use super::{
    registry, Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen,
    WorkerCtx,
};
use ndarray::{ArrayView2, ArrayViewMut2};

/// The negative controls: (name, the registry compressor it wraps).
pub const CONTROLS: &[(&str, &str)] = &[
    ("topk-noef", "topk"),
    ("powersgd-noef", "powersgd"),
    ("signsgd-noef", "signsgd"),
];

/// The wrapped compressor of a control name, `None` for any other name.
pub fn base_of(name: &str) -> Option<&'static str> {
    CONTROLS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// A registry compressor without error feedback.
pub struct NoResidual {
    name: &'static str,
    base: &'static str,
    inner: Box<dyn Compressor>,
    params: MethodParams,
    ctx: WorkerCtx,
    shapes: Vec<(TensorId, usize, usize)>,
}

impl NoResidual {
    /// The control `name` (one of [`CONTROLS`]).
    pub fn new(name: &str, p: &MethodParams, ctx: WorkerCtx) -> Result<NoResidual> {
        let (name, base) = CONTROLS
            .iter()
            .find(|(n, _)| *n == name)
            .copied()
            .ok_or_else(|| registry::unknown(name))?;
        Ok(NoResidual {
            name,
            base,
            inner: registry::build(base, p, ctx)?,
            params: p.clone(),
            ctx,
            shapes: Vec::new(),
        })
    }
}

impl Compressor for NoResidual {
    fn name(&self) -> &'static str {
        self.name
    }
    fn rounds(&self) -> usize {
        self.inner.rounds()
    }
    fn phases(&self) -> usize {
        self.inner.phases()
    }
    fn phase_wire(&self, t: TensorId, round: usize, phase: usize) -> WireLen {
        self.inner.phase_wire(t, round, phase)
    }
    fn ring_merge(
        &mut self,
        t: TensorId,
        aggregated: usize,
        offset: usize,
        incoming: &[u32],
        own: &mut [u32],
    ) -> Result<()> {
        self.inner.ring_merge(t, aggregated, offset, incoming, own)
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
            if let Ok(mut c) = registry::build(self.base, &self.params, self.ctx) {
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
    fn device_kernels(
        &self,
        t: TensorId,
        round: usize,
        phase: usize,
        stage: crate::roofline::Stage,
        out: &mut dyn FnMut(crate::roofline::Kernel),
    ) {
        self.inner.device_kernels(t, round, phase, stage, out)
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
