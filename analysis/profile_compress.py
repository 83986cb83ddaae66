#!/usr/bin/env python3
"""Time each compression method's GPU implementation on a model's tensor shapes and
write the compress profile that `gradcomp e2e|simulate --compress-on device
--compress-profile FILE.csv` reads (src/devcost/profile.rs).

For every method of --methods and every distinct tensor shape of the model (gradcomp's
matrix view: `rows x cols`, `rows = shape[0]` and `cols = numel / shape[0]` for tensors
with 2+ dimensions, `1 x numel` for 1-D ones), the script times, with CUDA events, each
stage of each round and phase of the method's step: `compress` (error feedback
included) and `decompress` (of --world-size workers' pieces for all-gather methods, of
the summed wire for all-reduce ones). Each method is written compactly in torch after
its reference implementation (PyTorch DDP's powerSGD_hook for Power-SGD, lzhangbv/acpsgd
for ACP-SGD, synxlin/deep-gradient-compression for DGC's sampled threshold,
sands-lab/grace for top-k, sign and QSGD, FetchSGD's CSVec for Count Sketch, gradcomp's
own src/compress/marsit.rs for Marsit; docs/methods.md) at gradcomp's parameters.
Each time is the median of --iters steps after --warmup; a stage with nothing to do
(Power-SGD's round 1 of a tensor sent raw) is written as 0. `copy` rows time a
device-to-device copy at several sizes, from which gradcomp fits a launch latency and a
bandwidth for its packing copies.

    python analysis/profile_compress.py --model resnet50 --methods topk,powersgd,acpsgd \\
        --world-size 8 --out resnet50-h100.csv
    mpirun -np 8 target/release/gradcomp e2e --model resnet50 --methods topk,powersgd,acpsgd \\
        --compress-on device --compress-profile resnet50-h100.csv

Shapes: --model NAME runs `gradcomp models NAME` (--gradcomp BIN, default
target/release/gradcomp, then `gradcomp` on PATH; without the binary, the torchvision /
Hugging Face model's parameters), --shapes-from FILE reads a saved `gradcomp models NAME`
listing or one shape per line, --shapes 64x147,1000 lists them. --device cpu runs on the
CPU (for testing: the times then describe the CPU). Needs torch; not needed by gradcomp
itself. Output format (docs/csv-schema.md, "Compress profile"):

    # device: NVIDIA H100 80GB HBM3
    # rank: 4
    method,stage,round,phase,rows,cols,world_size,time_s
    topk,compress,0,0,64,147,8,4.1e-05
    ...
    copy,copy,0,0,1,1048576,8,1.2e-05
"""

import argparse
import datetime
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The header src/devcost/profile.rs reads (`HEADER` there; a test checks they agree).
HEADER = ["method", "stage", "round", "phase", "rows", "cols", "world_size", "time_s"]
# gradcomp's method descriptions (`gradcomp methods --json`; analysis/methods.json):
# names, rounds and phases, aggregation, the parameters each reads and their defaults.
from gradcomp_analysis import methods as M  # noqa: E402 (standard library only)

# (rounds, phases) of every method (Compressor::rounds / phases).
ROUNDS_PHASES = {m: M.rounds_phases(m) for m in M.METHODS}
# Methods whose decompress reads one piece per worker (Aggregation::AllGather).
ALLGATHER = {m for m in M.METHODS if M.aggregation(m) == "allgather"}
# gradcomp's defaults (src/compress/params.rs, MethodParams), under the same names, of the
# parameters this script has flags for. density None: each method's own (`default_of`),
# and no `# density` line is written; min_compression_rate None likewise.
PARAM_DEFAULTS = {k: M.PARAMS[k]["default"] for k in
                  ("density", "rank", "min_compression_rate", "momentum", "nesterov", "clip_norm",
                   "sketch_rows", "sketch_cols_per_k", "qsgd_levels")}
# src/compress/qsgd.rs, MAX_LEVELS (the limit of `qsgd_levels`, "[1, 2^24]").
QSGD_MAX_LEVELS = 1 << 24
COPY = "copy"


def fail(msg: str) -> "SystemExit":
    return SystemExit(f"profile_compress.py: {msg}")


# ---------------------------------------------------------------------------------------
# Shapes


def rows_cols(shape):
    """gradcomp's matrix view of a tensor (src/models/mod.rs, Tensor::rows_cols)."""
    shape = [int(x) for x in shape]
    n = math.prod(shape)
    if len(shape) >= 2 and shape[0] > 0:
        return shape[0], n // shape[0]
    return 1, n


def parse_shape(text: str):
    """`ROWSxCOLS`, `N` (1-D) or a full shape `AxBxC...` (a model listing's) -> (rows, cols)."""
    parts = text.strip().lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"'{text}' is not a shape: write ROWSxCOLS or N, e.g. 64x147 or 1000") from None
    if not dims or any(d < 1 for d in dims):
        raise ValueError(f"'{text}' is not a shape: every dimension is an integer >= 1")
    return rows_cols(dims)


def parse_models_listing(text: str):
    """Tensors of a `gradcomp models NAME` listing: [(name, (rows, cols))] in registration order."""
    out = []
    header = False
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        parts = s.split()
        if parts[:4] == ["reg", "bwd", "name", "shape"]:
            header = True
            continue
        if not header:
            raise ValueError(f"line {n}: expected the table of `gradcomp models NAME` (a header 'reg bwd name shape ...'); "
                             "`gradcomp models` without a name lists the zoo, not a model's tensors")
        if len(parts) < 5:
            raise ValueError(f"line {n}: '{s}' is not a tensor row (reg bwd name shape params fwd_flops)")
        name, shape, params = parts[2], parts[3], parts[4]
        rc = parse_shape(shape)
        if rc[0] * rc[1] != int(params):
            raise ValueError(f"line {n}: tensor {name}: shape {shape} has {rc[0] * rc[1]} elements, the listing says {params}")
        out.append((name, rc))
    if not out:
        raise ValueError("no tensors found: give the output of `gradcomp models NAME`")
    return out


def read_shapes_file(path: str):
    """A saved `gradcomp models NAME` listing, or one shape per line (`#` comments)."""
    with open(path) as f:
        text = f.read()
    if any(line.split()[:4] == ["reg", "bwd", "name", "shape"] for line in text.splitlines()):
        return [rc for _, rc in parse_models_listing(text)]
    shapes = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.split("#")[0].strip()
        if s:
            try:
                shapes.append(parse_shape(s))
            except ValueError as e:
                raise ValueError(f"{path}, line {n}: {e}") from None
    if not shapes:
        raise ValueError(f"{path}: no shapes")
    return shapes


def distinct(shapes):
    """Shapes without repeats, in first-seen order."""
    seen, out = set(), []
    for s in shapes:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def find_gradcomp(given=None):
    if given:
        return given
    if os.environ.get("GRADCOMP"):
        return os.environ["GRADCOMP"]
    here = os.path.dirname(os.path.abspath(__file__))
    local = os.path.join(here, "..", "target", "release", "gradcomp")
    if os.path.exists(local):
        return local
    return shutil.which("gradcomp")


def model_shapes(name: str, gradcomp=None):
    """The model's tensor shapes from `gradcomp models NAME`, or, without the binary, from
    the torchvision / Hugging Face model's parameters (analysis/profile_layers.py)."""
    exe = find_gradcomp(gradcomp)
    if exe:
        r = subprocess.run([exe, "models", name], capture_output=True, text=True)
        if r.returncode != 0:
            raise fail(f"`{exe} models {name}` failed: {r.stderr.strip() or r.stdout.strip()}")
        return [rc for _, rc in parse_models_listing(r.stdout)]
    print(f"profile_compress.py: no gradcomp binary (--gradcomp); taking {name}'s shapes from the torch model", file=sys.stderr)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from profile_layers import build_model

    model, _ = build_model(name)
    return [rows_cols(p.shape) for _, p in model.named_parameters() if p.requires_grad]


# ---------------------------------------------------------------------------------------
# The CSV file


def format_time(t: float) -> str:
    return repr(float(t))


def write_profile(path: str, rows, meta) -> None:
    """`meta`: [(key, value)] written as `# key: value`; `rows`: tuples in HEADER order."""
    with open(path, "w", newline="") as f:
        for k, v in meta:
            if isinstance(v, bool):
                v = "true" if v else "false"
            f.write(f"# {k}: {v}\n")
        f.write(",".join(HEADER) + "\n")
        for r in rows:
            if len(r) != len(HEADER):
                raise ValueError(f"row {r} has {len(r)} fields, the header {len(HEADER)}")
            method, stage, rnd, phase, nrows, ncols, ws, t = r
            f.write(f"{method},{stage},{int(rnd)},{int(phase)},{int(nrows)},{int(ncols)},{int(ws)},{format_time(t)}\n")


def read_commented_csv(path: str):
    """(meta dict, header, rows) of a CSV whose `# key: value` lines are provenance (the
    first value of a key counts; other `#` lines are comments): the format of the
    profiles this script and analysis/profile_kernels.py write."""
    meta, rows, header = {}, [], None
    with open(path) as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith("#"):
                k, sep, v = s[1:].partition(":")
                if sep and k.strip() and " " not in k.strip():
                    meta.setdefault(k.strip(), v.strip())
                continue
            fields = [x.strip() for x in s.split(",")]
            if header is None:
                header = fields
            else:
                rows.append(dict(zip(header, fields)))
    return meta, header, rows


def read_profile(path: str):
    """(meta dict, rows) of a profile file (for tests and comparisons)."""
    meta, _, rows = read_commented_csv(path)
    return meta, [(d["method"], d["stage"], int(d["round"]), int(d["phase"]), int(d["rows"]),
                   int(d["cols"]), int(d["world_size"]), float(d["time_s"])) for d in rows]


# ---------------------------------------------------------------------------------------
# Arguments


def parse_list(text, conv, what):
    try:
        return [conv(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise fail(f"{what} '{text}' is not a comma list of numbers") from None


def param_help(key):
    """A parameter's help from gradcomp's description: its doc, its readers, its default."""
    p = M.PARAMS[key]
    if p["default"] is None:
        own = ", ".join(f"{m} {M.default_of(m, key)}" for m in M.readers(key)
                        if M.default_of(m, key) != M.default_of("", key))
        default = f"each method's own: {M.default_of('', key)}" + (f"; {own}" if own else "")
    else:
        default = p["default"]
    return f"{', '.join(M.readers(key))}: {p['doc']}, {p['limits']} (default {default})"


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="zoo model name (`gradcomp models` lists them)")
    src.add_argument("--shapes-from", metavar="FILE", help="a saved `gradcomp models NAME` listing, or one ROWSxCOLS / N per line")
    src.add_argument("--shapes", metavar="LIST", help="comma list of ROWSxCOLS or N, e.g. 64x147,1000")
    p.add_argument("--gradcomp", metavar="BIN", help="gradcomp binary for --model (default: $GRADCOMP, target/release/gradcomp, then PATH)")
    p.add_argument("--methods", required=True, help=f"comma list of: {', '.join(METHODS)}")
    p.add_argument("--world-size", type=int, required=True, help="workers whose pieces a decompress reads (use the run's -np)")
    p.add_argument("--density", type=float, default=PARAM_DEFAULTS["density"], help=param_help("density"))
    p.add_argument("--lowrank-rank", type=int, default=PARAM_DEFAULTS["rank"], help=param_help("rank"))
    p.add_argument("--min-compression-rate", type=float, default=PARAM_DEFAULTS["min_compression_rate"], help=param_help("min_compression_rate"))
    p.add_argument("--momentum", type=float, default=PARAM_DEFAULTS["momentum"], help=param_help("momentum"))
    p.add_argument("--nesterov", action="store_true", help=param_help("nesterov"))
    p.add_argument("--clip-norm", type=float, default=PARAM_DEFAULTS["clip_norm"], help=param_help("clip_norm"))
    p.add_argument("--sketch-rows", type=int, default=PARAM_DEFAULTS["sketch_rows"], help=param_help("sketch_rows"))
    p.add_argument("--sketch-cols-per-k", type=float, default=PARAM_DEFAULTS["sketch_cols_per_k"], help=param_help("sketch_cols_per_k"))
    p.add_argument("--qsgd-levels", type=int, default=PARAM_DEFAULTS["qsgd_levels"], help=param_help("qsgd_levels"))
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (testing: the times then describe the CPU)")
    p.add_argument("--copy-sizes", metavar="LIST", help="elements per copy row (default 4^5 .. 4^13 on a GPU, 4^5 .. 4^11 on the CPU)")
    p.add_argument("--cpu-threads", type=int, default=1, help="torch threads with --device cpu (default 1: steadier times on a shared machine)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, help="CSV file to write")
    return p


def validate(a):
    """Check the arguments; returns (methods, params, copy sizes) or raises SystemExit."""
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    if not methods:
        raise fail("--methods is empty")
    for m in methods:
        if m in M.VARIANTS:
            raise fail(f"method '{m}' compresses merged buckets with {M.VARIANTS[m]}'s kernels: profile "
                       f"{M.VARIANTS[m]} instead")
        if m in M.BY_NAME and m not in METHODS:
            raise fail(f"method '{m}' has no torch implementation in this script yet (gradcomp prices its device "
                       f"kernels with the roofline model); allowed: {', '.join(METHODS)}")
        if m not in METHODS:
            raise fail(f"unknown method '{m}'; allowed: {', '.join(METHODS)}")
    if len(set(methods)) != len(methods):
        raise fail(f"--methods repeats a method: {a.methods}")
    checks = [
        (a.world_size >= 1, "--world-size must be >= 1"),
        (a.iters >= 1, "--iters must be >= 1"),
        (a.warmup >= 0, "--warmup must be >= 0"),
        (a.cpu_threads >= 1, "--cpu-threads must be >= 1"),
        (a.density is None or 0 < a.density <= 1, f"--density {a.density} must be in (0, 1]"),
        (a.lowrank_rank >= 1, f"--lowrank-rank {a.lowrank_rank} must be >= 1"),
        (a.min_compression_rate is None or (math.isfinite(a.min_compression_rate) and a.min_compression_rate >= 0), "--min-compression-rate must be finite and >= 0"),
        (0 <= a.momentum < 1, f"--momentum {a.momentum} must be in [0, 1)"),
        (math.isfinite(a.clip_norm) and a.clip_norm >= 0, "--clip-norm must be finite and >= 0"),
        (a.sketch_rows >= 1, "--sketch-rows must be >= 1"),
        (math.isfinite(a.sketch_cols_per_k) and a.sketch_cols_per_k > 0, "--sketch-cols-per-k must be finite and > 0"),
        (1 <= a.qsgd_levels <= QSGD_MAX_LEVELS, f"--qsgd-levels must be in [1, {QSGD_MAX_LEVELS}]"),
    ]
    for ok, msg in checks:
        if not ok:
            raise fail(msg)
    if a.copy_sizes:
        sizes = parse_list(a.copy_sizes, int, "--copy-sizes")
    else:
        top = 13 if not a.device.startswith("cpu") else 11
        sizes = [4 ** k for k in range(5, top + 1)]
    if any(s < 1 for s in sizes) or len(set(sizes)) < 2:
        raise fail("--copy-sizes needs two or more distinct sizes >= 1 (a latency and a bandwidth are fitted to them)")
    params = {
        "density": a.density,
        "rank": a.lowrank_rank,
        "min_compression_rate": a.min_compression_rate,
        "momentum": a.momentum,
        "nesterov": bool(a.nesterov),
        "clip_norm": a.clip_norm,
        "sketch_rows": a.sketch_rows,
        "sketch_cols_per_k": a.sketch_cols_per_k,
        "qsgd_levels": a.qsgd_levels,
    }
    return methods, params, sorted(set(sizes))


def shapes_of(a):
    try:
        if a.shapes:
            return [parse_shape(s) for s in a.shapes.split(",") if s.strip()]
        if a.shapes_from:
            return read_shapes_file(a.shapes_from)
    except (ValueError, OSError) as e:
        raise fail(str(e)) from None
    return model_shapes(a.model, a.gradcomp)


# ---------------------------------------------------------------------------------------
# Methods in torch. Each case holds one tensor's state; `op(stage, round, phase)` is the
# callable to time, or None when the stage has nothing to do. Decompress reads what the
# exchange would leave: the summed wire (all-reduce methods: this worker's own wire stands
# for the sum), or n gathered pieces (all-gather methods: synthetic pieces of the wire's
# size, random indices, bits or codes, in one buffer as an all-gather writes them; DGC's
# pieces have its target k pairs, the most it sends).


def density_of(p, method):
    """The density `method` runs at: the one given, else its own default (gradcomp's
    `default_density`, from its description)."""
    if p["density"] is not None:
        return p["density"]
    return M.default_of(method, "density")


def rate_of(p, method):
    """The min_compression_rate `method` runs at: the one given, else its own default
    (gradcomp's `default_min_compression_rate`, from its description)."""
    if p["min_compression_rate"] is not None:
        return p["min_compression_rate"]
    return M.default_of(method, "min_compression_rate")


def k_of(density, d):
    return min(max(math.ceil(density * d), 1), d)


def compressed_rank(rows, cols, rank, rate):
    """src/compress/orth/slots.rs, compressed_rank: the rank, or None for a tensor sent raw."""
    r = min(rank, rows, cols)
    if rows < 2 or r == 0:
        return None
    return r if (rows + cols) * r * rate < rows * cols else None


class Bits:
    """Packing of bit arrays LSB-first into bytes (gradcomp's u32 words, little-endian)."""

    def __init__(self, torch, dev):
        self.torch = torch
        self.shift = torch.arange(8, device=dev, dtype=torch.uint8)

    def pack(self, bits):
        t = self.torch
        d = bits.numel()
        pad = (-d) % 8
        if pad:
            bits = t.cat([bits, bits.new_zeros(pad)])
        return t.sum(bits.view(-1, 8).to(t.uint8) << self.shift, dim=1, dtype=t.uint8)

    def unpack(self, packed, d):
        """(..., bytes) uint8 -> (..., d) uint8 of 0/1."""
        bits = (packed.unsqueeze(-1) >> self.shift) & 1
        return bits.flatten(-2)[..., :d]


def gradient(torch, rows, cols, dev, gen):
    """A heavy-tailed gradient (normal times log-normal), as gradcomp's benchmarks use."""
    g = torch.randn(rows, cols, device=dev, generator=gen)
    return g.mul_(torch.randn(rows, cols, device=dev, generator=gen).mul_(0.5).exp_())


class Case:
    def __init__(self, torch, method, rows, cols, params, n, dev, gen):
        self.t, self.method, self.rows, self.cols, self.d = torch, method, rows, cols, rows * cols
        self.p, self.n, self.dev, self.gen = params, n, dev, gen
        self.bits = Bits(torch, dev)
        self.g = gradient(torch, rows, cols, dev, gen)
        self.out = torch.zeros(rows, cols, device=dev)
        getattr(self, "setup_" + method.replace("-", "_"))()

    def op(self, stage, rnd, phase):
        fn = getattr(self, f"{stage}_{self.method.replace('-', '_')}")
        return fn(rnd, phase)

    # --- helpers -------------------------------------------------------------------------
    def _others(self, make):
        """n-1 synthetic pieces from `make()`, for an all-gather decompress."""
        return [make() for _ in range(self.n - 1)]

    def _random_bytes(self, nbytes):
        return self.t.randint(0, 256, (nbytes,), device=self.dev, dtype=self.t.uint8, generator=self.gen)

    def _sparse_piece(self, k):
        t = self.t
        idx = t.randperm(self.d, device=self.dev, generator=self.gen)[:k]
        return idx, t.randn(k, device=self.dev, generator=self.gen)

    # --- ssgd: the gradient is the wire; decompress divides the sum by n ------------------
    def setup_ssgd(self):
        self.wire = self.t.empty(self.d, device=self.dev)

    def compress_ssgd(self, rnd, phase):
        return lambda: self.wire.copy_(self.g.view(-1))

    def decompress_ssgd(self, rnd, phase):
        return lambda: self.t.div(self.wire, self.n, out=self.out.view(-1))

    # --- signsgd (EF-SignSGD; grace efsignsgd) -------------------------------------------
    def setup_signsgd(self):
        t = self.t
        self.e = t.zeros(self.d, device=self.dev)
        self.own = (t.ones((), device=self.dev), self.bits.pack(t.ones(self.d, dtype=t.bool, device=self.dev)))
        nb = self.own[1].numel()
        self.scales = t.rand(self.n, device=self.dev, generator=self.gen)
        self.gathered = t.stack([self.own[1]] + self._others(lambda: self._random_bytes(nb)))

    def compress_signsgd(self, rnd, phase):
        t = self.t

        def run():
            e = self.e.add_(self.g.view(-1))
            scale = e.abs().mean()
            packed = self.bits.pack(~t.signbit(e))
            e.sub_(t.copysign(scale, e))  # feedback: e = p - scale * sgn(p)
            self.own = (scale, packed)

        return run

    def decompress_signsgd(self, rnd, phase):
        def run():
            signs = self.bits.unpack(self.gathered, self.d).to(self.t.float32).mul_(2).sub_(1)
            self.t.mv(signs.T, self.scales / self.n, out=self.out.view(-1))

        return run

    # --- signsgd-mv (majority vote) ------------------------------------------------------
    def setup_signsgd_mv(self):
        t = self.t
        own = self.bits.pack(t.ones(self.d, dtype=t.bool, device=self.dev))
        self.gathered = t.stack([own] + self._others(lambda: self._random_bytes(own.numel())))

    def compress_signsgd_mv(self, rnd, phase):
        return lambda: self.bits.pack(~self.t.signbit(self.g.view(-1)))

    def decompress_signsgd_mv(self, rnd, phase):
        def run():
            signs = self.bits.unpack(self.gathered, self.d).to(self.t.float32).mul_(2).sub_(1)
            self.t.sign(signs.sum(0), out=self.out.view(-1))

        return run

    # --- topk with error feedback (grace topk + residual memory) -------------------------
    def setup_topk(self):
        t = self.t
        self.k = k_of(density_of(self.p, "topk"), self.d)
        self.e = t.zeros(self.d, device=self.dev)
        pieces = [self._sparse_piece(self.k) for _ in range(self.n)]
        self.g_idx = t.cat([p[0] for p in pieces])
        self.g_val = t.cat([p[1] for p in pieces])

    def compress_topk(self, rnd, phase):
        t = self.t

        def run():
            e = self.e.add_(self.g.view(-1))
            idx = t.topk(e.abs(), self.k, sorted=False).indices
            vals = e[idx]
            e.index_fill_(0, idx, 0.0)  # feedback: the sent entries leave the residual
            self.own = (idx, vals)

        return run

    def decompress_topk(self, rnd, phase):
        def run():
            out = self.out.view(-1).zero_()
            out.index_add_(0, self.g_idx, self.g_val)
            out.div_(self.n)

        return run

    # --- dgc (synxlin/deep-gradient-compression: momentum correction, sampled threshold) -
    def setup_dgc(self):
        t = self.t
        rho = density_of(self.p, "dgc")
        self.sparse = self.rows > 1 and rho < 1
        self.u = t.zeros(self.d, device=self.dev)
        self.v = t.zeros(self.d, device=self.dev)
        d = self.d
        self.k = k_of(rho, d)
        want = max(math.ceil(0.01 * d), math.ceil(2 / rho))
        if d <= math.ceil(2 / rho):
            self.stride, self.samples = 1, d
        else:
            s = 32 * math.ceil(d / want / 32) + 1
            while s > 1 and d // s < want:
                s = max(s - 8, 1)
            self.stride, self.samples = s, d // s
        self.top_k_samples = max(1, math.ceil(self.samples * rho))
        self.rng = random.Random(self.p.get("seed", 1))
        if self.sparse:
            pieces = [self._sparse_piece(self.k) for _ in range(self.n)]
            self.g_idx = t.cat([p[0] for p in pieces])
            self.g_val = t.cat([p[1] for p in pieces])
        else:
            self.wire = t.empty(d, device=self.dev)

    def _clip(self, g):
        c = self.p["clip_norm"]
        if c <= 0:
            return g
        return g * (c / math.sqrt(self.n) / g.norm()).clamp(max=1.0)

    def compress_dgc(self, rnd, phase):
        t = self.t
        m, nesterov = self.p["momentum"], self.p["nesterov"]
        if not self.sparse:
            return lambda: self.wire.copy_(self.g.view(-1))

        def run():
            g = self._clip(self.g.view(-1))
            u, v = self.u, self.v
            if nesterov:
                u.add_(g).mul_(m)
                v.add_(u).add_(g)
            else:
                u.mul_(m).add_(g)
                v.add_(u)
            imp = v.abs()
            if self.stride > 1:
                start = self.rng.randint(0, self.stride - 1)
                samples = imp[start :: self.stride]
            else:
                samples = imp
            thr = t.topk(samples, self.top_k_samples, sorted=False).values.min()
            idx = (imp >= thr).nonzero().view(-1)
            if self.stride > 1:
                for _ in range(10):
                    got = idx.numel()
                    if got > self.k:
                        if got > 1.3 * self.k:
                            idx = idx[t.topk(imp[idx], self.k, sorted=False).indices]
                        break
                    if got < 0.8 * self.k:
                        thr = thr * 0.8
                        idx = (imp >= thr).nonzero().view(-1)
                    else:
                        break
            idx = idx[: self.k]
            vals = v[idx]
            u.index_fill_(0, idx, 0.0)  # momentum factor masking
            v.index_fill_(0, idx, 0.0)
            self.own = (idx, vals)

        return run

    def decompress_dgc(self, rnd, phase):
        m, nesterov, n = self.p["momentum"], self.p["nesterov"], self.n
        if not self.sparse:
            def dense():
                u = self.u
                if nesterov:
                    a = self.wire / n
                    u.add_(a).mul_(m)
                    self.t.add(u, a, out=self.out.view(-1))
                else:
                    u.mul_(m).add_(self.wire, alpha=1.0 / n)
                    self.out.view(-1).copy_(u)

            return dense

        def run():
            out = self.out.view(-1).zero_()
            out.index_put_((self.g_idx,), self.g_val, accumulate=True)
            out.mul_(1.0 / n)

        return run

    # --- powersgd (PyTorch DDP powerSGD_hook) --------------------------------------------
    def _orth_gs(self, m):
        """powerSGD_hook's Gram-Schmidt (used there for rank <= 2)."""
        for i in range(m.shape[1]):
            col = m[:, i : i + 1]
            col.div_(col.norm())
            if i + 1 < m.shape[1]:
                rest = m[:, i + 1 :]
                rest.sub_(col @ (col.T @ rest))

    def _orth(self, m):
        if m.shape[1] <= 2:
            self._orth_gs(m)
        else:
            self.t.linalg.qr(m, out=(m, self.t.empty(m.shape[1], m.shape[1], device=self.dev)))

    def setup_powersgd(self):
        t = self.t
        self.r = compressed_rank(self.rows, self.cols, self.p["rank"], rate_of(self.p, "powersgd"))
        if self.r is None:
            self.wire = t.empty(self.d, device=self.dev)
            return
        self.e = t.zeros(self.rows, self.cols, device=self.dev)
        self.P = t.randn(self.rows, self.r, device=self.dev, generator=self.gen)
        self.Q = t.randn(self.cols, self.r, device=self.dev, generator=self.gen)

    def compress_powersgd(self, rnd, phase):
        t = self.t
        if self.r is None:
            return (lambda: self.wire.copy_(self.g.view(-1))) if rnd == 0 else None
        if rnd == 0:
            def p_round():
                self.e.add_(self.g)  # resid = M + e
                t.matmul(self.e, self.Q, out=self.P)

            return p_round
        return lambda: t.matmul(self.e.T, self.P, out=self.Q)

    def decompress_powersgd(self, rnd, phase):
        t = self.t
        if self.r is None:
            return (lambda: t.div(self.wire, self.n, out=self.out.view(-1))) if rnd == 0 else None
        if rnd == 0:
            return lambda: self._orth(self.P)

        def q_round():
            self.Q.div_(self.n)
            t.matmul(self.P, self.Q.T, out=self.out)
            self.e.sub_(self.out)  # e = resid - out

        return q_round

    # --- acpsgd (lzhangbv/acpsgd: alternate P and Q steps) -------------------------------
    def setup_acpsgd(self):
        t = self.t
        self.r = compressed_rank(self.rows, self.cols, self.p["rank"], rate_of(self.p, "acpsgd"))
        if self.r is None:
            self.wire = t.empty(self.d, device=self.dev)
            return
        self.e = t.zeros(self.rows, self.cols, device=self.dev)
        self.P = t.randn(self.rows, self.r, device=self.dev, generator=self.gen)
        self.Q = t.randn(self.cols, self.r, device=self.dev, generator=self.gen)

    def compress_acpsgd(self, rnd, phase):
        t = self.t
        if self.r is None:
            return lambda: self.wire.copy_(self.g.view(-1))
        M, E, P, Q = self.g, self.e, self.P, self.Q
        if phase == 0:
            def p_step():
                Q.copy_(t.linalg.qr(Q).Q)
                P.copy_((M + E) @ Q)
                E.add_(M - P @ Q.T)

            return p_step

        def q_step():
            P.copy_(t.linalg.qr(P).Q)
            Q.copy_((M + E).T @ P)
            E.add_(M - P @ Q.T)

        return q_step

    def decompress_acpsgd(self, rnd, phase):
        t = self.t
        if self.r is None:
            return lambda: t.div(self.wire, self.n, out=self.out.view(-1))

        def run():
            t.matmul(self.P, self.Q.T, out=self.out)
            self.out.div_(self.n)

        return run

    # --- marsit (src/compress/marsit.rs: 1-bit ring; global compensation) ----------------
    def setup_marsit(self):
        t = self.t
        self.e = t.zeros(self.d, device=self.dev)
        self.packed = self.bits.pack(t.ones(self.d, dtype=t.bool, device=self.dev))
        self.scale_sum = t.ones((), device=self.dev)

    def compress_marsit(self, rnd, phase):
        t = self.t

        def run():
            e = self.e.add_(self.g.view(-1))  # p = g + e, kept in the residual
            self.scale_sum = e.abs().mean()
            self.packed = self.bits.pack(~t.signbit(e))

        return run

    def decompress_marsit(self, rnd, phase):
        def run():
            b = self.bits.unpack(self.packed, self.d).to(self.t.float32)
            out = self.out.view(-1)
            self.t.mul(b.mul_(2).sub_(1), self.scale_sum / self.n, out=out)
            self.e.sub_(out)  # global compensation: e = p - out

        return run

    # --- sketch (Count Sketch, FetchSGD's CSVec with gradcomp's block-offset hashes) -----
    def setup_sketch(self):
        t = self.t
        d = self.d
        self.k = k_of(density_of(self.p, "sketch"), d)
        self.c = max(1, math.ceil(self.p["sketch_cols_per_k"] * self.k))
        self.nrows = self.p["sketch_rows"]
        # Sent raw when its two rounds would carry at least its own d words
        # (src/compress/sketch.rs, sends_raw): Power-SGD's raw path, round 0 only.
        self.raw = self.nrows * self.c + self.k >= d
        if self.raw:
            self.wire = t.empty(d, device=self.dev)
            return
        block = min(1024, self.c)
        idx = t.arange(d, device=self.dev)
        self.idx = idx
        self.blk = idx // block
        self.off = idx % block
        self.blocks = t.arange((d + block - 1) // block, device=self.dev)
        self.e = t.zeros(d, device=self.dev)
        self.table = t.zeros(self.nrows, self.c, device=self.dev)
        self.top = t.arange(self.k, device=self.dev)  # round 0's candidates (round 1 reads them)
        self.wire1 = t.zeros(self.k, device=self.dev)

    def _hashes(self):
        """Bucket and sign of every element per row, from fresh keys (redrawn every step)."""
        t = self.t
        keys = t.randint(-(2 ** 62), 2 ** 62, (self.nrows, 4), device=self.dev, generator=self.gen)
        keys[:, 0] |= 1
        keys[:, 2] |= 1
        out = []
        for j in range(self.nrows):
            a, b, sa, sb = keys[j]
            start = ((((self.blocks * a + b) >> 32) & 0xFFFFFFFF) * self.c) >> 32
            bucket = (start[self.blk] + self.off) % self.c
            sign = 1.0 - 2.0 * ((self.idx * sa + sb) < 0).to(t.float32)
            out.append((bucket, sign))
        return out

    def compress_sketch(self, rnd, phase):
        """Round 0: the sketch of p = g + e; round 1: the k candidates' exact values p[I]
        (Sketched-SGD's second round; docs/methods.md, "sketch")."""
        if self.raw:
            return (lambda: self.wire.copy_(self.g.view(-1))) if rnd == 0 else None
        if rnd == 1:
            def gather():
                self.wire1 = self.e[self.top]

            return gather

        def run():
            p = self.e.add_(self.g.view(-1))
            self.table.zero_()
            self.h = self._hashes()
            for j, (bucket, sign) in enumerate(self.h):
                self.table[j].index_add_(0, bucket, sign * p)

        return run

    def decompress_sketch(self, rnd, phase):
        t = self.t
        if self.raw:
            return (lambda: t.div(self.wire, self.n, out=self.out.view(-1))) if rnd == 0 else None
        if rnd == 1:
            def apply():
                out = self.out.view(-1).zero_()
                out.index_copy_(0, self.top, self.wire1.div(self.n))  # the all-reduced sum / n
                self.e.index_fill_(0, self.top, 0.0)  # each worker's whole p[I] was applied

            return apply

        def run():
            h = self._hashes()
            vals = t.stack([sign * self.table[j][bucket] for j, (bucket, sign) in enumerate(h)])
            if self.nrows % 2:
                est = vals.median(0).values
            else:
                s = vals.sort(0).values
                est = 0.5 * (s[self.nrows // 2 - 1] + s[self.nrows // 2])
            self.top = t.topk(est.abs(), self.k, sorted=False).indices

        return run

    # --- qsgd (grace qsgd; gradcomp's b-bit codes) ---------------------------------------
    def setup_qsgd(self):
        t = self.t
        s = self.p["qsgd_levels"]
        self.levels = s
        self.b = 1 + s.bit_length()
        self.shift_b = t.arange(self.b, device=self.dev, dtype=t.int32)
        own = self._pack_codes(t.zeros(self.d, dtype=t.int32, device=self.dev))
        self.gathered = t.stack([own] + self._others(lambda: self._random_bytes(own.numel())))
        self.norms = t.rand(self.n, device=self.dev, generator=self.gen)

    def _pack_codes(self, code):
        t = self.t
        if self.b == 8:
            return code.to(t.uint8)
        bits = ((code.unsqueeze(1) >> self.shift_b) & 1).to(t.bool).flatten()
        return self.bits.pack(bits)

    def _unpack_codes(self, packed):
        t = self.t
        if self.b == 8:
            return packed.to(t.int32)
        bits = self.bits.unpack(packed, self.d * self.b).view(*packed.shape[:-1], self.d, self.b).to(t.int32)
        return (bits << self.shift_b).sum(-1)

    def compress_qsgd(self, rnd, phase):
        t = self.t

        def run():
            g = self.g.view(-1)
            norm = g.norm()
            x = g.abs() * (self.levels / norm)
            fl = x.floor()
            level = fl + (t.rand(x.shape, device=self.dev, generator=self.gen) < (x - fl)).to(t.float32)
            code = (level.to(t.int32) << 1) | t.signbit(g).to(t.int32)
            self.own = (norm, self._pack_codes(code))

        return run

    def decompress_qsgd(self, rnd, phase):
        t = self.t

        def run():
            code = self._unpack_codes(self.gathered)
            vals = (code >> 1).to(t.float32) * (1 - 2 * (code & 1)).to(t.float32)
            t.mv(vals.T, self.norms / (self.n * self.levels), out=self.out.view(-1))

        return run


# ---------------------------------------------------------------------------------------
# Timing


# The methods this script times (a torch implementation in `Case`: `setup_<name>`), in
# gradcomp's order; a method without one is priced by gradcomp's roofline kernels alone.
METHODS = [m for m in M.METHODS if hasattr(Case, "setup_" + m.replace("-", "_"))]


class Timer:
    """CUDA events on a GPU (resolved after one synchronize per step), perf_counter on the CPU."""

    def __init__(self, torch, dev):
        self.torch = torch
        self.cuda = dev.type == "cuda"

    def start(self, fn):
        if self.cuda:
            a = self.torch.cuda.Event(enable_timing=True)
            b = self.torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            return lambda: a.elapsed_time(b) / 1e3
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        return lambda: dt

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()


def steps(method):
    """(stage, round, phase) of one step cycle, in execution order."""
    rounds, phases = ROUNDS_PHASES.get(method, (1, 1))
    return [(stage, rnd, phase) for phase in range(phases) for rnd in range(rounds) for stage in ("compress", "decompress")]


def profile_case(torch, timer, case, iters, warmup):
    """Median seconds of each (stage, round, phase) of a case over `iters` step cycles."""
    ops = [(key, case.op(*key)) for key in steps(case.method)]
    samples = {key: [] for key, _ in ops}
    for it in range(warmup + iters):
        pending = [(key, timer.start(fn)) for key, fn in ops if fn is not None]
        timer.sync()
        if it >= warmup:
            for key, get in pending:
                samples[key].append(get())
    return {key: (statistics.median(samples[key]) if fn is not None else 0.0) for key, fn in ops}


def median_s(timer, fn, iters, warmup):
    """Median seconds of `fn` over `iters` calls after `warmup`, one synchronize per call."""
    times = []
    for it in range(warmup + iters):
        get = timer.start(fn)
        timer.sync()
        if it >= warmup:
            times.append(get())
    return statistics.median(times)


def profile_copies(torch, timer, dev, sizes, iters, warmup):
    out = []
    for n in sizes:
        src = torch.randn(n, device=dev)
        dst = torch.empty_like(src)
        out.append((n, median_s(timer, lambda: dst.copy_(src), iters, warmup)))
    return out


def device_info(torch, dev):
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev), torch.version.cuda or "unknown"
    import platform

    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)", "none"


def run(a, methods, params, shapes, copy_sizes):
    import torch

    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise fail("no CUDA device: device compression times are only meaningful on the accelerator (--device cpu to test)")
    if dev.type == "cpu":
        torch.set_num_threads(a.cpu_threads)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)
    timer = Timer(torch, dev)
    rows = []
    for method in methods:
        for r, c in shapes:
            case = Case(torch, method, r, c, dict(params, seed=a.seed), a.world_size, dev, gen)
            with torch.no_grad():
                times = profile_case(torch, timer, case, a.iters, a.warmup)
            for (stage, rnd, phase), t in times.items():
                rows.append((method, stage, rnd, phase, r, c, a.world_size, t))
            del case
        print(f"{method}: {len(shapes)} shapes", file=sys.stderr)
    with torch.no_grad():
        for n, t in profile_copies(torch, timer, dev, copy_sizes, a.iters, a.warmup):
            rows.append((COPY, COPY, 0, 0, 1, n, a.world_size, t))
    name, cuda = device_info(torch, dev)
    meta = [
        ("device", name),
        ("torch", torch.__version__),
        ("cuda", cuda),
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")),
        ("command", " ".join(["profile_compress.py"] + sys.argv[1:])),
        ("model", a.model or "-"),
        ("world_size", a.world_size),
        ("iters", a.iters),
        ("warmup", a.warmup),
    ] + [(k, v) for k, v in params.items() if v is not None]
    return rows, meta


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    methods, params, copy_sizes = validate(a)
    shapes = distinct(shapes_of(a))
    rows, meta = run(a, methods, params, shapes, copy_sizes)
    write_profile(a.out, rows, meta)
    print(f"wrote {a.out}: {len(methods)} methods x {len(shapes)} shapes at world size {a.world_size}, {len(copy_sizes)} copy sizes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
