"""slurm/submit-*.sh in --dry-run mode: world sizes below the papers' 8 are allowed with a
note, --scaling is read wherever it stands, bad sizes are refused (exit 2)."""
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def submit(script, *args):
    return subprocess.run(["bash", str(ROOT / "slurm" / script), *args, "--dry-run"],
                          capture_output=True, text=True, cwd=ROOT)


def jobs(p):
    return [line.split("GRADCOMP_OUT=")[1].split()[0].rsplit("/", 1)[1]
            for line in p.stdout.splitlines() if line.startswith("GRADCOMP_CONFIG=")]


def test_small_world_sizes_are_allowed_with_a_note():
    p = submit("submit-omgs.sh", "--np", "2,4")
    assert p.returncode == 0, p.stderr
    assert jobs(p) == ["np2", "np4"]
    assert "below the papers' 8 to 64 ranks" in p.stderr


def test_scaling_anywhere_before_sbatch_options():
    for args in (["--scaling"], ["--time", "00:30:00", "--scaling"]):
        p = submit("submit-sketch-fusion.sh", *args)
        assert p.returncode == 0, p.stderr
        assert jobs(p) == ["np8", "np16", "np32", "np64"], (args, p.stdout)


def test_bad_world_size_is_refused():
    for n in ("0", "x", "2000"):
        p = submit("submit-omgs.sh", "--np", n)
        assert p.returncode == 2, (n, p.stdout, p.stderr)
        assert "--np" in p.stderr


# ---------------------------------------------------------------- issue 31, item 1

import os
import stat

HELPERS = sorted(p.name for p in (ROOT / "slurm").glob("submit-*.sh"))


def stub_sbatch(tmp_path, rc=0):
    """A stub `sbatch` on PATH that appends its arguments (and GRADCOMP_OUT) to a log."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "sbatch.log"
    sb = bindir / "sbatch"
    sb.write_text(f'#!/usr/bin/env bash\necho "$GRADCOMP_OUT $*" >> {log}\nexit {rc}\n')
    sb.chmod(sb.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    return env, log


def run_helper(script, args, env, cwd):
    return subprocess.run(["bash", str(ROOT / "slurm" / script), *args], capture_output=True, text=True,
                          cwd=cwd, env=env)


def test_network_helper_dry_run_submits_nothing_and_writes_nothing(tmp_path):
    """`--dry-run` first is an option, not the network label: no sbatch call, no folder."""
    env, log = stub_sbatch(tmp_path)
    out = tmp_path / "sweep"
    p = run_helper("submit-acpsgd-network.sh", ["--dry-run", "--out", str(out)], env, ROOT)
    assert p.returncode == 0, p.stderr
    assert not log.exists(), log.read_text()
    assert not out.exists()
    assert "ib-np32" in p.stdout and "tcp-np32" in p.stdout and "--dry-run" not in p.stdout.split("GRADCOMP_OUT=")[1]


def test_every_helper_submits_through_sbatch_with_its_world_sizes(tmp_path):
    env, log = stub_sbatch(tmp_path)
    for script in HELPERS:
        if script == "submit-paper.sh":
            args = ["omgs", "--np", "8"]
        elif script == "submit-acpsgd-network.sh":
            args = ["eth-10g", "--np", "8"]
        else:
            args = ["--np", "8"]
        out = tmp_path / script
        p = run_helper(script, [*args, "--out", str(out), "--", "-p", "gpu"], env, ROOT)
        assert p.returncode == 0, (script, p.stderr)
        calls = [c for c in log.read_text().splitlines() if c.startswith(str(out))]
        assert len(calls) == 1, (script, calls)
        assert "-n 8 " in calls[0] and calls[0].rstrip().endswith("-p gpu slurm/gradcomp.sbatch"), calls[0]
        assert (pathlib.Path(calls[0].split()[0])).is_dir()


def test_bad_arguments_are_refused_before_anything_happens(tmp_path):
    env, log = stub_sbatch(tmp_path)
    for script, args in [("submit-acpsgd-network.sh", ["--tcp"]), ("submit-acpsgd-network.sh", ["bad/label"]),
                         ("submit-omgs.sh", ["--bogus"]), ("submit-paper.sh", ["omgs", "--np"]),
                         ("submit-paper.sh", ["no-such-experiment"])]:
        out = tmp_path / "o"
        p = run_helper(script, [*args, "--out", str(out)], env, ROOT)
        assert p.returncode == 2, (script, args, p.stdout, p.stderr)
        assert not log.exists() and not out.exists(), (script, args)


def test_missing_or_failing_sbatch_leaves_no_folders(tmp_path):
    out = tmp_path / "o"
    # A PATH with the helpers' tools but no sbatch (the machine may have a real one).
    tools = tmp_path / "tools"
    tools.mkdir()
    import shutil
    for t in ("bash", "dirname", "date", "ls", "sed", "tr", "mkdir", "rm", "rmdir", "cat"):
        (tools / t).symlink_to(shutil.which(t))
    env = dict(os.environ, PATH=str(tools))
    p = run_helper("submit-omgs.sh", ["--out", str(out)], env, ROOT)
    assert p.returncode == 2 and "sbatch not found" in p.stderr, p.stderr
    assert not out.exists()
    env, log = stub_sbatch(tmp_path, rc=1)
    p = run_helper("submit-acpsgd-network.sh", ["eth", "--np", "8", "--out", str(out)], env, ROOT)
    assert p.returncode == 2 and "refused" in p.stderr, p.stderr
    assert log.exists()  # it was called
    assert not (out / "eth-np8").exists()
