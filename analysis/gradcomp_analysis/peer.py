"""gradcomp's kernels against a PyTorch implementation of the same methods on the same
CPU (`make peer-compare`, docs/performance.md, "Compression kernels").

A peer-compare directory holds R rounds of the two sides, run one after the other on the
same shape with one thread each:

- `gradcomp-<i>/micro_compress.csv`: `gradcomp micro-compress -np 1` (one-worker
  exchange; the row's `total_s` is the median step: compress + feedback + decompress
  over every round of the method);
- `torch-<i>.csv`: `analysis/profile_compress.py --device cpu --cpu-threads 1
  --world-size 1`, the same methods in PyTorch after their reference code (per stage,
  round and phase the median time; a step is the sum over its rounds of compress and
  decompress, averaged over the phases, since ACP-SGD alternates P and Q steps).

Per method the table gives each side's step time (median over the rounds of the
per-round medians, and the spread min-max), the fp32 input rate of a step
(`4 numel / step_s`), the speed-up (PyTorch step / gradcomp step), gradcomp's share of
the machine's memory read bandwidth (its input rate / the `mem_read_gbps` probe of the
same run) and, where the bytes a step must move are worked out
(`ROOFLINE_BYTES_PER_ELEMENT`), the roofline time, how far gradcomp is from it, and the
**ceiling**: PyTorch's step over the roofline, the largest speed-up over PyTorch that any
kernel of that method could reach on this machine (a speed-up goal above it cannot be
met by a faster kernel, only by a method that moves fewer bytes).
"""

import glob
import math
import os
import re
import statistics

import pandas as pd

from .io import ReportError, load_csv, read_text, staged_dir

# Bytes per element a step must bring from memory on one core, at the read probe's
# bandwidth: every array read, plus every output written without being read first (its
# lines are read for ownership, or streamed); a line read and then written back costs
# nothing more (the write-back overlaps the reads: a loop reading g, u, v and writing u,
# v back runs at the read probe's speed, docs/performance.md). Per method and phase
# group, with the formula (d elements, f32):
ROOFLINE_BYTES_PER_ELEMENT = {
    # compress: read g, write the wire (a copy) = 8 d; decompress: read the summed wire,
    # write the output (`out = sum / n`) = 8 d.
    "ssgd": {"compress+feedback": 8, "decompress": 8},
    # compress + feedback: read g, u, v (u, v written back) = 12 d; the sample and the
    # candidates stay in cache. decompress: write the output, 4 d.
    "dgc": {"compress+feedback": 12, "decompress": 4},
    # round 0: read g, e (e = g + e written back) = 8 d; round 1: read e for Q = e^T P,
    # 4 d; then read e (e - P Q^T written back) and write the output, 8 d.
    "powersgd": {"compress+feedback": 12, "decompress": 8},
    # one pass reading g, e (e written back, the deferred residual applied in it) = 8 d;
    # decompress writes the output, 4 d.
    "acpsgd": {"compress+feedback": 8, "decompress": 4},
}
# The goal of issue 33: a step (DGC: its compress kernel) within this factor of the roofline.
ROOFLINE_GOAL = 1.5
# Which phases each method's goal is about.
GOAL_PHASES = {"dgc": ("compress+feedback",), "powersgd": ("compress+feedback", "decompress"),
               "acpsgd": ("compress+feedback", "decompress")}


def _rounds(root: str):
    """[(i, gradcomp dir, torch csv)] of the rounds under ROOT, in round order."""
    found = {}
    for d in glob.glob(os.path.join(root, "gradcomp-*")):
        m = re.fullmatch(r"gradcomp-(\d+)", os.path.basename(d))
        if m and os.path.isfile(os.path.join(d, "micro_compress.csv")):
            found.setdefault(int(m.group(1)), [None, None])[0] = d
    for f in glob.glob(os.path.join(root, "torch-*.csv")):
        m = re.fullmatch(r"torch-(\d+)\.csv", os.path.basename(f))
        if m:
            found.setdefault(int(m.group(1)), [None, None])[1] = f
    rounds = [(i, g, t) for i, (g, t) in sorted(found.items()) if g and t]
    if not rounds:
        raise ReportError(f"{root}: no round with both gradcomp-<i>/micro_compress.csv and torch-<i>.csv "
                          "(run `make peer-compare`)")
    return rounds


def read_torch_profile(path: str):
    """(meta, DataFrame) of a profile written by analysis/profile_compress.py."""
    meta, lines = {}, []
    for line in read_text(path).splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            k, sep, v = s[1:].partition(":")
            if sep:
                meta.setdefault(k.strip(), v.strip())
            continue
        lines.append(s.split(","))
    if not lines or lines[0][:1] != ["method"]:
        raise ReportError(f"{path}: not a compress profile (no header 'method,stage,...')")
    bad = [i for i, fields in enumerate(lines[1:]) if len(fields) != len(lines[0])]
    if bad:
        raise ReportError(f"{path}: row {bad[0] + 1} has {len(lines[1 + bad[0]])} fields, the header {len(lines[0])}: "
                          f"a damaged profile; rerun analysis/profile_compress.py")
    df = pd.DataFrame(lines[1:], columns=lines[0])
    try:
        for c in ("round", "phase", "rows", "cols", "world_size"):
            df[c] = df[c].astype(int)
        df["time_s"] = df["time_s"].astype(float)
    except KeyError as e:
        raise ReportError(f"{path}: no column {e} (not a compress profile)") from None
    except ValueError as e:
        raise ReportError(f"{path}: {e} (a damaged row; rerun analysis/profile_compress.py)") from None
    return meta, df


def torch_step_times(profile: pd.DataFrame) -> pd.DataFrame:
    """Per (method, rows, cols): `step_s` (sum over rounds and stages, mean over phases)
    and `compress+feedback` / `decompress` parts on the same rule."""
    p = profile[profile["method"] != "copy"]
    out = []
    for (m, r, c), g in p.groupby(["method", "rows", "cols"], sort=False):
        phases = sorted(g["phase"].unique())
        part = {}
        for stage, name in (("compress", "compress+feedback"), ("decompress", "decompress")):
            per_phase = [g[(g["phase"] == ph) & (g["stage"] == stage)]["time_s"].sum() for ph in phases]
            part[name] = sum(per_phase) / len(per_phase)
        out.append({"method": m, "rows": r, "cols": c, "compress+feedback": part["compress+feedback"],
                    "decompress": part["decompress"], "step_s": part["compress+feedback"] + part["decompress"]})
    return pd.DataFrame(out)


def gradcomp_step_times(micro: pd.DataFrame) -> pd.DataFrame:
    """Per (method, rows, cols) of single-tensor rows: `step_s` (the row's median step),
    the phase parts (medians of compress + feedback, and of decompress) and the probe."""
    m = micro[micro["model"].isna() | (micro["model"].astype(str) == "")] if "model" in micro else micro
    return pd.DataFrame({
        "method": m["method"], "rows": m["rows"].astype(int), "cols": m["cols"].astype(int),
        "compress+feedback": m["compress_s"] + m["feedback_s"], "decompress": m["decompress_s"],
        "step_s": m["total_s"], "mem_read_gbps": m["mem_read_gbps"],
    })


def _load_micro(path: str) -> pd.DataFrame:
    df = load_csv(os.path.dirname(path), os.path.basename(path))
    if df is None:
        raise ReportError(f"{path}: no rows (run `make peer-compare` again)")
    for c in ("method", "rows", "cols", "compress_s", "feedback_s", "decompress_s", "total_s", "mem_read_gbps"):
        if c not in df.columns:
            raise ReportError(f"{path}: no column {c}")
    return df


def _spread(vals):
    """(median, min, max) of a list of numbers."""
    return statistics.median(vals), min(vals), max(vals)


def load_rounds(root: str):
    """Per round the gradcomp and torch tables, stacked with a `round` column, and the
    torch profiles' metadata of the first round."""
    g_all, t_all, meta = [], [], None
    for i, gdir, tcsv in _rounds(root):
        g = gradcomp_step_times(_load_micro(os.path.join(gdir, "micro_compress.csv")))
        m, prof = read_torch_profile(tcsv)
        meta = meta or m
        t = torch_step_times(prof)
        g["round"], t["round"] = i, i
        g_all.append(g)
        t_all.append(t)
    return pd.concat(g_all, ignore_index=True), pd.concat(t_all, ignore_index=True), meta or {}


def peer_table(g: pd.DataFrame, t: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, shape) present on both sides (see the module doc). `g`, `t`:
    the stacked per-round tables of `load_rounds`."""
    rows = []
    for (method, r, c), gm in g.groupby(["method", "rows", "cols"], sort=False):
        tm = t[(t["method"] == method) & (t["rows"] == r) & (t["cols"] == c)]
        if tm.empty:
            continue
        numel = r * c
        gs, gmin, gmax = _spread(list(gm["step_s"]))
        ts, tmin, tmax = _spread(list(tm["step_s"]))
        probe = statistics.median(gm["mem_read_gbps"])
        g_gbps = 4 * numel / gs / 1e9
        row = {
            "method": method, "shape": f"{r}x{c}", "rounds": len(gm),
            "gradcomp_ms": gs * 1e3, "gradcomp_min_ms": gmin * 1e3, "gradcomp_max_ms": gmax * 1e3,
            "torch_ms": ts * 1e3, "torch_min_ms": tmin * 1e3, "torch_max_ms": tmax * 1e3,
            "gradcomp_gbps": g_gbps, "torch_gbps": 4 * numel / ts / 1e9,
            "speedup": ts / gs, "mem_read_gbps": probe, "mem_share": g_gbps / probe,
            "roofline_ms": math.nan, "x_roofline": math.nan, "ceiling": math.nan,
        }
        model = ROOFLINE_BYTES_PER_ELEMENT.get(method)
        if model:
            row["roofline_ms"] = sum(model.values()) * numel / (probe * 1e9) * 1e3
            row["x_roofline"] = row["gradcomp_ms"] / row["roofline_ms"]
            row["ceiling"] = row["torch_ms"] / row["roofline_ms"]
        rows.append(row)
    if not rows:
        raise ReportError("no method and shape measured by both gradcomp and PyTorch")
    return pd.DataFrame(rows)


def roofline_goals(g: pd.DataFrame) -> pd.DataFrame:
    """Issue 33's goals per method with a roofline model: the goal's phases (DGC: its
    compress kernel, compress + feedback; Power-SGD and ACP-SGD: the step), the bytes,
    the roofline time at each round's probe, the measured time and the ratio (median and
    spread over the rounds), and whether the median is within `ROOFLINE_GOAL`."""
    rows = []
    for (method, r, c), gm in g.groupby(["method", "rows", "cols"], sort=False):
        if method not in GOAL_PHASES:
            continue
        phases = GOAL_PHASES[method]
        per_elem = sum(ROOFLINE_BYTES_PER_ELEMENT[method][p] for p in phases)
        numel = r * c
        measured = [sum(row[p] for p in phases) for _, row in gm.iterrows()]
        roof = [per_elem * numel / (row["mem_read_gbps"] * 1e9) for _, row in gm.iterrows()]
        ratios = [m / f for m, f in zip(measured, roof)]
        ms, mmin, mmax = _spread(measured)
        x, xmin, xmax = _spread(ratios)
        rows.append({
            "method": method, "shape": f"{r}x{c}", "phases": " + ".join(phases).replace("+feedback", " + feedback"),
            "bytes_per_element": per_elem, "roofline_ms": statistics.median(roof) * 1e3,
            "measured_ms": ms * 1e3, "measured_min_ms": mmin * 1e3, "measured_max_ms": mmax * 1e3,
            "x_roofline": x, "x_roofline_min": xmin, "x_roofline_max": xmax,
            "within_goal": "yes" if x <= ROOFLINE_GOAL else "no",
        })
    return pd.DataFrame(rows)


def _f(x, digits=2):
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def markdown(peer: pd.DataFrame, goals: pd.DataFrame, meta: dict) -> str:
    """The two tables as Markdown, with the PyTorch side's device line."""
    out = [f"PyTorch {meta.get('torch', '?')} on {meta.get('device', '?')}; one thread each side; "
           f"times: median over {int(peer['rounds'].max())} rounds [min-max]", "",
           "| method | shape | gradcomp step | PyTorch step | gradcomp GB/s | PyTorch GB/s | speed-up | "
           "share of memory read bandwidth | roofline | x roofline | ceiling |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in peer.iterrows():
        out.append(
            f"| {r['method']} | {r['shape']} | {_f(r['gradcomp_ms'])} ms [{_f(r['gradcomp_min_ms'])}-{_f(r['gradcomp_max_ms'])}] "
            f"| {_f(r['torch_ms'], 1)} ms [{_f(r['torch_min_ms'], 1)}-{_f(r['torch_max_ms'], 1)}] "
            f"| {_f(r['gradcomp_gbps'])} | {_f(r['torch_gbps'], 3)} | {_f(r['speedup'], 1)}x "
            f"| {_f(r['mem_share'])} of {_f(r['mem_read_gbps'], 1)} GB/s "
            f"| {(_f(r['roofline_ms']) + ' ms') if not math.isnan(r['roofline_ms']) else ''} "
            f"| {_f(r['x_roofline'])} | {(_f(r['ceiling'], 1) + 'x') if not math.isnan(r['ceiling']) else ''} |")
    if not goals.empty:
        out += ["", f"| method | shape | kernel | bytes per element | roofline | measured | x roofline | within {ROOFLINE_GOAL}x |",
                "|---|---|---|---|---|---|---|---|"]
        for _, r in goals.iterrows():
            out.append(
                f"| {r['method']} | {r['shape']} | {r['phases']} | {r['bytes_per_element']} | {_f(r['roofline_ms'])} ms "
                f"| {_f(r['measured_ms'])} ms [{_f(r['measured_min_ms'])}-{_f(r['measured_max_ms'])}] "
                f"| {_f(r['x_roofline'])} [{_f(r['x_roofline_min'])}-{_f(r['x_roofline_max'])}] | {r['within_goal']} |")
    return "\n".join(out) + "\n"


def peer_compare(root: str, out_dir=None) -> str:
    """Build both tables from ROOT, write peer_compare.md, peer_compare.csv and
    roofline_goals.csv into OUT_DIR (default ROOT); returns the Markdown."""
    g, t, meta = load_rounds(root)
    peer = peer_table(g, t)
    goals = roofline_goals(g)
    md = markdown(peer, goals, meta)
    with staged_dir(out_dir or root, "peer comparison") as d:
        peer.to_csv(os.path.join(d, "peer_compare.csv"), index=False)
        goals.to_csv(os.path.join(d, "roofline_goals.csv"), index=False)
        with open(os.path.join(d, "peer_compare.md"), "w") as f:
            f.write(md)
    return md
