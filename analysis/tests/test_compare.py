"""Repeatability check (gradcomp_analysis.compare): two runs of one config."""

import os

import pandas as pd
import pytest

from gradcomp_analysis import compare as C
from gradcomp_analysis.__main__ import main


def e2e(times, ci=0.00002, ids="abc"):
    """e2e.csv rows of one run: method -> median iter_s (distinct case ids per run)."""
    rows = []
    for i, (m, t) in enumerate(times.items()):
        rows.append(dict(schema_version=1, run_id="r", case_id=f"{ids}{i}", model="resnet20", method=m,
                         fusion="256KiB", pipelining="on", collective="allreduce", aggregation="allreduce",
                         world_size=4, batch=128, device="rtx2080ti", compress_on="host", iters=50, warmup=5,
                         density=0.001, rank=4, compress_s=0.0, comm_s=t / 2, decompress_s=0.0,
                         exposed_s=t / 4, iter_s=t, iter_ci95_s=ci, dense_bytes=1000, wire_bytes=1000))
    return pd.DataFrame(rows)


def write(tmp_path, name, df):
    d = tmp_path / name
    d.mkdir()
    df.to_csv(d / "e2e.csv", index=False)
    return str(d)


def test_same_times_pass_and_case_ids_need_not_match(tmp_path):
    a = write(tmp_path, "a", e2e({"ssgd": 0.0020, "topk": 0.0030}, ids="x"))
    b = write(tmp_path, "b", e2e({"ssgd": 0.0021, "topk": 0.0031}, ids="y"))
    ok, path = C.compare(a, b, 0.10)
    assert ok
    text = open(path).read()
    assert "times within 10%: 2 of 2" in text and "contradictions 0" in text and "PASS" in text


def test_a_time_outside_the_tolerance_fails(tmp_path):
    a = write(tmp_path, "a", e2e({"ssgd": 0.0020, "topk": 0.0030}))
    b = write(tmp_path, "b", e2e({"ssgd": 0.0020, "topk": 0.0034}))
    ok, path = C.compare(a, b, 0.10)
    assert not ok
    assert "+13.3% (outside)" in open(path).read()
    assert main(["compare", a, b, "--tolerance", "0.2", "--out", str(tmp_path / "o")]) == 0
    assert main(["compare", a, b, "--out", str(tmp_path / "o2")]) == 1


def test_a_reversed_conclusion_fails_and_a_borderline_one_is_listed(tmp_path):
    # Run a: topk faster than ssgd (2.0 vs 2.3 ms, intervals 0.02); run b: slower.
    a = C._e2e(write(tmp_path, "a", e2e({"ssgd": 0.0023, "topk": 0.0020, "dgc": 0.0040})))
    b = C._e2e(write(tmp_path, "b", e2e({"ssgd": 0.0020, "topk": 0.0023, "dgc": 0.0040})))
    res = C.compare_runs(a, b, 0.5)
    v = res["pairs"].set_index(["case", "vs"])["verdict"]
    assert v[("ssgd 256KiB/on/allreduce", "topk 256KiB/on/allreduce")] == "contradiction"
    assert v[("ssgd 256KiB/on/allreduce", "dgc 256KiB/on/allreduce")] == "agree"
    assert not res["ok"]
    # Inside the noise in run b (intervals 0.4 ms): one-sided, not a failure.
    b2 = C._e2e(write(tmp_path, "b2", e2e({"ssgd": 0.0021, "topk": 0.0020, "dgc": 0.0040}, ci=0.0002)))
    res = C.compare_runs(a, b2, 0.5)
    v = res["pairs"].set_index(["case", "vs"])["verdict"]
    assert v[("ssgd 256KiB/on/allreduce", "topk 256KiB/on/allreduce")] == "one-sided"
    assert res["ok"]


def test_repeats_of_a_case_are_taken_at_their_median(tmp_path):
    rows = e2e({"ssgd": 0.0020})
    rep = pd.concat([rows, rows.assign(case_id="r2", iter_s=0.0030), rows.assign(case_id="r3", iter_s=0.0021)])
    a = write(tmp_path, "a", rep)
    b = write(tmp_path, "b", e2e({"ssgd": 0.0021}))
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.10)
    assert len(res["times"]) == 1
    assert res["times"]["a_ms"].iloc[0] == pytest.approx(2.1)


def test_wire_bytes_must_match_and_single_iterations_are_not_judged(tmp_path):
    a = e2e({"ssgd": 0.0020, "dgc": 0.0030}).assign(iters=1)
    b = e2e({"ssgd": 0.0030, "dgc": 0.0060}).assign(iters=1)
    res = C.compare_runs(C._e2e(write(tmp_path, "a", a)), C._e2e(write(tmp_path, "b", b)), 0.10)
    # every case timed once: the wire bytes agree, but the times judged nothing (issue 53)
    assert res["not_judged"] and not res["ok"] and res["times"]["same_wire"].all()
    b.loc[b["method"] == "dgc", "wire_bytes"] = 999
    res = C.compare_runs(C._e2e(write(tmp_path, "a2", a)), C._e2e(write(tmp_path, "b2", b)), 0.10)
    assert not res["ok"]
    assert "wire bytes differ" in C.summary(res, "a", "b", 0.1)
    # A mean over a different number of iterations (adaptive timing) is not judged.
    b3 = a.assign(iters_run=11)
    b3.loc[b3["method"] == "dgc", "wire_bytes"] = 999
    res = C.compare_runs(C._e2e(write(tmp_path, "a3", a.assign(iters_run=10))),
                         C._e2e(write(tmp_path, "b3", b3)), 0.10)
    assert res["times"]["same_wire"].all(), C.summary(res, "a", "b", 0.1)
    res = C.compare_runs(C._e2e(write(tmp_path, "a4", a.assign(iters_run=11))),
                         C._e2e(write(tmp_path, "b4", b3)), 0.10)
    assert not res["ok"] and not res["times"]["same_wire"].all()


def test_a_run_without_e2e_rows_is_refused_naming_it(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    assert main(["compare", str(d), str(d)]) == 2


def test_runs_sharing_few_cases_are_different_configs_not_a_pass(tmp_path, capsys):
    # Run a: 28 cases; run b: 3 of them, identical times (the old check said PASS).
    methods = {f"m{i}": 0.002 + i * 1e-4 for i in range(28)}
    a = write(tmp_path, "a", e2e(methods))
    b = write(tmp_path, "b", e2e({k: methods[k] for k in ("m0", "m1", "m2")}))
    ok, path = C.compare(a, b, 0.10, str(tmp_path / "o"))
    assert not ok
    text = open(path).read()
    assert "result: FAIL (different configs: 3 of 28 cases in both runs" in text, text
    assert main(["compare", a, b, "--out", str(tmp_path / "o2")]) == 1
    out = capsys.readouterr().out
    assert "result: FAIL (different configs: 3 of 28 cases in both runs" in out
    assert "only in a: m10 256KiB/on/allreduce" in out and "only in a: ... and 15 more" in out


def test_a_case_in_one_run_only_fails(tmp_path):
    a = write(tmp_path, "a", e2e({"ssgd": 0.0020, "topk": 0.0030, "dgc": 0.0040}))
    b = write(tmp_path, "b", e2e({"ssgd": 0.0020, "topk": 0.0030}))
    ok, path = C.compare(a, b, 0.10, str(tmp_path / "o"))
    assert not ok
    text = open(path).read()
    assert "result: FAIL (1 case(s) in one run only)" in text
    assert "Cases only in run a: dgc 256KiB/on/allreduce" in text


def test_the_verdict_and_failing_cases_are_printed(tmp_path, capsys):
    a = write(tmp_path, "a", e2e({"ssgd": 0.0020, "topk": 0.0030}))
    b = write(tmp_path, "b", e2e({"ssgd": 0.0020, "topk": 0.0034}))
    assert main(["compare", a, b, "--out", str(tmp_path / "o")]) == 1
    out = capsys.readouterr().out
    assert "result: FAIL" in out
    assert "outside: topk 256KiB/on/allreduce (resnet20, 4 ranks): 3 ms vs 3.4 ms, +13.3%" in out
    assert "times within 10%: 1 of 2" in out
    assert f"written: {tmp_path / 'o' / 'compare.md'}" in out
    b2 = write(tmp_path, "b2", e2e({"ssgd": 0.0020, "topk": 0.0031}))
    assert main(["compare", a, b2, "--out", str(tmp_path / "o2")]) == 0
    out = capsys.readouterr().out
    assert "result: PASS" in out and "failing cases" not in out


def test_the_output_goes_to_a_folder_of_its_own_not_into_run_b(tmp_path):
    root = tmp_path / "rep"
    root.mkdir()
    (root / "a").mkdir()
    (root / "b").mkdir()
    a = write(root / "a", "np4", e2e({"ssgd": 0.0020}))
    b = write(root / "b", "np4", e2e({"ssgd": 0.0020}))
    assert C.compare_dir(a, b) == str(root / "compare-a_np4-vs-b_np4")
    ok, path = C.compare(a, b, 0.10)
    assert ok and path == str(root / "compare-a_np4-vs-b_np4" / "compare.md")
    assert sorted(os.listdir(b)) == ["e2e.csv"]
