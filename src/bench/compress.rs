//! `micro-compress` (each method's kernels on one rank) and `micro` (one tensor through
//! compress -> exchange -> decompress under MPI). Measurement only: raw per-iteration
//! phase times (max over ranks, and this rank's own), wire bytes and check outcomes.

use super::step::{one_step, setup};
use crate::comm::exchange::{received_alone, Exchange};
use crate::comm::World;
use crate::compress::check::flat;
use crate::compress::{registry, Aggregation, Compressor, MethodParams, Wire, WireLen, WorkerCtx};
use crate::error::{Error, Result};
use crate::measure::shape::Shape;
use crate::measure::stats::mean_bytes_per_step;
use crate::measure::tensors::{gradient, rel_error, rel_from_parts, sq_error_parts, GRADIENT_SETS};
use crate::record::samples::RankSeries;
use ndarray::{Array2, ArrayView2};

/// Per-iteration phase times (s), each the max over ranks, summed over rounds.
#[derive(Default)]
pub struct PhaseTimes {
    pub compress_s: Vec<f64>,
    pub feedback_s: Vec<f64>,
    pub comm_s: Vec<f64>,
    pub decompress_s: Vec<f64>,
    pub total_s: Vec<f64>,
}

impl PhaseTimes {
    fn with_capacity(n: usize) -> PhaseTimes {
        PhaseTimes {
            compress_s: Vec::with_capacity(n),
            feedback_s: Vec::with_capacity(n),
            comm_s: Vec::with_capacity(n),
            decompress_s: Vec::with_capacity(n),
            total_s: Vec::with_capacity(n),
        }
    }

    /// Record one timed step (the comm phase is 0 for micro-compress).
    fn push(&mut self, compress_s: f64, feedback_s: f64, comm_s: f64, decompress_s: f64) {
        self.compress_s.push(compress_s);
        self.feedback_s.push(feedback_s);
        self.comm_s.push(comm_s);
        self.decompress_s.push(decompress_s);
        self.total_s
            .push(compress_s + feedback_s + comm_s + decompress_s);
    }

    /// Reduce every series to its per-iteration max over ranks; returns this rank's own
    /// series from before (samples.csv; `comm_s` only for `micro`, `with_comm`).
    fn reduce_max(&mut self, world: &World, with_comm: bool) -> RankSeries {
        let mut local = RankSeries::default();
        local.push("compress_s", &self.compress_s);
        local.push("feedback_s", &self.feedback_s);
        if with_comm {
            local.push("comm_s", &self.comm_s);
        }
        local.push("decompress_s", &self.decompress_s);
        local.push("total_s", &self.total_s);
        for v in [
            &mut self.compress_s,
            &mut self.feedback_s,
            &mut self.comm_s,
            &mut self.decompress_s,
            &mut self.total_s,
        ] {
            world.max_in_place(v);
        }
        local
    }
}

/// Result of one micro-compress or micro case.
pub struct CompressMeasurement {
    /// The collective that carried the tensor ([`tensor_aggregation`]).
    pub aggregation: &'static str,
    pub rounds: usize,
    pub times: PhaseTimes,
    /// Wire bytes this rank sent per timed step (mean over the steps, max over ranks).
    pub wire_bytes: u64,
    /// micro-compress: ||decompress(compress(g)) - g|| / ||g|| at step 0, single worker.
    pub rel_error: f64,
    /// micro with --check: "pass" or "fail: ..." (agreed across ranks).
    pub check: Option<std::result::Result<(), String>>,
    /// This rank's own per-iteration phase times (samples.csv).
    pub local: RankSeries,
}

/// The collective that carries tensor `t`: the method's own, except `allreduce` when
/// the method sends this tensor dense in `sum_f32` alone (DGC on a 1-D tensor, as its
/// reference does; docs/methods.md, dgc).
pub fn tensor_aggregation(comp: &dyn Compressor, t: usize) -> Aggregation {
    let cap = (0..comp.rounds())
        .map(|r| comp.wire_capacity(t, r))
        .fold(WireLen::default(), WireLen::max);
    if cap.sum_f32 > 0 && cap.gather_u32 == 0 && cap.ring_u32 == 0 {
        Aggregation::AllReduce
    } else {
        comp.aggregation()
    }
}

/// Rank 0 says on stderr when the method does not compress this tensor at all (the
/// row's `aggregation` then reads `allreduce`).
fn note_dense(world: &World, comp: &dyn Compressor, method: &str, shape: Shape) {
    if world.is_root() && tensor_aggregation(comp, 0) != comp.aggregation() {
        let what = if shape.rows == 1 {
            format!("1-D tensor of {} elements", shape.cols)
        } else {
            format!("{shape} tensor")
        };
        eprintln!(
            "gradcomp: note: {method} sends the {what} dense (all-reduce, {} bytes per worker; aggregation = allreduce in the row), as the reference DGC does: it compresses only tensors of two or more dimensions, and nothing at density 1 (docs/methods.md, dgc)",
            4 * shape.numel()
        );
    }
}

/// Every round of tensor `t` through compress, feedback and decompress on this rank alone
/// (a one-worker exchange), each phase timed: `(compress_s, feedback_s, decompress_s,
/// wire bytes)` summed over the rounds.
fn time_kernels(
    world: &World,
    comp: &mut dyn Compressor,
    t: usize,
    g: ArrayView2<f32>,
    wire: &mut Wire,
    counts: &mut [usize],
    mut out: ndarray::ArrayViewMut2<f32>,
) -> Result<(f64, f64, f64, u64)> {
    let (mut tc, mut tf, mut td, mut bytes) = (0.0, 0.0, 0.0, 0u64);
    for round in 0..comp.rounds() {
        let t0 = world.time();
        comp.compress(t, round, g, wire)?;
        let t1 = world.time();
        comp.feedback(t, round)?;
        let t2 = world.time();
        counts[0] = wire.gather_u32.len();
        comp.decompress(t, round, &received_alone(wire, counts), out.view_mut())?;
        let t3 = world.time();
        tc += t1 - t0;
        tf += t2 - t1;
        td += t3 - t2;
        bytes += wire.bytes() as u64;
    }
    Ok((tc, tf, td, bytes))
}

/// micro-compress: every rank runs the kernels alone (a one-worker exchange).
pub fn measure_kernels(
    world: &World,
    method: &str,
    shape: Shape,
    params: &MethodParams,
    seed: u64,
    iters: u64,
    warmup: u64,
) -> Result<CompressMeasurement> {
    let mut s = setup(world, method, shape, params, seed, 1)?;
    note_dense(world, s.comp.as_ref(), method, shape);
    let mut times = PhaseTimes::with_capacity(iters as usize);
    let mut wire_total = 0u64;
    let mut rel = f64::NAN;
    for step in 0..warmup + iters {
        let g = s.grads[step as usize % GRADIENT_SETS].view();
        s.comp.begin_step(step);
        world.sync_or_stop()?;
        let (tc, tf, td, step_bytes) = time_kernels(
            world,
            s.comp.as_mut(),
            0,
            g,
            &mut s.wire,
            &mut s.counts,
            s.out.view_mut(),
        )?;
        if step == 0 {
            rel = rel_error(flat(&s.out.view())?, flat(&g)?);
        }
        if step >= warmup {
            wire_total += step_bytes;
            times.push(tc, tf, 0.0, td);
        }
    }
    let local = times.reduce_max(world, false);
    Ok(CompressMeasurement {
        aggregation: tensor_aggregation(s.comp.as_ref(), 0).name(),
        rounds: s.comp.rounds(),
        times,
        wire_bytes: world.max_u64(mean_bytes_per_step(wire_total, iters)),
        rel_error: rel,
        check: None,
        local,
    })
}

/// micro-compress over a zoo model: per step every layer's compress, feedback and
/// decompress in backward order (as one e2e iteration compresses them, on gradients
/// that are not in the cache from the previous call), each phase summed over the
/// layers; every rank alone. `rel_error` is over the whole gradient at step 0.
pub fn measure_model_kernels(
    world: &World,
    method: &str,
    model: &crate::models::Model,
    params: &MethodParams,
    seed: u64,
    iters: u64,
    warmup: u64,
) -> Result<CompressMeasurement> {
    let ctx = WorkerCtx {
        rank: world.rank,
        world_size: 1,
        seed,
    };
    let tensors = crate::engine::TensorSpec::of_model(model);
    let mut comp = registry::build(method, params, ctx)?;
    let mut cap = WireLen::default();
    for (t, ts) in tensors.iter().enumerate() {
        comp.register(t, ts.rows, ts.cols)?;
        for r in 0..comp.rounds() {
            cap = cap.max(comp.wire_capacity(t, r));
        }
    }
    let mut wire = Wire::with_touched_capacity(cap);
    // One gradient per layer, seeded per layer as the e2e engine does.
    let grads: Vec<Array2<f32>> = tensors
        .iter()
        .enumerate()
        .map(|(t, ts)| {
            gradient(
                Shape {
                    rows: ts.rows,
                    cols: ts.cols,
                },
                seed ^ t as u64,
                0,
                world.rank,
            )
        })
        .collect();
    let max_numel = tensors.iter().map(|t| t.numel()).max().unwrap_or(0);
    let mut out = vec![0f32; max_numel];
    let mut counts = vec![0usize; 1];
    let mut times = PhaseTimes::with_capacity(iters as usize);
    let mut wire_total = 0u64;
    let (mut err_num, mut err_den) = (0f64, 0f64);
    for step in 0..warmup + iters {
        comp.begin_step(step);
        let (mut tc, mut tf, mut td) = (0.0, 0.0, 0.0);
        let mut step_bytes = 0u64;
        world.sync_or_stop()?;
        for t in (0..tensors.len()).rev() {
            let (rows, cols) = (tensors[t].rows, tensors[t].cols);
            let g = grads[t].view();
            let view = ndarray::ArrayViewMut2::from_shape((rows, cols), &mut out[..rows * cols])
                .map_err(|e| Error::Runtime(e.to_string()))?;
            let (c, f, d, b) =
                time_kernels(world, comp.as_mut(), t, g, &mut wire, &mut counts, view)?;
            tc += c;
            tf += f;
            td += d;
            step_bytes += b;
            if step == 0 {
                let (n, d) = sq_error_parts(&out[..rows * cols], flat(&g)?);
                err_num += n;
                err_den += d;
            }
        }
        if step >= warmup {
            wire_total += step_bytes;
            times.push(tc, tf, 0.0, td);
        }
    }
    let local = times.reduce_max(world, false);
    Ok(CompressMeasurement {
        aggregation: comp.aggregation().name(),
        rounds: comp.rounds(),
        times,
        wire_bytes: world.max_u64(mean_bytes_per_step(wire_total, iters)),
        rel_error: rel_from_parts(err_num, err_den),
        check: None,
        local,
    })
}

/// micro: compress, exchange over MPI, decompress; each phase timed, max over ranks.
#[allow(clippy::too_many_arguments)] // the fields of one `[[micro]]` case, as the config names them
pub fn measure_collective(
    world: &World,
    method: &str,
    shape: Shape,
    params: &MethodParams,
    seed: u64,
    iters: u64,
    warmup: u64,
    check: bool,
    inject_fault: Option<(usize, super::Fault)>,
) -> Result<CompressMeasurement> {
    let check = if check {
        Some(super::check::check_method(
            world,
            method,
            shape,
            params,
            seed,
            inject_fault.filter(|f| f.0 == world.rank).map(|f| f.1),
        )?)
    } else {
        None
    };
    let mut s = setup(world, method, shape, params, seed, world.size)?;
    note_dense(world, s.comp.as_ref(), method, shape);
    let cap = (0..s.comp.rounds())
        .map(|r| s.comp.wire_capacity(0, r))
        .fold(WireLen::default(), WireLen::max);
    let mut ex = Exchange::new(world, cap)?;
    let mut times = PhaseTimes::with_capacity(iters as usize);
    let mut wire_total = 0u64;
    for step in 0..warmup + iters {
        let g = s.grads[step as usize % GRADIENT_SETS].view();
        let (tc, tf, tx, td, bytes) = one_step(
            world,
            s.comp.as_mut(),
            &mut s.wire,
            &mut ex,
            g,
            &mut s.out,
            step,
        )?;
        if step >= warmup {
            wire_total += bytes;
            times.push(tc, tf, tx, td);
        }
    }
    let local = times.reduce_max(world, true);
    Ok(CompressMeasurement {
        aggregation: tensor_aggregation(s.comp.as_ref(), 0).name(),
        rounds: s.comp.rounds(),
        times,
        wire_bytes: world.max_u64(mean_bytes_per_step(wire_total, iters)),
        rel_error: f64::NAN,
        check,
        local,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::loopback;
    use crate::compress::registry;

    /// Collectives one step of `method` really issues at `n` loopback ranks for a 64x48
    /// tensor (the ones rank 0 enters in a second step minus those of the first, less
    /// the step's stop-flag agreement, measured apart).
    fn issued_per_step(method: &str, n: usize) -> usize {
        let run = |steps: u64| {
            loopback::run_counted(n, |world| {
                let shape = Shape { rows: 64, cols: 48 };
                let mut s = setup(&world, method, shape, &MethodParams::default(), 7, n).unwrap();
                let cap = (0..s.comp.rounds())
                    .map(|r| s.comp.wire_capacity(0, r))
                    .fold(WireLen::default(), WireLen::max);
                let mut ex = Exchange::new(&world, cap).unwrap();
                for step in 0..steps {
                    let g = s.grads[0].clone();
                    one_step(
                        &world,
                        s.comp.as_mut(),
                        &mut s.wire,
                        &mut ex,
                        g.view(),
                        &mut s.out,
                        step,
                    )
                    .unwrap();
                }
            })
            .1
        };
        let (_, sync) = loopback::run_counted(n, |world| world.sync_or_stop().unwrap());
        run(2) - run(1) - sync
    }

    /// The collectives each method issues per step, counted as they run (not from the
    /// plan the exchange builds): one all-reduce or all-gather per round, DGC's
    /// variable-length pairs a second all-gather of their lengths, Power-SGD's P and Q,
    /// Count Sketch's sketch and its candidates' exact values, Marsit's ring 2(n - 1)
    /// point-to-point steps (reduce-scatter, then all-gather).
    #[test]
    fn collectives_issued_per_step_per_method() {
        let n = 4;
        let want = [
            ("ssgd", 1),
            ("signsgd", 1),
            ("signsgd-mv", 1),
            ("topk", 1),
            ("dgc", 2),
            ("powersgd", 2),
            ("acpsgd", 1),
            ("marsit", 2 * (n - 1)),
            ("sketch", 2),
            ("qsgd", 1),
            ("randomk", 1),
        ];
        assert_eq!(want.len(), registry::METHODS.len(), "every method listed");
        for (m, k) in want {
            assert_eq!(issued_per_step(m, n), k, "{m}: collectives issued per step");
        }
    }
}
