"""Paper tables (tables.py) at the places mutation testing found untested (issue 49;
docs/mutation.md). Every expectation is written by hand; the inputs of the summary tables
are made by hand too (a wrong acpsgd_main cannot hide a wrong summary of it)."""

import math

import pandas as pd
import pytest

from gradcomp_analysis import tables as T

from test_tables import df, row


def test_human_bytes_by_hand():
    assert T.human_bytes(0) == "0B"
    assert T.human_bytes(512) == "512B"
    assert T.human_bytes(1023) == "1023B"
    assert T.human_bytes(1000.5) == "1000.5B"
    assert T.human_bytes(1024) == "1KiB"
    assert T.human_bytes(1025) == "1.0KiB"
    assert T.human_bytes(1536) == "1.5KiB"
    assert T.human_bytes(2048) == "2KiB"
    assert T.human_bytes(2 ** 20) == "1MiB"
    assert T.human_bytes(64 * 2 ** 20) == "64MiB"
    assert T.human_bytes(3 * 2 ** 30) == "3GiB"
    assert T.human_bytes(2 ** 40) == "1024GiB"
    assert T.human_bytes("4096") == "4KiB"


def summary_input(rows):
    return pd.DataFrame(rows, columns=["method", "speedup vs ssgd", "vs ssgd", "ssgd config",
                                       "speedup vs powersgd", "vs powersgd"])


def test_acpsgd_speedup_summary_by_hand():
    ns = T.NOT_SIGNIFICANT
    main = summary_input([
        ("ssgd", 1.0, "", "25MiB/on/allreduce", 0.5, "slower"),
        ("acpsgd", 4.0, "faster", "25MiB/on/allreduce", 2.0, "faster"),
        ("acpsgd", 2.0, ns, "none/off/allreduce", math.nan, ""),
        ("acpsgd", 1.0, ns, "25MiB/on/allreduce", math.nan, ""),
    ])
    t = T.acpsgd_speedup_summary(main)
    assert list(t.columns) == ["comparison", "setups", "not significant", "mean speedup", "min", "max",
                               "mean speedup (published)", "over"]
    assert list(t["comparison"]) == ["acpsgd over ssgd", "acpsgd over powersgd"]
    assert list(t["setups"]) == [3, 1]
    assert list(t["not significant"]) == [2, 0]
    assert list(t["mean speedup"]) == pytest.approx([7 / 3, 2.0])
    assert list(t["min"]) == [1.0, 2.0] and list(t["max"]) == [4.0, 2.0]
    assert list(t["mean speedup (published)"]) == [4.06, 1.43]
    assert list(t["over"]) == ["ssgd's best configuration per setup: 25MiB/on/allreduce, none/off/allreduce",
                               "powersgd's best configuration per setup"]


def test_acpsgd_speedup_summary_without_a_speedup():
    main = summary_input([("acpsgd", math.nan, "", None, math.nan, "")])
    t = T.acpsgd_speedup_summary(main)
    assert list(t["setups"]) == [0, 0]
    assert list(t["mean speedup"]) == [None, None]
    assert list(t["min"]) == [None, None] and list(t["max"]) == [None, None]
    assert list(t["over"]) == ["ssgd's best configuration per setup: ", "powersgd's best configuration per setup"]
    # without the ssgd config column (an older table): only powersgd's row says what it is over
    t = T.acpsgd_speedup_summary(main.drop(columns=["ssgd config"]))
    assert t["over"].iloc[0] is None or (isinstance(t["over"].iloc[0], float) and math.isnan(t["over"].iloc[0]))
    assert t["over"].iloc[1] == "powersgd's best configuration per setup"


def test_acpsgd_main_wide_keeps_the_network_apart():
    e = df(row("ssgd", 0.2, network="eth"), row("acpsgd", 0.1, network="eth"),
           row("ssgd", 0.4, network="ib"), row("acpsgd", 0.3, network="ib"))
    w = T.acpsgd_main_wide(T.acpsgd_main(e))
    assert list(w.columns[:5]) == ["network", "model", "world_size", "batch", "device"]
    assert list(w["network"]) == ["eth", "ib"]
    assert list(w["ssgd ms"]) == pytest.approx([200, 400]) and list(w["acpsgd ms"]) == pytest.approx([100, 300])


def test_compare_columns_by_hand():
    """`_compare`: the speed-up t_base / t_a and whether A is faster, slower or inside the noise."""
    nan = math.nan
    t = pd.DataFrame({"x ms": [1.0, 2.0, 1.0, nan, 1.0], "x ms ±": [0.1, 0.1, 0.5, 0.1, nan],
                      "y ms": [2.0, 1.0, 1.2, 1.0, 3.0], "y ms ±": [0.1, 0.1, 0.5, 0.1, 0.1]})
    out = T._compare(t.copy(), "x", "y", "speedup")
    assert list(out.columns) == ["x ms", "x ms ±", "y ms", "y ms ±", "speedup", "x vs y"]
    assert list(out["speedup"][:3]) == pytest.approx([2.0, 0.5, 1.2]) and math.isnan(out["speedup"][3])
    assert out["speedup"][4] == pytest.approx(3.0)
    assert list(out["x vs y"]) == ["faster", "slower", T.NOT_SIGNIFICANT, "", ""]
    # a method the table lacks: unchanged
    assert list(T._compare(t.copy(), "x", "z", "speedup").columns) == list(t.columns)
    assert list(T._compare(t.copy(), "z", "y", "speedup").columns) == list(t.columns)


def test_acpsgd_main_wide_without_an_interval():
    e = df(row("ssgd", 0.2), row("acpsgd", 0.1, ci=math.nan))
    w = T.acpsgd_main_wide(T.acpsgd_main(e))
    assert w["ssgd ms ±"].iloc[0] == pytest.approx(0.2)
    assert math.isnan(w["acpsgd ms ±"].iloc[0]) and w["acpsgd ms"].iloc[0] == pytest.approx(100)


def test_fold_trains_by_hand():
    f = T.fold_trains
    assert f({}) is None
    assert f({"a": None, "b": "", "c": math.nan}) is None
    assert f({"topk": "trains (4 steps)"}) == "trains (4 steps)"
    assert f({"topk": "diverged at step 3", "ssgd": None}) == "diverged at step 3"
    assert f({"a": "trains (4 steps)", "b": "trains (2 steps)"}) == "all train"
    assert f({"a": "trains (4 steps)", "b": "diverged at step 3"}) == "b: diverged at step 3; others train"
    # every method the same verdict that is not `trains`: that verdict once
    assert f({"a": "diverged at step 3", "b": "diverged at step 3"}) == "diverged at step 3"
    # two different ones: each by name, and no "others train" when there are no others
    assert f({"a": "diverged at step 1", "b": "interrupted at step 2 of 4"}) == \
        "a: diverged at step 1; b: interrupted at step 2 of 4"
    # the same bad verdict, but not for every method: each by name, then the others
    assert f({"a": "diverged at step 1", "b": "diverged at step 1", "c": "trains (2 steps)"}) == \
        "a: diverged at step 1; b: diverged at step 1; others train"
    assert f({"a": "not checked", "b": "trains (2 steps)"}) == "a: not checked; others train"


def test_trains_cell_of_a_table_row():
    out = {}
    T._trains(out, [("topk", None), ("ssgd", pd.Series({"iter_s": 1.0}))])
    assert out == {}
    T._trains(out, [("topk", pd.Series({T.TRAINS: "diverged at step 3"})), ("x", None),
                    ("ssgd", pd.Series({T.TRAINS: "trains (2 steps)"}))])
    assert out == {T.TRAINS: "topk: diverged at step 3; others train"}


def test_trains_by_group_in_the_order_of_the_rows():
    b = pd.DataFrame({"setup": ["s2", "s2", "s1", "s1", "s3"], "method": ["topk", "ssgd", "topk", "ssgd", "dgc"],
                      T.TRAINS: ["diverged at step 3", "trains (2 steps)", "trains (4 steps)", "trains (2 steps)",
                                 None]})
    got = T._trains_by(b, ["setup"])
    assert list(got.index) == ["s2", "s1", "s3"]
    assert list(got) == ["topk: diverged at step 3; others train", "all train", None]
    assert T._trains_by(b.drop(columns=[T.TRAINS]), ["setup"]) is None
    assert T._trains_by(b.iloc[:0], ["setup"]) is None
    # a setup key left empty is a group of its own
    nan_key = b.assign(setup=["s2", "s2", math.nan, math.nan, "s3"])
    assert list(T._trains_by(nan_key, ["setup"])) == ["topk: diverged at step 3; others train", "all train", None]
    # grouped by another label
    got = T._trains_by(b.rename(columns={"method": "m"}), ["setup"], label="m")
    assert got.iloc[0] == "topk: diverged at step 3; others train"


def test_wide_by_hand():
    """`_wide`: best rows as a column per method, in ms with the interval, and the folded
    `trains` of the methods shown (ssgd's verdict is not one of them), setups in row order."""
    def r(model, method, t, ci, tr):
        return dict(model=model, method=method, iter_s=t, iter_ci95_s=ci, iters=10, **{T.TRAINS: tr})
    b = pd.DataFrame([r("m2", "powersgd", 0.4, math.nan, "trains (4 steps)"),
                      r("m2", "acpsgd", 0.3, 0.03, "trains (2 steps)"),
                      r("m2", "ssgd", 0.5, 0.01, "diverged at step 1"),
                      r("m1", "powersgd", 0.2, math.nan, "trains (4 steps)"),
                      r("m1", "acpsgd", 0.1, 0.02, "diverged at step 3")])
    w = T._wide(b, ["model"], ("powersgd", "acpsgd"))
    assert list(w.index) == ["m2", "m1"]
    assert list(w.columns) == ["powersgd ms", "powersgd ms ±", "powersgd wire vs dense", "acpsgd ms", "acpsgd ms ±",
                               "acpsgd wire vs dense", T.TRAINS]
    assert list(w["powersgd ms"]) == pytest.approx([400, 200]) and w["powersgd ms ±"].isna().all()
    assert list(w["acpsgd ms"]) == pytest.approx([300, 100])
    assert list(w["acpsgd ms ±"]) == pytest.approx([30, 20])
    assert list(w[T.TRAINS]) == ["all train", "acpsgd: diverged at step 3; others train"]
    assert T.TRAINS not in T._wide(b.drop(columns=[T.TRAINS]), ["model"], ("powersgd", "acpsgd")).columns


def test_flat_by_hand():
    t = pd.DataFrame([[1, 2, 3]], columns=pd.MultiIndex.from_tuples([("a", ""), ("b", "x"), ("c", 4)]),
                     index=pd.Index(["k1"], name="k"))
    t.columns.names = ["what", "which"]
    out = T._flat(t)
    assert list(out.columns) == ["k", "a", "b x", "c 4"]
    assert out.columns.name is None and list(out.iloc[0]) == ["k1", 1, 2, 3]
    s = pd.DataFrame({"a": [1]}, index=pd.Index(["k1"], name="k"))
    s.columns.name = "what"
    out = T._flat(s)
    assert list(out.columns) == ["k", "a"] and out.columns.name is None


def test_acpsgd_main_says_what_is_missing():
    with pytest.raises(T.MissingData) as e:
        T.acpsgd_main(pd.DataFrame())
    assert str(e.value) == "no e2e rows"
    with pytest.raises(T.MissingData) as e:
        T.acpsgd_main(df(row("ssgd", 0.2), row("powersgd", 0.1)))
    assert str(e.value) == "needs e2e rows of ssgd and acpsgd (own collective)"


def test_runs_compared_follows_run():
    """Two runs, neither holding both methods of the setup: one comparison drawing on both,
    each row's own run, and `runs compared` naming both right after it."""
    e = df(row("ssgd", 0.2, run="a"), row("acpsgd", 0.1, run="b"))
    t = T.acpsgd_main(e)
    assert list(t.columns[:7]) == ["model", "world_size", "batch", "device", "run", "runs compared", "method"]
    assert list(t["run"]) == ["a", "b"] and list(t["runs compared"]) == ["a + b", "a + b"]


def kept(rows, col):
    return sorted((r["model"], r["method"], r[col]) for _, r in T.defaults(df(*rows)).iterrows())


def test_defaults_pick_the_papers_rank_else_the_smallest():
    rows = [row("powersgd", 0.1, model="resnet50", rank=4), row("powersgd", 0.1, model="resnet50", rank=8),
            row("powersgd", 0.1, model="bert-base", rank=4), row("powersgd", 0.1, model="bert-base", rank=32),
            row("powersgd", 0.1, model="m", rank=2), row("powersgd", 0.1, model="m", rank=4),
            row("acpsgd", 0.1, model="m", rank=16), row("acpsgd", 0.1, model="m", rank=8),
            # not low-rank: every rank kept; topk's densities are chosen by density, not rank
            row("ssgd", 0.1, model="m", rank=4), row("ssgd", 0.1, model="m", rank=8),
            row("topk", 0.1, model="m", rank=4, density=0.001), row("topk", 0.1, model="m", rank=8, density=0.01)]
    assert kept(rows, "rank") == [("bert-base", "powersgd", 32), ("m", "acpsgd", 8), ("m", "powersgd", 4),
                                  ("m", "ssgd", 4), ("m", "ssgd", 8), ("m", "topk", 4), ("resnet50", "powersgd", 4)]


def test_defaults_pick_the_methods_own_density_else_the_smallest():
    rows = [row("sketch", 0.1, density=0.001), row("sketch", 0.1, density=0.0076),
            row("topk", 0.1, density=0.0005), row("topk", 0.1, density=0.001),
            row("dgc", 0.1, density=0.05), row("dgc", 0.1, density=0.01),
            row("ssgd", 0.1, density=0.001), row("ssgd", 0.1, density=0.01)]
    assert kept(rows, "density") == [("m", "dgc", 0.01), ("m", "sketch", 0.0076), ("m", "ssgd", 0.001),
                                     ("m", "ssgd", 0.01), ("m", "topk", 0.001)]


def test_prefer_pipelining_on_per_group():
    nan = math.nan
    d = pd.DataFrame({"setup": ["a", "a", "b", "b", nan, nan, "c"],
                      "pipelining": ["on", "off", "off", "off", "off", "on", "on"], "i": range(7)})
    assert list(T.prefer_pipelining_on(d, ["setup"])["i"]) == [0, 2, 3, 5, 6]


def test_setup_keys_add_the_network_only_when_it_varies():
    base = ["model", "world_size", "batch", "device"]
    assert T.setup_keys(pd.DataFrame({"network": ["eth", "ib"]})) == ["network"] + base
    assert T.setup_keys(pd.DataFrame({"network": ["eth", "eth"]})) == base
    assert T.setup_keys(pd.DataFrame({"network": ["", math.nan]})) == base  # empty and absent: one network
    assert T.setup_keys(pd.DataFrame({"x": [1]})) == base


def test_best_by_hand():
    nan = math.nan
    d = pd.DataFrame({"net": [nan, nan, "x", "x"], "method": ["ssgd", "ssgd", "topk", "topk"],
                      "fusion": ["none", "25MiB", "none", "1MiB"], "pipelining": ["on", "off", "on", "on"],
                      "iter_s": [0.3, 0.2, 0.1, 0.15]})
    b = T.best(d, ["net", "method"])
    assert list(b.columns) == ["net", "method", "fusion", "pipelining", "iter_s", "config"]
    assert list(b.index) == [0, 1]
    got = sorted(zip(b["method"], b["iter_s"], b["config"]))
    assert got == [("ssgd", 0.2, "25MiB/off"), ("topk", 0.1, "none/on")]
    e = T.best(d.iloc[:0], ["net", "method"])
    assert e.empty and list(e.columns) == ["net", "method", "fusion", "pipelining", "iter_s", "config"]


def test_ci_s_without_an_interval_column_is_nan_on_the_rows_index():
    d = pd.DataFrame({"iter_s": [0.1, 0.2]}, index=[5, 7])
    c = T.ci_s(d)
    assert list(c.index) == [5, 7] and c.dtype == float and c.isna().all()


def test_significance_of_a_missing_value_of_any_kind_is_no_claim():
    assert T.significance(pd.NA, 0.1, 1.0, 0.1) == ""
    assert T.significance(1.0, None, 2.0, 0.1) == ""
    assert T.significance(1.0, 0.1, float("nan"), 0.1) == ""


def test_by_run_a_run_holding_exactly_the_methods_needed_is_a_comparison():
    d = pd.DataFrame({"setup": ["s2", "s2", "s2", "s1", "s1"], "run": ["a", "a", "b", "a", "b"],
                      "method": ["x", "y", "x", "x", "y"]})
    rows, keys = T.by_run(d, ["setup"], need={"x", "y"})
    assert keys == ["setup", "run"]
    # s2: run a holds x and y: each run its own group; s1: neither does: one group "a + b"; s2 first
    assert list(rows["setup"]) == ["s2", "s2", "s2", "s1", "s1"]
    assert list(rows["run"]) == ["a", "a", "b", "a + b", "a + b"]
    assert list(rows["_run"]) == ["a", "a", "b", "a", "b"]
    # a setup key left empty is a setup of its own
    nan_key = d.assign(setup=["s2", "s2", "s2", math.nan, math.nan])
    rows, _ = T.by_run(nan_key, ["setup"], need={"x", "y"})
    assert list(rows["run"]) == ["a", "a", "b", "a + b", "a + b"]


def test_ci_s_by_hand():
    d = pd.DataFrame({"iter_ci95_s": ["0.1", "0.2", "0.3", "x"], "iters": [1, 2, math.nan, 10]})
    c = T.ci_s(d)
    assert math.isnan(c[0]) and list(c[1:3]) == [0.2, 0.3] and math.isnan(c[3])
    c = T.ci_s(d.assign(iters=["1", "2", "x", "10"], iter_ci95_s=[0.1, 0.2, 0.3, 0.4]))
    assert math.isnan(c[0]) and list(c[1:]) == [0.2, 0.3, 0.4]


def test_collapse_repeats_of_a_case_with_an_empty_case_column():
    """compress_device is empty on host-compressed cases: their repeats are still one case."""
    rows = [dict(row("ssgd", t), case_id=f"c{i}", compress_device=math.nan) for i, t in enumerate([0.3, 0.1, 0.2])]
    rows.append(dict(row("topk", 0.5), case_id="t", compress_device=math.nan))
    out = T.collapse_repeats(df(*rows))
    assert list(out["method"]) == ["ssgd", "topk"]
    assert list(out["iter_s"]) == [0.2, 0.5] and list(out["repeats"]) == [3, 1]
    assert list(out.index) == [0, 1] and "index" not in out.columns


def test_acpsgd_main_rank_only_for_low_rank_methods_and_a_plain_index():
    e = df(row("ssgd", 0.2, rank=8), row("powersgd", 0.15), row("acpsgd", 0.1))
    t = T.acpsgd_main(e)
    assert str(t["rank"].dtype) == "Int64"
    assert list(t["method"]) == ["ssgd", "powersgd", "acpsgd"]
    assert pd.isna(t["rank"].iloc[0]) and list(t["rank"].iloc[1:]) == [4, 4]
    assert list(t.index) == [0, 1, 2] and "index" not in t.columns
    assert list(t.columns) == ["model", "world_size", "batch", "device", "method", "config", "rank", "iter_ms",
                               "iter_ms ±", "wire vs dense", "speedup vs ssgd", "vs ssgd", "ssgd config",
                               "speedup vs powersgd", "vs powersgd"]


def test_fusion_order_by_hand():
    labels = ["omgs", "25MiB", "none", "single", "mgwfbp", "256KiB", "layerfusion"]
    assert sorted(labels, key=T.fusion_order) == ["none", "256KiB", "25MiB", "single", "layerfusion", "mgwfbp",
                                                  "omgs"]
