"""Unit tests of the paper tables on small hand-built DataFrames (exact numbers)."""

import math

import pandas as pd
import pytest

from gradcomp_analysis import tables as T
from gradcomp_analysis.io import ReportError, check_schema

AGG = {"ssgd": "allreduce", "powersgd": "allreduce", "acpsgd": "allreduce", "sketch": "allreduce",
       "sketch-fusion": "allreduce", "signsgd": "allgather", "topk": "allgather", "dgc": "allgather",
       "omgs": "allgather", "marsit": "ring"}


def row(method, iter_s, fusion="none", pipelining="on", collective=None, model="m", world_size=2, batch=10,
        rank=4, density=0.001, dense=4000, wire=None, network="", ci=None, run=None):
    extra = {} if run is None else {"run": run}
    return dict(**extra, iters=10, iter_ci95_s=iter_s * 0.001 if ci is None else ci, model=model, method=method, fusion=fusion, pipelining=pipelining,
                collective=collective or AGG[method], aggregation=AGG[method], world_size=world_size, batch=batch,
                device="v100", density=density, rank=rank, compress_s=0.001, comm_s=iter_s / 2, decompress_s=0.001,
                pack_s=0.0, exposed_s=iter_s / 4, iter_s=iter_s, dense_bytes=dense,
                wire_bytes=dense if wire is None else wire, network=network)


def df(*rows):
    return pd.DataFrame(list(rows))


def test_fusion_bytes():
    assert T.fusion_bytes("none") == 0
    assert T.fusion_bytes("25MiB") == 25 * 2**20
    assert T.fusion_bytes("256KiB") == 256 * 1024
    assert T.fusion_bytes("single") == math.inf
    assert math.isnan(T.fusion_bytes("mgwfbp"))


def test_acpsgd_main_best_config_and_speedups():
    e = df(row("ssgd", 0.4, fusion="none"), row("ssgd", 0.2, fusion="25MiB"),
           row("powersgd", 0.1), row("acpsgd", 0.05), row("topk", 0.3),
           row("acpsgd", 0.01, collective="allgather"))  # not its own collective: ignored
    t = T.acpsgd_main(e).set_index("method")
    assert list(t.index) == ["ssgd", "topk", "powersgd", "acpsgd"]
    assert t.loc["ssgd", "iter_ms"] == pytest.approx(200)
    assert t.loc["ssgd", "config"] == "25MiB/on"
    assert t.loc["acpsgd", "speedup vs ssgd"] == pytest.approx(4.0)
    assert t.loc["acpsgd", "speedup vs powersgd"] == pytest.approx(2.0)
    assert t.loc["topk", "speedup vs ssgd"] == pytest.approx(0.2 / 0.3)
    s = T.acpsgd_speedup_summary(T.acpsgd_main(e)).set_index("comparison")
    assert s.loc["acpsgd over ssgd", "mean speedup"] == pytest.approx(4.0)
    assert s.loc["acpsgd over ssgd", "mean speedup (published)"] == 4.06
    assert s.loc["acpsgd over ssgd", "over"] == "ssgd's best configuration per setup: 25MiB/on/allreduce"
    w = T.acpsgd_main_wide(T.acpsgd_main(e))
    assert list(w.columns) == ["model", "world_size", "batch", "device", "ssgd ms", "ssgd ms ±", "topk ms", "topk ms ±",
                               "topk density", "topk wire vs dense", "powersgd ms", "powersgd ms ±",
                               "powersgd wire vs dense", "acpsgd ms", "acpsgd ms ±", "acpsgd wire vs dense"]
    assert w["acpsgd ms ±"].iloc[0] == pytest.approx(0.05)  # iter_ci95_s in ms
    # Item 3: the S-SGD configuration the speedups are over (its best) is named.
    assert t.loc["acpsgd", "ssgd config"] == "25MiB/on/allreduce"


def test_acpsgd_main_prefers_paper_rank():
    e = df(row("ssgd", 1.0, model="bert-base"), row("acpsgd", 0.5, model="bert-base", rank=32),
           row("acpsgd", 0.1, model="bert-base", rank=4))
    t = T.acpsgd_main(e).set_index("method")
    assert t.loc["acpsgd", "rank"] == 32 and t.loc["acpsgd", "iter_ms"] == pytest.approx(500)


def test_acpsgd_main_missing():
    with pytest.raises(T.MissingData, match="acpsgd"):
        T.acpsgd_main(df(row("ssgd", 1.0)))


def test_acpsgd_ablation_steps():
    e = df(row("ssgd", 0.8, collective="allgather", pipelining="off"),
           row("ssgd", 0.4, pipelining="off"), row("ssgd", 0.3, pipelining="on"),
           row("ssgd", 0.25, pipelining="off", fusion="25MiB"), row("ssgd", 0.2, pipelining="on", fusion="25MiB"),
           row("ssgd", 0.1, pipelining="on", fusion="mgwfbp"),  # planner: not a fusion step
           row("topk", 0.5, pipelining="off"), row("topk", 0.25, pipelining="on", fusion="single"))
    t = T.acpsgd_ablation(e).set_index("method")
    assert t.loc["ssgd", "collective"] == "allreduce"
    assert t.loc["ssgd", "all-gather ms"] == pytest.approx(800)
    assert t.loc["ssgd", "all-reduce ms"] == pytest.approx(400)
    assert t.loc["ssgd", "+ pipelining ms"] == pytest.approx(300)
    assert t.loc["ssgd", "+ fusion ms"] == pytest.approx(250)
    assert t.loc["ssgd", "+ pipelining + fusion ms"] == pytest.approx(200)
    assert t.loc["ssgd", "speedup (first/last)"] == pytest.approx(4.0)
    # topk's own collective is MPI_Allgather: its plain time is labelled all-gather, not all-reduce.
    assert t.loc["topk", "collective"] == "allgather"
    assert t.loc["topk", "all-gather ms"] == pytest.approx(500)
    assert pd.isna(t.loc["topk", "all-reduce ms"])
    assert t.loc["topk", "speedup (first/last)"] == pytest.approx(2.0)
    assert t.loc["topk", "last vs first"] == "faster"
    assert t.loc["topk", "+ pipelining + fusion plan"] == "single"


def test_buffer_sweep_sorted_by_bytes():
    e = df(*[row(m, t, fusion=f) for m in ("ssgd", "acpsgd") for f, t in
             [("25MiB", 0.2), ("none", 0.4), ("1MiB", 0.3), ("single", 0.25)]])
    t = T.acpsgd_buffer_sweep(e)
    assert list(t["fusion"]) == ["none", "1MiB", "25MiB", "single"]
    assert list(t["buffer_MiB"]) == [0, 1, 25, math.inf]
    assert list(t["ssgd ms"]) == pytest.approx([400, 300, 200, 250])
    with pytest.raises(T.MissingData):
        T.acpsgd_buffer_sweep(df(row("ssgd", 0.1, fusion="25MiB"), row("ssgd", 0.1)))


def test_rank_sweep():
    e = df(row("powersgd", 0.4, rank=4), row("powersgd", 0.8, rank=8), row("acpsgd", 0.2, rank=4),
           row("acpsgd", 0.2, rank=8), row("ssgd", 1.0))
    t = T.acpsgd_rank_sweep(e).set_index("rank")
    assert t.loc[8, "acpsgd speedup vs powersgd"] == pytest.approx(4.0)
    assert t.loc[4, "ssgd ms"] == pytest.approx(1000)


def test_scaling_and_network():
    e = df(row("ssgd", 0.2, world_size=2), row("acpsgd", 0.1, world_size=2),
           row("ssgd", 0.8, world_size=4), row("acpsgd", 0.2, world_size=4))
    t = T.acpsgd_scaling(e).set_index("world_size")
    assert t.loc[4, "acpsgd speedup vs ssgd"] == pytest.approx(4.0)
    with pytest.raises(T.MissingData, match="network"):
        T.acpsgd_network(e)
    n = df(row("ssgd", 0.2, network="eth"), row("acpsgd", 0.1, network="eth"),
           row("ssgd", 0.3, network="ib"), row("acpsgd", 0.1, network="ib"))
    t = T.acpsgd_network(n).set_index("network")
    assert t.loc["ib", "acpsgd speedup vs ssgd"] == pytest.approx(3.0)


def test_dgc_ratio_beside_published():
    e = df(row("dgc", 1.0, model="resnet50", dense=102228128, wire=409600),
           row("dgc", 1.0, model="resnet50", dense=102228128, wire=500000, fusion="mgwfbp"),
           row("dgc", 1.0, model="resnet20", dense=4000, wire=40))
    t = T.dgc_ratio(e)
    r = t[t["model"] == "resnet50"].iloc[0]
    assert r["ratio"] == pytest.approx(102228128 / 409600)  # fusion none preferred
    assert r["message MiB"] == pytest.approx(409600 / 2**20)
    assert r["ratio (published)"] == 277.0 and r["gradient MiB (published)"] == 97.49
    assert (t["model"] == "(not in gradcomp's zoo)").sum() == 1  # DeepSpeech
    assert t[t["model"] == "resnet20"].iloc[0]["ratio"] == pytest.approx(100)
    assert pd.isna(t[t["model"] == "lstm-ptb"].iloc[0]["ratio"])
    with pytest.raises(T.MissingData, match="dgc"):
        T.dgc_ratio(df(row("ssgd", 1.0)))


def test_omgs():
    e = df(row("topk", 0.5), row("topk", 0.1, fusion="single"), row("omgs", 0.4, fusion="omgs"),
           row("ssgd", 0.8, fusion="mgwfbp"), row("omgs", 0.1, fusion="omgs", pipelining="off"))
    r = T.omgs(e).iloc[0]
    assert r["topk (layer-wise) ms"] == pytest.approx(500)
    assert r["omgs ms"] == pytest.approx(400)  # pipelining on preferred
    assert r["omgs improvement vs topk %"] == pytest.approx(20.0)
    assert r["omgs speedup vs ssgd (mgwfbp)"] == pytest.approx(2.0)
    assert r["improvement vs topk % (published, up to)"] == 31.0
    with pytest.raises(T.MissingData, match="omgs"):
        T.omgs(df(row("topk", 0.5)))


def test_marsit():
    e = df(row("ssgd", 0.4, wire=4000), row("signsgd", 0.3, wire=130), row("marsit", 0.3, wire=125))
    t = T.marsit(e).set_index("method")
    assert t.loc["marsit", "time reduction vs ssgd allreduce %"] == pytest.approx(25.0)
    assert t.loc["marsit", "wire vs dense"] == pytest.approx(125 / 4000)  # wire_bytes / dense_bytes
    assert t.loc["marsit", "collective"] == "ring"
    assert t.loc["marsit", "reduction % (published, up to)"] == 35.0


def test_sketch_fusion_and_scaling():
    rows = []
    for n, k in [(2, 1.0), (4, 2.0)]:
        rows += [row("ssgd", 0.4 * k, world_size=n), row("ssgd", 0.2 * k, world_size=n, fusion="layerfusion"),
                 row("sketch", 0.5 * k, world_size=n), row("sketch-fusion", 0.25 * k, world_size=n, fusion="layerfusion")]
    e = df(*rows)
    t = T.sketch_fusion(e)
    r = t[(t["world_size"] == 2) & (t["method"] == "sketch-fusion")].iloc[0]
    assert r["none ms"] == pytest.approx(500) and r["layerfusion ms"] == pytest.approx(250)
    assert r["speedup"] == pytest.approx(2.0) and r["faster %"] == pytest.approx(50.0)
    assert r["faster % (published, up to)"] == 18.6
    s = T.sketch_scaling(e)
    r = s[(s["method"] == "ssgd") & (s["world_size"] == 4)].iloc[0]
    assert r["none samples/s"] == pytest.approx(4 * 10 / 0.8)
    assert r["layerfusion gain"] == pytest.approx(2.0)
    sc = T.sketch_scalability(s).set_index("method")
    assert sc.loc["ssgd", "scaling none"] == pytest.approx(1.0)  # 2x ranks, 2x time
    assert sc.loc["ssgd", "layerfusion scalability gain"] == pytest.approx(1.0)
    assert set(sc.index) == {"ssgd", "sketch-fusion"}
    with pytest.raises(T.MissingData):
        T.sketch_scaling(df(*rows[:4]))


def test_schema_checks():
    with pytest.raises(ReportError, match="schema_version \\[2\\] is unknown"):
        check_schema(pd.DataFrame({"schema_version": [2]}), "x/e2e.csv")
    with pytest.raises(ReportError, match="no schema_version"):
        check_schema(pd.DataFrame({"a": [1]}), "x/e2e.csv")
    with pytest.raises(ReportError, match="columns \\['method'"):
        check_schema(pd.DataFrame({"schema_version": [1], "model": ["m"]}), "x/e2e.csv")


# ---------------------------------------------------------------- issue 20

def test_significance_marks_a_difference_inside_the_noise():
    """Item 1: a synthetic pair whose difference lies inside the 95% intervals is marked
    `≈ not significant`; one far outside them is ranked."""
    assert T.significance(0.0100, 0.0005, 0.0098, 0.0005) == T.NOT_SIGNIFICANT
    assert T.significance(0.0050, 0.0005, 0.0100, 0.0005) == "faster"
    assert T.significance(0.0200, 0.0005, 0.0100, 0.0005) == "slower"
    assert T.significance(0.0200, float("nan"), 0.0100, 0.0005) == ""  # interval unknown: no claim
    # Through the tables: ssgd 10 ms ± 0.5, acpsgd 9.8 ms ± 0.5 (inside), powersgd 5 ms ± 0.1 (outside).
    e = df(row("ssgd", 0.010, ci=0.0005), row("acpsgd", 0.0098, ci=0.0005), row("powersgd", 0.005, ci=0.0001))
    t = T.acpsgd_main(e).set_index("method")
    assert t.loc["acpsgd", "iter_ms ±"] == pytest.approx(0.5)
    assert t.loc["acpsgd", "vs ssgd"] == T.NOT_SIGNIFICANT
    assert t.loc["powersgd", "vs ssgd"] == "faster"
    assert t.loc["acpsgd", "vs powersgd"] == "slower"
    assert t.loc["ssgd", "vs ssgd"] == ""
    s = T.acpsgd_speedup_summary(T.acpsgd_main(e)).set_index("comparison")
    assert s.loc["acpsgd over ssgd", "not significant"] == 1
    # One timed iteration: the CSV's ci95 is 0, which is no interval at all.
    one = df(dict(row("ssgd", 0.010), iters=1, iter_ci95_s=0.0), dict(row("acpsgd", 0.0098), iters=1, iter_ci95_s=0.0))
    assert T.acpsgd_main(one).set_index("method").loc["acpsgd", "vs ssgd"] == ""
    # OMGS vs Top-k inside the noise, Marsit vs S-SGD, LayerFusion vs none.
    o = T.omgs(df(row("topk", 0.0100, ci=0.001), row("omgs", 0.0095, fusion="omgs", ci=0.001))).iloc[0]
    assert o["omgs vs topk"] == T.NOT_SIGNIFICANT
    m = T.marsit(df(row("ssgd", 0.010, ci=0.0001), row("marsit", 0.005, ci=0.0001))).set_index("method")
    assert m.loc["marsit", "vs ssgd allreduce"] == "faster"
    sk = T.sketch_fusion(df(row("topk", 0.010, ci=0.001), row("topk", 0.0101, fusion="layerfusion", ci=0.001)))
    assert sk.iloc[0]["layerfusion vs none"] == T.NOT_SIGNIFICANT
    ov = T.e2e_overview(e).set_index("method")
    assert ov.loc["acpsgd", "none/on ms ±"] == pytest.approx(0.5)
    assert ov.loc["acpsgd", "none/on vs ssgd"] == T.NOT_SIGNIFICANT
    assert ov.loc["powersgd", "vs ssgd best"] == "faster"


def test_runs_combined_compare_within_one_run():
    """Item 2: OMGS from one run is not paired with Top-k from another when a run has both;
    where none has both, each row says which run it came from."""
    e = df(row("topk", 0.5, run="a"), row("omgs", 0.4, fusion="omgs", run="a"), row("ssgd", 0.8, fusion="mgwfbp", run="a"),
           row("omgs", 0.1, fusion="omgs", run="b"))  # faster, but b has no layer-wise topk
    t = T.omgs(e)
    assert list(t["run"]) == ["a"]
    assert t.iloc[0]["omgs ms"] == pytest.approx(400)  # the old code took run b's 100 ms
    # Two complete runs: two comparisons, one per run (between-run spread visible).
    e2 = df(row("ssgd", 0.4, run="a"), row("acpsgd", 0.1, run="a"), row("ssgd", 0.2, run="b"), row("acpsgd", 0.15, run="b"))
    m = T.acpsgd_main(e2)
    sp = m[m.method == "acpsgd"].set_index("run")["speedup vs ssgd"]
    assert sp["a"] == pytest.approx(4.0) and sp["b"] == pytest.approx(0.2 / 0.15)  # not 0.2 / 0.1
    w = T.acpsgd_main_wide(m)
    assert sorted(w["run"]) == ["a", "b"]
    # No run holds both: combined, and every row says where it came from.
    e3 = df(row("ssgd", 0.4, run="a"), row("acpsgd", 0.1, run="b"))
    m = T.acpsgd_main(e3).set_index("method")
    assert m.loc["ssgd", "run"] == "a" and m.loc["acpsgd", "run"] == "b"
    assert m.loc["acpsgd", "runs compared"] == "a + b"
    assert m.loc["acpsgd", "speedup vs ssgd"] == pytest.approx(4.0)
    assert list(T.acpsgd_main_wide(T.acpsgd_main(e3))["run"]) == ["a + b"]
    assert list(T.omgs(df(row("topk", 0.5, run="a"), row("omgs", 0.4, fusion="omgs", run="b")))["run"]) == ["a + b"]
    # A run that holds a comparison is never mixed with another run's rows: b's powersgd
    # stands alone (no speedup over a's ssgd), a's acpsgd has no powersgd to compare with.
    e4 = df(row("ssgd", 0.4, run="a"), row("acpsgd", 0.1, run="a"), row("powersgd", 0.2, run="b"))
    m = T.acpsgd_main(e4).set_index("method")
    assert "runs compared" not in m.columns
    assert pd.isna(m.loc["powersgd", "speedup vs ssgd"]) and pd.isna(m.loc["acpsgd", "speedup vs powersgd"])
    assert sorted(T.acpsgd_main_wide(T.acpsgd_main(e4))["run"]) == ["a", "b"]
    # A sweep in one run is not dropped because another run of the setup has more methods.
    e5 = df(*[row(m, 0.1, fusion=f, run="sweep") for m in ("ssgd", "acpsgd") for f in ("none", "1MiB", "25MiB")],
            *[row(m, 0.1, fusion="25MiB", run="main") for m in ("ssgd", "topk", "powersgd", "acpsgd")])
    assert list(T.acpsgd_buffer_sweep(e5)["run"]) == ["sweep"] * 3
    # One run: no run column (nothing to tell apart).
    assert "run" not in T.acpsgd_main(df(row("ssgd", 0.4, run="a"), row("acpsgd", 0.1, run="a"))).columns


def test_omgs_names_the_ssgd_baseline_and_shows_ssgd_best():
    """Item 3: the S-SGD configuration behind a speedup is named, and the speedup over
    S-SGD's best configuration of the same run is shown beside MG-WFBP's."""
    e = df(row("topk", 0.5), row("omgs", 0.4, fusion="omgs"), row("ssgd", 0.8, fusion="mgwfbp"),
           row("ssgd", 0.2, fusion="25MiB", pipelining="off"), row("ssgd", 0.6, fusion="none"))
    r = T.omgs(e).iloc[0]
    assert r["ssgd (mgwfbp) config"] == "mgwfbp/on/allreduce"
    assert r["ssgd best config"] == "25MiB/off/allreduce"
    assert r["omgs speedup vs ssgd (mgwfbp)"] == pytest.approx(2.0)
    assert r["omgs speedup vs ssgd best"] == pytest.approx(0.5)
    assert r["omgs vs ssgd best"] == "slower"
    ov = T.e2e_overview(e)
    assert "25MiB/off/allreduce" in ov.attrs["notes"][0]
    assert ov.set_index("method").loc["topk", "speedup vs ssgd best"] == pytest.approx(0.4)


def test_marsit_against_ssgd_over_the_same_ring():
    """Item 4: S-SGD over gradcomp's ring beside S-SGD over MPI's all-reduce; Marsit's
    reduction like with like against the ring one; a clear note when only MPI's exists."""
    e = df(row("ssgd", 0.2, wire=4000), row("ssgd", 0.4, collective="ring", wire=4000), row("marsit", 0.3, wire=125),
           row("signsgd", 0.35, wire=130))
    t = T.marsit(e)
    assert list(zip(t["method"], t["collective"])) == [("ssgd", "allreduce"), ("ssgd", "ring"), ("signsgd", "allgather"),
                                                       ("marsit", "ring")]
    m = t.set_index(["method", "collective"]).loc[("marsit", "ring")]
    assert m["time reduction vs ssgd ring %"] == pytest.approx(25.0)
    assert m["time reduction vs ssgd allreduce %"] == pytest.approx(-50.0)
    assert "like with like" in t.attrs["notes"][0] and "No S-SGD" not in t.attrs["notes"][0]
    only = T.marsit(df(row("ssgd", 0.2), row("marsit", 0.3)))
    assert "time reduction vs ssgd ring %" not in only.columns
    assert only.attrs["notes"][0].startswith("No S-SGD row over gradcomp's ring")


def test_sketch_fusion_says_what_each_row_is():
    """Item 4: one sketch per fused group (the paper's method) vs per-tensor sketches in
    fused buckets."""
    e = df(row("sketch", 0.5), row("sketch", 0.4, fusion="layerfusion"), row("sketch-fusion", 0.45, fusion="layerfusion"))
    t = T.sketch_fusion(e).set_index("method")
    assert "one Count Sketch per LayerFusion group" in t.loc["sketch-fusion", "what"]
    assert "paper describes" in t.loc["sketch-fusion", "what"]
    assert "per tensor" in t.loc["sketch", "what"] and "not the paper's" in t.loc["sketch", "what"]
    assert t.loc["sketch-fusion", "none ms"] == pytest.approx(500)  # per-tensor sketch without fusion


def test_repeated_case_is_its_median_with_the_spread_between_repeats():
    """Item 1: a config that repeats a case gives its median repeat (not the luckiest one)
    and an interval at least half the range between the repeats."""
    rs = [dict(row("ssgd", t, ci=0.00006), case_id="c1", run="a") for t in (0.001615, 0.002714, 0.001650)]
    e = df(*rs, dict(row("acpsgd", 0.0017, ci=0.00006), case_id="c2", run="a"))
    c = T.collapse_repeats(e).set_index("method")
    assert c.loc["ssgd", "iter_s"] == pytest.approx(0.001650)
    assert c.loc["ssgd", "iter_ci95_s"] == pytest.approx((0.002714 - 0.001615) / 2)
    assert c.loc["ssgd", "repeats"] == 3 and c.loc["acpsgd", "repeats"] == 1
    t = T.acpsgd_main(T.collapse_repeats(e)).set_index("method")
    assert t.loc["acpsgd", "vs ssgd"] == T.NOT_SIGNIFICANT  # 1.70 vs 1.65 ± 0.55 ms
    assert T.collapse_repeats(df(row("ssgd", 0.1))).equals(df(row("ssgd", 0.1)))  # no case_id: unchanged


def test_collapse_repeats_finds_repeats_by_their_configuration_not_their_id():
    """gradcomp gives every repeat of a case its own case_id (resume needs them distinct):
    repeats are the rows of one run with the same configuration."""
    rs = [dict(row("ssgd", t, ci=0.00006), case_id=f"c{i}", run="a")
          for i, t in enumerate((0.001615, 0.002714, 0.001650))]
    other = dict(row("ssgd", 0.0019, ci=0.00006, fusion="25MiB"), case_id="c9", run="a")
    c = T.collapse_repeats(df(*rs, other))
    assert len(c) == 2
    r = c[c["fusion"] == "none"].iloc[0]
    assert r["iter_s"] == pytest.approx(0.001650) and r["repeats"] == 3
    assert c[c["fusion"] == "25MiB"].iloc[0]["repeats"] == 1
    # The same configuration in another run is another case.
    assert len(T.collapse_repeats(df(*rs, dict(rs[0], run="b")))) == 2


def conv_rows(method, losses, status="done", run="r", ws=2):
    """converge.csv rows: one per step, the held-out loss evaluated at the listed steps."""
    out = []
    for step, loss in enumerate(losses):
        out.append(dict(run=run, world_size=ws, method=method, step=step, eval_loss=loss,
                        eval_accuracy=0.5 if loss == loss else float("nan"), step_s=0.01, wire_bytes=100,
                        status=status if step == len(losses) - 1 else "running"))
    return out


def test_converge_summary_checks_tolerance_and_says_why_not():
    nan = float("nan")
    rows = (conv_rows("ssgd", [2.3, 1.5, 1.0]) + conv_rows("powersgd", [2.3, 1.6, 1.2])
            + conv_rows("topk", [2.3, 2.0, 1.26]) + conv_rows("sketch", [2.3, nan], status="diverged")
            + conv_rows("mystery", [2.3, 2.2, 2.1]))
    t = T.converge_summary(pd.DataFrame(rows)).set_index("method")
    assert t.loc["powersgd", "within_tolerance"] and t.loc["powersgd", "why_not"] == ""
    assert t.loc["powersgd", "x_dense"] == pytest.approx(1.2)
    assert t.loc["powersgd", "steps_to_1.1x_dense"] != t.loc["powersgd", "steps_to_1.1x_dense"]  # never
    assert t.loc["ssgd", "steps_to_1.1x_dense"] == 3
    # 1.26x: just outside 1.25x, with the documented reason.
    assert not t.loc["topk", "within_tolerance"]
    assert "d/k" in t.loc["topk", "why_not"]
    assert not t.loc["sketch", "within_tolerance"] and t.loc["sketch", "status"] == "diverged"
    assert math.isnan(t.loc["sketch", "final_eval_loss"])
    assert t.loc["mystery", "why_not"] == "see docs/methods.md"


def test_a_converge_curve_cut_off_is_incomplete_never_ok():
    """issue 30: a method stopped by a signal at step 150 of 400 (last row "interrupted")
    or killed (no last row) shows no final loss and is not blamed for the tolerance."""
    rows = (conv_rows("ssgd", [2.3, 1.5, 1.0]) + conv_rows("topk", [2.3, 1.9], status="interrupted")
            + conv_rows("powersgd", [2.3, 1.6], status="ok"))
    for r in rows:
        r["steps"] = 400 if r["method"] != "ssgd" else 3
    t = T.converge_summary(pd.DataFrame(rows)).set_index("method")
    for m in ("topk", "powersgd"):
        assert t.loc[m, "status"] == "incomplete (2 of 400 steps)", t.loc[m, "status"]
        assert math.isnan(t.loc[m, "final_eval_loss"]) and math.isnan(t.loc[m, "final_eval_accuracy"])
        assert not t.loc[m, "within_tolerance"]
        assert "--resume" in t.loc[m, "why_not"] and "d/k" not in t.loc[m, "why_not"]
    assert t.loc["ssgd", "status"] == "done" and t.loc["ssgd", "final_eval_loss"] == 1.0
    # A cut-off dense run is no reference: nothing is compared against its partial loss.
    rows = conv_rows("ssgd", [2.3, 1.5], status="interrupted") + conv_rows("topk", [2.3, 1.2])
    t = T.converge_summary(pd.DataFrame(rows)).set_index("method")
    assert math.isnan(t.loc["topk", "x_dense"]) and not t.loc["topk", "within_tolerance"]


def test_planner_accuracy_compares_planned_with_measured_sync():
    def planned(method, fusion, planned_s, bwd_sync_s, source):
        r = row(method, bwd_sync_s * 1.2, fusion=fusion)
        return dict(r, planned_s=planned_s, bwd_sync_s=bwd_sync_s, plan_source=source, buckets=3)
    e = df(planned("ssgd", "mgwfbp", 0.09, 0.1, "mgwfbp"),
           planned("topk", "layerfusion", 0.05, 0.1, "4MiB (layerfusion predicted 60.000ms)"),
           dict(row("ssgd", 0.2), planned_s=math.nan, bwd_sync_s=0.15))
    t = T.planner_accuracy(e)
    assert len(t) == 2  # fixed fusions have no prediction
    a, b = t.iloc[0], t.iloc[1]
    assert a["planned ms"] == pytest.approx(90) and a["measured ms"] == pytest.approx(100)
    assert a["error %"] == pytest.approx(-10) and a["within"] == "yes"
    assert b["error %"] == pytest.approx(-50) and b["within"] == "no"
    assert b["plan that ran"].startswith("4MiB")
    assert T.planner_accuracy(e, tolerance=0.6)["within"].tolist() == ["yes", "yes"]
    with pytest.raises(T.MissingData, match="planner"):
        T.planner_accuracy(df(dict(row("ssgd", 0.2), planned_s=math.nan, bwd_sync_s=0.1)))


def test_planner_tables_show_the_plan_that_ran():
    """issue 27: the omgs and sketch_fusion tables show each planner row's plan_source (the
    planner's own plan, or the simple plan that replaced it)."""
    om = dict(row("omgs", 0.4, fusion="omgs"), plan_source="omgs")
    mg = dict(row("ssgd", 0.8, fusion="mgwfbp"), plan_source="single (mgwfbp predicted 100.000ms)")
    t = T.omgs(pd.DataFrame([row("topk", 0.5), om, mg])).iloc[0]
    assert t["omgs plan that ran"] == "omgs"
    assert t["ssgd (mgwfbp) plan that ran"] == "single (mgwfbp predicted 100.000ms)"
    assert "topk (layer-wise) plan that ran" not in t.index  # fusion none: no planner
    sf = dict(row("sketch-fusion", 0.25, fusion="layerfusion"), plan_source="layerfusion")
    s = T.sketch_fusion(pd.DataFrame([row("sketch", 0.5), sf])).set_index("method")
    assert s.loc["sketch-fusion", "plan that ran"] == "layerfusion"


def test_sim_accuracy_keeps_spread_and_verdict_and_the_host_calibration_its_spreads():
    """sim_vs_measured.csv since issue 29: spread and verdict per case; older files: every case judged."""
    sv = pd.DataFrame({
        "run": ["r", "r"], "case": ["resnet20/ssgd/256KiB/pipelining=off/allreduce/n=2/batch=128",
                                    "resnet20/topk/256KiB/pipelining=on/allgather/n=2/batch=128"],
        "method": ["ssgd", "topk"], "world_size": [2, 2], "measured_iter_s": [3e-3, 2e-3],
        "simulated_iter_s": [2.5e-3, 2.1e-3], "rel_err": [-1 / 6, 0.05], "tolerance": [0.15, 0.15],
        "role": ["validation", "validation"], "rounds": [5, 5], "spread_rel": [0.2, 0.03],
        "verdict": ["too-noisy", "within"], "oversubscribed": ["2 ranks + 2 device threads on 2 cores", ""],
    })
    t = T.sim_accuracy(sv)
    assert t["verdict"].tolist() == ["too-noisy", "within"]
    assert t["spread %"].tolist() == pytest.approx([20, 3])
    assert "host jitter %" not in t.columns
    # Since the host jitter: the fit's spread and the jitter's share beside the spread.
    j = T.sim_accuracy(sv.assign(fit_spread_rel=[None, 0.02], host_jitter_rel=[None, 0.05]))
    assert j["host jitter %"].tolist()[1] == pytest.approx(5) and j["fit spread %"].tolist()[1] == pytest.approx(2)
    assert pd.isna(j["host jitter %"].tolist()[0])
    assert t["within"].tolist() == ["no", "yes"]
    old = T.sim_accuracy(sv.drop(columns=["rounds", "spread_rel", "verdict", "oversubscribed"]))
    assert old["verdict"].tolist() == ["outside", "within"] and "spread %" not in old.columns
    h = pd.DataFrame({
        "run": "r", "kind": "host", "world_size": 2,
        "name": ["sync-pipelining-off", "sync-pipelining-on", "sync-pipelining-off", "sync-pipelining-off"],
        "phase": ["-", "-", "without ssgd", "without topk"], "unit": "wait",
        "fixed_s": [2e-4, 2e-4, 1.8e-4, 2.3e-4], "round_min": [1e-4, 1e-4, 1e-4, 1e-4],
        "round_max": [3e-4, 3e-4, 3e-4, 3e-4], "points": [45, 45, 40, 40],
    })
    c = T.sim_host_calibration(h)
    assert len(c) == 1 and c.iloc[0]["term"] == "sync"
    assert c.iloc[0][["value", "round min", "round max", "one method out min", "one method out max"]].tolist() \
        == pytest.approx([200, 100, 300, 180, 230])
    # A run whose pipelined rows calibrated their own latency (a core per thread): both rows.
    apart = h.assign(fixed_s=[2e-4, 0.5e-4, 1.8e-4, 2.3e-4])
    c = T.sim_host_calibration(apart).set_index("term")
    assert sorted(c.index) == ["sync-pipelining-off", "sync-pipelining-on"]
    assert c.loc["sync-pipelining-on", "value"] == pytest.approx(50)
    assert c.loc["sync-pipelining-off", "value"] == pytest.approx(200)


def test_a_negative_control_that_passes_is_a_failed_control():
    """issue 31 item 9: powersgd-noef at 1.11x dense passes the 1.25x check (as at 4 ranks):
    reported as a failed control, not as a pass; topk-noef at 1.7x fails, as a control should."""
    rows = (conv_rows("ssgd", [2.3, 1.5, 1.0]) + conv_rows("powersgd-noef", [2.3, 1.6, 1.11])
            + conv_rows("topk-noef", [2.3, 2.0, 1.7]) + conv_rows("powersgd", [2.3, 1.6, 1.05]))
    t = T.converge_summary(pd.DataFrame(rows)).set_index("method")
    assert t.loc["powersgd-noef", "control"] == "failed control (passed)"
    assert "FAILED CONTROL" in t.loc["powersgd-noef", "why_not"]
    assert t.loc["topk-noef", "control"] == "fails as a control should"
    assert t.loc["powersgd", "control"] == ""


def test_simulated_best_is_the_fastest_configuration_with_its_speedup_over_ssgd():
    rows = []
    for net, scale in (("1gbe", 10.0), ("100gb-ib", 1.0)):
        for m, fus, pipe, t in [("ssgd", "none", "off", 0.2), ("ssgd", "25MiB", "on", 0.1),
                                ("topk", "none", "off", 0.08), ("topk", "25MiB", "on", 0.05)]:
            rows.append(dict(schema_version=1, source="simulated", model="resnet50", method=m, fusion=fus,
                             pipelining=pipe, collective="allreduce", world_size=8, ranks_per_node=1, network=net,
                             compress_on="host", iter_s=t * scale, cost_source="x"))
    t = T.simulated_best(pd.DataFrame(rows))
    assert list(t.columns) == ["model", "ranks", "network", "method", "best configuration", "iter ms", "wire vs dense",
                               "vs ssgd"]
    assert len(t) == 4
    r = t[(t["network"] == "1gbe") & (t["method"] == "topk")].iloc[0]
    assert r["best configuration"] == "25MiB/on/allreduce"
    assert r["iter ms"] == pytest.approx(500.0) and r["vs ssgd"] == pytest.approx(2.0)
    assert t[t["method"] == "ssgd"]["vs ssgd"].tolist() == [1.0, 1.0]


def test_e2e_overview_orders_fusion_none_sizes_ascending_single_then_planners():
    rows = [row(m, 0.01 + i * 1e-4, fusion=f, pipelining=p)
            for m in ("ssgd", "topk") for i, f in enumerate(["single", "mgwfbp", "256KiB", "none", "25MiB"])
            for p in ("on", "off")]
    t = T.e2e_overview(df(*rows))
    cols = [c[:-3] for c in t.columns if c.endswith(" ms") and not c.startswith("best")]
    assert cols == ["none/off", "none/on", "256KiB/off", "256KiB/on", "25MiB/off", "25MiB/on", "single/off",
                    "single/on", "mgwfbp/off", "mgwfbp/on"]


def test_ranks_is_singular_for_one():
    assert T.ranks(1) == "1 rank" and T.ranks(4) == "4 ranks"
