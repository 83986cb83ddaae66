"""The `trains` column (trains.py): hand-written converge.csv fixtures joined onto timing
rows and tables, with the convergence check's rule written here on its own: a case trains
when it ran every step and its final held-out loss is at most 1.25 x dense S-SGD's of the
same world size and seed (docs/methods.md, "Convergence check")."""

import io
import json
import os

import pandas as pd
import pytest

from gradcomp_analysis import tables as T, trains
from gradcomp_analysis.report import write_report

from test_tables import row as e2e_row

# A 4-step run at 2 ranks, seed 1 (only the columns the check reads, plus the parameters).
# Dense S-SGD ends at 2.0; topk at rho 0.001 at 2.6 (1.3x: outside); powersgd rank 4 at 2.4
# (1.2x: inside); marsit exactly at 2.5 (1.25x: inside, the rule is <=); sketch diverges at
# step 2; acpsgd's curve stops after step 1 with a low loss (interrupted: never a pass).
CONVERGE = """schema_version,run_id,case_id,method,world_size,seed,steps,density,rank,step,train_loss,eval_loss,eval_accuracy,update_rel_err,status,wire_bytes,step_s
1,r1,a,ssgd,2,1,4,0.001,4,0,2.3,,,0,ok,100,0.01
1,r1,a,ssgd,2,1,4,0.001,4,3,2.1,2.0,0.5,0,done,100,0.01
1,r1,b,topk,2,1,4,0.001,4,3,2.7,2.6,0.3,1.1,done,100,0.01
1,r1,c,powersgd,2,1,4,0.001,4,3,2.5,2.4,0.4,0.2,done,100,0.01
1,r1,d,marsit,2,1,4,0.001,4,3,2.5,2.5,0.4,0.9,done,100,0.01
1,r1,e,sketch,2,1,4,0.001,4,1,2.9,,,3.0,ok,100,0.01
1,r1,e,sketch,2,1,4,0.001,4,2,nan,,,inf,diverged,100,0.01
1,r1,f,acpsgd,2,1,4,0.001,4,1,2.0,1.5,0.6,0.3,ok,100,0.01
"""
DENSE = 2.0


def rule(loss: float) -> str:
    """The check, independently: within 1.25 x dense."""
    return "trains" if loss <= 1.25 * DENSE else "outside tolerance"


@pytest.fixture
def converge():
    return pd.read_csv(io.StringIO(CONVERGE)).assign(run="r1")


@pytest.fixture
def checks(converge):
    return trains.checks(converge)


def test_verdict_per_case(checks):
    c = checks.set_index("method")
    assert c.loc["topk", "kind"] == rule(2.6) == "outside tolerance"
    assert c.loc["powersgd", "kind"] == rule(2.4) == "trains"
    assert c.loc["marsit", "kind"] == rule(2.5) == "trains"
    assert c.loc["topk", "ratio"] == pytest.approx(2.6 / DENSE)
    assert c.loc["sketch", "kind"] == "diverged"
    assert c.loc["acpsgd", "kind"] == "interrupted"  # 1.5 < dense, but the curve was cut short


def test_timing_rows_get_the_verdict_of_their_configuration(checks):
    v = lambda m, n=2, **p: trains.verdict(checks, m, n, p)  # noqa: E731
    assert v("topk", density=0.001) == "outside tolerance (1.30x dense)"
    assert v("powersgd", rank=4) == "trains (1.20x dense)"
    assert v("sketch", density=0.001, sketch_rows=3, sketch_cols_per_k=10.0) == "diverged at step 2"
    assert v("acpsgd", rank=4) == "interrupted at step 2 of 4"
    assert not v("acpsgd", rank=4).startswith("trains")
    # Another density, rank or sketch size of the same method was never checked.
    assert v("topk", density=0.01) == trains.NOT_CHECKED
    assert v("powersgd", rank=8) == trains.NOT_CHECKED
    assert v("sketch", density=0.001, sketch_rows=5, sketch_cols_per_k=10.0) == trains.NOT_CHECKED
    assert v("qsgd") == trains.NOT_CHECKED
    # Parameters that do not matter for a method are not compared (ssgd at any density).
    assert v("ssgd", density=0.5, rank=64) == "trains (1.00x dense)"
    # Only another world size checked: its verdict, named.
    assert v("topk", 8, density=0.001) == "outside tolerance (1.30x dense) at np 2"


def test_several_checks_of_one_configuration_show_the_worst(converge):
    seed2 = converge[converge["method"].isin(["ssgd", "topk"])].assign(seed=2, case_id=lambda d: d["case_id"] + "2")
    seed2.loc[seed2["method"] == "topk", "eval_loss"] = 2.2  # trains at seed 2
    c = trains.checks(pd.concat([converge, seed2], ignore_index=True))
    assert trains.verdict(c, "topk", 2, {"density": 0.001}) == "outside tolerance (1.30x dense), 1 of 2 runs"


def test_sketch_size_from_the_run_record(converge):
    rec = {"run_id": "r1", "config": {"converge": [{"methods": ["sketch"],
                                                    "params": {"sketch_rows": 5, "sketch_cols_per_k": 4.0}}]}}
    c = trains.checks(converge, [rec])
    assert trains.verdict(c, "sketch", 2, {"density": 0.001, "sketch_rows": 5, "sketch_cols_per_k": 4.0}) \
        == "diverged at step 2"
    assert trains.verdict(c, "sketch", 2, {"density": 0.001, "sketch_rows": 3, "sketch_cols_per_k": 10.0}) \
        == trains.NOT_CHECKED


def test_sketch_size_from_converge_csv_before_the_run_record(converge):
    """converge.csv's own sketch_rows / sketch_cols_per_k decide; a row without them (a file
    from before the columns, concatenated with a newer one) falls back to the run record."""
    rec = {"run_id": "r1", "config": {"converge": [{"methods": ["sketch"],
                                                    "params": {"sketch_rows": 5, "sketch_cols_per_k": 4.0}}]}}
    new = converge.assign(sketch_rows=3, sketch_cols_per_k=30.0)
    c = trains.checks(new, [rec])
    assert trains.verdict(c, "sketch", 2, {"density": 0.001, "sketch_rows": 3, "sketch_cols_per_k": 30.0}) \
        == "diverged at step 2"
    assert trains.verdict(c, "sketch", 2, {"density": 0.001, "sketch_rows": 5, "sketch_cols_per_k": 4.0}) \
        == trains.NOT_CHECKED
    old = converge.assign(run="r0", case_id=lambda d: d["case_id"] + "0")
    both = trains.checks(pd.concat([new, old], ignore_index=True), [rec])
    s = both[both["method"] == "sketch"]
    assert sorted(zip(s["sketch_rows"], s["sketch_cols_per_k"])) == [(3, 30.0), (5, 4.0)]


def test_tables_carry_the_column(checks):
    e = pd.DataFrame([e2e_row("ssgd", 0.2), e2e_row("powersgd", 0.1), e2e_row("acpsgd", 0.05),
                      e2e_row("topk", 0.3), e2e_row("topk", 0.25, density=0.01)])
    e[T.TRAINS] = trains.column(e, checks)
    main = T.acpsgd_main(e).set_index("method")
    assert main.loc["topk", T.TRAINS] == "outside tolerance (1.30x dense)"  # rho 0.001: the default picked
    assert main.loc["acpsgd", T.TRAINS] == "interrupted at step 2 of 4"
    wide = T.acpsgd_main_wide(T.acpsgd_main(e))
    assert wide[T.TRAINS].iloc[0] == ("topk: outside tolerance (1.30x dense); acpsgd: interrupted at step 2 of 4; "
                                      "others train")
    ov = T.e2e_overview(e).set_index("method")
    assert ov.loc["topk rho0.01", T.TRAINS] == trains.NOT_CHECKED
    assert ov.loc["topk rho0.001", T.TRAINS].startswith("outside tolerance")


def test_report_tables_say_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "converge.csv").write_text(CONVERGE)
    e = pd.DataFrame([e2e_row("ssgd", 0.2), e2e_row("topk", 0.3), e2e_row("topk", 0.25, density=0.01)])
    e.insert(0, "schema_version", 1)
    e.to_csv(run / "e2e.csv", index=False)
    (run / "run.json").write_text(json.dumps({"run_id": "r1", "status": "done"}))
    out = os.path.dirname(write_report(str(run)))
    t = pd.read_csv(os.path.join(out, "e2e_m_np2.csv")).set_index("method")
    assert t.loc["ssgd", "trains"] == "trains (1.00x dense)"
    assert t.loc["topk rho0.001", "trains"] == "outside tolerance (1.30x dense)"
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
    (d / "converge.csv").write_text(CONVERGE)
    out = os.path.dirname(write_report(str(tmp_path / "ps"), str(tmp_path / "rep2")))
    t = pd.read_csv(os.path.join(out, "paper_scale_trains.csv")).set_index("method")
    assert t.loc["topk", "trains"] == "outside tolerance (1.30x dense) at np 2"
    assert t.loc["omgs", "trains"] == "not checked"


def test_sketch_fusion_row_with_one_fusion_keeps_its_verdict(checks):
    e = pd.DataFrame([e2e_row("ssgd", 0.2), e2e_row("ssgd", 0.1, fusion="layerfusion"), e2e_row("topk", 0.3)])
    e[T.TRAINS] = trains.column(e, checks)
    t = T.sketch_fusion(e).set_index("method")
    assert t.loc["topk", T.TRAINS] == "outside tolerance (1.30x dense)"  # fusion none only
    assert t.loc["ssgd", T.TRAINS] == "trains (1.00x dense)"
