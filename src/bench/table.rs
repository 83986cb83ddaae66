//! The human-readable table rank 0 prints on stdout as cases finish (the CSV files are
//! the record; docs/csv-schema.md).

use super::rows::MicroCommRow;
use crate::record::Fields;
use crate::units::{fmt_seconds, HumanBytes};

/// The printed columns of micro-compress rows (CSV column names, space-separated).
pub(super) const MICRO_COMPRESS: &str =
    "method model rows cols compress_s feedback_s decompress_s input_gbps ratio rel_error mem_frac";

/// The printed columns of micro rows.
pub(super) const MICRO: &str =
    "method rows cols compress_s comm_s decompress_s total_s wire_bytes ratio check";

/// The printed columns of e2e rows.
pub(super) const E2E: &str =
    "model method collective fusion pipelining buckets bwd_s comm_s exposed_s iter_s overlap_eff";

/// The header of a printed table: CSV time columns (`compress_s`, seconds) lose their
/// `_s`, since the printed values carry their own unit (`2.83us`, `1.2ms`).
pub(super) fn printed_header(cols: &[&str]) -> String {
    cols.iter()
        .map(|c| format!("{:>12}", c.strip_suffix("_s").unwrap_or(c)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Human-readable table on stdout (rank 0), one block per collective.
pub(super) struct Table {
    enabled: bool,
    last: Option<&'static str>,
}

impl Table {
    pub(super) fn new(enabled: bool) -> Table {
        Table {
            enabled,
            last: None,
        }
    }

    /// A row of selected columns; the header repeats when the kind changes.
    pub(super) fn fields(&mut self, kind: &'static str, f: &Fields, cols: &str) {
        if !self.enabled {
            return;
        }
        let cols: Vec<&str> = cols.split_whitespace().collect();
        let pick = |c: &str| -> String {
            let v = f
                .iter()
                .find(|(k, _)| *k == c)
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            match v.parse::<f64>() {
                Ok(x) if c.ends_with("_s") => fmt_seconds(x),
                Ok(x) if v.contains('.') || v.contains('e') => format!("{x:.4}"),
                _ => v.to_string(),
            }
        };
        if self.last != Some(kind) {
            self.last = Some(kind);
            println!(
                "\n# {kind}  (times: median over iterations of the max over ranks, each with its unit)"
            );
            println!("{}", printed_header(&cols));
        }
        println!(
            "{}",
            cols.iter()
                .map(|c| format!("{:>12}", pick(c)))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }

    pub(super) fn micro_comm(&mut self, r: &MicroCommRow) {
        if !self.enabled {
            return;
        }
        if self.last != Some(r.collective) {
            self.last = Some(r.collective);
            println!(
                "\n# {}  ({}; times are the max over ranks per iteration)",
                r.collective,
                crate::units::count(r.world_size, "rank")
            );
            if r.overlap_osu_pct.is_some() {
                println!(
                    "{:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>6}",
                    "size", "t_pure", "t_cpu", "t_overall", "osu_%", "imb_%", "check"
                );
            } else {
                println!(
                    "{:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11} {:>6}",
                    "size", "median", "min", "max", "p95", "algbw_GB/s", "busbw_GB/s", "check"
                );
            }
        }
        if let (Some(p), Some(c), Some(o), Some(osu), Some(imb)) = (
            r.t_pure_s,
            r.t_cpu_s,
            r.t_overall_s,
            r.overlap_osu_pct,
            r.overlap_imb_pct,
        ) {
            println!(
                "{:>10} {:>10} {:>10} {:>10} {:>8.1} {:>8.1} {:>6}",
                HumanBytes(r.bytes).to_string(),
                fmt_seconds(p),
                fmt_seconds(c),
                fmt_seconds(o),
                osu,
                imb,
                r.check
            );
        } else {
            println!(
                "{:>10} {:>10} {:>10} {:>10} {:>10} {:>11.3} {:>11.3} {:>6}",
                HumanBytes(r.bytes).to_string(),
                fmt_seconds(r.median_s),
                fmt_seconds(r.min_s),
                fmt_seconds(r.max_s),
                fmt_seconds(r.p95_s),
                r.algbw_gbps,
                r.busbw_gbps,
                r.check
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_time_columns_are_not_named_in_seconds() {
        let h = printed_header(&["method", "compress_s", "wire_bytes", "iter_s"]);
        let names: Vec<&str> = h.split_whitespace().collect();
        assert_eq!(names, ["method", "compress", "wire_bytes", "iter"]);
    }
}
