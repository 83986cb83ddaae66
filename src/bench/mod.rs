//! Benchmark driver: runs every case of a [`Config`], turns raw measurements into
//! summary statistics and rows, and hands rows to the writers (rank 0).

pub mod check;
pub mod compress;
pub mod e2e;
pub mod harness;
pub mod micro_comm;
pub mod progress;
pub mod samples;
pub mod stats;
pub mod stop;
pub mod tensors;
pub mod watchdog;

use crate::comm::World;
use crate::compress::MethodParams;
use crate::config::Shape;
use crate::config::{Case, Collective, Config};
use crate::error::{Error, Result};
use crate::record::samples::{kind, RankSeries, SamplesSink};
use crate::record::{CsvSink, Fields, SCHEMA_VERSION};
use crate::units::{fmt_seconds, HumanBytes};
use serde::Serialize;
use stats::Summary;

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

/// Where rows go (rank 0 only; `None` on the other ranks).
#[derive(Default)]
pub struct Sinks {
    pub micro_comm: Option<CsvSink>,
    pub micro_compress: Option<CsvSink>,
    pub micro: Option<CsvSink>,
    pub e2e: Option<CsvSink>,
    /// samples.csv (every rank's every timed iteration); `None` with `--no-samples`.
    pub samples: Option<SamplesSink>,
}

/// How far a run got (filled in as cases finish, so it is right after an error too).
#[derive(Default)]
pub struct RunSummary {
    /// Cases run (rows written) by this invocation.
    pub cases_done: usize,
    /// Cases skipped by `--resume`.
    pub cases_skipped: usize,
    /// Label and id of the last case this invocation finished.
    pub last_case: Option<String>,
}

/// How to run the cases (everything but the config).
pub struct RunOptions<'a> {
    pub run_id: &'a str,
    pub quiet: bool,
    pub trace: Option<&'a std::path::Path>,
    /// Case ids already in the output files (`--resume`): skipped.
    pub done: &'a std::collections::HashSet<String>,
    /// Abort the job when one case runs longer (s).
    pub case_timeout_s: Option<f64>,
    /// Test hook: this rank damages its result before `--check`, and how.
    pub inject_fault: Option<(usize, Fault)>,
    /// Gather every rank's per-iteration times after each case for samples.csv (the
    /// same on every rank: `[run] samples`, `--no-samples`).
    pub samples: bool,
}

/// How a test hook damages a rank's result before `--check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Wrong for every method: the dense reference check must catch it.
    Gross,
    /// One element moved by one ulp: inside every reference tolerance, so only the
    /// cross-rank agreement of `micro --check` catches it.
    Ulp,
}

/// After a case, outside its timed region: every rank's own per-iteration times to rank
/// 0, which writes them to samples.csv (before the case's summary row, so a case with a
/// summary row has all its samples). Every rank calls it.
fn record_samples(
    world: &World,
    sinks: &mut Sinks,
    o: &RunOptions,
    id: &str,
    kind: &str,
    local: &RankSeries,
) -> Result<()> {
    if !o.samples {
        return Ok(());
    }
    samples::record_case(world, sinks.samples.as_mut(), o.run_id, id, kind, local)
}

/// Put `case_id` right after `run_id` in a row.
fn with_case_id(mut f: Fields, id: &str) -> Fields {
    f.insert(2, ("case_id", id.to_string()));
    f
}

/// Run every case; rows are written as each case finishes and `summary` follows along.
/// A failed `--check` is agreed by every rank and stops the run after its row is written
/// (with `check = fail`). Before each case (and each timed iteration) the ranks agree
/// whether a stop signal arrived ([`World::sync_or_stop`]): then every rank returns
/// `Error::Interrupted` and no row is written for the unfinished case.
pub fn run_all(
    world: &World,
    config: &Config,
    sinks: &mut Sinks,
    o: &RunOptions,
    summary: &mut RunSummary,
) -> Result<()> {
    let (run_id, trace) = (o.run_id, o.trace);
    let cases = config.cases();
    let mut progress = progress::Progress::new(world.is_root() && !o.quiet, cases.len());
    let watchdog = o.case_timeout_s.map(watchdog::Watchdog::start);
    let mut table = Table::new(world.is_root());
    let mut mem_read_gbps: Option<f64> = None;
    let mut comm_bufs = micro_comm::CommBuffers::default();
    comm_bufs.reserve(world.size, &cases);
    // Exposed synchronisation of pipelining-off e2e cases, for the overlap of "on".
    let mut sync_seq: Vec<(crate::config::E2eCase, f64)> = Vec::new();
    let mut e2e_inputs = e2e::Inputs::default();
    let e2e_total = cases.iter().filter(|c| matches!(c, Case::E2e(_))).count();
    let ids = config.case_ids(&cases, world.size);
    for (case, id) in cases.iter().zip(ids) {
        if o.done.contains(&id) {
            summary.cases_skipped += 1;
            progress.finish_case();
            continue;
        }
        world.sync_or_stop()?;
        progress.start_case(&case.label());
        if let Some(w) = &watchdog {
            w.arm(&case.label());
        }
        match *case {
            Case::MicroComm {
                collective,
                bytes,
                iters,
                warmup,
                check,
            } => {
                let m = micro_comm::measure(
                    world,
                    &mut comm_bufs,
                    collective,
                    bytes,
                    iters,
                    warmup,
                    check,
                    o.inject_fault.filter(|f| f.1 == Fault::Gross).map(|f| f.0),
                )?;
                record_samples(world, sinks, o, &id, kind::MICRO_COMM, &m.local)?;
                let mut row = micro_comm_row(world, run_id, collective, bytes, iters, warmup, m);
                row.case_id = id.clone();
                table.micro_comm(&row);
                if let Some(s) = sinks.micro_comm.as_mut() {
                    s.write(&row)?;
                }
                if row.check == "fail" {
                    return Err(Error::Check(format!(
                        "{} of {} returned wrong values on at least one rank (see the row with check=fail)",
                        collective.name(),
                        HumanBytes(bytes)
                    )));
                }
            }
            Case::MicroCompress {
                ref method,
                shape,
                ref model,
                ref params,
                iters,
                warmup,
            } => {
                let bw = *mem_read_gbps.get_or_insert_with(|| {
                    let mut v = [tensors::memory_read_gbps()];
                    world.max_in_place(&mut v);
                    v[0]
                });
                let (m, target) = match model {
                    None => (
                        compress::measure_kernels(
                            world,
                            method,
                            shape,
                            params,
                            config.seed,
                            iters,
                            warmup,
                        )?,
                        Target::Tensor(shape),
                    ),
                    Some(name) => {
                        let zoo =
                            crate::models::build(name).map_err(|e| Error::Input(e.to_string()))?;
                        let m = compress::measure_model_kernels(
                            world,
                            method,
                            &zoo,
                            params,
                            config.seed,
                            iters,
                            warmup,
                        )?;
                        (m, Target::Model(name, zoo.tensors.len(), shape.numel()))
                    }
                };
                record_samples(world, sinks, o, &id, kind::MICRO_COMPRESS, &m.local)?;
                let f = with_case_id(
                    compress_fields(
                        world,
                        run_id,
                        &CompressCase {
                            method,
                            target,
                            params,
                            iters,
                            warmup,
                        },
                        m,
                        Some(bw),
                    ),
                    &id,
                );
                table.fields(
                    "micro-compress",
                    &f,
                    &[
                        "method",
                        "model",
                        "rows",
                        "cols",
                        "compress_s",
                        "feedback_s",
                        "decompress_s",
                        "input_gbps",
                        "ratio",
                        "rel_error",
                        "mem_frac",
                    ],
                );
                if let Some(s) = sinks.micro_compress.as_mut() {
                    s.write_fields(&f)?;
                }
            }
            Case::Micro {
                ref method,
                shape,
                ref params,
                iters,
                warmup,
                check,
            } => {
                let m = compress::measure_collective(
                    world,
                    method,
                    shape,
                    params,
                    config.seed,
                    iters,
                    warmup,
                    check,
                    o.inject_fault,
                )?;
                record_samples(world, sinks, o, &id, kind::MICRO, &m.local)?;
                let failure = match &m.check {
                    Some(Err(msg)) => Some(msg.clone()),
                    _ => None,
                };
                let f = with_case_id(
                    compress_fields(
                        world,
                        run_id,
                        &CompressCase {
                            method,
                            target: Target::Tensor(shape),
                            params,
                            iters,
                            warmup,
                        },
                        m,
                        None,
                    ),
                    &id,
                );
                table.fields(
                    "micro",
                    &f,
                    &[
                        "method",
                        "rows",
                        "cols",
                        "compress_s",
                        "comm_s",
                        "decompress_s",
                        "total_s",
                        "wire_bytes",
                        "ratio",
                        "check",
                    ],
                );
                if let Some(s) = sinks.micro.as_mut() {
                    s.write_fields(&f)?;
                }
                if let Some(msg) = failure {
                    return Err(Error::Check(format!("micro {method} {shape}: {msg}")));
                }
            }
            Case::E2e(ref c) => {
                let w = e2e::workload(c)?;
                let (mut m, tr) =
                    e2e::measure(world, c, &w, config.seed, trace.is_some(), &mut e2e_inputs)?;
                let mut rss = [e2e::peak_rss_bytes() as f64];
                world.max_in_place(&mut rss);
                let mut local = RankSeries::default();
                for (name, v) in m.local.named() {
                    local.push(name, v);
                }
                record_samples(world, sinks, o, &id, kind::E2E, &local)?;
                let key = |x: &crate::config::E2eCase| {
                    let mut k = x.clone();
                    k.pipelining = false;
                    k
                };
                let seq = sync_seq.iter().find(|(k, _)| *k == key(c)).map(|(_, v)| *v);
                let (f, med) = e2e::row(
                    world,
                    run_id,
                    c,
                    &w,
                    &mut m,
                    seq,
                    rss[0] as u64,
                    param_fields(&c.params),
                );
                let f = with_case_id(f, &id);
                if !c.pipelining {
                    sync_seq.push((key(c), med.exposed_s));
                }
                table.fields(
                    "e2e",
                    &f,
                    &[
                        "model",
                        "method",
                        "collective",
                        "fusion",
                        "pipelining",
                        "buckets",
                        "bwd_s",
                        "comm_s",
                        "exposed_s",
                        "iter_s",
                        "overlap_eff",
                    ],
                );
                if let Some(s) = sinks.e2e.as_mut() {
                    s.write_fields(&f)?;
                }
                if let (Some(tr), Some(path)) = (tr, trace) {
                    let path = if e2e_total > 1 {
                        per_case_trace(path, c, &id)
                    } else {
                        path.to_path_buf()
                    };
                    let json = tr
                        .to_json(&w.tensors)
                        .map_err(|e| Error::Runtime(format!("trace JSON: {e}")))?;
                    crate::record::write_atomic(&path, &json)?;
                }
            }
        }
        if let Some(w) = &watchdog {
            w.disarm();
        }
        progress.finish_case();
        summary.cases_done += 1;
        summary.last_case = Some(format!("{} ({id})", case.label()));
    }
    Ok(())
}

fn micro_comm_row(
    world: &World,
    run_id: &str,
    collective: Collective,
    bytes: u64,
    iters: u64,
    warmup: u64,
    mut m: micro_comm::CommMeasurement,
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

/// `trace.json` -> `trace-resnet20-topk-256KiB-pipe_on-allreduce-<case_id>.json`: one
/// file per e2e case, named by what the case is and by its `case_id` in e2e.csv.
fn per_case_trace(
    path: &std::path::Path,
    c: &crate::config::E2eCase,
    case_id: &str,
) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let safe = |s: &str| -> String {
        s.chars()
            .map(|ch| {
                if ch.is_ascii_alphanumeric() || ch == '.' || ch == '-' {
                    ch
                } else {
                    '_'
                }
            })
            .collect()
    };
    path.with_file_name(format!(
        "{stem}-{}-{}-{}-pipe_{}-{}-{case_id}{ext}",
        safe(&c.model),
        safe(&c.method),
        safe(&c.fusion.to_string()),
        if c.pipelining { "on" } else { "off" },
        crate::compress::registry::aggregation(c.base_method())
            .map_or(c.collective.name(), |a| c.collective.effective(a)),
    ))
}

/// The hyper-parameter columns written into every compression row.
fn param_fields(p: &MethodParams) -> Fields {
    vec![
        ("density", p.density.to_string()),
        ("rank", p.rank.to_string()),
        ("min_compression_rate", p.min_compression_rate.to_string()),
        ("start_iter", p.start_iter.to_string()),
        ("momentum", p.momentum.to_string()),
        ("nesterov", p.nesterov.to_string()),
        ("clip_norm", p.clip_norm.to_string()),
        (
            "warmup_steps_per_epoch",
            p.warmup_steps_per_epoch.to_string(),
        ),
        ("sketch_rows", p.sketch_rows.to_string()),
        ("sketch_cols_per_k", p.sketch_cols_per_k.to_string()),
        ("qsgd_levels", p.qsgd_levels.to_string()),
    ]
}

fn opt(x: Option<f64>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// What a compression row measured: one tensor, or every layer of a zoo model
/// (name, tensors, elements).
#[derive(Clone, Copy)]
enum Target<'a> {
    Tensor(Shape),
    Model(&'a str, usize, usize),
}

/// The case a compression row describes (its columns before the measurements).
struct CompressCase<'a> {
    method: &'a str,
    target: Target<'a>,
    params: &'a MethodParams,
    iters: u64,
    warmup: u64,
}

/// One row of micro_compress.csv (`mem_gbps` set) or micro.csv (docs/csv-schema.md).
fn compress_fields(
    world: &World,
    run_id: &str,
    case: &CompressCase,
    mut m: compress::CompressMeasurement,
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
    }
    f
}

/// The header of a printed table: CSV time columns (`compress_s`, seconds) lose their
/// `_s`, since the printed values carry their own unit (`2.83us`, `1.2ms`).
fn printed_header(cols: &[&str]) -> String {
    cols.iter()
        .map(|c| format!("{:>12}", c.strip_suffix("_s").unwrap_or(c)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Human-readable table on stdout (rank 0), one block per collective.
struct Table {
    enabled: bool,
    last: Option<&'static str>,
}

impl Table {
    fn new(enabled: bool) -> Table {
        Table {
            enabled,
            last: None,
        }
    }

    /// A row of selected columns; the header repeats when the kind changes.
    fn fields(&mut self, kind: &'static str, f: &Fields, cols: &[&str]) {
        if !self.enabled {
            return;
        }
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
            println!("{}", printed_header(cols));
        }
        println!(
            "{}",
            cols.iter()
                .map(|c| format!("{:>12}", pick(c)))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }

    fn micro_comm(&mut self, r: &MicroCommRow) {
        if !self.enabled {
            return;
        }
        if self.last != Some(r.collective) {
            self.last = Some(r.collective);
            println!(
                "\n# {}  ({} ranks; times are the max over ranks per iteration)",
                r.collective, r.world_size
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
