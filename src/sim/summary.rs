//! The table `gradcomp simulate` prints after a sweep: per model, world size and network,
//! each method's fastest simulated configuration and its speedup over S-SGD's fastest.

use super::SimRow;
use crate::units::fmt_seconds;

/// A row's configuration: `fusion/pipelining/collective`, plus what else varies in the
/// sweep (`compress_on`, density, low-rank rank, ranks per node).
fn config_label(r: &SimRow, all: &[SimRow]) -> String {
    let varies = |f: &dyn Fn(&SimRow) -> String| {
        let first = all.first().map(f);
        all.iter().any(|x| Some(f(x)) != first)
    };
    let mut s = format!("{}/pipe_{}/{}", r.fusion, r.pipelining, r.collective);
    if varies(&|x| x.compress_on.to_string()) {
        s.push_str(&format!(" compress_on={}", r.compress_on));
    }
    if varies(&|x| x.density.to_string()) {
        s.push_str(&format!(" density={}", r.density));
    }
    if varies(&|x| x.rank.to_string()) {
        s.push_str(&format!(" rank={}", r.rank));
    }
    s
}

/// The summary table (text, one line per model, world size, network and method, in the
/// order the rows first name them), ending with a line on where every case is.
pub fn best_configurations(rows: &[SimRow]) -> String {
    type Key = (String, usize, usize, String);
    let key = |r: &SimRow| -> Key {
        (
            r.model.clone(),
            r.world_size,
            r.ranks_per_node,
            r.network.clone(),
        )
    };
    // (group, method) -> index of the fastest row, in first-seen order.
    let mut best: Vec<((Key, String), usize)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let k = (key(r), r.method.clone());
        match best.iter_mut().find(|(x, _)| *x == k) {
            Some((_, j)) if rows[*j].iter_s <= r.iter_s => {}
            Some((_, j)) => *j = i,
            None => best.push((k, i)),
        }
    }
    let ssgd = |k: &Key| {
        best.iter()
            .find(|((g, m), _)| g == k && m == "ssgd")
            .map(|(_, j)| rows[*j].iter_s)
    };
    let header = [
        "model",
        "ranks",
        "network",
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
            k.3.clone(),
            m.clone(),
            config_label(r, rows),
            fmt_seconds(r.iter_s),
            speedup,
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in &lines {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (v, w))| {
                if c >= 5 {
                    format!("{v:>w$}")
                } else {
                    format!("{v:<w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    if !rows.iter().any(|r| r.method == "ssgd") {
        out.push_str("(no S-SGD case: add ssgd to --methods for the speedup column)\n");
    }
    out.push_str(
        "vs S-SGD: S-SGD's fastest iteration / the method's (above 1: faster than S-SGD)\n",
    );
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
                .find(|l| l.split_whitespace().nth(3) == Some(m))
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
}
