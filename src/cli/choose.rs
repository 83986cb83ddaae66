//! `gradcomp choose`: a cluster spec in, every method ranked by time to dense accuracy
//! with the band of a sensitivity sweep out ([`crate::sim::choose`]).

use super::groups::{check_network, e2e_section, intra_link};
use super::{ParamArgs, PlacementArgs, ScheduleArgs, WorkloadArgs};
use crate::config::Origin;
use crate::error::{Error, Result};
use crate::sim::choose::{Scenario, Sensitivity};
use crate::sim::run::SimulateRequest;
use crate::sim::summary::StepsToTarget;
use clap::Args;
use std::path::PathBuf;

/// The methods `choose` ranks by default: every method whose paper reports dense accuracy.
pub const DEFAULT_METHODS: &str =
    "ssgd,signsgd,topk,dgc,powersgd,acpsgd,qsgd,marsit,sketch,sketch-fusion,omgs";

/// The converge run committed with the repository (13 methods at -np 2, 3, 4, seeds 1-3;
/// Count Sketch and Sketch-Fusion at their default size appended 2026-11-29; its README).
pub const COMMITTED_CONVERGE: &str = "docs/data/converge-2026-11-28/converge.csv";

/// `gradcomp choose`'s flags.
#[derive(Debug, Args)]
pub struct ChooseArgs {
    /// Model (see `gradcomp models`), e.g. bert-large
    #[arg(long, value_name = "MODEL")]
    pub model: String,
    /// Nodes of the cluster
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub nodes: usize,
    /// GPUs (ranks) per node, sharing the node's NIC
    #[arg(
        long,
        default_value = "1",
        allow_negative_numbers = true,
        value_name = "G"
    )]
    pub gpus_per_node: usize,
    /// The network between nodes: 1gbe, 10gbe, 25gbe, 100gb-ib, or omgs-1gbe (OMGS-SGD's measured cluster; 2, 4, 8 or 16 nodes)
    #[arg(long, default_value = "10gbe", value_name = "PRESET")]
    pub network: String,
    /// Link between a node's GPUs when --gpus-per-node is above 1: pcie3, nvlink, or ALPHA_US:GBPS [default: pcie3]
    #[arg(long, value_name = "LINK")]
    pub intra_link: Option<String>,
    /// The GPU: its compute preset (v100, rtx2080ti, a100, h100, p102-100) and compression device preset
    #[arg(long, default_value = "v100", value_name = "PRESET")]
    pub gpu: String,
    /// Measured compression times of this GPU (analysis/profile_compress.py's CSV): the
    /// nominal scenario uses it, the band also prices without it
    #[arg(long, value_name = "FILE")]
    pub compress_profile: Option<String>,
    /// Where compression runs: device (the GPU; the default) or host (this CPU's costs with --fits, else the reference CPU's)
    #[arg(long, default_value = "device", value_name = "device|host")]
    pub compress_on: String,
    /// With --compress-on host: a results directory whose micro_compress.csv prices host
    /// compression on this CPU (the band also prices the reference CPU)
    #[arg(long, value_name = "DIR")]
    pub fits: Option<PathBuf>,
    /// Price with a --fits calibration that gradcomp judged untrusted (see `simulate --help`)
    #[arg(long)]
    pub untrusted_fits: bool,
    /// Methods to rank, comma-separated
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_METHODS, value_name = "LIST")]
    pub methods: Vec<String>,
    /// Fusion plans each method may use (its fastest counts)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none,single,25MiB",
        value_name = "LIST"
    )]
    pub fusion: Vec<String>,
    /// A converge.csv of `gradcomp converge` with three or more dense seeds (steps to target per method)
    #[arg(long, default_value = COMMITTED_CONVERGE, value_name = "CONVERGE_CSV")]
    pub converge: PathBuf,
    /// The band's network factor F: alpha and beta each at 1/F, 1 and F times the preset's
    #[arg(
        long,
        default_value = "2",
        allow_negative_numbers = true,
        value_name = "F"
    )]
    pub network_factor: f64,
    /// The band's per-kernel launch costs (us) besides the preset's 5 us (1: launches in a
    /// CUDA graph; 10: a slower eager dispatch)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,10",
        allow_negative_numbers = true,
        value_name = "LIST"
    )]
    pub launch_us: Vec<f64>,
    /// Per-worker batch size [default: the model's]
    #[arg(long, allow_negative_numbers = true, value_name = "B")]
    pub batch: Option<usize>,
    #[command(flatten)]
    pub params: ParamArgs,
    /// Also write choose.csv (every scenario's fastest row per method) into this directory
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress line on stderr
    #[arg(long, short)]
    pub quiet: bool,
}

/// A validated `choose`: the sweep, its scenarios and the steps to target.
pub struct ChooseRequest {
    pub base: SimulateRequest,
    pub scenarios: Vec<Scenario>,
    pub steps: Vec<StepsToTarget>,
    pub world_size: usize,
}

impl ChooseArgs {
    /// Validate the flags into a [`ChooseRequest`].
    pub fn request(&self) -> Result<ChooseRequest> {
        if self.nodes == 0 || self.gpus_per_node == 0 {
            return Err(Error::Input(format!(
                "--nodes {} --gpus-per-node {}: give at least one node of at least one GPU",
                self.nodes, self.gpus_per_node
            )));
        }
        let world_size = self
            .nodes
            .checked_mul(self.gpus_per_node)
            .filter(|&n| n <= super::MAX_SIM_WORLD_SIZE)
            .ok_or_else(|| {
                Error::Input(format!(
                    "--nodes {} x --gpus-per-node {}: beyond the {} ranks the simulator models",
                    self.nodes,
                    self.gpus_per_node,
                    super::MAX_SIM_WORLD_SIZE
                ))
            })?;
        check_network(&self.network, &[self.nodes])?;
        if !(self.network_factor.is_finite() && (1.0..=100.0).contains(&self.network_factor)) {
            return Err(Error::Input(format!(
                "--network-factor: {} is not between 1 and 100 (2: alpha and beta at half and twice the preset's)",
                self.network_factor
            )));
        }
        if let Some(us) = self
            .launch_us
            .iter()
            .find(|u| !(u.is_finite() && (0.0..=1e4).contains(*u)))
        {
            return Err(Error::Input(format!(
                "--launch-us: {us} is not between 0 and 10000 microseconds per kernel launch"
            )));
        }
        let on_device = match self.compress_on.as_str() {
            "device" => true,
            "host" => false,
            v => {
                return Err(Error::Input(format!(
                    "--compress-on: '{v}' is not device or host (choose compares methods at one placement)"
                )))
            }
        };
        if !on_device && self.compress_profile.is_some() {
            return Err(Error::Input(
                "--compress-profile prices compression on the GPU: drop it or give --compress-on device".into(),
            ));
        }
        if on_device && self.fits.is_some() {
            return Err(Error::Input(
                "--fits prices compression on this CPU: drop it or give --compress-on host".into(),
            ));
        }
        if !self.converge.exists() {
            return Err(Error::Input(format!(
                "--converge {}: no such file; give the converge.csv of `mpirun -np 4 gradcomp converge --seeds 1,2,3 --out DIR` (the repository's own is {COMMITTED_CONVERGE}, read from the repository root)",
                crate::config::clip(&self.converge.display().to_string())
            )));
        }
        let workload = WorkloadArgs {
            models: vec![self.model.clone()],
            methods: self.methods.clone(),
        };
        let schedule = ScheduleArgs {
            fusion: self.fusion.clone(),
            pipelining: vec!["off".into(), "on".into()],
            collectives: vec!["auto".into()],
            device: self.gpu.clone(),
            batch: self.batch,
        };
        let placement = PlacementArgs {
            compress_on: vec![self.compress_on.clone()],
            compress_device: Some(self.gpu.clone()),
            compress_profile: self.compress_profile.clone(),
        };
        let spec =
            e2e_section(&workload, &schedule, &placement, &self.params)?.validate(&Origin::Cli)?;
        let intra_link = intra_link(self.intra_link.as_deref())?;
        let steps = crate::converge::target::from_csv(&self.converge)?;
        let device = on_device.then_some(self.gpu.as_str());
        let scenarios = crate::sim::choose::scenarios(
            device,
            &Sensitivity {
                factor: self.network_factor,
                launch_us: self.launch_us.clone(),
                profile: self.compress_profile.is_some(),
                host_fits: self.fits.is_some(),
            },
        );
        let base = SimulateRequest {
            network: Some(self.network.clone()),
            networks: vec![self.network.clone()],
            fits: self.fits.clone(),
            untrusted_fits: self.untrusted_fits,
            ranks_per_node: Some(self.gpus_per_node),
            intra_link,
            ..SimulateRequest::of_cases(
                spec,
                vec![world_size],
                self.out.clone().unwrap_or_default(),
            )
        };
        Ok(ChooseRequest {
            base,
            scenarios,
            steps,
            world_size,
        })
    }
}
