"""report.py's paper-scale verdicts (the headline rows, their cells and the claims' arithmetic) at
the places mutation testing found untested (issue 49; docs/mutation.md). Every expectation is
written by hand from the fixture's numbers or is the rule written again, never the code under
test. No binary, no MPI: these run in the mutation copy."""

import math
import os
import re

import pandas as pd
import pytest

from gradcomp_analysis import report as R
from gradcomp_analysis import tables as T

NAN = math.nan
ZERO = {"compress_s": 0.0, "decompress_s": 0.0, "comm_s": 0.0, "pack_s": 0.0, "exposed_s": 0.0}


def sim(model, method, iter_s, on="host", fusion="25MiB", pipelining="on", rank=4, **kw):
    return {"model": model, "method": method, "fusion": fusion, "pipelining": pipelining, "compress_on": on,
            "rank": rank, "iter_s": iter_s, **ZERO, **kw}


def claim(rows, agg, a="acpsgd", b="ssgd"):
    return R._speedup_claim(pd.DataFrame(rows), ["compress_on", "model"], R._method(a), R._method(b), agg)


# ------------------------------------------------------------------ small helpers


def test_fixed_by_hand():
    assert R.fixed(1.005) == "1.00" or R.fixed(1.005) == "1.01"  # binary rounding of 1.005 either way
    assert R.fixed(2.5) == "2.50" and R.fixed(-3.14159) == "-3.14" and R.fixed(12) == "12.00"
    assert R.fixed(2.5, 1) == "2.5" and R.fixed(2.25, 3) == "2.250"
    assert R.fixed(0) == "0.00" and R.fixed(0.0, 1) == "0.0" and R.fixed(-0.0) == "0.00"
    # rounds to zero but is not zero: two significant digits, the sign kept
    assert R.fixed(-7.5e-05) == "-7.5e-05" and R.fixed(0.0012) == "0.0012" and R.fixed(0.004) == "0.0040"
    assert R.fixed(0.005) == "0.01" or R.fixed(0.005) == "0.0050"
    assert R.fixed(0.04, 1) == "0.040" and R.fixed(0.05, 1) == "0.1"
    assert R.fixed(NAN) == "nan" and R.fixed("2") == "2.00"


def test_too_noisy_by_hand():
    assert R.NOISY_REL == 1.0
    assert R.too_noisy(1.0, 1.01) and not R.too_noisy(1.0, 1.0) and not R.too_noisy(1.0, 0.5)
    assert R.too_noisy("2", "3")                              # text that is a number is read
    assert not R.too_noisy(0.0, 1.0) and not R.too_noisy(-1.0, 5.0)   # only a positive value
    assert not R.too_noisy(math.inf, 1e300) and not R.too_noisy(1.0, math.inf) and not R.too_noisy(1.0, NAN)
    assert not R.too_noisy(None, 1.0) and not R.too_noisy("x", 1.0) and not R.too_noisy(1.0, None)


def test_paper_rank_keeps_low_rank_rows_at_the_papers_rank_only():
    d = pd.DataFrame([sim("resnet50", "acpsgd", 1, rank=4), sim("resnet50", "acpsgd", 1, rank=8),
                      sim("bert-base", "powersgd", 1, rank=32), sim("bert-base", "powersgd", 1, rank=4),
                      sim("resnet50", "topk", 1, rank=8),              # not low-rank: kept whatever its rank
                      sim("lstm", "acpsgd", 1, rank=4)])               # a model the paper has no rank for: none
    out = R._paper_rank(d)
    assert list(out.index) == [0, 2, 4]


def test_deciding_cost_by_hand():
    a = pd.DataFrame([dict(ZERO, comm_s=0.3, pack_s=0.1), dict(ZERO, comm_s=0.1, compress_s=0.35)])
    b = pd.DataFrame([dict(ZERO, comm_s=0.1), dict(ZERO, comm_s=0.1)])
    # sums over the rows: comm_s +0.2, compress_s +0.35, pack_s +0.1: compress_s decides
    assert R.deciding_cost(a, b) == "compress_s (+350.0 ms)"
    # the largest difference when every one is negative: the least negative
    assert R.deciding_cost(b[["comm_s", "pack_s"]], a[["comm_s", "pack_s"]]) == "pack_s (-100.0 ms)"
    # only the components both have; none: empty
    assert R.deciding_cost(a[["comm_s"]], b[["comm_s"]]) == "comm_s (+200.0 ms)"
    assert R.deciding_cost(a[["comm_s"]], b[["pack_s"]]) == ""
    assert R.COST_COMPONENTS == ["compress_s", "decompress_s", "comm_s", "pack_s", "exposed_s"]


def test_pair_aligns_the_best_rows_of_common_setups():
    d = pd.DataFrame([sim("m1", "acpsgd", 2.0), sim("m1", "acpsgd", 1.0, fusion="none"),
                      sim("m1", "ssgd", 3.0), sim("m2", "ssgd", 1.0), sim("m0", "acpsgd", 5.0)])
    a, b = R._pair(d, ["compress_on", "model"], R._method("acpsgd"), R._method("ssgd"))
    assert list(a.index) == [("host", "m1")] and list(b.index) == [("host", "m1")]
    assert list(a["iter_s"]) == [1.0] and list(a["fusion"]) == ["none"] and list(b["iter_s"]) == [3.0]


# ------------------------------------------------------------------ _speedup_claim


def test_speedup_claim_each_aggregation_by_hand():
    rows = [sim("m1", "ssgd", 2.0), sim("m1", "acpsgd", 1.0),           # speed-up 2
            sim("m2", "ssgd", 1.0), sim("m2", "acpsgd", 1.25),          # 0.8
            sim("m3", "ssgd", 1.5), sim("m3", "acpsgd", 1.0)]           # 1.5
    v, ok, cost = claim(rows, "mean")["host"]
    assert v == pytest.approx((2 + 0.8 + 1.5) / 3) and ok is True and cost == ""
    v, ok, cost = claim(rows, "all")["host"]
    assert v == pytest.approx((2 + 0.8 + 1.5) / 3) and ok is False
    assert cost == "compress_s (+0.0 ms)"                       # every component equal on m2: the first
    v, ok, cost = claim(rows, "max_pct")["host"]
    assert v == pytest.approx(100.0) and ok is True and cost == ""   # (2 - 1) x 100
    v, ok, cost = claim(rows, "max_less_pct")["host"]
    assert v == pytest.approx(50.0) and ok is True                   # (1 - 1 / 2) x 100
    assert isinstance(v, float) and isinstance(ok, bool)


def test_speedup_claim_deciding_cost_over_the_slow_setups_else_every_one():
    rows = [sim("m1", "ssgd", 1.0), sim("m1", "acpsgd", 2.0, comm_s=0.6),        # slower: 0.5
            sim("m2", "ssgd", 1.0), sim("m2", "acpsgd", 1.0, pack_s=0.2),        # a tie (1): counted slow
            sim("m3", "ssgd", 2.0), sim("m3", "acpsgd", 1.0, compress_s=0.9)]    # faster: 2
    # mean (0.5 + 1 + 2) / 3 = 1.1667 holds; `all` fails on m1 and m2: comm_s 0.6 > pack_s 0.2
    assert claim(rows, "mean")["host"] == (pytest.approx(3.5 / 3), True, "")
    assert claim(rows, "all")["host"][1:] == (False, "comm_s (+600.0 ms)")
    # mean below 1: the slow setups decide (m3's compress_s is not counted)
    slow = [sim("m1", "ssgd", 1.0), sim("m1", "acpsgd", 4.0, comm_s=0.6),
            sim("m3", "ssgd", 2.0), sim("m3", "acpsgd", 1.0, compress_s=0.9)]
    assert claim(slow, "mean")["host"] == (pytest.approx((0.25 + 2) / 2), True, "")
    slower = [sim("m1", "ssgd", 1.0), sim("m1", "acpsgd", 8.0, comm_s=0.6),
              sim("m3", "ssgd", 2.0), sim("m3", "acpsgd", 1.0, compress_s=0.9)]
    assert claim(slower, "mean")["host"] == (pytest.approx((0.125 + 2) / 2), True, "")
    worst = [sim("m1", "ssgd", 1.0), sim("m1", "acpsgd", 8.0, comm_s=0.6),
             sim("m3", "ssgd", 1.0), sim("m3", "acpsgd", 1.0, compress_s=0.9)]
    assert claim(worst, "mean")["host"] == (pytest.approx((0.125 + 1) / 2), False, "compress_s (+900.0 ms)")


def test_speedup_claim_on_device_rows_and_none_without_a_pair():
    rows = [sim("m1", "ssgd", 2.0, on="device"), sim("m1", "acpsgd", 4.0, on="device", decompress_s=0.25),
            sim("m1", "ssgd", 2.0), sim("m2", "acpsgd", 1.0)]            # host: no common setup
    res = claim(rows, "max_pct")
    assert list(res) == ["device"]
    assert res["device"] == (pytest.approx(-50.0), False, "decompress_s (+250.0 ms)")
    assert claim(rows, "max_less_pct")["device"][:2] == (pytest.approx(-100.0), False)   # 1 - 4 / 2
    assert R.COMPRESS_ON == ["host", "device"]


# ------------------------------------------------------------------ the headline row


def test_paper_scale_row_every_cell_by_hand():
    res = {"host": (5.0, True, ""), "device": (2.0, True, "")}
    r = R.paper_scale_row("acpsgd-main", "eth, 32 workers", "ACP-SGD faster", 4.06, res, "x", plan="omgs",
                          devices={"v100", "", "a100"}, wire="acpsgd 0.01")
    assert list(r) == ["headline", "setup", "claim", "published", T.WIRE, "device (compression)", "ours host",
                       "ours/published host", "verdict host", "ours device", "ours/published device",
                       "verdict device", "deciding cost (not reproduced)", "plan that ran"]
    assert (r["headline"], r["setup"], r["claim"], r["published"]) == ("acpsgd-main", "eth, 32 workers",
                                                                       "ACP-SGD faster", "4.06x")
    assert r[T.WIRE] == "acpsgd 0.01" and r["plan that ran"] == "omgs"
    assert r["device (compression)"] == "a100, v100 (the paper names no GPU: default)"
    assert (r["ours host"], r["ours/published host"], r["verdict host"]) == ("5.00x", "1.23", "size reproduced")
    # 2 / 4.06 = 0.49: the direction holds, the size is outside a factor 1.5
    assert (r["ours device"], r["ours/published device"], r["verdict device"]) == ("2.00x", "0.49",
                                                                                   "direction only")
    assert r["deciding cost (not reproduced)"] == ""


def test_paper_scale_row_not_reproduced_failed_and_a_gpu():
    res = {"host": (-20.0, False, "pack_s (+300.0 ms)"), "device": (-1.0, False, "comm_s (+1.0 ms)")}
    r = R.paper_scale_row("omgs", "16 workers", "OMGS faster", 31.0, res, "%", devices=("p102",))
    assert r["published"] == "31%" and r["ours host"] == "-20.00%" and r["ours/published host"] == "-0.65"
    assert r["verdict host"] == "not reproduced" and r["verdict device"] == "not reproduced"
    assert r["deciding cost (not reproduced)"] == "host: pack_s (+300.0 ms); device: comm_s (+1.0 ms)"
    assert r["device (compression)"].startswith("p102 (the paper's GPU: Nvidia P102-100")
    # no result: empty cells, or `n/a: why` where the folder failed
    r = R.paper_scale_row("omgs", "s", "c", 31.0, {"device": (40.0, True, "")}, "%", failed="no omgs rows")
    assert (r["ours host"], r["ours/published host"], r["verdict host"]) == ("", "", "n/a: no omgs rows")
    assert r["verdict device"] == "size reproduced" and r["ours device"] == "40.00%"
    r = R.paper_scale_row("dgc", "s", "c", 277, {}, "x")
    assert (r["ours host"], r["verdict host"], r["verdict device"]) == ("", "", "")
    assert r["published"] == "277x" and r["device (compression)"] == " (the paper names no GPU: default)"
    # a cost only where the claim failed on that side
    r = R.paper_scale_row("dgc", "s", "c", 277, {"host": (300.0, True, ""), "device": (50, False, "wire")}, "x")
    assert r["deciding cost (not reproduced)"] == "device: wire"


def test_verdict_counts_line_by_hand():
    heads = pd.DataFrame({"verdict host": ["size reproduced", "not reproduced", "n/a: x", "size reproduced"],
                          "verdict device": ["direction only", "", "", ""]})
    assert R.verdict_counts_line(heads) == ("host: 2 size reproduced, 0 direction only, 1 not reproduced; "
                                            "device: 0 size reproduced, 1 direction only, 0 not reproduced")
    assert R.verdict_counts_line(heads[["verdict device"]]) == (
        "device: 0 size reproduced, 1 direction only, 0 not reproduced")


# ------------------------------------------------------------------ wire cell, OMGS networks


def test_wire_cell_by_hand():
    d = pd.DataFrame([dict(method="topk", density=0.001, wire_bytes=2, dense_bytes=1000),
                      dict(method="topk", density=0.01, wire_bytes=20, dense_bytes=1000),
                      dict(method="acpsgd", density=0.001, wire_bytes=123456, dense_bytes=1e7),
                      dict(method="acpsgd", density=0.001, wire_bytes=123456, dense_bytes=1e7),
                      dict(method="marsit", density=0.001, wire_bytes=5, dense_bytes=None)])
    sels = [("topk", R._method("topk")), ("powersgd", R._method("powersgd")), ("acpsgd", R._method("acpsgd")),
            ("marsit", R._method("marsit"))]
    # densities sorted, `:g`; the range to SIG (4) significant digits; one value alone; no rows: nothing
    assert R.wire_cell(d, sels) == ("topk (density 0.001, 0.01) 0.002 to 0.02; acpsgd 0.01235; "
                                    "marsit not recorded (sim.csv rows without dense_bytes)")
    assert R.wire_cell(d.iloc[:0], sels) == "" and R.wire_cell(d, []) == ""
    assert R._compressed("ssgd", "topk", "dgc")[0][0] == "topk" and len(R._compressed("ssgd", "topk", "dgc")) == 2
    m = R._method("topk", "none")
    f = pd.DataFrame({"method": ["topk", "topk", "dgc"], "fusion": ["none", "25MiB", "none"]})
    assert list(m(f)) == [True, False, False] and list(R._method("dgc")(f)) == [False, False, True]


def heads(v_omgs, v_net, on="host", ours=("12.00%", "40.00%")):
    """Headline rows of both OMGS networks with verdicts on ON only (the other side empty)."""
    off = {"host": "device", "device": "host"}[on]
    return pd.DataFrame([{"headline": "omgs", f"verdict {on}": v_omgs, f"ours {on}": ours[0],
                          f"verdict {off}": "", f"ours {off}": ""},
                         {"headline": "omgs-net", f"verdict {on}": v_net, f"ours {on}": ours[1],
                          f"verdict {off}": "", f"ours {off}": ""}])


def test_omgs_network_and_its_line_by_hand():
    found = [{"headline": "omgs", "network": "1gbe"}, {"headline": "omgs-net", "network": "omgs-1gbe"},
             {"headline": "omgs-net", "network": "10gbe"}, {"headline": "marsit", "network": "x"}]
    assert R.omgs_network(found, "omgs") == "1gbe (our 1 GbE preset)"
    assert R.omgs_network(found, "omgs-net") == "10gbe, omgs-1gbe (the paper's measured 1 GbE)"
    assert R.omgs_network([{"headline": "omgs", "network": ""}], "omgs") == "1gbe (our 1 GbE preset)"
    f2 = found[:2]
    h = heads("direction only", "not reproduced")
    assert R.omgs_network_line(h, f2) == (
        "**OMGS by network** (the same simulations on each): host compression: on 1gbe (our 1 GbE preset) OMGS is "
        "faster (12.00%, direction only), on omgs-1gbe (the paper's measured 1 GbE) layer-wise Top-k is at least "
        "as fast (40.00%, not reproduced): the verdict moves from *direction only* to *not reproduced*.")
    same = R.omgs_network_line(heads("size reproduced", "size reproduced", on="device"), f2)
    assert same.endswith("device compression: on 1gbe (our 1 GbE preset) OMGS is faster (12.00%, size reproduced), "
                         "on omgs-1gbe (the paper's measured 1 GbE) OMGS is faster (40.00%, size reproduced): "
                         "the verdict stays *size reproduced*.")
    both = h.assign(**{"verdict device": ["direction only"] * 2, "ours device": ["1.00%", "2.00%"]})
    assert "; device compression: " in R.omgs_network_line(both, f2)
    # a side without a verdict on either network, one network missing, no rows: no line
    assert R.omgs_network_line(heads("n/a: failed", "size reproduced"), f2) == ""
    assert R.omgs_network_line(heads("", "size reproduced"), f2) == ""
    assert R.omgs_network_line(heads("size reproduced", "size reproduced").iloc[:1], f2) == ""
    assert R.omgs_network_line(heads("size reproduced", "size reproduced").iloc[1:], f2) == ""
    assert R.omgs_network_line(pd.DataFrame(), f2) == ""


# ------------------------------------------------------------------ ranking warnings


def test_ranking_warnings_every_kind_by_hand():
    e2e = pd.DataFrame({"run_id": ["r1", "r1", "r3", "r5"], "compute_drift": [0.05, 0.11, 0.10, "x"],
                        "iters_run": [10, 25, 19, None], "iters": [100, 100, 100, 100], "repeats": [1, 1, 2, 1]})
    meta = [("z", None),                                                  # no run.json: skipped, the rest read
            ("x", {"run_id": "r1", "world_size": 4, "hosts": ["a", "a", "a", "b"], "host_cores": [2, 2, 2, 8],
                   "load_avg_start": [[3.5, 2, 1]] * 3 + [[1.0, 1, 1]]}),
            ("y", {"run_id": "r2", "world_size": 8, "hosts": ["a"] * 8, "host_cores": [1] * 8}),   # not timed here
            # one value for the run: the hosts not a list
            ("w", {"run_id": "r3", "world_size": 2, "hosts": "h", "host_cores": 1, "load_avg_start": 0.5}),
            ("v", {"run_id": "r5", "world_size": 2, "hosts": ["h", "h"], "host_cores": [2, 2],
                   "load_avg_start": [[2.0], [2.0]]})]                   # 2 ranks, load 2 on 2 cores: fine
    assert R.DRIFT_WARN == 0.10
    assert R.ranking_warnings(e2e, meta) == [
        "1 of 4 e2e case(s) drifted more than 10% from the compute model (median over a case's iterations; the "
        "worst case 11%): the node was busy; rerun on a quiet node",
        "run r1: 3 ranks on 2 core(s) of host a: oversubscribed, ranks share cores and their times mix; run with "
        "no more ranks than cores (mpirun -np N)",
        "run r1: load average 3.5 on 2 core(s) of host a at the start: other work shared the node; rerun when it "
        "is quiet",
        "run r3: 2 ranks on 1 core(s) of host ?: oversubscribed, ranks share cores and their times mix; run with "
        "no more ranks than cores (mpirun -np N)",
        "1 e2e case(s) were timed once over fewer than 20 iterations: a handful of iterations does not rank "
        "methods; time them with `e2e --min-time 0.3 --target-ci 0.03` (TOML `min_time_s`, `target_ci`)"]


def test_ranking_warnings_without_run_ids_cores_or_repeats():
    # no run_id column: every run.json read; no repeats column: each case timed once; `iters` when no iters_run
    e2e = pd.DataFrame({"iters": [19, 20]})
    meta = [("a", {"run_id": "q", "world_size": 3, "hosts": ["h", "h", "h"], "host_cores": [0, 0, 0]}),  # no cores
            ("b", {"world_size": 2, "hosts": ["h", "h"], "host_cores": [1, 1], "load_avg_start": [None, None]}),
            ("c", {"run_id": "s", "hosts": [], "host_cores": 1.0, "load_avg_start": [[1.5, 1, 1]]}),
            ("d", {"run_id": "t", "world_size": "2", "hosts": ["g", "g"], "host_cores": ["2", "2"]})]
    assert R.ranking_warnings(e2e, meta) == [
        "run ?: 2 ranks on 1 core(s) of host h: oversubscribed, ranks share cores and their times mix; run with "
        "no more ranks than cores (mpirun -np N)",
        # no hosts recorded: one rank on host ?, its load above the cores
        "run s: load average 1.5 on 1 core(s) of host ? at the start: other work shared the node; rerun when it "
        "is quiet",
        "1 e2e case(s) were timed once over fewer than 20 iterations: a handful of iterations does not rank "
        "methods; time them with `e2e --min-time 0.3 --target-ci 0.03` (TOML `min_time_s`, `target_ci`)"]
    # nothing to warn of
    assert R.ranking_warnings(pd.DataFrame({"compute_drift": [0.1], "iters_run": [20]}), []) == []
    assert R.ranking_warnings(pd.DataFrame({"method": ["ssgd"]}), []) == []


# ------------------------------------------------------------------ the run header's simulation lines


def sim_folder(d, run_json=None, **cols):
    import difflib
    import json
    import os
    sim = pd.DataFrame(cols or {"model": ["m", "m", "n"], "method": ["ssgd", "topk", "ssgd"],
                                "world_size": [4, 8, 4], "network": [None, "eth", "eth"],
                                "compress_on": ["host", "host", "device"]})
    sim.to_csv(os.path.join(d, "sim.csv"), index=False)
    os.utime(os.path.join(d, "sim.csv"), (86400 + 3661, 86400 + 3661))   # 1970-01-02T01:01:01Z
    if run_json is not None:
        with open(os.path.join(d, "run.json"), "w") as fh:
            json.dump(run_json, fh)
    return {"path": d, "label": "sims/a", "sim": sim}


WHAT = ("3 simulated configuration(s); model m, n; methods ssgd, topk; world sizes 4, 8; network eth; "
        "compression on host, device")


def test_sim_line_with_and_without_a_run_json():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        rec = {"schema_version": 1, "run_id": "R7", "command_line": ["gradcomp", "simulate", "--model", "m"],
               "status": "done", "gradcomp_version": "0.1.0", "git_revision": "abc1234", "start_time": "t0",
               "end_time": "t1"}
        f = sim_folder(d, rec)
        assert R._sim_line(f) == ("- simulation `sims/a` (`R7`, `simulate`): `gradcomp simulate --model m`; status "
                                  "`done`; gradcomp 0.1.0 (abc1234); t0 to t1; " + WHAT)
        f = sim_folder(d, dict(rec, command_line=[]))
        assert R._sim_line(f).startswith("- simulation `sims/a` (`R7`, `simulate`): `command not recorded`; ")
    with tempfile.TemporaryDirectory() as d:
        f = sim_folder(d)
        assert R._sim_line(f) == ("- simulation `sims/a` (`gradcomp simulate`): sim.csv written 1970-01-02T01:01:01Z; "
                                  "no run.json beside it, so its command line and gradcomp revision are not "
                                  "recorded; " + WHAT)
        # only the columns it has; a column without a value is left out
        f = sim_folder(d, iter_s=[0.1, 0.2], network=[None, None])
        assert R._sim_line(f).endswith("are not recorded; 2 simulated configuration(s)")
        f = sim_folder(d, method=["dgc"], compress_on=["device"])
        assert R._sim_line(f).endswith("are not recorded; 1 simulated configuration(s); methods dgc; "
                                       "compression on device")
        with pytest.raises(R.ReportError, match=r"run.json: schema_version 2 is unknown to this analysis "
                                                r"\(it reads \[1\]\); use the analysis/ of the gradcomp that wrote it"):
            R._sim_line(sim_folder(d, {"schema_version": 2}))
        assert R._record(d + "/none.json") is None
        sim_folder(d, {"run_id": "R8"})                       # no schema_version: read as it is
        assert R._record(d + "/run.json") == {"run_id": "R8"}


def test_sim_lines_and_values_by_hand():
    assert R._values(pd.DataFrame({"a": ["x", None, "y", "x", 3]}), "a") == "x, y, 3"
    assert R._values(pd.DataFrame({"a": [1]}), "b") == ""
    ps = [{"headline": "omgs"}, {"headline": "omgs"}, {"headline": "marsit"}, {}]
    assert R._sim_lines([], ps) == [
        "- paper scale (`scripts/paper_scale.sh`, `gradcomp simulate` per folder): 4 folder(s), headlines omgs, "
        "marsit, ?; each folder's commands are the `command=` lines of its paper_scale.txt"]
    assert R._sim_lines([], []) == []


def test_absent_line_by_hand():
    from gradcomp_analysis.io import Results
    one = pd.DataFrame({"x": [1]})
    full = Results(micro_comm=one, micro_compress=one, micro=one, e2e=one, converge=one)
    assert R.absent_line(full) == ""
    some = Results(micro_comm=one, micro=one.iloc[:0], e2e=one, converge=None)
    assert R.absent_line(some) == (
        "_Not in this folder: micro_compress.csv (compression kernels), micro.csv (one tensor through MPI): "
        "`mpirun -np N gradcomp run bench-configs/laptop.toml --out DIR`, or per paper its config in bench-configs/ "
        "(docs/reproduce.md); converge.csv (the convergence check): `mpirun -np N gradcomp converge --config "
        "bench-configs/laptop.toml --out DIR`. `make bench` writes them all into one folder._")
    assert R.absent_line(Results(micro_comm=one, micro_compress=one, micro=one, e2e=one, converge=one.iloc[:0])) == (
        "_Not in this folder: converge.csv (the convergence check): `mpirun -np N gradcomp converge --config "
        "bench-configs/laptop.toml --out DIR`. `make bench` writes them all into one folder._")


# ------------------------------------------------------------------ what the first pass left


def test_too_noisy_compares_the_half_width_with_a_multiple_of_the_value():
    assert not R.too_noisy(2.0, 1.5) and R.too_noisy(0.5, 0.6)


def test_speedup_claim_at_exactly_one_and_when_every_setup_is_faster():
    tie = [sim("m1", "ssgd", 1.0), sim("m1", "acpsgd", 1.0)]
    for agg in ("mean", "all", "max_pct", "max_less_pct"):
        assert claim(tie, agg)["host"][1] is False          # a speed-up of exactly 1 is not faster
    fast = [sim("m1", "ssgd", 1.5), sim("m1", "acpsgd", 1.0), sim("m2", "ssgd", 1.2), sim("m2", "acpsgd", 1.0)]
    assert claim(fast, "all")["host"] == (pytest.approx(1.35), True, "")   # every setup above 1 (not 2)
    # the baseline's costs are summed over the same slow setups as the method's
    rows = [sim("m1", "ssgd", 1.0), sim("m1", "acpsgd", 2.0, comm_s=0.6),
            sim("m2", "ssgd", 1.0), sim("m2", "acpsgd", 1.0, pack_s=0.2),
            sim("m3", "ssgd", 2.0, comm_s=0.5), sim("m3", "acpsgd", 1.0)]
    assert claim(rows, "all")["host"][2] == "comm_s (+600.0 ms)"


def test_wire_cell_goes_on_past_a_method_without_dense_bytes_and_reads_no_frame():
    d = pd.DataFrame([dict(method="marsit", density=0.001, wire_bytes=5, dense_bytes=None),
                      dict(method="topk", density=0.001, wire_bytes=2, dense_bytes=1000)])
    assert R.wire_cell(d, [("marsit", R._method("marsit")), ("topk", R._method("topk"))]) == (
        "marsit not recorded (sim.csv rows without dense_bytes); topk (density 0.001) 0.002")
    assert R.wire_cell(pd.DataFrame(), [("topk", R._method("topk"))]) == ""     # a headline without sim rows
    assert R.wire_cell(d, R._compressed("ssgd", "topk")) == "topk (density 0.001) 0.002"


def test_paper_scale_row_defaults_and_a_headline_not_in_the_papers():
    r = R.paper_scale_row("unknown", "s", "c", 31.0, {"host": (31.0, True, "")})
    assert r["published"] == "31" and r["ours host"] == "31.00" and r["verdict host"] == "size reproduced"
    assert r["plan that ran"] == "" and r[T.WIRE] == "" and r["verdict device"] == ""
    assert r["device (compression)"] == " (the paper names no GPU: default)"


def test_omgs_network_of_folders_without_a_network_field():
    assert R.omgs_network([{"headline": "omgs"}], "omgs") == "1gbe (our 1 GbE preset)"
    assert R.omgs_network([{"headline": "omgs"}, {"headline": "omgs", "network": "x"}], "omgs") == "x"


def test_ranking_warnings_of_odd_run_records():
    e2e = pd.DataFrame({"iters_run": [20, 19]})          # iters_run alone; the case timed once is the second row
    meta = [("a", {"run_id": "p", "hosts": None, "world_size": "2", "host_cores": 1,
                   "load_avg_start": [[3.0, 1, 1]]}),                       # one rank assumed, its load read
            ("b", {"run_id": "u", "hosts": [], "host_cores": 1}),             # no hosts: one rank, no warning
            ("c", {"run_id": "v", "world_size": 3, "hosts": ["a", "b", "b"], "host_cores": [0, 1, 1]})]
    assert R.ranking_warnings(e2e, meta) == [
        "run p: load average 3.0 on 1 core(s) of host ? at the start: other work shared the node; rerun when it "
        "is quiet",
        "run v: 2 ranks on 1 core(s) of host b: oversubscribed, ranks share cores and their times mix; run with "
        "no more ranks than cores (mpirun -np N)",
        "1 e2e case(s) were timed once over fewer than 20 iterations: a handful of iterations does not rank "
        "methods; time them with `e2e --min-time 0.3 --target-ci 0.03` (TOML `min_time_s`, `target_ci`)"]


def test_sim_line_time_is_utc_whatever_the_machines_zone_and_sim_lines_reads_each_folder():
    import os
    import tempfile
    import time
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        with tempfile.TemporaryDirectory() as d:
            f = sim_folder(d)
            line = ("- simulation `sims/a` (`gradcomp simulate`): sim.csv written 1970-01-02T01:01:01Z; no run.json "
                    "beside it, so its command line and gradcomp revision are not recorded; " + WHAT)
            assert R._sim_line(f) == line and R._sim_lines([f], []) == [line]
    finally:
        if old is None:
            os.environ.pop("TZ")
        else:
            os.environ["TZ"] = old
        time.tzset()


# ------------------------------------------------------------------ fastest to dense accuracy


def _fastest(tmp_path, e2e, meta=()):
    """fastest_section on E2E against test_trains' converge curves (dense S-SGD's target: loss 1.4372,
    accuracy 0.5814; ssgd reaches it in 4 steps (2-4 over its seeds), powersgd in 2, topk in 4, marsit never)."""
    import io

    from gradcomp_analysis import trains
    from test_trains import converge_csv
    rep = R.Report(str(tmp_path), False)
    checks = trains.checks(pd.read_csv(io.StringIO(converge_csv())).assign(run="r1"))
    R.fastest_section(rep, e2e, checks, list(meta))
    return rep


def test_fastest_section_line_by_line_per_compress_on_with_methods_without_a_density_or_rank(tmp_path):
    """Timing rows without a parameter (NaN: Top-k's density, Power-SGD's rank, S-SGD's both) are matched
    with their convergence check on the others, as trains.matching does, not on a placeholder. Compression on the host and on the device
    are two setups. Host: powersgd 2 x 0.1 = 0.2 s first, ssgd (its faster row, 0.2 s) 4 x 0.2 = 0.8 s:
    4.00x; topk 4 x 0.06 = 0.24 s, interval [4 x 0.04, 4 x 0.08] = [0.16, 0.32] overlaps powersgd's
    [2 x 0.09, 2 x 0.11]: a tie. Device (powersgd 4x slower: 0.4 s a step): topk 0.24 s first,
    0.8 / 0.24 = 3.33x, powersgd's [0.78, 0.82] does not overlap: no tie."""
    from test_tables import row
    e = pd.DataFrame([row("ssgd", 0.2, ci=0.01, density=NAN, rank=NAN), row("powersgd", 0.1, ci=0.01, rank=NAN),
                      row("topk", 0.06, ci=0.02, density=NAN), row("ssgd", 0.4, ci=0.01, density=NAN, rank=NAN)])
    e = e.assign(iters=100, compress_on="host")
    e = pd.concat([e, e.assign(compress_on="device", iter_s=e["iter_s"] * [1, 4, 1, 1])], ignore_index=True)
    run = {"run_id": "r1", "world_size": 2, "hosts": ["h", "h"], "host_cores": [1, 1]}
    rep = _fastest(tmp_path, e, [("a", run), ("b", run)])      # the same warning twice: shown once
    setup = "model m, world_size 2, batch 10, device v100"
    assert rep.lines[:5] == [
        "## Fastest to dense accuracy", "",
        "> **Warning: this run cannot rank methods:**",
        "> - run r1: 2 ranks on 1 core(s) of host h: oversubscribed, ranks share cores and their times mix; run "
        "with no more ranks than cores (mpirun -np N).", ""]
    assert sorted(rep.lines[5:7]) == [
        f"- {setup}, compress_on device: **topk** first, 0.2400 s to dense accuracy, 3.33x S-SGD's time.",
        f"- {setup}, compress_on host: **powersgd** first, 0.2000 s to dense accuracy, 4.00x S-SGD's time; a tie "
        "with topk (intervals overlap)."]
    assert rep.lines[7:9] == ["", "Table `fastest_to_accuracy` ([csv](fastest_to_accuracy.csv)): time to dense "
                              "accuracy = steps to dense's target (`gradcomp converge`) x measured time per iteration"]
    assert rep.lines[-2:] == [R.trains.TTA_CAVEAT, ""] and rep.tables == ["fastest_to_accuracy"]
    t = pd.read_csv(tmp_path / "fastest_to_accuracy.csv")
    assert list(t.columns) == ["model", "world_size", "batch", "device", "compress_on", "place", "method", "config",
                               "iter_ms", "wire vs dense", "steps", "tta", "speedup_vs_ssgd", "tie", "verdict"]
    host = t[t["compress_on"] == "host"].set_index("method")
    assert list(host.index) == ["powersgd", "topk", "ssgd"] and list(host["place"]) == [1, 2, 3]
    assert host.loc["ssgd", "iter_ms"] == pytest.approx(200) and host.loc["ssgd", "steps"] == 4
    assert host.loc["ssgd", "tta"] == "0.8000 s [0.3800, 0.8400]"      # 2 x 0.19 to 4 x 0.21
    assert host.loc["topk", "tta"] == "0.2400 s [0.1600, 0.3200]" and list(host["tie"]) == [False, True, False]
    dev = t[t["compress_on"] == "device"].set_index("method")
    assert list(dev.index) == ["topk", "powersgd", "ssgd"] and dev.loc["powersgd", "iter_ms"] == pytest.approx(400)


def test_fastest_section_needs_timings_and_checks_and_keeps_a_setup_with_an_empty_key(tmp_path):
    """No section without e2e rows or without convergence checks (None or empty). A run without a
    network label beside one with (`network` a setup key, NaN in one run) is a setup of its own."""
    import io

    from gradcomp_analysis import trains
    from test_tables import row
    from test_trains import converge_csv
    e = pd.DataFrame([row("ssgd", 0.2), row("powersgd", 0.1)]).assign(iters=100)
    checks = trains.checks(pd.read_csv(io.StringIO(converge_csv())))
    for args in [(None, checks), (e.iloc[:0], checks), (e, None), (e, checks.iloc[:0])]:
        rep = R.Report(str(tmp_path), False)
        R.fastest_section(rep, *args, [])
        assert rep.lines == [] and rep.tables == []
    b = pd.DataFrame([row("powersgd", 0.1), row("topk", 0.06, ci=0.02), row("ssgd", 0.1, ci=0.09)])
    rows = pd.concat([pd.DataFrame([row("marsit", 0.01)]).assign(network="a"), b.assign(network="b"),
                      e.iloc[1:].assign(network="c"), e.assign(network=NAN, iter_s=[0.2, 0.2])], ignore_index=True)
    rep = _fastest(tmp_path, rows.assign(iters=100))
    setup = "model m, world_size 2, batch 10, device v100"
    # a: marsit never reaches dense. b: powersgd 2 x 0.1 = 0.2 s first; topk 4 x 0.06 = 0.24 s within
    # [0.16, 0.32] and ssgd 4 x 0.1 = 0.4 s within [2 x 0.01, 4 x 0.19] both overlap powersgd's [0.1998,
    # 0.2002]: ties, in their places' order; 0.4 / 0.2 = 2.00x. c: no S-SGD, no speedup. No label:
    # powersgd 2 x 0.2 = 0.4 s, ssgd 4 x 0.2 = 0.8 s: 2.00x, and ssgd's interval from 2 x 0.1998 (its
    # fewest steps, iter - 0.1%) overlaps it: a tie
    assert rep.lines[:6] == [
        "## Fastest to dense accuracy", "",
        f"- network a, {setup}: no method reaches dense accuracy in these results (or none was checked).",
        f"- network b, {setup}: **powersgd** first, 0.2000 s to dense accuracy, 2.00x S-SGD's time; a tie with "
        "topk, ssgd (intervals overlap).",
        f"- network c, {setup}: **powersgd** first, 0.2000 s to dense accuracy.",
        f"- network nan, {setup}: **powersgd** first, 0.4000 s to dense accuracy, 2.00x S-SGD's time; a tie with "
        "ssgd (intervals overlap)."]
    t = pd.read_csv(tmp_path / "fastest_to_accuracy.csv", keep_default_na=False)
    assert t.loc[t["method"] == "marsit", "tta"].tolist() == ["-"]          # no time to accuracy: a dash


# ------------------------------------------------------------------ the paper-scale section


def _paper_scale_folders(root):
    """acpsgd-main on 1gbe (test_paper_scale's rows), OMGS on both networks (1gbe: OMGS 1.0 s against
    layer-wise Top-k 1.5 s, +50%; omgs-1gbe: 2.0 against 1.0, -50%), Marsit (1.0 s against S-SGD's
    2.0: 50% less time), and omgs-net's published validation points."""
    from test_paper_scale import acp_rows, row, write

    def omgs(t_omgs, t_topk):
        return pd.DataFrame([dict(row("resnet50", "omgs", "host", "on", t_omgs), fusion="mgwfbp", density=0.001),
                             dict(row("resnet50", "topk", "host", "on", t_topk), fusion="none", density=0.001)])
    write(str(root / "acpsgd-main" / "1gbe"), "acpsgd-main", acp_rows())
    write(str(root / "omgs"), "omgs", omgs(1.0, 1.5))
    write(str(root / "omgs-net"), "omgs-net", omgs(2.0, 1.0), network="omgs-1gbe")
    write(str(root / "marsit"), "marsit", pd.DataFrame([row("resnet50", "ssgd", "host", "on", 2.0),
                                                        row("resnet50", "marsit", "host", "on", 1.0)]))
    pd.DataFrame([{"quantity": "allreduce", "workers": 16, "elements": 1000, "published_s": 0.002,
                   "ours_s": 0.003, "ours_over_published": 1.5, "published_source": "p", "ours_source": "o"}]) \
        .to_csv(root / "omgs-net" / "published_validation.csv", index=False)
    return R.find_paper_scale([str(root)])


def test_paper_scale_section_line_by_line(tmp_path):
    from gradcomp_analysis import published as pub
    found = _paper_scale_folders(tmp_path / "ps")
    rep = R.Report(str(tmp_path), False)
    R.paper_scale_section(rep, found)
    lines = rep.lines
    assert lines[:2] == ["## Paper scale (simulated)", ""] and lines[3] == ""
    intro = lines[2]
    for words in ["`host`: the CPU costs measured here", "`device`: the roofline model of `--compress-device`",
                  "*size reproduced*", "within a factor 1.5 either way", "*direction only*", "*not reproduced*",
                  "`deciding cost`", "(compress_s, decompress_s, comm_s, pack_s, exposed_s)",
                  "Speedups are t_baseline / t_method", "`wire_bytes / dense_bytes`"]:
        assert words in intro, words
    # one line per headline present, in published.PAPER_SCALE's order, the rule written again
    def head(key, gpu, nodes):
        h = pub.PAPER_SCALE[key]
        return (f"- `{key}`: {pub.CITATIONS[h['paper']]}. Published setup: {h['setup']} (GPU {gpu}, {nodes}). "
                f"Simulated: {h['ours']}.")
    default = "not named in the paper's abstract: compression priced on the script's default preset (v100)"
    p102 = "Nvidia P102-100 (HKBU-HPML/OMGS-SGD @ac10b98, utils.py): compression priced on its preset"
    assert lines[4:9] == [head("acpsgd-main", default, "4 GPUs per node"),
                          head("omgs", p102, "GPUs per node not recorded"),
                          head("omgs-net", p102, "GPUs per node not recorded"),
                          head("marsit", default, "GPUs per node not recorded"), ""]
    assert rep.tables == ["paper_scale_acpsgd", "paper_scale", "paper_scale_published_validation",
                          "paper_scale_sources"]
    captions = [x for x in lines if x.startswith("Table `")]
    assert captions == [
        "Table `paper_scale_acpsgd` ([csv](paper_scale_acpsgd.csv)): ACP-SGD mean speedup over the 4 models per "
        "network, 32 workers, 25 MiB fusion, best of pipelining off/on, compression on host and on device, beside "
        "the published means (over all their setups)",
        "Table `paper_scale` ([csv](paper_scale.csv)): every headline: published beside ours (host / device "
        "compression), ours/published and the verdict",
        "Table `paper_scale_published_validation` ([csv](paper_scale_published_validation.csv)): validation "
        "points: the constants OMGS-SGD published for its own cluster (16 x P102-100, 1 GbE) beside our network "
        "preset's and device model's prediction of exactly those quantities (`simulate --validate-published "
        "omgs`; nothing fitted)",
        "Table `paper_scale_sources` ([csv](paper_scale_sources.csv)): cost sources of each simulated folder (the "
        "`cost_source` of sim.csv) and the ranks per node passed"]
    # host: ACP-SGD over S-SGD 14 / 4.06 and over Power-SGD 2.5 / 1.43 direction only, OMGS 50 / 31 = 1.61
    # direction only, OMGS on omgs-1gbe slower: not reproduced, Marsit 50 / 35 = 1.43 size reproduced;
    # device: ACP-SGD's two (test_paper_scale) only
    i = lines.index(captions[1]) + 4
    assert lines[i:i + 4] == [
        "**Verdicts** (5 headlines): host: 1 size reproduced, 3 direction only, 1 not reproduced; device: 0 size "
        "reproduced, 1 direction only, 1 not reproduced.", "",
        "**OMGS by network** (the same simulations on each): host compression: on 1gbe (our 1 GbE preset) OMGS is "
        "faster (50.00%, direction only), on omgs-1gbe (the paper's measured 1 GbE) layer-wise Top-k is at least "
        "as fast (-50.00%, not reproduced): the verdict moves from *direction only* to *not reproduced*.", ""]
    assert lines[-4] == captions[3] and lines[-1] == ""                      # the sources table ends it
    v = pd.read_csv(tmp_path / "paper_scale_published_validation.csv")
    assert v.iloc[0].to_dict() == {"quantity": "allreduce", "workers": 16, "elements": 1000, "published ms": 2.0,
                                   "ours ms": 3.0, "ours/published": 1.5, "published_source": "p", "ours_source": "o",
                                   "folder": "omgs-net"}


# ------------------------------------------------------------------ paper-scale trains


def test_paper_scale_trains_every_row_by_hand(tmp_path):
    """The configurations of every paper-scale folder, each parameter shown only for the methods that
    read it (density: sparsifiers; rank: low-rank; the sketch size: Count Sketch), duplicates (a fusion
    apart) once; checked against the converge.csv of the folders and of the folder above them (read
    once): test_trains' curves at 2 ranks (so `at np 2`), and an OMGS curve in omgs/ of the same run."""
    from test_trains import converge_csv
    root = tmp_path / "ps"

    def folder(name, rows, marker=None):
        d = root / name
        d.mkdir(parents=True)
        (d / "paper_scale.txt").write_text(marker or f"headline={name}\nnetwork=1gbe\n")
        pd.DataFrame([{"schema_version": 1, "source": "simulated", "model": "resnet50", "method": m, "fusion": f,
                       "pipelining": "on", "world_size": 16, "compress_on": "host", "density": dn, "rank": 4,
                       "sketch_rows": 3, "sketch_cols_per_k": 10.0, "qsgd_levels": 127, "iter_s": 1.0,
                       "cost_source": "x"} for m, f, dn in rows]).to_csv(d / "sim.csv", index=False)
    folder("marsit", [("ssgd", "none", 0.001), ("marsit", "none", 0.001), ("powersgd", "none", 0.01),
                      ("sketch", "none", 0.001), ("sketch", "none", 0.01)])
    folder("omgs", [("topk", "none", 0.001), ("omgs", "none", 0.001), ("topk", "mgwfbp", 0.001)])
    folder("unnamed", [("ssgd", "none", 0.001)], marker="network=1gbe\n")     # a marker without a headline
    (root / "converge.csv").write_text(converge_csv())
    (root / "omgs" / "converge.csv").write_text(converge_csv([("omgs", 1, (1.0, 0.9), (1.0, 0.9), "done")]))
    rep = R.Report(str(tmp_path), False)
    R.paper_scale_trains(rep, R.find_paper_scale([str(root)]))
    assert rep.tables == ["paper_scale_trains"] and rep.lines[0] == (
        "Table `paper_scale_trains` ([csv](paper_scale_trains.csv)): whether each simulated configuration trains "
        "(`gradcomp converge` in these folders; docs/methods.md, \"Convergence check\")")
    t = pd.read_csv(tmp_path / "paper_scale_trains.csv")
    assert list(t.columns) == ["headline", "method", "world_size", "density", "rank", "sketch_rows",
                               "sketch_cols_per_k", "trains"]
    got = [tuple("" if x != x else x for x in r) for r in t.itertuples(index=False)]
    dense = "trains (dense accuracy in {} steps, {} over 3 seeds) at np 2"
    assert got == [
        ("marsit", "ssgd", 16, "", "", "", "", dense.format(4, "2-4")),
        ("marsit", "marsit", 16, "", "", "", "", "does not reach dense (best 1.500 at step 4; target 1.437) at np 2"),
        ("marsit", "powersgd", 16, "", 4.0, "", "", dense.format(2, "2-2")),
        ("marsit", "sketch", 16, 0.001, "", 3.0, 10.0, "not checked"),
        ("marsit", "sketch", 16, 0.01, "", 3.0, 10.0, "not checked"),
        ("omgs", "topk", 16, 0.001, "", "", "", dense.format(4, "4-4")),
        ("omgs", "omgs", 16, 0.001, "", "", "", "trains (dense accuracy in 2 steps) at np 2"),   # one seed: no range
        ("", "ssgd", 16, "", "", "", "", dense.format(4, "2-4"))]
    assert "\n|  | ssgd | 16 |  |  |  |  | trains (" in rep.lines[2]


def test_paper_scale_trains_of_folders_without_simulations(tmp_path):
    rep = R.Report(str(tmp_path), False)
    R.paper_scale_trains(rep, [])
    R.paper_scale_trains(rep, [{"sim": None, "path": str(tmp_path)}, {"sim": pd.DataFrame(), "path": str(tmp_path)}])
    assert rep.lines == [] and rep.tables == []


# ------------------------------------------------------------------ the paper-scale tables, cell by cell


def _sim(model, method, iter_s, on="host", fusion="25MiB", ws=16, wire=10, dense=100, plan="", **costs):
    return {"schema_version": 1, "source": "simulated", "model": model, "method": method, "fusion": fusion,
            "pipelining": "on", "world_size": ws, "compress_on": on, "rank": 4, "density": 0.001, "iter_s": iter_s,
            **{**ZERO, **costs}, "dense_bytes": dense, "wire_bytes": wire, "plan_source": plan,
            "cost_source": f"preset; {on} costs"}


def _ps_folder(root, rel, headline, rows=None, error=None, network="10gbe", extra="", marker=None):
    d = root / rel
    d.mkdir(parents=True)
    (d / "paper_scale.txt").write_text(
        marker or f"headline={headline}\nnetwork={network}\nranks_per_node=4 (passed)\n{extra}")
    if rows is not None:
        pd.DataFrame(rows).to_csv(d / "sim.csv", index=False)
    if error:
        (d / "error.txt").write_text(error)


def test_paper_scale_tables_every_headline_cell_by_hand(tmp_path):
    """Every headline of scripts/paper_scale.sh from hand-made sim.csv files (resnet50 unless named;
    ms below are s in the rows):
    acpsgd-main on 1gbe (test_paper_scale's rows) and 10gbe (S-SGD 1.0, Power-SGD 0.5, ACP-SGD 0.25: 4x, 2x);
    acpsgd-scaling at 8 workers (the same: 4x, 2x) and 16 (Power-SGD 0.2: 0.8x, ACP-SGD's comm_s 0.1 above);
    omgs (OMGS 1.0 against layer-wise Top-k 1.5: +50%; a 25MiB Top-k at 0.5 is no baseline);
    omgs-net failed (error.txt); marsit (host 1.0 against 2.0: 50% less; device 0.8 against 1.0: 20%);
    sketch-fusion (layerfusion 0.8 against sketch none 1.0: +25%; sketch 25MiB (its wire 0.3) and
    sketch-fusion none are not the claim's); sketch-scaling (host: none rows of sketch, layerfusion rows
    of topk, no common configuration; device: scalability none (16 / 1.0) / (8 / 1.0) = 2, layerfusion
    (16 / 2.0) / (8 / 0.5) = 0.5, gain 0.25, layerfusion's comm_s 0.5 at 16 workers); dgc (resnet50
    1e6 / 5e3 = 200 on the host, exactly 100 on the device; alexnet-caffe 50; no lstm-ptb rows) priced
    on an a100; a folder with neither sim.csv nor error.txt, and one whose marker names no headline,
    network or ranks per node."""
    from test_paper_scale import acp_rows
    root = tmp_path / "ps"
    s = _sim
    _ps_folder(root, "acpsgd-main/1gbe", "acpsgd-main", acp_rows(), network="1gbe")
    _ps_folder(root, "acpsgd-main/10gbe", "acpsgd-main",
               [s("resnet50", "ssgd", 1.0), s("resnet50", "powersgd", 0.5), s("resnet50", "acpsgd", 0.25)])
    _ps_folder(root, "acpsgd-scaling", "acpsgd-scaling",
               [s("resnet50", "ssgd", 1.0, ws=8), s("resnet50", "powersgd", 0.5, ws=8),
                s("resnet50", "acpsgd", 0.25, ws=8), s("resnet50", "ssgd", 1.0), s("resnet50", "powersgd", 0.2),
                s("resnet50", "acpsgd", 0.25, comm_s=0.1)])
    _ps_folder(root, "omgs", "omgs", [s("resnet50", "omgs", 1.0, fusion="mgwfbp", plan="omgs"),
                                      s("resnet50", "topk", 1.5, fusion="none", wire=20),
                                      s("resnet50", "topk", 0.5, fusion="25MiB")], network="1gbe")
    _ps_folder(root, "omgs-net", "omgs-net", error="gradcomp: error: simulate\nmethod omgs: cannot extrapolate\n",
               network="omgs-1gbe")
    _ps_folder(root, "marsit", "marsit", [s("resnet50", "ssgd", 2.0), s("resnet50", "marsit", 1.0, wire=5),
                                          s("resnet50", "ssgd", 1.0, on="device"),
                                          s("resnet50", "marsit", 0.8, on="device", wire=5)])
    _ps_folder(root, "sketch-fusion", "sketch-fusion",
               [s("resnet50", "sketch", 1.0, fusion="none"), s("resnet50", "sketch", 0.5, fusion="25MiB", wire=30),
                s("resnet50", "sketch-fusion", 0.8, fusion="layerfusion", plan="layerfusion", wire=8),
                s("resnet50", "sketch-fusion", 0.1, fusion="none", plan="layerfusion")])
    _ps_folder(root, "sketch-scaling", "sketch-scaling", [
        s("resnet50", "sketch", 1.0, fusion="none", ws=8), s("resnet50", "sketch", 2.0, fusion="none"),
        s("resnet50", "topk", 1.0, fusion="layerfusion", ws=8), s("resnet50", "topk", 1.0, fusion="layerfusion"),
        s("resnet50", "sketch", 1.0, fusion="none", ws=8, on="device", comm_s=0.3),
        s("resnet50", "sketch", 1.0, fusion="none", on="device"),
        s("resnet50", "sketch", 0.5, fusion="layerfusion", ws=8, on="device"),
        s("resnet50", "sketch", 2.0, fusion="layerfusion", on="device", comm_s=0.5)])
    _ps_folder(root, "dgc", "dgc", [s("resnet50", "dgc", 1.0, fusion="none", dense=1e6, wire=5e3),
                                    s("resnet50", "dgc", 1.0, fusion="none", on="device", dense=1e6, wire=1e4),
                                    s("alexnet-caffe", "dgc", 1.0, fusion="none", dense=1e6, wire=2e4)],
               extra="compress_device=a100\n")
    _ps_folder(root, "empty", "other")
    _ps_folder(root, "bare", "", marker="command=gradcomp simulate\n")    # no headline, network or ranks per node
    heads, acp, src = R.paper_scale_tables(R.find_paper_scale([str(root)]))
    nogpu = " (the paper names no GPU: default)"
    p102 = " (the paper's GPU: Nvidia P102-100 (HKBU-HPML/OMGS-SGD @ac10b98, utils.py))"
    a100 = "a100" + nogpu
    DO, SR, NR = "direction only", "size reproduced", "not reproduced"
    acp_s, acp_p = "acpsgd 0.1", "acpsgd 0.1; powersgd 0.1"
    m1, m10 = "1gbe, 32 workers, mean over 4 models", "10gbe, 32 workers, mean over 4 models"
    w8, w16 = "8 workers, 10gbe, 4 models (mean shown)", "16 workers, 10gbe, 4 models (mean shown)"
    # headline, setup, published, wire vs dense, device, ours / ratio / verdict host, the same device,
    # deciding cost, plan that ran; ratios ours / published to 2 decimals, the verdict by the factor 1.5
    want = [
        ("acpsgd-main", m1, "4.06x", acp_s, nogpu, "14.00x", "3.45", DO, "2.67x", "0.66", DO, "", ""),
        ("acpsgd-main", m1, "1.43x", acp_p, nogpu, "2.50x", "1.75", DO, "0.50x", "0.35", NR,
         "device: compress_s (+1000.0 ms)", ""),
        ("acpsgd-main", m10, "4.06x", acp_s, nogpu, "4.00x", "0.99", SR, "", "", "", "", ""),
        ("acpsgd-main", m10, "1.43x", acp_p, nogpu, "2.00x", "1.40", SR, "", "", "", "", ""),
        ("acpsgd-scaling", w8, "4.06x", acp_s, nogpu, "4.00x", "0.99", SR, "", "", "", "", ""),
        ("acpsgd-scaling", w8, "1.43x", acp_p, nogpu, "2.00x", "1.40", SR, "", "", "", "", ""),
        ("acpsgd-scaling", w16, "4.06x", acp_s, nogpu, "4.00x", "0.99", SR, "", "", "", "", ""),
        ("acpsgd-scaling", w16, "1.43x", acp_p, nogpu, "0.80x", "0.56", NR, "", "", "", "host: comm_s (+100.0 ms)", ""),
        ("omgs", "16 workers, 1gbe (our 1 GbE preset), rho 0.001", "31%",
         "omgs (density 0.001) 0.1; topk (layer-wise) (density 0.001) 0.2", p102, "50.00%", "1.61", DO,
         "", "", "n/a: no omgs rows", "", "host: omgs"),
        ("omgs-net", "16 workers, omgs-1gbe (the paper's measured 1 GbE), rho 0.001", "31%", "", p102, "", "",
         "n/a: method omgs: cannot extrapolate", "", "", "n/a: method omgs: cannot extrapolate", "",
         "not recorded (sim.csv without plan_source)"),
        ("marsit", "16 workers, 10gbe", "35%", "marsit 0.05", nogpu, "50.00%", "1.43", SR, "20.00%", "0.57", DO,
         "", ""),
        ("sketch-fusion", "16 workers, 10gbe", "18.6%",
         "sketch-fusion (layerfusion) (density 0.001) 0.08; sketch (none) (density 0.001) 0.1", nogpu, "25.00%",
         "1.34", SR, "", "", "", "", "host: layerfusion"),
        ("sketch-scaling", "8-16 workers, 10gbe", "2.87x", "sketch (density 0.001) 0.1; topk (density 0.001) 0.1",
         nogpu, "", "", "", "0.25x", "0.09", NR, "device: comm_s (+500.0 ms) at 16 workers", ""),
        ("dgc", "ResNet-50 (resnet50), density 0.001", "277x", "dgc (density 0.001) 0.005 to 0.01", a100,
         "200.00x", "0.72", SR, "100.00x", "0.36", DO, "", ""),
        ("dgc", "AlexNet (alexnet-caffe), density 0.001", "597x", "dgc (density 0.001) 0.02", a100, "50.00x", "0.08",
         NR, "", "", "", "host: wire_bytes (message too large)", "")]
    cols = ["headline", "setup", "published", "wire vs dense", "device (compression)", "ours host",
            "ours/published host", "verdict host", "ours device", "ours/published device", "verdict device",
            "deciding cost (not reproduced)", "plan that ran"]
    assert list(heads.columns) == [
        "headline", "setup", "claim", "published", "wire vs dense", "device (compression)", "ours host",
        "ours/published host", "verdict host", "ours device", "ours/published device", "verdict device",
        "deciding cost (not reproduced)", "plan that ran"]
    assert [tuple(r) for r in heads[cols].itertuples(index=False)] == want
    up = "(up to; ours: max over the same setups)"
    every = "for every model (published: mean over all setups)"
    assert list(heads["claim"]) == [
        "ACP-SGD faster than S-SGD (mean)", "ACP-SGD faster than Power-SGD (mean)"] * 2 + [
        f"ACP-SGD faster than S-SGD {every}", f"ACP-SGD faster than Power-SGD {every}"] * 2 + [
        R.OMGS_CLAIM, R.OMGS_CLAIM, f"Marsit less time than S-SGD {up}",
        f"Sketch-Fusion faster than per-tensor sketch {up}", f"LayerFusion improves scalability {up}",
        "message >= 100x smaller than the gradient", "message >= 100x smaller than the gradient"]
    # the ACP-SGD table: a row per network in the paper's order; 10gbe has no device rows
    assert list(acp.columns) == ["network", "ACP/S-SGD host", "ACP/S-SGD device", "ACP/S-SGD (published)",
                                 "ACP/Power-SGD host", "ACP/Power-SGD device", "ACP/Power-SGD (published)"]
    assert list(acp["network"]) == ["1gbe", "10gbe"]
    assert acp.iloc[1, 1:].tolist() == [4.0, pytest.approx(NAN, nan_ok=True), 4.06, 2.0,
                                        pytest.approx(NAN, nan_ok=True), 1.43]
    # the sources: each folder in path order, its (compress_on, cost_source) pairs in the rows' order
    got = [tuple(r) for r in src.itertuples(index=False)]
    host, dev = "preset; host costs", "preset; device costs"
    assert list(src.columns) == ["headline", "folder", "network", "ranks_per_node", "compress_on", "cost_source"]
    assert [g[:2] + g[4:] for g in got] == [
        ("acpsgd-main", "acpsgd-main/10gbe", "host", host),
        ("acpsgd-main", "acpsgd-main/1gbe", "host", "network preset 1gbe; host costs"),
        ("acpsgd-main", "acpsgd-main/1gbe", "device", "network preset 1gbe; device costs; device v100 (roofline)"),
        ("acpsgd-scaling", "acpsgd-scaling", "host", host),
        ("", "bare", "", "simulate failed: no sim.csv"),
        ("dgc", "dgc", "host", host), ("dgc", "dgc", "device", dev),
        ("other", "empty", "", "simulate failed: no sim.csv"),
        ("marsit", "marsit", "host", host), ("marsit", "marsit", "device", dev),
        ("omgs", "omgs", "host", host),
        ("omgs-net", "omgs-net", "", "simulate failed: gradcomp: error: simulate\nmethod omgs: cannot extrapolate"),
        ("sketch-fusion", "sketch-fusion", "host", host),
        ("sketch-scaling", "sketch-scaling", "host", host), ("sketch-scaling", "sketch-scaling", "device", dev)]
    assert {g[2:4] for g in got} == {("10gbe", "4 (passed)"), ("1gbe", "4 (passed)"), ("omgs-1gbe", "4 (passed)"),
                                     ("", "")}
    assert [g[2] for g in got if g[0] == "omgs-net"] == ["omgs-1gbe"]


def test_paper_scale_tables_sketch_scaling_skips_a_side_without_layerfusion_at_the_largest_size(tmp_path):
    """Host: layerfusion only at 8 workers, skipped (the device side still judged). Device: both
    scalabilities (16 / 1.0) / (8 / 1.0) = 2, a gain of exactly 1: not an improvement, every cost equal."""
    s = _sim
    _ps_folder(tmp_path / "ps", "sketch-scaling", "sketch-scaling", [
        s("resnet50", "sketch", 1.0, fusion="none", ws=8), s("resnet50", "sketch", 2.0, fusion="none"),
        s("resnet50", "sketch", 1.0, fusion="layerfusion", ws=8),
        s("resnet50", "sketch", 1.0, fusion="none", ws=8, on="device"),
        s("resnet50", "sketch", 1.0, fusion="none", on="device"),
        s("resnet50", "sketch", 1.0, fusion="layerfusion", ws=8, on="device"),
        s("resnet50", "sketch", 1.0, fusion="layerfusion", on="device")])
    heads, _, _ = R.paper_scale_tables(R.find_paper_scale([str(tmp_path / "ps")]))
    r = heads.iloc[0]
    assert (r["ours host"], r["verdict host"]) == ("", "")
    assert (r["ours device"], r["verdict device"]) == ("1.00x", "not reproduced")
    assert r["deciding cost (not reproduced)"] == "device: compress_s (+0.0 ms) at 16 workers"


def test_paper_scale_tables_no_sketch_scaling_headline_at_one_world_size(tmp_path):
    s = _sim
    _ps_folder(tmp_path / "ps", "sketch-scaling", "sketch-scaling",
               [s("resnet50", "sketch", 2.0, fusion="none"), s("resnet50", "sketch", 1.0, fusion="layerfusion")])
    heads, acp, src = R.paper_scale_tables(R.find_paper_scale([str(tmp_path / "ps")]))
    assert heads.empty and acp.empty and list(src["headline"]) == ["sketch-scaling"]


# ------------------------------------------------------------------ the paper sections


def test_paper_sections_line_by_line_of_one_acpsgd_setup(tmp_path):
    """paper_sections on S-SGD, Power-SGD and ACP-SGD at one setup: the ACP-SGD tables and their
    figure; every other paper table says what it needs and which config produces it (CONFIGS and HOW,
    written again here); each paper's published headline number in its section's first line."""
    from test_tables import row
    e = T.collapse_repeats(pd.DataFrame([row("ssgd", 0.2), row("powersgd", 0.1), row("acpsgd", 0.05)]))
    rep = R.Report(str(tmp_path), False)
    R.paper_sections(rep, e, str(tmp_path))

    def missing(name, cfg, needs, how=""):
        return (f"_Table `{name}` not in these results (needs {needs}). Produced by `bench-configs/{cfg}.toml` "
                f"(laptop: `bench-configs/{cfg}-laptop.toml`){'; ' + how if how else ''}; see docs/reproduce.md._")
    assert [x for x in rep.lines if not x.startswith("|")] == [
        "## ACP-SGD", "",
        "Paper: Zhang et al., ACP-SGD (alternate compressed Power-SGD), ICDCS 2023. Published: on average 4.06x "
        "over S-SGD and 1.43x over Power-SGD (8-64 GPUs, 1 Gb/s Ethernet to 100 Gb/s InfiniBand).", "",
        "### Iteration time per model and method", "",
        "Table `acpsgd_main` ([csv](acpsgd_main.csv)): iteration time (best configuration, own collective) and "
        "speedups", "", "",
        "Table `acpsgd_main_wide` ([csv](acpsgd_main_wide.csv)): iteration time (ms), paper layout", "", "",
        "Table `acpsgd_speedup_summary` ([csv](acpsgd_speedup_summary.csv)): ACP-SGD speedup over S-SGD and "
        "Power-SGD, mean over setups, beside the published mean", "", "",
        "![acpsgd_main.png](acpsgd_main.png)", "",
        "### Ablation: collective, pipelining, fusion", "",
        missing("acpsgd_ablation", "acpsgd-ablation",
                "e2e rows with pipelining off and on, fusion none and a fusion threshold"), "",
        "### Sweep: fusion buffer size", "",
        missing("acpsgd_buffer_sweep", "acpsgd-buffer-sweep", "e2e rows with two or more fusion byte thresholds"), "",
        "### Sweep: Power-SGD / ACP-SGD rank", "",
        missing("acpsgd_rank_sweep", "acpsgd-rank-sweep", "e2e rows of powersgd/acpsgd at two or more ranks"), "",
        "### Sweep: world size", "",
        missing("acpsgd_scaling", "acpsgd-scaling", "e2e rows of one model at two or more world sizes (one run per "
                "world size)", "one run per world size (slurm/submit-acpsgd-scaling.sh submits 8/16/32/64 ranks "
                "into subdirectories of one folder; report that folder)"), "",
        "### Sweep: network", "",
        missing("acpsgd_network", "acpsgd-main", "runs on two or more networks (network.txt in each run "
                "directory)", "one run per network, each with a network.txt label (slurm/submit-acpsgd-network.sh)"),
        "",
        "## DGC: compression ratio", "",
        "Paper: Lin et al., Deep Gradient Compression, ICLR 2018. DeepSpeech is not in gradcomp's model zoo; the "
        "paper's AlexNet is BVLC AlexNet (`alexnet-caffe`, 232.6 MiB). Message = `wire_bytes` one worker sends per "
        "iteration at the final density (no warm-up), fusion none.", "",
        missing("dgc_ratio", "dgc-ratio", "e2e rows of method dgc"), "",
        "## OMGS-SGD", "",
        "Paper: Shi et al., OMGS-SGD (optimal merged gradient sparsification), INFOCOM 2020. Published: up to 31% "
        "faster than layer-wise sparsified SGD (16 GPUs, 1 GbE, rho = 0.001); their figure is training "
        "throughput.", "",
        missing("omgs", "omgs", "e2e rows of omgs and of topk with fusion none"), "",
        "## Marsit", "",
        "Paper: Wu et al., Marsit (sign bits through multi-hop all-reduce), 2022. Published: up to 35% less "
        "training time than without compression at equal accuracy (ours: one iteration).", "",
        missing("marsit", "marsit", "e2e rows of marsit and ssgd"), "",
        "## Sketch-Fusion", "",
        "Paper: Dai et al., Sketch-Fusion SGD, JPDC 2024. Published: up to 18.6% faster training on 16 GPUs; "
        "LayerFusion improves other methods' scalability by up to 2.87x.", "",
        missing("sketch_fusion", "sketch-fusion", "e2e rows with fusion layerfusion (or method sketch-fusion)"), "",
        missing("sketch_scaling", "sketch-fusion", "e2e rows with fusion none and layerfusion at two or more world "
                "sizes", "one run per world size (slurm/submit-sketch-fusion.sh --scaling)"), ""]
    assert rep.tables == ["acpsgd_main", "acpsgd_main_wide", "acpsgd_speedup_summary"]
    assert rep.plots == ["acpsgd_main.png"] and os.path.getsize(tmp_path / "acpsgd_main.png") > 0
    assert sorted(rep.missing) == sorted(["acpsgd_ablation", "acpsgd_buffer_sweep", "acpsgd_rank_sweep",
                                          "acpsgd_scaling", "acpsgd_network", "dgc_ratio", "omgs", "marsit",
                                          "sketch_fusion", "sketch_scaling"])
    assert rep.missing["omgs"] == "needs e2e rows of omgs and of topk with fusion none"


def test_paper_sections_plots_acpsgd_main_per_setup_and_run_with_its_intervals(tmp_path, monkeypatch):
    """The ACP-SGD figure's data: one bar group per setup and run, each method's ms (iter_s x 1000) in
    the table's method order, and beside each its 95% half-width as `METHOD ±` (iter_ci95_s x 1000); a
    method measured without intervals keeps its `±` column, empty."""
    from test_tables import row

    from gradcomp_analysis import plots
    got = {}

    def spy(df, idx, cols, fname, *args):
        got[fname] = (df, idx, cols, args)
        return [fname]
    monkeypatch.setattr(plots, "bars", spy)
    e = T.collapse_repeats(pd.DataFrame([
        row("ssgd", 0.2, run="r2", model="a"), row("powersgd", 0.1, run="r2", model="a"),
        row("acpsgd", 0.05, run="r2", model="a", ci=NAN), row("ssgd", 0.4, run="r1", ci=0.01, model="z"),
        row("acpsgd", 0.1, run="r1", model="z", ci=NAN), row("powersgd", 0.3, run="r1", model="z")]))
    R.paper_sections(R.Report(str(tmp_path), False), e, str(tmp_path))
    df, idx, cols, args = got["acpsgd_main.png"]
    assert args == (str(tmp_path), "ACP-SGD", "ms per iteration")          # out_dir, title, y label
    assert idx == ["model", "world_size", "network", "run"] and cols == ["ssgd", "signsgd", "topk", "powersgd",
                                                                          "acpsgd"]
    assert list(df.columns) == ["model", "world_size", "batch", "device", "run", "ssgd", "powersgd", "acpsgd",
                                "ssgd ±", "powersgd ±", "acpsgd ±"]
    assert [list(r) for r in df.itertuples(index=False)] == [
        ["a", 2, 10, "v100", "r2", 200.0, 100.0, 50.0, pytest.approx(0.2), pytest.approx(0.1),
         pytest.approx(NAN, nan_ok=True)],
        ["z", 2, 10, "v100", "r1", 400.0, 300.0, 100.0, pytest.approx(10.0), pytest.approx(0.3),
         pytest.approx(NAN, nan_ok=True)]]


@pytest.mark.parametrize("col, values", [("model", ["alpha", "beta"]), ("world_size", [2, 4]), ("network", ["x", "y"]),
                                         ("run", ["r1", "r2"])])
def test_paper_sections_buffer_sweep_figure_draws_a_line_per_setup_and_run(tmp_path, monkeypatch, col, values):
    """The fusion-buffer figure keeps apart the sweeps of two models, world sizes, networks or runs:
    per method and value one line over the four thresholds (none, 1MiB, 25MiB, single), in ms, named by
    the value (in its label or its panel's title), and by its model. The second value's times are 1.1x
    the first's."""
    from test_tables import row

    from gradcomp_analysis import plots
    figs = {}

    def save(fig, out_dir, fname):
        figs[fname] = fig
        return fname
    monkeypatch.setattr(plots, "_save", save)
    scale = [("none", 1.0), ("1MiB", 0.8), ("25MiB", 0.7), ("single", 0.9)]
    e = T.collapse_repeats(pd.DataFrame([row(m, k * x * (1 + 0.1 * i), fusion=f, **{col: v})
                                         for i, v in enumerate(values) for f, x in scale
                                         for m, k in [("ssgd", 0.2), ("acpsgd", 0.1)]]))
    R.paper_sections(R.Report(str(tmp_path), False), e, str(tmp_path))
    drawn = [(f"{ax.get_title()} | {c.get_label()}", list(c.lines[0].get_ydata()))
             for ax in figs["acpsgd_buffer_sweep.png"].axes for c in ax.containers]
    want = {(m, str(v)): [1000 * k * x * (1 + 0.1 * i) for _, x in scale]
            for i, v in enumerate(values) for m, k in [("ssgd", 0.2), ("acpsgd", 0.1)]}
    assert len(drawn) == len(want)
    for (m, v), ys in want.items():
        hit = [y for name, y in drawn if (f"| {m} ms" in name or f": {m} ms" in name) and re.search(rf"\b{v}\b", name)]
        assert len(hit) == 1 and hit[0] == pytest.approx(ys), (m, v, drawn)
    # the model each line belongs to is named too (its panel's title, or the title of the one panel)
    for name, _ in drawn:
        assert re.search(r"\b(alpha|beta)\b" if col == "model" else r"\bm\b", name), name


# ------------------------------------------------------------------ _write_files, line by line


def _one(name):
    """A stub table: one column `t` holding NAME (its Markdown is `| t |`, `|---|`, `| NAME |`)."""
    return pd.DataFrame({"t": [name]})


def _md(name):
    return f"| t |\n|---|\n| {name} |"


def _tab(name, caption=""):
    """The lines Report.table adds for a stub table (the rule written again)."""
    return [f"Table `{name}` ([csv]({name}.csv))" + (f": {caption}" if caption else ""), "", _md(name), ""]


def _stub_write_files(monkeypatch, calls, missing=None):
    """_write_files' collaborators (the sections and tables with tests of their own, the plots)
    replaced by stubs that record what they were given and return a one-cell table or a file name."""
    from gradcomp_analysis import plots
    from gradcomp_analysis import trains as TR

    def rec(name, ret):
        def f(*a, **k):
            calls.setdefault(name, []).append(a)
            return ret(*a) if callable(ret) else ret
        return f
    monkeypatch.setattr(R, "_run_lines", rec("run_lines", ["- run line"]))
    monkeypatch.setattr(R, "_sim_lines", rec("sim_lines", ["- sim line"]))
    monkeypatch.setattr(R, "fastest_section", rec("fastest", None))

    def paper(rep, e, out):
        calls.setdefault("paper", []).append((e, out))
        rep.missing.update(missing or {})
    monkeypatch.setattr(R, "paper_sections", paper)
    monkeypatch.setattr(R, "acp_vs_power", rec("acp_vs_power", None))
    monkeypatch.setattr(R, "simulate_section", rec("simulate", None))
    monkeypatch.setattr(R, "paper_scale_section", rec("paper_scale", None))
    monkeypatch.setattr(R, "paper_scale_trains", rec("paper_scale_trains", None))
    monkeypatch.setattr(R, "absent_line", rec("absent", "ABSENT"))
    monkeypatch.setattr(TR, "column", rec("column", lambda df, ch: [f"v{i}" for i in range(len(df))]))
    monkeypatch.setattr(T, "collapse_repeats",
                        rec("collapse", lambda df: df.assign(repeats=[1, 3, 2, 1, 1, 1][:len(df)])))
    monkeypatch.setattr(T, "micro_comm_tables",
                        rec("micro_comm_tables", {"allreduce": _one("ar"), "allgather": _one("ag")}))
    for name in ["micro_compress", "micro_phases", "e2e_overview", "e2e_phases", "sim_host_calibration",
                 "converge_summary"]:
        monkeypatch.setattr(T, name, rec(name, _one(name)))
    monkeypatch.setattr(T, "auto", rec("auto", lambda df: df))
    monkeypatch.setattr(T, "planner_accuracy", rec("planner_accuracy", pd.DataFrame({"within": ["yes", "no", "yes"]})))
    monkeypatch.setattr(T, "sim_accuracy", rec("sim_accuracy", pd.DataFrame({
        "verdict": ["within", "outside", "too-noisy", "ranks-exceed-cores", "within", "within"],
        "oversubscribed": ["", "8 ranks on 2 cores", NAN, "4 ranks on 2 cores", "8 ranks on 2 cores", ""]})))
    for name in ["micro_comm", "micro_compress", "micro_phases", "e2e_phases", "sim_accuracy", "converge_curves"]:
        monkeypatch.setattr(plots, name, rec("plot_" + name, [f"{name}.png"]))


def test_write_files_line_by_line_with_every_kind_of_result(tmp_path, monkeypatch, capsys):
    """_write_files with every file a run can hold: report.md line by line (the run and simulation
    lines, skipped folders and rows left out, the times paragraph, the repeats line, each section in
    order with its tables, captions and figures, the overlap pivots, the planner's and simulator's
    counts, the convergence targets, the Files line), each table's CSV, Markdown and LaTeX file and
    manifest.json. The collaborators are stubs (their own tests are elsewhere)."""
    import difflib
    import json

    from gradcomp_analysis import trains as TR
    from gradcomp_analysis.io import Results
    calls = {}
    _stub_write_files(monkeypatch, calls, missing={"omgs": "needs omgs", "dgc_ratio": "needs dgc"})
    e2e = pd.DataFrame({
        "model": ["a", "a", "a", "b", "c", "c"], "world_size": [2, 2, 2, 4, 2, 2],
        "method": ["ssgd", "ssgd", "topk", "ssgd", "ssgd", "ssgd"], "run": ["r1", "r2", "r1", "r1", "r1", "r1"],
        "fusion": ["none", 1048576, "none", "none", "none", 1048576],
        "pipelining": ["on", "on", "on", "on", "on", "off"],
        "overlap_eff": [0.5, 0.25, 0.75, NAN, 0.125, 0.875], "planned_s": [NAN, "0.1", NAN, NAN, NAN, NAN]})
    checks = pd.DataFrame({"method": ["topk", "ssgd"], "world_size": [2, 2], "density": [0.01, NAN], "rank": [NAN, NAN],
                           "sketch_rows": [NAN, NAN], "sketch_cols_per_k": [NAN, NAN], "qsgd_levels": [NAN, NAN],
                           "seeds": [2, 3], "steps": [40, NAN], "steps_lo": [30, NAN], "steps_hi": [50, NAN],
                           "ratio": [1.5, 1.0], "text": ["trains", "dense"], "target_loss": [0.123456, NAN],
                           "target_accuracy": [0.98765, NAN], "dense_seeds": [3.0, NAN]})
    monkeypatch.setattr(TR, "checks", lambda conv, recs: calls.setdefault("checks", []).append((conv, recs)) or checks)
    conv = pd.DataFrame({"step": [1]})
    micro = pd.DataFrame({"x": [1]})
    kc = pd.DataFrame({"mem_read_gbps": [1.234, 5.678]})
    mc = pd.DataFrame({"y": [2]})
    sv = pd.DataFrame({"tolerance": [0.125, 0.1, 0.125]})
    sh = pd.DataFrame({"h": [1]})
    meta, hist, crec = [("r1", {"id": "A"}), ("r2", {"id": "B"})], [("r1", {"id": "H"})], [("r1", {"id": "C"})]
    res = Results(micro_comm=mc, micro_compress=kc, micro=micro, e2e=e2e, converge=conv, sim_vs_measured=sv,
                  sim_host=sh, meta=meta, history=hist, converge_records=crec,
                  skipped=[("/x/a", "no run"), ("/x/b", "a report folder")], warnings=["row 3 left out"])
    sims, ps = [{"path": "s"}], [{"path": "p"}]
    out = str(tmp_path)
    R._write_files(out, res, sims, ps, True)

    assert capsys.readouterr().err == ("gradcomp_analysis: warning: skipped /x/a: no run\n"
                                       "gradcomp_analysis: warning: skipped /x/b: a report folder\n")
    assert calls["run_lines"] == [(meta, hist, crec)] and calls["sim_lines"] == [(sims, ps)]
    assert calls["checks"] == [(conv, [{"id": "A"}, {"id": "B"}, {"id": "H"}, {"id": "C"}])]
    # the trains column on e2e, micro and micro_compress (not micro_comm), from trains.column
    assert [len(a[0]) for a in calls["column"]] == [6, 1, 2]
    assert list(res.e2e["trains"]) == ["v0", "v1", "v2", "v3", "v4", "v5"] and list(res.micro["trains"]) == ["v0"]
    assert list(res.micro_compress["trains"]) == ["v0", "v1"] and "trains" not in res.micro_comm.columns
    # the e2e rows the sections get: collapsed, pipelining and fusion as text
    (e,) = [a[1] for a in calls["fastest"]]
    assert list(e["fusion"]) == ["none", "1048576", "none", "none", "none", "1048576"]
    assert list(e["pipelining"]) == ["on"] * 5 + ["off"] and list(e["repeats"]) == [1, 3, 2, 1, 1, 1]
    assert calls["fastest"][0][3] == meta + hist + crec and calls["fastest"][0][2] is checks
    assert calls["paper"][0][0] is e and calls["paper"][0][1] == out
    assert [len(a[0]) for a in calls["e2e_overview"]] == [3, 1, 2]
    assert calls["e2e_phases"][0][0] is e and calls["planner_accuracy"][0][0] is e
    assert calls["plot_sim_accuracy"][0][2] == 0.1 and calls["plot_micro_comm"][0] == (mc, out)
    assert [(a[1] is x, *a[2:]) for a, x in zip(calls["acp_vs_power"], [res.micro_compress, res.micro])] == [
        (True, "micro_compress_acpsgd_vs_powersgd", "kernels of one step on one rank"),
        (True, "micro_acpsgd_vs_powersgd", "one step through MPI, exchange included")]
    assert len(calls["acp_vs_power"]) == 2
    assert [a[1:] for a in calls["simulate"]] == [(sims, out)] and [a[1:] for a in calls["paper_scale"]] == [(ps,)]
    assert [a[1:] for a in calls["paper_scale_trains"]] == [(ps,)] and "absent" not in calls

    times = (
        "Times are per iteration, the maximum over ranks, median over timed iterations, in ms, shown as "
        "`median ± h` where h is the half-width of the 95% confidence interval of the mean iteration "
        "(`iter_ci95_s`; in the CSV tables the column `X ±`), or `median (too noisy)` where h exceeds the "
        "median (the interval reaches below zero and says nothing). A comparison column (`vs ssgd` etc.) says "
        "`faster` or `slower`, or `≈ not significant` when the two intervals overlap: that difference lies "
        "inside the measurement noise, do not rank it. \"best\" = the fastest fusion/pipelining "
        "configuration present for that method (shown as `fusion/pipelining`); an S-SGD baseline is named "
        "`fusion/pipelining/collective` (`ssgd config`). When several runs are combined, a table compares "
        "methods within one run wherever a run holds the comparison (every run is then shown on its own); "
        "only where no run does are the runs' rows compared together. The `run` column says which run a row "
        "came from; a comparison drawn from several runs names them all (`a + b`, in long tables in "
        "`runs compared`). " + R.WIRE_TEXT + " Columns marked *(published)* are the papers' "
        "numbers (their hardware; see each section), not ours. `trains`: whether the row's method at its "
        "hyper-parameters (density, rank, sketch size, QSGD levels) reaches dense S-SGD's held-out accuracy in "
        "`gradcomp converge` in these results: dense's final loss and accuracy over its seeds widened by the "
        "one-sided 95% prediction bound of one more dense seed: `trains (dense accuracy in N steps)`, `does not "
        "reach dense`, `no dense target` (dense at fewer than 2 seeds), `diverged at step N`, `interrupted` (a "
        "curve cut short), `at np N` when only another world size was checked, "
        "`not checked` when no converge.csv has that configuration (docs/methods.md, \"Convergence check\").")
    sim_acc = (
        "`gradcomp simulate --fits RUN --compare RUN/e2e.csv` (bench-configs/sim-accuracy.toml): simulated vs "
        "measured median iteration time over the case's rounds, beside its run-to-run spread "
        "(the median's order-statistic interval over the median: of 2-4 rounds the range, of 5 the second to "
        "fourth smallest, of 7 the third to fifth). 3 of 4 judged cases within 10%, 12.5%; 1 too noisy to judge "
        "(noise above the tolerance: the spread, plus for host compression the compression fit's spread and at "
        "least the run's host jitter, each as far as it moves the prediction; docs/performance.md), "
        "1 not held to it (more ranks than cores). The host model is calibrated on every method's "
        "host-compression cases (median over cases of each case's median over rounds; fits.csv `host` rows with "
        "their spread over rounds) and each method's cases are priced by the model calibrated without that "
        "method (leave one method out): `validation` rows are out of sample, `calibration` rows are not. "
        "Oversubscribed: 4 ranks on 2 cores; 8 ranks on 2 cores.")
    conv_text = (
        "An MLP trained through every method's compressor, buckets and exchange (docs/methods.md, "
        "\"Convergence check\"). `converge_targets`: per configuration over its seeds, the steps to "
        "dense S-SGD's target (dense's final held-out loss and accuracy over its seeds widened by the "
        "one-sided 95% prediction bound of one more dense seed); the verdict every `trains` column "
        "shows. `converge_summary`: per run, the final losses beside dense's (`within_tolerance`: at "
        "most 1.25x dense's final loss, the check before 2026-11-28, kept as a ratio column; `why_not`: the "
        "reason documented for the earlier 200-step run; `wire vs dense`: the median `wire_bytes` over the "
        "MLP's fp32 gradient, 4 bytes x `model_params`).")
    targets = ("| method | world_size | density | seeds | steps | steps_lo | steps_hi | ratio | text | target |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n"
               "| topk | 2 | 0.01 | 2 | 40 | 30 | 50 | 1.5 | trains | loss <= 0.1235, accuracy >= 0.9877 "
               "(3 dense seeds) |\n"
               "| ssgd | 2 |  | 3 |  |  |  | 1 | dense | - |")
    conv_caption = ("steps to dense S-SGD's accuracy per configuration (its seeds together; `ratio`: mean final "
                    "held-out loss over dense's)")
    want = [
        "# gradcomp report", "", "- run line", "- sim line", "",
        "Folders skipped:", "", "- `/x/a`: no run", "- `/x/b`: a report folder", "",
        "Rows left out:", "", "- row 3 left out", "",
        times, "",
        "2 e2e case(s) were measured more than once in one run (up to 3 times): each is shown at its median "
        "repeat, its ± widened to half the range between the repeats where that is larger.", "",
        "## Collectives (micro-comm)", "",
        "Median time per iteration (max over ranks) and bus bandwidth (nccl-tests definition).", "",
        "### allreduce", "", *_tab("allreduce")[:2], _md("ar"), "",
        "### allgather", "", *_tab("allgather")[:2], _md("ag"), "",
        "![micro_comm.png](micro_comm.png)", "",
        "## Compression kernels (micro-compress)", "",
        "Memory read bandwidth probe: 5.68 GB/s; `mem_frac` = input GB/s / probe.", "",
        *_tab("micro_compress"), "![micro_compress.png](micro_compress.png)", "",
        "## One tensor through MPI (micro)", "", *_tab("micro")[:2], _md("micro_phases"), "",
        "![micro_phases.png](micro_phases.png)", "",
        "## Training iterations (e2e)", "",
        "Median iteration time (ms) per method, fusion plan and pipelining (own collective); speedup over "
        "ssgd with the same fusion and pipelining, and each method's best configuration with its speedup "
        "over ssgd's best (named below each table).", "",
        "### a, 2 ranks", "", *_tab("e2e_a_np2")[:2], _md("e2e_overview"), "",
        "Overlap efficiency (pipelining on), a, 2 ranks:", "",
        "Table `e2e_a_np2_overlap` ([csv](e2e_a_np2_overlap.csv))", "",
        "| run | method | none | 1048576 |\n|---|---|---|---|\n| r1 | ssgd | 0.5 |  |\n| r1 | topk | 0.75 |  |\n"
        "| r2 | ssgd |  | 0.25 |", "",
        "### b, 4 ranks", "", *_tab("e2e_b_np4")[:2], _md("e2e_overview"), "",
        "### c, 2 ranks", "", *_tab("e2e_c_np2")[:2], _md("e2e_overview"), "",
        "Overlap efficiency (pipelining on), c, 2 ranks:", "",
        "Table `e2e_c_np2_overlap` ([csv](e2e_c_np2_overlap.csv))", "",
        "| method | none |\n|---|---|\n| ssgd | 0.125 |", "",
        "### Phase breakdown", "",
        *_tab("e2e_phases", "phase times at each method's best configuration (ms)")[:2], _md("e2e_phases"), "",
        "![e2e_phases.png](e2e_phases.png)", "",
        "## Planner accuracy", "",
        "Planner fusions (`mgwfbp`, `omgs`, `layerfusion`): the planner's own prediction for the plan that "
        "ran (`planned_s`, its timeline model with the costs it calibrated in the run) beside the measured "
        "`bwd_sync_s`, the same span from the start of backward to the end of the last communication. "
        "2 of 3 within 25%. A large error means the planner chose "
        "its buckets from a wrong picture of this machine (docs/methods.md, \"Fusion, pipelining and "
        "planners\").", "",
        "Table `planner_accuracy` ([csv](planner_accuracy.csv))", "",
        "| within |\n|---|\n| yes |\n| no |\n| yes |", "",
        "## Simulator accuracy", "", sim_acc, "",
        "Table `sim_accuracy` ([csv](sim_accuracy.csv))", "",
        "| verdict | oversubscribed |\n|---|---|\n| within |  |\n| outside | 8 ranks on 2 cores |\n| too-noisy |  |\n"
        "| ranks-exceed-cores | 4 ranks on 2 cores |\n| within | 8 ranks on 2 cores |\n| within |  |", "",
        "![sim_accuracy.png](sim_accuracy.png)", "",
        *_tab("sim_host_calibration", "the host model each simulation used: value, its spread over rounds, and its "
              "range over the leave-one-method-out calibrations"),
        "## Convergence (`gradcomp converge`)", "", conv_text, "",
        f"Table `converge_targets` ([csv](converge_targets.csv)): {conv_caption}", "", targets, "",
        *_tab("converge_summary", "final held-out loss and accuracy per method beside dense S-SGD")[:2],
        _md("converge_summary"), "",
        "![converge_curves.png](converge_curves.png)", "",
        "## Files", "",
        "15 tables (Markdown + CSV + LaTeX), 6 plots; paper tables without rows here: dgc_ratio, omgs.", ""]
    got = open(os.path.join(out, "report.md")).read().split("\n")
    want = "\n".join(want).split("\n")
    assert got == want, "\n".join(difflib.unified_diff(want, got, lineterm=""))
    tables = ["allreduce", "allgather", "micro_compress", "micro", "e2e_a_np2", "e2e_a_np2_overlap", "e2e_b_np4",
              "e2e_c_np2", "e2e_c_np2_overlap", "e2e_phases", "planner_accuracy", "sim_accuracy",
              "sim_host_calibration", "converge_targets", "converge_summary"]
    plots_ = ["micro_comm.png", "micro_compress.png", "micro_phases.png", "e2e_phases.png", "sim_accuracy.png",
              "converge_curves.png"]
    assert json.load(open(os.path.join(out, "manifest.json"))) == {
        "tables": tables, "plots": plots_, "missing": {"omgs": "needs omgs", "dgc_ratio": "needs dgc"},
        "runs": ["r1", "r2"],
        "skipped": [{"folder": "/x/a", "why": "no run"}, {"folder": "/x/b", "why": "a report folder"}]}
    assert open(os.path.join(out, "manifest.json")).read().split("\n")[:2] == ["{", ' "tables": [']
    assert sorted(os.listdir(out)) == sorted(["report.md", "manifest.json", *[f"{t}.{x}" for t in tables
                                                                              for x in ("csv", "md", "tex")]])
    assert open(os.path.join(out, "micro.csv")).read() == "t\nmicro_phases\n"
    assert open(os.path.join(out, "e2e_phases.md")).read() == ("phase times at each method's best configuration "
                                                               "(ms)\n\n" + _md("e2e_phases") + "\n")
    assert open(os.path.join(out, "e2e_a_np2_overlap.csv")).read() == ("run,method,none,1048576\nr1,ssgd,0.5,\n"
                                                                       "r1,topk,0.75,\nr2,ssgd,,0.25\n")
    assert open(os.path.join(out, "converge_targets.csv")).read().splitlines()[0] == (
        "method,world_size,density,seeds,steps,steps_lo,steps_hi,ratio,text,target")


@pytest.mark.parametrize("absent", ["ABSENT", ""])
def test_write_files_without_e2e_rows_lists_the_paper_tables_missing_and_what_the_folder_lacks(
        tmp_path, monkeypatch, capsys, absent):
    """No measured file (a folder of one run.json): no times paragraph, no section, every paper table
    missing for want of e2e rows, the Files line with absent_line's line when it has one."""
    import json

    from gradcomp_analysis import trains as TR
    from gradcomp_analysis.io import Results
    calls = {}
    _stub_write_files(monkeypatch, calls)
    monkeypatch.setattr(R, "absent_line", lambda res: calls.setdefault("absent", []).append(res) or absent)
    monkeypatch.setattr(TR, "checks", lambda conv, recs: pd.DataFrame())
    res = Results(meta=[("r1", {})], micro=pd.DataFrame({"x": []}), e2e=pd.DataFrame({"model": []}))
    R._write_files(str(tmp_path), res, [], [], False)
    assert capsys.readouterr().err == ""
    got = open(tmp_path / "report.md").read().split("\n")
    assert got == ["# gradcomp report", "", "- run line", "- sim line", "", "## Files", "",
                   "0 tables (Markdown + CSV), 0 plots.", "", *([absent] if absent else []), ""]
    assert calls["absent"] == [res] and "paper" not in calls and calls["fastest"][0][1] is None
    names = ["acpsgd_main", "acpsgd_ablation", "acpsgd_buffer_sweep", "acpsgd_rank_sweep", "acpsgd_scaling",
             "acpsgd_network", "dgc_ratio", "omgs", "marsit", "sketch_fusion", "sketch_scaling"]
    assert json.load(open(tmp_path / "manifest.json")) == {"tables": [], "plots": [],
                                                            "missing": {n: "no e2e rows" for n in names},
                                                            "runs": ["r1"], "skipped": []}
    assert sorted(os.listdir(tmp_path)) == ["manifest.json", "report.md"]


def test_write_files_of_one_e2e_row_without_optional_columns(tmp_path, monkeypatch):
    """One e2e row measured once, without `repeats` or `overlap_eff`, `planned_s` not a number; a simulator
    comparison without an `oversubscribed` column and an empty host calibration; no LaTeX: no
    repeats line, overlap, planner or host table, no `Oversubscribed:` sentence, `none` missing."""
    from gradcomp_analysis import trains as TR
    from gradcomp_analysis.io import Results
    calls = {}
    _stub_write_files(monkeypatch, calls)
    monkeypatch.setattr(TR, "checks", lambda conv, recs: pd.DataFrame())
    monkeypatch.setattr(T, "collapse_repeats", lambda df: df)
    monkeypatch.setattr(T, "sim_accuracy", lambda sv: pd.DataFrame({"verdict": ["within"]}))
    e2e = pd.DataFrame({"model": ["m"], "world_size": [1], "method": ["ssgd"], "fusion": ["none"],
                        "pipelining": [1], "planned_s": ["n/a"]})
    res = Results(e2e=e2e, sim_vs_measured=pd.DataFrame({"tolerance": [0.2]}), sim_host=pd.DataFrame({"h": []}))
    R._write_files(str(tmp_path), res, [], [], False)
    got = open(tmp_path / "report.md").read().split("\n")
    assert list(calls["fastest"][0][1]["pipelining"]) == ["1"]  # as text, whatever the CSV held
    i = got.index("### m, 1 rank")
    assert got[i:i + 8] == ["### m, 1 rank", "", "Table `e2e_m_np1` ([csv](e2e_m_np1.csv))", "",
                            *_md("e2e_overview").split("\n"), ""]
    assert got[i + 8:i + 10] == ["### Phase breakdown", ""]
    assert not any("measured more than once" in x or "Planner" in x or "Oversubscribed" in x or "Overlap" in x
                   for x in got)
    j = got.index("## Simulator accuracy")
    assert "fifth). 1 of 1 judged cases within 20%; 0 too noisy to judge" in got[j + 2]
    assert "docs/performance.md), 0 not held to it (more ranks than cores)" in got[j + 2]
    assert got[j + 2].endswith("`calibration` rows are not.") and "sim_host_calibration" not in "\n".join(got)
    assert got[-2:] == ["3 tables (Markdown + CSV), 2 plots; paper tables without rows here: none.", ""]
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tex")]


# ------------------------------------------------------------------ cells, tables and run lines


def test_missing_by_hand():
    """Missing: None, pd.NA, a float NaN and any other NaN pandas knows (NaT, numpy's float32 NaN);
    not a string (even "nan" or empty), not 0."""
    import numpy as np
    for v in [None, pd.NA, NAN, np.float64("nan"), np.float32("nan"), pd.NaT]:
        assert R._missing(v), v
    for v in ["nan", "", 0, 0.0, 1.5, np.float32(2.0), False, pd.Timestamp("2026-01-01")]:
        assert not R._missing(v), v


def test_record_line_by_hand():
    """One run record: its id, subcommand (the first argument after the program that is not an
    option), status, ranks, hosts sorted and each once, version, revision, MPI, times, Slurm job."""
    m = {"command_line": ["gradcomp", "--quiet", "run", "cfg.toml"], "run_id": "R1", "status": "ok", "world_size": 4,
         "hosts": ["n2", "n1", "n2"], "gradcomp_version": "0.3", "git_revision": "abc", "mpi_library": "Open MPI 4.1",
         "start_time": "t0", "end_time": "t1", "slurm_job_id": 77}
    assert R._record_line(m) == ("(`R1`, `run`): status `ok`, 4 ranks on n1, n2; gradcomp 0.3 (abc); MPI: Open MPI "
                                 "4.1; t0 to t1; Slurm job 77")
    assert R._record_line({"command_line": ["converge"], "world_size": 1, "slurm_job_id": ""}) == (
        "(`None`, `?`): status `None`, 1 rank on ; gradcomp None (None); MPI: None; None to None; not under Slurm")
    assert R._record_line({"command_line": ["gradcomp", "-q", "--x"], "hosts": None}).startswith("(`None`, `?`)")
    assert R._record_line({"command_line": ["gradcomp", "simulate", "x"]}).startswith("(`None`, `simulate`)")
    assert R._record_line({}) == ("(`None`, `?`): status `None`, None ranks on ; gradcomp None (None); MPI: None; "
                                  "None to None; not under Slurm")


def test_run_lines_by_hand():
    """A line per run (or `no run.json`), then its earlier invocations by start time, then its
    convergence checks in the order given (the first the current one); other runs' records apart."""
    def rec(i, start="s"):
        return {"run_id": i, "start_time": start}

    def line(i, start="s"):
        return f"(`{i}`, `?`): status `None`, None ranks on ; gradcomp None (None); MPI: None; {start} to None; " \
               "not under Slurm"
    meta = [("a", rec("A")), ("b", {}), ("c", rec("C"))]
    hist = [("a", rec("H2", "2")), ("c", rec("HC", "1")), ("a", rec("H1", "1")), ("a", rec("H10", "10"))]
    conv = [("a", rec("K1")), ("a", rec("K0")), ("b", rec("KB"))]
    assert R._run_lines(meta, hist, conv) == [
        f"- run `a` {line('A')}",
        f"  - earlier invocation into it {line('H1', '1')}",
        f"  - earlier invocation into it {line('H10', '10')}",
        f"  - earlier invocation into it {line('H2', '2')}",
        f"  - convergence check into it {line('K1')}",
        f"  - earlier convergence check into it {line('K0')}",
        "- run `b`: no run.json",
        f"  - convergence check into it {line('KB')}",
        f"- run `c` {line('C')}",
        f"  - earlier invocation into it {line('HC', '1')}"]
    assert R._run_lines([("a", rec("A"))]) == [f"- run `a` {line('A')}"]


def test_sig_by_hand():
    """SIG significant digits, positional, trailing zeros kept; rounded before the exponent is
    taken (9.9996 -> 10.00); below 1e-4 (after rounding) in exponent form."""
    assert R._sig(0, 4) == "0" and R._sig(0.0, 2) == "0"
    assert R._sig(1.6151, 4) == "1.615" and R._sig(283.44, 4) == "283.4" and R._sig(0.051234, 4) == "0.05123"
    assert R._sig(12345.6, 4) == "12350" and R._sig(12345.6, 5) == "12346"
    assert R._sig(-283.44, 4) == "-283.4" and R._sig(9.9996, 4) == "10.00"
    assert R._sig(3.3284e-7, 4) == "3.328e-07" and R._sig(-3.3284e-7, 2) == "-3.3e-07"
    assert R._sig(1e-4, 4) == "0.0001000" and R._sig(9.99996e-5, 4) == "0.0001000"
    assert R._sig(9.9e-5, 2) == "9.9e-05" and R._sig(-1.25e-3, 3) == "-0.00125"
    assert R._sig(7.0, 1) == "7" and R._sig(0.5, 1) == "0.5"


def test_sims_by_hand():
    """The sim.csv rows of the folders of one headline, with the headline and the folder's path;
    folders without simulations or of other headlines left out; an empty frame when none."""
    a = pd.DataFrame({"x": [1, 2]})
    b = pd.DataFrame({"x": [3]})
    found = [{"headline": "h", "path": "p1", "sim": a}, {"headline": "g", "path": "p2", "sim": b},
             {"headline": "h", "path": "p3", "sim": None}, {"headline": "h", "path": "p4", "sim": a.iloc[:0]},
             {"path": "p5", "sim": b}, {"headline": "h", "path": "p6", "sim": b}]
    got = R._sims(found, "h")
    assert got.to_dict("list") == {"x": [1, 2, 3], "headline": ["h"] * 3, "folder": ["p1", "p1", "p6"]}
    assert list(got.index) == [0, 1, 2]
    assert R._sims(found, "none").empty and list(R._sims([], "h").columns) == []


def test_tex_by_hand():
    r"""LaTeX's specials escaped: a backslash first (its own braces not escaped again), & % _ #, and
    ≈ and ± in math mode."""
    assert R._tex("a\\b&c%d_e#f≈g±h") == "a\\textbackslash{}b\\&c\\%d\\_e\\#f$\\approx$g$\\pm$h"
    assert R._tex(1.5) == "1.5" and R._tex("plain") == "plain"


def test_fmt_by_hand():
    """One cell: empty when missing, text and booleans as they are, integers whole, infinities
    named, floats at SIG (4) significant digits or a SIG given, EXACT their shortest form (up to 12
    digits, else SIG digits)."""
    import fractions

    import numpy as np
    for v in [None, NAN, pd.NA, np.float32("nan")]:
        assert R.fmt(v) == ""
    assert R.fmt(True) == "True" and R.fmt("x y") == "x y" and R.fmt(np.int64(12345678)) == "12345678"
    assert R.fmt(float("inf")) == "inf" and R.fmt(-math.inf) == "-inf" and R.fmt(np.float32("inf")) == "inf"
    assert R.fmt(1.23456) == "1.235" and R.fmt(2.0) == "2.000" and R.fmt(2.345, 2) == "2.3"
    assert R.fmt(fractions.Fraction(1, 3)) == "0.3333" and R.fmt([1]) == "[1]"
    assert R.fmt(0.001, exact=True) == "0.001" and R.fmt(123456789.0, exact=True) == "123456789"
    assert R.fmt(1.2345678, 2, True) == "1.2345678" and R.fmt(1e-7, 2, True) == "1.000e-07"
    assert R.fmt(1e20, exact=True) == "100000000000000000000"


def test_format_column_by_hand():
    """One format per column: whole numbers as integers (NaN empty, infinities named, text kept);
    short numbers (each equal to itself at SIG digits) and `(published` columns in their shortest
    form; other numbers at SIG digits, a `X ±` column's at SIG_CI (2)."""
    assert R.format_column([1, 2.0, NAN, None, math.inf, "a"], "n") == ["1", "2", "", "", "inf", "a"]
    assert R.format_column([0.001, 31], "density") == ["0.001", "31"]
    assert R.format_column([1.23456, 2.5], "ms") == ["1.235", "2.500"]
    assert R.format_column([1.23456, 2.5], "ratio (published)") == ["1.23456", "2.5"]
    assert R.format_column([0.012345, 0.5], "ms ±") == ["0.012", "0.50"]
    assert R.format_column([0.012, 0.5], "ms ±") == ["0.012", "0.5"]
    assert R.format_column([0.0123, 0.5], "ms ±") == ["0.012", "0.50"]
    assert R.format_column([0.0123, 0.5], "ms") == ["0.0123", "0.5"]
    assert R.format_column([True, 1.5], "b") == ["True", "1.5"] and R.format_column([None], "x") == [""]
    assert R.format_column([2e15, 1], "big") == ["2000000000000000", "1"]
    assert R.format_column([2e15 + 0.5, 1.5], "big") == ["2000000000000000", "1.500"]
    assert R.format_column([], "x") == [] and R.format_column([math.inf, 2.25], "x") == ["inf", "2.25"]


def test_cells_and_to_markdown_by_hand():
    """A `X ±` column beside its X is folded into X's cell (`x ± e`, or `x (too noisy)` where e > x;
    x alone without e; nothing without x); one without its X stays a column; a column named like
    another plus two characters stays; pipes escaped."""
    t = pd.DataFrame({"iter": [1.5, 2.5, NAN], "iter_s": [3, 4, 5], "x ±": [0.25, 0.5, 0.75],
                      "ms": [10.0, 1.0, NAN], "ms ±": [0.5, 2.0, 0.5], "name": ["a|b", "c", "d"]}, index=[5, 7, 9])
    cols, rows = R._cells(t, " ± ")
    assert cols == ["iter", "iter_s", "x ±", "ms", "name"]
    assert rows == [["1.5", "3", "0.25", "10 ± 0.5", "a|b"], ["2.5", "4", "0.5", "1 (too noisy)", "c"],
                    ["", "5", "0.75", "", "d"]]
    t2 = pd.DataFrame({"ms": [4.0, 3.0], "ms ±": [NAN, 2.0]})
    assert R._cells(t2, "+-", lambda s: f"<{s}>") == (["ms"], [["<4>"], ["<3>+-<2>"]])
    assert R.to_markdown(t) == ("| iter | iter_s | x ± | ms | name |\n|---|---|---|---|---|\n"
                                "| 1.5 | 3 | 0.25 | 10 ± 0.5 | a\\|b |\n| 2.5 | 4 | 0.5 | 1 (too noisy) | c |\n"
                                "|  | 5 | 0.75 |  | d |")


def test_to_latex_by_hand():
    """A booktabs table: caption and headers escaped, one `l` column each, cells escaped, `$\\pm$`."""
    t = pd.DataFrame({"a_b": ["x&y", "z"], "ms": [2.0, 3.0], "ms ±": [0.5, NAN]})
    assert R.to_latex(t, "50% of #1") == "\n".join([
        "\\begin{table}[t]", "\\centering", "\\caption{50\\% of \\#1}", "\\begin{tabular}{ll}", "\\toprule",
        "a\\_b & ms \\\\", "\\midrule", "x\\&y & 2 $\\pm$ 0.5 \\\\", "z & 3 \\\\", "\\bottomrule",
        "\\end{tabular}", "\\end{table}", ""])


def test_report_table_writes_csv_markdown_latex_and_its_lines(tmp_path):
    """Report.table: the CSV without the index (renumbered from 0), the Markdown file (caption,
    table, each note), the LaTeX file (its caption, else the table's name), and the report's lines."""
    rep = R.Report(str(tmp_path), True)
    assert (rep.out_dir, rep.latex, rep.lines, rep.tables, rep.plots, rep.missing) == (str(tmp_path), True, [], [],
                                                                                        [], {})
    t = pd.DataFrame({"a": [1, 2]}, index=[5, 3])
    t.attrs["notes"] = ["n1", "n2"]
    rep.table("x", t, "cap")
    rep.table("y", pd.DataFrame({"b": ["z"]}))
    assert (tmp_path / "x.csv").read_text() == "a\n1\n2\n"
    assert (tmp_path / "x.md").read_text() == "cap\n\n| a |\n|---|\n| 1 |\n| 2 |\n\n_Note: n1_\n\n_Note: n2_\n"
    assert (tmp_path / "y.md").read_text() == "| b |\n|---|\n| z |\n"
    assert (tmp_path / "x.tex").read_text().splitlines()[2] == "\\caption{cap}"
    assert (tmp_path / "y.tex").read_text().splitlines()[2] == "\\caption{y}"
    assert rep.tables == ["x", "y"]
    assert rep.lines == ["Table `x` ([csv](x.csv)): cap", "", "| a |\n|---|\n| 1 |\n| 2 |", "", "_Note: n1_", "",
                         "_Note: n2_", "", "Table `y` ([csv](y.csv))", "", "| b |\n|---|\n| z |", ""]
    rep.add()
    rep.add("p", "q")
    rep.figs(["f.png", "g.png"])
    assert rep.lines[-6:] == ["p", "q", "![f.png](f.png)", "", "![g.png](g.png)", ""]
    assert rep.plots == ["f.png", "g.png"]
    no = R.Report(str(tmp_path / "no"), False)
    os.makedirs(no.out_dir)
    no.table("z", pd.DataFrame({"c": [1]}))
    assert sorted(os.listdir(no.out_dir)) == ["z.csv", "z.md"]


def test_report_paper_table_says_which_config_produces_a_missing_table(tmp_path):
    """Report.paper_table: the table and its caption when the function returns one; on MissingData
    the config of CONFIGS (and HOW's way to run it, where there is one), nothing written, None."""
    rep = R.Report(str(tmp_path), False)

    def missing(*args):
        raise T.MissingData(f"needs {args}")
    assert rep.paper_table("acpsgd_scaling", missing, 1, caption="c") is None
    assert rep.paper_table("dgc_ratio", missing) is None
    assert rep.paper_table("other", missing, "x") is None
    assert rep.lines == [
        "_Table `acpsgd_scaling` not in these results (needs (1,)). Produced by `bench-configs/acpsgd-scaling.toml` "
        "(laptop: `bench-configs/acpsgd-scaling-laptop.toml`); one run per world size (slurm/submit-acpsgd-"
        "scaling.sh submits 8/16/32/64 ranks into subdirectories of one folder; report that folder); see "
        "docs/reproduce.md._", "",
        "_Table `dgc_ratio` not in these results (needs ()). Produced by `bench-configs/dgc-ratio.toml` (laptop: "
        "`bench-configs/dgc-ratio-laptop.toml`); see docs/reproduce.md._", "",
        "_Table `other` not in these results (needs ('x',)). Produced by `bench-configs/.toml` (laptop: "
        "`bench-configs/-laptop.toml`); see docs/reproduce.md._", ""]
    assert rep.missing == {"acpsgd_scaling": "needs (1,)", "dgc_ratio": "needs ()", "other": "needs ('x',)"}
    assert os.listdir(tmp_path) == [] and rep.tables == []
    t = pd.DataFrame({"a": [1]})
    assert rep.paper_table("omgs", lambda a, b: t.assign(s=a + b), 1, 2, caption="cap").to_dict("list") == {
        "a": [1], "s": [3]}
    assert rep.tables == ["omgs"] and rep.lines[-4] == "Table `omgs` ([csv](omgs.csv)): cap"
    assert (tmp_path / "omgs.csv").read_text() == "a,s\n1,3\n"
    rep.paper_table("marsit", lambda: t)
    assert rep.lines[-4] == "Table `marsit` ([csv](marsit.csv))" and (tmp_path / "marsit.md").read_text()[:3] == "| a"


def test_acp_vs_power_adds_its_table_only_when_there_are_rows(tmp_path, monkeypatch):
    """acp_vs_power: a heading, WHAT and the ratio's direction, then the table under NAME; nothing
    when acpsgd_vs_powersgd has no rows."""
    seen = []
    rows = pd.DataFrame({"r": [1.5]})
    monkeypatch.setattr(T, "acpsgd_vs_powersgd", lambda df: seen.append(df) or rows)
    rep = R.Report(str(tmp_path), False)
    df = pd.DataFrame({"x": [1]})
    R.acp_vs_power(rep, df, "nm", "what it is")
    assert seen == [df] and rep.tables == ["nm"]
    assert rep.lines == ["### ACP-SGD vs Power-SGD per step", "",
                         "what it is; ACP-SGD computes and all-reduces one factor per step, Power-SGD two (ratios "
                         "are acpsgd / powersgd).", "", "Table `nm` ([csv](nm.csv))", "", "| r |\n|---|\n| 1.5 |", ""]
    rows = rows.iloc[:0]
    rep2 = R.Report(str(tmp_path), False)
    R.acp_vs_power(rep2, df, "nm2", "w")
    assert rep2.lines == [] and rep2.tables == []


def test_find_paper_scale_reads_each_marked_folder_in_order(tmp_path):
    """Folders with paper_scale.txt at any depth, sorted, symlinks not followed: the marker's
    key=value lines (split at the first `=`, other lines ignored), path, label, sim.csv (None
    without one) and error.txt stripped (empty without one)."""
    def folder(rel, marker, sim=None, err=None):
        d = tmp_path / rel
        d.mkdir(parents=True, exist_ok=True)
        (d / "paper_scale.txt").write_text(marker)
        if sim:
            (d / "sim.csv").write_text(sim)
        if err is not None:
            (d / "error.txt").write_text(err)
    folder("b", "headline=omgs\nnetwork=10gbe\ncommand=gradcomp simulate --x=1\njunk\n", err="  boom \n")
    folder("a/deep", "headline=marsit\n", sim="schema_version,model,iter_s\n1,m,0.5\n")
    folder("c", "", err="")
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path / "b", tmp_path / "z-link")
    got = R.find_paper_scale([str(tmp_path)])
    assert [g["label"] for g in got] == [os.path.join("a", "deep"), "b", "c"]
    assert got[0]["sim"].to_dict("list") == {"schema_version": [1], "model": ["m"], "iter_s": [0.5]}
    assert {k: v for k, v in got[0].items() if k != "sim"} == {
        "headline": "marsit", "path": str(tmp_path / "a" / "deep"), "label": os.path.join("a", "deep"), "error": ""}
    assert got[1] == {"headline": "omgs", "network": "10gbe", "command": "gradcomp simulate --x=1",
                      "path": str(tmp_path / "b"), "label": "b", "sim": None, "error": "boom"}
    assert got[2] == {"path": str(tmp_path / "c"), "label": "c", "sim": None, "error": ""}
    one = R.find_paper_scale([str(tmp_path / "b"), str(tmp_path / "c")])
    assert [(g["label"], g["path"]) for g in one] == [(".", str(tmp_path / "b")), (".", str(tmp_path / "c"))]
    # a root given as a symbolic link is searched below it too
    os.symlink(tmp_path / "a", tmp_path / "a-link")
    assert [g["label"] for g in R.find_paper_scale([str(tmp_path / "a-link")])] == ["deep"]


def test_find_simulations_reads_simulate_folders_only(tmp_path):
    """Folders with a sim.csv of rows, sorted, symlinks not followed; not paper-scale folders nor
    `--compare` folders; an empty sim.csv skipped; a root that is itself one labelled by its name."""
    def folder(rel, sim="schema_version,model,iter_s\n1,m,0.5\n", other=None):
        d = tmp_path / rel
        d.mkdir(parents=True, exist_ok=True)
        (d / "sim.csv").write_text(sim)
        if other:
            (d / other).write_text("x\n")
    folder("b")
    folder("a/s")
    folder("c", other="paper_scale.txt")
    folder("d", other="sim_vs_measured.csv")
    folder("e", sim="schema_version,model,iter_s\n")
    os.symlink(tmp_path / "b", tmp_path / "f-link")
    got = R.find_simulations([str(tmp_path)])
    assert [(g["label"], g["path"]) for g in got] == [(os.path.join("a", "s"), str(tmp_path / "a" / "s")),
                                                      ("b", str(tmp_path / "b"))]
    assert got[1]["sim"].to_dict("list") == {"schema_version": [1], "model": ["m"], "iter_s": [0.5]}
    assert [g["label"] for g in R.find_simulations([str(tmp_path / "b") + os.sep])] == ["b"]
    os.symlink(tmp_path / "a", tmp_path / "a-link")
    assert [g["label"] for g in R.find_simulations([str(tmp_path / "a-link")])] == ["s"]


def test_plans_by_hand():
    """plans: each compress_on present, host first, its plan_source values sorted and each once
    (a missing one empty); a sim.csv without plan_source says so."""
    df = pd.DataFrame({"method": ["m", "m", "m", "m", "o"], "compress_on": ["device", "host", "host", "host", "host"],
                       "plan_source": ["d1", "b", NAN, "a", "x"]})
    assert R.plans(df, "m") == "host: , a, b; device: d1"
    assert R.plans(df, "o") == "host: x" and R.plans(df, "q") == ""
    assert R.plans(df.drop(columns="plan_source"), "m") == "not recorded (sim.csv without plan_source)"


def test_published_validation_by_hand(tmp_path):
    """published_validation.csv of each folder holding one, in order, each row named by its folder's
    label (its path without one), seconds as ms, the ratio renamed, the columns in their order."""
    head = "quantity,workers,elements,published_s,ours_s,ours_over_published,published_source,ours_source,extra\n"
    for d, row in [("a", "q1,8,100,0.002,0.003,1.5,ps,os,e\n"), ("c", "q2,16,200,0.5,0.25,0.5,p2,o2,e\n")]:
        (tmp_path / d).mkdir()
        (tmp_path / d / "published_validation.csv").write_text(head + row)
    (tmp_path / "b").mkdir()
    found = [{"path": str(tmp_path / "a"), "label": "A"}, {"path": str(tmp_path / "b"), "label": "B"},
             {"path": str(tmp_path / "c")}]
    t = R.published_validation(found)
    assert list(t.columns) == ["quantity", "workers", "elements", "published ms", "ours ms", "ours/published",
                               "published_source", "ours_source", "folder"]
    assert t.to_dict("list") == {"quantity": ["q1", "q2"], "workers": [8, 16], "elements": [100, 200],
                                 "published ms": [2.0, 500.0], "ours ms": [3.0, 250.0], "ours/published": [1.5, 0.5],
                                 "published_source": ["ps", "p2"], "ours_source": ["os", "o2"],
                                 "folder": ["A", str(tmp_path / "c")]}
    assert list(t.index) == [0, 1]
    assert R.published_validation(found[1:2]).empty and R.published_validation([]).empty


def test_simulate_section_by_hand(tmp_path, monkeypatch):
    """simulate_section: nothing without folders; else its heading and text, simulated_best of every
    folder's rows (each with its label as `run`), the cost sources sorted and each once, the figure."""
    from gradcomp_analysis import plots
    seen = {}
    monkeypatch.setattr(T, "simulated_best", lambda df: seen.setdefault("df", df) is None or pd.DataFrame({"b": [1]}))
    monkeypatch.setattr(plots, "simulated_best", lambda t, out: seen.setdefault("plot", (t, out)) and ["sb.png"])
    rep = R.Report(str(tmp_path), False)
    R.simulate_section(rep, [], str(tmp_path))
    assert rep.lines == [] and seen == {}
    found = [{"label": "x", "sim": pd.DataFrame({"i": [1, 2], "cost_source": ["p2", NAN]})},
             {"label": "y", "sim": pd.DataFrame({"i": [3], "cost_source": ["p1"]})},
             {"label": "z", "sim": pd.DataFrame({"i": [4], "cost_source": ["p2"]})}]
    R.simulate_section(rep, found, "OUT")
    assert list(seen["df"].columns) == ["i", "cost_source", "run"] and list(seen["df"]["i"]) == [1, 2, 3, 4]
    assert list(seen["df"]["run"]) == ["x", "x", "y", "z"]
    assert list(seen["df"]["cost_source"].fillna("-")) == ["p2", "-", "p1", "p2"]
    assert list(seen["df"].index) == [0, 1, 2, 3]
    assert seen["plot"][1] == "OUT" and list(seen["plot"][0]["b"]) == [1]
    assert rep.lines == [
        "## What-if (`gradcomp simulate`)", "",
        "Simulated iterations (docs/architecture.md, \"The simulator\"): no measurement, the e2e schedule on a "
        "virtual clock with the cost model named in `cost_source`. Per model, world size, network and method the "
        "fastest simulated configuration (`fusion/pipelining/collective`) and `vs ssgd`, S-SGD's fastest "
        "iteration over the method's (above 1: faster than S-SGD). " + R.WIRE_TEXT, "",
        "Table `simulated_best` ([csv](simulated_best.csv)): best simulated configuration per model, world size, "
        "network and method", "", "| b |\n|---|\n| 1 |", "",
        "- cost source: p1", "- cost source: p2", "", "![sb.png](sb.png)", ""]
    rep2 = R.Report(str(tmp_path), False)
    R.simulate_section(rep2, [{"label": "x", "sim": pd.DataFrame({"i": [1]})}], "OUT")
    assert rep2.lines[-5:] == ["| b |\n|---|\n| 1 |", "", "", "![sb.png](sb.png)", ""]
    assert not any(x.startswith("- cost source") for x in rep2.lines)


def test_write_report_reads_the_folders_and_writes_through_a_stage(tmp_path, monkeypatch):
    """write_report: a folder, a path object or a list; a path that is not a folder refused by name;
    a folder of simulations only read as no run (load_results not called); the folders skipped that
    hold, or lie inside, a simulation folder dropped from the list; report/ in the first folder by
    default; the files written into a stage and moved into the output folder."""
    import pathlib

    from gradcomp_analysis.io import ReportError, Results
    calls = {}
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b, a / "sim", a / "simx", b / "deep" / "ps"):
        d.mkdir(parents=True)
    ps = {"path": str(b / "deep" / "ps")}
    sims = {"path": str(a / "sim")}
    skipped = [(str(a), "1"), (str(a / "sim"), "2"), (str(a / "simx"), "3"), (str(b / "deep"), "4"),
               (str(b / "deep" / "ps" / "x"), "5"), (str(tmp_path / "c"), "6"), (str(a / "si"), "7")]
    state = {"runs": [], "ps": [ps], "sims": [sims]}
    monkeypatch.setattr(R, "find_paper_scale", lambda dirs: calls.setdefault("fps", []).append(dirs) or state["ps"])
    monkeypatch.setattr(R, "find_simulations", lambda dirs: calls.setdefault("fs", []).append(dirs) or state["sims"])
    monkeypatch.setattr(R, "discover", lambda d: calls.setdefault("discover", []).append(d) or (state["runs"], []))
    loaded = Results(skipped=list(skipped))
    monkeypatch.setattr(R, "load_results", lambda dirs: calls.setdefault("load", []).append(dirs) or loaded)

    def write(stage, res, simulations, paper_scale, latex):
        calls.setdefault("write", []).append((os.path.dirname(stage), res, simulations, paper_scale, latex))
        open(os.path.join(stage, "report.md"), "w").write("r")
    monkeypatch.setattr(R, "_write_files", write)

    with pytest.raises(ReportError, match=re.escape(f"{tmp_path / 'nope'}: not a directory")):
        R.write_report([str(a), str(tmp_path / "nope")])
    assert calls == {}
    # simulations only: no run found by discover in either folder, so Results() and no load_results
    assert R.write_report([str(a), pathlib.Path(b)]) == str(a / "report" / "report.md")
    assert calls["discover"] == [str(a), str(b)] and "load" not in calls
    out, res, s, p, latex = calls["write"][0]
    assert (out, s, p, latex) == (str(a / "report"), [sims], [ps], False) and res.skipped == [] and res.empty()
    assert (a / "report" / "report.md").read_text() == "r" and os.listdir(a / "report") == ["report.md"]
    assert calls["fps"] == [[str(a), str(b)]] and calls["fs"] == [[str(a), str(b)]]
    # simulations without paper-scale folders, or paper-scale folders without simulations, likewise
    for only in ({"ps": []}, {"sims": []}):
        calls.clear()
        state.update(only)
        R.write_report(str(b), str(tmp_path / "o1"))
        assert "load" not in calls and calls["discover"] == [str(b)]
        state.update(ps=[ps], sims=[sims])
    # a run found: load_results, and the skipped folders of the simulations' trees dropped
    calls.clear()
    state["runs"] = [("x", "x")]
    assert R.write_report(pathlib.Path(b), str(tmp_path / "o"), latex=True) == str(tmp_path / "o" / "report.md")
    assert calls["load"] == [[str(b)]] and calls["discover"] == [str(b)]
    out, res, s, p, latex = calls["write"][0]
    assert (out, res, latex) == (str(tmp_path / "o"), loaded, True)
    assert res.skipped == [(str(a / "simx"), "3"), (str(tmp_path / "c"), "6"), (str(a / "si"), "7")]
    # neither simulations nor paper-scale folders: load_results without asking discover
    calls.clear()
    state.update(ps=[], sims=[], runs=[])
    loaded.skipped = [(str(a / "sim"), "2")]
    R.write_report(str(a), str(tmp_path / "o2"))
    assert calls["load"] == [[str(a)]] and "discover" not in calls and loaded.skipped == [(str(a / "sim"), "2")]
    # a failed write names the report as what was not written (io.staged_dir's WHAT)

    def full(stage, *args):
        raise OSError(28, "No space left on device", os.path.join(stage, "x.csv"))
    monkeypatch.setattr(R, "_write_files", full)
    with pytest.raises(OSError, match=re.escape("No space left on device (no file of this report was written)")):
        R.write_report(str(a), str(tmp_path / "o3"))


def test_paper_sections_every_table_filled_line_by_line_with_each_figures_arguments(tmp_path, monkeypatch):
    """paper_sections when every paper table has rows (the tables stubbed, their own tests are
    test_tables*): each section's heading and text, each table with its caption in order, and each
    figure's data, columns, file, folder, title, axis labels and axis options; DGC's points only
    where a ratio (ours or published) exists; Marsit's bars labelled `ssgd (collective)`, columns in
    the rows' order."""
    from gradcomp_analysis import plots
    figs = []

    def spy(kind):
        def f(*a, **k):
            figs.append((kind, a, k))
            return [x for x in a if isinstance(x, str) and x.endswith(".png")]
        return f
    for kind in ("bars", "lines", "points"):
        monkeypatch.setattr(plots, kind, spy(kind))
    main = pd.DataFrame({"model": ["m", "m"], "world_size": [2, 2], "method": ["ssgd", "acpsgd"],
                         "iter_ms": [2.0, 1.0], "iter_ms ±": [0.1, NAN]})
    dgc = pd.DataFrame({"model (paper)": ["AlexNet", "ResNet", "X"], "model": ["a", "r", "x"],
                        "ratio": [NAN, 270.0, NAN], "ratio (published)": [597.0, NAN, NAN]})
    marsit = pd.DataFrame({"network": ["eth"] * 3, "model": ["m"] * 3, "world_size": [4] * 3,
                           "method": ["ssgd", "ssgd", "marsit"], "collective": ["allreduce", "ring", "ring"],
                           "iter_ms": [3.0, 2.5, 1.0], "iter_ms ±": [0.2, NAN, 0.1], "run": ["r"] * 3})
    stub = {name: _one(name) for name in ["acpsgd_main_wide", "acpsgd_speedup_summary", "acpsgd_ablation",
                                          "acpsgd_buffer_sweep", "acpsgd_rank_sweep", "acpsgd_scaling",
                                          "acpsgd_network", "omgs", "sketch_fusion", "sketch_scaling",
                                          "sketch_scalability"]}
    stub.update(acpsgd_main=main, dgc_ratio=dgc, marsit=marsit)
    got_args = {}
    for name, t in stub.items():
        monkeypatch.setattr(T, name, lambda x, _n=name, _t=t: got_args.setdefault(_n, x) is None or _t)
    e = pd.DataFrame({"e2e": [1]})
    rep = R.Report(str(tmp_path), False)
    out = str(tmp_path)
    R.paper_sections(rep, e, out)

    def tab(name, caption):
        return [f"Table `{name}` ([csv]({name}.csv)): {caption}", "", ""]

    def fig(f):
        return [f"![{f}]({f})", ""]
    assert [x for x in rep.lines if not x.startswith("|")] == [
        "## ACP-SGD", "",
        "Paper: Zhang et al., ACP-SGD (alternate compressed Power-SGD), ICDCS 2023. Published: on average 4.06x "
        "over S-SGD and 1.43x over Power-SGD (8-64 GPUs, 1 Gb/s Ethernet to 100 Gb/s InfiniBand).", "",
        "### Iteration time per model and method", "",
        *tab("acpsgd_main", "iteration time (best configuration, own collective) and speedups"),
        *tab("acpsgd_main_wide", "iteration time (ms), paper layout"),
        *tab("acpsgd_speedup_summary", "ACP-SGD speedup over S-SGD and Power-SGD, mean over setups, beside the "
             "published mean"), *fig("acpsgd_main.png"),
        "### Ablation: collective, pipelining, fusion", "",
        *tab("acpsgd_ablation", "iteration time (ms) adding the system optimisations one by one; the first columns "
             "are named by the collective that carried the exchange (`collective` = the method's own, used by the + "
             "steps)"),
        "### Sweep: fusion buffer size", "",
        *tab("acpsgd_buffer_sweep", "iteration time (ms) per fusion threshold"), *fig("acpsgd_buffer_sweep.png"),
        "### Sweep: Power-SGD / ACP-SGD rank", "",
        *tab("acpsgd_rank_sweep", "iteration time (ms) per rank"), *fig("acpsgd_rank_sweep.png"),
        "### Sweep: world size", "",
        *tab("acpsgd_scaling", "iteration time (ms) per world size"), *fig("acpsgd_scaling.png"),
        "### Sweep: network", "",
        *tab("acpsgd_network", "iteration time (ms) per network"),
        "## DGC: compression ratio", "",
        "Paper: Lin et al., Deep Gradient Compression, ICLR 2018. DeepSpeech is not in gradcomp's model zoo; the "
        "paper's AlexNet is BVLC AlexNet (`alexnet-caffe`, 232.6 MiB). Message = `wire_bytes` one worker sends per "
        "iteration at the final density (no warm-up), fusion none.", "",
        *tab("dgc_ratio", "fp32 gradient vs DGC message size"), *fig("dgc_ratio.png"),
        "## OMGS-SGD", "",
        "Paper: Shi et al., OMGS-SGD (optimal merged gradient sparsification), INFOCOM 2020. Published: up to 31% "
        "faster than layer-wise sparsified SGD (16 GPUs, 1 GbE, rho = 0.001); their figure is training "
        "throughput.", "",
        *tab("omgs", "S-SGD (MG-WFBP, the paper's baseline, and S-SGD's best configuration in the same run) vs "
             "layer-wise Top-k vs OMGS, pipelining on"), *fig("omgs.png"),
        "## Marsit", "",
        "Paper: Wu et al., Marsit (sign bits through multi-hop all-reduce), 2022. Published: up to 35% less "
        "training time than without compression at equal accuracy (ours: one iteration).", "",
        *tab("marsit", "Marsit (ring) vs S-SGD (over MPI's all-reduce and over gradcomp's ring, where measured) vs "
             "Sign-SGD (all-gather)"), *fig("marsit.png"),
        "## Sketch-Fusion", "",
        "Paper: Dai et al., Sketch-Fusion SGD, JPDC 2024. Published: up to 18.6% faster training on 16 GPUs; "
        "LayerFusion improves other methods' scalability by up to 2.87x.", "",
        *tab("sketch_fusion", "each compressor without fusion vs LayerFusion; `what` says what each row measures"),
        *fig("sketch_fusion.png"),
        *tab("sketch_scaling", "throughput per world size, none vs LayerFusion"),
        *tab("sketch_scalability", "scalability (throughput largest / smallest world size) and LayerFusion's gain"),
        *fig("sketch_scaling.png")]
    assert rep.missing == {} and rep.tables == [
        "acpsgd_main", "acpsgd_main_wide", "acpsgd_speedup_summary", "acpsgd_ablation", "acpsgd_buffer_sweep",
        "acpsgd_rank_sweep", "acpsgd_scaling", "acpsgd_network", "dgc_ratio", "omgs", "marsit", "sketch_fusion",
        "sketch_scaling", "sketch_scalability"]
    for name in ["acpsgd_main", "acpsgd_ablation", "acpsgd_buffer_sweep", "acpsgd_rank_sweep", "acpsgd_scaling",
                 "acpsgd_network", "dgc_ratio", "omgs", "marsit", "sketch_fusion", "sketch_scaling"]:
        assert got_args[name] is e, name
    assert got_args["acpsgd_main_wide"] is main and got_args["acpsgd_speedup_summary"] is main
    assert got_args["sketch_scalability"] is stub["sketch_scaling"]
    ms = [f"{m} ms" for m in ["ssgd", "signsgd", "topk", "powersgd", "acpsgd"]]
    setup = ["model", "world_size", "network", "run"]
    assert [(k, a[1:], kw) for k, a, kw in figs] == [
        ("bars", (setup, ["ssgd", "signsgd", "topk", "powersgd", "acpsgd"], "acpsgd_main.png", out, "ACP-SGD",
                  "ms per iteration"), {}),
        ("lines", ("buffer_MiB", ms, setup, "acpsgd_buffer_sweep.png", out, "Fusion buffer size",
                   "fusion (bucket threshold; none = a bucket per tensor)", "ms per iteration"), {"xcat": "fusion"}),
        ("lines", ("rank", ["powersgd ms", "acpsgd ms"], setup, "acpsgd_rank_sweep.png", out, "Rank sweep",
                   "low-rank approximation rank r (not MPI ranks)", "ms per iteration"), {"logx": True}),
        ("lines", ("world_size", ms, ["model", "network"], "acpsgd_scaling.png", out, "Scaling", "world size (ranks)",
                   "ms per iteration"), {"logx": True}),
        ("points", (["model (paper)", "model"], ["ratio", "ratio (published)"], "dgc_ratio.png", out,
                    "DGC compression ratio", "dense / message"), {"logy": True}),
        ("bars", (["model", "world_size", "network", "density", "run"],
                  ["ssgd (mgwfbp) ms", "ssgd best ms", "topk (layer-wise) ms", "omgs ms"], "omgs.png", out,
                  "OMGS-SGD", "ms per iteration"), {}),
        ("bars", (["network", "model", "world_size", "run"], ["ssgd (allreduce)", "ssgd (ring)", "signsgd", "marsit"],
                  "marsit.png", out, "Marsit", "ms per iteration"), {}),
        ("bars", (["model", "world_size", "network", "run", "method"], ["none ms", "layerfusion ms"],
                  "sketch_fusion.png", out, "LayerFusion", "ms per iteration"), {}),
        ("lines", ("world_size", ["none samples/s", "layerfusion samples/s"], ["model", "method"],
                   "sketch_scaling.png", out, "Scaling with LayerFusion", "world size (ranks)", "samples/s"), {})]
    data = [a[0] for _, a, _ in figs]
    assert data[1] is stub["acpsgd_buffer_sweep"] and data[2] is stub["acpsgd_rank_sweep"]
    assert data[3] is stub["acpsgd_scaling"] and data[5] is stub["omgs"] and data[7] is stub["sketch_fusion"]
    assert data[8] is stub["sketch_scaling"]
    assert data[4].to_dict("list") == {"model (paper)": ["AlexNet", "ResNet"], "model": ["a", "r"],
                                       "ratio": [pytest.approx(NAN, nan_ok=True), 270.0],
                                       "ratio (published)": [597.0, pytest.approx(NAN, nan_ok=True)]}
    assert list(data[6].columns) == ["network", "model", "world_size", "run", "ssgd (allreduce)", "ssgd (ring)",
                                     "marsit", "ssgd (allreduce) ±", "ssgd (ring) ±", "marsit ±"]
    assert [list(r) for r in data[6].itertuples(index=False)] == [
        ["eth", "m", 4, "r", 3.0, 2.5, 1.0, 0.2, pytest.approx(NAN, nan_ok=True), 0.1]]
    assert list(data[0].columns) == ["model", "world_size", "ssgd", "acpsgd", "ssgd ±", "acpsgd ±"]


def test_write_files_names_cases_measured_twice(tmp_path, monkeypatch):
    """A case measured twice (repeats 2, the least that counts) gets the repeats line; one measured
    once does not count."""
    from gradcomp_analysis import trains as TR
    from gradcomp_analysis.io import Results
    _stub_write_files(monkeypatch, {})
    monkeypatch.setattr(TR, "checks", lambda conv, recs: pd.DataFrame())
    monkeypatch.setattr(T, "collapse_repeats", lambda df: df.assign(repeats=[2, 1]))
    e2e = pd.DataFrame({"model": ["m", "m"], "world_size": [1, 1], "method": ["ssgd", "topk"], "fusion": ["none"] * 2,
                        "pipelining": ["on"] * 2})
    R._write_files(str(tmp_path), Results(e2e=e2e), [], [], False)
    got = open(tmp_path / "report.md").read().split("\n")
    assert [x for x in got if "more than once" in x] == [
        "1 e2e case(s) were measured more than once in one run (up to 2 times): each is shown at its median repeat, "
        "its ± widened to half the range between the repeats where that is larger."]
