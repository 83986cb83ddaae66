"""Repeatability of a config: two runs of it compared case by case
(`python -m gradcomp_analysis compare RUN_A RUN_B`; `scripts/repeatability.sh`).

The checks, all on e2e.csv (each run's repeats of a case collapsed as the report does,
`tables.collapse_repeats`):

- **Times:** per case (joined on the case's configuration, `tables.case_keys`; a case
  the config repeats is taken at its median repeat), the relative difference of the
  median iteration `t_b / t_a - 1`; within `tolerance` passes (a case timed once makes
  no timing claim and is not judged; when no case is judged, the comparison judged
  nothing and is `NOT JUDGED`, exit 1 like a failure: a vacuous pass is no evidence of
  repeatability). The wire bytes must be identical where both runs
  timed the same number of iterations: the runs are seeded.
- **Conclusions:** every pair of cases of one setup (`tables.setup_keys`: model, world
  size, batch, device) that a report could compare (method against method, fusion against
  none, pipelining on against off) is classified in each run as the report classifies it
  (`tables.significance`: `faster`, `slower`, or not significant when the 95% intervals
  overlap). A pair that is significant in both runs with opposite signs is a
  **contradiction** (the runs rank the two differently: fails). A pair significant in one
  run and inside the noise of the other is **one-sided** (the conclusion is borderline;
  listed, not a failure). Pairs not significant in either run are not conclusions.
- **Cases:** both runs must hold the same cases. A case in only one run fails the check;
  when fewer than half of all cases are in both runs (`MIN_SHARED`), the runs are of
  different configs and the result says so (`FAIL (different configs: ...)`): a few
  shared cases that agree are no evidence of repeatability.

The verdict and the failing cases are printed; the files go to `--out`, by default a
folder of their own beside the runs (`compare_dir`), never into either run.
"""

import math
import os

import pandas as pd

from . import tables as T
from .io import ReportError, load_csv, staged_dir

# Below this share of all cases in both runs, the two runs are of different configs.
MIN_SHARED = 0.5

REQUIRED = ["case_id", "method", "fusion", "pipelining", "collective", "iter_s", "wire_bytes"]


def _e2e(run: str) -> pd.DataFrame:
    df = load_csv(run, "e2e.csv")
    if df is None or df.empty:
        raise ReportError(f"{run}: no e2e.csv rows to compare (compare reads e2e.csv)")
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ReportError(f"{os.path.join(run, 'e2e.csv')}: columns {missing} missing")
    df = T.collapse_repeats(df.copy())
    df["ci"] = T.ci_s(df)
    df["label"] = _labels(df).values
    # A case's key: its configuration (a config that repeats a case gives each repeat its
    # own case_id; collapse_repeats keeps the median repeat).
    df.index = ["|".join(str(v) for v in r) for r in df[T.case_keys(df)].itertuples(index=False)]
    return df


SETUP_OR_SHOWN = {"network", "model", "world_size", "batch", "device", "method", "fusion", "pipelining",
                  "collective", "aggregation"}


def _labels(df: pd.DataFrame) -> pd.Series:
    """`method fusion/pipelining/collective`, plus `key=value` for every other case column
    that varies in the run (`compress_on=device`, `rank=32`)."""
    extra = [k for k in T.case_keys(df) if k not in SETUP_OR_SHOWN and df[k].nunique(dropna=False) > 1]
    return pd.Series([f"{r['method']} {r['fusion']}/{r['pipelining']}/{r['collective']}"
                      + "".join(f" {k}={r[k]}" for k in extra if pd.notna(r[k])) for _, r in df.iterrows()], index=df.index)


def compare_runs(a: pd.DataFrame, b: pd.DataFrame, tolerance: float) -> dict:
    """The checks of the module docs on two runs' e2e rows (as `_e2e` reads them: indexed
    by the case's configuration).
    Returns {"times": DataFrame, "pairs": DataFrame, "only_a": [...], "only_b": [...],
    "ok": bool} (only_a / only_b: the cases one run has and the other has not)."""
    common = a.index.intersection(b.index)
    times = pd.DataFrame({
        "case": a.loc[common, "label"].values,
        "model": a.loc[common, "model"].values,
        "world_size": a.loc[common, "world_size"].values,
        "a_ms": a.loc[common, "iter_s"].values * 1e3,
        "a_ci_ms": a.loc[common, "ci"].values * 1e3,
        "b_ms": b.loc[common, "iter_s"].values * 1e3,
        "b_ci_ms": b.loc[common, "ci"].values * 1e3,
    })
    times["diff_pct"] = (times["b_ms"] / times["a_ms"] - 1) * 100
    # A case timed once (dgc-ratio: its table is about bytes) makes no timing claim.
    iters = pd.to_numeric(a.loc[common, "iters_run" if "iters_run" in a.columns else "iters"],
                          errors="coerce").fillna(2).values
    times["judged"] = iters > 1
    times["within"] = (times["diff_pct"].abs() <= tolerance * 100) | ~times["judged"]
    # Seeded runs send the same bytes per iteration, over the same iterations: wire_bytes
    # is a mean over the timed iterations, and where they differ in number (adaptive
    # timing) a method whose messages change from step to step (ACP-SGD's P and Q
    # steps, variable-length sparse wires) averages differently, so it is not judged.
    wa = pd.to_numeric(a.loc[common, "wire_bytes"], errors="coerce").values
    wb = pd.to_numeric(b.loc[common, "wire_bytes"], errors="coerce").values
    if "iters_run" in a.columns and "iters_run" in b.columns:
        same_iters = (pd.to_numeric(a.loc[common, "iters_run"], errors="coerce").values
                      == pd.to_numeric(b.loc[common, "iters_run"], errors="coerce").values)
    else:
        same_iters = pd.Series(True, index=range(len(common))).values
    times["same_wire"] = (wa == wb) | ~same_iters

    keys = [k for k in T.setup_keys(a) if k in a.columns and k in b.columns]
    rows = []
    ac = a.loc[common]
    for _, g in ac.groupby(keys, sort=False, dropna=False):
        ids = list(g.index)
        for i, x in enumerate(ids):
            for y in ids[i + 1:]:
                sa = T.significance(a.at[x, "iter_s"], a.at[x, "ci"], a.at[y, "iter_s"], a.at[y, "ci"])
                sb = T.significance(b.at[x, "iter_s"], b.at[x, "ci"], b.at[y, "iter_s"], b.at[y, "ci"])
                sig = {"faster", "slower"}
                if sa in sig and sb in sig:
                    verdict = "agree" if sa == sb else "contradiction"
                elif sa in sig or sb in sig:
                    verdict = "one-sided"
                else:
                    continue
                rows.append({"model": a.at[x, "model"], "world_size": a.at[x, "world_size"],
                             "case": a.at[x, "label"], "vs": a.at[y, "label"],
                             "run a": sa, "run b": sb, "verdict": verdict})
    pairs = pd.DataFrame(rows, columns=["model", "world_size", "case", "vs", "run a", "run b", "verdict"])
    only_a = sorted(set(a.index) - set(common))
    only_b = sorted(set(b.index) - set(common))
    union = len(common) + len(only_a) + len(only_b)
    shared = len(common) / union if union else 0.0
    # Every case timed once: the timing check judged nothing, which is not a pass.
    not_judged = len(common) > 0 and not bool(times["judged"].any())
    ok = (bool(times["within"].all()) and bool(times["same_wire"].all())
          and not (pairs["verdict"] == "contradiction").any() and not only_a and not only_b
          and len(common) > 0 and not not_judged)
    return {"times": times, "pairs": pairs, "only_a": only_a, "only_b": only_b, "ok": ok,
            "not_judged": not_judged,
            "shared": shared, "different_configs": shared < MIN_SHARED,
            "labels_a": {k: a.at[k, "label"] for k in only_a},
            "labels_b": {k: b.at[k, "label"] for k in only_b}}


def _fmt(v, nd=3):
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{nd}g}"


def _largest(t: pd.DataFrame) -> str:
    d = t.loc[t["judged"], "diff_pct"].abs()
    return f"{d.max():.1f}%" if len(d) else "n/a"


def result_line(res: dict) -> str:
    """`PASS`, `FAIL`, `FAIL (different configs: K of N cases in both runs)`, or `NOT JUDGED
    (...)` when every case was timed once (no timing claim to compare: not a pass)."""
    n_a, n_b, k = len(res["only_a"]), len(res["only_b"]), len(res["times"])
    if res.get("different_configs"):
        return (f"FAIL (different configs: {k} of {k + n_a + n_b} cases in both runs; "
                f"compare judges two runs of one config)")
    if res["ok"]:
        return "PASS"
    if res.get("not_judged") and not (n_a or n_b):
        t = res["times"]
        why = ("wire bytes differ" if not t["same_wire"].all() else
               "a conclusion reversed" if (res["pairs"]["verdict"] == "contradiction").any() else "")
        return (f"NOT JUDGED (all {k} case(s) timed once: no timing claim to compare; not a pass"
                + (f"; also {why}" if why else "") + ")")
    if n_a or n_b:
        return f"FAIL ({n_a + n_b} case(s) in one run only)"
    return "FAIL"


def failures(res: dict, limit: int = 10) -> list:
    """One line per failing case (time outside, wire bytes differ, contradiction, case in
    one run only), at most `limit` per kind, with a count of the rest."""
    t, p = res["times"], res["pairs"]
    out = []

    def some(kind, items):
        items = list(items)
        out.extend(f"  {kind}: {x}" for x in items[:limit])
        if len(items) > limit:
            out.append(f"  {kind}: ... and {len(items) - limit} more")

    bad = t[~t["within"]].sort_values("diff_pct", key=lambda s: s.abs(), ascending=False)
    some("outside", (f"{r['case']} ({r['model']}, {T.ranks(r['world_size'])}): {_fmt(r['a_ms'])} ms vs "
                     f"{_fmt(r['b_ms'])} ms, {r['diff_pct']:+.1f}%" for _, r in bad.iterrows()))
    some("wire bytes differ", (f"{r['case']} ({r['model']}, {T.ranks(r['world_size'])})"
                               for _, r in t[~t["same_wire"]].iterrows()))
    some("contradiction", (f"{r['case']} vs {r['vs']} ({r['model']}, {T.ranks(r['world_size'])}): "
                           f"run a {r['run a']}, run b {r['run b']}"
                           for _, r in p[p["verdict"] == "contradiction"].iterrows()))
    some("only in a", (res.get("labels_a", {}).get(k, k) for k in res["only_a"]))
    some("only in b", (res.get("labels_b", {}).get(k, k) for k in res["only_b"]))
    return out


def summary(res: dict, run_a: str, run_b: str, tolerance: float) -> str:
    """A Markdown summary of `compare_runs`' result."""
    t, p = res["times"], res["pairs"]
    n_sig = len(p)
    counts = p["verdict"].value_counts() if n_sig else pd.Series(dtype=int)
    lines = [f"# Repeatability: {run_a} vs {run_b}", "",
             f"- cases compared: {len(t)} (only in a: {len(res['only_a'])}, only in b: {len(res['only_b'])})",
             (f"- times within {tolerance * 100:.0f}%: {int((t['within'] & t['judged']).sum())} of "
              f"{int(t['judged'].sum())} judged"
              + (f"; largest difference {_largest(t)}" if t["judged"].any() else "")
              + (f" (cases timed once, not judged: {int((~t['judged']).sum())})" if (~t["judged"]).any() else ""))
             if len(t) else "- no common cases",
             f"- wire bytes identical (where both runs timed as many iterations): "
             f"{int(t['same_wire'].sum())} of {len(t)}",
             f"- significant conclusions (pairs of cases of one setup significant in either run): {n_sig}; "
             f"agree {int(counts.get('agree', 0))}, one-sided {int(counts.get('one-sided', 0))}, "
             f"contradictions {int(counts.get('contradiction', 0))}",
             f"- result: {result_line(res)}", ""]
    out = t.sort_values("diff_pct", key=lambda s: s.abs(), ascending=False)
    lines += ["| case | model | ranks | run a ms | ± | run b ms | ± | b vs a |", "|---|---|---|---|---|---|---|---|"]
    for _, r in out.iterrows():
        flag = (" (timed once, not judged)" if not r["judged"] else "" if r["within"] else " (outside)") \
            + ("" if r["same_wire"] else " (wire bytes differ)")
        lines.append(f"| {r['case']} | {r['model']} | {r['world_size']} | {_fmt(r['a_ms'])} | {_fmt(r['a_ci_ms'], 2)} "
                     f"| {_fmt(r['b_ms'])} | {_fmt(r['b_ci_ms'], 2)} | {r['diff_pct']:+.1f}%{flag} |")
    bad = p[p["verdict"] != "agree"]
    if len(bad):
        lines += ["", "Conclusions that are not the same in both runs:", "",
                  "| model | ranks | case | vs | run a | run b | verdict |", "|---|---|---|---|---|---|---|"]
        for _, r in bad.iterrows():
            lines.append(f"| {r['model']} | {r['world_size']} | {r['case']} | {r['vs']} | {r['run a']} "
                         f"| {r['run b']} | {r['verdict']} |")
    for which in ("a", "b"):
        only = res[f"only_{which}"]
        if only:
            lines += ["", f"Cases only in run {which}: "
                      + ", ".join(res.get(f"labels_{which}", {}).get(k, k) for k in only)]
    return "\n".join(lines) + "\n"


def compare_dir(run_a: str, run_b: str) -> str:
    """The default output folder: `compare-A-vs-B` in the runs' common parent, A and B
    the parts of their paths that differ (`x/a/np4`, `x/b/np4` -> `x/compare-a_np4-vs-b_np4`)."""
    pa = os.path.normpath(os.path.abspath(run_a)).split(os.sep)
    pb = os.path.normpath(os.path.abspath(run_b)).split(os.sep)
    i = 0
    while i < min(len(pa), len(pb)) - 1 and pa[i] == pb[i]:
        i += 1
    name_a, name_b = "_".join(pa[i:]) or "a", "_".join(pb[i:]) or "b"
    parent = os.sep.join(pa[:i]) or os.sep
    return os.path.join(parent, f"compare-{name_a}-vs-{name_b}")


def compare(run_a: str, run_b: str, tolerance: float = 0.10, out: str = None):
    """Compare two runs' e2e.csv; write OUT/compare.md and compare_times.csv /
    compare_pairs.csv (OUT defaults to `compare_dir(RUN_A, RUN_B)`). Returns (ok, path
    of compare.md)."""
    ok, path, _ = compare_result(run_a, run_b, tolerance, out)
    return ok, path


def compare_result(run_a: str, run_b: str, tolerance: float = 0.10, out: str = None):
    """`compare`, also returning `compare_runs`' result."""
    res = compare_runs(_e2e(run_a), _e2e(run_b), tolerance)
    out = out or compare_dir(run_a, run_b)
    with staged_dir(out, "comparison") as d:
        res["times"].to_csv(os.path.join(d, "compare_times.csv"), index=False)
        res["pairs"].to_csv(os.path.join(d, "compare_pairs.csv"), index=False)
        with open(os.path.join(d, "compare.md"), "w") as f:
            f.write(summary(res, run_a, run_b, tolerance))
    return res["ok"], os.path.join(out, "compare.md"), res


def printed(res: dict, tolerance: float, path: str) -> str:
    """What `compare` prints: the summary lines, the result, the failing cases, the file."""
    t = res["times"]
    head = summary(res, "a", "b", tolerance).split("\n")
    lines = [x[2:] for x in head if x.startswith("- ") and not x.startswith("- result:")]
    lines.append(f"result: {result_line(res)}")
    fails = failures(res)
    if fails:
        lines.append("failing cases:")
        lines += fails
    lines.append(f"written: {path} ({len(t)} case(s) compared)")
    return "\n".join(lines)
