//! sim.csv rows ([`SimRow`]), written by [`crate::record::write_all`].

use super::{CostModel, SimCase, SimResult};

/// One sim.csv row: e2e.csv's columns where they mean the same, plus `source` and
/// `cost_source`. Written by `sim::run::run` through [`crate::record::write_all`].
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SimRow {
    pub schema_version: u32,
    pub source: &'static str,
    pub model: String,
    pub method: String,
    pub fusion: String,
    pub pipelining: &'static str,
    pub collective: &'static str,
    pub aggregation: &'static str,
    pub world_size: usize,
    pub ranks_per_node: usize,
    /// The network preset, or `fitted` (`--fits` without `--network`); set by the caller.
    pub network: String,
    pub batch: usize,
    pub device: String,
    pub compress_on: &'static str,
    /// Device cost preset of `compress_on = device` (empty on the host).
    pub compress_device: String,
    pub density: f64,
    pub rank: usize,
    /// Count Sketch rows and columns per kept element, QSGD levels (every method's row
    /// carries the case's values; they matter to the methods that have them).
    pub sketch_rows: usize,
    pub sketch_cols_per_k: f64,
    pub qsgd_levels: u32,
    pub tensors: usize,
    pub buckets: usize,
    pub fwd_s: f64,
    pub bwd_s: f64,
    pub pack_s: f64,
    pub compress_s: f64,
    pub comm_s: f64,
    pub decompress_s: f64,
    pub exposed_s: f64,
    pub bwd_sync_s: f64,
    pub iter_s: f64,
    pub host_compress_s: f64,
    pub host_decompress_s: f64,
    pub dense_bytes: u64,
    pub wire_bytes: u64,
    pub planned_s: Option<f64>,
    /// Planner fusions: the planner's name, or the simple plan its model rated faster.
    pub plan_source: Option<String>,
    pub cost_source: String,
}

impl SimRow {
    pub fn new(case: &SimCase, r: &SimResult, costs: &CostModel) -> SimRow {
        let wl = &case.workload;
        SimRow {
            schema_version: crate::record::SCHEMA_VERSION,
            source: "simulated",
            model: wl.model.clone(),
            method: case.method.clone(),
            fusion: case.fusion.to_string(),
            pipelining: if case.pipelining { "on" } else { "off" },
            collective: r.collective,
            aggregation: r.aggregation,
            world_size: case.world_size,
            ranks_per_node: costs.ranks_per_node,
            network: String::new(),
            batch: wl.batch,
            device: wl.device.clone(),
            compress_on: case.compress_on.name(),
            compress_device: match (case.compress_on, &costs.device) {
                (crate::devcost::CompressOn::Device, Some(d)) => d.spec.name.clone(),
                _ => String::new(),
            },
            density: case.params.density_for(&case.method),
            rank: case.params.rank,
            sketch_rows: case.params.sketch_rows,
            sketch_cols_per_k: case.params.sketch_cols_per_k,
            qsgd_levels: case.params.qsgd_levels,
            tensors: wl.tensors.len(),
            buckets: r.buckets,
            fwd_s: r.fwd_s,
            bwd_s: r.bwd_s,
            pack_s: r.pack_s,
            compress_s: r.compress_s,
            comm_s: r.comm_s,
            decompress_s: r.decompress_s,
            exposed_s: r.exposed_s,
            bwd_sync_s: r.bwd_sync_s,
            iter_s: r.iter_s,
            host_compress_s: r.host_compress_s,
            host_decompress_s: r.host_decompress_s,
            dense_bytes: wl.tensors.iter().map(|t| 4 * t.numel() as u64).sum(),
            wire_bytes: r.wire_bytes,
            planned_s: r.planned_s,
            plan_source: r.plan_source.clone(),
            cost_source: match (case.compress_on, &costs.device) {
                (crate::devcost::CompressOn::Device, Some(d)) => {
                    format!("{}; {}", costs.describe(), d.describe())
                }
                _ => costs.describe(),
            },
        }
    }
}
