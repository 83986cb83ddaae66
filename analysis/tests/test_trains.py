"""The `trains` column and time to accuracy (trains.py): hand-made converge.csv curves joined
onto timing rows and tables, with the rule written here on its own (docs/methods.md,
"Convergence check"): the target is dense S-SGD's mean final held-out loss + t(0.95, n-1) x
sd x sqrt(1 + 1/n) over its n seeds (accuracy: mean - the same), and a configuration trains
when each of its seeds meets both at some evaluated step; its steps to target is the first
such step + 1."""

import io
import json
import math
import os
import statistics

import pandas as pd
import pytest

from gradcomp_analysis import tables as T, trains
from gradcomp_analysis.report import write_report

from test_tables import row as e2e_row

# 4 steps at 2 ranks, evaluations after steps 2 and 4 (rows step 1 and 3), three seeds.
# Columns: method, seed, (loss, accuracy) after step 2, after step 4, last status.
CURVES = [
    ("ssgd", 1, (1.5, 0.55), (1.0, 0.80), "done"),
    ("ssgd", 2, (1.6, 0.50), (1.2, 0.70), "done"),
    ("ssgd", 3, (1.4, 0.60), (1.1, 0.75), "done"),   # meets the target already after step 2
    ("topk", 1, (2.0, 0.40), (1.40, 0.60), "done"),
    ("topk", 2, (2.0, 0.40), (1.40, 0.60), "done"),
    ("topk", 3, (2.0, 0.40), (1.40, 0.60), "done"),
    ("powersgd", 1, (1.3, 0.70), (1.2, 0.72), "done"),
    ("powersgd", 2, (1.3, 0.70), (1.2, 0.72), "done"),
    ("powersgd", 3, (1.3, 0.70), (1.2, 0.72), "done"),
    ("marsit", 1, (1.9, 0.50), (1.5, 0.70), "done"),   # loss never within the target
    ("marsit", 2, (1.9, 0.50), (1.5, 0.70), "done"),
    ("qsgd", 1, (1.9, 0.50), (1.43, 0.60), "done"),
    ("qsgd", 2, (1.9, 0.50), (1.43, 0.60), "done"),
    ("qsgd", 3, (1.9, 0.50), (1.44, 0.60), "done"),    # 1.44 > 1.43717: misses at one seed
    ("signsgd", 1, (1.3, 0.50), (1.3, 0.57), "done"),  # loss met, accuracy 0.57 < 0.58141
    ("acpsgd", 1, (1.0, 0.90), None, "ok"),            # cut off after step 2: never a pass
]
# Hand computation: dense finals 1.0, 1.2, 1.1: mean 1.1, sd 0.1; accuracies 0.80, 0.70, 0.75:
# mean 0.75, sd 0.05; t(0.95, 2) = 2.920, sqrt(1 + 1/3) = 1.1547005.
TARGET_LOSS = 1.1 + 2.920 * 0.1 * 1.1547005
TARGET_ACC = 0.75 - 2.920 * 0.05 * 1.1547005
HEADER = ("schema_version,run_id,case_id,method,world_size,seed,steps,batch,lr,density,rank,qsgd_levels,step,"
          "train_loss,eval_loss,eval_accuracy,update_rel_err,status,wire_bytes,step_s\n")


def converge_csv(curves=CURVES, run="r1", world_size=2) -> str:
    out = [HEADER]
    for m, seed, a, b, status in curves:
        cid = f"{m}{seed}"
        out.append(f"1,{run},{cid},{m},{world_size},{seed},4,32,0.1,0.001,4,127,0,2.3,,,0,ok,100,0.01\n")
        out.append(f"1,{run},{cid},{m},{world_size},{seed},4,32,0.1,0.001,4,127,1,2.0,{a[0]},{a[1]},0,"
                   f"{'ok' if b else status},100,0.01\n")
        if b:
            out.append(f"1,{run},{cid},{m},{world_size},{seed},4,32,0.1,0.001,4,127,3,1.5,{b[0]},{b[1]},0,"
                       f"{status},100,0.01\n")
    return "".join(out)


def sketch_diverged(seed=1, run="r1") -> str:
    return (f"1,{run},sk{seed},sketch,2,{seed},4,32,0.1,0.001,4,127,1,2.9,,,3.0,ok,100,0.01\n"
            f"1,{run},sk{seed},sketch,2,{seed},4,32,0.1,0.001,4,127,2,nan,,,inf,diverged,100,0.01\n")


@pytest.fixture
def converge():
    return pd.read_csv(io.StringIO(converge_csv() + sketch_diverged())).assign(run="r1")


@pytest.fixture
def checks(converge):
    return trains.checks(converge)


def test_the_target_is_the_prediction_bound_of_one_more_dense_seed(checks):
    assert TARGET_LOSS == pytest.approx(1.4371725, abs=1e-7) and TARGET_ACC == pytest.approx(0.5814137, abs=1e-7)
    c = checks.set_index("method")
    assert c.loc["topk", "target_loss"] == pytest.approx(TARGET_LOSS, rel=1e-7)
    assert c.loc["topk", "target_accuracy"] == pytest.approx(TARGET_ACC, rel=1e-7)
    assert c.loc["topk", "dense_seeds"] == 3
    # The table's t, four seeds: t(0.95, 3) = 2.353; between rows the smaller df's.
    assert trains.t95(3) == 2.353 and trains.t95(11) == 1.812 and trains.t95(500) == 1.645
    lo = [1.0, 1.0, 1.0, 1.4]
    want = statistics.mean(lo) + 2.353 * statistics.stdev(lo) * math.sqrt(1.25)
    assert trains.target([(x, 0.5) for x in lo])[0] == pytest.approx(want)
    assert trains.target([(1.0, 0.5)]) is None and trains.target([(1.0, 0.5), (math.nan, 0.1)]) is None


def test_steps_to_target_per_configuration(checks):
    c = checks.set_index("method")
    # Dense: seed 3 after 2 steps, seeds 1 and 2 after 4: median 4, range 2-4.
    assert (c.loc["ssgd", "kind"], c.loc["ssgd", "steps"], c.loc["ssgd", "steps_lo"]) == ("trains", 4, 2)
    assert c.loc["ssgd", "text"] == "trains (dense accuracy in 4 steps, 2-4 over 3 seeds)"
    assert c.loc["powersgd", "steps"] == 2 and c.loc["topk", "steps"] == 4
    assert c.loc["marsit", "kind"] == "does not reach dense"
    assert c.loc["marsit", "text"] == "does not reach dense (best 1.500 at step 4; target 1.437)"
    # One seed of three misses: the configuration does not reach dense, and says at how many.
    assert c.loc["qsgd", "kind"] == "does not reach dense" and "at 1 of 3 seeds" in c.loc["qsgd", "text"]
    assert math.isnan(c.loc["qsgd", "steps"])
    # The loss alone is not enough: accuracy must be met too.
    assert c.loc["signsgd", "kind"] == "does not reach dense"
    assert c.loc["sketch", "kind"] == "diverged"
    assert c.loc["acpsgd", "kind"] == "interrupted"  # 1.0 < dense, but the curve was cut short
    assert c.loc["topk", "ratio"] == pytest.approx(1.40 / 1.1)


def test_one_dense_seed_gives_no_target():
    one = pd.read_csv(io.StringIO(converge_csv([r for r in CURVES if r[1] == 1]))).assign(run="r1")
    c = trains.checks(one).set_index("method")
    assert set(c["kind"]) == {"no dense target", "interrupted"}
    assert c.loc["topk", "text"].startswith("no dense target") and "1.40x" in c.loc["topk", "text"]


def test_each_setup_has_its_own_dense(converge):
    """A second run (its own setup) with a slower dense does not widen the first's target."""
    other = pd.read_csv(io.StringIO(converge_csv([(m, s, (3.0, 0.1), (2.0 + s / 10, 0.3), st)
                                                  for m, s, _, _, st in CURVES if m == "ssgd"], run="r2")))
    c = trains.checks(pd.concat([converge, other.assign(run="r2")], ignore_index=True))
    assert c[c["method"] == "topk"]["target_loss"].iloc[0] == pytest.approx(TARGET_LOSS)
    assert len(c[c["method"] == "ssgd"]) == 2


def test_timing_rows_get_the_verdict_of_their_configuration(checks):
    v = lambda m, n=2, **p: trains.verdict(checks, m, n, p)  # noqa: E731
    assert v("topk", density=0.001) == "trains (dense accuracy in 4 steps, 4-4 over 3 seeds)"
    assert v("marsit").startswith("does not reach dense")
    assert v("sketch", density=0.001, sketch_rows=3, sketch_cols_per_k=10.0) == "diverged at step 2 (seed 1)"
    assert v("acpsgd", rank=4) == "interrupted at step 2 of 4"
    # Another density, rank, sketch size or QSGD level count was never checked.
    assert v("topk", density=0.01) == trains.NOT_CHECKED
    assert v("powersgd", rank=8) == trains.NOT_CHECKED
    assert v("sketch", density=0.001, sketch_rows=5, sketch_cols_per_k=10.0) == trains.NOT_CHECKED
    assert v("qsgd", qsgd_levels=15) == trains.NOT_CHECKED
    assert v("qsgd", qsgd_levels=127).startswith("does not reach dense at 1 of 3 seeds")
    # Parameters that do not matter for a method are not compared (ssgd at any density).
    assert v("ssgd", density=0.5, rank=64).startswith("trains")
    # Only another world size checked: its verdict, named; the larger of two equally near.
    assert v("topk", 8, density=0.001).endswith("at np 2")


def test_several_runs_of_one_configuration_show_the_worst(converge):
    again = converge.assign(run="r2", case_id=lambda d: d["case_id"] + "b")
    again.loc[again["method"] == "powersgd", "eval_loss"] = 2.0  # misses in run r2
    c = trains.checks(pd.concat([converge, again], ignore_index=True))
    assert trains.verdict(c, "powersgd", 2, {"rank": 4}).endswith(", 1 of 2 runs")
    assert trains.verdict(c, "powersgd", 2, {"rank": 4}).startswith("does not reach dense")


def test_sketch_size_from_the_run_record(converge):
    rec = {"run_id": "r1", "config": {"converge": [{"methods": ["sketch"],
                                                    "params": {"sketch_rows": 5, "sketch_cols_per_k": 4.0}}]}}
    c = trains.checks(converge, [rec])
    assert trains.verdict(c, "sketch", 2, {"density": 0.001, "sketch_rows": 5, "sketch_cols_per_k": 4.0}) \
        .startswith("diverged at step 2")
    assert trains.verdict(c, "sketch", 2, {"density": 0.001, "sketch_rows": 3, "sketch_cols_per_k": 10.0}) \
        == trains.NOT_CHECKED


def test_a_sketch_size_never_inherits_another_sizes_verdict(converge):
    """converge.csv's own sketch_rows / sketch_cols_per_k decide; two sizes in one run are two
    configurations, and a timing row of a third size is not checked."""
    big = converge[converge["method"] == "topk"].assign(method="sketch", sketch_rows=3, sketch_cols_per_k=20.0,
                                                        case_id=lambda d: d["case_id"] + "s")
    small = converge[converge["method"] == "marsit"].assign(method="sketch", sketch_rows=1, sketch_cols_per_k=5.0,
                                                            case_id=lambda d: d["case_id"] + "t")
    d = pd.concat([converge[converge["method"] != "sketch"], big, small], ignore_index=True)
    c = trains.checks(d)
    v = lambda r, k: trains.verdict(c, "sketch", 2, {"density": 0.001, "sketch_rows": r, "sketch_cols_per_k": k})  # noqa: E731
    assert v(3, 20.0).startswith("trains")
    assert v(1, 5.0).startswith("does not reach dense")
    assert v(3, 10.0) == trains.NOT_CHECKED


def test_time_to_accuracy_arithmetic(checks):
    """Steps x iteration: ssgd 4 (2-4) x 0.2 +- 0.01 s; powersgd 2 (2-2) x 0.1 +- 0.01; topk 4 x 0.06
    +- 0.02; marsit never reaches dense."""
    t = pd.DataFrame([e2e_row("ssgd", 0.2, ci=0.01), e2e_row("powersgd", 0.1, ci=0.01),
                      e2e_row("topk", 0.06, ci=0.02), e2e_row("marsit", 0.01, ci=0.001)])
    r = trains.time_to_accuracy(t, checks, ["model", "world_size"]).set_index("method")
    assert r.loc["ssgd", "tta_s"] == pytest.approx(0.8)
    assert (r.loc["ssgd", "tta_lo_s"], r.loc["ssgd", "tta_hi_s"]) == (pytest.approx(2 * 0.19), pytest.approx(4 * 0.21))
    assert r.loc["powersgd", "tta_s"] == pytest.approx(0.2) and r.loc["powersgd", "place"] == 1
    assert r.loc["powersgd", "speedup_vs_ssgd"] == pytest.approx(4.0)
    assert r.loc["topk", "tta_s"] == pytest.approx(0.24) and r.loc["topk", "place"] == 2
    assert r.loc["topk", "speedup_vs_ssgd"] == pytest.approx(0.8 / 0.24)
    # topk's interval [0.16, 0.32] overlaps powersgd's upper end 0.22: a tie; ssgd's [0.38, 0.84] does not.
    assert bool(r.loc["topk", "tie"]) and not bool(r.loc["ssgd", "tie"]) and not bool(r.loc["powersgd", "tie"])
    # The fastest iteration does not win when it never reaches dense: unranked, with why.
    assert math.isnan(r.loc["marsit", "place"]) and r.loc["marsit", "verdict"].startswith("does not reach dense")
    assert list(r.index[:3]) == ["powersgd", "topk", "ssgd"]


def test_report_opens_with_fastest_to_dense_accuracy(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "converge.csv").write_text(converge_csv())
    e = pd.DataFrame([e2e_row("ssgd", 0.2, ci=0.01), e2e_row("powersgd", 0.1, ci=0.01),
                      e2e_row("topk", 0.06, ci=0.02)]).assign(iters_run=100, compute_drift=[0.0, 0.01, 0.02])
    e.insert(0, "schema_version", 1)
    e.to_csv(run / "e2e.csv", index=False)
    (run / "run.json").write_text(json.dumps({"run_id": "r1", "status": "done", "world_size": 2, "host_cores": 2}))
    md = open(write_report(str(run))).read()
    sec = md[md.index("## Fastest to dense accuracy"):]
    assert md.index("## Fastest to dense accuracy") < md.index("## ACP-SGD")
    assert "**powersgd** first" in sec and "4.00x S-SGD's time" in sec and "a tie with topk" in sec
    assert "cannot rank" not in md
    # A drifted, oversubscribed run says so above its ranking, naming the cause and what to run.
    e.assign(compute_drift=0.5, iters_run=5).to_csv(run / "e2e.csv", index=False)
    (run / "run.json").write_text(json.dumps({"run_id": "r1", "status": "done", "world_size": 4,
                                              "hosts": ["a", "a", "b", "b"], "host_cores": [2, 2, 1, 1],
                                              "load_avg_start": [[5.4, 1, 1]] * 2 + [[0.5, 1, 1]] * 2}))
    md = open(write_report(str(run), str(tmp_path / "rep2"))).read()
    sec = md[md.index("## Fastest to dense accuracy"):md.index("## ACP-SGD")]
    assert "drifted more than 10%" in sec and "load average 5.4 on 2 core(s) of host a" in sec
    # Host b runs 2 ranks on 1 core; host a's 2 on 2 are not oversubscribed.
    assert "2 ranks on 1 core(s) of host b: oversubscribed" in sec and "of host a: oversub" not in sec
    assert "fewer than 20 iterations" in sec and "--min-time" in sec


def test_tables_carry_the_column(checks):
    e = pd.DataFrame([e2e_row("ssgd", 0.2), e2e_row("powersgd", 0.1), e2e_row("acpsgd", 0.05),
                      e2e_row("topk", 0.3), e2e_row("topk", 0.25, density=0.01)])
    e[T.TRAINS] = trains.column(e, checks)
    main = T.acpsgd_main(e).set_index("method")
    assert main.loc["topk", T.TRAINS] == "trains (dense accuracy in 4 steps, 4-4 over 3 seeds)"  # rho 0.001: the default picked
    assert main.loc["acpsgd", T.TRAINS] == "interrupted at step 2 of 4"
    wide = T.acpsgd_main_wide(T.acpsgd_main(e))
    assert wide[T.TRAINS].iloc[0] == "acpsgd: interrupted at step 2 of 4; others train"
    ov = T.e2e_overview(e).set_index("method")
    assert ov.loc["topk rho0.01", T.TRAINS] == trains.NOT_CHECKED
    assert ov.loc["topk rho0.001", T.TRAINS].startswith("trains")


def test_report_tables_say_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "converge.csv").write_text(converge_csv())
    e = pd.DataFrame([e2e_row("ssgd", 0.2), e2e_row("topk", 0.3), e2e_row("topk", 0.25, density=0.01)])
    e.insert(0, "schema_version", 1)
    e.to_csv(run / "e2e.csv", index=False)
    (run / "run.json").write_text(json.dumps({"run_id": "r1", "status": "done"}))
    out = os.path.dirname(write_report(str(run)))
    t = pd.read_csv(os.path.join(out, "e2e_m_np2.csv")).set_index("method")
    assert t.loc["ssgd", "trains"] == "trains (dense accuracy in 4 steps, 2-4 over 3 seeds)"
    assert t.loc["topk rho0.001", "trains"] == "trains (dense accuracy in 4 steps, 4-4 over 3 seeds)"
    assert t.loc["topk rho0.01", "trains"] == "not checked"
    assert "| trains |" in open(os.path.join(out, "e2e_m_np2.md")).read()


def test_paper_scale_without_converge_is_not_checked(tmp_path):
    d = tmp_path / "ps" / "omgs"
    d.mkdir(parents=True)
    (d / "paper_scale.txt").write_text("headline=omgs\nnetwork=1gbe\n")
    pd.DataFrame([{"schema_version": 1, "source": "simulated", "model": "resnet50", "method": m, "fusion": "none",
                   "pipelining": "on", "world_size": 16, "compress_on": "host", "density": 0.001, "rank": 4,
                   "iter_s": 1.0, "cost_source": "x"} for m in ["topk", "omgs"]]).to_csv(d / "sim.csv", index=False)
    out = os.path.dirname(write_report(str(tmp_path / "ps")))
    t = pd.read_csv(os.path.join(out, "paper_scale_trains.csv"))
    assert list(t["trains"]) == ["not checked", "not checked"]
    (d / "converge.csv").write_text(converge_csv())
    out = os.path.dirname(write_report(str(tmp_path / "ps"), str(tmp_path / "rep2")))
    t = pd.read_csv(os.path.join(out, "paper_scale_trains.csv")).set_index("method")
    assert t.loc["topk", "trains"] == "trains (dense accuracy in 4 steps, 4-4 over 3 seeds) at np 2"
    assert t.loc["omgs", "trains"] == "not checked"


def test_paper_scale_judges_each_sketch_size_at_its_own_size(tmp_path, converge):
    """Issue 50 item 1: a Count Sketch row of the paper-scale tables is judged by the converge
    rows of its own size (rows, columns per k), not by the worst of every size checked."""
    d = tmp_path / "ps" / "sketch-fusion"
    d.mkdir(parents=True)
    (d / "paper_scale.txt").write_text("headline=sketch-fusion\nnetwork=10gbe\n")
    pd.DataFrame([{"schema_version": 1, "source": "simulated", "model": "resnet50", "method": "sketch",
                   "fusion": "none", "pipelining": "on", "world_size": 16, "compress_on": "host",
                   "density": 0.001, "rank": 4, "sketch_rows": r, "sketch_cols_per_k": k, "iter_s": 1.0,
                   "cost_source": "x"} for r, k in [(3, 20.0), (1, 5.0), (3, 10.0)]]).to_csv(d / "sim.csv", index=False)
    big = converge[converge["method"] == "topk"].assign(method="sketch", sketch_rows=3, sketch_cols_per_k=20.0,
                                                        case_id=lambda x: x["case_id"] + "s")
    small = converge[converge["method"] == "marsit"].assign(method="sketch", sketch_rows=1, sketch_cols_per_k=5.0,
                                                            case_id=lambda x: x["case_id"] + "t")
    pd.concat([converge[converge["method"] != "sketch"], big, small], ignore_index=True) \
        .to_csv(d / "converge.csv", index=False)
    out = os.path.dirname(write_report(str(tmp_path / "ps")))
    t = pd.read_csv(os.path.join(out, "paper_scale_trains.csv")).set_index(["sketch_rows", "sketch_cols_per_k"])
    assert t.loc[(3, 20.0), "trains"].startswith("trains")
    assert t.loc[(1, 5.0), "trains"].startswith("does not reach dense")
    assert t.loc[(3, 10.0), "trains"] == "not checked"


def test_sketch_fusion_row_with_one_fusion_keeps_its_verdict(checks):
    e = pd.DataFrame([e2e_row("ssgd", 0.2), e2e_row("ssgd", 0.1, fusion="layerfusion"), e2e_row("marsit", 0.3)])
    e[T.TRAINS] = trains.column(e, checks)
    t = T.sketch_fusion(e).set_index("method")
    assert t.loc["marsit", T.TRAINS].startswith("does not reach dense")  # fusion none only
    assert t.loc["ssgd", T.TRAINS].startswith("trains")
