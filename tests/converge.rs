//! `gradcomp converge` (issue 16; docs/methods.md, "Convergence check"): real training
//! through the e2e path. Determinism, dense convergence, every method against dense
//! S-SGD at -np 2 and 3 under the documented tolerance, negative controls that must fail
//! the same check, divergence handling and bad input.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

/// Every method and the controls, in the order of the documented table.
const ALL: &str = "ssgd,signsgd,signsgd-mv,topk,dgc,powersgd,acpsgd,marsit,sketch,qsgd,omgs,sketch-fusion,powersgd-noef,topk-noef";

/// `mpirun` with one BLAS thread per rank (the documented setting: ranks = cores, and
/// bit-identical curves need the same BLAS threading).
fn converge(np: usize, args: &[&str]) -> Output {
    let _one = one_mpi_job();
    let launcher = mpirun_cmd();
    let mut cmd = Command::new(&launcher);
    if launcher.contains("mpirun") && !launcher.contains("mpich") {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .args(["--oversubscribe", "--bind-to", "none"]);
    }
    cmd.env_remove("SLURM_NTASKS")
        .env("OPENBLAS_NUM_THREADS", "1")
        .arg("-np")
        .arg(np.to_string())
        .arg(BIN)
        .arg("converge")
        .arg("--quiet")
        .args(args);
    cmd.output().expect("cannot launch mpirun")
}

/// Rows of converge.csv as column -> value maps.
fn rows(dir: &Path) -> Vec<HashMap<String, String>> {
    let (h, rs) = read_csv(&dir.join("converge.csv"));
    rs.into_iter()
        .map(|r| h.iter().cloned().zip(r).collect())
        .collect()
}

/// The last row of each method: (final eval loss, status).
fn finals(rs: &[HashMap<String, String>]) -> Finals {
    let mut out = HashMap::new();
    for r in rs {
        let loss = r["eval_loss"].parse::<f64>().unwrap_or(f64::NAN);
        out.insert(r["method"].clone(), (loss, r["status"].clone()));
    }
    out
}

/// Each method's last (final eval loss, status).
type Finals = HashMap<String, (f64, String)>;

/// `converge ARGS --out DIR` on `np` ranks, which must succeed: its rows, [`Finals`], and
/// dense S-SGD's final eval loss.
fn run_finals(np: usize, dir: &Path, args: &[&str]) -> (Vec<HashMap<String, String>>, Finals, f64) {
    let mut all = args.to_vec();
    all.extend(["--out", dir.to_str().unwrap()]);
    let out = converge(np, &all);
    assert_ok(&out);
    let rs = rows(dir);
    let f = finals(&rs);
    let dense = f["ssgd"].0;
    (rs, f, dense)
}

/// The documented check (docs/methods.md): final eval loss <= dense * 1.25.
fn within(loss: f64, dense: f64) -> bool {
    loss.is_finite() && loss <= dense * (1.0 + gradcomp::converge::TOLERANCE_REL)
}

/// Every method for the documented 200 steps; asserts what docs/methods.md's table says
/// for the clear cases and that both negative controls fail the same check.
fn methods_against_dense(np: usize) {
    if skip_np(np) {
        return;
    }
    let dir = tmpdir(&format!("conv-all-{np}"));
    let (rs, f, dense) = run_finals(np, &dir, &["--methods", ALL, "--eval-every", "100"]);
    // Dense S-SGD learns: its held-out loss ends well below its first training loss and
    // below chance level ln(10).
    let first: f64 = rs
        .iter()
        .find(|r| r["method"] == "ssgd")
        .map(|r| r["train_loss"].parse().unwrap())
        .unwrap();
    assert!(
        dense < 0.6 * first && dense < 0.6 * 10f64.ln(),
        "dense did not learn: {first} -> {dense}"
    );
    let report: Vec<String> = f
        .iter()
        .map(|(m, (l, s))| format!("{m}: {l:.4} ({:.3}x, {s})", l / dense))
        .collect();
    // Match dense at both world sizes (docs/methods.md).
    for m in ["ssgd", "powersgd", "qsgd"] {
        assert!(
            within(f[m].0, dense),
            "{m} should match dense at -np {np}: {report:?}"
        );
    }
    // Documented as not matching within 200 steps at the default density 0.001 (Count
    // Sketch: its sketch cannot find the top k of this flat gradient; docs/methods.md,
    // "sketch"), and the negative control topk-noef:
    // the same check must fail for them. powersgd-noef is reported, not asserted: it
    // sits near the threshold (1.31x at -np 3 on one CPU, 1.22x on another with the same
    // seed and code: BLAS kernels chosen per CPU round differently; docs/methods.md).
    for m in [
        "signsgd",
        "signsgd-mv",
        "topk",
        "sketch",
        "sketch-fusion",
        "topk-noef",
    ] {
        assert!(
            !within(f[m].0, dense),
            "{m} should fail the check at -np {np}: {report:?}"
        );
    }
    // Every case ran its 200 steps; Count Sketch's two rounds no longer diverge
    // (docs/methods.md, "sketch": the one-round rule gave NaN at step 34).
    for (m, (loss, s)) in &f {
        assert_eq!(s, "done", "{m}: {report:?}");
        assert!(loss.is_finite(), "{m}: {report:?}");
        assert_eq!(rs.iter().filter(|r| &r["method"] == m).count(), 200);
    }
    // The fidelity column: exact for dense, non-zero for a compressor.
    assert!(rs
        .iter()
        .filter(|r| r["method"] == "ssgd")
        .all(|r| r["update_rel_err"].parse::<f64>().unwrap() < 1e-6));
    assert!(rs
        .iter()
        .filter(|r| r["method"] == "topk")
        .all(|r| r["update_rel_err"].parse::<f64>().unwrap() > 0.1));
    eprintln!("-np {np}: {report:?}");
}

#[test]
fn every_method_against_dense_np2() {
    methods_against_dense(2);
}

#[test]
fn every_method_against_dense_np3() {
    methods_against_dense(3);
}

/// Count Sketch at its default sizes (FetchSGD's: density 0.0076, 20 columns per kept
/// element; docs/methods.md, "sketch") matches dense over 1,000 steps at -np 3, two
/// seeds, and every row records the sizes it ran at (the other sparsifiers keep 0.001).
#[test]
fn sketch_trains_at_its_default_sizes_np3() {
    if skip_np(3) {
        return;
    }
    for seed in ["1", "2"] {
        let dir = tmpdir(&format!("conv-sketch-default-{seed}"));
        let (rs, f, dense) = run_finals(
            3,
            &dir,
            &[
                "--methods",
                "ssgd,topk,sketch,sketch-fusion",
                "--steps",
                "1000",
                "--eval-every",
                "1000",
                "--seed",
                seed,
            ],
        );
        for m in ["sketch", "sketch-fusion"] {
            assert_eq!(f[m].1, "done", "seed {seed} {m}");
            assert!(
                within(f[m].0, dense),
                "seed {seed} {m}: {} vs dense {dense}",
                f[m].0
            );
        }
        for r in &rs {
            let sketch = r["method"].starts_with("sketch");
            let want = if sketch { 0.0076 } else { 0.001 };
            assert_eq!(r["density"].parse::<f64>().ok(), Some(want), "{r:?}");
            assert_eq!(r["sketch_cols_per_k"].parse::<f64>().ok(), Some(20.0));
        }
    }
}

#[test]
fn same_seed_and_world_size_give_bit_identical_curves() {
    let np = 2;
    let run = |name: &str, seed: &str| {
        let dir = tmpdir(name);
        let out = converge(
            np,
            &[
                "--methods",
                // omgs and sketch-fusion plan their buckets from fixed costs, so their
                // compressed buckets (and curves) repeat too.
                "ssgd,marsit,dgc,omgs,sketch-fusion",
                "--steps",
                "40",
                "--eval-every",
                "20",
                "--seed",
                seed,
                "--out",
                dir.to_str().unwrap(),
            ],
        );
        assert_ok(&out);
        // Every run records its metadata (docs/csv-schema.md, "run.json").
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(meta["status"], "ok", "{meta}");
        assert_eq!(meta["world_size"], np, "{meta}");
        assert_eq!(meta["cases_done"], 5, "{meta}");
        assert_eq!(
            meta["config"]["seed"],
            seed.parse::<u64>().unwrap(),
            "{meta}"
        );
        assert!(
            meta["end_time"].is_string() && meta["peak_rss_bytes"].is_u64(),
            "{meta}"
        );
        // Each rank's processor model (/proc/cpuinfo's `model name` on this x86 machine).
        let cpus = meta["host_cpus"].as_array().expect("host_cpus");
        assert!(
            cpus.len() == np
                && cpus
                    .iter()
                    .all(|c| c.as_str().is_some_and(|c| !c.is_empty())),
            "host_cpus: {cpus:?}"
        );
        // The machine's load average at start and end, one per rank.
        for key in ["load_avg_start", "load_avg_end"] {
            let l = meta[key].as_array().expect(key);
            assert_eq!(l.len(), np, "{key}: {l:?}");
            assert!(
                l.iter().all(|x| x.as_array().is_some_and(
                    |a| a.len() == 3 && a.iter().all(|v| v.as_f64().is_some_and(|v| v >= 0.0))
                )),
                "{key}: {l:?}"
            );
        }
        assert!(
            meta["command_line"].to_string().contains("converge"),
            "{meta}"
        );
        rows(&dir)
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {} {}",
                    r["method"],
                    r["step"],
                    r["train_loss"],
                    r["eval_loss"],
                    r["eval_accuracy"],
                    r["update_rel_err"]
                )
            })
            .collect::<Vec<_>>()
    };
    let a = run("conv-det-a", "7");
    let b = run("conv-det-b", "7");
    // 40 steps per method.
    for m in ["ssgd", "marsit", "dgc", "omgs", "sketch-fusion"] {
        assert!(
            a.iter().any(|r| r.starts_with(&format!("{m} "))),
            "no rows for {m}"
        );
    }
    assert_eq!(a.len(), 5 * 40, "{} rows", a.len());
    assert_eq!(a, b, "same seed and world size must give the same curves");
    let c = run("conv-det-c", "8");
    assert_ne!(a, c, "another seed must give another curve");
}

#[test]
fn columns_are_documented_and_divergence_ends_only_that_case() {
    let dir = tmpdir("conv-div");
    // A huge learning rate makes S-SGD diverge; the next case still runs.
    let out = converge(
        2,
        &[
            "--methods",
            "ssgd,qsgd",
            "--steps",
            "30",
            "--lr",
            "1e6",
            "--sketch-rows",
            "5",
            "--sketch-cols-per-k",
            "30",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    let (header, _) = read_csv(&dir.join("converge.csv"));
    assert_eq!(header, documented_columns("converge.csv"));
    let rs = rows(&dir);
    // The sketch size the run was given, on every row (the trains column joins on it).
    for r in &rs {
        assert_eq!(r["sketch_rows"], "5");
        assert_eq!(r["sketch_cols_per_k"].parse::<f64>().ok(), Some(30.0));
    }
    for m in ["ssgd", "qsgd"] {
        let mine: Vec<_> = rs.iter().filter(|r| r["method"] == m).collect();
        assert!(
            !mine.is_empty() && mine.len() < 30,
            "{m}: {} rows",
            mine.len()
        );
        let last = mine.last().unwrap();
        assert_eq!(last["status"], "diverged");
        assert!(!last["train_loss"].parse::<f64>().unwrap().is_finite());
        assert!(mine[..mine.len() - 1].iter().all(|r| r["status"] == "ok"));
    }
    assert!(stdout(&out).contains("diverged at step"));
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    // assert_refused's mpirun takes one_mpi_job itself.
    assert_refused(
        1,
        &["converge", "--methods", "nope"],
        &["--methods", "nope"],
    );
    assert_refused(
        1,
        &["converge", "--methods", "ssgd", "--steps", "0"],
        &["--steps"],
    );
    assert_refused(
        1,
        &["converge", "--methods", "ssgd", "--expect-ranks", "3"],
        &["--expect-ranks 3"],
    );
    assert_refused(
        1,
        &["converge", "--methods", "ssgd", "--lr", "-1"],
        &["--lr"],
    );
    assert_refused(
        1,
        &["converge", "--methods", "ssgd", "--lr", "nan"],
        &["--lr"],
    );
    assert_refused(
        1,
        &["converge", "--methods", "ssgd", "--lr", "abc"],
        &["--lr"],
    );
    assert_refused(
        2,
        &[
            "converge",
            "--methods",
            "ssgd",
            "--train-samples",
            "100",
            "--batch",
            "64",
        ],
        &["--batch", "shard"],
    );
    assert_refused(
        1,
        &["converge", "--methods", "topk", "--collective", "allreduce"],
        &["--collective", "topk"],
    );
    // A repeated method is refused like e2e's, not silently run once.
    assert_refused(
        1,
        &["converge", "--methods", "ssgd,topk,ssgd"],
        &["--methods", "'ssgd' appears twice"],
    );
}

#[test]
fn config_sections_run_and_bad_keys_are_refused() {
    let dir = tmpdir("conv-cfg");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        "[run]\nseed = 3\n\n[[converge]]\nmethods = [\"ssgd\"]\nsteps = 5\neval_every = 5\n",
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = converge(
        1,
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    let rs = rows(&out_dir);
    assert_eq!(rs.len(), 5);
    assert!(rs.iter().all(|r| r["seed"] == "3"));
    assert_eq!(rs[4]["status"], "done");
    // A bad value in the file names the section and key.
    std::fs::write(&cfg, "[[converge]]\nmethods = [\"ssgd\"]\nlr = -0.5\n").unwrap();
    assert_refused(
        1,
        &["converge", "--config", cfg.to_str().unwrap()],
        &["converge", "lr"],
    );
}
