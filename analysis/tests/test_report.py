"""Report tests on CSV written by the real binary in this test run (make test builds it).

Three small runs (analysis/tests/configs/): the paper-small config at 2 ranks labelled
network "eth", and a scaling config at 1 rank ("eth") and 2 ranks ("ib"), so that every
paper table has rows. About 15 s on 2 cores."""

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from gradcomp_analysis.report import ReportError, write_report

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "target", "release", "gradcomp")
CONFIGS = os.path.join(os.path.dirname(__file__), "configs")

PAPER_TABLES = ["acpsgd_main", "acpsgd_main_wide", "acpsgd_speedup_summary", "acpsgd_ablation", "acpsgd_buffer_sweep",
                "acpsgd_rank_sweep", "acpsgd_scaling", "acpsgd_network", "dgc_ratio", "omgs", "marsit",
                "sketch_fusion", "sketch_scaling", "sketch_scalability"]
MICRO_TABLES = ["micro_comm_np2", "overlap_np2", "micro_compress", "micro", "e2e_resnet20_np2", "e2e_phases",
                "micro_compress_acpsgd_vs_powersgd", "micro_acpsgd_vs_powersgd"]
PLOTS = ["acpsgd_main.png", "acpsgd_buffer_sweep.png", "acpsgd_rank_sweep.png", "acpsgd_scaling.png", "dgc_ratio.png",
         "omgs.png", "marsit.png", "sketch_fusion.png", "sketch_scaling.png", "micro_comm_np2.png",
         "micro_compress_gbps.png", "micro_phases.png", "e2e_resnet20_np2_phases.png"]


def mpirun(np_, args):
    launcher = os.environ.get("GRADCOMP_MPIRUN", "mpirun")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("SLURM_NTASKS", None)
    ver = subprocess.run([launcher, "--version"], capture_output=True, text=True)
    extra = ["--oversubscribe", "--bind-to", "none"] if "Open MPI" in ver.stdout + ver.stderr else []
    return subprocess.run([launcher, *extra, "-np", str(np_), BIN, *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    if not os.path.exists(BIN):
        pytest.fail(f"{BIN} missing: run `cargo build --release` first (make test does)")
    root = tmp_path_factory.mktemp("run") / "sweep"
    for sub, np_, cfg, net in [("np2", 2, "paper-small.toml", "eth"), ("np1", 1, "paper-small-scaling.toml", "eth"),
                               ("np2-ib", 2, "paper-small-scaling.toml", "ib")]:
        out = root / sub
        p = mpirun(np_, ["run", os.path.join(CONFIGS, cfg), "--quiet", "--out", str(out)])
        assert p.returncode == 0, p.stderr
        (out / "network.txt").write_text(net + "\n")
    return str(root)


@pytest.fixture(scope="module")
def results(sweep):
    """One run (2 ranks): micro sections and every single-run paper table."""
    return os.path.join(sweep, "np2")


def test_simulator_accuracy_section(tmp_path):
    """`simulate --compare` output in RUN/sim becomes a report section with the CSV's numbers."""
    run = tmp_path / "run"
    p = mpirun(2, ["run", os.path.join(CONFIGS, "sim-small.toml"), "--quiet", "--out", str(run)])
    assert p.returncode == 0, p.stderr
    p = subprocess.run([BIN, "fit", str(run)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    # No accuracy bound: this checks the plumbing, also on a machine loaded by other jobs (at
    # a load average of 6 on 2 cores a case once measured more than twice its simulated
    # time, and one noisy micro point can price a collective hundreds of times too slow);
    # accuracy is judged on recorded runs (make sim-accuracy, tests/sim_corpus.rs). Such a
    # loaded calibration is refused by default (src/sim/calibrate/trust.rs): priced here anyway.
    p = subprocess.run([BIN, "simulate", "--fits", str(run), "--compare", str(run / "e2e.csv"), "--tolerance", "1e9",
                        "--untrusted-fits", "--out", str(run / "sim")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    path = write_report(str(run), str(tmp_path / "rep"))
    rep = open(path).read()
    assert "## Simulator accuracy" in rep and "sim_accuracy.png" in rep
    d = os.path.dirname(path)
    assert os.path.getsize(os.path.join(d, "sim_accuracy.png")) > 0
    t = pd.read_csv(os.path.join(d, "sim_accuracy.csv"))
    raw = pd.read_csv(run / "sim" / "sim_vs_measured.csv")
    e2e = pd.read_csv(run / "e2e.csv")
    assert len(t) == len(raw) > 0
    # The run the host model was calibrated on: each method priced by the model calibrated
    # without it (leave one method out), so every case is out of sample.
    assert set(t["role"]) == {"validation"}
    assert set(t["verdict"]) <= {"within", "outside", "too-noisy", "ranks-exceed-cores"}
    assert sorted(t["simulated ms"]) == pytest.approx(sorted(raw["simulated_iter_s"] * 1e3))
    # Measured = the e2e median of the case (one row per case here).
    r = raw.iloc[0]
    model, method, fusion, pipe = r["case"].split("/")[:4]
    m = e2e[(e2e.model == model) & (e2e.method == method) & (e2e.fusion.astype(str) == fusion)
            & (e2e.pipelining == pipe.split("=")[1])]
    assert r["measured_iter_s"] == pytest.approx(m["iter_s"].median())
    # fits.csv carries the host model calibrated on every method's rows, and one per method
    # left out; the report shows it beside the comparison.
    fits = pd.read_csv(run / "fits.csv")
    host = fits[fits.kind == "host"]
    assert {"start", "sync-pipelining-off", "sync-pipelining-on"} <= set(host["name"])
    assert {"-", "without ssgd", "without topk", "without signsgd"} <= set(host["phase"])
    assert os.path.exists(os.path.join(d, "sim_host_calibration.csv"))


def test_report_has_every_table_and_plot(results):
    path = write_report(results)
    rep = open(path).read()
    d = os.path.dirname(path)
    assert "## Collectives" in rep
    assert "## Compression kernels" in rep and "## One tensor through MPI" in rep and "## Training iterations" in rep
    e2e = pd.read_csv(os.path.join(d, "e2e_resnet20_np2.csv"))
    assert "single/on ms" in e2e.columns and "single/on speedup" in e2e.columns
    for f in ["micro_comm_np2.csv", "overlap_np2.csv", "micro_comm_np2.png", "micro_compress.csv", "micro.csv", "micro_phases.png"]:
        assert os.path.getsize(os.path.join(d, f)) > 0, f
        assert f in rep or f.endswith(".csv")
    t = pd.read_csv(os.path.join(d, "micro_comm_np2.csv"))
    raw = pd.read_csv(os.path.join(results, "micro_comm.csv"))
    # Every table number is the CSV's: the 4-byte all-reduce median in microseconds.
    want = raw[(raw.collective == "allreduce") & (raw.bytes == 4)].median_s.iloc[0] * 1e6
    got = t.loc[t["size"] == "4B", "allreduce median_us"].iloc[0]
    assert got == pytest.approx(want)
    # Its 95% interval beside it (issue 20 item 1).
    ci = raw[(raw.collective == "allreduce") & (raw.bytes == 4)].ci95_s.iloc[0] * 1e6
    assert t.loc[t["size"] == "4B", "allreduce median_us ±"].iloc[0] == pytest.approx(ci)
    # A single run has no scaling / network rows: the report names the config instead.
    m = json.load(open(os.path.join(d, "manifest.json")))
    assert set(m["missing"]) == {"acpsgd_scaling", "acpsgd_network", "sketch_scaling"}
    assert "bench-configs/acpsgd-scaling.toml" in rep and "slurm/submit-acpsgd-scaling.sh" in rep
    for name in ["acpsgd_main", "acpsgd_ablation", "acpsgd_buffer_sweep", "acpsgd_rank_sweep", "dgc_ratio", "omgs",
                 "marsit", "sketch_fusion"]:
        assert name in m["tables"], name


def test_acpsgd_vs_powersgd_is_the_csv(results):
    """ACP-SGD's per-step table: one row per compressed shape, numbers from the CSVs."""
    d = os.path.dirname(write_report(results))
    for table, csv in [("micro_compress_acpsgd_vs_powersgd", "micro_compress.csv"),
                       ("micro_acpsgd_vs_powersgd", "micro.csv")]:
        t = pd.read_csv(os.path.join(d, table + ".csv"))
        raw = pd.read_csv(os.path.join(results, csv))
        assert len(t) == 1 and (t.rows.iloc[0], t.cols.iloc[0]) == (64, 48), table  # "101" is raw
        row = lambda m: raw[(raw.method == m) & (raw.rows == 64)].iloc[0]
        p, a = row("powersgd"), row("acpsgd")
        assert t.acpsgd_step_ms.iloc[0] == pytest.approx(a.total_s * 1e3)
        assert t.time_ratio.iloc[0] == pytest.approx(a.total_s / p.total_s)
        assert t["acpsgd_step_ms ±"].iloc[0] == pytest.approx(a.total_ci95_s * 1e3)
        assert t["acpsgd vs powersgd"].iloc[0] in ("faster", "slower", "≈ not significant")
        # One factor per step (P: 64 x r, Q: 48 x r, alternating; mean over the timed steps)
        # against both: about half.
        assert t.wire_ratio.iloc[0] == pytest.approx(a.wire_bytes / p.wire_bytes)
        assert 0.4 < t.wire_ratio.iloc[0] < 0.6
        assert (t.powersgd_rounds.iloc[0], t.acpsgd_rounds.iloc[0]) == (2, 1)


def test_sweep_report_every_table_and_plot_non_empty(sweep, tmp_path):
    out = tmp_path / "rep"
    path = write_report(sweep, str(out), latex=True)
    rep = open(path).read()
    m = json.load(open(out / "manifest.json"))
    assert m["missing"] == {}, m["missing"]
    assert sorted(m["runs"]) == ["np1", "np2", "np2-ib"]
    for name in PAPER_TABLES + MICRO_TABLES:
        assert name in m["tables"], name
        for ext in ("csv", "md", "tex"):
            assert os.path.getsize(out / f"{name}.{ext}") > 0, f"{name}.{ext}"
        assert len(pd.read_csv(out / f"{name}.csv")) > 0, name
        assert f"`{name}`" in rep
    for f in PLOTS:
        assert f in m["plots"], f
        assert os.path.getsize(out / f) > 1000, f
        assert f"![{f}]({f})" in rep
    assert "(published)" in rep


def test_sweep_numbers_come_from_the_csv(sweep, tmp_path):
    out = tmp_path / "rep"
    write_report(sweep, str(out))
    raw = pd.read_csv(os.path.join(sweep, "np2", "e2e.csv"))
    own = raw[raw.collective == raw.aggregation]
    main = pd.read_csv(out / "acpsgd_main.csv")
    r = main[(main.world_size == 2) & (main.network == "eth") & (main.method == "acpsgd")].iloc[0]
    best = lambda m: own[(own.method == m) & ((own["rank"] == 4) | ~own.method.isin(["powersgd", "acpsgd"]))].iter_s.min()  # noqa: E731
    assert r.iter_ms == pytest.approx(best("acpsgd") * 1e3)
    assert r["speedup vs ssgd"] == pytest.approx(best("ssgd") / best("acpsgd"))
    # Marsit against S-SGD over the same ring (like with like) and over MPI's all-reduce.
    ms = pd.read_csv(out / "marsit.csv")
    ms = ms[(ms.network == "eth") & (ms.world_size == 2)].set_index(["method", "collective"])
    ring = raw[(raw.method == "ssgd") & (raw.collective == "ring")].iter_s.min()
    mars = own[own.method == "marsit"].iter_s.min()
    assert ms.loc[("ssgd", "ring"), "iter_ms"] == pytest.approx(ring * 1e3)
    assert ms.loc[("marsit", "ring"), "time reduction vs ssgd ring %"] == pytest.approx(100 * (1 - mars / ring))
    assert ("ssgd", "allreduce") in ms.index
    dgc = pd.read_csv(out / "dgc_ratio.csv")
    g = raw[raw.method == "dgc"].iloc[0]
    r = dgc[dgc.model == "resnet20"].iloc[0]
    assert r.ratio == pytest.approx(g.dense_bytes / g.wire_bytes)
    assert dgc[dgc["model (paper)"] == "ResNet-50"].iloc[0]["ratio (published)"] == 277
    scaling = pd.read_csv(out / "acpsgd_scaling.csv")
    assert sorted(scaling[scaling.network == "eth"].world_size) == [1, 2]
    net = pd.read_csv(out / "acpsgd_network.csv")
    assert sorted(net.network) == ["eth", "ib"]


def test_cli_entry_point(sweep, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "analysis"))
    p = subprocess.run([sys.executable, "-m", "gradcomp_analysis", "report", os.path.join(sweep, "np1"),
                        os.path.join(sweep, "np2-ib"), "--out", str(tmp_path / "cli")],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(tmp_path / "cli" / "report.md")
    assert os.path.getsize(tmp_path / "cli" / "report.md") > 0


def test_unknown_schema_version_is_refused(results, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(results, bad)
    df = pd.read_csv(bad / "micro_comm.csv")
    df["schema_version"] = 99
    df.to_csv(bad / "micro_comm.csv", index=False)
    with pytest.raises(ReportError, match="schema_version"):
        write_report(str(bad))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "analysis"))
    p = subprocess.run([sys.executable, "-m", "gradcomp_analysis", "report", str(bad)], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 2
    assert "micro_comm.csv: schema_version [99] is unknown" in p.stderr


def test_empty_directory_is_refused(tmp_path):
    with pytest.raises(ReportError, match="no gradcomp CSV"):
        write_report(str(tmp_path))


def test_run_then_converge_into_one_folder_keeps_both_records(results, tmp_path):
    """`make bench` writes `gradcomp run` and `gradcomp converge` into one --out: run.json stays the
    benchmark's (`run`), converge's record is converge.run.json beside it (it replaced run.json, kept as
    run.<run_id>.json, before issue 53 item 6), and the report's first run line names the benchmark run,
    the convergence check on a line of its own under it; a second converge keeps the first's record."""
    both = tmp_path / "both"
    shutil.copytree(results, both)
    first = json.loads((both / "run.json").read_text())
    args = ["converge", "--methods", "ssgd,topk", "--steps", "4", "--eval-every", "2", "--quiet", "--out", str(both)]
    p = mpirun(2, args)
    assert p.returncode == 0, p.stderr
    assert json.loads((both / "run.json").read_text()) == first
    assert not list(both.glob("run.*.json"))
    conv = json.loads((both / "converge.run.json").read_text())
    assert conv["command_line"][1] == "converge" and conv["status"] == "ok" and conv["previous_run"] is None
    text = open(write_report(str(both), str(tmp_path / "rep"))).read()
    runs = [line for line in text.splitlines() if line.startswith("- run ")]
    assert len(runs) == 1 and f"(`{first['run_id']}`, `run`)" in runs[0], runs
    after = text.splitlines()[text.splitlines().index(runs[0]) + 1]
    assert after.startswith(f"  - convergence check into it (`{conv['run_id']}`, `converge`)"), after
    assert "earlier invocation" not in text
    assert "## Convergence" in text
    # converge --resume into it again: its own earlier record is kept, run.json still untouched.
    p = mpirun(2, args + ["--resume"])
    assert p.returncode == 0, p.stderr
    assert json.loads((both / "run.json").read_text()) == first
    kept = both / f"converge.run.{conv['run_id']}.json"
    again = json.loads((both / "converge.run.json").read_text())
    assert json.loads(kept.read_text())["run_id"] == conv["run_id"]
    assert again["previous_run"] == kept.name and again["resumed_from"] == conv["run_id"]
    text = open(write_report(str(both), str(tmp_path / "rep2"))).read()
    assert f"  - convergence check into it (`{again['run_id']}`, `converge`)" in text
    assert f"  - earlier convergence check into it (`{conv['run_id']}`, `converge`)" in text


def test_a_simulate_folder_is_reported(tmp_path):
    """`report DIR` on a `gradcomp simulate --out DIR` folder: the best configuration per model,
    world size, network and method with its speedup over S-SGD, from sim.csv."""
    out = tmp_path / "sim"
    p = subprocess.run([BIN, "simulate", "--model", "resnet20", "--methods", "ssgd,topk", "--world-sizes", "4,8",
                        "--network", "1gbe,100gb-ib", "--fusion", "none,25MiB", "--out", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    # simulate prints the same summary on stdout.
    assert "best configuration" in p.stdout and "vs S-SGD" in p.stdout
    assert len([x for x in p.stdout.splitlines() if x.startswith("resnet20")]) == 2 * 2 * 2
    path = write_report(str(out))
    rep = open(path).read()
    assert "## What-if (`gradcomp simulate`)" in rep and "simulated_best.png" in rep
    t = pd.read_csv(os.path.join(os.path.dirname(path), "simulated_best.csv"))
    sim = pd.read_csv(out / "sim.csv")
    assert len(t) == 2 * 2 * 2 and set(t["network"]) == {"1gbe", "100gb-ib"}
    for _, r in t.iterrows():
        g = sim[(sim["network"] == r["network"]) & (sim["world_size"] == r["ranks"])]
        best = g.groupby("method")["iter_s"].min()
        assert r["iter ms"] == pytest.approx(best[r["method"]] * 1e3)
        assert r["vs ssgd"] == pytest.approx(best["ssgd"] / best[r["method"]])
