"""Entry point: python -m gradcomp_analysis report RESULTS_DIR [RESULTS_DIR ...] [--out DIR] [--latex];
python -m gradcomp_analysis compare RUN_A RUN_B [--tolerance 0.10] [--out DIR];
python -m gradcomp_analysis planner-accuracy RUN [--tolerance 0.25];
python -m gradcomp_analysis verdicts PAPER_SCALE_DIR (the paper-scale headlines' verdicts and counts);
python -m gradcomp_analysis peer-compare PEER_DIR [--out DIR] (gradcomp's kernels vs PyTorch on the CPU, `make peer-compare`);
python -m gradcomp_analysis gpu-profile RUN_DIR RUN_DIR ... --out DIR --revision REV (runs of scripts/gpu_profile.sh -> median profiles);
python -m gradcomp_analysis device-model DEVCOST_CSV [--min-elems N] (`gradcomp devcost` rows -> a table per kernel family);
python -m gradcomp_analysis sim-agreement DIR_A DIR_B [--out CSV] (two `make sim-accuracy` runs: the same verdict per case?);
python -m gradcomp_analysis sim-accuracy DIR (one `make sim-accuracy` run: judged cases within the tolerance per world size)."""

import argparse
import errno
import os
import sys

import pandas as pd

from . import tables as T
from .io import ReportError, load_csv, read_text, staged_dir
from .compare import compare_result, printed
from .devmodel import family_table, merge_repeats
from .peer import peer_compare
from .simagree import accuracy, agreement
from .report import find_paper_scale, format_column, paper_scale_tables, verdict_counts_line, write_report


class Parser(argparse.ArgumentParser):
    """argparse with the binary's error format: one line `gradcomp_analysis: error: ...`
    naming the command and where its options are listed, exit 2 (not the usage block)."""

    def error(self, message):
        cmd = self.prog.replace("python -m gradcomp_analysis", "").strip()
        where = f"python -m gradcomp_analysis {cmd} --help".replace("  ", " ")
        self.exit(2, f"gradcomp_analysis: error: {cmd + ': ' if cmd else ''}{message} (options: {where})\n")


def check_out_dir(out) -> None:
    """Refuse an --out directory that a file occupies (or that lies below a file), as the
    binary does, before anything is read or written."""
    if out is None:
        return
    if os.path.exists(out) and not os.path.isdir(out):
        raise ReportError(f"--out {out}: is not a directory (a file has that name); choose a directory path")
    up = os.path.dirname(os.path.abspath(out))
    while not os.path.exists(up):
        up = os.path.dirname(up)
    if not os.path.isdir(up):
        raise ReportError(f"--out {out}: {up} is a file, so no directory can be made below it; choose a directory path")


def check_out_file(out) -> None:
    """Refuse an --out CSV path that is a directory or whose folder does not exist."""
    if out is None:
        return
    if os.path.isdir(out):
        raise ReportError(f"--out {out}: is a directory; give the path of a CSV file to write")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ReportError(f"--out {out}: the folder {parent} does not exist (or is a file); create it first")


def check_paper_scale_files(roots) -> None:
    """Every paper_scale.txt / error.txt below ROOTS is a regular UTF-8 file (the report
    and `verdicts` read them as text): a binary or a directory is refused by name."""
    from .report import PAPER_SCALE_MARKER
    for root in roots:
        for d, subs, files in os.walk(root):
            subs[:] = [s for s in subs if not os.path.islink(os.path.join(d, s))]
            if PAPER_SCALE_MARKER in files or PAPER_SCALE_MARKER in subs:
                for name in (PAPER_SCALE_MARKER, "error.txt"):
                    if os.path.lexists(os.path.join(d, name)):
                        read_text(os.path.join(d, name))


def check_tolerance(tolerance: float, example: float) -> None:
    """Refuse a --tolerance that is not a fraction (0 < x < 10), naming an EXAMPLE."""
    if not 0 < tolerance < 10:
        raise ReportError(f"--tolerance {tolerance}: give a fraction such as {example:.2f} ({example * 100:g}%)")


def planner_accuracy_check(run: str, tolerance: float) -> int:
    """Print the planner accuracy table of RUN/e2e.csv; 0 when every case is within TOLERANCE."""
    check_tolerance(tolerance, T.PLANNER_TOLERANCE_REL)
    path = os.path.join(run, "e2e.csv")
    e2e = load_csv(run, "e2e.csv")
    if e2e is None:
        raise ReportError(f"{path}: no such file, or no rows (run `gradcomp e2e --out {run}` first)")
    try:
        t = T.planner_accuracy(T.collapse_repeats(e2e), tolerance)
    except T.MissingData as e:
        raise ReportError(f"{path}: {e}")
    # The report's number format (4 significant digits), not pandas' six decimals.
    print(t.apply(lambda col: pd.Series(format_column(col, col.name), index=col.index)).to_string(index=False))
    bad = int((t["within"] != "yes").sum())
    print(f"{len(t) - bad} of {len(t)} planner cases within {tolerance * 100:g}%")
    return 1 if bad else 0


def print_verdicts(root: str) -> int:
    """Print each paper-scale headline under ROOT with ours/published and its verdict, then
    the count of each verdict level per compress_on."""
    found = find_paper_scale([root])
    if not found:
        raise ReportError(f"{root}: no paper_scale.txt below it (run `make paper-scale PAPER_SCALE_OUT={root}`)")
    heads, _, _ = paper_scale_tables(found)
    cols = [c for c in heads.columns if c.startswith(("ours", "verdict")) or c in ("headline", "setup", "published")]
    with pd.option_context("display.width", 250, "display.max_colwidth", 48):
        print(heads[cols].to_string(index=False))
    print(f"verdicts ({len(heads)} headlines): {verdict_counts_line(heads)}")
    return 0


def main(argv=None) -> int:
    p = Parser(prog="python -m gradcomp_analysis", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="write report.md, tables (Markdown + CSV, optionally LaTeX) and PNG plots")
    r.add_argument("results_dir", nargs="+",
                   help="directory a gradcomp run wrote (CSV files + run.json), or a folder holding such runs "
                        "at any depth (a sweep: EXP/np2, EXP/np4, ...; folders skipped are named on stderr); "
                        "several are combined, methods compared within one run where it holds them all")
    r.add_argument("--out", help="output directory [default: FIRST_RESULTS_DIR/report]")
    r.add_argument("--latex", action="store_true", help="also write every table as LaTeX (NAME.tex)")
    c = sub.add_parser("compare", help="repeatability: two runs of one config, case by case (times within a "
                                      "tolerance, no significant conclusion reversed); exit 1 when not, and "
                                      "exit 1 when it judged nothing (every case timed once: `NOT JUDGED`, "
                                      "not a pass); exit 2 on bad input",
                       description="Two runs of one config, case by case. Exit status: exit 0 when it passes (PASS); "
                                   "exit 1 when it fails (FAIL) or when it judged nothing (NOT JUDGED: every "
                                   "case timed once, so no timing claim to compare; not a pass); exit 2 on bad "
                                   "input.")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--tolerance", type=float, default=0.10,
                   help="largest relative difference of a case's median iteration [default: 0.10]")
    c.add_argument("--out", help="output directory [default: compare-A-vs-B beside the runs, A and B the "
                                 "parts of their paths that differ]")
    pa = sub.add_parser("planner-accuracy", help="planner fusions: predicted planned_s vs measured bwd_sync_s of "
                                                 "a run's e2e.csv; exit 1 when a case is outside the tolerance")
    pa.add_argument("run", help="a directory with e2e.csv")
    pa.add_argument("--tolerance", type=float, default=T.PLANNER_TOLERANCE_REL,
                    help=f"largest accepted |planned/measured - 1| [default: {T.PLANNER_TOLERANCE_REL}]")
    v = sub.add_parser("verdicts", help="the paper-scale headlines' ours/published and verdicts, with counts")
    v.add_argument("root", help="the folder scripts/paper_scale.sh wrote")
    pc = sub.add_parser("peer-compare", help="gradcomp micro-compress vs the PyTorch CPU profile of the same methods "
                                             "and shape (the folder `make peer-compare` writes): per method both "
                                             "step times, GB/s, speed-up, memory-bandwidth share, roofline")
    pc.add_argument("root", help="folder with gradcomp-<i>/micro_compress.csv and torch-<i>.csv per round")
    pc.add_argument("--out", help="where to write peer_compare.md/.csv and roofline_goals.csv [default: ROOT]")
    gp = sub.add_parser("gpu-profile", help="runs of scripts/gpu_profile.sh on one GPU -> median compress profiles, "
                                            "kernel families and each row's spread over the runs")
    gp.add_argument("runs", nargs="+", help="the OUT_DIR of each run")
    gp.add_argument("--out", required=True, help="folder for profile-r4.csv, profile-r32.csv, kernels.csv, spread.csv")
    gp.add_argument("--revision", required=True, help="the gradcomp revision the runs measured (recorded in the files)")
    dm = sub.add_parser("device-model", help="`gradcomp devcost` CSV -> model / measured per kernel family (Markdown)")
    dm.add_argument("devcost_csv")
    dm.add_argument("--min-elems", type=int, default=0, help="only tensors of at least this many elements")
    sa = sub.add_parser("sim-agreement", help="two `make sim-accuracy` OUT folders of one machine: the same verdict "
                                              "for every case? (issue 29); exit 1 when a verdict changed or a world size "
                                              "is in one run only, or judged in neither run (not judged)")
    sa.add_argument("dir_a")
    sa.add_argument("dir_b")
    sa.add_argument("--out", help="also write the per-case table (both verdicts, errors and noises) to this CSV")
    sacc = sub.add_parser(
        "sim-accuracy", help="one `make sim-accuracy` OUT folder: per world size the judged cases within the "
                             "tolerance; exit 1 when a case is outside or a world size judged nothing",
        description="Per world size of a `make sim-accuracy` OUT folder (npN/sim/sim_vs_measured.csv), or of one "
                    "`gradcomp simulate --compare` folder: judged cases within the tolerance, too noisy to judge, "
                    "not held to it (more ranks than cores). Exit status: exit 0 when every world size judged a "
                    "case and none is outside (PASS); exit 1 when a case is outside (FAIL) or a world size judged "
                    "nothing (NOT JUDGED: never a pass); exit 2 on bad input.")
    sacc.add_argument("dir", help="the OUT folder of `make sim-accuracy`, or a folder with sim_vs_measured.csv")
    a = p.parse_args(argv)
    try:
        if a.cmd == "sim-agreement":
            check_out_file(a.out)
        elif a.cmd not in ("planner-accuracy", "verdicts", "device-model", "sim-accuracy"):
            check_out_dir(a.out)
        if a.cmd == "gpu-profile":
            print(merge_repeats(a.runs, a.out, a.revision), end="")
            return 0
        if a.cmd == "device-model":
            print(family_table(a.devcost_csv, a.min_elems), end="")
            return 0
        if a.cmd == "planner-accuracy":
            return planner_accuracy_check(a.run, a.tolerance)
        if a.cmd == "verdicts":
            check_paper_scale_files([a.root])
            return print_verdicts(a.root)
        if a.cmd == "peer-compare":
            print(peer_compare(a.root, a.out), end="")
            return 0
        if a.cmd == "sim-agreement":
            ok, text, table = agreement(a.dir_a, a.dir_b)
            print(text)
            if a.out:
                with staged_dir(os.path.dirname(a.out) or ".", "per-case table") as d:
                    table.to_csv(os.path.join(d, os.path.basename(a.out)), index=False)
            return 0 if ok else 1
        if a.cmd == "sim-accuracy":
            rc, text = accuracy(a.dir)
            print(text)
            return rc
        if a.cmd == "compare":
            check_tolerance(a.tolerance, 0.10)
            ok, path, res = compare_result(a.run_a, a.run_b, a.tolerance, a.out)
            print(printed(res, a.tolerance, path))
            return 0 if ok else 1
        check_paper_scale_files(a.results_dir)
        path = write_report(a.results_dir, a.out, latex=a.latex)
    except ReportError as e:
        print(f"gradcomp_analysis: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        # A path the checks above did not foresee (permissions, a file where a folder belongs):
        # one line naming it; bad input (2) when it is about the path, a failed write (1) else.
        name = f"{e.filename}: " if e.filename else ""
        print(f"gradcomp_analysis: error: {name}{e.strerror or e}", file=sys.stderr)
        return 2 if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM,
                                errno.ELOOP, errno.ENAMETOOLONG, errno.EEXIST) else 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
