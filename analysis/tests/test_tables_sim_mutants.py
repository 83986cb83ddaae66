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
    for other in ("", None):  # one label, the other empty or missing (in either order): one network
        with pytest.raises(T.MissingData, match=why):
            T.acpsgd_network(df(row("ssgd", 0.2, network="eth"), row("ssgd", 0.2, network=other)))
        with pytest.raises(T.MissingData, match=why):
            T.acpsgd_network(df(row("ssgd", 0.2, network=other), row("ssgd", 0.2, network="eth")))
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
        # ratio as the CSV rounds it: dense_bytes / wire_bytes is read where the file has dense_bytes
        micro("powersgd", 0.004, 896, 13.7, rounds=2, trains="trains (4 steps)"),
        micro("acpsgd", 0.002, 448, 27.4, trains="diverged at step 3"),
        micro("topk", 0.001, 10, 1228.8),                                   # neither method: not read
        # a shape Power-SGD does not compress (ratio 1, not > 1): left out
        micro("powersgd", 0.001, 256, 1.0, rows=8, cols=8, dense=256),
        micro("acpsgd", 0.001, 128, 2.0, rows=8, cols=8, dense=256),
        # model rows: no rows / cols, no dense_bytes (1 / ratio instead); matched by the model's name
        micro("powersgd", 0.010, 1000, 40.0, rows=None, cols=None, model="resnet20", dense=None, ci=0.004,
              rounds=2, trains="diverged at step 2"),
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
    assert list(t[T.TRAINS]) == ["acpsgd: diverged at step 3; others train",
                                 "powersgd: diverged at step 2; others train"]


def test_acpsgd_vs_powersgd_without_the_optional_columns():
    m = pd.DataFrame([micro("powersgd", 0.004, 896, 12288 / 896), micro("acpsgd", 0.002, 448, 12288 / 448)])
    t = T.acpsgd_vs_powersgd(m.drop(columns=["total_ci95_s", "trains", "dense_bytes"]))
    assert list(t.columns[:4]) == ["rows", "cols", "rank", "world_size"] and T.TRAINS not in t.columns
    assert t["powersgd_step_ms ±"].isna().all() and t["acpsgd_step_ms ±"].isna().all()
    assert list(t["acpsgd vs powersgd"]) == [""]                            # no interval: no claim
    assert list(t["acpsgd " + W]) == pytest.approx([448 / 12288])            # 1 / ratio
    assert T.acpsgd_vs_powersgd(m[m["method"] == "powersgd"]).empty
    # Power-SGD compresses a shape whose ratio is above 1, however little
    small = pd.DataFrame([micro("powersgd", 0.004, 800, 1.5, dense=1200), micro("acpsgd", 0.002, 400, 3.0, dense=1200)])
    assert list(T.acpsgd_vs_powersgd(small)["time_ratio"]) == pytest.approx([0.5])


def test_micro_wire_by_hand():
    d = pd.DataFrame({"wire_bytes": [10, 10, 10, 10, 10], "dense_bytes": [40, None, None, None, None],
                      "ratio": [8.0, 5.0, 0.0, "x", 0.5]})
    w = T.micro_wire(d)
    # dense_bytes first; else 1 / ratio (a message larger than dense too); a ratio of 0 or not a number: none
    assert w[0] == 0.25 and w[1] == 0.2 and math.isnan(w[2]) and math.isnan(w[3]) and w[4] == 2.0
    assert T.micro_wire(d.drop(columns=["ratio"])).isna().tolist() == [False, True, True, True, True]


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
        comm("allgather", 1024, 5e-6, 2.0, ws=4, ci=NAN),          # no interval at all for a collective
        # the overlap rows (median_s = t_overall_s): the median of repeats per size, in tables of their own
        comm("iallreduce-overlap", 1024, 3e-3, 0.1, **ov),
        comm("iallreduce-overlap", 1024, 3e-3, 0.1, **dict(ov, t_pure_s=3e-3, overlap_osu_pct=0.75)),
        comm("iallreduce-overlap", 1024, 3e-3, 0.1, **dict(ov, t_pure_s=2e-3, overlap_osu_pct=0.9)),
        comm("iallreduce-overlap", 4096, 3e-3, 0.1, ws=4, **dict(ov, overlap_osu_pct=1.0)),
        # an overlap not measured (empty) counts as none
        comm("iallreduce-overlap", 4096, 3e-3, 0.1, ws=8, **dict(ov, overlap_osu_pct=NAN)),
        comm("iallreduce-overlap", 8192, 3e-3, 0.1, ws=8, **dict(ov, overlap_osu_pct=0.5)),
    ])
    out = T.micro_comm_tables(d)
    assert list(out) == ["micro_comm_np2", "micro_comm_np4", "overlap_np2", "overlap_np4", "overlap_np8"]
    assert out["overlap_np8"].attrs["notes"] == [T.OVERLAP_NONE_NOTE.format(ranks=8)]
    f = out["micro_comm_np4"]
    assert list(f.columns) == ["size", "allgather median_us", "allgather median_us ±", "allreduce median_us",
                               "allreduce median_us ±", "allgather busbw_GB/s", "allreduce busbw_GB/s"]
    assert math.isnan(f["allgather median_us ±"][0]) and f["allreduce median_us ±"][0] == pytest.approx(0.5)
    t = out["micro_comm_np2"]
    assert list(t.columns) == ["size", "allgather median_us", "allgather median_us ±", "allreduce median_us",
                               "allreduce median_us ±", "allgather busbw_GB/s", "allreduce busbw_GB/s"]
    assert list(t["size"]) == ["1KiB", "2KiB"]                            # by size, ascending
    assert list(t["allreduce median_us"]) == pytest.approx([1.0, 2.0], rel=1e-9)   # seconds x 1e6
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


# ------------------------------------------------------------------ e2e_phases


def test_e2e_phases_every_column_by_hand():
    e = df(dict(row("ssgd", 0.4), trains="trains (4 steps)"), dict(row("ssgd", 0.3, fusion="25MiB"), trains="x"),
           dict(row("topk", 0.2, wire=10), trains=None),
           dict(row("topk", 0.1, collective="allreduce"), trains=None),     # not its own collective: not read
           # dgc at two densities: its own (0.001) kept, though the other is faster
           dict(row("dgc", 0.1, density=0.01), trains=None), dict(row("dgc", 0.2, wire=20), trains=None))
    t = T.e2e_phases(e)
    assert list(t.columns) == ["model", "world_size", "batch", "device", "method", "config", "compress_ms", "pack_ms",
                               "comm_ms", "decompress_ms", "exposed_ms", "iter_ms", "iter_ms ±", "density", W,
                               T.TRAINS]
    assert list(t.index) == [0, 1, 2] and list(t["method"]) == ["dgc", "ssgd", "topk"]
    assert list(t["config"]) == ["none/on", "25MiB/on", "none/on"]
    assert list(t["iter_ms"]) == pytest.approx([200, 300, 200])
    assert list(t["comm_ms"]) == pytest.approx([100, 150, 100])           # row(): comm_s = iter_s / 2
    assert list(t["exposed_ms"]) == pytest.approx([50, 75, 50])           # row(): exposed_s = iter_s / 4
    assert list(t["compress_ms"]) == pytest.approx([1, 1, 1]) and list(t["decompress_ms"]) == pytest.approx([1, 1, 1])
    assert list(t["pack_ms"]) == [0, 0, 0]
    assert list(t["iter_ms ±"]) == pytest.approx([0.2, 0.3, 0.2])         # row(): ci = iter_s / 1000
    assert t["density"][0] == 0.001 and math.isnan(t["density"][1]) and t["density"][2] == 0.001
    assert list(t[W]) == [0.005, 1.0, 0.0025]
    assert pd.isna(t[T.TRAINS][0]) and t[T.TRAINS][1] == "x"
    assert t.attrs["notes"] == []
    # without a pack_s column or verdicts; S-SGD only: no density column
    bare = T.e2e_phases(df(row("ssgd", 0.4)).drop(columns=["pack_s"]))
    assert list(bare.columns) == ["model", "world_size", "batch", "device", "method", "config", "compress_ms",
                                  "comm_ms", "decompress_ms", "exposed_ms", "iter_ms", "iter_ms ±", W]
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.e2e_phases(e.iloc[:0])


def test_e2e_phases_of_two_runs_and_two_networks():
    e = df(row("ssgd", 0.4, run="a", network="eth"), row("ssgd", 0.2, run="b", network="eth"),
           row("topk", 0.3, run="b", network="ib"))
    t = T.e2e_phases(e)
    assert list(t.columns[:7]) == ["network", "model", "world_size", "batch", "device", "run", "method"]
    # each run its own comparison (one method is enough): no `runs compared`
    assert list(zip(t["network"], t["run"], t["method"])) == [("eth", "a", "ssgd"), ("eth", "b", "ssgd"),
                                                               ("ib", "b", "topk")]
    assert "runs compared" not in t.columns and list(t["iter_ms"]) == pytest.approx([400, 200, 300])


# ------------------------------------------------------------------ sketch_fusion, sketch_scaling


def test_sketch_fusion_every_column_by_hand():
    e = df(row("powersgd", 0.1, fusion="25MiB"),                          # neither none nor layerfusion: no row
           dict(row("ssgd", 0.4), plan_source=""), dict(row("ssgd", 0.3, pipelining="off"), plan_source=""),
           dict(row("ssgd", 0.2, fusion="layerfusion"), plan_source="layerfusion"),
           dict(row("sketch", 0.5, density=0.005, wire=20), trains="trains (4 steps)"),
           dict(row("sketch", 0.45, fusion="layerfusion", density=0.005, ci=0.05, wire=40), trains="trains (4 steps)"),
           dict(row("sketch-fusion", 0.25, fusion="layerfusion", density=0.0076, wire=80),
                plan_source="layerfusion", trains="diverged at step 3"),
           row("topk", 0.3, fusion="layerfusion", wire=8),                  # no none row
           row("dgc", 0.3, wire=12),                                        # no layerfusion row
           row("omgs", 0.1), row("omgs", 0.1, fusion="layerfusion"))        # never in this table
    t = T.sketch_fusion(e)
    assert list(t.columns) == ["model", "world_size", "batch", "device", "method", "what", "density", "none ms",
                               "none ms ±", "none " + W, "layerfusion ms", "layerfusion ms ±", "layerfusion " + W,
                               "speedup", "faster %", "layerfusion vs none", "faster % (published, up to)",
                               "plan that ran", T.TRAINS]
    assert list(t["method"]) == ["ssgd", "sketch", "sketch-fusion", "topk", "dgc"]   # the rows' order
    assert list(t["what"]) == [
        "ssgd per tensor, in LayerFusion buckets", T.SKETCH_FUSION_WHAT["sketch"],
        T.SKETCH_FUSION_WHAT["sketch-fusion"], "topk per tensor, in LayerFusion buckets",
        "dgc per tensor, in LayerFusion buckets"]
    # a sparsifier's density, the layerfusion row's where it has one
    assert pd.isna(t["density"][0]) and list(t["density"][1:]) == [0.005, 0.0076, 0.001, 0.001]
    nm, lm = t["none ms"], t["layerfusion ms"]
    assert list(nm[:3]) == pytest.approx([400, 500, 500]) and pd.isna(nm[3]) and nm[4] == pytest.approx(300)
    assert list(lm[:4]) == pytest.approx([200, 450, 250, 300]) and pd.isna(lm[4])
    assert list(t["none ms ±"][:3]) == pytest.approx([0.4, 0.5, 0.5]) and pd.isna(t["none ms ±"][3])
    assert list(t["layerfusion ms ±"][:4]) == pytest.approx([0.2, 50, 0.25, 0.3])
    assert pd.isna(t["layerfusion ms ±"][4])
    assert list(t["none " + W][:3]) == [1.0, 0.005, 0.005] and pd.isna(t["none " + W][3])
    assert t["none " + W][4] == 0.003
    assert list(t["layerfusion " + W][:4]) == [1.0, 0.01, 0.02, 0.002] and pd.isna(t["layerfusion " + W][4])
    assert list(t["speedup"][:3]) == pytest.approx([2.0, 500 / 450, 2.0]) and t["speedup"][3:].isna().all()
    assert list(t["faster %"][:3]) == pytest.approx([50.0, 10.0, 50.0]) and t["faster %"][3:].isna().all()
    # 450 +- 50 vs 500 +- 0.5: inside the noise
    assert list(t["layerfusion vs none"]) == ["faster", T.NOT_SIGNIFICANT, "faster", "", ""]
    pub = t["faster % (published, up to)"]
    assert pub[2] == 18.6 and pub.drop(index=2).isna().all()
    assert list(t["plan that ran"]) == ["layerfusion", "", "layerfusion", "", ""]
    assert list(t[T.TRAINS][1:3]) == ["trains (4 steps)", "sketch-fusion: diverged at step 3; others train"]
    assert t.attrs["notes"] == [T.SKETCH_FUSION_NOTE]


def test_sketch_fusion_refusals_and_runs():
    why = r"^needs e2e rows with fusion layerfusion \(or method sketch-fusion\)$"
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.sketch_fusion(df(row("ssgd", 0.4)).iloc[:0])
    with pytest.raises(T.MissingData, match=why):
        T.sketch_fusion(df(row("ssgd", 0.4), row("ssgd", 0.4, fusion="25MiB")))
    with pytest.raises(T.MissingData, match=why):   # layerfusion rows of omgs only: no row times it
        T.sketch_fusion(df(row("ssgd", 0.4), row("omgs", 0.1, fusion="layerfusion")))
    with pytest.raises(T.MissingData, match=why):   # the only layerfusion row is not its method's collective
        T.sketch_fusion(df(row("ssgd", 0.4), row("topk", 0.1, fusion="layerfusion", collective="allreduce")))
    # two runs: each its own comparison; a network column that varies comes first
    t = T.sketch_fusion(df(row("ssgd", 0.4, run="a", network="eth"), row("ssgd", 0.2, fusion="layerfusion", run="a",
                                                                         network="eth"),
                           row("ssgd", 0.3, run="b", network="ib"), row("ssgd", 0.1, fusion="layerfusion", run="b",
                                                                        network="ib")))
    assert list(t.columns[:7]) == ["network", "model", "world_size", "batch", "device", "run", "method"]
    assert list(t["run"]) == ["a", "b"] and list(t["speedup"]) == pytest.approx([2.0, 3.0])
    assert "density" not in t.columns and T.TRAINS not in t.columns


def test_sketch_scaling_every_column_by_hand():
    rows = []
    for n, s_none, s_lf, k_none, f_lf in [(2, 0.4, 0.2, 0.5, 0.25), (4, 0.8, 0.25, 1.0, 0.4)]:
        rows += [row("ssgd", s_none, world_size=n), row("ssgd", s_lf, world_size=n, fusion="layerfusion",
                                                        ci=0.6 if n == 4 else None),
                 row("ssgd", 0.01, world_size=n, fusion="25MiB"),                    # neither: not read
                 row("ssgd", 0.01, world_size=n, pipelining="off"),                  # pipelining on preferred
                 row("sketch", k_none, world_size=n, density=0.005, wire=40),        # sketch-fusion's none
                 row("sketch-fusion", f_lf, world_size=n, fusion="layerfusion", density=0.0076, wire=80)]
    rows += [row("topk", 0.1, world_size=2), row("topk", 0.1, world_size=2, fusion="layerfusion")]  # one size
    t = T.sketch_scaling(df(*rows))
    assert list(t.columns) == ["model", "batch", "device", "method", "world_size", "density", "none samples/s",
                               "layerfusion samples/s", "none " + W, "layerfusion " + W, "layerfusion gain",
                               "layerfusion vs none"]
    assert list(zip(t["method"], t["world_size"])) == [("sketch-fusion", 2), ("sketch-fusion", 4), ("ssgd", 2),
                                                       ("ssgd", 4)]
    # samples/s = ranks x batch / iteration
    assert list(t["none samples/s"]) == pytest.approx([40, 40, 50, 50])
    assert list(t["layerfusion samples/s"]) == pytest.approx([80, 100, 100, 160])
    assert list(t["layerfusion gain"]) == pytest.approx([2.0, 2.5, 2.0, 3.2])
    assert list(t["none " + W]) == [0.01, 0.01, 1.0, 1.0] and list(t["layerfusion " + W]) == [0.02, 0.02, 1.0, 1.0]
    assert list(t["density"][:2]) == [0.0076, 0.0076] and t["density"][2:].isna().all()
    # 250 +- 600 ms vs 800: inside the noise
    assert list(t["layerfusion vs none"]) == ["faster", "faster", "faster", T.NOT_SIGNIFICANT]
    assert t.attrs["notes"] == []


def test_sketch_scaling_trains_runs_and_refusal():
    rows = []
    for n in (2, 4):
        rows += [dict(row("ssgd", 0.4, world_size=n), trains="trains (4 steps)"),
                 dict(row("ssgd", 0.2, world_size=n, fusion="layerfusion"),
                      trains="diverged at step 3" if n == 4 else "trains (4 steps)")]
    t = T.sketch_scaling(df(*rows))
    assert list(t[T.TRAINS]) == ["all train", "layerfusion: diverged at step 3; others train"]
    assert "density" not in t.columns
    # two runs, one world size each: compared across the runs of the same setup
    r = T.sketch_scaling(df(*[dict(x, run="a" if x["world_size"] == 2 else "b") for x in rows]))
    assert list(zip(r["run"], r["world_size"])) == [("a", 2), ("b", 4)]
    assert list(r["layerfusion gain"]) == pytest.approx([2.0, 2.0])
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.sketch_scaling(df(*rows).iloc[:0])
    with pytest.raises(T.MissingData, match="^needs e2e rows with fusion none and layerfusion at two or more world "
                                            "sizes$"):
        T.sketch_scaling(df(*rows[:2], rows[2]))     # layerfusion at one world size only


# ------------------------------------------------------------------ e2e_overview


def overview_rows():
    return [dict(row("ssgd", 0.4), trains="trains (4 steps)"), dict(row("ssgd", 0.5, pipelining="off"), trains="a"),
            dict(row("ssgd", 0.3, fusion="25MiB"), trains="trains (5 steps)"),
            dict(row("topk", 0.2, wire=10, ci=0.3), trains="diverged at step 3"),
            dict(row("topk", 0.25, fusion="25MiB", wire=10), trains="b"),
            dict(row("topk", 0.22, pipelining="off", wire=10), trains="c"),
            dict(row("topk", 0.01, collective="allreduce"), trains="d"),               # not its own collective
            # two ranks of one method: a label each
            dict(row("powersgd", 0.1, rank=4, wire=200), trains=None),
            dict(row("powersgd", 0.15, rank=8, wire=400), trains=None)]


def test_e2e_overview_every_column_by_hand():
    t = T.e2e_overview(df(*overview_rows()))
    cfg = ["none/off", "none/on", "25MiB/on"]   # fusion none first, then sizes; pipelining off before on
    assert list(t.columns) == ["method"] + [f"{c} {x}" for c in cfg for x in ("ms", "ms ±", "speedup", "vs ssgd")] + [
        "best config", "best ms", "best ms ±", "density", W, T.TRAINS, "speedup vs ssgd best", "vs ssgd best"]
    assert list(t["method"]) == ["powersgd r4", "powersgd r8", "ssgd", "topk"]
    c = t.set_index("method")
    assert list(c["none/off ms"].fillna(-1)) == pytest.approx([-1, -1, 500, 220])
    assert list(c["none/on ms"]) == pytest.approx([100, 150, 400, 200])
    assert list(c["25MiB/on ms"].fillna(-1)) == pytest.approx([-1, -1, 300, 250])
    assert list(c["none/on ms ±"]) == pytest.approx([0.1, 0.15, 0.4, 300])
    assert list(c["none/off ms ±"].fillna(-1)) == pytest.approx([-1, -1, 0.5, 0.22])
    assert list(c["none/on speedup"]) == pytest.approx([4.0, 400 / 150, 1.0, 2.0])      # ssgd's over the row's
    assert list(c["none/off speedup"].fillna(-1)) == pytest.approx([-1, -1, 1.0, 500 / 220])
    assert list(c["25MiB/on speedup"].fillna(-1)) == pytest.approx([-1, -1, 1.0, 1.2])
    # 200 +- 300 vs 400 +- 0.4: inside the noise; none against S-SGD itself; none without a time
    assert list(c["none/on vs ssgd"]) == ["faster", "faster", "", T.NOT_SIGNIFICANT]
    assert list(c["none/off vs ssgd"]) == ["", "", "", "faster"]
    assert list(c["25MiB/on vs ssgd"]) == ["", "", "", "faster"]
    assert list(c["best config"]) == ["none/on", "none/on", "25MiB/on", "none/on"]
    assert list(c["best ms"]) == pytest.approx([100, 150, 300, 200])
    assert list(c["best ms ±"]) == pytest.approx([0.1, 0.15, 0.3, 300])
    assert c["density"].isna().tolist() == [True, True, True, False] and c.loc["topk", "density"] == 0.001
    assert list(c[W]) == [0.05, 0.1, 1.0, 0.0025]
    assert list(c[T.TRAINS]) == [None, None, "trains (5 steps)", "diverged at step 3"]
    assert list(c["speedup vs ssgd best"]) == pytest.approx([3.0, 2.0, 1.0, 1.5])
    assert list(c["vs ssgd best"]) == ["faster", "faster", "", T.NOT_SIGNIFICANT]
    assert t.attrs["notes"] == ["`speedup` = over ssgd with the same fusion/pipelining; `speedup vs ssgd best` = "
                                "over ssgd's best configuration here, 25MiB/on/allreduce."]


def test_e2e_overview_labels_what_varies_within_a_method():
    e = df(row("topk", 0.2, density=0.001), row("topk", 0.3, density=0.01),
           row("ssgd", 0.4, batch=10), row("ssgd", 0.8, batch=20),
           row("dgc", 0.3, network="eth"), row("dgc", 0.4, network="ib"),
           row("signsgd", 0.5), dict(row("signsgd", 0.6), device="cpu"))
    t = T.e2e_overview(e)
    assert list(t["method"]) == ["dgc eth", "dgc ib", "signsgd cpu", "signsgd v100", "ssgd b10", "ssgd b20",
                                 "topk rho0.001", "topk rho0.01"]
    # no row labelled plain `ssgd`: no speedups, no note
    assert not any("speedup" in x or "vs ssgd" in x for x in t.columns) and t.attrs["notes"] == []
    assert list(t["best ms"]) == pytest.approx([300, 400, 600, 500, 400, 800, 200, 300])


def test_e2e_overview_of_two_runs_a_block_each_and_its_notes_by_run():
    e = df(*overview_rows())
    # run a's top-k without its dense size: a note of run a's only
    two = pd.concat([e.assign(run="b"), e.assign(run="a", dense_bytes=[4000] * 3 + [NAN] + [4000] * (len(e) - 4))])
    t = T.e2e_overview(two)
    assert t.columns[0] == "run" and list(t["run"]) == ["a"] * 4 + ["b"] * 4
    assert list(t["method"]) == ["powersgd r4", "powersgd r8", "ssgd", "topk"] * 2
    ssgd_note = ("`speedup` = over ssgd with the same fusion/pipelining; `speedup vs ssgd best` = over ssgd's best "
                 "configuration here, 25MiB/on/allreduce.")
    assert t.attrs["notes"] == [f"run a: {ssgd_note}", f"run a: {T.WIRE_EMPTY_NOTE.format(col=W, n=1)}",
                                f"run b: {ssgd_note}"]
    assert math.isnan(t[W][3]) and t[W][7] == 0.0025
    # a run without notes: none
    only = pd.concat([df(row("topk", 0.2)).assign(run="a"), df(row("topk", 0.3)).assign(run="b")])
    o = T.e2e_overview(only)
    assert o.attrs["notes"] == [] and list(o["best ms"]) == pytest.approx([200, 300])


# ------------------------------------------------------------------ the ablation and the sweeps


def test_acpsgd_ablation_every_column_by_hand():
    e = df(dict(row("acpsgd", 0.5, pipelining="off", collective="allgather"), trains="trains (4 steps)"),
           dict(row("acpsgd", 0.4, pipelining="off"), trains="diverged at step 3"),
           row("acpsgd", 0.3),                                                           # + pipelining
           row("acpsgd", 0.25, pipelining="off", fusion="25MiB"), row("acpsgd", 0.28, pipelining="off", fusion="1MiB"),
           row("acpsgd", 0.2, fusion="single", wire=100),                                # + pipelining + fusion
           row("acpsgd", 0.01, fusion="mgwfbp"),                                         # a planner: not a step
           row("topk", 0.6, pipelining="off"), row("topk", 0.5, wire=8),
           row("ssgd", 0.8, pipelining="off"), row("ssgd", 0.7, pipelining="off", collective="ring"),
           row("signsgd", 0.3, pipelining="off"),                                        # one step: no row
           row("dgc", 0.1, pipelining="off"), row("dgc", 0.05))                          # not a table method
    t = T.acpsgd_ablation(e)
    steps = ["all-gather ms", "all-reduce ms", "ring ms", "+ pipelining ms", "+ fusion ms", "+ pipelining + fusion ms"]
    assert list(t.columns) == ["model", "world_size", "batch", "device", "method", "collective"] + [
        x for s in steps for x in (s, s + " ±")] + ["speedup (first/last)", "last vs first", "density", W, T.TRAINS,
                                                    "+ fusion plan", "+ pipelining + fusion plan"]
    assert list(t["method"]) == ["acpsgd", "topk", "ssgd"] and list(t["collective"]) == ["allreduce", "allgather",
                                                                                        "allreduce"]
    c = t.set_index("method").astype(object).where(t.set_index("method").notna(), None)
    assert list(c["all-gather ms"]) == pytest.approx([500, 600, None])
    assert list(c["all-gather ms ±"]) == pytest.approx([0.5, 0.6, None])
    assert list(c["all-reduce ms"]) == pytest.approx([400, None, 800])
    assert list(c["ring ms"]) == pytest.approx([None, None, 700]) and list(c["ring ms ±"]) == pytest.approx(
        [None, None, 0.7])
    assert list(c["+ pipelining ms"]) == pytest.approx([300, 500, None])
    assert list(c["+ fusion ms"]) == pytest.approx([250, None, None])
    assert list(c["+ fusion ms ±"]) == pytest.approx([0.25, None, None])
    assert list(c["+ pipelining + fusion ms"]) == pytest.approx([200, None, None])
    assert list(c["+ fusion plan"]) == ["25MiB", None, None]
    assert list(c["+ pipelining + fusion plan"]) == ["single", None, None]
    # the first step present over the last: 0.5 / 0.2, 0.6 / 0.5, 0.8 / 0.7
    assert list(c["speedup (first/last)"]) == pytest.approx([2.5, 1.2, 0.8 / 0.7])
    assert list(c["last vs first"]) == ["faster", "faster", "faster"]
    assert list(c["density"]) == [None, 0.001, None]
    assert list(c[W]) == [0.025, 0.002, 1.0]                 # of the last step's row
    assert list(c[T.TRAINS]) == ["trains (4 steps)", None, None]   # the group's first row's verdict
    assert t.attrs["notes"] == []


def test_acpsgd_ablation_refusals_and_a_slower_last_step():
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.acpsgd_ablation(df(row("ssgd", 0.4)).iloc[:0])
    why = r"^needs e2e rows with pipelining off and on, fusion none and a fusion threshold$"
    with pytest.raises(T.MissingData, match=why):
        T.acpsgd_ablation(df(row("ssgd", 0.4), row("ssgd", 0.3, fusion="25MiB")))                # no pipelining off
    with pytest.raises(T.MissingData, match=why):
        T.acpsgd_ablation(df(row("ssgd", 0.4, fusion="1MiB", pipelining="off"), row("ssgd", 0.3, fusion="25MiB")))
    with pytest.raises(T.MissingData, match=why):   # dgc's rows are not read: no pipelining off left
        T.acpsgd_ablation(df(row("ssgd", 0.4), row("dgc", 0.3, pipelining="off")))
    with pytest.raises(T.MissingData, match="^needs e2e rows of one setup in two or more ablation configurations$"):
        T.acpsgd_ablation(df(row("ssgd", 0.4), row("topk", 0.3, pipelining="off")))
    t = T.acpsgd_ablation(df(row("ssgd", 0.4, pipelining="off", ci=0.01), row("ssgd", 0.5, fusion="1MiB", ci=0.01),
                             row("powersgd", 0.4, pipelining="off", ci=0.2), row("powersgd", 0.3, ci=0.2)))
    assert list(t["last vs first"]) == ["slower", T.NOT_SIGNIFICANT]
    assert list(t["speedup (first/last)"]) == pytest.approx([0.8, 0.4 / 0.3])
    assert "density" not in t.columns and "+ fusion plan" not in t.columns and "ring ms" not in t.columns
    assert t["+ pipelining + fusion plan"][0] == "1MiB"


def test_acpsgd_buffer_sweep_every_column_by_hand():
    e = df(row("ssgd", 0.4), row("ssgd", 0.3, fusion="1MiB"), row("ssgd", 0.2, fusion="25MiB"),
           row("ssgd", 0.25, fusion="single"), row("ssgd", 0.1, fusion="mgwfbp"),     # a planner: not a threshold
           row("ssgd", 0.05, fusion="25MiB", pipelining="off"),                        # pipelining on preferred
           row("acpsgd", 0.1, fusion="1MiB", wire=100), row("acpsgd", 0.12, fusion="25MiB", wire=100),
           row("topk", 0.3, fusion="1MiB", collective="allreduce"),                    # not its own collective
           row("dgc", 0.3, fusion="1MiB"), row("dgc", 0.3, fusion="4MiB"),             # not a table method
           row("ssgd", 0.3, fusion="1MiB", model="m2"), row("ssgd", 0.3, model="m2"))  # one threshold: left out
    t = T.acpsgd_buffer_sweep(e)
    assert list(t.columns) == ["model", "world_size", "batch", "device", "fusion", "ssgd ms", "ssgd ms ±",
                               "acpsgd ms", "acpsgd ms ±", "acpsgd " + W, "buffer_MiB"]
    assert list(t["fusion"]) == ["none", "1MiB", "25MiB", "single"]               # by threshold
    assert list(t["buffer_MiB"]) == [0, 1, 25, math.inf]
    assert list(t["ssgd ms"]) == pytest.approx([400, 300, 200, 250])
    assert list(t["ssgd ms ±"]) == pytest.approx([0.4, 0.3, 0.2, 0.25])
    assert list(t["acpsgd ms"].fillna(-1)) == pytest.approx([-1, 100, 120, -1])
    assert list(t["acpsgd " + W].fillna(-1)) == [-1, 0.025, 0.025, -1]
    assert list(t["model"]) == ["m"] * 4 and list(t.index) == [0, 1, 2, 3]


def test_acpsgd_buffer_sweep_refusals_and_runs():
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.acpsgd_buffer_sweep(df(row("ssgd", 0.4)).iloc[:0])
    with pytest.raises(T.MissingData, match="^needs e2e rows with two or more fusion byte thresholds$"):
        T.acpsgd_buffer_sweep(df(row("ssgd", 0.4), row("ssgd", 0.3, fusion="1MiB"), row("ssgd", 0.3, fusion="single"),
                                 row("dgc", 0.3, fusion="4MiB")))
    with pytest.raises(T.MissingData, match="^needs e2e rows of one setup with two or more fusion byte thresholds$"):
        T.acpsgd_buffer_sweep(df(row("ssgd", 0.3, fusion="1MiB"), row("ssgd", 0.3, fusion="4MiB", model="m2")))
    with pytest.raises(T.MissingData, match="^needs e2e rows of one setup and run with two or more fusion byte "
                                            "thresholds$"):
        T.acpsgd_buffer_sweep(df(row("ssgd", 0.3, fusion="1MiB", run="a"), row("ssgd", 0.3, fusion="4MiB", run="b")))
    with pytest.raises(T.MissingData, match="^needs e2e rows of one setup and run with two or more fusion byte "
                                            "thresholds$"):  # the second threshold only with pipelining off
        T.acpsgd_buffer_sweep(df(row("ssgd", 0.3, fusion="1MiB"), row("ssgd", 0.3, fusion="4MiB", pipelining="off")))
    t = T.acpsgd_buffer_sweep(df(row("ssgd", 0.3, fusion="1MiB", run="a"), row("ssgd", 0.2, fusion="4MiB", run="a"),
                                 row("ssgd", 0.5, fusion="1MiB", run="b"), row("ssgd", 0.4, fusion="4MiB", run="b")))
    assert list(zip(t["run"], t["fusion"])) == [("a", "1MiB"), ("a", "4MiB"), ("b", "1MiB"), ("b", "4MiB")]
    assert list(t["ssgd ms"]) == pytest.approx([300, 200, 500, 400])


def test_acpsgd_rank_sweep_every_column_by_hand():
    e = df(row("powersgd", 0.3, rank=4, wire=200), row("powersgd", 0.4, rank=8, wire=400),
           row("acpsgd", 0.2, rank=4, wire=100), row("acpsgd", 0.1, rank=8, wire=200),
           row("acpsgd", 0.01, rank=4, pipelining="off"),                              # pipelining on preferred
           row("acpsgd", 0.01, rank=16, collective="allgather"),                       # not its own collective
           row("ssgd", 0.5), row("ssgd", 0.45, fusion="25MiB"),
           row("ssgd", 0.01, collective="ring"),                                       # not its own collective
           row("powersgd", 0.3, rank=4, model="m2"), row("acpsgd", 0.3, rank=4, model="m2"))  # one rank: left out
    t = T.acpsgd_rank_sweep(e)
    assert list(t.columns) == ["model", "world_size", "batch", "device", "rank", "powersgd ms", "powersgd ms ±",
                               "powersgd " + W, "acpsgd ms", "acpsgd ms ±", "acpsgd " + W,
                               "acpsgd speedup vs powersgd", "acpsgd vs powersgd", "ssgd ms", "ssgd ms ±",
                               "ssgd config"]
    assert list(t["model"]) == ["m", "m"] and list(t["rank"]) == [4, 8]
    assert list(t["powersgd ms"]) == pytest.approx([300, 400]) and list(t["acpsgd ms"]) == pytest.approx([200, 100])
    assert list(t["acpsgd ms ±"]) == pytest.approx([0.2, 0.1])
    assert list(t["powersgd " + W]) == [0.05, 0.1] and list(t["acpsgd " + W]) == [0.025, 0.05]
    assert list(t["acpsgd speedup vs powersgd"]) == pytest.approx([1.5, 4.0])
    assert list(t["acpsgd vs powersgd"]) == ["faster", "faster"]
    assert list(t["ssgd ms"]) == pytest.approx([450, 450]) and list(t["ssgd ms ±"]) == pytest.approx([0.45, 0.45])
    assert list(t["ssgd config"]) == ["25MiB/on/allreduce"] * 2
    # without S-SGD rows: no S-SGD columns
    bare = T.acpsgd_rank_sweep(e[e["method"] != "ssgd"])
    assert not any(c.startswith("ssgd") for c in bare.columns)


def test_acpsgd_rank_sweep_refusals_and_ssgd_from_each_comparisons_runs():
    why = r"^needs e2e rows of powersgd/acpsgd at two or more ranks$"
    with pytest.raises(T.MissingData, match="^no e2e rows$"):
        T.acpsgd_rank_sweep(df(row("ssgd", 0.4)).iloc[:0])
    with pytest.raises(T.MissingData, match=why):
        T.acpsgd_rank_sweep(df(row("ssgd", 0.4, rank=4), row("ssgd", 0.4, rank=8)))
    with pytest.raises(T.MissingData, match=why):   # two ranks, but of different methods
        T.acpsgd_rank_sweep(df(row("powersgd", 0.4, rank=4), row("acpsgd", 0.4, rank=8)))
    e = df(row("powersgd", 0.3, rank=4, run="a"), row("acpsgd", 0.2, rank=4, run="a"),
           row("powersgd", 0.4, rank=8, run="a"), row("acpsgd", 0.1, rank=8, run="a"), row("ssgd", 0.5, run="a"),
           row("ssgd", 0.2, run="b"),                                        # another run's S-SGD: not a's
           # model m3: powersgd in run c, acpsgd in run d: compared together, S-SGD from either
           row("powersgd", 0.3, rank=4, run="c", model="m3"), row("powersgd", 0.4, rank=8, run="c", model="m3"),
           row("acpsgd", 0.3, rank=4, run="d", model="m3"), row("acpsgd", 0.2, rank=8, run="d", model="m3"),
           row("ssgd", 0.6, run="d", model="m3"), row("ssgd", 0.1, run="e", model="m3"))
    t = T.acpsgd_rank_sweep(e)
    assert list(zip(t["model"], t["run"], t["rank"])) == [("m", "a", 4), ("m", "a", 8), ("m3", "c + d", 4),
                                                          ("m3", "c + d", 8)]
    assert list(t["ssgd ms"]) == pytest.approx([500, 500, 600, 600])
    assert list(t["acpsgd speedup vs powersgd"]) == pytest.approx([1.5, 4.0, 1.0, 2.0])


def test_sketch_scaling_each_run_its_own_and_the_empty_wire_notes():
    # runs a (S-SGD) and b (top-k) at the same setups: one method each is enough, so neither is compared across
    rows = [row("ssgd", 0.4, world_size=n, run="a") for n in (2, 4)] + \
        [row("ssgd", 0.2, world_size=n, fusion="layerfusion", run="a") for n in (2, 4)] + \
        [row("topk", 0.4, world_size=n, run="b", dense=NAN) for n in (2, 4)] + \
        [row("topk", 0.2, world_size=n, fusion="layerfusion", run="b", dense=NAN if n == 4 else 4000) for n in (2, 4)]
    t = T.sketch_scaling(df(*rows))
    assert list(zip(t["run"], t["method"], t["world_size"])) == [("a", "ssgd", 2), ("a", "ssgd", 4),
                                                                 ("b", "topk", 2), ("b", "topk", 4)]
    # top-k's rows without dense_bytes: a note per side, with its count
    assert t.attrs["notes"] == [T.WIRE_EMPTY_NOTE.format(col="none " + W, n=2),
                                T.WIRE_EMPTY_NOTE.format(col="layerfusion " + W, n=1)]


def test_acpsgd_rank_sweep_runs_that_hold_both_methods_and_a_setup_without_ssgd():
    e = df(*[row(m, t, rank=r, run="g") for m, t, r in [("powersgd", 0.3, 4), ("powersgd", 0.4, 8),
                                                        ("acpsgd", 0.2, 4), ("acpsgd", 0.1, 8)]],
           row("acpsgd", 0.3, rank=4, run="h"), row("acpsgd", 0.2, rank=8, run="h"))
    # run g holds Power-SGD and ACP-SGD: its own comparison, and h's ACP-SGD rows alone
    assert list(zip(T.acpsgd_rank_sweep(e)["run"], T.acpsgd_rank_sweep(e)["rank"])) == [("g", 4), ("g", 8),
                                                                                        ("h", 4), ("h", 8)]
    # one run of the low-rank rows, S-SGD in two: no per-run S-SGD, the fastest of either
    one = df(*[row(m, t, rank=r, run="a") for m, t, r in [("powersgd", 0.3, 4), ("powersgd", 0.4, 8),
                                                          ("acpsgd", 0.2, 4), ("acpsgd", 0.1, 8)]],
             row("ssgd", 0.5, run="a"), row("ssgd", 0.25, run="b"),
             row("powersgd", 0.3, rank=4, model="m7", run="a"), row("powersgd", 0.3, rank=8, model="m7", run="a"))
    t = T.acpsgd_rank_sweep(one)
    assert "run" not in t.columns and list(t["model"]) == ["m", "m", "m7", "m7"]
    assert list(t["ssgd ms"][:2]) == pytest.approx([250, 250]) and t["ssgd ms"][2:].isna().all()


def test_acpsgd_buffer_sweep_thresholds_are_positive_and_finite_at_each_filter():
    t = T.acpsgd_buffer_sweep(df(row("ssgd", 0.3, fusion="1B"), row("ssgd", 0.2, fusion="1KiB")))
    assert list(t["buffer_MiB"]) == [1 / 2 ** 20, 1 / 1024]                 # one byte is a threshold too
    one = "^needs e2e rows of one setup with two or more fusion byte thresholds$"
    for other in ("none", "single"):   # neither counts as a threshold of a setup
        with pytest.raises(T.MissingData, match=one):
            T.acpsgd_buffer_sweep(df(row("ssgd", 0.3, fusion="1MiB"), row("ssgd", 0.3, fusion=other),
                                     row("ssgd", 0.3, fusion="4MiB", model="m2"),
                                     row("ssgd", 0.3, fusion=other, model="m2")))
        with pytest.raises(T.MissingData, match="^needs e2e rows of one setup and run with two or more fusion "
                                                "byte thresholds$"):
            T.acpsgd_buffer_sweep(df(row("ssgd", 0.3, fusion="1MiB"), row("ssgd", 0.3, fusion="4MiB", pipelining="off"),
                                     row("ssgd", 0.3, fusion=other)))


def test_sketch_fusion_runs_setups_in_order_and_the_empty_wire_notes():
    t = T.sketch_fusion(df(row("ssgd", 0.2, fusion="layerfusion")))           # layerfusion rows only
    assert list(t["layerfusion ms"]) == pytest.approx([200]) and pd.isna(t["none ms"][0])
    # runs a (S-SGD) and b (top-k) of one setup: one method each is enough, so no comparison across them
    t = T.sketch_fusion(df(row("ssgd", 0.4, run="a"), row("ssgd", 0.2, fusion="layerfusion", run="a"),
                           row("topk", 0.4, run="b"), row("topk", 0.1, fusion="layerfusion", run="b", dense=NAN)))
    assert list(zip(t["run"], t["method"])) == [("a", "ssgd"), ("b", "topk")]
    assert t.attrs["notes"] == [T.SKETCH_FUSION_NOTE, T.WIRE_EMPTY_NOTE.format(col="layerfusion " + W, n=1)]
    t = T.sketch_fusion(df(row("ssgd", 0.4, model="z", dense=NAN), row("ssgd", 0.2, fusion="layerfusion", model="z"),
                           row("ssgd", 0.4, model="a"), row("ssgd", 0.2, fusion="layerfusion", model="a")))
    assert list(t["model"]) == ["z", "a"]                                     # the setups in the rows' order
    assert t.attrs["notes"] == [T.SKETCH_FUSION_NOTE, T.WIRE_EMPTY_NOTE.format(col="none " + W, n=1)]


def test_acpsgd_ablation_note_of_a_last_step_without_dense_bytes_and_e2e_overview_of_one_run():
    t = T.acpsgd_ablation(df(row("ssgd", 0.4, pipelining="off"), row("ssgd", 0.3, dense=NAN)))
    assert math.isnan(t[W][0]) and t.attrs["notes"] == [T.WIRE_EMPTY_NOTE.format(col=W, n=1)]
    # a run column of one run: no run column, no run in the notes
    o = T.e2e_overview(df(row("ssgd", 0.4, run="a"), row("topk", 0.2, run="a")))
    assert "run" not in o.columns and o.attrs["notes"][0].startswith("`speedup` = over ssgd")


def test_acpsgd_ablation_runs_a_one_byte_threshold_and_the_last_step_against_the_first():
    # two runs of one setup, one method each: each run is its own ablation
    e = df(*[row("ssgd", t, pipelining=p, run=r) for r in ("a", "b") for p, t in (("off", 0.4), ("on", 0.3))])
    t = T.acpsgd_ablation(e)
    assert list(t["run"]) == ["a", "b"] and list(t["speedup (first/last)"]) == pytest.approx([4 / 3, 4 / 3])
    # a threshold of one byte fuses
    t = T.acpsgd_ablation(df(row("ssgd", 0.4, pipelining="off"), row("ssgd", 0.35),
                             row("ssgd", 0.3, pipelining="off", fusion="1B")))
    assert t["+ fusion ms"][0] == pytest.approx(300) and t["+ fusion plan"][0] == "1B"
    assert t["speedup (first/last)"][0] == pytest.approx(0.4 / 0.3)
    # the last step (0.2 +- 0.001) against the first (0.4 +- 0.001): faster, whatever the step between (slower,
    # with a wide interval)
    t = T.acpsgd_ablation(df(row("ssgd", 0.4, pipelining="off", ci=0.001), row("ssgd", 0.5, ci=0.5),
                             row("ssgd", 0.2, pipelining="off", fusion="25MiB", ci=0.001)))
    assert list(t["last vs first"]) == ["faster"] and t["speedup (first/last)"][0] == pytest.approx(2.0)


def test_e2e_overview_orders_configurations_by_fusion_first_and_keeps_one_without_an_interval():
    e = df(row("acpsgd", 0.1, fusion="25MiB"),                     # the first label: only 25MiB/on
           row("ssgd", 0.4), row("ssgd", 0.3, fusion="25MiB"), row("ssgd", 0.5, pipelining="off"),
           dict(row("topk", 0.2, fusion="25MiB", pipelining="off"), iters=1),   # one iteration: no interval
           row("topk", 0.25, density=1e-05, wire=1))
    t = T.e2e_overview(e)
    assert [c[:-3] for c in t.columns if c.endswith(" ms") and "/" in c] == ["none/off", "none/on", "25MiB/off",
                                                                              "25MiB/on"]
    assert list(t["method"]) == ["acpsgd", "ssgd", "topk rho0.001", "topk rho1e-05"]   # `:g`, not `:G`
    assert t.set_index("method").loc["topk rho0.001", "25MiB/off ms"] == pytest.approx(200)
    assert t["25MiB/off ms ±"].isna().all()
