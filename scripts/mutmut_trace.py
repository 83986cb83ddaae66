"""A pytest plugin that runs mutmut's mutants of one module in one process, each under the tests
that run its changed statement (docs/mutation.md, report.py's run).

mutmut's own runner forks a pytest session per mutant and runs every test that reaches the
mutated *function*: for report.py that is every test writing a report (test_report.py's module
fixture alone makes three MPI runs), a minute per mutant on 2 cores. Here the mutants of a kept
mutmut copy (`mutants/`, mutmut 3.x: every function a trampoline reading MUTANT_UNDER_TEST) run in
the one pytest process that collected the tests:

1. each collected test runs once on the unmutated code under sys.settrace, recording the lines of
   the mutated module it executes and its time (cached in MLOOP_STATS: delete it after changing a
   test; tests it lacks are traced and added);
2. each mutant's changed lines (a diff of its function against the `__mutmut_orig` copy) widen to
   their statements (a compound statement's header; a signature or decorator change: the whole
   function);
3. the mutant is switched on (mutmut's set_mutant_under_test) and the tests that ran one of those
   statements run, fastest first, to the first failure: `killed`, `survived`, `timeout` (the
   test's alarm, 10x its clean time and at least 30 s) or `uncovered` (no test runs the statement).

A test file that fails to collect stops the run before any mutant (a line `error ...` in MLOOP_OUT,
pytest's exit code 2), as pytest itself stops.

Usage, in a copy of the kept copy's `mutants/` holding this revision's tests:

    MLOOP_MUTANTS=names.txt MLOOP_OUT=out.txt MLOOP_STATS=stats.json PYTHONPATH=.:scripts-dir \\
        python -m pytest -q -p mutmut_trace -p no:cacheprovider tests/test_a.py tests/test_b.py

names.txt holds one mutant a line (`gradcomp_analysis.report.x_F__mutmut_N`, as `mutmut results`
lists them), all of one module. A failing test's report is cut to one line: pytest's own would
parse the mutated module (200,000 lines for report.py) at every failure."""

import ast
import difflib
import importlib
import json
import os
import re
import signal
import sys
import time

from _pytest.runner import runtestprotocol
from mutmut.mutation.trampoline import set_mutant_under_test


class MutantTimeout(BaseException):
    pass


def _alarm(*_):
    raise MutantTimeout()


def _short(excinfo, style=None):
    return f"{excinfo.typename}: {str(excinfo.value)[:200]}"


def _run(item, limit_s: int):
    """None when ITEM passes, else `failed` or `timeout`."""
    item.repr_failure = _short
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit_s)
    try:
        reps = runtestprotocol(item, nextitem=None, log=False)
    except MutantTimeout:
        try:
            item.session._setupstate.teardown_exact(None)
        except BaseException:
            pass
        return "timeout"
    finally:
        signal.alarm(0)
    bad = [r for r in reps if r.failed]
    if not bad:
        return None
    return "timeout" if "MutantTimeout" in str(bad[0].longrepr) else "failed"


def statement_ranges(path: str, mod: str) -> dict:
    """mutant name -> [[first, last] line of each statement it changes], or None (its signature
    or decorator: any test that calls the function)."""
    src = open(path).read()
    lines = src.splitlines()
    funcs = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef):
            m = re.match(r"(.*)__mutmut_(orig|\d+)$", node.name)
            if m:
                funcs.setdefault(m.group(1), {})[m.group(2)] = node

    def innermost(fn, line):
        best = None
        for ch in ast.walk(fn):
            if ch is fn or not isinstance(ch, (ast.stmt, ast.ExceptHandler)):
                continue
            if ch.lineno <= line <= ch.end_lineno and (best is None or ch.end_lineno - ch.lineno <=
                                                       best.end_lineno - best.lineno):
                best = ch
        return best

    out = {}
    for f, d in funcs.items():
        o = d.get("orig")
        if o is None:
            continue
        ol = lines[o.lineno - 1:o.end_lineno]
        for k, n in d.items():
            if k == "orig":
                continue
            ml = lines[n.lineno - 1:n.end_lineno]
            ml = [ml[0].replace(f"__mutmut_{k}(", "__mutmut_orig(", 1)] + ml[1:]
            changed = set()
            for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, ol, ml, autojunk=False).get_opcodes():
                if tag != "equal":
                    changed.update(range(i1, max(i2, i1 + 1)))
            rng = []
            for i in sorted(changed):
                line = o.lineno + i
                s = innermost(o, line) if o.body[0].lineno <= line <= o.end_lineno else None
                if s is None:
                    rng = None
                    break
                body = getattr(s, "body", None)
                if isinstance(body, list) and body and line < body[0].lineno:
                    rng.append([s.lineno, body[0].lineno - 1])      # a compound statement's header
                elif getattr(s, "orelse", None) and not (body[0].lineno <= line <= body[-1].end_lineno):
                    rng = None                                      # an `else:` line
                    break
                else:
                    rng.append([s.lineno, s.end_lineno])
            out[f"{mod}.{f}__mutmut_{k}"] = rng
    return out


def pytest_runtestloop(session):
    out = open(os.environ["MLOOP_OUT"], "a", buffering=1)
    if session.testsfailed:
        # pytest's own loop stops at a collection error; this hook replaces it, and a test file
        # that failed to import would otherwise leave its tests out of every mutant unnoticed
        print(f"error {session.testsfailed} collection error(s): no mutant run (pytest's log names them)", file=out)
        raise session.Interrupted(f"{session.testsfailed} error(s) during collection: no mutant run")
    names = [x.strip() for x in open(os.environ["MLOOP_MUTANTS"]) if x.strip()]
    if not names:
        return True
    module = names[0].rsplit(".", 1)[0]
    # the file the tests import (pytest's rootpath may be a folder above the copy)
    path = importlib.import_module(module).__file__
    suffix = "/".join(module.split(".")) + ".py"
    cache = os.environ.get("MLOOP_STATS")
    st = json.load(open(cache)) if cache and os.path.exists(cache) else {}
    set_mutant_under_test("")
    for item in [i for i in session.items if i.nodeid not in st]:
        hit, seen = set(), set()

        def local(frame, ev, arg):
            if ev == "line":
                seen.add(frame.f_lineno)
            return local

        def glob(frame, ev, arg):
            if frame.f_code.co_filename.endswith(suffix):
                n = frame.f_code.co_name
                if n.endswith("__mutmut_orig"):
                    hit.add(n[:-len("__mutmut_orig")])
                seen.add(frame.f_lineno)
                return local
            return None
        t = time.time()
        sys.settrace(glob)
        try:
            r = _run(item, 600)
        finally:
            sys.settrace(None)
        st[item.nodeid] = {"ok": r is None, "s": time.time() - t, "funcs": sorted(hit), "lines": sorted(seen)}
        print(f"baseline {item.nodeid} {'ok' if r is None else r} {st[item.nodeid]['s']:.1f}s", file=out)
    if cache:
        json.dump(st, open(cache, "w"))
    items = {i.nodeid: i for i in session.items}
    ranges = statement_ranges(path, module)
    seen_by = {k: set(v["lines"]) for k, v in st.items()}

    def reaches(test, mutant, fn):
        if fn not in st[test]["funcs"]:
            return False
        rng = ranges.get(mutant)
        return rng is None or any(x in seen_by[test] for a, b in rng for x in range(a, b + 1))
    for m in names:
        fn = m.rsplit(".", 1)[1].rsplit("__mutmut_", 1)[0]
        tests = sorted((v["s"], k) for k, v in st.items() if v["ok"] and k in items and reaches(k, m, fn))
        if not tests:
            print(f"uncovered {m}", file=out)
            continue
        set_mutant_under_test(m)
        t = time.time()
        res, by = "survived", ""
        for s, k in tests:
            r = _run(items[k], int(max(30, 10 * s)))
            if r:
                res, by = ("timeout" if r == "timeout" else "killed"), k
                break
        set_mutant_under_test("")
        print(f"{res} {m} {time.time() - t:.1f}s {len(tests)} {by}", file=out)
    return True
