//! The host model: what the micro benchmarks cannot see of an e2e iteration on a real
//! host, calibrated from a measured run (`gradcomp fit DIR` with `DIR/e2e.csv` and
//! `DIR/run.json`; docs/architecture.md, "The simulator"; docs/performance.md,
//! "Simulator accuracy"). Four terms:
//!
//! - **CPU share** `min(1, cores / ranks)` on the most loaded machine (ranks with one
//!   `host_kernels` boot id are one machine, as netlab's nodes): every CPU phase is
//!   divided by it. With device compression the rank's own share of the host work is
//!   off the timeline (the device clock is paused); the rest, `(1 - cpu_share)` of the
//!   charged time, is spent inside the next collective and charged there.
//! - **Start latency** `start_s`: from the iteration's start to the emulated device
//!   running; the median of `fwd_s` measured minus modelled.
//! - **Resynchronisation** `sync_s`: added to a bucket's first exchange when the
//!   communication thread waited for the device (the ranks then reach the exchange out
//!   of step); per row the latency at which the simulated `iter_s` meets the measured
//!   one. Where every rank's threads have a core of their own
//!   ([`device_threads_have_cores`]) the pipelined rows calibrate a latency of their own
//!   ([`first_crossing`]).
//! - **Work inside backward** `bwd_slowdown` (pipelining on): the factor (>= 1) by which
//!   the communication thread's work runs slower while backward runs, the device
//!   thread's per-layer wake-ups taking its core; a row that 1 already explains counts at
//!   1 ([`met_at_lo`]), and where the threads have cores of their own it is 1.
//!
//! **Calibration** ([`calibrate`]) uses the host-compression rows of every method: per
//! row the term that meets its measured time, then the median over cases of each case's
//! median over rounds (their spread goes to fits.csv). Compared with the run it was
//! calibrated on, each method is priced by the model calibrated without it
//! ([`HostCalibration::for_method`]), so no case is both calibration and validation. The
//! measurements behind each rule: docs/log/2026-11-29-performance-history.md.

use super::{e2e_rows, simulate, CostModel, Result, SimCase, SimError};
use crate::measure::stats::median;
use std::collections::BTreeMap;
use std::path::Path;

/// The resynchronisation latency with pipelining where it is calibrated on its own rows:
/// the value, its spread over rounds and the rows that informed it.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncOn {
    pub s: f64,
    pub range_s: (f64, f64),
    pub points: usize,
}

/// See the module docs. `Default` is the ideal host (share 1, no latencies).
#[derive(Clone, Debug, PartialEq)]
pub struct HostModel {
    pub cpu_share: f64,
    pub start_s: f64,
    /// Per wait for the device (without pipelining; with it too unless `sync_on`).
    pub sync_s: f64,
    /// Per wait for the device with pipelining, where calibrated apart (a core per
    /// thread; see the module docs).
    pub sync_on: Option<SyncOn>,
    /// Factor (>= 1) on the communication thread's work while backward still runs
    /// (pipelining on): the ranks' device threads wake once per layer and take cores from
    /// the exchanges.
    pub bwd_slowdown: f64,
    /// Rows the latencies were fitted on (0: not calibrated).
    pub points: usize,
    /// Repeats (rounds) of the calibration cases, and the methods they ran.
    pub rounds: usize,
    pub methods: Vec<String>,
    /// The spread over rounds (smallest and largest per-round value, [`pool`]) of
    /// `start_s`, `sync_s` and `bwd_slowdown`.
    pub start_range_s: (f64, f64),
    pub sync_range_s: (f64, f64),
    pub bwd_slowdown_range: (f64, f64),
    /// Rows that informed `start_s`, `sync_s` and `bwd_slowdown` ([`bisect`] leaves out
    /// rows that cannot tell).
    pub term_points: [usize; 3],
    /// Where the values came from (for sim.csv's `cost_source`).
    pub source: String,
}

impl Default for HostModel {
    fn default() -> HostModel {
        HostModel {
            cpu_share: 1.0,
            start_s: 0.0,
            sync_s: 0.0,
            sync_on: None,
            bwd_slowdown: 1.0,
            points: 0,
            rounds: 0,
            methods: Vec::new(),
            start_range_s: (0.0, 0.0),
            sync_range_s: (0.0, 0.0),
            bwd_slowdown_range: (1.0, 1.0),
            term_points: [0; 3],
            source: "ideal host".into(),
        }
    }
}

impl HostModel {
    /// The latency per wait for the device in a schedule with (or without) pipelining.
    pub fn sync_for(&self, pipelining: bool) -> f64 {
        match &self.sync_on {
            Some(on) if pipelining => on.s,
            _ => self.sync_s,
        }
    }

    /// `sync_on`'s value, spread and rows, or `sync_s`'s where it is not apart.
    pub fn sync_on_term(&self) -> (f64, (f64, f64), usize) {
        match &self.sync_on {
            Some(on) => (on.s, on.range_s, on.points),
            None => (self.sync_s, self.sync_range_s, self.term_points[1]),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "host cpu share {:.2}, start {:.1} us [{:.1}, {:.1}], resync {:.1} us [{:.1}, {:.1}]{}, work during backward x{:.3} [{:.3}, {:.3}] (brackets: spread over {} round(s); {})",
            self.cpu_share,
            self.start_s * 1e6,
            self.start_range_s.0 * 1e6,
            self.start_range_s.1 * 1e6,
            self.sync_s * 1e6,
            self.sync_range_s.0 * 1e6,
            self.sync_range_s.1 * 1e6,
            self.sync_on.as_ref().map_or(String::new(), |on| format!(
                ", with pipelining {:.1} us [{:.1}, {:.1}]",
                on.s * 1e6,
                on.range_s.0 * 1e6,
                on.range_s.1 * 1e6
            )),
            self.bwd_slowdown,
            self.bwd_slowdown_range.0,
            self.bwd_slowdown_range.1,
            self.rounds,
            self.source
        )
    }
}

/// CPU share per rank from `run.json` (`hosts` and `host_cores`, one entry per rank):
/// `min(1, cores / ranks)` on the most loaded host, with a description. `None` when the
/// file is missing or predates `host_cores`.
///
/// A time-dilated run (`run.json` `time_dilation` K > 1) gave every rank K times its
/// cores' time per emulated second (its host work stretched to K x its CPU time,
/// src/measure/dilation.rs), so its share is `min(1, K x cores / ranks)`: 4 ranks on 2
/// cores at K = 4 are the ideal host's share of 1, as on a cluster with a core per rank.
pub fn cpu_share_from_run_json(path: &Path) -> Result<Option<(f64, String)>> {
    Ok(layout_from_run_json(path)?.map(|l| {
        let k = l.dilation;
        let share = (l.core_equivalents() as f64 / l.ranks as f64).min(1.0);
        let what = if k > 1 {
            format!(
                "{}, time dilation {k} (each rank {k}x the cores' time per emulated second)",
                l.what()
            )
        } else {
            l.what()
        };
        (share, what)
    }))
}

/// Whether every rank's communication thread and emulated-device thread had a core of
/// its own in the measured run (`run.json`): `2 x ranks <= K x cores` on the most loaded
/// machine ([`Layout`]; K the time dilation, as in [`cpu_share_from_run_json`]), with a
/// description. `None` when the file is missing or predates `host_cores`. Where it
/// holds, the device threads' wake-ups inside backward take no core from the
/// communication threads and [`HostModel::bwd_slowdown`] is 1.
pub fn device_threads_have_cores(path: &Path) -> Result<Option<(bool, String)>> {
    Ok(layout_from_run_json(path)?.map(|l| {
        let (k, cores) = (l.dilation, l.core_equivalents());
        let own = 2 * l.ranks as u64 <= cores;
        let dilated = if k > 1 {
            format!(" ({cores} core-equivalents at time dilation {k})")
        } else {
            String::new()
        };
        let what = format!(
            "{} communication + {} device threads on {} cores of {}{dilated}",
            l.ranks, l.ranks, l.cores, l.machine
        );
        (own, what)
    }))
}

/// run.json's `time_dilation` (1 when absent: a run from before dilation, or none).
fn dilation_in(run_json: &serde_json::Value) -> u64 {
    run_json
        .get("time_dilation")
        .and_then(serde_json::Value::as_u64)
        .filter(|&k| k >= 1)
        .unwrap_or(1)
}

/// The most loaded machine of a run (fewest cores per rank): its ranks and cores, its
/// name, and the run's time dilation.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub ranks: usize,
    /// Ranks of the whole run (`hosts` entries), on every machine.
    pub ranks_total: usize,
    pub cores: u64,
    /// The machine's first host name, with how many it had when it had several (`vm`,
    /// `node1 (4 host names, one machine)`).
    pub machine: String,
    /// run.json's `time_dilation` K (1 without): every thread had K times its CPU time
    /// per emulated second (src/measure/dilation.rs), so the cores count K times.
    pub dilation: u64,
    /// The largest one-minute load average per core at the run's start over its ranks
    /// (run.json `load_avg_start` / `host_cores`); `None` where run.json has none.
    pub load_per_core_start: Option<f64>,
}

impl Layout {
    /// `4 ranks on 2 cores of HOST`.
    pub fn what(&self) -> String {
        format!(
            "{} on {} cores of {}",
            crate::units::count(self.ranks, "rank"),
            self.cores,
            self.machine
        )
    }

    /// The cores times the time dilation.
    pub fn core_equivalents(&self) -> u64 {
        self.cores * self.dilation.max(1)
    }
}

/// [`Layout`] from `run.json` (`hosts`, `host_cores`, `host_kernels`, `time_dilation`);
/// `None` when the file is missing or predates `host_cores`.
pub fn layout_from_run_json(path: &Path) -> Result<Option<Layout>> {
    let rerr = |msg: String| SimError::Read {
        path: path.display().to_string(),
        msg,
    };
    let Some(text) =
        crate::input::read_to_string_if_exists(path, crate::input::TEXT_BYTES, "a run's run.json")
            .map_err(|e| SimError::Input(e.to_string()))?
    else {
        return Ok(None);
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
    let machine = if names.len() > 1 {
        format!("{} ({} host names, one machine)", names[0], names.len())
    } else {
        names[0].clone()
    };
    Ok(Some(Layout {
        ranks: *ranks,
        ranks_total: hosts.len(),
        cores: *cores,
        machine,
        dilation: dilation_in(&v),
        load_per_core_start: load_per_core(&v, "load_avg_start"),
    }))
}

/// The largest one-minute load average per core over the ranks of run.json's `key`
/// (`[[1, 5, 15], ...]` per rank, `null` where a rank could not read it) and
/// `host_cores`; `None` when no rank has one.
fn load_per_core(v: &serde_json::Value, key: &str) -> Option<f64> {
    let loads = v.get(key)?.as_array()?;
    let cores = v.get("host_cores")?.as_array()?;
    loads
        .iter()
        .zip(cores)
        .filter_map(|(l, c)| Some(l.get(0)?.as_f64()? / c.as_f64().filter(|&c| c > 0.0)?))
        .filter(|x| x.is_finite())
        .reduce(f64::max)
}

/// Largest factor the calibration gives the work during backward.
pub const MAX_BWD_SLOWDOWN: f64 = 16.0;

/// Points at which [`bisect`] checks that a row's simulated iteration does not decrease
/// with the term.
const MONOTONE_CHECKS: usize = 16;

/// The `x` in `[lo, hi]` at which `f(x)` meets `target` (`lo` when `f(lo)` is already
/// there, `hi` when `f(hi)` is still below), by 40 bisections; `None` when the row cannot
/// tell: `f` decreases somewhere in the range (checked at [`MONOTONE_CHECKS`] points:
/// with a resynchronisation latency, a communication thread slowed inside backward can
/// stop waiting for the device and skip the latency, so a compressed method's pipelined
/// iteration can get faster), or it is already at `target` at `lo` and flat over the
/// whole range (its work inside backward stays hidden whatever the term).
fn bisect(
    lo: f64,
    hi: f64,
    target: f64,
    mut f: impl FnMut(f64) -> Result<f64>,
) -> Result<Option<f64>> {
    let mut prev = f64::NEG_INFINITY;
    for i in 0..=MONOTONE_CHECKS {
        let v = f(lo + (hi - lo) * i as f64 / MONOTONE_CHECKS as f64)?;
        if v < prev * (1.0 - 1e-9) {
            return Ok(None);
        }
        prev = v;
    }
    if let Some(at) = met_at_lo(lo, hi, target, &mut f)? {
        return Ok(at);
    }
    if f(hi)? < target {
        return Ok(Some(hi));
    }
    narrow(lo, hi, target, &mut f).map(Some)
}

/// Where `f(lo)` already meets `target`: `Some(Some(lo))` when `f` responds to the term
/// somewhere in `[lo, hi]` (`f(hi) > f(lo)`: the row would run slower at a larger value,
/// so it says the term is at `lo`), `Some(None)` when it is flat over the range (the row
/// cannot tell); `None` when `f(lo)` is below `target`.
///
/// A row counts at `lo` even where it only starts to respond further up: asking for a
/// response within the first 1% of the range dropped the rounds that `lo` already
/// explained and kept those that ran slow, so on a 2-vCPU guest the slowdown inside
/// backward came from two slow rounds of dense ssgd's seven, x5.9, where the median
/// round's was x1 (docs/performance.md, "Simulator accuracy"; issue 29).
fn met_at_lo(
    lo: f64,
    hi: f64,
    target: f64,
    f: &mut impl FnMut(f64) -> Result<f64>,
) -> Result<Option<Option<f64>>> {
    let f_lo = f(lo)?;
    if f_lo < target {
        return Ok(None);
    }
    let responds = f(hi)? > f_lo * (1.0 + 1e-9);
    Ok(Some(responds.then_some(lo)))
}

/// 40 bisections of `[a, b]`, `f(a) < target <= f(b)`, to where `f` meets `target`.
fn narrow(
    mut a: f64,
    mut b: f64,
    target: f64,
    f: &mut impl FnMut(f64) -> Result<f64>,
) -> Result<f64> {
    for _ in 0..40 {
        let mid = 0.5 * (a + b);
        if f(mid)? < target {
            a = mid;
        } else {
            b = mid;
        }
    }
    Ok(0.5 * (a + b))
}

/// Grid points at which [`first_crossing`] looks for the first value that meets its
/// target.
const CROSSING_GRID: usize = 64;

/// The smallest `x` in `[lo, hi]` at which `f(x)` meets `target`: the first of
/// [`CROSSING_GRID`] grid points that does, then 40 bisections back to the point before
/// it (`lo` when `f(lo)` already does and `f` responds in the range, as in [`bisect`]); `None`
/// when no grid point does or the row does not respond. Unlike [`bisect`] it takes rows
/// that are not monotone: with pipelining a longer latency per wait can make a later
/// bucket stop waiting (and skip its latency), so the iteration drops where a bucket's
/// wait ends; the first crossing is the latency that explains the row with every wait
/// the row's schedule had.
fn first_crossing(
    lo: f64,
    hi: f64,
    target: f64,
    mut f: impl FnMut(f64) -> Result<f64>,
) -> Result<Option<f64>> {
    if let Some(at) = met_at_lo(lo, hi, target, &mut f)? {
        return Ok(at);
    }
    let mut prev = lo;
    for i in 1..=CROSSING_GRID {
        let x = lo + (hi - lo) * i as f64 / CROSSING_GRID as f64;
        if f(x)? >= target {
            return narrow(prev, x, target, &mut f).map(Some);
        }
        prev = x;
    }
    Ok(None)
}

/// A measured host-compression row used for calibration: its case, which repeat of the
/// case it is (`round`: the k-th row of the case in the file), and its measurements.
struct Sample {
    case: SimCase,
    /// The e2e.csv case key (every non-measurement column), joined.
    key: String,
    round: usize,
    fwd_s: f64,
    iter_s: f64,
}

/// One term's calibration from per-row estimates `(case key, round, value)`: the median
/// over cases of each case's median over rounds (one noisy case or one slow round moves
/// neither), and the spread over rounds, the smallest and largest of the per-round
/// medians over cases. `None` without estimates.
fn pool(est: &[(&str, usize, f64)]) -> Option<(f64, f64, f64)> {
    let mut by_case: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut by_round: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for &(k, r, v) in est {
        by_case.entry(k).or_default().push(v);
        by_round.entry(r).or_default().push(v);
    }
    let mut per_case: Vec<f64> = by_case
        .into_values()
        .filter_map(|mut v| median(&mut v))
        .collect();
    let value = median(&mut per_case)?;
    let per_round: Vec<f64> = by_round
        .into_values()
        .filter_map(|mut v| median(&mut v))
        .collect();
    let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((value, lo, hi))
}

/// How [`term_estimates`] finds a row's value: [`bisect`] (rows not monotone in the term
/// left out) or [`first_crossing`].
#[derive(Clone, Copy)]
enum Search {
    Monotone,
    FirstCrossing,
}

/// Per sample with (or without) `pipelining`, the value of one host term (written into
/// `cm.host` by `set`) at which the simulated `iter_s` meets the measured one, found in
/// `range(s)` by `search`; samples the term cannot explain are left out.
fn term_estimates<'a>(
    samples: &[&'a Sample],
    pipelining: bool,
    cm: &mut CostModel,
    range: impl Fn(&Sample) -> (f64, f64),
    set: impl Fn(&mut HostModel, f64),
    search: Search,
) -> Result<Vec<(&'a str, usize, f64)>> {
    let mut est = Vec::new();
    for s in samples.iter().filter(|s| s.case.pipelining == pipelining) {
        let (lo, hi) = range(s);
        let sim = |v: f64, cm: &mut CostModel| -> Result<f64> {
            set(&mut cm.host, v);
            Ok(simulate(&s.case, cm)?.iter_s)
        };
        let v = match search {
            Search::Monotone => bisect(lo, hi, s.iter_s, |v| sim(v, cm))?,
            Search::FirstCrossing => first_crossing(lo, hi, s.iter_s, |v| sim(v, cm))?,
        };
        if let Some(v) = v {
            est.push((s.key.as_str(), s.round, v));
        }
    }
    Ok(est)
}

/// The host model calibrated on `samples` (any methods) on top of `cm`: the start
/// latency from `fwd_s`, then per row without pipelining the resynchronisation latency
/// at which the simulated `iter_s` meets the measured one, then per row with pipelining
/// the slowdown inside backward at that latency, each pooled by [`pool`]; with
/// `own_cores` (every thread had a core, [`device_threads_have_cores`]) the slowdown is
/// 1 and not calibrated.
fn calibrate_on(
    samples: &[&Sample],
    cm: &mut CostModel,
    base: &HostModel,
    own_cores: bool,
) -> Result<HostModel> {
    let mut host = base.clone();
    let est: Vec<(&str, usize, f64)> = samples
        .iter()
        .map(|s| (s.key.as_str(), s.round, s.fwd_s - s.case.workload.fwd_s))
        .collect();
    host.term_points[0] = est.len();
    if let Some((v, lo, hi)) = pool(&est) {
        host.start_s = v.max(0.0);
        host.start_range_s = (lo.max(0.0), hi.max(0.0));
    }
    cm.host = host.clone();
    let est = term_estimates(
        samples,
        false,
        cm,
        |s| (0.0, s.iter_s),
        |h, v| h.sync_s = v,
        Search::Monotone,
    )?;
    host.term_points[1] = est.len();
    if let Some((v, lo, hi)) = pool(&est) {
        (host.sync_s, host.sync_range_s) = (v, (lo, hi));
    }
    cm.host.sync_s = host.sync_s;
    if own_cores {
        // The slowdown keeps the ideal host's 1 (`base`'s); the pipelined rows calibrate
        // their own latency instead.
        let est = term_estimates(
            samples,
            true,
            cm,
            |s| (0.0, s.iter_s),
            |h, v| {
                h.sync_on = Some(SyncOn {
                    s: v,
                    range_s: (v, v),
                    points: 0,
                })
            },
            Search::FirstCrossing,
        )?;
        host.sync_on = pool(&est).map(|(v, lo, hi)| SyncOn {
            s: v,
            range_s: (lo, hi),
            points: est.len(),
        });
    } else {
        let est = term_estimates(
            samples,
            true,
            cm,
            |_| (1.0, MAX_BWD_SLOWDOWN),
            |h, k| h.bwd_slowdown = k,
            Search::Monotone,
        )?;
        host.term_points[2] = est.len();
        if let Some((v, lo, hi)) = pool(&est) {
            (host.bwd_slowdown, host.bwd_slowdown_range) = (v, (lo, hi));
        }
    }
    let mut methods: Vec<String> = samples.iter().map(|s| s.case.method.clone()).collect();
    methods.sort();
    methods.dedup();
    host.points = samples.len();
    host.rounds = samples.iter().map(|s| s.round + 1).max().unwrap_or(0);
    host.methods = methods;
    Ok(host)
}

/// A world size's host models: [`HostCalibration::all`] on every calibration row (what
/// projections use), and per method the model calibrated without that method's rows
/// (leave-one-method-out: what a comparison of the same run prices that method's cases
/// with, so no case is both calibration and validation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostCalibration {
    pub all: HostModel,
    pub held_out: BTreeMap<String, HostModel>,
}

impl HostCalibration {
    /// The model for a case of `method` out of sample: calibrated without its rows when
    /// the calibration had other methods, else [`HostCalibration::all`] (`true`: in
    /// sample, the case calibrated it).
    pub fn for_method(&self, method: &str) -> (&HostModel, bool) {
        match self.held_out.get(method) {
            Some(h) => (h, false),
            None => (&self.all, self.all.methods.iter().any(|m| m == method)),
        }
    }
}

/// Largest noise of a case the host model is calibrated on: the accuracy target
/// (docs/performance.md, "Simulator accuracy", 15%). A case too noisy to be judged
/// against it is too noisy to calibrate on: the slowdown inside backward was once set
/// by qsgd's pipelined rows alone (their compression fit spread 15-25%), 1.4 in one run
/// and 4.0 in the next, and moved every pipelined prediction with it (issue 29).
pub const CALIBRATION_MAX_NOISE: f64 = 0.15;

/// The keys of the cases among `samples` quiet enough to calibrate on: a case's noise,
/// counted as its verdict counts it ([`super::measured::case_noise`]) but with each
/// movement at its bound (the spread of its rounds' `iter_s` plus its method's
/// compression-fit spread, `compress_spread`, times the share of the simulated iteration
/// that host compression takes, and at least the run's `jitter` times that share; the
/// verdict re-simulates how far they move the calibrated prediction, which this model is
/// not yet), at most [`CALIBRATION_MAX_NOISE`]. A case of one round has no spread of its
/// own.
fn quiet_cases(
    samples: &[Sample],
    cm: &CostModel,
    compress_spread: &dyn Fn(&str) -> Option<f64>,
    jitter: Option<f64>,
) -> Result<std::collections::BTreeSet<String>> {
    let mut by_case: BTreeMap<&str, (Vec<f64>, &Sample)> = BTreeMap::new();
    for s in samples {
        by_case
            .entry(&s.key)
            .or_insert((Vec::new(), s))
            .0
            .push(s.iter_s);
    }
    let mut quiet = std::collections::BTreeSet::new();
    for (key, (mut v, s)) in by_case {
        let own = crate::measure::stats::spread_about_median(&mut v);
        let fit_spread = compress_spread(crate::config::base_method(&s.case.method));
        let share = if fit_spread.is_some() || jitter.is_some() {
            let r = simulate(&s.case, cm)?;
            super::measured::host_compress_share(r.host_compress_s, r.host_decompress_s, r.iter_s)
        } else {
            0.0
        };
        let noise = super::measured::case_noise(
            own,
            fit_spread.map(|f| f * share),
            jitter.filter(|_| share > 0.0).map(|j| j * share),
        );
        if noise.unwrap_or(0.0) <= CALIBRATION_MAX_NOISE {
            quiet.insert(key.to_string());
        }
    }
    Ok(quiet)
}

/// Calibrate per world size from the host-compression rows of every method in
/// `e2e_csv` (rows with `compute = none` are left out: their device never sleeps; device
/// rows too: their timeline has no host work to fit) whose cases are quiet enough
/// ([`quiet_cases`]; all of them when none is): [`HostCalibration::all`] on all of
/// them and, where two or more methods calibrate, one model per method without it.
/// `costs(n)` gives the cost model (network, compression) the host model is added to,
/// `compress_spread(method)` the spread of its compression fit over rounds.
/// `cpu_share` (from [`cpu_share_from_run_json`]) and `own_cores` (from
/// [`device_threads_have_cores`]: the slowdown inside backward is then 1, not
/// calibrated) apply to every world size of the file (one run, one layout); world sizes
/// without such rows get the share and no latencies.
pub fn calibrate(
    e2e_csv: &Path,
    cpu_share: Option<(f64, String)>,
    own_cores: Option<(bool, String)>,
    costs: &dyn Fn(usize) -> Result<CostModel>,
    compress_spread: &dyn Fn(&str) -> Option<f64>,
) -> Result<BTreeMap<usize, HostCalibration>> {
    let (share, share_src) =
        cpu_share.unwrap_or((1.0, "cpu share unknown: run.json without host_cores".into()));
    let (own_cores, share_src) = match own_cores {
        Some((true, what)) => (
            true,
            format!("{share_src}; work during backward x1, not calibrated: {what}, a core each"),
        ),
        _ => (false, share_src),
    };
    let mut by_n: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut host_rows: Vec<(String, f64)> = Vec::new();
    for (case, m, key) in e2e_rows(e2e_csv)? {
        let key: String = key.iter().map(|(k, v)| format!("{k}={v};")).collect();
        let round = seen.entry(key.clone()).or_insert(0);
        let r = *round;
        *round += 1;
        if let Some(h) = m.host_s {
            host_rows.push((key.clone(), h));
        }
        let rows = by_n.entry(case.world_size).or_default();
        if !m.compute_none && case.compress_on == crate::devcost::CompressOn::Host {
            rows.push(Sample {
                case,
                key,
                round: r,
                fwd_s: m.fwd_s,
                iter_s: m.iter_s,
            });
        }
    }
    let jitter = super::measured::host_jitter(host_rows.iter().map(|(k, h)| (k.as_str(), *h)));
    let mut out = BTreeMap::new();
    for (n, samples) in by_n {
        let base = HostModel {
            cpu_share: share,
            source: share_src.clone(),
            ..HostModel::default()
        };
        // No network fit at this size: the comparison itself reports that.
        let mut cm = match costs(n) {
            Ok(cm) if !samples.is_empty() => cm,
            _ => {
                out.insert(
                    n,
                    HostCalibration {
                        all: base,
                        held_out: BTreeMap::new(),
                    },
                );
                continue;
            }
        };
        let quiet = quiet_cases(&samples, &cm, compress_spread, jitter)?;
        let cases = samples
            .iter()
            .map(|s| s.key.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let (every, which): (Vec<&Sample>, String) = if quiet.is_empty() {
            (
                samples.iter().collect(),
                format!(
                    "all {cases} case(s): none within {:.0}% noise",
                    CALIBRATION_MAX_NOISE * 100.0
                ),
            )
        } else {
            (
                samples.iter().filter(|s| quiet.contains(&s.key)).collect(),
                format!(
                    "the {} of {cases} case(s) within {:.0}% noise",
                    quiet.len(),
                    CALIBRATION_MAX_NOISE * 100.0
                ),
            )
        };
        let mut all = calibrate_on(&every, &mut cm, &base, own_cores)?;
        all.source = format!(
            "{}; latencies from {} row(s) of {} ({} method(s), {} round(s); {which}) of {}",
            base.source,
            all.points,
            all.methods.join(" "),
            all.methods.len(),
            all.rounds,
            e2e_csv.display()
        );
        let mut held_out = BTreeMap::new();
        if all.methods.len() > 1 {
            for m in &all.methods {
                let rest: Vec<&Sample> = every
                    .iter()
                    .copied()
                    .filter(|s| &s.case.method != m)
                    .collect();
                let mut h = calibrate_on(&rest, &mut cm, &base, own_cores)?;
                h.source = format!(
                    "{}; latencies from {} row(s) of {} method(s), {m} held out, of {}",
                    base.source,
                    h.points,
                    h.methods.len(),
                    e2e_csv.display()
                );
                held_out.insert(m.clone(), h);
            }
        }
        out.insert(n, HostCalibration { all, held_out });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{bisect, first_crossing, pool};

    #[test]
    fn first_crossing_takes_the_first_value_that_meets_the_target_where_bisect_gives_up() {
        // A sawtooth as a pipelined row can be: rising, dropping by 0.5 at 1 (a later
        // bucket stops waiting and skips its latency), rising again.
        let saw = |x: f64| Ok(if x < 1.0 { x } else { x - 0.5 });
        let got = first_crossing(0.0, 3.0, 0.8, saw).unwrap().unwrap();
        assert!((got - 0.8).abs() < 1e-9, "{got}");
        // 0.95 is met just before the drop; 1.2 only after it, at 1.7.
        let got = first_crossing(0.0, 3.0, 0.95, saw).unwrap().unwrap();
        assert!((got - 0.95).abs() < 1e-9, "{got}");
        let got = first_crossing(0.0, 3.0, 1.2, saw).unwrap().unwrap();
        assert!((got - 1.7).abs() < 1e-9, "{got}");
        assert_eq!(bisect(0.0, 3.0, 0.8, saw).unwrap(), None);
        // Never met, or met at `lo` by a row that never responds: no estimate.
        assert_eq!(first_crossing(0.0, 3.0, 9.0, saw).unwrap(), None);
        assert_eq!(first_crossing(0.0, 3.0, 0.5, |_| Ok(1.0)).unwrap(), None);
        assert_eq!(first_crossing(0.0, 3.0, 0.0, saw).unwrap(), Some(0.0));
    }

    #[test]
    fn a_row_met_at_lo_counts_there_when_it_responds_further_up() {
        // A pipelined row as on 2 vCPUs: flat while the slowed work still hides under
        // backward (up to 2), then rising. Measured at or below the flat level, the row
        // says the term is at `lo` (1), whichever search; one above it, where it rises.
        let row = |k: f64| Ok(10.0 + (k - 2.0).max(0.0));
        assert_eq!(bisect(1.0, 16.0, 9.5, row).unwrap(), Some(1.0));
        assert_eq!(bisect(1.0, 16.0, 10.0, row).unwrap(), Some(1.0));
        assert_eq!(first_crossing(1.0, 16.0, 9.5, row).unwrap(), Some(1.0));
        let got = bisect(1.0, 16.0, 11.5, row).unwrap().unwrap();
        assert!((got - 3.5).abs() < 1e-9, "{got}");
        // Flat over the whole range: it cannot tell.
        assert_eq!(bisect(1.0, 16.0, 9.5, |_| Ok(10.0)).unwrap(), None);
    }

    /// A two-machine run written by hand: 3 ranks on machine `a` (2 cores each), 1 on `b`
    /// (8 cores). The most loaded machine is `a` (2/3 of a core per rank against 8): its
    /// 3 ranks and 2 cores judge oversubscription, while the run's total, 4 ranks, is
    /// what a measured row's world size is matched against (src/sim/run.rs); a layout
    /// that gave one machine's ranks as the total would match a 3-rank row instead.
    #[test]
    fn a_two_machine_layout_keeps_the_runs_total_apart_from_the_busiest_machines_ranks() {
        use super::{layout_from_run_json, Layout};
        let p = write_run_json(
            "layout",
            r#"{"hosts": ["a", "b", "a", "a"], "host_cores": [2, 8, 2, 2]}"#,
        );
        let l = layout_from_run_json(&p).unwrap().unwrap();
        assert_eq!(
            l,
            Layout {
                ranks: 3,
                ranks_total: 4,
                cores: 2,
                machine: "a".into(),
                dilation: 1,
                load_per_core_start: None,
            }
        );
        // Two machines of 2 ranks each (one by kernel id, whatever the host names): the
        // busiest has 2 of the run's 4.
        std::fs::write(
            &p,
            r#"{"hosts": ["n0", "n1", "c", "c"], "host_cores": [4, 4, 4, 4], "host_kernels": ["k", "k", "j", "j"]}"#,
        )
        .unwrap();
        let l = layout_from_run_json(&p).unwrap().unwrap();
        assert_eq!((l.ranks, l.ranks_total, l.cores), (2, 4, 4));
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    /// A row flat at the target from 1 on (`min(x, 1)`): [`bisect`] and [`narrow`]
    /// give the first value that meets it, 1, not the end of the range where it is met
    /// too; so does [`first_crossing`].
    #[test]
    fn a_row_flat_at_the_target_is_met_where_it_first_reaches_it() {
        let f = |x: f64| Ok(x.min(1.0));
        let got = bisect(0.0, 2.0, 1.0, f).unwrap().unwrap();
        assert!((got - 1.0).abs() < 1e-9, "{got}");
        let got = first_crossing(0.0, 2.0, 1.0, f).unwrap().unwrap();
        assert!((got - 1.0).abs() < 1e-9, "{got}");
    }

    /// The points a search looks at lie in `[lo, hi]`, `lo` not 0: a row that rises
    /// with the term inside `[1, 2]` and falls outside it (below 1, and by 100 above 2)
    /// is monotone where [`bisect`] checks it (17 points from 1 to 2), and
    /// [`first_crossing`]'s 64-point grid from 1 to 2 finds a spike to 2 on
    /// `[1.26, 1.27]` (grid point 17, 1.265625, lies on it; every other grid point
    /// misses it): the first value meeting 1.5 is 1.26, not 1.5.
    #[test]
    fn the_searches_look_only_inside_the_range() {
        let row = |x: f64| {
            Ok(if x < 1.0 {
                -x
            } else if x > 2.0 {
                x - 100.0
            } else {
                x
            })
        };
        let got = bisect(1.0, 2.0, 1.5, row).unwrap().unwrap();
        assert!((got - 1.5).abs() < 1e-9, "{got}");
        let spiked = |x: f64| {
            if (1.26..=1.27).contains(&x) {
                Ok(2.0)
            } else {
                row(x)
            }
        };
        let got = first_crossing(1.0, 2.0, 1.5, spiked).unwrap().unwrap();
        assert!((got - 1.26).abs() < 1e-9, "{got}");
    }

    /// [`bisect`]'s monotonicity check forgives a fall of exactly a relative 1e-9 (the
    /// row's rounding), not more: a row that falls by that much at 0.5 and rises to 2 at
    /// `hi` is bisected to where it meets 1.5 (just below 1); falling by twice that, it
    /// cannot tell.
    #[test]
    fn bisect_forgives_a_fall_of_a_billionth() {
        let row = |fall: f64| {
            move |x: f64| {
                Ok(if x >= 1.0 {
                    2.0
                } else if x >= 0.5 {
                    1.0 * (1.0 - fall)
                } else {
                    1.0
                })
            }
        };
        let got = bisect(0.0, 1.0, 1.5, row(1e-9)).unwrap().unwrap();
        assert!((got - 1.0).abs() < 1e-9, "{got}");
        assert_eq!(bisect(0.0, 1.0, 1.5, row(2e-9)).unwrap(), None);
    }

    /// A row met at `lo` responds only when `f(hi)` exceeds `f(lo)` by more than a
    /// relative 1e-9: exactly that much is flat (it cannot tell), twice `f(lo)` responds.
    #[test]
    fn met_at_lo_needs_a_response_above_a_billionth() {
        use super::met_at_lo;
        let edge = 1.0 * (1.0 + 1e-9);
        let mut at_edge = |x: f64| Ok(if x == 1.0 { edge } else { 1.0 });
        assert_eq!(met_at_lo(0.0, 1.0, 1.0, &mut at_edge).unwrap(), Some(None));
        let mut doubles = |x: f64| Ok(1.0 + x);
        assert_eq!(
            met_at_lo(0.0, 1.0, 1.0, &mut doubles).unwrap(),
            Some(Some(0.0))
        );
        assert_eq!(met_at_lo(0.0, 1.0, 1.5, &mut doubles).unwrap(), None);
    }

    /// A network whose every collective takes 1 ms (no reduction cost).
    struct Ms;

    impl crate::sim::network::CollectiveCost for Ms {
        fn time_s(&self, _op: crate::sim::network::Op, _n: usize, _m_bytes: f64) -> f64 {
            1e-3
        }
        fn reduce_s(&self, _bytes: f64) -> f64 {
            0.0
        }
        fn describe(&self) -> String {
            "1 ms".into()
        }
        fn with_gamma(&self, _g: f64) -> Box<dyn crate::sim::network::CollectiveCost> {
            Box::new(Ms)
        }
    }

    /// A case is quiet enough to calibrate on when its noise, its rounds' spread (0 here:
    /// two equal rounds) plus its fit's spread times its host-compression share `s` of
    /// the simulated iteration, and at least the run's jitter times `s`, is at most 15%:
    /// a fit spread or a jitter of 0.9 x 0.15 / s passes, 1.1 x 0.15 / s does not.
    #[test]
    fn a_case_is_quiet_up_to_15_percent_of_fit_spread_or_jitter_times_its_share() {
        use super::{quiet_cases, Sample, CALIBRATION_MAX_NOISE};
        use crate::sim::{CostModel, MethodCosts, SimCase, SimWorkload};
        let wl = SimWorkload {
            model: "one".into(),
            tensors: vec![crate::models::TensorSpec {
                name: "w".into(),
                rows: 1,
                cols: 1000,
            }],
            bwd_s: vec![0.01],
            fwd_s: 0.01,
            batch: 1,
            device: "test".into(),
        };
        let case = SimCase::new(
            wl,
            "ssgd",
            crate::schedule::plan::Fusion::None,
            false,
            crate::comm::exchange::CollectiveMode::Native,
            2,
            crate::compress::MethodParams::default(),
        );
        let mut cm = CostModel::with_network(Box::new(Ms));
        let ms = crate::netmodel::CompressCost {
            per_element_s: 1e-6,
            ..Default::default()
        };
        cm.methods.insert(
            "ssgd".into(),
            MethodCosts {
                compress: ms,
                feedback: Default::default(),
                decompress: ms,
            },
        );
        let r = crate::sim::simulate(&case, &cm).unwrap();
        let s = (r.host_compress_s + r.host_decompress_s) / r.iter_s;
        assert!(s > 0.01 && s < 0.9, "share {s}");
        let samples: Vec<Sample> = (0..2)
            .map(|round| Sample {
                case: case.clone(),
                key: "k".into(),
                round,
                fwd_s: r.fwd_s,
                iter_s: r.iter_s,
            })
            .collect();
        let quiet = |fit: Option<f64>, jitter: Option<f64>| {
            quiet_cases(&samples, &cm, &|_| fit, jitter)
                .unwrap()
                .contains("k")
        };
        let at = |k: f64| Some(k * CALIBRATION_MAX_NOISE / s);
        assert!(quiet(None, None));
        assert!(quiet(at(0.9), None));
        assert!(!quiet(at(1.1), None));
        assert!(quiet(None, at(0.9)));
        assert!(!quiet(None, at(1.1)));
        assert!(!quiet(at(0.9), at(1.1)));
    }

    /// `calibrate` per world size: one whose rows are all device rows gets the share
    /// alone (the ideal host's terms and the share's source, nothing held out); one
    /// calibrated by a single method holds none out, and that method's cases are in
    /// sample (another method's are not).
    #[test]
    fn calibrate_gives_the_share_alone_without_host_rows_and_holds_out_nothing_of_one_method() {
        use super::{calibrate, HostCalibration, HostModel};
        let d = std::env::temp_dir().join(format!("gradcomp-host-calib-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let e2e = d.join("e2e.csv");
        let head = "schema_version,model,method,fusion,pipelining,collective,aggregation,world_size,batch,device,compute,compress_on,fwd_s,iter_s\n";
        let row = |n: usize, on: &str| {
            format!("1,resnet20,ssgd,256KiB,off,allreduce,allreduce,{n},32,rtx2080ti,sleep,{on},0.1,0.5\n")
        };
        let text = [
            head.to_string(),
            row(2, "device"),
            row(4, "host"),
            row(4, "host"),
        ]
        .concat();
        std::fs::write(&e2e, text).unwrap();
        let costs = |_: usize| Ok(crate::sim::CostModel::with_network(Box::new(Ms)));
        let got = calibrate(&e2e, Some((0.5, "test".into())), None, &costs, &|_| None).unwrap();
        assert_eq!(
            got[&2],
            HostCalibration {
                all: HostModel {
                    cpu_share: 0.5,
                    source: "test".into(),
                    ..HostModel::default()
                },
                held_out: Default::default(),
            }
        );
        let cal = &got[&4];
        assert_eq!(
            (cal.all.methods.as_slice(), cal.all.points),
            (&["ssgd".to_string()][..], 2)
        );
        assert!(cal.held_out.is_empty(), "{:?}", cal.held_out);
        let (h, inside) = cal.for_method("ssgd");
        assert!(std::ptr::eq(h, &cal.all) && inside);
        let (h, inside) = cal.for_method("topk");
        assert!(std::ptr::eq(h, &cal.all) && !inside);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A run.json holding `text` in a temporary directory of its own (`tag`).
    fn write_run_json(tag: &str, text: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gradcomp-host-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("run.json");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `describe` by hand: the share to 2 places, the latencies in us to 1 place with
    /// their spread in brackets, the pipelined latency only where it is apart, the
    /// factor to 3 places, the rounds and the source.
    #[test]
    fn describe_prints_every_term_with_its_spread() {
        use super::{HostModel, SyncOn};
        let mut h = HostModel {
            cpu_share: 0.5,
            start_s: 1.5e-4,
            start_range_s: (1e-4, 2e-4),
            sync_s: 3e-4,
            sync_range_s: (2.5e-4, 3.5e-4),
            bwd_slowdown: 1.25,
            bwd_slowdown_range: (1.125, 1.5),
            rounds: 3,
            source: "by hand".into(),
            ..HostModel::default()
        };
        assert_eq!(
            h.describe(),
            "host cpu share 0.50, start 150.0 us [100.0, 200.0], resync 300.0 us [250.0, 350.0], work during backward x1.250 [1.125, 1.500] (brackets: spread over 3 round(s); by hand)"
        );
        h.sync_on = Some(SyncOn {
            s: 1e-4,
            range_s: (5e-5, 2e-4),
            points: 4,
        });
        assert_eq!(
            h.describe(),
            "host cpu share 0.50, start 150.0 us [100.0, 200.0], resync 300.0 us [250.0, 350.0], with pipelining 100.0 us [50.0, 200.0], work during backward x1.250 [1.125, 1.500] (brackets: spread over 3 round(s); by hand)"
        );
    }

    /// `sync_on_term`: the pipelined latency's value, spread and rows where it is apart,
    /// else `sync_s`'s with the rows of the latency term (`term_points[1]`).
    #[test]
    fn sync_on_term_falls_back_to_the_one_latency() {
        use super::{HostModel, SyncOn};
        let mut h = HostModel {
            sync_s: 3.0,
            sync_range_s: (2.0, 4.0),
            term_points: [7, 5, 2],
            ..HostModel::default()
        };
        assert_eq!(h.sync_on_term(), (3.0, (2.0, 4.0), 5));
        h.sync_on = Some(SyncOn {
            s: 0.5,
            range_s: (0.25, 0.75),
            points: 3,
        });
        assert_eq!(h.sync_on_term(), (0.5, (0.25, 0.75), 3));
    }

    /// run.json's parts of a layout, each rule by hand: the largest one-minute load per
    /// core over the ranks (`null` skipped); an empty kernel id counts as none (one
    /// machine per host name); a rank of 0 cores is an error; the busiest machine is the
    /// one of fewest cores per rank, whichever comes first.
    #[test]
    fn layout_load_per_core_empty_kernels_zero_cores_and_the_busiest_machine() {
        use super::layout_from_run_json;
        // Loads 1 on 2 cores (0.5), 3 on 2 (1.5), none, 2 on 8 (0.25): 1.5.
        let p = write_run_json(
            "layout-parts",
            r#"{"hosts": ["a", "a", "b", "b"], "host_cores": [2, 2, 8, 8], "load_avg_start": [[1.0, 0.5, 0.2], [3.0, 2.0, 1.0], null, [2.0, 1.0, 1.0]]}"#,
        );
        let l = layout_from_run_json(&p).unwrap().unwrap();
        assert_eq!(l.load_per_core_start, Some(1.5));
        // No rank has one: none.
        std::fs::write(
            &p,
            r#"{"hosts": ["a"], "host_cores": [2], "load_avg_start": [null]}"#,
        )
        .unwrap();
        let l = layout_from_run_json(&p).unwrap().unwrap();
        assert_eq!(l.load_per_core_start, None);
        // Two host names with empty kernel ids: two machines of 1 rank each.
        std::fs::write(
            &p,
            r#"{"hosts": ["a", "b"], "host_cores": [2, 2], "host_kernels": ["", ""]}"#,
        )
        .unwrap();
        let l = layout_from_run_json(&p).unwrap().unwrap();
        assert_eq!((l.ranks, l.ranks_total, l.machine.as_str()), (1, 2, "a"));
        // 0 cores: refused.
        std::fs::write(&p, r#"{"hosts": ["a", "b"], "host_cores": [0, 2]}"#).unwrap();
        let e = layout_from_run_json(&p).unwrap_err().to_string();
        assert!(e.contains("is not a positive integer"), "{e}");
        // x: 4 ranks on 2 cores (half a core each), y: 1 rank on 4: x, listed first.
        std::fs::write(
            &p,
            r#"{"hosts": ["x", "x", "x", "x", "y"], "host_cores": [2, 2, 2, 2, 4]}"#,
        )
        .unwrap();
        let l = layout_from_run_json(&p).unwrap().unwrap();
        assert_eq!((l.ranks, l.cores, l.machine.as_str()), (4, 2, "x"));
        // x: 1 rank on 2 cores, y: 2 ranks on 3 (1.5 each): y, listed second.
        std::fs::write(&p, r#"{"hosts": ["x", "y", "y"], "host_cores": [2, 3, 3]}"#).unwrap();
        let l = layout_from_run_json(&p).unwrap().unwrap();
        assert_eq!((l.ranks, l.cores, l.machine.as_str()), (2, 3, "y"));
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    /// `device_threads_have_cores`' description by hand: the threads, the cores and the
    /// machine, and the core-equivalents only under time dilation (K > 1).
    #[test]
    fn device_threads_description_names_core_equivalents_only_when_dilated() {
        use super::device_threads_have_cores;
        let p = write_run_json(
            "threads-what",
            r#"{"hosts": ["n0", "n1"], "host_cores": [2, 2], "host_kernels": ["k", "k"]}"#,
        );
        assert_eq!(
            device_threads_have_cores(&p).unwrap().unwrap(),
            (
                false,
                "2 communication + 2 device threads on 2 cores of n0 (2 host names, one machine)"
                    .to_string()
            )
        );
        std::fs::write(
            &p,
            r#"{"hosts": ["n0", "n1"], "host_cores": [2, 2], "host_kernels": ["k", "k"], "time_dilation": 2}"#,
        )
        .unwrap();
        assert_eq!(
            device_threads_have_cores(&p).unwrap().unwrap(),
            (
                true,
                "2 communication + 2 device threads on 2 cores of n0 (2 host names, one machine) (4 core-equivalents at time dilation 2)"
                    .to_string()
            )
        );
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn pool_is_the_median_of_case_medians_with_the_spread_over_rounds() {
        // Case a: 1, 2, 9 over rounds 0..3 (one slow round); b: 2, 3, 4; c: 10, 10, 10.
        let est = [
            ("a", 0, 1.0),
            ("a", 1, 2.0),
            ("a", 2, 9.0),
            ("b", 0, 2.0),
            ("b", 1, 3.0),
            ("b", 2, 4.0),
            ("c", 0, 10.0),
            ("c", 1, 10.0),
            ("c", 2, 10.0),
        ];
        // Case medians 2, 3, 10: the median 3. Round medians 2, 3, 9.
        assert_eq!(pool(&est), Some((3.0, 2.0, 9.0)));
        assert_eq!(pool(&[]), None);
    }
}
