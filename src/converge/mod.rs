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
pub mod target;

mod resume;

mod train;

use crate::config::{ConvergeCase, ConvergeSection};
pub use train::{run_all, run_case, CaseOutcome, ConvergeRow, RunContext, NOMINAL_FLOPS_PER_S};

use crate::comm::World;
use crate::config::Origin;
use crate::error::Result;
use crate::record::meta::RunMeta;
use crate::record::{CsvSink, DirLock};

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
    let (req, cases, estimate) = world.agree(req.and_then(|r| validate(world, r)))?;
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
        open_outputs(world, &req, &mut meta, &out).map(Some)
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
            announce(world, &req, &cases, &done, &out);
        }
    }
    let ctx = RunContext {
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
        record_end(&mut meta, &result, &progress.summary, &out)?;
    }
    let mut outcomes = result?;
    if world.is_root() {
        outcomes = with_earlier(&cases, &earlier, &outcomes, world.size);
        print!("{}", summary_table(&outcomes));
    }
    Ok(outcomes)
}

/// Every section's cases for this world (every rank alike), and the largest case's
/// memory estimate, checked against this node's memory unless `--skip-memory-check`.
fn validate(world: &World, r: Request) -> Result<(Request, Vec<ConvergeCase>, Option<u64>)> {
    let mut cases = Vec::new();
    for (origin, s) in &r.sections {
        cases.extend(s.validate(origin, world.size, r.seed)?);
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
}

/// The cases an earlier run finished (`--resume`): each case id with its outcome.
type Earlier = Vec<(String, CaseOutcome)>;

/// Rank 0: prepare and lock `out`, create converge.csv (with `--resume`, reopen it and
/// read the cases an earlier run finished), keep an earlier run.json and write this one.
fn open_outputs(
    world: &World,
    req: &Request,
    meta: &mut RunMeta,
    out: &std::path::Path,
) -> Result<(CsvSink, DirLock, Earlier)> {
    let holder = format!(
        "host {}, pid {}, started {}",
        meta.hosts.first().map_or("unknown", String::as_str),
        std::process::id(),
        meta.start_time
    );
    crate::record::prepare_dir(out)?;
    let lock = DirLock::acquire(out, &holder)?;
    let path = out.join("converge.csv");
    let (sink, earlier) = if req.resume {
        resume::reopen(&path, world.size)?
    } else {
        (CsvSink::create(&path)?, Vec::new())
    };
    meta.beside_benchmark(out);
    meta.keep_previous(out, req.resume)?;
    meta.write(out)?;
    Ok((sink, lock, earlier))
}

/// Rank 0's first line: ranks, cases (and those `--resume` skips), where results go.
fn announce(
    world: &World,
    req: &Request,
    cases: &[ConvergeCase],
    done: &std::collections::HashSet<String>,
    out: &std::path::Path,
) {
    let skipping = if req.resume {
        let n = cases
            .iter()
            .filter(|c| done.contains(&train::case_id(c, world.size)))
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

/// Rank 0: run.json's end (status, error, counts). The run's own error comes first; a
/// failing metadata write only replaces success.
fn record_end(
    meta: &mut RunMeta,
    result: &Result<Vec<CaseOutcome>>,
    summary: &crate::record::meta::RunSummary,
    out: &std::path::Path,
) -> Result<()> {
    crate::record::meta::unfollow();
    meta.end_time = Some(crate::units::utc_now().0);
    meta.cases_done = summary.cases_done;
    meta.cases_skipped = summary.cases_skipped;
    meta.last_case = summary.last_case.clone();
    match result {
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
    let recorded = meta.write(out);
    if result.is_ok() {
        recorded?;
    } else if let Err(e) = recorded {
        eprintln!(
            "gradcomp: warning: could not record the run's status in {}: {e}",
            meta.file_name
        );
    }
    Ok(())
}

/// The cases an earlier run finished (--resume) beside this run's `mine`, in case order.
fn with_earlier(
    cases: &[ConvergeCase],
    earlier: &[(String, CaseOutcome)],
    mine: &[CaseOutcome],
    world_size: usize,
) -> Vec<CaseOutcome> {
    let mut all = Vec::with_capacity(cases.len());
    let mut mine = mine.iter();
    for c in cases {
        let id = train::case_id(c, world_size);
        match earlier.iter().find(|(i, _)| *i == id) {
            Some((_, o)) => all.push(CaseOutcome {
                config_id: train::config_id(c, world_size),
                setup_id: train::setup_id(c, world_size),
                label: train::label(c),
                seed: c.seed,
                ..o.clone()
            }),
            None => all.extend(mine.next().cloned()),
        }
    }
    all
}

/// Per configuration (in case order): its seeds, final held-out loss and its ratio to
/// dense S-SGD's (same setup), and its steps to dense's target ([`target`]) at each seed;
/// above, each setup's target and its derivation.
pub fn summary_table(outcomes: &[CaseOutcome]) -> String {
    use target::Reach;
    let mut s = String::new();
    let mut setups: Vec<&str> = Vec::new();
    for o in outcomes {
        if !setups.contains(&o.setup_id.as_str()) {
            setups.push(&o.setup_id);
        }
    }
    for setup in setups {
        let mine: Vec<&CaseOutcome> = outcomes.iter().filter(|o| o.setup_id == setup).collect();
        let dense: Vec<(f64, f64)> = mine
            .iter()
            .filter(|o| o.method == "ssgd" && o.status == "done")
            .map(|o| (o.final_eval_loss, o.final_eval_accuracy))
            .collect();
        let dense_mean = if dense.is_empty() {
            f64::NAN
        } else {
            dense.iter().map(|d| d.0).sum::<f64>() / dense.len() as f64
        };
        let tgt = target::from_dense(&dense);
        match &tgt {
            Some(t) => s.push_str(&format!(
                "target: held-out loss <= {:.4} and accuracy >= {:.4} (dense S-SGD over {} seeds: loss {:.4} sd {:.4}, accuracy {:.4} sd {:.4}; {})\n",
                t.loss,
                t.accuracy,
                t.dense_seeds,
                t.dense_loss_mean,
                t.dense_loss_sd,
                t.dense_accuracy_mean,
                t.dense_accuracy_sd,
                target::MARGIN_RULE
            )),
            None => s.push_str(&format!(
                "target: none: dense S-SGD finished at {} seed(s) of this setup; steps to dense's accuracy need 2 or more (3 recommended: --seeds 1,2,3)\n",
                dense.len()
            )),
        }
        s.push_str(&format!(
            "{:<34} {:>5} {:>11} {:>8}  {}\n",
            "method", "seeds", "final_loss", "vs_dense", "steps to target (per seed)"
        ));
        let mut configs: Vec<&str> = Vec::new();
        for o in &mine {
            if !configs.contains(&o.config_id.as_str()) {
                configs.push(&o.config_id);
            }
        }
        for cfg in configs {
            let runs: Vec<&&CaseOutcome> = mine.iter().filter(|o| o.config_id == cfg).collect();
            let finals: Vec<f64> = runs
                .iter()
                .map(|o| o.final_eval_loss)
                .filter(|l| l.is_finite())
                .collect();
            let mean = if finals.len() == runs.len() && !finals.is_empty() {
                finals.iter().sum::<f64>() / finals.len() as f64
            } else {
                f64::NAN
            };
            let ratio = if dense_mean.is_finite() && dense_mean > 0.0 && mean.is_finite() {
                format!("{:.3}", mean / dense_mean)
            } else {
                "-".into()
            };
            let mut reached = 0;
            let per_seed: Vec<String> = runs
                .iter()
                .map(|o| {
                    if o.status != "done" {
                        return format!("seed {}: {}", o.seed, o.status);
                    }
                    match tgt.as_ref().map(|t| target::steps_to_target(&o.curve, t)) {
                        Some(Reach::Reached { steps }) => {
                            reached += 1;
                            format!("{steps}")
                        }
                        Some(Reach::NotReached {
                            best_loss,
                            best_steps,
                        }) => format!("no (best {best_loss:.4} at {best_steps})"),
                        Some(Reach::NoData) => "no evaluation".into(),
                        None => "-".into(),
                    }
                })
                .collect();
            let verdict = match (&tgt, reached) {
                (None, _) => String::new(),
                (Some(_), r) if r == runs.len() => "  reaches dense".into(),
                (Some(_), 0) => "  does not reach dense".into(),
                (Some(_), r) => format!("  reaches dense at {r} of {} seeds", runs.len()),
            };
            let mean_text = if mean.is_finite() {
                format!("{mean:.4}")
            } else {
                "-".into()
            };
            s.push_str(&format!(
                "{:<34} {:>5} {:>11} {:>8}  {}{verdict}\n",
                runs[0].label,
                runs.len(),
                mean_text,
                ratio,
                per_seed.join(", ")
            ));
        }
    }
    s
}
