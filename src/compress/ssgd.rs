//! S-SGD, the dense baseline (docs/methods.md, "ssgd"): all-reduce (sum) the fp32 gradient,
//! divide by the number of workers.

use super::check::{self, CheckCtx, Verdict};
use super::device::{self, Out, F32};
use super::select::{grad_slice, out_slice, tensor_err};
use super::{
    Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::roofline::{Kernel, Stage};
use ndarray::{ArrayView2, ArrayViewMut2};

const NAME: &str = "ssgd";

/// S-SGD's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "dense baseline: all-reduce (sum) the fp32 gradient, divide by the workers",
    aggregation: Aggregation::AllReduce,
    rounds: 1,
    phases: 1,
    params: &[],
    density: None,
    min_compression_rate: None,
    owns_momentum: false,
    by_elements: true,
    wire_bytes: "4 d",
    memory: "none",
    state_bytes: None,
    citations: &[
        "synchronous data-parallel SGD, PyTorch DDP's all-reduce (docs/methods.md, \"ssgd\")",
    ],
    build: |p, ctx| Ok(Box::new(Ssgd::new(p, ctx)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(2.7938370830229826e-8, 3.232592674032396e-10),
        feedback: super::spec::LinearCost::new(3.317981261369412e-8, 1.1267547644120173e-13),
        decompress: super::spec::LinearCost::new(2.5932470758642877e-8, 2.074969198890946e-10),
    },
};

/// Dense all-reduce baseline: wire `sum_f32` = the gradient (row-major).
#[derive(Debug, Clone)]
pub struct Ssgd {
    /// Registered `(rows, cols)` per tensor id.
    shapes: Vec<Option<(usize, usize)>>,
}

impl Ssgd {
    /// S-SGD reads no hyper-parameter.
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        let _ = (p, ctx);
        Ok(Ssgd { shapes: Vec::new() })
    }

    fn shape(&self, t: TensorId) -> Result<(usize, usize)> {
        self.shapes
            .get(t)
            .copied()
            .flatten()
            .ok_or_else(|| tensor_err(NAME, t, "not registered".into()))
    }
}

impl Compressor for Ssgd {
    fn name(&self) -> &'static str {
        NAME
    }
    fn aggregation(&self) -> Aggregation {
        Aggregation::AllReduce
    }
    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        if self.shapes.len() <= t {
            self.shapes.resize(t + 1, None);
        }
        self.shapes[t] = Some((rows, cols));
        Ok(())
    }
    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        let (r, c) = self.shape(t).unwrap_or((0, 0));
        WireLen {
            sum_f32: r * c,
            ..WireLen::default()
        }
    }
    /// Compress: the copy into the fusion buffer; decompress: `out = sum / n` (one pass
    /// reading the all-reduced buffer). docs/methods.md, "Device kernels".
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Ok((r, c)) = self.shape(t) else { return };
        if round != 0 {
            return;
        }
        let bytes = F32 * (r * c) as f64;
        out(match stage {
            Stage::Compress => Kernel::copy("copy into the fusion buffer", bytes),
            Stage::Decompress => device::mem("average: out = sum / n", 2.0 * bytes),
        });
    }
    fn compress(
        &mut self,
        t: TensorId,
        _round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        let (r, c) = self.shape(t)?;
        let g = grad_slice(NAME, t, &grad, r, c)?;
        wire.clear();
        wire.sum_f32.extend_from_slice(g);
        Ok(())
    }
    fn decompress(
        &mut self,
        t: TensorId,
        _round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let (r, c) = self.shape(t)?;
        let out = out_slice(NAME, t, out, r, c)?;
        check_summed(NAME, t, received, out.len())?;
        let n = received.world_size as f32;
        for (o, &s) in out.iter_mut().zip(received.sum_f32) {
            *o = s / n;
        }
        Ok(())
    }
    /// Integer-valued gradients: their sum over workers is exact in f32.
    fn check_integer_gradient(&self) -> bool {
        true
    }
    fn check_share(&self, grad: ArrayView2<f32>, _fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
        check::gradient_share(grad)
    }
    /// Exactly the dense average.
    fn check_verdict(&self, out: &[f32], summed: &[f32], c: &mut CheckCtx) -> Result<Verdict> {
        let avg = check::mean(summed, c.world_size);
        Ok(check::compare(
            out,
            &avg,
            0.0,
            "dense all-reduce / n (exact)",
        ))
    }
}

/// A dense tensor's all-reduced section must hold its `len` elements, from at least one
/// worker (S-SGD's and DGC's dense tensors).
pub fn check_summed(
    method: &'static str,
    t: TensorId,
    received: &Received,
    len: usize,
) -> Result<()> {
    if received.sum_f32.len() != len || received.world_size == 0 {
        return Err(tensor_err(
            method,
            t,
            format!(
                "received {} summed values from {} workers for {len} elements",
                received.sum_f32.len(),
                received.world_size,
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    #[test]
    fn decompress_is_sum_over_n() {
        let n = 3;
        let grads: Vec<Array2<f32>> = (0..n)
            .map(|w| Array2::from_shape_fn((2, 3), |(i, j)| (w * 10 + i * 3 + j) as f32 - 4.5))
            .collect();
        let mut sum = vec![0f32; 6];
        for (w, g) in grads.iter().enumerate() {
            let mut m = Ssgd::new(
                &MethodParams::default(),
                WorkerCtx {
                    rank: w,
                    world_size: n,
                    seed: 1,
                },
            )
            .expect("new");
            m.register(0, 2, 3).expect("register");
            assert_eq!(m.wire_capacity(0, 0).sum_f32, 6);
            let mut wire = Wire::default();
            m.compress(0, 0, g.view(), &mut wire).expect("compress");
            assert_eq!(wire.bytes(), 24);
            sum.iter_mut().zip(&wire.sum_f32).for_each(|(s, v)| *s += v);
        }
        let mut m = Ssgd::new(
            &MethodParams::default(),
            WorkerCtx {
                rank: 0,
                world_size: n,
                seed: 1,
            },
        )
        .expect("new");
        m.register(0, 2, 3).expect("register");
        let rec = Received {
            sum_f32: &sum,
            gathered_u32: &[],
            gather_counts: &[0; 3],
            ring_u32: &[],
            world_size: n,
        };
        let mut out = Array2::zeros((2, 3));
        m.decompress(0, 0, &rec, out.view_mut())
            .expect("decompress");
        let want = (&grads[0] + &grads[1] + &grads[2]) / 3.0;
        for (a, b) in out.iter().zip(want.iter()) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
        assert!(m.decompress(1, 0, &rec, out.view_mut()).is_err());
        assert!(m
            .compress(0, 0, Array2::zeros((3, 2)).view(), &mut Wire::default())
            .is_err());
    }

    fn two_by_three() -> Ssgd {
        let ctx = WorkerCtx {
            rank: 0,
            world_size: 2,
            seed: 1,
        };
        let mut m = Ssgd::new(&MethodParams::default(), ctx).expect("new");
        m.register(0, 2, 3).expect("register");
        m
    }

    #[test]
    fn names_itself_and_all_reduces() {
        let m = two_by_three();
        assert_eq!(
            (m.name(), m.aggregation()),
            ("ssgd", Aggregation::AllReduce)
        );
    }

    /// docs/methods.md, "Device kernels": compress copies the 24 bytes of a 2 x 3 fp32
    /// tensor into the fusion buffer (reads 24, writes 24); decompress reads the summed
    /// 24 and writes 24. Round 0 only; nothing for an unregistered tensor.
    #[test]
    fn device_kernels_by_hand() {
        let m = two_by_three();
        let list = |t: TensorId, round: usize, stage: Stage| {
            let mut v = Vec::new();
            m.device_kernels(t, round, 0, stage, &mut |k| {
                v.push((k.name, k.bytes, k.flops))
            });
            v
        };
        assert_eq!(
            list(0, 0, Stage::Compress),
            [("copy into the fusion buffer", 48.0, 0.0)]
        );
        assert_eq!(
            list(0, 0, Stage::Decompress),
            [("average: out = sum / n", 48.0, 0.0)]
        );
        assert!(list(0, 1, Stage::Compress).is_empty());
        assert!(list(1, 0, Stage::Decompress).is_empty());
    }

    /// `micro --check`: integer gradients, each worker's share its gradient, the result
    /// exactly their mean (rtol 0: one ulp off fails).
    #[test]
    fn the_check_wants_exactly_the_dense_mean() {
        let m = two_by_three();
        assert!(m.check_integer_gradient());
        let g = Array2::from_shape_fn((2, 3), |(i, j)| (3 * i + j) as f32 - 2.0);
        let mut fresh = two_by_three();
        let share = m.check_share(g.view(), &mut fresh).expect("share");
        assert_eq!(share, [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]);
        let summed = [-2.0, -1.0, 0.0, 1.0, 2.0, 6.0]; // two workers' shares
        let out = [-1.0, -0.5, 0.0, 0.5, 1.0, 3.0];
        let p = MethodParams::default();
        let probe = |r: usize, c: usize| Array2::zeros((r, c));
        let mut c = CheckCtx::two_workers((2, 3), &p, &summed, &mut fresh, &probe);
        assert_eq!(
            m.check_verdict(&out, &summed, &mut c).expect("verdict"),
            Ok(())
        );
        let mut off = out;
        off[5] = f32::from_bits(3.0f32.to_bits() + 1);
        let e = m.check_verdict(&off, &summed, &mut c).expect("verdict");
        assert!(e
            .unwrap_err()
            .starts_with("dense all-reduce / n (exact): element 5"));
    }

    /// The summed section must hold the tensor's elements, from at least one worker.
    #[test]
    fn check_summed_wants_every_element_from_some_worker() {
        let rec = |sum: &'static [f32], n: usize| Received {
            sum_f32: sum,
            gathered_u32: &[],
            gather_counts: &[],
            ring_u32: &[],
            world_size: n,
        };
        assert!(check_summed(NAME, 0, &rec(&[1.0, 2.0], 2), 2).is_ok());
        assert!(check_summed(NAME, 0, &rec(&[1.0, 2.0], 1), 2).is_ok());
        let e = check_summed(NAME, 7, &rec(&[1.0], 2), 2)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "method ssgd: tensor 7: received 1 summed values from 2 workers for 2 elements"
        );
        assert!(check_summed(NAME, 0, &rec(&[1.0, 2.0, 3.0], 2), 2).is_err());
        assert!(check_summed(NAME, 0, &rec(&[1.0, 2.0], 0), 2).is_err());
    }
}
