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


def test_printed_numbers_have_consistent_significant_digits():
    """Item 5: one format per column (4 significant digits for measurements, 2 for an
    interval's half-width, integers and short parameters as they are); Markdown shows
    `median ± half-width` in one cell."""
    from gradcomp_analysis.report import format_column, to_markdown
    assert format_column([283.4123, 1.6152, 0.051234, float("nan"), float("inf")], "iter_ms") == \
        ["283.4", "1.615", "0.05123", "", "inf"]
    assert format_column([25.0, 1.52345], "speedup") == ["25.00", "1.523"]  # was "25.000" beside "1.523"
    assert format_column([9.99996], "x") == ["10.00"]
    assert format_column([0.0612, 3.4, 33.7], "iter_ms ±") == ["0.061", "3.4", "34"]
    assert format_column([0.001, 0.01], "density") == ["0.001", "0.01"]
    assert format_column([97.49, 232.56], "gradient MiB (published)") == ["97.49", "232.56"]
    assert format_column([2, 4], "world_size") == ["2", "4"]
    md = to_markdown(pd.DataFrame({"a ms": [1.61523, 283.41], "a ms ±": [0.0612, float("nan")],
                                   "vs ssgd": ["faster", "≈ not significant"]}))
    assert md.splitlines()[0] == "| a ms | vs ssgd |"
    assert md.splitlines()[2] == "| 1.615 ± 0.061 | faster |"
    assert md.splitlines()[3] == "| 283.4 | ≈ not significant |"


def test_an_interval_wider_than_its_median_is_printed_as_too_noisy():
    """micro_comm's `14.06 ± 800` us: a half-width 57 times the median says nothing."""
    from gradcomp_analysis.report import to_markdown
    md = to_markdown(pd.DataFrame({"median us": [14.06, 20.0], "median us ±": [800.0, 2.0]}))
    assert md.splitlines()[2] == "| 14.06 (too noisy) |"
    assert md.splitlines()[3] == "| 20 ± 2 |"


def test_plots_panel_per_model_and_buffer_sweep_ticks(tmp_path, monkeypatch):
    """Item 5: ResNet-20 (ms) and ResNet-50 (hundreds of ms) get a panel each in
    acpsgd_main.png; acpsgd_buffer_sweep.png labels its ticks by fusion (none ... single)
    and keeps the `single` point."""
    from gradcomp_analysis import plots
    figs = {}

    def save(fig, out_dir, fname):
        figs[fname] = fig
        return fname

    monkeypatch.setattr(plots, "_save", save)
    rows = []
    for model, k in [("resnet20", 0.002), ("resnet50", 0.2)]:
        for f, x in [("none", 1.0), ("1MiB", 0.8), ("25MiB", 0.7), ("single", 0.9)]:
            rows += [row("ssgd", k * x, fusion=f, model=model), row("acpsgd", k * x / 2, fusion=f, model=model)]
    write_run(tmp_path / "run", rows)
    write_report(str(tmp_path / "run"), str(tmp_path / "rep"))
    # Ratios (dimensionless, comparable across models) stay on one axis.
    rows_dgc = [row("dgc", 0.1, model="resnet50", dense=102228128, wire=409600),
                row("dgc", 0.1, model="resnet20", dense=4000, wire=40)]
    write_run(tmp_path / "dgc", rows_dgc)
    write_report(str(tmp_path / "dgc"), str(tmp_path / "rep-dgc"))
    assert len(figs["dgc_ratio.png"].axes) == 1
    main = figs["acpsgd_main.png"]
    assert len(main.axes) == 2
    assert sorted(a.get_title().split(": ")[-1] for a in main.axes) == ["resnet20", "resnet50"]
    sweep = figs["acpsgd_buffer_sweep.png"]
    assert len(sweep.axes) == 2
    for ax in sweep.axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["none", "1MiB", "25MiB", "single"]
        assert all(len(line.get_xdata()) == 4 for line in ax.get_lines() if len(line.get_xdata()) > 2)
        assert ax.get_xscale() == "linear"


def test_cli_help_says_runs_are_found_at_any_depth():
    import subprocess
    import sys
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "analysis"))
    p = subprocess.run([sys.executable, "-m", "gradcomp_analysis", "report", "--help"], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0
    assert "at any depth" in " ".join(p.stdout.split())


def test_log_x_plots_label_the_measured_values(tmp_path, monkeypatch):
    """Scaling / rank sweeps on a log axis: ticks at the world sizes measured, in plain numbers."""
    from gradcomp_analysis import plots
    figs = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out_dir, fname: figs.setdefault(fname, fig) and fname)
    t = pd.DataFrame({"model": ["m", "m", "m"], "world_size": pd.array([2, 4, 8], dtype="int64"),
                      "ssgd ms": [1.0, 2.0, 4.0]})
    plots.lines(t, "world_size", ["ssgd ms"], ["model"], "s.png", str(tmp_path), "Scaling", "ranks", "ms", logx=True)
    ax = figs["s.png"].axes[0]
    assert ax.get_xscale() == "log"
    assert [x.get_text() for x in ax.get_xticklabels()] == ["2", "4", "8"]


SAMPLES_HEADER = ("schema_version,run_id,case_id,kind,rank,iter,iter_s,fwd_s,bwd_s,pack_s,compress_s,feedback_s,"
                  "comm_s,decompress_s,exposed_s,bwd_sync_s,last_bucket_s,host_compress_s,host_decompress_s,"
                  "total_s,time_s,t_pure_s,t_cpu_s")


def test_samples_csv_beside_the_summaries_is_not_read_as_a_run(tmp_path):
    """samples.csv (docs/csv-schema.md: one row per case, rank and timed iteration, empty
    cells for other kinds' columns) sits in every run folder: the report reads the
    summaries as before, and a folder holding only samples.csv is no run."""
    write_run(tmp_path / "a", [row("ssgd", 0.2), row("acpsgd", 0.1)])
    lines = [SAMPLES_HEADER]
    for r in range(2):
        for i in range(3):
            lines.append(f"1,20260101-000000,00000000000000ab,e2e,{r},{i}," + ",".join(["0.1"] * 13) + ",,,,")
            lines.append(f"1,20260101-000000,00000000000000cd,micro-comm,{r},{i}," + "," * 14 + "0.001,,")
    for d in ("a", "only-samples"):
        (tmp_path / d).mkdir(exist_ok=True)
        (tmp_path / d / "samples.csv").write_text("\n".join(lines) + "\n")
    res = load_results(str(tmp_path))
    assert list(res.e2e["run"].unique()) == ["a"]
    assert len(res.e2e) == 2
    assert [os.path.basename(d) for d, _ in res.skipped] == ["only-samples"]
    out = tmp_path / "rep"
    write_report(str(tmp_path), str(out))
    assert (out / "report.md").exists()


# issue 30, item 5: a torn last row and an empty file are not data.
MICRO_COMM = """schema_version,run_id,case_id,collective,world_size,bytes,total_bytes,elements,iters,warmup,check,median_s,mean_s,min_s,max_s,p95_s,std_s,ci95_s,algbw_gbps,busbw_gbps,t_pure_s,t_cpu_s,t_overall_s,overlap_osu_pct,overlap_imb_pct
1,20261126-044237,cf071331583a25c6,allreduce,2,4,4,1,5,100,off,8.01e-7,7.81e-7,7.21e-7,8.11e-7,8.09e-7,3.67e-8,4.55e-8,0.0049,0.0049,,,,,
1,20261126-044237,1037b59823d2ed06,allreduce,2,65536,65536,16384,5,20,off,0.0000437,0.0000437,0.0000435,0.0000440,0.0000439,2.15e-7,2.67e-7,1.499,1.499,,,,,
1,20261126-044237,32cbf4dbd3f08f75,allgather,2,4,8,1,5,100,off,8.01e-7,7.83e-7,7.11e-7,8.02e-7,8.01e-7,4.03e-8,5.01e-8,0.0099,0.0049,,,,,
"""
# The 64KiB all-gather row, cut mid-field in median_s (9.234e-6 written as "0.0000092"
# ... then nothing): read as data it would be a median of 0 us, or a wrong one.
TORN = "1,20261126-044237,7d6b18fddf10707f,allgather,2,65536,131072,16384,5,20,off,0.0"


def report_cli(*args):
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    return subprocess.run([sys.executable, "-m", "gradcomp_analysis", "report", *map(str, args)],
                          capture_output=True, text=True, env=env)


def test_a_torn_last_row_is_left_out_with_a_warning(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "micro_comm.csv").write_text(MICRO_COMM + TORN)
    p = report_cli(run, "--out", tmp_path / "rep")
    assert p.returncode == 0, p.stderr
    assert "warning" in p.stderr and "partial last row" in p.stderr and "micro_comm.csv" in p.stderr, p.stderr
    t = pd.read_csv(tmp_path / "rep" / "micro_comm_np2.csv")
    # The complete rows are there, the torn one is not: no 64KiB all-gather number at all.
    assert t.loc[t["size"] == "4B", "allgather median_us"].iloc[0] == pytest.approx(0.801)
    assert t.loc[t["size"] == "64KiB", "allreduce median_us"].iloc[0] == pytest.approx(43.7)
    assert t.loc[t["size"] == "64KiB", "allgather median_us"].isna().all(), t.to_string()
    assert "partial last row" in (tmp_path / "rep" / "report.md").read_text()
    # The file itself is left as it is (--resume cuts it, the report only reads).
    assert (run / "micro_comm.csv").read_text().endswith(TORN)


def test_a_row_cut_exactly_before_its_newline_is_left_out_too(tmp_path):
    """All fields there but no newline: the write did not finish (as --resume judges)."""
    run = tmp_path / "run"
    run.mkdir()
    full = TORN.replace(",0.0", ",9.234e-6,9.26e-6,9.19e-6,9.35e-6,9.34e-6,6.5e-8,8.1e-8,14.19,7.09,,,,,")
    (run / "micro_comm.csv").write_text(MICRO_COMM + full)
    res = load_results(str(run))
    assert len(res.micro_comm) == 3
    assert not ((res.micro_comm.collective == "allgather") & (res.micro_comm.bytes == 65536)).any()


def test_an_empty_csv_is_no_rows_and_the_other_runs_are_reported(tmp_path):
    """A run stopped before its first row leaves 0-byte CSV files (no header): the sweep's
    other runs are reported, that run is named as skipped; exit 0."""
    write_run(tmp_path / "np2", [row("ssgd", 0.2, world_size=2)])
    (tmp_path / "np4").mkdir()
    (tmp_path / "np4" / "e2e.csv").write_text("")
    (tmp_path / "np4" / "micro_comm.csv").write_text("")
    p = report_cli(tmp_path, "--out", tmp_path / "rep")
    assert p.returncode == 0, p.stderr
    assert "skipped" in p.stderr and "np4" in p.stderr and "no rows" in p.stderr, p.stderr
    res = load_results(str(tmp_path))
    assert list(res.e2e["run"].unique()) == ["np2"]
    # A file whose only line is a header cut mid-way is no rows too.
    (tmp_path / "np4" / "e2e.csv").write_text("schema_version,run_id,ca")
    res = load_results(str(tmp_path))
    assert list(res.e2e["run"].unique()) == ["np2"]


def test_a_damaged_row_inside_the_file_is_refused_not_read(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = MICRO_COMM.splitlines()
    lines[2] = lines[2][:60]  # a short row in the middle: a file edited by hand or two writers
    (run / "micro_comm.csv").write_text("\n".join(lines) + "\n")
    p = report_cli(run, "--out", tmp_path / "rep")
    assert p.returncode == 2
    assert "micro_comm.csv: line 3 has" in p.stderr, p.stderr


def test_files_from_before_time_dilation_read_as_undilated(tmp_path):
    """issue 34: e2e.csv / micro_comm.csv / micro.csv gained a `time_dilation` column (schema
    version unchanged); a recorded run from before it (tests/data) reads with 1, a dilated
    run keeps its own K."""
    from gradcomp_analysis.io import load_csv
    here = os.path.dirname(os.path.abspath(__file__))
    old = os.path.join(here, "..", "..", "tests", "data", "sim-accuracy", "zen3-epyc-2vcpu", "np2")
    df = load_csv(old, "e2e.csv")
    assert df is not None and len(df) > 0
    assert "time_dilation" in df.columns and set(df["time_dilation"]) == {1}
    d = str(tmp_path / "dilated")
    os.makedirs(d)
    pd.DataFrame([{"schema_version": 1, "collective": "allreduce", "world_size": 2, "bytes": 4,
                   "median_s": 1e-5, "busbw_gbps": 0.1, "time_dilation": 4}]).to_csv(
        os.path.join(d, "micro_comm.csv"), index=False)
    assert list(load_csv(d, "micro_comm.csv")["time_dilation"]) == [4]
