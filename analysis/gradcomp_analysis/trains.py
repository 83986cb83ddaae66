"""Does a benchmarked configuration train? The convergence check (converge.csv, docs/methods.md,
"Convergence check") joined onto the timing tables as a short `trains` column.

`checks` turns converge.csv into one verdict per case; `column` gives every timing row
(e2e, micro, micro-compress, sim) the verdict of the cases with the same method and the
parameters that matter for it (`params_of`), preferring the same world size.
"""

import math

import pandas as pd

from . import tables as T

NOT_CHECKED = "not checked"
SKETCH = ("sketch", "sketch-fusion")
# gradcomp's default Count Sketch size until converge.csv recorded it (825a44a; the default is
# now 20 columns per k): what a converge case ran with when neither converge.csv nor its
# run.json records another.
DEFAULT_SKETCH = {"sketch_rows": 3, "sketch_cols_per_k": 10.0}
# Worst first: the verdict shown for a configuration checked several times (seeds, runs).
SEVERITY = ("diverged", "interrupted", "outside tolerance", "no dense run", "trains")


def params_of(method: str) -> list:
    """The parameters that make a configuration of METHOD another configuration."""
    return (["density"] if method in T.SPARSE else []) + (["rank"] if method in T.LOW_RANK else []) + \
        (list(DEFAULT_SKETCH) if method in SKETCH else [])


def _sketch_sizes(records) -> dict:
    """(run_id, method) -> sketch size of the `[[converge]]` sections in run.json records."""
    out = {}
    for m in records:
        for s in (m.get("config") or {}).get("converge") or []:
            p = s.get("params") or {}
            for method in s.get("methods") or []:
                out.setdefault((m.get("run_id"), method), {k: p.get(k, v) for k, v in DEFAULT_SKETCH.items()})
    return out


def _case(last: pd.Series, dense: float) -> tuple:
    """(kind, text, ratio) of one case from its last row and dense S-SGD's final eval loss."""
    step, steps = int(last["step"]), int(last.get("steps", last["step"] + 1))
    if last["status"] == "diverged":
        return "diverged", f"diverged at step {step}", math.nan
    if last["status"] != "done" or step + 1 < steps:
        return "interrupted", f"interrupted at step {step + 1} of {steps}", math.nan
    final = float(last["eval_loss"])
    if not dense == dense:
        return "no dense run", "not checked (no dense run)", math.nan
    return ("trains" if T.within_tolerance(final, dense) else "outside tolerance"), "", final / dense


def _recorded(row: pd.Series, col: str, fallback):
    """ROW's COL where converge.csv records it (its own column since the sketch size was added),
    else FALLBACK (the run record's, or the default): a file written before the column existed,
    or concatenated with one, has it empty."""
    v = row.get(col)
    return fallback if v is None or (isinstance(v, float) and v != v) else v


def checks(converge: pd.DataFrame | None, records=()) -> pd.DataFrame:
    """One row per converge case: method, world_size, the parameters of `params_of`, `kind`
    (one of SEVERITY), `text` and `ratio` (final held-out loss / dense S-SGD's of the same run,
    world size and seed; NaN where the case did not finish). RECORDS: run.json dicts, for the
    sketch size of a converge.csv written before it recorded its own."""
    cols = ["method", "world_size", "density", "rank", *DEFAULT_SKETCH, "kind", "text", "ratio"]
    if converge is None or not len(converge):
        return pd.DataFrame(columns=cols)
    d = converge.assign(run=converge["run"] if "run" in converge.columns else "")
    case = [c for c in ["run", "case_id"] if c in d.columns] if "case_id" in d.columns else \
        [c for c in ["run", "method", "world_size", "seed", "density", "rank"] if c in d.columns]
    last = d.sort_values("step").groupby(case, sort=False).tail(1)
    same = [c for c in ["run", "world_size", "seed", "steps", "batch", "lr"] if c in d.columns]
    dense = last[(last["method"] == "ssgd") & (last["status"] == "done")].groupby(same)["eval_loss"].last()
    sizes = _sketch_sizes(records)
    rows = []
    for _, r in last.iterrows():
        k = tuple(r[c] for c in same)
        kind, text, ratio = _case(r, float(dense.get(k if len(k) > 1 else k[0], math.nan)))
        size = sizes.get((r.get("run_id"), r["method"]), DEFAULT_SKETCH)
        rows.append({"method": r["method"], "world_size": int(r["world_size"]), "density": r.get("density"),
                     "rank": r.get("rank"), **{c: _recorded(r, c, size[c]) for c in DEFAULT_SKETCH},
                     "kind": kind, "text": text, "ratio": ratio})
    return pd.DataFrame(rows, columns=cols)


def summarise(c: pd.DataFrame) -> str:
    """One verdict for the cases C of one configuration: the worst kind, its largest ratio,
    and how many of the cases it is when they disagree."""
    c = c.assign(_o=c["kind"].map(SEVERITY.index)).sort_values(["_o", "ratio"], ascending=[True, False])
    w = c.iloc[0]
    text = w["text"] or f"{w['kind']} ({w['ratio']:.2f}x dense)"
    n = int((c["kind"] == w["kind"]).sum())
    return text if n == len(c) else f"{text}, {n} of {len(c)} runs"


def _same(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-6)
    except (TypeError, ValueError):
        return False


def verdict(checks_: pd.DataFrame, method: str, world_size, params: dict) -> str:
    """The verdict for METHOD at WORLD_SIZE with PARAMS (a timing row's values; a parameter
    it lacks, as in an older CSV, is not compared): its cases at that world size, else at
    the nearest world size checked (named), else NOT_CHECKED."""
    c = checks_[checks_["method"] == method]
    for k in params_of(method):
        v = params.get(k)
        if v is not None and not (isinstance(v, float) and v != v):
            c = c[c[k].map(lambda x: _same(x, v)).astype(bool)]
    if not len(c):
        return NOT_CHECKED
    ws = pd.to_numeric(c["world_size"])
    try:
        n = int(world_size)
    except (TypeError, ValueError):
        return summarise(c) + f" (np {', '.join(str(w) for w in sorted(set(ws)))})"
    if (ws == n).any():
        return summarise(c[ws == n])
    near = min(set(ws), key=lambda w: (abs(w - n), -w))
    return f"{summarise(c[ws == near])} at np {near}"


def column(df: pd.DataFrame, checks_: pd.DataFrame) -> list:
    """The verdict of every row of a timing table DF (method, world_size and the parameters)."""
    keys = ["method", "world_size"] + [k for k in ["density", "rank", *DEFAULT_SKETCH] if k in df.columns]
    memo = {}
    out = []
    for row in df[keys].itertuples(index=False, name=None):
        if row not in memo:
            r = dict(zip(keys, row))
            memo[row] = verdict(checks_, r["method"], r["world_size"], r)
        out.append(memo[row])
    return out
