//! `gradcomp simulate`: its flags and their validation into a
//! [`SimulateRequest`](crate::sim::run::SimulateRequest).

use super::groups::{check_network, e2e_section, intra_link};
use super::{ParamArgs, PlacementArgs, ScheduleArgs, WorkloadArgs};
use crate::config::{self, Origin};
use crate::error::{Error, Result};
use clap::Args;
use std::path::PathBuf;

/// Largest simulated world size: the cost models are fitted on clusters of up to a few
/// thousand ranks, and beyond this the simulated times are meaningless.
pub const MAX_SIM_WORLD_SIZE: usize = 1 << 20;

/// The simulator's flags.
#[derive(Debug, Args)]
#[command(
    mut_arg("models", |a| a.required_unless_present("compare")),
    mut_arg("methods", |a| a.required_unless_present("compare"))
)]
pub struct SimulateArgs {
    /// Output directory (created if missing) [default: results/sim-<UTC timestamp>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Simulated world sizes, comma-separated (e.g. 8,64,1024)
    #[arg(
        long,
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_name = "LIST",
        default_value = "8"
    )]
    pub world_sizes: Vec<usize>,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Network presets, comma-separated: 1gbe, 10gbe, 25gbe, 100gb-ib, omgs-1gbe (OMGS-SGD's published 1 GbE models, at 2, 4, 8 or 16 nodes) (a list sweeps; one with --compare or --validate-published) [default: 10gbe, or fitted with --fits]
    #[arg(long = "network", value_delimiter = ',', value_name = "LIST")]
    pub networks: Vec<String>,
    /// Fit collective and compression costs from this results directory (micro_comm.csv, micro_compress.csv)
    #[arg(long, value_name = "DIR")]
    pub fits: Option<PathBuf>,
    /// Price with a --fits calibration that gradcomp judged untrusted (its ranks shared their cores: collectives 10x their fit, the host model at a bound, a busy machine); by default such a calibration is refused
    #[arg(long)]
    pub untrusted_fits: bool,
    /// Ranks per node sharing one NIC (the network's link); must divide every world size [default: 1, the flat network; with --compare and --network the run's own]
    #[arg(long, allow_negative_numbers = true, value_name = "G")]
    pub ranks_per_node: Option<usize>,
    /// Link between a node's ranks with --ranks-per-node above 1: pcie3, nvlink, or ALPHA_US:GBPS (e.g. 3:20) [default: pcie3]
    #[arg(long, value_name = "LINK")]
    pub intra_link: Option<String>,
    /// Simulate every case of this measured e2e.csv and compare iter_s (fails beyond --tolerance)
    #[arg(long, value_name = "E2E_CSV")]
    pub compare: Option<PathBuf>,
    /// A converge.csv of `gradcomp converge` with three or more dense seeds: also print each
    /// method's time to dense accuracy (its steps to target x its simulated iteration)
    #[arg(long, value_name = "CONVERGE_CSV", conflicts_with = "compare")]
    pub converge: Option<PathBuf>,
    /// Largest accepted |simulated/measured - 1| with --compare
    #[arg(
        long,
        default_value = "0.15",
        allow_negative_numbers = true,
        value_name = "X"
    )]
    pub tolerance: f64,
    /// Planner fusions (mgwfbp, omgs, layerfusion): on = keep a simple plan (none, single, 1-64 MiB) the planner's model rates faster; off = run the planner's own plan, as its paper did
    #[arg(long, default_value = "on", value_name = "on|off")]
    pub planner_fallback: String,
    /// Also write published_validation.csv: a paper's published cost constants beside this network preset's and compression device's predictions (omgs: OMGS-SGD's 1 GbE all-gather table and P102-100 top-k cost)
    #[arg(long, value_name = "PAPER")]
    pub validate_published: Option<String>,
    #[command(flatten)]
    pub placement: PlacementArgs,
    #[command(flatten)]
    pub params: ParamArgs,
    /// No progress lines on stderr
    #[arg(long, short)]
    pub quiet: bool,
    /// Refused with a reason (a dilated run's files are already in real units); accepted
    /// here so that the flag gets that reason instead of "unexpected argument"
    #[arg(long, hide = true, value_name = "K", allow_negative_numbers = true)]
    pub time_dilation: Option<u32>,
}

impl SimulateArgs {
    /// Validate the flags (the same rules as e2e for the shared axes).
    pub fn request(
        &self,
        out: Option<&std::path::Path>,
    ) -> Result<crate::sim::run::SimulateRequest> {
        if let Some(k) = self.time_dilation {
            return Err(Error::Input(format!(
                "--time-dilation {k}: simulate runs no emulation; a dilated run's CSV files are already in real (emulated) seconds, and simulate --fits reads the dilation of the links from the run's netlab.txt and run.json: drop the flag"
            )));
        }
        let mut workload = self.workload.clone();
        if self.compare.is_some() && workload.models.is_empty() {
            workload.models = vec!["resnet20".into()];
        }
        if self.compare.is_some() && workload.methods.is_empty() {
            workload.methods = vec!["ssgd".into()];
        }
        let spec = e2e_section(&workload, &self.schedule, &self.placement, &self.params)?
            .validate(&Origin::Cli)?;
        self.check_world_sizes()?;
        self.check_networks()?;
        self.check_ranks_per_node()?;
        let intra_link = intra_link(self.intra_link.as_deref())?;
        let flat = match self.ranks_per_node {
            Some(g) => g == 1,
            None => self.compare.is_none(),
        };
        if self.intra_link.is_some() && flat {
            config::warn(
                "--intra-link has no effect with one rank per node; give --ranks-per-node G above 1".into(),
            );
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0) {
            return Err(Error::Input(format!(
                "--tolerance: {} is not a positive number (e.g. 0.15)",
                self.tolerance
            )));
        }
        let planner_fallback = self.planner_fallback_on()?;
        let validate_published = self.validate_omgs()?;
        let steps_to_target = match &self.converge {
            Some(p) => crate::converge::target::from_csv(p)?,
            None => Vec::new(),
        };
        let (_, stamp) = crate::units::utc_now();
        let out = out
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| PathBuf::from("results").join(format!("sim-{stamp}")));
        Ok(crate::sim::run::SimulateRequest {
            steps_to_target,
            network: self.networks.first().cloned(),
            networks: self.networks.clone(),
            fits: self.fits.clone(),
            untrusted_fits: self.untrusted_fits,
            compare: self.compare.clone(),
            tolerance: self.tolerance,
            ranks_per_node: self.ranks_per_node,
            intra_link,
            planner_fallback,
            validate_published,
            ..crate::sim::run::SimulateRequest::of_cases(spec, self.world_sizes.clone(), out)
        })
    }

    /// `--world-sizes`: at least one, each at least 1, no repeats, at most
    /// [`MAX_SIM_WORLD_SIZE`].
    fn check_world_sizes(&self) -> Result<()> {
        if self.world_sizes.is_empty() || self.world_sizes.contains(&0) {
            return Err(Error::Input(
                "--world-sizes: give world sizes >= 1, e.g. 8,64,1024".into(),
            ));
        }
        config::no_repeats(&Origin::Cli, "world_sizes", &self.world_sizes, |n| {
            n.to_string()
        })?;
        if let Some(n) = self.world_sizes.iter().find(|&&n| n > MAX_SIM_WORLD_SIZE) {
            return Err(Error::Input(format!(
                "--world-sizes: {n} ranks is beyond what the simulator models; give at most {MAX_SIM_WORLD_SIZE}"
            )));
        }
        Ok(())
    }

    /// `--network`: no repeats, one network for `--compare` and `--validate-published`,
    /// each a preset that can price the node counts asked for.
    fn check_networks(&self) -> Result<()> {
        config::no_repeats(&Origin::Cli, "network", &self.networks, |n| n.clone())?;
        if self.networks.len() > 1 {
            let single = if self.compare.is_some() {
                Some("--compare")
            } else if self.validate_published.is_some() {
                Some("--validate-published")
            } else {
                None
            };
            if let Some(flag) = single {
                return Err(Error::Input(format!(
                    "--network {}: {flag} takes one network; give one preset",
                    self.networks.join(",")
                )));
            }
        }
        let nodes: Vec<usize> = self
            .world_sizes
            .iter()
            .map(|&n| n / self.ranks_per_node.unwrap_or(1).max(1))
            .collect();
        for n in &self.networks {
            check_network(n, &nodes)?;
        }
        Ok(())
    }

    /// `--ranks-per-node`: at least 1 and, without `--compare`, a divisor of every world
    /// size.
    fn check_ranks_per_node(&self) -> Result<()> {
        if let Some(g) = self.ranks_per_node {
            if g == 0 {
                return Err(Error::Input(
                    "--ranks-per-node: 0 ranks per node; give at least 1 (1: one rank per node, the flat network)".into(),
                ));
            }
            if self.compare.is_none() {
                if let Some(n) = self.world_sizes.iter().find(|&&n| n % g != 0) {
                    return Err(Error::Input(format!(
                        "--ranks-per-node: {g} does not divide the world size {n} (--world-sizes); give a count that divides every world size, or world sizes that are multiples of {g}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// `--planner-fallback`: on or off.
    fn planner_fallback_on(&self) -> Result<bool> {
        Ok(match self.planner_fallback.as_str() {
            "on" => true,
            "off" => false,
            v => {
                return Err(Error::Input(format!(
                    "--planner-fallback: '{v}' is not on or off (off runs a planner's own plan, e.g. OMGS-SGD's merge)"
                )))
            }
        })
    }

    /// `--validate-published`: absent, or `omgs`.
    fn validate_omgs(&self) -> Result<bool> {
        Ok(match self.validate_published.as_deref() {
            None => false,
            Some("omgs") => true,
            Some(v) => {
                return Err(Error::Input(format!(
                    "--validate-published: unknown paper '{v}'; allowed: omgs (the only seed paper publishing its cluster's cost constants)"
                )))
            }
        })
    }
}
