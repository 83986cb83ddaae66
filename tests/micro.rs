//! micro and micro-compress under real MPI: every method's result is checked against a
//! dense reference at -np 2 and -np 3 (Marsit also at -np 4), the CSVs follow the
//! documented schema, and bad method input is refused with exit code 2.

mod common;
use common::*;

const ALL: &str = "ssgd,signsgd,signsgd-mv,topk,dgc,powersgd,acpsgd,marsit,sketch,qsgd,randomk";

#[test]
fn micro_check_passes_for_every_method() {
    for np in [2, 3] {
        if skip_np(np) {
            continue;
        }
        let dir = tmpdir(&format!("micro{np}"));
        // A matrix, a 1-D tensor, and a shape whose size is prime and not divisible by np.
        let out = mpirun(
            np,
            &[
                "micro",
                "--methods",
                ALL,
                "--shape",
                "96x70,1001,13x7",
                "--check",
                "--iters",
                "3",
                "--warmup",
                "1",
                "--quiet",
                "--out",
                dir.to_str().unwrap(),
            ],
        );
        assert_ok(&out);
        let (header, rows) = read_csv(&dir.join("micro.csv"));
        assert_eq!(header, documented_columns("micro.csv"));
        assert_eq!(rows.len(), 3 * ALL.split(',').count());
        let col = |n: &str| header.iter().position(|c| c == n).unwrap();
        for r in &rows {
            assert_eq!(r[col("check")], "pass", "{r:?}");
            assert_eq!(r[col("world_size")], np.to_string());
        }
        // Wire bytes follow the formulas of docs/methods.md, "Summary" (96x70 tensor,
        // d = 6720).
        let wire = |m: &str| -> u64 {
            rows.iter()
                .find(|r| r[col("method")] == m && r[col("rows")] == "96")
                .map(|r| r[col("wire_bytes")].parse().unwrap())
                .unwrap()
        };
        let d = 6720u64;
        let k = (0.001f64 * d as f64).ceil() as u64;
        assert_eq!(wire("ssgd"), 4 * d);
        assert_eq!(wire("signsgd"), 4 + 4 * d.div_ceil(32));
        assert_eq!(wire("signsgd-mv"), 4 * d.div_ceil(32));
        assert_eq!(wire("topk"), 8 * k);
        // DGC sends at most k pairs (issue 14: it used to send up to 1.3 k).
        assert!(wire("dgc") <= 8 * k, "dgc sent {} bytes", wire("dgc"));
        assert_eq!(wire("powersgd"), 4 * (96 + 70) * 4);
        // The mean over the timed steps 1, 2, 3 (one warm-up step): ACP-SGD sends Q, P, Q.
        assert_eq!(wire("acpsgd"), (4 * (70 + 96 + 70) * 4 + 1) / 3);
        assert_eq!(wire("marsit"), 4 + 4 * d.div_ceil(32));
        // Random-k (GRACE randomk.py): the k values only, the indices from the shared seed.
        assert_eq!(wire("randomk"), 4 * k);
    }
}

/// DGC sends a 1-D tensor dense, as its reference does (it compresses only tensors of
/// two or more dimensions): micro says so on stderr and in the row's `aggregation`.
#[test]
fn dgc_one_d_tensor_is_dense_and_said_so() {
    let dir = tmpdir("dgc1d");
    let out = mpirun(
        2,
        &[
            "micro",
            "--methods",
            "dgc",
            "--numel",
            "5000",
            "--shape",
            "50x100",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    let notes: Vec<String> = stderr(&out)
        .lines()
        .filter(|l| l.contains("note: dgc sends"))
        .map(String::from)
        .collect();
    assert_eq!(notes.len(), 1, "one note, from rank 0 only: {notes:?}");
    assert!(
        notes[0].contains("1-D tensor of 5000 elements dense"),
        "{}",
        notes[0]
    );
    let (header, rows) = read_csv(&dir.join("micro.csv"));
    let col = |n: &str| header.iter().position(|c| c == n).unwrap();
    let row = |r: &str| rows.iter().find(|x| x[col("rows")] == r).unwrap();
    assert_eq!(row("1")[col("aggregation")], "allreduce");
    assert_eq!(row("1")[col("wire_bytes")], "20000");
    assert_eq!(row("50")[col("aggregation")], "allgather");
    let k = 5u64;
    assert!(row("50")[col("wire_bytes")].parse::<u64>().unwrap() <= 8 * k);
}

#[test]
fn marsit_is_unbiased_at_four_ranks() {
    if skip_np(4) {
        return;
    }
    let dir = tmpdir("marsit4");
    let out = mpirun(
        4,
        &[
            "micro",
            "--methods",
            "marsit",
            "--shape",
            "20000",
            "--check",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
}

#[test]
fn micro_compress_reports_kernels_and_fidelity() {
    let dir = tmpdir("mc");
    let out = mpirun(
        2,
        &[
            "micro-compress",
            "--methods",
            ALL,
            "--shape",
            "64x48",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    let (header, rows) = read_csv(&dir.join("micro_compress.csv"));
    assert_eq!(header, documented_columns("micro_compress.csv"));
    let col = |n: &str| header.iter().position(|c| c == n).unwrap();
    for r in &rows {
        let rel: f64 = r[col("rel_error")].parse().unwrap();
        let bw: f64 = r[col("mem_read_gbps")].parse().unwrap();
        assert!(bw > 0.0);
        match r[col("method")].as_str() {
            "ssgd" => assert_eq!(rel, 0.0),
            m => assert!(rel.is_finite() && rel > 0.0, "{m}: {rel}"),
        }
    }
}

#[test]
fn micro_compress_over_a_models_layers() {
    let dir = tmpdir("mc-model");
    let out = mpirun(
        2,
        &[
            "micro-compress",
            "--methods",
            "ssgd,signsgd,topk,powersgd",
            "--model",
            "resnet20",
            "--shape",
            "16x144",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    let (header, rows) = read_csv(&dir.join("micro_compress.csv"));
    assert_eq!(header, documented_columns("micro_compress.csv"));
    let col = |n: &str| header.iter().position(|c| c == n).unwrap();
    let models: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r[col("model")] == "resnet20")
        .collect();
    assert_eq!(models.len(), 4, "one model row per method");
    // ResNet-20: 59 tensors, 269,722 parameters (tests/data/models.csv).
    for r in &models {
        assert_eq!((r[col("rows")].as_str(), r[col("cols")].as_str()), ("", ""));
        assert_eq!(r[col("tensors")], "59");
        assert_eq!(r[col("numel")], "269722");
        assert_eq!(r[col("dense_bytes")], (4 * 269722).to_string());
        for c in ["compress_s", "decompress_s", "rel_error"] {
            let v: f64 = r[col(c)].parse().unwrap();
            assert!(v.is_finite() && v >= 0.0, "{c} = {v}");
        }
        let wire: u64 = r[col("wire_bytes")].parse().unwrap();
        match r[col("method")].as_str() {
            // Dense: every layer's fp32 gradient, exact.
            "ssgd" => {
                assert_eq!(wire, 4 * 269722);
                assert_eq!(r[col("rel_error")], "0");
            }
            m => assert!(wire > 0 && wire < 4 * 269722, "{m}: {wire}"),
        }
    }
    for r in rows.iter().filter(|r| r[col("model")].is_empty()) {
        assert_eq!(
            (r[col("rows")].as_str(), r[col("tensors")].as_str()),
            ("16", "1")
        );
    }
}

/// `micro --check` compares every rank's decompressed result with rank 0's: one rank's
/// result moved by a single ulp (inside every dense reference's tolerance) fails the
/// check for every method, at 3 ranks. Before, ranks were only compared with their own
/// dense reference, so a rank decoding stale or short ring data could pass.
#[test]
fn check_requires_every_rank_to_agree() {
    if skip_np(3) {
        return;
    }
    for m in gradcomp::compress::registry::METHODS {
        let dir = tmpdir("ulp-fault");
        let out = mpirun(
            3,
            &[
                "micro",
                "--methods",
                m,
                "--shape",
                "64x48",
                "--check",
                "--inject-ulp-fault",
                "2",
                "--iters",
                "1",
                "--warmup",
                "0",
                "--quiet",
                "--out",
                dir.to_str().unwrap(),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{m}: a disagreeing rank passed --check: {err}"
        );
        // S-SGD and majority vote have exact references, which see it first.
        let exact = ["ssgd", "signsgd-mv"].contains(m);
        assert!(
            err.contains("rank 2") && (exact || err.contains("do not agree")),
            "{m}: {err}"
        );
    }
}

/// run.json tells whether gradcomp advised its large buffers for huge pages
/// (`GRADCOMP_HUGE_PAGES=0` turns it off) and the system's THP mode, read here from sysfs
/// independently of src/measure/pages.rs.
#[test]
fn run_json_records_the_huge_page_advice_and_the_system_mode() {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .ok()
        .and_then(|s| {
            let a = s.find('[')?;
            let b = s[a..].find(']')? + a;
            Some(s[a + 1..b].to_string())
        });
    for (env, advised) in [(None, true), (Some("0"), false), (Some("1"), true)] {
        let dir = tmpdir(&format!("huge-pages-{}", env.unwrap_or("unset")));
        let args = [
            "micro-compress",
            "--methods",
            "ssgd",
            "--shape",
            "2048x1024",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ];
        let vars: Vec<(&str, &str)> = env
            .map(|v| ("GRADCOMP_HUGE_PAGES", v))
            .into_iter()
            .collect();
        let o = mpirun_env(1, &args, &vars);
        assert_ok(&o);
        let meta = run_json(&dir);
        assert_eq!(
            meta["huge_pages_advised"],
            serde_json::json!(advised),
            "GRADCOMP_HUGE_PAGES={env:?}"
        );
        assert_eq!(
            meta["transparent_huge_pages"],
            serde_json::json!(mode),
            "{meta}"
        );
    }
}
