"""The peer comparison (`make peer-compare`): gradcomp's micro-compress against the
PyTorch CPU profile, on a hand-made two-round fixture with exact expected numbers."""

import os

import pytest

from gradcomp_analysis import peer as P
from gradcomp_analysis.__main__ import main
from gradcomp_analysis.io import ReportError

ROWS, COLS = 1000, 1000
NUMEL = ROWS * COLS

# Per round: method -> (compress_s, feedback_s, decompress_s, total_s); and the probe.
GRADCOMP = {
    1: ({"dgc": (0.010, 0.002, 0.004, 0.016), "acpsgd": (0.0004, 0.0, 0.0002, 0.0006),
         "topk": (0.001, 0.0, 0.001, 0.002)}, 20.0),
    2: ({"dgc": (0.012, 0.002, 0.004, 0.020), "acpsgd": (0.0005, 0.0, 0.0003, 0.0008),
         "topk": (0.002, 0.0, 0.002, 0.004)}, 25.0),
}
# Per round: (method, stage, round, phase, time_s); powersgd has no gradcomp row.
TORCH = {
    1: [("dgc", "compress", 0, 0, 0.1), ("dgc", "decompress", 0, 0, 0.06),
        ("acpsgd", "compress", 0, 0, 0.05), ("acpsgd", "decompress", 0, 0, 0.01),
        ("acpsgd", "compress", 0, 1, 0.07), ("acpsgd", "decompress", 0, 1, 0.03),
        ("topk", "compress", 0, 0, 0.02), ("topk", "decompress", 0, 0, 0.02),
        ("powersgd", "compress", 0, 0, 0.3), ("powersgd", "decompress", 1, 0, 0.3)],
    2: [("dgc", "compress", 0, 0, 0.2), ("dgc", "decompress", 0, 0, 0.12),
        ("acpsgd", "compress", 0, 0, 0.05), ("acpsgd", "decompress", 0, 0, 0.01),
        ("acpsgd", "compress", 0, 1, 0.07), ("acpsgd", "decompress", 0, 1, 0.03),
        ("topk", "compress", 0, 0, 0.02), ("topk", "decompress", 0, 0, 0.02)],
}


def write_fixture(root):
    for i, (methods, probe) in GRADCOMP.items():
        d = os.path.join(root, f"gradcomp-{i}")
        os.makedirs(d)
        with open(os.path.join(d, "micro_compress.csv"), "w") as f:
            f.write("schema_version,method,rows,cols,model,compress_s,feedback_s,decompress_s,total_s,mem_read_gbps,input_gbps,wire_bytes,dense_bytes\n")
            for m, (c, fb, dc, tot) in methods.items():
                f.write(f"1,{m},{ROWS},{COLS},,{c},{fb},{dc},{tot},{probe},1.0,100,{4 * NUMEL}\n")
    for i, rows in TORCH.items():
        with open(os.path.join(root, f"torch-{i}.csv"), "w") as f:
            f.write("# device: cpu (x86_64, 1 threads)\n# torch: 2.x\n")
            f.write("method,stage,round,phase,rows,cols,world_size,time_s\n")
            for m, stage, rnd, ph, t in rows:
                f.write(f"{m},{stage},{rnd},{ph},{ROWS},{COLS},1,{t}\n")
            f.write("copy,copy,0,0,1,1024,1,1e-06\n")


def test_peer_table_arithmetic(tmp_path):
    write_fixture(str(tmp_path))
    g, t, meta = P.load_rounds(str(tmp_path))
    peer = P.peer_table(g, t).set_index("method")
    assert set(peer.index) == {"dgc", "acpsgd", "topk"}  # powersgd: no gradcomp row
    dgc = peer.loc["dgc"]
    assert dgc["rounds"] == 2
    assert dgc["gradcomp_ms"] == pytest.approx(18.0)  # median of 16 and 20 ms
    assert (dgc["gradcomp_min_ms"], dgc["gradcomp_max_ms"]) == pytest.approx((16.0, 20.0))
    assert dgc["torch_ms"] == pytest.approx(240.0)  # median of 160 and 320 ms
    assert dgc["speedup"] == pytest.approx(240.0 / 18.0)
    assert dgc["gradcomp_gbps"] == pytest.approx(4e6 / 0.018 / 1e9)
    assert dgc["torch_gbps"] == pytest.approx(4e6 / 0.24 / 1e9)
    assert dgc["mem_read_gbps"] == pytest.approx(22.5)
    assert dgc["mem_share"] == pytest.approx(4e6 / 0.018 / 1e9 / 22.5)
    # Roofline of a DGC step: 12 + 4 bytes per element at the median probe.
    assert dgc["roofline_ms"] == pytest.approx(16e6 / 22.5e9 * 1e3)
    assert dgc["x_roofline"] == pytest.approx(18.0 / (16e6 / 22.5e9 * 1e3))
    # The ceiling: PyTorch's step over the roofline, the most any DGC kernel could gain.
    assert dgc["ceiling"] == pytest.approx(240.0 / (16e6 / 22.5e9 * 1e3))
    # ACP-SGD alternates P and Q steps: a step is the mean of the two phases.
    acp = peer.loc["acpsgd"]
    assert acp["torch_ms"] == pytest.approx(80.0)  # (50 + 70) / 2 + (10 + 30) / 2 ms
    assert acp["gradcomp_ms"] == pytest.approx(0.7)
    assert acp["speedup"] == pytest.approx(80.0 / 0.7)
    # No byte model for top-k: no roofline.
    assert peer.loc["topk"]["roofline_ms"] != peer.loc["topk"]["roofline_ms"]
    assert peer.loc["topk"]["ceiling"] != peer.loc["topk"]["ceiling"]
    assert meta["torch"] == "2.x"


def test_roofline_goals(tmp_path):
    write_fixture(str(tmp_path))
    g, _, _ = P.load_rounds(str(tmp_path))
    goals = P.roofline_goals(g).set_index("method")
    assert set(goals.index) == {"dgc", "acpsgd"}
    dgc = goals.loc["dgc"]
    # DGC's goal is its compress kernel: 12 bytes per element, each round at its own probe.
    assert dgc["bytes_per_element"] == 12
    assert dgc["measured_ms"] == pytest.approx(13.0)  # median of 12 and 14 ms
    assert dgc["roofline_ms"] == pytest.approx(0.54)  # median of 0.6 and 0.48 ms
    assert dgc["x_roofline"] == pytest.approx((20.0 + 0.014 / 0.00048) / 2)
    assert dgc["within_goal"] == "no"
    acp = goals.loc["acpsgd"]
    assert acp["bytes_per_element"] == 12
    assert (acp["x_roofline_min"], acp["x_roofline_max"]) == pytest.approx((1.0, 0.0008 / 0.00048))
    assert acp["x_roofline"] == pytest.approx((1.0 + 0.0008 / 0.00048) / 2)
    assert acp["within_goal"] == "yes"


def test_cli_writes_tables_and_refuses_an_empty_folder(tmp_path, capsys):
    write_fixture(str(tmp_path))
    assert main(["peer-compare", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| dgc | 1000x1000 | 18.00 ms [16.00-20.00] | 240.0 ms [160.0-320.0]" in out
    assert out.count("| 337.5x |") == 1  # DGC's ceiling: 240 ms / 0.711 ms
    for name in ("peer_compare.md", "peer_compare.csv", "roofline_goals.csv"):
        assert os.path.isfile(os.path.join(str(tmp_path), name))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ReportError):
        P.load_rounds(str(empty))
    assert main(["peer-compare", str(empty)]) == 2
