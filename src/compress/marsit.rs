//! Marsit (Wu et al., "Marsit: ... multi-hop all-reduce", 2022): sign bits that stay
//! 1 bit per element through a ring all-reduce, with bit-wise unbiased aggregation and a
//! global compensation. **This is our reconstruction from the abstract** (docs/methods.md,
//! "marsit"; each choice and its reason under "Reconstructed choices"), not the authors'
//! code:
//! - compress: `p = g + e`; wire `ring_u32 = [scale, signs...]`: word 0 holds the f32
//!   bits of `||p||_1 / d`, then the packed sign bits of `p` (layout in [`super::bits`]).
//!   The scale rides in the ring message (summed at each hop) instead of a separate
//!   all-reduce per bucket, so one exchange is one ring all-reduce.
//! - ring reduce-scatter: at every hop a worker receives a chunk that already aggregates
//!   `j` workers and merges its own bits into it, `b' = (b & !mask) | (s & mask)`, every
//!   mask bit 1 with probability `1/(j+1)` ([`Marsit::ring_merge`]); the chunk holding
//!   word 0 adds the scales as f32.
//!   **Why this is a uniform choice:** by induction, after merging, each bit equals the
//!   bit of each of the `j` earlier workers with probability `1/j` (induction hypothesis)
//!   times `j/(j+1)` (mask 0) `= 1/(j+1)`, and the merging worker's bit with probability
//!   `1/(j+1)` (mask 1). After the `n-1` hops each bit is therefore the sign bit of a
//!   uniformly chosen worker, and `E[2b - 1]` is the mean of the workers' signs.
//!   Masks are built from random words by a binary expansion of `1/(j+1)`
//!   ([`bits::BernoulliMask`], bias below `2^-24`), seeded by (run seed, step, tensor,
//!   this rank, chunk offset, `j`): reproducible, and independent across workers.
//! - decompress (after the ring all-gather): `out = scale_mean * (2b - 1)` with
//!   `scale_mean = ring_u32[0] (as f32) / n`; global compensation `e = p - out`, the same
//!   global result on every worker.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::bits::{self, BernoulliMask, Slot};
use super::check::{self, CheckCtx, Verdict};
use super::device::{self, Out, F32};
use super::{
    Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::measure::rng::{mix, rng_for};
use crate::roofline::Stage;

const NAME: &str = "marsit";

/// Marsit's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "sign bits kept 1 bit per element through a ring all-reduce by random bit-wise merging; global compensation",
    aggregation: Aggregation::Ring,
    rounds: 1,
    phases: 1,
    params: &[],
    density: None,
    min_compression_rate: None,
    owns_momentum: false,
    by_elements: true,
    wire_bytes: "4 (1 + ceil(d / 32)) (the f32 scale and one sign bit per element)",
    memory: "residual e (d floats)",
    state_bytes: None,
    citations: &["Wu et al., \"Marsit\", 2022 (reconstructed from the abstract; docs/methods.md, \"marsit\")"],
    build: |p, ctx| Ok(Box::new(Marsit::new(p, ctx)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(5.837949385347674e-8, 1.765154857737033e-10),
        feedback: super::spec::LinearCost::new(3.033086447036123e-8, 1.1300150634029737e-13),
        decompress: super::spec::LinearCost::new(9.264575674797541e-9, 3.086618445761686e-10),
    },
};
/// Stream tag separating Marsit's mask RNG from other methods' streams.
const STREAM_TAG: u64 = 0x4d41_5253_4954; // "MARSIT"
/// Ring words before the sign bits: the f32 scale.
const HEAD: usize = 1;

/// Marsit compressor (CLI `marsit`), one per worker.
#[derive(Debug, Clone)]
pub struct Marsit {
    ctx: WorkerCtx,
    step: u64,
    /// Per tensor: the compensation `e`, which holds `p` between compress and decompress.
    slots: Vec<Option<Slot<Vec<f32>>>>,
}

impl Marsit {
    /// Reads no hyper-parameters.
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        let _ = p;
        Ok(Marsit {
            ctx,
            step: 0,
            slots: Vec::new(),
        })
    }

    /// Global compensation `e` of tensor `t` (holds `p` between compress and decompress).
    #[cfg(test)]
    fn residual(&self, t: TensorId) -> Option<&[f32]> {
        self.slots
            .get(t)
            .and_then(|s| s.as_ref())
            .map(|s| s.s.as_slice())
    }
}

impl Compressor for Marsit {
    fn name(&self) -> &'static str {
        NAME
    }

    fn aggregation(&self) -> Aggregation {
        Aggregation::Ring
    }

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        let d = bits::checked_len(NAME, t, rows, cols)?;
        bits::put_slot(&mut self.slots, t, rows, cols, bits::touched_zeros(d));
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        match self.slots.get(t).and_then(|s| s.as_ref()) {
            Some(sl) => WireLen {
                ring_u32: HEAD + bits::words_for(sl.d()),
                ..WireLen::default()
            },
            None => WireLen::default(),
        }
    }

    fn begin_step(&mut self, step: u64) {
        self.step = step;
    }

    fn compress(
        &mut self,
        t: TensorId,
        _round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        let g = bits::input_slice(NAME, t, sl, &grad)?;
        let d = g.len();
        wire.clear();
        wire.ring_u32.resize(HEAD + bits::words_for(d), 0);
        let l1 = bits::fused_ef_pack(g, &mut sl.s, 0.0, &mut wire.ring_u32[HEAD..]);
        wire.ring_u32[0] = if d == 0 {
            0.0f32
        } else {
            (l1 / d as f64) as f32
        }
        .to_bits();
        Ok(())
    }

    /// No public code: the kernels of this reconstruction (docs/methods.md, "Device
    /// kernels"). Compress `p = g + e`, `|p|`, `mean`, the packed signs: 4 kernels.
    /// Decompress: the `n - 1` merges of the ring's reduce-scatter (one kernel each: the
    /// Bernoulli mask and the bit select over a chunk of `W / n` of the `W` ring words,
    /// and the scale sum), then `out = scale / n * (2b - 1)` and `e = p - out`:
    /// `n + 1` kernels.
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Some(sl) = device::round0(&self.slots, t, round) else {
            return;
        };
        let d = sl.d();
        let words = HEAD + bits::words_for(d);
        match stage {
            Stage::Compress => device::ef_sign_compress(out, "p = g + e", d),
            Stage::Decompress => {
                let n = self.ctx.world_size.max(1);
                let chunk = words.div_ceil(n) as f64;
                for _ in 1..n {
                    out(device::mem(
                        "ring merge: Bernoulli mask, bit select, scale sum",
                        3.0 * F32 * chunk,
                    ));
                }
                out(device::mem(
                    "out = scale / n * (2b - 1) (unpack)",
                    F32 * (words + d) as f64,
                ));
                out(device::ew("e = p - out", d, 2, 1));
            }
        }
    }

    /// `own = (incoming & !mask) | (own & mask)`, mask bits 1 with probability
    /// `1/(aggregated+1)` (see the module docs for why the result is a uniform choice);
    /// the scale word (offset 0) is summed as f32.
    fn ring_merge(
        &mut self,
        t: TensorId,
        aggregated: usize,
        offset: usize,
        incoming: &[u32],
        own: &mut [u32],
    ) -> Result<()> {
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        let words = HEAD + bits::words_for(sl.d());
        if incoming.len() != own.len()
            || offset
                .checked_add(own.len())
                .map_or(true, |end| end > words)
        {
            return Err(bits::tensor_err(
                NAME,
                t,
                format!("ring chunk of {} / {} words at offset {offset} does not fit the {words}-word wire", incoming.len(), own.len()),
            ));
        }
        if aggregated == 0 {
            return Err(bits::tensor_err(
                NAME,
                t,
                "ring_merge needs aggregated >= 1",
            ));
        }
        let mask = BernoulliMask::new(1, aggregated as u64 + 1);
        let stream = mix(
            mix(STREAM_TAG, self.ctx.rank as u64),
            mix(offset as u64, aggregated as u64),
        );
        let mut rng = rng_for(self.ctx.seed, self.step, t, stream);
        let (incoming, own) = if offset == 0 && !own.is_empty() {
            own[0] = (f32::from_bits(own[0]) + f32::from_bits(incoming[0])).to_bits();
            (&incoming[HEAD..], &mut own[HEAD..])
        } else {
            (incoming, own)
        };
        bits::merge_masked(incoming, own, &mask, &mut rng);
        Ok(())
    }

    fn decompress(
        &mut self,
        t: TensorId,
        _round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        let d = sl.d();
        if received.world_size == 0 || received.ring_u32.len() != HEAD + bits::words_for(d) {
            return Err(bits::tensor_err(
                NAME,
                t,
                format!(
                    "received {} ring words from {} workers; expected {}",
                    received.ring_u32.len(),
                    received.world_size,
                    HEAD + bits::words_for(d)
                ),
            ));
        }
        let out = bits::output_slice(NAME, t, sl, out)?;
        let scale = f32::from_bits(received.ring_u32[0]) / received.world_size as f32;
        bits::unpack_signs(&received.ring_u32[HEAD..], scale, out);
        for (e, o) in sl.s.iter_mut().zip(out.iter()) {
            *e -= *o;
        }
        Ok(())
    }
    /// This worker's scale `mean |g|`, then `1` per element of non-negative sign.
    fn check_share(&self, grad: ArrayView2<f32>, _fresh: &mut dyn Compressor) -> Result<Vec<f32>> {
        let g = check::flat(&grad)?;
        let mut share = Vec::with_capacity(g.len() + 1);
        share.push(g.iter().map(|x| f64::from(x.abs())).sum::<f64>() as f32 / g.len() as f32);
        share.extend(
            g.iter()
                .map(|x| if x.is_sign_negative() { 0.0 } else { 1.0 }),
        );
        Ok(share)
    }
    /// Statistical: |out| equals the mean scale everywhere, each output sign is some
    /// worker's sign, and the share of positive outputs matches the workers' mean sign
    /// within 6 standard deviations (the merge is unbiased bit by bit). A zero mean scale
    /// (every gradient zero) leaves zeros, whose sign says nothing: only their size is
    /// judged.
    fn check_verdict(&self, out: &[f32], summed: &[f32], c: &mut CheckCtx) -> Result<Verdict> {
        let n = c.world_size as f64;
        let (scale, pos) = (summed[0] / n as f32, &summed[1..]);
        let (mut got_pos, mut want_pos, mut var) = (0f64, 0f64, 0f64);
        for (i, (&o, &c)) in out.iter().zip(pos).enumerate() {
            if (o.abs() - scale).abs() > 1e-5 * scale {
                return Ok(Err(format!(
                    "element {i}: |{o}| differs from the mean scale {scale}"
                )));
            }
            if scale == 0.0 {
                continue;
            }
            if (o > 0.0 && c < 0.5) || (o < 0.0 && c > n as f32 - 0.5) {
                return Ok(Err(format!(
                    "element {i}: sign of {o} is no worker's sign ({c} of {n} positive)"
                )));
            }
            let p = f64::from(c) / n;
            got_pos += f64::from(u8::from(o > 0.0));
            want_pos += p;
            var += p * (1.0 - p);
        }
        let bound = 6.0 * var.sqrt() + 1.0;
        if (got_pos - want_pos).abs() > bound {
            return Ok(Err(format!(
                "{got_pos} positive outputs, expected {want_pos:.1} +- {bound:.1}: the merge is biased"
            )));
        }
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::rng::rng_for;
    use ndarray::Array2;
    use rand_distr::{Distribution, StandardNormal};

    fn chunk_range(words: usize, n: usize, c: usize) -> std::ops::Range<usize> {
        (c * words / n)..((c + 1) * words / n)
    }

    /// In-process ring: reduce-scatter (at hop s, worker r receives chunk (r-s-1) mod n
    /// from r-1, which aggregates s+1 workers, and merges its own bits into it), then
    /// all-gather. Returns the final bits (identical on every worker).
    fn ring(ws: &mut [Marsit], t: TensorId, wires: &[Vec<u32>]) -> Vec<u32> {
        let n = ws.len();
        let words = wires[0].len();
        let mut buf: Vec<Vec<u32>> = wires.to_vec();
        for s in 0..n.saturating_sub(1) {
            let prev = buf.clone(); // what every worker sends at this hop
            for r in 0..n {
                let c = (r + 2 * n - s - 1) % n;
                let rg = chunk_range(words, n, c);
                let src = (r + n - 1) % n;
                ws[r]
                    .ring_merge(
                        t,
                        s + 1,
                        rg.start,
                        &prev[src][rg.clone()],
                        &mut buf[r][rg.clone()],
                    )
                    .unwrap();
            }
        }
        let mut fin = vec![0u32; words];
        for c in 0..n {
            let rg = chunk_range(words, n, c);
            fin[rg.clone()].copy_from_slice(&buf[(c + n - 1) % n][rg]);
        }
        fin
    }

    fn setup(n: usize, rows: usize, cols: usize) -> Vec<Marsit> {
        (0..n)
            .map(|r| {
                let mut m = Marsit::new(
                    &MethodParams::default(),
                    WorkerCtx {
                        rank: r,
                        world_size: n,
                        seed: 11,
                    },
                )
                .unwrap();
                m.register(0, rows, cols).unwrap();
                m
            })
            .collect()
    }

    fn randn(seed: u64, rows: usize, cols: usize) -> Array2<f32> {
        let mut rng = rng_for(seed, 0, 0, 0);
        Array2::from_shape_fn((rows, cols), |_| StandardNormal.sample(&mut rng))
    }

    #[test]
    fn ring_aggregate_is_unbiased() {
        for n in 2..=4 {
            let (rows, cols) = (3, 70); // 210 bits, 7 words: uneven chunks
            let d = rows * cols;
            let mut ws = setup(n, rows, cols);
            let grads: Vec<_> = (0..n)
                .map(|r| randn(r as u64 + 100 * n as u64, rows, cols))
                .collect();
            let mut wires = Vec::new();
            for (w, g) in ws.iter_mut().zip(&grads) {
                let mut wire = Wire::default();
                w.compress(0, 0, g.view(), &mut wire).unwrap();
                wires.push(wire.ring_u32);
            }
            // Sign bits start after the scale word.
            let bit = |v: &[u32], i: usize| ((v[HEAD + i / 32] >> (i % 32)) & 1) as f64;
            let target: Vec<f64> = (0..d)
                .map(|i| wires.iter().map(|w| bit(w, i)).sum::<f64>() / n as f64)
                .collect();
            let trials = 4000;
            let mut freq = vec![0.0f64; d];
            for step in 0..trials {
                for w in ws.iter_mut() {
                    w.begin_step(step);
                }
                let fin = ring(&mut ws, 0, &wires);
                for (i, f) in freq.iter_mut().enumerate() {
                    *f += bit(&fin, i);
                }
                for i in d..32 * (fin.len() - HEAD) {
                    assert_eq!(bit(&fin, i), 0.0, "padding bits stay 0");
                }
                let scales: f32 = wires.iter().map(|w| f32::from_bits(w[0])).sum();
                assert!(
                    (f32::from_bits(fin[0]) - scales).abs() <= 1e-5 * scales,
                    "the scale word is the sum of the workers' scales"
                );
            }
            let mut z_total = 0.0;
            for i in 0..d {
                let (f, q) = (freq[i] / trials as f64, target[i]);
                let sigma = (q * (1.0 - q) / trials as f64).sqrt();
                if q == 0.0 || q == 1.0 {
                    assert_eq!(f, q, "unanimous bits must be kept (n {n}, i {i})");
                } else {
                    assert!(
                        (f - q).abs() < 5.0 * sigma,
                        "n {n} bit {i}: freq {f} vs mean sign bit {q}"
                    );
                    z_total += (f - q) / sigma;
                }
            }
            // the average standardised error over all bits is N(0, 1/d)-distributed
            assert!(
                (z_total / d as f64).abs() < 5.0 / (d as f64).sqrt(),
                "n {n}: systematic bias {}",
                z_total / d as f64
            );
        }
    }

    #[test]
    fn decompress_and_global_compensation() {
        let n = 3;
        let (rows, cols) = (4, 45);
        let mut ws = setup(n, rows, cols);
        for step in 0..3u64 {
            let grads: Vec<_> = (0..n)
                .map(|r| randn(1000 + 10 * step + r as u64, rows, cols))
                .collect();
            let mut ps = Vec::new();
            let mut wires = Vec::new();
            let mut scale_sum = 0.0f32;
            for (w, g) in ws.iter_mut().zip(&grads) {
                w.begin_step(step);
                let p: Vec<f32> = g
                    .iter()
                    .zip(w.residual(0).unwrap())
                    .map(|(a, b)| a + b)
                    .collect();
                let mut wire = Wire::default();
                wire.reserve(w.wire_capacity(0, 0));
                w.compress(0, 0, g.view(), &mut wire).unwrap();
                assert_eq!(wire.bytes(), 4 + 4 * (rows * cols).div_ceil(32));
                assert!(
                    wire.sum_f32.is_empty(),
                    "the scale rides in the ring message"
                );
                let l1 = p.iter().map(|v| v.abs() as f64).sum::<f64>() / p.len() as f64;
                let scale = f32::from_bits(wire.ring_u32[0]);
                assert!((scale as f64 - l1).abs() < 1e-5 * l1);
                scale_sum += scale;
                ps.push(p);
                wires.push(wire.ring_u32);
            }
            let fin = ring(&mut ws, 0, &wires);
            assert!((f32::from_bits(fin[0]) - scale_sum).abs() <= 1e-5 * scale_sum);
            let scale_sum = f32::from_bits(fin[0]);
            let r = Received {
                sum_f32: &[],
                gathered_u32: &[],
                gather_counts: &[],
                ring_u32: &fin,
                world_size: n,
            };
            let mut outs = Vec::new();
            for (w, p) in ws.iter_mut().zip(&ps) {
                let mut out = Array2::zeros((rows, cols));
                w.decompress(0, 0, &r, out.view_mut()).unwrap();
                let scale = scale_sum / n as f32;
                for (i, (&o, &e)) in out.iter().zip(w.residual(0).unwrap()).enumerate() {
                    let b = (fin[HEAD + i / 32] >> (i % 32)) & 1;
                    assert_eq!(o, if b == 1 { scale } else { -scale });
                    assert!(
                        (o + e - p[i]).abs() <= 1e-6 * (1.0 + p[i].abs()),
                        "e = p - out violated"
                    );
                }
                outs.push(out);
            }
            assert!(
                outs.iter().all(|o| *o == outs[0]),
                "same global result on every worker"
            );
        }
    }

    #[test]
    fn masks_differ_per_rank_and_reproduce() {
        let mut ws = setup(2, 1, 640);
        let inc = vec![0u32; 20];
        let run = |w: &mut Marsit| {
            let mut own = vec![u32::MAX; 20];
            w.ring_merge(0, 1, 0, &inc, &mut own).unwrap();
            own
        };
        let (a, b) = (run(&mut ws[0]), run(&mut ws[1]));
        assert_ne!(a, b);
        assert_eq!(a, run(&mut ws[0]));
        assert!(
            ws[0].ring_merge(0, 1, 15, &inc, &mut [0; 20]).is_err(),
            "chunk past the wire"
        );
        assert!(
            ws[0].ring_merge(1, 1, 0, &inc, &mut [0; 20]).is_err(),
            "unregistered"
        );
    }

    /// Device kernels by hand (this reconstruction's, docs/methods.md; fp32 4 bytes):
    /// 1 x 100 at 4 workers, 1 + ceil(100 / 32) = 5 ring words, chunks of ceil(5 / 4) = 2:
    /// compress `p = g + e` (2 reads, 1 write), `|p|`, `mean |p|` (d + 1 floats), the signs
    /// packed (d floats read, 4 words written); decompress 3 merges of 3 x 4 x 2 bytes,
    /// the unpack (5 words and 100 floats) and `e = p - out`. Nothing for round 1.
    #[test]
    fn device_kernels_by_hand() {
        let ws = setup(4, 1, 100);
        let list = |round: usize, stage: Stage| {
            device::named_bytes(|o| ws[0].device_kernels(0, round, 0, stage, o))
        };
        assert_eq!(
            list(0, Stage::Compress),
            [
                ("p = g + e", 4.0 * 100.0 * 3.0),
                ("|p|", 4.0 * 100.0 * 2.0),
                ("scale = mean |p|", 4.0 * 101.0),
                ("sign bits, packed 32 per word", 4.0 * 100.0 + 4.0 * 4.0),
            ]
        );
        let merge = (
            "ring merge: Bernoulli mask, bit select, scale sum",
            3.0 * 4.0 * 2.0,
        );
        assert_eq!(
            list(0, Stage::Decompress),
            [
                merge,
                merge,
                merge,
                ("out = scale / n * (2b - 1) (unpack)", 4.0 * (5.0 + 100.0)),
                ("e = p - out", 4.0 * 100.0 * 3.0),
            ]
        );
        for stage in [Stage::Compress, Stage::Decompress] {
            assert!(list(1, stage).is_empty());
        }
    }

    /// A received ring of the wrong length, or from no worker, is refused (1 x 100: 5
    /// words), not decoded.
    #[test]
    fn decompress_refuses_a_wrong_ring() {
        let mut ws = setup(2, 1, 100);
        let mut out = Array2::zeros((1, 100));
        let received = |ring: &'static [u32], world_size| Received {
            sum_f32: &[],
            gathered_u32: &[],
            gather_counts: &[],
            ring_u32: ring,
            world_size,
        };
        static FIVE: [u32; 5] = [0; 5];
        static SIX: [u32; 6] = [0; 6];
        for (ring, n) in [(&FIVE[..4], 2), (&SIX[..], 2), (&FIVE[..], 0)] {
            let e = ws[0]
                .decompress(0, 0, &received(ring, n), out.view_mut())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!(
                    "received {} ring words from {n} workers; expected 5",
                    ring.len()
                )),
                "{e}"
            );
        }
        assert!(ws[0]
            .decompress(0, 0, &received(&FIVE, 2), out.view_mut())
            .is_ok());
    }

    /// `micro --check`'s share by hand: the scale `mean |g|` = (1 + 0 + 2 + 0) / 4, then 1
    /// per element of non-negative sign (-0.0 is negative).
    #[test]
    fn check_share_by_hand() {
        let ws = setup(2, 1, 4);
        let mut fresh = setup(2, 1, 4).remove(0);
        let g = Array2::from_shape_vec((1, 4), vec![1.0f32, -0.0, -2.0, 0.0]).unwrap();
        assert_eq!(
            ws[0].check_share(g.view(), &mut fresh).unwrap(),
            [0.75, 1.0, 0.0, 0.0, 1.0]
        );
    }

    /// `micro --check`'s verdict at 2 workers whose scales sum to 3 (mean scale 1.5):
    /// every `|out|` within 1e-5 of 1.5 relative, each sign some worker's (an element no
    /// worker sent positive is not positive, one every worker sent positive not
    /// negative), and the positive outputs within `6 sqrt(sum p (1 - p)) + 1` of
    /// `sum p`, `p` each element's share of positive workers.
    #[test]
    fn check_verdict_by_hand() {
        let verdict = |out: &[f32], summed: &[f32]| {
            let ws = setup(2, 1, out.len());
            let mut fresh = setup(2, 1, out.len()).remove(0);
            let p = MethodParams::default();
            let probe = |r: usize, c: usize| Array2::zeros((r, c));
            let mut c = check::CheckCtx::two_workers((1, out.len()), &p, &[], &mut fresh, &probe);
            ws[0].check_verdict(out, summed, &mut c).unwrap()
        };
        // Exactly at the tolerance passes: mean scale 195.3125, 1e-5 of it 2^-9 in f32,
        // and 195.3125 + 2^-9 is an f32.
        let summed = [390.625, 2.0, 0.0, 1.0, 1.0];
        let at = [195.314_45, -195.3125, 195.3125, -195.3125];
        assert_eq!(at[0] - 195.3125, 1e-5 * 195.3125, "the premise");
        assert_eq!(verdict(&at, &summed), Ok(()));
        // Zero gradients (scale 0): a zero output is of no sign, so it is no worker's
        // wrong sign whether every worker sent -0.0 (no positive sign) or +0.0 (all
        // positive), and no count of signs is judged ...
        assert_eq!(verdict(&[0.0, 0.0], &[0.0, 0.0, 0.0]), Ok(()));
        assert_eq!(verdict(&[0.0], &[0.0, 2.0]), Ok(()));
        // ... also over many elements whose workers all sent +0.0 (sign bit clear: the
        // share counts them positive), where a count of positive outputs would call the
        // merge biased (0 of 4 positive, 4 expected, bound 1).
        assert_eq!(verdict(&[0.0; 4], &[0.0, 2.0, 2.0, 2.0, 2.0]), Ok(()));
        assert_eq!(verdict(&[-0.0; 4], &[0.0, 2.0, 2.0, 2.0, 2.0]), Ok(()));
        // A non-zero output where the scale is zero is still refused.
        assert!(verdict(&[0.0, 1.0], &[0.0, 2.0, 2.0]).is_err());
        // Positive counts 2, 0, 1, 1.
        let summed = [3.0, 2.0, 0.0, 1.0, 1.0];
        assert_eq!(verdict(&[1.5, -1.5, 1.5, -1.5], &summed), Ok(()));
        // 1e-5 off the scale passes (1.5e-5 allowed), 0.1 off does not.
        assert_eq!(verdict(&[1.50001, -1.5, 1.5, -1.5], &summed), Ok(()));
        let e = verdict(&[1.4, -1.5, 1.5, -1.5], &summed).unwrap_err();
        assert!(
            e.starts_with("element 0: |1.4| differs from the mean scale 1.5"),
            "{e}"
        );
        let e = verdict(&[-1.5, -1.5, 1.5, -1.5], &summed).unwrap_err();
        assert!(
            e.starts_with("element 0: sign of -1.5 is no worker's sign"),
            "{e}"
        );
        let e = verdict(&[1.5, 1.5, 1.5, -1.5], &summed).unwrap_err();
        assert!(
            e.starts_with("element 1: sign of 1.5 is no worker's sign"),
            "{e}"
        );
        // 100 elements each positive at one worker of 2: expected 50 positive outputs,
        // p (1 - p) = 1/4 each, bound 6 x 5 + 1 = 31: 19 to 81 pass, 18 and 82 do not.
        let mut summed = vec![3.0f32];
        summed.extend([1.0f32; 100]);
        let out = |pos: usize| -> Vec<f32> {
            (0..100).map(|i| if i < pos { 1.5 } else { -1.5 }).collect()
        };
        for pos in [19, 50, 81] {
            assert_eq!(verdict(&out(pos), &summed), Ok(()), "{pos}");
        }
        for pos in [18, 82] {
            let e = verdict(&out(pos), &summed).unwrap_err();
            assert!(
                e.starts_with(&format!("{pos} positive outputs, expected 50.0 +- 31.0")),
                "{e}"
            );
        }
    }
}
