"""The `trains` verdicts and time to accuracy (trains.py), at the places mutation testing found
untested (issue 49; docs/mutation.md). Every expectation is written by hand from the fixture's
numbers; the checks tables fed to `verdict` and `time_to_accuracy` are made by hand too, so a
wrong `checks` cannot hide a wrong `matching`.

The dense S-SGD of the converge fixtures: three seeds whose final held-out (loss, accuracy)
are (1.0, 0.80), (1.2, 0.70), (1.1, 0.75): target loss 1.1 + 2.920 x 0.1 x sqrt(4/3) = 1.4372,
accuracy 0.75 - 2.920 x 0.05 x sqrt(4/3) = 0.5814 (test_trains.py derives the rule)."""

import math

import pandas as pd
import pytest

from gradcomp_analysis import trains

TARGET_LOSS = 1.1 + 2.920 * 0.1 * math.sqrt(4 / 3)
TARGET_ACC = 0.75 - 2.920 * 0.05 * math.sqrt(4 / 3)
MEETS = (1.3, 0.65)    # within the target
MISSES = (1.5, 0.70)   # loss above it


def curve(method, seed, evals, last=3, status="done", ws=2, run="r1", steps=4, **cols):
    """converge.csv rows of one case: steps 0..LAST, EVALS {step: (loss, accuracy)}, the last
    row's STATUS (the others `ok`)."""
    rows = []
    for step in range(last + 1):
        loss, acc = evals.get(step, (math.nan, math.nan))
        rows.append(dict(run=run, method=method, world_size=ws, seed=seed, steps=steps, batch=32, step=step,
                         eval_loss=loss, eval_accuracy=acc, status=status if step == last else "ok",
                         density=0.001, rank=4, qsgd_levels=127, **cols))
    return rows


def dense(ws=2, run="r1", finals=((1.0, 0.80), (1.2, 0.70), (1.1, 0.75)), **kw):
    out = []
    for seed, f in enumerate(finals, start=1):
        out += curve("ssgd", seed, {1: (2.0, 0.3), 3: f}, ws=ws, run=run, **kw)
    return out


def frame(*rows):
    return pd.DataFrame([r for rs in rows for r in rs])


def by_method(c):
    return c.set_index("method")


# ------------------------------------------------------------------ small helpers by hand


def test_params_of_each_method_by_hand():
    assert trains.params_of("ssgd") == []
    assert trains.params_of("signsgd") == []
    assert trains.params_of("topk") == ["density"]
    assert trains.params_of("dgc") == ["density"]
    assert trains.params_of("topk-noef") == ["density"]
    assert trains.params_of("dgc-noef") == ["density"]
    assert trains.params_of("powersgd") == ["rank"]
    assert trains.params_of("acpsgd-noef") == ["rank"]
    assert trains.params_of("sketch") == ["density", "sketch_rows", "sketch_cols_per_k"]
    assert trains.params_of("qsgd") == ["qsgd_levels"]


def test_t95_at_the_table_edges():
    assert trains.t95(0) == math.inf and trains.t95(-3) == math.inf
    assert trains.t95(1) == 6.314 and trains.t95(2) == 2.920
    assert trains.t95(119) == 1.671 and trains.t95(120) == 1.658 and trains.t95(121) == 1.645


def test_two_dense_seeds_are_enough_for_a_target():
    got = trains.target([(1.0, 0.8), (1.2, 0.7)])
    k = 6.314 * math.sqrt(1.5)
    assert got[0] == pytest.approx(1.1 + k * math.sqrt(0.02))
    assert got[1] == pytest.approx(0.75 - k * math.sqrt(0.005))
    assert got[2:4] == (2, pytest.approx(1.1)) and got[4] == pytest.approx(math.sqrt(0.02))


def test_steps_to_meets_the_target_at_equality_and_ignores_other_empty_columns():
    c = pd.DataFrame({"step": [0, 1, 2, 3], "eval_loss": [math.nan, 1.5, math.nan, 1.0],
                      "eval_accuracy": [math.nan, 0.5, math.nan, 0.8], "wire_bytes": math.nan})
    assert trains.steps_to(c, (1.5, 0.5)) == (2, 1.0, 4)
    assert trains.steps_to(c, (1.4, 0.5)) == (4, 1.0, 4)
    assert trains.steps_to(c, (1.5, 0.6)) == (4, 1.0, 4)


def test_sketch_sizes_of_run_records_by_hand():
    recs = ["not a record",
            {"run_id": "r1", "config": {"converge": [{"methods": ["sketch", "topk"], "params": {"sketch_rows": 5}}]}},
            {"run_id": "r2", "config": None},
            {"run_id": "r1", "config": {"converge": [{"methods": ["sketch"], "params": {"sketch_rows": 9}}]}}]
    assert trains._sketch_sizes(recs) == {("r1", "sketch"): {"sketch_rows": 5, "sketch_cols_per_k": 10.0},
                                          ("r1", "topk"): {"sketch_rows": 5, "sketch_cols_per_k": 10.0}}


def test_fmt_steps_by_hand():
    assert trains._fmt_steps([4]) == "4 steps"
    assert trains._fmt_steps([4, 2]) == "2 steps, 2-4 over 2 seeds"
    assert trains._fmt_steps([6, 2, 4]) == "4 steps, 2-6 over 3 seeds"


def test_same_parameter_values_by_hand():
    assert trains._same(0.001, 0.0010000001)      # relative 1e-7: the same density
    assert not trains._same(0.001, 0.0010001)     # relative 1e-4: another
    assert trains._same("0.001", 0.001)
    assert not trains._same("a", 1) and not trains._same(None, 1)


def test_summarise_takes_the_worst_kind_then_the_largest_ratio():
    def s(*rows):
        return trains.summarise(pd.DataFrame(rows, columns=["kind", "text", "ratio"]))
    assert s(("trains", "T", 1.0), ("diverged", "DV", math.nan)) == "DV, 1 of 2 runs"
    assert s(("does not reach dense", "X1", 1.2), ("does not reach dense", "X2", 1.5)) == "X2"
    assert s(("does not reach dense", "N", math.nan), ("does not reach dense", "X", 1.5)) == "X"
    assert s(("interrupted", "I", 1.0), ("does not reach dense", "X", 1.5), ("trains", "T", 1.0)) \
        == "I, 1 of 3 runs"


# ------------------------------------------------------------------ checks, by hand


def test_a_configuration_diverged_at_one_seed_of_three_says_so():
    d = frame(dense(),
              curve("topk", 1, {1: (2.0, 0.3)}, last=2, status="diverged"),
              curve("topk", 2, {3: MEETS}), curve("topk", 3, {3: MEETS}))
    c = by_method(trains.checks(d))
    assert c.loc["topk", "kind"] == "diverged"
    assert c.loc["topk", "text"] == "diverged at step 2 (seed 1), 1 of 3 seeds"
    assert c.loc["topk", "seeds"] == 3 and c.loc["ssgd", "seeds"] == 3


def test_the_first_seed_names_the_divergence_whatever_the_row_order():
    d = frame(dense(), curve("topk", 2, {}, last=2, status="diverged"), curve("topk", 1, {}, last=1, status="diverged"))
    assert by_method(trains.checks(d)).loc["topk", "text"] == "diverged at step 1 (seed 1)"


def test_a_curve_of_one_row_has_its_verdict():
    d = frame(dense(), curve("topk", 1, {}, last=0, status="diverged"))
    assert by_method(trains.checks(d)).loc["topk", "text"] == "diverged at step 0 (seed 1)"


def test_interrupted_curves():
    d = frame(dense(),
              # the last row says ok, though all 4 steps are there: the run did not finish
              curve("powersgd", 1, {3: MEETS}, status="ok"),
              # done, but after 3 of its 4 steps; the other seed trains
              curve("qsgd", 1, {1: MEETS}, last=2), curve("qsgd", 2, {3: MEETS}),
              # interrupted is worse than not reaching dense
              curve("marsit", 1, {1: MISSES}, last=1, status="ok"), curve("marsit", 2, {3: MISSES}))
    c = by_method(trains.checks(d))
    assert c.loc["powersgd", "text"] == "interrupted at step 4 of 4"
    assert c.loc["qsgd", "text"] == "interrupted at step 3 of 4, 1 of 2 seeds"
    assert c.loc["marsit", "kind"] == "interrupted"
    assert c.loc["marsit", "text"] == "interrupted at step 2 of 4, 1 of 2 seeds"


def test_without_a_steps_column_a_finished_curve_is_complete():
    d = frame(dense(), curve("topk", 1, {3: MEETS})).drop(columns=["steps"])
    c = by_method(trains.checks(d))
    assert c.loc["topk", "text"] == "trains (dense accuracy in 4 steps)"
    assert c.loc["ssgd", "kind"] == "trains"


def test_without_a_seed_column_every_case_is_seed_0():
    d = frame(curve("ssgd", 1, {3: (1.0, 0.8)}), curve("topk", 1, {1: (2.0, 0.3)}, last=2, status="diverged"))
    c = by_method(trains.checks(d.drop(columns=["seed"])))
    assert c.loc["topk", "text"] == "diverged at step 2 (seed 0)"
    assert c.loc["ssgd", "seeds"] == 1


def test_no_dense_target_texts_by_hand():
    one = frame(curve("ssgd", 1, {3: (1.0, 0.8)}),
                curve("topk", 1, {3: (1.4, 0.6)}), curve("topk", 2, {1: (2.0, 0.3)}, last=2, status="diverged"),
                curve("qsgd", 1, {3: (1.5, 0.6)}))
    c = by_method(trains.checks(one))
    # the worst seed decides: seed 2 diverged
    assert c.loc["topk", "text"] == "diverged at step 2 (seed 2), 1 of 2 seeds"
    assert c.loc["qsgd", "text"] == "no dense target (dense S-SGD at fewer than 2 seeds; 1.50x its final loss)"
    none = frame(curve("topk", 1, {3: (1.4, 0.6)}), curve("topk", 2, {3: (1.4, 0.6)}))
    c = by_method(trains.checks(none))
    assert c.loc["topk", "text"] == "no dense target (dense S-SGD at fewer than 2 seeds; no dense run of this setup)"
    assert math.isnan(c.loc["topk", "ratio"]) and c.loc["topk", "dense_seeds"] == 0


def test_the_final_loss_is_the_last_evaluation():
    # dense evaluated three times: the last one counts (1.0, 1.2, 1.1 as above)
    d = frame(*(curve("ssgd", s, {1: (3.0, 0.1), 2: (2.0, 0.3), 3: f}) for s, f in
                ((1, (1.0, 0.80)), (2, (1.2, 0.70)), (3, (1.1, 0.75)))),
              curve("topk", 1, {1: (3.0, 0.1), 2: (2.2, 0.3), 3: (1.32, 0.65)}))
    c = by_method(trains.checks(d))
    assert c.loc["topk", "target_loss"] == pytest.approx(TARGET_LOSS)
    assert c.loc["topk", "target_accuracy"] == pytest.approx(TARGET_ACC)
    assert c.loc["topk", "ratio"] == pytest.approx(1.32 / 1.1)


def test_an_empty_column_does_not_hide_the_evaluations():
    d = frame(dense(update_rel_err=math.nan), curve("topk", 1, {3: (1.32, 0.65)}, update_rel_err=math.nan))
    c = by_method(trains.checks(d))
    assert c.loc["topk", "ratio"] == pytest.approx(1.32 / 1.1)
    assert c.loc["topk", "text"] == "trains (dense accuracy in 4 steps)"
    assert c.loc["topk", "target_loss"] == pytest.approx(TARGET_LOSS)


def test_a_finished_curve_without_evaluations_has_no_final_loss():
    d = frame(dense(), curve("topk", 1, {}))
    c = by_method(trains.checks(d))
    assert c.loc["topk", "kind"] == "does not reach dense" and math.isnan(c.loc["topk", "ratio"])


def test_steps_only_when_every_seed_trains():
    d = frame(dense(), curve("topk", 1, {1: MEETS, 3: MEETS}), curve("topk", 2, {3: MISSES}))
    c = by_method(trains.checks(d))
    assert c.loc["topk", "kind"] == "does not reach dense"
    assert c.loc["topk", "text"] == "does not reach dense at 1 of 2 seeds (best 1.500 at step 4; target 1.437)"
    assert math.isnan(c.loc["topk", "steps"]) and math.isnan(c.loc["topk", "steps_lo"])
    assert math.isnan(c.loc["topk", "steps_hi"])
    assert (c.loc["ssgd", "steps"], c.loc["ssgd", "steps_lo"], c.loc["ssgd", "steps_hi"]) == (4, 4, 4)


def test_an_unfinished_dense_seed_is_not_part_of_the_target():
    d = frame(dense(), curve("ssgd", 4, {1: (0.5, 0.95)}, last=1, status="ok"), curve("topk", 1, {3: MEETS}))
    c = by_method(trains.checks(d))
    assert c.loc["topk", "dense_seeds"] == 3
    assert c.loc["topk", "target_loss"] == pytest.approx(TARGET_LOSS)


def test_setup_id_separates_setups_that_share_every_other_column():
    d = frame(dense(setup_id="a"), dense(setup_id="b", finals=((2.0, 0.80), (2.2, 0.70), (2.1, 0.75))),
              curve("topk", 1, {3: MEETS}, setup_id="a"), curve("topk", 1, {3: MEETS}, setup_id="b"))
    c = trains.checks(d)
    t = c[c["method"] == "topk"]
    assert list(t["target_loss"]) == [pytest.approx(TARGET_LOSS), pytest.approx(TARGET_LOSS + 1.0)]
    assert list(t["dense_seeds"]) == [3, 3]


def test_checks_keep_the_order_of_the_file():
    d = frame(curve("topk", 1, {3: MEETS}, ws=4), dense(ws=4), curve("powersgd", 1, {3: MEETS}, ws=4),
              dense(ws=2), curve("topk", 1, {3: MEETS}, ws=2))
    c = trains.checks(d)
    assert list(zip(c["method"], c["world_size"])) == [("topk", 4), ("ssgd", 4), ("powersgd", 4),
                                                       ("ssgd", 2), ("topk", 2)]


def test_parameters_a_file_lacks_or_leaves_empty_are_none():
    d = frame(dense(), curve("topk", 1, {3: MEETS})).drop(columns=["rank"])
    d.loc[d["method"] == "ssgd", "density"] = math.nan
    c = by_method(trains.checks(d))
    assert pd.isna(c.loc["ssgd", "density"]) and pd.isna(c.loc["topk", "rank"])
    assert pd.isna(c.loc["ssgd", "qsgd_levels"]) is False and c.loc["ssgd", "qsgd_levels"] == 127
    assert c.loc["topk", "density"] == 0.001


# ------------------------------------------------------------------ matching and verdict


CHECKS = pd.DataFrame([
    ("ssgd", 2, None, None, "trains", "trains (A)", 1.0, 4, 2, 4),
    ("powersgd", 2, None, 4, "trains", "trains (B)", 1.05, 4, 4, 4),
    ("topk", 2, 0.001, None, "trains", "trains (C)", 1.1, 4, 4, 4),
    ("topk", 8, 0.001, None, "does not reach dense", "does not reach dense (D)", 1.3, math.nan, math.nan, math.nan),
    ("marsit", 2, None, None, "does not reach dense", "does not reach dense (E)", 1.4, math.nan, math.nan, math.nan),
    ("dgc", 2, 0.001, None, "trains", "trains (F2)", 1.0, 4, 4, 4),
    ("dgc", 6, 0.001, None, "trains", "trains (F6)", 1.0, 4, 4, 4),
], columns=["method", "world_size", "density", "rank", "kind", "text", "ratio", "steps", "steps_lo", "steps_hi"])


def test_a_parameter_the_timing_row_lacks_is_not_compared():
    assert trains.verdict(CHECKS, "topk", 2, {}) == "trains (C)"
    assert trains.verdict(CHECKS, "topk", 2, {"density": math.nan}) == "trains (C)"
    assert trains.verdict(CHECKS, "topk", 2, {"density": None}) == "trains (C)"
    assert trains.verdict(CHECKS, "topk", 2, {"density": 0.01}) == trains.NOT_CHECKED


def test_the_nearest_world_size_checked_and_the_larger_on_a_tie():
    assert trains.verdict(CHECKS, "topk", 6, {"density": 0.001}) == "does not reach dense (D) at np 8"
    assert trains.verdict(CHECKS, "topk", 4, {"density": 0.001}) == "trains (C) at np 2"
    assert trains.verdict(CHECKS, "dgc", 4, {"density": 0.001}) == "trains (F6) at np 6"
    assert trains.verdict(CHECKS, "dgc", 2, {"density": 0.001}) == "trains (F2)"
    assert trains.matching(CHECKS, "dgc", 4, {})[1] == 6


def test_a_world_size_that_is_not_a_number_lists_every_one_checked():
    assert trains.verdict(CHECKS, "topk", "n/a", {"density": 0.001}) == \
        "does not reach dense (D), 1 of 2 runs (np 2, 8)"
    assert trains.verdict(CHECKS, "marsit", None, {}) == "does not reach dense (E) (np 2)"


# ------------------------------------------------------------------ time to accuracy

TTA_COLUMNS = ["network", "world_size", "method", "config", "iter_ms", "steps", "tta_s", "tta_lo_s", "tta_hi_s",
               "converge_np", "verdict", "speedup_vs_ssgd", "place", "tie"]


def test_time_to_accuracy_table_by_hand():
    """Group 1 (4 ranks, checked at 2): powersgd 4 steps x 0.25 s = 1.0 s [1.0, 1.0]; topk 4 x 0.3 =
    1.2 [1.2, 1.2]; ssgd 4 (2-4) x 0.5 = 2.0 [1.0, 2.0]; marsit never reaches dense. Ties with
    the fastest (upper end 1.0): ssgd (lower end 1.0, at equality), not topk. Group 2 (2 ranks):
    marsit and a method never checked: nothing ranked, no ties. No interval column: none."""
    nan = math.nan
    t = pd.DataFrame([
        dict(network=nan, world_size=4, method="ssgd", iter_s=0.5, config="none/on/allreduce"),
        dict(network=nan, world_size=4, method="topk", iter_s=0.3, density=0.001),
        dict(network=nan, world_size=4, method="powersgd", iter_s=0.25, rank=4),
        dict(network=nan, world_size=4, method="marsit", iter_s=0.01),
        dict(network=nan, world_size=2, method="marsit", iter_s=0.02),
        dict(network=nan, world_size=2, method="signsgd", iter_s=0.03),
    ])
    r = trains.time_to_accuracy(t, CHECKS, ["network", "world_size"])
    assert list(r.columns) == TTA_COLUMNS
    assert list(r.index) == list(range(6))
    assert list(r["method"]) == ["powersgd", "topk", "ssgd", "marsit", "marsit", "signsgd"]
    assert list(r["world_size"]) == [4, 4, 4, 4, 2, 2]
    assert r["network"].isna().all()
    assert r["config"].iloc[2] == "none/on/allreduce" and r["config"].drop(2).isna().all()
    assert list(r["iter_ms"]) == pytest.approx([250, 300, 500, 10, 20, 30])
    assert list(r["converge_np"][:5]) == [2, 2, 2, 2, 2] and pd.isna(r["converge_np"].iloc[5])
    assert list(r["steps"][:3]) == [4, 4, 4] and r["steps"][3:].isna().all()
    assert list(r["tta_s"][:3]) == pytest.approx([1.0, 1.2, 2.0])
    assert list(r["tta_lo_s"][:3]) == pytest.approx([1.0, 1.2, 1.0])
    assert list(r["tta_hi_s"][:3]) == pytest.approx([1.0, 1.2, 2.0])
    assert list(r["speedup_vs_ssgd"][:3]) == pytest.approx([2.0, 2.0 / 1.2, 1.0])
    assert list(r["place"][:3]) == [1, 2, 3] and r["place"][3:].isna().all()
    assert [x is True or x is False for x in r["tie"]] == [True] * 6
    assert list(r["tie"]) == [False, False, True, False, False, False]
    assert list(r["verdict"]) == ["trains (B)", "trains (C)", "trains (A)", "does not reach dense (E)",
                                  "does not reach dense (E)", trains.NOT_CHECKED]


def test_time_to_accuracy_interval_from_iter_ci():
    t = pd.DataFrame([dict(world_size=2, method="ssgd", iter_s=0.5, iter_ci95_s=0.1),
                      dict(world_size=2, method="powersgd", iter_s=0.25, iter_ci95_s=math.nan, rank=4)])
    r = trains.time_to_accuracy(t, CHECKS, ["world_size"]).set_index("method")
    assert list(r["config"]) == ["", ""]  # no config column
    assert (r.loc["ssgd", "tta_lo_s"], r.loc["ssgd", "tta_hi_s"]) == (pytest.approx(2 * 0.4), pytest.approx(4 * 0.6))
    assert (r.loc["powersgd", "tta_lo_s"], r.loc["powersgd", "tta_hi_s"]) == (pytest.approx(1.0), pytest.approx(1.0))


def test_time_to_accuracy_of_no_rows_is_empty():
    r = trains.time_to_accuracy(pd.DataFrame(columns=["world_size", "method", "iter_s"]), CHECKS, ["world_size"])
    assert r.empty
