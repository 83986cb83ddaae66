//! Stop signals (issue 19 item 3, issue 30 items 1 and 2): SIGTERM/SIGINT from scancel
//! or Ctrl-C at any rank or at mpirun, a rank that cannot stop, a second signal, a signal
//! during start-up, `converge` stopped and resumed per case, and run.json's count of the
//! cases whatever ends the job. Every test runs the release binary under mpirun.
//!
//! `GRADCOMP_TEST_BIN=/path/to/gradcomp` runs these tests against another build (to see
//! them fail on an older revision). The helpers these files share are in
//! tests/common/faults.rs.

mod common;
use common::faults::{
    case_ids, catches_sigterm, err_text, freeze_at_rows, rank_pids, row_cases, run, signal, spawn,
    strs, sweep, sweep_cases, sweep_iters, thaw, timed, wait_bounded, wait_pending,
};
use common::{read_csv, read_csv_written, run_json, tmpdir};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

// ---- item 3: SIGTERM / SIGINT --------------------------------------------------------

/// Timed iterations per case of the signal tests' sweep (see [`sweep_iters`]). Open MPI's
/// mpirun, signalled, continues its ranks (SIGCONT) at once but forwards the signal only
/// `odls_base_sigkill_timeout` (1 s) later, so freezing the ranks cannot hold them for a
/// signal to mpirun: what is left of the sweep must outlast that second. At 200
/// iterations the 4-rank sweep takes 0.7-1 s unloaded, and a CI run ended it `ok`
/// before the signal came; 2000 take 7 s on the 2-core development machine. Stopping
/// the ranks again once continued does not help: mpirun's wait ends early when a
/// child stops (seen here: SIGTERM a millisecond after SIGCONT, and one rank signalled
/// while running, so no mask shows it).
fn signal_iters(np: usize, target: Target) -> u32 {
    match target {
        Target::Mpirun => 2000,
        _ if np <= 2 => 2000,
        _ => 200,
    }
}

/// Where a stop signal goes.
#[derive(Clone, Copy, Debug)]
enum Target {
    Mpirun,
    Rank(usize),
    AllRanks,
}

/// Start the sweep on `np` ranks, send `sig` to `target` once 3 rows exist (every rank
/// frozen meanwhile: [`freeze_at_rows`]), and check
/// the record: status interrupted, the rows intact, one line naming `--resume`, and a
/// `--resume` that ends with exactly the sweep's cases ([`sweep_cases`]), each once.
fn interrupt_and_resume(np: usize, sig: &str, target: Target, want: &BTreeSet<(String, u64)>) {
    let name = format!("sig-{np}-{sig}-{target:?}").replace(['(', ')'], "");
    let dir = tmpdir(&name);
    let d = dir.to_str().unwrap().to_string();
    let mut args = sweep_iters(&d, signal_iters(np, target));
    args.push("--samples".into());
    let mut child = spawn(np, &strs(&args));
    let csv = dir.join("micro_comm.csv");
    // Freeze every rank at 3 rows, signal, and continue them once the signal is
    // pending: the sweep cannot finish between the rows seen and the signal.
    let (pids, frozen_rows) = freeze_at_rows(&csv, 3, &mut child, &d, np);
    let what = format!("{sig} to {target:?} at -np {np}");
    assert!(
        frozen_rows < want.len(),
        "{what}: finished before the signal"
    );
    let signo = if sig == "INT" {
        libc::SIGINT
    } else {
        libc::SIGTERM
    };
    let t0 = Instant::now();
    match target {
        Target::Mpirun => {
            signal(sig, child.id());
            pids.iter().for_each(|&p| wait_pending(p, signo));
        }
        Target::Rank(r) => signal(sig, pids[r]),
        Target::AllRanks => pids.iter().for_each(|&p| signal(sig, p)),
    }
    thaw(&pids);
    let out = wait_bounded(child, 60, &format!("{sig} to {target:?} at -np {np}"));
    let secs = t0.elapsed().as_secs_f64();
    assert!(!out.status.success(), "{what}: exit 0");
    assert!(secs < 10.0, "{what}: took {secs:.1}s to stop");
    let meta = run_json(&dir);
    assert_eq!(meta["status"], "interrupted", "{what}: {meta}");
    assert!(meta["end_time"].is_string(), "{what}");
    assert!(
        meta["error"].as_str().unwrap_or("").contains(sig),
        "{what}: {meta}"
    );
    let before = case_ids(&csv);
    assert_eq!(meta["cases_done"], before.len(), "{what}");
    assert!(
        meta["last_case"]
            .as_str()
            .is_some_and(|l| l.contains(&before[before.len() - 1])),
        "{what}: last_case is not the last row: {meta}"
    );
    assert!(
        before.len() < want.len(),
        "{what}: finished before the signal"
    );
    let err = err_text(&out);
    let resume_lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("gradcomp: interrupted") && l.contains("--resume"))
        .collect();
    assert_eq!(resume_lines.len(), 1, "{what}: {err}");
    // Without --quiet: the start line says how many cases are skipped.
    let mut a: Vec<&str> = strs(&args)
        .into_iter()
        .filter(|x| *x != "--quiet")
        .collect();
    a.push("--resume");
    let again = run(np, &a, 300);
    assert!(
        again.status.success(),
        "{what}: --resume exited {:?}: {}{}",
        again.status,
        String::from_utf8_lossy(&again.stdout),
        err_text(&again)
    );
    assert!(
        err_text(&again).contains(&format!("skipping {} already done", before.len())),
        "{what}: {}",
        err_text(&again)
    );
    let after = row_cases(&csv);
    assert_eq!(after.len(), want.len(), "{what}: duplicate or missing rows");
    assert_eq!(&after.into_iter().collect::<BTreeSet<_>>(), want, "{what}");
    let ids: BTreeSet<String> = case_ids(&csv).into_iter().collect();
    assert_eq!(ids.len(), want.len(), "{what}: case ids not distinct");
    // samples.csv: every case's np x iters rows, each (case_id, rank, iter) once.
    let (h, rows) = read_csv(&dir.join("samples.csv"));
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let keys: BTreeSet<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r[col("case_id")].clone(),
                r[col("rank")].clone(),
                r[col("iter")].clone(),
            )
        })
        .collect();
    assert_eq!(keys.len(), rows.len(), "{what}: duplicate samples");
    assert_eq!(
        rows.len(),
        want.len() * np * signal_iters(np, target) as usize,
        "{what}: samples missing"
    );
    let sample_cases: BTreeSet<String> = keys.into_iter().map(|k| k.0).collect();
    assert_eq!(sample_cases, ids, "{what}: samples of other cases");
}

#[test]
fn sigterm_stops_cleanly_at_2_ranks() {
    let _serial = timed();
    let want = sweep_cases();
    interrupt_and_resume(2, "TERM", Target::Mpirun, &want);
    interrupt_and_resume(2, "TERM", Target::Rank(1), &want);
    interrupt_and_resume(2, "INT", Target::AllRanks, &want);
}

#[test]
fn sigterm_stops_cleanly_at_4_ranks() {
    let _serial = timed();
    let want = sweep_cases();
    interrupt_and_resume(4, "TERM", Target::Mpirun, &want);
    interrupt_and_resume(4, "TERM", Target::Rank(0), &want);
    interrupt_and_resume(4, "TERM", Target::Rank(2), &want);
    interrupt_and_resume(4, "TERM", Target::AllRanks, &want);
}

#[test]
fn a_rank_that_cannot_stop_ends_the_job_with_a_message() {
    let _serial = timed();
    // Rank 2 is frozen (SIGSTOP), so rank 0, signalled, can never agree with it. Rank 0
    // keeps run.json: it must not say `running` after the exit 4 (it did: the grace
    // timer's signal handler could not write it).
    let dir = tmpdir("stuck");
    let d = dir.to_str().unwrap().to_string();
    let mut args = sweep(&d);
    args.extend(["--stop-grace".into(), "2".into()]);
    let mut child = spawn(3, &strs(&args));
    let (pids, _) = freeze_at_rows(&dir.join("micro_comm.csv"), 2, &mut child, &d, 3);
    signal("TERM", pids[0]);
    thaw(&pids[..2]);
    let t0 = Instant::now();
    let out = wait_bounded(child, 60, "stuck rank");
    for p in pids {
        signal("CONT", p);
    }
    assert!(!out.status.success());
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
    assert!(
        err_text(&out).contains("could not reach an agreed stop point"),
        "{}",
        err_text(&out)
    );
    let meta = run_json(&dir);
    assert_eq!(meta["status"], "interrupted", "{meta}");
    assert!(
        meta["error"].as_str().is_some_and(|e| e.contains("code 4")),
        "{meta}"
    );
}

#[test]
fn a_second_signal_ends_the_rank_at_once() {
    let _serial = timed();
    let dir = tmpdir("twice");
    let d = dir.to_str().unwrap().to_string();
    let mut child = spawn(3, &strs(&sweep(&d)));
    let (pids, _) = freeze_at_rows(&dir.join("micro_comm.csv"), 2, &mut child, &d, 3);
    signal("INT", pids[1]);
    thaw(&pids[..2]);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    signal("INT", pids[1]);
    let out = wait_bounded(child, 60, "second signal");
    for p in pids {
        signal("CONT", p);
    }
    assert!(!out.status.success());
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert!(
        err_text(&out).contains("second stop signal"),
        "{}",
        err_text(&out)
    );
}

// ---- issue 30, items 1 and 2: converge stops cleanly; run.json follows the cases --------

/// converge.csv's rows per case_id, in file order: (status, step) of each row. A torn
/// row fails the test ([`read_csv`] reads strictly).
fn converge_cases(path: &Path) -> Vec<(String, Vec<(String, u64)>)> {
    cases_of(read_csv(path))
}

/// [`converge_cases`] of a CSV (header, rows) read whole or while it is written.
fn cases_of((h, rows): (Vec<String>, Vec<Vec<String>>)) -> Vec<(String, Vec<(String, u64)>)> {
    let Some(col) = ["case_id", "status", "step"]
        .map(|n| h.iter().position(|x| x == n))
        .into_iter()
        .collect::<Option<Vec<usize>>>()
    else {
        return Vec::new(); // the header is not written yet
    };
    let (id, st, step) = (col[0], col[1], col[2]);
    let mut out: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    for r in rows {
        let row = (r[st].clone(), r[step].parse().unwrap());
        match out.iter_mut().find(|(i, _)| *i == r[id]) {
            Some((_, v)) => v.push(row),
            None => out.push((r[id].clone(), vec![row])),
        }
    }
    out
}

/// `converge` used to ignore SIGTERM (it trained on until killed, run.json stayed
/// `running` at 0 cases, and the report called the cut-off method `ok`). Now: run.json
/// counts the cases as they finish; SIGTERM to every rank stops at the next step with
/// exit 143, run.json `interrupted`, the cut-off case's last row `interrupted` (when it
/// had rows since its last evaluation) and a `--resume` command with the real rank
/// count; `--resume` skips the finished cases, moves the cut-off curve to
/// converge.interrupted.csv and runs that case again from step 0, so converge.csv ends
/// with four whole curves.
#[test]
fn converge_stops_on_a_signal_records_it_and_resumes_per_case() {
    let _t = timed();
    const STEPS: u64 = 3000;
    let steps_s = STEPS.to_string();
    let dir = tmpdir("converge-stop");
    let out = dir.join("cv");
    let o = out.to_str().unwrap();
    let args = [
        "converge",
        "--methods",
        "ssgd,topk,powersgd,acpsgd",
        "--steps",
        &steps_s,
        "--hidden",
        "64",
        "--train-samples",
        "4096",
        "--out",
        o,
    ];
    let child = spawn(2, &args);
    let csv = out.join("converge.csv");
    let t0 = Instant::now();
    let pids = loop {
        let p = rank_pids(o);
        if p.len() == 2 {
            break p;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no ranks started");
        std::thread::sleep(Duration::from_millis(2));
    };
    // Wait until a case is done and the next one has rows, then freeze both ranks at
    // once (SIGSTOP), so the state seen is the state the signal lands on however fast
    // the machine runs the cases (a fast CI machine finished all four between a 50 ms
    // poll and the signal). run.json must already count the finished case.
    let live_done = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "no case finished in 180 s"
        );
        std::thread::sleep(Duration::from_millis(1));
        let Ok(bytes) = std::fs::read(out.join("run.json")) else {
            continue;
        };
        let Ok(meta) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        let done = meta["cases_done"].as_u64().unwrap_or(0);
        // The ranks are appending: read the rows they have finished, not a torn tail.
        if done >= 1 && csv.exists() && cases_of(read_csv_written(&csv)).len() > done as usize {
            for &pid in &pids {
                signal("STOP", pid);
            }
            assert_eq!(meta["status"], "running");
            assert!(
                meta["last_case"].as_str().is_some_and(|l| !l.is_empty()),
                "{meta}"
            );
            break done;
        }
    };
    assert!(
        live_done < 4,
        "the run ended before the signal: make the cases longer"
    );
    for &pid in &pids {
        signal("TERM", pid);
    }
    for &pid in &pids {
        signal("CONT", pid);
    }
    let stopped = wait_bounded(child, 60, "converge after SIGTERM");
    let err = err_text(&stopped);
    assert_eq!(stopped.status.code(), Some(143), "{err}");
    assert!(
        err.contains("gradcomp: interrupted by SIGTERM")
            && err.contains("continue with: mpirun -np 2 ")
            && err.contains("--resume"),
        "{err}"
    );
    let meta = run_json(&out);
    assert_eq!(meta["status"], "interrupted", "{meta}");
    assert!(
        meta["error"]
            .as_str()
            .unwrap()
            .starts_with("stopped by SIGTERM"),
        "{meta}"
    );
    let cases = converge_cases(&csv);
    let whole: Vec<&String> = cases
        .iter()
        .filter(|(_, rows)| rows.iter().any(|(s, _)| s == "done"))
        .map(|(id, _)| id)
        .collect();
    assert!(whole.len() as u64 >= live_done);
    assert_eq!(
        meta["cases_done"].as_u64().unwrap(),
        whole.len() as u64,
        "{meta}"
    );
    let cut: Vec<&(String, Vec<(String, u64)>)> = cases
        .iter()
        .filter(|(_, rows)| !rows.iter().any(|(s, _)| s == "done"))
        .collect();
    assert!(cut.len() <= 1, "{cut:?}");
    for (_, rows) in &cut {
        assert!(rows.len() < STEPS as usize);
        // Only the last row of a cut curve may say "interrupted"; none says "done".
        assert!(rows[..rows.len() - 1].iter().all(|(s, _)| s == "ok"));
    }

    let mut resumed_args = args.to_vec();
    resumed_args.push("--resume");
    let resumed = run(2, &resumed_args, 300);
    let err = err_text(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("skipping {} already done", whole.len())),
        "{err}"
    );
    let after = converge_cases(&csv);
    assert_eq!(after.len(), 4, "{after:?}");
    for (id, rows) in &after {
        let steps: Vec<u64> = rows.iter().map(|(_, s)| *s).collect();
        assert_eq!(
            steps,
            (0..STEPS).collect::<Vec<_>>(),
            "case {id}: not one whole curve"
        );
        assert_eq!(rows.last().unwrap().0, "done", "case {id}");
    }
    // The finished cases' rows are untouched and first; the cut curve is kept aside.
    for (i, id) in whole.iter().enumerate() {
        assert_eq!(&after[i].0, *id);
    }
    if let Some((id, rows)) = cut.first() {
        let moved = converge_cases(&out.join("converge.interrupted.csv"));
        assert_eq!(moved.len(), 1);
        assert_eq!(&moved[0].0, id);
        assert_eq!(moved[0].1.len(), rows.len());
    }
    let meta = run_json(&out);
    assert_eq!(meta["status"], "ok", "{meta}");
    assert_eq!(meta["cases_skipped"].as_u64().unwrap(), whole.len() as u64);
    assert_eq!(meta["cases_done"].as_u64().unwrap(), 4 - whole.len() as u64);
}

/// A job cancelled right after it starts (a loaded node: the signal arrives while MPI
/// starts, or while the output directory is being set up) ends like any other stopped
/// run: exit 143, run.json `interrupted` with `cases_done: 0`, the resume command. The
/// stop handlers are installed before MPI_Init; before, such a signal killed the ranks
/// with no record at all. Each rank is signalled 0, 30 or 150 ms after its handlers are
/// in (`catches_sigterm`): the first instants after exec, before `main` runs, are every
/// program's (a CI run once signalled a rank there and it died of SIGTERM). The one case
/// has a million iterations, so a machine that starts MPI in under 150 ms cannot finish
/// it before the signal (the ranks agree to stop at the next iteration's barrier).
#[test]
fn a_signal_during_start_up_leaves_an_interrupted_record() {
    let _t = timed();
    let dir = tmpdir("startup-signal");
    for (i, delay_ms) in [0u64, 30, 150].into_iter().enumerate() {
        let out = dir.join(format!("s{i}"));
        let o = out.to_str().unwrap();
        let child = spawn(
            2,
            &[
                "micro-comm",
                "--sizes",
                "4",
                "--iters",
                "1000000",
                "--out",
                o,
            ],
        );
        let t0 = Instant::now();
        let pids = loop {
            let p = rank_pids(o);
            if p.len() == 2 && p.iter().all(|&pid| catches_sigterm(pid)) {
                break p;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no ranks started with their stop handlers: {p:?}"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        std::thread::sleep(Duration::from_millis(delay_ms));
        for p in pids {
            signal("TERM", p);
        }
        let done = wait_bounded(child, 60, "a run signalled at start-up");
        let err = err_text(&done);
        assert_eq!(done.status.code(), Some(143), "delay {delay_ms} ms: {err}");
        assert!(
            err.contains("gradcomp: interrupted by SIGTERM: 0 case(s) done")
                && err.contains("continue with: mpirun -np 2 "),
            "{err}"
        );
        let meta = run_json(&out);
        assert_eq!(meta["status"], "interrupted", "{meta}");
        assert_eq!(meta["cases_done"], 0, "{meta}");
        assert!(meta["end_time"].is_string(), "{meta}");
    }
}

/// run.json's `cases_done` and `last_case` are rewritten as each case's rows are
/// flushed, so they are right whatever ends the job: here `kill -9` of every rank in the
/// middle of a sweep (no code of ours runs after it), and a `--case-timeout` (exit 3,
/// which also records `failed` and the case).
#[test]
fn run_json_counts_the_cases_whatever_ends_the_job() {
    let _t = timed();
    let dir = tmpdir("live-record");
    let out = dir.join("k");
    let o = out.to_str().unwrap();
    let args = sweep_iters(o, 2000);
    let mut child = spawn(2, &strs(&args));
    let csv = out.join("micro_comm.csv");
    let (pids, _) = freeze_at_rows(&csv, 5, &mut child, o, 2);
    for p in pids {
        signal("KILL", p);
    }
    let _ = wait_bounded(child, 60, "a sweep after kill -9");
    let rows = case_ids(&csv);
    let meta = run_json(&out);
    assert_eq!(meta["status"], "running", "{meta}");
    // The kill may land between a row's flush and run.json's rewrite: at most one behind.
    let done = meta["cases_done"].as_u64().unwrap() as usize;
    assert!(
        done == rows.len() || done + 1 == rows.len(),
        "run.json says {done} cases done, micro_comm.csv has {} rows: {meta}",
        rows.len()
    );
    let last = meta["last_case"].as_str().unwrap();
    assert!(last.contains(&rows[done - 1]), "{last} vs {:?}", rows);

    // --case-timeout: the first case is quick, the second outlasts the limit.
    let out = dir.join("t");
    let o = out.to_str().unwrap();
    let cfg = dir.join("timeout.toml");
    std::fs::write(
        &cfg,
        "[run]\ncase_timeout_s = 2\n[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [4]\niters = 10\n[[e2e]]\nmodels = [\"resnet50\"]\nmethods = [\"ssgd\"]\ndevice = \"rtx2080ti\"\nbatch = 256\npipelining = [false]\niters = 200\n",
    )
    .unwrap();
    let timed_out = run(2, &["run", cfg.to_str().unwrap(), "--out", o], 120);
    assert_eq!(timed_out.status.code(), Some(3), "{}", err_text(&timed_out));
    let meta = run_json(&out);
    assert_eq!(meta["status"], "failed", "{meta}");
    assert_eq!(meta["cases_done"], 1, "{meta}");
    assert!(
        meta["error"]
            .as_str()
            .unwrap()
            .contains("exceeded --case-timeout"),
        "{meta}"
    );
    assert!(meta["end_time"].is_string(), "{meta}");
}
