"""Issue 53 item 6 (number formats of the analysis) and the bounded, UTF-8-checked read of
paper_scale.txt by `find_paper_scale`."""

import pytest

from gradcomp_analysis import report as R
from gradcomp_analysis.__main__ import main
from gradcomp_analysis.io import ReportError


@pytest.mark.parametrize("v, want", [
    (13.182928, "13.18"), (-7.515383501077721e-05, "-7.5e-05"), (-0.0012, "-0.0012"), (0.004, "0.0040"),
    (-0.0, "0.00"), (0.0, "0.00"), (-1.5, "-1.50"), (0.005, "0.01"), (float("nan"), "nan"),
])
def test_fixed_never_prints_a_negative_zero(v, want):
    assert R.fixed(v) == want


def test_paper_scale_rows_never_show_minus_zero(tmp_path):
    """The OMGS headline's host value (-7.5e-05 %: never faster) printed `-0.00%` / `-0.00`."""
    row = R.paper_scale_row("omgs", "16 workers", "claim", 31, {"host": (-7.515383501077721e-05, False, "")}, "%")
    assert row["ours host"] == "-7.5e-05%" and row["ours/published host"] == "-2.4e-06"
    assert "-0.00" not in " ".join(str(v) for v in row.values())


E2E = ("schema_version,case_id,model,method,fusion,pipelining,collective,aggregation,world_size,batch,device,"
       "density,rank,compress_s,comm_s,decompress_s,exposed_s,iter_s,iter_ci95_s,iters,dense_bytes,wire_bytes,"
       "planned_s,bwd_sync_s\n"
       "1,c0,resnet20,ssgd,mgwfbp,on,allreduce,allreduce,2,32,v100,,,0,0.001,0,0,0.002,1e-5,10,100,100,"
       "0.0012345678,0.0011111111\n")


def test_planner_accuracy_prints_four_significant_digits_not_six_decimals(tmp_path, capsys):
    (tmp_path / "e2e.csv").write_text(E2E)
    assert main(["planner-accuracy", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1.235" in out and "1.111" in out and "11.11" in out      # planned, measured ms, error %
    assert "1.234568" not in out and "1.111111" not in out and "11.111111" not in out


def test_find_paper_scale_reads_the_marker_as_checked_utf8_text(tmp_path):
    d = tmp_path / "ps" / "omgs"
    d.mkdir(parents=True)
    (d / "paper_scale.txt").write_text("headline=omgs\nnetwork=1gbe\n")
    (d / "error.txt").write_text("  simulate: refused\n")
    f = R.find_paper_scale([str(tmp_path / "ps")])
    assert f[0]["headline"] == "omgs" and f[0]["network"] == "1gbe" and f[0]["error"] == "simulate: refused"
    (d / "paper_scale.txt").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01binary\n")
    with pytest.raises(ReportError, match="paper_scale.txt.*not UTF-8"):
        R.find_paper_scale([str(tmp_path / "ps")])
    (d / "paper_scale.txt").write_text("headline=omgs\n")
    (d / "error.txt").write_bytes(b"\xff\xfe binary")
    with pytest.raises(ReportError, match="error.txt.*not UTF-8"):
        R.find_paper_scale([str(tmp_path / "ps")])


def test_write_report_called_from_python_refuses_a_binary_marker_with_report_error(tmp_path):
    d = tmp_path / "run" / "ps"
    d.mkdir(parents=True)
    (d / "paper_scale.txt").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ReportError, match="not UTF-8"):
        R.write_report([str(tmp_path / "run")], str(tmp_path / "rep"))
