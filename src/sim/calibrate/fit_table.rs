//! `gradcomp fit`'s summary on stdout: one line per fitted model of [`FitReport`] (what
//! was fitted, from how many points, its parameters with units, r² and worst relative
//! error), with the fits that should not be trusted marked and why. fits.csv and
//! fits.json hold the numbers; this is for reading.

use super::fit::{FitReport, FitRow};
use super::host::Layout;
use crate::netmodel::TIME_FLOOR_S;
use crate::units::fmt_seconds;

/// Least r² (weighted 1/t², netmodel.rs) of a fit not marked: a line that explains less
/// than nine tenths of its points' variance is not the linear law the simulator treats
/// it as (a conventional bound, set before looking at any run's fits).
pub const MIN_R2: f64 = 0.9;

/// Largest worst relative error of a fit not marked: the simulator's accuracy target
/// (docs/performance.md, "Simulator accuracy", 15%, `simulate --tolerance`'s default); a
/// model that misses one of its own points by more cannot price that point within it.
pub const MAX_WORST_REL_ERR: f64 = 0.15;

/// The reasons, in plain words, not to trust `row`; empty when there is none.
/// `layout` is the measured run's most loaded machine (run.json beside the CSVs): a run
/// with more ranks than cores (times its time dilation) timed every kernel and
/// collective while ranks waited for a core, so its fits say more about the scheduler
/// than the code (as for the simulator's verdicts, sim/run.rs). It applies to rows of
/// the run's own world size (every `compress` row: micro-compress times every rank).
pub fn marks(row: &FitRow, layout: Option<&Layout>) -> Vec<String> {
    let mut out = Vec::new();
    if row.r2.is_finite() && row.r2 < MIN_R2 {
        out.push(format!("poor fit (r² {:.3} < {MIN_R2})", row.r2));
    }
    if row.max_rel_err.is_finite() && row.max_rel_err > MAX_WORST_REL_ERR {
        out.push(format!(
            "worst error {:.1}% > {:.0}%",
            100.0 * row.max_rel_err,
            100.0 * MAX_WORST_REL_ERR
        ));
    }
    // Below the time floor (1 ns, under any timer's resolution) an intercept is rounding.
    if row.unit != "factor" && row.fixed_s < -TIME_FLOOR_S {
        out.push(format!(
            "negative intercept ({}): not physical",
            fmt_seconds(row.fixed_s)
        ));
    }
    if let Some(l) = layout {
        let cores = l.core_equivalents();
        let applies = row.world_size.map_or(true, |n| n == l.ranks_total);
        if applies && l.ranks as u64 > cores {
            let dilated = if l.dilation > 1 {
                format!(
                    " at time dilation {} ({cores} core-equivalents)",
                    l.dilation
                )
            } else {
                String::new()
            };
            out.push(format!("oversubscribed ({}{dilated})", l.what()));
        }
    }
    out
}

/// `x` to three significant digits (`0.123`, `12.3`, `1234`).
fn sig3(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// A message size in bytes with a binary prefix (`4 B`, `64 KiB`, `1.5 MiB`).
fn size(bytes: f64) -> String {
    let mut v = bytes;
    let mut unit = "B";
    for u in ["KiB", "MiB", "GiB"] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if v.fract() == 0.0 {
        format!("{v} {unit}")
    } else {
        format!("{} {unit}", sig3(v))
    }
}

/// The row's cells: kind, what was fitted, world size, points, intercept, slope, r²,
/// worst error.
fn cells(r: &FitRow) -> [String; 8] {
    let what = match r.kind {
        "comm" => match (r.from_bytes, r.to_bytes) {
            (Some(a), Some(b)) => format!("{} {}..{}", r.name, size(a), size(b)),
            _ => r.name.clone(),
        },
        "compress" => format!("{} {}", r.name, r.phase),
        _ if r.phase == "-" => r.name.clone(),
        _ => format!("{} ({})", r.name, r.phase),
    };
    let dash = || "-".to_string();
    let fixed = if r.points == 0 && r.kind == "host" {
        dash()
    } else if r.unit == "factor" {
        format!("{}x", sig3(r.fixed_s))
    } else {
        fmt_seconds(r.fixed_s)
    };
    let slope = match r.unit {
        "byte" | "element" => {
            let mut s = format!("{} ns/{}", sig3(r.per_unit_s * 1e9), r.unit);
            if let Some(p) = r.per_selected_s {
                s += &format!(" + {} ns/selected", sig3(p * 1e9));
            }
            s
        }
        _ => dash(),
    };
    let r2 = if r.r2.is_finite() {
        format!("{:.3}", r.r2)
    } else {
        dash()
    };
    let worst = if r.max_rel_err.is_finite() {
        format!("{:.1}%", 100.0 * r.max_rel_err)
    } else {
        dash()
    };
    [
        r.kind.to_string(),
        what,
        r.world_size.map_or_else(dash, |n| n.to_string()),
        r.points.to_string(),
        fixed,
        slope,
        r2,
        worst,
    ]
}

/// The table of `rep`'s fits (marked against its run's layout, see [`marks`]) and a line
/// under it saying how many are marked and where the files are.
pub fn table(rep: &FitReport) -> String {
    let mut lines = vec![[
        "kind", "fitted", "ranks", "points", "fixed", "per unit", "r²", "worst",
    ]
    .map(String::from)];
    let mut why = vec![String::from("mark")];
    for r in &rep.rows {
        lines.push(cells(r));
        why.push(marks(r, rep.layout.as_ref()).join("; "));
    }
    let marked = why.iter().skip(1).filter(|m| !m.is_empty()).count();
    let mut out = String::new();
    for (line, m) in super::summary::aligned(&lines, 2).lines().zip(&why) {
        out.push_str(line);
        if !m.is_empty() {
            out.push_str("  ");
            out.push_str(m);
        }
        out.push('\n');
    }
    let files: Vec<String> = rep
        .written
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    out.push_str(&format!(
        "{marked} of {} fits marked (r² < {MIN_R2}, worst error > {:.0}%, negative intercept, more ranks than cores); every fit in {}\n",
        rep.rows.len(),
        100.0 * MAX_WORST_REL_ERR,
        if files.is_empty() { "-".into() } else { files.join(" and ") }
    ));
    let untrusted = super::trust::causes(rep);
    if !untrusted.is_empty() {
        out.push_str(&format!(
            "calibration NOT trusted (simulate --fits and choose --fits refuse it without --untrusted-fits): {}\n",
            untrusted.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    /// `(bytes, seconds)` points fitted as `gradcomp fit` fits one regime of a collective
    /// (netmodel.rs: least squares on relative error, weights 1/t²), the normal
    /// equations solved here again, with r² and the worst relative error of that line.
    fn comm_row(points: &[(f64, f64)]) -> FitRow {
        let w = |t: f64| 1.0 / (t * t);
        let s =
            |f: &dyn Fn(f64, f64) -> f64| points.iter().map(|&(x, t)| w(t) * f(x, t)).sum::<f64>();
        let (sw, sx, sxx, st, sxt) = (
            s(&|_, _| 1.0),
            s(&|x, _| x),
            s(&|x, _| x * x),
            s(&|_, t| t),
            s(&|x, t| x * t),
        );
        let beta = (sw * sxt - sx * st) / (sw * sxx - sx * sx);
        let alpha = (st - beta * sx) / sw;
        let pred = |x: f64| alpha + beta * x;
        let mean = st / sw;
        let r2 = 1.0 - s(&|x, t| (pred(x) - t).powi(2)) / s(&|_, t| (t - mean).powi(2));
        let worst = points
            .iter()
            .map(|&(x, t)| (pred(x) - t).abs() / t)
            .fold(0.0, f64::max);
        FitRow {
            kind: "comm",
            name: "allreduce".into(),
            phase: "-".into(),
            world_size: Some(2),
            fixed_s: alpha,
            per_unit_s: beta,
            unit: "byte",
            r2,
            max_rel_err: worst,
            points: points.len(),
            from_bytes: Some(points[0].0),
            to_bytes: Some(points[points.len() - 1].0),
            ..FitRow::default()
        }
    }

    fn layout(ranks: usize, cores: u64, dilation: u64) -> Layout {
        Layout {
            ranks,
            ranks_total: ranks,
            cores,
            machine: "vm".into(),
            dilation,
            load_per_core_start: None,
        }
    }

    const SIZES: [f64; 6] = [1e3, 4e3, 16e3, 64e3, 256e3, 1024e3];

    /// `t = 10 us + 1 ns/byte` exactly: r² 1, no error, nothing to mark.
    #[test]
    fn a_perfect_line_is_not_marked() {
        let pts: Vec<_> = SIZES.iter().map(|&b| (b, 1e-5 + 1e-9 * b)).collect();
        let r = comm_row(&pts);
        assert!((r.r2 - 1.0).abs() < 1e-9 && r.max_rel_err < 1e-9, "{r:?}");
        assert_eq!(marks(&r, Some(&layout(2, 2, 1))), Vec::<String>::new());
        assert_eq!(marks(&r, None), Vec::<String>::new());
    }

    /// Times that do not follow the size (100 / 20 / 150 / 30 / 120 / 40 us): no line
    /// explains them; the marks quote the fit's r² and worst error.
    #[test]
    fn scattered_points_are_marked_poor() {
        let ts = [100e-6, 20e-6, 150e-6, 30e-6, 120e-6, 40e-6];
        let pts: Vec<_> = SIZES.iter().copied().zip(ts).collect();
        let r = comm_row(&pts);
        assert!(r.r2 < 0.9 && r.max_rel_err > 0.15, "{r:?}");
        let m = marks(&r, None);
        assert_eq!(m[0], format!("poor fit (r² {:.3} < 0.9)", r.r2));
        assert_eq!(
            m[1],
            format!("worst error {:.1}% > 15%", 100.0 * r.max_rel_err)
        );
        // The intercept of this line may be anything; the two marks come first.
        assert!(m.len() <= 3, "{m:?}");
    }

    /// A regime whose line crosses zero above 0 bytes: `t = -12.2 ms + 1 ns/byte` over
    /// 16-64 MB (all positive times, a perfect line) has a latency below zero.
    #[test]
    fn a_negative_intercept_is_marked() {
        let pts: Vec<_> = [16e6, 24e6, 32e6, 48e6, 64e6]
            .iter()
            .map(|&b| (b, -12.2e-3 + 1e-9 * b))
            .collect();
        let r = comm_row(&pts);
        assert!((r.fixed_s + 12.2e-3).abs() < 1e-8, "{r:?}");
        assert_eq!(
            marks(&r, None),
            vec!["negative intercept (-12.200ms): not physical".to_string()]
        );
        // A host factor is no intercept; an intercept within 1 ns of 0 is rounding.
        let factor = FitRow {
            unit: "factor",
            fixed_s: -1.0,
            r2: f64::NAN,
            max_rel_err: f64::NAN,
            ..FitRow::default()
        };
        assert!(marks(&factor, None).is_empty());
        let rounding = FitRow {
            fixed_s: -1e-12,
            unit: "element",
            r2: 1.0,
            ..FitRow::default()
        };
        assert!(marks(&rounding, None).is_empty());
    }

    /// 4 ranks on 2 cores: every fit of the run's world size (and every compression fit)
    /// is marked; at 2 ranks, or at time dilation 2 (4 core-equivalents), none is; a
    /// fit of another world size is not the run's.
    #[test]
    fn an_oversubscribed_run_is_marked() {
        let pts: Vec<_> = SIZES.iter().map(|&b| (b, 1e-5 + 1e-9 * b)).collect();
        let mut r = comm_row(&pts);
        r.world_size = Some(4);
        assert_eq!(
            marks(&r, Some(&layout(4, 2, 1))),
            vec!["oversubscribed (4 ranks on 2 cores of vm)".to_string()]
        );
        assert!(marks(&r, Some(&layout(4, 2, 2))).is_empty());
        assert!(marks(&r, Some(&layout(2, 2, 1))).is_empty());
        r.world_size = Some(2);
        assert!(marks(&r, Some(&layout(4, 2, 1))).is_empty());
        r.world_size = None;
        assert_eq!(marks(&r, Some(&layout(4, 2, 1))).len(), 1);
    }

    /// The table: a header, a line per row with its mark, and the count under it.
    #[test]
    fn the_table_has_a_line_per_fit_and_counts_the_marked() {
        let good: Vec<_> = SIZES.iter().map(|&b| (b, 1e-5 + 1e-9 * b)).collect();
        let mut bad = comm_row(&good);
        bad.fixed_s = -1e-3;
        let rep = FitReport {
            rows: vec![comm_row(&good), bad],
            ..FitReport::default()
        };
        let t = table(&rep);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].starts_with("kind  fitted") && lines[0].ends_with("worst  mark"));
        assert!(
            lines[1].starts_with("comm  allreduce 1000 B..1000 KiB"),
            "{t}"
        );
        assert!(lines[1].contains("10.00us") && lines[1].contains("1.00 ns/byte"));
        assert!(!lines[1].contains("negative"));
        assert!(lines[2].ends_with("negative intercept (-1.000ms): not physical"));
        assert!(lines[3].starts_with("1 of 2 fits marked"), "{t}");
    }

    /// The bounds themselves pass (r² of exactly 0.9, a worst error of exactly 15%);
    /// just past them both marks; a dilated oversubscribed run says its dilation.
    #[test]
    fn marks_at_the_bounds_and_with_dilation() {
        let at = FitRow {
            unit: "byte",
            r2: 0.9,
            max_rel_err: 0.15,
            ..FitRow::default()
        };
        assert!(marks(&at, None).is_empty());
        // an intercept of exactly -1 ns is the time floor's rounding, not a negative latency
        let floor = FitRow {
            fixed_s: -1e-9,
            ..at.clone()
        };
        assert!(marks(&floor, None).is_empty());
        let past = FitRow {
            r2: 0.8999,
            max_rel_err: 0.1501,
            ..at.clone()
        };
        assert_eq!(
            marks(&past, None),
            ["poor fit (r² 0.900 < 0.9)", "worst error 15.0% > 15%"]
        );
        // 6 ranks on 2 cores at dilation 2: 4 core-equivalents, still too few
        assert_eq!(
            marks(&at, Some(&layout(6, 2, 2))),
            ["oversubscribed (6 ranks on 2 cores of vm at time dilation 2 (4 core-equivalents))"]
        );
    }

    /// Three significant digits; sizes under the largest binary prefix that keeps the
    /// value at least 1, whole values without decimals.
    #[test]
    fn sig3_and_size_by_hand() {
        for (x, want) in [
            (0.123456, "0.123"),
            (-0.05678, "-0.0568"),
            (0.999, "0.999"),
            (1.0, "1.00"),
            (12.345, "12.3"),
            (100.0, "100"),
            (1234.4, "1234"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(sig3(x), want, "{x}");
        }
        let mib = 1024.0 * 1024.0;
        for (b, want) in [
            (4.0, "4 B"),
            (1023.0, "1023 B"),
            (1024.0, "1 KiB"),
            (1536.0, "1.50 KiB"),
            (64.0 * 1024.0, "64 KiB"),
            (1.5 * mib, "1.50 MiB"),
            (3.0 * 1024.0 * mib, "3 GiB"),
            (1024.0 * 1024.0 * mib, "1024 GiB"),
        ] {
            assert_eq!(size(b), want, "{b}");
        }
    }

    /// Each kind's cells: what was fitted, the intercept as a time, a factor or a dash,
    /// the slope with its unit and the selection term, dashes for what a row lacks.
    #[test]
    fn cells_of_each_kind_by_hand() {
        let compress = FitRow {
            kind: "compress",
            name: "dgc".into(),
            phase: "compress".into(),
            world_size: Some(4),
            fixed_s: 2.5e-5,
            per_unit_s: 1.234e-9,
            unit: "element",
            r2: 0.98765,
            max_rel_err: 0.0456,
            points: 7,
            per_selected_s: Some(3e-9),
            ..FitRow::default()
        };
        assert_eq!(
            cells(&compress),
            [
                "compress",
                "dgc compress",
                "4",
                "7",
                "25.00us",
                "1.23 ns/element + 3.00 ns/selected",
                "0.988",
                "4.6%"
            ]
        );
        let comm = FitRow {
            kind: "comm",
            name: "allgather".into(),
            points: 0,
            fixed_s: 2e-3,
            per_unit_s: 5e-10,
            unit: "byte",
            r2: f64::NAN,
            max_rel_err: f64::NAN,
            ..FitRow::default()
        };
        // no byte range: the name alone; no points is no dash outside host rows
        assert_eq!(
            cells(&comm),
            [
                "comm",
                "allgather",
                "-",
                "0",
                "2.000ms",
                "0.500 ns/byte",
                "-",
                "-"
            ]
        );
        let host = |phase: &str, points: usize, unit: &'static str| FitRow {
            kind: "host",
            name: "jitter".into(),
            phase: phase.into(),
            fixed_s: 1.5,
            unit,
            r2: f64::NAN,
            max_rel_err: f64::NAN,
            points,
            ..FitRow::default()
        };
        let row = |r: FitRow| cells(&r).map(|c| c.to_string());
        assert_eq!(
            row(host("-", 0, "factor")),
            ["host", "jitter", "-", "0", "-", "-", "-", "-"]
        );
        assert_eq!(
            row(host("compress", 3, "factor")),
            [
                "host",
                "jitter (compress)",
                "-",
                "3",
                "1.50x",
                "-",
                "-",
                "-"
            ]
        );
        assert_eq!(
            row(host("-", 3, "s")),
            ["host", "jitter", "-", "3", "1.50s", "-", "-", "-"]
        );
    }

    /// The line under the table counts the marked fits (none of one here) and names the
    /// files written, or a dash.
    #[test]
    fn the_count_line_names_the_files_written() {
        let good: Vec<_> = SIZES.iter().map(|&b| (b, 1e-5 + 1e-9 * b)).collect();
        let mut rep = FitReport {
            rows: vec![comm_row(&good)],
            ..FitReport::default()
        };
        let last = |rep: &FitReport| table(rep).lines().nth(2).unwrap_or("").to_string();
        assert!(
            last(&rep).starts_with("0 of 1 fits marked"),
            "{}",
            last(&rep)
        );
        assert!(last(&rep).ends_with("; every fit in -"), "{}", last(&rep));
        rep.written = vec!["d/fits.csv".into(), "d/fits.json".into()];
        assert!(
            last(&rep).ends_with("; every fit in d/fits.csv and d/fits.json"),
            "{}",
            last(&rep)
        );
    }
}
