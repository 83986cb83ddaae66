//! The PyTorch CUDA operations several methods' device kernel lists share
//! ([`super::Compressor::device_kernels`]; docs/methods.md, "Device kernels"), each as the
//! kernels it launches with the bytes each moves. Method-specific lists live in the method
//! files; these are the building blocks (`torch.topk`, `torch.sort`, `index_put_`,
//! Gram-Schmidt, `torch.linalg.qr`, element-wise operations).
//!
//! Conventions: fp32 values (4 bytes), int64 indices (8 bytes, PyTorch's index type),
//! bool masks (1 byte); a gather or a strided read is charged 4 bytes per element (the
//! DRAM sector over-fetch of scattered accesses is not modelled). Only GEMMs carry
//! flops: every other kernel here does at most a few operations per 4 bytes and is memory
//! bound on every preset.

use super::TensorId;
use crate::roofline::{Kernel, Stage};

/// Bytes of an fp32 value.
pub const F32: f64 = 4.0;
/// Bytes of an int64 index.
pub const I64: f64 = 8.0;
/// Bytes of an int32 index.
pub const I32: f64 = 4.0;
/// Bytes of a bool.
pub const BOOL: f64 = 1.0;

/// Where a kernel list goes.
pub type Out<'a> = &'a mut dyn FnMut(Kernel);

/// The state of tensor `t` if `round` is 0: a single-round method lists kernels only for
/// round 0 of a registered tensor ([`super::Compressor::device_kernels`]).
pub fn round0<T>(slots: &[Option<T>], t: TensorId, round: usize) -> Option<&T> {
    slots.get(t).and_then(Option::as_ref).filter(|_| round == 0)
}

/// Error-compensated sign compression of `d` elements (EF-SignSGD, Marsit): `p = g + e`
/// (named `p`), `|p|`, the scale `mean |p|`, the packed signs: 4 kernels.
pub fn ef_sign_compress(out: Out, p: &'static str, d: usize) {
    out(ew(p, d, 2, 1));
    out(ew("|p|", d, 1, 1));
    out(mem("scale = mean |p|", F32 * (d + 1) as f64));
    out(pack_signs(d));
}

/// A tensor all-reduced uncompressed in round 0 (PyTorch's `powerSGD_hook` for its
/// vectors; Count Sketch's raw tensors): the copy into the uncompressed buffer (named
/// `copy_in`), then `/= n` and the copy back; `bytes` the tensor's fp32 bytes.
pub fn uncompressed(out: Out, round: usize, stage: Stage, bytes: f64, copy_in: &'static str) {
    match (round, stage) {
        (0, Stage::Compress) => out(Kernel::copy(copy_in, bytes)),
        (0, Stage::Decompress) => {
            out(mem("uncompressed buffer /= n", 2.0 * bytes));
            out(Kernel::copy(
                "copy back from the uncompressed buffer",
                bytes,
            ));
        }
        _ => {}
    }
}

/// A memory-bound kernel moving `bytes`.
pub fn mem(name: &'static str, bytes: f64) -> Kernel {
    Kernel::mem(name, bytes)
}

/// An element-wise fp32 kernel over `n` elements reading `reads` operands and writing
/// `writes` results (`a + b` into a new tensor: 2 reads, 1 write).
pub fn ew(name: &'static str, n: usize, reads: usize, writes: usize) -> Kernel {
    Kernel::mem(name, F32 * n as f64 * (reads + writes) as f64)
}

/// Digits per radix pass (8-bit digits, 256 buckets).
pub const RADIX_BITS: usize = 8;
/// Radix passes over 32-bit keys: `32 / RADIX_BITS`.
pub const RADIX_PASSES_F32: usize = 32 / RADIX_BITS;
/// Keys per thread block in the radix select's histogram kernel (per-block counts are
/// written for the digit scan).
const SELECT_BLOCK_KEYS: usize = 4096;
/// Largest `k` PyTorch sorts in one block (`sortKeyValueInplace`); above it a radix sort.
const INBLOCK_SORT_MAX: usize = 4096;

/// `torch.topk(x, k)` over `n` fp32 keys: PyTorch's multi-block radix select
/// (aten/src/ATen/native/cuda/TensorTopK.cu): [`RADIX_PASSES_F32`] passes of 8-bit digits
/// over the 32-bit keys, each a histogram kernel reading every key and writing per-block
/// digit counts, then a small kernel scanning the counts; then one gather kernel reading
/// the keys and writing `k` values and `k` int64 indices; with `sorted` (`torch.topk`'s
/// default) the `k` results are sorted: in one block up to 4096 (`sortKeyValueInplace`),
/// else by [`radix_sort_pairs`]. `2 RADIX_PASSES_F32 + 1 (+ sort)` kernels.
pub fn torch_topk(out: Out, n: usize, k: usize, sorted: bool) {
    let nf = n as f64;
    let counts = F32 * 256.0 * n.div_ceil(SELECT_BLOCK_KEYS).max(1) as f64;
    for _ in 0..RADIX_PASSES_F32 {
        out(mem(
            "topk: radix select pass (8-bit digit histogram)",
            F32 * nf + counts,
        ));
        out(mem(
            "topk: radix select pass (digit count scan)",
            2.0 * counts,
        ));
    }
    let kf = k as f64;
    out(mem(
        "topk: gather the k largest (values, int64 indices)",
        F32 * nf + (F32 + I64) * kf,
    ));
    if sorted {
        if k <= INBLOCK_SORT_MAX {
            out(mem(
                "topk: sort the k results (in one block)",
                2.0 * (F32 + I64) * kf,
            ));
        } else {
            radix_sort_pairs(out, k, F32, I64, RADIX_PASSES_F32, false);
        }
    }
}

/// Kernels of [`torch_topk`].
pub fn torch_topk_kernels(k: usize, sorted: bool) -> usize {
    let sort = match (sorted, k <= INBLOCK_SORT_MAX) {
        (false, _) => 0,
        (true, true) => 1,
        (true, false) => 1 + RADIX_PASSES_F32,
    };
    2 * RADIX_PASSES_F32 + 1 + sort
}

/// A CUB onesweep radix sort of `n` (key, value) pairs (`torch.sort`, the sort inside
/// `index_put_`): with `iota` an arange kernel writing the int64 value indices first;
/// one histogram kernel reading the keys; `passes` passes each reading and writing keys
/// and values. `1 + passes (+ 1)` kernels.
pub fn radix_sort_pairs(out: Out, n: usize, key: f64, val: f64, passes: usize, iota: bool) {
    let nf = n as f64;
    if iota {
        out(mem("sort: arange of the value indices", val * nf));
    }
    out(mem("sort: digit histogram", key * nf));
    for _ in 0..passes {
        out(mem(
            "sort: onesweep pass (keys and values)",
            2.0 * (key + val) * nf,
        ));
    }
}

/// Radix passes of 8-bit digits needed for int64 keys below `d` (CUB sorts only the bits
/// in use: `ceil(log2 d / 8)`, at least 1).
pub fn index_key_passes(d: usize) -> usize {
    let bits = usize::BITS - d.max(2).saturating_sub(1).leading_zeros();
    (bits as usize).div_ceil(RADIX_BITS).max(1)
}

/// `dst.index_put_([idx], vals, accumulate=True)` of `m` (int64 index, fp32 value) pairs
/// into a tensor of `d` elements: PyTorch's `index_put_with_sort_kernel`: linearise the
/// indices, arange the positions, radix-sort (index, position) pairs over the bits of
/// `d`, then one kernel accumulating the values in sorted order.
pub fn index_put_accumulate(out: Out, m: usize, d: usize) {
    let mf = m as f64;
    out(mem("index_put_: linearise indices", 2.0 * I64 * mf));
    radix_sort_pairs(out, m, I64, I64, index_key_passes(d), true);
    out(mem(
        "index_put_: accumulate sorted values",
        (2.0 * I64 + F32 + 2.0 * F32) * mf,
    ));
}

/// Gram-Schmidt of the `rows x r` factor as PyTorch's DDP `powerSGD_hook` launches it
/// (`_orthogonalize`): per column `i`: `torch.norm(col)`, `col /= norm`, and while
/// columns remain (`m = r - i - 1 > 0`) `col * rest`, `sum(dim=0)`, `dots * col`,
/// `rest -= ...`: [`gram_schmidt_kernels`]`(r) = 6r - 4` kernels.
pub fn gram_schmidt(out: Out, rows: usize, r: usize) {
    let rf = rows as f64;
    for i in 0..r {
        out(mem("orth (Gram-Schmidt): column norm", F32 * rf));
        out(mem("orth (Gram-Schmidt): col /= norm", 2.0 * F32 * rf));
        let m = (r - i - 1) as f64;
        if m > 0.0 {
            out(mem(
                "orth (Gram-Schmidt): col * rest",
                F32 * (rf + 2.0 * rf * m),
            ));
            out(mem("orth (Gram-Schmidt): sum(dim=0)", F32 * (rf * m + m)));
            out(mem(
                "orth (Gram-Schmidt): dots * col",
                F32 * (m + rf + rf * m),
            ));
            out(mem("orth (Gram-Schmidt): rest -= proj", 3.0 * F32 * rf * m));
        }
    }
}

/// Kernels of [`gram_schmidt`]: `2r + 4(r - 1)`.
pub fn gram_schmidt_kernels(r: usize) -> usize {
    if r == 0 {
        0
    } else {
        6 * r - 4
    }
}

/// `X.copy_(torch.linalg.qr(X).Q)` of the `rows x r` factor (lzhangbv/acpsgd): PyTorch
/// clones the input column-major, cuSOLVER `geqrf` factors it, `R = triu` is copied out,
/// `orgqr` forms `Q`, and `copy_` writes it back. The two cuSOLVER routines are modelled
/// as unblocked Householder (LAPACK `geqr2` / `org2r`, Golub & Van Loan §5.2), a kernel
/// per BLAS call: `geqrf` per column `j` a norm and a scaling of the reflector and, while
/// columns remain, a `gemv` and a rank-1 update of the trailing `(rows - j) x (r - j - 1)`
/// block; `orgqr` per column the same `gemv` + rank-1 update and a scaling:
/// [`householder_qr_kernels`]`(r) = 7r - 1` kernels.
pub fn householder_qr(out: Out, rows: usize, r: usize) {
    let (rf, all) = (rows as f64, (rows * r) as f64);
    out(mem("orth (QR): clone input column-major", 2.0 * F32 * all));
    for j in 0..r {
        let h = rows.saturating_sub(j) as f64;
        let m = (r - j - 1) as f64;
        out(mem("orth (QR): geqrf column norm", F32 * h));
        out(mem("orth (QR): geqrf scale reflector", 2.0 * F32 * h));
        if m > 0.0 {
            out(mem("orth (QR): geqrf w = v^T A", F32 * (h * m + h + m)));
            out(mem(
                "orth (QR): geqrf A -= tau v w^T",
                F32 * (2.0 * h * m + h + m),
            ));
        }
    }
    out(mem("orth (QR): R = triu", F32 * (all + (r * r) as f64)));
    for j in (0..r).rev() {
        let h = rows.saturating_sub(j) as f64;
        let m = (r - j - 1) as f64;
        if m > 0.0 {
            out(mem("orth (QR): orgqr w = v^T Q", F32 * (h * m + h + m)));
            out(mem(
                "orth (QR): orgqr Q -= tau v w^T",
                F32 * (2.0 * h * m + h + m),
            ));
        }
        out(mem("orth (QR): orgqr scale column", 2.0 * F32 * h));
    }
    out(mem("orth (QR): copy_ Q back", 2.0 * F32 * rf * r as f64));
}

/// Kernels of [`householder_qr`]: `1 + (4r - 2) + 1 + (3r - 2) + 1`.
pub fn householder_qr_kernels(r: usize) -> usize {
    if r == 0 {
        0
    } else {
        7 * r - 1
    }
}

/// Packed sign words of `d` elements (32 per u32 word).
pub fn sign_words(d: usize) -> usize {
    d.div_ceil(32)
}

/// One custom kernel writing the sign bits of `d` fp32 values packed 32 per u32 word
/// (docs/methods.md, "Notation": bit `i` of word `w` is element `32w + i`).
pub fn pack_signs(d: usize) -> Kernel {
    mem(
        "sign bits, packed 32 per word",
        F32 * d as f64 + F32 * sign_words(d) as f64,
    )
}

/// One custom kernel expanding `d` packed sign bits to `+-1` fp32 values.
pub fn unpack_signs(name: &'static str, d: usize) -> Kernel {
    mem(name, F32 * sign_words(d) as f64 + F32 * d as f64)
}

/// The kernels `list` reports that the default readings launch
/// ([`crate::roofline::launched_by_default`]), collected (tests and listings).
pub fn collect(list: impl FnOnce(Out)) -> Vec<Kernel> {
    let mut v = collect_all(list);
    v.retain(crate::roofline::launched_by_default);
    v
}

/// Every kernel `list` reports, of every reading.
pub fn collect_all(list: impl FnOnce(Out)) -> Vec<Kernel> {
    let mut v = Vec::new();
    list(&mut |k| v.push(k));
    v
}

/// (name, bytes) of every kernel `list` reports: what the methods' kernel tests compare
/// with their bytes by hand.
#[cfg(test)]
pub(crate) fn named_bytes(list: impl FnOnce(Out)) -> Vec<(&'static str, f64)> {
    collect_all(list)
        .into_iter()
        .map(|k| (k.name, k.bytes))
        .collect()
}

/// The orthogonalisation of a `rows x r` factor in each reading of `orth`
/// ([`crate::roofline::READINGS`]): `reference` launches what the method's reference
/// does (the function given), `gram-schmidt` and `householder` [`gram_schmidt`] and
/// [`householder_qr`] whatever the method.
pub fn orth(out: Out, rows: usize, r: usize, reference: fn(Out, usize, usize)) {
    reference(&mut |k| out(k.in_reading("orth", "reference")), rows, r);
    gram_schmidt(&mut |k| out(k.in_reading("orth", "gram-schmidt")), rows, r);
    householder_qr(&mut |k| out(k.in_reading("orth", "householder")), rows, r);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_lists() {
        for r in 1..=12 {
            assert_eq!(
                collect(|o| gram_schmidt(o, 100, r)).len(),
                gram_schmidt_kernels(r)
            );
            assert_eq!(
                collect(|o| householder_qr(o, 100, r)).len(),
                householder_qr_kernels(r)
            );
        }
        for (k, sorted) in [(10, true), (10, false), (5000, true), (5000, false)] {
            assert_eq!(
                collect(|o| torch_topk(o, 100_000, k, sorted)).len(),
                torch_topk_kernels(k, sorted)
            );
        }
        assert_eq!(index_key_passes(1), 1);
        assert_eq!(index_key_passes(256), 1);
        assert_eq!(index_key_passes(257), 2);
        assert_eq!(index_key_passes(1 << 20), 3);
        assert_eq!(index_key_passes((1 << 20) + 1), 3);
        assert_eq!(index_key_passes(1 << 24), 3);
        assert_eq!(index_key_passes((1 << 24) + 1), 4);
    }

    /// The helpers' bytes by hand (fp32 4, int64 8): `torch.topk` over 100,000 keys (25
    /// select blocks of 4,096: 4 x 256 x 25 = 25,600 count bytes), sorted in one block at
    /// k = 10 and by a radix sort at k = 5,000; `index_put_` of 1,000 pairs into 65,536
    /// elements (16 key bits: 2 passes); Gram-Schmidt and Householder QR of 10 x 2 and
    /// 10 x 3; the sign (un)packing of 100 values (4 words).
    #[test]
    fn helper_bytes_by_hand() {
        let select = [
            ("topk: radix select pass (8-bit digit histogram)", 425_600.0),
            ("topk: radix select pass (digit count scan)", 51_200.0),
        ];
        let mut want: Vec<(&str, f64)> = select.repeat(4);
        want.push((
            "topk: gather the k largest (values, int64 indices)",
            400_120.0,
        ));
        want.push(("topk: sort the k results (in one block)", 240.0));
        assert_eq!(named_bytes(|o| torch_topk(o, 100_000, 10, true)), want);
        let mut want: Vec<(&str, f64)> = select.repeat(4);
        want.push((
            "topk: gather the k largest (values, int64 indices)",
            460_000.0,
        ));
        want.push(("sort: digit histogram", 20_000.0));
        want.extend([("sort: onesweep pass (keys and values)", 120_000.0); 4]);
        assert_eq!(named_bytes(|o| torch_topk(o, 100_000, 5000, true)), want);
        // No keys: one block's counts.
        assert_eq!(named_bytes(|o| torch_topk(o, 0, 0, false))[0].1, 1024.0);
        let mut want = vec![
            ("index_put_: linearise indices", 16_000.0),
            ("sort: arange of the value indices", 8000.0),
            ("sort: digit histogram", 8000.0),
        ];
        want.extend([("sort: onesweep pass (keys and values)", 32_000.0); 2]);
        want.push(("index_put_: accumulate sorted values", 28_000.0));
        assert_eq!(named_bytes(|o| index_put_accumulate(o, 1000, 65_536)), want);
        assert_eq!(
            named_bytes(|o| gram_schmidt(o, 10, 2)),
            [
                ("orth (Gram-Schmidt): column norm", 40.0),
                ("orth (Gram-Schmidt): col /= norm", 80.0),
                ("orth (Gram-Schmidt): col * rest", 120.0),
                ("orth (Gram-Schmidt): sum(dim=0)", 44.0),
                ("orth (Gram-Schmidt): dots * col", 84.0),
                ("orth (Gram-Schmidt): rest -= proj", 120.0),
                ("orth (Gram-Schmidt): column norm", 40.0),
                ("orth (Gram-Schmidt): col /= norm", 80.0),
            ]
        );
        assert_eq!(
            named_bytes(|o| householder_qr(o, 10, 2)),
            [
                ("orth (QR): clone input column-major", 160.0),
                ("orth (QR): geqrf column norm", 40.0),
                ("orth (QR): geqrf scale reflector", 80.0),
                ("orth (QR): geqrf w = v^T A", 84.0),
                ("orth (QR): geqrf A -= tau v w^T", 124.0),
                ("orth (QR): geqrf column norm", 36.0),
                ("orth (QR): geqrf scale reflector", 72.0),
                ("orth (QR): R = triu", 96.0),
                ("orth (QR): orgqr scale column", 72.0),
                ("orth (QR): orgqr w = v^T Q", 84.0),
                ("orth (QR): orgqr Q -= tau v w^T", 124.0),
                ("orth (QR): orgqr scale column", 80.0),
                ("orth (QR): copy_ Q back", 160.0),
            ]
        );
        // Rank 3: two columns left after the first (m = 2), where `x m` and `/ m` differ.
        let of = |v: Vec<(&str, f64)>| v.into_iter().map(|k| k.1).collect::<Vec<f64>>();
        assert_eq!(
            of(named_bytes(|o| gram_schmidt(o, 10, 3))),
            [
                40.0, 80.0, 200.0, 88.0, 128.0, 240.0, 40.0, 80.0, 120.0, 44.0, 84.0, 120.0, 40.0,
                80.0
            ]
        );
        assert_eq!(
            of(named_bytes(|o| householder_qr(o, 10, 3))),
            [
                240.0, 40.0, 80.0, 128.0, 208.0, 36.0, 72.0, 76.0, 112.0, 32.0, 64.0, 156.0, 64.0,
                76.0, 112.0, 72.0, 128.0, 208.0, 80.0, 240.0
            ]
        );
        assert_eq!(unpack_signs("u", 100).bytes, 416.0);
        assert_eq!(pack_signs(100).bytes, 416.0);
    }

    #[test]
    fn radix_select_reads_the_keys_every_pass() {
        let n = 1 << 20;
        let ks = collect(|o| torch_topk(o, n, 1000, false));
        let passes = ks
            .iter()
            .filter(|k| k.name.contains("histogram"))
            .inspect(|k| assert!(k.bytes >= F32 * n as f64))
            .count();
        assert_eq!(passes, RADIX_PASSES_F32);
    }
}
