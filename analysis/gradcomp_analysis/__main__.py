"""Entry point: python -m gradcomp_analysis report RESULTS_DIR [RESULTS_DIR ...] [--out DIR] [--latex];
python -m gradcomp_analysis compare RUN_A RUN_B [--tolerance 0.10] [--out DIR]."""

import argparse
import sys

from .io import ReportError
from .compare import compare
from .report import write_report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gradcomp_analysis", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="write report.md, tables (Markdown + CSV, optionally LaTeX) and PNG plots")
    r.add_argument("results_dir", nargs="+",
                   help="directory a gradcomp run wrote (CSV files + run.json), or a folder holding such runs "
                        "at any depth (a sweep: EXP/np2, EXP/np4, ...; folders skipped are named on stderr); "
                        "several are combined, methods compared within one run where it holds them all")
    r.add_argument("--out", help="output directory [default: FIRST_RESULTS_DIR/report]")
    r.add_argument("--latex", action="store_true", help="also write every table as LaTeX (NAME.tex)")
    c = sub.add_parser("compare", help="repeatability: two runs of one config, case by case (times within a "
                                      "tolerance, no significant conclusion reversed); exit 1 when not")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--tolerance", type=float, default=0.10,
                   help="largest relative difference of a case's median iteration [default: 0.10]")
    c.add_argument("--out", help="output directory [default: RUN_B/compare]")
    a = p.parse_args(argv)
    try:
        if a.cmd == "compare":
            if not 0 < a.tolerance < 10:
                raise ReportError(f"--tolerance {a.tolerance}: give a fraction such as 0.10 (10%)")
            ok, path = compare(a.run_a, a.run_b, a.tolerance, a.out)
            print(path)
            return 0 if ok else 1
        path = write_report(a.results_dir, a.out, latex=a.latex)
    except ReportError as e:
        print(f"gradcomp_analysis: error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
