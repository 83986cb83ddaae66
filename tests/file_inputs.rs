//! Every file input of every subcommand refuses what is not a regular file, at once:
//! a FIFO (a plain `open` blocks until a writer comes, and under mpirun the ranks then
//! outlive the launcher) and /dev/zero (a read never ends). The catalogue of inputs is
//! tests/data/bad-file-inputs.tsv; a new file flag is a new line there.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// Seconds a refused run may take: mpirun's start and two ranks' exits.
const LIMIT_S: u64 = 60;

struct Entry {
    np: usize,
    what: String,
    args: String,
}

fn catalogue() -> Vec<Entry> {
    let text = std::fs::read_to_string(root().join("tests/data/bad-file-inputs.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(
                f.len(),
                3,
                "bad-file-inputs.tsv: 3 tab-separated fields: {l}"
            );
            Entry {
                np: f[0].parse().unwrap(),
                what: f[1].to_string(),
                args: f[2].to_string(),
            }
        })
        .collect()
}

/// `gradcomp ARGS` on `np` ranks, killed after [`LIMIT_S`] (exit 124 then).
fn run_limited(np: usize, args: &[String]) -> std::process::Output {
    let _one = one_mpi_job();
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", &LIMIT_S.to_string(), &mpirun_cmd()]);
    cmd.env_remove("SLURM_NTASKS");
    if is_open_mpi(&mpirun_cmd()) {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_orte_tmpdir_base", ompi_tmpdir());
        cmd.args(["--oversubscribe", "--bind-to", "none"]);
    }
    cmd.arg("-np").arg(np.to_string()).arg(BIN).args(args);
    cmd.output().expect("cannot launch mpirun")
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

fn check(kind: &str, bad: &Path, dir: &Path) {
    let folder = dir.join("in");
    std::fs::create_dir_all(&folder).unwrap();
    for name in ["micro_comm.csv", "micro_compress.csv"] {
        let p = folder.join(name);
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink(bad, &p).unwrap();
    }
    let cfg = dir.join("bench.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[e2e]]\nmodels = [\"resnet20\"]\nmethods = [\"ssgd\"]\npipelining = [false]\niters = 1\nwarmup = 0\ncompute_profile = \"{}\"\n",
            bad.display()
        ),
    )
    .unwrap();
    for (i, e) in catalogue().iter().enumerate() {
        let out_dir = dir.join(format!("out-{i}"));
        let args: Vec<String> = e
            .args
            .split(' ')
            .map(|a| {
                a.replace("{BAD}", bad.to_str().unwrap())
                    .replace("{DIR}", folder.to_str().unwrap())
                    .replace("{CFG}", cfg.to_str().unwrap())
                    .replace("{OUT}", out_dir.to_str().unwrap())
            })
            .collect();
        let t0 = std::time::Instant::now();
        let out = run_limited(e.np, &args);
        let err = stderr(&out);
        assert_ne!(
            out.status.code(),
            Some(124),
            "{} with {kind}: still running after {LIMIT_S} s (blocked on the file?)\n{err}",
            e.what
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{} with {kind}: {args:?}\n{err}",
            e.what
        );
        let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("gradcomp:")).collect();
        assert_eq!(
            ours.len(),
            1,
            "{} with {kind}: one message expected:\n{err}",
            e.what
        );
        assert!(
            ours[0].contains("not a regular file"),
            "{} with {kind}: {}",
            e.what,
            ours[0]
        );
        let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            ours[0].contains(&name(bad)) || ours[0].contains("micro_comm.csv"),
            "{} with {kind}: the file is not named: {}",
            e.what,
            ours[0]
        );
        eprintln!(
            "{} with {kind}: refused in {:.1} s",
            e.what,
            t0.elapsed().as_secs_f64()
        );
    }
}

#[test]
fn a_fifo_is_refused_by_every_file_input() {
    let dir = tmpdir("fifo-inputs");
    let fifo = dir.join("input.fifo");
    mkfifo(&fifo);
    check("a FIFO", &fifo, &dir);
}

#[test]
fn dev_zero_is_refused_by_every_file_input() {
    let dir = tmpdir("zero-inputs");
    check("/dev/zero", Path::new("/dev/zero"), &dir);
}
