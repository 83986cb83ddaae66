//! Recorded runs as a regression corpus (issue 29): every run under
//! tests/data/sim-accuracy/MACHINE/npN (a `make sim-accuracy` run's e2e.csv,
//! micro_comm.csv, micro_compress.csv and run.json; README.md names machine, date and
//! revision) replayed through `gradcomp simulate --fits RUN --compare RUN/e2e.csv`. A case
//! passes within the tolerance; it is not judged when the run's ranks outnumber its
//! cores, or when its own run-to-run spread (the width of the median's order-statistic
//! interval over the median of its rows' `iter_s`: the range of 2-4 rounds, the second
//! to fourth of 5), plus how far the prediction moves with its compression fit's spread
//! and at least with the run's host jitter, exceeds the tolerance (docs/performance.md,
//! "Simulator accuracy"). This test computes the spreads and the jitter from the recorded
//! files itself, bounds what the simulator reports for the prediction's movement by them
//! times the case's host share, and the simulator's own `verdict` column must agree with
//! the verdict of those numbers. A case outside that is listed in MACHINE/known-misses.csv (with
//! its reason) is expected outside; a listed case that no longer is fails too, so the
//! list cannot go stale.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

const TOLERANCE: f64 = 0.15;

/// The recorded runs: every directory under tests/data/sim-accuracy/*/ with an e2e.csv.
fn recorded_runs() -> Vec<PathBuf> {
    let base = root().join("tests/data/sim-accuracy");
    let mut runs = Vec::new();
    for m in std::fs::read_dir(&base).expect("tests/data/sim-accuracy") {
        let m = m.unwrap().path();
        if !m.is_dir() {
            continue;
        }
        for r in std::fs::read_dir(&m).unwrap() {
            let r = r.unwrap().path();
            if r.join("e2e.csv").exists() {
                runs.push(r);
            }
        }
    }
    runs.sort();
    runs
}

/// The median's distribution-free interval of sorted `v`, written here from its
/// definition: `(v_(j), v_(n+1-j))` (1-based) for the largest `j <= ceil(n / 2)` whose
/// coverage `1 - 2 sum_{i < j} C(n, i) / 2^n` is at least 1/2.
fn median_interval(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    let binom = |i: usize| (0..i).fold(1.0, |c, t| c * (n - t) as f64 / (t + 1) as f64);
    let coverage = |j: usize| 1.0 - 2.0 * (0..j).map(binom).sum::<f64>() / 2f64.powi(n as i32);
    let j = (1..=n.div_ceil(2))
        .filter(|&j| j == 1 || coverage(j) >= 0.5)
        .max()
        .unwrap();
    (v[j - 1], v[n - j])
}

/// Per case label: the spread of its measured rows, the median interval's width over the
/// median, from the
/// library's grouping of e2e.csv into cases (the same cases `simulate --compare` labels).
fn spreads(e2e: &Path) -> BTreeMap<String, Option<f64>> {
    gradcomp::sim::measured_cases(e2e)
        .unwrap()
        .into_iter()
        .map(|c| {
            let mut v: Vec<f64> = c.rows.iter().map(|r| r.iter_s).collect();
            v.sort_by(f64::total_cmp);
            let med = if v.len() % 2 == 1 {
                v[v.len() / 2]
            } else {
                0.5 * (v[v.len() / 2 - 1] + v[v.len() / 2])
            };
            let s = (v.len() > 1).then(|| {
                let (lo, hi) = median_interval(&v);
                (hi - lo) / med
            });
            (c.label, s)
        })
        .collect()
}

/// The run's host jitter, written again from the rule in docs/performance.md ("Simulator
/// accuracy"): every host-compression row's `host_compress_s + host_decompress_s` over
/// its case's median (cases of two or more rows), pooled, 90th minus 10th percentile
/// (linear interpolation between closest ranks); `None` under 10 pooled rows.
fn host_jitter(e2e: &Path) -> Option<f64> {
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        }
    };
    let mut pooled = Vec::new();
    for c in gradcomp::sim::measured_cases(e2e).unwrap() {
        if c.case.compress_on != gradcomp::devcost::CompressOn::Host {
            continue;
        }
        let h: Vec<f64> = c.rows.iter().filter_map(|r| r.host_s).collect();
        if h.len() < 2 {
            continue;
        }
        let m = median(&mut h.clone());
        pooled.extend(h.iter().map(|x| x / m));
    }
    if pooled.len() < 10 {
        return None;
    }
    pooled.sort_by(f64::total_cmp);
    let at = |p: f64| {
        let x = (pooled.len() - 1) as f64 * p;
        let (i, f) = (x.floor() as usize, x - x.floor());
        pooled[i] + f * (pooled[(i + 1).min(pooled.len() - 1)] - pooled[i])
    };
    Some(at(0.9) - at(0.1))
}

/// Whether the run's ranks outnumbered the cores of its most loaded machine (run.json:
/// `hosts`, `host_cores`, `host_kernels`: one entry per rank), its cores counted
/// `time_dilation` times (each thread had that many times its CPU time).
fn ranks_exceed_cores(run_json: &Path) -> bool {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_json).unwrap()).unwrap();
    let k = v.get("time_dilation").and_then(|k| k.as_u64()).unwrap_or(1);
    let hosts = v["hosts"].as_array().unwrap();
    let cores = v["host_cores"].as_array().unwrap();
    let kernels = v.get("host_kernels").and_then(|k| k.as_array());
    let mut machines: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for i in 0..hosts.len() {
        let id = kernels
            .and_then(|k| k[i].as_str())
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| hosts[i].as_str().unwrap())
            .to_string();
        let e = machines.entry(id).or_insert((0, u64::MAX));
        e.0 += 1;
        e.1 = e.1.min(cores[i].as_u64().unwrap());
    }
    machines.values().any(|&(r, c)| r > c * k)
}

/// MACHINE/known-misses.csv: `run,case,reason` rows (run = `np2`, ...).
fn known_misses(machine: &Path) -> BTreeSet<(String, String)> {
    let p = machine.join("known-misses.csv");
    if !p.exists() {
        return BTreeSet::new();
    }
    let (h, rows) = read_csv(&p);
    assert_eq!(h, ["run", "case", "reason"], "{}", p.display());
    rows.into_iter()
        .map(|r| {
            assert!(
                !r[2].trim().is_empty(),
                "{}: a miss needs its reason",
                p.display()
            );
            (r[0].clone(), r[1].clone())
        })
        .collect()
}

/// Per method, the relative spread of its micro-compress rounds, written again from the
/// rule (docs/csv-schema.md, fits.csv `round_min` / `round_max`): per phase, the rows of
/// one (tensors, numel) are rounds; the in-model sweep (tensors > 1) where the method has
/// one, else its single tensors; of the measurements with two or more rounds the one whose
/// median interval is relatively widest, `(hi - lo) / hi`, gives that phase's bounds; the
/// phases' sums give `(hi - lo) / hi`.
fn compress_round_spreads(path: &Path) -> HashMap<String, f64> {
    let (h, rows) = read_csv(path);
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (m, numel, tensors) = (col("method"), col("numel"), col("tensors"));
    let phases = [col("compress_s"), col("feedback_s"), col("decompress_s")];
    let mut out = HashMap::new();
    let methods: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[m].as_str()).collect();
    for method in methods {
        let mine: Vec<&Vec<String>> = rows.iter().filter(|r| r[m] == method).collect();
        let in_model = mine.iter().any(|r| r[tensors] != "1");
        let (mut lo, mut hi, mut any) = (0.0, 0.0, false);
        for &p in &phases {
            let mut groups: HashMap<(String, String), Vec<f64>> = HashMap::new();
            for r in mine.iter().filter(|r| (r[tensors] != "1") == in_model) {
                let t: f64 = if r[p].is_empty() {
                    0.0
                } else {
                    r[p].parse().unwrap()
                };
                groups
                    .entry((r[tensors].clone(), r[numel].clone()))
                    .or_default()
                    .push(t);
            }
            let best = groups
                .values()
                .filter(|v| v.len() > 1)
                .map(|v| {
                    let mut v = v.clone();
                    v.sort_by(f64::total_cmp);
                    median_interval(&v)
                })
                .filter(|&(_, b)| b > 0.0)
                .max_by(|x, y| ((x.1 - x.0) / x.1).total_cmp(&((y.1 - y.0) / y.1)));
            if let Some((a, b)) = best {
                lo += a;
                hi += b;
                any = true;
            }
        }
        if any && hi > 0.0 {
            out.insert(method.to_string(), (hi - lo) / hi);
        }
    }
    out
}

#[test]
fn every_recorded_run_replays_within_the_tolerance_or_too_noisy_to_judge() {
    let runs = recorded_runs();
    assert!(
        runs.len() >= 2,
        "expected the recorded runs under tests/data/sim-accuracy, found {runs:?}"
    );
    let mut failures = Vec::new();
    let mut judged = 0;
    for run in &runs {
        let machine = run.parent().unwrap();
        let name = run.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            machine.join("README.md").exists(),
            "{}: a recorded run needs README.md naming machine, date and revision",
            machine.display()
        );
        let misses = known_misses(machine);
        let out_dir = tmpdir(&format!(
            "corpus-{}-{name}",
            machine.file_name().unwrap().to_str().unwrap()
        ));
        let out = Command::new(BIN)
            .args(["simulate", "--fits"])
            .arg(run)
            .arg("--compare")
            .arg(run.join("e2e.csv"))
            .args(["--tolerance", &TOLERANCE.to_string(), "--out"])
            .arg(&out_dir)
            .output()
            .unwrap();
        // Exit 1 is a case outside the tolerance, judged below; anything else is broken.
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{}: {}",
            run.display(),
            stderr(&out)
        );
        let spread = spreads(&run.join("e2e.csv"));
        let fit_spreads = compress_round_spreads(&run.join("micro_compress.csv"));
        let jitter = host_jitter(&run.join("e2e.csv"));
        let oversubscribed = ranks_exceed_cores(&run.join("run.json"));
        let (h, rows) = read_csv(&out_dir.join("sim_vs_measured.csv"));
        let col = |n: &str| h.iter().position(|c| c == n).unwrap();
        let verdict_col = h.iter().position(|c| c == "verdict");
        if verdict_col.is_none() {
            failures.push(format!(
                "{}: sim_vs_measured.csv has no verdict column",
                run.display()
            ));
        }
        assert_eq!(rows.len(), spread.len(), "{}", run.display());
        for r in &rows {
            let case = &r[col("case")];
            let err: f64 = r[col("rel_err")].parse().unwrap();
            let s = spread[case];
            // The compression fit's own noise, for host compression: the method's spread
            // over its micro-compress rounds (computed here from the CSV) times the share
            // of the simulated iteration that host compression takes.
            let share: f64 = r[col("host_compress_share")].parse().unwrap();
            let method = r[col("method")].as_str();
            let fit = fit_spreads
                .get(gradcomp::config::base_method(method))
                .filter(|_| share > 0.0)
                .map(|f| f * share);
            // What the simulator reports is how far its prediction moves when the method's
            // host compression moves by that spread (and by the host jitter): at most share
            // x spread, all of it where every compression is on the critical path, less
            // where some hides under backward or under another bucket's exchange (a
            // closed form in src/sim/tests/comparison.rs).
            let mut moved = |what: &str, bound: Option<f64>| -> Option<f64> {
                let c = &r[col(what)];
                match bound {
                    Some(b) => {
                        let got: f64 = c.parse().unwrap_or(f64::NAN);
                        if !(0.0..=b * (1.0 + 1e-9)).contains(&got) {
                            failures.push(format!(
                                "{}: {case}: {what} {c}, want 0 .. {b}",
                                run.display()
                            ));
                        }
                        Some(got)
                    }
                    None => {
                        if !c.is_empty() {
                            failures
                                .push(format!("{}: {case}: {what} {c}, want empty", run.display()));
                        }
                        None
                    }
                }
            };
            let fit = moved("fit_spread_rel", fit);
            // The run's host jitter moves it too: a floor under the noise.
            let jit = moved(
                "host_jitter_rel",
                jitter.filter(|_| share > 0.0).map(|j| j * share),
            );
            let noise = match (s, fit) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            let noise = match (noise, jit) {
                (Some(a), Some(j)) => Some(a.max(j)),
                (a, j) => a.or(j),
            };
            let want = if oversubscribed {
                "ranks-exceed-cores"
            } else if noise.is_some_and(|s| s > TOLERANCE) {
                "too-noisy"
            } else if err.abs() <= TOLERANCE {
                "within"
            } else {
                "outside"
            };
            judged += usize::from(matches!(want, "within" | "outside"));
            if let Some(v) = verdict_col.filter(|&v| r[v] != want) {
                failures.push(format!(
                    "{}: {case}: simulate says {}, the recorded spread and layout say {want}",
                    run.display(),
                    r[v]
                ));
            }
            let listed = misses.contains(&(name.clone(), case.clone()));
            match (want == "outside", listed) {
                (true, false) => failures.push(format!(
                    "{}/{name}: {case} {:+.1}% (spread {:.1}%) outside {}%",
                    machine.display(),
                    err * 100.0,
                    s.unwrap_or(f64::NAN) * 100.0,
                    TOLERANCE * 100.0
                )),
                (false, true) => failures.push(format!(
                    "{}/{name}: {case} is {want} ({:+.1}%) but listed in known-misses.csv: remove it",
                    machine.display(),
                    err * 100.0
                )),
                _ => {}
            }
        }
    }
    assert!(judged > 0, "no case of the corpus was judged");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
