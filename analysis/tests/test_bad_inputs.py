"""Bad input to every `python -m gradcomp_analysis` command (issue 52, items 7 and 8): each
ends in one line `gradcomp_analysis: error: ...` naming the file (and, for a CSV cell, the
line, column and value) and exit code 2, as the binary does; never a traceback, never a
report built on it. The inputs are the `analysis` rows of tests/data/bad-inputs.tsv, the
one catalogue of bad inputs that the binary's tests read too (tests/bad_inputs.rs): each
row an input, the files it writes (over a good run), the command and what its one line
must name."""

import codecs
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


E2E_HEADER = ("schema_version,case_id,model,method,fusion,pipelining,collective,aggregation,world_size,batch,device,"
              "density,rank,compress_s,comm_s,decompress_s,exposed_s,iter_s,iter_ci95_s,iters,dense_bytes,wire_bytes,"
              "planned_s,bwd_sync_s\n")


PROFILE = "method,stage,round,phase,rows,cols,world_size,time_s\ntopk,compress,0,0,64,64,2,0.001\n"
DEVCOST = ("method,stage,round,phase,rows,cols,measured_s,model_s,model_over_measured,device\n"
           "topk,compress,0,0,64,64,0.001,0.001,1.0,h200\n")
SVM = ("schema_version,case,method,world_size,measured_iter_s,simulated_iter_s,rel_err,tolerance,role\n"
       "1,a,ssgd,2,1.0,1.1,0.1,0.15,validation\n")
BINARY = b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01binary\n"

DEEP_JSON = "[" * 100_000 + "]" * 100_000
# The good gradcomp micro_compress.csv that the peer-compare rows carry (it is read before the torch profile).
PEER_MICRO = ("schema_version,method,rows,cols,compress_s,feedback_s,decompress_s,total_s,input_gbps,mem_read_gbps,"
              "wire_bytes,dense_bytes\n1,topk,64,64,0.001,0,0.001,0.002,1,10,100,100\n")
# The named fixtures a catalogue file's content may hold (tests/data/bad-inputs.tsv, its header).
FIXTURES = {"BINARY": BINARY, "DEEP_JSON": DEEP_JSON.encode(), "CONVERGE": converge().encode(),
            "CONVERGE_HEADER": CONVERGE_HEADER.encode(), "E2E_HEADER": E2E_HEADER.encode(), "PROFILE": PROFILE.encode(),
            "DEVCOST_HEADER": (DEVCOST.split("\n")[0] + "\n").encode(), "SVM": SVM.encode(),
            "PEER_MICRO": PEER_MICRO.encode()}
CATALOGUE = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "bad-inputs.tsv")


def content(text):
    """A catalogue file's CONTENT as bytes: DIR for `{DIR}`, else the escapes decoded and the fixtures written out."""
    if text == "{DIR}":
        return DIR
    raw = codecs.escape_decode(text.encode())[0]
    for name, value in FIXTURES.items():
        raw = raw.replace(b"{" + name.encode() + b"}", value)
    return raw


def read_catalogue():
    """The `analysis` rows of tests/data/bad-inputs.tsv, the one catalogue of bad inputs (the binary's rows
    are run by tests/bad_inputs.rs): (id, files over the good run folder `run` (path -> bytes or DIR),
    command line ({TMP}: the test's folder), what the one error line must contain)."""
    rows = []
    with open(CATALOGUE, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.split("\t")
            assert len(cols) == 7, f"bad-inputs.tsv line {n}: 7 tab-separated fields, got {len(cols)}"
            tool, ident, ranks, code, expect, files, args = cols
            if tool != "analysis":
                continue
            assert ranks == "-" and code == "2", f"bad-inputs.tsv line {n}: an analysis row has ranks - and exit 2"
            files = {} if files == "-" else dict((e.split("=", 1)[0], content(e.split("=", 1)[1]))
                                                 for e in files.split(";"))
            rows.append((ident, files, [] if args == "-" else args.split(" "), expect.split(" | ")))
    return rows


BAD_INPUTS = read_catalogue()


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
    rc = call([a.replace("{TMP}", str(tmp_path)) for a in argv])
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
    p = subprocess.run([sys.executable, "-m", "gradcomp_analysis", *[a.replace("{TMP}", str(tmp_path)) for a in argv]],
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
