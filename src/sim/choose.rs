//! `gradcomp choose`: which method reaches dense S-SGD's accuracy first on a cluster, and
//! how sure the projection is. Each method's time to accuracy is its steps to target
//! (from `gradcomp converge`, [`StepsToTarget`]) x its fastest simulated iteration; the
//! whole sweep is repeated over [`Scenario`]s, each a value of what the projection does not
//! know (the network's alpha and beta, the kernel launch cost, the references' kernel
//! readings, a measured profile or the roofline, this CPU's or the reference CPU's
//! compression costs). Every comparison is within one scenario and one compression
//! placement, so a baseline is never priced with other sources than the method it is
//! set against.

use super::run::{sweep, SimulateRequest};
use super::summary::{aligned, config_label, steps_for, StepsToTarget};
use super::{Result, SimError, SimRow, WireCache};
use crate::devcost::profile::CompressProfile;
use crate::units::fmt_seconds;
use std::sync::Arc;

/// One value of what the projection does not know.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub label: String,
    /// Multipliers of the network preset's alpha and beta.
    pub network_scale: (f64, f64),
    /// The compression device preset with its options (`h100:launch_us=1`), or `None`
    /// (compression on the host).
    pub compress_device: Option<String>,
    /// Price device compression with the measured profile (else the roofline).
    pub profile: bool,
    /// Price host compression with the fits of `--fits` (this CPU; else the reference CPU).
    pub host_fits: bool,
}

/// What the sensitivity sweep varies, and by how much.
#[derive(Clone, Debug)]
pub struct Sensitivity {
    /// alpha and beta each at `1/factor`, 1 and `factor` times the preset's (all nine pairs).
    pub factor: f64,
    /// Per-kernel launch costs (us) besides the preset's own.
    pub launch_us: Vec<f64>,
    /// A measured compression profile is given: every scenario also priced with it.
    pub profile: bool,
    /// Host fits are given: every scenario also priced with this CPU's compression costs.
    pub host_fits: bool,
}

/// The scenarios of a sweep, the nominal one first (the presets as specified; the measured
/// profile and this CPU's fits where given). On the device: the nine network pairs x
/// (the preset's launch cost and each of `launch_us`), plus each other reading of the
/// references' kernels ([`crate::roofline::READINGS`]) at the nominal network; each of
/// these with and without the profile when one is given. On the host: the nine network
/// pairs, with and without this CPU's fits when given.
pub fn scenarios(device: Option<&str>, s: &Sensitivity) -> Vec<Scenario> {
    let f = s.factor;
    let mut scales = vec![(1.0, 1.0)];
    for a in [1.0 / f, 1.0, f] {
        for b in [1.0 / f, 1.0, f] {
            if (a, b) != (1.0, 1.0) {
                scales.push((a, b));
            }
        }
    }
    let mut devices: Vec<(String, Option<String>)> = Vec::new();
    match device {
        None => devices.push((String::new(), None)),
        Some(d) => {
            devices.push((String::new(), Some(d.to_string())));
            for us in &s.launch_us {
                devices.push((
                    format!(" launch {us}us"),
                    Some(format!("{d}:launch_us={us}")),
                ));
            }
        }
    }
    let mut out = Vec::new();
    let sources: Vec<bool> = if s.profile || s.host_fits {
        vec![true, false]
    } else {
        vec![false]
    };
    for &measured in &sources {
        let src = match (measured, device.is_some()) {
            (true, true) => " profile",
            (false, true) if s.profile => " roofline",
            (true, false) => " this CPU",
            (false, false) if s.host_fits => " reference CPU",
            _ => "",
        };
        for &(a, b) in &scales {
            for (dl, dev) in &devices {
                out.push(Scenario {
                    label: format!("alpha x{} beta x{}{dl}{src}", trim(a), trim(b)),
                    network_scale: (a, b),
                    compress_device: dev.clone(),
                    profile: measured && device.is_some(),
                    host_fits: measured && device.is_none(),
                });
            }
        }
        if let Some(d) = device {
            for (choice, variants, _) in crate::roofline::READINGS {
                for v in &variants[1..] {
                    out.push(Scenario {
                        label: format!("alpha x1 beta x1 {choice}={v}{src}"),
                        network_scale: (1.0, 1.0),
                        compress_device: Some(format!("{d}:{choice}={v}")),
                        profile: measured,
                        host_fits: false,
                    });
                }
            }
        }
    }
    out
}

/// `0.5`, `1`, `2` (a multiplier as a label).
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One method's place in the ranking.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub method: String,
    /// Its fastest configuration in the nominal scenario, and that iteration (s).
    pub config: String,
    pub iter_s: f64,
    /// Its steps to target (`None`: not ranked, with `verdict` saying why).
    pub steps: Option<StepsToTarget>,
    pub verdict: String,
    /// Time to accuracy in the nominal scenario (its most steps over seeds x iteration).
    pub tta_s: f64,
    /// The band over scenarios and seeds: the fewest steps x the fastest iteration to the
    /// most steps x the slowest.
    pub band_s: (f64, f64),
    /// S-SGD's time to accuracy over this method's, per scenario: the smallest and largest.
    pub vs_ssgd: Option<(f64, f64)>,
    /// Scenarios in which this method has the shortest time to accuracy.
    pub wins: usize,
    /// Its band overlaps the leader's in some scenario (the leader itself: false).
    pub tie: bool,
}

/// Rank methods by time to accuracy. `best[s]` holds, for scenario `s` (0: nominal), each
/// method's fastest row, the methods in one order in every scenario. A method's time in a
/// scenario is `steps x iter_s` with `steps` the most over its seeds (the band's low end:
/// the fewest); ranked methods first, by nominal time, then the unranked (never reach dense,
/// or not checked) in their order. A method ties with the leader when in some scenario its
/// fewest-steps time is at most the leader's most-steps time (their intervals overlap, or
/// it is faster there).
pub fn rank(best: &[Vec<SimRow>], steps: &[StepsToTarget]) -> Vec<Choice> {
    let Some(nominal) = best.first() else {
        return Vec::new();
    };
    // times[s][m] = (fewest-steps time, most-steps time) of method m in scenario s, for
    // methods with steps; computed once, read by every comparison below.
    let times: Vec<Vec<Option<(f64, f64)>>> = best
        .iter()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let st = steps_for(r, steps)?;
                    let most = st.steps? as f64;
                    let fewest = st.fewest_steps.map_or(most, |f| f as f64);
                    Some((fewest * r.iter_s, most * r.iter_s))
                })
                .collect()
        })
        .collect();
    let time = |m: usize, s: usize| times[s][m];
    let ssgd = nominal.iter().position(|r| r.method == "ssgd");
    let mut out: Vec<Choice> = Vec::new();
    for (m, r) in nominal.iter().enumerate() {
        let st = steps_for(r, steps).cloned();
        let per: Vec<Option<(f64, f64)>> = (0..best.len()).map(|s| time(m, s)).collect();
        let ranked = per.iter().all(Option::is_some);
        let verdict = match &st {
            None => "not checked: no converge case of this method and parameters".to_string(),
            Some(s) => s.verdict.clone(),
        };
        let (tta_s, band_s, vs_ssgd, wins) = if ranked {
            let t: Vec<(f64, f64)> = per.iter().map(|x| x.unwrap_or_default()).collect();
            let lo = t.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
            let hi = t.iter().map(|x| x.1).fold(0.0, f64::max);
            let vs = ssgd.and_then(|d| {
                let ratios: Option<Vec<f64>> = (0..best.len())
                    .map(|s| time(d, s).map(|dt| dt.1 / t[s].1))
                    .collect();
                ratios.map(|v| {
                    (
                        v.iter().copied().fold(f64::INFINITY, f64::min),
                        v.iter().copied().fold(0.0, f64::max),
                    )
                })
            });
            let wins = (0..best.len())
                .filter(|&s| {
                    (0..nominal.len())
                        .filter(|&o| o != m)
                        .all(|o| time(o, s).map_or(true, |ot| t[s].1 < ot.1))
                })
                .count();
            (t[0].1, (lo, hi), vs, wins)
        } else {
            (f64::INFINITY, (f64::INFINITY, f64::INFINITY), None, 0)
        };
        out.push(Choice {
            method: r.method.clone(),
            config: config_label(r, nominal),
            iter_s: r.iter_s,
            steps: st.filter(|_| ranked),
            verdict,
            tta_s,
            band_s,
            vs_ssgd,
            wins,
            tie: false,
        });
    }
    // Stable: unranked (infinite) keep their order after the ranked.
    let order: Vec<usize> = {
        let mut o: Vec<usize> = (0..out.len()).collect();
        o.sort_by(|&a, &b| out[a].tta_s.total_cmp(&out[b].tta_s));
        o
    };
    let leader = order.first().copied().filter(|&l| out[l].steps.is_some());
    if let Some(l) = leader {
        for (m, c) in out.iter_mut().enumerate() {
            if m == l || c.steps.is_none() {
                continue;
            }
            c.tie = (0..best.len()).any(|s| match (time(m, s), time(l, s)) {
                (Some(a), Some(b)) => a.0 <= b.1,
                _ => false,
            });
        }
    }
    order.into_iter().map(|i| out[i].clone()).collect()
}

/// The plain verdict line of a ranking over `n` scenarios.
pub fn verdict(ranked: &[Choice], n: usize) -> String {
    let Some(lead) = ranked.first().filter(|c| c.steps.is_some()) else {
        return "verdict: no method reaches dense S-SGD's accuracy in the converge run given (or none was checked): nothing to rank".into();
    };
    let ties: Vec<&str> = ranked
        .iter()
        .filter(|c| c.tie)
        .map(|c| c.method.as_str())
        .collect();
    let vs = match (lead.method.as_str(), lead.vs_ssgd) {
        ("ssgd", _) => " (no compression method beats S-SGD here)".to_string(),
        (_, Some((lo, hi))) => format!(" ({:.2}-{:.2}x faster than S-SGD)", lo, hi),
        _ => String::new(),
    };
    if ties.is_empty() {
        let next = ranked
            .get(1)
            .filter(|c| c.steps.is_some())
            .map(|c| {
                format!(
                    "; the next, {}, takes {:.2}x as long at the nominal costs",
                    c.method,
                    c.tta_s / lead.tta_s
                )
            })
            .unwrap_or_default();
        format!(
            "verdict: {}{vs}: fastest to dense accuracy in all {n} scenarios, at every seed{next}",
            lead.method
        )
    } else {
        format!(
            "verdict: no clear winner: {} and {} tie (their bands overlap: another scenario or seed reorders them); {} is fastest in {} of {n} scenarios{vs}. Decide on what the projection leaves out (memory, accuracy at full scale), or time them on the cluster (gradcomp e2e)",
            lead.method,
            ties.join(", "),
            lead.method,
            lead.wins
        )
    }
}

/// The ranking as a table, one line per method.
pub fn table(ranked: &[Choice]) -> String {
    let mut lines: Vec<[String; 7]> = vec![[
        "#".into(),
        "method".into(),
        "best configuration (nominal)".into(),
        "iteration".into(),
        "time to accuracy".into(),
        "band (scenarios x seeds)".into(),
        "vs S-SGD".into(),
    ]];
    let mut place = 0;
    for c in ranked {
        let (num, tta, band, vs) = match &c.steps {
            Some(s) => {
                place += 1;
                (
                    if c.tie {
                        format!("{place}=")
                    } else {
                        place.to_string()
                    },
                    format!(
                        "{} ({} steps, np {})",
                        fmt_seconds(c.tta_s),
                        s.steps.unwrap_or(0),
                        s.world_size
                    ),
                    format!("{} .. {}", fmt_seconds(c.band_s.0), fmt_seconds(c.band_s.1)),
                    c.vs_ssgd
                        .map_or("-".into(), |(lo, hi)| format!("{lo:.2}-{hi:.2}x")),
                )
            }
            None => ("-".into(), c.verdict.clone(), String::new(), String::new()),
        };
        lines.push([
            num,
            c.method.clone(),
            c.config.clone(),
            fmt_seconds(c.iter_s),
            tta,
            band,
            vs,
        ]);
    }
    aligned(&lines, 7)
}

/// One choose.csv row (docs/csv-schema.md): a method's fastest row in one scenario and its
/// time to accuracy there.
#[derive(Default, serde::Serialize)]
pub struct ChooseRow {
    pub schema_version: u32,
    pub scenario: usize,
    pub scenario_label: String,
    pub method: String,
    pub config: String,
    pub iter_s: f64,
    pub steps: Option<u64>,
    pub fewest_steps: Option<u64>,
    pub tta_s: Option<f64>,
    pub tta_fewest_s: Option<f64>,
}

/// The outcome of [`run`].
pub struct ChooseOutcome {
    pub ranked: Vec<Choice>,
    pub rows: Vec<ChooseRow>,
    pub cases: usize,
    /// What the caller should print before the ranking (an untrusted calibration priced
    /// anyway).
    pub warnings: Vec<String>,
}

/// Sweep `base` once per scenario and rank the methods ([`rank`]). `base` holds one model,
/// one world size, one network preset and one compression placement.
pub fn run(
    base: &SimulateRequest,
    scenarios: &[Scenario],
    steps: &[StepsToTarget],
) -> Result<ChooseOutcome> {
    let (report, warnings) = match base.fits.as_deref() {
        Some(d) => {
            let (rep, w) = super::run::trusted_fits(d, base.untrusted_fits)?;
            (Some(rep), w.into_iter().collect())
        }
        None => (None, Vec::new()),
    };
    let profile = match &base.compress_profile {
        Some(p) => Some(Arc::new(
            CompressProfile::read(p).map_err(|e| SimError::Input(e.to_string()))?,
        )),
        None => None,
    };
    let mut wires = WireCache::default();
    let mut best: Vec<Vec<SimRow>> = Vec::with_capacity(scenarios.len());
    let mut cases = 0;
    for s in scenarios {
        let req = SimulateRequest {
            network_scale: s.network_scale,
            compress_device: s.compress_device.clone(),
            ..base.clone()
        };
        let rows = sweep(
            &req,
            report.as_ref().filter(|_| s.host_fits),
            profile.as_ref().filter(|_| s.profile),
            &mut wires,
        )?;
        cases += rows.len();
        let mut fastest: Vec<SimRow> = Vec::new();
        for r in rows {
            match fastest.iter_mut().find(|b| b.method == r.method) {
                Some(b) if b.iter_s <= r.iter_s => {}
                Some(b) => *b = r,
                None => fastest.push(r),
            }
        }
        best.push(fastest);
    }
    let mut rows = Vec::new();
    for (i, (s, b)) in scenarios.iter().zip(&best).enumerate() {
        for r in b {
            let st = steps_for(r, steps);
            let most = st.and_then(|x| x.steps);
            let fewest = st.and_then(|x| x.fewest_steps.or(x.steps));
            rows.push(ChooseRow {
                schema_version: crate::record::SCHEMA_VERSION,
                scenario: i,
                scenario_label: s.label.clone(),
                method: r.method.clone(),
                config: config_label(r, b),
                iter_s: r.iter_s,
                steps: most,
                fewest_steps: fewest,
                tta_s: most.map(|n| n as f64 * r.iter_s),
                tta_fewest_s: fewest.map(|n| n as f64 * r.iter_s),
            });
        }
    }
    Ok(ChooseOutcome {
        ranked: rank(&best, steps),
        rows,
        cases,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(method: &str, iter_s: f64) -> SimRow {
        SimRow {
            model: "bert-large".into(),
            method: method.into(),
            fusion: "25MiB".into(),
            pipelining: "on",
            collective: "allreduce",
            world_size: 64,
            ranks_per_node: 1,
            network: "10gbe".into(),
            compress_on: "device",
            density: 0.001,
            rank: 4,
            iter_s,
            ..SimRow::default()
        }
    }

    fn steps(method: &str, most: Option<u64>, fewest: Option<u64>) -> StepsToTarget {
        StepsToTarget {
            method: method.into(),
            density: 0.001,
            rank: 4,
            world_size: 4,
            steps: most,
            fewest_steps: fewest,
            verdict: if most.is_some() {
                "reaches dense at 3 of 3 seeds".into()
            } else {
                "does not reach dense (best 0.700 at step 900)".into()
            },
            ..StepsToTarget::default()
        }
    }

    /// Two scenarios, by hand. ssgd 500..600 steps; topk 700..800; powersgd 400..600.
    /// Nominal: ssgd 1.0 s, topk 0.5 s, powersgd 0.6 s, marsit (never reaches) 0.1 s,
    /// qsgd (not checked) 0.2 s. Second: ssgd 2.0 s, topk 0.4 s, powersgd 0.9 s.
    /// Times (most steps): nominal ssgd 600, topk 400, powersgd 360; second ssgd 1200,
    /// topk 320, powersgd 540. Leader powersgd (360 s nominal); topk ties (second scenario:
    /// topk's fewest 700 x 0.4 = 280 <= powersgd's most 540, and it is faster there);
    /// ssgd does not (fewest 500 x 1.0 = 500 > 360; 1000 > 540).
    fn fixture() -> (Vec<Vec<SimRow>>, Vec<StepsToTarget>) {
        let names = ["ssgd", "topk", "powersgd", "marsit", "qsgd"];
        let nominal = [1.0, 0.5, 0.6, 0.1, 0.2];
        let second = [2.0, 0.4, 0.9, 0.1, 0.2];
        let best = [nominal, second]
            .iter()
            .map(|t| names.iter().zip(t).map(|(m, &s)| row(m, s)).collect())
            .collect();
        let st = vec![
            steps("ssgd", Some(600), Some(500)),
            steps("topk", Some(800), Some(700)),
            steps("powersgd", Some(600), Some(400)),
            steps("marsit", None, None),
        ];
        (best, st)
    }

    #[test]
    fn ranks_by_steps_times_iteration_with_bands_wins_and_ties() {
        let (best, st) = fixture();
        let r = rank(&best, &st);
        let order: Vec<&str> = r.iter().map(|c| c.method.as_str()).collect();
        assert_eq!(order, ["powersgd", "topk", "ssgd", "marsit", "qsgd"]);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        let p = &r[0];
        assert!(close(p.tta_s, 360.0) && !p.tie, "{p:?}");
        // Band: fewest 400 x the fastest iteration 0.6 = 240; most 600 x 0.9 = 540.
        assert!(
            close(p.band_s.0, 240.0) && close(p.band_s.1, 540.0),
            "{p:?}"
        );
        // vs S-SGD per scenario: 600/360 = 1.667, 1200/540 = 2.222.
        let (lo, hi) = p.vs_ssgd.unwrap();
        assert!(
            close(lo, 600.0 / 360.0) && close(hi, 1200.0 / 540.0),
            "{p:?}"
        );
        assert_eq!(p.wins, 1);
        let t = &r[1];
        assert!(close(t.tta_s, 400.0) && t.tie && t.wins == 1, "{t:?}");
        let s = &r[2];
        assert!(close(s.tta_s, 600.0) && !s.tie && s.wins == 0, "{s:?}");
        assert_eq!(s.vs_ssgd, Some((1.0, 1.0)));
        assert!(r[3].steps.is_none() && r[3].verdict.contains("does not reach"));
        assert!(r[4].steps.is_none() && r[4].verdict.starts_with("not checked"));
        let v = verdict(&r, 2);
        assert!(
            v.contains("no clear winner: powersgd and topk tie") && v.contains("1 of 2"),
            "{v}"
        );
        let t = table(&r);
        assert!(t.lines().nth(1).unwrap().starts_with("1   powersgd"), "{t}");
        assert!(t.lines().nth(2).unwrap().starts_with("2=  topk"), "{t}");
        assert!(t.lines().nth(4).unwrap().starts_with("-   marsit"), "{t}");
    }

    /// In the nominal scenario alone topk still ties by its seeds (fewest 700 x 0.5 = 350
    /// <= powersgd's 360); with its fewest steps at 800 (400 > 360) it does not.
    #[test]
    fn a_tie_needs_an_overlap_in_some_scenario() {
        let (mut best, mut st) = fixture();
        best.truncate(1);
        let r = rank(&best, &st);
        assert!(r.iter().find(|c| c.method == "topk").unwrap().tie);
        st[1].fewest_steps = Some(800);
        let r = rank(&best, &st);
        assert!(r.iter().all(|c| !c.tie), "{r:?}");
        let v = verdict(&r, 1);
        assert!(
            v.starts_with("verdict: powersgd (1.67-1.67x faster than S-SGD): fastest to dense accuracy in all 1 scenarios")
                && v.contains("the next, topk, takes 1.11x as long"),
            "{v}"
        );
    }

    #[test]
    fn nothing_ranked_and_ssgd_leading_say_so() {
        let (best, mut st) = fixture();
        for s in &mut st {
            s.steps = None;
        }
        assert!(verdict(&rank(&best, &st), 2).contains("nothing to rank"));
        let (best, st) = fixture();
        let only: Vec<StepsToTarget> = st.into_iter().filter(|s| s.method == "ssgd").collect();
        let v = verdict(&rank(&best, &only), 2);
        assert!(
            v.contains("verdict: ssgd (no compression method beats S-SGD here)"),
            "{v}"
        );
    }

    #[test]
    fn scenarios_on_the_device_and_on_the_host() {
        let s = Sensitivity {
            factor: 2.0,
            launch_us: vec![1.0, 10.0],
            profile: false,
            host_fits: false,
        };
        let d = scenarios(Some("h100"), &s);
        // 9 network pairs x 3 launch costs + 2 + 2 other readings.
        assert_eq!(d.len(), 9 * 3 + 4);
        assert_eq!(d[0].network_scale, (1.0, 1.0));
        assert_eq!(d[0].compress_device.as_deref(), Some("h100"));
        assert!(d.iter().any(|x| x.network_scale == (0.5, 2.0)
            && x.compress_device.as_deref() == Some("h100:launch_us=10")));
        assert!(d
            .iter()
            .any(|x| x.compress_device.as_deref() == Some("h100:topk_decompress=index-add")));
        let mut labels: Vec<&str> = d.iter().map(|x| x.label.as_str()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), d.len(), "labels name each scenario once");
        let p = scenarios(
            Some("h100"),
            &Sensitivity {
                profile: true,
                ..s.clone()
            },
        );
        assert_eq!(p.len(), 2 * d.len());
        assert!(p[0].profile && !p[p.len() - 1].profile);
        let h = scenarios(None, &s);
        assert_eq!(h.len(), 9);
        assert!(h
            .iter()
            .all(|x| x.compress_device.is_none() && !x.host_fits));
        let f = scenarios(
            None,
            &Sensitivity {
                host_fits: true,
                ..s
            },
        );
        assert_eq!(f.len(), 18);
        assert!(f[0].host_fits && f[0].label.ends_with("this CPU"));
    }

    /// Each scenario's label by hand: the multipliers, the launch cost or reading, and
    /// the cost source (`profile` / `roofline` on the device when a profile is given,
    /// `this CPU` / `reference CPU` on the host when fits are given, nothing otherwise);
    /// the measured profile only on the device, this CPU's fits only on the host.
    #[test]
    fn scenario_labels_name_the_multipliers_and_the_cost_source() {
        let s = Sensitivity {
            factor: 2.0,
            launch_us: vec![10.0],
            profile: false,
            host_fits: false,
        };
        let d = scenarios(Some("h100"), &s);
        assert_eq!(d[0].label, "alpha x1 beta x1");
        assert_eq!(d[1].label, "alpha x1 beta x1 launch 10us");
        assert_eq!(d[2].label, "alpha x0.5 beta x0.5");
        assert_eq!(
            d[d.len() - 1].label,
            format!(
                "alpha x1 beta x1 {}={}",
                crate::roofline::READINGS.last().unwrap().0,
                crate::roofline::READINGS.last().unwrap().1.last().unwrap()
            )
        );
        let p = scenarios(
            Some("h100"),
            &Sensitivity {
                profile: true,
                ..s.clone()
            },
        );
        let half = p.len() / 2;
        assert_eq!(p[0].label, "alpha x1 beta x1 profile");
        assert_eq!(p[half].label, "alpha x1 beta x1 roofline");
        assert!(p[..half].iter().all(|x| x.profile && !x.host_fits));
        assert!(p[half..].iter().all(|x| !x.profile && !x.host_fits));
        let h = scenarios(None, &s);
        assert_eq!(h[0].label, "alpha x1 beta x1");
        let f = scenarios(
            None,
            &Sensitivity {
                host_fits: true,
                ..s.clone()
            },
        );
        assert_eq!(f[0].label, "alpha x1 beta x1 this CPU");
        assert_eq!(f[9].label, "alpha x1 beta x1 reference CPU");
        assert!(f[..9].iter().all(|x| x.host_fits && !x.profile));
        assert!(f[9..].iter().all(|x| !x.host_fits && !x.profile));
        // Both given: the device reads the profile, the host the fits.
        let both = Sensitivity {
            profile: true,
            host_fits: true,
            ..s
        };
        assert_eq!(
            scenarios(Some("h100"), &both)[0].label,
            "alpha x1 beta x1 profile"
        );
        assert_eq!(scenarios(None, &both)[0].label, "alpha x1 beta x1 this CPU");
    }

    /// A scenario won needs the strictly shortest time: ssgd 600 x 1.0 s and topk 800 x
    /// 0.75 s tie at 600 s, so neither wins it.
    #[test]
    fn an_exact_tie_wins_no_scenario() {
        let best = vec![vec![row("ssgd", 1.0), row("topk", 0.75)]];
        let st = vec![
            steps("ssgd", Some(600), Some(600)),
            steps("topk", Some(800), Some(800)),
        ];
        let r = rank(&best, &st);
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|c| c.wins == 0), "{r:?}");
    }

    /// [`run`] over two scenarios of resnet20 at 4 ranks on 10gbe, compression on an
    /// h100: the nominal one, and alpha x2 beta x2 with a 1 ms kernel launch; ssgd and
    /// topk, each at fusion none and single, pipelining off and on (4 cases a method, 16
    /// a scenario). The reference is
    /// `sweep` of each scenario's request, called here: per scenario and method the
    /// fastest of its rows; choose.csv one row per scenario and method, its steps and
    /// steps x that iteration; the ranking [`rank`] of those rows.
    #[test]
    fn run_keeps_each_methods_fastest_row_per_scenario() {
        use crate::comm::exchange::CollectiveMode;
        use crate::compress::MethodParams;
        use crate::schedule::plan::Fusion;
        let base = SimulateRequest {
            models: vec!["resnet20".into()],
            methods: vec!["ssgd".into(), "topk".into()],
            fusion: vec![Fusion::None, Fusion::Single],
            pipelining: vec![false, true],
            collectives: vec![CollectiveMode::Native],
            world_sizes: vec![4],
            device: "v100".into(),
            params: vec![MethodParams::default()],
            network: Some("10gbe".into()),
            networks: vec!["10gbe".into()],
            compress_on: vec![crate::devcost::CompressOn::Device],
            compress_device: Some("h100".into()),
            ..SimulateRequest::unswept(std::path::PathBuf::new())
        };
        let scenario = |label: &str, scale: f64, device: &str| Scenario {
            label: label.into(),
            network_scale: (scale, scale),
            compress_device: Some(device.into()),
            profile: false,
            host_fits: false,
        };
        let sc = [
            scenario("nominal", 1.0, "h100"),
            scenario("slow", 2.0, "h100:launch_us=1000"),
        ];
        // topk at its default density, 0.001 (steps' own).
        let st = vec![
            steps("ssgd", Some(600), Some(500)),
            steps("topk", Some(800), None),
        ];
        let out = run(&base, &sc, &st).unwrap();
        assert!(out.warnings.is_empty());
        assert_eq!(out.cases, 2 * 2 * 4);
        let mut best: Vec<Vec<SimRow>> = Vec::new();
        for (i, s) in sc.iter().enumerate() {
            let req = SimulateRequest {
                network_scale: s.network_scale,
                compress_device: s.compress_device.clone(),
                ..base.clone()
            };
            let rows = sweep(&req, None, None, &mut WireCache::default()).unwrap();
            assert_eq!(rows.len(), 8);
            let mut b = Vec::new();
            for (m, most, fewest) in [("ssgd", 600.0, 500.0), ("topk", 800.0, 800.0)] {
                let f = rows
                    .iter()
                    .filter(|r| r.method == m)
                    .min_by(|a, b| a.iter_s.total_cmp(&b.iter_s))
                    .unwrap()
                    .clone();
                let row = out
                    .rows
                    .iter()
                    .find(|r| r.scenario == i && r.method == m)
                    .unwrap();
                assert_eq!(row.scenario_label, s.label);
                assert_eq!(row.iter_s, f.iter_s, "{m} in {}", s.label);
                assert_eq!(row.tta_s, Some(most * f.iter_s));
                assert_eq!(row.tta_fewest_s, Some(fewest * f.iter_s));
                assert_eq!(row.fewest_steps, Some(fewest as u64));
                b.push(f);
            }
            best.push(b);
        }
        assert_eq!(out.rows.len(), 4);
        // The slower network slows S-SGD's fastest configuration, the launch cost top-k's:
        // each scenario's own costs were applied.
        assert!(best[1][0].iter_s > best[0][0].iter_s);
        assert!(best[1][1].iter_s > best[0][1].iter_s);
        assert_eq!(out.ranked, rank(&best, &st));
    }
}
