"""docs/reproduce.md says what the analysis does and gives commands that run as shown."""

import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REPRODUCE = open(os.path.join(ROOT, "docs", "reproduce.md")).read()


def test_table_commands_keep_bind_to_none():
    """Issue 20 item 5: the per-table commands dropped the `--bind-to none` of "How to run"."""
    how = REPRODUCE[REPRODUCE.index("## How to run"):REPRODUCE.index("## Per paper table")]
    assert "mpirun --oversubscribe --bind-to none -np" in how
    table = REPRODUCE[REPRODUCE.index("## Per paper table"):REPRODUCE.index("## What each table computes")]
    cmds = re.findall(r"mpirun [^`]*", table)
    assert len(cmds) >= 9
    for c in cmds:
        assert c.startswith("mpirun --oversubscribe --bind-to none -np "), c


def test_reproduce_describes_the_report_as_it_is():
    """Runs at any depth (not one level down), intervals and significance, runs kept apart."""
    assert "each\nsubdirectory holding CSV files is one run" not in REPRODUCE
    assert "at any depth" in REPRODUCE
    assert "≈ not significant" in REPRODUCE and "`X ±`" in REPRODUCE
    assert "within one run" in REPRODUCE
    assert "fusion/pipelining/collective" in REPRODUCE


def test_methods_says_which_sketch_fusion_row_the_paper_describes():
    """Issue 20 item 4: `sketch-fusion` (one sketch per group) vs `sketch` + layerfusion."""
    methods = " ".join(open(os.path.join(ROOT, "docs", "methods.md")).read().split())
    assert "**one Count Sketch per LayerFusion group**" in methods
    assert "This is what the Sketch-Fusion paper describes" in methods
    assert "**a Count Sketch per tensor**" in methods and "not the paper's Sketch-Fusion" in methods
