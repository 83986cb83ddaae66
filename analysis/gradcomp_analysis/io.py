"""Loading results directories: CSV files, run.json, schema checks, several runs at once.

A *run* is a directory gradcomp wrote (CSV files + run.json). Paper sweeps over world
size or network are several runs (one per job); `load_results` concatenates them and
adds two columns to every table:

- `run`: the run directory's path relative to the directory given on the command line
  (runs are found at any depth below it, e.g. EXP/np2 and EXP/np4; the folder's own
  name when it is itself a run);
- `network`: the contents of `network.txt` in the run directory (written by
  `slurm/submit-acpsgd-network.sh`), else empty.
"""

import csv
import glob
import io
import json
import os
import sys
from dataclasses import dataclass, field

import pandas as pd

from . import SUPPORTED_SCHEMA_VERSIONS

CSV_FILES = ("micro_comm.csv", "micro_compress.csv", "micro.csv", "e2e.csv", "converge.csv")

SIM_VS_MEASURED = "sim_vs_measured.csv"

# Files with a `time_dilation` column (docs/csv-schema.md): a file from before it gets the
# column with 1 (no dilation), so old and new runs read alike.
DILATED_FILES = ("micro_comm.csv", "micro.csv", "e2e.csv")

# Columns every table computation relies on, per file (a subset of docs/csv-schema.md).
REQUIRED_COLUMNS = {
    "micro_comm.csv": ["collective", "world_size", "bytes", "median_s", "busbw_gbps"],
    "micro_compress.csv": ["method", "rows", "cols", "compress_s", "feedback_s", "decompress_s",
                           "input_gbps", "mem_read_gbps", "wire_bytes", "dense_bytes"],
    "micro.csv": ["method", "rows", "cols", "world_size", "compress_s", "comm_s", "decompress_s", "total_s"],
    "e2e.csv": ["model", "method", "fusion", "pipelining", "collective", "aggregation", "world_size",
                "batch", "device", "density", "rank", "compress_s", "comm_s", "decompress_s",
                "exposed_s", "iter_s", "dense_bytes", "wire_bytes"],
    "converge.csv": ["method", "world_size", "step", "train_loss", "eval_loss", "eval_accuracy", "update_rel_err",
                     "status"],
    SIM_VS_MEASURED: ["case", "method", "world_size", "measured_iter_s", "simulated_iter_s", "rel_err", "tolerance",
                      "role"],
}


class ReportError(Exception):
    """A results directory that cannot be reported on (missing files, unknown schema)."""


def check_schema(df: pd.DataFrame, path: str) -> None:
    """Refuse a CSV without schema_version, from an unknown version, or lacking columns."""
    if "schema_version" not in df.columns:
        raise ReportError(f"{path}: no schema_version column; not a gradcomp CSV")
    vals = pd.to_numeric(df["schema_version"], errors="coerce")
    if vals.isna().any():
        bad = sorted(set(df["schema_version"][vals.isna()].astype(str)))
        raise ReportError(f"{path}: schema_version {bad} is not a number; not a gradcomp CSV")
    versions = set(int(v) for v in vals.unique())
    unknown = versions - SUPPORTED_SCHEMA_VERSIONS
    if unknown:
        raise ReportError(
            f"{path}: schema_version {sorted(unknown)} is unknown to this analysis "
            f"(it reads schema_version {sorted(SUPPORTED_SCHEMA_VERSIONS)}); the file was written by a "
            f"different gradcomp: use the analysis/ of the gradcomp that wrote it"
        )
    name = os.path.basename(path)
    missing = [c for c in REQUIRED_COLUMNS.get(name, []) if c not in df.columns]
    if missing:
        raise ReportError(f"{path}: columns {missing} missing (schema_version {sorted(versions)} "
                          f"expects them; see docs/csv-schema.md)")


# Warnings about rows left out while reading (a partial last row), in the order found;
# `load_results` hands them to the report, which prints them and lists them in report.md.
WARNINGS: list = []


def _warn(msg: str) -> None:
    if msg not in WARNINGS:
        WARNINGS.append(msg)
        print(f"gradcomp_analysis: warning: {msg}", file=sys.stderr)


def _complete_rows(path: str) -> bytes:
    """The bytes of PATH up to its last newline: gradcomp writes, flushes and fsyncs each
    row with its newline, so whatever follows the last one is a row cut mid-write (a job
    killed while writing, a full disk); it is left out with a warning, as `--resume` does."""
    with open(path, "rb") as f:
        data = f.read()
    keep = data.rfind(b"\n") + 1
    if keep < len(data):
        what = "a partial last row" if keep else "a partial header"
        _warn(f"{path}: left out {what} ({len(data) - keep} bytes without a newline) "
              f"written by an interrupted run; its numbers are not read")
    return data[:keep]


def load_csv(results_dir: str, name: str):
    """Read RESULTS_DIR/name: None if absent or without a complete header line (a run
    stopped before its first row leaves an empty file: no rows); a partial last row is
    left out with a warning, never read as numbers; refuses unknown schema versions and
    rows whose field count differs from the header's."""
    path = os.path.join(results_dir, name)
    if not os.path.exists(path):
        return None
    if not os.path.isfile(path):
        raise ReportError(f"{path}: not a regular file (a directory?); move it away or remove it")
    data = _complete_rows(path)
    if not data.strip():
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    width = len(next(csv.reader([lines[0]])))
    for i, fields in enumerate(csv.reader(lines[1:]), start=2):
        if fields and len(fields) != width:
            raise ReportError(f"{path}: line {i} has {len(fields)} fields, the header {width}: a damaged "
                              f"row (edited, or two writers); remove that line or use the run's other files")
    try:
        df = pd.read_csv(io.BytesIO(data))
    except pd.errors.EmptyDataError:
        return None
    except pd.errors.ParserError as e:
        raise ReportError(f"{path}: not a CSV file ({str(e).strip()})") from None
    check_schema(df, path)
    if name in DILATED_FILES and "time_dilation" not in df.columns:
        # Written before time dilation existed (issue 34): those runs were not dilated.
        df["time_dilation"] = 1
    return df


def _has_csv(d: str) -> bool:
    return any(os.path.exists(os.path.join(d, f)) for f in CSV_FILES)


def _is_report(d: str) -> bool:
    """A folder `python -m gradcomp_analysis report` wrote (its tables include micro.csv)."""
    return os.path.exists(os.path.join(d, "manifest.json")) and os.path.exists(os.path.join(d, "report.md"))


def discover(root: str):
    """Runs at any depth under ROOT, and the folders skipped with the reason.

    A folder holding one of CSV_FILES is a run (its own subfolders, e.g. `sim/` or
    `report/`, belong to it and are not searched). A folder written by the report is
    skipped, and so is every folder with no run in it or below it. Returns
    ([(path, label)], [(path, why)]); labels are paths relative to ROOT (the folder's
    own name when ROOT is itself a run)."""
    root = os.path.normpath(root)
    if _has_csv(root):
        return [(root, os.path.basename(root))], []
    runs, skipped = [], []

    def walk(d):
        found = False
        try:
            subs = sorted(s for s in os.listdir(d) if os.path.isdir(os.path.join(d, s)))
        except OSError as e:
            skipped.append((d, f"cannot be read ({e.strerror})"))
            return False
        for s in subs:
            p = os.path.join(d, s)
            if os.path.islink(p):
                skipped.append((p, "a symbolic link (not followed)"))
                continue
            if _is_report(p):
                skipped.append((p, "a report written by gradcomp_analysis, not a run"))
                continue
            if _has_csv(p):
                runs.append((p, os.path.relpath(p, root)))
                found = True
                continue
            n = len(skipped)
            if walk(p):
                found = True
            else:
                # One line for the topmost folder without runs, not one per folder below it.
                del skipped[n:]
                skipped.append((p, f"no {', '.join(CSV_FILES)} in it or below it"))
        return found

    walk(root)
    return runs, skipped


def find_runs(paths, skipped=None) -> list:
    """Run directories among PATHS: a path holding CSV files is a run; otherwise every
    folder below it, at any depth, that holds CSV files is (a sweep of several jobs, e.g.
    EXP/np2, EXP/np4). Folders skipped are appended to SKIPPED as (path, why)."""
    runs = []
    for p in paths:
        if not os.path.isdir(p):
            raise ReportError(f"{p}: not a directory")
        r, s = discover(p)
        runs += r
        if skipped is not None:
            skipped += s
    if not runs:
        raise ReportError(
            f"{', '.join(paths)}: no gradcomp CSV file with rows (expected micro_comm.csv, micro_compress.csv, "
            f"micro.csv, e2e.csv or converge.csv, or a `gradcomp simulate` folder's sim.csv, in the directory or "
            f"the folders below it)")
    return runs


@dataclass
class Results:
    """Every CSV of one or more runs, concatenated (None when no run has that file)."""
    micro_comm: pd.DataFrame | None = None
    micro_compress: pd.DataFrame | None = None
    micro: pd.DataFrame | None = None
    e2e: pd.DataFrame | None = None
    # `gradcomp converge` (one row per training step).
    converge: pd.DataFrame | None = None
    # `gradcomp simulate --compare` output found in RUN/sim/ or RUN/ (not one of CSV_FILES).
    sim_vs_measured: pd.DataFrame | None = None
    # The host model that simulation used: fits.csv's `host` rows beside it (RUN/sim/).
    sim_host: pd.DataFrame | None = None
    meta: list = field(default_factory=list)  # (run label, run.json dict or {})
    # Earlier invocations into the same directory (run.<run_id>.json, kept by gradcomp; e.g.
    # `make bench` runs `gradcomp run` then `gradcomp converge` into one folder): (run label, dict).
    history: list = field(default_factory=list)
    # Folders not read, each (path, why): no run in them, a report folder, a run whose
    # CSV files have no rows.
    skipped: list = field(default_factory=list)
    # Rows left out while reading (a partial last row), one message each.
    warnings: list = field(default_factory=list)

    def get(self, name: str):
        return getattr(self, name.replace(".csv", ""))

    def empty(self) -> bool:
        return all(self.get(f) is None or len(self.get(f)) == 0 for f in CSV_FILES)


def load_results(paths) -> Results:
    if isinstance(paths, str):
        paths = [paths]
    res = Results()
    first_warning = len(WARNINGS)
    runs = find_runs(paths, res.skipped)
    frames = {f: [] for f in CSV_FILES}
    labels = [lab for _, lab in runs]
    for d, lab in runs:
        if labels.count(lab) > 1:
            lab = d
        meta = {}
        mp = os.path.join(d, "run.json")
        if os.path.exists(mp):
            try:
                with open(mp) as f:
                    meta = json.load(f)
            except json.JSONDecodeError as e:
                raise ReportError(f"{mp}: not valid JSON ({e})") from None
            sv = meta.get("schema_version")
            if sv is not None and sv not in SUPPORTED_SCHEMA_VERSIONS:
                raise ReportError(f"{mp}: schema_version {sv} is unknown to this analysis (it reads "
                                  f"{sorted(SUPPORTED_SCHEMA_VERSIONS)}); use the analysis/ of the gradcomp that wrote it")
        for kept in sorted(glob.glob(os.path.join(glob.escape(d), "run.*.json"))):
            try:
                with open(kept) as f:
                    res.history.append((lab, json.load(f)))
            except json.JSONDecodeError as e:
                raise ReportError(f"{kept}: not valid JSON ({e})") from None
        net = ""
        np_ = os.path.join(d, "network.txt")
        if os.path.exists(np_):
            with open(np_) as f:
                net = f.read().strip()
        res.meta.append((lab, meta))
        sims = []
        for sub in ("sim", ""):
            df = load_csv(os.path.join(d, sub), SIM_VS_MEASURED)
            if df is not None and len(df):
                sims.append(df.assign(run=lab))
                fp = os.path.join(d, sub, "fits.csv")
                if os.path.exists(fp):
                    f = pd.read_csv(fp)
                    if "kind" in f.columns and (f["kind"] == "host").any():
                        h = f[f["kind"] == "host"].assign(run=lab)
                        res.sim_host = pd.concat([x for x in (res.sim_host, h) if x is not None], ignore_index=True)
        if sims:
            res.sim_vs_measured = pd.concat([x for x in (res.sim_vs_measured, *sims) if x is not None], ignore_index=True)
        rows = 0
        for name in CSV_FILES:
            df = load_csv(d, name)
            if df is not None and len(df):
                df = df.copy()
                df["run"] = lab
                df["network"] = net
                frames[name].append(df)
                rows += len(df)
        if not rows:
            res.skipped.append((d, "its CSV files have no rows (a run that did not finish a case?)"))
    res.warnings = WARNINGS[first_warning:]
    for name, fs in frames.items():
        if fs:
            setattr(res, name.replace(".csv", ""), pd.concat(fs, ignore_index=True))
    if res.empty():
        raise ReportError(
            f"{', '.join(paths)}: no gradcomp CSV file with rows (expected micro_comm.csv, micro_compress.csv, "
            f"micro.csv, e2e.csv or converge.csv, or a `gradcomp simulate` folder's sim.csv)")
    return res
