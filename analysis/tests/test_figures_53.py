"""Issue 53 item 7: the figures' data, read from the matplotlib figures (no PNG inspection):
micro-comm's intervals as error bars, micro-compress's legend off the bars, the DGC figure
pairs only models with both ratios, the phases title defines `exposed` as the engine
computes it, and the overlap table says why it reads 0%."""

import matplotlib.container
import numpy as np
import pandas as pd
import pytest

from gradcomp_analysis import plots
from gradcomp_analysis import tables as T


@pytest.fixture
def figs(monkeypatch):
    out = {}

    def save(fig, out_dir, fname):
        fig.tight_layout()  # as plots._save does before saving
        fig.canvas.draw()
        out[fname] = fig
        return fname

    monkeypatch.setattr(plots, "_save", save)
    yield out
    plots.plt.close("all")


def micro_comm_rows(n=4):
    rows = []
    for c, base in (("allreduce", 10e-6), ("allgather", 20e-6)):
        for b in (1024, 65536, 1 << 20):
            med = base * b / 1024
            rows.append(dict(collective=c, world_size=n, bytes=b, median_s=med, ci95_s=med * 0.1,
                             busbw_gbps=b / med / 1e9))
    return pd.DataFrame(rows)


def test_micro_comm_draws_the_95_intervals_as_error_bars(tmp_path, figs):
    df = micro_comm_rows()
    plots.micro_comm(df, str(tmp_path))
    lat, bw = figs["micro_comm_np4.png"].axes
    for ax in (lat, bw):
        bars = [c for c in ax.containers if isinstance(c, matplotlib.container.ErrorbarContainer)]
        assert sorted(c.get_label() for c in bars) == ["allgather", "allreduce"]
    ar = next(c for c in lat.containers if c.get_label() == "allreduce")
    # The bar's segments: median +- ci95_s (us), at each size.
    segs = ar.lines[2][0].get_segments()
    want = df[df["collective"] == "allreduce"].sort_values("bytes")
    lo = [s[0][1] for s in segs]
    hi = [s[1][1] for s in segs]
    assert lo == pytest.approx(list((want["median_s"] - want["ci95_s"]) * 1e6))
    assert hi == pytest.approx(list((want["median_s"] + want["ci95_s"]) * 1e6))
    # Bandwidth's interval is the time's, turned over: bw * m / (m + ci) .. bw * m / (m - ci).
    bwar = next(c for c in bw.containers if c.get_label() == "allreduce")
    segs = bwar.lines[2][0].get_segments()
    bwv = want["busbw_gbps"].to_numpy()
    assert [s[0][1] for s in segs] == pytest.approx(list(bwv / 1.1))
    assert [s[1][1] for s in segs] == pytest.approx(list(bwv / 0.9))
    assert "95%" in figs["micro_comm_np4.png"]._suptitle.get_text()


def test_micro_comm_without_intervals_still_plots(tmp_path, figs):
    plots.micro_comm(micro_comm_rows().drop(columns="ci95_s"), str(tmp_path))
    assert len(figs["micro_comm_np4.png"].axes[0].get_lines()) >= 2


def test_micro_compress_legend_lies_off_every_bar(tmp_path, figs):
    # The laptop shape: 1x1000 next to large shapes; the legend sat on the small bars.
    # laptop.toml: nine methods on 512x4608, 2048x1000, 1000 (1x1000) and ResNet-20's layers.
    methods = ["ssgd", "signsgd", "topk", "dgc", "powersgd", "acpsgd", "marsit", "sketch", "qsgd"]
    rng = np.random.default_rng(1)
    rows = []
    for shape, (r, c), scale in (("a", (512, 4608), 6.0), ("b", (2048, 1000), 6.0), ("c", (1, 1000), 9.0),
                                 ("d", (None, None), 3.0)):
        for m in methods:
            rows.append({"method": m, "rows": r, "cols": c, "model": "resnet20" if r is None else "",
                         "input_gbps": scale * rng.uniform(0.8, 1.25), "mem_read_gbps": 12.0, "world_size": 4})
    t = pd.DataFrame(rows)
    plots.micro_compress(t, str(tmp_path))
    fig = figs["micro_compress_gbps.png"]
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    rects = [p for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle) and p.get_height() > 0]
    assert len(rects) == 36
    for r in rects:
        assert not legend.overlaps(r.get_window_extent())
    assert "1x1000" in [x.get_text() for x in ax.get_legend().get_texts()]
    # The legend stays inside the saved figure.
    assert legend.x1 <= fig.bbox.x1 + 1 and legend.y0 >= fig.bbox.y0 - 1


def dgc_table(ours, published):
    rows = [{"model (paper)": "", "model": m, "ratio": r, "ratio (published)": None} for m, r in ours]
    rows += [{"model (paper)": p, "model": m, "ratio": None, "ratio (published)": r} for p, m, r in published]
    return pd.DataFrame(rows)


def test_dgc_figure_plots_only_models_with_both_ratios_and_names_the_unpaired(tmp_path, figs):
    t = pd.DataFrame([
        {"model (paper)": "ResNet-50", "model": "resnet50", "ratio": 250.0, "ratio (published)": 277.0},
        {"model (paper)": "AlexNet", "model": "alexnet-caffe", "ratio": None, "ratio (published)": 597.0},
        {"model (paper)": "", "model": "resnet20", "ratio": 100.0, "ratio (published)": None},
    ])
    plots.points(t, ["model (paper)", "model"], ["ratio", "ratio (published)"], "dgc_ratio.png", str(tmp_path),
                 "DGC compression ratio", "dense / message", logy=True)
    fig = figs["dgc_ratio.png"]
    ax = fig.axes[0]
    series = {ln.get_label(): [y for y in ln.get_ydata()] for ln in ax.get_lines()}
    assert series == {"ratio": [250.0], "ratio (published)": [277.0]}
    assert [x.get_text() for x in ax.get_xticklabels()] == ["ResNet-50, resnet50"]
    note = " ".join(ax.get_xlabel().split())
    assert "without a pair" in note and "resnet20 (ratio only)" in note
    assert "AlexNet, alexnet-caffe (ratio (published) only)" in note


def test_dgc_figure_with_nothing_paired_says_so_instead_of_plotting_unpaired_points(tmp_path, figs):
    # The laptop run: ours for resnet20 only, published for the paper's models only.
    t = dgc_table([("resnet20", 100.0)], [("ResNet-50", "resnet50", 277.0), ("AlexNet", "alexnet-caffe", 597.0)])
    plots.points(t, ["model (paper)", "model"], ["ratio", "ratio (published)"], "dgc_ratio.png", str(tmp_path),
                 "DGC compression ratio", "dense / message", logy=True)
    fig = figs["dgc_ratio.png"]
    ax = fig.axes[0]
    assert not [y for ln in ax.get_lines() for y in ln.get_ydata() if y == y]
    note = " ".join(ax.get_xlabel().split())
    assert "no row has both ratio and ratio (published)" in note
    assert "resnet20 (ratio only)" in note and "ResNet-50, resnet50 (ratio (published) only)" in note


def test_points_without_a_published_pair_plot_every_row():
    t = pd.DataFrame({"m": ["a", "b"], "x": [1.0, 2.0], "y": [3.0, None]})
    assert plots.paired_rows(t, ["x", "y"]) == (None, [])


def test_phases_title_defines_exposed_as_the_engine_computes_it(tmp_path, figs):
    # src/engine/mod.rs: exposed_s = t_end - bwd_end (end of backward to end of the iteration),
    # so it holds compression, decompression and waits too: qsgd's exposed > its comm.
    t = pd.DataFrame({"model": ["resnet20"] * 2, "world_size": [4, 4], "method": ["ssgd", "qsgd"],
                      "compress_ms": [0.0, 1.5], "comm_ms": [3.0, 4.1], "decompress_ms": [0.0, 1.2],
                      "exposed_ms": [2.0, 6.9]})
    plots.e2e_phases(t, str(tmp_path))
    title = figs["e2e_resnet20_np4_phases.png"].axes[0].get_title()
    assert "communication not hidden" not in title
    assert "exposed = end of backward to end of iteration" in title
    assert "compression" in title and "waits" in title


def test_overlap_table_at_zero_everywhere_says_why():
    rows = [dict(collective="iallreduce-overlap", world_size=4, bytes=b, t_pure_s=1e-4, t_cpu_s=1e-4,
                 t_overall_s=2e-4, overlap_osu_pct=0.0, overlap_imb_pct=0.0, median_s=2e-4, busbw_gbps=1.0)
            for b in (1024, 65536)]
    t = T.micro_comm_tables(pd.DataFrame(rows))["overlap_np4"]
    notes = " ".join(t.attrs.get("notes", []))
    assert "0% at every size" in notes and "MPI_Wait" in notes and "cores" in notes
    rows[1]["overlap_osu_pct"] = 60.0
    t = T.micro_comm_tables(pd.DataFrame(rows))["overlap_np4"]
    assert not t.attrs.get("notes")
