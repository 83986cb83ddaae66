"""Issue 53 item 8: the report of a folder that holds only part of what `make bench` writes starts
with what it holds.

A `gradcomp simulate` folder alone (sim.csv), a `gradcomp converge` folder alone (converge.csv) or
a micro benchmark alone (micro_comm.csv): the run header names the run (never blank), the first
section is the folder's own (What-if, Convergence, Collectives), no paper section says "not in
these results", the measured-noise preamble appears only where there are measured times, and one
line at the end names the files the folder lacks and the command that writes them. A folder with
e2e rows keeps every paper section and its placeholders (tests/test_report.py pins the full
`make bench` folder with the binary; test_an_e2e_folder_keeps_its_paper_sections here without it).
Hand-written fixtures: no binary needed."""

import json
import os

import pandas as pd

from gradcomp_analysis.__main__ import main
from gradcomp_analysis.report import CONFIGS, write_report

from test_io import MICRO_COMM, write_run
from test_tables import row
from test_trains import converge_csv

PLACEHOLDER = "not in these results"
PREAMBLE = "Times are per iteration"
NOT_HERE = "_Not in this folder:"

SIM_COMMAND = ["gradcomp", "simulate", "--model", "resnet50", "--methods", "ssgd,topk", "--world-sizes", "8,64",
               "--out", "simonly"]


def sim_rows():
    """sim.csv rows as `gradcomp simulate --model resnet50 --methods ssgd,topk --world-sizes 8,64`
    writes them (docs/csv-schema.md, sim.csv), pipelining off and on."""
    rows = []
    for n in (8, 64):
        for method, agg, it in (("ssgd", "allreduce", 0.24), ("topk", "allgather", 0.09)):
            for pipe, k in (("off", 1.0), ("on", 0.9)):
                rows.append({
                    "schema_version": 1, "source": "simulated", "model": "resnet50", "method": method,
                    "fusion": "none", "pipelining": pipe, "collective": agg, "aggregation": agg, "world_size": n,
                    "ranks_per_node": 1, "network": "10gbe", "batch": 64, "device": "v100", "compress_on": "host",
                    "compress_device": "", "density": 0.001, "rank": 4, "tensors": 161, "buckets": 161,
                    "fwd_s": 0.014, "bwd_s": 0.028, "pack_s": 0.01, "compress_s": 0.008, "comm_s": 0.17,
                    "decompress_s": 0.005, "exposed_s": 0.2, "bwd_sync_s": 0.23, "iter_s": it * k * (1 + n / 640),
                    "host_compress_s": 0.008, "host_decompress_s": 0.005, "dense_bytes": 102228128,
                    "wire_bytes": 102228128 if method == "ssgd" else 817825, "planned_s": None, "plan_source": None,
                    "cost_source": "network preset 10gbe (alpha 2.000e-5 s, 1.2500 GB/s per link)"})
    return pd.DataFrame(rows)


def record(command, run_id, **kw):
    """A run.json (docs/csv-schema.md, run.json) of COMMAND."""
    return {"schema_version": 1, "run_id": run_id, "command_line": command, "gradcomp_version": "0.1.0",
            "git_revision": "abc123def456", "world_size": kw.pop("world_size", 1), "hosts": ["vm"],
            "mpi_library": "Open MPI v4.1.4", "start_time": "2026-11-28T19:32:31Z",
            "end_time": "2026-11-28T19:32:32Z", "status": "ok", "slurm_job_id": None, **kw}


def simonly(tmp_path, run_json=True):
    d = tmp_path / "simonly"
    d.mkdir()
    sim_rows().to_csv(d / "sim.csv", index=False)
    if run_json:
        (d / "run.json").write_text(json.dumps(record(SIM_COMMAND, "20261128-193231-5a1b2c")))
    return d


def report(folder, out):
    path = write_report(str(folder), str(out))
    return open(path).read()


def check_partial(text, first_section):
    """What every partial folder's report shares: the title, a run header that is not blank, the
    folder's own section next, no paper placeholder, one line at the end on what is absent."""
    lines = text.splitlines()
    assert lines[0] == "# gradcomp report" and lines[1] == ""
    assert lines[2].startswith("- ") and len(lines[2]) > 40, lines[:4]
    sections = [x for x in lines if x.startswith("## ")]
    assert sections[0] == first_section, sections
    assert PLACEHOLDER not in text
    for paper in ("## ACP-SGD", "## DGC", "## OMGS-SGD", "## Marsit", "## Sketch-Fusion"):
        assert paper not in text, paper
    assert sum(NOT_HERE in x for x in lines) == 1
    body = [x for x in lines if x.strip()]
    assert body[-1].startswith(NOT_HERE) and body[-2].endswith(" plots.")
    return lines, body[-1]


def test_a_simulate_only_folder_opens_with_its_run_and_the_what_if_table(tmp_path):
    text = report(simonly(tmp_path), tmp_path / "rep")
    lines, absent = check_partial(text, "## What-if (`gradcomp simulate`)")
    head = lines[2]
    # The run header names the simulate run: command, revision and date from its run.json.
    assert head.startswith("- simulation `simonly` (`20261128-193231-5a1b2c`, `simulate`): ")
    assert f"`{' '.join(SIM_COMMAND)}`" in head
    assert "(abc123def456)" in head and "2026-11-28T19:32:31Z" in head
    assert "model resnet50; methods ssgd, topk; world sizes 8, 64; network 10gbe" in head
    # Straight to the simulated tables: no measured-noise preamble before them.
    assert lines[3] == "" and lines[4] == "## What-if (`gradcomp simulate`)"
    assert PREAMBLE not in text and "Table `simulated_best`" in text
    # One line at the end: every measured file and the convergence check, with their commands.
    for f in ("micro_comm.csv", "micro_compress.csv", "micro.csv", "e2e.csv", "converge.csv"):
        assert f in absent, f
    assert "gradcomp run bench-configs/laptop.toml" in absent and "gradcomp converge" in absent
    assert "make bench" in absent
    # The manifest still lists the paper tables without rows (machine-readable), without a line each.
    m = json.load(open(tmp_path / "rep" / "manifest.json"))
    assert set(m["missing"]) == set(CONFIGS) and m["tables"][0] == "simulated_best"


def test_a_simulate_folder_without_run_json_still_has_a_run_header(tmp_path):
    """`gradcomp simulate` writes no run.json (today): the header says so and when sim.csv was
    written, and what it simulated; never a blank line."""
    d = simonly(tmp_path, run_json=False)
    os.utime(d / "sim.csv", (1795800000, 1795800000))  # 2026-11-27T17:20:00Z
    text = report(d, tmp_path / "rep")
    lines, _ = check_partial(text, "## What-if (`gradcomp simulate`)")
    assert lines[2].startswith("- simulation `simonly` (`gradcomp simulate`): sim.csv written 2026-11-27T17:20:00Z; "
                               "no run.json")
    assert "model resnet50; methods ssgd, topk" in lines[2]
    assert lines[4] == "## What-if (`gradcomp simulate`)"


def test_the_cli_on_a_simulate_only_folder(tmp_path, capsys):
    d = simonly(tmp_path)
    assert main(["report", str(d), "--out", str(tmp_path / "cli")]) in (0, None)
    text = open(tmp_path / "cli" / "report.md").read()
    check_partial(text, "## What-if (`gradcomp simulate`)")


def test_a_converge_only_folder_opens_with_the_convergence_check(tmp_path):
    d = tmp_path / "conv"
    d.mkdir()
    (d / "converge.csv").write_text(converge_csv())
    (d / "run.json").write_text(json.dumps(record(["gradcomp", "converge", "--out", "conv"], "r1", world_size=2)))
    text = report(d, tmp_path / "rep")
    lines, absent = check_partial(text, "## Convergence (`gradcomp converge`)")
    assert lines[2].startswith("- run `conv` (`r1`, `converge`): status `ok`")
    assert lines[4] == "## Convergence (`gradcomp converge`)"
    assert PREAMBLE not in text
    assert "e2e.csv" in absent and "gradcomp run" in absent
    assert "converge.csv" not in absent and "gradcomp converge" not in absent


def test_a_micro_only_folder_opens_with_its_collectives(tmp_path):
    """Measured times: the preamble on their noise stays, then the collectives, nothing before them."""
    d = tmp_path / "micro"
    d.mkdir()
    (d / "micro_comm.csv").write_text(MICRO_COMM)
    (d / "run.json").write_text(json.dumps(record(["gradcomp", "micro-comm", "--out", "micro"], "m1", world_size=2)))
    text = report(d, tmp_path / "rep")
    lines, absent = check_partial(text, "## Collectives (micro-comm)")
    assert lines[2].startswith("- run `micro` (`m1`, `micro-comm`): status `ok`")
    assert lines[4].startswith(PREAMBLE) and lines[6] == "## Collectives (micro-comm)"
    assert "micro_comm.csv" not in absent
    for f in ("micro_compress.csv", "micro.csv", "e2e.csv", "converge.csv"):
        assert f in absent, f


def test_a_benchmark_folder_with_a_convergence_check_names_the_benchmark_first(tmp_path):
    """Issue 53 item 6: `make bench` writes a benchmark and `gradcomp converge` into one folder; run.json
    is the benchmark's and converge.run.json the check's (src/record/meta.rs). The report's run line names
    the benchmark, the check has its own line under it; the check's record still gives the sketch sizes."""
    d = tmp_path / "bench"
    d.mkdir()
    (d / "micro_comm.csv").write_text(MICRO_COMM)
    (d / "converge.csv").write_text(converge_csv())
    (d / "run.json").write_text(json.dumps(record(["gradcomp", "run", "cfg.toml", "--out", "bench"], "b1",
                                                  world_size=2)))
    (d / "converge.run.json").write_text(json.dumps(record(["gradcomp", "converge", "--config", "cfg.toml"],
                                                           "c1", world_size=2)))
    text = report(d, tmp_path / "rep")
    lines = text.splitlines()
    assert lines[2].startswith("- run `bench` (`b1`, `run`): status `ok`"), lines[:4]
    assert lines[3].startswith("  - convergence check into it (`c1`, `converge`): status `ok`"), lines[:4]
    assert "earlier invocation" not in text and "## Convergence (`gradcomp converge`)" in text


def test_an_e2e_folder_keeps_its_paper_sections(tmp_path):
    """Measured iterations: the preamble, every paper section and the placeholder of each paper
    table it cannot fill, as before; no "Not in this folder" line."""
    write_run(tmp_path / "run", [row("ssgd", 0.2), row("acpsgd", 0.1), row("powersgd", 0.15)])
    text = report(tmp_path / "run", tmp_path / "rep")
    sections = [x for x in text.splitlines() if x.startswith("## ")]
    assert sections[:5] == ["## ACP-SGD", "## DGC: compression ratio", "## OMGS-SGD", "## Marsit", "## Sketch-Fusion"]
    assert PREAMBLE in text and NOT_HERE not in text
    assert "_Table `acpsgd_scaling` not in these results" in text
    assert "paper tables without rows here: " in text


def test_a_simulate_run_json_of_an_unknown_schema_is_refused(tmp_path):
    import pytest
    from gradcomp_analysis.report import ReportError
    d = simonly(tmp_path)
    (d / "run.json").write_text(json.dumps(record(SIM_COMMAND, "x", schema_version=99)))
    with pytest.raises(ReportError, match="schema_version 99 is unknown"):
        write_report(str(d), str(tmp_path / "rep"))
