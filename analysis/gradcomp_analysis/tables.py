"""Paper tables as pure functions of the CSV DataFrames (no I/O, no plotting).

Every function takes the DataFrame(s) of one or more runs (docs/csv-schema.md columns;
`network` optional) and returns a DataFrame with a plain RangeIndex, times in ms. When
the rows a table needs are absent it raises `MissingData` saying what is missing; the
report then names the bench config that produces them.

Selection rules used throughout (documented in docs/reproduce.md):

- "auto" collective: the method's own collective (`collective == aggregation`).
- "best": for a method in a setup, the fastest row (median `iter_s`) over the fusion plans
  and pipelining settings present; the chosen `fusion/pipelining` is shown.
- Defaults when a run sweeps hyper-parameters: Power-SGD/ACP-SGD use the paper's rank for
  the model (4 for CNNs, 32 for BERT) if present, else the smallest; sparsifiers use
  rho = 0.001 if present, else the smallest density.
"""

import math
import re

import pandas as pd

from . import published as pub

LOW_RANK = ("powersgd", "acpsgd")
SPARSE = ("topk", "dgc", "sketch", "omgs", "sketch-fusion")
PLANNERS = ("mgwfbp", "omgs", "layerfusion")


class MissingData(Exception):
    """The CSV lacks the rows a table needs (the message says which)."""


# ---------------------------------------------------------------- helpers

_UNITS = {"": 1, "B": 1, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "KB": 1000, "MB": 1000**2, "GB": 1000**3}


def fusion_bytes(label) -> float:
    """Bucket threshold of a fusion label in bytes: none -> 0, single -> inf, planners -> nan."""
    s = str(label).strip()
    if s == "none":
        return 0.0
    if s == "single":
        return math.inf
    m = re.fullmatch(r"([0-9.]+)\s*([A-Za-z]*)", s)
    if not m or m.group(2).upper() not in _UNITS:
        return math.nan
    return float(m.group(1)) * _UNITS[m.group(2).upper()]


def human_bytes(n) -> str:
    n = float(n)
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:g}{unit}" if n.is_integer() else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


def setup_keys(df: pd.DataFrame) -> list:
    """The columns that identify one experimental setup of e2e rows."""
    keys = ["model", "world_size", "batch", "device"]
    if "network" in df.columns and df["network"].fillna("").nunique() > 1:
        keys = ["network"] + keys
    return keys


def auto(df: pd.DataFrame) -> pd.DataFrame:
    """Rows where the method used its own collective."""
    return df[df["collective"] == df["aggregation"]]


def defaults(df: pd.DataFrame) -> pd.DataFrame:
    """Keep one rank per (model, low-rank method) and one density per (model, sparse method)."""
    keep = pd.Series(True, index=df.index)
    for (model, method), g in df.groupby(["model", "method"]):
        if method in LOW_RANK and g["rank"].nunique() > 1:
            want = pub.ACPSGD_MAIN_SETUP.get(model, (None, 4))[1]
            r = want if (g["rank"] == want).any() else g["rank"].min()
            keep[g.index] = g["rank"] == r
        elif method in SPARSE and g["density"].nunique() > 1:
            d = 0.001 if (g["density"] - 0.001).abs().lt(1e-12).any() else g["density"].min()
            keep[g.index] = (g["density"] - d).abs() < 1e-12
    return df[keep]


def best(df: pd.DataFrame, keys: list) -> pd.DataFrame:
    """Per group of KEYS, the row with the smallest iter_s, plus a `config` column."""
    if df.empty:
        return df.assign(config=pd.Series(dtype=str))
    idx = df.groupby(keys, dropna=False)["iter_s"].idxmin()
    out = df.loc[idx.values].copy()
    out["config"] = out["fusion"].astype(str) + "/" + out["pipelining"].astype(str)
    return out.reset_index(drop=True)


def prefer_pipelining_on(df: pd.DataFrame, keys: list) -> pd.DataFrame:
    """Rows with pipelining on where a group of KEYS has them, else its off rows."""
    has_on = df.groupby(keys, dropna=False)["pipelining"].transform(lambda s: (s == "on").any())
    return df[(df["pipelining"] == "on") | ~has_on]


def _require(df, what: str):
    if df is None or len(df) == 0:
        raise MissingData(what)


def _ms(s):
    return s * 1e3


def _flat(t: pd.DataFrame) -> pd.DataFrame:
    t = t.copy()
    if isinstance(t.columns, pd.MultiIndex):
        t.columns = [" ".join(str(x) for x in c if str(x)) for c in t.columns]
    t.columns.name = None
    return t.reset_index()


# ---------------------------------------------------------------- ACP-SGD

def acpsgd_main(e2e: pd.DataFrame, methods=pub.ACPSGD_METHODS) -> pd.DataFrame:
    """Iteration time per setup x method (each at its best fusion/pipelining, own
    collective), with speedups over ssgd and powersgd of the same setup."""
    _require(e2e, "no e2e rows")
    d = defaults(auto(e2e[e2e["method"].isin(methods)]))
    if not {"ssgd", "acpsgd"} <= set(d["method"]):
        raise MissingData("needs e2e rows of ssgd and acpsgd (own collective)")
    keys = setup_keys(d)
    b = best(d, keys + ["method"])
    b["iter_ms"] = _ms(b["iter_s"])
    ref = b.set_index(keys + ["method"])["iter_s"]
    rows = []
    for _, r in b.iterrows():
        k = tuple(r[c] for c in keys)
        out = {c: r[c] for c in keys}
        out.update(method=r["method"], config=r["config"], rank=r["rank"] if r["method"] in LOW_RANK else None,
                   iter_ms=r["iter_ms"])
        for base in ("ssgd", "powersgd"):
            t = ref.get(k + (base,))
            out[f"speedup vs {base}"] = (t / r["iter_s"]) if t is not None else None
        rows.append(out)
    t = pd.DataFrame(rows)
    t["rank"] = pd.array(t["rank"], dtype="Int64")
    t["method"] = pd.Categorical(t["method"], [m for m in methods if m in set(t["method"])], ordered=True)
    return t.sort_values(keys + ["method"]).reset_index(drop=True).assign(method=lambda x: x["method"].astype(str))


def acpsgd_main_wide(main: pd.DataFrame) -> pd.DataFrame:
    """The main table in the paper's layout: a row per setup, a column per method (ms)."""
    keys = [c for c in main.columns if c in ("network", "model", "world_size", "batch", "device")]
    w = main.pivot_table(index=keys, columns="method", values="iter_ms", sort=False)
    w = w[[m for m in pub.ACPSGD_METHODS if m in w.columns]]
    w.columns = [f"{m} ms" for m in w.columns]
    return _flat(w)


def acpsgd_speedup_summary(main: pd.DataFrame) -> pd.DataFrame:
    """Mean ACP-SGD speedup over ssgd and powersgd across setups, beside the published one."""
    a = main[main["method"] == "acpsgd"]
    rows = []
    for base in ("ssgd", "powersgd"):
        s = a[f"speedup vs {base}"].dropna()
        rows.append({"comparison": f"acpsgd over {base}", "setups": len(s),
                     "mean speedup": s.mean() if len(s) else None,
                     "min": s.min() if len(s) else None, "max": s.max() if len(s) else None,
                     "mean speedup (published)": pub.ACPSGD_SPEEDUP[base]})
    return pd.DataFrame(rows)


ABLATION_STEPS = [
    ("all-gather", "allgather", "off", "none"),
    ("all-reduce", "auto", "off", "none"),
    ("+ pipelining", "auto", "on", "none"),
    ("+ fusion", "auto", "off", "fused"),
    ("+ pipelining + fusion", "auto", "on", "fused"),
]


def acpsgd_ablation(e2e: pd.DataFrame, methods=pub.ACPSGD_METHODS) -> pd.DataFrame:
    """The three system optimisations per method: all-gather vs all-reduce (allreduce
    methods only), pipelining, fusion (best byte threshold or single buffer)."""
    _require(e2e, "no e2e rows")
    d = defaults(e2e[e2e["method"].isin(methods)])
    if set(d["pipelining"]) != {"on", "off"} or "none" not in set(d["fusion"]):
        raise MissingData("needs e2e rows with pipelining off and on, fusion none and a fusion threshold")
    keys = setup_keys(d)
    fb = d["fusion"].map(fusion_bytes)
    d = d.assign(_fused=(fb > 0) & fb.notna())
    rows = []
    for k, g in d.groupby(keys + ["method"], sort=False):
        out = dict(zip(keys + ["method"], k))
        vals = []
        for label, coll, pipe, fus in ABLATION_STEPS:
            sel = g[g["pipelining"] == pipe]
            if coll == "auto":
                sel = auto(sel)
            else:
                if (g["aggregation"] != "allreduce").all():
                    out[label + " ms"] = None  # an all-gather method: no all-reduce step
                    continue
                sel = sel[sel["collective"] == coll]
            sel = sel[sel["_fused"]] if fus == "fused" else sel[sel["fusion"] == fus]
            v = _ms(sel["iter_s"].min()) if len(sel) else None
            out[label + " ms"] = v
            if fus == "fused" and len(sel):
                out[label + " plan"] = sel.loc[sel["iter_s"].idxmin(), "fusion"]
            if v is not None:
                vals.append(v)
        if len(vals) >= 2:
            out["speedup (first/last)"] = vals[0] / vals[-1]
            rows.append(out)
    if not rows:
        raise MissingData("needs e2e rows of one setup in two or more ablation configurations")
    t = pd.DataFrame(rows)
    order = keys + ["method"] + [s[0] + " ms" for s in ABLATION_STEPS] + ["speedup (first/last)"] + \
        [s[0] + " plan" for s in ABLATION_STEPS if s[3] == "fused"]
    return t[[c for c in order if c in t.columns]]


def acpsgd_buffer_sweep(e2e: pd.DataFrame, methods=pub.ACPSGD_METHODS) -> pd.DataFrame:
    """Iteration time vs fusion buffer threshold (none = 0, byte thresholds, single)."""
    _require(e2e, "no e2e rows")
    d = defaults(auto(e2e[e2e["method"].isin(methods)]))
    d = d.assign(buffer_bytes=d["fusion"].map(fusion_bytes))
    d = d[d["buffer_bytes"].notna()]
    thresholds = d["buffer_bytes"][(d["buffer_bytes"] > 0) & (d["buffer_bytes"] < math.inf)]
    if thresholds.nunique() < 2:
        raise MissingData("needs e2e rows with two or more fusion byte thresholds")
    keys = setup_keys(d)
    finite = d["buffer_bytes"].where((d["buffer_bytes"] > 0) & (d["buffer_bytes"] < math.inf))
    d = d[finite.groupby([d[k] for k in keys]).transform("nunique") >= 2]
    if d.empty:
        raise MissingData("needs e2e rows of one setup with two or more fusion byte thresholds")
    d = prefer_pipelining_on(d, keys + ["method"])
    t = d.pivot_table(index=keys + ["buffer_bytes", "fusion"], columns="method", values="iter_s", aggfunc="min")
    t = _ms(t[[m for m in methods if m in t.columns]])
    t.columns = [f"{m} ms" for m in t.columns]
    t = _flat(t).sort_values(keys + ["buffer_bytes"]).reset_index(drop=True)
    t["buffer_MiB"] = t.pop("buffer_bytes") / 2**20
    return t


def acpsgd_rank_sweep(e2e: pd.DataFrame) -> pd.DataFrame:
    """Power-SGD vs ACP-SGD iteration time per rank (best fusion, pipelining on)."""
    _require(e2e, "no e2e rows")
    d = auto(e2e[e2e["method"].isin(LOW_RANK)])
    if d.empty or d.groupby(["model", "method"])["rank"].nunique().max() < 2:
        raise MissingData("needs e2e rows of powersgd/acpsgd at two or more ranks")
    keys = setup_keys(d)
    d = d[d.groupby(keys)["rank"].transform("nunique") >= 2]
    d = prefer_pipelining_on(d, keys + ["method", "rank"])
    b = best(d, keys + ["method", "rank"])
    t = b.pivot_table(index=keys + ["rank"], columns="method", values="iter_s")
    t = _ms(t[[m for m in LOW_RANK if m in t.columns]])
    t.columns = [f"{m} ms" for m in t.columns]
    if {"powersgd ms", "acpsgd ms"} <= set(t.columns):
        t["acpsgd speedup vs powersgd"] = t["powersgd ms"] / t["acpsgd ms"]
    ss = best(defaults(auto(e2e[e2e["method"] == "ssgd"])), keys)
    t = _flat(t)
    if len(ss):
        t = t.merge(ss[keys + ["iter_s"]].rename(columns={"iter_s": "ssgd ms"}), on=keys, how="left")
        t["ssgd ms"] = _ms(t["ssgd ms"])
    return t


def _per_setup_method(e2e: pd.DataFrame, methods, index: list) -> pd.DataFrame:
    d = defaults(auto(e2e[e2e["method"].isin(methods)]))
    b = best(d, index + ["method"])
    t = b.pivot_table(index=index, columns="method", values="iter_s")
    t = _ms(t[[m for m in methods if m in t.columns]])
    t.columns = [f"{m} ms" for m in t.columns]
    for base in ("ssgd", "powersgd"):
        if f"{base} ms" in t.columns and "acpsgd ms" in t.columns:
            t[f"acpsgd speedup vs {base}"] = t[f"{base} ms"] / t["acpsgd ms"]
    return _flat(t)


def acpsgd_scaling(e2e: pd.DataFrame, methods=pub.ACPSGD_METHODS) -> pd.DataFrame:
    """Iteration time per world size (best configuration per method)."""
    _require(e2e, "no e2e rows")
    d = e2e[e2e["method"].isin(methods)]
    if d.groupby("model")["world_size"].nunique().max() < 2:
        raise MissingData("needs e2e rows of one model at two or more world sizes (one run per world size)")
    keys = [k for k in setup_keys(d) if k != "world_size"]
    d = d[d.groupby(keys)["world_size"].transform("nunique") >= 2]
    return _per_setup_method(d, methods, keys + ["world_size"])


def acpsgd_network(e2e: pd.DataFrame, methods=pub.ACPSGD_METHODS) -> pd.DataFrame:
    """Iteration time per network (runs labelled by network.txt)."""
    _require(e2e, "no e2e rows")
    if "network" not in e2e.columns or e2e["network"].fillna("").replace("", pd.NA).dropna().nunique() < 2:
        raise MissingData("needs runs on two or more networks (network.txt in each run directory)")
    d = e2e[e2e["method"].isin(methods)].copy()
    d["network"] = d["network"].fillna("").replace("", "(unlabelled)")
    base = ["model", "world_size", "batch", "device"]
    d = d[d.groupby(base)["network"].transform("nunique") >= 2]
    if d.empty:
        raise MissingData("needs the same model, world size and batch on two or more networks")
    return _per_setup_method(d, methods, base + ["network"])


# ---------------------------------------------------------------- DGC

def dgc_ratio(e2e: pd.DataFrame) -> pd.DataFrame:
    """fp32 gradient size vs DGC message size and ratio per model, beside DGC's table."""
    _require(e2e, "no e2e rows")
    d = e2e[e2e["method"] == "dgc"]
    if d.empty:
        raise MissingData("needs e2e rows of method dgc")
    rows = []
    ours = {}
    for (model, dens), g in d.groupby(["model", "density"]):
        g0 = g[g["fusion"] == "none"] if (g["fusion"] == "none").any() else g
        wire = g0["wire_bytes"].min()
        dense = g0["dense_bytes"].iloc[0]
        ours.setdefault(model, []).append((dens, dense, wire))
    seen = set()
    for paper, zoo, gmb, mmb, ratio in pub.DGC:
        for dens, dense, wire in ours.get(zoo, [(None, None, None)]):
            rows.append({"model (paper)": paper, "model": zoo if zoo else "(not in gradcomp's zoo)", "density": dens,
                         "gradient MiB": dense / 2**20 if dense is not None else None,
                         "message MiB": wire / 2**20 if wire is not None else None,
                         "ratio": dense / wire if wire else None,
                         "gradient MiB (published)": gmb, "message MiB (published)": mmb,
                         "ratio (published)": ratio})
        seen.add(zoo)
    for model in sorted(set(ours) - seen):
        for dens, dense, wire in ours[model]:
            rows.append({"model (paper)": "", "model": model, "density": dens, "gradient MiB": dense / 2**20,
                         "message MiB": wire / 2**20, "ratio": dense / wire if wire else None,
                         "gradient MiB (published)": None, "message MiB (published)": None, "ratio (published)": None})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- OMGS-SGD

def omgs(e2e: pd.DataFrame) -> pd.DataFrame:
    """Layer-wise Top-k (fusion none) vs OMGS vs S-SGD with MG-WFBP; improvement of OMGS."""
    _require(e2e, "no e2e rows")
    d = auto(e2e)
    if not (d["method"] == "omgs").any() or not ((d["method"] == "topk") & (d["fusion"] == "none")).any():
        raise MissingData("needs e2e rows of omgs and of topk with fusion none")
    keys = setup_keys(d)

    def pick(sel, grp):
        sel = prefer_pipelining_on(sel, grp)
        return _ms(sel.groupby(grp)["iter_s"].min())

    topk = pick(d[(d["method"] == "topk") & (d["fusion"] == "none")], keys + ["density"])
    om = pick(d[d["method"] == "omgs"], keys + ["density"])
    t = pd.concat([topk.rename("topk (layer-wise) ms"), om.rename("omgs ms")], axis=1).dropna().reset_index()
    if t.empty:
        raise MissingData("needs omgs and layer-wise topk rows of the same setup and density")
    ss = d[(d["method"] == "ssgd") & (d["fusion"] == "mgwfbp")]
    if len(ss):
        t = t.merge(pick(ss, keys).rename("ssgd (mgwfbp) ms").reset_index(), on=keys, how="left")
        t = t[keys + ["density", "ssgd (mgwfbp) ms", "topk (layer-wise) ms", "omgs ms"]]
    t["omgs improvement vs topk %"] = 100 * (t["topk (layer-wise) ms"] - t["omgs ms"]) / t["topk (layer-wise) ms"]
    if "ssgd (mgwfbp) ms" in t.columns:
        t["omgs speedup vs ssgd"] = t["ssgd (mgwfbp) ms"] / t["omgs ms"]
    t["improvement vs topk % (published, up to)"] = pub.OMGS_IMPROVEMENT_PCT
    return t.reset_index(drop=True)


# ---------------------------------------------------------------- Marsit

def marsit(e2e: pd.DataFrame) -> pd.DataFrame:
    """Marsit (1-bit ring) vs S-SGD vs Sign-SGD (all-gather): time and wire bytes."""
    _require(e2e, "no e2e rows")
    methods = ["ssgd", "signsgd", "marsit"]
    d = defaults(auto(e2e[e2e["method"].isin(methods)]))
    if not {"marsit", "ssgd"} <= set(d["method"]):
        raise MissingData("needs e2e rows of marsit and ssgd")
    keys = setup_keys(d)
    b = best(d, keys + ["method"])
    rows = []
    for k, g in b.groupby(keys, sort=False):
        g = g.set_index("method")
        for m in methods:
            if m not in g.index:
                continue
            r = g.loc[m]
            out = dict(zip(keys, k if isinstance(k, tuple) else (k,)))
            out.update({"method": m, "collective": r["collective"], "config": r["config"],
                        "iter_ms": _ms(r["iter_s"]), "comm_ms": _ms(r["comm_s"]),
                        "wire MiB": r["wire_bytes"] / 2**20, "ratio": r["dense_bytes"] / r["wire_bytes"]})
            if "ssgd" in g.index:
                out["time reduction vs ssgd %"] = 100 * (1 - r["iter_s"] / g.loc["ssgd", "iter_s"])
            out["reduction % (published, up to)"] = pub.MARSIT_REDUCTION_PCT if m == "marsit" else None
            rows.append(out)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- Sketch-Fusion

def sketch_fusion(e2e: pd.DataFrame) -> pd.DataFrame:
    """Each compressor with fusion none vs LayerFusion (pipelining on where present);
    Sketch-Fusion (merged sketches) against per-tensor sketch without fusion."""
    _require(e2e, "no e2e rows")
    d = defaults(auto(e2e))
    if not (d["fusion"] == "layerfusion").any():
        raise MissingData("needs e2e rows with fusion layerfusion (or method sketch-fusion)")
    keys = setup_keys(d)
    d = prefer_pipelining_on(d, keys + ["method", "fusion"])
    rows = []
    for k, g in d.groupby(keys, sort=False):
        kk = dict(zip(keys, k if isinstance(k, tuple) else (k,)))
        tmin = g.groupby(["method", "fusion"])["iter_s"].min()
        for m in [m for m in g["method"].unique() if m not in ("omgs",)]:
            none_m = "sketch" if m == "sketch-fusion" else m
            t0 = tmin.get((none_m, "none"))
            t1 = tmin.get((m, "layerfusion"))
            if t0 is None and t1 is None:
                continue
            rows.append({**kk, "method": m, "none ms": _ms(t0) if t0 is not None else None,
                         "layerfusion ms": _ms(t1) if t1 is not None else None,
                         "speedup": t0 / t1 if t0 is not None and t1 is not None else None,
                         "faster %": 100 * (1 - t1 / t0) if t0 is not None and t1 is not None else None,
                         "faster % (published, up to)": pub.SKETCH_FASTER_PCT if m == "sketch-fusion" else None})
    t = pd.DataFrame(rows)
    if t.empty or t["layerfusion ms"].isna().all():
        raise MissingData("needs e2e rows with fusion layerfusion (or method sketch-fusion)")
    return t


def sketch_scaling(e2e: pd.DataFrame) -> pd.DataFrame:
    """Throughput (samples/s = world x batch / iteration) per world size without fusion and
    with LayerFusion (pipelining on where present). Sketch-Fusion's "none" is per-tensor
    sketch without fusion. Only methods with both at two or more world sizes."""
    _require(e2e, "no e2e rows")
    d = defaults(auto(e2e))
    d = d[d["fusion"].isin(["none", "layerfusion"])]
    sk = d[(d["method"] == "sketch") & (d["fusion"] == "none")].assign(method="sketch-fusion")
    d = pd.concat([d, sk], ignore_index=True)
    keys = [k for k in setup_keys(d) if k != "world_size"]
    d = prefer_pipelining_on(d, keys + ["world_size", "method", "fusion"])
    g = d.groupby(keys + ["method", "fusion", "world_size"])["iter_s"].min().reset_index()
    g["samples_per_s"] = g["world_size"] * g["batch"] / g["iter_s"]
    ok = g.groupby(keys + ["method", "world_size"])["fusion"].transform("nunique") == 2
    g = g[ok]
    g = g[g.groupby(keys + ["method"])["world_size"].transform("nunique") >= 2]
    if g.empty:
        raise MissingData("needs e2e rows with fusion none and layerfusion at two or more world sizes")
    t = g.pivot_table(index=keys + ["method", "world_size"], columns="fusion", values="samples_per_s", sort=False)
    t = t[["none", "layerfusion"]]
    t.columns = ["none samples/s", "layerfusion samples/s"]
    t = _flat(t)
    t["layerfusion gain"] = t["layerfusion samples/s"] / t["none samples/s"]
    return t


def sketch_scalability(scaling: pd.DataFrame) -> pd.DataFrame:
    """Scalability (throughput at the largest world size / at the smallest) without fusion
    and with LayerFusion, and LayerFusion's gain, beside the published maximum gain."""
    keys = [c for c in scaling.columns if c in ("network", "model", "batch", "device", "method")]
    rows = []
    for k, g in scaling.groupby(keys, sort=False):
        g = g.sort_values("world_size")
        lo, hi = g.iloc[0], g.iloc[-1]
        s0 = hi["none samples/s"] / lo["none samples/s"]
        s1 = hi["layerfusion samples/s"] / lo["layerfusion samples/s"]
        rows.append({**dict(zip(keys, k)), "from ranks": int(lo["world_size"]), "to ranks": int(hi["world_size"]),
                     "scaling none": s0, "scaling layerfusion": s1, "layerfusion scalability gain": s1 / s0,
                     "gain (published, up to)": pub.SKETCH_LAYERFUSION_SCALABILITY})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- micro benchmarks

def micro_comm_tables(df: pd.DataFrame) -> dict:
    """Latency/bandwidth table per world size: rows = size, columns = collective."""
    out = {}
    plain = df[df["collective"] != "iallreduce-overlap"]
    for n, g in plain.groupby("world_size"):
        lat = g.pivot_table(index="bytes", columns="collective", values="median_s") * 1e6
        bw = g.pivot_table(index="bytes", columns="collective", values="busbw_gbps")
        t = lat.add_suffix(" median_us").join(bw.add_suffix(" busbw_GB/s"))
        t.index = [human_bytes(b) for b in t.index]
        t.index.name = "size"
        out[f"micro_comm_np{n}"] = t.reset_index()
    ov = df[df["collective"] == "iallreduce-overlap"]
    for n, g in ov.groupby("world_size"):
        t = g.groupby("bytes")[["t_pure_s", "t_cpu_s", "t_overall_s", "overlap_osu_pct", "overlap_imb_pct"]].median()
        for c in ["t_pure_s", "t_cpu_s", "t_overall_s"]:
            t[c.replace("_s", "_us")] = t.pop(c) * 1e6
        t.index = [human_bytes(b) for b in t.index]
        t.index.name = "size"
        out[f"overlap_np{n}"] = t.reset_index()
    return out


def micro_compress(df: pd.DataFrame) -> pd.DataFrame:
    """Compression throughput per method and shape, with the memory read bandwidth."""
    _require(df, "no micro_compress rows")
    shape = ["rows", "cols"] + [c for c in ["model", "tensors"] if c in df.columns]  # not in CSVs before 8177be3
    t = df[["method"] + shape + ["world_size", "compress_s", "feedback_s", "decompress_s", "input_gbps",
            "compress_gbps", "decompress_gbps", "mem_read_gbps", "mem_frac", "wire_bytes", "ratio", "rel_error"]].copy()
    t[["rows", "cols"]] = t[["rows", "cols"]].astype("Int64")  # empty on model rows
    for c in ["compress_s", "feedback_s", "decompress_s"]:
        t[c.replace("_s", "_ms")] = _ms(t.pop(c))
    return t.reset_index(drop=True)


def acpsgd_vs_powersgd(df: pd.DataFrame) -> pd.DataFrame:
    """ACP-SGD's work per step against Power-SGD's on the same shape, rank and world size
    (ICDCS 2023 §IV: one product, one orthogonalisation and one all-reduce per step instead
    of two): step time (`total_s`: compress + feedback + decompress in micro-compress, plus
    the exchange in micro), wire bytes and exchange rounds, each also as acpsgd / powersgd.
    Only shapes Power-SGD compresses (ratio > 1); empty when either method is missing."""
    keys = ([c for c in ["model"] if c in df.columns]) + ["rows", "cols", "rank", "world_size"]
    cols = keys + ["total_s", "wire_bytes", "rounds", "ratio"]
    p = df.loc[df.method == "powersgd", cols]
    a = df.loc[df.method == "acpsgd", cols]
    # Model rows have no rows/cols: merge on the model name (filled) instead.
    p, a = (x.fillna({"model": ""}) if "model" in x.columns else x for x in (p, a))
    m = p[p.ratio > 1].merge(a, on=keys, suffixes=("_p", "_a"))
    t = m[keys].copy()
    t[["rows", "cols"]] = t[["rows", "cols"]].astype("Int64")  # empty on model rows
    t["powersgd_step_ms"] = _ms(m.total_s_p)
    t["acpsgd_step_ms"] = _ms(m.total_s_a)
    t["time_ratio"] = m.total_s_a / m.total_s_p
    t["powersgd_wire_bytes"] = m.wire_bytes_p
    t["acpsgd_wire_bytes"] = m.wire_bytes_a
    t["wire_ratio"] = m.wire_bytes_a / m.wire_bytes_p
    t["powersgd_rounds"] = m.rounds_p
    t["acpsgd_rounds"] = m.rounds_a
    return t.reset_index(drop=True)


def micro_phases(df: pd.DataFrame) -> pd.DataFrame:
    """One tensor through MPI: compress / comm / decompress / total per method (ms)."""
    _require(df, "no micro rows")
    t = df[["method", "rows", "cols", "world_size", "compress_s", "comm_s", "decompress_s", "total_s",
            "wire_bytes", "ratio", "check"]].copy()
    for c in ["compress_s", "comm_s", "decompress_s", "total_s"]:
        t[c.replace("_s", "_ms")] = _ms(t.pop(c))
    return t.reset_index(drop=True)


def e2e_overview(g: pd.DataFrame) -> pd.DataFrame:
    """One model and world size: iteration ms per method x fusion/pipelining (own
    collective), and speedup over ssgd with the same fusion and pipelining."""
    g = auto(g)
    label = g["method"].astype(str)
    for col, name, fmt in [("rank", "r", "{:g}"), ("density", "rho", "{:g}"), ("batch", "b", "{:g}"),
                           ("device", "", "{}"), ("network", "", "{}")]:
        if col in g.columns:
            vary = g.groupby("method")[col].nunique() > 1
            if vary.any():
                m = g["method"].isin(vary[vary].index)
                label = label.where(~m, label + " " + name + g[col].map(lambda v: fmt.format(v)))
    g = g.assign(label=label)
    t = g.pivot_table(index="label", columns=["fusion", "pipelining"], values="iter_s", sort=False) * 1e3
    t.columns = [f"{f}/{p} ms" for f, p in t.columns]
    if "ssgd" in t.index:
        for c in list(t.columns):
            t[c.replace(" ms", " speedup")] = t.loc["ssgd", c] / t[c]
    t.index.name = "method"
    return t.reset_index()


def e2e_phases(e2e: pd.DataFrame) -> pd.DataFrame:
    """Phase breakdown per setup and method at the method's best configuration (ms):
    compress, comm, decompress, exposed (communication not hidden), iteration."""
    _require(e2e, "no e2e rows")
    d = defaults(auto(e2e))
    keys = setup_keys(d)
    b = best(d, keys + ["method"])
    t = b[keys + ["method", "config"]].copy()
    for c in ["compress_s", "pack_s", "comm_s", "decompress_s", "exposed_s", "iter_s"]:
        if c in b.columns:
            t[c.replace("_s", "_ms")] = _ms(b[c])
    return t


def sim_accuracy(sv: pd.DataFrame) -> pd.DataFrame:
    """sim_vs_measured.csv rows: case parts, measured and simulated ms, error %, within tolerance."""
    # model/method/fusion/pipelining/collective/n/batch[/column=value...]: the tail tells
    # apart cases that share the first seven parts (e.g. a rank sweep).
    parts = sv["case"].str.split("/", n=7, expand=True)
    t = pd.DataFrame({
        "run": sv["run"],
        "model": parts[0],
        "method": sv["method"],
        "fusion": parts[2],
        "pipelining": parts[3].str.replace("pipelining=", "", regex=False),
        "ranks": sv["world_size"],
        "measured ms": sv["measured_iter_s"] * 1e3,
        "simulated ms": sv["simulated_iter_s"] * 1e3,
        "error %": sv["rel_err"] * 100,
        "within": ["yes" if abs(e) <= tol else "no" for e, tol in zip(sv["rel_err"], sv["tolerance"])],
        "role": sv["role"],
    })
    if 7 in parts.columns and parts[7].notna().any():
        t.insert(4, "variant", parts[7].fillna(""))
    return t.sort_values(["ranks", "method", "pipelining"]).reset_index(drop=True)
