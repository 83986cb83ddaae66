"""gradcomp's method descriptions, as `gradcomp methods --json` prints them
(src/compress/describe.rs, from each method's `SPEC` in src/compress/): read from the
committed copy analysis/methods.json, which tests/methods_json.rs checks is the binary's
output (regenerate: `target/release/gradcomp methods --json > analysis/methods.json`).
The analysis and analysis/profile_compress.py take every method fact from here (names,
aggregation, rounds, phases, the parameters each reads and its defaults) instead of
declaring them again. Standard library only: profile_compress.py runs where pandas is not.
"""

import json
import os

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "methods.json")


def load(path: str = PATH) -> dict:
    """The description JSON at PATH."""
    with open(path) as f:
        return json.load(f)


DESCRIPTION = load()
# gradcomp's methods (src/compress/registry.rs, `SPECS`), in its order.
METHODS = [m["name"] for m in DESCRIPTION["methods"]]
BY_NAME = {m["name"]: m for m in DESCRIPTION["methods"]}
# Names that run another method's compressor: e2e methods over their own planner's buckets
# (omgs, sketch-fusion) and the converge negative controls (topk-noef, ...).
VARIANTS = {v["name"]: v["method"] for v in DESCRIPTION["variants"]}
CONTROLS = {v["name"]: v["method"] for v in DESCRIPTION["controls"]}
DEFAULT_DENSITY = DESCRIPTION["default_density"]
DEFAULT_MIN_COMPRESSION_RATE = DESCRIPTION["default_min_compression_rate"]
# Every MethodParams key: its default (None: each method's own), flag, limits, doc.
PARAMS = {p["key"]: p for p in DESCRIPTION["params"]}


def base(name: str):
    """The method NAME runs (itself, a variant's or a control's), or None."""
    if name in BY_NAME:
        return name
    return VARIANTS.get(name) or CONTROLS.get(name)


def reads(name: str, key: str) -> bool:
    """Whether the method NAME runs reads the parameter KEY."""
    b = base(name)
    return b is not None and key in BY_NAME[b]["params"]


def readers(key: str, variants: bool = False) -> list:
    """The methods that read KEY, in gradcomp's order; with VARIANTS, the e2e names too."""
    out = [m for m in METHODS if key in BY_NAME[m]["params"]]
    if variants:
        out += [v for v, b in VARIANTS.items() if key in BY_NAME[b]["params"]]
    return out


def default_of(name: str, key: str):
    """The value of KEY the method NAME runs at when none is given (gradcomp's
    `MethodParams::for_method`): its own where it reads KEY, else the global default."""
    b = base(name)
    if b is not None and key in BY_NAME[b]["defaults"]:
        return BY_NAME[b]["defaults"][key]
    if key == "density":
        return DEFAULT_DENSITY
    if key == "min_compression_rate":
        return DEFAULT_MIN_COMPRESSION_RATE
    return PARAMS[key]["default"]


def rounds_phases(name: str):
    """(rounds, phases) of the method NAME runs."""
    m = BY_NAME[base(name)]
    return m["rounds"], m["phases"]


def aggregation(name: str) -> str:
    """`allreduce`, `allgather` or `ring`: how the method NAME runs combines its wire."""
    return BY_NAME[base(name)]["aggregation"]
