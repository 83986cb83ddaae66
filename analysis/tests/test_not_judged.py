"""Issue 53 item 3: a check that judged nothing says so and does not count as a pass.

`compare` (`make repeatability`): every case timed once makes no timing claim, so
"3 of 3 within tolerance" beside "not judged: 3" was a vacuous pass. `sim-accuracy` and
`sim-agreement` (`make sim-accuracy`, `make sim-accuracy-twice`): a world size whose every
case is too noisy or not held to it (more ranks than cores) was judged by nothing."""

import pandas as pd

from gradcomp_analysis import compare as C
from gradcomp_analysis.__main__ import main
from gradcomp_analysis.simagree import agreement

from test_compare import e2e, write
from test_simagree import out_dir as sa_dir  # a `make sim-accuracy` folder


# ------------------------------------------------------------------ compare (repeatability)
def test_compare_of_cases_all_timed_once_is_not_judged_and_exits_1(tmp_path, capsys):
    a = write(tmp_path, "a", e2e({"ssgd": 0.0020, "dgc": 0.0030, "topk": 0.0040}).assign(iters=1))
    b = write(tmp_path, "b", e2e({"ssgd": 0.0020, "dgc": 0.0030, "topk": 0.0040}).assign(iters=1))
    res = C.compare_runs(C._e2e(a), C._e2e(b), 0.10)
    assert not res["ok"] and res["not_judged"]
    assert C.result_line(res).startswith("NOT JUDGED")
    text = C.summary(res, "a", "b", 0.10)
    assert "3 of 3" not in text.split("wire bytes")[0]
    assert "- times within 10%: 0 of 0 judged (cases timed once, not judged: 3)" in text
    assert "- result: NOT JUDGED" in text
    assert main(["compare", a, b, "--out", str(tmp_path / "o")]) == 1
    out = capsys.readouterr().out
    assert "result: NOT JUDGED" in out and "PASS" not in out


def test_compare_counts_within_among_the_judged_cases_only(tmp_path):
    a = e2e({"ssgd": 0.0020, "dgc": 0.0030, "topk": 0.0040}).assign(iters=[1, 1, 50])
    res = C.compare_runs(C._e2e(write(tmp_path, "a", a)), C._e2e(write(tmp_path, "b", a)), 0.10)
    assert res["ok"] and not res["not_judged"]
    text = C.summary(res, "a", "b", 0.10)
    assert "- times within 10%: 1 of 1 judged; largest difference 0.0% (cases timed once, not judged: 2)" in text
    assert "- result: PASS" in text


def test_compare_help_documents_the_exit_codes(capsys):
    try:
        main(["compare", "--help"])
    except SystemExit as e:
        assert e.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "exit 1" in out and "judged nothing" in out


# ------------------------------------------------------------------ sim-accuracy / sim-agreement
def svm(verdicts, n=2):
    """sim_vs_measured.csv rows at N ranks, one case per verdict."""
    return pd.DataFrame([dict(schema_version=1, case=f"m{i}/host", method=f"m{i}", world_size=n,
                              measured_iter_s=1e-3, simulated_iter_s=1.01e-3, rel_err=0.01 if v != "outside" else 0.3,
                              tolerance=0.15, role="validation", verdict=v, spread_rel=0.01, fit_spread_rel=None,
                              host_jitter_rel=None) for i, v in enumerate(verdicts)])


def test_sim_accuracy_with_a_world_size_entirely_unjudged_says_not_judged_and_exits_1(tmp_path, capsys):
    root = sa_dir(tmp_path, "out", {"np2": svm(["within", "within", "too-noisy"]),
                                    "np4": svm(["ranks-exceed-cores"] * 36, n=4)})
    assert main(["sim-accuracy", root]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("np2: 2 of 2 judged case(s) within 15%; 1 too noisy to judge, 0 not held to it "
                      "(more ranks than cores)")
    assert out[1] == ("np4: not judged (0 of 36 case(s) judged: 0 too noisy to judge, 36 not held to it "
                      "(more ranks than cores))")
    assert out[-1] == "result: NOT JUDGED (np4: no case judged; not a pass)"


def test_sim_accuracy_passes_only_when_every_world_size_judged_and_none_outside(tmp_path, capsys):
    ok = sa_dir(tmp_path, "ok", {"np2": svm(["within", "within"]), "np4": svm(["within", "too-noisy"], n=4)})
    assert main(["sim-accuracy", ok]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "result: PASS"
    bad = sa_dir(tmp_path, "bad", {"np2": svm(["within", "outside"])})
    assert main(["sim-accuracy", bad]) == 1
    out = capsys.readouterr().out
    assert "np2: 1 of 2 judged case(s) within 15%" in out and "outside: m1/host (+30.0%)" in out
    assert out.splitlines()[-1] == "result: FAIL (1 case(s) outside)"
    # one `simulate --compare` folder (sim_vs_measured.csv itself) works too
    one = tmp_path / "one"
    one.mkdir()
    svm(["too-noisy"]).to_csv(one / "sim_vs_measured.csv", index=False)
    assert main(["sim-accuracy", str(one)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "result: NOT JUDGED (run: no case judged; not a pass)"
    assert main(["sim-accuracy", str(tmp_path / "nowhere")]) == 2


def test_sim_accuracy_help_documents_the_exit_codes(capsys):
    try:
        main(["sim-accuracy", "--help"])
    except SystemExit as e:
        assert e.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "exit 1" in out and "judged nothing" in out and "exit 2" in out


def test_sim_agreement_of_a_world_size_judged_in_neither_run_is_not_judged(tmp_path):
    a = sa_dir(tmp_path, "a", {"np2": svm(["within", "outside"]), "np4": svm(["ranks-exceed-cores"] * 3, n=4)})
    b = sa_dir(tmp_path, "b", {"np2": svm(["within", "outside"]), "np4": svm(["ranks-exceed-cores"] * 3, n=4)})
    ok, text, _ = agreement(a, b)
    assert ok is False
    assert "np2: the same verdict for 2 of 2 cases" in text
    assert "np4: not judged (no case judged in either run: 3 ranks-exceed-cores); not a pass" in text
    # judged in one run, not in the other: the changed verdicts are listed as before
    c = sa_dir(tmp_path, "c", {"np2": svm(["within", "outside"]), "np4": svm(["within"] * 3, n=4)})
    ok, text, _ = agreement(a, c)
    assert ok is False and "np4: the same verdict for 0 of 3 cases" in text
