//! QSGD (Alistarh et al., NeurIPS 2017, Sec. 3.1): stochastic quantisation with `s`
//! levels (`qsgd_levels`). Per tensor `norm = ||g||_2`; element `i` becomes
//! `sign(g_i) * norm * l_i / s` with `l_i = floor(x) + Bernoulli(x - floor(x))`,
//! `x = s |g_i| / norm`, so `E[l_i] = x` (unbiased). Randomness is per worker:
//! `rng_for(seed, step, tensor, rank)` (tagged). No error feedback.
//!
//! Wire (`gather_u32`, all-gather): `[norm.to_bits()]` followed by the codes
//! `(l_i << 1) | negative_i` of `b = 1 + ceil(log2(s+1))` bits each, packed densely
//! LSB-first into u32 words (code `i` starts at bit `b*i` of the stream; codes may
//! straddle words): `1 + ceil(b*d/32)` words. Decompress averages the workers'
//! dequantised tensors.

use ndarray::{ArrayView2, ArrayViewMut2};
use rand::RngCore;

use super::bits::{self, Slot};
use super::kernels::{mix, rng_for};
use super::{
    Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx,
};

const NAME: &str = "qsgd";
const STREAM_TAG: u64 = 0x5153_4744; // "QSGD"
/// Largest accepted `qsgd_levels` (levels beyond f32 precision are meaningless).
pub const MAX_LEVELS: u32 = 1 << 24;

/// QSGD compressor (CLI `qsgd`).
#[derive(Debug, Clone)]
pub struct Qsgd {
    ctx: WorkerCtx,
    step: u64,
    levels: u32,
    /// Code width `b = 1 + ceil(log2(s + 1))` bits.
    code_bits: u32,
    slots: Vec<Option<Slot<()>>>,
}

/// `b = 1 + ceil(log2(s + 1))`: one sign bit plus enough bits for levels `0..=s`.
pub fn code_bits(levels: u32) -> u32 {
    1 + (64 - (levels as u64).leading_zeros()) // ceil(log2(s+1)) = bit length of s
}

/// Words of a wire for `d` elements: `1 + ceil(b*d/32)`.
pub fn wire_words(levels: u32, d: usize) -> usize {
    1 + (code_bits(levels) as usize * d).div_ceil(32)
}

impl Qsgd {
    /// Reads `qsgd_levels` in `[1, 2^24]`.
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        if !(1..=MAX_LEVELS).contains(&p.qsgd_levels) {
            return Err(bits::bad_param(
                NAME,
                "qsgd_levels",
                p.qsgd_levels,
                &format!("must be in [1, {MAX_LEVELS}] (default 127)"),
            ));
        }
        Ok(Qsgd {
            ctx,
            step: 0,
            levels: p.qsgd_levels,
            code_bits: code_bits(p.qsgd_levels),
            slots: Vec::new(),
        })
    }
}

/// Call `f(i, code)` for the first `d` codes of `b` bits packed in `words`.
#[inline]
fn for_each_code(words: &[u32], b: u32, d: usize, mut f: impl FnMut(usize, u32)) {
    let mask = (1u64 << b) - 1;
    let (mut acc, mut have, mut next) = (0u64, 0u32, 0usize);
    for i in 0..d {
        if have < b {
            acc |= (words.get(next).copied().unwrap_or(0) as u64) << have;
            next += 1;
            have += 32;
        }
        f(i, (acc & mask) as u32);
        acc >>= b;
        have -= b;
    }
}

impl Compressor for Qsgd {
    fn name(&self) -> &'static str {
        NAME
    }

    fn aggregation(&self) -> Aggregation {
        Aggregation::AllGather
    }

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        rows.checked_mul(cols)
            .and_then(|d| d.checked_mul(self.code_bits as usize))
            .ok_or_else(|| bits::tensor_err(NAME, t, "tensor too large"))?;
        bits::put_slot(&mut self.slots, t, rows, cols, ());
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        match self.slots.get(t).and_then(|s| s.as_ref()) {
            Some(sl) => WireLen {
                gather_u32: wire_words(self.levels, sl.d()),
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
        let (s, b) = (self.levels, self.code_bits);
        let mut rng = rng_for(
            self.ctx.seed,
            self.step,
            t,
            mix(STREAM_TAG, self.ctx.rank as u64),
        );
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        let g = bits::input_slice(NAME, t, sl, &grad)?;
        let norm = g.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt() as f32;
        wire.clear();
        wire.gather_u32.push(norm.to_bits());
        let k = if norm > 0.0 && norm.is_finite() {
            s as f32 / norm
        } else {
            0.0
        };
        let (mut acc, mut have) = (0u64, 0u32);
        let mut rand_bits = 0u64;
        for (i, &v) in g.iter().enumerate() {
            if i % 2 == 0 {
                rand_bits = rng.next_u64();
            }
            let u = ((rand_bits >> (32 * (i % 2) + 8)) as u32 & 0xff_ffff) as f32
                * (1.0 / (1u32 << 24) as f32);
            let x = v.abs() * k;
            let fl = x.floor();
            let level = ((fl + if u < x - fl { 1.0 } else { 0.0 }) as u32).min(s); // NaN -> 0
            let code = (level << 1) | (v.to_bits() >> 31);
            acc |= (code as u64) << have;
            have += b;
            if have >= 32 {
                wire.gather_u32.push(acc as u32);
                acc >>= 32;
                have -= 32;
            }
        }
        if have > 0 {
            wire.gather_u32.push(acc as u32);
        }
        Ok(())
    }

    fn decompress(
        &mut self,
        t: TensorId,
        _round: usize,
        received: &Received,
        out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let (s, b) = (self.levels, self.code_bits);
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        bits::check_gathered(NAME, t, received, wire_words(s, sl.d()))?;
        let out = bits::output_slice(NAME, t, sl, out)?;
        let n = received.world_size;
        for w in 0..n {
            let sec = received.gathered(w);
            let unit = f32::from_bits(sec[0]) / (s as f32 * n as f32);
            for_each_code(&sec[1..], b, out.len(), |i, code| {
                let v = f32::from_bits(((code >> 1) as f32 * unit).to_bits() | (code << 31));
                if w == 0 {
                    out[i] = v;
                } else {
                    out[i] += v;
                }
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;
    use rand_distr::{Distribution, StandardNormal};

    fn randn(seed: u64, rows: usize, cols: usize) -> Array2<f32> {
        let mut rng = rng_for(seed, 0, 0, 0);
        Array2::from_shape_fn((rows, cols), |_| StandardNormal.sample(&mut rng))
    }

    fn make(levels: u32, rank: usize, n: usize, rows: usize, cols: usize) -> Qsgd {
        let p = MethodParams {
            qsgd_levels: levels,
            ..MethodParams::default()
        };
        let mut q = Qsgd::new(
            &p,
            WorkerCtx {
                rank,
                world_size: n,
                seed: 3,
            },
        )
        .unwrap();
        q.register(0, rows, cols).unwrap();
        q
    }

    #[test]
    fn code_width_and_wire_size() {
        assert_eq!(code_bits(1), 2);
        assert_eq!(code_bits(2), 3);
        assert_eq!(code_bits(3), 3);
        assert_eq!(code_bits(127), 8);
        assert_eq!(code_bits(128), 9);
        assert_eq!(code_bits(MAX_LEVELS), 26);
        for &(levels, rows, cols) in &[
            (1u32, 1usize, 1usize),
            (127, 3, 33),
            (5, 7, 100),
            (1000, 2, 17),
        ] {
            let mut q = make(levels, 0, 1, rows, cols);
            let mut wire = Wire::default();
            wire.reserve(q.wire_capacity(0, 0));
            let cap = wire.gather_u32.capacity();
            q.compress(0, 0, randn(1, rows, cols).view(), &mut wire)
                .unwrap();
            assert_eq!(wire.gather_u32.capacity(), cap);
            let b = code_bits(levels) as usize;
            assert_eq!(wire.bytes(), 4 + 4 * (b * rows * cols).div_ceil(32));
        }
        let ctx = WorkerCtx {
            rank: 0,
            world_size: 1,
            seed: 0,
        };
        assert!(Qsgd::new(
            &MethodParams {
                qsgd_levels: 0,
                ..MethodParams::default()
            },
            ctx
        )
        .is_err());
        assert!(Qsgd::new(
            &MethodParams {
                qsgd_levels: MAX_LEVELS + 1,
                ..MethodParams::default()
            },
            ctx
        )
        .is_err());
    }

    #[test]
    fn levels_in_range_and_adjacent() {
        for &levels in &[1u32, 3, 127] {
            let (rows, cols) = (5, 61);
            let g = randn(7, rows, cols);
            let mut q = make(levels, 0, 1, rows, cols);
            let mut wire = Wire::default();
            q.compress(0, 0, g.view(), &mut wire).unwrap();
            let norm = f32::from_bits(wire.gather_u32[0]);
            let gs = g.as_slice().unwrap();
            assert!((norm - gs.iter().map(|v| v * v).sum::<f32>().sqrt()).abs() < 1e-4 * norm);
            for_each_code(
                &wire.gather_u32[1..],
                code_bits(levels),
                gs.len(),
                |i, code| {
                    let (l, neg) = (code >> 1, code & 1);
                    assert!(l <= levels);
                    let x = gs[i].abs() / norm * levels as f32;
                    assert!(
                        l as f32 >= x.floor() - 1e-4 && l as f32 <= x.floor() + 1.0,
                        "level {l} for x {x}"
                    );
                    if l > 0 {
                        assert_eq!(neg == 1, gs[i] < 0.0);
                    }
                },
            );
        }
    }

    #[test]
    fn unbiased_over_seeds_and_averaged_over_workers() {
        let (rows, cols, n, levels) = (2, 40, 2, 3);
        let grads: Vec<_> = (0..n).map(|r| randn(20 + r as u64, rows, cols)).collect();
        let mean: Array2<f32> = (&grads[0] + &grads[1]) / n as f32;
        let mut ws: Vec<Qsgd> = (0..n).map(|r| make(levels, r, n, rows, cols)).collect();
        let trials = 4000;
        let mut avg = Array2::<f64>::zeros((rows, cols));
        let mut sq = Array2::<f64>::zeros((rows, cols));
        for step in 0..trials {
            let mut gathered = Vec::new();
            let mut counts = Vec::new();
            for (w, g) in ws.iter_mut().zip(&grads) {
                w.begin_step(step);
                let mut wire = Wire::default();
                w.compress(0, 0, g.view(), &mut wire).unwrap();
                counts.push(wire.gather_u32.len());
                gathered.extend_from_slice(&wire.gather_u32);
            }
            let r = Received {
                sum_f32: &[],
                gathered_u32: &gathered,
                gather_counts: &counts,
                ring_u32: &[],
                world_size: n,
            };
            let mut out = Array2::<f32>::zeros((rows, cols));
            ws[0].decompress(0, 0, &r, out.view_mut()).unwrap();
            avg.zip_mut_with(&out, |a, &o| *a += o as f64);
            sq.zip_mut_with(&out, |a, &o| *a += (o as f64) * (o as f64));
        }
        for ((a, s), m) in avg.iter().zip(&sq).zip(&mean) {
            let mu = a / trials as f64;
            let var = (s / trials as f64 - mu * mu).max(1e-12);
            let se = (var / trials as f64).sqrt();
            assert!(
                (mu - *m as f64).abs() < 5.0 * se + 1e-6,
                "mean {mu} vs {m} (se {se})"
            );
        }
    }
}
