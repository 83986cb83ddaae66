"""io.py at the places mutation testing found untested (issue 49; docs/mutation.md): the
words of its refusals, the warning printed once, a report folder, network.txt's limit, and
the simulator files of several runs. Expectations written by hand."""

import json
import math
import os

import pandas as pd
import pytest

from gradcomp_analysis import io as IO
from gradcomp_analysis.io import ReportError

from test_io_errors import run_dir

SVM = pd.DataFrame([dict(schema_version=1, case="ssgd/host", method="ssgd", world_size=2, measured_iter_s=1.0,
                         simulated_iter_s=1.1, rel_err=0.1, tolerance=0.15, role="validation")]).to_csv(index=False)


def refusal(fn, *args):
    with pytest.raises(ReportError) as e:
        fn(*args)
    return str(e.value)


def test_read_text_names_what_the_path_is(tmp_path):
    assert refusal(IO.read_text, str(tmp_path)) == \
        f"{tmp_path}: not a regular file (a directory); move it away or remove it"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert refusal(IO.read_text, str(fifo)) == \
        f"{fifo}: not a regular file (a device or FIFO); move it away or remove it"


@pytest.mark.parametrize("text, kind", [("[1]", "a list"), ('"x"', "a string"), ("true", "a boolean"),
                                        ("null", "null"), ("3.5", "a number")])
def test_read_json_object_names_what_it_holds(tmp_path, text, kind):
    p = tmp_path / "run.json"
    p.write_text(text)
    assert refusal(IO.read_json_object, str(p)) == (
        f"{p}: holds {kind}, not a JSON object ({{...}}); not a run record gradcomp wrote "
        f"(remove it or restore it from the run)")


def test_a_long_schema_version_is_cut_at_80_characters(tmp_path):
    p = tmp_path / "run.json"
    p.write_text(json.dumps({"schema_version": "v" * 100}))
    assert refusal(IO.read_json_object, str(p)) == (
        f'{p}: schema_version "{"v" * 79} is not a whole number; not a run record '
        f"gradcomp wrote (remove it or restore it from the run)")


def test_a_warning_is_kept_and_printed_once(capsys, monkeypatch):
    monkeypatch.setattr(IO, "WARNINGS", [])
    IO._warn("x.csv: left out a row")
    IO._warn("x.csv: left out a row")
    IO._warn("y.csv: left out a row")
    assert IO.WARNINGS == ["x.csv: left out a row", "y.csv: left out a row"]
    err = capsys.readouterr()
    assert err.out == ""
    assert err.err == ("gradcomp_analysis: warning: x.csv: left out a row\n"
                       "gradcomp_analysis: warning: y.csv: left out a row\n")


def test_a_report_folder_has_both_its_manifest_and_report(tmp_path):
    assert not IO._is_report(str(tmp_path))
    (tmp_path / "manifest.json").write_text("{}")
    assert not IO._is_report(str(tmp_path))
    (tmp_path / "manifest.json").unlink()
    (tmp_path / "report.md").write_text("# r")
    assert not IO._is_report(str(tmp_path))
    (tmp_path / "manifest.json").write_text("{}")
    assert IO._is_report(str(tmp_path))


def test_no_run_in_several_paths_names_them_all(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    msg = refusal(IO.find_runs, [str(tmp_path / "a"), str(tmp_path / "b")])
    assert msg.startswith(f"{tmp_path / 'a'}, {tmp_path / 'b'}: no gradcomp CSV file with rows (expected ")


def test_network_label_of_200_characters_and_no_more(tmp_path):
    ok = run_dir(tmp_path, "ok", **{"network.txt": "n" * 200 + "\n"})
    assert IO.load_results(str(ok)).e2e["network"].tolist() == ["n" * 200]
    long = run_dir(tmp_path, "long", **{"network.txt": "n" * 201})
    assert refusal(IO.load_results, str(long)).startswith(
        f"{long / 'network.txt'}: 201 characters over 1 lines; a network label is one short line")
    two = run_dir(tmp_path, "two", **{"network.txt": "ib\neth\n"})
    assert refusal(IO.load_results, str(two)).startswith(f"{two / 'network.txt'}: 6 characters over 2 lines;")
    bare = run_dir(tmp_path, "bare")
    res = IO.load_results(str(bare))
    assert res.e2e["network"].tolist() == [""] and res.meta == [("bare", {})]


def test_simulator_files_of_two_runs(tmp_path):
    fits = "kind,name,a\nhost,start_s,0.1\ncollective,allreduce,0.2\nhost,pack_s,0.3\n"
    a = run_dir(tmp_path / "x", "a", **{"sim__sim_vs_measured.csv": SVM, "sim__fits.csv": fits})
    # run b: the comparison in the run folder itself, fits.csv beside it
    b = run_dir(tmp_path / "x", "b", **{"sim_vs_measured.csv": SVM, "fits.csv": fits})
    # run c: a fits.csv without host rows, and one without a kind column
    c = run_dir(tmp_path / "x", "c", **{"sim__sim_vs_measured.csv": SVM, "sim__fits.csv": "kind,name\ncomm,x\n",
                                        "sim_vs_measured.csv": SVM, "fits.csv": "name\nx\n"})
    res = IO.load_results([str(a), str(b), str(c)])
    assert res.sim_vs_measured["run"].tolist() == ["a", "b", "c", "c"]
    assert list(res.sim_vs_measured.index) == [0, 1, 2, 3]
    assert res.sim_host["run"].tolist() == ["a", "a", "b", "b"]
    assert res.sim_host["name"].tolist() == ["start_s", "pack_s", "start_s", "pack_s"]
    assert list(res.sim_host.index) == [0, 1, 2, 3]
    only_c = IO.load_results(str(c))
    assert only_c.sim_host is None and len(only_c.sim_vs_measured) == 2


FIX = "a damaged or hand-edited row: correct or remove that line (docs/csv-schema.md)"


def test_check_values_names_the_line_by_hand():
    d = pd.DataFrame({"world_size": [2, 2, 2], "iter_s": ["0.1", "0.2", "x"]})
    assert refusal(IO.check_values, d, "/r/e2e.csv") == f"/r/e2e.csv: line 4, column iter_s: 'x' is not a number; {FIX}"
    assert refusal(IO.check_values, d, "/r/e2e.csv", [2, 3, 7]).startswith("/r/e2e.csv: line 7, column iter_s:")
    # a map shorter than the rows: the row's index + 2
    assert refusal(IO.check_values, d, "/r/e2e.csv", [2, 3]).startswith("/r/e2e.csv: line 4, column iter_s:")
    # a numeric column the file lacks does not end the checks of the others
    assert refusal(IO.check_values, d.drop(columns=["world_size"]), "/r/e2e.csv").startswith(
        "/r/e2e.csv: line 4, column iter_s:")


def test_check_values_world_size_1_is_one_rank():
    IO.check_values(pd.DataFrame({"world_size": [1, 4]}), "/r/e2e.csv")
    assert refusal(IO.check_values, pd.DataFrame({"world_size": [1, 0]}), "/r/e2e.csv") == (
        f"/r/e2e.csv: line 3, column world_size: '0' is not a world size (a whole number of ranks, 1 or more); {FIX}")


def converge_rows(**over):
    d = pd.DataFrame({"world_size": [2, 2], "step": [0, 1], "train_loss": [2.0, 1.5], "eval_loss": [math.nan, 1.4],
                      "eval_accuracy": [math.nan, 0.0], "status": ["ok", "done"]}, index=[5, 6])
    for k, v in over.items():
        d[k] = v
    return d


def test_check_values_of_converge_rows_by_hand():
    IO.check_values(converge_rows(), "/r/converge.csv")  # accuracy 0 is an accuracy; any index
    IO.check_values(converge_rows(eval_accuracy=[math.nan, 1.0]), "/r/converge.csv")
    assert refusal(IO.check_values, converge_rows(status=["ok", "finished"]), "/r/converge.csv") == (
        "/r/converge.csv: line 3, column status: 'finished' is not a converge status (ok, done, diverged, "
        "interrupted); a damaged or hand-edited row (correct or remove that line), or a newer gradcomp's file "
        "(use that gradcomp's analysis/)")
    assert refusal(IO.check_values, converge_rows(step=[0, -1]), "/r/converge.csv") == (
        f"/r/converge.csv: line 3, column step: '-1' is not a step (a whole number, 0 or more); {FIX}")
    assert refusal(IO.check_values, converge_rows(train_loss=[float("inf"), 1.0]), "/r/converge.csv").startswith(
        "/r/converge.csv: line 2, column train_loss: 'inf' on a row with status 'ok'")
    IO.check_values(converge_rows(train_loss=[2.0, float("nan")], status=["ok", "diverged"]), "/r/converge.csv")
    assert refusal(IO.check_values, converge_rows(eval_accuracy=[math.nan, 1.5]), "/r/converge.csv").startswith(
        "/r/converge.csv: line 3, column eval_accuracy: '1.5' is not an accuracy")


def test_a_damaged_row_is_named_by_its_line_in_the_file_blank_lines_counted(tmp_path):
    d = run_dir(tmp_path, "r")
    text = (d / "e2e.csv").read_text().splitlines()
    bad = text[1].replace(",0.002,", ",x,", 1)   # iter_s
    (d / "e2e.csv").write_text("\n".join([text[0], text[1], "", bad]) + "\n")
    assert refusal(IO.load_csv, str(d), "e2e.csv").startswith(f"{d / 'e2e.csv'}: line 4, column iter_s: 'x'")


def test_a_cut_row_or_header_is_left_out_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(IO, "WARNINGS", [])
    d = run_dir(tmp_path, "r")
    p = d / "e2e.csv"
    p.write_text(p.read_text() + "1,c1,res")  # 8 bytes, no newline
    res = IO.load_results(str(d))
    assert len(res.e2e) == 1
    assert res.warnings == [f"{p}: left out a partial last row (8 bytes without a newline) written by an "
                            f"interrupted run; its numbers are not read"]
    q = tmp_path / "h.csv"
    q.write_text("schema_version,ca")
    assert IO._complete_rows(str(q)) == b""
    assert IO.WARNINGS[-1] == (f"{q}: left out a partial header (17 bytes without a newline) written by an "
                               f"interrupted run; its numbers are not read")


def test_discover_names_what_it_skipped(tmp_path):
    root = tmp_path / "root"
    run_dir(root / "deep" / "er", "run")     # a run three levels down
    (root / "empty" / "deeper").mkdir(parents=True)
    (root / "rep").mkdir()
    (root / "rep" / "manifest.json").write_text("{}")
    (root / "rep" / "report.md").write_text("# r")
    run_dir(root, "zrun")
    (root / "notes.txt").write_text("a file, not a folder")
    runs, skipped = IO.discover(str(root))
    assert runs == [(str(root / "deep" / "er" / "run"), os.path.join("deep", "er", "run")),
                    (str(root / "zrun"), "zrun")]
    assert skipped == [(str(root / "empty"), "no micro_comm.csv, micro_compress.csv, micro.csv, e2e.csv, "
                                             "converge.csv in it or below it"),
                       (str(root / "rep"), "a report written by gradcomp_analysis, not a run")]


def test_a_run_without_rows_is_skipped_with_why(tmp_path):
    a = run_dir(tmp_path / "x", "a")
    b = tmp_path / "x" / "b"
    b.mkdir()
    (b / "e2e.csv").write_text((a / "e2e.csv").read_text().splitlines()[0] + "\n")
    res = IO.load_results(str(tmp_path / "x"))
    assert res.skipped == [(str(b), "its CSV files have no rows (a run that did not finish a case?)")]


def test_discover_names_a_folder_it_cannot_read(tmp_path, monkeypatch):
    """A folder that cannot be listed says so, not "no CSV in it" (it may hold runs: before
    the fix the reason was replaced by that line for every folder below the root)."""
    root = tmp_path / "root"
    run_dir(root, "zrun")
    (root / "locked").mkdir()
    (root / "outer" / "locked").mkdir(parents=True)
    listdir = os.listdir

    def fake(d):
        if os.path.basename(str(d)) == "locked":
            raise PermissionError(13, "Permission denied")
        return listdir(d)
    monkeypatch.setattr(os, "listdir", fake)
    runs, skipped = IO.discover(str(root))
    assert runs == [(str(root / "zrun"), "zrun")]
    assert skipped == [(str(root / "locked"), "cannot be read (Permission denied)"),
                       (str(root / "outer"), "no micro_comm.csv, micro_compress.csv, micro.csv, e2e.csv, "
                                             "converge.csv in it or below it"),
                       (str(root / "outer" / "locked"), "cannot be read (Permission denied)")]


# ---------------------------------------------------------------------------------- staged_dir
# io.staged_dir's rules (its docstring), each written again: the output moves into OUT_DIR when
# the block ends, nothing of it when the block raises, an OSError names where its file was to go.


def listing(d):
    return sorted(os.listdir(d))


def test_staged_dir_moves_every_file_into_the_folder_and_leaves_no_stage(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.md").write_text("earlier\n")
    (out / "a.csv").write_text("earlier a\n")
    with IO.staged_dir(str(out), "report") as stage:
        # a hidden folder of its own inside OUT_DIR (a rename needs the same file system)
        assert os.path.dirname(stage) == str(out)
        assert os.path.basename(stage).startswith(".gradcomp-") and stage.endswith(".tmp")
        assert listing(stage) == []
        for name in ("a.csv", "b.csv", "z.md"):
            with open(os.path.join(stage, name), "w") as f:
                f.write(f"new {name}\n")
        assert (out / "a.csv").read_text() == "earlier a\n"  # nothing moves before the end
    assert listing(out) == ["a.csv", "b.csv", "old.md", "z.md"]
    assert (out / "a.csv").read_text() == "new a.csv\n" and (out / "z.md").read_text() == "new z.md\n"
    assert (out / "old.md").read_text() == "earlier\n"


def test_staged_dir_makes_the_folder_and_its_parents(tmp_path):
    out = tmp_path / "x" / "y" / "out"
    with IO.staged_dir(str(out), "report") as stage:
        with open(os.path.join(stage, "r.md"), "w") as f:
            f.write("r\n")
    assert listing(out) == ["r.md"]


def test_staged_dir_of_an_existing_folder_with_no_file_written(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with IO.staged_dir(str(out), "report"):
        pass
    assert out.is_dir() and listing(out) == []


def test_staged_dir_keeps_a_folder_it_made_when_the_block_ends_with_no_file(tmp_path):
    # the output (of no file) moved in: only a refusal removes the folder it made
    out = tmp_path / "new"
    with IO.staged_dir(str(out), "report"):
        pass
    assert out.is_dir() and listing(out) == []


def test_a_refusal_in_the_block_leaves_a_folder_it_made_removed(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(ReportError, match="^refused$"):
        with IO.staged_dir(str(out), "report") as stage:
            open(os.path.join(stage, "half.csv"), "w").close()
            raise ReportError("refused")
    assert not out.exists() and listing(tmp_path) == []


def test_a_refusal_leaves_an_earlier_folder_and_its_files_as_they_were(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("earlier\n")
    with pytest.raises(ReportError):
        with IO.staged_dir(str(out), "report") as stage:
            with open(os.path.join(stage, "report.md"), "w") as f:
                f.write("half")
            raise ReportError("refused")
    assert listing(out) == ["report.md"] and (out / "report.md").read_text() == "earlier\n"


def test_a_refusal_leaves_an_empty_folder_it_did_not_make(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ReportError):
        with IO.staged_dir(str(out), "report"):
            raise ReportError("refused")
    assert out.is_dir() and listing(out) == []


def test_a_folder_it_made_that_something_else_filled_meanwhile_is_kept(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(ReportError):
        with IO.staged_dir(str(out), "report"):
            (out / "theirs.txt").write_text("not ours\n")
            raise ReportError("refused")
    assert listing(out) == ["theirs.txt"]


def oserror_of(out, what, exc_of_stage):
    """The OSError staged_dir raises when its block raises exc_of_stage(stage)."""
    with pytest.raises(OSError) as e:
        with IO.staged_dir(str(out), what) as stage:
            raise exc_of_stage(stage)
    return e.value


def test_an_oserror_names_where_its_file_was_to_go_and_what_was_not_written(tmp_path):
    out = tmp_path / "out"
    e = oserror_of(out, "comparison", lambda s: OSError(28, "No space left on device", os.path.join(s, "sub", "a.csv")))
    assert (e.errno, e.strerror) == (28, "No space left on device (no file of this comparison was written)")
    assert e.filename == str(out / "sub" / "a.csv")
    assert str(e) == f"[Errno 28] No space left on device (no file of this comparison was written): '{out / 'sub' / 'a.csv'}'"
    assert not out.exists()


def test_an_oserror_outside_the_stage_keeps_its_path_and_one_without_a_path_names_the_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    e = oserror_of(out, "report", lambda s: PermissionError(13, "Permission denied", "/elsewhere/x.csv"))
    # OSError(errno, ...) is the subclass of its errno again (PermissionError)
    assert (type(e), e.errno, e.filename) == (PermissionError, 13, "/elsewhere/x.csv")
    assert e.strerror == "Permission denied (no file of this report was written)"
    e = oserror_of(out, "report", lambda s: OSError(28, "No space left on device"))
    assert (e.errno, e.filename) == (28, str(out))
    # an OSError without strerror is named by its text
    e = oserror_of(out, "peer comparison", lambda s: OSError("disk gone"))
    assert (e.errno, e.strerror, e.filename) == (None, "disk gone (no file of this peer comparison was written)", str(out))
    assert listing(out) == []


def test_an_oserror_while_moving_names_the_file_in_the_folder(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    replace = os.replace
    moved = []

    def fail_second(src, dst):
        if moved:
            raise OSError(5, "Input/output error", src, dst)
        moved.append(dst)
        return replace(src, dst)
    monkeypatch.setattr(os, "replace", fail_second)
    with pytest.raises(OSError) as e:
        with IO.staged_dir(str(out), "report") as stage:
            for name in ("b.csv", "a.csv"):
                open(os.path.join(stage, name), "w").close()
    # the files move in name order: a.csv first, b.csv fails; the stage is removed and OUT_DIR,
    # which existed, kept
    assert moved == [str(out / "a.csv")]
    assert (e.value.errno, e.value.filename) == (5, str(out / "b.csv"))
    assert listing(out) == ["a.csv"]
