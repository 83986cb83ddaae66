//! Tests of compress profiles (`super`): write and read back, the world-size lookup rule,
//! the copy fit, every input error with its line, column, value and fix, `check` and
//! `check_params`.

use super::*;
use crate::compress::MethodParams;

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gradcomp-devprofile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn row(
    method: &str,
    stage: Option<Stage>,
    round: usize,
    phase: usize,
    shape: (usize, usize),
    ws: usize,
    t: f64,
) -> Row {
    Row {
        method: method.into(),
        stage,
        round,
        phase,
        rows: shape.0,
        cols: shape.1,
        world_size: ws,
        time_s: t,
    }
}

/// Every stage, round and phase of `methods` for `shapes` at `ws`, plus copies.
fn full(methods: &[&str], shapes: &[(usize, usize)], ws: usize) -> CompressProfile {
    let mut p = CompressProfile::new("mem.csv");
    p.set_meta("device", "Test GPU");
    p.set_meta("density", "0.001");
    p.set_meta("rank", "4");
    p.set_meta("min_compression_rate", "2");
    let mut t = 1e-6;
    for m in methods {
        let (rounds, phases, _) = method_info(m).unwrap();
        for &s in shapes {
            for round in 0..rounds {
                for phase in 0..phases {
                    for stage in [Stage::Compress, Stage::Decompress] {
                        t *= 1.1;
                        p.insert(row(m, Some(stage), round, phase, s, ws, t))
                            .unwrap();
                    }
                }
            }
        }
    }
    for n in [1024usize, 65536, 1 << 20, 1 << 24] {
        p.insert(row(
            COPY,
            None,
            0,
            0,
            (1, n),
            ws,
            5e-6 + 8.0 * n as f64 / 1e12,
        ))
        .unwrap();
    }
    p
}

#[test]
fn write_then_read_gives_identical_lookups() {
    let shapes = [(64, 147), (1, 64), (10, 64)];
    let mut p = full(&["topk", "powersgd", "acpsgd", "signsgd"], &shapes, 4);
    // A second world size for the all-gather decompress, and an awkward time.
    p.insert(row(
        "topk",
        Some(Stage::Decompress),
        0,
        0,
        (64, 147),
        8,
        1.0 / 3.0,
    ))
    .unwrap();
    p.insert(row("topk", Some(Stage::Decompress), 0, 0, (1, 64), 8, 0.0))
        .unwrap();
    let path = tmp("roundtrip.csv");
    // The binary reads profiles, never writes them (analysis/profile_compress.py does).
    std::fs::write(&path, p.to_csv()).unwrap();
    let q = CompressProfile::read(&path).unwrap();
    assert_eq!(q.rows(), p.rows());
    assert_eq!(q.meta("device"), Some("Test GPU"));
    assert_eq!(q.meta("rank"), Some("4"));
    for r in p.rows() {
        let Some(stage) = r.stage else { continue };
        let want = p.time_s(
            &r.method,
            stage,
            r.round,
            r.phase,
            r.rows,
            r.cols,
            r.world_size,
        );
        assert_eq!(want, Some(r.time_s));
        assert_eq!(
            q.time_s(
                &r.method,
                stage,
                r.round,
                r.phase,
                r.rows,
                r.cols,
                r.world_size
            ),
            want
        );
    }
    assert_eq!(
        q.copy_spec(),
        Some(DeviceSpec {
            name: q.describe(),
            ..p.copy_spec().unwrap()
        })
    );
    // Writing what was read gives the same text.
    assert_eq!(q.to_csv(), p.to_csv());
    assert!(q.describe().contains("roundtrip.csv") && q.describe().contains("Test GPU"));
    assert_eq!(q.methods(), vec!["signsgd", "topk", "powersgd", "acpsgd"]);
    assert_eq!(q.world_sizes("topk"), vec![4, 8]);
    assert_eq!(q.world_sizes("powersgd"), vec![4]);
}

#[test]
fn lookups_follow_the_world_size_rule() {
    let p = full(&["topk", "powersgd"], &[(64, 147)], 4);
    let mut p8 = p.clone();
    p8.insert(row("topk", Some(Stage::Compress), 0, 0, (64, 147), 8, 0.5))
        .unwrap();
    // Exact hit.
    let c4 = p.time_s("topk", Stage::Compress, 0, 0, 64, 147, 4).unwrap();
    assert_eq!(
        p8.time_s("topk", Stage::Compress, 0, 0, 64, 147, 8),
        Some(0.5)
    );
    // Compress at another world size: the nearest (ties to the smaller).
    assert_eq!(
        p.time_s("topk", Stage::Compress, 0, 0, 64, 147, 16),
        Some(c4)
    );
    assert_eq!(
        p8.time_s("topk", Stage::Compress, 0, 0, 64, 147, 6),
        Some(c4)
    );
    assert_eq!(
        p8.time_s("topk", Stage::Compress, 0, 0, 64, 147, 7),
        Some(0.5)
    );
    // An all-gather decompress needs the exact world size; an all-reduce one does not.
    assert!(world_size_matters("topk", Stage::Decompress));
    assert!(!world_size_matters("topk", Stage::Compress));
    assert!(!world_size_matters("powersgd", Stage::Decompress));
    assert!(!world_size_matters("marsit", Stage::Decompress));
    assert!(p
        .time_s("topk", Stage::Decompress, 0, 0, 64, 147, 4)
        .is_some());
    assert_eq!(p.time_s("topk", Stage::Decompress, 0, 0, 64, 147, 8), None);
    assert!(p
        .time_s("powersgd", Stage::Decompress, 1, 0, 64, 147, 32)
        .is_some());
    // Unknown method, shape, round.
    assert_eq!(p.time_s("dgc", Stage::Compress, 0, 0, 64, 147, 4), None);
    assert_eq!(p.time_s("topk", Stage::Compress, 0, 0, 147, 64, 4), None);
    assert_eq!(
        p.time_s("powersgd", Stage::Compress, 2, 0, 64, 147, 4),
        None
    );
}

#[test]
fn copy_rows_fit_launch_and_bandwidth() {
    let p = full(&["ssgd"], &[(1, 10)], 2);
    let s = p.copy_spec().unwrap();
    assert!((s.launch_s - 5e-6).abs() < 1e-12, "{}", s.launch_s);
    assert!(
        (s.mem_bytes_per_s / 1e12 - 1.0).abs() < 1e-9,
        "{}",
        s.mem_bytes_per_s
    );
    // copy_s(bytes) = launch + 2 bytes / bandwidth = the measured copy of bytes/4 elements.
    assert!((s.copy_s(4.0 * 65536.0, 1) - (5e-6 + 8.0 * 65536.0 / 1e12)).abs() < 1e-15);
    assert!(s.flops_per_s.is_infinite());
    // No copy rows: no spec; one size only, or times that shrink with size: an error.
    let mut q = CompressProfile::new("q.csv");
    q.insert(row("ssgd", Some(Stage::Compress), 0, 0, (1, 10), 2, 1e-6))
        .unwrap();
    assert!(q.copy_spec().is_none());
    let text = format!("{HEADER}\ncopy,copy,0,0,1,1000,2,1e-5\ncopy,copy,0,0,1,1000,4,1e-5\n");
    let e = CompressProfile::parse(&text, "one.csv")
        .unwrap_err()
        .to_string();
    assert!(e.contains("one.csv") && e.contains("one size only"), "{e}");
    let text = format!("{HEADER}\ncopy,copy,0,0,1,1000,2,1e-3\ncopy,copy,0,0,1,100000,2,1e-5\n");
    let e = CompressProfile::parse(&text, "shrink.csv")
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not grow"), "{e}");
    // A negative fitted latency is clamped to 0.
    let text = format!("{HEADER}\ncopy,copy,0,0,1,1000,2,1e-6\ncopy,copy,0,0,1,1000000,2,2e-3\n");
    let s = CompressProfile::parse(&text, "c.csv")
        .unwrap()
        .copy_spec()
        .unwrap();
    assert!(s.launch_s >= 0.0 && s.mem_bytes_per_s > 0.0);
}

fn bad(name: &str, text: &str, expect: &[&str]) -> ProfileError {
    let e = CompressProfile::parse(text, name).unwrap_err();
    let s = e.to_string();
    assert!(s.contains(name), "{s}");
    for x in expect {
        assert!(s.contains(x), "expected '{x}' in: {s}");
    }
    assert_eq!(e.exit_code(), 2);
    e
}

#[test]
fn bad_profiles_name_the_line_column_value_and_fix() {
    let good = "# device: Test GPU\n# density: 0.001\nmethod,stage,round,phase,rows,cols,world_size,time_s\n\
                topk,compress,0,0,64,147,4,1e-5\n\
                topk,decompress,0,0,64,147,4,2e-5\n";
    assert!(CompressProfile::parse(good, "good.csv").is_ok());
    bad("empty.csv", "", &["no header"]);
    // Both sides of the bound on one row's time: 60 s is read, 61 s (or microseconds
    // written as seconds) is refused.
    assert!(CompressProfile::parse(&good.replace("4,2e-5", "4,60"), "at_bound.csv").is_ok());
    bad(
        "slow.csv",
        &good.replace("4,2e-5", "4,61"),
        &["line 5", "column time_s", "'61'", "more than 60 s"],
    );
    bad("comments.csv", "# device: x\n\n", &["no header"]);
    bad("header_only.csv", HEADER, &["line 1", "no rows"]);
    bad(
        "missing_col.csv",
        "method,stage,round,phase,rows,cols,time_s\ntopk,compress,0,0,64,147,1e-5\n",
        &["line 1", "missing column 'world_size'", HEADER],
    );
    bad(
        "unknown_col.csv",
        &good.replace("time_s", "seconds"),
        &["line 3", "unknown column 'seconds'"],
    );
    bad(
        "twice_col.csv",
        &good.replace("phase,rows", "rows,rows"),
        &["line 3", "'rows' appears twice"],
    );
    bad(
        "fields.csv",
        &good.replace("64,147,4,2e-5", "64,147,4,2e-5,9"),
        &["line 5", "9 fields where the header has 8"],
    );
    let e = bad(
        "nonnum.csv",
        &good.replace("4,2e-5", "4,fast"),
        &["line 5", "column time_s", "'fast'", "not a time", SCRIPT],
    );
    assert!(matches!(
        e,
        ProfileError::Value {
            column: "time_s",
            ..
        }
    ));
    bad(
        "neg.csv",
        &good.replace("4,2e-5", "4,-0.1"),
        &[
            "line 5",
            "column time_s",
            "'-0.1'",
            "negative",
            "seconds >= 0",
            SCRIPT,
        ],
    );
    bad(
        "nan.csv",
        &good.replace("4,2e-5", "4,NaN"),
        &["line 5", "'NaN'", "not a time"],
    );
    bad(
        "rows.csv",
        &good.replace("0,0,64,147,4,2e-5", "0,0,6x4,147,4,2e-5"),
        &["line 5", "column rows", "'6x4'", "integer >= 1"],
    );
    bad(
        "zero.csv",
        &good.replace("0,0,64,147,4,2e-5", "0,0,64,0,4,2e-5"),
        &["line 5", "column cols", "'0'"],
    );
    let e = bad(
        "method.csv",
        &good.replace("topk,decompress", "top-k,decompress"),
        &["line 5", "unknown method 'top-k'", "ssgd", "qsgd", "copy"],
    );
    assert!(matches!(e, ProfileError::UnknownMethod { .. }));
    bad(
        "stage.csv",
        &good.replace("topk,decompress", "topk,feedback"),
        &[
            "line 5",
            "'feedback' is not a stage of method topk",
            "compress or decompress",
        ],
    );
    bad(
        "copystage.csv",
        &format!("{good}copy,compress,0,0,1,100,4,1e-6\n"),
        &["line 6", "copy rows have stage copy"],
    );
    bad(
        "copyrows.csv",
        &format!("{good}copy,copy,0,0,2,100,4,1e-6\n"),
        &["line 6", "column rows", "must be 1 on copy rows"],
    );
    bad(
        "stagecopy.csv",
        &good.replace("topk,decompress", "topk,copy"),
        &["line 5", "not a stage of method topk"],
    );
    let e = bad(
        "dup.csv",
        &format!("{good}topk,compress,0,0,64,147,4,3e-5\n"),
        &[
            "line 6",
            "topk compress row of shape 64x147",
            "appears again (first on line 4)",
        ],
    );
    assert!(matches!(e, ProfileError::Duplicate { first: 4, .. }));
    // The same operation at another world size is no duplicate.
    assert!(CompressProfile::parse(
        &format!("{good}topk,compress,0,0,64,147,8,3e-5\n"),
        "ws.csv"
    )
    .is_ok());
    bad(
        "round.csv",
        &good.replace("topk,decompress,0", "topk,decompress,1"),
        &["line 5", "round 1 of method topk, which has 1"],
    );
    bad(
        "phase.csv",
        &format!("{good}acpsgd,compress,0,2,64,147,4,3e-5\n"),
        &["line 6", "phase 2 of method acpsgd, which has 2"],
    );
    bad(
        "param.csv",
        &good.replace("density: 0.001", "density: high"),
        &["line 2", "density = 'high'", "not a number"],
    );
    bad(
        "param2.csv",
        &format!("# density: 0.01\n{good}"),
        &["line 3", "differs from '0.01' on line 1"],
    );
    let e = CompressProfile::read("/nonexistent/dir/p.csv").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/dir/p.csv"), "{e}");
    assert_eq!(e.exit_code(), 2);
    // Windows line ends and free-text comments are fine.
    let crlf = format!("# measured on a test rig\r\n{}", good.replace('\n', "\r\n"));
    assert_eq!(
        CompressProfile::parse(&crlf, "crlf.csv").unwrap().rows(),
        CompressProfile::parse(good, "good.csv").unwrap().rows()
    );
    // Code-built rows are validated too.
    let mut p = CompressProfile::new("code");
    assert!(p
        .insert(row("nope", Some(Stage::Compress), 0, 0, (1, 1), 1, 0.0))
        .is_err());
    assert!(p
        .insert(row("topk", Some(Stage::Compress), 0, 0, (1, 1), 1, -1.0))
        .is_err());
    assert!(p.insert(row("topk", None, 0, 0, (1, 1), 1, 0.0)).is_err());
    assert!(p
        .insert(row("topk", Some(Stage::Compress), 0, 0, (0, 1), 1, 0.0))
        .is_err());
}

#[test]
fn check_names_the_missing_method_shape_and_world_size() {
    let m = crate::models::build("resnet20").unwrap();
    let shapes: Vec<(usize, usize)> = m.tensors.iter().map(|t| t.rows_cols()).collect();
    let mut distinct = shapes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let methods = ["topk", "powersgd", "acpsgd"];
    let p = full(&methods, &distinct, 4);
    p.check(&methods, &shapes, 4).unwrap();
    // Compress and all-reduce decompress are taken from the nearest world size...
    p.check(&["powersgd", "acpsgd"], &shapes, 64).unwrap();
    // ...an all-gather decompress is not.
    let e = p.check(&methods, &shapes, 8).unwrap_err();
    let s = e.to_string();
    assert!(
        matches!(e, ProfileError::MissingWorldSize { world_size: 8, .. }),
        "{s}"
    );
    assert!(
        s.contains("topk decompress")
            && s.contains("world size 4 only, not 8")
            && s.contains("--world-size 8"),
        "{s}"
    );
    // A method the profile lacks.
    let e = p
        .check(&["topk", "dgc"], &shapes, 4)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mem.csv")
            && e.contains("no rows for method dgc")
            && e.contains("topk, powersgd, acpsgd")
            && e.contains("--methods"),
        "{e}"
    );
    // A shape the profile lacks: resnet50's shapes against a resnet20 profile.
    let r50: Vec<(usize, usize)> = crate::models::build("resnet50")
        .unwrap()
        .tensors
        .iter()
        .map(|t| t.rows_cols())
        .collect();
    let e = p.check(&["powersgd"], &r50, 4).unwrap_err();
    let s = e.to_string();
    assert!(matches!(e, ProfileError::MissingShape { .. }), "{s}");
    assert!(
        s.contains("no powersgd compress row for shape")
            && s.contains("--shapes")
            && s.contains(SCRIPT),
        "{s}"
    );
    // One tensor's shape dropped from the profile: that shape is named.
    let gone = (64usize, 576usize);
    assert!(distinct.contains(&gone));
    let keep: Vec<(usize, usize)> = distinct.iter().copied().filter(|&s| s != gone).collect();
    let q = full(&methods, &keep, 4);
    let e = q.check(&methods, &shapes, 4).unwrap_err().to_string();
    assert!(
        e.contains("no topk compress row for shape 64x576")
            && e.contains(&format!("1 of the run's {} shapes", distinct.len())),
        "{e}"
    );
    // Only one round of Power-SGD measured: round 1 is missing.
    let mut r = CompressProfile::new("r.csv");
    for stage in [Stage::Compress, Stage::Decompress] {
        r.insert(row("powersgd", Some(stage), 0, 0, (64, 576), 4, 1e-5))
            .unwrap();
    }
    let e = r
        .check(&["powersgd"], &[(64, 576)], 4)
        .unwrap_err()
        .to_string();
    assert!(e.contains("round 1, phase 0"), "{e}");
    // An unknown method name is missing too.
    assert!(p.check(&["omgs"], &shapes, 4).is_err());
    p.check(&[], &shapes, 4).unwrap();
}

#[test]
fn check_params_compares_what_the_times_depend_on() {
    let p = full(&["topk", "powersgd"], &[(64, 147)], 4);
    let mut params = MethodParams::default();
    p.check_params(&["topk", "powersgd", "ssgd"], &params)
        .unwrap();
    params.density = Some(0.01);
    let e = p.check_params(&["topk"], &params).unwrap_err().to_string();
    assert!(
        e.contains("density = 0.001")
            && e.contains("density = 0.01")
            && e.contains("--density 0.01"),
        "{e}"
    );
    // Density does not matter to powersgd.
    p.check_params(&["powersgd"], &params).unwrap();
    params.rank = 32;
    let e = p
        .check_params(&["powersgd"], &params)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rank = 4") && e.contains("--lowrank-rank 32"),
        "{e}"
    );
    // A parameter the profile does not record.
    let params = MethodParams::default();
    let e = p.check_params(&["qsgd"], &params).unwrap_err().to_string();
    assert!(
        e.contains("qsgd's time depends on qsgd_levels") && e.contains("# qsgd_levels: 127"),
        "{e}"
    );
    // No `# min_compression_rate`: each method at its own (acpsgd 0, powersgd 2).
    let text = format!("# rank: 4\n# nesterov: false\n# clip_norm: 0\n# density: 1e-3\n{HEADER}\nacpsgd,compress,0,0,4,4,2,1e-6\n");
    let q = CompressProfile::parse(&text, "q.csv").unwrap();
    q.check_params(&["acpsgd", "dgc", "powersgd"], &params)
        .unwrap();
    // Recorded at 2 (Power-SGD's default): acpsgd at its default 0 is refused.
    let e = p
        .check_params(&["acpsgd"], &params)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("min_compression_rate = 2")
            && e.contains("min_compression_rate = 0")
            && e.contains("without --min-compression-rate"),
        "{e}"
    );
    let at_two = MethodParams {
        min_compression_rate: Some(2.0),
        ..params.clone()
    };
    p.check_params(&["acpsgd"], &at_two).unwrap();
    let mut nest = params.clone();
    nest.nesterov = true;
    let e = q.check_params(&["dgc"], &nest).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("nesterov"), "{e}");
}

/// Shapes a profile lacks (merged buckets): element-wise methods interpolate in log time
/// over log elements between measured counts, keep the smallest count's time below it and
/// scale the largest's by the element ratio above it (closed forms restated here); the
/// low-rank methods and DGC are never interpolated, and an all-gather decompress only at
/// a world size the profile has.
#[test]
fn lacking_shapes_are_interpolated_in_elements_for_element_wise_methods() {
    let mut p = CompressProfile::new("mem.csv");
    let c = Some(Stage::Compress);
    let d = Some(Stage::Decompress);
    for r in [
        row("topk", c, 0, 0, (1, 1000), 8, 10e-6),
        row("topk", c, 0, 0, (100, 1000), 8, 100e-6),
        // Two shapes of one element count: their median (here the mean of two).
        row("topk", c, 0, 0, (10, 100), 8, 8e-6),
        row("topk", c, 0, 0, (1, 1000), 16, 12e-6),
        row("topk", d, 0, 0, (1, 1000), 8, 20e-6),
        row("powersgd", c, 0, 0, (100, 1000), 8, 50e-6),
    ] {
        p.insert(r).unwrap();
    }
    let at = |m: &str, st: Stage, n: usize, ws: usize| p.time_s_by_elements(m, st, 0, 0, n, ws);
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-12 * b.max(1e-9));
    // 1000 elements: (1 x 1000, 10 us) and (10 x 100, 8 us) -> 9 us.
    assert!(close(at("topk", Stage::Compress, 1000, 8), 9e-6));
    // Half way in log elements between 1e3 (9 us) and 1e5 (100 us): sqrt(9 * 100) us.
    assert!(close(
        at("topk", Stage::Compress, 10_000, 8),
        (9e-6f64 * 100e-6).sqrt()
    ));
    assert!(close(at("topk", Stage::Compress, 10, 8), 9e-6));
    assert!(close(at("topk", Stage::Compress, 1_000_000, 8), 1e-3));
    // Compress at a world size without rows: the nearest world size's rows (8 for 9, and
    // the 16-worker row stands alone at 16).
    assert!(close(at("topk", Stage::Compress, 10, 9), 9e-6));
    // All-gather decompress: exactly the world size.
    assert!(close(at("topk", Stage::Decompress, 2000, 8), 40e-6));
    assert_eq!(at("topk", Stage::Decompress, 2000, 16), None);
    assert_eq!(at("powersgd", Stage::Compress, 100_000, 8), None);
    assert_eq!(at("dgc", Stage::Compress, 100_000, 8), None);
    assert_eq!(at("sketch", Stage::Compress, 100_000, 8), None);
}
