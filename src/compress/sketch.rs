//! Count Sketch compression (Charikar et al., ICALP 2002) as used by Sketch-Fusion SGD
//! (Dai et al., JPDC 2024; METHODS.md, Sketch-Fusion SGD), without the fusion planner:
//! - compress: `p = g + e` (kept in the residual buffer); a table `S` of `r` rows by
//!   `c = ceil(sketch_cols_per_k * k)` columns, `k = ceil(rho * d)`,
//!   `S[j][h_j(i)] += s_j(i) * p_i`; wire `sum_f32 = S` (`r*c` floats). Sketches are
//!   linear, so the harness all-reduces (sums) them.
//! - decompress: `est_i = median_j s_j(i) * S_sum[j][h_j(i)]` (mean of the two middle
//!   values for even `r`); keep the `k` largest `|est_i|` (exact selection, ties broken
//!   by lower index); `out = kept est / n`, zeros elsewhere; `e = p - kept est`
//!   (unscaled by n).
//!
//! Hashes are computed on the fly, identical on every worker: per (run seed, step,
//! tensor, row) four random 64-bit keys; bucket `h_j(i)` = high 32 bits of
//! `a*i + b mod 2^64` (multiply-add-shift, Dietzfelbinger 1996: 2-independent for
//! 32-bit keys) reduced to `[0, c)` by a multiply-shift (Lemire 2019), and sign `s_j(i)`
//! = top bit of `a'*i + b'`.
//!
//! Compress, large tables (more than `STRIDE_MIN_TABLE_BYTES` per row): each row is
//! scattered in its own *stride order* (`Stride`): elements `q*m + r` for 256 consecutive
//! `r` at a time, where `m` is a continued-fraction denominator of `a / 2^64`, so every
//! lane walks its table row almost sequentially and the table traffic stays in L1 instead
//! of a random read-modify-write into a megabyte-sized row per element (1.9x here).
//! Smaller tables: L2-sized blocks, one pass forming `p` and every row's buckets and
//! signed values, then a scatter with software prefetch a fixed distance ahead (cf. group
//! prefetching, Chen et al., ICDE 2004), each cell summed in index order.

use ndarray::{ArrayView2, ArrayViewMut2};
use rand::RngCore;

use super::bits::{self, Slot, SIGN_BIT};
use super::kernels::{mix, rng_for};
use super::{Aggregation, Compressor, MethodParams, Received, Result, TensorId, Wire, WireLen, WorkerCtx};

const NAME: &str = "sketch";
/// Stream tag of the hash keys.
const STREAM_TAG: u64 = 0x534b_4554_4348; // "SKETCH"

/// Bucket and sign hash of one sketch row.
#[derive(Clone, Copy, Debug)]
struct RowHash {
    a: u64,
    b: u64,
    sa: u64,
    sb: u64,
    c: u64,
}

impl RowHash {
    fn new(seed: u64, step: u64, t: TensorId, row: usize, c: usize) -> Self {
        let mut rng = rng_for(seed, step, t, mix(STREAM_TAG, row as u64));
        RowHash { a: rng.next_u64() | 1, b: rng.next_u64(), sa: rng.next_u64() | 1, sb: rng.next_u64(), c: c as u64 }
    }

    /// Hash state at element `i`: (`a*i + b`, `a'*i + b'`); advancing to `i + 1` adds
    /// (`a`, `a'`), so sequential scans need no multiplication.
    #[inline(always)]
    fn at(&self, i: usize) -> (u64, u64) {
        (self.a.wrapping_mul(i as u64).wrapping_add(self.b), self.sa.wrapping_mul(i as u64).wrapping_add(self.sb))
    }

    /// Advance a state from [`RowHash::at`] by one element.
    #[inline(always)]
    fn step(&self, st: &mut (u64, u64)) {
        st.0 = st.0.wrapping_add(self.a);
        st.1 = st.1.wrapping_add(self.sa);
    }

    /// `h_j(i)` in `[0, c)` from the state.
    #[inline(always)]
    fn bucket(&self, st: (u64, u64)) -> usize {
        (((st.0 >> 32) * self.c) >> 32) as usize
    }

    /// `s_j(i)` as an f32 sign-bit mask (`SIGN_BIT` for -1, 0 for +1) from the state.
    #[inline(always)]
    fn sign_bit(&self, st: (u64, u64)) -> u32 {
        ((st.1 >> 63) as u32) << 31
    }
}

/// Per-tensor state.
#[derive(Debug, Clone)]
struct State {
    /// Residual `e`; holds `p` between compress and decompress.
    e: Vec<f32>,
    k: usize,
    c: usize,
}

/// Count Sketch compressor (CLI `sketch`).
#[derive(Debug, Clone)]
pub struct Sketch {
    ctx: WorkerCtx,
    step: u64,
    density: f64,
    rows: usize,
    cols_per_k: f64,
    slots: Vec<Option<Slot<State>>>,
    /// `|est_i|` bits for the selection (shared by all tensors; sized to the largest d).
    mag: Vec<u32>,
    /// The `r` row estimates of one element (median scratch).
    med: Vec<f32>,
    /// Row hashes of the current tensor and step, and their scan states (scratch).
    hs: Vec<RowHash>,
    cur: Vec<(u64, u64)>,
    /// Stride order of each row for the current tensor, if the table is large (scratch).
    strides: Vec<Option<Stride>>,
    /// Compress scratch, `r` blocks each: buckets and signed values (sized in `register`).
    bk: Vec<u32>,
    sv: Vec<f32>,
}

/// Elements per compress block (scratch `8 * r * BLOCK` bytes).
const BLOCK: usize = 8192;
/// Scatter prefetch distance, in elements.
const AHEAD: usize = 32;

/// One compress block: `e += g` (then `e` holds `p`), every row's buckets and signed
/// values, then per row `table[b] += v` with the line for `AHEAD` elements later
/// prefetched. `st` holds the rows' hash states at the block start and is advanced.
fn compress_block(hs: &[RowHash], st: &mut [(u64, u64)], e: &mut [f32], g: &[f32], tables: &mut [f32], bk: &mut [u32], sv: &mut [f32]) {
    let n = e.len();
    let rows = hs.iter().zip(st.iter_mut()).zip(bk.chunks_exact_mut(n).zip(sv.chunks_exact_mut(n)));
    for (j, ((h, s), (bkj, svj))) in rows.enumerate() {
        let mut q = *s;
        if j == 0 {
            for (((x, &gv), b), v) in e.iter_mut().zip(g).zip(bkj.iter_mut()).zip(svj.iter_mut()) {
                *x += gv;
                *b = h.bucket(q) as u32;
                *v = f32::from_bits(x.to_bits() ^ h.sign_bit(q));
                h.step(&mut q);
            }
        } else {
            for ((&p, b), v) in e.iter().zip(bkj.iter_mut()).zip(svj.iter_mut()) {
                *b = h.bucket(q) as u32;
                *v = f32::from_bits(p.to_bits() ^ h.sign_bit(q));
                h.step(&mut q);
            }
        }
        *s = q;
    }
    let c = tables.len() / hs.len();
    for ((table, bkj), svj) in tables.chunks_exact_mut(c).zip(bk.chunks_exact(n)).zip(sv.chunks_exact(n)) {
        for (t, (&b, &v)) in bkj.iter().zip(svj).enumerate() {
            #[cfg(target_arch = "x86_64")]
            if let Some(&ba) = bkj.get(t + AHEAD) {
                // SAFETY: a prefetch has no memory effect; `ba < c`, so the address is in `table`.
                unsafe { core::arch::x86_64::_mm_prefetch(table.as_ptr().add(ba as usize) as *const i8, core::arch::x86_64::_MM_HINT_T0) };
            }
            table[b as usize] += v;
        }
    }
}

/// Stride order of one row for large tensors: visiting `i = q*m + r` for `LANES`
/// consecutive `r` at a time, `q` ascending, the bucket state `a*i + b` advances by
/// `a*m mod 2^64`, which is tiny for a good rational approximation `m` of `2^64 / a`
/// (a continued-fraction denominator, Khinchin 1964; cf. the three-gap theorem). Each lane
/// then walks its table row almost sequentially (at most `MAX_DRIFT` buckets per step)
/// and the lanes' cache lines stay in L1, while the input is read one contiguous
/// `LANES`-element chunk per step. The hash family and every addition are unchanged; only
/// the summation order within a cell differs from index order (float rounding).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stride {
    m: usize,
    /// `a*m` and `a'*m` (mod 2^64): the state increments per step.
    da: u64,
    dsa: u64,
}

/// Lanes walked together (one 64-byte line of `f32` per step).
const LANES: usize = 256;
/// Minimum steps per lane sweep (amortises the lane set-up; keeps chunks reused in cache).
const MIN_STEPS: usize = 16;
/// Largest bucket drift per step accepted for the stride order.
const MAX_DRIFT: f64 = 2.0;
/// Input prefetch distance, in steps.
const PF_STEPS: usize = 12;
/// Tables smaller than this (bytes per row) stay cache resident: no stride order needed.
const STRIDE_MIN_TABLE_BYTES: usize = 128 << 10;

impl Stride {
    /// The best `m` (largest convergent denominator of `a / 2^64` with `d / m >= MIN_STEPS`)
    /// if its drift `|a*m mod± 2^64| * c / 2^64` is at most `MAX_DRIFT`.
    fn for_row(h: &RowHash, d: usize) -> Option<Stride> {
        if 4 * h.c as usize <= STRIDE_MIN_TABLE_BYTES {
            return None;
        }
        let limit = (d / MIN_STEPS) as u128;
        // Continued fraction of a / 2^64: denominators k_i = a_i k_{i-1} + k_{i-2}.
        let (mut num, mut den) = (h.a as u128, 1u128 << 64);
        let (mut k_prev, mut k) = (0u128, 1u128);
        let mut best = None;
        while num != 0 {
            let ai = den / num;
            (den, num) = (num, den - ai * num);
            let k_next = ai * k + k_prev;
            if k_next > limit {
                break;
            }
            (k_prev, k) = (k, k_next);
            best = Some(k as usize);
        }
        let m = best.filter(|&m| m >= LANES)?;
        let da = h.a.wrapping_mul(m as u64);
        let drift = (da as i64).unsigned_abs() as f64 * h.c as f64 / 2f64.powi(64);
        (drift <= MAX_DRIFT).then(|| Stride { m, da, dsa: h.sa.wrapping_mul(m as u64) })
    }
}

/// Per-row lane offsets for [`scatter_strided`]: `a*l` and `a'*l` for `l < LANES`.
struct LaneKeys {
    a: [u64; LANES],
    sa: [u64; LANES],
}

impl LaneKeys {
    fn new(h: &RowHash) -> Self {
        let mut k = LaneKeys { a: [0; LANES], sa: [0; LANES] };
        for (l, (x, y)) in k.a.iter_mut().zip(k.sa.iter_mut()).enumerate() {
            (*x, *y) = (h.a.wrapping_mul(l as u64), h.sa.wrapping_mul(l as u64));
        }
        k
    }
}

/// Buckets and signed values of `LANES` consecutive elements `x` whose first hash state is
/// `(s0, s1)`: the portable path ([`hash_lanes_avx2`] is the fast one on x86-64).
#[inline(always)]
fn hash_lanes(c: u64, s0: u64, s1: u64, k: &LaneKeys, x: &[f32; LANES], bk: &mut [u32; LANES], sv: &mut [f32; LANES]) {
    for l in 0..LANES {
        let st0 = s0.wrapping_add(k.a[l]);
        let st1 = s1.wrapping_add(k.sa[l]);
        bk[l] = (((st0 >> 32) * c) >> 32) as u32;
        sv[l] = f32::from_bits(x[l].to_bits() ^ (((st1 >> 63) as u32) << 31));
    }
}

/// [`hash_lanes`] with AVX2 intrinsics: four 64-bit states per register; buckets by
/// `vpmuludq` multiply-shift, signs from the states' top bits, both packed to 32-bit lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn hash_lanes_avx2(c: u64, s0: u64, s1: u64, k: &LaneKeys, x: &[f32; LANES], bk: &mut [u32; LANES], sv: &mut [f32; LANES]) {
    use core::arch::x86_64::*;
    let cv = _mm256_set1_epi64x(c as i64);
    let (b0, b1) = (_mm256_set1_epi64x(s0 as i64), _mm256_set1_epi64x(s1 as i64));
    let sign = _mm256_set1_epi32(i32::MIN);
    // 0x88 takes the low, 0xDD the high 32-bit halves of two registers' 64-bit lanes, in
    // the order (a0 a1 b0 b1 | a2 a3 b2 b3); 0xD8 then restores a0..a3 b0..b3.
    for j in (0..LANES).step_by(8) {
        let ld = |p: &[u64; LANES], o: usize| _mm256_loadu_si256(p.as_ptr().add(j + o) as *const __m256i);
        let (ha, hb) = (_mm256_add_epi64(b0, ld(&k.a, 0)), _mm256_add_epi64(b0, ld(&k.a, 4)));
        let (sa, sb) = (_mm256_add_epi64(b1, ld(&k.sa, 0)), _mm256_add_epi64(b1, ld(&k.sa, 4)));
        let bucket = |v| _mm256_srli_epi64::<32>(_mm256_mul_epu32(_mm256_srli_epi64::<32>(v), cv));
        let lo = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(_mm256_castsi256_ps(bucket(ha)), _mm256_castsi256_ps(bucket(hb))));
        let hi = _mm256_castps_si256(_mm256_shuffle_ps::<0xDD>(_mm256_castsi256_ps(sa), _mm256_castsi256_ps(sb)));
        let lo = _mm256_permute4x64_epi64::<0xD8>(lo);
        let hi = _mm256_and_si256(_mm256_permute4x64_epi64::<0xD8>(hi), sign);
        let v = _mm256_xor_si256(_mm256_loadu_si256(x.as_ptr().add(j) as *const __m256i), hi);
        _mm256_storeu_si256(bk.as_mut_ptr().add(j) as *mut __m256i, lo);
        _mm256_storeu_si256(sv.as_mut_ptr().add(j) as *mut __m256i, v);
    }
}

/// Scatter one row in stride order: `table[h(i)] += s(i) * e_i` for every `i`, with
/// `e += g` first when `g` is given (the first row forms `p`). Hashes the lanes with
/// AVX2 where the CPU has it (same results either way; tested).
fn scatter_strided(h: &RowHash, s: Stride, e: &mut [f32], g: Option<&[f32]>, table: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked above).
        return unsafe { scatter_strided_avx2(h, s, e, g, table) };
    }
    scatter_strided_impl::<false>(h, s, e, g, table)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scatter_strided_avx2(h: &RowHash, s: Stride, e: &mut [f32], g: Option<&[f32]>, table: &mut [f32]) {
    scatter_strided_impl::<true>(h, s, e, g, table)
}

/// Body of [`scatter_strided`]; `AVX2` only from `scatter_strided_avx2`.
#[inline(always)]
fn scatter_strided_impl<const AVX2: bool>(h: &RowHash, s: Stride, e: &mut [f32], g: Option<&[f32]>, table: &mut [f32]) {
    let (n, m) = (e.len(), s.m);
    let keys = LaneKeys::new(h);
    let (mut bk, mut sv) = ([0u32; LANES], [0f32; LANES]);
    let mut r0 = 0;
    while r0 < m {
        let w = LANES.min(m - r0);
        let (mut s0, mut s1) = h.at(r0);
        let mut base = r0;
        while base < n {
            #[cfg(target_arch = "x86_64")]
            if base + PF_STEPS * m < n {
                // SAFETY: prefetches have no memory effect; the addresses are inside `e` / `g`.
                unsafe {
                    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                    for off in (0..w).step_by(16) {
                        _mm_prefetch(e.as_ptr().add(base + PF_STEPS * m + off) as *const i8, _MM_HINT_T0);
                        if let Some(g) = g {
                            _mm_prefetch(g.as_ptr().add(base + PF_STEPS * m + off) as *const i8, _MM_HINT_T0);
                        }
                    }
                }
            }
            let w = w.min(n - base);
            if let Some(g) = g {
                for (x, &gv) in e[base..base + w].iter_mut().zip(&g[base..base + w]) {
                    *x += gv;
                }
            }
            match <&[f32; LANES]>::try_from(&e[base..base + w]) {
                Ok(x) => {
                    #[cfg(target_arch = "x86_64")]
                    if AVX2 {
                        // SAFETY: `AVX2` is only set by `scatter_strided_avx2`, on AVX2 CPUs.
                        unsafe { hash_lanes_avx2(h.c, s0, s1, &keys, x, &mut bk, &mut sv) }
                    } else {
                        hash_lanes(h.c, s0, s1, &keys, x, &mut bk, &mut sv)
                    }
                    #[cfg(not(target_arch = "x86_64"))]
                    hash_lanes(h.c, s0, s1, &keys, x, &mut bk, &mut sv);
                    for (&b, &v) in bk.iter().zip(&sv) {
                        table[b as usize] += v;
                    }
                }
                Err(_) => {
                    let mut st = (s0, s1);
                    for &x in &e[base..base + w] {
                        table[h.bucket(st)] += f32::from_bits(x.to_bits() ^ h.sign_bit(st));
                        h.step(&mut st);
                    }
                }
            }
            s0 = s0.wrapping_add(s.da);
            s1 = s1.wrapping_add(s.dsa);
            base += m;
        }
        r0 += w;
    }
}

impl Sketch {
    /// Reads `density` in (0, 1], `sketch_rows >= 1` (odd recommended) and
    /// `sketch_cols_per_k > 0` (finite).
    pub fn new(p: &MethodParams, ctx: WorkerCtx) -> Result<Self> {
        bits::check_density(NAME, p.density)?;
        if p.sketch_rows == 0 {
            return Err(bits::bad_param(NAME, "sketch_rows", p.sketch_rows, "must be >= 1 (odd recommended, e.g. 3 or 5)"));
        }
        if !(p.sketch_cols_per_k.is_finite() && p.sketch_cols_per_k > 0.0) {
            return Err(bits::bad_param(NAME, "sketch_cols_per_k", p.sketch_cols_per_k, "must be a finite number > 0 (default 10)"));
        }
        Ok(Sketch {
            ctx,
            step: 0,
            density: p.density,
            rows: p.sketch_rows,
            cols_per_k: p.sketch_cols_per_k,
            slots: Vec::new(),
            mag: Vec::new(),
            med: vec![0.0; p.sketch_rows],
            hs: vec![RowHash { a: 0, b: 0, sa: 0, sb: 0, c: 0 }; p.sketch_rows],
            cur: vec![(0, 0); p.sketch_rows],
            strides: vec![None; p.sketch_rows],
            bk: Vec::new(),
            sv: Vec::new(),
        })
    }

    /// Residual `e` of tensor `t` (holds `p` between compress and decompress).
    pub fn residual(&self, t: TensorId) -> Option<&[f32]> {
        self.slots.get(t).and_then(|s| s.as_ref()).map(|s| s.s.e.as_slice())
    }

    /// Sketch columns `c` used for tensor `t`.
    pub fn cols_of(&self, t: TensorId) -> Option<usize> {
        self.slots.get(t).and_then(|s| s.as_ref()).map(|s| s.s.c)
    }

    /// Fill `self.hs` for tensor `t` (with `c` columns) at the current step.
    fn set_hashes(&mut self, t: TensorId, c: usize) {
        for (j, h) in self.hs.iter_mut().enumerate() {
            *h = RowHash::new(self.ctx.seed, self.step, t, j, c);
        }
    }
}

/// Median of `v` (mean of the two middle values for even length); reorders `v`.
#[inline]
fn median(v: &mut [f32]) -> f32 {
    match v.len() {
        1 => v[0],
        2 => 0.5 * (v[0] + v[1]),
        3 => v[0].min(v[1]).max(v[0].max(v[1]).min(v[2])),
        n => {
            v.sort_unstable_by(|a, b| a.total_cmp(b));
            if n % 2 == 1 {
                v[n / 2]
            } else {
                0.5 * (v[n / 2 - 1] + v[n / 2])
            }
        }
    }
}

impl Compressor for Sketch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn aggregation(&self) -> Aggregation {
        Aggregation::AllReduce
    }

    fn register(&mut self, t: TensorId, rows: usize, cols: usize) -> Result<()> {
        let d = bits::checked_len(NAME, t, rows, cols)?;
        let k = MethodParams { density: self.density, ..MethodParams::default() }.k_of(d).min(d);
        let c = (self.cols_per_k * k.max(1) as f64).ceil().max(1.0);
        if c >= (u32::MAX as f64) {
            return Err(bits::tensor_err(NAME, t, format!("sketch of {c} columns is too large; lower sketch_cols_per_k or density")));
        }
        let c = c as usize;
        if self.mag.len() < d {
            self.mag = bits::touched_zeros(d);
        }
        let scratch = self.rows * d.min(BLOCK);
        if self.bk.len() < scratch {
            self.bk = bits::touched_zeros(scratch);
            self.sv = bits::touched_zeros(scratch);
        }
        bits::put_slot(&mut self.slots, t, rows, cols, State { e: bits::touched_zeros(d), k, c });
        Ok(())
    }

    fn wire_capacity(&self, t: TensorId, _round: usize) -> WireLen {
        match self.slots.get(t).and_then(|s| s.as_ref()) {
            Some(sl) => WireLen { sum_f32: self.rows * sl.s.c, ..WireLen::default() },
            None => WireLen::default(),
        }
    }

    fn begin_step(&mut self, step: u64) {
        self.step = step;
    }

    fn compress(&mut self, t: TensorId, _round: usize, grad: ArrayView2<f32>, wire: &mut Wire) -> Result<()> {
        let r = self.rows;
        let c = bits::slot(NAME, &mut self.slots, t)?.s.c;
        self.set_hashes(t, c);
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        let g = bits::input_slice(NAME, t, sl, &grad)?;
        wire.clear();
        wire.sum_f32.resize(r * c, 0.0);
        for (h, s) in self.hs.iter().zip(self.strides.iter_mut()) {
            *s = Stride::for_row(h, g.len());
        }
        if self.strides.iter().all(Option::is_some) {
            let tables = wire.sum_f32.chunks_exact_mut(c);
            for (j, ((h, s), table)) in self.hs.iter().zip(self.strides.iter().flatten()).zip(tables).enumerate() {
                scatter_strided(h, *s, &mut sl.s.e, (j == 0).then_some(g), table);
            }
            return Ok(());
        }
        for (h, st) in self.hs.iter().zip(self.cur.iter_mut()) {
            *st = h.at(0);
        }
        let b = BLOCK.min(g.len()).max(1);
        for (eb, gb) in sl.s.e.chunks_mut(b).zip(g.chunks(b)) {
            let m = r * eb.len();
            compress_block(&self.hs, &mut self.cur, eb, gb, &mut wire.sum_f32, &mut self.bk[..m], &mut self.sv[..m]);
        }
        Ok(())
    }

    fn decompress(&mut self, t: TensorId, _round: usize, received: &Received, out: ArrayViewMut2<f32>) -> Result<()> {
        let r = self.rows;
        let c = bits::slot(NAME, &mut self.slots, t)?.s.c;
        self.set_hashes(t, c);
        let sl = bits::slot(NAME, &mut self.slots, t)?;
        if received.world_size == 0 || received.sum_f32.len() != r * c {
            return Err(bits::tensor_err(
                NAME,
                t,
                format!("received a sketch of {} floats from {} workers; expected {r} x {c}", received.sum_f32.len(), received.world_size),
            ));
        }
        let out = bits::output_slice(NAME, t, sl, out)?;
        let d = out.len();
        let k = sl.s.k.min(d);
        let s = received.sum_f32;
        let (med, hs, cur) = (&mut self.med, &self.hs, &mut self.cur);
        let mag = &mut self.mag[..d];
        for (h, st) in hs.iter().zip(cur.iter_mut()) {
            *st = h.at(0);
        }
        // 1. estimates into `out`, magnitudes (as ordered bits) into `mag`
        for (o, m) in out.iter_mut().zip(mag.iter_mut()) {
            for (j, ((v, h), st)) in med.iter_mut().zip(hs).zip(cur.iter_mut()).enumerate() {
                *v = f32::from_bits(s[j * c + h.bucket(*st)].to_bits() ^ h.sign_bit(*st));
                h.step(st);
            }
            *o = median(med);
            *m = o.to_bits() & !SIGN_BIT;
        }
        if k == 0 {
            out.fill(0.0);
            return Ok(());
        }
        // 2. exact k-th largest magnitude (non-negative f32 order = u32 order of bits)
        let (_, &mut thr, _) = mag.select_nth_unstable(d - k);
        let above = out.iter().filter(|v| v.to_bits() & !SIGN_BIT > thr).count();
        let mut ties = k - above; // elements equal to thr that are kept (lowest indices)
        // 3. keep, scale by 1/n, subtract the kept estimate from the residual
        let inv_n = 1.0 / received.world_size as f32;
        for (o, e) in out.iter_mut().zip(sl.s.e.iter_mut()) {
            let m = o.to_bits() & !SIGN_BIT;
            let keep = m > thr || (m == thr && ties > 0 && {
                ties -= 1;
                true
            });
            if keep {
                *e -= *o;
                *o *= inv_n;
            } else {
                *o = 0.0;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;
    use rand_distr::{Distribution, StandardNormal};

    fn params(density: f64, rows: usize, cols_per_k: f64) -> MethodParams {
        MethodParams { density, sketch_rows: rows, sketch_cols_per_k: cols_per_k, ..MethodParams::default() }
    }

    fn make(p: &MethodParams, rank: usize, n: usize, rows: usize, cols: usize) -> Sketch {
        let mut s = Sketch::new(p, WorkerCtx { rank, world_size: n, seed: 5 }).unwrap();
        s.register(0, rows, cols).unwrap();
        s
    }

    fn randn(seed: u64, rows: usize, cols: usize) -> Array2<f32> {
        let mut rng = rng_for(seed, 0, 0, 0);
        Array2::from_shape_fn((rows, cols), |_| StandardNormal.sample(&mut rng))
    }

    fn sketch_of(p: &MethodParams, g: &Array2<f32>) -> Vec<f32> {
        let mut s = make(p, 0, 1, g.nrows(), g.ncols());
        let mut wire = Wire::default();
        s.compress(0, 0, g.view(), &mut wire).unwrap();
        wire.sum_f32
    }

    #[test]
    fn parameters_are_validated() {
        let ctx = WorkerCtx { rank: 0, world_size: 1, seed: 0 };
        assert!(Sketch::new(&params(0.0, 3, 10.0), ctx).is_err());
        assert!(Sketch::new(&params(1.5, 3, 10.0), ctx).is_err());
        assert!(Sketch::new(&params(0.1, 0, 10.0), ctx).is_err());
        assert!(Sketch::new(&params(0.1, 3, 0.0), ctx).is_err());
        assert!(Sketch::new(&params(0.1, 3, f64::NAN), ctx).is_err());
        assert!(Sketch::new(&params(0.1, 3, f64::INFINITY), ctx).is_err());
        assert!(Sketch::new(&params(1.0, 1, 0.5), ctx).is_ok());
    }

    #[test]
    fn sketch_is_linear_and_wire_size() {
        for &rows in &[1usize, 3, 4, 9] {
            let p = params(0.01, rows, 10.0);
            let (a, b) = (randn(1, 7, 300), randn(2, 7, 300));
            let sum = &a + &b;
            let (sa, sb, ss) = (sketch_of(&p, &a), sketch_of(&p, &b), sketch_of(&p, &sum));
            let c = (10.0 * (0.01f64 * 2100.0).ceil()) as usize;
            assert_eq!(ss.len(), rows * c);
            assert_eq!(4 * ss.len(), make(&p, 0, 1, 7, 300).wire_capacity(0, 0).bytes());
            let scale = a.iter().map(|v| v.abs()).sum::<f32>();
            for i in 0..ss.len() {
                assert!((sa[i] + sb[i] - ss[i]).abs() <= 1e-5 * scale, "rows {rows} i {i}");
            }
        }
    }

    #[test]
    fn blocked_compress_matches_direct_scatter_exactly() {
        // d spans several blocks plus a partial one; every cell sums in index order
        let (rows, cols) = (3, BLOCK + 777);
        for &r in &[1usize, 3, 4] {
            let p = params(0.01, r, 10.0);
            let g = randn(9, rows, cols);
            let got = sketch_of(&p, &g);
            let s = make(&p, 0, 1, rows, cols);
            let c = s.cols_of(0).unwrap();
            let mut want = vec![0.0f32; r * c];
            for j in 0..r {
                let h = RowHash::new(5, 0, 0, j, c);
                for (i, &x) in g.iter().enumerate() {
                    let st = h.at(i);
                    want[j * c + h.bucket(st)] += f32::from_bits(x.to_bits() ^ h.sign_bit(st));
                }
            }
            assert_eq!(got, want, "rows {r}");
        }
    }

    #[test]
    fn stride_order_matches_index_order_scatter() {
        // A table of > STRIDE_MIN_TABLE_BYTES per row takes the stride-order path; only the
        // summation order within a cell differs from the index-order scatter.
        let (rows, cols) = (1, 4_000_037);
        let p = params(0.001, 3, 10.0);
        let g = randn(4, rows, cols);
        let s = make(&p, 0, 1, rows, cols);
        let c = s.cols_of(0).unwrap();
        assert!(4 * c > STRIDE_MIN_TABLE_BYTES);
        let mut used = 0;
        let mut want = vec![0.0f64; 3 * c];
        for j in 0..3 {
            let h = RowHash::new(5, 0, 0, j, c);
            used += usize::from(Stride::for_row(&h, rows * cols).is_some());
            for (i, &x) in g.iter().enumerate() {
                let st = h.at(i);
                want[j * c + h.bucket(st)] += f32::from_bits(x.to_bits() ^ h.sign_bit(st)) as f64;
            }
        }
        assert_eq!(used, 3, "every row should take the stride order");
        let got = sketch_of(&p, &g);
        // The portable lane hash gives the same table as the AVX2 one.
        let mut e = g.as_slice().unwrap().to_vec();
        let mut portable = vec![0.0f32; 3 * c];
        for (j, t) in portable.chunks_exact_mut(c).enumerate() {
            let h = RowHash::new(5, 0, 0, j, c);
            scatter_strided_impl::<false>(&h, Stride::for_row(&h, e.len()).unwrap(), &mut e, None, t);
        }
        assert_eq!(got, portable);
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            assert!((a as f64 - b).abs() <= 1e-5 * (1.0 + b.abs()), "cell {i}: {a} vs {b}");
        }
    }

    #[test]
    fn stride_is_a_good_rational_approximation() {
        for row in 0..20 {
            let h = RowHash::new(row, 1, 2, 0, 255_580);
            if let Some(s) = Stride::for_row(&h, 25_557_032) {
                assert!(s.m >= LANES && 25_557_032 / s.m >= MIN_STEPS);
                let drift = (h.a.wrapping_mul(s.m as u64) as i64).unsigned_abs() as f64 * 255_580.0 / 2f64.powi(64);
                assert!(drift <= MAX_DRIFT, "row {row}: drift {drift}");
                assert_eq!(s.da, h.a.wrapping_mul(s.m as u64));
            }
        }
    }

    #[test]
    fn heavy_hitters_recovered_exactly() {
        // d = 2000, k = 10 heavy entries, 5 rows x 1000 columns, two workers.
        let (rows, cols, n) = (1, 2000, 2);
        let p = params(0.005, 5, 100.0);
        let heavy: Vec<(usize, f32)> = (0..10).map(|h| (h * 173 + 11, if h % 2 == 0 { 10.0 + h as f32 } else { -20.0 - h as f32 })).collect();
        let mut ws: Vec<Sketch> = (0..n).map(|r| make(&p, r, n, rows, cols)).collect();
        let mut total = vec![0.0f32; ws[0].wire_capacity(0, 0).sum_f32];
        for (r, w) in ws.iter_mut().enumerate() {
            let mut g = Array2::<f32>::zeros((rows, cols));
            for &(i, v) in &heavy {
                g[[0, i]] = v * (r + 1) as f32; // worker r contributes (r+1) * v
            }
            let mut wire = Wire::default();
            w.compress(0, 0, g.view(), &mut wire).unwrap();
            for (t, s) in total.iter_mut().zip(&wire.sum_f32) {
                *t += s;
            }
        }
        let rec = Received { sum_f32: &total, gathered_u32: &[], gather_counts: &[], ring_u32: &[], world_size: n };
        for (r, w) in ws.iter_mut().enumerate() {
            let mut out = Array2::<f32>::zeros((rows, cols));
            w.decompress(0, 0, &rec, out.view_mut()).unwrap();
            let mut expect = vec![0.0f32; cols];
            for &(i, v) in &heavy {
                expect[i] = v * 3.0 / n as f32; // (1 + 2) * v / n
            }
            assert_eq!(out.as_slice().unwrap(), &expect[..]);
            // residual: p - kept estimate; p is this worker's input, the estimate the sum
            let e = w.residual(0).unwrap();
            for &(i, v) in &heavy {
                assert_eq!(e[i], v * (r + 1) as f32 - v * 3.0);
            }
            assert_eq!(e.iter().filter(|v| **v != 0.0).count(), heavy.len());
        }
    }

    #[test]
    fn feedback_conserves_p_and_keeps_k() {
        let (rows, cols) = (10, 123);
        let p = params(0.02, 3, 10.0);
        let mut s = make(&p, 0, 1, rows, cols);
        let k = p.k_of(rows * cols);
        for step in 0..3 {
            s.begin_step(step);
            let g = randn(50 + step, rows, cols);
            let pv: Vec<f32> = g.iter().zip(s.residual(0).unwrap()).map(|(a, b)| a + b).collect();
            let mut wire = Wire::default();
            wire.reserve(s.wire_capacity(0, 0));
            let cap = wire.sum_f32.capacity();
            s.compress(0, 0, g.view(), &mut wire).unwrap();
            assert_eq!(cap, wire.sum_f32.capacity());
            let rec = Received { sum_f32: &wire.sum_f32, gathered_u32: &[], gather_counts: &[], ring_u32: &[], world_size: 1 };
            let mut out = Array2::<f32>::zeros((rows, cols));
            s.decompress(0, 0, &rec, out.view_mut()).unwrap();
            let kept = out.iter().filter(|v| **v != 0.0).count();
            assert_eq!(kept, k);
            for (i, (&o, &e)) in out.iter().zip(s.residual(0).unwrap()).enumerate() {
                assert!((o + e - pv[i]).abs() <= 1e-5 * (1.0 + pv[i].abs()), "p = kept + e violated at {i}");
            }
            // the kept estimates are the k largest in magnitude among all estimates
            let min_kept = out.iter().filter(|v| **v != 0.0).map(|v| v.abs()).fold(f32::MAX, f32::min);
            assert!(min_kept > 0.0);
        }
    }

    #[test]
    fn errors_instead_of_panics() {
        let p = params(0.1, 3, 10.0);
        let mut s = make(&p, 0, 1, 2, 10);
        let mut wire = Wire::default();
        assert!(s.compress(1, 0, randn(1, 2, 10).view(), &mut wire).is_err());
        assert!(s.compress(0, 0, randn(1, 10, 2).view(), &mut wire).is_err());
        let rec = Received { sum_f32: &[1.0; 3], gathered_u32: &[], gather_counts: &[], ring_u32: &[], world_size: 1 };
        let mut out = Array2::<f32>::zeros((2, 10));
        assert!(s.decompress(0, 0, &rec, out.view_mut()).is_err());
    }

    /// `cargo test --release --lib sketch::tests::bench -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_compress() {
        let d = 25_557_032usize;
        let g = randn(3, 1, d);
        let mut s = make(&MethodParams::default(), 0, 1, 1, d);
        let mut wire = Wire::default();
        wire.reserve(s.wire_capacity(0, 0));
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = std::time::Instant::now();
            s.compress(0, 0, g.view(), &mut wire).unwrap();
            best = best.min(t0.elapsed().as_secs_f64());
        }
        println!("sketch compress (3 rows, c = {}): {:.2} ms, {:.2} GB/s of input", s.cols_of(0).unwrap(), best * 1e3, 4.0 * d as f64 / best / 1e9);
        let rec = Received { sum_f32: &wire.sum_f32, gathered_u32: &[], gather_counts: &[], ring_u32: &[], world_size: 1 };
        let mut out = Array2::<f32>::zeros((1, d));
        let t0 = std::time::Instant::now();
        s.decompress(0, 0, &rec, out.view_mut()).unwrap();
        let dt = t0.elapsed().as_secs_f64();
        println!("sketch decompress: {:.2} ms, {:.2} GB/s of output", dt * 1e3, 4.0 * d as f64 / dt / 1e9);
    }
}
