"""What `compare` writes and prints, read whole (issue 49: the survivors of mutation testing
listed in docs/mutation.md). Every expectation below is written by hand from the fixture's
numbers, never computed with gradcomp_analysis.

The fixture: two runs of one config, two setups (resnet20 at 4 ranks, vgg16 at 2 ranks).

| setup | case | run a ms | run b ms | b vs a | what it is |
|---|---|---|---|---|---|
| resnet20/4 | ssgd | 2.0 | 2.0 | +0.0% | within |
| resnet20/4 | topk | 3.0 | 3.45 | +15.0% | outside (B slower) |
| resnet20/4 | dgc | 4.0 | 3.0 | -25.0% | outside (B faster: the largest absolute difference) |
| resnet20/4 | powersgd | 5.0 | 5.1 | +2.0% | within |
| resnet20/4 | signsgd | 6.0 | - | | only in run a |
| resnet20/4 | marsit | - | 7.0 | | only in run b |
| vgg16/2 | ssgd | 10.0 | 10.1 | +1.0% | within, wire bytes differ (1000 vs 1200) |
| vgg16/2 | qsgd | 12.0 | 12.6 ± 2.54 | +5.0% | within; in run b inside the noise of ssgd and topk |
| vgg16/2 | topk | 14.0 | 14.42 | +3.0% | within |
| vgg16/2 | dgc | 20.0 | 30.0 | +50.0% | timed once (iters 1): not judged, no interval |

Intervals 0.0234 ms unless shown (the table shows 2 digits: 0.023). Pairs significant in
either run (each setup's cases in order): resnet20: ssgd-topk, ssgd-dgc, ssgd-powersgd,
topk-powersgd, dgc-powersgd agree, topk-dgc contradicts (a: 3 < 4; b: 3.45 > 3); vgg16:
ssgd-topk agrees, ssgd-qsgd and qsgd-topk are one-sided (b: |10.1 - 12.6| = 2.5 <= 2.54 +
0.0234, |12.6 - 14.42| = 1.82); the timed-once dgc has no interval, so no pair. 6 agree,
2 one-sided, 1 contradiction. The case `iters` varies in each run (50, and 1 for the
timed-once dgc), so every label carries `iters=...`.
"""

import os

import pandas as pd
import pytest

from gradcomp_analysis import compare as C
from gradcomp_analysis.__main__ import main
from gradcomp_analysis.io import ReportError

CI = 0.0000234  # 0.0234 ms: the table shows 2 digits, 0.023

# (model, world_size, method, run a ms, run b ms, run b ci ms, wire a, wire b, iters)
CASES = [
    ("resnet20", 4, "ssgd", 2.0, 2.0, None, 1000, 1000, 50),
    ("resnet20", 4, "topk", 3.0, 3.45, None, 1000, 1000, 50),
    ("resnet20", 4, "dgc", 4.0, 3.0, None, 1000, 1000, 50),
    ("resnet20", 4, "powersgd", 5.0, 5.1, None, 1000, 1000, 50),
    ("resnet20", 4, "signsgd", 6.0, None, None, 1000, 1000, 50),
    ("resnet20", 4, "marsit", None, 7.0, None, 1000, 1000, 50),
    ("vgg16", 2, "ssgd", 10.0, 10.1, None, 1000, 1200, 50),
    ("vgg16", 2, "qsgd", 12.0, 12.6, 2.54, 1000, 1000, 50),
    ("vgg16", 2, "topk", 14.0, 14.42, None, 1000, 1000, 50),
    ("vgg16", 2, "dgc", 20.0, 30.0, None, 1000, 1000, 1),
]


def row(case_id, model, ws, method, ms, ci_ms, wire, iters):
    return dict(schema_version=1, run_id="r", case_id=case_id, model=model, method=method, fusion="256KiB",
                pipelining="on", collective="allreduce", aggregation="allreduce", world_size=ws, batch=32,
                device="rtx2080ti", compress_on="host", iters=iters, warmup=5, iters_run=iters, density=0.001,
                rank=4, compress_s=0.0, comm_s=ms / 2e3, decompress_s=0.0, exposed_s=ms / 4e3,
                iter_s=ms / 1e3, iter_ci95_s=(ci_ms / 1e3 if iters > 1 else 0.0), dense_bytes=1000,
                wire_bytes=wire)


def runs(tmp_path, cases=CASES):
    a, b = [], []
    for i, (model, ws, method, ta, tb, cib, wa, wb, iters) in enumerate(cases):
        if ta is not None:
            a.append(row(f"a{i}", model, ws, method, ta, CI * 1e3, wa, iters))
        if tb is not None:
            b.append(row(f"b{i}", model, ws, method, tb, cib if cib is not None else CI * 1e3, wb, iters))
    paths = []
    for name, rows in (("a", a), ("b", b)):
        d = tmp_path / name
        d.mkdir()
        pd.DataFrame(rows).to_csv(d / "e2e.csv", index=False)
        paths.append(str(d))
    return paths


def L(method, iters=50):
    return f"{method} 256KiB/on/allreduce iters={iters}"


SUMMARY = [
    "# Repeatability: RUN_A vs RUN_B",
    "",
    "- cases compared: 8 (only in a: 1, only in b: 1)",
    "- times within 10%: 5 of 7 judged; largest difference 25.0% (cases timed once, not judged: 1)",
    "- wire bytes identical (where both runs timed as many iterations): 7 of 8",
    "- significant conclusions (pairs of cases of one setup significant in either run): 9; "
    "agree 6, one-sided 2, contradictions 1",
    "- result: FAIL (2 case(s) in one run only)",
    "",
    "| case | model | ranks | run a ms | ± | run b ms | ± | b vs a |",
    "|---|---|---|---|---|---|---|---|",
    f"| {L('dgc', 1)} | vgg16 | 2 | 20 |  | 30 |  | +50.0% (timed once, not judged) |",
    f"| {L('dgc')} | resnet20 | 4 | 4 | 0.023 | 3 | 0.023 | -25.0% (outside) |",
    f"| {L('topk')} | resnet20 | 4 | 3 | 0.023 | 3.45 | 0.023 | +15.0% (outside) |",
    f"| {L('qsgd')} | vgg16 | 2 | 12 | 0.023 | 12.6 | 2.5 | +5.0% |",
    f"| {L('topk')} | vgg16 | 2 | 14 | 0.023 | 14.4 | 0.023 | +3.0% |",
    f"| {L('powersgd')} | resnet20 | 4 | 5 | 0.023 | 5.1 | 0.023 | +2.0% |",
    f"| {L('ssgd')} | vgg16 | 2 | 10 | 0.023 | 10.1 | 0.023 | +1.0% (wire bytes differ) |",
    f"| {L('ssgd')} | resnet20 | 4 | 2 | 0.023 | 2 | 0.023 | +0.0% |",
    "",
    "Conclusions that are not the same in both runs:",
    "",
    "| model | ranks | case | vs | run a | run b | verdict |",
    "|---|---|---|---|---|---|---|",
    f"| resnet20 | 4 | {L('topk')} | {L('dgc')} | faster | slower | contradiction |",
    f"| vgg16 | 2 | {L('ssgd')} | {L('qsgd')} | faster | ≈ not significant | one-sided |",
    f"| vgg16 | 2 | {L('qsgd')} | {L('topk')} | faster | ≈ not significant | one-sided |",
    "",
    f"Cases only in run a: {L('signsgd')}",
    "",
    f"Cases only in run b: {L('marsit')}",
    "",
]

FAILING = [
    "failing cases:",
    f"  outside: {L('dgc')} (resnet20, 4 ranks): 4 ms vs 3 ms, -25.0%",
    f"  outside: {L('topk')} (resnet20, 4 ranks): 3 ms vs 3.45 ms, +15.0%",
    f"  wire bytes differ: {L('ssgd')} (vgg16, 2 ranks)",
    f"  contradiction: {L('topk')} vs {L('dgc')} (resnet20, 4 ranks): run a faster, run b slower",
    f"  only in a: {L('signsgd')}",
    f"  only in b: {L('marsit')}",
]


def test_compare_md_of_the_two_run_fixture_line_by_line(tmp_path):
    a, b = runs(tmp_path)
    out = str(tmp_path / "o")
    ok, path, res = C.compare_result(a, b, 0.10, out)
    assert not ok and path == os.path.join(out, "compare.md")
    got = open(path).read()
    want = [x.replace("RUN_A", a).replace("RUN_B", b) for x in SUMMARY]
    assert got.split("\n") == want, got
    # the same text as `summary` returns
    assert C.summary(res, a, b, 0.10) == got


def test_what_compare_prints_line_by_line(tmp_path, capsys):
    a, b = runs(tmp_path)
    out = tmp_path / "o"
    assert main(["compare", a, b, "--out", str(out)]) == 1
    printed = capsys.readouterr().out.rstrip("\n").split("\n")
    assert printed == [
        "cases compared: 8 (only in a: 1, only in b: 1)",
        "times within 10%: 5 of 7 judged; largest difference 25.0% (cases timed once, not judged: 1)",
        "wire bytes identical (where both runs timed as many iterations): 7 of 8",
        "significant conclusions (pairs of cases of one setup significant in either run): 9; "
        "agree 6, one-sided 2, contradictions 1",
        "result: FAIL (2 case(s) in one run only)",
        *FAILING,
        f"written: {out / 'compare.md'} (8 case(s) compared)",
    ]


def test_failures_are_sorted_by_absolute_difference_and_named_by_kind(tmp_path):
    a, b = runs(tmp_path)
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.10)
    assert C.failures(res) == FAILING[1:]
    # without the labels (an older result dict) the cases' keys stand in for them
    bare = {k: v for k, v in res.items() if k not in ("labels_a", "labels_b")}
    tail = C.failures(bare)[-2:]
    assert tail[0].startswith("  only in a: resnet20|signsgd|256KiB|on|allreduce|allreduce|4|"), tail
    assert tail[1].startswith("  only in b: resnet20|marsit|"), tail


def test_failures_list_at_most_limit_per_kind_with_a_count_of_the_rest(tmp_path):
    # 12 cases 20% slower in run b: 10 listed, then "... and 2 more"; the largest first
    cases = [("resnet20", 4, f"m{i:02d}", 2.0 + i, (2.0 + i) * (1.2 + i / 100), None, 1000, 1000, 50)
             for i in range(12)]
    a, b = runs(tmp_path, cases)
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.10)
    f = C.failures(res)
    assert len(f) == 11
    assert f[0].startswith("  outside: m11 256KiB/on/allreduce (resnet20, 4 ranks): 13 ms vs 17")
    assert f[0].endswith(", +31.0%")
    assert f[9].startswith("  outside: m02 ")
    assert f[10] == "  outside: ... and 2 more"
    assert len(C.failures(res, limit=12)) == 12
    assert C.failures(res, limit=3)[-1] == "  outside: ... and 9 more"


def test_the_csv_files_beside_compare_md(tmp_path):
    a, b = runs(tmp_path)
    out = tmp_path / "o"
    C.compare(a, b, 0.10, str(out))
    times = open(out / "compare_times.csv").read().split("\n")
    assert times[0] == "case,model,world_size,a_ms,a_ci_ms,b_ms,b_ci_ms,diff_pct,judged,within,same_wire"
    assert times[1].startswith(f"{L('ssgd')},resnet20,4,2.0,0.0234")
    assert times[1].endswith(",True,True,True")
    assert len([x for x in times if x]) == 9
    pairs = open(out / "compare_pairs.csv").read().split("\n")
    assert pairs[0] == "model,world_size,case,vs,run a,run b,verdict"
    assert pairs[1] == f"resnet20,4,{L('ssgd')},{L('topk')},faster,faster,agree"
    assert len([x for x in pairs if x]) == 10
    # a second compare into the same folder overwrites it (no error: the folder exists)
    ok, path = C.compare(a, b, 0.10, str(out))
    assert not ok and path == str(out / "compare.md")
    assert sorted(os.listdir(out)) == ["compare.md", "compare_pairs.csv", "compare_times.csv"]


def test_the_default_tolerance_is_10_percent(tmp_path):
    # +9% passes and +11% fails at the default, in compare and compare_result alike
    cases = [("resnet20", 4, "ssgd", 10.0, 10.9, None, 1000, 1000, 50),
             ("resnet20", 4, "topk", 20.0, 20.0, None, 1000, 1000, 50)]
    a, b = runs(tmp_path, cases)
    assert C.compare(a, b, out=str(tmp_path / "o1")) == (True, str(tmp_path / "o1" / "compare.md"))
    assert C.compare_result(a, b, out=str(tmp_path / "o2"))[0]
    (tmp_path / "c").mkdir()
    cases[0] = ("resnet20", 4, "ssgd", 10.0, 11.1, None, 1000, 1000, 50)
    a2, b2 = runs(tmp_path / "c", cases)
    ok, path = C.compare(a2, b2, out=str(tmp_path / "o3"))
    assert not ok and "times within 10%: 1 of 2 judged; largest difference 11.0%" in open(path).read()
    ok, path, res = C.compare_result(a2, b2, out=str(tmp_path / "o4"))
    assert not ok and res["times"]["within"].tolist() == [False, True]


def test_the_default_output_folder_is_created_beside_the_runs(tmp_path):
    a, b = runs(tmp_path, CASES[:1])
    ok, path = C.compare(a, b)
    assert ok and path == str(tmp_path / "compare-a-vs-b" / "compare.md")
    ok, path, res = C.compare_result(a, b)
    assert ok and path == str(tmp_path / "compare-a-vs-b" / "compare.md") and res["ok"]


@pytest.mark.parametrize("a, b, want", [
    ("/x/a", "/x/b", "/x/compare-a-vs-b"),
    ("/x/a/np4", "/x/b/np4", "/x/compare-a_np4-vs-b_np4"),
    ("/x/r", "/x/r", "/x/compare-r-vs-r"),
    ("/x/r", "/x/r/sub", "/x/compare-r-vs-r_sub"),
    ("/x/r/sub", "/x/r", "/x/compare-r_sub-vs-r"),
    ("/a", "/b", "/compare-a-vs-b"),
    ("/x/y/a/", "/x/y/b//", "/x/y/compare-a-vs-b"),
    ("/x/y/../a", "/x/b", "/x/compare-a-vs-b"),
])
def test_compare_dir_by_hand(a, b, want):
    assert C.compare_dir(a, b) == want


def test_compare_dir_of_relative_paths_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert C.compare_dir("rep/a", "rep/b") == str(tmp_path / "rep" / "compare-a-vs-b")


def test_fmt_and_largest_by_hand():
    assert C._fmt(None) == ""
    assert C._fmt(float("nan")) == ""
    assert C._fmt(2.0) == "2"
    assert C._fmt(3.456789) == "3.46"
    assert C._fmt(3.456789, 2) == "3.5"
    assert C._fmt(1234.5) == "1.23e+03"
    assert C._fmt(0) == "0"
    t = pd.DataFrame({"judged": [True, True, False], "diff_pct": [-12.34, 5.0, 80.0]})
    assert C._largest(t) == "12.3%"
    assert C._largest(t.assign(judged=False)) == "n/a"


def test_labels_name_the_case_columns_that_vary_and_skip_empty_ones():
    df = pd.DataFrame([
        dict(model="m", method="ssgd", fusion="none", pipelining="off", collective="allreduce",
             aggregation="allreduce", world_size=2, compress_on="host", compress_device=float("nan"), rank=4),
        dict(model="m", method="ssgd", fusion="none", pipelining="off", collective="allreduce",
             aggregation="allreduce", world_size=2, compress_on="device", compress_device="h200", rank=4),
        dict(model="m", method="topk", fusion="1MiB", pipelining="on", collective="allgather",
             aggregation="allgather", world_size=4, compress_on="host", compress_device=float("nan"), rank=4),
    ], index=["x", "y", "z"])
    got = C._labels(df)
    assert list(got.index) == ["x", "y", "z"]
    assert list(got) == ["ssgd none/off/allreduce compress_on=host",
                         "ssgd none/off/allreduce compress_on=device compress_device=h200",
                         "topk 1MiB/on/allgather compress_on=host"]
    # nothing varies but what the label shows already (world size is a setup key): no extras
    same = df.assign(compress_on="host", compress_device="h200")
    assert list(C._labels(same)) == ["ssgd none/off/allreduce", "ssgd none/off/allreduce",
                                     "topk 1MiB/on/allgather"]


def test_e2e_refuses_a_run_without_rows_or_columns_naming_the_file(tmp_path):
    d = tmp_path / "none"
    d.mkdir()
    with pytest.raises(ReportError) as e:
        C._e2e(str(d))
    assert str(e.value) == f"{d}: no e2e.csv rows to compare (compare reads e2e.csv)"
    (d / "e2e.csv").write_text(",".join(row("c", "m", 2, "ssgd", 1.0, 0.02, 1, 50)) + "\n")
    with pytest.raises(ReportError) as e:
        C._e2e(str(d))
    assert str(e.value) == f"{d}: no e2e.csv rows to compare (compare reads e2e.csv)"
    # every column compare needs but case_id is one load_csv's schema check refuses without
    r = row("c", "m", 2, "ssgd", 1.0, 0.02, 1, 50)
    del r["case_id"]
    pd.DataFrame([r]).to_csv(d / "e2e.csv", index=False)
    with pytest.raises(ReportError) as e:
        C._e2e(str(d))
    assert str(e.value) == f"{d / 'e2e.csv'}: columns ['case_id'] missing"


def test_e2e_keys_cases_by_configuration_and_keeps_the_file_as_read(tmp_path):
    a, _ = runs(tmp_path, CASES[:2])
    df = C._e2e(a)
    # the key is the case columns' values joined with "|", in tables.CASE_COLUMNS' order
    assert df.index[0].startswith("resnet20|ssgd|256KiB|on|allreduce|allreduce|4|32|rtx2080ti|host|50|5|")
    assert df.index[1].startswith("resnet20|topk|256KiB|on|allreduce|allreduce|4|32|rtx2080ti|host|50|5|")
    assert list(df["label"]) == ["ssgd 256KiB/on/allreduce", "topk 256KiB/on/allreduce"]
    assert list(df["ci"]) == pytest.approx([CI, CI])
    assert list(df["iter_s"]) == pytest.approx([0.002, 0.003])


def two(tmp_path, a_rows, b_rows, name=""):
    """Runs a and b from (method, ms, ci ms, wire, iters_run) rows: resnet20, 4 ranks, iters 50."""
    out = []
    for side, rows in (("a", a_rows), ("b", b_rows)):
        d = tmp_path / f"{side}{name}"
        d.mkdir()
        df = pd.DataFrame([dict(row(f"{side}{i}", "resnet20", 4, m, ms, ci, wire, 50), iters_run=ir)
                           for i, (m, ms, ci, wire, ir) in enumerate(rows)])
        df.to_csv(d / "e2e.csv", index=False)
        out.append(str(d))
    return out


def result(a, b, tol=0.10):
    return C.result_line(C.compare_runs(C._e2e(a), C._e2e(b), tol))


def test_not_judged_says_what_else_failed(tmp_path):
    """Every case timed once (iters_run 1): NOT JUDGED, and the other failures named after it.
    (iters 50 with iters_run 1 is no file gradcomp writes, adaptive timing runs at least `iters`;
    it keeps the intervals, which tables.ci_s drops by `iters`, so a conclusion can reverse.)"""
    once = [("ssgd", 2.0, 0.0234, 1000, 1), ("topk", 3.0, 0.0234, 1000, 1)]
    head = "NOT JUDGED (all 2 case(s) timed once: no timing claim to compare; not a pass"
    assert result(*two(tmp_path, once, once, "1")) == head + ")"
    wire = [("ssgd", 2.0, 0.0234, 1000, 1), ("topk", 3.0, 0.0234, 999, 1)]
    assert result(*two(tmp_path, once, wire, "2")) == head + "; also wire bytes differ)"
    reversed_ = [("ssgd", 3.0, 0.0234, 1000, 1), ("topk", 2.0, 0.0234, 1000, 1)]
    assert result(*two(tmp_path, once, reversed_, "3")) == head + "; also a conclusion reversed)"
    # a case in one run only is the failure named, not the cases timed once
    more = once + [("dgc", 4.0, 0.0234, 1000, 1)]
    assert result(*two(tmp_path, more, once, "4")) == "FAIL (1 case(s) in one run only)"
    assert result(*two(tmp_path, once, more, "5")) == "FAIL (1 case(s) in one run only)"


def test_summary_of_a_passing_comparison_line_by_line(tmp_path):
    # tolerance 70%: shown as 70 (a tolerance of 70.7% would show 71)
    a, b = two(tmp_path, [("ssgd", 2.0, 0.0234, 1000, 50), ("topk", 3.0, 0.0234, 1000, 50)],
               [("ssgd", 2.1, 0.0234, 1000, 50), ("topk", 3.1, 0.0234, 1000, 50)])
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.7)
    assert C.summary(res, "A", "B", 0.7).split("\n") == [
        "# Repeatability: A vs B",
        "",
        "- cases compared: 2 (only in a: 0, only in b: 0)",
        "- times within 70%: 2 of 2 judged; largest difference 5.0%",
        "- wire bytes identical (where both runs timed as many iterations): 2 of 2",
        "- significant conclusions (pairs of cases of one setup significant in either run): 1; "
        "agree 1, one-sided 0, contradictions 0",
        "- result: PASS",
        "",
        "| case | model | ranks | run a ms | ± | run b ms | ± | b vs a |",
        "|---|---|---|---|---|---|---|---|",
        "| ssgd 256KiB/on/allreduce | resnet20 | 4 | 2 | 0.023 | 2.1 | 0.023 | +5.0% |",
        "| topk 256KiB/on/allreduce | resnet20 | 4 | 3 | 0.023 | 3.1 | 0.023 | +3.3% |",
        "",
    ]
    assert C.failures(res) == []


def test_the_conclusion_counts_name_each_kind(tmp_path):
    a_rows = [("ssgd", 2.0, 0.0234, 1000, 50), ("topk", 3.0, 0.0234, 1000, 50)]
    line = "- significant conclusions (pairs of cases of one setup significant in either run): 1; "
    a, b = two(tmp_path, a_rows, [("ssgd", 3.0, 0.0234, 1000, 50), ("topk", 2.0, 0.0234, 1000, 50)], "1")
    text = C.summary(C.compare_runs(C._e2e(a), C._e2e(b), 1.0), "a", "b", 1.0)
    assert line + "agree 0, one-sided 0, contradictions 1" in text.split("\n")
    a, b = two(tmp_path, a_rows, [("ssgd", 2.0, 0.0234, 1000, 50), ("topk", 3.0, 2.0, 1000, 50)], "2")
    text = C.summary(C.compare_runs(C._e2e(a), C._e2e(b), 1.0), "a", "b", 1.0)
    assert line + "agree 0, one-sided 1, contradictions 0" in text.split("\n")


def test_summary_of_runs_without_a_common_case_line_by_line(tmp_path):
    a, b = two(tmp_path, [("ssgd", 2.0, 0.0234, 1000, 50)], [("topk", 3.0, 0.0234, 1000, 50)])
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.1)
    assert C.summary(res, "A", "B", 0.1).split("\n") == [
        "# Repeatability: A vs B",
        "",
        "- cases compared: 0 (only in a: 1, only in b: 1)",
        "- no common cases",
        "- wire bytes identical (where both runs timed as many iterations): 0 of 0",
        "- significant conclusions (pairs of cases of one setup significant in either run): 0; "
        "agree 0, one-sided 0, contradictions 0",
        "- result: FAIL (different configs: 0 of 2 cases in both runs; compare judges two runs of one config)",
        "",
        "| case | model | ranks | run a ms | ± | run b ms | ± | b vs a |",
        "|---|---|---|---|---|---|---|---|",
        "",
        "Cases only in run a: ssgd 256KiB/on/allreduce",
        "",
        "Cases only in run b: topk 256KiB/on/allreduce",
        "",
    ]


def test_cases_in_one_run_only_are_listed_by_label_or_by_key(tmp_path):
    a, b = two(tmp_path, [("ssgd", 2.0, 0.0234, 1000, 50), ("topk", 3.0, 0.0234, 1000, 50),
                          ("dgc", 4.0, 0.0234, 1000, 50)], [("dgc", 4.0, 0.0234, 1000, 50)])
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.1)
    lines = C.summary(res, "a", "b", 0.1).split("\n")
    assert lines[-2] == "Cases only in run a: ssgd 256KiB/on/allreduce, topk 256KiB/on/allreduce"
    # without labels (a result dict of an older compare_runs), the cases' keys
    bare = {k: v for k, v in res.items() if k not in ("labels_a", "labels_b")}
    last = C.summary(bare, "a", "b", 0.1).split("\n")[-2]
    assert last.startswith("Cases only in run a: resnet20|ssgd|256KiB|on|allreduce|allreduce|4|32|"), last
    assert ", resnet20|topk|256KiB|" in last


def test_one_case_timed_once_is_not_judged_and_no_case_in_common_is_not(tmp_path):
    a, b = two(tmp_path, [("ssgd", 2.0, 0.0234, 1000, 1)], [("ssgd", 3.0, 0.0234, 1000, 1)], "1")
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.1)
    assert res["not_judged"] is True and res["ok"] is False
    assert C.result_line(res) == "NOT JUDGED (all 1 case(s) timed once: no timing claim to compare; not a pass)"
    a, b = two(tmp_path, [("ssgd", 2.0, 0.0234, 1000, 1)], [("topk", 3.0, 0.0234, 1000, 1)], "2")
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.1)
    assert res["not_judged"] is False and res["ok"] is False and res["shared"] == 0.0


def test_conclusions_keep_the_setups_in_the_order_of_run_a(tmp_path):
    rows = []
    for model in ("vgg16", "resnet20"):  # vgg16 first: not the sorted order
        rows += [row(f"{model}1", model, 4, "ssgd", 2.0, 0.0234, 1000, 50),
                 row(f"{model}2", model, 4, "topk", 3.0, 0.0234, 1000, 50)]
    a = pd.DataFrame(rows)
    b = a.assign(iter_s=[0.003, 0.002, 0.003, 0.002])  # both setups reverse ssgd and topk
    for name, d in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        d.to_csv(tmp_path / name / "e2e.csv", index=False)
    res = C.compare_runs(C._e2e(str(tmp_path / "a")), C._e2e(str(tmp_path / "b")), 1.0)
    assert list(res["pairs"]["model"]) == ["vgg16", "resnet20"]
    assert list(res["pairs"]["verdict"]) == ["contradiction", "contradiction"]
