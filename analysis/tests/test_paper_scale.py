"""The "Paper scale (simulated)" section on a synthetic sim.csv (no binary needed):
the ACP-SGD table's means computed by hand, the deciding cost of a claim that is not
reproduced, a headline whose simulate failed, and no section without paper-scale folders."""

import os

import pandas as pd
import pytest

from gradcomp_analysis import verdict as V
from gradcomp_analysis.report import (Report, deciding_cost, find_paper_scale, paper_scale_section,
                                      paper_scale_tables, verdict_counts_line, write_report)

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
    # direction holds on the host but 2.5 / 1.43 = 1.75 is outside a factor 1.5
    assert (power["verdict host"], power["verdict device"]) == ("direction only", "not reproduced")
    assert power["ours/published host"] == f"{2.5 / 1.43:.2f}"
    assert power["ours host"] == "2.50x" and power["ours device"] == "0.50x"
    # (0.6 - 0.1) s in each of the two models
    assert power["deciding cost (not reproduced)"] == "device: compress_s (+1000.0 ms)"
    ssgd = heads[(heads["headline"] == "acpsgd-main") & heads["claim"].str.contains("S-SGD")].iloc[0]
    # host 14 / 4.06 = 3.4; device 2.667 / 4.06 = 0.657, just below 1 / 1.5
    assert (ssgd["verdict host"], ssgd["verdict device"]) == ("direction only", "direction only")
    assert ssgd["deciding cost (not reproduced)"] == ""
    omgs = heads[heads["headline"] == "omgs"].iloc[0]
    assert omgs["verdict host"].startswith("n/a: gradcomp: error")


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


@pytest.mark.parametrize("ours, published, direction, want", [
    (6 * 4.06, 4.06, True, "direction only"),   # the ACP-SGD case: 6x the published size
    (200.0, 31.0, True, "direction only"),      # OMGS on the device model: % compared with %
    (1.4 * 31, 31.0, True, "size reproduced"),
    (31 / 1.4, 31.0, True, "size reproduced"),
    (1.5 * 2.0, 2.0, True, "size reproduced"),  # the factor's bounds are inside
    (2.0 / 1.5, 2.0, True, "size reproduced"),
    (0.65 * 2.0, 2.0, True, "direction only"),
    (4.06, 4.06, False, "not reproduced"),      # the right size with the wrong direction
    (-4.6, 18.6, False, "not reproduced"),
    (1.0, 0.0, True, "direction only"),         # no ratio: never "size"
])
def test_verdict_levels(ours, published, direction, want):
    assert V.verdict(ours, published, direction) == want


def test_verdict_refuses_a_factor_not_above_one():
    with pytest.raises(ValueError, match="factor 1"):
        V.verdict(1.0, 1.0, True, factor=1.0)


def test_verdict_counts_in_the_section(paper_scale, tmp_path):
    heads, _, _ = paper_scale_tables(find_paper_scale([paper_scale]))
    # host: S-SGD 3.4x off, Power-SGD 1.75x off; device: S-SGD 0.66x off, Power-SGD wrong way
    assert verdict_counts_line(heads) == ("host: 0 size reproduced, 2 direction only, 0 not reproduced; "
                                          "device: 0 size reproduced, 1 direction only, 1 not reproduced")
    text = open(write_report(paper_scale, str(tmp_path / "rep"))).read()
    assert "**Verdicts** (3 headlines): host: 0 size reproduced" in text


def omgs_rows(on_times):
    """sim.csv rows of the OMGS headline (16 workers, rho 0.001): ON_TIMES maps compress_on ->
    (layer-wise Top-k iter_s, OMGS iter_s) for resnet50, plus a fused Top-k that is faster
    still and must be ignored (the baseline is fusion none)."""
    r = []
    for on, (topk, omgs) in on_times.items():
        base = {**row("resnet50", "topk", on, "on", topk), "world_size": 16, "density": 0.001, "fusion": "none"}
        r += [base, {**base, "fusion": "25MiB", "iter_s": topk / 10},
              {**base, "method": "omgs", "fusion": "omgs", "iter_s": omgs, "plan_source": "omgs"}]
    return pd.DataFrame(r)


def omgs_paper_scale(root, omgs_1gbe, omgs_net):
    """An omgs headline on 1gbe and an omgs-net headline on omgs-1gbe, as scripts/paper_scale.sh
    lays them out (baselines and omgs in folders of their own)."""
    for headline, net, times in [("omgs", "1gbe", omgs_1gbe), ("omgs-net", "omgs-1gbe", omgs_net)]:
        df = omgs_rows(times)
        write(str(root / headline / "baselines"), headline, df[df["method"] != "omgs"], network=net)
        write(str(root / headline / "omgs"), headline, df[df["method"] == "omgs"], network=net)
    return str(root)


def test_omgs_row_per_network_and_how_the_verdict_moves(tmp_path):
    # 1gbe: host OMGS 1.25 s vs Top-k 1.0 s (1.0/1.25 - 1 = -20%: not reproduced); device
    # 0.8 vs 1.0 (+25%, 25/31 = 0.81: size reproduced). omgs-1gbe: host 1.6 vs 2.0 (+25%,
    # size reproduced); device 1.0 vs 2.0 (+100%, 100/31 = 3.2: direction only).
    root = omgs_paper_scale(tmp_path / "ps", {"host": (1.0, 1.25), "device": (1.0, 0.8)},
                            {"host": (2.0, 1.6), "device": (2.0, 1.0)})
    found = find_paper_scale([root])
    heads = paper_scale_tables(found)[0].set_index("headline")
    one, net = heads.loc["omgs"], heads.loc["omgs-net"]
    assert "1gbe (our 1 GbE preset)" in one["setup"] and "omgs-1gbe" not in one["setup"]
    assert "omgs-1gbe (the paper's measured 1 GbE)" in net["setup"]
    assert one["claim"] == net["claim"] and one["published"] == net["published"] == "31%"
    assert (one["ours host"], one["verdict host"]) == ("-20.00%", "not reproduced")
    assert (one["ours device"], one["verdict device"]) == ("25.00%", "size reproduced")
    assert (net["ours host"], net["verdict host"]) == ("25.00%", "size reproduced")
    assert (net["ours device"], net["verdict device"]) == ("100.00%", "direction only")
    assert net["plan that ran"] == "host: omgs; device: omgs"
    R = Report(str(tmp_path), False)
    paper_scale_section(R, found)
    text = "\n".join(R.lines)
    assert ("host compression: on 1gbe (our 1 GbE preset) layer-wise Top-k is at least as fast (-20.00%, "
            "not reproduced), on omgs-1gbe (the paper's measured 1 GbE) OMGS is faster (25.00%, size "
            "reproduced): the verdict moves from *not reproduced* to *size reproduced*") in text
    assert ("device compression: on 1gbe (our 1 GbE preset) OMGS is faster (25.00%, size reproduced), on "
            "omgs-1gbe (the paper's measured 1 GbE) OMGS is faster (100.00%, direction only): the verdict "
            "moves from *size reproduced* to *direction only*") in text
    assert "- `omgs-net`: Shi et al., OMGS-SGD" in text


def test_omgs_verdict_line_when_the_networks_agree(tmp_path):
    # Host: OMGS slower on both (1.0/1.25 - 1 = 2.0/2.5 - 1 = -20%); device: +25% and +100%.
    root = omgs_paper_scale(tmp_path / "ps", {"host": (1.0, 1.25), "device": (1.0, 0.8)},
                            {"host": (2.0, 2.5), "device": (2.0, 1.0)})
    found = find_paper_scale([root])
    R = Report(str(tmp_path), False)
    paper_scale_section(R, found)
    text = "\n".join(R.lines)
    assert ("host compression: on 1gbe (our 1 GbE preset) layer-wise Top-k is at least as fast (-20.00%, "
            "not reproduced), on omgs-1gbe (the paper's measured 1 GbE) layer-wise Top-k is at least as fast "
            "(-20.00%, not reproduced): the verdict stays *not reproduced*") in text
    assert "the verdict moves from *size reproduced* to *direction only*" in text


def test_no_omgs_network_line_with_one_network(tmp_path):
    root = tmp_path / "ps"
    df = omgs_rows({"host": (1.0, 0.8)})
    write(str(root / "omgs" / "omgs"), "omgs", df)
    R = Report(str(tmp_path), False)
    paper_scale_section(R, find_paper_scale([str(root)]))
    assert not any("OMGS by network" in line for line in R.lines)
