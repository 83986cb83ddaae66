"""Report discovery and combination of runs on hand-written CSV files (no binary needed)."""

import json
import os

import pandas as pd
import pytest

from gradcomp_analysis.io import find_runs, load_results
from gradcomp_analysis.report import write_report
from test_tables import row


def write_run(d, rows, network=None):
    os.makedirs(d, exist_ok=True)
    e = pd.DataFrame(rows)
    e.insert(0, "schema_version", 1)
    e.drop(columns=["network"]).to_csv(os.path.join(d, "e2e.csv"), index=False)
    if network:
        with open(os.path.join(d, "network.txt"), "w") as f:
            f.write(network + "\n")


def test_discovers_runs_at_any_depth_and_says_what_it_skipped(tmp_path, capsys):
    """EXP/np2 and EXP/np4 two levels below the folder given (the old reader looked one
    level down and skipped them without a word)."""
    for n in (2, 4):
        write_run(tmp_path / "EXP" / f"np{n}", [row("ssgd", 0.2 * n, world_size=n), row("acpsgd", 0.1, world_size=n)])
    (tmp_path / "logs" / "old").mkdir(parents=True)
    (tmp_path / "logs" / "old" / "slurm.out").write_text("x")
    runs = find_runs([str(tmp_path)])
    assert [lab for _, lab in runs] == [os.path.join("EXP", "np2"), os.path.join("EXP", "np4")]
    res = load_results(str(tmp_path))
    assert sorted(res.e2e["run"].unique()) == [os.path.join("EXP", "np2"), os.path.join("EXP", "np4")]
    assert [(os.path.relpath(d, tmp_path), "no " in why) for d, why in res.skipped] == [("logs", True)]
    # The report of the parent folder has the scaling table (2 and 4 ranks) and warns about logs/.
    out = tmp_path / "rep"
    path = write_report(str(tmp_path), str(out))
    m = json.load(open(out / "manifest.json"))
    assert "acpsgd_scaling" in m["tables"], m["missing"]
    assert sorted(pd.read_csv(out / "acpsgd_scaling.csv")["world_size"]) == [2, 4]
    err = capsys.readouterr().err
    assert "warning: skipped" in err and os.path.join(str(tmp_path), "logs") in err
    assert "Folders skipped" in open(path).read()
    # A second report of the same folder does not read the first report's tables as a run.
    write_report(str(tmp_path), str(tmp_path / "EXP" / "report"))
    res = load_results(str(tmp_path))
    assert len(res.meta) == 2
    assert any(d.endswith("report") and "report written by" in why for d, why in res.skipped)


def test_run_with_header_only_is_reported_as_skipped(tmp_path):
    write_run(tmp_path / "a", [row("ssgd", 0.2)])
    write_run(tmp_path / "b", [row("ssgd", 0.2)])
    e = pd.read_csv(tmp_path / "b" / "e2e.csv")
    e.iloc[:0].to_csv(tmp_path / "b" / "e2e.csv", index=False)
    res = load_results(str(tmp_path))
    assert list(res.e2e["run"].unique()) == ["a"]
    assert [(os.path.basename(d), "no rows" in why) for d, why in res.skipped] == [("b", True)]
