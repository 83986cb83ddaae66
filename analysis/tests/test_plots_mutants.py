"""The figures' data and structure (plots.py), at the places mutation testing found untested
(issue 49; docs/mutation.md): each line's x/y values, bar heights and error bars, which
series exist and in what order, axis scales and limits, panels, tick labels, the files
written. The figures are read from matplotlib (the `figs` fixture keeps each figure instead
of saving it); every expectation is computed by hand from the input frame, never by the code
under test. The words of axis labels and titles are pinned where they carry a unit, a count
or a tolerance."""

import math
import os
import struct
import textwrap
import warnings

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.container import BarContainer, ErrorbarContainer

from gradcomp_analysis import plots

NAN = math.nan
INF = math.inf


@pytest.fixture
def figs(monkeypatch, tmp_path):
    """{file name: figure} of what the plots would save; each must be saved into tmp_path."""
    out = {}

    def save(fig, out_dir, fname):
        assert out_dir == str(tmp_path)
        out[fname] = fig
        return fname

    monkeypatch.setattr(plots, "_save", save)
    yield out
    for f in out.values():
        plt.close(f)


@pytest.fixture
def strict():
    """A division the code guards (np.errstate) must not warn: warnings are errors here."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def rgba(c):
    return tuple(round(float(x), 6) for x in matplotlib.colors.to_rgba(c))


def errorbars(ax):
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer) and c.get_label() != "_nolegend_"]


def bar_containers(ax):
    return [c for c in ax.containers if isinstance(c, BarContainer)]


def segments(ec):
    """An ErrorbarContainer's vertical bars: [[(x, y), ...] per point] ([] without bars)."""
    if not ec.lines[2]:
        return []
    return [[tuple(float(v) for v in p) for p in s] for s in ec.lines[2][0].get_segments()]


def same(a, b):
    """Nested lists of numbers equal to 1e-9 relative, NaN equal to NaN (lists may be ragged)."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b)))
    return bool(np.isclose(float(a), float(b), rtol=1e-9, atol=1e-12, equal_nan=True))


def xy(line):
    return [float(v) for v in line.get_xdata()], [float(v) for v in line.get_ydata()]


def texts(labels):
    return [t.get_text() for t in labels]


def legend_texts(ax):
    return texts(ax.get_legend().get_texts())


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


# ---- helpers -------------------------------------------------------------------------------

def test_save_writes_the_png_at_110_dpi_closes_the_figure_and_returns_its_name(tmp_path):
    fig = plt.figure(figsize=(2.0, 1.0))
    other = plt.figure()  # the current figure: not the one saved
    assert plots._save(fig, str(tmp_path), "a.png") == "a.png"
    assert os.listdir(tmp_path) == ["a.png"]
    assert png_size(tmp_path / "a.png") == (220, 110)  # 2 x 1 inches at DPI = 110
    assert not plt.fignum_exists(fig.number) and plt.fignum_exists(other.number)
    plt.close(other)


def test_ranks_and_fixed_label_by_hand():
    assert plots._ranks(1) == "1 rank"
    assert plots._ranks("1") == "1 rank"
    assert plots._ranks(2) == "2 ranks"
    assert plots._ranks(16) == "16 ranks"
    assert plots._fixed_label("world_size", 4) == "4 ranks"
    assert plots._fixed_label("world_size", 4.0) == "4 ranks"
    assert plots._fixed_label("world_size", 1) == "1 rank"
    assert plots._fixed_label("world_size", "many") == "many ranks"
    assert plots._fixed_label("world_size", None) == "None ranks"
    assert plots._fixed_label("batch", 32) == "batch=32"
    assert plots._fixed_label("density", 0.01) == "density=0.01"
    assert plots._fixed_label("rank", 4) == "rank=4"
    assert plots._fixed_label("model", "resnet50") == "resnet50"
    assert plots._fixed_label("network", "10G") == "10G"


def test_label_names_numeric_keys_and_skips_empty_values():
    keys = ["model", "world_size", "batch", "density", "rank", "network", "method"]
    k = ("resnet50", 4, 32, 0.01, 2, "", "topk")
    assert plots._label(keys, k) == "resnet50, world_size=4, batch=32, density=0.01, rank=2, topk"
    assert plots._label(["model"], "vgg16") == "vgg16"  # a key that is not a tuple
    assert plots._label(["world_size"], 8) == "world_size=8"
    assert plots._label(["model", "network"], ("", "")) == ""


def test_distinct_colors_tab10_then_tab20_dark_shades_first_then_hues():
    tab10, tab20, hsv = (plt.get_cmap(n) for n in ("tab10", "tab20", "hsv"))
    assert plots.distinct_colors(0) == []
    assert [rgba(c) for c in plots.distinct_colors(10)] == [rgba(tab10(i)) for i in range(10)]
    assert [rgba(c) for c in plots.distinct_colors(3)] == [rgba(tab10(i)) for i in range(3)]
    order = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19]
    assert [rgba(c) for c in plots.distinct_colors(20)] == [rgba(tab20(i)) for i in order]
    assert [rgba(c) for c in plots.distinct_colors(11)] == [rgba(tab20(i)) for i in order[:11]]
    assert [rgba(c) for c in plots.distinct_colors(21)] == [rgba(hsv(i / 21)) for i in range(21)]
    for n in (1, 10, 11, 20, 21, 30):
        cs = plots.distinct_colors(n)
        assert len(cs) == n and len({rgba(c) for c in cs}) == n


def test_panels_one_per_value_in_the_order_of_the_rows():
    t = pd.DataFrame({"model": ["vgg16", "resnet20", "vgg16"], "v": [1, 2, 3]})
    p = plots._panels(t, "model")
    assert [title for title, _ in p] == ["vgg16", "resnet20"]
    assert [list(g["v"]) for _, g in p] == [[1, 3], [2]]
    for panel in (None, "", "network"):  # no panel column: one panel of every row, no title
        ((title, g),) = plots._panels(t, panel)
        assert title == "" and g is t
    one = t[t["model"] == "vgg16"]
    ((title, g),) = plots._panels(one, "model")
    assert title == "" and g is one


def test_auto_logy_beyond_30x_of_the_positive_finite_values():
    def scale(vals, **kw):
        fig, ax = plt.subplots()
        plots._auto_logy(ax, pd.DataFrame(vals), **kw)
        s = ax.get_yscale()
        plt.close(fig)
        return s

    assert scale({"a": [1.0, 30.0]}) == "linear"  # exactly 30x: not beyond
    assert scale({"a": [1.0, 30.1]}) == "log"
    assert scale({"a": [0.5], "b": [20.0]}) == "log"  # 40x, across columns
    assert scale({"a": [1.0, 20.0]}) == "linear"
    # Zero, negatives, infinities, NaN and text are left out: 0.5 .. 20 is 40x.
    assert scale({"a": [0.0, -1.0, 0.5, INF], "b": [20.0, NAN, "x", -INF]}) == "log"
    assert scale({"a": [0.0, 0.5, 10.0]}) == "linear"  # 0 left out: 20x
    assert scale({"a": [1.0, 5.0]}, span=4.0) == "log"
    assert scale({"a": [NAN, 0.0]}) == "linear"  # nothing to judge


def test_grid_is_one_row_of_n_axes_each_w_wide():
    fig, axes = plots._grid(3, 2.0, 1.5)
    assert len(axes) == 3 and len(fig.axes) == 3
    assert [a.get_subplotspec().colspan.start for a in axes] == [0, 1, 2]
    assert {a.get_subplotspec().rowspan.start for a in axes} == {0}
    assert list(fig.get_size_inches()) == [6.0, 1.5]
    plt.close(fig)
    fig, axes = plots._grid(1, 4.0, 3.0)
    assert len(axes) == 1 and axes[0] is fig.axes[0]
    assert list(fig.get_size_inches()) == [4.0, 3.0]
    plt.close(fig)


def test_paired_rows_by_hand():
    t = pd.DataFrame({"ratio": [1.0, 2.0, NAN, 4.0, NAN], "ratio (published)": [1.5, NAN, 3.0, 4.5, NAN],
                      "x": [1.0, 1.0, 1.0, 1.0, 1.0], "x (published)": [NAN, NAN, NAN, NAN, 1.0]})
    both, alone = plots.paired_rows(t, ["ratio", "ratio (published)", "x", "x (published)"])
    assert list(both) == [True, False, False, True, False]  # the first pair only
    assert alone == [(1, "ratio"), (2, "ratio (published)")]
    assert plots.paired_rows(t, ["ratio", "x"]) == (None, [])
    assert plots.paired_rows(t, ["ratio (published)"]) == (None, [])


# ---- micro_comm --------------------------------------------------------------------------

def comm_rows(with_ci=True):
    rows = []

    def add(n, c, b, m, bw, ci):
        r = dict(world_size=n, collective=c, bytes=b, median_s=m, busbw_gbps=bw)
        if with_ci:
            r["ci95_s"] = ci
        rows.append(r)

    add(2, "allreduce", 16384, 1e-5, 5.0, 2e-5)   # ci > m: no upper bandwidth bar
    for m, bw, ci in [(1e-6, 1.0, 1e-7), (2e-6, 2.0, 5e-7), (6e-6, 9.0, 9e-7)]:
        add(2, "allreduce", 1024, m, bw, ci)     # medians 2e-6, 2.0, 5e-7
    add(2, "allreduce", 4096, 8e-6, 0.0, 8e-6)    # ci == m, bandwidth 0
    add(2, "allgather", 2048, 4e-6, 3.0, 4e-6)    # ci == m
    add(2, "allgather", 1024, 3e-6, 1.5, NAN)
    add(2, "iallreduce-overlap", 1024, 1.0, 100.0, 0.5)
    add(4, "allreduce", 1024, 5e-6, 7.0, NAN)
    return pd.DataFrame(rows)


def test_micro_comm_every_point_and_error_bar_by_hand(tmp_path, figs, strict):
    assert plots.micro_comm(comm_rows(), str(tmp_path)) == ["micro_comm_np2.png", "micro_comm_np4.png"]
    fig = figs["micro_comm_np2.png"]
    assert len(fig.axes) == 2
    a1, a2 = fig.axes
    assert list(fig.get_size_inches()) == [11.0, 4.0]
    assert a1.get_subplotspec().colspan.start == 0 and a2.get_subplotspec().colspan.start == 1
    assert fig._suptitle.get_text() == "Collectives, 2 ranks (error bars: 95% interval of the mean)"
    for a in (a1, a2):
        assert a.get_xscale() == "log" and a.xaxis.get_transform().base == 2
        assert a.get_xlabel() == "message size per rank (bytes)"
        assert a.xaxis.get_gridlines()[0].get_visible()
    assert a1.get_yscale() == "log" and a2.get_yscale() == "linear"
    assert a1.get_ylabel() == "median time (us)" and a2.get_ylabel() == "bus bandwidth (GB/s)"
    assert legend_texts(a1) == ["allgather", "allreduce"] and a2.get_legend() is None
    g1, r1 = errorbars(a1)
    g2, r2 = errorbars(a2)
    assert [c.get_label() for c in (g1, r1, g2, r2)] == ["allgather", "allreduce"] * 2
    # Time in us: median +- ci, stopping at 0.
    assert xy(r1.lines[0]) == ([1024.0, 4096.0, 16384.0], pytest.approx([2.0, 8.0, 10.0]))
    assert same(segments(r1), [[(1024, 1.5), (1024, 2.5)], [(4096, 0), (4096, 16)], [(16384, 0), (16384, 30)]])
    assert xy(g1.lines[0]) == ([1024.0, 2048.0], pytest.approx([3.0, 4.0]))
    assert same(segments(g1), [[(1024, 3), (1024, 3)], [(2048, 0), (2048, 8)]])  # NaN ci: no bar
    # Bandwidth: bw m / (m + ci) .. bw m / (m - ci), no upper end where ci >= m.
    assert xy(r2.lines[0]) == ([1024.0, 4096.0, 16384.0], pytest.approx([2.0, 0.0, 5.0]))
    assert same(segments(r2), [[(1024, 1.6), (1024, 4 / 1.5)], [(4096, 0)], [(16384, 50 / 30)]])
    assert xy(g2.lines[0]) == ([1024.0, 2048.0], pytest.approx([1.5, 3.0]))
    assert same(segments(g2), [[(1024, 1.5), (1024, 1.5)], [(2048, 1.5)]])
    for c in (g1, r1, g2, r2):  # points with caps of 2 points each side (a cap line's marker is 2 x 2 wide)
        assert c.lines[0].get_marker() == "o" and c.lines[0].get_markersize() == 3
        assert c.lines[1] and {ln.get_markersize() for ln in c.lines[1]} == {4.0}
    fig4 = figs["micro_comm_np4.png"]
    assert fig4._suptitle.get_text() == "Collectives, 4 ranks (error bars: 95% interval of the mean)"
    (only,) = errorbars(fig4.axes[0])
    assert only.get_label() == "allreduce" and segments(only) == []  # ci NaN everywhere: no bars
    assert xy(only.lines[0]) == ([1024.0], pytest.approx([5.0]))
    assert xy(errorbars(fig4.axes[1])[0].lines[0]) == ([1024.0], [7.0])


def test_micro_comm_without_intervals_has_no_error_bars(tmp_path, figs):
    assert plots.micro_comm(comm_rows(with_ci=False), str(tmp_path)) == ["micro_comm_np2.png", "micro_comm_np4.png"]
    fig = figs["micro_comm_np2.png"]
    assert fig._suptitle.get_text() == "Collectives, 2 ranks"
    for a in fig.axes:
        assert [c.get_label() for c in errorbars(a)] == ["allgather", "allreduce"]
        assert all(segments(c) == [] for c in errorbars(a))
    assert xy(errorbars(fig.axes[0])[1].lines[0])[1] == pytest.approx([2.0, 8.0, 10.0])


# ---- micro_compress, micro_phases, e2e_phases ---------------------------------------------

def test_micro_compress_bars_per_shape_in_row_order_and_the_memory_line(tmp_path, figs):
    t = pd.DataFrame({"method": ["topk", "signsgd", "topk", "signsgd", "topk"],
                      "rows": [100, 100, 1000, 1000, 5], "cols": [1000, 1000, 10, 10, 7],
                      "model": ["", "", NAN, NAN, "resnet50"],
                      "input_gbps": [3.0, 9.0, 4.0, 8.0, 2.5], "mem_read_gbps": [12.0, 11.0, 12.04, 10.0, 9.0],
                      "world_size": [4, 4, 2, 2, 4]})
    assert plots.micro_compress(t, str(tmp_path)) == ["micro_compress_gbps.png"]
    (ax,) = figs["micro_compress_gbps.png"].axes
    assert list(figs["micro_compress_gbps.png"].get_size_inches()) == [13.0, 4.0]
    bars = bar_containers(ax)
    assert [b.get_label() for b in bars] == ["100x1000", "1000x10", "resnet50 (layers)"]
    assert texts(ax.get_xticklabels()) == ["topk", "signsgd"]
    # signsgd has no resnet50 row: pandas draws the empty cell as a bar of 0.
    assert [[p.get_height() for p in b] for b in bars] == [[3.0, 9.0], [4.0, 8.0], [2.5, 0.0]]
    (mem,) = [ln for ln in ax.get_lines() if ln.get_label().startswith("memory")]
    assert list(mem.get_ydata()) == [12.04, 12.04]
    assert (mem.get_color(), mem.get_linestyle(), mem.get_linewidth()) == ("k", "--", 1)
    assert mem.get_label() == "memory read bandwidth of one rank alone\n(the probe, others idle): 12.0 GB/s"
    assert ax.get_title() == ("Compression throughput per rank, 4 ranks compressing at once, "
                              "vs one rank's memory bandwidth")
    assert ax.get_ylabel() == "GB/s of fp32 input per rank\n(compress + feedback)"
    assert ax.get_ylim()[0] == 0
    assert legend_texts(ax)[0].startswith("memory read bandwidth")
    assert legend_texts(ax)[1:] == ["100x1000", "1000x10", "resnet50 (layers)"]


def test_micro_compress_without_a_world_size_or_model_is_one_rank(tmp_path, figs):
    t = pd.DataFrame({"method": ["qsgd"], "rows": [10], "cols": [20], "input_gbps": [1.0], "mem_read_gbps": [5.0]})
    plots.micro_compress(t, str(tmp_path))
    (ax,) = figs["micro_compress_gbps.png"].axes
    assert [b.get_label() for b in bar_containers(ax)] == ["10x20"]
    assert "Compression throughput per rank, 1 rank compressing at once" in ax.get_title()
    plots.micro_compress(t.assign(world_size=[NAN]), str(tmp_path))
    (ax,) = figs["micro_compress_gbps.png"].axes
    assert "per rank, 1 rank compressing" in ax.get_title()


def test_micro_phases_stacks_the_medians_of_the_largest_tensor_at_the_largest_world(tmp_path, figs):
    def r(method, rows, cols, n, c, m, d):
        return dict(method=method, rows=rows, cols=cols, world_size=n, compress_ms=c, comm_ms=m, decompress_ms=d)
    t = pd.DataFrame([r("topk", 100, 10, 4, 50.0, 50.0, 50.0),        # smaller (but taller) tensor: left out
                      r("topk", 200, 100, 2, 40.0, 40.0, 40.0),        # smaller world: left out
                      r("topk", 200, 100, 4, 1.0, 2.0, 3.0),
                      r("topk", 200, 100, 4, 2.0, 4.0, 6.0),
                      r("topk", 200, 100, 4, 9.0, 9.0, 9.0),           # medians 2, 4, 6
                      r("dgc", 200, 100, 4, 0.5, 1.5, 0.25)])
    assert plots.micro_phases(t, str(tmp_path)) == ["micro_phases.png"]
    (ax,) = figs["micro_phases.png"].axes
    assert list(figs["micro_phases.png"].get_size_inches()) == [10.0, 4.0]
    assert texts(ax.get_xticklabels()) == ["topk", "dgc"]
    bars = bar_containers(ax)
    assert [b.get_label() for b in bars] == ["compress_ms", "comm_ms", "decompress_ms"]
    assert [[(p.get_y(), p.get_height()) for p in b] for b in bars] == [
        [(0.0, 2.0), (0.0, 0.5)], [(2.0, 4.0), (0.5, 1.5)], [(6.0, 6.0), (2.0, 0.25)]]
    assert ax.get_title() == "Phase breakdown, 200x100 tensor, 4 ranks"
    assert ax.get_ylabel() == "ms per step (median, max over ranks)"
    # One row of the largest tensor: its shape in the title.
    plots.micro_phases(t.iloc[[0, 5]].assign(rows=[2, 3], cols=[5, 4]), str(tmp_path))
    (ax,) = figs["micro_phases.png"].axes
    assert ax.get_title() == "Phase breakdown, 3x4 tensor, 4 ranks"
    assert [[p.get_height() for p in b] for b in bar_containers(ax)] == [[0.5], [1.5], [0.25]]


def test_micro_phases_plots_one_shape_and_titles_the_world_size_it_plots(tmp_path, figs):
    def r(method, rows, cols, n, c):
        return dict(method=method, rows=rows, cols=cols, world_size=n, compress_ms=c, comm_ms=1.0,
                    decompress_ms=1.0)
    # Two shapes of one size: a 100x200 and a 200x100 tensor are two cases, never one median.
    t = pd.DataFrame([r("topk", 100, 200, 4, 1.0), r("topk", 200, 100, 4, 9.0), r("topk", 200, 100, 4, 7.0)])
    plots.micro_phases(t, str(tmp_path))
    (ax,) = figs["micro_phases.png"].axes
    assert ax.get_title() == "Phase breakdown, 100x200 tensor, 4 ranks"
    assert [[p.get_height() for p in b] for b in bar_containers(ax)] == [[1.0], [1.0], [1.0]]
    # The largest tensor measured at 2 ranks only, a smaller one at 4: the title names the 2 ranks plotted.
    t = pd.DataFrame([r("topk", 200, 100, 2, 3.0), r("topk", 10, 10, 4, 5.0)])
    plots.micro_phases(t, str(tmp_path))
    (ax,) = figs["micro_phases.png"].axes
    assert ax.get_title() == "Phase breakdown, 200x100 tensor, 2 ranks"
    assert [[p.get_height() for p in b] for b in bar_containers(ax)] == [[3.0], [1.0], [1.0]]


def test_e2e_phases_one_figure_per_model_and_world_size(tmp_path, figs):
    def r(model, n, method, c, m, d, e):
        return dict(model=model, world_size=n, method=method, compress_ms=c, comm_ms=m, decompress_ms=d,
                    exposed_ms=e)
    t = pd.DataFrame([r("vgg16", 4, "topk", 1.0, 2.0, 3.0, 4.0), r("vgg16", 4, "ssgd", 0.0, 8.0, 0.0, 5.0),
                      r("vgg16", 4, "topk", 3.0, 6.0, 5.0, 8.0), r("vgg16", 4, "topk", 2.0, 1.0, 4.0, 9.0),
                      r("resnet20", 8, "ssgd", 0.0, 1.5, 0.0, 0.5), r("resnet20", 2, "ssgd", 0.0, 2.5, 0.0, 1.5)])
    assert plots.e2e_phases(t, str(tmp_path)) == [
        "e2e_resnet20_np2_phases.png", "e2e_resnet20_np8_phases.png", "e2e_vgg16_np4_phases.png"]
    (ax,) = figs["e2e_vgg16_np4_phases.png"].axes
    assert list(figs["e2e_vgg16_np4_phases.png"].get_size_inches()) == [10.0, 4.0]
    assert texts(ax.get_xticklabels()) == ["topk", "ssgd"]
    bars = bar_containers(ax)
    assert [b.get_label() for b in bars] == ["compress_ms", "comm_ms", "decompress_ms", "exposed_ms"]
    assert [[p.get_height() for p in b] for b in bars] == [[2.0, 0.0], [2.0, 8.0], [4.0, 0.0], [8.0, 5.0]]
    assert ax.get_ylabel() == "ms per iteration (best configuration)"
    assert ax.get_title().startswith("vgg16, 4 ranks: phase times\n(exposed = end of backward to end of iteration")
    (ax,) = figs["e2e_resnet20_np8_phases.png"].axes
    assert [[p.get_height() for p in b] for b in bar_containers(ax)] == [[0.0], [1.5], [0.0], [0.5]]
    assert ax.get_title().startswith("resnet20, 8 ranks: ")
    # Without exposed_ms: the three phases only.
    plots.e2e_phases(t.drop(columns=["exposed_ms"]), str(tmp_path))
    (ax,) = figs["e2e_vgg16_np4_phases.png"].axes
    assert [b.get_label() for b in bar_containers(ax)] == ["compress_ms", "comm_ms", "decompress_ms"]


# ---- bars ---------------------------------------------------------------------------------

def bars_frame():
    return pd.DataFrame({"model": ["vgg16", "vgg16", "resnet20"], "world_size": [4, 8, 4], "network": ["", "", ""],
                         "a": [10.0, 20.0, 1.0], "b": [4.0, 1.0, 100.0], "a ±": [1.0, 25.0, NAN],
                         "b ±": [0.5, 2.0, 3.0], "c": [1.0, 1.0, 1.0]})


def test_bars_one_panel_per_model_heights_and_intervals_stopping_at_zero(tmp_path, figs):
    out = plots.bars(bars_frame(), ["model", "world_size", "network", "run"], ["a", "b", "gone"], "f.png",
                     str(tmp_path), "Speed", "ms")
    assert out == ["f.png"]
    fig = figs["f.png"]
    assert len(fig.axes) == 2
    v, r = fig.axes
    assert [a.get_subplotspec().colspan.start for a in (v, r)] == [0, 1]
    # Each panel max(4.5, 0.6 x its largest row count x sqrt(2 columns) + 2.5) wide, 4 high.
    assert list(fig.get_size_inches()) == pytest.approx([2 * max(4.5, 0.6 * 2 * 2 ** 0.5 + 2.5), 4.0])
    assert v.get_title() == "Speed: vgg16" and r.get_title() == "Speed: resnet20"
    assert texts(v.get_xticklabels()) == ["world_size=4", "world_size=8"]  # the panel's model not repeated
    assert texts(r.get_xticklabels()) == ["world_size=4"]
    va, vb = bar_containers(v)
    assert [va.get_label(), vb.get_label()] == ["a", "b"] and legend_texts(v) == ["a", "b"]
    assert [p.get_height() for p in va] == [10.0, 20.0] and [p.get_height() for p in vb] == [4.0, 1.0]
    xa = [p.get_x() + p.get_width() / 2 for p in va]
    xb = [p.get_x() + p.get_width() / 2 for p in vb]
    # a: 10 +- 1, 20 - 20 (stops at 0) + 25; b: 4 +- 0.5, 1 - 1 + 2.
    assert same(segments(va.errorbar), [[(xa[0], 9), (xa[0], 11)], [(xa[1], 0), (xa[1], 45)]])
    assert same(segments(vb.errorbar), [[(xb[0], 3.5), (xb[0], 4.5)], [(xb[1], 0), (xb[1], 3)]])
    assert {ln.get_markersize() for ln in va.errorbar.lines[1]} == {4.0}  # caps of 2 points each side
    assert v.get_yscale() == "linear" and v.get_ylim()[0] == 0 and v.get_ylabel() == "ms"  # 1 .. 20: 20x
    # resnet20: 1 .. 100 is 100x: a log axis, said in the label; NaN interval drawn as 0.
    assert r.get_yscale() == "log" and r.get_ylabel() == "ms (log scale)"
    ra, rb = bar_containers(r)
    assert [p.get_height() for p in ra] == [1.0] and [p.get_height() for p in rb] == [100.0]
    x = ra[0].get_x() + ra[0].get_width() / 2
    assert same(segments(ra.errorbar), [[(x, 1), (x, 1)]])


def test_bars_without_every_interval_or_panel_and_with_a_log_axis_asked_for(tmp_path, figs):
    t = bars_frame().drop(columns=["b ±"])
    plots.bars(t, ["model", "world_size"], ["a", "b"], "f.png", str(tmp_path), "T", "ms", panel=None)
    (ax,) = figs["f.png"].axes
    assert ax.get_title() == "T"
    assert texts(ax.get_xticklabels()) == ["vgg16, world_size=4", "vgg16, world_size=8", "resnet20, world_size=4"]
    assert all(b.errorbar is None for b in bar_containers(ax))  # `b ±` missing: no bars at all
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "ms (log scale)"  # 1 .. 100 in one panel
    assert list(figs["f.png"].get_size_inches()) == pytest.approx([max(4.5, 0.6 * 3 * 2 ** 0.5 + 2.5), 4.0])
    plots.bars(t, ["model"], ["c"], "g.png", str(tmp_path), "T", "ms", logy=True, panel="network")
    (ax,) = figs["g.png"].axes
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "ms"  # asked for: not labelled again
    assert [p.get_height() for p in bar_containers(ax)[0]] == [1.0, 1.0, 1.0]
    assert list(figs["g.png"].get_size_inches()) == pytest.approx([4.5, 4.0])
    plots.bars(t[t["model"] == "vgg16"], ["model", "world_size"], ["a"], "h.png", str(tmp_path), "T", "ms")
    (ax,) = figs["h.png"].axes
    assert ax.get_title() == "T"  # one model: one panel without a title of its own
    assert texts(ax.get_xticklabels()) == ["vgg16, world_size=4", "vgg16, world_size=8"]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0


def test_bars_whose_only_index_column_is_the_panel_column_label_each_panel_by_it(tmp_path, figs):
    """One panel per model, indexed by the model alone: the old code left no index column
    (the panel's own is dropped) and pandas raised "Must pass non-zero number of
    levels/codes"; now each panel's bar is labelled by its model."""
    t = pd.DataFrame({"model": ["vgg16", "resnet20"], "a": [3.0, 5.0]})
    assert plots.bars(t, ["model"], ["a"], "f.png", str(tmp_path), "T", "ms") == ["f.png"]
    v, r = figs["f.png"].axes
    assert (v.get_title(), r.get_title()) == ("T: vgg16", "T: resnet20")
    assert texts(v.get_xticklabels()) == ["vgg16"] and texts(r.get_xticklabels()) == ["resnet20"]
    assert [p.get_height() for p in bar_containers(v)[0]] == [3.0]
    assert [p.get_height() for p in bar_containers(r)[0]] == [5.0]


def test_bars_of_nothing_draw_nothing(tmp_path, figs):
    assert plots.bars(bars_frame().iloc[:0], ["model"], ["a"], "f.png", str(tmp_path), "T", "ms") == []
    assert plots.bars(bars_frame(), ["model"], ["gone"], "f.png", str(tmp_path), "T", "ms") == []
    assert figs == {}


# ---- lines --------------------------------------------------------------------------------

def lines_frame():
    rows = []
    for model, scale in (("vgg16", 1.0), ("resnet20", 100.0)):
        for method, off in (("powersgd", 0.0), ("acpsgd", 1.0)):
            for x, a in ((8, 3.0), (1, 1.0), (2, 2.0)):
                rows.append(dict(model=model, method=method, world_size=4, network="", x=x,
                                 **{"a ms": (a + off) * (scale if x == 8 else 1.0), "b ms": 2 * a + off,
                                    "a ms ±": 0.5 if x != 2 else NAN}))
            rows.append(dict(model=model, method=method, world_size=4, network="", x=NAN,
                             **{"a ms": 9.0, "b ms": 9.0, "a ms ±": 0.5}))
            rows.append(dict(model=model, method=method, world_size=4, network="", x=INF,
                             **{"a ms": 9.0, "b ms": 9.0, "a ms ±": 0.5}))
    return pd.DataFrame(rows)


def test_lines_per_group_and_value_sorted_by_x_with_intervals_titles_ticks(tmp_path, figs):
    t = lines_frame()
    out = plots.lines(t, "x", ["a ms", "b ms", "gone"], ["model", "method", "world_size", "network"], "l.png",
                      str(tmp_path), "Buffer", "buffer (MiB)", "time")
    assert out == ["l.png"]
    fig = figs["l.png"]
    v, r = fig.axes
    assert list(fig.get_size_inches()) == [17.0, 4.5]  # two panels 8.5 wide
    # The panel names its model; the world size every line shares; the empty network nothing.
    assert v.get_title() == "Buffer: vgg16, 4 ranks" and r.get_title() == "Buffer: resnet20, 4 ranks"
    labels = ["powersgd: a ms", "powersgd: b ms", "acpsgd: a ms", "acpsgd: b ms"]
    for ax in (v, r):
        assert [c.get_label() for c in errorbars(ax)] == labels and legend_texts(ax) == labels
        assert ax.get_xlabel() == "buffer (MiB)"
        assert [float(x) for x in ax.get_xticks()] == [1.0, 2.0, 8.0]
        assert texts(ax.get_xticklabels()) == ["1", "2", "8"]
        assert isinstance(ax.xaxis.get_minor_locator(), matplotlib.ticker.NullLocator)
        assert ax.xaxis.get_gridlines()[0].get_visible()
        cs = errorbars(ax)
        assert [rgba(c.lines[0].get_color()) for c in cs] == [rgba(plt.get_cmap("tab10")(i)) for i in range(4)]
        assert [c.lines[0].get_linestyle() for c in cs] == ["-", "--", "-", "--"]
        assert {(c.lines[0].get_marker(), c.lines[0].get_markersize()) for c in cs} == {("o", 3)}
    pa, pb, aa, ab = errorbars(v)
    assert xy(pa.lines[0]) == ([1.0, 2.0, 8.0], [1.0, 2.0, 3.0])
    assert xy(pb.lines[0]) == ([1.0, 2.0, 8.0], [2.0, 4.0, 6.0])
    assert xy(aa.lines[0]) == ([1.0, 2.0, 8.0], [2.0, 3.0, 4.0])
    assert xy(ab.lines[0]) == ([1.0, 2.0, 8.0], [3.0, 5.0, 7.0])
    # `a ms ±` is 0.5 but NaN at x = 2 (drawn as 0); `b ms` has no interval column.
    assert same(segments(pa), [[(1, 0.5), (1, 1.5)], [(2, 2), (2, 2)], [(8, 2.5), (8, 3.5)]])
    assert segments(pb) == [] and segments(ab) == []
    assert v.get_yscale() == "linear" and v.get_ylabel() == "time"
    # resnet20: the x = 8 point of `a ms` is 300 and 400 against 1: a log axis, said.
    assert xy(errorbars(r)[0].lines[0]) == ([1.0, 2.0, 8.0], [1.0, 2.0, 300.0])
    assert r.get_yscale() == "log" and r.get_ylabel() == "time (log scale)"


def test_lines_interval_stops_at_zero_and_a_group_without_intervals_has_none(tmp_path, figs):
    t = pd.DataFrame({"m": ["p", "p", "q", "q"], "x": [1, 2, 1, 2], "v": [0.2, 3.0, 1.0, 1.0],
                      "v ±": [0.5, 0.5, NAN, NAN]})
    plots.lines(t, "x", ["v"], ["m"], "l.png", str(tmp_path), "T", "x", "y", panel=None)
    (ax,) = figs["l.png"].axes
    p, q = errorbars(ax)
    assert [p.get_label(), q.get_label()] == ["p: v", "q: v"]
    assert same(segments(p), [[(1, 0), (1, 0.7)], [(2, 2.5), (2, 3.5)]])
    assert segments(q) == []
    assert {ln.get_markersize() for ln in p.lines[1]} == {4.0}  # caps of 2 points each side
    assert ax.get_title() == "T" and list(figs["l.png"].get_size_inches()) == [11.0, 4.5]


def test_lines_of_eleven_groups_take_tab20s_dark_shades_then_its_light_ones(tmp_path, figs):
    t = pd.DataFrame({"m": [f"m{i:02}" for i in range(11)], "x": [1] * 11, "v": [float(i) for i in range(11)]})
    plots.lines(t, "x", ["v"], ["m"], "l.png", str(tmp_path), "T", "x", "y", panel=None)
    (ax,) = figs["l.png"].axes
    tab20 = plt.get_cmap("tab20")
    want = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1]
    assert [rgba(c.lines[0].get_color()) for c in errorbars(ax)] == [rgba(tab20(i)) for i in want]


def test_lines_one_group_is_labelled_by_its_value_column_and_a_single_model_named(tmp_path, figs):
    t = pd.DataFrame({"model": ["resnet50"] * 2, "batch": [32, 32], "rank": [4, 4], "x": [1, 2],
                      "v": [1.0, 2.0], "w": [2.0, 3.0]})
    plots.lines(t, "x", ["v", "w"], ["model", "batch", "rank"], "l.png", str(tmp_path), "T", "x", "y")
    (ax,) = figs["l.png"].axes
    assert [c.get_label() for c in errorbars(ax)] == ["v", "w"]
    # `rank` is not a setup column of the title (TITLE_COLUMNS); model and batch are.
    assert ax.get_title() == "T: resnet50, batch=32"
    # One row; a network that is NaN names nothing.
    one = pd.DataFrame({"model": ["vgg16"], "world_size": [2], "network": [NAN], "x": [1], "v": [1.0]})
    plots.lines(one, "x", ["v"], ["model", "world_size", "network"], "l.png", str(tmp_path), "T", "x", "y")
    (ax,) = figs["l.png"].axes
    assert ax.get_title() == "T: vgg16, 2 ranks"
    # A title column with a NaN among its values names nothing: not every line shares it.
    two = pd.DataFrame({"model": ["vgg16"] * 2, "world_size": [NAN, 2], "x": [1, 2], "v": [1.0, 2.0]})
    plots.lines(two, "x", ["v"], ["model", "world_size"], "l.png", str(tmp_path), "T", "x", "y")
    assert figs["l.png"].axes[0].get_title() == "T: vgg16"


def test_lines_names_a_title_value_only_when_every_row_holds_it_whatever_the_order(tmp_path, figs):
    """The NaN last: the old code read the first value alone (nunique leaves NaN out) and
    titled a line whose other point has no world size `2 ranks`; now, as with the NaN first,
    nothing. Every row at 2: `2 ranks`."""
    cases = (([2, NAN], "T: vgg16"), ([NAN, 2], "T: vgg16"), ([2, 2], "T: vgg16, 2 ranks"))
    for i, (ws, want) in enumerate(cases):
        t = pd.DataFrame({"model": ["vgg16"] * 2, "world_size": ws, "x": [1, 2], "v": [1.0, 2.0]})
        plots.lines(t, "x", ["v"], ["model", "world_size"], f"l{i}.png", str(tmp_path), "T", "x", "y")
        assert figs[f"l{i}.png"].axes[0].get_title() == want, ws


def test_lines_xcat_places_x_by_rank_with_its_labels(tmp_path, figs):
    t = pd.DataFrame({"g": ["a"] * 4 + ["b"] * 2, "fb": [INF, 0, 25.0, 0.25, 25.0, 0],
                      "fusion": ["single", "none", "25MiB", "256KiB", "25MiB", "none"],
                      "v": [4.0, 1.0, 3.0, 2.0, 5.0, 6.0]})
    plots.lines(t, "fb", ["v"], ["g"], "l.png", str(tmp_path), "T", "fusion", "ms", xcat="fusion")
    (ax,) = figs["l.png"].axes
    assert [float(x) for x in ax.get_xticks()] == [0.0, 1.0, 2.0, 3.0]
    assert texts(ax.get_xticklabels()) == ["none", "256KiB", "25MiB", "single"]
    a, b = errorbars(ax)
    assert xy(a.lines[0]) == ([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0])
    assert xy(b.lines[0]) == ([0.0, 2.0], [6.0, 5.0])


def test_lines_logx_ticks_at_the_values_and_symlog_from_zero(tmp_path, figs):
    t = pd.DataFrame({"x": [16, 1, 4, NAN], "v": [3.0, 1.0, 2.0, 9.0]})
    plots.lines(t, "x", ["v"], [], "l.png", str(tmp_path), "T", "x", "y", logx=True)
    (ax,) = figs["l.png"].axes
    assert ax.get_xscale() == "log"
    assert [float(x) for x in ax.get_xticks()] == [1.0, 4.0, 16.0]
    assert texts(ax.get_xticklabels()) == ["1", "4", "16"]
    assert isinstance(ax.xaxis.get_minor_locator(), matplotlib.ticker.NullLocator)
    assert xy(errorbars(ax)[0].lines[0]) == ([1.0, 4.0, 16.0], [1.0, 2.0, 3.0])
    plots.lines(t.assign(x=[0.5, 0, 2, 4]), "x", ["v"], [], "l.png", str(tmp_path), "T", "x", "y", logx=True)
    (ax,) = figs["l.png"].axes
    assert ax.get_xscale() == "symlog"
    assert texts(ax.get_xticklabels()) == ["0", "0.5", "2", "4"]


def test_lines_log_y_is_chosen_from_the_points_drawn(tmp_path, figs):
    # Rows whose x is not a finite number are not drawn: their values do not choose the axis.
    t = pd.DataFrame({"x": [1.0, 2.0, INF, NAN], "v": [1.0, 2.0, 1000.0, 5000.0]})
    plots.lines(t, "x", ["v"], [], "l.png", str(tmp_path), "T", "x", "ms")
    (ax,) = figs["l.png"].axes
    assert xy(errorbars(ax)[0].lines[0]) == ([1.0, 2.0], [1.0, 2.0])
    assert ax.get_yscale() == "linear" and ax.get_ylabel() == "ms"
    # Drawn values 40x apart: log.
    plots.lines(t.assign(v=[1.0, 40.0, 1.0, 1.0]), "x", ["v"], [], "l.png", str(tmp_path), "T", "x", "ms")
    (ax,) = figs["l.png"].axes
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "ms (log scale)"
    # With XCAT every row is drawn (inf is the `single` tick), so every row counts.
    t = pd.DataFrame({"x": [0.0, INF], "fusion": ["none", "single"], "v": [1.0, 1000.0]})
    plots.lines(t, "x", ["v"], [], "l.png", str(tmp_path), "T", "fusion", "ms", xcat="fusion")
    (ax,) = figs["l.png"].axes
    assert ax.get_yscale() == "log"


def test_lines_fractional_x_keeps_matplotlibs_ticks(tmp_path, figs):
    t = pd.DataFrame({"x": [1.0, 1.5, 2.0], "v": [1.0, 2.0, 3.0]})
    plots.lines(t, "x", ["v"], [], "l.png", str(tmp_path), "T", "x", "y")
    (ax,) = figs["l.png"].axes
    assert isinstance(ax.xaxis.get_major_locator(), matplotlib.ticker.AutoLocator)


def test_lines_of_nothing_draw_nothing(tmp_path, figs):
    t = pd.DataFrame({"x": [1], "v": [1.0]})
    assert plots.lines(t.iloc[:0], "x", ["v"], [], "l.png", str(tmp_path), "T", "x", "y") == []
    assert plots.lines(t, "x", ["w"], [], "l.png", str(tmp_path), "T", "x", "y") == []
    assert figs == {}


# ---- points -------------------------------------------------------------------------------

def points_frame():
    return pd.DataFrame({"model (paper)": ["ResNet-50", "VGG", "LSTM", "AlexNet"],
                         "model": ["resnet50", "vgg16", "", "alexnet"],
                         "ratio": [100.0, 50.0, NAN, 200.0], "ratio (published)": [110.0, NAN, 270.0, 190.0]})


def test_points_draws_rows_with_both_and_names_the_others_under_the_axes(tmp_path, figs):
    out = plots.points(points_frame(), ["model (paper)", "model", "gone"], ["ratio", "ratio (published)"],
                       "p.png", str(tmp_path), "Ratio", "x", logy=True)
    assert out == ["p.png"]
    fig = figs["p.png"]
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["ratio", "ratio (published)"]
    assert xy(lines[0]) == ([0.0, 1.0], [100.0, 200.0]) and xy(lines[1]) == ([0.0, 1.0], [110.0, 190.0])
    assert [ln.get_linestyle() for ln in lines] == ["None", "None"]
    assert [ln.get_marker() for ln in lines] == ["o", "s"]
    assert [rgba(ln.get_color()) for ln in lines] == [rgba(plt.get_cmap("tab10")(i)) for i in range(2)]
    assert texts(ax.get_xticklabels()) == ["ResNet-50, resnet50", "AlexNet, alexnet"]
    assert [float(x) for x in ax.get_xticks()] == [0.0, 1.0]
    note = "Not drawn, without a pair: VGG, vgg16 (ratio only); LSTM (ratio (published) only)"
    assert ax.get_xlabel() == "\n".join(textwrap.wrap(note, 7 * 14))
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "x (log scale)" and ax.get_title() == "Ratio"
    assert legend_texts(ax) == ["ratio", "ratio (published)"]
    assert list(fig.get_size_inches()) == [7.0, 4.5]  # max(7, 0.7 x 2 + 3); a note adds 0.5 in


def test_points_with_no_pair_says_nothing_compares(tmp_path, figs):
    t = points_frame().iloc[1:3]
    plots.points(t, ["model (paper)"], ["ratio", "ratio (published)"], "p.png", str(tmp_path), "R", "x")
    (ax,) = figs["p.png"].axes
    assert all(len(ln.get_xdata()) == 0 for ln in ax.get_lines())
    note = ("Nothing to compare: no row has both ratio and ratio (published); VGG (ratio only); "
            "LSTM (ratio (published) only)")
    assert ax.get_xlabel() == "\n".join(textwrap.wrap(note, 7 * 14))  # 14 characters an inch
    assert [len(x) for x in ax.get_xlabel().split("\n")] == [94, 17]  # "... LSTM" then "(ratio" past 98


def test_points_without_a_pair_draw_every_row_from_zero(tmp_path, figs):
    t = pd.DataFrame({"m": [f"m{i}" for i in range(6)], "a": [1.0, 2, 3, 4, 5, 6], "b": [6.0, 5, 4, 3, 2, 1],
                      "c": [0.5] * 6})
    plots.points(t, ["m"], ["a", "b", "c"], "p.png", str(tmp_path), "T", "y")
    fig = figs["p.png"]
    (ax,) = fig.axes
    assert [xy(ln)[1] for ln in ax.get_lines()] == [[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1], [0.5] * 6]
    assert [ln.get_marker() for ln in ax.get_lines()] == ["o", "s", "^"]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and ax.get_ylabel() == "y"
    assert ax.get_xlabel() == "" and texts(ax.get_xticklabels()) == [f"m{i}" for i in range(6)]
    assert list(fig.get_size_inches()) == pytest.approx([0.7 * 6 + 3, 4.0])
    # Eleven columns: tab20's dark shades then its first light one; six markers, then again.
    wide = pd.DataFrame({"m": ["x"], **{f"v{i:02}": [float(i)] for i in range(11)}})
    plots.points(wide, ["m"], [f"v{i:02}" for i in range(11)], "w.png", str(tmp_path), "T", "y")
    (ax,) = figs["w.png"].axes
    tab20 = plt.get_cmap("tab20")
    assert [rgba(ln.get_color()) for ln in ax.get_lines()] == [
        rgba(tab20(i)) for i in (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1)]
    assert [ln.get_marker() for ln in ax.get_lines()] == ["o", "s", "^", "D", "v", "P", "o", "s", "^", "D", "v"]
    assert {ln.get_markersize() for ln in ax.get_lines()} == {7}
    plots.points(t.iloc[:1], ["m"], ["a"], "q.png", str(tmp_path), "T", "y")
    assert list(figs["q.png"].get_size_inches()) == [5.0, 4.0]
    assert plots.points(t.iloc[:0], ["m"], ["a"], "r.png", str(tmp_path), "T", "y") == []
    assert plots.points(t, ["m"], ["gone"], "r.png", str(tmp_path), "T", "y") == []


# ---- sim_accuracy, converge_curves, simulated_best ---------------------------------------

def test_sim_accuracy_points_per_world_size_the_diagonal_and_the_tolerance_band(tmp_path, figs):
    t = pd.DataFrame({"ranks": [4, 1, 4, 16], "measured ms": [10.0, 5.0, 20.0, 200.0],
                      "simulated ms": [11.0, 2.0, 18.0, 150.0]})
    assert plots.sim_accuracy(t, str(tmp_path), 0.125) == ["sim_accuracy.png"]
    (ax,) = figs["sim_accuracy.png"].axes
    assert list(figs["sim_accuracy.png"].get_size_inches()) == [5.5, 5.0]
    pts = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert [c.get_label() for c in pts] == ["1 rank", "4 ranks", "16 ranks"]
    assert [[tuple(p) for p in c.get_offsets()] for c in pts] == [
        [(5.0, 2.0)], [(10.0, 11.0), (20.0, 18.0)], [(200.0, 150.0)]]
    lo, hi = 2.0 * 0.9, 200.0 * 1.1
    (diag,) = ax.get_lines()
    assert xy(diag) == (pytest.approx([lo, hi]), pytest.approx([lo, hi]))
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert band.get_label() == "±12.5%"
    corners = {(round(float(x), 9), round(float(y), 9)) for x, y in band.get_paths()[0].vertices}
    want = {(lo, lo * 0.875), (hi, hi * 0.875), (hi, hi * 1.125), (lo, lo * 1.125)}
    assert {(round(x, 9), round(y, 9)) for x, y in want} <= corners
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "measured iteration (ms)" and ax.get_ylabel() == "simulated iteration (ms)"
    assert ax.get_title() == "Simulator accuracy"
    assert legend_texts(ax) == ["1 rank", "4 ranks", "16 ranks", "±12.5%"]
    plots.sim_accuracy(t, str(tmp_path), 0.1)
    (ax,) = figs["sim_accuracy.png"].axes
    assert [c.get_label() for c in ax.collections if isinstance(c, PolyCollection)] == ["±10%"]


def converge_frame():
    rows = []
    for run in ("r/1", "a"):
        for ws in (4, 2):
            for method, first in (("topk", 3.0), ("ssgd", 2.0), ("dgc", 10.0)):
                for step in range(12):
                    rows.append(dict(run=run, world_size=ws, method=method, step=11 - step,
                                     train_loss=first if step == 11 else float(step),
                                     eval_loss=float(step) / 2 if step % 4 == 0 else NAN,
                                     rank=NAN))  # a parameter the method lacks: not a missing evaluation
    return pd.DataFrame(rows)


def test_converge_curves_one_figure_per_run_and_world_size_each_method_its_colour(tmp_path, figs):
    out = plots.converge_curves(converge_frame(), str(tmp_path))
    assert out == ["converge_np2_a.png", "converge_np4_a.png", "converge_np2_r_1.png", "converge_np4_r_1.png"]
    (ax,) = figs["converge_np4_r_1.png"].axes
    assert list(figs["converge_np4_r_1.png"].get_size_inches()) == [8.0, 4.5]
    lines = ax.get_lines()
    assert len(lines) == 6
    # Steps 0..11: step 0's train loss is the method's first, step s >= 1 has 11 - s.
    for i, (m, first) in enumerate((("topk", 3.0), ("ssgd", 2.0), ("dgc", 10.0))):
        train, ev = lines[2 * i], lines[2 * i + 1]
        loss = [first] + [float(11 - s) for s in range(1, 12)]
        mean = [sum(loss[max(0, s - 9):s + 1]) / len(loss[max(0, s - 9):s + 1]) for s in range(12)]
        assert train.get_label() == m
        assert xy(train)[0] == [float(s) for s in range(12)]
        assert xy(train)[1] == pytest.approx(mean)
        assert xy(ev) == ([3.0, 7.0, 11.0], [4.0, 2.0, 0.0])  # held-out at rows step 8, 4, 0
        assert ev.get_marker() == "o" and ev.get_linestyle() == "--"
        assert rgba(train.get_color()) == rgba(ev.get_color()) == rgba(plt.get_cmap("tab20")(i))
    assert legend_texts(ax) == ["topk", "ssgd", "dgc"]
    assert ax.get_ylim() == (0.0, 4.5)  # 1.5 x the median of step 0's losses 3, 2, 10
    assert ax.get_title() == "gradcomp converge, 4 ranks" and ax.get_xlabel() == "step"
    assert ax.get_ylabel() == "cross-entropy (line: train, 10-step mean; dots: held-out)"


def test_converge_curves_without_a_first_step_stop_the_axis_at_5(tmp_path, figs):
    d = converge_frame()
    plots.converge_curves(d[d["step"] > 0], str(tmp_path))
    assert figs["converge_np2_a.png"].axes[0].get_ylim() == (0.0, 5.0)
    d.loc[d["step"] == 0, "train_loss"] = NAN
    plots.converge_curves(d, str(tmp_path))
    assert figs["converge_np2_a.png"].axes[0].get_ylim() == (0.0, 5.0)


def test_converge_curves_of_twenty_one_methods_cycle_tab20(tmp_path, figs):
    d = pd.DataFrame([dict(run="r", world_size=1, method=f"m{i:02}", step=0, train_loss=1.0, eval_loss=NAN)
                      for i in range(21)])
    plots.converge_curves(d, str(tmp_path))
    (ax,) = figs["converge_np1_r.png"].axes
    tab20 = plt.get_cmap("tab20")
    assert [rgba(ln.get_color()) for ln in ax.get_lines()[::2]] == [rgba(tab20(i % 20)) for i in range(21)]
    assert ax.get_title() == "gradcomp converge, 1 rank"


def sim_frame():
    rows = []
    for model, net, ranks in (("vgg16", "10G", (32, 2, 4)), ("resnet50", "", (16, 2, 8))):
        for j, method in enumerate(("topk", "acpsgd", "ssgd")):
            for n in ranks:
                rows.append(dict(model=model, network=net, method=method, ranks=n, **{"vs ssgd": n / 2 + j}))
    return pd.DataFrame(rows)


def test_simulated_best_a_panel_per_model_and_network_a_line_per_method(tmp_path, figs):
    assert plots.simulated_best(sim_frame(), str(tmp_path)) == ["simulated_best.png"]
    fig = figs["simulated_best.png"]
    v, r = fig.axes
    assert list(fig.get_size_inches()) == [11.0, 4.0]
    assert v.get_title() == "Simulated: vgg16, 10G" and r.get_title() == "Simulated: resnet50"
    for ax, xs in ((v, [2, 4, 32]), (r, [2, 8, 16])):
        lines = [ln for ln in ax.get_lines() if ln.get_label() in ("topk", "acpsgd", "ssgd")]
        assert [ln.get_label() for ln in lines] == ["topk", "acpsgd", "ssgd"] == legend_texts(ax)
        for j, ln in enumerate(lines):
            assert xy(ln) == ([float(x) for x in xs], [x / 2 + j for x in xs])
        assert [rgba(ln.get_color()) for ln in lines] == [rgba(plt.get_cmap("tab10")(i)) for i in range(3)]
        assert {(ln.get_marker(), ln.get_markersize()) for ln in lines} == {("o", 4)}
        assert [float(x) for x in ax.get_xticks()] == [float(x) for x in xs]
        assert texts(ax.get_xticklabels()) == [str(x) for x in xs]
        assert isinstance(ax.xaxis.get_minor_locator(), matplotlib.ticker.NullLocator)
        (one,) = [ln for ln in ax.get_lines() if ln not in lines]
        assert list(one.get_ydata()) == [1.0, 1.0]
        assert (one.get_color(), one.get_linewidth(), one.get_linestyle()) == ("k", 0.8, ":")
        assert ax.get_ylim()[0] == 0
        assert ax.get_xlabel() == "world size (simulated ranks)"
        assert ax.get_ylabel() == "speedup over S-SGD (best configurations)"
    # 2 .. 32 spans 16x: a log axis in base 2; 2 .. 16 spans 8x: not more than 8, linear.
    assert v.get_xscale() == "log" and v.xaxis.get_transform().base == 2
    assert r.get_xscale() == "linear"


def test_simulated_best_without_network_or_data(tmp_path, figs):
    t = sim_frame().drop(columns=["network"])
    t = t[t["model"] == "resnet50"].assign(ranks=lambda d: d["ranks"].replace(2, 0))
    plots.simulated_best(t, str(tmp_path))
    (ax,) = figs["simulated_best.png"].axes
    assert ax.get_title() == "Simulated: resnet50"
    assert ax.get_xscale() == "log"  # 0 .. 16 over max(0, 1): 16x
    # Eleven methods: tab20's dark shades then its first light one.
    many = pd.DataFrame({"model": "m", "method": [f"m{i:02}" for i in range(11)], "ranks": 2, "vs ssgd": 1.0})
    plots.simulated_best(many, str(tmp_path))
    (ax,) = figs["simulated_best.png"].axes
    tab20 = plt.get_cmap("tab20")
    assert [rgba(ln.get_color()) for ln in ax.get_lines()[:11]] == [
        rgba(tab20(i)) for i in (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1)]
    nine = pd.DataFrame({"model": "m", "method": "a", "ranks": [1, 9], "vs ssgd": [1.0, 2.0]})
    plots.simulated_best(nine, str(tmp_path))
    assert figs["simulated_best.png"].axes[0].get_xscale() == "log"  # 9x: more than 8
    assert plots.simulated_best(t.iloc[:0], str(tmp_path)) == []
    assert plots.simulated_best(t.assign(**{"vs ssgd": NAN}), str(tmp_path)) == []
