//! Reliability under real MPI: a killed rank ends the job quickly with finished rows
//! intact; a killed sweep resumed with --resume ends with exactly the rows of an
//! uninterrupted one; --case-timeout ends a stuck case; --check catches a corrupted
//! result (hidden --inject-fault hook); memory the node does not have is refused.

mod common;
use common::faults::{freeze_at_rows, signal, thaw};
use common::*;
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Start `gradcomp ARGS` under mpirun in the background.
fn spawn(np: usize, args: &[&str]) -> Child {
    let launcher = mpirun_cmd();
    let mut cmd = Command::new(&launcher);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("SLURM_NTASKS");
    cmd.args([
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        &np.to_string(),
        BIN,
    ])
    .args(args);
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun")
}

/// Kill the last of the frozen ranks `pids` ([`freeze_at_rows`]) with SIGKILL and
/// continue the others; return (seconds until mpirun exited, exit status, stderr).
fn kill_one_rank(child: Child, pids: &[u32]) -> (f64, std::process::ExitStatus, String) {
    let t0 = Instant::now();
    signal("KILL", pids[pids.len() - 1]);
    thaw(&pids[..pids.len() - 1]);
    let out = child.wait_with_output().unwrap();
    (
        t0.elapsed().as_secs_f64(),
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn case_ids(path: &std::path::Path) -> Vec<String> {
    let (h, rows) = read_csv(path);
    let c = h.iter().position(|x| x == "case_id").unwrap();
    rows.iter().map(|r| r[c].clone()).collect()
}

const SWEEP: &[&str] = &[
    "micro-comm",
    "--collectives",
    "allreduce,ring-allreduce",
    "--min-bytes",
    "4",
    "--max-bytes",
    "4MiB",
    "--iters",
    "300",
    "--warmup",
    "5",
    "--quiet",
];

#[test]
fn killed_rank_ends_the_job_within_10s_and_rows_stay_intact() {
    let dir = tmpdir("kill");
    let d = dir.to_str().unwrap();
    let mut args = SWEEP.to_vec();
    args.extend(["--out", d]);
    let mut child = spawn(3, &args);
    let csv = dir.join("micro_comm.csv");
    let (pids, _) = freeze_at_rows(&csv, 3, &mut child, d, 3);
    let (secs, status, err) = kill_one_rank(child, &pids);
    assert!(
        secs < 10.0,
        "the job took {secs:.1}s to end after a rank was killed"
    );
    assert!(!status.success());
    assert!(err.contains("rank"), "no message naming the rank:\n{err}");
    // Every row written is complete and parses.
    let (h, rows) = read_csv(&csv);
    assert!(rows.len() >= 3);
    assert!(rows.iter().all(|r| r.len() == h.len()));
}

#[test]
fn resumed_sweep_has_exactly_the_rows_of_an_uninterrupted_one() {
    let full = tmpdir("full");
    let mut args = SWEEP.to_vec();
    let f = full.to_str().unwrap().to_string();
    args.extend(["--out", &f]);
    assert_ok(&mpirun(2, &args));
    let want: BTreeSet<String> = case_ids(&full.join("micro_comm.csv")).into_iter().collect();

    let dir = tmpdir("resume");
    let d = dir.to_str().unwrap().to_string();
    let mut args = SWEEP.to_vec();
    args.extend(["--out", &d]);
    let mut child = spawn(2, &args);
    let csv = dir.join("micro_comm.csv");
    let (pids, frozen_rows) = freeze_at_rows(&csv, 5, &mut child, &d, 2);
    assert!(
        frozen_rows < want.len(),
        "the sweep finished before it was killed"
    );
    let (_, status, _) = kill_one_rank(child, &pids);
    assert!(!status.success());
    let before = rows_in(&csv);
    args.push("--resume");
    let out = mpirun(2, &args);
    assert_ok(&out);
    let got = case_ids(&csv);
    assert_eq!(
        got.len(),
        want.len(),
        "duplicate or missing rows after --resume"
    );
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["cases_skipped"], before);
    assert!(meta["resumed_from"].is_string());
    // The killed run's metadata is kept.
    assert!(std::fs::read_dir(&dir).unwrap().any(|e| {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        n.starts_with("run.") && n != "run.json"
    }));
}

#[test]
fn case_timeout_ends_a_long_case_with_a_message() {
    let dir = tmpdir("timeout");
    let t0 = Instant::now();
    let out = mpirun(
        2,
        &[
            "e2e",
            "--model",
            "resnet50",
            "--methods",
            "ssgd",
            "--device",
            "rtx2080ti",
            "--batch",
            "256",
            "--pipelining",
            "on",
            "--iters",
            "200",
            "--case-timeout",
            "1",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    let secs = t0.elapsed().as_secs_f64();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--case-timeout 1s"),
        "{}",
        stderr(&out)
    );
    assert!(secs < 30.0, "took {secs:.1}s");
}

#[test]
fn check_catches_an_injected_fault() {
    for (np, args) in [
        (
            2,
            vec![
                "micro-comm",
                "--collectives",
                "allreduce",
                "--max-bytes",
                "64",
                "--check",
                "--inject-fault",
                "1",
            ],
        ),
        (
            3,
            vec![
                "micro-comm",
                "--collectives",
                "ring-allreduce",
                "--sizes",
                "28",
                "--check",
                "--inject-fault",
                "2",
            ],
        ),
        (
            2,
            vec![
                "micro-comm",
                "--collectives",
                "allgather",
                "--sizes",
                "40",
                "--check",
                "--inject-fault",
                "0",
            ],
        ),
    ] {
        let dir = tmpdir("fault");
        let mut a = args.clone();
        a.extend(["--quiet", "--out", dir.to_str().unwrap()]);
        let out = mpirun(np, &a);
        assert_eq!(out.status.code(), Some(1), "{a:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("check failed"), "{}", stderr(&out));
        let (h, rows) = read_csv(&dir.join("micro_comm.csv"));
        let c = h.iter().position(|x| x == "check").unwrap();
        assert_eq!(rows[rows.len() - 1][c], "fail");
    }
    for m in [
        "ssgd",
        "signsgd",
        "signsgd-mv",
        "topk",
        "dgc",
        "powersgd",
        "acpsgd",
        "marsit",
        "sketch",
        "qsgd",
    ] {
        let dir = tmpdir("fault-micro");
        let out = mpirun(
            2,
            &[
                "micro",
                "--methods",
                m,
                "--shape",
                "64x48",
                "--check",
                "--inject-fault",
                "1",
                "--iters",
                "1",
                "--warmup",
                "0",
                "--quiet",
                "--out",
                dir.to_str().unwrap(),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "{m}: the corrupted result passed --check: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("check failed"),
            "{m}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn memory_the_node_lacks_is_refused_up_front() {
    let dir = tmpdir("mem");
    let out = mpirun(
        3,
        &[
            "e2e",
            "--model",
            "bert-large",
            "--methods",
            "ssgd",
            "--collective",
            "allgather",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("GiB per rank"), "{}", stderr(&out));
    assert!(!dir.join("e2e.csv").exists());
}
