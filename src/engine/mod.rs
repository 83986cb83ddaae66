//! End-to-end iteration engine (docs/architecture.md, "The e2e iteration"): an emulated
//! device thread plays forward and backward; this (MPI) thread groups ready gradients
//! into buckets by the fusion plan, compresses each tensor of a bucket (for `omgs` and
//! `sketch-fusion`, the bucket packed into one tensor), exchanges the bucket's
//! concatenated wire in one collective per round, and decompresses. Fusion plans and
//! planners: docs/methods.md, "Fusion, pipelining and planners (e2e)". With pipelining a
//! bucket is synchronised as soon as its last gradient is ready (wait-free backprop);
//! without, after the whole backward. A rank's collectives run in order on this thread,
//! like one NCCL stream: the overlap is between communication and the emulated backward.

mod calibrate;
pub mod device;
pub mod exec;
pub mod trace;

use crate::comm::World;
use crate::compress::{registry, MethodParams, WorkerCtx};
use crate::config::ComputeMode;
use crate::error::{Error, Result};
/// Re-exported for the engine's callers ([`E2eSetup::tensors`]).
pub use crate::models::TensorSpec;
use crate::schedule::plan::{self, Fusion};
use crate::schedule::planner::plan_source_of;
use crate::schedule::{planner, Bucket, Executed};
use device::Device;
pub(crate) use exec::unit_shape;
use exec::{Executor, Hooks, OpTimes};

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
    pub cost_comm: Option<&'a crate::netmodel::CommModels>,
    /// Planner costs given in full (no calibration, so the plan is the same run to run:
    /// `gradcomp converge`); overrides `cost_comm`.
    pub planner_costs: Option<planner::FixedCosts>,
    /// Where compression is charged; `device` needs `device_costs`.
    pub compress_on: crate::devcost::CompressOn,
    pub device_costs: Option<&'a crate::devcost::DeviceCosts>,
    /// Planner fusions: the plan this case already chose (its first run in this
    /// invocation, [`E2eMeasurement::choice`]), run as it is, without calibrating or
    /// planning again: the plan is part of the case, so its rounds run one plan.
    pub planned: Option<&'a planner::Choice>,
}

/// Per-iteration measurements (s): one rank's as recorded, or (in
/// [`E2eMeasurement::series`]) each the max over ranks.
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
    /// The real host time of compress + feedback and of decompress (with device
    /// compression, not on the timeline).
    pub host_compress_s: Vec<f64>,
    pub host_decompress_s: Vec<f64>,
}

impl IterSeries {
    /// Every series with its e2e.csv column name (the same name in samples.csv).
    pub fn named(&self) -> [(&'static str, &[f64]); 12] {
        [
            ("fwd_s", &self.fwd_s),
            ("bwd_s", &self.bwd_s),
            ("pack_s", &self.pack_s),
            ("compress_s", &self.compress_s),
            ("comm_s", &self.comm_s),
            ("decompress_s", &self.decompress_s),
            ("exposed_s", &self.exposed_s),
            ("bwd_sync_s", &self.bwd_sync_s),
            ("iter_s", &self.iter_s),
            ("last_bucket_s", &self.last_bucket_s),
            ("host_compress_s", &self.host_compress_s),
            ("host_decompress_s", &self.host_decompress_s),
        ]
    }

    fn all_mut(&mut self) -> [&mut Vec<f64>; 12] {
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
            &mut self.host_compress_s,
            &mut self.host_decompress_s,
        ]
    }
}

pub struct E2eMeasurement {
    /// Per timed iteration, each measurement's max over ranks.
    pub series: IterSeries,
    /// This rank's own measurements (samples.csv).
    pub local: IterSeries,
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
    /// The operations the last iteration of each phase ran, with the wires sent.
    pub executed: Vec<Vec<Executed>>,
    /// The buckets of phase 0 as backward positions (a planner's choice included).
    pub plan: Vec<Vec<usize>>,
    /// Planner fusions: the choice that ran (the planner's, or the simple plan its model
    /// rated faster), for the later runs of the same case ([`E2eSetup::planned`]).
    pub choice: Option<planner::Choice>,
    /// Per timed iteration, the max over ranks of the emulated device's drift from its
    /// compute model ([`device::compute_drift`]); empty when the case has no compute
    /// (`ComputeMode::None`).
    pub compute_drift: Vec<f64>,
}

/// Run `warmup` iterations of one e2e case, then timed ones until `timing` has enough
/// (every rank must agree; the decision is one all-reduce between iterations).
pub fn run(
    world: &World,
    s: &E2eSetup,
    timing: crate::measure::stats::Timing,
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
    let grads = synthetic_gradients(world, s);
    let lay = layout(world, s, Some(&grads))?;
    let (planned_s, plan_source) = (lay.planned_s, lay.plan_source.clone());
    let choice = lay.choice.clone();
    let mut ex = Executor::new(world, s, lay, s.pipelining)?;
    // Time dilation (src/measure/dilation.rs): the emulated device runs K times slower on
    // this machine's clock; the series below are divided by K at the end.
    let dil = world.dilation();
    // Backward order = reverse registration order.
    let bwd_order: Vec<usize> = (0..m).rev().collect();
    let bwd_times: Vec<f64> = bwd_order.iter().map(|&t| dil.wall_s(s.bwd_s[t])).collect();
    if let Some(tr) = trace.as_deref_mut() {
        tr.dilation = dil;
        // Per timed iteration: forward, iteration, a backward span per tensor, and at most
        // one span per operation. At least the minimum iterations; a trace that outgrows
        // it counts what it drops.
        tr.reserve(timing.min_iters as usize * (2 + m + ex.max_ops()));
    }
    let device = Device::new(m);
    let mut out = Timed::default();
    for v in out.series.all_mut() {
        v.reserve(timing.max_iters as usize);
    }
    out.drift.reserve(if s.compute == ComputeMode::None {
        0
    } else {
        timing.max_iters as usize
    });
    let fwd_s = dil.wall_s(s.fwd_s);
    let compute = s.compute;
    let iterations = Iterations {
        world,
        s,
        device: &device,
        grads: &grads,
        bwd_order: &bwd_order,
        timing: &timing,
        warmup,
    };
    device.beside(fwd_s, &bwd_times, compute, || {
        iterations.run(&mut ex, trace, &mut out)
    })?;
    let Timed {
        mut series,
        mut drift,
        wire_total,
    } = out;
    // Every time in the emulated cluster's seconds (wall / K).
    for v in series.all_mut() {
        dil.to_emulated(v);
    }
    let local = series.clone();
    for v in series.all_mut() {
        world.max_in_place(v);
    }
    world.max_in_place(&mut drift);
    let iters_run = series.iter_s.len() as u64;
    Ok(E2eMeasurement {
        series,
        local,
        buckets: ex.buckets_per_step(),
        wire_bytes: world.max_u64(crate::measure::stats::mean_bytes_per_step(
            wire_total, iters_run,
        )),
        aggregation: ex.comp.aggregation().name(),
        planned_s,
        plan_source,
        collective: s.collective.effective(ex.comp.aggregation()),
        executed: ex.executed().to_vec(),
        plan: ex.plans[0]
            .iter()
            .map(|b| b.tensors.iter().map(|&t| m - 1 - t).collect())
            .collect(),
        compute_drift: drift,
        choice,
    })
}

/// The case's synthetic gradients (registration order), one per tensor from the case's
/// seed and this rank ([`crate::measure::tensors::gradient`]).
fn synthetic_gradients(world: &World, s: &E2eSetup) -> Vec<ndarray::Array2<f32>> {
    s.tensors
        .iter()
        .enumerate()
        .map(|(t, ts)| {
            crate::measure::tensors::gradient(
                crate::measure::shape::Shape {
                    rows: ts.rows,
                    cols: ts.cols,
                },
                s.seed ^ t as u64,
                0,
                world.rank,
            )
        })
        .collect()
}

/// What the timed iterations recorded on this rank (wall seconds): the series, the
/// compute drift per iteration, and the wire bytes sent over them.
#[derive(Default)]
struct Timed {
    series: IterSeries,
    drift: Vec<f64>,
    wire_total: u64,
}

/// One iteration's readings of the device clock (s): its start, forward and backward
/// ends, its end and the last bucket's start, with the compute model's forward and
/// backward.
struct IterClock {
    t0: f64,
    fwd_end: f64,
    bwd_end: f64,
    t_end: f64,
    last_start: f64,
    fwd_model: f64,
    bwd_model: f64,
}

impl IterSeries {
    /// Append one timed iteration: its clock readings `c` and operation times `t`.
    fn push_iteration(&mut self, c: &IterClock, t: &OpTimes) {
        self.fwd_s.push(c.fwd_end - c.t0);
        self.bwd_s.push(c.bwd_end - c.fwd_end);
        self.pack_s.push(t.pack_s);
        self.compress_s.push(t.compress_s);
        self.comm_s.push(t.comm_s);
        self.decompress_s.push(t.decompress_s);
        self.exposed_s.push((c.t_end - c.bwd_end).max(0.0));
        self.bwd_sync_s.push(c.t_end - c.fwd_end);
        self.iter_s.push(c.t_end - c.t0);
        self.last_bucket_s.push(c.t_end - c.last_start);
        self.host_compress_s.push(t.host_compress_s);
        self.host_decompress_s.push(t.host_decompress_s);
    }
}

/// The iterations of [`run`], on the device thread's clock.
struct Iterations<'a> {
    world: &'a World,
    s: &'a E2eSetup<'a>,
    device: &'a Device,
    grads: &'a [ndarray::Array2<f32>],
    bwd_order: &'a [usize],
    timing: &'a crate::measure::stats::Timing,
    warmup: u64,
}

impl Iterations<'_> {
    /// `warmup` iterations, then timed ones (traced, recorded in `out`) until every rank
    /// has enough (the stopping rule sees emulated seconds: --min-time, --max-time).
    fn run(
        &self,
        ex: &mut Executor,
        mut trace: Option<&mut trace::Trace>,
        out: &mut Timed,
    ) -> Result<()> {
        let (world, dil) = (self.world, self.world.dilation());
        let mut timed = crate::measure::stats::Running::default();
        for it in 0.. {
            // Only timed iterations are traced.
            let mut trace = if it >= self.warmup {
                trace.as_deref_mut()
            } else {
                None
            };
            world.sync_or_stop()?;
            let (c, t) = self.iteration(ex, it, trace.as_deref_mut())?;
            if let Some(tr) = trace {
                tr.iteration(self.device, c.t0, c.fwd_end, c.t_end, self.bwd_order);
            }
            if it >= self.warmup {
                out.wire_total += t.wire_bytes;
                out.series.push_iteration(&c, &t);
                if self.s.compute != ComputeMode::None {
                    out.drift.push(device::compute_drift(
                        c.fwd_end - c.t0,
                        c.fwd_model,
                        c.bwd_end - c.fwd_end,
                        c.bwd_model,
                    ));
                }
                timed.push(dil.emulated_s(c.t_end - c.t0));
                // Stop once every rank has enough (outside the timed region).
                if world.max_u64(u64::from(!self.timing.enough(&timed))) == 0 {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Iteration `it`: start the device's iteration, run the executor's operations with
    /// the device's clock and waits, and read the clock.
    fn iteration(
        &self,
        ex: &mut Executor,
        it: u64,
        trace: Option<&mut trace::Trace>,
    ) -> Result<(IterClock, OpTimes)> {
        let device = self.device;
        let now = || device.now_s();
        let t0 = device.now_s();
        device.start_iteration();
        let mut last_start = t0;
        let mut wait = |ready: usize| {
            device.wait_ready(ready);
            last_start = device.now_s();
        };
        let mut t = OpTimes::default();
        let mut hooks = Hooks {
            now: &now,
            wait: &mut wait,
            trace,
            device: match self.s.compress_on {
                crate::devcost::CompressOn::Device => Some(device),
                crate::devcost::CompressOn::Host => None,
            },
        };
        ex.iteration(self.world, it, self.grads, None, &mut hooks, &mut t)?;
        let t_end = device.now_s();
        let (fwd_end, bwd_end, fwd_model, bwd_model) = {
            let st = device.lock();
            (st.fwd_end_s, st.bwd_end_s, st.fwd_model_s, st.bwd_model_s)
        };
        let c = IterClock {
            t0,
            fwd_end,
            bwd_end,
            t_end,
            last_start,
            fwd_model,
            bwd_model,
        };
        Ok((c, t))
    }
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
    /// Planner fusions: the choice the buckets come from.
    pub(crate) choice: Option<planner::Choice>,
}

/// Build the [`Layout`] of case `s` on this rank (planner fusions calibrate with
/// collectives: every rank must call it). `grads`: the gradients the case will run on,
/// which a calibration reads as the iterations do (from memory, in backward order);
/// `None` generates one at a time.
pub(crate) fn layout(
    world: &World,
    s: &E2eSetup,
    grads: Option<&[ndarray::Array2<f32>]>,
) -> Result<Layout> {
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
    let mut choice = None;
    let (phase_groups, planned_s) = match s.fusion {
        Fusion::Planner(kind) => {
            let c = match s.planned {
                // The case's plan, chosen by its first run: no calibration, no planning.
                Some(c) => {
                    planner::check_groups(&c.groups, m).map_err(|e| {
                        Error::Runtime(format!("e2e: the case's earlier plan: {e}"))
                    })?;
                    c.clone()
                }
                None => {
                    // Calibrate on a fresh compressor: the timed one must start without
                    // the calibration gradients in its residuals, momenta or warm-start
                    // factors.
                    let mut probe = registry::build(s.method, s.params, ctx)?;
                    for (t, ts) in s.tensors.iter().enumerate() {
                        probe.register(t, ts.rows, ts.cols)?;
                    }
                    calibrate::plan_with_costs(
                        world,
                        s,
                        grads,
                        probe.as_mut(),
                        kind,
                        &bwd_order,
                        &bwd_times,
                    )?
                }
            };
            plan_source = Some(plan_source_of(kind, &c));
            let out = (vec![c.groups.clone()], Some(c.predicted_s));
            choice = Some(c);
            out
        }
        f => (
            plan::phase_buckets(&registry::fusion_sizing(s.method, s.params, &shapes), f),
            None,
        ),
    };
    let plans: Vec<Vec<Bucket>> = phase_groups
        .iter()
        .map(|g| crate::schedule::buckets(g, m, s.merge))
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
        for (bi, b) in plans[0].iter().enumerate() {
            let n: usize = b.tensors.iter().map(|&t| s.tensors[t].numel()).sum();
            comp.register(bi, 1, n)?;
            pack_len = pack_len.max(n);
        }
    }
    Ok(Layout {
        comp,
        plans,
        pack_len,
        planned_s,
        plan_source,
        choice,
    })
}

#[cfg(test)]
mod adaptive_wire_tests {
    use super::*;
    use crate::comm::exchange::CollectiveMode;
    use crate::comm::loopback;
    use crate::measure::stats::Timing;

    /// S-SGD on 2 loopback ranks sends every gradient once per step, 4 bytes per element
    /// (d = 8 x 16 + 8 = 136: 544 bytes), however many timed iterations the adaptive rule
    /// ran: here 5 (stopped at `max_iters`, `min_time_s` never met) and 2 (stopped at
    /// `min_iters`, nothing else asked). The per-step mean divides the bytes of the
    /// iterations that ran, neither the configured minimum nor the maximum.
    #[test]
    fn wire_bytes_per_step_divide_by_the_iterations_that_ran() {
        let tensors = vec![
            TensorSpec {
                name: "w".into(),
                rows: 8,
                cols: 16,
            },
            TensorSpec {
                name: "b".into(),
                rows: 8,
                cols: 1,
            },
        ];
        let bwd_s = vec![0.0; tensors.len()];
        let params = MethodParams::default();
        let to_max = Timing {
            min_iters: 2,
            min_time_s: 1e9,
            target_rel_ci: f64::INFINITY,
            max_iters: 5,
            max_time_s: f64::INFINITY,
        };
        let to_min = Timing {
            min_iters: 2,
            min_time_s: 0.0,
            target_rel_ci: f64::INFINITY,
            max_iters: 50,
            max_time_s: f64::INFINITY,
        };
        for (timing, ran) in [(to_max, 5usize), (to_min, 2)] {
            let runs = loopback::run(2, |world| {
                let setup = E2eSetup {
                    tensors: &tensors,
                    bwd_s: &bwd_s,
                    fwd_s: 0.0,
                    method: "ssgd",
                    params: &params,
                    seed: 1,
                    fusion: Fusion::parse("none").unwrap(),
                    pipelining: false,
                    collective: CollectiveMode::Native,
                    compute: ComputeMode::None,
                    merge: false,
                    cost_comm: None,
                    planner_costs: None,
                    compress_on: crate::devcost::CompressOn::Host,
                    device_costs: None,
                    planned: None,
                };
                run(&world, &setup, timing, 1, None).unwrap()
            });
            for r in &runs {
                assert_eq!(r.series.iter_s.len(), ran);
                assert_eq!(r.wire_bytes, 4 * 136, "{ran} iterations");
            }
        }
    }
}
