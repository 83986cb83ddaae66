"""Tests written for the surviving mutants of devmodel.py (issue 49; docs/mutation.md): `_spread`
and `spread_summary` by hand; merge_repeats of three hand-made runs with every output file read
whole, its refusals word for word, the readers' refusals; family_table of a hand-made
`gradcomp devcost` CSV line by line. Every expected value is worked out by hand in the comments."""

import errno
import io
import math
import os

import pandas as pd
import pytest

from gradcomp_analysis import devmodel as D
from gradcomp_analysis.io import ReportError


def test_spread_by_hand():
    assert D._spread([2.0, 3.0]) == 1.5
    assert D._spread([0.5, 1.0, 2.0]) == 4.0
    assert D._spread([1.0]) == 1.0
    assert D._spread([0.0, 0.0]) == 1.0
    assert D._spread([0.0, 2.0]) == math.inf


def test_spread_summary_by_hand():
    rows = [("a.csv", "k1", 1.0), ("a.csv", "k2", 1.5), ("a.csv", "k3", 1.2), ("b.csv", "k", 2.0)]
    rows += [("c.csv", f"k{i}", float(i)) for i in range(20, 0, -1)]
    #          name (18 wide)      rows (4)  median (13)           95th (8)        max (5)
    assert D.spread_summary(rows).split("\n") == [
        "file               rows  median spread  95th pct    max",
        "a.csv" + " " * 13 + " " + "   3" + "  " + "        1.200" + "  " + "   1.500" + "  " + " 1.50",
        "b.csv" + " " * 13 + " " + "   1" + "  " + "        2.000" + "  " + "   2.000" + "  " + " 2.00",
        # 20 rows 1..20: median 10.5, the 95th percentile the 19th smallest (ceil(0.95 x 20) = 19)
        "c.csv" + " " * 13 + " " + "  20" + "  " + "       10.500" + "  " + "  19.000" + "  " + "20.00",
        "spread = largest / smallest of a row's medians over the runs",
        "",
    ]


# ---------------------------------------------------------------------------------------
# merge_repeats of three hand-made runs, every output file read whole. The times are sums of
# powers of two, so that every median (of 3: the middle value; of 2: the mean) and spread
# (largest / smallest) is exact; each is worked out by hand beside its row.

HEADER = "method,stage,round,phase,rows,cols,world_size,time_s"
DATES = ["2026-11-26T01:00:00Z", "2026-11-26T02:00:00Z", "2026-11-26T03:00:00Z"]
# file -> [(row without time, (run 0, run 1, run 2 times))], in the order the files list them:
# decompress before compress, 16 workers before 8, topk and powersgd before ssgd and signsgd,
# so that the merged files' order (copy last, then gradcomp's method order, then the key) shows.
KEY = "64,147"
R4 = {
    "profile-ws16-a.csv": [
        ("copy,copy,0,0,1,1024,16", (0.25, 1.0, 0.5)),  # with ws16-b's: run medians 0.5 1.5 0.5
        (f"topk,decompress,0,0,{KEY},16", (2.0, 2.5, 4.0)),  # median 2.5, spread 4 / 2 = 2
        (f"topk,compress,0,0,{KEY},16", (1.0, 1.25, 1.0)),  # 1.0, 1.25
        (f"powersgd,compress,0,0,{KEY},16", (0.5, 0.5, 0.5)),  # 0.5, 1
        (f"ssgd,compress,0,0,{KEY},16", (0.125, 0.25, 0.1875)),  # 0.1875, 2
        (f"signsgd,compress,0,0,{KEY},16", (0.25, 0.5, 0.375)),  # 0.375, 2
    ],
    # The copy row again: each run's median is the mean of its two (0.25 + 0.75, 1 + 2, 0.5 +
    # 0.5, halved: 0.5, 1.5, 0.5), the row's the median of those (0.5), spread 1.5 / 0.5 = 3.
    "profile-ws16-b.csv": [("copy,copy,0,0,1,1024,16", (0.75, 2.0, 0.5))],
    "profile-ws8.csv": [
        (f"topk,compress,0,0,{KEY},8", (0.5, 0.75, 1.0)),  # 0.75, 2
        ("copy,copy,0,0,1,1024,8", (0.125, 0.125, 0.125)),  # 0.125, 1
    ],
    "profile-ws32.csv": [("copy,copy,0,0,1,1024,32", (0.25, 0.375, 0.5))],  # 0.375, 2
    "profile-ws64.csv": [("copy,copy,0,0,1,1024,64", (0.5, 0.5, 1.0))],  # 0.5, 2
}
R32 = {
    "profile-r32-ws32.csv": [
        (f"powersgd,compress,0,0,{KEY},32", (1.5, 3.0, 2.0)),  # 2.0, 2
        # the key of a rank-4 ssgd row: this group's own row (0.25) is kept, that one not borrowed
        (f"ssgd,compress,0,0,{KEY},16", (0.25, 0.25, 0.25)),  # 0.25, 1
        ("copy,copy,0,0,1,1024,32", (0.5, 0.25, 0.5)),  # 0.5, 2
    ],
}
SKETCH = {
    "profile-sketch-ws16.csv": [(f"sketch,compress,0,0,{KEY},16", (1.0, 1.5, 1.25))],  # 1.25, 1.5
    "profile-sketch-ws8.csv": [(f"sketch,compress,0,0,{KEY},8", (0.5, 0.5, 0.5))],  # 0.5, 1
    "profile-sketch-ws32.csv": [(f"sketch,compress,0,0,{KEY},32", (1.0, 1.0, 1.0))],  # 1.0, 1
    "profile-sketch-ws64.csv": [(f"sketch,compress,0,0,{KEY},64", (2.0, 2.5, 2.0))],  # 2.0, 1.25
}
KERNEL_HEADER = "family,variant,d,rows,cols,rank,workers,count,time_s"
KERNEL_ROWS = [
    ("topk,torch.topk,4096,1,4096,0,1,1", (0.5, 0.25, 1.0)),  # 0.5, 4
    ("qr,torch.linalg.qr,8192,64,128,4,1,1", (0.125, 0.125, 0.25)),  # 0.125, 2
]


def meta_lines(run, rank, iters=True, cuda=True):
    """A run's `# key: value` lines: provenance (the date names the run), parameters in
    another order than PARAM_DEFAULTS', and a key the merge does not keep."""
    lines = ["# device: Test GPU", "# torch: 9.9"] + (["# cuda: 99"] if cuda else [])
    lines += [f"# date: {DATES[run]}", "# host: node-a"]
    lines += ["# iters: 30", "# warmup: 5"] if iters else []
    lines += [f"# rank: {rank}", "# momentum: 0.9", "# density: 0.001"]
    return lines


def write_runs(root, groups=(R4, R32, SKETCH), kernels=True, n=3):
    runs = []
    for i in range(n):
        d = root / f"rep{i}"
        d.mkdir(parents=True)
        for g in groups:
            for name, rows in g.items():
                head = meta_lines(i, 32 if g is R32 else 4, iters=g is not SKETCH, cuda=g is not SKETCH)
                (d / name).write_text("\n".join(head + [HEADER] + [f"{r},{t[i]}" for r, t in rows]) + "\n")
        if kernels:
            head = ["# device: Test GPU", "# torch: 9.9", f"# date: {DATES[i]}", "# iters: 20", "# warmup: 3"]
            (d / "kernels.csv").write_text(
                "\n".join(head + [KERNEL_HEADER] + [f"{r},{t[i]!r}" for r, t in KERNEL_ROWS]) + "\n")
        runs.append(str(d))
    return runs


R4_FILES = "profile-ws16-a.csv profile-ws16-b.csv profile-ws8.csv profile-ws32.csv profile-ws64.csv"
SKETCH_FILES = "profile-sketch-ws16.csv profile-sketch-ws8.csv profile-sketch-ws32.csv profile-sketch-ws64.csv"
COMMAND = ("median of 3 runs of scripts/gpu_profile.sh (profile_compress.py --iters {} --warmup {}), merged by "
           "`python -m gradcomp_analysis gpu-profile`")
# The first run's provenance; the parameters in PARAM_DEFAULTS' order (density, rank, momentum).
PROFILE_R4 = f"""# device: Test GPU
# torch: 9.9
# cuda: 99
# date: {DATES[0]}
# command: {COMMAND.format(30, 5)}
# gradcomp_revision: abc1234
# files: {R4_FILES}
# density: 0.001
# rank: 4
# momentum: 0.9
{HEADER}
ssgd,compress,0,0,64,147,16,0.1875
signsgd,compress,0,0,64,147,16,0.375
topk,compress,0,0,64,147,8,0.75
topk,compress,0,0,64,147,16,1.0
topk,decompress,0,0,64,147,16,2.5
powersgd,compress,0,0,64,147,16,0.5
copy,copy,0,0,1,1024,8,0.125
copy,copy,0,0,1,1024,16,0.5
copy,copy,0,0,1,1024,32,0.375
copy,copy,0,0,1,1024,64,0.5
"""
# Rank 32: its own powersgd, ssgd and copy rows; rank 4's signsgd and topk rows borrowed (not
# its powersgd, copy, or the ssgd row whose key this group has).
PROFILE_R32 = f"""# device: Test GPU
# torch: 9.9
# cuda: 99
# date: {DATES[0]}
# command: {COMMAND.format(30, 5)}
# gradcomp_revision: abc1234
# files: profile-r32-ws32.csv
# borrowed: rows of signsgd, topk from profile-r4.csv (their times do not depend on the rank)
# density: 0.001
# rank: 32
# momentum: 0.9
{HEADER}
ssgd,compress,0,0,64,147,16,0.25
signsgd,compress,0,0,64,147,16,0.375
topk,compress,0,0,64,147,8,0.75
topk,compress,0,0,64,147,16,1.0
topk,decompress,0,0,64,147,16,2.5
powersgd,compress,0,0,64,147,32,2.0
copy,copy,0,0,1,1024,32,0.5
"""
# No iters or warmup in its files: '?'; no cuda: left out.
PROFILE_SKETCH = f"""# device: Test GPU
# torch: 9.9
# date: {DATES[0]}
# command: {COMMAND.format("?", "?")}
# gradcomp_revision: abc1234
# files: {SKETCH_FILES}
# density: 0.001
# rank: 4
# momentum: 0.9
{HEADER}
sketch,compress,0,0,64,147,8,0.5
sketch,compress,0,0,64,147,16,1.25
sketch,compress,0,0,64,147,32,1.0
sketch,compress,0,0,64,147,64,2.0
"""
KERNELS_CSV = f"""# device: Test GPU
# torch: 9.9
# date: {DATES[0]}
# command: median of 3 runs of analysis/profile_kernels.py --iters 20 --warmup 3 (scripts/gpu_profile.sh)
# gradcomp_revision: abc1234
{KERNEL_HEADER},spread
topk,torch.topk,4096,1,4096,0,1,1,0.5,4.0000
qr,torch.linalg.qr,8192,64,128,4,1,1,0.125,2.0000
"""
# In the order the rows were first read: file by file, row by row; each group, then kernels.
SPREAD_CSV = """file,row,spread
profile-r4.csv,copy/copy/0/0/1/1024/16,3.0000
profile-r4.csv,topk/decompress/0/0/64/147/16,2.0000
profile-r4.csv,topk/compress/0/0/64/147/16,1.2500
profile-r4.csv,powersgd/compress/0/0/64/147/16,1.0000
profile-r4.csv,ssgd/compress/0/0/64/147/16,2.0000
profile-r4.csv,signsgd/compress/0/0/64/147/16,2.0000
profile-r4.csv,topk/compress/0/0/64/147/8,2.0000
profile-r4.csv,copy/copy/0/0/1/1024/8,1.0000
profile-r4.csv,copy/copy/0/0/1/1024/32,2.0000
profile-r4.csv,copy/copy/0/0/1/1024/64,2.0000
profile-r32.csv,powersgd/compress/0/0/64/147/32,2.0000
profile-r32.csv,ssgd/compress/0/0/64/147/16,1.0000
profile-r32.csv,copy/copy/0/0/1/1024/32,2.0000
profile-sketch.csv,sketch/compress/0/0/64/147/16,1.5000
profile-sketch.csv,sketch/compress/0/0/64/147/8,1.0000
profile-sketch.csv,sketch/compress/0/0/64/147/32,1.0000
profile-sketch.csv,sketch/compress/0/0/64/147/64,1.2500
kernels.csv,topk/torch.topk/4096/1/4096/0/1/1,4.0000
kernels.csv,qr/torch.linalg.qr/8192/64/128/4/1/1,2.0000
"""
# Per file: r4's 10 spreads sorted 1 1 1.25 2 2 2 2 2 2 3 (median 2, 95th: the 10th, 3); r32's
# 1 2 2; sketch's 1 1 1.25 1.5 (median 1.125, 95th: the 4th); kernels' 2 4 (median 3).
SUMMARY = """file               rows  median spread  95th pct    max
profile-r4.csv       10          2.000     3.000   3.00
profile-r32.csv       3          2.000     2.000   2.00
profile-sketch.csv    4          1.125     1.500   1.50
kernels.csv           2          3.000     4.000   4.00
spread = largest / smallest of a row's medians over the runs
"""


def test_merge_repeats_of_three_runs_every_file_read_whole(tmp_path):
    runs = write_runs(tmp_path)
    out = tmp_path / "merged"
    assert D.merge_repeats(runs, str(out), "abc1234") == SUMMARY
    assert sorted(os.listdir(out)) == ["kernels.csv", "profile-r32.csv", "profile-r4.csv", "profile-sketch.csv",
                                       "spread.csv"]
    assert (out / "profile-r4.csv").read_text().splitlines() == PROFILE_R4.splitlines()
    assert (out / "profile-r32.csv").read_text().splitlines() == PROFILE_R32.splitlines()
    assert (out / "profile-sketch.csv").read_text().splitlines() == PROFILE_SKETCH.splitlines()
    assert (out / "kernels.csv").read_text().splitlines() == KERNELS_CSV.splitlines()
    assert (out / "spread.csv").read_text() == SPREAD_CSV


def test_rank_32_alone_borrows_nothing_and_kernels_without_iters_say_so(tmp_path):
    """Without the rank-4 group there is nothing to borrow: no `borrowed` line, the group's own
    rows only. kernels.csv files without iters or warmup: '?' in the command."""
    runs = write_runs(tmp_path, groups=(R32,), kernels=False, n=2)
    for i, d in enumerate(runs):
        (tmp_path / d / "kernels.csv").write_text(f"# device: Test GPU\n# date: {DATES[i]}\n{KERNEL_HEADER}\n"
                                                  f"topk,torch.topk,4096,1,4096,0,1,1,{0.5 * (i + 1)!r}\n")
    out = tmp_path / "merged"
    # r32's two runs: powersgd 1.5 and 3.0 (median 2.25, spread 2), ssgd 0.25 twice (1), copy 0.5 and
    # 0.25 (0.375, 2); kernels 0.5 and 1.0 (0.75, 2).
    assert D.merge_repeats(runs, str(out), "r") == (
        "file               rows  median spread  95th pct    max\n"
        "profile-r32.csv       3          2.000     2.000   2.00\n"
        "kernels.csv           1          2.000     2.000   2.00\n"
        "spread = largest / smallest of a row's medians over the runs\n")
    text = (out / "profile-r32.csv").read_text()
    assert "borrowed" not in text
    assert text.splitlines()[-4:] == [HEADER, "ssgd,compress,0,0,64,147,16,0.25", "powersgd,compress,0,0,64,147,32,2.25",
                                      "copy,copy,0,0,1,1024,32,0.375"]
    assert "# command: median of 2 runs of scripts/gpu_profile.sh (profile_compress.py --iters 30 --warmup 5)" in text
    assert (out / "kernels.csv").read_text().splitlines() == [
        "# device: Test GPU", f"# date: {DATES[0]}",
        "# command: median of 2 runs of analysis/profile_kernels.py --iters ? --warmup ? (scripts/gpu_profile.sh)",
        "# gradcomp_revision: r", KERNEL_HEADER + ",spread", "topk,torch.topk,4096,1,4096,0,1,1,0.75,2.0000"]


def refusal(runs, out, **kw):
    with pytest.raises(ReportError) as e:
        D.merge_repeats(runs, str(out), "r", **kw)
    assert not os.path.exists(os.path.join(str(out), "spread.csv"))
    return str(e.value)


def test_merge_repeats_refusals_word_for_word(tmp_path):
    runs = write_runs(tmp_path / "a")
    assert refusal(runs[:1], tmp_path / "o") == (
        "give two or more runs of scripts/gpu_profile.sh: a row's spread needs repeats")
    # A file of a group that one run lacks.
    os.remove(os.path.join(runs[1], "profile-ws8.csv"))
    assert refusal(runs, tmp_path / "o") == (
        f"{os.path.join(runs[1], 'profile-ws8.csv')}: missing (every run must hold "
        "profile-ws16-a.csv, profile-ws16-b.csv, profile-ws8.csv, profile-ws32.csv, profile-ws64.csv)")
    # A row in two runs of three.
    runs = write_runs(tmp_path / "b")
    path = os.path.join(runs[1], "profile-ws8.csv")
    with open(path) as f:
        lines = [line for line in f if not line.startswith("topk")]
    with open(path, "w") as f:
        f.writelines(lines)
    assert refusal(runs, tmp_path / "o") == (
        "profile-r4.csv: row ('topk', 'compress', 0, 0, 64, 147, 8) is not in every run (2 of 3)")
    # kernels.csv in two runs of three; a kernel row in two.
    runs = write_runs(tmp_path / "c")
    os.remove(os.path.join(runs[2], "kernels.csv"))
    assert refusal(runs, tmp_path / "o") == "kernels.csv: in 2 of 3 runs (every run or none)"
    runs = write_runs(tmp_path / "d")
    path = os.path.join(runs[0], "kernels.csv")
    with open(path) as f:
        lines = [line for line in f if not line.startswith("qr")]
    with open(path, "w") as f:
        f.writelines(lines)
    assert refusal(runs, tmp_path / "o") == (
        "kernels.csv: row ('qr', 'torch.linalg.qr', '8192', '64', '128', '4', '1', '1') is not in every run")
    # No group in any run: the runs and every file looked for named.
    empty = [str(tmp_path / "e0"), str(tmp_path / "e1")]
    for d in empty:
        os.makedirs(d)
    assert refusal(empty, tmp_path / "o") == (
        f"{empty[0]}, {empty[1]}: no profile of scripts/gpu_profile.sh in them ({R4_FILES.replace(' ', ', ')}, "
        f"profile-r32-ws32.csv, {SKETCH_FILES.replace(' ', ', ')})")


def test_every_file_is_read_before_a_run_is_found_to_lack_one(tmp_path):
    """A damaged profile or kernels.csv in a later run is named, not a file an earlier run lacks:
    every file is read first."""
    runs = write_runs(tmp_path / "a")
    os.remove(os.path.join(runs[0], "profile-ws8.csv"))
    bad = os.path.join(runs[1], "profile-sketch-ws64.csv")
    with open(bad, "a") as f:
        f.write("sketch,compress,x,0,64,147,16,1.0\n")
    assert refusal(runs, tmp_path / "o").startswith(f"{bad}: ")
    runs = write_runs(tmp_path / "b")
    os.remove(os.path.join(runs[0], "profile-ws8.csv"))
    bad = os.path.join(runs[2], "kernels.csv")
    with open(bad, "a") as f:
        f.write("qr,torch.linalg.qr,64,64,1,4,1,1,slow\n")
    assert refusal(runs, tmp_path / "o").startswith(f"{bad}: row 3, column time_s")


def test_read_profile_names_the_missing_column(tmp_path):
    path = tmp_path / "profile-ws8.csv"
    path.write_text("# rank: 4\nmethod,stage,round,phase,rows,cols,time_s\ntopk,compress,0,0,64,147,1.0\n")
    with pytest.raises(ReportError) as e:
        D._read_profile(str(path))
    assert str(e.value) == f"{path}: no column 'world_size' (not a profile scripts/gpu_profile.sh wrote)"


def test_read_kernels_refusals_name_the_file_and_row(tmp_path):
    path = tmp_path / "kernels.csv"
    # Row 2 is cut after `rows`: it lacks cols, rank, workers, count and time_s.
    path.write_text(f"# iters: 1\n{KERNEL_HEADER}\n"
                    "topk,torch.topk,4096,1,4096,0,1,1,0.5\n\ntopk,torch.topk,4096,1\n")
    with pytest.raises(ReportError) as e:
        D._read_kernels(str(path))
    assert str(e.value) == (f"{path}: row 2 lacks ['cols', 'rank', 'workers', 'count', 'time_s'] "
                            "(not a kernels.csv of analysis/profile_kernels.py)")
    path.write_text(f"{KERNEL_HEADER}\ntopk,torch.topk,4096,1,4096,0,1,1,0.5\ntopk,torch.topk,64,1,64,0,1,1,fast\n")
    with pytest.raises(ReportError) as e:
        D._read_kernels(str(path))
    assert str(e.value) == (f"{path}: row 2, column time_s: 'fast' is not a number "
                            "(a damaged row; rerun scripts/gpu_profile.sh)")
    path.write_text(f"# iters: 1\n{KERNEL_HEADER}\ntopk,torch.topk,4096,1,4096,0,1,1,5e-05\n")
    assert D._read_kernels(str(path)) == ({"iters": "1"}, [dict(zip(KERNEL_HEADER.split(","), [
        "topk", "torch.topk", "4096", "1", "4096", "0", "1", "1", "5e-05"]))])


def test_a_full_disk_names_the_gpu_profile(tmp_path, monkeypatch):
    runs = write_runs(tmp_path)

    def full(path, *a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    monkeypatch.setattr(D.pc, "write_profile", full)
    out = tmp_path / "merged"
    with pytest.raises(OSError) as e:
        D.merge_repeats(runs, str(out), "r")
    assert e.value.strerror == f"{os.strerror(errno.ENOSPC)} (no file of this GPU profile was written)"
    assert e.value.filename == str(out / "profile-r4.csv") and not out.exists()


# ---------------------------------------------------------------------------------------
# family_table of a hand-made `gradcomp devcost` CSV: exactly the columns it needs, rows that
# differ from a family's stage in one of method, stage, round or phase, a tensor of 999
# elements beside two of 1000, a zero measured time, and an empty cell in a row of no family.

DEVCOST = """method,stage,round,phase,rows,cols,measured_s,model_s,model_over_measured,device
topk,compress,0,0,1,1000,2e-4,1e-4,0.5,h200
topk,compress,0,0,10,100,1e-4,1e-4,1.0,h200
topk,compress,0,0,1,999,4e-4,1e-4,0.25,h200
topk,compress,0,1,1,1000,1.0,1.0,1.0,h200
topk,compress,1,0,1,1000,1.0,1.0,1.0,h200
topk,compress,0,0,1,2000,0,1e-4,inf,h200
topk,decompress,0,0,1,1000,1e-5,1e-4,10.0,h200
ssgd,compress,0,0,1,1000,0.25,0.5,2.0,h200
dgc,compress,0,0,1,1000,1e-4,,,h200
acpsgd,compress,0,0,1,1000,3e-5,6e-5,2.0,h200
acpsgd,compress,0,1,1,1000,5e-5,5e-5,1.0,h200
powersgd,compress,0,0,1,1000,2e-5,8e-5,4.0,h200
powersgd,compress,1,0,1,1000,1e-4,3e-5,0.3,h200
"""
TABLE_HEAD = ["| kernel family | method stages | tensors | measured, median | model, median | "
              "model / measured: median (min .. max) |", "|---|---|---|---|---|---|"]


def test_family_table_by_hand(tmp_path):
    path = tmp_path / "priced.csv"
    path.write_text(DEVCOST)
    # top-k select: the three topk compress r0 p0 rows with a measured time (2e-4, 1e-4, 4e-4 s:
    # median 200 us; model 100 us; ratios 0.5, 1, 0.25). acpsgd p0 and p1: measured 30 and 50 us
    # (40), model 60 and 50 (55), ratios 2 and 1 (1.5). powersgd r0 and r1: 20 and 100 us (60),
    # 80 and 30 (55), 4 and 0.3 (2.15). Families without a row (QR / Gram-Schmidt first) left out.
    assert D.family_table(str(path)).splitlines() == TABLE_HEAD + [
        "| top-k select | topk compress (error feedback add, |x|, torch.topk, gather, index_fill) | 3 | 200.0 us | "
        "100.0 us | 0.50 (0.25 .. 1.00) |",
        "| scatter / gather (top-k decompression) | topk decompress (model: OMGS-SGD's per-worker loop; measured: "
        "one index_add_ of all pieces) | 1 | 10.0 us | 100.0 us | 10.00 (10.00 .. 10.00) |",
        "| QR + GEMM projections | acpsgd compress, acpsgd compress p1 (ACP-SGD's step: QR, projection, residual) | 2 | "
        "40.0 us | 55.0 us | 1.50 (1.00 .. 2.00) |",
        "| GEMM projections | powersgd compress, powersgd compress r1 (P = M Q, Q = M^T P) | 2 | 60.0 us | 55.0 us | "
        "2.15 (0.30 .. 4.00) |",
        "| copy / division | ssgd compress, ssgd decompress (one element-wise kernel) | 1 | 250000.0 us | 500000.0 us | "
        "2.00 (2.00 .. 2.00) |",
    ]
    # (ssgd: 0.25 s and 0.5 s, in microseconds to the last digit.)
    # At least 1000 elements: the 999-element tensor left out, the two of exactly 1000 kept
    # (2e-4 and 1e-4: 150 us; ratios 0.5 and 1: 0.75).
    assert D.family_table(str(path), min_elems=1000).splitlines()[2] == (
        "| top-k select | topk compress (error feedback add, |x|, torch.topk, gather, index_fill) | 2 | 150.0 us | "
        "100.0 us | 0.75 (0.50 .. 1.00) |")
    # Above every tensor: the head alone.
    assert D.family_table(str(path), min_elems=2001) == "\n".join(TABLE_HEAD) + "\n"


def test_family_table_refusals_word_for_word(tmp_path):
    path = tmp_path / "priced.csv"

    def refused():
        with pytest.raises(ReportError) as e:
            D.family_table(str(path))
        return str(e.value)
    path.write_text("")
    with pytest.raises(pd.errors.EmptyDataError) as pandas_says:
        pd.read_csv(io.StringIO(""))
    assert refused() == f"{path}: not a CSV file ({str(pandas_says.value).strip()})"
    path.write_text('a,b\n1,"2\n')
    with pytest.raises(pd.errors.ParserError) as pandas_says:
        pd.read_csv(io.StringIO('a,b\n1,"2\n'))
    assert refused() == f"{path}: not a CSV file ({str(pandas_says.value).strip()})"
    path.write_text("method,stage,round,phase,rows,cols,measured_s,model_over_measured\ntopk,compress,0,0,1,1,1,1\n")
    assert refused() == f"{path}: not a `gradcomp devcost` CSV (columns ['device', 'model_s'] missing)"
    # Two damaged cells in `rows` (lines 3 and 4) and one in `cols` before them (line 2): the
    # columns are checked in their order (round, phase, rows, ...), the first bad line named.
    lines = DEVCOST.splitlines()
    lines[1] = lines[1].replace("topk,compress,0,0,1,1000,", "topk,compress,0,0,1,1e3x,")
    lines[2] = lines[2].replace("topk,compress,0,0,10,", "topk,compress,0,0,ten,")
    lines[3] = lines[3].replace("topk,compress,0,0,1,", "topk,compress,0,0,one,")
    path.write_text("\n".join(lines) + "\n")
    assert refused() == (f"{path}: line 3, column rows: 'ten' is not a number; a damaged row: correct or "
                         "remove that line")
