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
