"""issue 50 item 1: every table that times a compressed method shows its size on the wire,
`wire vs dense` = wire_bytes / dense_bytes of the timed row (a fraction of dense S-SGD's bytes),
and a sparsifier's density. Every expected ratio is written out by hand from the fixture's bytes
(dense 4000 bytes unless said), not computed by the code under test. Each fixture also has a
row without dense_bytes (an empty cell): its ratio is empty, never assumed, and the table's
note says why."""

import math
import os

import pandas as pd
import pytest

from gradcomp_analysis import report as R
from gradcomp_analysis import tables as T
from gradcomp_analysis import trains
from test_tables import df, row
from test_trains_mutants import CHECKS
from test_verdict_branches import heads_of, paper, sim

W = "wire vs dense"  # the column every table names its ratio by
NAN = math.nan
EMPTY = "is empty on {n} row(s) with a time: their CSV rows have no `dense_bytes`"


def empty_note(t, n, col=W):
    """The note of T that says COL is empty on N rows (and why)."""
    want = f"`{col}` " + EMPTY.format(n=n)
    assert any(x.startswith(want) for x in t.attrs.get("notes", [])), t.attrs.get("notes")


def no_empty_note(t):
    assert not any("is empty on" in x for x in t.attrs.get("notes", [])), t.attrs.get("notes")


# ------------------------------------------------------------------ helpers


def test_wire_vs_dense_by_hand():
    d = pd.DataFrame({"wire_bytes": [10, 4000, 5, 7], "dense_bytes": [4000, 4000, NAN, 0]})
    got = T.wire_vs_dense(d)
    assert list(got[:2]) == [0.0025, 1.0] and got[2:].isna().all()  # no dense, dense 0: empty
    assert T.wire_vs_dense(d.iloc[0]) == 0.0025                        # one row
    assert T.wire_vs_dense(pd.DataFrame({"wire_bytes": [1]})).isna().all()  # no dense_bytes column
    rho = T.density_of(pd.DataFrame({"method": ["topk", "powersgd", "sketch"], "density": [0.001, 0.5, 0.0076]}))
    assert rho[0] == 0.001 and math.isnan(rho[1]) and rho[2] == 0.0076
    assert math.isnan(T.density_of(pd.Series({"method": "ssgd", "density": 0.001})))
    assert T.density_of(pd.DataFrame({"method": ["topk"]})).isna().all()


# ------------------------------------------------------------------ ACP-SGD tables


def acp_fixture():
    """Model m: every method with dense 4000. Model m2: no S-SGD row (its ratio still comes
    from its own dense_bytes). Model m0: acpsgd and ssgd rows without dense_bytes."""
    return df(row("ssgd", 0.4), row("topk", 0.3, wire=10), row("powersgd", 0.2, wire=200),
              row("acpsgd", 0.1, wire=100),
              row("powersgd", 0.2, wire=300, model="m2", dense=6000), row("acpsgd", 0.1, wire=150, model="m2",
                                                                         dense=6000),
              row("ssgd", 0.4, model="m0", dense=NAN, wire=4000), row("acpsgd", 0.1, model="m0", dense=NAN, wire=100))


def test_acpsgd_main_and_wide_show_wire_vs_dense():
    main = T.acpsgd_main(acp_fixture())
    t = main.set_index(["model", "method"])
    assert t.loc[("m", "ssgd"), W] == 1.0            # 4000 / 4000
    assert t.loc[("m", "topk"), W] == 0.0025         # 10 / 4000
    assert t.loc[("m", "powersgd"), W] == 0.05       # 200 / 4000
    assert t.loc[("m", "acpsgd"), W] == 0.025        # 100 / 4000
    assert t.loc[("m2", "acpsgd"), W] == 0.025       # 150 / 6000: no S-SGD row needed
    assert t.loc[("m2", "powersgd"), W] == 0.05      # 300 / 6000
    assert math.isnan(t.loc[("m0", "acpsgd"), W]) and math.isnan(t.loc[("m0", "ssgd"), W])
    assert t.loc[("m", "topk"), "density"] == 0.001 and math.isnan(t.loc[("m", "acpsgd"), "density"])
    empty_note(main, 2)
    w = T.acpsgd_main_wide(main).set_index("model")
    assert w.loc["m", "topk wire vs dense"] == 0.0025 and w.loc["m", "topk density"] == 0.001
    assert w.loc["m", "acpsgd wire vs dense"] == 0.025 and w.loc["m2", "acpsgd wire vs dense"] == 0.025
    assert math.isnan(w.loc["m0", "acpsgd wire vs dense"])
    assert "ssgd wire vs dense" not in w.columns     # dense: 1 by definition
    empty_note(w, 1, "acpsgd wire vs dense")


def test_acpsgd_main_without_a_sparsifier_has_no_density_column_and_no_note():
    t = T.acpsgd_main(df(row("ssgd", 0.4), row("acpsgd", 0.1, wire=80)))
    assert "density" not in t.columns and t.set_index("method").loc["acpsgd", W] == 0.02  # 80 / 4000
    no_empty_note(t)


def test_acpsgd_ablation_wire_of_the_last_step():
    # topk's plain exchange sends 12 bytes, its fused steps 10 (one trailer less per bucket):
    # the ratio is the last step's, 10 / 4000; m0's rows have no dense_bytes.
    rows = [row("topk", 0.5, pipelining="off", wire=12), row("topk", 0.4, pipelining="on", wire=12),
            row("topk", 0.3, pipelining="off", fusion="25MiB", wire=10),
            row("topk", 0.2, pipelining="on", fusion="25MiB", wire=10)]
    t = T.acpsgd_ablation(df(*rows, *[dict(r, model="m0", dense_bytes=NAN) for r in rows]))
    s = t.set_index("model")
    assert s.loc["m", W] == 0.0025 and s.loc["m", "density"] == 0.001
    assert math.isnan(s.loc["m0", W])
    empty_note(t, 1)


def test_acpsgd_buffer_and_rank_sweeps_and_scaling_show_each_methods_wire():
    e = df(row("ssgd", 0.4, fusion="1MiB"), row("ssgd", 0.3, fusion="25MiB"),
           row("acpsgd", 0.2, fusion="1MiB", wire=100), row("acpsgd", 0.1, fusion="25MiB", wire=120),
           row("topk", 0.2, fusion="1MiB", wire=8), row("topk", 0.1, fusion="25MiB", wire=8, dense=NAN))
    t = T.acpsgd_buffer_sweep(e)
    assert list(t["acpsgd wire vs dense"]) == [0.025, 0.03]           # 100 / 4000, 120 / 4000
    assert t["topk wire vs dense"].iloc[0] == 0.002 and math.isnan(t["topk wire vs dense"].iloc[1])  # 8 / 4000
    assert list(t["topk density"]) == [0.001, 0.001]
    empty_note(t, 1, "topk wire vs dense")
    rs = T.acpsgd_rank_sweep(df(row("powersgd", 0.3, rank=4, wire=200), row("acpsgd", 0.2, rank=4, wire=100),
                                row("powersgd", 0.4, rank=8, wire=400), row("acpsgd", 0.3, rank=8, wire=200)))
    assert list(rs["acpsgd wire vs dense"]) == [0.025, 0.05] and list(rs["powersgd wire vs dense"]) == [0.05, 0.1]
    no_empty_note(rs)
    sc = T.acpsgd_scaling(df(row("ssgd", 0.4, world_size=2), row("acpsgd", 0.1, world_size=2, wire=100),
                             row("ssgd", 0.5, world_size=4), row("acpsgd", 0.2, world_size=4, wire=100, dense=NAN)))
    assert sc["acpsgd wire vs dense"].iloc[0] == 0.025 and math.isnan(sc["acpsgd wire vs dense"].iloc[1])
    empty_note(sc, 1, "acpsgd wire vs dense")


# ------------------------------------------------------------------ OMGS, Marsit


def test_omgs_shows_topk_and_omgs_wire():
    rows = [row("topk", 0.5, wire=10), row("omgs", 0.4, fusion="omgs", wire=8), row("ssgd", 0.8, fusion="mgwfbp")]
    t = T.omgs(df(*rows, *[dict(r, model="m0", dense_bytes=NAN) for r in rows])).set_index("model")
    assert t.loc["m", "topk (layer-wise) wire vs dense"] == 0.0025   # 10 / 4000
    assert t.loc["m", "omgs wire vs dense"] == 0.002                 # 8 / 4000
    assert math.isnan(t.loc["m0", "omgs wire vs dense"])
    assert "ssgd (mgwfbp) wire vs dense" not in t.columns and "ssgd best wire vs dense" not in t.columns
    t = T.omgs(df(*rows, *[dict(r, model="m0", dense_bytes=NAN) for r in rows]))
    empty_note(t, 1, "topk (layer-wise) wire vs dense")
    empty_note(t, 1, "omgs wire vs dense")


def test_marsit_wire_vs_dense_replaces_the_inverse_ratio():
    e = df(row("ssgd", 0.4), row("marsit", 0.3, wire=125), row("ssgd", 0.4, model="m0", dense=NAN, wire=4000),
           row("marsit", 0.3, model="m0", dense=NAN, wire=125))
    t = T.marsit(e).set_index(["model", "method"])
    assert t.loc[("m", "marsit"), W] == 0.03125 and t.loc[("m", "ssgd"), W] == 1.0  # 125 / 4000 = 1/32
    assert math.isnan(t.loc[("m0", "marsit"), W]) and "ratio" not in t.columns
    empty_note(T.marsit(e), 2)


# ------------------------------------------------------------------ Sketch-Fusion


def test_sketch_fusion_shows_both_sides_wire_and_density():
    e = df(row("sketch", 0.5, wire=60), row("sketch", 0.45, fusion="layerfusion", wire=60),
           row("sketch-fusion", 0.4, fusion="layerfusion", wire=40),
           row("topk", 0.5, model="m0", dense=NAN, wire=10), row("topk", 0.4, model="m0", fusion="layerfusion",
                                                                  dense=NAN, wire=10))
    t = T.sketch_fusion(e)
    s = t.set_index(["model", "method"])
    assert s.loc[("m", "sketch"), "none wire vs dense"] == 0.015             # 60 / 4000
    assert s.loc[("m", "sketch"), "layerfusion wire vs dense"] == 0.015
    assert s.loc[("m", "sketch-fusion"), "none wire vs dense"] == 0.015      # per-tensor sketch without fusion
    assert s.loc[("m", "sketch-fusion"), "layerfusion wire vs dense"] == 0.01  # 40 / 4000
    assert s.loc[("m", "sketch-fusion"), "density"] == 0.001
    assert math.isnan(s.loc[("m0", "topk"), "none wire vs dense"])
    empty_note(t, 1, "none wire vs dense")
    empty_note(t, 1, "layerfusion wire vs dense")
    assert T.SKETCH_FUSION_NOTE in t.attrs["notes"]


def test_sketch_scaling_shows_both_sides_wire_per_world_size():
    rows = []
    for n in (2, 4):
        rows += [row("topk", 0.2 * n, world_size=n, wire=10 * n), row("topk", 0.1 * n, world_size=n,
                                                                     fusion="layerfusion", wire=9 * n)]
    rows += [dict(r, model="m0", dense_bytes=NAN) for r in rows]
    t = T.sketch_scaling(df(*rows))
    s = t.set_index(["model", "world_size"])
    assert s.loc[("m", 2), "none wire vs dense"] == 0.005 and s.loc[("m", 4), "none wire vs dense"] == 0.01
    assert s.loc[("m", 2), "layerfusion wire vs dense"] == 0.0045
    assert s.loc[("m", 4), "layerfusion wire vs dense"] == 0.009
    assert list(s.loc["m", "density"]) == [0.001, 0.001]
    assert s.loc["m0", "none wire vs dense"].isna().all()
    empty_note(t, 2, "none wire vs dense")
    assert len(T.sketch_scalability(t)) == 2  # the scalability table is unchanged by the new columns


# ------------------------------------------------------------------ micro, e2e overview, phases, planners


def micro_rows(with_dense=True):
    base = dict(rows=64, cols=48, world_size=2, compress_s=0.001, feedback_s=0.0, decompress_s=0.001, comm_s=0.002,
                total_s=0.004, input_gbps=1.0, compress_gbps=1.0, decompress_gbps=1.0, mem_read_gbps=10.0,
                mem_frac=0.1, rel_error=0.5, check="ok", rounds=1, rank=4, total_ci95_s=0.0001)
    out = [dict(base, method="topk", wire_bytes=10, dense_bytes=12288, ratio=1228.8),
           dict(base, method="powersgd", wire_bytes=896, dense_bytes=12288, ratio=12288 / 896, rounds=2),
           dict(base, method="acpsgd", wire_bytes=448, dense_bytes=12288, ratio=12288 / 448)]
    if not with_dense:
        out = [{k: v for k, v in r.items() if k != "dense_bytes"} for r in out]
    return pd.DataFrame(out)


def test_micro_tables_show_wire_vs_dense_not_the_inverse():
    for t in (T.micro_compress(micro_rows()), T.micro_phases(micro_rows())):
        s = t.set_index("method")
        assert s.loc["topk", W] == pytest.approx(10 / 12288) and s.loc["acpsgd", W] == pytest.approx(448 / 12288)
        assert "ratio" not in t.columns
    # micro.csv without dense_bytes: 1 / its ratio column (dense / wire), the same quotient.
    s = T.micro_phases(micro_rows(with_dense=False)).set_index("method")
    assert s.loc["topk", W] == pytest.approx(1 / 1228.8) and s.loc["powersgd", W] == pytest.approx(896 / 12288)
    a = T.acpsgd_vs_powersgd(micro_rows()).iloc[0]
    assert a["powersgd wire vs dense"] == pytest.approx(896 / 12288)
    assert a["acpsgd wire vs dense"] == pytest.approx(448 / 12288)


def test_e2e_overview_shows_the_best_configurations_wire_and_density():
    e = df(row("ssgd", 0.4), row("ssgd", 0.3, fusion="25MiB"),
           row("topk", 0.3, wire=12), row("topk", 0.2, fusion="25MiB", wire=10),  # best: 25MiB, 10 bytes
           row("dgc", 0.3, dense=NAN, wire=10))
    t = T.e2e_overview(e)
    s = t.set_index("method")
    assert s.loc["topk", W] == 0.0025 and s.loc["ssgd", W] == 1.0 and math.isnan(s.loc["dgc", W])
    assert s.loc["topk", "density"] == 0.001 and math.isnan(s.loc["ssgd", "density"])
    empty_note(t, 1)
    # several runs: a block per run, each with its own rows' ratio and its note named by run
    t = T.e2e_overview(pd.concat([e.assign(run="a"), e.assign(run="b", wire_bytes=e["wire_bytes"] * 2)]))
    s = t.set_index(["run", "method"])
    assert s.loc[("a", "topk"), W] == 0.0025 and s.loc[("b", "topk"), W] == 0.005
    assert any(n.startswith("run a: `wire vs dense` is empty on 1 row(s)") for n in t.attrs["notes"])


def test_e2e_phases_and_planner_accuracy_show_wire():
    e = df(dict(row("topk", 0.2, fusion="mgwfbp", wire=10), planned_s=0.1, bwd_sync_s=0.1),
           dict(row("ssgd", 0.4, fusion="mgwfbp"), planned_s=0.2, bwd_sync_s=0.2),
           dict(row("topk", 0.2, model="m0", fusion="mgwfbp", wire=10, dense=NAN), planned_s=0.1, bwd_sync_s=0.1))
    ph = T.e2e_phases(e).set_index(["model", "method"])
    assert ph.loc[("m", "topk"), W] == 0.0025 and ph.loc[("m", "ssgd"), W] == 1.0
    assert ph.loc[("m", "topk"), "density"] == 0.001 and math.isnan(ph.loc[("m0", "topk"), W])
    empty_note(T.e2e_phases(e), 1)
    pa = T.planner_accuracy(e)
    assert list(pa[W][:2]) == [0.0025, 1.0] and math.isnan(pa[W].iloc[2])
    empty_note(pa, 1)


# ------------------------------------------------------------------ convergence, time to accuracy


def conv(method, wire, params=1000, losses=(2.3, 1.0)):
    return [dict(run="r", world_size=2, method=method, step=i, eval_loss=x, eval_accuracy=0.5, step_s=0.01,
                 wire_bytes=wire, status="done" if i == len(losses) - 1 else "ok",
                 **({} if params is None else {"model_params": params})) for i, x in enumerate(losses)]


def test_converge_summary_wire_over_four_bytes_per_parameter():
    t = T.converge_summary(pd.DataFrame(conv("ssgd", 4000) + conv("topk", 40))).set_index("method")
    assert t.loc["ssgd", W] == 1.0 and t.loc["topk", W] == 0.01   # 40 / (4 x 1000)
    old = T.converge_summary(pd.DataFrame(conv("ssgd", 4000, None) + conv("topk", 40, None)))
    assert old[W].isna().all() and old.attrs["notes"] == [T.CONVERGE_WIRE_NOTE]


def test_time_to_accuracy_carries_the_wire_it_is_given(tmp_path):
    t = pd.DataFrame([dict(world_size=2, method="topk", iter_s=0.3, density=0.001, **{W: 0.0025})])
    assert trains.time_to_accuracy(t, CHECKS, ["world_size"])[W].tolist() == [0.0025]
    rep = R.Report(str(tmp_path), latex=False)
    R.fastest_section(rep, df(row("ssgd", 0.5), row("topk", 0.3, wire=10), row("topk", 0.3, model="m0", wire=10,
                                                                              dense=NAN)), CHECKS, [])
    f = pd.read_csv(os.path.join(tmp_path, "fastest_to_accuracy.csv")).set_index(["model", "method"])
    assert f.loc[("m", "topk"), W] == 0.0025 and f.loc[("m", "ssgd"), W] == 1.0
    assert math.isnan(f.loc[("m0", "topk"), W])
    assert "`wire vs dense` is empty on 1 row(s)" in open(os.path.join(tmp_path, "fastest_to_accuracy.md")).read()


# ------------------------------------------------------------------ simulated tables


def sim_row(model, method, iter_s, wire, dense=4000, **kw):
    return dict(schema_version=1, source="simulated", model=model, method=method, fusion="25MiB", pipelining="on",
                collective="allreduce", world_size=8, ranks_per_node=1, network="10gbe", compress_on="host",
                density=0.001, iter_s=iter_s, wire_bytes=wire, dense_bytes=dense, cost_source="x", **kw)


def test_simulated_best_shows_wire_and_density():
    t = T.simulated_best(pd.DataFrame([sim_row("m", "ssgd", 0.2, 4000), sim_row("m", "topk", 0.1, 10),
                                       sim_row("m", "powersgd", 0.1, 200), sim_row("m0", "topk", 0.1, 10, NAN)]))
    s = t.set_index(["model", "method"])
    assert s.loc[("m", "ssgd"), W] == 1.0 and s.loc[("m", "topk"), W] == 0.0025 and s.loc[("m", "powersgd"), W] == 0.05
    assert s.loc[("m", "topk"), "density"] == 0.001 and math.isnan(s.loc[("m", "powersgd"), "density"])
    assert math.isnan(s.loc[("m0", "topk"), W])
    empty_note(t, 1)
    # An older sim.csv without the byte columns: every ratio empty, said in the note.
    old = T.simulated_best(pd.DataFrame([sim_row("m", "topk", 0.1, 10)]).drop(columns=["wire_bytes", "dense_bytes"]))
    assert old[W].isna().all()
    empty_note(old, 1)


def test_paper_scale_headlines_show_each_compressed_methods_wire(tmp_path):
    # Sketch-Fusion: per-tensor sketch 60 of 4000 bytes (0.015), fused 40 (0.01) and 48 on vgg16 (0.012).
    rows = [sim("resnet50", "sketch", 1.0, fusion="none", wire_bytes=60, dense_bytes=4000),
            sim("resnet50", "sketch-fusion", 0.85, fusion="layerfusion", wire_bytes=40, dense_bytes=4000),
            sim("vgg16", "sketch", 1.0, fusion="none", wire_bytes=60, dense_bytes=4000),
            sim("vgg16", "sketch-fusion", 0.9, fusion="layerfusion", wire_bytes=48, dense_bytes=4000)]
    h = heads_of(paper(tmp_path, "sketch-fusion", rows)).xs("sketch-fusion", level="headline").iloc[0]
    assert h[W] == "sketch-fusion (layerfusion) (density 0.001) 0.01 to 0.012; sketch (none) (density 0.001) 0.015"
    # ACP-SGD over S-SGD on 10gbe: acpsgd 10 and 20 of 1000 bytes; S-SGD (dense) not listed.
    rows = [sim("resnet50", "ssgd", 4.0, wire_bytes=1000, dense_bytes=1000),
            sim("resnet50", "acpsgd", 1.0, wire_bytes=10, dense_bytes=1000),
            sim("resnet50", "powersgd", 2.0, wire_bytes=20, dense_bytes=1000),
            sim("bert-base", "ssgd", 1.0, wire_bytes=1000, dense_bytes=1000),
            sim("bert-base", "acpsgd", 0.5, wire_bytes=20, dense_bytes=1000),
            sim("bert-base", "powersgd", 0.8, wire_bytes=40, dense_bytes=1000)]
    root = paper(tmp_path / "a", "acpsgd-main", rows, sub="10gbe")
    heads = heads_of(root).xs("acpsgd-main", level="headline")
    by = dict(zip(heads["claim"], heads[W]))
    assert by["ACP-SGD faster than S-SGD (mean)"] == "acpsgd 0.01 to 0.02"
    assert by["ACP-SGD faster than Power-SGD (mean)"] == "acpsgd 0.01 to 0.02; powersgd 0.02 to 0.04"
    # DGC: 5 of 1000 bytes; a sim.csv without dense_bytes says so instead of a number.
    h = heads_of(paper(tmp_path / "d", "dgc", [sim("resnet50", "dgc", 1.0, fusion="none", wire_bytes=5,
                                                   dense_bytes=1000)])).xs("dgc", level="headline").iloc[0]
    assert h[W] == "dgc (density 0.001) 0.005"
    cell = R.wire_cell(pd.DataFrame([sim("resnet50", "marsit", 1.0)]).drop(columns=["dense_bytes"]),
                       R._compressed("ssgd", "marsit"))
    assert cell == "marsit not recorded (sim.csv rows without dense_bytes)"
    assert R.wire_cell(pd.DataFrame(), R._compressed("marsit")) == ""
