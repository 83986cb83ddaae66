//! The rows a case becomes (docs/csv-schema.md): micro_comm.csv's [`MicroCommRow`] and
//! the fields of micro_compress.csv and micro.csv, from a case's raw measurements.

use super::compress::CompressMeasurement;
use super::micro_comm::CommMeasurement;
use crate::comm::World;
use crate::compress::MethodParams;
use crate::config::Collective;
use crate::measure::shape::Shape;
use crate::measure::stats::Summary;
use crate::record::{Fields, SCHEMA_VERSION};
use serde::Serialize;

/// One row of `micro_comm.csv` (docs/csv-schema.md).
#[derive(Clone, Debug, Default, Serialize)]
pub struct MicroCommRow {
    pub schema_version: u32,
    pub run_id: String,
    pub case_id: String,
    pub collective: &'static str,
    pub world_size: usize,
    pub bytes: u64,
    pub total_bytes: u64,
    pub elements: u64,
    pub iters: u64,
    pub warmup: u64,
    pub check: &'static str,
    pub median_s: f64,
    pub mean_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub p95_s: f64,
    pub std_s: f64,
    pub ci95_s: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    pub t_pure_s: Option<f64>,
    pub t_cpu_s: Option<f64>,
    pub t_overall_s: Option<f64>,
    pub overlap_osu_pct: Option<f64>,
    pub overlap_imb_pct: Option<f64>,
    /// Time dilation K of the run (1: none); the times are wall / K.
    pub time_dilation: u32,
}

/// The header of micro_comm.csv (the field names of [`MicroCommRow`]).
pub fn micro_comm_header() -> Vec<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let row = MicroCommRow {
        schema_version: SCHEMA_VERSION,
        ..MicroCommRow::default()
    };
    let _ = w.serialize(&row);
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .next()
        .unwrap_or("")
        .split(',')
        .map(String::from)
        .collect()
}

/// Bus-bandwidth factor (nccl-tests): 2(n-1)/n for all-reduce, (n-1)/n for all-gather.
pub fn busbw_factor(c: Collective, n: usize) -> f64 {
    let n = n as f64;
    match c {
        Collective::Allgather => (n - 1.0) / n,
        _ => 2.0 * (n - 1.0) / n,
    }
}

/// OSU overlap % = 100 (1 - (t_overall - t_cpu) / t_pure), clamped to [0, 100].
pub fn overlap_osu_pct(t_pure: f64, t_cpu: f64, t_overall: f64) -> f64 {
    (100.0 * (1.0 - (t_overall - t_cpu) / t_pure)).clamp(0.0, 100.0)
}

/// IMB overlap % = 100 (t_pure + t_cpu - t_overall) / min(t_pure, t_cpu), clamped.
pub fn overlap_imb_pct(t_pure: f64, t_cpu: f64, t_overall: f64) -> f64 {
    (100.0 * (t_pure + t_cpu - t_overall) / t_pure.min(t_cpu)).clamp(0.0, 100.0)
}

/// A micro_comm.csv row from a measurement.
pub(super) fn micro_comm_row(
    world: &World,
    run_id: &str,
    collective: Collective,
    bytes: u64,
    iters: u64,
    warmup: u64,
    mut m: CommMeasurement,
) -> MicroCommRow {
    let n = world.size;
    let total_bytes = if collective == Collective::Allgather {
        bytes * n as u64
    } else {
        bytes
    };
    let s = Summary::of(&mut m.times_s);
    let mut row = MicroCommRow {
        schema_version: SCHEMA_VERSION,
        run_id: run_id.to_string(),
        case_id: String::new(),
        collective: collective.name(),
        world_size: n,
        bytes,
        total_bytes,
        elements: bytes / 4,
        iters,
        warmup,
        check: match m.check_errors {
            None => "off",
            Some(0) => "pass",
            Some(_) => "fail",
        },
        median_s: s.median,
        mean_s: s.mean,
        min_s: s.min,
        max_s: s.max,
        p95_s: s.p95,
        std_s: s.std,
        ci95_s: s.ci95,
        time_dilation: world.dilation().factor(),
        ..MicroCommRow::default()
    };
    // Bandwidth from the collective alone: the pure time for the overlap test.
    let mut bw_time = s.median;
    if let Some(mut o) = m.overlap {
        let pure = Summary::of(&mut o.pure_s).median;
        let cpu = Summary::of(&mut o.cpu_s).median;
        row.t_pure_s = Some(pure);
        row.t_cpu_s = Some(cpu);
        row.t_overall_s = Some(s.median);
        row.overlap_osu_pct = Some(overlap_osu_pct(pure, cpu, s.median));
        row.overlap_imb_pct = Some(overlap_imb_pct(pure, cpu, s.median));
        bw_time = pure;
    }
    if bw_time > 0.0 {
        row.algbw_gbps = total_bytes as f64 / bw_time / 1e9;
        row.busbw_gbps = row.algbw_gbps * busbw_factor(collective, n);
    }
    row
}

/// The hyper-parameter columns written into every compression row: one per
/// [`crate::compress::params::PARAMS`] entry, in its order (= `MethodParams`' fields).
pub(super) fn param_fields(p: &MethodParams) -> Fields {
    crate::compress::params::PARAMS
        .iter()
        .map(|s| (s.key, (s.csv)(p)))
        .collect()
}

fn opt(x: Option<f64>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// What a compression row measured: one tensor, or every layer of a zoo model
/// (name, tensors, elements).
#[derive(Clone, Copy)]
pub(super) enum Target<'a> {
    Tensor(Shape),
    Model(&'a str, usize, usize),
}

/// The case a compression row describes (its columns before the measurements).
pub(super) struct CompressCase<'a> {
    pub(super) method: &'a str,
    pub(super) target: Target<'a>,
    pub(super) params: &'a MethodParams,
    pub(super) iters: u64,
    pub(super) warmup: u64,
}

/// One row of micro_compress.csv (`mem_gbps` set) or micro.csv (docs/csv-schema.md).
pub(super) fn compress_fields(
    world: &World,
    run_id: &str,
    case: &CompressCase,
    mut m: CompressMeasurement,
    mem_gbps: Option<f64>,
) -> Fields {
    let &CompressCase {
        method,
        target,
        params,
        iters,
        warmup,
    } = case;
    let kernels = mem_gbps.is_some();
    let (rows, cols, numel) = match target {
        Target::Tensor(s) => (s.rows.to_string(), s.cols.to_string(), s.numel()),
        Target::Model(_, _, numel) => (String::new(), String::new(), numel),
    };
    let dense_bytes = 4 * numel as u64;
    let t = &mut m.times;
    let c = Summary::of(&mut t.compress_s);
    let fb = Summary::of(&mut t.feedback_s);
    let x = Summary::of(&mut t.comm_s);
    let d = Summary::of(&mut t.decompress_s);
    let tot = Summary::of(&mut t.total_s);
    let gbps = |s: f64| {
        if s > 0.0 {
            Some(dense_bytes as f64 / s / 1e9)
        } else {
            None
        }
    };
    let mut f: Fields = vec![
        ("schema_version", SCHEMA_VERSION.to_string()),
        ("run_id", run_id.to_string()),
        ("method", method.to_string()),
        ("rows", rows),
        ("cols", cols),
        ("numel", numel.to_string()),
    ];
    if kernels {
        let (model, tensors) = match target {
            Target::Tensor(_) => (String::new(), 1),
            Target::Model(name, tensors, _) => (name.to_string(), tensors),
        };
        f.extend([("model", model), ("tensors", tensors.to_string())]);
    }
    f.extend([
        ("world_size", world.size.to_string()),
        ("iters", iters.to_string()),
        ("warmup", warmup.to_string()),
    ]);
    f.extend(param_fields(params));
    f.extend([
        ("aggregation", m.aggregation.to_string()),
        ("rounds", m.rounds.to_string()),
        ("compress_s", c.median.to_string()),
        ("compress_min_s", c.min.to_string()),
        ("feedback_s", fb.median.to_string()),
        ("decompress_s", d.median.to_string()),
        ("decompress_min_s", d.min.to_string()),
    ]);
    if !kernels {
        f.extend([
            ("comm_s", x.median.to_string()),
            ("comm_min_s", x.min.to_string()),
        ]);
    }
    f.extend([
        ("total_s", tot.median.to_string()),
        ("total_min_s", tot.min.to_string()),
        ("total_p95_s", tot.p95.to_string()),
        ("total_ci95_s", tot.ci95.to_string()),
        ("dense_bytes", dense_bytes.to_string()),
        ("wire_bytes", m.wire_bytes.to_string()),
        (
            "ratio",
            if m.wire_bytes > 0 {
                (dense_bytes as f64 / m.wire_bytes as f64).to_string()
            } else {
                String::new()
            },
        ),
    ]);
    if let Some(bw) = mem_gbps {
        let input = gbps(c.median + fb.median);
        f.extend([
            ("input_gbps", opt(input)),
            ("compress_gbps", opt(gbps(c.median))),
            ("decompress_gbps", opt(gbps(d.median))),
            ("rel_error", m.rel_error.to_string()),
            ("mem_read_gbps", bw.to_string()),
            ("mem_frac", opt(input.map(|g| g / bw))),
        ]);
    } else {
        let check = match &m.check {
            None => "off",
            Some(Ok(())) => "pass",
            Some(Err(_)) => "fail",
        };
        f.push(("check", check.to_string()));
        f.push(("time_dilation", world.dilation().factor().to_string()));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_factors_and_overlap() {
        assert_eq!(busbw_factor(Collective::Allreduce, 4), 1.5);
        assert_eq!(busbw_factor(Collective::Allgather, 4), 0.75);
        assert_eq!(busbw_factor(Collective::Allreduce, 1), 0.0);
        // Perfect overlap: overall == cpu == pure.
        assert_eq!(overlap_osu_pct(1.0, 1.0, 1.0), 100.0);
        assert_eq!(overlap_imb_pct(1.0, 1.0, 1.0), 100.0);
        // No overlap: overall = pure + cpu.
        assert_eq!(overlap_osu_pct(1.0, 1.0, 2.0), 0.0);
        assert_eq!(overlap_imb_pct(1.0, 1.0, 2.0), 0.0);
        assert!((overlap_imb_pct(2.0, 1.0, 2.5) - 50.0).abs() < 1e-12);
    }
}
