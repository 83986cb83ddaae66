//! `simulate --compare`'s verdicts (part of [`super`], the accuracy comparison): each
//! measured case's simulated iteration against the measured one, its noise (own spread,
//! compression fit and host jitter), the oversubscription guard, the verdict, and
//! `OUT/sim_vs_measured.csv`.

use super::{compare, Comparison, MeasuredCase};
use crate::record::Existing;
use crate::sim::host::Layout;
use crate::sim::run::SimulateRequest;
use crate::sim::{Result, SimRow};
use std::path::Path;

/// Per host-compression case (by label): how far its simulated iteration moves with its
/// compression fit's spread and with the run's host jitter
/// ([`super::measured::host_cost_sensitivity`]); `None` where there is none to apply.
pub(in crate::sim) type Sensitivity = std::collections::HashMap<String, (Option<f64>, Option<f64>)>;

/// One sim_vs_measured.csv row (docs/csv-schema.md): a measured case and its simulated
/// iteration. Times in their `Display` form, as this file has always had them.
#[derive(Default, serde::Serialize)]
struct VsMeasuredRow {
    schema_version: u32,
    case: String,
    method: String,
    world_size: usize,
    #[serde(serialize_with = "crate::record::display")]
    measured_iter_s: f64,
    #[serde(serialize_with = "crate::record::display")]
    simulated_iter_s: f64,
    #[serde(serialize_with = "crate::record::display")]
    rel_err: f64,
    #[serde(serialize_with = "crate::record::display")]
    tolerance: f64,
    /// `calibration`: the case calibrated the host model that priced it (in sample);
    /// `validation`: it did not (a leave-one-method-out model, or another run's).
    role: &'static str,
    /// Rows (repeats) of the measured case and their spread (the median interval's
    /// width over the median, [`crate::measure::stats::spread_about_median`]).
    rounds: usize,
    spread_rel: Option<f64>,
    /// Host compression cases: the simulated host compression and decompression time
    /// over the simulated iteration (0 on the device).
    host_compress_share: f64,
    /// Host compression cases with `--fits`: how far the compression fit's own rounds
    /// move the prediction ([`super::measured::host_cost_sensitivity`] at the method's
    /// [`crate::sim::fit::FitReport::compress_spread`]; empty otherwise). The verdict judges the
    /// error against `spread_rel` plus this.
    fit_spread_rel: Option<f64>,
    /// Host compression cases: how far the run's host jitter moves the prediction
    /// ([`super::measured::host_cost_sensitivity`] at [`super::measured::host_jitter`]); the verdict's
    /// noise is at least this.
    host_jitter_rel: Option<f64>,
    /// `within`, `outside`, `too-noisy` (spread above the tolerance) or
    /// `ranks-exceed-cores` (not held to the tolerance); [`verdict`].
    verdict: &'static str,
    /// The measured run's most loaded machine when its ranks and their device threads
    /// outnumber its cores (`4 ranks + 4 device threads on 2 cores of HOST`); else empty.
    oversubscribed: String,
}

/// A case's verdict: `ranks-exceed-cores` when the measured ranks outnumbered the cores
/// (every rank waits for cores, which the target does not cover, so the case is not held
/// to it however quiet; issue 29), `too-noisy` when its own run-to-run spread exceeds the
/// tolerance (the error cannot be told from the noise), else `within` or `outside` the
/// tolerance.
pub fn verdict(
    rel_err: f64,
    spread_rel: Option<f64>,
    ranks_exceed_cores: bool,
    tolerance: f64,
) -> &'static str {
    if ranks_exceed_cores {
        "ranks-exceed-cores"
    } else if spread_rel.is_some_and(|s| s > tolerance) {
        "too-noisy"
    } else if rel_err.abs() <= tolerance {
        "within"
    } else {
        "outside"
    }
}

/// A measured case's spread in words: `spread 3.1% of 5` (rounds), or `one round: no
/// spread` when it has none (never `NaN%`).
fn spread_text(spread_rel: Option<f64>, rounds: usize) -> String {
    match spread_rel {
        Some(s) if s.is_finite() => format!("spread {:>5.1}% of {rounds}", s * 100.0),
        _ if rounds <= 1 => "one round: no spread".into(),
        _ => format!("no spread of {rounds}"),
    }
}

/// The comparison's last line. A comparison that judged no case says so ("not judged")
/// instead of "0 of 0 within", so it never reads as a pass.
fn judged_summary(
    within: usize,
    outside: usize,
    noisy: usize,
    not_held: usize,
    tolerance: f64,
) -> String {
    let rest = format!(
        "{noisy} too noisy to judge (spread over rounds, the compression fit's included, or the host jitter's share, above the tolerance), {not_held} not held to it (more ranks than cores)"
    );
    if within + outside == 0 {
        format!(
            "not judged: no case could be held to the {:.0}% tolerance, so this comparison says nothing about the simulator's accuracy; {rest}",
            tolerance * 100.0
        )
    } else {
        format!(
            "{within} of {} judged case(s) within {:.0}%; {rest}",
            within + outside,
            tolerance * 100.0
        )
    }
}

/// Compare the simulated `rows` with the measured cases: print each case and the
/// summary, write `OUT/sim_vs_measured.csv`, and return the cases outside the tolerance.
pub(in crate::sim) fn write_comparison(
    req: &SimulateRequest,
    measured: &[MeasuredCase],
    rows: &[SimRow],
    in_sample: Vec<(String, bool)>,
    sensitivity: &Sensitivity,
    jitter: Option<f64>,
) -> Result<Vec<String>> {
    let cmp = compare(measured, rows)?;
    if let Some(j) = jitter {
        println!(
            "host jitter {:.1}%: the 10th to 90th percentile of the host-compression rows' time over their case's median; each host case's noise is at least how far its simulated iteration moves when its host compression does by this much",
            j * 100.0
        );
    }
    let mut out = Vec::with_capacity(cmp.len());
    let mut outside = Vec::new();
    let in_sample: std::collections::HashMap<String, bool> = in_sample.into_iter().collect();
    let layout = measured_layout(req)?;
    for c in &cmp {
        let calibrated = in_sample.get(&c.key).copied().unwrap_or(false);
        let row = vs_measured_row(req, c, calibrated, layout.as_ref(), sensitivity);
        println!("{}", case_line(&row));
        if row.verdict == "outside" {
            outside.push(format!("{} ({:+.1}%)", c.key, c.rel_err * 100.0));
        }
        out.push(row);
    }
    println!("{}", comparison_summary(&out, req.tolerance));
    let path = req.out.join("sim_vs_measured.csv");
    crate::record::write_all(&path, &out, Existing::Replace)?;
    Ok(outside)
}

/// The sim_vs_measured.csv row of comparison `c`: its noise (own spread, compression
/// fit and host jitter, the latter two for cases with host compression) and verdict.
fn vs_measured_row(
    req: &SimulateRequest,
    c: &Comparison,
    calibrated: bool,
    layout: Option<&Layout>,
    sensitivity: &Sensitivity,
) -> VsMeasuredRow {
    let (exceed, over) = case_oversubscription(layout, c.world_size, c.compute_none);
    let (fit_spread, jitter_part) = sensitivity
        .get(&c.key)
        .filter(|_| c.host_compress_share > 0.0)
        .copied()
        .unwrap_or((None, None));
    let v = verdict(
        c.rel_err,
        super::measured::case_noise(c.spread_rel, fit_spread, jitter_part),
        exceed,
        req.tolerance,
    );
    VsMeasuredRow {
        schema_version: crate::record::SCHEMA_VERSION,
        case: c.key.clone(),
        method: c.method.clone(),
        world_size: c.world_size,
        measured_iter_s: c.measured_s,
        simulated_iter_s: c.simulated_s,
        rel_err: c.rel_err,
        tolerance: req.tolerance,
        role: if calibrated {
            "calibration"
        } else {
            "validation"
        },
        rounds: c.rounds,
        spread_rel: c.spread_rel,
        host_compress_share: c.host_compress_share,
        fit_spread_rel: fit_spread,
        host_jitter_rel: jitter_part,
        verdict: v,
        oversubscribed: over,
    }
}

/// A compared case in one line: measured (with its spread and noise parts), simulated,
/// the relative error and the verdict.
fn case_line(r: &VsMeasuredRow) -> String {
    format!(
        "{:<70} measured {:>10.3} ms ({}{}{}) simulated {:>10.3} ms  {:+6.1}%  {}{}",
        r.case,
        r.measured_iter_s * 1e3,
        spread_text(r.spread_rel, r.rounds),
        r.fit_spread_rel.map_or(String::new(), |f| format!(
            ", compression fit {:.1}%",
            f * 100.0
        )),
        r.host_jitter_rel.map_or(String::new(), |j| format!(
            ", host jitter {:.1}%",
            j * 100.0
        )),
        r.simulated_iter_s * 1e3,
        r.rel_err * 100.0,
        r.verdict,
        if r.role == "calibration" {
            " (calibration)"
        } else {
            ""
        }
    )
}

/// The comparison's closing line: the verdicts' counts ([`judged_summary`]) and the
/// oversubscribed machines, if any.
fn comparison_summary(out: &[VsMeasuredRow], tolerance: f64) -> String {
    let count = |v: &str| out.iter().filter(|r| r.verdict == v).count();
    let over: std::collections::BTreeSet<&str> = out
        .iter()
        .map(|r| r.oversubscribed.as_str())
        .filter(|o| !o.is_empty())
        .collect();
    format!(
        "{}{}",
        judged_summary(
            count("within"),
            count("outside"),
            count("too-noisy"),
            count("ranks-exceed-cores"),
            tolerance
        ),
        if over.is_empty() {
            String::new()
        } else {
            format!(
                "; oversubscribed: {}",
                over.into_iter().collect::<Vec<_>>().join("; ")
            )
        }
    )
}

/// Whether the ranks of the measured run's most loaded machine `l` outnumber its cores
/// (times the run's dilation K), and, when the ranks plus their device threads (compute
/// not `none`) do, the text saying so.
/// [`oversubscription`] for a measured case of `world_size` ranks: the run's layout applies
/// to the cases of the run's own world size (every rank of the run, on every machine;
/// `ranks_total`), not to those of one machine's count.
fn case_oversubscription(
    layout: Option<&Layout>,
    world_size: usize,
    compute_none: bool,
) -> (bool, String) {
    match layout {
        Some(l) if l.ranks_total == world_size => oversubscription(l, compute_none),
        _ => (false, String::new()),
    }
}

fn oversubscription(l: &Layout, compute_none: bool) -> (bool, String) {
    let threads = if compute_none { 0 } else { l.ranks };
    let cores = l.core_equivalents();
    let over = (l.ranks + threads) as u64 > cores;
    let text = match (over, l.dilation > 1) {
        (false, _) => String::new(),
        (true, false) => format!(
            "{} ranks + {threads} device threads on {} cores of {}",
            l.ranks, l.cores, l.machine
        ),
        (true, true) => format!(
            "{} ranks + {threads} device threads on {} cores of {} at time dilation {} ({cores} core-equivalents)",
            l.ranks, l.cores, l.machine, l.dilation
        ),
    };
    (l.ranks as u64 > cores, text)
}

/// The measured run's most loaded machine, from the run.json beside `--compare`'s file
/// (else `--fits`'s).
fn measured_layout(req: &SimulateRequest) -> Result<Option<Layout>> {
    let dirs = [
        req.compare
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf),
        req.fits.clone(),
    ];
    for d in dirs.into_iter().flatten() {
        let p = d.join("run.json");
        if let Some(layout) = crate::sim::host::layout_from_run_json(&p)? {
            return Ok(Some(layout));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 ranks on 2 cores exceed them undilated; at time dilation K they have 2K
    /// core-equivalents: K = 2 holds the ranks (not their device threads), K = 4 both.
    #[test]
    fn time_dilation_multiplies_the_cores_a_run_had() {
        let at = |dilation| Layout {
            ranks: 4,
            ranks_total: 4,
            cores: 2,
            machine: "vm".into(),
            dilation,
            load_per_core_start: None,
        };
        assert_eq!(
            oversubscription(&at(1), false),
            (true, "4 ranks + 4 device threads on 2 cores of vm".into())
        );
        assert_eq!(
            oversubscription(&at(2), false),
            (
                false,
                "4 ranks + 4 device threads on 2 cores of vm at time dilation 2 (4 core-equivalents)"
                    .into()
            )
        );
        assert_eq!(oversubscription(&at(2), true), (false, String::new()));
        assert_eq!(oversubscription(&at(4), false), (false, String::new()));
        assert_eq!(at(1).what(), "4 ranks on 2 cores of vm");
    }

    #[test]
    fn verdicts_judge_only_cases_quieter_than_the_tolerance_on_enough_cores() {
        assert_eq!(verdict(0.10, Some(0.05), false, 0.15), "within");
        assert_eq!(verdict(-0.16, Some(0.05), false, 0.15), "outside");
        // One row: no spread known, judged.
        assert_eq!(verdict(-0.16, None, false, 0.15), "outside");
        // The spread decides before the error: a small error is no pass either.
        assert_eq!(verdict(0.01, Some(0.2), false, 0.15), "too-noisy");
        // More ranks than cores: not held to the tolerance, quiet or noisy.
        assert_eq!(verdict(0.5, Some(0.2), true, 0.15), "ranks-exceed-cores");
        assert_eq!(verdict(0.5, Some(0.05), true, 0.15), "ranks-exceed-cores");
        assert_eq!(verdict(0.01, None, true, 0.15), "ranks-exceed-cores");
    }

    #[test]
    fn one_round_has_no_spread_and_judging_nothing_is_not_a_pass() {
        assert_eq!(spread_text(None, 1), "one round: no spread");
        assert_eq!(spread_text(Some(f64::NAN), 1), "one round: no spread");
        assert_eq!(spread_text(Some(0.031), 5), "spread   3.1% of 5");
        assert_eq!(spread_text(None, 3), "no spread of 3");
        let none = judged_summary(0, 0, 2, 4, 0.15);
        assert!(
            none.starts_with("not judged: no case could be held to the 15% tolerance"),
            "{none}"
        );
        assert!(
            none.contains("2 too noisy") && none.contains("4 not held"),
            "{none}"
        );
        assert!(!none.contains("0 of 0"), "{none}");
        let some = judged_summary(3, 1, 0, 0, 0.15);
        assert!(
            some.starts_with("3 of 4 judged case(s) within 15%;"),
            "{some}"
        );
    }

    /// Two machines: 3 ranks on `a` (2 cores), 1 on `b`: the run has 4 ranks, so its
    /// cases of 4 ranks are not held to the tolerance (3 ranks > 2 cores on `a`), and
    /// cases of another world size (3: one machine's count) are not judged by this layout.
    #[test]
    fn the_guard_matches_cases_by_the_runs_total_ranks() {
        let l = Layout {
            ranks: 3,
            ranks_total: 4,
            cores: 2,
            machine: "a".into(),
            dilation: 1,
            load_per_core_start: None,
        };
        let (exceed, text) = case_oversubscription(Some(&l), 4, false);
        assert!(exceed, "{text}");
        assert_eq!(text, "3 ranks + 3 device threads on 2 cores of a");
        assert_eq!(
            case_oversubscription(Some(&l), 3, false),
            (false, String::new())
        );
        assert_eq!(
            case_oversubscription(None, 4, false),
            (false, String::new())
        );
        // Enough cores: not exceeded, though 3 ranks + 3 threads are named.
        let big = Layout { cores: 8, ..l };
        assert_eq!(
            case_oversubscription(Some(&big), 4, true),
            (false, String::new())
        );
    }

    /// A spread of exactly the tolerance is not above it: the case is judged (`>`, not
    /// `>=`, in [`verdict`]'s rule).
    #[test]
    fn a_spread_equal_to_the_tolerance_is_judged() {
        assert_eq!(verdict(0.01, Some(0.15), false, 0.15), "within");
        assert_eq!(verdict(0.2, Some(0.15), false, 0.15), "outside");
    }

    /// Judged = within + outside, whatever the split: one of each is 2 judged, none
    /// within of two is still 2 judged (not "not judged").
    #[test]
    fn the_judged_count_is_within_plus_outside() {
        let s = judged_summary(1, 1, 0, 0, 0.15);
        assert!(s.starts_with("1 of 2 judged case(s) within 15%;"), "{s}");
        let s = judged_summary(0, 2, 0, 0, 0.10);
        assert!(s.starts_with("0 of 2 judged case(s) within 10%;"), "{s}");
    }

    /// A case's printed line, every part by hand: the label padded to 70, measured and
    /// simulated in ms to 3 digits, the spread, the compression fit's and the host
    /// jitter's parts, the signed error to one digit, the verdict and `(calibration)` for
    /// an in-sample case; a one-round validation case has none of the parts.
    #[test]
    fn a_case_line_by_hand() {
        let r = VsMeasuredRow {
            case: "m/topk".into(),
            measured_iter_s: 0.0125,
            simulated_iter_s: 0.015,
            rel_err: 0.2,
            role: "calibration",
            rounds: 5,
            spread_rel: Some(0.031),
            fit_spread_rel: Some(0.02),
            host_jitter_rel: Some(0.05),
            verdict: "outside",
            ..VsMeasuredRow::default()
        };
        let pad = " ".repeat(70 - "m/topk".len());
        assert_eq!(
            case_line(&r),
            format!("m/topk{pad} measured     12.500 ms (spread   3.1% of 5, compression fit 2.0%, host jitter 5.0%) simulated     15.000 ms   +20.0%  outside (calibration)")
        );
        let r = VsMeasuredRow {
            case: "m/ssgd".into(),
            measured_iter_s: 0.1,
            simulated_iter_s: 0.095,
            rel_err: -0.05,
            role: "validation",
            rounds: 1,
            verdict: "within",
            ..VsMeasuredRow::default()
        };
        assert_eq!(
            case_line(&r),
            format!("m/ssgd{pad} measured    100.000 ms (one round: no spread) simulated     95.000 ms    -5.0%  within")
        );
    }

    /// The closing line counts each verdict (1 within, 1 outside, 1 too noisy, 2 not
    /// held) and names each oversubscribed machine once, sorted; without one it ends at
    /// the counts.
    #[test]
    fn the_closing_line_counts_each_verdict_and_names_each_oversubscribed_machine_once() {
        let row = |verdict, over: &str| VsMeasuredRow {
            verdict,
            oversubscribed: over.into(),
            ..VsMeasuredRow::default()
        };
        let rows = [
            row("within", ""),
            row("outside", ""),
            row("too-noisy", ""),
            row("ranks-exceed-cores", "b"),
            row("ranks-exceed-cores", "a"),
            row("ranks-exceed-cores", "a"),
        ];
        let counts = "1 of 2 judged case(s) within 15%; 1 too noisy to judge (spread over rounds, the compression fit's included, or the host jitter's share, above the tolerance), 3 not held to it (more ranks than cores)";
        assert_eq!(
            comparison_summary(&rows, 0.15),
            format!("{counts}; oversubscribed: a; b")
        );
        assert_eq!(
            comparison_summary(&rows[..3], 0.15),
            "1 of 2 judged case(s) within 15%; 1 too noisy to judge (spread over rounds, the compression fit's included, or the host jitter's share, above the tolerance), 0 not held to it (more ranks than cores)"
        );
    }
}
