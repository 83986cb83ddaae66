//! Every file input of every subcommand refuses what is not a regular file, at once:
//! a FIFO (a plain `open` blocks until a writer comes, and under mpirun the ranks then
//! outlive the launcher) and /dev/zero (a read never ends). The inputs are the `file-*`
//! rows of tests/data/bad-inputs.tsv, the one catalogue of bad inputs; a new file flag is
//! a new row there.

mod common;
use common::catalogue::*;
use common::*;
use std::path::Path;
use std::process::Command;

/// The catalogue's file family.
fn catalogue() -> Vec<Row> {
    let rows: Vec<Row> = gradcomp_rows()
        .into_iter()
        .filter(|r| r.id.starts_with("file-"))
        .collect();
    assert!(rows.len() >= 13, "{} file rows", rows.len());
    rows
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
            .iter()
            .map(|a| {
                a.replace("{BAD}", bad.to_str().unwrap())
                    .replace("{DIR}", folder.to_str().unwrap())
                    .replace("{CFG}", cfg.to_str().unwrap())
                    .replace("{OUT}", out_dir.to_str().unwrap())
            })
            .collect();
        let t0 = std::time::Instant::now();
        // From the project root, as before: choose reads its default --converge from there.
        let out = run_limited(e.ranks.unwrap(), &args, root());
        let what = format!("{} with {kind} ({args:?})", e.id);
        let line = check_refusal(&what, &out, e.exit, &e.expect);
        let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            line.contains(&name(bad)) || line.contains("micro_comm.csv"),
            "{what}: the file is not named: {line}"
        );
        eprintln!("{what}: refused in {:.1} s", t0.elapsed().as_secs_f64());
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
