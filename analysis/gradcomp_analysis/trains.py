"""Does a benchmarked configuration train, and how fast does it reach dense accuracy? The
convergence check (converge.csv, docs/methods.md, "Convergence check") joined onto the timing
tables as a short `trains` column, and with the iteration times into time to accuracy.

`checks` turns converge.csv into one verdict per configuration (its seeds together): the
target is dense S-SGD's final held-out loss and accuracy of the same setup, widened by the
one-sided 95% prediction bound of one more dense seed, `mean +- t(0.95, n-1) sd sqrt(1 + 1/n)`
(src/converge/target.rs); a configuration's steps to target is the first evaluated step at
which both are met. `column` gives every timing row (e2e, micro, micro-compress, sim) the
verdict of the cases with the same method and hyper-parameters (`params_of`), preferring the
same world size; `time_to_accuracy` multiplies steps by iteration times.
"""

import math
import statistics

import pandas as pd

from . import methods as M
from . import tables as T

NOT_CHECKED = "not checked"
# gradcomp's default Count Sketch size until converge.csv recorded it (825a44a; the default is
# now 20 columns per k): what a converge case ran with when neither converge.csv nor its
# run.json records another.
DEFAULT_SKETCH = {"sketch_rows": 3, "sketch_cols_per_k": 10.0}
# Worst first: the verdict shown for a configuration checked several times (seeds, runs).
SEVERITY = ("diverged", "interrupted", "does not reach dense", "no dense target", "trains")
# What makes two cases one training setup (a method is held against dense S-SGD's of the same),
# and one configuration of a method; the columns an older converge.csv lacks are left out.
# (`sgd_momentum` is not one: DGC's rows record 0, its own momentum; `setup_id` where recorded.)
SETUP = ["run", "world_size", "steps", "batch", "lr", "lr_schedule", "warmup_steps", "hidden", "train_samples",
         "model_params"]
PARAMS = ["density", "rank", *DEFAULT_SKETCH, "qsgd_levels"]
# Student's t(0.95, df), one-sided (NIST/SEMATECH e-Handbook, Table 1.3.6.7.2); between rows
# the next smaller df's value (conservative), 1.645 beyond the table.
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833,
       10: 1.812, 12: 1.782, 15: 1.753, 20: 1.725, 25: 1.708, 30: 1.697, 40: 1.684, 60: 1.671,
       120: 1.658}


def params_of(method: str) -> list:
    """The parameters that make a configuration of METHOD another configuration."""
    base = method[:-5] if method.endswith("-noef") else method
    return [k for k in PARAMS if M.reads(base, k)]


def t95(df: int) -> float:
    """t(0.95, DF) from T95."""
    if df < 1:
        return math.inf
    if df > 120:
        return 1.645
    return T95[max(d for d in T95 if d <= df)]


def target(finals: list):
    """(loss, accuracy, n, loss mean, loss sd) that a method must reach, from dense S-SGD's final
    (loss, accuracy) per seed; None with fewer than two finite seeds."""
    f = [(lo, a) for lo, a in finals if math.isfinite(lo) and math.isfinite(a)]
    n = len(f)
    if n < 2:
        return None
    k = t95(n - 1) * math.sqrt(1 + 1 / n)
    lo, acc = [x for x, _ in f], [a for _, a in f]
    return (statistics.mean(lo) + k * statistics.stdev(lo), statistics.mean(acc) - k * statistics.stdev(acc),
            n, statistics.mean(lo), statistics.stdev(lo))


def steps_to(curve: pd.DataFrame, tgt) -> tuple:
    """(steps, best loss, its steps) of a curve (rows with step, eval_loss, eval_accuracy) against
    TGT: steps = `step + 1` of the first evaluation with loss <= and accuracy >= the target's
    (NaN if none)."""
    c = curve.dropna(subset=["eval_loss"]).sort_values("step")
    hit = c[(c["eval_loss"] <= tgt[0]) & (c["eval_accuracy"] >= tgt[1])]
    if not len(c):
        return math.nan, math.nan, math.nan
    b = c.loc[c["eval_loss"].idxmin()]
    return (int(hit["step"].iloc[0]) + 1 if len(hit) else math.nan), float(b["eval_loss"]), int(b["step"]) + 1


def _sketch_sizes(records) -> dict:
    """(run_id, method) -> sketch size of the `[[converge]]` sections in run.json records."""
    out = {}
    for m in records:
        if not isinstance(m, dict):
            continue
        for s in (m.get("config") or {}).get("converge") or []:
            p = s.get("params") or {}
            for method in s.get("methods") or []:
                out.setdefault((m.get("run_id"), method), {k: p.get(k, v) for k, v in DEFAULT_SKETCH.items()})
    return out


def _recorded(row: pd.Series, col: str, fallback):
    """ROW's COL where converge.csv records it (its own column since the sketch size was added),
    else FALLBACK (the run record's, or the default): a file written before the column existed,
    or concatenated with one, has it empty."""
    v = row.get(col)
    return fallback if v is None or (isinstance(v, float) and v != v) else v


def _fmt_steps(st: list) -> str:
    med = int(statistics.median_low(st))
    return f"{med} steps" + (f", {min(st)}-{max(st)} over {len(st)} seeds" if len(st) > 1 else "")


def _config(g: pd.DataFrame, tgt, dense_mean: float) -> dict:
    """The verdict of one configuration G (its cases' rows at one or more seeds)."""
    seeds, kinds, steps, best = [], [], [], []
    finals = []
    for seed, c in g.groupby("seed", sort=True):
        last = c.sort_values("step").iloc[-1]
        total = int(last.get("steps", last["step"] + 1))
        seeds.append(seed)
        if last["status"] == "diverged":
            kinds.append(("diverged", f"diverged at step {int(last['step'])} (seed {seed})"))
            continue
        if last["status"] != "done" or int(last["step"]) + 1 < total:
            kinds.append(("interrupted", f"interrupted at step {int(last['step']) + 1} of {total}"))
            continue
        ev = c.dropna(subset=["eval_loss"])
        finals.append(float(ev.sort_values("step")["eval_loss"].iloc[-1]) if len(ev) else math.nan)
        if tgt is None:
            kinds.append(("no dense target", ""))
            continue
        st, bl, bs = steps_to(c, tgt)
        if st == st:
            steps.append(st)
            kinds.append(("trains", ""))
        else:
            best.append((bl, bs))
            kinds.append(("does not reach dense", ""))
    worst = min(kinds, key=lambda k: SEVERITY.index(k[0]))
    kind, text = worst
    n = len(seeds)
    ratio = statistics.mean(finals) / dense_mean if finals and dense_mean == dense_mean and \
        all(math.isfinite(f) for f in finals) else math.nan
    bad = sum(k[0] == kind for k in kinds)
    of = "" if bad == n else f" at {bad} of {n} seeds"
    if kind == "trains":
        text = f"trains (dense accuracy in {_fmt_steps(steps)})"
    elif kind == "does not reach dense":
        bl, bs = min(best)
        text = f"does not reach dense{of} (best {bl:.3f} at step {bs}; target {tgt[0]:.3f})"
    elif kind == "no dense target":
        text = "no dense target (dense S-SGD at fewer than 2 seeds" + \
            (f"; {ratio:.2f}x its final loss)" if ratio == ratio else "; no dense run of this setup)")
    elif of:
        text += f", {bad} of {n} seeds"
    return {"kind": kind, "text": text, "ratio": ratio, "seeds": n,
            "steps": statistics.median_low(steps) if steps and kind == "trains" else math.nan,
            "steps_lo": min(steps) if steps and kind == "trains" else math.nan,
            "steps_hi": max(steps) if steps and kind == "trains" else math.nan}


def checks(converge: pd.DataFrame | None, records=()) -> pd.DataFrame:
    """One row per configuration of a converge run (its seeds together): method, world_size, the
    parameters of PARAMS, `kind` (one of SEVERITY), `text`, `ratio` (mean final held-out loss /
    dense S-SGD's of the same setup), `seeds`, and `steps` (median steps to dense's target over
    the seeds, `steps_lo`..`steps_hi` their range; NaN unless every seed reached it). RECORDS:
    run.json dicts, for the sketch size of a converge.csv written before it recorded its own."""
    cols = ["method", "world_size", *PARAMS, "kind", "text", "ratio", "seeds", "steps", "steps_lo", "steps_hi",
            "target_loss", "target_accuracy", "dense_seeds"]
    if converge is None or not len(converge):
        return pd.DataFrame(columns=cols)
    d = converge.assign(run=converge["run"] if "run" in converge.columns else "")
    if "seed" not in d.columns:
        d = d.assign(seed=0)
    sizes = _sketch_sizes(records)
    if any(c not in d.columns for c in DEFAULT_SKETCH) or d[list(DEFAULT_SKETCH)].isna().any().any():
        for c in DEFAULT_SKETCH:
            fill = [sizes.get((r.get("run_id"), r["method"]), DEFAULT_SKETCH)[c] for _, r in d.iterrows()]
            d[c] = [_recorded(r, c, f) for (_, r), f in zip(d.iterrows(), fill)]
    setup = ["run", "world_size", "setup_id"] if "setup_id" in d.columns else [c for c in SETUP if c in d.columns]
    config = setup + ["method"] + [c for c in PARAMS if c in d.columns]
    d[config] = d[config].fillna("")
    rows = []
    for _, s in d.groupby(setup, sort=False):
        dense = s[s["method"] == "ssgd"]
        finals = []
        for _, c in dense.groupby([c for c in config if c in dense.columns] + ["seed"], sort=False):
            c = c.sort_values("step")
            if c.iloc[-1]["status"] == "done" and c["eval_loss"].notna().any():
                e = c.dropna(subset=["eval_loss"]).iloc[-1]
                finals.append((float(e["eval_loss"]), float(e["eval_accuracy"])))
        tgt = target(finals)
        dense_mean = statistics.mean(f for f, _ in finals) if finals else math.nan
        for _, g in s.groupby(config, sort=False):
            r = g.iloc[0]
            v = _config(g, tgt, dense_mean)
            rows.append({"method": r["method"], "world_size": int(r["world_size"]),
                         **{c: (r[c] if c in g.columns and r[c] != "" else None) for c in PARAMS},
                         **v, "target_loss": tgt[0] if tgt else math.nan,
                         "target_accuracy": tgt[1] if tgt else math.nan, "dense_seeds": len(finals)})
    return pd.DataFrame(rows, columns=cols)


def summarise(c: pd.DataFrame) -> str:
    """One verdict for the checks C of one configuration (several runs): the worst kind (for the
    same kind, the largest ratio), and how many of the runs it is when they disagree."""
    c = c.assign(_o=c["kind"].map(SEVERITY.index), _r=c["ratio"].fillna(-math.inf))
    c = c.sort_values(["_o", "_r"], ascending=[True, False])
    w = c.iloc[0]
    n = int((c["kind"] == w["kind"]).sum())
    return w["text"] if n == len(c) else f"{w['text']}, {n} of {len(c)} runs"


def _same(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-6)
    except (TypeError, ValueError):
        return False


def matching(checks_: pd.DataFrame, method: str, world_size, params: dict):
    """(checks, world size they are from) of METHOD with PARAMS (a timing row's values; a
    parameter it lacks, as in an older CSV, is not compared): at WORLD_SIZE, else at the nearest
    world size checked (the larger on a tie); (empty, None) when none."""
    c = checks_[checks_["method"] == method]
    for k in params_of(method):
        v = params.get(k)
        if v is not None and not (isinstance(v, float) and v != v) and k in c.columns:
            c = c[c[k].map(lambda x: _same(x, v)).astype(bool)]
    if not len(c):
        return c, None
    ws = pd.to_numeric(c["world_size"])
    try:
        n = int(world_size)
    except (TypeError, ValueError):
        return c, None
    near = n if (ws == n).any() else min(set(ws), key=lambda w: (abs(w - n), -w))
    return c[ws == near], near


def verdict(checks_: pd.DataFrame, method: str, world_size, params: dict) -> str:
    """The verdict for METHOD at WORLD_SIZE with PARAMS (`matching`): its checks at that world
    size, else at the nearest world size checked (named), else NOT_CHECKED."""
    c, near = matching(checks_, method, world_size, params)
    if not len(c):
        return NOT_CHECKED
    if near is None:
        ws = pd.to_numeric(c["world_size"])
        return summarise(c) + f" (np {', '.join(str(w) for w in sorted(set(ws)))})"
    try:
        same = int(world_size) == near
    except (TypeError, ValueError):
        same = False
    return summarise(c) if same else f"{summarise(c)} at np {near}"


KEYS = ["density", "rank", *DEFAULT_SKETCH, "qsgd_levels"]


def column(df: pd.DataFrame, checks_: pd.DataFrame) -> list:
    """The verdict of every row of a timing table DF (method, world_size and the parameters)."""
    keys = ["method", "world_size"] + [k for k in KEYS if k in df.columns]
    memo = {}
    out = []
    for row in df[keys].itertuples(index=False, name=None):
        if row not in memo:
            r = dict(zip(keys, row))
            memo[row] = verdict(checks_, r["method"], r["world_size"], r)
        out.append(memo[row])
    return out


# The caveat printed under every time-to-accuracy ranking.
TTA_CAVEAT = ("Steps to dense accuracy come from `gradcomp converge`'s proxy task (an MLP on a synthetic "
              "teacher), not from the timed model; time per iteration is the measured (or projected) one. "
              "The interval multiplies the extremes: fewest steps over seeds x (iter - its 95% half-width) to "
              "most steps x (iter + half-width).")


def time_to_accuracy(t: pd.DataFrame, checks_: pd.DataFrame, keys: list) -> pd.DataFrame:
    """Per group of KEYS (a setup: model, world size, network...) of timing rows T (one row per
    method configuration: its best `iter_s`, `iter_ci95_s` where known): each method's steps to
    dense's accuracy (`matching`), time to accuracy = steps x iter_s with its interval, the
    speed-up over S-SGD's time to accuracy in the same setup, the `place`, and `tie` where its
    interval overlaps the fastest's. Methods that do not reach dense (or are not checked) are
    listed last with why, unranked."""
    out = []
    for _, g in t.groupby(keys, sort=False, dropna=False):
        rows = []
        for _, r in g.iterrows():
            params = {k: r[k] for k in KEYS if k in g.columns}
            c, near = matching(checks_, r["method"], r["world_size"], params)
            ci = r.get("iter_ci95_s", math.nan)
            ci = 0.0 if ci is None or ci != ci else float(ci)
            row = {**{k: r[k] for k in keys}, "method": r["method"], "config": r.get("config", ""),
                   "iter_ms": r["iter_s"] * 1e3, "steps": math.nan, "tta_s": math.nan, "tta_lo_s": math.nan,
                   "tta_hi_s": math.nan, "converge_np": near, "verdict": NOT_CHECKED if not len(c) else summarise(c)}
            if T.WIRE in g.columns:  # the size of what was timed, where the caller has it
                row[T.WIRE] = r[T.WIRE]
            if len(c) and (c["kind"] == "trains").all():
                steps, lo, hi = c["steps"].max(), c["steps_lo"].min(), c["steps_hi"].max()
                row.update(steps=steps, tta_s=steps * r["iter_s"], tta_lo_s=lo * max(r["iter_s"] - ci, 0.0),
                           tta_hi_s=hi * (r["iter_s"] + ci))
            rows.append(row)
        d = pd.DataFrame(rows)
        dense = d[(d["method"] == "ssgd") & d["tta_s"].notna()]
        base = float(dense["tta_s"].min()) if len(dense) else math.nan
        d["speedup_vs_ssgd"] = base / d["tta_s"]
        ranked = d[d["tta_s"].notna()].sort_values("tta_s")
        d["place"] = math.nan
        d.loc[ranked.index, "place"] = range(1, len(ranked) + 1)
        if len(ranked):
            best_hi = float(ranked.iloc[0]["tta_hi_s"])
            d["tie"] = [bool(x == x and lo <= best_hi and rk > 1) for x, lo, rk in
                        zip(d["tta_s"], d["tta_lo_s"], d["place"].fillna(0))]
        else:
            d["tie"] = False
        out.append(d.sort_values(["place"], na_position="last"))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()
