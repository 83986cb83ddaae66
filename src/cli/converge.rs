//! `gradcomp converge`: its flags and the `[[converge]]` sections they ask for.

use super::{JobFlags, ParamArgs};
use crate::config::ConvergeSection;
use crate::config::Origin;
use crate::error::{Error, Result};
use clap::Args;
use std::path::PathBuf;

/// `gradcomp converge` flags (the `[[converge]]` keys, src/converge/mod.rs). Not e2e's
/// groups: one fusion plan and one collective per run, its own batch and method names.
#[derive(Debug, Args)]
pub struct ConvergeArgs {
    #[command(flatten)]
    pub job: JobFlags,
    /// Methods, comma-separated (as for e2e, plus the negative controls topk-noef,
    /// powersgd-noef, signsgd-noef); required unless --config
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub methods: Vec<String>,
    /// Run the [[converge]] sections of this bench config instead of the flags
    #[arg(long, value_name = "FILE", conflicts_with = "methods")]
    pub config: Option<PathBuf>,
    /// Training steps per method [default: 1000]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub steps: Option<u64>,
    /// Samples per worker per step [default: 32]
    #[arg(long, value_name = "B", allow_negative_numbers = true)]
    pub batch: Option<usize>,
    /// Learning rate (peak of the schedule) [default: 0.1]
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub lr: Option<f64>,
    /// Momentum of the SGD step (DGC runs plain SGD on its own velocity) [default: 0.9]
    #[arg(long, value_name = "M", allow_negative_numbers = true)]
    pub sgd_momentum: Option<f64>,
    /// Learning-rate schedule: cosine (warm-up, then cosine decay to 0) or constant
    /// [default: cosine]
    #[arg(long, value_name = "NAME")]
    pub lr_schedule: Option<String>,
    /// Linear learning-rate warm-up steps [default: 5% of --steps]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub warmup_steps: Option<u64>,
    /// Seeds, comma-separated: every case runs once per seed; steps to dense's accuracy
    /// need dense at 2 or more (3 recommended) [default: --seed]
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        allow_negative_numbers = true
    )]
    pub seeds: Option<Vec<u64>>,
    /// Evaluate on the held-out set every N steps and after the last [default: 50]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub eval_every: Option<u64>,
    /// Fusion plan: none, single, a byte threshold (25MiB), or a planner [default: single]
    #[arg(long, value_name = "PLAN")]
    pub fusion: Option<String>,
    /// Collective: auto, allreduce, allgather, ps, ring [default: auto]
    #[arg(long, value_name = "MODE")]
    pub collective: Option<String>,
    /// Hidden layer widths, comma-separated [default: 512,512]
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        allow_hyphen_values = true
    )]
    pub hidden: Option<Vec<usize>>,
    /// Train samples over all ranks: 0 draws fresh samples from the teacher every step
    /// (no overfitting); N trains on a fixed set of N [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub train_samples: Option<usize>,
    /// Held-out samples [default: 2048]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub eval_samples: Option<usize>,
    #[command(flatten)]
    pub params: ParamArgs,
    /// Skip the cases whose whole curve is already in --out's converge.csv (same case,
    /// seed and world size); a case cut off by a signal runs again from its first step
    #[arg(long)]
    pub resume: bool,
    /// Run even if the estimated memory need exceeds this node's available memory
    #[arg(long)]
    pub skip_memory_check: bool,
    /// Refused with a reason (converge has nothing time dilation could emulate); accepted
    /// here so that scripts/netlab.sh run on a dilated netlab gets that reason
    #[arg(long, hide = true, value_name = "K", allow_negative_numbers = true)]
    pub time_dilation: Option<u32>,
}

impl ConvergeArgs {
    /// The sections to run with their origins, and the seed (`--seed`, else the
    /// config's `[run] seed`, else 1).
    pub fn sections(&self, seed: Option<u64>) -> Result<(u64, Vec<(Origin, ConvergeSection)>)> {
        if let Some(k) = self.time_dilation.filter(|&k| k != 1) {
            return Err(Error::Input(format!(
                "--time-dilation {k}: {}",
                crate::config::CONVERGE_NOT_DILATED
            )));
        }
        if let Some(path) = &self.config {
            let (run_seed, secs) = crate::config::sections_from_file(path)?;
            let file = path.display().to_string();
            let sections = secs
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        Origin::File {
                            file: file.clone(),
                            section: "converge",
                            index: i + 1,
                        },
                        s,
                    )
                })
                .collect();
            return Ok((seed.unwrap_or(run_seed), sections));
        }
        let d = ConvergeSection::with_methods(self.methods.clone());
        let s = ConvergeSection {
            steps: self.steps.unwrap_or(d.steps),
            batch: self.batch.unwrap_or(d.batch),
            lr: self.lr.unwrap_or(d.lr),
            sgd_momentum: self.sgd_momentum.unwrap_or(d.sgd_momentum),
            eval_every: self.eval_every.unwrap_or(d.eval_every),
            lr_schedule: self.lr_schedule.clone().unwrap_or(d.lr_schedule),
            warmup_steps: self.warmup_steps,
            seeds: self.seeds.clone(),
            fusion: self.fusion.clone().unwrap_or(d.fusion),
            collective: self.collective.clone().unwrap_or(d.collective),
            hidden: self.hidden.clone().unwrap_or(d.hidden),
            train_samples: self.train_samples.unwrap_or(d.train_samples),
            eval_samples: self.eval_samples.unwrap_or(d.eval_samples),
            densities: self.params.density.clone(),
            lowrank_ranks: self.params.lowrank_rank.clone(),
            ranks: self.params.rank.clone(),
            params: self.params.params(),
            ..d
        };
        Ok((seed.unwrap_or(1), vec![(Origin::Cli, s)]))
    }
}
