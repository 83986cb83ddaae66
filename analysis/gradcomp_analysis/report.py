"""Report assembly: report.md, every table as Markdown + CSV (+ LaTeX), PNG plots.

Every number comes from the CSV files of the results directories (tables.py); the
published figures beside them come from published.py and are marked "(published)".
A paper table whose rows are absent is replaced by a line naming the config that
produces them.
"""

import datetime
import json
import math
import numbers
import os
import sys

import pandas as pd

from . import SUPPORTED_SCHEMA_VERSIONS, plots, published as pub, tables as T, trains, verdict as V
from .io import (ReportError, Results, discover, load_csv, load_results, read_json_object,  # noqa: F401  (load_csv: public API)
                 read_text, staged_dir)

# What every table's `wire vs dense` (tables.WIRE) is, said once in the text above the tables.
WIRE_TEXT = ("`wire vs dense` (and `X wire vs dense` in a table with a column per method or fusion): the bytes one "
             "worker sends per iteration (`wire_bytes`, all buckets and rounds) over the model's fp32 gradient "
             "(`dense_bytes`, 4 bytes x parameters: exactly S-SGD's all-reduce message, so S-SGD is 1), a fraction "
             "of dense S-SGD's bytes (0.002 = 1/500), at the configuration timed; `density` is a sparsifier's rho. "
             "Empty where the CSV row has no `dense_bytes`; the table's note says so.")

# Which bench config produces the rows of each paper table (docs/reproduce.md).
CONFIGS = {
    "acpsgd_main": "acpsgd-main",
    "acpsgd_ablation": "acpsgd-ablation",
    "acpsgd_buffer_sweep": "acpsgd-buffer-sweep",
    "acpsgd_rank_sweep": "acpsgd-rank-sweep",
    "acpsgd_scaling": "acpsgd-scaling",
    "acpsgd_network": "acpsgd-main",
    "dgc_ratio": "dgc-ratio",
    "omgs": "omgs",
    "marsit": "marsit",
    "sketch_fusion": "sketch-fusion",
    "sketch_scaling": "sketch-fusion",
}
HOW = {
    "acpsgd_scaling": "one run per world size (slurm/submit-acpsgd-scaling.sh submits 8/16/32/64 ranks into "
                      "subdirectories of one folder; report that folder)",
    "acpsgd_network": "one run per network, each with a network.txt label (slurm/submit-acpsgd-network.sh)",
    "sketch_scaling": "one run per world size (slurm/submit-sketch-fusion.sh --scaling)",
}


SIG = 4  # significant digits of a measured number in the printed tables
SIG_CI = 2  # of a 95% interval's half-width


def _missing(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v) or (not isinstance(v, str) and pd.isna(v))


def _sig(v: float, sig: int) -> str:
    """V with SIG significant digits in positional notation, trailing zeros kept
    (1.615, 283.4, 0.05123, 12346)."""
    if v == 0:
        return "0"
    r = float(f"{v:.{sig - 1}e}")  # rounded first: 9.9996 -> 10.00, not 10.000
    if abs(r) < 1e-4:
        return f"{r:.{sig - 1}e}"  # 3.328e-07, not 0.0000003328
    e = math.floor(math.log10(abs(r)))
    return f"{r:.{max(0, sig - 1 - e)}f}"


def fmt(v, sig: int = SIG, exact: bool = False) -> str:
    """One cell. Floats: SIG significant digits, or (EXACT) their shortest form."""
    if _missing(v):
        return ""
    if isinstance(v, (bool, str)):
        return str(v)
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        v = float(v)
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if exact:
            return f"{v:.12g}" if "e" not in f"{v:.12g}" else _sig(v, SIG)
        return _sig(v, sig)
    return str(v)


def format_column(values, name: str) -> list:
    """A column's cells with one number format for the whole column: integers as such;
    columns whose every number is short (parameters like density 0.001, published 31)
    in their shortest form; measurements with SIG significant digits (SIG_CI for an
    interval's half-width, columns named `X ±`)."""
    vals = list(values)
    nums = [float(v) for v in vals if isinstance(v, numbers.Real) and not isinstance(v, bool) and not _missing(v)
            and math.isfinite(float(v))]
    if nums and all(x.is_integer() for x in nums) and all(abs(x) < 1e15 for x in nums):
        return [fmt(int(v)) if isinstance(v, numbers.Real) and not _missing(v) and math.isfinite(float(v))
                else fmt(v) for v in vals]
    sig = SIG_CI if str(name).endswith(" ±") else SIG
    exact = bool(nums) and ("(published" in str(name) or all(float(f"{x:.{sig}g}") == x for x in nums))
    return [fmt(v, sig, exact) for v in vals]


# A 95% half-width above this multiple of its value: the interval says nothing (it
# reaches below zero), so the cell says "too noisy" instead of `x ± e` (the CSV keeps e).
NOISY_REL = 1.0


def too_noisy(v, e) -> bool:
    try:
        v, e = float(v), float(e)
    except (TypeError, ValueError):
        return False
    return math.isfinite(v) and v > 0 and math.isfinite(e) and e > NOISY_REL * v


def _cells(t: pd.DataFrame, pm: str, esc=lambda x: x):
    """Headers and rows of T for printing: a column `X ±` (a 95% half-width) is shown in
    X's cell as `x ± e` and not as a column of its own."""
    cols = [str(c) for c in t.columns]
    text = {c: format_column(t[c], c) for c in t.columns}
    shown = [c for c in t.columns if not (str(c).endswith(" ±") and str(c)[:-2] in cols)]
    rows = []
    for i in range(len(t)):
        row = []
        for c in shown:
            v = esc(text[c][i])
            e = text.get(f"{c} ±")
            if e is not None and v and e[i]:
                v = f"{v} (too noisy)" if too_noisy(t[c].iloc[i], t[f"{c} ±"].iloc[i]) else f"{v}{pm}{esc(e[i])}"
            row.append(v)
        rows.append(row)
    return [str(c) for c in shown], rows


def to_markdown(t: pd.DataFrame) -> str:
    """Markdown table (no tabulate dependency), without the index."""
    cols, cells = _cells(t, " ± ")
    rows = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in cells:
        rows.append("| " + " | ".join(v.replace("|", "\\|") for v in r) + " |")
    return "\n".join(rows)


def _tex(s) -> str:
    return str(s).replace("\\", "\\textbackslash{}").replace("&", "\\&").replace("%", "\\%") \
        .replace("_", "\\_").replace("#", "\\#").replace("≈", "$\\approx$").replace("±", "$\\pm$")


def to_latex(t: pd.DataFrame, caption: str) -> str:
    """A booktabs tabular (no jinja2 dependency)."""
    cols, cells = _cells(t, " $\\pm$ ", _tex)
    lines = ["\\begin{table}[t]", "\\centering", f"\\caption{{{_tex(caption)}}}",
             "\\begin{tabular}{" + "l" * len(cols) + "}", "\\toprule",
             " & ".join(_tex(c) for c in cols) + " \\\\", "\\midrule"]
    for r in cells:
        lines.append(" & ".join(r) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    return "\n".join(lines)


class Report:
    def __init__(self, out_dir: str, latex: bool):
        self.out_dir, self.latex = out_dir, latex
        self.lines = []
        self.tables, self.plots, self.missing = [], [], {}

    def add(self, *lines):
        self.lines += list(lines)

    def table(self, name: str, t: pd.DataFrame, caption: str = ""):
        notes = list(t.attrs.get("notes", []))
        t = t.reset_index(drop=True)
        t.to_csv(os.path.join(self.out_dir, f"{name}.csv"), index=False)
        md = to_markdown(t)
        note_md = "".join(f"\n_Note: {n}_\n" for n in notes)
        with open(os.path.join(self.out_dir, f"{name}.md"), "w") as f:
            f.write((f"{caption}\n\n" if caption else "") + md + "\n" + note_md)
        if self.latex:
            with open(os.path.join(self.out_dir, f"{name}.tex"), "w") as f:
                f.write(to_latex(t, caption or name))
        self.tables.append(name)
        self.add(f"Table `{name}` ([csv]({name}.csv)){': ' + caption if caption else ''}", "", md, "")
        for n in notes:
            self.add(f"_Note: {n}_", "")

    def figs(self, files):
        for f in files:
            self.plots.append(f)
            self.add(f"![{f}]({f})", "")

    def paper_table(self, name: str, func, *args, caption: str = ""):
        """Compute a paper table; on MissingData say which config produces its rows."""
        try:
            t = func(*args)
        except T.MissingData as e:
            cfg = CONFIGS.get(name, "")
            how = HOW.get(name, "")
            msg = (f"_Table `{name}` not in these results ({e}). Produced by `bench-configs/{cfg}.toml` "
                   f"(laptop: `bench-configs/{cfg}-laptop.toml`){'; ' + how if how else ''}; "
                   f"see docs/reproduce.md._")
            self.missing[name] = str(e)
            self.add(msg, "")
            return None
        self.table(name, t, caption)
        return t


def _record_line(m):
    cmd = m.get("command_line") or []
    sub = next((a for a in cmd[1:] if not a.startswith("-")), "?")
    return (f"(`{m.get('run_id')}`, `{sub}`): status `{m.get('status')}`, {T.ranks(m.get('world_size'))} on "
            f"{', '.join(sorted(set(m.get('hosts') or [])))}; gradcomp {m.get('gradcomp_version')} "
            f"({m.get('git_revision')}); MPI: {m.get('mpi_library')}; {m.get('start_time')} to {m.get('end_time')}; "
            + (f"Slurm job {m['slurm_job_id']}" if m.get("slurm_job_id") else "not under Slurm"))


def _run_lines(meta, history=(), converge_records=()):
    """One line per run directory (its run.json), then one per earlier invocation whose record gradcomp
    kept there (run.<run_id>.json), oldest first, then the convergence check written beside a benchmark
    (converge.run.json; `make bench`) and any earlier one (converge.run.<run_id>.json)."""
    lines = []
    for label, m in meta:
        lines.append(f"- run `{label}` {_record_line(m)}" if m else f"- run `{label}`: no run.json")
        earlier = sorted((h for lab, h in history if lab == label), key=lambda h: str(h.get("start_time")))
        lines.extend(f"  - earlier invocation into it {_record_line(h)}" for h in earlier)
        checks = [c for lab, c in converge_records if lab == label]
        lines.extend(f"  - {'convergence check' if i == 0 else 'earlier convergence check'} into it {_record_line(c)}"
                     for i, c in enumerate(checks))
    return lines


def acp_vs_power(R, df, name: str, what: str):
    """ACP-SGD vs Power-SGD per step, where the CSV has both on a compressed shape."""
    t = T.acpsgd_vs_powersgd(df)
    if len(t):
        R.add("### ACP-SGD vs Power-SGD per step", "",
              f"{what}; ACP-SGD computes and all-reduces one factor per step, Power-SGD two "
              "(ratios are acpsgd / powersgd).", "")
        R.table(name, t)


# ---------------------------------------------------------------- paper scale (simulated)
PAPER_SCALE_MARKER = "paper_scale.txt"  # written by scripts/paper_scale.sh beside each sim.csv
COST_COMPONENTS = ["compress_s", "decompress_s", "comm_s", "pack_s", "exposed_s"]
COMPRESS_ON = ["host", "device"]


def find_paper_scale(dirs) -> list:
    """Folders below DIRS written by scripts/paper_scale.sh, each a dict: `path`, the
    marker's key=value fields (headline, network, ranks_per_node, command, ...), `sim`
    (its sim.csv, or None) and `error` (simulate's error.txt, or "")."""
    found = []
    for root in dirs:
        for d, subs, files in os.walk(root):
            subs[:] = sorted(s for s in subs if not os.path.islink(os.path.join(d, s)))
            if PAPER_SCALE_MARKER not in files:
                continue
            # read_text: a regular UTF-8 file, else a ReportError naming it (never a
            # UnicodeDecodeError out of write_report called from Python).
            text = read_text(os.path.join(d, PAPER_SCALE_MARKER))
            info = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            info["path"] = d
            info["label"] = os.path.relpath(d, root)
            info["sim"] = load_csv(d, "sim.csv")
            err = os.path.join(d, "error.txt")
            info["error"] = read_text(err).strip() if os.path.lexists(err) else ""
            found.append(info)
    return found


def find_simulations(dirs) -> list:
    """`gradcomp simulate` folders below DIRS (a sim.csv with rows; not paper-scale
    folders, which have their own section, nor `--compare` folders, read as simulator
    accuracy): dicts with `path`, `label` (relative to the root given) and `sim`."""
    found = []
    for root in dirs:
        for d, subs, files in os.walk(root):
            subs[:] = sorted(s for s in subs if not os.path.islink(os.path.join(d, s)))
            if "sim.csv" not in files or PAPER_SCALE_MARKER in files or "sim_vs_measured.csv" in files:
                continue
            sim = load_csv(d, "sim.csv")
            if sim is not None and len(sim):
                label = os.path.relpath(d, root)
                found.append({"path": d, "label": os.path.basename(os.path.normpath(d)) if label == "." else label,
                              "sim": sim})
    return found


def simulate_section(R, found, out_dir):
    """Section "What-if (gradcomp simulate)": each simulate folder's best configuration
    per model, world size, network and method, with its speedup over S-SGD's best."""
    if not found:
        return
    R.add("## What-if (`gradcomp simulate`)", "",
          "Simulated iterations (docs/architecture.md, \"The simulator\"): no measurement, the e2e schedule on a "
          "virtual clock with the cost model named in `cost_source`. Per model, world size, network and method the "
          "fastest simulated configuration (`fusion/pipelining/collective`) and `vs ssgd`, S-SGD's fastest "
          "iteration over the method's (above 1: faster than S-SGD). " + WIRE_TEXT, "")
    df = pd.concat([f["sim"].assign(run=f["label"]) for f in found], ignore_index=True)
    t = T.simulated_best(df)
    R.table("simulated_best", t, "best simulated configuration per model, world size, network and method")
    for src in sorted(set(df["cost_source"].dropna().astype(str))) if "cost_source" in df.columns else []:
        R.add(f"- cost source: {src}")
    R.add("")
    R.figs(plots.simulated_best(t, out_dir))


def _sims(found, headline: str) -> pd.DataFrame:
    fs = [f["sim"].assign(headline=headline, folder=f["path"]) for f in found
          if f.get("headline") == headline and f["sim"] is not None and len(f["sim"])]
    return pd.concat(fs, ignore_index=True) if fs else pd.DataFrame()


def _best(df: pd.DataFrame, keys: list) -> pd.DataFrame:
    """Each group's fastest row (best fusion/pipelining among those simulated)."""
    return df.loc[df.groupby(keys, sort=False)["iter_s"].idxmin()]


def _paper_rank(df: pd.DataFrame) -> pd.DataFrame:
    """Power-SGD / ACP-SGD rows at each model's ACP-SGD paper rank; other methods as they are."""
    lowrank = df["method"].isin(["powersgd", "acpsgd"])
    want = df["model"].map(lambda m: pub.ACPSGD_MAIN_SETUP.get(m, (None, None))[1])
    return df[~lowrank | (df["rank"] == want)]


def deciding_cost(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """Which cost makes A (claimed faster) not faster than B: the component of
    COST_COMPONENTS whose A - B difference is the largest, summed over the rows given
    (A's and B's rows are paired setups). Returned as `name (+x ms)`."""
    diff = {c: float(a[c].sum() - b[c].sum()) for c in COST_COMPONENTS if c in a.columns and c in b.columns}
    if not diff:
        return ""
    name = max(diff, key=lambda c: diff[c])
    return f"{name} ({diff[name] * 1e3:+.1f} ms)"


def _pair(df: pd.DataFrame, keys: list, a_sel, b_sel):
    """Best rows of A and of B per KEYS (compress_on included), aligned on KEYS."""
    a = _best(df[a_sel(df)], keys).set_index(keys).sort_index()
    b = _best(df[b_sel(df)], keys).set_index(keys).sort_index()
    common = a.index.intersection(b.index)
    return a.loc[common], b.loc[common]


def _speedup_claim(df, keys, a_sel, b_sel, agg: str):
    """Per compress_on: (value, direction holds, deciding cost). The speedup of each setup
    is t_B / t_A; AGG: `mean` (value = mean speedup, direction if > 1), `all` (value = mean,
    direction if every setup > 1), `max_pct` (value = the largest % faster over the setups,
    t_B/t_A - 1, direction if > 0), `max_less_pct` (the largest % less time, 1 - t_A/t_B,
    > 0). The size is judged by verdict.py."""
    out = {}
    for on in COMPRESS_ON:
        d = df[df["compress_on"] == on]
        a, b = _pair(d, keys, a_sel, b_sel)
        if not len(a):
            continue
        s = b["iter_s"] / a["iter_s"]
        if agg == "mean":
            val, ok = s.mean(), s.mean() > 1
        elif agg == "all":
            val, ok = s.mean(), bool((s > 1).all())
        elif agg == "max_pct":
            val, ok = (s.max() - 1) * 100, s.max() > 1
        else:
            val, ok = (1 - 1 / s.max()) * 100, s.max() > 1
        slow = s <= 1
        cost = "" if ok else deciding_cost(a[slow] if slow.any() else a, b[slow] if slow.any() else b)
        out[on] = (float(val), bool(ok), cost)
    return out


def _method(m, fusion=None):
    if fusion is None:
        return lambda d: d["method"] == m
    return lambda d: (d["method"] == m) & (d["fusion"].astype(str) == fusion)


def _compressed(*methods) -> list:
    """wire_cell's selectors of METHODS but S-SGD (dense: 1 by definition)."""
    return [(m, _method(m)) for m in methods if m != "ssgd"]


def plans(df: pd.DataFrame, method: str) -> str:
    """The plan_source values METHOD's rows ran, per compress_on (`host: omgs; device:
    omgs`); a fallback shows as `64MiB (omgs predicted ...)`."""
    if "plan_source" not in df.columns:
        return "not recorded (sim.csv without plan_source)"
    d = df[df["method"] == method]
    return "; ".join(f"{on}: " + ", ".join(sorted(set(d[d["compress_on"] == on]["plan_source"].fillna("").astype(str))))
                     for on in COMPRESS_ON if (d["compress_on"] == on).any())


def published_validation(found) -> pd.DataFrame:
    """published_validation.csv of every paper-scale folder (simulate --validate-published):
    a paper's published cost constants beside our presets' predictions, each row with its folder
    (two folders' presets predict the same quantity differently)."""
    ts = [pd.read_csv(os.path.join(f["path"], "published_validation.csv")).assign(folder=f.get("label", f["path"]))
          for f in found if os.path.exists(os.path.join(f["path"], "published_validation.csv"))]
    if not ts:
        return pd.DataFrame()
    t = pd.concat(ts, ignore_index=True)
    t["published ms"] = t["published_s"] * 1e3
    t["ours ms"] = t["ours_s"] * 1e3
    t = t.rename(columns={"ours_over_published": "ours/published"})
    return t[["quantity", "workers", "elements", "published ms", "ours ms", "ours/published", "published_source",
              "ours_source", "folder"]]


def fixed(v, nd: int = 2) -> str:
    """V with ND decimals, never `-0.00`: a value that rounds to zero but is not zero keeps
    two significant digits (-7.5e-05, -0.0012: the sign says something), zero is `0.00`."""
    v = float(v)
    if v != v:
        return "nan"
    if round(v, nd) == 0:
        return f"{0:.{nd}f}" if v == 0 else _sig(v, 2)
    return f"{v:.{nd}f}"


def wire_cell(df: pd.DataFrame, sels) -> str:
    """The `wire vs dense` cell of a headline: for each (label, selector) of SELS whose rows DF
    has, the range over those rows (the setups simulated) of wire_bytes / dense_bytes
    (tables.wire_vs_dense), after a sparsifier's density: `omgs (density 0.001) 0.002049 to
    0.002107; topk (layer-wise) (density 0.001) 0.00208`. A method whose rows have no
    dense_bytes says so."""
    parts = []
    for label, sel in sels:
        d = df[sel(df)] if len(df) else df
        if not len(d):
            continue
        rho = T.density_of(d).dropna()
        name = label + (f" (density {', '.join(f'{x:g}' for x in sorted(set(rho)))})" if len(rho) else "")
        w = T.wire_vs_dense(d).dropna()
        if not len(w):
            parts.append(f"{name} not recorded (sim.csv rows without dense_bytes)")
            continue
        lo, hi = f"{w.min():.{SIG}g}", f"{w.max():.{SIG}g}"  # SIG significant digits, no trailing zeros
        parts.append(f"{name} {lo}" if lo == hi else f"{name} {lo} to {hi}")
    return "; ".join(parts)


def paper_scale_row(headline, setup, claim, published, res, unit="", failed="", plan="", devices=(),
                    wire="") -> dict:
    """One headline row: PUBLISHED (a number in UNIT) beside ours per compress_on (RES:
    compress_on -> (value, direction holds, deciding cost)), with ours / published and the
    three-level verdict (verdict.py); the compression device (DEVICES) and whether it is the
    paper's GPU; WIRE: the compressed methods' `wire vs dense` (wire_cell); PLAN: the
    plan_source that ran (planners)."""
    gpu = pub.PAPER_SCALE.get(headline, {}).get("gpu")
    dev = ", ".join(sorted(d for d in devices if d))
    row = {"headline": headline, "setup": setup, "claim": claim, "published": f"{published:g}{unit}",
           T.WIRE: wire,
           "device (compression)": f"{dev} (the paper's GPU: {gpu})" if gpu else
           f"{dev} (the paper names no GPU: default)"}
    for on in COMPRESS_ON:
        v = res.get(on)
        row[f"ours {on}"] = "" if v is None else f"{fixed(v[0])}{unit}"
        row[f"ours/published {on}"] = "" if v is None else fixed(V.ratio(v[0], published))
        row[f"verdict {on}"] = ("n/a: " + failed) if v is None and failed else \
            ("" if v is None else V.verdict(v[0], published, v[1]))
    row["deciding cost (not reproduced)"] = "; ".join(
        f"{on}: {res[on][2]}" for on in COMPRESS_ON if on in res and res[on][2])
    row["plan that ran"] = plan
    return row


OMGS_CLAIM = "OMGS faster than layer-wise Top-k (up to; ours: max over the same setups)"


def omgs_network(found, headline: str) -> str:
    """The network of an OMGS headline as its folders recorded it (paper_scale.txt), with
    what that preset is (published.OMGS_NETWORKS): `omgs-1gbe (the paper's measured 1 GbE)`."""
    preset, what = pub.OMGS_NETWORKS[headline]
    nets = sorted({f.get("network", "") for f in found if f.get("headline") == headline} - {""}) or [preset]
    return ", ".join(f"{n} ({what})" if n == preset else n for n in nets)


def omgs_network_line(heads: pd.DataFrame, found) -> str:
    """How the OMGS verdict moves between its networks (pub.OMGS_NETWORKS), per compress_on,
    from the headline rows of HEADS: which of OMGS and layer-wise Top-k is faster on each
    network (a verdict other than *not reproduced*: OMGS is faster) and the verdict on each.
    Empty unless both networks have rows."""
    if not len(heads):
        return ""
    rows = [heads[heads["headline"] == h] for h in pub.OMGS_NETWORKS]
    if any(not len(r) for r in rows):
        return ""
    rows = [r.iloc[0] for r in rows]
    nets = [omgs_network(found, h) for h in pub.OMGS_NETWORKS]
    parts = []
    for on in COMPRESS_ON:
        vs = [r[f"verdict {on}"] for r in rows]
        if any(not v or v.startswith("n/a") for v in vs):
            continue
        each = [f"on {n} " + ("OMGS is faster" if v != "not reproduced" else "layer-wise Top-k is at least as fast")
                + f" ({r[f'ours {on}']}, {v})" for v, n, r in zip(vs, nets, rows)]
        moves = (f"the verdict stays *{vs[0]}*" if vs[0] == vs[1] else
                 f"the verdict moves from *{vs[0]}* to *{vs[1]}*")
        parts.append(f"{on} compression: " + ", ".join(each) + f": {moves}")
    if not parts:
        return ""
    return "**OMGS by network** (the same simulations on each): " + "; ".join(parts) + "."


def paper_scale_tables(found):
    """(headlines, acpsgd, sources) DataFrames of the paper-scale section from FOUND
    (find_paper_scale)."""
    rows = []
    devices = {}
    for f in found:
        devices.setdefault(f.get("headline"), set()).add(f.get("compress_device", ""))

    def add(headline, setup, claim, published, res, unit="", failed="", plan="", wire=""):
        rows.append(paper_scale_row(headline, setup, claim, published, res, unit, failed, plan,
                                    devices.get(headline, ()), wire))

    acp_rows = []
    df = _sims(found, "acpsgd-main")
    if len(df):
        df = _paper_rank(df)
        keys = ["compress_on", "model"]
        for net in pub.ACPSGD_NETWORKS:
            d = df[df["folder"].map(lambda p: os.path.basename(os.path.normpath(p)) == net)]
            if not len(d):
                continue
            r = {"network": net}
            for base, label in [("ssgd", "S-SGD"), ("powersgd", "Power-SGD")]:
                res = _speedup_claim(d, keys, _method("acpsgd"), _method(base), "mean")
                for on in COMPRESS_ON:
                    r[f"ACP/{label} {on}"] = res[on][0] if on in res else float("nan")
                r[f"ACP/{label} (published)"] = pub.ACPSGD_SPEEDUP[base]
                add("acpsgd-main", f"{net}, 32 workers, mean over 4 models", f"ACP-SGD faster than {label} (mean)",
                    pub.ACPSGD_SPEEDUP[base], res, "x", wire=wire_cell(d, _compressed("acpsgd", base)))
            acp_rows.append(r)
    df = _sims(found, "acpsgd-scaling")
    if len(df):
        df = _paper_rank(df)
        for n, d in df.groupby("world_size"):
            for base, label in [("ssgd", "S-SGD"), ("powersgd", "Power-SGD")]:
                res = _speedup_claim(d, ["compress_on", "model"], _method("acpsgd"), _method(base), "all")
                add("acpsgd-scaling", f"{n} workers, 10gbe, 4 models (mean shown)",
                    f"ACP-SGD faster than {label} for every model (published: mean over all setups)",
                    pub.ACPSGD_SPEEDUP[base], res, "x", wire=wire_cell(d, _compressed("acpsgd", base)))
    failed = {f["headline"]: f["error"].splitlines()[-1] for f in found if f["error"]}
    for headline in pub.OMGS_NETWORKS:  # the same claim on each network
        df = _sims(found, headline)
        if len(df) or headline in failed:
            res = {}
            if len(df) and (df["method"] == "omgs").any():
                res = _speedup_claim(df, ["compress_on", "model"], _method("omgs"), _method("topk", "none"),
                                     "max_pct")
            add(headline, f"16 workers, {omgs_network(found, headline)}, rho 0.001",
                OMGS_CLAIM, pub.OMGS_IMPROVEMENT_PCT, res, "%", failed.get(headline, "no omgs rows"),
                plans(df, "omgs"), wire_cell(df, [("omgs", _method("omgs")),
                                                  ("topk (layer-wise)", _method("topk", "none"))]))
    df = _sims(found, "marsit")
    if len(df):
        res = _speedup_claim(df, ["compress_on", "model"], _method("marsit"), _method("ssgd"), "max_less_pct")
        add("marsit", "16 workers, 10gbe", "Marsit less time than S-SGD (up to; ours: max over the same setups)",
            pub.MARSIT_REDUCTION_PCT,
            res, "%", wire=wire_cell(df, _compressed("marsit", "ssgd")))
    df = _sims(found, "sketch-fusion")
    if len(df):
        res = _speedup_claim(df, ["compress_on", "model"], _method("sketch-fusion", "layerfusion"),
                             _method("sketch", "none"), "max_pct")
        add("sketch-fusion", "16 workers, 10gbe", "Sketch-Fusion faster than per-tensor sketch (up to; ours: max over the same setups)",
            pub.SKETCH_FASTER_PCT, res, "%", plan=plans(df, "sketch-fusion"),
            wire=wire_cell(df, [("sketch-fusion (layerfusion)", _method("sketch-fusion", "layerfusion")),
                                ("sketch (none)", _method("sketch", "none"))]))
    df = _sims(found, "sketch-scaling")
    if len(df) and df["world_size"].nunique() > 1:
        lo, hi = df["world_size"].min(), df["world_size"].max()
        res = {}
        for on in COMPRESS_ON:
            d = df[df["compress_on"] == on]
            t = d.pivot_table(index=["model", "method"], columns=["fusion", "world_size"], values="iter_s")
            if ("none", hi) not in t.columns or ("layerfusion", hi) not in t.columns:
                continue
            # scalability = throughput(hi) / throughput(lo) = (hi / t_hi) / (lo / t_lo)
            scal = {f: (hi / t[(f, hi)]) / (lo / t[(f, lo)]) for f in ["none", "layerfusion"]}
            gain = (scal["layerfusion"] / scal["none"]).dropna()
            if not len(gain):
                continue
            ok = gain.max() > 1
            cost = ""
            if not ok:
                a = d[(d["fusion"] == "layerfusion") & (d["world_size"] == hi)].set_index(["model", "method"])
                b = d[(d["fusion"] == "none") & (d["world_size"] == hi)].set_index(["model", "method"])
                idx = a.index.intersection(b.index)
                cost = deciding_cost(a.loc[idx], b.loc[idx]) + f" at {hi} workers"
            res[on] = (float(gain.max()), bool(ok), cost)
        add("sketch-scaling", f"{lo}-{hi} workers, 10gbe", "LayerFusion improves scalability (up to; ours: max over the same setups)",
            pub.SKETCH_LAYERFUSION_SCALABILITY, res, "x",
            wire=wire_cell(df, _compressed(*dict.fromkeys(df["method"].astype(str)))))
    df = _sims(found, "dgc")
    if len(df):
        for paper_name, zoo, _g, _m, ratio in pub.DGC:
            d = df[df["model"] == zoo] if zoo else df.iloc[0:0]
            res = {}
            for on in COMPRESS_ON:
                x = d[d["compress_on"] == on]
                if len(x):
                    r = float((x["dense_bytes"] / x["wire_bytes"]).iloc[0])
                    # "direction": a message two orders of magnitude below the gradient, as published
                    res[on] = (r, r >= 100, "" if r >= 100 else "wire_bytes (message too large)")
            if res:
                add("dgc", f"{paper_name} ({zoo}), density 0.001", "message >= 100x smaller than the gradient",
                    ratio, res, "x", wire=wire_cell(d, _compressed("dgc")))
    src = []
    for f in found:
        base = {"headline": f.get("headline", ""), "folder": f.get("label", f["path"]), "network": f.get("network", ""),
                "ranks_per_node": f.get("ranks_per_node", "")}
        if f["sim"] is None or not len(f["sim"]):
            src.append({**base, "compress_on": "", "cost_source": "simulate failed: " + (f["error"] or "no sim.csv")})
            continue
        for (on, cs), _ in f["sim"].groupby(["compress_on", "cost_source"], sort=False):
            src.append({**base, "compress_on": on, "cost_source": cs})
    src = pd.DataFrame(src).drop_duplicates() if src else pd.DataFrame()
    return pd.DataFrame(rows), pd.DataFrame(acp_rows), src


def verdict_counts_line(heads: pd.DataFrame) -> str:
    """The count of each verdict level per compress_on of a paper_scale_tables headline table."""
    return V.counts_line({on: V.counts(heads[f"verdict {on}"]) for on in COMPRESS_ON
                          if f"verdict {on}" in heads.columns})


def paper_scale_section(R, found):
    """The "Paper scale (simulated)" section (scripts/paper_scale.sh's folders); nothing
    when FOUND is empty, so reports without paper-scale results are unchanged."""
    if not found:
        return
    heads, acp, src = paper_scale_tables(found)
    R.add("## Paper scale (simulated)", "",
          "Each paper's headline setup through `gradcomp simulate` (`scripts/paper_scale.sh`, `make paper-scale`), "
          "compression charged to this host (`host`: the CPU costs measured here) and to a GPU (`device`: the "
          "roofline model of `--compress-device`). Published numbers are the papers' (their GPUs, networks and, "
          "for OMGS and Marsit, whole training runs). `ours/published` compares the published quantity in its "
          "own unit (speedup with speedup, % with %, size ratio with size ratio); for an \"up to\" claim ours is "
          "our maximum over the same setups. `verdict`: *size reproduced* (the claim's direction holds and "
          f"ours/published is within a factor {V.SIZE_FACTOR:g} either way), *direction only* (the direction "
          "holds, the size does not), *not reproduced* (the direction does not hold); where it does not, "
          "`deciding cost` names the cost component (compress_s, "
          "decompress_s, comm_s, pack_s, exposed_s) by which the claimed-faster method exceeds its baseline "
          "most, summed over the setups where it is not faster. Speedups are t_baseline / t_method, each "
          "method at its best simulated configuration. `wire vs dense`: for each compressed method of the claim "
          "(S-SGD is 1), the range over the simulated setups of sim.csv's `wire_bytes / dense_bytes` (the bytes "
          "one worker sends per iteration over the model's fp32 gradient, 4 bytes x parameters), after a "
          "sparsifier's density.", "")
    for key, h in pub.PAPER_SCALE.items():
        if any(f.get("headline") == key for f in found):
            rpn = h["ranks_per_node"]
            gpu = (f"{h['gpu']}: compression priced on its preset" if h["gpu"] else
                   "not named in the paper's abstract: compression priced on the script's default preset (v100)")
            nodes = f"{rpn} GPUs per node" if rpn else "GPUs per node not recorded"
            R.add(f"- `{key}`: {pub.CITATIONS[h['paper']]}. Published setup: {h['setup']} (GPU {gpu}, {nodes}). "
                  f"Simulated: {h['ours']}.")
    R.add("")
    if len(acp):
        R.table("paper_scale_acpsgd", acp, "ACP-SGD mean speedup over the 4 models per network, 32 workers, "
                "25 MiB fusion, best of pipelining off/on, compression on host and on device, beside the "
                "published means (over all their setups)")
    if len(heads):
        R.table("paper_scale", heads, "every headline: published beside ours (host / device compression), "
                "ours/published and the verdict")
        R.add(f"**Verdicts** ({len(heads)} headlines): {verdict_counts_line(heads)}.", "")
        line = omgs_network_line(heads, found)
        if line:
            R.add(line, "")
    val = published_validation(found)
    if len(val):
        R.table("paper_scale_published_validation", val, "validation points: the constants OMGS-SGD published for "
                "its own cluster (16 x P102-100, 1 GbE) beside our network preset's and device model's prediction "
                "of exactly those quantities (`simulate --validate-published omgs`; nothing fitted)")
    if len(src):
        R.table("paper_scale_sources", src, "cost sources of each simulated folder (the `cost_source` of sim.csv) "
                "and the ranks per node passed")


def paper_scale_trains(R, found):
    """The convergence verdict of every simulated paper-scale configuration: from the
    converge.csv files in the paper-scale folders and the folder above them (where
    scripts/paper_scale.sh puts the committed check of the default configurations), else
    `not checked` (trains.py)."""
    sims = [f["sim"].assign(headline=f.get("headline", "")) for f in found if f["sim"] is not None and len(f["sim"])]
    if not sims:
        return
    dirs = list(dict.fromkeys(d for f in found for d in (f["path"], os.path.dirname(os.path.normpath(f["path"])))))
    cv = [c for c in (load_csv(d, "converge.csv") for d in dirs) if c is not None]
    checks = trains.checks(pd.concat(cv, ignore_index=True) if cv else None)
    keys = [c for c in ["headline", "method", "world_size", "density", "rank", *trains.DEFAULT_SKETCH]
            if c in sims[0].columns]
    t = pd.concat(sims, ignore_index=True)[keys].drop_duplicates()
    # Shown only where they matter; a Count Sketch row is judged at its own size.
    sketch = {m for m in t["method"] if set(trains.DEFAULT_SKETCH) <= set(trains.params_of(m))}
    for k, methods in (("density", T.SPARSE), ("rank", T.LOW_RANK), *((k, sketch) for k in trains.DEFAULT_SKETCH)):
        if k in t.columns:
            t[k] = t[k].where(t["method"].isin(methods))
    t = t.drop_duplicates()
    t[T.TRAINS] = trains.column(t, checks)
    R.table("paper_scale_trains", t.reset_index(drop=True), "whether each simulated configuration trains "
            "(`gradcomp converge` in these folders; docs/methods.md, \"Convergence check\")")


# compute_drift above this (src/bench/e2e.rs, DRIFT_WARN) is the drift the binary warns of.
DRIFT_WARN = 0.10


def ranking_warnings(e2e: pd.DataFrame, meta) -> list:
    """Why the run's e2e times cannot support a ranking, one line each with the command that
    would (empty when none applies): the emulated device drifted from its compute model, the
    node was loaded or oversubscribed, or cases were timed in one round of few iterations."""
    out = []
    if "compute_drift" in e2e.columns:
        d = pd.to_numeric(e2e["compute_drift"], errors="coerce")
        n = int((d > DRIFT_WARN).sum())
        if n:
            out.append(f"{n} of {len(e2e)} e2e case(s) drifted more than {DRIFT_WARN:.0%} from the compute model "
                       f"(median over a case's iterations; the worst case {d.max():.0%}): the node was busy; rerun on "
                       "a quiet node")
    timed = set(e2e["run_id"].astype(str)) if "run_id" in e2e.columns else None
    for _, m in meta:
        if not isinstance(m, dict) or (timed is not None and str(m.get("run_id")) not in timed):
            continue
        run = m.get("run_id", "?")
        hosts, cores, loads = m.get("hosts"), m.get("host_cores"), m.get("load_avg_start")
        # Per rank (a list each, as run.json records them), or one value for the run.
        n = m.get("world_size") if isinstance(m.get("world_size"), int) else 0
        hosts = hosts if isinstance(hosts, list) and hosts else ["?"] * max(n, 1)
        per = lambda v: v if isinstance(v, list) else [v] * len(hosts)  # noqa: E731
        seen = {}
        for h, c, ld in zip(hosts, per(cores), per(loads)):
            ranks, _, _ = seen.get(h, (0, c, ld))
            seen[h] = (ranks + 1, c, ld)
        if not isinstance(m.get("hosts"), list) and n:
            seen = {"?": (n, cores, loads)}
        for h, (ranks, c, ld) in seen.items():
            if not isinstance(c, (int, float)) or c <= 0:
                continue
            if ranks > c:
                out.append(f"run {run}: {ranks} ranks on {int(c)} core(s) of host {h}: oversubscribed, ranks share "
                           "cores and their times mix; run with no more ranks than cores (mpirun -np N)")
            one = ld[0] if isinstance(ld, list) and ld else ld
            if isinstance(one, (int, float)) and one > c:
                out.append(f"run {run}: load average {one:.1f} on {int(c)} core(s) of host {h} at the start: other "
                           "work shared the node; rerun when it is quiet")
    if "iters_run" in e2e.columns or "iters" in e2e.columns:
        it = pd.to_numeric(e2e.get("iters_run", e2e.get("iters")), errors="coerce")
        rep = e2e["repeats"] if "repeats" in e2e.columns else pd.Series(1, index=e2e.index)
        few = int(((it < 20) & (rep <= 1)).sum())
        if few:
            out.append(f"{few} e2e case(s) were timed once over fewer than 20 iterations: a handful of iterations "
                       "does not rank methods; time them with `e2e --min-time 0.3 --target-ci 0.03` (TOML "
                       "`min_time_s`, `target_ci`)")
    return out


def fastest_section(R, e2e, checks, meta):
    """"Fastest to dense accuracy": per setup of the measured e2e rows (model, world size, device...),
    each method's best configuration ranked by time to dense accuracy (trains.time_to_accuracy), with
    the warnings of `ranking_warnings` above it."""
    if e2e is None or not len(e2e) or checks is None or not len(checks):
        return
    keys = T.setup_keys(e2e) + [c for c in ("compress_on",) if c in e2e.columns]
    params = [k for k in trains.KEYS if k in e2e.columns]
    b = T.best(e2e.assign(**{k: e2e[k].fillna(-1) for k in params}), keys + ["method"] + params)
    b = b.replace({k: {-1: math.nan} for k in params})
    b[T.WIRE] = T.wire_vs_dense(b)
    t = trains.time_to_accuracy(b, checks, keys)
    if not len(t):
        return
    R.add("## Fastest to dense accuracy", "")
    warn = ranking_warnings(e2e, meta)
    if warn:
        R.add("> **Warning: this run cannot rank methods:**", *[f"> - {w}." for w in dict.fromkeys(warn)], "")
    lines = []
    for _, g in t.groupby(keys, sort=False, dropna=False):
        top = g[g["place"] == 1]
        setup = ", ".join(f"{k} {v}" for k, v in zip(keys, g.iloc[0][keys]))
        if not len(top):
            lines.append(f"- {setup}: no method reaches dense accuracy in these results (or none was checked).")
            continue
        w = top.iloc[0]
        ties = list(g.loc[g["tie"], "method"])
        tail = f"; a tie with {', '.join(ties)} (intervals overlap)" if ties else ""
        sp = w["speedup_vs_ssgd"]
        lines.append(f"- {setup}: **{w['method']}** first, {fmt(w['tta_s'])} s to dense accuracy"
                     + (f", {sp:.2f}x S-SGD's time" if sp == sp else "") + tail + ".")
    R.add(*lines, "")
    show = t.assign(tta=[f"{fmt(a)} s [{fmt(lo)}, {fmt(hi)}]" if a == a else "-" for a, lo, hi in
                         zip(t["tta_s"], t["tta_lo_s"], t["tta_hi_s"])])
    cols = keys + ["place", "method", "config", "iter_ms", T.WIRE, "steps", "tta", "speedup_vs_ssgd", "tie", "verdict"]
    R.table("fastest_to_accuracy", T.wire_notes(show[[c for c in cols if c in show.columns]], [(T.WIRE, "iter_ms")]),
            "time to dense accuracy = steps to dense's target (`gradcomp converge`) x measured time per iteration")
    R.add(trains.TTA_CAVEAT, "")


def _record(path: str):
    """A run.json (or run.<run_id>.json) as a dict, refusing an unknown schema version as
    load_results does; None when there is none."""
    if not os.path.lexists(path):
        return None
    m = read_json_object(path)
    sv = m.get("schema_version")
    if sv is not None and sv not in SUPPORTED_SCHEMA_VERSIONS:
        raise ReportError(f"{path}: schema_version {sv} is unknown to this analysis (it reads "
                          f"{sorted(SUPPORTED_SCHEMA_VERSIONS)}); use the analysis/ of the gradcomp that wrote it")
    return m


def _values(df: pd.DataFrame, col: str) -> str:
    """COL's distinct values in DF, in order of first appearance, comma-separated."""
    if col not in df.columns:
        return ""
    return ", ".join(dict.fromkeys(str(v) for v in df[col].dropna()))


def _sim_line(f) -> str:
    """The run header's line of one `gradcomp simulate` folder (find_simulations): its command,
    gradcomp revision and date from its run.json; without one, when sim.csv was written and
    that the command and revision are not recorded. Then what was simulated, from sim.csv."""
    sim = f["sim"]
    what = "; ".join(x for x in [
        f"{len(sim)} simulated configuration(s)",
        f"model {_values(sim, 'model')}" if "model" in sim.columns else "",
        f"methods {_values(sim, 'method')}" if "method" in sim.columns else "",
        f"world sizes {_values(sim, 'world_size')}" if "world_size" in sim.columns else "",
        f"network {_values(sim, 'network')}" if _values(sim, "network") else "",
        f"compression on {_values(sim, 'compress_on')}" if _values(sim, "compress_on") else ""] if x)
    m = _record(os.path.join(f["path"], "run.json"))
    if m:
        cmd = " ".join(str(a) for a in (m.get("command_line") or [])) or "command not recorded"
        return (f"- simulation `{f['label']}` (`{m.get('run_id')}`, `simulate`): `{cmd}`; status `{m.get('status')}`; "
                f"gradcomp {m.get('gradcomp_version')} ({m.get('git_revision')}); {m.get('start_time')} to "
                f"{m.get('end_time')}; {what}")
    when = datetime.datetime.fromtimestamp(os.path.getmtime(os.path.join(f["path"], "sim.csv")),
                                           datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f"- simulation `{f['label']}` (`gradcomp simulate`): sim.csv written {when}; no run.json beside it, so "
            f"its command line and gradcomp revision are not recorded; {what}")


def _sim_lines(simulations, paper_scale) -> list:
    """Run-header lines of the simulations the report reads: one per `gradcomp simulate` folder,
    one for all of scripts/paper_scale.sh's folders (each names its commands in paper_scale.txt)."""
    lines = [_sim_line(f) for f in simulations]
    if paper_scale:
        heads = ", ".join(dict.fromkeys(str(f.get("headline", "?")) for f in paper_scale))
        lines.append(f"- paper scale (`scripts/paper_scale.sh`, `gradcomp simulate` per folder): {len(paper_scale)} "
                     f"folder(s), headlines {heads}; each folder's commands are the `command=` lines of its "
                     f"{PAPER_SCALE_MARKER}")
    return lines


# The measured files of `gradcomp run` and what the report makes of each.
MEASURED = {"micro_comm.csv": "collectives", "micro_compress.csv": "compression kernels",
            "micro.csv": "one tensor through MPI", "e2e.csv": "training iterations, the paper tables"}


def absent_line(res) -> str:
    """The one line of a report without measured e2e rows that names the files of `make bench` the
    folder lacks, what each would give and the command that writes it ("" when it lacks none)."""
    parts = []
    miss = [f"{f} ({what})" for f, what in MEASURED.items() if res.get(f) is None or not len(res.get(f))]
    if miss:
        parts.append(f"{', '.join(miss)}: `mpirun -np N gradcomp run bench-configs/laptop.toml --out DIR`, or per "
                     "paper its config in bench-configs/ (docs/reproduce.md)")
    if res.converge is None or not len(res.converge):
        parts.append("converge.csv (the convergence check): `mpirun -np N gradcomp converge --config "
                     "bench-configs/laptop.toml --out DIR`")
    if not parts:
        return ""
    return f"_Not in this folder: {'; '.join(parts)}. `make bench` writes them all into one folder._"


def paper_sections(R, e2e, out_dir):
    """The paper sections (ACP-SGD, DGC, OMGS-SGD, Marsit, Sketch-Fusion) from the measured e2e rows;
    a paper table without rows says which config produces them (Report.paper_table)."""
    R.add("## ACP-SGD", "", pub.cite("acpsgd") + " Published: on average "
          f"{pub.ACPSGD_SPEEDUP['ssgd']}x over S-SGD and {pub.ACPSGD_SPEEDUP['powersgd']}x over Power-SGD "
          "(8-64 GPUs, 1 Gb/s Ethernet to 100 Gb/s InfiniBand).", "")
    R.add("### Iteration time per model and method", "")
    main = R.paper_table("acpsgd_main", T.acpsgd_main, e2e,
                         caption="iteration time (best configuration, own collective) and speedups")
    if main is not None:
        wide = T.acpsgd_main_wide(main)
        R.table("acpsgd_main_wide", wide, "iteration time (ms), paper layout")
        R.table("acpsgd_speedup_summary", T.acpsgd_speedup_summary(main),
                "ACP-SGD speedup over S-SGD and Power-SGD, mean over setups, beside the published mean")
        idx = [c for c in T.setup_keys(main) + ["run"] if c in main.columns]
        pm = main.pivot_table(index=idx, columns="method", values="iter_ms", sort=False)
        pe = main.pivot_table(index=idx, columns="method", values="iter_ms ±", sort=False).reindex(
            index=pm.index, columns=pm.columns).add_suffix(" ±")  # error bars: the 95% intervals
        R.figs(plots.bars(pm.join(pe).reset_index(), ["model", "world_size", "network", "run"], pub.ACPSGD_METHODS,
                          "acpsgd_main.png", out_dir, "ACP-SGD", "ms per iteration"))
    R.add("### Ablation: collective, pipelining, fusion", "")
    R.paper_table("acpsgd_ablation", T.acpsgd_ablation, e2e,
                  caption="iteration time (ms) adding the system optimisations one by one; the first columns are "
                  "named by the collective that carried the exchange (`collective` = the method's own, used by "
                  "the + steps)")
    R.add("### Sweep: fusion buffer size", "")
    t = R.paper_table("acpsgd_buffer_sweep", T.acpsgd_buffer_sweep, e2e, caption="iteration time (ms) per fusion threshold")
    if t is not None:
        R.figs(plots.lines(t, "buffer_MiB", [f"{m} ms" for m in pub.ACPSGD_METHODS],
                           ["model", "world_size", "network", "run"], "acpsgd_buffer_sweep.png", out_dir,
                           "Fusion buffer size", "fusion (bucket threshold; none = a bucket per tensor)",
                           "ms per iteration", xcat="fusion"))
    R.add("### Sweep: Power-SGD / ACP-SGD rank", "")
    t = R.paper_table("acpsgd_rank_sweep", T.acpsgd_rank_sweep, e2e, caption="iteration time (ms) per rank")
    if t is not None:
        R.figs(plots.lines(t, "rank", ["powersgd ms", "acpsgd ms"], ["model", "world_size", "network", "run"],
                           "acpsgd_rank_sweep.png", out_dir, "Rank sweep",
                           "low-rank approximation rank r (not MPI ranks)", "ms per iteration", logx=True))
    R.add("### Sweep: world size", "")
    t = R.paper_table("acpsgd_scaling", T.acpsgd_scaling, e2e, caption="iteration time (ms) per world size")
    if t is not None:
        R.figs(plots.lines(t, "world_size", [f"{m} ms" for m in pub.ACPSGD_METHODS], ["model", "network"],
                           "acpsgd_scaling.png", out_dir, "Scaling", "world size (ranks)", "ms per iteration", logx=True))
    R.add("### Sweep: network", "")
    R.paper_table("acpsgd_network", T.acpsgd_network, e2e, caption="iteration time (ms) per network")

    R.add("## DGC: compression ratio", "", pub.cite("dgc") + " DeepSpeech is not in gradcomp's model zoo; the "
          "paper's AlexNet is BVLC AlexNet (`alexnet-caffe`, 232.6 MiB). Message = `wire_bytes` one worker "
          "sends per iteration at the final density (no warm-up), fusion none.", "")
    t = R.paper_table("dgc_ratio", T.dgc_ratio, e2e, caption="fp32 gradient vs DGC message size")
    if t is not None:
        # Points, not bars: on the log axis the ratios need, a bar's length would misstate them.
        R.figs(plots.points(t[t["ratio"].notna() | t["ratio (published)"].notna()], ["model (paper)", "model"],
                            ["ratio", "ratio (published)"], "dgc_ratio.png", out_dir,
                            "DGC compression ratio", "dense / message", logy=True))

    R.add("## OMGS-SGD", "", pub.cite("omgs") + f" Published: up to {pub.OMGS_IMPROVEMENT_PCT:g}% faster than "
          "layer-wise sparsified SGD (16 GPUs, 1 GbE, rho = 0.001); their figure is training throughput.", "")
    t = R.paper_table("omgs", T.omgs, e2e, caption="S-SGD (MG-WFBP, the paper's baseline, and S-SGD's best "
                      "configuration in the same run) vs layer-wise Top-k vs OMGS, pipelining on")
    if t is not None:
        R.figs(plots.bars(t, ["model", "world_size", "network", "density", "run"],
                          ["ssgd (mgwfbp) ms", "ssgd best ms", "topk (layer-wise) ms", "omgs ms"],
                          "omgs.png", out_dir, "OMGS-SGD", "ms per iteration"))

    R.add("## Marsit", "", pub.cite("marsit") + f" Published: up to {pub.MARSIT_REDUCTION_PCT:g}% less training "
          "time than without compression at equal accuracy (ours: one iteration).", "")
    t = R.paper_table("marsit", T.marsit, e2e, caption="Marsit (ring) vs S-SGD (over MPI's all-reduce and over "
                      "gradcomp's ring, where measured) vs Sign-SGD (all-gather)")
    if t is not None:
        lab = t["method"].where(t["method"] != "ssgd", "ssgd (" + t["collective"] + ")")
        idx = [c for c in ["network", "model", "world_size", "run"] if c in t.columns]
        p = t.assign(label=lab).pivot_table(index=idx, columns="label", values="iter_ms", sort=False)
        pe = t.assign(label=lab).pivot_table(index=idx, columns="label", values="iter_ms ±", sort=False).reindex(
            index=p.index, columns=p.columns).add_suffix(" ±")
        p = p.join(pe).reset_index()
        R.figs(plots.bars(p, idx, ["ssgd (allreduce)", "ssgd (ring)", "signsgd", "marsit"], "marsit.png", out_dir,
                          "Marsit", "ms per iteration"))

    R.add("## Sketch-Fusion", "", pub.cite("sketch") + f" Published: up to {pub.SKETCH_FASTER_PCT:g}% faster "
          f"training on 16 GPUs; LayerFusion improves other methods' scalability by up to "
          f"{pub.SKETCH_LAYERFUSION_SCALABILITY:g}x.", "")
    t = R.paper_table("sketch_fusion", T.sketch_fusion, e2e, caption="each compressor without fusion vs LayerFusion; `what` says "
                      "what each row measures")
    if t is not None:
        R.figs(plots.bars(t, ["model", "world_size", "network", "run", "method"], ["none ms", "layerfusion ms"],
                          "sketch_fusion.png",
                          out_dir, "LayerFusion", "ms per iteration"))
    t = R.paper_table("sketch_scaling", T.sketch_scaling, e2e, caption="throughput per world size, none vs LayerFusion")
    if t is not None:
        R.table("sketch_scalability", T.sketch_scalability(t),
                "scalability (throughput largest / smallest world size) and LayerFusion's gain")
        R.figs(plots.lines(t, "world_size", ["none samples/s", "layerfusion samples/s"], ["model", "method"],
                           "sketch_scaling.png", out_dir, "Scaling with LayerFusion", "world size (ranks)",
                           "samples/s"))


def write_report(results_dir, out_dir: str | None = None, latex: bool = False) -> str:
    """Write OUT_DIR/report.md (default: FIRST_RESULTS_DIR/report) and return its path.

    RESULTS_DIR: a run directory, a directory of run directories (a sweep), or a list."""
    dirs = [results_dir] if isinstance(results_dir, (str, os.PathLike)) else list(results_dir)
    dirs = [str(d) for d in dirs]
    for d in dirs:
        if not os.path.isdir(d):
            raise ReportError(f"{d}: not a directory")
    paper_scale = find_paper_scale(dirs)
    simulations = find_simulations(dirs)
    if (paper_scale or simulations) and not any(discover(d)[0] for d in dirs):
        res = Results()  # only simulations (gradcomp simulate, scripts/paper_scale.sh): no measured run
    else:
        res = load_results(dirs)
    # Folders holding (or inside) paper-scale results are read by their own section, not skipped.
    ps_paths = [os.path.normpath(f["path"]) for f in paper_scale + simulations]
    res.skipped = [(d, why) for d, why in res.skipped
                   if not any(p == os.path.normpath(d) or p.startswith(os.path.normpath(d) + os.sep)
                              or os.path.normpath(d).startswith(p + os.sep) for p in ps_paths)]
    out_dir = out_dir or os.path.join(dirs[0], "report")
    # Every file goes into a folder of its own and moves into out_dir once all are whole (io.staged_dir).
    with staged_dir(out_dir, "report") as stage:
        _write_files(stage, res, simulations, paper_scale, latex)
    return os.path.join(out_dir, "report.md")


def _write_files(out_dir: str, res, simulations, paper_scale, latex: bool) -> None:
    """The report's tables, plots, manifest.json and report.md, into `out_dir`."""
    R = Report(out_dir, latex)
    R.add("# gradcomp report", "")
    R.add(*_run_lines(res.meta, res.history, res.converge_records), *_sim_lines(simulations, paper_scale), "")
    for d, why in res.skipped:
        print(f"gradcomp_analysis: warning: skipped {d}: {why}", file=sys.stderr)
    if res.skipped:
        R.add("Folders skipped:", "", *[f"- `{d}`: {why}" for d, why in res.skipped], "")
    if res.warnings:
        R.add("Rows left out:", "", *[f"- {w}" for w in res.warnings], "")
    # Measured times (micro or e2e) to explain; a folder of simulations or of a convergence check
    # alone has none, and its report goes straight to what it holds.
    timed = any(res.get(f) is not None and len(res.get(f)) for f in MEASURED)
    if timed:
        R.add("Times are per iteration, the maximum over ranks, median over timed iterations, in ms, shown as "
              "`median ± h` where h is the half-width of the 95% confidence interval of the mean iteration "
              "(`iter_ci95_s`; in the CSV tables the column `X ±`), or `median (too noisy)` where h exceeds the "
              "median (the interval reaches below zero and says nothing). A comparison column (`vs ssgd` etc.) says "
              "`faster` or `slower`, or `≈ not significant` when the two intervals overlap: that difference lies "
              "inside the measurement noise, do not rank it. \"best\" = the fastest fusion/pipelining "
              "configuration present for that method (shown as `fusion/pipelining`); an S-SGD baseline is named "
              "`fusion/pipelining/collective` (`ssgd config`). When several runs are combined, a table compares "
              "methods within one run wherever a run holds the comparison (every run is then shown on its own); "
              "only where no run does are the runs' rows compared together. The `run` column says which run a row "
              "came from; a comparison drawn from several runs names them all (`a + b`, in long tables in "
              "`runs compared`). " + WIRE_TEXT + " Columns marked *(published)* are the papers' "
              "numbers (their hardware; see each section), not ours. `trains`: whether the row's method at its "
              "hyper-parameters (density, rank, sketch size, QSGD levels) reaches dense S-SGD's held-out accuracy in "
              "`gradcomp converge` in these results: dense's final loss and accuracy over its seeds widened by the "
              "one-sided 95% prediction bound of one more dense seed: `trains (dense accuracy in N steps)`, `does not "
              "reach dense`, `no dense target` (dense at fewer than 2 seeds), `diverged at step N`, `interrupted` (a "
              "curve cut short), `at np N` when only another world size was checked, "
              "`not checked` when no converge.csv has that configuration (docs/methods.md, \"Convergence check\").", "")

    # The convergence verdict of each timed configuration, beside its times in every table (trains.py).
    records = list(res.meta) + list(res.history) + list(res.converge_records)
    checks = trains.checks(res.converge, [m for _, m in records])
    for name in ("e2e", "micro", "micro_compress"):
        df = getattr(res, name)
        if df is not None and len(df):
            setattr(res, name, df.assign(**{T.TRAINS: trains.column(df, checks)}))
    e2e = res.e2e
    has_e2e = e2e is not None and len(e2e) > 0
    if has_e2e:
        e2e = T.collapse_repeats(e2e.copy())
        e2e["pipelining"] = e2e["pipelining"].astype(str)
        e2e["fusion"] = e2e["fusion"].astype(str)
        rep = e2e["repeats"] if "repeats" in e2e.columns else pd.Series(1, index=e2e.index)
        if (rep > 1).any():
            R.add(f"{int((rep > 1).sum())} e2e case(s) were measured more than once in one run (up to "
                  f"{int(rep.max())} times): each is shown at its median repeat, its ± widened to half the range "
                  "between the repeats where that is larger.", "")

    fastest_section(R, e2e if has_e2e else None, checks, records)

    # ---------------------------------------------------------------- papers
    if has_e2e:
        paper_sections(R, e2e, out_dir)
    else:
        # Nothing to put in a paper table: the sections are left out, not filled with
        # placeholders; the manifest still lists them, the report's last line says what
        # would produce them (absent_line).
        R.missing.update({name: "no e2e rows" for name in CONFIGS})

    # ---------------------------------------------------------------- micro + e2e overview
    mc = res.micro_comm
    if mc is not None and len(mc):
        R.add("## Collectives (micro-comm)", "",
              "Median time per iteration (max over ranks) and bus bandwidth (nccl-tests definition).", "")
        for name, t in T.micro_comm_tables(mc).items():
            R.add(f"### {name}", "")
            R.table(name, t)
        R.figs(plots.micro_comm(mc, out_dir))
    kc = res.micro_compress
    if kc is not None and len(kc):
        t = T.micro_compress(kc)
        R.add("## Compression kernels (micro-compress)", "",
              f"Memory read bandwidth probe: {kc['mem_read_gbps'].max():.2f} GB/s; `mem_frac` = input GB/s / probe.", "")
        R.table("micro_compress", t)
        R.figs(plots.micro_compress(t, out_dir))
        acp_vs_power(R, kc, "micro_compress_acpsgd_vs_powersgd", "kernels of one step on one rank")
    mi = res.micro
    if mi is not None and len(mi):
        t = T.micro_phases(mi)
        R.add("## One tensor through MPI (micro)", "")
        R.table("micro", t)
        R.figs(plots.micro_phases(t, out_dir))
        acp_vs_power(R, mi, "micro_acpsgd_vs_powersgd", "one step through MPI, exchange included")
    if has_e2e:
        R.add("## Training iterations (e2e)", "",
              "Median iteration time (ms) per method, fusion plan and pipelining (own collective); speedup over "
              "ssgd with the same fusion and pipelining, and each method's best configuration with its speedup "
              "over ssgd's best (named below each table).", "")
        for (model, n), g in e2e.groupby(["model", "world_size"]):
            R.add(f"### {model}, {T.ranks(n)}", "")
            R.table(f"e2e_{model}_np{n}", T.e2e_overview(g))
            on = T.auto(g[g["pipelining"] == "on"])
            if len(on) and "overlap_eff" in on.columns and on["overlap_eff"].notna().any():
                idx = ["run", "method"] if "run" in on.columns and on["run"].nunique() > 1 else ["method"]
                ov = on.pivot_table(index=idx, columns="fusion", values="overlap_eff", sort=False).reset_index()
                R.add(f"Overlap efficiency (pipelining on), {model}, {T.ranks(n)}:", "")
                R.table(f"e2e_{model}_np{n}_overlap", ov)
        R.add("### Phase breakdown", "")
        ph = T.e2e_phases(e2e)
        R.table("e2e_phases", ph, "phase times at each method's best configuration (ms)")
        R.figs(plots.e2e_phases(ph, out_dir))

    if has_e2e and "planned_s" in e2e.columns and pd.to_numeric(e2e["planned_s"], errors="coerce").notna().any():
        t = T.planner_accuracy(e2e)
        ok = (t["within"] == "yes").sum()
        R.add("## Planner accuracy", "",
              "Planner fusions (`mgwfbp`, `omgs`, `layerfusion`): the planner's own prediction for the plan that "
              "ran (`planned_s`, its timeline model with the costs it calibrated in the run) beside the measured "
              "`bwd_sync_s`, the same span from the start of backward to the end of the last communication. "
              f"{ok} of {len(t)} within {T.PLANNER_TOLERANCE_REL * 100:g}%. A large error means the planner chose "
              "its buckets from a wrong picture of this machine (docs/methods.md, \"Fusion, pipelining and "
              "planners\").", "")
        R.table("planner_accuracy", t)

    sv = res.sim_vs_measured
    if sv is not None and len(sv):
        t = T.sim_accuracy(sv)
        v = t["verdict"].value_counts()
        judged = int(v.get("within", 0) + v.get("outside", 0))
        tol = sorted(set(sv["tolerance"]))
        over = sorted({o for o in t.get("oversubscribed", pd.Series(dtype=str)) if isinstance(o, str) and o})
        R.add("## Simulator accuracy", "",
              f"`gradcomp simulate --fits RUN --compare RUN/e2e.csv` (bench-configs/sim-accuracy.toml): simulated vs "
              f"measured median iteration time over the case's rounds, beside its run-to-run spread "
              f"(the median's order-statistic interval over the median: of 2-4 rounds the range, of 5 the second to "
              f"fourth smallest, of 7 the third to fifth). {int(v.get('within', 0))} of {judged} judged cases within "
              f"{', '.join(f'{x * 100:g}%' for x in tol)}; {int(v.get('too-noisy', 0))} too noisy to judge "
              f"(noise above the tolerance: the spread, plus for host compression the compression fit's spread and at "
              f"least the run's host jitter, each as far as it moves the prediction; docs/performance.md), "
              f"{int(v.get('ranks-exceed-cores', 0))} not held to it (more ranks than "
              f"cores). The host model is calibrated on every method's host-compression cases (median over cases of "
              f"each case's median over rounds; fits.csv `host` rows with their spread over rounds) and each "
              f"method's cases are priced by the model calibrated without that method (leave one method out): "
              f"`validation` rows are out of sample, `calibration` rows are not."
              + (f" Oversubscribed: {'; '.join(over)}." if over else ""), "")
        R.table("sim_accuracy", t)
        R.figs(plots.sim_accuracy(t, out_dir, min(tol)))
        if res.sim_host is not None and len(res.sim_host):
            R.table("sim_host_calibration", T.sim_host_calibration(res.sim_host),
                    "the host model each simulation used: value, its spread over rounds, and its range over the "
                    "leave-one-method-out calibrations")

    if res.converge is not None and len(res.converge):
        R.add("## Convergence (`gradcomp converge`)", "",
              "An MLP trained through every method's compressor, buckets and exchange (docs/methods.md, "
              "\"Convergence check\"). `converge_targets`: per configuration over its seeds, the steps to "
              "dense S-SGD's target (dense's final held-out loss and accuracy over its seeds widened by the "
              "one-sided 95% prediction bound of one more dense seed); the verdict every `trains` column "
              "shows. `converge_summary`: per run, the final losses beside dense's (`within_tolerance`: at "
              f"most {1 + T.CONVERGE_TOLERANCE_REL:g}x dense's final loss, the check before 2026-11-28, kept "
              "as a ratio column; `why_not`: the reason documented for the earlier 200-step run; `wire vs dense`: "
              "the median `wire_bytes` over the MLP's fp32 gradient, 4 bytes x `model_params`).", "")
        ch = checks.assign(target=[f"loss <= {lo:.4f}, accuracy >= {a:.4f} ({int(n)} dense seeds)"
                                   if lo == lo else "-" for lo, a, n in
                                   zip(checks["target_loss"], checks["target_accuracy"], checks["dense_seeds"])])
        R.table("converge_targets", ch[["method", "world_size", *[k for k in trains.KEYS if ch[k].notna().any()],
                                       "seeds", "steps", "steps_lo", "steps_hi", "ratio", "text", "target"]],
                "steps to dense S-SGD's accuracy per configuration (its seeds together; `ratio`: mean final "
                "held-out loss over dense's)")
        R.table("converge_summary", T.converge_summary(res.converge),
                "final held-out loss and accuracy per method beside dense S-SGD")
        R.figs(plots.converge_curves(res.converge, out_dir))

    simulate_section(R, simulations, out_dir)
    paper_scale_section(R, paper_scale)
    paper_scale_trains(R, paper_scale)

    files = f"{len(R.tables)} tables (Markdown + CSV{' + LaTeX' if latex else ''}), {len(R.plots)} plots"
    if has_e2e:
        R.add("## Files", "", f"{files}; paper tables without rows here: {', '.join(sorted(R.missing)) or 'none'}.", "")
    else:
        # No measured iterations: what the folder does not hold, once, at the end (not a
        # placeholder per paper table before what it does hold).
        R.add("## Files", "", f"{files}.", "", *[x for x in (absent_line(res),) if x], "")
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"tables": R.tables, "plots": R.plots, "missing": R.missing,
                   "runs": [lab for lab, _ in res.meta],
                   "skipped": [{"folder": d, "why": why} for d, why in res.skipped]}, f, indent=1)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(R.lines))
