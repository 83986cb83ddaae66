"""Every analysis command that writes files leaves them whole or not at all (issue 52 item 4):
compare, peer-compare, gpu-profile and sim-agreement --out, with the disk filling (an injected
ENOSPC) after part of their output was written. Before io.staged_dir each left its first files
(or a partial CSV) beside an earlier output's."""

import errno
import os

import pandas as pd

import profile_compress as pc
from gradcomp_analysis import compare as C
from gradcomp_analysis.__main__ import main

from test_compare import e2e, write
from test_devmodel import write_run
from test_peer import write_fixture
from test_simagree import ROWS, out_dir, svm


def enospc(path="x"):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def fail_on_call(n, real, partial=False):
    """`real` that raises ENOSPC on its n-th call (1-based); with `partial`, after writing the
    first half of what a DataFrame.to_csv call would write (a torn file)."""
    calls = []

    def f(self_or_path, *args, **kw):
        calls.append(1)
        if len(calls) == n:
            if partial:
                text = self_or_path.to_csv(index=False)
                with open(args[0], "w") as fh:
                    fh.write(text[: len(text) // 2])
            raise enospc(str(args[0]) if args else "x")
        return real(self_or_path, *args, **kw)
    return f


def one_line_error(capsys, rc):
    err = capsys.readouterr().err
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradcomp_analysis: error: "), err
    assert "No space left on device" in lines[0] and "Traceback" not in err, err
    return lines[0]


def earlier(out, name):
    """OUT holding an earlier output's file NAME."""
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text("an earlier output\n")


def unchanged(out, name):
    assert sorted(os.listdir(out)) == [name], os.listdir(out)
    assert (out / name).read_text() == "an earlier output\n"


def test_compare_on_a_full_disk(tmp_path, monkeypatch, capsys):
    a = write(tmp_path, "a", e2e({"ssgd": 0.0020, "topk": 0.0030}))
    b = write(tmp_path, "b", e2e({"ssgd": 0.0020, "topk": 0.0030}))
    out = tmp_path / "cmp"
    earlier(out, "compare.md")
    # compare.md is written last, after both CSVs.
    monkeypatch.setattr(C, "summary", lambda *a, **k: (_ for _ in ()).throw(enospc()))
    line = one_line_error(capsys, main(["compare", a, b, "--out", str(out)]))
    assert "no file of this comparison was written" in line
    unchanged(out, "compare.md")


def test_peer_compare_on_a_full_disk(tmp_path, monkeypatch, capsys):
    root = tmp_path / "peer"
    root.mkdir()
    write_fixture(str(root))
    out = tmp_path / "peer-out"
    earlier(out, "peer_compare.md")
    monkeypatch.setattr(pd.DataFrame, "to_csv", fail_on_call(2, pd.DataFrame.to_csv))
    one_line_error(capsys, main(["peer-compare", str(root), "--out", str(out)]))
    unchanged(out, "peer_compare.md")


def test_gpu_profile_on_a_full_disk(tmp_path, monkeypatch, capsys):
    runs = [str(tmp_path / f"rep{i}") for i in range(2)]
    for r, scale in zip(runs, [1.0, 2.0]):
        write_run(r, scale)
    out = tmp_path / "merged"
    earlier(out, "profile-r4.csv")
    real = pc.write_profile
    calls = []

    def second_fails(path, *a, **k):
        calls.append(path)
        if len(calls) == 2:
            raise enospc(path)
        return real(path, *a, **k)
    monkeypatch.setattr(pc, "write_profile", second_fails)
    one_line_error(capsys, main(["gpu-profile", *runs, "--out", str(out), "--revision", "abc"]))
    unchanged(out, "profile-r4.csv")


def test_sim_agreement_out_on_a_full_disk(tmp_path, monkeypatch, capsys):
    a = out_dir(tmp_path, "a", {"np2": svm(ROWS)})
    folder = tmp_path / "agree"
    earlier(folder, "agreement.csv")
    monkeypatch.setattr(pd.DataFrame, "to_csv", fail_on_call(1, pd.DataFrame.to_csv, partial=True))
    one_line_error(capsys, main(["sim-agreement", a, a, "--out", str(folder / "agreement.csv")]))
    unchanged(folder, "agreement.csv")


def test_the_outputs_are_written_when_the_disk_has_room(tmp_path):
    """The same commands without a fault write their files under their own names, no staging
    folder left behind."""
    a = write(tmp_path, "a", e2e({"ssgd": 0.0020, "topk": 0.0030}))
    out = tmp_path / "cmp"
    assert main(["compare", a, a, "--out", str(out)]) == 0
    assert sorted(os.listdir(out)) == ["compare.md", "compare_pairs.csv", "compare_times.csv"]
    s = out_dir(tmp_path, "s", {"np2": svm(ROWS)})
    assert main(["sim-agreement", s, s, "--out", str(tmp_path / "agree.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "agree.csv")) == len(ROWS)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".gradcomp-")]
