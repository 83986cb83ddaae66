//! Helpers of the fault tests (tests/faults_*.rs): launch the binary under mpirun or
//! alone with a time limit, signal its ranks, and read what it wrote.

use super::{mpirun_cmd, ompi_tmpdir, read_csv};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> String {
    std::env::var("GRADCOMP_TEST_BIN").unwrap_or_else(|_| super::BIN.to_string())
}

/// Taken by the tests whose timing matters (signals): they run one at a time, not
/// beside the other tests of this file on a small machine.
pub static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn timed() -> std::sync::MutexGuard<'static, ()> {
    TIMED.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn launcher(np: usize) -> Command {
    let mut cmd = Command::new(mpirun_cmd());
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_orte_tmpdir_base", ompi_tmpdir())
        .env_remove("SLURM_NTASKS")
        .args(["--oversubscribe", "--bind-to", "none", "-np"])
        .arg(np.to_string())
        .arg(bin());
    cmd
}

/// Start `gradcomp ARGS` on `np` ranks in the background (stderr captured).
pub fn spawn(np: usize, args: &[&str]) -> Child {
    launcher(np)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun")
}

/// Run `gradcomp ARGS` on `np` ranks; killed (and the test failed) after `limit_s`.
pub fn run(np: usize, args: &[&str], limit_s: u64) -> Output {
    let child = launcher(np)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun");
    wait_bounded(child, limit_s, &format!("{args:?}"))
}

/// Wait for `child`; kill it and fail when it runs longer than `limit_s`.
pub fn wait_bounded(mut child: Child, limit_s: u64, what: &str) -> Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(limit_s) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running after {limit_s}s (hang); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

pub fn err_text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The lines gradcomp printed (`gradcomp: ...`), not the launcher's.
/// gradcomp's own stderr lines, warnings (e.g. the one-rank warning) left out.
pub fn our_lines(o: &Output) -> Vec<String> {
    err_text(o)
        .lines()
        .filter(|l| l.starts_with("gradcomp:") && !l.starts_with("gradcomp: warning:"))
        .map(String::from)
        .collect()
}

/// PIDs of the gradcomp ranks whose command line mentions `marker`, in rank order.
pub fn rank_pids(marker: &str) -> Vec<u32> {
    let out = Command::new("pgrep")
        .args(["-f", &format!("^{} .*{marker}", bin())])
        .output()
        .expect("pgrep");
    let mut ranked: Vec<(usize, u32)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let rank = env
                .split(|&b| b == 0)
                .filter_map(|kv| std::str::from_utf8(kv).ok())
                .find_map(|kv| kv.strip_prefix("OMPI_COMM_WORLD_RANK="))
                .and_then(|r| r.parse().ok())
                .unwrap_or(usize::MAX);
            (rank, pid)
        })
        .collect();
    ranked.sort();
    ranked.into_iter().map(|(_, p)| p).collect()
}

/// Whether process `pid` has a handler for SIGTERM (`/proc/PID/status` `SigCgt`, a hex
/// mask with bit `signo - 1` per caught signal): gradcomp's stop handlers are in. Before
/// them, a process just exec'd dies of SIGTERM like any other.
pub fn catches_sigterm(pid: u32) -> bool {
    mask_has(pid, "SigCgt:", libc::SIGTERM)
}

/// Whether the hex signal mask `key` of /proc/PID/status (`SigCgt:`, `ShdPnd:`) has
/// signal `signo` (bit `signo - 1`); false when the process is gone.
fn mask_has(pid: u32, key: &str, signo: i32) -> bool {
    u64::from_str_radix(&proc_status(pid, key), 16).is_ok_and(|m| m & (1 << (signo - 1)) != 0)
}

/// Wait (bounded) until `np` ranks whose command line mentions `marker` run, then until
/// `csv` has at least `n` rows, and freeze every rank at once (SIGSTOP): the state a
/// test then signals or kills is the state it saw, however fast the machine runs the
/// cases (a CI machine ran the 40 cases of the 4-rank sweep in one second and finished
/// them between the 20 ms poll and mpirun's forwarding of SIGTERM). Returns the ranks'
/// PIDs in rank order and the rows written when they froze; [`thaw`] continues them.
pub fn freeze_at_rows(
    csv: &Path,
    n: usize,
    child: &mut Child,
    marker: &str,
    np: usize,
) -> (Vec<u32>, usize) {
    let t0 = Instant::now();
    let pids = loop {
        let p = rank_pids(marker);
        if p.len() == np {
            break p;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        assert!(t0.elapsed() < Duration::from_secs(60), "ranks found: {p:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    loop {
        if super::rows_in(csv) >= n {
            for &pid in &pids {
                // SAFETY: kill(2) on a PID this test's child started; no memory is shared.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
            }
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before writing {n} rows"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no {n} rows after 2 minutes"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // A stopped process shows `T (stopped)` once SIGSTOP is delivered.
    for &pid in &pids {
        let t1 = Instant::now();
        while !proc_status(pid, "State:").starts_with('T') && t1.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    (pids, super::rows_in(csv))
}

/// Continue frozen ranks (SIGCONT).
pub fn thaw(pids: &[u32]) {
    for &pid in pids {
        signal("CONT", pid);
    }
}

/// The value of `key` in /proc/PID/status, trimmed; empty when the process is gone.
pub fn proc_status(pid: u32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// Wait (at most 10 s) until signal `signo` is pending at process `pid` (the
/// process-wide mask `ShdPnd`, bit `signo - 1`), the process is no longer stopped
/// (its launcher continued it) or it is gone.
pub fn wait_pending(pid: u32, signo: i32) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if mask_has(pid, "ShdPnd:", signo) || !proc_status(pid, "State:").starts_with('T') {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub fn signal(sig: &str, pid: u32) {
    Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
}

pub fn case_ids(path: &Path) -> Vec<String> {
    let (h, rows) = read_csv(path);
    let c = h.iter().position(|x| x == "case_id").unwrap();
    assert!(
        rows.iter().all(|r| r.len() == h.len()),
        "{}: a torn row",
        path.display()
    );
    rows.iter().map(|r| r[c].clone()).collect()
}

/// A micro-comm sweep of 40 cases that takes a few seconds on 2 oversubscribed cores.
pub fn sweep(out: &str) -> Vec<String> {
    sweep_iters(out, 200)
}

/// The sweep with `iters` timed iterations per case. A signal test needs a tail that
/// outlasts the signal's delivery: at 2 ranks (not oversubscribed) 200 iterations run
/// the whole sweep in well under a second on a fast machine (a CI run finished all 40
/// cases before the signal arrived), so those tests use more.
pub fn sweep_iters(out: &str, iters: u32) -> Vec<String> {
    let iters = iters.to_string();
    [
        "micro-comm",
        "--collectives",
        "allreduce,ring-allreduce",
        "--min-bytes",
        "4",
        "--max-bytes",
        "2MiB",
        "--iters",
        &iters,
        "--warmup",
        "2",
        "--quiet",
        "--out",
        out,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The case ids of the sweep run uninterrupted on `np` ranks.
/// The cases of `sweep_iters`, written down from its flags (independent of gradcomp's
/// expansion): both collectives at every power of two from 4 B to 2 MiB.
pub fn sweep_cases() -> BTreeSet<(String, u64)> {
    ["allreduce", "ring-allreduce"]
        .iter()
        .flat_map(|c| (2..=21).map(move |e| (c.to_string(), 1u64 << e)))
        .collect()
}

/// `(collective, bytes)` of every row of a micro_comm.csv, in file order.
pub fn row_cases(path: &Path) -> Vec<(String, u64)> {
    let (h, rows) = read_csv(path);
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    rows.iter()
        .map(|r| {
            (
                r[col("collective")].clone(),
                r[col("bytes")].parse().unwrap(),
            )
        })
        .collect()
}

/// `gradcomp ARGS` on `np` ranks exits 2 with one `gradcomp:` line holding every word.
pub fn refused(np: usize, args: &[&str], words: &[&str]) {
    let out = run(np, args, 60);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", err_text(&out));
    let lines = our_lines(&out);
    assert_eq!(lines.len(), 1, "{args:?}: {}", err_text(&out));
    for w in words {
        assert!(
            lines[0].contains(w),
            "{args:?}: '{w}' missing: {}",
            lines[0]
        );
    }
}

/// `gradcomp ARGS` alone (an MPI singleton), bounded; for checks that need no second rank.
pub fn alone(args: &[&str]) -> Output {
    let child = Command::new(bin())
        .args(args)
        .env_remove("SLURM_NTASKS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child, 60, &format!("{args:?}"))
}

/// Exit 2 with exactly one line of ours, holding every word.
pub fn refused_alone(args: &[&str], words: &[&str]) -> String {
    let out = alone(args);
    let lines = our_lines(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", err_text(&out));
    assert_eq!(lines.len(), 1, "{args:?}: {}", err_text(&out));
    for w in words {
        assert!(
            lines[0].contains(w),
            "{args:?}: '{w}' missing: {}",
            lines[0]
        );
    }
    lines[0].clone()
}
