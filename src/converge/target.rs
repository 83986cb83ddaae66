//! Steps to dense accuracy (docs/methods.md, "Convergence check"): the target a method
//! must reach is dense S-SGD's final held-out loss and accuracy, widened by how much
//! dense itself varies from seed to seed; a method's steps to target is the first
//! evaluated step at which both are met.
//!
//! The margin is the one-sided 95% prediction bound of one more dense seed (Hahn &
//! Meeker, "Statistical Intervals", 1991, Sec. 4.6): `mean + t(0.95, n-1) s sqrt(1 + 1/n)`
//! for the loss and `mean - t(0.95, n-1) s sqrt(1 + 1/n)` for the accuracy, with `n` dense
//! seeds, their mean and sample standard deviation `s`. A method inside it cannot be told
//! from another dense seed at its last step; two or more dense seeds are needed.

/// One evaluation of a curve: after `step + 1` steps (0-based `step`, as converge.csv).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalPoint {
    pub step: u64,
    pub loss: f64,
    pub accuracy: f64,
}

/// What a method must reach, and how it was derived.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Held-out loss at most this.
    pub loss: f64,
    /// Held-out accuracy at least this.
    pub accuracy: f64,
    /// Dense S-SGD's seeds, mean and sample standard deviation of their final values.
    pub dense_seeds: usize,
    pub dense_loss_mean: f64,
    pub dense_loss_sd: f64,
    pub dense_accuracy_mean: f64,
    pub dense_accuracy_sd: f64,
    /// `t(0.95, n-1) sqrt(1 + 1/n)`: the margin in standard deviations.
    pub margin_sds: f64,
}

/// How the margin is derived, for the summary and targets.csv.
pub const MARGIN_RULE: &str =
    "one-sided 95% prediction bound of one more dense seed: mean +- t(0.95,n-1)*sd*sqrt(1+1/n)";

/// Student's t quantile t(0.95, df) (one-sided 95%), from the standard table (e.g. NIST/
/// SEMATECH e-Handbook, Table 1.3.6.7.2); between rows the next smaller df's (larger,
/// so conservative) value; 1.645 (the normal's) above 120.
pub fn t95(df: usize) -> f64 {
    const T: [(usize, f64); 19] = [
        (1, 6.314),
        (2, 2.920),
        (3, 2.353),
        (4, 2.132),
        (5, 2.015),
        (6, 1.943),
        (7, 1.895),
        (8, 1.860),
        (9, 1.833),
        (10, 1.812),
        (12, 1.782),
        (15, 1.753),
        (20, 1.725),
        (25, 1.708),
        (30, 1.697),
        (40, 1.684),
        (60, 1.671),
        (120, 1.658),
        (usize::MAX, 1.645),
    ];
    let mut v = f64::INFINITY;
    for &(d, t) in &T {
        if d > df {
            break;
        }
        v = t;
    }
    v
}

/// The target from dense S-SGD's final (loss, accuracy) at each of its seeds; `None` with
/// fewer than two finite seeds (no spread to derive a margin from).
pub fn from_dense(finals: &[(f64, f64)]) -> Option<Target> {
    let f: Vec<(f64, f64)> = finals
        .iter()
        .copied()
        .filter(|(l, a)| l.is_finite() && a.is_finite())
        .collect();
    let n = f.len();
    if n < 2 {
        return None;
    }
    let mean = |g: &dyn Fn(&(f64, f64)) -> f64| f.iter().map(g).sum::<f64>() / n as f64;
    let (ml, ma) = (mean(&|p| p.0), mean(&|p| p.1));
    let sd = |g: &dyn Fn(&(f64, f64)) -> f64, m: f64| {
        (f.iter().map(|p| (g(p) - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    };
    let (sl, sa) = (sd(&|p| p.0, ml), sd(&|p| p.1, ma));
    let k = t95(n - 1) * (1.0 + 1.0 / n as f64).sqrt();
    Some(Target {
        loss: ml + k * sl,
        accuracy: ma - k * sa,
        dense_seeds: n,
        dense_loss_mean: ml,
        dense_loss_sd: sl,
        dense_accuracy_mean: ma,
        dense_accuracy_sd: sa,
        margin_sds: k,
    })
}

/// Where a curve stands against a target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reach {
    /// Both met first after this many steps (`step + 1` of that evaluation).
    Reached { steps: u64 },
    /// Never met: its lowest held-out loss and after how many steps.
    NotReached { best_loss: f64, best_steps: u64 },
    /// No evaluation in the curve.
    NoData,
}

/// The first evaluation of `curve` (in step order) whose loss is at most `t.loss` and
/// whose accuracy is at least `t.accuracy`.
pub fn steps_to_target(curve: &[EvalPoint], t: &Target) -> Reach {
    let mut pts: Vec<&EvalPoint> = curve.iter().collect();
    pts.sort_by_key(|p| p.step);
    if let Some(p) = pts
        .iter()
        .find(|p| p.loss <= t.loss && p.accuracy >= t.accuracy)
    {
        return Reach::Reached { steps: p.step + 1 };
    }
    match pts
        .iter()
        .filter(|p| p.loss.is_finite())
        .min_by(|a, b| a.loss.total_cmp(&b.loss))
    {
        Some(p) => Reach::NotReached {
            best_loss: p.loss,
            best_steps: p.step + 1,
        },
        None => Reach::NoData,
    }
}

/// One configuration of a converge.csv: its setup and config ids, what it ran, and per
/// seed its evaluations and last status.
struct Config {
    setup: String,
    id: String,
    method: String,
    density: f64,
    rank: usize,
    world_size: usize,
    sketch: Option<(usize, f64)>,
    qsgd_levels: Option<u32>,
    seeds: std::collections::HashMap<String, (Vec<EvalPoint>, String)>,
}

/// Every configuration's steps to dense's target in a converge.csv (`simulate
/// --converge`): per setup (`setup_id`), dense S-SGD's finished seeds give the target;
/// per configuration (`config_id`) the most steps over its seeds, or `None` with the
/// verdict where a seed never reached it, diverged or was cut off.
pub fn from_csv(
    path: &std::path::Path,
) -> crate::error::Result<Vec<crate::sim::summary::StepsToTarget>> {
    let configs = read_configs(path)?;
    if configs.is_empty() {
        return Err(bad_csv(path, "has no rows".into()));
    }
    Ok(configs.iter().map(|cfg| reach_of(cfg, &configs)).collect())
}

/// `--converge FILE: why`, the path clipped.
fn bad_csv(path: &std::path::Path, why: String) -> crate::error::Error {
    crate::error::Error::Input(format!(
        "--converge {}: {why}",
        crate::config::clip(&path.display().to_string())
    ))
}

/// The columns of a converge.csv that [`from_csv`] reads: the key, the evaluations and
/// the status (`key`, in the order of [`Columns::read`]), and the other parameters of
/// the verdict's key (absent in files before 2026-11-28: then a sketch or QSGD row
/// matches any size).
struct Columns {
    key: [usize; 11],
    sketch_rows: Option<usize>,
    sketch_cols_per_k: Option<usize>,
    qsgd_levels: Option<usize>,
}

impl Columns {
    fn read(
        header: &csv::StringRecord,
        bad: impl Fn(String) -> crate::error::Error,
    ) -> crate::error::Result<Columns> {
        let col = |name: &str| {
            header.iter().position(|c| c == name).ok_or_else(|| {
                bad(format!(
                    "has no '{name}' column: written by a gradcomp before steps to target (2026-11-28); run gradcomp converge again"
                ))
            })
        };
        let key = [
            col("setup_id")?,
            col("config_id")?,
            col("method")?,
            col("seed")?,
            col("world_size")?,
            col("density")?,
            col("rank")?,
            col("step")?,
            col("eval_loss")?,
            col("eval_accuracy")?,
            col("status")?,
        ];
        let opt = |name: &str| header.iter().position(|c| c == name);
        Ok(Columns {
            key,
            sketch_rows: opt("sketch_rows"),
            sketch_cols_per_k: opt("sketch_cols_per_k"),
            qsgd_levels: opt("qsgd_levels"),
        })
    }
}

/// Every configuration of a converge.csv with its seeds' evaluations, in file order.
fn read_configs(path: &std::path::Path) -> crate::error::Result<Vec<Config>> {
    use crate::error::Error;
    let bad = |why: String| bad_csv(path, why);
    let file = crate::input::open(
        path,
        crate::input::RESULT_CSV_BYTES,
        "the converge.csv of a gradcomp converge run",
    )
    .map_err(|e| Error::Input(format!("--converge {e}")))?;
    let mut r = csv::Reader::from_reader(file);
    let header = r
        .headers()
        .map_err(|e| bad(format!("not a CSV file ({e})")))?
        .clone();
    let cols = Columns::read(&header, bad)?;
    let c = cols.key;
    let mut configs: Vec<Config> = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.map_err(|e| bad(format!("row {}: {e}", i + 2)))?;
        let get = |k: usize| rec.get(c[k]).unwrap_or("");
        let num = |k: usize, what: &str| {
            get(k).parse::<f64>().map_err(|_| {
                bad(format!(
                    "row {}: {what} '{}' is not a number",
                    i + 2,
                    crate::config::clip(get(k))
                ))
            })
        };
        let pos = match configs
            .iter()
            .position(|x| x.setup == get(0) && x.id == get(1))
        {
            Some(p) => p,
            None => {
                configs.push(Config::first_row(&rec, &cols, i + 2, bad)?);
                configs.len() - 1
            }
        };
        let seed = configs[pos].seeds.entry(get(3).to_string()).or_default();
        seed.1 = get(10).to_string();
        if let (Ok(loss), Ok(accuracy)) = (get(8).parse::<f64>(), get(9).parse::<f64>()) {
            seed.0.push(EvalPoint {
                step: num(7, "step")? as u64,
                loss,
                accuracy,
            });
        }
    }
    Ok(configs)
}

impl Config {
    /// The configuration of row number `row` (its first row in the file).
    fn first_row(
        rec: &csv::StringRecord,
        cols: &Columns,
        row: usize,
        bad: impl Fn(String) -> crate::error::Error,
    ) -> crate::error::Result<Config> {
        let c = cols.key;
        let get = |k: usize| rec.get(c[k]).unwrap_or("");
        let num = |k: usize, what: &str| {
            get(k).parse::<f64>().map_err(|_| {
                bad(format!(
                    "row {row}: {what} '{}' is not a number",
                    crate::config::clip(get(k))
                ))
            })
        };
        let (rows_c, cols_c, levels_c) =
            (cols.sketch_rows, cols.sketch_cols_per_k, cols.qsgd_levels);
        Ok(Config {
            setup: get(0).to_string(),
            id: get(1).to_string(),
            method: get(2).to_string(),
            density: num(5, "density")?,
            rank: num(6, "rank")? as usize,
            world_size: num(4, "world_size")? as usize,
            sketch: match (rows_c, cols_c) {
                (Some(a), Some(b)) => {
                    let (a, b) = (rec.get(a).unwrap_or(""), rec.get(b).unwrap_or(""));
                    match (a.parse::<usize>(), b.parse::<f64>()) {
                        (Ok(r), Ok(c)) => Some((r, c)),
                        _ => {
                            return Err(bad(format!(
                            "row {}: sketch_rows '{}' or sketch_cols_per_k '{}' is not a number",
                            row,
                            crate::config::clip(a),
                            crate::config::clip(b)
                        )))
                        }
                    }
                }
                _ => None,
            },
            qsgd_levels: match levels_c.map(|l| rec.get(l).unwrap_or("")) {
                Some(v) => Some(v.parse::<u32>().map_err(|_| {
                    bad(format!(
                        "row {}: qsgd_levels '{}' is not a number",
                        row,
                        crate::config::clip(v)
                    ))
                })?),
                None => None,
            },
            seeds: Default::default(),
        })
    }
}

/// `cfg`'s steps to dense's target: dense S-SGD's finished seeds of its setup give the
/// target; the most steps over its seeds, or `None` with the verdict.
fn reach_of(cfg: &Config, configs: &[Config]) -> crate::sim::summary::StepsToTarget {
    let dense: Vec<(f64, f64)> = configs
        .iter()
        .filter(|x| x.setup == cfg.setup && x.method == "ssgd")
        .flat_map(|x| x.seeds.values())
        .filter(|(curve, status)| status == "done" && !curve.is_empty())
        .filter_map(|(curve, _)| curve.iter().max_by_key(|p| p.step))
        .map(|p| (p.loss, p.accuracy))
        .collect();
    let t = from_dense(&dense);
    let (mut most, mut fewest) = (Some(0u64), u64::MAX);
    let mut missed = 0;
    for (curve, status) in cfg.seeds.values() {
        let reach = match (&t, status.as_str()) {
            (Some(t), "done") => steps_to_target(curve, t),
            _ => Reach::NoData,
        };
        match reach {
            Reach::Reached { steps } => {
                most = most.map(|m| m.max(steps));
                fewest = fewest.min(steps);
            }
            _ => {
                most = None;
                missed += 1;
            }
        }
    }
    let verdict = match (&t, most) {
        (None, _) => format!(
            "no dense target (dense S-SGD finished at {} seed(s); needs 2 or more)",
            dense.len()
        ),
        (Some(_), Some(n)) => format!("reaches dense in {n} steps"),
        (Some(_), None) if missed == cfg.seeds.len() => "does not reach dense".into(),
        (Some(_), None) => format!(
            "does not reach dense at {missed} of {} seeds",
            cfg.seeds.len()
        ),
    };
    let steps = if t.is_some() { most } else { None };
    crate::sim::summary::StepsToTarget {
        method: cfg.method.clone(),
        density: cfg.density,
        rank: cfg.rank,
        sketch: cfg.sketch,
        qsgd_levels: cfg.qsgd_levels,
        world_size: cfg.world_size,
        steps,
        fewest_steps: steps.map(|_| fewest),
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(pts: &[(u64, f64, f64)]) -> Vec<EvalPoint> {
        pts.iter()
            .map(|&(step, loss, accuracy)| EvalPoint {
                step,
                loss,
                accuracy,
            })
            .collect()
    }

    /// Hand computation: dense finals 1.0, 1.2, 1.1 (mean 1.1, sd 0.1) and accuracies
    /// 0.80, 0.70, 0.75 (mean 0.75, sd 0.05); t(0.95, 2) = 2.920, sqrt(4/3) = 1.154701:
    /// loss <= 1.1 + 0.33717 = 1.43717, accuracy >= 0.75 - 0.16859 = 0.58141.
    #[test]
    fn the_margin_is_the_prediction_bound_of_one_more_dense_seed() {
        let t = from_dense(&[(1.0, 0.80), (1.2, 0.70), (1.1, 0.75)]).unwrap();
        assert!((t.loss - 1.437_17).abs() < 1e-5, "{t:?}");
        assert!((t.accuracy - 0.581_41).abs() < 1e-5, "{t:?}");
        assert_eq!(t.dense_seeds, 3);
        assert!((t.dense_loss_sd - 0.1).abs() < 1e-12);
        // A NaN seed (diverged) does not count; one seed gives no margin.
        assert!(from_dense(&[(1.0, 0.8), (f64::NAN, 0.1)]).is_none());
        assert!(from_dense(&[]).is_none());
        // Four seeds: t(0.95, 3) = 2.353.
        let t4 = from_dense(&[(1.0, 0.5), (1.0, 0.5), (1.0, 0.5), (1.4, 0.5)]).unwrap();
        let sd = (0.12f64 / 3.0).sqrt(); // deviations -0.1 x3, +0.3: sum of squares 0.12
        assert!((t4.loss - (1.1 + 2.353 * sd * 1.25f64.sqrt())).abs() < 1e-9);
    }

    #[test]
    fn t_quantiles_follow_the_table_and_stay_conservative_between_rows() {
        assert_eq!(t95(2), 2.920);
        assert_eq!(t95(11), 1.812); // between 10 and 12: the smaller df's
        assert_eq!(t95(1000), 1.658);
        assert_eq!(t95(usize::MAX), 1.645);
        assert!(t95(0).is_infinite());
    }

    fn target(loss: f64, accuracy: f64) -> Target {
        Target {
            loss,
            accuracy,
            dense_seeds: 3,
            dense_loss_mean: loss,
            dense_loss_sd: 0.0,
            dense_accuracy_mean: accuracy,
            dense_accuracy_sd: 0.0,
            margin_sds: 0.0,
        }
    }

    #[test]
    fn steps_to_target_is_the_first_evaluation_meeting_both() {
        let t = target(1.0, 0.6);
        // Loss met at step 99 but accuracy only at 149; unsorted input; equality counts.
        let c = curve(&[
            (199, 0.9, 0.7),
            (49, 1.5, 0.3),
            (149, 1.0, 0.6),
            (99, 0.95, 0.55),
        ]);
        assert_eq!(steps_to_target(&c, &t), Reach::Reached { steps: 150 });
        // Never met: the best loss and its step, even where it rises again after.
        let c = curve(&[(49, 1.5, 0.3), (99, 1.1, 0.65), (149, 1.2, 0.66)]);
        assert_eq!(
            steps_to_target(&c, &t),
            Reach::NotReached {
                best_loss: 1.1,
                best_steps: 100
            }
        );
        assert_eq!(steps_to_target(&[], &t), Reach::NoData);
        // Accuracy met, loss not: not reached.
        let c = curve(&[(9, 1.01, 0.99)]);
        assert!(matches!(steps_to_target(&c, &t), Reach::NotReached { .. }));
    }

    /// A hand-made converge.csv: dense at seeds 1-3 (finals 1.0/0.80, 1.2/0.70, 1.1/0.75:
    /// the target of the first test, 1.43717 / 0.58141), topk reaching it at step 4 at two
    /// seeds and never at the third, powersgd after 2 steps at both its seeds, and a second
    /// setup with one dense seed (no target).
    #[test]
    fn from_csv_joins_seeds_per_configuration_and_setup() {
        let dir = std::env::temp_dir().join(format!("gradcomp-target-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("converge.csv");
        let mut t = String::from(
            "setup_id,config_id,method,seed,world_size,density,rank,step,eval_loss,eval_accuracy,status\n",
        );
        for (setup, cfg, m, seed, a, b) in [
            ("s", "d", "ssgd", 1, (1.5, 0.55), (1.0, 0.80)),
            ("s", "d", "ssgd", 2, (1.6, 0.50), (1.2, 0.70)),
            ("s", "d", "ssgd", 3, (1.4, 0.60), (1.1, 0.75)),
            ("s", "t", "topk", 1, (2.0, 0.40), (1.40, 0.60)),
            ("s", "t", "topk", 2, (2.0, 0.40), (1.40, 0.60)),
            ("s", "t", "topk", 3, (2.0, 0.40), (1.44, 0.60)),
            ("s", "p", "powersgd", 1, (1.3, 0.70), (1.2, 0.72)),
            ("s", "p", "powersgd", 2, (1.3, 0.70), (1.2, 0.72)),
            ("u", "e", "ssgd", 1, (1.5, 0.55), (1.0, 0.80)),
        ] {
            t.push_str(&format!("{setup},{cfg},{m},{seed},2,0.001,4,0,,,ok\n"));
            t.push_str(&format!(
                "{setup},{cfg},{m},{seed},2,0.001,4,1,{},{},ok\n",
                a.0, a.1
            ));
            t.push_str(&format!(
                "{setup},{cfg},{m},{seed},2,0.001,4,3,{},{},done\n",
                b.0, b.1
            ));
        }
        std::fs::write(&p, t).unwrap();
        let got = from_csv(&p).unwrap();
        let find = |m: &str, n: usize| got.iter().filter(|s| s.method == m).nth(n).unwrap();
        // Dense: seed 3 after 2 steps, the others after 4: the most is 4.
        assert_eq!(find("ssgd", 0).steps, Some(4));
        assert_eq!(find("ssgd", 0).fewest_steps, Some(2));
        assert_eq!(find("powersgd", 0).steps, Some(2));
        assert_eq!(find("topk", 0).steps, None);
        assert_eq!(
            find("topk", 0).verdict,
            "does not reach dense at 1 of 3 seeds"
        );
        assert_eq!(find("ssgd", 1).steps, None);
        assert!(find("ssgd", 1).verdict.starts_with("no dense target"));
        // Not a converge.csv of this gradcomp: refused naming the column.
        std::fs::write(&p, "method,step\nssgd,0\n").unwrap();
        let e = from_csv(&p).unwrap_err().to_string();
        assert!(e.contains("setup_id") && e.contains("--converge"), "{e}");
        assert!(from_csv(&dir)
            .unwrap_err()
            .to_string()
            .contains("regular file"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
