//! The faults a cluster user meets (issue 19): two jobs writing into one `--out`, a
//! later run into an existing directory, SIGTERM/SIGINT from scancel or Ctrl-C, a job
//! whose memory the node lacks, config files that are not files, a full disk, and small
//! command-line slips. Every test runs the release binary under mpirun.
//!
//! `GRADCOMP_TEST_BIN=/path/to/gradcomp` runs these tests against another build (to see
//! them fail on an older revision).

mod common;
use common::{mpirun_cmd, ompi_tmpdir, read_csv, run_json, tmpdir, wait_rows};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> String {
    std::env::var("GRADCOMP_TEST_BIN").unwrap_or_else(|_| common::BIN.to_string())
}

/// Taken by the tests whose timing matters (signals): they run one at a time, not
/// beside the other tests of this file on a small machine.
static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn timed() -> std::sync::MutexGuard<'static, ()> {
    TIMED.lock().unwrap_or_else(|e| e.into_inner())
}

fn launcher(np: usize) -> Command {
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
fn spawn(np: usize, args: &[&str]) -> Child {
    launcher(np)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun")
}

/// Run `gradcomp ARGS` on `np` ranks; killed (and the test failed) after `limit_s`.
fn run(np: usize, args: &[&str], limit_s: u64) -> Output {
    let child = launcher(np)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun");
    wait_bounded(child, limit_s, &format!("{args:?}"))
}

/// Wait for `child`; kill it and fail when it runs longer than `limit_s`.
fn wait_bounded(mut child: Child, limit_s: u64, what: &str) -> Output {
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

fn err_text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The lines gradcomp printed (`gradcomp: ...`), not the launcher's.
/// gradcomp's own stderr lines, warnings (e.g. the one-rank warning) left out.
fn our_lines(o: &Output) -> Vec<String> {
    err_text(o)
        .lines()
        .filter(|l| l.starts_with("gradcomp:") && !l.starts_with("gradcomp: warning:"))
        .map(String::from)
        .collect()
}

/// PIDs of the gradcomp ranks whose command line mentions `marker`, in rank order.
fn rank_pids(marker: &str) -> Vec<u32> {
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
fn catches_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (15 - 1)) != 0)
}

fn signal(sig: &str, pid: u32) {
    Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
}

fn case_ids(path: &Path) -> Vec<String> {
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
fn sweep(out: &str) -> Vec<String> {
    sweep_iters(out, 200)
}

/// The sweep with `iters` timed iterations per case. A signal test needs a tail that
/// outlasts the signal's delivery: at 2 ranks (not oversubscribed) 200 iterations run
/// the whole sweep in well under a second on a fast machine (a CI run finished all 40
/// cases before the signal arrived), so those tests use more.
fn sweep_iters(out: &str, iters: u32) -> Vec<String> {
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

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The case ids of the sweep run uninterrupted on `np` ranks.
/// The cases of `sweep_iters`, written down from its flags (independent of gradcomp's
/// expansion): both collectives at every power of two from 4 B to 2 MiB.
fn sweep_cases() -> BTreeSet<(String, u64)> {
    ["allreduce", "ring-allreduce"]
        .iter()
        .flat_map(|c| (2..=21).map(move |e| (c.to_string(), 1u64 << e)))
        .collect()
}

/// `(collective, bytes)` of every row of a micro_comm.csv, in file order.
fn row_cases(path: &Path) -> Vec<(String, u64)> {
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

// ---- item 1: one run per output directory -------------------------------------------

#[test]
fn two_runs_into_one_out_never_mix_their_rows() {
    let _serial = timed();
    // The issue's repro: two jobs started together into one directory with --resume.
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
    wait_rows(&csv, 2, &mut first);
    let holder = rank_pids(&d)[0];
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
    for p in rank_pids(&d) {
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

// ---- item 3: SIGTERM / SIGINT --------------------------------------------------------

/// Timed iterations per case of the signal tests' sweep (see [`sweep_iters`]).
fn signal_iters(np: usize) -> u32 {
    if np <= 2 {
        2000
    } else {
        200
    }
}

/// Where a stop signal goes.
#[derive(Clone, Copy, Debug)]
enum Target {
    Mpirun,
    Rank(usize),
    AllRanks,
}

/// Start the sweep on `np` ranks, send `sig` to `target` once 3 rows exist, and check
/// the record: status interrupted, the rows intact, one line naming `--resume`, and a
/// `--resume` that ends with exactly the sweep's cases ([`sweep_cases`]), each once.
fn interrupt_and_resume(np: usize, sig: &str, target: Target, want: &BTreeSet<(String, u64)>) {
    let name = format!("sig-{np}-{sig}-{target:?}").replace(['(', ')'], "");
    let dir = tmpdir(&name);
    let d = dir.to_str().unwrap().to_string();
    let mut args = sweep_iters(&d, signal_iters(np));
    args.push("--samples".into());
    let mut child = spawn(np, &strs(&args));
    let csv = dir.join("micro_comm.csv");
    wait_rows(&csv, 3, &mut child);
    let pids = rank_pids(&d);
    assert_eq!(pids.len(), np, "ranks found: {pids:?}");
    match target {
        Target::Mpirun => signal(sig, child.id()),
        Target::Rank(r) => signal(sig, pids[r]),
        Target::AllRanks => pids.iter().for_each(|&p| signal(sig, p)),
    }
    let t0 = Instant::now();
    let out = wait_bounded(child, 60, &format!("{sig} to {target:?} at -np {np}"));
    let secs = t0.elapsed().as_secs_f64();
    let what = format!("{sig} to {target:?} at -np {np}");
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
        want.len() * np * signal_iters(np) as usize,
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
    wait_rows(&dir.join("micro_comm.csv"), 2, &mut child);
    let pids = rank_pids(&d);
    signal("STOP", pids[2]);
    signal("TERM", pids[0]);
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
    wait_rows(&dir.join("micro_comm.csv"), 2, &mut child);
    let pids = rank_pids(&d);
    signal("STOP", pids[2]);
    signal("INT", pids[1]);
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

// ---- item 5: config files that are not files, huge configs, repeated entries --------

/// `gradcomp ARGS` on `np` ranks exits 2 with one `gradcomp:` line holding every word.
fn refused(np: usize, args: &[&str], words: &[&str]) {
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

#[test]
fn config_files_that_are_not_regular_or_too_big_are_refused() {
    let dir = tmpdir("cfg");
    refused(
        1,
        &["run", "/dev/zero"],
        &["/dev/zero", "not a regular file"],
    );
    let fifo = dir.join("fifo.toml");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let f = fifo.to_str().unwrap();
    refused(2, &["run", f], &[f, "not a regular file"]);
    let big = dir.join("big.toml");
    let mut text = String::from("[[micro-comm]]\ncollectives = [\"allreduce\"]\n");
    text.push_str(&format!("# {}\n", "x".repeat(5 << 20)));
    std::fs::write(&big, text).unwrap();
    let b = big.to_str().unwrap();
    refused(3, &["run", b], &[b, "MiB"]);
    // A directory is not a config either.
    let d = dir.to_str().unwrap();
    refused(1, &["run", d], &[d, "not a regular file"]);
}

#[test]
fn case_count_is_capped_and_repeated_entries_are_refused() {
    let dir = tmpdir("cases");
    // 400 shapes x 300 densities = 120000 cases.
    let shapes: Vec<String> = (1..=400).map(|i| format!("\"{i}\"")).collect();
    let dens: Vec<String> = (1..=300)
        .map(|i| format!("{}", i as f64 / 1000.0))
        .collect();
    let cfg = dir.join("many.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[micro]]\nmethods = [\"topk\"]\nshapes = [{}]\ndensities = [{}]\n",
            shapes.join(","),
            dens.join(",")
        ),
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    refused(
        2,
        &["run", c, "--out", d(&dir, "o1")],
        &["120000 cases", "at most"],
    );
    let rep = dir.join("rep.toml");
    std::fs::write(
        &rep,
        "[[micro]]\nmethods = [\"topk\"]\nshapes = [\"100\", \"64\", \"100\"]\n",
    )
    .unwrap();
    let r = rep.to_str().unwrap();
    refused(3, &["run", r, "--out", d(&dir, "o2")], &[r, "100", "twice"]);
    refused(
        2,
        &["micro-comm", "--sizes", "4,8,4", "--out", d(&dir, "o3")],
        &["--sizes", "twice"],
    );
    refused(
        2,
        &[
            "micro-comm",
            "--collectives",
            "allreduce,allgather,allreduce",
            "--max-bytes",
            "64",
            "--out",
            d(&dir, "o4"),
        ],
        &["--collectives", "allreduce", "twice"],
    );
}

#[test]
fn a_section_repeated_on_purpose_gets_distinct_case_ids() {
    let dir = tmpdir("repeat");
    let cfg = dir.join("twice.toml");
    let section =
        "[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [4, 64]\niters = 5\nwarmup = 1\n";
    std::fs::write(&cfg, format!("{section}{section}")).unwrap();
    let c = cfg.to_str().unwrap();
    let out_dir = d(&dir, "o");
    let args = ["run", c, "--quiet", "--out", out_dir];
    let first = run(3, &args, 120);
    assert!(first.status.success(), "{}", err_text(&first));
    let ids = case_ids(&Path::new(out_dir).join("micro_comm.csv"));
    assert_eq!(ids.len(), 4);
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 4, "{ids:?}");
    let mut again = args.to_vec();
    again.push("--resume");
    let second = run(3, &again, 120);
    assert!(second.status.success(), "{}", err_text(&second));
    assert_eq!(
        case_ids(&Path::new(out_dir).join("micro_comm.csv")).len(),
        4
    );
}

fn d(dir: &Path, name: &str) -> &'static str {
    Box::leak(
        dir.join(name)
            .to_string_lossy()
            .into_owned()
            .into_boxed_str(),
    )
}

// ---- item 6: a full disk ---------------------------------------------------------------

/// Mount a tmpfs of `size` (e.g. `16k`) at `dir` (root only); `None` (with the reason)
/// when impossible.
fn tmpfs_of(dir: &Path, size: &str) -> Option<Unmount> {
    match Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .output()
    {
        Ok(o) if o.status.success() => Some(Unmount(dir.to_path_buf())),
        Ok(o) => {
            eprintln!(
                "skipping the full-disk test: cannot mount a tmpfs ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            None
        }
        Err(e) => {
            eprintln!("skipping the full-disk test: no mount command ({e})");
            None
        }
    }
}

struct Unmount(PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// With samples.csv on (`--samples`) the disk may fill while a case's samples or while
/// its summary row is written: the first message names that file, and samples.csv holds
/// whole cases only, every case of micro_comm.csv and at most the one after it.
#[test]
fn a_full_disk_reports_the_first_error_keeps_rows_and_exits_1() {
    for (np, samples) in [(1, false), (3, false), (1, true), (3, true)] {
        let dir = tmpdir(&format!("full-disk-{np}-{samples}"));
        let Some(_guard) = tmpfs_of(&dir, "16k") else {
            return;
        };
        let d = dir.to_str().unwrap();
        let mut args = vec![
            "micro-comm",
            "--collectives",
            "allreduce,allgather,ring-allreduce",
            "--min-bytes",
            "4",
            "--max-bytes",
            "1MiB",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--quiet",
            "--out",
            d,
        ];
        if samples {
            args.push("--samples");
        }
        let what = format!("-np {np}, samples {samples}");
        let out = run(np, &args, 120);
        let err = err_text(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        let lines = our_lines(&out);
        let first = lines.first().cloned().unwrap_or_default();
        let file = ["micro_comm.csv", "samples.csv"]
            .into_iter()
            .find(|f| first.contains(f) && (samples || *f == "micro_comm.csv"));
        assert!(
            file.is_some() && first.contains("No space left"),
            "{what}: the first message is not the CSV file's error: {err}"
        );
        assert!(!dir.join("run.tmp").exists(), "{what}: run.tmp left behind");
        let ids = case_ids(&dir.join("micro_comm.csv"));
        assert!(!ids.is_empty(), "{what}: no rows kept");
        // The status is recorded in the blocks run.json already holds.
        let meta = run_json(&dir);
        assert_eq!(meta["status"], "failed", "{what}: {meta}");
        assert!(meta["error"].as_str().unwrap().contains(file.unwrap()));
        assert!(
            !err.contains("(os error 28): No space"),
            "{what}: the cause is printed twice: {err}"
        );
        assert_eq!(dir.join("samples.csv").exists(), samples, "{what}");
        if samples {
            // Whole cases only (np ranks x 2 iterations each), in micro_comm.csv's order.
            let (h, rows) = read_csv(&dir.join("samples.csv"));
            assert!(rows.iter().all(|r| r.len() == h.len()), "{what}");
            let c = h.iter().position(|x| x == "case_id").unwrap();
            let mut cases: Vec<String> = Vec::new();
            for r in &rows {
                if cases.last() != Some(&r[c]) {
                    cases.push(r[c].clone());
                }
            }
            for id in &cases {
                let n = rows.iter().filter(|r| &r[c] == id).count();
                assert_eq!(n, np * 2, "{what}: case {id} is not whole in samples.csv");
            }
            assert!(
                cases.starts_with(&ids) && cases.len() <= ids.len() + 1,
                "{what}: samples.csv has cases {cases:?}, micro_comm.csv {ids:?}"
            );
        }
    }
}

// ---- issue 52, item 4: every result file whole on a full disk ---------------------------

/// Fill the file system of `dir` to the last block (a file `filler`).
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let page = [0u8; 4096];
    while f.write_all(&page).is_ok() {}
    let _ = f.sync_all();
}

/// A run that hit the full disk: exit 1, and the first `gradcomp:` line is the error of
/// `file` (no space left), not a secondary one. Returns stderr.
fn disk_full(out: &std::process::Output, file: &str, what: &str) -> String {
    let err = err_text(out);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    let first = our_lines(out).first().cloned().unwrap_or_default();
    assert!(
        first.contains(file) && first.contains("No space left"),
        "{what}: the first message is not {file}'s error: {err}"
    );
    err
}

/// The rows of the CSV file `path` after a failed run: the file ends at a line end and
/// every row has the header's fields (no partial last row).
fn whole_rows(path: &Path, what: &str) -> (Vec<String>, Vec<csv::StringRecord>) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.is_empty() || bytes.ends_with(b"\n"),
        "{what}: {} ends inside a row: {:?}",
        path.display(),
        String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(80)..])
    );
    let mut r = csv::Reader::from_reader(&bytes[..]);
    let h: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let rows: Vec<csv::StringRecord> = r
        .records()
        .map(|x| x.unwrap_or_else(|e| panic!("{what}: {}: a torn row: {e}", path.display())))
        .collect();
    assert!(rows.iter().all(|x| x.len() == h.len()), "{what}");
    (h, rows)
}

/// Names in `dir` other than `keep`: what a failed write left behind (temporary files).
fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

/// converge at -np 2 and 4 on a 16 KiB tmpfs: converge.csv fills part way through a
/// case. It keeps whole rows only, the first message names it, and run.json's
/// cases_done is the number of cases whose last row (status done) is in the file.
#[test]
fn a_full_disk_keeps_converge_csv_whole_and_its_record_true() {
    for np in [2, 4] {
        let dir = tmpdir(&format!("full-converge-{np}"));
        let Some(_guard) = tmpfs_of(&dir, "16k") else {
            return;
        };
        let what = format!("converge -np {np}");
        let out = run(
            np,
            &[
                "converge",
                "--quiet",
                "--methods",
                "ssgd,topk,powersgd,acpsgd,signsgd,qsgd",
                "--steps",
                "8",
                "--eval-every",
                "4",
                "--hidden",
                "32,32",
                "--eval-samples",
                "256",
                "--out",
                dir.to_str().unwrap(),
            ],
            120,
        );
        disk_full(&out, "converge.csv", &what);
        let (h, rows) = whole_rows(&dir.join("converge.csv"), &what);
        let col = |n: &str| h.iter().position(|c| c == n).unwrap();
        let (case, status) = (col("case_id"), col("status"));
        let finished: BTreeSet<&str> = rows
            .iter()
            .filter(|r| &r[status] == "done")
            .map(|r| &r[case])
            .collect();
        let meta = run_json(&dir);
        assert_eq!(meta["status"], "failed", "{what}: {meta}");
        assert!(meta["error"].as_str().unwrap().contains("converge.csv"));
        assert_eq!(
            meta["cases_done"].as_u64(),
            Some(finished.len() as u64),
            "{what}: run.json's cases_done against converge.csv's finished cases"
        );
        assert!(finished.len() < 6, "{what}: the disk never filled");
    }
}

/// simulate on a 16 KiB tmpfs: sim.csv does not fit. No sim.csv is left (neither a
/// partial one nor its temporary file), so the same command is not refused after: it
/// meets the full disk again, and says so.
#[test]
fn a_full_disk_leaves_no_sim_csv_to_refuse_a_rerun() {
    let dir = tmpdir("full-sim");
    let Some(_guard) = tmpfs_of(&dir, "16k") else {
        return;
    };
    let out_dir = dir.join("sim");
    let args = [
        "simulate",
        "--model",
        "resnet20,vgg16",
        "--methods",
        "ssgd,topk,powersgd,acpsgd,dgc",
        "--world-sizes",
        "8,16,32,64",
        "-q",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    for attempt in ["first run", "rerun"] {
        let out = Command::new(bin()).args(args).output().unwrap();
        disk_full(&out, "sim.csv", attempt);
        assert!(
            others(&out_dir, &[]).is_empty(),
            "{attempt}: left {:?}",
            others(&out_dir, &[])
        );
    }
}

/// fit into a results folder whose disk is full: no fits.csv or fits.json is left
/// behind, neither an empty one nor a temporary file; run again with room, fit writes
/// both whole.
#[test]
fn a_full_disk_leaves_no_empty_fits_csv() {
    let dir = tmpdir("full-fit");
    let Some(_guard) = tmpfs_of(&dir, "256k") else {
        return;
    };
    let d = dir.to_str().unwrap();
    let made = run(
        2,
        &[
            "micro-comm",
            "--collectives",
            "allreduce",
            "--max-bytes",
            "64KiB",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--quiet",
            "--out",
            d,
        ],
        120,
    );
    assert!(made.status.success(), "{}", err_text(&made));
    let inputs = [".gradcomp.lock", "micro_comm.csv", "run.json", "filler"];
    fill(&dir);
    let out = Command::new(bin()).args(["fit", d, "-q"]).output().unwrap();
    disk_full(&out, "fits.", "fit");
    assert!(
        others(&dir, &inputs).is_empty(),
        "left {:?}",
        others(&dir, &inputs)
    );
    std::fs::remove_file(dir.join("filler")).unwrap();
    let out = Command::new(bin()).args(["fit", d, "-q"]).output().unwrap();
    assert!(out.status.success(), "{}", err_text(&out));
    let (_, rows) = whole_rows(&dir.join("fits.csv"), "fit with room");
    assert!(!rows.is_empty());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("fits.json")).unwrap()).unwrap();
    assert_eq!(json["fits"].as_array().map(Vec::len), Some(rows.len()));
}

/// e2e with --trace on a 16 KiB tmpfs: the row reaches e2e.csv, the trace does not fit.
/// The trace's error is the run's (exit 1, no trace file or temporary left), and
/// run.json counts the case whose row is in e2e.csv.
#[test]
fn a_trace_that_does_not_fit_still_counts_the_case_whose_row_is_written() {
    let dir = tmpdir("full-trace");
    let Some(_guard) = tmpfs_of(&dir, "16k") else {
        return;
    };
    let trace = dir.join("trace.json");
    let out = run(
        2,
        &[
            "e2e",
            "--quiet",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--pipelining",
            "off",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--out",
            dir.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        120,
    );
    let err = disk_full(&out, "trace.json", "e2e --trace");
    let (_, rows) = whole_rows(&dir.join("e2e.csv"), "e2e --trace");
    assert_eq!(rows.len(), 1, "{err}");
    let meta = run_json(&dir);
    assert_eq!(meta["status"], "failed", "{meta}");
    assert!(meta["error"].as_str().unwrap().contains("trace.json"));
    assert_eq!(
        meta["cases_done"].as_u64(),
        Some(rows.len() as u64),
        "{meta}"
    );
    let left = others(&dir, &[".gradcomp.lock", "e2e.csv", "run.json"]);
    assert!(left.is_empty(), "left {left:?}");
}

// ---- item 7: small slips -------------------------------------------------------------

#[test]
fn small_slips_get_the_real_message() {
    let dir = tmpdir("slips");
    refused(
        2,
        &[
            "micro",
            "--methods",
            "topk",
            "--shape",
            "100",
            "--density",
            "-1",
        ],
        &["--density", "-1", "(0, 1]"],
    );
    refused(
        1,
        &[
            "micro-compress",
            "--methods",
            "topk",
            "--shape",
            "100",
            "--density",
            "-0.5,0.1",
        ],
        &["--density", "-0.5"],
    );
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let f = file.to_str().unwrap();
    refused(
        3,
        &["micro-comm", "--max-bytes", "64", "--out", f],
        &[f, "is not a directory"],
    );
    let sim = Command::new(bin())
        .args([
            "simulate",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--world-sizes",
            "18446744073709551615",
            "--out",
            d(&dir, "sim"),
        ])
        .output()
        .unwrap();
    assert_eq!(sim.status.code(), Some(2), "{}", err_text(&sim));
    assert!(
        err_text(&sim).contains("--world-sizes") && err_text(&sim).contains("at most"),
        "{}",
        err_text(&sim)
    );
}

// ---- item 4: the memory estimate is an upper bound --------------------------------------

#[test]
fn memory_estimate_bounds_the_measured_peak_of_every_benchmark() {
    let dir = tmpdir("mem-bound");
    let q = [
        "--iters",
        "2",
        "--warmup",
        "0",
        "--quiet",
        "--skip-memory-check",
    ];
    let runs: Vec<(usize, Vec<&str>)> = vec![
        (
            3,
            vec![
                "micro-comm",
                "--collectives",
                "allreduce",
                "--sizes",
                "64MiB",
            ],
        ),
        (
            3,
            vec![
                "micro-comm",
                "--collectives",
                "allgather",
                "--sizes",
                "64MiB",
            ],
        ),
        (
            4,
            vec![
                "micro-comm",
                "--collectives",
                "allgather",
                "--sizes",
                "32MiB",
            ],
        ),
        (
            3,
            vec![
                "micro-comm",
                "--collectives",
                "ring-allreduce",
                "--sizes",
                "64MiB",
            ],
        ),
        (
            3,
            vec![
                "micro-comm",
                "--collectives",
                "iallreduce-overlap",
                "--sizes",
                "64MiB",
            ],
        ),
        (
            2,
            vec![
                "micro-comm",
                "--collectives",
                "allreduce,allgather,ring-allreduce",
                "--sizes",
                "4,16MiB",
            ],
        ),
        (
            3,
            vec![
                "micro",
                "--methods",
                "dgc,topk,powersgd,qsgd",
                "--shape",
                "2048x2048",
            ],
        ),
        (
            1,
            vec![
                "micro-compress",
                "--methods",
                "dgc,sketch",
                "--shape",
                "4096x2048",
            ],
        ),
        (
            1,
            vec![
                "micro-compress",
                "--methods",
                "powersgd",
                "--model",
                "resnet50",
            ],
        ),
        (
            3,
            vec![
                "e2e",
                "--model",
                "resnet50",
                "--methods",
                "ssgd",
                "--fusion",
                "single",
                "--compute",
                "none",
                "--pipelining",
                "off",
            ],
        ),
        (
            3,
            vec![
                "e2e",
                "--model",
                "resnet50",
                "--methods",
                "dgc",
                "--compute",
                "none",
                "--pipelining",
                "off",
            ],
        ),
        (
            3,
            vec![
                "e2e",
                "--model",
                "resnet50",
                "--methods",
                "ssgd",
                "--collective",
                "allgather",
                "--compute",
                "none",
                "--pipelining",
                "off",
            ],
        ),
    ];
    let mut report = Vec::new();
    for (i, (np, args)) in runs.iter().enumerate() {
        let out_dir = dir.join(i.to_string());
        let mut a = args.clone();
        a.extend(q);
        a.extend(["--out", out_dir.to_str().unwrap()]);
        let out = run(*np, &a, 300);
        assert!(out.status.success(), "{a:?}: {}", err_text(&out));
        let meta = run_json(&out_dir);
        let est = meta["estimated_peak_bytes"].as_u64().unwrap();
        let rss = meta["peak_rss_bytes"].as_u64().expect("peak_rss_bytes");
        // The machine's load average at start and end, one per rank.
        for key in ["load_avg_start", "load_avg_end"] {
            let l = meta[key].as_array().expect(key);
            assert_eq!(l.len(), *np, "{key}: {l:?}");
            assert!(
                l.iter().all(|x| x.as_array().is_some_and(
                    |a| a.len() == 3 && a.iter().all(|v| v.as_f64().is_some_and(|v| v >= 0.0))
                )),
                "{key}: {l:?}"
            );
        }
        let line = format!(
            "-np {np} {}: estimate {:.0} MiB, peak RSS {:.0} MiB ({:.2})",
            args.join(" "),
            est as f64 / 1048576.0,
            rss as f64 / 1048576.0,
            rss as f64 / est as f64
        );
        eprintln!("{line}");
        report.push((rss <= est, line));
    }
    let over: Vec<&String> = report
        .iter()
        .filter(|(ok, _)| !ok)
        .map(|(_, l)| l)
        .collect();
    assert!(
        over.is_empty(),
        "the estimate is below the measured peak: {over:#?}"
    );
}

#[test]
fn the_issues_oversized_job_is_refused_with_a_margin() {
    // 4 ranks of a 1 GiB all-gather: about 9 GiB each (the issue's node: 22.3 GiB free,
    // estimated 20 GiB before, and the job drove free memory to 2.9 GiB).
    let cfg = gradcomp::config::parse(
        "[[micro-comm]]\ncollectives = [\"allgather\"]\nsizes = [\"1GiB\"]\niters = 2\nwarmup = 1\n",
        "x.toml",
    )
    .unwrap();
    let (per_rank, _) = cfg.estimated_peak_bytes(4);
    assert!(per_rank >= 9 << 30, "{per_rank}");
    let avail = (22.3 * (1u64 << 30) as f64) as u64;
    let err = cfg.check_memory(4, 4, avail).unwrap_err();
    assert!(err.contains("safety margin"), "{err}");
    // A run that fits only without the margin is refused too.
    let small = gradcomp::config::parse(
        "[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [\"256MiB\"]\n",
        "y.toml",
    )
    .unwrap();
    let (need, _) = small.estimated_peak_bytes(2);
    assert!(small.check_memory(2, 2, need * 2 * 105 / 100).is_err());
    assert!(small.check_memory(2, 2, need * 2 * 112 / 100).is_ok());
}

// ---- issue 30, item 4: absurd counts ---------------------------------------------------

/// Every numeric flag of every subcommand, fed its extremes (0, -1, i64::MAX, u64::MAX,
/// 1e10; 1e308, inf, NaN for the real-valued ones), and the TOML keys the same way: each
/// run either works or exits 2 with one line naming the flag, within 60 s. No panic
/// (101), abort (134) or hang. The runs start the binary alone (an MPI singleton, one
/// rank) so that some 300 of them take seconds, not minutes.
#[test]
fn every_numeric_flag_refuses_its_extremes() {
    let dir = tmpdir("extremes");
    let ints = [
        "0",
        "-1",
        "9223372036854775807",
        "18446744073709551615",
        "10000000000",
    ];
    let reals = ["0", "-1", "1e308", "inf", "NaN", "10000000000"];
    let mc = "micro-comm --sizes 4 --iters 2 --warmup 1";
    let micro =
        "micro --shape 64x64 --iters 2 --warmup 1 --methods topk,dgc,powersgd,acpsgd,sketch,qsgd";
    let e2e = "e2e --model resnet20 --methods ssgd,topk --iters 1 --warmup 0 --compute none --pipelining off";
    let conv = "converge --methods ssgd,topk,sketch --steps 3 --batch 8 --train-samples 256 --eval-samples 64 --hidden 16";
    let sim = "simulate --model resnet20 --methods ssgd,topk --world-sizes 8";
    // (base command, flag, values, flags the base sets that this flag replaces)
    let mut cases: Vec<(String, String)> = Vec::new();
    let mut add = |base: &str, flag: &str, values: &[&str]| {
        for v in values {
            // The flag replaces the base's own value of it.
            let mut words: Vec<&str> = base.split(' ').collect();
            if let Some(i) = words.iter().position(|w| *w == flag) {
                words.drain(i..=i + 1);
            }
            cases.push((format!("{} {flag}", words.join(" ")), v.to_string()));
        }
    };
    for f in [
        "--iters",
        "--warmup",
        "--seed",
        "--expect-ranks",
        "--stop-grace",
        "--rounds",
    ] {
        add(mc, f, &ints);
    }
    for f in ["--sizes", "--min-bytes", "--max-bytes"] {
        add("micro-comm --iters 2 --warmup 1", f, &ints);
    }
    add(mc, "--case-timeout", &reals);
    for f in [
        "--iters",
        "--warmup",
        "--sketch-rows",
        "--qsgd-levels",
        "--lowrank-rank",
        "--start-iter",
        "--warmup-steps-per-epoch",
    ] {
        add(micro, f, &ints);
    }
    for f in [
        "--density",
        "--sketch-cols-per-k",
        "--min-compression-rate",
        "--momentum",
        "--clip-norm",
    ] {
        add(micro, f, &reals);
    }
    add(
        "micro-compress --shape 64x64 --methods topk,sketch --iters 2 --warmup 1",
        "--iters",
        &ints,
    );
    add(
        "micro-compress --shape 64x64 --methods topk,sketch --iters 2 --warmup 1",
        "--warmup",
        &ints,
    );
    for f in [
        "--iters",
        "--warmup",
        "--batch",
        "--rounds",
        "--sketch-rows",
    ] {
        add(e2e, f, &ints);
    }
    add(&format!("{e2e} --min-time 0.01"), "--max-iters", &ints);
    add(&format!("{e2e} --min-time 0.01"), "--max-time", &reals);
    add(e2e, "--min-time", &reals);
    add(e2e, "--target-ci", &reals);
    for f in [
        "--steps",
        "--batch",
        "--eval-every",
        "--train-samples",
        "--eval-samples",
        "--hidden",
        "--sketch-rows",
    ] {
        add(conv, f, &ints);
    }
    for f in ["--lr", "--sgd-momentum", "--sketch-cols-per-k"] {
        add(conv, f, &reals);
    }
    for f in ["--world-sizes", "--ranks-per-node", "--batch"] {
        add(sim, f, &ints);
    }
    add(sim, "--tolerance", &reals);
    // The same counts from a bench config.
    let toml_cases = [
        (
            "micro-comm",
            "collectives = [\"allreduce\"]\nsizes = [4]",
            "iters",
        ),
        (
            "micro-comm",
            "collectives = [\"allreduce\"]\nsizes = [4]",
            "warmup",
        ),
        ("micro", "methods = [\"topk\"]\nshapes = [\"64\"]", "iters"),
        ("micro", "methods = [\"topk\"]\nshapes = [\"64\"]", "warmup"),
        (
            "micro-compress",
            "methods = [\"topk\"]\nshapes = [\"64\"]",
            "iters",
        ),
        (
            "e2e",
            "models = [\"resnet20\"]\nmethods = [\"ssgd\"]\ncompute = \"none\"",
            "iters",
        ),
        (
            "e2e",
            "models = [\"resnet20\"]\nmethods = [\"ssgd\"]\ncompute = \"none\"",
            "warmup",
        ),
    ];
    let mut jobs: Vec<(Vec<String>, String)> = cases
        .iter()
        .enumerate()
        .map(|(i, (cmd, v))| {
            let mut a: Vec<String> = cmd.split(' ').map(String::from).collect();
            let flag = a.last().unwrap().clone();
            a.push(v.clone());
            a.extend([
                "--out".into(),
                dir.join(format!("o{i}")).display().to_string(),
            ]);
            (a, flag)
        })
        .collect();
    for (i, (section, body, key)) in toml_cases.iter().enumerate() {
        for v in ["9223372036854775807", "10000000000"] {
            let path = dir.join(format!("c{i}-{v}.toml"));
            std::fs::write(&path, format!("[[{section}]]\n{body}\n{key} = {v}\n")).unwrap();
            jobs.push((
                vec![
                    "run".into(),
                    path.display().to_string(),
                    "--out".into(),
                    dir.join(format!("t{i}-{v}")).display().to_string(),
                ],
                format!("key '{key}'"),
            ));
        }
    }
    for (key, v) in [
        ("case_timeout_s", "1e300"),
        ("rounds", "9223372036854775807"),
    ] {
        let path = dir.join(format!("run-{key}.toml"));
        std::fs::write(
            &path,
            format!("[run]\n{key} = {v}\n[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [4]\niters = 2\n"),
        )
        .unwrap();
        jobs.push((
            vec![
                "run".into(),
                path.display().to_string(),
                "--out".into(),
                dir.join(key).display().to_string(),
            ],
            format!("key '{key}'"),
        ));
    }
    let jobs = std::sync::Mutex::new(jobs);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| loop {
                let Some((args, flag)) = jobs.lock().unwrap().pop() else {
                    break;
                };
                let child = Command::new(bin())
                    .args(&args)
                    .env_remove("SLURM_NTASKS")
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                let t0 = Instant::now();
                let mut child = child;
                let status = loop {
                    if let Some(st) = child.try_wait().unwrap() {
                        break Some(st);
                    }
                    if t0.elapsed() > Duration::from_secs(60) {
                        let _ = child.kill();
                        break None;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                };
                let out = child.wait_with_output().unwrap();
                let lines = our_lines(&out);
                let verdict = match status.and_then(|s| s.code()) {
                    None => Some("did not end within 60 s, or died by a signal".to_string()),
                    Some(0) => None,
                    Some(2) if lines.len() == 1 && lines[0].contains(flag.as_str()) => None,
                    Some(2) => Some(format!("exit 2 without one line naming {flag}")),
                    Some(c) => Some(format!("exit {c}")),
                };
                if let Some(v) = verdict {
                    failures.lock().unwrap().push(format!(
                        "{}: {v}: {}",
                        args[..args.len() - 2].join(" "),
                        err_text(&out)
                            .lines()
                            .take(3)
                            .collect::<Vec<_>>()
                            .join(" | ")
                    ));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} extreme value(s) mishandled:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---- issue 30, items 1 and 2: converge stops cleanly; run.json follows the cases --------

/// converge.csv's rows per case_id, in file order: (status, step) of each row.
fn converge_cases(path: &Path) -> Vec<(String, Vec<(String, u64)>)> {
    let (h, rows) = read_csv(path);
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let (id, st, step) = (col("case_id"), col("status"), col("step"));
    let mut out: Vec<(String, Vec<(String, u64)>)> = Vec::new();
    for r in rows {
        assert_eq!(r.len(), h.len(), "{}: a torn row", path.display());
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
        if done >= 1 && csv.exists() && converge_cases(&csv).len() > done as usize {
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

/// The memory estimate bounds the measured peak (VmHWM, run.json `peak_rss_bytes`) of
/// every method over a grid of its parameters, at 4 ranks (the all-gather methods
/// receive every rank's wire): densities up to dense for the sparse methods, ranks up to
/// 256 for the low-rank ones, Count Sketch sizes, QSGD's levels up to 2^24 - 1 (26 bits
/// per element on the wire). A 4096 x 4096 tensor (64 MiB) so that the method's own
/// buffers, not the MPI library's, decide the peak.
#[test]
fn memory_estimate_bounds_every_method_over_a_grid_of_parameters() {
    let _t = timed();
    let dir = tmpdir("mem-grid");
    let grid: Vec<(&str, Vec<&str>)> = vec![
        ("ssgd", vec![]),
        ("signsgd", vec![]),
        ("signsgd-mv", vec![]),
        ("marsit", vec![]),
        ("topk", vec!["--density", "0.001"]),
        ("topk", vec!["--density", "0.3"]),
        ("topk", vec!["--density", "1"]),
        ("dgc", vec!["--density", "0.01"]),
        ("dgc", vec!["--density", "0.5"]),
        ("powersgd", vec!["--lowrank-rank", "4"]),
        ("powersgd", vec!["--lowrank-rank", "256"]),
        ("acpsgd", vec!["--lowrank-rank", "256"]),
        (
            "sketch",
            vec![
                "--density",
                "0.01",
                "--sketch-rows",
                "5",
                "--sketch-cols-per-k",
                "20",
            ],
        ),
        ("qsgd", vec!["--qsgd-levels", "1"]),
        ("qsgd", vec!["--qsgd-levels", "16777215"]),
    ];
    let np = common::max_np().unwrap_or(4).min(4);
    let mut runs: Vec<(usize, &str, &str, Vec<&str>)> = grid
        .iter()
        .map(|(m, p)| (np, *m, "4096x4096", p.clone()))
        .collect();
    // Every rank's QSGD codes at 26 bits per element, received by each of 8 ranks: 340 MiB
    // measured where the estimate without the received wires said 320.
    if common::max_np().is_none_or(|m| m >= 8) {
        runs.push((8, "qsgd", "2048x4096", vec!["--qsgd-levels", "16777215"]));
    }
    for (i, (np, method, shape, params)) in runs.iter().enumerate() {
        let np = *np;
        let out = dir.join(format!("g{i}-{method}"));
        let o = out.to_str().unwrap();
        let mut args = vec![
            "micro",
            "--methods",
            method,
            "--shape",
            shape,
            "--iters",
            "2",
            "--warmup",
            "1",
            "--quiet",
            "--skip-memory-check",
            "--out",
            o,
        ];
        args.extend(params.iter().copied());
        let r = run(np, &args, 300);
        assert_eq!(
            r.status.code(),
            Some(0),
            "{method} {params:?}: {}",
            err_text(&r)
        );
        let m = run_json(&out);
        let (est, rss) = (
            m["estimated_peak_bytes"].as_u64().unwrap_or(0),
            m["peak_rss_bytes"].as_u64().unwrap_or(u64::MAX),
        );
        assert!(
            rss <= est,
            "{method} {params:?} at {np} ranks: measured peak {rss} B above the estimate {est} B"
        );
        eprintln!(
            "{method} {params:?}: peak {} MiB of {} MiB estimated",
            rss >> 20,
            est >> 20
        );
    }
}

/// A job cancelled right after it starts (a loaded node: the signal arrives while MPI
/// starts, or while the output directory is being set up) ends like any other stopped
/// run: exit 143, run.json `interrupted` with `cases_done: 0`, the resume command. The
/// stop handlers are installed before MPI_Init; before, such a signal killed the ranks
/// with no record at all. Each rank is signalled 0, 30 or 150 ms after its handlers are
/// in (`catches_sigterm`): the first instants after exec, before `main` runs, are every
/// program's (a CI run once signalled a rank there and it died of SIGTERM).
#[test]
fn a_signal_during_start_up_leaves_an_interrupted_record() {
    let _t = timed();
    let dir = tmpdir("startup-signal");
    for (i, delay_ms) in [0u64, 30, 150].into_iter().enumerate() {
        let out = dir.join(format!("s{i}"));
        let o = out.to_str().unwrap();
        let child = spawn(
            2,
            &["micro-comm", "--sizes", "4", "--iters", "5", "--out", o],
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
    let child = spawn(2, &strs(&args));
    let csv = out.join("micro_comm.csv");
    let t0 = Instant::now();
    while common::rows_in(&csv) < 5 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no 5 rows in 120 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for p in rank_pids(o) {
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

// ---- issue 30, item 6: the smaller ones --------------------------------------------------

/// `gradcomp ARGS` alone (an MPI singleton), bounded; for checks that need no second rank.
fn alone(args: &[&str]) -> Output {
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
fn refused_alone(args: &[&str], words: &[&str]) -> String {
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

/// Slips that used to be found late or not at all: a `--trace` into a missing folder
/// (found only after the first case ran), a CSV that is a directory or a link to
/// /dev/null under `--resume` (exit 1), `--fusion 0B` (ran as `none` without a word),
/// `simulate --world-sizes 8,8` (duplicate rows), a config of 200000 sizes (seconds of
/// CPU per rank before the refusal), a 3 MB key (echoed twice in a 6 MB line), and
/// `simulate -q` (refused, though -q was a global flag).
#[test]
fn small_slips_of_issue_30_are_refused_up_front_and_clearly() {
    let dir = tmpdir("slips-30");
    let e2e = |extra: &[&str], out: &Path| -> Vec<String> {
        let mut a: Vec<String> = [
            "e2e",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--compute",
            "none",
            "--pipelining",
            "off",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(["--out".to_string(), out.display().to_string()]);
        a
    };
    let t = dir.join("t");
    refused_alone(
        &strs(&e2e(&["--trace", "/nonexistent/dir/t.json"], &t)),
        &["--trace", "/nonexistent/dir", "does not exist"],
    );
    assert!(!t.join("e2e.csv").exists(), "a case ran before the refusal");

    for (name, make) in [
        (
            "dir",
            Box::new(|p: &Path| std::fs::create_dir_all(p).unwrap()) as Box<dyn Fn(&Path)>,
        ),
        (
            "null",
            Box::new(|p: &Path| std::os::unix::fs::symlink("/dev/null", p).unwrap()),
        ),
    ] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        make(&d.join("micro_comm.csv"));
        refused_alone(
            &[
                "micro-comm",
                "--sizes",
                "4",
                "--iters",
                "2",
                "--out",
                d.to_str().unwrap(),
                "--resume",
            ],
            &["micro_comm.csv", "not a regular file"],
        );
    }

    refused_alone(
        &strs(&e2e(&["--fusion", "0B"], &dir.join("f"))),
        &["--fusion", "0B", "none"],
    );
    refused_alone(
        &[
            "converge",
            "--methods",
            "ssgd",
            "--fusion",
            "0",
            "--out",
            dir.join("cf").to_str().unwrap(),
        ],
        &["--fusion", "0 bytes"],
    );
    refused_alone(
        &[
            "simulate",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--world-sizes",
            "8,8",
            "--out",
            dir.join("s").to_str().unwrap(),
        ],
        &["--world-sizes", "'8' appears twice"],
    );

    let big = dir.join("big.toml");
    let sizes: Vec<String> = (1..=200_000).map(|i| (4 * i).to_string()).collect();
    std::fs::write(
        &big,
        format!(
            "[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [{}]\n",
            sizes.join(",")
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    refused_alone(
        &[
            "run",
            big.to_str().unwrap(),
            "--out",
            dir.join("b").to_str().unwrap(),
        ],
        &["key 'sizes'", "200000 entries"],
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "{:?} to refuse",
        t0.elapsed()
    );

    let key = dir.join("key.toml");
    std::fs::write(
        &key,
        format!(
            "[[micro-comm]]\ncollectives = [\"allreduce\"]\n{} = 1\n",
            "k".repeat(3 << 20)
        ),
    )
    .unwrap();
    let line = refused_alone(
        &[
            "run",
            key.to_str().unwrap(),
            "--out",
            dir.join("k").to_str().unwrap(),
        ],
        &["key.toml", "line 3", "left out"],
    );
    assert!(line.len() < 2000, "{} bytes", line.len());

    let sim = alone(&[
        "simulate",
        "-q",
        "--model",
        "resnet20",
        "--methods",
        "ssgd",
        "--out",
        dir.join("q").to_str().unwrap(),
    ]);
    assert_eq!(sim.status.code(), Some(0), "{}", err_text(&sim));
    assert!(!err_text(&sim).contains("[gradcomp]"), "{}", err_text(&sim));
}

// ---- issue 30, item 3: method parameters count in the memory estimate --------------------

/// The memory check ignored method parameters: `micro --methods sketch --shape 1024x1024
/// --density 0.01 --sketch-rows 50 --sketch-cols-per-k 100` was estimated at 96 MiB and
/// peaked at 529 MiB, and a sketch of terabytes passed the check and aborted in its
/// allocation; `converge` had no check. Now run.json's estimate bounds the measured peak
/// for those runs, and what the node cannot hold is refused with exit 2 before anything
/// is allocated.
#[test]
fn method_parameters_count_in_the_memory_estimate() {
    let _t = timed();
    let dir = tmpdir("mem-params");
    let bound = |out: &Path, what: &str| {
        let m = run_json(out);
        let (est, rss) = (
            m["estimated_peak_bytes"].as_u64().unwrap_or(0),
            m["peak_rss_bytes"].as_u64().unwrap_or(u64::MAX),
        );
        assert!(
            rss <= est,
            "{what}: measured peak {rss} B above the estimate {est} B"
        );
    };
    for (rows, cols) in [("50", "100"), ("3", "10"), ("9", "300")] {
        let out = dir.join(format!("sk-{rows}-{cols}"));
        let o = out.to_str().unwrap();
        let r = run(
            2,
            &[
                "micro",
                "--methods",
                "sketch",
                "--shape",
                "1024x1024",
                "--density",
                "0.01",
                "--sketch-rows",
                rows,
                "--sketch-cols-per-k",
                cols,
                "--iters",
                "2",
                "--warmup",
                "0",
                "--quiet",
                "--skip-memory-check",
                "--out",
                o,
            ],
            300,
        );
        assert_eq!(r.status.code(), Some(0), "{}", err_text(&r));
        bound(&out, &format!("sketch rows {rows}, cols/k {cols}"));
    }
    refused(
        1,
        &[
            "micro",
            "--methods",
            "sketch",
            "--shape",
            "4096x4096",
            "--density",
            "0.1",
            "--sketch-rows",
            "1000",
            "--sketch-cols-per-k",
            "1000",
            "--out",
            dir.join("huge").to_str().unwrap(),
        ],
        &[
            "micro sketch 4096x4096",
            "needs up to",
            "--skip-memory-check",
        ],
    );
    let out = dir.join("cv");
    let r = run(
        2,
        &[
            "converge",
            "--methods",
            "ssgd,sketch",
            "--steps",
            "20",
            "--hidden",
            "256,256",
            "--quiet",
            "--skip-memory-check",
            "--out",
            out.to_str().unwrap(),
        ],
        300,
    );
    assert_eq!(r.status.code(), Some(0), "{}", err_text(&r));
    bound(&out, "converge");
    refused(
        1,
        &[
            "converge",
            "--methods",
            "ssgd",
            "--hidden",
            "65536,65536,65536",
            "--out",
            dir.join("cv-huge").to_str().unwrap(),
        ],
        &["converge ssgd", "needs up to", "--skip-memory-check"],
    );
}
