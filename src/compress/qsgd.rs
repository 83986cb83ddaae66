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
use super::device::{self, Out, BOOL, F32};
use super::{
    Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx,
};
use crate::measure::rng::{mix, rng_for};
use crate::roofline::Stage;

const NAME: &str = "qsgd";

/// QSGD's description ([`super::registry::SPECS`]).
pub const SPEC: super::spec::MethodSpec = super::spec::MethodSpec {
    name: NAME,
    summary: "stochastic quantisation to s levels of |g| / ||g||_2, fixed-width codes all-gathered; no error feedback",
    aggregation: Aggregation::AllGather,
    rounds: 1,
    phases: 1,
    params: &["qsgd_levels"],
    density: None,
    min_compression_rate: None,
    owns_momentum: false,
    by_elements: true,
    wire_bytes: "4 (1 + ceil(b d / 32)), b = 1 + ceil(log2(qsgd_levels + 1))",
    memory: "none beyond scratch",
    // Every rank's codes received (`micro --methods qsgd --qsgd-levels 16777215 --shape
    // 4096x4096` at 8 ranks peaked at 661 MiB against 576 MiB estimated without them).
    state_bytes: Some(|p, numels, world_size| {
        super::spec::state_sum(
            numels,
            |_| 0.0,
            |d| world_size as f64 * 4.0 * wire_words(p.qsgd_levels, d) as f64,
        )
    }),
    citations: &[
        "Alistarh et al., \"QSGD\", NeurIPS 2017, Sec. 3.1",
        "sands-lab/grace grace_dl/torch/compressor/qsgd.py",
    ],
    build: |p, ctx| Ok(Box::new(Qsgd::new(p, ctx)?)),
    fusion_sizing: None,
    reference_costs: super::spec::ReferenceCosts {
        source: super::spec::REFERENCE_FIT,
        compress: super::spec::LinearCost::new(0.0, 3.2396673241390216e-8),
        feedback: super::spec::LinearCost::new(4.1491425618520985e-8, 1.538839825355359e-13),
        decompress: super::spec::LinearCost::new(0.0, 8.963581020801419e-10),
    },
};
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
    if b == 8 {
        // Four whole codes a word.
        for (j, &w) in words.iter().enumerate().take(d.div_ceil(4)) {
            for c in 0..4.min(d - 4 * j) {
                f(4 * j + c, (w >> (8 * c)) & 0xff);
            }
        }
        return;
    }
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

/// `||g||_2` as f32, summed in f64 over eight interleaved partial sums (a single running
/// sum is bound by the add latency, ~4x slower on large tensors).
fn norm2(g: &[f32]) -> f32 {
    let mut acc = [0f64; 8];
    let mut chunks = g.chunks_exact(8);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v as f64 * v as f64;
        }
    }
    for (a, &v) in acc.iter_mut().zip(chunks.remainder()) {
        *a += v as f64 * v as f64;
    }
    acc.iter().sum::<f64>().sqrt() as f32
}

/// The code `(l << 1) | negative` of element `v` (`k = s / norm`, `u` uniform in [0, 1)):
/// `l = floor(x) + [u < x - floor(x)]`, `x = |v| k`, at most `s` (NaN gives 0).
#[inline(always)]
fn code(v: f32, k: f32, s: u32, u: f32) -> u32 {
    let x = v.abs() * k;
    let fl = x.floor();
    // Branch-free: the rounding direction is a coin flip the predictor cannot learn.
    // Equal to `((fl + up) as u32).min(s)` for every x, as `s <= 2^24`.
    let level = (fl as u32).saturating_add(u32::from(u < x - fl)).min(s);
    (level << 1) | (v.to_bits() >> 31)
}

/// The uniform of element `i`: 24 bits of the 64-bit draw shared by elements `2j, 2j+1`.
#[inline(always)]
fn uniform(rand_bits: u64, i: usize) -> f32 {
    ((rand_bits >> (32 * (i % 2) + 8)) as u32 & 0xff_ffff) as f32 * (1.0 / (1u32 << 24) as f32)
}

/// Quantise `g` and append the `b`-bit codes, packed LSB-first, to `out`; one draw of
/// `rng` per two elements.
fn pack_codes(g: &[f32], k: f32, s: u32, b: u32, rng: &mut impl RngCore, out: &mut Vec<u32>) {
    let (mut acc, mut have) = (0u64, 0u32);
    let mut rand_bits = 0u64;
    for (i, &v) in g.iter().enumerate() {
        if i % 2 == 0 {
            rand_bits = rng.next_u64();
        }
        acc |= (code(v, k, s, uniform(rand_bits, i)) as u64) << have;
        have += b;
        if have >= 32 {
            out.push(acc as u32);
            acc >>= 32;
            have -= 32;
        }
    }
    if have > 0 {
        out.push(acc as u32);
    }
}

/// [`pack_codes`] for 8-bit codes (the default 127 levels): four codes a word, no carry
/// between words; the same draws and words. (Drawing a block's randoms first, so that
/// the codes could vectorise, measured no faster.)
fn pack_codes_8(g: &[f32], k: f32, s: u32, rng: &mut impl RngCore, out: &mut Vec<u32>) {
    let mut quads = g.chunks_exact(4);
    for q in &mut quads {
        let (r0, r1) = (rng.next_u64(), rng.next_u64());
        out.push(
            code(q[0], k, s, uniform(r0, 0))
                | code(q[1], k, s, uniform(r0, 1)) << 8
                | code(q[2], k, s, uniform(r1, 0)) << 16
                | code(q[3], k, s, uniform(r1, 1)) << 24,
        );
    }
    let rest = quads.remainder();
    if !rest.is_empty() {
        pack_codes(rest, k, s, 8, rng, out);
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
                // Fixed-width codes plus the norm: the same length every step.
                gather_exact: true,
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
        let norm = norm2(g);
        wire.clear();
        wire.gather_u32.push(norm.to_bits());
        let k = if norm > 0.0 && norm.is_finite() {
            s as f32 / norm
        } else {
            0.0
        };
        if b == 8 {
            pack_codes_8(g, k, s, &mut rng, &mut wire.gather_u32);
        } else {
            pack_codes(g, k, s, b, &mut rng, &mut wire.gather_u32);
        }
        Ok(())
    }

    /// sands-lab/grace `grace_dl/torch/compressor/qsgd.py` with the codes packed `b` bits
    /// each (docs/methods.md, "Device kernels"): compress `norm`, `|g|`, `s / norm`,
    /// `level`, `floor`, `uniform_`, `level - floor`, `<`, cast, `+`, `sign`, `*`, pack: 13
    /// kernels; decompress per worker unpack, `norm / s`, `*`, `+=`, then `/ n`: `4n + 1`.
    fn device_kernels(&self, t: TensorId, round: usize, _phase: usize, stage: Stage, out: Out) {
        let Some(sl) = device::round0(&self.slots, t, round) else {
            return;
        };
        let d = sl.d();
        let (df, codes) = (d as f64, F32 * (wire_words(self.levels, d) - 1) as f64);
        match stage {
            Stage::Compress => {
                out(device::ew("norm = |g|_2", d, 1, 0));
                out(device::ew("|g|", d, 1, 1));
                out(device::mem("s / norm (scalar)", 2.0 * F32));
                out(device::ew("level = |g| * s / norm", d, 1, 1));
                out(device::ew("floor(level)", d, 1, 1));
                out(device::ew("prob = uniform_() (RNG)", d, 0, 1));
                out(device::ew("level - floor", d, 2, 1));
                out(device::mem("prob < level - floor", (2.0 * F32 + BOOL) * df));
                out(device::mem("bool to float", (BOOL + F32) * df));
                out(device::ew("new level = floor + next", d, 2, 1));
                out(device::ew("sign(g)", d, 1, 1));
                out(device::ew("new level * sign", d, 2, 1));
                out(device::mem("pack b-bit codes", F32 * df + codes));
            }
            Stage::Decompress => {
                for _ in 0..self.ctx.world_size.max(1) {
                    out(device::mem(
                        "unpack worker's codes to float",
                        codes + F32 * df,
                    ));
                    out(device::mem("norm / s (scalar)", 2.0 * F32));
                    out(device::ew("* norm / s", d, 1, 1));
                    out(device::ew("sum += decoded", d, 2, 1));
                }
                out(device::ew("sum / n", d, 1, 1));
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
    fn byte_codes_pack_as_the_general_path() {
        use rand::SeedableRng;
        let mut vals = randn(7, 1, 61).into_raw_vec_and_offset().0;
        vals.extend([0.0, -0.0, f32::NAN, f32::INFINITY, -1e30, 1e-30]);
        vals.extend(randn(8, 1, 1000).iter());
        for n in (0..70).chain([1000, 1066, 1067]) {
            let g = &vals[..n];
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut r1 = rand_pcg::Pcg64Mcg::seed_from_u64(n as u64);
            let mut r2 = r1.clone();
            pack_codes(g, 3.7, 127, 8, &mut r1, &mut a);
            pack_codes_8(g, 3.7, 127, &mut r2, &mut b);
            assert_eq!(a, b, "n = {n}");
            assert_eq!(a.len(), (8 * n).div_ceil(32));
        }
    }

    #[test]
    fn norm_matches_a_plain_f64_sum() {
        let g = randn(9, 37, 53).into_raw_vec_and_offset().0;
        let plain = g.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt() as f32;
        assert!((norm2(&g) - plain).abs() <= plain * 1e-6);
        assert_eq!(norm2(&[]), 0.0);
        assert_eq!(norm2(&[3.0, 4.0]), 5.0);
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

    /// SPEC's state: every rank's wire, `4 (1 + ceil(b d / 32))` bytes a tensor, by hand.
    #[test]
    fn state_bytes_by_hand() {
        let est = SPEC.state_bytes.unwrap();
        let p = MethodParams {
            qsgd_levels: 127,
            ..MethodParams::default()
        };
        // b = 8: 10 elements 1 + ceil(80 / 32) = 4 words, 33 elements 1 + 9 = 10 words;
        // at 4 ranks 4 x 4 x (4 + 10) = 224 bytes.
        assert_eq!(est(&p, &[10, 33], 4), 224);
        // b = 3 (3 levels): 11 elements 1 + ceil(33 / 32) = 3 words; at 3 ranks 36 bytes.
        let p = MethodParams {
            qsgd_levels: 3,
            ..MethodParams::default()
        };
        assert_eq!(est(&p, &[11], 3), 36);
    }

    /// The code of one element by the paper's rule (Sec. 3.1): `l = floor(x) + [u < x -
    /// floor(x)]`, `x = |v| s / norm`, at most `s`, shifted left past the sign bit.
    #[test]
    fn code_by_hand() {
        // x = 0.4375 x 8 = 3.5: up below u = 0.5, down at it.
        assert_eq!(code(0.4375, 8.0, 5, 0.49), 4 << 1);
        assert_eq!(code(0.4375, 8.0, 5, 0.5), 3 << 1);
        assert_eq!(code(-0.4375, 8.0, 5, 0.49), (4 << 1) | 1);
        // x = 3 exactly: never up, even at u = 0.
        assert_eq!(code(0.375, 8.0, 5, 0.0), 3 << 1);
        // x = 8 is clamped to s = 5; NaN gives level 0; -0.0 keeps its sign bit.
        assert_eq!(code(1.0, 8.0, 5, 0.0), 5 << 1);
        assert_eq!(code(f32::NAN, 8.0, 5, 0.0), 0);
        assert_eq!(code(-0.0, 8.0, 5, 0.0), 1);
    }

    /// Elements `2j` and `2j + 1` take bits 8..32 and 40..64 of the draw, over 2^24.
    #[test]
    fn uniform_by_hand() {
        // bits 8..32: 1; bits 32..40 and 0..8: noise; bits 40..64: 0xc00000.
        let bits = (0xc0_0000u64 << 40) | (0x5a << 32) | (1 << 8) | 0xab;
        assert_eq!(uniform(bits, 0), 1.0 / 16_777_216.0);
        assert_eq!(uniform(bits, 1), 0.75);
        assert_eq!(uniform(bits, 2), 1.0 / 16_777_216.0);
        assert_eq!(uniform(bits, 3), 0.75);
        assert_eq!(uniform(u64::MAX, 0), 16_777_215.0 / 16_777_216.0);
    }

    /// Codes of `b` bits packed LSB-first, code `i` at bit `b i` of the stream, read
    /// back, for widths that straddle words and for the byte path.
    #[test]
    fn for_each_code_reads_the_stream_bit_by_bit() {
        for (b, d) in [(3u32, 23usize), (8, 7), (8, 8), (5, 13), (26, 5)] {
            let codes: Vec<u32> = (0..d as u32)
                .map(|i| i.wrapping_mul(2_654_435_761) & ((1u32 << b) - 1))
                .collect();
            // The stream written bit by bit.
            let mut words = vec![0u32; (b as usize * d).div_ceil(32)];
            for (i, &c) in codes.iter().enumerate() {
                for k in 0..b as usize {
                    if c >> k & 1 == 1 {
                        let bit = b as usize * i + k;
                        words[bit / 32] |= 1 << (bit % 32);
                    }
                }
            }
            let mut got = vec![u32::MAX; d];
            for_each_code(&words, b, d, |i, c| got[i] = c);
            assert_eq!(got, codes, "b = {b}, d = {d}");
        }
    }

    /// Two workers' wires written by hand (3 levels, b = 3; 127 levels, b = 8): each
    /// element `sign norm l / s`, averaged over the workers.
    #[test]
    fn decompress_by_hand() {
        let received = |gathered: &[u32], counts: &[usize]| {
            let mut out = Array2::from_elem((1, 3), 7.0f32);
            let mut q = make(3, 0, counts.len(), 1, 3);
            let r = Received {
                sum_f32: &[],
                gathered_u32: gathered,
                gather_counts: counts,
                ring_u32: &[],
                world_size: counts.len(),
            };
            q.decompress(0, 0, &r, out.view_mut()).unwrap();
            out
        };
        // Worker 0: norm 2, (l, negative) = (3, +), (1, -), (0, +): codes 6, 3, 0 at bits
        // 0, 3, 6 = 30. Worker 1: norm 4, (1, +), (2, +), (3, -): 2 | 4 << 3 | 7 << 6 = 482.
        // Units 2 / (3 x 2) and 4 / (3 x 2): [1 + 2/3, -1/3 + 4/3, 0 - 2] = [5/3, 1, -2].
        let out = received(&[2f32.to_bits(), 30, 4f32.to_bits(), 482], &[2, 2]);
        for (o, w) in out.iter().zip([5.0 / 3.0, 1.0, -2.0]) {
            assert!((o - w).abs() < 1e-6, "{o} vs {w}");
        }
        // One worker alone: its own dequantised values, 2 x [1, -1/3, 0].
        let out = received(&[2f32.to_bits(), 30], &[2]);
        for (o, w) in out.iter().zip([2.0, -2.0 / 3.0, 0.0]) {
            assert!((o - w).abs() < 1e-6, "{o} vs {w}");
        }
        // A wire of the wrong length is refused.
        let mut q = make(3, 0, 1, 1, 3);
        let mut out = Array2::zeros((1, 3));
        let bad = [2f32.to_bits(), 30, 0];
        let r = Received {
            sum_f32: &[],
            gathered_u32: &bad,
            gather_counts: &[3],
            ring_u32: &[],
            world_size: 1,
        };
        assert!(q.decompress(0, 0, &r, out.view_mut()).is_err());

        // 127 levels (four codes a word), norm 127 so a level is its value: 1 x 5 of
        // [1, -2, 3, -4, 5] is codes 2, 5, 6, 9 in word 0 and 10 in word 1.
        let mut q = make(127, 0, 1, 1, 5);
        let words = [127f32.to_bits(), 2 | 5 << 8 | 6 << 16 | 9 << 24, 10];
        let r = Received {
            sum_f32: &[],
            gathered_u32: &words,
            gather_counts: &[3],
            ring_u32: &[],
            world_size: 1,
        };
        let mut out = Array2::zeros((1, 5));
        q.decompress(0, 0, &r, out.view_mut()).unwrap();
        assert_eq!(out.as_slice().unwrap(), [1.0, -2.0, 3.0, -4.0, 5.0]);
    }

    /// The wire of a registered tensor: `1 + ceil(b d / 32)` words, the same every step
    /// (`gather_exact`); nothing for a tensor not registered; a tensor whose bits overflow
    /// is refused.
    #[test]
    fn wire_capacity_and_register_by_hand() {
        let q = make(3, 0, 1, 2, 11);
        let w = q.wire_capacity(0, 0);
        assert_eq!(
            (w.gather_u32, w.gather_exact),
            (1 + 66usize.div_ceil(32), true)
        );
        let w = q.wire_capacity(1, 0);
        assert_eq!((w.gather_u32, w.gather_exact), (0, false));
        let mut q = make(3, 0, 1, 2, 11);
        assert!(q.register(1, usize::MAX, 2).is_err());
        // rows x cols fits, times b = 3 bits does not.
        assert!(q.register(1, usize::MAX / 2, 1).is_err());
    }

    /// The device kernels of grace's qsgd.py (docs/methods.md, "Device kernels"): 13 to
    /// compress; per worker unpack, `norm / s`, `*`, `+=`, then `/ n` to decompress;
    /// bytes by hand for a 2 x 11 tensor at 3 levels and 2 workers; nothing for round 1.
    #[test]
    fn device_kernels_by_hand() {
        let q = make(3, 0, 2, 2, 11);
        let list = |round: usize, stage: Stage| {
            device::named_bytes(|o| q.device_kernels(0, round, 0, stage, o))
        };
        // d = 22: an fp32 pass is 88 bytes; the codes ceil(3 x 22 / 32) = 3 words, 12 bytes.
        assert_eq!(
            list(0, Stage::Compress),
            [
                ("norm = |g|_2", 88.0),
                ("|g|", 176.0),
                ("s / norm (scalar)", 8.0),
                ("level = |g| * s / norm", 176.0),
                ("floor(level)", 176.0),
                ("prob = uniform_() (RNG)", 88.0),
                ("level - floor", 264.0),
                ("prob < level - floor", (8.0 + 1.0) * 22.0),
                ("bool to float", (1.0 + 4.0) * 22.0),
                ("new level = floor + next", 264.0),
                ("sign(g)", 176.0),
                ("new level * sign", 264.0),
                ("pack b-bit codes", 88.0 + 12.0),
            ]
        );
        let worker = [
            ("unpack worker's codes to float", 12.0 + 88.0),
            ("norm / s (scalar)", 8.0),
            ("* norm / s", 176.0),
            ("sum += decoded", 264.0),
        ];
        let mut want = [worker, worker].concat();
        want.push(("sum / n", 176.0));
        assert_eq!(list(0, Stage::Decompress), want);
        for stage in [Stage::Compress, Stage::Decompress] {
            assert!(list(1, stage).is_empty());
        }
    }
}
