//! What-if simulator (docs/architecture.md, "The simulator"): the e2e engine's schedule
//! (engine/mod.rs) replayed on a virtual clock, with cost models instead of real
//! compute, compression and communication. Pure code, no MPI.
//!
//! **Parts**: this file simulates one case; [`model`] is the cost model it charges
//! (clock, costs, network, topology, link credit, wires), [`calibrate`] that model's
//! calibration from measured runs (`gradcomp fit`), [`accuracy`] the comparison of its
//! predictions with measured runs (`simulate --compare`) and published constants.
//!
//! **Schedule** (the engine's, operation for operation). Time 0 is the iteration start.
//! The device plays forward (`fwd_s`), then the backward of each tensor in backward
//! order (reverse registration order) with absolute deadlines, so gradient `p` (backward
//! position) is ready at `fwd_s + bwd[0] + ... + bwd[p]`. One communication thread
//! takes the buckets in plan order: with pipelining it waits for the bucket's last
//! gradient, without for the end of backward. Per bucket and round: (merged methods,
//! round 0) pack the bucket's gradients into one tensor; per unit compress + feedback
//! then append its wire (pack); one exchange of the bucket wire (all-reduce of the sum
//! section, then counts all-gather + all-gather-v of the gather section, then our ring
//! of the ring section; a round starts only after the previous round's exchange ends);
//! per unit split the received data (pack) and decompress.
//!
//! **Costs** ([`CostModel`]): a [`network::CollectiveCost`] (preset or fitted), per method
//! and phase a linear model `fixed + per_element * numel` ([`MethodCosts`]; from
//! micro_compress.csv via [`fit`], or the committed reference fit [`MethodCosts::reference`]), and a copy model for
//! pack (`pack_fixed_s + pack_s_per_byte * bytes` per unit append and per unit split).
//! A method's phase cost is for all rounds; each round gets `1/rounds` of it.
//! Decompress of a unit with a gather section processes every worker's piece, so its
//! per-element term is scaled by [`gather_scale`] (micro_compress.csv measures one
//! worker). Host effects ([`host::HostModel`], calibrated by `gradcomp fit`): CPU share
//! when ranks outnumber cores, the device's start latency, and a resynchronisation
//! latency whenever the communication thread waited for the device.
//!
//! **Wire bytes** come from the real compressors' `wire_capacity`, built through the
//! registry for a worker of the simulated world size and registered shape by shape (one
//! compressor per distinct shape, so memory stays at one tensor's state). DGC's
//! capacity is its target k pairs, the most it sends.

pub mod accuracy;
pub mod calibrate;
pub mod choose;
pub mod model;
pub mod row;
pub mod run;
pub mod summary;

// The three parts' files, at the paths callers have always used (`sim::fit`, `sim::network`).
pub use accuracy::{measured, published};
pub use calibrate::{fit, fit_table, host, trust};
use model::{clock, wire};
pub use model::{costs, credit, network, topology};

use clock::{simulate_clock, unit_device_s, Unit};
pub use costs::{reference_source, CostModel, MethodCosts};
pub use row::SimRow;
use wire::{PhaseWire, WireOracle};
pub use wire::{WireCache, LARGE_1D};

pub use accuracy::{
    compare, e2e_rows, measured_cases, Comparison, E2eRow, MeasuredCase, MeasuredRow,
};

use crate::comm::exchange::{CollectiveMode, ExchangeOp, ExchangePlan};
use crate::compress::{registry, Aggregation, MethodParams, WireLen};
use crate::devcost::{CompressOn, DeviceCosts};
use crate::models::TensorSpec;
use crate::netmodel::CompressCost;
use crate::schedule::plan::{self, Fusion};
use crate::schedule::{planner, Executed};
use network::{CollectiveCost, Op};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SimError {
    #[error("simulate: {0}")]
    Input(String),
    #[error("simulate: method {method}: {msg}")]
    Method { method: String, msg: String },
    #[error(transparent)]
    Net(#[from] crate::netmodel::NetModelError),
    /// An input file (`--fits`, `--compare`, a network model) is missing or unreadable.
    #[error("cannot read {path}: {msg}")]
    Read { path: String, msg: String },
    /// Writing a result file failed mid-run (a full disk): a failed run, not bad input.
    #[error("cannot write {path}: {msg}")]
    Write { path: String, msg: String },
    /// A result file written through record/ ([`crate::record::write_all`]): a failed
    /// write (exit 1), or a results file that exists (exit 2).
    #[error(transparent)]
    Record(#[from] crate::error::Error),
    /// One of gradcomp's CSVs (e2e.csv, micro_compress.csv) is missing, malformed or
    /// lacks a column ([`crate::record::CsvFile`]).
    #[error(transparent)]
    Csv(#[from] crate::record::ReadError),
}

impl SimError {
    /// Process exit code, as for [`crate::Error::exit_code`]: 1 for a failed write, 2 for
    /// bad input (flags, input files, an output directory that cannot be created).
    pub fn exit_code(&self) -> u8 {
        match self {
            SimError::Write { .. } => crate::error::EXIT_FAILURE,
            SimError::Record(e) => e.exit_code(),
            SimError::Input(_)
            | SimError::Method { .. }
            | SimError::Net(_)
            | SimError::Read { .. }
            | SimError::Csv(_) => crate::error::EXIT_USAGE,
        }
    }
}

pub type Result<T> = std::result::Result<T, SimError>;

/// The model side of a case: tensors (registration order) and their compute times.
#[derive(Clone, Debug)]
pub struct SimWorkload {
    pub model: String,
    pub tensors: Vec<TensorSpec>,
    /// Backward time per tensor, registration order (s).
    pub bwd_s: Vec<f64>,
    pub fwd_s: f64,
    pub batch: usize,
    /// Compute-model label (`v100`, `profile`).
    pub device: String,
}

impl SimWorkload {
    /// A zoo model with a compute model (the same numbers `gradcomp e2e` sleeps).
    pub fn zoo(
        model: &str,
        batch: Option<usize>,
        compute: &crate::models::ComputeModel,
        device: &str,
    ) -> Result<SimWorkload> {
        let m = crate::models::build(model).map_err(|e| SimError::Input(e.to_string()))?;
        let batch = batch.unwrap_or(m.default_batch);
        let tensors = TensorSpec::of_model(&m);
        Ok(SimWorkload {
            model: model.to_string(),
            tensors,
            bwd_s: compute.backward_times_s(&m, batch),
            fwd_s: compute.forward_time_s(&m, batch),
            batch,
            device: device.to_string(),
        })
    }
}

/// One simulated case (the e2e axes).
#[derive(Clone, Debug)]
pub struct SimCase {
    pub workload: SimWorkload,
    /// e2e method name as in e2e.csv (`topk`, `omgs`, `sketch-fusion`, ...).
    pub method: String,
    /// The compressor that runs (`topk` for `omgs`).
    pub base_method: String,
    /// Compress each bucket as one merged tensor (omgs, sketch-fusion).
    pub merge: bool,
    pub fusion: Fusion,
    pub pipelining: bool,
    pub collective: CollectiveMode,
    pub world_size: usize,
    pub params: MethodParams,
    pub seed: u64,
    /// Run these buckets (backward positions, one plan for every phase) instead of the
    /// fusion's: replays a plan a real run chose (tests compare the engine's schedule).
    pub fixed_plan: Option<Vec<Vec<usize>>>,
    /// Where compression is charged: the host model, or the device stream at
    /// [`CostModel::device`]'s costs.
    pub compress_on: CompressOn,
    /// A planner fusion may fall back to a simple plan its model rates faster
    /// ([`planner::choose`]); `false` runs the planner's own plan ([`planner::own`]), as
    /// its paper did.
    pub planner_fallback: bool,
}

impl SimCase {
    /// A case for an e2e method name; `omgs` / `sketch-fusion` set their compressor,
    /// merging and planner (as config/e2e.rs does for e2e).
    pub fn new(
        workload: SimWorkload,
        method: &str,
        fusion: Fusion,
        pipelining: bool,
        collective: CollectiveMode,
        world_size: usize,
        params: MethodParams,
    ) -> SimCase {
        let (base, merge, fusion) = match crate::config::implied_fusion(method) {
            Some(f) => (crate::config::base_method(method).to_string(), true, f),
            None => (method.to_string(), false, fusion),
        };
        SimCase {
            workload,
            method: method.to_string(),
            base_method: base,
            merge,
            fusion,
            pipelining,
            collective,
            world_size,
            // The density the method runs at (a density not given is its own default).
            params: params.for_method(method),
            seed: 1,
            fixed_plan: None,
            compress_on: CompressOn::Host,
            planner_fallback: true,
        }
    }
}

/// One simulated iteration (s), the e2e.csv measurements.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimResult {
    pub fwd_s: f64,
    pub bwd_s: f64,
    pub pack_s: f64,
    pub compress_s: f64,
    pub comm_s: f64,
    pub decompress_s: f64,
    pub exposed_s: f64,
    pub bwd_sync_s: f64,
    pub iter_s: f64,
    /// What compression and decompression cost on the host (the host cost model), in
    /// either mode: with `compress_on = device` the device's times are in `compress_s`
    /// and `decompress_s`.
    pub host_compress_s: f64,
    pub host_decompress_s: f64,
    /// Bytes one worker sends per iteration (all buckets and rounds, trailers included).
    pub wire_bytes: u64,
    pub buckets: usize,
    /// The collective that carried the messages (`allreduce`, `allgather`, `ring`, `ps`).
    pub collective: &'static str,
    pub aggregation: &'static str,
    /// Planner fusions: the planner's own timeline prediction (backward start to end).
    pub planned_s: Option<f64>,
    /// Planner fusions: the plan that ran ([`planner::plan_source_of`]).
    pub plan_source: Option<String>,
    /// Bucket plan: backward positions per bucket.
    pub plan: Vec<Vec<usize>>,
    /// The operations of one iteration per phase, each with the wire it priced.
    pub executed: Vec<Vec<Executed>>,
}

impl SimResult {
    /// The mean of the phases' iterations (times, wire bytes, bucket count rounded).
    fn mean(rs: &[SimResult]) -> SimResult {
        let k = rs.len().max(1) as f64;
        let avg = |f: fn(&SimResult) -> f64| rs.iter().map(f).sum::<f64>() / k;
        SimResult {
            fwd_s: avg(|r| r.fwd_s),
            bwd_s: avg(|r| r.bwd_s),
            pack_s: avg(|r| r.pack_s),
            compress_s: avg(|r| r.compress_s),
            comm_s: avg(|r| r.comm_s),
            decompress_s: avg(|r| r.decompress_s),
            exposed_s: avg(|r| r.exposed_s),
            bwd_sync_s: avg(|r| r.bwd_sync_s),
            iter_s: avg(|r| r.iter_s),
            host_compress_s: avg(|r| r.host_compress_s),
            host_decompress_s: avg(|r| r.host_decompress_s),
            wire_bytes: avg(|r| r.wire_bytes as f64).round() as u64,
            buckets: avg(|r| r.buckets as f64).round() as usize,
            ..SimResult::default()
        }
    }
}

pub(crate) fn merr(case: &SimCase, e: impl std::fmt::Display) -> SimError {
    SimError::Method {
        method: case.method.clone(),
        msg: e.to_string(),
    }
}

/// The networks a case's exchanges are priced on.
#[derive(Clone, Copy)]
pub struct Nets<'a> {
    /// Every collective, its reduction arithmetic at the host's `gamma` or, with device
    /// compression, at the device's (NCCL reduces on the GPU).
    pub collectives: &'a dyn CollectiveCost,
    /// A method's own ring ([`ExchangeOp::Ring`]: Marsit's merges). With device
    /// compression the method's decompress kernels price the merges (docs/methods.md,
    /// "Device kernels"), so this network carries no reduction term.
    pub method_ring: &'a dyn CollectiveCost,
}

impl<'a> Nets<'a> {
    /// One network for every exchange (host compression).
    pub fn same(net: &'a dyn CollectiveCost) -> Nets<'a> {
        Nets {
            collectives: net,
            method_ring: net,
        }
    }
}

/// One collective of a bucket exchange as the simulator prices it.
#[derive(Clone, Copy)]
pub struct Collective<'a> {
    /// The network operation, with `m` bytes per rank.
    pub op: Op,
    pub m_bytes: f64,
    /// Its time on the network (s), reduction arithmetic outside the collective excluded.
    pub net_s: f64,
    /// Local arithmetic after it (the summed all-gather's reduction, s).
    pub local_s: f64,
    /// The network that priced it.
    pub net: &'a dyn CollectiveCost,
}

impl Collective<'_> {
    /// The same collective's cost for a 4-byte message among `n` (the floor of
    /// [`credit::Credit::exchange`]).
    pub fn floor_s(&self, n: usize) -> f64 {
        self.net.time_s(self.op, n, 4.0)
    }
}

/// The collectives of one bucket exchange of `w` (words per rank) among `n` workers: the
/// [`ExchangePlan`] that comm/exchange.rs runs for it.
pub fn exchange_collectives<'a>(
    nets: Nets<'a>,
    mode: CollectiveMode,
    n: usize,
    w: WireLen,
    gather_used: bool,
) -> impl Iterator<Item = Collective<'a>> + 'a {
    let plan = ExchangePlan::new(mode, w, gather_used);
    (0..plan.ops().len()).map(move |i| {
        let (xop, words) = plan.ops()[i];
        let m = 4.0 * words as f64;
        let (net, op, local_s) = match xop {
            ExchangeOp::SumAllReduce => (nets.collectives, Op::AllReduce, 0.0),
            ExchangeOp::SumAllGather => (
                nets.collectives,
                Op::AllGather,
                nets.collectives.reduce_s((n.max(1) - 1) as f64 * m),
            ),
            ExchangeOp::SumReduceBcast => (nets.collectives, Op::PsReduceBcast, 0.0),
            ExchangeOp::SumRing => (nets.collectives, Op::Ring, 0.0),
            ExchangeOp::Ring => (nets.method_ring, Op::Ring, 0.0),
            ExchangeOp::GatherLengths | ExchangeOp::Gather => {
                (nets.collectives, Op::AllGather, 0.0)
            }
            ExchangeOp::GatherBcast => (nets.collectives, Op::PsGatherBcast, 0.0),
        };
        Collective {
            op,
            m_bytes: m,
            net_s: net.time_s(op, n, m),
            local_s,
            net,
        }
    })
}

/// Cost of one bucket exchange of `w` (words per rank) among `n` workers: the
/// collectives of the [`ExchangePlan`] that comm/exchange.rs runs for it, on an idle
/// network (no shaper credit).
pub fn exchange_s(
    nets: Nets,
    mode: CollectiveMode,
    n: usize,
    w: WireLen,
    gather_used: bool,
) -> f64 {
    exchange_collectives(nets, mode, n, w, gather_used)
        .map(|c| c.net_s + c.local_s)
        .sum()
}

/// Simulate one iteration of `case` under `costs` (see the module docs).
pub fn simulate(case: &SimCase, costs: &CostModel) -> Result<SimResult> {
    simulate_with(case, costs, &mut WireCache::default())
}

/// [`simulate`] with a [`WireCache`] shared by the cases of a sweep (the same result).
pub fn simulate_with(
    case: &SimCase,
    costs: &CostModel,
    wires: &mut WireCache,
) -> Result<SimResult> {
    let wl = &case.workload;
    let m = wl.tensors.len();
    if m == 0 || wl.bwd_s.len() != m {
        return Err(SimError::Input(format!(
            "{} tensors but {} backward times",
            m,
            wl.bwd_s.len()
        )));
    }
    let mut oracle = WireOracle::new(case, wires)?;
    let rounds = oracle.rounds;
    let agg = oracle.aggregation;
    case.collective
        .supports(agg)
        .map_err(|e| merr(case, format!("collective {}: {e}", case.collective.name())))?;
    let device = case_device(case, costs)?;
    let dev_net = device.map(|d| costs.network.with_gamma(d.spec.reduce_s_per_byte()));
    let ring_net = device.map(|_| costs.network.with_gamma(0.0));
    let nets = Nets {
        collectives: dev_net.as_deref().unwrap_or(costs.network.as_ref()),
        method_ring: ring_net.as_deref().unwrap_or(costs.network.as_ref()),
    };

    let bwd_order: Vec<usize> = (0..m).rev().collect();
    let pos = Positions::new(case, device, &mut oracle, &bwd_order)?;
    let mut plan_source = None;
    let (mut phase_groups, planned_s) = match (&case.fixed_plan, case.fusion) {
        (Some(plan), _) => (vec![plan.clone()], None),
        (None, Fusion::Planner(kind)) => {
            let planner_costs = PlannerCosts::new(case, costs, nets, device, &pos, rounds, agg);
            let c = planner_costs.choice(kind, &pos);
            plan_source = Some(planner::plan_source_of(kind, &c));
            (vec![c.groups], Some(c.predicted_s))
        }
        (None, f) => {
            let shapes: Vec<(usize, usize)> = bwd_order
                .iter()
                .map(|&t| (wl.tensors[t].rows, wl.tensors[t].cols))
                .collect();
            let sizing = registry::fusion_sizing(&case.base_method, &case.params, &shapes);
            (plan::phase_buckets(&sizing, f), None)
        }
    };

    // Each phase of the step cycle on its own virtual clock; the result is their mean
    // (e2e alternates them too).
    let phases = oracle.phases;
    let mut per_phase = Vec::with_capacity(phases);
    for phase in 0..phases {
        let groups = &phase_groups[phase % phase_groups.len()];
        let bucket_units = pos.bucket_units(case, device, &mut oracle, groups, phase)?;
        per_phase.push(clock::steady_state(costs.shaper, |credit| {
            simulate_clock(
                case,
                costs,
                nets,
                device,
                &pos.bwd_times,
                groups,
                &bucket_units,
                rounds,
                credit,
            )
        }));
    }
    let mut r = SimResult::mean(&per_phase);
    r.executed = per_phase.into_iter().flat_map(|p| p.executed).collect();
    r.aggregation = agg.name();
    r.collective = case.collective.effective(agg);
    r.planned_s = planned_s;
    r.plan_source = plan_source;
    r.plan = phase_groups.swap_remove(0);
    Ok(r)
}

/// The device cost model of a case that compresses on the device (`None` on the host);
/// an error naming the flag when the costs have none.
fn case_device<'c>(case: &SimCase, costs: &'c CostModel) -> Result<Option<&'c DeviceCosts>> {
    match case.compress_on {
        CompressOn::Host => Ok(None),
        CompressOn::Device => Ok(Some(costs.device.as_ref().ok_or_else(|| {
            merr(
                case,
                "compress_on = device needs a device cost model: give --compress-device \
                 (v100, rtx2080ti, a100, h100, h200, p102-100) or a --compute preset that is one",
            )
        })?)),
    }
}

/// The workload's tensors at their backward positions (backward order): backward times,
/// sizes, and their unmerged wires per phase, selected elements and, with device
/// compression, device times: what the planners (phase 0) and the plain schedule use.
struct Positions {
    bwd_times: Vec<f64>,
    numel: Vec<usize>,
    wire: Vec<PhaseWire>,
    /// Per position, phase and round: the unit's device compress and decompress times
    /// ([`unit_device_s`]); empty on the host.
    dev: Vec<Vec<Vec<[f64; 2]>>>,
    selected: Vec<usize>,
}

impl Positions {
    fn new(
        case: &SimCase,
        device: Option<&DeviceCosts>,
        oracle: &mut WireOracle,
        bwd_order: &[usize],
    ) -> Result<Positions> {
        let wl = &case.workload;
        let m = bwd_order.len();
        let mut pos = Positions {
            bwd_times: bwd_order.iter().map(|&t| wl.bwd_s[t]).collect(),
            numel: bwd_order.iter().map(|&t| wl.tensors[t].numel()).collect(),
            wire: Vec::with_capacity(m),
            dev: Vec::with_capacity(m),
            selected: Vec::with_capacity(m),
        };
        for &t in bwd_order {
            let ts = &wl.tensors[t];
            pos.wire.push(oracle.get(ts.rows, ts.cols)?);
            pos.selected.push(oracle.selected(ts.rows, ts.cols)?);
            if let Some(d) = device {
                let shape = (ts.rows, ts.cols);
                pos.dev.push(unit_device_s(
                    d,
                    case,
                    shape,
                    &oracle.kernels(ts.rows, ts.cols)?,
                ));
            }
        }
        Ok(pos)
    }

    /// The units of each bucket of `groups` in `phase`: one per position, or with merged
    /// compression one per bucket (its positions as one 1-D tensor).
    fn bucket_units(
        &self,
        case: &SimCase,
        device: Option<&DeviceCosts>,
        oracle: &mut WireOracle,
        groups: &[Vec<usize>],
        phase: usize,
    ) -> Result<Vec<Vec<Unit>>> {
        let mut bucket_units: Vec<Vec<Unit>> = Vec::with_capacity(groups.len());
        for g in groups {
            if case.merge {
                let e: usize = g.iter().map(|&p| self.numel[p]).sum();
                let dev_s = match device {
                    Some(d) => {
                        unit_device_s(d, case, (1, e), &oracle.kernels(1, e)?).swap_remove(phase)
                    }
                    None => Vec::new(),
                };
                bucket_units.push(vec![Unit {
                    elems: e,
                    selected: oracle.selected(1, e)?,
                    wire: oracle.get(1, e)?[phase].clone(),
                    dev_s,
                }]);
            } else {
                bucket_units.push(
                    g.iter()
                        .map(|&p| Unit {
                            elems: self.numel[p],
                            selected: self.selected[p],
                            wire: self.wire[p][phase].clone(),
                            dev_s: self.dev.get(p).map_or_else(Vec::new, |d| d[phase].clone()),
                        })
                        .collect(),
                );
            }
        }
        Ok(bucket_units)
    }
}

/// A planner fusion's costs, computed once per case as the engine's plan_with_costs
/// does ([`PlannerCosts::choice`]).
struct PlannerCosts<'a> {
    case: &'a SimCase,
    nets: Nets<'a>,
    device: Option<&'a DeviceCosts>,
    agg: Aggregation,
    /// Per round: wire bytes per element over the model (phase 0).
    bpe: Vec<f64>,
    /// Whether every position's gather section is exact (phase 0).
    exact: bool,
    /// The host's CPU share, inverted (work stretches by it).
    cpu: f64,
    pack_s_per_byte: f64,
    gather_words_per_elem: f64,
    mc: MethodCosts,
    /// With device compression, the line fitted to the positions' device times (phase
    /// 0, every round's compress plus decompress) over their sizes.
    dev_line: Option<CompressCost>,
}

impl<'a> PlannerCosts<'a> {
    fn new(
        case: &'a SimCase,
        costs: &CostModel,
        nets: Nets<'a>,
        device: Option<&'a DeviceCosts>,
        pos: &Positions,
        rounds: usize,
        agg: Aggregation,
    ) -> PlannerCosts<'a> {
        let elems: usize = pos.numel.iter().sum();
        let bpe: Vec<f64> = (0..rounds)
            .map(|r| {
                pos.wire.iter().map(|w| w[0][r].bytes()).sum::<usize>() as f64 / elems.max(1) as f64
            })
            .collect();
        let exact = pos.wire.iter().all(|w| w[0].iter().all(|l| l.gather_exact));
        let gather_words_per_elem = pos
            .wire
            .iter()
            .map(|w| w[0].iter().map(|l| l.gather_u32).sum::<usize>())
            .sum::<usize>() as f64
            / elems.max(1) as f64;
        let dev_line = device.map(|_| {
            let points: Vec<(f64, f64)> = pos
                .dev
                .iter()
                .zip(&pos.numel)
                .map(|(d, &e)| (e as f64, d[0].iter().map(|s| s[0] + s[1]).sum()))
                .collect();
            CompressCost::fit(&points).map_or(CompressCost::default(), |(c, _)| c)
        });
        PlannerCosts {
            case,
            nets,
            device,
            agg,
            bpe,
            exact,
            cpu: 1.0 / costs.host.cpu_share,
            pack_s_per_byte: costs.pack_s_per_byte,
            gather_words_per_elem,
            mc: costs.method(&case.base_method),
            dev_line,
        }
    }

    /// The plan of planner `kind` on these costs, over the backward as the planner sees
    /// it: [`planner::choose`], or with `--planner-fallback off` [`planner::own`].
    fn choice(&self, kind: plan::PlannerKind, pos: &Positions) -> planner::Choice {
        let t_c = |e: usize| self.comm_s(e);
        let t_s = |e: usize, k: usize| self.compress_s(e, k);
        let t_b = planner::planning_backward(&pos.bwd_times, self.case.pipelining);
        if self.case.planner_fallback {
            planner::choose(kind, &t_b, &pos.numel, &t_s, &t_c)
        } else {
            planner::own(kind, &t_b, &pos.numel, &t_s, &t_c)
        }
    }

    /// Communication of `e` elements: the network's cost of their wire bytes per round.
    fn comm_s(&self, e: usize) -> f64 {
        let n = self.case.world_size.max(1);
        let gather_used = self.agg == Aggregation::AllGather;
        self.bpe
            .iter()
            .map(|b| {
                let words = (e as f64 * b / 4.0).round() as usize;
                let w = WireLen::of(self.agg, words, self.exact);
                exchange_s(self.nets, self.case.collective, n, w, gather_used)
            })
            .sum()
    }

    /// Work besides communication of `e` elements in `k` tensors, as the engine calibrates
    /// it: every round's compress, feedback and decompress (of n workers' pieces), one
    /// call per tensor (one per group when compression is merged), at the host's CPU
    /// share; on the device, the line fitted to the tensors' device times.
    fn compress_s(&self, e: usize, k: usize) -> f64 {
        let merge = self.case.merge;
        let n = self.case.world_size.max(1);
        let (cpu, mc) = (self.cpu, &self.mc);
        let calls = if merge { 1.0 } else { k as f64 };
        if let Some(l) = self.dev_line {
            return calls * l.fixed_s + e as f64 * l.per_element_s + self.copies_s(e, k);
        }
        let words = (e as f64 * self.gather_words_per_elem).round() as usize;
        self.copies_s(e, k)
            + cpu
                * (calls * (mc.compress.fixed_s + mc.feedback.fixed_s + mc.decompress.fixed_s)
                    + e as f64
                        * (mc.compress.per_element_s
                            + mc.feedback.per_element_s
                            + mc.decompress.per_element_s * gather_scale(n, e, words)))
    }

    /// Merged compression copies the group into one tensor and back (Op::Pack and
    /// Op::Unpack, priced as the clock prices them); the engine's calibration times those
    /// copies too (engine/calibrate.rs), so the simulator's planner sees them.
    fn copies_s(&self, e: usize, k: usize) -> f64 {
        if !self.case.merge {
            return 0.0;
        }
        match self.device {
            Some(d) => 2.0 * d.copy_s(4.0 * e as f64, k),
            None => 2.0 * self.cpu * self.pack_s_per_byte * 4.0 * e as f64,
        }
    }
}

/// Decompress work of a gathered unit relative to one worker's (micro-compress measures
/// one): the output pass once, plus per further worker the elements its piece can touch,
/// at most one per wire bit, `min(numel, 32 * words)`. Sign and quantised pieces touch
/// every element (factor `n`), sparse top-k pieces a few (factor near 1).
fn gather_scale(n: usize, numel: usize, gather_words: usize) -> f64 {
    if gather_words == 0 || numel == 0 {
        return 1.0;
    }
    let touched = (32.0 * gather_words as f64).min(numel as f64) / numel as f64;
    1.0 + (n.max(1) - 1) as f64 * touched
}

#[cfg(test)]
mod tests;
