"""Entry point: python -m gradcomp_analysis report RESULTS_DIR [RESULTS_DIR ...] [--out DIR] [--latex]."""

import argparse
import sys

from .io import ReportError
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
    a = p.parse_args(argv)
    try:
        path = write_report(a.results_dir, a.out, latex=a.latex)
    except ReportError as e:
        print(f"gradcomp_analysis: error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
