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

import contextlib
import csv
import glob
import io
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import SUPPORTED_SCHEMA_VERSIONS

CSV_FILES = ("micro_comm.csv", "micro_compress.csv", "micro.csv", "e2e.csv", "converge.csv")

SIM_VS_MEASURED = "sim_vs_measured.csv"
# `gradcomp converge`'s record beside a benchmark's run.json (src/record/meta.rs CONVERGE_BESIDE).
CONVERGE_BESIDE = "converge.run.json"

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


def _utf8(path: str, data: bytes) -> str:
    """DATA (PATH's bytes) as text; refuses bytes that are not UTF-8 (a binary or damaged
    file: gradcomp writes UTF-8), naming the byte and its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ReportError(f"{path}: byte {e.start} (line {line}, 0x{data[e.start]:02x}) is not UTF-8 text: a binary "
                          f"or damaged file, not one gradcomp wrote; remove it or restore it from the run") from None


def read_text(path: str) -> str:
    """The text of PATH, which must be a regular UTF-8 file (run.json, network.txt,
    paper_scale.txt, profiles); anything else is a ReportError naming it."""
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file (or a broken link); check the path")
    if not os.path.isfile(path):
        what = "a directory" if os.path.isdir(path) else "a device or FIFO"
        raise ReportError(f"{path}: not a regular file ({what}); move it away or remove it")
    with open(path, "rb") as f:
        return _utf8(path, f.read())


def read_json_object(path: str) -> dict:
    """PATH as a JSON object (run.json, run.<run_id>.json): a ReportError, not a traceback,
    for a directory, non-UTF-8 bytes, invalid or absurdly nested JSON, or JSON that is not
    an object (a list, a string, a number)."""
    text = read_text(path)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON ({e})") from None
    except RecursionError:
        raise ReportError(f"{path}: JSON nested too deeply to read; not a run record gradcomp wrote "
                          f"(remove it or restore it from the run)") from None
    if not isinstance(obj, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(obj), "a number")
        raise ReportError(f"{path}: holds {kind}, not a JSON object ({{...}}); not a run record gradcomp wrote "
                          f"(remove it or restore it from the run)")
    sv = obj.get("schema_version")
    if sv is not None and (isinstance(sv, bool) or not isinstance(sv, int)):
        raise ReportError(f"{path}: schema_version {json.dumps(sv)[:80]} is not a whole number; not a run record "
                          f"gradcomp wrote (remove it or restore it from the run)")
    return obj


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


# Columns of each file that hold numbers (an empty cell is "not applicable" and allowed).
NUMERIC_COLUMNS = {
    "micro_comm.csv": ["world_size", "bytes", "median_s", "busbw_gbps"],
    "micro_compress.csv": ["rows", "cols", "compress_s", "feedback_s", "decompress_s", "input_gbps",
                           "mem_read_gbps", "wire_bytes", "dense_bytes"],
    "micro.csv": ["rows", "cols", "world_size", "compress_s", "comm_s", "decompress_s", "total_s"],
    "e2e.csv": ["world_size", "batch", "density", "rank", "compress_s", "comm_s", "decompress_s", "exposed_s",
                "iter_s", "dense_bytes", "wire_bytes"],
    "converge.csv": ["world_size", "step", "train_loss", "eval_loss", "eval_accuracy", "update_rel_err",
                     "wire_bytes", "step_s"],
    SIM_VS_MEASURED: ["world_size", "measured_iter_s", "simulated_iter_s", "rel_err", "tolerance"],
}
# converge.csv's `status` (docs/csv-schema.md): what gradcomp writes.
CONVERGE_STATUSES = ("ok", "done", "diverged", "interrupted")
_FIX = "a damaged or hand-edited row: correct or remove that line (docs/csv-schema.md)"


def check_values(df: pd.DataFrame, path: str, line_of=None) -> None:
    """Refuse a cell gradcomp never writes, naming the file, line, column and value: text in a
    numeric column, a world size below 1; in converge.csv a step below 0, a status other than
    ok/done/diverged/interrupted, a train loss that is not finite outside a `diverged` row
    (the only row gradcomp writes one on), an accuracy outside [0, 1]. LINE_OF maps a row's
    index to its line in the file (default: index + 2)."""
    name = os.path.basename(path)

    def refuse(i, col, val, why, fix=_FIX):
        line = line_of[i] if line_of is not None and i < len(line_of) else i + 2
        raise ReportError(f"{path}: line {line}, column {col}: {val!r} {why}; {fix}")

    num = {}
    for col in NUMERIC_COLUMNS.get(name, []):
        if col not in df.columns:
            continue
        v = pd.to_numeric(df[col], errors="coerce")
        bad = v.isna() & df[col].notna()
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            refuse(i, col, str(df[col].iloc[i]), "is not a number")
        num[col] = v
    if "world_size" in num:
        ws = num["world_size"]
        bad = ws.notna() & ((ws < 1) | (ws != ws.round()))
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            refuse(i, "world_size", str(df["world_size"].iloc[i]), "is not a world size (a whole number of ranks, 1 or more)")
    if name != "converge.csv":
        return
    st = df["status"].astype(str)
    bad = ~st.isin(CONVERGE_STATUSES)
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        refuse(i, "status", str(df["status"].iloc[i]), f"is not a converge status ({', '.join(CONVERGE_STATUSES)})",
               "a damaged or hand-edited row (correct or remove that line), or a newer gradcomp's file "
               "(use that gradcomp's analysis/)")
    step = num["step"]
    bad = step.isna() | (step < 0) | (step != step.round())
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        refuse(i, "step", str(df["step"].iloc[i]), "is not a step (a whole number, 0 or more)")
    tl = num["train_loss"]
    bad = ~pd.Series(np.isfinite(tl.to_numpy(dtype=float)), index=tl.index) & (st != "diverged")
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        refuse(i, "train_loss", str(df["train_loss"].iloc[i]),
               f"on a row with status {st.iloc[i]!r}: gradcomp writes a train loss that is not finite only on the "
               f"`diverged` row that ends its case")
    acc = num["eval_accuracy"]
    bad = acc.notna() & ((acc < 0) | (acc > 1))
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        refuse(i, "eval_accuracy", str(df["eval_accuracy"].iloc[i]), "is not an accuracy (a fraction in [0, 1])")


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
    lines = _utf8(path, data).splitlines()
    width = len(next(csv.reader([lines[0]])))
    line_of = []  # the file line of each data row (pandas skips blank lines)
    for i, fields in enumerate(csv.reader(lines[1:]), start=2):
        if fields and len(fields) != width:
            raise ReportError(f"{path}: line {i} has {len(fields)} fields, the header {width}: a damaged "
                              f"row (edited, or two writers); remove that line or use the run's other files")
        if fields and any(f.strip() for f in fields):
            line_of.append(i)
    try:
        df = pd.read_csv(io.BytesIO(data))
    except pd.errors.EmptyDataError:
        return None
    except pd.errors.ParserError as e:
        raise ReportError(f"{path}: not a CSV file ({str(e).strip()})") from None
    check_schema(df, path)
    check_values(df, path, line_of if len(line_of) == len(df) else None)
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
                # One line for the topmost folder without runs, not one per folder below it;
                # a folder that could not be read keeps its own line (it may hold runs).
                unread = [x for x in skipped[n:] if x[1].startswith("cannot be read")]
                del skipped[n:]
                if not (unread and unread[0][0] == p):
                    skipped.append((p, f"no {', '.join(CSV_FILES)} in it or below it"))
                skipped.extend(unread)
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
    # The convergence check's records in a folder whose run.json is a benchmark's (converge.run.json,
    # earlier ones converge.run.<run_id>.json; `make bench`): (run label, dict), the current one first.
    converge_records: list = field(default_factory=list)
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
        if os.path.lexists(mp):
            meta = read_json_object(mp)
            sv = meta.get("schema_version")
            if sv is not None and sv not in SUPPORTED_SCHEMA_VERSIONS:
                raise ReportError(f"{mp}: schema_version {sv} is unknown to this analysis (it reads "
                                  f"{sorted(SUPPORTED_SCHEMA_VERSIONS)}); use the analysis/ of the gradcomp that wrote it")
        for kept in sorted(glob.glob(os.path.join(glob.escape(d), "run.*.json"))):
            res.history.append((lab, read_json_object(kept)))
        beside = [os.path.join(d, CONVERGE_BESIDE)] + sorted(glob.glob(os.path.join(glob.escape(d), "converge.run.*.json")))
        res.converge_records.extend((lab, read_json_object(p)) for p in beside if os.path.lexists(p))
        net = ""
        np_ = os.path.join(d, "network.txt")
        if os.path.lexists(np_):
            net = read_text(np_).strip()
            if "\n" in net or len(net) > 200:
                raise ReportError(f"{np_}: {len(net)} characters over {net.count(chr(10)) + 1} lines; a network label is "
                                  f"one short line (e.g. ib, eth-10g; slurm/submit-acpsgd-network.sh writes it): "
                                  f"correct or remove the file")
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


@contextlib.contextmanager
def staged_dir(out_dir: str, what: str):
    """A fresh folder inside OUT_DIR to write one output's files into: when the block ends they
    move into OUT_DIR (renames, which need no free space), and when it raises they are dropped.
    A failed write (a full disk) or an error found half way leaves no partial file and an earlier
    output's files as they were. An OSError names where its file was to go, and says that no
    file of WHAT was written. OUT_DIR, when this made it, is removed again unless the output
    moved in: a refused input leaves no empty output folder."""
    made = not os.path.isdir(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    moved = False
    stage = tempfile.mkdtemp(prefix=".gradcomp-", suffix=".tmp", dir=out_dir)
    try:
        yield stage
        for name in sorted(os.listdir(stage)):
            os.replace(os.path.join(stage, name), os.path.join(out_dir, name))
        moved = True
    except OSError as e:
        where = str(e.filename) if e.filename else ""
        where = os.path.join(out_dir, os.path.relpath(where, stage)) if where.startswith(stage) else where or out_dir
        raise OSError(e.errno, f"{e.strerror or e} (no file of this {what} was written)", where) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if made and not moved:
            try:
                os.rmdir(out_dir)
            except OSError:
                pass  # something else put a file there meanwhile: leave it
