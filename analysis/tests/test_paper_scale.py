"""The "Paper scale (simulated)" section on a synthetic sim.csv (no binary needed):
the ACP-SGD table's means computed by hand, the deciding cost of a claim that is not
reproduced, a headline whose simulate failed, and no section without paper-scale folders."""

import os

import pandas as pd
import pytest

from gradcomp_analysis.report import (Report, deciding_cost, find_paper_scale, paper_scale_section,
                                      paper_scale_tables, write_report)

ZERO = {"compress_s": 0.0, "decompress_s": 0.0, "comm_s": 0.0, "pack_s": 0.0, "exposed_s": 0.0}


def row(model, method, on, pipelining, iter_s, rank=None, **costs):
    rank = rank if rank is not None else {"resnet50": 4, "bert-base": 32}[model]
    return {"schema_version": 1, "source": "simulated", "model": model, "method": method, "fusion": "25MiB",
            "pipelining": pipelining, "world_size": 32, "compress_on": on, "rank": rank, "iter_s": iter_s,
            **{**ZERO, **costs}, "dense_bytes": 100, "wire_bytes": 10,
            "cost_source": f"network preset 1gbe; {on} costs" + ("; device v100 (roofline)" if on == "device" else "")}


def acp_rows():
    """Host: ACP-SGD/S-SGD 8 (resnet50) and 20 (bert-base), mean 14; ACP-SGD/Power-SGD 2 and 3,
    mean 2.5. Device: ACP-SGD/S-SGD 2 and 3.333 (mean 2.667); ACP-SGD/Power-SGD 0.5 and 0.5,
    not reproduced, ACP-SGD's compress_s 0.5 s above Power-SGD's in each model."""
    r = []
    for on in ["host", "device"]:
        for model, ssgd, power, acp in [("resnet50", 2.0, 0.5, 0.25 if on == "host" else 1.0),
                                        ("bert-base", 8.0, 1.2, 0.4 if on == "host" else 2.4)]:
            r += [row(model, "ssgd", on, "off", 2 * ssgd), row(model, "ssgd", on, "on", ssgd),
                  row(model, "powersgd", on, "off", power * 1.5), row(model, "powersgd", on, "on", power,
                                                                       compress_s=0.1),
                  row(model, "acpsgd", on, "off", acp * 2),
                  row(model, "acpsgd", on, "on", acp, compress_s=0.6 if on == "device" else 0.05),
                  # not at the paper's rank: must be ignored
                  row(model, "powersgd", on, "on", 0.001, rank=8), row(model, "acpsgd", on, "on", 1e-6, rank=8)]
    return pd.DataFrame(r)


def write(folder, headline, df=None, error=None, network="1gbe"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "paper_scale.txt"), "w") as f:
        f.write(f"headline={headline}\nnetwork={network}\nranks_per_node=4 (passed)\ncommand=gradcomp simulate\n")
    if df is not None:
        df.to_csv(os.path.join(folder, "sim.csv"), index=False)
    if error:
        with open(os.path.join(folder, "error.txt"), "w") as f:
            f.write(error + "\n")


@pytest.fixture
def paper_scale(tmp_path):
    root = tmp_path / "paper-scale"
    write(str(root / "acpsgd-main" / "1gbe"), "acpsgd-main", acp_rows())
    write(str(root / "omgs" / "omgs"), "omgs", error="gradcomp: error: simulate: method omgs: cannot extrapolate")
    return str(root)


def test_acpsgd_table_by_hand(paper_scale):
    heads, acp, _ = paper_scale_tables(find_paper_scale([paper_scale]))
    assert list(acp["network"]) == ["1gbe"]
    r = acp.iloc[0]
    assert r["ACP/S-SGD host"] == pytest.approx((8 + 20) / 2)
    assert r["ACP/S-SGD device"] == pytest.approx((2 + 8 / 2.4) / 2)
    assert r["ACP/Power-SGD host"] == pytest.approx((2 + 3) / 2)
    assert r["ACP/Power-SGD device"] == pytest.approx(0.5)
    assert r["ACP/S-SGD (published)"] == 4.06 and r["ACP/Power-SGD (published)"] == 1.43


def test_not_reproduced_names_the_deciding_cost(paper_scale):
    heads, _, _ = paper_scale_tables(find_paper_scale([paper_scale]))
    power = heads[(heads["headline"] == "acpsgd-main") & heads["claim"].str.contains("Power-SGD")].iloc[0]
    assert (power["reproduced host"], power["reproduced device"]) == ("yes", "no")
    assert power["ours host"] == "2.50x" and power["ours device"] == "0.50x"
    # (0.6 - 0.1) s in each of the two models
    assert power["deciding cost (not reproduced)"] == "device: compress_s (+1000.0 ms)"
    ssgd = heads[(heads["headline"] == "acpsgd-main") & heads["claim"].str.contains("S-SGD")].iloc[0]
    assert (ssgd["reproduced host"], ssgd["reproduced device"]) == ("yes", "yes")
    assert ssgd["deciding cost (not reproduced)"] == ""
    omgs = heads[heads["headline"] == "omgs"].iloc[0]
    assert omgs["reproduced host"].startswith("n/a: gradcomp: error")


def test_deciding_cost_largest_difference():
    a = pd.DataFrame([{**ZERO, "comm_s": 0.1, "pack_s": 0.3, "exposed_s": 0.2}])
    b = pd.DataFrame([{**ZERO, "comm_s": 0.3, "pack_s": 0.1, "exposed_s": 0.1}])
    assert deciding_cost(a, b) == "pack_s (+200.0 ms)"


def test_report_of_paper_scale_only(paper_scale, tmp_path):
    """A folder holding only paper-scale simulations is reportable, and nothing is listed as skipped."""
    path = write_report(paper_scale, str(tmp_path / "rep"))
    text = open(path).read()
    assert "## Paper scale (simulated)" in text and "Folders skipped" not in text
    t = pd.read_csv(tmp_path / "rep" / "paper_scale_sources.csv")
    assert set(t["folder"]) == {os.path.join("acpsgd-main", "1gbe"), os.path.join("omgs", "omgs")}
    assert t["cost_source"].str.contains("device v100").any()


def test_no_section_without_paper_scale(tmp_path):
    R = Report(str(tmp_path), False)
    paper_scale_section(R, [])
    assert R.lines == [] and R.tables == []
    assert find_paper_scale([str(tmp_path)]) == []
