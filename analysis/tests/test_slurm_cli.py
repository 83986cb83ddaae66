"""slurm/*.sh and gradcomp.sbatch as a user types them (issue 53, item 4): `--help` prints
the usage and exits 0; a `--time` that is not one of Slurm's formats exits 2 with one line
before sbatch is called; a relative `--out` is relative to the caller's directory, and the
dry run prints it absolute. A stub `sbatch` on PATH records what it is asked (as in
test_slurm.py)."""
import os
import pathlib
import stat
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HELPERS = sorted(p.name for p in (ROOT / "slurm").glob("submit-*.sh"))
# The leading arguments a helper needs before its options.
LEAD = {"submit-paper.sh": ["omgs"], "submit-acpsgd-network.sh": ["eth"]}


def stub_sbatch(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "sbatch.log"
    sb = bindir / "sbatch"
    sb.write_text(f'#!/usr/bin/env bash\necho "$GRADCOMP_OUT $*" >> {log}\nexit 0\n')
    sb.chmod(sb.stat().st_mode | stat.S_IEXEC)
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}"), log


def run(script, args, env=None, cwd=ROOT):
    return subprocess.run(["bash", str(ROOT / "slurm" / script), *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=60)


def test_the_catalogue_covers_every_helper():
    assert len(HELPERS) == 11, HELPERS


@pytest.mark.parametrize("script", HELPERS + ["gradcomp.sbatch"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_exits_0(script, flag, tmp_path):
    env, log = stub_sbatch(tmp_path)
    p = run(script, [flag], env, cwd=tmp_path)
    assert p.returncode == 0, (script, p.stderr)
    assert p.stderr == "", (script, p.stderr)
    assert not log.exists()
    if script == "gradcomp.sbatch":
        assert "GRADCOMP_CONFIG" in p.stdout and "--job-name" not in p.stdout, p.stdout
    else:
        # The helper's own lines first, then submit-paper.sh's options (with --time's formats).
        assert p.stdout.splitlines()[0] and not p.stdout.startswith("#"), p.stdout[:200]
        assert "--time T" in p.stdout and "D-HH:MM:SS" in p.stdout and "--dry-run" in p.stdout, (script, p.stdout)
        if script != "submit-paper.sh":
            assert f"slurm/{script}" in p.stdout, (script, p.stdout[:300])
    assert not list(tmp_path.glob("results*"))


def test_help_after_a_label_or_other_options_is_still_help(tmp_path):
    env, log = stub_sbatch(tmp_path)
    for script, args in [("submit-acpsgd-network.sh", ["eth", "--np", "8", "--help"]),
                         ("submit-sketch-fusion.sh", ["--scaling", "--help"]),
                         ("submit-paper.sh", ["omgs", "--np", "8", "--help"])]:
        p = run(script, args, env, cwd=tmp_path)
        assert p.returncode == 0 and "--time T" in p.stdout, (script, p.stderr)
    assert not log.exists()


def test_gradcomp_sbatch_refuses_an_argument():
    p = run("gradcomp.sbatch", ["--bogus"])
    assert p.returncode == 2 and "unknown argument '--bogus'" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


GOOD_TIMES = ["90", "0", "30:00", "01:30:00", "2-0", "1-12", "1-12:30", "1-12:30:00"]
BAD_TIMES = ["banana", "1:2:3:4", "-5", "1h", "01:30:", "1-", "1-2-3", "1:30-2", " 10"]


@pytest.mark.parametrize("script", HELPERS)
def test_a_bad_time_is_refused_before_sbatch(script, tmp_path):
    env, log = stub_sbatch(tmp_path)
    out = tmp_path / "o"
    for t in BAD_TIMES[:3] if script != "submit-paper.sh" else BAD_TIMES:
        p = run(script, [*LEAD.get(script, []), "--np", "8", "--time", t, "--out", str(out)], env, cwd=tmp_path)
        assert p.returncode == 2, (script, t, p.stdout, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and f"--time '{t}' is not a Slurm time" in lines[0], (script, t, p.stderr)
        assert not log.exists() and not out.exists(), (script, t)


def test_every_slurm_time_format_is_accepted(tmp_path):
    env, log = stub_sbatch(tmp_path)
    for t in GOOD_TIMES:
        p = run("submit-paper.sh", ["omgs", "--np", "8", "--time", t, "--dry-run"], env, cwd=tmp_path)
        assert p.returncode == 0, (t, p.stderr)
        assert f" -t {t} " in p.stdout, (t, p.stdout)
    p = run("submit-paper.sh", ["omgs", "--time"], env, cwd=tmp_path)
    assert p.returncode == 2 and "--time needs a value" in p.stderr, p.stderr


@pytest.mark.parametrize("script", HELPERS)
def test_a_relative_out_is_the_callers_and_printed_absolute(script, tmp_path):
    env, log = stub_sbatch(tmp_path)
    caller = tmp_path / "caller"
    caller.mkdir()
    args = [*LEAD.get(script, []), "--np", "8", "--out", "myresults"]
    p = run(script, [*args, "--dry-run"], env, cwd=caller)
    assert p.returncode == 0, (script, p.stderr)
    outs = [w.split("=", 1)[1] for line in p.stdout.splitlines() for w in line.split()
            if w.startswith("GRADCOMP_OUT=")]
    assert outs and all(o.startswith(str(caller / "myresults") + "/") for o in outs), (script, p.stdout)
    assert f"results would go to {caller / 'myresults'}" in p.stdout, p.stdout
    assert not (caller / "myresults").exists() and not (ROOT / "myresults").exists()
    # Submitted for real (stub sbatch): the folder is made in the caller's directory.
    p = run(script, args, env, cwd=caller)
    assert p.returncode == 0, (script, p.stderr)
    calls = log.read_text().splitlines()
    assert calls and all(c.startswith(str(caller / "myresults") + "/") for c in calls), (script, calls)
    assert (caller / "myresults").is_dir() and not (ROOT / "myresults").exists()


def test_the_default_out_stays_in_the_repository_and_is_absolute(tmp_path):
    for script in ("submit-omgs.sh", "submit-acpsgd-network.sh"):
        p = run(script, ["--dry-run"], cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        outs = [w.split("=", 1)[1] for w in p.stdout.split() if w.startswith("GRADCOMP_OUT=")]
        assert outs and all(o.startswith(str(ROOT / "results") + "/") for o in outs), p.stdout
