//! The tables `gradcomp simulate` prints after a sweep: per model, world size, network and
//! compression placement, each method's fastest simulated configuration and its speedup
//! over S-SGD's fastest of the same placement; with `--converge`, each method's time to
//! dense S-SGD's accuracy (steps to target from `gradcomp converge` x the iteration).

use super::SimRow;
use crate::units::fmt_seconds;

/// A row's configuration: `fusion/pipelining/collective`, plus what else varies in the
/// sweep (`compress_on`, ranks per node) and the method's own parameters where they vary
/// (density of the sparsifiers, rank of the low-rank methods; never a parameter the method
/// does not have).
pub(super) fn config_label(r: &SimRow, all: &[SimRow]) -> String {
    let varies = |f: &dyn Fn(&SimRow) -> String, of: &dyn Fn(&SimRow) -> bool| {
        let mut v = all.iter().filter(|x| of(x)).map(f);
        let first = v.next();
        v.any(|x| Some(x) != first)
    };
    let mut s = format!("{}/pipe_{}/{}", r.fusion, r.pipelining, r.collective);
    if varies(&|x| x.compress_on.to_string(), &|_| true) {
        s.push_str(&format!(" compress_on={}", r.compress_on));
    }
    if has_density(&r.method) && varies(&|x| x.density.to_string(), &|x| has_density(&x.method)) {
        s.push_str(&format!(" density={}", r.density));
    }
    if has_rank(&r.method) && varies(&|x| x.rank.to_string(), &|x| has_rank(&x.method)) {
        s.push_str(&format!(" rank={}", r.rank));
    }
    s
}

/// Whether the method `method` runs (an e2e name's or a control's too) reads a density.
fn has_density(method: &str) -> bool {
    crate::compress::registry::reads(method, "density")
}

/// Whether the method `method` runs reads a low-rank rank.
fn has_rank(method: &str) -> bool {
    crate::compress::registry::reads(method, "rank")
}

/// The summary table (text, one line per model, world size, network and method, in the
/// order the rows first name them), ending with a line on where every case is.
pub fn best_configurations(rows: &[SimRow]) -> String {
    let best = fastest(rows);
    let ssgd = |k: &Key| {
        best.iter()
            .find(|((g, m), _)| g == k && m == "ssgd")
            .map(|(_, j)| rows[*j].iter_s)
    };
    let header = [
        "model",
        "ranks",
        "network (placement)",
        "method",
        "best configuration",
        "iteration",
        "vs S-SGD",
    ];
    let mut lines: Vec<[String; 7]> = vec![header.map(String::from)];
    let several_per_node = rows.iter().any(|r| r.ranks_per_node > 1);
    for ((k, m), j) in &best {
        let r = &rows[*j];
        let speedup = ssgd(k).map_or("-".to_string(), |s| format!("{:.2}x", s / r.iter_s));
        lines.push([
            k.0.clone(),
            if several_per_node {
                format!("{} ({}/node)", k.1, k.2)
            } else {
                k.1.to_string()
            },
            format!("{} ({})", k.3, k.4),
            m.clone(),
            config_label(r, rows),
            fmt_seconds(r.iter_s),
            speedup,
        ]);
    }
    let mut out = aligned(&lines, 5);
    if !rows.iter().any(|r| r.method == "ssgd") {
        out.push_str("(no S-SGD case: add ssgd to --methods for the speedup column)\n");
    }
    out.push_str(
        "vs S-SGD: S-SGD's fastest iteration / the method's of the same compression placement (above 1: faster than S-SGD)\n",
    );
    out
}

/// Rows of cells as aligned text columns (two spaces apart, trailing blanks cut): the
/// columns from `right_from` on right-aligned, the others left-aligned.
pub(super) fn aligned<const N: usize>(lines: &[[String; N]], right_from: usize) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in lines {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (v, w))| {
                if c >= right_from {
                    format!("{v:>w$}")
                } else {
                    format!("{v:<w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A group of rows compared with each other: model, world size, ranks per node, network
/// and compression placement (a baseline priced on the host is never set against a
/// method priced on a GPU).
type Key = (String, usize, usize, String, &'static str);

fn key(r: &SimRow) -> Key {
    (
        r.model.clone(),
        r.world_size,
        r.ranks_per_node,
        r.network.clone(),
        r.compress_on,
    )
}

/// (group, method) -> index of the fastest row, in first-seen order.
fn fastest(rows: &[SimRow]) -> Vec<((Key, String), usize)> {
    let mut best: Vec<((Key, String), usize)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let k = (key(r), r.method.clone());
        match best.iter_mut().find(|(x, _)| *x == k) {
            Some((_, j)) if rows[*j].iter_s <= r.iter_s => {}
            Some((_, j)) => *j = i,
            None => best.push((k, i)),
        }
    }
    best
}

/// A method configuration's steps to dense S-SGD's accuracy, from `gradcomp converge`
/// (`converge::target::from_csv`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepsToTarget {
    pub method: String,
    /// Density (sparsifiers) and low-rank rank (Power-SGD, ACP-SGD) it trained at.
    pub density: f64,
    pub rank: usize,
    /// Count Sketch rows and columns per kept element, QSGD levels (`None`: a converge.csv
    /// without the column, which matches any).
    pub sketch: Option<(usize, f64)>,
    pub qsgd_levels: Option<u32>,
    /// The world size of the converge run.
    pub world_size: usize,
    /// Steps to target: the most over its seeds, `None` where a seed never reached it.
    pub steps: Option<u64>,
    /// The fewest over its seeds (with `steps`: the band the seeds give).
    pub fewest_steps: Option<u64>,
    /// The verdict in words (`reaches dense at 2 of 3 seeds`).
    pub verdict: String,
}

/// Whether a simulated row's method configuration is `s`'s: the method, and the density
/// or rank where the method has one.
pub(super) fn same_config(r: &SimRow, s: &StepsToTarget) -> bool {
    r.method == s.method
        && (!has_density(&r.method) || (r.density - s.density).abs() <= 1e-9 * r.density.max(1e-12))
        && (!has_rank(&r.method) || r.rank == s.rank)
        && (!crate::compress::registry::reads(&r.method, "sketch_rows")
            || s.sketch.map_or(true, |(rows, cols)| {
                rows == r.sketch_rows && (cols - r.sketch_cols_per_k).abs() <= 1e-9 * cols
            }))
        && (!crate::compress::registry::reads(&r.method, "qsgd_levels")
            || s.qsgd_levels.map_or(true, |l| l == r.qsgd_levels))
}

/// The converge result that judges row `r` ([`same_config`]): of the world sizes that
/// checked its configuration, the largest; of several runs at that size, the one whose
/// rows come last in converge.csv (an appended run supersedes: `max_by_key` keeps the
/// last maximum, and `converge::target::from_csv` keeps the file's order).
pub(super) fn steps_for<'a>(r: &SimRow, steps: &'a [StepsToTarget]) -> Option<&'a StepsToTarget> {
    steps
        .iter()
        .filter(|s| same_config(r, s))
        .max_by_key(|s| s.world_size)
}

/// Per group of [`best_configurations`], each method's fastest configuration ranked by time
/// to dense accuracy = its steps to target (`steps`: the most over its seeds, from the
/// converge run of the largest world size that checked it) x its simulated iteration, with
/// the band its seeds give (fewest steps x the iteration); the speed-up over S-SGD's time
/// to accuracy; methods that never reach dense (or were not checked) listed after, unranked.
pub fn time_to_accuracy(rows: &[SimRow], steps: &[StepsToTarget]) -> String {
    let best = fastest(rows);
    let mut groups: Vec<&Key> = Vec::new();
    for (k, _) in &best {
        if !groups.contains(&&k.0) {
            groups.push(&k.0);
        }
    }
    let mut out = String::from(
        "time to dense accuracy (steps to dense S-SGD's accuracy from gradcomp converge's proxy task x the simulated iteration):\n",
    );
    for g in groups {
        let mut ranked: Vec<(f64, String)> = Vec::new();
        let mut unranked: Vec<String> = Vec::new();
        let mut dense_tta = None;
        for ((_, m), j) in best.iter().filter(|((k, _), _)| k == g) {
            let r = &rows[*j];
            match steps_for(r, steps) {
                Some(StepsToTarget {
                    steps: Some(n),
                    fewest_steps,
                    world_size,
                    ..
                }) => {
                    let tta = *n as f64 * r.iter_s;
                    if m == "ssgd" {
                        dense_tta = Some(tta);
                    }
                    let lo = fewest_steps.unwrap_or(*n) as f64 * r.iter_s;
                    ranked.push((
                        tta,
                        format!(
                            "{m:<14} {:>12} x {n:>6} steps (converge np {world_size}) = {:>10} (seeds: {}..{})",
                            fmt_seconds(r.iter_s),
                            fmt_seconds(tta),
                            fmt_seconds(lo),
                            fmt_seconds(tta)
                        ),
                    ));
                }
                Some(s) => unranked.push(format!(
                    "{m:<14} {} (converge np {})",
                    s.verdict, s.world_size
                )),
                None => unranked.push(format!(
                    "{m:<14} not checked: no converge case of this method and parameters"
                )),
            }
        }
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.push_str(&format!(
            "  {} at {} ranks ({}/node), {} ({}):\n",
            g.0, g.1, g.2, g.3, g.4
        ));
        for (i, (tta, line)) in ranked.iter().enumerate() {
            let vs = dense_tta.map_or("-".to_string(), |d| format!("{:.2}x S-SGD", d / tta));
            out.push_str(&format!("    {}. {line}  {vs}\n", i + 1));
        }
        for line in unranked {
            out.push_str(&format!("    -  {line}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(method: &str, fusion: &str, pipe: &'static str, iter_s: f64) -> SimRow {
        SimRow {
            model: "resnet50".into(),
            method: method.into(),
            fusion: fusion.into(),
            pipelining: pipe,
            collective: "allreduce",
            world_size: 8,
            ranks_per_node: 1,
            network: "10gbe".into(),
            compress_on: "host",
            density: 0.001,
            rank: 4,
            iter_s,
            ..SimRow::default()
        }
    }

    #[test]
    fn the_fastest_configuration_per_method_with_its_speedup_over_ssgd() {
        let rows = vec![
            row("ssgd", "none", "off", 0.200),
            row("ssgd", "25MiB", "on", 0.100),
            row("topk", "none", "off", 0.080),
            row("topk", "25MiB", "on", 0.050),
            row("powersgd", "25MiB", "on", 0.125),
        ];
        let t = best_configurations(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("model") && lines[0].contains("vs S-SGD"),
            "{t}"
        );
        let line = |m: &str| {
            *lines
                .iter()
                .find(|l| l.split_whitespace().nth(4) == Some(m))
                .unwrap_or_else(|| panic!("{m}: {t}"))
        };
        assert!(line("ssgd").contains("25MiB/pipe_on/allreduce"), "{t}");
        assert!(
            line("ssgd").contains("100.000ms") && line("ssgd").ends_with("1.00x"),
            "{t}"
        );
        assert!(
            line("topk").contains("25MiB/pipe_on/allreduce") && line("topk").ends_with("2.00x"),
            "{t}"
        );
        assert!(line("powersgd").ends_with("0.80x"), "{t}");
        assert_eq!(lines.len(), 1 + 3 + 1, "{t}");
    }

    #[test]
    fn groups_by_network_and_world_size_and_says_when_ssgd_is_missing() {
        let mut a = row("topk", "none", "on", 0.05);
        a.network = "1gbe".into();
        let mut b = row("topk", "none", "on", 0.01);
        b.network = "100gb-ib".into();
        let t = best_configurations(&[a, b]);
        assert!(t.contains("1gbe") && t.contains("100gb-ib"), "{t}");
        assert!(t.contains("add ssgd to --methods"), "{t}");
        assert_eq!(
            t.lines()
                .filter(|l| l.contains(" - ") || l.ends_with('-'))
                .count(),
            2,
            "{t}"
        );
    }

    fn steps(method: &str, n: Option<u64>, world_size: usize) -> StepsToTarget {
        StepsToTarget {
            method: method.into(),
            density: 0.001,
            rank: 4,
            world_size,
            steps: n,
            fewest_steps: n,
            verdict: if n.is_some() {
                "reaches dense".into()
            } else {
                "does not reach dense".into()
            },
            ..StepsToTarget::default()
        }
    }

    /// Steps x the fastest iteration of the same placement: ssgd 700 x 0.1 s = 70 s, topk
    /// 1,000 x 0.05 s = 50 s (1.40x S-SGD), powersgd 600 x 0.125 s = 75 s (0.93x); a
    /// method that never reaches dense is listed unranked however fast its iteration; the
    /// converge run of the largest world size counts; host and device never mix.
    #[test]
    fn time_to_accuracy_is_steps_times_iteration_per_placement() {
        let mut dev = row("ssgd", "none", "on", 0.010);
        dev.compress_on = "device";
        let rows = vec![
            row("ssgd", "none", "off", 0.200),
            row("ssgd", "25MiB", "on", 0.100),
            row("topk", "25MiB", "on", 0.050),
            row("powersgd", "25MiB", "on", 0.125),
            row("marsit", "25MiB", "on", 0.001),
            dev,
        ];
        let st = vec![
            steps("ssgd", Some(700), 3),
            steps("ssgd", Some(100), 2),
            steps("topk", Some(1000), 3),
            steps("powersgd", Some(600), 3),
            steps("marsit", None, 3),
        ];
        let t = time_to_accuracy(&rows, &st);
        let host = &t[t.find("(host)").unwrap()..t.find("(device)").unwrap()];
        let lines: Vec<&str> = host.lines().collect();
        assert!(
            lines[1].contains("1. topk")
                && lines[1].contains("50.00s")
                && lines[1].ends_with("1.40x S-SGD"),
            "{t}"
        );
        assert!(
            lines[2].contains("2. ssgd")
                && lines[2].contains("70.00s")
                && lines[2].ends_with("1.00x S-SGD"),
            "{t}"
        );
        assert!(
            lines[3].contains("3. powersgd") && lines[3].ends_with("0.93x S-SGD"),
            "{t}"
        );
        assert!(
            lines[4].contains("marsit") && lines[4].contains("does not reach dense"),
            "{t}"
        );
        // The device group holds its own S-SGD only: 700 x 10 ms = 7 s.
        let device = &t[t.find("(device)").unwrap()..];
        assert!(
            device.contains("1. ssgd") && device.contains("7.00s") && !device.contains("topk"),
            "{t}"
        );
    }

    /// The verdict's key is the whole parameter set: a sketch of another size (rows or
    /// columns per k) or QSGD at other levels never takes this row's steps; a converge.csv
    /// without those columns (None) matches any size.
    #[test]
    fn a_sketch_size_never_inherits_another_sizes_steps() {
        let mut r = row("sketch", "25MiB", "on", 0.1);
        r.density = 0.0076;
        r.sketch_rows = 3;
        r.sketch_cols_per_k = 20.0;
        let mut s = steps("sketch", Some(500), 4);
        s.density = 0.0076;
        s.sketch = Some((3, 20.0));
        assert!(same_config(&r, &s));
        s.sketch = Some((3, 10.0));
        assert!(!same_config(&r, &s));
        s.sketch = Some((1, 20.0));
        assert!(!same_config(&r, &s));
        s.sketch = None;
        assert!(same_config(&r, &s));
        s.density = 0.001;
        assert!(!same_config(&r, &s));
        let mut q = row("qsgd", "25MiB", "on", 0.1);
        q.qsgd_levels = 127;
        let mut t = steps("qsgd", Some(500), 4);
        t.qsgd_levels = Some(127);
        assert!(same_config(&q, &t));
        t.qsgd_levels = Some(15);
        assert!(!same_config(&q, &t));
        // Parameters a method does not have are not compared.
        let mut d = row("ssgd", "25MiB", "on", 0.1);
        d.density = 0.5;
        d.sketch_rows = 9;
        assert!(same_config(&d, &steps("ssgd", Some(500), 4)));
    }

    /// A label names only what varies: nothing when every row has one placement, one
    /// density and one rank; a density only on a method that reads one (topk at 0.001 and
    /// 0.01, not ssgd), a rank only on one that reads a rank (powersgd at 4 and 8, not
    /// ssgd or topk); the placement on every row once it varies.
    #[test]
    fn a_label_names_only_the_parameters_its_method_has_where_they_vary() {
        let plain = [
            row("ssgd", "none", "off", 1.0),
            row("ssgd", "25MiB", "on", 1.0),
        ];
        assert_eq!(config_label(&plain[0], &plain), "none/pipe_off/allreduce");
        let mut rows = vec![
            row("ssgd", "none", "off", 1.0),
            row("topk", "none", "off", 1.0),
            row("topk", "none", "off", 1.0),
            row("powersgd", "none", "off", 1.0),
            row("powersgd", "none", "off", 1.0),
        ];
        rows[2].density = 0.01;
        rows[4].rank = 8;
        let labels: Vec<String> = rows.iter().map(|r| config_label(r, &rows)).collect();
        assert_eq!(
            labels,
            [
                "none/pipe_off/allreduce",
                "none/pipe_off/allreduce density=0.001",
                "none/pipe_off/allreduce density=0.01",
                "none/pipe_off/allreduce rank=4",
                "none/pipe_off/allreduce rank=8",
            ]
        );
        rows[0].compress_on = "device";
        assert_eq!(
            config_label(&rows[0], &rows),
            "none/pipe_off/allreduce compress_on=device"
        );
        assert_eq!(
            config_label(&rows[1], &rows),
            "none/pipe_off/allreduce compress_on=host density=0.001"
        );
    }

    /// The fastest row of a method is kept wherever it comes (a slower one after it does
    /// not replace it; of two equal, the first); ranks per node are shown once a row has
    /// more than one.
    #[test]
    fn the_fastest_row_wins_wherever_it_comes_and_ranks_per_node_are_shown() {
        let mut rows = vec![
            row("ssgd", "none", "off", 0.100),
            row("ssgd", "25MiB", "on", 0.200),
            row("topk", "none", "off", 0.050),
            row("topk", "25MiB", "on", 0.050),
        ];
        let best = fastest(&rows);
        assert_eq!(best.iter().map(|(_, j)| *j).collect::<Vec<_>>(), [0, 2]);
        for r in &mut rows {
            r.ranks_per_node = 4;
        }
        let t = best_configurations(&rows);
        let ssgd: Vec<&str> = t
            .lines()
            .find(|l| l.contains("ssgd"))
            .unwrap()
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            ssgd,
            [
                "resnet50",
                "8 (4/node)",
                "10gbe (host)",
                "ssgd",
                "none/pipe_off/allreduce",
                "100.000ms",
                "1.00x"
            ],
            "{t}"
        );
    }

    /// Densities match to 1e-9 of the row's: 0.001 against 0.001 + 1e-15 is one
    /// configuration, against 0.0010001 (1e-4 of it apart) another.
    #[test]
    fn densities_match_to_a_billionth_of_the_rows() {
        let r = row("topk", "none", "on", 0.1);
        let mut s = steps("topk", Some(500), 4);
        s.density = 0.001 + 1e-15;
        assert!(same_config(&r, &s));
        s.density = 0.0010001;
        assert!(!same_config(&r, &s));
    }

    /// Ranks are compared for the methods with one only: powersgd at rank 4 is not the
    /// rank-8 configuration; topk at 4 takes rank 8's steps (it has no rank).
    #[test]
    fn ranks_are_compared_only_for_low_rank_methods() {
        let mut s = steps("powersgd", Some(500), 4);
        s.rank = 8;
        assert!(!same_config(&row("powersgd", "none", "on", 0.1), &s));
        let mut s = steps("topk", Some(500), 4);
        s.rank = 8;
        assert!(same_config(&row("topk", "none", "on", 0.1), &s));
    }

    /// Sketch columns per k match to 1e-9 of converge's: 20 against 20 + 1e-9 (5e-11 of
    /// it apart) is one size.
    #[test]
    fn sketch_columns_match_to_a_billionth() {
        let mut r = row("sketch", "25MiB", "on", 0.1);
        r.sketch_rows = 3;
        r.sketch_cols_per_k = 20.0;
        let mut s = steps("sketch", Some(500), 4);
        s.sketch = Some((3, 20.0 + 1e-9));
        assert!(same_config(&r, &s));
    }

    /// The seeds' band of time to accuracy: fewest steps x the iteration to most steps x
    /// the iteration (500 and 700 steps at 0.1 s: 50 s to 70 s).
    #[test]
    fn the_seeds_band_is_fewest_to_most_steps_times_the_iteration() {
        let rows = [row("ssgd", "none", "on", 0.1)];
        let mut s = steps("ssgd", Some(700), 4);
        s.fewest_steps = Some(500);
        let t = time_to_accuracy(&rows, &[s]);
        assert!(t.contains(" 70.00s (seeds: 50.00s..70.00s)"), "{t}");
    }
}
