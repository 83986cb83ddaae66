"""Verdict agreement of two `make sim-accuracy` runs on one machine
(`python -m gradcomp_analysis sim-agreement DIR_A DIR_B`; `make sim-accuracy-twice`).

Issue 29's acceptance asks that two runs of `make sim-accuracy` on one quiet machine give
the same verdict for every case. Each DIR is the OUT folder `make sim-accuracy` wrote:
per world size `npN/sim/sim_vs_measured.csv` (`gradcomp simulate --compare`'s file;
docs/csv-schema.md), or one such `sim` folder. Per world size found in both, the cases are
joined on `case` and each case's verdict in A is compared with B's; a case whose verdict
changed is listed with both errors and both noises (the case's own spread, how far its
compression fit moves the prediction and how far the host jitter does: what decided it).
Both runs must hold the same cases at each world size: a case in one only is an error,
since the runs would not be of one config. A world size in one run only (a run whose
other world size failed or was not run) is listed and fails the agreement: its cases got
no second verdict. A world size where neither run judged a case (every case too noisy or
not held to it: more ranks than cores) is `not judged` and fails too: the same verdict for
every case then says nothing.

`sim-accuracy DIR` (`accuracy`) is the check of one such folder: per world size the judged
cases within the tolerance, the too noisy and those not held to it; it fails (exit 1) on a
case outside, and on a world size that judged nothing (`not judged`), which is never a pass.
"""

import os

import pandas as pd

from .io import SIM_VS_MEASURED, ReportError, load_csv

COLUMNS = ["case", "verdict", "rel_err", "spread_rel", "fit_spread_rel", "host_jitter_rel"]


def _runs(root: str) -> dict:
    """{label: sim_vs_measured rows} under ROOT: `npN/sim` folders, or ROOT itself."""
    if not os.path.isdir(root):
        raise ReportError(f"{root}: no such directory (give the OUT folder of `make sim-accuracy OUT=...`)")
    found = {}
    for name in sorted(os.listdir(root)):
        sim = os.path.join(root, name, "sim")
        if name.startswith("np") and os.path.isdir(sim):
            found[name] = sim
    if not found and os.path.exists(os.path.join(root, SIM_VS_MEASURED)):
        found["run"] = root
    if not found:
        raise ReportError(f"{root}: no npN/sim/sim_vs_measured.csv and no sim_vs_measured.csv "
                          f"(run `make sim-accuracy OUT={root}` first)")
    out = {}
    for label, d in found.items():
        df = load_csv(d, SIM_VS_MEASURED)
        path = os.path.join(d, SIM_VS_MEASURED)
        if df is None:
            raise ReportError(f"{path}: no such file, or no rows")
        missing = [c for c in COLUMNS if c not in df.columns]
        if missing:
            raise ReportError(f"{path}: columns {missing} missing (a file from before issue 29's verdicts; "
                              f"replay the run with `gradcomp simulate --fits RUN --compare RUN/e2e.csv`)")
        if df["case"].duplicated().any():
            raise ReportError(f"{path}: case {df['case'][df['case'].duplicated()].iloc[0]} appears twice")
        out[label] = df.set_index("case")
    return out


JUDGED = ("within", "outside")


def _unjudged(df: pd.DataFrame) -> str:
    """`3 ranks-exceed-cores, 1 too-noisy`: the verdicts of cases not judged."""
    v = df.loc[~df["verdict"].isin(JUDGED), "verdict"].fillna("no verdict").value_counts()
    return ", ".join(f"{n} {k}" for k, n in v.items())


def accuracy(root: str) -> tuple:
    """(exit status, printable summary) of one `make sim-accuracy` OUT folder (or one
    `simulate --compare` folder): 0 when every world size judged a case and none is
    outside the tolerance; 1 when a case is outside or a world size judged nothing."""
    runs = _runs(root)
    lines, outside, unjudged = [], 0, []
    for k, df in runs.items():
        v = df["verdict"].value_counts()
        within, out = int(v.get("within", 0)), int(v.get("outside", 0))
        noisy, over = int(v.get("too-noisy", 0)), int(v.get("ranks-exceed-cores", 0))
        tol = ", ".join(f"{x * 100:g}%" for x in sorted(set(pd.to_numeric(df["tolerance"], errors="coerce")
                                                           .dropna()))) if "tolerance" in df.columns else "tolerance"
        rest = (f"{noisy} too noisy to judge, {over} not held to it (more ranks than cores)")
        if within + out == 0:
            unjudged.append(k)
            lines.append(f"{k}: not judged (0 of {len(df)} case(s) judged: {rest})")
        else:
            lines.append(f"{k}: {within} of {within + out} judged case(s) within {tol}; {rest}")
        for case, r in df[df["verdict"] == "outside"].iterrows():
            lines.append(f"  outside: {case} ({float(r['rel_err']) * 100:+.1f}%)")
        outside += out
    if outside:
        lines.append(f"result: FAIL ({outside} case(s) outside"
                     + (f"; not judged: {', '.join(unjudged)}" if unjudged else "") + ")")
    elif unjudged:
        lines.append(f"result: NOT JUDGED ({', '.join(unjudged)}: no case judged; not a pass)")
    else:
        lines.append("result: PASS")
    return (1 if outside or unjudged else 0), "\n".join(lines)


def _noise(r, suffix: str) -> str:
    parts = []
    for col, name in [("spread_rel", "spread"), ("fit_spread_rel", "fit"), ("host_jitter_rel", "jitter")]:
        v = r[col + suffix]
        if pd.notna(v):
            parts.append(f"{name} {float(v) * 100:.1f}%")
    return ", ".join(parts) or "one round"


def agreement(dir_a: str, dir_b: str) -> tuple:
    """(all the same?, printable summary, per-case table) of two sim-accuracy OUT folders."""
    a, b = _runs(dir_a), _runs(dir_b)
    shared = [k for k in a if k in b]
    if not shared:
        raise ReportError(f"{dir_a} ({', '.join(a)}) and {dir_b} ({', '.join(b)}) share no world size")
    lines, tables, same_all = [], [], True
    for k in shared:
        A, B = a[k][COLUMNS[1:]], b[k][COLUMNS[1:]]
        only = sorted(set(A.index) ^ set(B.index))
        if only:
            raise ReportError(f"{k}: case {only[0]} is in one run only ({len(only)} such): the runs are not of "
                              f"one config")
        j = A.join(B, lsuffix="_a", rsuffix="_b")
        j["same"] = j["verdict_a"] == j["verdict_b"]
        same = int(j["same"].sum())
        same_all &= same == len(j)
        if not (A["verdict"].isin(JUDGED).any() or B["verdict"].isin(JUDGED).any()):
            # Judged in neither run: the same verdicts agree about nothing.
            same_all = False
            lines.append(f"{k}: not judged (no case judged in either run: {_unjudged(A)}); not a pass")
        else:
            lines.append(f"{k}: the same verdict for {same} of {len(j)} cases")
        for case, r in j[~j["same"]].iterrows():
            lines.append(f"  {case}: {r['verdict_a']} {float(r['rel_err_a']) * 100:+.1f}% ({_noise(r, '_a')}) -> "
                         f"{r['verdict_b']} {float(r['rel_err_b']) * 100:+.1f}% ({_noise(r, '_b')})")
        t = j.reset_index()
        t.insert(0, "run", k)
        tables.append(t)
    # A world size in one run only: its cases have one verdict, not two (fails).
    one_side = [f"{k} (only in {which})" for which, run, other in (("a", a, b), ("b", b, a))
                for k in run if k not in other]
    if one_side:
        same_all = False
        lines.append(f"not compared (in one run only): {', '.join(one_side)}")
    return same_all, "\n".join(lines), pd.concat(tables, ignore_index=True)
