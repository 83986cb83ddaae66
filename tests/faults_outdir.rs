//! Faults of the output directory (issue 19 items 1 and 2, issue 30 item 6): two jobs
//! writing into one `--out`, a locked directory, a later run into an existing directory
//! (every run's run.json kept), runs started together, `--resume` under another world
//! size. Every test runs the release binary under mpirun.
//!
//! `GRADCOMP_TEST_BIN=/path/to/gradcomp` runs these tests against another build (to see
//! them fail on an older revision). The helpers these files share are in
//! tests/common/faults.rs.

mod common;
use common::faults::{
    alone, bin, case_ids, err_text, freeze_at_rows, our_lines, refused, run, signal, spawn, strs,
    sweep, timed, wait_bounded,
};
use common::{run_json, tmpdir};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

// ---- item 1: one run per output directory -------------------------------------------

#[test]
fn two_runs_into_one_out_never_mix_their_rows() {
    let _serial = timed();
    // The repro: two jobs started together into one directory with --resume.
    let dir = tmpdir("lock-race");
    let args = sweep(dir.to_str().unwrap());
    let mut a = strs(&args);
    a.push("--resume");
    let c1 = spawn(2, &a);
    let c2 = spawn(3, &a);
    let o1 = wait_bounded(c1, 300, "first run");
    let o2 = wait_bounded(c2, 300, "second run");
    let codes = [o1.status.code(), o2.status.code()];
    assert!(
        codes.contains(&Some(0)),
        "neither run succeeded: {codes:?}\n{}\n{}",
        err_text(&o1),
        err_text(&o2)
    );
    let ids = case_ids(&dir.join("micro_comm.csv"));
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "duplicated case ids: {codes:?}");
    for o in [&o1, &o2] {
        if o.status.code() != Some(0) {
            assert_eq!(o.status.code(), Some(2), "{}", err_text(o));
            let lines = our_lines(o);
            assert_eq!(lines.len(), 1, "{lines:?}");
            for w in ["another gradcomp run", "host", "pid", "started"] {
                assert!(lines[0].contains(w), "'{w}' missing: {}", lines[0]);
            }
        }
    }
}

#[test]
fn a_locked_out_is_refused_and_a_killed_holder_leaves_no_stale_lock() {
    let _serial = timed();
    let dir = tmpdir("lock");
    let d = dir.to_str().unwrap().to_string();
    let args = sweep(&d);
    let mut first = spawn(3, &strs(&args));
    let csv = dir.join("micro_comm.csv");
    // Frozen, the first run holds the lock however fast it would finish its sweep.
    let (pids, _) = freeze_at_rows(&csv, 2, &mut first, &d, 3);
    let holder = pids[0];
    // A different benchmark into the same directory, without --resume: refused too.
    let second = run(
        2,
        &[
            "micro",
            "--methods",
            "topk",
            "--shape",
            "100",
            "--quiet",
            "--out",
            &d,
        ],
        60,
    );
    assert_eq!(second.status.code(), Some(2), "{}", err_text(&second));
    let line = our_lines(&second).join("\n");
    assert!(
        line.contains(&format!("pid {holder}")),
        "the holder's pid {holder} is not named: {line}"
    );
    assert!(
        !dir.join("micro.csv").exists(),
        "the refused run wrote rows"
    );
    // kill -9 every rank: the kernel drops the lock, --resume continues.
    for &p in &pids {
        signal("KILL", p);
    }
    let _ = wait_bounded(first, 60, "killed run");
    let mut a = strs(&args);
    a.push("--resume");
    // At the killed run's world size (another one is refused: issue 30).
    let again = run(3, &a, 300);
    assert!(again.status.success(), "{}", err_text(&again));
    let ids = case_ids(&csv);
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), ids.len());
}

// ---- item 2: run.json is never overwritten -------------------------------------------

#[test]
fn every_runs_metadata_is_kept() {
    let dir = tmpdir("meta");
    let d = dir.to_str().unwrap();
    let a = run(
        2,
        &[
            "micro-comm",
            "--collectives",
            "allreduce",
            "--max-bytes",
            "64",
            "--quiet",
            "--out",
            d,
        ],
        120,
    );
    assert!(a.status.success(), "{}", err_text(&a));
    let b = run(
        2,
        &[
            "micro",
            "--methods",
            "topk",
            "--shape",
            "100",
            "--quiet",
            "--out",
            d,
        ],
        120,
    );
    assert!(b.status.success(), "{}", err_text(&b));
    let latest = run_json(&dir);
    assert!(latest["command_line"].to_string().contains("\"micro\""));
    let kept = latest["previous_run"].as_str().expect("previous_run");
    let old: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(kept)).unwrap()).unwrap();
    assert!(
        old["command_line"].to_string().contains("micro-comm"),
        "{old}"
    );
    assert_eq!(old["status"], "ok");
}

// ---- issue 30, item 6: the smaller ones --------------------------------------------------

/// `--resume` under another world size used to append rows of a second world size to
/// the same CSV (case ids include the world size, so nothing was skipped): refused, for
/// the benchmarks and converge, naming the world size that fits.
#[test]
fn resume_under_another_world_size_is_refused() {
    let dir = tmpdir("resume-world");
    let d = dir.join("mc");
    let o = d.to_str().unwrap();
    let first = alone(&["micro-comm", "--sizes", "4,8", "--iters", "2", "--out", o]);
    assert_eq!(first.status.code(), Some(0), "{}", err_text(&first));
    refused(
        2,
        &[
            "micro-comm",
            "--sizes",
            "4,8",
            "--iters",
            "2",
            "--out",
            o,
            "--resume",
        ],
        &[
            "--resume",
            "micro_comm.csv",
            "world size 1",
            "2 rank(s)",
            "mpirun -np 1",
        ],
    );
    assert_eq!(common::rows_in(&d.join("micro_comm.csv")), 2);
    let c = dir.join("cv");
    let co = c.to_str().unwrap();
    let conv = [
        "converge",
        "--methods",
        "ssgd",
        "--steps",
        "3",
        "--hidden",
        "8",
        "--train-samples",
        "64",
        "--eval-samples",
        "8",
        "--batch",
        "4",
        "--out",
        co,
    ];
    let first = alone(&conv);
    assert_eq!(first.status.code(), Some(0), "{}", err_text(&first));
    let mut again = conv.to_vec();
    again.push("--resume");
    refused(2, &again, &["converge.csv", "world size 1", "mpirun -np 1"]);
    // The same world size resumes: nothing left to do.
    let same = alone(&again);
    assert_eq!(same.status.code(), Some(0), "{}", err_text(&same));
    assert!(
        err_text(&same).contains("skipping 1 already done"),
        "{}",
        err_text(&same)
    );
}

/// Runs started in the same second used to share one run_id (YYYYMMDD-HHMMSS).
#[test]
fn runs_started_together_get_distinct_run_ids() {
    let dir = tmpdir("run-ids");
    let outs: Vec<PathBuf> = (0..4).map(|i| dir.join(format!("r{i}"))).collect();
    let children: Vec<Child> = outs
        .iter()
        .map(|o| {
            Command::new(bin())
                .args(["micro-comm", "--sizes", "4", "--iters", "2", "-q", "--out"])
                .arg(o)
                .env_remove("SLURM_NTASKS")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = wait_bounded(c, 60, "a one-case run");
        assert_eq!(out.status.code(), Some(0), "{}", err_text(&out));
    }
    let ids: BTreeSet<String> = outs
        .iter()
        .map(|o| run_json(o)["run_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), outs.len(), "{ids:?}");
    for id in &ids {
        let (stamp, tag) = id.rsplit_once('-').unwrap();
        assert_eq!(stamp.len(), 15, "{id}");
        assert!(
            tag.len() == 6 && tag.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
    }
}
