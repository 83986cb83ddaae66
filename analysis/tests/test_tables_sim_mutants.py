"""tables.py's simulator tables (sim_accuracy, sim_host_calibration, simulated_best) and the
ACP-SGD tables per setup (acpsgd_scaling, acpsgd_network, _per_setup_method) at the places
mutation testing found untested (issue 49; docs/mutation.md). Every expectation is written by
hand from the fixture's numbers, not computed by the code under test."""

import math

import pandas as pd
import pytest

from gradcomp_analysis import tables as T

from test_tables import df, row

NAN = math.nan
W = "wire vs dense"

# ------------------------------------------------------------------ sim_accuracy


def sv_rows():
    """sim_vs_measured.csv rows out of (ranks, method, pipelining) order."""
    return pd.DataFrame({
        "run": ["ra", "rb", "rc"],
        "case": ["resnet20/topk/none/pipelining=on/allgather/n=4/batch=32",
                 "vgg16/ssgd/none/pipelining=on/allreduce/n=2/batch=32",
                 # a tail past the seventh part, itself with a slash: the variant whole
                 "resnet20/ssgd/25MiB/pipelining=off/allreduce/n=2/batch=32/rank=4/x=1"],
        "method": ["topk", "ssgd", "ssgd"], "world_size": [4, 2, 2],
        "measured_iter_s": [0.004, 0.003, 0.002], "simulated_iter_s": [0.0046, 0.0033, 0.0017],
        # exactly at the tolerance (within), inside, past it below (|-0.16| > 0.15: outside)
        "rel_err": [0.15, 0.1, -0.16], "tolerance": [0.15, 0.15, 0.15],
        "role": ["validation", "fit", "validation"], "rounds": [5, 3, 4], "spread_rel": [0.2, 0.03, 0.05],
        "fit_spread_rel": [0.01, NAN, 0.02], "host_jitter_rel": [0.04, NAN, 0.06],
        "verdict": ["within", None, "too-noisy"], "oversubscribed": [None, "", "4 ranks on 2 cores"],
    })


def test_sim_accuracy_every_column_by_hand():
    t = T.sim_accuracy(sv_rows())
    assert list(t.columns) == ["run", "model", "method", "fusion", "variant", "pipelining", "ranks", "measured ms",
                               "rounds", "spread %", "fit spread %", "host jitter %", "simulated ms", "error %",
                               "within", "role", "verdict", "oversubscribed"]
    assert list(t.index) == [0, 1, 2]
    # sorted by ranks, then method, then pipelining (off before on)
    assert list(t["run"]) == ["rc", "rb", "ra"]
    assert list(t["model"]) == ["resnet20", "vgg16", "resnet20"]
    assert list(t["method"]) == ["ssgd", "ssgd", "topk"]
    assert list(t["fusion"]) == ["25MiB", "none", "none"]
    assert list(t["variant"]) == ["rank=4/x=1", "", ""]
    assert list(t["pipelining"]) == ["off", "on", "on"]
    assert list(t["ranks"]) == [2, 2, 4]
    assert list(t["measured ms"]) == pytest.approx([2.0, 3.0, 4.0])
    assert list(t["simulated ms"]) == pytest.approx([1.7, 3.3, 4.6])
    assert list(t["error %"]) == pytest.approx([-16.0, 10.0, 15.0])
    assert list(t["within"]) == ["no", "yes", "yes"]
    assert list(t["role"]) == ["validation", "fit", "validation"]
    assert list(t["rounds"]) == [4, 3, 5]
    assert list(t["spread %"]) == pytest.approx([5.0, 3.0, 20.0])
    assert t["fit spread %"][0] == pytest.approx(2.0) and math.isnan(t["fit spread %"][1])
    assert t["host jitter %"][2] == pytest.approx(4.0) and math.isnan(t["host jitter %"][1])
    assert list(t["verdict"]) == ["too-noisy", "", "within"]           # a missing verdict: empty
    assert list(t["oversubscribed"]) == ["4 ranks on 2 cores", "", ""]


def test_sim_accuracy_without_variants_or_an_oversubscribed_column():
    sv = sv_rows().iloc[:2].drop(columns=["oversubscribed", "fit_spread_rel"])
    t = T.sim_accuracy(sv)
    assert "variant" not in t.columns and "fit spread %" not in t.columns
    assert list(t["oversubscribed"]) == ["", ""] and list(t["verdict"]) == ["", "within"]
    assert list(t.columns[-3:]) == ["role", "verdict", "oversubscribed"]
    # a file from before issue 29 (no spread, no verdict): the verdict from `within`
    old = T.sim_accuracy(sv_rows().drop(columns=["rounds", "spread_rel", "verdict", "oversubscribed"]))
    assert list(old["verdict"]) == ["outside", "within", "within"] and "oversubscribed" not in old.columns
    assert "rounds" not in old.columns
    assert list(old.columns[-6:]) == ["host jitter %", "simulated ms", "error %", "within", "role", "verdict"]


# ------------------------------------------------------------------ sim_host_calibration


def host_rows():
    def h(run, n, name, phase, fixed, unit="s", lo=NAN, hi=NAN, points=10):
        return dict(run=run, kind="host", world_size=n, name=name, phase=phase, unit=unit, fixed_s=fixed,
                    round_min=lo, round_max=hi, points=points)
    return pd.DataFrame([
        # run r, 4 ranks: the pipelined latency calibrated apart (it differs): both terms, their own names
        h("r", 4, "sync-pipelining-on", "-", 0.5e-4, lo=0.4e-4, hi=0.6e-4, points=12),
        h("r", 4, "sync-pipelining-off", "-", 2e-4, lo=1e-4, hi=3e-4, points=13),
        # run r, 2 ranks: the same latency on and off: one term, `sync`
        h("r", 2, "sync-pipelining-off", "-", 2e-4, lo=1e-4, hi=3e-4, points=45),
        h("r", 2, "sync-pipelining-on", "-", 2e-4, lo=1e-4, hi=3e-4, points=45),
        h("r", 2, "sync-pipelining-off", "without ssgd", 1.8e-4),
        h("r", 2, "sync-pipelining-off", "without topk", 2.3e-4),
        h("r", 2, "sync-pipelining-off", "all but ssgd", 9e-4),            # not a leave-one-method-out row
        # a term without the calibration of every method: left out (and the terms after it kept)
        h("r", 2, "aaa", "without ssgd", 1e-4),
        # a factor: no unit scaling
        h("r", 2, "compress-scale", "-", 1.5, unit="factor", lo=1.25, hi=1.75, points=7),
        h("r", 2, "compress-scale", "without dgc", 1.25, unit="factor"),
        # run q, 2 ranks: pipelined rows apart in q only; r's 2 ranks stay one term
        h("q", 2, "sync-pipelining-on", "-", 1e-4, points=3),
        h("q", 2, "sync-pipelining-off", "-", 3e-4, points=4),
        # run p, 2 ranks: a pipelined latency without its unpipelined row: apart, kept under its own name
        h("p", 2, "sync-pipelining-on", "-", 1e-4, points=2),
    ])


def test_sim_host_calibration_every_column_by_hand():
    c = T.sim_host_calibration(host_rows())
    assert list(c.columns) == ["run", "ranks", "term", "unit", "value", "round min", "round max",
                               "one method out min", "one method out max", "rows"]
    # by run, then world size, then term name
    assert list(zip(c["run"], c["ranks"], c["term"])) == [
        ("p", 2, "sync-pipelining-on"), ("q", 2, "sync-pipelining-off"), ("q", 2, "sync-pipelining-on"),
        ("r", 2, "compress-scale"), ("r", 2, "sync"),
        ("r", 4, "sync-pipelining-off"), ("r", 4, "sync-pipelining-on")]
    assert list(c["unit"]) == ["us", "us", "us", "x", "us", "us", "us"]
    assert list(c["value"]) == pytest.approx([100, 300, 100, 1.5, 200, 200, 50])
    assert list(c["round min"][3:]) == pytest.approx([1.25, 100, 100, 40])
    assert list(c["round max"][3:]) == pytest.approx([1.75, 300, 300, 60])
    assert c["round min"][:3].isna().all() and c["round max"][:3].isna().all()
    assert c["one method out min"][3] == 1.25 and c["one method out max"][3] == 1.25
    assert c["one method out min"][4] == pytest.approx(180) and c["one method out max"][4] == pytest.approx(230)
    for i in (0, 1, 2, 5, 6):
        assert math.isnan(c["one method out min"][i]) and math.isnan(c["one method out max"][i])
    assert list(c["rows"]) == [2, 4, 3, 7, 45, 13, 12]
    assert c["ranks"].dtype.kind == "i" and c["rows"].dtype.kind == "i"


def test_sim_host_calibration_without_the_round_columns():
    c = T.sim_host_calibration(host_rows().drop(columns=["round_min", "round_max"]))
    assert c["round min"].isna().all() and c["round max"].isna().all()
    assert list(c["value"]) == pytest.approx([100, 300, 100, 1.5, 200, 200, 50])


# ------------------------------------------------------------------ simulated_best


def sim_row(model, method, iter_s, fusion="none", pipelining="on", collective="allreduce", ws=8, net="eth",
            **kw):
    return dict(model=model, method=method, fusion=fusion, pipelining=pipelining, collective=collective,
                world_size=ws, network=net, iter_s=iter_s, **kw)


def test_simulated_best_every_column_by_hand():
    rows = [sim_row("m", "ssgd", 0.2, dense_bytes=4000, wire_bytes=4000),
            sim_row("m", "ssgd", 0.1, fusion="25MiB", dense_bytes=4000, wire_bytes=4000),
            sim_row("m", "topk", 0.05, fusion="25MiB", density=0.01, dense_bytes=4000, wire_bytes=80),
            sim_row("m", "topk", 0.08, pipelining="off", density=0.01, dense_bytes=4000, wire_bytes=80),
            # another group (4 ranks) without S-SGD: no `vs ssgd`
            sim_row("m", "topk", 0.4, ws=4, density=0.001, dense_bytes=4000, wire_bytes=8),
            # a network left empty: grouped apart, as ""
            sim_row("m", "ssgd", 0.3, net=None, dense_bytes=4000, wire_bytes=4000),
            sim_row("m", "ssgd", 0.6, net=None, pipelining="off", dense_bytes=4000, wire_bytes=4000)]
    t = T.simulated_best(pd.DataFrame(rows))
    assert list(t.columns) == ["model", "ranks", "network", "method", "density", "best configuration", "iter ms", W,
                               "vs ssgd"]
    assert list(t.index) == [0, 1, 2, 3]
    # the groups in the order of their first rows
    assert list(zip(t["ranks"], t["network"], t["method"])) == [(8, "eth", "ssgd"), (8, "eth", "topk"),
                                                                (4, "eth", "topk"), (8, "", "ssgd")]
    assert list(t["best configuration"]) == ["25MiB/on/allreduce", "25MiB/on/allreduce", "none/on/allreduce",
                                             "none/on/allreduce"]
    assert list(t["iter ms"]) == pytest.approx([100, 50, 400, 300])
    assert list(t[W]) == [1.0, 0.02, 0.002, 1.0]
    assert math.isnan(t["density"][0]) and list(t["density"][1:3]) == [0.01, 0.001]
    assert t["vs ssgd"][0] == 1.0 and t["vs ssgd"][1] == pytest.approx(2.0) and math.isnan(t["vs ssgd"][2])
    assert t["vs ssgd"][3] == 1.0
    assert "notes" not in t.attrs or t.attrs["notes"] == []


def test_simulated_best_keeps_run_and_ranks_per_node_only_where_they_vary_and_names_compress_on():
    rows = [sim_row("m", "ssgd", 0.2, run="a", ranks_per_node=2, compress_on="host"),
            sim_row("m", "ssgd", 0.1, run="a", ranks_per_node=2, compress_on="device"),
            sim_row("m", "ssgd", 0.3, run="b", ranks_per_node=1, compress_on="host")]
    t = T.simulated_best(pd.DataFrame(rows))
    assert list(t.columns[:5]) == ["run", "model", "ranks", "ranks_per_node", "network"]
    assert list(t["run"]) == ["a", "b"] and list(t["ranks_per_node"]) == [2, 1]
    assert list(t["best configuration"]) == ["none/on/allreduce compress_on=device",
                                             "none/on/allreduce compress_on=host"]
    # one compress_on: not named; one run and one ranks per node: not shown
    one = T.simulated_best(pd.DataFrame(rows[:1] + [sim_row("m", "topk", 0.1, run="a", ranks_per_node=2,
                                                                     compress_on="host")]))
    assert list(one["best configuration"]) == ["none/on/allreduce", "none/on/allreduce"]
    assert "run" not in one.columns and "ranks_per_node" not in one.columns
    assert list(one["vs ssgd"]) == [1.0, 2.0]
    # no network column: an empty one; no wire columns: no size, and no density column
    bare = T.simulated_best(pd.DataFrame([dict(model="m", method="ssgd", fusion="none", pipelining="on",
                                               collective="allreduce", world_size=2, iter_s=0.1)]))
    assert list(bare.columns) == ["model", "ranks", "network", "method", "best configuration", "iter ms", W,
                                  "vs ssgd"]
    assert list(bare["network"]) == [""] and math.isnan(bare[W][0])


# ------------------------------------------------------------------ acpsgd_scaling, acpsgd_network


def test_acpsgd_scaling_every_column_by_hand():
    e = df(row("ssgd", 0.2, world_size=2, fusion="25MiB"), row("ssgd", 0.3, world_size=2),
           row("acpsgd", 0.1, world_size=2, wire=100), row("powersgd", 0.4, world_size=2, wire=200),
           row("ssgd", 0.8, world_size=4), row("acpsgd", 0.2, world_size=4, wire=100),
           row("powersgd", 0.1, world_size=4, wire=200),
           row("dgc", 0.01, world_size=4),                      # not an ACP-SGD table method: not read
           row("acpsgd", 0.05, world_size=2, collective="allgather"),  # not its own collective: not read
           row("ssgd", 0.1, world_size=2, model="m2"))          # one world size only: not in the table
    t = T.acpsgd_scaling(e)
    assert list(t.columns) == ["model", "batch", "device", "world_size", "ssgd ms", "ssgd ms ±", "powersgd ms",
                               "powersgd ms ±", "powersgd wire vs dense", "acpsgd ms", "acpsgd ms ±",
                               "acpsgd wire vs dense", "acpsgd speedup vs ssgd", "acpsgd vs ssgd",
                               "acpsgd speedup vs powersgd", "acpsgd vs powersgd", "ssgd config"]
    assert list(t["model"]) == ["m", "m"] and list(t["world_size"]) == [2, 4]
    assert list(t["ssgd ms"]) == pytest.approx([200, 800]) and list(t["acpsgd ms"]) == pytest.approx([100, 200])
    assert list(t["acpsgd speedup vs ssgd"]) == pytest.approx([2.0, 4.0])
    assert list(t["acpsgd speedup vs powersgd"]) == pytest.approx([4.0, 0.5])
    assert list(t["acpsgd vs ssgd"]) == ["faster", "faster"] and list(t["acpsgd vs powersgd"]) == ["faster", "slower"]
    assert list(t["ssgd config"]) == ["25MiB/on/allreduce", "none/on/allreduce"]
    assert list(t["acpsgd wire vs dense"]) == [0.025, 0.025] and list(t["powersgd wire vs dense"]) == [0.05, 0.05]


def test_acpsgd_scaling_refusals_and_a_model_at_exactly_two_world_sizes():
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.acpsgd_scaling(df(row("ssgd", 0.2)).iloc[:0])
    with pytest.raises(T.MissingData, match=r"^needs e2e rows of one model at two or more world sizes "
                                            r"\(one run per world size\)$"):
        T.acpsgd_scaling(df(row("ssgd", 0.2, world_size=2), row("acpsgd", 0.1, world_size=2),
                            row("dgc", 0.1, world_size=4)))  # dgc at 4 ranks does not count
    t = T.acpsgd_scaling(df(row("ssgd", 0.2, world_size=2), row("acpsgd", 0.1, world_size=4)))
    assert list(t["world_size"]) == [2, 4] and t["acpsgd speedup vs ssgd"].isna().all()
    assert list(t["acpsgd vs ssgd"]) == ["", ""]
    assert t["ssgd config"][0] == "none/on/allreduce" and pd.isna(t["ssgd config"][1])


def test_acpsgd_network_every_column_by_hand():
    e = df(row("ssgd", 0.2, network="eth"), row("acpsgd", 0.1, network="eth", ci=0.1),
           row("powersgd", 0.2, network="eth"),
           row("ssgd", 0.3, network=None), row("acpsgd", 0.1, network=None),   # unlabelled: a network of its own
           row("ssgd", 0.3, network="ib", model="m2"),                         # m2 on one network: left out
           row("dgc", 0.3, network="ib"))                                      # not read
    t = T.acpsgd_network(e)
    assert list(t.columns) == ["model", "world_size", "batch", "device", "network", "ssgd ms", "ssgd ms ±",
                               "powersgd ms", "powersgd ms ±", "powersgd wire vs dense", "acpsgd ms", "acpsgd ms ±",
                               "acpsgd wire vs dense", "acpsgd speedup vs ssgd", "acpsgd vs ssgd",
                               "acpsgd speedup vs powersgd", "acpsgd vs powersgd", "ssgd config"]
    assert list(t["network"]) == ["(unlabelled)", "eth"]  # sorted by name
    assert list(t["acpsgd speedup vs ssgd"]) == pytest.approx([3.0, 2.0])
    assert t["acpsgd vs ssgd"][1] == T.NOT_SIGNIFICANT and t["acpsgd vs ssgd"][0] == "faster"
    assert t["acpsgd speedup vs powersgd"][1] == pytest.approx(2.0) and pd.isna(t["acpsgd speedup vs powersgd"][0])
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.acpsgd_network(e.iloc[:0])
    why = r"^needs runs on two or more networks \(network.txt in each run directory\)$"
    with pytest.raises(T.MissingData, match=why):
        T.acpsgd_network(df(row("ssgd", 0.2)).drop(columns=["network"]))
    with pytest.raises(T.MissingData, match=why):  # one label, the other empty: one network
        T.acpsgd_network(df(row("ssgd", 0.2, network="eth"), row("ssgd", 0.2, network="")))
    with pytest.raises(T.MissingData, match="^needs the same model, world size and batch on two or more networks$"):
        T.acpsgd_network(df(row("ssgd", 0.2, network="eth"), row("ssgd", 0.2, network="ib", batch=20)))


def test_per_setup_method_of_two_runs_compares_within_the_run_that_holds_the_methods():
    e = df(row("ssgd", 0.2, world_size=2, run="a"), row("acpsgd", 0.1, world_size=2, run="a"),
           row("ssgd", 0.4, world_size=4, run="b"), row("acpsgd", 0.1, world_size=4, run="b"),
           row("acpsgd", 0.05, world_size=4, run="c"))
    t = T.acpsgd_scaling(e)
    assert list(zip(t["world_size"], t["run"])) == [(2, "a"), (4, "b"), (4, "c")]
    assert list(t["acpsgd speedup vs ssgd"][:2]) == pytest.approx([2.0, 4.0])
    assert pd.isna(t["acpsgd speedup vs ssgd"][2]) and pd.isna(t["ssgd config"][2])


# ------------------------------------------------------------------ micro benchmarks


def micro(method, total_s, wire, ratio, rows=64, cols=48, rank=4, ws=2, model=None, dense=12288, ci=0.0001,
          rounds=1, trains=None):
    r = dict(method=method, rows=rows, cols=cols, rank=rank, world_size=ws, total_s=total_s, wire_bytes=wire,
             ratio=ratio, dense_bytes=dense, total_ci95_s=ci, rounds=rounds, trains=trains)
    if model is not None:
        r["model"] = model
    return r


def test_acpsgd_vs_powersgd_every_column_by_hand():
    m = pd.DataFrame([
        micro("powersgd", 0.004, 896, 12288 / 896, rounds=2, trains="trains (4 steps)"),
        micro("acpsgd", 0.002, 448, 12288 / 448, trains="diverged at step 3"),
        micro("topk", 0.001, 10, 1228.8),                                   # neither method: not read
        # a shape Power-SGD does not compress (ratio 1, not > 1): left out
        micro("powersgd", 0.001, 256, 1.0, rows=8, cols=8, dense=256),
        micro("acpsgd", 0.001, 128, 2.0, rows=8, cols=8, dense=256),
        # model rows: no rows / cols, no dense_bytes (1 / ratio instead); matched by the model's name
        micro("powersgd", 0.010, 1000, 40.0, rows=None, cols=None, model="resnet20", dense=None, ci=0.004,
              rounds=2, trains="trains (4 steps)"),
        micro("acpsgd", 0.008, 600, 50.0, rows=None, cols=None, model="resnet20", dense=None, ci=0.001,
              trains="trains (4 steps)"),
        # acpsgd at another rank: no pair
        micro("acpsgd", 0.002, 448, 12288 / 448, rank=8),
    ], index=[10, 11, 12, 13, 14, 15, 16, 17])
    t = T.acpsgd_vs_powersgd(m)
    assert list(t.columns) == ["model", "rows", "cols", "rank", "world_size", "powersgd_step_ms", "acpsgd_step_ms",
                               "powersgd_step_ms ±", "acpsgd_step_ms ±", "time_ratio", "acpsgd vs powersgd",
                               "powersgd_wire_bytes", "acpsgd_wire_bytes", "wire_ratio", "powersgd " + W,
                               "acpsgd " + W, "powersgd_rounds", "acpsgd_rounds", T.TRAINS]
    assert list(t.index) == [0, 1]
    assert list(t["model"]) == ["", "resnet20"]
    assert t["rows"][0] == 64 and t["cols"][0] == 48 and pd.isna(t["rows"][1]) and pd.isna(t["cols"][1])
    assert str(t["rows"].dtype) == "Int64" and str(t["cols"].dtype) == "Int64"
    assert list(t["rank"]) == [4, 4] and list(t["world_size"]) == [2, 2]
    assert list(t["powersgd_step_ms"]) == pytest.approx([4.0, 10.0])
    assert list(t["acpsgd_step_ms"]) == pytest.approx([2.0, 8.0])
    assert list(t["powersgd_step_ms ±"]) == pytest.approx([0.1, 4.0])
    assert list(t["acpsgd_step_ms ±"]) == pytest.approx([0.1, 1.0])
    assert list(t["time_ratio"]) == pytest.approx([0.5, 0.8])               # acpsgd / powersgd
    # |2 - 4| > 0.1 + 0.1: faster; |8 - 10| <= 1 + 4: inside the noise
    assert list(t["acpsgd vs powersgd"]) == ["faster", T.NOT_SIGNIFICANT]
    assert list(t["powersgd_wire_bytes"]) == [896, 1000] and list(t["acpsgd_wire_bytes"]) == [448, 600]
    assert list(t["wire_ratio"]) == pytest.approx([0.5, 0.6])
    assert list(t["powersgd " + W]) == pytest.approx([896 / 12288, 1 / 40])
    assert list(t["acpsgd " + W]) == pytest.approx([448 / 12288, 1 / 50])
    assert list(t["powersgd_rounds"]) == [2, 2] and list(t["acpsgd_rounds"]) == [1, 1]
    assert list(t[T.TRAINS]) == ["acpsgd: diverged at step 3; others train", "all train"]


def test_acpsgd_vs_powersgd_without_the_optional_columns():
    m = pd.DataFrame([micro("powersgd", 0.004, 896, 12288 / 896), micro("acpsgd", 0.002, 448, 12288 / 448)])
    t = T.acpsgd_vs_powersgd(m.drop(columns=["total_ci95_s", "trains", "dense_bytes"]))
    assert list(t.columns[:4]) == ["rows", "cols", "rank", "world_size"] and T.TRAINS not in t.columns
    assert t["powersgd_step_ms ±"].isna().all() and t["acpsgd_step_ms ±"].isna().all()
    assert list(t["acpsgd vs powersgd"]) == [""]                            # no interval: no claim
    assert list(t["acpsgd " + W]) == pytest.approx([448 / 12288])            # 1 / ratio
    assert T.acpsgd_vs_powersgd(m[m["method"] == "powersgd"]).empty


def test_micro_wire_by_hand():
    d = pd.DataFrame({"wire_bytes": [10, 10, 10, 10], "dense_bytes": [40, None, None, None],
                      "ratio": [8.0, 5.0, 0.0, "x"]})
    w = T.micro_wire(d)
    # dense_bytes first; else 1 / ratio; a ratio of 0 or not a number: none
    assert w[0] == 0.25 and w[1] == 0.2 and math.isnan(w[2]) and math.isnan(w[3])
    assert T.micro_wire(d.drop(columns=["ratio"])).isna().tolist() == [False, True, True, True]


def micro_compress_rows():
    base = dict(rows=64, cols=48, world_size=2, compress_s=0.001, feedback_s=0.002, decompress_s=0.003,
                input_gbps=1.0, compress_gbps=2.0, decompress_gbps=3.0, mem_read_gbps=10.0, mem_frac=0.1,
                rel_error=0.5, wire_bytes=10, dense_bytes=12288, ratio=1228.8)
    return pd.DataFrame([dict(base, method="topk", model="m", tensors=3, trains="trains (4 steps)"),
                         dict(base, method="qsgd", rows=None, cols=None, model="resnet20", tensors=None,
                              wire_bytes=100, dense_bytes=None, ratio=4.0, trains=None)], index=[7, 3])


def test_micro_compress_every_column_by_hand():
    t = T.micro_compress(micro_compress_rows())
    assert list(t.columns) == ["method", "rows", "cols", "model", "tensors", "world_size", "input_gbps",
                               "compress_gbps", "decompress_gbps", "mem_read_gbps", "mem_frac", "wire_bytes", W,
                               "rel_error", "compress_ms", "feedback_ms", "decompress_ms", T.TRAINS]
    assert list(t.index) == [0, 1] and list(t["method"]) == ["topk", "qsgd"]
    assert str(t["rows"].dtype) == "Int64" and t["rows"][0] == 64 and pd.isna(t["cols"][1])
    assert list(t[W]) == pytest.approx([10 / 12288, 0.25])
    assert list(t["compress_ms"]) == pytest.approx([1.0, 1.0]) and list(t["feedback_ms"]) == pytest.approx([2, 2])
    assert list(t["decompress_ms"]) == pytest.approx([3.0, 3.0])
    assert t[T.TRAINS][0] == "trains (4 steps)" and list(t["rel_error"]) == [0.5, 0.5]
    # a file from before 8177be3 (no model, no tensors) and without verdicts
    old = T.micro_compress(micro_compress_rows().drop(columns=["model", "tensors", "trains"]))
    assert list(old.columns[:4]) == ["method", "rows", "cols", "world_size"] and T.TRAINS not in old.columns
    assert old.columns[-1] == "decompress_ms"
    with pytest.raises(T.MissingData, match="^no micro_compress rows$"):
        T.micro_compress(micro_compress_rows().iloc[:0])


def test_micro_phases_every_column_by_hand():
    base = dict(rows=64, cols=48, world_size=2, compress_s=0.001, comm_s=0.002, decompress_s=0.003,
                total_s=0.006, total_ci95_s=0.0005, check="ok", wire_bytes=10, dense_bytes=40)
    d = pd.DataFrame([dict(base, method="topk", trains="trains (4 steps)"),
                      dict(base, method="dgc", wire_bytes=20, dense_bytes=None, ratio=4.0, trains=None)],
                     index=[5, 2])
    t = T.micro_phases(d)
    assert list(t.columns) == ["method", "rows", "cols", "world_size", "wire_bytes", W, "check", "compress_ms",
                               "comm_ms", "decompress_ms", "total_ms", "total_ms ±", T.TRAINS]
    assert list(t.index) == [0, 1] and list(t["method"]) == ["topk", "dgc"]
    assert list(t[W]) == [0.25, 0.25]                                    # 10 / 40; 1 / 4
    assert list(t["compress_ms"]) == pytest.approx([1, 1]) and list(t["comm_ms"]) == pytest.approx([2, 2])
    assert list(t["decompress_ms"]) == pytest.approx([3, 3]) and list(t["total_ms"]) == pytest.approx([6, 6])
    assert list(t["total_ms ±"]) == pytest.approx([0.5, 0.5])
    assert t[T.TRAINS][0] == "trains (4 steps)" and list(t["check"]) == ["ok", "ok"]
    bare = T.micro_phases(d.drop(columns=["total_ci95_s", "trains"]))
    assert bare.columns[-1] == "total_ms" and "total_ms ±" not in bare.columns
    with pytest.raises(T.MissingData, match="^no micro rows$"):
        T.micro_phases(d.iloc[:0])


def comm(collective, nbytes, median_s, busbw, ws=2, ci=None, **kw):
    r = dict(collective=collective, bytes=nbytes, median_s=median_s, busbw_gbps=busbw, world_size=ws, **kw)
    if ci is not None:
        r["ci95_s"] = ci
    return r


def test_micro_comm_tables_every_column_by_hand():
    ov = dict(t_pure_s=1e-3, t_cpu_s=2e-3, t_overall_s=3e-3, overlap_osu_pct=0.5, overlap_imb_pct=0.25)
    d = pd.DataFrame([
        comm("allreduce", 2048, 2e-6, 1.5, ci=1e-7), comm("allgather", 2048, 3e-6, 0.5, ci=2e-7),
        comm("allreduce", 1024, 1e-6, 1.0, ci=1e-7), comm("allgather", 1024, 1.5e-6, 0.25, ci=3e-7),
        comm("allreduce", 1024, 4e-6, 2.0, ws=4, ci=5e-7),
        # the overlap rows: the median of repeats per size
        comm("iallreduce-overlap", 1024, None, None, **ov),
        comm("iallreduce-overlap", 1024, None, None, **dict(ov, t_pure_s=3e-3, overlap_osu_pct=0.75)),
        comm("iallreduce-overlap", 1024, None, None, **dict(ov, t_pure_s=2e-3, overlap_osu_pct=0.9)),
        comm("iallreduce-overlap", 4096, None, None, ws=4, **dict(ov, overlap_osu_pct=1.0)),
    ])
    out = T.micro_comm_tables(d)
    assert list(out) == ["micro_comm_np2", "micro_comm_np4", "overlap_np2", "overlap_np4"]
    t = out["micro_comm_np2"]
    assert list(t.columns) == ["size", "allgather median_us", "allgather median_us ±", "allreduce median_us",
                               "allreduce median_us ±", "allgather busbw_GB/s", "allreduce busbw_GB/s"]
    assert list(t["size"]) == ["1KiB", "2KiB"]                            # by size, ascending
    assert list(t["allreduce median_us"]) == pytest.approx([1.0, 2.0])
    assert list(t["allgather median_us"]) == pytest.approx([1.5, 3.0])
    assert list(t["allgather median_us ±"]) == pytest.approx([0.3, 0.2])
    assert list(t["allreduce median_us ±"]) == pytest.approx([0.1, 0.1])
    assert list(t["allreduce busbw_GB/s"]) == [1.0, 1.5] and list(t["allgather busbw_GB/s"]) == [0.25, 0.5]
    assert list(out["micro_comm_np4"]["allreduce median_us"]) == pytest.approx([4.0])
    o = out["overlap_np2"]
    assert list(o.columns) == ["size", "overlap_osu_pct", "overlap_imb_pct", "t_pure_us", "t_cpu_us",
                               "t_overall_us"]
    assert list(o["size"]) == ["1KiB"] and list(o["t_pure_us"]) == pytest.approx([2000.0])
    assert list(o["t_cpu_us"]) == pytest.approx([2000.0]) and list(o["t_overall_us"]) == pytest.approx([3000.0])
    assert list(o["overlap_osu_pct"]) == [0.75] and list(o["overlap_imb_pct"]) == [0.25]
    # below 1% at every size: the note says why, naming the ranks; at 1%: no note
    assert o.attrs["notes"] == [T.OVERLAP_NONE_NOTE.format(ranks=2)]
    assert T.OVERLAP_NONE_PCT == 1.0 and "notes" not in out["overlap_np4"].attrs
    assert T.OVERLAP_NONE_NOTE.startswith("overlap about 0% at every size ({ranks} ranks).")
    # without an interval column: no `±` columns
    plain = T.micro_comm_tables(d.drop(columns=["ci95_s"]))["micro_comm_np2"]
    assert list(plain.columns) == ["size", "allgather median_us", "allreduce median_us", "allgather busbw_GB/s",
                                   "allreduce busbw_GB/s"]
