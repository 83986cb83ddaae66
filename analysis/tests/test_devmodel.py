"""Measured GPU profiles (`python -m gradcomp_analysis gpu-profile`) and the device model
table (`device-model`), on hand-made runs with exact expected medians and spreads."""

import os

import pytest

import profile_compress as pc
from gradcomp_analysis import devmodel as D
from gradcomp_analysis.__main__ import main
from gradcomp_analysis.io import ReportError

META = [("device", "Test GPU"), ("torch", "9.9"), ("cuda", "99"), ("date", "2026-11-26T00:00:00Z"),
        ("iters", 30), ("warmup", 5), ("density", 0.001), ("rank", 4)]


def write_run(d, scale, drop=None, groups=None, kernels=True):
    """One gpu_profile.sh folder: every file of every group (or of `groups`), times x `scale`."""
    os.makedirs(d, exist_ok=True)
    for group, files in D.GROUPS.items():
        if groups is not None and group not in groups:
            continue
        for name in files:
            rank = 32 if "r32" in name else 4
            ws = int(name.split("ws")[1].split("-")[0].split(".")[0])
            rows = [("copy", "copy", 0, 0, 1, 1024, ws, 1e-5 * scale)]
            if rank == 4:
                rows.append(("topk", "compress", 0, 0, 64, 147, ws, 1e-4 * scale))
                rows.append(("ssgd", "compress", 0, 0, 64, 147, ws, 2e-5 * scale))
            rows.append(("powersgd", "compress", 0, 0, 64, 147, ws, (3e-5 if rank == 4 else 9e-5) * scale))
            if drop and drop == (name, rows[-1][0]):
                rows.pop()
            meta = [(k, v) for k, v in META if k != "rank"] + [("rank", rank)]
            pc.write_profile(os.path.join(d, name), rows, meta)
    if not kernels:
        return
    with open(os.path.join(d, D.KERNELS), "w") as f:
        f.write("# device: Test GPU\n# iters: 30\n# warmup: 5\n")
        f.write(",".join(D.KERNEL_KEY + ["time_s"]) + "\n")
        f.write(f"topk,torch.topk,4096,1,4096,0,1,1,{2e-5 * scale!r}\n")


def test_runs_merge_into_median_profiles_with_their_spread(tmp_path):
    runs = []
    for i, scale in enumerate([1.0, 1.5, 3.0]):
        runs.append(str(tmp_path / f"rep{i}"))
        write_run(runs[-1], scale)
    out = tmp_path / "merged"
    text = D.merge_repeats(runs, str(out), "abc1234")
    meta, rows = pc.read_profile(str(out / "profile-r4.csv"))
    t = {(r[0], r[6]): r[7] for r in rows}
    # Median of 1, 1.5 and 3 times the base: 1.5x.
    assert t[("topk", 16)] == pytest.approx(1.5e-4)
    assert t[("powersgd", 8)] == pytest.approx(4.5e-5)
    # The 16-worker copy row is in two files per run (ws16-a, ws16-b): one row, the median.
    assert sum(1 for r in rows if r[0] == "copy" and r[6] == 16) == 1
    assert meta["gradcomp_revision"] == "abc1234" and meta["rank"] == "4" and meta["device"] == "Test GPU"
    # Rank 32: its own powersgd rows, the others borrowed from rank 4 (not its copy rows).
    meta32, rows32 = pc.read_profile(str(out / "profile-r32.csv"))
    assert meta32["rank"] == "32" and "ssgd" in meta32["borrowed"] and "topk" in meta32["borrowed"]
    p = [r for r in rows32 if r[0] == "powersgd"]
    assert len(p) == 1 and p[0][7] == pytest.approx(1.35e-4)
    assert {r[6] for r in rows32 if r[0] == "copy"} == {32}
    # Spread: 3 / 1 for every row.
    with open(out / "spread.csv") as f:
        spreads = [float(line.rsplit(",", 1)[1]) for line in list(f)[1:]]
    assert spreads and all(s == pytest.approx(3.0) for s in spreads)
    assert "profile-r4.csv" in text and "3.000" in text
    with open(out / "kernels.csv") as f:
        last = list(f)[-1].strip().split(",")
    assert float(last[-2]) == pytest.approx(3e-5) and float(last[-1]) == pytest.approx(3.0)


def test_a_row_missing_from_one_run_or_one_run_only_is_refused(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    write_run(a, 1.0)
    write_run(b, 1.0, drop=("profile-ws8.csv", "powersgd"))
    with pytest.raises(ReportError, match="not in every run"):
        D.merge_repeats([a, b], str(tmp_path / "out"), "r")
    with pytest.raises(ReportError, match="two or more runs"):
        D.merge_repeats([a], str(tmp_path / "out"), "r")
    assert main(["gpu-profile", a, "--out", str(tmp_path / "o"), "--revision", "r"]) == 2


def test_runs_of_a_steps_subset_merge_what_they_hold(tmp_path):
    """scripts/gpu_profile.sh with STEPS='^profile-sketch': the sketch group alone, no
    kernels.csv; a group or kernels.csv that some runs hold and others lack is refused."""
    runs = [str(tmp_path / f"rep{i}") for i in range(3)]
    for d, scale in zip(runs, [1.0, 2.0, 4.0]):
        write_run(d, scale, groups={"profile-sketch.csv"}, kernels=False)
    out = tmp_path / "merged"
    D.merge_repeats(runs, str(out), "r")
    assert sorted(os.listdir(out)) == ["profile-sketch.csv", "spread.csv"]
    meta, rows = pc.read_profile(str(out / "profile-sketch.csv"))
    assert {r[6] for r in rows if r[0] == "topk"} == {8, 16, 32, 64}
    assert [r[7] for r in rows if r[0] == "topk" and r[6] == 32] == [pytest.approx(2e-4)]
    write_run(runs[0], 1.0, groups={"profile-r32.csv"}, kernels=False)
    with pytest.raises(ReportError, match="missing"):
        D.merge_repeats(runs, str(tmp_path / "o2"), "r")
    lone = [str(tmp_path / f"k{i}") for i in range(2)]
    write_run(lone[0], 1.0, groups={"profile-sketch.csv"})
    write_run(lone[1], 1.0, groups={"profile-sketch.csv"}, kernels=False)
    with pytest.raises(ReportError, match="every run or none"):
        D.merge_repeats(lone, str(tmp_path / "o3"), "r")
    empty = [str(tmp_path / "e0"), str(tmp_path / "e1")]
    for d in empty:
        os.makedirs(d)
    with pytest.raises(ReportError, match="no profile"):
        D.merge_repeats(empty, str(tmp_path / "o4"), "r")


def test_family_table_reads_gradcomp_devcost_rows(tmp_path):
    path = tmp_path / "priced.csv"
    with open(path, "w") as f:
        f.write("method,stage,round,phase,rows,cols,world_size,measured_s,model_s,model_over_measured,launches,"
                "model_bytes,kernels,device\n")
        f.write("topk,compress,0,0,1,1000000,16,2e-4,1e-4,0.5,8,1,k,h200\n")
        f.write("topk,compress,0,0,1,1000,16,1e-4,1e-4,1.0,8,1,k,h200\n")
        f.write("topk,decompress,0,0,1,1000,16,1e-5,1e-4,10.0,66,1,k,h200\n")
    table = D.family_table(str(path))
    top = [line for line in table.splitlines() if line.startswith("| top-k select")][0]
    assert "| 2 |" in top and "0.75 (0.50 .. 1.00)" in top
    assert "10.00 (10.00 .. 10.00)" in [line for line in table.splitlines() if "scatter" in line][0]
    # --min-elems keeps the large tensor only.
    big = D.family_table(str(path), min_elems=10_000)
    assert "0.50 (0.50 .. 0.50)" in big and "scatter" not in big
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ReportError, match="gradcomp devcost"):
        D.family_table(str(bad))
