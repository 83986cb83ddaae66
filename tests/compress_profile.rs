//! A compress profile written by analysis/profile_compress.py (a CPU run over ResNet-20's
//! shapes, every method, world size 2: tests/data/compress_profile_resnet20_cpu.csv) reads
//! into `devcost::profile::CompressProfile` and covers a ResNet-20 run (docs/csv-schema.md,
//! "Compress profile").

mod common;

use std::path::PathBuf;

use gradcomp::compress::{registry, MethodParams};
use gradcomp::devcost::profile::{CompressProfile, ProfileError, HEADER};
use gradcomp::roofline::Stage;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/compress_profile_resnet20_cpu.csv")
}

#[test]
fn profile_written_by_the_python_script_reads_and_covers_resnet20() {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let header = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap();
    assert_eq!(header, HEADER, "the script and the reader share one header");
    assert_eq!(
        common::documented_columns("--compress-profile").join(","),
        HEADER,
        "docs/csv-schema.md documents the columns in the header's order"
    );

    let p = CompressProfile::read(fixture()).unwrap();
    // Every method the script has a torch implementation of: all but Random-k.
    let timed: Vec<&str> = registry::METHODS
        .iter()
        .copied()
        .filter(|m| *m != "randomk")
        .collect();
    assert_eq!(p.methods(), timed);
    assert_eq!(p.meta("model"), Some("resnet20"));
    assert!(
        p.meta("device").unwrap().starts_with("cpu"),
        "{:?}",
        p.meta("device")
    );
    assert!(p.meta("torch").is_some() && p.meta("date").is_some());

    let m = gradcomp::models::build("resnet20").unwrap();
    let shapes: Vec<(usize, usize)> = m.tensors.iter().map(|t| t.rows_cols()).collect();
    // Every method, Count Sketch's two rounds included (the fixture's `# command:` line,
    // rerun with torch 2.15 on the CPU).
    p.check(&timed, &shapes, 2).unwrap();
    assert!(
        p.time_s(
            "sketch",
            Stage::Decompress,
            1,
            0,
            shapes[0].0,
            shapes[0].1,
            2
        )
        .unwrap()
            > 0.0
    );
    // A profile without sketch's round 1 (one recorded before the second round existed)
    // is refused for `sketch`, naming the round it lacks, instead of pricing a step it
    // never measured.
    let text = std::fs::read_to_string(fixture()).unwrap();
    let one_round: String = text
        .lines()
        .filter(|l| !l.starts_with("sketch,compress,1,") && !l.starts_with("sketch,decompress,1,"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(one_round.len() < text.len());
    let old = std::env::temp_dir().join(format!("gradcomp-profile-1r-{}.csv", std::process::id()));
    std::fs::write(&old, one_round).unwrap();
    let q = CompressProfile::read(&old).unwrap();
    let _ = std::fs::remove_file(&old);
    let e = q.check(&["sketch"], &shapes, 2).unwrap_err();
    assert!(
        matches!(e, ProfileError::MissingShape { round: 1, .. }),
        "{e}"
    );
    // The fixture was profiled at Count Sketch's default size of its date, 3 rows x 20
    // columns per kept element (its `# sketch_rows:` lines); today's default, 2 x 10, is
    // refused for sketch, naming the size and the way out.
    let at_size = MethodParams {
        sketch_rows: 3,
        sketch_cols_per_k: 20.0,
        ..MethodParams::default()
    };
    p.check_params(&timed, &at_size).unwrap();
    let e = p
        .check_params(&["sketch"], &MethodParams::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sketch_rows = 3") && e.contains("--sketch-rows 2"),
        "{e}"
    );
    // A profile taken at one density for every method (`--density 0.001`, as every
    // profile before Count Sketch had its own default) prices topk at the default, not
    // sketch (0.0076 by default): refused for sketch, naming it and the way out.
    let at_one: String = text
        .lines()
        .map(|l| match l {
            "# rank: 4" => "# density: 0.001\n# rank: 4\n".to_string(),
            _ => format!("{l}\n"),
        })
        .collect();
    assert!(at_one.contains("# density: 0.001"));
    let one = std::env::temp_dir().join(format!("gradcomp-profile-d-{}.csv", std::process::id()));
    std::fs::write(&one, at_one).unwrap();
    let q = CompressProfile::read(&one).unwrap();
    let _ = std::fs::remove_file(&one);
    q.check_params(&["topk", "dgc", "ssgd"], &MethodParams::default())
        .unwrap();
    let e = q
        .check_params(&["topk", "sketch"], &at_size)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sketch's time") && e.contains("0.0076") && e.contains("without --density"),
        "{e}"
    );
    // The default profile (no density recorded) against a run given one density.
    let given = MethodParams {
        density: Some(0.001),
        ..at_size.clone()
    };
    p.check_params(&["topk"], &given).unwrap();
    let e = p.check_params(&["sketch"], &given).unwrap_err().to_string();
    assert!(
        e.contains("default density 0.0076") && e.contains("--density 0.001"),
        "{e}"
    );
    // All-reduce and ring methods are taken from world size 2 at any world size; the
    // all-gather ones' decompress is not.
    p.check(&["ssgd", "powersgd", "acpsgd", "marsit"], &shapes, 16)
        .unwrap();
    let e = p.check(&["topk"], &shapes, 16).unwrap_err();
    assert!(
        matches!(e, ProfileError::MissingWorldSize { world_size: 16, .. }),
        "{e}"
    );

    // Every lookup a ResNet-20 run makes has a time; Power-SGD's raw tensors do nothing
    // in round 1 (written as 0).
    let (r, c) = m.tensors[0].rows_cols();
    for stage in [Stage::Compress, Stage::Decompress] {
        assert!(p.time_s("topk", stage, 0, 0, r, c, 2).unwrap() > 0.0);
        assert!(p.time_s("acpsgd", stage, 0, 1, r, c, 2).unwrap() > 0.0);
    }
    assert_eq!(
        p.time_s("powersgd", Stage::Compress, 1, 0, 1, 16, 2),
        Some(0.0)
    );
    assert!(
        p.time_s("powersgd", Stage::Compress, 1, 0, 64, 576, 2)
            .unwrap()
            > 0.0
    );

    let spec = p.copy_spec().unwrap();
    assert!(spec.launch_s >= 0.0 && spec.launch_s < 1e-3, "{spec:?}");
    assert!(spec.mem_bytes_per_s > 1e8, "{spec:?}");

    // Rust's writer and reader agree with the Python-written file.
    let out = std::env::temp_dir().join(format!("gradcomp-profile-it-{}.csv", std::process::id()));
    std::fs::write(&out, p.to_csv()).unwrap();
    let q = CompressProfile::read(&out).unwrap();
    assert_eq!(q.rows(), p.rows());
    let _ = std::fs::remove_file(&out);
}

/// `CompressProfile::priced` (what `gradcomp devcost` writes): each measured row beside
/// the roofline of the kernels the method lists, at the preset's constants. References
/// restated here: NVIDIA's H200 datasheet (4.8 TB/s) times the stated 0.8 efficiency and
/// 5 us per launch; S-SGD's compress is one copy (read and write 4 bytes per element);
/// layer-wise top-k's decompress is OMGS-SGD's loop (hv_distributed_optimizer.py
/// @ac10b98: zero the output, per worker `.long()`, gather, add, scatter, then divide):
/// 2 + 4 n launches.
#[test]
fn priced_rows_follow_the_roofline_and_the_reference_launches() {
    let text = "# device: test\n# density: 0.001\n# rank: 4\n\
                method,stage,round,phase,rows,cols,world_size,time_s\n\
                ssgd,compress,0,0,1000,1000,16,2e-5\n\
                topk,decompress,0,0,1,1000000,8,1e-4\n\
                copy,copy,0,0,1,4194304,8,1e-5\n\
                copy,copy,0,0,1,1024,8,4e-6\n";
    let p = CompressProfile::parse(text, "inline.csv").unwrap();
    let spec = gradcomp::roofline::DeviceSpec::preset("h200").unwrap();
    let rows = p.priced(&spec).unwrap();
    assert_eq!(rows.len(), 4);
    let bw = 0.8 * 4.8e12;
    let ssgd = rows.iter().find(|r| r.method == "ssgd").unwrap();
    let want = 5e-6 + 2.0 * 4.0 * 1e6 / bw;
    assert!((ssgd.model_s - want).abs() < 1e-12, "{ssgd:?}");
    assert_eq!(ssgd.launches, 1);
    assert!((ssgd.model_over_measured - want / 2e-5).abs() < 1e-9);
    let topk = rows.iter().find(|r| r.method == "topk").unwrap();
    assert_eq!(topk.launches, 2 + 4 * 8, "{topk:?}");
    assert!(topk.kernels.contains(") x8 + "), "{}", topk.kernels);
    assert!(topk.model_s > 34.0 * 5e-6 && topk.model_s < 34.0 * 5e-6 + 1e-4);
    let copy = rows
        .iter()
        .find(|r| r.method == "copy" && r.cols == 4194304)
        .unwrap();
    assert!((copy.model_s - (5e-6 + 8.0 * 4194304.0 / bw)).abs() < 1e-12);
    // A recorded parameter the method's kernels depend on is the one priced: topk's k.
    // Bytes: zero and divide the output (4 + 8 bytes per element), and per worker and
    // selected element 12 (int32 -> int64), 16 (gather: int64 index, value read and
    // written), 12 (add), 16 (scatter).
    let want_bytes = |k: f64| 12.0 * 1e6 + 8.0 * 56.0 * k;
    assert_eq!(topk.model_bytes, want_bytes(1000.0), "{topk:?}");
    let dense = CompressProfile::parse(&text.replace("0.001", "0.01"), "inline.csv")
        .unwrap()
        .priced(&spec)
        .unwrap();
    let t2 = dense.iter().find(|r| r.method == "topk").unwrap();
    assert_eq!(t2.model_bytes, want_bytes(10000.0), "{t2:?}");
    // A recorded value that is no value of its parameter is bad input, naming it.
    let bad = CompressProfile::parse(&text.replace("# rank: 4", "# rank: four"), "inline.csv")
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("rank = 'four'") && bad.contains("inline.csv"),
        "{bad}"
    );
}

/// A profile without one method's rows (a run of the script cut short), given to an e2e
/// sweep whose last method needs them: refused before any case runs (exit 2, one
/// message, no row written), not after the other methods' cases ran (issue 52, item 3).
#[test]
fn a_truncated_profile_is_refused_before_the_first_case() {
    let d = common::tmpdir("truncated-profile");
    let text = std::fs::read_to_string(fixture()).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.starts_with("qsgd,"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(cut.len() < text.len());
    let p = d.join("cut.csv");
    std::fs::write(&p, cut).unwrap();
    let out = d.join("o");
    let line = common::assert_refused(
        2,
        &[
            "e2e",
            "--model",
            "resnet20",
            "--methods",
            "ssgd,topk,qsgd",
            "--pipelining",
            "off",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--compress-on",
            "device",
            "--compress-profile",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &["cut.csv", "qsgd"],
    );
    assert!(!line.contains("rank 1"), "{line}");
    assert_eq!(common::rows_in(&out.join("e2e.csv")), 0, "a case ran first");
}
