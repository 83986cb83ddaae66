"""Verdict agreement of two sim-accuracy runs (gradcomp_analysis.simagree; issue 29)."""

import pandas as pd
import pytest

from gradcomp_analysis.__main__ import main
from gradcomp_analysis.io import ReportError
from gradcomp_analysis.simagree import agreement


def svm(rows):
    """sim_vs_measured.csv rows: (case, verdict, rel_err, spread_rel, fit_spread_rel, host_jitter_rel)."""
    return pd.DataFrame([dict(schema_version=1, case=c, method=c.split("/")[0], world_size=2,
                              measured_iter_s=1e-3, simulated_iter_s=1e-3 * (1 + e), rel_err=e, tolerance=0.15,
                              role="validation", verdict=v, spread_rel=s, fit_spread_rel=f, host_jitter_rel=j)
                         for c, v, e, s, f, j in rows])


def out_dir(tmp_path, name, per_np):
    """A `make sim-accuracy OUT=...` folder: npN/sim/sim_vs_measured.csv per world size."""
    root = tmp_path / name
    for np_, df in per_np.items():
        d = root / np_ / "sim"
        d.mkdir(parents=True)
        df.to_csv(d / "sim_vs_measured.csv", index=False)
    return str(root)


ROWS = [("ssgd/host", "within", 0.02, 0.01, 0.001, 0.01),
        ("qsgd/host", "too-noisy", -0.05, 0.03, 0.02, 0.2),
        ("topk/device", "within", 0.01, 0.004, None, None)]


def test_counts_per_world_size_and_lists_each_changed_verdict(tmp_path):
    a = out_dir(tmp_path, "a", {"np2": svm(ROWS), "np4": svm(ROWS)})
    changed = list(ROWS)
    changed[0] = ("ssgd/host", "outside", -0.171, 0.029, 0.027, 0.093)
    changed[1] = ("qsgd/host", "within", 0.015, 0.011, 0.037, 0.135)
    b = out_dir(tmp_path, "b", {"np2": svm(changed), "np4": svm(ROWS)})
    ok, text, table = agreement(a, b)
    assert not ok
    lines = text.splitlines()
    assert lines[0] == "np2: the same verdict for 1 of 3 cases"
    assert "ssgd/host: within +2.0% (spread 1.0%, fit 0.1%, jitter 1.0%) -> outside -17.1% " \
           "(spread 2.9%, fit 2.7%, jitter 9.3%)" in text
    assert "qsgd/host: too-noisy -5.0%" in text and "-> within +1.5%" in text
    assert "np4: the same verdict for 3 of 3 cases" in lines
    assert len(table) == 6 and table["same"].sum() == 4
    # The same runs agree with themselves, and a `sim` folder can be given directly.
    assert agreement(a, a)[0]
    ok, text, _ = agreement(str(tmp_path / "a" / "np2" / "sim"), str(tmp_path / "a" / "np2" / "sim"))
    assert ok and text == "run: the same verdict for 3 of 3 cases"


def test_runs_of_different_configs_and_bad_folders_are_refused(tmp_path):
    a = out_dir(tmp_path, "a", {"np2": svm(ROWS)})
    b = out_dir(tmp_path, "b", {"np2": svm(ROWS[:2])})
    with pytest.raises(ReportError, match="topk/device is in one run only"):
        agreement(a, b)
    c = out_dir(tmp_path, "c", {"np4": svm(ROWS)})
    with pytest.raises(ReportError, match="share no world size"):
        agreement(a, c)
    with pytest.raises(ReportError, match="no such directory"):
        agreement(a, str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="make sim-accuracy OUT="):
        agreement(a, str(tmp_path / "empty"))
    old = out_dir(tmp_path, "old", {"np2": svm(ROWS).drop(columns=["host_jitter_rel"])})
    with pytest.raises(ReportError, match=r"columns \['host_jitter_rel'\] missing"):
        agreement(a, old)


def test_command_exits_1_on_a_changed_verdict_and_2_on_bad_input(tmp_path, capsys):
    a = out_dir(tmp_path, "a", {"np2": svm(ROWS)})
    flipped = [ROWS[0], ROWS[1], ("topk/device", "too-noisy", 0.01, 0.3, None, None)]
    b = out_dir(tmp_path, "b", {"np2": svm(flipped)})
    assert main(["sim-agreement", a, a]) == 0
    out = tmp_path / "agree.csv"
    assert main(["sim-agreement", a, b, "--out", str(out)]) == 1
    assert "topk/device: within +1.0% (spread 0.4%) -> too-noisy +1.0% (spread 30.0%)" in capsys.readouterr().out
    assert pd.read_csv(out)["same"].tolist() == [True, True, False]
    assert main(["sim-agreement", a, str(tmp_path / "nowhere")]) == 2
