//! `gradcomp choose` from the command line: the ranking, its join with the committed
//! converge run (steps per method recomputed here from the curves by the documented rule,
//! `common::dense_target` and `common::steps_to_target`), the arithmetic of time to
//! accuracy and the ties, each read back from choose.csv; and bad input.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::process::Command;

/// (step, loss, accuracy) points of one seed.
type Curve = Vec<(u64, f64, f64)>;

const CONVERGE: &str = "docs/data/converge-2026-11-28/converge.csv";

/// Per method at its default parameters and -np 4 (the largest world size in the file):
/// the most and fewest steps to dense's target over seeds 1-3 (most `None` when a seed
/// never reaches it). Each run (`setup_id`) has its own dense target from its own dense
/// seeds; where several runs hold a method's default configuration at -np 4, the one
/// that appears last in the file counts (the file's README: appended runs supersede).
fn steps_by_hand() -> BTreeMap<String, (Option<u64>, Option<u64>)> {
    let (h, rows) = read_csv(&root().join(CONVERGE));
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (m, ws, seed, step) = (col("method"), col("world_size"), col("seed"), col("step"));
    let (loss, acc, dens, rank) = (
        col("eval_loss"),
        col("eval_accuracy"),
        col("density"),
        col("rank"),
    );
    let setup = col("setup_id");
    // Defaults: density 0.001 (sketch 0.0076, 2 rows x 10 columns per kept element,
    // docs/methods.md "Default size"), low-rank rank 4.
    let (srows, scols) = (col("sketch_rows"), col("sketch_cols_per_k"));
    let default = |r: &Vec<String>| {
        let d: f64 = r[dens].parse().unwrap();
        let sketch = r[m].starts_with("sketch");
        let want = if sketch { 0.0076 } else { 0.001 };
        let size = !sketch || (r[srows] == "2" && r[scols].parse::<f64>().unwrap() == 10.0);
        r[ws] == "4" && r[rank] == "4" && size && (d - want).abs() < 1e-9 && !r[loss].is_empty()
    };
    // (setup, method) in order of first appearance, and each one's curves per seed.
    let mut order: Vec<(String, String)> = Vec::new();
    let mut curves: BTreeMap<(String, String, String), Curve> = BTreeMap::new();
    for r in rows.iter().filter(|r| default(r)) {
        let key = (r[setup].clone(), r[m].clone());
        if !order.contains(&key) {
            order.push(key);
        }
        curves
            .entry((r[setup].clone(), r[m].clone(), r[seed].clone()))
            .or_default()
            .push((
                // `step` is 0-based: the steps taken are one more.
                r[step].parse::<u64>().unwrap() + 1,
                r[loss].parse().unwrap(),
                r[acc].parse().unwrap(),
            ));
    }
    let mut out: BTreeMap<String, (Option<u64>, Option<u64>)> = BTreeMap::new();
    for (su, method) in &order {
        let of = |mm: &str| -> Vec<&Curve> {
            curves
                .iter()
                .filter(|((s, x, _), _)| s == su && x == mm)
                .map(|(_, c)| c)
                .collect()
        };
        let finals: Vec<(f64, f64)> = of("ssgd")
            .into_iter()
            .map(|c| {
                let last = c.iter().max_by_key(|p| p.0).unwrap();
                (last.1, last.2)
            })
            .collect();
        let target = dense_target(&finals);
        let per: Vec<Option<u64>> = of(method)
            .into_iter()
            .map(|c| {
                let mut c = c.clone();
                c.sort_by_key(|p| p.0);
                steps_to_target(&c, target)
            })
            .collect();
        let most = per
            .iter()
            .copied()
            .collect::<Option<Vec<u64>>>()
            .map(|v| *v.iter().max().unwrap());
        let fewest = per.iter().flatten().min().copied();
        // A later run of the same method replaces an earlier one.
        out.insert(method.clone(), (most, fewest));
    }
    out
}

#[test]
fn ranks_every_method_by_steps_times_iteration_with_ties_by_overlap() {
    let dir = tmpdir("choose");
    let out = Command::new(BIN)
        .current_dir(root())
        .args([
            "choose",
            "--model",
            "resnet50",
            "--nodes",
            "8",
            "--gpus-per-node",
            "2",
            "--network",
            "1gbe",
            "--gpu",
            "a100",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert_ok(&out);
    let text = stdout(&out);
    let verdict = text
        .lines()
        .find(|l| l.starts_with("verdict: "))
        .unwrap_or_else(|| panic!("{text}"));
    let (h, rows) = read_csv(&dir.join("choose.csv"));
    assert_eq!(h, documented_columns("choose.csv"));
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let f = |r: &Vec<String>, c: &str| -> Option<f64> { r[col(c)].parse().ok() };
    let scenarios: usize = rows
        .iter()
        .map(|r| r[col("scenario")].parse::<usize>().unwrap())
        .max()
        .unwrap()
        + 1;
    assert_eq!(
        scenarios, 31,
        "9 network pairs x 3 launch costs + 4 readings"
    );
    // The join: steps per method as the documented rule gives them.
    let by_hand = steps_by_hand();
    for r in &rows {
        let m = &r[col("method")];
        let (most, fewest) = by_hand.get(m).copied().unwrap_or((None, None));
        assert_eq!(f(r, "steps").map(|x| x as u64), most, "{m}");
        if let Some(most) = most {
            assert_eq!(f(r, "fewest_steps").map(|x| x as u64), fewest, "{m}");
            let tta = f(r, "tta_s").unwrap();
            let want = most as f64 * f(r, "iter_s").unwrap();
            assert!((tta - want).abs() <= 1e-9 * want, "{m}: {tta} vs {want}");
        }
    }
    // Every default method is there, once per scenario.
    for m in choose_defaults() {
        assert_eq!(
            rows.iter().filter(|r| r[col("method")] == m).count(),
            scenarios,
            "{m}"
        );
    }
    // The ranking: nominal time to accuracy ascending (methods that never reach dense after).
    let nominal: Vec<(&str, f64)> = rows
        .iter()
        .filter(|r| r[col("scenario")] == "0")
        .map(|r| {
            (
                r[col("method")].as_str(),
                f(r, "tta_s").unwrap_or(f64::INFINITY),
            )
        })
        .collect();
    let mut order = nominal.clone();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("#   method"))
        .skip(1)
        .take(nominal.len())
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    let ranked: Vec<&str> = order
        .iter()
        .filter(|o| o.1.is_finite())
        .map(|o| o.0)
        .collect();
    assert_eq!(&table[..ranked.len()], &ranked[..], "{text}");
    // Ties: the rule again, from the CSV: some scenario where the method's fewest-steps
    // time is at most the leader's most-steps time.
    let leader = ranked[0];
    let at = |m: &str, s: usize, c: &str| {
        rows.iter()
            .find(|r| r[col("method")] == m && r[col("scenario")] == s.to_string())
            .and_then(|r| f(r, c))
    };
    for m in &ranked[1..] {
        let tie = (0..scenarios)
            .any(|s| at(m, s, "tta_fewest_s").unwrap() <= at(leader, s, "tta_s").unwrap());
        let line = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(m))
            .unwrap();
        assert_eq!(
            line.split_whitespace().next().unwrap().ends_with('='),
            tie,
            "{m}: {line}"
        );
        if tie {
            assert!(
                verdict.contains("no clear winner") && verdict.contains(m),
                "{verdict}"
            );
        }
    }
    assert!(verdict.contains(leader), "{verdict}");
    let any_tie = text.lines().any(|l| {
        l.split_whitespace()
            .next()
            .is_some_and(|c| c.ends_with('='))
    });
    assert_eq!(verdict.contains("no clear winner"), any_tie, "{verdict}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn choose_defaults() -> Vec<&'static str> {
    "ssgd,signsgd,topk,dgc,powersgd,acpsgd,qsgd,marsit,sketch,sketch-fusion,omgs"
        .split(',')
        .collect()
}

/// A value pasted by mistake (5,000 bytes) is echoed by its start and end (issue 52 item
/// 6): one line of at most about 1,000 bytes of value plus the message, exit 2, for the
/// commands that need no MPI.
#[test]
fn long_values_are_clipped_in_every_echo() {
    let long = "x".repeat(5000);
    let cases: Vec<Vec<&str>> = vec![
        vec!["models", &long],
        vec![
            "simulate",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--network",
            &long,
        ],
        vec![
            "simulate",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--world-sizes",
            "4",
            "--ranks-per-node",
            "2",
            "--intra-link",
            &long,
        ],
        vec!["choose", "--model", &long, "--nodes", "2"],
        vec![
            "choose",
            "--model",
            "resnet20",
            "--nodes",
            "2",
            "--network",
            &long,
        ],
        vec![
            "choose", "--model", "resnet20", "--nodes", "2", "--gpu", &long,
        ],
    ];
    for args in cases {
        let out = Command::new(BIN)
            .current_dir(root())
            .args(&args)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", args[0]);
        assert_eq!(err.lines().count(), 1, "{}: {err}", args[0]);
        assert!(
            err.len() < 1800,
            "{} {}: {} bytes",
            args[0],
            args[args.len() - 2],
            err.len()
        );
        assert!(err.contains("bytes left out"), "{}: {err}", args[0]);
    }
}

/// `-q` leaves stderr empty; without it, one progress line.
#[test]
fn quiet_means_no_progress_line() {
    let run = |q: &[&str]| {
        let out = Command::new(BIN)
            .current_dir(root())
            .args(["choose", "--model", "resnet20", "--nodes", "2"])
            .args(q)
            .output()
            .unwrap();
        assert_ok(&out);
        stderr(&out)
    };
    assert_eq!(run(&["-q"]), "");
    assert!(run(&[]).starts_with("[gradcomp] choose: "));
}
