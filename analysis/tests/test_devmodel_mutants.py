"""devmodel.py's spread of repeated GPU profiles (issue 49; docs/mutation.md): `_spread` and
`spread_summary` by hand."""

import math

from gradcomp_analysis import devmodel as D


def test_spread_by_hand():
    assert D._spread([2.0, 3.0]) == 1.5
    assert D._spread([0.5, 1.0, 2.0]) == 4.0
    assert D._spread([1.0]) == 1.0
    assert D._spread([0.0, 0.0]) == 1.0
    assert D._spread([0.0, 2.0]) == math.inf


def test_spread_summary_by_hand():
    rows = [("a.csv", "k1", 1.0), ("a.csv", "k2", 1.5), ("a.csv", "k3", 1.2), ("b.csv", "k", 2.0)]
    rows += [("c.csv", f"k{i}", float(i)) for i in range(20, 0, -1)]
    #          name (18 wide)      rows (4)  median (13)           95th (8)        max (5)
    assert D.spread_summary(rows).split("\n") == [
        "file               rows  median spread  95th pct    max",
        "a.csv" + " " * 13 + " " + "   3" + "  " + "        1.200" + "  " + "   1.500" + "  " + " 1.50",
        "b.csv" + " " * 13 + " " + "   1" + "  " + "        2.000" + "  " + "   2.000" + "  " + " 2.00",
        # 20 rows 1..20: median 10.5, the 95th percentile the 19th smallest (ceil(0.95 x 20) = 19)
        "c.csv" + " " * 13 + " " + "  20" + "  " + "       10.500" + "  " + "  19.000" + "  " + "20.00",
        "spread = largest / smallest of a row's medians over the runs",
        "",
    ]
