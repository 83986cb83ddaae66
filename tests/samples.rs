//! samples.csv under real MPI: one row per (case, rank, timed iteration), case_ids that
//! join the summary files, the summary statistics recomputed from the samples exactly
//! (per iteration the max over ranks, then the statistic), --resume without duplicates,
//! and the switch that turns it off.

mod common;
use common::faults::{freeze_at_rows, signal, thaw};
use common::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Every kind in one run: micro-comm (plain and overlap), micro-compress, micro, e2e.
/// Odd and even iteration counts, so the median is both a middle value and an
/// interpolation.
const CONFIG: &str = r#"
[run]
seed = 3

[[micro-comm]]
collectives = ["allreduce", "iallreduce-overlap"]
sizes = [64, 4096]
iters = 7
warmup = 2

[[micro-compress]]
methods = ["topk"]
shapes = ["64x48"]
iters = 5
warmup = 1

[[micro]]
methods = ["topk", "powersgd"]
shapes = ["64x48"]
iters = 4
warmup = 1

[[e2e]]
models = ["resnet20"]
methods = ["ssgd", "topk"]
fusion = ["single"]
pipelining = [false, true]
iters = 6
warmup = 1
"#;

const NP: usize = 3;

/// A CSV as a list of rows keyed by column name.
fn table(path: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let (h, rows) = read_csv(path);
    let rows = rows
        .into_iter()
        .map(|r| h.iter().cloned().zip(r).collect())
        .collect();
    (h, rows)
}

fn num(row: &HashMap<String, String>, col: &str) -> f64 {
    row[col]
        .parse()
        .unwrap_or_else(|e| panic!("{col} = '{}': {e}", row[col]))
}

/// The statistics of the summary files, computed as src/measure/stats.rs does: sorted
/// ascending, quantiles by linear interpolation between closest ranks (type 7), mean
/// as the sum in sorted order over n.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Per timed iteration, the max over ranks of `col` in the samples of one case, sorted.
fn per_iteration_max(samples: &[&HashMap<String, String>], col: &str) -> Vec<f64> {
    let mut by_iter: BTreeMap<usize, f64> = BTreeMap::new();
    for s in samples {
        let it: usize = s["iter"].parse().unwrap();
        let v = num(s, col);
        let e = by_iter.entry(it).or_insert(f64::NEG_INFINITY);
        *e = e.max(v);
    }
    let mut v: Vec<f64> = by_iter.into_values().collect();
    v.sort_by(f64::total_cmp);
    v
}

fn run_config(dir: &Path, extra: &[&str]) -> std::process::Output {
    let cfg = dir.join("samples.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let out = dir.join("out");
    let mut args = vec![
        "run",
        cfg.to_str().unwrap(),
        "--samples",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    mpirun(NP, &args)
}

/// The time columns each kind fills (docs/csv-schema.md, "samples.csv").
fn filled(kind: &str, overlap: bool) -> BTreeSet<&'static str> {
    let v: &[&str] = match kind {
        "e2e" => &[
            "iter_s",
            "fwd_s",
            "bwd_s",
            "pack_s",
            "compress_s",
            "comm_s",
            "decompress_s",
            "exposed_s",
            "bwd_sync_s",
            "last_bucket_s",
            "host_compress_s",
            "host_decompress_s",
        ],
        "micro-comm" if overlap => &["time_s", "t_pure_s", "t_cpu_s"],
        "micro-comm" => &["time_s"],
        "micro-compress" => &["compress_s", "feedback_s", "decompress_s", "total_s"],
        "micro" => &[
            "compress_s",
            "feedback_s",
            "comm_s",
            "decompress_s",
            "total_s",
        ],
        k => panic!("unknown kind {k}"),
    };
    v.iter().copied().collect()
}

#[test]
fn samples_hold_every_rank_and_iteration_and_reproduce_the_summaries() {
    if skip_np(NP) {
        return;
    }
    let dir = tmpdir("samples");
    assert_ok(&run_config(&dir, &[]));
    let out = dir.join("out");
    let (header, samples) = table(&out.join("samples.csv"));
    assert_eq!(header, documented_columns("samples.csv"));
    let key_cols = [
        "schema_version",
        "run_id",
        "case_id",
        "kind",
        "rank",
        "iter",
    ];
    assert_eq!(&header[..6], key_cols);
    let time_cols: Vec<&str> = header[6..].iter().map(String::as_str).collect();
    assert!(time_cols.iter().all(|c| c.ends_with("_s")), "{time_cols:?}");

    // Every value finite and >= 0; no (case_id, rank, iter) twice.
    let mut keys = BTreeSet::new();
    for s in &samples {
        assert_eq!(s["schema_version"], "1");
        for c in &time_cols {
            if !s[*c].is_empty() {
                let v = num(s, c);
                assert!(v.is_finite() && v >= 0.0, "{c} = {v} in {s:?}");
            }
        }
        let rank: usize = s["rank"].parse().unwrap();
        assert!(rank < NP);
        assert!(
            keys.insert((s["case_id"].clone(), rank, s["iter"].clone())),
            "duplicate sample {s:?}"
        );
    }
    let mut by_case: HashMap<&str, Vec<&HashMap<String, String>>> = HashMap::new();
    for s in &samples {
        by_case.entry(s["case_id"].as_str()).or_default().push(s);
    }

    let mut summary_ids = BTreeSet::new();
    for (file, kind) in [
        ("micro_comm.csv", "micro-comm"),
        ("micro_compress.csv", "micro-compress"),
        ("micro.csv", "micro"),
        ("e2e.csv", "e2e"),
    ] {
        let (_, rows) = table(&out.join(file));
        assert!(!rows.is_empty(), "{file}");
        for row in &rows {
            let id = row["case_id"].as_str();
            assert!(summary_ids.insert(id.to_string()), "{file}: {id} twice");
            let s = by_case
                .get(id)
                .unwrap_or_else(|| panic!("{file}: case {id} has no samples"));
            let iters: usize = if kind == "e2e" {
                row["iters_run"].parse().unwrap()
            } else {
                row["iters"].parse().unwrap()
            };
            // Exactly ranks x timed iterations, every (rank, iter) once.
            assert_eq!(s.len(), NP * iters, "{file} {id}");
            let grid: BTreeSet<(String, String)> = s
                .iter()
                .map(|x| (x["rank"].clone(), x["iter"].clone()))
                .collect();
            let want: BTreeSet<(String, String)> = (0..NP)
                .flat_map(|r| (0..iters).map(move |i| (r.to_string(), i.to_string())))
                .collect();
            assert_eq!(grid, want, "{file} {id}");
            let overlap = row
                .get("collective")
                .is_some_and(|c| c == "iallreduce-overlap");
            let expect = filled(kind, overlap);
            for x in s {
                assert_eq!(x["kind"], kind);
                assert_eq!(x["run_id"], row["run_id"]);
                let got: BTreeSet<&str> = time_cols
                    .iter()
                    .copied()
                    .filter(|c| !x[*c].is_empty())
                    .collect();
                assert_eq!(got, expect, "{file} {id}: filled columns");
            }
            // Each rank's own times, not the max over ranks: somewhere the ranks differ.
            let mut per_rank: HashMap<(String, &str), BTreeSet<String>> = HashMap::new();
            for x in s {
                for c in &expect {
                    per_rank
                        .entry((x["iter"].clone(), c))
                        .or_default()
                        .insert(x[*c].clone());
                }
            }
            assert!(
                per_rank.values().any(|v| v.len() > 1),
                "{file} {id}: every rank has the same times (the max over ranks?)"
            );
            // The summary is computed from the same data: per iteration the max over
            // ranks, then the statistic over iterations. Bit for bit.
            let stat = |col: &str| per_iteration_max(s, col);
            let median = |col: &str| quantile(&stat(col), 0.5);
            match kind {
                "e2e" => {
                    let it = stat("iter_s");
                    assert_eq!(num(row, "iter_s"), quantile(&it, 0.5), "{id} iter_s");
                    assert_eq!(num(row, "iter_min_s"), it[0], "{id} iter_min_s");
                    assert_eq!(num(row, "iter_p95_s"), quantile(&it, 0.95), "{id}");
                    for c in expect.iter().filter(|c| **c != "iter_s") {
                        assert_eq!(num(row, c), median(c), "{id} {c}");
                    }
                }
                "micro-comm" => {
                    let t = stat("time_s");
                    assert_eq!(num(row, "median_s"), quantile(&t, 0.5), "{id}");
                    assert_eq!(num(row, "min_s"), t[0], "{id}");
                    assert_eq!(num(row, "max_s"), t[t.len() - 1], "{id}");
                    assert_eq!(num(row, "p95_s"), quantile(&t, 0.95), "{id}");
                    let mean = t.iter().sum::<f64>() / t.len() as f64;
                    assert_eq!(num(row, "mean_s"), mean, "{id}");
                    if overlap {
                        assert_eq!(num(row, "t_overall_s"), quantile(&t, 0.5));
                        assert_eq!(num(row, "t_pure_s"), median("t_pure_s"), "{id}");
                        assert_eq!(num(row, "t_cpu_s"), median("t_cpu_s"), "{id}");
                    }
                }
                _ => {
                    for c in ["compress_s", "feedback_s", "decompress_s", "total_s"] {
                        assert_eq!(num(row, c), median(c), "{file} {id} {c}");
                    }
                    assert_eq!(num(row, "compress_min_s"), stat("compress_s")[0]);
                    assert_eq!(num(row, "total_min_s"), stat("total_s")[0]);
                    if kind == "micro" {
                        assert_eq!(num(row, "comm_s"), median("comm_s"), "{id}");
                    }
                }
            }
        }
    }
    // The join key: the samples' case_ids are exactly the summaries'.
    let sample_ids: BTreeSet<String> = by_case.keys().map(|k| k.to_string()).collect();
    assert_eq!(sample_ids, summary_ids);
}

/// samples.csv is written only when asked (`--samples`, `[run] samples = true`);
/// `--no-samples` overrides the config.
#[test]
fn samples_are_written_only_when_asked() {
    if skip_np(2) {
        return;
    }
    let dir = tmpdir("no-samples");
    let comm = |out: &Path, extra: &[&str]| {
        let mut args = vec!["micro-comm", "--sizes", "64", "--iters", "3", "--quiet"];
        args.extend_from_slice(extra);
        args.extend(["--out", out.to_str().unwrap()]);
        assert_ok(&mpirun(2, &args));
        assert!(out.join("micro_comm.csv").exists());
        out.join("samples.csv").exists()
    };
    assert!(!comm(&dir.join("default"), &[]));
    assert!(!comm(&dir.join("off"), &["--no-samples"]));
    assert!(comm(&dir.join("on"), &["--samples"]));
    let both = mpirun(
        2,
        &["micro-comm", "--sizes", "64", "--samples", "--no-samples"],
    );
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
    assert!(stderr(&both).contains("--samples and --no-samples"));
    // [run] samples = true, and --no-samples over it.
    let cfg = dir.join("on.toml");
    std::fs::write(
        &cfg,
        "[run]\nsamples = true\n\n[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [64]\niters = 3\n",
    )
    .unwrap();
    let run = |out: &Path, extra: &[&str]| {
        let mut args = vec!["run", cfg.to_str().unwrap(), "--quiet"];
        args.extend_from_slice(extra);
        args.extend(["--out", out.to_str().unwrap()]);
        assert_ok(&mpirun(2, &args));
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
        let on = out.join("samples.csv").exists();
        assert_eq!(meta["config"]["samples"], on);
        on
    };
    assert!(run(&dir.join("toml"), &[]));
    assert!(!run(&dir.join("toml-off"), &["--no-samples"]));
}

/// (case_id, rank, iter) of every sample row, and the case_ids of the summary files.
fn sample_keys(out: &Path) -> (Vec<(String, String, String)>, BTreeSet<String>) {
    let (_, samples) = table(&out.join("samples.csv"));
    let keys = samples
        .iter()
        .map(|s| (s["case_id"].clone(), s["rank"].clone(), s["iter"].clone()))
        .collect();
    let mut ids = BTreeSet::new();
    for f in [
        "micro_comm.csv",
        "micro_compress.csv",
        "micro.csv",
        "e2e.csv",
    ] {
        if out.join(f).exists() {
            let (_, rows) = table(&out.join(f));
            ids.extend(rows.iter().map(|r| r["case_id"].clone()));
        }
    }
    (keys, ids)
}

/// The rows a complete run has: every case's ranks x iterations, each once.
fn assert_complete(out: &Path, what: &str) {
    let (keys, ids) = sample_keys(out);
    let unique: BTreeSet<_> = keys.iter().cloned().collect();
    assert_eq!(unique.len(), keys.len(), "{what}: duplicate samples");
    let cases: BTreeSet<String> = keys.iter().map(|k| k.0.clone()).collect();
    assert_eq!(cases, ids, "{what}: samples and summaries name other cases");
}

/// A case interrupted after its samples were written but before its summary row (the
/// summary row removed by hand here, as a kill at that moment would leave it; a partial
/// sample row at the end too): `--resume` runs it again and its samples are in the
/// file once, with the new run's run_id.
#[test]
fn resume_reruns_a_case_without_a_summary_row_and_keeps_its_samples_once() {
    if skip_np(NP) {
        return;
    }
    let dir = tmpdir("samples-resume");
    assert_ok(&run_config(&dir, &[]));
    let out = dir.join("out");
    assert_complete(&out, "first run");
    let (before, _) = sample_keys(&out);
    // Drop the last micro-comm summary row (its samples stay).
    let mc = out.join("micro_comm.csv");
    let text = std::fs::read_to_string(&mc).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let dropped = lines.pop().unwrap().to_string();
    std::fs::write(&mc, lines.join("\n") + "\n").unwrap();
    let dropped_id = dropped.split(',').nth(2).unwrap().to_string();
    let mut samples = std::fs::OpenOptions::new()
        .append(true)
        .open(out.join("samples.csv"))
        .unwrap();
    std::io::Write::write_all(&mut samples, b"1,x,abc,micro-comm,0,").unwrap();
    drop(samples);
    std::thread::sleep(std::time::Duration::from_millis(1100)); // a new run_id
    let again = run_config(&dir, &["--resume"]);
    assert_ok(&again);
    assert!(
        stderr(&again).contains("samples.csv") && stderr(&again).contains("dropping"),
        "{}",
        stderr(&again)
    );
    assert_complete(&out, "after --resume");
    let (after, _) = sample_keys(&out);
    assert_eq!(
        after.iter().cloned().collect::<BTreeSet<_>>(),
        before.iter().cloned().collect::<BTreeSet<_>>()
    );
    assert_eq!(after.len(), before.len());
    // The re-run case's samples come from the resumed run, the others from the first.
    let (_, rows) = table(&out.join("samples.csv"));
    let run_ids: BTreeSet<(bool, String)> = rows
        .iter()
        .map(|r| (r["case_id"] == dropped_id, r["run_id"].clone()))
        .collect();
    assert_eq!(run_ids.len(), 2, "{run_ids:?}");
    let (_, mc_rows) = table(&mc);
    let new_id = mc_rows.last().unwrap()["run_id"].clone();
    assert_eq!(mc_rows.last().unwrap()["case_id"], dropped_id);
    assert!(run_ids.contains(&(true, new_id)), "{run_ids:?}");
}

/// Runs of different kinds into one directory (as without samples.csv, each its own
/// summary file) share samples.csv: the second appends, and a `--resume` with nothing
/// left to do keeps every row.
#[test]
fn runs_of_other_kinds_into_one_directory_share_samples_csv() {
    if skip_np(2) {
        return;
    }
    let dir = tmpdir("samples-shared");
    let d = dir.to_str().unwrap();
    let comm = [
        "micro-comm",
        "--sizes",
        "64,128",
        "--iters",
        "3",
        "--samples",
        "--quiet",
        "--out",
        d,
    ];
    assert_ok(&mpirun(2, &comm));
    let micro = [
        "micro",
        "--methods",
        "topk",
        "--shape",
        "100",
        "--iters",
        "4",
        "--samples",
        "--quiet",
        "--out",
        d,
    ];
    assert_ok(&mpirun(2, &micro));
    let (keys, ids) = sample_keys(&dir);
    assert_eq!(ids.len(), 3);
    assert_eq!(keys.len(), 2 * (2 * 3 + 4));
    assert_complete(&dir, "two kinds");
    let mut again = comm.to_vec();
    again.push("--resume");
    assert_ok(&mpirun(2, &again));
    assert_eq!(sample_keys(&dir).0, keys);
}

/// A sweep killed (kill -9 of one rank) mid-way and resumed: every case has its samples
/// exactly once, whatever the kill left in samples.csv.
#[test]
fn killed_and_resumed_sweep_has_every_sample_once() {
    if skip_np(NP) {
        return;
    }
    let dir = tmpdir("samples-kill");
    let out = dir.join("out");
    let o = out.to_str().unwrap().to_string();
    let args = [
        "micro-comm",
        "--collectives",
        "allreduce,ring-allreduce",
        "--min-bytes",
        "4",
        "--max-bytes",
        "4MiB",
        "--iters",
        "200",
        "--warmup",
        "2",
        "--samples",
        "--quiet",
        "--out",
        &o,
    ];
    let launcher = mpirun_cmd();
    let mut child = std::process::Command::new(&launcher)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("SLURM_NTASKS")
        .args([
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            &NP.to_string(),
            BIN,
        ])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let csv = out.join("micro_comm.csv");
    let (pids, frozen_rows) = freeze_at_rows(&csv, 4, &mut child, &o, NP);
    // 42 cases: 2 collectives x 21 sizes (4 B to 4 MiB).
    assert!(frozen_rows < 42, "the sweep finished before it was killed");
    signal("KILL", pids[NP - 1]);
    thaw(&pids[..NP - 1]);
    let status = child.wait().unwrap();
    assert!(!status.success(), "the sweep finished before it was killed");
    let done_before = rows_in(&csv);
    let mut resume = args.to_vec();
    resume.push("--resume");
    assert_ok(&mpirun(NP, &resume));
    assert!(rows_in(&csv) > done_before);
    assert_complete(&out, "after kill and --resume");
    let (keys, ids) = sample_keys(&out);
    assert_eq!(keys.len(), ids.len() * NP * 200);
}
