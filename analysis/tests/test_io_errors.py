"""io.py's refusals and the parts of load_results the binary-built report tests reach
(issue 49's coverage): every message a user gets for a file it cannot read, and what a
run folder's side files (run.json, run.<id>.json, network.txt, sim/) add. Hand-written
files, no binary."""

import errno
import json
import os
import subprocess

import pandas as pd
import pytest

from gradcomp_analysis import compare as C
from gradcomp_analysis import plots
from gradcomp_analysis import verdict as V
from gradcomp_analysis.__main__ import main
from gradcomp_analysis.io import ReportError, check_schema, find_runs, load_csv, load_results
from gradcomp_analysis.simagree import agreement

E2E = dict(schema_version=1, case_id="c0", model="resnet20", method="ssgd", fusion="none", pipelining="on",
           collective="allreduce", aggregation="allreduce", world_size=2, batch=32, device="v100", density=0.001,
           rank=4, compress_s=0.0, comm_s=0.001, decompress_s=0.0, exposed_s=0.0, iter_s=0.002, iter_ci95_s=1e-5,
           iters=10, dense_bytes=100, wire_bytes=100)


def run_dir(root, name="run", rows=None, **files):
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows if rows is not None else [E2E]).to_csv(d / "e2e.csv", index=False)
    for fname, text in files.items():
        p = d / fname.replace("__", "/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


@pytest.mark.parametrize("df, match", [
    (pd.DataFrame({"a": [1]}), "no schema_version column; not a gradcomp CSV"),
    (pd.DataFrame({"schema_version": ["x"]}), r"schema_version \['x'\] is not a number"),
    (pd.DataFrame({"schema_version": [99]}), r"schema_version \[99\] is unknown to this analysis"),
    (pd.DataFrame({"schema_version": [1], "method": ["ssgd"]}), r"columns \['model', .*\] missing"),
])
def test_check_schema_refusals(df, match):
    with pytest.raises(ReportError, match=match):
        check_schema(df, "/x/e2e.csv")


def test_load_csv_refusals_and_nothing(tmp_path):
    assert load_csv(str(tmp_path), "e2e.csv") is None
    (tmp_path / "e2e.csv").mkdir()
    with pytest.raises(ReportError, match="not a regular file"):
        load_csv(str(tmp_path), "e2e.csv")
    d = tmp_path / "b"
    d.mkdir()
    (d / "e2e.csv").write_text("\n\n")
    assert load_csv(str(d), "e2e.csv") is None


def test_load_results_reads_the_side_files_of_a_run(tmp_path):
    fits = "kind,name,a\nhost,start_s,0.1\ncollective,allreduce,0.2\n"
    svm = pd.DataFrame([dict(schema_version=1, case="ssgd/host", method="ssgd", world_size=2, measured_iter_s=1.0,
                             simulated_iter_s=1.1, rel_err=0.1, tolerance=0.15, role="validation")]).to_csv(index=False)
    d = run_dir(tmp_path, "run", **{"run.json": json.dumps({"schema_version": 1, "revision": "abc"}),
                                    "run.7.json": json.dumps({"schema_version": 1, "command": "run"}),
                                    "network.txt": "ib\n", "sim__sim_vs_measured.csv": svm, "sim__fits.csv": fits})
    res = load_results(str(d))
    assert res.meta == [("run", {"schema_version": 1, "revision": "abc"})]
    assert res.history == [("run", {"schema_version": 1, "command": "run"})]
    assert res.e2e["network"].tolist() == ["ib"] and res.e2e["run"].tolist() == ["run"]
    assert res.sim_vs_measured["case"].tolist() == ["ssgd/host"]
    assert res.sim_host["name"].tolist() == ["start_s"]      # the host rows of fits.csv only
    assert res.get("e2e.csv") is res.e2e and not res.empty()


@pytest.mark.parametrize("fname, text, match", [
    ("run.json", "{not json", "run.json: not valid JSON"),
    ("run.json", json.dumps({"schema_version": 42}), "run.json: schema_version 42 is unknown"),
    ("run.3.json", "{", "run.3.json: not valid JSON"),
])
def test_load_results_refuses_a_bad_run_record(tmp_path, fname, text, match):
    d = run_dir(tmp_path, **{fname: text})
    with pytest.raises(ReportError, match=match):
        load_results(str(d))


def test_runs_with_the_same_label_are_told_apart_by_path(tmp_path):
    a = run_dir(tmp_path / "x", "np2")
    b = run_dir(tmp_path / "y", "np2", rows=[{**E2E, "iter_s": 0.003}])
    res = load_results([str(a), str(b)])
    assert sorted(res.e2e["run"]) == sorted([str(a), str(b)])


def test_find_runs_refusals(tmp_path):
    with pytest.raises(ReportError, match="not a directory"):
        find_runs([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no gradcomp CSV file with rows"):
        find_runs([str(tmp_path / "empty")])
    # a run whose only CSV has a header and no rows: found, then nothing to report
    d = tmp_path / "hdr"
    d.mkdir()
    (d / "e2e.csv").write_text(",".join(E2E) + "\n")
    with pytest.raises(ReportError, match="no gradcomp CSV file with rows"):
        load_results(str(d))


def test_a_symlinked_folder_is_skipped_not_followed(tmp_path):
    run_dir(tmp_path / "sweep", "np2")
    os.symlink(tmp_path / "sweep" / "np2", tmp_path / "sweep" / "link")
    res = load_results(str(tmp_path / "sweep"))
    assert [why for _, why in res.skipped] == ["a symbolic link (not followed)"]


# --------------------------------------------------------------- compare / simagree refusals
def test_compare_refuses_runs_without_e2e_rows_or_columns(tmp_path):
    (tmp_path / "none").mkdir()
    with pytest.raises(ReportError, match="no e2e.csv rows to compare"):
        C.compare(str(tmp_path / "none"), str(tmp_path / "none"))
    d = run_dir(tmp_path, "nocase", rows=[{k: v for k, v in E2E.items() if k != "case_id"}])
    with pytest.raises(ReportError, match=r"columns \['case_id'\] missing"):
        C.compare(str(d), str(d))


def test_compare_lists_cases_in_one_run_only_and_different_configs(tmp_path):
    both = [E2E, {**E2E, "case_id": "c2", "method": "qsgd"}, {**E2E, "case_id": "c3", "method": "signsgd"}]
    a = run_dir(tmp_path, "a", rows=both + [{**E2E, "case_id": "c1", "method": "topk"}])
    b = run_dir(tmp_path, "b", rows=both + [{**E2E, "case_id": "c1", "method": "dgc"}])
    ok, path, res = C.compare_result(str(a), str(b), 0.1, str(tmp_path / "o"))
    # 3 of 5 cases in both runs: one config, with a case in each run only
    assert not ok and C.result_line(res) == "FAIL (2 case(s) in one run only)"
    assert res["shared"] == pytest.approx(3 / 5) and res["different_configs"] is False
    assert C.failures(res)[-2:] == ["  only in a: topk none/on/allreduce", "  only in b: dgc none/on/allreduce"]
    text = open(path).read()
    assert "Cases only in run a: topk none/on/allreduce" in text and "Cases only in run b: dgc none/on/allreduce" in text
    c = run_dir(tmp_path, "c", rows=[{**E2E, "model": "vgg16"}])
    res = C.compare_runs(C._e2e(str(a)), C._e2e(str(c)), 0.1)
    assert C.result_line(res).startswith("FAIL (different configs: 0 of 5 cases in both runs")
    assert "- no common cases" in C.summary(res, "a", "b", 0.1)


def test_compare_summary_lists_a_conclusion_not_the_same_in_both_runs(tmp_path):
    rows = lambda t1, t2: [E2E, {**E2E, "case_id": "c1", "method": "topk", "iter_s": t1},
                           {**E2E, "case_id": "c2", "method": "dgc", "iter_s": t2}]
    a = run_dir(tmp_path, "a", rows=rows(0.0010, 0.0030))
    b = run_dir(tmp_path, "b", rows=rows(0.0030, 0.0010))
    ok, path, res = C.compare_result(str(a), str(b), 5.0, str(tmp_path / "o"))
    assert not ok
    text = open(path).read()
    assert "Conclusions that are not the same in both runs:" in text
    assert "| resnet20 | 2 | ssgd none/on/allreduce | topk none/on/allreduce | slower | faster | contradiction |" in text
    assert any(x.startswith("  contradiction: ") for x in C.failures(res))
    assert C.failures(res, limit=1)[-1].startswith("  contradiction: ... and 2 more")


def test_sim_agreement_refuses_a_case_twice_and_an_empty_file(tmp_path):
    row = dict(schema_version=1, case="ssgd/host", method="ssgd", world_size=2, measured_iter_s=1.0,
               simulated_iter_s=1.0, rel_err=0.0, tolerance=0.15, role="validation", verdict="within",
               spread_rel=0.0, fit_spread_rel=None, host_jitter_rel=None)
    d = tmp_path / "twice" / "np2" / "sim"
    d.mkdir(parents=True)
    pd.DataFrame([row, row]).to_csv(d / "sim_vs_measured.csv", index=False)
    with pytest.raises(ReportError, match=f"^{d / 'sim_vs_measured.csv'}: case ssgd/host appears twice$"):
        agreement(str(tmp_path / "twice"), str(tmp_path / "twice"))
    e = tmp_path / "empty" / "np2" / "sim"
    e.mkdir(parents=True)
    (e / "sim_vs_measured.csv").write_text("")
    with pytest.raises(ReportError, match=f"^{e / 'sim_vs_measured.csv'}: no such file, or no rows$"):
        agreement(str(tmp_path / "empty"), str(tmp_path / "empty"))


def test_verdict_ratio_undefined_cases():
    assert V.ratio(3.0, 2.0) == 1.5
    for ours, pub in [(None, 1.0), (1.0, None), (1.0, 0.0), (float("nan"), 1.0), (1.0, float("nan"))]:
        assert V.ratio(ours, pub) != V.ratio(ours, pub)   # NaN
    assert V.counts_line({"host": V.counts([V.SIZE, V.NOT, "n/a"])}) == \
        "host: 1 size reproduced, 0 direction only, 1 not reproduced"


# ---- a full disk under `report --out` (issue 52, item 4) -------------------------------------

def _report_run(root):
    """A run of four methods at two world sizes: tables and plots (several files, some KiB)."""
    rows = [dict(E2E, method=m, world_size=n, case_id=f"{m}{n}")
            for m in ("ssgd", "topk", "powersgd", "acpsgd") for n in (2, 4)]
    return run_dir(root, "run", rows=rows)


def _full_disk_outcome(run, out, capsys):
    """`report RUN --out OUT` where the disk fills: exit 1, one line naming OUT and the cause, no
    traceback; OUT holds only what it held before (an earlier report.md, as it was)."""
    (out / "report.md").write_text("an earlier report\n")
    rc = main(["report", str(run), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradcomp_analysis: error: "), err
    assert str(out) in lines[0] and "No space left on device" in lines[0], err
    assert "Traceback" not in err
    assert sorted(os.listdir(out)) == ["report.md"], os.listdir(out)
    assert (out / "report.md").read_text() == "an earlier report\n"


def test_report_on_a_full_disk_leaves_no_partial_file_injected(tmp_path, monkeypatch, capsys):
    """The disk fills at the first plot, after several tables are written (an injected ENOSPC)."""
    def full(fig, out_dir, fname):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join(out_dir, fname))

    monkeypatch.setattr(plots, "_save", full)
    out = tmp_path / "out"
    out.mkdir()
    _full_disk_outcome(_report_run(tmp_path), out, capsys)


def test_report_on_a_full_disk_leaves_no_partial_file_tmpfs(tmp_path, capsys):
    """--out on a 64 KiB tmpfs (the report needs about 200 KiB): a real ENOSPC, part way through a
    file. Needs root (mount); skipped, with the reason, elsewhere."""
    out = tmp_path / "tiny"
    out.mkdir()
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(out)], capture_output=True, text=True)
    if m.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {m.stderr.strip()}")
    try:
        _full_disk_outcome(_report_run(tmp_path), out, capsys)
    finally:
        subprocess.run(["umount", str(out)], check=False)
