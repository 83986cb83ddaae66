"""Bad input to every `python -m gradcomp_analysis` command (issue 52, items 7 and 8): each
ends in one line `gradcomp_analysis: error: ...` naming the file (and, for a CSV cell, the
line, column and value) and exit code 2, as the binary does; never a traceback, never a
report built on it. The catalogue BAD_INPUTS below is the one list every entry point's
test reads: each entry is an input family, the files it writes (over a good run), the
command and what its one line must name."""

import json
import os
import subprocess
import sys

import pytest

from gradcomp_analysis.__main__ import main
from gradcomp_analysis.devmodel import family_table
from gradcomp_analysis.io import load_results

DIR = object()  # a directory where a file belongs

CONVERGE_HEADER = ("schema_version,run_id,case_id,method,world_size,seed,steps,batch,lr,step,train_loss,eval_loss,"
                   "eval_accuracy,update_rel_err,status,wire_bytes,step_s\n")


def converge(rows=None):
    """A good converge.csv: ssgd and topk, two steps each, both `done`; ROWS replace its rows."""
    rows = rows or [("ssgd", 2, 0, "2.3", "2.0", "0.5", "ok"), ("ssgd", 2, 1, "2.0", "1.5", "0.6", "done"),
                    ("topk", 2, 0, "2.3", "2.1", "0.5", "ok"), ("topk", 2, 1, "2.0", "1.6", "0.6", "done")]
    return CONVERGE_HEADER + "".join(f"1,r,{m},{m},{ws},1,2,32,0.1,{s},{tl},{el},{ea},0,{st},100,0.01\n"
                                     for m, ws, s, tl, el, ea, st in rows)


def with_row(row):
    """The good converge.csv with one more row: its line is 6."""
    return converge() + f"1,r,x,topk,2,1,2,32,0.1,{row}\n"


E2E_HEADER = ("schema_version,case_id,model,method,fusion,pipelining,collective,aggregation,world_size,batch,device,"
              "density,rank,compress_s,comm_s,decompress_s,exposed_s,iter_s,iter_ci95_s,iters,dense_bytes,wire_bytes,"
              "planned_s,bwd_sync_s\n")
E2E_ROW = "1,c0,resnet20,ssgd,25MiB,on,allreduce,allreduce,{ws},32,v100,,,0,0.001,0,0,{it},1e-5,10,100,100,0.002,0.002\n"


def e2e(ws="2", it="0.002"):
    return E2E_HEADER + E2E_ROW.format(ws=ws, it=it)


PROFILE = "method,stage,round,phase,rows,cols,world_size,time_s\ntopk,compress,0,0,64,64,2,0.001\n"
DEVCOST = ("method,stage,round,phase,rows,cols,measured_s,model_s,model_over_measured,device\n"
           "topk,compress,0,0,64,64,0.001,0.001,1.0,h200\n")
SVM = ("schema_version,case,method,world_size,measured_iter_s,simulated_iter_s,rel_err,tolerance,role\n"
       "1,a,ssgd,2,1.0,1.1,0.1,0.15,validation\n")
BINARY = b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01binary\n"

# (id, files over the good run folder `run` (path -> str, bytes or DIR), command line ({d}: the
# test's folder), what the one error line must contain)
REPORT = ["report", "{d}/run", "--out", "{d}/rep"]
BAD_INPUTS = [
    # converge.csv: text, bytes, values gradcomp never writes (item 7 and 8)
    ("converge-not-csv-text", {"converge.csv": "hello: this is a note\nnot a result\n"}, REPORT,
     ["converge.csv", "schema_version"]),
    ("converge-non-utf8", {"converge.csv": BINARY}, REPORT, ["converge.csv", "byte 0", "not UTF-8"]),
    ("converge-non-utf8-row", {"converge.csv": with_row("1,2.0,1.5,0.6,0,done,100,0.01").encode()
                               .replace(b",x,", b",\xff\xfe,")}, REPORT, ["converge.csv", "line 6", "not UTF-8"]),
    ("converge-text-in-a-number", {"converge.csv": with_row("1,abc,1.5,0.6,0,done,100,0.01")}, REPORT,
     ["converge.csv", "line 6", "column train_loss", "'abc'", "not a number"]),
    ("converge-every-loss-inf", {"converge.csv": converge([("ssgd", 2, 0, "inf", "inf", "0.5", "ok"),
                                                           ("ssgd", 2, 1, "inf", "inf", "0.6", "done")])}, REPORT,
     ["converge.csv", "line 2", "column train_loss", "'inf'", "diverged"]),
    ("converge-unknown-status", {"converge.csv": converge().replace("done", "???")}, REPORT,
     ["converge.csv", "line 3", "column status", "'???'", "ok, done, diverged, interrupted"]),
    ("converge-world-size-0", {"converge.csv": converge().replace(",ssgd,2,", ",ssgd,0,")}, REPORT,
     ["converge.csv", "line 2", "column world_size", "'0'", "1 or more"]),
    ("converge-negative-step", {"converge.csv": with_row("-1,2.0,1.5,0.6,0,ok,100,0.01")}, REPORT,
     ["converge.csv", "line 6", "column step", "'-1'"]),
    ("converge-accuracy-above-1", {"converge.csv": with_row("1,2.0,1.5,7,0,done,100,0.01")}, REPORT,
     ["converge.csv", "line 6", "column eval_accuracy", "'7"]),
    # run.json and the kept run.<run_id>.json
    ("run-json-list", {"run.json": "[1, 2]"}, REPORT, ["run.json", "a list", "not a JSON object"]),
    ("run-json-string", {"run.json": '"ok"'}, REPORT, ["run.json", "a string"]),
    ("run-json-number", {"run.json": "3"}, REPORT, ["run.json", "a number"]),
    ("run-json-directory", {"run.json": DIR}, REPORT, ["run.json", "not a regular file", "directory"]),
    ("run-json-deep", {"run.json": "[" * 100_000 + "]" * 100_000}, REPORT, ["run.json", "nested too deeply"]),
    ("run-json-non-utf8", {"run.json": b'{"a": "\xff"}'}, REPORT, ["run.json", "byte 7", "not UTF-8"]),
    ("run-json-invalid", {"run.json": "{"}, REPORT, ["run.json", "not valid JSON"]),
    ("run-json-schema-version-list", {"run.json": '{"schema_version": [1]}'}, REPORT,
     ["run.json", "schema_version [1]", "whole number"]),
    ("kept-run-json-list", {"run.20260101-000000-abcdef.json": "[]"}, REPORT, ["run.20260101-000000-abcdef.json", "a list"]),
    ("kept-run-json-directory", {"run.x.json": DIR}, REPORT, ["run.x.json", "not a regular file"]),
    # network.txt
    ("network-txt-directory", {"network.txt": DIR}, REPORT, ["network.txt", "not a regular file"]),
    ("network-txt-binary", {"network.txt": BINARY}, REPORT, ["network.txt", "not UTF-8"]),
    ("network-txt-many-lines", {"network.txt": "ib\n" * 50}, REPORT, ["network.txt", "one short line"]),
    # --out
    ("report-out-is-a-file", {"afile": "x"}, ["report", "{d}/run", "--out", "{d}/run/afile"],
     ["--out", "afile", "is not a directory"]),
    ("report-out-below-a-file", {"afile": "x"}, ["report", "{d}/run", "--out", "{d}/run/afile/rep"],
     ["--out", "afile", "is a file"]),
    ("compare-out-is-a-file", {"e2e.csv": e2e(), "afile": "x"}, ["compare", "{d}/run", "{d}/run", "--out", "{d}/run/afile"],
     ["--out", "is not a directory"]),
    ("peer-compare-out-is-a-file", {"afile": "x"}, ["peer-compare", "{d}/run", "--out", "{d}/run/afile"],
     ["--out", "is not a directory"]),
    ("gpu-profile-out-is-a-file", {"afile": "x"}, ["gpu-profile", "{d}/run", "{d}/run", "--out", "{d}/run/afile",
                                                   "--revision", "r"], ["--out", "is not a directory"]),
    ("sim-agreement-out-is-a-directory", {"sim_vs_measured.csv": SVM}, ["sim-agreement", "{d}/run", "{d}/run", "--out",
                                                                         "{d}/run"], ["--out", "is a directory"]),
    # paper_scale.txt (report and verdicts)
    ("paper-scale-binary-report", {"ps/paper_scale.txt": BINARY}, REPORT, ["paper_scale.txt", "not UTF-8"]),
    ("paper-scale-binary-verdicts", {"ps/paper_scale.txt": BINARY}, ["verdicts", "{d}/run"],
     ["paper_scale.txt", "not UTF-8"]),
    ("paper-scale-error-txt-directory", {"ps/paper_scale.txt": "headline=x\n", "ps/error.txt": DIR},
     ["verdicts", "{d}/run"], ["error.txt", "not a regular file"]),
    # e2e.csv (planner-accuracy, compare)
    ("e2e-non-utf8", {"e2e.csv": e2e().encode().replace(b"resnet20", b"resnet\xff")}, ["planner-accuracy", "{d}/run"],
     ["e2e.csv", "line 2", "not UTF-8"]),
    ("e2e-world-size-0", {"e2e.csv": e2e(ws="0")}, ["compare", "{d}/run", "{d}/run", "--out", "{d}/c"],
     ["e2e.csv", "line 2", "column world_size", "'0'"]),
    ("e2e-text-in-iter-s", {"e2e.csv": e2e(it="fast")}, ["planner-accuracy", "{d}/run"],
     ["e2e.csv", "line 2", "column iter_s", "'fast'"]),
    # profiles (gpu-profile, peer-compare) and device-model's CSV
    ("gpu-profile-bad-value", {"a/profile-r32-ws32.csv": PROFILE.replace(",0,0,64", ",x,0,64"),
                               "b/profile-r32-ws32.csv": PROFILE},
     ["gpu-profile", "{d}/run/a", "{d}/run/b", "--out", "{d}/g", "--revision", "r"], ["profile-r32-ws32.csv", "'x'"]),
    ("gpu-profile-binary", {"a/profile-r32-ws32.csv": BINARY, "b/profile-r32-ws32.csv": PROFILE},
     ["gpu-profile", "{d}/run/a", "{d}/run/b", "--out", "{d}/g", "--revision", "r"], ["profile-r32-ws32.csv", "not UTF-8"]),
    ("gpu-profile-directory", {"a/profile-r32-ws32.csv": DIR, "b/profile-r32-ws32.csv": PROFILE},
     ["gpu-profile", "{d}/run/a", "{d}/run/b", "--out", "{d}/g", "--revision", "r"], ["profile-r32-ws32.csv", "not a regular"]),
    ("gpu-profile-missing-column", {"a/profile-r32-ws32.csv": "method,stage\ntopk,compress\n",
                                    "b/profile-r32-ws32.csv": PROFILE},
     ["gpu-profile", "{d}/run/a", "{d}/run/b", "--out", "{d}/g", "--revision", "r"], ["profile-r32-ws32.csv", "no column"]),
    ("gpu-profile-kernels-bad-value", {"a/profile-r32-ws32.csv": PROFILE, "b/profile-r32-ws32.csv": PROFILE,
                                       "a/kernels.csv": "family,variant,d,rows,cols,rank,workers,count,time_s\n"
                                                        "copy,a,1,1,1,0,1,1,slow\n", "b/kernels.csv": DIR},
     ["gpu-profile", "{d}/run/a", "{d}/run/b", "--out", "{d}/g", "--revision", "r"], ["kernels.csv", "'slow'"]),
    ("peer-torch-profile-bad-value", {"p/gradcomp-0/micro_compress.csv": "x\n", "p/torch-0.csv": PROFILE.replace("64,64", "64,y")},
     ["peer-compare", "{d}/run/p"], ["torch-0.csv", "'y'"]),
    ("peer-torch-profile-binary", {"p/torch-0.csv": BINARY, "p/gradcomp-0/micro_compress.csv": "x\n"},
     ["peer-compare", "{d}/run/p"], ["torch-0.csv", "not UTF-8"]),
    ("device-model-missing", {}, ["device-model", "{d}/run/none.csv"], ["none.csv", "no such file"]),
    ("device-model-directory", {}, ["device-model", "{d}/run"], ["run", "not a regular file"]),
    ("device-model-binary", {"d.csv": BINARY}, ["device-model", "{d}/run/d.csv"], ["d.csv", "not UTF-8"]),
    ("device-model-bad-value", {"d.csv": DEVCOST.replace("64,64", "64,wide")}, ["device-model", "{d}/run/d.csv"],
     ["d.csv", "line 2", "column cols", "'wide'"]),
    ("sim-agreement-binary", {"sim_vs_measured.csv": BINARY}, ["sim-agreement", "{d}/run", "{d}/run"],
     ["sim_vs_measured.csv", "not UTF-8"]),
    ("sim-accuracy-binary", {"sim_vs_measured.csv": BINARY}, ["sim-accuracy", "{d}/run"],
     ["sim_vs_measured.csv", "not UTF-8"]),
    ("sim-accuracy-no-verdicts", {"sim_vs_measured.csv": SVM}, ["sim-accuracy", "{d}/run"],
     ["sim_vs_measured.csv", "columns", "missing"]),
    # the command line itself: argparse's usage block is one line
    ("cli-no-command", {}, [], ["gradcomp_analysis: error: the following arguments are required: cmd"]),
    ("cli-unknown-command", {}, ["reprot"], ["invalid choice: 'reprot'"]),
    ("cli-report-without-folder", {}, ["report"], ["report: the following arguments are required: results_dir",
                                                   "python -m gradcomp_analysis report --help"]),
    ("cli-unknown-option", {}, ["report", "{d}/run", "--bogus"], ["unrecognized arguments: --bogus"]),
    ("cli-tolerance-not-a-number", {}, ["compare", "a", "b", "--tolerance", "x"],
     ["compare: argument --tolerance: invalid float value: 'x'"]),
    ("cli-min-elems-not-a-number", {}, ["device-model", "d.csv", "--min-elems", "many"],
     ["device-model: argument --min-elems"]),
    ("cli-gpu-profile-without-revision", {}, ["gpu-profile", "a", "b", "--out", "o"],
     ["gpu-profile: the following arguments are required: --revision"]),
]
# The peer-compare rows above reach the torch profile only past gradcomp's micro_compress.csv,
# so they carry a good one (written in make_files).
PEER_MICRO = ("schema_version,method,rows,cols,compress_s,feedback_s,decompress_s,total_s,input_gbps,mem_read_gbps,"
              "wire_bytes,dense_bytes\n1,topk,64,64,0.001,0,0.001,0.002,1,10,100,100\n")


def make_files(d, files):
    run = d / "run"
    run.mkdir(parents=True, exist_ok=True)
    base = {"converge.csv": converge()}
    for name, content in {**base, **files}.items():
        p = run / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if content is DIR:
            p.mkdir(exist_ok=True)
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            if name.endswith("micro_compress.csv"):
                content = PEER_MICRO
            p.write_text(content)


def call(argv):
    """main(ARGV) in this process: its exit code (argparse's SystemExit included)."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_every_command_is_in_the_catalogue():
    import re

    import gradcomp_analysis.__main__ as M
    doc_cmds = set(re.findall(r"python -m gradcomp_analysis ([a-z-]+)", M.__doc__))
    assert len(doc_cmds) == 9, doc_cmds
    covered = {argv[0] for _, _, argv, _ in BAD_INPUTS if argv}
    assert doc_cmds <= covered, doc_cmds - covered
    assert len({i for i, *_ in BAD_INPUTS}) == len(BAD_INPUTS)


@pytest.mark.parametrize("name, files, argv, expect", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(name, files, argv, expect, tmp_path, capsys):
    make_files(tmp_path, files)
    rc = call([a.format(d=tmp_path) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 2, (name, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradcomp_analysis: error: "), (name, err)
    for e in expect:
        assert e in lines[0], (name, e, lines[0])
    assert "Traceback" not in err and "usage:" not in err
    # Nothing was written for a refused input (no report, no profiles, no compare folder).
    for out_dir in ("rep", "g", "c"):
        assert not (tmp_path / out_dir).exists(), (name, out_dir)


@pytest.mark.parametrize("name", ["converge-non-utf8", "run-json-deep", "cli-report-without-folder",
                                  "device-model-directory"])
def test_the_real_command_prints_one_line_not_a_traceback(name, tmp_path):
    """The same through `python -m gradcomp_analysis` (a subprocess: what a user sees)."""
    _, files, argv, expect = next(b for b in BAD_INPUTS if b[0] == name)
    make_files(tmp_path, files)
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    p = subprocess.run([sys.executable, "-m", "gradcomp_analysis", *[a.format(d=tmp_path) for a in argv]],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("gradcomp_analysis: error: "), p.stderr
    assert all(e in p.stderr for e in expect), p.stderr


def test_what_gradcomp_does_write_is_still_read(tmp_path):
    """The checks refuse only what gradcomp never writes: a `diverged` row with a NaN or
    infinite train loss, an infinite held-out loss on a `done` row (the update overflowed on
    the last step), an `interrupted` last row, empty cells, blank lines, a network label."""
    rows = [("ssgd", 2, 0, "2.3", "2.0", "0.5", "ok"), ("ssgd", 2, 1, "2.0", "inf", "0.1", "done"),
            ("topk", 2, 0, "2.3", "", "", "ok"), ("topk", 2, 1, "nan", "", "", "diverged"),
            ("dgc", 2, 0, "inf", "", "", "diverged"), ("qsgd", 2, 0, "2.3", "2.2", "0.4", "interrupted")]
    make_files(tmp_path, {"converge.csv": converge(rows) + "\n", "network.txt": "eth-10g\n",
                          "run.json": json.dumps({"schema_version": 1, "revision": "abc"})})
    res = load_results(str(tmp_path / "run"))
    assert len(res.converge) == 6 and set(res.converge["network"]) == {"eth-10g"}
    assert res.meta[0][1]["revision"] == "abc"
    (tmp_path / "d.csv").write_text(DEVCOST)
    assert family_table(str(tmp_path / "d.csv")).startswith("| kernel family |")
