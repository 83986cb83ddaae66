//! Benchmark driver: runs every case of a [`Config`] ([`run_all`]), turns raw measurements
//! into rows (rows.rs) and hands them to the writers and the printed table (table.rs) on
//! rank 0. The measurements: compress.rs (micro, micro-compress), check.rs (`--check`),
//! micro_comm.rs, e2e.rs.

pub mod check;
pub mod compress;
pub mod e2e;
pub mod harness;
pub mod micro_comm;
pub mod progress;
mod rows;
pub mod samples;
mod step;
mod table;
pub mod watchdog;

pub use rows::{busbw_factor, micro_comm_header, overlap_imb_pct, overlap_osu_pct, MicroCommRow};

use crate::comm::World;
use crate::compress::MethodParams;
use crate::config::{Case, Collective, Config};
use crate::error::{Error, Result};
use crate::measure::shape::Shape;
use crate::record::meta::RunSummary;
use crate::record::samples::{kind, RankSeries, SamplesSink};
use crate::record::{CsvSink, Fields};
use crate::units::HumanBytes;
use rows::{compress_fields, micro_comm_row, param_fields, CompressCase, Target};
use table::Table;

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
    let cases = config.cases();
    let mut progress = progress::Progress::new(
        world.is_root() && !o.quiet,
        cases.iter().map(progress::time_limit_s).collect(),
    );
    note_worst_case(&mut progress, world, config, &cases, o);
    let watchdog = o.case_timeout_s.map(watchdog::Watchdog::start);
    let mut runner = Runner::new(world, config, sinks, o, &cases);
    let ids = config.case_ids(&cases, world.size);
    for (case, id) in cases.iter().zip(ids) {
        if o.done.contains(&id) {
            summary.cases_skipped += 1;
            progress.skip_case();
            continue;
        }
        world.sync_or_stop()?;
        progress.start_case(&case.label());
        if let Some(w) = &watchdog {
            w.arm(&case.label());
        }
        let (timed_s, trace_written) = runner.run_case(case, &id)?;
        if let Some(w) = &watchdog {
            w.disarm();
        }
        progress.finish_case(timed_s);
        summary.cases_done += 1;
        summary.last_case = Some(format!("{} ({id})", case.label()));
        let recorded = crate::record::meta::case_done(
            summary.cases_done,
            summary.cases_skipped,
            summary.last_case.clone(),
        );
        trace_written?;
        recorded?;
    }
    runner.warn_drift();
    Ok(())
}

/// The progress line with the sweep's worst case: the time limits of the cases this run
/// will run, not those `--resume` skips.
fn note_worst_case(
    progress: &mut progress::Progress,
    world: &World,
    config: &Config,
    cases: &[Case],
    o: &RunOptions,
) {
    let to_run: Vec<&Case> = cases
        .iter()
        .zip(config.case_ids(cases, world.size))
        .filter(|(_, id)| !o.done.contains(id))
        .map(|(c, _)| c)
        .collect();
    let unlimited = to_run
        .iter()
        .filter(|c| progress::is_adaptive(c) && progress::time_limit_s(c).is_none())
        .count();
    let limits: Vec<Option<f64>> = to_run.iter().map(|c| progress::time_limit_s(c)).collect();
    if let Some(line) = progress::worst_case_line(&limits, unlimited) {
        progress.note(&line);
    }
}

/// A micro case's loop: warm-up and timed iterations, and whether its result is checked
/// (`[[micro-comm]]` and `[[micro]]`).
#[derive(Clone, Copy)]
struct Loop {
    iters: u64,
    warmup: u64,
    check: bool,
}

/// What the cases of one run share: where rows go, the table on stdout, micro-comm's
/// buffers, the memory bandwidth probed once, the e2e inputs read once, the pipelining-off
/// twins' exposed synchronisation, and the count of drifted e2e cases.
struct Runner<'a, 'o> {
    world: &'a World,
    config: &'a Config,
    sinks: &'a mut Sinks,
    o: &'a RunOptions<'o>,
    table: Table,
    mem_read_gbps: Option<f64>,
    comm_bufs: micro_comm::CommBuffers,
    /// Exposed synchronisation of pipelining-off e2e cases, for the overlap of "on".
    sync_seq: Vec<(crate::config::E2eCase, f64)>,
    e2e_inputs: e2e::Inputs,
    e2e_total: usize,
    /// e2e cases whose emulated device drifted past the warning threshold, and all run.
    drifted: (usize, usize),
}

impl<'a, 'o> Runner<'a, 'o> {
    fn new(
        world: &'a World,
        config: &'a Config,
        sinks: &'a mut Sinks,
        o: &'a RunOptions<'o>,
        cases: &[Case],
    ) -> Self {
        let table = Table::new(world.is_root());
        let mut comm_bufs = micro_comm::CommBuffers::default();
        comm_bufs.reserve(world.size, cases);
        Runner {
            world,
            config,
            sinks,
            o,
            table,
            mem_read_gbps: None,
            comm_bufs,
            sync_seq: Vec::new(),
            e2e_inputs: e2e::Inputs::default(),
            e2e_total: cases.iter().filter(|c| matches!(c, Case::E2e(_))).count(),
            drifted: (0, 0),
        }
    }

    /// One case: measured, its samples and row written. Returns the case's timed
    /// iterations (e2e, for the ETA) and whether its trace was written (an error there
    /// still counts the case as done).
    fn run_case(&mut self, case: &Case, id: &str) -> Result<(Option<f64>, Result<()>)> {
        match *case {
            Case::MicroComm {
                collective,
                bytes,
                iters,
                warmup,
                check,
            } => self.micro_comm(
                id,
                collective,
                bytes,
                Loop {
                    iters,
                    warmup,
                    check,
                },
            )?,
            Case::MicroCompress {
                ref method,
                shape,
                ref model,
                ref params,
                iters,
                warmup,
            } => self.micro_compress(id, method, shape, model.as_deref(), params, iters, warmup)?,
            Case::Micro {
                ref method,
                shape,
                ref params,
                iters,
                warmup,
                check,
            } => self.micro(
                id,
                method,
                shape,
                params,
                Loop {
                    iters,
                    warmup,
                    check,
                },
            )?,
            Case::E2e(ref c) => return self.e2e(id, &case.label(), c),
        }
        Ok((None, Ok(())))
    }

    /// A micro-comm case; a failed `--check` ends the run after its row.
    fn micro_comm(&mut self, id: &str, collective: Collective, bytes: u64, l: Loop) -> Result<()> {
        let (world, o) = (self.world, self.o);
        let fault = o.inject_fault.filter(|f| f.1 == Fault::Gross).map(|f| f.0);
        let bufs = &mut self.comm_bufs;
        let m = micro_comm::measure(
            world, bufs, collective, bytes, l.iters, l.warmup, l.check, fault,
        )?;
        record_samples(world, self.sinks, o, id, kind::MICRO_COMM, &m.local)?;
        let mut row = micro_comm_row(world, o.run_id, collective, bytes, l.iters, l.warmup, m);
        row.case_id = id.to_string();
        self.table.micro_comm(&row);
        if let Some(s) = self.sinks.micro_comm.as_mut() {
            s.write(&row)?;
        }
        if row.check == "fail" {
            return Err(Error::Check(format!(
                "{} of {} returned wrong values on at least one rank (see the row with check=fail)",
                collective.name(),
                HumanBytes(bytes)
            )));
        }
        Ok(())
    }

    /// The memory read bandwidth, probed by rank 0 alone at the first micro-compress
    /// case while the others wait: ranks probing at once on one node would each see a
    /// share of its bandwidth, not the bandwidth.
    fn memory_read_gbps(&mut self) -> f64 {
        let world = self.world;
        *self.mem_read_gbps.get_or_insert_with(|| {
            let mut v = [if world.is_root() {
                crate::measure::tensors::memory_read_gbps()
            } else {
                0.0
            }];
            world.max_in_place(&mut v);
            v[0]
        })
    }

    /// A micro-compress case, over one tensor or every tensor of a zoo model.
    #[allow(clippy::too_many_arguments)] // the fields of one `[[micro-compress]]` case
    fn micro_compress(
        &mut self,
        id: &str,
        method: &str,
        shape: Shape,
        model: Option<&str>,
        params: &MethodParams,
        iters: u64,
        warmup: u64,
    ) -> Result<()> {
        let bw = self.memory_read_gbps();
        let (world, o, seed) = (self.world, self.o, self.config.seed);
        let (m, target) = match model {
            None => (
                compress::measure_kernels(world, method, shape, params, seed, iters, warmup)?,
                Target::Tensor(shape),
            ),
            Some(name) => {
                let zoo = crate::models::build(name).map_err(|e| Error::Input(e.to_string()))?;
                let m = compress::measure_model_kernels(
                    world, method, &zoo, params, seed, iters, warmup,
                )?;
                (m, Target::Model(name, zoo.tensors.len(), shape.numel()))
            }
        };
        record_samples(world, self.sinks, o, id, kind::MICRO_COMPRESS, &m.local)?;
        let case = CompressCase {
            method,
            target,
            params,
            iters,
            warmup,
        };
        self.emit_compress(id, &case, m, Some(bw))
    }

    /// A compression case's row (micro_compress.csv with `mem_gbps`, micro.csv without):
    /// its fields, the console table's line and the CSV row.
    fn emit_compress(
        &mut self,
        id: &str,
        case: &CompressCase,
        m: compress::CompressMeasurement,
        mem_gbps: Option<f64>,
    ) -> Result<()> {
        let f = with_case_id(
            compress_fields(self.world, self.o.run_id, case, m, mem_gbps),
            id,
        );
        let (kind, cols, sink) = match mem_gbps {
            Some(_) => (
                "micro-compress",
                table::MICRO_COMPRESS,
                self.sinks.micro_compress.as_mut(),
            ),
            None => ("micro", table::MICRO, self.sinks.micro.as_mut()),
        };
        self.table.fields(kind, &f, cols);
        if let Some(s) = sink {
            s.write_fields(&f)?;
        }
        Ok(())
    }

    /// A micro case; a failed `--check` ends the run after its row.
    fn micro(
        &mut self,
        id: &str,
        method: &str,
        shape: Shape,
        params: &MethodParams,
        l: Loop,
    ) -> Result<()> {
        let (world, o, seed) = (self.world, self.o, self.config.seed);
        let (iters, warmup) = (l.iters, l.warmup);
        let m = compress::measure_collective(
            world,
            method,
            shape,
            params,
            seed,
            iters,
            warmup,
            l.check,
            o.inject_fault,
        )?;
        record_samples(world, self.sinks, o, id, kind::MICRO, &m.local)?;
        let failure = match &m.check {
            Some(Err(msg)) => Some(msg.clone()),
            _ => None,
        };
        let case = CompressCase {
            method,
            target: Target::Tensor(shape),
            params,
            iters,
            warmup,
        };
        self.emit_compress(id, &case, m, None)?;
        if let Some(msg) = failure {
            return Err(Error::Check(format!("micro {method} {shape}: {msg}")));
        }
        Ok(())
    }

    /// An e2e case: its row (with the overlap against its pipelining-off twin), a drift
    /// warning, and its trace. Returns the timed iterations' sum and the trace's outcome.
    fn e2e(
        &mut self,
        id: &str,
        label: &str,
        c: &crate::config::E2eCase,
    ) -> Result<(Option<f64>, Result<()>)> {
        let (world, o, trace) = (self.world, self.o, self.o.trace);
        let w = e2e::workload(c)?;
        let (mut m, tr) = e2e::measure(
            world,
            c,
            &w,
            self.config.seed,
            trace.is_some(),
            &mut self.e2e_inputs,
        )?;
        let timed_s = Some(m.series.iter_s.iter().sum::<f64>());
        let mut rss = [crate::measure::host::peak_rss_bytes() as f64];
        world.max_in_place(&mut rss);
        let mut local = RankSeries::default();
        for (name, v) in m.local.named() {
            local.push(name, v);
        }
        record_samples(world, self.sinks, o, id, kind::E2E, &local)?;
        let key = |x: &crate::config::E2eCase| {
            let mut k = x.clone();
            k.pipelining = false;
            k
        };
        // The latest `off` twin: with rounds, the one of this round.
        let seq = self
            .sync_seq
            .iter()
            .rev()
            .find(|(k, _)| *k == key(c))
            .map(|(_, v)| *v);
        let (f, med) = e2e::row(
            world,
            o.run_id,
            c,
            &w,
            &mut m,
            seq,
            rss[0] as u64,
            param_fields(&c.params),
        );
        let f = with_case_id(f, id);
        if !c.pipelining {
            self.sync_seq.push((key(c), med.exposed_s));
        }
        self.table.fields("e2e", &f, table::E2E);
        if let Some(s) = self.sinks.e2e.as_mut() {
            s.write_fields(&f)?;
        }
        // A busy machine distorts the emulation: say so (also under --quiet).
        if let Some(w) = med
            .compute_drift
            .and_then(|(m, x)| e2e::drift_warning(label, m, x, self.drifted.0 == 0))
        {
            self.drifted.0 += 1;
            if world.is_root() {
                eprintln!("gradcomp: warning: {w}");
            }
        }
        self.drifted.1 += 1;
        let mut trace_written = Ok(());
        if let (Some(tr), Some(path)) = (tr, trace) {
            let path = if self.e2e_total > 1 {
                per_case_trace(path, c, id)
            } else {
                path.to_path_buf()
            };
            // The row is in e2e.csv: a trace that cannot be written (a full
            // disk) is the run's error, but the case still counts as done, so
            // run.json's cases_done matches the rows.
            trace_written = tr
                .to_json(&w.tensors)
                .map_err(|e| Error::Runtime(format!("trace JSON: {e}")))
                .and_then(|json| crate::record::write_atomic(&path, &json));
        }
        Ok((timed_s, trace_written))
    }

    /// After the last case: how many e2e cases drifted, if any.
    fn warn_drift(&self) {
        if self.drifted.0 > 0 && self.world.is_root() {
            eprintln!(
                "gradcomp: warning: the emulated device drifted more than {:.0}% from the compute model in {} of {} e2e case(s) (e2e.csv compute_drift)",
                100.0 * e2e::DRIFT_WARN,
                self.drifted.0,
                self.drifted.1
            );
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::loopback;
    use std::collections::HashSet;
    use std::path::Path;

    /// A CSV's header and rows, split on commas (the fields here hold none).
    fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
        let text = std::fs::read_to_string(path).unwrap();
        let mut lines = text
            .lines()
            .map(|l| l.split(',').map(str::to_string).collect());
        let header: Vec<String> = lines.next().unwrap();
        (header, lines.collect())
    }

    fn column<'r>(header: &[String], row: &'r [String], name: &str) -> &'r str {
        let i = header.iter().position(|c| c == name).unwrap();
        &row[i]
    }

    /// A micro-compress case's row goes to micro_compress.csv with the memory bandwidth
    /// the run probed (`mem_read_gbps`, set here instead of probed), a micro case's to
    /// micro.csv with its check; a micro case whose check fails writes its row
    /// (`check = fail`) and then ends the run with `Error::Check`.
    #[test]
    fn micro_and_micro_compress_rows_go_to_their_own_files() {
        let dir = std::env::temp_dir().join(format!("gradcomp-bench-rows-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = crate::config::parse(
            "[[micro]]\nmethods = [\"ssgd\"]\nshapes = [\"8x4\"]\niters = 2\nwarmup = 1\n",
            "test.toml",
        )
        .unwrap();
        let shape = Shape { rows: 8, cols: 4 };
        let params = MethodParams::default();
        let done = HashSet::new();
        let options = |inject_fault| RunOptions {
            run_id: "r1",
            quiet: true,
            trace: None,
            done: &done,
            case_timeout_s: None,
            inject_fault,
            samples: false,
        };
        let (ok, bad) = (options(None), options(Some((0, Fault::Gross))));
        let failed = loopback::run(1, |world| {
            let mut sinks = Sinks {
                micro_compress: Some(CsvSink::create(&dir.join("micro_compress.csv")).unwrap()),
                micro: Some(CsvSink::create(&dir.join("micro.csv")).unwrap()),
                ..Sinks::default()
            };
            let mut runner = Runner::new(&world, &config, &mut sinks, &ok, &[]);
            runner.mem_read_gbps = Some(12.5);
            runner
                .micro_compress("c1", "ssgd", shape, None, &params, 2, 1)
                .unwrap();
            let l = Loop {
                iters: 2,
                warmup: 1,
                check: true,
            };
            runner.micro("c2", "ssgd", shape, &params, l).unwrap();
            let mut runner = Runner::new(&world, &config, &mut sinks, &bad, &[]);
            runner.micro("c3", "ssgd", shape, &params, l).unwrap_err()
        });
        assert!(
            matches!(&failed[0], Error::Check(m) if m.starts_with("micro ssgd ")),
            "{:?}",
            failed[0]
        );

        let (h, rows) = read_csv(&dir.join("micro_compress.csv"));
        assert_eq!(rows.len(), 1);
        assert_eq!(column(&h, &rows[0], "case_id"), "c1");
        assert_eq!(column(&h, &rows[0], "method"), "ssgd");
        assert_eq!(column(&h, &rows[0], "numel"), "32");
        assert_eq!(column(&h, &rows[0], "mem_read_gbps"), "12.5");
        assert!(!h.iter().any(|c| c == "check"), "{h:?}");

        let (h, rows) = read_csv(&dir.join("micro.csv"));
        let got: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (column(&h, r, "case_id"), column(&h, r, "check")))
            .collect();
        assert_eq!(got, [("c2", "pass"), ("c3", "fail")]);
        assert!(!h.iter().any(|c| c == "mem_read_gbps"), "{h:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
