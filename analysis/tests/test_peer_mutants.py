"""Tests written for the surviving mutants of peer.py (issue 49; docs/mutation.md): the
peer_compare.md of test_peer's two-round fixture read line by line, every column of both
tables, the profile reader's comments and refusals, and which rounds are read. Every
expected number is worked out by hand from the fixture (test_peer.GRADCOMP / TORCH: 1000 x
1000 elements, probes 20 and 25 GB/s) in the comments, never read back from the code."""

import os

import pandas as pd
import pytest

from gradcomp_analysis import peer as P
from gradcomp_analysis.io import ReportError
from test_peer import write_fixture

# peer_compare.md of the fixture. dgc: steps 16 and 20 ms (median 18), PyTorch 0.1 + 0.06 and
# 0.2 + 0.12 s (160, 320; median 240); 4e6 B / 18 ms = 0.22 GB/s, / 240 ms = 0.017; 240 / 18 =
# 13.3x; probe median(20, 25) = 22.5, 0.2222 / 22.5 = 0.01; roofline (12 + 4) B x 1e6 / 22.5e9 =
# 0.71 ms, 18 / 0.711 = 25.31, 240 / 0.711 = 337.5x. acpsgd: 0.6 and 0.8 ms (0.70); PyTorch
# (0.05 + 0.07) / 2 + (0.01 + 0.03) / 2 = 80 ms each round; 4e6 / 0.7 ms = 5.71, / 80 ms = 0.050;
# 80 / 0.7 = 114.3x; 5.714 / 22.5 = 0.25; roofline (8 + 4) x 1e6 / 22.5e9 = 0.53 ms, 0.7 / 0.533
# = 1.31, 80 / 0.533 = 150.0x. topk: 2 and 4 ms (3.00), PyTorch 40 ms; 1.33, 0.100, 13.3x, 0.06;
# no byte model: roofline, x roofline and ceiling empty.
# Goals: dgc compress + feedback (12 B): rooflines 12e6 / 20e9 = 0.6 and / 25e9 = 0.48 ms
# (median 0.54); measured 12 and 14 ms; ratios 20 and 29.17 (median 24.58). acpsgd the step
# (8 + 4 B): rooflines 0.6 and 0.48; measured 0.6 and 0.8 ms; ratios 1.00 and 1.67 (1.33): yes.
MD = """PyTorch 2.x on cpu (x86_64, 1 threads); one thread each side; times: median over 2 rounds [min-max]

| method | shape | gradcomp step | PyTorch step | gradcomp GB/s | PyTorch GB/s | speed-up | share of memory read bandwidth | roofline | x roofline | ceiling |
|---|---|---|---|---|---|---|---|---|---|---|
| dgc | 1000x1000 | 18.00 ms [16.00-20.00] | 240.0 ms [160.0-320.0] | 0.22 | 0.017 | 13.3x | 0.01 of 22.5 GB/s | 0.71 ms | 25.31 | 337.5x |
| acpsgd | 1000x1000 | 0.70 ms [0.60-0.80] | 80.0 ms [80.0-80.0] | 5.71 | 0.050 | 114.3x | 0.25 of 22.5 GB/s | 0.53 ms | 1.31 | 150.0x |
| topk | 1000x1000 | 3.00 ms [2.00-4.00] | 40.0 ms [40.0-40.0] | 1.33 | 0.100 | 13.3x | 0.06 of 22.5 GB/s |  |  |  |

| method | shape | kernel | bytes per element | roofline | measured | x roofline | within 1.5x |
|---|---|---|---|---|---|---|---|
| dgc | 1000x1000 | compress + feedback | 12 | 0.54 ms | 13.00 ms [12.00-14.00] | 24.58 [20.00-29.17] | no |
| acpsgd | 1000x1000 | compress + feedback + decompress | 12 | 0.54 ms | 0.70 ms [0.60-0.80] | 1.33 [1.00-1.67] | yes |
"""


def test_peer_compare_md_of_the_fixture_line_by_line(tmp_path):
    root = tmp_path / "peer"
    root.mkdir()
    write_fixture(str(root))
    out = tmp_path / "out" / "deeper"
    md = P.peer_compare(str(root), str(out))
    assert md.splitlines() == MD.splitlines() and md.endswith("|\n")
    assert (out / "peer_compare.md").read_text() == md
    # The CSV files beside it: no index column, the tables' own columns.
    peer = pd.read_csv(out / "peer_compare.csv")
    assert list(peer.columns) == ["method", "shape", "rounds", "gradcomp_ms", "gradcomp_min_ms", "gradcomp_max_ms",
                                  "torch_ms", "torch_min_ms", "torch_max_ms", "gradcomp_gbps", "torch_gbps",
                                  "speedup", "mem_read_gbps", "mem_share", "roofline_ms", "x_roofline", "ceiling"]
    goals = pd.read_csv(out / "roofline_goals.csv")
    assert list(goals.columns) == ["method", "shape", "phases", "bytes_per_element", "roofline_ms", "measured_ms",
                                   "measured_min_ms", "measured_max_ms", "x_roofline", "x_roofline_min",
                                   "x_roofline_max", "within_goal"]
    # Without OUT_DIR: beside the rounds.
    assert P.peer_compare(str(root)) == md
    assert (root / "peer_compare.md").read_text() == md


def test_markdown_without_goals_or_torch_metadata():
    peer = pd.DataFrame([dict(method="topk", shape="2x3", rounds=3, gradcomp_ms=1.0, gradcomp_min_ms=0.5,
                              gradcomp_max_ms=1.5, torch_ms=2.0, torch_min_ms=1.0, torch_max_ms=3.0,
                              gradcomp_gbps=1.0, torch_gbps=0.5, speedup=2.0, mem_read_gbps=10.0, mem_share=0.1,
                              roofline_ms=float("nan"), x_roofline=float("nan"), ceiling=float("nan"))])
    md = P.markdown(peer, pd.DataFrame(), {})
    lines = md.splitlines()
    assert lines[0] == "PyTorch ? on ?; one thread each side; times: median over 3 rounds [min-max]"
    assert len(lines) == 5 and lines[-1].endswith("| 0.10 of 10.0 GB/s |  |  |  |")


def test_f_by_hand():
    assert P._f(None) == "" and P._f(float("nan")) == ""
    assert P._f(1.005, 1) == "1.0" and P._f(2.0) == "2.00" and P._f(0.0) == "0.00"


def test_roofline_goals_every_column_by_hand(tmp_path):
    write_fixture(str(tmp_path))
    g, _, _ = P.load_rounds(str(tmp_path))
    goals = P.roofline_goals(g)
    assert list(goals["method"]) == ["dgc", "acpsgd"]          # in the rows' order, topk has no goal
    d, a = goals.iloc[0], goals.iloc[1]
    assert (d["shape"], d["phases"], a["phases"]) == ("1000x1000", "compress + feedback",
                                                      "compress + feedback + decompress")
    assert (d["measured_min_ms"], d["measured_max_ms"]) == pytest.approx((12.0, 14.0))
    assert (d["x_roofline_min"], d["x_roofline_max"]) == pytest.approx((20.0, 0.014 / 0.00048))
    assert a["roofline_ms"] == pytest.approx(0.54) and a["measured_ms"] == pytest.approx(0.7)
    assert (a["measured_min_ms"], a["measured_max_ms"]) == pytest.approx((0.6, 0.8))
    # At the goal exactly (x = 1.5): within.
    one = pd.DataFrame([dict(method="acpsgd", rows=1000, cols=1000, **{"compress+feedback": 0.00072},
                             decompress=0.0, mem_read_gbps=20.0)])
    assert P.roofline_goals(one).iloc[0]["within_goal"] == "yes"   # 0.72 ms / (12e6 / 20e9 = 0.6 ms) = 1.2
    one.loc[0, "compress+feedback"] = 0.0009                       # 0.9 / 0.6 = 1.5: the goal, still within
    assert P.roofline_goals(one).iloc[0]["x_roofline"] == pytest.approx(1.5)
    assert P.roofline_goals(one).iloc[0]["within_goal"] == "yes"


def test_peer_table_every_column_by_hand(tmp_path):
    write_fixture(str(tmp_path))
    g, t, _ = P.load_rounds(str(tmp_path))
    peer = P.peer_table(g, t)
    assert list(peer["method"]) == ["dgc", "acpsgd", "topk"]   # the rows' order, not sorted
    d = peer.iloc[0]
    assert (d["shape"], d["torch_min_ms"], d["torch_max_ms"]) == ("1000x1000", pytest.approx(160.0),
                                                                  pytest.approx(320.0))
    a = peer.iloc[1]
    assert a["rounds"] == 2 and a["roofline_ms"] == pytest.approx(12e6 / 22.5e9 * 1e3)
    assert a["x_roofline"] == pytest.approx(0.7 / (12e6 / 22.5e9 * 1e3))
    assert a["ceiling"] == pytest.approx(80.0 / (12e6 / 22.5e9 * 1e3))
    assert a["torch_gbps"] == pytest.approx(4e6 / 0.08 / 1e9)
    # The same method on another shape on one side only: no row; nothing in common: refused.
    t2 = t.assign(rows=t["rows"] * 2)
    with pytest.raises(ReportError, match="no method and shape measured by both gradcomp and PyTorch"):
        P.peer_table(g, t2)


def test_torch_step_times_by_hand():
    prof = pd.DataFrame([("dgc", "compress", 0, 0, 1, 2, 0.1), ("dgc", "compress", 1, 0, 1, 2, 0.2),
                         ("dgc", "decompress", 0, 0, 1, 2, 0.05), ("dgc", "compress", 0, 1, 1, 2, 0.5),
                         ("copy", "copy", 0, 0, 1, 2, 9.0)],
                        columns=["method", "stage", "round", "phase", "rows", "cols", "time_s"])
    t = P.torch_step_times(prof)
    assert list(t["method"]) == ["dgc"]                       # the copy probe is not a method
    r = t.iloc[0]
    # phase 0: compress 0.1 + 0.2 (both rounds), decompress 0.05; phase 1: compress 0.5, decompress 0.
    assert r["compress+feedback"] == pytest.approx((0.3 + 0.5) / 2)
    assert r["decompress"] == pytest.approx(0.05 / 2)
    assert r["step_s"] == pytest.approx(0.4 + 0.025)
    assert (r["rows"], r["cols"]) == (1, 2)


def test_gradcomp_step_times_leaves_out_model_rows():
    micro = pd.DataFrame([dict(method="topk", rows=2.0, cols=3.0, model="", compress_s=0.1, feedback_s=0.02,
                               decompress_s=0.03, total_s=0.2, mem_read_gbps=5.0),
                          dict(method="topk", rows=None, cols=None, model="resnet20", compress_s=1, feedback_s=1,
                               decompress_s=1, total_s=3, mem_read_gbps=5.0)])
    g = P.gradcomp_step_times(micro.assign(model=[float("nan"), "resnet20"]))  # an empty model cell: a tensor
    assert len(g) == 1
    r = g.iloc[0]
    assert (r["method"], r["rows"], r["cols"]) == ("topk", 2, 3)
    assert r["compress+feedback"] == pytest.approx(0.12) and r["decompress"] == pytest.approx(0.03)
    assert (r["step_s"], r["mem_read_gbps"]) == (0.2, 5.0)
    assert len(P.gradcomp_step_times(micro)) == 1            # an empty model cell is a tensor row too
    assert len(P.gradcomp_step_times(micro.drop(columns=["model"]).iloc[:1])) == 1  # no model column


def write_profile(path, text):
    with open(path, "w") as f:
        f.write(text)
    return str(path)


HEADER = "method,stage,round,phase,rows,cols,world_size,time_s\n"


def test_read_torch_profile_comments_blank_lines_and_the_first_value(tmp_path):
    p = write_profile(tmp_path / "t.csv", "# device: cpu\n\n# torch: 2.1\n# torch: 9.9\n# no separator\n" + HEADER
                      + "\n  dgc,compress,0,0,2,3,1,0.5  \n")
    meta, df = P.read_torch_profile(p)
    assert meta == {"device": "cpu", "torch": "2.1"}        # the first value of a key is kept
    assert len(df) == 1 and df["time_s"].iloc[0] == 0.5 and df["rows"].iloc[0] == 2
    assert df["method"].iloc[0] == "dgc"                    # the line's spaces stripped


def test_read_torch_profile_refusals_name_the_file_and_row(tmp_path):
    p = write_profile(tmp_path / "a.csv", "# only: comments\n")
    with pytest.raises(ReportError, match=r"a\.csv: not a compress profile \(no header 'method,stage,...'\)"):
        P.read_torch_profile(p)
    p = write_profile(tmp_path / "b.csv", "stage,method\n")
    with pytest.raises(ReportError, match="not a compress profile"):
        P.read_torch_profile(p)
    p = write_profile(tmp_path / "c.csv", HEADER + "dgc,compress,0,0,2,3,1,0.5\ndgc,compress,0,0,2\n")
    with pytest.raises(ReportError, match=r"c\.csv: row 2 has 5 fields, the header 8: a damaged profile; rerun "
                                          r"analysis/profile_compress\.py"):
        P.read_torch_profile(p)
    p = write_profile(tmp_path / "d.csv", "method,stage,round,phase,rows,cols,time_s\ndgc,compress,0,0,2,3,0.5\n")
    with pytest.raises(ReportError, match=r"d\.csv: no column 'world_size' \(not a compress profile\)"):
        P.read_torch_profile(p)
    p = write_profile(tmp_path / "e.csv", HEADER + "dgc,compress,x,0,2,3,1,0.5\n")
    with pytest.raises(ReportError, match=r"e\.csv: .*\(a damaged row; rerun analysis/profile_compress\.py\)"):
        P.read_torch_profile(p)


def test_rounds_pair_the_sides_by_number_in_order(tmp_path):
    root = str(tmp_path)
    write_fixture(root)
    # Round 10 sorts after 2 (numbers, not names); a round with one side is left out, and so
    # are names that only look like rounds.
    os.rename(os.path.join(root, "gradcomp-2"), os.path.join(root, "gradcomp-10"))
    os.rename(os.path.join(root, "torch-2.csv"), os.path.join(root, "torch-10.csv"))
    os.makedirs(os.path.join(root, "gradcomp-3"))                      # no micro_compress.csv
    write_profile(os.path.join(root, "torch-3.csv"), HEADER)
    os.makedirs(os.path.join(root, "gradcomp-4x"))
    write_profile(os.path.join(root, "torch-4x.csv"), HEADER)
    os.makedirs(os.path.join(root, "gradcomp-5"))
    write_profile(os.path.join(root, "gradcomp-5", "micro_compress.csv"), "x\n")  # no torch-5.csv
    got = P._rounds(root)
    assert [(i, os.path.basename(g), os.path.basename(t)) for i, g, t in got] == [
        (1, "gradcomp-1", "torch-1.csv"), (10, "gradcomp-10", "torch-10.csv")]
    g, t, meta = P.load_rounds(root)
    assert sorted(set(g["round"])) == [1, 10] and sorted(set(t["round"])) == [1, 10]
    assert meta == {"device": "cpu (x86_64, 1 threads)", "torch": "2.x"}


def test_rounds_refusal_names_the_folder_and_the_command(tmp_path):
    with pytest.raises(ReportError, match=r"no round with both gradcomp-<i>/micro_compress\.csv and torch-<i>\.csv "
                                          r"\(run `make peer-compare`\)"):
        P._rounds(str(tmp_path))


def test_load_micro_refusals(tmp_path):
    d = tmp_path / "g"
    d.mkdir()
    (d / "micro_compress.csv").write_text("schema_version,method,rows,cols,compress_s,feedback_s,decompress_s,"
                                          "total_s,input_gbps,wire_bytes,dense_bytes\n1,topk,2,3,1,1,1,3,1,1,24\n")
    with pytest.raises(ReportError, match="mem_read_gbps"):
        P._load_micro(str(d / "micro_compress.csv"))


def test_load_rounds_tables_have_a_plain_index(tmp_path):
    write_fixture(str(tmp_path))
    g, t, _ = P.load_rounds(str(tmp_path))
    assert list(g.index) == list(range(6)) and list(t.index) == list(range(len(t)))  # 3 methods x 2 rounds


def test_load_micro_refusals_name_the_file(tmp_path):
    d = tmp_path / "g"
    d.mkdir()
    path = str(d / "micro_compress.csv")
    head = "schema_version,method,rows,cols,compress_s,feedback_s,decompress_s,input_gbps,mem_read_gbps,wire_bytes," \
           "dense_bytes"
    (d / "micro_compress.csv").write_text(head + "\n1,topk,2,3,1,1,1,1,5,1,24\n")
    with pytest.raises(ReportError) as e:
        P._load_micro(path)
    assert str(e.value) == f"{path}: no column total_s"   # io checks the others; total_s is peer's own need
    (d / "micro_compress.csv").write_text("")  # a run stopped before its first row
    with pytest.raises(ReportError) as e:
        P._load_micro(path)
    assert str(e.value) == f"{path}: no rows (run `make peer-compare` again)"


def test_peer_table_rates_exactly_and_its_refusal_word_for_word(tmp_path):
    write_fixture(str(tmp_path))
    g, t, _ = P.load_rounds(str(tmp_path))
    d = P.peer_table(g, t).iloc[0]
    exact = dict(rel=1e-12, abs=0)  # 1e9 bytes per GB, exactly
    assert d["gradcomp_gbps"] == pytest.approx(4 * 1e6 / 0.018 / 1e9, **exact)
    assert d["torch_gbps"] == pytest.approx(4 * 1e6 / 0.24 / 1e9, **exact)
    assert d["roofline_ms"] == pytest.approx(16 * 1e6 / (22.5 * 1e9) * 1e3, **exact)
    # A method PyTorch did not run (dgc), first in the rows: skipped, the others still compared.
    rest = P.peer_table(g, t[t["method"] != "dgc"])
    assert list(rest["method"]) == ["acpsgd", "topk"]
    with pytest.raises(ReportError) as e:
        P.peer_table(g, t.assign(rows=t["rows"] * 2))
    assert str(e.value) == "no method and shape measured by both gradcomp and PyTorch"


def test_goals_and_torch_steps_keep_the_rows_order_and_skip_what_has_no_model():
    # topk (no goal) first: skipped, not the end of the table; zz before aa: the rows' order, not sorted.
    g = pd.DataFrame([dict(method=m, rows=1000, cols=1000, **{"compress+feedback": 0.001}, decompress=0.001,
                           mem_read_gbps=20.0) for m in ("topk", "dgc", "acpsgd")])
    assert list(P.roofline_goals(g)["method"]) == ["dgc", "acpsgd"]
    prof = pd.DataFrame([(m, "compress", 0, 0, 1, 2, 0.1) for m in ("zz", "aa")],
                        columns=["method", "stage", "round", "phase", "rows", "cols", "time_s"])
    assert list(P.torch_step_times(prof)["method"]) == ["zz", "aa"]


def test_read_torch_profile_keys_up_to_the_first_colon_and_integer_columns(tmp_path):
    p = write_profile(tmp_path / "t.csv", "#torch:2.1\n# device: cpu (x86_64: 1 threads)\n" + HEADER
                      + "dgc,compress,0,1,2,3,1,0.5\n")
    meta, df = P.read_torch_profile(p)
    assert meta == {"torch": "2.1", "device": "cpu (x86_64: 1 threads)"}
    for c in ("round", "phase", "rows", "cols", "world_size"):
        assert str(df[c].dtype) == "int64", c
