"""Property-based tests (hypothesis) of the rules behind the verdicts (issue 49): each
states an invariant that holds for every input, checked on generated ones. References
are independent of the code: `statistics.median_low` for the lower median, and the
rules' own definitions written out here."""

import math
import statistics

import pandas as pd
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gradcomp_analysis import compare as C
from gradcomp_analysis import tables as T
from gradcomp_analysis import verdict as V
from gradcomp_analysis.report import _speedup_claim

# Derandomized and without an example database: `make test` checks the same examples on every
# machine and writes nothing into the tree.
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
times = st.floats(min_value=1e-4, max_value=10.0, allow_nan=False, allow_infinity=False)


def e2e(rows, ci=0.0):
    """e2e rows: [(method, iter_s)]; a method listed twice is a repeat of one case."""
    return pd.DataFrame([dict(case_id=f"c{i}", model="resnet20", method=m, fusion="none", pipelining="on",
                              collective="allreduce", aggregation="allreduce", world_size=4, batch=32,
                              device="v100", compress_on="host", iters=20, warmup=2, iter_s=t, iter_ci95_s=ci,
                              wire_bytes=1000, seq=i)
                         for i, (m, t) in enumerate(rows)])


# ------------------------------------------------------------------------- median of repeats
@SETTINGS
@given(st.lists(times, min_size=1, max_size=7), st.floats(min_value=0, max_value=1), st.randoms())
def test_median_of_repeats_is_the_lower_median_whatever_the_order(ts, ci, rnd):
    out = T.collapse_repeats(e2e([("ssgd", t) for t in ts], ci))
    assert len(out) == 1
    med = out["iter_s"].iloc[0]
    assert min(ts) <= med <= max(ts)
    assert med == statistics.median_low(ts)
    # half the range, or the row's own interval when that is wider (one row: unchanged)
    want_ci = ci if len(ts) == 1 else max(ci, (max(ts) - min(ts)) / 2)
    assert out["iter_ci95_s"].iloc[0] == want_ci
    # order-invariant: the same repeats shuffled give the same median and interval
    shuffled = list(ts)
    rnd.shuffle(shuffled)
    again = T.collapse_repeats(e2e([("ssgd", t) for t in shuffled], ci))
    assert again["iter_s"].iloc[0] == med and again["iter_ci95_s"].iloc[0] == out["iter_ci95_s"].iloc[0]


@SETTINGS
@given(st.lists(times, min_size=2, max_size=5), st.lists(times, min_size=1, max_size=5))
def test_repeats_of_different_cases_are_not_mixed(a, b):
    out = T.collapse_repeats(e2e([("ssgd", t) for t in a] + [("topk", t) for t in b]))
    got = dict(zip(out["method"], out["iter_s"]))
    assert got == {"ssgd": statistics.median_low(a), "topk": statistics.median_low(b)}
    if "repeats" in out.columns:
        assert dict(zip(out["method"], out["repeats"])) == {"ssgd": len(a), "topk": len(b)}


# ------------------------------------------------------------------------------- verdicts
ratios = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)
published = st.floats(min_value=1e-2, max_value=1e3, allow_nan=False)


def away_from_bounds(r, factor=V.SIZE_FACTOR):
    return all(abs(r - b) > 1e-9 * max(1, b) for b in (factor, 1 / factor))


@SETTINGS
@given(published, ratios, ratios, ratios)
def test_size_reproduced_is_an_interval_of_the_ratio(p, r1, r2, r3):
    """Monotone in the ratio: SIZE on a contiguous range, DIRECTION on either side."""
    lo, mid, hi = sorted([r1, r2, r3])
    v = [V.verdict(r * p, p, True) for r in (lo, mid, hi)]
    if v[0] == V.SIZE and v[2] == V.SIZE:
        assert v[1] == V.SIZE
    if v[1] == V.DIRECTION and v[0] == V.SIZE:
        assert v[2] == V.DIRECTION     # above the range once, above it for every larger ratio
    if v[1] == V.DIRECTION and v[2] == V.SIZE:
        assert v[0] == V.DIRECTION


@SETTINGS
@given(published, ratios)
def test_verdict_by_definition_and_reciprocal(p, r):
    ours = r * p
    rr = ours / p
    assume(away_from_bounds(rr))
    want = V.SIZE if 1 / V.SIZE_FACTOR <= rr <= V.SIZE_FACTOR else V.DIRECTION
    assert V.verdict(ours, p, True) == want
    # ours k times the published size is judged as 1/k of it is: the factor works either way
    assert V.verdict(p / rr, p, True) == want
    # the wrong direction is never reproduced, whatever the size
    assert V.verdict(ours, p, False) == V.NOT


@SETTINGS
@given(st.lists(st.sampled_from(V.LEVELS + ["n/a: failed", ""]), max_size=20))
def test_counts_add_up(vs):
    c = V.counts(vs)
    assert sum(c.values()) == sum(v in V.LEVELS for v in vs)
    assert all(c[lv] == vs.count(lv) for lv in V.LEVELS)


# ------------------------------------------------------------------------------- compare
def frame(rows, ci=1e-6):
    df = T.collapse_repeats(e2e(rows, ci).drop(columns=["seq"]))
    df["ci"] = T.ci_s(df)
    df["label"] = C._labels(df).values
    df.index = ["|".join(str(v) for v in r) for r in df[T.case_keys(df)].itertuples(index=False)]
    return df


@SETTINGS
@given(times, st.floats(min_value=0.0, max_value=0.9), st.floats(min_value=0.01, max_value=0.5))
def test_compare_within_is_symmetric_in_sign(a, d, tol):
    """B d faster or d slower than A: judged alike, within exactly when |d| <= tolerance."""
    assume(abs(d - tol) > 1e-6)
    fa = frame([("ssgd", a)])
    slower = C.compare_runs(fa, frame([("ssgd", a * (1 + d))]), tol)
    faster = C.compare_runs(fa, frame([("ssgd", a * (1 - d))]), tol)
    assert bool(slower["times"]["within"].iloc[0]) == bool(faster["times"]["within"].iloc[0]) == (d <= tol)
    assert slower["ok"] == faster["ok"] == (d <= tol)


@SETTINGS
@given(st.lists(times, min_size=1, max_size=4), st.lists(times, min_size=1, max_size=4),
       st.floats(min_value=0.01, max_value=0.5))
def test_compare_uses_the_lower_median_of_each_run(ra, rb, tol):
    res = C.compare_runs(frame([("ssgd", t) for t in ra]), frame([("ssgd", t) for t in rb]), tol)
    ma, mb = statistics.median_low(ra), statistics.median_low(rb)
    d = mb / ma - 1
    assume(abs(abs(d) - tol) > 1e-9)
    assert math.isclose(res["times"]["diff_pct"].iloc[0], d * 100, rel_tol=1e-9, abs_tol=1e-9)
    assert bool(res["times"]["within"].iloc[0]) == (abs(d) <= tol)


@SETTINGS
@given(times, times, st.floats(min_value=0, max_value=1), st.floats(min_value=0, max_value=1))
def test_significance_is_antisymmetric(ta, tb, ca, cb):
    s, r = T.significance(ta, ca, tb, cb), T.significance(tb, cb, ta, ca)
    flip = {"faster": "slower", "slower": "faster", T.NOT_SIGNIFICANT: T.NOT_SIGNIFICANT}
    assert r == flip[s]
    assert (s == T.NOT_SIGNIFICANT) == (abs(ta - tb) <= ca + cb)


# --------------------------------------------------------------------------- paper scale
def sims(pairs):
    """sim rows of two methods per model: [(t_a, t_b)], A = acpsgd, B = ssgd."""
    rows = []
    for i, (ta, tb) in enumerate(pairs):
        for m, t in (("acpsgd", ta), ("ssgd", tb)):
            rows.append({"model": f"m{i}", "method": m, "compress_on": "host", "iter_s": t,
                         "compress_s": 0.0, "decompress_s": 0.0, "comm_s": 0.0, "pack_s": 0.0, "exposed_s": 0.0})
    return pd.DataFrame(rows)


@SETTINGS
@given(st.lists(st.tuples(times, times), min_size=1, max_size=5))
def test_speedup_aggregations_by_definition(pairs):
    df = sims(pairs)
    s = [tb / ta for ta, tb in pairs]

    def agg(name):
        return _speedup_claim(df, ["compress_on", "model"], lambda d: d["method"] == "acpsgd",
                              lambda d: d["method"] == "ssgd", name)["host"]
    mean, every, up_to, less = agg("mean"), agg("all"), agg("max_pct"), agg("max_less_pct")
    assert math.isclose(mean[0], sum(s) / len(s), rel_tol=1e-9)
    assert mean[1] == (mean[0] > 1)
    assert every[0] == mean[0] and every[1] == all(x > 1 for x in s)
    assert math.isclose(up_to[0], (max(s) - 1) * 100, rel_tol=1e-9, abs_tol=1e-9)
    # % less time of the fastest setup: 1 - t_A / t_B
    assert math.isclose(less[0], max((1 - ta / tb) * 100 for ta, tb in pairs), rel_tol=1e-9, abs_tol=1e-9)
    assert less[0] < 100
    # "for every model" implies "on the mean" implies "up to"; the up-to claims agree in direction
    assert not every[1] or mean[1]
    assert not mean[1] or up_to[1]
    assert up_to[1] == less[1] == (max(s) > 1)
    # a claim that holds names no deciding cost
    for v in (mean, every, up_to, less):
        assert (v[2] == "") if v[1] else True
