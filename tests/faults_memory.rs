//! A job whose memory the node lacks (issue 19 item 4, issue 30 item 3): run.json's
//! memory estimate bounds the measured peak of every benchmark and method (with its
//! parameters), and what the node cannot hold is refused with exit 2 before anything is
//! allocated. Every test runs the release binary under mpirun.
//!
//! `GRADCOMP_TEST_BIN=/path/to/gradcomp` runs these tests against another build (to see
//! them fail on an older revision). The helpers these files share are in
//! tests/common/faults.rs.

mod common;
use common::faults::{err_text, refused, run, timed};
use common::{run_json, tmpdir};
use std::path::Path;

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

// ---- issue 30, item 3: method parameters count in the memory estimate --------------------

/// The memory check ignored method parameters: `micro --methods sketch --shape 1024x1024
/// --density 0.01 --sketch-rows 50 --sketch-cols-per-k 100` was estimated at 96 MiB and
/// peaked at 529 MiB, and a sketch of terabytes passed the check and aborted in its
/// allocation; `converge` had no check. Now run.json's estimate bounds the measured peak
/// for those runs and counts the sketch's tables as written by hand (a sketch larger
/// than its tensor is no longer built: the tensor travels raw), and what the node cannot
/// hold is refused with exit 2 before anything is allocated.
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
    // The parameters' share of the estimate, by hand (the SPEC's rule: 4 tables of
    // rows x c floats, c = ceil(cols_per_k k), k = ceil(density d); a tensor whose
    // rows c + k >= d travels raw and holds 4 buffers of its own d floats instead).
    // d = 4096^2 = 16,777,216, density 0.01: k = 167,773.
    //   1 x 1:     c = 167,773,   sketched: 16 x 167,773 = 2,684,368 B
    //   5 x 15:    c = 2,516,595, 5c + k = 12,750,748 < d, sketched: 16 x 12,582,975
    //   1000 x 1000: raw (a sketch of 1.7e11 words would be terabytes): 16 x d
    let est = |rows: &str, cols: &str| -> u64 {
        let out = dir.join(format!("big-{rows}-{cols}"));
        let r = run(
            1,
            &[
                "micro",
                "--methods",
                "sketch",
                "--shape",
                "4096x4096",
                "--density",
                "0.01",
                "--sketch-rows",
                rows,
                "--sketch-cols-per-k",
                cols,
                "--iters",
                "1",
                "--warmup",
                "0",
                "--quiet",
                "--out",
                out.to_str().unwrap(),
            ],
            300,
        );
        assert_eq!(r.status.code(), Some(0), "{}", err_text(&r));
        bound(
            &out,
            &format!("4096x4096 sketch rows {rows}, cols/k {cols}"),
        );
        run_json(&out)["estimated_peak_bytes"].as_u64().unwrap()
    };
    let base = est("1", "1");
    assert_eq!(est("5", "15") - base, 16 * 12_582_975 - 16 * 167_773);
    assert_eq!(est("1000", "1000") - base, 16 * 16_777_216 - 16 * 167_773);
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
