"""The verdicts users read, branch by branch (issue 49): each test here kills a plausible
one-line bug that the older tests let through (docs/mutation.md lists which). Every
expected number is computed by hand in the test, never by the code under test.

- compare: a run B *faster* than A by more than the tolerance fails as a slower one does;
  the tolerance's bound is inside.
- the median of repeats (tables.collapse_repeats, and compare through it) at 2, 3 and 4
  repeats: the lower middle repeat for an even count, as its doc promises.
- paper scale (report._speedup_claim, paper_scale_tables): every aggregation (mean, all,
  max_pct, max_less_pct, the DGC size ratio and the sketch-scaling gain) on fixtures whose
  direction flips on one model.
- sim-agreement: cases or world sizes missing on either side.
"""

import os

import pandas as pd
import pytest

from gradcomp_analysis import compare as C
from gradcomp_analysis import tables as T
from gradcomp_analysis.__main__ import main
from gradcomp_analysis.io import ReportError
from gradcomp_analysis.report import _speedup_claim, find_paper_scale, paper_scale_tables
from gradcomp_analysis.simagree import agreement
from test_simagree import out_dir as sa_dir  # a `make sim-accuracy` folder


# ---------------------------------------------------------------------------------- compare
def e2e(times, ci=0.00002, ids="c", iters=50):
    """e2e rows of one run: [(method, iter_s)] (a method listed twice is a repeat of one case)."""
    rows = []
    for i, (m, t) in enumerate(times):
        rows.append(dict(schema_version=1, run_id="r", case_id=f"{ids}{i}", model="resnet20", method=m,
                         fusion="256KiB", pipelining="on", collective="allreduce", aggregation="allreduce",
                         world_size=4, batch=128, device="rtx2080ti", compress_on="host", iters=iters, warmup=5,
                         density=0.001, rank=4, compress_s=0.0, comm_s=t / 2, decompress_s=0.0,
                         exposed_s=t / 4, iter_s=t, iter_ci95_s=ci, dense_bytes=1000, wire_bytes=1000))
    return pd.DataFrame(rows)


def run(tmp_path, name, df):
    d = tmp_path / name
    d.mkdir()
    df.to_csv(d / "e2e.csv", index=False)
    return str(d)


@pytest.mark.parametrize("b_s, within, shown", [
    (0.0017, False, "-15.0%"),   # B 15% faster: outside 10% as much as 15% slower is
    (0.0023, False, "+15.0%"),
    (0.00185, True, "-7.5%"),
    (0.00215, True, "+7.5%"),
])
def test_compare_judges_b_faster_and_slower_alike(tmp_path, b_s, within, shown):
    a = run(tmp_path, "a", e2e([("ssgd", 0.0020)]))
    b = run(tmp_path, "b", e2e([("ssgd", b_s)]))
    ok, path, res = C.compare_result(a, b, 0.10, str(tmp_path / "out"))
    assert ok is within
    assert bool(res["times"]["within"].iloc[0]) is within
    assert f"{shown}" in open(path).read()
    assert main(["compare", a, b, "--out", str(tmp_path / "out2")]) == (0 if within else 1)


@pytest.mark.parametrize("b_s", [0.5625, 0.4375])  # exactly +12.5% and -12.5% (binary fractions)
def test_compare_tolerance_bound_is_inside_on_both_sides(b_s):
    fa = _frame(e2e([("ssgd", 0.5)]))
    fb = _frame(e2e([("ssgd", b_s)]))
    assert C.compare_runs(fa, fb, 0.125)["ok"]
    assert not C.compare_runs(fa, fb, 0.124)["ok"]


def _frame(df):
    """compare's reading of an e2e frame, without a file (what C._e2e does after load_csv)."""
    df = T.collapse_repeats(df.copy())
    df["ci"] = T.ci_s(df)
    df["label"] = C._labels(df).values
    df.index = ["|".join(str(v) for v in r) for r in df[T.case_keys(df)].itertuples(index=False)]
    return df


def test_compare_failure_lines_name_the_faster_case(tmp_path):
    a = run(tmp_path, "a", e2e([("ssgd", 0.0020), ("topk", 0.0030)]))
    b = run(tmp_path, "b", e2e([("ssgd", 0.0017), ("topk", 0.0030)]))
    ok, path, res = C.compare_result(a, b, 0.10, str(tmp_path / "o"))
    assert not ok and C.result_line(res) == "FAIL"
    fails = C.failures(res)
    assert fails == ["  outside: ssgd 256KiB/on/allreduce (resnet20, 4 ranks): 2 ms vs 1.7 ms, -15.0%"]
    text = C.printed(res, 0.10, path)
    assert "result: FAIL" in text and "failing cases:" in text and "largest difference 15.0%" in text


@pytest.mark.parametrize("repeats, median_ms", [
    ([2.0, 3.0], 2.0),                 # even: the lower middle, not the slower repeat
    ([3.0, 2.0], 2.0),
    ([3.0, 2.2, 2.0], 2.2),
    ([3.0, 2.0, 2.6, 2.2], 2.2),       # sorted 2.0 2.2 2.6 3.0: the lower middle 2.2
])
def test_compare_takes_the_lower_middle_repeat(tmp_path, repeats, median_ms):
    a = run(tmp_path, "a", e2e([("ssgd", t / 1e3) for t in repeats]))
    b = run(tmp_path, "b", e2e([("ssgd", median_ms / 1e3)], ids="z"))
    ok, _, res = C.compare_result(a, b, 0.05, str(tmp_path / "o"))
    assert res["times"]["a_ms"].iloc[0] == pytest.approx(median_ms)
    assert res["times"]["diff_pct"].iloc[0] == pytest.approx(0.0)
    # the spread of the repeats widens the interval: half their range
    assert res["times"]["a_ci_ms"].iloc[0] == pytest.approx((max(repeats) - min(repeats)) / 2)
    assert ok


# ------------------------------------------------------------------------- collapse_repeats
@pytest.mark.parametrize("repeats, median, ci", [
    ([5.0], 5.0, 0.1),                      # one row: unchanged
    ([5.0, 7.0], 5.0, 1.0),                 # even: the lower middle; half the range 1.0 > 0.1
    ([7.0, 5.0], 5.0, 1.0),
    ([6.0, 5.0, 9.0], 6.0, 2.0),
    ([9.0, 5.1, 5.0, 5.2], 5.1, 2.0),       # sorted 5.0 5.1 5.2 9.0 -> 5.1
    ([5.0, 5.1, 5.2, 5.3], 5.1, 0.15),      # half the range 0.15 > 0.1
    ([5.0, 5.04], 5.0, 0.1),                # half the range 0.02 < the row's own interval 0.1: kept
])
def test_collapse_repeats_median_and_interval(repeats, median, ci):
    df = e2e([("ssgd", t) for t in repeats], ci=0.1)
    other = e2e([("topk", 1.0)], ids="t")   # a case timed once beside it
    out = T.collapse_repeats(pd.concat([df, other], ignore_index=True))
    s = out[out["method"] == "ssgd"]
    assert len(s) == 1
    assert s["iter_s"].iloc[0] == pytest.approx(median)
    assert s["iter_ci95_s"].iloc[0] == pytest.approx(ci)
    if len(repeats) > 1:
        assert s["repeats"].iloc[0] == len(repeats)
        assert out.loc[out["method"] == "topk", "repeats"].tolist() == [1]
        # the chosen row is that repeat's own row (its other columns go with it)
        assert s["comm_s"].iloc[0] == pytest.approx(median / 2)
    else:
        assert "repeats" not in out.columns    # nothing repeated: the frame as it was


def test_collapse_repeats_without_an_interval_column_uses_half_the_range():
    df = e2e([("ssgd", 4.0), ("ssgd", 6.0), ("ssgd", 5.0)]).drop(columns=["iter_ci95_s"])
    out = T.collapse_repeats(df)
    assert out["iter_s"].tolist() == [5.0] and out["iter_ci95_s"].tolist() == [1.0]


def test_collapse_repeats_keeps_runs_apart_and_old_files_unchanged():
    a = e2e([("ssgd", 4.0), ("ssgd", 6.0)]).assign(run="x")
    b = e2e([("ssgd", 9.0), ("ssgd", 8.0)]).assign(run="y")
    out = T.collapse_repeats(pd.concat([a, b], ignore_index=True))
    assert sorted(zip(out["run"], out["iter_s"])) == [("x", 4.0), ("y", 8.0)]
    old = e2e([("ssgd", 4.0), ("ssgd", 6.0)]).drop(columns=["case_id"])
    assert T.collapse_repeats(old) is old
    assert T.collapse_repeats(None) is None


# ------------------------------------------------------------------------------ paper scale
ZERO = {"compress_s": 0.0, "decompress_s": 0.0, "comm_s": 0.0, "pack_s": 0.0, "exposed_s": 0.0}


def sim(model, method, iter_s, on="host", fusion="25MiB", world_size=16, rank=None, pipelining="on", **kw):
    if rank is None:
        rank = {"resnet50": 4, "bert-base": 32}.get(model, 4)
    return {"schema_version": 1, "source": "simulated", "model": model, "method": method, "fusion": fusion,
            "pipelining": pipelining, "world_size": world_size, "compress_on": on, "rank": rank, "iter_s": iter_s,
            "density": 0.001, **{**ZERO, **{k: v for k, v in kw.items() if k in ZERO}},
            "dense_bytes": kw.get("dense_bytes", 100), "wire_bytes": kw.get("wire_bytes", 10),
            "cost_source": f"network preset 10gbe; {on} costs"}


def paper(tmp_path, headline, rows, sub=None, error=None):
    d = tmp_path / "ps" / headline / (sub or headline)
    d.mkdir(parents=True)
    (d / "paper_scale.txt").write_text(f"headline={headline}\nnetwork=10gbe\nranks_per_node=4\n")
    if rows is not None:
        pd.DataFrame(rows).to_csv(d / "sim.csv", index=False)
    if error:
        (d / "error.txt").write_text(error + "\n")
    return str(tmp_path / "ps")


def heads_of(root):
    return paper_scale_tables(find_paper_scale([root]))[0].set_index(["headline", "claim"], drop=False)


def claim(df, agg, a="acpsgd", b="ssgd"):
    return _speedup_claim(pd.DataFrame(df), ["compress_on", "model"],
                          lambda d: d["method"] == a, lambda d: d["method"] == b, agg)


# ACP-SGD 4x faster than S-SGD on resnet50, 2x slower on bert-base (speed-ups 4 and 0.5):
# the mean 2.25 > 1, but not faster for every model.
# ACP-SGD's compress_s is 0.5 s above S-SGD's on resnet50, where it is faster anyway: not the
# deciding cost, which is taken over the setups where it is not faster.
FLIP = [sim("resnet50", "ssgd", 4.0), sim("resnet50", "acpsgd", 1.0, compress_s=0.5),
        sim("bert-base", "ssgd", 1.0), sim("bert-base", "acpsgd", 2.0, comm_s=0.3, exposed_s=0.1)]


def test_mean_and_all_disagree_when_one_model_flips():
    v, ok, cost = claim(FLIP, "mean")["host"]
    assert (v, ok, cost) == (pytest.approx((4 + 0.5) / 2), True, "")
    v, ok, cost = claim(FLIP, "all")["host"]
    assert v == pytest.approx(2.25) and ok is False
    # the deciding cost is summed over the setup where ACP-SGD is not faster (bert-base only)
    assert cost == "comm_s (+300.0 ms)"


def test_all_holds_when_every_model_is_faster_and_mean_fails_below_one():
    rows = [sim("resnet50", "ssgd", 1.1), sim("resnet50", "acpsgd", 1.0),
            sim("bert-base", "ssgd", 1.0), sim("bert-base", "acpsgd", 0.5)]
    assert claim(rows, "all")["host"][:2] == (pytest.approx((1.1 + 2.0) / 2), True)
    slow = [sim("resnet50", "ssgd", 1.0), sim("resnet50", "acpsgd", 2.0),     # 0.5
            sim("bert-base", "ssgd", 1.2), sim("bert-base", "acpsgd", 1.0)]   # 1.2: mean 0.85
    v, ok, _ = claim(slow, "mean")["host"]
    assert v == pytest.approx(0.85) and not ok
    # a speed-up of exactly 1 is not faster
    tie = [sim("resnet50", "ssgd", 1.0), sim("resnet50", "acpsgd", 1.0)]
    assert claim(tie, "mean")["host"][1] is False and claim(tie, "all")["host"][1] is False
    assert claim(tie, "max_pct")["host"][1] is False and claim(tie, "max_less_pct")["host"][1] is False


def test_max_pct_and_max_less_pct_by_hand():
    # OMGS-style: 25% and 10% faster -> up to 25%; Marsit-style: 40% and 20% less time -> up to 40%
    rows = [sim("resnet50", "ssgd", 1.0), sim("resnet50", "acpsgd", 0.8),
            sim("bert-base", "ssgd", 0.55), sim("bert-base", "acpsgd", 0.5)]
    assert claim(rows, "max_pct")["host"][:2] == (pytest.approx(25.0), True)
    less = [sim("resnet50", "ssgd", 1.0), sim("resnet50", "acpsgd", 0.6),
            sim("bert-base", "ssgd", 1.0), sim("bert-base", "acpsgd", 0.8)]
    assert claim(less, "max_less_pct")["host"][:2] == (pytest.approx(40.0), True)
    # an "up to" claim holds when one model is faster though another is slower
    mixed = [sim("resnet50", "ssgd", 1.0), sim("resnet50", "acpsgd", 0.8),
             sim("bert-base", "ssgd", 1.0), sim("bert-base", "acpsgd", 1.5)]
    assert claim(mixed, "max_pct")["host"][:2] == (pytest.approx(25.0), True)
    assert claim(mixed, "max_less_pct")["host"][:2] == (pytest.approx(20.0), True)
    # slower everywhere: negative, direction fails, the deciding cost over every model
    worse = [sim("resnet50", "ssgd", 1.0), sim("resnet50", "acpsgd", 1.25, pack_s=0.2),
             sim("bert-base", "ssgd", 1.0), sim("bert-base", "acpsgd", 2.0, pack_s=0.1)]
    v, ok, cost = claim(worse, "max_pct")["host"]
    assert (v, ok, cost) == (pytest.approx(-20.0), False, "pack_s (+300.0 ms)")
    v, ok, _ = claim(worse, "max_less_pct")["host"]
    assert (v, ok) == (pytest.approx(-25.0), False)


def test_each_compress_on_is_judged_apart_and_the_best_row_is_taken():
    rows = [sim("resnet50", "ssgd", 2.0, "host"), sim("resnet50", "acpsgd", 1.0, "host"),
            # device: the acpsgd rows' best is 4.0 (pipelining on), S-SGD's best 2.0
            sim("resnet50", "ssgd", 2.0, "device"), sim("resnet50", "ssgd", 3.0, "device", pipelining="off"),
            sim("resnet50", "acpsgd", 4.0, "device"), sim("resnet50", "acpsgd", 5.0, "device", pipelining="off")]
    res = claim(rows, "mean")
    assert res["host"][:2] == (pytest.approx(2.0), True)
    assert res["device"][:2] == (pytest.approx(0.5), False)
    # no rows for a compress_on: no entry
    assert set(claim(rows[:2], "mean")) == {"host"}


def test_acpsgd_scaling_headline_is_not_reproduced_when_one_model_is_slower(tmp_path):
    # Power-SGD as fast as S-SGD: the same flip against both baselines
    rows = [{**r, "world_size": 8} for r in FLIP]
    rows += [{**r, "method": "powersgd"} for r in rows if r["method"] == "ssgd"]
    root = paper(tmp_path, "acpsgd-scaling", rows)
    h = paper_scale_tables(find_paper_scale([root]))[0]
    assert len(h) == 2
    row = h.iloc[0]
    assert row["claim"] == "ACP-SGD faster than S-SGD for every model (published: mean over all setups)"
    assert h.iloc[1]["verdict host"] == "not reproduced"
    assert row["ours host"] == "2.25x"              # the mean shown: (4 + 0.5) / 2
    assert row["verdict host"] == "not reproduced"  # though the mean is above 1
    assert row["deciding cost (not reproduced)"] == "host: comm_s (+300.0 ms)"
    assert row["setup"].startswith("8 workers")


def test_marsit_headline_is_percent_less_time(tmp_path):
    # 40% less time on resnet50 (0.6 vs 1.0 s), 10% on vgg16: up to 40%, not the 66.7% speed-up
    rows = [sim("resnet50", "ssgd", 1.0), sim("resnet50", "marsit", 0.6),
            sim("vgg16", "ssgd", 2.0), sim("vgg16", "marsit", 1.8),
            sim("resnet50", "ssgd", 1.0, "device"), sim("resnet50", "marsit", 1.25, "device", comm_s=0.25)]
    root = paper(tmp_path, "marsit", rows)
    row = heads_of(root).xs("marsit", level="headline").iloc[0]
    assert row["ours host"] == "40.00%"
    assert row["ours/published host"] == f"{40 / 35:.2f}"
    assert row["verdict host"] == "size reproduced"         # 40 / 35 = 1.14, inside 1.5
    assert row["ours device"] == "-25.00%"                  # 1 - 1.25 / 1.0
    assert row["verdict device"] == "not reproduced"
    assert row["deciding cost (not reproduced)"] == "device: comm_s (+250.0 ms)"


def test_omgs_headline_up_to_percent_and_its_failure(tmp_path):
    rows = [sim("resnet50", "topk", 1.0, fusion="none"), sim("resnet50", "omgs", 0.8, fusion="omgs"),
            # fusion-merged Top-k is not the baseline: ignored though faster
            sim("resnet50", "topk", 0.5, fusion="25MiB"),
            sim("vgg16", "topk", 1.0, fusion="none"), sim("vgg16", "omgs", 1.1, fusion="omgs")]
    for r in rows:
        r["plan_source"] = "omgs" if r["method"] == "omgs" else ""
    root = paper(tmp_path, "omgs", rows)
    row = heads_of(root).xs("omgs", level="headline").iloc[0]
    assert row["ours host"] == "25.00%"                      # 1.0 / 0.8 - 1
    assert row["verdict host"] == "size reproduced"          # 25 / 31 = 0.81
    assert row["plan that ran"] == "host: omgs"
    assert row["verdict device"] == "n/a: no omgs rows"      # no device rows
    failed = paper(tmp_path / "f", "omgs", None, error="simulate\ngradcomp: error: cannot extrapolate")
    row = heads_of(failed).xs("omgs", level="headline").iloc[0]
    assert row["verdict host"] == "n/a: gradcomp: error: cannot extrapolate"
    assert row["plan that ran"] == "not recorded (sim.csv without plan_source)"


def test_sketch_fusion_headline(tmp_path):
    rows = [sim("resnet50", "sketch", 1.0, fusion="none"), sim("resnet50", "sketch-fusion", 0.85, fusion="layerfusion"),
            sim("resnet50", "sketch-fusion", 0.1, fusion="25MiB"),   # not LayerFusion: ignored
            sim("vgg16", "sketch", 1.0, fusion="none"), sim("vgg16", "sketch-fusion", 0.9, fusion="layerfusion")]
    root = paper(tmp_path, "sketch-fusion", rows)
    row = heads_of(root).xs("sketch-fusion", level="headline").iloc[0]
    assert row["ours host"] == "17.65%"                  # 1 / 0.85 - 1, the larger of 17.65% and 11.11%
    assert row["verdict host"] == "size reproduced"      # 17.65 / 18.6 = 0.95
    # 1 / 0.9 - 1 = 11.11% alone: 11.11 / 18.6 = 0.597, below 1 / 1.5: the direction only
    root = paper(tmp_path / "b", "sketch-fusion", rows[3:])
    row = heads_of(root).xs("sketch-fusion", level="headline").iloc[0]
    assert (row["ours host"], row["verdict host"]) == ("11.11%", "direction only")


def scaling_rows(on, t):
    """sketch-scaling rows: T = {(model, fusion, world_size): iter_s}, method topk, comm_s half of it."""
    return [sim(m, "topk", s, on, fusion=f, world_size=n, comm_s=s / 2) for (m, f, n), s in t.items()]


def test_sketch_scaling_gain_by_hand(tmp_path):
    # scalability = (16 / t16) / (8 / t8):
    #   resnet50 none:        t8 1.0, t16 2.0 -> 8 / 8 = 1.0;  layerfusion t8 1.0, t16 1.0 -> 16 / 8 = 2.0: gain 2.0
    #   vgg16    none:        t8 1.0, t16 1.0 -> 2.0;          layerfusion t8 1.0, t16 1.6 -> 1.25: gain 0.625
    host = {("resnet50", "none", 8): 1.0, ("resnet50", "none", 16): 2.0,
            ("resnet50", "layerfusion", 8): 1.0, ("resnet50", "layerfusion", 16): 1.0,
            ("vgg16", "none", 8): 1.0, ("vgg16", "none", 16): 1.0,
            ("vgg16", "layerfusion", 8): 1.0, ("vgg16", "layerfusion", 16): 1.6}
    # device: vgg16 only, where LayerFusion loses: not reproduced, the cost named at 16 workers
    device = {k: v for k, v in host.items() if k[0] == "vgg16"}
    root = paper(tmp_path, "sketch-scaling", scaling_rows("host", host) + scaling_rows("device", device))
    row = heads_of(root).xs("sketch-scaling", level="headline").iloc[0]
    assert row["setup"].startswith("8-16 workers")
    assert row["ours host"] == "2.00x" and row["verdict host"] == "size reproduced"   # 2.0 / 2.87 = 0.697 >= 1 / 1.5
    assert row["ours device"] == "0.62x" and row["verdict device"] == "not reproduced"
    # vgg16 at 16 workers: layerfusion's comm_s 0.8 s against none's 0.5 s
    assert row["deciding cost (not reproduced)"] == "device: comm_s (+300.0 ms) at 16 workers"


def test_sketch_scaling_needs_both_fusions(tmp_path):
    nofusion = paper(tmp_path, "sketch-scaling", scaling_rows("host", {("resnet50", "none", 8): 1.0,
                                                                       ("resnet50", "none", 16): 1.0}))
    row = heads_of(nofusion).xs("sketch-scaling", level="headline").iloc[0]
    assert row["ours host"] == "" and row["verdict host"] == ""


def test_dgc_size_ratio_direction_at_100(tmp_path):
    rows = [sim("resnet50", "dgc", 1.0, dense_bytes=27700, wire_bytes=100),          # 277x: the published size
            sim("resnet50", "dgc", 1.0, "device", dense_bytes=9999, wire_bytes=100),  # 99.99x: below 100
            sim("alexnet-caffe", "dgc", 1.0, dense_bytes=10000, wire_bytes=100)]      # exactly 100x holds
    root = paper(tmp_path, "dgc", rows)
    h = heads_of(root).xs("dgc", level="headline")
    r50 = h[h["setup"].str.startswith("ResNet-50")].iloc[0]
    assert (r50["ours host"], r50["verdict host"]) == ("277.00x", "size reproduced")
    assert (r50["ours device"], r50["verdict device"]) == ("99.99x", "not reproduced")
    assert r50["deciding cost (not reproduced)"] == "device: wire_bytes (message too large)"
    alex = h[h["setup"].str.startswith("AlexNet")].iloc[0]
    assert (alex["ours host"], alex["verdict host"]) == ("100.00x", "direction only")  # 100 / 597 = 0.17
    # LSTM has no rows and DeepSpeech is not in the zoo: no headline row for them
    assert len(h) == 2


def test_acpsgd_main_per_network_mean_with_one_model_flipping(tmp_path):
    rows = [sim(m, meth, t, world_size=32) for m, meth, t in [
        ("resnet50", "ssgd", 4.0), ("resnet50", "powersgd", 1.0), ("resnet50", "acpsgd", 1.0),
        ("bert-base", "ssgd", 1.0), ("bert-base", "powersgd", 1.0), ("bert-base", "acpsgd", 2.0)]]
    root = paper(tmp_path, "acpsgd-main", rows, sub="10gbe")
    heads, acp, _ = paper_scale_tables(find_paper_scale([root]))
    assert list(acp["network"]) == ["10gbe"]
    assert acp["ACP/S-SGD host"].iloc[0] == pytest.approx(2.25)      # (4 + 0.5) / 2
    assert acp["ACP/Power-SGD host"].iloc[0] == pytest.approx(0.75)  # (1 + 0.5) / 2
    assert pd.isna(acp["ACP/S-SGD device"].iloc[0])
    v = dict(zip(heads["claim"], heads["verdict host"]))
    assert v["ACP-SGD faster than S-SGD (mean)"] == "direction only"       # 2.25 / 4.06 = 0.55
    assert v["ACP-SGD faster than Power-SGD (mean)"] == "not reproduced"   # mean 0.75 <= 1
    assert set(heads["verdict device"]) == {""}


# ---------------------------------------------------------------------------- sim-agreement
def svm(cases, verdict="within"):
    return pd.DataFrame([dict(schema_version=1, case=c, method=c.split("/")[0], world_size=2, measured_iter_s=1e-3,
                              simulated_iter_s=1e-3, rel_err=0.01, tolerance=0.15, role="validation",
                              verdict=verdict, spread_rel=0.01, fit_spread_rel=None, host_jitter_rel=None)
                         for c in cases])


CASES = ["ssgd/host", "topk/host"]


@pytest.mark.parametrize("a_cases, b_cases, missing", [
    (CASES, CASES[:1], "topk/host"),                  # B lacks a case of A
    (CASES[:1], CASES, "topk/host"),                  # B has a case A lacks
    (CASES, ["ssgd/host", "qsgd/host"], "qsgd/host"),  # one each: the first in sorted order
])
def test_sim_agreement_refuses_cases_in_one_run_only(tmp_path, capsys, a_cases, b_cases, missing):
    a = sa_dir(tmp_path, "a", {"np2": svm(a_cases)})
    b = sa_dir(tmp_path, "b", {"np2": svm(b_cases)})
    for x, y in [(a, b), (b, a)]:
        with pytest.raises(ReportError, match=f"case {missing} is in one run only"):
            agreement(x, y)
        assert main(["sim-agreement", x, y]) == 2
    assert "not of one config" in capsys.readouterr().err


@pytest.mark.parametrize("b_nps", [["np2"], ["np2", "np4", "np8"]])
def test_sim_agreement_fails_a_world_size_in_one_run_only(tmp_path, capsys, b_nps):
    a = sa_dir(tmp_path, "a", {"np2": svm(CASES), "np4": svm(CASES)})
    b = sa_dir(tmp_path, "b", {n: svm(CASES) for n in b_nps})
    extra = "np4" if b_nps == ["np2"] else "np8"
    for x, y, side in [(a, b, "a" if extra == "np4" else "b"), (b, a, "b" if extra == "np4" else "a")]:
        ok, text, table = agreement(x, y)
        assert not ok
        assert "np2: the same verdict for 2 of 2 cases" in text
        assert text.splitlines()[-1] == f"not compared (in one run only): {extra} (only in {side})"
        assert main(["sim-agreement", x, y]) == 1
    capsys.readouterr()


def test_section_lists_the_published_validation_and_each_paper(tmp_path):
    from gradcomp_analysis.report import Report, paper_scale_section, published_validation
    root = paper(tmp_path, "omgs", [sim("resnet50", "topk", 1.0, fusion="none"),
                                    sim("resnet50", "omgs", 0.8, fusion="omgs")])
    d = tmp_path / "ps" / "omgs" / "omgs"
    pd.DataFrame([dict(quantity="allreduce 100 MB", workers=16, elements=25_000_000, published_s=0.5, ours_s=0.6,
                       ours_over_published=1.2, published_source="OMGS-SGD table 2",
                       ours_source="preset 1gbe")]).to_csv(d / "published_validation.csv", index=False)
    found = find_paper_scale([root])
    v = published_validation(found)
    assert v[["published ms", "ours ms", "ours/published"]].values.tolist() == [[500.0, 600.0, 1.2]]
    (tmp_path / "rep").mkdir()
    R = Report(str(tmp_path / "rep"), False)
    paper_scale_section(R, found)
    text = "\n".join(R.lines)
    assert "## Paper scale (simulated)" in text
    assert "- `omgs`: Shi et al., OMGS-SGD" in text and "GPUs per node not recorded" in text
    assert "**Verdicts** (1 headlines): host: 1 size reproduced" in text
    assert published_validation([{"path": str(tmp_path), "label": "x"}]).empty


def test_sim_agreement_details_that_mutation_testing_asked_for(tmp_path):
    """The survivors of `scripts/mutants.sh` on simagree.py (docs/mutation.md): only npN
    folders with a sim/ are world sizes; the per-case table's `run` column and its index;
    a changed verdict without any noise says `one round`; the error names both sides."""
    a = sa_dir(tmp_path, "a", {"np2": svm(CASES), "np4": svm(CASES)})
    (tmp_path / "a" / "notes" / "sim").mkdir(parents=True)     # not npN: not a world size
    (tmp_path / "a" / "np8").mkdir()                          # npN without sim/: not one either
    b = sa_dir(tmp_path, "b", {"np2": svm(CASES), "np4": svm(CASES, verdict="outside")})
    ok, text, table = agreement(a, b)
    assert ok is False
    assert text.splitlines() == ["np2: the same verdict for 2 of 2 cases", "np4: the same verdict for 0 of 2 cases",
                                 "  ssgd/host: within +1.0% (spread 1.0%) -> outside +1.0% (spread 1.0%)",
                                 "  topk/host: within +1.0% (spread 1.0%) -> outside +1.0% (spread 1.0%)"]
    assert list(table.columns[:2]) == ["run", "case"] and table["run"].tolist() == ["np2", "np2", "np4", "np4"]
    assert list(table.index) == [0, 1, 2, 3]
    quiet = svm(CASES).assign(spread_rel=None)
    c = sa_dir(tmp_path, "c", {"np2": quiet})
    d = sa_dir(tmp_path, "d", {"np2": quiet.assign(verdict="outside")})
    assert "ssgd/host: within +1.0% (one round) -> outside +1.0% (one round)" in agreement(c, d)[1]
    e = sa_dir(tmp_path, "e", {"np8": svm(CASES), "np16": svm(CASES)})
    with pytest.raises(ReportError, match=rf"^{a} \(np2, np4\) and {e} \(np16, np8\) share no world size$"):
        agreement(a, e)
    ok, text, _ = agreement(a, sa_dir(tmp_path, "f", {"np2": svm(CASES), "np4": svm(CASES), "np8": svm(CASES)}))
    assert ok is False and text.splitlines()[-1] == "not compared (in one run only): np8 (only in b)"


def test_compare_runs_details_that_mutation_testing_asked_for(tmp_path):
    """Survivors of `scripts/mutants.sh` on compare.py (docs/mutation.md)."""
    # iters_run (adaptive timing) decides whether a case was timed once, before iters
    a = e2e([("ssgd", 0.0020), ("topk", 0.0030)]).assign(iters_run=[1, 40])
    b = e2e([("ssgd", 0.0025), ("topk", 0.0030)]).assign(iters_run=[1, 40])   # +25%, not judged
    res = C.compare_runs(_frame(a), _frame(b), 0.10)
    assert res["times"]["judged"].tolist() == [False, True] and res["ok"]
    # two timed iterations are a timing claim: judged
    two = C.compare_runs(_frame(e2e([("ssgd", 0.0020)], iters=2)), _frame(e2e([("ssgd", 0.0030)], iters=2)), 0.1)
    assert two["times"]["judged"].tolist() == [True] and not two["ok"]
    # iters_run in one run only: wire bytes judged as if the iterations matched
    res = C.compare_runs(_frame(a), _frame(e2e([("ssgd", 0.0020), ("topk", 0.0030)])), 0.10)
    assert res["times"]["same_wire"].tolist() == [True, True]
    # the interval of run b is in ms too
    b = e2e([("ssgd", 0.0020)], ci=0.0003)
    assert C.compare_runs(_frame(e2e([("ssgd", 0.0020)])), _frame(b), 0.1)["times"]["b_ci_ms"].iloc[0] == \
        pytest.approx(0.3)


def test_compare_pairs_skip_pairs_significant_in_neither_run_and_go_on():
    # ssgd and topk inside the noise in both runs (no conclusion); ssgd vs dgc significant in both
    rows = [("ssgd", 0.0020), ("topk", 0.00200001), ("dgc", 0.0040)]
    res = C.compare_runs(_frame(e2e(rows)), _frame(e2e(rows)), 0.1)
    got = sorted((p["case"].split()[0], p["vs"].split()[0], p["verdict"]) for _, p in res["pairs"].iterrows())
    assert got == [("ssgd", "dgc", "agree"), ("topk", "dgc", "agree")]
    # a setup key that is empty in every row (no device recorded) still forms one setup
    nodev = e2e(rows).assign(device=None)
    assert len(C.compare_runs(_frame(nodev), _frame(nodev), 0.1)["pairs"]) == 2


def test_compare_half_the_cases_shared_is_one_config():
    a = _frame(e2e([("ssgd", 0.002), ("topk", 0.002)]))
    b = _frame(e2e([("ssgd", 0.002), ("dgc", 0.002)]))
    res = C.compare_runs(a, b, 0.1)          # 1 of 3 shared: different configs
    assert res["different_configs"] is True
    a = _frame(e2e([("ssgd", 0.002), ("topk", 0.002), ("qsgd", 0.002)]))
    b = _frame(e2e([("ssgd", 0.002), ("topk", 0.002), ("dgc", 0.002), ("signsgd", 0.002)]))
    res = C.compare_runs(a, b, 0.1)          # 2 of 5: different configs
    assert res["shared"] == pytest.approx(2 / 5) and res["different_configs"] is True
    b = _frame(e2e([("ssgd", 0.002), ("topk", 0.002), ("dgc", 0.002)]))
    res = C.compare_runs(a, b, 0.1)          # 2 of 4: exactly half, one config (fewer than half is not)
    assert res["shared"] == 0.5 and res["different_configs"] is False


def test_sim_agreement_lists_every_world_size_in_one_run_only(tmp_path):
    a = sa_dir(tmp_path, "a", {"np2": svm(CASES), "np4": svm(CASES)})
    b = sa_dir(tmp_path, "b", {"np2": svm(CASES), "np8": svm(CASES)})
    assert agreement(a, b)[1].splitlines()[-1] == "not compared (in one run only): np4 (only in a), np8 (only in b)"
