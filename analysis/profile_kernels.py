#!/usr/bin/env python3
"""Time the kernel families of gradcomp's device cost model one by one on a GPU, in the
launch patterns the reference code uses, and write them as CSV (docs/device.md,
"The device model against measurements"; docs/csv-schema.md, "Kernel profile").

Where `analysis/profile_compress.py` times each method's whole stage on a model's
shapes, this script isolates one family per row, over sizes, so that its scaling and its
launch structure can be read off:

| family | variants | what it settles |
|---|---|---|
| `topk` | `torch.topk` of `|x|`, k = ceil(0.001 d), unsorted | grows as d (a radix select, the model) or as d log d (OMGS-SGD's fitted `s d log2 d`) |
| `qr` | `linalg.qr` on one n x r matrix, on a batch of B (one call), and B calls in a loop; powerSGD_hook's per-column Gram-Schmidt | launch count per matrix (the model: 7r-1) and whether batching same-shape matrices pays |
| `gemm` | (n x m) @ (m x r) | the rank-r projections of Power-SGD and ACP-SGD |
| `scatter` | OMGS-SGD's per-worker loop (`new_grad[idx] += vals`) and one `index_add_` of every worker's pieces | top-k decompression: per-worker launches or one scatter |
| `sign-pack` | sign bits packed 8 to a byte | Sign-SGD, Marsit |
| `sketch-add` | `index_add_` of signed values into a 3-row Count Sketch table, c = 10 k | Count Sketch compression |
| `reduce` | `a += b` | NCCL's reduction arithmetic |
| `copy` | `dst.copy_(src)` | packing copies |

Each time is the median of --iters calls after --warmup, with CUDA events around the
call (what the stream spends, eager dispatch included when launches outrun the
kernels). Columns: family, variant, d (elements of the operand), rows, cols, rank,
workers, count (matrices, workers or calls in the timed call), time_s.

    python analysis/profile_kernels.py --out kernels-h100.csv
    python analysis/profile_kernels.py --device cpu --quick --out /tmp/k.csv   (testing)
"""

import argparse
import datetime
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_compress import Timer, median_s  # noqa: E402

HEADER = ["family", "variant", "d", "rows", "cols", "rank", "workers", "count", "time_s"]


def gram_schmidt(t, m):
    """powerSGD_hook's `_orthogonalize_gram_schmidt`: one column at a time."""
    for i in range(m.shape[1]):
        col = m[:, i : i + 1]
        col.div_(t.linalg.norm(col))
        if i + 1 < m.shape[1]:
            rest = m[:, i + 1 :]
            rest.sub_(col @ (col.T @ rest))


def families(t, dev, quick):
    """Yield (family, variant, d, rows, cols, rank, workers, count, fn)."""
    pw = range(12, 19, 2) if quick else range(12, 28)
    for p in pw:
        d = 1 << p
        x = t.randn(d, device=dev)
        k = max(1, math.ceil(0.001 * d))
        yield "topk", "torch.topk", d, 1, d, 0, 1, 1, (lambda x=x, k=k: t.topk(x.abs(), k, sorted=False))
        y = t.randn(d, device=dev)
        yield "reduce", "a+=b", d, 1, d, 0, 1, 1, (lambda x=x, y=y: x.add_(y))
        yield "copy", "copy_", d, 1, d, 0, 1, 1, (lambda x=x, y=y: y.copy_(x))
        shift = t.arange(8, device=dev, dtype=t.uint8)
        if p % 2 == 0:
            yield "sign-pack", "signbit+pack", d, 1, d, 0, 1, 1, (
                lambda x=x, s=shift: t.sum((~t.signbit(x)).view(-1, 8).to(t.uint8) << s, dim=1, dtype=t.uint8))
            c = max(1, math.ceil(10 * k))
            table = t.zeros(3, c, device=dev)
            buckets = [t.randint(0, c, (d,), device=dev) for _ in range(3)]
            signs = [1.0 - 2.0 * (t.rand(d, device=dev) < 0.5).float() for _ in range(3)]

            def sketch(x=x, table=table, buckets=buckets, signs=signs):
                table.zero_()
                for j in range(3):
                    table[j].index_add_(0, buckets[j], signs[j] * x)

            yield "sketch-add", "3 rows index_add_", d, 3, c, 0, 1, 1, sketch
        del x, y
    ns = [256, 4096] if quick else [64, 256, 1024, 4096, 16384, 65536, 262144]
    for n in ns:
        for r in (4, 32):
            if r >= n:
                continue
            m = t.randn(n, r, device=dev)
            yield "qr", "linalg.qr", n * r, n, r, r, 1, 1, (lambda m=m: t.linalg.qr(m))
            batch = 16
            b = t.randn(batch, n, r, device=dev)
            yield "qr", "linalg.qr batched", n * r, n, r, r, 1, batch, (lambda b=b: t.linalg.qr(b))
            yield "qr", "linalg.qr loop", n * r, n, r, r, 1, batch, (
                lambda b=b, batch=batch: [t.linalg.qr(b[i]) for i in range(batch)])
            g = m.clone()
            yield "qr", "gram-schmidt", n * r, n, r, r, 1, 1, (lambda g=g: gram_schmidt(t, g))
    gemm_shapes = [(256, 2304)] if quick else [(64, 576), (512, 4608), (2048, 512), (4096, 25088), (30522, 768), (1024, 4096)]
    for rows, cols in gemm_shapes:
        mat = t.randn(rows, cols, device=dev)
        for r in (4, 32):
            q = t.randn(cols, r, device=dev)
            out = t.empty(rows, r, device=dev)
            yield "gemm", "M @ Q", rows * cols, rows, cols, r, 1, 1, (lambda mat=mat, q=q, out=out: t.matmul(mat, q, out=out))
    for p in ([16] if quick else [20, 23]):
        d = 1 << p
        k = max(1, math.ceil(0.001 * d))
        for n in ([4] if quick else [8, 16, 32, 64]):
            idx = t.randint(0, d, (n * k,), device=dev)
            vals = t.randn(n * k, device=dev)
            out = t.zeros(d, device=dev)

            def loop(out=out, idx=idx, vals=vals, n=n, k=k):
                out.zero_()
                for i in range(n):
                    ix = idx[i * k : (i + 1) * k].long()
                    out[ix] += vals[i * k : (i + 1) * k]
                out.div_(n)

            def once(out=out, idx=idx, vals=vals, n=n):
                out.zero_()
                out.index_add_(0, idx, vals)
                out.div_(n)

            yield "scatter", "per-worker loop (OMGS-SGD)", d, 1, d, 0, n, n, loop
            yield "scatter", "one index_add_", d, 1, d, 0, n, 1, once


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (testing)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="a few small sizes (testing)")
    p.add_argument("--families", help="comma list: only these families")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.iters < 1 or a.warmup < 0:
        raise SystemExit("profile_kernels.py: --iters must be >= 1 and --warmup >= 0")
    import torch

    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("profile_kernels.py: no CUDA device (--device cpu to test)")
    if dev.type == "cpu":
        torch.set_num_threads(1)
    torch.manual_seed(1)
    only = set(a.families.split(",")) if a.families else None
    timer = Timer(torch, dev)
    rows = []
    with torch.no_grad():
        for fam, var, d, r, c, rank, n, count, fn in families(torch, dev, a.quick):
            if only and fam not in only:
                continue
            rows.append((fam, var, d, r, c, rank, n, count, median_s(timer, fn, a.iters, a.warmup)))
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu (1 thread)"
    with open(a.out, "w") as f:
        f.write(f"# device: {name}\n# torch: {torch.__version__}\n# cuda: {torch.version.cuda or 'none'}\n")
        f.write(f"# date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}\n")
        f.write(f"# command: {' '.join(['profile_kernels.py'] + sys.argv[1:])}\n# iters: {a.iters}\n# warmup: {a.warmup}\n")
        f.write(",".join(HEADER) + "\n")
        for row in rows:
            f.write(",".join(repr(x) if isinstance(x, float) else str(x) for x in row) + "\n")
    print(f"wrote {a.out}: {len(rows)} rows on {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
