//! The translation of a command line into the [`Config`] it runs.

use super::{Cli, Command};
use crate::config::{self, Config, MicroCommSection, Origin, SizeSpec};
use crate::error::{Error, Result};

impl Cli {
    /// The configuration this command line asks for.
    pub fn config(&self) -> Result<Config> {
        // What a command line runs unless its flags say otherwise: `[run]`'s defaults.
        let none = Config {
            seed: 1,
            expect_ranks: None,
            case_timeout_s: None,
            samples: false,
            rounds: 1,
            time_dilation: 1,
            micro_comm: vec![],
            micro_compress: vec![],
            micro: vec![],
            e2e: vec![],
            converge_sections: 0,
        };
        let mut cfg =
            match &self.command {
                Command::Run { config, .. } => config::load(config)?,
                Command::MicroComm(a) => {
                    let section = MicroCommSection {
                        collectives: a.collectives.clone(),
                        min_bytes: SizeSpec::Text(a.min_bytes.clone()),
                        max_bytes: SizeSpec::Text(a.max_bytes.clone()),
                        sizes: a
                            .sizes
                            .as_ref()
                            .map(|v| v.iter().cloned().map(SizeSpec::Text).collect()),
                        iters: a.iters,
                        warmup: a.warmup,
                        check: a.check,
                    };
                    Config {
                        micro_comm: vec![section.validate(&Origin::Cli)?],
                        ..none
                    }
                }
                Command::MicroCompress(a) => Config {
                    micro_compress: vec![a.section().validate(&Origin::Cli, false)?],
                    ..none
                },
                Command::E2e(a) => Config {
                    e2e: vec![a.section()?.validate(&Origin::Cli)?],
                    ..none
                },
                Command::Models { .. }
                | Command::Methods { .. }
                | Command::Devcost { .. }
                | Command::Simulate(_)
                | Command::Choose(_)
                | Command::Fit { .. }
                | Command::Converge(_) => return Err(Error::Input(
                    "this command needs no MPI configuration (a bug: handled before MPI starts)"
                        .into(),
                )),
                Command::Micro(a) => Config {
                    micro: vec![a.section().validate(&Origin::Cli, true)?],
                    ..none
                },
            };
        if let Some(seed) = self.common.job.seed {
            cfg.seed = seed;
        }
        if self.common.samples && self.common.no_samples {
            return Err(Error::Input(
                "--samples and --no-samples: give one (samples.csv is off unless --samples)".into(),
            ));
        }
        if self.common.samples {
            cfg.samples = true;
        }
        if self.common.no_samples {
            cfg.samples = false;
        }
        if let Some(r) = self.common.rounds {
            if !(1..=crate::config::MAX_ROUNDS).contains(&r) {
                return Err(Error::Input(format!(
                    "--rounds {r}: give 1 (each e2e case once) to {}",
                    crate::config::MAX_ROUNDS
                )));
            }
            cfg.rounds = r;
        }
        if let Some(k) = self.common.time_dilation {
            crate::measure::dilation::Dilation::new(k)
                .map_err(|m| Error::Input(format!("--time-dilation {k}: {m}")))?;
            if k > 1 && matches!(self.command, Command::MicroCompress(_)) {
                return Err(Error::Input(format!(
                    "--time-dilation {k} with micro-compress: its kernels run on one rank with no network or emulated device, so dilation has nothing to emulate (it would stretch each kernel and divide the stretch away again); run micro-compress without --time-dilation"
                )));
            }
            cfg.time_dilation = k;
        }
        if let Some(n) = self.common.job.expect_ranks {
            if n == 0 {
                return Err(Error::Input(
                    "--expect-ranks: 0 is not a world size; give the number of MPI ranks (>= 1)"
                        .into(),
                ));
            }
            cfg.expect_ranks = Some(n);
        }
        let what = match &self.command {
            Command::Run { config, .. } => config.display().to_string(),
            _ => "the command line".into(),
        };
        cfg.check_cases(&what).map_err(Error::Input)?;
        cfg.check_dilation(&what).map_err(Error::Input)?;
        Ok(cfg)
    }
}
