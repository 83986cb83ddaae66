//! What-if simulator (docs/architecture.md, "The simulator"): the e2e engine's schedule
//! (engine/mod.rs) replayed on a virtual clock, with cost models instead of real
//! compute, compression and communication. Pure code, no MPI.
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

pub mod fit;
pub mod host;
pub mod network;
pub mod run;

use crate::comm::exchange::{CollectiveMode, ExchangeOp, ExchangePlan};
use crate::comm::netmodel::CompressCost;
use crate::compress::{registry, Aggregation, MethodParams, WireLen, WorkerCtx};
use crate::engine::TensorSpec;
use crate::schedule::plan::{self, Fusion};
use crate::schedule::{self, planner, Executed, Op as SchedOp};
use network::{CollectiveCost, Op};
use std::collections::HashMap;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SimError {
    #[error("simulate: {0}")]
    Input(String),
    #[error("simulate: method {method}: {msg}")]
    Method { method: String, msg: String },
    #[error(transparent)]
    Net(#[from] crate::comm::netmodel::NetModelError),
    /// An input file (`--fits`, `--compare`, a network model) is missing or unreadable.
    #[error("cannot read {path}: {msg}")]
    Read { path: String, msg: String },
    /// Writing a result file failed mid-run (a full disk): a failed run, not bad input.
    #[error("cannot write {path}: {msg}")]
    Write { path: String, msg: String },
}

impl SimError {
    /// Process exit code, as for [`crate::Error::exit_code`]: 1 for a failed write, 2 for
    /// bad input (flags, input files, an output directory that cannot be created).
    pub fn exit_code(&self) -> u8 {
        match self {
            SimError::Write { .. } => crate::error::EXIT_FAILURE,
            SimError::Input(_)
            | SimError::Method { .. }
            | SimError::Net(_)
            | SimError::Read { .. } => crate::error::EXIT_USAGE,
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
}

impl SimCase {
    /// A case for an e2e method name; `omgs` / `sketch-fusion` set their compressor,
    /// merging and planner (as config.rs does for e2e).
    pub fn new(
        workload: SimWorkload,
        method: &str,
        fusion: Fusion,
        pipelining: bool,
        collective: CollectiveMode,
        world_size: usize,
        params: MethodParams,
    ) -> SimCase {
        let alias = crate::config::E2E_METHODS
            .iter()
            .find(|(a, _, _)| *a == method);
        let (base, merge, fusion) = match alias {
            Some((_, b, k)) => (b.to_string(), true, Fusion::Planner(*k)),
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
            params,
            seed: 1,
            fixed_plan: None,
        }
    }
}

/// Cost of one method's phases, each for all rounds of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct MethodCosts {
    pub compress: CompressCost,
    pub feedback: CompressCost,
    pub decompress: CompressCost,
}

impl MethodCosts {
    /// The default costs of `method`: the committed reference fit
    /// ([`REFERENCE_COSTS`], written by scripts/reference_costs.sh from a documented run;
    /// docs/performance.md, "Reference compression costs"). `None` for a method the file
    /// lacks (a unit test keeps every registry method in it).
    pub fn reference(method: &str) -> Option<MethodCosts> {
        let mut found = false;
        let mut m = MethodCosts::default();
        for line in REFERENCE_COSTS
            .lines()
            .filter(|l| !l.starts_with('#'))
            .skip(1)
        {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() != 4 || f[0] != method {
                continue;
            }
            let (fixed_s, per_element_s) = (f[2].parse().ok()?, f[3].parse().ok()?);
            let c = CompressCost {
                per_element_s,
                fixed_s,
            };
            match f[1] {
                "compress" => m.compress = c,
                "feedback" => m.feedback = c,
                "decompress" => m.decompress = c,
                _ => continue,
            }
            found = true;
        }
        found.then_some(m)
    }
}

/// The simulator's default compression costs: compression rows of `gradcomp fit` over a
/// reference run, with their provenance on the first line (`# source: ...`).
pub const REFERENCE_COSTS: &str = include_str!("reference_costs.csv");

/// The provenance line of [`REFERENCE_COSTS`] (machine, date, revision, command).
pub fn reference_source() -> &'static str {
    REFERENCE_COSTS
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# source: "))
        .unwrap_or("reference fit (no provenance line)")
}

/// Every cost the simulator needs.
pub struct CostModel {
    pub network: Box<dyn CollectiveCost>,
    /// Per (base) method; missing methods use [`MethodCosts::reference`].
    pub methods: HashMap<String, MethodCosts>,
    /// Copy cost of pack/split per byte (s/B); default 0.1 ns/B (10 GB/s memcpy).
    pub pack_s_per_byte: f64,
    /// Fixed cost per unit append / split (s); default 0.2 us.
    pub pack_fixed_s: f64,
    /// Where the compression costs come from (the reference fit's provenance, `fitted DIR/micro_compress.csv`).
    pub compress_source: String,
    /// CPU share and host latencies ([`host::HostModel`]; ideal unless calibrated).
    pub host: host::HostModel,
}

impl CostModel {
    /// A network with the built-in `cpu` compression defaults.
    pub fn with_network(network: Box<dyn CollectiveCost>) -> CostModel {
        CostModel {
            network,
            methods: HashMap::new(),
            pack_s_per_byte: 0.1e-9,
            pack_fixed_s: 0.2e-6,
            compress_source: reference_source().into(),
            host: host::HostModel::default(),
        }
    }

    /// A network preset name (`10gbe`, ...) with the `cpu` defaults.
    pub fn preset(name: &str) -> Result<CostModel> {
        let a = network::Analytic::preset(name).ok_or_else(|| {
            SimError::Input(format!(
                "unknown network preset '{name}'; allowed: {}",
                network::PRESETS
                    .iter()
                    .map(|p| p.0)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        Ok(CostModel::with_network(Box::new(a)))
    }

    /// Compression costs fitted by [`fit::fit_results`] (replace the defaults).
    pub fn with_compress_fits(mut self, report: &fit::FitReport) -> CostModel {
        for (m, c) in report.method_costs() {
            self.methods.insert(m, c);
        }
        self.compress_source = format!(
            "fitted {}",
            report
                .compress_source
                .as_deref()
                .unwrap_or("micro_compress.csv")
        );
        self
    }

    /// Costs of method `m`: fitted, else the reference fit, else S-SGD's reference
    /// costs (never reached for a registry method; tested).
    pub fn method(&self, m: &str) -> MethodCosts {
        self.methods
            .get(m)
            .copied()
            .or_else(|| MethodCosts::reference(m))
            .or_else(|| MethodCosts::reference("ssgd"))
            .unwrap_or_default()
    }

    /// `network; compress` for the CSV's `cost_source`.
    pub fn describe(&self) -> String {
        format!(
            "network {}; compression {}; {}",
            self.network.describe(),
            self.compress_source,
            self.host.describe()
        )
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
    /// Bytes one worker sends per iteration (all buckets and rounds, trailers included).
    pub wire_bytes: u64,
    pub buckets: usize,
    /// The collective that carried the messages (`allreduce`, `allgather`, `ring`, `ps`).
    pub collective: &'static str,
    pub aggregation: &'static str,
    /// Planner fusions: the planner's own timeline prediction (backward start to end).
    pub planned_s: Option<f64>,
    /// Planner fusions: the plan that ran (engine::plan_source_of).
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
            wire_bytes: avg(|r| r.wire_bytes as f64).round() as u64,
            buckets: avg(|r| r.buckets as f64).round() as usize,
            ..SimResult::default()
        }
    }
}

/// 1-row tensors longer than this (merged buckets) get their wire capacity by affine
/// extrapolation from exact probes at `LARGE_1D / 2` and `LARGE_1D` elements instead of
/// registering them (registration allocates and touches the method's per-element state,
/// about a second for BERT-Large's 340 M elements). Every method's capacity is affine
/// in the length up to rounding (`ceil(density d)` values, `ceil(d / 32)` sign words,
/// fixed headers), so the error is a few words (a unit test checks 1e-4 relative).
pub const LARGE_1D: usize = 1 << 22;

/// Wire words per round of one compression unit.
type UnitWire = Vec<WireLen>;
/// [`UnitWire`] per phase of the method's step cycle (`Compressor::phases`).
type PhaseWire = Vec<UnitWire>;

/// What a registered shape's wire depends on: the method, its parameters (their `Debug`
/// text: every field, floats exactly), the world size and seed of its [`WorkerCtx`], and
/// the shape.
type WireKey = (String, String, usize, u64, usize, usize);

/// Wire capacities of the shapes registered so far, shared by the cases of a sweep
/// ([`simulate_with`]): a case's wire for a shape is a function of its [`WireKey`], and
/// registering a shape allocates and touches the method's per-element state, which made
/// most of a large sweep's time (system time in page faults) when every case registered
/// every shape again.
#[derive(Debug, Default)]
pub struct WireCache {
    map: HashMap<WireKey, PhaseWire>,
}

/// Wire capacity per round of a `rows x cols` tensor for this method and world size,
/// registering the shape in a fresh compressor (so memory holds one tensor's state)
/// unless the [`WireCache`] already holds it.
struct WireOracle<'a, 'c> {
    case: &'a SimCase,
    cache: &'c mut WireCache,
    /// `WireKey` without the shape.
    key: (String, String, usize, u64),
    rounds: usize,
    phases: usize,
    aggregation: Aggregation,
}

impl<'a, 'c> WireOracle<'a, 'c> {
    fn new(case: &'a SimCase, cache: &'c mut WireCache) -> Result<WireOracle<'a, 'c>> {
        let ctx = ctx(case);
        let c = registry::build(&case.base_method, &case.params, ctx).map_err(|e| merr(case, e))?;
        Ok(WireOracle {
            case,
            cache,
            key: (
                case.base_method.clone(),
                format!("{:?}", case.params),
                ctx.world_size,
                ctx.seed,
            ),
            rounds: c.rounds(),
            phases: c.phases(),
            aggregation: c.aggregation(),
        })
    }

    fn get(&mut self, rows: usize, cols: usize) -> Result<PhaseWire> {
        if rows == 1 && cols > LARGE_1D {
            // Affine in the length between two exact probes (see [`LARGE_1D`]).
            let (d1, d2) = (LARGE_1D / 2, LARGE_1D);
            let (a, b) = (self.exact(1, d1)?, self.exact(1, d2)?);
            let x = (cols - d1) as f64 / (d2 - d1) as f64;
            let ext = |u: usize, v: usize| {
                (u as f64 + (v as f64 - u as f64) * x).round().max(0.0) as usize
            };
            return Ok(a
                .iter()
                .zip(&b)
                .map(|(a, b)| {
                    a.iter()
                        .zip(b)
                        .map(|(a, b)| WireLen {
                            sum_f32: ext(a.sum_f32, b.sum_f32),
                            gather_u32: ext(a.gather_u32, b.gather_u32),
                            ring_u32: ext(a.ring_u32, b.ring_u32),
                            gather_exact: a.gather_exact && b.gather_exact,
                        })
                        .collect()
                })
                .collect());
        }
        self.exact(rows, cols)
    }

    fn exact(&mut self, rows: usize, cols: usize) -> Result<PhaseWire> {
        let (method, params, n, seed) = &self.key;
        let key = (method.clone(), params.clone(), *n, *seed, rows, cols);
        if let Some(w) = self.cache.map.get(&key) {
            return Ok(w.clone());
        }
        let mut c = registry::build(&self.case.base_method, &self.case.params, ctx(self.case))
            .map_err(|e| merr(self.case, e))?;
        c.register(0, rows, cols).map_err(|e| merr(self.case, e))?;
        let w: PhaseWire = (0..self.phases)
            .map(|ph| (0..self.rounds).map(|r| c.phase_wire(0, r, ph)).collect())
            .collect();
        self.cache.map.insert(key, w.clone());
        Ok(w)
    }
}

fn ctx(case: &SimCase) -> WorkerCtx {
    WorkerCtx {
        rank: 0,
        world_size: case.world_size.max(1),
        seed: case.seed,
    }
}

fn merr(case: &SimCase, e: impl std::fmt::Display) -> SimError {
    SimError::Method {
        method: case.method.clone(),
        msg: e.to_string(),
    }
}

/// Cost of one bucket exchange of `w` (words per rank) among `n` workers: the
/// collectives of the [`ExchangePlan`] that comm/exchange.rs runs for it.
pub fn exchange_s(
    net: &dyn CollectiveCost,
    mode: CollectiveMode,
    n: usize,
    w: WireLen,
    gather_used: bool,
) -> f64 {
    ExchangePlan::new(mode, w, gather_used)
        .ops()
        .iter()
        .map(|&(op, words)| {
            let m = 4.0 * words as f64;
            match op {
                ExchangeOp::SumAllReduce => net.time_s(Op::AllReduce, n, m),
                ExchangeOp::SumAllGather => {
                    net.time_s(Op::AllGather, n, m) + net.reduce_s((n.max(1) - 1) as f64 * m)
                }
                ExchangeOp::SumReduceBcast => net.time_s(Op::PsReduceBcast, n, m),
                ExchangeOp::SumRing | ExchangeOp::Ring => net.time_s(Op::Ring, n, m),
                ExchangeOp::GatherLengths | ExchangeOp::Gather => net.time_s(Op::AllGather, n, m),
                ExchangeOp::GatherBcast => net.time_s(Op::PsGatherBcast, n, m),
            }
        })
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
    let n = case.world_size.max(1);
    let mut oracle = WireOracle::new(case, wires)?;
    let rounds = oracle.rounds;
    let agg = oracle.aggregation;
    case.collective
        .supports(agg)
        .map_err(|e| merr(case, format!("collective {}: {e}", case.collective.name())))?;
    let mc = costs.method(&case.base_method);
    let net = costs.network.as_ref();

    let bwd_order: Vec<usize> = (0..m).rev().collect();
    let bwd_times: Vec<f64> = bwd_order.iter().map(|&t| wl.bwd_s[t]).collect();
    let numel: Vec<usize> = bwd_order.iter().map(|&t| wl.tensors[t].numel()).collect();
    // Unmerged per-tensor wires (backward positions) per phase: the planners (phase 0)
    // and the plain schedule.
    let mut pos_wire: Vec<PhaseWire> = Vec::with_capacity(m);
    for &t in &bwd_order {
        let ts = &wl.tensors[t];
        pos_wire.push(oracle.get(ts.rows, ts.cols)?);
    }
    let mut plan_source = None;
    let (mut phase_groups, planned_s) = match case.fusion {
        _ if case.fixed_plan.is_some() => (vec![case.fixed_plan.clone().unwrap_or_default()], None),
        Fusion::Planner(kind) => {
            // Planner costs as the engine's plan_with_costs: wire bytes per element over
            // the model, the network's cost of that message per round, compress+feedback
            // of round 0.
            let elems: usize = numel.iter().sum();
            let bpe: Vec<f64> = (0..rounds)
                .map(|r| {
                    pos_wire.iter().map(|w| w[0][r].bytes()).sum::<usize>() as f64
                        / elems.max(1) as f64
                })
                .collect();
            let mode = case.collective;
            let exact = pos_wire.iter().all(|w| w[0].iter().all(|l| l.gather_exact));
            let t_c = |e: usize| -> f64 {
                bpe.iter()
                    .map(|b| {
                        let words = (e as f64 * b / 4.0).round() as usize;
                        let w = match agg {
                            Aggregation::AllReduce => WireLen {
                                sum_f32: words,
                                ..WireLen::default()
                            },
                            Aggregation::AllGather => WireLen {
                                gather_u32: words,
                                gather_exact: exact,
                                ..WireLen::default()
                            },
                            Aggregation::Ring => WireLen {
                                ring_u32: words,
                                ..WireLen::default()
                            },
                        };
                        exchange_s(net, mode, n, w, agg == Aggregation::AllGather)
                    })
                    .sum()
            };
            // Work besides communication, as the engine calibrates it: every round's
            // compress, feedback and decompress (of n workers' pieces), one call per
            // tensor (one per group when compression is merged), at the host's CPU share.
            let cpu = 1.0 / costs.host.cpu_share;
            let gather_words_per_elem = pos_wire
                .iter()
                .map(|w| w[0].iter().map(|l| l.gather_u32).sum::<usize>())
                .sum::<usize>() as f64
                / elems.max(1) as f64;
            let merge = case.merge;
            let t_s = |e: usize, k: usize| {
                let calls = if merge { 1.0 } else { k as f64 };
                let words = (e as f64 * gather_words_per_elem).round() as usize;
                cpu * (calls * (mc.compress.fixed_s + mc.feedback.fixed_s + mc.decompress.fixed_s)
                    + e as f64
                        * (mc.compress.per_element_s
                            + mc.feedback.per_element_s
                            + mc.decompress.per_element_s * gather_scale(n, e, words)))
            };
            let c = planner::choose(kind, &bwd_times, &numel, &t_s, &t_c);
            plan_source = Some(crate::engine::plan_source_of(kind, &c));
            (vec![c.groups], Some(c.predicted_s))
        }
        f => {
            let shapes: Vec<(usize, usize)> = bwd_order
                .iter()
                .map(|&t| (wl.tensors[t].rows, wl.tensors[t].cols))
                .collect();
            let sizing = registry::fusion_sizing(&case.base_method, &case.params, &shapes);
            (plan::phase_buckets(&sizing, f), None)
        }
    };

    // Each phase of the step cycle on its own virtual clock; the result is their mean
    // (e2e alternates them too). Units per bucket: (elements, wire per phase and round).
    let phases = oracle.phases;
    let mut per_phase = Vec::with_capacity(phases);
    for phase in 0..phases {
        let groups = &phase_groups[phase % phase_groups.len()];
        let mut bucket_units: Vec<Vec<(usize, UnitWire)>> = Vec::with_capacity(groups.len());
        for g in groups {
            if case.merge {
                let e: usize = g.iter().map(|&p| numel[p]).sum();
                bucket_units.push(vec![(e, oracle.get(1, e)?[phase].clone())]);
            } else {
                bucket_units.push(
                    g.iter()
                        .map(|&p| (numel[p], pos_wire[p][phase].clone()))
                        .collect(),
                );
            }
        }
        per_phase.push(simulate_clock(
            case,
            costs,
            &bwd_times,
            &numel,
            groups,
            &bucket_units,
            rounds,
        ));
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

/// One iteration of `groups` (positions in backward order) with their units' wires on
/// the virtual clock ([`simulate`]): the operations of [`schedule::iteration`], the list
/// the engine runs, each charged by the cost model.
#[allow(clippy::too_many_arguments)]
fn simulate_clock(
    case: &SimCase,
    costs: &CostModel,
    bwd_times: &[f64],
    numel: &[usize],
    groups: &[Vec<usize>],
    bucket_units: &[Vec<(usize, UnitWire)>],
    rounds: usize,
) -> SimResult {
    let wl = &case.workload;
    let m = bwd_times.len();
    let n = case.world_size.max(1);
    let mc = costs.method(&case.base_method);
    let net = costs.network.as_ref();
    let per_round = |c: CompressCost, e: usize| c.time_s(e) / rounds as f64;
    let gather_used = bucket_units
        .iter()
        .flatten()
        .any(|(_, w)| w.iter().any(|l| l.gather_u32 > 0));

    // Virtual clock. Host effects (host.rs): the device starts `start_s` late, CPU
    // phases run at `cpu_share` of a core, a bucket's first exchange waits `sync_s` more,
    // and the communication thread's work runs `bwd_slowdown` times slower while
    // backward still runs.
    let host = &costs.host;
    let cpu = 1.0 / host.cpu_share;
    let fwd_end = host.start_s + wl.fwd_s;
    let mut ready = Vec::with_capacity(m);
    let mut acc = fwd_end;
    for &b in bwd_times {
        acc += b;
        ready.push(acc);
    }
    let bwd_end = acc;
    let mut r = SimResult {
        fwd_s: fwd_end,
        bwd_s: bwd_end - fwd_end,
        buckets: groups.len(),
        ..SimResult::default()
    };
    let pb = costs.pack_s_per_byte;
    // Advance the clock by `work` (s at full speed) and add the elapsed time to `phase`.
    let run = |clock: &mut f64, phase: &mut f64, work: f64| {
        let t0 = *clock;
        *clock = advance(t0, work, bwd_end, host.bwd_slowdown);
        *phase += *clock - t0;
    };
    let buckets = schedule::buckets(groups, m, case.merge);
    let ops = schedule::iteration(&buckets, rounds, case.merge, case.pipelining, m);
    let bucket_elems = |bi: usize| -> usize { groups[bi].iter().map(|&p| numel[p]).sum() };
    let mut clock = 0.0;
    // Did the communication thread wait for the device before this bucket?
    let mut waited = false;
    let mut w = WireLen::default();
    let mut executed = Vec::with_capacity(ops.len());
    for op in ops {
        let mut wire = WireLen::default();
        match op {
            SchedOp::Wait { bucket, ready: k } => {
                let t = if k == 0 { fwd_end } else { ready[k - 1] };
                waited = if case.pipelining {
                    t > clock
                } else {
                    bucket == 0
                };
                clock = f64::max(clock, t);
            }
            SchedOp::Pack { bucket } | SchedOp::Unpack { bucket } => {
                let e = bucket_elems(bucket);
                run(&mut clock, &mut r.pack_s, cpu * pb * 4.0 * e as f64);
            }
            SchedOp::Compress {
                bucket,
                slot,
                round,
            } => {
                if slot == 0 {
                    w = WireLen {
                        gather_exact: true,
                        ..WireLen::default()
                    };
                }
                let (e, uw) = &bucket_units[bucket][slot];
                let l = uw[round];
                let c = cpu * (per_round(mc.compress, *e) + per_round(mc.feedback, *e));
                run(&mut clock, &mut r.compress_s, c);
                run(
                    &mut clock,
                    &mut r.pack_s,
                    cpu * (costs.pack_fixed_s + pb * l.bytes() as f64),
                );
                w = w.plus(l);
                wire = l;
            }
            SchedOp::Exchange { bucket, round } => {
                if gather_used {
                    // Trailer: one length word per unit.
                    w.gather_u32 += bucket_units[bucket].len();
                }
                let t = exchange_s(net, case.collective, n, w, gather_used)
                    + if waited && round == 0 {
                        host.sync_s
                    } else {
                        0.0
                    };
                run(&mut clock, &mut r.comm_s, t);
                r.wire_bytes += w.bytes() as u64;
                wire = w;
            }
            SchedOp::Decompress {
                bucket,
                slot,
                round,
            } => {
                let (e, uw) = &bucket_units[bucket][slot];
                let l = uw[round];
                // Splitting copies every worker's gathered piece of this unit.
                let split = cpu * (costs.pack_fixed_s + pb * 4.0 * (n * l.gather_u32) as f64);
                let d = cpu
                    * (mc.decompress.fixed_s
                        + mc.decompress.per_element_s
                            * *e as f64
                            * gather_scale(n, *e, l.gather_u32))
                    / rounds as f64;
                run(&mut clock, &mut r.pack_s, split);
                run(&mut clock, &mut r.decompress_s, d);
            }
        }
        executed.push(Executed { op, wire });
    }
    // The last bucket holds the last gradient, so the clock is past the end of backward.
    let t_end = clock;
    r.exposed_s = (t_end - bwd_end).max(0.0);
    r.bwd_sync_s = t_end - fwd_end;
    r.iter_s = t_end;
    r.executed = vec![executed];
    r
}

/// The clock after `work` seconds of full-speed work started at `clock`, running
/// `slowdown` times slower until `bwd_end` (host.rs, `bwd_slowdown`).
fn advance(clock: f64, work: f64, bwd_end: f64, slowdown: f64) -> f64 {
    if clock >= bwd_end || slowdown <= 1.0 {
        return clock + work;
    }
    let slowed = work * slowdown;
    if clock + slowed <= bwd_end {
        clock + slowed
    } else {
        bwd_end + (work - (bwd_end - clock) / slowdown)
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

/// One sim.csv row: e2e.csv's columns where they mean the same, plus `source` and
/// `cost_source`. Written by [`write_rows`].
#[derive(Clone, Debug, serde::Serialize)]
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
    pub batch: usize,
    pub device: String,
    pub density: f64,
    pub rank: usize,
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
            batch: wl.batch,
            device: wl.device.clone(),
            density: case.params.density,
            rank: case.params.rank,
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
            dense_bytes: wl.tensors.iter().map(|t| 4 * t.numel() as u64).sum(),
            wire_bytes: r.wire_bytes,
            planned_s: r.planned_s,
            plan_source: r.plan_source.clone(),
            cost_source: costs.describe(),
        }
    }
}

/// Write `rows` to `path` (a new sim.csv with header, or appended without one).
pub fn write_rows(path: &std::path::Path, rows: &[SimRow]) -> Result<()> {
    let werr = |e: &dyn std::fmt::Display| SimError::Write {
        path: path.display().to_string(),
        msg: e.to_string(),
    };
    let exists = path.exists()
        && std::fs::metadata(path)
            .map(|m| m.len() > 0)
            .unwrap_or(false);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| werr(&e))?;
    let mut w = csv::WriterBuilder::new()
        .has_headers(!exists)
        .from_writer(f);
    for r in rows {
        w.serialize(r).map_err(|e| werr(&e))?;
    }
    w.flush().map_err(|e| werr(&e))?;
    Ok(())
}

/// Measured vs simulated `iter_s` of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub key: String,
    pub method: String,
    pub world_size: usize,
    pub measured_s: f64,
    pub simulated_s: f64,
    /// `(simulated - measured) / measured`.
    pub rel_err: f64,
    /// The case ran with `compute = none` (never a host calibration row).
    pub compute_none: bool,
}

/// Pair each measured case (all repeats of one e2e.csv case, [`measured_cases`]) with
/// its simulated row (`sim[i]` simulates `measured[i].case`); of the repeats the median
/// `iter_s` counts (a slow spell of a shared machine does not move it). Sorted by label.
pub fn compare(measured: &[MeasuredCase], sim: &[SimRow]) -> Result<Vec<Comparison>> {
    if measured.len() != sim.len() {
        return Err(SimError::Input(format!(
            "{} measured cases but {} simulated rows to compare",
            measured.len(),
            sim.len()
        )));
    }
    let mut out: Vec<Comparison> = measured
        .iter()
        .zip(sim)
        .filter_map(|(m, s)| {
            let mut v: Vec<f64> = m.rows.iter().map(|r| r.iter_s).collect();
            crate::bench::stats::median(&mut v).map(|meas| Comparison {
                key: m.label.clone(),
                method: s.method.clone(),
                world_size: s.world_size,
                measured_s: meas,
                simulated_s: s.iter_s,
                rel_err: (s.iter_s - meas) / meas,
                compute_none: m.rows.iter().any(|r| r.compute_none),
            })
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// One case of a measured e2e.csv: every non-measurement column equal (method
/// parameters, compute mode and device included), with all its rows (repeat runs).
#[derive(Clone, Debug)]
pub struct MeasuredCase {
    pub case: SimCase,
    /// `model/method/fusion/pipelining/collective/n/batch`, plus `/column=value` for the
    /// columns that tell it apart from other cases with that prefix.
    pub label: String,
    pub rows: Vec<MeasuredRow>,
}

/// The cases of a measured e2e.csv as simulator cases (same model, method, parameters,
/// fusion, pipelining, collective, world size, batch and device preset), in first-seen
/// order, each with its rows, for the accuracy comparison. Rows with a measured compute
/// profile (`device = profile`) are skipped (their backward times are not in the CSV);
/// `compute = none` rows get zero compute.
pub fn measured_cases(path: &std::path::Path) -> Result<Vec<MeasuredCase>> {
    let mut out: Vec<(MeasuredCase, Vec<(String, String)>)> = Vec::new();
    let mut index: HashMap<Vec<(String, String)>, usize> = HashMap::new();
    for (case, m, key) in e2e_rows(path)? {
        match index.get(&key) {
            Some(&i) => out[i].0.rows.push(m),
            None => {
                index.insert(key.clone(), out.len());
                let v = |name: &str| {
                    key.iter()
                        .find(|(k, _)| k == name)
                        .map_or("", |(_, v)| v.as_str())
                };
                let label = format!(
                    "{}/{}/{}/pipelining={}/{}/n={}/batch={}",
                    v("model"),
                    v("method"),
                    v("fusion"),
                    v("pipelining"),
                    v("collective"),
                    v("world_size"),
                    v("batch")
                );
                out.push((
                    MeasuredCase {
                        case,
                        label,
                        rows: vec![m],
                    },
                    key,
                ));
            }
        }
    }
    // Cases sharing a label: append the columns whose values differ among them.
    let mut by_label: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, (m, _)) in out.iter().enumerate() {
        by_label.entry(m.label.clone()).or_default().push(i);
    }
    for ids in by_label.values().filter(|ids| ids.len() > 1) {
        let keys: Vec<&Vec<(String, String)>> = ids.iter().map(|&i| &out[i].1).collect();
        let differing: Vec<usize> = (0..keys[0].len())
            .filter(|&c| keys.iter().any(|k| k[c].1 != keys[0][c].1))
            .collect();
        for &i in ids {
            let extra: String = differing
                .iter()
                .map(|&c| format!("/{}={}", out[i].1[c].0, out[i].1[c].1))
                .collect();
            out[i].0.label.push_str(&extra);
        }
    }
    Ok(out.into_iter().map(|(m, _)| m).collect())
}

/// What a measured e2e.csv row says beyond its case (host calibration, sim/host.rs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredRow {
    pub fwd_s: f64,
    pub iter_s: f64,
    /// `compute = none`: the emulated device never slept.
    pub compute_none: bool,
}

/// One simulable row of an e2e.csv: its case, its measurements and its case key (every
/// non-measurement column as `(name, value)`).
pub type E2eRow = (SimCase, MeasuredRow, Vec<(String, String)>);

/// Every simulable row of an e2e.csv ([`E2eRow`]).
pub fn e2e_rows(path: &std::path::Path) -> Result<Vec<E2eRow>> {
    use crate::engine::device::ComputeMode;
    let p = path.display().to_string();
    let rerr = |msg: String| SimError::Read {
        path: p.clone(),
        msg,
    };
    let mut rdr = csv::Reader::from_path(path).map_err(|e| rerr(e.to_string()))?;
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| rerr(e.to_string()))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let pos = |name: &str| header.iter().position(|h| h == name);
    let need = |name: &str| {
        pos(name).ok_or_else(|| {
            rerr(format!(
                "missing column `{name}` (expected e2e.csv, docs/csv-schema.md)"
            ))
        })
    };
    let (c_model, c_method, c_fusion, c_pipe, c_coll, c_agg, c_n, c_batch, c_dev) = (
        need("model")?,
        need("method")?,
        need("fusion")?,
        need("pipelining")?,
        need("collective")?,
        need("aggregation")?,
        need("world_size")?,
        need("batch")?,
        need("device")?,
    );
    let c_compute = pos("compute");
    let (c_fwd, c_iter) = (need("fwd_s")?, need("iter_s")?);
    let mut out = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| rerr(e.to_string()))?;
        let line = i + 2;
        let g = |c: usize| rec.get(c).unwrap_or("").trim().to_string();
        let bad =
            |col: &str, v: &str| rerr(format!("line {line}, column `{col}`: bad value `{v}`"));
        let device = g(c_dev);
        if device == "profile" {
            continue;
        }
        let key: Vec<(String, String)> = (0..header.len())
            .filter(|&c| !is_measurement(&header[c]))
            .map(|c| (header[c].clone(), g(c)))
            .collect();
        let mut params = MethodParams::default();
        let num = |name: &str| pos(name).map(&g).filter(|v| !v.is_empty());
        macro_rules! param {
            ($field:ident, $col:expr) => {
                if let Some(v) = num($col) {
                    params.$field = v.parse().map_err(|_| bad($col, &v))?;
                }
            };
        }
        param!(density, "density");
        param!(rank, "rank");
        param!(min_compression_rate, "min_compression_rate");
        param!(start_iter, "start_iter");
        param!(momentum, "momentum");
        param!(nesterov, "nesterov");
        param!(clip_norm, "clip_norm");
        param!(warmup_steps_per_epoch, "warmup_steps_per_epoch");
        param!(sketch_rows, "sketch_rows");
        param!(sketch_cols_per_k, "sketch_cols_per_k");
        param!(qsgd_levels, "qsgd_levels");
        let fusion = Fusion::parse(&g(c_fusion)).map_err(|_| bad("fusion", &g(c_fusion)))?;
        let coll = g(c_coll);
        // The CSV names the collective that ran; the method's own is `auto`.
        let mode = if coll == g(c_agg) {
            CollectiveMode::Native
        } else {
            CollectiveMode::parse(&coll).ok_or_else(|| bad("collective", &coll))?
        };
        let n: usize = g(c_n).parse().map_err(|_| bad("world_size", &g(c_n)))?;
        let batch: usize = g(c_batch).parse().map_err(|_| bad("batch", &g(c_batch)))?;
        let compute = crate::models::ComputeModel::from_preset(
            &crate::models::preset(&device).map_err(|e| rerr(format!("line {line}: {e}")))?,
        );
        let mut wl = SimWorkload::zoo(&g(c_model), Some(batch), &compute, &device)?;
        let compute_none =
            c_compute.map(|c| ComputeMode::parse(&g(c))) == Some(Some(ComputeMode::None));
        if compute_none {
            wl.bwd_s.iter_mut().for_each(|b| *b = 0.0);
            wl.fwd_s = 0.0;
        }
        let time = |c: usize, col: &str| {
            g(c).parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad(col, &g(c)))
        };
        let measured = MeasuredRow {
            fwd_s: time(c_fwd, "fwd_s")?,
            iter_s: time(c_iter, "iter_s")?,
            compute_none,
        };
        out.push((
            SimCase::new(wl, &g(c_method), fusion, g(c_pipe) == "on", mode, n, params),
            measured,
            key,
        ));
    }
    Ok(out)
}

/// e2e.csv columns that are measurements or run bookkeeping, not case axes.
fn is_measurement(col: &str) -> bool {
    col.ends_with("_s")
        || col.ends_with("_bytes")
        || matches!(
            col,
            "run_id"
                | "case_id"
                | "iters"
                | "warmup"
                | "buckets"
                | "overlap_eff"
                | "compute_source"
                | "tensors"
        )
}

#[cfg(test)]
mod tests;
