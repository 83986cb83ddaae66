//! Top-k SGD with error feedback (docs/methods.md, "topk"; Stich et al., NeurIPS 2018):
//! `p = g + e`, send the `k = ceil(rho d)` entries of largest `|p|` (exact), `e = p` with
//! the sent entries zeroed; all-gather of (index, value) pairs, decompress = sum / n.

use super::device::{self, Out, F32, I32, I64};
use super::residual::{self, Residual};
use super::select::{
    grad_slice, indexable_len, out_slice, push_pairs, scatter_mean, single_round, touched_vec,
    TopKScratch, TouchedSet,
};
use super::{
    Aggregation, CompressError, Compressor, MethodParams, Received, Result, TensorId, Wire,
    WireLen, WorkerCtx,
};
use crate::measure::rng::rng_for;
use crate::roofline::{Kernel, Stage};
use ndarray::{ArrayView2, ArrayViewMut2};

const NAME: &str = "topk";

/// Top-k's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "exact top-k of |g + e|, (index, value) pairs all-gathered; error feedback",
    aggregation: Aggregation::AllGather,
    rounds: 1,
    phases: 1,
    params: &["density"],
    density: None,
    min_compression_rate: None,
    owns_momentum: false,
    by_elements: true,
    wire_bytes: "8 k, k = ceil(density d) (u32 index and f32 value per kept element)",
    memory: "residual e (d floats), the sent indices (k), a selection scratch",
    state_bytes: Some(sparse_gather_state_bytes),
    citations: &[
        "Stich, Cordonnier & Jaggi, \"Sparsified SGD with Memory\", NeurIPS 2018",
        "sands-lab/grace grace_dl/torch/compressor/topk.py",
    ],
    build: |p, ctx| Ok(Box::new(TopK::new(p, ctx)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(1.7876761982948967e-7, 5.757565583400783e-10),
        feedback: super::spec::LinearCost::new(2.8739126035747564e-8, 1.2156648660821926e-12),
        decompress: super::spec::LinearCost::new(2.4304559538958465e-8, 2.4475768008085235e-10),
    },
};

/// The memory check's share of a sparse all-gather method (topk, dgc; `config::cases`,
/// `method_state_bytes`): every rank's `k` (index, value) pairs received and their
/// decoding, twice `8 k` bytes per rank per tensor, and once for the largest tensor
/// decompress's record of the written entries (`d / 8` bytes) plus `extra_once(d, k)`.
pub fn sparse_state_bytes(
    p: &MethodParams,
    numels: &[usize],
    world_size: u64,
    extra_once: impl Fn(usize, usize) -> f64,
) -> u64 {
    super::spec::state_sum(
        numels,
        |d| d as f64 / 8.0 + extra_once(d, p.k_of(d)),
        |d| 2.0 * 8.0 * p.k_of(d) as f64 * world_size as f64,
    )
}

/// [`sparse_state_bytes`] with nothing extra (Top-k).
fn sparse_gather_state_bytes(p: &MethodParams, numels: &[usize], world_size: u64) -> u64 {
    sparse_state_bytes(p, numels, world_size, |_, _| 0.0)
}
/// The reading choice of top-k decompression's launches ([`crate::roofline::READINGS`]).
const DECOMPRESS: &str = "topk_decompress";
/// RNG stream tag of the threshold sample.
const STREAM_SAMPLE: u64 = 0x746f_706b;
/// Elements per fused accumulate-and-scan chunk (fits L1).
const CHUNK: usize = 4096;

/// Exact Top-k with error feedback; wire `gather_u32` = k indices then k value bits.
#[derive(Debug, Clone)]
pub struct TopK {
    params: MethodParams,
    ctx: WorkerCtx,
    step: u64,
    /// Per-tensor residual and sent indices (docs/methods.md, "topk"), allocated and
    /// touched in `register`.
    tensors: Vec<Option<Residual>>,
    scratch: TopKScratch,
    /// Selected values (scratch of the largest k).
    vals: Vec<f32>,
    /// Decompress's record of the written output entries (largest tensor).
    touched: TouchedSet,
}

/// Validate `density` in (0, 1] (shared by the sparsifying methods).
pub fn check_density(method: &'static str, density: f64) -> Result<()> {
    if !(density > 0.0 && density <= 1.0) {
        return Err(CompressError::BadParam {
            method,
            key: "density",
            value: density.to_string(),
            allowed: "a fraction in (0, 1]".into(),
        });
    }
    Ok(())
}

impl TopK {
    /// Reads `density` (rho in (0, 1]).
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        let p = &p.for_method(NAME);
        check_density(NAME, p.density_for(NAME))?;
        Ok(TopK {
            params: p.clone(),
            ctx,
            step: 0,
            tensors: Vec::new(),
            scratch: TopKScratch::new(0, 0),
            vals: Vec::new(),
            touched: TouchedSet::default(),
        })
    }
}

impl Compressor for TopK {
    fn name(&self) -> &'static str {
        NAME
    }
    fn aggregation(&self) -> Aggregation {
        Aggregation::AllGather
    }
    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        let d = indexable_len(NAME, t, rows, cols)?;
        let k = self.params.k_of(d);
        self.scratch.ensure(d, k);
        self.touched.ensure(d);
        if self.vals.len() < k {
            self.vals = touched_vec(k, 0.0, 1.0);
        }
        residual::register(&mut self.tensors, t, Residual::new(rows, cols, k));
        Ok(())
    }
    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        let k = self
            .tensors
            .get(t)
            .and_then(Option::as_ref)
            .map_or(0, |s| s.k);
        WireLen {
            gather_u32: 2 * k,
            // Exactly k (index, value) pairs every step.
            gather_exact: true,
            ..WireLen::default()
        }
    }
    fn begin_step(&mut self, step: u64) {
        self.step = step;
    }
    fn compress(
        &mut self,
        t: TensorId,
        round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        single_round(NAME, round)?;
        let mut rng = rng_for(self.ctx.seed, self.step, t, STREAM_SAMPLE);
        let TopK {
            tensors,
            scratch,
            vals,
            ..
        } = self;
        let st = residual::registered(NAME, tensors, t)?;
        let g = grad_slice(NAME, t, &grad, st.rows, st.cols)?;
        st.settle();
        let (k, e) = (st.k, &mut st.e);
        // Fused p = g + e and candidate scan, one pass over memory.
        let thr = scratch.sample_threshold(e.len(), k, &mut rng, |i| e[i] + g[i])?;
        scratch.begin(k, thr)?;
        for (c, (ec, gc)) in e.chunks_mut(CHUNK).zip(g.chunks(CHUNK)).enumerate() {
            ec.iter_mut().zip(gc).for_each(|(a, b)| *a += *b);
            scratch.scan(c * CHUNK, ec);
        }
        if !scratch.complete() {
            scratch.begin(k, 0.0)?;
            scratch.scan(0, e);
        }
        let m = scratch.finish(e, k, st.sent.buf_mut(), vals)?;
        st.sent.mark(m);
        wire.clear();
        push_pairs(wire, st.sent.indices(), &vals[..m]);
        Ok(())
    }
    fn feedback(&mut self, t: TensorId, _round: usize) -> Result<()> {
        residual::registered(NAME, &mut self.tensors, t)?.settle();
        Ok(())
    }
    /// OMGS-SGD's `TopKCompressor` (HKBU-HPML/OMGS-SGD `compression.py`) and the
    /// decompress of its `synchronize` (`hv_distributed_optimizer.py`); docs/methods.md,
    /// "Device kernels": compress 7 kernels plus `torch.topk`'s. Decompress in the three
    /// readings of [`crate::roofline::READINGS`] `topk_decompress`: `loop` (OMGS-SGD, the
    /// default) `4n + 2` kernels; `dense-sum` (grace) `3n + 1`; `index-add` 3.
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Some(st) = device::round0(&self.tensors, t, round) else {
            return;
        };
        let (d, k) = (st.e.len(), st.k);
        let (df, kf) = (d as f64, k as f64);
        match stage {
            Stage::Compress => {
                out(device::ew("p = g + e (add_ residual)", d, 2, 1));
                out(device::ew("|p|", d, 1, 1));
                device::torch_topk(out, d, k, true);
                out(device::mem(
                    "values = p[indexes] (gather)",
                    (I64 + 2.0 * F32) * kf,
                ));
                out(device::ew("residual = p + 0.0", d, 1, 1));
                out(device::mem(
                    "residual[indexes] = 0 (scatter)",
                    (I64 + F32) * kf,
                ));
                out(device::mem(
                    "indexes.int() for the all-gather",
                    (I64 + I32) * kf,
                ));
            }
            Stage::Decompress => {
                let n = self.ctx.world_size.max(1);
                // OMGS-SGD `synchronize`: `for i in range(num_of_workers)`, each worker's
                // slice of the gathered values and indexes added in place.
                let mut lp = |k: Kernel| out(k.in_reading(DECOMPRESS, "loop"));
                lp(device::mem("new_grad.fill_(0)", F32 * df));
                for _ in 0..n {
                    lp(device::mem("worker's indexes.long()", (I32 + I64) * kf));
                    lp(device::mem(
                        "new_grad[indexes] (gather)",
                        (I64 + 2.0 * F32) * kf,
                    ));
                    lp(device::mem("+= values", 3.0 * F32 * kf));
                    lp(device::mem(
                        "new_grad[indexes] = sum (scatter)",
                        (I64 + 2.0 * F32) * kf,
                    ));
                }
                lp(device::ew("new_grad /= n", d, 1, 1));
                // grace `Allgather.wait_receive`: per worker `desparsify` (a zero tensor
                // and `scatter_` of its pairs), `aggregate` = Python `sum` of the dense
                // tensors (`0 + t0`, then n - 1 adds), `/ world_size`.
                let mut ds = |k: Kernel| out(k.in_reading(DECOMPRESS, "dense-sum"));
                for _ in 0..n {
                    ds(device::mem("torch.zeros(numel)", F32 * df));
                    ds(device::mem(
                        "scatter_(0, indices, values)",
                        (I64 + 2.0 * F32) * kf,
                    ));
                }
                ds(device::ew("sum: 0 + t0", d, 1, 1));
                for _ in 1..n {
                    ds(device::ew("sum: + t_w", d, 2, 1));
                }
                ds(device::ew("/ world_size", d, 1, 1));
                // One `index_add_` of every worker's pairs (analysis/profile_compress.py
                // `decompress_topk`): reads n k indexes and values, adds into the output.
                let nk = (n * k) as f64;
                let mut ia = |k: Kernel| out(k.in_reading(DECOMPRESS, "index-add"));
                ia(device::mem("out.zero_()", F32 * df));
                ia(device::mem(
                    "out.index_add_(0, idx, val) (n k pairs)",
                    (I64 + 3.0 * F32) * nk,
                ));
                ia(device::ew("out.div_(n)", d, 1, 1));
            }
        }
    }
    fn decompress(
        &mut self,
        t: TensorId,
        _round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let st = residual::registered(NAME, &mut self.tensors, t)?;
        let (rows, cols) = (st.rows, st.cols);
        let out = out_slice(NAME, t, out, rows, cols)?;
        scatter_mean(NAME, t, received, out, &mut self.touched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::select::test_support::{ctx, grad, params};
    use ndarray::Array2;

    /// Decompression's device time in each reading against a hand computation from the
    /// references' launches (n = 5 workers, d = 10^6, k = 1000; v100: 5 us per launch,
    /// 720 GB/s): OMGS-SGD's loop `fill` + n x (`.long()`, gather, add, scatter) + `/= n`;
    /// grace's n x (zeros, scatter_) + `0 + t0` + (n - 1) adds + `/ n`; one `index_add_`.
    #[test]
    fn decompression_is_priced_in_each_reading() {
        let (n, d, k) = (5.0, 1e6, 1000.0);
        let mut m = TopK::new(&params(0.001), ctx(0, 5)).expect("new");
        m.register(0, 1000, 1000).expect("register");
        let list = crate::compress::device::collect_all(|o| {
            m.device_kernels(0, 0, 0, Stage::Decompress, o)
        });
        let (l, bw) = (5e-6, 720e9);
        let want = [
            (
                "loop",
                (2.0 + 4.0 * n) * l
                    + (4.0 * d + n * k * (12.0 + 16.0 + 12.0 + 16.0) + 8.0 * d) / bw,
            ),
            (
                "dense-sum",
                (3.0 * n + 1.0) * l
                    + (n * (4.0 * d + 16.0 * k) + 8.0 * d + (n - 1.0) * 12.0 * d + 8.0 * d) / bw,
            ),
            (
                "index-add",
                3.0 * l + (4.0 * d + n * k * 20.0 + 8.0 * d) / bw,
            ),
        ];
        for (variant, want_s) in want {
            let spec =
                crate::roofline::DeviceSpec::parse(&format!("v100:topk_decompress={variant}"))
                    .unwrap();
            let got: f64 = list.iter().map(|k| spec.kernel_s(k)).sum();
            assert!(
                (got - want_s).abs() < 1e-12 * want_s.max(1.0),
                "{variant}: {got} vs {want_s}"
            );
        }
    }

    #[test]
    fn keeps_k_largest_and_conserves_p() {
        let (rows, cols) = (300, 400);
        let d = rows * cols;
        let mut m = TopK::new(&params(0.01), ctx(0, 1)).expect("new");
        m.register(3, rows, cols).expect("register");
        let k = params(0.01).k_of(d);
        assert_eq!(m.wire_capacity(3, 0).gather_u32, 2 * k);
        for step in 0..3 {
            m.begin_step(step);
            let g = grad(rows, cols, step);
            let e_before = m.tensors[3].as_ref().expect("state").e.clone();
            let p: Vec<f32> = e_before.iter().zip(g.iter()).map(|(e, g)| e + g).collect();
            let mut wire = Wire::default();
            m.compress(3, 0, g.view(), &mut wire).expect("compress");
            m.feedback(3, 0).expect("feedback");
            assert_eq!(wire.bytes(), 8 * k);
            let (idx, bits) = wire.gather_u32.split_at(k);
            // Exactly the k largest |p|: every sent magnitude >= every unsent one.
            let mut sent = vec![false; d];
            let mut min_sent = f32::INFINITY;
            for (&i, &b) in idx.iter().zip(bits) {
                assert!(!sent[i as usize], "index {i} sent twice");
                sent[i as usize] = true;
                assert_eq!(f32::from_bits(b), p[i as usize]);
                min_sent = min_sent.min(p[i as usize].abs());
            }
            let max_unsent = (0..d)
                .filter(|&i| !sent[i])
                .map(|i| p[i].abs())
                .fold(0.0, f32::max);
            assert!(min_sent >= max_unsent, "{min_sent} < {max_unsent}");
            // Conservation: p = sent + residual, exactly.
            let e = &m.tensors[3].as_ref().expect("state").e;
            for i in 0..d {
                let s = if sent[i] { p[i] } else { 0.0 };
                assert_eq!((s + e[i]).to_bits(), p[i].to_bits());
                assert!(!sent[i] || e[i] == 0.0);
            }
        }
    }

    #[test]
    fn decompress_equals_dense_mean() {
        let (rows, cols, n) = (50, 60, 3);
        let mut sections = Vec::new();
        let mut counts = Vec::new();
        let mut dense = vec![0f32; rows * cols];
        for w in 0..n {
            let mut m = TopK::new(&params(0.05), ctx(w, n)).expect("new");
            m.register(0, rows, cols).expect("register");
            let mut wire = Wire::default();
            m.compress(0, 0, grad(rows, cols, 10 + w as u64).view(), &mut wire)
                .expect("compress");
            let h = wire.gather_u32.len() / 2;
            for (&i, &b) in wire.gather_u32[..h].iter().zip(&wire.gather_u32[h..]) {
                dense[i as usize] += f32::from_bits(b);
            }
            counts.push(wire.gather_u32.len());
            sections.extend_from_slice(&wire.gather_u32);
        }
        let rec = Received {
            sum_f32: &[],
            gathered_u32: &sections,
            gather_counts: &counts,
            ring_u32: &[],
            world_size: n,
        };
        let mut m = TopK::new(&params(0.05), ctx(0, n)).expect("new");
        m.register(0, rows, cols).expect("register");
        let mut out = Array2::from_elem((rows, cols), 7.0f32);
        m.decompress(0, 0, &rec, out.view_mut())
            .expect("decompress");
        for (o, s) in out.iter().zip(&dense) {
            assert!((o - s / n as f32).abs() <= 1e-6 * s.abs().max(1.0));
        }
        let bad_counts = [counts[0], counts[1]];
        let bad = Received {
            gather_counts: &bad_counts,
            ..rec
        };
        assert!(m.decompress(0, 0, &bad, out.view_mut()).is_err());
    }

    /// Compression's device kernels by hand (OMGS-SGD's `TopKCompressor`, 8 x 16 at
    /// density 0.25: d = 128, k = 32; fp32 4 bytes, int32 4, int64 8): `p = g + e` reads
    /// two and writes one tensor, `|p|` one and one, `torch.topk` (device.rs's radix
    /// select, sorted), the gather of k values (int64 index, read and write fp32), the
    /// residual copy, the scatter of k zeros (int64 index, fp32) and the int32 cast of
    /// the k indices (read int64, write int32). Nothing for a second round.
    #[test]
    fn compression_kernels_by_hand() {
        let mut m = TopK::new(&params(0.25), ctx(0, 2)).expect("new");
        m.register(0, 8, 16).expect("register");
        let list = |round: usize| {
            device::named_bytes(|o| m.device_kernels(0, round, 0, Stage::Compress, o))
        };
        let (d, k) = (128.0, 32.0);
        let mut want = vec![
            ("p = g + e (add_ residual)", 4.0 * d * 3.0),
            ("|p|", 4.0 * d * 2.0),
        ];
        want.extend(device::named_bytes(|o| {
            device::torch_topk(o, 128, 32, true)
        }));
        want.extend([
            ("values = p[indexes] (gather)", (8.0 + 4.0 + 4.0) * k),
            ("residual = p + 0.0", 4.0 * d * 2.0),
            ("residual[indexes] = 0 (scatter)", (8.0 + 4.0) * k),
            ("indexes.int() for the all-gather", (8.0 + 4.0) * k),
        ]);
        assert_eq!(list(0), want);
        assert!(list(1).is_empty());
    }

    /// A sample threshold above the k-th largest `|p|` (the first scan collects fewer
    /// than k candidates) is followed by a scan from 0: still exactly the k largest.
    /// 256 x 256 at density 0.5 (d = 65,536, k = 32,768): select.rs's sample is
    /// `MIN_SAMPLE` = 4,096 elements, one in each stride of 16, drawn from the tensor's
    /// sample stream of the step (seed 17, step 0, tensor 0); those elements are made
    /// 1,000 + i and the others `1 + i / d`, so the sample's threshold passes only the
    /// 4,096 sampled elements.
    #[test]
    fn a_first_scan_short_of_k_is_redone_from_zero() {
        let (rows, cols) = (256, 256);
        let d = rows * cols;
        let k = d / 2;
        let sampled = std::cell::RefCell::new(Vec::new());
        let mut probe = TopKScratch::new(d, k);
        let n = probe.draw_sample(d, 4096, &mut rng_for(17, 0, 0, STREAM_SAMPLE), |i| {
            sampled.borrow_mut().push(i);
            0.0
        });
        assert_eq!(n, 4096);
        let sampled = sampled.into_inner();
        let mut big = vec![false; d];
        for &i in &sampled {
            big[i] = true;
        }
        let p: Vec<f32> = (0..d)
            .map(|i| {
                if big[i] {
                    1000.0 + i as f32
                } else {
                    1.0 + i as f32 / d as f32
                }
            })
            .collect();
        // The premise: the sample's threshold passes fewer than k elements.
        let thr = probe
            .sample_threshold(d, k, &mut rng_for(17, 0, 0, STREAM_SAMPLE), |i| p[i])
            .expect("threshold");
        assert!(p.iter().filter(|v| v.abs() >= thr).count() < k, "{thr}");
        // The k largest: every sampled element, then the unsampled ones of highest index.
        let mut want: Vec<u32> = sampled.iter().map(|&i| i as u32).collect();
        want.extend(
            (0..d)
                .rev()
                .filter(|&i| !big[i])
                .take(k - sampled.len())
                .map(|i| i as u32),
        );
        want.sort_unstable();
        let mut m = TopK::new(&params(0.5), ctx(0, 1)).expect("new");
        m.register(0, rows, cols).expect("register");
        m.begin_step(0);
        let g = Array2::from_shape_vec((rows, cols), p.clone()).expect("shape");
        let mut wire = Wire::default();
        m.compress(0, 0, g.view(), &mut wire).expect("compress");
        assert_eq!(wire.gather_u32.len(), 2 * k);
        let (idx, bits) = wire.gather_u32.split_at(k);
        assert_eq!(idx, &want[..]);
        for (&i, &b) in idx.iter().zip(bits) {
            assert_eq!(f32::from_bits(b), p[i as usize]);
        }
    }

    /// The memory check's share by hand (density 0.25, tensors of 64 and 8 elements, 3
    /// ranks): `k = ceil(0.25 d)` = 16 and 2; per tensor `2 x 8 k x 3` = 768 and 96 bytes;
    /// once for the largest `64 / 8 = 8` bytes plus the extra, here `d + k = 80`.
    #[test]
    fn sparse_state_bytes_by_hand() {
        let p = params(0.25);
        assert_eq!(
            sparse_state_bytes(&p, &[64, 8], 3, |d, k| (d + k) as f64),
            952
        );
        assert_eq!(sparse_state_bytes(&p, &[64, 8], 3, |_, _| 0.0), 872);
        assert_eq!(sparse_gather_state_bytes(&p, &[64, 8], 3), 872);
        // The spec's entry is this function.
        let f = SPEC.state_bytes.expect("Top-k sizes its state");
        assert_eq!(f(&p, &[64, 8], 3), 872);
    }

    #[test]
    fn validates_params_and_ids() {
        assert!(TopK::new(&params(0.0), ctx(0, 1)).is_err());
        assert!(TopK::new(&params(1.5), ctx(0, 1)).is_err());
        assert!(TopK::new(&params(f64::NAN), ctx(0, 1)).is_err());
        let mut m = TopK::new(&params(0.5), ctx(0, 1)).expect("new");
        assert!(m
            .compress(0, 0, grad(2, 2, 0).view(), &mut Wire::default())
            .is_err());
        m.register(0, 2, 2).expect("register");
        assert!(m
            .compress(0, 0, grad(2, 3, 0).view(), &mut Wire::default())
            .is_err());
    }
}
