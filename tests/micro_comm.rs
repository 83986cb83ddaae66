//! micro-comm under real MPI (-np 2 and -np 3): correctness of every collective and of
//! our ring, the CSV schema, run.json, and the bad-input catalogue of the foundation.

mod common;
use common::*;

#[test]
fn ring_equals_mpi_allreduce_for_awkward_sizes() {
    // 1 element, fewer elements than ranks, primes (7, 13, 31), not divisible by 2 or 3.
    for np in [2, 3] {
        if skip_np(np) {
            continue;
        }
        let dir = tmpdir(&format!("ring{np}"));
        let out = mpirun(
            np,
            &[
                "micro-comm",
                "--collectives",
                "ring-allreduce,allreduce",
                "--sizes",
                "4,8,28,52,124,40,4100",
                "--iters",
                "3",
                "--warmup",
                "1",
                "--check",
                "--quiet",
                "--out",
                dir.to_str().unwrap(),
            ],
        );
        assert_ok(&out);
        let (h, rows) = read_csv(&dir.join("micro_comm.csv"));
        let check = h.iter().position(|c| c == "check").unwrap();
        assert_eq!(rows.len(), 14);
        assert!(rows.iter().all(|r| r[check] == "pass"), "{rows:?}");
    }
}

#[test]
fn check_passes_for_every_collective_and_csv_matches_schema() {
    for np in [2, 3] {
        if skip_np(np) {
            continue;
        }
        let dir = tmpdir(&format!("all{np}"));
        let out = mpirun(
            np,
            &[
                "micro-comm",
                "--collectives",
                "allreduce,allgather,ring-allreduce,iallreduce-overlap",
                "--min-bytes",
                "4",
                "--max-bytes",
                "64KiB",
                "--iters",
                "5",
                "--warmup",
                "1",
                "--check",
                "--out",
                dir.to_str().unwrap(),
            ],
        );
        assert_ok(&out);
        let (header, rows) = read_csv(&dir.join("micro_comm.csv"));
        assert_eq!(header, documented_columns("micro_comm.csv"));
        assert_eq!(rows.len(), 4 * 15);
        let col = |name: &str| header.iter().position(|c| c == name).unwrap();
        for r in &rows {
            assert_eq!(r[col("schema_version")], "1");
            assert_eq!(r[col("world_size")], np.to_string());
            assert_eq!(r[col("check")], "pass");
            let median: f64 = r[col("median_s")].parse().unwrap();
            let min: f64 = r[col("min_s")].parse().unwrap();
            let max: f64 = r[col("max_s")].parse().unwrap();
            assert!(min > 0.0 && min <= median && median <= max, "{r:?}");
            let overlap = r[col("collective")] == "iallreduce-overlap";
            assert_eq!(r[col("overlap_osu_pct")].is_empty(), !overlap);
            assert_eq!(r[col("t_pure_s")].is_empty(), !overlap);
        }
        // The table on stdout has one line per case.
        assert!(stdout(&out).contains("# ring-allreduce"));
        // Progress goes to stderr.
        assert!(stderr(&out).contains("case 60/60"));
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(meta["world_size"], np);
        assert_eq!(meta["hosts"].as_array().unwrap().len(), np);
        assert_eq!(meta["status"], "ok");
        assert_eq!(meta["cases_done"], 60);
        assert!(meta["mpi_library"].as_str().unwrap().len() > 3);
        assert!(!meta["mpi_library"].as_str().unwrap().contains('\0'));
        assert!(meta["end_time"].is_string());
        assert!(meta["config"]["micro_comm"][0]["sizes"].is_array());
    }
}

#[test]
fn run_config_runs_every_section() {
    if skip_np(3) {
        return;
    }
    let dir = tmpdir("cfg");
    let cfg = root().join("bench-configs/ci.toml");
    let out = mpirun(
        3,
        &[
            "run",
            cfg.to_str().unwrap(),
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    let (_, rows) = read_csv(&dir.join("micro_comm.csv"));
    assert!(!rows.is_empty());
    assert!(
        !stderr(&out).contains("[gradcomp] case"),
        "--quiet must silence progress"
    );
}

#[test]
fn slurm_ntasks_mismatch_is_refused() {
    let out = std::process::Command::new(BIN)
        .args([
            "micro-comm",
            "--max-bytes",
            "8",
            "--out",
            tmpdir("slurm").to_str().unwrap(),
        ])
        .env("SLURM_NTASKS", "4")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("SLURM_NTASKS=4"), "{}", stderr(&out));
}

#[test]
fn existing_results_are_never_overwritten() {
    let dir = tmpdir("keep");
    let d = dir.to_str().unwrap();
    assert_ok(&mpirun(
        2,
        &[
            "micro-comm",
            "--max-bytes",
            "8",
            "--iters",
            "2",
            "--quiet",
            "--out",
            d,
        ],
    ));
    let before = std::fs::read(dir.join("micro_comm.csv")).unwrap();
    let out = mpirun(
        2,
        &[
            "micro-comm",
            "--max-bytes",
            "8",
            "--iters",
            "2",
            "--quiet",
            "--out",
            d,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("already exists"));
    assert_eq!(std::fs::read(dir.join("micro_comm.csv")).unwrap(), before);
}

#[test]
fn help_shows_examples() {
    for args in [
        vec!["--help"],
        vec!["micro-comm", "--help"],
        vec!["run", "--help"],
    ] {
        let out = std::process::Command::new(BIN)
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(stdout(&out).contains("Example"), "{args:?}");
    }
}

/// Started without mpirun, a benchmark that communicates runs on one rank; it says so on
/// stderr (it measured "comm" 23 us and busbw 0 without a word), and one that does not
/// communicate (micro-compress) stays quiet.
#[test]
fn one_rank_run_of_a_communicating_benchmark_warns() {
    let run = |args: &[&str]| {
        let dir = tmpdir("one-rank");
        let out = std::process::Command::new(BIN)
            .args(args)
            .args(["--quiet", "--out", dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert_ok(&out);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let warned = run(&[
        "micro-comm",
        "--collectives",
        "allreduce",
        "--sizes",
        "4",
        "--iters",
        "1",
    ]);
    assert!(warned.contains("running on 1 MPI rank"), "{warned}");
    let quiet = run(&[
        "micro-compress",
        "--methods",
        "topk",
        "--shape",
        "64",
        "--iters",
        "1",
    ]);
    assert!(!quiet.contains("running on 1 MPI rank"), "{quiet}");
}
