//! Helpers for integration tests: launch the release binary under mpirun.
#![allow(dead_code)]

pub mod catalogue;
pub mod faults;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_gradcomp");

/// The launcher: $GRADCOMP_MPIRUN or `mpirun`.
pub fn mpirun_cmd() -> String {
    std::env::var("GRADCOMP_MPIRUN").unwrap_or_else(|_| "mpirun".into())
}

pub fn is_open_mpi(launcher: &str) -> bool {
    Command::new(launcher)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).contains("Open MPI")
                || String::from_utf8_lossy(&o.stderr).contains("Open MPI")
        })
        .unwrap_or(false)
}

/// Run `gradcomp ARGS` on `np` ranks; returns the process output.
pub fn mpirun(np: usize, args: &[&str]) -> Output {
    mpirun_env(np, args, &[])
}

/// A fresh Open MPI session folder base for one launch (`OMPI_MCA_orte_tmpdir_base`):
/// Open MPI 4.1's mpirun fails with "mkdir ... /tmp/ompi.HOST.UID: File exists" when two
/// launches create the shared session folder at the same moment (seen in tests/faults_*.rs,
/// whose tests launch side by side). Other MPI libraries ignore the variable.
pub fn ompi_tmpdir() -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("gradcomp-ompi-{}-{n}", std::process::id()));
    let _ = std::fs::create_dir_all(&d);
    d
}

/// One MPI job at a time per test binary: on 2 cores, concurrent oversubscribed jobs
/// busy-poll each other, take several times longer together than one after the other,
/// and stretch each other's small collectives into scheduler slices (a fit of one such
/// run priced 256 B-4 KiB all-reduces at 6-8 ms). Held while the job runs.
pub fn one_mpi_job() -> std::sync::MutexGuard<'static, ()> {
    static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_JOB.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`mpirun`] with extra environment variables for the launcher and the ranks, one job
/// at a time ([`one_mpi_job`]).
pub fn mpirun_env(np: usize, args: &[&str], env: &[(&str, &str)]) -> Output {
    let _one = one_mpi_job();
    let launcher = mpirun_cmd();
    let mut cmd = Command::new(&launcher);
    cmd.envs(env.iter().copied());
    if is_open_mpi(&launcher) {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_orte_tmpdir_base", ompi_tmpdir());
        cmd.args(["--oversubscribe", "--bind-to", "none"]);
    }
    cmd.env_remove("SLURM_NTASKS");
    cmd.arg("-np").arg(np.to_string()).arg(BIN).args(args);
    cmd.output()
        .expect("cannot launch mpirun: is MPI installed? (make setup)")
}

/// `DIR/run.json`, parsed.
pub fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Fail with the full output when the run did not succeed.
pub fn assert_ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
}

/// A fresh, empty temporary directory for one test.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gradcomp-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The project root (for bench-configs/ and docs/).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Read a CSV into (header, rows).
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_csv(path, &bytes)
}

/// Read the rows a running job has finished writing to a CSV: the lines up to the last
/// newline. A poll can land while a row is half written (a CI run read a 3-field tail
/// of a 40-column converge.csv); that row is not data yet.
pub fn read_csv_written(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(end);
    parse_csv(path, &bytes)
}

fn parse_csv(path: &Path, bytes: &[u8]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_reader(bytes);
    let header = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|rec| {
            rec.unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .iter()
                .map(String::from)
                .collect()
        })
        .collect();
    (header, rows)
}

/// Columns documented for `file` in docs/csv-schema.md: the rows of the table under the
/// heading that names the file, first cell in backticks.
pub fn documented_columns(file: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/csv-schema.md")).unwrap();
    let mut cols = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        if line.starts_with("## ") {
            inside = line.contains(file);
            continue;
        }
        if inside && line.starts_with("| `") {
            let cell = line.split('|').nth(1).unwrap().trim();
            cols.push(cell.trim_matches('`').to_string());
        }
    }
    assert!(
        !cols.is_empty(),
        "docs/csv-schema.md documents no columns for {file}"
    );
    cols
}

/// $GRADCOMP_MAX_NP: the most ranks a test may start (unset: no cap). CI sets it to the
/// core count for MPICH, whose oversubscribed ranks busy-poll.
pub fn max_np() -> Option<usize> {
    std::env::var("GRADCOMP_MAX_NP")
        .ok()
        .and_then(|v| v.parse().ok())
}

/// True (with a note) when `np` exceeds $GRADCOMP_MAX_NP: the caller skips that case.
pub fn skip_np(np: usize) -> bool {
    match max_np() {
        Some(m) if np > m => {
            eprintln!("skipping the -np {np} case: GRADCOMP_MAX_NP={m}");
            true
        }
        _ => false,
    }
}

/// Bad input: `gradcomp ARGS` on `np` ranks exits 2 with exactly one `gradcomp:` line
/// that contains every word of `words`. Returns that line.
pub fn assert_refused(np: usize, args: &[&str], words: &[&str]) -> String {
    let out = mpirun(np, args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    let err = stderr(&out);
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("gradcomp:")).collect();
    assert_eq!(
        ours.len(),
        1,
        "{args:?}: exactly one message expected, got:\n{err}"
    );
    for w in words {
        assert!(
            ours[0].contains(w),
            "{args:?}: '{w}' missing from: {}",
            ours[0]
        );
    }
    ours[0].to_string()
}

/// Data rows (complete lines, each ended by its newline) in a CSV file so far.
pub fn rows_in(path: &Path) -> usize {
    std::fs::read(path)
        .map(|s| s.iter().filter(|&&b| b == b'\n').count().saturating_sub(1))
        .unwrap_or(0)
}

/// The rule of docs/methods.md written again: dense S-SGD's final (loss, accuracy) over
/// its three seeds widened by t(0.95, 2) = 2.920 sample sds x sqrt(1 + 1/3).
pub fn dense_target(finals: &[(f64, f64)]) -> (f64, f64) {
    assert_eq!(finals.len(), 3, "three dense seeds");
    let n = 3.0;
    let ml = finals.iter().map(|f| f.0).sum::<f64>() / n;
    let ma = finals.iter().map(|f| f.1).sum::<f64>() / n;
    let sl = (finals.iter().map(|f| (f.0 - ml).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let sa = (finals.iter().map(|f| (f.1 - ma).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let k = 2.920 * (1.0 + 1.0 / n).sqrt();
    (ml + k * sl, ma - k * sa)
}

/// Steps to the target: the first evaluation meeting both, else None.
pub fn steps_to_target(curve: &[(u64, f64, f64)], t: (f64, f64)) -> Option<u64> {
    curve
        .iter()
        .find(|(_, l, a)| *l <= t.0 && *a >= t.1)
        .map(|c| c.0)
}
