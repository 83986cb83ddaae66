//! Whether a calibration run can price anything: signs in its own data that its ranks
//! shared their cores with other work while it was measured (issue 49). Such a run's
//! micro-comm points include collectives that waited for a descheduled rank (one 1.2 ms
//! all-gather timed at 709 ms), so its fitted lines price a case at 10-100x its
//! measurement and its host model ends at the bounds of its search, and nothing said so.
//! `gradcomp fit` prints the causes and records them in fits.json; `simulate --fits` and
//! `choose --fits` refuse such a calibration unless told to price with it anyway.
//!
//! Each check is a property a calibration on an idle machine has whatever its hardware,
//! with its threshold set from the recorded corpus (tests/data/sim-accuracy: 62 runs on
//! five machine kinds, none tripped) against runs recorded beside busy loops
//! (tests/data/loaded-calibration).

use super::fit::FitReport;
use super::host::MAX_BWD_SLOWDOWN;

/// Largest worst relative error of a collective's fit over its own micro-comm points
/// below which the run is trusted: at 0.9 one point took 10x what the line through its
/// neighbours gives (relative error `|fit - t| / t`, netmodel.rs). Idle corpus runs
/// reach 0.75 (a 4x point, the 2-vCPU guests); the loaded runs 0.99999 (100,000x).
pub const MAX_COMM_POINT_REL_ERR: f64 = 0.9;

/// Largest one-minute load average per core at the run's start (run.json
/// `load_avg_start`, the minute before the ranks started, so other work's) below which
/// the run is trusted. Idle corpus runs reach 1.39 (the development guest beside a
/// build); the loaded runs 2.0-5.3.
pub const MAX_LOAD_PER_CORE_START: f64 = 2.0;

/// Largest ratio of the largest to the smallest per-round start latency (the device
/// thread's hand-off, a fixed cost of the machine) below which the run is trusted:
/// idle corpus runs stay within 1.6x over 5-10 rounds.
pub const MAX_START_ROUND_RATIO: f64 = 2.0;

/// The reasons, in plain words, not to price with `rep`'s calibration; empty when there
/// is none.
pub fn causes(rep: &FitReport) -> Vec<String> {
    let mut out = Vec::new();
    let stalled: Vec<_> = rep
        .rows
        .iter()
        .filter(|r| r.kind == "comm" && r.max_rel_err >= MAX_COMM_POINT_REL_ERR)
        .collect();
    if let Some(worst) = stalled
        .iter()
        .max_by(|a, b| a.max_rel_err.total_cmp(&b.max_rel_err))
    {
        out.push(format!(
            "{} of {} collective fits miss one of their own points by {:.0}% or more (a collective at least {:.0}x its fitted time: a rank waited for a core); worst: {} {}",
            stalled.len(),
            rep.rows.iter().filter(|r| r.kind == "comm").count(),
            100.0 * MAX_COMM_POINT_REL_ERR,
            1.0 / (1.0 - MAX_COMM_POINT_REL_ERR),
            worst.name,
            over_fit(worst.max_rel_err)
        ));
    }
    for (n, cal) in &rep.host {
        let h = &cal.all;
        if h.points > 0 && h.bwd_slowdown >= MAX_BWD_SLOWDOWN {
            out.push(format!(
                "at {n} ranks the host model's slowdown inside backward is at its bound ({MAX_BWD_SLOWDOWN}x): the e2e rows are slower than any host effect the model has"
            ));
        }
        let (lo, hi) = h.start_range_s;
        if h.rounds > 1 && lo > 0.0 && hi / lo > MAX_START_ROUND_RATIO {
            out.push(format!(
                "at {n} ranks the start latency's rounds disagree ({} to {}, more than {MAX_START_ROUND_RATIO}x apart): the machine changed under the run",
                crate::units::fmt_seconds(lo),
                crate::units::fmt_seconds(hi)
            ));
        }
    }
    if let Some(l) = &rep.layout {
        if let Some(load) = l.load_per_core_start {
            if load >= MAX_LOAD_PER_CORE_START {
                out.push(format!(
                    "the machine was busy when the run started: one-minute load average {:.2} per core on {} (at least {MAX_LOAD_PER_CORE_START})",
                    load, l.machine
                ));
            }
        }
    }
    out
}

/// A fit's worst relative error `e = |fit - t| / t` in words: a point above its line by
/// `1 / (1 - e)` when `e < 1`, else one the line overprices by `1 + e`.
fn over_fit(e: f64) -> String {
    if e < 1.0 {
        format!("one point {:.0}x its fitted time", 1.0 / (1.0 - e))
    } else {
        format!("priced at {:.1}x one of its points", 1.0 + e)
    }
}

/// `simulate --fits` / `choose --fits`: an error naming the causes when `rep`'s
/// calibration is not to be trusted and `accept` is false; with `accept`, the warning to
/// print (`None`: nothing to say).
pub fn check(
    rep: &FitReport,
    dir: &std::path::Path,
    accept: bool,
) -> super::Result<Option<String>> {
    let c = causes(rep);
    if c.is_empty() {
        return Ok(None);
    }
    let what = format!(
        "--fits {}: the calibration run cannot be trusted: {}",
        dir.display(),
        c.join("; ")
    );
    if accept {
        Ok(Some(format!("{what} (priced anyway: --untrusted-fits)")))
    } else {
        Err(super::SimError::Input(format!(
            "{what}. Re-run the calibration on an idle machine, or give --untrusted-fits to price with it anyway"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::fit::FitRow;
    use crate::sim::host::{HostCalibration, HostModel, Layout};

    fn comm(name: &str, max_rel_err: f64) -> FitRow {
        FitRow {
            kind: "comm",
            name: name.into(),
            max_rel_err,
            ..FitRow::default()
        }
    }

    fn host(h: HostModel) -> std::collections::BTreeMap<usize, HostCalibration> {
        [(
            2,
            HostCalibration {
                all: h,
                held_out: Default::default(),
            },
        )]
        .into()
    }

    fn layout(load: Option<f64>) -> Layout {
        Layout {
            ranks: 2,
            ranks_total: 2,
            cores: 2,
            machine: "vm".into(),
            dilation: 1,
            load_per_core_start: load,
        }
    }

    /// An idle calibration: points within 4x of their fits (the corpus' worst), a host
    /// model inside its bounds, start latencies within 1.6x over rounds, load 1.39 per
    /// core: nothing to say.
    #[test]
    fn an_idle_calibration_is_trusted() {
        let rep = FitReport {
            rows: vec![comm("allgather", 0.75), comm("allreduce", 0.2)],
            host: host(HostModel {
                points: 8,
                rounds: 7,
                bwd_slowdown: 3.83,
                start_range_s: (1.0e-4, 1.6e-4),
                ..HostModel::default()
            }),
            layout: Some(layout(Some(1.39))),
            ..FitReport::default()
        };
        assert_eq!(causes(&rep), Vec::<String>::new());
        assert!(check(&rep, std::path::Path::new("d"), false)
            .unwrap()
            .is_none());
    }

    /// Each cause alone, just past its threshold, named in its own words.
    #[test]
    fn each_sign_of_a_shared_machine_is_named() {
        // A collective point 10x its line: e = 1 - 1/10.
        let rep = FitReport {
            rows: vec![comm("allgather", 0.9), comm("allreduce", 0.2)],
            ..FitReport::default()
        };
        let c = causes(&rep);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(
            c[0].starts_with("1 of 2 collective fits") && c[0].contains("allgather one point 10x"),
            "{c:?}"
        );
        // Overpriced by 3x: e = 2.
        let rep = FitReport {
            rows: vec![comm("allreduce", 2.0)],
            ..FitReport::default()
        };
        assert!(
            causes(&rep)[0].contains("priced at 3.0x"),
            "{:?}",
            causes(&rep)
        );

        let at_bound = HostModel {
            points: 4,
            bwd_slowdown: MAX_BWD_SLOWDOWN,
            ..HostModel::default()
        };
        let c = causes(&FitReport {
            host: host(at_bound.clone()),
            ..FitReport::default()
        });
        assert!(c.len() == 1 && c[0].contains("at its bound (16x)"), "{c:?}");
        // Not calibrated (no points): the default model says nothing.
        let c = causes(&FitReport {
            host: host(HostModel {
                points: 0,
                ..at_bound
            }),
            ..FitReport::default()
        });
        assert!(c.is_empty(), "{c:?}");

        let spread = |lo: f64, hi: f64, rounds: usize| {
            causes(&FitReport {
                host: host(HostModel {
                    points: 4,
                    rounds,
                    start_range_s: (lo, hi),
                    ..HostModel::default()
                }),
                ..FitReport::default()
            })
        };
        assert!(spread(1e-4, 2.0e-4, 3).is_empty());
        let c = spread(1e-4, 2.01e-4, 3);
        assert!(c.len() == 1 && c[0].contains("rounds disagree"), "{c:?}");
        // One round has no spread to judge.
        assert!(spread(1e-4, 1.0, 1).is_empty());

        let busy = |load| {
            causes(&FitReport {
                layout: Some(layout(load)),
                ..FitReport::default()
            })
        };
        assert!(busy(Some(1.99)).is_empty());
        assert!(busy(None).is_empty());
        let c = busy(Some(2.0));
        assert!(
            c.len() == 1 && c[0].contains("load average 2.00 per core on vm"),
            "{c:?}"
        );
    }

    /// Refused by default, with the fix in the message; priced with a warning on request.
    #[test]
    fn an_untrusted_calibration_is_refused_unless_accepted() {
        let rep = FitReport {
            layout: Some(layout(Some(5.0))),
            ..FitReport::default()
        };
        let d = std::path::Path::new("/runs/r1");
        let e = check(&rep, d, false).unwrap_err().to_string();
        assert!(
            e.contains("--fits /runs/r1: the calibration run cannot be trusted")
                && e.contains("--untrusted-fits"),
            "{e}"
        );
        let w = check(&rep, d, true).unwrap().unwrap();
        assert!(w.contains("priced anyway"), "{w}");
    }

    /// A worst error of exactly 1 (the line at twice a point) is an overprice, 2.0x, not
    /// a point `1 / (1 - 1)` = infinitely far above it.
    #[test]
    fn an_error_of_exactly_one_is_priced_at_twice_the_point() {
        assert_eq!(over_fit(1.0), "priced at 2.0x one of its points");
        assert_eq!(over_fit(0.5), "one point 2x its fitted time");
    }

    /// A smallest start latency of 0 gives no ratio to judge (the rounds are not said to
    /// disagree, however large the largest).
    #[test]
    fn a_zero_start_latency_gives_no_ratio() {
        let c = causes(&FitReport {
            host: host(HostModel {
                points: 4,
                rounds: 3,
                start_range_s: (0.0, 1e-4),
                ..HostModel::default()
            }),
            ..FitReport::default()
        });
        assert!(c.is_empty(), "{c:?}");
    }
}
