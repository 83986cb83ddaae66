//! Tests of the cost fits (`super`): known and noisy alpha-beta lines, the clamps, the
//! two-regime choice and its pricing, reading micro_comm.csv and its errors.

use super::*;
use std::path::PathBuf;

fn tmp(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gradcomp-netmodel-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn fit_recovers_known_parameters() {
    let (alpha, beta) = (25e-6, 1.0 / 10e9);
    let pts: Vec<(f64, f64)> = (0..20)
        .map(|i| {
            let b = (4u64 << i) as f64;
            (b, alpha + beta * b)
        })
        .collect();
    let (ab, q) = AlphaBeta::fit(&pts).unwrap();
    assert!((ab.alpha_s - alpha).abs() / alpha < 1e-9, "{ab:?}");
    assert!((ab.beta_s_per_byte - beta).abs() / beta < 1e-9, "{ab:?}");
    assert!(
        (q.r2 - 1.0).abs() < 1e-9 && q.max_rel_err < 1e-9 && q.n == 20,
        "{q:?}"
    );
    assert!((ab.time_s(1e6) - (alpha + beta * 1e6)).abs() < 1e-15);
}

#[test]
fn fit_with_noise_is_close_and_relative_weighting_keeps_alpha() {
    // +-1 % multiplicative noise (deterministic pattern); sizes from 4 B to 256 MiB.
    let (alpha, beta) = (5e-6, 1.0 / 12.5e9);
    let pts: Vec<(f64, f64)> = (0..27)
        .map(|i| {
            let b = (4u64 << i) as f64;
            let noise = if i % 2 == 0 { 1.01 } else { 0.99 };
            (b, (alpha + beta * b) * noise)
        })
        .collect();
    let (ab, q) = AlphaBeta::fit(&pts).unwrap();
    assert!((ab.alpha_s - alpha).abs() / alpha < 0.05, "{ab:?}");
    assert!((ab.beta_s_per_byte - beta).abs() / beta < 0.05, "{ab:?}");
    assert!(q.r2 > 0.99 && q.max_rel_err < 0.05, "{q:?}");
}

#[test]
fn fit_clamps_negative_coefficients() {
    // Decreasing times: beta would be negative -> beta = 0, alpha = weighted mean.
    let (ab, _) = AlphaBeta::fit(&[(0.0, 2.0), (10.0, 1.0)]).unwrap();
    assert_eq!(ab.beta_s_per_byte, 0.0);
    assert!(ab.alpha_s > 1.0 && ab.alpha_s < 2.0);
    // A line through a negative intercept: alpha = 0 and beta refitted.
    let (ab, _) = AlphaBeta::fit(&[(10.0, 0.5), (20.0, 1.5)]).unwrap();
    assert_eq!(ab.alpha_s, 0.0);
    assert!(ab.beta_s_per_byte > 0.0);
    // All-zero times (nothing to compress) fit to zero.
    let (c, q) = CompressCost::fit(&[(1.0, 0.0), (2.0, 0.0)]).unwrap();
    assert_eq!(c, CompressCost::default());
    assert_eq!(q.r2, 1.0);
}

#[test]
fn fit_rejects_too_few_sizes_and_bad_points() {
    assert!(AlphaBeta::fit(&[]).is_err());
    assert!(AlphaBeta::fit(&[(8.0, 1.0), (8.0, 1.1)]).is_err());
    let e = AlphaBeta::fit(&[(8.0, f64::NAN), (16.0, 1.0)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("finite"), "{e}");
}

const COMM_HEADER: &str = "schema_version,run_id,collective,world_size,bytes,total_bytes,elements,iters,warmup,check,median_s,t_pure_s\n";

#[test]
fn reads_micro_comm_csv() {
    let mut body = COMM_HEADER.to_string();
    for (coll, n, a, b) in [
        ("allreduce", 2usize, 10e-6, 1e-9),
        ("allgather", 2, 20e-6, 2e-9),
        ("allreduce", 4, 30e-6, 3e-9),
    ] {
        for bytes in [4u64, 4096, 1 << 20] {
            let total = if coll == "allgather" {
                bytes * n as u64
            } else {
                bytes
            };
            let t = a + b * bytes as f64;
            body += &format!(
                "1,20240101-000000,{coll},{n},{bytes},{total},{},10,2,pass,{t},\n",
                bytes / 4
            );
        }
    }
    // Overlap rows: fitted on t_pure_s, not median_s.
    for bytes in [4u64, 1 << 20] {
        let pure = 1e-6 + 1e-9 * bytes as f64;
        body += &format!(
            "1,20240101-000000,iallreduce-overlap,2,{bytes},{bytes},1,10,2,off,{},{pure}\n",
            5.0 * pure
        );
    }
    let p = tmp("comm-good.csv", &body);
    let m = CommModels::from_micro_comm_csv(&p).unwrap();
    let fit = m.get("allreduce", 4).unwrap();
    assert!(fit.upper().is_none(), "{fit:?}");
    let ab = fit.lower().line;
    assert!(
        (ab.alpha_s - 30e-6).abs() < 1e-12 && (ab.beta_s_per_byte - 3e-9).abs() < 1e-18,
        "{ab:?}"
    );
    let ag = m.get("allgather", 2).unwrap().lower().line;
    assert!(
        (ag.alpha_s - 20e-6).abs() < 1e-12 && (ag.beta_s_per_byte - 2e-9).abs() < 1e-18,
        "{ag:?}"
    );
    let ov = m.get("iallreduce-overlap", 2).unwrap().lower().line;
    assert!((ov.alpha_s - 1e-6).abs() < 1e-12, "{ov:?}");
    assert!(m.get("allreduce", 8).is_none());
    assert!((m.quality("allreduce", 2).unwrap().r2 - 1.0).abs() < 1e-9);
    assert_eq!(m.keys().len(), 4);

    // Without `bytes`, all-gather sizes come from total_bytes / world_size.
    let mut body2 = "schema_version,collective,world_size,total_bytes,median_s\n".to_string();
    for bytes in [4u64, 4096] {
        body2 += &format!(
            "1,allgather,2,{},{}\n",
            bytes * 2,
            20e-6 + 2e-9 * bytes as f64
        );
    }
    let m2 = CommModels::from_micro_comm_csv(tmp("comm-total.csv", &body2)).unwrap();
    let ag2 = m2.get("allgather", 2).unwrap().lower().line;
    assert!((ag2.beta_s_per_byte - 2e-9).abs() < 1e-18, "{ag2:?}");
}

/// micro_comm.csv rows of `coll` at world size 2 over 4 B-4 MiB (powers of two), time
/// `t(bytes)`.
fn comm_csv(coll: &str, t: impl Fn(f64) -> f64) -> String {
    let mut body = "schema_version,collective,world_size,bytes,median_s\n".to_string();
    for i in 0..21 {
        let b = (4u64 << i) as f64;
        body += &format!("1,{coll},2,{b},{}\n", t(b));
    }
    body
}

/// Two regimes as a tbf-shaped link shows them in a micro-comm sweep (docs/performance.md,
/// "Emulated network"): up to 16 KiB 15 us + 0.2 ns/B (the token bucket passes them
/// at memory speed), from 32 KiB the link's 8 ns/B (1 Gbit/s) and no startup.
fn tbf_like(b: f64) -> f64 {
    if b <= 16384.0 {
        15e-6 + 0.2e-9 * b
    } else {
        8e-9 * b
    }
}

#[test]
fn two_regime_data_is_priced_right_in_both_regimes() {
    let p = tmp("comm-two-regimes.csv", &comm_csv("allreduce", tbf_like));
    let m = CommModels::from_micro_comm_csv(&p).unwrap();
    let fit = m.get("allreduce", 2).unwrap();
    for i in 0..21 {
        let b = (4u64 << i) as f64;
        let (got, want) = (fit.time_s(b), tbf_like(b));
        assert!(
            (got - want).abs() / want < 0.02,
            "{b} B: predicted {got:.3e} s, measured {want:.3e} s ({fit:?})"
        );
    }
}

/// `t(b)` at the 21 sizes 4 B .. 4 MiB, times `1 +- noise` alternately (a deterministic
/// stand-in for measurement noise).
fn sweep(t: impl Fn(f64) -> f64, noise: f64) -> Vec<(f64, f64)> {
    (0..21)
        .map(|i| {
            let b = (4u64 << i) as f64;
            let f = if i % 2 == 0 { 1.0 + noise } else { 1.0 - noise };
            (b, t(b) * f)
        })
        .collect()
}

#[test]
fn two_regime_fit_recovers_both_lines_and_the_break() {
    // Exact, and with +-1 % multiplicative noise (deterministic pattern).
    for noise in [0.0, 0.01] {
        let pts = sweep(tbf_like, noise);
        let (fit, q) = CommFit::fit(&pts, "test").unwrap();
        assert_eq!(fit.regimes().len(), 2, "{noise}: {fit:?}");
        let up = fit.upper().expect("two regimes");
        let (lo, ul) = (fit.lower().line, up.line);
        let tol = 2.0 * noise + 1e-9;
        assert!(
            (lo.alpha_s - 15e-6).abs() / 15e-6 < tol + 0.01
                && (lo.beta_s_per_byte - 0.2e-9).abs() / 0.2e-9 < 0.2,
            "{noise}: {fit:?}"
        );
        assert!(
            (ul.beta_s_per_byte - 8e-9).abs() / 8e-9 < tol
                && ul.alpha_s.abs() < tol * 8e-9 * 32768.0,
            "{noise}: {fit:?}"
        );
        assert_eq!((fit.lower().to_bytes, up.from_bytes), (16384.0, 32768.0));
        assert_eq!((fit.lower().from_bytes, up.to_bytes), (4.0, 4194304.0));
        let (lq, uq) = (fit.lower().quality.unwrap(), up.quality.unwrap());
        assert_eq!((lq.n, uq.n, q.n), (13, 8, 21));
        assert!(q.max_rel_err < tol + 0.01 && q.r2 > 0.99, "{q:?}");
        // Between the two fitted sizes: linear from one line's end to the other's start.
        let mid = fit.time_s(24576.0);
        let ends = (lo.time_s(16384.0), ul.time_s(32768.0));
        assert!(
            (mid - (ends.0 + ends.1) / 2.0).abs() < 1e-15,
            "{mid} {ends:?}"
        );
        // The line that prices a size: its regime's, or the secant in the gap.
        assert_eq!(fit.local_line(1e6), ul);
        assert_eq!(fit.local_line(100.0), lo);
        assert!((fit.local_line(24576.0).time_s(24576.0) - mid).abs() < 1e-15);
        // Parameters survive a round trip (e.g. a max over ranks).
        let back = CommFit::from_params(fit.to_params());
        assert_eq!((back.lower().line, back.upper().unwrap().line), (lo, ul));
    }
}

/// Three lines close to the 4-node dilated all-gather's (docs/performance.md,
/// "Time dilation"): memory speed up to 4 KiB, 25 ns/B from 8 KiB, 42 ns/B from 256 KiB.
fn three_regimes(b: f64) -> f64 {
    if b <= 4096.0 {
        20e-6 + 0.05e-9 * b
    } else if b <= 131072.0 {
        25e-9 * b
    } else {
        42e-9 * b - 1.0e-3
    }
}

#[test]
fn three_regime_fit_recovers_the_three_lines() {
    for noise in [0.0, 0.01] {
        let pts = sweep(three_regimes, noise);
        let (fit, q) = CommFit::fit(&pts, "test").unwrap();
        let rs = fit.regimes();
        assert_eq!(rs.len(), 3, "{noise}: {fit:?}");
        let bounds: Vec<(f64, f64)> = rs.iter().map(|r| (r.from_bytes, r.to_bytes)).collect();
        assert_eq!(
            bounds,
            [(4.0, 4096.0), (8192.0, 131072.0), (262144.0, 4194304.0)]
        );
        let tol = 2.0 * noise + 1e-9;
        for (r, beta) in rs[1..].iter().zip([25e-9, 42e-9]) {
            assert!(
                (r.line.beta_s_per_byte - beta).abs() / beta < tol,
                "{noise}: {r:?}"
            );
        }
        assert!(q.max_rel_err < tol + 0.01, "{q:?}");
        // Every size priced within the noise, the middle regime's included.
        for &(b, _) in &pts {
            let want = three_regimes(b);
            assert!(
                (fit.time_s(b) - want).abs() / want < tol + 0.01,
                "{b} B: {} vs {want}",
                fit.time_s(b)
            );
        }
        // Parameters survive a round trip (e.g. a max over ranks).
        assert_eq!(CommFit::from_params(fit.to_params()).regimes().len(), 3);
    }
    // Fewer than three sizes per regime: at most two regimes of three sizes.
    let pts: Vec<(f64, f64)> = [4.0, 8.0, 16.0, 1e6, 2e6, 4e6]
        .map(|b| (b, three_regimes(b)))
        .to_vec();
    assert!(CommFit::fit(&pts, "test").unwrap().0.regimes().len() <= 2);
}

#[test]
fn one_regime_data_stays_one_line() {
    // Exact lines (latency-bound, bandwidth-bound, both) and two noisy ones (+-1 %,
    // +-5 %, deterministic pattern): the same line as the single-line fit.
    let cases: [(&str, f64, f64, f64); 5] = [
        ("exact", 25e-6, 1e-10, 0.0),
        ("bandwidth only", 0.0, 8e-9, 0.0),
        ("latency only", 30e-6, 0.0, 0.0),
        ("noise", 5e-6, 0.8e-10, 0.01),
        ("noise 5%", 20e-6, 8e-9, 0.05),
    ];
    for (what, alpha, beta, noise) in cases {
        let pts = sweep(|b| alpha + beta * b, noise);
        let (fit, _) = CommFit::fit(&pts, "test").unwrap();
        assert!(fit.upper().is_none(), "{what}: {fit:?}");
        let (a, b, _) = fit_linear(&pts, "x").unwrap();
        assert_eq!(fit.lower().line, AlphaBeta::new(a, b), "{what}");
    }
    // Too few sizes for two regimes of three: always one line.
    let pts: Vec<(f64, f64)> = [4.0, 8.0, 16.0, 1e6, 2e6]
        .map(|b| (b, tbf_like(b)))
        .to_vec();
    assert!(CommFit::fit(&pts, "test").unwrap().0.upper().is_none());
}

#[test]
fn micro_comm_csv_errors_are_clear() {
    // Missing column.
    let p = tmp(
        "comm-nocol.csv",
        "schema_version,collective,world_size,bytes\n1,allreduce,2,4\n",
    );
    let e = CommModels::from_micro_comm_csv(&p).unwrap_err().to_string();
    assert!(
        e.contains("comm-nocol.csv")
            && e.contains("`median_s`")
            && e.contains("gradcomp micro-comm"),
        "{e}"
    );
    // Wrong schema version names the file, line and value.
    let p = tmp("comm-v2.csv", "schema_version,collective,world_size,bytes,median_s\n1,allreduce,2,4,1e-5\n2,allreduce,2,8,1e-5\n");
    let e = CommModels::from_micro_comm_csv(&p).unwrap_err();
    assert!(
        matches!(e, NetModelError::SchemaVersion { line: 3, .. }),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains("comm-v2.csv") && e.contains("`2`") && e.contains("version 1"),
        "{e}"
    );
    // No schema_version at all.
    let p = tmp(
        "comm-nover.csv",
        "collective,world_size,bytes,median_s\nallreduce,2,4,1e-5\n",
    );
    let e = CommModels::from_micro_comm_csv(&p).unwrap_err().to_string();
    assert!(e.contains("`schema_version`"), "{e}");
    // Bad value: file, line, column, value.
    let p = tmp(
        "comm-bad.csv",
        "schema_version,collective,world_size,bytes,median_s\n1,allreduce,2,4,fast\n",
    );
    let e = CommModels::from_micro_comm_csv(&p).unwrap_err().to_string();
    assert!(
        e.contains("comm-bad.csv line 2") && e.contains("`median_s`") && e.contains("`fast`"),
        "{e}"
    );
    // One size only: cannot fit, says why.
    let p = tmp(
        "comm-one.csv",
        "schema_version,collective,world_size,bytes,median_s\n1,allreduce,2,4,1e-5\n",
    );
    let e = CommModels::from_micro_comm_csv(&p).unwrap_err().to_string();
    assert!(
        e.contains("allreduce at world_size 2") && e.contains("two distinct"),
        "{e}"
    );
    // Empty and absent files.
    let p = tmp(
        "comm-empty.csv",
        "schema_version,collective,world_size,bytes,median_s\n",
    );
    assert!(matches!(
        CommModels::from_micro_comm_csv(&p),
        Err(NetModelError::Empty { .. })
    ));
    let e = CommModels::from_micro_comm_csv("/nonexistent/micro_comm.csv")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/micro_comm.csv"), "{e}");
}

/// The planners sum tensors' costs into groups: a fit over many small tensors (costlier
/// per element) and a few large ones must price the sum, which the relative fit does
/// not (the small tensors set its slope; ResNet-50's Count Sketch calibration).
#[test]
fn fit_sums_prices_the_sum_of_many_small_and_few_large_tensors() {
    // 100 small tensors (1k..100k elements) at 6.4 ns per element, 10 large ones
    // (1..2.35 M) at 3.9 ns.
    let mut points: Vec<(f64, f64)> = (1..=100)
        .map(|k| {
            let e = 1000.0 * k as f64;
            (e, 0.5e-6 + 6.4e-9 * e)
        })
        .collect();
    points.extend((0..10).map(|k| {
        let e = 1e6 + 1.5e5 * k as f64;
        (e, 3.9e-9 * e)
    }));
    let total_e: f64 = points.iter().map(|p| p.0).sum();
    let total_t: f64 = points.iter().map(|p| p.1).sum();
    let sum_of = |c: CompressCost| c.fixed_s * points.len() as f64 + c.per_element_s * total_e;
    let (sums, _) = CompressCost::fit_sums(&points).unwrap();
    let (rel, _) = CompressCost::fit(&points).unwrap();
    let err = |t: f64| (t - total_t).abs() / total_t;
    assert!(err(sum_of(sums)) < 0.05, "fit_sums: {sums:?}");
    // What the relative fit did: the small tensors' 6.4 ns per element sets the slope.
    assert!(err(sum_of(rel)) > 0.20, "fit: {rel:?}");
    // Exact data stays exact under either weighting.
    let line: Vec<(f64, f64)> = (1..6)
        .map(|k| (k as f64 * 1e5, 2e-6 + 3e-9 * k as f64 * 1e5))
        .collect();
    let (c, _) = CompressCost::fit_sums(&line).unwrap();
    assert!((c.fixed_s - 2e-6).abs() < 1e-12 && (c.per_element_s - 3e-9).abs() < 1e-18);
}

/// The selection term: times generated by `fixed + per_element e + per_selected s`
/// with DGC's selection at density 0.001 (the whole tensor up to 9,216 elements, then
/// about 2,000; a 1-D tensor selects nothing) come back exactly; the linear fit of the
/// same times misprices a sampled-whole 9,216-element tensor against a 36,864 one.
#[test]
fn selection_fit_recovers_a_three_term_law() {
    let law = |e: f64, s: f64| 0.2e-6 + 1.0e-9 * e + 9.0e-9 * s;
    let shapes = [
        (128.0, 0.0),
        (640.0, 640.0),
        (2304.0, 2304.0),
        (9216.0, 9216.0),
        (36864.0, 2168.0),
    ];
    let points: Vec<(f64, f64, f64)> = shapes.iter().map(|&(e, s)| (e, s, law(e, s))).collect();
    let (c, q) = CompressCost::fit_selection(&points).unwrap();
    assert!((c.fixed_s - 0.2e-6).abs() < 1e-12, "{c:?}");
    assert!((c.per_element_s - 1.0e-9).abs() < 1e-15, "{c:?}");
    assert!((c.per_selected_s - 9.0e-9).abs() < 1e-15, "{c:?}");
    assert!(q.max_rel_err < 1e-9 && q.r2 > 1.0 - 1e-12, "{q:?}");
    for &(e, s) in &shapes {
        let t = c.time_s(e as usize, s as usize);
        assert!((t - law(e, s)).abs() < 1e-12 * law(e, s).max(1.0));
    }
    // The linear fit cannot order them: 9,216 sampled whole costs 92 us against the
    // 36,864-element tensor's 57 us.
    let linear: Vec<(f64, f64)> = points.iter().map(|&(e, _, t)| (e, t)).collect();
    let (lin, _) = CompressCost::fit(&linear).unwrap();
    assert!(lin.time_s(9216, 0) < lin.time_s(36864, 0));
    assert!(law(9216.0, 9216.0) > law(36864.0, 2168.0));
}

/// Every coefficient stays non-negative: times that fall with the selection (no such
/// method; a noisy measurement) give a model without the term; points that select
/// nothing give exactly [`CompressCost::fit`]'s model; a negative selection is an error.
#[test]
fn selection_fit_keeps_terms_non_negative() {
    let points = [
        (1000.0, 1000.0, 2.0e-6),
        (4000.0, 100.0, 8.1e-6),
        (16000.0, 50.0, 32.0e-6),
        (64000.0, 10.0, 128.5e-6),
    ];
    let (c, _) = CompressCost::fit_selection(&points).unwrap();
    assert!(
        c.fixed_s >= 0.0 && c.per_element_s > 0.0 && c.per_selected_s >= 0.0,
        "{c:?}"
    );
    let linear = [
        (1000.0, 0.0, 3e-6),
        (4000.0, 0.0, 7e-6),
        (9000.0, 0.0, 12e-6),
    ];
    let xy: Vec<(f64, f64)> = linear.iter().map(|&(e, _, t)| (e, t)).collect();
    assert_eq!(
        CompressCost::fit_selection(&linear).unwrap(),
        CompressCost::fit(&xy).unwrap()
    );
    assert!(CompressCost::fit_selection(&[(10.0, -1.0, 1e-6), (20.0, 2.0, 2e-6)]).is_err());
}
