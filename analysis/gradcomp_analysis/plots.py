"""PNG plots; each function writes files into OUT_DIR and returns their names."""

import math
import numbers
import os
import textwrap

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

DPI = 110


def _save(fig, out_dir, fname):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, fname), dpi=DPI)
    plt.close(fig)
    return fname


LINE_STYLES = ["-", "--", ":", "-."]
# Setup columns a sweep plot's title names when every line of a panel shares them.
TITLE_COLUMNS = ("model", "world_size", "network", "batch", "device")


def _fixed_label(col: str, v) -> str:
    """A value every line of a panel shares, for its title: `4 ranks`, `batch=32`, `resnet50`."""
    if col == "world_size":
        try:
            return _ranks(int(v))
        except (TypeError, ValueError):
            return f"{v} ranks"
    return f"{col}={v}" if col in ("batch", "density", "rank") else str(v)


def _ranks(n) -> str:
    return f"{n} rank" if str(n) == "1" else f"{n} ranks"


def distinct_colors(n: int) -> list:
    """N colours, all different: tab10 up to 10, else tab20's (its pairs told apart by
    shade), else evenly spaced hues."""
    if n <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(n)]
    if n <= 20:
        order = list(range(0, 20, 2)) + list(range(1, 20, 2))  # the 10 dark shades first
        return [plt.get_cmap("tab20")(order[i]) for i in range(n)]
    return [plt.get_cmap("hsv")(i / n) for i in range(n)]


def _label(keys, k):
    k = k if isinstance(k, tuple) else (k,)
    return ", ".join(f"{c}={v}" if c in ("world_size", "batch", "density", "rank") else str(v)
                     for c, v in zip(keys, k) if str(v) != "")


def micro_comm(df: pd.DataFrame, out_dir: str) -> list:
    """Latency and bus bandwidth vs message size per collective, one figure per world size,
    with each point's 95% interval (`ci95_s`, the half-width of the mean) as error bars: on
    the time `median +- ci95_s` (stopping at 0), on the bandwidth the same interval turned
    over, `bw m / (m + ci)` .. `bw m / (m - ci)` (no upper bar where ci >= m)."""
    files = []
    plain = df[df["collective"] != "iallreduce-overlap"]
    has_ci = "ci95_s" in plain.columns
    for n, g in plain.groupby("world_size"):
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        for c, gc in g.groupby("collective"):
            cols = ["median_s", "busbw_gbps"] + (["ci95_s"] if has_ci else [])
            gc = gc.groupby("bytes")[cols].median().reset_index()
            m = gc["median_s"].to_numpy(dtype=float)
            bw = gc["busbw_gbps"].to_numpy(dtype=float)
            t_err = bw_err = None
            if has_ci and gc["ci95_s"].notna().any():
                ci = np.nan_to_num(gc["ci95_s"].to_numpy(dtype=float))
                t_err = [np.minimum(ci, m) * 1e6, ci * 1e6]
                with np.errstate(divide="ignore", invalid="ignore"):
                    bw_hi = np.where(ci < m, bw * m / (m - ci) - bw, np.nan)
                bw_err = [bw - bw * m / (m + ci), bw_hi]
            a1.errorbar(gc["bytes"], m * 1e6, yerr=t_err, marker="o", ms=3, capsize=2, label=c)
            a2.errorbar(gc["bytes"], bw, yerr=bw_err, marker="o", ms=3, capsize=2, label=c)
        for a, yl in [(a1, "median time (us)"), (a2, "bus bandwidth (GB/s)")]:
            a.set_xscale("log", base=2)
            a.set_xlabel("message size per rank (bytes)")
            a.set_ylabel(yl)
            a.grid(True, alpha=0.3)
        a1.set_yscale("log")
        a1.legend()
        fig.suptitle(f"Collectives, {_ranks(n)}" + (" (error bars: 95% interval of the mean)" if has_ci else ""))
        files.append(_save(fig, out_dir, f"micro_comm_np{n}.png"))
    return files


def micro_compress(t: pd.DataFrame, out_dir: str) -> list:
    """Compression GB/s (fp32 input) per method and shape, with the memory read bandwidth line."""
    fig, ax = plt.subplots(figsize=(13, 4))
    shape = t["rows"].astype("Int64").astype(str) + "x" + t["cols"].astype("Int64").astype(str)
    if "model" in t.columns:  # a model row: every layer of the model per step
        shape = shape.where(t["model"].isna() | (t["model"] == ""), t["model"].astype(str) + " (layers)")
    t = t.assign(shape=shape)
    p = t.pivot_table(index="method", columns="shape", values="input_gbps", sort=False)
    p.plot.bar(ax=ax)
    mem = t["mem_read_gbps"].max()
    n = int(t["world_size"].max()) if "world_size" in t.columns and t["world_size"].notna().any() else 1
    ax.axhline(mem, color="k", ls="--", lw=1,
               label=f"memory read bandwidth of one rank alone\n(the probe, others idle): {mem:.1f} GB/s")
    ax.set_ylabel("GB/s of fp32 input per rank\n(compress + feedback)")
    ax.set_title(f"Compression throughput per rank, {_ranks(n)} compressing at once, vs one rank's memory bandwidth")
    ax.set_ylim(bottom=0)
    # Beside the data, not over it: the small shapes' (1x1000) bars sit where "best" puts it.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return [_save(fig, out_dir, "micro_compress_gbps.png")]


def micro_phases(t: pd.DataFrame, out_dir: str) -> list:
    """Stacked compress / comm / decompress bars of the largest micro tensor, at the largest
    world size it was measured at: one shape (of shapes of one size, the first in the rows),
    the one the title names."""
    fig, ax = plt.subplots(figsize=(10, 4))
    numel = t["rows"] * t["cols"]
    big = t[numel == numel.max()]
    big = big[big["world_size"] == big["world_size"].max()]
    r = big.iloc[0]
    big = big[(big["rows"] == r["rows"]) & (big["cols"] == r["cols"])]
    big.groupby("method", sort=False)[["compress_ms", "comm_ms", "decompress_ms"]].median().plot.bar(
        stacked=True, ax=ax)
    ax.set_ylabel("ms per step (median, max over ranks)")
    ax.set_title(f"Phase breakdown, {int(r['rows'])}x{int(r['cols'])} tensor, {_ranks(int(r['world_size']))}")
    return [_save(fig, out_dir, "micro_phases.png")]


def e2e_phases(t: pd.DataFrame, out_dir: str) -> list:
    """Per model and world size: compress / comm / decompress / exposed bars per method."""
    files = []
    for (model, n), g in t.groupby(["model", "world_size"]):
        fig, ax = plt.subplots(figsize=(10, 4))
        cols = [c for c in ["compress_ms", "comm_ms", "decompress_ms", "exposed_ms"] if c in g.columns]
        g.groupby("method", sort=False)[cols].median().plot.bar(ax=ax)
        ax.set_ylabel("ms per iteration (best configuration)")
        # exposed_s (src/engine/mod.rs): from the end of backward to the end of the iteration,
        # so it holds what was not hidden of compression, decompression and waits too, and can
        # exceed comm.
        ax.set_title(f"{model}, {_ranks(n)}: phase times\n(exposed = end of backward to end of iteration: "
                     f"the communication, compression and waits not hidden behind backward)", fontsize=10)
        files.append(_save(fig, out_dir, f"e2e_{model}_np{n}_phases.png"))
    return files


def _panels(t: pd.DataFrame, panel):
    """[(title, rows)]: one panel per value of the PANEL column (own y axis: models differ
    by orders of magnitude, ResNet-20 in ms, ResNet-50 in hundreds), or one for all."""
    if panel and panel in t.columns and t[panel].nunique() > 1:
        return [(f"{v}", g) for v, g in t.groupby(panel, sort=False)]
    return [("", t)]


def _auto_logy(ax, vals: pd.DataFrame, span: float = 30.0):
    """A log y axis where the values of one panel span more than SPAN x (a linear axis
    would flatten the small ones to the floor)."""
    v = pd.to_numeric(vals.stack(), errors="coerce")
    v = v[(v > 0) & v.map(math.isfinite)]
    if len(v) and v.max() / v.min() > span:
        ax.set_yscale("log")


def _grid(n: int, w: float, h: float):
    fig, axes = plt.subplots(1, n, figsize=(w * n, h), squeeze=False)
    return fig, list(axes[0])


def bars(t: pd.DataFrame, index: list, values: list, fname: str, out_dir: str, title: str, ylabel: str,
         logy: bool = False, panel: str | None = "model") -> list:
    """Grouped bars: one group per row (labelled by INDEX columns), one bar per VALUES
    column; one panel per value of PANEL (each with its own y axis)."""
    values = [v for v in values if v in t.columns]
    if t.empty or not values:
        return []
    panels = _panels(t, panel)
    n_max = max(len(g) for _, g in panels)
    fig, axes = _grid(len(panels), max(4.5, 0.6 * n_max * max(1, len(values)) ** 0.5 + 2.5), 4)
    for ax, (ptitle, g) in zip(axes, panels):
        idx = [c for c in index if c in g.columns and not (len(panels) > 1 and c == panel)]
        if not idx:  # the panel column was the only index column: its value labels the group
            idx = [c for c in index if c in g.columns]
        p = g.set_index(idx)[values].astype(float)
        p.index = [_label(list(p.index.names), k) for k in p.index]
        errs = [f"{v} ±" for v in values]
        yerr = None
        if all(e in g.columns for e in errs):
            hi = g[errs].astype(float).fillna(0).to_numpy().T  # (columns, rows)
            lo = np.minimum(hi, np.nan_to_num(p.to_numpy().T))  # a bar's interval stops at 0
            yerr = np.stack([lo, hi], axis=1)  # (columns, 2, rows): asymmetric
        p.plot.bar(ax=ax, logy=logy, yerr=yerr, capsize=2)
        if not logy:
            _auto_logy(ax, p)
            if ax.get_yscale() == "linear":
                ax.set_ylim(bottom=0)
        ax.set_ylabel(ylabel + (" (log scale)" if ax.get_yscale() == "log" and not logy else ""))
        ax.set_title(f"{title}: {ptitle}" if ptitle else title)
        ax.legend(fontsize=8)
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right")  # each label ends under its group
    return [_save(fig, out_dir, fname)]


def lines(t: pd.DataFrame, x: str, values: list, groups: list, fname: str, out_dir: str, title: str,
          xlabel: str, ylabel: str, logx: bool = False, xcat: str | None = None,
          panel: str | None = "model") -> list:
    """A line per (group, value column) against X; one panel per value of PANEL.

    XCAT: a column of tick labels; X is then placed by rank on an evenly spaced axis with
    those labels (a fusion sweep: none, 256KiB, 25MiB, single; `single` is X = inf, which
    a numeric axis cannot show and a symlog axis labels as "1.05x10^0")."""
    values = [v for v in values if v in t.columns]
    if t.empty or not values:
        return []
    panels = _panels(t, panel)
    fig, axes = _grid(len(panels), 8.5 if len(panels) > 1 else 11, 4.5)
    for ax, (ptitle, tp) in zip(axes, panels):
        gcols = [g for g in groups if g in tp.columns and tp[g].nunique() > 1 and g != panel]
        # What every line of the panel shares (model, world size, ...) goes into its title:
        # a value every row holds (a row without one, NaN, does not share it).
        fixed = [_fixed_label(g, tp[g].iloc[0]) for g in groups
                 if g in TITLE_COLUMNS and g in tp.columns and (g != panel or not ptitle)
                 and tp[g].nunique(dropna=False) == 1 and str(tp[g].iloc[0]) not in ("", "nan")]
        if fixed:
            ptitle = ", ".join([ptitle] + fixed if ptitle else fixed)
        grouped = list(tp.groupby(gcols, sort=False)) if gcols else [((), tp)]
        # Every line its own colour; each value column its own line style.
        colors = iter(distinct_colors(len(grouped) * len(values)))
        styles = {v: LINE_STYLES[i % len(LINE_STYLES)] for i, v in enumerate(values)}
        if xcat:
            ticks = tp[[x, xcat]].drop_duplicates().sort_values(x)
            pos = {v: i for i, v in enumerate(ticks[x])}
        for k, g in grouped:
            if xcat:
                g = g.sort_values(x)
                xs = g[x].map(pos)
            else:
                g = g[g[x].map(lambda v: isinstance(v, numbers.Real) and math.isfinite(v))].sort_values(x)
                xs = g[x]
            for v in values:
                lab = v if not gcols else f"{_label(gcols, k)}: {v}"
                err = None
                if f"{v} ±" in g.columns and g[f"{v} ±"].notna().any():
                    hi = g[f"{v} ±"].astype(float).fillna(0).to_numpy()
                    err = [np.minimum(hi, np.nan_to_num(g[v].astype(float).to_numpy())), hi]  # stop at 0
                ax.errorbar(xs, g[v], yerr=err, marker="o", ms=3, capsize=2, label=lab, color=next(colors),
                            ls=styles[v])
        if xcat:
            ax.set_xticks(range(len(ticks)))
            ax.set_xticklabels([str(v) for v in ticks[xcat]], rotation=30)
        elif logx:
            xv = sorted(float(v) for v in tp[x].unique() if isinstance(v, numbers.Real) and math.isfinite(v))
            ax.set_xscale("symlog" if xv and xv[0] <= 0 else "log")
            # The values measured as ticks, in plain numbers (not "10^0" with unlabelled minors).
            ax.set_xticks(xv)
            ax.set_xticklabels([f"{v:g}" for v in xv])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        else:
            xv = sorted(float(v) for v in tp[x].unique() if isinstance(v, numbers.Real) and math.isfinite(v))
            if xv and all(v.is_integer() for v in xv):
                # Integer data (workers): ticks at the values measured, never 2.25 or 2.5.
                ax.set_xticks(xv)
                ax.set_xticklabels([f"{int(v)}" for v in xv])
                ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        # The axis fits the points drawn: without XCAT, rows whose x is not a finite number are not.
        drawn = tp if xcat else tp[tp[x].map(lambda v: isinstance(v, numbers.Real) and math.isfinite(v))]
        _auto_logy(ax, drawn[values])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel + (" (log scale)" if ax.get_yscale() == "log" else ""))
        ax.set_title(f"{title}: {ptitle}" if ptitle else title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside the data
    return [_save(fig, out_dir, fname)]


def paired_rows(t: pd.DataFrame, values: list):
    """Where VALUES hold a quantity and its published counterpart (`ratio`, `ratio
    (published)`): (the mask of rows holding both, [(row position, the one it holds)] for
    the rows holding one only). (None, []) when VALUES hold no such pair."""
    pairs = [(v, f"{v} (published)") for v in values if f"{v} (published)" in values]
    if not pairs:
        return None, []
    ours, theirs = pairs[0]
    a, b = t[ours].notna().to_numpy(), t[theirs].notna().to_numpy()
    alone = [(i, ours if a[i] else theirs) for i in range(len(t)) if a[i] != b[i]]
    return a & b, alone


def points(t: pd.DataFrame, index: list, values: list, fname: str, out_dir: str, title: str, ylabel: str,
           logy: bool = False) -> list:
    """One point per row (labelled by INDEX columns) and VALUES column: for quantities a
    bar's length would misstate (a log axis, or an axis not starting at zero). Where VALUES
    are a quantity and its published counterpart (`paired_rows`), only rows holding both
    are drawn (a point without its pair compares nothing) and a note under the axes names
    the rows without a pair (all of them, and that nothing pairs, when none has both)."""
    values = [v for v in values if v in t.columns]
    if t.empty or not values:
        return []
    idx = [c for c in index if c in t.columns]
    both, alone = paired_rows(t, values)
    note = ""
    if both is not None:
        names = [f"{_label(idx, tuple(t[idx].iloc[i]))} ({v} only)" for i, v in alone]
        pair = [v for v in values if f"{v} (published)" in values][0]
        if not both.any():
            note = f"Nothing to compare: no row has both {pair} and {pair} (published); " + "; ".join(names)
        elif names:
            note = "Not drawn, without a pair: " + "; ".join(names)
        t = t[both]
    width = max(7.0 if note else 5.0, 0.7 * len(t) + 3)
    fig, ax = plt.subplots(figsize=(width, 4 + (0.5 if note else 0)))
    labels = [_label(idx, tuple(r)) for r in t[idx].itertuples(index=False)]
    xs = np.arange(len(t))
    for v, color, marker in zip(values, distinct_colors(len(values)), ["o", "s", "^", "D", "v", "P"] * 4):
        ax.plot(xs, t[v].astype(float).to_numpy(), ls="none", marker=marker, ms=7, color=color, label=v)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=30, ha="right")
    if logy:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_ylabel(ylabel + (" (log scale)" if logy else ""))
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if note:  # under the axes, where tight_layout keeps room for it
        ax.set_xlabel("\n".join(textwrap.wrap(note, int(width * 14))), fontsize=7)
    return [_save(fig, out_dir, fname)]


def sim_accuracy(t: pd.DataFrame, out_dir: str, tol: float) -> list:
    """Simulated vs measured iteration time with the tolerance band, one colour per world size."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for n, g in t.groupby("ranks"):
        ax.scatter(g["measured ms"], g["simulated ms"], label=_ranks(n), s=18)
    hi = max(t["measured ms"].max(), t["simulated ms"].max()) * 1.1
    lo = min(t["measured ms"].min(), t["simulated ms"].min()) * 0.9
    xs = [lo, hi]
    ax.plot(xs, xs, color="black", lw=0.8)
    ax.fill_between(xs, [x * (1 - tol) for x in xs], [x * (1 + tol) for x in xs], color="grey", alpha=0.2,
                    label=f"±{tol * 100:g}%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured iteration (ms)")
    ax.set_ylabel("simulated iteration (ms)")
    ax.set_title("Simulator accuracy")
    ax.legend()
    return [_save(fig, out_dir, "sim_accuracy.png")]


def converge_curves(df: pd.DataFrame, out_dir: str) -> list:
    """Training loss per step (rolling mean over 10 steps) and held-out loss per method, one
    figure per world size (and run); the y axis stops at 1.5x the first step's loss."""
    files = []
    for (run, ws), g in df.groupby(["run", "world_size"], sort=True):
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for i, (m, gm) in enumerate(g.groupby("method", sort=False)):
            gm = gm.sort_values("step")
            color = plt.get_cmap("tab20")(i % 20)
            ax.plot(gm["step"], gm["train_loss"].rolling(10, min_periods=1).mean(), color=color, lw=1, label=m)
            ev = gm.dropna(subset=["eval_loss"])
            ax.plot(ev["step"], ev["eval_loss"], "o--", color=color, ms=3, lw=0.8)
        # Diverged cases leave the axis at the top (their rows say `diverged`).
        first = g[g["step"] == 0]["train_loss"]
        top = 1.5 * float(first.median()) if len(first) and np.isfinite(first.median()) else 5.0
        ax.set_ylim(0, top)
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (line: train, 10-step mean; dots: held-out)")
        ax.set_title(f"gradcomp converge, {_ranks(ws)}")
        ax.legend(fontsize=7, ncol=2)
        safe = "".join(ch if ch.isalnum() else "_" for ch in str(run))
        files.append(_save(fig, out_dir, f"converge_np{ws}_{safe}.png"))
    return files


def simulated_best(t: pd.DataFrame, out_dir: str) -> list:
    """`gradcomp simulate`: each method's speedup over S-SGD at its best configuration, one
    panel per model and network, a line per method against the world size (an integer
    axis at the simulated sizes, log-scaled when they span more than 8x)."""
    if t.empty or t["vs ssgd"].isna().all():
        return []
    panel_keys = [k for k in ("model", "network") if k in t.columns]
    groups = list(t.groupby(panel_keys, sort=False))
    fig, axes = _grid(len(groups), 5.5, 4)
    for ax, (k, g) in zip(axes, groups):
        k = k if isinstance(k, tuple) else (k,)
        methods = list(g.groupby("method", sort=False))
        for (m, gm), color in zip(methods, distinct_colors(len(methods))):
            gm = gm.sort_values("ranks")
            ax.plot(gm["ranks"], gm["vs ssgd"], marker="o", ms=4, color=color, label=m)
        xs = sorted(int(v) for v in g["ranks"].unique())
        if xs and xs[-1] / max(xs[0], 1) > 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(v) for v in xs])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.axhline(1.0, color="k", lw=0.8, ls=":")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("world size (simulated ranks)")
        ax.set_ylabel("speedup over S-SGD (best configurations)")
        ax.set_title("Simulated: " + ", ".join(str(v) for v in k if str(v) != ""))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return [_save(fig, out_dir, "simulated_best.png")]
