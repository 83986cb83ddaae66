//! Host effects on the e2e schedule that the micro benchmarks cannot see, calibrated
//! from a measured run (`gradcomp fit DIR` with `DIR/e2e.csv` and `DIR/run.json`):
//!
//! - **CPU share** `cpu_share = min(1, cores / ranks)` on the most loaded machine of the
//!   measured run (`run.json`: `hosts`, `host_cores`; ranks with one `host_kernels` boot
//!   id are one machine whatever their host names, as netlab's nodes). micro-compress times one kernel call
//!   between barriers, so a rank rarely has to share its core there; inside e2e every
//!   rank compresses at once and, with more ranks than cores, each gets `cpu_share` of
//!   one. The simulator divides every CPU phase (pack, compress, feedback, decompress)
//!   by it. With device compression the engine pauses the emulated device while the
//!   host does the real compression, so the rank's own share of that work is not on the
//!   timeline; the rest, `(1 - cpu_share)` of the charged time, is: it is spent inside
//!   the rank's next collective, where the ranks that computed last are scheduled last
//!   (4 ranks on 2 cores, sim-accuracy config: qsgd's allgathers took 3.0 ms per
//!   iteration against 0.3 ms in micro-comm, the extra about 1x its 3.2 ms of host work,
//!   and every method alike; rank 0's collectives either 80 us or ~1 ms, a scheduler
//!   slice). The simulator adds it to the next exchange.
//! - **Start latency** `start_s`: from the iteration's start to the emulated device
//!   running (a condition-variable hand-off to the device thread plus the timer
//!   overshoot of its first sleep); the median of `fwd_s` measured minus modelled.
//! - **Resynchronisation** `sync_s`: added to a bucket's first exchange when the
//!   communication thread had to wait for the device before it (always the first bucket
//!   without pipelining). micro-comm times collectives back to back, with the ranks
//!   already in step; in e2e a waiting thread is woken late and the ranks reach the
//!   exchange out of step (wake-ups, OS noise), and the collective waits for the last.
//!   Per calibration row without pipelining, the latency at which the simulated
//!   `iter_s` meets the measured one (bisection; the schedule is monotone in it); the
//!   same latency applies with pipelining.
//! - **Work inside backward** `bwd_slowdown` (pipelining on): while backward runs, every
//!   rank's device thread wakes once per layer (59 times in 1.3 ms for ResNet-20 on the
//!   rtx2080ti preset) and takes cores from the communication threads, so their work
//!   (pack, compress, exchange, decompress) before the end of backward takes
//!   `bwd_slowdown` times its fitted time; after it, full speed. Per calibration row with
//!   pipelining, the factor (>= 1) at which the simulated `iter_s` meets the measured one.
//!   (A per-wait latency in its place, fitted the same way, put the whole penalty of
//!   dense ssgd's long exchanges on every small bucket's wait, the last one included:
//!   compressed methods came out 12-16% high at 4 ranks on 2 cores; measured, their
//!   exchanges are slow inside backward and fast after it.)
//!
//! All are fitted on the dense baseline (`ssgd`, no compression, so every difference is
//! the host's), each the median over rows (repeat ssgd through a run: a whole case can
//! land in a slow spell of a shared machine). The ssgd rows are calibration; every other
//! measured case stays out of sample.

use super::{e2e_rows, simulate, CostModel, Result, SimCase, SimError};
use crate::bench::stats::median;
use std::collections::BTreeMap;
use std::path::Path;

/// The method whose rows calibrate the latencies (the dense baseline).
pub const CALIBRATION_METHOD: &str = "ssgd";

/// See the module docs. `Default` is the ideal host (share 1, no latencies).
#[derive(Clone, Debug, PartialEq)]
pub struct HostModel {
    pub cpu_share: f64,
    pub start_s: f64,
    /// Per wait for the device (both schedules).
    pub sync_s: f64,
    /// Factor (>= 1) on the communication thread's work while backward still runs
    /// (pipelining on): the ranks' device threads wake once per layer and take cores from
    /// the exchanges.
    pub bwd_slowdown: f64,
    /// ssgd rows the latencies were fitted on (0: not calibrated).
    pub points: usize,
    /// Where the values came from (for sim.csv's `cost_source`).
    pub source: String,
}

impl Default for HostModel {
    fn default() -> HostModel {
        HostModel {
            cpu_share: 1.0,
            start_s: 0.0,
            sync_s: 0.0,
            bwd_slowdown: 1.0,
            points: 0,
            source: "ideal host".into(),
        }
    }
}

impl HostModel {
    pub fn describe(&self) -> String {
        format!("host cpu share {:.2}, start {:.1} us, resync {:.1} us, work during backward x{:.3} ({})", self.cpu_share, self.start_s * 1e6, self.sync_s * 1e6, self.bwd_slowdown, self.source)
    }
}

/// CPU share per rank from `run.json` (`hosts` and `host_cores`, one entry per rank):
/// `min(1, cores / ranks)` on the most loaded host, with a description. `None` when the
/// file is missing or predates `host_cores`.
pub fn cpu_share_from_run_json(path: &Path) -> Result<Option<(f64, String)>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let rerr = |msg: String| SimError::Read {
        path: path.display().to_string(),
        msg,
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| rerr(format!("not JSON: {e}")))?;
    let (Some(hosts), Some(cores)) = (
        v.get("hosts").and_then(|h| h.as_array()),
        v.get("host_cores").and_then(|c| c.as_array()),
    ) else {
        return Ok(None);
    };
    if hosts.len() != cores.len() || hosts.is_empty() {
        return Err(rerr(format!(
            "`hosts` has {} entries but `host_cores` {}; expected one per rank",
            hosts.len(),
            cores.len()
        )));
    }
    // One machine per kernel boot id where run.json has them (netlab's nodes are network
    // namespaces of one machine, each with its own host name), else per host name.
    let kernels = v.get("host_kernels").and_then(|k| k.as_array());
    if let Some(k) = kernels {
        if k.len() != hosts.len() {
            return Err(rerr(format!(
                "`hosts` has {} entries but `host_kernels` {}; expected one per rank",
                hosts.len(),
                k.len()
            )));
        }
    }
    // Per machine: ranks, the fewest cores any of them may use, its host names.
    let mut machines: BTreeMap<String, (usize, u64, Vec<String>)> = BTreeMap::new();
    for (i, (h, c)) in hosts.iter().zip(cores).enumerate() {
        let host = h.as_str().unwrap_or("?").to_string();
        let machine = match kernels
            .and_then(|k| k[i].as_str())
            .filter(|k| !k.is_empty())
        {
            Some(k) => format!("kernel {k}"),
            None => format!("host {host}"),
        };
        let c = c.as_u64().filter(|&c| c > 0).ok_or_else(|| {
            rerr(format!(
                "`host_cores` entry `{c}` is not a positive integer"
            ))
        })?;
        let e = machines.entry(machine).or_insert((0, c, Vec::new()));
        e.0 += 1;
        e.1 = e.1.min(c);
        if !e.2.contains(&host) {
            e.2.push(host);
        }
    }
    let (ranks, cores, names) = machines
        .values()
        .min_by(|a, b| (a.1 as f64 / a.0 as f64).total_cmp(&(b.1 as f64 / b.0 as f64)))
        .expect("at least one host");
    let share = (*cores as f64 / *ranks as f64).min(1.0);
    let what = if names.len() > 1 {
        format!(
            "{ranks} ranks on {cores} cores of {} ({} host names, one machine)",
            names[0],
            names.len()
        )
    } else {
        format!("{ranks} ranks on {cores} cores of {}", names[0])
    };
    Ok(Some((share, what)))
}

/// Largest factor the calibration gives the work during backward.
const MAX_BWD_SLOWDOWN: f64 = 16.0;

/// The `x` in `[lo, hi]` at which the non-decreasing `f(x)` meets `target` (`lo` when
/// `f(lo)` is already there, `hi` when `f(hi)` is still below), by 40 bisections.
fn bisect(lo: f64, hi: f64, target: f64, mut f: impl FnMut(f64) -> Result<f64>) -> Result<f64> {
    if f(lo)? >= target {
        return Ok(lo);
    }
    if f(hi)? < target {
        return Ok(hi);
    }
    let (mut lo, mut hi) = (lo, hi);
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if f(mid)? < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(0.5 * (lo + hi))
}

/// A measured dense-baseline row used for calibration.
struct Sample {
    case: SimCase,
    fwd_s: f64,
    iter_s: f64,
}

/// Calibrate a [`HostModel`] per world size from the `ssgd` rows of `e2e_csv` (rows with
/// `compute = none` are left out: their device never sleeps). `costs(n)` gives the cost
/// model (network, compression) the host model is added to. `cpu_share` (from
/// [`cpu_share_from_run_json`]) applies to every world size of the file (one run, one
/// layout); world sizes without ssgd rows get the share and no latencies.
pub fn calibrate(
    e2e_csv: &Path,
    cpu_share: Option<(f64, String)>,
    costs: &dyn Fn(usize) -> Result<CostModel>,
) -> Result<BTreeMap<usize, HostModel>> {
    let (share, share_src) =
        cpu_share.unwrap_or((1.0, "cpu share unknown: run.json without host_cores".into()));
    let mut by_n: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
    for (case, m, _) in e2e_rows(e2e_csv)? {
        let rows = by_n.entry(case.world_size).or_default();
        // Host compression rows only: a device row's timeline has no host work to fit.
        if case.method == CALIBRATION_METHOD
            && !m.compute_none
            && case.compress_on == crate::devcost::CompressOn::Host
        {
            rows.push(Sample {
                case,
                fwd_s: m.fwd_s,
                iter_s: m.iter_s,
            });
        }
    }
    let mut out = BTreeMap::new();
    for (n, samples) in by_n {
        let mut host = HostModel {
            cpu_share: share,
            source: share_src.clone(),
            ..HostModel::default()
        };
        if samples.is_empty() {
            out.insert(n, host);
            continue;
        }
        // No network fit at this size: the comparison itself reports that.
        let Ok(mut cm) = costs(n) else {
            out.insert(n, host);
            continue;
        };
        // Medians over rows: on a shared machine a whole case can land in a slow spell.
        let mut start: Vec<f64> = samples
            .iter()
            .map(|s| s.fwd_s - s.case.workload.fwd_s)
            .collect();
        host.start_s = median(&mut start).unwrap_or(0.0).max(0.0);
        cm.host = host.clone();
        // Without pipelining: the latency per wait for the device at which the simulated
        // iteration meets the measured one, per row (bisection: `iter_s` does not
        // decrease with it). With pipelining the same latency per wait, and the exchanges
        // inside backward slowed by the factor found the same way (>= 1).
        let rows = |on: bool| samples.iter().filter(move |s| s.case.pipelining == on);
        let mut est = Vec::new();
        for s in rows(false) {
            est.push(bisect(0.0, s.iter_s, s.iter_s, |v| {
                cm.host.sync_s = v;
                Ok(simulate(&s.case, &cm)?.iter_s)
            })?);
        }
        let sync = median(&mut est).unwrap_or(0.0);
        host.sync_s = sync;
        cm.host.sync_s = sync;
        let mut est = Vec::new();
        for s in rows(true) {
            est.push(bisect(1.0, MAX_BWD_SLOWDOWN, s.iter_s, |k| {
                cm.host.bwd_slowdown = k;
                Ok(simulate(&s.case, &cm)?.iter_s)
            })?);
        }
        host.bwd_slowdown = median(&mut est).unwrap_or(1.0);
        host.points = samples.len();
        host.source = format!(
            "{}; latencies from {} ssgd row(s) of {}",
            host.source,
            samples.len(),
            e2e_csv.display()
        );
        out.insert(n, host);
    }
    Ok(out)
}
