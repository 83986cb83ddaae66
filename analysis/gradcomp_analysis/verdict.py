"""How close a paper-scale headline comes to the published number (issue 27), in three
levels: *size reproduced* (the claim's direction holds and ours / published is within a
factor SIZE_FACTOR either way), *direction only* (the direction holds, the size does
not), *not reproduced* (the direction does not hold). "Reproduced" never means the
direction alone.

The ratio compares the quantity the paper publishes in the unit it publishes it: a
speedup with a speedup (4.06x), a percentage with a percentage (up to 31% faster: ours
13% is 0.42 of it), a size ratio with a size ratio (277x). For an "up to" claim ours is
our maximum over the same setups.
"""

import math

SIZE_FACTOR = 1.5
SIZE = "size reproduced"
DIRECTION = "direction only"
NOT = "not reproduced"
LEVELS = [SIZE, DIRECTION, NOT]


def ratio(ours: float, published: float) -> float:
    """ours / published; NaN where either is missing or published is 0."""
    if ours is None or published is None or not published:
        return float("nan")
    if math.isnan(ours) or math.isnan(published):
        return float("nan")
    return ours / published


def verdict(ours: float, published: float, direction_ok: bool, factor: float = SIZE_FACTOR) -> str:
    """The level of one headline: NOT when the direction fails; SIZE when ours / published
    lies in [1/factor, factor]; otherwise DIRECTION (also when the ratio is undefined)."""
    if factor <= 1:
        raise ValueError(f"verdict: factor {factor} must exceed 1 (e.g. {SIZE_FACTOR})")
    if not direction_ok:
        return NOT
    r = ratio(ours, published)
    if not math.isnan(r) and 1 / factor <= r <= factor:
        return SIZE
    return DIRECTION


def counts(verdicts) -> dict:
    """{level: how many of VERDICTS have it} over LEVELS (others, e.g. `n/a`, ignored)."""
    vs = list(verdicts)
    return {lv: sum(v == lv for v in vs) for lv in LEVELS}


def counts_line(by_on: dict) -> str:
    """`host: 3 size reproduced, 10 direction only, 2 not reproduced; device: ...` from
    {compress_on: counts(...)}."""
    return "; ".join(f"{on}: " + ", ".join(f"{c[lv]} {lv}" for lv in LEVELS) for on, c in by_on.items())
