//! `gradcomp converge`: data-parallel training of a real model under MPI with every
//! method, reporting loss curves beside the timings (docs/methods.md, "Convergence
//! check"; docs/csv-schema.md, "converge.csv"; docs/performance.md, "Convergence runs").
//!
//! Each rank computes the gradients of an MLP ([`model`]) on its shard of a synthetic
//! teacher task ([`data`]); the gradients take the e2e engine's path: the registry's
//! compressor, the buckets of `engine::layout` (fusion plans and planners), the bucket
//! wires with their trailer of gathered lengths, one [`Exchange`] per bucket and round,
//! `engine::unit_received` and `decompress` (error feedback and the method's own update
//! rule inside the compressor). The decompressed worker average then drives an SGD step
//! with momentum (DGC: plain SGD, its velocity already carries the momentum).
//!
//! Files: this one holds the command, its request and the summary; `section.rs` the
//! `[[converge]]` section and its validation into cases; `train.rs` the training of one
//! case and its converge.csv rows.

pub mod data;
pub mod model;

mod resume;

mod train;

use crate::config::{ConvergeCase, ConvergeSection};
pub use train::{run_all, run_case, CaseOutcome, ConvergeRow, RunContext, NOMINAL_FLOPS_PER_S};

use crate::comm::World;
use crate::config::Origin;
use crate::error::Result;
use crate::record::meta::RunMeta;
use crate::record::{CsvSink, DirLock};

/// The documented convergence check (docs/methods.md, "Convergence check"): a method
/// passes when its final eval loss is at most `dense · (1 + TOLERANCE_REL)`.
pub const TOLERANCE_REL: f64 = 0.25;

/// Whether a final eval loss passes the check against dense S-SGD's.
pub fn within_tolerance(final_eval_loss: f64, dense_eval_loss: f64) -> bool {
    final_eval_loss.is_finite() && final_eval_loss <= dense_eval_loss * (1.0 + TOLERANCE_REL)
}

/// What `gradcomp converge` was asked to run.
pub struct Request {
    /// Sections with where they came from (CLI flags or a config file's `[[converge]]`).
    pub sections: Vec<(Origin, ConvergeSection)>,
    pub seed: u64,
    pub out: Option<std::path::PathBuf>,
    pub quiet: bool,
    /// The MPI thread level granted (for run.json).
    pub thread_level: String,
    /// `--resume`: skip the cases whose whole curve is already in `OUT/converge.csv`.
    pub resume: bool,
    /// `--skip-memory-check`: run even if the estimate exceeds the node's memory.
    pub skip_memory_check: bool,
}

/// Where the run went and how far it got (for the caller's messages).
#[derive(Default)]
pub struct Progress {
    pub out: std::path::PathBuf,
    pub summary: crate::record::meta::RunSummary,
}

/// `gradcomp converge`: validate (every rank agrees; bad input exits 2 with one
/// message), create `OUT/converge.csv` on rank 0 (with `--resume`, reopen it: finished
/// cases are skipped), train every case, print a summary. A stop signal ends the run at
/// the next step with run.json `interrupted` and `Error::Interrupted`.
pub fn command(
    world: &World,
    req: Result<Request>,
    progress: &mut Progress,
) -> Result<Vec<CaseOutcome>> {
    let (req, cases, estimate) = world.agree(req.and_then(|r| {
        let mut cases = Vec::new();
        for (origin, s) in &r.sections {
            cases.extend(s.validate(origin, world.size)?);
        }
        let largest = cases
            .iter()
            .map(|c| (c.estimated_bytes(world.size), c))
            .max_by_key(|(b, _)| *b);
        if let (Some((need, case)), false) = (largest, r.skip_memory_check) {
            if let (here, Some(avail)) = crate::measure::host::node_memory(world.size) {
                crate::config::check_memory_need(
                    &format!("converge {}", case.method),
                    need,
                    here,
                    avail,
                )
                .map_err(crate::error::Error::Input)?;
            }
        }
        let estimate = largest.map(|(b, _)| b);
        Ok((r, cases, estimate))
    }))?;
    let warnings = crate::config::take_warnings();
    if world.is_root() {
        for w in warnings {
            eprintln!("gradcomp: warning: {w}");
        }
    }
    let (start_time, stamp) = crate::units::utc_now();
    let run_id = world.broadcast_string(&if world.is_root() {
        crate::record::meta::new_run_id(&stamp)
    } else {
        String::new()
    });
    let out = req
        .out
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("results").join(&run_id));
    progress.out = out.clone();
    let sections: Vec<&ConvergeSection> = req.sections.iter().map(|(_, s)| s).collect();
    let config = serde_json::json!({ "seed": req.seed, "converge": sections });
    let mut meta = RunMeta::begin(
        world,
        &run_id,
        start_time,
        req.thread_level.clone(),
        config,
        cases.len(),
        estimate,
    );
    // Rank 0 alone touches files, under the directory lock (held until we return);
    // an earlier run's run.json is kept, never overwritten.
    let opened = if world.is_root() {
        let holder = format!(
            "host {}, pid {}, started {}",
            meta.hosts.first().map_or("unknown", String::as_str),
            std::process::id(),
            meta.start_time
        );
        (|| {
            crate::record::prepare_dir(&out)?;
            let lock = DirLock::acquire(&out, &holder)?;
            let path = out.join("converge.csv");
            let (sink, earlier) = if req.resume {
                resume::reopen(&path, world.size)?
            } else {
                (CsvSink::create(&path)?, Vec::new())
            };
            meta.keep_previous(&out, req.resume)?;
            meta.write(&out)?;
            Ok(Some((sink, lock, earlier)))
        })()
    } else {
        Ok(None)
    };
    let (mut sink, _lock, earlier) = match world.agree(opened)? {
        Some((s, l, e)) => (Some(s), Some(l), e),
        None => (None, None, Vec::new()),
    };
    let done_list = world.broadcast_string(
        &earlier
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let done: std::collections::HashSet<String> = done_list.lines().map(String::from).collect();
    if world.is_root() {
        crate::record::meta::follow(&meta, &out);
        if !req.quiet {
            let skipping = if req.resume {
                let n = cases
                    .iter()
                    .filter(|c| done.contains(&train::case_id(c, req.seed, world.size)))
                    .count();
                format!(", skipping {n} already done")
            } else {
                String::new()
            };
            eprintln!(
                "[gradcomp] converge: {} rank(s), {} case(s){skipping}, results in {}",
                world.size,
                cases.len(),
                out.display()
            );
        }
    }
    let ctx = RunContext {
        seed: req.seed,
        run_id: &run_id,
        quiet: req.quiet,
        done: &done,
    };
    let result = run_all(world, &cases, &ctx, sink.as_mut(), &mut progress.summary);
    // Every rank is here together unless one rank alone failed (then it aborts the job).
    if matches!(result, Ok(_) | Err(crate::error::Error::Interrupted { .. })) {
        meta.peak_rss_bytes = Some(world.max_u64(crate::measure::host::peak_rss_bytes()));
        meta.end_load(world);
    }
    if world.is_root() {
        crate::record::meta::unfollow();
        meta.end_time = Some(crate::units::utc_now().0);
        meta.cases_done = progress.summary.cases_done;
        meta.cases_skipped = progress.summary.cases_skipped;
        meta.last_case = progress.summary.last_case.clone();
        match &result {
            Ok(_) => meta.status = "ok".into(),
            Err(crate::error::Error::Interrupted { signal }) => {
                meta.status = "interrupted".into();
                meta.error = Some(format!(
                    "stopped by {} at {}",
                    crate::measure::stop::name(*signal),
                    meta.end_time.as_deref().unwrap_or("?")
                ));
            }
            Err(e) => {
                meta.status = "failed".into();
                meta.error = Some(e.to_string());
            }
        }
        // The run's own error comes first; a failing metadata write only replaces success.
        let recorded = meta.write(&out);
        if result.is_ok() {
            recorded?;
        } else if let Err(e) = recorded {
            eprintln!("gradcomp: warning: could not record the run's status in run.json: {e}");
        }
    }
    let mut outcomes = result?;
    if world.is_root() {
        // The cases an earlier run finished (--resume) beside this run's, in case order.
        let mut all = Vec::with_capacity(cases.len());
        let mut mine = outcomes.iter();
        for c in &cases {
            let id = train::case_id(c, req.seed, world.size);
            match earlier.iter().find(|(i, _)| *i == id) {
                Some((_, o)) => all.push(o.clone()),
                None => all.extend(mine.next().cloned()),
            }
        }
        print!("{}", summary_table(&all));
        outcomes = all;
    }
    Ok(outcomes)
}

/// The final eval loss and accuracy per case beside dense S-SGD's (the first `ssgd` case),
/// and whether each is within the documented tolerance.
pub fn summary_table(outcomes: &[CaseOutcome]) -> String {
    let dense = outcomes
        .iter()
        .find(|o| o.method == "ssgd")
        .map(|o| o.final_eval_loss);
    let mut s = format!(
        "{:<14} {:>14} {:>14} {:>10} {:>8}  status\n",
        "method", "eval_loss", "eval_accuracy", "vs_dense", "within"
    );
    for o in outcomes {
        let (ratio, within) = match dense {
            Some(d) if d.is_finite() && d > 0.0 => (
                format!("{:.3}", o.final_eval_loss / d),
                if within_tolerance(o.final_eval_loss, d) {
                    "yes"
                } else {
                    "no"
                },
            ),
            _ => ("-".into(), "-"),
        };
        s.push_str(&format!(
            "{:<14} {:>14.5} {:>14.4} {:>10} {:>8}  {}\n",
            o.method, o.final_eval_loss, o.final_eval_accuracy, ratio, within, o.status
        ));
    }
    s
}
