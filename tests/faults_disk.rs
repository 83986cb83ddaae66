//! A full disk (issue 19 item 6, issue 52 item 4): the first error reported, exit 1, and
//! every result file (CSV rows, converge.csv, sim.csv, fits.csv, traces) left whole.
//! Mounts a small tmpfs, so these tests need root; without it they say so and pass.
//!
//! `GRADCOMP_TEST_BIN=/path/to/gradcomp` runs these tests against another build (to see
//! them fail on an older revision). The helpers these files share are in
//! tests/common/faults.rs.

mod common;
use common::faults::{bin, case_ids, err_text, our_lines, run};
use common::{read_csv, run_json, tmpdir};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

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
