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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roofline::{Kernel, Stage};
    use ndarray::Array2;

    const ROWS: usize = 32;
    const COLS: usize = 64;

    fn ctx() -> WorkerCtx {
        WorkerCtx {
            rank: 0,
            world_size: 1,
            seed: 3,
        }
    }

    /// A deterministic gradient, different for each `salt`.
    fn grad(salt: usize) -> Array2<f32> {
        Array2::from_shape_fn((ROWS, COLS), |(i, j)| {
            ((i * COLS + j) * (37 + 2 * salt) % 101) as f32 / 10.0 - 5.0
        })
    }

    /// One step of tensor 0 at world size 1 (the exchange returns this worker's own
    /// wire): every round's wire (its words, in section order) and the output.
    fn step(c: &mut dyn Compressor, s: u64, g: &Array2<f32>) -> (Vec<Vec<u32>>, Array2<f32>) {
        c.begin_step(s);
        let mut out = Array2::zeros((ROWS, COLS));
        let mut wires = Vec::new();
        for round in 0..c.rounds() {
            let mut w = Wire::default();
            c.compress(0, round, g.view(), &mut w).unwrap();
            c.feedback(0, round).unwrap();
            let counts = [w.gather_u32.len()];
            let rec = Received {
                sum_f32: &w.sum_f32,
                gathered_u32: &w.gather_u32,
                gather_counts: &counts,
                ring_u32: &w.ring_u32,
                world_size: 1,
            };
            c.decompress(0, round, &rec, out.view_mut()).unwrap();
            let words = w.sum_f32.iter().map(|x| x.to_bits());
            wires.push(words.chain(w.gather_u32).chain(w.ring_u32).collect());
        }
        (wires, out)
    }

    fn kernels(c: &dyn Compressor, round: usize, phase: usize, stage: Stage) -> Vec<Kernel> {
        let mut v = Vec::new();
        c.device_kernels(0, round, phase, stage, &mut |k| v.push(k));
        v
    }

    /// Each control is its registry compressor, except that step 1 starts from a fresh
    /// one: it sends and decodes what a compressor built at step 1 does, while the
    /// registry's own, carrying its residual from step 0, sends something else.
    #[test]
    fn a_control_at_step_1_is_its_compressor_built_afresh() {
        let p = MethodParams::default();
        for &(name, base) in CONTROLS {
            assert_eq!(base_of(name), Some(base));
            let mut c = NoResidual::new(name, &p, ctx()).unwrap();
            c.register(0, ROWS, COLS).unwrap();
            let at = |s: u64| {
                let mut r = registry::build(base, &p, ctx()).unwrap();
                r.register(0, ROWS, COLS).unwrap();
                if s > 0 {
                    step(r.as_mut(), 0, &grad(0));
                }
                step(r.as_mut(), s, &grad(s as usize))
            };
            let mut fresh = registry::build(base, &p, ctx()).unwrap();
            fresh.register(0, ROWS, COLS).unwrap();
            assert_eq!(step(&mut c, 0, &grad(0)), at(0), "{name} step 0");
            let control = step(&mut c, 1, &grad(1));
            assert_eq!(control, step(fresh.as_mut(), 1, &grad(1)), "{name} step 1");
            assert_ne!(control, at(1), "{name}: its residual changes step 1");
        }
        assert_eq!(base_of("topk"), None);
        assert!(NoResidual::new("topk", &p, ctx()).is_err());
    }

    /// What the control declares (name aside) is what its compressor declares.
    #[test]
    fn a_control_declares_what_its_compressor_declares() {
        let p = MethodParams::default();
        for &(name, base) in CONTROLS {
            let mut c = NoResidual::new(name, &p, ctx()).unwrap();
            let mut r = registry::build(base, &p, ctx()).unwrap();
            c.register(0, ROWS, COLS).unwrap();
            r.register(0, ROWS, COLS).unwrap();
            assert_eq!(c.name(), name);
            assert_eq!(
                (c.rounds(), c.phases(), c.aggregation()),
                (r.rounds(), r.phases(), r.aggregation()),
                "{name}"
            );
            for round in 0..r.rounds() {
                assert_eq!(c.wire_capacity(0, round), r.wire_capacity(0, round));
                assert_ne!(c.wire_capacity(0, round).bytes(), 0, "{name}");
                for phase in 0..r.phases() {
                    assert_eq!(c.phase_wire(0, round, phase), r.phase_wire(0, round, phase));
                    for stage in [Stage::Compress, Stage::Decompress] {
                        let k = kernels(r.as_ref(), round, phase, stage);
                        assert!(!k.is_empty(), "{name}");
                        assert_eq!(kernels(&c, round, phase, stage), k, "{name}");
                    }
                }
            }
            // None of the three merges along a ring: the control refuses as they do.
            let mut own = [0u32; 2];
            assert!(r.ring_merge(0, 1, 0, &[1, 2], &mut own).is_err());
            assert!(c.ring_merge(0, 1, 0, &[1, 2], &mut own).is_err(), "{name}");
        }
    }
}
