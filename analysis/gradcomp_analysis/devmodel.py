"""Measured GPU profiles and the device model beside them (docs/device.md, "The device
model against measurements").

`merge_repeats`: the folders of several runs of scripts/gpu_profile.sh on one GPU ->
one compress profile per parameter set (every row the median over the runs, and over
files where a row repeats: the copy rows of each call), the kernel families likewise,
and each row's spread (largest / smallest of its medians over the runs), so that a
comparison is judged against the measurement's own noise.

`family_table`: `gradcomp devcost`'s CSV (every measured row beside the model's price of
it) -> one line per kernel family, the method stages that isolate it.
"""

import math
import os
import statistics
import sys
from collections import defaultdict

from .io import ReportError, read_text, staged_dir

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import profile_compress as pc  # noqa: E402

# Parameter sets: output file -> the gpu_profile.sh files whose rows it gathers.
GROUPS = {
    "profile-r4.csv": ["profile-ws16-a.csv", "profile-ws16-b.csv", "profile-ws8.csv", "profile-ws32.csv", "profile-ws64.csv"],
    "profile-r32.csv": ["profile-r32-ws32.csv"],
    # Count Sketch at its own default size (gpu_profile.sh's profile-sketch steps).
    "profile-sketch.csv": ["profile-sketch-ws16.csv", "profile-sketch-ws8.csv", "profile-sketch-ws32.csv",
                           "profile-sketch-ws64.csv"],
}
# A group measured for rank-dependent methods only takes the other methods' rows from
# another group: their times do not depend on the rank (src/devcost/profile.rs,
# PARAM_KEYS: rank matters to powersgd and acpsgd only).
BORROW = {"profile-r32.csv": ("profile-r4.csv", {"powersgd", "acpsgd"})}
KERNELS = "kernels.csv"
KERNEL_KEY = ["family", "variant", "d", "rows", "cols", "rank", "workers", "count"]
# Provenance keys kept from the first file of a group; the parameters follow.
PROVENANCE = ["device", "torch", "cuda", "date"]


def _spread(values):
    lo, hi = min(values), max(values)
    return hi / lo if lo > 0 else (1.0 if hi == 0 else math.inf)


def _read_profile(path):
    """pc.read_profile, with a file that is not a profile refused by name (a directory,
    non-UTF-8 bytes, a missing column, a value that is not a number)."""
    read_text(path)
    try:
        return pc.read_profile(path)
    except KeyError as e:
        raise ReportError(f"{path}: no column {e} (not a profile scripts/gpu_profile.sh wrote)") from None
    except (ValueError, TypeError) as e:
        raise ReportError(f"{path}: {e} (a damaged row; not a profile scripts/gpu_profile.sh wrote)") from None


def _read_kernels(path):
    """(meta, rows) of a run's kernels.csv, refused by name unless every row has the key
    columns and a numeric time_s."""
    read_text(path)
    m, _, rows = pc.read_commented_csv(path)
    for i, r in enumerate(rows, start=1):
        missing = [k for k in KERNEL_KEY + ["time_s"] if k not in r]
        if missing:
            raise ReportError(f"{path}: row {i} lacks {missing} (not a kernels.csv of analysis/profile_kernels.py)")
        try:
            float(r["time_s"])
        except ValueError:
            raise ReportError(f"{path}: row {i}, column time_s: {r['time_s']!r} is not a number "
                              f"(a damaged row; rerun scripts/gpu_profile.sh)") from None
    return m, rows


def merge_repeats(rep_dirs, out_dir, revision):
    """Write OUT_DIR/profile-r4.csv, profile-r32.csv, profile-sketch.csv, kernels.csv and
    spread.csv from the runs in REP_DIRS; returns the spread summary as text. A group (or
    kernels.csv) that no run holds is left out (runs of a STEPS subset); one that some
    runs hold and others lack is refused. The files move into OUT_DIR together once all are
    whole (io.staged_dir): a refusal or a full disk half way leaves none of them."""
    with staged_dir(out_dir, "GPU profile") as stage:
        return _merge_repeats_into(rep_dirs, stage, revision)


def _merge_repeats_into(rep_dirs, out_dir, revision):
    """`merge_repeats`, writing into OUT_DIR as it goes."""
    if len(rep_dirs) < 2:
        raise ReportError("give two or more runs of scripts/gpu_profile.sh: a row's spread needs repeats")
    # Every profile is read (and a bad one refused) before anything is written.
    for files in GROUPS.values():
        for d in rep_dirs:
            for name in files:
                if os.path.lexists(os.path.join(d, name)):
                    _read_profile(os.path.join(d, name))
    for d in rep_dirs:
        if os.path.lexists(os.path.join(d, KERNELS)):
            _read_kernels(os.path.join(d, KERNELS))
    spread_rows = []
    done = {}
    for out_name, files in GROUPS.items():
        # key -> per run -> samples (a key repeats across files: the copy rows)
        samples = defaultdict(lambda: defaultdict(list))
        meta = None
        if not any(os.path.exists(os.path.join(d, name)) for d in rep_dirs for name in files):
            continue
        for i, d in enumerate(rep_dirs):
            for name in files:
                path = os.path.join(d, name)
                if not os.path.exists(path):
                    raise ReportError(f"{path}: missing (every run must hold {', '.join(files)})")
                m, rows = _read_profile(path)
                meta = meta or m
                for r in rows:
                    samples[r[:7]][i].append(r[7])
        merged = []
        for key, runs in samples.items():
            if len(runs) != len(rep_dirs):
                raise ReportError(f"{out_name}: row {key} is not in every run ({len(runs)} of {len(rep_dirs)})")
            per_run = [statistics.median(v) for v in runs.values()]
            merged.append(key + (statistics.median(per_run),))
            spread_rows.append((out_name, "/".join(str(x) for x in key), _spread(per_run)))
        borrowed = ""
        if out_name in BORROW and BORROW[out_name][0] in done:
            src, own = BORROW[out_name]
            have = {r[:7] for r in merged}
            extra = [r for r in done[src] if r[0] not in own and r[0] != pc.COPY and r[:7] not in have]
            merged += extra
            borrowed = ", ".join(sorted({r[0] for r in extra}))
        done[out_name] = merged
        merged.sort(key=lambda r: (r[0] == pc.COPY, pc.METHODS.index(r[0]) if r[0] in pc.METHODS else 0, r[1:7]))
        out_meta = [(k, meta[k]) for k in PROVENANCE if k in meta]
        out_meta += [
            ("command", f"median of {len(rep_dirs)} runs of scripts/gpu_profile.sh (profile_compress.py --iters "
                        f"{meta.get('iters', '?')} --warmup {meta.get('warmup', '?')}), merged by "
                        "`python -m gradcomp_analysis gpu-profile`"),
            ("gradcomp_revision", revision),
            ("files", " ".join(files)),
        ]
        if borrowed:
            out_meta.append(("borrowed", f"rows of {borrowed} from {BORROW[out_name][0]} (their times do not depend on the rank)"))
        out_meta += [(k, meta[k]) for k in pc.PARAM_DEFAULTS if k in meta]
        pc.write_profile(os.path.join(out_dir, out_name), merged, out_meta)
    if not done:
        raise ReportError(f"{', '.join(rep_dirs)}: no profile of scripts/gpu_profile.sh in them "
                          f"({', '.join(f for fs in GROUPS.values() for f in fs)})")
    have_kernels = [os.path.exists(os.path.join(d, KERNELS)) for d in rep_dirs]
    if any(have_kernels) and not all(have_kernels):
        raise ReportError(f"{KERNELS}: in {sum(have_kernels)} of {len(rep_dirs)} runs (every run or none)")
    if all(have_kernels):
        _merge_kernels(rep_dirs, out_dir, revision, spread_rows)
    with open(os.path.join(out_dir, "spread.csv"), "w") as f:
        f.write("file,row,spread\n")
        for name, key, s in spread_rows:
            f.write(f"{name},{key},{s:.4f}\n")
    return spread_summary(spread_rows)


def _merge_kernels(rep_dirs, out_dir, revision, spread_rows):
    """OUT_DIR/kernels.csv: each kernel row's median over the runs; spreads appended."""
    kern = defaultdict(list)
    kmeta = None
    for d in rep_dirs:
        m, rows = _read_kernels(os.path.join(d, KERNELS))
        kmeta = kmeta or m
        for r in rows:
            kern[tuple(r[k] for k in KERNEL_KEY)].append(float(r["time_s"]))
    with open(os.path.join(out_dir, KERNELS), "w") as f:
        for k in PROVENANCE:
            if k in kmeta:
                f.write(f"# {k}: {kmeta[k]}\n")
        f.write(f"# command: median of {len(rep_dirs)} runs of analysis/profile_kernels.py --iters "
                f"{kmeta.get('iters', '?')} --warmup {kmeta.get('warmup', '?')} (scripts/gpu_profile.sh)\n")
        f.write(f"# gradcomp_revision: {revision}\n")
        f.write(",".join(KERNEL_KEY + ["time_s", "spread"]) + "\n")
        for key, ts in kern.items():
            if len(ts) != len(rep_dirs):
                raise ReportError(f"{KERNELS}: row {key} is not in every run")
            f.write(",".join(key) + f",{statistics.median(ts)!r},{_spread(ts):.4f}\n")
            spread_rows.append((KERNELS, "/".join(key), _spread(ts)))


def spread_summary(spread_rows):
    by = defaultdict(list)
    for name, _, s in spread_rows:
        by[name].append(s)
    lines = ["file               rows  median spread  95th pct    max"]
    for name, v in by.items():
        v = sorted(v)
        p95 = v[min(len(v) - 1, int(math.ceil(0.95 * len(v))) - 1)]
        lines.append(f"{name:<18} {len(v):>4}  {statistics.median(v):>13.3f}  {p95:>8.3f}  {v[-1]:>5.2f}")
    lines.append("spread = largest / smallest of a row's medians over the runs")
    return "\n".join(lines) + "\n"


# Kernel family -> the (method, stage, round, phase) whose time it dominates, and what
# else the stage holds.
FAMILIES = [
    ("top-k select", [("topk", "compress", 0, 0)], "error feedback add, |x|, torch.topk, gather, index_fill"),
    ("scatter / gather (top-k decompression)", [("topk", "decompress", 0, 0)],
     "model: OMGS-SGD's per-worker loop; measured: one index_add_ of all pieces"),
    ("QR / Gram-Schmidt", [("powersgd", "decompress", 0, 0)], "Power-SGD's orthogonalisation of P"),
    ("QR + GEMM projections", [("acpsgd", "compress", 0, 0), ("acpsgd", "compress", 0, 1)],
     "ACP-SGD's step: QR, projection, residual"),
    ("GEMM projections", [("powersgd", "compress", 0, 0), ("powersgd", "compress", 1, 0)], "P = M Q, Q = M^T P"),
    ("sign packing", [("signsgd-mv", "compress", 0, 0), ("marsit", "compress", 0, 0)], "sign bits 8 to a byte"),
    ("sign unpacking", [("signsgd", "decompress", 0, 0), ("signsgd-mv", "decompress", 0, 0)],
     "every worker's bits, vote or scaled sum"),
    ("sketch scatter-add", [("sketch", "compress", 0, 0)], "hashes and 3 index_add_ into the table"),
    ("sketch query + top-k", [("sketch", "decompress", 0, 0)], "3 gathers, median, top-k"),
    ("copy / division", [("ssgd", "compress", 0, 0), ("ssgd", "decompress", 0, 0)], "one element-wise kernel"),
    ("quantisation", [("qsgd", "compress", 0, 0), ("qsgd", "decompress", 0, 0)], "QSGD codes"),
]


def family_table(devcost_csv, min_elems=0):
    """Markdown: per kernel family, rows, median measured and model time, and the median
    (min..max) of model / measured over the tensors of the profile."""
    import pandas as pd

    import io as _io

    text = read_text(devcost_csv)
    try:
        df = pd.read_csv(_io.StringIO(text))
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as e:
        raise ReportError(f"{devcost_csv}: not a CSV file ({str(e).strip()})") from None
    need = {"method", "stage", "round", "phase", "rows", "cols", "measured_s", "model_s", "model_over_measured", "device"}
    if not need <= set(df.columns):
        raise ReportError(f"{devcost_csv}: not a `gradcomp devcost` CSV (columns {sorted(need - set(df.columns))} missing)")
    for c in ("round", "phase", "rows", "cols", "measured_s", "model_s", "model_over_measured"):
        v = pd.to_numeric(df[c], errors="coerce")
        bad = v.isna() & df[c].notna()
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise ReportError(f"{devcost_csv}: line {i + 2}, column {c}: {str(df[c].iloc[i])!r} is not a number; "
                              f"a damaged row: correct or remove that line")
        df[c] = v
    df = df[df["rows"] * df["cols"] >= min_elems]
    out = ["| kernel family | method stages | tensors | measured, median | model, median | model / measured: median (min .. max) |",
           "|---|---|---|---|---|---|"]
    for fam, keys, what in FAMILIES:
        sel = pd.concat([df[(df["method"] == m) & (df["stage"] == s) & (df["round"] == r) & (df["phase"] == ph)]
                         for m, s, r, ph in keys])
        sel = sel[sel["measured_s"] > 0]
        if sel.empty:
            continue
        ratio = sel["model_over_measured"]
        stages = ", ".join(f"{m} {s}" + (f" r{r}" if r else "") + (f" p{ph}" if ph else "") for m, s, r, ph in keys)
        out.append(f"| {fam} | {stages} ({what}) | {len(sel)} | {sel['measured_s'].median() * 1e6:.1f} us | "
                   f"{sel['model_s'].median() * 1e6:.1f} us | {ratio.median():.2f} ({ratio.min():.2f} .. {ratio.max():.2f}) |")
    return "\n".join(out) + "\n"
