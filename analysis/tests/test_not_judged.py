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
