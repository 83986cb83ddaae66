//! End-to-end iteration engine (docs/architecture.md, "The e2e iteration"): an emulated
//! device thread plays forward and backward; this (MPI) thread groups ready gradients
//! into buckets by the fusion plan, compresses each tensor of a bucket (for `omgs` and
//! `sketch-fusion`, the bucket packed into one tensor), exchanges the bucket's
//! concatenated wire in one collective per round, and decompresses. Fusion plans and
//! planners: docs/methods.md, "Fusion, pipelining and planners (e2e)". With pipelining a
//! bucket is synchronised as soon as its last gradient is ready (wait-free backprop);
//! without, after the whole backward. A rank's collectives run in order on this thread,
//! like one NCCL stream: the overlap is between communication and the emulated backward.

pub mod device;
pub mod plan;
pub mod planner;
pub mod trace;

use crate::comm::exchange::Exchange;
use crate::comm::World;
use crate::compress::{registry, MethodParams, Received, Wire, WireLen, WorkerCtx};
use crate::error::{Error, Result};
use device::{ComputeMode, Device};
use ndarray::{ArrayView2, ArrayViewMut2};
use plan::{Fusion, PlannerKind};

/// One gradient tensor as the engine sees it (registration order).
#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub rows: usize,
    pub cols: usize,
}

impl TensorSpec {
    pub fn numel(&self) -> usize {
        self.rows * self.cols
    }

    /// A zoo model's tensors as the compressors see them (matrix view, registration order).
    pub fn of_model(model: &crate::models::Model) -> Vec<TensorSpec> {
        model
            .tensors
            .iter()
            .map(|t| {
                let (rows, cols) = t.rows_cols();
                TensorSpec {
                    name: t.name.clone(),
                    rows,
                    cols,
                }
            })
            .collect()
    }
}

/// What one e2e case runs.
pub struct E2eSetup<'a> {
    pub tensors: &'a [TensorSpec],
    /// Backward time per tensor, registration order (s).
    pub bwd_s: &'a [f64],
    pub fwd_s: f64,
    pub method: &'a str,
    pub params: &'a MethodParams,
    pub seed: u64,
    pub fusion: Fusion,
    pub pipelining: bool,
    pub collective: crate::comm::exchange::CollectiveMode,
    pub compute: ComputeMode,
    /// Compress each bucket as one merged tensor (OMGS, Sketch-Fusion) instead of tensor
    /// by tensor.
    pub merge: bool,
    /// Fitted collective models for the planners; `None`: calibrate in this run.
    pub cost_comm: Option<&'a crate::comm::netmodel::CommModels>,
}

/// Per-iteration measurements (s), each the max over ranks.
#[derive(Default, Clone)]
pub struct IterSeries {
    pub fwd_s: Vec<f64>,
    pub bwd_s: Vec<f64>,
    pub pack_s: Vec<f64>,
    pub compress_s: Vec<f64>,
    pub comm_s: Vec<f64>,
    pub decompress_s: Vec<f64>,
    /// End of backward to end of synchronisation.
    pub exposed_s: Vec<f64>,
    /// Start of backward to end of synchronisation.
    pub bwd_sync_s: Vec<f64>,
    pub iter_s: Vec<f64>,
    /// Synchronisation of the last bucket alone (its gradients ready to its decompress end).
    pub last_bucket_s: Vec<f64>,
}

impl IterSeries {
    fn all_mut(&mut self) -> [&mut Vec<f64>; 10] {
        [
            &mut self.fwd_s,
            &mut self.bwd_s,
            &mut self.pack_s,
            &mut self.compress_s,
            &mut self.comm_s,
            &mut self.decompress_s,
            &mut self.exposed_s,
            &mut self.bwd_sync_s,
            &mut self.iter_s,
            &mut self.last_bucket_s,
        ]
    }
}

pub struct E2eMeasurement {
    pub series: IterSeries,
    pub buckets: usize,
    /// Wire bytes per iteration of this rank: mean over the timed iterations, max over ranks.
    pub wire_bytes: u64,
    pub aggregation: &'static str,
    /// Planner fusions: the iteration time (backward start to synchronisation end) the
    /// planner's timeline model predicted for its plan.
    pub planned_s: Option<f64>,
    /// Planner fusions: the plan that ran, the planner's or the simple plan its own model
    /// rated faster ([`plan_source_of`]).
    pub plan_source: Option<String>,
    /// The collective that carried the messages (`allreduce`, `allgather`, `ring`, `ps`).
    pub collective: &'static str,
}

/// Buffers of one bucket's wire layout.
pub(crate) struct Bucket {
    /// Model tensors (registration indices) in backward order.
    pub(crate) tensors: Vec<usize>,
    /// Compression units (compressor tensor ids): the tensors themselves, or one merged
    /// unit (id = bucket index) when the bucket is compressed as a whole.
    pub(crate) units: Vec<usize>,
    /// Highest backward position in the bucket + 1: the bucket is complete once this many
    /// gradients are ready.
    pub(crate) ready_after: usize,
}

/// Run `warmup` iterations of one e2e case, then timed ones until `timing` has enough
/// (every rank must agree; the decision is one all-reduce between iterations).
pub fn run(
    world: &World,
    s: &E2eSetup,
    timing: crate::bench::stats::Timing,
    warmup: u64,
    mut trace: Option<&mut trace::Trace>,
) -> Result<E2eMeasurement> {
    let m = s.tensors.len();
    if m == 0 || s.bwd_s.len() != m {
        return Err(Error::Runtime(format!(
            "e2e: {} tensors but {} backward times",
            m,
            s.bwd_s.len()
        )));
    }
    let Layout {
        mut comp,
        plans,
        pack_len,
        planned_s,
        plan_source,
    } = layout(world, s)?;
    let rounds = comp.rounds();
    // Backward order = reverse registration order.
    let bwd_order: Vec<usize> = (0..m).rev().collect();
    let bwd_times: Vec<f64> = bwd_order.iter().map(|&t| s.bwd_s[t]).collect();
    let unit_shape = |u: usize| unit_shape(s.tensors, &plans, s.merge, u);
    let all_buckets = || plans.iter().flatten();
    let all_units: Vec<usize> = all_buckets()
        .flat_map(|b| b.units.iter().copied())
        .collect();
    let Capacities {
        unit_cap,
        gather_used,
        bucket_wires,
        bucket_cap,
    } = capacities(comp.as_ref(), &plans, rounds);
    let mut unit_wire = Wire::with_touched_capacity(unit_cap);
    let mut bucket_wire = Wire::with_touched_capacity(bucket_cap);
    let mut ex = Exchange::with_mode(world, bucket_cap, s.collective)?;
    let max_numel = s
        .tensors
        .iter()
        .map(TensorSpec::numel)
        .max()
        .unwrap_or(0)
        .max(pack_len);
    let mut out = vec![0f32; max_numel];
    let mut packed = vec![0f32; pack_len];
    let mut gather_scratch = vec![0u32; unit_cap.gather_u32 * world.size];
    let mut gather_counts = vec![0usize; world.size];
    let mut layout =
        vec![UnitLayout::default(); all_buckets().map(|b| b.units.len()).max().unwrap_or(0)];
    let max_buckets = plans.iter().map(Vec::len).max().unwrap_or(0);
    let grads: Vec<ndarray::Array2<f32>> = s
        .tensors
        .iter()
        .enumerate()
        .map(|(t, ts)| {
            crate::bench::tensors::gradient(
                crate::config::Shape {
                    rows: ts.rows,
                    cols: ts.cols,
                },
                s.seed ^ t as u64,
                0,
                world.rank,
            )
        })
        .collect();

    if let Some(tr) = trace.as_deref_mut() {
        // Per timed iteration: forward, iteration, a backward span per tensor, compress
        // and decompress per tensor and round, a collective per bucket and round.
        // At least the minimum iterations; a trace that outgrows it counts what it drops.
        tr.reserve(
            timing.min_iters as usize
                * (2 + m + all_units.len() * 2 * rounds + max_buckets * rounds),
        );
    }
    let device = Device::new(m);
    let mut series = IterSeries::default();
    for v in series.all_mut() {
        v.reserve(timing.max_iters as usize);
    }
    let mut wire_total = 0u64;
    let fwd_s = s.fwd_s;
    let compute = s.compute;
    let result: Result<()> = std::thread::scope(|sc| {
        let dev = &device;
        let bt = &bwd_times;
        sc.spawn(move || dev.run(fwd_s, bt, compute));
        let r = (|| -> Result<()> {
            let mut timed = crate::bench::stats::Running::default();
            for it in 0.. {
                comp.begin_step(it);
                let phase = it as usize % plans.len();
                let buckets = &plans[phase];
                // Only timed iterations are traced.
                let mut trace = if it >= warmup {
                    trace.as_deref_mut()
                } else {
                    None
                };
                world.sync_or_stop()?;
                let t0 = device.now_s();
                device.start_iteration();
                let (mut pack, mut compress, mut comm, mut decompress) = (0.0, 0.0, 0.0, 0.0);
                let mut bytes = 0u64;
                if !s.pipelining {
                    device.wait_ready(m);
                }
                let mut last_start = t0;
                for (bi, b) in buckets.iter().enumerate() {
                    if s.pipelining {
                        device.wait_ready(b.ready_after);
                    }
                    last_start = device.now_s();
                    for round in 0..rounds {
                        // Compress every tensor of the bucket and append its wire.
                        bucket_wire.clear();
                        if s.merge && round == 0 {
                            // Pack the bucket's gradients into one flat tensor.
                            let ta = device.now_s();
                            let mut off = 0;
                            for &t in &b.tensors {
                                let g = grads[t].as_slice().ok_or_else(|| {
                                    Error::Runtime("gradient not contiguous".into())
                                })?;
                                packed[off..off + g.len()].copy_from_slice(g);
                                off += g.len();
                            }
                            pack += device.now_s() - ta;
                        }
                        for (u, &t) in b.units.iter().enumerate() {
                            let ta = device.now_s();
                            let (rows, cols) = unit_shape(t);
                            let g = if s.merge {
                                ArrayView2::from_shape((rows, cols), &packed[..rows * cols])
                                    .map_err(|e| Error::Runtime(e.to_string()))?
                            } else {
                                grads[t].view()
                            };
                            comp.compress(t, round, g, &mut unit_wire)?;
                            comp.feedback(t, round)?;
                            let tb = device.now_s();
                            layout[u] = append(&mut bucket_wire, &unit_wire);
                            pack += device.now_s() - tb;
                            compress += tb - ta;
                            if let Some(tr) = trace.as_deref_mut() {
                                tr.span("compress", trace::COMM, t as i64, ta, tb);
                            }
                        }
                        if gather_used {
                            // Trailer: each unit's gathered length, so receivers can split.
                            let ta = device.now_s();
                            for l in &layout[..b.units.len()] {
                                bucket_wire.gather_u32.push(l.gather_len as u32);
                            }
                            pack += device.now_s() - ta;
                        }
                        let ta = device.now_s();
                        let lay = &layout[..b.units.len()];
                        let exact = bucket_wires[phase][bi][round]
                            .exact_gather_of(comp.name(), &bucket_wire)?;
                        ex.run(world, &bucket_wire, exact, |agg, off, inc, own| {
                            merge_units(comp.as_mut(), &b.units, lay, agg, off, inc, own)
                        })?;
                        let tb = device.now_s();
                        comm += tb - ta;
                        bytes += bucket_wire.bytes() as u64;
                        if let Some(tr) = trace.as_deref_mut() {
                            tr.span(
                                if rounds > 1 {
                                    ["collective r0", "collective r1"][round.min(1)]
                                } else {
                                    "collective"
                                },
                                trace::COMM,
                                bi as i64,
                                ta,
                                tb,
                            );
                        }
                        let rec = ex.received();
                        for (u, &t) in b.units.iter().enumerate() {
                            let tc = device.now_s();
                            let (rows, cols) = unit_shape(t);
                            let unit_rec = unit_received(
                                &rec,
                                &layout[u],
                                u,
                                b.units.len(),
                                &mut gather_scratch,
                                &mut gather_counts,
                            )?;
                            let td = device.now_s();
                            let view =
                                ArrayViewMut2::from_shape((rows, cols), &mut out[..rows * cols])
                                    .map_err(|e| Error::Runtime(e.to_string()))?;
                            comp.decompress(t, round, &unit_rec, view)?;
                            let te = device.now_s();
                            pack += td - tc;
                            decompress += te - td;
                            if let Some(tr) = trace.as_deref_mut() {
                                tr.span("decompress", trace::COMM, t as i64, td, te);
                            }
                        }
                    }
                }
                let t_end = device.now_s();
                let (fwd_end, bwd_end) = {
                    let st = device.lock();
                    (st.fwd_end_s, st.bwd_end_s)
                };
                if let Some(tr) = trace {
                    tr.iteration(&device, t0, fwd_end, t_end, &bwd_order);
                }
                if it >= warmup {
                    wire_total += bytes;
                    series.fwd_s.push(fwd_end - t0);
                    series.bwd_s.push(bwd_end - fwd_end);
                    series.pack_s.push(pack);
                    series.compress_s.push(compress);
                    series.comm_s.push(comm);
                    series.decompress_s.push(decompress);
                    series.exposed_s.push((t_end - bwd_end).max(0.0));
                    series.bwd_sync_s.push(t_end - fwd_end);
                    series.iter_s.push(t_end - t0);
                    series.last_bucket_s.push(t_end - last_start);
                    timed.push(t_end - t0);
                    // Stop once every rank has enough (outside the timed region).
                    if world.max_u64(u64::from(!timing.enough(&timed))) == 0 {
                        break;
                    }
                }
            }
            Ok(())
        })();
        device.stop();
        r
    });
    result?;
    for v in series.all_mut() {
        world.max_in_place(v);
    }
    let iters_run = series.iter_s.len() as u64;
    // Buckets per step: the mean over the phases, rounded (ACP-SGD's P and Q steps differ).
    let total_buckets: usize = plans.iter().map(Vec::len).sum();
    Ok(E2eMeasurement {
        series,
        buckets: (total_buckets as f64 / plans.len() as f64).round() as usize,
        wire_bytes: world.max_u64(crate::bench::stats::mean_bytes_per_step(
            wire_total, iters_run,
        )),
        aggregation: comp.aggregation().name(),
        planned_s,
        plan_source,
        collective: s.collective.effective(comp.aggregation()),
    })
}

/// A case's compressor and buckets: the compressor built and registered (for merged
/// compression, one unit per bucket), one bucket list per phase of its step cycle, and
/// for planner fusions the planner's prediction and choice. Shared by e2e and
/// `gradcomp converge` (src/converge/), so both bucket the same way.
pub(crate) struct Layout {
    pub(crate) comp: Box<dyn crate::compress::Compressor>,
    pub(crate) plans: Vec<Vec<Bucket>>,
    /// Largest merged unit (elements); 0 without merged compression.
    pub(crate) pack_len: usize,
    pub(crate) planned_s: Option<f64>,
    pub(crate) plan_source: Option<String>,
}

/// Build the [`Layout`] of case `s` on this rank (planner fusions calibrate with
/// collectives: every rank must call it).
pub(crate) fn layout(world: &World, s: &E2eSetup) -> Result<Layout> {
    let m = s.tensors.len();
    let ctx = WorkerCtx {
        rank: world.rank,
        world_size: world.size,
        seed: s.seed,
    };
    let mut comp = registry::build(s.method, s.params, ctx)?;
    for (t, ts) in s.tensors.iter().enumerate() {
        comp.register(t, ts.rows, ts.cols)?;
    }
    // Backward order = reverse registration order.
    let bwd_order: Vec<usize> = (0..m).rev().collect();
    let bwd_times: Vec<f64> = bwd_order.iter().map(|&t| s.bwd_s[t]).collect();
    let shapes: Vec<(usize, usize)> = bwd_order
        .iter()
        .map(|&t| (s.tensors[t].rows, s.tensors[t].cols))
        .collect();
    // One bucket list per phase of the method's step cycle (ACP-SGD: P and Q steps).
    let mut plan_source = None;
    let (phase_groups, planned_s) = match s.fusion {
        Fusion::Planner(kind) => {
            // Calibrate on a fresh compressor: the timed one must start without the
            // calibration gradients in its residuals, momenta or warm-start factors.
            let mut probe = registry::build(s.method, s.params, ctx)?;
            for (t, ts) in s.tensors.iter().enumerate() {
                probe.register(t, ts.rows, ts.cols)?;
            }
            let c = plan_with_costs(world, s, probe.as_mut(), kind, &bwd_order, &bwd_times)?;
            plan_source = Some(plan_source_of(kind, &c));
            (vec![c.groups], Some(c.predicted_s))
        }
        f => (
            plan::phase_buckets(&registry::fusion_sizing(s.method, s.params, &shapes), f),
            None,
        ),
    };
    let mut plans: Vec<Vec<Bucket>> = phase_groups
        .into_iter()
        .map(|groups| {
            groups
                .into_iter()
                .map(|pos| {
                    let tensors: Vec<usize> = pos.iter().map(|&p| bwd_order[p]).collect();
                    Bucket {
                        ready_after: pos.iter().max().map_or(0, |p| p + 1),
                        units: tensors.clone(),
                        tensors,
                    }
                })
                .collect()
        })
        .collect();
    // Merged compression: a fresh compressor with one tensor per bucket.
    let mut pack_len = 0usize;
    if s.merge {
        if plans.len() != 1 {
            return Err(Error::Runtime(format!(
                "e2e: {} buckets differ between steps; merged compression needs one plan",
                s.method
            )));
        }
        comp = registry::build(s.method, s.params, ctx)?;
        for (bi, b) in plans[0].iter_mut().enumerate() {
            let n: usize = b.tensors.iter().map(|&t| s.tensors[t].numel()).sum();
            comp.register(bi, 1, n)?;
            b.units = vec![bi];
            pack_len = pack_len.max(n);
        }
    }
    Ok(Layout {
        comp,
        plans,
        pack_len,
        planned_s,
        plan_source,
    })
}

/// Shape of compression unit `u`: the tensor itself, or (merged compression) the
/// bucket `u` packed into one `1 x n` tensor.
pub(crate) fn unit_shape(
    tensors: &[TensorSpec],
    plans: &[Vec<Bucket>],
    merge: bool,
    u: usize,
) -> (usize, usize) {
    if merge {
        (
            1,
            plans[0][u]
                .tensors
                .iter()
                .map(|&t| tensors[t].numel())
                .sum(),
        )
    } else {
        (tensors[u].rows, tensors[u].cols)
    }
}

/// Wire sizes of a layout: the largest unit wire, whether the gather section (and its
/// trailer of lengths) is used, every bucket's declared wire per phase and round, and
/// the largest bucket wire.
pub(crate) struct Capacities {
    pub(crate) unit_cap: WireLen,
    pub(crate) gather_used: bool,
    pub(crate) bucket_wires: Vec<Vec<Vec<WireLen>>>,
    pub(crate) bucket_cap: WireLen,
}

/// The [`Capacities`] of `plans` for compressor `comp` with `rounds` rounds.
pub(crate) fn capacities(
    comp: &dyn crate::compress::Compressor,
    plans: &[Vec<Bucket>],
    rounds: usize,
) -> Capacities {
    let all_units: Vec<usize> = plans
        .iter()
        .flatten()
        .flat_map(|b| b.units.iter().copied())
        .collect();
    // Capacities: one unit wire (largest tensor), one bucket wire (largest bucket).
    let unit_cap = all_units
        .iter()
        .flat_map(|&t| (0..rounds).map(move |r| (t, r)))
        .map(|(t, r)| comp.wire_capacity(t, r))
        .fold(WireLen::default(), WireLen::max);
    // Methods without a gather section send no trailer either.
    let gather_used = unit_cap.gather_u32 > 0;
    // Declared wire of every bucket per phase and round: its tensors' wires plus the
    // trailer of their gathered lengths (exact when every tensor's section is).
    let bucket_wires: Vec<Vec<Vec<WireLen>>> = plans
        .iter()
        .map(|plan| {
            plan.iter()
                .map(|b| {
                    (0..rounds)
                        .map(|r| {
                            let trailer = WireLen {
                                gather_u32: if gather_used { b.units.len() } else { 0 },
                                gather_exact: true,
                                ..WireLen::default()
                            };
                            b.units
                                .iter()
                                .map(|&t| comp.wire_capacity(t, r))
                                .fold(trailer, WireLen::plus)
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let bucket_cap = bucket_wires
        .iter()
        .flatten()
        .flatten()
        .fold(WireLen::default(), |a, &b| a.max(b));
    Capacities {
        unit_cap,
        gather_used,
        bucket_wires,
        bucket_cap,
    }
}

/// The `plan_source` of a planner's choice: the planner's name when its plan was kept,
/// else `SIMPLE (PLANNER predicted X s)`, e.g. `single (mgwfbp predicted 0.0123 s)`.
pub fn plan_source_of(kind: PlannerKind, c: &planner::Choice) -> String {
    let name = crate::engine::plan::Fusion::Planner(kind).to_string();
    match &c.replaced {
        None => name,
        Some((simple, own_s)) => format!("{simple} ({name} predicted {own_s:.4e} s)"),
    }
}

/// Where one tensor's wire sits inside its bucket's wire.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UnitLayout {
    sum_off: usize,
    sum_len: usize,
    pub(crate) gather_len: usize,
    ring_off: usize,
    ring_len: usize,
}

/// Append a tensor's wire to the bucket's (within reserved capacity: no allocation).
pub(crate) fn append(bucket: &mut Wire, unit: &Wire) -> UnitLayout {
    let l = UnitLayout {
        sum_off: bucket.sum_f32.len(),
        sum_len: unit.sum_f32.len(),
        gather_len: unit.gather_u32.len(),
        ring_off: bucket.ring_u32.len(),
        ring_len: unit.ring_u32.len(),
    };
    bucket.sum_f32.extend_from_slice(&unit.sum_f32);
    bucket.gather_u32.extend_from_slice(&unit.gather_u32);
    bucket.ring_u32.extend_from_slice(&unit.ring_u32);
    l
}

/// The part of a bucket's exchange that belongs to unit `u` of `units`: slices of the
/// summed and ring sections, and every worker's gathered piece copied into `scratch`
/// (worker w's section ends with `units` lengths, one per unit).
pub(crate) fn unit_received<'a>(
    rec: &Received<'a>,
    l: &UnitLayout,
    u: usize,
    units: usize,
    scratch: &'a mut [u32],
    counts: &'a mut [usize],
) -> Result<Received<'a>> {
    let mut filled = 0usize;
    if !rec.gathered_u32.is_empty() || rec.gather_counts.iter().any(|&c| c > 0) {
        for (w, count) in counts[..rec.world_size].iter_mut().enumerate() {
            let sec = rec.gathered(w);
            if sec.len() < units {
                return Err(Error::Runtime(format!("bucket exchange: worker {w} sent {} words, fewer than its {units}-word trailer", sec.len())));
            }
            let (data, lens) = sec.split_at(sec.len() - units);
            let start: usize = lens[..u].iter().map(|&x| x as usize).sum();
            let len = lens[u] as usize;
            if start + len > data.len() || filled + len > scratch.len() {
                return Err(Error::Runtime(format!(
                    "bucket exchange: worker {w}'s trailer is inconsistent with its data"
                )));
            }
            scratch[filled..filled + len].copy_from_slice(&data[start..start + len]);
            *count = len;
            filled += len;
        }
    } else {
        counts.iter_mut().for_each(|c| *c = 0);
    }
    let gathered: &'a [u32] = &scratch[..filled];
    Ok(Received {
        sum_f32: &rec.sum_f32[l.sum_off..l.sum_off + l.sum_len],
        gathered_u32: gathered,
        gather_counts: counts,
        ring_u32: &rec.ring_u32[l.ring_off..l.ring_off + l.ring_len],
        world_size: rec.world_size,
    })
}

/// Ring merge of a chunk of a bucket's concatenated ring section: each tensor's part of
/// the chunk goes to that tensor's `ring_merge` with its own offset.
pub(crate) fn merge_units(
    comp: &mut dyn crate::compress::Compressor,
    units: &[usize],
    layout: &[UnitLayout],
    aggregated: usize,
    off: usize,
    incoming: &[u32],
    own: &mut [u32],
) -> Result<()> {
    let end = off + own.len();
    for (&t, l) in units.iter().zip(layout) {
        let (a, b) = (off.max(l.ring_off), end.min(l.ring_off + l.ring_len));
        if a < b {
            comp.ring_merge(
                t,
                aggregated,
                a - l.ring_off,
                &incoming[a - off..b - off],
                &mut own[a - off..b - off],
            )?;
        }
    }
    Ok(())
}

/// Plan buckets with a cost-model planner ([`planner::choose`]). Costs come from
/// `s.cost_comm` (fitted from a micro-comm CSV) or are calibrated here: the exchange of
/// the method's collective at a few sizes (alpha-beta fit), and one real step of every
/// tensor (every round's compress + feedback, the exchange, then decompress of what every
/// rank sent: the work the engine does besides communication), fitted as
/// `fixed_s per call + per_element_s * elements`. Parameters are max-reduced over ranks
/// so every rank plans the same buckets. `t_c(e) = rounds * t(e * (wire bytes per
/// element) / rounds)`, `t` the collective's [`crate::comm::netmodel::CommFit`] (one
/// alpha-beta line, or two regimes from a CSV); `t_s(e, k)` charges `k` calls (one for
/// merged compression).
fn plan_with_costs(
    world: &World,
    s: &E2eSetup,
    comp: &mut dyn crate::compress::Compressor,
    kind: PlannerKind,
    bwd_order: &[usize],
    bwd_times: &[f64],
) -> Result<planner::Choice> {
    use crate::comm::netmodel::{CommFit, CompressCost};
    let rounds = comp.rounds();
    let agg = comp.aggregation();
    let effective = s.collective.effective(agg);
    // Wire bytes per gradient element, from the declared capacities.
    let (mut wire, mut elems) = (0usize, 0usize);
    let mut cap = WireLen::default();
    for (t, ts) in s.tensors.iter().enumerate() {
        elems += ts.numel();
        for r in 0..rounds {
            let c = comp.wire_capacity(t, r);
            wire += c.bytes();
            cap = cap.max(c);
        }
    }
    let bytes_per_elem = wire as f64 / elems.max(1) as f64;
    let fit = match s
        .cost_comm
        .and_then(|c| c.get(effective, world.size).copied())
    {
        Some(fit) => fit,
        None => {
            let exact = (0..s.tensors.len()).all(|t| comp.wire_capacity(t, 0).gather_exact);
            CommFit::line(calibrate_comm(world, s.collective, agg, exact)?)
        }
    };
    // Work besides communication: one real step per tensor (outside timed regions).
    let mut points = Vec::with_capacity(s.tensors.len());
    let mut w = Wire::with_touched_capacity(cap);
    let mut ex = Exchange::with_mode(world, cap, s.collective)?;
    let mut out = vec![0f32; s.tensors.iter().map(TensorSpec::numel).max().unwrap_or(0)];
    comp.begin_step(0);
    for (t, ts) in s.tensors.iter().enumerate() {
        let g = crate::bench::tensors::gradient(
            crate::config::Shape {
                rows: ts.rows,
                cols: ts.cols,
            },
            s.seed ^ t as u64,
            1,
            world.rank,
        );
        let mut work_s = 0.0;
        for r in 0..rounds {
            let t0 = world.time();
            comp.compress(t, r, g.view(), &mut w)?;
            comp.feedback(t, r)?;
            work_s += world.time() - t0;
            let exact = comp.wire_capacity(t, r).exact_gather_of(comp.name(), &w)?;
            ex.run(world, &w, exact, |agg, off, inc, own| {
                comp.ring_merge(t, agg, off, inc, own).map_err(Error::from)
            })?;
            let view = ArrayViewMut2::from_shape((ts.rows, ts.cols), &mut out[..ts.numel()])
                .map_err(|e| Error::Runtime(e.to_string()))?;
            let t1 = world.time();
            comp.decompress(t, r, &ex.received(), view)?;
            work_s += world.time() - t1;
        }
        points.push((ts.numel() as f64, work_s));
    }
    let cc = CompressCost::fit(&points)
        .map(|(c, _)| c)
        .unwrap_or(CompressCost {
            per_element_s: 0.0,
            fixed_s: 0.0,
        });
    let mut comm = fit.to_params();
    world.max_in_place(&mut comm);
    let fit = CommFit::from_params(comm);
    let mut params = [cc.per_element_s, cc.fixed_s];
    world.max_in_place(&mut params);
    let (per_element_s, fixed_s) = (params[0], params[1].max(0.0));
    let p: Vec<usize> = bwd_order.iter().map(|&t| s.tensors[t].numel()).collect();
    let per_round = rounds.max(1) as f64;
    let t_c = move |e: usize| per_round * fit.time_s(e as f64 * bytes_per_elem / per_round);
    let merge = s.merge;
    let t_s = move |e: usize, k: usize| {
        let calls = if merge { 1 } else { k };
        calls as f64 * fixed_s + per_element_s * e as f64
    };
    Ok(planner::choose(kind, bwd_times, &p, &t_s, &t_c))
}

/// Alpha-beta of the exchange a method uses, measured now: 4 KiB to 4 MiB messages,
/// median of 5 after one warm-up, max over ranks, least-squares fit.
fn calibrate_comm(
    world: &World,
    mode: crate::comm::exchange::CollectiveMode,
    agg: crate::compress::Aggregation,
    gather_exact: bool,
) -> Result<crate::comm::netmodel::AlphaBeta> {
    use crate::compress::Aggregation as A;
    const SIZES_WORDS: [usize; 4] = [1 << 10, 1 << 14, 1 << 17, 1 << 20];
    let cap = *SIZES_WORDS.last().unwrap_or(&1);
    let wl = match agg {
        A::AllReduce => WireLen {
            sum_f32: cap,
            ..WireLen::default()
        },
        A::AllGather => WireLen {
            gather_u32: cap,
            gather_exact,
            ..WireLen::default()
        },
        A::Ring => WireLen {
            ring_u32: cap,
            ..WireLen::default()
        },
    };
    let mut ex = Exchange::with_mode(world, wl, mode)?;
    let mut w = Wire::with_touched_capacity(wl);
    let mut points = Vec::new();
    for &n in &SIZES_WORDS {
        w.clear();
        match agg {
            A::AllReduce => w.sum_f32.resize(n, 1.0),
            A::AllGather => w.gather_u32.resize(n, 1),
            A::Ring => w.ring_u32.resize(n, 1),
        }
        let mut times = [0f64; 6];
        for x in times.iter_mut() {
            world.barrier();
            let t0 = crate::comm::wtime();
            ex.run(
                world,
                &w,
                gather_exact,
                |_, _, inc: &[u32], own: &mut [u32]| {
                    for (o, i) in own.iter_mut().zip(inc) {
                        *o ^= *i;
                    }
                    Ok(())
                },
            )?;
            *x = crate::comm::wtime() - t0;
        }
        world.max_in_place(&mut times);
        let mut t = times[1..].to_vec();
        t.sort_by(f64::total_cmp);
        points.push(((4 * n) as f64, t[t.len() / 2]));
    }
    crate::comm::netmodel::AlphaBeta::fit(&points)
        .map(|(ab, _)| ab)
        .map_err(|e| Error::Runtime(format!("calibrating the collective: {e}")))
}
