"""tables.py after `_vs` (the paper tables, the `wire vs dense` helpers, the accuracy and
convergence tables) at the places mutation testing found untested (issue 49; docs/mutation.md).
Every expectation is written by hand from the fixture's numbers, not computed by the code under
test."""

import math

import pandas as pd
import pytest

from gradcomp_analysis import tables as T

from test_tables import df, row

NAN = math.nan
W = "wire vs dense"


def test_drop_empty_density_drops_every_empty_density_column_and_keeps_the_notes():
    t = pd.DataFrame({"model": ["m", "n"], "density": [NAN, NAN], "topk density": [NAN, NAN],
                      "dgc density": [0.001, NAN], "densityx": [NAN, NAN], "x": [1, 2]})
    t.attrs["notes"] = ["a note"]
    out = T.drop_empty_density(t)
    # `density` and `X density` where no row has one; a column that only starts with it stays
    assert list(out.columns) == ["model", "dgc density", "densityx", "x"]
    assert out.attrs["notes"] == ["a note"]
    # nothing to drop: the notes stay too
    assert T.drop_empty_density(out).attrs["notes"] == ["a note"]


def test_density_and_wire_of_a_frame_without_their_columns_keep_its_rows():
    d = pd.DataFrame({"method": ["topk", "ssgd", "dgc"]}, index=[5, 7, 9])
    for got in (T.density_of(d), T.wire_vs_dense(d)):
        assert list(got.index) == [5, 7, 9] and got.dtype == float and got.isna().all()


# ------------------------------------------------------------------ convergence


def test_within_tolerance_at_its_edges():
    # the check's rule written again: a finite final loss at most 1.25 x dense's
    f = T.within_tolerance
    assert T.CONVERGE_TOLERANCE_REL == 0.25
    assert f(1.25, 1.0) is True and f(1.0, 1.0) is True and f(0.5, 1.0) is True
    assert f(1.2500001, 1.0) is False and f(2.5, 2.0) is True and f(2.5000001, 2.0) is False
    assert f(math.nan, 1.0) is False and f(math.inf, 1.0) is False and f(-math.inf, 1.0) is False
    assert f(1.0, math.nan) is False  # no dense reference: never within


def curve(method, losses, status="done", run="r", ws=2, step_s=None, wire=None, steps=None, order=None):
    """converge.csv rows of one case: LOSSES per step (None: not evaluated at that step, NaN loss)."""
    out = []
    n = len(losses)
    for i, x in enumerate(losses):
        ev = math.nan if x is None else x
        out.append(dict(run=run, world_size=ws, method=method, step=i, eval_loss=ev,
                        eval_accuracy=math.nan if x is None else round(1 - x / 10, 6),
                        step_s=(step_s or [0.01] * n)[i], wire_bytes=(wire or [100] * n)[i],
                        status=status if i == n - 1 else "ok", **({} if steps is None else {"steps": steps})))
    return [out[i] for i in order] if order else out


def test_converge_summary_every_column_by_hand():
    rows = (curve("ssgd", [3.0, None, 1.5, None, 1.0], step_s=[0.01, 0.05, 0.02, 0.03, 0.04],
                  wire=[400, 400, 400, 400, 400], order=[4, 2, 0, 3, 1])  # rows out of step order
            # exactly 1.1x dense at step 2 (reach: step 3), exactly 1.25x at the end: within
            + curve("topk@rho=0.01", [3.0, 1.2, 1.1, 1.25], step_s=[0.001, 0.002, 0.004, 0.1], wire=[10, 20, 30, 40])
            # just past 1.25x: outside, the method's own reason (the name before `@`)
            + curve("dgc", [3.0, 1.3, 1.2500001])
            + curve("qsgd", [3.0, 2.0, None], steps=None)     # last step not evaluated: the last evaluated loss
            + curve("signsgd", [3.0, 0.9, math.nan], status="diverged"))
    t = T.converge_summary(pd.DataFrame(rows).assign(model_params=100))
    assert "notes" not in t.attrs  # every case has its dense size
    assert list(t.columns) == ["run", "world_size", "method", "steps_run", "final_eval_loss", "final_eval_accuracy",
                               "x_dense", "within_tolerance", "steps_to_1.1x_dense", "median_step_ms", "wire_bytes",
                               W, "status", "control", "why_not"]
    assert list(t["method"]) == ["ssgd", "topk@rho=0.01", "dgc", "qsgd", "signsgd"]  # the file's order
    t = t.set_index("method")
    s = t.loc["ssgd"]
    assert (s["run"], s["world_size"], s["steps_run"], s["final_eval_loss"]) == ("r", 2, 5, 1.0)
    assert s["final_eval_accuracy"] == 0.9 and s["x_dense"] == 1.0 and s["within_tolerance"]
    assert s["steps_to_1.1x_dense"] == 5 and s["median_step_ms"] == pytest.approx(30.0)  # 0.03 s
    assert s["wire_bytes"] == 400 and s["status"] == "done" and s["control"] == "" and s["why_not"] == ""
    k = t.loc["topk@rho=0.01"]
    assert (k["steps_run"], k["final_eval_loss"], k["x_dense"]) == (4, 1.25, 1.25)
    assert k["final_eval_accuracy"] == 0.875 and k["within_tolerance"] and k["why_not"] == ""
    assert k["steps_to_1.1x_dense"] == 3                                   # 1.1 <= 1.1 x 1.0 at step 2
    assert k["median_step_ms"] == pytest.approx(3.0) and k["wire_bytes"] == 25.0  # medians of four
    assert s[W] == 1.0 and k[W] == 25.0 / 400  # median wire over 4 bytes x 100 parameters
    d = t.loc["dgc"]
    assert not d["within_tolerance"] and d["why_not"] == T.CONVERGE_WHY_NOT["dgc"]
    assert d["x_dense"] == pytest.approx(1.2500001) and math.isnan(d["steps_to_1.1x_dense"])
    q = t.loc["qsgd"]
    assert (q["steps_run"], q["final_eval_loss"], q["final_eval_accuracy"]) == (3, 2.0, 0.8)
    assert q["x_dense"] == 2.0 and q["why_not"] == "see docs/methods.md"  # no reason written for qsgd
    g = t.loc["signsgd"]
    assert g["status"] == "diverged" and g["steps_run"] == 3
    assert math.isnan(g["final_eval_loss"]) and math.isnan(g["final_eval_accuracy"]) and math.isnan(g["x_dense"])
    assert not g["within_tolerance"] and g["why_not"] == T.CONVERGE_WHY_NOT["signsgd"]
    assert g["steps_to_1.1x_dense"] == 2  # it reached 0.9 before it diverged


def test_converge_summary_groups_by_run_and_world_size_each_with_its_own_dense():
    rows = (curve("topk", [3.0, 1.2], run="r", ws=4) + curve("ssgd", [3.0, 2.0], run="r", ws=4)
            + curve("ssgd", [3.0, 1.0], run="r", ws=2) + curve("topk", [3.0, 1.2], run="r", ws=2)
            + curve("ssgd", [3.0, 1.0], run="a", ws=2) + curve("topk", [3.0, 1.5], run="a", ws=2))
    t = T.converge_summary(pd.DataFrame(rows))
    # the groups sorted by run then world size; the methods in the file's order within each
    assert list(zip(t["run"], t["world_size"], t["method"])) == [
        ("a", 2, "ssgd"), ("a", 2, "topk"), ("r", 2, "ssgd"), ("r", 2, "topk"), ("r", 4, "topk"), ("r", 4, "ssgd")]
    assert list(t["x_dense"]) == pytest.approx([1.0, 1.5, 1.0, 1.2, 0.6, 1.0])
    assert list(t["within_tolerance"]) == [True, False, True, True, True, True]


def test_converge_summary_of_a_cut_curve_and_of_no_rows():
    rows = (curve("ssgd", [3.0, 1.0]) + curve("topk", [3.0, 1.0, 1.1], status="interrupted", steps=10)
            + curve("dgc", [3.0, 1.0], status="ok")           # killed: no last row, no `steps` column value
            + curve("topk-noef", [3.0, 1.0], status="interrupted"))
    t = T.converge_summary(pd.DataFrame(rows)).set_index("method")
    assert t.loc["topk", "status"] == "incomplete (3 of 10 steps)"
    assert t.loc["dgc", "status"] == "incomplete (2 steps)"   # steps NaN: not said
    for m in ("topk", "dgc", "topk-noef"):
        assert t.loc[m, "why_not"] == "cut off (a signal or a kill): not a result; continue the run with --resume"
        assert not t.loc[m, "within_tolerance"] and math.isnan(t.loc[m, "final_eval_loss"])
    # a cut negative control is neither a passed nor a failed control
    assert t.loc["topk-noef", "control"] == ""
    # a control that fails, one that passes
    rows = curve("ssgd", [3.0, 1.0]) + curve("topk-noef", [3.0, 1.3]) + curve("signsgd-noef@x", [3.0, 1.0])
    t = T.converge_summary(pd.DataFrame(rows)).set_index("method")
    assert t.loc["topk-noef", "control"] == "fails as a control should"
    assert t.loc["topk-noef", "why_not"] == T.CONVERGE_WHY_NOT["topk-noef"]
    assert t.loc["signsgd-noef@x", "control"] == "failed control (passed)"
    assert t.loc["signsgd-noef@x", "why_not"].startswith("FAILED CONTROL: this negative control passed the check")
    assert t.attrs["notes"] == [T.CONVERGE_WIRE_NOTE]  # no model_params: no dense size
    with pytest.raises(T.MissingData, match="^no converge.csv rows$"):
        T.converge_summary(pd.DataFrame(rows).iloc[:0])
    with pytest.raises(T.MissingData, match="^no converge.csv rows$"):
        T.converge_summary(None)


def test_converge_wire_by_hand():
    gm = pd.DataFrame({"wire_bytes": [10.0, 30.0, 20.0], "model_params": [100, 100, 100]})
    assert T._converge_wire(gm) == 20.0 / 400          # median wire over 4 bytes x 100 parameters
    assert T._converge_wire(gm.assign(model_params=[50, 100, "x"])) == 20.0 / 300  # median of 50, 100: 75
    assert math.isnan(T._converge_wire(gm.assign(model_params=0)))
    assert math.isnan(T._converge_wire(gm.drop(columns=["model_params"])))
    assert math.isnan(T._converge_wire(gm.assign(model_params=math.nan)))


# ------------------------------------------------------------------ planner accuracy


def planned(method, planned_s, bwd_sync_s, wire=None, **kw):
    return dict(row(method, 0.5, fusion="mgwfbp", wire=wire), planned_s=planned_s, bwd_sync_s=bwd_sync_s, **kw)


def test_planner_accuracy_every_column_by_hand():
    e = df(dict(planned("ssgd", 1.25, 1.0, plan_source="mgwfbp", buckets=3), run="a", compress_on="host",
                trains="all train"),
           dict(planned("topk", 0.75, 1.0, plan_source="", buckets=1, wire=10), run="a", compress_on="host",
                trains=None),
           dict(planned("topk", "x", 1.0), run="a", compress_on="host", trains=None),  # no prediction: left out
           dict(planned("dgc", 0.749, 1.0, wire=20), run="b", compress_on="device", trains=None))
    t = T.planner_accuracy(e)
    assert list(t.columns) == ["run", "model", "world_size", "method", "fusion", "pipelining", "compress_on",
                               "plan that ran", "buckets", "trains", "density", W, "planned ms", "measured ms",
                               "error %", "within"]
    assert list(t.index) == [0, 1, 2]
    assert list(t["method"]) == ["ssgd", "topk", "dgc"] and list(t["run"]) == ["a", "a", "b"]
    assert list(t["compress_on"]) == ["host", "host", "device"] and list(t["buckets"][:2]) == [3, 1]
    assert list(t["plan that ran"][:2]) == ["mgwfbp", ""] and t["trains"][0] == "all train"
    assert list(t["planned ms"]) == pytest.approx([1250, 750, 749])
    assert list(t["measured ms"]) == pytest.approx([1000, 1000, 1000])
    assert list(t["error %"]) == pytest.approx([25, -25, -25.1])
    # the default tolerance, 25%, at its edge on both sides: |error| <= 25% is within
    assert T.PLANNER_TOLERANCE_REL == 0.25
    assert list(t["within"]) == ["yes", "yes", "no"]
    assert list(T.planner_accuracy(e, tolerance=0.2)["within"]) == ["no", "no", "no"]
    assert list(T.planner_accuracy(e, tolerance=0.26)["within"]) == ["yes", "yes", "yes"]
    assert math.isnan(t["density"][0]) and list(t["density"][1:]) == [0.001, 0.001]
    assert list(t[W]) == [1.0, 0.0025, 0.005]
    assert "notes" not in t.attrs or t.attrs["notes"] == []
    # without the optional columns: none of them
    bare = df(dict(planned("ssgd", 0.1, 0.1)))
    bare = bare.drop(columns=[c for c in bare.columns if c in ("network",)])
    t = T.planner_accuracy(bare)
    assert list(t.columns) == ["model", "world_size", "method", "fusion", "pipelining", W, "planned ms",
                               "measured ms", "error %", "within"]
    assert list(t["within"]) == ["yes"] and list(t["error %"]) == [0.0]


def test_planner_accuracy_refusals():
    with pytest.raises(T.MissingData, match=r"^no planned_s column \(e2e.csv from before planner predictions\)$"):
        T.planner_accuracy(df(row("ssgd", 0.2)))
    with pytest.raises(T.MissingData, match=r"^no planner fusions \(mgwfbp, omgs, layerfusion\)$"):
        T.planner_accuracy(df(dict(row("ssgd", 0.2), planned_s="", bwd_sync_s=0.1)))
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.planner_accuracy(df(row("ssgd", 0.2)).iloc[:0])


# ------------------------------------------------------------------ DGC's ratio


def test_dgc_ratio_every_row_and_column_by_hand():
    MiB = 2 ** 20
    e = df(row("dgc", 1.0, model="resnet50", density=0.01, dense=100 * MiB, wire=4 * MiB),
           row("dgc", 1.0, model="resnet50", density=0.001, dense=100 * MiB, wire=MiB // 2),
           row("dgc", 1.0, model="resnet50", density=0.001, dense=100 * MiB, wire=MiB // 4, fusion="25MiB"),
           row("dgc", 1.0, model="resnet50", density=0.001, dense=100 * MiB, wire=MiB, pipelining="off"),
           # no fusion-none row of its model and density: the smallest wire of all its rows
           row("dgc", 1.0, model="zeta", density=0.001, dense=8 * MiB, wire=2 * MiB, fusion="25MiB"),
           row("dgc", 1.0, model="zeta", density=0.001, dense=8 * MiB, wire=MiB, fusion="mgwfbp"),
           row("dgc", 1.0, model="alpha", density=0.001, dense=3 * MiB, wire=0),   # no message: no ratio
           row("topk", 0.5, model="lstm-ptb", dense=5 * MiB, wire=MiB))           # not dgc: not read
    t = T.dgc_ratio(e)
    assert list(t.columns) == ["model (paper)", "model", "density", "gradient MiB", "message MiB", "ratio",
                               "gradient MiB (published)", "message MiB (published)", "ratio (published)"]
    assert list(t["model (paper)"]) == ["ResNet-50", "ResNet-50", "AlexNet", "LSTM (2-layer, PTB)", "DeepSpeech",
                                        "", ""]
    assert list(t["model"]) == ["resnet50", "resnet50", "alexnet-caffe", "lstm-ptb", "(not in gradcomp's zoo)",
                                "alpha", "zeta"]
    r = t.iloc[0]  # densities in increasing order
    assert (r["density"], r["gradient MiB"], r["message MiB"], r["ratio"]) == (0.001, 100.0, 0.5, 200.0)
    r = t.iloc[1]
    assert (r["density"], r["gradient MiB"], r["message MiB"], r["ratio"]) == (0.01, 100.0, 4.0, 25.0)
    assert list(t["gradient MiB (published)"][:5]) == [97.49, 97.49, 232.56, 194.68, 488.08]
    assert list(t["message MiB (published)"][:5]) == [0.35, 0.35, 0.39, 0.42, 0.74]
    assert list(t["ratio (published)"][:5]) == [277.0, 277.0, 597.0, 462.0, 608.0]
    for i in (2, 3, 4):  # published models without a dgc row: their own numbers empty
        assert pd.isna(t["density"][i]) and pd.isna(t["gradient MiB"][i]) and pd.isna(t["message MiB"][i])
        assert pd.isna(t["ratio"][i])
    a, z = t.iloc[5], t.iloc[6]
    assert (a["density"], a["gradient MiB"], a["message MiB"]) == (0.001, 3.0, 0.0) and pd.isna(a["ratio"])
    assert (z["gradient MiB"], z["message MiB"], z["ratio"]) == (8.0, 1.0, 8.0)
    for c in ("gradient MiB (published)", "message MiB (published)", "ratio (published)"):
        assert pd.isna(a[c]) and pd.isna(z[c])
    with pytest.raises(T.MissingData, match="^needs e2e rows of method dgc$"):
        T.dgc_ratio(df(row("topk", 1.0)))
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.dgc_ratio(df(row("dgc", 1.0)).iloc[:0])


# ------------------------------------------------------------------ Sketch-Fusion's scalability


def test_sketch_scalability_by_hand():
    s = pd.DataFrame({
        "network": ["eth"] * 5 + ["ib"] * 2, "model": ["m"] * 7, "batch": [10] * 7, "device": ["cpu"] * 7,
        "method": ["topk", "topk", "topk", "ssgd", "ssgd", "topk", "topk"],
        "world_size": [8, 2, 4, 2, 4, 2, 4],                      # out of order: smallest to largest
        "none samples/s": [40.0, 10.0, 30.0, 10.0, 15.0, 10.0, 10.0],
        "layerfusion samples/s": [100.0, 20.0, 50.0, 10.0, 30.0, 10.0, 40.0]})
    t = T.sketch_scalability(s)
    assert list(t.columns) == ["network", "model", "batch", "device", "method", "from ranks", "to ranks",
                               "scaling none", "scaling layerfusion", "layerfusion scalability gain",
                               "gain (published, up to)"]
    assert list(zip(t["network"], t["method"])) == [("eth", "topk"), ("eth", "ssgd"), ("ib", "topk")]
    assert list(t["from ranks"]) == [2, 2, 2] and list(t["to ranks"]) == [8, 4, 4]
    assert list(t["scaling none"]) == [4.0, 1.5, 1.0]           # 40 / 10, 15 / 10, 10 / 10
    assert list(t["scaling layerfusion"]) == [5.0, 3.0, 4.0]    # 100 / 20, 30 / 10, 40 / 10
    assert list(t["layerfusion scalability gain"]) == [1.25, 2.0, 4.0]
    assert list(t["gain (published, up to)"]) == [2.87] * 3
    # without a network column: grouped by the others
    t = T.sketch_scalability(s[s["network"] == "eth"].drop(columns=["network"]))
    assert list(t.columns[:4]) == ["model", "batch", "device", "method"] and len(t) == 2


# ------------------------------------------------------------------ Marsit


def test_marsit_every_column_by_hand():
    e = df(row("ssgd", 0.2, ci=0.01, wire=4000), row("ssgd", 0.19, fusion="25MiB", ci=0.01),  # the best: 25MiB
           row("ssgd", 0.4, collective="ring", ci=0.01, wire=4000),
           row("signsgd", 0.35, ci=0.2, wire=130),
           row("marsit", 0.3, ci=0.05, wire=2 ** 20 // 4, dense=2 ** 20),
           row("marsit", 0.1, collective="allreduce"),            # not its own collective: not read
           row("signsgd", 0.1, collective="ring"),                # only S-SGD is read over the ring too
           row("topk", 0.01))                                      # not in the table
    t = T.marsit(e)
    assert list(t.columns) == ["model", "world_size", "batch", "device", "method", "collective", "config", "iter_ms",
                               "iter_ms ±", "comm_ms", "wire MiB", W, "time reduction vs ssgd ring %",
                               "vs ssgd ring", "time reduction vs ssgd allreduce %", "vs ssgd allreduce",
                               "reduction % (published, up to)"]
    assert list(zip(t["method"], t["collective"], t["config"])) == [
        ("ssgd", "allreduce", "25MiB/on"), ("ssgd", "ring", "none/on"), ("signsgd", "allgather", "none/on"),
        ("marsit", "ring", "none/on")]
    assert list(t["iter_ms"]) == pytest.approx([190, 400, 350, 300])
    assert list(t["iter_ms ±"]) == pytest.approx([10, 10, 200, 50])
    assert list(t["comm_ms"]) == pytest.approx([95, 200, 175, 150])  # row(): comm_s = iter_s / 2
    assert list(t["wire MiB"]) == pytest.approx([4000 / 2 ** 20, 4000 / 2 ** 20, 130 / 2 ** 20, 0.25])
    assert list(t[W]) == [1.0, 1.0, 130 / 4000, 0.25]
    # 100 x (1 - t / t_ssgd): the time saved, not a speed-up; none against the row itself
    ring = list(t["time reduction vs ssgd ring %"])
    assert pd.isna(ring[1]) and ring[0] == pytest.approx(52.5) and ring[2] == pytest.approx(12.5)
    assert ring[3] == pytest.approx(25.0)
    ar = list(t["time reduction vs ssgd allreduce %"])
    assert pd.isna(ar[0]) and ar[1] == pytest.approx(100 * (1 - 0.4 / 0.19))
    assert ar[3] == pytest.approx(100 * (1 - 0.3 / 0.19))
    # 400 vs 190 (+-10 each): slower; 350 +- 200 vs 400 +- 10: inside the noise; 300 +- 50 vs 400 +- 10: faster
    assert list(t["vs ssgd ring"]) == ["faster", "", T.NOT_SIGNIFICANT, "faster"]
    assert list(t["vs ssgd allreduce"]) == ["", "slower", T.NOT_SIGNIFICANT, "slower"]
    assert pd.isna(t["reduction % (published, up to)"][0]) and t["reduction % (published, up to)"][3] == 35.0
    assert t.attrs["notes"] == [T.MARSIT_NOTE_RING]


def test_marsit_of_two_runs_names_each_rows_run():
    # run a holds S-SGD and Marsit: its own comparison; run b's Marsit alone is shown alone
    e = df(row("ssgd", 0.4, run="a"), row("marsit", 0.3, run="a"), row("marsit", 0.2, run="b"),
           # setup m2: no run holds both, so the two runs are compared together
           row("ssgd", 0.4, run="a", model="m2"), row("marsit", 0.1, run="b", model="m2"))
    t = T.marsit(e)
    assert list(t.columns[:6]) == ["model", "world_size", "batch", "device", "run", "method"]
    # setup m3: run b has two methods but not S-SGD, so it holds no comparison: both runs together
    m3 = T.marsit(df(row("ssgd", 0.4, run="a", model="m3"), row("signsgd", 0.3, run="b", model="m3"),
                     row("marsit", 0.2, run="b", model="m3")))
    assert list(m3["run"]) == ["a", "b", "b"] and list(m3["runs compared"]) == ["a + b"] * 3
    assert m3["time reduction vs ssgd allreduce %"][2] == pytest.approx(50.0)
    assert t.columns[-1] == "runs compared"  # only the later rows have it (the other tables put it after run)
    assert list(zip(t["model"], t["run"], t["method"])) == [
        ("m", "a", "ssgd"), ("m", "a", "marsit"), ("m", "b", "marsit"), ("m2", "a", "ssgd"), ("m2", "b", "marsit")]
    assert list(t["runs compared"].fillna("-")) == ["-", "-", "-", "a + b", "a + b"]
    assert list(t["time reduction vs ssgd allreduce %"].fillna(-1)) == pytest.approx([-1, 25.0, -1, -1, 75.0])
    assert t.attrs["notes"] == [T.MARSIT_NOTE_NO_RING]
    with pytest.raises(T.MissingData, match=r"^needs e2e rows of marsit and ssgd$"):
        T.marsit(df(row("marsit", 0.3), row("signsgd", 0.3)))
    with pytest.raises(T.MissingData, match=r"^no e2e rows$"):
        T.marsit(df(row("marsit", 0.3)).iloc[:0])


def test_wire_and_density_of_text_cells_and_of_a_dense_size_of_one_byte():
    # cells as text (an object column): a number is read, an empty cell is no value
    d = pd.DataFrame({"method": ["topk", "topk", "dgc"], "wire_bytes": ["10", "", "3"],
                      "dense_bytes": ["4000", "4000", ""], "density": ["0.001", "", "0.01"]})
    w = T.wire_vs_dense(d)
    assert w[0] == 0.0025 and w.isna().tolist() == [False, True, True]
    rho = T.density_of(d)
    assert rho[0] == 0.001 and math.isnan(rho[1]) and rho[2] == 0.01
    # any positive dense size divides, 1 byte too
    assert list(T.wire_vs_dense(pd.DataFrame({"wire_bytes": [1, 3], "dense_bytes": [1, 2]}))) == [1.0, 1.5]


def test_converge_summary_reach_against_a_dense_loss_of_two_and_variant_names():
    # dense's final loss 2.0: 1.1x is 2.2 (not 1.1 / 2.0); a method named with `@` finds its reason
    rows = (curve("ssgd", [3.0, 2.0]) + curve("dgc@rho=0.01", [3.0, 2.2, 2.6])
            + curve("topk-noef@x", [3.0, 2.0]))
    e = pd.DataFrame(rows).assign(update_rel_err=math.nan)  # a column empty on every row is not a missing loss
    t = T.converge_summary(e).set_index("method")
    assert t.loc["dgc@rho=0.01", "steps_to_1.1x_dense"] == 2 and t.loc["ssgd", "steps_to_1.1x_dense"] == 2
    assert t.loc["dgc@rho=0.01", "x_dense"] == 1.3 and not t.loc["dgc@rho=0.01", "within_tolerance"]
    assert t.loc["dgc@rho=0.01", "why_not"] == T.CONVERGE_WHY_NOT["dgc"]
    assert t.loc["topk-noef@x", "why_not"] == (
        "FAILED CONTROL: this negative control passed the check, so here the check cannot tell; use a control "
        "that fails (topk-noef; docs/methods.md)")


def test_converge_wire_of_one_parameter():
    assert T._converge_wire(pd.DataFrame({"wire_bytes": [2.0], "model_params": [1]})) == 0.5  # 2 / (4 x 1)


def test_marsit_carries_each_rows_trains_verdict():
    e = df(dict(row("ssgd", 0.4), trains="trains (4 steps)"), dict(row("marsit", 0.3), trains="diverged at step 3"),
           dict(row("signsgd", 0.35), trains=None))
    t = T.marsit(e).set_index("method")
    assert t.loc["ssgd", T.TRAINS] == "trains (4 steps)" and t.loc["marsit", T.TRAINS] == "diverged at step 3"
    assert pd.isna(t.loc["signsgd", T.TRAINS])


# ------------------------------------------------------------------ OMGS-SGD


def test_plan_that_ran_by_hand():
    f = T._plan_that_ran
    assert f(pd.Series({"plan_source": "omgs"})) == ["omgs"]
    for v in (None, math.nan, ""):
        assert f(pd.Series({"plan_source": v, "x": 1})) is None
    assert f(pd.Series({"x": 1})) is None
    assert f(pd.DataFrame({"x": [1]})) is None
    assert f(pd.DataFrame({"plan_source": [math.nan, "", None]})) is None
    assert f(pd.DataFrame({"plan_source": [math.nan, "mgwfbp", 3]})) == ["", "mgwfbp", "3"]


def test_cols_by_hand():
    b = pd.DataFrame({"model": ["m", "n"], "iter_s": [0.5, 0.25], "iter_ci95_s": [0.01, 0.02], "iters": [10, 10],
                      "wire_bytes": [10, 20], "dense_bytes": [4000, 4000], "fusion": ["none", "25MiB"],
                      "pipelining": ["on", "off"], "collective": ["allgather", "allreduce"]}, index=[4, 9])
    t = T._cols(b, ["model"], "topk")
    assert list(t.columns) == ["model", "topk ms", "topk ms ±", "topk wire vs dense"]
    assert list(t["topk ms"]) == [500, 250] and list(t["topk ms ±"]) == [10, 20]
    assert list(t["topk wire vs dense"]) == [0.0025, 0.005]
    t = T._cols(b.assign(plan_source=["", "mgwfbp"], trains=["all train", None]), ["model"], "ssgd best", config=True)
    assert list(t.columns) == ["model", "ssgd best ms", "ssgd best ms ±", "ssgd best config",
                               "ssgd best plan that ran", "ssgd best trains"]  # S-SGD: no wire column (1)
    assert list(t["ssgd best config"]) == ["none/on/allgather", "25MiB/off/allreduce"]
    assert list(t["ssgd best plan that ran"]) == ["", "mgwfbp"] and list(t["ssgd best trains"][:1]) == ["all train"]


def test_omgs_every_column_by_hand():
    e = df(row("topk", 0.5, ci=0.01, wire=10), row("topk", 0.1, fusion="25MiB"),     # fused top-k: not layer-wise
           row("topk", 0.45, ci=0.01, pipelining="off"),                            # pipelining on preferred
           row("omgs", 0.4, fusion="omgs", ci=0.01, wire=12),
           row("ssgd", 0.8, fusion="mgwfbp", ci=0.01), row("ssgd", 0.2, fusion="25MiB", ci=0.3),
           row("dgc", 0.01))                                                         # not in the table
    t = T.omgs(e)
    assert list(t.columns) == [
        "model", "world_size", "batch", "device", "density", "ssgd (mgwfbp) ms", "ssgd (mgwfbp) ms ±",
        "ssgd (mgwfbp) config", "ssgd best ms", "ssgd best ms ±", "ssgd best config", "topk (layer-wise) ms",
        "topk (layer-wise) ms ±", "topk (layer-wise) wire vs dense", "omgs ms", "omgs ms ±", "omgs wire vs dense",
        "omgs improvement vs topk %", "omgs vs topk", "omgs speedup vs ssgd (mgwfbp)", "omgs vs ssgd (mgwfbp)",
        "omgs speedup vs ssgd best", "omgs vs ssgd best", "improvement vs topk % (published, up to)"]
    r = t.iloc[0]
    assert len(t) == 1 and r["density"] == 0.001
    assert (r["topk (layer-wise) ms"], r["omgs ms"], r["ssgd (mgwfbp) ms"], r["ssgd best ms"]) == \
        pytest.approx((500, 400, 800, 200))
    assert r["ssgd (mgwfbp) config"] == "mgwfbp/on/allreduce" and r["ssgd best config"] == "25MiB/on/allreduce"
    assert (r["topk (layer-wise) wire vs dense"], r["omgs wire vs dense"]) == (0.0025, 0.003)
    assert r["omgs improvement vs topk %"] == pytest.approx(20.0)          # 100 x (500 - 400) / 500
    assert r["omgs speedup vs ssgd (mgwfbp)"] == pytest.approx(2.0) and r["omgs speedup vs ssgd best"] == 0.5
    assert r["omgs vs topk"] == "faster" and r["omgs vs ssgd (mgwfbp)"] == "faster"
    assert r["omgs vs ssgd best"] == T.NOT_SIGNIFICANT                      # |400 - 200| <= 10 + 300
    assert r["improvement vs topk % (published, up to)"] == 31.0
    # without S-SGD: no S-SGD columns; the trains verdicts folded into one column
    t = T.omgs(df(dict(row("topk", 0.5), trains="trains (4 steps)"),
                  dict(row("omgs", 0.4, fusion="omgs"), trains="diverged at step 3")))
    assert not any(c.startswith("ssgd") for c in t.columns) and "omgs speedup vs ssgd best" not in t.columns
    assert t[T.TRAINS].tolist() == ["omgs: diverged at step 3; others train"]
    assert not any(c.endswith(" trains") for c in t.columns)


def test_omgs_refusals():
    with pytest.raises(T.MissingData, match=r"^needs e2e rows of omgs and of topk with fusion none$"):
        T.omgs(df(row("omgs", 0.4, fusion="omgs"), row("topk", 0.5, fusion="25MiB")))
    with pytest.raises(T.MissingData, match=r"^needs e2e rows of omgs and of topk with fusion none$"):
        T.omgs(df(row("topk", 0.5)))
    with pytest.raises(T.MissingData, match=r"^needs omgs and layer-wise topk rows of the same setup and density$"):
        T.omgs(df(row("topk", 0.5, density=0.01), row("omgs", 0.4, fusion="omgs")))
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.omgs(df(row("topk", 0.5)).iloc[:0])


def test_omgs_keeps_a_setup_without_an_ssgd_baseline_and_compares_across_runs_only_without_topk_and_omgs_in_one():
    t = T.omgs(df(row("topk", 0.5), row("omgs", 0.4, fusion="omgs"), row("ssgd", 0.8, fusion="mgwfbp"),
                  row("topk", 0.5, model="m2"), row("omgs", 0.25, fusion="omgs", model="m2")))
    assert list(t["model"]) == ["m", "m2"] and pd.isna(t["ssgd (mgwfbp) ms"][1]) and pd.isna(t["ssgd best ms"][1])
    assert t["omgs improvement vs topk %"][1] == pytest.approx(50.0)
    # run a has two methods but not OMGS: no run holds the comparison, so both runs together
    t = T.omgs(df(row("topk", 0.5, run="a"), row("ssgd", 0.8, run="a", fusion="mgwfbp"),
                  row("omgs", 0.4, run="b", fusion="omgs")))
    assert list(t["run"]) == ["a + b"] and t["omgs improvement vs topk %"][0] == pytest.approx(20.0)
